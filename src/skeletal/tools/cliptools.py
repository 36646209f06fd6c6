"""Clip utilities: cut, resample, reverse, make additive, compress; keyframe lists; quaternion helpers.

Every function returns a NEW :class:`~skeletal.clip.Clip` (new tracks, new arrays) and never mutates
its inputs. Errors are :class:`skeletal.errors.ClipError`.

Exactness contract (what "samples identically" means here): each operation is exact in real
arithmetic with respect to :func:`skeletal.sampling.sample`; the only differences are float32
rounding, because key times and values are stored as float32 (a re-timed key ``t - start`` or
``d - t`` is rounded to float32 again). For values of order 1 that is about 1e-7.

* :func:`subclip` keeps the keys inside the range as they are and adds a boundary key at each end.
  STEP and LINEAR boundary values come from the library's sampler; CUBICSPLINE segments are split
  exactly: a cubic is fixed by its end values and end time-derivatives, so the boundary key gets the
  (unnormalised) Hermite value and its time derivative as in- and out-tangent. CUBICSPLINE rotation
  tracks are then scaled by one positive factor so that the last key is unit (see
  ``_unit_last_rotation_key``); their first key may be slightly non-unit (normalise it when writing
  a conformant glTF file).
* :func:`resample` turns every track into LINEAR keys on a uniform grid (values from the sampler).
* :func:`reverse` mirrors times; CUBICSPLINE tangents are negated and swapped, STEP values shift by
  one key (a STEP value holds *after* its key, so played backwards it holds *before* it).
* :func:`compress` (from :mod:`skeletal.compress`) keeps as few keys per track as hold a world-space
  error bound (and rounds rotations to 16 bits where that fits); not exact by design.
* :func:`make_additive` transforms values (and CUBICSPLINE tangents) in closed form; no resampling is
  needed for any path or interpolation (see its docstring).

Rotation rows are compared up to sign where noted: ``q`` and ``-q`` are the same rotation, and slerp's
shortest-path rule may return either one for a reversed or re-keyed segment.

>>> import numpy as np
>>> from skeletal.clip import Clip, Track
>>> track = Track(0, "translation", "LINEAR", np.array([0, 2], np.float32),
...               np.array([[0, 0, 0], [4, 0, 0]], np.float32))
>>> part = subclip(Clip("slide", [track]), 0.5, 1.5)
>>> part.duration, part.tracks[0].values[:, 0].tolist()
(1.0, [1.0, 3.0])
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..anim.clip import Clip, Track, clip_from_keyframes
from ..errors import ClipError
from ..anim.rig import POSE_WIDTH
from ..anim.sampling import sample_tracks
from ..quat import quat_conjugate, quat_mul
from .compress import compress  # error-bounded key removal (skeletal/compress.py)

__all__ = [
    "subclip", "resample", "reverse", "make_additive", "apply_additive", "apply_additive_morph",
    "additive_delta", "identity_pose", "Keyframe", "clip_from_keyframe_list", "compress",
]

_POSE_SLICE = {"translation": slice(0, 3), "rotation": slice(3, 7), "scale": slice(7, 10)}


# ---------------------------------------------------------------------------------------------
# quaternion helpers (numpy, batch-first, xyzw). Candidates for skeletal.quat.


def _slerp_from_identity(dq: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``slerp(I, dq, w)`` along the shortest path, (..., 4); dq is normalised first (zero -> I)."""
    norm = np.linalg.norm(dq, axis=-1, keepdims=True)
    dq = np.divide(dq, norm, out=np.zeros_like(dq), where=norm > 0)
    dq[..., 3] = np.where(norm[..., 0] > 0, dq[..., 3], 1.0)
    dq = np.where(dq[..., 3:4] < 0, -dq, dq)  # shortest path: w >= 0
    vnorm = np.linalg.norm(dq[..., :3], axis=-1)
    theta = np.arctan2(vnorm, dq[..., 3])  # half-angle, in [0, pi/2]
    sin_theta = np.sin(theta)
    small = sin_theta < 1e-12
    factor = np.where(small, w, np.sin(w * theta) / np.where(small, 1.0, sin_theta))
    out = np.empty(np.broadcast_shapes(dq.shape, np.shape(w) + (4,)))
    out[..., :3] = dq[..., :3] * factor[..., None]
    out[..., 3] = np.cos(w * theta)
    return out


# ---------------------------------------------------------------------------------------------
# additive pose maths (reference implementation of clip.py's documented conventions)


def identity_pose(n: int) -> np.ndarray:
    """(n, 10) float64 identity rows (t 0, q (0, 0, 0, 1), s 1): the "rest" to sample additive clips on.

    Nodes an additive clip does not animate then get the identity delta.

    >>> identity_pose(1).tolist()
    [[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0]]
    """
    pose = np.zeros((n, POSE_WIDTH))
    pose[:, 6] = 1.0
    pose[:, 7:10] = 1.0
    return pose


def _weight_array(weight, lead_shape: tuple[int, ...]) -> np.ndarray:
    w = np.asarray(weight, dtype=np.float64)
    try:
        return np.broadcast_to(w, lead_shape) if lead_shape else w
    except ValueError:
        raise ClipError(f"weight of shape {w.shape} does not broadcast to the pose's leading shape {lead_shape}") from None


def apply_additive(base_pose: np.ndarray, additive_pose_delta: np.ndarray, weight=1.0) -> np.ndarray:
    """Apply additive delta rows to base pose rows with a weight; returns new float64 rows.

    ``base_pose`` and ``additive_pose_delta`` are (..., 10) rows ``t(3) q(4 xyzw) s(3)`` with any
    broadcastable leading shape (typically (N, 10) or (T, N, 10)); ``weight`` is a scalar or an array
    broadcastable to the leading shape (e.g. (N,) per-node masks). Per :class:`skeletal.clip.Clip`'s
    ``additive`` conventions::

        t = t_base + w * dt
        q = q_base * slerp(I, dq, w)        (shortest path; dq normalised)
        s = s_base * (1 + w * (ds - 1))

    Weight 0 returns the base rows unchanged (bit for bit); weight 1 with the delta of a pose ``p``
    against ``base`` (see :func:`additive_delta`) gives ``p`` back (rotation up to sign).

    >>> base = identity_pose(1); base[0, 0] = 1.0
    >>> delta = identity_pose(1); delta[0, 0] = 2.0; delta[0, 7:10] = 3.0
    >>> apply_additive(base, delta, 0.5)[0].tolist()
    [2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 2.0, 2.0, 2.0]
    """
    base = np.asarray(base_pose, dtype=np.float64)
    delta = np.asarray(additive_pose_delta, dtype=np.float64)
    if base.shape[-1:] != (POSE_WIDTH,) or delta.shape[-1:] != (POSE_WIDTH,):
        raise ClipError(f"pose rows must be (..., {POSE_WIDTH}), got {base.shape} and {delta.shape}")
    shape = np.broadcast_shapes(base.shape, delta.shape)
    w = _weight_array(weight, shape[:-1])
    out = np.empty(shape)
    out[..., 0:3] = base[..., 0:3] + w[..., None] * delta[..., 0:3]
    out[..., 3:7] = quat_mul(base[..., 3:7], _slerp_from_identity(delta[..., 3:7], w))
    out[..., 7:10] = base[..., 7:10] * (1.0 + w[..., None] * (delta[..., 7:10] - 1.0))
    return out


def apply_additive_morph(base_morph: np.ndarray, additive_morph_delta: np.ndarray, weight=1.0) -> np.ndarray:
    """Morph weights: ``m = m_base + w * dm`` ((..., M) arrays, weight scalar or broadcastable).

    >>> apply_additive_morph([0.5], [0.25], 2.0).tolist()
    [1.0]
    """
    base = np.asarray(base_morph, dtype=np.float64)
    delta = np.asarray(additive_morph_delta, dtype=np.float64)
    return base + np.asarray(weight, dtype=np.float64) * delta


def additive_delta(pose: np.ndarray, reference_pose: np.ndarray) -> np.ndarray:
    """Delta rows of ``pose`` against ``reference_pose`` ((..., 10) each): the inverse of
    :func:`apply_additive` at weight 1. ``dt = t - t_ref``, ``dq = conj(q_ref) * q`` (q_ref normalised),
    ``ds = s / s_ref``.

    >>> p = identity_pose(1); p[0, 7:10] = 4.0
    >>> additive_delta(p, identity_pose(1) * [1, 1, 1, 1, 1, 1, 1, 2, 2, 2])[0, 7:10].tolist()
    [2.0, 2.0, 2.0]
    """
    pose = np.asarray(pose, dtype=np.float64)
    ref = np.asarray(reference_pose, dtype=np.float64)
    shape = np.broadcast_shapes(pose.shape, ref.shape)
    out = np.empty(shape)
    out[..., 0:3] = pose[..., 0:3] - ref[..., 0:3]
    q_ref = ref[..., 3:7] / np.linalg.norm(ref[..., 3:7], axis=-1, keepdims=True)
    out[..., 3:7] = quat_mul(quat_conjugate(q_ref), pose[..., 3:7])
    out[..., 7:10] = pose[..., 7:10] / ref[..., 7:10]
    return out


# ---------------------------------------------------------------------------------------------
# shared internals


def _time_tolerance(duration: float) -> float:
    """How far past [0, duration] a requested time may lie and still count as the end (float32 noise)."""
    return 4.0 * float(np.finfo(np.float32).eps) * max(1.0, abs(duration))


def _check_fps(fps: float) -> float:
    fps = float(fps)
    if not (math.isfinite(fps) and fps > 0):
        raise ClipError(f"fps must be a positive number, got {fps}")
    return fps


def _cubic_keys(track: Track) -> np.ndarray:
    """A CUBICSPLINE track's values as (K, 3, C) float64: [in-tangent, value, out-tangent] per key."""
    return track.values.astype(np.float64).reshape(track.key_count, 3, track.width)


def _cubic_key_at(times: np.ndarray, keys: np.ndarray, x: float) -> np.ndarray:
    """A (3, C) CUBICSPLINE key [in, value, out] at time ``x`` that splits the track's curve exactly.

    ``times`` (K,) float64 of the float32 key times, ``keys`` (K, 3, C). Inside a segment: the raw
    (unnormalised) glTF Hermite value and its time derivative as both tangents (the sampler's
    interval rule ``t_k <= x < t_{k+1}`` and ``u = (x - t_k) / dt``). On a key: that key, copied.
    Before the first / after the last key (where the sampler holds the end value): the held value
    with zero tangents.
    """
    if x < times[0]:
        return np.stack([np.zeros_like(keys[0, 1]), keys[0, 1], np.zeros_like(keys[0, 1])])
    if x > times[-1]:
        return np.stack([np.zeros_like(keys[-1, 1]), keys[-1, 1], np.zeros_like(keys[-1, 1])])
    k = int(np.searchsorted(times, x, side="right")) - 1
    if times[k] == x:
        return keys[k].copy()
    t0, t1 = times[k], times[k + 1]
    dt = t1 - t0
    u = (x - t0) / dt
    u2, u3 = u * u, u * u * u
    v0, m0 = keys[k, 1], keys[k, 2]
    v1, m1 = keys[k + 1, 1], keys[k + 1, 0]
    value = (2 * u3 - 3 * u2 + 1) * v0 + (u3 - 2 * u2 + u) * dt * m0 + (-2 * u3 + 3 * u2) * v1 + (u3 - u2) * dt * m1
    # d/dt = (d/du) / dt; the Hermite basis derivatives are 6u^2-6u, 3u^2-4u+1, -6u^2+6u, 3u^2-2u.
    deriv = ((6 * u2 - 6 * u) * v0 + (3 * u2 - 4 * u + 1) * dt * m0 + (-6 * u2 + 6 * u) * v1
             + (3 * u2 - 2 * u) * dt * m1) / dt
    return np.stack([deriv, value, deriv])


def _unit_last_rotation_key(keys: np.ndarray) -> np.ndarray:
    """A CUBICSPLINE rotation track's keys (K, 3, 4) scaled by one positive factor so that the last
    key's value is unit (keys returned unchanged when it already is, to float32 precision).

    The sampler normalises interpolated CUBICSPLINE rotations, so scaling a whole track by a
    positive constant changes no interpolated pose; but at and after the last key it shows that
    key's value as stored, which must therefore be unit. (A split of a cubic rotation cannot keep
    both new end keys unit and stay exact: the only cubics whose normalisation equals the original
    one's are constant multiples of it. The first key, at time 0 in every track this is used on, is
    only ever reached through interpolation.)
    """
    norm = float(np.linalg.norm(keys[-1, 1]))
    if norm > 0 and abs(norm - 1.0) > 1e-6:
        keys = keys / norm
    return keys


def _sign_continuous(q: np.ndarray) -> np.ndarray:
    """Rotation keys (K, 4) with signs flipped so that each key's dot with the previous one is >= 0."""
    if len(q) < 2:
        return q
    dots = np.einsum("ij,ij->i", q[1:], q[:-1])
    signs = np.cumprod(np.where(dots < 0, -1.0, 1.0))
    out = q.copy()
    out[1:] *= signs[:, None].astype(q.dtype)
    return out


def _copy_markers(markers: dict[str, float]) -> dict[str, float]:
    return {k: float(v) for k, v in markers.items()}


# ---------------------------------------------------------------------------------------------
# subclip


def subclip(clip: Clip, start: float, end: float, *, fps: float | None = None, name: str | None = None) -> Clip:
    """The part of ``clip`` between ``start`` and ``end``, re-timed to begin at 0.

    Times are seconds, or frame numbers when ``fps`` is given (frame f is at f / fps). The range must
    satisfy ``0 <= start < end <= duration`` (ends within float32 noise of 0 or the duration are
    snapped to them); otherwise :class:`ClipError`.

    Contract: ``sample(subclip(c, a, b), tau) == sample(c, a + tau)`` for tau in [0, b - a] up to
    float32 rounding, for every interpolation. Every track gets a key at 0 and at ``b - a`` (so the
    new clip lasts exactly ``float32(b - a)``); keys strictly inside the range are kept unchanged
    (times shifted). STEP/LINEAR boundary values are what the sampler gives at a and b (lerp/slerp or
    the held step value); CUBICSPLINE boundary keys split the Hermite exactly (value and time
    derivative at the cut), and where a boundary falls in a track's hold region (before its first or
    after its last key) the neighbouring key's facing tangent is zeroed so the hold stays flat.
    CUBICSPLINE rotations: the cut values are the raw Hermite values (the sampler normalises after
    interpolating, so only the raw cubic splits exactly), and the track is then scaled by one
    positive factor that makes its last key unit, because the sampler shows that key as stored at
    the end; the scale changes no interpolated pose, but the first key may be non-unit.
    Markers inside [a, b] move with the range; the others are dropped. ``additive`` is kept.

    >>> import numpy as np
    >>> from skeletal.clip import Clip, Track
    >>> c = Clip("c", [Track(0, "translation", "STEP", np.array([0, 1, 2], np.float32),
    ...                      np.array([[0, 0, 0], [1, 0, 0], [2, 0, 0]], np.float32))])
    >>> s = subclip(c, 12, 36, fps=24)          # 0.5 s .. 1.5 s
    >>> s.tracks[0].times.tolist(), s.tracks[0].values[:, 0].tolist()
    ([0.0, 0.5, 1.0], [0.0, 1.0, 1.0])
    """
    if fps is not None:
        fps = _check_fps(fps)
        a, b = float(start) / fps, float(end) / fps
    else:
        a, b = float(start), float(end)
    d = clip.duration
    if not (math.isfinite(a) and math.isfinite(b)):
        raise ClipError(f"subclip range [{a}, {b}] s is not finite")
    if a >= b:
        raise ClipError(f"subclip start ({a:g} s) must be before end ({b:g} s)")
    tol = _time_tolerance(d)
    if a < -tol or b > d + tol:
        raise ClipError(f"subclip range [{a:g}, {b:g}] s is outside clip {clip.name!r}'s [0, {d:g}] s")
    a, b = max(a, 0.0), min(b, d)
    length = np.float32(b - a)
    if not (b > a and length > 0):
        raise ClipError(f"subclip range [{a:g}, {b:g}] s is empty once snapped to clip {clip.name!r}'s [0, {d:g}] s")

    ends = sample_tracks(clip, [a, b])
    tracks = []
    for track, end_values in zip(clip.tracks, ends):
        times = track.times.astype(np.float64)
        inner = np.nonzero((times > a) & (times < b))[0]
        new_inner = (times[inner] - a).astype(np.float32)
        keep = (new_inner > 0) & (new_inner < length)  # float32 rounding may land a key on an end
        inner, new_inner = inner[keep], new_inner[keep]
        new_times = np.concatenate([[np.float32(0)], new_inner, [length]]).astype(np.float32)
        if track.interpolation == "CUBICSPLINE":
            keys = _cubic_keys(track)
            new_keys = np.concatenate([_cubic_key_at(times, keys, a)[None], keys[inner], _cubic_key_at(times, keys, b)[None]])
            if a < times[0]:  # the start is in the hold before the first key: keep the hold flat
                new_keys[1, 0] = 0.0
            if b > times[-1]:  # the end is in the hold after the last key
                new_keys[-2, 2] = 0.0
            if track.path == "rotation":
                new_keys = _unit_last_rotation_key(new_keys)
            values = new_keys.reshape(-1, track.width)
        else:
            values = np.concatenate([end_values[:1], track.values[inner].astype(np.float64), end_values[1:]])
        tracks.append(Track(track.node, track.path, track.interpolation, new_times, values.astype(np.float32)))
    markers = {k: float(v) - a for k, v in clip.markers.items() if a - tol <= v <= b + tol}
    markers = {k: min(max(v, 0.0), float(length)) for k, v in markers.items()}
    return Clip(clip.name if name is None else name, tracks, markers, additive=clip.additive)


# ---------------------------------------------------------------------------------------------
# resample


def resample(clip: Clip, fps: float, *, name: str | None = None) -> Clip:
    """Every track re-keyed as LINEAR at ``k / fps`` for k = 0..ceil(d * fps), the last key exactly at
    the duration d (float32 grid times; a last grid step shorter than 1e-4 frame is merged into d).

    Values are the library sampler's values at the new keys, so the result is exact there (float32
    rounding aside). Rotation keys are made sign-continuous (a key whose dot with the previous is
    negative is negated), so slerp between neighbours is the short way. Consequences: a LINEAR clip
    whose keys all lie on the grid samples as before everywhere (lerp and slerp of a sub-segment
    reproduce the segment; keys reached by slerp or lerp at u = 0 come back bit for bit, those of
    nearly parallel rotations, which the sampler nlerps and so normalises, to float32 rounding);
    STEP jumps become one-frame ramps; CUBICSPLINE curves become their chords.
    A zero-duration clip gives one key per track. Markers are kept.

    >>> import numpy as np
    >>> from skeletal.clip import Clip, Track
    >>> c = Clip("c", [Track(0, "translation", "STEP", np.array([0, 1], np.float32),
    ...                      np.array([[0, 0, 0], [1, 0, 0]], np.float32))])
    >>> r = resample(c, 4)
    >>> r.tracks[0].interpolation, r.tracks[0].times.tolist(), r.tracks[0].values[:, 0].tolist()
    ('LINEAR', [0.0, 0.25, 0.5, 0.75, 1.0], [0.0, 0.0, 0.0, 0.0, 1.0])
    """
    fps = _check_fps(fps)
    d = clip.duration
    d32 = np.float32(d)
    last = int(math.ceil(d * fps - 1e-4)) if d > 0 else 0
    grid = (np.arange(last, dtype=np.float64) / fps).astype(np.float32)
    grid = grid[grid < d32]
    times = np.concatenate([grid, [d32]]).astype(np.float32)
    times64 = times.astype(np.float64)
    tracks = []
    for track, values in zip(clip.tracks, sample_tracks(clip, times64)):
        values = values.astype(np.float32)
        if track.path == "rotation":
            values = _sign_continuous(values)
        tracks.append(Track(track.node, track.path, "LINEAR", times.copy(), values))
    return Clip(clip.name if name is None else name, tracks, _copy_markers(clip.markers), additive=clip.additive)


# ---------------------------------------------------------------------------------------------
# reverse


def _strictly_increasing_from_end(times: np.ndarray) -> np.ndarray:
    """float32 times made strictly increasing by nudging earlier ones down by ulps (keeps the last).

    Only needed when two keys closer than half an ulp of the duration round to the same mirrored time.
    """
    t = times.copy()
    for i in range(len(t) - 1, 0, -1):
        if t[i - 1] >= t[i]:
            t[i - 1] = np.nextafter(t[i], np.float32(-np.inf))
    return t


def reverse(clip: Clip, *, name: str | None = None) -> Clip:
    """The clip played backwards: ``sample(reverse(c), t) == sample(c, d - t)`` (rotations up to
    sign, float32 rounding of the mirrored times aside).

    Key times become ``d - t`` in reverse order. LINEAR: values reversed. CUBICSPLINE: values
    reversed, tangents negated and in/out swapped (``r(s) = p(d - s)`` so ``r' = -p'``; a rotation
    track whose new last key is not unit is scaled to make it so, which changes no interpolated
    pose). STEP: a
    value holds from its key to the next, so backwards each value must start at the mirrored time of
    the *next* key: values shift by one, and a key at 0 carrying the last value is added when the
    track ends before d (equality then holds everywhere except exactly on key times, where the
    half-open intervals face the other way). If no track has a key at 0 (the clip starts with a
    hold), the earliest-starting tracks get a copy of their first key at 0 first, so the reversed
    clip keeps the duration. Markers are mirrored (``d - m``). ``reverse(reverse(c))`` equals ``c``
    (times up to float32 rounding of ``d - (d - t)``; a STEP track's last value is only kept when it
    equals the one before it or the track ends before d, since it is visible only at the instant d).

    >>> import numpy as np
    >>> from skeletal.clip import Clip, Track
    >>> c = Clip("c", [Track(0, "translation", "LINEAR", np.array([0, 1, 4], np.float32),
    ...                      np.array([[0, 0, 0], [1, 0, 0], [2, 0, 0]], np.float32))])
    >>> r = reverse(c)
    >>> r.tracks[0].times.tolist(), r.tracks[0].values[:, 0].tolist()
    ([0.0, 3.0, 4.0], [2.0, 1.0, 0.0])
    """
    d = clip.duration
    d32 = np.float32(d)
    first = min((float(t.times[0]) for t in clip.tracks), default=0.0)
    tracks = []
    for track in clip.tracks:
        times = track.times
        c = track.width
        if track.interpolation == "CUBICSPLINE":
            keys = _cubic_keys(track)
        else:
            keys = track.values.astype(np.float64)
        if first > 0 and float(times[0]) == first:
            # Make the leading hold explicit: a copy of the first key at 0 (flat tangents).
            times = np.concatenate([[np.float32(0)], times]).astype(np.float32)
            if track.interpolation == "CUBICSPLINE":
                hold = np.stack([np.zeros(c), keys[0, 1], np.zeros(c)])
                keys = np.concatenate([hold[None], keys])
                keys[1, 0] = 0.0
            else:
                keys = np.concatenate([keys[:1], keys])
        new_times = (np.float64(d32) - times[::-1].astype(np.float64)).astype(np.float32)
        new_times = _strictly_increasing_from_end(new_times)
        if track.interpolation == "CUBICSPLINE":
            flipped = keys[::-1]
            rev = np.stack([-flipped[:, 2], flipped[:, 1], -flipped[:, 0]], axis=1)
            if track.path == "rotation" and new_times[0] == 0:
                rev = _unit_last_rotation_key(rev)  # the old first key is now held at the end
            values = rev.reshape(-1, c)
        elif track.interpolation == "LINEAR":
            values = keys[::-1]
        else:  # STEP: [v_{K-2}, ..., v_0, v_0], plus (0, v_{K-1}) in front when the track ends early
            values = np.concatenate([keys[::-1][1:], keys[:1]])
            if new_times[0] > 0:
                new_times = np.concatenate([[np.float32(0)], new_times]).astype(np.float32)
                values = np.concatenate([keys[-1:], values])
        tracks.append(Track(track.node, track.path, track.interpolation, new_times, values.astype(np.float32)))
    markers = {k: float(d32) - float(v) for k, v in clip.markers.items()}
    return Clip(clip.name if name is None else name, tracks, markers, additive=clip.additive)


# ---------------------------------------------------------------------------------------------
# additive clips


def _rest_value(track: Track, rest, rest_morph, morph_start, ref_name: str) -> np.ndarray:
    where = f"node {track.node} {track.path}"
    if track.path == "weights":
        if rest_morph is None or morph_start is None:
            raise ClipError(
                f"make_additive: reference clip {ref_name!r} has no weights track for node {track.node}; pass "
                "rest_morph=asset.rest_morph and morph_start=asset.morph_start to use the default weights there")
        morph_start = np.asarray(morph_start)
        if track.node + 1 >= len(morph_start):
            raise ClipError(f"make_additive: morph_start has no entry for node {track.node}")
        value = np.asarray(rest_morph, dtype=np.float64)[morph_start[track.node]:morph_start[track.node + 1]]
    else:
        if rest is None:
            raise ClipError(
                f"make_additive: reference clip {ref_name!r} has no {track.path} track for node {track.node}; "
                "pass rest=asset.rig.rest (the (N, 10) rest pose) to use the rest pose there")
        rest = np.asarray(rest, dtype=np.float64)
        if rest.ndim != 2 or rest.shape[1] != POSE_WIDTH or track.node >= len(rest):
            raise ClipError(f"make_additive: rest pose of shape {rest.shape} has no row for node {track.node}")
        value = rest[track.node, _POSE_SLICE[track.path]]
    if value.shape != (track.width,):
        raise ClipError(f"make_additive: reference for {where} has {value.size} values, the track {track.width}")
    return value


def _delta_track(track: Track, ref: np.ndarray) -> Track:
    """A track's values (and CUBICSPLINE tangents) turned into deltas from ``ref`` (C,), in closed form."""
    values = track.values.astype(np.float64)
    cubic = track.interpolation == "CUBICSPLINE"
    rows = values.reshape(track.key_count, 3, track.width) if cubic else values[:, None, :]
    if track.path in ("translation", "weights"):
        rows[:, 1 if cubic else 0] -= ref  # values only: tangents of v - c are the tangents of v
    elif track.path == "scale":
        rows /= ref  # values and tangents: (s / c)' = s' / c
    else:
        # conj(q_ref) * q for values and tangents: left multiplication by a unit quaternion is linear
        # (Hermite commutes) and an isometry of S^3 (slerp, its shortest-path test and the nlerp
        # threshold see the same dot products; normalisation commutes).
        rows[...] = quat_mul(quat_conjugate(ref), rows)
    return Track(track.node, track.path, track.interpolation, track.times.copy(), values.astype(np.float32))


def make_additive(
    clip: Clip,
    reference: Clip | None = None,
    *,
    reference_time: float = 0.0,
    rest: np.ndarray | None = None,
    rest_morph: np.ndarray | None = None,
    morph_start: np.ndarray | None = None,
    name: str | None = None,
) -> Clip:
    """An additive clip (``additive=True``): ``clip``'s tracks as differences from a reference pose.

    Conventions (clip.py's ``Clip.additive`` comment): translation ``t - t_ref``; rotation
    ``conj(q_ref) * q`` (Hamilton, xyzw; q_ref normalised, so conj is the inverse); scale
    ``s / s_ref``; weights ``m - m_ref``. Apply with :func:`apply_additive` on poses sampled on
    :func:`identity_pose` (untouched nodes then carry the identity delta).

    The reference pose is ``clip``'s own pose at ``reference_time`` (default 0, the first frame), or,
    when ``reference`` is given, that clip's pose at ``reference_time``. For a (node, path) that the
    reference clip does not animate, the ``rest`` pose row is used (``asset.rig.rest``), or for
    weights ``rest_morph[morph_start[n]:morph_start[n + 1]]`` (``asset.rest_morph``,
    ``asset.morph_start``); a :class:`ClipError` names what to pass when one is needed but missing.
    When tracks share a (node, path), the last one wins, as in the sampler.

    Exactness: every interpolation keeps its keys and is transformed in closed form, no resampling.
    Translation/weights: values shifted, CUBICSPLINE tangents unchanged. Scale: values and tangents
    divided by s_ref (componentwise; a zero component is an error). Rotation: values and tangents
    left-multiplied by conj(q_ref), which commutes with slerp (shortest path and nlerp threshold
    included) and with the Hermite spline and its normalisation. So ``sample(additive, t)`` equals
    :func:`additive_delta` of ``sample(clip, t)`` against the reference pose, up to float32 rounding.

    >>> import numpy as np
    >>> from skeletal.clip import Clip, Track
    >>> c = Clip("c", [Track(0, "translation", "LINEAR", np.array([0, 1], np.float32),
    ...                      np.array([[1, 0, 0], [3, 0, 0]], np.float32))])
    >>> a = make_additive(c)
    >>> a.additive, a.tracks[0].values[:, 0].tolist()
    (True, [0.0, 2.0])
    """
    if clip.additive:
        raise ClipError(f"make_additive: clip {clip.name!r} is already additive")
    ref_clip = clip if reference is None else reference
    if ref_clip.additive:
        raise ClipError(f"make_additive: reference clip {ref_clip.name!r} is additive, not a pose")
    rt = float(reference_time)
    tol = _time_tolerance(ref_clip.duration)
    if not (math.isfinite(rt) and -tol <= rt <= ref_clip.duration + tol):
        raise ClipError(
            f"make_additive: reference_time {rt:g} s is outside clip {ref_clip.name!r}'s [0, {ref_clip.duration:g}] s")
    rt = min(max(rt, 0.0), ref_clip.duration)
    ref_values: dict[tuple[int, str], np.ndarray] = {}
    for track, values in zip(ref_clip.tracks, sample_tracks(ref_clip, [rt])):
        ref_values[(track.node, track.path)] = values[0]
    tracks = []
    for track in clip.tracks:
        ref = ref_values.get((track.node, track.path))
        if ref is None:
            ref = _rest_value(track, rest, rest_morph, morph_start, ref_clip.name)
        if ref.shape != (track.width,):
            raise ClipError(
                f"make_additive: reference for node {track.node} {track.path} has {ref.size} values, the track {track.width}")
        if track.path == "scale" and np.any(ref == 0):
            raise ClipError(f"make_additive: reference scale of node {track.node} has a zero component {ref.tolist()}")
        if track.path == "rotation":
            norm = float(np.linalg.norm(ref))
            if not norm > 0:
                raise ClipError(f"make_additive: reference rotation of node {track.node} is zero")
            ref = ref / norm
        tracks.append(_delta_track(track, ref))
    return Clip(clip.name if name is None else name, tracks, _copy_markers(clip.markers), additive=True)


# ---------------------------------------------------------------------------------------------
# keyframe lists (seed 004)


@dataclass
class Keyframe:
    """One whole-pose keyframe, as in seed 004's ``struct Keyframe``.

    ``duration``: seconds until the next keyframe (the last keyframe's is unused). ``positions``
    (J, 3), ``orientations`` (J, 4) xyzw, ``scales`` (J, 3) for the J nodes given to
    :func:`clip_from_keyframe_list`; None means the path is not animated (then it must be None in
    every keyframe).
    """

    duration: float
    positions: np.ndarray | None = None
    orientations: np.ndarray | None = None
    scales: np.ndarray | None = None


def clip_from_keyframe_list(
    name: str, nodes: Sequence[int], keyframes: Sequence[Keyframe], interpolation: str = "LINEAR"
) -> Clip:
    """A clip from seed 004's ``Animation{name, frames}``: keyframe k sits at the sum of the earlier
    keyframes' durations (via :func:`skeletal.clip.clip_from_keyframes`).

    >>> import numpy as np
    >>> frames = [Keyframe(0.5, positions=np.zeros((1, 3))), Keyframe(0.0, positions=np.ones((1, 3)))]
    >>> c = clip_from_keyframe_list("hop", [0], frames)
    >>> c.duration, c.tracks[0].values[:, 1].tolist()
    (0.5, [0.0, 1.0])
    """
    frames = list(keyframes)
    if not frames:
        raise ClipError(f"clip {name!r}: no keyframes")
    durations = [float(f.duration) for f in frames]
    for k, dur in enumerate(durations[:-1]):
        if not (math.isfinite(dur) and dur > 0):
            raise ClipError(f"clip {name!r}: keyframe {k} has duration {dur:g}; all but the last must be positive")
    stacked = {}
    for attr in ("positions", "orientations", "scales"):
        present = [getattr(f, attr) is not None for f in frames]
        if any(present) and not all(present):
            missing = present.index(False)
            raise ClipError(f"clip {name!r}: keyframe {missing} has no {attr} while others do")
        stacked[attr] = np.stack([np.asarray(getattr(f, attr), dtype=np.float32) for f in frames]) if all(present) else None
    return clip_from_keyframes(name, nodes, durations, translations=stacked["positions"],
                               rotations=stacked["orientations"], scales=stacked["scales"],
                               interpolation=interpolation)
