# Over 600 lines: the IR builders, the lane transposes and layouts (8 and 16 lanes) and the LBS
# emitters that use them are one kernel's code generator; split, each half would import the other.
"""The LLVM IR machinery of the float32 skinning kernels, shared by :mod:`skeletal.skinning.lbs`
(linear blend) and :mod:`skeletal.skinning.dqs` (dual quaternions).

Holds the IR builders (:class:`Emit`, :class:`Rows`, :class:`Influences`), the chunk and planar
(``LANES``-vertex group) codegens with their lane transposes, the LBS vertex emitters and the LBS
chunk intrinsic ``_skin_chunk``, plus the argument contract both kernels share (``_kernel_types_ok``
at compile time, ``_rows_ok`` at run time). Contracts (see :mod:`skeletal.skinning.lbs`'s docstring
for the kernel's design): the packed palette is (J, 16) float32, row-major 3x4 matrices acting on
column vectors, each row padded to 4 lanes; vertex arrays are (V, 3) / (V, 4) float32 with contiguous
rows; ``joints`` (V, K) integer, ``weights`` (V, K) float32.
"""

from __future__ import annotations

import hashlib

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

#: dtypes compared by identity on the per-call fast paths of skin_into / skin_dq_into
_F32_DTYPE = np.dtype(np.float32)
_U8_DTYPE = np.dtype(np.uint8)

# ---------------------------------------------------------------------------------------------
# The fast path: float32 SIMD kernels (see skeletal.skinning.lbs's docstring)

#: Vertices per parallel work item. Each is a contiguous range, processed two vertices at a time.
CHUNK = 2048

_F32 = ir.FloatType()
_I1 = ir.IntType(1)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
_I8P = ir.IntType(8).as_pointer()
# contract: fused multiply-add; arcp/afn: 1/sqrt may become rsqrt + one Newton step. No reassociation.
_FM = ("contract", "nsz", "arcp", "afn")


def vec_type(n: int) -> ir.VectorType:
    return ir.VectorType(_F32, n)


class Emit:
    """<n x float> arithmetic on an IRBuilder. Vectors hold one 4-lane group per vertex."""

    def __init__(self, b: ir.IRBuilder):
        self.b = b

    def shuf(self, x, y, idx):
        idx = list(idx)
        return self.b.shuffle_vector(x, x if y is None else y, ir.Constant(ir.VectorType(I32, len(idx)), idx))

    def splat(self, x, n: int):
        vt = ir.VectorType(x.type, n)
        v = self.b.insert_element(ir.Constant(vt, ir.Undefined), x, ir.Constant(I32, 0))
        return self.shuf(v, ir.Constant(vt, ir.Undefined), [0] * n)

    def groups(self, scalars):
        """Lanes 4g .. 4g+3 = scalars[g]."""
        if len(scalars) == 1:
            return self.splat(scalars[0], 4)
        return self.shuf(self.splat(scalars[0], 8), self.splat(scalars[1], 8), [0, 1, 2, 3, 12, 13, 14, 15])

    def per_group(self, n: int, pattern):
        """A shuffle mask applying a 4-lane pattern to each group of an n-lane vector."""
        return [4 * g + p for g in range(n // 4) for p in pattern]

    def mul(self, x, y):
        return self.b.fmul(x, y, flags=_FM)

    def add(self, x, y):
        return self.b.fadd(x, y, flags=_FM)

    def sub(self, x, y):
        return self.b.fsub(x, y, flags=_FM)

    def fma(self, x, y, z):
        return self.add(self.mul(x, y), z)

    def tree_sum(self, terms):
        """The sum of ``terms`` as a balanced tree (depth log2 n instead of a chain of n - 1 adds);
        with contraction the leaf products fuse into multiply-adds."""
        terms = list(terms)
        while len(terms) > 1:
            terms = [self.add(x, y) for x, y in zip(terms[::2], terms[1::2])] + terms[len(terms) - len(terms) % 2:]
        return terms[0]

    def linear3(self, c0, c1, c2, x, y, z):
        return self.fma(c2, z, self.fma(c1, y, self.mul(c0, x)))

    def hsum(self, vecs):
        """Per group, lane i = the sum of the 4 lanes of vecs[i] (up to 4 vectors; 3 in-group hadds)."""
        n = vecs[0].type.count
        vecs = list(vecs) + [vecs[-1]] * (4 - len(vecs))

        def hadd(a, c):  # x86 haddps per 128-bit group: [a0+a1, a2+a3, c0+c1, c2+c3]
            even = [i for g in range(0, n, 4) for i in (g, g + 2, n + g, n + g + 2)]
            return self.add(self.shuf(a, c, even), self.shuf(a, c, [i + 1 for i in even]))

        return hadd(hadd(vecs[0], vecs[1]), hadd(vecs[2], vecs[3]))

    def concat(self, parts):
        """One 4-lane vector per vertex -> one vector, vertex g in lanes 4g .. 4g+3."""
        return parts[0] if len(parts) == 1 else self.shuf(parts[0], parts[1], range(8))

    def lanes_of(self, vec, pattern):
        """The 4-lane ``pattern`` applied to each group of ``vec``."""
        return self.shuf(vec, None, self.per_group(vec.type.count, pattern))

    def yzx(self, c):
        return self.lanes_of(c, [1, 2, 0, 3])

    def cofactor(self, c0, c1, c2):
        """Cofactor columns of the 3x3 matrix with columns c0, c1, c2 (lane 3 of each 0), unrotated:
        ``yzx(x) = c1 x c2``, ``yzx(y) = c2 x c0``, ``yzx(z) = c0 x c1``, with each cross(a, b) =
        yzx(a * yzx(b) - yzx(a) * b); so ``yzx(linear3(x, y, z, ...))`` is the cofactor times a vector
        (combine first, rotate once). ``det(c0, c1, c2)`` is the 4-lane sum of ``det_terms(c0, x)``."""
        y0, y1, y2 = self.yzx(c0), self.yzx(c1), self.yzx(c2)
        cross_u = lambda a_, ya, b_, yb: self.sub(self.mul(a_, yb), self.mul(ya, b_))
        return cross_u(c1, y1, c2, y2), cross_u(c2, y2, c0, y0), cross_u(c0, y0, c1, y1)

    def det_terms(self, c0, x):
        """det = c0 . (c1 x c2) = zxy(c0) . x, with x the first of :meth:`cofactor`'s columns."""
        return self.mul(self.lanes_of(c0, [2, 0, 1, 3]), x)

    def inverse_lengths(self, squares):
        """``(sums, inv)``: per group, lane i of sums = the 4-lane sum of squares[i] (one in-group hadd
        tree for up to 4 lengths), inv = 1/sqrt(sums), 0 where sums is not positive."""
        b = self.b
        sums = self.hsum(squares)
        vt = sums.type
        zero = ir.Constant(vt, [0.0] * vt.count)
        sqrt = cgutils.get_or_insert_function(b.module, ir.FunctionType(vt, [vt]), f"llvm.sqrt.v{vt.count}f32")
        inv = b.fdiv(ir.Constant(vt, [1.0] * vt.count), b.call(sqrt, [sums], fastmath=_FM), flags=_FM)
        return sums, b.select(b.fcmp_ordered(">", sums, zero), inv, zero)  # zero length stays zero

    def length_factor(self, inv, sums, lane, det_lane=None):
        """inv's lane ``lane`` in every lane of its group; negated where sums' lane ``det_lane`` (a
        determinant) is negative: a mirrored blend's normals flipped to keep them outward."""
        b = self.b
        factor = self.lanes_of(inv, [lane] * 4)
        if det_lane is None:
            return factor
        zero = ir.Constant(inv.type, [0.0] * inv.type.count)
        det = self.lanes_of(sums, [det_lane] * 4)
        return b.select(b.fcmp_ordered("<", det, zero), b.fsub(zero, factor, flags=_FM), factor)

    def load3(self, ptr):
        """<4 x float> from 3 floats at ptr (lane 3 = 0; the memory after them is not read)."""
        b = self.b
        m = ir.Constant(ir.VectorType(_I1, 4), [1, 1, 1, 0])
        fnty = ir.FunctionType(vec_type(4), [vec_type(4).as_pointer(), I32, m.type, vec_type(4)])
        fn = cgutils.get_or_insert_function(b.module, fnty, "llvm.masked.load.v4f32.p0")
        return b.call(fn, [b.bitcast(ptr, vec_type(4).as_pointer()), ir.Constant(I32, 4), m,
                           ir.Constant(vec_type(4), [0.0] * 4)])

    def store3(self, vec4, ptr):
        """Lanes 0..2 of a <4 x float> to ptr; lane 3's memory is not touched (masked store)."""
        b = self.b
        m = ir.Constant(ir.VectorType(_I1, 4), [1, 1, 1, 0])
        fnty = ir.FunctionType(ir.VoidType(), [vec_type(4), vec_type(4).as_pointer(), I32, m.type])
        fn = cgutils.get_or_insert_function(b.module, fnty, "llvm.masked.store.v4f32.p0")
        b.call(fn, [vec4, b.bitcast(ptr, vec_type(4).as_pointer()), ir.Constant(I32, 4), m])


class Rows:
    """A 2-D array argument as rows: base pointer and row stride in bytes (row elements contiguous).
    C-contiguous arrays whose row length is known here get a constant stride."""

    def __init__(self, context, b, ty, val, width=None):
        ary = context.make_array(ty)(context, b, val)
        self.b = b
        self.data = b.bitcast(ary.data, _I8P)
        self.shape = cgutils.unpack_tuple(b, ary.shape, ty.ndim)
        self.elty = context.get_data_type(ty.dtype)
        self.itemsize = context.get_abi_sizeof(self.elty)
        if ty.layout == "C" and width is not None:
            self.stride = ir.Constant(I64, width * self.itemsize)
        else:
            self.stride = cgutils.unpack_tuple(b, ary.strides, ty.ndim)[0]

    def row(self, v):
        return self.b.gep(self.data, [self.b.mul(v, self.stride)])

    def ptr(self, row, i):
        b = self.b
        off = ir.Constant(I64, i * self.itemsize) if isinstance(i, int) else b.mul(i, ir.Constant(I64, self.itemsize))
        return b.bitcast(b.gep(row, [off]), self.elty.as_pointer())

    def load(self, row, i):
        return self.b.load(self.ptr(row, i), align=self.itemsize)


class Influences:
    """The joints/weights arguments (A[1], A[2]) of a chunk kernel: rows, joint indices (clamped to the
    palette's last entry when ``clamp``), weights. ``k_const``: K when unrolled, else None."""

    def __init__(self, context, b, A, args, palette_rows, k_const, clamp: bool):
        self.b = b
        self.jnt, self.wgt = (Rows(context, b, A[i], args[i], k_const) for i in (1, 2))
        self.signed = A[1].dtype.signed
        self.jmax = b.sub(palette_rows, ir.Constant(I64, 1))
        self.clamp = clamp

    def rows(self, v):
        return self.jnt.row(v), self.wgt.row(v)

    def joint(self, jrow, k):
        """Influence k's joint index as i64."""
        b = self.b
        j = self.jnt.load(jrow, k)
        j = b.sext(j, I64) if self.signed else b.zext(j, I64)
        if self.clamp:  # negative or too large: the last joint (without: the palette covers every index)
            j = b.select(b.icmp_unsigned("<=", j, self.jmax), j, self.jmax)
        return j

    def weight(self, wrow, k):
        return self.wgt.load(wrow, k)


def store_rows(context, b, e, A, args, i, vec, verts) -> None:
    """Lanes 0..2 of each vertex's group of ``vec`` into output argument i (7: normals, 8: tangents,
    whose w is copied from the input tangents; else positions)."""
    dst = Rows(context, b, A[i], args[i], 4 if i == 8 else 3)
    for g, v in enumerate(verts):
        e.store3(vec if len(verts) == 1 else e.shuf(vec, None, range(4 * g, 4 * g + 4)), dst.ptr(dst.row(v), 0))
    if i == 8:  # tangent w (handedness) is copied
        src = Rows(context, b, A[5], args[5], 4)
        for v in verts:
            b.store(src.load(src.row(v), 3), dst.ptr(dst.row(v), 3), align=4)


def _run_interleaved(steps) -> None:
    """Drive emitters round-robin: each ``yield`` of a generator hands the builder to the next, so that
    independent vertex groups' instructions sit side by side (instruction-level parallelism for the
    out-of-order core: one group's dependency chain is longer than the reorder window covers)."""
    steps = [s for s in steps if s is not None]
    while steps:
        steps = [s for s in steps if next(s, StopIteration) is not StopIteration]


def chunk_codegen(emit, pairs: int = 1):
    """The codegen of a chunk kernel (arguments: palette, joints, weights, positions, normals, tangents,
    their three outputs, chunk index, kspec, ...): vertices ``chunk * CHUNK`` .. ``+ CHUNK`` (clipped),
    two at a time, then the odd one, each step ``emit(context, b, A, args, v0, n_influences, k_const,
    n_vert)``. ``kspec`` (A[10]) a tuple of K zeros: K unrolled (k_const = K); None: K looped.
    ``pairs`` > 1: that many pairs per loop step, interleaved (``emit`` is then a generator yielding
    between its stages; see :func:`_run_interleaved`), the remaining pairs one at a time."""

    def codegen(context, b, signature, args, start=None):
        A = signature.args
        k_const = len(A[10]) if isinstance(A[10], types.BaseTuple) else None
        n = Rows(context, b, A[3], args[3], 3).shape[0]
        if k_const is None:
            kk = Rows(context, b, A[1], args[1]).shape[1]
        else:
            kk = ir.Constant(I64, k_const)
        chunk_index = context.cast(b, args[9], A[9], types.int64)
        lo = b.mul(chunk_index, ir.Constant(I64, CHUNK))
        hi = b.add(lo, ir.Constant(I64, CHUNK))
        hi = b.select(b.icmp_signed("<", hi, n), hi, n)
        if start is not None:  # the chunk's vertices from ``start`` on (the caller did the ones before)
            lo = start
        count = b.sub(hi, lo)
        if pairs == 1:
            with cgutils.for_range(b, b.ashr(count, ir.Constant(I64, 1))) as loop:
                v = b.add(lo, b.shl(loop.index, ir.Constant(I64, 1)))
                _run_interleaved([emit(context, b, A, args, v, kk, k_const, 2)])
        else:
            step = ir.Constant(I64, 2 * pairs)
            steps = b.sdiv(count, step)
            with cgutils.for_range(b, steps) as loop:
                v = b.add(lo, b.mul(loop.index, step))
                _run_interleaved([emit(context, b, A, args, b.add(v, ir.Constant(I64, 2 * i)), kk, k_const, 2)
                                  for i in range(pairs)])
            done = b.add(lo, b.mul(steps, step))
            with cgutils.for_range(b, b.ashr(b.sub(hi, done), ir.Constant(I64, 1))) as loop:
                _run_interleaved([emit(context, b, A, args, b.add(done, b.shl(loop.index, ir.Constant(I64, 1))),
                                       kk, k_const, 2)])
        with b.if_then(b.icmp_signed("!=", b.and_(count, ir.Constant(I64, 1)), ir.Constant(I64, 0))):
            _run_interleaved([emit(context, b, A, args, b.sub(hi, ir.Constant(I64, 1)), kk, k_const, 1)])
        return context.get_dummy_value()

    return codegen


def _emit_vertices(context, b, A, args, v0, n_influences, k_const, n_vert: int, linear: bool, clamp: bool) -> None:
    """IR skinning vertices v0 .. v0 + n_vert - 1 (n_vert 1 or 2). A/args: the kernel's argument types
    and values (palette, joints, weights, positions, normals, tangents, their three outputs)."""
    do_n = not isinstance(A[4], types.NoneType)
    do_t = not isinstance(A[5], types.NoneType)
    e = Emit(b)
    pal = Rows(context, b, A[0], args[0], 16)
    inf = Influences(context, b, A, args, pal.shape[0], k_const, clamp)
    pdata = b.bitcast(pal.data, vec_type(8).as_pointer())
    verts = [b.add(v0, ir.Constant(I64, i)) for i in range(n_vert)]

    # 1. Blend each vertex's K palette entries: lo = columns 0-1, hi = columns 2-3 (8 lanes each).
    blended = []
    for v in verts:
        lo_ptr = cgutils.alloca_once_value(b, ir.Constant(vec_type(8), None))
        hi_ptr = cgutils.alloca_once_value(b, ir.Constant(vec_type(8), None))
        jrow, wrow = inf.rows(v)
        with cgutils.for_range(b, n_influences) as loop:
            j = inf.joint(jrow, loop.index)
            w = e.splat(inf.weight(wrow, loop.index), 8)
            at = b.mul(j, ir.Constant(I64, 2))
            m_lo = b.load(b.gep(pdata, [at]), align=4)
            m_hi = b.load(b.gep(pdata, [b.add(at, ir.Constant(I64, 1))]), align=4)
            b.store(e.fma(w, m_lo, b.load(lo_ptr)), lo_ptr)
            b.store(e.fma(w, m_hi, b.load(hi_ptr)), hi_ptr)
        blended.append((b.load(lo_ptr), b.load(hi_ptr)))
    if n_vert == 1:
        (lo, hi), = blended
        c0, c1, c2, c3 = e.shuf(lo, None, range(4)), e.shuf(lo, None, range(4, 8)), e.shuf(hi, None, range(4)), e.shuf(hi, None, range(4, 8))
    else:
        (lo_a, hi_a), (lo_b, hi_b) = blended
        first, second = [0, 1, 2, 3, 8, 9, 10, 11], [4, 5, 6, 7, 12, 13, 14, 15]
        c0, c1 = e.shuf(lo_a, lo_b, first), e.shuf(lo_a, lo_b, second)
        c2, c3 = e.shuf(hi_a, hi_b, first), e.shuf(hi_a, hi_b, second)

    def load_xyz(i):
        src = Rows(context, b, A[i], args[i], 4 if i == 5 else 3)
        return [e.groups([src.load(src.row(v), c) for v in verts]) for c in range(3)]

    def store_xyz(i, vec):
        store_rows(context, b, e, A, args, i, vec, verts)

    # 2. Positions.
    x, y, z = load_xyz(3)
    store_xyz(6, e.add(e.linear3(c0, c1, c2, x, y, z), c3))

    # 3. Normals and tangents, then one shared normalisation (squared lengths via in-group hadds).
    squares, results, det_lane = [], [], None
    if do_n:
        nx, ny, nz = load_xyz(4)
        if linear:
            r = e.linear3(c0, c1, c2, nx, ny, nz)
            squares.append(e.mul(r, r))
        else:
            # Cofactor columns, rotated once after the product. Padding lanes are 0, so 4-lane sums
            # are the 3-lane dot products.
            xu, yu, zu = e.cofactor(c0, c1, c2)
            ru = e.linear3(xu, yu, zu, nx, ny, nz)
            squares.append(e.mul(ru, ru))
            det_lane = len(squares)
            squares.append(e.det_terms(c0, xu))
            r = e.yzx(ru)
        results.append((7, r, 0))
    if do_t:
        tx, ty, tz = load_xyz(5)
        t = e.linear3(c0, c1, c2, tx, ty, tz)
        results.append((8, t, len(squares)))
        squares.append(e.mul(t, t))
    if not squares:
        return
    sums, inv = e.inverse_lengths(squares)
    for out, vec, lane in results:
        store_xyz(out, e.mul(vec, e.length_factor(inv, sums, lane, det_lane if out == 7 else None)))


# ---------------------------------------------------------------------------------------------
# The planar group kernel: LANES vertices per group, one SIMD lane per vertex after the blend.

#: Vertices per group of the widest planar kernel (one lane per vertex): one 512-bit vector of float32.
#: The LBS and DQS planar kernels take :func:`planar_lanes` (this, or 8 on 256-bit targets); DQS's
#: hemisphere-pair blocks (:mod:`skeletal.skinning.dq_pairs`) are this many vertices on every target.
LANES = 16


def planar_lanes() -> int:
    """Vertices per group of the LBS and DQS planar kernels for the CPU numba compiles for
    (:func:`skeletal._simd.vector_bits`): 16 where a float32 vector of 16 lanes is one register
    (AVX-512), 8 elsewhere, so that every vector of the kernel is one register; each vertex's blend
    then reads its 16-float palette entry as 16 // lanes vectors. Read at compile time: numba's cache
    is keyed by the target, so a cached kernel always has its target's width."""
    from .._simd import float32_lanes

    return max(8, float32_lanes(LANES))


def _transpose_masks(n: int, s: int):
    """(lo, hi) two-source shuffle masks of stage s (1-based) of an n-lane transpose, each one x86
    instruction that leaves its sources intact (no register copies): unpcklps/unpckhps, then
    unpcklpd/unpckhpd, then whole 128-bit blocks (vperm2f128 / vshuff32x4)."""
    blocks = n // 4
    if s == 1:
        lo = [4 * k + i + t * n for k in range(blocks) for i in (0, 1) for t in (0, 1)]
        hi = [4 * k + i + t * n for k in range(blocks) for i in (2, 3) for t in (0, 1)]
    elif s == 2:
        lo = [4 * k + i + t * n for k in range(blocks) for t in (0, 1) for i in (0, 1)]
        hi = [4 * k + i + t * n for k in range(blocks) for t in (0, 1) for i in (2, 3)]
    else:
        lo = [t * n + 4 * blk + i for t in (0, 1) for blk in range(0, blocks, 2) for i in range(4)]
        hi = [t * n + 4 * blk + i for t in (0, 1) for blk in range(1, blocks, 2) for i in range(4)]
    return lo, hi


def transpose_lanes(e: Emit, rows, wanted, width: int | None = None):
    """``rows``: n vectors of n lanes (n = 4, 8 or 16), lane l of row i = element l of item i. Returns
    ``{el: vector}`` for each el in ``wanted``, lane i of it = element el of item i: log2(n) stages of
    two-input shuffles (:func:`_transpose_masks`); only what the wanted outputs need is emitted.

    ``width`` (a multiple of n, default n): rows of ``width`` lanes holding width // n independent
    n-lane blocks, each transposed as above by the same instructions (block h of the result's lanes
    = the items of the rows' block h), e.g. 8 rows of two 8-float records in a 16-lane vector."""
    n = len(rows)
    width = width or n
    stages = n.bit_length() - 1
    labels = {0: [[(i, el) for el in range(n)] for i in range(n)]}  # (item, element) per lane, per stage
    for s in range(1, stages + 1):
        lo, hi = _transpose_masks(n, s)
        bit, prev, cur = 1 << (s - 1), labels[s - 1], [None] * n
        for v in range(n):
            if not v & bit:
                both = prev[v] + prev[v | bit]
                cur[v], cur[v | bit] = [both[i] for i in lo], [both[i] for i in hi]
        labels[s] = cur
    built: dict = {}

    def widen(mask):  # an n-lane two-input mask applied to every n-lane block of width lanes
        return [h * n + (x if x < n else width + x - n) for h in range(width // n) for x in mask]

    def get(s, v):
        if s == 0:
            return rows[v]
        if (s, v) not in built:
            bit = 1 << (s - 1)
            mask = _transpose_masks(n, s)[1 if v & bit else 0]
            built[s, v] = e.shuf(get(s - 1, v & ~bit), get(s - 1, v | bit), mask if width == n else widen(mask))
        return built[s, v]

    out = {}
    for v, lanes in enumerate(labels[stages]):
        el = lanes[0][1]
        assert [item for item, _ in lanes] == list(range(n)) and all(x == el for _, x in lanes)
        if el in wanted:
            out[el] = get(stages, v)
    return out


def _shuffle3(e: Emit, a, b, c, source):
    """A vector whose lane l is element ``source[l]`` of the concatenation a | b | c (two shuffles)."""
    n = a.type.count
    ab = e.shuf(a, b, [s if s < 2 * n else 0 for s in source])
    return e.shuf(ab, c, [l if s < 2 * n else n + s - 2 * n for l, s in enumerate(source)])


def deinterleave3(e: Emit, a, b, c):
    """3 vectors of n (x, y, z) records in a row -> the x, y and z vectors."""
    n = a.type.count
    return [_shuffle3(e, a, b, c, [3 * l + comp for l in range(n)]) for comp in range(3)]


def interleave3(e: Emit, x, y, z):
    """The inverse of :func:`deinterleave3`."""
    n = x.type.count
    return [_shuffle3(e, x, y, z, [(g % 3) * n + g // 3 for g in range(j * n, (j + 1) * n)]) for j in range(3)]


def _in_lane_pairs(e: Emit, a, c, i0: int, i1: int, i2: int, i3: int):
    """8 lanes: in each 128-bit half h, (a[i0], a[i1], c[i2], c[i3]) of that half: one ``vshufps``."""
    return e.shuf(a, c, [4 * h + x for h in (0, 1) for x in (i0, i1, 8 + i2, 8 + i3)])


def load_xyz8(e: Emit, ptr):
    """x, y, z of 8 consecutive (x, y, z) float32 records at ``ptr`` (<4 x float>*): six 128-bit loads
    paired across the halves (records 0-3 | 4-7: three ``vinsertf128`` from memory), then five in-lane
    ``vshufps``; the generic :func:`deinterleave3` takes about 12 lane-crossing shuffles at 8 lanes."""
    b = e.b
    m = [b.load(b.gep(ptr, [ir.Constant(I64, q)]), align=4) for q in range(6)]
    m03, m14, m25 = (e.shuf(m[q], m[q + 3], range(8)) for q in range(3))
    xy = _in_lane_pairs(e, m14, m25, 2, 3, 1, 2)
    yz = _in_lane_pairs(e, m03, m14, 1, 2, 0, 1)
    return [_in_lane_pairs(e, m03, xy, 0, 3, 0, 2), _in_lane_pairs(e, yz, xy, 0, 2, 1, 3),
            _in_lane_pairs(e, yz, m25, 1, 3, 0, 3)]


def store_xyz8(e: Emit, ptr, xyz) -> None:
    """The inverse of :func:`load_xyz8`: six in-lane shuffles, then each result's halves stored apart."""
    b = e.b
    x, y, z = xyz
    rxy, ryz, rzx = (_in_lane_pairs(e, x, y, 0, 2, 0, 2), _in_lane_pairs(e, y, z, 1, 3, 1, 3),
                     _in_lane_pairs(e, z, x, 0, 2, 1, 3))
    out = [_in_lane_pairs(e, rxy, rzx, 0, 2, 0, 2), _in_lane_pairs(e, ryz, rxy, 0, 2, 1, 3),
           _in_lane_pairs(e, rzx, ryz, 1, 3, 1, 3)]
    for q, vec in enumerate(out):
        for h in (0, 1):
            b.store(e.shuf(vec, None, range(4 * h, 4 * h + 4)), b.gep(ptr, [ir.Constant(I64, q + 3 * h)]), align=4)


def _emit_group(context, b, A, args, v0, k: int, linear: bool, clamp: bool) -> None:
    """IR skinning the LANES vertices v0 .. v0 + LANES - 1 of dense (V, 3) arrays, K = k unrolled,
    positions (+ normals; no tangents). Each vertex's K palette entries are blended as 16-float rows
    (16 // LANES vectors), the rows transposed so that each of the 12 matrix entries is one vector over
    the group, and everything after that is plain lane-wise arithmetic (no horizontal sums)."""
    do_n = not isinstance(A[4], types.NoneType)
    w_ = planar_lanes()
    parts = 16 // w_
    e = Emit(b)
    pal = Rows(context, b, A[0], args[0], 16)
    inf = Influences(context, b, A, args, pal.shape[0], k, clamp)

    # 1. Blend: per vertex, `parts` rows of w_ lanes (palette element p * w_ + lane). (Clamping the
    # group's indices as one vector and reading them back as scalars measured 5% slower.)
    pbytes = pal.data
    rows = [[] for _ in range(parts)]
    for i in range(w_):
        jrow, wrow = inf.rows(b.add(v0, ir.Constant(I64, i)))
        acc = [None] * parts
        for kk in range(k):
            at = b.mul(inf.joint(jrow, kk), ir.Constant(I64, 64))
            wt = e.splat(inf.weight(wrow, kk), w_)
            entry = b.bitcast(b.gep(pbytes, [at]), vec_type(w_).as_pointer())
            for p in range(parts):
                m = b.load(b.gep(entry, [ir.Constant(I64, p)]), align=4)
                acc[p] = e.mul(wt, m) if acc[p] is None else e.fma(wt, m, acc[p])
        for p in range(parts):
            rows[p].append(acc[p])
    # 2. Transpose: E[4 c + r] = the blended matrix's row r, column c, lane i = vertex v0 + i.
    E = {}
    for p in range(parts):
        got = transpose_lanes(e, rows[p], [el for el in range(w_) if (p * w_ + el) % 4 != 3])
        E.update({p * w_ + el: v for el, v in got.items()})
    col = [[E[4 * c + r] for r in range(3)] for c in range(4)]

    def load3(i):
        src = Rows(context, b, A[i], args[i], 3)
        if w_ == 8:
            return load_xyz8(e, b.bitcast(src.row(v0), vec_type(4).as_pointer()))
        ptr = b.bitcast(src.row(v0), vec_type(w_).as_pointer())
        return deinterleave3(e, *(b.load(b.gep(ptr, [ir.Constant(I64, q)]), align=4) for q in range(3)))

    def store3(i, xyz):
        dst = Rows(context, b, A[i], args[i], 3)
        if w_ == 8:
            return store_xyz8(e, b.bitcast(dst.row(v0), vec_type(4).as_pointer()), xyz)
        ptr = b.bitcast(dst.row(v0), vec_type(w_).as_pointer())
        for q, vec in enumerate(interleave3(e, *xyz)):
            b.store(vec, b.gep(ptr, [ir.Constant(I64, q)]), align=4)

    # 3. Positions.
    x, y, z = load3(3)
    store3(6, [e.add(e.linear3(col[0][r], col[1][r], col[2][r], x, y, z), col[3][r]) for r in range(3)])
    if not do_n:
        return
    # 4. Normals: the cofactor columns (c1 x c2, c2 x c0, c0 x c1) or the 3x3 itself, renormalised.
    nx, ny, nz = load3(4)
    if linear:
        normals = _unit(e, [e.linear3(col[0][r], col[1][r], col[2][r], nx, ny, nz) for r in range(3)])
    elif w_ == 16:
        normals = _cofactor_normals(e, col, nx, ny, nz)
    else:
        normals = _cofactor_normals_short(e, col, nx, ny, nz)
    store3(7, normals)


def _cross(e: Emit, a, c):
    """a x c of two lane-wise 3-vectors (lists of x, y, z vectors)."""
    return [e.sub(e.mul(a[(r + 1) % 3], c[(r + 2) % 3]), e.mul(a[(r + 2) % 3], c[(r + 1) % 3])) for r in range(3)]


def _inv_sqrt(e: Emit, sums):
    """1 / sqrt(``sums``), lane-wise (fast-math: the target's reciprocal square root where it has one)."""
    b = e.b
    vt = sums.type
    sqrt = cgutils.get_or_insert_function(b.module, ir.FunctionType(vt, [vt]), f"llvm.sqrt.v{vt.count}f32")
    return b.fdiv(ir.Constant(vt, [1.0] * vt.count), b.call(sqrt, [sums], fastmath=_FM), flags=_FM)


def _unit(e: Emit, n_, det=None):
    """``n_`` (x, y, z vectors of lanes) over its length, 0 where the length is 0; negated where ``det``
    (the blend's determinant) is negative: a mirrored blend's normals flipped to keep them outward."""
    b = e.b
    vt = n_[0].type
    zero = ir.Constant(vt, [0.0] * vt.count)
    sums = e.linear3(n_[0], n_[1], n_[2], n_[0], n_[1], n_[2])
    inv = _inv_sqrt(e, sums)
    inv = b.select(b.fcmp_ordered(">", sums, zero), inv, zero)  # zero length stays zero
    if det is not None:
        inv = b.select(b.fcmp_ordered("<", det, zero), b.fsub(zero, inv, flags=_FM), inv)
    return [e.mul(c, inv) for c in n_]


def _cofactor_normals(e: Emit, col, nx, ny, nz):
    """The cofactor of the blended 3x3 (columns ``col[:3]``) times the normal, unit length, outward:
    nx (c1 x c2) + ny (c2 x c0) + nz (c0 x c1), det = c0 . (c1 x c2)."""
    basis = [_cross(e, col[1], col[2]), _cross(e, col[2], col[0]), _cross(e, col[0], col[1])]
    det = e.tree_sum([e.mul(col[0][r], basis[0][r]) for r in range(3)])
    return _unit(e, [e.linear3(basis[0][r], basis[1][r], basis[2][r], nx, ny, nz) for r in range(3)], det)


#: fast-math flags without "nsz", so that a sum started at +0 never ends at -0 (its sign bit is read)
_FM_SIGNED = ("contract", "arcp", "afn")


def _cofactor_normals_short(e: Emit, col, nx, ny, nz):
    """:func:`_cofactor_normals` in fewer operations, for 8-lane groups (256-bit targets), where the
    vector multiply pipes bound the loop: the same product as c2 x (ny c0 - nx c1) + nz (c0 x c1)
    (24 multiplies and multiply-adds for 30, the determinant c2 . (c0 x c1) sharing c0 x c1); the
    mirror flip as the determinant's sign bit xor-ed into 1/length (no compare and blend; the
    determinant summed from +0 so that a zero one is +0, not flipped); the zero-length guard as the
    smallest normal float added to the squared length (exact for lengths above ~1e-15, and 1/sqrt of it
    is finite, so a zero normal stays zero) instead of a compare and mask. Same results to a few ulps."""
    b = e.b
    vt = nx.type
    zero = ir.Constant(vt, [0.0] * vt.count)
    c01 = _cross(e, col[0], col[1])
    det = zero
    for r in range(3):
        det = b.fadd(b.fmul(col[2][r], c01[r], flags=_FM_SIGNED), det, flags=_FM_SIGNED)
    u = [e.sub(e.mul(ny, col[0][r]), e.mul(nx, col[1][r])) for r in range(3)]
    n_ = [e.fma(nz, c01[r], v) for r, v in enumerate(_cross(e, col[2], u))]
    tiny = ir.Constant(vt, [float(np.finfo(np.float32).tiny)] * vt.count)
    sums = e.fma(n_[2], n_[2], e.fma(n_[1], n_[1], e.fma(n_[0], n_[0], tiny)))
    inv = _inv_sqrt(e, sums)
    i32v = ir.VectorType(I32, vt.count)
    sign = b.and_(b.bitcast(det, i32v), ir.Constant(i32v, [-(2 ** 31)] * vt.count))
    inv = b.bitcast(b.xor(b.bitcast(inv, i32v), sign), vt)
    return [e.mul(c, inv) for c in n_]


def planar_ok(A, k_const) -> bool:
    """Whether the planar group kernel takes these arguments (compile-time: types only): K unrolled,
    no tangents, dense C-contiguous positions/normals and their outputs."""
    if k_const is None or not isinstance(A[5], types.NoneType):
        return False
    dense = [A[3], A[6]] + ([A[4], A[7]] if not isinstance(A[4], types.NoneType) else [])
    return all(isinstance(t, types.Array) and t.layout == "C" for t in dense)


def planar_codegen(linear: bool, clamp: bool, fallback, group=None, lanes: int | None = None):
    """A chunk codegen (arguments as :func:`chunk_codegen`'s) that skins whole groups of ``lanes``
    vertices with :func:`_emit_group` and the rest of the chunk with ``fallback`` (a
    :func:`chunk_codegen` emitter) two vertices at a time. ``group``: another group emitter,
    ``group(context, b, A, args, v0, k)`` of ``lanes`` vertices (``linear``/``clamp`` are then unused;
    :mod:`skeletal.skin_dq` passes its own, of ``LANES``). ``lanes``: default :func:`planar_lanes`."""
    rest = chunk_codegen(fallback)
    width = ir.Constant(I64, lanes or planar_lanes())
    if group is None:
        group = lambda context, b, A, args, v0, k: _emit_group(context, b, A, args, v0, k, linear, clamp)

    def codegen(context, b, signature, args):
        A = signature.args
        k_const = len(A[10])
        n = Rows(context, b, A[3], args[3], 3).shape[0]
        chunk_index = context.cast(b, args[9], A[9], types.int64)
        lo = b.mul(chunk_index, ir.Constant(I64, CHUNK))
        hi = b.add(lo, ir.Constant(I64, CHUNK))
        hi = b.select(b.icmp_signed("<", hi, n), hi, n)
        groups = b.sdiv(b.sub(hi, lo), width)
        with cgutils.for_range(b, groups) as loop:
            v0 = b.add(lo, b.mul(loop.index, width))
            group(context, b, A, args, v0, k_const)
        done = b.add(lo, b.mul(groups, width))
        with b.if_then(b.icmp_signed("<", done, hi)):
            rest(context, b, signature, args, start=done)
        return context.get_dummy_value()

    return codegen


def outlined(codegen, tag: str):
    """``codegen`` (a void intrinsic's) emitted as a function of its own, marked noinline, and called.
    On 256-bit targets (16 vector registers) the planar group loop inlined into a prange body (a parfor
    gufunc) was register-allocated with 130-165 stack accesses a group against 6-30 in a plain loop;
    out of line it gets the plain loop's registers. One call per chunk of ``CHUNK`` vertices."""

    def call(context, b, signature, args):
        module = b.module
        fnty = ir.FunctionType(ir.VoidType(), [a.type for a in args])
        key = hashlib.sha1(f"{signature}|{fnty}".encode()).hexdigest()[:20]
        name = f"skeletal_{tag}_{key}"
        fn = module.globals.get(name)
        if fn is None:
            fn = ir.Function(module, fnty, name)
            fn.linkage = "internal"
            fn.attributes.add("noinline")
            body = ir.IRBuilder(fn.append_basic_block("entry"))
            codegen(context, body, signature, list(fn.args))
            body.ret_void()
        b.call(fn, list(args))
        return context.get_dummy_value()

    return call


def _kernel_types_ok(palette, joints, weights, positions, normals, tangents, out_positions, out_normals,
                     out_tangents) -> bool:
    """Compile-time half of the argument contract (the rest, shapes and strides, is checked at run time
    by :func:`_skin_fast`): float32 2-D arrays, integer joints of an accepted dtype, writeable
    outputs, an output exactly where its input is given."""
    def f32(t, out=False):
        return isinstance(t, types.Array) and t.ndim == 2 and t.dtype == types.float32 and (t.mutable or not out)

    ints = (types.uint8, types.uint16, types.int32, types.int64)
    if not (f32(palette) and palette.layout == "C" and isinstance(joints, types.Array) and joints.ndim == 2
            and joints.dtype in ints and f32(weights) and f32(positions) and f32(out_positions, True)):
        return False
    for given, out in ((normals, out_normals), (tangents, out_tangents)):
        if isinstance(given, types.NoneType) != isinstance(out, types.NoneType):
            return False
        if not isinstance(given, types.NoneType) and not (f32(given) and f32(out, True)):
            return False
    return True


def _skin_chunk_typer(palette, joints, weights, positions, normals, tangents, out_positions, out_normals,
                      out_tangents, chunk, kspec, linear, unclamped, outline: bool):
    """The typing and codegen of :func:`_skin_chunk` (``outline``: see :func:`_skin_chunk_parallel`)."""
    sig = types.void(palette, joints, weights, positions, normals, tangents, out_positions, out_normals,
                     out_tangents, chunk, kspec, linear, unclamped)
    if not _kernel_types_ok(palette, joints, weights, positions, normals, tangents, out_positions, out_normals,
                            out_tangents):
        return None  # a TypingError: skin_into then names the fault (check_skin_args)
    use_linear, clamp = not isinstance(linear, types.NoneType), isinstance(unclamped, types.NoneType)
    pairs = lambda context, b, A, args, v0, kk, k_const, n_vert: _emit_vertices(
        context, b, A, args, v0, kk, k_const, n_vert, use_linear, clamp)
    k_const = len(kspec) if isinstance(kspec, types.BaseTuple) else None
    if planar_ok(sig.args, k_const):
        codegen = planar_codegen(use_linear, clamp, pairs)
        if outline and planar_lanes() == 8:
            return sig, outlined(codegen, f"planar8_lbs_{int(use_linear)}{int(clamp)}")
        return sig, codegen
    return sig, chunk_codegen(pairs)


@intrinsic
def _skin_chunk(typingctx, palette, joints, weights, positions, normals, tangents,
                out_positions, out_normals, out_tangents, chunk, kspec, linear, unclamped):
    """Skin vertices ``chunk * CHUNK`` .. ``+ CHUNK`` (clipped), two at a time.

    Compile-time choices come in as types, so that they survive numba's outlining of prange bodies:
    ``kspec`` a tuple of K zeros (K unrolled) or None (K = joints.shape[1], looped); ``linear`` None
    (cofactor normals) or anything else (plain 3x3); ``unclamped`` None (joint indices clamped to the
    palette) or anything else (the caller guarantees every index is in range: uint8 joints with a
    palette of 256 entries); normals/tangents None when not wanted.
    """
    return _skin_chunk_typer(palette, joints, weights, positions, normals, tangents, out_positions, out_normals,
                             out_tangents, chunk, kspec, linear, unclamped, False)


@intrinsic
def _skin_chunk_parallel(typingctx, palette, joints, weights, positions, normals, tangents,
                         out_positions, out_normals, out_tangents, chunk, kspec, linear, unclamped):
    """:func:`_skin_chunk` for a prange body: on 256-bit targets the planar group loop as a function of
    its own (:func:`outlined`), where inlined into the parfor it spilled; elsewhere the same code."""
    return _skin_chunk_typer(palette, joints, weights, positions, normals, tangents, out_positions, out_normals,
                             out_tangents, chunk, kspec, linear, unclamped, True)


@njit(cache=True, nogil=True, forceinline=True)
def _row_ok(a, n, width):
    return a.shape[0] == n and a.shape[1] == width and (n == 0 or (a.strides[1] == 4 and a.strides[0] >= 4))


@njit(cache=True, nogil=True, forceinline=True)
def _rows_ok(positions, out_positions, normals, out_normals, tangents, out_tangents, joints, weights):
    """The run-time half of :func:`check_skin_args` (shapes, row contiguity), in compiled code."""
    n = positions.shape[0]
    k = joints.shape[1]
    if joints.shape[0] != n or k == 0 or not _row_ok(weights, n, k):
        return False
    if n and joints.strides[1] != joints.itemsize:
        return False
    if not (_row_ok(positions, n, 3) and _row_ok(out_positions, n, 3)):
        return False
    if normals is not None and not (_row_ok(normals, n, 3) and _row_ok(out_normals, n, 3)):
        return False
    if tangents is not None and not (_row_ok(tangents, n, 4) and _row_ok(out_tangents, n, 4)):
        return False
    return True
