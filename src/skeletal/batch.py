"""``skeletal batch``: one per-file job (:mod:`skeletal.jobs`) over many files, serially, on a local
process pool (the default) or on a Ray cluster.

* Inputs: a folder (every ``.glb``/``.gltf``/``.bvh`` below it, recursively) or a glob pattern
  (``"mocap/**/*.bvh"``). Outputs go to ``out_dir`` under the same relative path with the job's
  suffix (``walk.bvh`` -> ``walk.npz`` for ``bake``).
* Resumable: a file whose output exists and is newer than its input is skipped (``force`` redoes it).
* Failures do not stop the batch: each file's status, time and error message go to a JSON report
  (default ``out_dir/batch-report.json``); a summary table counts ok / failed / skipped.
* Executors: ``"serial"`` (this process), ``"pool"`` (``concurrent.futures`` processes started by a
  forkserver that has skeletal imported; one numba thread per worker), ``"ray"`` (one Ray task per
  chunk of files; ``ray_address`` None starts or joins a local runtime, ``"auto"`` joins the running
  cluster, anything else is a cluster address). With Ray, every worker must see the input and output
  paths (a shared file system) and have skeletal installed.

>>> summary = run_batch("bake", "mocap/", "baked/", executor="pool")     # doctest: +SKIP
>>> summary.counts                                                      # doctest: +SKIP
{'ok': 47, 'failed': 3, 'skipped': 0}
"""

from __future__ import annotations

import glob
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from .errors import SkeletalError
from .jobs import JOBS, OUTPUT_SUFFIX, FileResult, Task, run_chunk, run_task

__all__ = ["run_batch", "find_inputs", "plan_tasks", "BatchSummary", "BatchError", "MODEL_SUFFIXES",
           "RAY_MISSING"]

MODEL_SUFFIXES = (".glb", ".gltf", ".bvh")
RAY_MISSING = "Ray is not installed: pip install 'skeletal[ray]'"
REPORT_NAME = "batch-report.json"


class BatchError(SkeletalError):
    """A batch that cannot start (no inputs, bad command, Ray missing or unreachable)."""


@dataclass
class BatchSummary:
    """The outcome of :func:`run_batch`: one :class:`~skeletal.jobs.FileResult` per input file."""

    command: str
    executor: str
    results: list[FileResult]
    seconds: float
    report: str | None = None
    workers: int = 1
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def counts(self) -> dict[str, int]:
        out = {"ok": 0, "failed": 0, "skipped": 0}
        for r in self.results:
            out[r.status] += 1
        return out

    @property
    def failed(self) -> list[FileResult]:
        return [r for r in self.results if r.status == "failed"]

    @property
    def files_per_second(self) -> float:
        done = sum(1 for r in self.results if r.status != "skipped")
        return done / self.seconds if self.seconds > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"command": self.command, "executor": self.executor, "workers": self.workers,
                "seconds": self.seconds, "files_per_second": self.files_per_second, "counts": self.counts,
                **self.extra, "files": [r.to_json() for r in self.results]}

    def table(self) -> str:
        """The summary as a small text table."""
        c = self.counts
        rows = [("files", str(len(self.results))), ("ok", str(c["ok"])), ("failed", str(c["failed"])),
                ("skipped", str(c["skipped"])), ("seconds", f"{self.seconds:.2f}"),
                ("files/s", f"{self.files_per_second:.1f}"), ("executor", f"{self.executor} ({self.workers} workers)")]
        width = max(len(k) for k, _ in rows)
        lines = [f"skeletal batch {self.command}"] + [f"  {k:<{width}}  {v}" for k, v in rows]
        for r in self.failed[:10]:
            lines.append(f"  failed: {r.source}: {r.error}")
        if len(self.failed) > 10:
            lines.append(f"  ... and {len(self.failed) - 10} more failures (see the report)")
        if self.report:
            lines.append(f"  report: {self.report}")
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# planning


def find_inputs(folder_or_glob: str | os.PathLike) -> tuple[list[Path], Path]:
    """The input files (sorted) and the base folder their output paths are relative to.

    A folder gives every file with a :data:`MODEL_SUFFIXES` suffix below it (recursively); anything
    else is a glob pattern (``**`` recurses) whose matching files are taken whatever their suffix,
    relative to the pattern's folder part before the first wildcard."""
    text = os.fspath(folder_or_glob)
    path = Path(text)
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in MODEL_SUFFIXES
                       and not p.name.startswith("."))
        return files, path
    files = sorted(Path(p) for p in glob.glob(text, recursive=True) if Path(p).is_file())
    parts = Path(text).parts
    fixed = []
    for part in parts:
        if any(ch in part for ch in "*?["):
            break
        fixed.append(part)
    base = Path(*fixed) if fixed else Path(".")
    if len(fixed) == len(parts):  # a plain file name
        base = path.parent
    return files, base


def output_path(source: Path, base: Path, out_dir: Path, command: str) -> Path:
    """``out_dir / (source relative to base)`` with the command's suffix."""
    try:
        rel = source.resolve().relative_to(base.resolve())
    except ValueError:
        rel = Path(source.name)
    return (out_dir / rel).with_suffix(OUTPUT_SUFFIX[command])


def is_up_to_date(source: Path, output: Path) -> bool:
    """The output exists and is at least as new as its input."""
    try:
        return output.stat().st_mtime >= source.stat().st_mtime
    except OSError:
        return False


def plan_tasks(command: str, inputs: Iterable[Path], base: Path, out_dir: Path, options: dict[str, Any],
               force: bool = False) -> tuple[list[Task], list[FileResult]]:
    """Tasks to run, and skipped results for inputs whose outputs are up to date (unless ``force``)."""
    tasks, skipped = [], []
    for source in inputs:
        out = output_path(source, base, out_dir, command)
        if not force and is_up_to_date(source, out):
            skipped.append(FileResult(str(source), str(out), "skipped", 0.0, None, {"reason": "output is up to date"}))
        else:
            tasks.append(Task(command, str(source), str(out), dict(options)))
    return tasks, skipped


# ---------------------------------------------------------------------------------------------
# executors


def _chunks(tasks: list[Task], size: int) -> list[list[Task]]:
    return [tasks[i:i + size] for i in range(0, len(tasks), size)]


def _run_serial(tasks: list[Task], workers: int) -> Iterator[list[FileResult]]:
    for task in tasks:
        yield [run_task(task)]


def _init_worker() -> None:
    # One numba thread per worker process: the pool already uses every core.
    try:
        import numba

        numba.set_num_threads(1)
    except Exception:  # noqa: BLE001 - only a speed matter
        pass


def _pool_context():
    import multiprocessing

    if sys.platform.startswith("linux") and "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        # Children fork from a server that has skeletal (and numba) imported but never ran a kernel.
        ctx.set_forkserver_preload(["skeletal.jobs", "skeletal.asset", "skeletal.bake", "skeletal.export"])
        return ctx
    return multiprocessing.get_context("spawn")


def _run_pool(tasks: list[Task], workers: int, chunk: int) -> Iterator[list[FileResult]]:
    from concurrent.futures import ProcessPoolExecutor, as_completed

    with ProcessPoolExecutor(max_workers=workers, mp_context=_pool_context(), initializer=_init_worker) as pool:
        futures = {pool.submit(run_chunk, c): c for c in _chunks(tasks, chunk)}
        for future in as_completed(futures):
            try:
                yield future.result()
            except Exception as exc:  # a worker died (killed, out of memory): its files fail, the rest go on
                yield [FileResult(t.source, t.output, "failed", 0.0, f"worker died: {type(exc).__name__}: {exc}")
                       for t in futures[future]]


def ray_available() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


def _run_ray(tasks: list[Task], address: str | None, chunk: int) -> Iterator[list[FileResult]]:
    try:
        import ray
    except ImportError:
        raise BatchError(RAY_MISSING) from None
    if not ray.is_initialized():
        try:
            if address in (None, "", "local"):
                ray.init(include_dashboard=False, logging_level="ERROR", log_to_driver=False)
            else:
                ray.init(address=address, logging_level="ERROR", log_to_driver=False)
        except Exception as exc:  # noqa: BLE001 - connection problems are the user's to fix
            raise BatchError(f"cannot start or reach Ray at {address or 'a local runtime'}: "
                             f"{' '.join(str(exc).split())}") from None
    remote = ray.remote(num_cpus=1, max_retries=1)(run_chunk)
    pending = {remote.remote(c): c for c in _chunks(tasks, chunk)}
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        for ref in done:
            group = pending.pop(ref)
            try:
                yield ray.get(ref)
            except Exception as exc:  # noqa: BLE001 - a lost worker or node: report its files
                yield [FileResult(t.source, t.output, "failed", 0.0,
                                  f"ray task failed: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}")
                       for t in group]


class _Progress:
    """tqdm when installed, else a line on stderr every few percent."""

    def __init__(self, total: int, label: str, enabled: bool):
        self.total, self.label, self.enabled, self.done, self._bar, self._last = total, label, enabled, 0, None, -1
        if enabled and total:
            try:
                from tqdm import tqdm

                self._bar = tqdm(total=total, desc=label, unit="file", file=sys.stderr, dynamic_ncols=True)
            except ImportError:
                pass

    def update(self, n: int, failed: int) -> None:
        self.done += n
        if self._bar is not None:
            self._bar.set_postfix(failed=failed, refresh=False)
            self._bar.update(n)
        elif self.enabled and self.total:
            percent = 100 * self.done // self.total
            if percent // 10 != self._last // 10 or self.done == self.total:
                self._last = percent
                print(f"{self.label}: {self.done}/{self.total} files ({percent}%), {failed} failed",
                      file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def run_batch(
    command: str,
    inputs: str | os.PathLike | list[str | os.PathLike],
    out_dir: str | os.PathLike,
    *,
    options: dict[str, Any] | None = None,
    executor: str = "pool",
    workers: int | None = None,
    ray_address: str | None = None,
    chunk: int = 1,
    force: bool = False,
    report: str | os.PathLike | None = "",
    progress: bool = False,
    on_result: Callable[[FileResult], None] | None = None,
) -> BatchSummary:
    """Run ``command`` (a key of :data:`skeletal.jobs.JOBS`) on every input file.

    ``inputs``: a folder, a glob pattern or a list of files. ``executor``: ``"serial"``, ``"pool"``
    (``workers`` processes, default the CPU count) or ``"ray"`` (``ray_address``; see the module
    docstring). ``chunk`` files go to a worker at a time. ``report``: the JSON report's path, ``""``
    for ``out_dir/batch-report.json``, None for none. Results come back in input order."""
    if command not in JOBS:
        raise BatchError(f"unknown batch command {command!r} (one of {', '.join(JOBS)})")
    if executor not in ("serial", "pool", "ray"):
        raise BatchError(f"unknown executor {executor!r} (serial, pool or ray)")
    if executor == "ray" and not ray_available():
        raise BatchError(RAY_MISSING)
    out = Path(out_dir)
    if isinstance(inputs, (list, tuple)):
        files = [Path(p) for p in inputs]
        base = Path(os.path.commonpath([str(p.resolve().parent) for p in files])) if files else Path(".")
        label = f"{len(files)} files"
    else:
        files, base = find_inputs(inputs)
        label = os.fspath(inputs)
    if not files:
        raise BatchError(f"{label}: no input files found")
    out.mkdir(parents=True, exist_ok=True)
    workers = max(1, int(workers or os.cpu_count() or 1))
    chunk = max(1, int(chunk))
    tasks, skipped = plan_tasks(command, files, base, out, options or {}, force)

    start = time.perf_counter()
    results: dict[str, FileResult] = {r.source: r for r in skipped}
    bar = _Progress(len(tasks), f"{command}", progress)
    failed = 0
    if tasks:
        if executor == "serial":
            stream = _run_serial(tasks, 1)
            workers = 1
        elif executor == "pool":
            workers = min(workers, len(tasks))
            stream = _run_pool(tasks, workers, chunk)
        else:
            stream = _run_ray(tasks, ray_address, chunk)
        try:
            for group in stream:
                for r in group:
                    results[r.source] = r
                    failed += r.status == "failed"
                    if on_result is not None:
                        on_result(r)
                bar.update(len(group), failed)
        finally:
            bar.close()
    if executor == "ray":
        import ray

        workers = int(ray.cluster_resources().get("CPU", 1)) if ray.is_initialized() else workers
    seconds = time.perf_counter() - start
    ordered = [results[str(p)] for p in files]
    summary = BatchSummary(command, executor, ordered, seconds, None, workers,
                           {"inputs": label, "out": str(out), "options": _jsonable(options or {})})
    if report is not None:
        path = Path(report) if report != "" else out / REPORT_NAME
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(summary.to_json(), indent=2), encoding="utf-8")
        summary.report = str(path)
    return summary


def _jsonable(options: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(options, default=str))
