"""Each bridge's per-frame cost against skeletal alone (skeletal.bench.bridges), as a Markdown table.

    python benchmarks/bench_bridges.py [MODEL] [--clip NAME] [--quick]
    xvfb-run python benchmarks/bench_bridges.py      # with the pyglet row
"""

from __future__ import annotations

import argparse
import os

from skeletal.bench import load_average
from skeletal.bench.bridges import bench_bridges, format_rows

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("model", nargs="?")
parser.add_argument("--clip")
parser.add_argument("--quick", action="store_true")
args = parser.parse_args()
os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
result = bench_bridges(args.model, args.clip, quick=args.quick)
print(format_rows(result))
print(f"\nload average {load_average():.2f} on {os.cpu_count()} CPUs")
