"""One character's tracks eight at a time: the single-action path's slerp rotation and LINEAR
translation / scale segments repacked track-major across lanes (structure of arrays), sampled in
8-wide float64 vectors.

The single-action sampler (:func:`skeletal.playback.kernels._sample_clip_direct`) slerps each LINEAR
rotation track on its own: a branch per track on the key's kind (tabulated angle, nearly parallel,
identical keys), then a square root and a division for one quaternion. Here a segment's tracks
(those sharing one key timeline) are laid out so that one key of eight tracks is four contiguous
float32 vectors (x, y, z, w), the per-key slerp tables beside them, and the kinds a group of eight
needs are computed for all its lanes and selected per lane: no branch per track, one vector square
root and division for eight tracks. Every lane runs the scalar path's IEEE operations in its order
(no fused multiply-add), so the result is the same bits (``tests/test_single_lanes.py``).

Layout, for each packed segment of m tracks padded to ``M`` lanes (a multiple of :data:`LANES`),
per key interval (K - 1 of them). Each interval orders its lanes with the tabulated angles first, so
that most groups of eight need one formula (:data:`KIND_TABULATED` or :data:`KIND_NEAR`) and at most
one both; padding repeats the interval's last lane, so its lanes write the same values to the same
place:

* ``lanes_values`` float32: ``[interval][component][lane]``, the first key's x y z w then the
  second key's (8 x M floats an interval)
* ``lanes_coef`` float64: ``[interval][theta, signed inverse sine][lane]``: theta > 0 a tabulated
  slerp (:attr:`~skeletal.playback.clipset.ClipSet.slerp_keys`), its inverse sine carrying the sign
  of the second key (negative: a . b < 0); theta 0 nearly parallel keys (normalised lerp, the
  coefficient +-1 the second key's sign); theta -1 identical keys (the first key as stored)
* ``lanes_out`` int64 ``[interval][lane]``: each lane's offset in the flattened (N * 10) pose
* ``lanes_kind`` int64 ``[interval][group]``: the formulas a group of eight needs (bits)
* ``lanes_seg`` (G, 5) int64 per segment: offsets of its intervals in the four arrays above, and M;
  -1 when the segment is not packed

LINEAR vector segments (LERP3, at least :data:`LERP_MIN_TRACKS` tracks) have one layout for all
their keys: ``lerp_values`` float32 ``[key][component][lane]`` (3 x M floats a key), ``lerp_out``
int64 (M,) each lane's pose offset, ``lerp_seg`` (G, 3) int64 (offsets in the two, M; -1 when not
packed); a lane is ``k0 * (1 - u) + k1 * u`` per component, as :func:`skeletal.sampling.lerp3_into`.

>>> packed = pack_rotation_lanes(segments, timeline_keys, hot, values, slerp_table)   # doctest: +SKIP
>>> packed.update(pack_lerp_lanes(segments, timeline_keys, hot, values))           # doctest: +SKIP
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from ..quat import NEAR_FLIP, NEAR_SAME
from .clipset import SEG_END, SEG_FAST_END, SEG_FIRST, SEG_KIND, SEG_LERP3, SEG_NLERP, SEG_SLERP, SEG_TIMELINE

#: tracks per vector (8 float64 lanes: one AVX-512 register, two AVX2 ones)
LANES = 8
#: ``lanes_seg`` columns
LS_VALUES, LS_COEF, LS_OUT, LS_KIND, LS_WIDTH = 0, 1, 2, 3, 4
#: ``lerp_seg`` columns
LL_VALUES, LL_OUT, LL_WIDTH = 0, 1, 2
#: LERP3 segments with fewer tracks stay on the one-track loop (a group of eight for one or two
#: tracks costs more than they do)
LERP_MIN_TRACKS = 4
#: ``lanes_kind`` bits: a group of eight lanes holds tabulated angles / nearly parallel or identical keys
KIND_TABULATED, KIND_NEAR = 1, 2
# hot_tracks columns (see kernels.hot_tracks)
_HOT_VALUE_START, _HOT_OUT, _HOT_KEY_START = 0, 1, 2

# sin_quarter's coefficients, innermost first (skeletal.quat._sin_quarter)
_SIN_COEF = (1.9572941063391263e-20, -8.22063524662433e-18, 2.8114572543455206e-15, -7.647163731819816e-13,
             1.6059043836821613e-10, -2.505210838544172e-08, 2.7557319223985893e-06, -0.0001984126984126984,
             0.008333333333333333, -0.16666666666666666)


def pack_rotation_lanes(segments: np.ndarray, timeline_keys: np.ndarray, hot: np.ndarray, values: np.ndarray,
                        slerp_table: np.ndarray, wanted: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The lane layout (module docstring) of every rotation segment's slerp tracks (``SEG_FAST_END``
    to ``SEG_END`` of SLERP and NLERP segments) with at least two keys. ``hot``: the clip set's
    :func:`~skeletal.playback.kernels.hot_tracks`; ``values`` its float32 keys; ``slerp_table``
    :func:`skeletal.quat.near_slerp_table` of its ``slerp_keys``. Float64 keys are not packed (the
    layout is float32): every segment then says -1; so does every segment ``wanted`` (G,) bool leaves
    out. Returns the five arrays by their job field names.

    >>> packed = pack_rotation_lanes(segments, cs.timeline_keys, hot, cs.values, table)  # doctest: +SKIP
    """
    seg = np.full((len(segments), 5), -1, np.int64)
    vals, coefs, outs, kinds = [], [], [], []
    at = np.zeros(4, np.int64)  # next offset in vals, coefs, outs, kinds
    if values.dtype == np.float32:
        for g in range(len(segments)):
            if segments[g, SEG_KIND] not in (SEG_SLERP, SEG_NLERP) or (wanted is not None and not wanted[g]):
                continue
            first, end = int(segments[g, SEG_FAST_END]), int(segments[g, SEG_END])
            count = int(timeline_keys[segments[g, SEG_TIMELINE], 1])
            if end <= first or count < 2:
                continue
            tracks = np.arange(first, end)
            width = -(-len(tracks) // LANES) * LANES
            intervals = np.arange(count - 1)
            rows = hot[tracks, _HOT_KEY_START].astype(np.int64)[None, :] + intervals[:, None]  # (K - 1, m)
            # per interval, the tabulated tracks first: most groups of eight then need one formula only
            order = np.argsort(slerp_table[rows, 0] <= 0.0, axis=1, kind="stable")
            order = np.concatenate([order, np.repeat(order[:, -1:], width - len(tracks), axis=1)], axis=1)  # padding
            lane_tracks = tracks[order]  # (K - 1, width)
            rows = np.take_along_axis(rows, order, axis=1)
            start = hot[lane_tracks, _HOT_VALUE_START].astype(np.int64) + 4 * intervals[:, None]
            # (K - 1, 8, width): the interval's first key's x y z w, then the second key's
            q = values[start[:, None, :] + np.arange(8)[None, :, None]]
            qa, qb = q[:, :4].astype(np.float64), q[:, 4:].astype(np.float64)
            dot = ((qa[:, 0] * qb[:, 0] + qa[:, 1] * qb[:, 1]) + qa[:, 2] * qb[:, 2]) + qa[:, 3] * qb[:, 3]
            theta, column = slerp_table[rows, 0], slerp_table[rows, 1]
            tabulated = theta > 0.0
            flip = np.where(tabulated, dot < 0.0, column == NEAR_FLIP)
            coef = np.empty((count - 1, 2, width))
            coef[:, 0] = np.where(tabulated, theta, np.where(column == NEAR_SAME, -1.0, 0.0))
            coef[:, 1] = np.where(tabulated, column, 1.0) * np.where(flip, -1.0, 1.0)
            groups = tabulated.reshape(count - 1, width // LANES, LANES)
            kind = np.where(groups.any(axis=2), KIND_TABULATED, 0) | np.where((~groups).any(axis=2), KIND_NEAR, 0)
            vals.append(np.ascontiguousarray(q, np.float32).reshape(-1))
            coefs.append(coef.reshape(-1))
            outs.append(hot[lane_tracks, _HOT_OUT].astype(np.int64).reshape(-1))
            kinds.append(kind.astype(np.int64).reshape(-1))
            seg[g, :4] = at
            seg[g, LS_WIDTH] = width
            at += (vals[-1].size, coefs[-1].size, outs[-1].size, kinds[-1].size)
    return {
        "lanes_values": np.concatenate(vals) if vals else np.zeros(0, np.float32),
        "lanes_coef": np.concatenate(coefs) if coefs else np.zeros(0),
        "lanes_out": np.concatenate(outs) if outs else np.zeros(0, np.int64),
        "lanes_kind": np.concatenate(kinds) if kinds else np.zeros(0, np.int64),
        "lanes_seg": seg,
    }


def pack_lerp_lanes(segments: np.ndarray, timeline_keys: np.ndarray, hot: np.ndarray,
                    values: np.ndarray, wanted: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The lane layout (module docstring) of every LERP3 segment with at least
    :data:`LERP_MIN_TRACKS` tracks and two keys (of those ``wanted`` (G,) bool keeps); float64 keys
    are not packed. Returns the three arrays by their job field names.

    >>> packed = pack_lerp_lanes(segments, cs.timeline_keys, hot, cs.values)       # doctest: +SKIP
    """
    seg = np.full((len(segments), 3), -1, np.int64)
    vals, outs = [], []
    at_v = at_o = 0
    if values.dtype == np.float32:
        for g in range(len(segments)):
            first, end = int(segments[g, SEG_FIRST]), int(segments[g, SEG_END])
            if segments[g, SEG_KIND] != SEG_LERP3 or end - first < LERP_MIN_TRACKS or (wanted is not None
                                                                                      and not wanted[g]):
                continue
            count = int(timeline_keys[segments[g, SEG_TIMELINE], 1])
            if count < 2:
                continue
            tracks = np.arange(first, end)
            width = -(-len(tracks) // LANES) * LANES
            tracks = np.concatenate([tracks, np.full(width - len(tracks), tracks[-1])])  # padding: the last again
            start = hot[tracks, _HOT_VALUE_START].astype(np.int64)
            # (count, 3, width): values[start + key * 3 + component]
            q = values[start[None, None, :] + 3 * np.arange(count)[:, None, None] + np.arange(3)[None, :, None]]
            vals.append(np.ascontiguousarray(q, np.float32).reshape(-1))
            outs.append(hot[tracks, _HOT_OUT].astype(np.int64))
            seg[g] = (at_v, at_o, width)
            at_v, at_o = at_v + vals[-1].size, at_o + width
    return {
        "lerp_values": np.concatenate(vals) if vals else np.zeros(0, np.float32),
        "lerp_out": np.concatenate(outs) if outs else np.zeros(0, np.int64),
        "lerp_seg": seg,
    }


def base_rows(clip_table: np.ndarray, segments: np.ndarray, tracks: np.ndarray, nodes: int) -> dict[str, np.ndarray]:
    """Per clip, the pose rows the single-action path copies from the clip's base pose: every node
    whose translation, rotation and scale are not all sampled each frame (a sampled track writes its
    value whatever the time, so the other rows would be copied only to be overwritten). Returns
    ``base_rows`` (R,) int64 node indices, clip c's at ``base_rows_start[c]:base_rows_start[c + 1]``.

    >>> rows = base_rows(clip_table, segments, cs.track_table, len(rig))      # doctest: +SKIP
    """
    from .clipset import CL_SEGMENT_END, CL_SEGMENT_START, SEG_CONSTANT, TK_NODE, TK_OUT, TK_PATH

    rows, starts = [], [0]
    for c in range(len(clip_table)):
        sampled = np.zeros((nodes, 3), bool)  # translation, rotation, scale written every frame
        for g in range(clip_table[c, CL_SEGMENT_START], clip_table[c, CL_SEGMENT_END]):
            if segments[g, SEG_KIND] == SEG_CONSTANT:
                continue
            k = np.arange(segments[g, SEG_FIRST], segments[g, SEG_END])
            k = k[(tracks[k, TK_OUT] >= 0) & (tracks[k, TK_PATH] < 3)]
            sampled[tracks[k, TK_NODE], tracks[k, TK_PATH]] = True
        rows.append(np.flatnonzero(~sampled.all(axis=1)))
        starts.append(starts[-1] + len(rows[-1]))
    return {"base_rows": np.concatenate(rows).astype(np.int64) if rows else np.zeros(0, np.int64),
            "base_rows_start": np.asarray(starts, np.int64)}


@intrinsic
def _copy_row10(typingctx, dst, src, n):
    """``dst[n] = src[n]`` for (N, 10) float64 C-contiguous arrays: one 8-wide and one 2-wide load
    and store (a scalar loop LLVM does not vectorise: it cannot rule out that the two overlap).
    Not bounds-checked."""
    if not all(isinstance(a, types.Array) and a.ndim == 2 and a.dtype == types.float64 and a.layout == "C"
               for a in (dst, src)) or not isinstance(n, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        b = builder
        i64, f64 = ir.IntType(64), ir.DoubleType()
        d = context.make_array(signature.args[0])(context, builder, args[0])
        s = context.make_array(signature.args[1])(context, builder, args[1])
        at = b.mul(context.cast(b, args[2], signature.args[2], types.int64), ir.Constant(i64, 10))
        pieces = []
        for offset, width in ((0, 8), (8, 2)):  # every load before the stores
            vec = ir.VectorType(f64, width).as_pointer()
            where = b.add(at, ir.Constant(i64, offset))
            pieces.append((where, vec, b.load(b.bitcast(b.gep(s.data, [where]), vec), align=8)))
        for where, vec, value in pieces:
            b.store(value, b.bitcast(b.gep(d.data, [where]), vec), align=8)
        return context.get_dummy_value()

    return types.void(dst, src, n), codegen


def copy_rows(src, dst, rows, first, end):  # pragma: no cover - compiled through the overload
    """``dst[n] = src[n]`` for n in ``rows[first:end]`` ((N, 10) pose arrays; the base pose rows of
    :func:`base_rows`), a row a vector for float64.

    >>> copy_rows(base_pose[c], pose[b], rows, starts[c], starts[c + 1])       # doctest: +SKIP
    """
    raise NotImplementedError


@overload(copy_rows, jit_options={"forceinline": True})
def _ol_copy_rows(src, dst, rows, first, end):
    if all(isinstance(a, types.Array) and a.ndim == 2 and a.dtype == types.float64 and a.layout == "C"
           for a in (src, dst)):
        def rowwise(src, dst, rows, first, end):
            for r in range(np.uint64(first), np.uint64(end)):
                _copy_row10(dst, src, np.uint64(rows[r]))

        return rowwise

    def scalar(src, dst, rows, first, end):
        for r in range(np.uint64(first), np.uint64(end)):
            n = np.uint64(rows[r])
            for i in range(10):
                dst[n, i] = src[n, i]

    return scalar


@intrinsic
def _lerp_lanes(typingctx, flat, outs, at_out, vals, at_val, width, u):
    """Eight LERP3 lanes of a packed segment at fraction ``u`` of a key interval: ``vals[at_val + c *
    width + lane]`` the first key's component c (the second key's ``3 * width`` further); lane l's
    three values go to ``flat[outs[at_out + l] : + 3]``. Nothing is bounds-checked."""
    ok = (isinstance(flat, types.Array) and flat.ndim == 1 and flat.dtype == types.float64 and flat.layout == "C"
          and isinstance(vals, types.Array) and vals.dtype == types.float32 and vals.layout == "C"
          and isinstance(outs, types.Array) and outs.dtype == types.int64 and outs.layout == "C"
          and all(isinstance(x, types.Integer) for x in (at_out, at_val, width)) and isinstance(u, types.Float))
    if not ok:
        return None

    def codegen(context, builder, signature, args):
        b = builder
        i32, i64, f64 = ir.IntType(32), ir.IntType(64), ir.DoubleType()
        v8f, v8d, v2d = ir.VectorType(ir.FloatType(), LANES), ir.VectorType(f64, LANES), ir.VectorType(f64, 2)
        sig = signature.args
        dst = context.make_array(sig[0])(context, builder, args[0])
        out_rows = context.make_array(sig[1])(context, builder, args[1])
        src = context.make_array(sig[3])(context, builder, args[3])
        at_out_, at_val_, width_ = (context.cast(b, args[k], sig[k], types.int64) for k in (2, 4, 5))
        u_ = context.cast(b, args[6], sig[6], types.float64)

        def splat(x):
            lane0 = b.insert_element(ir.Constant(v8d, ir.Undefined), x, ir.Constant(i32, 0))
            return b.shuffle_vector(lane0, ir.Constant(v8d, ir.Undefined), ir.Constant(ir.VectorType(i32, LANES), [0] * LANES))

        def key_component(c):
            at = b.add(at_val_, b.mul(width_, ir.Constant(i64, c)))
            return b.fpext(b.load(b.bitcast(b.gep(src.data, [at]), v8f.as_pointer()), align=4), v8d)

        s, uu = splat(b.fsub(ir.Constant(f64, 1.0), u_)), splat(u_)
        e = [b.fadd(b.fmul(key_component(c), s), b.fmul(key_component(3 + c), uu)) for c in range(3)]

        def mask(values):
            return ir.Constant(ir.VectorType(i32, len(values)), values)

        even, odd = [0, 8, 2, 10, 4, 12, 6, 14], [1, 9, 3, 11, 5, 13, 7, 15]
        xy = (b.shuffle_vector(e[0], e[1], mask(even)), b.shuffle_vector(e[0], e[1], mask(odd)))
        for lane in range(LANES):
            j = (lane // 2) * 2
            pair = b.shuffle_vector(xy[lane % 2], xy[lane % 2], mask([j, j + 1]))  # (x, y) of this lane
            o = b.load(b.gep(out_rows.data, [b.add(at_out_, ir.Constant(i64, lane))]))
            b.store(pair, b.bitcast(b.gep(dst.data, [o]), v2d.as_pointer()), align=8)
            b.store(b.extract_element(e[2], ir.Constant(i32, lane)), b.gep(dst.data, [b.add(o, ir.Constant(i64, 2))]))
        return context.get_dummy_value()

    return types.void(flat, outs, at_out, vals, at_val, width, u), codegen


def lerp_lanes_into(flat, job_seg, g, key, u, outs, vals):  # pragma: no cover - compiled through the overload
    """Segment g's packed LERP3 tracks (``job_seg`` the job's ``lerp_seg``) at ``key`` and fraction
    ``u`` into ``flat`` (float64); True when written, False when the segment is not packed or ``flat``
    is not float64 (the caller then samples the tracks one by one).

    >>> if not lerp_lanes_into(flat, seg, g, key, u, outs, vals): ...              # doctest: +SKIP
    """
    raise NotImplementedError


@overload(lerp_lanes_into, jit_options={"forceinline": True})
def _ol_lerp_lanes_into(flat, job_seg, g, key, u, outs, vals):
    if not (isinstance(flat, types.Array) and flat.dtype == types.float64 and flat.layout == "C"):
        def unpacked(flat, job_seg, g, key, u, outs, vals):
            return False

        return unpacked

    def packed(flat, job_seg, g, key, u, outs, vals):
        width = job_seg[g, LL_WIDTH]
        if width <= 0:
            return False
        at_val = job_seg[g, LL_VALUES] + key * 3 * width
        at_out = job_seg[g, LL_OUT]
        for lane in range(0, width, LANES):
            _lerp_lanes(flat, outs, at_out + lane, vals, at_val + lane, width, u)
        return True

    return packed


def _slerp_lanes_typer(tabulated: bool, near: bool):
    """The typer of an intrinsic for eight slerp lanes of a packed interval (module docstring) at
    fraction ``u``: ``vals[at_val + c * width + lane]`` the first key's component c (the second key's
    ``4 * width`` further), ``coef[at_coef + lane]`` theta and ``coef[at_coef + width + lane]`` the
    signed inverse sine; lane l's quaternion goes to ``flat[outs[at_out + l] : + 4]``. Compiled for
    the lanes' kinds: ``tabulated`` (the slerp formula), ``near`` (the normalised lerp and identical
    keys), or both, selected per lane. Nothing is bounds-checked."""

    def typer(typingctx, flat, outs, at_out, vals, at_val, width, coef, at_coef, u):
        return _slerp_lanes_signature(tabulated, near, flat, outs, at_out, vals, at_val, width, coef, at_coef, u)

    typer.__name__ = typer.__qualname__ = "_slerp_lanes_" + ("both" if tabulated and near else
                                                             "tabulated" if tabulated else "near")
    return typer


def _slerp_lanes_signature(tabulated, near, flat, outs, at_out, vals, at_val, width, coef, at_coef, u):
    ok = (isinstance(flat, types.Array) and flat.ndim == 1 and flat.dtype == types.float64 and flat.layout == "C"
          and isinstance(vals, types.Array) and vals.dtype == types.float32 and vals.layout == "C"
          and isinstance(coef, types.Array) and coef.dtype == types.float64 and coef.layout == "C"
          and isinstance(outs, types.Array) and outs.dtype == types.int64 and outs.layout == "C"
          and all(isinstance(x, types.Integer) for x in (at_out, at_val, width, at_coef))
          and isinstance(u, types.Float))
    if not ok:
        return None

    def codegen(context, builder, signature, args):
        b = builder
        i32, i64, f64 = ir.IntType(32), ir.IntType(64), ir.DoubleType()
        v8f, v8d, v4d = ir.VectorType(ir.FloatType(), LANES), ir.VectorType(f64, LANES), ir.VectorType(f64, 4)
        sig = signature.args
        dst = context.make_array(sig[0])(context, builder, args[0])
        out_rows = context.make_array(sig[1])(context, builder, args[1])
        src = context.make_array(sig[3])(context, builder, args[3])
        tab = context.make_array(sig[6])(context, builder, args[6])
        at_out_, at_val_, width_, at_coef_ = (context.cast(b, args[k], sig[k], types.int64) for k in (2, 4, 5, 7))
        u_ = context.cast(b, args[8], sig[8], types.float64)

        def splat(x):
            lane0 = b.insert_element(ir.Constant(v8d, ir.Undefined), x, ir.Constant(i32, 0))
            return b.shuffle_vector(lane0, ir.Constant(v8d, ir.Undefined), ir.Constant(ir.VectorType(i32, LANES), [0] * LANES))

        def key_component(c):
            at = b.add(at_val_, b.mul(width_, ir.Constant(i64, c)))
            return b.fpext(b.load(b.bitcast(b.gep(src.data, [at]), v8f.as_pointer()), align=4), v8d)

        def coef_row(r):
            at = b.add(at_coef_, b.mul(width_, ir.Constant(i64, r)))
            return b.load(b.bitcast(b.gep(tab.data, [at]), v8d.as_pointer()), align=8)

        def sin_quarter(x):  # skeletal.quat._sin_quarter, operation for operation
            x2 = b.fmul(x, x)
            p = b.fadd(splat(ir.Constant(f64, _SIN_COEF[1])), b.fmul(x2, splat(ir.Constant(f64, _SIN_COEF[0]))))
            for k in _SIN_COEF[2:]:
                p = b.fadd(splat(ir.Constant(f64, k)), b.fmul(x2, p))
            return b.fadd(x, b.fmul(x, b.fmul(x2, p)))

        qa = [key_component(c) for c in range(4)]
        qb = [key_component(4 + c) for c in range(4)]
        theta, signed_inv = coef_row(0), coef_row(1)
        one_minus_u, uu = splat(b.fsub(ir.Constant(f64, 1.0), u_)), splat(u_)
        zero = ir.Constant(v8d, [0.0] * LANES)
        if near:
            # nearly parallel keys: lerp of a and the sign-aligned b, times 1 / sqrt of the
            # left-to-right sum of squares (the lerp's arithmetic of skeletal.quat.KeyPairIR);
            # identical keys: a as stored
            lerp = [b.fadd(b.fmul(qa[c], one_minus_u), b.fmul(b.fmul(qb[c], signed_inv), uu)) for c in range(4)]
            squares = [b.fmul(x, x) for x in lerp]
            total = b.fadd(b.fadd(b.fadd(squares[0], squares[1]), squares[2]), squares[3])
            sqrt = cgutils.get_or_insert_function(b.module, ir.FunctionType(v8d, [v8d]), "llvm.sqrt.v8f64")
            inv = b.fdiv(splat(ir.Constant(f64, 1.0)), b.call(sqrt, [total]))
            same = b.fcmp_ordered("<", theta, zero)
            result = [b.select(same, qa[c], b.fmul(lerp[c], inv)) for c in range(4)]
        if tabulated:
            # a tabulated angle: a * sin((1 - u) theta) / sin theta + b * sin(u theta) / sin theta, b's
            # sign in the coefficient (b * -s == -b * s exactly)
            fabs = cgutils.get_or_insert_function(b.module, ir.FunctionType(v8d, [v8d]), "llvm.fabs.v8f64")
            s0 = b.fmul(sin_quarter(b.fmul(one_minus_u, theta)), b.call(fabs, [signed_inv]))
            s1 = b.fmul(sin_quarter(b.fmul(uu, theta)), signed_inv)
            slerp = [b.fadd(b.fmul(qa[c], s0), b.fmul(qb[c], s1)) for c in range(4)]
            if near:
                positive = b.fcmp_ordered(">", theta, zero)
                result = [b.select(positive, slerp[c], result[c]) for c in range(4)]
            else:
                result = slerp
        # lane l's (x, y, z, w) as one 4-vector at its pose offset
        for lane in range(LANES):
            xy = b.shuffle_vector(result[0], result[1], ir.Constant(ir.VectorType(i32, 2), [lane, LANES + lane]))
            zw = b.shuffle_vector(result[2], result[3], ir.Constant(ir.VectorType(i32, 2), [lane, LANES + lane]))
            row = b.shuffle_vector(xy, zw, ir.Constant(ir.VectorType(i32, 4), [0, 1, 2, 3]))
            o = b.load(b.gep(out_rows.data, [b.add(at_out_, ir.Constant(i64, lane))]))
            b.store(row, b.bitcast(b.gep(dst.data, [o]), v4d.as_pointer()), align=8)
        return context.get_dummy_value()

    return types.void(flat, outs, at_out, vals, at_val, width, coef, at_coef, u), codegen


def slerp_lanes_into(flat, job_seg, g, key, u, outs, vals, coef, kinds):  # pragma: no cover - compiled through the overload
    """Segment g's packed slerp tracks (``job_seg`` the job's ``lanes_seg``) at ``key`` and fraction
    ``u`` into ``flat`` (the (N * 10) pose rows flattened, float64); True when written, False when the
    segment is not packed or ``flat`` is not float64 (the caller then samples the tracks one by one).

    >>> if not slerp_lanes_into(flat, seg, g, key, u, outs, vals, coef, kinds): ...   # doctest: +SKIP
    """
    raise NotImplementedError


_slerp_lanes_both = intrinsic(_slerp_lanes_typer(True, True))
_slerp_lanes_tabulated = intrinsic(_slerp_lanes_typer(True, False))
_slerp_lanes_near = intrinsic(_slerp_lanes_typer(False, True))


@overload(slerp_lanes_into, jit_options={"forceinline": True})
def _ol_slerp_lanes_into(flat, job_seg, g, key, u, outs, vals, coef, kinds):
    if not (isinstance(flat, types.Array) and flat.dtype == types.float64 and flat.layout == "C"):
        def unpacked(flat, job_seg, g, key, u, outs, vals, coef, kinds):
            return False

        return unpacked

    def packed(flat, job_seg, g, key, u, outs, vals, coef, kinds):
        width = job_seg[g, LS_WIDTH]
        if width <= 0:
            return False
        at_val = job_seg[g, LS_VALUES] + key * 8 * width
        at_coef = job_seg[g, LS_COEF] + key * 2 * width
        at_out = job_seg[g, LS_OUT] + key * width
        at_kind = job_seg[g, LS_KIND] + key * (width // LANES)
        for group in range(width // LANES):
            lane = group * LANES
            kind = kinds[at_kind + group]
            if kind == KIND_NEAR:
                _slerp_lanes_near(flat, outs, at_out + lane, vals, at_val + lane, width, coef, at_coef + lane, u)
            elif kind == KIND_TABULATED:
                _slerp_lanes_tabulated(flat, outs, at_out + lane, vals, at_val + lane, width, coef, at_coef + lane, u)
            else:
                _slerp_lanes_both(flat, outs, at_out + lane, vals, at_val + lane, width, coef, at_coef + lane, u)
        return True

    return packed


__all__ = ["LANES", "pack_rotation_lanes", "pack_lerp_lanes", "base_rows", "copy_rows", "slerp_lanes_into",
           "lerp_lanes_into"]
