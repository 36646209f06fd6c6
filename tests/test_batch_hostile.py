"""``skeletal batch`` survives anything (issue 18): a folder mixing good files, a file that crashes
Assimp, one that hangs it, one that kills its worker (read in the worker with ``isolate=False``), a
FIFO and a symbolic link out of the folder finishes with a correct report, with the pool and
``--serial``; the report is written as files finish and an interrupted run resumes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from skeletal.batch import find_inputs, run_batch
from skeletal.cli import cli

from fixtures import hostile
from fixtures.batch_folder import make_folder


def _assimp_or_skip():
    import skeletal
    from skeletal.io import assimp_ffi

    try:
        assimp_ffi.library()
    except skeletal.ModelError as exc:
        pytest.skip(f"Assimp is not installed: {exc}")


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """6 good files (BVH and GLB), a crashing ``.x``, a hanging ``.ms3d``, a FIFO, a link outside."""
    _assimp_or_skip()
    top = tmp_path_factory.mktemp("mixed")
    root = top / "in"
    good, _bad = make_folder(root, count=6, broken=0)
    for gen in (hostile.x_weight_index_out_of_range, hostile.ms3d_many_joints):
        name, data = gen()
        (root / name).write_bytes(data)
    os.mkfifo(root / "pipe.glb")
    outside = top / "secret.bvh"
    outside.write_text(good[0].read_text() if good[0].suffix == ".bvh" else "")
    (root / "link.bvh").symlink_to(outside)
    (root / "inside.bvh").symlink_to(good[0])  # a link inside the folder is fine
    return root, good


def _check(summary, root: Path, good, crash_reason: str) -> None:
    by_name = {Path(r.source).name: r for r in summary.results}
    assert set(by_name) == {p.name for p in good} | {"weights.x", "joints.ms3d", "inside.bvh"}
    for p in good:
        assert by_name[p.name].status == "ok", by_name[p.name].error
    assert by_name["inside.bvh"].status == "ok"
    crash = by_name["weights.x"]
    assert crash.status == "failed" and crash_reason in crash.error, crash.error
    hang = by_name["joints.ms3d"]
    assert hang.status == "failed" and "timed out" in hang.error, hang.error
    assert summary.counts == {"ok": len(good) + 1, "failed": 2, "skipped": 0}
    report = json.loads(Path(summary.report).read_text())
    assert report["complete"] is True and report["counts"] == summary.counts
    assert report["limits"]["timeout"] == 4.0


def test_find_inputs_every_suffix_no_fifo_no_escaping_link(mixed):
    root, good = mixed
    files, _base = find_inputs(root)
    names = {p.name for p in files}
    assert {"weights.x", "joints.ms3d", "inside.bvh"} <= names
    assert "pipe.glb" not in names and "link.bvh" not in names
    followed, _ = find_inputs(root, follow_symlinks=True)
    assert "link.bvh" in {p.name for p in followed}


@pytest.mark.parametrize("executor", ["pool", "serial"])
def test_mixed_folder_survives(mixed, executor, tmp_path):
    root, good = mixed
    summary = run_batch("info", root, tmp_path / "out", executor=executor, workers=2, timeout=4.0)
    _check(summary, root, good, "Assimp crashed (SIG")


def test_worker_death_is_reported_and_replaced(mixed, tmp_path):
    """Read in the worker itself (``isolate=False``): the crash kills the worker; its file is failed
    with the signal, a fresh worker takes the next files."""
    root, good = mixed
    summary = run_batch("info", root, tmp_path / "out", executor="serial", timeout=4.0, options={"isolate": False})
    _check(summary, root, good, "worker died: SIG")


def test_report_written_as_files_finish_and_resume(mixed, tmp_path):
    root, good = mixed
    out = tmp_path / "out"
    seen = []

    def stop_after_three(result):
        seen.append(result)
        if len(seen) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_batch("info", good, out, executor="serial", timeout=20.0, on_result=stop_after_three)
    report = json.loads((out / "batch-report.json").read_text())
    assert report["complete"] is False and len(report["files"]) == 3
    again = run_batch("info", good, out, executor="serial", timeout=20.0)
    assert again.counts == {"ok": len(good) - 3, "failed": 0, "skipped": 3}


def test_cli_batch_timeout_memory_trusted(mixed, tmp_path):
    root, good = mixed
    result = CliRunner().invoke(cli, ["batch", "info", str(root), "--out", str(tmp_path / "o"), "--timeout", "4",
                                      "--memory", "2048", "--no-progress", "--serial", "--trusted"])
    assert result.exit_code == 1, result.output
    assert "failed    2" in result.output and "worker died: SIG" in result.output and "timed out" in result.output
    assert "Traceback" not in result.output
