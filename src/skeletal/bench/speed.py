"""``skeletal bench`` rows of the playback-kernel speed work (issue 17), each next to a baseline
measured in the same run and interleaved with it (blocks of A, B, A, B, ...):

* crowd 1000 x the walk clip, 1 thread, thread CPU clock: the wide path (16 instances per SIMD lane
  group, :mod:`skeletal.playback.wide`) against the per-instance kernel (``Crowd(wide=False)``);
* one character's update (``Player.update`` + ``palettes``, Python call included), 1 thread, thread
  CPU clock, against the compiled update kernel alone through its entry point (the floor);
* skinning the model's first skinned mesh, 4 influences, positions + normals, 1 thread, thread CPU
  clock, default (cofactor) normals against ozz's maths (``normal_transform="linear"``);
* a 10,000-character crowd frame on every thread (wall clock) against the same on one thread.

Reference figures are ozz-animation 0.16's from ``../shared/tools/ozz-bench`` (same machine type,
its README). Every row says the load average: thread-count rows mean something only when it is
below 1.

>>> from skeletal.bench.speed import bench_rows
>>> rows = bench_rows(quick=True)["rows"]          # doctest: +SKIP
"""

from __future__ import annotations

import time

import numba
import numpy as np

from . import interleaved, load_average

# ozz-animation 0.16 on the reference 2-vCPU machine, 1 thread (tools/ozz-bench/README.md)
OZZ_CROWD = (0.79e6, 0.98e6)  # characters/s, 1000 x Soldier Walk, same keys
OZZ_SINGLE_US = 0.74
OZZ_SKIN = (285.0, 290.0)  # M vertices/s, Soldier mesh, 4 influences, positions + normals


def _one_thread(run):
    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        return run()
    finally:
        numba.set_num_threads(threads)


def _skin_mesh(asset):
    """(palette (J, 4, 4) float32, joints, weights, positions, normals) of the asset's largest skinned
    primitive at its first clip's middle, or None when it has none with normals."""
    from ..playback import Player

    instances = [s for s in getattr(asset, "skinned_instances", []) if s.primitives
                 and s.primitives[0].source.normals is not None]
    if not instances:
        return None
    inst = max(instances, key=lambda s: s.primitives[0].source.vertex_count)
    prim = inst.primitives[0]
    player = Player(asset)
    if asset.clips:
        player.play(asset.clips[0].name).seek(asset.clips[0].duration / 2)
        player.update(0.0)
    palette = np.ascontiguousarray(player.palettes[inst.skin], dtype=np.float32)
    return (palette, np.ascontiguousarray(prim.joints), np.ascontiguousarray(prim.weights, np.float32),
            np.ascontiguousarray(prim.source.positions, np.float32),
            np.ascontiguousarray(prim.source.normals, np.float32))


def bench_rows(asset=None, clip=None, path=None, quick: bool = False) -> dict:
    """The rows (see the module docstring); ``quick`` runs fewer rounds."""
    from ..playback import Crowd, Player
    from ..playback import kernels as K
    from ..skinning.lbs import pack_palette, skin_into
    from . import stat

    if asset is None:
        from ..demo import demo_asset

        asset = demo_asset()
        clip = clip or asset.clips[0].name
    rounds = 7 if quick else 25
    rows = []
    # crowd, 1 thread: wide against per-instance, same offsets
    count = 1000
    offsets = np.random.default_rng(1).uniform(0, asset.clip(clip).duration, count)
    crowds = []
    for wide in (True, False):
        crowd = Crowd(asset, count, wide=wide)
        crowd.play(clip, offsets=offsets)
        crowds.append(crowd)
    load = load_average()
    wide_s, narrow_s = _one_thread(lambda: interleaved([lambda: crowds[0].update(1 / 60),
                                                         lambda: crowds[1].update(1 / 60)], rounds, 3))
    rate = [count / s for s in wide_s]
    base = float(np.median([count / s for s in narrow_s]))
    rows.append({
        "name": f"crowd {count} x {clip}, wide path, 1 thread (thread CPU)",
        "stat": stat(rate, "characters/s"),
        "baseline": f"per-instance kernel {base / 1e3:,.0f}k chars/s, interleaved; load {load:.1f}",
        "ratio": f"{np.median(rate) / base:.2f}x",
        "reference": f"ozz 0.16 {OZZ_CROWD[0] / 1e3:.0f}-{OZZ_CROWD[1] / 1e3:.0f}k; goal >= 1.2x ozz",
    })
    # one character: the Python call against the kernel alone
    player = Player(asset)
    player.play(clip)
    mixer = player.mixer
    player.update(1 / 60)
    frame = mixer.frame
    job, ik, call = frame.job, frame.ik, frame.call
    load = load_average()
    full_s, kernel_s = _one_thread(lambda: interleaved([lambda: (player.update(1 / 60), player.palettes),
                                                         lambda: call(job, ik, 1 / 60, K.ALL)], rounds, 300))
    us = [s * 1e6 for s in full_s]
    floor = float(np.median(kernel_s)) * 1e6
    rows.append({
        "name": "single character: Player.update + palettes, Python call included, 1 thread (thread CPU)",
        "stat": stat(us, "us"),
        "baseline": f"the compiled update alone {floor:.2f} us, interleaved; load {load:.1f}",
        "ratio": f"{np.median(us) / floor:.2f}x the kernel",
        "reference": f"ozz 0.16 {OZZ_SINGLE_US} us; goal <= 2 us (was 7.8)",
    })
    # skinning the model's mesh, 1 thread
    mesh = _skin_mesh(asset)
    if mesh is not None:
        palette, joints, weights, positions, normals = mesh
        packed = pack_palette(palette)
        out_p, out_n = np.empty_like(positions), np.empty_like(normals)

        def skin(mode):
            def run():
                pack_palette(palette, packed)
                skin_into(packed, joints, weights, positions, normals, None, out_p, out_n, normal_transform=mode)
            return run

        load = load_average()
        cof, lin = _one_thread(lambda: interleaved([skin("cofactor"), skin("linear")], rounds,
                                                    max(1, 200_000 // len(positions))))
        mv = [len(positions) / s / 1e6 for s in cof]
        lin_mv = float(np.median([len(positions) / s / 1e6 for s in lin]))
        rows.append({
            "name": f"skinning {len(positions):,} verts x4 (model mesh), pos + normals (default: cofactor), 1 thread",
            "stat": stat(mv, "M vertices/s"),
            "baseline": f"ozz's maths (linear normals) {lin_mv:.0f} Mverts/s, interleaved; load {load:.1f}",
            "ratio": f"{np.median(mv) / lin_mv:.2f}x",
            "reference": f"ozz 0.16 {OZZ_SKIN[0]:.0f}-{OZZ_SKIN[1]:.0f} Mverts/s; goal >= 1.0x ozz",
        })
    # 10,000 characters, every thread against one
    big = 2_000 if quick else 10_000
    crowd = Crowd(asset, big)
    crowd.play(clip, offsets=np.random.default_rng(2).uniform(0, asset.clip(clip).duration, big))
    threads = numba.get_num_threads()
    load = load_average()
    many, one = [], []
    crowd.update(1 / 60)
    for _ in range(max(3, rounds // 3)):
        many += interleaved([lambda: crowd.update(1 / 60)], 1, 3, clock=time.perf_counter)[0]
        one += _one_thread(lambda: interleaved([lambda: crowd.update(1 / 60)], 1, 3, clock=time.perf_counter)[0])
    ms = [s * 1e3 for s in many]
    one_ms = float(np.median(one)) * 1e3
    rows.append({
        "name": f"crowd frame, {big:,} x {clip}, {threads} threads (wall)",
        "stat": stat(ms, "ms"),
        "baseline": f"1 thread {one_ms:.1f} ms, interleaved; load {load:.1f} (meaningful below 1)",
        "ratio": f"{one_ms / np.median(ms):.2f}x",
        "reference": "goal <= 3 ms for 10,000 on 2 threads, idle machine (issue 33; was 4.4-4.7)",
    })
    return {"rows": rows}
