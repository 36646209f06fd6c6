"""What the glTF reader checks every object against, shared by its parts (:mod:`skeletal.io.gltf`,
:mod:`skeletal.io.gltf_animation`, :mod:`skeletal.io.gltf_fast`).

* :class:`Expect` and the ``EXPECT_*`` tables: the accessor types and component types each use of an
  accessor may have (glTF 2.0 spec tables, widened by KHR_mesh_quantization);
* :class:`_Tables`: the lengths of the top-level arrays, for index checks;
* :class:`_ReaderState`: the state every part of one read shares (declared here, set by
  ``_GltfReader.__init__``) and the checked accessor lookup;
* :func:`bounded_extras`: ``extras`` kept only as JSON objects nested at most :data:`MAX_EXTRAS_DEPTH` deep.

Example::

    >>> EXPECT_KEY_TIMES.describe()
    'SCALAR of FLOAT'
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass

import numpy as np

from skeletal.io.accessors import (
    BYTE,
    COMPONENT_NAMES,
    FLOAT,
    SHORT,
    UNSIGNED_BYTE,
    UNSIGNED_INT,
    UNSIGNED_SHORT,
    AccessorInfo,
    Accessors,
)
from skeletal.io.jsonobj import JsonObject

INTERPOLATIONS = ("LINEAR", "STEP", "CUBICSPLINE")
_ALL_INTS = frozenset({BYTE, UNSIGNED_BYTE, SHORT, UNSIGNED_SHORT})
_SIGNED_INTS = frozenset({BYTE, SHORT})
_UNSIGNED_INTS = frozenset({UNSIGNED_BYTE, UNSIGNED_SHORT})


# ---------------------------------------------------------------------------------------------------
# What each use of an accessor may be (glTF 2.0 spec tables, widened by KHR_mesh_quantization)
# ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Expect:
    """The accessor ``types`` a use allows, whether FLOAT components are allowed, and which integer
    component types are allowed normalised and not normalised."""

    types: tuple[str, ...]
    float_ok: bool = True
    normalized: frozenset[int] = frozenset()
    plain: frozenset[int] = frozenset()

    def check(self, obj: JsonObject, key: str, info: AccessorInfo) -> None:
        ct = info.component_type
        ok = info.type in self.types and (
            (ct == FLOAT and self.float_ok)
            or (info.normalized and ct in self.normalized)
            or (not info.normalized and ct in self.plain)
        )
        if not ok:
            obj.fail(f"accessors[{info.index}] is {info.describe()}, expected {self.describe()}", key)

    def describe(self) -> str:
        forms = []
        if self.float_ok:
            forms.append("FLOAT")
        forms += [f"{COMPONENT_NAMES[c]} normalized" for c in sorted(self.normalized)]
        forms += [COMPONENT_NAMES[c] for c in sorted(self.plain)]
        return f"{' or '.join(self.types)} of {', '.join(forms)}"


EXPECT_POSITION = Expect(("VEC3",), normalized=_ALL_INTS, plain=_ALL_INTS)
EXPECT_NORMAL = Expect(("VEC3",), normalized=_SIGNED_INTS)
EXPECT_TANGENT = Expect(("VEC4",), normalized=_SIGNED_INTS)
EXPECT_TEXCOORD = Expect(("VEC2",), normalized=_ALL_INTS, plain=_ALL_INTS)
EXPECT_COLOR = Expect(("VEC3", "VEC4"), normalized=_UNSIGNED_INTS)
EXPECT_JOINTS = Expect(("VEC4",), float_ok=False, plain=_UNSIGNED_INTS | {UNSIGNED_INT})
EXPECT_WEIGHTS = Expect(("VEC4",), normalized=_UNSIGNED_INTS)
EXPECT_TARGET_POSITION = Expect(("VEC3",), normalized=_SIGNED_INTS, plain=_SIGNED_INTS)
EXPECT_TARGET_DIRECTION = Expect(("VEC3",), normalized=_SIGNED_INTS)
EXPECT_INDICES = Expect(("SCALAR",), float_ok=False, plain=_UNSIGNED_INTS | {UNSIGNED_INT})
EXPECT_INVERSE_BIND = Expect(("MAT4",))
EXPECT_KEY_TIMES = Expect(("SCALAR",))
EXPECT_CUSTOM = Expect(tuple(["SCALAR", "VEC2", "VEC3", "VEC4", "MAT2", "MAT3", "MAT4"]),
                       normalized=_ALL_INTS, plain=_ALL_INTS | {UNSIGNED_INT})
#: Animation outputs by target path; translation/scale also quantized (as gltfpack/gltf-transform write).
EXPECT_OUTPUT = {
    "translation": Expect(("VEC3",), normalized=_ALL_INTS, plain=_ALL_INTS),
    "rotation": Expect(("VEC4",), normalized=_ALL_INTS),
    "scale": Expect(("VEC3",), normalized=_ALL_INTS, plain=_ALL_INTS),
    "weights": Expect(("SCALAR",), normalized=_ALL_INTS),
}
_PATH_WIDTH = {"translation": 3, "rotation": 4, "scale": 3}
#: KHR_animation_pointer outputs by width: floats or normalised integers (a boolean is UNSIGNED_BYTE).
EXPECT_POINTER = {1: Expect(("SCALAR",), normalized=_ALL_INTS, plain=_UNSIGNED_INTS),
                  2: Expect(("VEC2",), normalized=_ALL_INTS), 3: Expect(("VEC3",), normalized=_ALL_INTS),
                  4: Expect(("VEC4",), normalized=_ALL_INTS)}


@dataclass
class _Tables:
    """Lengths of the top-level arrays, for index checks."""

    nodes: int = 0
    meshes: int = 0
    skins: int = 0
    materials: int = 0
    textures: int = 0
    images: int = 0
    cameras: int = 0


class _ReaderState:
    """What every part of one glTF read shares; ``_GltfReader.__init__`` sets it all."""

    root: JsonObject  # the glTF JSON document
    file: str  # the file's path, for error messages
    accessors: Accessors
    tables: _Tables
    _checked_times: set[int]  # input accessors already found strictly increasing
    _pointers_warned: set[str]  # unsupported KHR_animation_pointer pointers told once
    pointer_rest: dict[str, np.ndarray]  # see Document.pointer_rest

    def _accessor(self, obj: JsonObject, key: str, expect: Expect) -> AccessorInfo:
        """The accessor ``obj[key]`` refers to, checked to exist and to suit its use."""
        index = obj.index(key, "accessors", len(self.accessors))
        info = self.accessors.info(index)
        expect.check(obj, key, info)
        return info


def _extras(obj: JsonObject) -> dict:
    """An object's ``extras`` when it is a JSON object (the spec allows any value there; anything
    else is application-specific data that skeletal does not use, and is dropped)."""
    return bounded_extras(obj.raw("extras"), obj.file, obj.where)


#: JSON objects and arrays inside one ``extras`` may nest this deep; deeper ones are dropped (with a
#: warning) at load, so that no writer, printer or page later recurses through them.
MAX_EXTRAS_DEPTH = 64


def bounded_extras(extras: object, file: str, where: str) -> dict:
    """``extras`` as a dict when it is a JSON object nested at most :data:`MAX_EXTRAS_DEPTH` deep; {} for
    anything else (the spec allows any value; skeletal keeps objects), with a warning when too deep."""
    if not isinstance(extras, dict):
        return {}
    if extras:
        stack = [(extras, 1)]
        while stack:
            value, depth = stack.pop()
            if depth > MAX_EXTRAS_DEPTH:
                warnings.warn(f"{os.path.basename(file)}: {where}.extras: nested deeper than {MAX_EXTRAS_DEPTH} "
                              "levels; dropped", stacklevel=2)
                return {}
            children = value.values() if isinstance(value, dict) else value
            stack.extend((v, depth + 1) for v in children if isinstance(v, (dict, list)) and v)
    return dict(extras)


def _attribute_expect(name: str) -> Expect:
    """What a vertex attribute's accessor may be, by its glTF name."""
    if name == "POSITION":
        return EXPECT_POSITION
    if name == "NORMAL":
        return EXPECT_NORMAL
    if name == "TANGENT":
        return EXPECT_TANGENT
    if name.startswith("TEXCOORD_"):
        return EXPECT_TEXCOORD
    if name.startswith("COLOR_"):
        return EXPECT_COLOR
    if name.startswith("JOINTS_"):
        return EXPECT_JOINTS
    if name.startswith("WEIGHTS_"):
        return EXPECT_WEIGHTS
    return EXPECT_CUSTOM  # application-specific (_NAME) attributes


#: The common attribute names' expectations, looked up without :func:`_attribute_expect`'s tests.
_ATTRIBUTE_EXPECTS = {"POSITION": EXPECT_POSITION, "NORMAL": EXPECT_NORMAL, "TANGENT": EXPECT_TANGENT,
                      **{f"TEXCOORD_{n}": EXPECT_TEXCOORD for n in range(8)},
                      **{f"COLOR_{n}": EXPECT_COLOR for n in range(4)},
                      **{f"JOINTS_{n}": EXPECT_JOINTS for n in range(4)},
                      **{f"WEIGHTS_{n}": EXPECT_WEIGHTS for n in range(4)}}

