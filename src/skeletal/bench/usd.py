"""Benchmark row: USD load time next to the glTF load of the same character.

:func:`bench_usd_load` writes the bench model (``Soldier.glb`` when given, else the built-in character
as GLB) as ``.usdc`` (and ``.usda``) with :func:`skeletal.io.usd_write.write_usd` into a temporary
folder, then times ``skeletal.load`` of the GLB and of the USD files interleaved (A/B/C, A/B/C, ...
after a warm-up), so that load on a shared machine hits all alike. Each figure is the median of the
repeats in wall-clock, thread-CPU and process-CPU (usd-core's worker threads and the isolated reader's
child process included) milliseconds; the ``.usdc`` is also read in-process (``isolate=False``: the
cost of the child is the difference) and the share spent in usd-core's ``Usd.Stage.Open`` is measured
alone. Without usd-core the row is omitted with a note.

>>> bench_usd_load("Soldier.glb", repeats=5)["rows"][0]["name"]          # doctest: +SKIP
'load Soldier USD (usdc)'
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

__all__ = ["bench_rows", "bench_usd_load"]


def _stat(values: list[float], **extra) -> dict:
    return {"median": float(statistics.median(values)), "min": float(min(values)), "max": float(max(values)),
            "repeats": len(values), "unit": "ms", **extra}


def _process_cpu() -> float:
    """Seconds of CPU of this process and of its ended children (the isolated reader's)."""
    try:
        import resource
    except ImportError:
        return time.process_time()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def bench_usd_load(path: str | os.PathLike | None = None, repeats: int = 10, quick: bool = False) -> dict:
    """Time ``skeletal.load`` of a GLB and of the same character written as ``.usdc`` and ``.usda``.

    Returns ``{"rows": [...], "glb_load_ms": stat, "usdc_load_ms": stat, "usda_load_ms": stat,
    "usdc_thread_ms": stat, ..., "usdc_stage_open_ms": stat}`` (stat: median/min/max/repeats/unit), or
    ``{"rows": [], "note": ...}`` without usd-core. ``path``: a ``.glb`` (default: the built-in
    character); ``quick``: 3 repeats.
    """
    import skeletal

    try:
        from pxr import Usd
    except ImportError:
        return {"rows": [], "note": 'USD rows omitted: usd-core is not installed (pip install "skeletal[usd]")'}
    from ..tools.usd_write import write_usd
    from . import model_glb

    repeats = 3 if quick else max(1, int(repeats))
    folder = Path(tempfile.mkdtemp(prefix="skeletal-bench-usd-"))
    try:
        glb, label = model_glb(path, folder)
        asset = skeletal.load(glb)
        files = {"glb": glb}
        for suffix in ("usdc", "usda"):
            files[suffix] = folder / f"model.{suffix}"
            write_usd(asset, files[suffix])
        wall: dict[str, list[float]] = {k: [] for k in files}
        cpu: dict[str, list[float]] = {k: [] for k in files}
        proc: dict[str, list[float]] = {k: [] for k in files}
        for f in files.values():  # warm-up: imports, numba caches, the OS file cache
            skeletal.load(f)
        in_process: list[float] = []
        for _ in range(repeats):
            for k, f in files.items():
                w0, c0, p0 = time.perf_counter(), time.thread_time(), _process_cpu()
                skeletal.load(f)
                cpu[k].append((time.thread_time() - c0) * 1e3)
                proc[k].append((_process_cpu() - p0) * 1e3)
                wall[k].append((time.perf_counter() - w0) * 1e3)
            w0 = time.perf_counter()
            skeletal.load(files["usdc"], isolate=False)
            in_process.append((time.perf_counter() - w0) * 1e3)
        opens = []
        for _ in range(repeats):
            w0 = time.perf_counter()
            Usd.Stage.Open(str(files["usdc"]))
            opens.append((time.perf_counter() - w0) * 1e3)
        figures: dict = {}
        for k, f in files.items():
            figures[f"{k}_load_ms"] = _stat(wall[k], file=f.name, bytes=f.stat().st_size)
            figures[f"{k}_thread_ms"] = _stat(cpu[k])
            figures[f"{k}_process_cpu_ms"] = _stat(proc[k])  # usd-core's worker threads included
        figures["usdc_stage_open_ms"] = _stat(opens)
        figures["usdc_in_process_ms"] = _stat(in_process)
        base = figures["glb_load_ms"]["median"]
        rows = []
        for k in ("usdc", "usda"):
            st = figures[f"{k}_load_ms"]
            rows.append({"name": f"load {label} USD ({k})", "stat": st,
                         "baseline": f"GLB {base:.1f} ms",
                         "ratio": f"{st['median'] / base:.1f}x GLB",
                         "reference": f"thread CPU {figures[f'{k}_thread_ms']['median']:.1f} ms vs GLB "
                                      f"{figures['glb_thread_ms']['median']:.1f} ms, process CPU "
                                      f"{figures[f'{k}_process_cpu_ms']['median']:.1f} vs "
                                      f"{figures['glb_process_cpu_ms']['median']:.1f} ms"
                                      + (f"; isolate=False (no child) {figures['usdc_in_process_ms']['median']:.1f} ms"
                                         f", Usd.Stage.Open alone {figures['usdc_stage_open_ms']['median']:.1f} ms"
                                         if k == "usdc" else "")})
        return {"rows": rows, **figures}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def bench_rows(asset=None, clip=None, path: Path | None = None, quick: bool = False) -> dict:
    """``skeletal bench``'s USD rows: load time of the same character as .usdc/.usda next to its GLB."""
    return bench_usd_load(path, quick=quick)


if __name__ == "__main__":  # python -m skeletal.bench.usd [model.glb]
    import json
    import sys

    result = bench_usd_load(sys.argv[1] if len(sys.argv) > 1 else None)
    print(json.dumps(result, indent=1))
