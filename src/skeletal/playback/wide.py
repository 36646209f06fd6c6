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
stay in the crowd's lane store between updates: ``Crowd.local_pose`` transposes them on the first
read after an update (:func:`lanes_to_pose`), as ozz keeps its local transforms in SoA form.

A group that does not qualify (other actions, fades, layers, a clip with other segment kinds, the
last partial group) takes the per-instance path of :mod:`skeletal.playback.kernels`, so any mixer
state gives the same poses as before, within float32 rounding (the wide path computes in float32,
the per-instance path blends in float64 before storing float32).

>>> crowd = skeletal.Crowd(asset, count=1000); crowd.play("Walk")   # doctest: +SKIP
>>> crowd.update(1 / 60)          # groups of 16 instances go wide   # doctest: +SKIP
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core.extending import intrinsic

from ..pose import palettes_one, world_subset_one
from ..quat import slerp_into
from ..sampling import locate_key
from .clipset import (CL_SEGMENT_END, CL_SEGMENT_START, CL_TIMELINE_END, CL_TIMELINE_START, SEG_CONSTANT, SEG_END,
                      SEG_FIRST, SEG_KIND, SEG_LERP3, SEG_NLERP, SEG_SLERP, SEG_TIMELINE, TK_OUT, TK_VALUE_START)
from .jobs import field
from .kernels import F_EFFECTIVE, F_SAMPLE, _advance_instance, _evaluate_instance

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


@njit(cache=True)
def _pose_group(b0, c, s, nl, job_arrays, packs, lw, ww, pw, kw, uw, tmpv, held):
    """Pose, world rows and palettes of instances b0 .. b0 + LANES - 1, all playing slot s (clip c)
    alone: see the module docstring. ``lw`` (N * 10 * LANES): this group's local rows
    ``[(node * 10 + component) * LANES + lane]`` in the crowd's lane store (kept there: see
    :func:`lanes_to_pose`); ``held`` (1,): the clip whose constant rows ``lw`` holds. This thread's
    scratch, flat float32 in the lane layout: ``ww``
    (N * 12 * LANES) world 3x4 rows ``[(node * 12 + entry) * LANES + lane]``, ``pw`` (J * 12 * LANES)
    palette rows likewise; ``kw`` / ``uw``
    (timelines per clip, LANES) key indices and fractions; ``tmpv`` one segment's sampled floats, ``[lane * width + x]``.
    ``packs``: :func:`key_major`'s arrays.
    ``nl``: LANES as a run-time uint64."""
    (tracks, clip_table, segments, timeline_keys, times, values, base_pose, fs, cursors, parents, world_nodes,
     pose, palette_joints, inverse_bind, palettes) = job_arrays
    packed, seg_table, dest = packs
    one = np.float32(1.0)
    S = _S
    u0, u1, u2, u3, u4, u5, u6, u7, u8, u9, u10, u11, u12 = _U
    q64 = np.empty(4)
    tl0 = clip_table[c, CL_TIMELINE_START]
    # key interval per timeline and lane (the search per instance, with its cursor)
    for tl in range(tl0, clip_table[c, CL_TIMELINE_END]):
        start, count = timeline_keys[tl, 0], timeline_keys[tl, 1]
        for lane in range(LANES):
            b = b0 + lane
            key, u, span = locate_key(times, start, count, fs[b, s, F_SAMPLE], cursors[b, tl])
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
        else:  # SEG_SLERP: keys far apart (few tracks): per lane, in float64 as everywhere
            for k in range(first, first + m):
                vs = tracks[k, TK_VALUE_START]
                o = np.uint64(tracks[k, TK_OUT]) * S
                for lane in range(LANES):
                    a = vs + keys[lane] * 4
                    slerp_into(q64, 0, np.float64(values[a]), np.float64(values[a + 1]), np.float64(values[a + 2]),
                               np.float64(values[a + 3]), np.float64(values[a + 4]), np.float64(values[a + 5]),
                               np.float64(values[a + 6]), np.float64(values[a + 7]), np.float64(us[lane]))
                    ul = np.uint64(lane)
                    lw[o + ul] = q64[0]
                    lw[o + S + ul] = q64[1]
                    lw[o + u2 * S + ul] = q64[2]
                    lw[o + u3 * S + ul] = q64[3]
    # the local rows stay in the lane layout (``lw`` is this group's own slice of the crowd's lane
    # store): the crowd's ``local_pose`` is transposed from them only when a user reads it
    # (:func:`lanes_to_pose`), not on every update
    # world 3x4 rows of the nodes needed, parent first, all lanes at once (the parent's rows read
    # from a copy: a second array that LLVM checks against the written rows at run time)
    wp = np.empty(12 * LANES, np.float32)
    for i in world_nodes:
        r0 = np.uint64(i * 10) * S
        wi = np.uint64(i * 12) * S
        p = parents[i]
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
            continue
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


@njit(cache=True, parallel=True)
def update_wide(job, dt, lanes, wide_clip, packed, seg_table, dest, lw, ww, pw, kw, uw, tv, held, done):
    """The crowd's update (clocks, blending, world rows, palettes) over groups of ``LANES``
    instances in parallel: a group whose instances all play one full-weight action of the same
    wide-able clip (``wide_clip`` (C,) from :func:`wide_clips`) is posed by :func:`_pose_group`,
    any other group instance by instance as :func:`skeletal.playback.kernels.update` does.
    Needs a job with one layer, no IK, and no kept world matrices (the Crowd checks). ``lanes``:
    LANES, given at run time (see ``_S``); ``packed``, ``seg_table``, ``dest``: :func:`key_major`'s;
    ``ww``, ``pw``, ``kw``, ``uw``, ``tv``: per-thread scratch (threads, ...) of :func:`_pose_group`'s
    shapes; ``lw`` (full groups, N * 10 * LANES) float32 and ``held`` (full groups, 1) int64 (starts
    at -1): the crowd's lane store of local rows, one slice per group; ``done`` (full groups,) uint8:
    set to 1 for a group posed wide (its ``pose`` rows are then stale until :func:`lanes_to_pose`),
    0 for one posed instance by instance (``pose`` written).
    Returns how many instances reported an event."""
    clip_duration, marker_time, ist = field(job, "clip_duration"), field(job, "marker_time"), field(job, "ist")
    tracks, clip_table, segments = field(job, "tracks"), field(job, "clip_table"), field(job, "segments")
    timeline_keys, times, values = field(job, "timeline_keys"), field(job, "times"), field(job, "values")
    base_pose, fs, cursors, parents = field(job, "base_pose"), field(job, "fs"), field(job, "cursors"), field(job, "parents")
    slot_clip, slot_layer = field(job, "slot_clip"), field(job, "slot_layer")
    layer_weight, snap_weight, base_unmasked = field(job, "layer_weight"), field(job, "snap_weight"), field(job, "base_unmasked")
    pose, morph, world_nodes, scratch_world = field(job, "pose"), field(job, "morph"), field(job, "world_nodes"), field(job, "scratch_world")
    palette_joints, inverse_bind, palettes = field(job, "palette_joints"), field(job, "inverse_bind"), field(job, "palettes")
    arrays = (tracks, clip_table, segments, timeline_keys, times, values, base_pose, fs, cursors, parents, world_nodes,
              pose, palette_joints, inverse_bind, palettes)
    packs = (packed, seg_table, dest)
    n = pose.shape[0]
    nl = np.uint64(lanes)
    groups = (n + LANES - 1) // LANES
    events = 0
    for g in prange(groups):
        tid = numba.get_thread_id()
        b0 = g * LANES
        b1 = min(b0 + LANES, n)
        for b in range(b0, b1):
            if _advance_instance(b, dt, fs, ist, slot_clip, clip_table, clip_duration, marker_time):
                events += 1
        s = -1
        if b1 - b0 == LANES and base_unmasked:
            s = _single_slot(b0, fs, slot_layer, layer_weight, snap_weight)
            if s >= 0 and wide_clip[slot_clip[s]]:
                for b in range(b0 + 1, b1):
                    if _single_slot(b, fs, slot_layer, layer_weight, snap_weight) != s:
                        s = -1
                        break
            else:
                s = -1
        if s >= 0:
            _pose_group(b0, slot_clip[s], s, nl, arrays, packs, lw[g], ww[tid], pw[tid], kw[tid], uw[tid], tv[tid],
                        held[g])
            done[g] = 1
            continue
        if b1 - b0 == LANES:
            done[g] = 0
        for b in range(b0, b1):
            _evaluate_instance(b, tid, job, layer_weight, pose, morph)
            w = scratch_world[tid]
            world_subset_one(parents, world_nodes, pose[b], w)
            palettes_one(w, palette_joints, inverse_bind, palettes[b])
    return events


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
