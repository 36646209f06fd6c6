"""Models with nothing in them: no nodes, no skins, no meshes, no clips (issue 21, item 4).

Every command (info, bake, export, retarget, render, view, edit) and constructor (Player, Mixer,
Crowd, Renderer) answers an empty glTF with one clear line, and does the sensible thing with a
model that only lacks skins, meshes or clips.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import skeletal
from skeletal.playback.crowd import Crowd

from fixtures.gltf_builder import ARRAY_BUFFER, GltfBuilder
from fixtures.xvfb import xvfb_display

REPO = Path(__file__).resolve().parents[1]
BVH = ("HIERARCHY\nROOT Hips\n{\n OFFSET 0 1 0\n CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation\n"
       " JOINT LeftUpLeg\n {\n  OFFSET 0.1 0 0\n  CHANNELS 3 Zrotation Xrotation Yrotation\n  End Site\n  {\n   OFFSET 0 -0.5 0\n  }\n }\n"
       " JOINT RightUpLeg\n {\n  OFFSET -0.1 0 0\n  CHANNELS 3 Zrotation Xrotation Yrotation\n  End Site\n  {\n   OFFSET 0 -0.5 0\n  }\n }\n}\n"
       "MOTION\nFrames: 2\nFrame Time: 0.5\n0 1 0 0 0 0 0 0 0 0 0 0\n0 1 0.1 0 10 0 10 0 0 -10 0 0\n")


def write_empty_glb(path: Path) -> Path:
    """A .glb holding only ``{"asset":{"version":"2.0"}}``."""
    body = json.dumps({"asset": {"version": "2.0"}}).encode()
    body += b" " * (-len(body) % 4)
    path.write_bytes(struct.pack("<III", 0x46546C67, 2, 20 + len(body)) + struct.pack("<II", len(body), 0x4E4F534A) + body)
    return path


def triangle(b: GltfBuilder) -> int:
    pos = b.add_accessor(np.array([[0, 0, 0], [0.5, 0, 0], [0, 1, 0]], np.float32), target=ARRAY_BUFFER, min_max=True)
    return pos


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    """empty.glb, empty.gltf, node_only.glb (one node), rigid.glb (a mesh, no skin), skinned.glb (a skin, no clips)."""
    root = tmp_path_factory.mktemp("empty_models")
    out = {"empty": write_empty_glb(root / "empty.glb")}
    (root / "empty.gltf").write_text(json.dumps({"asset": {"version": "2.0"}}))
    out["empty_gltf"] = root / "empty.gltf"
    b = GltfBuilder()
    b.add_scene([b.add_node("only")])
    out["node_only"] = b.write_glb(root / "node_only.glb")
    b = GltfBuilder()
    b.add_scene([b.add_node("tri", mesh=b.add_mesh([b.primitive({"POSITION": triangle(b)})]))])
    out["rigid"] = b.write_glb(root / "rigid.glb")
    b = GltfBuilder()
    pos = triangle(b)
    joints = b.add_accessor(np.array([[0, 0, 0, 0], [0, 1, 0, 0], [1, 0, 0, 0]], np.uint8), type="VEC4", target=ARRAY_BUFFER)
    weights = b.add_accessor(np.array([[1, 0, 0, 0], [0.5, 0.5, 0, 0], [1, 0, 0, 0]], np.float32), type="VEC4",
                             target=ARRAY_BUFFER)
    hips, leg = b.add_node("Hips", translation=[0, 0.5, 0]), b.add_node("LeftUpLeg", translation=[0.1, 0, 0])
    b.add_children(hips, [leg])
    skin = b.add_skin([hips, leg])
    mesh = b.add_mesh([b.primitive({"POSITION": pos, "JOINTS_0": joints, "WEIGHTS_0": weights})])
    b.add_scene([hips, b.add_node("body", mesh=mesh, skin=skin)])
    out["skinned"] = b.write_glb(root / "skinned.glb")
    (root / "walk.bvh").write_text(BVH)
    out["bvh"] = root / "walk.bvh"
    return out


def cli(*args, cwd=None, env=None) -> subprocess.CompletedProcess:
    run_env = dict(os.environ, SKELETAL_QUIET_COMPILE="1", **(env or {}))  # no compile notice line
    run_env.pop("SKELETAL_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "skeletal", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env=run_env, timeout=900)


def one_error_line(run: subprocess.CompletedProcess, text: str) -> None:
    assert run.returncode == 2, run.stderr
    assert run.stderr.splitlines() == [f"skeletal: error: {text}"]


# -- the empty glTF: constructors ------------------------------------------------------------


@pytest.mark.parametrize("make", [
    lambda a: skeletal.Player(a), lambda a: skeletal.Mixer(a, count=3), lambda a: Crowd(a, 4),
], ids=["Player", "Mixer", "Crowd"])
@pytest.mark.parametrize("which", ["empty", "empty_gltf"])
def test_playback_constructors_refuse_an_empty_model(models, make, which):
    asset = skeletal.load(models[which])
    with pytest.raises(skeletal.ModelError) as info:
        make(asset)
    assert str(info.value) == f"{models[which].name}: has no nodes: nothing to animate"


def test_renderer_refuses_an_empty_model(models):
    pytest.importorskip("moderngl", reason="moderngl is not installed (pip install moderngl)")
    from skeletal.render.renderer import Renderer

    with pytest.raises(skeletal.ModelError, match=r"^empty\.glb: has no nodes: nothing to draw$"):
        Renderer(skeletal.load(models["empty"]))


def test_library_bake_and_bvh_export_refuse_an_empty_model(models, tmp_path):
    asset = skeletal.load(models["empty"])
    with pytest.raises(skeletal.ModelError, match=r"^empty\.glb: has no nodes: nothing to bake$"):
        skeletal.bake(asset)
    from skeletal.tools.export import write_bvh

    with pytest.raises(skeletal.ModelError, match="has no nodes: nothing to write as BVH"):
        write_bvh(asset, None, tmp_path / "e.bvh")


def test_world_matrices_of_no_nodes():
    from skeletal.anim.pose import world_matrices

    assert world_matrices(np.zeros(0, np.int32), np.zeros((5, 0, 10))).shape == (5, 0, 4, 4)
    assert world_matrices(np.zeros(0, np.int32), np.zeros((0, 10))).shape == (0, 4, 4)


# -- the empty glTF: commands ----------------------------------------------------------------


def test_cli_info_of_an_empty_model(models):
    run = cli("info", models["empty"])
    assert run.returncode == 0 and "nodes: 0   skins: 0   meshes: 0   clips: 0" in run.stdout


@pytest.mark.parametrize("args, message", [
    (["bake", "{m}", "--out", "e.npz"], "empty.glb: has no nodes: nothing to bake"),
    (["render", "{m}", "--out", "e.png"], "empty.glb: has no nodes: nothing to draw"),
    (["render", "{m}"], "empty.glb: has no nodes: nothing to draw"),
    (["export", "{m}", "--out", "e.bvh"], "empty.glb: has no nodes: nothing to write as BVH (a BVH file is a skeleton)"),
    (["retarget", "{m}", "{bvh}", "--out", "r.glb"], "empty.glb: has no clips to retarget"),
    (["retarget", "{bvh}", "{m}", "--out", "r.glb"], "empty.glb: has no nodes: nothing to retarget onto"),
], ids=["bake", "render-png", "render-default", "export-bvh", "retarget-from", "retarget-onto"])
def test_cli_commands_say_one_line_for_an_empty_model(models, tmp_path, args, message):
    args = [a.format(m=models["empty"], bvh=models["bvh"]) for a in args]
    one_error_line(cli(*args, cwd=tmp_path), message)
    assert not any(tmp_path.iterdir())  # nothing half-written


def test_cli_export_of_an_empty_model_writes_an_empty_gltf(models, tmp_path):
    run = cli("export", models["empty"], "--out", tmp_path / "copy.glb")
    assert run.returncode == 0, run.stderr
    assert skeletal.load(tmp_path / "copy.glb").rig is not None


@pytest.fixture(scope="module")
def xdisplay():
    yield from xvfb_display("640x480x24", ("glfw", "moderngl"), "pip install glfw moderngl")


@pytest.mark.parametrize("command, message", [("view", "nothing to show"), ("edit", "nothing to edit")])
def test_window_commands_say_one_line_for_an_empty_model(models, tmp_path, xdisplay, command, message):
    if command == "edit":
        pytest.importorskip("imgui_bundle", reason="imgui-bundle is not installed (pip install 'skeletal[edit]')")
    run = cli(command, models["empty"], "--frames", "1", cwd=tmp_path, env={"DISPLAY": xdisplay})
    one_error_line(run, f"empty.glb: has no nodes: {message}")


# -- models without skins, meshes or clips: the sensible thing -------------------------------


@pytest.mark.parametrize("which", ["node_only", "rigid", "skinned"])
def test_player_bake_and_export_of_models_without_parts(models, tmp_path, which):
    asset = skeletal.load(models[which])
    player = skeletal.Player(asset)
    player.update(1 / 30)
    assert np.all(np.isfinite(player.node_world))
    baked = skeletal.bake(asset)
    assert baked["node_world"].shape[:2] == (1, len(asset.document.nodes))
    skeletal.export(asset, tmp_path / "copy.glb")
    assert len(skeletal.load(tmp_path / "copy.glb").rig) == len(asset.rig)


@pytest.mark.parametrize("which", ["node_only", "rigid", "skinned"])
def test_cli_render_of_models_without_parts(models, tmp_path, which):
    pytest.importorskip("moderngl", reason="moderngl is not installed (pip install moderngl)")
    out = tmp_path / "still.png"
    run = cli("render", models[which], "--out", out, "--size", "64x48")
    if run.returncode == 2 and "OpenGL" in run.stderr:
        pytest.skip(f"no headless OpenGL: {run.stderr.strip()}")
    assert run.returncode == 0, run.stderr
    assert run.stderr.count("\n") <= 1 and "Warning" not in run.stderr  # no numpy warning from framing a point
    assert out.is_file()


@pytest.mark.parametrize("which", ["node_only", "skinned"])
def test_cli_bake_and_bvh_export_without_clips_name_the_rest_pose(models, tmp_path, which):
    run = cli("bake", models[which], "--out", tmp_path / "b.npz")
    assert run.returncode == 0, run.stderr
    assert "rest pose" in run.stderr
    run = cli("export", models[which], "--out", tmp_path / "b.bvh")
    assert run.returncode == 0, run.stderr
    assert "rest pose" in run.stderr
