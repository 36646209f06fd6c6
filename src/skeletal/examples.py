"""Sample models that come with skeletal, so that the README's examples run from any folder.

The samples are made by skeletal itself (the built-in character of :mod:`skeletal.demo`, written by
the glTF and BVH writers) the first time they are asked for, and kept in a cache folder:
``$SKELETAL_CACHE_DIR``, else ``$XDG_CACHE_HOME/skeletal``, else ``~/.cache/skeletal`` (a folder
under the system's temporary folder when none of those can be written). The folder's name carries
a hash of the code that makes them, so a newer skeletal never reads an older sample.

>>> import skeletal
>>> asset = skeletal.load(skeletal.examples.path("demo.glb"))
>>> [clip.name for clip in asset.clips]
['idle', 'walk', 'run', 'wave']
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Callable

from .errors import SkeletalError


def _write_demo_glb(path: str) -> None:
    from .demo import build_demo_document
    from .io.gltf_write import write_gltf

    write_gltf(build_demo_document(), path)


def _write_demo_gltf(path: str) -> None:
    from .demo import build_demo_document
    from .io.gltf_write import write_gltf

    write_gltf(build_demo_document(), path)


def _write_walk_bvh(path: str) -> None:
    from .demo import demo_asset
    from .tools.export import write_bvh

    write_bvh(demo_asset(), "walk", path, fps=30)


def _write_blinking_gltf(path: str) -> None:
    """A triangle whose material glows and fades over a second: one KHR_animation_pointer channel on
    ``/materials/0/emissiveFactor`` (the smallest file that animates a property other than a node's)."""
    import base64
    import json
    import struct

    positions, times, glow = (0, 0, 0, 1, 0, 0, 0, 1, 0), (0.0, 0.5, 1.0), (0, 0, 0, 1, 0.6, 0.1, 0, 0, 0)
    data = struct.pack("<9f", *positions) + struct.pack("<3f", *times) + struct.pack("<9f", *glow)
    uri = "data:application/octet-stream;base64," + base64.b64encode(data).decode("ascii")
    pointer = {"KHR_animation_pointer": {"pointer": "/materials/0/emissiveFactor"}}
    gltf = {
        "asset": {"version": "2.0", "generator": "skeletal.examples"},
        "extensionsUsed": ["KHR_animation_pointer"],
        "scene": 0, "scenes": [{"name": "blinking", "nodes": [0]}], "nodes": [{"name": "triangle", "mesh": 0}],
        "meshes": [{"primitives": [{"attributes": {"POSITION": 0}, "material": 0}]}],
        "materials": [{"name": "glow", "emissiveFactor": [0, 0, 0]}],
        "buffers": [{"byteLength": len(data), "uri": uri}],
        "bufferViews": [{"buffer": 0, "byteLength": 36}, {"buffer": 0, "byteOffset": 36, "byteLength": 12},
                        {"buffer": 0, "byteOffset": 48, "byteLength": 36}],
        "accessors": [
            {"bufferView": 0, "componentType": 5126, "count": 3, "type": "VEC3", "min": [0, 0, 0], "max": [1, 1, 0]},
            {"bufferView": 1, "componentType": 5126, "count": 3, "type": "SCALAR", "min": [0.0], "max": [1.0]},
            {"bufferView": 2, "componentType": 5126, "count": 3, "type": "VEC3"},
        ],
        "animations": [{"name": "blink", "samplers": [{"input": 1, "output": 2}],
                        "channels": [{"sampler": 0, "target": {"path": "pointer", "extensions": pointer}}]}],
    }
    with open(path, "w", encoding="utf-8") as f:
        json.dump(gltf, f)


#: Sample name -> (what it is, the function that writes it).
SAMPLES: dict[str, tuple[str, Callable[[str], None]]] = {
    "demo.glb": ("the built-in character: 22 joints, one skinned mesh, clips idle, walk, run, wave", _write_demo_glb),
    "demo.gltf": ("the built-in character as .gltf with its buffer embedded", _write_demo_gltf),
    "walk.bvh": ("the built-in character's walk as BVH motion capture (30 fps)", _write_walk_bvh),
    "blinking.gltf": ("a triangle whose material glows and fades (clip blink, 1 s): KHR_animation_pointer on "
                      "/materials/0/emissiveFactor", _write_blinking_gltf),
}

#: The modules whose code makes the samples: their source is hashed into the cache folder's name.
_SOURCES = ("demo/__init__.py", "examples.py", "io/gltf_write.py", "tools/export.py")


def names() -> list[str]:
    """The sample names :func:`path` knows.

    >>> "demo.glb" in skeletal.examples.names()
    True
    """
    return list(SAMPLES)


def path(name: str = "demo.glb") -> str:
    """The path of sample ``name`` (see :data:`SAMPLES`), written on first use.

    Raises :class:`skeletal.SkeletalError` for an unknown name.

    >>> skeletal.examples.path("walk.bvh")          # doctest: +ELLIPSIS
    '.../walk.bvh'
    """
    if name not in SAMPLES:
        raise SkeletalError(f"no sample named {name!r}: the samples are {', '.join(SAMPLES)}")
    folder = _folder()
    target = os.path.join(folder, name)
    if not os.path.isfile(target):
        _, write = SAMPLES[name]
        fd, partial = tempfile.mkstemp(prefix=f".{name}.", suffix=os.path.splitext(name)[1], dir=folder)
        os.close(fd)
        try:
            write(partial)
            os.replace(partial, target)  # atomic: a second process sees the whole file or none
        finally:
            if os.path.exists(partial):
                os.remove(partial)
    return target


def _code_hash() -> str:
    here = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for source in _SOURCES:
        try:
            digest.update((here / source).read_bytes())
        except OSError:
            digest.update(source.encode())
    return digest.hexdigest()[:12]


def _folder() -> str:
    """The cache folder of this code's samples (made when missing)."""
    bases = []
    if os.environ.get("SKELETAL_CACHE_DIR"):
        bases.append(Path(os.environ["SKELETAL_CACHE_DIR"]))
    if os.environ.get("XDG_CACHE_HOME"):
        bases.append(Path(os.environ["XDG_CACHE_HOME"]) / "skeletal")
    bases.append(Path.home() / ".cache" / "skeletal")
    bases.append(Path(tempfile.gettempdir()) / f"skeletal-{os.getuid() if hasattr(os, 'getuid') else 'user'}")
    name = f"examples-{_code_hash()}"
    for base in bases:
        folder = base / name
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        if os.access(folder, os.W_OK):
            return os.fspath(folder)
    raise SkeletalError(f"cannot make a folder for the sample models (tried {', '.join(map(str, bases))}): "
                        "set SKELETAL_CACHE_DIR to a writable folder")
