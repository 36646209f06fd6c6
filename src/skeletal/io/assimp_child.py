"""Assimp in a child process: a file that crashes, exhausts or hangs the C library costs a ModelError.

Assimp's readers are C++ code that trusts its input: audits found out-of-range indices written
through (``.x`` skin weights, ``.md5mesh``, ``.csm``), heap overflows (compressed ``.x``), unbounded
recursion (flat parent chains 100,000 long), asserts that abort, decompression bombs and files that
spin for minutes. No pre-check in Python covers every format, so by default the import runs in a
child process (:mod:`skeletal.io.isolation`, shared with the USD reader):

* POSIX: the child is a ``fork()`` of the caller, with Assimp loaded and the numba face-gathering
  kernel compiled in the parent first; elsewhere (or ``method="spawn"``) a fresh interpreter.
* Limits (:class:`Limits`): ``memory`` bytes of address space beyond the caller's (default
  ``MEMORY_MARGIN + MEMORY_FACTOR * file size``), CPU time, and a wall-clock ``timeout``.
* The child reads the file into a :class:`~skeletal.document.Document` (the same converter as
  in-process) and sends it back through a pipe (the numpy arrays' bytes written once, viewed on
  arrival); warnings the converter raised are re-emitted in the parent.
* A signal, a limit or the timeout becomes one :class:`~skeletal.errors.ModelError` naming the file
  and what happened, e.g. ``x.md5mesh: Assimp crashed (SIGSEGV) while reading it``.

>>> doc = read_isolated("Soldier.fbx", data, "metres", Limits(timeout=30))   # doctest: +SKIP
"""

from __future__ import annotations

import warnings

from skeletal.errors import ModelError
from skeletal.io.isolation import DEFAULT_TIMEOUT, MEMORY_FACTOR, MEMORY_MARGIN, Job, Limits, run_isolated

__all__ = ["Limits", "read_isolated", "MEMORY_MARGIN", "MEMORY_FACTOR", "DEFAULT_TIMEOUT"]


def _work(file: str, data: bytes, unit_scale: str | None) -> tuple:
    """Read the model (in the child); returns the message the parent gets: ``("ok", doc, warnings)``
    or an error."""
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


def _prepare_parent(file: str) -> None:
    """Load the library and compile the face kernel here, once, so that every forked child inherits
    them instead of redoing the work (and so that a missing Assimp is reported without a child)."""
    from skeletal.io import assimp, assimp_ffi

    assimp_ffi.library(file)
    assimp._warm_kernels()


def _reset_lock() -> None:
    """In the forked child: another thread of the parent may have held the library's lock."""
    import threading

    from skeletal.io import assimp_ffi

    assimp_ffi._lock = threading.Lock()


def read_isolated(file: str, data: bytes, unit_scale: str | None, limits: Limits | None = None):
    """Read ``file`` (whose bytes are ``data``) with Assimp in a child process under ``limits``;
    returns the :class:`~skeletal.document.Document`. See the module docstring."""
    job = Job("Assimp", __name__, "_work", (file, data, unit_scale), size=len(data))
    doc = run_isolated(file, job, limits, prepare=lambda: _prepare_parent(file), in_child=_reset_lock)
    doc.path = file
    return doc
