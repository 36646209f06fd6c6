"""One setting for the shared test assets (issue 28): ``SKELETAL_ASSETS`` and ``SKELETAL_TRUTH`` are
honoured by tests/test_truth.py, benchmarks/ and tools/ (none of them builds ``../shared`` itself), and
a run ends with the skip reasons in one short block (tests/fixtures/skip_summary.py)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import skeletal

REPO = Path(__file__).resolve().parents[1]
SRC = os.path.dirname(os.path.dirname(os.path.abspath(skeletal.__file__)))


def test_no_script_builds_the_shared_path_itself():
    pattern = re.compile(r"""/\s*["']shared["']|["']\.\.["']\s*,\s*["']shared["']|["']\.\./shared""")
    offenders = []
    for folder in ("tests", "benchmarks", "tools"):
        for path in (REPO / folder).rglob("*.py"):
            if path.name in ("shared_assets.py", "test_shared_paths.py"):
                continue
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                code = line.split("#", 1)[0]
                if pattern.search(code) and '"""' not in line:
                    offenders.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    assert not offenders, "use fixtures.shared_assets (SKELETAL_ASSETS / SKELETAL_TRUTH):\n" + "\n".join(offenders)


def _pytest(args, cwd, **env):
    paths = [SRC, str(REPO / "tests"), os.environ.get("PYTHONPATH", "")]
    full = {**os.environ, **env, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", *args],
                          cwd=cwd, env=full, capture_output=True, text=True, timeout=600)


def test_truth_follows_the_settings(tmp_path):
    """tests/test_truth.py checks SimpleSkin from folders named only by the two settings."""
    from fixtures.shared_assets import ASSETS, TRUTH

    model, truth = ASSETS / "SimpleSkin.gltf", TRUTH / "SimpleSkin.json"
    if not (model.is_file() and truth.is_file()):
        pytest.skip(f"{model} or {truth} not found (set SKELETAL_ASSETS / SKELETAL_TRUTH)")
    assets, truths = tmp_path / "models", tmp_path / "elsewhere" / "truth-files"
    assets.mkdir()
    truths.mkdir(parents=True)
    shutil.copy(model, assets)
    shutil.copy(truth, truths)
    done = _pytest([str(REPO / "tests" / "test_truth.py"), "-k", "shared_model"], REPO,
                   SKELETAL_ASSETS=str(assets), SKELETAL_TRUTH=str(truths))
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"\b1 passed, 7 skipped\b", done.stdout), done.stdout
    assert "---- 7 skipped, for 1 reason ----" in done.stdout  # the missing truth files, on one line
    assert "truth-files/{Fox-draco.json, Fox.json, Mannequin.json, +4 more} not found" in done.stdout
    assert "set SKELETAL_TRUTH" in done.stdout


def test_skip_reasons_come_in_one_block(tmp_path):
    (tmp_path / "test_some.py").write_text(
        "import pytest\n"
        "@pytest.mark.parametrize('k', range(3))\n"
        "def test_a(k):\n    pytest.skip('no display: set DISPLAY')\n"
        "def test_b():\n    pytest.skip('torch is not installed')\n"
        "def test_c():\n    pass\n"
        "@pytest.mark.parametrize('name', ['a.glb', 'b.glb'])\n"
        "def test_d(name):\n    pytest.skip(f'/x/assets/{name} not found (set SKELETAL_ASSETS)')\n")
    done = _pytest(["-p", "fixtures.skip_summary", "test_some.py"], tmp_path)
    lines = done.stdout.splitlines()
    start = lines.index("---- 6 skipped, for 3 reasons ----")
    assert lines[start + 1:start + 4] == ["    3  no display: set DISPLAY",
                                          "    2  /x/assets/{a.glb, b.glb} not found (set SKELETAL_ASSETS)",
                                          "    1  torch is not installed"]
