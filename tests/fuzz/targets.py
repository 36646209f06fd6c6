"""Fuzz targets: one function per reader that skeletal implements itself, taking the file's bytes.

Each target feeds the bytes to the reader and returns quietly when the reader accepts them (after
checking that what it produced is sane) or refuses them with a :class:`skeletal.SkeletalError`.
Anything else (any other exception, an inconsistent result) propagates: that is a finding, and the
fuzzer (``tests/fuzz/harness.py``, atheris) saves the input. Crashes, hangs and allocations over the
limit are caught by the fuzzer itself (``-timeout``, ``-rss_limit_mb``).

The same functions replay the saved findings in ``tests/fuzz/regressions/<target>/`` in the normal
test run (``tests/test_fuzz.py``), with no fuzzer installed.

>>> from targets import TARGETS                    # doctest: +SKIP
>>> TARGETS["bvh"](b"HIERARCHY\\nROOT r\\n{\\n}\\nMOTION\\n")   # doctest: +SKIP
"""

from __future__ import annotations

import os
import tempfile
import warnings
from collections.abc import Callable

import numpy as np

import skeletal
from skeletal.document import Document
from skeletal.errors import SkeletalError

#: The folder URIs of fuzzed glTF files resolve in: empty, so a relative URI names nothing there.
_URI_ROOT = tempfile.mkdtemp(prefix="skeletal-fuzz-uris-")


class Finding(AssertionError):
    """The reader accepted the input but produced something inconsistent."""


def _finite(name: str, array) -> None:
    if array is not None and not np.all(np.isfinite(np.asarray(array, dtype=np.float64))):
        raise Finding(f"{name} holds NaN or inf after a successful read")


def check_document(doc: Document) -> None:
    """What every reader promises about a document it returns: finite transforms and keys, valid
    parent links, and an Asset (rig + clips) that builds with finite clip lengths."""
    n = len(doc.nodes)
    for i, node in enumerate(doc.nodes):
        _finite(f"nodes[{i}].translation", node.translation)
        _finite(f"nodes[{i}].rotation", node.rotation)
        _finite(f"nodes[{i}].scale", node.scale)
        _finite(f"nodes[{i}].matrix", node.matrix)
        if not -1 <= node.parent < n:
            raise Finding(f"nodes[{i}].parent {node.parent} is not a node")
    for k, skin in enumerate(doc.skins):
        _finite(f"skins[{k}].inverse_bind", skin.inverse_bind)
    for a, animation in enumerate(doc.animations):
        for c, channel in enumerate(animation.channels):
            _finite(f"animations[{a}].channels[{c}].times", channel.times)
            _finite(f"animations[{a}].channels[{c}].values", channel.values)
    asset = skeletal.Asset(doc)
    _finite("the rig's rest pose", asset.rig.rest)
    for clip in asset.clips:
        if not np.isfinite(clip.duration) or clip.duration < 0:
            raise Finding(f"clip {clip.name!r} has duration {clip.duration}")


def _scratch_file(name: str, data: bytes) -> str:
    path = os.path.join(_URI_ROOT, name)
    with open(path, "wb") as out:
        out.write(data)
    return path


def fuzz_bvh(data: bytes) -> None:
    """The BVH reader, exactly as ``skeletal.load`` calls it (:func:`skeletal.io.bvh.read_bvh` on a
    scratch file: decoding, the binary check, the parse)."""
    from skeletal.io.bvh import read_bvh

    try:
        doc = read_bvh(_scratch_file("fuzz.bvh", data))
    except SkeletalError:
        return
    check_document(doc)


def fuzz_gltf(data: bytes) -> None:
    """The glTF reader (:func:`skeletal.io.gltf.read_gltf` after its file read): the GLB container or
    JSON text, the JSON document, accessors, buffers (data URIs; file URIs resolve in an empty folder),
    and the Document it builds."""
    from skeletal.io.glb import parse_container
    from skeletal.io.gltf import _GltfReader
    from skeletal.io.jsonobj import JsonObject

    try:
        document, glb_bin = parse_container(data, "fuzz.glb")
        doc = _GltfReader(JsonObject("fuzz.glb", "", document), glb_bin, _URI_ROOT, file_bytes=len(data)).read()
        check_document(doc)
    except SkeletalError:
        return


def fuzz_fbx(data: bytes) -> None:
    """The FBX pre-validator (:func:`skeletal.io.fbx_check.check` on a ``.fbx``: binary or ASCII)."""
    from skeletal.io import fbx_check

    try:
        fbx_check.check(data, "fuzz.fbx")
    except SkeletalError:
        return


def fuzz_collada(data: bytes) -> None:
    """The Collada pre-validator (:func:`skeletal.io.fbx_check.check` on a ``.dae``)."""
    from skeletal.io import fbx_check

    try:
        fbx_check.check(data, "fuzz.dae")
    except SkeletalError:
        return


def fuzz_usd(data: bytes) -> None:
    """USD (``skeletal.io.usd.read_usd``; the ``usd`` helper's reader, through OpenUSD's ``pxr``).

    The bytes go to a ``.usda`` file in a scratch folder (``pxr`` reads files, not bytes) and through
    ``read_usd`` + :func:`check_document`. Without ``skeletal.io.usd`` or usd-core the target raises
    NotImplementedError and the harness and tests say it is not available. ``pxr`` is C++: a crash
    inside it ends the fuzzer (the saved input is then a finding for the ``usd`` reader's pre-checks).
    """
    if not usd_available():
        raise NotImplementedError("skeletal.io.usd or usd-core (pxr) is not installed: the USD fuzz target cannot run")
    from skeletal.io.usd import read_usd

    global _usd_runs
    _usd_runs += 1
    path = _scratch_file(f"fuzz-{_usd_runs}.usda", data)  # a new name each time: pxr caches layers by path
    try:
        # in this process: the fuzzer sees the coverage of skeletal's checks (the confinement walk,
        # the prim bound, the reader), which the isolated child would hide from it
        doc = read_usd(path, isolate=False)
    except SkeletalError:
        return
    finally:
        os.remove(path)
    check_document(doc)


_usd_runs = 0


def usd_available() -> bool:
    """Whether the USD target can run (``skeletal.io.usd`` and usd-core's ``pxr`` import)."""
    try:
        import pxr.Usd  # noqa: F401 - imported only to learn whether they exist

        import skeletal.io.usd  # noqa: F401
    except ImportError:
        return False
    return True


def fuzz_any(data: bytes) -> None:
    """Every reader on the same bytes: each format given another format's content must be refused
    with a SkeletalError (or read), never crash."""
    for target in (fuzz_bvh, fuzz_gltf, fuzz_fbx, fuzz_collada):
        target(data)


TARGETS: dict[str, Callable[[bytes], None]] = {
    "bvh": fuzz_bvh,
    "gltf": fuzz_gltf,
    "fbx": fuzz_fbx,
    "collada": fuzz_collada,
    "any": fuzz_any,
    "usd": fuzz_usd,
}


def quiet() -> None:
    """Silence the readers' warnings (a fuzzer calls them millions of times)."""
    warnings.simplefilter("ignore")
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
