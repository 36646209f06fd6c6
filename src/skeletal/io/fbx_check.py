"""Pre-validation of FBX and Collada bytes before Assimp parses them.

Assimp's parsers trust the file: a crafted binary FBX can make it read past the buffer, allocate what
an array header claims (``10^9`` elements), or recurse until the stack overflows. So skeletal walks
the file's structure in Python first and refuses anything inconsistent, with one
:class:`~skeletal.errors.ModelError` naming the file and the byte offset (binary) or line (text):

* binary FBX (``Kaydara FBX Binary``): every node record's end offset lies after its header and
  inside its parent; property list lengths add up; property types are known; array lengths agree with
  their byte counts (raw) or are within deflate's 1032:1 ratio of them (zlib); strings fit; nesting
  is at most :data:`MAX_NESTING` deep; the top-level list ends with a null record; all zlib arrays
  together inflate to at most :data:`MAX_INFLATE_TOTAL` times the file's size (zlib bombs);
* ASCII FBX: every ``*N`` array count is possible for the file's size; braces balance and nest at
  most :data:`MAX_NESTING` deep;
* Collada (UTF-8 or UTF-16): no DTD or entities (entity expansion, external entities), every
  ``count="N"`` is possible for the file's size, elements nest at most :data:`MAX_DEPTH` deep.

Nothing is allocated from what the file claims; the walk is iterative.
"""

from __future__ import annotations

import os
import re
import struct

import numpy as np

from skeletal.errors import ModelError

__all__ = ["check", "check_binary_fbx", "check_ascii_fbx", "check_collada", "MAX_NESTING", "MAX_DEPTH", "MAX_INFLATE_TOTAL"]

#: Deepest nesting of FBX records (real files: under 10).
MAX_NESTING = 64
#: Deepest node hierarchy / XML nesting accepted (real skeletons: a few dozen).
MAX_DEPTH = 1000

BINARY_MAGIC = b"Kaydara FBX Binary  \x00"
_SCALARS = {ord("Y"): 2, ord("C"): 1, ord("I"): 4, ord("F"): 4, ord("D"): 8, ord("L"): 8}
_ARRAYS = {ord("f"): 4, ord("d"): 8, ord("l"): 8, ord("i"): 4, ord("b"): 1, ord("c"): 1}
_BLOBS = (ord("S"), ord("R"))
#: deflate cannot expand more than about 1032:1
_MAX_INFLATE = 1032
#: All zlib arrays of a file together may claim at most this many times the file's size (plus
#: :data:`INFLATE_ALLOWANCE`): Assimp allocates what each array claims before inflating it, so a file
#: of many arrays each within deflate's 1032:1 is a zlib bomb (1 MB -> 1 GB). Real FBX float and
#: index arrays compress 2..10:1.
MAX_INFLATE_TOTAL = 32
#: Bytes of inflated arrays any file may claim whatever its size.
INFLATE_ALLOWANCE = 64 << 20


def check(data: bytes, file: str) -> None:
    """Validate ``data`` by the file's suffix and content; a no-op for formats without a checker."""
    suffix = os.path.splitext(file)[1].lower()
    if data.startswith(BINARY_MAGIC):
        check_binary_fbx(data, file)
    elif suffix == ".fbx":
        check_ascii_fbx(data, file)
    elif suffix in (".dae", ".zae") or data.lstrip()[:5] == b"<?xml" and b"COLLADA" in data[:4096]:
        if suffix == ".zae":
            return  # a zip: Assimp's own reader bounds it
        check_collada(data, file)


def _fail(file: str, where: str, detail: str):
    raise ModelError(file, where, detail)


def check_binary_fbx(data: bytes, file: str) -> None:
    """Walk every node record of a binary FBX file (see the module docstring)."""
    size = len(data)
    if size < 27:
        _fail(file, "header", f"the file is {size} bytes, shorter than the 27-byte FBX header")
    version = struct.unpack_from("<I", data, 23)[0]
    if not 6000 <= version < 10000:
        _fail(file, "header", f"FBX version {version} is not a binary FBX 6.x/7.x version")
    wide = version >= 7500
    head = struct.Struct("<QQQB" if wide else "<IIIB")
    null_len = head.size
    u32 = struct.Struct("<I")
    arr = struct.Struct("<III")
    pos = 27
    # stack of (end offset of the enclosing record, its name, its offset); top level ends at file size
    stack: list[tuple[int, str, int]] = [(size, "top level", 0)]
    records = 0
    inflated = 0  # bytes all zlib arrays claim, against the file's budget
    inflate_budget = MAX_INFLATE_TOTAL * size + INFLATE_ALLOWANCE
    while True:
        limit, parent_name, parent_at = stack[-1]
        if pos + null_len > limit:
            if len(stack) == 1:
                _fail(file, f"offset {pos}", "the file ends without the null record that closes the top-level list")
            _fail(file, f"offset {pos}", f"record {parent_name!r} at offset {parent_at}: its children run past its end")
        end, n_props, props_len, name_len = head.unpack_from(data, pos)
        if end == 0:  # a null record closes the current list
            if n_props or props_len or name_len:
                _fail(file, f"offset {pos}", "a null record (end offset 0) with a non-zero header")
            pos += null_len
            if len(stack) == 1:
                return  # the footer follows; Assimp does not parse it
            if pos != limit:
                _fail(file, f"offset {pos}", f"record {parent_name!r} at offset {parent_at} ends at {limit}, "
                                             f"but its child list closes at {pos}")
            stack.pop()
            continue
        records += 1
        at = pos
        pos += null_len
        if pos + name_len > limit:
            _fail(file, f"offset {at}", "the record's name runs past its parent's end")
        name = data[pos:pos + name_len].decode("latin-1")
        pos += name_len
        where = f"offset {at} (record {name!r})"
        if not pos + props_len <= end <= limit:
            _fail(file, where, f"end offset {end} is outside {pos + props_len}..{limit}")
        if n_props > props_len:
            _fail(file, where, f"{n_props} properties cannot fit in {props_len} bytes")
        props_end = pos + props_len
        for p in range(n_props):
            if pos >= props_end:
                _fail(file, where, f"property {p} starts past the property list ({props_len} bytes)")
            code = data[pos]
            pos += 1
            if code in _SCALARS:
                pos += _SCALARS[code]
            elif code in _ARRAYS:
                if pos + 12 > props_end:
                    _fail(file, where, f"property {p}: the array header runs past the property list")
                length, encoding, nbytes = arr.unpack_from(data, pos)
                pos += 12
                expected = length * _ARRAYS[code]
                if encoding == 0:
                    if nbytes != expected:
                        _fail(file, where, f"property {p}: array of {length} elements stored in {nbytes} bytes, "
                                           f"expected {expected}")
                elif encoding == 1:
                    if expected > _MAX_INFLATE * nbytes + 64:
                        _fail(file, where, f"property {p}: array claims {length} elements ({expected} bytes) from "
                                           f"{nbytes} compressed bytes: impossible for zlib")
                    inflated += expected
                    if inflated > inflate_budget:
                        _fail(file, where, f"property {p}: the zlib arrays so far inflate to {inflated} bytes, more than "
                                           f"{MAX_INFLATE_TOTAL}x the {size}-byte file (a zlib bomb)")
                else:
                    _fail(file, where, f"property {p}: unknown array encoding {encoding}")
                pos += nbytes
            elif code in _BLOBS:
                if pos + 4 > props_end:
                    _fail(file, where, f"property {p}: the length runs past the property list")
                pos += 4 + u32.unpack_from(data, pos)[0]
            else:
                _fail(file, where, f"property {p} has unknown type code {code!r}")
            if pos > props_end:
                _fail(file, where, f"property {p} runs past the property list ({props_len} bytes)")
        if pos != props_end:
            _fail(file, where, f"the properties take {pos - (props_end - props_len)} bytes, the header says {props_len}")
        if pos < end:  # nested records, closed by a null record ending exactly at ``end``
            if len(stack) > MAX_NESTING:
                _fail(file, where, f"records nest more than {MAX_NESTING} deep")
            stack.append((end, name, at))
        elif records > size:
            _fail(file, where, "more records than bytes")


_ASCII_COUNT = re.compile(rb"\*(\d+)")


def _line(data: bytes, offset: int) -> str:
    return f"line {data.count(NEWLINE, 0, offset) + 1}"


NEWLINE = b"\n"


def check_ascii_fbx(data: bytes, file: str) -> None:
    """Array counts and brace nesting of an ASCII FBX file (see the module docstring)."""
    if data.lstrip()[:1] not in (b";", b"F", b"{", b"") and b"FBX" not in data[:256]:
        _fail(file, "line 1", "neither a binary FBX header nor FBX text")
    limit = len(data) // 2 + 1
    for match in _ASCII_COUNT.finditer(data):
        if len(match.group(1)) > 12 or int(match.group(1)) > limit:
            _fail(file, _line(data, match.start()), f"array count {match.group(1).decode()} is more values "
                                                    f"than a {len(data)}-byte file can hold")
    _check_nesting(data, file, ord("{"), ord("}"), MAX_NESTING, "braces")


def _check_nesting(data: bytes, file: str, open_code: int, close_code: int, limit: int, what: str) -> None:
    raw = np.frombuffer(data, dtype=np.uint8)
    nz = np.flatnonzero((raw == open_code) | (raw == close_code))
    if not len(nz):
        return
    depth = np.cumsum(np.where(raw[nz] == open_code, 1, -1))
    deepest = int(depth.max())
    if deepest > limit:
        _fail(file, _line(data, int(nz[int(np.argmax(depth > limit))])), f"{what} nest more than {limit} deep")
    if what == "braces" and int(depth.min()) < 0:
        _fail(file, _line(data, int(nz[int(np.argmax(depth < 0))])), "a closing brace without an opening one")


_XML_COUNT = re.compile(rb'count=["\x27](\d+)')


def _utf8_view(data: bytes, file: str) -> bytes:
    """``data`` as UTF-8 for the checks: XML parsers also read UTF-16 (BOM or ``<\\0?\\0``), where a
    byte search for ``<!DOCTYPE`` would find nothing."""
    head = data[:4]
    encoding = None
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        encoding = "utf-16"
    elif head.startswith(b"<\x00") or head[1:2] == b"<" and head[:1] == b"\x00":
        encoding = "utf-16-le" if head.startswith(b"<\x00") else "utf-16-be"
    elif head.startswith((b"\x00\x00\xfe\xff", b"\xff\xfe\x00\x00")):
        _fail(file, "line 1", "UTF-32 XML is not supported")
    if encoding is None:
        return data
    try:
        return data.decode(encoding).encode("utf-8")
    except UnicodeDecodeError as exc:
        _fail(file, "line 1", f"not valid {encoding.upper()} text at byte {exc.start}")


def check_collada(data: bytes, file: str) -> None:
    """DTDs, array counts and element depth of a Collada file (see the module docstring)."""
    data = _utf8_view(data, file)
    for marker in (b"<!DOCTYPE", b"<!ENTITY"):
        at = data.find(marker)  # a DOCTYPE may follow any amount of comments
        if at >= 0:
            _fail(file, _line(data, at), f"{marker.decode()} is not allowed (entity expansion, external entities)")
    limit = len(data) // 2 + 1
    for match in _XML_COUNT.finditer(data):
        if len(match.group(1)) > 12 or int(match.group(1)) > limit:
            _fail(file, _line(data, match.start()), f"count=\"{match.group(1).decode()}\" is more values than a "
                                                    f"{len(data)}-byte file can hold")
    # Element depth in one vectorised pass: "<x" opens, "</" and "/>" close ("<?", "<!" neither).
    raw = np.frombuffer(data, dtype=np.uint8)
    lt = np.flatnonzero(raw[:-1] == ord("<"))
    after = raw[lt + 1]
    opens = lt[(after != ord("/")) & (after != ord("?")) & (after != ord("!"))]
    closes = np.concatenate([lt[after == ord("/")], np.flatnonzero((raw[:-1] == ord("/")) & (raw[1:] == ord(">")))])
    if len(opens):
        at = np.concatenate([opens, closes])
        step = np.concatenate([np.ones(len(opens), np.int32), -np.ones(len(closes), np.int32)])
        order = np.argsort(at, kind="stable")
        depth = np.cumsum(step[order])
        if int(depth.max()) > MAX_DEPTH:
            _fail(file, _line(data, int(at[order][int(np.argmax(depth > MAX_DEPTH))])), f"elements nest more than {MAX_DEPTH} deep")
