"""What a file looks like from its first bytes, so that a renamed or wrong file gets a useful error.

:func:`load <skeletal.load>` picks a reader by the file's suffix. A BVH file renamed ``.glb`` would
otherwise fail deep in the glTF reader ("not valid JSON"); :func:`check_kind` looks at the first few
hundred bytes first and says what the file looks like and what to do::

    walk.glb: looks like a BVH motion capture file, not glTF; rename it to .bvh

>>> from skeletal.io.sniff import sniff
>>> sniff(b"HIERARCHY\\nROOT Hips")
'bvh'
>>> sniff(b"glTF\\x02\\x00\\x00\\x00")
'glb'
"""

from __future__ import annotations

import os

from ..errors import ModelError

#: How many bytes :func:`sniff` looks at.
HEAD_BYTES = 512

#: kind -> (what the file looks like, the suffix to rename it to or None when it is no model at all).
KINDS: dict[str, tuple[str, str | None]] = {
    "glb": ("a GLB (binary glTF) file", ".glb"),
    "json": ("a JSON (glTF) file", ".gltf"),
    "bvh": ("a BVH motion capture file", ".bvh"),
    "fbx": ("an FBX file", ".fbx"),
    "collada": ("a Collada (XML) file", ".dae"),
    "xml": ("an XML file", None),
    "usdc": ("a binary USD file", ".usdc"),
    "usda": ("a text USD file", ".usda"),
    "usdz": ("a USDZ package", ".usdz"),
    "zip": ("a zip archive (unpack it and load the model inside)", None),
    "png": ("a PNG image, not a model", None),
    "jpeg": ("a JPEG image, not a model", None),
    "gif": ("a GIF image, not a model", None),
    "mp4": ("an MP4 video, not a model", None),
    "npz": ("a numpy .npz archive, not a model", None),
    "pdf": ("a PDF document, not a model", None),
    "html": ("an HTML page, not a model (a download that saved the web page?)", None),
    "gzip": ("a gzip-compressed file (decompress it first)", None),
    "obj": ("a Wavefront OBJ file", ".obj"),
    "text": ("a text file", None),
    "binary": ("binary data of no format skeletal knows", None),
    "empty": ("an empty file", None),
}

#: The kinds each reader accepts, by suffix. A kind outside the list is a wrong or renamed file; a
#: suffix not listed (the other Assimp formats) is only checked against the kinds that are surely not it.
ACCEPTS: dict[str, tuple[str, ...]] = {
    ".glb": ("glb", "json"),
    ".gltf": ("glb", "json"),
    ".bvh": ("bvh", "text", "binary", "empty"),  # the BVH reader names the line at fault itself
    ".fbx": ("fbx", "text"),  # ASCII FBX may open with anything; its own checker looks further
    ".dae": ("collada", "xml"),
    ".usd": ("usdc", "usda"),
    ".usdc": ("usdc", "usda"),
    ".usda": ("usda", "usdc"),
    ".usdz": ("usdz", "zip"),
    ".obj": ("obj", "text"),
}

#: Kinds that are never a model of any suffix (checked for every suffix).
_NEVER_A_MODEL = ("png", "jpeg", "gif", "mp4", "npz", "pdf", "html", "gzip", "empty", "binary")


def sniff(head: bytes) -> str:
    """The kind of file whose first bytes are ``head`` (a key of :data:`KINDS`).

    Binary magics first (GLB, FBX, PNG, JPEG, GIF, zip, gzip, USD crate, PDF), then text (UTF-8 or
    UTF-16 with a byte-order mark): ``HIERARCHY`` (BVH), ``{`` (JSON), ``<`` (XML/Collada/HTML),
    ``; FBX`` / ``FBXHeaderExtension`` (ASCII FBX), ``#usda``; other text is ``"text"``, and bytes
    that are no text ``"binary"``.

    >>> sniff(b"\\x89PNG\\r\\n\\x1a\\n....")
    'png'
    >>> sniff(b"; FBX 7.4.0 project file")
    'fbx'
    """
    if not head:
        return "empty"
    magics = (
        (b"glTF", "glb"), (b"Kaydara FBX Binary", "fbx"), (b"\x89PNG\r\n\x1a\n", "png"), (b"\xff\xd8\xff", "jpeg"),
        (b"GIF87a", "gif"), (b"GIF89a", "gif"), (b"PXR-USDC", "usdc"), (b"%PDF", "pdf"), (b"\x1f\x8b", "gzip"),
    )
    for magic, kind in magics:
        if head.startswith(magic):
            return kind
    if head[4:8] == b"ftyp":
        return "mp4"
    if head.startswith(b"PK\x03\x04"):
        return _zip_kind(head)
    text = _decode(head)
    if text is None:
        return "binary"
    stripped = text.lstrip()
    upper = stripped[:64].upper()
    if upper.startswith("HIERARCHY"):
        return "bvh"
    if stripped.startswith(("{", "[")):
        return "json"
    if stripped.startswith("#usda"):
        return "usda"
    if stripped.startswith(("; FBX", "FBXHeaderExtension")):
        return "fbx"
    if stripped.startswith("<"):
        lower = stripped.lower()
        if "<collada" in lower:
            return "collada"
        if lower.startswith(("<!doctype html", "<html")):
            return "html"
        return "xml"
    lines = [line.split(maxsplit=1)[0] for line in stripped.splitlines()[:20] if line.split()]
    if lines and sum(word in ("v", "vn", "vt", "f", "o", "g", "mtllib", "usemtl", "#") for word in lines) >= len(lines) // 2 + 1:
        return "obj"
    return "text"


def _zip_kind(head: bytes) -> str:
    """A zip whose first entry is a ``.usd*`` layer is a USDZ package; an ``.npy`` entry an .npz."""
    name_length = int.from_bytes(head[26:28], "little")
    name = head[30:30 + name_length].decode("utf-8", "replace").lower()
    if name.endswith((".usd", ".usda", ".usdc")):
        return "usdz"
    if name.endswith(".npy"):
        return "npz"
    return "zip"


def _decode(head: bytes) -> str | None:
    """``head`` as text (UTF-8, or UTF-16 with a BOM), tolerating a character cut at the end."""
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return head.decode("utf-16", "ignore")
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:]
    if head.count(0) > len(head) // 8:
        return None
    try:
        return head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start >= len(head) - 3:  # only the last, cut character is bad
            return head[:exc.start].decode("utf-8")
    printable = sum(32 <= b < 127 or b in (9, 10, 13) for b in head)
    return head.decode("latin-1") if printable >= 0.95 * len(head) else None


def read_head(path: str | os.PathLike) -> bytes:
    """The first :data:`HEAD_BYTES` bytes of the file at ``path``.

    Raises :class:`ModelError` for a folder ("is a folder, not a model file") or an unreadable file.
    """
    file = os.fspath(path)
    if os.path.isdir(file):
        raise ModelError(file, None, "is a folder, not a model file (give the model file inside it)")
    try:
        with open(file, "rb") as f:
            return f.read(HEAD_BYTES)
    except OSError as exc:
        raise ModelError(file, None, f"cannot read the file: {exc.strerror or exc}") from None


def check_kind(path: str | os.PathLike, head: bytes | None = None, *, other_reader: bool = False) -> str:
    """Check that the file at ``path`` looks like its suffix's format; returns the sniffed kind.

    Raises :class:`ModelError` naming the file, what it looks like and what to do when it clearly
    is something else (``x.glb: looks like a BVH motion capture file, not glTF; rename it to .bvh``).
    ``other_reader``: the suffix goes to a reader that does its own checks (Assimp's other formats);
    then only kinds that are surely no such model are reported. Any other suffix is read as glTF.

    >>> check_kind("walk.glb", b"HIERARCHY\\nROOT Hips")        # doctest: +ELLIPSIS
    Traceback (most recent call last):
    skeletal.errors.ModelError: walk.glb: looks like a BVH motion capture file, not glTF; rename it to .bvh
    """
    file = os.fspath(path)
    if head is None:
        head = read_head(file)
    kind = sniff(head)
    suffix = os.path.splitext(file)[1].lower()
    accepted = ACCEPTS.get(suffix)
    if accepted is not None and kind in accepted:
        return kind
    if accepted is None:
        if other_reader and (kind == "binary" or kind not in _NEVER_A_MODEL) and kind not in ("glb", "bvh", "json"):
            # another Assimp format: only the surely-wrong kinds are ours to report. Most of them are
            # binary with magics this module does not list (3DS, MS3D, B3D, MD2/3, MDL, binary .x,
            # PMX, Ogre .mesh, binary STL): "binary" is theirs to judge.
            return kind
        if not other_reader and kind in ("glb", "json"):
            return kind  # an unknown suffix is read as glTF, and this is glTF
    looks, rename = KINDS[kind]
    expected = _FORMAT_NAMES.get(suffix) or (f"a {suffix} model" if other_reader else "a model skeletal reads")
    if kind == "empty":
        raise ModelError(file, None, "the file is empty (0 bytes)")
    if rename is None and (kind in _NEVER_A_MODEL or kind == "zip") and kind != "binary":
        raise ModelError(file, None, f"looks like {looks}")
    if rename is None:
        raise ModelError(file, None, f"looks like {looks}, not {expected}")
    if rename == suffix:
        return kind
    raise ModelError(file, None, f"looks like {looks}, not {expected}; rename it to {rename}")


_FORMAT_NAMES = {
    ".glb": "glTF", ".gltf": "glTF", ".bvh": "BVH", ".fbx": "FBX", ".dae": "Collada", ".usd": "USD",
    ".usdc": "USD", ".usda": "USD", ".usdz": "USDZ", ".obj": "OBJ",
}
