"""Retargeting: a clip made for one rig (the source) -> a clip that plays the same motion on another
rig (the target), e.g. a CMU BVH walk on a Mixamo glTF character.

Clip in, clip out (the level of :mod:`skeletal.cliptools`); it uses only the rig, pose and quaternion
stages. The method, per source key time, all frames at once (arrays are (T, N, ...)):

1. **Bone mapping by name** (:func:`bone_mapping`). Names are normalised (namespace prefixes such as
   ``mixamorig:`` dropped, case folded, ``_ - . :`` and spaces removed) and looked up in per-convention
   alias tables that lead to one humanoid vocabulary (:data:`CANONICAL`): Mixamo, CMU BVH, the built-in
   demo character, Unity/Unreal-style names. A user ``mapping`` (source name -> target name, or
   -> None to drop a pair) overrides the automatic pairs.
2. **Rest alignment** (:func:`rest_alignment`). Each rig's rest world rotations and positions come from
   its rest pose. For every mapped target joint a world rotation ``A`` is found that turns the
   target's rest pose into the source's: at the hips the whole body frame (up = hips -> neck, side =
   right -> left upper leg), so a character facing -Z follows a source facing +Z; for every other bone
   the shortest rotation taking its rest direction (towards its first mapped descendant) onto the
   source bone's rest direction, so a T-pose source drives an A-pose target; a joint with no mapped
   descendant (hand, head, toes) takes its mapped parent's alignment.
3. **Rotations**: the target bone's world orientation changes from its aligned rest exactly as the
   source bone's does from its rest::

       W_t(t) = W_s(t) * W_s_rest^-1 * A * W_t_rest           (world rotations, xyzw, Hamilton)

   and the local rotation is ``conj(W_t(t)[parent]) * W_t(t)``, with the parent's *retargeted* world
   rotation (one parent-first pass over the target rig, time axis batched). Unmapped target joints
   keep their rest local rotation.
4. **Root translation**, scaled by the leg ratio ``r = target hip height / source hip height``
   (:func:`hip_height`: hip joints above the ankles with straight legs). Horizontally the target's hip
   joints (the midpoint of the upper legs, not the hips node, so that pelvises of other shapes do not
   shift the feet) follow the source's times ``r``. Vertically the hips are placed so that the target's
   lower ankle is as high as the source's lower ankle, scaled, above the standing ankle heights ``a``
   (:func:`standing_ankle_height`): ``y_t = a_t + r * (y_s - a_s)``. A planted foot thus stays on the
   ground even when thigh/shin proportions or ankle heights differ (the pose itself is not changed:
   no IK). Both worlds are Y up with the ground at y = 0 (glTF's convention; CMU BVH data has it too);
   for a source whose rest pose does not stand on the ground (BVH), ``a_s`` is the median over the
   clip of the lower ankle's height (the supporting foot's typical height).
5. **Up axis of the source** (:func:`detect_up`). Mocap recorded Z up (MotionBuilder/Vicon exports:
   the root turned about X by about -90 degrees, height in the Z channel) would retarget lying down. The
   source's up axis is found from its motion (and its rest skeleton when the motion says nothing): the
   mean over the clip of the spine direction (hips -> neck/head) plus the legs' direction (the lower
   foot -> hips: the feet touch down at the bottom), snapped to the nearest of +-X, +-Y, +-Z. When it is
   not +Y, the source's root tracks are turned by the smallest rotation taking that axis to +Y before
   steps 2-4, so the target stands up and its feet stay on the ground; the rest pose's roots are turned
   by its own up axis (the same measure on the rest skeleton), since exports often keep a Y-up rest
   skeleton under Z-up motion. ``up=`` ("x", "-x", "y", "-y", "z", "-z") gives the motion's axis instead.

The result is a plain :class:`~skeletal.clip.Clip` of LINEAR tracks (rotation for every mapped target
joint, translation for the target hips) keyed at the source clip's key times (30 fps for a source with
CUBICSPLINE tracks; STEP tracks for a source made only of STEP tracks) or at ``fps``: it plays,
blends, and exports like any other clip.

>>> import skeletal
>>> from skeletal.demo import demo_asset
>>> demo = demo_asset()
>>> clip = retarget(demo.clip("walk"), demo.rig, demo.rig)     # a rig onto itself: the same motion
>>> sorted(bone_mapping(demo.rig, demo.rig).items())[:2]  # rig index pairs
[(1, 1), (2, 2)]
"""

from __future__ import annotations

import dataclasses
import re
from typing import Mapping

import numpy as np

from ..anim.clip import Clip, Track
from ..errors import ClipError
from ..anim.pose import world_matrices
from ..quat import matrix_to_quat, quat_conjugate, quat_mul, quat_to_matrix
from ..anim.rig import Rig
from ..anim.sampling import sample

__all__ = [
    "CANONICAL", "normalize_name", "canonical_names", "bone_mapping", "rest_world", "rest_alignment",
    "hip_height", "standing_ankle_height", "world_rotations", "retarget", "detect_up", "UP_AXES",
]

#: The up axes ``retarget(up=...)`` accepts (the source's up axis), as unit vectors.
UP_AXES: dict[str, tuple[float, float, float]] = {
    "x": (1.0, 0.0, 0.0), "-x": (-1.0, 0.0, 0.0), "y": (0.0, 1.0, 0.0), "-y": (0.0, -1.0, 0.0),
    "z": (0.0, 0.0, 1.0), "-z": (0.0, 0.0, -1.0),
}

#: The humanoid vocabulary every convention maps into (parents before children).
CANONICAL: tuple[str, ...] = (
    "hips", "spine", "chest", "upper_chest", "neck", "head",
    *(f"{side}_{part}" for side in ("left", "right") for part in (
        "shoulder", "upper_arm", "forearm", "hand", "upper_leg", "lower_leg", "foot", "toes")),
)

_SIDED = {  # normalised body-part spelling (without left/right) -> canonical part
    "shoulder": "shoulder", "clavicle": "shoulder",
    "arm": "upper_arm", "upperarm": "upper_arm",
    "forearm": "forearm", "lowerarm": "forearm",
    "hand": "hand",
    "upleg": "upper_leg", "upperleg": "upper_leg", "thigh": "upper_leg",
    "leg": "lower_leg", "lowerleg": "lower_leg", "shin": "lower_leg", "calf": "lower_leg",
    "foot": "foot",
    "toebase": "toes", "toe": "toes", "toes": "toes", "ball": "toes",
}
#: Centre-line names shared by Mixamo, the demo character and Unity/Unreal-style rigs.
_CENTRE = {
    "hips": "hips", "pelvis": "hips",
    "spine": "spine", "spine01": "spine",
    "spine1": "chest", "chest": "chest", "spine02": "chest",
    "spine2": "upper_chest", "upperchest": "upper_chest", "spine03": "upper_chest",
    "neck": "neck", "neck01": "neck",
    "head": "head",
}
#: CMU BVH (recognised by its ``LowerBack`` joint) numbers its spine one lower than Mixamo.
_CENTRE_CMU = {"hips": "hips", "lowerback": "spine", "spine": "chest", "spine1": "upper_chest",
               "neck": "neck", "head": "head"}


def normalize_name(name: str) -> str:
    """A joint name reduced for matching: the part after the last ``:`` (``mixamorig:``, ``Armature|``
    namespaces), a three.js-style ``mixamorig`` prefix dropped, lower case, no ``_ - . |`` or spaces.

    >>> normalize_name("mixamorig:LeftUpLeg"), normalize_name("left_upper_arm"), normalize_name("spine_01")
    ('leftupleg', 'leftupperarm', 'spine01')
    """
    name = re.split(r"[:|]", name)[-1].lower()
    name = re.sub(r"[\s_.\-]", "", name)
    return re.sub(r"^mixamorig\d*", "", name)


def _canonical(normalized: str, centre: Mapping[str, str]) -> str | None:
    if normalized in centre:
        return centre[normalized]
    for prefix, side in (("left", "left"), ("right", "right")):
        if normalized.startswith(prefix) and normalized[len(prefix):] in _SIDED:
            return f"{side}_{_SIDED[normalized[len(prefix):]]}"
    m = re.fullmatch(r"([a-z]+?)(l|r)", normalized)  # Unreal style: thigh_l, upperarm_r
    if m and m.group(1) in _SIDED:
        return f"{'left' if m.group(2) == 'l' else 'right'}_{_SIDED[m.group(1)]}"
    return None


def canonical_names(rig: Rig) -> dict[str, int]:
    """Canonical humanoid name -> rig index, for the joints of ``rig`` that the conventions know (the
    first node wins when two normalise to the same canonical name).

    >>> from skeletal.demo import demo_asset
    >>> canonical_names(demo_asset().rig)["left_upper_leg"] == demo_asset().rig.find("left_thigh")
    True
    """
    normalized = [normalize_name(n) for n in rig.names]
    centre = _CENTRE_CMU if "lowerback" in normalized else _CENTRE
    found: dict[str, int] = {}
    for i, n in enumerate(normalized):
        c = _canonical(n, centre)
        if c is not None and c not in found:
            found[c] = i
    return found


def bone_mapping(source_rig: Rig, target_rig: Rig, mapping: Mapping[str, str | None] | None = None) -> dict[int, int]:
    """Target rig index -> source rig index for every retargeted joint.

    Automatic pairs join joints with the same canonical name; ``mapping`` (source joint name -> target
    joint name, or None to leave that source joint out) replaces any automatic pair that involves either
    name. Raises :class:`skeletal.ClipError` for a name that is not in its rig.
    """
    src, tgt = canonical_names(source_rig), canonical_names(target_rig)
    pairs = {tgt[c]: src[c] for c in CANONICAL if c in src and c in tgt}
    for s_name, t_name in (mapping or {}).items():
        s = _find(source_rig, s_name, "source")
        pairs = {t: s2 for t, s2 in pairs.items() if s2 != s}
        if t_name is not None:
            t = _find(target_rig, t_name, "target")
            pairs[t] = s
    return dict(sorted(pairs.items()))


def _find(rig: Rig, name: str, which: str) -> int:
    try:
        return rig.find(name)
    except KeyError:
        raise ClipError(f"retarget mapping: the {which} rig has no joint named {name!r}") from None


# ---------------------------------------------------------------------------------------------
# rest pose geometry


def world_rotations(parents: np.ndarray, local: np.ndarray) -> np.ndarray:
    """World rotations (..., N, 4) xyzw from local ones (..., N, 4) in one parent-first pass, the
    leading (time) axes batched. Scales are ignored: exact for rigs whose scales are uniform."""
    world = np.empty(local.shape, dtype=np.float64)
    for i, p in enumerate(np.asarray(parents).tolist()):
        world[..., i, :] = local[..., i, :] if p < 0 else quat_mul(world[..., p, :], local[..., i, :])
    return world


def rest_world(rig: Rig) -> tuple[np.ndarray, np.ndarray]:
    """The rest pose in world space: rotations (N, 4) xyzw and positions (N, 3)."""
    positions = world_matrices(rig.parents, rig.rest)[:, :3, 3]
    return world_rotations(rig.parents, rig.rest[:, 3:7]), positions


def _feet(rig: Rig) -> tuple[int, list[int], list[int]]:
    """(hips, ankles, ankles + toes) rig indices; ClipError when the rig has no hips or feet."""
    names = canonical_names(rig)
    if "hips" not in names:
        raise ClipError("retarget: no hips joint found (name it, e.g. 'Hips', or pass a mapping)")
    ankles = [names[c] for c in ("left_foot", "right_foot") if c in names]
    if not ankles:
        raise ClipError("retarget: no foot joints found (e.g. 'LeftFoot') to measure the legs")
    toes = [names[c] for c in ("left_toes", "right_toes") if c in names]
    return names["hips"], ankles, ankles + toes


def _hip_joints(rig: Rig) -> list[int]:
    """The upper-leg joints (the hip joints proper), or the hips when the rig has none."""
    names = canonical_names(rig)
    legs = [names[c] for c in ("left_upper_leg", "right_upper_leg") if c in names]
    return legs or [_feet(rig)[0]]


def hip_height(rig: Rig) -> float:
    """Leg length: how high the hip joints (upper legs) stand above the ankles with straight legs, from
    the rest pose (the rig's units): upper plus lower leg bone length, averaged over both legs; it does
    not depend on how bent or splayed the rest pose's legs are. The ratio of two rigs' hip heights
    scales the root translation."""
    names = canonical_names(rig)
    hips, ankles, _ = _feet(rig)
    _, pos = rest_world(rig)
    legs = []
    for side in ("left", "right"):
        chain = [names.get(f"{side}_{part}") for part in ("upper_leg", "lower_leg", "foot")]
        if None in chain:
            continue
        up, knee, ankle = (pos[i] for i in chain)
        legs.append(np.linalg.norm(knee - up) + np.linalg.norm(ankle - knee))
    height = float(np.mean(legs)) if legs else float(pos[hips, 1] - pos[ankles, 1].mean())
    if not height > 0:
        raise ClipError(f"retarget: the rest hips are not above the rest feet (height {height:g})")
    return height


def standing_ankle_height(rig: Rig) -> float | None:
    """Height of the ankles above the ground (y = 0) when the rig stands, from its rest pose; None when
    the rest pose does not stand on the ground (its lowest foot/toe joint is more than a tenth of the
    hip height away from y = 0, as in a BVH file whose rest pose hangs around the origin)."""
    _, ankles, feet = _feet(rig)
    _, pos = rest_world(rig)
    if abs(pos[feet, 1].min()) > 0.1 * hip_height(rig):
        return None
    return float(pos[ankles, 1].mean())


def _shortest_arc(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The smallest rotation (xyzw) taking direction a onto direction b (any lengths, non-zero)."""
    a = a / np.linalg.norm(a)
    b = b / np.linalg.norm(b)
    d = float(a @ b)
    if d < -1 + 1e-9:  # opposite: half a turn about any axis perpendicular to a
        axis = np.cross(a, [1.0, 0.0, 0.0])
        if np.linalg.norm(axis) < 1e-6:
            axis = np.cross(a, [0.0, 1.0, 0.0])
        return np.append(axis / np.linalg.norm(axis), 0.0)
    q = np.append(np.cross(a, b), 1.0 + d)
    return q / np.linalg.norm(q)


def _frame_rotation(up: np.ndarray, side: np.ndarray) -> np.ndarray:
    """3x3 rotation whose columns are (side, up, forward), orthonormalised around ``up``."""
    y = up / np.linalg.norm(up)
    x = side - (side @ y) * y
    x = x / np.linalg.norm(x)
    return np.stack([x, y, np.cross(x, y)], axis=1)


def _is_below(rig: Rig, node: int, ancestor: int) -> bool:
    while node >= 0:
        if node == ancestor:
            return True
        node = int(rig.parents[node])
    return False


def rest_alignment(source_rig: Rig, target_rig: Rig, pairs: Mapping[int, int]) -> dict[int, np.ndarray]:
    """Target rig index -> world rotation ``A`` (4,) xyzw for every mapped target joint (see the module
    docstring, step 2): ``A * W_t_rest`` is the target bone's rest orientation as the source holds it."""
    _, s_pos = rest_world(source_rig)
    _, t_pos = rest_world(target_rig)
    t_names = canonical_names(target_rig)
    s_names = canonical_names(source_rig)
    identity = np.array([0.0, 0.0, 0.0, 1.0])
    align: dict[int, np.ndarray] = {}

    # The body frame at the hips: facing and up.
    body = identity
    if all(c in t_names and c in s_names for c in ("hips", "left_upper_leg", "right_upper_leg")):
        top = next((c for c in ("neck", "head", "upper_chest", "chest", "spine") if c in t_names and c in s_names), None)
        if top is not None:
            def frame(names, pos):
                return _frame_rotation(pos[names[top]] - pos[names["hips"]],
                                       pos[names["left_upper_leg"]] - pos[names["right_upper_leg"]])
            body = matrix_to_quat(frame(s_names, s_pos) @ frame(t_names, t_pos).T)

    mapped = sorted(pairs)
    for t in mapped:  # parent-first: a joint's mapped ancestors are aligned before it
        s = pairs[t]
        parent_align = body
        a = int(target_rig.parents[t])
        while a >= 0:
            if a in align:
                parent_align = align[a]
                break
            a = int(target_rig.parents[a])
        # The bone's direction: towards the nearest mapped descendant whose partner lies below s too.
        child = next((c for c in mapped if c > t and _is_below(target_rig, c, t) and _is_below(source_rig, pairs[c], s)
                      and np.linalg.norm(t_pos[c] - t_pos[t]) > 1e-9 and np.linalg.norm(s_pos[pairs[c]] - s_pos[s]) > 1e-9), None)
        if t == t_names.get("hips") or child is None:
            align[t] = body if t == t_names.get("hips") else parent_align
            continue
        d_t = t_pos[child] - t_pos[t]
        d_s = s_pos[pairs[child]] - s_pos[s]
        d_body = quat_to_matrix(body) @ d_t
        align[t] = quat_mul(_shortest_arc(d_body, d_s), body)
    return align


# ---------------------------------------------------------------------------------------------
# the source's up axis


def _up_from(world_pos: np.ndarray, rig: Rig) -> np.ndarray:
    """Mean up direction (3,) of posed world positions (T, N, 3): spine (hips -> top of the spine) plus
    legs (lower foot -> hips), each normalised per frame; zero when the rig has neither."""
    names = canonical_names(rig)
    total = np.zeros(3)
    hips = names.get("hips")
    if hips is None:
        return total
    top = next((names[c] for c in ("neck", "head", "upper_chest", "chest", "spine") if c in names), None)
    feet = [names[c] for c in ("left_foot", "right_foot", "left_toes", "right_toes") if c in names]
    parts = []
    if top is not None:
        parts.append(world_pos[:, top] - world_pos[:, hips])
    if feet:
        # The lower foot at each frame: the one farthest from the head along the spine (or the mean).
        feet_pos = world_pos[:, feet]
        ref = parts[0] if parts else world_pos[:, hips] - feet_pos.mean(axis=1)
        low = np.argmin(np.einsum("tfc,tc->tf", feet_pos, ref), axis=1)
        parts.append(world_pos[:, hips] - feet_pos[np.arange(len(feet_pos)), low])
    for d in parts:
        n = np.linalg.norm(d, axis=1, keepdims=True)
        ok = n[:, 0] > 1e-9
        if ok.any():
            total += (d[ok] / n[ok]).mean(axis=0)
    return total


def _snap_axis(v: np.ndarray) -> str | None:
    """The signed axis name ("y", "-z", ...) nearest to ``v``; None for a zero vector."""
    if not np.linalg.norm(v) > 1e-9:
        return None
    k = int(np.argmax(np.abs(v)))
    return ("-" if v[k] < 0 else "") + "xyz"[k]


def _rest_up(rig: Rig) -> str:
    """The up axis of the rest pose alone (its spine and legs), "y" when it has neither."""
    _, rest_pos = rest_world(rig)
    return _snap_axis(_up_from(rest_pos[None], rig)) or "y"


def detect_up(clip: Clip | None, rig: Rig) -> str:
    """The source's up axis ("y", "z", "-z", "x", "-x" or "-y"): from the posed skeleton over ``clip``
    (the mean spine and leg directions, see the module docstring, step 5), else from the rest pose;
    "y" when the rig has no hips. The motion decides: a Y-up rest skeleton whose root rotation turns
    it Z up is Z up.

    >>> from skeletal.demo import demo_asset
    >>> demo = demo_asset()
    >>> detect_up(demo.clip("walk"), demo.rig)
    'y'
    """
    if clip is not None and clip.tracks:
        times = _key_times(Clip(clip.name, [t for t in clip.tracks if t.path != "weights"]), None)
        if len(times) > 240:  # a few hundred frames say it as well as thousands
            times = times[np.linspace(0, len(times) - 1, 240).round().astype(int)]
        pose_clip = Clip(clip.name, [t for t in clip.tracks if t.path != "weights"])
        pose, _ = sample(pose_clip, times, rig.rest, np.zeros(len(rig) + 1, np.int64), np.zeros(0))
        motion = _up_from(world_matrices(rig.parents, pose)[..., :3, 3], rig)
        axis = _snap_axis(motion)
        if axis is not None and np.abs(motion).max() > 0.5 * np.linalg.norm(motion):
            return axis
    return _rest_up(rig)


def _turn_to_y(up: str) -> tuple[np.ndarray, np.ndarray]:
    """The smallest rotation taking axis ``up`` to +Y: quaternion (4,) and matrix (3, 3)."""
    q = _shortest_arc(np.asarray(UP_AXES[up]), np.array([0.0, 1.0, 0.0]))
    return q, quat_to_matrix(q)


def _upright(clip: Clip, rig: Rig, up: str, rest_up: str) -> tuple[Clip, Rig]:
    """``clip``'s root tracks turned so that axis ``up`` becomes +Y, and ``rig``'s root rest pose so that
    ``rest_up`` does (a rest skeleton may stand otherwise than its motion; the retargeting uses the rest
    pose only for bone directions, which any turn keeps, and for the standing ankle height)."""
    roots = {int(i) for i in np.flatnonzero(rig.parents < 0)}
    rest = rig.rest.copy()
    if rest_up != "y":
        q_rest, m_rest = _turn_to_y(rest_up)
        for r in roots:
            rest[r, 0:3] = m_rest @ rest[r, 0:3]
            rest[r, 3:7] = quat_mul(q_rest, rest[r, 3:7])
    q, m = _turn_to_y(up)
    tracks = []
    for t in clip.tracks:
        values = t.values
        if t.node in roots and t.path == "translation":
            values = (t.values.astype(np.float64) @ m.T).astype(t.values.dtype)
        elif t.node in roots and t.path == "rotation":  # linear in the quaternion: spline tangents too
            values = quat_mul(q, t.values.astype(np.float64)).astype(t.values.dtype)
        tracks.append(Track(t.node, t.path, t.interpolation, t.times, values))
    turned = Rig(rig.names, rig.parents, rest, rig.node_of, rig.index_of)
    return dataclasses.replace(clip, tracks=tracks), turned


# ---------------------------------------------------------------------------------------------
# the retargeting


#: Key rate of the retargeted clip when the source has CUBICSPLINE tracks and no ``fps`` is given.
DEFAULT_CUBIC_FPS = 30.0


def _key_times(clip: Clip, fps: float | None, force: bool = False) -> np.ndarray:
    """The new clip's key times (float64 seconds): the union of the source's key times, or a uniform
    grid over [0, duration] at ``fps`` (default 30 for spline sources), the end included; a grid is
    counted and sized first (:func:`skeletal.io.budget.check_output`, refused unless ``force``)."""
    if fps is not None:
        from ..io.budget import SamplingError, check_output, frame_count

        try:
            n = frame_count(clip.duration, fps, what=f"retarget: clip {clip.name!r}")  # the end included
            # the new clip's keys, its sampled source pose and world matrices: ~400 bytes a node a key
            check_output(f"retarget: clip {clip.name!r} at {fps:g} keys a second", n,
                         400 * max(len({t.node for t in clip.tracks}), 1), force=force, hint="a lower --fps")
        except SamplingError as exc:
            raise ClipError(str(exc)) from None
        n = int(np.floor(clip.duration * fps + 1e-9)) + 1  # the grid; the end is appended below
        times = np.arange(n, dtype=np.float64) / fps
        if clip.duration > 0 and times[-1] < clip.duration - 1e-6:
            times = np.append(times, clip.duration)
        return times
    if not clip.tracks:
        return np.zeros(1)
    if any(t.interpolation == "CUBICSPLINE" for t in clip.tracks):
        return _key_times(clip, DEFAULT_CUBIC_FPS, force)  # a spline bends between its keys: sample it densely
    return np.unique(np.concatenate([t.times for t in clip.tracks if t.path != "weights"] or [np.zeros(1, np.float32)])).astype(np.float64)


def _continuous(q: np.ndarray) -> np.ndarray:
    """Quaternion keys (T, 4) with signs flipped so consecutive keys are in the same hemisphere."""
    q = q.copy()
    for k in range(1, len(q)):
        if q[k] @ q[k - 1] < 0:
            q[k] = -q[k]
    return q


def retarget(
    clip: Clip,
    source_rig: Rig,
    target_rig: Rig,
    mapping: Mapping[str, str | None] | None = None,
    *,
    fps: float | None = None,
    name: str | None = None,
    up: str | None = None,
    force: bool = False,
) -> Clip:
    """``clip`` (made for ``source_rig``) as a clip for ``target_rig``; see the module docstring.

    ``mapping``: source joint name -> target joint name (or None), overriding the automatic pairs.
    ``fps``: sample at this rate instead of the source clip's key times. ``name``: the new clip's
    name (default: the source clip's). ``up``: the source's up axis ("y", "z", "-z", "x", "-x", "-y");
    None or "auto" detects it (:func:`detect_up`); the target is Y up. Raises
    :class:`skeletal.ClipError` when no hips pair is found, the clip is additive, a mapping name is
    unknown or ``up`` is not an axis, and (unless ``force``) when sampling at ``fps`` would make more
    than 108,000 keys or 2 GB (:func:`skeletal.io.budget.check_output`).

    >>> from skeletal.demo import demo_asset
    >>> demo = demo_asset()
    >>> walk = retarget(demo.clip("walk"), demo.rig, demo.rig, name="walk2")
    >>> walk.name, round(walk.duration, 3) == round(demo.clip("walk").duration, 3)
    ('walk2', True)
    """
    if clip.additive:
        raise ClipError(f"retarget: clip {clip.name!r} is additive; retarget the clip it was made from")
    _key_times(clip, fps, force)  # the output counted and sized before anything is measured or made
    if up is None or str(up).lower() == "auto":
        up = detect_up(clip, source_rig) if "hips" in canonical_names(source_rig) else "y"
    up = str(up).lower().replace("+", "")
    if up not in UP_AXES:
        raise ClipError(f"retarget: up must be one of {', '.join(UP_AXES)} or auto, got {up!r}")
    rest_up = _rest_up(source_rig)
    if up != "y" or rest_up != "y":
        clip, source_rig = _upright(clip, source_rig, up, rest_up)
    pairs = bone_mapping(source_rig, target_rig, mapping)
    t_hips = canonical_names(target_rig).get("hips")
    s_hips = canonical_names(source_rig).get("hips")
    if t_hips is None or s_hips is None or pairs.get(t_hips) != s_hips:
        raise ClipError("retarget: the hips of the source and target rigs must be mapped to each other "
                        "(name them 'Hips'/'hips' or pass a mapping)")
    ratio = hip_height(target_rig) / hip_height(source_rig)
    s_ankles = _feet(source_rig)[1]
    align = rest_alignment(source_rig, target_rig, pairs)

    # Source: local poses at the key times -> world rotations and the hips' world positions.
    times = _key_times(clip, fps, force)
    pose_clip = Clip(clip.name, [t for t in clip.tracks if t.path != "weights"])
    n_s = len(source_rig)
    pose, _ = sample(pose_clip, times, source_rig.rest, np.zeros(n_s + 1, np.int64), np.zeros(0))
    s_world = world_rotations(source_rig.parents, pose[..., 3:7])  # (T, Ns, 4)
    s_rest_rot, _ = rest_world(source_rig)
    s_pos = world_matrices(source_rig.parents, pose)[..., :3, 3]  # (T, Ns, 3)

    # Target: one parent-first pass with the time axis batched.
    t_rest_rot, _ = rest_world(target_rig)
    n_t = len(target_rig)
    local = np.broadcast_to(target_rig.rest[:, 3:7], (len(times), n_t, 4)).copy()
    world = np.empty_like(local)
    for j, p in enumerate(target_rig.parents.tolist()):
        if j in pairs:
            s = pairs[j]
            delta = quat_mul(s_world[:, s], quat_conjugate(s_rest_rot[s]))  # source's change from rest
            world[:, j] = quat_mul(delta, quat_mul(align[j], t_rest_rot[j]))
            local[:, j] = world[:, j] if p < 0 else quat_mul(quat_conjugate(world[:, p]), world[:, j])
        else:
            world[:, j] = local[:, j] if p < 0 else quat_mul(world[:, p], local[:, j])

    # The root (module docstring, 4.): horizontally the source's hip joints (mid upper legs) scaled by
    # the leg ratio; vertically where it puts the lower ankle at the source's lower ankle height,
    # scaled and measured above the standing ankle heights, so that planted feet stay planted.
    low_s = s_pos[:, s_ankles, 1].min(axis=1)
    a_s = standing_ankle_height(source_rig)
    if a_s is None:  # a rest pose off the ground: the supporting ankle's typical height stands on it
        a_s = float(np.median(low_s))
    a_t = standing_ankle_height(target_rig)
    a_t = ratio * a_s if a_t is None else a_t
    t_pose = np.broadcast_to(target_rig.rest, (len(times),) + target_rig.rest.shape).copy()
    t_pose[..., 3:7] = local
    t_pos = world_matrices(target_rig.parents, t_pose)[..., :3, 3]  # hips at their rest translation
    rel = t_pos - t_pos[:, t_hips, None]  # every joint relative to the hips (T, Nt, 3)
    hips_world = s_pos[:, _hip_joints(source_rig)].mean(axis=1) * ratio - rel[:, _hip_joints(target_rig)].mean(axis=1)
    hips_world[:, 1] = a_t + ratio * (low_s - a_s) - rel[:, _feet(target_rig)[1], 1].min(axis=1)
    parent = int(target_rig.parents[t_hips])
    if parent >= 0:
        parent_world = world_matrices(target_rig.parents, target_rig.rest)[parent]
        inv = np.linalg.inv(parent_world)
        hips_local = hips_world @ inv[:3, :3].T + inv[:3, 3]
    else:
        hips_local = hips_world

    key_times = times.astype(np.float32)
    # A source made of STEP tracks only (held poses) stays STEP; anything else is LINEAR between keys.
    step = bool(clip.tracks) and all(t.interpolation == "STEP" for t in clip.tracks) and fps is None
    kind = "STEP" if step else "LINEAR"
    tracks = [Track(t_hips, "translation", kind, key_times, hips_local.astype(np.float32))]
    for j in pairs:
        q = local[:, j]
        q = q / np.linalg.norm(q, axis=1, keepdims=True)
        tracks.append(Track(j, "rotation", kind, key_times, _continuous(q).astype(np.float32)))
    return Clip(name or clip.name, tracks)
