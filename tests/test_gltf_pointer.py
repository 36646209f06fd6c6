"""KHR_animation_pointer (issue 29): every pointer target kind read into clips (node TRS and weights
as node tracks; material factors, texture transform, emissive strength, lights, cameras and node
visibility as property tracks), sampled batch-first, played and blended by the Mixer, exported back,
one warning per unsupported pointer; checked against three.js with the
``@needle-tools/three-animation-pointer`` plugin (tests/data/gltf29/pointer_*.json, made by
tools/make_gltf29_truth.py)."""

from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

import skeletal
from skeletal.anim.clip import PropertyTrack
from skeletal.anim.properties import PropertyLayout, parse_pointer, sample_properties
from skeletal.anim.sampling import sample

from fixtures.gltf_builder import GltfBuilder
from fixtures.gltf_extensions import (POINTER_CHANNELS, POINTER_MODELS, UNSUPPORTED_POINTER, pointer_model,
                                      quad_mesh)

DATA = Path(__file__).parent / "data" / "gltf29"
NODE_POINTERS = {"/nodes/0/translation": slice(0, 3), "/nodes/0/rotation": slice(3, 7), "/nodes/0/scale": slice(7, 10)}


def _load(path, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asset = skeletal.load(path, **kwargs)
    return asset, [str(w.message) for w in caught]


@pytest.fixture(scope="module")
def every_pointer(tmp_path_factory):
    return _load(pointer_model(tmp_path_factory.mktemp("pointer") / "every.glb", unsupported=True))


def test_every_target_kind_is_read(every_pointer):
    asset, told = every_pointer
    clip = asset.clip("pointers")
    # node TRS and weights by pointer are ordinary node tracks
    assert sorted(t.path for t in clip.tracks) == ["rotation", "scale", "translation", "weights"]
    assert {t.node for t in clip.tracks} == {int(asset.rig.index_of[0])}
    wanted = [p for kind in POINTER_CHANNELS for p, _, _ in POINTER_CHANNELS[kind] if parse_pointer(p)[2] not in
              ("translation", "rotation", "scale", "weights")]
    assert [t.pointer for t in clip.properties] == wanted and asset.properties.pointers == wanted
    assert clip.duration == 1.0
    # the unsupported pointer: one warning line naming it, the channel left out
    assert len(told) == 1 and UNSUPPORTED_POINTER in told[0] and "channels[24]" in told[0], told
    # rest values: the file's (light range 10, ortho zfar absent -> not animated), else the schema default
    layout = asset.properties
    assert layout.value(layout.rest, "/extensions/KHR_lights_punctual/lights/0/range").tolist() == [10.0]
    assert layout.value(layout.rest, "/materials/0/pbrMetallicRoughness/baseColorFactor").tolist() == [1, 1, 1, 1]
    assert layout.value(layout.rest, "/cameras/0/perspective/yfov").tolist() == [0.8]
    # cameras, lights and visibility reach the document
    doc = asset.document
    assert [c["type"] for c in doc.cameras] == ["perspective", "orthographic"] and doc.lights[0]["type"] == "spot"
    assert (doc.nodes[1].light, doc.nodes[2].camera, doc.nodes[3].camera, doc.nodes[4].visible) == (0, 0, 1, True)


def test_the_unsupported_pointer_warns_once_per_pointer(tmp_path):
    b = GltfBuilder()
    b.add_scene([b.add_node("q", mesh=quad_mesh(b, b.add_material({"name": "m"})))])
    keys = {"times": [0.0, 1.0], "values": np.array([1, 2], np.float32)}
    b.add_pointer_animation([{"pointer": UNSUPPORTED_POINTER, **keys}, {"pointer": UNSUPPORTED_POINTER, **keys},
                             {"pointer": "/materials/0/occlusionTexture/strength", **keys}], name="a")
    asset, told = _load(b.write_glb(tmp_path / "two.glb"))
    assert len(told) == 2 and UNSUPPORTED_POINTER in told[0] and "occlusionTexture" in told[1]
    assert asset.clip("a").properties == [] and asset.clip("a").track_count == 0


@pytest.mark.parametrize("pointer,detail", [
    ("/materials/3/emissiveFactor", r"names materials\[3\], which does not exist \(the file has 1\)"),
    ("/cameras/0/perspective/yfov", r"names cameras\[0\], which does not exist"),
    ("/nodes/9/translation", r"names nodes\[9\], which does not exist"),
])
def test_a_pointer_to_nothing_is_a_model_error(tmp_path, pointer, detail):
    b = GltfBuilder()
    b.add_scene([b.add_node("q", mesh=quad_mesh(b, b.add_material({"name": "m"})))])
    b.add_pointer_animation([{"pointer": pointer, "times": [0.0, 1.0], "values": np.zeros((2, 3), np.float32)}])
    with pytest.raises(skeletal.ModelError, match=r"bad.glb: animations\[0\].channels\[0\].target.extensions."
                                                  r"KHR_animation_pointer.pointer: /\S+ " + detail):
        skeletal.load(b.write_glb(tmp_path / "bad.glb"))


def test_a_camera_pointer_of_the_other_projection_is_a_model_error(tmp_path):
    b = GltfBuilder()
    b.add_camera({"type": "orthographic", "orthographic": {"xmag": 1, "ymag": 1, "znear": 0.1, "zfar": 10}})
    b.add_scene([b.add_node("c")])
    b.add_pointer_animation([{"pointer": "/cameras/0/perspective/yfov", "times": [0, 1], "values": np.ones(2, np.float32)}])
    with pytest.raises(skeletal.ModelError, match=r"/cameras/0/perspective/yfov: cameras\[0\] has no perspective"):
        skeletal.load(b.write_glb(tmp_path / "cam.glb"))


@pytest.mark.parametrize("name", sorted(POINTER_MODELS))
def test_pointer_values_match_threejs(tmp_path, name):
    """Every pointer three.js animates as glTF says, at every time of the reference (within the
    reference's 10 digits). Not compared, as the reference records: CUBICSPLINE pointer channels (the
    plugin does not interpolate them; skeletal's are checked against ordinary channels below) and the
    texture rotation (the plugin binds nothing for it)."""
    truth = json.loads((DATA / f"{name}.json").read_text())
    path = POINTER_MODELS[name](tmp_path / f"{name}.glb")
    assert hashlib.sha256(path.read_bytes()).hexdigest() == truth["model"]["sha256"], "rerun tools/make_gltf29_truth.py"
    asset, _ = _load(path)
    clip = asset.clip(truth["clip"])
    assert clip.duration == truth["duration"]
    times = truth["times"]
    values = skeletal.bake(asset, clip, times)["properties"] if len(asset.properties) else None
    pose, morph = sample(clip, times, asset.rig.rest, asset.morph_start, asset.rest_morph)
    compared = 0
    for pointer, three in truth["pointers"].items():
        if "not_by_three" in three:
            continue
        want = np.asarray(three["values"], np.float64)
        if pointer in NODE_POINTERS:
            got = pose[:, asset.rig.index_of[0], NODE_POINTERS[pointer]]
        elif pointer.endswith("/weights"):
            got = morph[:, asset.morph_start[asset.rig.index_of[0]]:asset.morph_start[asset.rig.index_of[0] + 1]]
        else:
            got = asset.properties.value(values, pointer)
        np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-8, err_msg=pointer)  # yfov: three keeps degrees
        compared += 1
    assert compared >= len(truth["pointers"]) - 2


def test_cubic_pointer_tracks_match_ordinary_channels_and_the_hermite_formula(tmp_path):
    """The translation by pointer (CUBICSPLINE) equals the same keys as an ordinary channel; a
    CUBICSPLINE property at the middle of a key interval is the glTF Hermite spline."""
    path = pointer_model(tmp_path / "node.glb", ("node", "light"))
    asset, _ = _load(path)
    b = GltfBuilder()
    node = b.add_node("quad", mesh=quad_mesh(b, None, targets=2))
    b.add_scene([node])
    pointer_track = asset.clip(0).tracks[[t.path for t in asset.clip(0).tracks].index("translation")]
    b.add_animation([{"node": node, "path": "translation", "times": pointer_track.times, "values": pointer_track.values,
                      "interpolation": "CUBICSPLINE"}])
    plain, _ = _load(b.write_glb(tmp_path / "plain.glb"))
    times = np.linspace(0, 1.2, 13)
    got = sample(asset.clip(0), times, asset.rig.rest, asset.morph_start, asset.rest_morph)[0]
    want = sample(plain.clip(0), times, plain.rig.rest, plain.morph_start, plain.rest_morph)[0]
    np.testing.assert_array_equal(got[:, asset.rig.index_of[0], :3], want[:, plain.rig.index_of[0], :3])
    # intensity keys 1, 10 (t = 0, 0.5), tangents -0.3 / +0.3: at u = 0.5 the Hermite spline gives
    # (v0 + v1) / 2 + span * (m0 - m1) / 8 with m0 = out-tangent of key 0, m1 = in-tangent of key 1
    value = skeletal.bake(asset, 0, [0.25])["properties"][0]
    intensity = asset.properties.value(value, "/extensions/KHR_lights_punctual/lights/0/intensity")
    assert intensity[0] == pytest.approx((1 + 10) / 2 + 0.5 * (0.3 - (-0.3)) / 8, abs=1e-6)


def test_sampling_is_batch_first_and_loops():
    layout = PropertyLayout({"/materials/0/alphaCutoff": np.array([0.5]), "/materials/0/emissiveFactor": np.zeros(3)})
    track = PropertyTrack("/materials/0/emissiveFactor", "LINEAR", [0.0, 2.0], [[0, 0, 0], [1, 2, 4]])
    clip = skeletal.Clip("glow", [], properties=[track])
    assert clip.duration == 2.0
    out = sample_properties(clip, layout, [0.0, 1.0, 3.0, -1.0], loop="repeat")
    assert out.shape == (4, 4)
    assert out[:, 0].tolist() == [0.5] * 4  # not animated: the rest value
    np.testing.assert_allclose(out[:, 1:], [[0, 0, 0], [0.5, 1, 2], [0.5, 1, 2], [0.5, 1, 2]])
    with pytest.raises(skeletal.ClipError, match="animates /materials/1/alphaCutoff, which this asset does not have"):
        sample_properties(skeletal.Clip("x", [], properties=[PropertyTrack("/materials/1/alphaCutoff", "STEP", [0], [[1]])]),
                          layout, [0.0])


def _two_glow_clips(tmp_path) -> skeletal.Asset:
    b = GltfBuilder()
    b.add_scene([b.add_node("q", mesh=quad_mesh(b, b.add_material({"name": "m", "emissiveFactor": [0.1, 0.1, 0.1]})))])
    for name, level in (("red", [1, 0, 0]), ("blue", [0, 0, 1])):
        b.add_pointer_animation([{"pointer": "/materials/0/emissiveFactor", "times": [0.0, 1.0],
                                  "values": np.array([level, level], np.float32)}], name=name)
    return _load(b.write_glb(tmp_path / "glow.glb"))[0]


def test_player_and_mixer_play_and_blend_properties(tmp_path):
    asset = _two_glow_clips(tmp_path)
    emissive = asset.properties.slice("/materials/0/emissiveFactor")
    player = skeletal.Player(asset)
    np.testing.assert_allclose(player.property_values[emissive], [0.1, 0.1, 0.1])  # nothing playing: rest
    player.play("red")
    np.testing.assert_allclose(player.property_values[emissive], [1, 0, 0])  # after play, before update
    player.crossfade("blue", 1.0)
    player.update(0.5)
    np.testing.assert_allclose(player.property_values[emissive], [0.5, 0, 0.5], atol=1e-12)  # half way
    player.update(0.6)
    np.testing.assert_allclose(player.property_values[emissive], [0, 0, 1], atol=1e-12)
    # a Mixer of 3 instances: each its own weights; a weight below 1 blends with the rest value
    mixer = skeletal.Mixer(asset, 3)
    mixer.play("red", instances=[0, 1])
    mixer.play("blue", instances=[1], weight=1.0)
    mixer.play("blue", instances=[2], weight=0.25)
    mixer.update(0.1)
    values = mixer.property_values[:, emissive]
    np.testing.assert_allclose(values, [[1, 0, 0], [0.5, 0, 0.5], [0.075, 0.075, 0.325]], atol=1e-12)


def test_export_writes_pointer_channels_back(every_pointer, tmp_path):
    asset, _ = every_pointer
    out = tmp_path / "again.gltf"
    skeletal.export(asset, out)
    gltf = json.loads(out.read_text())
    assert {"KHR_animation_pointer", "KHR_lights_punctual", "KHR_node_visibility"} <= set(gltf["extensionsUsed"])
    pointers = [c["target"]["extensions"]["KHR_animation_pointer"]["pointer"] for c in gltf["animations"][0]["channels"]
                if c["target"]["path"] == "pointer"]
    assert pointers == asset.properties.pointers
    again, told = _load(out)
    assert told == []
    times = np.linspace(-0.2, 1.3, 16)
    first, second = skeletal.bake(asset, 0, times), skeletal.bake(again, 0, times)
    np.testing.assert_array_equal(first["properties"], second["properties"])
    np.testing.assert_array_equal(first["node_world"], second["node_world"])


def test_exported_pointer_file_passes_the_khronos_validator(every_pointer, tmp_path):
    from test_demo_writer import ACCEPTED_ISSUES, NPM_DIR, ensure_npm_packages, validate

    reason = ensure_npm_packages()
    if reason:
        pytest.skip(reason)
    asset, _ = every_pointer
    skeletal.export(asset, tmp_path / "every.glb")
    report = validate(tmp_path / "every.glb", NPM_DIR / "node_modules")
    problems = [m for m in report["issues"]["messages"] if m["severity"] <= 1 and m["code"] not in ACCEPTED_ISSUES]
    assert not problems, json.dumps(problems[:10], indent=1)


def test_renderer_draws_animated_materials_and_visibility(ctx, every_pointer):
    """The headless renderer follows the property values: the flag quad (node 4) disappears when its
    KHR_node_visibility goes false; a red baseColorFactor takes the blue out of the textured quad;
    a drawn Player hands its own values over."""
    from skeletal.render.layout import pose_at
    from skeletal.render.renderer import Renderer

    asset, _ = every_pointer
    layout = asset.properties
    world, morph = pose_at(asset, None, [0.0])
    rest = layout.rest.copy()
    hidden = rest.copy()
    hidden[layout.slice("/nodes/4/extensions/KHR_node_visibility/visible")] = 0.0
    red = rest.copy()
    red[layout.slice("/materials/0/pbrMetallicRoughness/baseColorFactor")] = [1.0, 0.0, 0.0, 1.0]
    with Renderer(asset, 64, 96, camera="yaw=0,pitch=0", ground=False) as r:
        images = {}
        for name, values in (("rest", rest), ("hidden", hidden), ("red", red)):
            r.properties = values
            images[name] = r.draw((world, morph)).astype(int)
        player = skeletal.Player(asset)
        player.play("pointers")
        player.update(0.6)
        r.draw(player)
        np.testing.assert_array_equal(r.properties, player.property_values)
    green = lambda im: ((im[..., 1] > im[..., 0] + 40) & (im[..., 1] > im[..., 2] + 40)).sum()
    blue = lambda im: ((im[..., 2] > im[..., 0] + 40) & (im[..., 2] > im[..., 1] + 20)).sum()
    assert green(images["rest"]) > 50 and green(images["hidden"]) == 0  # the flag is plain green
    assert blue(images["rest"]) > 50 and blue(images["red"]) == 0


def test_a_file_requiring_the_pointer_extension_loads_and_info_counts_its_tracks(tmp_path):
    from click.testing import CliRunner

    from skeletal.cli import cli

    b = GltfBuilder()
    b.add_scene([b.add_node("q", mesh=quad_mesh(b, b.add_material({"name": "m"})))])
    b.add_pointer_animation([{"pointer": "/materials/0/emissiveFactor", "times": [0.0, 2.0],
                              "values": np.array([[0, 0, 0], [1, 1, 1]], np.float32)}], name="glow")
    b.use_extension("KHR_animation_pointer", required=True)
    path = b.write_glb(tmp_path / "required.glb")
    asset, told = _load(path)
    assert told == [] and asset.clip("glow").duration == 2.0 and len(asset.clip("glow").properties) == 1
    result = CliRunner().invoke(cli, ["info", str(path)])
    assert result.exit_code == 0 and "[0] glow: 2 s, 0 tracks, 1 property tracks" in result.output, result.output


@pytest.mark.parametrize("light,detail", [
    ({"type": "point", "color": ["red", 0, 0]}, r"/color: the file's value \['red', 0, 0\] is not 3 finite number\(s\)"),
    ({"type": "point", "color": [1, [2], 3]}, r"is not 3 finite number\(s\)"),
    ({"type": "point", "intensity": "bright"}, r"/intensity: the file's value 'bright'"),
])
def test_a_malformed_animated_value_is_a_model_error(tmp_path, light, detail):
    b = GltfBuilder()
    b.add_light(light)
    b.add_scene([b.add_node("lamp")])
    b.doc["nodes"][0]["extensions"] = {"KHR_lights_punctual": {"light": 0}}
    tail = "color" if "color" in light else "intensity"
    width = 3 if tail == "color" else 1
    b.add_pointer_animation([{"pointer": f"/extensions/KHR_lights_punctual/lights/0/{tail}", "times": [0.0, 1.0],
                              "values": np.ones((2, width), np.float32)}])
    with pytest.raises(skeletal.ModelError, match=r"lamp.glb: animations\[0\].*pointer: /extensions.*" + detail):
        skeletal.load(b.write_glb(tmp_path / "lamp.glb"))
