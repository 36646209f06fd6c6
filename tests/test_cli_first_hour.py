"""The command line as a new user meets it (issue 21, items 5 and 7) and the sample models (item 2)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import skeletal
import skeletal.cli.group as cli_module
from skeletal.tools.bake import bake_bytes, bake_primitives
from skeletal.cli import cli

from fixtures.gltf_builder import GltfBuilder


@pytest.fixture(scope="module")
def demo_glb(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("first_hour") / "demo.glb"
    assert CliRunner().invoke(cli, ["demo", "--export", str(path)]).exit_code == 0
    return path


def runner() -> CliRunner:
    try:
        return CliRunner(mix_stderr=False)
    except TypeError:  # click >= 8.2 keeps stderr apart by itself
        return CliRunner()


# -- bake: names the clip, says the size first, asks for --force above the limit ---------------------


@pytest.mark.parametrize("args, clip", [([], "idle"), (["--clip", "walk"], "walk"), (["--clip", "3"], "wave")])
def test_bake_names_the_clip(demo_glb, tmp_path, args, clip):
    out = tmp_path / "b.npz"
    result = runner().invoke(cli, ["bake", str(demo_glb), "--out", str(out), "--fps", "10", *args])
    assert result.exit_code == 0, result.stderr
    first, last = result.stderr.splitlines()[0], result.stderr.splitlines()[-1]
    assert first.startswith(f"baking clip {clip!r} (") and "of demo.glb:" in first and "about" in first
    assert last.startswith(f"wrote {out}: clip {clip!r} (")
    times = len(np.load(out)["times"])
    assert f": {times} times, about" in first  # the count said up front is the count written


def test_bake_estimate_is_the_arrays_size(demo_glb):
    asset = skeletal.load(demo_glb)
    arrays = skeletal.bake(asset, "walk", fps=30, normals=True, palettes=True)
    written = sum(a.nbytes for a in arrays.values())
    assert bake_bytes(asset, len(arrays["times"]), normals=True, palettes=True) == written


def test_bake_above_the_limit_needs_force(demo_glb, tmp_path, monkeypatch):
    monkeypatch.setattr(cli_module, "BAKE_LIMIT_BYTES", 100_000)
    out = tmp_path / "big.npz"
    result = runner().invoke(cli, ["bake", str(demo_glb), "--out", str(out), "--clip", "walk"])
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1].startswith(f"skeletal: error: {out} would be about ")
    assert "pass --force to write it" in result.stderr
    assert not out.exists()
    result = runner().invoke(cli, ["bake", str(demo_glb), "--out", str(out), "--clip", "walk", "--force"])
    assert result.exit_code == 0, result.stderr
    assert out.is_file()


def test_bake_refuses_an_endless_clip_before_allocating(tmp_path):
    b = GltfBuilder()
    node = b.add_node("n")
    b.add_scene([node])
    b.add_animation([{"node": node, "path": "translation", "times": [0.0, 3.0e38], "values": np.zeros((2, 3), np.float32)}],
                    name="forever")
    path = b.write_glb(tmp_path / "forever.glb")
    result = runner().invoke(cli, ["bake", str(path), "--out", str(tmp_path / "f.npz")])
    assert result.exit_code == 2
    assert "too many frames to bake" in result.stderr


def test_bake_progress_adds_up(demo_glb):
    asset = skeletal.load(demo_glb)
    steps = []
    arrays = skeletal.bake(asset, "walk", fps=200, progress=steps.append)
    assert sum(steps) == bake_primitives(asset) * len(arrays["times"])
    assert len(steps) > bake_primitives(asset)  # more than one report per primitive at 200 fps


def test_bake_shows_a_progress_bar_on_a_terminal(demo_glb, tmp_path):
    pty = pytest.importorskip("pty", reason="no pseudo-terminals on this system")
    code = ("import sys, skeletal.cli.group as c; c.BAKE_PROGRESS_BYTES = 0; "
            f"sys.exit(c.main(['bake', {str(demo_glb)!r}, '--out', {str(tmp_path / 'p.npz')!r}, '--clip', 'walk']))")
    output = bytearray()

    def read(fd):
        data = __import__("os").read(fd, 4096)
        output.extend(data)
        return data

    status = pty.spawn([sys.executable, "-c", code], read)
    text = output.decode(errors="replace")
    assert status == 0, text
    assert "skinning" in text and "100%" in text


# -- warnings: one clean line --------------------------------------------------------------------


def test_cli_warning_is_one_line(tmp_path):
    b = GltfBuilder()
    hips = b.add_node("Hips", scale=[0.01, 0.01, 0.01])
    b.add_children(hips, [b.add_node("Leg", translation=[0, -1, 0])])
    b.add_scene([hips])
    path = b.write_glb(tmp_path / "scaled.glb")
    run = subprocess.run([sys.executable, "-m", "skeletal", "export", str(path), "--out", str(tmp_path / "s.bvh")],
                         capture_output=True, text=True, env=dict(os.environ, SKELETAL_QUIET_COMPILE="1"))
    assert run.returncode == 0, run.stderr
    lines = run.stderr.splitlines()
    assert len(lines) == 2, run.stderr
    assert lines[0].startswith("skeletal: warning: s.bvh: BVH has no scale channels;")
    assert lines[1] == f"wrote {tmp_path / 's.bvh'}: the rest pose (no clips) as BVH"
    assert "UserWarning" not in run.stderr and ".py:" not in run.stderr


# -- sample models -------------------------------------------------------------------------------


def test_examples_paths(tmp_path, monkeypatch):
    monkeypatch.setenv("SKELETAL_CACHE_DIR", str(tmp_path / "cache"))
    assert skeletal.examples.names() == ["demo.glb", "demo.gltf", "walk.bvh", "blinking.gltf"]
    glb = skeletal.examples.path("demo.glb")
    assert glb.startswith(str(tmp_path / "cache")) and Path(glb).is_file()
    mtime = Path(glb).stat().st_mtime_ns
    assert skeletal.examples.path() == glb and Path(glb).stat().st_mtime_ns == mtime  # written once
    asset = skeletal.load(glb)
    assert [c.name for c in asset.clips] == ["idle", "walk", "run", "wave"] and asset.skins
    assert len(skeletal.load(skeletal.examples.path("demo.gltf")).rig) == len(asset.rig)
    walk = skeletal.load(skeletal.examples.path("walk.bvh"))
    assert len(walk.clips) == 1 and walk.clips[0].duration == pytest.approx(asset.clip("walk").duration, abs=1 / 30)
    assert not [p for p in Path(glb).parent.iterdir() if p.name.startswith(".")]  # no partial files left
    with pytest.raises(skeletal.SkeletalError, match="no sample named 'Soldier.glb': the samples are demo.glb"):
        skeletal.examples.path("Soldier.glb")
