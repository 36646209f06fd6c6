"""Cold start: a mixer's first frames in numpy while its kernels compile in a background process.

On a fresh install (an empty numba cache) a :class:`~skeletal.Player`'s first update would wait for
numba to compile the update kernel (seconds to tens of seconds). Instead, the first time a mixer
runs (:meth:`skeletal.Mixer._run` calls :func:`step`):

1. if its kernels are already in numba's on-disk cache, they are loaded and used as always;
2. otherwise a child process (:func:`_main` in a new Python, its output to a pipe) compiles
   exactly the signatures this mixer needs (the job's constructor, the update kernel, the clock
   kernel) and writes them to the cache (``NUMBA_CACHE_DIR`` when set), while every frame runs in
   numpy (:mod:`skeletal.playback.numpy_frame`: same values to rounding);
3. the child reports each kernel as it caches it, and a thread loads it; at the first frame
   whose kernels are all loaded the mixer runs compiled from then on (full speed), with nothing
   asked of the user. For one character the child compiles the single-action update first (the
   character switches to it unless it has blended) and the update with blending last (a character
   that blends waits for it, or, blending after it switched, goes back to numpy frames until it is
   cached: :func:`resume`).

Nothing changes for what the numpy frame does not cover (IK, additive layers, snapshots, crowds:
they compile in process as before), when the cache directory is not writable, when the child
fails, or with ``SKELETAL_NO_FALLBACK=1``. A child still compiling when the program exits keeps
going until its kernels are cached (it holds no terminal or pipe of the parent's), so the next run
starts at full speed.

>>> player = skeletal.Player(asset)          # fresh install: no compile wait    # doctest: +SKIP
>>> player.play("Walk"); player.update(1 / 60)    # a numpy frame                # doctest: +SKIP
>>> skeletal.playback.coldstart.wait(player.mixer)    # (tests) the child's compile done  # doctest: +SKIP
True
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
import time
from typing import Any, Callable

#: set to 1 to compile in process as before (no numpy frames, no background process)
ENV_OFF = "SKELETAL_NO_FALLBACK"
#: CPU seconds the background compile takes on a 2-core AMD EPYC VM (the notice's figure)
BACKGROUND_SECONDS = 10.0


def enabled() -> bool:
    """Whether the numpy frames and background compile are on (``SKELETAL_NO_FALLBACK`` unset or 0)."""
    return os.environ.get(ENV_OFF, "") in ("", "0")


# -- what a mixer needs compiled ------------------------------------------------------------------

def _recipes() -> dict[str, Callable[[], Any]]:
    """The kernels a request names, made the same way in the parent and the child (a serial twin
    has its own cache entries under its own name)."""
    from .._compile import serial_variant
    from . import jobs
    from . import kernels as K

    return {
        "new_playback_job": lambda: jobs._new_playback_job,
        "update": lambda: K.update,
        "update_serial": lambda: serial_variant(K.update),
        "single_action": K.single_action_update,
        "advance": lambda: K.advance,
        "advance_serial": lambda: serial_variant(K.advance),
    }


def requests(mixer: Any) -> list[tuple[str, tuple]]:
    """The (recipe, argument types) of the kernels a mixer's compiled frames run, in the order the
    child compiles them: the job's constructor, the clock kernel of play() / weight changes, the
    update kernel on that job; for one character the single-action update first (a character that
    has not blended switches to it as soon as it is cached: the soonest full speed for plain
    playback), then the serial one with blending (a character that blends waits for it)."""
    import numpy as np
    from numba import typeof, types

    from . import jobs
    from . import kernels as K

    values = jobs._check("PlaybackJob", jobs.PLAYBACK_FIELDS, mixer._job_fields())
    arg_types = tuple(typeof(v) for v in values)
    job_type = jobs.PlaybackJobType(list(zip(jobs.PLAYBACK_FIELDS, arg_types)))
    cs = mixer.clipset
    one = mixer.count == 1
    fs, ist = np.zeros((mixer.count, K.NF)), np.zeros((mixer.count, K.NI), np.int64)
    advance_args = tuple(typeof(a) for a in (fs[:, None], ist[:, None], mixer.slot_clip[:1], cs.clip_table,
                                             cs.duration, cs.marker_time, 0.0))
    update_args = (job_type, types.none, types.float64, types.int64)
    return [
        ("new_playback_job", (typeof(tuple(values)),)),  # (*values): numba's dispatcher packs them in a tuple
        ("advance_serial" if one else "advance", advance_args),
        *([("single_action", update_args), ("update_serial", update_args)] if one else [("update", update_args)]),
    ]


#: what one character runs with the kernel with blending (whatever it plays)
_BLENDING = {"new_playback_job", "advance_serial", "update_serial"}


def needed(mixer: Any) -> set[str]:
    """The recipes a mixer's next compiled frame runs: the job's constructor, the clock kernel and the
    update kernel it would pick (:meth:`skeletal.Mixer._update_kernel`)."""
    if mixer.count > 1:
        return {"new_playback_job", "advance", "update"}
    return {"new_playback_job", "advance_serial", "update_serial" if mixer._blends else "single_action"}


def _ready(mixer: Any, cached: Callable[[set[str]], bool]) -> bool:
    """Whether the kernels of ``mixer``'s next compiled frame are loaded (``cached(names)``): the ones it
    would pick, or for one character the kernel with blending (then picked: ``mixer._blends``)."""
    if cached(needed(mixer)):
        return True
    if mixer.count == 1 and not mixer._blends and cached(_BLENDING):
        mixer._blends = True
        return True
    return False


def _load_cached(dispatcher: Any, args: tuple) -> bool:
    """Add ``dispatcher``'s overload for ``args`` from numba's on-disk cache, compiling nothing
    (numba's Dispatcher.compile up to its cache lookup); False on a miss."""
    try:
        from numba.core.compiler_lock import global_compiler_lock

        with global_compiler_lock:
            if dispatcher.overloads.get(tuple(args)) is not None:
                return True
            cres = dispatcher._cache.load_overload(tuple(args), dispatcher.targetctx)
            if cres is None:
                return False
            if not cres.objectmode:
                dispatcher.targetctx.insert_user_function(cres.entry_point, cres.fndesc, [cres.library])
            dispatcher.add_overload(cres)
            return True
    except Exception:  # numba internals moved: treat as a miss (the normal path compiles or loads)
        return False


def _load_all(reqs: list[tuple[str, tuple]]) -> bool:
    recipes = _recipes()
    return all(_load_cached(recipes[name](), args) for name, args in reqs)


def _loaded(reqs: list[tuple[str, tuple]], names: set[str]) -> bool:
    """Whether the kernels ``names`` of ``reqs`` are cached (loaded now, when they are)."""
    return _load_all([r for r in reqs if r[0] in names])


def _cache_writable(reqs: list[tuple[str, tuple]]) -> bool:
    """Whether numba can write these kernels' cache files (the child's work would be lost otherwise):
    a file can be made in each one's cache folder (``NUMBA_CACHE_DIR`` when set)."""
    import tempfile

    recipes = _recipes()
    for path in {getattr(getattr(recipes[name](), "_cache", None), "_cache_path", None) for name, _ in reqs}:
        if not path:
            return False  # a kernel without a disk cache
        try:
            with tempfile.TemporaryFile(dir=path):
                pass
        except OSError:
            return False
    return True


# -- the background compile -----------------------------------------------------------------------

def _child_command() -> list[str]:
    return [sys.executable, "-c", "import sys; from skeletal.playback.coldstart import _main; sys.exit(_main())"]


class Background:
    """One child process compiling ``reqs`` into numba's cache. ``finished()`` polls it (a reaped
    process: no zombie); ``wait(timeout)`` blocks until it exits; ``ok`` after it did: it exited 0."""

    def __init__(self, reqs: list[tuple[str, tuple]]):
        self.requests = reqs
        self.started = time.perf_counter()
        self.ended: float | None = None
        self.compiled: list[str] = []  # the recipes the child reported cached, in order
        self.loaded: set[str] = set()  # those this process has loaded
        env = dict(os.environ, **{ENV_OFF: "1", "SKELETAL_QUIET_COMPILE": "1"})
        # the folder holding the skeletal package: the child imports these very files (numba's cache
        # entries are keyed by the source file's path)
        package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env["PYTHONPATH"] = package_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self.process = subprocess.Popen(_child_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, env=env, close_fds=True)
        try:
            assert self.process.stdin is not None
            self.process.stdin.write(pickle.dumps(reqs))
            self.process.stdin.close()
        except OSError:  # the child died at once: finished() reports it
            pass
        self._done = threading.Event()
        threading.Thread(target=self._watch, name="skeletal-coldstart", daemon=True).start()

    def _watch(self) -> None:
        """Read the child's progress lines until it exits (loading each kernel it reports cached: the
        frame that switches to them then does not wait for numba's cache loads), then reap it."""
        assert self.process.stdout is not None
        by_name = dict(self.requests)
        for line in self.process.stdout:
            name = line.decode(errors="replace").strip()
            self.compiled.append(name)
            if name in by_name and _load_all([(name, by_name[name])]):
                self.loaded.add(name)
        self.process.wait()
        self.ended = time.perf_counter()
        self._done.set()

    def finished(self) -> bool:
        return self._done.is_set()

    @property
    def ok(self) -> bool:
        return self._done.is_set() and self.process.returncode == 0

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the child exits (or ``timeout`` seconds); True when it exited successfully."""
        self._done.wait(timeout)
        return self.ok


_running: dict[tuple, Background] = {}
_lock = threading.Lock()
_noticed = {"done": False}


def _background(reqs: list[tuple[str, tuple]]) -> Background:
    """The child compiling ``reqs``: one per distinct set in this process (two players of one model
    share it); a finished, failed one is not reused."""
    key = tuple(reqs)
    with _lock:
        job = _running.get(key)
        if job is None or (job.finished() and not job.ok):
            job = _running[key] = Background(reqs)
            if not _noticed["done"] and os.environ.get("SKELETAL_QUIET_COMPILE", "") in ("", "0"):
                _noticed["done"] = True
                print(f"skeletal: compiling kernels for this CPU in the background, once (about "
                      f"{BACKGROUND_SECONDS:.0f} s); frames run in numpy until then", file=sys.stderr, flush=True)
        return job


# -- the mixer's hook ------------------------------------------------------------------------------

def _decide(mixer: Any) -> Background | bool:
    """A mixer's first run: False (compiled frames, as before) or the Background its numpy frames wait on."""
    from . import numpy_frame

    if not enabled() or not numpy_frame.covers(mixer):
        return False
    try:
        reqs = requests(mixer)
    except Exception:  # a field numba cannot type: the normal path reports it
        return False
    if _ready(mixer, lambda names: _cached(reqs, names)) or not _cache_writable(reqs):
        return False
    try:
        return _background(reqs)
    except OSError:  # no new process to be had (limits, a frozen application): compile in process
        return False


def _cached(reqs: list[tuple[str, tuple]], names: set[str]) -> bool:
    """Whether the kernels ``names`` are in the disk cache (loaded now: the frame uses them next)."""
    return _loaded(reqs, names)


def step(mixer: Any, dt: float, stages: int) -> int | None:
    """Run ``stages`` of ``mixer``'s update in numpy while its kernels compile in the background and
    return the event count; None when the compiled path runs this frame: decided on the mixer's first
    run, and from the first frame at which the kernels it needs are cached (or the child failed)."""
    from . import numpy_frame

    state = mixer._cold
    if state is None:
        state = mixer._cold = _decide(mixer)
    if state is False:
        return None
    if not numpy_frame.covers(mixer):  # an IK stage or additive layer since: compile as before
        mixer._cold = False
        return None
    if _ready(mixer, lambda names: names <= state.loaded) or state.finished():
        mixer._cold = False  # (a failed child: the compiled path compiles in process)
        return None
    return numpy_frame.step(mixer, dt, stages)


def resume(mixer: Any) -> bool:
    """A single character on the single-action kernel needs blending: True when the blending kernel
    is not cached yet and numpy frames resume (``mixer._cold`` set) until the background compile
    has it; False when the compiled path should go on (it is cached, or the numpy frames are off)."""
    from . import numpy_frame

    if not enabled() or not numpy_frame.covers(mixer):
        return False
    try:
        reqs = requests(mixer)
    except Exception:
        return False
    if _cached(reqs, needed(mixer)) or not _cache_writable(reqs):
        return False
    try:
        mixer._cold = _background(reqs)
    except OSError:
        return False
    return True


def wait(mixer: Any, timeout: float | None = None) -> bool:
    """Block until ``mixer``'s background compile (if any) has finished; True when one ran and
    succeeded. Its next update loads the kernels and runs compiled."""
    state = getattr(mixer, "_cold", None)
    return bool(state) and state.wait(timeout)


def _main() -> int:
    """The child: compile the pickled requests on stdin into numba's cache, one line per kernel done."""
    reqs = pickle.loads(sys.stdin.buffer.read())  # (skeletal._setup sets numba up when the recipes import it)

    recipes = _recipes()
    for name, args in reqs:
        recipes[name]().compile(tuple(args))
        try:
            print(name, flush=True)
        except OSError:  # the parent has gone: keep compiling for the next run
            pass
    return 0

