"""BVH motion capture (``skeletal.io.bvh``, ``skeletal.write_bvh``, ``skeletal.load("x.bvh")``).

* reader: generated fixtures with every channel order (positions and rotations interleaved, 6-channel
  joints, 3-channel roots, end sites, tabs, CRLF) against an independent evaluator written here with
  plain rotation matrices; LINEAR keys at the frame time; plays, blends and bakes;
* cross-check against ``bvhio`` (an independent maintained reader from the package index, test
  extra): joint world positions over every frame of a generated fixture and of the shared CMU walk and
  bvh_example files;
* writer: round trips over all 6 rotation orders, for a randomly posed small rig and for the CMU walk,
  below 1e-5 rad;
* bad input: one ``skeletal.ModelError`` naming the file and line (CLI: one stderr line, exit 2), no
  hang and no allocation sized by a lying ``Frames:`` count;
* rendering: a skeleton-only asset is drawn as shaded bones where its joints project.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import skeletal
from skeletal.tools.bake import bake
from skeletal.cli import cli
from skeletal.anim.clip import Clip, Track
from skeletal.io.bvh import CMU_SCALE, MAX_DEPTH, MAX_JOINTS, ROTATION_ORDERS, parse_bvh, read_bvh
from skeletal.quat import quat_conjugate, quat_mul
from skeletal.anim.rig import Rig

from test_viewer import screenshot

REPO = Path(__file__).resolve().parents[1]
from fixtures.shared_assets import need as _need


# ---------------------------------------------------------------------------------------------
# An independent BVH evaluator: rotation matrices multiplied in channel order, translations set.


def _axis_matrix(axis: str, degrees: np.ndarray) -> np.ndarray:
    a = np.radians(degrees)
    c, s = np.cos(a), np.sin(a)
    m = np.zeros(a.shape + (3, 3))
    i = "XYZ".index(axis)
    j, k = (i + 1) % 3, (i + 2) % 3
    m[..., i, i] = 1.0
    m[..., j, j] = c
    m[..., k, k] = c
    m[..., j, k] = -s
    m[..., k, j] = s
    return m


class Fixture:
    """A generated BVH file: joints (name, parent, offset, channels, end), the motion values, the
    text, and the reference world positions (F, N, 3) of every joint and end site."""

    def __init__(self, joints, values: np.ndarray, frame_time: float = 1 / 30, newline: str = "\n"):
        self.joints, self.values, self.frame_time = joints, values, frame_time
        self.text = self._text(newline)
        self.world = self._evaluate()

    @property
    def names(self) -> list[str]:
        return [j["name"] for j in self.joints]

    def _text(self, newline: str) -> str:
        lines = ["HIERARCHY"]
        depth_of: dict[int, int] = {}
        open_blocks: list[int] = []
        for i, j in enumerate(self.joints):
            depth = 0 if j["parent"] < 0 else depth_of[j["parent"]] + 1
            depth_of[i] = depth
            while open_blocks and open_blocks[-1] >= depth:
                lines.append("\t" * open_blocks.pop() + "}")
            pad = "\t" * depth
            head = "End Site" if j.get("end") else ("ROOT " if depth == 0 else "JOINT ") + j["name"]
            lines += [pad + head, pad + "{", pad + "\tOFFSET " + " ".join(f"{v:.6f}" for v in j["offset"])]
            if not j.get("end"):
                lines.append(pad + f"\tCHANNELS {len(j['channels'])} " + " ".join(j["channels"]))
            open_blocks.append(depth)
        while open_blocks:
            lines.append("\t" * open_blocks.pop() + "}")
        lines += ["MOTION", f"Frames: {len(self.values)}", f"Frame Time: {self.frame_time:.8f}"]
        lines += [" ".join(f"{v:.6f}" for v in row) for row in self.values]
        return newline.join(lines) + newline

    def _evaluate(self) -> np.ndarray:
        values = np.round(self.values, 6)
        frames = len(values)
        rot = np.zeros((frames, len(self.joints), 3, 3))
        pos = np.zeros((frames, len(self.joints), 3))
        column = 0
        for i, j in enumerate(self.joints):
            r = np.broadcast_to(np.eye(3), (frames, 3, 3)).copy()
            t = np.tile(np.asarray(j["offset"], float), (frames, 1))
            for name in j.get("channels", []):
                axis = name[0]
                if name.endswith("rotation"):
                    r = r @ _axis_matrix(axis, values[:, column])
                else:
                    t[:, "XYZ".index(axis)] = values[:, column]
                column += 1
            p = j["parent"]
            if p < 0:
                rot[:, i], pos[:, i] = r, t
            else:
                rot[:, i] = rot[:, p] @ r
                pos[:, i] = pos[:, p] + np.einsum("fij,fj->fi", rot[:, p], t)
        return pos


def random_fixture(seed: int = 0, frames: int = 9, *, interleave: bool = True, root_channels: int = 6,
                   newline: str = "\n") -> Fixture:
    """A 7-joint tree + 3 end sites: every joint a random channel order (rotation orders of all kinds,
    positions interleaved with rotations when ``interleave``), one non-root joint with 6 channels."""
    rng = np.random.default_rng(seed)
    rotations = ["Xrotation", "Yrotation", "Zrotation"]
    positions = ["Xposition", "Yposition", "Zposition"]

    def channels(six: bool) -> list[str]:
        r = list(rng.permutation(rotations))
        if not six:
            return r
        if interleave:
            return list(rng.permutation(rotations + positions))
        return list(rng.permutation(positions)) + r

    tree = [("Hips", -1), ("Spine", 0), ("Head", 1), ("LeftUpLeg", 0), ("LeftLeg", 3), ("RightUpLeg", 0),
            ("RightLeg", 5)]
    joints = []
    for name, parent in tree:
        if parent < 0:
            ch = channels(True) if root_channels == 6 else list(rng.permutation(rotations))
        else:
            ch = channels(name == "Spine")
        joints.append({"name": name, "parent": parent, "offset": rng.uniform(-3, 3, 3) * (parent >= 0), "channels": ch})
    # end sites under the leaves (inserted right after their parent's subtree: here, at the end of each chain)
    out = []
    for j in joints:
        out.append(j)
    ends = {2: "Head", 4: "LeftLeg", 6: "RightLeg"}
    ordered = []
    index_of = {}
    for i, j in enumerate(out):
        index_of[i] = len(ordered)
        ordered.append(dict(j, parent=index_of[j["parent"]] if j["parent"] >= 0 else -1))
        if i in ends:
            ordered.append({"name": f"{j['name']}_End", "parent": index_of[i], "offset": rng.uniform(-2, 2, 3), "end": True})
    columns = sum(len(j.get("channels", [])) for j in ordered)
    values = np.empty((frames, columns))
    c = 0
    for j in ordered:
        for name in j.get("channels", []):
            values[:, c] = rng.uniform(-170, 170, frames) if name.endswith("rotation") else rng.uniform(-5, 5, frames)
            c += 1
    return Fixture(ordered, values, newline=newline)


def _world_positions(asset, times=None) -> np.ndarray:
    clip = asset.clips[0]
    times = clip.tracks[0].times.astype(np.float64) if times is None else np.asarray(times, np.float64)
    return bake(asset, clip, times)["node_world"][..., :3, 3]  # (F, N, 3) file order


def _asset_of(text: str, name: str = "fixture.bvh", tmp: Path | None = None) -> skeletal.Asset:
    if tmp is not None:
        path = tmp / name
        path.write_bytes(text.encode())
        return skeletal.load(path)
    return skeletal.Asset(parse_bvh(text, name))


# ---------------------------------------------------------------------------------------------
# reading


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_reader_matches_reference_evaluator(seed, newline, tmp_path):
    fx = random_fixture(seed, newline=newline, root_channels=6 if seed % 2 == 0 else 3)
    asset = _asset_of(fx.text, tmp=tmp_path)
    assert list(asset.document.nodes[i].name for i in range(len(fx.joints))) == fx.names
    got = _world_positions(asset)
    np.testing.assert_allclose(got, fx.world, atol=2e-4 * np.abs(fx.world).max())
    # the file's channel lists are kept (write_bvh(rotation_order=None) reuses them)
    chans = asset.document.asset_info["channels"]
    assert chans == {j["name"]: j["channels"] for j in fx.joints if not j.get("end")}


def test_keys_are_linear_at_the_frame_time():
    fx = random_fixture(1, frames=7)
    fx = Fixture(fx.joints, fx.values, frame_time=1 / 120)
    asset = _asset_of(fx.text)
    (clip,) = asset.clips
    assert clip.duration == pytest.approx(6 / 120, rel=1e-6)
    for track in clip.tracks:
        assert track.interpolation == "LINEAR"
        np.testing.assert_allclose(track.times, np.arange(7) / 120, rtol=1e-6)
    # between keys the pose is interpolated, not held: halfway between two frames of a joint that only
    # rotates about one axis is the mean angle
    one_axis = Fixture([{"name": "A", "parent": -1, "offset": [0, 0, 0], "channels": ["Zrotation"]},
                        {"name": "B", "parent": 0, "offset": [1, 0, 0], "end": True}], np.array([[0.0], [60.0]]))
    p = _world_positions(_asset_of(one_axis.text), [one_axis.frame_time / 2])[0, 1]
    np.testing.assert_allclose(p, [math.cos(math.radians(30)), math.sin(math.radians(30)), 0], atol=1e-6)


def test_end_sites_tabs_and_names():
    text = ("HIERARCHY\r\nROOT\tmy root {\r\n OFFSET 0 0 0\r\n\tCHANNELS 3 Xposition YPOSITION zposition\r\n"
            "\tEnd Site\r\n\t{\r\n\t\tOFFSET 0 2 0\r\n\t}\r\n}\r\nMOTION\r\nFrames:\t2\r\nFrame\ttime:   0.5\r\n"
            "1 2 3\r\n\t4\t5\t6\r\n")
    doc = parse_bvh(text.replace("\r\n", "\n"), "t.bvh")
    assert [n.name for n in doc.nodes] == ["my root", "my root_End"]
    asset = skeletal.Asset(doc)
    np.testing.assert_allclose(_world_positions(asset)[:, 1], [[1, 4, 3], [4, 7, 6]], atol=1e-6)
    assert not doc.meshes and not doc.skins


def test_scale_option(tmp_path):
    fx = random_fixture(2)
    path = tmp_path / "s.bvh"
    path.write_text(fx.text)
    scaled = skeletal.Asset(read_bvh(path, scale=CMU_SCALE))
    np.testing.assert_allclose(_world_positions(scaled), fx.world * CMU_SCALE, atol=2e-4 * np.abs(fx.world).max() * CMU_SCALE)
    with pytest.raises(ValueError, match="scale"):
        read_bvh(path, scale=0)


@pytest.mark.parametrize("root_channels", [6, 3])
def test_z_up_option(root_channels, tmp_path):
    """up="z": every joint's world position is the Y-up reading's turned by -90 degrees about X
    ((x, y, z) -> (x, z, -y)), at every frame and in the rest pose."""
    fx = random_fixture(3, root_channels=root_channels)
    path = tmp_path / "z.bvh"
    path.write_text(fx.text)
    turned = skeletal.Asset(read_bvh(path, up="z"))
    expected = fx.world[..., [0, 2, 1]] * np.array([1.0, 1.0, -1.0])
    np.testing.assert_allclose(_world_positions(turned), expected, atol=2e-4 * np.abs(fx.world).max())
    from skeletal.anim.pose import world_matrices

    plain = skeletal.Asset(read_bvh(path))
    rest_plain = world_matrices(plain.rig.parents, plain.rig.rest)[:, :3, 3]
    rest_turned = world_matrices(turned.rig.parents, turned.rig.rest)[:, :3, 3]
    np.testing.assert_allclose(rest_turned, rest_plain[:, [0, 2, 1]] * [1, 1, -1], atol=1e-9)
    with pytest.raises(ValueError, match="up"):
        read_bvh(path, up="x")


def test_plays_blends_and_bakes_like_any_clip():
    """Mixer and Player playback equal the bake; halfway through a crossfade between two one-axis clips
    the pose is the mean angle."""
    fx = random_fixture(3, frames=12)
    asset = _asset_of(fx.text)
    clip = asset.clips[0]
    mixer = skeletal.Mixer(asset)
    mixer.play(clip)
    mixer.update(0.13)
    ref = bake(asset, clip, [0.13])["node_world"][0]
    np.testing.assert_allclose(mixer.world[0], ref[asset.rig.node_of], atol=1e-9)
    player = skeletal.Player(asset)
    player.play(0)
    player.update(0.13)
    np.testing.assert_allclose(player.world, ref[asset.rig.node_of], atol=1e-9)

    def one_axis(angle):
        return Fixture([{"name": "A", "parent": -1, "offset": [0, 0, 0], "channels": ["Xposition", "Yposition", "Zposition", "Zrotation"]},
                        {"name": "B", "parent": 0, "offset": [1, 0, 0], "end": True}], np.array([[0, 0, 0, angle]] * 2))

    a, b = _asset_of(one_axis(0.0).text, "a.bvh"), _asset_of(one_axis(80.0).text, "b.bvh")
    mixer = skeletal.Mixer(a)
    mixer.play(a.clips[0])
    mixer.update(0.01)
    mixer.crossfade(b.clips[0], 1.0)
    mixer.update(0.5)
    np.testing.assert_allclose(mixer.world[0, 1, :3, 3], [math.cos(math.radians(40)), math.sin(math.radians(40)), 0], atol=1e-6)


def test_load_dispatch_and_cli_info(tmp_path):
    fx = random_fixture(0)
    path = tmp_path / "walk.BVH"
    path.write_text(fx.text)
    asset = skeletal.load(path)
    assert asset.clips[0].name == "walk" and len(asset.rig) == len(fx.joints)
    result = CliRunner().invoke(cli, ["info", str(path)])
    assert result.exit_code == 0 and "generator: BVH" in result.output


@pytest.mark.parametrize("name", ["cmu_12_01_walk.bvh", "bvh_example.bvh"])
def test_shared_files_read(name):
    asset = skeletal.load(_need(name))
    clip = asset.clips[0]
    frames = {"cmu_12_01_walk.bvh": 524, "bvh_example.bvh": 75}[name]
    assert all(t.key_count == frames for t in clip.tracks)
    w = _world_positions(asset)
    assert np.all(np.isfinite(w))


# ---------------------------------------------------------------------------------------------
# cross-check against bvhio (an independent reader; test extra only)


def _bvhio_positions(path: Path, names: list[str]) -> np.ndarray:
    bvhio = pytest.importorskip("bvhio", reason="bvhio (the independent BVH reader of the test extra) is not installed")
    root = bvhio.readAsHierarchy(str(path))
    layout = [j for j, _, _ in root.layout()]
    by_name = {j.Name: j for j in layout}
    joints = [by_name[n] for n in names]
    frames = len(root.Keyframes) if hasattr(root, "Keyframes") else None
    out = np.empty((frames, len(joints), 3))
    for f in range(frames):
        root.loadPose(f)
        for k, joint in enumerate(joints):
            p = joint.PositionWorld
            out[f, k] = (p.x, p.y, p.z)
    return out


def _cross_check(path: Path) -> float:
    asset = skeletal.load(path)
    names = [n for n, chans in asset.document.asset_info["channels"].items()]  # every joint (no end sites)
    ref = _bvhio_positions(path, names)
    file_index = [next(i for i, n in enumerate(asset.document.nodes) if n.name == name) for name in names]
    got = _world_positions(asset)[:, file_index]
    assert got.shape == ref.shape
    err = float(np.abs(got - ref).max())
    size = float(np.abs(ref).max())
    assert err < 1e-5 * size + 1e-5, (err, size)
    return err / size


def test_bvhio_agrees_on_generated_fixture(tmp_path):
    fx = random_fixture(5, frames=20, interleave=False)
    path = tmp_path / "gen.bvh"
    path.write_text(fx.text)
    _cross_check(path)


@pytest.mark.parametrize("name", ["cmu_12_01_walk.bvh", "bvh_example.bvh"])
def test_bvhio_agrees_on_shared_files(name):
    print(name, "relative error vs bvhio", _cross_check(_need(name)))


# ---------------------------------------------------------------------------------------------
# writing


def _angle_error(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Rotation angle (radians) between xyzw quaternions a and b (..., 4), robust near 0."""
    d = quat_mul(quat_conjugate(a), b)
    return 2.0 * np.arctan2(np.linalg.norm(d[..., :3], axis=-1), np.abs(d[..., 3]))


def _random_rig_and_clip(seed: int = 0, frames: int = 16):
    rng = np.random.default_rng(seed)
    names = ["root", "spine", "head", "arm.L", "hand.L", "arm R", "leg"]
    parents = [-1, 0, 1, 1, 3, 1, 0]
    n = len(names)
    rest = np.zeros((n, 10))
    rest[:, 0:3] = rng.uniform(-1, 1, (n, 3))
    q = rng.normal(size=(n, 4))
    rest[:, 3:7] = q / np.linalg.norm(q, axis=1, keepdims=True)
    rest[:, 7:10] = 1.0
    rig = Rig.from_parents(names, parents, rest)
    times = (np.arange(frames) / 30).astype(np.float32)
    tracks = []
    for node in range(n):
        q = rng.normal(size=(frames, 4))
        q /= np.linalg.norm(q, axis=1, keepdims=True)
        tracks.append(Track(node, "rotation", "LINEAR", times, q.astype(np.float32)))
    tracks.append(Track(0, "translation", "LINEAR", times, rng.uniform(-2, 2, (frames, 3)).astype(np.float32)))
    tracks.append(Track(4, "translation", "LINEAR", times, rng.uniform(-1, 1, (frames, 3)).astype(np.float32)))
    return rig, Clip("random", tracks)


def _world(rig: Rig, clip: Clip, times) -> np.ndarray:
    from skeletal.anim.pose import world_matrices
    from skeletal.anim.sampling import sample

    pose, _ = sample(clip, np.asarray(times, np.float64), rig.rest, np.zeros(len(rig) + 1, np.int64), np.zeros(0))
    return world_matrices(rig.parents, pose)


@pytest.mark.parametrize("order", ROTATION_ORDERS)
def test_round_trip_random_rig(order):
    rig, clip = _random_rig_and_clip(1)
    text = skeletal.write_bvh(rig, clip, rotation_order=order)
    assert f"CHANNELS 3 {' '.join(a + 'rotation' for a in order)}" in text
    back = skeletal.Asset(parse_bvh(text, "rt.bvh"))
    times = clip.tracks[0].times.astype(np.float64)
    ref = _world(rig, clip, times)
    got = _world(back.rig, back.clips[0], times)
    from skeletal.quat import matrix_to_quat

    for i, name in enumerate(rig.names):
        j = back.rig.names.index(name.replace(" ", "_"))
        err = _angle_error(matrix_to_quat(ref[:, i, :3, :3]), matrix_to_quat(got[:, j, :3, :3]))
        assert err.max() < 1e-5, (name, order, err.max())
        np.testing.assert_allclose(got[:, j, :3, 3], ref[:, i, :3, 3], atol=1e-5)


@pytest.mark.parametrize("order", ROTATION_ORDERS)
def test_round_trip_cmu(order):
    asset = skeletal.load(_need("cmu_12_01_walk.bvh"))
    clip = asset.clips[0]
    text = skeletal.write_bvh(asset, clip, rotation_order=order)
    back = skeletal.Asset(parse_bvh(text, "rt.bvh"))
    assert back.rig.names == asset.rig.names
    assert back.clips[0].tracks[0].key_count == 524
    times = clip.tracks[0].times.astype(np.float64)
    from skeletal.anim.sampling import sample

    def local(a):
        pose, _ = sample(a.clips[0], times, a.rig.rest, np.zeros(len(a.rig) + 1, np.int64), np.zeros(0))
        return pose

    p0, p1 = local(asset), local(back)
    err = _angle_error(p0[..., 3:7], p1[..., 3:7])
    assert err.max() < 1e-5, err.max()
    np.testing.assert_allclose(p1[..., 0:3], p0[..., 0:3], atol=1e-4)  # 6 decimals of inches
    print(order, "max angle error", float(err.max()), "rad")


def test_write_keeps_file_orders_and_frame_time(tmp_path):
    fx = random_fixture(4, interleave=False)
    asset = _asset_of(fx.text, "orig.bvh")
    out = tmp_path / "again.bvh"
    skeletal.write_bvh(asset, 0, out, rotation_order=None)
    doc = read_bvh(out)
    orders = {n: "".join(c[0] for c in ch if c.endswith("rotation")) for n, ch in doc.asset_info["channels"].items()}
    assert orders == {j["name"]: "".join(c[0] for c in j["channels"] if c.endswith("rotation"))
                      for j in fx.joints if not j.get("end")}
    assert doc.asset_info["frame_time"] == pytest.approx(fx.frame_time)
    np.testing.assert_allclose(_world_positions(skeletal.Asset(doc)), fx.world, atol=1e-4 * np.abs(fx.world).max())


def test_write_any_rig_glTF_demo(tmp_path):
    """A skinned glTF character's clip writes as BVH whose joints move like the character's."""
    from skeletal.demo import demo_asset

    demo = demo_asset()
    clip = demo.clip("walk")
    text = skeletal.write_bvh(demo, clip, fps=30, rotation_order="YXZ")
    back = skeletal.Asset(parse_bvh(text, "demo.bvh"))
    times = np.arange(back.clips[0].tracks[0].key_count) / 30
    ref = _world(demo.rig, clip, times)
    got = _world(back.rig, back.clips[0], times)
    shared = [name for name in back.rig.names if name in demo.rig.names]
    assert len(shared) >= 10
    for name in shared:
        np.testing.assert_allclose(got[:, back.rig.names.index(name), :3, 3], ref[:, demo.rig.names.index(name), :3, 3], atol=1e-5)


# ---------------------------------------------------------------------------------------------
# bad input

GOOD = random_fixture(7, frames=3, interleave=False)


def _replace(text: str, old: str, new: str, count: int = 1) -> str:
    assert old in text
    return text.replace(old, new, count)


def _line_of(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n") + 1


def _bad_cases():
    g = GOOD.text
    first_channels = g[g.index("CHANNELS"):].split("\n", 1)[0]
    spine_channels = g[g.index("JOINT Spine"):].split("CHANNELS", 1)[1].split("\n", 1)[0]
    data_lines = g.split("Frame Time:", 1)[1].split("\n")[1:]
    last = data_lines[-2]
    deep = "HIERARCHY\nROOT r\n{\nOFFSET 0 0 0\nCHANNELS 3 Zrotation Yrotation Xrotation\n"
    deep += "".join(f"JOINT j{i}\n{{\nOFFSET 0 1 0\nCHANNELS 3 Zrotation Yrotation Xrotation\n" for i in range(10_000))
    deep += "}\n" * 10_001 + "MOTION\nFrames: 1\nFrame Time: 0.1\n" + "0 " * 30_003 + "\n"
    return [
        # (name, text, line (or a needle to find it), message regex)
        ("channel count too small", _replace(g, "CHANNELS" + spine_channels, "CHANNELS 5 " + spine_channels.split(" ", 2)[2]),
         "CHANNELS 5", r"CHANNELS 5 but 6 names"),
        ("channel count too large", _replace(g, "CHANNELS" + spine_channels, "CHANNELS 6 " + " ".join(spine_channels.split()[1:5])),
         "CHANNELS 6 " + " ".join(spine_channels.split()[1:5]), r"CHANNELS 6 but 4 channel names"),
        ("channel count over 6", _replace(g, first_channels, "CHANNELS 9 Xposition"), "CHANNELS 9", "0..6"),
        ("missing MOTION", g.split("MOTION")[0], None, "no MOTION section"),
        ("non-numeric value", _replace(g, last, last.replace(last.split()[3], "abc")), last.replace(last.split()[3], "abc"), "not a number"),
        ("non-numeric offset", _replace(g, "OFFSET", "OFFSET x1", 2).replace("OFFSET x1", "OFFSET", 1), "OFFSET x1", "not a number"),
        ("nan value", _replace(g, last, last.replace(last.split()[0], "nan")), last.replace(last.split()[0], "nan"), "not finite"),
        ("too few values on a line", _replace(g, last, " ".join(last.split()[:-1])), " ".join(last.split()[:-1]), "values"),
        ("deep hierarchy", deep, "JOINT j999\n", f"deeper than {MAX_DEPTH}"),
        ("a billion frames", _replace(g, "Frames: 3", "Frames: 1000000000"), "Frames: 1000000000", "only 3 lines"),
        ("fewer frames than declared", _replace(g, "Frames: 3", "Frames: 5"), "Frames: 5", "only 3 lines|ends after 3"),
        ("truncated in the hierarchy", g[: g.index("JOINT LeftLeg") + 20], None, "no MOTION"),
        ("truncated in the motion", g[: g.index(last) + len(last) // 2], None, "values|ends after|only"),
        ("missing Frame Time", _replace(g, "Frame Time:", "Frame Tim:"), "Frame Tim:", "Frame Time"),
        ("zero Frame Time", _replace(g, "Frame Time: 0.03333333", "Frame Time: 0"), "Frame Time: 0", "positive"),
        ("negative frames", _replace(g, "Frames: 3", "Frames: -3"), "Frames: -3", "non-negative integer"),
        ("unbalanced braces", _replace(g, "MOTION", "}\nMOTION"), "}\nMOTION", "unexpected '}'"),
        ("missing closing brace", g.replace("}\nMOTION", "MOTION", 1), None, "missing '}'"),
        ("JOINT outside ROOT", _replace(g, "ROOT Hips", "JOINT Hips"), "JOINT Hips", "ROOT"),
        ("End Site with channels", _replace(g, "End Site\n", "End Site\n{\nCHANNELS 1 Xrotation\n}\nEnd Site\n"), "CHANNELS 1 X", "End Site"),
        ("duplicate channel", _replace(g, first_channels, "CHANNELS 3 Zrotation Zrotation Xrotation"), "CHANNELS 3 Zrotation Zrotation", "twice"),
        ("binary data", "\x00\x01BVH" * 100, None, "binary"),
        # the hostile-file audit (issue 21): Unicode digits pass str.isdigit() but not int()
        ("superscript frame count", _replace(g, "Frames: 3", "Frames: \u00b2"), "Frames: \u00b2", "non-negative integer"),
        ("superscript channel count", _replace(g, first_channels, "CHANNELS \u00b3 Zrotation Yrotation Xrotation"),
         "CHANNELS \u00b3", "0..6"),
        ("5,000-digit frame count", _replace(g, "Frames: 3", "Frames: " + "9" * 5000), "Frames: 999", "at most 15 digits"),
        ("5,000-digit channel count", _replace(g, first_channels, "CHANNELS " + "6" * 5000), "CHANNELS 666", "0..6"),
        ("Frames: 1e12", _replace(g, "Frames: 3", "Frames: 1e12"), "Frames: 1e12", "non-negative integer"),
        ("Frame Time: 1e300", _replace(g, "Frame Time: 0.03333333", "Frame Time: 1e300"), "Frame Time: 1e300", "up to 3600"),
        ("negative Frame Time", _replace(g, "Frame Time: 0.03333333", "Frame Time: -0.1"), "Frame Time: -0.1", "positive"),
        ("infinite Frame Time", _replace(g, "Frame Time: 0.03333333", "Frame Time: inf"), "Frame Time: inf", "positive"),
        ("CHANNELS 7", _replace(g, first_channels, "CHANNELS 7 " + first_channels.split(" ", 2)[2] + " Xrotation"),
         "CHANNELS 7", "0..6"),
        ("lines alternate short and long (right total)",
         _replace(_replace(g, data_lines[0], " ".join(data_lines[0].split()[:-2])),
                  data_lines[1], data_lines[1] + " " + " ".join(data_lines[0].split()[-2:])),
         " ".join(data_lines[0].split()[:-2]), r"frame 0 has \d+ values, the HIERARCHY declares \d+ channels"),
        ("inf value", _replace(g, last, last.replace(last.split()[2], "inf", 1)), last.replace(last.split()[2], "inf", 1), "not finite"),
        ("-inf value", _replace(g, last, last.replace(last.split()[2], "-inf", 1)), last.replace(last.split()[2], "-inf", 1), "not finite"),
        ("1e308 value", _replace(g, last, last.replace(last.split()[2], "1e308", 1)), last.replace(last.split()[2], "1e308", 1), "out of range"),
        ("1e308 offset", _replace(g, "OFFSET", "OFFSET 1e308 0 0 #", 1), "OFFSET 1e308", "out of range"),
        ("100k joints", "HIERARCHY\nROOT r\n{\nOFFSET 0 0 0\nCHANNELS 3 Zrotation Yrotation Xrotation\n"
         + "JOINT j\n{\nOFFSET 0 1 0\nCHANNELS 3 Zrotation Yrotation Xrotation\n}\n" * 100_000
         + "}\nMOTION\nFrames: 1\nFrame Time: 0.1\n" + "0 " * 300_003 + "\n", None, f"more than {MAX_JOINTS} joints"),
        ("empty", "", None, "no MOTION"),
    ]


BAD = _bad_cases()


@pytest.mark.parametrize("name,text,where,pattern", BAD, ids=[c[0] for c in BAD])
def test_bad_input_names_file_and_line(name, text, where, pattern, tmp_path):
    path = tmp_path / "bad.bvh"
    path.write_text(text)
    t0 = time.perf_counter()
    with pytest.raises(skeletal.ModelError, match=pattern) as info:
        skeletal.load(path)
    assert time.perf_counter() - t0 < 10.0, "took too long"  # generous: a hang shows as minutes
    message = str(info.value)
    assert message.startswith("bad.bvh: line "), message
    assert "\n" not in message
    if where is not None:
        line = int(info.value.where.split()[1])
        expected = _line_of(text, where)
        assert line in (expected, expected + where[:-1].count("\n")), (message, expected)


def test_more_frame_lines_than_declared_reads_the_declared_count(tmp_path):
    """One frame line (or several) past ``Frames:``: the declared frames are read, with one warning
    naming the first extra line (three.js, bvhio and Assimp read the declared count too)."""
    g = GOOD.text
    for declared in (2, 1):
        path = tmp_path / "extra.bvh"
        path.write_text(_replace(g, "Frames: 3", f"Frames: {declared}"))
        with pytest.warns(UserWarning) as record:
            asset = skeletal.load(path)
        messages = [str(w.message) for w in record if "Frames:" in str(w.message)]
        extra = 3 - declared
        first_extra = g.split("Frame Time:", 1)[1].split("\n")[1:][declared]
        assert messages == [f"extra.bvh: line {_line_of(g, first_extra)}: {extra} more frame line{'s' if extra > 1 else ''} "
                            f"than the {declared} that 'Frames:' (line {_line_of(g, 'Frames:')}) declares; read the "
                            "declared frames, ignored the rest"], messages
        clip = asset.clips[0]
        assert clip.tracks[0].key_count == declared
        ref = skeletal.Asset(parse_bvh(g, "good.bvh")).clips[0]
        for track, full in zip(clip.tracks, ref.tracks):
            np.testing.assert_array_equal(track.values, full.values[:declared])
    # what follows the declared frames is not even parsed
    path.write_text(_replace(g, "Frames: 3", "Frames: 2") + "garbage after the frames\n")
    with pytest.warns(UserWarning, match="2 more frame lines"):
        assert skeletal.load(path).clips[0].tracks[0].key_count == 2


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-8-sig"])
def test_utf16_and_bom_files_read(encoding, tmp_path):
    """Windows tools write BVH as UTF-16 (with or without a BOM) or UTF-8 with a BOM."""
    path = tmp_path / "wide.bvh"
    path.write_bytes(GOOD.text.replace("Hips", "H\u00fcfte").encode(encoding))
    asset = skeletal.load(path)
    assert asset.rig.names[0] == "H\u00fcfte"
    assert asset.clips[0].tracks[0].key_count == 3
    path.write_bytes(b"\xff\xfe" + GOOD.text.encode("utf-16-le")[:-1])  # an odd byte count
    with pytest.raises(skeletal.ModelError, match=r"^wide\.bvh: not valid UTF-16 text"):
        skeletal.load(path)


def test_lying_frame_count_allocates_nothing_big(tmp_path):
    import tracemalloc

    path = tmp_path / "liar.bvh"
    path.write_text(_replace(GOOD.text, "Frames: 3", "Frames: 1000000000"))
    tracemalloc.start()
    with pytest.raises(skeletal.ModelError):
        skeletal.load(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 20_000_000, peak


def test_wide_hierarchy_with_blank_lines_allocates_nothing_big(tmp_path):
    """1,000 joints x 6 channels and 20,000 one-number frame lines would be 1 GB if believed."""
    import tracemalloc

    text = "HIERARCHY\nROOT r\n{\nOFFSET 0 0 0\nCHANNELS 6 Xposition Yposition Zposition Zrotation Yrotation Xrotation\n"
    text += "JOINT j\n{\nOFFSET 0 1 0\nCHANNELS 6 Xposition Yposition Zposition Zrotation Yrotation Xrotation\n}\n" * 1_000
    text += "}\nMOTION\nFrames: 20000\nFrame Time: 0.1\n" + "0\n" * 20_000
    path = tmp_path / "wide.bvh"
    path.write_text(text)
    tracemalloc.start()
    with pytest.raises(skeletal.ModelError, match=r"wide.bvh: line \d+: frame 0 has 1 values, the HIERARCHY declares 6006 channels"):
        skeletal.load(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 100_000_000, peak


def test_cli_bad_bvh_one_line(tmp_path):
    path = tmp_path / "broken.bvh"
    path.write_text(GOOD.text.split("MOTION")[0])
    for command in (["info", str(path)], ["render", str(path), "--out", str(tmp_path / "x.png")],
                    ["export", str(path), "--out", str(tmp_path / "x.glb")]):
        result = CliRunner().invoke(cli, command)
        assert result.exit_code == 2, (command, result.output)
        lines = [line for line in result.output.splitlines() if line.strip()]
        assert lines == [f"skeletal: error: broken.bvh: line {GOOD.text.split('MOTION')[0].count(chr(10)) + 1}: "
                         "no MOTION section (the file is truncated or not BVH)"], result.output


# ---------------------------------------------------------------------------------------------
# rendering a skeleton-only asset: bones as shaded capsules


def test_render_draws_bones_where_joints_project(ctx):
    from skeletal.render.bones import LEFT_COLOR, RIGHT_COLOR, side_of
    from skeletal.render.layout import pose_at
    from skeletal.render.renderer import Renderer

    fx = random_fixture(6, frames=5)
    asset = _asset_of(fx.text, "skeleton.bvh")
    clip = asset.clips[0]
    world, morph = pose_at(asset, clip, [0.05])
    with Renderer(asset, 240, 180, clip=clip, ground=False, samples=0) as r:
        image = r.draw((world, morph)).astype(int)
        behind = world.copy()  # every joint behind the camera: the background alone
        behind[..., :3, 3] = r.camera.eye + 10.0 * (r.camera.eye - r.camera.target)
        empty = r.draw((behind, morph)).astype(int)
        ndc = r.camera.project(world[0, :, :3, 3])
    # every bone's midpoint is drawn (differs from the background there) in the bone's side colour
    drawn = np.abs(image - empty).sum(axis=-1) > 30
    names = asset.rig.names
    for child, parent in zip(range(len(names)), asset.rig.parents):
        if parent < 0:
            continue
        mid = 0.5 * (ndc[child] + ndc[parent])
        x = int(round((mid[0] * 0.5 + 0.5) * 240 - 0.5))
        y = int(round((0.5 - mid[1] * 0.5) * 180 - 0.5))
        assert 0 <= x < 240 and 0 <= y < 180, "the camera frames the motion"
        patch = drawn[max(y - 1, 0):y + 2, max(x - 1, 0):x + 2]
        assert patch.any(), (names[child], x, y)
        side = side_of(names[child])
        if side:
            rgb = image[max(y - 1, 0):y + 2, max(x - 1, 0):x + 2][patch].mean(axis=0)
            blue = LEFT_COLOR[2] > LEFT_COLOR[0] if side > 0 else RIGHT_COLOR[2] > RIGHT_COLOR[0]
            assert (rgb[2] > rgb[0]) == blue, (names[child], rgb)
    # bones are thin: most of the image is background
    assert 0.002 < drawn.mean() < 0.5, drawn.mean()


def test_cli_render_bvh(tmp_path):
    pytest.importorskip("moderngl", reason="moderngl is not installed")
    iio = pytest.importorskip("imageio.v3", reason="imageio is not installed")
    fx = random_fixture(2, frames=4)
    path = tmp_path / "walk.bvh"
    path.write_text(fx.text)
    out = tmp_path / "walk.png"
    result = CliRunner().invoke(cli, ["render", str(path), "--out", str(out), "--size", "240x180", "--time", "0.05"])
    if result.exit_code != 0 and "OpenGL" in result.output:
        pytest.skip(result.output.strip())
    assert result.exit_code == 0, result.output
    image = iio.imread(out)[..., :3].astype(int)
    warm = (image[..., 0] - image[..., 2] > 60)  # orange right-side bones; the background is blue-grey
    cool = (image[..., 2] - image[..., 0] > 60) & (image[..., 2] > 120)  # blue left-side bones
    assert warm.sum() > 10 and cool.sum() > 10, (warm.sum(), cool.sum())


def test_cli_export_bvh(tmp_path):
    from skeletal.demo import demo_asset

    glb = tmp_path / "demo.glb"
    skeletal.export(demo_asset(), glb)
    out = tmp_path / "walk.bvh"
    runner = CliRunner()
    result = runner.invoke(cli, ["export", str(glb), "--clip", "walk", "--out", str(out), "--rotation-order", "yxz", "--fps", "24"])
    assert result.exit_code == 0, result.output
    doc = read_bvh(out)
    assert doc.asset_info["frame_time"] == pytest.approx(1 / 24)
    assert all(ch[-3:] == ["Yrotation", "Xrotation", "Zrotation"] for ch in doc.asset_info["channels"].values())
    again = tmp_path / "again.bvh"
    result = runner.invoke(cli, ["export", str(out), "--out", str(again), "--rotation-order", "keep"])
    assert result.exit_code == 0, result.output
    assert read_bvh(again).asset_info["channels"] == doc.asset_info["channels"]
    for args, message in ((["--rotation-order", "XYX"], "is not one of"), (["--clip", "walk", "--clip", "run"], "one motion"),
                          (["--fps", "0"], "fps")):
        result = runner.invoke(cli, ["export", str(glb), "--out", str(tmp_path / "x.bvh"), *args])
        assert result.exit_code == 2 and message in result.output and len(result.output.strip().splitlines()) == 1, result.output


def test_view_window_draws_bvh_bones(xdisplay, tmp_path):
    """``skeletal view walk.bvh`` under Xvfb: the window shows the bone capsules (both side colours)."""
    path = tmp_path / "walk.bvh"
    path.write_text(random_fixture(2, frames=4).text)
    image = screenshot(xdisplay, tmp_path / "shot.png", str(path))[..., :3].astype(int)
    warm = image[..., 0] - image[..., 2] > 60
    cool = (image[..., 2] - image[..., 0] > 60) & (image[..., 2] > 120)
    assert warm.sum() > 20 and cool.sum() > 20, (warm.sum(), cool.sum())
