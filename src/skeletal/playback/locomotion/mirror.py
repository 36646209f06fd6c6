"""Mirrored clips: a clip reflected through the model's x = 0 plane, left and right joints swapped.

For a rig whose bind (rest) pose is symmetric, a pose is mirrored through each joint's motion away
from its rest: with ``B_j`` the rest world transform of joint j, ``W_j`` its world transform in the
pose and ``M = diag(-1, 1, 1)``, the mirrored pose has

    W'_j = M (W_m(j) B_m(j)^-1) M B_j        (m(j): the joint on the other side, by name)

so a vertex of a symmetric mesh bound to m(j) lands where the mirror image of its partner's vertex is
(``M D M`` is a proper rigid motion: two reflections), whatever the joints' local axes. Local
transforms follow from the parents' (``W'_parent^-1 W'_j``), sampled at ``fps`` into LINEAR tracks.

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


def mirror_poses(parents: np.ndarray, rest: np.ndarray, partner: np.ndarray, poses: np.ndarray) -> np.ndarray:
    """Local poses (T, N, 10) mirrored (see the module docstring): ``rest`` (N, 10) the rest pose,
    ``partner`` (N,) each joint's mirror (:func:`~skeletal.playback.locomotion.features.mirror_joints`)."""
    rest_world = world_matrices(parents, rest)  # (N, 4, 4)
    world = world_matrices(parents, poses)  # (T, N, 4, 4)
    motion = world @ np.linalg.inv(rest_world)  # D_j = W_j B_j^-1
    mirrored = _M @ motion[:, partner] @ _M @ rest_world  # W'_j
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
