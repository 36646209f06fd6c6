"""The editor window under Xvfb, driven by scripted input (``skeletal edit --script``): select a bone by
clicking it in the 3D view, rotate it by dragging its rotation field, insert a key, save; the saved
file's clip changed as scripted. Also: the unsaved-changes prompt, the help panel, bad input, and
the command's import weight. Skipped with the reason when Xvfb, glfw, moderngl or imgui-bundle is
missing. The window runs in a subprocess (its GL context must not replace the other tests' one)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import skeletal
from skeletal.quat import quat_conjugate, quat_mul

from fixtures.xvfb import xvfb_display

FOREARM = "left_forearm"


@pytest.fixture(scope="module")
def xdisplay():
    """A private Xvfb server: its DISPLAY string; killed after the module."""
    yield from xvfb_display("1400x900x24", ("imgui_bundle", "glfw", "moderngl"), "pip install 'skeletal[edit]'")


@pytest.fixture(scope="module")
def demo_file(tmp_path_factory):
    from skeletal.demo import demo_asset
    from skeletal.io.gltf_write import write_gltf

    path = tmp_path_factory.mktemp("model") / "demo.glb"
    write_gltf(demo_asset().document, path)
    return path


SRC = os.path.dirname(os.path.dirname(os.path.abspath(skeletal.__file__)))


def run_editor(display, cwd, *args, timeout=300):
    env = {**os.environ, "DISPLAY": display, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("WAYLAND_DISPLAY", None)
    return subprocess.run([sys.executable, "-m", "skeletal.cli.edit", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


def angle_between(q1, q2) -> float:
    d = quat_mul(quat_conjugate(np.asarray(q1, np.float64)), np.asarray(q2, np.float64))
    return float(np.degrees(2 * np.arccos(min(1.0, abs(d[3])))))


def test_scripted_session_select_rotate_key_save(xdisplay, demo_file, tmp_path):
    model = tmp_path / "walker.glb"
    shutil.copy(demo_file, model)
    shots = [tmp_path / f"{k}.png" for k in ("selected", "rotated", "keyed")]
    script = [
        {"wait": 2},
        {"click": {"bone": FOREARM}},  # select by clicking the elbow in the 3D view
        {"screenshot": str(shots[0])},
        *[{"key": "right"}] * 6,  # six frames on: 0.2 s at 30 fps
        {"drag": [{"item": "rotation", "fx": 0.12}, {"item": "rotation", "fx": 0.12, "dx": 60}], "steps": 10},
        {"screenshot": str(shots[1])},
        {"key": "K"},  # insert a key for the selected bone
        {"screenshot": str(shots[2])},
        # drag that key in the dope sheet three frames later (0.3 s), undo and redo the move
        {"drag": [{"item": "row:" + FOREARM, "fx": 0.05}, {"item": "row:" + FOREARM, "fx": 0.075}], "steps": 6},
        {"key": "Z", "ctrl": True},
        {"key": "Y", "ctrl": True},
        {"key": "S", "ctrl": True},
        {"wait": 2},
        {"close": True},
    ]
    (tmp_path / "script.json").write_text(json.dumps(script))
    done = run_editor(xdisplay, tmp_path, str(model), "--script", "script.json", "-v")
    assert done.returncode == 0, done.stderr
    assert f"insert key ({FOREARM}) at 0.200s" in done.stderr
    assert "undo move 1 key(s) by +0.100s" in done.stderr and "redo move 1 key(s) by +0.100s" in done.stderr
    assert "saved" in done.stderr and "unsaved" not in done.stderr

    before, after = skeletal.load(demo_file), skeletal.load(model)
    node = after.rig.find(FOREARM)
    old = next(t for t in before.clip("idle").tracks if t.node == node and t.path == "rotation")
    new = next(t for t in after.clip("idle").tracks if t.node == node and t.path == "rotation")
    assert len(new.times) == len(old.times) + 1
    assert not np.any(np.abs(new.times - 0.2) < 1e-6)  # keyed at 0.2 s, then moved to 0.3 s
    k = int(np.flatnonzero(np.abs(new.times - 0.3) < 1e-6)[0])
    from skeletal.editor.keys import key_values, sample_track

    turned = angle_between(sample_track(old, 0.2)[:4], key_values(new)[k])
    assert 5.0 < turned < 60.0, f"the key keyed at 0.2 s is {turned:.1f} degrees from the old pose there"
    for name in ("walk", "run", "wave"):  # the other clips are as they were
        for a, b in zip(before.clip(name).tracks, after.clip(name).tracks):
            assert np.array_equal(a.times, b.times) and np.allclose(a.values, b.values, atol=1e-7)
    assert not os.path.exists(tmp_path / "walker.autosave.glb")

    import imageio.v3 as iio

    images = [iio.imread(p) for p in shots]
    assert all(im.shape == (720, 1280, 3) for im in images)
    # the selection shows in the tree (highlighted row) and the gizmo's rings are drawn
    assert np.abs(images[0].astype(int) - images[1].astype(int)).max() > 60  # the rotation changed the picture
    # the dope sheet gained a key at frame 6 on the forearm's rows
    assert np.abs(images[1][480:].astype(int) - images[2][480:].astype(int)).max() > 60


def test_collider_gizmo_moves_a_new_sphere(xdisplay, demo_file, tmp_path):
    """Select the forearm, add a sphere on it (the gizmo now acts on the sphere), switch the gizmo to
    translate and drag its centre 60 px to the right (ImGuizmo's move-in-the-screen-plane handle);
    the saved sphere sits to the right of the elbow, in the screen's plane."""
    model = tmp_path / "m.glb"
    shutil.copy(demo_file, model)
    name = f"{FOREARM}_sphere"
    script = [
        {"wait": 2},
        {"click": {"bone": FOREARM}},
        {"click": {"item": "add sphere"}},
        {"key": "W"},
        {"wait": 2},
        {"drag": [{"collider": name}, {"collider": name, "dx": 60}], "steps": 8},
        {"screenshot": str(tmp_path / "moved.png")},
        {"key": "S", "ctrl": True},
        {"wait": 2},
        {"close": True},
    ]
    (tmp_path / "s.json").write_text(json.dumps(script))
    done = run_editor(xdisplay, tmp_path, str(model), "--script", "s.json", "-v")
    assert done.returncode == 0, done.stderr
    assert f"add hurt sphere '{name}'" in done.stderr and f"moved collider '{name}'" in done.stderr
    from skeletal.anim.colliders import ColliderSet
    from skeletal.editor.model import EditDocument

    doc = EditDocument.open(str(model))
    (sphere,) = doc.colliders
    world = doc.world(doc.pose(0, 0.0))
    moved = ColliderSet([sphere]).world(world).a[0] - world[sphere.node, :3, 3]  # from the elbow, world
    # the camera looks at the character's front: screen right is world +x (0.1-0.3 m for 60 px)
    assert 0.05 < moved[0] < 0.5 and abs(moved[1]) < 0.3 * moved[0], moved


def test_unsaved_changes_prompt_and_help(xdisplay, demo_file, tmp_path):
    model = tmp_path / "m.glb"
    shutil.copy(demo_file, model)
    script = [
        {"key": "F1"},
        {"screenshot": str(tmp_path / "help.png")},
        {"key": "F1"},
        {"key": "K", "shift": True},  # key the whole pose: the document is now unsaved
        {"close": True},  # the window's close button: a prompt, not a close
        {"wait": 2},
        {"screenshot": str(tmp_path / "prompt.png")},
        {"click": {"item": "popup discard"}},
        {"wait": 3},
    ]
    (tmp_path / "s.json").write_text(json.dumps(script))
    done = run_editor(xdisplay, tmp_path, str(model), "--script", "s.json", "-v")
    assert done.returncode == 0, done.stderr
    assert "closed with unsaved changes" in done.stderr  # discarded on purpose
    assert open(model, "rb").read() == open(demo_file, "rb").read()  # nothing written
    import imageio.v3 as iio

    help_img, prompt = iio.imread(tmp_path / "help.png"), iio.imread(tmp_path / "prompt.png")
    # both draw a panel in the middle of the window that the plain view lacks
    assert help_img.shape == prompt.shape == (720, 1280, 3)


def test_a_failure_inside_the_ui_autosaves_the_document(xdisplay, demo_file, tmp_path):
    model = tmp_path / "m.glb"
    shutil.copy(demo_file, model)
    script = [{"key": "K", "shift": True}, {"click": {"item": "no such widget"}}]
    (tmp_path / "s.json").write_text(json.dumps(script))
    done = run_editor(xdisplay, tmp_path, str(model), "--script", "s.json")
    assert done.returncode == 2
    autosave = tmp_path / "m.autosave.glb"
    assert done.stderr.strip().endswith(f"the document was autosaved to {autosave}")
    assert done.stderr.count("\n") == 1
    keyed = skeletal.load(autosave).clip("idle")
    assert len(keyed.tracks) > len(skeletal.load(model).clip("idle").tracks)  # the whole pose was keyed


def test_periodic_autosave(xdisplay, demo_file, tmp_path):
    model = tmp_path / "m.glb"
    shutil.copy(demo_file, model)
    script = [{"wait": 2}, {"key": "K", "shift": True}, {"wait": 3}, {"close": True}, {"wait": 2},
              {"click": {"item": "popup discard"}}, {"wait": 2}]
    (tmp_path / "s.json").write_text(json.dumps(script))
    done = run_editor(xdisplay, tmp_path, str(model), "--script", "s.json", "--autosave-interval", "0", "-v")
    assert done.returncode == 0, done.stderr
    autosave = tmp_path / "m.autosave.glb"
    assert f"autosaved to {autosave}" in done.stderr
    assert len(skeletal.load(autosave).clip("idle").tracks) > len(skeletal.load(model).clip("idle").tracks)


def test_bad_input_is_one_line(xdisplay, tmp_path):
    bad = tmp_path / "broken.gltf"
    bad.write_text('{"asset": {"version": "2.0"}, "nodes": [{"children": [0]}]}')
    done = run_editor(xdisplay, tmp_path, str(bad))
    assert done.returncode == 2
    assert done.stderr.startswith("skeletal: error: broken.gltf: ") and done.stderr.count("\n") == 1
    done = run_editor(xdisplay, tmp_path, "--clip", "nope")
    assert done.returncode == 2 and "no clip named 'nope'" in done.stderr


def test_no_display_is_one_line(monkeypatch, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env["PYTHONPATH"] = SRC
    done = subprocess.run([sys.executable, "-m", "skeletal.cli.edit"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr == "skeletal: error: no display: set DISPLAY or run under xvfb-run\n"


def test_importing_the_command_imports_no_gl():
    code = ("import sys, skeletal.cli; assert 'edit' in skeletal.cli.cli.commands; "
            "bad = [m for m in ('imgui_bundle', 'glfw', 'moderngl') if m in sys.modules]; assert not bad, bad")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


COMPOSE_CHECK = r"""
import json, sys
import numpy as np
from skeletal.demo import demo_asset
from skeletal.editor.app import Editor
from skeletal.editor.model import EditDocument

doc = EditDocument(demo_asset(), "demo.glb")
out = {}
with Editor(doc, (1280, 720)) as ed:
    ed.pipelined = sys.argv[1] == "pipelined"  # as Editor.run: each frame swaps the one before

    def frames(n):
        for _ in range(n):
            ed.frame(1 / 30)
            if not ed.pipelined:
                ed.glfw.swap_buffers(ed.window)

    def check(tag):
        redrawn = ed.compositor.redrawn_pixels
        a = ed.read_screen()  # drawn by damaged rectangles on top of the kept back buffer
        ed.compositor.compose(ed.imgui, ed.imgui.backends.opengl3_render_draw_data, a.shape[1::-1],
                              view=(ed._view_source, ed.view_rect), full=True)
        b = ed.read_screen()  # the same frame drawn whole
        diff = np.abs(a.astype(int) - b.astype(int)).max(axis=2)
        diff[-1, -1] = 0  # the frame-number pixel
        out[tag] = {"differ": int((diff > 0).sum()), "redrawn": redrawn}

    ed.select_bone(doc.asset.rig.find("left_forearm"))
    frames(4)
    check("still")
    ed.state.playing = True
    frames(8)
    check("playing")
    ed.state.tab = "curve"
    frames(4)
    check("curves")
    ed.state.tab, ed.state.onion = "dope", True
    ed.select_bone(doc.asset.rig.find("head"))
    frames(4)
    check("onion")
    ed.state.playing, ed.state.show_help = False, True
    frames(3)
    check("help")
    ed.state.show_help = False
    frames(3)
    check("help closed")
    frames(2)
    out["paused redrawn"] = ed.compositor.redrawn_pixels
    out["kept"], out["full"] = ed.compositor.kept_frames, ed.compositor.full_frames
print(json.dumps(out))
"""


@pytest.mark.parametrize("mode", ["serial", "pipelined"])
def test_redrawing_only_the_damage_equals_a_full_redraw(xdisplay, tmp_path, mode):
    """The compositor redraws only rectangles where ImGui's triangles or the 3D view changed, on top of
    the back buffer it keeps; in every state (playing, curves, onion skin, a help window opened and
    closed) the result must be the frame drawn whole, pixel for pixel; also with pipelined frames
    (the next frame's 3D view queued while this one is still being rasterised and not yet shown)."""
    env = {**os.environ, "DISPLAY": xdisplay, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("WAYLAND_DISPLAY", None)
    done = subprocess.run([sys.executable, "-c", COMPOSE_CHECK, mode], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    for tag in ("still", "playing", "curves", "onion", "help", "help closed"):
        assert out[tag]["differ"] == 0, (tag, out[tag])
    # kept under Xvfb; drawn whole: the first frame, the six checks, new glyphs for the help window
    assert out["kept"] > 20 and out["full"] <= 10, out
    assert out["paused redrawn"] == 0  # nothing moved: nothing drawn
    assert 0 < out["playing"]["redrawn"] < 0.6 * 1280 * 720  # the view and the timeline, not the window


def _open_and_close(display, cwd, model):
    """Open ``model`` in the editor, play a moment (the moving view's reduced mesh draws), close."""
    script = [{"wait": 1}, {"key": "space"}, {"wait": 1}, {"key": "space"}, {"close": True}]
    (cwd / "open.json").write_text(json.dumps(script))
    return run_editor(display, cwd, str(model), "--script", "open.json")


def test_tiny_primitives_open(xdisplay, tmp_path):
    """A model with a 12-vertex, a 48-vertex and a 3-vertex primitive opens (issue 28: the reduced mesh
    of the moving view once shrank them to nothing and moderngl refused the empty buffer)."""
    from fixtures.models import build_tiny_props

    model = build_tiny_props(tmp_path)
    done = _open_and_close(xdisplay, tmp_path, model)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("name", ["Fox.glb", "Soldier.glb", "RobotExpressive.glb", "SimpleSkin.gltf", "Mannequin.glb",
                                  "cmu_12_01_walk.bvh"])
def test_every_shared_model_opens(xdisplay, tmp_path, name):
    """The editor opens what ``skeletal view`` opens: each shared model (skipped when absent)."""
    from fixtures.shared_assets import need

    done = _open_and_close(xdisplay, tmp_path, need(name))
    assert done.returncode == 0, done.stderr


def test_the_bone_panel_widens_by_its_edge(xdisplay, demo_file, tmp_path):
    """Dragging the bone panel's right edge widens it (issue 28: deep Mixamo names were cut off in a
    fixed 210 px panel); the viewport gives way."""
    model = tmp_path / "walker.glb"
    shutil.copy(demo_file, model)
    shots = [tmp_path / "narrow.png", tmp_path / "wide.png"]
    script = [
        {"wait": 2},
        {"screenshot": str(shots[0])},
        {"drag": [{"item": "bones edge", "fx": 0.5, "fy": 0.5}, {"item": "bones edge", "fx": 0.5, "fy": 0.5, "dx": 150}],
         "steps": 8},
        {"wait": 2},
        {"screenshot": str(shots[1])},
        {"close": True},
    ]
    (tmp_path / "s.json").write_text(json.dumps(script))
    done = run_editor(xdisplay, tmp_path, str(model), "--script", "s.json", "-v")
    assert done.returncode == 0, done.stderr
    import re

    widths = [int(w) for w in re.findall(r"bones panel (\d+) px wide", done.stderr)]
    assert widths and 360 <= widths[-1] <= 400, done.stderr  # 230 + 150
    import imageio.v3 as iio

    narrow, wide = (iio.imread(p).astype(int) for p in shots)
    band = (slice(150, 400), slice(260, 360))  # right of the old edge, left of the new one
    assert np.abs(narrow[band] - wide[band]).mean() > 8  # the 3D view there became the bone panel
    from skeletal.editor.bone_tree import TREE_INDENT

    assert TREE_INDENT <= 6  # 14 levels of a Mixamo hand leave most of the panel for the name


def test_the_tree_leaves_out_a_shared_namespace():
    from skeletal.editor.bone_tree import name_prefix

    assert name_prefix(["mixamorig:Hips", "mixamorig:Spine", "Armature"]) == "mixamorig:"
    assert name_prefix(["Hips", "Spine", "rig:Arm"]) == ""  # one name in three: not a namespace
    assert name_prefix(["hips", "spine"]) == "" and name_prefix([]) == ""
