# Over 600 lines: the DQS kernels' three emitters (two-vertex, planar group, signed records) share their lane
# helpers, transposes and the transform; split apart they would import each other.
"""The LLVM IR of the float32 dual quaternion kernels, built with :mod:`skeletal.skinning.ir`'s emitters.

Holds the vertex emitters (1-2 vertices at a time, ``_emit_dq_vertices``), the planar group emitters
(``_emit_dq_group``, and ``_emit_dq_signed`` over the signed-record table; 16 vertices a group, or 8 on
256-bit targets: :func:`~skeletal.skinning.ir.planar_lanes`), their lane helpers, and the chunk intrinsic
``_skin_dq_chunk`` that :mod:`skeletal.skinning.dqs`'s numba kernels call. The palette is
:func:`~skeletal.skinning.dq_palette.pack_dq_palette`'s (J, 16) float32 (qr, qd xyzw, S upper triangle,
rigid flag); vertex arrays are float32 with contiguous rows. The kernel's design is described in
:mod:`skeletal.skinning.dqs`'s docstring.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from .dq_palette import DQ_STRIDE
from .ir import (I32, I64, LANES, _FM, Emit, Influences, Rows, _kernel_types_ok, _transpose_masks, chunk_codegen,
                 deinterleave3, interleave3, load_xyz8, planar_codegen, planar_lanes, planar_ok, store_rows,
                 store_xyz8, transpose_lanes, vec_type)


def _emit_dq_vertices(context, b, A, args, v0, n_influences, k_const, n_vert: int, scaled: bool,
                      clamp: bool) -> None:
    """IR dual quaternion skinning of vertices v0 .. v0 + n_vert - 1 (n_vert 1 or 2); A/args: the
    kernel's argument types and values (packed palette, joints, weights, positions, normals,
    tangents, their three outputs).

    Layout: one 4-lane group per vertex throughout (lanes 0-3 vertex a, 4-7 vertex b), so the blend
    needs no regrouping and every per-influence broadcast stays inside a 128-bit group."""
    do_n = not isinstance(A[4], types.NoneType)
    do_t = not isinstance(A[5], types.NoneType)
    lanes = 4 * n_vert
    e = Emit(b)
    pal = Rows(context, b, A[0], args[0], DQ_STRIDE)
    inf = Influences(context, b, A, args, pal.shape[0], k_const, clamp)
    quads = b.bitcast(pal.data, vec_type(4).as_pointer())  # joint j: quads 4j (qr), 4j+1 (qd), 4j+2, 4j+3 (S)
    verts = [b.add(v0, ir.Constant(I64, i)) for i in range(n_vert)]
    rows = [inf.rows(v) for v in verts]

    def record(jrow, k):
        return b.shl(inf.joint(jrow, k), ir.Constant(I64, 2))

    def quad(at, part):
        return b.load(b.gep(quads, [b.add(at, ir.Constant(I64, part)) if part else at]), align=4)

    def signed(w, dots):
        """w with the sign bits of dots xor-ed in: negated where the dot product is negative."""
        it = ir.VectorType(I32, w.type.count)
        flip = b.and_(b.bitcast(dots, it), ir.Constant(it, [-0x80000000] * w.type.count))
        return b.bitcast(b.xor(b.bitcast(w, it), flip), w.type)

    def pivot_record(at, jrow, wrow, count):
        """The pivot's record: the influence with the largest weight, the first of equal ones (index
        selects, no branches; unrolled when ``count`` is an int)."""
        if isinstance(count, int):
            best_at, best_w = at[0], inf.weight(wrow, 0)
            for k in range(1, count):
                w = inf.weight(wrow, k)
                better = b.fcmp_ordered(">", w, best_w)
                best_at, best_w = b.select(better, at[k], best_at), b.select(better, w, best_w)
            return best_at
        w_ptr = cgutils.alloca_once_value(b, inf.weight(wrow, 0))
        at_ptr = cgutils.alloca_once_value(b, record(jrow, 0))
        with cgutils.for_range(b, count) as loop:
            w = inf.weight(wrow, loop.index)
            better = b.fcmp_ordered(">", w, b.load(w_ptr))
            b.store(b.select(better, w, b.load(w_ptr)), w_ptr)
            b.store(b.select(better, record(jrow, loop.index), b.load(at_ptr)), at_ptr)
        return b.load(at_ptr)

    # 1. The blend. Every influence's dual quaternion goes into the hemisphere of the pivot's rotation
    # quaternion (weight sign-flipped where their dot product is negative); S is blended as is.
    if k_const is not None:
        kc = k_const
        ats = [[record(jrow, k) for k in range(kc)] for jrow, _ in rows]
        qrs = [e.concat([quad(at[k], 0) for at in ats]) for k in range(kc)]
        qds = [e.concat([quad(at[k], 1) for at in ats]) for k in range(kc)]
        yield
        # weights in 4-lane groups: wgs[g] holds influences 4g .. 4g+3 of each vertex
        wgs = []
        for g in range(0, kc, 4):
            parts = []
            for _, wrow in rows:
                if kc - g >= 4:
                    parts.append(b.load(b.bitcast(inf.wgt.ptr(wrow, g), vec_type(4).as_pointer()), align=4))
                else:
                    wv = ir.Constant(vec_type(4), [0.0] * 4)
                    for i in range(kc - g):
                        wv = b.insert_element(wv, inf.weight(wrow, g + i), ir.Constant(I32, i))
                    parts.append(wv)
            wgs.append(e.concat(parts))
        unsigned = [e.lanes_of(wgs[k // 4], [k % 4] * 4) for k in range(kc)]  # each weight, per group
        if kc <= 2:  # either pivot gives the same transform (the blend only changes its overall sign)
            pivot = qrs[0]
        else:  # the largest weight (first of equals), by a tournament in vector registers: pairs of
            # influences compared, the later one winning only when strictly larger (log2 K levels)
            field = list(zip(unsigned, qrs))
            while len(field) > 1:
                level = []
                for (w_a, q_a), (w_b, q_b) in zip(field[::2], field[1::2]):
                    later = b.fcmp_ordered(">", w_b, w_a)
                    level.append((b.select(later, w_b, w_a), b.select(later, q_b, q_a)))
                field = level
            pivot = field[0][1]
        yield
        terms_r, terms_d = [], []
        for g, wg in zip(range(0, kc, 4), wgs):  # dot products by in-group hadds, their sign bits into the weights
            group = range(g, min(g + 4, kc))
            if kc > 1:
                wg = signed(wg, e.hsum([e.mul(qrs[k], pivot) for k in group]))
            for i, k in enumerate(group):
                w = e.lanes_of(wg, [i] * 4)
                terms_r.append(e.mul(w, qrs[k]))
                terms_d.append(e.mul(w, qds[k]))
        acc_r, acc_d = e.tree_sum(terms_r), e.tree_sum(terms_d)
        if scaled:
            # per vertex, S's two quads as one 8-lane row, weights broadcast from memory (the rows
            # feed the multiply-adds straight from memory: fewer live registers than pair layout)
            lo_parts, hi_parts = [], []
            for at, (_, wrow) in zip(ats, rows):
                terms = []
                for k in range(kc):
                    w = e.splat(inf.weight(wrow, k), 8)
                    row = b.load(b.bitcast(b.gep(quads, [b.add(at[k], ir.Constant(I64, 2))]), vec_type(8).as_pointer()),
                                 align=4)
                    terms.append(e.mul(w, row))
                acc = e.tree_sum(terms)
                lo_parts.append(e.shuf(acc, None, range(4)))
                hi_parts.append(e.shuf(acc, None, range(4, 8)))
            s_lo, s_hi = e.concat(lo_parts), e.concat(hi_parts)
    else:
        r_parts, d_parts, lo_parts, hi_parts = [], [], [], []
        for jrow, wrow in rows:
            pivot = quad(pivot_record(None, jrow, wrow, n_influences), 0)
            r_ptr = cgutils.alloca_once_value(b, ir.Constant(vec_type(4), [0.0] * 4))
            d_ptr = cgutils.alloca_once_value(b, ir.Constant(vec_type(4), [0.0] * 4))
            lo_ptr = cgutils.alloca_once_value(b, ir.Constant(vec_type(4), [0.0] * 4))
            hi_ptr = cgutils.alloca_once_value(b, ir.Constant(vec_type(4), [0.0] * 4))
            with cgutils.for_range(b, n_influences) as loop:
                at = record(jrow, loop.index)
                w = inf.weight(wrow, loop.index)
                qr = quad(at, 0)
                m = e.mul(qr, pivot)
                h = e.add(m, e.shuf(m, None, [1, 0, 3, 2]))
                ws = signed(e.splat(w, 4), e.add(h, e.shuf(h, None, [2, 3, 0, 1])))
                b.store(e.fma(ws, qr, b.load(r_ptr)), r_ptr)
                b.store(e.fma(ws, quad(at, 1), b.load(d_ptr)), d_ptr)
                if scaled:
                    b.store(e.fma(e.splat(w, 4), quad(at, 2), b.load(lo_ptr)), lo_ptr)
                    b.store(e.fma(e.splat(w, 4), quad(at, 3), b.load(hi_ptr)), hi_ptr)
            r_parts.append(b.load(r_ptr))
            d_parts.append(b.load(d_ptr))
            lo_parts.append(b.load(lo_ptr))
            hi_parts.append(b.load(hi_ptr))
        acc_r, acc_d = e.concat(r_parts), e.concat(d_parts)
        s_lo, s_hi = e.concat(lo_parts), e.concat(hi_parts)
    q, dual = acc_r, acc_d

    yield
    if scaled:  # S's columns from (s00, s01, s02, s11), (s12, s22, -, 0); lane 3 of each = 0
        cols = lambda pattern: e.shuf(s_lo, s_hi, [4 * g + (p if p < 4 else lanes + p - 4)
                                                   for g in range(n_vert) for p in pattern])
        c0, c1, c2 = cols([0, 1, 2, 7]), cols([1, 3, 4, 7]), cols([2, 4, 5, 7])

    w_q = e.lanes_of(q, [3, 3, 3, 3])
    w_d = e.lanes_of(dual, [3, 3, 3, 3])
    y_q = e.yzx(q)

    def cross_q(x):  # q.xyz x x.xyz (lane 3: 0 when x's lane 3 is 0 or q's)
        return e.yzx(e.sub(e.mul(q, e.yzx(x)), e.mul(y_q, x)))

    p4 = vec_type(4).as_pointer()
    zero4 = ir.Constant(vec_type(4), [0.0] * 4)

    def load_rows(i):
        """Input rows (3 floats; tangents: xyz of 4) as one group per vertex, lane 3 = 0. Plain 16-byte
        loads (masked loads cost about 15% here): a tangent row is 16 bytes; a pair's first vertex
        reads the 4 bytes after its xyz, which lie before the second's row ends, and the second reads
        from 4 bytes before its row, inside the first's (row strides are at least 4 bytes); a lone
        vertex (a chunk's odd one) takes a masked load."""
        src = Rows(context, b, A[i], args[i], 4 if i == 5 else 3)
        if i == 5:
            parts = [b.load(b.bitcast(src.ptr(src.row(v), 0), p4), align=4) for v in verts]
            return e.concat([e.shuf(x, zero4, [0, 1, 2, 4]) for x in parts])
        if n_vert == 1:
            return e.load3(src.ptr(src.row(verts[0]), 0))
        first = b.load(b.bitcast(src.ptr(src.row(verts[0]), 0), p4), align=4)
        second = b.load(b.bitcast(b.gep(src.row(verts[1]), [ir.Constant(I64, -4)]), p4), align=4)
        return e.shuf(e.shuf(first, zero4, [0, 1, 2, 4]), e.shuf(second, zero4, [1, 2, 3, 4]), range(8))

    def scale_by_s(x):  # S x (S blended; padding lanes of its columns are 0)
        return e.linear3(c0, c1, c2, *(e.lanes_of(x, [c] * 4) for c in range(3)))

    # 2. Normals (cofactor of S) and tangents (S) before rotation (which keeps lengths), so that one
    # in-group hadd sum gives |q|^2 and their squared lengths (and det S), and one rsqrt all inverses.
    squares, results, det_lane = [e.mul(q, q)], [], None
    if do_n:
        n = load_rows(4)
        if scaled:
            xu, yu, zu = e.cofactor(c0, c1, c2)
            n = e.yzx(e.linear3(xu, yu, zu, *(e.lanes_of(n, [c] * 4) for c in range(3))))
            results.append((7, n, len(squares)))
            squares.append(e.mul(n, n))
            det_lane = len(squares)
            squares.append(e.det_terms(c0, xu))
        else:
            results.append((7, n, len(squares)))
            squares.append(e.mul(n, n))
    if do_t:
        t = load_rows(5)
        if scaled:
            t = scale_by_s(t)
        results.append((8, t, len(squares)))
        squares.append(e.mul(t, t))
    yield
    sums, rs = e.inverse_lengths(squares)
    # 2 / |q|^2: rotation by q/|q| and translation 2 (d q*) / |q|^2 both scale by it.
    r_q = e.lanes_of(rs, [0] * 4)
    inv = e.mul(e.add(r_q, r_q), r_q)

    def rotate(x):  # x + 2/|q|^2 q x (q x x + w x): rotation by q/|q| (x's lane 3 = 0)
        return e.fma(inv, cross_q(e.fma(w_q, x, cross_q(x))), x)

    yield
    # 3. Positions: p' = R(S p) + t, with R(x) + t = x + inv (q x (q x x + w x + d) + w d - dw q).
    p = load_rows(3)
    if scaled:
        p = scale_by_s(p)
    u = e.add(e.fma(w_q, p, cross_q(p)), dual)
    moved = e.sub(e.fma(w_q, dual, cross_q(u)), e.mul(w_d, q))
    store_rows(context, b, e, A, args, 6, e.fma(inv, moved, p), verts)

    yield
    # 4. Normals and tangents: rotated and normalised.
    for out, vec, lane in results:
        factor = e.length_factor(rs, sums, lane, det_lane if out == 7 else None)
        store_rows(context, b, e, A, args, out, e.mul(rotate(vec), factor), verts)


# The planar group kernel: LANES vertices per group, one SIMD lane per vertex from the loads on.


def _lane_vector(e: Emit, scalars):
    """One vector from LANES scalars (lane l = scalars[l]); for influence counts whose weight rows are
    not whole quads (K = 1, 2)."""
    b = e.b
    vec = ir.Constant(vec_type(len(scalars)), None)
    for lane, x in enumerate(scalars):
        vec = b.insert_element(vec, x, ir.Constant(I32, lane))
    return vec


def _transposed(e: Emit, ptrs, offsets, n: int, wanted):
    """Records of ``n`` float32 (n = 4 or 8) at each byte offset of ``offsets`` past each of the group's
    pointers ``ptrs`` (16 or 8 of them, i8*, vertex order) -> per offset ``{el: vector}``, lane l of it =
    element el of vertex l's record (``wanted``: one collection of elements per offset).

    Each n-float record is one load; row r of the transpose holds the records of vertices r, n + r,
    2n + r, ... in its n-lane blocks (joined by inserts straight from memory), so the in-block
    transpose (:func:`skeletal.skin.transpose_lanes`, log2 n shuffle stages on all blocks at once)
    leaves every element in vertex order. A pointer's records are loaded side by side (it is then
    dead: 16 pointers kept across the offsets spilled general registers)."""
    b = e.b
    lanes = len(ptrs)
    blocks = lanes // n

    def load(ptr, offset):
        at = b.gep(ptr, [ir.Constant(I64, offset)]) if offset else ptr
        return b.load(b.bitcast(at, vec_type(n).as_pointer()), align=4)

    halves = n == 8 and lanes == 16
    if halves:  # see _transpose_halves: its outputs' lanes 4-7 and 8-11 come from slots 8-11 and 4-7
        ptrs = [ptrs[_SWAP_MIDDLE[slot]] for slot in range(lanes)]
    rows: list[list] = [[] for _ in offsets]
    for r in range(n):
        loaded = [[load(ptrs[h * n + r], offset) for offset in offsets] for h in range(blocks)]
        for i in range(len(offsets)):
            parts = [loaded[h][i] for h in range(blocks)]
            while len(parts) > 1:  # pairwise joins: 2n-lane, then 4n-lane vectors
                width = 2 * parts[0].type.count
                parts = [e.shuf(x, y, range(width)) for x, y in zip(parts[::2], parts[1::2])]
            rows[i].append(parts[0])
    if halves:
        return [_transpose_halves(e, rows_i, wanted_i) for rows_i, wanted_i in zip(rows, wanted)]
    return [transpose_lanes(e, rows_i, wanted_i, lanes) for rows_i, wanted_i in zip(rows, wanted)]


#: Lanes 4-7 and 8-11 swapped (an involution).
_SWAP_MIDDLE = [0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15]


def _transpose_halves(e: Emit, rows, wanted):
    """:func:`skeletal.skin.transpose_lanes` of 8 rows of two 8-float records (slots r and 8 + r in
    row r), except that the last stage joins 128-bit blocks (a0, a2, b0, b2) / (a1, a3, b1, b3): one
    non-destructive ``vshuff64x2`` each, where the in-order join (a0, b0, a2, b2) took a
    ``vpermt2pd`` and a register copy. Output lane l holds slot ``_SWAP_MIDDLE[l]``'s element."""
    b_lo = [4 * blk + i for blk in (0, 2) for i in range(4)]
    last = ([x for src in (0, 16) for x in (src + y for y in b_lo)],
            [x for src in (0, 16) for x in (src + 4 + y for y in b_lo)])
    labels = {0: [[(r + 8 * (l // 8), l % 8) for l in range(16)] for r in range(8)]}  # (slot, element)

    def masks(stage):
        if stage == 3:
            return last
        lo, hi = _transpose_masks(8, stage)
        widen = lambda m: [h * 8 + (x if x < 8 else 16 + x - 8) for h in (0, 1) for x in m]
        return widen(lo), widen(hi)

    for stage in (1, 2, 3):
        bit, prev, cur = 1 << (stage - 1), labels[stage - 1], [None] * 8
        lo, hi = masks(stage)
        for v in range(8):
            if not v & bit:
                both = prev[v] + prev[v | bit]
                cur[v], cur[v | bit] = [both[i] for i in lo], [both[i] for i in hi]
        labels[stage] = cur
    built: dict = {}

    def get(stage, v):
        if stage == 0:
            return rows[v]
        if (stage, v) not in built:
            bit = 1 << (stage - 1)
            built[stage, v] = e.shuf(get(stage - 1, v & ~bit), get(stage - 1, v | bit), masks(stage)[1 if v & bit else 0])
        return built[stage, v]

    out = {}
    for v, lanes in enumerate(labels[3]):
        el = lanes[0][1]
        assert [slot for slot, _ in lanes] == _SWAP_MIDDLE and all(x == el for _, x in lanes)
        if el in wanted:
            out[el] = get(3, v)
    return out


def _emit_dq_group(context, b, A, args, v0, k: int, scaled: bool, clamp: bool, lanes: int = LANES) -> None:
    """IR dual quaternion skinning of the ``lanes`` vertices v0 .. v0 + lanes - 1 (16, or 8 on 256-bit
    targets: :func:`~skeletal.skinning.ir.planar_lanes`) of dense (V, 3) arrays,
    K = k unrolled, positions (+ normals; no tangents). One lane per vertex throughout: every
    influence's packed record is transposed as it is loaded (its ``qr | qd`` as 8-float records, S's
    six numbers as the next 8), so the pivot, the hemisphere signs, the blend and the transform are
    all lane-wise arithmetic with no horizontal sums (the same maths as :func:`_emit_dq_vertices`)."""
    e = Emit(b)
    pal = Rows(context, b, A[0], args[0], DQ_STRIDE)
    inf = Influences(context, b, A, args, pal.shape[0], k, clamp)
    rows = [inf.rows(b.add(v0, ir.Constant(I64, i))) for i in range(lanes)]
    stride = ir.Constant(I64, 4 * DQ_STRIDE)

    # 1. Weights, lane-wise.
    weights = _lane_weights(e, inf, [wrow for _, wrow in rows], k)

    it = ir.VectorType(I32, lanes)
    sign_bit = ir.Constant(it, [-0x80000000] * lanes)

    def signed(w, dot):  # w with the sign bit of dot xor-ed in: negated where qr . pivot < 0
        return b.bitcast(b.xor(b.bitcast(w, it), b.and_(b.bitcast(dot, it), sign_bit)), w.type)

    def dot4(x, y):
        return e.tree_sum([e.mul(a, c) for a, c in zip(x, y)])

    def records(kk):
        """Influence kk's record, lane-wise: qr (x, y, z, w), qd, and for the scaled kernel S (s00, s01,
        s02, s11, s12, s22)."""
        ptrs = [b.gep(pal.data, [b.mul(inf.joint(jrow, kk), stride)]) for jrow, _ in rows]
        got = _transposed(e, ptrs, [0, 32] if scaled else [0], 8, [range(8), range(6)])
        return [got[0][c] for c in range(4)], [got[0][4 + c] for c in range(4)], \
            [got[1][c] for c in range(6)] if scaled else []

    def blend(pivot_first: bool):
        """(q, d, S): the blended dual quaternion and S (S with the unsigned weights), 14 or 8 lane-wise
        vectors. Every influence is put into the hemisphere of the pivot's qr. ``pivot_first``:
        influence 0 is the pivot (K <= 2, where any pivot gives the same transform, or weights sorted):
        each influence is signed and added as it is loaded, sums as multiply-add chains (few live
        registers); else the largest weight, the first of equal ones, found by a tournament of selects
        (the later of a pair wins only when strictly larger) once all qr are loaded, sums as trees
        (as the two-vertex kernel's)."""
        if pivot_first:  # sums as multiply-add chains (as few live registers as possible)
            sums: list = []
            pivot = None
            for kk in range(k):
                qr, qd, s_k = records(kk)
                pivot = pivot or qr
                ws = weights[kk] if kk == 0 else signed(weights[kk], dot4(qr, pivot))
                terms = [(ws, x) for x in qr + qd] + [(weights[kk], x) for x in s_k]
                sums = [e.mul(w, x) for w, x in terms] if kk == 0 else [e.fma(w, x, acc) for (w, x), acc in
                                                                       zip(terms, sums)]
            return sums
        recs = [records(kk) for kk in range(k)]
        field = [(w, rec[0]) for w, rec in zip(weights, recs)]
        while len(field) > 1:
            level = []
            for (w_a, q_a), (w_b, q_b) in zip(field[::2], field[1::2]):
                later = b.fcmp_ordered(">", w_b, w_a)
                level.append((b.select(later, w_b, w_a), [b.select(later, y, x) for x, y in zip(q_a, q_b)]))
            field = level
        pivot = field[0][1]
        trees = []
        for w, (qr, qd, s_k) in zip(weights, recs):
            ws = signed(w, dot4(qr, pivot))
            trees.append([e.mul(ws, x) for x in qr + qd] + [e.mul(w, x) for x in s_k])
        return [e.tree_sum(terms) for terms in zip(*trees)]

    # 2. The blend. K > 2: groups whose weights are sorted (influence 0 the largest in every lane, as
    # glTF exporters write them) take the streaming blend, the others the tournament; both give the
    # same pivot, so the same result.
    if k <= 2:
        blended = blend(True)
    else:
        blended = _either(b, _sorted_first(b, weights), lambda: blend(True), lambda: blend(False))
    _emit_dq_transform(context, b, e, A, args, v0, blended[:4], blended[4:8], blended[8:] if scaled else None)


def _emit_dq_transform(context, b, e: Emit, A, args, v0, q, d, s6) -> None:
    """The planar kernels' transform of a group's vertices (16 or 8: the vectors' lanes) from v0 on,
    lane-wise: ``q``, ``d`` the blended dual quaternion (4 + 4 vectors, not normalised), ``s6`` the blended
    S (s00, s01, s02, s11, s12, s22) or None (rigid): positions (and normals when given) read, transformed
    and stored. An entry of ``s6`` may be None, a structural zero (the diagonal kernel's off-diagonals): its
    products are not emitted."""
    do_n = not isinstance(A[4], types.NoneType)
    scaled = s6 is not None
    if scaled:
        s00, s01, s02, s11, s12, s22 = s6
        cols = [[s00, s01, s02], [s01, s11, s12], [s02, s12, s22]]  # S's columns (S symmetric)

    lanes = q[0].type.count
    vt = vec_type(lanes)
    zero = ir.Constant(vt, [0.0] * lanes)
    sqrt = cgutils.get_or_insert_function(b.module, ir.FunctionType(vt, [vt]), f"llvm.sqrt.v{lanes}f32")

    def inverse_length(sq):  # 1/sqrt(sq), 0 where sq is not positive; exact (vsqrtps, vdivps): without
        # afn/arcp, as LLVM's estimate and Newton step ran 2-3% slower here (more instructions in the loop)
        inv = b.fdiv(ir.Constant(vt, [1.0] * lanes), b.call(sqrt, [sq]), flags=("contract", "nsz"))
        return b.select(b.fcmp_ordered(">", sq, zero), inv, zero)

    def dot3(x, y):
        return e.linear3(x[0], x[1], x[2], y[0], y[1], y[2])

    def cross(x, y):
        return [e.sub(e.mul(x[(r + 1) % 3], y[(r + 2) % 3]), e.mul(x[(r + 2) % 3], y[(r + 1) % 3])) for r in range(3)]

    def lin(coefs, xs):  # sum of c x (as linear3: a multiply, then multiply-adds), None coefficients left out
        acc = None
        for c, x in zip(coefs, xs):
            if c is not None:
                acc = e.mul(c, x) if acc is None else e.fma(c, x, acc)
        return acc

    def by_s(x):  # S x
        return [lin([cols[0][r], cols[1][r], cols[2][r]], x) for r in range(3)]

    # 2 / |q|^2: rotation by q/|q| and translation 2 (d q*) / |q|^2 both scale by it (one division, no
    # square root; 0 where |q|^2 is not positive).
    q_sq = e.tree_sum([e.mul(c, c) for c in q])
    inv = b.select(b.fcmp_ordered(">", q_sq, zero), b.fdiv(ir.Constant(vt, [2.0] * lanes), q_sq, flags=_FM), zero)
    qv, w_q, w_d = q[:3], q[3], d[3]

    def rotate(x):  # x + inv q x (q x x + w x): rotation by q/|q|
        u = [e.fma(w_q, c, y) for c, y in zip(x, cross(qv, x))]
        return [e.fma(inv, m, c) for m, c in zip(cross(qv, u), x)]

    # 5. Positions: p' = R(S p) + t = p + inv (q x (q x p + w p + d) + w d - dw q).
    p = _load_xyz(context, b, e, A, args, 3, v0, lanes)
    if scaled:
        p = by_s(p)
    u = [e.add(e.fma(w_q, c, y), dc) for c, y, dc in zip(p, cross(qv, p), d)]
    moved = [e.sub(e.fma(w_q, dc, y), e.mul(w_d, qc)) for dc, y, qc in zip(d, cross(qv, u), qv)]
    _store_xyz(context, b, e, A, args, 6, v0, [e.fma(inv, m, c) for m, c in zip(moved, p)])
    if not do_n:
        return
    # 6. Normals: through S's cofactor matrix (flipped where det S < 0), rotated, renormalised.
    n = _load_xyz(context, b, e, A, args, 4, v0, lanes)
    if scaled:
        # S symmetric: so is its cofactor matrix, six products of pairs (12 instructions, not 3 crosses' 18;
        # 3 products for a diagonal S, whose off-diagonal cofactors are structural zeros)
        def fms(a_, b_, c_, d_):  # a b - c d (None where both products are structural zeros)
            if c_ is None or d_ is None:
                return None if a_ is None or b_ is None else e.mul(a_, b_)
            cd = e.mul(c_, d_)
            return b.fneg(cd) if a_ is None or b_ is None else e.sub(e.mul(a_, b_), cd)
        c00, c11, c22 = fms(s11, s22, s12, s12), fms(s00, s22, s02, s02), fms(s00, s11, s01, s01)
        c01, c02, c12 = fms(s02, s12, s01, s22), fms(s01, s12, s02, s11), fms(s01, s02, s00, s12)
        cof = [[c00, c01, c02], [c01, c11, c12], [c02, c12, c22]]
        n = [lin([cof[0][r], cof[1][r], cof[2][r]], n) for r in range(3)]
    factor = inverse_length(dot3(n, n))
    if scaled:  # negated where det S < 0 (a mirror): the sign bit xor-ed in there (a compare and a masked xor)
        det = lin([s00, s01, s02], [c00, c01, c02])
        it = ir.VectorType(I32, lanes)
        flip = b.select(b.fcmp_ordered("<", det, zero), ir.Constant(it, [-0x80000000] * lanes), ir.Constant(it, [0] * lanes))
        factor = b.bitcast(b.xor(b.bitcast(factor, it), flip), factor.type)
    _store_xyz(context, b, e, A, args, 7, v0, [e.mul(c, factor) for c in rotate(n)])


def _emit_dq_signed(context, b, A, args, v0, k: int, scaled: bool, diagonal: bool = False,
                    lanes: int = LANES) -> None:
    """IR dual quaternion skinning of the ``lanes`` vertices v0 .. v0 + lanes - 1 of dense (V, 3) arrays, K = k
    unrolled, positions (+ normals; no tangents), with the sign table (:func:`_signed_records`): A[13]
    the (J, J) int32 table. Per vertex, the pivot's table row says which influences lie in the other
    hemisphere; their records' qr and qd are negated as they are loaded (the entry, broadcast from
    memory, anded with the eight lanes and xor-ed in: one ``vpternlogd``), so the blend is LBS's: one
    16-float multiply-add per influence (weight broadcast from memory), and the 16 blended records are
    transposed once (:func:`skeletal.skin.transpose_lanes`) into lane-wise q, d and S. A record's
    address is its joint's (as LBS's), not a table entry: the table load is off the load-to-load
    chain. Joint indices are clamped to J - 1, except in groups checked in range (dense influences).
    ``diagonal`` (with ``scaled``): every joint's S is diagonal (:data:`~skeletal.skinning.dqs.DIAGONAL_TOLERANCE`),
    so only s00, s11, s22 are transposed (11 of the 16 rows, not 14) and S's products are the diagonal's
    (S p: 3 multiplies, not 9; the cofactor: 3 products, not 12; its product with the normal: 3, not 9).
    A[13] a (J,) int32 array instead of the table: the palette's signs already put every pair of joints a
    vertex blends in one hemisphere (``skin_dq_into``'s ``pairs``), so nothing is negated and no pivot found.
    ``lanes`` 8 (256-bit targets, :func:`~skeletal.skinning.ir.planar_lanes`): each record is read as two
    8-float halves, (qr, qd) and S (the rigid kernel reads the first only), blended apart, and each half's 8
    blended rows transposed as one 8 x 8 block (qr, qd: 24 shuffles; S only its wanted 6 or 3 rows: 22 or
    17). (The 16-lane form's joined halves hide each blend behind an empty asm whose operand must fit one
    vector register: on a 256-bit target LLVM aborts the process there, so that form is never built for one.)
    On 256-bit targets A[13] may instead be the presigned table ((J, 8 J) float32,
    :func:`~skeletal.skinning.dqs._presigned_records`): row p holds every joint's qr and qd already in p's
    hemisphere, read in place of the record's first half, so the sign work (a broadcast and an xor per
    influence, no ``vpternlogd`` there) is gone; and at 8 lanes each branch of the group check transforms
    its own blend where S is rigid or diagonal (no phis of 8 or 11 vectors at the join, which went through
    the stack), and the sorted-weights check reads its compares' signs once (:func:`_group_sorted`)."""
    e = Emit(b)
    pal = Rows(context, b, A[0], args[0], DQ_STRIDE)
    # A (J, J) sign table, or a (J,) array: the palette's signs were made consistent for this mesh (every
    # pair of joints that share a vertex in one hemisphere, :func:`~skeletal.skinning.dqs._hemisphere_signs`),
    # so no influence is negated and the pivot plays no part: the blend is LBS's without the sign work.
    use_table = A[13].ndim == 2
    # A (J, 8 J) float32 table on 256-bit targets: each pair's qr and qd already signed (presigned records)
    presigned = use_table and A[13].dtype == types.float32
    table = Rows(context, b, A[13], args[13])
    inf = Influences(context, b, A, args, table.shape[0], k, True)
    # Rows as offsets from the group's first (constant offsets where the strides are: no per-row pointers
    # kept live, which spilled).
    jrow0, wrow0 = inf.rows(v0)
    rows = [(b.gep(jrow0, [b.mul(ir.Constant(I64, i), inf.jnt.stride)]),
             b.gep(wrow0, [b.mul(ir.Constant(I64, i), inf.wgt.stride)])) for i in range(lanes)]
    n_el = 14 if scaled else 8
    wanted = [*range(8), 8, 11, 13] if scaled and diagonal else list(range(n_el))  # 8, 11, 13: s00, s11, s22
    record_bytes = ir.Constant(I64, 4 * DQ_STRIDE)
    flip_lanes = ir.Constant(ir.VectorType(I32, LANES), [-0x80000000] * 8 + [0] * (LANES - 8))

    def blend(pivot_first: bool, inf=inf):
        """The blended records, transposed: n_el vectors (qr, qd, S; None for an element not ``wanted``). ``pivot_first``: influence 0 is
        the pivot (its record needs no look-up); else the largest weight (the first of equal ones), by
        a chain of selects per vertex. Joint indices are read where they are used (16 vertices' K
        indices kept live across the blend spilled); ``inf`` clamps them or, where the caller checked
        the group, does not."""
        out = []
        for jrow, wrow in rows:
            joints = [inf.joint(jrow, kk) for kk in range(k)]
            if pivot_first:
                pivot = joints[0]
            else:
                pivot, best = joints[0], inf.weight(wrow, 0)
                for kk in range(1, k):
                    w = inf.weight(wrow, kk)
                    better = b.fcmp_ordered(">", w, best)
                    pivot, best = b.select(better, joints[kk], pivot), b.select(better, w, best)
            trow = table.row(pivot) if use_table else None
            if lanes == 8:
                out.append(blend8(jrow, wrow, joints, trow, pivot_first, inf))
                continue
            acc = None
            for kk in range(k):
                at = b.mul(joints[kk], record_bytes)
                record = b.load(b.bitcast(b.gep(pal.data, [at]), vec_type(LANES).as_pointer()), align=4)
                if use_table and not (pivot_first and kk == 0):
                    # qr and qd (lanes 0-7) negated where the table says so: rec ^ (sign & lanes),
                    # one vpternlogd with the table entry broadcast from memory
                    sign = e.splat(table.load(trow, joints[kk]), LANES)
                    bits = b.bitcast(record, ir.VectorType(I32, LANES))
                    record = b.bitcast(b.xor(bits, b.and_(sign, flip_lanes)), record.type)
                w = e.splat(inf.weight(wrow, kk), LANES)
                acc = e.mul(w, record) if acc is None else e.fma(w, record, acc)
            out.append(acc)
        if lanes == 8:  # qr | qd of each vertex, then S's 8 floats: two 8 x 8 transposes
            got = transpose_lanes(e, [lo for lo, _ in out], [c for c in wanted if c < 8])
            if scaled:
                s_rows = transpose_lanes(e, [hi for _, hi in out], [c - 8 for c in wanted if c >= 8])
                got.update({8 + c: v for c, v in s_rows.items()})
        elif not scaled or diagonal:
            # Rigid and diagonal S: of a record's 16 lanes 8 (qr, qd) or 11 are wanted, and a 16-row transpose
            # builds all 16 rows through three of its four stages (56 shuffles for 8 of them). Instead the low
            # halves of records r and r + 8 are joined into one row (the blends hidden first: else LLVM pushes
            # the join up into every influence), and the 8 rows transposed as two 8 x 8 blocks (8 + 24
            # shuffles; lane l is still vertex l); diagonal S below (19 more: 51 in all against 59). General S
            # (14 lanes) keeps the 16-row transpose (62; joined halves would take as many).
            hidden = [_opaque_vec(b, v) for v in out]
            joined = [e.shuf(hidden[r], hidden[r + 8], [*range(8), *range(LANES, LANES + 8)]) for r in range(8)]
            got = transpose_lanes(e, joined, [c for c in wanted if c < 8], width=LANES)
            if scaled:  # diagonal S: s00, s11, s22 (lanes 8, 11, 13) of records r and r + 4 into one 8-lane
                # half (one two-source permute), two halves joined: 4 rows of four (s00, s11, s22, -) quads,
                # transposed as 4 x 4 blocks (8 + 4 + 7 shuffles)
                pick = [8, 11, 13, 8]
                half = [e.shuf(hidden[r], hidden[r + 4], [*pick, *(LANES + x for x in pick), *pick, *pick])
                        for r in (0, 1, 2, 3, 8, 9, 10, 11)]
                quads = [e.shuf(half[i], half[i + 4], [*range(8), *range(LANES, LANES + 8)]) for i in range(4)]
                diag = transpose_lanes(e, quads, [0, 1, 2], width=LANES)
                got.update({8: diag[0], 11: diag[1], 13: diag[2]})
        else:
            got = transpose_lanes(e, out, wanted)
        return [got.get(c) for c in range(n_el)]

    def blend8(jrow, wrow, joints, trow, pivot_first: bool, inf):
        """One vertex's blend at 8 lanes: (qr | qd, S) as two 8-float multiply-add chains (S None for the rigid
        kernel), each weight broadcast from memory; qr | qd xor-ed with the table entry (0 or the sign bit,
        broadcast from memory) where the table is used, or read already signed from the presigned table (row
        ``trow``, the pivot's): the record's 8 floats at 32 j there, its S at 64 j + 32 in the palette, both
        from one shift of j (x86 addresses scale it by 2; the empty asm keeps LLVM from shifting twice)."""
        acc_q = acc_s = None
        for kk in range(k):
            presign = presigned and not (pivot_first and kk == 0)
            if presigned:
                j32 = _opaque(b, b.shl(joints[kk], ir.Constant(I64, 5)))
                at = b.add(j32, j32)
            else:
                at = b.mul(joints[kk], record_bytes)
            halves = b.bitcast(b.gep(pal.data, [at]), vec_type(8).as_pointer())
            rec_q = b.load(b.bitcast(b.gep(trow, [j32]), halves.type) if presign else halves, align=4)
            if use_table and not presigned and not (pivot_first and kk == 0):
                sign = e.splat(table.load(trow, joints[kk]), 8)
                rec_q = b.bitcast(b.xor(b.bitcast(rec_q, sign.type), sign), rec_q.type)
            w = e.splat(inf.weight(wrow, kk), 8)
            acc_q = e.mul(w, rec_q) if acc_q is None else e.fma(w, rec_q, acc_q)
            if scaled:
                rec_s = b.load(b.gep(halves, [ir.Constant(I64, 1)]), align=4)
                acc_s = e.mul(w, rec_s) if acc_s is None else e.fma(w, rec_s, acc_s)
        return acc_q, acc_s

    def transform(blended) -> list:
        _emit_dq_transform(context, b, e, A, args, v0, blended[:4], blended[4:8], blended[8:] if scaled else None)
        return []

    def either(cond, then, otherwise) -> None:
        """The blend ``then()`` where ``cond`` holds, else ``otherwise()``, and the transform. At 8 lanes, rigid or
        diagonal S, each branch transforms its own blend (the transform emitted twice): merged by phis, the 8 or
        11 blended vectors went through the stack at the join, 16 ymm registers being too few to keep them.
        (General S, 14 vectors, measured 2-3% slower so: its transform spills either way.)"""
        if lanes == 8 and (diagonal or not scaled):
            _either(b, cond, lambda: transform(then()), lambda: transform(otherwise()))
        else:
            transform(_either(b, cond, then, otherwise))

    # 1. K <= 2: influence 0 is the pivot (any pivot gives the same transform). Else influence 0 where
    # every lane of the group has its weights sorted largest first (one lane-wise check), otherwise the
    # largest weight of each vertex; both give the same pivot, so the same result.
    if _dense_influences(A):
        # Dense C-contiguous joints and weights: one check per group, from whole-group vector loads,
        # that every joint index is below J and (K > 2) every row's weights are sorted largest first.
        # Where it holds, the streamed blend runs without the per-influence clamps (cmp + cmov each:
        # 128 of ~730 instructions per group at K = 4); anything else takes the clamped blend with the
        # per-vertex pivot. (The weights are read through a pointer LLVM cannot see through: else it
        # reuses these loads for the blend's weights, broadcasting each from a register, a shuffle,
        # instead of from memory; likewise the indices, extracted from a vector instead of loaded.)
        fast = _group_in_range(b, inf, _opaque(b, jrow0), k, table.shape[0], lanes)
        if k > 2 and use_table:
            fast = b.and_(fast, _group_sorted(b, _opaque(b, wrow0), k, lanes))
        free = Influences(context, b, A, args, table.shape[0], k, False)
        either(fast, lambda: blend(True, free), lambda: blend(k <= 2 or not use_table))
    elif k <= 2 or not use_table:
        transform(blend(True))
    else:
        # The check reads the weights through a pointer LLVM cannot see through (as above).
        hidden = _opaque(b, wrow0)
        wrows = [b.gep(hidden, [b.mul(ir.Constant(I64, i), inf.wgt.stride)]) for i in range(lanes)]
        either(_sorted_first(b, _lane_weights(e, inf, wrows, k)), lambda: blend(True), lambda: blend(False))


def _dense_influences(A) -> bool:
    """Whether the joints and weights arguments are C-contiguous (compile time): a group's K x lanes
    indices and weights are then one run of memory each."""
    return all(isinstance(A[i], types.Array) and A[i].layout == "C" for i in (1, 2))


def _group_in_range(b, inf: Influences, jrow0, k: int, rows, lanes: int = LANES):
    """i1: every one of the ``lanes`` x K joint indices from row ``jrow0`` on (dense rows) is below
    ``rows`` (i64), by one vector compare (unsigned: negative indices fail it). An index type too
    narrow to reach ``rows`` always passes."""
    ity = inf.jnt.elty
    n = lanes * k
    vt = ir.VectorType(ity, n)
    got = b.load(b.bitcast(jrow0, vt.as_pointer()), align=1)
    bits = ity.width
    if bits < 64:
        top = ir.Constant(I64, (1 << bits) - 1)
        limit = b.trunc(b.select(b.icmp_unsigned("<", top, rows), top, b.sub(rows, ir.Constant(I64, 1))), ity)
    else:
        limit = b.sub(rows, ir.Constant(I64, 1))
    splat = b.shuffle_vector(b.insert_element(ir.Constant(vt, ir.Undefined), limit, ir.Constant(I32, 0)),
                             ir.Constant(vt, ir.Undefined), ir.Constant(ir.VectorType(I32, n), [0] * n))
    ok = b.icmp_unsigned("<=", got, splat)
    return b.icmp_unsigned("==", b.bitcast(ok, ir.IntType(n)), ir.Constant(ir.IntType(n), -1))


def _group_sorted(b, wrow0, k: int, lanes: int = LANES):
    """i1: each of the ``lanes`` dense weight rows from ``wrow0`` (i8*) has its first weight at least each
    other (influence 0 is the pivot), from one <lanes * K x float> load and one compare. At 8 lanes, 8 floats
    at a time: each 8-float part's failures (a weight above its row's first, or NaN) as a lane mask, the
    masks or-ed and the result's sign bits read once (``vmovmskps``); the empty asm keeps LLVM from packing
    the masks into bytes first (7 shuffles a group, which one compare of the whole vector took)."""
    n = lanes * k
    if lanes == 8:
        v8, i8 = vec_type(8), ir.VectorType(I32, 8)
        floats = b.bitcast(wrow0, ir.FloatType().as_pointer())
        failed = None
        for at in range(0, n, 8):
            part = b.load(b.bitcast(b.gep(floats, [ir.Constant(I64, at)]), v8.as_pointer()), align=4)
            lead = b.shuffle_vector(part, ir.Constant(v8, ir.Undefined), ir.Constant(i8, [k * (i // k) for i in range(8)]))
            mask = b.bitcast(_opaque_vec(b, b.bitcast(b.sext(b.fcmp_unordered("<", lead, part), i8), v8)), i8)
            failed = mask if failed is None else b.or_(failed, mask)
        signs = b.icmp_signed("<", failed, ir.Constant(i8, [0] * 8))
        return b.icmp_unsigned("==", b.bitcast(signs, ir.IntType(8)), ir.Constant(ir.IntType(8), 0))
    vt = vec_type(n)
    got = b.load(b.bitcast(wrow0, vt.as_pointer()), align=4)
    first = b.shuffle_vector(got, ir.Constant(vt, ir.Undefined),
                             ir.Constant(ir.VectorType(I32, n), [k * (lane // k) for lane in range(n)]))
    ok = b.fcmp_ordered(">=", first, got)
    return b.icmp_unsigned("==", b.bitcast(ok, ir.IntType(n)), ir.Constant(ir.IntType(n), -1))


def _lane_weights(e: Emit, inf: Influences, wrows, k: int):
    """The K weights of the group's weight rows ``wrows`` (16 or 8) lane-wise (lane l = row l's): whole quads of each
    row transposed (K = 4, 8), else one lane at a time."""
    if k % 4 == 0:
        weights = []
        for g in range(0, k, 4):
            got, = _transposed(e, wrows, [4 * g], 4, [range(4)])
            weights += [got[c] for c in range(4)]
        return weights
    return [_lane_vector(e, [inf.weight(wrow, kk) for wrow in wrows]) for kk in range(k)]


def _sorted_first(b, weights):
    """i1: in every lane, weight 0 is at least each other weight (influence 0 is the pivot)."""
    first = None
    for w in weights[1:]:
        ge = b.fcmp_ordered(">=", weights[0], w)
        first = ge if first is None else b.and_(first, ge)
    lanes = first.type.count
    return b.icmp_unsigned("==", b.bitcast(first, ir.IntType(lanes)), ir.Constant(ir.IntType(lanes), -1))


def _either(b, cond, then, otherwise):
    """``then()`` where ``cond`` holds, else ``otherwise()`` (each emits its own code and returns a list of
    values of the same types, or None at the same places), merged by phis."""
    with b.if_else(cond) as (yes, no):
        with yes:
            got_yes, block_yes = then(), b.block
        with no:
            got_no, block_no = otherwise(), b.block
    merged = []
    for x, y in zip(got_yes, got_no):
        if x is None:
            merged.append(None)
            continue
        phi = b.phi(x.type)
        phi.add_incoming(x, block_yes)
        phi.add_incoming(y, block_no)
        merged.append(phi)
    return merged


def _opaque_vec(b, value):
    """A vector ``value`` through an empty inline asm (a vector register): the same value, opaque to LLVM."""
    return b.asm(ir.FunctionType(value.type, [value.type]), "", "=v,0", [value], False)


def _opaque(b, value):
    """``value`` through an empty inline asm: the same value, which LLVM can no longer relate to others
    (so loads through it are not merged with loads through the original)."""
    return b.asm(ir.FunctionType(value.type, [value.type]), "", "=r,0", [value], False)


def _load_xyz(context, b, e: Emit, A, args, i: int, v0, lanes: int = LANES):
    """x, y, z of the dense (V, 3) argument i's rows v0 .. v0 + lanes - 1: three loads, deinterleaved (8
    lanes: :func:`~skeletal.skinning.ir.load_xyz8`'s six 128-bit loads and in-lane shuffles)."""
    src = Rows(context, b, A[i], args[i], 3)
    if lanes == 8:
        return load_xyz8(e, b.bitcast(src.row(v0), vec_type(4).as_pointer()))
    ptr = b.bitcast(src.row(v0), vec_type(lanes).as_pointer())
    return deinterleave3(e, *(b.load(b.gep(ptr, [ir.Constant(I64, j)]), align=4) for j in range(3)))


def _store_xyz(context, b, e: Emit, A, args, i: int, v0, xyz) -> None:
    """The inverse of :func:`_load_xyz` into output argument i (the lanes: those of ``xyz``)."""
    dst = Rows(context, b, A[i], args[i], 3)
    lanes = xyz[0].type.count
    if lanes == 8:
        return store_xyz8(e, b.bitcast(dst.row(v0), vec_type(4).as_pointer()), xyz)
    ptr = b.bitcast(dst.row(v0), vec_type(lanes).as_pointer())
    for j, vec in enumerate(interleave3(e, *xyz)):
        b.store(vec, b.gep(ptr, [ir.Constant(I64, j)]), align=4)


@intrinsic
def _skin_dq_chunk(typingctx, palette, joints, weights, positions, normals, tangents,
                   out_positions, out_normals, out_tangents, chunk, kspec, scaled, unclamped, signs):
    """DQ-skin vertices ``chunk * CHUNK`` .. ``+ CHUNK`` (clipped), two at a time. Compile-time
    choices as for :func:`skeletal.skin._skin_chunk`; ``scaled`` None (rigid palette: no S blend)
    or anything else (the scale-separated kernel; an integer: every joint's S is diagonal, which the
    signed-record kernel exploits and the others treat as any S); ``signs`` None, or the (J, J) int32 sign table of
    :func:`_signed_records` (joint indices are then clamped to the table's J: the signed-record group
    kernel), or a (J,) int32 array (the same kernel without sign work: the palette's hemispheres were made
    consistent for the mesh, :func:`_hemisphere_signs`)."""
    sig = types.void(palette, joints, weights, positions, normals, tangents, out_positions, out_normals,
                     out_tangents, chunk, kspec, scaled, unclamped, signs)
    if not _kernel_types_ok(palette, joints, weights, positions, normals, tangents, out_positions, out_normals,
                            out_tangents):
        return None  # a TypingError: skin_dq_into then names the fault (check_skin_args)
    signed = not isinstance(signs, types.NoneType)
    if signed and not (isinstance(signs, types.Array) and signs.ndim in (1, 2) and signs.dtype == types.int32) and not (
            _presigned_type(signs) and planar_lanes() == 8):
        return None
    use_scale, clamp = not isinstance(scaled, types.NoneType), signed or isinstance(unclamped, types.NoneType)
    diagonal = isinstance(scaled, types.Integer)
    vertices = lambda context, b, A, args, v0, kk, k_const, n_vert: _emit_dq_vertices(
        context, b, A, args, v0, kk, k_const, n_vert, use_scale, clamp)
    k_const = len(kspec) if isinstance(kspec, types.BaseTuple) else None
    if planar_ok(sig.args, k_const):
        lanes = planar_lanes()  # 16 where a float32 vector of 16 is one register, else 8: one per register
        if signed:
            group = lambda context, b, A, args, v0, k: _emit_dq_signed(context, b, A, args, v0, k, use_scale, diagonal,
                                                                       lanes)
        else:
            group = lambda context, b, A, args, v0, k: _emit_dq_group(context, b, A, args, v0, k, use_scale, clamp,
                                                                      lanes)
        return sig, planar_codegen(False, clamp, vertices, group=group, lanes=lanes)
    return sig, chunk_codegen(vertices, pairs=2)


def _presigned_type(signs) -> bool:
    """Whether ``signs`` (a numba type) is a presigned-record table: 2-D float32, :func:`~skeletal.skinning.dqs._presigned_records`'."""
    return isinstance(signs, types.Array) and signs.ndim == 2 and signs.dtype == types.float32


@intrinsic
def _presign_row(typingctx, out, packed, table, p):
    """Row ``p`` of :func:`~skeletal.skinning.dqs._presigned_records`' table: for every joint j,
    ``out[p, 8 j : 8 j + 8]`` = the bits of ``packed[j, :8]`` (qr, qd) xor ``table[p, j]`` (0 or the sign bit):
    one 8-lane load, xor and store per joint (numba's loop over the 8 floats stayed scalar, 2.5x the time)."""
    if not (all(isinstance(a, types.Array) and a.ndim == 2 for a in (out, packed, table))
            and out.dtype == packed.dtype == types.float32 and table.dtype == types.int32
            and isinstance(p, types.Integer)):
        return None
    sig = types.void(out, packed, table, p)

    def codegen(context, b, signature, args):
        A = signature.args
        dst, src, tab = (Rows(context, b, A[i], args[i]) for i in range(3))
        row = context.cast(b, args[3], A[3], types.int64)
        drow, trow = dst.row(row), tab.row(row)
        vt = ir.VectorType(I32, 8)
        with cgutils.for_range(b, src.shape[0]) as loop:
            j = loop.index
            bits = b.load(b.bitcast(src.row(j), vt.as_pointer()), align=4)
            sign = b.insert_element(ir.Constant(vt, ir.Undefined), tab.load(trow, j), ir.Constant(I32, 0))
            sign = b.shuffle_vector(sign, ir.Constant(vt, ir.Undefined), ir.Constant(vt, [0] * 8))
            at = b.gep(drow, [b.mul(j, ir.Constant(I64, 32))])
            b.store(b.xor(bits, sign), b.bitcast(at, vt.as_pointer()), align=4)
        return context.get_dummy_value()

    return sig, codegen
