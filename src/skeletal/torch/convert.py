"""Rigs, skins, meshes and clips as tensors, and tensors back to an ordinary :class:`~skeletal.Clip`.

* :func:`~skeletal.torch.rig_tensors` (in :mod:`.kinematics`; also ``rig.to_torch()``): hierarchy + rest pose
* :func:`skin_tensors`: a skin's joints (rig indices) and inverse bind matrices
* :func:`mesh_tensors`: every skinned primitive's bind positions, normals, tangents, triangles,
  influences (normalised) and morph targets
* :func:`clip_to_tensors`: a clip sampled at ``fps`` (or at given times) by the library's sampler ->
  local poses (T, N, 10) (+ morph weights); what any torch model trains on
* :func:`tensors_to_clip`: poses (T, N, 10) -> a LINEAR :class:`~skeletal.Clip` on the rig, which
  plays in a :class:`~skeletal.Player`, bakes, blends and exports (:func:`skeletal.export`) like a
  loaded one

>>> import skeletal, skeletal.torch as st                                 # doctest: +SKIP
>>> asset = skeletal.load("Soldier.glb")                                 # doctest: +SKIP
>>> walk = st.clip_to_tensors(asset.clip("Walk"), asset, fps=30)         # walk.pose (31, 69, 10)
>>> clip = st.tensors_to_clip(walk.pose, asset.rig, fps=30, name="walk2")
>>> skeletal.export(asset, "walk2.glb", [clip])                          # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
from torch import Tensor

from ..asset import Asset
from ..anim.clip import LOOP_MODES, Clip, Track
from ..errors import ClipError
from ..anim.rig import Rig
from ..anim.sampling import sample


@dataclass(frozen=True)
class SkinTensors:
    """One skin: ``joints`` (J,) int64 rig indices, ``inverse_bind`` (J, 4, 4) row-major."""

    name: str
    joints: Tensor
    inverse_bind: Tensor


def skin_tensors(asset: Asset, skin: int = 0, *, device=None, dtype: torch.dtype = torch.float32) -> SkinTensors:
    """``asset.skins[skin]`` as tensors (for :func:`skeletal.torch.skin_palette`)."""
    if not asset.skins:
        raise ValueError(f"{asset.name} has no skins")
    binding = asset.skins[skin]
    return SkinTensors(
        binding.name,
        torch.as_tensor(np.asarray(binding.joints, dtype=np.int64), device=device),
        torch.as_tensor(binding.inverse_bind, dtype=dtype, device=device),
    )


@dataclass(frozen=True)
class MeshTensors:
    """A skinned primitive as tensors.

    ``node``/``mesh``/``primitive`` say where it comes from (file node index, file mesh index,
    primitive index), ``skin`` which of ``asset.skins`` binds it. ``positions``/``normals`` (V, 3),
    ``tangents`` (V, 4) or None, ``triangles`` (F, 3) int64 or None (TRIANGLES primitives only),
    ``joints`` (V, K) int64 into the skin's joints, ``weights`` (V, K) rows summing to 1,
    ``morph_positions``/``morph_normals`` (T, V, 3) or None, ``morph_slice`` the node's range in the
    flat morph-weight array (``ClipTensors.morph[:, a:b]``).
    """

    node: int
    mesh: int
    primitive: int
    skin: int
    positions: Tensor
    normals: Tensor | None
    tangents: Tensor | None
    triangles: Tensor | None
    joints: Tensor
    weights: Tensor
    morph_positions: Tensor | None
    morph_normals: Tensor | None
    morph_slice: tuple[int, int]


def mesh_tensors(asset: Asset, *, device=None, dtype: torch.dtype = torch.float32) -> list[MeshTensors]:
    """Every skinned primitive of ``asset`` as :class:`MeshTensors`, in ``asset.skinned_instances`` order."""
    def tensor(a, dt=dtype):
        if a is None:
            return None
        a = np.ascontiguousarray(a)
        return torch.as_tensor(a if a.flags.writeable else a.copy(), dtype=dt, device=device)

    out = []
    for instance in asset.skinned_instances:
        r = int(asset.rig.index_of[instance.node])
        morph_slice = (int(asset.morph_start[r]), int(asset.morph_start[r + 1]))
        for p, prim in enumerate(instance.primitives):
            if prim.joints is None:
                continue
            src = prim.source
            triangles = None
            if src.mode == 4:
                idx = src.indices if src.indices is not None else np.arange(src.vertex_count)
                if len(idx) % 3 == 0:
                    triangles = tensor(np.asarray(idx, dtype=np.int64).reshape(-1, 3), torch.long)
            out.append(MeshTensors(
                node=instance.node, mesh=instance.mesh, primitive=p, skin=int(instance.skin),
                positions=tensor(src.positions), normals=tensor(src.normals), tangents=tensor(src.tangents),
                triangles=triangles, joints=tensor(prim.joints.astype(np.int64), torch.long),
                weights=tensor(prim.weights), morph_positions=tensor(prim.morph_positions),
                morph_normals=tensor(prim.morph_normals), morph_slice=morph_slice,
            ))
    return out


@dataclass(frozen=True)
class ClipTensors:
    """A clip sampled at ``times`` (T,): ``pose`` (T, N, 10) local rows ``t q s``, ``morph`` (T, M)
    morph weights (M = 0 for a rig without morph targets), ``fps`` the rate (None for given times)."""

    name: str
    times: Tensor
    pose: Tensor
    morph: Tensor
    fps: float | None


def clip_to_tensors(clip: Clip, rig: Rig | Asset, fps: float | None = 30.0, *, times=None, loop: str = "clamp",
                    device=None, dtype: torch.dtype = torch.float32) -> ClipTensors:
    """Sample ``clip`` on ``rig`` (a :class:`Rig`, or an :class:`Asset` for morph weights too) with the
    library's sampler (numba: STEP/LINEAR/CUBICSPLINE, slerp, loop modes) at a fixed rate: frames at
    ``k / fps`` for k = 0..floor(duration * fps) (the uniform grid a network wants; the clip is
    resampled to any ``fps``), or at explicit ``times`` (then ``fps`` is ignored)."""
    if loop not in LOOP_MODES:
        raise ClipError(f"loop mode {loop!r} is not one of {LOOP_MODES}")
    if times is None:
        times = frame_times(clip.duration, fps)
        rate = float(fps)
    else:
        times = np.atleast_1d(np.asarray(times.cpu() if isinstance(times, Tensor) else times, dtype=np.float64))
        rate = None
    if isinstance(rig, Asset):
        asset_rig, morph_start, rest_morph = rig.rig, rig.morph_start, rig.rest_morph
    else:
        asset_rig, morph_start, rest_morph = rig, np.zeros(len(rig) + 1, np.int64), np.zeros(0)
    pose, morph = sample(clip, times, asset_rig.rest, morph_start, rest_morph, loop=loop)
    return ClipTensors(
        clip.name,
        torch.as_tensor(times, dtype=dtype, device=device),
        torch.as_tensor(pose, dtype=dtype, device=device),
        torch.as_tensor(morph, dtype=dtype, device=device),
        rate,
    )


def frame_times(duration: float, fps: float | None) -> np.ndarray:
    """The uniform grid ``k / fps``, k = 0..floor(duration * fps) (float64 seconds)."""
    if fps is None or not fps > 0:
        raise ClipError(f"fps must be a positive number, got {fps}")
    count = int(np.floor(duration * fps + 1e-6)) + 1
    return np.arange(count, dtype=np.float64) / float(fps)


def _sign_continuous(q: np.ndarray) -> np.ndarray:
    """Quaternion keys (T, 4) with each key's sign chosen to face the previous (short-way slerp)."""
    if len(q) < 2:
        return q
    dots = np.einsum("ij,ij->i", q[1:], q[:-1])
    flips = np.concatenate([[1.0], np.cumprod(np.where(dots < 0, -1.0, 1.0))])
    return q * flips[:, None]


def tensors_to_clip(pose: Tensor | np.ndarray, rig: Rig, *, fps: float | None = 30.0, times=None, name: str = "clip",
                    nodes: Sequence[int] | None = None, tolerance: float = 1e-6) -> Clip:
    """An ordinary LINEAR :class:`Clip` from local poses ``pose`` (T, N, 10) (or one pose (N, 10)).

    Keys sit at ``k / fps`` (or at ``times``, strictly increasing seconds). Rotations are normalised
    and made sign-continuous. Tracks are written for ``nodes`` (rig indices; default: every node and
    property that differs from the rig's rest pose by more than ``tolerance`` somewhere, so an
    unanimated property keeps following the rig). The result plays, bakes and exports (glTF or BVH)
    like a loaded clip; sampled at its key times it reproduces ``pose`` to float32 rounding.
    """
    if isinstance(pose, Tensor):
        pose = pose.detach().cpu().numpy()
    pose = np.asarray(pose, dtype=np.float64)
    if pose.ndim == 2:
        pose = pose[None]
    n = len(rig)
    if pose.ndim != 3 or pose.shape[1:] != (n, 10):
        raise ClipError(f"pose of shape {pose.shape}: expected (T, {n}, 10) for the rig's {n} nodes")
    if not np.all(np.isfinite(pose)):
        raise ClipError(f"pose for clip {name!r} has non-finite values")
    count = pose.shape[0]
    if times is None:
        if fps is None or not fps > 0:
            raise ClipError(f"fps must be a positive number, got {fps}")
        key_times = (np.arange(count, dtype=np.float64) / float(fps)).astype(np.float32)
    else:
        key_times = np.asarray(times.detach().cpu().numpy() if isinstance(times, Tensor) else times,
                               dtype=np.float32).reshape(-1)
        if len(key_times) != count:
            raise ClipError(f"{len(key_times)} times for {count} poses")
    rest = rig.rest
    rotations = pose[..., 3:7]
    rotations = rotations / np.maximum(np.linalg.norm(rotations, axis=-1, keepdims=True), 1e-300)
    chosen = set(range(n)) if nodes is None else {int(i) for i in nodes}
    tracks = []
    for i in range(n):
        if i not in chosen:
            continue
        t_vals, s_vals = pose[:, i, 0:3], pose[:, i, 7:10]
        q_vals = _sign_continuous(rotations[:, i])
        explicit = nodes is not None
        if explicit or np.max(np.abs(t_vals - rest[i, 0:3])) > tolerance:
            tracks.append(Track(i, "translation", "LINEAR", key_times.copy(), t_vals.astype(np.float32)))
        rest_q = rest[i, 3:7] / max(np.linalg.norm(rest[i, 3:7]), 1e-300)
        if explicit or np.max(1.0 - np.abs(q_vals @ rest_q)) > tolerance:
            tracks.append(Track(i, "rotation", "LINEAR", key_times.copy(), q_vals.astype(np.float32)))
        if explicit or np.max(np.abs(s_vals - rest[i, 7:10])) > tolerance:
            tracks.append(Track(i, "scale", "LINEAR", key_times.copy(), s_vals.astype(np.float32)))
    return Clip(name, tracks)
