"""Assimp in a child process: a file that crashes, exhausts or hangs the C library costs a ModelError.

Assimp's readers are C++ code that trusts its input: audits found out-of-range indices written
through (``.x`` skin weights, ``.md5mesh``, ``.csm``), heap overflows (compressed ``.x``), unbounded
recursion (flat parent chains 100,000 long), asserts that abort, decompression bombs and files that
spin for minutes. No pre-check in Python covers every format, so by default the import runs in a
child process:

* POSIX: the child is a ``fork()`` of the caller, so it starts in about a millisecond with everything
  already imported (Assimp loaded, the numba face-gathering kernel compiled in the parent first); no
  interpreter start, no module import. Elsewhere (or ``method="spawn"``) a fresh interpreter runs
  ``python -m skeletal.io.assimp_child``.
* Limits (:class:`Limits`): the address space may grow by ``memory`` bytes (default
  ``MEMORY_MARGIN + MEMORY_FACTOR * file size``; ``RLIMIT_AS`` over what the process already has
  mapped), the CPU time is capped (``RLIMIT_CPU``) and the parent kills the child after ``timeout``
  wall-clock seconds.
* The child reads the file into a :class:`~skeletal.document.Document` (the same converter as
  in-process) and pickles it back through a pipe, protocol 5 with the numpy arrays sent out-of-band:
  each array's bytes are written once and land in one buffer in the parent, which the arrays then
  view (no further copy). Warnings the converter raised are re-emitted in the parent.
* A signal (SIGSEGV, SIGABRT, SIGBUS, SIGXCPU...), a limit or the timeout becomes one
  :class:`~skeletal.errors.ModelError` naming the file and what happened, e.g.
  ``x.md5mesh: Assimp crashed (SIGSEGV) while reading it``.

>>> doc = read_isolated("Soldier.fbx", Limits(timeout=30))   # doctest: +SKIP
"""

from __future__ import annotations

import builtins
import gc
import os
import pickle
import select
import signal
import struct
import sys
import time
import warnings
from dataclasses import dataclass

from skeletal.errors import ModelError

__all__ = ["Limits", "read_isolated", "MEMORY_MARGIN", "MEMORY_FACTOR", "DEFAULT_TIMEOUT"]

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
    """Bounds of one isolated import.

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


def _work(file: str, data: bytes, unit_scale: str | None) -> tuple:
    """Read the model; returns the message the parent gets: ``("ok", doc, warnings)`` or an error."""
    from skeletal.io.assimp import _read_in_process

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            doc = _read_in_process(file, data, unit_scale)
        except ModelError as exc:
            return ("model_error", exc.where, exc.detail)
        except MemoryError:
            return ("memory",)
        except RecursionError:
            return ("model_error", None, "the scene is nested too deeply to convert")
        except Exception as exc:  # any other failure is the file's, reported in one line
            return ("model_error", None, f"converting Assimp's scene failed: {type(exc).__name__}: "
                                         f"{' '.join(str(exc).split())[:200]}")
    notes = [(str(w.message), w.category.__name__) for w in caught]
    return ("ok", doc, notes)


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


def _child(fd: int, file: str, data: bytes, unit_scale: str | None, memory: int, cpu: int) -> None:
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
    _apply_limits(memory, cpu)
    _send(fd, _work(file, data, unit_scale))


def main() -> None:
    """``python -m skeletal.io.assimp_child``: the spawn method's child (request pickled on stdin,
    reply framed as in :func:`_send` on stdout)."""
    request = pickle.load(sys.stdin.buffer)
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


def _explain(file: str, sig: int | None, code: int | None, limits: Limits, memory: int) -> ModelError:
    """The ModelError for a child that ended without a reply: killed by signal ``sig``, or exited
    with ``code``."""
    if sig is not None:
        if sig in (getattr(signal, "SIGXCPU", -1), getattr(signal, "SIGKILL", -1)):
            return ModelError(file, None, f"Assimp used more than {limits.cpu_seconds()} s of CPU time reading it "
                                          "(stopped; see skeletal.io.assimp_child.Limits)")
        if sig == signal.SIGABRT:
            return ModelError(file, None, "Assimp aborted (SIGABRT) while reading it (an internal check failed "
                                          f"or it ran out of its {memory >> 20} MB memory limit)")
        return ModelError(file, None, f"Assimp crashed ({_signal_name(sig)}) while reading it")
    return ModelError(file, None, f"the Assimp reader process ended without an answer (exit status {code})")


def _message_to_result(file: str, message: tuple, memory: int):
    kind = message[0]
    if kind == "ok":
        _, doc, notes = message
        for text, category in notes:
            cls = getattr(builtins, category, UserWarning)
            warnings.warn(text, cls if isinstance(cls, type) and issubclass(cls, Warning) else UserWarning,
                          stacklevel=4)
        doc.path = file
        return doc
    if kind == "memory":
        raise ModelError(file, None, f"reading it needs more than the {memory >> 20} MB memory limit "
                                     "(raise it with Limits(memory=...) if the file is trusted)")
    _, where, detail = message
    if "bad_alloc" in detail:
        detail = f"Assimp ran out of its {memory >> 20} MB memory limit reading it ({detail})"
    raise ModelError(file, where, detail)


def read_isolated(file: str, data: bytes, unit_scale: str | None, limits: Limits | None = None):
    """Read ``file`` (whose bytes are ``data``) with Assimp in a child process under ``limits``;
    returns the :class:`~skeletal.document.Document`. See the module docstring."""
    limits = limits or Limits()
    memory = limits.memory_bytes(len(data))
    cpu = limits.cpu_seconds()
    method = limits.method or ("fork" if hasattr(os, "fork") else "spawn")
    if method == "fork":
        return _read_forked(file, data, unit_scale, limits, memory, cpu)
    if method == "spawn":
        return _read_spawned(file, data, unit_scale, limits, memory, cpu)
    raise ValueError(f"unknown isolation method {method!r} (fork or spawn)")


def _die_with(parent: int) -> None:
    """Linux: the child is killed when its parent dies (a batch worker stopped for its timeout must
    not leave Assimp spinning on as an orphan)."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # the parent died before the line above
        os._exit(70)


def _timeout_error(file: str, limits: Limits) -> ModelError:
    return ModelError(file, None, f"Assimp took longer than {limits.timeout:g} s to read it (stopped)")


def _prepare_parent(file: str) -> None:
    """Load the library and compile the face kernel here, once, so that every forked child inherits
    them instead of redoing the work (and so that a missing Assimp is reported without a child)."""
    from skeletal.io import assimp, assimp_ffi

    assimp_ffi.library(file)
    assimp._warm_kernels()


def _read_forked(file: str, data: bytes, unit_scale, limits: Limits, memory: int, cpu: int):
    _prepare_parent(file)
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
            from skeletal.io import assimp_ffi
            import threading

            assimp_ffi._lock = threading.Lock()  # another thread of the parent may have held it
            _child(w, file, data, unit_scale, memory, cpu)
        except BaseException:
            code = 70
        finally:
            os._exit(code)
    os.close(w)
    status = None
    try:
        def stop():
            os.kill(pid, signal.SIGKILL)
            raise _timeout_error(file, limits)

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
        raise _explain(file, os.WTERMSIG(status) if signalled else None,
                       os.WEXITSTATUS(status) if status is not None and os.WIFEXITED(status) else None, limits, memory)
    return _message_to_result(file, message, memory)


def _read_spawned(file: str, data: bytes, unit_scale, limits: Limits, memory: int, cpu: int):
    """A fresh interpreter (``python -m skeletal.io.assimp_child``); portable (``communicate``)."""
    import subprocess

    request = pickle.dumps((file, data, unit_scale, memory, cpu), protocol=5)
    proc = subprocess.Popen([sys.executable, "-m", "skeletal.io.assimp_child"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        raw, _ = proc.communicate(request, timeout=limits.timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise _timeout_error(file, limits) from None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    message = _decode(bytearray(raw))
    if message is None:
        code = proc.returncode
        raise _explain(file, -code if code < 0 else None, code if code >= 0 else None, limits, memory)
    return _message_to_result(file, message, memory)


if __name__ == "__main__":
    main()
