"""Supervised worker processes for ``skeletal batch``: a file that crashes, exhausts or hangs its
worker costs that file, never the batch.

Each worker is a separate process (forked from a forkserver that has skeletal imported) that runs
one :class:`~skeletal.jobs.Task` at a time under per-file limits (:class:`TaskLimits`):

* memory: ``RLIMIT_AS`` set before each file to the worker's current address space plus ``memory``
  bytes (Python's allocations then fail with MemoryError; a C library's with ``bad_alloc``), and
  lifted again after it;
* CPU time: ``RLIMIT_CPU`` set to the worker's CPU time so far plus ``cpu`` seconds (the kernel ends
  the worker with SIGXCPU past it);
* wall clock: the supervisor kills a worker whose file takes longer than ``timeout`` seconds.

A worker that dies (a signal, a limit, an exit) is replaced by a fresh one; its file is reported
failed with the reason (``"worker died: SIGSEGV"``), and every other file goes on. Workers stay warm
between files (numba's kernels compiled once per worker), so the isolation costs one message round
trip per file.

>>> from skeletal.jobs import Task
>>> with WorkerPool(1, TaskLimits(timeout=60)) as pool:         # doctest: +SKIP
...     results = list(pool.run([Task("info", "a.glb", "a.json")]))
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections import deque
from dataclasses import dataclass
from typing import Iterable, Iterator

from .jobs import FileResult, Task, run_task

__all__ = ["TaskLimits", "WorkerPool", "run_chunk_supervised", "DEFAULT_TIMEOUT", "DEFAULT_MEMORY"]

#: Wall-clock seconds one file may take by default.
DEFAULT_TIMEOUT = 600.0
#: Bytes of address space one file may add to its worker by default.
DEFAULT_MEMORY = 4 << 30
#: Seconds a new worker may take to start (a cold forkserver imports skeletal and numba first).
START_TIMEOUT = 600.0


@dataclass(frozen=True)
class TaskLimits:
    """Per-file bounds: ``timeout`` wall-clock seconds, ``cpu`` CPU seconds (default ``timeout``),
    ``memory`` bytes of address space beyond the worker's own (None: no memory limit)."""

    timeout: float = DEFAULT_TIMEOUT
    cpu: float | None = None
    memory: int | None = DEFAULT_MEMORY

    def cpu_seconds(self) -> int:
        return max(1, int(round(self.cpu if self.cpu is not None else self.timeout)))


# ---------------------------------------------------------------------------------------------------
# inside a worker
# ---------------------------------------------------------------------------------------------------
def _vm_bytes() -> int:
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _set_limits(limits: TaskLimits) -> None:
    try:
        import resource
    except ImportError:
        return
    try:
        if limits.memory is not None and _vm_bytes():
            _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
            want = _vm_bytes() + int(limits.memory)
            if hard == resource.RLIM_INFINITY or want < hard:
                resource.setrlimit(resource.RLIMIT_AS, (want, hard))
        used = resource.getrusage(resource.RUSAGE_SELF)
        spent = int(used.ru_utime + used.ru_stime) + 1
        _soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
        want = spent + limits.cpu_seconds()
        if hard == resource.RLIM_INFINITY or want < hard:
            resource.setrlimit(resource.RLIMIT_CPU, (want, hard))
    except (OSError, ValueError):
        pass


def _lift_limits() -> None:
    try:
        import resource

        for which in (resource.RLIMIT_AS, resource.RLIMIT_CPU):
            _soft, hard = resource.getrlimit(which)
            resource.setrlimit(which, (hard, hard))
    except (ImportError, OSError, ValueError):
        pass


def _worker_main(conn, limits: TaskLimits) -> None:
    """A worker's loop: receive a task, run it under the limits, send its result; None ends it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the supervisor's
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crashing file leaves no core dump
    except (ImportError, OSError, ValueError):
        pass
    try:
        import numba

        numba.set_num_threads(1)  # the pool already uses every core
    except Exception:  # only a speed matter
        pass
    conn.send("ready")  # set up: the supervisor starts a file's clock only now
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        _set_limits(limits)
        try:
            result = run_task(task)
        finally:
            _lift_limits()
        if result.status == "failed" and result.error and result.error.startswith("MemoryError") \
                and limits.memory is not None:
            result.error = f"MemoryError: reading it needs more than the batch's {limits.memory >> 20} MB memory limit"
        conn.send(result)


# ---------------------------------------------------------------------------------------------------
# the supervisor
# ---------------------------------------------------------------------------------------------------
def _default_context():
    import multiprocessing

    if sys.platform.startswith("linux") and "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        # Workers fork from a server that has skeletal (and numba) imported but never ran a kernel.
        ctx.set_forkserver_preload(["skeletal.batch.jobs", "skeletal.batch.workers", "skeletal.asset", "skeletal.tools.bake",
                                    "skeletal.tools.export"])
        return ctx
    return multiprocessing.get_context("spawn")


def death_reason(exitcode: int | None, limits: TaskLimits) -> str:
    """One line saying why a worker ended (``"worker died: SIGSEGV"``)."""
    if exitcode is None:
        return "worker died"
    if exitcode < 0:
        sig = -exitcode
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        if sig == getattr(signal, "SIGXCPU", -1):
            return f"worker died: {name} (more than the {limits.cpu_seconds()} s CPU time limit)"
        if sig == signal.SIGKILL:
            return f"worker died: {name} (killed: out of memory, or past the CPU time limit)"
        return f"worker died: {name}"
    return f"worker died: exit status {exitcode}"


class _Slot:
    def __init__(self):
        self.process = None
        self.conn = None
        self.task: Task | None = None
        self.started = 0.0


class WorkerPool:
    """``workers`` supervised processes running tasks under ``limits`` (see the module docstring).

    Use as a context manager; :meth:`run` yields one :class:`FileResult` per task as they finish."""

    def __init__(self, workers: int, limits: TaskLimits | None = None, context=None):
        self.limits = limits or TaskLimits()
        self.ctx = context or _default_context()
        self.slots = [_Slot() for _ in range(max(1, int(workers)))]

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _start(self, slot: _Slot) -> str | None:
        """Start a worker and wait until it is ready; None, or why it could not start."""
        parent, child = self.ctx.Pipe()
        process = self.ctx.Process(target=_worker_main, args=(child, self.limits), daemon=True)
        process.start()
        child.close()
        slot.process, slot.conn = process, parent
        try:
            if parent.poll(START_TIMEOUT) and parent.recv() == "ready":
                return None
        except (EOFError, OSError):
            pass
        process.join(1.0)
        reason = death_reason(process.exitcode, self.limits) if process.exitcode is not None else "worker did not start"
        self._stop(slot, kill=True)
        return f"{reason} (while starting)"

    def _stop(self, slot: _Slot, kill: bool) -> None:
        process, conn = slot.process, slot.conn
        slot.process = slot.conn = None
        slot.task = None
        if process is None:
            return
        if kill:
            process.kill()
        else:
            try:
                conn.send(None)
            except (OSError, ValueError):
                pass
        process.join(5.0)
        if process.is_alive():
            process.kill()
            process.join()
        conn.close()

    def close(self) -> None:
        for slot in self.slots:
            self._stop(slot, kill=slot.task is not None)

    def _failed(self, slot: _Slot, reason: str) -> FileResult:
        task = slot.task
        return FileResult(task.source, task.output, "failed", time.perf_counter() - slot.started, reason)

    def run(self, tasks: Iterable[Task]) -> Iterator[FileResult]:
        from multiprocessing.connection import wait

        pending = deque(tasks)
        while True:
            for slot in self.slots:  # hand out work
                while slot.task is None and pending:
                    task = pending.popleft()
                    if slot.process is None or not slot.process.is_alive():
                        self._stop(slot, kill=True)
                        problem = self._start(slot)
                        if problem is not None:
                            yield FileResult(task.source, task.output, "failed", 0.0, problem)
                            continue
                    try:
                        slot.conn.send(task)
                    except (OSError, ValueError):  # the worker died between files: a fresh one
                        pending.appendleft(task)
                        self._stop(slot, kill=True)
                        continue
                    slot.task, slot.started = task, time.perf_counter()
            busy = [s for s in self.slots if s.task is not None]
            if not busy:
                return
            now = time.perf_counter()
            deadline = min(s.started + self.limits.timeout for s in busy)
            waitables = {}
            for s in busy:
                waitables[s.conn] = s
                waitables[s.process.sentinel] = s
            ready = wait(list(waitables), timeout=max(0.0, deadline - now))
            done: set[int] = set()
            for obj in ready:
                slot = waitables[obj]
                if id(slot) in done or slot.task is None:
                    continue
                done.add(id(slot))
                result = None
                if slot.conn.poll():
                    try:
                        result = slot.conn.recv()
                    except (EOFError, OSError):
                        result = None
                if result is not None:
                    slot.task = None
                    yield result
                    continue
                slot.process.join(5.0)
                reason = death_reason(slot.process.exitcode, self.limits)
                failed = self._failed(slot, reason)
                self._stop(slot, kill=True)
                yield failed
            now = time.perf_counter()
            for slot in self.slots:
                if slot.task is not None and now - slot.started > self.limits.timeout:
                    failed = self._failed(slot, f"timed out: took longer than {self.limits.timeout:g} s (worker stopped)")
                    self._stop(slot, kill=True)
                    yield failed


def run_chunk_supervised(tasks: list[Task], limits: TaskLimits) -> list[FileResult]:
    """Several tasks in one supervised worker (what a Ray task runs): a file that kills its worker
    fails alone."""
    with WorkerPool(1, limits) as pool:
        results = {r.source: r for r in pool.run(tasks)}
    return [results[t.source] for t in tasks]
