"""Fuzzing of skeletal's own readers (issue 21, "Fuzzing, in CI"); the harness is ``tests/fuzz/``.

* every finding the fuzzer ever made is kept in ``tests/fuzz/regressions/<target>/`` and replayed
  here through the same target function (no fuzzer needed): a non-``skeletal`` exception or an
  inconsistent document is a failure;
* every seed named with every other format's suffix goes through ``skeletal.load``: read or one
  ``skeletal`` error, never a traceback;
* a short coverage-guided run of each target (atheris, fixed seed, about a minute in all, RSS limit
  1 GB, 10 s per input) in a subprocess: any crash, hang, traceback or allocation over the limit is a
  failure whose message says which file to add to the regressions. Skipped when atheris (the ``fuzz``
  extra) is not installed. ``scripts/fuzz`` runs the same targets for longer.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

import skeletal

FUZZ = Path(__file__).resolve().parent / "fuzz"
REPO = FUZZ.parents[1]
from fuzz.memory import FUZZ_BUDGET, AmplificationError, amplification_limit, checked
from fuzz.targets import TARGETS, usd_available  # tests/fuzz, importable as `fuzz` (see conftest.py)

REGRESSIONS = sorted((folder.name, path) for folder in (FUZZ / "regressions").iterdir() if folder.is_dir()
                     for path in sorted(folder.iterdir()) if path.is_file())
SEEDS = sorted(path for folder in (FUZZ / "seeds").iterdir() if folder.is_dir() for path in sorted(folder.iterdir()))

#: Seconds of fuzzing per target in the test run (about a minute in all) and the run cap at a fixed seed.
SHORT_RUNS = {"bvh": (12, 30_000), "gltf": (14, 20_000), "fbx": (6, 40_000), "collada": (6, 40_000), "usd": (8, 5_000),
              "any": (8, 20_000)}


def test_regression_folders_are_targets():
    folders = {p.name for p in (FUZZ / "regressions").iterdir() if p.is_dir()}
    assert folders <= set(TARGETS), folders - set(TARGETS)
    assert len(REGRESSIONS) >= 10


@pytest.mark.parametrize("target,path", REGRESSIONS, ids=[f"{t}/{p.name}" for t, p in REGRESSIONS])
def test_regression_replays(target, path):
    """A kept finding: the reader now refuses it with a skeletal error or reads it consistently, and
    within the fuzzer's memory-amplification bound."""
    if target == "usd" and not usd_available():
        pytest.skip("usd-core is not installed (pip install 'skeletal[usd]'): USD findings not replayed")
    from skeletal.io.budget import set_memory_budget

    set_memory_budget(FUZZ_BUDGET)
    try:
        checked(TARGETS[target])(path.read_bytes())
    finally:
        set_memory_budget(None)
        tracemalloc.stop()


def test_amplification_check_fails_a_small_input_that_allocates_much():
    """The harness's memory check: 8 MB from 100 bytes is a finding, 100 KB from 100 bytes is not."""
    import numpy as np

    run = checked(lambda data: np.ones(8 << 20, np.uint8).sum(), floor=1 << 20)
    try:
        with pytest.raises(AmplificationError, match=r"100 bytes of input made the target allocate 8\.\d+ MB"):
            run(b"x" * 100)
        checked(lambda data: np.ones(100_000, np.uint8).sum(), floor=1 << 20)(b"x" * 100)
        assert amplification_limit(1000, floor=1 << 20) == (1 << 20) + 64_000
    finally:
        tracemalloc.stop()


_SUFFIXES = (".bvh", ".glb", ".gltf", ".fbx", ".dae", ".usda")


@pytest.mark.parametrize("seed", SEEDS, ids=[f"{p.parent.name}/{p.name}" for p in SEEDS])
def test_every_format_named_with_another_suffix(seed, tmp_path):
    """A glTF named .bvh, a BVH named .fbx, ...: skeletal.load gives an Asset or one skeletal error."""
    data = seed.read_bytes()
    for suffix in _SUFFIXES:
        if suffix == seed.suffix:
            continue
        path = tmp_path / f"wrong{suffix}"
        path.write_bytes(data)
        try:
            skeletal.load(path)
        except skeletal.SkeletalError as exc:
            message = str(exc)
            assert message.startswith(f"wrong{suffix}"), message
            assert "\n" not in message, message


def _fuzz_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src")] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env["PYTHONWARNINGS"] = "ignore"
    return env


def _inherited_peak_mb() -> int:
    """This process's peak resident size in MB. libFuzzer's ``-rss_limit_mb`` reads the child's
    ``ru_maxrss``, which a forked child starts from this process's resident size and keeps across
    ``exec``: after big tests in the same pytest worker a fresh fuzzer would start "over" 1 GB. The limit
    is therefore 1 GB *above* what the child inherits (Linux; 0 elsewhere)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) // 1024 + 1
    except OSError:
        pass
    return 0


@pytest.mark.parametrize("target", sorted(SHORT_RUNS))
def test_short_fuzz_run(target, tmp_path):
    pytest.importorskip("atheris", reason="atheris is not installed (pip install 'skeletal[fuzz]'): short fuzz runs skipped")
    if target == "usd" and not usd_available():
        pytest.skip("usd-core is not installed (pip install 'skeletal[usd]'): the USD target cannot run")
    seconds, runs = SHORT_RUNS[target]
    findings = tmp_path / "findings"
    findings.mkdir()
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    seed_dirs = [FUZZ / "seeds" / t for t in (("bvh", "gltf", "fbx", "collada") if target == "any" else (target,))]
    command = [sys.executable, str(FUZZ / "harness.py"), target, "-seed=1", f"-runs={runs}", f"-max_total_time={seconds}",
               f"-rss_limit_mb={1024 + _inherited_peak_mb()}", "-timeout=10", "-max_len=65536", f"-artifact_prefix={findings}/", str(corpus),
               *map(str, seed_dirs)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 600, env=_fuzz_env(), cwd=REPO)
    saved = sorted(p.name for p in findings.iterdir())
    tail = (result.stdout + result.stderr)[-3000:]
    assert result.returncode == 0 and not saved, (
        f"fuzzing {target} found {saved or 'a failure'} (rc {result.returncode}); fix the reader and copy the input "
        f"from {findings} to tests/fuzz/regressions/{target}/\n{tail}")
    assert "Done" in tail and "runs in" in tail, tail


def test_usd_target_says_when_it_cannot_run(monkeypatch):
    """Without skeletal.io.usd or usd-core the USD target refuses with a message, not a traceback of
    an import deep inside."""
    from fuzz import targets

    monkeypatch.setattr(targets, "usd_available", lambda: False)
    with pytest.raises(NotImplementedError, match="usd-core"):
        TARGETS["usd"](b"#usda 1.0\n")
