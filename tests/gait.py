"""Gait measures of a clip on a rig, for the retargeting tests (and the numbers in the README).

Both worlds are Y up with the ground at y = 0. For each foot joint (canonical ``left_foot`` /
``right_foot``): its height over time, the contact phases (runs of frames where the foot is within
``contact_band`` x hip height of its lowest point), the **contact height** (mean over phases of the
minimum height in the phase), the **stride** (the range of the foot's horizontal offset from the hips
along its main direction of motion: how far a step reaches, in place or travelling) and the **foot
travel** (horizontal path length); plus the **root travel** (horizontal hips displacement, start to end) and the **support ankle** height
(median over the frames of the lower ankle's height).
"""

from __future__ import annotations

import numpy as np

from skeletal.anim.clip import Clip
from skeletal.anim.pose import world_matrices
from skeletal.tools.retarget import canonical_names, hip_height
from skeletal.anim.rig import Rig
from skeletal.anim.sampling import sample


def gait(rig: Rig, clip: Clip, fps: float = 60.0, contact_band: float = 0.05) -> dict[str, float]:
    times = np.arange(int(clip.duration * fps) + 1) / fps
    clip = Clip(clip.name, [t for t in clip.tracks if t.path != "weights"])
    pose, _ = sample(clip, times, rig.rest, np.zeros(len(rig) + 1, np.int64), np.zeros(0))
    pos = world_matrices(rig.parents, pose)[..., :3, 3]  # (T, N, 3)
    names = canonical_names(rig)
    leg = hip_height(rig)
    hips = pos[:, names["hips"]]
    ankles = pos[:, [names["left_foot"], names["right_foot"]], 1]
    out = {"hip_height": leg, "support_ankle": float(np.median(ankles.min(axis=1))), "root_travel": float(np.linalg.norm((hips[-1] - hips[0])[[0, 2]]))}
    for side in ("left", "right"):
        foot = pos[:, names[f"{side}_foot"]]
        y = foot[:, 1]
        low = y <= y.min() + contact_band * leg
        edges = np.flatnonzero(np.diff(np.concatenate([[0], low.astype(int), [0]])))
        phases = [y[a:b].min() for a, b in zip(edges[::2], edges[1::2])]
        rel = (foot - hips)[:, [0, 2]]
        rel = rel - rel.mean(axis=0)
        axis = np.linalg.svd(rel, full_matrices=False)[2][0]
        proj = rel @ axis
        out[f"{side}_contact_height"] = float(np.mean(phases))
        out[f"{side}_contacts"] = len(phases)
        out[f"{side}_stride"] = float(proj.max() - proj.min())
        out[f"{side}_travel"] = float(np.linalg.norm(np.diff(foot[:, [0, 2]], axis=0), axis=1).sum())
    return out


def compare(source: dict[str, float], target: dict[str, float]) -> dict[str, float]:
    """Relative error of each length measure of ``target`` against ``source`` scaled by the hip-height
    ratio (0.05 = 5 %)."""
    ratio = target["hip_height"] / source["hip_height"]
    keys = [k for k in source if k.endswith(("contact_height", "stride", "travel"))]
    return {k: abs(target[k] - ratio * source[k]) / max(abs(ratio * source[k]), 1e-12) for k in keys}
