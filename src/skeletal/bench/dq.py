"""``skeletal bench`` rows for dual quaternion skinning (registered in :data:`skeletal.bench.FEATURE_BENCHES`).

Same mesh as the skinning stage (:func:`skeletal.bench.synthetic_mesh`: 100k vertices, 4 uint8
influences, positions + normals, 65 joints), three palettes: **rigid** (the rotations and translations
only, the common case of real rigs), **scaled** (the stage's own palette, scale 0.8-1.25 along each
joint's axes: S is diagonal, and DQS takes the diagonal variant of its scale-separated kernel) and
**sheared** (the same scales along randomly rotated axes, S = B D B^T: the general scale-separated
kernel). Per frame each method converts its palette (``pack_palette`` /
``pack_dq_palette``) and skins. Baseline: :func:`skeletal.skin_into` (LBS) on the same mesh and
palette, timed interleaved with DQS (LBS, DQS, LBS, DQS, ...) so that background load hits both
alike; the ratio is the median of the paired ratios. One-thread rows time the calling thread's CPU
time (numba runs a one-thread parallel loop there), which time slicing by other processes does not
inflate. Goal: DQS at least 0.80 of LBS throughput (issue 33; 0.70 before).
"""

from __future__ import annotations

import statistics
import time

import numpy as np

GOAL = 0.80


def bench_rows(asset=None, clip=None, path=None, quick: bool = False, vertices: int = 100_000) -> dict:
    import numba

    from . import interleaved, rate, stat, synthetic_mesh
    from ..skinning.lbs import pack_palette, skin_into
    from ..skinning.dqs import dual_quaternions, pack_dq_palette, skin_dq_into

    scaled, joints, weights, positions, normals = synthetic_mesh(vertices)
    qr, _, _, _ = dual_quaternions(scaled)
    rigid = scaled.copy()
    x, y, z, w = qr.T
    rigid[:, :, :3] = np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)], -1),
        np.stack([2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)], -1),
        np.stack([2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], -1)], -2)
    axes = np.linalg.qr(np.random.default_rng(1).normal(size=(len(scaled), 3, 3)))[0]
    sheared = rigid.copy()
    stretch = np.linalg.norm(scaled[:, :, :3], axis=1)  # each joint's scale per axis
    sheared[:, :, :3] = rigid[:, :, :3] @ (axes * stretch[:, None, :]) @ axes.transpose(0, 2, 1)
    out_p, out_n = np.empty_like(positions), np.empty_like(normals)
    packed, dq_packed = pack_palette(scaled), pack_dq_palette(scaled)

    def lbs(palette):
        def run():
            pack_palette(palette, packed)
            skin_into(packed, joints, weights, positions, normals, None, out_p, out_n)
        return run

    def dqs(palette):
        def run():
            pack_dq_palette(palette, dq_packed)
            skin_dq_into(dq_packed, joints, weights, positions, normals, None, out_p, out_n)
        return run

    repeats = 5 if quick else 21
    inner = max(1, int(2e5 // vertices))
    threads = numba.get_num_threads()
    rows, figures = [], {}
    for n_threads in (threads, 1):
        numba.set_num_threads(n_threads)
        try:
            for kind, palette in (("rigid", rigid), ("scaled", scaled), ("sheared", sheared)):
                # One thread runs in this thread: its CPU time is immune to time slicing by other processes.
                lbs_secs, dqs_secs = interleaved([lbs(palette), dqs(palette)], repeats, inner,
                                                 time.perf_counter if n_threads > 1 else time.thread_time, warmup=2)
                secs = {"lbs": lbs_secs, "dqs": dqs_secs}
                mverts = rate(secs["dqs"], vertices, 1e6, "M vertices/s")
                base = rate(secs["lbs"], vertices, 1e6, "M vertices/s")
                ratios = [b / d for b, d in zip(secs["lbs"], secs["dqs"])]
                ratio = statistics.median(ratios)
                key = f"dqs_{kind}_{n_threads}thr"
                figures[key] = {"dqs_mverts_per_s": mverts, "lbs_mverts_per_s": base,
                                "ratio": stat(ratios, "fraction of LBS")}
                rows.append({
                    "name": f"DQS skinning: {vertices // 1000}k x4, pos+nrm, {kind} palette, {n_threads} thr"
                            + ("" if n_threads > 1 else " (CPU time)"),
                    "stat": mverts,
                    "baseline": f"LBS skin_into {base['median']:.1f} Mverts/s",
                    "ratio": f"{ratio:.2f}x",
                    "reference": f"goal >= {GOAL:.2f} of LBS",
                })
        finally:
            numba.set_num_threads(threads)
    return {"rows": rows, "vertices": vertices, "joints": len(scaled), "influences": joints.shape[1],
            "threads": threads, **figures}
