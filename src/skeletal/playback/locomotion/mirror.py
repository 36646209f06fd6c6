"""Mirrored clips: a clip reflected through the model's x = 0 plane, left and right joints swapped.

A pose is mirrored in model space, then expressed in each joint's own frame: with ``W_j`` the world
transform of joint j in the pose, ``M = diag(-1, 1, 1)`` and m(j) the joint on the other side (by
name), the mirrored pose has

    W'_j = M W_m(j) M C_j

``M W_m M`` is the partner's frame reflected (a proper rigid transform: two reflections), so joint j
lands exactly on the mirror image of its partner's position, whatever the bind pose. ``C_j`` (a
rotation, constant per joint, from the rest pose: :func:`mirror_frames`) takes j's local axes to the
reflected axes of its partner, so that j's own bones (its children's rest offsets) point where the
partner's reflected bones point: the mirrored pose keeps the rig's bone offsets, and a rig whose
left and right bind poses are not mirror images (a bind pose with one leg splayed, left and right
local axes that differ, a mocap T-pose that is slightly off) mirrors correctly. For a symmetric bind
pose ``C_j`` is the rest-pose relation ``M B_m^-1 M B_j`` (B: rest world transforms) and the formula
is the familiar ``M (W_m B_m^-1) M B_j``. Local transforms follow from the parents'
(``W'_parent^-1 W'_j``), sampled at ``fps`` into LINEAR tracks.

>>> from skeletal.demo import locomotion_asset
>>> asset = locomotion_asset()
>>> right = mirror_clip(asset, asset.clip("walk_turn_left"))
>>> right.name
'walk_turn_left.mirrored'
"""

from __future__ import annotations

import numpy as np

from ...asset import Asset
from ...anim.clip import Clip, Track
from ...errors import SkeletalError
from ...anim.pose import world_matrices
from ...quat import decompose_trs
from ...anim.sampling import sample
from .features import mirror_joints

SUFFIX = ".mirrored"
_M = np.diag([-1.0, 1.0, 1.0, 1.0])


def _rotation(m: np.ndarray) -> np.ndarray:
    """The rotation nearest to each 3x3 matrix (..., 3, 3) (its polar factor: scale and shear out)."""
    u, _, vt = np.linalg.svd(m)
    d = np.sign(np.linalg.det(u @ vt))
    return np.asarray(u @ (vt * np.concatenate([np.ones(d.shape + (2,)), d[..., None]], axis=-1)[..., :, None]))


def _turn_onto(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The smallest rotation (3, 3) taking unit vector ``a`` onto unit vector ``b``."""
    axis = np.cross(a, b)
    s, c = float(np.linalg.norm(axis)), float(np.dot(a, b))
    if s < 1e-12:
        if c > 0:
            return np.eye(3)
        # opposite: half a turn about any axis perpendicular to a
        p = np.cross(a, [1.0, 0.0, 0.0] if abs(a[0]) < 0.9 else [0.0, 1.0, 0.0])
        p /= np.linalg.norm(p)
        return 2.0 * np.outer(p, p) - np.eye(3)
    k = axis / s
    kx = np.array([[0.0, -k[2], k[1]], [k[2], 0.0, -k[0]], [-k[1], k[0], 0.0]])
    return np.asarray(np.eye(3) + s * kx + (1.0 - c) * (kx @ kx))


def mirror_frames(parents: np.ndarray, rest: np.ndarray, partner: np.ndarray) -> np.ndarray:
    """``C`` (N, 3, 3): per joint, the rotation from its local axes to its partner's reflected axes
    (see the module docstring), from the rest pose ``rest`` (N, 10) and ``partner`` (N,).

    Start from the rest-pose relation ``M R_m^T M R_j`` (R: rest world rotations, scale taken out);
    then make the joint's bones agree with its partner's reflected bones: with two or more
    non-parallel children whose partners are the partner's children, the rotation that best takes the
    child offsets onto the reflected partner offsets (Kabsch); with one, that rotation turned by the
    least angle that takes the child's offset onto its partner's. Each ``C_j`` then equals
    ``M C_m^T M`` (mirroring twice gives the pose back)."""
    parents = np.asarray(parents)
    rest_world = world_matrices(parents, np.asarray(rest, np.float64))
    rotation = _rotation(rest_world[:, :3, :3])
    position = rest_world[:, :3, 3]
    flip = _M[:3, :3]
    frames = flip @ np.swapaxes(rotation[partner], -1, -2) @ flip @ rotation
    children: list[list[int]] = [[] for _ in range(len(parents))]
    for c, p in enumerate(parents):
        if p >= 0:
            children[p].append(c)
    for j, kids in enumerate(children):
        m = int(partner[j])
        pairs = []  # (child offset in j's axes, the partner child's offset reflected, in m's axes)
        for c in kids:
            mc = int(partner[c])
            if parents[mc] != m:
                continue
            u = rotation[j].T @ (position[c] - position[j])
            v = flip @ (rotation[m].T @ (position[mc] - position[m]))
            if np.linalg.norm(u) > 1e-9 and np.linalg.norm(v) > 1e-9:
                pairs.append((u / np.linalg.norm(u), v / np.linalg.norm(v)))
        if not pairs:
            continue
        u_all = np.array([u for u, _ in pairs])
        v_all = np.array([v for _, v in pairs])
        spread = max((float(np.linalg.norm(np.cross(u_all[0], u))) for u in u_all[1:]), default=0.0)
        if spread > 1e-3:
            # Kabsch: the rotation C minimising sum |C u - v|^2
            h = v_all.T @ u_all
            uu, _, vt = np.linalg.svd(h)
            d = np.sign(np.linalg.det(uu @ vt))
            frames[j] = uu @ np.diag([1.0, 1.0, d]) @ vt
        else:
            frames[j] = _turn_onto(frames[j] @ u_all[0], v_all[0]) @ frames[j]
    return np.asarray(frames)


def mirror_poses(parents: np.ndarray, rest: np.ndarray, partner: np.ndarray, poses: np.ndarray) -> np.ndarray:
    """Local poses (T, N, 10) mirrored (see the module docstring): ``rest`` (N, 10) the rest pose,
    ``partner`` (N,) each joint's mirror (:func:`~skeletal.playback.locomotion.features.mirror_joints`)."""
    frames = np.zeros((len(parents), 4, 4))
    frames[:, :3, :3] = mirror_frames(parents, rest, partner)
    frames[:, 3, 3] = 1.0
    world = world_matrices(parents, poses)  # (T, N, 4, 4)
    mirrored = _M @ world[:, partner] @ _M @ frames  # W'_j
    local = np.empty_like(mirrored)
    roots = parents < 0
    local[:, roots] = mirrored[:, roots]
    inner = ~roots
    local[:, inner] = np.linalg.inv(mirrored[:, parents[inner]]) @ mirrored[:, inner]
    t, q, s = decompose_trs(local)
    out = np.concatenate([t, q, s], axis=-1)
    # one hemisphere along time (the tracks are slerped)
    flip = np.cumsum(np.sum(out[1:, :, 3:7] * out[:-1, :, 3:7], axis=-1) < 0, axis=0) % 2 == 1
    out[1:, :, 3:7] *= np.where(flip, -1.0, 1.0)[..., None]
    return out


def mirror_clip(asset: Asset, clip: Clip, fps: float = 60.0, name: str | None = None) -> Clip:
    """``clip`` mirrored for ``asset``'s rig (left/right joints by name), sampled at ``fps`` (and at
    its end) into LINEAR tracks of every joint the clip or its mirror moves; named ``clip.name +
    ".mirrored"`` unless ``name`` is given. Morph-weight tracks are left out."""
    rig = asset.rig
    nodes_used = [t.node for t in clip.tracks]
    if nodes_used and (min(nodes_used) < 0 or max(nodes_used) >= len(rig)):
        raise SkeletalError(f"{asset.path}: clip {clip.name!r} animates node {max(nodes_used)}, the rig has {len(rig)}")
    partner = mirror_joints(rig.names)
    times = np.arange(0.0, clip.duration, 1.0 / fps)
    times = np.append(times, clip.duration) if clip.duration - times[-1] > 1e-6 else times
    if len(times) < 2:
        times = np.array([0.0, max(clip.duration, 1.0 / fps)])
    poses, _ = sample(clip, times, rig.rest, asset.morph_start, asset.rest_morph)
    mirrored = mirror_poses(rig.parents, rig.rest, partner, poses)
    moved = {t.node for t in clip.tracks if t.path != "weights"}
    moved |= {int(partner[n]) for n in moved}
    # where the rest pose is not exactly symmetric, a joint the clip leaves alone can still differ from
    # its rest in the mirror: keep every joint whose mirrored local pose is not its rest pose
    rest = rig.rest[None].copy()
    same_sign = np.sum(mirrored[..., 3:7] * rest[..., 3:7], axis=-1, keepdims=True) >= 0
    aligned = np.concatenate([mirrored[..., :3], np.where(same_sign, 1.0, -1.0) * mirrored[..., 3:7],
                              mirrored[..., 7:]], axis=-1)
    differs = np.flatnonzero(np.abs(aligned - rest).max(axis=(0, 2)) > 1e-6)
    nodes = sorted(moved | {int(n) for n in differs})
    tracks = []
    for node in nodes:
        tracks.append(Track(node, "translation", "LINEAR", times, mirrored[:, node, 0:3]))
        tracks.append(Track(node, "rotation", "LINEAR", times, mirrored[:, node, 3:7]))
        tracks.append(Track(node, "scale", "LINEAR", times, mirrored[:, node, 7:10]))
    markers = dict(clip.markers)
    return Clip(name or clip.name + SUFFIX, tracks, markers, clip.additive)
