# Over 600 lines: one algorithm (error-bounded key removal and 16-bit rotations) with the numba kernels of its
# error model; they change together.
"""Error-bounded clip compression: adaptive key removal measured in world space.

:func:`compress` returns an ordinary :class:`~skeletal.clip.Clip` (same tracks, same interpolation,
a subset of each track's keys, key values unchanged) that plays, blends and exports as glTF like any
other, and whose world-space error stays below a bound everywhere it is measured.

Error (the ACL / ozz-animation definition): for every node of the rig (joints, and the nodes meshes
hang on) at every dense time, the distance between where the original clip and the compressed clip
put the node's origin and three *virtual vertices* rigidly attached to it at ``distance`` (model
units, world space) along the node's x, y and z axes:

    e(t, n) = max over v in {0, d*x_n, d*y_n, d*z_n} of | W'(t, n) v - W(t, n) v |

with W the original world matrix and W' the compressed one (the axis directions are the original's,
so a node with world scale s carries points at world distance d, not d*s). The worst e over all nodes
and dense times is below ``error``. Because it compares world matrices, a parent's error reaches its
children with its lever arm: a 1e-3 rad error at the hips moves a hand 1 m away by 1 mm, and the
removal is rejected if that breaks the bound anywhere below. Morph ``weights`` tracks are measured per
channel (absolute weight difference below ``weight_error``).

Dense times: every key time of every track of the original clip, plus ``oversample - 1`` evenly
spaced times inside each interval between consecutive key times (default 2: the midpoints; 4 when a
track is CUBICSPLINE). The bound is guaranteed at these times (``max_error`` measures it again with
the library's sampler and posing code). Between them the error of LINEAR tracks stays close: both
clips interpolate the same keys and the compressed keys are a subset of the original ones.

Algorithm: greedy, iterative, hierarchy-aware key removal. The kernel holds the original and current
world matrices at every dense time. A candidate removal (key k of one track) changes that track only
between its kept neighbours, so only those dense times and only the node's subtree (contiguous in the
rig's parent-first depth-first order) are re-posed and compared with the original; the removal is
kept when no virtual vertex there moves by more than the round's bound. Rounds raise the bound from a
quarter of ``error`` to all of it, so that no track uses the whole budget before the others had a
turn (the cheapest removals everywhere go first). The current clip meets the bound after every
accepted removal, so the result does. A track keeps at least one key; the longest track keeps its last
key, so the clip's duration is unchanged.

>>> import skeletal
>>> from skeletal.demo import demo_asset
>>> asset = demo_asset()
>>> small = compress(asset.clip("walk"), asset.rig, error=1e-3)
>>> max_error(asset.clip("walk"), small, asset.rig) < 1e-3
True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from ..anim.clip import Clip, Track
from ..errors import ClipError
from ..anim.pose import world_matrices, world_node_into
from ..anim.rig import Rig
from ..anim.sampling import CUBICSPLINE, STEP, interpolate_between, key_stride, sample, sample_tracks

__all__ = ["compress", "max_error", "error_per_node", "dense_times", "default_distance", "animation_bytes",
           "CompressionStats", "compression_stats", "quantize_rotations",
           "max_weight_error", "compress_asset"]

ROTATION, WEIGHTS = 1, 3
_POSE_OFFSET = (0, 3, 7, -1)
#: ACL's default virtual vertex distance (3 cm) for a 1.8 m human, as a fraction of the figure's size.
DISTANCE_FRACTION = 0.03 / 1.8


# ---------------------------------------------------------------------------------------------
# sample times, sizes


def dense_times(clip: Clip, oversample: int | None = None) -> np.ndarray:
    """The times the error is measured at (float64, ascending, within [0, duration]): every key time of
    every track, plus ``oversample - 1`` evenly spaced times between consecutive ones (default 2, or
    4 when the clip has a CUBICSPLINE track).

    >>> from skeletal.clip import Track
    >>> c = Clip("c", [Track(0, "translation", "LINEAR", [0, 1], [[0, 0, 0], [1, 0, 0]])])
    >>> dense_times(c).tolist()
    [0.0, 0.5, 1.0]
    """
    if oversample is None:
        oversample = 4 if "CUBICSPLINE" in clip.interpolations else 2
    oversample = int(oversample)
    if oversample < 1:
        raise ClipError(f"oversample must be at least 1, got {oversample}")
    keys = np.unique(np.concatenate([[0.0], clip.times.astype(np.float64)]))
    keys = keys[(keys >= 0.0) & (keys <= clip.duration)]
    if len(keys) < 2 or oversample == 1:
        return keys
    frac = np.arange(oversample, dtype=np.float64) / oversample
    inner = keys[:-1, None] + (keys[1:] - keys[:-1])[:, None] * frac[None, :]
    return np.concatenate([inner.reshape(-1), keys[-1:]])


def animation_bytes(clips: Clip | list[Clip]) -> int:
    """Bytes of animation data as the glTF writer stores ``clips``: 4 per key time (identical time
    arrays within one clip are one accessor) plus 4 per value float (tangents included), or 2 per
    component of a STEP/LINEAR rotation track stored as normalised 16-bit integers (see
    :func:`quantize_rotations`).

    >>> from skeletal.clip import Track
    >>> t = [0, 1]
    >>> animation_bytes(Clip("c", [Track(0, "translation", "LINEAR", t, [[0, 0, 0], [1, 0, 0]]),
    ...                            Track(0, "scale", "LINEAR", t, [[1, 1, 1], [2, 2, 2]])]))
    56
    """
    from ..io.gltf_write import short_codes

    total = 0
    for clip in [clips] if isinstance(clips, Clip) else clips:
        inputs = {np.asarray(t.times, np.float32).tobytes() for t in clip.tracks}
        total += sum(len(b) for b in inputs)
        for t in clip.tracks:
            short = t.path == "rotation" and t.interpolation != "CUBICSPLINE" and short_codes(t.values) is not None
            total += (2 if short else 4) * t.values.size
    return total


def world_positions(clip: Clip, rig: Rig, times: np.ndarray) -> np.ndarray:
    pose = _sample_pose(clip, rig, times)
    return world_matrices(rig.parents, pose)


def _sample_pose(clip: Clip, rig: Rig, times: np.ndarray) -> np.ndarray:
    """Local poses (T, N, 10) float64 of ``clip`` on ``rig``; morph weights are not needed here."""
    n = len(rig)
    for k, track in enumerate(clip.tracks):
        if not 0 <= track.node < n:
            raise ClipError(f"clip {clip.name!r}: track {k} targets node {track.node}, the rig has {n} nodes")
    # weights tracks write to a morph array: give every node room for the widest weights track
    width = max([t.width for t in clip.tracks if t.path == "weights"], default=0)
    morph_start = np.arange(n + 1, dtype=np.int64) * width
    pose, _ = sample(clip, times, rig.rest, morph_start, np.zeros(n * width))
    return pose


def default_distance(clip: Clip, rig: Rig) -> float:
    """The default virtual vertex distance: ACL's 3 cm on a 1.8 m human, scaled to the figure: the
    largest extent of the world positions of the rig's nodes over the clip's key times, times
    0.03 / 1.8 (Soldier-sized figures get about 3 cm)."""
    times = np.unique(np.concatenate([[0.0], clip.times.astype(np.float64)]))
    if len(times) > 64:
        times = times[np.linspace(0, len(times) - 1, 64).astype(np.int64)]
    world = world_positions(clip, rig, times)
    pos = world[:, :, :3, 3]
    extent = float(np.max(pos.max(axis=1) - pos.min(axis=1))) if pos.size else 0.0
    return extent * DISTANCE_FRACTION if extent > 0 else 0.0


# ---------------------------------------------------------------------------------------------
# kernels


@njit(cache=True, forceinline=True)
def _node_error2(w, w0, inv):
    """Squared world error of one node: origin and three virtual vertices (``inv[a]`` = distance /
    |original axis a|) of world matrix ``w`` against ``w0`` (both (>=3, 4))."""
    d0 = w[0, 3] - w0[0, 3]
    d1 = w[1, 3] - w0[1, 3]
    d2 = w[2, 3] - w0[2, 3]
    best = d0 * d0 + d1 * d1 + d2 * d2
    for a in range(3):
        s = inv[a]
        e0 = d0 + s * (w[0, a] - w0[0, a])
        e1 = d1 + s * (w[1, a] - w0[1, a])
        e2 = d2 + s * (w[2, a] - w0[2, a])
        e = e0 * e0 + e1 * e1 + e2 * e2
        if e > best:
            best = e
    return best


@njit(cache=True, parallel=True)
def _error_grid(world, world0, inv):
    """World error (T, N) of ``world`` against ``world0`` ((T, N, 4, 4) each); ``inv`` (T, N, 3)."""
    t_count, n = world.shape[0], world.shape[1]
    out = np.empty((t_count, n))
    for s in prange(t_count):
        for m in range(n):
            out[s, m] = np.sqrt(_node_error2(world[s, m], world0[s, m], inv[s, m]))
    return out


@njit(cache=True)
def _segment_value(times, values, ks, vs, c, kind, rotation, a, b, t, out, o):
    """A track's value at ``t`` when its kept keys around ``t`` are ``a`` and ``b`` (indices relative to
    the track, -1 for none), as the sampler computes it (hold outside, STEP holds ``a``, otherwise
    :func:`~skeletal.sampling.interpolate_between` the two kept keys with their own tangents)."""
    stride, mid = key_stride(c, kind)
    if a < 0 or b < 0 or kind == STEP:
        base = vs + (b if a < 0 else a) * stride + mid
        for i in range(c):
            out[o + i] = values[base + i]
        return
    t0 = np.float64(times[ks + a])
    span = np.float64(times[ks + b]) - t0
    interpolate_between(values, vs + a * stride, vs + b * stride, c, kind, rotation, (t - t0) / span, span, out, o)


REMOVE, DROP, QUANTIZE = 0, 1, 2


@njit(cache=True)
def _kept_around(kept, times, ks, count, t, ka):
    """Advance ``ka`` (the last kept key at or before ``t``, -1 for none; times ascending between
    calls) and return it with the next kept key (-1 for none)."""
    k = ka + 1
    while k < count and times[ks + k] <= t:
        if kept[ks + k]:
            ka = k
        k += 1
    kb = k
    while kb < count and not kept[ks + kb]:
        kb += 1
    return ka, (kb if kb < count else -1)


@njit(cache=True)
def _evaluate(i, mode, a, b, apply, bound2, src, tq, parents, sub_end, rest, local, world, world0, inv, morph0,
              morph_off, kept, key_start, times, value_start, width, interp, path, node, pose_scratch, world_scratch,
              value_scratch):
    """Check one change of track ``i`` against the bound at every affected dense time and node (or,
    with ``apply``, write the new local rows and world matrices). ``mode``:

    * REMOVE: the key between the kept keys ``a`` and ``b`` goes (dense times strictly between them);
    * DROP: the track's last key goes and the node shows its rest value (all times);
    * QUANTIZE: the track's values are read from ``src`` (the quantised copy; all times).

    ``src`` is the value array the track is read from after the change."""
    ks = key_start[i]
    count = key_start[i + 1] - ks
    if mode == REMOVE:
        lo = np.float64(times[ks + a]) if a >= 0 else -np.inf
        hi = np.float64(times[ks + b]) if b >= 0 else np.inf
        s0 = np.searchsorted(tq, lo, side="right")
        s1 = np.searchsorted(tq, hi, side="left")
    else:
        s0 = 0
        s1 = tq.shape[0]
    c = width[i]
    p = path[i]
    j = node[i]
    kind = interp[i]
    rotation = p == ROTATION
    vs = value_start[i]
    ka = a - a - 1  # -1, typed like a
    if p == WEIGHTS:
        if apply:
            return True
        mo = morph_off[i]
        kb = b
        for s in range(s0, s1):
            if mode == QUANTIZE:
                ka, kb = _kept_around(kept, times, ks, count, tq[s], ka)
            else:
                ka = a
            _segment_value(times, src, ks, vs, c, kind, rotation, ka, kb, tq[s], value_scratch, 0)
            for ch in range(c):
                d = value_scratch[ch] - morph0[s, mo + ch]
                if d * d > bound2:
                    return False
        return True
    off = _POSE_OFFSET_ARR[p]
    end = sub_end[j]
    parent = parents[j]
    row = pose_scratch[j]
    kb = b
    for s in range(s0, s1):
        for q in range(10):
            row[q] = local[s, j, q]
        if mode == DROP:
            for q in range(c):
                row[off + q] = rest[j, off + q]
        else:
            if mode == QUANTIZE:
                ka, kb = _kept_around(kept, times, ks, count, tq[s], ka)
            else:
                ka = a
            _segment_value(times, src, ks, vs, c, kind, rotation, ka, kb, tq[s], row, off)
        if apply:
            for q in range(10):
                local[s, j, q] = row[q]
            _pose_subtree(j, end, parents, local[s], world[s])
            continue
        if parent >= 0:
            for r in range(4):
                for q in range(4):
                    world_scratch[parent, r, q] = world[s, parent, r, q]
        if not _check_subtree(j, end, parents, pose_scratch, local[s], world_scratch, world0[s], inv[s], bound2):
            return False
    return True


@njit(cache=True)
def _pose_subtree(j, end, parents, pose, world):
    """World matrices of nodes j..end-1 (j's subtree) from ``pose``; parents read from ``world``."""
    for m in range(j, end):
        world_node_into(m, parents, pose, world)


@njit(cache=True)
def _check_subtree(j, end, parents, pose_j, pose, world, world0, inv, bound2):
    """Pose j from ``pose_j`` and its descendants from ``pose`` into ``world`` (j's parent already
    there) and compare each with ``world0``; False at the first node over the bound."""
    world_node_into(j, parents, pose_j, world)
    if _node_error2(world[j], world0[j], inv[j]) > bound2:
        return False
    for m in range(j + 1, end):
        world_node_into(m, parents, pose, world)
        if _node_error2(world[m], world0[m], inv[m]) > bound2:
            return False
    return True


_POSE_OFFSET_ARR = np.array(_POSE_OFFSET, dtype=np.int64)


@njit(cache=True)
def _reduce(bounds, weight_bounds, order, active, can_remove, keep_last, can_drop, can_quantize, kept, dropped, quantized,
            values, qvalues, tq, parents, sub_end, rest, local, world, world0, inv, morph0, morph_off,
            key_start, times, value_start, width, interp, path, node):
    """The greedy rounds. For each bound (ascending) and each track in ``order``: quantise the track
    (first round, where ``can_quantize``), then sweep its kept keys and remove each one whose removal
    keeps the error within the bound; a track left with one key may be dropped (``can_drop``) when
    the rest value is close enough. CUBICSPLINE tracks keep 2 keys (glTF's minimum) unless dropped. ``values`` is the working value array (a quantised track's values
    are copied in from ``qvalues``); ``kept``, ``dropped``, ``quantized`` are updated in place and
    ``local``/``world`` hold the current clip's poses throughout. Returns the number of keys removed."""
    n = parents.shape[0]
    pose_scratch = np.zeros((n, 10))
    world_scratch = np.zeros((n, 4, 4))
    value_scratch = np.zeros(max(1, width.max()))
    removed = 0
    # typed variables, not literals: one compiled _evaluate serves every call
    m_remove, m_drop, m_quantize = np.int64(REMOVE), np.int64(DROP), np.int64(QUANTIZE)
    none = np.int64(-1)
    check, write = np.int64(0), np.int64(1)
    for r in range(bounds.shape[0]):
        for i in order:
            if not active[i] or dropped[i]:
                continue
            bound2 = weight_bounds[r] ** 2 if path[i] == WEIGHTS else bounds[r] ** 2
            ks = key_start[i]
            count = key_start[i + 1] - ks
            vs = value_start[i]
            ve = value_start[i + 1]
            if r == 0 and can_quantize[i]:
                if _evaluate(i, m_quantize, none, none, check, bound2, qvalues, tq, parents, sub_end, rest, local, world,
                             world0, inv, morph0, morph_off, kept, key_start, times, value_start, width, interp,
                             path, node, pose_scratch, world_scratch, value_scratch):
                    _evaluate(i, m_quantize, none, none, write, bound2, qvalues, tq, parents, sub_end, rest, local, world,
                              world0, inv, morph0, morph_off, kept, key_start, times, value_start, width, interp,
                              path, node, pose_scratch, world_scratch, value_scratch)
                    values[vs:ve] = qvalues[vs:ve]
                    quantized[i] = True
            nk = 0
            for k in range(count):
                nk += kept[ks + k]
            min_keys = 2 if interp[i] == CUBICSPLINE else 1  # glTF: a CUBICSPLINE sampler has 2 keys or more
            prev = none
            k = 0
            while k < count and nk > min_keys and can_remove[i]:
                if not kept[ks + k]:
                    k += 1
                    continue
                nxt = k + 1
                while nxt < count and not kept[ks + nxt]:
                    nxt += 1
                b = nxt if nxt < count else none
                if b < 0 and keep_last[i]:
                    break
                if _evaluate(i, m_remove, prev, b, check, bound2, values, tq, parents, sub_end, rest, local, world,
                             world0, inv, morph0, morph_off, kept, key_start, times, value_start, width, interp,
                             path, node, pose_scratch, world_scratch, value_scratch):
                    _evaluate(i, m_remove, prev, b, write, bound2, values, tq, parents, sub_end, rest, local, world,
                              world0, inv, morph0, morph_off, kept, key_start, times, value_start, width, interp,
                              path, node, pose_scratch, world_scratch, value_scratch)
                    kept[ks + k] = False
                    nk -= 1
                    removed += 1
                else:
                    prev = k
                k = nxt
            if nk <= min_keys and can_drop[i] and can_remove[i]:
                if _evaluate(i, m_drop, none, none, check, bound2, values, tq, parents, sub_end, rest, local, world,
                             world0, inv, morph0, morph_off, kept, key_start, times, value_start, width, interp,
                             path, node, pose_scratch, world_scratch, value_scratch):
                    _evaluate(i, m_drop, none, none, write, bound2, values, tq, parents, sub_end, rest, local, world,
                              world0, inv, morph0, morph_off, kept, key_start, times, value_start, width, interp,
                              path, node, pose_scratch, world_scratch, value_scratch)
                    for k in range(count):
                        kept[ks + k] = False
                    dropped[i] = True
                    removed += nk
    return removed


# ---------------------------------------------------------------------------------------------
# API


def _check_clip(clip: Clip, rig: Rig) -> None:
    if not isinstance(clip, Clip):
        raise ClipError(f"expected a Clip, got {type(clip).__name__}")
    if clip.additive:
        raise ClipError(f"clip {clip.name!r} is additive: it has no world-space pose to measure; compress the "
                        "source clip and make it additive afterwards")
    n = len(rig)
    for k, track in enumerate(clip.tracks):
        if not 0 <= track.node < n:
            raise ClipError(f"clip {clip.name!r}: track {k} targets node {track.node}, the rig has {n} nodes")


def _subtree_ends(parents: np.ndarray) -> np.ndarray | None:
    """``end[j]`` such that j's subtree is ``[j, end[j])``, or None when subtrees are not contiguous."""
    n = len(parents)
    end = np.arange(1, n + 1, dtype=np.int64)
    size = np.ones(n, dtype=np.int64)
    for i in range(n - 1, -1, -1):
        p = parents[i]
        if p >= 0:
            end[p] = max(end[p], end[i])
            size[p] += size[i]
    if np.any(end - np.arange(n) != size):
        return None
    return end


def _virtual_vertex_scale(world0: np.ndarray, distance: float) -> np.ndarray:
    """(T, N, 3): distance / |original world axis a| (0 for a degenerate axis)."""
    norms = np.linalg.norm(world0[..., :3, :3], axis=-2)
    return np.divide(distance, norms, out=np.zeros_like(norms), where=norms > 1e-12)


def _weights_values(clip: Clip, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each weights track sampled on its own: (T, W) values and (n_tracks,) column offsets."""
    offsets = np.zeros(len(clip.tracks), dtype=np.int64)
    chosen = [t for t in clip.tracks if t.path == "weights"]
    col = 0
    for k, track in enumerate(clip.tracks):
        if track.path == "weights":
            offsets[k] = col
            col += track.width
    if not chosen:
        return np.zeros((len(times), 1)), offsets
    parts = sample_tracks(Clip(clip.name, chosen), times)
    return np.ascontiguousarray(np.concatenate(parts, axis=1)), offsets


def _prepare(clip: Clip, rig: Rig, distance: float | None, oversample: int | None):
    _check_clip(clip, rig)
    times = dense_times(clip, oversample)
    if distance is None:
        distance = default_distance(clip, rig)
    distance = float(distance)
    if not (np.isfinite(distance) and distance >= 0):
        raise ClipError(f"distance must be a finite number >= 0, got {distance}")
    return times, distance


def error_per_node(original: Clip, compressed: Clip, rig: Rig, *, distance: float | None = None,
                   oversample: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """World-space error (see the module docstring) of ``compressed`` against ``original`` at the
    dense times of ``original``: returns ``times`` (T,) and ``error`` (T, N) in model units, measured
    with the library's sampler and posing code."""
    times, distance = _prepare(original, rig, distance, oversample)
    _check_clip(compressed, rig)
    world0 = world_positions(original, rig, times)
    world = world_positions(compressed, rig, times)
    return times, _error_grid(world, world0, _virtual_vertex_scale(world0, distance))


def max_error(original: Clip, compressed: Clip, rig: Rig, *, distance: float | None = None,
              oversample: int | None = None) -> float:
    """The worst world-space error (model units) of ``compressed`` against ``original`` over every node
    and dense time; see :func:`error_per_node`."""
    _, err = error_per_node(original, compressed, rig, distance=distance, oversample=oversample)
    return float(err.max()) if err.size else 0.0


def max_weight_error(original: Clip, compressed: Clip, oversample: int | None = None) -> float:
    """The worst absolute difference of any morph weight, over the dense times (0 without weights)."""
    times = dense_times(original, oversample)
    a, _ = _weights_values(original, times)
    b, _ = _weights_values(compressed, times)
    if a.shape != b.shape:
        raise ClipError("the clips have different weights tracks")
    return float(np.max(np.abs(a - b))) if a.size else 0.0


def compress(
    clip: Clip,
    rig: Rig,
    error: float = 0.01,
    *,
    distance: float | None = None,
    weight_error: float = 1e-3,
    oversample: int | None = None,
    quantize: bool = True,
    drop_rest_tracks: bool = True,
    rounds: int = 4,
    name: str | None = None,
) -> Clip:
    """A copy of ``clip`` with as few keys per track as keep its world-space error below ``error``.

    * ``error``: the bound, in the model's units (world space), on the distance between the original
      and compressed positions of every node's origin and of virtual vertices at ``distance`` from it
      (module docstring); e.g. 1e-4 for ACL's 0.01 cm on a model in metres.
    * ``distance``: the virtual vertex distance in model units; default :func:`default_distance`
      (3 cm on a 1.8 m figure, scaled to the clip's figure).
    * ``weight_error``: bound on any morph weight's change (weights tracks are measured per channel).
    * ``oversample``: error sample times per key interval (:func:`dense_times`; default 2, or 4 with
      CUBICSPLINE tracks). The bound is guaranteed at those times.
    * ``quantize``: STEP/LINEAR rotation tracks whose keys may be rounded to multiples of 1/32767
      within the bound are; the glTF writer stores such tracks as normalised 16-bit integers (8
      instead of 16 bytes a key), and reading them back gives the very same float32 values.
    * ``drop_rest_tracks``: a track whose one remaining key can be replaced by the node's rest value
      within the bound is left out (as ACL strips default tracks). Played alone or on a base layer the
      clip is the same; on an override layer such a node shows the layers beneath it.
    * ``rounds``: the greedy runs with bounds ``error * r / rounds`` for r = 1..rounds.

    Tracks keep their order, nodes, paths and interpolations; each keeps a subset of its keys with
    their stored values (CUBICSPLINE keys keep their tangents; quantised rotations are rounded), so the
    result plays, blends and exports like any clip. A track overridden by a later track on the same
    node and path (the sampler uses the last one) is copied unchanged. Markers are kept. The track
    holding the clip's last key keeps it, so the duration is unchanged.

    >>> from skeletal.demo import demo_asset
    >>> asset = demo_asset()
    >>> walk = asset.clip("walk")
    >>> small = compress(walk, asset.rig, error=1e-3)
    >>> animation_bytes(small) < animation_bytes(walk)
    True
    """
    error = float(error)
    if not (np.isfinite(error) and error > 0):
        raise ClipError(f"error must be a positive number, got {error}")
    weight_error = float(weight_error)
    if not (np.isfinite(weight_error) and weight_error >= 0):
        raise ClipError(f"weight_error must be a finite number >= 0, got {weight_error}")
    if int(rounds) < 1:
        raise ClipError(f"rounds must be at least 1, got {rounds}")
    times, distance = _prepare(clip, rig, distance, oversample)
    out_name = clip.name if name is None else name
    if not clip.tracks:
        return Clip(out_name, [], dict(clip.markers))

    # Work on a rig whose subtrees are contiguous (the parent-first depth-first order of Rig.from_parents).
    parents = np.asarray(rig.parents, dtype=np.int64)
    if _subtree_ends(parents) is None:
        work_rig = Rig.from_parents(list(rig.names), parents, rig.rest)
        node_map = work_rig.index_of.astype(np.int64)
        work_clip = Clip(clip.name, [Track(int(node_map[t.node]), t.path, t.interpolation, t.times, t.values)
                                     for t in clip.tracks])
    else:
        work_rig, work_clip = rig, clip
    parents = np.asarray(work_rig.parents, dtype=np.int32)
    sub_end = _subtree_ends(parents.astype(np.int64))
    rest = np.ascontiguousarray(work_rig.rest, dtype=np.float64)

    local0 = _sample_pose(work_clip, work_rig, times)
    world0 = world_matrices(parents, local0)
    inv = np.ascontiguousarray(_virtual_vertex_scale(world0, distance))
    morph0, morph_off = _weights_values(work_clip, times)

    tracks = work_clip.tracks
    n_tracks = len(tracks)
    active = np.zeros(n_tracks, dtype=np.bool_)
    last_of: dict[tuple[int, str], int] = {}
    for k, track in enumerate(tracks):
        last_of[(track.node, track.path)] = k
    active[list(last_of.values())] = True
    keep_last = np.zeros(n_tracks, dtype=np.bool_)
    ends = [k for k, t in enumerate(tracks) if float(t.times[-1]) == work_clip.duration]
    if ends:  # the most varying of them: it would keep its last key anyway
        keep_last[max(ends, key=lambda k: (float(np.ptp(tracks[k].values, axis=0).max()), tracks[k].key_count))] = True
    can_drop = np.array([drop_rest_tracks and t.path != "weights" for t in tracks], dtype=np.bool_) & active & ~keep_last
    qvalues = work_clip.values.copy()
    can_quantize = np.zeros(n_tracks, dtype=np.bool_)
    if quantize:
        for k, t in enumerate(tracks):
            if t.path == "rotation" and t.interpolation != "CUBICSPLINE" and active[k]:
                vs, ve = work_clip.value_start[k], work_clip.value_start[k + 1]
                qvalues[vs:ve] = quantize_rotations(t.values).reshape(-1)
                can_quantize[k] = not np.array_equal(qvalues[vs:ve], work_clip.values[vs:ve])
    # Leaves first: their removals cost the least to check and leave the ancestors' budget alone.
    depth_key = np.array([sub_end[t.node] - t.node for t in tracks])
    order = np.argsort(depth_key, kind="stable").astype(np.int64)
    fractions = np.arange(1, int(rounds) + 1, dtype=np.float64) / int(rounds)

    scale = 1.0 - 1e-6  # room for the float rounding between the kernel and the sampler

    def run(can_remove: np.ndarray, scale: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        kept = np.ones(len(work_clip.times), dtype=np.bool_)
        dropped = np.zeros(n_tracks, dtype=np.bool_)
        quantized = np.zeros(n_tracks, dtype=np.bool_)
        values = work_clip.values.copy()
        _reduce(error * scale * fractions, weight_error * scale * fractions, order, active, can_remove, keep_last,
                can_drop, can_quantize, kept, dropped, quantized, values, qvalues, times, parents, sub_end, rest,
                local0.copy(), world0.copy(), world0, inv, morph0, morph_off, work_clip.key_start, work_clip.times,
                work_clip.value_start, work_clip.width, work_clip.interp, work_clip.path, work_clip.node)
        return kept, dropped, quantized, values

    def within(result: Clip) -> bool:
        return (max_error(clip, result, rig, distance=distance, oversample=oversample) <= error
                and max_weight_error(clip, result, oversample) <= weight_error)

    for _attempt in range(4):
        kept, dropped, quantized, values = run(active.copy(), scale)
        result = _rebuild(clip, kept, values, out_name)
        if within(result):
            # Tracks that kept most of their keys may be smaller with all of them: they then share the
            # original key-time accessor instead of storing their own times (4 bytes a key). Run again
            # with those tracks whole (only quantised), keep whichever result is smaller.
            full = _keep_whole(clip, kept, dropped, quantized)
            if full.any():
                kept2, _, _, values2 = run(active & ~full, scale)
                second = _rebuild(clip, kept2, values2, out_name)
                if animation_bytes(second) < animation_bytes(result) and within(second):
                    return second
            return result
        scale *= 0.5
    return _rebuild(clip, np.ones(len(clip.times), dtype=np.bool_), clip.values, out_name)


def _keep_whole(clip: Clip, kept: np.ndarray, dropped: np.ndarray, quantized: np.ndarray) -> np.ndarray:
    """(n_tracks,) bool: tracks better stored with all their keys on key times they share with other
    tracks (one glTF accessor): ``keys * value_bytes < kept * (value_bytes + 4)``."""
    groups: dict[bytes, list[int]] = {}
    for k, t in enumerate(clip.tracks):
        groups.setdefault(t.times.tobytes(), []).append(k)
    out = np.zeros(len(clip.tracks), dtype=np.bool_)
    for members in groups.values():
        if len(members) < 2:
            continue
        for k in members:
            t = clip.tracks[k]
            n_kept = int(kept[clip.key_start[k]:clip.key_start[k + 1]].sum())
            if dropped[k] or n_kept == t.key_count:
                continue
            per_key = t.values.size // t.key_count * (2 if quantized[k] else 4)
            out[k] = t.key_count * per_key < n_kept * (per_key + 4)
    return out


def quantize_rotations(q: np.ndarray) -> np.ndarray:
    """Quaternion rows (K, 4) rounded to the nearest multiples of 1/32767 after normalising: float32
    values that a normalised SHORT glTF accessor stores exactly (see :func:`skeletal.io.gltf_write.short_codes`).

    >>> quantize_rotations(np.array([[0.0, 0.0, 0.6, 0.8]]))[0, 2] * 32767
    19660.0
    """
    q = np.asarray(q, dtype=np.float64)
    norm = np.linalg.norm(q, axis=-1, keepdims=True)
    unit = np.divide(q, norm, out=np.zeros_like(q), where=norm > 0)
    codes = np.clip(np.round(unit * 32767.0), -32767, 32767).astype(np.float32)
    return codes / np.float32(32767.0)


def _rebuild(clip: Clip, kept: np.ndarray, values: np.ndarray, name: str) -> Clip:
    """``clip``'s tracks with the keys where ``kept`` (over the packed key array) is True and their
    values from the packed ``values``; tracks with no key left are dropped."""
    tracks = []
    for k, track in enumerate(clip.tracks):
        mask = kept[clip.key_start[k]:clip.key_start[k + 1]]
        if not mask.any():
            continue
        vals = values[clip.value_start[k]:clip.value_start[k + 1]].reshape(track.values.shape)
        if track.interpolation == "CUBICSPLINE":
            vals = vals.reshape(track.key_count, 3, track.width)[mask].reshape(-1, track.width)
        else:
            vals = vals[mask]
        tracks.append(Track(track.node, track.path, track.interpolation, track.times[mask].copy(), vals.copy()))
    return Clip(name, tracks, dict(clip.markers))


@dataclass(frozen=True)
class CompressionStats:
    """Sizes and measured error of one compressed clip (bytes as :func:`animation_bytes` counts them)."""

    name: str
    keys_before: int
    keys_after: int
    bytes_before: int
    bytes_after: int
    max_error: float
    max_weight_error: float

    @property
    def ratio(self) -> float:
        return self.bytes_before / self.bytes_after if self.bytes_after else float("inf")


def compression_stats(original: Clip, compressed: Clip, rig: Rig, *, distance: float | None = None,
                      oversample: int | None = None) -> CompressionStats:
    """Key counts, animation bytes before/after and the measured errors of a compressed clip."""
    return CompressionStats(
        original.name,
        int(sum(t.key_count for t in original.tracks)), int(sum(t.key_count for t in compressed.tracks)),
        animation_bytes(original), animation_bytes(compressed),
        max_error(original, compressed, rig, distance=distance, oversample=oversample),
        max_weight_error(original, compressed, oversample),
    )


def compress_asset(asset, clips=None, error: float = 0.01, **options) -> tuple[list[Clip], list[CompressionStats]]:
    """Compress several clips of an :class:`~skeletal.asset.Asset` (default: all of them) with the same
    settings (see :func:`compress`); returns the new clips and their :class:`CompressionStats`.

    >>> from skeletal.demo import demo_asset
    >>> clips, stats = compress_asset(demo_asset(), error=1e-3)
    >>> [s.max_error < 1e-3 for s in stats]  # every clip within the bound
    [True, True, True, True]
    """
    chosen = asset.clips if clips is None else [c if isinstance(c, Clip) else asset.clip(c) for c in clips]
    out, stats = [], []
    for clip in chosen:
        distance = options.get("distance")
        if distance is None:
            distance = default_distance(clip, asset.rig)
        small = compress(clip, asset.rig, error, **{**options, "distance": distance})
        out.append(small)
        stats.append(compression_stats(clip, small, asset.rig, distance=distance,
                                       oversample=options.get("oversample")))
    return out, stats


# ---------------------------------------------------------------------------------------------
# benchmark (skeletal bench: FEATURE_BENCHES)


def acl_bound(clip: Clip, rig: Rig) -> tuple[float, float]:
    """ACL's published CMU operating point scaled to the figure: (error, distance) = (0.01 cm, 3 cm)
    on a 1.8 m figure, in model units (the figure's size as in :func:`default_distance`)."""
    distance = default_distance(clip, rig)
    return distance * (1e-4 / 0.03), distance
