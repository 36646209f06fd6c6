"""Tests of the test fixtures themselves: the glTF builder, the fixture models, the numpy reference
and the truth-comparison helper (``tests/fixtures``).

The reference is checked against three.js truth: the committed fixture truth in
``tests/data/truth`` and, when ``<repo>/../shared`` exists, the real models' truth there.
"""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path

import numpy as np
import pytest

from fixtures import models
from fixtures.gltf_builder import (ARRAY_BUFFER, FLOAT, GltfBuilder, UNSIGNED_BYTE,
                                   quantize_normalized)
from fixtures.reference import Gltf, ReferenceModel, loop_time, reference_bake_fn
from fixtures.truth_compare import compare_truth, load_truth, negative_pingpong
from fixtures.shared_assets import ASSETS, TRUTH

REPO = Path(__file__).resolve().parents[1]
TRUTH_DIR = REPO / "tests" / "data" / "truth"

needs_shared = pytest.mark.skipif(
    not ASSETS.is_dir() or not TRUTH.is_dir(),
    reason=f"shared test assets not found at {ASSETS} and {TRUTH} (set SKELETAL_ASSETS and SKELETAL_TRUTH)")

COMPONENT_SIZES = {5120: 1, 5121: 1, 5122: 2, 5123: 2, 5125: 4, 5126: 4}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    """Every fixture model, built once into a temp folder."""
    folder = tmp_path_factory.mktemp("fixtures")
    return {name: models.build(name, folder) for name in models.FIXTURES}


# ------------------------------------------------------------------------------------------------
# builder: determinism and format rules


@pytest.mark.parametrize("name", list(models.FIXTURES))
def test_fixture_is_deterministic_and_matches_committed_truth(name, built, tmp_path):
    again = models.build(name, tmp_path)
    assert again.read_bytes() == built[name].read_bytes(), "the builder must be byte-deterministic"
    truth = load_truth(TRUTH_DIR / f"{name}.json")
    sha = hashlib.sha256(again.read_bytes()).hexdigest()
    assert sha == truth["model"]["sha256"], (
        f"{name}: the model no longer matches its committed truth; rerun tools/make_fixture_truth.py")


def _check_gltf_rules(doc: dict, bin_length: int) -> None:
    assert doc["asset"]["version"] == "2.0"
    views = doc["bufferViews"]
    for v in views:
        assert v["byteOffset"] + v["byteLength"] <= bin_length
        if "byteStride" in v:
            assert v["byteStride"] % 4 == 0 and 4 <= v["byteStride"] <= 252
    for i, a in enumerate(doc["accessors"]):
        size = COMPONENT_SIZES[a["componentType"]]
        if "bufferView" in a:
            v = views[a["bufferView"]]
            assert (v["byteOffset"] + a.get("byteOffset", 0)) % size == 0, f"accessor {i} misaligned"
            if v.get("target") == ARRAY_BUFFER:
                assert (v["byteOffset"] + a.get("byteOffset", 0)) % 4 == 0, f"attribute {i} not 4-aligned"
        if a.get("normalized"):
            assert a["componentType"] not in (FLOAT, 5125)
    for anim in doc.get("animations", []):
        for s in anim["samplers"]:
            acc = doc["accessors"][s["input"]]
            assert "min" in acc and "max" in acc and acc["componentType"] == FLOAT


@pytest.mark.parametrize("name", list(models.FIXTURES))
def test_glb_container_and_alignment(name, built):
    data = built[name].read_bytes()
    magic, version, length = struct.unpack_from("<III", data, 0)
    assert (magic, version, length) == (0x46546C67, 2, len(data))
    json_len, json_type = struct.unpack_from("<II", data, 12)
    assert json_type == 0x4E4F534A and json_len % 4 == 0
    doc = json.loads(data[20:20 + json_len])
    bin_len, bin_type = struct.unpack_from("<II", data, 20 + json_len)
    assert bin_type == 0x004E4942 and bin_len % 4 == 0
    assert 28 + json_len + bin_len == len(data)
    assert doc["buffers"][0]["byteLength"] <= bin_len
    _check_gltf_rules(doc, bin_len)


def test_pygltflib_reads_every_fixture(built):
    pygltflib = pytest.importorskip("pygltflib")
    for path in built.values():
        g = pygltflib.GLTF2().load(str(path))
        assert g.asset.version == "2.0" and g.skins


def _tiny_builder() -> GltfBuilder:
    """A small document covering the accessor options, for round-trip tests."""
    b = GltfBuilder()
    pos = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]], np.float32)
    nrm = np.tile(np.float32([0, 0, 1]), (4, 1))
    p_acc, n_acc = b.add_interleaved([pos, nrm], min_max=[True, False])
    b.add_accessor(np.array([[1, 2, 3]] * 4, np.int16), target=ARRAY_BUFFER, normalized=True)  # 6-byte elements
    b.add_sparse_accessor(count=4, base=pos, indices=np.array([1, 3], np.uint8),
                          values=np.array([[5, 5, 5], [7, 7, 7]], np.float32), min_max=True)
    b.add_sparse_accessor(count=4, indices=np.array([2], np.uint32), values=np.array([[0, 2, 0]], np.float32))
    b.add_accessor(quantize_normalized([[0.0, 0.5, 1.0, -1.0]], np.int8), normalized=True)
    b.add_accessor(np.array([[0, 128, 255, 1]], np.uint8), normalized=True)
    mesh = b.add_mesh([b.primitive({"POSITION": p_acc, "NORMAL": n_acc})])
    b.add_scene([b.add_node("quad", mesh=mesh)])
    return b


@pytest.mark.parametrize("form", ["glb", "embedded", "external"])
def test_builder_round_trip(form, tmp_path):
    b = _tiny_builder()
    if form == "glb":
        path = b.write_glb(tmp_path / "t.glb")
    else:
        path = b.write_gltf(tmp_path / "t.gltf", embed=form == "embedded")
        assert (tmp_path / "t.bin").exists() == (form == "external")
    g = Gltf(path)
    _check_gltf_rules(g.json, len(g.buffers[0]))
    pos = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]], float)
    assert np.array_equal(g.accessor(0), pos)
    assert np.array_equal(g.accessor(1), np.tile([0, 0, 1.0], (4, 1)))
    assert g.json["bufferViews"][0]["byteStride"] == 24
    assert np.allclose(g.accessor(2), np.tile(np.array([1, 2, 3]) / 32767, (4, 1)))
    assert g.json["bufferViews"][g.json["accessors"][2]["bufferView"]]["byteStride"] == 8
    assert np.array_equal(g.accessor(3), [[0, 0, 0], [5, 5, 5], [0, 1, 0], [7, 7, 7]])
    assert g.json["accessors"][3]["max"] == [7, 7, 7]
    assert "bufferView" not in g.json["accessors"][4]
    assert np.array_equal(g.accessor(4), [[0, 0, 0], [0, 0, 0], [0, 2, 0], [0, 0, 0]])
    assert np.allclose(g.accessor(5), [[0, 64 / 127, 1, -1]])
    assert np.allclose(g.accessor(6), [[0, 128 / 255, 1, 1 / 255]])
    # the three forms hold the same document and data
    assert b.to_glb_bytes() == _tiny_builder().to_glb_bytes()


def test_builder_refuses_invalid_input():
    b = GltfBuilder()
    with pytest.raises(ValueError):
        b.add_accessor(np.zeros(3, np.float32), normalized=True)
    with pytest.raises(ValueError):
        b.add_sparse_accessor(count=3, indices=np.array([2, 1], np.uint8), values=np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError):
        b.add_node("n", matrix=np.eye(4), translation=[0, 0, 0])
    with pytest.raises(ValueError):
        b.add_buffer_view(b"1234", byte_stride=6)


def test_fixture_features_are_present(built):
    """The fixtures contain what their docstrings promise (guards against silent edits)."""
    arm = Gltf(built["cubic_spline_arm"]).json
    interps = [[s["interpolation"] for s in a["samplers"]] for a in arm["animations"]]
    assert set(interps[0]) == {"CUBICSPLINE"} and set(interps[1]) == {"STEP"} and set(interps[2]) == {"LINEAR"}
    assert {c["target"]["path"] for c in arm["animations"][0]["channels"]} == {"translation", "rotation", "scale"}

    sq = Gltf(built["sparse_and_quantized"])
    prims = sq.json["meshes"][0]["primitives"]
    acc = sq.json["accessors"]
    assert "sparse" in acc[prims[0]["attributes"]["POSITION"]] and "bufferView" in acc[prims[0]["attributes"]["POSITION"]]
    morph = acc[prims[0]["targets"][0]["POSITION"]]
    assert "sparse" in morph and "bufferView" not in morph
    assert acc[prims[0]["attributes"]["WEIGHTS_0"]]["componentType"] == UNSIGNED_BYTE
    assert sq.json["bufferViews"][acc[prims[1]["attributes"]["POSITION"]]["bufferView"]]["byteStride"] == 24
    types = {acc[s["output"]]["componentType"] for a in sq.json["animations"] for s in a["samplers"]}
    assert {5120, 5121, 5122} <= types

    eight = Gltf(built["eight_influences"])
    attrs = eight.json["meshes"][0]["primitives"][0]["attributes"]
    w1 = eight.accessor(attrs["WEIGHTS_1"])
    w = np.concatenate([eight.accessor(attrs["WEIGHTS_0"]), w1], axis=1)
    assert (w1 > 0.3).any() and (w.sum(axis=1) == 0).any() and not np.allclose(w.sum(axis=1), 1)

    orphan = Gltf(built["orphan_joint_root"]).json
    in_scene = set()
    stack = list(orphan["scenes"][0]["nodes"])
    while stack:
        n = stack.pop()
        in_scene.add(n)
        stack += orphan["nodes"][n].get("children", [])
    assert not in_scene & set(orphan["skins"][0]["joints"])
    assert "inverseBindMatrices" not in orphan["skins"][1]
    assert set(orphan["skins"][0]["joints"]) & set(orphan["skins"][1]["joints"])
    assert any("matrix" in n for n in orphan["nodes"])


# ------------------------------------------------------------------------------------------------
# reference: loop modes


@pytest.mark.parametrize("t, loop, expected", [
    (0.5, "repeat", 0.5), (2.0, "repeat", 0.0), (2.5, "repeat", 0.5), (-0.4, "repeat", 1.6),
    (2.5, "clamp", 2.0), (-0.4, "clamp", 0.0), (1.0, "clamp", 1.0),
    (0.5, "pingpong", 0.5), (2.0, "pingpong", 2.0), (2.5, "pingpong", 1.5), (4.5, "pingpong", 0.5),
    # three.js, negative time: (-d, 0) plays forwards from t + d, (-2d, -d) backwards
    (-0.4, "pingpong", 1.6), (-2.5, "pingpong", 0.5),
])
def test_loop_time(t, loop, expected):
    assert loop_time(t, 2.0, loop) == pytest.approx(expected, abs=1e-12)


def test_zero_length_clip_gives_its_only_key():
    assert loop_time(0.7, 0.0, "repeat") == 0.0 and loop_time(-3, 0.0, "pingpong") == 0.0


# ------------------------------------------------------------------------------------------------
# reference vs three.js truth, through the comparison helper


def _check(model_path: Path, truth: dict, sets: int | None):
    model = ReferenceModel(model_path)
    return compare_truth(truth, reference_bake_fn(model, sets=sets),
                         rest_fn=lambda: model.bake(None, [0.0], "repeat", sets=sets))


@pytest.mark.parametrize("name", list(models.FIXTURES))
def test_reference_matches_three_on_fixtures(name, built):
    """Reference reading only the first influence set (like three) agrees with three's truth."""
    report = _check(built[name], load_truth(TRUTH_DIR / f"{name}.json"), sets=1)
    assert report.samples_compared > 30
    assert report.max_matrix_rel_error < 1e-6
    assert report.max_position_ratio < 0.01, report.summary()


def test_reference_matches_eight_influence_truth(built):
    truth = load_truth(TRUTH_DIR / "eight_influences-8inf.json")
    assert len(truth["skinned_meshes"][0]["skin_indices"][0]) == 8
    report = _check(built["eight_influences"], truth, sets=None)
    assert report.max_position_ratio < 0.01


def test_compare_catches_second_influence_set(built):
    """All 8 influences differ from three's 4: the helper must fail, naming the mesh."""
    with pytest.raises(AssertionError, match=r"positions_node\d+_prim0"):
        _check(built["eight_influences"], load_truth(TRUTH_DIR / "eight_influences.json"), sets=None)


def test_compare_reports_a_wrong_node_matrix(built):
    truth = load_truth(TRUTH_DIR / "orphan_joint_root.json")
    model = ReferenceModel(built["orphan_joint_root"])

    hat = [n.get("name") for n in model.nodes].index("Hat")

    def bad_bake(clip, times, loop):
        out = model.bake(clip, times, loop, sets=1)
        out["node_world"][:, hat, 1, 3] += 0.01  # move the Hat 1 cm
        return out

    with pytest.raises(AssertionError) as err:
        compare_truth(truth, bad_bake)
    message = str(err.value)
    assert f"world matrix of node {hat} 'Hat'" in message and "worst first" in message
    assert "1 quantities" in message


def test_compare_groups_per_clip_and_loop(built):
    truth = load_truth(TRUTH_DIR / "cubic_spline_arm.json")
    model = ReferenceModel(built["cubic_spline_arm"])
    calls = []

    def bake(clip, times, loop):
        calls.append((clip, loop, len(times)))
        return model.bake(clip, times, loop, sets=1)

    compare_truth(truth, bake)
    assert sorted({(c, l) for c, l, _ in calls}) == sorted(
        (c, l) for c in range(3) for l in ("repeat", "clamp", "pingpong"))
    assert len(calls) == 9


@needs_shared
@pytest.mark.parametrize("asset, truth_name", [("SimpleSkin.gltf", "SimpleSkin.json"), ("Fox.glb", "Fox.json")])
def test_reference_matches_three_on_shared_models(asset, truth_name):
    truth = load_truth(TRUTH / truth_name)
    report = _check(ASSETS / asset, truth, sets=None)
    assert report.max_matrix_rel_error < 1e-6
    assert report.max_position_ratio < 0.01, report.summary()


def test_compare_skip_predicate(built):
    truth = load_truth(TRUTH_DIR / "cubic_spline_arm.json")
    model = ReferenceModel(built["cubic_spline_arm"])
    full = compare_truth(truth, reference_bake_fn(model, sets=1))
    part = compare_truth(truth, reference_bake_fn(model, sets=1), skip=negative_pingpong)
    assert part.samples_skipped == 6 and part.samples_compared == full.samples_compared - 6
