"""The ``skeletal`` command line: info, bake, and how errors reach the user."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

import skeletal
from fixtures import models
from skeletal.cli import cli


@pytest.fixture(scope="module")
def arm(tmp_path_factory):
    return models.build("cubic_spline_arm", tmp_path_factory.mktemp("cli"))


@pytest.fixture(scope="module")
def orphan(tmp_path_factory):
    return models.build("orphan_joint_root", tmp_path_factory.mktemp("cli"))


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_info_text_lists_tree_skins_meshes_clips(arm):
    result = run("info", arm)
    assert result.exit_code == 0, result.output
    asset = skeletal.load(arm)
    for clip in asset.clips:
        assert clip.name in result.output
    assert "node tree:" in result.output and "skins:" in result.output and "influences" in result.output
    assert "CUBICSPLINE" in result.output


def test_info_json_is_machine_readable(orphan):
    result = run("info", orphan, "--json")
    assert result.exit_code == 0
    info = json.loads(result.output)
    asset = skeletal.load(orphan)
    assert len(info["nodes"]) == len(asset.rig)
    assert [c["name"] for c in info["clips"]] == [c.name for c in asset.clips]
    assert info["orphan_roots"], "the fixture's joint root is in no scene"
    assert {"nodes", "skins", "meshes", "clips", "extensions_used", "extensions_required"} <= set(info)
    prim = info["meshes"][0]["primitives"][0]
    assert {"vertices", "influences", "morph_targets"} <= set(prim)


def test_bake_writes_the_contract_arrays(arm, tmp_path):
    out = tmp_path / "arm.npz"
    result = run("bake", arm, "--out", out, "--clip", "1", "--times=-0.5,0.25,1.2", "--loop", "pingpong")
    assert result.exit_code == 0, result.output
    data = np.load(out)
    asset = skeletal.load(arm)
    expected = skeletal.bake(asset, 1, [-0.5, 0.25, 1.2], loop="pingpong")
    assert set(data.files) == set(expected)
    assert data["times"].tolist() == [-0.5, 0.25, 1.2]
    assert data["node_world"].shape == (3, len(asset.document.nodes), 4, 4)
    for key in expected:
        np.testing.assert_array_equal(data[key], expected[key])
    assert any(k.startswith("positions_node") for k in data.files)


def test_bake_fps_samples_whole_clip_inclusive(arm, tmp_path):
    out = tmp_path / "fps.npz"
    asset = skeletal.load(arm)
    clip = asset.clips[0]
    assert run("bake", arm, "--out", out, "--clip", clip.name, "--fps", "10").exit_code == 0
    times = np.load(out)["times"]
    assert times[0] == 0 and times[-1] == pytest.approx(clip.duration)
    assert np.allclose(np.diff(times)[:-1], 0.1)


def test_bake_default_clip_and_loop(arm, tmp_path):
    out = tmp_path / "default.npz"
    assert run("bake", arm, "--out", out, "--times", "100").exit_code == 0
    clamped = skeletal.bake(skeletal.load(arm), 0, [skeletal.load(arm).clips[0].duration])
    np.testing.assert_allclose(np.load(out)["node_world"], clamped["node_world"])


@pytest.mark.parametrize(
    "args, message",
    [
        (["bake", "{arm}", "--out", "{tmp}/x.npz", "--clip", "NoSuchClip"], "no clip named 'NoSuchClip'"),
        (["bake", "{arm}", "--out", "{tmp}/x.npz", "--clip", "99"], "out of range"),
        (["bake", "{arm}", "--out", "{tmp}/x.npz", "--times", "a,b"], "--times"),
        (["bake", "{arm}", "--out", "{tmp}/x.npz", "--fps", "0"], "fps must be positive"),
        (["info", "{tmp}/missing.glb"], "missing.glb"),
        (["info", "{tmp}/broken.gltf"], "broken.gltf"),
    ],
)
def test_errors_are_one_line_and_exit_2(arm, tmp_path, args, message):
    (tmp_path / "broken.gltf").write_text('{"asset": {"version": "2.0"}, "nodes": [{"children": [0]}]}')
    argv = [a.format(arm=arm, tmp=tmp_path) for a in args]
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines() if result.stderr else result.output.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.output
    assert "Traceback" not in result.output


def test_python_dash_m_runs_the_same_program(arm, tmp_path):
    ok = subprocess.run([sys.executable, "-m", "skeletal", "info", str(arm), "--json"], capture_output=True, text=True)
    assert ok.returncode == 0 and json.loads(ok.stdout)["clips"]
    bad = tmp_path / "bad.glb"
    bad.write_bytes(b"glTF\x02\x00\x00\x00\xff\xff\xff\x7f")
    fail = subprocess.run([sys.executable, "-m", "skeletal", "info", str(bad)], capture_output=True, text=True)
    assert fail.returncode == 2
    assert fail.stderr.count("\n") == 1 and "bad.glb" in fail.stderr and "Traceback" not in fail.stderr


def test_demo_export_writes_a_loadable_glb(tmp_path):
    out = tmp_path / "demo.glb"
    assert run("demo", "--export", out).exit_code == 0
    asset = skeletal.load(out)
    assert {c.name for c in asset.clips} >= {"idle", "walk", "run", "wave"}
    assert CliRunner().invoke(cli, ["demo", "--export", str(tmp_path / "demo.obj")]).exit_code == 2
