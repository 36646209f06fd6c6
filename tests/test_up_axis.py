"""One up axis for every command (issue 28): a Z-up BVH (the built-in walk with its roots turned Y -> Z,
rest and motion, as MotionBuilder/Vicon exports are) stands up in ``skeletal.load(up="auto")`` and in
``--up auto`` (the default) of info, bake, export, retarget, render, html, view and edit, each saying
so in one line; ``--up y`` keeps it lying. glTF is Y up by definition: ``auto`` leaves it alone. A glTF
whose skeleton root is in no scene and rotated (old COLLADA2GLTF exports) gets a note in ``info``
naming the ``--up`` that stands it, and that ``--up`` does."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

import skeletal
from skeletal.cli import cli
from skeletal.anim.clip import Clip, Track
from skeletal.demo import demo_asset
from skeletal.tools.export import write_bvh
from skeletal.anim.pose import world_matrices
from skeletal.quat import quat_mul, quat_to_matrix
from skeletal.tools.retarget import canonical_names
from skeletal.anim.rig import Rig

from fixtures.gltf_builder import ARRAY_BUFFER, ELEMENT_ARRAY_BUFFER, GltfBuilder
from fixtures.xvfb import xvfb_display

RX90 = np.array([np.sin(np.pi / 4), 0.0, 0.0, np.cos(np.pi / 4)])  # about +X by 90 degrees: Y up -> Z up
SRC = os.path.dirname(os.path.dirname(os.path.abspath(skeletal.__file__)))


def write_turned_bvh(path, q=RX90) -> str:
    """The demo walk as BVH with its roots turned by ``q`` (rest and motion): a Z-up mocap file."""
    demo = demo_asset()
    rig, clip = demo.rig, demo.clip("walk")
    roots = set(np.flatnonzero(rig.parents < 0).tolist())
    rest = rig.rest.copy()
    m = quat_to_matrix(q)
    for r in roots:
        rest[r, :3] = m @ rest[r, :3]
        rest[r, 3:7] = quat_mul(q, rest[r, 3:7])
    tracks = []
    for t in clip.tracks:
        v = t.values.astype(np.float64)
        if t.node in roots and t.path == "translation":
            v = v @ m.T
        elif t.node in roots and t.path == "rotation":
            v = quat_mul(q, v)
        tracks.append(Track(t.node, t.path, t.interpolation, t.times, v.astype(np.float32)))
    write_bvh(Rig(rig.names, rig.parents, rest, rig.node_of, rig.index_of), Clip("walk", tracks), path)
    return str(path)


@pytest.fixture(scope="module")
def zup(tmp_path_factory) -> str:
    return write_turned_bvh(tmp_path_factory.mktemp("zup") / "walk_zup.bvh")


def spine_up(asset, node_world=None) -> np.ndarray:
    """The mean hips -> head direction (3,) over the first clip (or given world matrices (T, N, 4, 4)
    in glTF node order)."""
    names = canonical_names(asset.rig)
    hips, head = names["hips"], names["head"]
    if node_world is None:
        from skeletal.anim.sampling import sample

        clip = asset.clips[0]
        times = np.linspace(0, clip.duration, 12)
        pose, _ = sample(clip, times, asset.rig.rest, np.zeros(len(asset.rig) + 1, np.int64), np.zeros(0))
        pos = world_matrices(asset.rig.parents, pose)[..., :3, 3]
        d = pos[:, head] - pos[:, hips]
    else:
        nodes = asset.rig.node_of
        d = node_world[:, nodes[head], :3, 3] - node_world[:, nodes[hips], :3, 3]
    d = d / np.linalg.norm(d, axis=1, keepdims=True)
    return d.mean(axis=0)


def stands(direction) -> bool:
    return direction[1] > 0.9


def test_load_auto_stands_a_z_up_bvh(zup):
    lying = skeletal.load(zup)  # the API's default: the file's axes as they are
    assert not lying.up.turned and abs(spine_up(lying)[2]) > 0.9
    asset = skeletal.load(zup, up="auto")
    assert asset.up.motion == "z" and asset.up.turned
    assert stands(spine_up(asset))
    line = asset.up.line("walk_zup.bvh")
    assert line.startswith("walk_zup.bvh: motion Z up, rest pose Y up (found from its skeleton and motion): turned")
    assert "\n" not in line
    given = skeletal.load(zup, up="z")
    assert stands(spine_up(given)) and given.up.how == "given"
    # the feet stay on the ground: the lowest joint over the clip near y = 0, as in the Y-up original
    demo = demo_asset()
    np.testing.assert_allclose(asset.rig.rest[0, 1], demo.rig.rest[0, 1], atol=1e-4)
    with pytest.raises(skeletal.SkeletalError, match="up must be one of"):
        skeletal.load(zup, up="w")


def test_auto_leaves_gltf_alone(tmp_path):
    from skeletal.io.gltf_write import write_gltf

    path = tmp_path / "demo.glb"
    write_gltf(demo_asset().document, path)
    asset = skeletal.load(path, up="auto")
    assert not asset.up.turned and asset.up.how == "as its format defines"


def run(*args):
    result = CliRunner().invoke(cli, [str(a) for a in args])
    return result


def test_info_bake_export_retarget_stand_it_up(zup, tmp_path):
    result = run("info", zup)
    assert result.exit_code == 0, result.output
    assert "walk_zup.bvh: motion Z up, rest pose Y up (found from its skeleton and motion): turned" in result.output
    assert json.loads(run("info", zup, "--json").output.split("\n", 1)[1])["up"]["motion"] == "z"
    assert "turned" not in run("info", zup, "--up", "y").output

    for up, upright in (("auto", True), ("y", False)):
        out = tmp_path / f"baked_{up}.npz"
        result = run("bake", zup, "--out", out, "--fps", "10", "--up", up)
        assert result.exit_code == 0, result.output
        assert ("turned to stand Y up" in result.output) == upright
        world = np.load(out)["node_world"]
        assert stands(spine_up(skeletal.load(zup), world)) == upright

    out = tmp_path / "walk.glb"
    result = run("export", zup, "--out", out)
    assert result.exit_code == 0 and "turned to stand Y up" in result.output
    assert stands(spine_up(skeletal.load(out)))

    target = tmp_path / "demo.glb"
    run("demo", "--export", target)
    out = tmp_path / "retargeted.glb"
    result = run("retarget", zup, target, "--out", out)
    assert result.exit_code == 0 and "walk_zup.bvh: motion Z up" in result.output
    assert stands(spine_up(skeletal.load(out)))


def test_html_stands_it_up(zup, tmp_path):
    pages = {}
    for up in ("auto", "y"):
        page = tmp_path / f"walk_{up}.html"
        result = run("html", zup, "--out", page, "--up", up)
        assert result.exit_code == 0, result.output
        assert ("turned to stand Y up" in result.output) == (up == "auto")
        text = page.read_text()
        b64 = re.search(r'id="skeletal-model">([^<]*)</script>', text).group(1)
        glb = tmp_path / f"embedded_{up}.glb"
        glb.write_bytes(base64.b64decode(b64))
        pages[up] = skeletal.load(glb)
    assert stands(spine_up(pages["auto"])) and not stands(spine_up(pages["y"]))
    # the API and the widget take the same up
    skeletal.to_html(zup, tmp_path / "api.html", up="auto")
    from skeletal.web import prepare

    assert stands(spine_up(prepare(zup, up="auto").asset))


def _gl_or_skip():
    try:
        from skeletal.render.context import shared_context

        shared_context()
    except Exception as exc:  # moderngl missing, no EGL
        pytest.skip(f"no headless OpenGL context: {exc}")


def test_render_stands_it_up(zup, tmp_path):
    _gl_or_skip()
    import imageio.v3 as iio

    images = {}
    for up in ("auto", "y"):
        out = tmp_path / f"walk_{up}.png"
        result = run("render", zup, "--out", out, "--size", "160x160", "--up", up)
        assert result.exit_code == 0, result.output
        assert ("walk_zup.bvh: motion Z up" in result.output) == (up == "auto")
        images[up] = iio.imread(out).astype(np.int32)
    assert np.abs(images["auto"] - images["y"]).max() > 60


@pytest.fixture(scope="module")
def xdisplay():
    yield from xvfb_display("1400x900x24", ("imgui_bundle", "glfw", "moderngl"), "pip install 'skeletal[edit]'")


@pytest.mark.parametrize("command", ["view", "edit"])
def test_view_and_edit_say_it_was_turned(xdisplay, zup, tmp_path, command):
    env = {**os.environ, "DISPLAY": xdisplay, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("WAYLAND_DISPLAY", None)
    shot = tmp_path / f"{command}.png"
    done = subprocess.run([sys.executable, "-m", f"skeletal.cli.{command}", zup, "--frames", "1", "--screenshot",
                           str(shot)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "walk_zup.bvh: motion Z up, rest pose Y up (found from its skeleton and motion): turned" in done.stderr
    assert shot.is_file()


# -- a skeleton root in no scene, rotated (old COLLADA2GLTF exports) --------------------------------------


def build_lying_robot(path) -> str:
    """Hips -> Spine -> Head, LeftLeg, RightLeg: a standing skeleton under a root node in no scene that
    turns it 90 degrees about X (it lies down), skinning a box in the scene."""
    b = GltfBuilder()
    armature = b.add_node("Armature", rotation=RX90.tolist())
    hips = b.add_node("Hips", translation=[0, 1.0, 0])
    spine = b.add_node("Spine", translation=[0, 0.3, 0])
    head = b.add_node("Head", translation=[0, 0.4, 0])
    legs = [b.add_node(f"{side}UpLeg", translation=[x, -0.1, 0]) for side, x in (("Left", 0.1), ("Right", -0.1))]
    feet = [b.add_node(f"{side}Foot", translation=[0, -0.85, 0]) for side in ("Left", "Right")]
    b.add_children(armature, [hips])
    b.add_children(hips, [spine, *legs])
    b.add_children(spine, [head])
    for leg, foot in zip(legs, feet):
        b.add_children(leg, [foot])
    joints = [hips, spine, head, *legs, *feet]
    from fixtures.models import inverse_binds

    ibm = inverse_binds(b, joints)
    pos = np.array([[x, y, z] for x in (-0.2, 0.2) for y in (0.0, 1.8) for z in (-0.1, 0.1)], np.float32)
    tris = np.array([0, 1, 3, 0, 3, 2, 4, 6, 7, 4, 7, 5, 0, 4, 5, 0, 5, 1, 2, 3, 7, 2, 7, 6, 0, 2, 6, 0, 6, 4,
                     1, 5, 7, 1, 7, 3], np.uint16)
    jts = np.zeros((8, 4), np.uint8)
    wts = np.zeros((8, 4), np.float32)
    wts[:, 0] = 1
    attrs = {"POSITION": b.add_accessor(pos, target=ARRAY_BUFFER, min_max=True),
             "JOINTS_0": b.add_accessor(jts, target=ARRAY_BUFFER), "WEIGHTS_0": b.add_accessor(wts, target=ARRAY_BUFFER)}
    mesh = b.add_mesh([b.primitive(attrs, b.add_accessor(tris, target=ELEMENT_ARRAY_BUFFER))], name="Box")
    skin = b.add_skin(joints, ibm, name="Skin")
    body = b.add_node("Body", mesh=mesh, skin=skin)
    b.add_scene([body], name="Scene")  # the Armature is in no scene
    return str(b.write_glb(path))


def test_info_notes_a_rotated_skeleton_root_outside_the_scene(tmp_path):
    robot = build_lying_robot(tmp_path / "robot.glb")
    result = run("info", robot)
    assert result.exit_code == 0, result.output
    note = [line for line in result.output.splitlines() if line.startswith("note: ")]
    assert len(note) == 1 and "Armature [0] is in no scene and rotated 90 degrees" in note[0]
    assert note[0].endswith("--up z stands it up")
    lying = skeletal.load(robot)
    rest = world_matrices(lying.rig.parents, lying.rig.rest)
    names = list(lying.rig.names)
    assert abs(rest[names.index("Head"), 2, 3] - rest[names.index("Hips"), 2, 3]) > 0.5  # lies along Z
    upright = skeletal.load(robot, up="z")
    rest = world_matrices(upright.rig.parents, upright.rig.rest)
    assert rest[names.index("Head"), 1, 3] - rest[names.index("Hips"), 1, 3] > 0.6
    result = run("info", robot, "--up", "z")
    assert "robot.glb: Z up (given): turned to stand Y up" in result.output and "note: " not in result.output


def test_the_widget_takes_up_and_follow(zup):
    pytest.importorskip("anywidget", reason="anywidget is not installed (pip install 'skeletal[notebook]')")
    from skeletal.web.widget import SkeletalWidget

    widget = SkeletalWidget(zup, up="auto", still=False, follow=True)
    assert stands(spine_up(widget.asset)) and widget.asset.up.motion == "z"
    assert widget.options["follow"]["on"] is True
    assert not stands(spine_up(SkeletalWidget(zup, still=False).asset))  # the API's default: as read
