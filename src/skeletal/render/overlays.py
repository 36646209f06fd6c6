"""Overlay data, computed on the CPU: skeleton segments and the weight heat of one joint.

* Skeleton: one segment from each joint to its nearest ancestor that is also a joint, placed with
  the CPU world matrices (the same ones the palettes come from), drawn on top of everything.
* Heat: per vertex, the total weight with which a chosen joint pulls it (0..1), shown blue (0) to red (1).
"""

from __future__ import annotations

import difflib

import numpy as np

from .errors import RenderError


def joint_nodes(asset) -> np.ndarray:
    """Rig indices of every skin joint (sorted); every node when there are no skins. Only nodes of
    the scene shown (``asset.scene_nodes``) are kept."""
    if asset.skins:
        joints = np.unique(np.concatenate([b.joints for b in asset.skins]).astype(np.int64))
    else:
        joints = np.arange(len(asset.rig), dtype=np.int64)
    shown = getattr(asset, "scene_nodes", None)
    return joints if shown is None else joints[shown[joints]]


def bone_segments(asset) -> np.ndarray:
    """(S, 2) rig indices (child, parent joint) of the skeleton's bones."""
    joints = joint_nodes(asset)
    is_joint = np.zeros(len(asset.rig), dtype=bool)
    is_joint[joints] = True
    parents = asset.rig.parents
    pairs = []
    for j in joints:
        p = parents[j]
        while p >= 0 and not is_joint[p]:
            p = parents[p]
        if p >= 0:
            pairs.append((j, p))
    return np.asarray(pairs, dtype=np.int64).reshape(-1, 2)


def skeleton_vertices(world: np.ndarray, segments: np.ndarray, joints: np.ndarray, offsets: np.ndarray):
    """Line and point vertices for I instances: world (I, N, 4, 4) row-major, offsets (I, 3).

    Returns ``(lines (I*S*2, 3), points (I*len(joints), 3))`` float32 world positions.
    """
    positions = world[:, :, :3, 3] + np.asarray(offsets, dtype=np.float64)[:, None, :]
    lines = positions[:, segments.reshape(-1)].reshape(-1, 3)
    points = positions[:, joints].reshape(-1, 3)
    return lines.astype(np.float32), points.astype(np.float32)


def resolve_joint(asset, key: str | int) -> int:
    """Rig index of a node given by name or by glTF (file) node index. Names match exactly, then
    ignoring case, then ignoring a ``prefix:`` (``Head`` finds ``mixamorig:Head``)."""
    names = asset.rig.names
    if isinstance(key, (int, np.integer)) or (isinstance(key, str) and key.strip().lstrip("-").isdigit()
                                              and key.strip() not in names):
        index = int(key)
        if not 0 <= index < len(names):
            raise RenderError(f"node index {index} out of range: the model has {len(names)} nodes")
        return int(asset.rig.index_of[index])
    if key in names:
        return names.index(key)
    lowered = [n.lower() for n in names]
    if key.lower() in lowered:
        return lowered.index(key.lower())
    bare = [n.rsplit(":", 1)[-1].lower() for n in names]
    if key.lower() in bare:
        return bare.index(key.lower())
    joint_names = [names[j] for j in joint_nodes(asset)]
    close = difflib.get_close_matches(key, joint_names, n=3, cutoff=0.5)
    hint = f" (did you mean {', '.join(close)}?)" if close else f" (joints: {', '.join(joint_names[:8])}{', ...' if len(joint_names) > 8 else ''})"
    raise RenderError(f"no joint named {key!r}{hint}")


def joint_heat(asset, instance, primitive, joint: int | None) -> np.ndarray:
    """(V,) float32 weight of rig node ``joint`` on each vertex of ``primitive`` (zeros when None).

    Skinned: the sum of the vertex's weights on the skin joints that are that node. Rigid: 1 when the
    mesh hangs on that node, else 0.
    """
    v = primitive.source.vertex_count
    heat = np.zeros(v, np.float32)
    if joint is None:
        return heat
    if instance.skin is not None and primitive.joints is not None:
        local = np.flatnonzero(asset.skins[instance.skin].joints == joint)
        if len(local):
            mask = np.isin(primitive.joints, local)
            heat = np.where(mask, primitive.weights, 0.0).sum(axis=1).astype(np.float32)
    elif asset.rig.index_of[instance.node] == joint:
        heat[:] = 1.0
    return np.clip(heat, 0.0, 1.0)
