"""Compilation of skeletal's numba kernels: cheaper cold compiles, a one-line notice, serial variants.

Imported by ``skeletal._setup`` as soon as numba is imported (before any kernel compiles), so that:

* numba's array slice-assignment error path does not compile a string formatter into every kernel
  that assigns an array to a slice (``out[:, :] = rest``): numba formats the two shapes into the
  message with ``str.join`` and f-strings, which cost ~10 s of a cold first frame (measured with the
  ``numba:compile`` event on Soldier.glb). The message becomes numba's own generic one ("cannot assign
  slice from input of different size"); the check itself is unchanged.
* the first real compile of a skeletal kernel in a process prints one line to stderr,
  ``skeletal: compiling kernels for this CPU, once (about N s)``. numba fires its ``numba:compile``
  event only on a cache miss (an on-disk cache hit loads without it), so the line appears exactly when
  the cache is cold for that kernel, and never again once the cache is warm.
* a kernel called from another kernel with a constant argument is compiled once, for the plain
  type, not again for the constant's literal type;
* a cached kernel is stale when any skeletal module it may have inlined code from changed, not only
  its own file: numba keys a cache entry on the hash of the kernel's own source file, so a kernel
  whose callee changed in another module kept running the old callee's code (:func:`_patch_source_stamp`);
* :func:`serial_variant` makes the serial twin of a ``parallel=True`` kernel from the same Python
  body (``prange`` runs as ``range``), cached on disk under its own name, so that one character never
  compiles (or spins up) the thread pool's version.

>>> from skeletal._compile import serial_variant
>>> from skeletal.playback import kernels
>>> evaluate_one = serial_variant(kernels.evaluate)     # same arguments, one thread, no parfor compile
"""

from __future__ import annotations

import os
import sys
import threading
import types

import numba
from numba.core import event as _event

# Estimated cold compile time (CPU seconds on a 2-core AMD EPYC VM) of a kernel and the kernels it
# calls, by module-qualified name; the notice says "about N s" with the figure of the first kernel
# that misses the cache, and is printed only when that figure is at least _NOTICE_MIN_SECONDS.
COLD_SECONDS = {
    "skeletal.playback.kernels.evaluate_serial": 12.0,   # a Player's whole first frame
    "skeletal.playback.kernels.evaluate": 25.0,          # a Mixer's (parallel)
    "skeletal.playback.kernels.update_single_action": 8.0,  # a Player's first frame (no blending yet)
    "skeletal.playback.kernels.update_serial": 3.0,     # a Player's first blend (the IK job adds the solvers)
    # the jobs' constructors compile first and quickly: the notice waits for the kernel after them
    "skeletal.playback.jobs._new_playback_job": 0.5,
    "skeletal.playback.jobs._new_ik_job": 0.5,
    "skeletal.playback.jobs._new_foot_job": 0.5,
    "skeletal.playback.kernels.advance": 2.0,
    "skeletal.playback.kernels.update": 25.0,           # a crowd's / Mixer's (parallel)
    "skeletal.playback.wide.update_wide": 30.0,         # a crowd's wide path
    "skeletal.anim.pose._local_to_world_batch_serial": 0.5,
    "skeletal.anim.pose.palette_batch_serial": 0.5,
}
_DEFAULT_SECONDS = 3.0
_NOTICE_MIN_SECONDS = 2.0

_state = {"noticed": False}
_lock = threading.Lock()


def _quiet() -> bool:
    return os.environ.get("SKELETAL_QUIET_COMPILE", "") not in ("", "0")


class _CompileNotice(_event.Listener):
    """Prints the one-line notice at the first cache miss of a skeletal kernel in this process."""

    def __init__(self):
        super().__init__()
        self._depth = threading.local()

    def on_start(self, ev) -> None:
        depth = getattr(self._depth, "n", 0)
        self._depth.n = depth + 1
        if _state["noticed"] or depth:  # kernels compiled inside another's compile are part of its figure
            return
        dispatcher = ev.data.get("dispatcher")
        func = getattr(dispatcher, "py_func", None)
        module = getattr(func, "__module__", "") or ""
        if not module.startswith("skeletal"):
            return
        seconds = COLD_SECONDS.get(f"{module}.{func.__qualname__}", _DEFAULT_SECONDS)
        if seconds < _NOTICE_MIN_SECONDS:
            return
        with _lock:
            if _state["noticed"]:
                return
            _state["noticed"] = True
        if not _quiet():
            print(f"skeletal: compiling kernels for this CPU, once (about {seconds:.0f} s)", file=sys.stderr,
                  flush=True)

    def on_end(self, ev) -> None:
        self._depth.n = max(getattr(self._depth, "n", 1) - 1, 0)


def _patch_shape_error() -> None:
    """Swap numba's shape-mismatch error for slice assignment (a string formatter compiled into every
    kernel with an array-to-slice copy) for a constant message. A numba without the hook is left as is."""
    try:
        from numba.core.extending import overload
        from numba.np import arrayobj
    except ImportError:  # pragma: no cover - numba internals moved
        return
    if not hasattr(arrayobj, "raise_with_shape_context") or getattr(arrayobj, "_skeletal_patched", False):
        return

    def raise_shape_mismatch(src_shapes, index_shape):  # pragma: no cover - typing stub
        raise NotImplementedError

    @overload(raise_shape_mismatch)
    def _ol_raise_shape_mismatch(src_shapes, index_shape):
        def impl(src_shapes, index_shape):
            raise ValueError("cannot assign slice from input of different size")

        return impl

    arrayobj.raise_with_shape_context = raise_shape_mismatch
    arrayobj._skeletal_patched = True


def _patch_literal_specialisation() -> None:
    """Compile skeletal's kernels for the plain types of their arguments only. A call like
    ``_sample_track_into(..., tmp, 0)`` from another kernel would otherwise compile a second copy
    specialised on ``Literal[int](0)`` (measured: 2.8 s of a cold first frame for one such call);
    no skeletal kernel needs literal specialisation. Other packages' functions are left as they are."""
    from numba.core import types
    from numba.core.dispatcher import Dispatcher

    if getattr(Dispatcher, "_skeletal_unliteral", False):
        return
    original = Dispatcher.get_call_template

    def get_call_template(self, args, kws):
        module = getattr(self.py_func, "__module__", None) or ""
        if module.startswith("skeletal"):
            args = tuple(types.unliteral(a) for a in args)
            kws = {k: types.unliteral(v) for k, v in kws.items()}
        return original(self, args, kws)

    Dispatcher.get_call_template = get_call_template
    Dispatcher._skeletal_unliteral = True


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_IMPORT_LINE = None  # the compiled pattern of a skeletal import (built on first use)


def _skeletal_imports(path: str) -> set[str]:
    """The skeletal source files ``path`` imports (relative ``from .x import`` and absolute
    ``skeletal.x``), read from its text: modules and packages, whose ``__init__`` counts."""
    import re

    global _IMPORT_LINE
    if _IMPORT_LINE is None:
        _IMPORT_LINE = re.compile(r"^[ \t]*(?:from[ \t]+(\.+)([\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)|"
                                  r"(?:from|import)[ \t]+skeletal((?:\.\w+)*))", re.M)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return set()
    here = os.path.dirname(path)
    found = set()
    for dots, dotted, names, absolute in _IMPORT_LINE.findall(text):
        if dots:
            base = here
            for _ in range(len(dots) - 1):
                base = os.path.dirname(base)
            stem = os.path.join(base, *dotted.split(".")) if dotted else base
            candidates = [stem]
            # ``from . import kernels``: each name may be a module of that package
            candidates += [os.path.join(stem, n.strip()) for n in names.strip("()").replace("\n", " ").split(",")
                           if n.strip() and " " not in n.strip()]
        else:
            candidates = [os.path.join(_PACKAGE_DIR, *absolute.strip(".").split("."))] if absolute else [_PACKAGE_DIR]
        for stem in candidates:
            for file in (stem + ".py", os.path.join(stem, "__init__.py")):
                if os.path.isfile(file) and os.path.abspath(file).startswith(_PACKAGE_DIR):
                    found.add(os.path.abspath(file))
    return found


_CLOSURE_STAMPS: dict[str, bytes] = {}


def _closure_stamp(path: str) -> bytes:
    """sha256 over the contents of ``path`` and every skeletal file it imports, transitively (memoised
    per process: a process compiles against the sources it imported)."""
    import hashlib

    stamp = _CLOSURE_STAMPS.get(path)
    if stamp is None:
        seen, todo = set(), [os.path.abspath(path)]
        while todo:
            file = todo.pop()
            if file not in seen:
                seen.add(file)
                todo.extend(_skeletal_imports(file) - seen)
        digest = hashlib.sha256()
        for file in sorted(seen):
            digest.update(file[len(_PACKAGE_DIR):].encode())
            try:
                with open(file, "rb") as f:
                    digest.update(hashlib.sha256(f.read()).digest())
            except OSError:
                digest.update(b"?")
        stamp = _CLOSURE_STAMPS[path] = digest.digest()
    return stamp


def _patch_source_stamp() -> None:
    """Key the on-disk cache of skeletal's kernels on their module's whole skeletal import closure.

    numba marks a cache entry stale when the hash of the kernel's own source file changes; a kernel
    inlines (and so freezes in its cache entry) code from the modules it calls into, and after an
    edit or an upgrade that changed only a callee's module, the old code kept running silently. The
    stamp of a kernel defined in skeletal becomes (numba's own stamp, the closure's sha256): any change
    in a module it imports, directly or not, recompiles it. A numba without the locator class is left
    as is."""
    try:
        from numba.core import caching
    except ImportError:  # pragma: no cover - numba's layout
        return
    mixin = getattr(caching, "_SourceFileBackedLocatorMixin", None)
    if mixin is None or getattr(mixin, "_skeletal_closure", False):
        return
    original = mixin.get_source_stamp

    def get_source_stamp(self):
        stamp = original(self)
        path = getattr(self, "_py_file", "")
        if path and os.path.abspath(path).startswith(_PACKAGE_DIR + os.sep):
            return (stamp, _closure_stamp(path))
        return stamp

    mixin.get_source_stamp = get_source_stamp
    mixin._skeletal_closure = True


def serial_variant(dispatcher, suffix: str = "_serial", constants: dict | None = None):
    """The serial twin of a ``parallel=True`` numba kernel: the same Python body compiled without
    parfors (``prange`` is ``range``), cached on disk under ``<name><suffix>`` so that the two variants
    never overwrite each other's cache entries. Created once per kernel and suffix (memoised on the
    dispatcher). ``constants``: module globals the copy sees with other values (numba folds globals as
    compile-time constants, so a branch on one is pruned: e.g. a feature left out); give each set its
    own ``suffix``.

    >>> from skeletal.pose import palette_batch
    >>> palette_one = serial_variant(palette_batch)       # doctest: +SKIP
    """
    existing = _SERIAL.get((id(dispatcher), suffix))
    if existing is not None and existing[0] is dispatcher:
        return existing[1]
    # The parallel bodies call numba.get_thread_id(), which reads the threading layer. Compiling starts
    # the layer; loading the serial twin from the disk cache does not (the parallel kernel's cache entry
    # starts it on load, a serial one has no such hook) and then the call jumps through a null pointer.
    from numba.np.ufunc.parallel import _launch_threads

    _launch_threads()
    src = dispatcher.py_func
    scope = src.__globals__ if not constants else {**src.__globals__, **constants}
    func = types.FunctionType(src.__code__, scope, src.__name__ + suffix, src.__defaults__, src.__closure__)
    func.__qualname__ = src.__qualname__ + suffix
    func.__module__ = src.__module__
    func.__doc__ = src.__doc__
    options = {k: v for k, v in dispatcher.targetoptions.items() if k not in ("parallel", "nopython")}
    cached = type(getattr(dispatcher, "_cache", None)).__name__ != "NullCache"  # cache=True is not a target option
    serial = numba.njit(cache=cached, **options)(func)
    _SERIAL[id(dispatcher), suffix] = (dispatcher, serial)
    return serial


_SERIAL: dict[tuple[int, str], tuple] = {}


def install() -> None:
    """Apply the patch and register the notice (idempotent; done when numba loads: ``skeletal._setup``)."""
    if _state.get("installed"):
        return
    _state["installed"] = True
    _patch_shape_error()
    _patch_literal_specialisation()
    _patch_source_stamp()
    _event.register("numba:compile", _CompileNotice())


install()
