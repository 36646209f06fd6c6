"""``skeletal batch``: one per-file job (:mod:`skeletal.jobs`) over many files, serially, on a local
process pool (the default) or on a Ray cluster.

* Inputs: a folder (every file below it, recursively, with a suffix :func:`skeletal.load` reads:
  glTF, BVH, FBX, Collada and the other Assimp formats, ...; symbolic links that lead out of the
  folder are skipped unless ``follow_symlinks``) or a glob pattern (``"mocap/**/*.bvh"``). Outputs go to ``out_dir`` under the same relative path with the job's
  suffix (``walk.bvh`` -> ``walk.npz`` for ``bake``).
* Resumable: a file whose output exists and is newer than its input is skipped (``force`` redoes it).
* Failures do not stop the batch: each file's status, time and error message go to a JSON report
  (default ``out_dir/batch-report.json``), rewritten as files finish (an interrupted run keeps what
  it did; ``"complete": false`` until the end); a summary table counts ok / failed / skipped.
* Survives anything: every file runs in a supervised worker process (:mod:`skeletal.workers`) under
  a per-file wall-clock ``timeout``, CPU time and ``memory`` limit; a file that crashes, exhausts or
  hangs its worker is reported failed with the reason (``"worker died: SIGSEGV"``, ``"timed out"``)
  and the worker is replaced - with the pool, ``serial`` (one worker) and Ray alike.
  Error messages name the file and the object at fault; they are cleaned of control characters and
  long quoted excerpts so that a report never carries the bytes of a file.
* Executors: ``"serial"`` (one supervised worker, one file after another), ``"pool"`` (``workers``
  supervised processes started by a forkserver that has skeletal imported; one numba thread per
  worker), ``"ray"`` (one Ray task per chunk of files, each running its files in a supervised worker; ``ray_address`` None starts or joins a local runtime, ``"auto"`` joins the running
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
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from ..asset import model_suffix, model_suffixes
from ..errors import SkeletalError
from .jobs import CONFINE_OPTION, JOBS, OUTPUT_SUFFIX, FileResult, Task, run_task
from ..shown import shown
from .workers import DEFAULT_MEMORY, DEFAULT_TIMEOUT, TaskLimits, WorkerPool, run_chunk_supervised

__all__ = ["run_batch", "find_inputs", "plan_tasks", "BatchSummary", "BatchError", "MODEL_SUFFIXES",
           "RAY_MISSING"]

#: Every suffix :func:`skeletal.load` reads (from :func:`skeletal.asset.model_suffixes`).
MODEL_SUFFIXES = model_suffixes()
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
        for r in self.failed[:10]:  # file names are shown escaped: a newline in one forges no line here
            lines.append(f"  failed: {shown(r.source)}: {shown(r.error)}")
        for r in [r for r in self.results if r.status == "skipped" and r.details.get("reason", "").startswith("a folder")][:10]:
            lines.append(f"  skipped: {shown(r.source)}: {r.details['reason']}")
        if len(self.failed) > 10:
            lines.append(f"  ... and {len(self.failed) - 10} more failures (see the report)")
        if self.report:
            lines.append(f"  report: {shown(self.report)}")
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# planning


def find_inputs(folder_or_glob: str | os.PathLike, follow_symlinks: bool = False, *,
                exclude: str | os.PathLike | None = None,
                folders: list[Path] | None = None) -> tuple[list[Path], Path]:
    """The input files (sorted) and the base folder their output paths are relative to.

    A folder gives every regular file with a :data:`MODEL_SUFFIXES` suffix below it (recursively;
    names starting with ``.`` skipped); a symbolic link (to a file or a folder) is taken only when it
    resolves inside the folder, unless ``follow_symlinks``. Anything else is a glob pattern (``**``
    recurses) whose matching files are taken whatever their suffix, relative to the pattern's folder
    part before the first wildcard. Nothing under ``exclude`` (the batch's output folder) is taken;
    folders named like a model (``folder.glb``) are appended to ``folders`` when given."""
    text = os.fspath(folder_or_glob)
    path = Path(text)
    skip = os.path.realpath(exclude) if exclude is not None else None
    if path.is_dir():
        return _walk(path, follow_symlinks, skip, folders), path
    files = sorted(Path(p) for p in glob.glob(text, recursive=True)
                   if Path(p).is_file() and not (skip and _inside(os.path.realpath(p), skip)))
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


def _inside(real: str, root: str) -> bool:
    try:
        return os.path.commonpath([real, root]) == root
    except ValueError:
        return False


def _walk(root: Path, follow_symlinks: bool, exclude: str | None = None,
          folders: list[Path] | None = None) -> list[Path]:
    real_root = os.path.realpath(root)
    files = []
    seen = {real_root}
    for folder, dirs, names in os.walk(root, followlinks=True):
        kept = []
        for d in dirs:  # links to folders: inside the root (or allowed), and each real folder once
            full = os.path.join(folder, d)
            real = os.path.realpath(full)
            if d.startswith(".") or real in seen:
                continue
            if exclude is not None and _inside(real, exclude):  # the output folder: never read back
                continue
            if folders is not None and model_suffix(d) in MODEL_SUFFIXES:
                folders.append(Path(full))  # a folder named like a model: reported as skipped
            if os.path.islink(full) and not follow_symlinks and not _inside(real, real_root):
                continue
            seen.add(real)
            kept.append(d)
        dirs[:] = kept
        for name in names:
            if name.startswith(".") or model_suffix(name) not in MODEL_SUFFIXES:
                continue
            full = os.path.join(folder, name)
            if not os.path.isfile(full):  # FIFOs, devices, sockets, broken links
                continue
            if not follow_symlinks and not _inside(os.path.realpath(full), real_root):
                continue
            files.append(Path(full))
    return sorted(files)


def output_path(source: Path, base: Path, out_dir: Path, command: str) -> Path:
    """``out_dir / (source relative to base)`` with the command's suffix. The path as walked, links
    not followed: a link inside the folder writes its own output, not its target's."""
    try:
        rel = Path(os.path.abspath(source)).relative_to(os.path.abspath(base))
    except ValueError:
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
    """Tasks to run, and skipped results for inputs whose outputs are up to date (unless ``force``).

    Inputs that would write the same output (``walk.bvh`` and ``walk.glb`` both to ``walk.npz``) are
    not run: each is a failed result naming the other, so that no result overwrites another."""
    tasks, skipped = [], []
    inputs = list(inputs)
    outputs = [output_path(source, base, out_dir, command) for source in inputs]
    writers: dict[Path, list[Path]] = {}
    for source, out in zip(inputs, outputs):
        writers.setdefault(out, []).append(source)
    for source, out in zip(inputs, outputs):
        others = [p.name for p in writers[out] if p != source]
        if others:
            skipped.append(FileResult(str(source), str(out), "failed", 0.0,
                                      f"BatchError: {source.name} and {', '.join(others)} would both write "
                                      f"{out.name}: rename one of them (or run them in separate batches)"))
            continue
        if not force and is_up_to_date(source, out):
            skipped.append(FileResult(str(source), str(out), "skipped", 0.0, None, {"reason": "output is up to date"}))
        else:
            tasks.append(Task(command, str(source), str(out), dict(options)))
    return tasks, skipped


# ---------------------------------------------------------------------------------------------
# executors


def _chunks(tasks: list[Task], size: int) -> list[list[Task]]:
    return [tasks[i:i + size] for i in range(0, len(tasks), size)]


def _run_local(tasks: list[Task], workers: int, limits: TaskLimits) -> Iterator[list[FileResult]]:
    with WorkerPool(workers, limits) as pool:
        for result in pool.run(tasks):
            yield [result]


def _run_in_process(tasks: list[Task]) -> Iterator[list[FileResult]]:
    for task in tasks:
        yield [run_task(task)]


def ray_available() -> bool:
    try:
        import ray  # noqa: F401 - imported only to learn whether it is installed
    except ImportError:
        return False
    return True


def _run_ray(tasks: list[Task], address: str | None, chunk: int, limits: TaskLimits) -> Iterator[list[FileResult]]:
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
        except Exception as exc:  # connection problems are the user's to fix
            raise BatchError(f"cannot start or reach Ray at {address or 'a local runtime'}: "
                             f"{' '.join(str(exc).split())}") from None
    remote = ray.remote(num_cpus=1, max_retries=1)(run_chunk_supervised)
    pending = {remote.remote(c, limits): c for c in _chunks(tasks, chunk)}
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        for ref in done:
            group = pending.pop(ref)
            try:
                yield ray.get(ref)
            except Exception as exc:  # a lost worker or node: report its files
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
    timeout: float = DEFAULT_TIMEOUT,
    memory: int | None = DEFAULT_MEMORY,
    cpu: float | None = None,
    follow_symlinks: bool = False,
    isolate: bool = True,
) -> BatchSummary:
    """Run ``command`` (a key of :data:`skeletal.jobs.JOBS`) on every input file.

    ``inputs``: a folder, a glob pattern or a list of files. ``executor``: ``"serial"``, ``"pool"``
    (``workers`` processes, default the CPU count) or ``"ray"`` (``ray_address``; see the module
    docstring). ``chunk`` files go to a Ray task at a time. ``report``: the JSON report's path, ``""``
    for ``out_dir/batch-report.json``, None for none; it is rewritten as files finish. Results come
    back in input order.

    Per-file limits: ``timeout`` wall-clock seconds, ``cpu`` CPU seconds (default ``timeout``),
    ``memory`` bytes beyond the worker's own (None: unlimited). ``follow_symlinks``: take links that
    lead out of an input folder. ``isolate=False`` runs ``serial`` in this process (no limits; a
    crashing file then ends the batch: for debugging only)."""
    if command not in JOBS:
        raise BatchError(f"unknown batch command {command!r} (one of {', '.join(JOBS)})")
    if executor not in ("serial", "pool", "ray"):
        raise BatchError(f"unknown executor {executor!r} (serial, pool or ray)")
    if executor == "ray" and not ray_available():
        raise BatchError(RAY_MISSING)
    out = Path(out_dir)
    folders: list[Path] = []
    if isinstance(inputs, (list, tuple)):
        files = [Path(p) for p in inputs]
        base = Path(os.path.commonpath([str(p.resolve().parent) for p in files])) if files else Path(".")
        label = f"{len(files)} files"
    else:
        files, base = find_inputs(inputs, follow_symlinks, exclude=out, folders=folders)
        label = os.fspath(inputs)
    if not files:
        raise BatchError(f"{label}: no input files found")
    out.mkdir(parents=True, exist_ok=True)
    workers = max(1, int(workers or os.cpu_count() or 1))
    chunk = max(1, int(chunk))
    task_options = dict(options or {})
    if not follow_symlinks and not isinstance(inputs, (list, tuple)) and Path(inputs).is_dir():
        # the worker checks again what it opens: a file swapped for a link after the walk is refused
        task_options[CONFINE_OPTION] = os.path.realpath(inputs)
    tasks, skipped = plan_tasks(command, files, base, out, task_options, force)
    skipped += [FileResult(str(p), "", "skipped", 0.0, None, {"reason": "a folder, not a model file"}) for p in folders]
    files = files + folders

    limits = TaskLimits(timeout=float(timeout), cpu=cpu, memory=None if memory is None else int(memory))
    report_path = None if report is None else (Path(report) if report != "" else out / REPORT_NAME)

    start = time.perf_counter()
    results: dict[str, FileResult] = {r.source: r for r in skipped}
    extra = {"inputs": label, "out": str(out), "options": _jsonable(options or {}),
             "limits": {"timeout": limits.timeout, "cpu": limits.cpu_seconds(), "memory": limits.memory}}

    def summary(complete: bool) -> BatchSummary:
        ordered = [results[str(p)] for p in files if str(p) in results]
        done = BatchSummary(command, executor, ordered, time.perf_counter() - start, None, workers,
                            {**extra, "complete": complete})
        if report_path is not None:
            _write_report(report_path, done)
            done.report = str(report_path)
        return done

    bar = _Progress(len(tasks), f"{command}", progress)
    failed = 0
    last_write = time.perf_counter()
    complete = False
    try:
        if tasks:
            if executor == "serial":
                workers = 1
                stream = _run_local(tasks, 1, limits) if isolate else _run_in_process(tasks)
            elif executor == "pool":
                workers = min(workers, len(tasks))
                stream = _run_local(tasks, workers, limits)
            else:
                stream = _run_ray(tasks, ray_address, chunk, limits)
            try:
                for group in stream:
                    for r in group:
                        r.error = clean_message(r.error)
                        results[r.source] = r
                        failed += r.status == "failed"
                        if on_result is not None:
                            on_result(r)
                    bar.update(len(group), failed)
                    if report_path is not None and time.perf_counter() - last_write > 1.0:
                        summary(False)  # the report as it stands: an interrupted run keeps it
                        last_write = time.perf_counter()
            finally:
                bar.close()
                close = getattr(stream, "close", None)
                if close is not None:
                    close()
        complete = True
    finally:
        if executor == "ray":
            try:
                import ray

                workers = int(ray.cluster_resources().get("CPU", 1)) if ray.is_initialized() else workers
            except Exception:  # only the figure in the report
                pass
        final = summary(complete)
    return final


def _write_report(path: Path, summary: BatchSummary) -> None:
    """The JSON report, written to a temporary name and renamed (never half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.part")
    tmp.write_text(json.dumps(summary.to_json(), indent=2), encoding="utf-8")
    os.replace(tmp, path)


_QUOTED = re.compile(r"(['\"])([^'\"]{%d,})\1" % 81)


def clean_message(message: str | None) -> str | None:
    """A failure message fit for a report or a terminal: control characters (terminal escapes)
    shown as escapes (:func:`skeletal.shown.shown`), quoted excerpts longer than 80 characters cut, at
    most 400 characters. Readers quote object names and format signatures, not content; this bounds
    what a hostile file could inject."""
    if message is None:
        return None
    text = shown(" ".join(message.split()))
    text = _QUOTED.sub(lambda m: f"{m.group(1)}{m.group(2)[:40]}...{m.group(1)}", text)
    return text if len(text) <= 400 else text[:397] + "..."


def _jsonable(options: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(options, default=str))
