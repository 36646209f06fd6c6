"""The inertialization stage's eight-joints-a-vector pass (:mod:`skeletal.playback.inertia_kernels`).

:func:`_offset_rows8` adds the decayed offsets of eight moving joints to their pose rows in one pass:
the rows (N, 10) float64, ``t(3) q(4, xyzw) s(3)``, are loaded, transposed to one <8 x double> per
field, offset (translations and scales plus ``x * wp + v * wq``; rotations left-multiplied by
``exp`` of the rotation offset, by the series below) and transposed back. :func:`_turned_rows8`
reads the turns' quaternions from an array instead. Written as LLVM IR so that the arithmetic is the
scalar loop's, operation for operation, in every lane (no reassociation, no fused multiply-add).
:func:`_offset_blocks` runs them over a padded set of lanes inside the compiled stage.
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic, overload

from ..anim.pose import _shuffle, _transpose8

# The series of cos(h) and sin(h) / h in h^2 (h half the rotation angle): _C and _S, 13 terms each.
_C = tuple((-1.0) ** k / math.factorial(2 * k) for k in range(13))
_S = tuple((-1.0) ** k / math.factorial(2 * k + 1) for k in range(13))
#: h^2 past which the seven-term series is not enough (a 1.2 rad angle): the 13 terms are used.
SHORT_LIMIT = 0.36


def _series_ir(b, h2, h4, h8, k, full):
    """:func:`_short_series` (``full`` False) or :func:`_series` on <8 x double> vectors (the same
    operations in the same order)."""
    a = _C if k == 0 else _S
    ty = h2.type

    def c(value):
        return ir.Constant(ty, [float(value)] * ty.count)

    add, mul = b.fadd, b.fmul

    def pair(i):  # a[i] + a[i + 1] * h2
        return add(c(a[i]), mul(c(a[i + 1]), h2))

    if not full:
        return add(add(pair(0), mul(pair(2), h4)), mul(add(pair(4), mul(c(a[6]), h4)), mul(h4, h4)))
    low = add(pair(0), mul(pair(2), h4))
    mid = add(pair(4), mul(pair(6), h4))
    high = add(pair(8), mul(pair(10), h4))
    return add(add(low, mul(mid, h8)), mul(add(high, mul(c(a[12]), h8)), mul(h8, h8)))


def _offset_rows8_codegen(turned):
    """The codegen of :func:`_offset_rows8` (``turned`` False: the turns from the offsets, in registers)
    and :func:`_turned_rows8` (True: the turns read from a ``turn`` array)."""

    def codegen(context, builder, signature, args):
        b = builder
        i64, f64 = ir.IntType(64), ir.DoubleType()
        v8, v2 = ir.VectorType(f64, 8), ir.VectorType(f64, 2)
        types_ = signature.args
        pose_p, joints_p, x_p, v_p = (context.make_array(types_[k])(context, builder, args[k]).data for k in (0, 1, 3, 4))
        n0 = context.cast(builder, args[2], types_[2], types.int64)
        step = context.cast(builder, args[5], types_[5], types.int64)
        add, sub, mul = b.fadd, b.fsub, b.fmul

        def splat(value):
            vec = ir.Constant(v8, ir.Undefined)
            for k in range(8):
                vec = b.insert_element(vec, value, ir.Constant(i64, k))
            return vec

        cp = splat(context.cast(builder, args[6], types_[6], types.float64))
        cq = splat(context.cast(builder, args[7], types_[7], types.float64))

        def vload(ptr, at, vec):
            return b.load(b.bitcast(b.gep(ptr, [at]), vec.as_pointer()), align=8)

        def channel(ptr, c):  # lanes first..first+7 of channel row c
            return vload(ptr, b.add(b.mul(ir.Constant(i64, c), step), n0), v8)

        def now(c):  # x * wp + v * wq
            return add(mul(channel(x_p, c), cp), mul(channel(v_p, c), cq))

        if turned:
            turn_p = context.make_array(types_[8])(context, builder, args[8]).data
            ax, ay, az, aw = (channel(turn_p, c) for c in range(4))
        else:  # exp of the rotation offsets: 7 terms of the series, or all 13 when a lane's angle is past 1.2 rad
            rx, ry, rz = now(3), now(4), now(5)
            h2 = mul(ir.Constant(v8, [0.25] * 8), add(add(mul(rx, rx), mul(ry, ry)), mul(rz, rz)))
            h4 = mul(h2, h2)
            past = b.fcmp_ordered(">", h2, ir.Constant(v8, [SHORT_LIMIT] * 8))
            any_past = b.icmp_unsigned("!=", b.bitcast(past, ir.IntType(8)), ir.Constant(ir.IntType(8), 0))
            with b.if_else(any_past, likely=False) as (long_, short_):
                with long_:
                    h8 = mul(h4, h4)
                    k_long, w_long = _series_ir(b, h2, h4, h8, 1, True), _series_ir(b, h2, h4, h8, 0, True)
                    from_long = b.block
                with short_:
                    k_short, w_short = _series_ir(b, h2, h4, None, 1, False), _series_ir(b, h2, h4, None, 0, False)
                    from_short = b.block
            k, aw = b.phi(v8), b.phi(v8)
            k.add_incoming(k_long, from_long)
            k.add_incoming(k_short, from_short)
            aw.add_incoming(w_long, from_long)
            aw.add_incoming(w_short, from_short)
            k = mul(ir.Constant(v8, [0.5] * 8), k)
            ax, ay, az = mul(rx, k), mul(ry, k), mul(rz, k)

        rows_at = [b.mul(b.load(b.gep(joints_p, [b.add(n0, ir.Constant(i64, k))])), ir.Constant(i64, 10))
                   for k in range(8)]
        f = _transpose8(b, [vload(pose_p, at, v8) for at in rows_at])  # fields 0-7: t, q, sx
        tail = [vload(pose_p, b.add(at, ir.Constant(i64, 8)), v2) for at in rows_at]  # sy, sz
        quads = [_shuffle(b, tail[k], tail[k + 1], [0, 1, 2, 3]) for k in range(0, 8, 2)]
        halves = [_shuffle(b, quads[k], quads[k + 1], list(range(8))) for k in (0, 2)]
        f.append(_shuffle(b, halves[0], halves[1], list(range(0, 16, 2))))
        f.append(_shuffle(b, halves[0], halves[1], list(range(1, 16, 2))))
        for field_, c in ((0, 0), (1, 1), (2, 2), (7, 6), (8, 7), (9, 8)):  # t += x wp + v wq; s likewise
            f[field_] = add(f[field_], now(c))
        bx, by, bz, bw = f[3], f[4], f[5], f[6]
        f[3] = sub(add(add(mul(aw, bx), mul(ax, bw)), mul(ay, bz)), mul(az, by))
        f[4] = add(add(sub(mul(aw, by), mul(ax, bz)), mul(ay, bw)), mul(az, bx))
        f[5] = add(sub(add(mul(aw, bz), mul(ax, by)), mul(ay, bx)), mul(az, bw))
        f[6] = sub(sub(sub(mul(aw, bw), mul(ax, bx)), mul(ay, by)), mul(az, bz))
        rows = _transpose8(b, f[:8])  # (its own inverse: the fields back into rows)
        for k in range(8):
            b.store(rows[k], b.bitcast(b.gep(pose_p, [rows_at[k]]), v8.as_pointer()), align=8)
            pair = _shuffle(b, f[8], f[9], [k, 8 + k])
            b.store(pair, b.bitcast(b.gep(pose_p, [b.add(rows_at[k], ir.Constant(i64, 8))]), v2.as_pointer()), align=8)
        return context.get_dummy_value()

    return codegen


def _rows8_types(pose, joints, first, x, v, stride, wp, wq, turn=None):
    ok = (isinstance(pose, types.Array) and pose.ndim == 2 and pose.dtype == types.float64 and pose.layout == "C"
          and isinstance(joints, types.Array) and joints.ndim == 1 and joints.dtype == types.int64
          and all(isinstance(a, types.Array) and a.ndim == 1 and a.dtype == types.float64 and a.layout == "C"
                  for a in ((x, v) if turn is None else (x, v, turn)))
          and isinstance(first, types.Integer) and isinstance(stride, types.Integer)
          and isinstance(wp, types.Float) and isinstance(wq, types.Float))
    return ok


@intrinsic
def _offset_rows8(typingctx, pose, joints, first, x, v, stride, wp, wq):
    """The offsets of the eight moving joints ``first`` to ``first + 7`` added to their rows of ``pose``
    (N, 10) (row ``joints[first + k]``), eight joints a vector: the offsets now ``x * wp + v * wq``
    (``x``, ``v`` channel-major, ``stride`` apart: see :func:`_gather_moving`); the rotations' exp by
    the first 7 terms of the series (:func:`_short_series`), or all 13 (:func:`_series`) when a lane's
    angle is past 1.2 rad (the caller keeps angles within 2 pi); the rows loaded and transposed to
    one vector per field (:func:`skeletal.anim.pose._transpose8`), translations and scales plus
    their offsets, rotations left-multiplied, transposed back and stored. The scalar loop's
    arithmetic in every lane. Float64, C-contiguous; nothing is bounds-checked."""
    if not _rows8_types(pose, joints, first, x, v, stride, wp, wq):
        return None
    return types.void(pose, joints, first, x, v, stride, wp, wq), _offset_rows8_codegen(False)


@intrinsic
def _turned_rows8(typingctx, pose, joints, first, x, v, stride, wp, wq, turn):
    """:func:`_offset_rows8` with the rotations' quaternions read from ``turn`` (rows x, y, z, w,
    ``stride`` apart) instead (angles past 2 pi: :func:`quat_exp`)."""
    if not _rows8_types(pose, joints, first, x, v, stride, wp, wq, turn):
        return None
    return types.void(pose, joints, first, x, v, stride, wp, wq, turn), _offset_rows8_codegen(True)


def _offset_blocks(pose, joints, lanes, x, v, turn, wp, wq, turned):  # pragma: no cover - typed by the overload below
    """(Compiled code only.) :func:`_offset_rows8` (``turned``: :func:`_turned_rows8`) over the
    ``lanes`` (a multiple of 8) first lanes for a float64 C-contiguous ``pose`` (J, 10); returns
    True, or False having done nothing for other poses (the scalar loop then does every joint)."""
    raise NotImplementedError("_offset_blocks runs inside compiled kernels only")


@overload(_offset_blocks, jit_options={"forceinline": True})
def _ol_offset_blocks(pose, joints, lanes, x, v, turn, wp, wq, turned):
    if not (isinstance(pose, types.Array) and pose.dtype == types.float64 and pose.layout == "C"):
        return lambda pose, joints, lanes, x, v, turn, wp, wq, turned: False

    def blocks(pose, joints, lanes, x, v, turn, wp, wq, turned):
        stride = np.uint64(joints.shape[0])
        if turned:
            for i in range(np.uint64(0), np.uint64(lanes), np.uint64(8)):
                _turned_rows8(pose, joints, i, x, v, stride, wp, wq, turn)
        else:
            for i in range(np.uint64(0), np.uint64(lanes), np.uint64(8)):
                _offset_rows8(pose, joints, i, x, v, stride, wp, wq)
        return True
    return blocks
