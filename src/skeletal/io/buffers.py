"""glTF buffers and bufferViews: where the binary data of a model is, as checked byte ranges.

:class:`BinaryData` loads each buffer the first time it is needed (the GLB BIN chunk, a data URI or a
file beside the model, see :mod:`skeletal.io.uris`), checks that it really has its declared
``byteLength``, checks every bufferView's range against it, and decodes EXT_meshopt_compression views.
It hands out ``memoryview``s, never copies, so that accessors over a GLB are views of the file's bytes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from skeletal.io import meshopt as meshopt_ext
from skeletal.io.budget import BudgetError, FileBudget
from skeletal.io.jsonobj import JsonObject
from skeletal.io.uris import UriError, read_uri


@dataclass(frozen=True)
class ViewData:
    """A bufferView's bytes (exactly ``byteLength`` of them) and its ``byteStride`` (None: tightly packed)."""

    data: memoryview
    stride: int | None


class BinaryData:
    """The buffers and bufferViews of one glTF document.

    ``root``: the document. ``glb_bin``: the GLB BIN chunk, if any (buffer 0 without a URI refers to it).
    ``uri_root``: the folder relative URIs resolve against and must stay inside. ``file_bytes``: the
    model file's size, which sets its memory budget (:mod:`skeletal.io.budget`; external buffers add
    theirs as they load): zero-filled accessors and decoded meshopt views are charged to ``budget``.

    EXT_meshopt_compression views are decoded when the ``meshopt`` package is importable; otherwise
    their fallback buffer is used, and when that has no data an UnsupportedExtensionError is raised.
    """

    def __init__(self, root: JsonObject, glb_bin: memoryview | None, uri_root: str | os.PathLike,
                 file_bytes: int | None = None):
        self.file = root.file
        self.buffers = root.objects("buffers")
        self.views = root.objects("bufferViews")
        self.glb_bin = glb_bin
        self.uri_root = uri_root
        self._meshopt_available: bool | None = None  # looked up on the first compressed view
        self._buffer_cache: dict[int, memoryview | None] = {}
        self._view_cache: dict[int, ViewData] = {}
        #: Bytes of binary data actually read so far (the GLB chunk and loaded buffers); the accessor
        #: reader uses it to bound arrays that no bufferView backs (all-zero and sparse accessors).
        self.loaded_bytes = 0 if glb_bin is None else len(glb_bin)
        self.budget = FileBudget(self.file, self.loaded_bytes if file_bytes is None else file_bytes)
        #: Decoded meshopt ranges by (buffer, byteOffset, byteLength, count, byteStride, mode, filter):
        #: views that share one compressed range share its decoded bytes.
        self._decoded: dict[tuple, memoryview] = {}

    # -- buffers --------------------------------------------------------------------------------
    def buffer(self, index: int) -> memoryview | None:
        """Buffer ``index``'s bytes (exactly ``byteLength``), or None for a buffer that has no data
        (a placeholder, e.g. an EXT_meshopt_compression fallback buffer without a URI)."""
        if index in self._buffer_cache:
            return self._buffer_cache[index]
        obj = self.buffers[index]
        length = obj.int("byteLength", minimum=1)
        uri = obj.string("uri", None)
        data: memoryview | None
        if uri is not None:
            try:
                raw, _mime = read_uri(uri, self.uri_root, max_bytes=length)
            except UriError as exc:
                obj.fail(str(exc), "uri")
            data = memoryview(raw)
            self.loaded_bytes += len(raw)
            self.budget.add_source(len(raw))
            source = "its URI gives"
        elif index == 0 and self.glb_bin is not None:
            data = self.glb_bin
            source = "the GLB BIN chunk has"
        else:
            data = None
        if data is not None:
            # The BIN chunk may carry up to 3 padding bytes past byteLength; never fewer bytes than declared.
            if len(data) < length:
                obj.fail(f"byteLength is {length} but {source} only {len(data)} bytes")
            data = data[:length]
        self._buffer_cache[index] = data
        return data

    def _buffer_range(self, obj: JsonObject, buffer_index: int, offset: int, length: int, what: str,
                      *, load: bool = True) -> memoryview | None:
        """Bytes [offset, offset+length) of a buffer, checked against the buffer's byteLength (None when
        the buffer has no data, or when ``load`` is False: check the range only, read nothing)."""
        buffer_length = self.buffers[buffer_index].int("byteLength", minimum=1)
        if offset + length > buffer_length:
            obj.fail(f"{what} byteOffset {offset} + byteLength {length} = {offset + length} runs past the end "
                     f"of buffers[{buffer_index}] ({buffer_length} bytes)")
        data = self.buffer(buffer_index) if load else None
        return None if data is None else data[offset : offset + length]

    def _use_meshopt(self) -> bool:
        """Whether the meshopt decoder is installed (looked up once, on the first compressed view)."""
        if self._meshopt_available is None:
            self._meshopt_available = meshopt_ext.available()
        return self._meshopt_available

    # -- buffer views ---------------------------------------------------------------------------
    def view(self, index: int) -> ViewData:
        """bufferView ``index``: its bytes and stride, range-checked; meshopt-compressed views decoded."""
        cached = self._view_cache.get(index)
        if cached is not None:
            return cached
        obj = self.views[index]
        buffer_index = obj.index("buffer", "buffers", len(self.buffers))
        offset = obj.int("byteOffset", 0)
        length = obj.int("byteLength", minimum=1)
        stride = obj.int("byteStride", None, minimum=4, maximum=252)
        if stride is not None and stride % 4:
            obj.fail(f"byteStride {stride} must be a multiple of 4", "byteStride")

        ext = obj.extension(meshopt_ext.EXTENSION)
        if ext is None:
            data = self._buffer_range(obj, buffer_index, offset, length, "the view's")
        else:
            params = meshopt_ext.MeshoptView(ext, obj, len(self.buffers))
            # With the decoder, the view's own (fallback) buffer is never read, only range-checked.
            data = self._buffer_range(obj, buffer_index, offset, length, "the view's", load=not self._use_meshopt())
            if data is None:
                # Decoder present, or absent with no fallback data (then decode() raises
                # UnsupportedExtensionError naming the package).
                data = self._decode_meshopt(ext, params)
        if data is None:
            obj.fail(f"buffers[{buffer_index}] has no data (no uri, and it is not the GLB BIN chunk)")
        view = ViewData(data, stride)
        self._view_cache[index] = view
        return view

    def _decode_meshopt(self, ext: JsonObject, params: meshopt_ext.MeshoptView) -> memoryview:
        """The decoded bytes of one compressed range, decoded once however many views name it, and
        charged to the file's budget before decoding (the sum over distinct ranges is what counts)."""
        if not self._decoded:
            self._check_meshopt_total()
        key = params.key
        cached = self._decoded.get(key)
        if cached is not None:
            return cached
        compressed = self._buffer_range(ext, params.buffer, params.byte_offset, params.byte_length,
                                        "the compressed data's")
        if compressed is None:
            ext.fail(f"buffers[{params.buffer}], which should hold the compressed data, has no data")
        size = params.count * params.byte_stride
        self.budget.charge(size, ext.where, f"{params.count} x {params.byte_stride} bytes decoded from "
                                            f"{params.byte_length} compressed bytes")
        decoded = memoryview(params.decode(compressed, self.file))
        self.loaded_bytes += len(decoded)
        self._decoded[key] = decoded
        return decoded

    def _check_meshopt_total(self) -> None:
        """Before the first decode: the decoded sizes of every distinct compressed range of the file,
        summed, must fit its budget (each view alone is within its ratio, many together need not be)."""
        ranges: dict[tuple, int] = {}
        for obj in self.views:
            ext = obj.extension(meshopt_ext.EXTENSION)
            if ext is not None:
                params = meshopt_ext.MeshoptView(ext, obj, len(self.buffers))
                ranges[params.key] = params.count * params.byte_stride
        total = sum(ranges.values())
        if not self.budget.allows(total):
            raise BudgetError(self.file, "bufferViews", self.budget.refusal(
                total, f"{len(ranges)} {meshopt_ext.EXTENSION} ranges decoded"))

    def plain_view(self, index: int) -> memoryview | None:
        """The bytes of bufferView ``index`` when it is the common, simple kind (index in range, no
        byteStride, no extension, in range of a buffer that has data), checked with plain dict reads;
        None for anything else (then :meth:`view` reads it and words any error)."""
        cached = self._view_cache.get(index)
        if cached is not None:
            return cached.data if cached.stride is None else None
        if not 0 <= index < len(self.views):
            return None
        obj = self.views.raw[index]
        if "byteStride" in obj or "extensions" in obj:
            return None
        buffer_index = obj.get("buffer")
        offset = obj.get("byteOffset", 0)
        length = obj.get("byteLength")
        if (type(buffer_index) is not int or type(offset) is not int or type(length) is not int
                or not 0 <= buffer_index < len(self.buffers) or offset < 0 or length < 1):
            return None
        declared = self.buffers.raw[buffer_index].get("byteLength")
        if type(declared) is not int or offset + length > declared:
            return None
        buffer = self._buffer_cache.get(buffer_index)
        if buffer is None:
            buffer = self.buffer(buffer_index)  # as view() would, after the same range check
            if buffer is None:
                return None
        data = buffer[offset : offset + length]
        self._view_cache[index] = ViewData(data, None)
        return data

    def view_bytes(self, index: int) -> bytes:
        """A copy of a bufferView's bytes (for images and Draco streams)."""
        return bytes(self.view(index).data)

