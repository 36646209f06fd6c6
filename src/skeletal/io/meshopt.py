"""EXT_meshopt_compression: decode one compressed bufferView with the ``meshopt`` package.

The extension object of a bufferView names where the compressed bytes are (its own ``buffer``,
``byteOffset``, ``byteLength``) and how to decode them (``mode``, ``filter``, ``count``, ``byteStride``);
the decoded bytes replace the bufferView's contents, whose own buffer is only a fallback that may
hold no data at all.

Size bound: a decoded view is ``count * byteStride`` bytes, which the file does not otherwise back with
data. Before decoding we require it to be at most :data:`MAX_DECODED_BYTES` (1 GiB) and at most
``ratio * compressed length + 64 KiB``, where ``ratio`` is the best compression the bitstream can reach:
1024x for ATTRIBUTES (a version-1 stream of constant data spends about 2 bits per 16 bytes of output)
and 16x for TRIANGLES/INDICES (at least one byte per index or per triangle). A valid stream always fits;
a tiny file declaring a huge count is refused before anything is allocated.
"""

from __future__ import annotations

from types import ModuleType

from skeletal.io import decoders
from skeletal.io.jsonobj import JsonObject

EXTENSION = "EXT_meshopt_compression"
PIP_PACKAGE = "meshopt"
MAX_DECODED_BYTES = 1 << 30
_MAX_RATIO = {"ATTRIBUTES": 1024, "TRIANGLES": 16, "INDICES": 16}
_SLACK_BYTES = 64 * 1024
_FILTERS = ("NONE", "OCTAHEDRAL", "QUATERNION", "EXPONENTIAL")


def load_module(file: str, where: str | None = None) -> ModuleType:
    """The ``meshopt`` package, or UnsupportedExtensionError saying how to install it."""
    return decoders.require(PIP_PACKAGE, EXTENSION, file, where)


def available() -> bool:
    """Whether the decoder package can be imported."""
    return decoders.is_installed(PIP_PACKAGE)


class MeshoptView:
    """The validated parameters of one bufferView's EXT_meshopt_compression object."""

    def __init__(self, ext: JsonObject, view: JsonObject, buffer_count: int):
        self.ext = ext
        self.buffer = ext.index("buffer", "buffers", buffer_count)
        self.byte_offset = ext.int("byteOffset", 0)
        self.byte_length = ext.int("byteLength", minimum=1)
        self.byte_stride = ext.int("byteStride", minimum=1)
        self.count = ext.int("count", minimum=1)
        self.mode = ext.string("mode")
        self.filter = ext.string("filter", "NONE")

        if self.mode not in _MAX_RATIO:
            ext.fail(f"unknown mode {self.mode!r} (expected ATTRIBUTES, TRIANGLES or INDICES)", "mode")
        if self.filter not in _FILTERS:
            ext.fail(f"unknown filter {self.filter!r} (expected one of {', '.join(_FILTERS)})", "filter")
        stride = self.byte_stride
        if self.mode == "ATTRIBUTES":
            if stride % 4 or stride > 256:
                ext.fail(f"byteStride {stride} must be a multiple of 4 and at most 256 for ATTRIBUTES", "byteStride")
        else:
            if stride not in (2, 4):
                ext.fail(f"byteStride {stride} must be 2 or 4 for {self.mode}", "byteStride")
            if self.filter != "NONE":
                ext.fail(f"filter {self.filter} is only allowed with mode ATTRIBUTES", "filter")
            if self.mode == "TRIANGLES" and self.count % 3:
                ext.fail(f"count {self.count} must be a multiple of 3 for TRIANGLES", "count")
        if self.filter == "OCTAHEDRAL" and stride not in (4, 8):
            ext.fail(f"byteStride {stride} must be 4 or 8 with the OCTAHEDRAL filter", "byteStride")
        if self.filter == "QUATERNION" and stride != 8:
            ext.fail(f"byteStride {stride} must be 8 with the QUATERNION filter", "byteStride")

        view_stride = view.int("byteStride", None)
        if view_stride is not None and view_stride != stride:
            ext.fail(f"byteStride {stride} differs from the bufferView's byteStride {view_stride}", "byteStride")
        decoded = self.count * stride
        view_length = view.int("byteLength", minimum=1)
        if decoded != view_length:
            ext.fail(f"count {self.count} x byteStride {stride} = {decoded} bytes, but the bufferView's byteLength is {view_length}")
        bound = min(MAX_DECODED_BYTES, _MAX_RATIO[self.mode] * self.byte_length + _SLACK_BYTES)
        if decoded > bound:
            ext.fail(
                f"count {self.count} x byteStride {stride} = {decoded} bytes cannot come from {self.byte_length} "
                f"compressed bytes (at most {bound} for mode {self.mode})"
            )

    @property
    def key(self) -> tuple:
        """What makes two views decode to the same bytes: their compressed range and parameters."""
        return (self.buffer, self.byte_offset, self.byte_length, self.count, self.byte_stride, self.mode, self.filter)

    def decode(self, compressed: memoryview, file: str) -> bytes:
        """Decode ``compressed`` (exactly the extension's byte range) to ``count * byteStride`` bytes."""
        module = load_module(file, self.ext.where)
        try:
            out = module.decode_gltf_buffer(
                compressed, self.count, self.byte_stride, self.mode, None if self.filter == "NONE" else self.filter
            )
        except Exception as exc:  # the decoder reports corrupt streams with assorted exception types
            self.ext.fail(f"meshopt could not decode the data: {exc}")
        data = out.tobytes()
        if len(data) != self.count * self.byte_stride:
            self.ext.fail(f"meshopt decoded {len(data)} bytes, expected {self.count * self.byte_stride}")
        return data
