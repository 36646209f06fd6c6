"""The glTF container: a file's bytes -> (JSON document, GLB binary chunk or None).

A ``.glb`` is a 12-byte header (magic ``glTF``, version 2, total length) followed by chunks, each an
8-byte header (length, type) and its data: first the JSON chunk, then optionally the BIN chunk. A
``.gltf`` is the JSON alone. The kind is told by the magic bytes, not by the file name.

The BIN chunk is returned as a ``memoryview`` of the file's bytes, so that accessors can be numpy views
of the file without a copy.
"""

from __future__ import annotations

import json
import struct
from typing import Any

from skeletal.errors import ModelError

GLB_MAGIC = b"glTF"
CHUNK_JSON = 0x4E4F534A  # "JSON" little-endian
CHUNK_BIN = 0x004E4942  # "BIN\0" little-endian
_HEADER = struct.Struct("<4sII")
#: What a glTF 1.0 file (``.gltf`` with version "1.0", or a GLB version 1 container) is told.
GLTF1_HINT = "glTF 1.0 is not supported (this reader reads glTF 2.x; convert the file with gltf-pipeline or Blender)"
_CHUNK_HEADER = struct.Struct("<II")


def parse_container(data: bytes, file: str) -> tuple[Any, memoryview | None]:
    """Split a .gltf/.glb file's bytes into its parsed JSON and its GLB BIN chunk (None for .gltf)."""
    if len(data) == 0:
        raise ModelError(file, None, "the file is empty")
    if data[:4] == GLB_MAGIC:
        json_bytes, bin_chunk = split_glb(data, file)
        return parse_json(json_bytes, file), bin_chunk
    return parse_json(data, file), None


def split_glb(data: bytes, file: str) -> tuple[bytes | memoryview, memoryview | None]:
    """The JSON chunk and the BIN chunk (or None) of a GLB file, every length checked."""
    if len(data) < _HEADER.size:
        raise ModelError(file, "GLB header", f"the file has {len(data)} bytes, a GLB header needs {_HEADER.size}")
    magic, version, length = _HEADER.unpack_from(data, 0)
    if magic != GLB_MAGIC:
        raise ModelError(file, "GLB header", f"bad magic {magic!r}, expected {GLB_MAGIC!r}")
    if version == 1:  # the binary glTF 1.0 container (KHR_binary_glTF)
        raise ModelError(file, "GLB header", f"{GLTF1_HINT}: the GLB header says version 1")
    if version != 2:
        raise ModelError(file, "GLB header", f"version {version} is not supported (only glTF 2)")
    if length != len(data):
        what = "truncated" if length > len(data) else "longer than its header says"
        raise ModelError(file, "GLB header", f"the header says {length} bytes, the file has {len(data)} ({what})")

    view = memoryview(data)
    json_chunk: memoryview | None = None
    bin_chunk: memoryview | None = None
    offset = _HEADER.size
    chunk_number = 0
    while offset < length:
        where = f"GLB chunk {chunk_number}"
        if length - offset < _CHUNK_HEADER.size:
            raise ModelError(file, where, f"{length - offset} bytes left, a chunk header needs {_CHUNK_HEADER.size}")
        chunk_length, chunk_type = _CHUNK_HEADER.unpack_from(data, offset)
        start = offset + _CHUNK_HEADER.size
        if chunk_length > length - start:
            raise ModelError(file, where, f"chunk length {chunk_length} runs past the end of the file ({length - start} bytes left)")
        chunk = view[start : start + chunk_length]
        if chunk_number == 0:
            if chunk_type != CHUNK_JSON:
                raise ModelError(file, where, f"the first chunk must be JSON, found type 0x{chunk_type:08x}")
            json_chunk = chunk
        elif chunk_type == CHUNK_BIN:
            if chunk_number != 1:
                raise ModelError(file, where, "the BIN chunk must directly follow the JSON chunk")
            bin_chunk = chunk
        # Chunks of other types are to be ignored (glTF 2.0 spec, GLB file format).
        offset = start + chunk_length
        chunk_number += 1
    if json_chunk is None:
        raise ModelError(file, "GLB header", "the file has no JSON chunk")
    return json_chunk, bin_chunk


try:  # the faster JSON parser, when installed (a dependency of skeletal; optional here)
    import orjson as _orjson
except ImportError:  # pragma: no cover - json does the same, slower
    _orjson = None


#: Byte classes for spotting long integer literals: digits -> "0", "." -> ".", e/E -> "e", else " ".
_DIGIT_CLASSES = bytes(48 if 48 <= c <= 57 else c if c == 46 else 101 if c in (69, 101) else 32 for c in range(256))
#: An integer of 20+ digits not inside a decimal fraction (a false alarm, e.g. digits in a name, only
#: costs the slower parser).
_LONG_INTEGER = b" " + b"0" * 20


def _reject_constant(name: str) -> Any:
    # Python's json accepts NaN/Infinity; JSON (and so glTF) does not.
    raise ValueError(f"{name} is not valid JSON")


def parse_json(raw: bytes | memoryview, file: str) -> Any:
    """Parse glTF JSON (UTF-8, BOM tolerated, GLB space/NUL padding stripped), errors as ModelError."""
    where = "JSON"
    raw = bytes(raw)
    if _orjson is not None and _LONG_INTEGER not in raw.translate(_DIGIT_CLASSES):
        # orjson parses strict JSON (UTF-8 checked, no NaN/Infinity, 1024 levels) from the bytes in
        # about a third of json's time (from a str it would re-encode it first). Whatever it refuses
        # goes through the path below, which words the error as before. It reads an integer past 64
        # bits as a float where json keeps it exact, so a document with an integer of 20 or more digits
        # (spotted on the bytes above, ~0.1 ms for Soldier) is left to json.
        body = raw[3:] if raw.startswith(b"\xef\xbb\xbf") else raw
        try:
            document = _orjson.loads(body.rstrip(b" \t\r\n\x00"))
        except _orjson.JSONDecodeError:
            pass
        else:
            if isinstance(document, dict):
                return document
    try:
        text = raw.decode("utf-8-sig").rstrip(" \t\r\n\x00")
    except UnicodeDecodeError as exc:
        raise ModelError(file, where, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if not text:
        raise ModelError(file, where, "the JSON is empty")
    try:
        document = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise ModelError(file, where, f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except ValueError as exc:  # from _reject_constant, or number conversion limits
        raise ModelError(file, where, f"not valid JSON: {exc}") from None
    except RecursionError:
        raise ModelError(file, where, "the JSON is nested too deeply to parse") from None
    if not isinstance(document, dict):
        raise ModelError(file, where, "the top level of a glTF file must be a JSON object")
    return document
