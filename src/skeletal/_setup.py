"""skeletal's numba set-up, run when numba is imported instead of by ``import skeletal``.

skeletal chooses numba's threading layer (:mod:`skeletal._threads`) and patches numba's compiler and
cache (:mod:`skeletal._compile`) before any of its kernels compiles. Both need numba imported (a
fifth of a second of CPU), and ``import skeletal`` itself imports no stage (:mod:`skeletal._lazy`):
so :func:`install` runs them at once when numba is already loaded, else puts a finder on
``sys.meta_path`` that runs them right after numba's own ``__init__`` has run, whoever imports it
(the first skeletal kernel module, or the user's code): before numba has compiled or started a
thread, as when ``import skeletal`` imported numba itself. A loader that cannot be wrapped (a frozen
application's) gets numba imported at once, as before. The OpenMP wait policy
(:func:`skeletal._threads.prepare_environment`) still goes into the environment on ``import
skeletal``: another library may load an OpenMP runtime before numba does.

>>> import skeletal, sys
>>> "numba" in sys.modules or any(isinstance(f, _AfterNumba) for f in sys.meta_path)  # doctest: +SKIP
True
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from typing import Any


def _configure() -> None:
    """The threading layer and the compiler patches (each runs once per process)."""
    from . import _threads

    _threads.choose()
    if "skeletal._compile" not in sys.modules:  # (present: imported, or importing numba now; its last
        from . import _compile  # noqa: F401     # line installs the patches either way)


def _wrappable(spec: Any) -> bool:
    loader = getattr(spec, "loader", None)
    return hasattr(loader, "exec_module") and hasattr(loader, "__dict__")


class _AfterNumba(importlib.abc.MetaPathFinder):
    """Finds nothing itself: for ``numba``, the spec the rest of ``sys.meta_path`` finds, its
    loader's ``exec_module`` wrapped to run :func:`_configure` after numba's ``__init__``."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != "numba":
            return None
        _remove()
        spec = importlib.util.find_spec("numba")
        if not _wrappable(spec):
            return None  # (checked by install(): only if numba's files changed since)
        original = spec.loader.exec_module

        def exec_module(module: Any) -> None:
            original(module)
            _configure()

        spec.loader.exec_module = exec_module
        return spec


def _remove() -> None:
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _AfterNumba)]


def install() -> None:
    """Configure numba now if it is loaded (or its loader cannot be wrapped), else when it is
    (idempotent; done on ``import skeletal``)."""
    from . import _threads

    _threads.prepare_environment()  # before any OpenMP runtime loads (numba's, or torch's at its import)
    if "numba" in sys.modules or not _wrappable(importlib.util.find_spec("numba")):
        _remove()
        _configure()
    elif not any(isinstance(f, _AfterNumba) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterNumba())
