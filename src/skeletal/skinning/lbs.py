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
  positions/normals and their outputs, K unrolled, no tangents. 16 vertices at a time where numba
  compiles for AVX-512, 8 on AVX2 (``planar_lanes``; the 16-lane form split into 256-bit halves
  measured 5-10% slower there, see docs/guides/performance.md); at 16:
  each vertex's K palette entries are blended as one 16-lane vector (K multiply-adds, each reading
  one 64-byte line: palettes are 64-byte aligned, which alone was worth 10%), the 16 blended rows
  are transposed (unpcklps/unpckhps, unpcklpd/unpckhpd, 128-bit blocks: 52 two-input shuffles, the
  padding row never built), and everything after is lane-per-vertex arithmetic with no horizontal
  sums; positions and normals move as three full vectors per 16 rows (two shuffles per component).
  At 8 lanes each entry is two 8-lane vectors, each half transposed on its own, and positions and
  normals move as six 128-bit halves (``load_xyz8``: five in-lane shuffles for three components).
  (Tried and dropped: the cofactor matrix times n as c2 x (ny c0 - nx c1) + nz (c0 x c1), 24
  multiply-adds instead of 30, but it needs the normals before the cofactors: on the 100k mesh, whose
  rows come from memory, 20-30% slower.)
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

Modules: this one holds the public API (:func:`skin`, :func:`skin_into`, :func:`pack_palette`,
:func:`normalize_weights`, :func:`apply_morphs` ...), the argument checks and the numba kernels that
run the chunks; the LLVM IR emitters and the chunk intrinsic live in :mod:`skeletal.skinning.ir`
(shared with :mod:`skeletal.skinning.dqs`) and are re-exported here.
"""

from __future__ import annotations

import threading

import numpy as np
from numba import njit, prange
from numba.core.errors import TypingError

from .._threads import busy_cap, capped_threads
from ..errors import SkeletalError
from .ir import (  # noqa: F401  (re-exported: the emitters and constants used to live here)
    CHUNK as CHUNK, I32 as I32, I64 as I64, LANES as LANES, _F32, _F32_DTYPE, _FM, _I1, _I8P, _U8_DTYPE,
    Emit as Emit, Influences as Influences, Rows as Rows, _emit_group, _emit_vertices, _kernel_types_ok, _row_ok,
    _rows_ok, _run_interleaved, _shuffle3, _skin_chunk, _skin_chunk_parallel, _transpose_masks, chunk_codegen as chunk_codegen,
    deinterleave3 as deinterleave3, interleave3 as interleave3, planar_codegen as planar_codegen,
    planar_lanes as planar_lanes, planar_ok as planar_ok, store_rows as store_rows, transpose_lanes as transpose_lanes, vec_type as vec_type,
)


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
            _skin_chunk_parallel(palette, joints, weights, positions, normals, tangents, out_positions, out_normals,
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


def _name_fault(palette, joints, weights, positions, normals, tangents, out_positions, out_normals,
                out_tangents, width: int = 16, packer: str = "pack_palette") -> None:
    """Raise the SkeletalError that names a failed skinning call's fault, palette first (as checked
    before the call), then the other arguments; returns where neither check finds one."""
    if isinstance(joints, np.ndarray) and joints.ndim == 2:
        kernel_palette(np.asarray(palette), joints, joints.shape[0], width, None, packer)
    check_skin_args(joints, weights, positions, normals, tangents, out_positions, out_normals, out_tangents)
