"""Named float curves in clips (issue 29): read from glTF (inline ``extras.curves`` of an animation,
or samplers no channel uses whose ``extras.curve`` names them), sampled like the other properties,
exported back, blended by the Mixer, usable as IK and procedural weights, and firing threshold-crossing
events."""

from __future__ import annotations

import json

import numpy as np
import pytest

import skeletal
from skeletal.demo import build_demo_document
from skeletal.document import PropertyTrack
from skeletal.playback.properties import drive_weight, watch_curve

from fixtures.gltf_builder import GltfBuilder
from fixtures.gltf_extensions import quad_mesh


def curves_model(path):
    """A quad moved by clip ``step`` (1 s), with an inline LINEAR curve ``foot_l`` (0 -> 1 -> 0) and a
    sampler curve ``grab`` (STEP: 0, then 1 from 0.5 s), and clip ``calm`` with ``foot_l`` at 0.2."""
    b = GltfBuilder()
    node = b.add_node("q", mesh=quad_mesh(b, None))
    b.add_scene([node])
    b.add_animation([{"node": node, "path": "translation", "times": [0.0, 1.0],
                      "values": np.array([[0, 0, 0], [1, 0, 0]], np.float32)}], name="step")
    animation = b.doc["animations"][0]
    animation["extras"] = {"curves": {"foot_l": {"times": [0.0, 0.5, 1.2], "values": [0.0, 1.0, 0.0]}}}
    animation["samplers"].append({"input": b.add_accessor(np.array([0.0, 0.5], np.float32), min_max=True),
                                  "output": b.add_accessor(np.array([0.0, 1.0], np.float32)), "interpolation": "STEP",
                                  "extras": {"curve": "grab"}})
    b.add_animation([{"node": node, "path": "translation", "times": [0.0, 1.0],
                      "values": np.zeros((2, 3), np.float32)}], name="calm")
    b.doc["animations"][1]["extras"] = {"curves": {"foot_l": {"times": [0.0], "values": [0.2], "interpolation": "STEP"}}}
    return b.write_glb(path)


def test_curves_are_read_and_sampled(tmp_path):
    asset = skeletal.load(curves_model(tmp_path / "curves.glb"))
    assert sorted(asset.properties.curve_names) == ["foot_l", "grab"]
    step = asset.clip("step")
    assert sorted(t.pointer for t in step.properties) == ["curve/foot_l", "curve/grab"]
    assert step.duration == pytest.approx(1.2)  # the curve's last key counts
    values = skeletal.bake(asset, step, [0.0, 0.25, 0.5, 0.6, 1.2])["properties"]
    np.testing.assert_allclose(asset.properties.curve(values, "foot_l"), [0, 0.5, 1, 1 - 0.1 / 0.7, 0], atol=1e-6)
    assert asset.properties.curve(values, "grab").tolist() == [0, 0, 1, 1, 1]
    with pytest.raises(KeyError, match="no curve named 'nope'"):
        asset.properties.curve(values, "nope")


def test_curves_are_exported_back(tmp_path):
    asset = skeletal.load(curves_model(tmp_path / "curves.glb"))
    skeletal.export(asset, tmp_path / "again.gltf")
    gltf = json.loads((tmp_path / "again.gltf").read_text())
    assert sorted(gltf["animations"][0]["extras"]["curves"]) == ["foot_l", "grab"]
    again = skeletal.load(tmp_path / "again.gltf")
    times = np.linspace(0, 1.3, 14)
    for name in ("step", "calm"):
        first = skeletal.bake(asset, name, times)["properties"]
        second = skeletal.bake(again, name, times)["properties"]
        for curve in ("foot_l", "grab"):
            np.testing.assert_array_equal(asset.properties.curve(first, curve), again.properties.curve(second, curve))


def test_a_malformed_curve_is_a_model_error(tmp_path):
    path = curves_model(tmp_path / "bad.glb")
    b = GltfBuilder()
    b.add_scene([b.add_node("q")])
    b.add_animation([{"node": 0, "path": "translation", "times": [0.0, 1.0], "values": np.zeros((2, 3), np.float32)}])
    b.doc["animations"][0]["extras"] = {"curves": {"x": {"times": [0.0, 1.0], "values": [1.0]}}}
    with pytest.raises(skeletal.ModelError, match=r"bad2.glb: animations\[0\].extras.curves.x.values: 1 values for 2 keys"):
        skeletal.load(b.write_glb(tmp_path / "bad2.glb"))
    b.doc["animations"][0]["extras"] = {"curves": {"x": {"times": [0.0, 1e39], "values": [1.0, 2.0]}}}
    with pytest.raises(skeletal.ModelError, match=r"animations\[0\].extras.curves.x.times: a key time is too large"):
        skeletal.load(b.write_glb(tmp_path / "bad3.glb"))
    b.doc["animations"][0]["extras"] = {"curves": ["not", "named"]}
    with pytest.raises(skeletal.ModelError, match=r"animations\[0\].extras.curves: expected an object of named curves"):
        skeletal.load(b.write_glb(tmp_path / "bad4.glb"))
    assert path.exists()


def test_mixer_blends_curves_and_fires_crossing_events(tmp_path):
    asset = skeletal.load(curves_model(tmp_path / "curves.glb"))
    mixer = skeletal.Mixer(asset, 2)
    mixer.play("step", instances=[0])
    mixer.play("calm", instances=[1])
    watch_curve(mixer, "foot_l", 0.5)
    got = []
    mixer.on("curve", got.append)
    mixer.update(0.2)  # instance 0: foot_l 0.4; instance 1: 0.2
    assert got == []
    mixer.update(0.1)  # 0.6: instance 0 rises through 0.5
    assert [(e.kind, e.instance, e.name, e.count) for e in got] == [("curve", 0, "foot_l", 1)]
    mixer.update(0.5)  # t = 0.8: 1 - 0.3 / 0.7 = 0.571..., still above
    mixer.update(0.2)  # t = 1.0: 0.286, falling below
    assert [(e.instance, e.count) for e in got] == [(0, 1), (0, -1)]
    assert [e.name for e in mixer.poll_events() if e.kind == "curve"] == ["foot_l", "foot_l"]
    np.testing.assert_allclose(asset.properties.curve(mixer.property_values, "foot_l"), [0.2 / 0.7, 0.2], atol=1e-6)  # float32 keys
    with pytest.raises(skeletal.SkeletalError, match="no curve named 'nope'"):
        watch_curve(mixer, "nope", 0.5)


def _demo_with_reach_curve() -> skeletal.Asset:
    """The built-in character, its ``wave`` clip carrying a curve ``reach``: 0 until 0.5 s, then 1."""
    doc = build_demo_document()
    doc.pointer_rest["curve/reach"] = np.zeros(1)
    wave = next(a for a in doc.animations if a.name == "wave")
    wave.properties.append(PropertyTrack("curve/reach", "STEP", [0.0, 0.5], [[0.0], [1.0]]))
    return skeletal.Asset(doc)


def test_a_curve_drives_an_ik_weight_in_the_same_update():
    asset = _demo_with_reach_curve()
    world = skeletal.bake(asset, "wave", [0.7])["node_world"][0]  # a reachable target: towards the shoulder
    hand_at, shoulder_at = world[asset.rig.node_of[asset.rig.find("right_hand")]][:3, 3], world[
        asset.rig.node_of[asset.rig.find("right_upper_arm")]][:3, 3]
    target = hand_at + 0.3 * (shoulder_at - hand_at) + np.array([0.0, 0.0, 0.05])
    player = skeletal.Player(asset)
    player.play("wave")
    hand = player.mixer.add_ik("hand", "two_bone", ["right_upper_arm", "right_forearm", "right_hand"], target=target)
    drive_weight(player, hand, "reach")
    free = skeletal.Player(asset)  # the same clip without IK
    free.play("wave")
    hand_index = asset.rig.find("right_hand")
    for dt, reach in ((0.2, 0.0), (0.2, 0.0), (0.2, 1.0), (0.1, 1.0)):
        player.update(dt)
        free.update(dt)
        assert hand.weight.tolist() == [reach]
        moved = np.abs(player.world[hand_index] - free.world[hand_index]).max()
        if reach == 0.0:
            assert moved < 1e-12  # weight 0: the clip's pose
        else:
            assert moved > 1e-3  # weight 1 from this very update: the hand reaches for the target
            np.testing.assert_allclose(player.world[hand_index][:3, 3], target, atol=1e-6)


def test_a_curve_drives_a_procedural_weight():
    """A look-at stage's weight follows the curve (0 first: the clip's head; 1 later: turned)."""
    from skeletal.playback.procedural import Procedural

    asset = _demo_with_reach_curve()
    player = skeletal.Player(asset)
    player.play("wave")
    look = Procedural(player).look_at((2.0, 1.6, 0.5))
    drive_weight(player, look, "reach")
    free = skeletal.Player(asset)
    free.play("wave")
    head = asset.rig.find("head")
    for dt, reach in ((0.3, 0.0), (0.4, 1.0)):
        player.update(dt)
        free.update(dt)
        assert look.weight.tolist() == [reach]
        turned = np.abs(player.world[head][:3, :3] - free.world[head][:3, :3]).max()
        assert (turned > 1e-3) == (reach == 1.0), (reach, turned)


def test_usd_custom_attributes_are_curves(tmp_path):
    """A SkelAnimation's custom float attribute with time samples is a named float curve, on the
    joints' clock (seconds from the stage's start)."""
    pytest.importorskip("pxr", reason="usd-core is not installed (pip install 'skeletal[usd]')")
    from pxr import Sdf, Usd

    from test_usd import make_stage

    path = str(tmp_path / "char.usda")
    make_stage(path)
    stage = Usd.Stage.Open(path)
    anim = stage.GetPrimAtPath("/Char/Skel/Bend")
    attr = anim.CreateAttribute("userProperties:foot_l", Sdf.ValueTypeNames.Float, custom=True)
    for code, value in ((1, 0.0), (13, 1.0), (25, 0.0)):
        attr.Set(value, code)
    anim.CreateAttribute("userProperties:label", Sdf.ValueTypeNames.String, custom=True).Set("not a curve")
    stage.GetRootLayer().Save()
    asset = skeletal.load(path)
    assert asset.properties.curve_names == ["userProperties:foot_l"]
    values = skeletal.bake(asset, 0, [0.0, 0.25, 0.5, 1.0])["properties"]  # 24 codes a second from code 1
    np.testing.assert_allclose(asset.properties.curve(values, "userProperties:foot_l"), [0, 0.5, 1, 0], atol=1e-6)


def test_curves_go_to_usd_and_back(tmp_path):
    pytest.importorskip("pxr", reason="usd-core is not installed (pip install 'skeletal[usd]')")
    asset = skeletal.load(curves_model(tmp_path / "curves.glb"))
    skeletal.export(asset, tmp_path / "curves.usda")
    again = skeletal.load(tmp_path / "curves.usda")
    assert sorted(again.properties.curve_names) == ["foot_l", "grab"]
    times = [0.0, 0.25, 0.45, 0.55, 1.0, 1.2]
    first = skeletal.bake(asset, "step", times)["properties"]
    second = skeletal.bake(again, "step", times)["properties"]
    for name in ("foot_l", "grab"):  # the STEP curve too: a sample just before its key keeps the jump
        np.testing.assert_allclose(again.properties.curve(second, name), asset.properties.curve(first, name), atol=1e-4)
