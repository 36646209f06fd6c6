"""Tests of the glTF reader (skeletal.io.gltf.read_gltf) on hand-built files with known contents,
and on the real models in ../shared/assets (skipped when that folder is absent).

The files are built byte by byte with :class:`RawGltf` below, so that every accessor layout the spec
allows (strides, offsets, padding, sparse...) can be written exactly; ``test_gltf_errors.py`` uses the
same helper to make malformed files.
"""

from __future__ import annotations

import base64
import json
import struct
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from skeletal.io.gltf import read_gltf
from fixtures.shared_assets import ASSETS, TRUTH

BYTE, UNSIGNED_BYTE, SHORT, UNSIGNED_SHORT, UNSIGNED_INT, FLOAT = 5120, 5121, 5122, 5123, 5125, 5126
DTYPES = {BYTE: "<i1", UNSIGNED_BYTE: "<u1", SHORT: "<i2", UNSIGNED_SHORT: "<u2", UNSIGNED_INT: "<u4", FLOAT: "<f4"}

REPO = Path(__file__).resolve().parents[1]
needs_assets = pytest.mark.skipif(not ASSETS.is_dir(), reason=f"shared test models not found at {ASSETS}")


# ---------------------------------------------------------------------------------------------------
# A raw glTF builder: exact bytes, no conventions imposed
# ---------------------------------------------------------------------------------------------------
class RawGltf:
    """A glTF document and one binary buffer, built piece by piece.

    ``view()`` appends bytes as a bufferView (optionally after ``lead`` filler bytes, so the view's
    byteOffset is not 0 or 4-aligned by accident); ``accessor()`` describes data in a view; ``add()``
    appends any top-level object. ``write_glb``/``write_gltf`` produce the file.
    """

    def __init__(self) -> None:
        self.doc: dict[str, Any] = {"asset": {"version": "2.0", "generator": "test_gltf_reader"}}
        self.bin = bytearray()
        self.extra_buffers: list[dict] = []  # written after buffer 0 (the BIN chunk / .bin / data URI)
        self.declared_length: int | None = None  # buffer 0's byteLength in the JSON, if not the truth

    def add(self, key: str, obj: dict) -> int:
        items = self.doc.setdefault(key, [])
        items.append(obj)
        return len(items) - 1

    def append(self, data: bytes, *, lead: int = 0) -> int:
        """Append ``data`` to buffer 0 at a 4-byte boundary (+ ``lead`` filler bytes); its byteOffset."""
        self.bin += b"\x00" * ((-len(self.bin)) % 4) + b"\xee" * lead
        offset = len(self.bin)
        self.bin += data
        return offset

    def view(self, data: bytes, *, stride: int | None = None, lead: int = 0) -> int:
        view: dict[str, Any] = {"buffer": 0, "byteOffset": self.append(data, lead=lead), "byteLength": len(data)}
        if stride is not None:
            view["byteStride"] = stride
        return self.add("bufferViews", view)

    def accessor(self, view: int | None, component_type: int, type_: str, count: int, **extra: Any) -> int:
        acc: dict[str, Any] = {"componentType": component_type, "type": type_, "count": count}
        if view is not None:
            acc["bufferView"] = view
        acc.update(extra)
        return self.add("accessors", acc)

    def array(self, values: Any, component_type: int, type_: str, **extra: Any) -> int:
        """Tightly packed ``values`` in their own view, and an accessor over them."""
        a = np.asarray(values, dtype=DTYPES[component_type])
        count = len(a)
        return self.accessor(self.view(a.tobytes()), component_type, type_, count, **extra)

    def mesh_node(self, attributes: dict[str, int], **primitive: Any) -> int:
        """A mesh with one primitive, and a node showing it (in the default scene); returns the mesh."""
        mesh = self.add("meshes", {"primitives": [{"attributes": attributes, **primitive}]})
        node = self.add("nodes", {"mesh": mesh})
        self.doc["scenes"] = [{"nodes": [node]}]
        self.doc["scene"] = 0
        return mesh

    # -- output -----------------------------------------------------------------------------------
    def _json(self, uri: str | None) -> bytes:
        doc = dict(self.doc)
        if self.bin:
            buffer: dict[str, Any] = {"byteLength": self.declared_length or len(self.bin)}
            if uri is not None:
                buffer["uri"] = uri
            doc["buffers"] = [buffer, *self.extra_buffers]
        return json.dumps(doc).encode()

    def glb_bytes(self) -> bytes:
        js = self._json(None)
        js += b" " * ((-len(js)) % 4)
        body = struct.pack("<II", len(js), 0x4E4F534A) + js
        if self.bin:
            data = bytes(self.bin) + b"\x00" * ((-len(self.bin)) % 4)
            body += struct.pack("<II", len(data), 0x004E4942) + data
        return b"glTF" + struct.pack("<II", 2, 12 + len(body)) + body

    def write_glb(self, path: Path) -> Path:
        path.write_bytes(self.glb_bytes())
        return path

    def write_gltf(self, path: Path, *, embed: bool = True, uri: str | None = None) -> Path:
        """``embed``: buffer as a data URI; else written to ``uri`` (default ``<stem>.bin``) beside it."""
        if embed:
            buffer_uri = "data:application/octet-stream;base64," + base64.b64encode(bytes(self.bin)).decode()
        else:
            buffer_uri = uri or path.with_suffix(".bin").name
            (path.parent / buffer_uri).write_bytes(bytes(self.bin))
        path.write_bytes(self._json(buffer_uri))
        return path


def triangle(g: RawGltf, **extra: Any) -> int:
    """POSITION of 3 vertices, FLOAT VEC3."""
    return g.array([[0, 0, 0], [1, 0, 0], [0, 1, 0]], FLOAT, "VEC3", **extra)


def only_primitive(doc):
    return doc.meshes[0].primitives[0]


# ---------------------------------------------------------------------------------------------------
# Accessor forms
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("component_type", [BYTE, UNSIGNED_BYTE, SHORT, UNSIGNED_SHORT, UNSIGNED_INT, FLOAT])
def test_every_component_type_plain(tmp_path, component_type):
    values = {BYTE: [-128, 5, 127], UNSIGNED_BYTE: [0, 7, 255], SHORT: [-32768, 9, 32767],
              UNSIGNED_SHORT: [0, 11, 65535], UNSIGNED_INT: [0, 13, 4_000_000_000], FLOAT: [-1.5, 0.25, 3e6]}
    g = RawGltf()
    pos = triangle(g)
    custom = g.array(values[component_type], component_type, "SCALAR")
    g.mesh_node({"POSITION": pos, "_VALUE": custom})
    doc = read_gltf(g.write_glb(tmp_path / "types.glb"))
    got = only_primitive(doc).attributes["_VALUE"]
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, np.array(values[component_type], dtype=np.float32))


@pytest.mark.parametrize(
    "component_type, stored, expected",
    [
        (BYTE, [-128, -127, 0, 64, 127], [-1.0, -1.0, 0.0, 64 / 127, 1.0]),
        (UNSIGNED_BYTE, [0, 51, 128, 255], [0.0, 0.2, 128 / 255, 1.0]),
        (SHORT, [-32768, -32767, 0, 1000, 32767], [-1.0, -1.0, 0.0, 1000 / 32767, 1.0]),
        (UNSIGNED_SHORT, [0, 13107, 65535], [0.0, 0.2, 1.0]),
    ],
)
def test_normalized_integers_decode_per_spec(tmp_path, component_type, stored, expected):
    g = RawGltf()
    n = len(stored)
    pos = g.array(np.zeros((n, 3)), FLOAT, "VEC3")
    custom = g.array(stored, component_type, "SCALAR", normalized=True)
    g.mesh_node({"POSITION": pos, "_NORM": custom})
    got = only_primitive(read_gltf(g.write_glb(tmp_path / "norm.glb"))).attributes["_NORM"]
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, np.array(expected, dtype=np.float32), rtol=0, atol=1e-7)


def test_quantized_position_and_normal(tmp_path):
    """KHR_mesh_quantization: SHORT normalized POSITION (padded to 8 bytes), BYTE normalized NORMAL,
    and a plain (not normalized) UNSIGNED_SHORT POSITION that is just cast."""
    g = RawGltf()
    shorts = np.array([[32767, 0, -32767, 0], [0, 16384, 0, 0], [-32768, 0, 0, 0]], "<i2")
    pos = g.accessor(g.view(shorts.tobytes(), stride=8), SHORT, "VEC3", 3, normalized=True)
    bytes_ = np.array([[127, 0, 0, 0], [0, -127, 0, 0], [0, 0, 127, 0]], "<i1")
    nrm = g.accessor(g.view(bytes_.tobytes(), stride=4), BYTE, "VEC3", 3, normalized=True)
    g.mesh_node({"POSITION": pos, "NORMAL": nrm})
    g.doc["extensionsUsed"] = g.doc["extensionsRequired"] = ["KHR_mesh_quantization"]
    prim = only_primitive(read_gltf(g.write_glb(tmp_path / "q.glb")))
    np.testing.assert_allclose(prim.positions, [[1, 0, -1], [0, 16384 / 32767, 0], [-1, 0, 0]], atol=1e-7)
    np.testing.assert_array_equal(prim.normals, [[1, 0, 0], [0, -1, 0], [0, 0, 1]])

    g2 = RawGltf()
    pos2 = g2.array([[1, 2, 3], [400, 500, 600], [65535, 0, 7]], UNSIGNED_SHORT, "VEC3")
    g2.mesh_node({"POSITION": pos2})
    prim2 = only_primitive(read_gltf(g2.write_glb(tmp_path / "q2.glb")))
    np.testing.assert_array_equal(prim2.positions, [[1, 2, 3], [400, 500, 600], [65535, 0, 7]])
    assert prim2.positions.dtype == np.float32


def test_interleaved_byte_stride_and_offsets(tmp_path):
    """POSITION, NORMAL, TEXCOORD_0 interleaved in one view (stride 32), the view itself at an odd
    place in the buffer (byteOffset) and the accessors at byteOffset 0 / 12 / 24 within it."""
    positions = np.arange(12, dtype=np.float32).reshape(4, 3)
    normals = -np.arange(12, dtype=np.float32).reshape(4, 3)
    uvs = np.arange(8, dtype=np.float32).reshape(4, 2) / 8
    block = np.zeros((4, 8), np.float32)
    block[:, 0:3], block[:, 3:6], block[:, 6:8] = positions, normals, uvs
    g = RawGltf()
    g.view(b"\x01\x02\x03\x04\x05")  # unrelated data first, so the interleaved view has a byteOffset
    view = g.view(block.tobytes(), stride=32, lead=8)
    pos = g.accessor(view, FLOAT, "VEC3", 4)
    nrm = g.accessor(view, FLOAT, "VEC3", 4, byteOffset=12)
    uv = g.accessor(view, FLOAT, "VEC2", 4, byteOffset=24)
    g.mesh_node({"POSITION": pos, "NORMAL": nrm, "TEXCOORD_0": uv})
    assert g.doc["bufferViews"][view]["byteOffset"] % 4 == 0 and g.doc["bufferViews"][view]["byteOffset"] > 8
    prim = only_primitive(read_gltf(g.write_glb(tmp_path / "interleaved.glb")))
    np.testing.assert_array_equal(prim.positions, positions)
    np.testing.assert_array_equal(prim.normals, normals)
    np.testing.assert_array_equal(prim.attributes["TEXCOORD_0"], uvs)
    # Strided float data comes back as a strided view of the file's bytes, not a copy.
    assert prim.positions.strides == (32, 4) and not prim.positions.flags.owndata


def test_accessor_and_view_byte_offset_with_integers(tmp_path):
    """An UNSIGNED_SHORT accessor at byteOffset 6 inside a view that starts at a non-zero byteOffset."""
    data = np.array([0xAAAA, 0xBBBB, 0xCCCC, 10, 20, 30], "<u2").tobytes()
    g = RawGltf()
    pos = triangle(g)
    view = g.view(data, lead=4)
    idx = g.accessor(view, UNSIGNED_SHORT, "SCALAR", 3, byteOffset=6)
    g.mesh_node({"POSITION": pos, "_IDS": idx})
    got = only_primitive(read_gltf(g.write_glb(tmp_path / "offsets.glb"))).attributes["_IDS"]
    np.testing.assert_array_equal(got, [10, 20, 30])


def test_glb_float_attributes_are_zero_copy(tmp_path):
    g = RawGltf()
    pos = triangle(g)
    g.mesh_node({"POSITION": pos})
    prim = only_primitive(read_gltf(g.write_glb(tmp_path / "view.glb")))
    assert prim.positions.dtype == np.float32
    assert not prim.positions.flags.owndata and not prim.positions.flags.writeable
    assert prim.positions.flags.c_contiguous


def test_indices_all_types(tmp_path):
    for component_type in (UNSIGNED_BYTE, UNSIGNED_SHORT, UNSIGNED_INT):
        g = RawGltf()
        pos = triangle(g)
        idx = g.array([2, 1, 0], component_type, "SCALAR")
        g.mesh_node({"POSITION": pos}, indices=idx)
        prim = only_primitive(read_gltf(g.write_glb(tmp_path / f"idx{component_type}.glb")))
        assert prim.indices.dtype == np.uint32
        np.testing.assert_array_equal(prim.indices, [2, 1, 0])
    g = RawGltf()
    g.mesh_node({"POSITION": triangle(g)})
    assert only_primitive(read_gltf(g.write_glb(tmp_path / "noidx.glb"))).indices is None


def test_sparse_over_buffer_view(tmp_path):
    base = np.arange(15, dtype=np.float32).reshape(5, 3)
    g = RawGltf()
    sparse_idx = g.view(np.array([1, 4], "<u1").tobytes())
    sparse_val = g.view(np.array([[-1, -2, -3], [-4, -5, -6]], "<f4").tobytes())
    pos = g.accessor(g.view(base.tobytes()), FLOAT, "VEC3", 5, sparse={
        "count": 2,
        "indices": {"bufferView": sparse_idx, "componentType": UNSIGNED_BYTE},
        "values": {"bufferView": sparse_val},
    })
    g.mesh_node({"POSITION": pos})
    got = only_primitive(read_gltf(g.write_glb(tmp_path / "sparse.glb"))).positions
    expected = base.copy()
    expected[1], expected[4] = [-1, -2, -3], [-4, -5, -6]
    np.testing.assert_array_equal(got, expected)


def test_sparse_without_buffer_view_is_over_zeros(tmp_path):
    """The usual morph target: no bufferView, a few vertices moved, with byteOffsets on the parts."""
    g = RawGltf()
    pos = g.array(np.ones((6, 3)), FLOAT, "VEC3")
    idx_view = g.view(b"\xff\xff" + np.array([0, 3, 5], "<u2").tobytes())
    val_view = g.view(b"\x00" * 4 + np.array([[1, 0, 0], [0, 2, 0], [0, 0, 3]], "<f4").tobytes())
    delta = g.accessor(None, FLOAT, "VEC3", 6, sparse={
        "count": 3,
        "indices": {"bufferView": idx_view, "byteOffset": 2, "componentType": UNSIGNED_SHORT},
        "values": {"bufferView": val_view, "byteOffset": 4},
    })
    g.mesh_node({"POSITION": pos}, targets=[{"POSITION": delta}])
    g.doc["meshes"][0]["weights"] = [0.5]
    prim = only_primitive(read_gltf(g.write_glb(tmp_path / "sparse0.glb")))
    expected = np.zeros((6, 3), np.float32)
    expected[0], expected[3], expected[5] = [1, 0, 0], [0, 2, 0], [0, 0, 3]
    np.testing.assert_array_equal(prim.targets[0].position, expected)


def test_accessor_without_buffer_view_is_zeros(tmp_path):
    g = RawGltf()
    pos = triangle(g)
    zeros = g.accessor(None, FLOAT, "VEC2", 3)
    g.mesh_node({"POSITION": pos, "TEXCOORD_0": zeros})
    got = only_primitive(read_gltf(g.write_glb(tmp_path / "zeros.glb"))).attributes["TEXCOORD_0"]
    np.testing.assert_array_equal(got, np.zeros((3, 2)))


def test_mat4_inverse_bind_matrices_are_row_major(tmp_path):
    rng = np.random.default_rng(1)
    ibms = rng.normal(size=(3, 4, 4)).astype(np.float32)
    ibms[:, 3] = [0, 0, 0, 1]
    g = RawGltf()
    # glTF stores each matrix column-major: the transpose, flattened.
    acc = g.array(ibms.transpose(0, 2, 1).reshape(3, 16), FLOAT, "MAT4")
    joints = [g.add("nodes", {}) for _ in range(3)]
    g.add("skins", {"joints": joints, "inverseBindMatrices": acc})
    g.add("skins", {"joints": joints[:2]})
    doc = read_gltf(g.write_glb(tmp_path / "ibm.glb"))
    assert doc.skins[0].inverse_bind.dtype == np.float64 and doc.skins[0].inverse_bind.shape == (3, 4, 4)
    np.testing.assert_array_equal(doc.skins[0].inverse_bind, ibms.astype(np.float64))
    np.testing.assert_array_equal(doc.skins[1].inverse_bind, np.tile(np.eye(4), (2, 1, 1)))
    np.testing.assert_array_equal(doc.skins[0].joints, [0, 1, 2])


def test_mat2_mat3_column_padding(tmp_path):
    """Matrix columns start on 4-byte boundaries: MAT2 of BYTE is 8 bytes an element (2 bytes of
    padding per column), MAT3 of BYTE 12 bytes, MAT3 of SHORT 24 bytes. Padding is filled with
    junk, which must not show up."""
    pad1, pad2 = b"\x55", b"\x55\x55"
    m2 = [[[1, 2], [3, 4]], [[-5, 6], [7, -8]]]  # [element][column][row]
    m3b = [[[1, 2, 3], [4, 5, 6], [7, 8, 9]], [[-1, -2, -3], [-4, -5, -6], [-7, -8, -9]]]
    m3s = [[[100, 200, 300], [400, 500, 600], [700, 800, 900]], [[-100, 0, 1], [2, 3, 4], [5, 6, -7]]]
    g = RawGltf()
    pos = g.array(np.zeros((2, 3)), FLOAT, "VEC3")
    raw2 = b"".join(struct.pack("<2b", *col) + pad2 for element in m2 for col in element)
    raw3b = b"".join(struct.pack("<3b", *col) + pad1 for element in m3b for col in element)
    raw3s = b"".join(struct.pack("<3h", *col) + pad2 for element in m3s for col in element)
    assert len(raw2) == 2 * 8 and len(raw3b) == 2 * 12 and len(raw3s) == 2 * 24
    a2 = g.accessor(g.view(raw2), BYTE, "MAT2", 2)
    a3b = g.accessor(g.view(raw3b), BYTE, "MAT3", 2)
    a3s = g.accessor(g.view(raw3s), SHORT, "MAT3", 2)
    a2n = g.accessor(g.view(raw2), BYTE, "MAT2", 2, normalized=True)
    g.mesh_node({"POSITION": pos, "_M2": a2, "_M3B": a3b, "_M3S": a3s, "_M2N": a2n})
    attrs = only_primitive(read_gltf(g.write_glb(tmp_path / "mats.glb"))).attributes
    np.testing.assert_array_equal(attrs["_M2"], np.array(m2, np.float32))
    np.testing.assert_array_equal(attrs["_M3B"], np.array(m3b, np.float32))
    np.testing.assert_array_equal(attrs["_M3S"], np.array(m3s, np.float32))
    np.testing.assert_allclose(attrs["_M2N"], np.array(m2, np.float32) / 127, atol=1e-7)


# ---------------------------------------------------------------------------------------------------
# Containers and URIs
# ---------------------------------------------------------------------------------------------------
def _small_skinned(g: RawGltf) -> None:
    pos = g.array([[0, 0, 0], [1, 0, 0], [0, 1, 0]], FLOAT, "VEC3")
    joints = g.array([[0, 1, 0, 0]] * 3, UNSIGNED_BYTE, "VEC4")
    weights = g.array([[0.5, 0.5, 0, 0]] * 3, FLOAT, "VEC4")
    times = g.array([0.0, 1.0], FLOAT, "SCALAR")
    values = g.array([[0, 0, 0], [0, 2, 0]], FLOAT, "VEC3")
    g.add("meshes", {"primitives": [{"attributes": {"POSITION": pos, "JOINTS_0": joints, "WEIGHTS_0": weights}}]})
    g.add("nodes", {"name": "root", "children": [1, 2]})
    g.add("nodes", {"name": "bone", "translation": [0, 1, 0], "children": [3]})
    g.add("nodes", {"name": "skinned", "mesh": 0, "skin": 0})
    g.add("nodes", {"name": "tip"})
    g.add("skins", {"joints": [1, 3]})
    g.add("animations", {"name": "lift", "channels": [{"sampler": 0, "target": {"node": 1, "path": "translation"}}],
                         "samplers": [{"input": times, "output": values}]})
    g.doc["scenes"] = [{"nodes": [0]}]
    g.doc["scene"] = 0


def _summary(doc) -> tuple:
    prim = only_primitive(doc)
    return (prim.positions.tolist(), prim.joints.tolist(), prim.weights.tolist(),
            [n.parent for n in doc.nodes], doc.animations[0].channels[0].values.tolist())


def test_glb_data_uri_and_external_bin_read_the_same(tmp_path):
    g = RawGltf()
    _small_skinned(g)
    glb = read_gltf(g.write_glb(tmp_path / "m.glb"))
    embedded = read_gltf(g.write_gltf(tmp_path / "embedded.gltf", embed=True))
    external = read_gltf(g.write_gltf(tmp_path / "external.gltf", embed=False))
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "my data.bin").write_bytes(bytes(g.bin))
    g2 = RawGltf()
    g2.doc, g2.bin = g.doc, g.bin
    (tmp_path / "encoded.gltf").write_bytes(g2._json("sub/my%20data.bin"))  # percent-decoded per RFC 3986
    encoded = read_gltf(tmp_path / "encoded.gltf")
    assert _summary(glb) == _summary(embedded) == _summary(external) == _summary(encoded)
    assert glb.nodes[1].parent == 0 and glb.nodes[3].parent == 1 and glb.scenes == [[0]] and glb.scene == 0
    assert only_primitive(glb).joints.dtype == np.uint32
    np.testing.assert_array_equal(only_primitive(glb).joints, [[0, 1, 0, 0]] * 3)


def test_base_dir_opt_in_resolves_against_it(tmp_path):
    g = RawGltf()
    _small_skinned(g)
    (tmp_path / "buffers").mkdir()
    (tmp_path / "models").mkdir()
    (tmp_path / "buffers" / "b.bin").write_bytes(bytes(g.bin))
    (tmp_path / "models" / "m.gltf").write_bytes(g._json("buffers/b.bin"))
    doc = read_gltf(tmp_path / "models" / "m.gltf", base_dir=tmp_path)
    assert _summary(doc)[0] == [[0, 0, 0], [1, 0, 0], [0, 1, 0]]


# ---------------------------------------------------------------------------------------------------
# Nodes, skins, morph targets, animations, materials
# ---------------------------------------------------------------------------------------------------
def _quat_to_matrix(q: np.ndarray) -> np.ndarray:
    x, y, z, w = q
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


def _compose(t, q, s) -> np.ndarray:
    m = np.eye(4)
    m[:3, :3] = _quat_to_matrix(q) * s  # R @ diag(S)
    m[:3, 3] = t
    return m


@pytest.mark.parametrize("scale", [(1, 1, 1), (2, 0.5, 3), (-1, 2, 2), (1, -1, -1), (0, 1, 1)])
def test_node_matrix_is_kept_and_decomposed(tmp_path, scale):
    rng = np.random.default_rng(7)
    q = rng.normal(size=4)
    q /= np.linalg.norm(q)
    t = np.array([1.5, -2.0, 0.25])
    m = _compose(t, q, np.array(scale, float))
    g = RawGltf()
    g.add("nodes", {"matrix": m.T.reshape(16).tolist()})  # column-major in the file
    node = read_gltf(g.write_gltf(tmp_path / "matrix.gltf")).nodes[0]
    np.testing.assert_allclose(node.matrix, m, atol=1e-12)
    np.testing.assert_allclose(node.translation, t)
    assert abs(np.linalg.norm(node.rotation) - 1) < 1e-12
    # The decomposition reproduces the matrix (zero scale: the rotation is arbitrary there, so
    # compare only the image of the matrix).
    np.testing.assert_allclose(_compose(node.translation, node.rotation, node.scale), m, atol=1e-9)
    if 0 not in scale:
        np.testing.assert_allclose(np.abs(node.scale), np.abs(scale), atol=1e-12)


def test_trs_defaults_and_values(tmp_path):
    g = RawGltf()
    g.add("nodes", {"children": [1]})
    g.add("nodes", {"translation": [1, 2, 3], "rotation": [0, 0, 0.6, 0.8], "scale": [2, 2, 2], "name": "b"})
    doc = read_gltf(g.write_gltf(tmp_path / "trs.gltf"))
    a, b = doc.nodes
    np.testing.assert_array_equal(a.translation, [0, 0, 0])
    np.testing.assert_array_equal(a.rotation, [0, 0, 0, 1])
    np.testing.assert_array_equal(a.scale, [1, 1, 1])
    assert a.matrix is None and a.parent == -1 and b.parent == 0 and b.name == "b"
    np.testing.assert_array_equal(b.rotation, [0, 0, 0.6, 0.8])


def test_two_influence_sets_are_concatenated_not_renormalised(tmp_path):
    g = RawGltf()
    pos = g.array(np.zeros((2, 3)), FLOAT, "VEC3")
    j0 = g.array([[0, 1, 2, 3], [4, 5, 6, 7]], UNSIGNED_BYTE, "VEC4")
    j1 = g.array([[8, 9, 10, 11], [0, 0, 0, 0]], UNSIGNED_SHORT, "VEC4")
    w0 = g.array([[0.1, 0.1, 0.1, 0.1], [0.5, 0.5, 0, 0]], FLOAT, "VEC4")
    w1 = g.array([[51, 51, 0, 0], [0, 0, 0, 0]], UNSIGNED_BYTE, "VEC4", normalized=True)
    g.mesh_node({"POSITION": pos, "JOINTS_0": j0, "WEIGHTS_0": w0, "JOINTS_1": j1, "WEIGHTS_1": w1})
    g.doc["nodes"][0]["skin"] = g.add("skins", {"joints": [g.add("nodes", {}) for _ in range(12)]})
    prim = only_primitive(read_gltf(g.write_glb(tmp_path / "8.glb")))
    assert prim.joints.shape == (2, 8) and prim.joints.dtype == np.uint32 and prim.influence_count == 8
    np.testing.assert_array_equal(prim.joints, [[0, 1, 2, 3, 8, 9, 10, 11], [4, 5, 6, 7, 0, 0, 0, 0]])
    assert prim.weights.dtype == np.float32
    np.testing.assert_allclose(prim.weights, [[0.1, 0.1, 0.1, 0.1, 0.2, 0.2, 0, 0], [0.5, 0.5, 0, 0, 0, 0, 0, 0]],
                               atol=1e-7)


def test_morph_targets_and_weights_channel(tmp_path):
    g = RawGltf()
    pos = g.array(np.zeros((3, 3)), FLOAT, "VEC3")
    nrm = g.array([[0, 0, 1]] * 3, FLOAT, "VEC3")
    d0 = g.array([[1, 0, 0]] * 3, FLOAT, "VEC3")
    d1 = g.array([[0, 127, 0], [0, 0, 0], [0, -127, 0]], BYTE, "VEC3", normalized=True)
    n0 = g.array([[0, 0.5, 0]] * 3, FLOAT, "VEC3")
    mesh = g.mesh_node({"POSITION": pos, "NORMAL": nrm},
                       targets=[{"POSITION": d0, "NORMAL": n0}, {"POSITION": d1}])
    g.doc["meshes"][mesh].update(weights=[0.25, 0.75], extras={"targetNames": ["smile", "blink"]})
    g.doc["nodes"][0]["weights"] = [1.0, 0.0]
    times = g.array([0.0, 0.5, 1.0], FLOAT, "SCALAR")
    values = g.array([0, 1, 0.5, 0.5, 1, 0], FLOAT, "SCALAR")  # K=3 keys x 2 targets
    g.add("animations", {"channels": [{"sampler": 0, "target": {"node": 0, "path": "weights"}}],
                         "samplers": [{"input": times, "output": values, "interpolation": "STEP"}]})
    doc = read_gltf(g.write_glb(tmp_path / "morph.glb"))
    prim = only_primitive(doc)
    assert len(prim.targets) == 2
    np.testing.assert_array_equal(prim.targets[0].position, [[1, 0, 0]] * 3)
    np.testing.assert_array_equal(prim.targets[0].normal, [[0, 0.5, 0]] * 3)
    assert prim.targets[0].tangent is None and prim.targets[1].normal is None
    np.testing.assert_array_equal(prim.targets[1].position, [[0, 1, 0], [0, 0, 0], [0, -1, 0]])
    np.testing.assert_array_equal(doc.meshes[0].weights, [0.25, 0.75])
    assert doc.meshes[0].target_names == ["smile", "blink"]
    np.testing.assert_array_equal(doc.nodes[0].weights, [1.0, 0.0])
    channel = doc.animations[0].channels[0]
    assert channel.path == "weights" and channel.interpolation == "STEP"
    np.testing.assert_array_equal(channel.values, [[0, 1], [0.5, 0.5], [1, 0]])


def test_animation_channels_all_interpolations(tmp_path):
    g = RawGltf()
    g.add("nodes", {})
    times = g.array([0.0, 1.0], FLOAT, "SCALAR")
    trans = g.array([[0, 0, 0], [1, 2, 3]], FLOAT, "VEC3")
    # Rotation stored as normalised SHORT: decoded c / 32767.
    rot = g.array([[0, 0, 0, 32767], [0, 0, 32767, 0]], SHORT, "VEC4", normalized=True)
    cubic = g.array(np.arange(18).reshape(6, 3), FLOAT, "VEC3")  # in, value, out per key
    samplers = [
        {"input": times, "output": trans},  # LINEAR by default
        {"input": times, "output": rot, "interpolation": "STEP"},
        {"input": times, "output": cubic, "interpolation": "CUBICSPLINE"},
    ]
    channels = [
        {"sampler": 0, "target": {"node": 0, "path": "translation"}},
        {"sampler": 1, "target": {"node": 0, "path": "rotation"}},
        {"sampler": 2, "target": {"node": 0, "path": "scale"}},
        {"sampler": 0, "target": {"path": "translation"}},  # no node: skipped, as the spec allows
    ]
    g.add("animations", {"name": "clip", "channels": channels, "samplers": samplers})
    doc = read_gltf(g.write_glb(tmp_path / "anim.glb"))
    anim = doc.animations[0]
    assert anim.name == "clip" and len(anim.channels) == 3
    t, r, s = anim.channels
    assert (t.interpolation, r.interpolation, s.interpolation) == ("LINEAR", "STEP", "CUBICSPLINE")
    assert t.times.dtype == np.float32 and t.times.shape == (2,)
    np.testing.assert_array_equal(t.values, [[0, 0, 0], [1, 2, 3]])
    np.testing.assert_array_equal(r.values, [[0, 0, 0, 1], [0, 0, 1, 0]])
    assert s.values.shape == (6, 3) and s.values.dtype == np.float32


def test_materials_textures_and_images(tmp_path):
    png = b"\x89PNG\r\n\x1a\n" + b"fake png body"
    g = RawGltf()
    g.mesh_node({"POSITION": triangle(g)})
    g.add("images", {"bufferView": g.view(png), "mimeType": "image/png", "name": "embedded"})
    (tmp_path / "tex").mkdir()
    (tmp_path / "tex" / "a.jpg").write_bytes(b"\xff\xd8\xff jpeg")
    g.add("images", {"uri": "tex/a.jpg"})
    g.add("images", {"uri": "data:image/png;base64," + base64.b64encode(png).decode()})
    g.add("images", {"uri": "missing.png"})  # not fatal: images are optional for animation
    g.add("samplers", {})
    g.add("textures", {"source": 1, "sampler": 0})
    g.add("materials", {"name": "skin", "doubleSided": True,
                        "pbrMetallicRoughness": {"baseColorFactor": [1, 0.5, 0.25, 1],
                                                 "baseColorTexture": {"index": 0, "texCoord": 1}}})
    g.add("materials", {})
    g.doc["meshes"][0]["primitives"][0]["material"] = 0
    with pytest.warns(UserWarning, match="missing.png"):
        doc = read_gltf(g.write_glb(tmp_path / "mat.glb"))
    embedded, jpg, data_uri, missing = doc.images
    assert embedded.data == png and embedded.mime_type == "image/png" and embedded.name == "embedded"
    assert jpg.data == b"\xff\xd8\xff jpeg" and jpg.mime_type == "image/jpeg"
    assert data_uri.data == png and data_uri.mime_type == "image/png"
    assert missing.data is None
    skin, plain = doc.materials
    np.testing.assert_array_equal(skin.base_color_factor, [1, 0.5, 0.25, 1])
    assert skin.base_color_texture == 1 and skin.base_color_texcoord == 1 and skin.double_sided
    assert plain.base_color_texture is None and not plain.double_sided
    np.testing.assert_array_equal(plain.base_color_factor, [1, 1, 1, 1])
    assert only_primitive(doc).material == 0


def test_deep_node_chain_loads_without_recursion(tmp_path):
    depth = 10_000
    g = RawGltf()
    for i in range(depth):
        g.add("nodes", {"children": [i + 1]} if i + 1 < depth else {})
    g.doc["scenes"] = [{"nodes": [0]}]
    doc = read_gltf(g.write_gltf(tmp_path / "chain.gltf"))
    assert len(doc.nodes) == depth and doc.nodes[-1].parent == depth - 2 and doc.nodes[0].parent == -1


MESHOPT_POSITIONS = np.random.default_rng(3).random((30, 3)).astype(np.float32)
MESHOPT_INDICES = np.arange(30, dtype=np.uint32)[::-1].copy()


def meshopt_model(path: Path, *, fallback_uri: str | None = None, required: bool = True) -> Path:
    """30 positions (ATTRIBUTES, stride 16) and 30 indices (TRIANGLES), EXT_meshopt_compression-coded
    into buffer 0. Their fallback buffer 1 has no data, or - with ``fallback_uri`` - the uncompressed
    bytes are written to that file beside ``path``."""
    import meshopt

    padded = np.zeros((30, 4), np.float32)
    padded[:, :3] = MESHOPT_POSITIONS
    plain = padded.tobytes() + MESHOPT_INDICES.tobytes()
    enc_pos = meshopt.encode_gltf_buffer(padded.view(np.uint8).reshape(30, 16), "ATTRIBUTES")
    enc_idx = meshopt.encode_gltf_buffer(MESHOPT_INDICES, "TRIANGLES")
    g = RawGltf()
    if fallback_uri is None:
        g.extra_buffers.append({"byteLength": len(plain), "extensions": {"EXT_meshopt_compression": {"fallback": True}}})
    else:
        g.extra_buffers.append({"byteLength": len(plain), "uri": fallback_uri})
        (path.parent / fallback_uri).write_bytes(plain)

    def compressed_view(encoded: bytes, offset: int, length: int, stride: int, mode: str, **view: Any) -> int:
        ext = {"buffer": 0, "byteOffset": g.append(encoded), "byteLength": len(encoded),
               "byteStride": stride, "count": 30, "mode": mode}
        return g.add("bufferViews", {"buffer": 1, "byteOffset": offset, "byteLength": length, **view,
                                     "extensions": {"EXT_meshopt_compression": ext}})

    pos = g.accessor(compressed_view(enc_pos, 0, 480, 16, "ATTRIBUTES", byteStride=16), FLOAT, "VEC3", 30)
    idx = g.accessor(compressed_view(enc_idx, 480, 120, 4, "TRIANGLES"), UNSIGNED_INT, "SCALAR", 30)
    g.mesh_node({"POSITION": pos}, indices=idx)
    g.doc["extensionsUsed"] = ["EXT_meshopt_compression"]
    if required:
        g.doc["extensionsRequired"] = ["EXT_meshopt_compression"]
    return g.write_glb(path)


def _check_meshopt_primitive(prim) -> None:
    np.testing.assert_array_equal(prim.positions, MESHOPT_POSITIONS)
    # The TRIANGLES codec may rotate a triangle's corners (keeping its winding): compare canonically.
    np.testing.assert_array_equal(_canonical_triangles(prim.indices), _canonical_triangles(MESHOPT_INDICES))


def test_meshopt_compressed_views_decode(tmp_path):
    """EXT_meshopt_compression with a fallback buffer that has no data: positions (ATTRIBUTES),
    indices (TRIANGLES) decoded from the compressed buffer."""
    pytest.importorskip("meshopt")
    _check_meshopt_primitive(only_primitive(read_gltf(meshopt_model(tmp_path / "mo.glb"))))


def test_meshopt_fallback_buffer_is_not_read_when_decoding(tmp_path):
    pytest.importorskip("meshopt")
    path = meshopt_model(tmp_path / "mo.glb", fallback_uri="fallback.bin", required=False)
    (tmp_path / "fallback.bin").unlink()  # would fail if it were read
    _check_meshopt_primitive(only_primitive(read_gltf(path)))


def test_meshopt_optional_without_package_uses_the_fallback(tmp_path, monkeypatch):
    pytest.importorskip("meshopt")
    path = meshopt_model(tmp_path / "mo.glb", fallback_uri="fallback.bin", required=False)
    monkeypatch.setitem(sys.modules, "meshopt", None)  # `import meshopt` now fails
    prim = only_primitive(read_gltf(path))
    np.testing.assert_array_equal(prim.positions, MESHOPT_POSITIONS)
    np.testing.assert_array_equal(prim.indices, MESHOPT_INDICES)  # the fallback has them verbatim


DRACO_POSITIONS = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]], np.float32)
DRACO_COLORS = np.array([[0, 255, 51, 255], [255, 0, 0, 255], [0, 0, 255, 0], [10, 20, 30, 40]], np.uint8)
DRACO_FACES = np.array([[0, 1, 2], [1, 3, 2]], np.uint32)


def draco_model(path: Path, *, fallback: bool = False, required: bool = True, count: int = 4) -> Path:
    """A quad whose POSITION and COLOR_0 (UNSIGNED_BYTE normalized) are Draco-compressed; with
    ``fallback``, the accessors also have plain bufferViews (for readers without Draco)."""
    import DracoPy

    stream = DracoPy.encode(DRACO_POSITIONS, DRACO_FACES, preserve_order=True, colors=DRACO_COLORS)
    ids = {a["attribute_type"]: a["unique_id"] for a in DracoPy.decode(stream).attributes}  # 0: POSITION, 2: COLOR
    g = RawGltf()
    if fallback:
        pos = g.array(DRACO_POSITIONS, FLOAT, "VEC3")
        col = g.array(DRACO_COLORS, UNSIGNED_BYTE, "VEC4", normalized=True)
        idx = g.array(DRACO_FACES.reshape(-1), UNSIGNED_SHORT, "SCALAR")
    else:
        pos = g.accessor(None, FLOAT, "VEC3", count)
        col = g.accessor(None, UNSIGNED_BYTE, "VEC4", count, normalized=True)
        idx = g.accessor(None, UNSIGNED_SHORT, "SCALAR", 6)
    ext = {"bufferView": g.view(stream), "attributes": {"POSITION": ids[0], "COLOR_0": ids[2]}}
    g.mesh_node({"POSITION": pos, "COLOR_0": col}, indices=idx, extensions={"KHR_draco_mesh_compression": ext})
    g.doc["extensionsUsed"] = ["KHR_draco_mesh_compression"]
    if required:
        g.doc["extensionsRequired"] = ["KHR_draco_mesh_compression"]
    return g.write_glb(path)


def test_draco_primitive_decodes_with_accessor_normalization(tmp_path):
    pytest.importorskip("DracoPy")
    prim = only_primitive(read_gltf(draco_model(tmp_path / "d.glb")))
    np.testing.assert_array_equal(prim.positions, DRACO_POSITIONS)
    np.testing.assert_allclose(prim.attributes["COLOR_0"], DRACO_COLORS / np.float32(255), atol=1e-7)
    np.testing.assert_array_equal(prim.indices, DRACO_FACES.reshape(-1))
    assert prim.indices.dtype == np.uint32 and prim.attributes["COLOR_0"].dtype == np.float32


def test_draco_optional_without_package_uses_the_fallback(tmp_path, monkeypatch):
    pytest.importorskip("DracoPy")
    path = draco_model(tmp_path / "d.glb", fallback=True, required=False)
    monkeypatch.setitem(sys.modules, "DracoPy", None)
    prim = only_primitive(read_gltf(path))
    np.testing.assert_array_equal(prim.positions, DRACO_POSITIONS)
    np.testing.assert_array_equal(prim.indices, DRACO_FACES.reshape(-1))


def _canonical_triangles(indices: np.ndarray) -> np.ndarray:
    """Each triangle rotated to start at its smallest index (same winding)."""
    tris = np.asarray(indices).reshape(-1, 3)
    start = tris.argmin(axis=1)
    return np.stack([np.roll(t, -k) for t, k in zip(tris, start)])


# ---------------------------------------------------------------------------------------------------
# Real models (../shared/assets)
# ---------------------------------------------------------------------------------------------------
def _truth(name: str) -> dict:
    return json.loads((TRUTH / f"{name}.json").read_text())


def _selected(prim_positions: np.ndarray, mesh_truth: dict) -> np.ndarray:
    sel = mesh_truth["vertex_selection"]
    rows = sel["start"] + sel["stride"] * np.arange(sel["count"])
    return np.asarray(prim_positions, dtype=np.float64)[rows]


@needs_assets
@pytest.mark.parametrize("name", sorted(p.name for p in ASSETS.glob("*.gl*")) if ASSETS.is_dir() else [])
def test_every_shared_model_loads(name):
    doc = read_gltf(ASSETS / name)
    assert doc.nodes and doc.meshes
    for mesh in doc.meshes:
        for prim in mesh.primitives:
            assert prim.positions.dtype == np.float32 and prim.positions.shape[1] == 3
            assert np.isfinite(prim.positions).all()


@needs_assets
def test_soldier_animations_and_skins():
    doc = read_gltf(ASSETS / "Soldier.glb")
    assert [a.name for a in doc.animations] == ["Idle", "Run", "TPose", "Walk"]
    skinned = [(n.mesh, n.skin) for n in doc.nodes if n.mesh is not None and n.skin is not None]
    assert len(skinned) == 2
    assert all(len(a.channels) == 156 for a in doc.animations)
    assert len(doc.animations[2].channels[0].times) == 1  # TPose: a single key


@needs_assets
def test_fox_draco_positions_match_truth():
    pytest.importorskip("DracoPy")
    truth = _truth("Fox-draco")["skinned_meshes"][0]
    doc = read_gltf(ASSETS / "Fox-draco.glb")
    prim = doc.meshes[truth["gltf_mesh"]].primitives[truth["gltf_primitive"]]
    assert prim.vertex_count == truth["vertex_count"]
    np.testing.assert_allclose(_selected(prim.positions, truth), np.array(truth["bind_positions"]), rtol=0, atol=1e-6)
    np.testing.assert_array_equal(np.asarray(prim.joints)[: len(truth["skin_indices"])], truth["skin_indices"])
    # Same geometry as the uncompressed Fox.glb (Draco reorders vertices, so compare the bounds).
    plain = only_primitive(read_gltf(ASSETS / "Fox.glb"))
    assert plain.vertex_count == prim.vertex_count and len(plain.indices) == len(prim.indices)
    diagonal = np.linalg.norm(np.ptp(plain.positions, axis=0))
    np.testing.assert_allclose(prim.positions.min(axis=0), plain.positions.min(axis=0), atol=1e-3 * diagonal)
    np.testing.assert_allclose(prim.positions.max(axis=0), plain.positions.max(axis=0), atol=1e-3 * diagonal)


@needs_assets
def test_robot_meshopt_positions_match_truth():
    pytest.importorskip("meshopt")
    truth = _truth("RobotExpressive-meshopt")
    doc = read_gltf(ASSETS / "RobotExpressive-meshopt.glb")
    assert "EXT_meshopt_compression" in doc.extensions_required
    for mesh_truth in truth["skinned_meshes"]:
        prim = doc.meshes[mesh_truth["gltf_mesh"]].primitives[mesh_truth["gltf_primitive"]]
        assert prim.vertex_count == mesh_truth["vertex_count"]
        # Quantisation tolerance: positions are normalised SHORTs (1/32767) in this file.
        np.testing.assert_allclose(_selected(prim.positions, mesh_truth), np.array(mesh_truth["bind_positions"]),
                                   rtol=0, atol=1e-6)
    assert len(doc.animations) == len(read_gltf(ASSETS / "RobotExpressive.glb").animations) == 14


