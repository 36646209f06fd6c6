"""skeletal.bench.bridges: the bridges' per-frame rows run and compare each bridge with its baseline
(no speed is asserted: the figures are printed by benchmarks/bench_bridges.py). In a child process:
panda3d and wgpu must not be loaded into the test process (the render tests' shared OpenGL context
stops making buffers when both are)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("trimesh", reason='trimesh is not installed (pip install "skeletal[trimesh]")')

CHILD = """
import json, sys
from skeletal.bench.bridges import bench_bridges, format_rows
result = bench_bridges(quick=True)
result["table"] = format_rows(result)
json.dump(result, open(sys.argv[1], "w"))
"""


def test_bridge_rows_have_their_baselines(tmp_path):
    out = tmp_path / "rows.json"
    env = {k: v for k, v in os.environ.items() if k != "DISPLAY"}  # no window: the pyglet row is left out
    env.setdefault("XDG_RUNTIME_DIR", "/tmp")
    run = subprocess.run([sys.executable, "-c", CHILD, str(out)], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(out.read_text())
    names = [r["name"] for r in result["rows"]]
    assert "trimesh scene_from" in names
    for row in result["rows"]:
        assert row["baseline_us"] > 0 and row["bridge_us"] > 0
        assert row["ratio"] == pytest.approx(row["bridge_us"] / row["baseline_us"])
        assert row["baseline"] in result["baselines_us"]
    assert any("pyglet row omitted" in n for n in result["notes"])
    assert "| trimesh scene_from |" in result["table"]
