# Over 600 lines: one writer pass mirroring the reader, object kind by object kind (nodes, meshes, skins,
# animations with their pointer channels, materials, cameras, lights); its layout rules sit in one place.
"""Document -> glTF 2.0 file (``.glb``, or ``.gltf`` with a data URI or an external ``.bin``).

The inverse of :mod:`skeletal.io.gltf`: what the reader decodes, this encodes, so that
``read_gltf(write_gltf(doc))`` gives back the same document (up to the canonicalisations below).

What is written
---------------
* nodes (name, children, TRS, or ``matrix`` for a node that had one and no animation targets it;
  mesh, skin, morph ``weights``), scenes and the default scene;
* meshes: POSITION (with the ``min``/``max`` the spec requires), NORMAL, TANGENT, every other
  attribute kept in ``Primitive.attributes`` (TEXCOORD_n, COLOR_n, _CUSTOM...), indices,
  JOINTS_n/WEIGHTS_n (4 influences a set; the last set padded with zero weights), morph targets
  (``extras.targetNames`` for target names), default morph weights;
* skins: joints, ``skeleton``, ``inverseBindMatrices`` (column-major; left out when every one is the
  identity, which is what a missing accessor means);
* animations: one sampler per channel, key-time accessors shared between the channels of one
  animation that have identical times;
* materials (``pbrMetallicRoughness.baseColorFactor``/``baseColorTexture`` with its
  ``KHR_texture_transform``, ``emissiveFactor``, ``alphaMode``/``alphaCutoff``, ``doubleSided``,
  ``KHR_materials_unlit``, ``KHR_materials_emissive_strength``), and images (in bufferViews) with one
  texture per image;
* ``asset.generator = "skeletal <version>"`` (``asset.copyright`` kept from the document).

Canonicalisations (the spec requires them; none of them changes what a conformant player shows):

* skin weights are renormalised to sum to 1 in float32 (an all-zero row gives the whole weight to its
  first joint, as players do); a zero weight always carries joint index 0;
* rotation keys (not CUBICSPLINE tangents) and node rotations are written as unit quaternions, except
  STEP/LINEAR rotation keys that are exactly multiples of 1/32767 and unit within 1e-4 (quantised
  ones, see ``skeletal.compress``): those are written as normalised SHORT, which reads back exactly;
* normals are written unit length, tangent ``xyz`` unit length and ``w`` exactly +-1;
* all floats are float32 in the binary; JSON numbers (TRS, factors, weights) are written with full
  float64 precision, so a reader gets the document's values back exactly; accessor ``min``/``max``
  are the float32 values of the data, exactly.

Layout contracts (checked by the Khronos glTF-Validator in the tests): one buffer; one bufferView per
accessor, each starting on a 4-byte boundary; ``target`` on vertex-attribute and index views;
``byteStride`` only where an element is not a multiple of 4 bytes; GLB chunks padded to 4 bytes (JSON
with spaces, BIN with zeros). The same document always gives the same bytes.

The source's ``extensionsUsed``/``extensionsRequired`` are not copied: the reader has already decoded
Draco/meshopt/quantised data into plain arrays. The extensions the written file itself uses (the
material ones above) are listed in ``extensionsUsed``; ``KHR_texture_transform`` is also required, as
Blender writes it, since a viewer without it would show the texture misplaced.
"""

from __future__ import annotations

import base64
import json
import os
import struct
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np

from skeletal.document import Channel, Document, Material, Mesh, MorphTarget, Node, Primitive, Skin, TextureTransform
from skeletal.errors import ModelError
from skeletal.io.pointer import CURVE_PREFIX

# accessor.componentType
UNSIGNED_BYTE, UNSIGNED_SHORT, UNSIGNED_INT, FLOAT = 5121, 5123, 5125, 5126
# bufferView.target
ARRAY_BUFFER, ELEMENT_ARRAY_BUFFER = 34962, 34963

_COMPONENT_OF_DTYPE: dict[np.dtype, int] = {
    np.dtype("i1"): 5120, np.dtype("u1"): UNSIGNED_BYTE, np.dtype("<i2"): 5122,
    np.dtype("<u2"): UNSIGNED_SHORT, np.dtype("<u4"): UNSIGNED_INT, np.dtype("<f4"): FLOAT,
}
_TYPE_OF_WIDTH = {1: "SCALAR", 2: "VEC2", 3: "VEC3", 4: "VEC4", 16: "MAT4"}

_GLB_MAGIC = b"glTF"
_CHUNK_JSON = 0x4E4F534A  # "JSON"
_CHUNK_BIN = 0x004E4942  # "BIN\0"

_IDENTITY_QUAT = (0.0, 0.0, 0.0, 1.0)


def _generator() -> str:
    from skeletal.version import __version__

    return f"skeletal {__version__}"


# ---------------------------------------------------------------------------------------------
# public API


def write_gltf(document: Document, path: str | os.PathLike, *, embed: bool = True,
               short_rotations: bool = False) -> None:
    """Write ``document`` as glTF 2.0 to ``path``; the extension picks the container.

    ``.glb``: one binary file (the binary data in the BIN chunk; ``embed`` does not apply).
    ``.gltf``: JSON, with the binary data as a base64 data URI when ``embed`` is true, else in
    ``<name>.bin`` beside it (the JSON names it by a relative URI).
    ``short_rotations``: STEP/LINEAR rotation keys that lie exactly on the 16-bit grid (compressed
    clips, :func:`skeletal.compress.quantize_rotations`) are stored as normalised SHORT, half the size
    and lossless. Off by default: valid glTF, but some importers (Assimp 5.2) misread such samplers.

    Raises :class:`ValueError` for another extension and :class:`skeletal.ModelError` (naming the
    object, e.g. ``meshes[0].primitives[1]``) for a document that cannot be written as valid glTF.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".glb":
        path.write_bytes(glb_bytes(document, short_rotations=short_rotations))
        return
    if suffix != ".gltf":
        raise ValueError(f"{path}: the file name must end in .glb or .gltf")
    gltf, binary = _Encoder(document, short_rotations=short_rotations).encode()
    if binary:
        if embed:
            uri = "data:application/octet-stream;base64," + base64.b64encode(binary).decode("ascii")
        else:
            bin_path = path.with_suffix(".bin")
            bin_path.write_bytes(binary)
            uri = quote(bin_path.name)
        gltf["buffers"][0]["uri"] = uri
    path.write_bytes(_json_bytes(gltf))


def glb_bytes(document: Document, *, short_rotations: bool = False) -> bytes:
    """``document`` as the bytes of a ``.glb`` file (deterministic: same document, same bytes);
    ``short_rotations`` as in :func:`write_gltf`."""
    gltf, binary = _Encoder(document, short_rotations=short_rotations).encode()
    json_chunk = _json_bytes(gltf)
    json_chunk += b" " * (-len(json_chunk) % 4)  # the JSON chunk is padded with spaces...
    chunks = struct.pack("<II", len(json_chunk), _CHUNK_JSON) + json_chunk
    if binary:
        binary += b"\x00" * (-len(binary) % 4)  # ...the BIN chunk with zeros (spec, "GLB File Format")
        chunks += struct.pack("<II", len(binary), _CHUNK_BIN) + binary
    return struct.pack("<4sII", _GLB_MAGIC, 2, 12 + len(chunks)) + chunks


def _json_bytes(gltf: dict[str, Any]) -> bytes:
    """Compact UTF-8 JSON (no BOM); keys in insertion order so the output is deterministic."""
    return json.dumps(gltf, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


# ---------------------------------------------------------------------------------------------
# helpers on plain arrays


def _json_value(file: str, where: str, value: Any) -> Any:
    """``value`` as plain JSON (dicts with string keys, lists, str, finite numbers, bool, None);
    numpy scalars and arrays become numbers and lists. ModelError for anything else."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ModelError(file, where, f"has a non-string key {key!r}")
            out[key] = _json_value(file, f"{where}.{key}", item)
        return out
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_json_value(file, f"{where}[{i}]", item) for i, item in enumerate(list(value))]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        if not np.isfinite(value):
            raise ModelError(file, where, f"is {float(value)}, not a finite number")
        return float(value)
    if value is None or isinstance(value, str):
        return value
    raise ModelError(file, where, f"has a {type(value).__name__}, which JSON cannot store")


def _f32_list(values: Any) -> list[float]:
    """Float32 values as Python floats (exact): accessor min/max must equal the stored data."""
    return [float(v) for v in np.asarray(values, dtype=np.float32).reshape(-1)]


def _f64_list(values: Any) -> list[float]:
    return [float(v) for v in np.asarray(values, dtype=np.float64).reshape(-1)]


def _unit_rows(v: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (float64 maths); zero rows are left as they are."""
    v = np.asarray(v, dtype=np.float64)
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    return v / np.where(n > 0, n, 1.0)


def _unit_quaternions(q: np.ndarray) -> np.ndarray:
    """Unit xyzw quaternions; a zero quaternion becomes the identity."""
    q = np.array(q, dtype=np.float64).reshape(-1, 4)
    zero = np.linalg.norm(q, axis=1) == 0
    q[zero] = _IDENTITY_QUAT
    return _unit_rows(q)


def short_codes(values: Any) -> np.ndarray | None:
    """Rotation keys (K, 4) as normalised SHORT codes when that is lossless: every float32 value is
    exactly ``float32(c) / float32(32767)`` for an integer ``|c| <= 32767`` (what a reader decodes)
    and every row is unit within 1e-4; otherwise None. (:func:`skeletal.compress.quantize_rotations`
    makes such keys.)"""
    v = np.asarray(values, dtype=np.float32)
    if v.ndim != 2 or v.shape[1] != 4 or not len(v) or not np.all(np.isfinite(v)):
        return None
    codes = np.round(v.astype(np.float64) * 32767.0)
    if np.any(np.abs(codes) > 32767):
        return None
    codes16 = codes.astype(np.int16)
    if not np.array_equal(codes16.astype(np.float32) / np.float32(32767.0), v):
        return None
    if np.any(np.abs(np.linalg.norm(v.astype(np.float64), axis=1) - 1.0) > 1e-4):
        return None
    return codes16


def normalized_influences(joints: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Skin influences as glTF stores them: ``K`` columns padded to a multiple of 4, float32 weights
    summing to 1 per row (within float32 rounding), joint index 0 wherever the weight is 0.

    An all-zero (or negative-only) row gives the whole weight to its first joint: that is what the
    skin stage and three.js do with it, so the pose is unchanged. Returns ``(joints uint32 (V, 4n),
    weights float32 (V, 4n))``.
    """
    joints = np.asarray(joints, dtype=np.int64)
    w = np.clip(np.asarray(weights, dtype=np.float64), 0.0, None)
    v, k = w.shape
    pad = -k % 4
    if pad or k == 0:
        pad = pad or 4
        joints = np.concatenate([joints, np.zeros((v, pad), np.int64)], axis=1)
        w = np.concatenate([w, np.zeros((v, pad))], axis=1)
    total = w.sum(axis=1)
    empty = total <= 0
    w[empty] = 0.0
    w[empty, 0] = 1.0
    total[empty] = 1.0
    w32 = (w / total[:, None]).astype(np.float32)
    # Put the float32 rounding error of the sum on each row's largest weight, so that the stored
    # values sum to 1 as closely as float32 allows (the validator checks the sum).
    rows = np.arange(v)
    big = np.argmax(w32, axis=1)
    rest = w32.astype(np.float64).sum(axis=1) - w32[rows, big].astype(np.float64)
    w32[rows, big] = (1.0 - rest).astype(np.float32)
    joints = np.where(w32 > 0, joints, 0).astype(np.uint32)
    return joints, w32


# ---------------------------------------------------------------------------------------------
# the encoder


class _Encoder:
    """Builds the glTF JSON and the single binary buffer for one document."""

    def __init__(self, document: Document, short_rotations: bool = False):
        self.doc = document
        self.short_rotations = short_rotations
        self.file = document.path
        self.binary = bytearray()
        self.views: list[dict[str, Any]] = []
        self.accessors: list[dict[str, Any]] = []
        self.animated_pointers: set[str] = set()  # KHR_animation_pointer targets of the animations (see encode)
        self.extensions_used: set[str] = set()
        self.extensions_required: set[str] = set()

    # -- low level ------------------------------------------------------------------------------

    def _view(self, data: bytes, *, target: int | None = None, stride: int | None = None) -> int:
        """Append ``data`` as a new bufferView starting on a 4-byte boundary (so any accessor at
        offset 0 is aligned for every component type and for MAT columns)."""
        self.binary += b"\x00" * (-len(self.binary) % 4)
        view: dict[str, Any] = {"buffer": 0, "byteOffset": len(self.binary), "byteLength": len(data)}
        if stride is not None:
            view["byteStride"] = stride
        if target is not None:
            view["target"] = target
        self.binary += data
        self.views.append(view)
        return len(self.views) - 1

    def _accessor(
        self,
        array: np.ndarray,
        *,
        type_: str | None = None,
        target: int | None = None,
        min_max: bool = False,
        normalized: bool = False,
    ) -> int:
        """Store ``array`` ((count,) or (count, width); its dtype picks the componentType) in its
        own bufferView and describe it with an accessor.

        Vertex attributes (``target=ARRAY_BUFFER``) must have every element on a 4-byte boundary:
        an element whose size is not a multiple of 4 is padded and given an explicit byteStride.
        """
        a = np.asarray(array)
        if a.dtype not in _COMPONENT_OF_DTYPE:
            raise TypeError(f"no glTF component type for dtype {a.dtype}")
        a = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<"))
        count = len(a)
        elements = a.reshape(count, -1)
        width = elements.shape[1]
        type_ = type_ or _TYPE_OF_WIDTH[width]
        element_size = elements.itemsize * width
        stride = None
        data = elements.tobytes()
        if target == ARRAY_BUFFER and element_size % 4:
            stride = element_size + (-element_size % 4)
            padded = np.zeros((count, stride), np.uint8)
            padded[:, :element_size] = elements.view(np.uint8).reshape(count, element_size)
            data = padded.tobytes()
        accessor: dict[str, Any] = {
            "bufferView": self._view(data, target=target, stride=stride),
            "componentType": _COMPONENT_OF_DTYPE[elements.dtype],
            "count": count,
            "type": type_,
        }
        if normalized:
            accessor["normalized"] = True
        if min_max and count:
            lo, hi = elements.min(axis=0), elements.max(axis=0)
            if elements.dtype == np.float32:
                accessor["min"], accessor["max"] = _f32_list(lo), _f32_list(hi)
            else:
                accessor["min"], accessor["max"] = [int(x) for x in lo], [int(x) for x in hi]
        self.accessors.append(accessor)
        return len(self.accessors) - 1

    def _float_attribute(self, values: np.ndarray, *, min_max: bool = False) -> int:
        return self._accessor(np.asarray(values, dtype=np.float32), target=ARRAY_BUFFER, min_max=min_max)

    # -- document -------------------------------------------------------------------------------

    def encode(self) -> tuple[dict[str, Any], bytes]:
        """The glTF JSON (buffer 0 without a ``uri``; the caller adds one for .gltf) and the binary."""
        doc = self.doc
        asset: dict[str, Any] = {"version": "2.0", "generator": _generator()}
        if doc.asset_info.get("copyright"):
            asset["copyright"] = str(doc.asset_info["copyright"])
        gltf: dict[str, Any] = {"asset": asset}

        animated = {c.node for a in doc.animations for c in a.channels}
        self.animated_pointers = {t.pointer for a in doc.animations for t in getattr(a, "properties", [])}
        sections: list[tuple[str, list[Any]]] = [
            ("scenes", [self._scene(k, roots) for k, roots in enumerate(doc.scenes)]),
            ("nodes", [self._node(i, n, i in animated) for i, n in enumerate(doc.nodes)]),
            ("meshes", [self._mesh(i, m) for i, m in enumerate(doc.meshes)]),
            ("skins", [self._skin(i, s) for i, s in enumerate(doc.skins)]),
            ("animations", [self._animation(i, a) for i, a in enumerate(doc.animations)]),
            ("materials", [self._material(m, i) for i, m in enumerate(doc.materials)]),
            ("images", [self._image(i, im) for i, im in enumerate(doc.images)]),
            ("textures", [{"source": i} for i in range(len(doc.images))]),
            ("cameras", [_json_value(self.file, f"cameras[{i}]", c) for i, c in enumerate(doc.cameras)]),
        ]
        if doc.lights:
            gltf["extensions"] = {"KHR_lights_punctual": {
                "lights": [_json_value(self.file, f"lights[{i}]", light) for i, light in enumerate(doc.lights)]}}
            self.extensions_used.add("KHR_lights_punctual")
        if doc.scenes and doc.scene is not None:
            gltf["scene"] = int(doc.scene)
        if self.extensions_used:
            gltf["extensionsUsed"] = sorted(self.extensions_used)
        if self.extensions_required:
            gltf["extensionsRequired"] = sorted(self.extensions_required)
        for key, items in sections:
            if items:
                gltf[key] = items
        if self.accessors:
            gltf["accessors"] = self.accessors
            gltf["bufferViews"] = self.views
            self.binary += b"\x00" * (-len(self.binary) % 4)
            gltf["buffers"] = [{"byteLength": len(self.binary)}]
        return gltf, bytes(self.binary)

    def _scene(self, index: int, roots: list[int]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if index < len(self.doc.scene_names) and self.doc.scene_names[index]:
            out["name"] = self.doc.scene_names[index]
        out["nodes"] = [int(r) for r in roots]
        return out

    def _node(self, index: int, node: Node, animated: bool) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if node.name:
            out["name"] = node.name
        if node.children:
            out["children"] = [int(c) for c in node.children]
        # A node given by a matrix keeps it, unless an animation targets the node: animated nodes
        # must use TRS (spec, "Transformations"), and the document always has the TRS too.
        if node.matrix is not None and not animated:
            m = np.asarray(node.matrix, dtype=np.float64)
            if not np.array_equal(m, np.eye(4)):
                out["matrix"] = _f64_list(m.T)  # column-major
        else:
            t = np.asarray(node.translation, dtype=np.float64)
            q = _unit_quaternions(node.rotation)[0]
            s = np.asarray(node.scale, dtype=np.float64)
            if np.any(t != 0):
                out["translation"] = _f64_list(t)
            if not np.array_equal(q, _IDENTITY_QUAT):
                out["rotation"] = _f64_list(q)
            if np.any(s != 1):
                out["scale"] = _f64_list(s)
        if node.mesh is not None:
            out["mesh"] = int(node.mesh)
        if node.skin is not None:
            out["skin"] = int(node.skin)
        if node.weights is not None:
            out["weights"] = _f64_list(node.weights)
        if node.camera is not None:
            out["camera"] = int(node.camera)
        extensions: dict[str, Any] = {}
        if node.light is not None:
            extensions["KHR_lights_punctual"] = {"light": int(node.light)}
        if not node.visible:
            extensions["KHR_node_visibility"] = {"visible": False}
        if extensions:
            out["extensions"] = extensions
            self.extensions_used.update(extensions)
        if node.extras:
            out["extras"] = _json_value(self.file, f"nodes[{index}].extras", node.extras)
        return out

    # -- meshes ---------------------------------------------------------------------------------

    def _joint_limit(self, mesh_index: int) -> int:
        """How many joints the skins bound to this mesh have (0 when no node skins it)."""
        counts = [
            len(self.doc.skins[n.skin].joints)
            for n in self.doc.nodes
            if n.mesh == mesh_index and n.skin is not None and 0 <= n.skin < len(self.doc.skins)
        ]
        return max(counts, default=0)

    def _mesh(self, index: int, mesh: Mesh) -> dict[str, Any]:
        joint_limit = self._joint_limit(index)
        out: dict[str, Any] = {}
        if mesh.name:
            out["name"] = mesh.name
        out["primitives"] = [
            self._primitive(f"meshes[{index}].primitives[{p}]", prim, joint_limit)
            for p, prim in enumerate(mesh.primitives)
        ]
        if mesh.weights is not None:
            out["weights"] = _f64_list(mesh.weights)
        if mesh.target_names:
            out["extras"] = {"targetNames": [str(n) for n in mesh.target_names]}
        return out

    def _primitive(self, where: str, prim: Primitive, joint_limit: int) -> dict[str, Any]:
        v = prim.vertex_count
        positions = np.asarray(prim.positions, dtype=np.float32)
        if positions.shape != (v, 3) or not np.all(np.isfinite(positions)):
            raise ModelError(self.file, where, f"positions must be finite (V, 3), got shape {positions.shape}")

        def check(name: str, array: np.ndarray, width: int | None) -> np.ndarray:
            a = np.asarray(array)
            if len(a) != v or (width is not None and (a.ndim != 2 or a.shape[1] != width)):
                raise ModelError(self.file, where, f"{name} has shape {a.shape}, expected ({v}, {width or '...'})")
            return a

        attributes: dict[str, int] = {"POSITION": self._float_attribute(positions, min_max=True)}
        if prim.normals is not None:
            normals = _unit_rows(check("NORMAL", prim.normals, 3))
            attributes["NORMAL"] = self._float_attribute(normals)
        if prim.tangents is not None:
            t = np.array(check("TANGENT", prim.tangents, 4), dtype=np.float64)
            t[:, :3] = _unit_rows(t[:, :3])
            t[:, 3] = np.where(t[:, 3] < 0, -1.0, 1.0)
            attributes["TANGENT"] = self._float_attribute(t)
        for name in sorted(prim.attributes):
            if name in ("POSITION", "NORMAL", "TANGENT") or name.startswith(("JOINTS_", "WEIGHTS_")):
                continue  # these come from the dedicated fields
            a = check(name, prim.attributes[name], None)
            if a.dtype.kind == "f" or a.dtype not in _COMPONENT_OF_DTYPE:
                a = a.astype(np.float32)
            attributes[name] = self._accessor(a.reshape(v, -1), target=ARRAY_BUFFER)
        if prim.joints is not None:
            if prim.weights is None:
                raise ModelError(self.file, where, "has joints but no weights")
            joints = check("joints", prim.joints, None)
            weights = check("weights", prim.weights, joints.shape[1] if joints.ndim == 2 else None)
            if len(joints) and joints.min() < 0:
                raise ModelError(self.file, where, "has negative joint indices")
            if joint_limit and len(joints) and int(joints.max()) >= joint_limit:
                raise ModelError(self.file, where, f"joint index {int(joints.max())} past the {joint_limit} joints of its skin")
            joints, weights = normalized_influences(joints, weights)
            count = max(joint_limit, int(joints.max()) + 1 if len(joints) else 0)
            joint_dtype = np.uint8 if count < 256 else np.uint16
            if count > 65536:
                raise ModelError(self.file, where, f"{count} joints do not fit UNSIGNED_SHORT joint indices")
            for s in range(joints.shape[1] // 4):
                cols = slice(4 * s, 4 * s + 4)
                attributes[f"JOINTS_{s}"] = self._accessor(joints[:, cols].astype(joint_dtype), target=ARRAY_BUFFER)
                attributes[f"WEIGHTS_{s}"] = self._accessor(weights[:, cols], target=ARRAY_BUFFER)

        out: dict[str, Any] = {"attributes": attributes}
        if prim.indices is not None:
            out["indices"] = self._indices(where, prim)
        if prim.material is not None:
            out["material"] = int(prim.material)
        if prim.mode != 4:
            out["mode"] = int(prim.mode)
        if prim.targets:
            out["targets"] = [self._target(f"{where}.targets[{i}]", t, v) for i, t in enumerate(prim.targets)]
        return out

    def _indices(self, where: str, prim: Primitive) -> int:
        indices = np.asarray(prim.indices).reshape(-1)
        if len(indices) and (indices.min() < 0 or indices.max() >= prim.vertex_count):
            raise ModelError(self.file, where, f"indices out of range for {prim.vertex_count} vertices")
        top = int(indices.max()) if len(indices) else 0
        # The largest value of each type is the primitive-restart index, which glTF forbids.
        dtype = np.uint16 if top < 0xFFFF else np.uint32
        return self._accessor(indices.astype(dtype), target=ELEMENT_ARRAY_BUFFER)

    def _target(self, where: str, target: MorphTarget, v: int) -> dict[str, int]:
        out: dict[str, int] = {}
        for name, data, width in (("POSITION", target.position, 3), ("NORMAL", target.normal, 3), ("TANGENT", target.tangent, 3)):
            if data is None:
                continue
            a = np.asarray(data, dtype=np.float32)
            if a.shape != (v, width):
                raise ModelError(self.file, where, f"{name} displacements have shape {a.shape}, expected ({v}, {width})")
            out[name] = self._float_attribute(a, min_max=(name == "POSITION"))
        if not out:
            # A target must name at least one attribute: a target that moves nothing is zeros.
            out["POSITION"] = self._float_attribute(np.zeros((v, 3), np.float32), min_max=True)
        return out

    # -- skins, animations, materials -------------------------------------------------------------

    def _skin(self, index: int, skin: Skin) -> dict[str, Any]:
        joints = np.asarray(skin.joints, dtype=np.int64).reshape(-1)
        out: dict[str, Any] = {}
        if skin.name:
            out["name"] = skin.name
        ibm = np.asarray(skin.inverse_bind, dtype=np.float64)
        if ibm.shape != (len(joints), 4, 4):
            raise ModelError(self.file, f"skins[{index}]", f"inverse_bind has shape {ibm.shape}, expected ({len(joints)}, 4, 4)")
        # No accessor means identity matrices, so all-identity IBMs need none.
        if not np.array_equal(ibm, np.broadcast_to(np.eye(4), ibm.shape)):
            column_major = np.ascontiguousarray(ibm.transpose(0, 2, 1)).reshape(len(joints), 16)
            out["inverseBindMatrices"] = self._accessor(column_major.astype(np.float32), type_="MAT4")
        if skin.skeleton is not None:
            out["skeleton"] = int(skin.skeleton)
        out["joints"] = [int(j) for j in joints]
        return out

    def _animation(self, index: int, animation: Any) -> dict[str, Any]:
        samplers: list[dict[str, Any]] = []
        channels: list[dict[str, Any]] = []
        inputs: dict[bytes, int] = {}  # identical key times share one accessor
        for c, channel in enumerate(animation.channels):
            where = f"animations[{index}].channels[{c}]"
            times = np.asarray(channel.times, dtype=np.float32).reshape(-1)
            if len(times) == 0 or not np.all(np.isfinite(times)) or times[0] < 0 or np.any(np.diff(times) <= 0):
                raise ModelError(self.file, where, "key times must be finite, non-negative and strictly increasing")
            key = times.tobytes()
            if key not in inputs:
                inputs[key] = self._accessor(times, min_max=True)
            samplers.append({
                "input": inputs[key],
                "interpolation": channel.interpolation,
                "output": self._output(where, channel, len(times)),
            })
            channels.append({"sampler": len(samplers) - 1, "target": {"node": int(channel.node), "path": channel.path}})
        curves: dict[str, Any] = {}
        for track in getattr(animation, "properties", []):
            if track.pointer.startswith(CURVE_PREFIX):  # a named float curve: inline, in the animation's extras
                curves[track.pointer[len(CURVE_PREFIX):]] = {
                    "interpolation": track.interpolation, "times": _f64_list(np.asarray(track.times, np.float32)),
                    "values": _f64_list(np.asarray(track.values, np.float32).reshape(-1))}
                continue
            where = f"animations[{index}] property {track.pointer}"
            times = np.asarray(track.times, dtype=np.float32).reshape(-1)
            if len(times) == 0 or not np.all(np.isfinite(times)) or times[0] < 0 or np.any(np.diff(times) <= 0):
                raise ModelError(self.file, where, "key times must be finite, non-negative and strictly increasing")
            key = times.tobytes()
            if key not in inputs:
                inputs[key] = self._accessor(times, min_max=True)
            values = np.asarray(track.values, dtype=np.float32)
            if track.pointer.endswith("/KHR_node_visibility/visible"):
                values = (values != 0).astype(np.uint8)  # a boolean: UNSIGNED_BYTE 0/1, as the extension says
                self.extensions_used.add("KHR_node_visibility")
            output = self._accessor(values.reshape(len(values), -1) if values.shape[1] > 1 else values.reshape(-1))
            samplers.append({"input": inputs[key], "interpolation": track.interpolation, "output": output})
            channels.append({"sampler": len(samplers) - 1, "target": {
                "path": "pointer", "extensions": {"KHR_animation_pointer": {"pointer": track.pointer}}}})
            self.extensions_used.add("KHR_animation_pointer")
        out: dict[str, Any] = {}
        if animation.name:
            out["name"] = animation.name
        out["channels"] = channels
        out["samplers"] = samplers
        extras = dict(getattr(animation, "extras", None) or {})
        if curves:
            extras["curves"] = curves
        if extras:
            out["extras"] = _json_value(self.file, f"animations[{index}].extras", extras)
        return out

    def _output(self, where: str, channel: Channel, keys: int) -> int:
        values = np.array(channel.values, dtype=np.float64)
        cubic = channel.interpolation == "CUBICSPLINE"
        if channel.interpolation not in ("STEP", "LINEAR", "CUBICSPLINE"):
            raise ModelError(self.file, where, f"unknown interpolation {channel.interpolation!r}")
        rows = keys * (3 if cubic else 1)
        if values.ndim == 1:
            values = values.reshape(rows, -1)
        if values.shape[0] != rows:
            raise ModelError(self.file, where, f"{keys} keys need {rows} value rows, got {values.shape[0]}")
        if channel.path == "rotation":
            codes = short_codes(channel.values) if self.short_rotations and not cubic else None
            if codes is not None:  # on the 16-bit grid (e.g. compressed clips): stored exactly, half the size
                return self._accessor(codes, normalized=True)
            if cubic:
                values[1::3] = _unit_quaternions(values[1::3])  # the values; tangents are free
            else:
                values = _unit_quaternions(values)
        values32 = values.astype(np.float32)
        if channel.path == "weights":
            # Morph weights are a SCALAR accessor of keys * targets (* 3 for CUBICSPLINE) floats.
            return self._accessor(values32.reshape(-1))
        return self._accessor(values32)

    def _material(self, material: Material, index: int = -1) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if material.name:
            out["name"] = material.name
        pbr: dict[str, Any] = {}
        factor = np.asarray(material.base_color_factor, dtype=np.float64)
        if not np.array_equal(factor, np.ones(4)):
            pbr["baseColorFactor"] = _f64_list(np.clip(factor, 0.0, 1.0))
        for key, value in (("metallicFactor", material.metallic_factor), ("roughnessFactor", material.roughness_factor)):
            if value != 1.0:
                pbr[key] = float(np.clip(value, 0.0, 1.0))
        if material.base_color_texture is not None:
            texture: dict[str, Any] = {"index": int(material.base_color_texture)}
            if material.base_color_texcoord:
                texture["texCoord"] = int(material.base_color_texcoord)
            transform = material.base_color_transform
            animated = f"/materials/{index}/pbrMetallicRoughness/baseColorTexture/extensions/KHR_texture_transform/"
            if transform is None and any(p.startswith(animated) for p in self.animated_pointers):
                transform = TextureTransform()  # animated: the extension object must be there
            if transform is not None and (not transform.is_identity or any(p.startswith(animated) for p in self.animated_pointers)):
                ext: dict[str, Any] = {}
                if np.any(transform.offset != 0.0):
                    ext["offset"] = _f64_list(transform.offset)
                if transform.rotation != 0.0:
                    ext["rotation"] = float(transform.rotation)
                if np.any(transform.scale != 1.0):
                    ext["scale"] = _f64_list(transform.scale)
                if transform.texcoord is not None:
                    ext["texCoord"] = int(transform.texcoord)
                texture["extensions"] = {"KHR_texture_transform": ext}
                self.extensions_used.add("KHR_texture_transform")
                self.extensions_required.add("KHR_texture_transform")
            pbr["baseColorTexture"] = texture
        if pbr:
            out["pbrMetallicRoughness"] = pbr
        emissive = np.asarray(material.emissive_factor, dtype=np.float64)
        if emissive.any():
            out["emissiveFactor"] = _f64_list(np.clip(emissive, 0.0, 1.0))
        if material.alpha_mode != "OPAQUE":
            out["alphaMode"] = material.alpha_mode
            if material.alpha_mode == "MASK" and material.alpha_cutoff != 0.5:
                out["alphaCutoff"] = float(material.alpha_cutoff)
        if material.double_sided:
            out["doubleSided"] = True
        extensions: dict[str, Any] = {}
        if material.unlit:
            extensions["KHR_materials_unlit"] = {}
        if (material.emissive_strength != 1.0
                or f"/materials/{index}/extensions/KHR_materials_emissive_strength/emissiveStrength" in self.animated_pointers):
            extensions["KHR_materials_emissive_strength"] = {"emissiveStrength": float(material.emissive_strength)}
        if extensions:
            out["extensions"] = extensions
            self.extensions_used.update(extensions)
        return out

    def _image(self, index: int, image: Any) -> dict[str, Any]:
        if image.data is None or not image.mime_type:
            raise ModelError(self.file, f"images[{index}]", "has no data or no MIME type to write")
        out: dict[str, Any] = {}
        if image.name:
            out["name"] = image.name
        out["bufferView"] = self._view(bytes(image.data))
        out["mimeType"] = image.mime_type
        return out
