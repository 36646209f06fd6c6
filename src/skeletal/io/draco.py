"""KHR_draco_mesh_compression: decode one mesh primitive's Draco stream with the ``DracoPy`` package.

The primitive's extension object names a bufferView holding the Draco stream and maps glTF attribute
names to Draco attribute unique ids. The decoded attributes are per *point* in Draco's point order -
the vertex order three.js's DRACOLoader produces - and the indices are Draco's faces.

Like three.js, each decoded attribute is converted to its accessor's ``componentType`` and then read as
that accessor says (normalised integers decoded per spec). The accessors' ``count`` must equal the
decoded point count, and the indices accessor's count the number of face corners.

Size bound: Draco allocates from its own stream, so before decoding we check the accessors' declared
sizes (sum of count x element size) against ``MAX_DECODED_BYTES`` (1 GiB) and against
``MAX_RATIO`` (1024) times the compressed length plus 64 KiB, refusing a tiny stream that claims a huge mesh.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

import numpy as np

from skeletal.io import decoders
from skeletal.io.accessors import AccessorInfo
from skeletal.io.jsonobj import JsonObject

EXTENSION = "KHR_draco_mesh_compression"
PIP_PACKAGE = "DracoPy"
MAX_DECODED_BYTES = 1 << 30
MAX_RATIO = 1024
_SLACK_BYTES = 64 * 1024


def load_module(file: str, where: str | None = None) -> ModuleType:
    """The ``DracoPy`` package, or UnsupportedExtensionError saying how to install it."""
    return decoders.require(PIP_PACKAGE, EXTENSION, file, where)


def available() -> bool:
    """Whether the decoder package can be imported."""
    return decoders.is_installed(PIP_PACKAGE)


@dataclass
class DracoPrimitive:
    """What a Draco stream decoded to: raw per-point attributes (in the accessor's component type,
    shape (points, components)) by glTF name, and the triangle indices (None for point clouds)."""

    raw: dict[str, np.ndarray]
    indices: np.ndarray | None


def check_declared_size(ext: JsonObject, infos: list[AccessorInfo], compressed_length: int) -> None:
    """Refuse accessors whose declared sizes the compressed stream cannot plausibly hold."""
    declared = sum(info.count * info.element_size for info in infos)
    bound = min(MAX_DECODED_BYTES, MAX_RATIO * compressed_length + _SLACK_BYTES)
    if declared > bound:
        ext.fail(f"the accessors declare {declared} bytes of decoded data, more than {bound} "
                 f"that {compressed_length} compressed bytes may give")


def decode_primitive(
    ext: JsonObject,
    stream: bytes,
    attributes: dict[str, AccessorInfo],
    indices: AccessorInfo | None,
    file: str,
) -> DracoPrimitive:
    """Decode a primitive's Draco ``stream``.

    ``ext``: the primitive's extension object (its ``attributes`` maps names to Draco unique ids).
    ``attributes``: the accessor headers of the names the extension lists. ``indices``: the indices
    accessor header, if the primitive has one.
    """
    module = load_module(file)
    ids = ext.object("attributes", required=True)
    check_declared_size(ext, [*attributes.values(), *([indices] if indices else [])], len(stream))
    try:
        mesh = module.decode(stream)
    except Exception as exc:  # DracoPy raises assorted types for corrupt streams
        ext.fail(f"Draco could not decode bufferView {ext.raw('bufferView')}: {exc}")

    points = int(np.asarray(mesh.points).shape[0]) if getattr(mesh, "points", None) is not None else None
    raw: dict[str, np.ndarray] = {}
    for name, info in attributes.items():
        unique_id = ids.int(name)
        attribute = mesh.get_attribute_by_unique_id(unique_id)
        if attribute is None:
            ids.fail(f"the Draco stream has no attribute with unique id {unique_id}", name)
        data = np.asarray(attribute["data"])
        if data.ndim == 1:
            data = data.reshape(-1, 1)
        if data.shape[1] != info.components:
            ids.fail(f"Draco attribute {unique_id} has {data.shape[1]} components, accessors[{info.index}] "
                     f"is {info.type}", name)
        if data.shape[0] != info.count or (points is not None and data.shape[0] != points):
            ids.fail(f"Draco decoded {data.shape[0]} points, accessors[{info.index}] declares count {info.count}", name)
        # As three.js does: convert to the accessor's component type, then read it as the accessor says.
        data = data.astype(info.dtype.newbyteorder("="), copy=False)
        raw[name] = data.reshape(info.count) if info.type == "SCALAR" else data

    faces = getattr(mesh, "faces", None)
    out_indices: np.ndarray | None = None
    if faces is not None and np.asarray(faces).size:
        out_indices = np.ascontiguousarray(np.asarray(faces).reshape(-1), dtype=np.uint32)
        if indices is not None and indices.count != out_indices.size:
            ext.fail(f"Draco decoded {out_indices.size} indices, accessors[{indices.index}] declares count {indices.count}")
    return DracoPrimitive(raw, out_indices)
