"""Coverage-guided fuzzing of skeletal's own readers with atheris (libFuzzer for Python).

Usage::

    python tests/fuzz/harness.py TARGET [libFuzzer options] [CORPUS_DIR ...]

``TARGET`` is one of :data:`targets.TARGETS` (``bvh``, ``gltf``, ``fbx``, ``collada``, ``usd`` (needs
usd-core), ``any``). The libFuzzer options are passed through, e.g.
``-seed=1 -runs=20000 -max_total_time=10 -rss_limit_mb=1024 -timeout=10
-artifact_prefix=findings/``; the first corpus folder receives the new inputs (give a scratch folder
first and ``tests/fuzz/seeds/TARGET`` after it so the committed seeds are read, not written).

Before instrumenting, every seed is run once, so the numba kernels compile with plain bytecode (numba
cannot compile atheris' instrumented bytecode); then every Python function of ``skeletal`` except the
numba-compiled ones is instrumented for coverage. An input that makes the target raise anything but
a ``skeletal`` error is saved as ``<artifact_prefix>crash-<sha1>``, one that runs past ``-timeout``
seconds as ``timeout-<sha1>``, one that takes the process over ``-rss_limit_mb`` as ``oom-<sha1>``.
Memory amplification (issue 32): the readers run under a per-file budget of 32 MiB, and an input of N
bytes whose traced peak allocation is over 64 MiB + 64 x N is a finding too (``crash-<sha1>``, the
message saying ``AmplificationError``; see ``memory.py``).
``scripts/fuzz`` runs every target for longer; ``tests/test_fuzz.py`` runs each for a few seconds.

>>> # python tests/fuzz/harness.py bvh -seed=1 -max_total_time=10 /tmp/corpus tests/fuzz/seeds/bvh
"""

from __future__ import annotations

import gc
import hashlib
import sys
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import atheris
import memory
import targets


def seed_files(name: str, extra: list[str]) -> list[Path]:
    """The seeds of target ``name`` (committed ones, then the corpus folders named on the command line)."""
    folders = [HERE / "seeds" / s for s in (["bvh", "gltf", "fbx", "collada"] if name == "any" else [name])]
    folders += [Path(a) for a in extra if not a.startswith("-") and Path(a).is_dir()]
    return [p for folder in folders if folder.is_dir() for p in sorted(folder.iterdir()) if p.is_file()]


def warm_up(target, files: list[Path]) -> None:
    """Run every seed once, uninstrumented, so the numba kernels they reach compile now."""
    for path in files:
        try:
            target(path.read_bytes())
        except Exception:  # a seed that is a finding shows up again in the fuzzing
            pass


def _uses_numpy(code: types.CodeType) -> bool:
    """Whether ``code`` (or a function or comprehension nested in it) names ``np``."""
    return "np" in code.co_names or any(isinstance(c, types.CodeType) and _uses_numpy(c) for c in code.co_consts)


def instrument_skeletal() -> tuple[int, int]:
    """Add atheris coverage to every loaded ``skeletal`` Python function except numba's.

    Comparison tracing (which feeds the operands of ``==``, ``<``, ... to the fuzzer) is left out of
    functions that use numpy: atheris keeps a reference to the result of every traced comparison
    that is not a plain number, string or bytes, so ``raw == ord("<")`` over a file's bytes leaks an
    array per call (1.8 KB per run on the Collada check, 1 GB in ten minutes; measured with atheris
    3.0). Those functions still report branch coverage. Returns (functions, with comparison tracing).
    """
    from atheris.instrument_bytecode import patch_code
    from numba.core.dispatcher import Dispatcher

    jitted = {id(o.py_func.__code__) for o in gc.get_objects() if isinstance(o, Dispatcher)}
    count = traced = 0
    for obj in gc.get_objects():
        if (isinstance(obj, types.FunctionType) and (getattr(obj, "__module__", None) or "").startswith("skeletal")
                and id(obj.__code__) not in jitted):
            trace = not _uses_numpy(obj.__code__)
            obj.__code__ = patch_code(obj.__code__, trace, True)
            count += 1
            traced += trace
    return count, traced


def saving(target, argv: list[str]):
    """``target``, saving an input that makes it raise as ``<artifact_prefix>crash-<sha1>`` before the
    exception goes on to libFuzzer (which saves it too, unless its timeout alarm ends the process
    while the traceback is printed: seen on long runs under load)."""
    prefix = next((a.split("=", 1)[1] for a in argv if a.startswith("-artifact_prefix=")), "./")

    def run(data: bytes) -> None:
        try:
            target(data)
        except Exception:
            path = f"{prefix}crash-{hashlib.sha1(data).hexdigest()}"
            with open(path, "wb") as out:
                out.write(data)
            print(f"harness: input saved as {path}", file=sys.stderr, flush=True)
            raise

    return run


def main(argv: list[str]) -> None:
    if len(argv) < 2 or argv[1] not in targets.TARGETS:
        sys.exit(f"usage: {argv[0]} TARGET [libFuzzer options] [corpus dirs]; TARGET one of {', '.join(targets.TARGETS)}")
    name = argv[1]
    target = targets.TARGETS[name]
    if name == "usd" and not targets.usd_available():
        sys.exit("the usd target cannot run: skeletal.io.usd or usd-core (pxr) is not installed")
    targets.quiet()
    from skeletal.io.budget import set_memory_budget

    set_memory_budget(memory.FUZZ_BUDGET)  # the readers' budget while fuzzing (see memory.py)
    rest = argv[2:]
    warm_up(target, seed_files(name, rest))
    count, traced = instrument_skeletal()
    print(f"harness: target {name}, {count} skeletal functions instrumented ({traced} with comparison tracing)",
          file=sys.stderr, flush=True)
    dictionary = HERE / "dicts" / f"{name}.dict"
    if dictionary.is_file() and not any(a.startswith("-dict=") for a in rest):
        rest = [f"-dict={dictionary}"] + rest
    # after the warm-up: numba's compilation is not the input's doing
    atheris.Setup([argv[0]] + rest, saving(memory.checked(target), rest))
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
