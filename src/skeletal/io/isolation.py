"""A reader in a child process: a file that crashes, exhausts or hangs a C++ library costs a ModelError.

The readers that hand untrusted bytes to C++ libraries (Assimp: :mod:`skeletal.io.assimp_child`;
usd-core: :mod:`skeletal.io.usd`) run them here, under one set of rules:

* POSIX: the child is a ``fork()`` of the caller, so it starts in about a millisecond with everything
  already imported (the caller's ``prepare`` step loads the library and compiles kernels first); no
  interpreter start, no module import. Elsewhere (or ``method="spawn"``) a fresh interpreter runs
  ``python -m skeletal.io.isolation``.
* Limits (:class:`Limits`): the address space may grow by ``memory`` bytes (default
  ``MEMORY_MARGIN + MEMORY_FACTOR * file size``; ``RLIMIT_AS`` over what the process already has
  mapped, never looser than the caller's own limit), the CPU time is capped (``RLIMIT_CPU``), the
  parent kills the child after ``timeout`` wall-clock seconds, and the child dies with its parent.
* The child runs ``job.module.job.function(*job.args)``, which returns a message: ``("ok", payload,
  warnings)``, ``("model_error", where, detail)`` or ``("memory",)``. It is pickled back through a
  pipe, protocol 5 with numpy arrays out-of-band: each array's bytes are written once and land in one
  buffer in the parent, which the arrays then view (no further copy). Warnings are re-emitted in the
  parent. The child's stderr goes nowhere (a job that wants the library's diagnostics captures them).
* A signal (SIGSEGV, SIGABRT, SIGBUS, SIGXCPU...), a limit or the timeout becomes one
  :class:`~skeletal.errors.ModelError` naming the file, the library and what happened, e.g.
  ``x.md5mesh: Assimp crashed (SIGSEGV) while reading it``.

>>> job = Job("Assimp", "skeletal.io.assimp_child", "_work", ("a.fbx", b"...", None), size=3)
>>> run_isolated("a.fbx", job, Limits(timeout=30))          # doctest: +SKIP
"""

from __future__ import annotations

import builtins
import gc
import importlib
import os
import pickle
import select
import signal
import struct
import sys
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

from skeletal.errors import ModelError

__all__ = ["Limits", "Job", "run_isolated", "MEMORY_MARGIN", "MEMORY_FACTOR", "DEFAULT_TIMEOUT"]

#: Address space a child may add beyond the parent's, plus :data:`MEMORY_FACTOR` times the file size.
MEMORY_MARGIN = 768 << 20
#: Bytes of address space allowed per byte of the model file (Assimp's scene plus skeletal's arrays
#: of a real FBX take under 20 times its size; a decompression bomb takes a thousand).
MEMORY_FACTOR = 32
#: Wall-clock seconds before the child is killed.
DEFAULT_TIMEOUT = 120.0

_HEADER = struct.Struct("<QQ")  # pickle length, buffer count; then the buffer lengths (Q each)


@dataclass(frozen=True)
class Limits:
    """Bounds of one isolated read.

    ``timeout``: wall-clock seconds (the child is killed after it). ``cpu``: CPU seconds
    (``RLIMIT_CPU``; default: ``timeout``). ``memory``: bytes of address space the child may add
    (default :data:`MEMORY_MARGIN` + :data:`MEMORY_FACTOR` x the file size). ``method``: ``"fork"``
    (POSIX default) or ``"spawn"`` (a fresh interpreter; the default where ``fork`` is missing).

    >>> Limits(timeout=5, memory=256 << 20).cpu_seconds()
    5
    """

    timeout: float = DEFAULT_TIMEOUT
    cpu: float | None = None
    memory: int | None = None
    method: str | None = None

    def cpu_seconds(self) -> int:
        return max(1, int(round(self.cpu if self.cpu is not None else self.timeout)))

    def memory_bytes(self, file_size: int) -> int:
        if self.memory is not None:
            return int(self.memory)
        return MEMORY_MARGIN + MEMORY_FACTOR * int(file_size)


@dataclass(frozen=True)
class Job:
    """What the child runs: ``module.function(*args)`` (importable by name, so that a spawned
    interpreter finds it too), for messages about ``engine`` (``"Assimp"``, ``"usd-core"``) reading a
    file of ``size`` bytes (the memory budget's base). ``reserve``: address space the library reserves
    without using it (usd-core's path pools), added to the memory limit."""

    engine: str
    module: str
    function: str
    args: tuple = field(default=())
    size: int = 0
    reserve: int = 0


# ---------------------------------------------------------------------------------------------------
# the child's side
# ---------------------------------------------------------------------------------------------------
def _address_space() -> int:
    """Bytes of address space this process has mapped now (``VmSize``), 0 when unknown."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _apply_limits(memory: int, cpu: int) -> None:
    try:
        import resource
    except ImportError:  # not POSIX: the wall-clock timeout is the only bound
        return
    try:
        infinity = resource.RLIM_INFINITY
        used = _address_space()
        if used:
            soft, hard = resource.getrlimit(resource.RLIMIT_AS)
            want = used + memory
            if soft != infinity:
                want = min(want, soft)  # never looser than the caller's own limit (a batch worker's)
            if hard == infinity or want < hard:
                resource.setrlimit(resource.RLIMIT_AS, (want, hard))
        soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
        if soft != infinity:
            cpu = max(1, min(cpu, soft))
        if hard == infinity or cpu < hard:
            # soft: SIGXCPU at ``cpu`` seconds; hard one second later: SIGKILL
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1 if hard == infinity else hard))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash leaves no core file behind
    except (OSError, ValueError):
        pass


def _send(fd: int, message: tuple) -> None:
    buffers: list[pickle.PickleBuffer] = []
    try:
        head = pickle.dumps(message, protocol=5, buffer_callback=buffers.append)
    except MemoryError:
        buffers, head = [], pickle.dumps(("memory",), protocol=5)
    raws = [b.raw() for b in buffers]
    out = [_HEADER.pack(len(head), len(raws)), struct.pack(f"<{len(raws)}Q", *(r.nbytes for r in raws)), head, *raws]
    for part in out:
        view = memoryview(part).cast("B")
        while len(view):
            n = os.write(fd, view)
            view = view[n:]


def _run_job(work: Callable[..., tuple], args: tuple) -> tuple:
    try:
        return work(*args)
    except MemoryError:
        return ("memory",)


def _child(fd: int, module: str, function: str, args: tuple, memory: int, cpu: int) -> None:
    """Everything the child does before ``os._exit``."""
    # glibc's heap-corruption reports ("malloc(): invalid size") go to stderr, not the terminal, and
    # stderr goes nowhere: the parent reports the crash in one line.
    os.environ["LIBC_FATAL_STDERR_"] = "1"
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 2)
        os.close(null)
    except OSError:
        pass
    # the job's module and what it imports (numba, LLVM) before the limits, as a forked child inherits
    # them: the limits are for reading the file (``import skeletal`` no longer loads numba)
    work: Callable[..., tuple] = getattr(importlib.import_module(module), function)
    _apply_limits(memory, cpu)
    _send(fd, _run_job(work, args))


def main() -> None:
    """``python -m skeletal.io.isolation``: the spawn method's child (request pickled on stdin,
    reply framed as in :func:`_send` on stdout)."""
    request = pickle.load(sys.stdin.buffer)
    # numba before the limits: LLVM's library maps hundreds of MB of address space, which a forked
    # child inherits from its parent and ``import skeletal`` no longer loads (a reader imports it
    # when it first runs, under the limits: "cannot load libllvmlite.so")
    import numba  # noqa: F401
    out = os.dup(sys.stdout.fileno())
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray prints must not corrupt the reply
    _child(out, *request)
    os.close(out)


# ---------------------------------------------------------------------------------------------------
# the parent's side
# ---------------------------------------------------------------------------------------------------
def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _expected_length(raw: bytearray) -> int | None:
    """The length of the whole framed reply once its header has arrived."""
    if len(raw) < _HEADER.size:
        return None
    head_len, count = _HEADER.unpack_from(raw, 0)
    if len(raw) < _HEADER.size + 8 * count:
        return None
    return _HEADER.size + 8 * count + head_len + sum(struct.unpack_from(f"<{count}Q", raw, _HEADER.size))


def _receive(fd: int, deadline: float, on_timeout) -> bytearray:
    """The child's reply: read until the framed message is complete or the pipe closes (the child
    ended); ``on_timeout()`` (which raises) at the deadline. Not waiting for the end of the pipe
    alone keeps a sibling child forked by another thread (which may hold a copy of the write end)
    from delaying this one."""
    chunks = bytearray()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            on_timeout()
        ready, _, _ = select.select([fd], [], [], min(left, 1.0))
        if not ready:
            continue
        piece = os.read(fd, 1 << 20)
        if not piece:
            return chunks
        chunks += piece
        want = _expected_length(chunks)
        if want is not None and len(chunks) >= want:
            return chunks


def _reap(pid: int, deadline: float) -> int:
    """The child's wait status; killed if it does not end by ``deadline`` (it has replied)."""
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            return os.waitpid(pid, 0)[1]
        time.sleep(0.002)


def _decode(raw: bytearray) -> tuple | None:
    if len(raw) < _HEADER.size:
        return None
    head_len, count = _HEADER.unpack_from(raw, 0)
    pos = _HEADER.size
    if len(raw) < pos + 8 * count:
        return None
    sizes = struct.unpack_from(f"<{count}Q", raw, pos)
    pos += 8 * count
    view = memoryview(raw)
    head = view[pos:pos + head_len]
    pos += head_len
    buffers = []
    for n in sizes:
        buffers.append(view[pos:pos + n])  # the arrays view the received bytes: no copy
        pos += n
    if pos != len(raw):
        return None
    return pickle.loads(head, buffers=buffers)


def _explain(file: str, engine: str, sig: int | None, code: int | None, limits: Limits, memory: int) -> ModelError:
    """The ModelError for a child that ended without a reply: killed by signal ``sig``, or exited
    with ``code``."""
    if sig is not None:
        if sig in (getattr(signal, "SIGXCPU", -1), getattr(signal, "SIGKILL", -1)):
            return ModelError(file, None, f"{engine} used more than {limits.cpu_seconds()} s of CPU time reading it "
                                          "(stopped; see skeletal.io.isolation.Limits)")
        if sig == signal.SIGABRT:
            return ModelError(file, None, f"{engine} aborted (SIGABRT) while reading it (an internal check failed "
                                          f"or it ran out of its {memory >> 20} MB memory limit)")
        return ModelError(file, None, f"{engine} crashed ({_signal_name(sig)}) while reading it")
    return ModelError(file, None, f"the {engine} reader process ended without an answer (exit status {code})")


def _message_to_result(file: str, engine: str, message: tuple, memory: int) -> Any:
    kind = message[0]
    if kind == "ok":
        _, payload, notes = message
        for text, category in notes:
            cls = getattr(builtins, category, UserWarning)
            warnings.warn(text, cls if isinstance(cls, type) and issubclass(cls, Warning) else UserWarning,
                          stacklevel=5)
        return payload
    if kind == "memory":
        raise ModelError(file, None, f"reading it needs more than the {memory >> 20} MB memory limit "
                                     "(raise it with Limits(memory=...) if the file is trusted)")
    _, where, detail = message
    if "bad_alloc" in detail:
        detail = f"{engine} ran out of its {memory >> 20} MB memory limit reading it ({detail})"
    raise ModelError(file, where, detail)


def run_isolated(file: str, job: Job, limits: Limits | None = None, *, prepare: Callable[[], None] | None = None,
                 in_child: Callable[[], None] | None = None) -> Any:
    """Run ``job`` for ``file`` in a child process under ``limits`` and return its payload (see the
    module docstring). ``prepare()`` runs in the parent before a fork (load the library, compile
    kernels: the child inherits them); ``in_child()`` runs first thing in a forked child (reset
    locks another thread of the parent may have held)."""
    limits = limits or Limits()
    memory = limits.memory_bytes(job.size) + job.reserve
    cpu = limits.cpu_seconds()
    method = limits.method or ("fork" if hasattr(os, "fork") else "spawn")
    if method == "fork":
        if prepare is not None:
            prepare()
        return _run_forked(file, job, limits, memory, cpu, in_child)
    if method == "spawn":
        return _run_spawned(file, job, limits, memory, cpu)
    raise ValueError(f"unknown isolation method {method!r} (fork or spawn)")


def _die_with(parent: int) -> None:
    """Linux: the child is killed when its parent dies (a batch worker stopped for its timeout must
    not leave the library spinning on as an orphan)."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # the parent died before the line above
        os._exit(70)


def _timeout_error(file: str, engine: str, limits: Limits) -> ModelError:
    return ModelError(file, None, f"{engine} took longer than {limits.timeout:g} s to read it (stopped)")


def _run_forked(file: str, job: Job, limits: Limits, memory: int, cpu: int, in_child):
    pid = -1
    parent = os.getpid()
    r, w = os.pipe()
    gc.freeze()  # the child's collector then leaves the parent's objects alone: no copy-on-write of the heap
    try:
        pid = os.fork()
    finally:
        if pid != 0:
            gc.unfreeze()
    if pid == 0:  # the child: never returns into the caller's code
        code = 0
        try:
            gc.disable()  # a short life: its garbage goes with it
            os.close(r)
            try:
                import faulthandler

                faulthandler.disable()  # a crash is reported by the parent, not dumped on stderr
            except Exception:
                pass
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
            _die_with(parent)
            if in_child is not None:
                in_child()
            _child(w, job.module, job.function, job.args, memory, cpu)
        except BaseException:
            code = 70
        finally:
            os._exit(code)
    os.close(w)
    status = None
    try:
        def stop():
            os.kill(pid, signal.SIGKILL)
            raise _timeout_error(file, job.engine, limits)

        raw = _receive(r, time.monotonic() + limits.timeout, stop)
        status = _reap(pid, time.monotonic() + 5.0)
        pid = 0
    finally:
        os.close(r)
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)
    message = _decode(raw)
    if message is None:
        signalled = status is not None and os.WIFSIGNALED(status)
        raise _explain(file, job.engine, os.WTERMSIG(status) if signalled else None,
                       os.WEXITSTATUS(status) if status is not None and os.WIFEXITED(status) else None,
                       limits, memory)
    return _message_to_result(file, job.engine, message, memory)


def _run_spawned(file: str, job: Job, limits: Limits, memory: int, cpu: int):
    """A fresh interpreter (``python -m skeletal.io.isolation``); portable (``communicate``)."""
    import subprocess

    request = pickle.dumps((job.module, job.function, job.args, memory, cpu), protocol=5)
    proc = subprocess.Popen([sys.executable, "-m", "skeletal.io.isolation"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        raw, _ = proc.communicate(request, timeout=limits.timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise _timeout_error(file, job.engine, limits) from None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    message = _decode(bytearray(raw))
    if message is None:
        code = proc.returncode
        raise _explain(file, job.engine, -code if code < 0 else None, code if code >= 0 else None, limits, memory)
    return _message_to_result(file, job.engine, message, memory)


if __name__ == "__main__":
    main()
