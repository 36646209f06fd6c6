"""Memory bandwidth by working-set size: the bounds the skinning figures are compared with.

    python benchmarks/bench_bandwidth.py [--quick]

A streaming triad ``a = b + s * c`` (numba, prange; 12 bytes per element: two reads and one write,
write-allocate not counted) over working sets from L1-sized to far beyond the last-level cache, on one
thread and on all, plus ``np.copyto`` (8 bytes per element). ``skeletal bench`` uses the triad at the
skinning mesh's own size (where its data actually lives) for ``skin_fraction_of_bandwidth`` and
reports the large-array figure next to it.
"""

from __future__ import annotations

import argparse
import sys

import numba

from skeletal.bench import measure_bandwidth, measure_copy_bandwidth


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    threads = numba.get_num_threads()
    sizes = [48 << 10, 1 << 20, 6_800_000, 64 << 20, 256 << 20] + ([] if args.quick else [1536 << 20])
    print(f"triad bandwidth, GB/s (median, min-max); {threads} threads available\n")
    print(f"{'working set':>12}  {'1 thread':>22}  {f'{threads} threads':>22}  {'np.copyto':>10}")
    for size in sizes:
        reps = 5 if size > (100 << 20) else 20
        cells = []
        for n in (1, threads):
            numba.set_num_threads(n)
            try:
                s = measure_bandwidth(size, reps)
            finally:
                numba.set_num_threads(threads)
            cells.append(f"{s['median']:6.1f} ({s['min']:.1f}-{s['max']:.1f})")
        copy = measure_copy_bandwidth(size, max(3, reps // 2))
        label = f"{size / 1e6:.1f} MB" if size >= 1e6 else f"{size / 1e3:.0f} kB"
        print(f"{label:>12}  {cells[0]:>22}  {cells[1]:>22}  {copy['median']:10.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
