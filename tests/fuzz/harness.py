"""Coverage-guided fuzzing of skeletal's own readers with atheris (libFuzzer for Python).

Usage::

    python tests/fuzz/harness.py TARGET [libFuzzer options] [CORPUS_DIR ...]

``TARGET`` is one of :data:`targets.TARGETS` (``bvh``, ``gltf``, ``fbx``, ``collada``, ``any``; ``usd``
is a hook until ``skeletal.io.usd`` exists). The libFuzzer options are passed through, e.g.
``-seed=1 -runs=20000 -max_total_time=10 -rss_limit_mb=1024 -timeout=10
-artifact_prefix=findings/``; the first corpus folder receives the new inputs (give a scratch folder
first and ``tests/fuzz/seeds/TARGET`` after it so the committed seeds are read, not written).

Before instrumenting, every seed is run once, so the numba kernels compile with plain bytecode (numba
cannot compile atheris' instrumented bytecode); then every Python function of ``skeletal`` except the
numba-compiled ones is instrumented for coverage. An input that makes the target raise anything but
a ``skeletal`` error is saved as ``<artifact_prefix>crash-<sha1>``, one that runs past ``-timeout``
seconds as ``timeout-<sha1>``, one that takes the process over ``-rss_limit_mb`` as ``oom-<sha1>``.
``scripts/fuzz`` runs every target for longer; ``tests/test_fuzz.py`` runs each for a few seconds.

>>> # python tests/fuzz/harness.py bvh -seed=1 -max_total_time=10 /tmp/corpus tests/fuzz/seeds/bvh
"""

from __future__ import annotations

import gc
import sys
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import atheris

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


def instrument_skeletal() -> int:
    """Add atheris coverage to every loaded ``skeletal`` Python function except numba's."""
    from numba.core.dispatcher import Dispatcher

    jitted = {id(o.py_func.__code__) for o in gc.get_objects() if isinstance(o, Dispatcher)}
    count = 0
    for obj in gc.get_objects():
        if (isinstance(obj, types.FunctionType) and (getattr(obj, "__module__", None) or "").startswith("skeletal")
                and id(obj.__code__) not in jitted):
            atheris.instrument_func(obj)
            count += 1
    return count


def main(argv: list[str]) -> None:
    if len(argv) < 2 or argv[1] not in targets.TARGETS:
        sys.exit(f"usage: {argv[0]} TARGET [libFuzzer options] [corpus dirs]; TARGET one of {', '.join(targets.TARGETS)}")
    name = argv[1]
    target = targets.TARGETS[name]
    if name == "usd" and not targets.usd_available():
        sys.exit("the usd target is a hook: skeletal.io.usd does not exist yet (see tests/fuzz/targets.py)")
    targets.quiet()
    rest = argv[2:]
    warm_up(target, seed_files(name, rest))
    count = instrument_skeletal()
    print(f"harness: target {name}, {count} skeletal functions instrumented", file=sys.stderr, flush=True)
    dictionary = HERE / "dicts" / f"{name}.dict"
    if dictionary.is_file() and not any(a.startswith("-dict=") for a in rest):
        rest = [f"-dict={dictionary}"] + rest
    atheris.Setup([argv[0]] + rest, target)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
