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
  rows without tangents (the common case) 16 vertices at a time (8 on 256-bit targets, as LBS:
  :func:`~skeletal.skinning.ir.planar_lanes`), one SIMD lane per vertex (the
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
(J, J) int32 sign table, ``table[p, j]`` the sign bit (:data:`FLIP`) where joint j's qr lies in the
other hemisphere than joint p's (J^2 float32 dot products: ~1.5 us for 65 joints). Per vertex, the
pivot's table row (influence 0 when the group's weights are sorted, else the largest weight by a
chain of selects) says which records to negate: each record is loaded from its joint's address (as
LBS's) and the table entry, broadcast from memory and anded with qr and qd's eight lanes, is xor-ed in
(one ``vpternlogd``): the same transform in the pivot's hemisphere, and the table load is beside the
record load, not in front of it (the first version read a record offset from the table and the
record from a doubled palette, a load feeding a load: 20% of the frame). The blend is then LBS's: one
16-float multiply-add per influence, the weight broadcast from memory, a chain in influence order (as
the group kernel's streamed sums; LLVM may pair the multiply-adds differently, a rounding); the 16
blended records are transposed once (:func:`skeletal.skin.transpose_lanes`, 14 of 16 rows) and the
transform is the group kernel's (``_emit_dq_transform``). Joint indices are clamped to J - 1 (the
table has J columns: no 256-entry padding), except where one check per group (dense C-contiguous
joints and weights: the group's K x 16 indices as one vector compare against J - 1, and for K > 2
its weights sorted, one vector compare) lets the streamed blend run without them (a cmp and a cmov
per influence: 128 of ~730 instructions per group at K = 4, and 20% of the frame); groups that fail
take the clamped blend, whose pivot is the same, so the result is too. Read in the assembly and fixed on the way: the
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

Diagonal S (``_emit_dq_signed``'s ``diagonal``; issue 33). Where every joint's S is diagonal
(off-diagonals at most :data:`DIAGONAL_TOLERANCE` of its largest diagonal entry: half a float32 ulp, so
leaving them out is a rounding; axis-aligned scale, uniform scale, the rigid joints beside them),
:func:`skin_dq_into` passes ``scaled`` as the integer ``_DIAGONAL`` (its own compiled variant; one
compiled loop over the records, :func:`_scale_kind`, decides per call) and the signed-record kernel
transposes 11 of the 16 rows (qr, qd, s00, s11, s22), S p is 3 multiplies (not 9), S's cofactor 3
products (not 12) and its product with the normal 3 (not 9). The blended S of diagonal S's is
diagonal, so the result is the general kernel's to float32 rounding. Scale along rotated axes (S =
B D B^T, shear) keeps the general kernel; the other kernels (group, two-vertex) treat the flag as any S.
The rigid and the general scale-separated kernels' machine code is unchanged by it (compared after assembly).
In one process on the 2-vCPU Zen 5 VM (thread CPU, load 6): 0.757x -> 0.805x of LBS for the bench's
scaled palette, 7% less time. Tried on the same VM and not kept (A/B against the kept kernel in one
process, each variant its own specialisation; time of the variant / the kept one, rigid / scaled): the
table entry folded into a masked ``vxorps`` as a ``{1to16}`` operand, the record loaded apart: 1.00 /
0.96-1.01; signed weights made in general registers (weight bits xor table entry), broadcast from a
register: 1.13 / 1.18, or stored and broadcast back from memory: 1.24 / 1.20; the signs as 16-bit lane
masks loaded into k registers: 1.06 / 1.08; a per-frame (J x J) table of pre-signed records (no sign
work in the loop, but 270 KB read at random): 1.02 / 1.05 with its 10.7 us build; an int8 table
whose row is addressed from the pivot's record offset (one ``lea``, 32 scalar instructions fewer per
group): 0.99 / 1.00; the four uint8 indices as one load: 0.98 / 1.00; the blend as R_0 + sum w_k
(R_k - R_0) (16 multiplies fewer, for weights summing to 1): 1.01 / 0.99; one division for 2/|q|^2
and the normal's length: 1.01 / 1.02; the blends of 8 groups to a stack buffer, then their transforms
(two passes): 1.10 / 1.11; a doubled palette (qr, qd negated in the second copy) addressed through a
table of offsets, no vector sign work but a load feeding a load: 1.13 / 1.13. Left out altogether (not correct, for scale): the sign work 0.84 / 0.84,
S 0.89 (scaled). Scalar instructions cost nothing measurable here; vector ones everywhere do.

Joined transposes (issue 33, third round). The 16-row transpose of the blended records builds all 16 rows
through three of its four stages, though the rigid kernel wants 8 lanes of each record (56 shuffles a group
for 128 floats, where 8-float records take 32): rigid and diagonal-S groups now join the low halves of
records r and r + 8 into one row (behind an empty asm per blended record, else LLVM pushes the join up into
each influence's multiply-add) and transpose the 8 rows as two 8 x 8 blocks (8 + 24 shuffles); diagonal S
takes s00, s11, s22 of records r and r + 4 with one two-source permute, joins two such halves into a row of
four quads and transposes 4 x 4 blocks (19 shuffles, where the 16-row transpose's three extra rows were
nearly free but its shared stages were not): 51 shuffles a group against 59. General S keeps the 16-row
transpose (62; the joined halves take as many). The output is the same bit for bit (data movement only).
A/B in one process (random-joint mesh, 100k vertices, kernel call alone, 1 thread, thread CPU, 4 x 15
rounds interleaved with LBS, load 4-6.4): rigid, joined halves 0.956-0.975 of the 16-row kernel's time;
diagonal S, joined halves for S too 0.984-0.991, then the quads 0.955-0.972 of that. Looked at and left:
the sorted-weights check's four in-block broadcasts (``vshufps``) as shifted loads (it would need weights
sorted throughout, not only the first largest; the whole check, left out as a measurement only (wrong for
unsorted groups), is 3.5-5% of the kernel's time, its shuffles a quarter of that); s22 moved beside s00 and s11 in a per-frame
copy of the palette (the quads above reach the same shuffle count without it); the general S's six floats
as joined halves or quads (62 and ~69 shuffles against 62).

Presigned records (256-bit targets, helper ``dqsplit``). AVX2 has no ``vpternlogd`` with an embedded broadcast:
the table's sign took a broadcast and an xor per influence there, about 11% of the random-joint mesh's scaled
frame. Where the table serves and J <= :data:`PRESIGNED_MAX_JOINTS`, :func:`_presigned_records` also writes a
(J, 8 J) float32 table whose row p holds every joint's qr and qd already in p's hemisphere (bit for bit the
sign table's xor), and the kernel reads a record's first half from the pivot's row: no sign work, the same
output. The AVX-512 build never makes one (its machine code is unchanged).

Hemisphere pairs (``skin_dq_into(..., pairs=)``, issue 33). The sign table's work is per influence (a
broadcast, an and and an xor; the kernel without it takes about 1/1.2 of the time), yet in a rig the joints a
vertex blends are neighbours that turn less than 180 degrees against each other, so one sign per joint per
frame can put all of them in one hemisphere. :func:`dq_hemisphere_pairs`, once per mesh, lists the joint
pairs that decide some vertex's signs: its pivot's joint with each other joint of non-zero weight (the table's
row is the pivot's, so pairs of two non-pivot joints play no part), each group of linked joints' spanning
tree (breadth first) before the other pairs, and per pair the 16-vertex blocks that blend it
(:class:`HemispherePairs`). Per frame :func:`_hemisphere_checks` walks them (P float32 dot products,
microseconds): a tree pair fixes its new joint's sign from its dot product, every other pair checks that
``dot < 0`` exactly where the two signs differ. Where all pass, :func:`_signed_copy` negates qr and qd of
the flipped joints in an aligned copy of the palette, and the signed-record kernel runs with a (J,) array in
the table's place: no table, no per-influence sign work, no pivot. Exact, not an approximation: for a
vertex with pivot p the table's blend is ``sum w_k t_k R_k`` with ``t_k = -1`` where ``qr_k . qr_p < 0``;
the pair (k, p) passed, so ``s_k s_p = t_k`` and the sign-free blend is ``sum w_k s_k R_k = s_p sum w_k
t_k R_k`` (zero weights add zeros): the same sums, with every term negated when ``s_p = -1``, which round
alike; and the transform of ``(-q, -d)`` is that of ``(q, d)`` bit for bit (every product in it pairs two
negated values or none; the tests compare with ``array_equal``). The pivot's pairs of one vertex form a
star, which signs always fit: pairs fail only where a cycle of them runs through several vertices (vertex
A's pivot a blends b, B's pivot b blends c, C's pivot c blends a, and the three qr no signs put in one
hemisphere). Linking every pair of a vertex's joints, as first built, failed every frame of Soldier's Run
(23 hand vertices blend three such joints); with the pivot's pairs Soldier's Run, Walk, Idle and TPose, Fox
and RobotExpressive pass every frame. Where some pairs fail (the failing checks listed, the walk going on),
the **masks**: the blocks that blend a failing pair (:func:`_failing_runs`, merged into runs) take the sign
table and the others keep the sign-free kernel: the kernel runs without sign work over every vertex, then
with the table over those runs' vertices again (slices of the same arrays: the same compiled kernel, whole
16-vertex groups as in a whole-mesh call, so each vertex's output is the table's, the mesh's last partial
group through the two-vertex kernel as there). A block's vertices whose own pairs passed are right either
way; the others are overwritten. The frame takes the table everywhere where those blocks are more than
:data:`MASK_SHARE` of the mesh, where the outputs overlap an input (in place: the second pass would read
outputs), where a pair lies past the palette's J, or where ``pairs`` is a bare (P, 2) array (as before:
no blocks). A frame whose pairs all pass runs exactly as before the masks (one kernel call). Measured:
docs/guides/performance.md (the DQS row of issue 33).

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
transpose; the kernel is chosen by size, not by palette). On a 2-vCPU AMD EPYC Zen 5 VM (AVX-512) the
same rows measured 0.72x / 0.66x; with the sign table xor-ed in and the per-group check (issue 33)
0.82-0.83x / 0.72-0.73x; with the diagonal-S variant the scaled (axis-aligned) palette ~0.80x, a
sheared one (general kernel) ~0.70-0.73x; with ``pairs`` on a rig-like mesh (the bench's, since) rigid ~1.0x,
scaled ~0.95x, sheared ~0.88x (docs/guides/performance.md).
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

Modules: this one holds :func:`skin_dq_into` and the numba kernels that run its chunks (signed records
included); the palettes (:func:`dual_quaternions`, :func:`pack_dq_palette`, :func:`gpu_dq_palette`)
are in :mod:`skeletal.skinning.dq_palette`, the float64 reference :func:`skin_dq` in
:mod:`skeletal.skinning.dq_reference`, the LLVM IR emitters in :mod:`skeletal.skinning.dq_ir` (built on
:mod:`skeletal.skinning.ir`); all are re-exported here.
"""

from __future__ import annotations

import functools
import threading

import numpy as np
from numba import njit, prange
from numba.core.errors import TypingError

from ..errors import SkeletalError
from .._threads import busy_cap, capped_threads
from .dq_ir import (  # noqa: F401  (re-exported: dqs.py held these before the split)
    _SWAP_MIDDLE, _either, _emit_dq_group, _emit_dq_signed, _emit_dq_transform, _emit_dq_vertices, _lane_vector,
    _lane_weights, _load_xyz, _opaque, _presign_row, _skin_dq_chunk, _sorted_first, _store_xyz, _transpose_halves, _transposed,
)
from .dq_palette import (  # noqa: F401
    DQ_STRIDE as DQ_STRIDE, GPU_ROWS as GPU_ROWS, PACK_STEP as PACK_STEP, RIGID_FAST as RIGID_FAST,
    RIGID_TOLERANCE as RIGID_TOLERANCE, _cofactors, _dq_convert, _dq_joint, _flat_palette, _pack_dq, _pack_dq_one,
    _pack_joint, _packed_out, _polar, _quat_from_rotation, dual_quaternions as dual_quaternions,
    gpu_dq_palette as gpu_dq_palette, pack_dq_palette as pack_dq_palette,
)
from .dq_pairs import (  # noqa: F401  (re-exported: the pairs were built here before)
    _NO_BLOCKS, _NO_STARTS, MASK_SHARE as MASK_SHARE, PAIR_JOINTS as PAIR_JOINTS, HemispherePairs as HemispherePairs,
    _apart, _failing_runs, _hemisphere_checks, _hemisphere_signs, _linked_joints, _ordered_pairs, _pair_blocks,
    _rows_of, _vertex_links, dq_hemisphere_pairs as dq_hemisphere_pairs,
)
from .dq_reference import _mat3_times, _rotate_by_unnormalised, _skin_dq_reference  # noqa: F401
from .dq_reference import skin_dq as skin_dq
from .ir import (  # noqa: F401
    CHUNK as CHUNK, I32 as I32, I64 as I64, LANES as LANES, _F32_DTYPE, _FM, _U8_DTYPE, Emit as Emit,
    Influences as Influences, Rows as Rows, _kernel_types_ok, _rows_ok, _transpose_masks,
    chunk_codegen as chunk_codegen, deinterleave3 as deinterleave3, interleave3 as interleave3,
    planar_codegen as planar_codegen, planar_lanes, planar_ok as planar_ok, store_rows as store_rows,
    transpose_lanes as transpose_lanes, vec_type as vec_type,
)
from .lbs import (ALIGN_MIN_VERTICES, PAD_MIN_VERTICES, PARALLEL_MIN_VERTICES, UNROLLED, _aligned_copy, _name_fault,
                  aligned_empty, check_skin_args, cofactors3 as cofactors3, kernel_palette)


#: A :func:`_signed_records` table entry: the sign bit of an int32, set where the joint's qr and qd are
#: negated (the kernel xors it into their eight lanes).
FLIP = np.int32(-0x80000000)


@njit(cache=True, nogil=True)
def _signed_records(packed, table):
    """The signed-record kernel's sign table from a packed palette (J, 16): ``table`` (J, J) int32,
    ``table[p, j]`` :data:`FLIP` where joint j's record is in the other hemisphere than joint p's
    (qr_j . qr_p < 0, the float32 dot product as the kernels take it; its qr and qd are then negated:
    the same transform), else 0. J^2 dot products: the caller uses it when J^2 is small beside V."""
    n = packed.shape[0]
    qr = np.empty((4, n), np.float32)  # qr as four vectors over the joints
    for j in range(n):
        for c in range(4):
            qr[c, j] = packed[j, c]
    qx, qy, qz, qw = qr[0], qr[1], qr[2], qr[3]
    for p in range(n):
        px, py, pz, pw = qx[p], qy[p], qz[p], qw[p]
        row = table[p]
        for j in range(n):
            dot = (qx[j] * px + qy[j] * py) + (qz[j] * pz + qw[j] * pw)
            row[j] = FLIP if dot < 0 else np.int32(0)


@njit(cache=True, nogil=True)
def _presigned_records(packed, table, out):
    """:func:`_signed_records`' table (``table``, (J, J) int32, filled here) and, in ``out`` ((J, 8 J) float32),
    its records already signed: ``out[p, 8 j : 8 j + 8]`` joint j's qr and qd, negated where ``table[p, j]`` is
    :data:`FLIP` (the 256-bit signed-record kernel reads them in place of the sign work)."""
    _signed_records(packed, table)
    for p in range(packed.shape[0]):
        _presign_row(out, packed, table, p)


@njit(cache=True, nogil=True)
def _signed_copy(packed, flips):
    """A 64-byte aligned copy of the packed palette with qr and qd negated where ``flips`` < 0 (the same
    transforms: q and -q are one rotation)."""
    out = _aligned_copy(packed)
    for j in range(packed.shape[0]):
        if flips[j] < 0:
            for c in range(8):
                out[j, c] = -out[j, c]
    return out


@njit(cache=True, nogil=True)
def _skin_dq_checked(palette, joints, weights, positions, normals, tangents, out_positions, out_normals,
                     out_tangents, kspec, scaled, unclamped, signs, pairs, starts, blocks, presigned):
    """DQ-skin (see :func:`skin_dq_into`); returns False, touching nothing, where the shapes or strides
    break the contract, or the packed palette is empty or not 16 wide (the caller then names the fault).
    ``signs``: None, or a (J, J) int32 scratch table for :func:`_signed_records` (then the signed-record
    kernel runs; the caller sized it for this palette). ``pairs``: None, or the mesh's
    :func:`dq_hemisphere_pairs` pairs, ``starts`` and ``blocks`` its blocks per pair (:class:`HemispherePairs`;
    empty for a bare pairs array). Where :func:`_hemisphere_checks` finds signs that put every pair in one
    hemisphere, the signed-record kernel runs without sign work on the palette so signed (a (J,) array in
    the table's place); where some pairs fail and their blocks are few (:func:`_failing_runs`) and the
    outputs overlap no input, it runs so on every vertex and the table kernel again on those blocks'
    vertices (the table's output there; elsewhere the same as the table's, see the module docstring); else
    the table serves the frame. ``presigned``: None, or on 256-bit targets a (J, 8 J) float32 scratch
    (:func:`_presigned_scratch`, with ``signs``): the table's frames then take :func:`_presigned_records`' records."""
    if palette.shape[0] == 0 or palette.shape[1] != DQ_STRIDE:
        return False
    if signs is not None and (signs.shape[0] != palette.shape[0] or signs.shape[1] != palette.shape[0]):
        return False
    if presigned is not None and (signs is None or presigned.shape[0] != palette.shape[0]
                                  or presigned.shape[1] != 8 * palette.shape[0]):
        return False
    if not _rows_ok(positions, out_positions, normals, out_normals, tangents, out_tangents, joints, weights):
        return False
    if signs is None:
        _skin_dq_fast(palette, joints, weights, positions, normals, tangents, out_positions, out_normals,
                      out_tangents, kspec, scaled, unclamped, None)
        return True
    if pairs is not None:
        flips = signs[0]
        # The failing pairs' indices go to the table's other rows (J^2 - J >= P entries; scratch until
        # _signed_records fills the table). No blocks (a bare pairs array): stop at the first failure.
        failed = signs.reshape(-1)[palette.shape[0]:] if starts.shape[0] > 0 else flips[:0]
        count = _hemisphere_checks(palette, pairs, flips, failed)
        if count == 0:
            _skin_dq_fast(_signed_copy(palette, flips), joints, weights, positions, normals, tangents, out_positions,
                          out_normals, out_tangents, kspec, scaled, None, flips)
            return True
        if 0 < count <= failed.shape[0]:
            apart = (_apart(out_positions, positions) and _apart(out_positions, joints)
                     and _apart(out_positions, weights))
            if normals is not None:
                apart = (apart and _apart(out_positions, normals) and _apart(out_normals, positions)
                         and _apart(out_normals, normals) and _apart(out_normals, joints)
                         and _apart(out_normals, weights))
            runs = _failing_runs(starts, blocks, failed, count, positions.shape[0]) if apart else np.empty((0, 2), np.int64)
            if runs.shape[0] > 0:
                # every vertex without sign work, then the failing blocks' vertices again with the table
                _skin_dq_fast(_signed_copy(palette, flips), joints, weights, positions, normals, tangents,
                              out_positions, out_normals, out_tangents, kspec, scaled, None, flips)
                _signed_records(palette, signs)
                for r in range(runs.shape[0]):
                    lo, hi = runs[r, 0], runs[r, 1]
                    _skin_dq_fast(palette, joints[lo:hi], weights[lo:hi], positions[lo:hi], _rows_of(normals, lo, hi),
                                  _rows_of(tangents, lo, hi), out_positions[lo:hi], _rows_of(out_normals, lo, hi),
                                  _rows_of(out_tangents, lo, hi), kspec, scaled, None, signs)
                return True
    if presigned is not None:
        _presigned_records(palette, signs, presigned)
        aligned = _aligned_copy(palette) if positions.shape[0] >= ALIGN_MIN_VERTICES and palette.ctypes.data % 64 != 0 \
            else palette
        _skin_dq_fast(aligned, joints, weights, positions, normals, tangents, out_positions, out_normals,
                      out_tangents, kspec, scaled, None, presigned)
    elif positions.shape[0] >= ALIGN_MIN_VERTICES and palette.ctypes.data % 64 != 0:
        _signed_records(palette, signs)  # records read whole: one cache line each (as skin_into's)
        _skin_dq_fast(_aligned_copy(palette), joints, weights, positions, normals, tangents, out_positions,
                      out_normals, out_tangents, kspec, scaled, None, signs)
    else:
        _signed_records(palette, signs)
        _skin_dq_fast(palette, joints, weights, positions, normals, tangents, out_positions, out_normals,
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


def _presigned_scratch(joints: int) -> np.ndarray | None:
    """Per-thread scratch for :func:`_presigned_records` ((J, 8 J) float32, 64-byte aligned) where the
    kernels are 8 lanes wide and J at most :data:`PRESIGNED_MAX_JOINTS`, else None."""
    if joints > PRESIGNED_MAX_JOINTS or not _presigned_target():
        return None
    cached = getattr(_signed_buffers, "presigned", None)
    if cached is None or cached.shape[0] != joints:
        cached = _signed_buffers.presigned = aligned_empty((joints, 8 * joints), np.float32)
    return cached


@functools.lru_cache(maxsize=1)
def _presigned_target() -> bool:
    """Whether the compile target's planar kernels are 8 lanes wide (:func:`~skeletal.skinning.ir.planar_lanes`,
    fixed for the process: read once)."""
    return planar_lanes() == 8


#: The 256-bit signed-record kernel reads presigned records (:func:`_presigned_records`) for palettes of at
#: most this many joints: J^2 records of 32 bytes (253 KB at 89 joints) stay in a core's L2.
PRESIGNED_MAX_JOINTS = 89


def _signed_scratch(joints: int) -> np.ndarray:
    """Per-thread scratch for :func:`_signed_records` with ``joints`` joints: the (J, J) int32 table on a
    64-byte boundary (reused while J stays)."""
    cached = getattr(_signed_buffers, "last", None)
    if cached is None or cached.shape[0] != joints:
        cached = _signed_buffers.last = aligned_empty((joints, joints), np.int32)
    return cached


#: S counts as diagonal (the signed-record kernel's diagonal variant) where each of its off-diagonals is at
#: most this fraction of its largest diagonal entry: 2^-24, half a float32 ulp, so that leaving them out
#: moves the result by float32 rounding only (axis-aligned or uniform scale, as the bench palette's,
#: leaves off-diagonals of ~1e-8 from the polar decomposition).
DIAGONAL_TOLERANCE = 2.0 ** -24


@njit(cache=True, nogil=True)
def _scale_kind(packed, joints):
    """Of the first ``joints`` records of a packed palette, two bits: 1 where any has its ``scales`` flag
    set (else the rigid kernel serves), 2 where some record's S is not diagonal to :data:`DIAGONAL_TOLERANCE`.
    (Compiled: numpy's ``packed[:J, 14].any()`` measured ~2.5% of a 100k-vertex call, far more than
    it takes on its own.)"""
    scales, diagonal = False, True
    for j in range(joints):
        if packed[j, 14] != 0.0:
            scales = True
        limit = DIAGONAL_TOLERANCE * max(abs(packed[j, 8]), abs(packed[j, 11]), abs(packed[j, 13]))
        if not (abs(packed[j, 9]) <= limit and abs(packed[j, 10]) <= limit and abs(packed[j, 12]) <= limit):
            diagonal = False  # (NaN anywhere: not diagonal)
    return (1 if scales else 0) | (0 if diagonal else 2)


#: The kernels' ``scaled`` argument for a palette whose S are all diagonal (an integer: its own compiled
#: variant; None is the rigid kernel, True the general scale-separated one).
_DIAGONAL = 1


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
    pairs: HemispherePairs | np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Real-time dual quaternion skinning in float32 into caller-owned arrays.

    Arguments as :func:`skeletal.skin.skin_into`, except ``palette``: (J, 4, 4) / (J, 3, 4) row-major,
    or packed (J, 16) float32 from :func:`pack_dq_palette`. ``scale``: "auto" (the scale-separated
    kernel when any joint of the palette scales or shears, the rigid kernel otherwise), "separate"
    (always the scale-separated kernel) or "ignore" (the rigid kernel: scale is dropped). ``pairs``: the
    mesh's :func:`dq_hemisphere_pairs` (built once from these ``joints`` and ``weights``), which lets big
    meshes skip the per-vertex hemisphere signs on frames where the joints each vertex blends with its
    pivot can share one, and on the other vertices of frames where a few cannot (the same result); a bare
    (P, 2) int32 array of pairs (its ``.pairs``, or what it returned before) is still accepted and serves
    whole frames only. Returns the three outputs. Errors are :class:`skeletal.SkeletalError`.

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
    kind = 0 if scale == "ignore" else _scale_kind(packed, len(palette))
    if scale == "separate" or kind & 1:
        scaled = True if kind & 2 else _DIAGONAL
    else:
        scaled = None
    signs = _signed_scratch(len(packed)) if signed else None
    presigned = _presigned_scratch(len(packed)) if signed else None
    starts, blocks = _NO_STARTS, _NO_BLOCKS
    if type(pairs) is HemispherePairs:
        if pairs.vertices != n:
            raise SkeletalError(f"skin_dq_into: pairs were found for {pairs.vertices} vertices, the mesh has {n}")
        pairs, starts, blocks = pairs.pairs, pairs.starts, pairs.blocks
        if not (type(starts) is np.ndarray and starts.dtype == np.int64 and starts.ndim == 1 and starts.flags.c_contiguous
                and type(blocks) is np.ndarray and blocks.dtype == np.int32 and blocks.ndim == 1
                and blocks.flags.c_contiguous):
            raise SkeletalError("skin_dq_into: pairs must be dq_hemisphere_pairs(joints, weights)")
    if pairs is not None and (type(pairs) is not np.ndarray or pairs.dtype != np.int32 or pairs.ndim != 2
                              or pairs.shape[1] != 2 or not pairs.flags.c_contiguous):
        raise SkeletalError("skin_dq_into: pairs must be dq_hemisphere_pairs(joints, weights)")
    used_pairs = pairs if signed else None
    # As skin_into: the argument contract is checked inside the call (types when compiling, shapes and
    # strides in compiled code: ~6 us less per call than check_skin_args here, ~1% of a 100k-vertex
    # call); on a failure kernel_palette and check_skin_args name the argument at fault. More than one
    # chunk runs on fewer threads while other processes keep the CPUs busy (as skin_into).
    try:
        if n >= PARALLEL_MIN_VERTICES and busy_cap():
            with capped_threads():
                ok = _skin_dq_checked(packed, joints, weights, positions, normals, tangents, out_positions,
                                      out_normals, out_tangents, UNROLLED.get(k), scaled, unclamped, signs, used_pairs,
                                      starts, blocks, presigned)
        else:
            ok = _skin_dq_checked(packed, joints, weights, positions, normals, tangents, out_positions, out_normals,
                                  out_tangents, UNROLLED.get(k), scaled, unclamped, signs, used_pairs, starts, blocks,
                                  presigned)
    except (TypingError, TypeError, ValueError) as exc:
        _name_fault(palette, joints, weights, positions, normals, tangents, out_positions, out_normals, out_tangents,
                    DQ_STRIDE, "pack_dq_palette")
        raise SkeletalError(f"skin_dq_into: unsupported arguments ({str(exc).splitlines()[0]})") from None
    if not ok:
        _name_fault(palette, joints, weights, positions, normals, tangents, out_positions, out_normals, out_tangents,
                    DQ_STRIDE, "pack_dq_palette")
        raise SkeletalError("skin_dq_into: the arguments' shapes do not agree")
    return out_positions, out_normals, out_tangents
