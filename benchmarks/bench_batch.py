"""Batch throughput: files per second for ``bake`` over a generated folder, in the same run:

* serial: a plain Python loop calling the bake job on each file in this process (what a script
  without skeletal.batch would do);
* pool: ``run_batch(executor="pool")``, a local process pool (start-up included: the pool is made
  per batch);
* ray: ``run_batch(executor="ray")`` on a local Ray runtime (``ray.init(num_cpus=WORKERS)`` made
  before timing; the first batch includes the Ray workers' start-up, the second reuses them).

    python benchmarks/bench_batch.py [--files 200] [--workers 2] [--chunk 4] [--json FILE]

The folder is made by tests/fixtures/batch_folder.py (BVH files of a 5-joint chain and
skeleton-only GLB files, 40 frames each, 3 of them broken and reported as failures).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--chunk", type=int, default=4)
    parser.add_argument("--no-ray", action="store_true")
    parser.add_argument("--json", dest="json_path")
    args = parser.parse_args(argv)

    from fixtures.batch_folder import make_folder

    from skeletal.batch import find_inputs, output_path, ray_available, run_batch
    from skeletal.batch.jobs import bake_job

    work = Path(tempfile.mkdtemp(prefix="skeletal-bench-batch-"))
    try:
        make_folder(work / "in", count=args.files)
        files, base = find_inputs(work / "in")
        results = {}

        # serial: a plain loop (the first file also loads the numba kernels, as in any fresh script)
        out = work / "serial"
        start = time.perf_counter()
        ok = 0
        for f in files:
            try:
                bake_job(str(f), str(output_path(f, base, out, "bake")), {})
                ok += 1
            except Exception:  # the broken files
                pass
        seconds = time.perf_counter() - start
        results["serial"] = {"files_per_s": len(files) / seconds, "seconds": seconds, "ok": ok}

        for run in (1, 2):
            s = run_batch("bake", work / "in", work / f"pool{run}", executor="pool", workers=args.workers,
                          chunk=args.chunk, report=None)
            results[f"pool (run {run})"] = {"files_per_s": s.files_per_second, "seconds": s.seconds, **s.counts}

        if not args.no_ray and ray_available():
            import ray

            ray.init(num_cpus=args.workers, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
            try:
                for run in (1, 2):
                    s = run_batch("bake", work / "in", work / f"ray{run}", executor="ray", chunk=args.chunk, report=None)
                    results[f"ray local (run {run})"] = {"files_per_s": s.files_per_second, "seconds": s.seconds,
                                                         **s.counts}
            finally:
                ray.shutdown()

        serial = results["serial"]["files_per_s"]
        print(f"bake over {len(files)} generated files ({args.workers} workers, chunk {args.chunk}, "
              f"{os.cpu_count()} CPUs)")
        print(f"{'executor':<20} {'files/s':>8} {'seconds':>8} {'vs serial':>9}")
        for name, r in results.items():
            print(f"{name:<20} {r['files_per_s']:>8.1f} {r['seconds']:>8.2f} {r['files_per_s'] / serial:>8.2f}x")
        if args.json_path:
            Path(args.json_path).write_text(json.dumps(results, indent=2) + "\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
