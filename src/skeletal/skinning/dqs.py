# Over 600 lines: dual quaternion skinning in numpy, its LLVM-IR kernel (built with skin.py's emitters) and
# the GPU palette; kept together so the three stay the same maths.
"""Dual quaternion skinning (DQS): positions, normals and tangents, beside :mod:`skeletal.skin`'s LBS.

Linear blend skinning averages matrices, and an average of rotations is not a rotation: a joint
twisted 180 degrees against its neighbour collapses the skin between them to a line (the "candy
wrapper"). DQS (Kavan et al. 2008) blends unit dual quaternions instead and renormalises, which is
always a rigid transform: twists keep their volume, bends do not lose it at the elbow.

Contracts (as :mod:`skeletal.skin`, which this mirrors):

* ``palette`` (J, 4, 4) or (J, 3, 4) row-major affine matrices ``world[joint] @ inverse_bind``;
  ``joints``/``weights`` (V, K); positions/normals (V, 3), tangents (V, 4) (w = handedness, kept).
* Quaternions are xyzw. A joint's dual quaternion is ``qr + eps qd`` with ``qd = 0.5 * t * qr``, and
  the conversion gives ``qr.w >= 0``.
* Antipodality: q and -q are the same rotation, but blending them cancels. Per vertex, every
  influence's dual quaternion is sign-flipped into the hemisphere of the **pivot**, the influence
  with the largest weight (the first of equal ones), before the weighted sum.
* Scale: the **scale-separated** method (Kavan et al. 2008, section 4.5): each joint's 3x3 part is
  split ``A = R @ S`` (R a rotation from the polar decomposition, S = R^T A symmetric: scale and
  shear, with any mirroring in it). Per vertex the S matrices are blended linearly and applied first,
  in bind space; the rotations and translations are blended as dual quaternions and applied after:
  ``p' = DQ(sum w R,t) (sum w S) p``. Rigid palettes (every S within :data:`RIGID_TOLERANCE` of the
  identity) take a kernel that skips the S blend; the choice is made per call (per frame) from the
  palette. For rigid joints both methods reproduce any single joint's transform exactly; where
  joints scale differently the blend of S is linear, as LBS is.
* Normals: through the blended S's cofactor matrix (its inverse transpose times det, flipped when
  det < 0, as LBS), then rotated; tangents' xyz through S, then rotated. Both renormalised.

Two implementations, as for LBS:

* :func:`skin_dq`: the reference. Float64, any dtype in, the palette's dtype out.
* :func:`skin_dq_into`: the real-time path. Float32 into caller-owned outputs, the same argument
  contract as :func:`skeletal.skin.skin_into` (uint8/uint16/int32/int64 joints, strided rows,
  in-place allowed), LLVM IR code per influence count (1, 2, 4, 8 unrolled, any K looped): dense
  rows without tangents (the common case) 16 vertices at a time, one SIMD lane per vertex (the
  signed-record kernel below on meshes of at least 1024 and J^2 vertices, else the planar group
  kernel), everything else two vertices per 8-lane vector; parallel over chunks. The palette is
  converted once per call (:func:`pack_dq_palette`: J polar decompositions and quaternions), or
  given packed. It shares its
  machinery with :mod:`skeletal.skin` (argument checks, palette padding for uint8 joints, the chunk
  loop, joint/weight access, cofactor and normalisation emitters, row stores).

>>> import numpy as np
>>> palette = np.eye(4)[None].repeat(2, 0); palette[1, 0, 3] = 2.0   # joint 1 moves 2 along x
>>> p, _, _ = skin_dq(palette, np.array([[0, 1]]), np.array([[0.5, 0.5]], np.float32), np.zeros((1, 3)))
>>> np.round(p, 6).tolist()
[[1.0, 0.0, 0.0]]

Packed layout, one for the CPU and the GPU: 16 float32 per joint (64 bytes, one cache line), four
quads ``qr``, ``qd``, ``(s00, s01, s02, s11)``, ``(s12, s22, scales, 0)`` with S symmetrised (six
numbers hold it) and ``scales`` 1 where the joint's S is off the identity (read by
:func:`skin_dq_into` to pick the kernel, by nothing else). :func:`pack_dq_palette` gives (J, 16),
:func:`gpu_dq_palette` (..., J, 4, 4) (four vec4 rows per joint).

The signed-record kernel (``_emit_dq_signed``, issue 17, second round), for meshes of at least
:data:`SIGNED_MIN_VERTICES` and J^2 vertices (K unrolled, dense rows, no tangents). The group kernel
below pays for its one-lane-per-vertex layout with a transpose per influence (S's six floats alone
~30% of the frame); LBS blends whole records in the row domain and transposes once, but DQS cannot
blend before it knows each influence's hemisphere, and the signs took transposed quaternions (the
two-pass kernel below). Here the sign comes from memory: per call, :func:`_signed_records` writes a
doubled palette (each joint's record, and the same with qr and qd negated: the same transform, the
other hemisphere) and a (J, J) int32 table of byte offsets, ``table[p, j]`` the record of joint j in
the hemisphere of joint p's qr (J^2 float32 dot products: 2.2 us for 65 joints, an allocation
included). Per vertex, one table row (the pivot's: influence 0 when the group's weights are sorted,
else the largest weight by a chain of selects) gives every influence's record already signed, so the
blend is LBS's: one 16-float multiply-add per influence, the weight broadcast from memory, a chain in
influence order (as the group kernel's streamed sums; LLVM may pair the multiply-adds differently, a
rounding); the 16 blended records are transposed once (:func:`skeletal.skin.transpose_lanes`, 14 of 16
rows) and the transform is the group kernel's (``_emit_dq_transform``). Joint indices are clamped
(the table has J columns: no 256-entry padding). Read in the assembly and fixed on the way: the
lane-wise sorted-weights check reads the weights through an empty asm (else LLVM reused its loads for
the blend and broadcast each weight from a register, a shuffle, not from memory), rows are offsets
from the group's first (16 row pointers and 64 joint indices kept live spilled), and each vertex's
indices are loaded where they are used. Per 16 vertices the sorted path is ~600 instructions, ~290
of them vector ALU (LBS: ~415 / ~283): the table loads, clamps and pivot logic are scalar work. A/B
in one process (100k vertices, 65 joints, 1 thread, thread CPU, load 0.7-2.2): the kernel alone
0.83-0.90x of LBS's call; with the palette conversion and the Python call 0.75-0.80x, scaled, against
0.60-0.64x for the group kernel. Measured and not kept: a per-chunk range check of the joint
indices with an unclamped copy of the group loop, 0-2% (identical builds of one kernel differ by up
to 4% with code placement alone); the cofactor of the symmetric S as its six distinct entries
(12 products, not 18): bit-identical output at the same speed, LLVM already merges the repeated
products; one blend behind a stack array of pivots instead of the sorted and unsorted copies: no
faster to compile (below); the three compile-time flags as one tuple argument (numba's dispatcher
costs ~30 ns per argument, but building and typing the tuple took as much).

The planar group kernel (``_emit_dq_group``, issue 17: :func:`skeletal.skin.skin_into`'s own planar
kernel had made LBS 1.5x faster, and DQS had fallen to 0.52x / 0.43x of it). It takes what LBS's
takes: dense C-contiguous (V, 3) positions/normals and outputs, K unrolled, no tangents. Measured on
a 2-vCPU AVX-512 Xeon VM (100k vertices, 4 uint8 influences, sorted weights, positions + normals,
one thread, CPU time, interleaved with LBS in one process, load 1.6-2.7 from other jobs):

* One lane per vertex from the loads on: each influence's ``qr | qd`` (8 floats) of the group's 16
  vertices are loaded as 8 rows of two records (a load and an insert from memory each) and
  transposed in three shuffle stages, the last a non-destructive ``vshuff64x2`` whose block order
  the record pointers are permuted to undo (``_transpose_halves``). Pivot, hemisphere signs, blend,
  normalisation and the transform are then plain lane-wise arithmetic with no horizontal sums.
* Influence 0 is the pivot when K <= 2 (any pivot gives the same transform) or when every lane of
  the group has its weights sorted largest first (checked per group; glTF exporters write them so):
  each influence is then dotted with influence 0, signed and added as it is loaded (multiply-add
  chains, ~20 live registers). Other groups take a tournament of selects over all influences (as
  the two-vertex kernel's; 36 live registers, it spills). Both find the same pivot, so the result
  is the same; the two-vertex kernel sums trees where the streamed blend sums chains (rounding).
* The loop is bound by vector instructions, most of them shuffles: per 16 vertices LBS runs ~300
  vector instructions, rigid DQS ~390, scaled DQS ~620 (S's six numbers are 14/8 of the rigid
  kernel's data, transposed per influence). Tried and dropped: blending S per vertex as 8-lane rows
  (one multiply-add per influence, weights broadcast from memory) and transposing once, in the loop
  (-2% A/B interleaved with the kept kernel: 16 more live rows spilled) or as a second pass after
  q and d (-4% A/B); weights read as four 64-byte rows (-1.5% scaled A/B); a two-pass kernel
  (signs from transposed qr quads, then LBS-style row blends with the signed weights read back
  from a stack buffer: rigid 0.62-0.64x against 0.76x in runs next to each other); a row-domain
  blend of whole 16-float records with (+-w x 8 | w x 8) weight rows (scaled 0.51x against 0.58x,
  likewise). Each variant's assembly was read: LLVM pushes joins of two 8-lane rows up
  through their blend into per-weight cross-lane shuffles unless an empty asm hides the rows, and
  keeps pointers across passes (spilled) unless a memory barrier names the joints array.
* The scaled kernel, second look (2026-11-27; same machine, thread-CPU clock, load 1.9-2.5, 20-50
  samples interleaved LBS / variant / kept kernel in one process; each variant compiled in its own
  process behind a switch that was not kept, the kept kernel reached through non-C-contiguous joints,
  which take it unchanged). Where the time goes: with S's loads and transposes replaced by the first
  joint's S broadcast to every lane (S maths all kept) the kernel runs at 0.81x LBS against the kept
  kernel's 0.57x in the same run (identity constants: 0.86x); moving S into lanes is ~30% of the
  frame, S p and the cofactor almost nothing. Tried, as speed relative to the kept kernel:
  ``llvm.masked.gather`` (``vgatherdps``) for S's six numbers, the group's joint indices from one
  64-byte load of its uint8 rows (shift, mask, clamp): 0.91x (each gather costs about 4.4 cycles
  here); s00..s11 transposed as 4-float records and s12, s22 gathered: 0.975x; S blended as LBS
  blends, 8 rows each holding two vertices' S times (w_a x 8 | w_b x 8), transposed once: after the
  q blend 0.88x (weights by ``vpermps``) / 0.94x (two multiply-add chains per row, which LLVM makes
  of a masked multiply-add), inside the streamed blend with its record pointers 0.97-1.00x (weights
  from two scalar loads and a ``vpermt2ps``), 0.88x (``vpermps``), 0.93x (masked multiply-adds
  again compiled as both halves and a blend). Why nothing wins: putting a float of 16 vertices'
  records into lanes costs about 0.25 shuffle-port uops in every arrangement (two-record 8-row
  transposes: 8 inserts + 24 shuffles per 128 floats; a 16 x 16 transpose: 64 per 256; 4-float
  records: 20 per 64), the kept kernel is at that bound (about 62 per influence for qr, qd and S), and
  gathers cost more than the shuffles they replace. Reaching 0.70 needs fewer floats per influence,
  not another arrangement of them. ``skeletal bench`` rows with the kept kernel in that session: rigid
  0.83-0.84x, scaled 0.56x (1 thread, CPU time) / 0.59-0.60x (2 threads), load 2.5.
* Cold start: this kernel adds about 1.1 s of compile (CPU) to each DQS specialisation's first call
  (rigid 2.3 -> 3.4 s, scaled 0.6 -> 1.8 s in a fresh cache); nothing compiles until DQS is used.
  The signed-record kernel (above) compiles in 4.4 s where this one takes 2.1 (a 100k-vertex scaled
  call, fresh cache, CPU; one blend instead of its two copies, sorted and unsorted, measured 4.1 s:
  the copies are not the cost), and ``pack_dq_palette`` in 3.0 s (1.9 before :func:`_pack_joint`): a
  first DQS call on a big mesh costs ~7.6 s of compile against ~4.4 s before.

The two-vertex kernel (the tail of each chunk, strided rows, tangents, K looped), and the
measurements that shaped it (2-vCPU AMD EPYC VM, AVX2; 100k vertices, 4 influences, positions +
normals, one thread, ratios to ``skin_into`` interleaved in the same run, before the planar kernels):

* One 4-lane group per vertex throughout (lanes 0-3 the first vertex of a pair, 4-7 the second):
  influence k's ``qr`` and ``qd`` of both vertices load into one 8-lane vector each, so the blend
  needs no regrouping and each weight's broadcast stays inside its 128-bit group (one in-lane
  shuffle, where a cross-lane broadcast per weight per vertex cost more).
* The pivot (largest weight) is found by a tournament in vector registers: pairs of influences
  compared, the later winning only when strictly larger, quaternions selected with blends (log2 K
  levels; no index arithmetic, no extra load). The earlier compare-and-select chain on joint
  addresses cost about 0.12 of LBS throughput; with the tournament, taking influence 0 as the pivot
  measured no faster, so the largest-weight rule stays (influence 0 is used for K <= 2, where any
  pivot gives the same transform).
* Hemisphere signs: the four dot products with the pivot by in-group hadds, their sign bits
  xor-ed into the weights (no compares, no branches); blends summed as trees, not chains.
* The loop is bound by its dependency chain (loads, pivot, signs, blend, |q|^2, rsqrt, rotation)
  more than by instruction count: two pairs are emitted interleaved per step (the emitter yields
  between stages, :func:`skeletal.skin._run_interleaved`), worth about 0.05 of LBS throughput.
* Inputs are read with plain 16-byte loads (a pair's first vertex reads the 4 bytes before the
  second's row ends, the second reads from 4 bytes before its row): masked loads cost 0.10-0.15.
* S is blended per vertex as one 8-lane row straight from memory (fewer live registers than the
  pair layout, which spilled with two pairs in flight).

Speed (``skeletal bench``, rows from :mod:`skeletal.bench.dq`, per frame: pack the palette, skin;
one thread, CPU time). Before the planar LBS kernel: rigid 0.90x LBS, scaled 0.71-0.74x. After it,
with the two-vertex DQS kernel only: 0.52x / 0.43x (AVX-512 Xeon, load 0.3). With the planar group
kernel: rigid 0.81-0.84x, scaled 0.59-0.62x (2026-11-27, load 0.7-2.5). With the signed-record kernel,
the faster palette conversion and the leaner call (same day, 2-vCPU AVX-512 Xeon VM): rigid 0.85x (2
threads: 0.86x), scaled 0.79x (2 threads: 0.80x), load 1.4; in one process against main's code, 40
interleaved frames, load 1.3: scaled 0.611 -> 0.790, rigid 0.880 -> 0.872 (the same within the noise:
the group kernel's rigid blend moves 8 floats per influence, no more than this one's single
transpose; the kernel is chosen by size, not by palette).
Per call: ``skin_dq_into`` checks its arguments inside the compiled call as ``skin_into`` does, and a
packed float32 palette goes straight to it (16 vertices, 1 thread: 2.09 -> 1.88 us; whether any joint
scales is a compiled loop: numpy's ``packed[:J, 14].any()`` cost ~2.5% of a 100k-vertex call in
interleaved runs). ``pack_dq_palette`` (:func:`_pack_joint`, float64 registers): joints whose X^T X is
within :data:`RIGID_FAST` of the identity take one Newton-Schulz step and S from it (no iteration,
division or square root), the others the scaled Newton iteration with one division less per step,
stopped at a change of :data:`PACK_STEP` (float32 output), the quaternion by a branch-free Shepperd;
65 joints, thread CPU: scaled palette 18.1 -> 8.0-8.5 us, rigid 13.0 -> 2.7-3.4 us (1-2% of a
100k-vertex frame). LBS's machine code is unchanged by the shared helpers (compared after assembly).
See the README's performance table.
"""

from __future__ import annotations

import threading

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.core.errors import TypingError
from numba.extending import intrinsic

from ..errors import SkeletalError
from .._threads import busy_cap, capped_threads
from .lbs import _F32_DTYPE, _FM, cofactors3, _kernel_types_ok, _name_fault, _rows_ok, _transpose_masks, _U8_DTYPE, aligned_empty, \
    CHUNK, I32, I64, PAD_MIN_VERTICES, PARALLEL_MIN_VERTICES, LANES, UNROLLED, chunk_codegen, check_skin_args, deinterleave3, Emit, \
    Influences, interleave3, kernel_palette, planar_codegen, planar_ok, Rows, store_rows, transpose_lanes, vec_type

#: A joint whose S differs from the identity by at most this (max abs element) counts as rigid.
#: Float32 inverse-bind matrices of real models are orthonormal to about 1e-6.
RIGID_TOLERANCE = 1e-5
#: float32 values per joint in the packed CPU palette
DQ_STRIDE = 16
#: vec4 rows per joint in the GPU palette
GPU_ROWS = 4


# ---------------------------------------------------------------------------------------------
# palette conversion


@njit(cache=True, nogil=True)
def _cofactors(m, cof):
    """The cofactor matrix of 3x3 ``m`` (det(m) * inverse(m)^T) into ``cof``; returns det(m)."""
    c = cofactors3(m[0, 0], m[0, 1], m[0, 2], m[1, 0], m[1, 1], m[1, 2], m[2, 0], m[2, 1], m[2, 2])
    for k in range(9):
        cof[k // 3, k % 3] = c[k]
    return m[0, 0] * cof[0, 0] + m[0, 1] * cof[0, 1] + m[0, 2] * cof[0, 2]


@njit(cache=True, nogil=True)
def _polar(a, r, s):
    """a (3, 3) float64 -> r (proper rotation) and s = r^T a. Scaled Newton iteration for the polar
    factor (Higham): X <- (g X + X^-T / g) / 2, on -a when det(a) < 0 so that r stays a rotation.
    X is iterated in r, with s as scratch (no allocation: this runs per joint per frame)."""
    det = (a[0, 0] * (a[1, 1] * a[2, 2] - a[1, 2] * a[2, 1]) - a[0, 1] * (a[1, 0] * a[2, 2] - a[1, 2] * a[2, 0])
           + a[0, 2] * (a[1, 0] * a[2, 1] - a[1, 1] * a[2, 0]))
    sign = 1.0 if det >= 0.0 else -1.0
    x = r
    cof = s
    for i in range(3):
        for j in range(3):
            x[i, j] = sign * a[i, j]
    for _ in range(40):
        d = _cofactors(x, cof)  # det * inverse^T
        if not (abs(d) > 1e-300):
            break  # singular: keep what we have (orthonormalised below)
        nx = 0.0
        ni = 0.0
        inv_d = 1.0 / d
        for i in range(3):
            for j in range(3):
                cof[i, j] *= inv_d  # inverse transpose
                nx += x[i, j] * x[i, j]
                ni += cof[i, j] * cof[i, j]
        g = np.sqrt(np.sqrt(ni / nx))
        inv_g = 1.0 / g
        change = 0.0
        for i in range(3):
            for j in range(3):
                v = 0.5 * (g * x[i, j] + cof[i, j] * inv_g)
                change = max(change, abs(v - x[i, j]))
                x[i, j] = v
        if change < 1e-9:  # quadratic convergence: the error after this step is about change**2
            break
    for i in range(3):
        for j in range(3):
            s[i, j] = r[0, i] * a[0, j] + r[1, i] * a[1, j] + r[2, i] * a[2, j]


@njit(cache=True, nogil=True)
def _quat_from_rotation(r, q):
    """Rotation matrix (row-major, column vectors) -> unit quaternion xyzw (Shepperd's method)."""
    tr = r[0, 0] + r[1, 1] + r[2, 2]
    if tr > 0.0:
        k = 2.0 * np.sqrt(1.0 + tr)
        q[3] = 0.25 * k
        q[0] = (r[2, 1] - r[1, 2]) / k
        q[1] = (r[0, 2] - r[2, 0]) / k
        q[2] = (r[1, 0] - r[0, 1]) / k
    elif r[0, 0] > r[1, 1] and r[0, 0] > r[2, 2]:
        k = 2.0 * np.sqrt(max(1.0 + r[0, 0] - r[1, 1] - r[2, 2], 1e-300))
        q[3] = (r[2, 1] - r[1, 2]) / k
        q[0] = 0.25 * k
        q[1] = (r[0, 1] + r[1, 0]) / k
        q[2] = (r[0, 2] + r[2, 0]) / k
    elif r[1, 1] > r[2, 2]:
        k = 2.0 * np.sqrt(max(1.0 + r[1, 1] - r[0, 0] - r[2, 2], 1e-300))
        q[3] = (r[0, 2] - r[2, 0]) / k
        q[0] = (r[0, 1] + r[1, 0]) / k
        q[1] = 0.25 * k
        q[2] = (r[1, 2] + r[2, 1]) / k
    else:
        k = 2.0 * np.sqrt(max(1.0 + r[2, 2] - r[0, 0] - r[1, 1], 1e-300))
        q[3] = (r[1, 0] - r[0, 1]) / k
        q[0] = (r[0, 2] + r[2, 0]) / k
        q[1] = (r[1, 2] + r[2, 1]) / k
        q[2] = 0.25 * k
    n = np.sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
    for i in range(4):
        q[i] /= n


@njit(cache=True, nogil=True)
def _dq_joint(m, a, r, s, q, qd):
    """One palette matrix m (R, 4) -> q (unit rotation quaternion, w >= 0), qd (its dual part) and
    s = R^T A (3, 3); a, r are (3, 3) scratch. Returns whether s is farther than RIGID_TOLERANCE
    from the identity."""
    for i in range(3):
        for j in range(3):
            a[i, j] = m[i, j]
    _polar(a, r, s)
    _quat_from_rotation(r, q)
    if q[3] < 0.0:  # canonical sign (w >= 0); blending flips per vertex anyway (see the pivot)
        for i in range(4):
            q[i] = -q[i]
    tx, ty, tz = np.float64(m[0, 3]), np.float64(m[1, 3]), np.float64(m[2, 3])
    # qd = 0.5 * (t, 0) * q
    qd[0] = 0.5 * (tx * q[3] + ty * q[2] - tz * q[1])
    qd[1] = 0.5 * (-tx * q[2] + ty * q[3] + tz * q[0])
    qd[2] = 0.5 * (tx * q[1] - ty * q[0] + tz * q[3])
    qd[3] = -0.5 * (tx * q[0] + ty * q[1] + tz * q[2])
    off = 0.0
    for i in range(3):
        for j in range(3):
            off = max(off, abs(s[i, j] - (1.0 if i == j else 0.0)))
    return off > RIGID_TOLERANCE


@njit(cache=True, nogil=True)
def _dq_convert(palette, qr, qd, scale, non_rigid):
    """palette (N, R, 4) -> qr, qd (N, 4), scale (N, 3, 3) float64, non_rigid (N,) bool."""
    a = np.empty((3, 3))
    r = np.empty((3, 3))
    for n in range(palette.shape[0]):
        non_rigid[n] = _dq_joint(palette[n], a, r, scale[n], qr[n], qd[n])


def dual_quaternions(palette: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Skin palette (..., J, 4, 4) or (..., J, 3, 4) row-major -> ``(qr, qd, scale, non_rigid)``:
    unit rotation quaternions (..., J, 4) xyzw, dual parts (..., J, 4), the scale/shear matrices
    S = R^T A (..., J, 3, 3) and whether each joint's S is farther than :data:`RIGID_TOLERANCE` from
    the identity, all float64 (bool). ``A = R @ S`` with R the rotation of ``qr``.

    >>> m = np.eye(4); m[:3, 3] = (1, 2, 3)
    >>> qr, qd, s, nr = dual_quaternions(m[None])
    >>> qr[0].tolist(), (qd[0] + 0.0).tolist(), bool(nr[0])   # qd = t q / 2 (+ 0.0: no -0.0)
    ([0.0, 0.0, 0.0, 1.0], [0.5, 1.0, 1.5, 0.0], False)
    """
    flat, lead = _flat_palette(palette)
    if not np.all(np.isfinite(flat[:, :3])):
        raise SkeletalError("palette has non-finite values")
    n = len(flat)
    qr, qd = np.empty((n, 4)), np.empty((n, 4))
    scale, non_rigid = np.empty((n, 3, 3)), np.empty(n, np.bool_)
    _dq_convert(flat, qr, qd, scale, non_rigid)
    return qr.reshape(lead + (4,)), qd.reshape(lead + (4,)), scale.reshape(lead + (3, 3)), non_rigid.reshape(lead)


def _flat_palette(palette) -> tuple[np.ndarray, tuple]:
    """(..., J, R, 4) float palette -> C-contiguous (N, R, 4) and the leading shape (shape checked)."""
    palette = np.asarray(palette)
    if palette.ndim < 3 or palette.shape[-2] not in (3, 4) or palette.shape[-1] != 4 or palette.dtype.kind != "f":
        raise SkeletalError(f"palette must be float (..., J, 4, 4) or (..., J, 3, 4), got {palette.dtype} {palette.shape}")
    return np.ascontiguousarray(palette.reshape((-1,) + palette.shape[-2:])), palette.shape[:-2]


#: The packing's polar iteration stops when a step changes X by less than this (Frobenius norm): Newton's
#: method converges quadratically, so the error after that step is about its square (1e-8 here), below
#: float32 rounding. (The float64 reference, :func:`_polar`, iterates to a change of 1e-9.)
PACK_STEP = 1e-4
#: Joints whose X^T X is within this of the identity (max abs element) skip the iteration (see
#: :func:`_pack_joint`); float32 rotations are orthonormal to ~1e-7.
RIGID_FAST = 3e-5


@njit(cache=True, nogil=True, error_model="numpy")
def _pack_joint(m, o) -> int:
    """One palette matrix m (R, 4) -> its packed record o (16,) float32 (:func:`_pack_dq`'s layout), in
    float64 registers: the polar factor by the scaled Newton iteration of :func:`_polar` (one division
    less per step, stopped by :data:`PACK_STEP`), the quaternion by a branch-free Shepperd (largest of
    the four diagonal combinations, chosen by selects), qd and S as :func:`_dq_joint`. Returns 1 where
    S is off the identity (by more than RIGID_TOLERANCE), 0 where not, -1 (o untouched) where the
    iteration meets a determinant outside 1e-100 .. 1e100 or does not converge in 40 steps (singular,
    degenerate or non-finite joints: the caller then takes :func:`_dq_joint`, the reference)."""
    a00, a01, a02 = np.float64(m[0, 0]), np.float64(m[0, 1]), np.float64(m[0, 2])
    a10, a11, a12 = np.float64(m[1, 0]), np.float64(m[1, 1]), np.float64(m[1, 2])
    a20, a21, a22 = np.float64(m[2, 0]), np.float64(m[2, 1]), np.float64(m[2, 2])
    det = a00 * (a11 * a22 - a12 * a21) - a01 * (a10 * a22 - a12 * a20) + a02 * (a10 * a21 - a11 * a20)
    sign = 1.0 if det >= 0.0 else -1.0  # a mirror goes into S: R stays a proper rotation
    x00, x01, x02 = sign * a00, sign * a01, sign * a02
    x10, x11, x12 = sign * a10, sign * a11, sign * a12
    x20, x21, x22 = sign * a20, sign * a21, sign * a22
    # Rigid (up to rounding): X^T X = I + E with |E| <= RIGID_FAST. Then R = X (I - E/2) (one Newton-Schulz
    # step; R^T R = I - 3/4 E^2, the polar factor X (I + E)^-1/2 to 3/8 E^2 ~ 1e-10) and S = R^T A =
    # sign (I + E/2) to E^2/2: no iteration, no division, no square root.
    e00 = x00 * x00 + x10 * x10 + x20 * x20 - 1.0
    e11 = x01 * x01 + x11 * x11 + x21 * x21 - 1.0
    e22 = x02 * x02 + x12 * x12 + x22 * x22 - 1.0
    e01 = x00 * x01 + x10 * x11 + x20 * x21
    e02 = x00 * x02 + x10 * x12 + x20 * x22
    e12 = x01 * x02 + x11 * x12 + x21 * x22
    rigid = max(max(abs(e00), abs(e11)), max(max(abs(e22), abs(e01)), max(abs(e02), abs(e12)))) <= RIGID_FAST
    converged = rigid
    if rigid:
        h00, h11, h22, h01, h02, h12 = 1.0 - 0.5 * e00, 1.0 - 0.5 * e11, 1.0 - 0.5 * e22, -0.5 * e01, -0.5 * e02, \
            -0.5 * e12
        x00, x01, x02 = x00 * h00 + x01 * h01 + x02 * h02, x00 * h01 + x01 * h11 + x02 * h12, \
            x00 * h02 + x01 * h12 + x02 * h22
        x10, x11, x12 = x10 * h00 + x11 * h01 + x12 * h02, x10 * h01 + x11 * h11 + x12 * h12, \
            x10 * h02 + x11 * h12 + x12 * h22
        x20, x21, x22 = x20 * h00 + x21 * h01 + x22 * h02, x20 * h01 + x21 * h11 + x22 * h12, \
            x20 * h02 + x21 * h12 + x22 * h22
    for _ in range(0 if rigid else 40):
        # cofactors (det X times X^-T)
        c00, c01, c02, c10, c11, c12, c20, c21, c22 = cofactors3(x00, x01, x02, x10, x11, x12, x20, x21, x22)
        d = x00 * c00 + x01 * c01 + x02 * c02
        if not (1e-100 < abs(d) < 1e100):
            return -1
        nx = ((x00 * x00 + x01 * x01) + (x02 * x02 + x10 * x10)) + ((x11 * x11 + x12 * x12) + (x20 * x20 + x21 * x21)) \
            + x22 * x22
        nc = ((c00 * c00 + c01 * c01) + (c02 * c02 + c10 * c10)) + ((c11 * c11 + c12 * c12) + (c20 * c20 + c21 * c21)) \
            + c22 * c22
        # X <- (g X + X^-T / g) / 2 with g^4 = |X^-1|^2 / |X|^2 = nc / (d^2 nx)
        g = np.sqrt(np.sqrt(nc / (d * d * nx)))
        p = 0.5 * g
        q = 0.5 / (g * d)
        y00, y01, y02 = p * x00 + q * c00, p * x01 + q * c01, p * x02 + q * c02
        y10, y11, y12 = p * x10 + q * c10, p * x11 + q * c11, p * x12 + q * c12
        y20, y21, y22 = p * x20 + q * c20, p * x21 + q * c21, p * x22 + q * c22
        e0, e1, e2 = y00 - x00, y01 - x01, y02 - x02
        e3, e4, e5 = y10 - x10, y11 - x11, y12 - x12
        e6, e7, e8 = y20 - x20, y21 - x21, y22 - x22
        change = ((e0 * e0 + e1 * e1) + (e2 * e2 + e3 * e3)) + ((e4 * e4 + e5 * e5) + (e6 * e6 + e7 * e7)) + e8 * e8
        x00, x01, x02, x10, x11, x12, x20, x21, x22 = y00, y01, y02, y10, y11, y12, y20, y21, y22
        if change < PACK_STEP * PACK_STEP:
            converged = True
            break
    if not converged:
        return -1
    # quaternion (xyzw) of the rotation X: the largest of 4w^2, 4x^2, 4y^2, 4z^2 by selects, the other
    # three from the off-diagonal sums and differences (4 big times q), normalised, w >= 0
    tw = 1.0 + x00 + x11 + x22
    tx = 1.0 + x00 - x11 - x22
    ty = 1.0 - x00 + x11 - x22
    tz = 1.0 - x00 - x11 + x22
    wx, wy, wz = x21 - x12, x02 - x20, x10 - x01
    xy, xz, yz = x01 + x10, x02 + x20, x12 + x21
    use_w = (tw >= tx) & (tw >= ty) & (tw >= tz)
    use_x = (not use_w) & (tx >= ty) & (tx >= tz)
    use_y = (not use_w) & (not use_x) & (ty >= tz)
    qx = wx if use_w else (tx if use_x else (xy if use_y else xz))
    qy = wy if use_w else (xy if use_x else (ty if use_y else yz))
    qz = wz if use_w else (xz if use_x else (yz if use_y else tz))
    qw = tw if use_w else (wx if use_x else (wy if use_y else wz))
    # (4 big) q up to scale; normalised here (X is orthonormal to ~1e-9: the length is 4 big, about)
    f = 1.0 / np.sqrt(qx * qx + qy * qy + qz * qz + qw * qw)
    f = -f if qw < 0.0 else f  # canonical sign (w >= 0); and, & and this compile to selects, not branches
    qx, qy, qz, qw = qx * f, qy * f, qz * f, qw * f
    tx_, ty_, tz_ = np.float64(m[0, 3]), np.float64(m[1, 3]), np.float64(m[2, 3])
    if rigid:  # S = sign (I + E/2)
        s00, s11, s22 = sign * (1.0 + 0.5 * e00), sign * (1.0 + 0.5 * e11), sign * (1.0 + 0.5 * e22)
        s01 = s10 = sign * 0.5 * e01
        s02 = s20 = sign * 0.5 * e02
        s12 = s21 = sign * 0.5 * e12
    else:  # S = X^T A
        s00 = x00 * a00 + x10 * a10 + x20 * a20
        s01 = x00 * a01 + x10 * a11 + x20 * a21
        s02 = x00 * a02 + x10 * a12 + x20 * a22
        s10 = x01 * a00 + x11 * a10 + x21 * a20
        s11 = x01 * a01 + x11 * a11 + x21 * a21
        s12 = x01 * a02 + x11 * a12 + x21 * a22
        s20 = x02 * a00 + x12 * a10 + x22 * a20
        s21 = x02 * a01 + x12 * a11 + x22 * a21
        s22 = x02 * a02 + x12 * a12 + x22 * a22
    off = max(max(max(abs(s00 - 1.0), abs(s11 - 1.0)), max(abs(s22 - 1.0), abs(s01))),
              max(max(abs(s02), abs(s10)), max(abs(s12), max(abs(s20), abs(s21)))))
    scales = off > RIGID_TOLERANCE
    o[0], o[1], o[2], o[3] = qx, qy, qz, qw
    # qd = 0.5 * (t, 0) * q
    o[4] = 0.5 * (tx_ * qw + ty_ * qz - tz_ * qy)
    o[5] = 0.5 * (-tx_ * qz + ty_ * qw + tz_ * qx)
    o[6] = 0.5 * (tx_ * qy - ty_ * qx + tz_ * qw)
    o[7] = -0.5 * (tx_ * qx + ty_ * qy + tz_ * qz)
    o[8] = s00
    o[9] = 0.5 * (s01 + s10)
    o[10] = 0.5 * (s02 + s20)
    o[11] = s11
    o[12] = 0.5 * (s12 + s21)
    o[13] = s22
    o[14] = 1.0 if scales else 0.0  # not read by the blend (nor the shaders): the kernel choice
    o[15] = 0.0
    return 1 if scales else 0


@njit(cache=True, nogil=True)
def _pack_dq(palette, out):
    """palette (N, R, 4) -> out (N, 16) float32: qr, qd, (s00, s01, s02, s11), (s12, s22, scales, 0),
    S symmetrised (it is symmetric up to rounding: S = R^T A for the polar R); ``scales`` 1 where S is
    off the identity (by more than RIGID_TOLERANCE), else 0. Returns whether any joint scales. Each
    joint by :func:`_pack_joint`, or where that declines (singular joints) by :func:`_dq_joint`."""
    scales = False
    scratch = None
    for i in range(palette.shape[0]):
        got = _pack_joint(palette[i], out[i])
        if got >= 0:
            scales |= got == 1
            continue
        if scratch is None:
            scratch = np.empty((3, 3, 3))
        q = np.empty(4)
        qd = np.empty(4)
        a, r, s = scratch[0], scratch[1], scratch[2]
        joint_scales = _dq_joint(palette[i], a, r, s, q, qd)
        scales |= joint_scales
        o = out[i]
        for c in range(4):
            o[c] = q[c]
            o[4 + c] = qd[c]
        o[8] = s[0, 0]
        o[9] = 0.5 * (s[0, 1] + s[1, 0])
        o[10] = 0.5 * (s[0, 2] + s[2, 0])
        o[11] = s[1, 1]
        o[12] = 0.5 * (s[1, 2] + s[2, 1])
        o[13] = s[2, 2]
        o[14] = 1.0 if joint_scales else 0.0
        o[15] = 0.0
    return scales


@njit(cache=True, nogil=True)
def _pack_dq_one(palette, out):
    """:func:`_pack_dq` for one (J, R, 4) palette (any layout) into a C-contiguous (J, 16) ``out``; False
    (nothing written) where the shapes or out's strides do not fit (the caller then names the fault)."""
    if (palette.shape[1] != 3 and palette.shape[1] != 4) or palette.shape[2] != 4:
        return False
    if out.shape[0] != palette.shape[0] or out.shape[1] != DQ_STRIDE or out.strides[1] != 4 \
            or out.strides[0] != 4 * DQ_STRIDE:
        return False
    _pack_dq(palette, out)
    return True


def _packed_out(out, shape) -> np.ndarray:
    if out is None:
        return np.empty(shape, np.float32)
    if out.shape != shape or out.dtype != np.float32 or not out.flags.c_contiguous:
        raise SkeletalError(f"out must be C-contiguous float32 {shape}, got {out.dtype} {out.shape}")
    return out


def pack_dq_palette(palette: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Skin palette (J, 4, 4) / (J, 3, 4) row-major (any float dtype) -> the packed dual quaternion
    palette (J, 16) float32 that :func:`skin_dq_into` reads (convert once per frame, into a reused
    ``out``, when several meshes share a palette). Layout: see the module docstring.

    >>> m = np.eye(4, dtype=np.float32)[None]; m[0, :3, 3] = (2, 0, 0)
    >>> (pack_dq_palette(m)[0, :8] + 0.0).tolist()   # qr = identity, qd = t qr / 2 (+ 0.0: no -0.0)
    [0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    """
    if (type(out) is np.ndarray and type(palette) is np.ndarray and out.ndim == 2 and palette.ndim == 3
            and out.dtype is _F32_DTYPE and palette.dtype.kind == "f" and _pack_dq_one(palette, out)):
        return out  # the per-frame call: one palette into a reused buffer (~1 us less than below)
    palette = np.asarray(palette)
    if palette.ndim != 3:
        raise SkeletalError(f"palette must be float (J, 4, 4) or (J, 3, 4), got {palette.dtype} {palette.shape}")
    flat, _ = _flat_palette(palette)
    out = _packed_out(out, (palette.shape[0], DQ_STRIDE))
    _pack_dq(flat, out)
    return out


def gpu_dq_palette(palette: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Skin palette (..., J, 3|4, 4) row-major -> the shaders' DQS palette (..., J, 4, 4) float32:
    four vec4 rows per joint, ``qr``, ``qd``, ``(s00, s01, s02, s11)``, ``(s12, s22, scales, 0)`` (S is
    symmetric, so six numbers hold it): :func:`pack_dq_palette`'s layout. See
    ``render/shaders/skinning.glsl``."""
    flat, lead = _flat_palette(palette)
    out = _packed_out(out, lead + (GPU_ROWS, 4))
    _pack_dq(flat, out.reshape((-1, DQ_STRIDE)))
    return out


# ---------------------------------------------------------------------------------------------
# the reference


@njit(cache=True)
def _mat3_times(m, x, y, z):
    """(m @ (x, y, z)) for a 3x3 array ``m``, as three floats."""
    return (m[0, 0] * x + m[0, 1] * y + m[0, 2] * z,
            m[1, 0] * x + m[1, 1] * y + m[1, 2] * z,
            m[2, 0] * x + m[2, 1] * y + m[2, 2] * z)


@njit(cache=True)
def _rotate_by_unnormalised(qx, qy, qz, qw, inv, px, py, pz):
    """p rotated by q/|q| without normalising q: p + inv q x (q x p + w p), ``inv`` = 2 / |q|^2."""
    ux = qy * pz - qz * py + qw * px
    uy = qz * px - qx * pz + qw * py
    uz = qx * py - qy * px + qw * pz
    return px + inv * (qy * uz - qz * uy), py + inv * (qz * ux - qx * uz), pz + inv * (qx * uy - qy * ux)


@njit(cache=True)
def _skin_dq_reference(qr, qd, scale, joints, weights, positions, normals, tangents, out_p, out_n, out_t):
    do_n = normals.shape[0] > 0
    do_t = tangents.shape[0] > 0
    k_count = joints.shape[1]
    cof = np.empty((3, 3))
    for v in range(positions.shape[0]):
        pivot = 0
        for k in range(1, k_count):
            if weights[v, k] > weights[v, pivot]:
                pivot = k
        jp = joints[v, pivot]
        b = np.zeros(8)
        s = np.zeros((3, 3))
        for k in range(k_count):
            w = np.float64(weights[v, k])
            j = joints[v, k]
            dot = qr[j, 0] * qr[jp, 0] + qr[j, 1] * qr[jp, 1] + qr[j, 2] * qr[jp, 2] + qr[j, 3] * qr[jp, 3]
            ws = -w if dot < 0.0 else w
            for c in range(4):
                b[c] += ws * qr[j, c]
                b[4 + c] += ws * qd[j, c]
            for r in range(3):
                for c in range(3):
                    s[r, c] += w * scale[j, r, c]
        n2 = b[0] * b[0] + b[1] * b[1] + b[2] * b[2] + b[3] * b[3]
        inv = 2.0 / n2 if n2 > 0.0 else 0.0
        qx, qy, qz, qw = b[0], b[1], b[2], b[3]
        dx, dy, dz, dw = b[4], b[5], b[6], b[7]
        # translation 2 (d q*)_xyz / |q|^2
        tx = inv * (qw * dx - dw * qx + qy * dz - qz * dy)
        ty = inv * (qw * dy - dw * qy + qz * dx - qx * dz)
        tz = inv * (qw * dz - dw * qz + qx * dy - qy * dx)
        px, py, pz = _mat3_times(s, np.float64(positions[v, 0]), np.float64(positions[v, 1]),
                                 np.float64(positions[v, 2]))
        rx, ry, rz = _rotate_by_unnormalised(qx, qy, qz, qw, inv, px, py, pz)
        out_p[v, 0] = rx + tx
        out_p[v, 1] = ry + ty
        out_p[v, 2] = rz + tz
        if do_n:  # by the cofactor matrix of the blended scale (inverse transpose times det), then rotated
            det = _cofactors(s, cof)
            px, py, pz = _mat3_times(cof, np.float64(normals[v, 0]), np.float64(normals[v, 1]),
                                     np.float64(normals[v, 2]))
            rx, ry, rz = _rotate_by_unnormalised(qx, qy, qz, qw, inv, px, py, pz)
            length = np.sqrt(rx * rx + ry * ry + rz * rz)
            f = 0.0
            if length > 0.0:
                f = 1.0 / length if det >= 0.0 else -1.0 / length
            out_n[v, 0] = rx * f
            out_n[v, 1] = ry * f
            out_n[v, 2] = rz * f
        if do_t:
            px, py, pz = _mat3_times(s, np.float64(tangents[v, 0]), np.float64(tangents[v, 1]),
                                     np.float64(tangents[v, 2]))
            rx, ry, rz = _rotate_by_unnormalised(qx, qy, qz, qw, inv, px, py, pz)
            length = np.sqrt(rx * rx + ry * ry + rz * rz)
            f = 1.0 / length if length > 0.0 else 0.0
            out_t[v, 0] = rx * f
            out_t[v, 1] = ry * f
            out_t[v, 2] = rz * f
            out_t[v, 3] = tangents[v, 3]


def skin_dq(
    palette: np.ndarray,
    joints: np.ndarray,
    weights: np.ndarray,
    positions: np.ndarray,
    normals: np.ndarray | None = None,
    tangents: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Dual quaternion skinning, float64 reference: like :func:`skeletal.skin.skin` (same arguments,
    ``(positions, normals, tangents)`` in the palette's dtype, None for what was not given)."""
    palette = np.asarray(palette)
    dtype = palette.dtype if palette.dtype.kind == "f" else np.float64
    qr, qd, scale, _ = dual_quaternions(palette)
    joints = np.asarray(joints)
    weights = np.asarray(weights)
    positions = np.asarray(positions)
    v = len(positions)
    if joints.ndim != 2 or joints.shape != weights.shape or len(joints) != v:
        raise SkeletalError(f"joints {joints.shape} and weights {weights.shape} must both be ({v}, K)")
    if v and (joints.min() < 0 or joints.max() >= len(qr)):
        raise SkeletalError(f"joint indices must be in 0..{len(qr) - 1}")
    no3, no4 = np.zeros((0, 3)), np.zeros((0, 4))
    out_p = np.empty((v, 3))
    out_n = np.empty((v, 3)) if normals is not None else no3
    out_t = np.empty((v, 4)) if tangents is not None else no4
    _skin_dq_reference(qr, qd, scale, joints, weights, positions,
                       no3 if normals is None else np.asarray(normals), no4 if tangents is None else np.asarray(tangents),
                       out_p, out_n, out_t)
    return (out_p.astype(dtype), out_n.astype(dtype) if normals is not None else None,
            out_t.astype(dtype) if tangents is not None else None)


# ---------------------------------------------------------------------------------------------
# the fast path: float32 LLVM IR kernels (the machinery of skeletal.skin's fast path)


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
    """Records of ``n`` float32 (n = 4 or 8) at each byte offset of ``offsets`` past each of the LANES
    pointers ``ptrs`` (i8*, vertex order) -> per offset ``{el: vector}``, lane l of it = element el of
    vertex l's record (``wanted``: one collection of elements per offset).

    Each n-float record is one load; row r of the transpose holds the records of vertices r, n + r,
    2n + r, ... in its n-lane blocks (joined by inserts straight from memory), so the in-block
    transpose (:func:`skeletal.skin.transpose_lanes`, log2 n shuffle stages on all blocks at once)
    leaves every element in vertex order. A pointer's records are loaded side by side (it is then
    dead: 16 pointers kept across the offsets spilled general registers)."""
    b = e.b
    blocks = LANES // n

    def load(ptr, offset):
        at = b.gep(ptr, [ir.Constant(I64, offset)]) if offset else ptr
        return b.load(b.bitcast(at, vec_type(n).as_pointer()), align=4)

    if n == 8:  # see _transpose_halves: its outputs' lanes 4-7 and 8-11 come from slots 8-11 and 4-7
        ptrs = [ptrs[_SWAP_MIDDLE[slot]] for slot in range(LANES)]
    rows: list[list] = [[] for _ in offsets]
    for r in range(n):
        loaded = [[load(ptrs[h * n + r], offset) for offset in offsets] for h in range(blocks)]
        for i in range(len(offsets)):
            parts = [loaded[h][i] for h in range(blocks)]
            while len(parts) > 1:  # pairwise joins: 2n-lane, then 4n-lane vectors
                width = 2 * parts[0].type.count
                parts = [e.shuf(x, y, range(width)) for x, y in zip(parts[::2], parts[1::2])]
            rows[i].append(parts[0])
    if n == 8:
        return [_transpose_halves(e, rows_i, wanted_i) for rows_i, wanted_i in zip(rows, wanted)]
    return [transpose_lanes(e, rows_i, wanted_i, LANES) for rows_i, wanted_i in zip(rows, wanted)]


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


def _emit_dq_group(context, b, A, args, v0, k: int, scaled: bool, clamp: bool) -> None:
    """IR dual quaternion skinning of the LANES vertices v0 .. v0 + LANES - 1 of dense (V, 3) arrays,
    K = k unrolled, positions (+ normals; no tangents). One lane per vertex throughout: every
    influence's packed record is transposed as it is loaded (its ``qr | qd`` as 8-float records, S's
    six numbers as the next 8), so the pivot, the hemisphere signs, the blend and the transform are
    all lane-wise arithmetic with no horizontal sums (the same maths as :func:`_emit_dq_vertices`)."""
    e = Emit(b)
    pal = Rows(context, b, A[0], args[0], DQ_STRIDE)
    inf = Influences(context, b, A, args, pal.shape[0], k, clamp)
    rows = [inf.rows(b.add(v0, ir.Constant(I64, i))) for i in range(LANES)]
    stride = ir.Constant(I64, 4 * DQ_STRIDE)

    # 1. Weights, lane-wise.
    weights = _lane_weights(e, inf, [wrow for _, wrow in rows], k)

    it = ir.VectorType(I32, LANES)
    sign_bit = ir.Constant(it, [-0x80000000] * LANES)

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
    """The planar kernels' transform of LANES vertices from v0 on, lane-wise: ``q``, ``d`` the blended
    dual quaternion (4 + 4 vectors, not normalised), ``s6`` the blended S (s00, s01, s02, s11, s12, s22)
    or None (rigid): positions (and normals when given) read, transformed and stored."""
    do_n = not isinstance(A[4], types.NoneType)
    scaled = s6 is not None
    if scaled:
        s00, s01, s02, s11, s12, s22 = s6
        cols = [[s00, s01, s02], [s01, s11, s12], [s02, s12, s22]]  # S's columns (S symmetric)

    vt = vec_type(LANES)
    zero = ir.Constant(vt, [0.0] * LANES)
    sqrt = cgutils.get_or_insert_function(b.module, ir.FunctionType(vt, [vt]), f"llvm.sqrt.v{LANES}f32")

    def inverse_length(sq):  # 1/sqrt(sq), 0 where sq is not positive
        inv = b.fdiv(ir.Constant(vt, [1.0] * LANES), b.call(sqrt, [sq], fastmath=_FM), flags=_FM)
        return b.select(b.fcmp_ordered(">", sq, zero), inv, zero)

    def dot3(x, y):
        return e.linear3(x[0], x[1], x[2], y[0], y[1], y[2])

    def cross(x, y):
        return [e.sub(e.mul(x[(r + 1) % 3], y[(r + 2) % 3]), e.mul(x[(r + 2) % 3], y[(r + 1) % 3])) for r in range(3)]

    def by_s(x):  # S x
        return [e.linear3(cols[0][r], cols[1][r], cols[2][r], *x) for r in range(3)]

    # 2 / |q|^2: rotation by q/|q| and translation 2 (d q*) / |q|^2 both scale by it.
    r_q = inverse_length(e.tree_sum([e.mul(c, c) for c in q]))
    inv = e.mul(e.add(r_q, r_q), r_q)
    qv, w_q, w_d = q[:3], q[3], d[3]

    def rotate(x):  # x + inv q x (q x x + w x): rotation by q/|q|
        u = [e.fma(w_q, c, y) for c, y in zip(x, cross(qv, x))]
        return [e.fma(inv, m, c) for m, c in zip(cross(qv, u), x)]

    # 5. Positions: p' = R(S p) + t = p + inv (q x (q x p + w p + d) + w d - dw q).
    p = _load_xyz(context, b, e, A, args, 3, v0)
    if scaled:
        p = by_s(p)
    u = [e.add(e.fma(w_q, c, y), dc) for c, y, dc in zip(p, cross(qv, p), d)]
    moved = [e.sub(e.fma(w_q, dc, y), e.mul(w_d, qc)) for dc, y, qc in zip(d, cross(qv, u), qv)]
    _store_xyz(context, b, e, A, args, 6, v0, [e.fma(inv, m, c) for m, c in zip(moved, p)])
    if not do_n:
        return
    # 6. Normals: through S's cofactor matrix (flipped where det S < 0), rotated, renormalised.
    n = _load_xyz(context, b, e, A, args, 4, v0)
    if scaled:
        basis = [cross(cols[1], cols[2]), cross(cols[2], cols[0]), cross(cols[0], cols[1])]
        n = [e.linear3(basis[0][r], basis[1][r], basis[2][r], *n) for r in range(3)]
    factor = inverse_length(dot3(n, n))
    if scaled:
        det = e.tree_sum([e.mul(cols[0][r], basis[0][r]) for r in range(3)])
        factor = b.select(b.fcmp_ordered("<", det, zero), b.fsub(zero, factor, flags=_FM), factor)
    _store_xyz(context, b, e, A, args, 7, v0, [e.mul(c, factor) for c in rotate(n)])


def _emit_dq_signed(context, b, A, args, v0, k: int, scaled: bool) -> None:
    """IR dual quaternion skinning of the LANES vertices v0 .. v0 + LANES - 1 of dense (V, 3) arrays, K = k
    unrolled, positions (+ normals; no tangents), from the signed records (:func:`_signed_records`):
    ``palette`` (A[0]) is the doubled palette, A[13] the (J, J) table of byte offsets. Per vertex the
    pivot's table row gives each influence's record already in the pivot's hemisphere, so the blend is
    LBS's: one 16-float multiply-add per influence (weight broadcast from memory), and the 16 blended
    records are transposed once (:func:`skeletal.skin.transpose_lanes`) into lane-wise q, d and S.
    Joint indices are clamped to J - 1 (the table and the palette's first J records). (Checking a chunk's
    indices once and skipping the clamp where all are in range measured 0-2% faster, within the spread
    that code placement alone gives: not worth a second copy of the kernel.)"""
    e = Emit(b)
    pal = Rows(context, b, A[0], args[0], DQ_STRIDE)
    table = Rows(context, b, A[13], args[13])
    inf = Influences(context, b, A, args, table.shape[0], k, True)
    # Rows as offsets from the group's first (constant offsets where the strides are: no per-row pointers
    # kept live, which spilled).
    jrow0, wrow0 = inf.rows(v0)
    rows = [(b.gep(jrow0, [b.mul(ir.Constant(I64, i), inf.jnt.stride)]),
             b.gep(wrow0, [b.mul(ir.Constant(I64, i), inf.wgt.stride)])) for i in range(LANES)]
    n_el = 14 if scaled else 8
    record_bytes = ir.Constant(I64, 4 * DQ_STRIDE)

    def blend(pivot_first: bool):
        """The blended records, transposed: n_el vectors (qr, qd, S). ``pivot_first``: influence 0 is
        the pivot (its record needs no look-up); else the largest weight (the first of equal ones), by
        a chain of selects per vertex. Joint indices are read where they are used (16 vertices' K
        indices kept live across the blend spilled)."""
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
            trow = table.row(pivot)
            acc = None
            for kk in range(k):
                if pivot_first and kk == 0:
                    at = b.mul(joints[0], record_bytes)
                else:
                    at = b.sext(table.load(trow, joints[kk]), I64)
                record = b.load(b.bitcast(b.gep(pal.data, [at]), vec_type(LANES).as_pointer()), align=4)
                w = e.splat(inf.weight(wrow, kk), LANES)
                acc = e.mul(w, record) if acc is None else e.fma(w, record, acc)
            out.append(acc)
        got = transpose_lanes(e, out, range(n_el))
        return [got[c] for c in range(n_el)]

    # 1. K <= 2: influence 0 is the pivot (any pivot gives the same transform). Else influence 0 where
    # every lane of the group has its weights sorted largest first (one lane-wise check), otherwise the
    # largest weight of each vertex; both give the same pivot, so the same result.
    if k <= 2:
        blended = blend(True)
    else:
        # The check reads the weights through a pointer LLVM cannot see through: else it reuses these
        # loads for the blend's weights, broadcasting each from a register (a shuffle) instead of from
        # memory (a load).
        hidden = _opaque(b, wrow0)
        wrows = [b.gep(hidden, [b.mul(ir.Constant(I64, i), inf.wgt.stride)]) for i in range(LANES)]
        blended = _either(b, _sorted_first(b, _lane_weights(e, inf, wrows, k)), lambda: blend(True),
                          lambda: blend(False))
    _emit_dq_transform(context, b, e, A, args, v0, blended[:4], blended[4:8], blended[8:] if scaled else None)


def _lane_weights(e: Emit, inf: Influences, wrows, k: int):
    """The K weights of the LANES weight rows ``wrows`` lane-wise (lane l = row l's): whole quads of each
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
    return b.icmp_unsigned("==", b.bitcast(first, ir.IntType(LANES)), ir.Constant(ir.IntType(LANES), -1))


def _either(b, cond, then, otherwise):
    """``then()`` where ``cond`` holds, else ``otherwise()`` (each emits its own code and returns a list of
    values of the same types), merged by phis."""
    with b.if_else(cond) as (yes, no):
        with yes:
            got_yes, block_yes = then(), b.block
        with no:
            got_no, block_no = otherwise(), b.block
    merged = []
    for x, y in zip(got_yes, got_no):
        phi = b.phi(x.type)
        phi.add_incoming(x, block_yes)
        phi.add_incoming(y, block_no)
        merged.append(phi)
    return merged


def _opaque(b, value):
    """``value`` through an empty inline asm: the same value, which LLVM can no longer relate to others
    (so loads through it are not merged with loads through the original)."""
    return b.asm(ir.FunctionType(value.type, [value.type]), "", "=r,0", [value], False)


def _load_xyz(context, b, e: Emit, A, args, i: int, v0):
    """x, y, z of the dense (V, 3) argument i's rows v0 .. v0 + LANES - 1: three loads, deinterleaved."""
    src = Rows(context, b, A[i], args[i], 3)
    ptr = b.bitcast(src.row(v0), vec_type(LANES).as_pointer())
    return deinterleave3(e, *(b.load(b.gep(ptr, [ir.Constant(I64, j)]), align=4) for j in range(3)))


def _store_xyz(context, b, e: Emit, A, args, i: int, v0, xyz) -> None:
    """The inverse of :func:`_load_xyz` into output argument i."""
    dst = Rows(context, b, A[i], args[i], 3)
    ptr = b.bitcast(dst.row(v0), vec_type(LANES).as_pointer())
    for j, vec in enumerate(interleave3(e, *xyz)):
        b.store(vec, b.gep(ptr, [ir.Constant(I64, j)]), align=4)


@intrinsic
def _skin_dq_chunk(typingctx, palette, joints, weights, positions, normals, tangents,
                   out_positions, out_normals, out_tangents, chunk, kspec, scaled, unclamped, signs):
    """DQ-skin vertices ``chunk * CHUNK`` .. ``+ CHUNK`` (clipped), two at a time. Compile-time
    choices as for :func:`skeletal.skin._skin_chunk`; ``scaled`` None (rigid palette: no S blend)
    or anything else (the scale-separated kernel); ``signs`` None, or the (J, J) int32 table of
    :func:`_signed_records` (``palette`` is then the doubled palette, and joint indices are clamped to
    the table's J: the signed-record group kernel)."""
    sig = types.void(palette, joints, weights, positions, normals, tangents, out_positions, out_normals,
                     out_tangents, chunk, kspec, scaled, unclamped, signs)
    if not _kernel_types_ok(palette, joints, weights, positions, normals, tangents, out_positions, out_normals,
                            out_tangents):
        return None  # a TypingError: skin_dq_into then names the fault (check_skin_args)
    signed = not isinstance(signs, types.NoneType)
    if signed and not (isinstance(signs, types.Array) and signs.ndim == 2 and signs.dtype == types.int32):
        return None
    use_scale, clamp = not isinstance(scaled, types.NoneType), signed or isinstance(unclamped, types.NoneType)
    vertices = lambda context, b, A, args, v0, kk, k_const, n_vert: _emit_dq_vertices(
        context, b, A, args, v0, kk, k_const, n_vert, use_scale, clamp)
    k_const = len(kspec) if isinstance(kspec, types.BaseTuple) else None
    if planar_ok(sig.args, k_const):
        if signed:
            group = lambda context, b, A, args, v0, k: _emit_dq_signed(context, b, A, args, v0, k, use_scale)
        else:
            group = lambda context, b, A, args, v0, k: _emit_dq_group(context, b, A, args, v0, k, use_scale, clamp)
        return sig, planar_codegen(False, clamp, vertices, group=group)
    return sig, chunk_codegen(vertices, pairs=2)


@njit(cache=True, nogil=True)
def _signed_records(packed, doubled, table):
    """The signed-record kernel's inputs from a packed palette (J, 16): ``doubled`` (2J, 16) float32, its
    rows 0 .. J-1 the packed records and row J + j joint j's with qr and qd negated (the same transform;
    S as is), and ``table`` (J, J) int32: ``table[p, j]`` the byte offset in ``doubled`` of joint j's
    record in the hemisphere of joint p's qr: 64 j, or 64 (J + j) where qr_j . qr_p < 0 (float32 dot
    product, as the kernels take it). J^2 dot products: the caller uses it when J^2 is small beside V."""
    n = packed.shape[0]
    for j in range(n):
        for c in range(DQ_STRIDE):
            x = packed[j, c]
            doubled[j, c] = x
            doubled[n + j, c] = -x if c < 8 else x
    # qr as four vectors over the joints (doubled's spare rows are past 2J: use a small array)
    qr = np.empty((4, n), np.float32)
    for j in range(n):
        for c in range(4):
            qr[c, j] = packed[j, c]
    qx, qy, qz, qw = qr[0], qr[1], qr[2], qr[3]
    record = np.int32(4 * DQ_STRIDE)
    flipped = np.int32(4 * DQ_STRIDE * n)
    for p in range(n):
        px, py, pz, pw = qx[p], qy[p], qz[p], qw[p]
        row = table[p]
        for j in range(n):
            dot = (qx[j] * px + qy[j] * py) + (qz[j] * pz + qw[j] * pw)
            row[j] = np.int32(j) * record + (flipped if dot < 0 else np.int32(0))


@njit(cache=True, nogil=True)
def _skin_dq_checked(palette, joints, weights, positions, normals, tangents, out_positions, out_normals,
                     out_tangents, kspec, scaled, unclamped, doubled, signs):
    """DQ-skin (see :func:`skin_dq_into`); returns False, touching nothing, where the shapes or strides
    break the contract, or the packed palette is empty or not 16 wide (the caller then names the fault).
    ``doubled``/``signs``: None, or scratch arrays for :func:`_signed_records` (then the signed-record
    kernel runs; the caller sized them for this palette)."""
    if palette.shape[0] == 0 or palette.shape[1] != DQ_STRIDE:
        return False
    if signs is not None and (signs.shape[0] != palette.shape[0] or doubled.shape[0] != 2 * palette.shape[0]):
        return False
    if not _rows_ok(positions, out_positions, normals, out_normals, tangents, out_tangents, joints, weights):
        return False
    if signs is None:
        _skin_dq_fast(palette, joints, weights, positions, normals, tangents, out_positions, out_normals,
                      out_tangents, kspec, scaled, unclamped, None)
    else:
        _signed_records(palette, doubled, signs)
        _skin_dq_fast(doubled, joints, weights, positions, normals, tangents, out_positions, out_normals,
                      out_tangents, kspec, scaled, None, signs)
    return True


@njit(cache=True, parallel=True, nogil=True)
def _skin_dq_fast(palette, joints, weights, positions, normals, tangents, out_positions, out_normals, out_tangents,
                  kspec, scaled, unclamped, signs):
    chunks = (positions.shape[0] + CHUNK - 1) // CHUNK
    if positions.shape[0] < PARALLEL_MIN_VERTICES:  # no parallel region (as skeletal.skin._skin_run)
        for c in range(chunks):
            _skin_dq_chunk(palette, joints, weights, positions, normals, tangents, out_positions, out_normals,
                           out_tangents, c, kspec, scaled, unclamped, signs)
    else:
        for c in prange(chunks):
            _skin_dq_chunk(palette, joints, weights, positions, normals, tangents, out_positions, out_normals,
                           out_tangents, c, kspec, scaled, unclamped, signs)


#: Meshes of at least this many vertices (and at least J^2 of them), K unrolled, without tangents, take
#: the signed-record kernel (:func:`_emit_dq_signed`).
SIGNED_MIN_VERTICES = 1024
_signed_buffers = threading.local()


def _signed_scratch(joints: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-thread scratch for :func:`_signed_records` with ``joints`` joints: the doubled palette
    (2J, 16) float32 on a 64-byte boundary and the (J, J) int32 table (reused while J stays)."""
    cached = getattr(_signed_buffers, "last", None)
    if cached is None or cached[0] != joints:
        cached = _signed_buffers.last = (joints, aligned_empty((2 * joints, DQ_STRIDE)),
                                         np.empty((joints, joints), np.int32))
    return cached[1], cached[2]


@njit(cache=True, nogil=True)
def _any_scales(packed, joints):
    """Whether any of the first ``joints`` records of a packed palette has its ``scales`` flag set.
    (Compiled: numpy's ``packed[:J, 14].any()`` measured ~2.5% of a 100k-vertex call, far more than
    it takes on its own.)"""
    for j in range(joints):
        if packed[j, 14] != 0.0:
            return True
    return False


def _pack_into(palette: np.ndarray, out: np.ndarray) -> np.ndarray:
    _pack_dq(_flat_palette(palette)[0], out)
    return out


def skin_dq_into(
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
    scale: str = "auto",
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Real-time dual quaternion skinning in float32 into caller-owned arrays.

    Arguments as :func:`skeletal.skin.skin_into`, except ``palette``: (J, 4, 4) / (J, 3, 4) row-major,
    or packed (J, 16) float32 from :func:`pack_dq_palette`. ``scale``: "auto" (the scale-separated
    kernel when any joint of the palette scales or shears, the rigid kernel otherwise), "separate"
    (always the scale-separated kernel) or "ignore" (the rigid kernel: scale is dropped). Returns the
    three outputs. Errors are :class:`skeletal.SkeletalError`.

    >>> import numpy as np
    >>> pal = np.eye(4, dtype=np.float32)[None]; pal[0, :3, 3] = (0, 1, 0)
    >>> out = np.empty((1, 3), np.float32)
    >>> skin_dq_into(pal, np.zeros((1, 1), np.uint8), np.ones((1, 1), np.float32),
    ...              np.zeros((1, 3), np.float32), None, None, out)[0].tolist()
    [[0.0, 1.0, 0.0]]
    """
    if scale != "auto" and scale not in ("separate", "ignore"):
        raise SkeletalError(f"scale must be 'auto', 'separate' or 'ignore', got {scale!r}")
    if type(joints) is not np.ndarray or joints.ndim != 2 or type(positions) is not np.ndarray:
        check_skin_args(joints, weights, positions, normals, tangents, out_positions, out_normals, out_tangents)
    n, k = joints.shape
    # The signed-record kernel for big meshes of few joints (its table is J^2 dot products per call).
    signed = (n >= SIGNED_MIN_VERTICES and tangents is None and k in UNROLLED and type(palette) is np.ndarray
              and palette.ndim in (2, 3) and palette.shape[0] ** 2 <= n)
    # As skin_into: a packed float32 palette that needs no padding goes straight to the compiled call (which
    # checks its order by type, its width and length), anything else through kernel_palette.
    if (type(palette) is np.ndarray and palette.ndim == 2 and palette.dtype is _F32_DTYPE
            and (signed or n < PAD_MIN_VERTICES or joints.dtype is not _U8_DTYPE)):
        packed, unclamped = palette, None
    else:
        palette = np.asarray(palette)
        packed, clamp = kernel_palette(palette, joints, n, DQ_STRIDE, _pack_into, "pack_dq_palette", pad=not signed)
        unclamped = None if clamp else True
    scaled = scale == "separate" or (scale == "auto" and _any_scales(packed, len(palette)))
    doubled, signs = _signed_scratch(len(packed)) if signed else (None, None)
    # As skin_into: the argument contract is checked inside the call (types when compiling, shapes and
    # strides in compiled code: ~6 us less per call than check_skin_args here, ~1% of a 100k-vertex
    # call); on a failure kernel_palette and check_skin_args name the argument at fault. More than one
    # chunk runs on fewer threads while other processes keep the CPUs busy (as skin_into).
    try:
        if n >= PARALLEL_MIN_VERTICES and busy_cap():
            with capped_threads():
                ok = _skin_dq_checked(packed, joints, weights, positions, normals, tangents, out_positions,
                                      out_normals, out_tangents, UNROLLED.get(k), True if scaled else None,
                                      unclamped, doubled, signs)
        else:
            ok = _skin_dq_checked(packed, joints, weights, positions, normals, tangents, out_positions, out_normals,
                                  out_tangents, UNROLLED.get(k), True if scaled else None, unclamped, doubled, signs)
    except (TypingError, TypeError, ValueError) as exc:
        _name_fault(palette, joints, weights, positions, normals, tangents, out_positions, out_normals, out_tangents,
                    DQ_STRIDE, "pack_dq_palette")
        raise SkeletalError(f"skin_dq_into: unsupported arguments ({str(exc).splitlines()[0]})") from None
    if not ok:
        _name_fault(palette, joints, weights, positions, normals, tangents, out_positions, out_normals, out_tangents,
                    DQ_STRIDE, "pack_dq_palette")
        raise SkeletalError("skin_dq_into: the arguments' shapes do not agree")
    return out_positions, out_normals, out_tangents
