"""skeletal.bench.bridges: the bridges' per-frame rows run and compare each bridge with its baseline
(no speed is asserted: the figures are printed by benchmarks/bench_bridges.py)."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("trimesh", reason='trimesh is not installed (pip install "skeletal[trimesh]")')


def test_bridge_rows_have_their_baselines(monkeypatch):
    from skeletal.bench.bridges import bench_bridges, format_rows

    monkeypatch.delenv("DISPLAY", raising=False)  # no window here: the pyglet row is left out, with a note
    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
    result = bench_bridges(quick=True)
    names = [r["name"] for r in result["rows"]]
    assert "trimesh scene_from" in names
    for row in result["rows"]:
        assert row["baseline_us"] > 0 and row["bridge_us"] > 0
        assert row["ratio"] == pytest.approx(row["bridge_us"] / row["baseline_us"])
        assert row["baseline"] in result["baselines_us"]
    assert any("pyglet row omitted" in n for n in result["notes"])
    assert "| trimesh scene_from |" in format_rows(result)
