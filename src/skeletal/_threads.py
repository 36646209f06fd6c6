"""Where skeletal chooses numba's threading layer (run by ``skeletal._setup`` as numba loads, before any kernel).

numba's default layer on Linux is OpenMP (GNU libgomp): each parallel region splits the work into
one equal part per thread, and a thread that has finished its part spins, busy-waiting, for the
others and for the next region. When another process keeps a core busy, the spinning thread and the
descheduled worker fight over the CPUs: measured on a 2-vCPU VM with one spinning process (and other
agents' work, load average ~15), 2-thread skinning of 100k vertices ran at 0.18x of one thread and
the 1000-character crowd at 0.63x (the issue saw 12.5 vs 240 M vertices/s).

This module makes threads wait passively (``OMP_WAIT_POLICY=PASSIVE``, ``KMP_BLOCKTIME=0``, set before
numba loads the OpenMP runtime; values the user set are kept) after a short spin (GNU OpenMP:
``GOMP_SPINCOUNT`` = :data:`SPIN_COUNT`, about 55 us on a Zen 5 core, only when the user set neither
variable), and asks numba for OpenMP first, then TBB, then its own workqueue, whichever is installed.
The spin: a thread that waits passively sleeps in the kernel, and waking it for the next parallel
region took ~40 us on the project's 2-vCPU VMs (an idle vCPU halts), every region: 1000 crowd
characters on 2 threads ran at 1.66x one thread with passive waits alone, 1.9x with the spin
(docs/guides/performance.md). Spinning that long covers back-to-back regions (a crowd update, then
skinning; a benchmark's loop) and costs the waiting thread at most that much CPU after each region;
while other processes keep the CPUs busy, :func:`busy_cap` runs the kernels on fewer threads, so no
thread spins against them. Measured under load, alternating 1 and 2 threads in one process (ratios
of 2 threads to 1, four runs each; before the spin and the cap):

* OpenMP, passive waits: skinning 1.21-3.1x, crowd 1.39-1.57x (never below one thread);
* TBB (``pip install tbb``, work stealing): skinning 0.90-1.35x, crowd 0.84-1.27x;
* OpenMP with a short spin (``GOMP_SPINCOUNT=10000``): skinning 1.25x, crowd 1.09x;
* workqueue: skinning 1.0-1.28x, crowd 0.71-1.5x.

``SKELETAL_THREADING_LAYER`` (or numba's own ``NUMBA_THREADING_LAYER``) overrides the choice; for
``tbb`` the TBB runtime pip installs into a virtual environment's ``lib/`` (not on the loader's path)
is loaded here by full path. A process that loaded OpenMP before importing skeletal (torch does)
keeps the wait policy it started with.

>>> import skeletal._threads as threads
>>> threads.chosen_layer() in ("omp", "tbb", "workqueue", "default", "safe", "threadsafe", "forksafe")
True
"""

from __future__ import annotations

import os
import sys
from time import monotonic

_TBB_MIN_INTERFACE = 12060  # numba's own minimum (TBB 2021.6)
#: GNU OpenMP's spin before a waiting thread sleeps (``GOMP_SPINCOUNT``, in PAUSE loops: ~28 ns each on
#: a Zen 5 core, so ~55 us; with ``OMP_WAIT_POLICY=PASSIVE`` alone it is 0)
SPIN_COUNT = 2000
_state: dict = {}


def _tbb_candidates() -> list[str]:
    """Full paths where pip (or conda) puts libtbb.so.12, this environment's first."""
    import glob

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
    import ctypes

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


def _requested() -> str:
    return os.environ.get("SKELETAL_THREADING_LAYER") or os.environ.get("NUMBA_THREADING_LAYER") or ""


def prepare_environment() -> None:
    """The OpenMP wait policy and spin in the environment, for the OpenMP runtime that loads later
    (numba's, or another library's: torch loads one when imported). Needs no numba: ``import
    skeletal`` runs it (``skeletal._setup``); :func:`choose` too. Nothing when a layer is asked for."""
    if _requested() or _state.get("environment"):
        return
    _state["environment"] = True
    if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
        os.environ["GOMP_SPINCOUNT"] = str(SPIN_COUNT)  # spin this long, then sleep (GNU OpenMP)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    os.environ.setdefault("KMP_BLOCKTIME", "0")


def choose() -> str:
    """Choose the threading layer once per process (before numba starts its threads); returns the
    layer asked for ("omp" by default: numba falls back to TBB, then workqueue, when it is missing)."""
    if "layer" in _state:
        return _state["layer"]
    import numba

    requested = _requested()
    prepare_environment()
    if requested:
        layer = requested
        if layer == "tbb":
            _load_tbb()
        numba.config.THREADING_LAYER = layer
    else:
        layer = "omp"
        numba.config.THREADING_LAYER = "default"
        numba.config.THREADING_LAYER_PRIORITY = ["omp", "tbb", "workqueue"]
    _state["layer"] = layer
    return layer


def busy_cap(interval: float = 0.25) -> int:
    """How many threads a parallel kernel should use now: numba's count, lowered when other processes
    keep CPUs busy (0: no cap). A fork-join region waits for its slowest thread, and a worker that
    shares a CPU with another process waits for a time slice (milliseconds) longer than a frame's
    work: measured on a 2-vCPU VM with one spinning process, 2-thread skinning of 100k vertices ran
    at 0.94-0.97x of 1 thread (dynamic chunks: 0.92-0.97x). So when the CPUs other processes used
    over the last ``interval`` seconds leave fewer than numba's threads, the kernel runs on what is
    left. Sampled from ``/proc/stat`` (all CPUs' busy time) minus this process's own CPU time, at
    most every ``interval`` seconds; elsewhere (no /proc), or with ``SKELETAL_THREAD_CAP=0`` in the
    environment, there is no cap.

    >>> busy_cap() >= 0
    True
    """
    if _NO_CAP:
        return 0
    now = monotonic()
    last = _state.get("busy")
    if last is not None and now - last[0] < interval:
        return last[3]
    stat = cpu_ticks()
    if stat is None:
        _state["busy"] = (now, 0.0, 0.0, 0)
        return 0
    busy = stat[0] / _CLOCK_TICKS
    times = os.times()
    own = times.user + times.system
    cap = 0
    if last is not None and now > last[0]:
        others = ((busy - last[1]) - (own - last[2])) / (now - last[0])  # CPUs busy with other work
        cpus = os.cpu_count() or 1
        free = int(cpus - others + 0.5)  # a CPU counts as taken when another process used half of it
        if free < cpus:
            cap = max(free, 1)
    _state["busy"] = (now, busy, own, cap)
    return cap


def cpu_ticks() -> tuple[int, int] | None:
    """(busy, total) clock ticks of all CPUs since boot, from the first line of ``/proc/stat`` (idle
    and iowait are not busy); None where there is no /proc."""
    try:
        with open("/proc/stat", "rb") as f:
            ticks = [int(x) for x in f.readline().split()[1:]]
        total = sum(ticks)
        return total - ticks[3] - (ticks[4] if len(ticks) > 4 else 0), total
    except (OSError, ValueError, IndexError):
        return None


class capped_threads:
    """A block in which numba's thread count (for the calling thread) is lowered to :func:`busy_cap`
    when other processes keep the CPUs busy, and restored after. A plain class rather than a
    ``contextlib`` generator: entering and leaving costs ~0.3 us, not ~1 us, in a per-frame call.

    >>> with capped_threads():          # doctest: +SKIP
    ...     parallel_kernel(...)
    """

    __slots__ = ("parallel", "restore")

    def __init__(self, parallel: bool = True):
        self.parallel = parallel  # False: the block runs no parallel region (nothing to cap, no check)

    def __enter__(self) -> None:
        self.restore = 0
        cap = busy_cap() if self.parallel else 0  # cached between samples: ~0.1 us
        if cap:
            current = thread_count()
            if cap < current:
                _set_count(cap)
                self.restore = current

    def __exit__(self, *exc: object) -> None:
        if self.restore:
            _set_count(self.restore)


def thread_count() -> int:
    """numba's thread count for the calling thread, as ``numba.get_num_threads()`` (which checks that
    the pool is running on every call: ~0.6 us) but through numba's own C getter once the pool runs
    (~0.1 us).

    >>> thread_count() >= 1
    True
    """
    getter = _counters.get("get")
    if getter is None:
        import numba

        count = numba.get_num_threads()  # starts the pool
        _load_counters()
        return count
    return getter()


def _set_count(n: int) -> None:
    """numba.set_num_threads(n) for 1 <= n <= the pool's size, without its per-call checks once the pool runs."""
    setter = _counters.get("set")
    if setter is None:
        import numba

        numba.set_num_threads(n)
        _load_counters()
    else:
        setter(n)


def _load_counters() -> None:
    """numba's C getter/setter of the calling thread's count (private names: numba's public functions where
    they are missing)."""
    import numba

    try:
        from numba.np.ufunc import parallel

        getter, setter = parallel._get_num_threads, parallel._set_num_threads
        if getter() != numba.get_num_threads():  # not what the public function reads: do not use it
            raise AttributeError
    except (ImportError, AttributeError, TypeError):
        getter, setter = numba.get_num_threads, numba.set_num_threads
    _counters["get"], _counters["set"] = getter, setter


_counters: dict = {}


_NO_CAP = os.environ.get("SKELETAL_THREAD_CAP", "1").strip() in ("0", "off", "no", "false")

try:
    _CLOCK_TICKS = float(os.sysconf("SC_CLK_TCK"))
except (ValueError, OSError, AttributeError):
    _CLOCK_TICKS = 100.0


def chosen_layer() -> str:
    """The layer :func:`choose` set (numba's ``threading_layer()`` says which one it then loaded)."""
    return choose()


# choose() runs as numba loads (skeletal._setup), prepare_environment() on ``import skeletal``
