"""Where skeletal chooses numba's threading layer (imported by ``skeletal/__init__.py`` before any kernel).

numba's default layer on Linux is OpenMP (GNU libgomp) with a static schedule: each parallel region
splits the work into one equal part per thread, and the calling thread busy-waits at the end for the
slowest part. When another process keeps one core busy, the thread sharing that core gets its
time slices milliseconds apart, so a 2-thread skinning call of 0.5 ms waits for it every frame:
measured on a 2-core VM with one spinning process, 2-thread skinning fell from ~240 to 12.5 M
vertices/s and the crowd from ~450k to 150k characters/s, far below one thread.

Intel TBB's layer (``pip install tbb``; numba ships the glue) schedules by work stealing: the
calling thread takes the parts a descheduled worker has not started, so a busy core costs at most
that worker's share instead of a whole time slice per call. This module picks, unless the user chose
with ``NUMBA_THREADING_LAYER`` (or ``SKELETAL_THREADING_LAYER``; then numba's defaults apply):

1. ``tbb`` when a TBB runtime >= 2021.6 is importable. pip installs ``libtbb.so.12`` into the
   environment's ``lib/`` folder, which is not on the loader's path in a virtual environment, so it
   is loaded here by full path first (the layer's extension then finds it by its soname).
2. otherwise ``omp`` with passive waits (``OMP_WAIT_POLICY=PASSIVE``, ``KMP_BLOCKTIME=0``, set before
   numba loads the OpenMP runtime; values the user set are kept) so that idle threads sleep instead of
   spinning against the thread that has the work.

>>> import skeletal._threads as threads
>>> threads.chosen_layer() in ("tbb", "omp", "workqueue", "default", "safe", "threadsafe", "forksafe")
True
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys

_TBB_MIN_INTERFACE = 12060  # numba's own minimum (TBB 2021.6)
_state: dict = {}


def _tbb_candidates() -> list[str]:
    """Full paths where pip (or conda) puts libtbb.so.12, this environment's first."""
    roots = []
    for prefix in (sys.prefix, sys.base_prefix, os.environ.get("CONDA_PREFIX", "")):
        if prefix and prefix not in roots:
            roots.append(prefix)
    names = ("libtbb.so.12", "libtbb.12.dylib", "tbb12.dll")
    found = []
    for root in roots:
        for sub in ("lib", "Library/bin", "bin"):
            for name in names:
                path = os.path.join(root, sub, name)
                if os.path.exists(path):
                    found.append(path)
    found.extend(glob.glob(os.path.join(sys.prefix, "lib", "python*", "site-packages", "tbb", "libtbb.so.12")))
    return found


def _load_tbb() -> bool:
    """Load a TBB runtime numba accepts (by soname if the loader finds it, else by full path)."""
    for path in ["libtbb.so.12", *_tbb_candidates()]:
        try:
            lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            version = lib.TBB_runtime_interface_version
            version.restype = ctypes.c_int
            if version() >= _TBB_MIN_INTERFACE:
                return True
        except (OSError, AttributeError):
            continue
    return False


def choose() -> str:
    """Choose the threading layer once per process (before numba starts its threads); returns it."""
    if "layer" in _state:
        return _state["layer"]
    import numba

    requested = os.environ.get("SKELETAL_THREADING_LAYER") or os.environ.get("NUMBA_THREADING_LAYER")
    if requested:
        layer = requested
        if layer == "tbb":
            _load_tbb()
    elif _load_tbb():
        layer = "tbb"
    else:
        layer = "omp"
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        os.environ.setdefault("KMP_BLOCKTIME", "0")
    numba.config.THREADING_LAYER = layer
    _state["layer"] = layer
    return layer


def chosen_layer() -> str:
    """The layer :func:`choose` set (numba's ``threading_layer()`` says which one it then loaded)."""
    return choose()


choose()
