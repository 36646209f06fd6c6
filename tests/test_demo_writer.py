"""The glTF writer (``skeletal.io.gltf_write``) and the built-in demo character (``skeletal.demo``).

* the demo: rig, mesh, skin weights and clips have the promised shape (seamless loops, feet on the
  ground, walk/run in place);
* the writer: GLB layout rules, determinism, round trips through ``read_gltf`` (.glb, .gltf with a
  data URI, .gltf with an external .bin) for the demo and for a small document that uses what the
  demo does not (8 influences, morph targets, STEP and CUBICSPLINE tracks, a skin without inverse
  bind matrices, a matrix node, textures);
* ``skeletal.bake`` of the written demo equals the bake of the in-memory demo;
* the Khronos glTF-Validator (npm ``gltf-validator``) finds no errors and no warnings;
* three.js truth: ``tests/data/demo/demo-truth.json`` was generated from the exported demo.glb whose
  sha256 it records; the demo is re-exported, its hash checked, and the bake compared.

Node-based tests install ``gltf-validator`` (and ``three``) once into a cache folder outside the
repository (``$SKELETAL_TEST_NPM`` or ``~/.cache/skeletal-test-npm``) and skip when node/npm are
missing or the install fails (no network).

Regenerate the truth after changing the demo or the writer::

    .venv/bin/python tests/test_demo_writer.py --regenerate-truth
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

import skeletal
from skeletal.demo import JOINT_NAMES, build_demo_document, demo_asset
from skeletal.document import (Animation, Channel, Document, Image, Material, Mesh, MorphTarget, Node,
                               Primitive, Skin)
from skeletal.io.gltf import read_gltf
from skeletal.io.gltf_write import glb_bytes, normalized_influences, write_gltf

from fixtures.truth_compare import compare_truth, load_truth, negative_pingpong
from fixtures.shared_assets import TOOLS

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "demo"
TRUTH = DATA / "demo-truth.json"
VALIDATE_SCRIPT = DATA / "validate.mjs"
TRUTH_TOOL = TOOLS / "threejs-truth"
NPM_DIR = Path(os.environ.get("SKELETAL_TEST_NPM", "~/.cache/skeletal-test-npm")).expanduser()
NPM_PACKAGES = {"gltf-validator": "2.0.0-dev.3.10", "three": "0.187.0"}  # as threejs-truth pins them
#: How the committed truth was generated (see regenerate_truth).
TRUTH_OPTIONS = ["--loops", "repeat,once,pingpong", "--max-verts", "24", "--vert-stride", "113", "--digits", "8", "--no-local"]

# ---------------------------------------------------------------------------------------------
# fixtures


@pytest.fixture(scope="module")
def demo_doc() -> Document:
    return build_demo_document()


@pytest.fixture(scope="module")
def demo_files(tmp_path_factory, demo_doc) -> dict[str, Path]:
    """The demo written as .glb, .gltf (data URI) and .gltf + .bin."""
    folder = tmp_path_factory.mktemp("demo")
    files = {"glb": folder / "demo.glb", "gltf": folder / "demo.gltf", "external": folder / "demo-external.gltf"}
    write_gltf(demo_doc, files["glb"])
    write_gltf(demo_doc, files["gltf"], embed=True)
    write_gltf(demo_doc, files["external"], embed=False)
    return files


def _tiny_png() -> bytes:
    """A valid 2x2 RGBA PNG (made here so the test needs no image library)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    rows = b"".join(b"\x00" + bytes([255, 0, 0, 255, 0, 255, 0, 255]) for _ in range(2))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 6, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def small_document() -> Document:
    """A document exercising what the demo does not: a 9-joint chain skinning a strip with 8
    influences per vertex, two morph targets (names, defaults, a node override, a weights track),
    STEP / LINEAR / CUBICSPLINE tracks, a second skin without inverse bind matrices, a node given
    by a matrix, TANGENT / TEXCOORD_0/1 / COLOR_0 attributes, a textured double-sided material."""
    rng = np.random.default_rng(7)
    n_joints = 9
    nodes = [Node(name=f"joint{i}", children=[i + 1] if i + 1 < n_joints else [],
                  translation=np.array([0.0, 0.25 if i else 0.0, 0.0]), parent=i - 1) for i in range(n_joints)]
    nodes[0].rotation = _unit(np.array([0.1, 0.2, -0.05, 0.97]))
    nodes[0].scale = np.array([1.0, 2.0, 0.5])
    nodes[3].rotation = _unit(np.array([0.0, 0.0, 0.3, 0.95]))
    mesh_node = len(nodes)
    nodes.append(Node(name="strip", mesh=0, skin=0, weights=np.array([0.25, 0.5])))
    matrix = np.array([[0.0, -2.0, 0.0, 1.0], [2.0, 0.0, 0.0, 2.0], [0.0, 0.0, 2.0, 3.0], [0.0, 0.0, 0.0, 1.0]])
    nodes.append(Node(name="by_matrix", translation=np.array([1.0, 2.0, 3.0]),
                      rotation=np.array([0.0, 0.0, np.sqrt(0.5), np.sqrt(0.5)]), scale=np.array([2.0, 2.0, 2.0]),
                      matrix=matrix, mesh=2, children=[]))
    plain_node = len(nodes)
    nodes.append(Node(name="no_ibm", mesh=1, skin=1))

    v = 2 * n_joints
    y = np.repeat(np.arange(n_joints) * 0.25, 2)
    positions = np.stack([np.tile([-0.1, 0.1], n_joints), y, np.zeros(v)], axis=1).astype(np.float32)
    triangles = np.array([[2 * i, 2 * i + 1, 2 * i + 3, 2 * i, 2 * i + 3, 2 * i + 2] for i in range(n_joints - 1)]).reshape(-1)
    joints = np.stack([rng.permutation(n_joints)[:8] for _ in range(v)]).astype(np.uint32)
    weights = rng.uniform(0.05, 1.0, size=(v, 8))
    weights = (weights / weights.sum(axis=1, keepdims=True)).astype(np.float32)
    tangents = np.concatenate([np.tile([1.0, 0.0, 0.0], (v, 1)), np.where(np.arange(v) % 2, -1.0, 1.0)[:, None]], axis=1)
    strip = Primitive(
        positions=positions,
        normals=np.tile(np.float32([0, 0, 1]), (v, 1)),
        tangents=tangents.astype(np.float32),
        indices=triangles.astype(np.uint32),
        joints=joints,
        weights=weights,
        targets=[
            MorphTarget(position=rng.normal(size=(v, 3)).astype(np.float32) * 0.1,
                        normal=rng.normal(size=(v, 3)).astype(np.float32) * 0.01,
                        tangent=rng.normal(size=(v, 3)).astype(np.float32) * 0.01),
            MorphTarget(position=rng.normal(size=(v, 3)).astype(np.float32) * 0.1),
        ],
        attributes={
            "TEXCOORD_0": rng.uniform(size=(v, 2)).astype(np.float32),
            "TEXCOORD_1": rng.uniform(size=(v, 2)).astype(np.float32),
            "COLOR_0": rng.uniform(size=(v, 4)).astype(np.float32),
        },
        material=0,
    )
    quad = Primitive(positions=np.float32([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0]]),
                     normals=np.tile(np.float32([0, 0, 1]), (4, 1)),
                     indices=np.uint32([0, 1, 2, 0, 2, 3]),
                     joints=np.uint32([[0, 1, 0, 0], [1, 0, 0, 0], [2, 0, 0, 0], [0, 2, 0, 0]]),
                     weights=np.float32([[0.5, 0.5, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0], [0.75, 0.25, 0, 0]]),
                     material=1)
    world = np.zeros((n_joints, 4, 4))
    for i, node in enumerate(nodes[:n_joints]):
        local = skeletal.quat.compose_trs(node.translation, node.rotation, node.scale)
        world[i] = local if i == 0 else world[i - 1] @ local
    skins = [Skin("chain", np.arange(n_joints), np.linalg.inv(world), skeleton=0),
             Skin("identity", np.array([0, 1, 2]), np.tile(np.eye(4), (3, 1, 1)))]
    for ibm in skins[0].inverse_bind:  # exactly affine, as the validator wants
        ibm[3] = [0.0, 0.0, 0.0, 1.0]

    times = np.float32([0.0, 0.5, 1.25, 2.0])
    cubic_values = np.concatenate([[rng.normal(size=4) * 0.2, _unit(rng.normal(size=4)), rng.normal(size=4) * 0.2]
                                   for _ in times]).astype(np.float32)
    channels = [
        Channel(1, "translation", "STEP", times, rng.normal(size=(4, 3)).astype(np.float32)),
        Channel(2, "rotation", "CUBICSPLINE", times, cubic_values),
        Channel(3, "rotation", "LINEAR", times[:2], _unit(rng.normal(size=(2, 4))).astype(np.float32)),
        Channel(4, "scale", "LINEAR", times, rng.uniform(0.5, 1.5, size=(4, 3)).astype(np.float32)),
        Channel(mesh_node, "weights", "LINEAR", times, rng.uniform(size=(4, 2)).astype(np.float32)),
        Channel(5, "translation", "CUBICSPLINE", times[1:], rng.normal(size=(9, 3)).astype(np.float32)),
    ]
    return Document(
        path="small.glb",
        nodes=nodes,
        meshes=[Mesh("strip", [strip], weights=np.array([0.1, 0.2]), target_names=["smile", "frown"]),
                Mesh("quad", [quad]),
                Mesh("rigid", [Primitive(positions=quad.positions, indices=quad.indices, material=1)])],
        skins=skins,
        animations=[Animation("mixed", channels), Animation("short", [Channel(0, "translation", "LINEAR", np.float32([0.0]), np.float32([[1, 2, 3]]))])],
        scenes=[[0, mesh_node, len(nodes) - 2, plain_node]],
        scene=0,
        materials=[Material("textured", np.array([1.0, 0.5, 0.25, 1.0]), base_color_texture=0, base_color_texcoord=1, double_sided=True),
                   Material("plain", np.array([0.2, 0.3, 0.4, 0.5]))],
        images=[Image("dot", _tiny_png(), "image/png")],
    )


@pytest.fixture(scope="module")
def small_files(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("small")
    doc = small_document()
    files = {"glb": folder / "small.glb", "gltf": folder / "small.gltf", "external": folder / "small external.gltf"}
    write_gltf(doc, files["glb"])
    write_gltf(doc, files["gltf"])
    write_gltf(doc, files["external"], embed=False)
    return files


# ---------------------------------------------------------------------------------------------
# document comparison


def _close(a, b, what: str, atol: float = 0.0, rtol: float = 0.0) -> None:
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    assert a.shape == b.shape, f"{what}: shape {a.shape} != {b.shape}"
    np.testing.assert_allclose(a, b, atol=atol, rtol=rtol, err_msg=what)


def assert_documents_equal(ours: Document, back: Document) -> None:
    """``back`` (read from what the writer wrote) holds ``ours``, up to the writer's documented
    canonicalisations: float32 storage, unit normals/rotations, renormalised float32 weights."""
    assert len(back.nodes) == len(ours.nodes)
    animated = {c.node for a in ours.animations for c in a.channels}
    for i, (a, b) in enumerate(zip(ours.nodes, back.nodes)):
        w = f"nodes[{i}]"
        assert (b.name, b.children, b.mesh, b.skin, b.parent) == (a.name, a.children, a.mesh, a.skin, a.parent), w
        if a.matrix is not None and i not in animated:
            _close(b.matrix, a.matrix, w + ".matrix")
        else:
            _close(b.translation, a.translation, w + ".translation")
            _close(b.rotation, _unit(np.asarray(a.rotation, dtype=np.float64)), w + ".rotation")
            _close(b.scale, a.scale, w + ".scale")
        assert (a.weights is None) == (b.weights is None), w
        if a.weights is not None:
            _close(b.weights, a.weights, w + ".weights")

    assert len(back.meshes) == len(ours.meshes)
    for m, (ma, mb) in enumerate(zip(ours.meshes, back.meshes)):
        assert mb.name == ma.name and (mb.target_names or None) == (ma.target_names or None)
        if ma.weights is not None:
            _close(mb.weights, ma.weights, f"meshes[{m}].weights")
        assert len(mb.primitives) == len(ma.primitives)
        for p, (a, b) in enumerate(zip(ma.primitives, mb.primitives)):
            w = f"meshes[{m}].primitives[{p}]"
            _close(b.positions, a.positions, w + ".positions")
            assert (a.normals is None) == (b.normals is None), w
            if a.normals is not None:
                _close(b.normals, _unit(np.asarray(a.normals, np.float64)), w + ".normals", atol=1e-7)
            if a.tangents is not None:
                _close(b.tangents, a.tangents, w + ".tangents", atol=1e-7)
            _close(b.indices, a.indices, w + ".indices")
            assert (b.material, b.mode) == (a.material, a.mode), w
            for name, values in a.attributes.items():
                _close(b.attributes[name], values, f"{w}.{name}")
            assert len(b.targets) == len(a.targets)
            for t, (ta, tb) in enumerate(zip(a.targets, b.targets)):
                for field in ("position", "normal", "tangent"):
                    if getattr(ta, field) is not None:
                        _close(getattr(tb, field), getattr(ta, field), f"{w}.targets[{t}].{field}")
            assert (a.joints is None) == (b.joints is None), w
            if a.joints is None:
                continue
            # Influences as the writer canonicalises them: padded to sets of 4, float32 sums of 1.
            joints, weights = normalized_influences(a.joints, a.weights)
            _close(b.joints, joints, w + ".joints")
            _close(b.weights, weights, w + ".weights")
            _close(b.weights, np.pad(a.weights, ((0, 0), (0, b.weights.shape[1] - a.weights.shape[1]))), w + ".weights", atol=3e-7)

    assert len(back.skins) == len(ours.skins)
    for s, (a, b) in enumerate(zip(ours.skins, back.skins)):
        assert (b.name, b.skeleton, b.joints.tolist()) == (a.name, a.skeleton, a.joints.tolist())
        _close(b.inverse_bind, np.asarray(a.inverse_bind, np.float32), f"skins[{s}].inverse_bind")

    assert [a.name for a in back.animations] == [a.name for a in ours.animations]
    for n, (aa, ab) in enumerate(zip(ours.animations, back.animations)):
        assert len(ab.channels) == len(aa.channels)
        for c, (a, b) in enumerate(zip(aa.channels, ab.channels)):
            w = f"animations[{n}].channels[{c}]"
            assert (b.node, b.path, b.interpolation) == (a.node, a.path, a.interpolation), w
            _close(b.times, a.times, w + ".times")
            values = np.asarray(a.values, np.float64).reshape(b.values.shape)
            if a.path == "rotation":  # keys stored unit length (tangents as they are)
                keys = values[1::3] if a.interpolation == "CUBICSPLINE" else values
                keys /= np.linalg.norm(keys, axis=1, keepdims=True)
            _close(b.values, values, w + ".values", atol=1e-7)

    assert [(m.name, m.base_color_texture, m.base_color_texcoord, m.double_sided) for m in back.materials] == \
        [(m.name, m.base_color_texture, m.base_color_texcoord, m.double_sided) for m in ours.materials]
    for a, b in zip(ours.materials, back.materials):
        _close(b.base_color_factor, a.base_color_factor, f"material {a.name}")
    assert [(i.name, i.data, i.mime_type) for i in back.images] == [(i.name, i.data, i.mime_type) for i in ours.images]
    assert back.scenes == ours.scenes and back.scene == ours.scene


# ---------------------------------------------------------------------------------------------
# the demo


def test_demo_rig_and_mesh(demo_doc):
    assert JOINT_NAMES[:2] == ("root", "hips") and len(JOINT_NAMES) == 22
    for side in ("left", "right"):
        for part in ("shoulder", "upper_arm", "forearm", "hand", "thigh", "shin", "foot", "toe"):
            assert f"{side}_{part}" in JOINT_NAMES
    assert [n.name for n in demo_doc.nodes] == list(JOINT_NAMES) + ["body"]
    body = demo_doc.nodes[-1]
    assert (body.mesh, body.skin) == (0, 0) and not body.children
    asset = demo_asset()
    lo, hi = asset.bind_bounds
    assert lo[1] == pytest.approx(0.0, abs=1e-6) and 1.75 < hi[1] < 1.85  # stands on y = 0, ~1.8 m
    assert hi[0] == pytest.approx(-lo[0], abs=1e-6)  # left/right symmetric
    prims = demo_doc.meshes[0].primitives
    assert sum(p.vertex_count for p in prims) > 5000
    for p in prims:
        np.testing.assert_allclose(np.linalg.norm(p.normals, axis=1), 1.0, atol=1e-6)
        np.testing.assert_allclose(p.weights.sum(axis=1), 1.0, atol=1e-6)
        assert p.joints.shape[1] == 4 and p.weights.min() >= 0
        tri = p.positions[p.indices.reshape(-1, 3)].astype(np.float64)
        area = np.linalg.norm(np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]), axis=1)
        assert area.min() > 1e-9  # no degenerate triangles
    # Smooth weights: around the elbows and knees many vertices blend two or more bones.
    shirt = prims[1]
    elbow = np.array([0.24, 1.145, -0.02])
    near = np.linalg.norm(shirt.positions - elbow, axis=1) < 0.06
    assert near.sum() > 20 and np.all(np.sort(shirt.weights[near], axis=1)[:, -2] > 0.05)


def test_demo_clips(demo_doc):
    asset = demo_asset()
    assert {c.name: round(c.duration, 4) for c in asset.clips} == {"idle": 4.0, "walk": 1.12, "run": 0.68, "wave": 2.6}
    assert asset.clip("idle").interpolations == ["CUBICSPLINE"]
    assert asset.clip("walk").interpolations == ["LINEAR"]
    hips = JOINT_NAMES.index("hips")
    for clip in asset.clips:
        t = np.linspace(0.0, clip.duration, 97)
        baked = skeletal.bake(asset, clip, t)
        positions = np.concatenate([baked[k] for k in baked if k.startswith("positions_")], axis=1)
        # seamless loop: the last frame is the first
        np.testing.assert_allclose(positions[-1], positions[0], atol=1e-6, err_msg=clip.name)
        # the feet stay on the ground (run leaves it in its flight phase)
        lowest = positions[..., 1].min(axis=1)
        assert lowest.min() > -0.005, clip.name
        assert (lowest.max() < 0.005) == (clip.name != "run"), clip.name
        # in place: the hips move only vertically (idle sways a little from side to side)
        hips_xz = baked["node_world"][:, hips][:, [0, 2], 3]
        assert np.ptp(hips_xz[:, 1]) < 1e-6 and np.ptp(hips_xz[:, 0]) < (0.05 if clip.name == "idle" else 1e-6), clip.name


def test_demo_walk_swings_opposite_limbs():
    asset = demo_asset()
    baked = skeletal.bake(asset, "walk", [0.0, 0.56])
    z = baked["node_world"][:, :, 2, 3]
    foot_l, foot_r = JOINT_NAMES.index("left_foot"), JOINT_NAMES.index("right_foot")
    hand_l, hand_r = JOINT_NAMES.index("left_hand"), JOINT_NAMES.index("right_hand")
    assert z[0, foot_l] > z[0, foot_r] + 0.3 and z[1, foot_r] > z[1, foot_l] + 0.3  # strides
    assert z[0, hand_r] > z[0, hand_l] and z[1, hand_l] > z[1, hand_r]  # arms opposite to legs


# ---------------------------------------------------------------------------------------------
# the writer


def _glb_parts(data: bytes) -> tuple[dict, bytes]:
    magic, version, length = struct.unpack_from("<4sII", data, 0)
    assert (magic, version, length) == (b"glTF", 2, len(data))
    json_len, json_type = struct.unpack_from("<II", data, 12)
    assert json_type == 0x4E4F534A and json_len % 4 == 0
    json_bytes = data[20:20 + json_len]
    assert json_bytes == json_bytes.rstrip(b" ") + b" " * (len(json_bytes) - len(json_bytes.rstrip(b" ")))
    bin_len, bin_type = struct.unpack_from("<II", data, 20 + json_len)
    assert bin_type == 0x004E4942 and bin_len % 4 == 0 and 28 + json_len + bin_len == len(data)
    return json.loads(json_bytes), data[28 + json_len:]


@pytest.mark.parametrize("which", ["demo", "small"])
def test_glb_layout(which, demo_doc):
    doc = demo_doc if which == "demo" else small_document()
    data = glb_bytes(doc)
    assert glb_bytes(doc) == data  # deterministic
    gltf, binary = _glb_parts(data)
    assert gltf["asset"] == {"version": "2.0", "generator": f"skeletal {skeletal.__version__}"}
    assert gltf["buffers"] == [{"byteLength": len(binary)}]
    views, accessors = gltf["bufferViews"], gltf["accessors"]
    for view in views:
        assert view["byteOffset"] % 4 == 0
    uses: dict[int, str] = {}
    for mesh in gltf["meshes"]:
        for prim in mesh["primitives"]:
            for name, a in prim["attributes"].items():
                uses[a] = name
            for target in prim.get("targets", []):
                for name, a in target.items():
                    uses[a] = "target " + name
            uses[prim["indices"]] = "indices"
    for a, acc in enumerate(accessors):
        view = views[acc["bufferView"]]
        use = uses.get(a, "")
        if use == "indices":
            assert view["target"] == 34963 and acc["componentType"] in (5123, 5125)
        elif use and not use.startswith("target"):
            assert view["target"] == 34962
        else:
            assert "target" not in view or use.startswith("target")
        assert "byteStride" not in view  # every element here is a multiple of 4 bytes
        if use in ("POSITION", "target POSITION"):
            dtype = np.float32
            values = np.frombuffer(binary, dtype, acc["count"] * 3, view["byteOffset"]).reshape(-1, 3)
            assert acc["min"] == values.min(axis=0).tolist() and acc["max"] == values.max(axis=0).tolist()
        if use.startswith("JOINTS"):
            assert acc["componentType"] == 5121  # < 256 joints
    for animation in gltf["animations"]:
        for sampler in animation["samplers"]:
            acc = accessors[sampler["input"]]
            assert "min" in acc and "max" in acc
    if which == "small":
        attributes = gltf["meshes"][0]["primitives"][0]["attributes"]
        assert {"JOINTS_0", "JOINTS_1", "WEIGHTS_0", "WEIGHTS_1", "TANGENT", "TEXCOORD_1", "COLOR_0"} <= set(attributes)
        assert "inverseBindMatrices" not in gltf["skins"][1]
        assert "matrix" in gltf["nodes"][10] and "translation" not in gltf["nodes"][10]


def test_weights_are_padded_and_normalised():
    joints = np.array([[3, 1, 2, 5, 7], [4, 2, 0, 0, 0], [9, 8, 0, 0, 0]], dtype=np.uint32)
    weights = np.array([[0.2, 0.2, 0.2, 0.2, 0.1], [2.0, 0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0]], np.float32)
    j, w = normalized_influences(joints, weights)
    assert j.shape == w.shape == (3, 8) and w.dtype == np.float32
    np.testing.assert_allclose(w.astype(np.float64).sum(axis=1), 1.0, atol=1e-7)
    assert j[0].tolist() == [3, 1, 2, 5, 7, 0, 0, 0]
    assert j[1].tolist() == [4, 0, 0, 0, 0, 0, 0, 0] and w[1, 0] == 1.0  # zero weights carry joint 0
    assert j[2].tolist() == [9, 0, 0, 0, 0, 0, 0, 0] and w[2, 0] == 1.0  # all-zero row -> first joint


def test_write_rejects_unknown_extension(tmp_path, demo_doc):
    with pytest.raises(ValueError, match=r"\.glb or \.gltf"):
        write_gltf(demo_doc, tmp_path / "demo.obj")


@pytest.mark.parametrize("kind", ["glb", "gltf", "external"])
def test_round_trip_demo(kind, demo_doc, demo_files):
    assert_documents_equal(demo_doc, read_gltf(demo_files[kind]))


@pytest.mark.parametrize("kind", ["glb", "gltf", "external"])
def test_round_trip_small(kind, small_files):
    back = read_gltf(small_files[kind])
    assert_documents_equal(small_document(), back)
    assert back.meshes[0].primitives[0].joints.shape == (18, 8)
    np.testing.assert_array_equal(back.skins[1].inverse_bind, np.tile(np.eye(4), (3, 1, 1)))


def test_external_bin_is_beside_the_gltf(small_files):
    gltf = json.loads(small_files["external"].read_text(encoding="utf-8"))
    assert gltf["buffers"][0]["uri"] == "small%20external.bin"
    assert (small_files["external"].parent / "small external.bin").stat().st_size == gltf["buffers"][0]["byteLength"]


def test_written_demo_bakes_like_the_original(demo_files):
    original = demo_asset()
    written = skeletal.load(demo_files["glb"])
    for clip in original.clips:
        times = np.linspace(-0.3, clip.duration * 1.3, 23)
        for loop in ("clamp", "repeat", "pingpong"):
            a = skeletal.bake(original, clip.name, times, loop=loop)
            b = skeletal.bake(written, clip.name, times, loop=loop)
            assert set(a) == set(b)
            for key in a:
                np.testing.assert_allclose(b[key], a[key], atol=1e-5, rtol=0, err_msg=f"{clip.name} {loop} {key}")


# ---------------------------------------------------------------------------------------------
# Node: the Khronos validator and the three.js truth


def _npm_installed() -> bool:
    """Lock-free check: every pinned package is there at its pinned version."""
    for name, version in NPM_PACKAGES.items():
        manifest = NPM_DIR / "node_modules" / name / "package.json"
        try:
            if json.loads(manifest.read_text(encoding="utf-8")).get("version") != version:
                return False
        except (OSError, ValueError):
            return False
    return True


def ensure_npm_packages() -> str | None:
    """Install the pinned npm packages into NPM_DIR unless already there; the reason if impossible."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        return "node and npm are needed for the glTF-Validator and three.js tests"
    if _npm_installed():
        return None
    import fcntl

    NPM_DIR.mkdir(parents=True, exist_ok=True)
    with open(NPM_DIR / ".install.lock", "w") as lock:  # pytest-xdist: one worker installs, the others wait
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _npm_installed():
            return None
        command = ["npm", "install", "--prefix", str(NPM_DIR), "--no-audit", "--no-fund", "--save-exact"]
        command += [f"{name}@{version}" for name, version in NPM_PACKAGES.items()]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"npm install failed ({exc}); no network?"
        if done.returncode != 0 or not _npm_installed():
            return f"npm install of {NPM_PACKAGES} into {NPM_DIR} failed (no network?): {done.stderr.strip()[-500:]}"
    return None


@pytest.fixture(scope="session")
def npm_packages() -> Path:
    reason = ensure_npm_packages()
    if reason:
        pytest.skip(reason)
    return NPM_DIR / "node_modules"


def validate(path: Path, node_modules: Path) -> dict:
    """The glTF-Validator's report for a file (see tests/data/demo/validate.mjs)."""
    env = dict(os.environ, NODE_PATH=str(node_modules))
    done = subprocess.run(["node", str(VALIDATE_SCRIPT), str(path)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


#: Validator messages accepted on purpose, with the reason. (None so far.)
ACCEPTED_ISSUES: dict[str, str] = {}


@pytest.mark.parametrize("files,kind", [("demo", "glb"), ("demo", "external"), ("small", "glb"), ("small", "gltf"), ("small", "external")])
def test_khronos_validator(files, kind, demo_files, small_files, npm_packages):
    path = (demo_files if files == "demo" else small_files)[kind]
    report = validate(path, npm_packages)
    issues = report["issues"]
    problems = [m for m in issues["messages"] if m["severity"] <= 1 and m["code"] not in ACCEPTED_ISSUES]
    assert not problems, json.dumps(problems[:20], indent=1)
    assert issues["numErrors"] == 0


def test_demo_matches_threejs_truth(demo_files):
    if not TRUTH.is_file():
        pytest.fail(f"{TRUTH} is missing; regenerate it: {sys.executable} tests/test_demo_writer.py --regenerate-truth")
    truth = load_truth(TRUTH)
    # The truth records the sha256 of the demo.glb it was made from. Another machine's libm may round
    # a last bit differently, which changes the bytes but not the animation: the tolerance comparison
    # below is the real check, and the hash only explains a failure.
    same_bytes = hashlib.sha256(demo_files["glb"].read_bytes()).hexdigest() == truth["model"]["sha256"]
    asset = skeletal.load(demo_files["glb"])
    rest = skeletal.Clip("rest", [])
    try:
        report = compare_truth(
            truth,
            lambda clip, times, loop: skeletal.bake(asset, clip, times, loop=loop),
            rest_fn=lambda: skeletal.bake(asset, rest, [0.0]),
            skip=negative_pingpong,
        )
    except AssertionError as exc:
        if same_bytes:
            raise
        raise AssertionError(
            "the exported demo.glb is not the file the committed three.js truth was made from (the demo or the "
            f"writer changed); regenerate it: {sys.executable} tests/test_demo_writer.py --regenerate-truth\n{exc}"
        ) from None
    assert report.samples_compared >= 4 * 3 * 7
    print(report.summary())


# ---------------------------------------------------------------------------------------------
# regenerating the truth


def truth_tool() -> Path:
    """The three.js truth generator, ready to run: the npm packages installed and the tool copied into
    NPM_DIR (it imports `three` by bare name, so a copy there finds NPM_DIR/node_modules). For the
    tests' --regenerate-truth scripts; SystemExit with the reason when it cannot be."""
    reason = ensure_npm_packages()
    if reason:
        raise SystemExit(reason)
    if not (TRUTH_TOOL / "gen_truth.mjs").is_file():
        raise SystemExit(f"the truth generator is not at {TRUTH_TOOL}")
    tool = NPM_DIR / "threejs-truth"
    if tool.exists():
        shutil.rmtree(tool)
    shutil.copytree(TRUTH_TOOL, tool, ignore=shutil.ignore_patterns("node_modules"))
    return tool


def write_truth(tool: Path, model: Path, out: Path, options: list[str]) -> None:
    """Run the generator on ``model`` into ``out`` and say what was written."""
    subprocess.run(["node", str(tool / "gen_truth.mjs"), str(model), "--out", str(out), *options], check=True)
    print(f"wrote {out} ({out.stat().st_size} bytes) for {model.name} sha256 "
          f"{hashlib.sha256(model.read_bytes()).hexdigest()}")


def regenerate_truth() -> None:
    """Export the demo, run the three.js truth generator on it, write tests/data/demo/demo-truth.json."""
    tool = truth_tool()
    model = NPM_DIR / "demo.glb"
    write_gltf(build_demo_document(), model)
    write_truth(tool, model, TRUTH, TRUTH_OPTIONS)


if __name__ == "__main__":
    if sys.argv[1:] == ["--regenerate-truth"]:
        regenerate_truth()
    else:
        raise SystemExit(f"usage: {sys.argv[0]} --regenerate-truth")
