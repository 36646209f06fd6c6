# Over 600 lines: the wide group kernel (pose, world rows, IK stages, palettes in the lane layout) and the
# lane helpers numba inlines into it (_world_row, the lane two-bone); one module keeps that layout in one place.
"""The crowd's wide path: groups of ``LANES`` instances posed together, one instance per SIMD lane.

ozz-animation vectorises four joints at a time; a crowd has a wider axis to spare, the instances.
When every instance of a group of ``LANES`` (16: one AVX-512 register of float32, two AVX2 ones)
plays one full-weight action of the same clip on the base layer (the common crowd case), the
group's hot state is laid out ``[row][lane]`` in float32: local pose rows ``[node * 10 + component]
[lane]``, world matrices ``[node][12][lane]``, key indices and fractions ``[timeline][lane]``. Then
the key fetch + lerp/nlerp of every varying track, quaternion to 3x4, the world product with the
parent and the palette product each run as one loop over the lanes that the compiler turns into
vector instructions (gathers for the key values, whose index differs per lane; everything else
plain vector arithmetic). The clocks and the key search (per timeline, with the per-instance
cursors) stay per instance. The moves between the lane layout and per-instance rows (a segment's
samples, computed lane by lane, into the local rows; each joint's palette rows out to every
instance's palette) go in 4x4 blocks through :func:`transpose4_to`, a small LLVM intrinsic (vector
loads, shuffles, vector stores), where plain numba code moves one float at a time. The local rows
stay in per-thread scratch (in cache) while nobody reads them: each wide group records only its clip
and its instances' sample times (and the rotations IK set). The first read of ``Crowd.local_pose``
rebuilds them into a lane store (the same sampling, the same floats), after which updates write
that store and a read transposes it (:func:`lanes_to_pose`), as ozz keeps its local transforms in SoA
form; a store kept from the start would cost a large crowd its memory traffic every frame.

A group that does not qualify (other actions, fades, layers, a clip with other segment kinds, the
last partial group) takes the per-instance path of :mod:`skeletal.playback.kernels`, so any mixer
state gives the same poses as before, within float32 rounding (the wide path computes in float32,
the per-instance path blends in float64 before storing float32).

IK stages (:meth:`skeletal.Mixer.add_ik`) run inside a wide group too, between its world rows and
its palettes (:func:`_ik_group`): a two-bone stage solves all 16 lanes in one loop
(:func:`_two_bone_lanes`: :func:`skeletal.ik.two_bone_one`'s arithmetic in float64, every branch a
select, so it vectorises; a partial weight's slerp after it, lane by lane), then rebuilds the moved
subtree's world rows in the lanes; a lane it does not cover (an end rotation, a degenerate leg) and
every other stage kind (aim, CCD, FABRIK) is solved per instance by the scalar solver on that
instance's rows, moved out of the lanes and back. The IK code is compiled only for a crowd with
stages (``ik`` None prunes it). (Measurements: docs/guides/performance.md.)

>>> crowd = skeletal.Crowd(asset, count=1000); crowd.play("Walk")   # doctest: +SKIP
>>> crowd.update(1 / 60)          # groups of 16 instances go wide   # doctest: +SKIP
"""

from __future__ import annotations

import math

import numba
import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core.extending import intrinsic

from ..anim.ik import (IN_POLE, IN_ROTATION, IN_TARGET, IN_WEIGHT, KIND_TWO_BONE, SF_MID_AXIS, SF_SOFT, SI_DEFERS,
                  SI_J0, SI_J1, SI_KIND, SI_U0, SI_U1, soft_distance, solve_stage_at, solve_stages_at)
from ..anim.pose import palettes_one, world_subset_one
from ..anim.lanes import _LANE, _finite, _lq_mul, _lq_rot
from ..anim.vec import EPS, _add, _cross, _dot, _finite3, _len, _qnorm, _scale, _slerp, _sub, _vec_at
from ..quat import NLERP_ABOVE_COS, _sin_quarter, sin_quarter
from ..anim.sampling import locate_key
from .clipset import (CL_SEGMENT_END, CL_SEGMENT_START, CL_TIMELINE_END, CL_TIMELINE_START, SEG_CONSTANT, SEG_END,
                      SEG_FIRST, SEG_KIND, SEG_LERP3, SEG_NLERP, SEG_SLERP, SEG_TIMELINE, TK_KEY_START, TK_OUT,
                      TK_VALUE_START)
from .jobs import field
from .kernels import F_EFFECTIVE, F_SAMPLE, _advance_instance, _evaluate_instance, in_transition, inertia_stage, posed_alone

#: instances per group (SIMD lanes of float32: 16 = one 512-bit register)
LANES = 16


@intrinsic
def transpose4_to(typingctx, src, src_at, src_stride, dst, at0, at1, at2, at3):
    """``dst[at_i + k] = src[src_at + k * src_stride + i]`` for i, k < 4: a 4x4 float32 block
    transposed into four rows of ``dst`` that start anywhere, with four vector loads, eight shuffles
    and four vector stores (LLVM keeps the same loop in plain code scalar: 32 single-float moves).
    ``src`` and ``dst`` are 1-D C-contiguous float32 arrays, the rest integers; nothing is
    bounds-checked.

    >>> transpose4_to(lanes, row * 16 + lane, 16, out, at, at + n, at + 2 * n, at + 3 * n)   # doctest: +SKIP
    """
    sig = types.void(src, src_at, src_stride, dst, at0, at1, at2, at3)

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        s_at, s_stride, *d_ats = [context.cast(builder, args[i], signature.args[i], types.int64) for i in (1, 2, 4, 5, 6, 7)]
        s_ptr = context.make_array(signature.args[0])(context, builder, args[0]).data
        d_ptr = context.make_array(signature.args[3])(context, builder, args[3]).data
        vec = ir.VectorType(ir.FloatType(), 4)
        vec_ptr = vec.as_pointer()

        def shuffle(x, y, mask):
            return builder.shuffle_vector(x, y, ir.Constant(ir.VectorType(ir.IntType(32), 4), mask))

        rows = []
        for k in range(4):
            at = builder.add(s_at, builder.mul(s_stride, ir.Constant(i64, k)))
            rows.append(builder.load(builder.bitcast(builder.gep(s_ptr, [at]), vec_ptr), align=4))
        a, b, c, d = rows
        lo_ab, lo_cd = shuffle(a, b, [0, 4, 1, 5]), shuffle(c, d, [0, 4, 1, 5])
        hi_ab, hi_cd = shuffle(a, b, [2, 6, 3, 7]), shuffle(c, d, [2, 6, 3, 7])
        columns = (shuffle(lo_ab, lo_cd, [0, 1, 4, 5]), shuffle(lo_ab, lo_cd, [2, 3, 6, 7]),
                   shuffle(hi_ab, hi_cd, [0, 1, 4, 5]), shuffle(hi_ab, hi_cd, [2, 3, 6, 7]))
        for at, column in zip(d_ats, columns):
            builder.store(column, builder.bitcast(builder.gep(d_ptr, [at]), vec_ptr), align=4)
        return context.get_dummy_value()

    return sig, codegen


@njit(cache=True, forceinline=True)
def _lanes_to_rows(tmpv, width, lw, dest, do):
    """``lw[dest[do + x] + lane] = tmpv[lane * width + x]`` for every lane and x < ``width``: a
    segment's samples, computed lane by lane, stored into its rows of the lane layout in 4x4 blocks
    (:func:`transpose4_to`), the last ``width % 4`` columns one float at a time."""
    S = _S
    four = _U[4]
    x0 = _U[0]
    while x0 + four <= width:
        d0, d1, d2, d3 = dest[do + x0], dest[do + x0 + _U[1]], dest[do + x0 + _U[2]], dest[do + x0 + _U[3]]
        for lane in range(0, LANES, 4):
            ul = np.uint64(lane)
            transpose4_to(tmpv, ul * width + x0, width, lw, d0 + ul, d1 + ul, d2 + ul, d3 + ul)
        x0 += four
    for x in range(x0, width):
        d = dest[do + x]
        for lane in range(S):
            lw[d + lane] = tmpv[lane * width + x]


def wide_clips(clip_table: np.ndarray, segments: np.ndarray, timeline_keys: np.ndarray, tracks: np.ndarray) -> np.ndarray:
    """(C,) bool: clip c can be posed wide (every segment constant, LINEAR translation/scale or
    LINEAR rotation (nlerp or slerp), only pose tracks (no morph weights), every timeline with at least two keys)."""
    out = np.zeros(len(clip_table), np.bool_)
    for c in range(len(clip_table)):
        ok = True
        for g in range(clip_table[c, CL_SEGMENT_START], clip_table[c, CL_SEGMENT_END]):
            kind = segments[g, SEG_KIND]
            if kind == SEG_CONSTANT:
                continue
            if kind not in (SEG_LERP3, SEG_NLERP, SEG_SLERP) or timeline_keys[segments[g, SEG_TIMELINE], 1] < 2:
                ok = False
                break
            if np.any(tracks[segments[g, SEG_FIRST]:segments[g, SEG_END], TK_OUT] < 0):
                ok = False
                break
        out[c] = ok
    return out


def key_major(clip_table: np.ndarray, segments: np.ndarray, timeline_keys: np.ndarray, tracks: np.ndarray,
              values: np.ndarray, wide_clip: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The wide clips' LINEAR segments repacked key-major, so that one instance's key interval of a
    whole segment is two contiguous rows (vector loads, no gathers):

    * LERP3 segment of m tracks: K rows of 3m floats, ``[key][track * 3 + component]``
    * NLERP segment: K rows of 4m floats, ``[key][component * m + track]`` (the four components of
      all tracks apart, so the nlerp of m rotations is one vector loop)

    Returns ``packed`` (float32), ``seg_table`` (G, 2) int64 (offset of segment g's rows in
    ``packed``, -1 when not packed; offset of its destination rows in ``dest``) and ``dest``
    (uint64): for each packed float, its row in the lane layout (``TK_OUT + component``) times LANES."""
    blocks, dests = [], []
    seg_table = np.full((len(segments), 2), -1, np.int64)
    offset = dest_offset = 0
    for c in np.flatnonzero(wide_clip):
        for g in range(clip_table[c, CL_SEGMENT_START], clip_table[c, CL_SEGMENT_END]):
            kind = segments[g, SEG_KIND]
            if kind not in (SEG_LERP3, SEG_NLERP):
                continue
            first, end = segments[g, SEG_FIRST], segments[g, SEG_END]
            count = timeline_keys[segments[g, SEG_TIMELINE], 1]
            width = 3 if kind == SEG_LERP3 else 4
            starts = tracks[first:end, TK_VALUE_START]
            # values of track t at key k, component i: values[start_t + k * width + i]
            idx = starts[None, :, None] + np.arange(count)[:, None, None] * width + np.arange(width)[None, None, :]
            block = values[idx]  # (K, m, width)
            out = tracks[first:end, TK_OUT]
            rows = out[:, None] + np.arange(width)[None, :]  # (m, width)
            if kind == SEG_NLERP:
                block = block.transpose(0, 2, 1)  # (K, width, m)
                rows = rows.T
            blocks.append(np.ascontiguousarray(block, np.float32).reshape(-1))
            dests.append((rows.reshape(-1) * LANES).astype(np.uint64))
            seg_table[g] = (offset, dest_offset)
            offset += blocks[-1].size
            dest_offset += dests[-1].size
    packed = np.concatenate(blocks) if blocks else np.zeros(1, np.float32)
    dest = np.concatenate(dests) if dests else np.zeros(1, np.uint64)
    return packed, seg_table, dest


@njit(cache=True, forceinline=True)
def _single_slot(b, fs, slot_layer, layer_weight, snap_weight):
    """The slot of instance b's one full-weight base-layer action, or -1 when it has another mix."""
    if layer_weight[b, 0] != 1.0 or snap_weight[b] > 0.0:
        return -1
    single = -1
    for s in range(slot_layer.shape[0]):
        e = fs[b, s, F_EFFECTIVE]
        if e > 0.0:
            if single != -1 or slot_layer[s] != 0 or e != 1.0:
                return -1
            single = s
    return single


# Index arithmetic of the lane loops is unsigned with a constant row stride: numba's negative-index
# wraparound (a select on every signed index) and a symbolic stride each keep LLVM from proving the
# rows independent, and the loops then stay scalar. The lane count is a runtime value (``nl``) so
# that LLVM vectorises the loops (with run-time alias checks) instead of unrolling them whole.
_S = np.uint64(LANES)  # row stride of the lane layout
_U = tuple(np.uint64(k) for k in range(13))


@njit(cache=True, forceinline=True)
def _world_row(i, p, lw, ww, wp, nl):
    """World 3x4 rows of node ``i`` (parent ``p``, -1 for a root) for every lane: ``ww`` rows
    ``[(i * 12 + entry) * LANES + lane]`` = parent's rows @ T R S of the local rows ``lw[(i * 10 +
    component) * LANES + lane]`` (float32). The parent's rows are read from a copy in ``wp`` (12 *
    LANES): reads and writes in separate arrays, which LLVM checks at run time, so the loop vectorises."""
    one = np.float32(1.0)
    S = _S
    u0, u1, u2, u3, u4, u5, u6, u7, u8, u9, u10, u11, u12 = _U
    r0 = np.uint64(i * 10) * S
    wi = np.uint64(i * 12) * S
    if p < 0:
        for lane in range(nl):
            tx, ty, tz = lw[r0 + lane], lw[r0 + S + lane], lw[r0 + u2 * S + lane]
            x, y, z, w = lw[r0 + u3 * S + lane], lw[r0 + u4 * S + lane], lw[r0 + u5 * S + lane], lw[r0 + u6 * S + lane]
            sx, sy, sz = lw[r0 + u7 * S + lane], lw[r0 + u8 * S + lane], lw[r0 + u9 * S + lane]
            x2, y2, z2 = x + x, y + y, z + z
            xx, xy, xz, yy, yz, zz = x * x2, x * y2, x * z2, y * y2, y * z2, z * z2
            wx, wy, wz = w * x2, w * y2, w * z2
            ww[wi + lane] = (one - (yy + zz)) * sx
            ww[wi + S + lane] = (xy - wz) * sy
            ww[wi + u2 * S + lane] = (xz + wy) * sz
            ww[wi + u3 * S + lane] = tx
            ww[wi + u4 * S + lane] = (xy + wz) * sx
            ww[wi + u5 * S + lane] = (one - (xx + zz)) * sy
            ww[wi + u6 * S + lane] = (yz - wx) * sz
            ww[wi + u7 * S + lane] = ty
            ww[wi + u8 * S + lane] = (xz - wy) * sx
            ww[wi + u9 * S + lane] = (yz + wx) * sy
            ww[wi + u10 * S + lane] = (one - (xx + yy)) * sz
            ww[wi + u11 * S + lane] = tz
        return
    po = np.uint64(p * 12) * S
    for e in range(12 * LANES):  # the parent's rows, copied: reads and writes in separate arrays
        wp[e] = ww[po + np.uint64(e)]
    for lane in range(nl):
        tx, ty, tz = lw[r0 + lane], lw[r0 + S + lane], lw[r0 + u2 * S + lane]
        x, y, z, w = lw[r0 + u3 * S + lane], lw[r0 + u4 * S + lane], lw[r0 + u5 * S + lane], lw[r0 + u6 * S + lane]
        sx, sy, sz = lw[r0 + u7 * S + lane], lw[r0 + u8 * S + lane], lw[r0 + u9 * S + lane]
        x2, y2, z2 = x + x, y + y, z + z
        xx, xy, xz, yy, yz, zz = x * x2, x * y2, x * z2, y * y2, y * z2, z * z2
        wx, wy, wz = w * x2, w * y2, w * z2
        l00, l01, l02 = (one - (yy + zz)) * sx, (xy - wz) * sy, (xz + wy) * sz
        l10, l11, l12 = (xy + wz) * sx, (one - (xx + zz)) * sy, (yz - wx) * sz
        l20, l21, l22 = (xz - wy) * sx, (yz + wx) * sy, (one - (xx + yy)) * sz
        a0, a1, a2, a3 = wp[lane], wp[S + lane], wp[u2 * S + lane], wp[u3 * S + lane]
        ww[wi + lane] = a0 * l00 + a1 * l10 + a2 * l20
        ww[wi + S + lane] = a0 * l01 + a1 * l11 + a2 * l21
        ww[wi + u2 * S + lane] = a0 * l02 + a1 * l12 + a2 * l22
        ww[wi + u3 * S + lane] = a0 * tx + a1 * ty + a2 * tz + a3
        a0, a1, a2, a3 = wp[u4 * S + lane], wp[u5 * S + lane], wp[u6 * S + lane], wp[u7 * S + lane]
        ww[wi + u4 * S + lane] = a0 * l00 + a1 * l10 + a2 * l20
        ww[wi + u5 * S + lane] = a0 * l01 + a1 * l11 + a2 * l21
        ww[wi + u6 * S + lane] = a0 * l02 + a1 * l12 + a2 * l22
        ww[wi + u7 * S + lane] = a0 * tx + a1 * ty + a2 * tz + a3
        a0, a1, a2, a3 = wp[u8 * S + lane], wp[u9 * S + lane], wp[u10 * S + lane], wp[u11 * S + lane]
        ww[wi + u8 * S + lane] = a0 * l00 + a1 * l10 + a2 * l20
        ww[wi + u9 * S + lane] = a0 * l01 + a1 * l11 + a2 * l21
        ww[wi + u10 * S + lane] = a0 * l02 + a1 * l12 + a2 * l22
        ww[wi + u11 * S + lane] = a0 * tx + a1 * ty + a2 * tz + a3


# ---------------------------------------------------------------------------------------------
# IK stages in the lane layout: two-bone over the 16 lanes at once, any other case per instance

# rows of the per-thread IK scratch ``iw`` (float64, [row * LANES + lane])
T_TARGET = 0  # target (3)
T_POLE = 3  # pole (3)
T_WEIGHT = 6  # weight, clipped to <= 1
T_REACH = 7  # soft stages: the distance the end is placed at (soft_distance)
T_MODE = 8  # 0: idle, 1: lane-wide two-bone, 2: per instance (other kinds, end rotations)
T_QA = 9  # new local rotation of the root joint (4), before the weight
T_QB = 13  # new local rotation of the mid joint (4), before the weight
T_BAD = 17  # 1: a case the lane-wide two-bone leaves to the per-instance solver (degenerate chain, ...)
T_KA = 18  # 1 / |T_QA|
T_KB = 19  # 1 / |T_QB|
T_OKA = 20  # 1: write T_QA * T_KA (a full-weight lane, finite result)
T_OKB = 21  # 1: write T_QB * T_KB
T_ROWS = 22


@njit(cache=True, forceinline=True)
def _row(k):
    """Offset of row ``k`` of the lane layout: k * LANES (unsigned, see ``_S``)."""
    return np.uint64(k) * _S


# The lane loop's arithmetic (``_LANE``, ``_finite``, ``_lq_mul``, ``_lq_rot``): :mod:`skeletal.anim.lanes`.


@njit(**_LANE)
def _column64(ww, base, k, lane):
    """Column k of the rotation-scale block of the world rows at ``base`` (node * 12 * LANES), one lane, float64."""
    S = _S
    return (np.float64(ww[base + np.uint64(k) * S + lane]), np.float64(ww[base + np.uint64(4 + k) * S + lane]),
            np.float64(ww[base + np.uint64(8 + k) * S + lane]))


@njit(**_LANE)
def _position64(ww, base, lane):
    S = _S
    return (np.float64(ww[base + _U[3] * S + lane]), np.float64(ww[base + _U[7] * S + lane]),
            np.float64(ww[base + _U[11] * S + lane]))


@njit(**_LANE)
def _unit_scales(c0, c1, c2):
    """``(1/|c0|, 1/|c1|, 1/|c2|, ok)`` with one division (three square roots); ``ok`` False when a
    length is outside 1e-100 .. 1e100 (the product would under- or overflow: such a lane is left to
    the per-instance solver)."""
    s0, s1, s2 = _len(c0), _len(c1), _len(c2)
    inv = 1.0 / (s0 * s1 * s2)
    ok = (s0 > 1e-100) & (s1 > 1e-100) & (s2 > 1e-100) & (s0 < 1e100) & (s1 < 1e100) & (s2 < 1e100)
    return inv * (s1 * s2), inv * (s0 * s2), inv * (s0 * s1), ok


@njit(**_LANE)
def _into_frame_lane(ww, j, v, lane):
    """``(R_j^T v, ok)`` for one lane (columns of node j's world rows normalised; v itself for j < 0):
    a model-space turn of the subtree below j as a turn in j's frame (:func:`skeletal.anim.vec._into_frame`).
    Node 0's rows are read for j < 0 and the result discarded (loads under no condition)."""
    base = np.uint64(max(j, 0) * 12) * _S
    c0, c1, c2 = _column64(ww, base, 0, lane), _column64(ww, base, 1, lane), _column64(ww, base, 2, lane)
    k0, k1, k2, ok = _unit_scales(c0, c1, c2)
    r = (_dot(c0, v) * k0, _dot(c1, v) * k1, _dot(c2, v) * k2)
    root = j < 0
    return (v if root else r), (root | ok)


@njit(**_LANE)
def _two_bone_lane(lane, rows, mid, is_soft, use_mid, lw, ww, iw):
    """One lane of :func:`_two_bone_lanes` (inlined into its loop; ``use_mid`` a constant there).
    ``rows``: the chain's world row offsets ``wa``, ``wb``, ``wc``, local row offsets ``ra``, ``rb``
    and the parents ``pa``, ``pb`` of its first two joints."""
    wa, wb, wc, ra, rb, pa, pb = rows
    S = _S
    u3, u4, u5, u6 = _U[3], _U[4], _U[5], _U[6]
    P0, P1 = _position64(ww, wa, lane), _position64(ww, wb, lane)
    u = _sub(P1, P0)
    v = _sub(_position64(ww, wc, lane), P1)
    l1, l2 = _len(u), _len(v)
    t = (iw[_row(T_TARGET) + lane], iw[_row(T_TARGET + 1) + lane], iw[_row(T_TARGET + 2) + lane])
    d = _sub(t, P0)
    dist = _len(d)
    bad = (l1 < EPS) | (l2 < EPS) | (not dist > EPS)
    direction = _scale(d, 1.0 / dist)
    soft_reach = iw[_row(T_REACH) + lane]
    reach = soft_reach if is_soft else min(dist, l1 + l2)
    reach = max(reach, abs(l1 - l2))
    # bend axis: the hinge axis given in b's frame, in model space, or the normal of the bend plane
    # (a straight chain without a hinge axis is left to the per-instance solver)
    if use_mid:  # a constant: the loop is compiled once with and once without this branch
        c0, c1, c2 = _column64(ww, wb, 0, lane), _column64(ww, wb, 1, lane), _column64(ww, wb, 2, lane)
        k0, k1, k2, ok = _unit_scales(c0, c1, c2)
        bad = bad | (not ok)
        h = _add(_add(_scale(c0, mid[0] * k0), _scale(c1, mid[1] * k1)), _scale(c2, mid[2] * k2))
    else:
        h = _cross(u, v)
    lh = _len(h)
    if not use_mid:
        bad = bad | (lh < 1e-7 * l1 * l2)
    h = _scale(h, 1.0 / lh)
    # |u + R(h, phi) v| = reach:  A cos(phi) + B sin(phi) = K - C  (Rodrigues)
    uh, vh = _dot(u, h), _dot(v, h)
    ca = _dot(u, v) - uh * vh
    cb = _dot(u, _cross(h, v))
    cc = uh * vh
    k = 0.5 * (reach * reach - l1 * l1 - l2 * l2)
    r = np.sqrt(ca * ca + cb * cb)
    bend = (lh > EPS) & (r > EPS * l1 * l2)
    inv_r = 1.0 / r
    x = min(max((k - cc) * inv_r, -1.0), 1.0)
    y = np.sqrt(1.0 - x * x)
    # the bend as a half-angle quaternion (skeletal.anim.vec._half_turn, both of its branches selected)
    cos_a = min(max((ca * x - cb * y) * inv_r, -1.0), 1.0)
    sin_a = (cb * x + ca * y) * inv_r
    hw = np.sqrt(0.5 * (1.0 + cos_a))
    hs = 0.5 * sin_a / hw
    bad = bad | (bend & (not hw > 1e-4))  # a bend of nearly a half turn: _half_turn's other formula, per instance
    hs = hs if bend else 0.0
    rw = hw if bend else 1.0
    rh = (h[0] * hs, h[1] * hs, h[2] * hs, rw)
    # the root's turn: the end onto the root-target line (skeletal.anim.vec._arc_to_unit)
    e2 = _add(u, _lq_rot(rh, v))
    lu = _len(e2)
    wq = lu + _dot(e2, direction)
    bad = bad | ((lu >= EPS) & (wq < 1e-12 * lu))
    xq = _cross(e2, direction)
    kq = 1.0 / np.sqrt(2.0 * lu * wq)
    kq = kq if lu >= EPS else 0.0
    wk = wq * kq
    qw = wk if lu >= EPS else 1.0
    q = (xq[0] * kq, xq[1] * kq, xq[2] * kq, qw)
    # then about that line, the mid joint onto the pole's side
    pole = (iw[_row(T_POLE) + lane], iw[_row(T_POLE + 1) + lane], iw[_row(T_POLE + 2) + lane])
    m = _lq_rot(q, u)
    m = _sub(m, _scale(direction, _dot(direction, m)))
    p = _sub(pole, P0)
    p = _sub(p, _scale(direction, _dot(direction, p)))
    turn = _finite(pole[0]) & _finite(pole[1]) & _finite(pole[2]) & (_dot(m, m) > 1e-14 * l1 * l1) & (
        _dot(p, p) > EPS * EPS)
    cos_r = _dot(m, p)
    sin_r = _dot(direction, _cross(m, p))
    rr = np.sqrt(cos_r * cos_r + sin_r * sin_r)
    wr = rr + cos_r
    bad = bad | (turn & (not wr > 1e-12 * rr))
    kk = 1.0 / np.sqrt(2.0 * rr * wr)
    qt = _lq_mul((direction[0] * sin_r * kk, direction[1] * sin_r * kk, direction[2] * sin_r * kk, wr * kk), q)
    q = qt if turn else q
    # model-space turns as local rotations (skeletal.anim.vec._local_turn)
    qla = (np.float64(lw[ra + u3 * S + lane]), np.float64(lw[ra + u4 * S + lane]),
           np.float64(lw[ra + u5 * S + lane]), np.float64(lw[ra + u6 * S + lane]))
    qlb = (np.float64(lw[rb + u3 * S + lane]), np.float64(lw[rb + u4 * S + lane]),
           np.float64(lw[rb + u5 * S + lane]), np.float64(lw[rb + u6 * S + lane]))
    axa, fa = _into_frame_lane(ww, pa, (q[0], q[1], q[2]), lane)
    na = _lq_mul((axa[0], axa[1], axa[2], q[3]), qla)
    axb, fb = _into_frame_lane(ww, pb, (rh[0], rh[1], rh[2]), lane)
    nb = _lq_mul((axb[0], axb[1], axb[2], rh[3]), qlb)
    iw[_row(T_QA) + lane], iw[_row(T_QA + 1) + lane], iw[_row(T_QA + 2) + lane], iw[_row(T_QA + 3) + lane] = na
    iw[_row(T_QB) + lane], iw[_row(T_QB + 1) + lane], iw[_row(T_QB + 2) + lane], iw[_row(T_QB + 3) + lane] = nb
    # full weight: the normalised rotations (kept as they were where not finite, as _write_rotation);
    # the two norms' inverses from one division
    sa = np.sqrt(na[0] * na[0] + na[1] * na[1] + na[2] * na[2] + na[3] * na[3])
    sb = np.sqrt(nb[0] * nb[0] + nb[1] * nb[1] + nb[2] * nb[2] + nb[3] * nb[3])
    bad = bad | (not fa) | (not fb) | (not sa > 1e-100) | (not sb > 1e-100)
    iw[_row(T_BAD) + lane] = 1.0 if bad else 0.0
    write = (iw[_row(T_MODE) + lane] == 1.0) & (not bad) & (iw[_row(T_WEIGHT) + lane] >= 1.0)
    inv = 1.0 / (sa * sb)
    ka, kb = inv * sb, inv * sa
    iw[_row(T_KA) + lane] = ka
    iw[_row(T_KB) + lane] = kb
    oka = write & _finite(na[0] * ka + na[1] * ka + na[2] * ka + na[3] * ka)
    okb = write & _finite(nb[0] * kb + nb[1] * kb + nb[2] * kb + nb[3] * kb)
    iw[_row(T_OKA) + lane] = 1.0 if oka else 0.0
    iw[_row(T_OKB) + lane] = 1.0 if okb else 0.0


@njit(cache=True, error_model="numpy")
def _two_bone_lanes(chain, soft, mid_axis, nl, lw, ww, iw):
    """Two-bone IK (:func:`skeletal.ik.two_bone_one`'s arithmetic, float64) of ``chain`` = (a, b, c, parent
    of a, parent of b) for every lane whose ``iw[T_MODE]`` is 1, one loop over the
    lanes without branches (selects), so that it vectorises. Full-weight lanes get their new local
    rotations of a and b in ``lw``; every lane's rotations (unnormalised, before the weight) go to
    ``iw[T_QA]``, ``iw[T_QB]``, and ``iw[T_BAD]`` = 1 marks the lanes whose case it leaves to the
    per-instance solver (zero-length bones, a target at the root, a straight chain without a mid axis,
    half turns, degenerate frames), whose rows it leaves as they were. ``soft`` > 0: the reach is
    read from ``iw[T_REACH]``; ``mid_axis``: the hinge axis in b's frame (3,), or NaN."""
    S = _S
    a, b, c, pa, pb = chain
    wa, wb, wc = np.uint64(a * 12) * S, np.uint64(b * 12) * S, np.uint64(c * 12) * S
    ra, rb = np.uint64(a * 10) * S, np.uint64(b * 10) * S
    rows = (wa, wb, wc, ra, rb, pa, pb)
    has_mid = _finite(mid_axis[0]) & _finite(mid_axis[1]) & _finite(mid_axis[2])
    is_soft = soft > 0.0
    if has_mid:
        for lane in range(nl):
            _two_bone_lane(lane, rows, mid_axis, is_soft, True, lw, ww, iw)
    else:
        for lane in range(nl):
            _two_bone_lane(lane, rows, mid_axis, is_soft, False, lw, ww, iw)
    # the writes in loops of their own: in the loop above, stores to rows of ``lw`` at a run-time
    # distance from the rows it reads would keep LLVM from vectorising it
    for i in range(4):
        at, bt = ra + np.uint64(3 + i) * S, rb + np.uint64(3 + i) * S
        qa, qb = _row(T_QA + i), _row(T_QB + i)
        for lane in range(nl):
            old, new = lw[at + lane], np.float32(iw[qa + lane] * iw[_row(T_KA) + lane])
            lw[at + lane] = new if iw[_row(T_OKA) + lane] != 0.0 else old
        for lane in range(nl):
            old, new = lw[bt + lane], np.float32(iw[qb + lane] * iw[_row(T_KB) + lane])
            lw[bt + lane] = new if iw[_row(T_OKB) + lane] != 0.0 else old


@njit(cache=True)
def _ik_group(b0, nl, ik, iks, parents, lw, ww, wp):
    """The IK stages (``ik``: the crowd's :class:`~skeletal.playback.jobs.IKJob`) of instances b0 ..
    b0 + LANES - 1, after :func:`_pose_group` built their world rows ``ww`` from the local rows ``lw``
    (both in the lane layout) and before their palettes: per stage, the inputs gathered per lane,
    two-bone stages solved for all lanes at once (:func:`_two_bone_lanes`), every other case (aim,
    CCD, FABRIK, end rotations, degenerate chains) by :func:`skeletal.ik.solve_stage_at` on the
    instance's rows moved out of the lanes and back (``iks``: this thread's float64 scratch
    (T_ROWS * LANES), the crowd's ``pose`` (B, N, 10) used as that instance's rows, this thread's
    world scratch (N, 3, 4) and its id), then the stage's moved world rows ``update[U0:U1]`` rebuilt
    for every lane. Same results as :func:`skeletal.ik.solve_stages_at` per instance, within the
    float32 rounding of the world rows."""
    iw, pose, world, tid = iks
    stage_i, stage_f, joints, jp, inputs, update = ik.stage_i, ik.stage_f, ik.joints, ik.jp, ik.inputs, ik.update
    S = _S
    n_nodes = parents.shape[0]
    for s in range(stage_i.shape[0]):
        kind = stage_i[s, SI_KIND]
        j0, j1 = stage_i[s, SI_J0], stage_i[s, SI_J1]
        soft = np.float64(stage_f[s, SF_SOFT])
        active = False
        for lane in range(LANES):
            bi = b0 + lane
            ul = np.uint64(lane)
            # (indexed directly: a row view of the shared inputs costs an atomic reference count)
            weight = np.float64(inputs[bi, s, IN_WEIGHT])
            target = (np.float64(inputs[bi, s, IN_TARGET]), np.float64(inputs[bi, s, IN_TARGET + 1]),
                      np.float64(inputs[bi, s, IN_TARGET + 2]))
            mode = 0.0
            if weight > 0.0 and _finite3(target):
                active = True
                finite_end = True
                for k in range(IN_ROTATION, IN_ROTATION + 4):
                    finite_end = finite_end and np.isfinite(inputs[bi, s, k])
                mode = 2.0 if kind != KIND_TWO_BONE or finite_end else 1.0
            iw[_row(T_MODE) + ul] = mode
            iw[_row(T_WEIGHT) + ul] = min(weight, 1.0)
            for k in range(3):
                iw[_row(T_TARGET + k) + ul] = inputs[bi, s, IN_TARGET + k]
                iw[_row(T_POLE + k) + ul] = inputs[bi, s, IN_POLE + k]
            if mode == 1.0 and soft > 0.0:  # soft_distance (an exponential) per lane, before the lane loop
                a0 = np.uint64(joints[j0] * 12) * S
                pa, pb = _position64(ww, a0, ul), _position64(ww, np.uint64(joints[j0 + 1] * 12) * S, ul)
                pc = _position64(ww, np.uint64(joints[j0 + 2] * 12) * S, ul)
                length = _len(_sub(pb, pa)) + _len(_sub(pc, pb))
                iw[_row(T_REACH) + ul] = soft_distance(_len(_sub(target, pa)), length, soft)
        if not active and not stage_i[s, SI_DEFERS]:
            continue  # every lane idle and no rows left to this stage: nothing moves
        if active and kind == KIND_TWO_BONE:
            a, b, c = joints[j0], joints[j0 + 1], joints[j0 + 2]
            _two_bone_lanes((a, b, c, parents[a], parents[b]), soft, _vec_at(stage_f, s, SF_MID_AXIS), nl, lw, ww, iw)
        for lane in range(LANES if active else 0):
            ul = np.uint64(lane)
            mode = iw[_row(T_MODE) + ul]
            if mode == 0.0:
                continue
            if mode == 1.0 and iw[_row(T_BAD) + ul] == 0.0:
                weight = iw[_row(T_WEIGHT) + ul]
                if weight < 1.0:  # a partial weight: slerp from the input rotations, as _write_rotation
                    for i, t0 in ((joints[j0], T_QA), (joints[j0 + 1], T_QB)):
                        r = np.uint64(i * 10) * S + ul
                        old = (np.float64(lw[r + _U[3] * S]), np.float64(lw[r + _U[4] * S]),
                               np.float64(lw[r + _U[5] * S]), np.float64(lw[r + _U[6] * S]))
                        new = (iw[_row(t0) + ul], iw[_row(t0 + 1) + ul], iw[_row(t0 + 2) + ul], iw[_row(t0 + 3) + ul])
                        q = _qnorm(_slerp(old, new, weight))
                        if np.isfinite(q[0]) and np.isfinite(q[1]) and np.isfinite(q[2]) and np.isfinite(q[3]):
                            for k in range(4):
                                lw[r + np.uint64(3 + k) * S] = q[k]
                continue
            # per instance: its rows out of the lanes, the scalar stage, its chain's rotations back
            bi = b0 + lane
            for i in range(n_nodes):
                r = np.uint64(i * 10) * S + ul
                for k in range(10):
                    pose[bi, i, k] = lw[r + np.uint64(k) * S]
                wr = np.uint64(i * 12) * S + ul
                for e in range(12):
                    world[i, e // 4, e % 4] = ww[wr + np.uint64(e) * S]
            solve_stage_at(pose[bi], world, parents, stage_i, stage_f, joints, jp, inputs, bi, s, update, ik.scratch,
                           ik.pos, tid)
            for j in range(j0, j1):
                r = np.uint64(joints[j] * 10) * S + ul
                for k in range(3, 7):
                    lw[r + np.uint64(k) * S] = pose[bi, joints[j], k]
        # the moved subtree's world rows, every lane (an idle lane's come out as they were)
        for k in range(stage_i[s, SI_U0], stage_i[s, SI_U1]):
            i = update[k]
            _world_row(i, parents[i], lw, ww, wp, nl)


@njit(cache=True, forceinline=True, error_model="numpy")
def _slerp_tabled(values, a, u, angles, row):
    """:func:`skeletal.quat.slerp_into` of the float32 keys ``values[a:a + 4]`` and ``values[a + 4:a + 8]``
    by ``u``, its arithmetic step for step in float64, returned as a tuple, with the key pair's arccos
    and 1 / sin from ``angles[row]`` (:func:`slerp_angles`: computed as ``slerp_into`` computes them,
    so the result is the same to the bit), and no call. (Its lane loop stays scalar: the keys are
    gathered per lane; branches then cost less than computing both sides.)"""
    u1, u2, u3, u4, u5, u6, u7 = _U[1], _U[2], _U[3], _U[4], _U[5], _U[6], _U[7]
    ax, ay, az, aw = np.float64(values[a]), np.float64(values[a + u1]), np.float64(values[a + u2]), np.float64(values[a + u3])
    bx, by, bz, bw = np.float64(values[a + u4]), np.float64(values[a + u5]), np.float64(values[a + u6]), np.float64(values[a + u7])
    if ax == bx and ay == by and az == bz and aw == bw:
        return ax, ay, az, aw
    cos = ax * bx + ay * by + az * bz + aw * bw
    if cos < 0.0:
        bx, by, bz, bw = -bx, -by, -bz, -bw
        cos = -cos
    if cos < NLERP_ABOVE_COS:
        angle, inv = angles[row, 0], angles[row, 1]
        s0 = sin_quarter((1.0 - u) * angle) * inv
        s1 = sin_quarter(u * angle) * inv
        return ax * s0 + bx * s1, ay * s0 + by * s1, az * s0 + bz * s1, aw * s0 + bw * s1
    s0, s1 = 1.0 - u, u
    x = ax * s0 + bx * s1
    y = ay * s0 + by * s1
    z = az * s0 + bz * s1
    w = aw * s0 + bw * s1
    n = 1.0 / np.sqrt(x * x + y * y + z * z + w * w)
    return x * n, y * n, z * n, w * n


def slerp_angles(clip_table: np.ndarray, segments: np.ndarray, tracks: np.ndarray, timeline_keys: np.ndarray,
                 values: np.ndarray, wide_clip: np.ndarray, rows: int) -> np.ndarray:
    """(rows, 2) float64: for key i of a track in a wide clip's SLERP segment (row ``TK_KEY_START + i``), the
    angle between keys i and i + 1 and 1 / its sine, computed from the float32 keys in float64 exactly as
    :func:`skeletal.quat.slerp_into` computes them (the same operations in the same order; the arccos
    from the C library, ``math.acos``, which is what the compiled ``np.arccos`` calls), where it takes
    that branch; 0 elsewhere. ``rows``: the clip set's key count. Plain numpy, so that a crowd's first
    update compiles nothing more for it.

    >>> angles = slerp_angles(clip_table, segments, cs.track_table, cs.timeline_keys, cs.values, wide, rows)  # doctest: +SKIP
    """
    out = np.zeros((rows, 2))
    for c in np.flatnonzero(wide_clip):
        for g in range(clip_table[c, CL_SEGMENT_START], clip_table[c, CL_SEGMENT_END]):
            if segments[g, SEG_KIND] != SEG_SLERP:
                continue
            count = int(timeline_keys[segments[g, SEG_TIMELINE], 1])
            for k in range(segments[g, SEG_FIRST], segments[g, SEG_END]):
                vs, kr = int(tracks[k, TK_VALUE_START]), int(tracks[k, TK_KEY_START])
                q = values[vs:vs + count * 4].astype(np.float64).reshape(count, 4)
                a, b = q[:-1], q[1:]
                cos = a[:, 0] * b[:, 0] + a[:, 1] * b[:, 1] + a[:, 2] * b[:, 2] + a[:, 3] * b[:, 3]
                cos = np.where(cos < 0.0, -cos, cos)
                use = (cos < NLERP_ABOVE_COS) & ~np.all(a == b, axis=1)
                for i in np.flatnonzero(use):
                    angle = math.acos(float(cos[i]))
                    out[kr + i, 0] = angle
                    out[kr + i, 1] = 1.0 / _sin_quarter(angle)
    return out


# error_model="numpy": no zero-division check on the nlerp's 1 / |q| (the check's branch kept that loop
# scalar: 1.36x the whole update's time); a zero-length blend, which unit keys never give, is then inf
# and NaN rows instead of an exception
@njit(cache=True, error_model="numpy")
def _sample_group(b0, c, job, wide, tid, lw, held, ik):
    """The local rows of instances b0 .. b0 + LANES - 1, all playing clip c alone at the sample times
    ``wide.sample_t[b0:b0 + LANES]`` (float64, seconds), into ``lw`` (N * 10 * LANES):
    ``[(node * 10 + component) * LANES + lane]``: the clip's base pose (rest + constant tracks), written
    only when ``held`` (1,) names another clip, then the varying tracks sampled. From ``wide`` (a
    :class:`~skeletal.playback.jobs.WideJob`), thread ``tid``'s key indices and fractions ``keys`` /
    ``fractions`` (timelines per clip, LANES) and one segment's sampled floats ``samples``
    (``[lane * width + x]``), and :func:`key_major`'s arrays. ``ik``: the crowd's IKJob or None: the
    rotations its stages changed in ``lw`` are reset to the clip's first."""
    tracks, clip_table, segments = field(job, "tracks"), field(job, "clip_table"), field(job, "segments")
    timeline_keys, times, values = field(job, "timeline_keys"), field(job, "times"), field(job, "values")
    base_pose, cursors = field(job, "base_pose"), field(job, "cursors")
    packed, seg_table, dest = field(wide, "packed"), field(wide, "seg_table"), field(wide, "dest")
    kw, uw, tmpv = field(wide, "keys")[tid], field(wide, "fractions")[tid], field(wide, "samples")[tid]
    sample_t = field(wide, "sample_t")
    nl = np.uint64(field(wide, "lanes"))
    one = np.float32(1.0)
    S = _S
    u2, u3, u4 = _U[2], _U[3], _U[4]
    angles = field(wide, "slerp_angles")
    tl0 = clip_table[c, CL_TIMELINE_START]
    # key interval per timeline and lane (the search per instance, with its cursor)
    for tl in range(tl0, clip_table[c, CL_TIMELINE_END]):
        start, count = timeline_keys[tl, 0], timeline_keys[tl, 1]
        for lane in range(LANES):
            b = b0 + lane
            key, u, span = locate_key(times, start, count, sample_t[b], cursors[b, tl])
            cursors[b, tl] = max(key, 0)
            if key < 0:
                key, u = 0, 0.0
            elif key >= count - 1:
                key, u = count - 2, 1.0
            kw[tl - tl0, lane] = key
            uw[tl - tl0, lane] = u
    # local pose rows: the clip's base pose (rest + constant tracks: written only when this group's
    # rows last held another clip or none), then its varying tracks
    base = base_pose[c]
    n_nodes = base.shape[0]
    if held[0] != c:
        for n in range(n_nodes):
            for i in range(10):
                v = base[n, i]
                row = np.uint64(n * 10 + i) * S
                for lane in range(nl):
                    lw[row + lane] = v
        held[0] = c
    elif ik is not None:  # the rotations IK changed last update: the clip's again (varying tracks overwrite them)
        for j in ik.joints:
            for i in range(3, 7):
                v = base[j, i]
                row = np.uint64(j * 10 + i) * S
                for lane in range(nl):
                    lw[row + lane] = v
    for g in range(clip_table[c, CL_SEGMENT_START], clip_table[c, CL_SEGMENT_END]):
        kind = segments[g, SEG_KIND]
        if kind == SEG_CONSTANT:
            continue
        t = segments[g, SEG_TIMELINE] - tl0
        keys = kw[t]
        us = uw[t]
        first = segments[g, SEG_FIRST]
        m = segments[g, SEG_END] - first
        po, do = np.uint64(max(seg_table[g, 0], 0)), np.uint64(max(seg_table[g, 1], 0))
        mu = np.uint64(m)
        if kind == SEG_LERP3:
            width = u3 * mu
            for lane in range(LANES):
                r0 = po + np.uint64(keys[lane]) * width
                u = us[lane]
                v = one - u
                t0 = np.uint64(lane) * width
                for x in range(width):
                    tmpv[t0 + x] = packed[r0 + x] * v + packed[r0 + width + x] * u
            _lanes_to_rows(tmpv, width, lw, dest, do)
        elif kind == SEG_NLERP:
            width = u4 * mu
            for lane in range(LANES):
                ra = po + np.uint64(keys[lane]) * width
                rb = ra + width
                u = us[lane]
                t0 = np.uint64(lane) * width
                for k in range(mu):
                    ax, ay, az, aw = packed[ra + k], packed[ra + mu + k], packed[ra + u2 * mu + k], packed[ra + u3 * mu + k]
                    bx, by, bz, bw = packed[rb + k], packed[rb + mu + k], packed[rb + u2 * mu + k], packed[rb + u3 * mu + k]
                    sign = one if ax * bx + ay * by + az * bz + aw * bw >= np.float32(0.0) else -one
                    x = ax + (sign * bx - ax) * u
                    y = ay + (sign * by - ay) * u
                    z = az + (sign * bz - az) * u
                    w = aw + (sign * bw - aw) * u
                    inv = one / np.sqrt(x * x + y * y + z * z + w * w)
                    tmpv[t0 + k] = x * inv
                    tmpv[t0 + mu + k] = y * inv
                    tmpv[t0 + u2 * mu + k] = z * inv
                    tmpv[t0 + u3 * mu + k] = w * inv
            _lanes_to_rows(tmpv, width, lw, dest, do)
        else:  # SEG_SLERP: keys far apart (few tracks): per lane, in float64, the angles tabulated
            for k in range(first, first + m):
                vs = np.uint64(tracks[k, TK_VALUE_START])
                kr = np.uint64(tracks[k, TK_KEY_START])
                o = np.uint64(tracks[k, TK_OUT]) * S
                for lane in range(nl):
                    key = np.uint64(keys[lane])
                    a = vs + key * u4
                    x, y, z, w = _slerp_tabled(values, a, np.float64(us[lane]), angles, kr + key)
                    lw[o + lane] = x
                    lw[o + S + lane] = y
                    lw[o + u2 * S + lane] = z
                    lw[o + u3 * S + lane] = w


@njit(cache=True)
def _pose_group(b0, c, job, wide, tid, lw, held, ik):
    """Pose, world rows and palettes of instances b0 .. b0 + LANES - 1, all playing clip c alone at
    ``wide.sample_t[b0:b0 + LANES]``: see the module docstring. ``lw`` (N * 10 * LANES): the group's
    local rows (:func:`_sample_group`; this thread's scratch, or the group's slice of the crowd's lane
    store once ``local_pose`` has been read: see :func:`update_wide`), ``held`` (1,) the clip whose
    constant rows ``lw`` holds. Thread ``tid``'s scratch of ``wide``, flat float32 in the lane layout:
    ``world_rows`` ((N + 1) * 12 * LANES) world 3x4 rows ``[(node * 12 + entry) * LANES + lane]`` (the last
    12 * LANES: a copy of the parent's rows for :func:`_world_row`),
    ``palette_rows`` (J * 12 * LANES) palette rows likewise. ``ik``: the crowd's IKJob, run between
    the world rows and the palettes by :func:`_ik_group`, or None (pruned at compile time)."""
    parents, world_nodes, pose = field(job, "parents"), field(job, "world_nodes"), field(job, "pose")
    palette_joints, inverse_bind, palettes = field(job, "palette_joints"), field(job, "inverse_bind"), field(job, "palettes")
    ww, pw = field(wide, "world_rows")[tid], field(wide, "palette_rows")[tid]
    nl = np.uint64(field(wide, "lanes"))
    S = _S
    u0, u1, u2, u3, u4, u5, u6, u7, u8, u9, u10, u11, u12 = _U
    _sample_group(b0, c, job, wide, tid, lw, held, ik)
    # world 3x4 rows of the nodes needed, parent first, all lanes at once (the parent's rows read
    # from a copy: a second array that LLVM checks against the written rows at run time)
    n_rows = np.uint64(parents.shape[0] * 12) * S
    wp = ww[n_rows:n_rows + np.uint64(12 * LANES)]  # the rows after the nodes': a scratch copy of the parent's
    for k in range(world_nodes.shape[0]):
        i = world_nodes[k]
        _world_row(i, parents[i], lw, ww, wp, nl)
    if ik is not None:  # IK stages (pruned at compile time for a crowd without them)
        _ik_group(b0, nl, ik, (field(wide, "ik_scratch")[tid], pose, field(job, "scratch_world")[tid], tid), parents,
                  lw, ww, wp)
    # palettes: world[joint] @ inverse_bind[j] (one matrix for every lane) into one joint's 12 lane
    # rows, then written out to each instance's palette at once, while those rows are in L1, in
    # 4x4 blocks (:func:`transpose4_to`: vector moves where a plain loop moves single floats)
    n_joints = palette_joints.shape[0]
    pal_flat = palettes.reshape(-1)
    entries = np.uint64(n_joints * 12)
    pj = u0
    for j in range(n_joints):
        wj = np.uint64(palette_joints[j] * 12) * S
        c00, c01, c02, c03 = inverse_bind[j, 0, 0], inverse_bind[j, 0, 1], inverse_bind[j, 0, 2], inverse_bind[j, 0, 3]
        c10, c11, c12, c13 = inverse_bind[j, 1, 0], inverse_bind[j, 1, 1], inverse_bind[j, 1, 2], inverse_bind[j, 1, 3]
        c20, c21, c22, c23 = inverse_bind[j, 2, 0], inverse_bind[j, 2, 1], inverse_bind[j, 2, 2], inverse_bind[j, 2, 3]
        for lane in range(nl):
            a0, a1, a2, a3 = ww[wj + lane], ww[wj + S + lane], ww[wj + u2 * S + lane], ww[wj + u3 * S + lane]
            pw[pj + lane] = a0 * c00 + a1 * c10 + a2 * c20
            pw[pj + S + lane] = a0 * c01 + a1 * c11 + a2 * c21
            pw[pj + u2 * S + lane] = a0 * c02 + a1 * c12 + a2 * c22
            pw[pj + u3 * S + lane] = a0 * c03 + a1 * c13 + a2 * c23 + a3
            a0, a1, a2, a3 = ww[wj + u4 * S + lane], ww[wj + u5 * S + lane], ww[wj + u6 * S + lane], ww[wj + u7 * S + lane]
            pw[pj + u4 * S + lane] = a0 * c00 + a1 * c10 + a2 * c20
            pw[pj + u5 * S + lane] = a0 * c01 + a1 * c11 + a2 * c21
            pw[pj + u6 * S + lane] = a0 * c02 + a1 * c12 + a2 * c22
            pw[pj + u7 * S + lane] = a0 * c03 + a1 * c13 + a2 * c23 + a3
            a0, a1, a2, a3 = ww[wj + u8 * S + lane], ww[wj + u9 * S + lane], ww[wj + u10 * S + lane], ww[wj + u11 * S + lane]
            pw[pj + u8 * S + lane] = a0 * c00 + a1 * c10 + a2 * c20
            pw[pj + u9 * S + lane] = a0 * c01 + a1 * c11 + a2 * c21
            pw[pj + u10 * S + lane] = a0 * c02 + a1 * c12 + a2 * c22
            pw[pj + u11 * S + lane] = a0 * c03 + a1 * c13 + a2 * c23 + a3
        dst = np.uint64(b0) * entries + np.uint64(j * 12)
        for r in range(3):  # matrix row r of 4 lanes at a time: 4x4 blocks, vector loads and stores
            ur = np.uint64(r * 4)
            for lane in range(0, LANES, 4):
                ul = np.uint64(lane)
                at = dst + ul * entries + ur
                transpose4_to(pw, ur * S + ul, S, pal_flat, at, at + entries, at + u2 * entries, at + u3 * entries)


@njit(cache=True)
def _put(a, i, v):
    """``a[i] = v``, a call in the parallel loop of :func:`update_wide`: written there directly at the loop's
    index, an array read from the wide job did not keep the value (numba 0.68 parfors)."""
    a[i] = v


@njit(cache=True, parallel=True)
def update_wide(job, ik, wide, dt, mode):
    """The crowd's update (clocks, blending, world rows, palettes) over groups of ``LANES``
    instances in parallel: a group whose instances all play one full-weight action of the same
    wide-able clip (``wide.wide_clip`` (C,) from :func:`wide_clips`) is posed by :func:`_pose_group`,
    any other group instance by instance as :func:`skeletal.playback.kernels.update` does, on the
    crowd's :class:`~skeletal.playback.jobs.PlaybackJob` ``job`` and the lane layout's arrays of its
    :class:`~skeletal.playback.jobs.WideJob` ``wide``. ``ik``: the crowd's
    :class:`~skeletal.playback.jobs.IKJob`, run between world rows and palettes (in the lanes by
    :func:`_ik_group` for a wide group), or None (the IK code is then pruned at compile time: a crowd
    without IK compiles none). Needs a job with one layer and no kept world matrices (the Crowd
    checks). Returns how many instances reported an event. An instance in an inertialized transition
    (the job's ``inert_state``) does not hold its group back: the group goes wide without it, and it
    is posed on its own after (:func:`_pose_instance`, with the inertialization stage), over its
    lane's results (``inert_state[b, ST_REPOSED]`` set: ``Crowd.local_pose`` keeps that pose).

    Where a wide group's local rows live: ``wide.store`` (full groups, N * 10 * LANES) float32, the
    crowd's lane store (``held`` (full groups, 1) int64, starting at -1: the clip whose constant rows
    each slice holds), or, while the store has no rows (the default, until ``Crowd.local_pose`` is
    first read), this thread's scratch ``rows`` (threads, N * 10 * LANES) (``held_rows`` (threads, 1)),
    which stays in cache: a 10,000-instance store is 27 MB read and partly rewritten every frame.
    Either way ``done`` (full groups,) uint8 is set to 1 for a group posed wide (its ``pose`` rows are
    then stale) and 0 for one posed instance by instance (``pose`` written); ``group_clip`` (full
    groups,) int64 and ``sample_t`` (B,) float64 record each wide group's clip and its instances'
    sample times, and, with scratch rows and IK, ``ik_rows`` (full groups, len(ik.joints) * 4 *
    LANES) float32 the rotations the IK stages left, so that ``mode`` 1 rebuilds the wide groups'
    local rows of the last update into the store (nothing else runs, nothing advances: see
    :func:`lanes_to_pose`).

    ``mode``: 0 an update (advance by ``dt``, then pose), 1 that rebuild of the rows, 2 pose without
    advancing (``Crowd.evaluate``: the clocks as they are; ``dt`` unused, no events)."""
    clip_duration, marker_time, ist = field(job, "clip_duration"), field(job, "marker_time"), field(job, "ist")
    clip_table, fs = field(job, "clip_table"), field(job, "fs")
    slot_clip, slot_layer = field(job, "slot_clip"), field(job, "slot_layer")
    layer_weight, snap_weight, base_unmasked = field(job, "layer_weight"), field(job, "snap_weight"), field(job, "base_unmasked")
    pose = field(job, "pose")
    lw, lt, held, held_t = wide.store, wide.rows, wide.held, wide.held_rows
    done, sample_t, group_clip, ik_rows = wide.done, wide.sample_t, wide.group_clip, wide.ik_rows
    wide_clip = wide.wide_clip
    n = pose.shape[0]
    groups = (n + LANES - 1) // LANES
    keep = lw.shape[0] > 0
    inert_state = field(job, "inert_state")
    inertia = inert_state.shape[0] > 0  # inertialized transitions may run (the code is compiled only for a (B, 4) state)
    stage_dt = dt if mode == 0 else 0.0
    events = 0
    if mode == 1:  # the last update's local rows of the wide groups, into the lane store
        for g in prange(done.shape[0]):
            if done[g]:
                _sample_group(g * LANES, group_clip[g], job, wide, numba.get_thread_id(), lw[g], held[g], ik)
                if ik is not None:
                    _ik_rows(ik.joints, ik_rows[g], lw[g], False)
        return 0
    for g in prange(groups):
        tid = numba.get_thread_id()
        b0 = g * LANES
        b1 = min(b0 + LANES, n)
        if mode == 0:
            for b in range(b0, b1):
                if _advance_instance(b, dt, fs, ist, slot_clip, clip_table, clip_duration, marker_time):
                    events += 1
        s = -1
        if b1 - b0 == LANES and base_unmasked:
            s = _group_slot(b0, fs, slot_layer, layer_weight, snap_weight, wide_clip, slot_clip, inert_state)
        if s >= 0:
            c = slot_clip[s]
            for b in range(b0, b1):
                sample_t[b] = fs[b, s, F_SAMPLE]
            _put(group_clip, g, c)
            rows = lw[g] if keep else lt[tid]
            rows_held = held[g] if keep else held_t[tid]
            _pose_group(b0, c, job, wide, tid, rows, rows_held, ik)
            if ik is not None and not keep:
                _ik_rows(ik.joints, ik_rows[g], rows, True)
            _put(done, g, 1)
            if inertia:  # instances in an inertialized transition leave the lanes while it lasts
                for b in range(b0, b1):
                    if posed_alone(inert_state, b, in_transition(inert_state, b)):
                        _pose_instance(b, tid, job, ik, stage_dt)
            continue
        if b1 - b0 == LANES:
            _put(done, g, 0)
        for b in range(b0, b1):
            if inertia:
                posed_alone(inert_state, b, False)
            _pose_instance(b, tid, job, ik, stage_dt)
    return events


@njit(cache=True, forceinline=True)
def _group_slot(b0, fs, slot_layer, layer_weight, snap_weight, wide_clip, slot_clip, inert_state):
    """The slot every instance of the group b0 .. b0 + LANES - 1 plays alone, of a wide-able clip, leaving
    out the instances in an inertialized transition (``inert_state``: posed on their own after the
    group, recorded by ``posed_alone``); -1 when there is none."""
    s = -1
    for b in range(b0, b0 + LANES):
        if in_transition(inert_state, b):
            continue
        own = _single_slot(b, fs, slot_layer, layer_weight, snap_weight)
        if own < 0 or (s >= 0 and own != s):
            return -1
        s = own
    if s >= 0 and not wide_clip[slot_clip[s]]:
        return -1
    return s


@njit(cache=True)
def _pose_instance(b, tid, job, ik, dt):
    """Instance b posed on its own, as :func:`skeletal.playback.kernels.update` does: blending, the
    inertialization stage (by ``dt`` seconds) when a transition runs, world rows, IK, palette."""
    parents, world_nodes, pose, morph = field(job, "parents"), field(job, "world_nodes"), field(job, "pose"), field(job, "morph")
    palette_joints, inverse_bind, palettes = field(job, "palette_joints"), field(job, "inverse_bind"), field(job, "palettes")
    _evaluate_instance(b, tid, job, field(job, "layer_weight"), pose, morph)
    inertia_stage(b, tid, job, dt, pose)
    w = field(job, "scratch_world")[tid]
    world_subset_one(parents, world_nodes, pose[b], w)
    if ik is not None:
        solve_stages_at(pose[b], w, parents, ik.stage_i, ik.stage_f, ik.joints, ik.jp, ik.inputs, b, ik.update,
                        ik.scratch, ik.pos, tid)
    palettes_one(w, palette_joints, inverse_bind, palettes[b])


@njit(cache=True, forceinline=True)
def _ik_rows(ik_joints, saved, lw, save):
    """The rotation rows (components 3-6) of the IK stages' joints ``ik_joints`` in the local rows
    ``lw`` (lane layout) copied into ``saved`` (len(ik_joints) * 4 * LANES) when ``save``, else back."""
    S = _S
    for k in range(ik_joints.shape[0]):
        for i in range(4):
            row = np.uint64(ik_joints[k] * 10 + 3 + i) * S
            at = np.uint64(k * 4 + i) * S
            for lane in range(LANES):
                if save:
                    saved[at + lane] = lw[row + lane]
                else:
                    lw[row + lane] = saved[at + lane]


def lanes_to_pose(lw: np.ndarray, done: np.ndarray, pose: np.ndarray) -> None:
    """Write the local rows of the groups that :func:`update_wide` posed wide (``done``) from the
    lane store ``lw`` (groups, N * 10 * LANES) into ``pose`` (B, N, 10) float32: the transpose the
    crowd makes when ``local_pose`` is read, instead of on every update.

    >>> lanes_to_pose(lw, done, crowd._local_pose)   # doctest: +SKIP
    """
    groups = np.flatnonzero(done)
    if groups.size == 0:
        return
    rows = pose.shape[1] * pose.shape[2]
    full = lw.shape[0]
    view = pose.reshape(-1)[:full * LANES * rows].reshape(full, LANES, rows)
    view[groups] = lw[groups].reshape(-1, rows, LANES).transpose(0, 2, 1)
