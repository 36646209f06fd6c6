"""Skinning speed: skeletal.skin.skin_into variants against baselines measured in the same run.

    python benchmarks/bench_skinning.py [--vertices 100000] [--repeats 200] [--quick]

Baselines (same mesh, same run):

* numpy: the same maths in plain numpy (``skeletal.bench.numpy_skin``).
* memory bound: a streaming triad over the same number of bytes gives the bandwidth B; one vertex
  moves ``b`` bytes (positions + normals in and out, joints, weights), so no kernel can beat B / b.
* scalar numba: the obvious numba kernel (one vertex per iteration, float32 scalars, prange).
* planar SoA numba: x, y, z in separate arrays so that LLVM vectorises across vertices; the palette
  reads become gathers.
* float64 reference: ``skeletal.skin.skin`` (float64 accumulation; what bake uses).

Variants of the fast path: threads (1 and all), normal transform (cofactor / linear), influence
count, joint index dtype, positions only / + tangents, separate arrays vs interleaved vertex records
(one record stream in, one out). A DRAM-sized mesh shows the bound when data comes from memory.
Each row: median (min-max) M vertices/s over repeats; ratio = row / numpy, fraction = row / bound.
"""

from __future__ import annotations

import argparse
import statistics
import sys

import numba
import numpy as np
from numba import njit, prange

from skeletal.bench import measure_bandwidth, numpy_skin, skin_bytes_per_vertex, synthetic_mesh, time_samples
from skeletal.skinning.lbs import pack_palette, skin, skin_into


@njit(inline="always", fastmath=True)
def _cofactor_normal(m00, m01, m02, m10, m11, m12, m20, m21, m22, x, y, z):
    """Cofactor of the 3x3 rows times (x, y, z), renormalised, flipped where det < 0."""
    c00, c01, c02 = m11 * m22 - m12 * m21, m12 * m20 - m10 * m22, m10 * m21 - m11 * m20
    c10, c11, c12 = m02 * m21 - m01 * m22, m00 * m22 - m02 * m20, m01 * m20 - m00 * m21
    c20, c21, c22 = m01 * m12 - m02 * m11, m02 * m10 - m00 * m12, m00 * m11 - m01 * m10
    det = m00 * c00 + m01 * c01 + m02 * c02
    rx = c00 * x + c01 * y + c02 * z
    ry = c10 * x + c11 * y + c12 * z
    rz = c20 * x + c21 * y + c22 * z
    l2 = rx * rx + ry * ry + rz * rz
    s = np.float32(1.0) / np.sqrt(l2) if l2 > 0 else np.float32(0.0)
    s = -s if det < 0 else s
    return rx * s, ry * s, rz * s


@njit(parallel=True, fastmath=True, cache=True)
def scalar_numba(pal34, joints, weights, pos, nrm, opos, onrm):
    """The obvious numba kernel: one vertex per iteration, 12 float32 scalar accumulators (LLVM
    does not vectorise it: each palette read is a gather across vertices)."""
    n = pos.shape[0]
    chunk = 2048
    for c in prange((n + chunk - 1) // chunk):
        for v in range(c * chunk, min(n, (c + 1) * chunk)):
            m00 = m01 = m02 = m03 = m10 = m11 = m12 = m13 = m20 = m21 = m22 = m23 = np.float32(0.0)
            for k in range(joints.shape[1]):
                w = weights[v, k]
                jj = joints[v, k]
                m00 += w * pal34[jj, 0, 0]
                m01 += w * pal34[jj, 0, 1]
                m02 += w * pal34[jj, 0, 2]
                m03 += w * pal34[jj, 0, 3]
                m10 += w * pal34[jj, 1, 0]
                m11 += w * pal34[jj, 1, 1]
                m12 += w * pal34[jj, 1, 2]
                m13 += w * pal34[jj, 1, 3]
                m20 += w * pal34[jj, 2, 0]
                m21 += w * pal34[jj, 2, 1]
                m22 += w * pal34[jj, 2, 2]
                m23 += w * pal34[jj, 2, 3]
            x, y, z = pos[v, 0], pos[v, 1], pos[v, 2]
            opos[v, 0] = m00 * x + m01 * y + m02 * z + m03
            opos[v, 1] = m10 * x + m11 * y + m12 * z + m13
            opos[v, 2] = m20 * x + m21 * y + m22 * z + m23
            rx, ry, rz = _cofactor_normal(m00, m01, m02, m10, m11, m12, m20, m21, m22, nrm[v, 0], nrm[v, 1], nrm[v, 2])
            onrm[v, 0] = rx
            onrm[v, 1] = ry
            onrm[v, 2] = rz


@njit(parallel=True, fastmath=True, cache=True)
def planar_numba(pal12, jt, wt, p, nv, op, on):
    """Planar SoA: pal12 (12, J), jt/wt (4, V), p/nv/op/on (3, V): unit-stride streams, so LLVM
    vectorises across vertices, and the palette reads become gathers."""
    n = p.shape[1]
    chunk = 2048
    for c in prange((n + chunk - 1) // chunk):
        for v in range(c * chunk, min(n, (c + 1) * chunk)):
            j0, j1, j2, j3 = np.intp(jt[0, v]), np.intp(jt[1, v]), np.intp(jt[2, v]), np.intp(jt[3, v])
            w0, w1, w2, w3 = wt[0, v], wt[1, v], wt[2, v], wt[3, v]
            m00 = w0 * pal12[0, j0] + w1 * pal12[0, j1] + w2 * pal12[0, j2] + w3 * pal12[0, j3]
            m01 = w0 * pal12[1, j0] + w1 * pal12[1, j1] + w2 * pal12[1, j2] + w3 * pal12[1, j3]
            m02 = w0 * pal12[2, j0] + w1 * pal12[2, j1] + w2 * pal12[2, j2] + w3 * pal12[2, j3]
            m03 = w0 * pal12[3, j0] + w1 * pal12[3, j1] + w2 * pal12[3, j2] + w3 * pal12[3, j3]
            m10 = w0 * pal12[4, j0] + w1 * pal12[4, j1] + w2 * pal12[4, j2] + w3 * pal12[4, j3]
            m11 = w0 * pal12[5, j0] + w1 * pal12[5, j1] + w2 * pal12[5, j2] + w3 * pal12[5, j3]
            m12 = w0 * pal12[6, j0] + w1 * pal12[6, j1] + w2 * pal12[6, j2] + w3 * pal12[6, j3]
            m13 = w0 * pal12[7, j0] + w1 * pal12[7, j1] + w2 * pal12[7, j2] + w3 * pal12[7, j3]
            m20 = w0 * pal12[8, j0] + w1 * pal12[8, j1] + w2 * pal12[8, j2] + w3 * pal12[8, j3]
            m21 = w0 * pal12[9, j0] + w1 * pal12[9, j1] + w2 * pal12[9, j2] + w3 * pal12[9, j3]
            m22 = w0 * pal12[10, j0] + w1 * pal12[10, j1] + w2 * pal12[10, j2] + w3 * pal12[10, j3]
            m23 = w0 * pal12[11, j0] + w1 * pal12[11, j1] + w2 * pal12[11, j2] + w3 * pal12[11, j3]
            x, y, z = p[0, v], p[1, v], p[2, v]
            op[0, v] = m00 * x + m01 * y + m02 * z + m03
            op[1, v] = m10 * x + m11 * y + m12 * z + m13
            op[2, v] = m20 * x + m21 * y + m22 * z + m23
            rx, ry, rz = _cofactor_normal(m00, m01, m02, m10, m11, m12, m20, m21, m22, nv[0, v], nv[1, v], nv[2, v])
            on[0, v] = rx
            on[1, v] = ry
            on[2, v] = rz


def mverts(secs: list[float], vertices: int) -> tuple[float, float, float]:
    r = [vertices / s / 1e6 for s in secs]
    return statistics.median(r), min(r), max(r)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vertices", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--quick", action="store_true", help="fewer repeats, no DRAM-sized mesh")
    args = ap.parse_args(argv)
    reps = 20 if args.quick else args.repeats
    v = args.vertices
    threads = numba.get_num_threads()
    palette, joints, weights, positions, normals = synthetic_mesh(v)
    rng = np.random.default_rng(5)
    tangents = np.ascontiguousarray(np.concatenate([normals[:, [1, 2, 0]], np.sign(rng.normal(size=(v, 1)))], axis=1), np.float32)
    packed = pack_palette(palette)
    out_p, out_n, out_t = np.empty_like(positions), np.empty_like(normals), np.empty_like(tangents)
    per_vertex = skin_bytes_per_vertex(joints, 4)
    plan: list[tuple[str, object, int, int, int]] = []  # (name, fn, threads, repeats, bytes per vertex)

    def add(name, fn, n_threads=threads, n_reps=reps, bytes_per_vertex=0):
        plan.append((name, fn, n_threads, n_reps, bytes_per_vertex))

    fast = lambda **kw: (lambda: skin_into(packed, joints, weights, positions, normals, None, out_p, out_n, **kw))
    # baselines
    add("numpy (same maths)", lambda: numpy_skin(palette, joints, weights, positions, normals), n_reps=max(3, reps // 20))
    pal44 = np.zeros((len(palette), 4, 4))
    pal44[:, :3], pal44[:, 3, 3] = palette, 1.0
    add(f"float64 reference skin(), {threads} threads", lambda: skin(pal44, joints, weights, positions, normals),
        n_reps=max(3, reps // 10))
    add(f"scalar numba, {threads} threads", lambda: scalar_numba(palette, joints, weights, positions, normals, out_p, out_n))
    soa = (np.ascontiguousarray(palette.reshape(-1, 12).T), np.ascontiguousarray(joints.T), np.ascontiguousarray(weights.T),
           np.ascontiguousarray(positions.T), np.ascontiguousarray(normals.T), np.empty((3, v), np.float32), np.empty((3, v), np.float32))
    add(f"planar SoA numba (gathers), {threads} threads", lambda: planar_numba(*soa))
    add("scalar numba, 1 thread", lambda: scalar_numba(palette, joints, weights, positions, normals, out_p, out_n), 1)
    add("planar SoA numba (gathers), 1 thread", lambda: planar_numba(*soa), 1)
    # the fast path
    add(f"skin_into, {threads} threads", fast(), bytes_per_vertex=per_vertex)
    add(f"skin_into linear normals, {threads} threads", fast(normal_transform="linear"), bytes_per_vertex=per_vertex)
    add("skin_into, 1 thread", fast(), 1, bytes_per_vertex=per_vertex)
    add("skin_into linear normals, 1 thread", fast(normal_transform="linear"), 1, bytes_per_vertex=per_vertex)
    add("skin_into positions only, 1 thread", lambda: skin_into(packed, joints, weights, positions, None, None, out_p), 1)
    add("skin_into + tangents, 1 thread",
        lambda: skin_into(packed, joints, weights, positions, normals, tangents, out_p, out_n, out_t), 1)
    add("skin_into incl. pack_palette, 1 thread",
        lambda: skin_into(palette, joints, weights, positions, normals, None, out_p, out_n), 1)
    for dtype in (np.uint16, np.int32):
        j = joints.astype(dtype)
        add(f"skin_into {np.dtype(dtype).name} joints, 1 thread",
            lambda j=j: skin_into(packed, j, weights, positions, normals, None, out_p, out_n), 1)
    for k in (1, 2, 8, 12):
        _, jk, wk, _, _ = synthetic_mesh(v, influences=k, seed=k)
        add(f"skin_into {k} influences, 1 thread",
            lambda jk=jk, wk=wk: skin_into(packed, jk, wk, positions, normals, None, out_p, out_n), 1)
    # layouts: one interleaved record stream in [p n w j] (44 bytes) and one out [p n] (24 bytes)
    rec = np.zeros((v, 11), np.float32)
    rec[:, 0:3], rec[:, 3:6], rec[:, 6:10] = positions, normals, weights
    rec.view(np.uint8)[:, 40:44] = joints
    out_rec = np.empty((v, 6), np.float32)
    rec_args = (packed, rec.view(np.uint8)[:, 40:44], rec[:, 6:10], rec[:, 0:3], rec[:, 3:6], None, out_rec[:, 0:3], out_rec[:, 3:6])
    add(f"skin_into interleaved records, {threads} threads", lambda: skin_into(*rec_args), bytes_per_vertex=per_vertex)
    add("skin_into interleaved records, 1 thread", lambda: skin_into(*rec_args), 1, bytes_per_vertex=per_vertex)

    # Run grouped by thread count (switching the count between calls moves data between cores' caches).
    rows: list[tuple[str, list[float], int]] = []
    results = {}
    for n_threads in sorted({p[2] for p in plan}, reverse=True):
        numba.set_num_threads(n_threads)
        try:
            for name, fn, t, n_reps, bpv in plan:
                if t == n_threads:
                    results[name] = (time_samples(fn, n_reps, warmup=2), bpv)
        finally:
            numba.set_num_threads(threads)
    rows = [(name, *results[name]) for name, *_ in plan]

    bandwidth = measure_bandwidth(per_vertex * v, max(10, reps // 4))
    bound = bandwidth["median"] * 1e9 / per_vertex / 1e6
    dram = None
    if not args.quick:
        big = 8_000_000  # 544 MB: more than the last-level cache
        bp, bj, bw, bpos, bn = synthetic_mesh(big, seed=9)
        bo_p, bo_n = np.empty_like(bpos), np.empty_like(bn)
        bpk = pack_palette(bp)
        dram_secs = time_samples(lambda: skin_into(bpk, bj, bw, bpos, bn, None, bo_p, bo_n), 10, warmup=1)
        dram_bw = measure_bandwidth(per_vertex * big, 5)
        dram = (big, dram_secs, dram_bw)

    numpy_rate = mverts(rows[0][1], v)[0]
    print(f"skinning {v:,} vertices, 4 influences (uint8 joints unless stated), positions + normals, "
          f"{len(palette)}-joint palette; {threads} threads; {per_vertex} bytes/vertex")
    print(f"memory bound: triad {bandwidth['median']:.1f} GB/s over {per_vertex * v / 1e6:.1f} MB "
          f"(min {bandwidth['min']:.1f}, max {bandwidth['max']:.1f}) -> {bound:,.0f} M vertices/s\n")
    name_w = max(len(r[0]) for r in rows)
    print(f"{'variant':<{name_w}}  {'Mverts/s':>9}  {'min':>7}  {'max':>7}  {'x numpy':>8}  {'of bound':>8}")
    print(f"{'-' * name_w}  {'-' * 9}  {'-' * 7}  {'-' * 7}  {'-' * 8}  {'-' * 8}")
    for name, secs, bpv in rows:
        med, lo, hi = mverts(secs, v)
        frac = f"{med / bound:8.2f}" if bpv else " " * 8
        print(f"{name:<{name_w}}  {med:9.1f}  {lo:7.1f}  {hi:7.1f}  {med / numpy_rate:8.1f}  {frac}")
    if dram:
        big, secs, bw = dram
        med, lo, hi = mverts(secs, big)
        b = bw["median"] * 1e9 / per_vertex / 1e6
        print(f"\n{big:,} vertices ({per_vertex * big / 1e6:.0f} MB, from DRAM): {med:.1f} M vertices/s "
              f"(min {lo:.1f}, max {hi:.1f}); triad {bw['median']:.1f} GB/s -> bound {b:.0f}: {med / b:.2f} of it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
