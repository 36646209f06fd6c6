"""Baking: a clip evaluated at many times into plain arrays (world matrices, skinned vertices).

This is the researcher's entry point (motion -> numpy) and what ``skeletal bake`` writes to ``.npz``.
The array names are a contract:

* ``times`` (T,) float64 query times (before loop mapping)
* ``node_world`` (T, N, 4, 4) float64 row-major world matrices, indexed by **file** (glTF) node index
* ``positions_node{N}_prim{P}`` (T, V, 3) world-space skinned positions (morphs applied) of primitive
  P of the mesh on file node N, for every skinned mesh node
* ``normals_node{N}_prim{P}`` (T, V, 3) the same for normals, when the primitive has them
* ``palette_skin{S}`` (T, J, 4, 4) skin palettes

>>> out = skeletal.bake(skeletal.load("Soldier.glb"), "Walk", fps=30)   # doctest: +SKIP
>>> out["node_world"].shape                                            # doctest: +SKIP
(31, 69, 4, 4)
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from ..asset import Asset
from ..anim.clip import LOOP_MODES, Clip
from ..errors import ClipError
from ..anim.pose import skin_palette, world_matrices
from ..anim.sampling import sample
from ..skinning.lbs import apply_morphs, skin


def sample_times(clip: Clip, fps: float) -> np.ndarray:
    """Times 0..duration inclusive at ``fps`` frames per second (the last one lands on the end)."""
    from ..io.budget import SamplingError, frame_count

    try:
        frame_count(clip.duration, fps, what=f"clip {clip.name!r}")  # a finite, bounded count first
    except SamplingError as exc:
        raise ClipError(str(exc)) from None
    frames = int(np.floor(clip.duration * fps + 1e-9)) + 1
    times = np.arange(frames, dtype=np.float64) / fps
    if clip.duration > 0 and times[-1] < clip.duration - 1e-9:
        times = np.append(times, clip.duration)
    return times


def bake_bytes(asset: Asset, frames: int, *, normals: bool = False, palettes: bool = False) -> int:
    """How many bytes :func:`bake` returns for ``frames`` times (what an uncompressed ``.npz`` holds).

    >>> bake_bytes(skeletal.load("Soldier.glb"), 31)   # doctest: +SKIP
    5540220
    """
    per_frame = 8 + len(asset.document.nodes) * 16 * 8
    layout = getattr(asset, "properties", None)
    per_frame += (layout.size * 8) if layout is not None else 0
    if palettes:
        per_frame += sum(len(binding.joints) for binding in asset.skins) * 16 * 8
    for instance in asset.skinned_instances:
        for prim in instance.primitives:
            if prim.joints is None:
                continue
            per_frame += prim.source.vertex_count * 3 * 8
            if normals and prim.source.normals is not None:
                per_frame += prim.source.vertex_count * 3 * 8
    return int(frames) * per_frame


def bake_primitives(asset: Asset) -> int:
    """How many skinned primitives :func:`bake` writes (``positions_node{N}_prim{P}`` arrays)."""
    return sum(1 for m in asset.skinned_instances for p in m.primitives if p.joints is not None)


def bake(
    asset: Asset,
    clip: str | int | Clip = 0,
    times: Sequence[float] | np.ndarray | None = None,
    *,
    fps: float | None = None,
    loop: str = "clamp",
    normals: bool = False,
    palettes: bool = False,
    progress: Callable[[int], None] | None = None,
    force: bool = False,
) -> dict[str, np.ndarray]:
    """Evaluate ``clip`` of ``asset`` at ``times`` (or 0..duration at ``fps``; default 30 fps).

    Arrays: ``times`` (T,), ``node_world`` (T, N, 4, 4) row-major by file node index, skinned
    ``positions_node{N}_prim{P}`` (T, V, 3) (and normals, palettes when asked), and, for an asset with
    KHR_animation_pointer properties, ``properties`` (T, M) laid out by ``asset.properties``.
    Sampling at ``fps`` is counted and sized first (:func:`skeletal.io.budget.check_output`): over
    2 GB or 108,000 frames it raises :class:`ClipError` unless ``force``.

    ``progress(n)`` is called as the skinning advances, ``n`` frames of one primitive at a time; the
    calls add up to ``len(times)`` times the number of skinned primitives (see :func:`bake_primitives`).
    """
    if loop not in LOOP_MODES:
        raise ClipError(f"loop mode {loop!r} is not one of {LOOP_MODES}")
    asset.require_nodes("bake")
    if not isinstance(clip, Clip):
        if not asset.clips:
            clip = Clip("rest", [])
        else:
            clip = asset.clip(clip)
    if times is None:
        from ..io.budget import SamplingError, check_output, frame_count

        rate = fps if fps is not None else 30.0
        try:  # counted and sized before the times are made
            frames = frame_count(clip.duration, rate, what=f"clip {clip.name!r}")
            check_output(f"baking clip {clip.name!r} of {asset.name}", frames,
                         bake_bytes(asset, 1, normals=normals, palettes=palettes), force=force, hint="a lower --fps")
        except SamplingError as exc:
            raise ClipError(str(exc)) from None
        times = sample_times(clip, rate)
    times = np.atleast_1d(np.asarray(times, dtype=np.float64))
    if not np.all(np.isfinite(times)):
        raise ClipError("times must be finite numbers")
    rig = asset.rig
    pose, morph = sample(clip, times, rig.rest, asset.morph_start, asset.rest_morph, loop=loop)
    world = world_matrices(rig.parents, pose)
    out: dict[str, np.ndarray] = {"times": times, "node_world": world[:, rig.index_of]}
    layout = getattr(asset, "properties", None)
    if layout is not None and len(layout):  # KHR_animation_pointer properties, (T, M) by asset.properties
        from ..anim.properties import sample_properties

        out["properties"] = sample_properties(clip, layout, times, loop)
    skin_palettes = {}
    for s, binding in enumerate(asset.skins):
        if palettes or any(m.skin == s for m in asset.mesh_instances):
            skin_palettes[s] = skin_palette(world, binding.joints, binding.inverse_bind)
            if palettes:
                out[f"palette_skin{s}"] = skin_palettes[s]
    for instance in asset.skinned_instances:
        node_rig = rig.index_of[instance.node]
        m0, m1 = asset.morph_start[node_rig], asset.morph_start[node_rig + 1]
        for p, prim in enumerate(instance.primitives):
            if prim.joints is None:
                continue
            src = prim.source
            pos_out = np.empty((len(times), src.vertex_count, 3))
            nrm_out = np.empty((len(times), src.vertex_count, 3)) if normals and src.normals is not None else None
            for f in range(len(times)):
                positions, nrm = src.positions, src.normals
                if prim.morph_positions is not None:
                    w = morph[f, m0:m1]
                    positions = np.empty((src.vertex_count, 3))
                    apply_morphs(src.positions, prim.morph_positions, w, positions)
                    if nrm_out is not None and prim.morph_normals is not None:
                        nrm = np.empty((src.vertex_count, 3))
                        apply_morphs(src.normals, prim.morph_normals, w, nrm)
                pos, n, _ = skin(
                    skin_palettes[instance.skin][f], prim.joints, prim.weights, positions,
                    nrm if nrm_out is not None else None,
                )
                pos_out[f] = pos
                if nrm_out is not None:
                    nrm_out[f] = n
                if progress is not None and (f % 64 == 63 or f == len(times) - 1):
                    progress(f % 64 + 1)
            out[f"positions_node{instance.node}_prim{p}"] = pos_out
            if nrm_out is not None:
                out[f"normals_node{instance.node}_prim{p}"] = nrm_out
    return out
