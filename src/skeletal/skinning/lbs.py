# Over 600 lines: the skinning kernel is generated LLVM IR: the emitters (Emit, Influences, Rows,
# chunk_codegen) and the kernels built from them change together (skin_dq.py reuses the emitters).
"""Skinning: morph targets, then linear blend skinning of positions, normals and tangents.

Contracts:

* ``joints`` (V, K) integer indices into the skin's joint list, ``weights`` (V, K) float32 that sum to
  1 per row (see :func:`normalize_weights`); K is any number of influences (4 per glTF set).
* ``palette`` (J, 4, 4) row-major affine matrices ``world[joint] @ inverse_bind``.
* Per vertex the K matrices are blended first and the vertex transformed once (ozz's order). Normals go
  through the blended matrix's inverse transpose (computed as its cofactor matrix, which is exact for
  non-uniform scale) and are renormalised; tangents' xyz go through the matrix itself and keep w.
* Morph targets come first, in bind space: ``p + sum_i w_i * dp_i`` (glTF).

Two implementations of that contract:

* :func:`skin` / :func:`skin_positions` / :func:`skin_kernel`: the reference. Float64 accumulation,
  any dtype in, the palette's dtype out; :func:`skeletal.bake` uses it.
* :func:`skin_into`: the real-time path. Float32 throughout, writing into caller-owned arrays, SIMD
  code specialised per influence count (1, 2, 4, 8, any K), parallel over chunks of vertices. See
  "The fast path" below for its design and precision.

>>> import numpy as np
>>> palette = np.eye(4)[None].repeat(2, 0); palette[1, 0, 3] = 2.0   # joint 1 moves 2 along x
>>> skin_positions(palette, np.array([[0, 1]]), np.array([[0.5, 0.5]], np.float32),
...                np.zeros((1, 3), np.float32))[0].tolist()
[1.0, 0.0, 0.0]

The fast path
-------------

``skin_into(palette, joints, weights, positions, normals, tangents, out_positions, out_normals,
out_tangents)``. Design, with the figures that chose it (2-vCPU Xeon VM, 100k vertices, 4 uint8
influences, positions + normals, 65 joints, one thread, best of repeats on a quiet machine;
``benchmarks/bench_skinning.py`` reproduces them):

* Palette layout: each joint is 16 float32, its four columns padded to 4 lanes (``pack_palette``),
  so blending one influence is two 8-lane multiply-adds straight from one 64-byte line, and the
  blended columns feed the transform directly (``p' = c0 x + c1 y + c2 z + c3``). Blending across
  vertices instead (one SIMD lane per vertex, which planar SoA arrays give numba's auto-vectoriser)
  needs a gather per matrix element, 48 scalar loads per vertex: 46-57 M vertices/s; the plain
  scalar numba kernel on (V, 3) arrays: 25-40 M vertices/s; this kernel: 130-145.
* Two vertices per iteration share 8-lane vectors (one vertex per 128-bit half), which halves the
  work after the blend; the code is LLVM IR written here (``_skin_chunk``), because numba's
  auto-vectoriser does not turn a per-vertex blend into vector code by itself (its SLP vectoriser is
  off, and the loop vectoriser sees gathers). The loop is bound by shuffles (about 25 per pair of
  vertices), not by memory: a 100k-vertex mesh (6.8 MB) sits in the last-level cache, where a triad
  streams 20 GB/s per thread, 40+ with two.
* The planar group kernel (``_emit_group``, issue 17) takes the common case: dense C-contiguous (V, 3)
  positions/normals and their outputs, K unrolled, no tangents. ``LANES`` (16) vertices at a time:
  each vertex's K palette entries are blended as one 16-lane vector (K multiply-adds, each reading
  one 64-byte line: palettes are 64-byte aligned, which alone was worth 10%), the 16 blended rows
  are transposed (unpcklps/unpckhps, unpcklpd/unpckhpd, 128-bit blocks: 52 two-input shuffles, the
  padding row never built), and everything after is lane-per-vertex arithmetic with no horizontal
  sums; positions and normals move as three full vectors per 16 rows (two shuffles per component).
  The maths is unchanged: the cofactor of each vertex's blended matrix (not a blend of per-joint
  cofactors, which is not the inverse transpose of the blend), renormalised, sign of the determinant.
  Soldier body mesh (7325 vertices, 4 uint16 influences, positions + normals, ``pack_palette`` and
  the Python call included), one thread, thread CPU clock, AVX-512 Xeon at load 9: cofactor
  222-264 M vertices/s median (two-vertex kernel 144-165), linear 250-306; ozz 0.16's SkinningJob
  on the same data interleaved with it 269-273. The tail of a chunk and every other case (strided
  rows, tangents, K looped) take the two-vertex kernel below. Tried and dropped: clamping a group's
  indices as one vector read back through the stack (5% slower), a per-chunk range check that drops
  the clamp (2%, not worth a second copy of the kernel).
* Per call, the argument contract is checked inside the compiled call (types when compiling, shapes
  and strides in compiled code) and :func:`check_skin_args` only runs to name a fault: 2.4 us of
  Python per call instead of 3.8; ``pack_palette`` into a reused buffer 0.55 us instead of 1.3. Then
  (issue 17, second round) a packed float32 palette that needs no padding goes straight to the
  compiled call, which checks its width and length (``kernel_palette`` runs only to name a fault, or
  for other palettes), and the busy-machine thread cap is only entered where a call of several
  chunks meets a busy machine, reading and setting numba's count through its C functions
  (:func:`skeletal._threads.thread_count`): a 16-vertex call 2.02 -> 1.40 us (1 thread, thread CPU,
  load 1.3), of which numba's dispatcher for the 12 arguments is ~0.95 (its type resolution ~0.35 of
  it: an entry point keyed on the arguments' types costs more than that to key in Python). Soldier
  body mesh as the ozz harness runs it (``pack_palette`` + ``skin_into``, uint16 joints, 200 rounds
  interleaved with the previous wrapper): 252 -> 264 M vertices/s, 29.1 -> 27.8 us per call.
* Threads: chunks of ``CHUNK`` vertices, in parallel only on meshes of ``PARALLEL_MIN_VERTICES`` or
  more (waking the other threads cost ~75 us a call on the 2-vCPU VM: 2 threads ran the Soldier body
  mesh at a third of 1 thread's speed), on fewer threads while other processes keep the CPUs busy
  (:func:`skeletal._threads.busy_cap`).
* Normals use the cofactor matrix (exact for non-uniform scale, and what the float64 reference uses,
  so both paths agree to 1e-5); the sign of the determinant keeps mirrored joints' normals
  outward. The plain 3x3 (ozz, three.js; exact only for rigid or uniformly scaled joints, and not
  the inverse transpose of a blend) measured 1.2-1.3x faster in the same kernel (170-180 M
  vertices/s): more than the 10% that would have made the choice free, but the cofactor is what
  keeps the fast path equal to the reference, so it is the default and ``normal_transform="linear"``
  is the opt-in.
* Influence counts 1, 2, 4 and 8 get fully unrolled code; other K a loop. Joint indices may be
  uint8, uint16, int32 or int64; an index past the palette reads the last joint (memory safety; the
  loader already rejects such files). uint8 joints on meshes of ``PAD_MIN_VERTICES`` or more read a
  palette padded to 256 entries instead, which drops the per-influence clamp (about 10%).
* Rows may be strided (interleaved vertex records: ``positions = records[:, 0:3]``) as long as each
  row's components are contiguous; dense arrays get constant strides. Outputs are written with
  masked stores: nothing next to a row is touched.
* Precision: float32 accumulation against the float64 reference (random rigs with non-uniform scale
  0.5-2 and mirrored joints, 1-12 influences): positions within 4e-7 of the mesh size; normals and
  tangents within 4e-6 where the blended 3x3 has condition number below 100, growing to ~1e-5 at
  condition numbers of 1e4 (nearly singular blends of opposed joints, where float32 cofactors lose
  digits in any implementation). 1/length is rsqrt plus one Newton step where the CPU has it.
"""

from __future__ import annotations

import threading

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.core.errors import TypingError
from numba.extending import intrinsic

from .._threads import busy_cap, capped_threads
from ..errors import SkeletalError


def normalize_weights(weights: np.ndarray) -> np.ndarray:
    """Rows divided by their sum of absolute values; an all-zero row binds fully to its first influence.

    This is what three.js's ``normalizeSkinWeights`` does and what the glTF spec expects of exporters.
    """
    w = np.asarray(weights, dtype=np.float32)
    total = np.abs(w).sum(axis=1, keepdims=True, dtype=np.float64)
    out = np.where(total > 0, w / np.where(total > 0, total, 1.0), 0.0).astype(np.float32)
    zero = total[:, 0] == 0
    if zero.any():
        out[zero, 0] = 1.0
    return out


@njit(cache=True, parallel=True)
def apply_morphs(base, deltas, weights, out):
    """out = base + sum_i weights[i] * deltas[i]. base (V, C), deltas (T, V, C), weights (T,)."""
    n_targets = deltas.shape[0]
    for v in prange(base.shape[0]):
        for c in range(base.shape[1]):
            acc = np.float64(base[v, c])
            for i in range(n_targets):
                w = weights[i]
                if w != 0.0:
                    acc += w * deltas[i, v, c]
            out[v, c] = acc



@njit(cache=True, forceinline=True)
def cofactors3(m00, m01, m02, m10, m11, m12, m20, m21, m22):
    """The cofactor matrix (det(M) M^-T) of the 3x3 M given row by row, as a row-major 9-tuple: the one
    formula of the float64 skinning reference's normals and of :mod:`skeletal.skin_dq`'s palette
    conversion. det(M) = m00 c00 + m01 c01 + m02 c02."""
    return (m11 * m22 - m12 * m21, m12 * m20 - m10 * m22, m10 * m21 - m11 * m20,
            m02 * m21 - m01 * m22, m00 * m22 - m02 * m20, m01 * m20 - m00 * m21,
            m01 * m12 - m02 * m11, m02 * m10 - m00 * m12, m00 * m11 - m01 * m10)

@njit(cache=True, parallel=True)
def skin_kernel(palette, joints, weights, positions, normals, tangents, out_positions, out_normals, out_tangents):
    """Linear blend skinning of V vertices; normals/tangents are skipped when their arrays are empty.

    palette (J, 4, 4); joints, weights (V, K); positions (V, 3); normals (V, 3) or (0, 3);
    tangents (V, 4) or (0, 4); outputs shaped like their inputs (caller-owned, no allocation here).
    """
    do_normals = normals.shape[0] > 0
    do_tangents = tangents.shape[0] > 0
    n_influences = joints.shape[1]
    for v in prange(positions.shape[0]):
        # Blend the top 3 rows of the influencing matrices.
        m00 = m01 = m02 = m03 = 0.0
        m10 = m11 = m12 = m13 = 0.0
        m20 = m21 = m22 = m23 = 0.0
        for k in range(n_influences):
            w = np.float64(weights[v, k])
            if w == 0.0:
                continue
            p = palette[joints[v, k]]
            m00 += w * p[0, 0]
            m01 += w * p[0, 1]
            m02 += w * p[0, 2]
            m03 += w * p[0, 3]
            m10 += w * p[1, 0]
            m11 += w * p[1, 1]
            m12 += w * p[1, 2]
            m13 += w * p[1, 3]
            m20 += w * p[2, 0]
            m21 += w * p[2, 1]
            m22 += w * p[2, 2]
            m23 += w * p[2, 3]
        x = np.float64(positions[v, 0])
        y = np.float64(positions[v, 1])
        z = np.float64(positions[v, 2])
        out_positions[v, 0] = m00 * x + m01 * y + m02 * z + m03
        out_positions[v, 1] = m10 * x + m11 * y + m12 * z + m13
        out_positions[v, 2] = m20 * x + m21 * y + m22 * z + m23
        if do_normals:
            # Cofactor matrix = det * inverse transpose: right direction for any invertible M.
            c00, c01, c02, c10, c11, c12, c20, c21, c22 = cofactors3(m00, m01, m02, m10, m11, m12, m20, m21, m22)
            det = m00 * c00 + m01 * c01 + m02 * c02
            nx = np.float64(normals[v, 0])
            ny = np.float64(normals[v, 1])
            nz = np.float64(normals[v, 2])
            rx = c00 * nx + c01 * ny + c02 * nz
            ry = c10 * nx + c11 * ny + c12 * nz
            rz = c20 * nx + c21 * ny + c22 * nz
            length = np.sqrt(rx * rx + ry * ry + rz * rz)
            if length > 0.0:
                s = 1.0 / length if det >= 0.0 else -1.0 / length
                rx *= s
                ry *= s
                rz *= s
            out_normals[v, 0] = rx
            out_normals[v, 1] = ry
            out_normals[v, 2] = rz
        if do_tangents:
            tx = np.float64(tangents[v, 0])
            ty = np.float64(tangents[v, 1])
            tz = np.float64(tangents[v, 2])
            rx = m00 * tx + m01 * ty + m02 * tz
            ry = m10 * tx + m11 * ty + m12 * tz
            rz = m20 * tx + m21 * ty + m22 * tz
            length = np.sqrt(rx * rx + ry * ry + rz * rz)
            if length > 0.0:
                rx /= length
                ry /= length
                rz /= length
            out_tangents[v, 0] = rx
            out_tangents[v, 1] = ry
            out_tangents[v, 2] = rz
            out_tangents[v, 3] = tangents[v, 3]


_NO_VEC3 = np.zeros((0, 3), np.float32)
_NO_VEC4 = np.zeros((0, 4), np.float32)


def skin_positions(palette, joints, weights, positions, out=None) -> np.ndarray:
    """Skinned positions (V, 3) in the palette's dtype; see the module docstring for the contract."""
    dtype = np.asarray(palette).dtype
    if out is None:
        out = np.empty((len(positions), 3), dtype=dtype)
    skin_kernel(palette, joints, weights, positions, _NO_VEC3, _NO_VEC4, out, _NO_VEC3.astype(dtype), _NO_VEC4.astype(dtype))
    return out


def skin(
    palette: np.ndarray,
    joints: np.ndarray,
    weights: np.ndarray,
    positions: np.ndarray,
    normals: np.ndarray | None = None,
    tangents: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Skin positions, and normals/tangents when given; returns ``(positions, normals, tangents)``
    in the palette's dtype (None for what was not given)."""
    dtype = np.asarray(palette).dtype
    v = len(positions)
    out_p = np.empty((v, 3), dtype=dtype)
    out_n = np.empty((v, 3), dtype=dtype) if normals is not None else _NO_VEC3.astype(dtype)
    out_t = np.empty((v, 4), dtype=dtype) if tangents is not None else _NO_VEC4.astype(dtype)
    skin_kernel(
        palette, joints, weights, positions,
        normals if normals is not None else _NO_VEC3,
        tangents if tangents is not None else _NO_VEC4,
        out_p, out_n, out_t,
    )
    return out_p, (out_n if normals is not None else None), (out_t if tangents is not None else None)


# ---------------------------------------------------------------------------------------------
# The fast path: float32 SIMD kernels (see the module docstring)

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

#: Vertices per group of the planar kernel (one lane per vertex); the blend reads 16 // LANES vectors
#: per palette entry. 16: 512-bit vectors on AVX-512 (LLVM splits them in two on AVX2 machines); 8
#: measured 27 us against 25.5 for the Soldier body mesh on the AVX-512 Xeon.
LANES = 16


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


def _emit_group(context, b, A, args, v0, k: int, linear: bool, clamp: bool) -> None:
    """IR skinning the LANES vertices v0 .. v0 + LANES - 1 of dense (V, 3) arrays, K = k unrolled,
    positions (+ normals; no tangents). Each vertex's K palette entries are blended as 16-float rows
    (16 // LANES vectors), the rows transposed so that each of the 12 matrix entries is one vector over
    the group, and everything after that is plain lane-wise arithmetic (no horizontal sums)."""
    do_n = not isinstance(A[4], types.NoneType)
    w_ = LANES
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
        ptr = b.bitcast(src.row(v0), vec_type(w_).as_pointer())
        return deinterleave3(e, *(b.load(b.gep(ptr, [ir.Constant(I64, q)]), align=4) for q in range(3)))

    def store3(i, xyz):
        dst = Rows(context, b, A[i], args[i], 3)
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
        basis, det = col[:3], None
    else:
        def cross(a, c):
            return [e.sub(e.mul(a[(r + 1) % 3], c[(r + 2) % 3]), e.mul(a[(r + 2) % 3], c[(r + 1) % 3]))
                    for r in range(3)]
        basis = [cross(col[1], col[2]), cross(col[2], col[0]), cross(col[0], col[1])]
        det = e.tree_sum([e.mul(col[0][r], basis[0][r]) for r in range(3)])
    n_ = [e.linear3(basis[0][r], basis[1][r], basis[2][r], nx, ny, nz) for r in range(3)]
    sums = e.linear3(n_[0], n_[1], n_[2], n_[0], n_[1], n_[2])
    vt = sums.type
    zero = ir.Constant(vt, [0.0] * w_)
    sqrt = cgutils.get_or_insert_function(b.module, ir.FunctionType(vt, [vt]), f"llvm.sqrt.v{w_}f32")
    inv = b.fdiv(ir.Constant(vt, [1.0] * w_), b.call(sqrt, [sums], fastmath=_FM), flags=_FM)
    inv = b.select(b.fcmp_ordered(">", sums, zero), inv, zero)  # zero length stays zero
    if det is not None:  # a mirrored blend: normals flipped to keep them outward
        inv = b.select(b.fcmp_ordered("<", det, zero), b.fsub(zero, inv, flags=_FM), inv)
    store3(7, [e.mul(c, inv) for c in n_])


def planar_ok(A, k_const) -> bool:
    """Whether the planar group kernel takes these arguments (compile-time: types only): K unrolled,
    no tangents, dense C-contiguous positions/normals and their outputs."""
    if k_const is None or not isinstance(A[5], types.NoneType):
        return False
    dense = [A[3], A[6]] + ([A[4], A[7]] if not isinstance(A[4], types.NoneType) else [])
    return all(isinstance(t, types.Array) and t.layout == "C" for t in dense)


def planar_codegen(linear: bool, clamp: bool, fallback, group=None):
    """A chunk codegen (arguments as :func:`chunk_codegen`'s) that skins whole LANES-vertex groups
    with :func:`_emit_group` and the rest of the chunk with ``fallback`` (a :func:`chunk_codegen`
    emitter) two vertices at a time. ``group``: another group emitter, ``group(context, b, A, args,
    v0, k)`` (``linear``/``clamp`` are then unused; :mod:`skeletal.skin_dq` passes its own)."""
    rest = chunk_codegen(fallback)
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
        groups = b.sdiv(b.sub(hi, lo), ir.Constant(I64, LANES))
        with cgutils.for_range(b, groups) as loop:
            v0 = b.add(lo, b.mul(loop.index, ir.Constant(I64, LANES)))
            group(context, b, A, args, v0, k_const)
        done = b.add(lo, b.mul(groups, ir.Constant(I64, LANES)))
        with b.if_then(b.icmp_signed("<", done, hi)):
            rest(context, b, signature, args, start=done)
        return context.get_dummy_value()

    return codegen


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
        return sig, planar_codegen(use_linear, clamp, pairs)
    return sig, chunk_codegen(pairs)


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


#: Meshes of at least this many vertices read a palette that is not 64-byte aligned from an aligned
#: copy: each packed joint is then one cache line, not two (Soldier body mesh: 10% faster).
ALIGN_MIN_VERTICES = 1024


@njit(cache=True, nogil=True)
def _aligned_copy(palette):
    """A copy of a C-contiguous (J, W) float32 array that starts on a 64-byte boundary."""
    size = palette.size
    buf = np.empty(size + 16, np.float32)
    skip = ((64 - buf.ctypes.data % 64) % 64) // 4
    out = buf[skip: skip + size].reshape(palette.shape)
    out[:] = palette
    return out


def aligned_empty(shape, dtype=np.float32) -> np.ndarray:
    """An uninitialised C-contiguous array whose data starts on a 64-byte boundary (a cache line)."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape)) * dtype.itemsize
    raw = np.empty(nbytes + 64, np.uint8)
    skip = -raw.ctypes.data % 64
    return raw[skip: skip + nbytes].view(dtype).reshape(shape)


@njit(cache=True, nogil=True)
def _skin_fast(palette, joints, weights, positions, normals, tangents, out_positions, out_normals, out_tangents,
               kspec, linear, unclamped):
    """Skin (see :func:`skin_into`); returns False, touching nothing, where the shapes or strides break
    the contract, or the packed palette is empty or not 16 wide (the caller then names the fault)."""
    if palette.shape[0] == 0 or palette.shape[1] != 16:
        return False
    if not _rows_ok(positions, out_positions, normals, out_normals, tangents, out_tangents, joints, weights):
        return False
    if positions.shape[0] >= ALIGN_MIN_VERTICES and palette.ctypes.data % 64 != 0:
        _skin_run(_aligned_copy(palette), joints, weights, positions, normals, tangents, out_positions,
                  out_normals, out_tangents, kspec, linear, unclamped)
    else:
        _skin_run(palette, joints, weights, positions, normals, tangents, out_positions, out_normals,
                  out_tangents, kspec, linear, unclamped)
    return True


#: Calls on fewer vertices run their chunks in the calling thread, without a parallel region: waking the
#: other threads (passive waits, see :mod:`skeletal._threads`) cost ~75 us per call on the 2-vCPU VM
#: (wall, load 0.5: the Soldier body mesh, 7325 vertices, 35 us on 1 thread against 108 on 2; 20k
#: vertices 79 / 111 us; 40k 207 / 178; 100k 447 / 311), so 2 threads pay from about 32k vertices.
PARALLEL_MIN_VERTICES = 32768


@njit(cache=True, parallel=True, nogil=True)
def _skin_run(palette, joints, weights, positions, normals, tangents, out_positions, out_normals, out_tangents,
              kspec, linear, unclamped):
    chunks = (positions.shape[0] + CHUNK - 1) // CHUNK
    if positions.shape[0] < PARALLEL_MIN_VERTICES:  # no parallel region (see PARALLEL_MIN_VERTICES)
        for c in range(chunks):
            _skin_chunk(palette, joints, weights, positions, normals, tangents, out_positions, out_normals,
                        out_tangents, c, kspec, linear, unclamped)
    else:
        for c in prange(chunks):
            _skin_chunk(palette, joints, weights, positions, normals, tangents, out_positions, out_normals,
                        out_tangents, c, kspec, linear, unclamped)


@njit(cache=True, nogil=True)
def _pack_palette(palette, out):
    """palette (B, J, R, 4) row-major, R = 3 or 4 -> out (B, J, 16): columns padded to 4 lanes."""
    for i in range(palette.shape[0]):
        for j in range(palette.shape[1]):
            m = palette[i, j]
            o = out[i, j]
            for c in range(4):
                o[4 * c] = m[0, c]
                o[4 * c + 1] = m[1, c]
                o[4 * c + 2] = m[2, c]
                o[4 * c + 3] = 0.0


@njit(cache=True, nogil=True)
def _pack_one(palette, out):
    """:func:`_pack_palette` for one (J, R, 4) palette into a C-contiguous (J, 16) ``out``; False (nothing
    written) where the shapes or out's strides do not fit."""
    if (palette.shape[1] != 3 and palette.shape[1] != 4) or palette.shape[2] != 4:
        return False
    if out.shape[0] != palette.shape[0] or out.shape[1] != 16 or out.strides[1] != 4 or out.strides[0] != 64:
        return False
    for j in range(palette.shape[0]):
        m = palette[j]
        o = out[j]
        for c in range(4):
            o[4 * c] = m[0, c]
            o[4 * c + 1] = m[1, c]
            o[4 * c + 2] = m[2, c]
            o[4 * c + 3] = 0.0
    return True


def pack_palette(palette: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Palettes in the fast path's layout: (..., J, 4, 4) or (..., J, 3, 4) row-major (any float
    dtype) -> (..., J, 16) float32, each matrix's four columns padded to 4 lanes.

    :func:`skin_into` accepts either form; packing once per frame (into a reused ``out``) saves the
    conversion when several meshes share a palette.
    """
    if (type(out) is np.ndarray and type(palette) is np.ndarray and out.ndim == 2 and palette.ndim == 3
            and out.dtype is _F32_DTYPE and palette.dtype.kind == "f" and _pack_one(palette, out)):
        return out  # the per-frame call: one palette into a reused buffer (~0.5 us less than below)
    palette = np.asarray(palette)
    if palette.ndim < 3 or palette.shape[-2] not in (3, 4) or palette.shape[-1] != 4:
        raise SkeletalError(f"palette must be (..., J, 4, 4) or (..., J, 3, 4), got shape {palette.shape}")
    if palette.dtype.kind != "f":
        raise SkeletalError(f"palette must be floating point, got {palette.dtype}")
    shape = palette.shape[:-2] + (16,)
    if out is None:
        out = aligned_empty(shape)
    elif out.shape != shape or out.dtype != np.float32 or not out.flags.c_contiguous:
        raise SkeletalError(f"out must be C-contiguous float32 {shape}, got {out.dtype} {out.shape}")
    flat = palette.reshape((-1,) + palette.shape[-3:])
    _pack_palette(flat, out.reshape((-1,) + shape[-2:]))
    return out


UNROLLED = {1: (0,), 2: (0, 0), 4: (0, 0, 0, 0), 8: (0,) * 8}
_F32_DTYPE = np.dtype(np.float32)
_JOINT_DTYPES = (np.uint8, np.uint16, np.int32, np.int64)
_scratch = threading.local()


def _scratch_palette(rows: int, width: int = 16) -> np.ndarray:
    """A per-thread float32 buffer of at least ``rows`` rows of ``width`` (one per width, reused)."""
    buffers = getattr(_scratch, "palettes", None)
    if buffers is None:
        buffers = _scratch.palettes = {}
    buf = buffers.get(width)
    if buf is None or len(buf) < rows:
        buf = buffers[width] = aligned_empty((max(rows, 256), width))
    return buf


#: uint8 joints on meshes of at least this many vertices: the palette is padded to 256 entries (the
#: last joint repeated, a 16 kB copy) so that the kernel needs no index clamp (about 10% faster).
PAD_MIN_VERTICES = 4096


def kernel_palette(palette: np.ndarray, joints: np.ndarray, n: int, width: int = 16,
                   pack=None, packer: str = "pack_palette", pad: bool = True) -> tuple[np.ndarray, bool]:
    """The packed palette a kernel reads (``width`` float32 per joint; ``pack(palette, out)`` packs a
    (J, 3|4, 4) one, :func:`pack_palette` by default) and whether joint indices must be clamped to it
    (``pad`` False: never padded to 256 entries, always clamped)."""
    packed_given = (palette.ndim == 2 and palette.shape[1] == width
                    and (palette.dtype is _F32_DTYPE or palette.dtype == np.float32) and palette.flags.c_contiguous)
    if not packed_given and not (palette.ndim == 3 and palette.shape[1:] in ((3, 4), (4, 4))):
        raise SkeletalError(f"palette must be packed (J, {width}) float32 C-contiguous ({packer}), "
                            f"or (J, 3, 4) / (J, 4, 4); got {palette.dtype} {palette.shape}")
    pack = pack or pack_palette
    j = palette.shape[0]
    if j == 0:
        raise SkeletalError("palette has no joints")
    if n < PAD_MIN_VERTICES or not pad or joints.dtype != np.uint8:
        return (palette if packed_given else pack(palette, _scratch_palette(j, width)[:j])), True
    if packed_given and j >= 256:
        return palette, False
    buf = _scratch_palette(max(j, 256), width)
    if packed_given:
        buf[:j] = palette
    else:
        pack(palette, buf[:j])
    buf[j:256] = buf[j - 1]
    return buf[: max(j, 256)], False


def _check_rows(name: str, a, n: int | None, width: int, *, out: bool = False) -> np.ndarray:
    if not isinstance(a, np.ndarray):
        raise SkeletalError(f"{name} must be a numpy array, got {type(a).__name__}")
    if a.dtype != np.float32:
        raise SkeletalError(f"{name} must be float32, got {a.dtype}")
    if a.ndim != 2 or a.shape[1] != width or (n is not None and a.shape[0] != n):
        want = f"({n if n is not None else 'V'}, {width})"
        raise SkeletalError(f"{name} must have shape {want}, got {a.shape}")
    if a.shape[0] and (a.strides[1] != 4 or a.strides[0] < 4):
        raise SkeletalError(f"{name}: each row's {width} values must be contiguous (got strides {a.strides})")
    if out and not a.flags.writeable:
        raise SkeletalError(f"{name} is read-only")
    return a


def check_skin_args(joints, weights, positions, normals, tangents, out_positions, out_normals, out_tangents) -> None:
    """The argument contract shared by :func:`skin_into` and :func:`skeletal.skin_dq.skin_dq_into`."""
    positions = _check_rows("positions", positions, None, 3)
    n = positions.shape[0]
    if not isinstance(joints, np.ndarray) or joints.ndim != 2 or joints.shape[0] != n:
        raise SkeletalError(f"joints must be ({n}, K), got {getattr(joints, 'shape', type(joints).__name__)}")
    if joints.dtype not in _JOINT_DTYPES:
        raise SkeletalError(f"joints must be uint8, uint16, int32 or int64, got {joints.dtype}")
    k = joints.shape[1]
    if k == 0:
        raise SkeletalError("joints has no influences (K = 0)")
    _check_rows("weights", weights, n, k)
    if joints.shape[0] and joints.strides[1] != joints.itemsize:
        raise SkeletalError("joints: each row must be contiguous")
    _check_rows("out_positions", out_positions, n, 3, out=True)
    for name, given, out, width in (("normals", normals, out_normals, 3), ("tangents", tangents, out_tangents, 4)):
        if given is not None:
            _check_rows(name, given, n, width)
            if out is None:
                raise SkeletalError(f"{name} given without out_{name}")
            _check_rows(f"out_{name}", out, n, width, out=True)
        elif out is not None:
            raise SkeletalError(f"out_{name} given without {name}")


def skin_into(
    palette: np.ndarray,
    joints: np.ndarray,
    weights: np.ndarray,
    positions: np.ndarray,
    normals: np.ndarray | None,
    tangents: np.ndarray | None,
    out_positions: np.ndarray,
    out_normals: np.ndarray | None = None,
    out_tangents: np.ndarray | None = None,
    *,
    normal_transform: str = "cofactor",
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Real-time skinning in float32 into caller-owned arrays (nothing is allocated per call).

    ``palette``: packed (J, 16) float32 from :func:`pack_palette`, or (J, 3, 4) / (J, 4, 4) row-major
    (packed here into a reused per-thread buffer). ``joints`` (V, K) uint8/uint16/int32/int64,
    ``weights`` (V, K) float32, ``positions``/``normals`` (V, 3) and ``tangents`` (V, 4) float32
    (normals/tangents may be None); outputs of the same shapes, float32. Rows may be strided
    (interleaved vertex records) if each row is contiguous. An output may be its own input (in place).

    ``normal_transform``: "cofactor" (default; the blended matrix's inverse transpose, exact for
    non-uniform scale, matching :func:`skin`) or "linear" (the blended 3x3 itself, as ozz and
    three.js do; faster, exact only for rigid or uniformly scaled joints). Returns the three outputs.
    Errors (shapes, dtypes, a missing output) are :class:`skeletal.SkeletalError`.
    """
    linear = _NORMAL_TRANSFORMS.get(normal_transform, _BAD) if type(normal_transform) is str else _BAD
    if linear is _BAD:
        raise SkeletalError(f"normal_transform must be 'cofactor' or 'linear', got {normal_transform!r}")
    if type(joints) is not np.ndarray or joints.ndim != 2 or type(positions) is not np.ndarray:
        check_skin_args(joints, weights, positions, normals, tangents, out_positions, out_normals, out_tangents)
    n, k = joints.shape
    # The per-frame case, a packed float32 palette that needs no padding, goes straight to the compiled
    # call, which checks its order (by type), width and length; anything else through kernel_palette.
    if (type(palette) is np.ndarray and palette.ndim == 2 and palette.dtype is _F32_DTYPE
            and (n < PAD_MIN_VERTICES or joints.dtype is not _U8_DTYPE)):
        packed, unclamped = palette, None
    else:
        packed, clamp = kernel_palette(np.asarray(palette), joints, n)
        unclamped = None if clamp else True
    # The argument contract is checked inside the call (types when compiling, shapes and strides in
    # compiled code: ~1 us less per call than walking the arrays here); on a failure kernel_palette and
    # check_skin_args name the argument at fault.
    # More than one chunk runs a parallel region: on fewer threads while other processes keep the CPUs
    # busy (skeletal._threads.busy_cap: 2 threads sharing a CPU ran slower than 1).
    try:
        if n >= PARALLEL_MIN_VERTICES and busy_cap():  # cached between samples (~0.1 us); the block ~0.3 us more
            with capped_threads():
                ok = _skin_fast(packed, joints, weights, positions, normals, tangents, out_positions, out_normals,
                                out_tangents, UNROLLED.get(k), linear, unclamped)
        else:
            ok = _skin_fast(packed, joints, weights, positions, normals, tangents, out_positions, out_normals,
                            out_tangents, UNROLLED.get(k), linear, unclamped)
    except (TypingError, TypeError, ValueError) as exc:
        _name_fault(palette, joints, weights, positions, normals, tangents, out_positions, out_normals, out_tangents)
        raise SkeletalError(f"skin_into: unsupported arguments ({str(exc).splitlines()[0]})") from None
    if not ok:
        _name_fault(palette, joints, weights, positions, normals, tangents, out_positions, out_normals, out_tangents)
        raise SkeletalError("skin_into: the arguments' shapes do not agree")
    return out_positions, out_normals, out_tangents


_NORMAL_TRANSFORMS = {"cofactor": None, "linear": True}  # the kernel's ``linear`` argument per choice
_BAD = object()
_U8_DTYPE = np.dtype(np.uint8)


def _name_fault(palette, joints, weights, positions, normals, tangents, out_positions, out_normals,
                out_tangents, width: int = 16, packer: str = "pack_palette") -> None:
    """Raise the SkeletalError that names a failed skinning call's fault, palette first (as checked
    before the call), then the other arguments; returns where neither check finds one."""
    if isinstance(joints, np.ndarray) and joints.ndim == 2:
        kernel_palette(np.asarray(palette), joints, joints.shape[0], width, None, packer)
    check_skin_args(joints, weights, positions, normals, tangents, out_positions, out_normals, out_tangents)
