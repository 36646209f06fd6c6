"""``skeletal batch`` on the local process pool and serially: a generated folder of 50 small files
(BVH and skeleton-only GLB) with 3 broken ones, which are reported while the rest come out correct;
resuming, the JSON report, the other jobs (compress, export, retarget, info) and the command line.
The Ray executor has its own module (tests/test_batch_ray.py: one Ray session there)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import skeletal
from skeletal import batch as batch_module
from skeletal.batch import BatchError, find_inputs, run_batch
from skeletal.cli import cli
from skeletal.demo import demo_asset
from skeletal.batch.jobs import Task, run_task

from fixtures.batch_folder import make_folder


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("batch") / "in"
    good, bad = make_folder(root)
    return root, good, bad


def check_bake_outputs(summary, root: Path, out: Path, good, bad) -> None:
    """3 failures naming the broken files; every other output equals a direct bake of its input."""
    assert summary.counts == {"ok": 47, "failed": 3, "skipped": 0}
    failed = {Path(r.source).name: r.error for r in summary.failed}
    assert set(failed) == {p.name for p in bad}
    for name, error in failed.items():
        assert "ModelError" in error and name in error
    for source in good:
        rel = source.relative_to(root).with_suffix(".npz")
        with np.load(out / rel) as data:
            expected = skeletal.bake(skeletal.load(source), 0, fps=30)
            np.testing.assert_allclose(data["node_world"], expected["node_world"], rtol=0, atol=1e-12)
            np.testing.assert_array_equal(data["times"], expected["times"])
    assert not list(out.rglob("*.part*")), "no temporary files left behind"


def test_find_inputs(folder):
    root, good, bad = folder
    files, base = find_inputs(root)
    assert len(files) == 50 and base == root
    files, base = find_inputs(str(root / "**" / "*.bvh"))
    assert base == root and all(p.suffix == ".bvh" for p in files)
    assert len(files) == sum(1 for p in good + bad if p.suffix == ".bvh")
    with pytest.raises(BatchError, match="no input files"):
        run_batch("bake", str(root / "*.nothing"), root.parent / "never")


def test_pool_bake_reports_broken_files(folder, tmp_path):
    root, good, bad = folder
    out = tmp_path / "out"
    summary = run_batch("bake", root, out, executor="pool", workers=2, chunk=4)
    assert summary.executor == "pool" and summary.workers == 2
    check_bake_outputs(summary, root, out, good, bad)
    # the JSON report
    report = json.loads((out / "batch-report.json").read_text())
    assert report["counts"] == {"ok": 47, "failed": 3, "skipped": 0}
    assert report["command"] == "bake" and report["executor"] == "pool"
    entries = {Path(e["source"]).name: e for e in report["files"]}
    assert len(entries) == 50
    for p in bad:
        assert entries[p.name]["status"] == "failed" and p.name in entries[p.name]["error"]
    for p in good:
        e = entries[p.name]
        assert e["status"] == "ok" and e["error"] is None and e["details"]["nodes"] >= 5
        assert Path(e["output"]).is_file()


def test_serial_and_resume(folder, tmp_path):
    root, good, bad = folder
    out = tmp_path / "out"
    first = run_batch("bake", root, out, executor="serial", report=tmp_path / "r1.json")
    check_bake_outputs(first, root, out, good, bad)
    # second run: outputs are newer than inputs -> skipped; the broken ones are tried again
    again = run_batch("bake", root, out, executor="serial", report=tmp_path / "r2.json")
    assert again.counts == {"ok": 0, "failed": 3, "skipped": 47}
    assert all(r.details.get("reason") == "output is up to date" for r in again.results if r.status == "skipped")
    # an input edited after its output was written is redone; an output removed is remade
    touched, removed = good[0], good[1]
    later = time.time() + 5
    os.utime(touched, (later, later))
    (out / removed.relative_to(root).with_suffix(".npz")).unlink()
    third = run_batch("bake", root, out, executor="serial", report=None)
    assert third.counts == {"ok": 2, "failed": 3, "skipped": 45}
    redone = {Path(r.source) for r in third.results if r.status == "ok"}
    assert redone == {touched, removed}
    assert third.report is None
    forced = run_batch("bake", [good[2], good[3]], tmp_path / "forced", executor="serial", force=True, report=None)
    assert forced.counts["ok"] == 2


def test_other_jobs(folder, tmp_path):
    root, good, bad = folder
    files = [good[0], good[2], bad[0]]  # a BVH, a GLB, a broken GLB
    info = run_batch("info", files, tmp_path / "info", executor="serial")
    assert info.counts == {"ok": 2, "failed": 1, "skipped": 0}
    data = json.loads(Path(info.results[0].output).read_text())
    assert data["file"] == good[0].name and len(data["clips"]) == 1
    exported = run_batch("export", files, tmp_path / "export", executor="serial")
    assert exported.counts["ok"] == 2
    back = skeletal.load(exported.results[0].output)
    assert back.clips[0].duration == pytest.approx(skeletal.load(good[0]).clips[0].duration)
    small = run_batch("compress", files, tmp_path / "compress", executor="serial", options={"error": 1e-2})
    assert small.counts["ok"] == 2
    for r in small.results[:2]:
        assert r.details["max_error"] <= 1e-2 and r.details["bytes_after"] < r.details["bytes_before"]
        skeletal.load(r.output)
    # retarget: the built-in character's walk onto itself works; the 5-joint chain has no legs
    demo = tmp_path / "demo.glb"
    skeletal.export(demo_asset(), demo, ["walk"])
    moved = run_batch("retarget", [demo, good[0]], tmp_path / "retarget", executor="serial",
                      options={"target": str(demo)})
    assert moved.counts == {"ok": 1, "failed": 1, "skipped": 0}, moved.results[0].error
    assert skeletal.load(moved.results[0].output).clips[0].name == "walk"
    assert "ClipError" in moved.results[1].error
    missing = run_task(Task("retarget", str(good[0]), str(tmp_path / "x.glb"), {}))
    assert missing.status == "failed" and "--target" in missing.error


def test_cli_batch_pool(folder, tmp_path):
    root, good, bad = folder
    out = tmp_path / "cli"
    runner = CliRunner()
    result = runner.invoke(cli, ["batch", "info", str(root), "--out", str(out), "--json", "--jobs", "2",
                                 "--no-progress"])
    assert result.exit_code == 1  # some files failed: reported, not a crash
    assert "ok        47" in result.output and "failed    3" in result.output and "Traceback" not in result.output
    assert len(list(out.rglob("*.json"))) == 48  # 47 outputs + the report
    again = runner.invoke(cli, ["batch", "info", str(root / "*.bvh"), "--out", str(tmp_path / "cli2"), "--serial"])
    assert again.exit_code == 0, again.output
    assert "skeletal batch info" in again.output
    bad_cmd = runner.invoke(cli, ["batch", "dance", str(root), "--out", str(out)])
    assert bad_cmd.exit_code == 2
    nothing = runner.invoke(cli, ["batch", "bake", str(root / "none*.glb"), "--out", str(out)])
    assert nothing.exit_code == 2 and "no input files" in nothing.output


def test_cli_ray_missing_says_what_to_install(folder, tmp_path, monkeypatch):
    root, good, bad = folder
    monkeypatch.setattr(batch_module, "ray_available", lambda: False)
    runner = CliRunner()
    result = runner.invoke(cli, ["batch", "info", str(root), "--out", str(tmp_path / "o"), "--ray"])
    assert result.exit_code == 2
    assert "pip install 'skeletal[ray]'" in result.output and "Traceback" not in result.output
    with pytest.raises(BatchError, match=r"skeletal\[ray\]"):
        run_batch("info", root, tmp_path / "o", executor="ray")
    # the pool path still works without Ray
    ok = runner.invoke(cli, ["batch", "info", str(root / "sub" / "*.glb"), "--out", str(tmp_path / "p"), "--jobs", "2"])
    assert ok.exit_code == 0, ok.output
