"""Foot placement's cost against the plain update, interleaved in one process.

    PYTHONPATH=src python tools/foot_ratio.py [threads] [rounds]

Mixer of 100 Soldiers (foot placement on terrain) and one Player (foot placement on terrain + look-at),
each against the same update without the stages, in alternating blocks; per round the ratio. One
thread: thread CPU time (``time.thread_time``); more: wall time (``FOOT_CLOCK=process``: the process's CPU time, all
threads; with ``GOMP_SPINCOUNT=0`` a waiting thread burns none). Prints medians and ranges and the load.
"""

from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("SKELETAL_NO_FALLBACK", "1")

import numba
import numpy as np

import skeletal
import skeletal._threads as threads_module
from skeletal.playback.procedural import Procedural

GROUND = "terrain:amplitude=0.2,wavelength=3"


def walkers(asset, clip, count, stages=True):
    """A Mixer of ``count`` characters playing ``clip`` at random phases and, with ``stages``, foot
    placement on GROUND, placed at random: (mixer, its Procedural or None). Also the scene of
    tools/kernel_lines.py and tools/foot_parts.py."""
    m = skeletal.Mixer(asset, count, events=False)
    m.play(clip, offset=np.random.default_rng(0).uniform(0, asset.clip(clip).duration, count))
    proc = None
    if stages:
        proc = Procedural(m)
        proc.foot_placement(GROUND)
        proc.place(np.random.default_rng(1).uniform(-5, 5, (count, 3)), 0.0)
    return m, proc


def soldier():
    """Soldier.glb from ``SKELETAL_ASSETS`` (default: the shared assets)."""
    return skeletal.load(os.path.join(os.environ.get("SKELETAL_ASSETS", "/work/shared/assets"), "Soldier.glb"))


def planned_walkers(count=100):
    """Soldier's Walk on :func:`walkers`, 30 frames in (the frame planned): (asset, count, the plan's
    FootFrame, whose ``update_job`` and ``foot_job`` phase 3 runs on)."""
    asset = soldier()
    m, proc = walkers(asset, "Walk", count)
    for _ in range(30):
        m.update(1 / 60)
    return asset, count, proc._plan.one_call


def mixer(asset, clip, count, stages):
    m, _ = walkers(asset, clip, count, stages)
    return lambda: m.update(1 / 60)


def player(asset, clip, stages):
    p = skeletal.Player(asset)
    p.play(clip)
    if stages:
        proc = Procedural(p)
        proc.foot_placement(GROUND)
        proc.look_at((0.5, 1.5, 2.0))
    return lambda: p.update(1 / 60)


def interleaved(base, other, n, rounds, clock):
    for _ in range(20):
        base()
        other()
    xs, ys = [], []
    for _ in range(rounds):
        for f, out in ((base, xs), (other, ys)):
            t0 = clock()
            for _ in range(n):
                f()
            out.append((clock() - t0) / n)
    return np.array(xs), np.array(ys)


def main() -> None:
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    threads_module._NO_CAP = True
    numba.set_num_threads(threads)
    clock = time.thread_time if threads == 1 else time.perf_counter
    if os.environ.get("FOOT_CLOCK") == "process":  # both threads' CPU (with GOMP_SPINCOUNT=0: no spinning)
        clock = time.process_time
    asset = soldier()
    clip = "Walk"
    rows = []
    xs, ys = interleaved(mixer(asset, clip, 100, False), mixer(asset, clip, 100, True), 60, rounds, clock)
    rows.append(("Mixer of 100, per character", xs / 100, ys / 100))
    xs, ys = interleaved(player(asset, clip, False), player(asset, clip, True), 600, rounds, clock)
    rows.append(("Player + terrain + look-at", xs, ys))
    print(f"threads {threads}, clock {clock.__name__}, load {os.getloadavg()}")
    for name, x, y in rows:
        r = y / x
        print(f"{name}: update {np.median(x) * 1e6:.3f} us, with stages {np.median(y) * 1e6:.3f} us, stage "
              f"{np.median(y - x) * 1e6:.3f} us; ratio median {np.median(r):.3f} range {r.min():.3f}-{r.max():.3f}")


if __name__ == "__main__":
    main()
