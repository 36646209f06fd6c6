"""Malformed, unsafe and unsupported glTF files: each must raise ModelError (or its subclass
UnsupportedExtensionError) naming the file and the object at fault, never a raw Python error."""

from __future__ import annotations

import os
import re
import struct
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from skeletal.errors import ModelError, UnsupportedExtensionError
from skeletal.io.gltf import read_gltf
from test_gltf_reader import FLOAT, SHORT, UNSIGNED_BYTE, UNSIGNED_SHORT, RawGltf, draco_model, meshopt_model, triangle


def raises(path: Path, where: str, detail: str = "", *, error: type[ModelError] = ModelError, **kwargs):
    """Read ``path`` expecting ``error`` whose message starts with '<file name>: <where>' and
    contains ``detail`` (a regular expression)."""
    pattern = re.escape(f"{path.name}: {where}") + (f".*{detail}" if detail else "")
    with pytest.raises(error, match=pattern) as info:
        read_gltf(path, **kwargs)
    return info.value


def skinned_triangle(g: RawGltf, *, joints: list[list[int]] | None = None) -> None:
    """A skinned triangle (2 joints) with one translation channel, for tweaking."""
    pos = triangle(g)
    j = g.array(joints or [[0, 1, 0, 0]] * 3, UNSIGNED_BYTE, "VEC4")
    w = g.array([[0.5, 0.5, 0, 0]] * 3, FLOAT, "VEC4")
    g.mesh_node({"POSITION": pos, "JOINTS_0": j, "WEIGHTS_0": w})
    a, b = g.add("nodes", {"children": [2]}), g.add("nodes", {})
    g.doc["nodes"][0]["skin"] = g.add("skins", {"joints": [a, b]})
    g.doc["scenes"][0]["nodes"].append(a)
    times = g.array([0.0, 1.0, 2.0], FLOAT, "SCALAR")
    values = g.array(np.zeros((3, 3)), FLOAT, "VEC3")
    g.add("animations", {"name": "walk", "channels": [{"sampler": 0, "target": {"node": a, "path": "translation"}}],
                         "samplers": [{"input": times, "output": values}]})


# ---------------------------------------------------------------------------------------------------
# Containers
# ---------------------------------------------------------------------------------------------------
def test_missing_file(tmp_path):
    raises(tmp_path / "nope.glb", "cannot read the file")


def test_empty_file(tmp_path):
    path = tmp_path / "empty.gltf"
    path.write_bytes(b"")
    raises(path, "the file is empty")


def test_bad_json(tmp_path):
    path = tmp_path / "bad.gltf"
    path.write_text('{"asset": {"version": "2.0"}, "nodes": [}')
    raises(path, "JSON", "not valid JSON")
    path.write_text('{"asset": {"version": "2.0"}, "nodes": [{"translation": [NaN, 0, 0]}]}')
    raises(path, "JSON", "NaN")
    path.write_text("[1, 2]")
    raises(path, "JSON", "top level")
    path.write_text("[" * 100_000 + "]" * 100_000)
    raises(path, "JSON", "nested too deeply")


def test_not_gltf_2(tmp_path):
    path = tmp_path / "old.gltf"
    path.write_text('{"asset": {"version": "1.0"}}')
    raises(path, "asset.version", "not supported")
    path.write_text('{"nodes": []}')
    raises(path, "asset", "required field is missing")


def _glb(tmp_path: Path) -> bytes:
    g = RawGltf()
    g.mesh_node({"POSITION": triangle(g)})
    return g.glb_bytes()


def test_bad_glb_magic_and_version(tmp_path):
    data = _glb(tmp_path)
    path = tmp_path / "m.glb"
    path.write_bytes(b"glTF" + struct.pack("<I", 1) + data[8:])
    raises(path, "GLB header", "version 1")
    # A GLB version 1 container is glTF 1.0: the same conversion hint as a .gltf that says "1.0".
    raises(path, "GLB header", r"glTF 1\.0 is not supported")
    raises(path, "GLB header", "gltf-pipeline or Blender")
    path.write_bytes(b"glTF" + struct.pack("<I", 3) + data[8:])
    raises(path, "GLB header", "version 3 is not supported")
    # Not the GLB magic: read as JSON, which it is not.
    path.write_bytes(b"glTX" + data[4:])
    raises(path, "JSON")
    path.write_bytes(b"glTF\x02\x00")
    raises(path, "GLB header", "needs 12")


def test_truncated_glb(tmp_path):
    data = _glb(tmp_path)
    path = tmp_path / "cut.glb"
    path.write_bytes(data[:-10])
    raises(path, "GLB header", "truncated")


def test_bad_glb_chunk_length(tmp_path):
    data = bytearray(_glb(tmp_path))
    struct.pack_into("<I", data, 12, 1_000_000)  # JSON chunk length far past the end
    path = tmp_path / "chunk.glb"
    path.write_bytes(bytes(data))
    raises(path, "GLB chunk 0", "runs past the end")
    data = bytearray(_glb(tmp_path))
    struct.pack_into("<I", data, 16, 0x004E4942)  # first chunk typed BIN
    path.write_bytes(bytes(data))
    raises(path, "GLB chunk 0", "must be JSON")


def test_glb_bin_chunk_shorter_than_buffer(tmp_path):
    g = RawGltf()
    g.mesh_node({"POSITION": triangle(g)})
    g.declared_length = 4096
    raises(g.write_glb(tmp_path / "short.glb"), "buffers[0]", "byteLength is 4096 but the GLB BIN chunk has only 36 bytes")


# ---------------------------------------------------------------------------------------------------
# Buffers and URIs
# ---------------------------------------------------------------------------------------------------
def test_missing_external_buffer(tmp_path):
    g = RawGltf()
    g.mesh_node({"POSITION": triangle(g)})
    path = g.write_gltf(tmp_path / "m.gltf", embed=False)
    (tmp_path / "m.bin").unlink()
    raises(path, "buffers[0].uri", "cannot read")


def test_external_buffer_too_short(tmp_path):
    g = RawGltf()
    g.mesh_node({"POSITION": triangle(g)})
    path = g.write_gltf(tmp_path / "m.gltf", embed=False)
    (tmp_path / "m.bin").write_bytes(b"\x00" * 8)
    raises(path, "buffers[0]", "byteLength is 36 but its URI gives only 8 bytes")


def test_buffer_without_data(tmp_path):
    g = RawGltf()
    g.mesh_node({"POSITION": triangle(g)})
    path = tmp_path / "nodata.gltf"
    path.write_bytes(g._json(None))  # .gltf whose buffer has no uri: nothing to read
    raises(path, "bufferViews[0]", "buffers\\[0\\] has no data")


@pytest.mark.parametrize(
    "uri, detail",
    [
        ("../outside.bin", "outside the allowed folder"),
        ("sub/../../outside.bin", "outside the allowed folder"),
        ("%2E%2E/outside.bin", "outside the allowed folder"),
        ("..\\outside.bin", "outside the allowed folder"),
        ("/etc/passwd", "absolute path"),
        ("%2Fetc%2Fpasswd", "absolute path"),
        ("http://example.com/m.bin", "scheme"),
        ("https://example.com/m.bin", "scheme"),
        ("file:///etc/passwd", "scheme"),
        ("C:/Windows/m.bin", "scheme"),
    ],
)
def test_unsafe_buffer_uris_are_refused(tmp_path, uri, detail):
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    g = RawGltf()
    g.mesh_node({"POSITION": triangle(g)})
    (tmp_path / "outside.bin").write_bytes(bytes(g.bin))
    path = model_dir / "m.gltf"
    path.write_bytes(g._json(uri))
    raises(path, "buffers[0].uri", re.escape(detail))


def test_symlink_out_of_the_folder_is_refused(tmp_path):
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    g = RawGltf()
    g.mesh_node({"POSITION": triangle(g)})
    (tmp_path / "secret.bin").write_bytes(bytes(g.bin))
    try:
        os.symlink(tmp_path / "secret.bin", model_dir / "link.bin")
    except OSError:
        pytest.skip("cannot create symlinks here")
    path = model_dir / "m.gltf"
    path.write_bytes(g._json("link.bin"))
    raises(path, "buffers[0].uri", "outside the allowed folder")


def test_base_dir_is_the_explicit_opt_in(tmp_path):
    """A buffer beside the model's folder is refused by default, and read once base_dir covers it;
    base_dir is still a boundary."""
    (tmp_path / "models").mkdir()
    (tmp_path / "data").mkdir()
    g = RawGltf()
    g.mesh_node({"POSITION": triangle(g)})
    (tmp_path / "data" / "b.bin").write_bytes(bytes(g.bin))
    path = tmp_path / "models" / "m.gltf"
    path.write_bytes(g._json("data/b.bin"))
    raises(path, "buffers[0].uri", "cannot read")  # models/data/b.bin does not exist
    doc = read_gltf(path, base_dir=tmp_path)
    np.testing.assert_array_equal(doc.meshes[0].primitives[0].positions[1], [1, 0, 0])
    path.write_bytes(g._json("../b.bin"))
    raises(path, "buffers[0].uri", "outside the allowed folder", base_dir=tmp_path / "data")


def test_unsafe_image_uri_is_not_read_and_not_fatal(tmp_path):
    g = RawGltf()
    g.mesh_node({"POSITION": triangle(g)})
    g.add("images", {"uri": "../secret.png"})
    g.add("images", {"uri": "http://example.com/a.png"})
    (tmp_path / "secret.png").write_bytes(b"\x89PNG\r\n\x1a\nsecret")
    (tmp_path / "m").mkdir()
    with pytest.warns(UserWarning, match="images"):
        doc = read_gltf(g.write_glb(tmp_path / "m" / "m.glb"))
    assert [image.data for image in doc.images] == [None, None]


# ---------------------------------------------------------------------------------------------------
# Size checks before allocation
# ---------------------------------------------------------------------------------------------------
def test_huge_count_in_tiny_file_errors_without_allocating(tmp_path):
    g = RawGltf()
    pos = triangle(g)
    g.doc["accessors"][pos]["count"] = 10**12
    g.mesh_node({"POSITION": pos})
    path = g.write_glb(tmp_path / "huge.glb")
    start = time.perf_counter()
    raises(path, f"accessors[{pos}]", "count 1000000000000 at byteOffset 0 needs 12000000000000 bytes, bufferViews\\[0\\] has 36")
    assert time.perf_counter() - start < 1.0


def test_huge_count_without_buffer_view_is_refused(tmp_path):
    g = RawGltf()
    pos = triangle(g)
    zeros = g.accessor(None, FLOAT, "VEC3", 10**11)
    g.mesh_node({"POSITION": pos}, targets=[{"POSITION": zeros}])
    path = g.write_glb(tmp_path / "zeros.glb")
    raises(path, "meshes[0].primitives[0].targets[0].POSITION", "has 100000000000 elements")
    # Read directly (no count check by a user first): the accessor reader's own bound.
    g.doc["meshes"][0]["primitives"][0]["attributes"]["POSITION"] = zeros
    g.doc["meshes"][0]["primitives"][0].pop("targets")
    path = g.write_glb(tmp_path / "zeros2.glb")
    start = time.perf_counter()
    raises(path, f"accessors[{zeros}]", "would need 1200000000000 bytes of zeros")
    assert time.perf_counter() - start < 1.0


def test_sparse_counts_are_checked(tmp_path):
    g = RawGltf()
    idx = g.view(np.array([0, 1], "<u2").tobytes())
    val = g.view(np.zeros((2, 3), "<f4").tobytes())
    pos = g.accessor(None, FLOAT, "VEC3", 3, sparse={
        "count": 1000, "indices": {"bufferView": idx, "componentType": UNSIGNED_SHORT}, "values": {"bufferView": val}})
    g.mesh_node({"POSITION": pos})
    raises(g.write_glb(tmp_path / "s.glb"), f"accessors[{pos}].sparse.count", "more than the accessor's count 3")
    g.doc["accessors"][pos]["count"] = 5000
    g.doc["accessors"][pos]["sparse"]["count"] = 1000
    raises(g.write_glb(tmp_path / "s.glb"), f"accessors[{pos}].sparse.indices", "needs 2000 bytes, bufferViews\\[0\\] has 4")
    g.doc["accessors"][pos]["count"] = 1
    g.doc["accessors"][pos]["sparse"]["count"] = 1
    g.doc["accessors"][pos]["sparse"]["indices"]["byteOffset"] = 2  # index 1 >= count 1
    raises(g.write_glb(tmp_path / "s.glb"), f"accessors[{pos}].sparse.indices", "sparse index 1")


def test_buffer_view_past_end_of_buffer(tmp_path):
    g = RawGltf()
    pos = triangle(g)
    g.doc["bufferViews"][0]["byteLength"] = 400
    g.mesh_node({"POSITION": pos})
    raises(g.write_glb(tmp_path / "v.glb"), "bufferViews[0]", "runs past the end of buffers\\[0\\] \\(36 bytes\\)")


def test_stride_smaller_than_element(tmp_path):
    g = RawGltf()
    pos = triangle(g)
    g.doc["bufferViews"][0]["byteStride"] = 8
    g.mesh_node({"POSITION": pos})
    raises(g.write_glb(tmp_path / "stride.glb"), f"accessors[{pos}]", "byteStride 8 is smaller than one VEC3 of FLOAT")


def test_meshopt_declared_size_is_bounded(tmp_path):
    pytest.importorskip("meshopt")
    g = RawGltf()
    g.extra_buffers.append({"byteLength": 1 << 40})
    count = 1 << 28
    ext = {"buffer": 0, "byteOffset": g.append(b"\xa0" + b"\x00" * 40), "byteLength": 41, "byteStride": 16,
           "count": count, "mode": "ATTRIBUTES"}
    view = g.add("bufferViews", {"buffer": 1, "byteLength": count * 16, "byteStride": 16,
                                 "extensions": {"EXT_meshopt_compression": ext}})
    pos = g.accessor(view, FLOAT, "VEC3", 3)
    g.mesh_node({"POSITION": pos})
    g.doc["extensionsUsed"] = ["EXT_meshopt_compression"]
    raises(g.write_glb(tmp_path / "bomb.glb"), "bufferViews[0].extensions.EXT_meshopt_compression",
           "cannot come from 41 compressed bytes")


# ---------------------------------------------------------------------------------------------------
# References, structure and types
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "edit, where, detail",
    [
        (lambda d: d["nodes"][0].update(mesh=5), "nodes[0].mesh", "meshes\\[5\\], which does not exist"),
        (lambda d: d["nodes"][0].update(skin=3), "nodes[0].skin", "skins\\[3\\]"),
        (lambda d: d["nodes"][1].update(children=[99]), "nodes[1].children[0]", "nodes\\[99\\]"),
        (lambda d: d["skins"][0].update(joints=[1, 42]), "skins[0].joints[1]", "nodes\\[42\\]"),
        (lambda d: d["meshes"][0]["primitives"][0]["attributes"].update(POSITION=77),
         "meshes[0].primitives[0].attributes.POSITION", "accessors\\[77\\]"),
        (lambda d: d["accessors"][0].update(bufferView=50), "accessors[0].bufferView", "bufferViews\\[50\\]"),
        (lambda d: d["bufferViews"][0].update(buffer=2), "bufferViews[0].buffer", "buffers\\[2\\]"),
        (lambda d: d["animations"][0]["channels"][0].update(sampler=4), "animations[0].channels[0].sampler",
         "sampler 4, but animation 'walk' has 1 samplers"),
        (lambda d: d["animations"][0]["channels"][0]["target"].update(node=30),
         "animations[0].channels[0].target.node", "nodes\\[30\\]"),
        (lambda d: d["animations"][0]["samplers"][0].update(input=999), "animations[0].samplers[0].input",
         "accessors\\[999\\]"),
        (lambda d: d.update(scene=3), "scene", "scenes\\[3\\]"),
        (lambda d: d["scenes"][0].update(nodes=[0, 8]), "scenes[0].nodes[1]", "nodes\\[8\\]"),
    ],
)
def test_references_to_missing_objects(tmp_path, edit, where, detail):
    g = RawGltf()
    skinned_triangle(g)
    edit(g.doc)
    raises(g.write_glb(tmp_path / "ref.glb"), where, detail)


@pytest.mark.parametrize(
    "edit, where, detail",
    [
        (lambda d: d["accessors"][0].pop("componentType"), "accessors[0].componentType", "required field is missing"),
        (lambda d: d["accessors"][0].update(count="3"), "accessors[0].count", "expected an integer, found a string"),
        (lambda d: d["accessors"][0].update(type="VEC7"), "accessors[0].type", "unknown type"),
        (lambda d: d["accessors"][0].update(componentType=5127), "accessors[0].componentType", "unknown componentType"),
        (lambda d: d["nodes"][1].update(children="2"), "nodes[1].children", "expected an array"),
        (lambda d: d["nodes"][1].update(translation=[1, 2]), "nodes[1].translation", "expected 3 numbers"),
        (lambda d: d["nodes"].__setitem__(1, [1]), "nodes[1]", "expected a JSON object"),
        (lambda d: d["meshes"][0].update(primitives=[]), "meshes[0].primitives", "at least 1"),
        (lambda d: d["meshes"][0]["primitives"][0].pop("attributes"), "meshes[0].primitives[0].attributes",
         "required field is missing"),
        (lambda d: d["bufferViews"][0].pop("byteLength"), "bufferViews[0].byteLength", "required field"),
        (lambda d: d["animations"][0]["channels"][0].pop("target"), "animations[0].channels[0].target",
         "required field is missing"),
        (lambda d: d["animations"][0]["channels"][0]["target"].update(path="colour"),
         "animations[0].channels[0].target.path", "unknown path 'colour'"),
        (lambda d: d["accessors"][0].update(normalized=True), "accessors[0].normalized", "must not be true for FLOAT"),
        (lambda d: d["nodes"][1].update(matrix=[0] * 15 + [2]), "nodes[1].matrix", "not affine"),
    ],
)
def test_missing_fields_and_wrong_types(tmp_path, edit, where, detail):
    g = RawGltf()
    skinned_triangle(g)
    edit(g.doc)
    raises(g.write_glb(tmp_path / "field.glb"), where, detail)


def test_node_cycle(tmp_path):
    g = RawGltf()
    g.add("nodes", {"children": [1]})
    g.add("nodes", {"children": [2]})
    g.add("nodes", {"children": [1]})  # 1 -> 2 -> 1; node 0 would be the second parent of 1
    g.doc["nodes"][0] = {}
    raises(g.write_gltf(tmp_path / "cycle.gltf"), "nodes[", "cycle: nodes\\[\\d\\] -> nodes\\[\\d\\] -> nodes\\[\\d\\]")


def test_node_with_two_parents_and_own_child(tmp_path):
    g = RawGltf()
    g.add("nodes", {"children": [2]})
    g.add("nodes", {"children": [2]})
    g.add("nodes", {})
    raises(g.write_gltf(tmp_path / "two.gltf"), "nodes[1].children", "nodes\\[2\\] has two parents, nodes\\[0\\] and nodes\\[1\\]")
    g.doc["nodes"] = [{"children": [0]}]
    raises(g.write_gltf(tmp_path / "self.gltf"), "nodes[0].children", "lists itself")


def test_key_times_not_strictly_increasing(tmp_path):
    g = RawGltf()
    skinned_triangle(g)
    times = g.doc["animations"][0]["samplers"][0]["input"]
    g.doc["accessors"][times]["bufferView"] = g.view(np.array([0.0, 1.0, 1.0], "<f4").tobytes())
    raises(g.write_glb(tmp_path / "times.glb"), "animations[0].channels[0]",
           "animation 'walk', samplers\\[0\\]: key times .* not strictly increasing: key 2 \\(t=1.0\\) follows key 1")


def test_non_finite_key_times(tmp_path):
    g = RawGltf()
    skinned_triangle(g)
    times = g.doc["animations"][0]["samplers"][0]["input"]
    g.doc["accessors"][times]["bufferView"] = g.view(np.array([0.0, np.nan, 2.0], "<f4").tobytes())
    raises(g.write_glb(tmp_path / "nan.glb"), "animations[0].channels[0]", "samplers\\[0\\].*key 1 time is nan")


def test_input_output_count_mismatch(tmp_path):
    g = RawGltf()
    skinned_triangle(g)
    sampler = g.doc["animations"][0]["samplers"][0]
    sampler["output"] = g.array(np.zeros((2, 3)), FLOAT, "VEC3")
    raises(g.write_glb(tmp_path / "count.glb"), "animations[0].channels[0]", "has 2 elements, expected 3 for 3 keys")
    sampler["output"] = g.array(np.zeros((3, 3)), FLOAT, "VEC3")
    sampler["interpolation"] = "CUBICSPLINE"
    raises(g.write_glb(tmp_path / "cubic.glb"), "animations[0].channels[0]", "expected 9 .*CUBICSPLINE stores 3 per key")


def test_unknown_interpolation(tmp_path):
    g = RawGltf()
    skinned_triangle(g)
    g.doc["animations"][0]["samplers"][0]["interpolation"] = "BEZIER"
    raises(g.write_glb(tmp_path / "interp.glb"), "animations[0].channels[0]", "unknown interpolation 'BEZIER'")


def test_joint_index_out_of_range_names_the_primitive(tmp_path):
    g = RawGltf()
    skinned_triangle(g, joints=[[0, 1, 0, 0], [0, 2, 0, 0], [0, 1, 0, 0]])
    raises(g.write_glb(tmp_path / "joints.glb"), "meshes[0].primitives[0]",
           "JOINTS_0 has joint index 2, but skins\\[0\\] \\(the skin of nodes\\[0\\]\\) has 2 joints")


def test_vertex_index_out_of_range(tmp_path):
    g = RawGltf()
    pos = triangle(g)
    g.mesh_node({"POSITION": pos}, indices=g.array([0, 1, 3], UNSIGNED_SHORT, "SCALAR"))
    raises(g.write_glb(tmp_path / "idx.glb"), "meshes[0].primitives[0].indices", "index 3 is out of range for 3 vertices")


@pytest.mark.parametrize(
    "attribute, component_type, type_, detail",
    [
        ("POSITION", FLOAT, "VEC2", "VEC2 of FLOAT, expected VEC3"),
        ("NORMAL", UNSIGNED_BYTE, "VEC3", "VEC3 of UNSIGNED_BYTE, expected VEC3 of FLOAT"),
        ("JOINTS_0", FLOAT, "VEC4", "VEC4 of FLOAT, expected VEC4 of UNSIGNED_BYTE"),
        ("WEIGHTS_0", SHORT, "VEC4", "VEC4 of SHORT"),
        ("TEXCOORD_0", FLOAT, "VEC3", "expected VEC2"),
    ],
)
def test_wrong_accessor_type_for_semantic(tmp_path, attribute, component_type, type_, detail):
    g = RawGltf()
    pos = triangle(g)
    width = int(type_[-1]) if type_ != "SCALAR" else 1
    other = g.array(np.zeros((3, width)), component_type, type_)
    attributes = {"POSITION": pos, attribute: other}
    if attribute in ("JOINTS_0", "WEIGHTS_0"):
        attributes["WEIGHTS_0" if attribute == "JOINTS_0" else "JOINTS_0"] = g.array(
            np.zeros((3, 4)), FLOAT if attribute == "JOINTS_0" else UNSIGNED_BYTE, "VEC4")
    if attribute == "POSITION":
        attributes = {"POSITION": other}
    g.mesh_node(attributes)
    raises(g.write_glb(tmp_path / "type.glb"), f"meshes[0].primitives[0].attributes.{attribute}", detail)


def test_wrong_accessor_types_for_animation_and_skin(tmp_path):
    g = RawGltf()
    skinned_triangle(g)
    g.doc["animations"][0]["samplers"][0]["output"] = g.array(np.zeros((3, 4)), FLOAT, "VEC4")
    raises(g.write_glb(tmp_path / "out.glb"), "animations[0].samplers[0].output", "VEC4 of FLOAT, expected VEC3")
    g = RawGltf()
    skinned_triangle(g)
    g.doc["skins"][0]["inverseBindMatrices"] = g.array(np.zeros((2, 9)), FLOAT, "MAT3")
    raises(g.write_glb(tmp_path / "ibm.glb"), "skins[0].inverseBindMatrices", "MAT3 of FLOAT, expected MAT4 of FLOAT")


def test_attribute_counts_must_agree(tmp_path):
    g = RawGltf()
    pos = triangle(g)
    nrm = g.array(np.zeros((2, 3)), FLOAT, "VEC3")
    g.mesh_node({"POSITION": pos, "NORMAL": nrm})
    raises(g.write_glb(tmp_path / "counts.glb"), "meshes[0].primitives[0].attributes.NORMAL", "2 elements, POSITION has 3")


def test_unpaired_influence_sets(tmp_path):
    g = RawGltf()
    pos = triangle(g)
    j = g.array(np.zeros((3, 4)), UNSIGNED_BYTE, "VEC4")
    g.mesh_node({"POSITION": pos, "JOINTS_0": j, "JOINTS_1": j, "WEIGHTS_0": g.array(np.zeros((3, 4)), FLOAT, "VEC4")})
    raises(g.write_glb(tmp_path / "sets.glb"), "meshes[0].primitives[0].attributes", "must come in pairs")


# ---------------------------------------------------------------------------------------------------
# Extensions
# ---------------------------------------------------------------------------------------------------
def test_unknown_required_extension(tmp_path):
    g = RawGltf()
    g.mesh_node({"POSITION": triangle(g)})
    g.doc["extensionsUsed"] = ["KHR_materials_variants", "EXT_fancy"]
    g.doc["extensionsRequired"] = ["EXT_fancy"]
    err = raises(g.write_glb(tmp_path / "ext.glb"), "extensionsRequired", "EXT_fancy is not supported",
                 error=UnsupportedExtensionError)
    assert isinstance(err, ModelError)
    # Unknown optional extensions are ignored.
    g.doc["extensionsRequired"] = []
    assert read_gltf(g.write_glb(tmp_path / "ext.glb")).extensions_used == ["KHR_materials_variants", "EXT_fancy"]


@pytest.mark.parametrize("extension, module, package", [
    ("KHR_draco_mesh_compression", "DracoPy", "DracoPy"),
    ("EXT_meshopt_compression", "meshopt", "meshopt"),
])
def test_required_compression_without_its_package(tmp_path, monkeypatch, extension, module, package):
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` fail
    g = RawGltf()
    g.mesh_node({"POSITION": triangle(g)})
    g.doc["extensionsUsed"] = g.doc["extensionsRequired"] = [extension]
    raises(g.write_glb(tmp_path / "pkg.glb"), "extensionsRequired", re.escape(f"{extension} needs the Python package "
           f"'{package}' (pip install {package})"), error=UnsupportedExtensionError)


def test_optional_meshopt_without_package_or_fallback_data(tmp_path, monkeypatch):
    pytest.importorskip("meshopt")
    path = meshopt_model(tmp_path / "mo.glb", required=False)
    monkeypatch.setitem(sys.modules, "meshopt", None)
    raises(path, "bufferViews[0].extensions.EXT_meshopt_compression", re.escape("EXT_meshopt_compression needs the Python package 'meshopt' (pip install meshopt)"),
           error=UnsupportedExtensionError)


def test_texture_sampler_out_of_range(tmp_path):
    g = RawGltf()
    g.mesh_node({"POSITION": triangle(g)})
    g.add("textures", {"sampler": 2})
    raises(g.write_glb(tmp_path / "tex.glb"), "textures[0].sampler", "samplers\\[2\\], which does not exist")


def test_optional_draco_without_package_or_fallback_data(tmp_path, monkeypatch):
    pytest.importorskip("DracoPy")
    path = draco_model(tmp_path / "d.glb", required=False)
    monkeypatch.setitem(sys.modules, "DracoPy", None)
    raises(path, "meshes[0].primitives[0].extensions.KHR_draco_mesh_compression",
           re.escape("needs the Python package 'DracoPy' (pip install DracoPy)"), error=UnsupportedExtensionError)


def test_draco_count_must_match_the_accessors(tmp_path):
    pytest.importorskip("DracoPy")
    path = draco_model(tmp_path / "d.glb", count=5)
    raises(path, "meshes[0].primitives[0].extensions.KHR_draco_mesh_compression.attributes.POSITION",
           "Draco decoded 4 points, accessors\\[0\\] declares count 5")


def test_draco_huge_declared_count_is_refused_before_decoding(tmp_path):
    pytest.importorskip("DracoPy")
    path = draco_model(tmp_path / "d.glb", count=10**9)
    raises(path, "meshes[0].primitives[0].extensions.KHR_draco_mesh_compression", "declare .* bytes of decoded data")
