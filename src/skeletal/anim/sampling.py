"""Sampling kernels: a clip at a time -> local pose rows and morph weights.

The kernels read a :class:`skeletal.clip.Clip`'s packed arrays and write every track of the clip in
one compiled loop (no Python per track). Two key lookups:

* ``cursors`` (one int per track, owned by the caller): the key found last time. Sequential playback
  checks that key and the next before anything else, so a frame costs O(1) per track (seeds 000, 003).
* binary search, when the cursor misses (random access, seeks, loop wraps).

Conventions (glTF + three.js): the interval is the one with ``t_k <= t < t_{k+1}`` comparing the
float64 query time with the float32 key times; before the first key a track holds its first value,
after the last key its last value. LINEAR rotations slerp along the shortest path; CUBICSPLINE is the
glTF Hermite spline with tangents scaled by the key interval, rotations normalised after.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import numpy.typing as npt
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic, overload

from .clip import LOOP_CODE, PATH_POSE_OFFSET, Clip, Track
from ..quat import KeyPairIR, keys_f32_into_f64, normalize4_inplace, slerp_into

STEP, LINEAR, CUBICSPLINE = 0, 1, 2
ROTATION, WEIGHTS = 1, 3


@njit(cache=True, forceinline=True)
def loop_time(t, duration, loop):
    """Clip-local time for a query time (see :func:`skeletal.clip.map_time`)."""
    if duration <= 0.0:
        return 0.0
    if loop == 0:  # clamp
        return min(max(t, 0.0), duration)
    if loop == 1:  # repeat
        return t - duration * np.floor(t / duration)
    m = t - 2.0 * duration * np.floor(t / (2.0 * duration))
    return 2.0 * duration - m if m > duration else m


@njit(cache=True, forceinline=True)
def find_key(times, start, count, t, cursor):
    """Index k (relative to ``start``) of the key interval holding t: ``times[k] <= t < times[k+1]``.

    Returns -1 before the first key and ``count - 1`` at or after the last. ``cursor`` is the previous
    answer; it and its successor are tried first.
    """
    if t < times[start]:
        return -1
    last = count - 1
    if t >= times[start + last]:
        return last
    c = cursor
    if 0 <= c < last:
        if times[start + c] <= t:
            if t < times[start + c + 1]:
                return c
            if c + 2 <= last and t < times[start + c + 2]:
                return c + 1
    lo = 0
    hi = last  # invariant: times[lo] <= t < times[hi]
    while hi - lo > 1:
        mid = (lo + hi) >> 1
        if times[start + mid] <= t:
            lo = mid
        else:
            hi = mid
    return lo


@njit(cache=True, forceinline=True)
def nlerp_into(out, o, ax, ay, az, aw, bx, by, bz, bw, u):
    """Normalised lerp along the shortest path: the crowd's fast rotation interpolation. Its angle
    error against slerp grows with the cube of the key spacing: 1e-3 rad for keys 37 degrees apart,
    below 1e-7 rad for keys 3 degrees apart."""
    if ax * bx + ay * by + az * bz + aw * bw < 0.0:
        bx, by, bz, bw = -bx, -by, -bz, -bw
    x = ax + (bx - ax) * u
    y = ay + (by - ay) * u
    z = az + (bz - az) * u
    w = aw + (bw - aw) * u
    inv = 1.0 / np.sqrt(x * x + y * y + z * z + w * w)
    out[o] = x * inv
    out[o + 1] = y * inv
    out[o + 2] = z * inv
    out[o + 3] = w * inv


@intrinsic
def _lerp3_f32_f64(typingctx, out, o, values, a, u):
    """:func:`lerp3_into`'s vector form: float32 keys ``values[a:a+3]`` and ``values[a+3:a+6]``, each
    read as 4 floats (so ``values[a+6]`` is read too and ignored: the caller checks ``a + 7 <=
    len(values)``), widened to float64 and lerped 4 lanes wide with the scalar code's arithmetic
    (``k0 * (1 - u) + k1 * u``, no fused multiply-add: the same bits); lanes 0-2 are stored to
    float64 ``out[o:o+3]``. Nothing is bounds-checked; ``out`` and ``values`` 1-D C-contiguous."""
    if not keys_f32_into_f64(out, o, values, a, u):
        return None

    def codegen(context, builder, signature, args):
        k = KeyPairIR(context, builder, signature, args)
        v = k.lerp(k.load4(0), k.load4(3))
        i32, v2d = k.i32, ir.VectorType(k.f64, 2)
        low = builder.shuffle_vector(v, ir.Constant(k.v4d, ir.Undefined), ir.Constant(ir.VectorType(i32, 2), [0, 1]))
        builder.store(low, builder.bitcast(builder.gep(k.dst.data, [k.at_o]), v2d.as_pointer()), align=8)
        builder.store(builder.extract_element(v, ir.Constant(i32, 2)),
                      builder.gep(k.dst.data, [builder.add(k.at_o, ir.Constant(k.i64, 2))]))
        return context.get_dummy_value()

    return types.void(out, o, values, a, u), codegen


def lerp3_into(out, o, values, a, u):  # pragma: no cover - compiled through the overload below
    """``out[o:o+3] = values[a:a+3] * (1 - u) + values[a+3:a+6] * u``: a LINEAR translation or scale
    between two neighbouring keys (``a`` the first key's first float, unsigned or non-negative), in
    kernels only. float32 keys into a float64 ``out`` take a 4-wide form with the same bits (a
    segment of 101 such tracks of Soldier's Walk plus one: 0.26 -> 0.13 us, thread CPU, load 3.3); other
    dtypes the scalar loop.

    >>> lerp3_into(flat, tracks[k, TK_OUT], values, start + key * 3, u)   # doctest: +SKIP
    """
    raise NotImplementedError


@overload(lerp3_into, jit_options={"forceinline": True})
def _ol_lerp3_into(out, o, values, a, u):
    if (isinstance(out, types.Array) and out.dtype == types.float64 and out.layout == "C" and out.ndim == 1
            and isinstance(values, types.Array) and values.dtype == types.float32 and values.layout == "C"
            and values.ndim == 1):
        def vector(out, o, values, a, u):
            if np.uint64(a) + np.uint64(7) <= np.uint64(values.shape[0]):
                _lerp3_f32_f64(out, o, values, a, u)
            else:  # the last key of the last track: no float to read past it
                _lerp3_scalar(out, np.int64(o), values, np.int64(a), u)

        return vector

    def scalar(out, o, values, a, u):
        _lerp3_scalar(out, np.int64(o), values, np.int64(a), u)

    return scalar


@njit(cache=True, forceinline=True)
def _lerp3_scalar(out, o, values, a, u):
    s = 1.0 - u
    for i in range(3):
        out[o + i] = np.float64(values[a + i]) * s + np.float64(values[a + 3 + i]) * u


@njit(cache=True, forceinline=True)
def locate_key(times, start, count, t, cursor):
    """Where t falls on a key timeline: ``(key, u, span)`` with ``key`` as :func:`find_key` returns it,
    ``u`` in [0, 1) the fraction of the way to the next key and ``span`` the interval's length
    (seconds, float64). Outside the keys (``key`` -1 or ``count - 1``) u and span are 0."""
    key = find_key(times, start, count, t, cursor)
    if key < 0 or key >= count - 1:
        return key, 0.0, 0.0
    t0 = np.float64(times[start + key])
    span = np.float64(times[start + key + 1]) - t0
    return key, (t - t0) / span, span


@njit(cache=True, forceinline=True)
def key_stride(c, kind):
    """Floats per key of a ``c``-wide track (in-tangent, value, out-tangent for CUBICSPLINE) and the
    value's offset inside a key."""
    return (3 * c, c) if kind == CUBICSPLINE else (c, 0)


@njit(cache=True)  # not inlined: the general path (STEP, CUBICSPLINE, any width)
def interpolate_between(values, a, b, c, kind, rotation, u, span, out, o, nlerp=False):
    """Write the LINEAR or CUBICSPLINE interpolation between the keys whose records start at
    ``values[a]`` and ``values[b]`` (fraction ``u`` of the way, ``span`` seconds apart) to
    ``out[o : o + c]``: lerp, slerp (``rotation``; normalised lerp with ``nlerp``, see
    :func:`nlerp_into`) or the glTF Hermite spline on [in-tangent, value, out-tangent] records
    (normalised for rotations). The keys need not be neighbours: key reduction evaluates a track
    between the keys it keeps."""
    if kind == LINEAR:
        if rotation and nlerp:
            nlerp_into(
                out, o,
                np.float64(values[a]), np.float64(values[a + 1]), np.float64(values[a + 2]), np.float64(values[a + 3]),
                np.float64(values[b]), np.float64(values[b + 1]), np.float64(values[b + 2]), np.float64(values[b + 3]),
                u,
            )
        elif rotation:
            slerp_into(
                out, o,
                np.float64(values[a]), np.float64(values[a + 1]), np.float64(values[a + 2]), np.float64(values[a + 3]),
                np.float64(values[b]), np.float64(values[b + 1]), np.float64(values[b + 2]), np.float64(values[b + 3]),
                u,
            )
        else:
            for i in range(c):
                out[o + i] = np.float64(values[a + i]) * (1.0 - u) + np.float64(values[b + i]) * u
        return
    u2 = u * u
    u3 = u2 * u
    h00 = 2.0 * u3 - 3.0 * u2 + 1.0
    h10 = (u3 - 2.0 * u2 + u) * span
    h01 = -2.0 * u3 + 3.0 * u2
    h11 = (u3 - u2) * span
    for i in range(c):
        v0 = np.float64(values[a + c + i])
        m0 = np.float64(values[a + 2 * c + i])
        v1 = np.float64(values[b + c + i])
        m1 = np.float64(values[b + i])
        out[o + i] = h00 * v0 + h10 * m0 + h01 * v1 + h11 * m1
    if rotation:
        normalize4_inplace(out, o)


@njit(cache=True)  # not inlined: the general path (STEP, CUBICSPLINE, any width)
def interpolate_into(values, vs, c, kind, rotation, key, u, span, count, out, o, nlerp=False):
    """Write one track between its keys ``key`` and ``key + 1`` (fraction ``u``, interval ``span``
    seconds; see :func:`locate_key`) to ``out[o : o + c]``.

    ``values[vs:]`` holds the track's keys (``c`` floats each, or in-tangent/value/out-tangent
    triples for CUBICSPLINE), ``kind`` is STEP/LINEAR/CUBICSPLINE, ``count`` the key count and
    ``rotation`` says the values are xyzw quaternions (see :func:`interpolate_between`). ``key`` -1
    (before the first key) or ``count - 1`` (at or after the last) holds that key's value.
    """
    stride, mid = key_stride(c, kind)
    if key < 0 or key >= count - 1 or kind == STEP:
        base = vs + max(key, 0) * stride + mid
        for i in range(c):
            out[o + i] = values[base + i]
        return
    a = vs + key * stride
    interpolate_between(values, a, a + stride, c, kind, rotation, u, span, out, o, nlerp)


@njit(cache=True, forceinline=True)
def sample_track_into(k, t, key_start, times, value_start, values, width, interp, path, cursor, out, o, nlerp=False):
    """Write track ``k`` of a packed clip at clip-local time ``t`` to ``out[o : o + width[k]]``;
    return the key index found (the caller's new cursor for this track)."""
    ks = key_start[k]
    count = key_start[k + 1] - ks
    key, u, span = locate_key(times, ks, count, t, cursor)
    interpolate_into(values, value_start[k], width[k], interp[k], path[k] == ROTATION, key, u, span, count, out, o, nlerp)
    return max(key, 0)


@njit(cache=True)
def sample_clip_into(
    t, key_start, times, value_start, values, width, interp, path, node, morph_start, cursors, pose, morph
):
    """Write every track of a clip at clip-local time ``t`` into ``pose`` (N, 10) and ``morph`` (M,).

    Rows of nodes the clip does not animate are left as they are: callers start from the rest pose.
    ``cursors`` (n_tracks,) int64 is read and updated.
    """
    for k in range(len(width)):
        p = path[k]
        if p == WEIGHTS:
            cursors[k] = sample_track_into(
                k, t, key_start, times, value_start, values, width, interp, path, cursors[k], morph, morph_start[node[k]]
            )
        else:
            cursors[k] = sample_track_into(
                k, t, key_start, times, value_start, values, width, interp, path, cursors[k], pose[node[k]], PATH_POSE_OFFSET[p]
            )


@njit(cache=True, parallel=True)
def sample_clip_many(
    query_times, duration, loop, rest, rest_morph,
    key_start, times, value_start, values, width, interp, path, node, morph_start, pose_out, morph_out,
):
    """Sample one clip at T query times in parallel: ``pose_out`` (T, N, 10), ``morph_out`` (T, M).

    Each output starts as the rest pose; times are mapped through the loop mode first.
    """
    for i in prange(len(query_times)):
        pose_out[i] = rest
        morph_out[i] = rest_morph
        cursors = np.zeros(len(width), dtype=np.int64)
        t = loop_time(query_times[i], duration, loop)
        sample_clip_into(
            t, key_start, times, value_start, values, width, interp, path, node, morph_start, cursors,
            pose_out[i], morph_out[i],
        )


def sample(
    clip: Clip,
    times: np.ndarray | float,
    rest: np.ndarray,
    morph_start: np.ndarray,
    rest_morph: np.ndarray,
    loop: str = "clamp",
    dtype: npt.DTypeLike = np.float64,
) -> tuple[np.ndarray, np.ndarray]:
    """Local poses of a clip at query times: returns ``pose`` (T, N, 10) and ``morph`` (T, M).

    ``rest`` (N, 10) is the rig's rest pose, ``morph_start`` (N+1,) the offset of each rig node's morph
    weights in the flat morph array, ``rest_morph`` (M,) their defaults.
    """
    query = np.atleast_1d(np.asarray(times, dtype=np.float64))
    pose = np.empty((len(query),) + rest.shape, dtype=dtype)
    morph = np.empty((len(query), len(rest_morph)), dtype=dtype)
    sample_clip_many(
        query, clip.duration, LOOP_CODE[loop], rest.astype(dtype), rest_morph.astype(dtype),
        clip.key_start, clip.times, clip.value_start, clip.values, clip.width, clip.interp, clip.path,
        clip.node, morph_start, pose, morph,
    )
    return pose, morph


_POSE_START = {"translation": 0, "rotation": 3, "scale": 7}


def sample_tracks(clip: Clip, times: Sequence[float] | np.ndarray) -> list[np.ndarray]:
    """Each track of ``clip`` as :func:`skeletal.sampling.sample` evaluates it at ``times`` (clamped):
    a list of (T, C) float64 arrays, one per track, in track order.

    Every track is re-addressed to its own virtual node (and its own morph slots), so tracks that
    share a node/path are evaluated separately; one kernel call does all of them.
    """
    tracks = clip.tracks
    if not tracks:
        return []
    rest = np.zeros((len(tracks), 10))
    rest[:, 6:10] = 1.0  # the identity: translation 0, rotation (0, 0, 0, 1), scale 1
    virtual = [Track(i, t.path, t.interpolation, t.times, t.values) for i, t in enumerate(tracks)]
    counts = [t.width if t.path == "weights" else 0 for t in tracks]
    morph_start = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    pose, morph = sample(Clip(clip.name, virtual), np.asarray(times, dtype=np.float64),
                         rest, morph_start, np.zeros(int(morph_start[-1])))
    out = []
    for i, t in enumerate(tracks):
        if t.path == "weights":
            out.append(morph[:, morph_start[i]:morph_start[i + 1]].copy())
        else:
            start = _POSE_START[t.path]
            out.append(pose[:, i, start:start + t.width].copy())
    return out
