"""Locomotion on a Crowd: what warping and the motion-matching controller cost per frame, against
the crowd's own update, in the same run.

``python -m skeletal.bench.crowd_locomotion [--count N] [--frames F] [--repeats R]`` builds four
crowds of ``N`` instances (default 1,000) of the built-in character's locomotion set
(:func:`skeletal.demo.locomotion_asset`) and steps them interleaved, ``F`` frames per turn, ``R``
turns:

* ``crowd update``: every instance playing ``walk_forward`` with root motion (the baseline);
* ``crowd + warping``: the same with a :class:`~skeletal.playback.locomotion.warping.Warping` of
  random per-instance stride (0.7..1.4) and angle (-0.3..0.3 rad);
* ``motion matching``: :class:`~skeletal.playback.locomotion.crowd_matching.CrowdMotionMatching` with
  random goals up to 1.5 m/s (searches staggered: a sixth of the crowd each frame, one call);
* ``motion matching + warping``: the same with ``warping=True``.

Printed per case: the median over turns of the calling thread's CPU time per frame
(``time.thread_time``: numba's other threads are not counted) and of the wall time, and the ratio to
the baseline's thread CPU time. The load average is printed with them.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any, Callable

import numpy as np


def _cases(count: int, seed: int = 1) -> dict[str, Callable[[], Callable[[float], Any]]]:
    import skeletal
    from ..demo import locomotion_asset
    from ..playback.locomotion import MatchingDatabase, MotionMatching, Warping
    from ..playback.rootmotion import RootMotion

    asset = locomotion_asset()
    db = MatchingDatabase.build(asset, exclude=("idle", "wave", "walk", "run"))
    rng = np.random.default_rng(seed)
    goals = rng.uniform(-1.5, 1.5, (count, 2))
    offsets = rng.uniform(0.0, 1.0, count)

    def plain() -> Callable[[float], Any]:
        crowd = skeletal.Crowd(asset, count)
        RootMotion(crowd, "root")
        crowd.play("walk_forward", offsets=offsets)
        return crowd.update

    def warped() -> Callable[[float], Any]:
        crowd = skeletal.Crowd(asset, count)
        RootMotion(crowd, "root")
        warp = Warping(crowd)
        warp.stride[:] = rng.uniform(0.7, 1.4, count)
        warp.angle[:] = rng.uniform(-0.3, 0.3, count)
        crowd.play("walk_forward", offsets=offsets)
        return crowd.update

    def matching(warping: bool) -> Callable[[], Callable[[float], Any]]:
        def make() -> Callable[[float], Any]:
            mm = MotionMatching(skeletal.Crowd(asset, count), db, warping=warping)
            mm.set_goal(goals)
            return mm.update
        return make

    return {"crowd update": plain, "crowd + warping": warped, "motion matching": matching(False),
            "motion matching + warping": matching(True)}


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(prog="python -m skeletal.bench.crowd_locomotion",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1000, help="instances per crowd")
    parser.add_argument("--frames", type=int, default=24, help="frames per turn")
    parser.add_argument("--repeats", type=int, default=5, help="turns (interleaved)")
    args = parser.parse_args(argv)
    import numba

    steps = {name: make() for name, make in _cases(max(args.count, 1)).items()}
    for step in steps.values():
        for _ in range(30):  # compiled and past the first searches
            step(1 / 60)
    cpu: dict[str, list[float]] = {name: [] for name in steps}
    wall: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(max(args.repeats, 1)):
        for name, step in steps.items():
            t, w = time.thread_time(), time.perf_counter()
            for _ in range(args.frames):
                step(1 / 60)
            cpu[name].append((time.thread_time() - t) / args.frames)
            wall[name].append((time.perf_counter() - w) / args.frames)
    print(f"locomotion on a crowd of {args.count}: per frame, {numba.config.NUMBA_NUM_THREADS} threads, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'case':>26} {'thread CPU ms':>13} {'ratio':>6} {'wall ms':>8}")
    base = float(np.median(cpu["crowd update"]))
    rows = []
    for name in steps:
        c, w = float(np.median(cpu[name])), float(np.median(wall[name]))
        rows.append(dict(case=name, cpu_ms=c * 1e3, wall_ms=w * 1e3, ratio=c / base))
        print(f"{name:>26} {c * 1e3:>13.2f} {c / base:>5.1f}x {w * 1e3:>8.2f}")
    return rows


if __name__ == "__main__":
    main()
