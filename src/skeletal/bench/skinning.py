"""``skeletal bench`` rows for skinning a real character mesh on one thread (registered in
:data:`skeletal.bench.FEATURE_BENCHES`): issue 17's skinning row.

Mesh: the largest skinned primitive of the bench model (Soldier.glb: the body, 7325 vertices, 4 uint16
influences, as the ozz harness in ``shared/tools/ozz-bench`` reads it), posed by its clip at t = 0.5 s;
positions + normals. Per call: :func:`skeletal.pack_palette` (the per-frame palette conversion) and
:func:`skeletal.skin_into`, with the default ``normal_transform="cofactor"`` (exact for non-uniform
scale, renormalised) and with ``"linear"`` (ozz's maths). One thread, timed on the calling thread's
CPU clock (``time.thread_time``), which time slicing by other processes does not inflate; the load
average is printed with the figures.

Baselines, measured in the same run and interleaved with the row (A, B, C, A, B, C, ...):

* the same call on interleaved vertex records (``records[:, 0:3]`` rows): the two-vertex kernel that
  handles strided rows (and was the only kernel before the planar one);
* :func:`skeletal.bench.numpy_skin`, the same maths in numpy.

Reference: ozz-animation 0.16 ``SkinningJob`` on the same mesh, 4 influences, positions + normals, one
thread: 285-290 Mverts/s (issue 17, its harness); the goal is at least that with the default normals.
"""

from __future__ import annotations

import statistics

import numpy as np

#: ozz-animation 0.16 SkinningJob, Soldier body mesh, 1 thread, thread CPU clock (issue 17).
OZZ_MVERTS = (285.0, 290.0)


def character_mesh(asset, clip):
    """(palette (J, 3, 4) float32, joints uint16, weights, positions, normals, label) of the asset's
    largest skinned primitive at t = 0.5 s of ``clip``; None when it has no skinned mesh with normals."""
    import skeletal

    instances = [s for s in getattr(asset, "skinned_instances", []) if s.primitives]
    if not instances:
        return None
    inst = max(instances, key=lambda s: s.primitives[0].source.vertex_count)
    prim = inst.primitives[0]
    src = prim.source
    if src.normals is None or prim.joints is None or int(np.max(prim.joints, initial=0)) > 65535:
        return None
    player = skeletal.Player(asset)
    if clip is not None:
        player.play(clip)
    player.update(0.5)
    palette = np.ascontiguousarray(np.asarray(player.palettes[inst.skin])[:, :3, :], np.float32)
    return (palette, np.ascontiguousarray(prim.joints, np.uint16), np.ascontiguousarray(prim.weights, np.float32),
            np.ascontiguousarray(src.positions, np.float32), np.ascontiguousarray(src.normals, np.float32),
            f"{len(src.positions)} verts")


def bench_rows(asset=None, clip=None, path=None, quick: bool = False) -> dict:
    """The rows (see the module docstring).

    >>> rows = bench_rows(quick=True)["rows"]   # doctest: +SKIP
    """
    import numba

    from . import interleaved, load_average, numpy_skin, rate, synthetic_mesh
    from ..skinning.lbs import pack_palette, skin_into

    mesh = character_mesh(asset, clip) if asset is not None else None
    if mesh is None:
        palette, joints, weights, positions, normals = synthetic_mesh(7325)
        joints = joints.astype(np.uint16)
        palette = np.ascontiguousarray(palette[:, :3, :], np.float32)
        label = "synthetic 7325 verts"
    else:
        palette, joints, weights, positions, normals, label = mesh
    v = len(positions)
    packed = pack_palette(palette)
    out_p, out_n = np.empty_like(positions), np.empty_like(normals)
    records = np.zeros((v, 8), np.float32)  # interleaved vertex records: position, normal, padding
    records[:, 0:3], records[:, 3:6] = positions, normals
    out_records = np.zeros_like(records)

    def dense(mode):
        def run():
            pack_palette(palette, packed)
            skin_into(packed, joints, weights, positions, normals, None, out_p, out_n, normal_transform=mode)
        return run

    def strided(mode):
        def run():
            pack_palette(palette, packed)
            skin_into(packed, joints, weights, records[:, 0:3], records[:, 3:6], None, out_records[:, 0:3],
                      out_records[:, 3:6], normal_transform=mode)
        return run

    repeats = 7 if quick else 41
    inner = max(1, int(2e5 // v))
    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        numpy_secs = interleaved([lambda: numpy_skin(palette, joints, weights, positions, normals)],
                                 3 if quick else 7, 1, warmup=2)[0]
        load_before = load_average()
        runs = {f"{kind}_{mode}": fn(mode) for mode in ("cofactor", "linear")
                for kind, fn in (("dense", dense), ("strided", strided))}
        secs = dict(zip(runs, interleaved(list(runs.values()), repeats, inner, warmup=2)))
        load_after = load_average()
    finally:
        numba.set_num_threads(threads)
    numpy_rate = rate(numpy_secs, v, 1e6, "M vertices/s")
    rows, figures = [], {"vertices": v, "mesh": label, "load_before": load_before, "load_after": load_after,
                         "skin_char_numpy_mverts_per_s": numpy_rate}
    for mode in ("cofactor", "linear"):
        mverts = rate(secs[f"dense_{mode}"], v, 1e6, "M vertices/s")
        base = rate(secs[f"strided_{mode}"], v, 1e6, "M vertices/s")
        ratio = statistics.median(b / d for b, d in zip(secs[f"strided_{mode}"], secs[f"dense_{mode}"]))
        figures[f"skin_char_{mode}_mverts_per_s_1thread_cpu"] = mverts
        figures[f"skin_char_{mode}_records_mverts_per_s_1thread_cpu"] = base
        rows.append({
            "name": f"skinning: {label} x{joints.shape[1]}, pos+nrm, {mode} normals, 1 thr (CPU time, "
                    f"load {load_before:.1f}-{load_after:.1f})",
            "stat": mverts,
            "baseline": f"interleaved records (two-vertex kernel) {base['median']:.0f} Mverts/s; "
                        f"numpy {numpy_rate['median']:.1f}",
            "ratio": f"{ratio:.2f}x",
            "reference": f"ozz 0.16 SkinningJob {OZZ_MVERTS[0]:.0f}-{OZZ_MVERTS[1]:.0f}/thread"
                         + (" (goal >= 1.0x)" if mode == "cofactor" else ""),
        })
    return {"rows": rows, **figures}
