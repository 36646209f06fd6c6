"""LLVM IR for the float64 3x4 affine products of :mod:`skeletal.anim.pose` (world rows and palettes): the
code generators its intrinsics (``_times_tuple_f64``, ``_times_matrix_f64``) call, one form per vector
width of the CPU numba compiles for (512-bit: two rows to a vector; 256-bit: rows spread by register
shuffles; else the 4-wide form). Plain Python run at compile time; nothing here is called per frame.
"""

from __future__ import annotations

from llvmlite import ir
from numba.core import cgutils

# ---------------------------------------------------------------------------------------------
# 3x4 affine products in vector registers (float64)
#
# A world row or a palette row is a 4-vector: row r of ``A @ B`` (affine, bottom rows 0 0 0 1) is
# ``A[r,0] * B[0] + A[r,1] * B[1] + A[r,2] * B[2] + (0, 0, 0, A[r,3])``. Written as scalars, LLVM keeps
# the 12 entries scalar (measured: 68 world rows + 49 palettes of Soldier.glb, 1.0 us, at the scalar
# instruction throughput; 0.65 us with these); these intrinsics emit the 4-wide vector form, with the scalar code's order
# of operations (((a0 b0 + a1 b1) + a2 b2), + a3 on the last column only), so the result is
# bit-identical. Used for float64 arrays; other dtypes keep the scalar loops (see the overloads).


def _splat(builder, value, vec):
    lane0 = builder.insert_element(ir.Constant(vec, ir.Undefined), value, ir.Constant(ir.IntType(32), 0))
    return builder.shuffle_vector(lane0, ir.Constant(vec, ir.Undefined), ir.Constant(ir.VectorType(ir.IntType(32), 4), [0] * 4))


def _affine_rows_codegen(context, builder, dst_ty, dst, i, src_ty, src, p, b_rows):
    """dst[i, r, :] = src[p, r, :3] @ B (+ src[p, r, 3] on the last column) for r < 3, and
    dst[i, 3] = 0 0 0 1 when dst is (n, 4, 4); ``b_rows`` the three rows of B as <4 x double>; ``i``,
    ``p`` int64. Every load comes before the first store. Where the CPU has 512-bit vectors
    (:func:`_wide_vectors`), rows 0 and 1 go together (:func:`_two_rows_codegen`); where it has
    256-bit ones, src's rows 0 and 1 are loaded whole (:func:`_spread_rows_codegen`)."""
    if _wide_vectors():
        _two_rows_codegen(context, builder, dst_ty, dst, i, src_ty, src, p, b_rows)
        return
    whole = _spread_rows()
    if whole:
        _spread_rows_codegen(context, builder, dst_ty, dst, i, src_ty, src, p, b_rows, whole)
        return
    i64 = ir.IntType(64)
    vec = ir.VectorType(ir.DoubleType(), 4)
    d = context.make_array(dst_ty)(context, builder, dst)
    s = context.make_array(src_ty)(context, builder, src)
    s_rows = cgutils.unpack_tuple(builder, s.shape, 3)[1]
    d_rows = cgutils.unpack_tuple(builder, d.shape, 3)[1]
    rows = []
    for r in range(3):
        at = builder.mul(builder.add(builder.mul(p, s_rows), ir.Constant(i64, r)), ir.Constant(i64, 4))
        rows.append([builder.load(builder.gep(s.data, [builder.add(at, ir.Constant(i64, k))])) for k in range(4)])
    last = ir.Constant(ir.VectorType(ir.IntType(32), 4), [0, 1, 2, 7])
    out = []
    for a0, a1, a2, a3 in rows:
        v = builder.fmul(_splat(builder, a0, vec), b_rows[0])
        v = builder.fadd(v, builder.fmul(_splat(builder, a1, vec), b_rows[1]))
        v = builder.fadd(v, builder.fmul(_splat(builder, a2, vec), b_rows[2]))
        out.append(builder.shuffle_vector(v, builder.fadd(v, _splat(builder, a3, vec)), last))
    four = ir.Constant(i64, 4)
    for r, v in enumerate(out):
        at = builder.mul(builder.add(builder.mul(i, d_rows), ir.Constant(i64, r)), four)
        builder.store(v, builder.bitcast(builder.gep(d.data, [at]), vec.as_pointer()), align=8)
    with builder.if_then(builder.icmp_signed("==", d_rows, four), likely=True):  # a 4x4: its bottom row
        at = builder.mul(builder.add(builder.mul(i, d_rows), ir.Constant(i64, 3)), four)
        builder.store(ir.Constant(vec, [0.0, 0.0, 0.0, 1.0]), builder.bitcast(builder.gep(d.data, [at]), vec.as_pointer()),
                      align=8)


def _wide_vectors() -> bool:
    """Whether the CPU numba compiles for has 512-bit vectors (AVX-512F): :func:`_two_rows_codegen`
    then takes the products. The choice is made at compile time from numba's target
    (:func:`skeletal._simd.vector_bits`, so ``NUMBA_CPU_NAME`` / ``NUMBA_CPU_FEATURES`` are honoured),
    and numba's cache is keyed by that target, so a cached kernel always matches it."""
    from .._simd import vector_bits

    return vector_bits() >= 512


def _spread_rows() -> int:
    """How many of the source's rows :func:`_spread_rows_codegen` loads whole: 2 where the CPU numba
    compiles for has 256-bit but not 512-bit vectors (AVX, AVX2), else 0 (that form not taken; chosen
    at compile time, as :func:`_wide_vectors`)."""
    from .._simd import vector_bits

    return 2 if vector_bits() == 256 else 0


def _spread_rows_codegen(context, builder, dst_ty, dst, i, src_ty, src, p, b_rows, whole=2):
    """:func:`_affine_rows_codegen` with src[p]'s first ``whole`` rows loaded whole and each entry
    spread over a vector by a register shuffle, the other rows' entries broadcast from single loads.
    A world row's parent was stored a few products earlier, and the 4-wide form's twelve broadcasts
    read single entries out of those stores: the products waited on them. The shuffles take the
    vector pipes the loads leave free, so two rows whole balance the two (AVX2 code, Soldier's 68
    world rows and 49 palettes: see docs/guides/performance.md). An empty asm statement hands each
    loaded row over in a register; without it LLVM folds the shuffles back into broadcast loads.
    The same operations in the same order for every entry: the same bits."""
    b = builder
    i32, i64 = ir.IntType(32), ir.IntType(64)
    vec = ir.VectorType(ir.DoubleType(), 4)
    d = context.make_array(dst_ty)(context, builder, dst)
    s = context.make_array(src_ty)(context, builder, src)
    s_rows = cgutils.unpack_tuple(builder, s.shape, 3)[1]
    d_rows = cgutils.unpack_tuple(builder, d.shape, 3)[1]
    four = ir.Constant(i64, 4)

    def row_at(array, index, n_rows, r):
        at = b.mul(b.add(b.mul(index, n_rows), ir.Constant(i64, r)), four)
        return b.bitcast(b.gep(array.data, [at]), vec.as_pointer())

    def spread(x, k):
        return b.shuffle_vector(x, x, ir.Constant(ir.VectorType(i32, 4), [k] * 4))

    in_register = ir.InlineAsm(ir.FunctionType(vec, [vec]), "", "=x,0")
    rows = [b.call(in_register, [b.load(row_at(s, p, s_rows, r), align=8)]) for r in range(whole)]
    for r in range(whole, 3):
        at = b.mul(b.add(b.mul(p, s_rows), ir.Constant(i64, r)), four)
        rows.append([_splat(b, b.load(b.gep(s.data, [b.add(at, ir.Constant(i64, k))])), vec) for k in range(4)])
    last = ir.Constant(ir.VectorType(i32, 4), [0, 1, 2, 7])
    out = []
    for r, row in enumerate(rows):  # ((a0 b0 + a1 b1) + a2 b2), + a3 on the last column only
        a = [spread(row, k) for k in range(4)] if r < whole else row
        v = b.fmul(a[0], b_rows[0])
        v = b.fadd(v, b.fmul(a[1], b_rows[1]))
        v = b.fadd(v, b.fmul(a[2], b_rows[2]))
        out.append(b.shuffle_vector(v, b.fadd(v, a[3]), last))
    for r, v in enumerate(out):
        b.store(v, row_at(d, i, d_rows, r), align=8)
    with b.if_then(b.icmp_signed("==", d_rows, four), likely=True):  # a 4x4: its bottom row
        b.store(ir.Constant(vec, [0.0, 0.0, 0.0, 1.0]), row_at(d, i, d_rows, 3), align=8)


def _two_rows_codegen(context, builder, dst_ty, dst, i, src_ty, src, p, b_rows):
    """:func:`_affine_rows_codegen` with rows 0 and 1 in one 8-wide vector: src[p]'s two rows loaded
    at once and their entries spread over the halves, B's rows repeated in both, so that an affine
    product takes 8 loads and 2 stores where the 4-wide form takes 15 and 4 (Soldier's 68 world rows:
    0.17 -> 0.14 us; the loads bound it, not the arithmetic). The same operations in the same order
    for every entry: the same bits."""
    b = builder
    i32, i64 = ir.IntType(32), ir.IntType(64)
    v4, v8 = ir.VectorType(ir.DoubleType(), 4), ir.VectorType(ir.DoubleType(), 8)
    d = context.make_array(dst_ty)(context, builder, dst)
    s = context.make_array(src_ty)(context, builder, src)
    s_rows = cgutils.unpack_tuple(builder, s.shape, 3)[1]
    d_rows = cgutils.unpack_tuple(builder, d.shape, 3)[1]

    def at(array, index, row, vec):
        offset = b.mul(b.add(b.mul(index, row), ir.Constant(i64, 0)), ir.Constant(i64, 4))
        return b.bitcast(b.gep(array.data, [offset]), vec.as_pointer())

    def shuffle(x, y, mask):
        return b.shuffle_vector(x, y, ir.Constant(ir.VectorType(i32, len(mask)), mask))

    top = b.load(at(s, p, s_rows, v8), align=8)  # src[p] rows 0 and 1
    row2 = b.add(b.mul(b.mul(p, s_rows), ir.Constant(i64, 4)), ir.Constant(i64, 8))
    a2 = [b.load(b.gep(s.data, [b.add(row2, ir.Constant(i64, k))])) for k in range(4)]
    spread = [shuffle(top, top, [k] * 4 + [4 + k] * 4) for k in range(4)]  # entry k of row 0 | of row 1
    twice = [shuffle(row, row, [0, 1, 2, 3, 0, 1, 2, 3]) for row in b_rows]
    v = b.fmul(spread[0], twice[0])
    v = b.fadd(v, b.fmul(spread[1], twice[1]))
    v = b.fadd(v, b.fmul(spread[2], twice[2]))
    last_columns = ir.Constant(ir.VectorType(ir.IntType(1), 8), [0, 0, 0, 1, 0, 0, 0, 1])
    rows01 = b.select(last_columns, b.fadd(v, spread[3]), v)
    w = b.fmul(_splat(b, a2[0], v4), b_rows[0])
    w = b.fadd(w, b.fmul(_splat(b, a2[1], v4), b_rows[1]))
    w = b.fadd(w, b.fmul(_splat(b, a2[2], v4), b_rows[2]))
    third = shuffle(w, b.fadd(w, _splat(b, a2[3], v4)), [0, 1, 2, 7])
    b.store(rows01, at(d, i, d_rows, v8), align=8)
    row2_at = b.gep(d.data, [b.add(b.mul(b.mul(i, d_rows), ir.Constant(i64, 4)), ir.Constant(i64, 8))])
    with b.if_else(b.icmp_signed("==", d_rows, ir.Constant(i64, 4)), likely=True) as (whole, top_only):
        with whole:  # row 2 and the bottom row 0 0 0 1 in one store
            bottom = shuffle(third, ir.Constant(v4, [0.0, 0.0, 0.0, 1.0]), list(range(8)))
            b.store(bottom, b.bitcast(row2_at, v8.as_pointer()), align=8)
        with top_only:
            b.store(third, b.bitcast(row2_at, v4.as_pointer()), align=8)
