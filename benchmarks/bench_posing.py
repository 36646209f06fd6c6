"""Posing speed: crowds of N characters and one character, against plain numpy in the same run.

    python benchmarks/bench_posing.py [MODEL] [--counts 1,10,100,1000,10000] [--quick]

Each row: ``Crowd.update(1/60)`` (sample, blend, world matrices, palettes) for N instances of the
model's walk clip at random phases, against ``skeletal.bench.NumpyPoser`` (numpy vectorised over
instances: searchsorted, lerp, slerp, batched matmuls) at the same times; then one ``Player``
update + palettes against the same numpy code for one instance.
"""

from __future__ import annotations

import argparse
import statistics
import sys

import numpy as np

from skeletal.bench import NumpyPoser, make_crowd, resolve_model, time_samples, walk_clip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model", nargs="?")
    ap.add_argument("--counts", default="1,10,100,1000,10000")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    asset, label, _ = resolve_model(args.model)
    clip = walk_clip(asset)
    duration = asset.clip(clip).duration
    poser = NumpyPoser(asset, asset.clip(clip))
    print(f"{label}, clip {clip}: characters/s (median, min-max)\n")
    print(f"{'instances':>9}  {'skeletal':>26}  {'numpy':>24}  {'ratio':>6}")
    for count in (int(c) for c in args.counts.split(",")):
        offsets = np.random.default_rng(count).uniform(0, duration, count)
        crowd, kind = make_crowd(asset, count, clip, offsets)
        reps = max(5, min(300, int(3e5 // count))) // (5 if args.quick else 1)
        secs = time_samples(lambda: crowd.update(1 / 60), max(3, reps), warmup=3)
        t = offsets.copy()

        def numpy_step():
            t[:] += 1 / 60
            poser.update(t)

        base = time_samples(numpy_step, max(3, reps // 10), warmup=1)
        ours = [count / s for s in secs]
        theirs = [count / s for s in base]
        m, n = statistics.median(ours), statistics.median(theirs)
        print(f"{count:>9}  {m:>10,.0f} ({min(ours):,.0f}-{max(ours):,.0f})  {n:>10,.0f} ({min(theirs):,.0f}-{max(theirs):,.0f})"
              f"  {m / n:6.1f}")
    print(f"\n({kind})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
