"""KHR_animation_pointer: which JSON pointers skeletal animates, and what they name.

The pointer grammar the reader accepts (``/nodes/N/...``, ``/materials/N/...``, ``/cameras/N/...``,
``/extensions/KHR_lights_punctual/lights/N/...``), each supported property's width and schema default
(:data:`POINTER_KINDS`). Node translation, rotation, scale and weights by pointer are read as
ordinary node channels (:data:`NODE_TRACK_PATHS`); the sampling of the rest is
:mod:`skeletal.properties`.

>>> parse_pointer("/materials/2/emissiveFactor")
('material', 2, 'emissiveFactor')
>>> pointer_target("/cameras/0/perspective/yfov").width
1
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

__all__ = ["CURVE_PREFIX", "curve_pointer", "BASE_COLOR_TRANSFORM", "POINTER_KINDS", "NODE_TRACK_PATHS", "PointerTarget", "parse_pointer", "pointer_target"]


@dataclass(frozen=True)
class PointerTarget:
    """What a supported pointer names: ``kind`` (node, material, light, camera), the object's
    ``index``, the ``property`` (the pointer's tail, e.g. ``pbrMetallicRoughness/baseColorFactor``),
    its ``width`` (floats) and ``default`` (the schema's value when the file gives none)."""

    kind: str
    index: int
    property: str
    width: int
    default: tuple[float, ...]


#: Named float curves of a clip (footstep events, IK and blend weights) live next to the pointer
#: properties under ``curve/<name>`` (not a JSON pointer: they animate nothing in the glTF document).
CURVE_PREFIX = "curve/"


def curve_pointer(name: str) -> str:
    """The property key of the named float curve ``name``.

    >>> curve_pointer("foot_l")
    'curve/foot_l'
    """
    return CURVE_PREFIX + name


#: The tail of the base colour texture's KHR_texture_transform properties.
BASE_COLOR_TRANSFORM = "pbrMetallicRoughness/baseColorTexture/extensions/KHR_texture_transform/"
#: Supported property tails by object kind: width and schema default. Node TRS and weights are read
#: as node tracks (``NODE_TRACK_PATHS``), not property tracks.
POINTER_KINDS: dict[str, dict[str, tuple[int, tuple[float, ...]]]] = {
    "node": {"extensions/KHR_node_visibility/visible": (1, (1.0,))},
    "material": {
        "pbrMetallicRoughness/baseColorFactor": (4, (1.0, 1.0, 1.0, 1.0)),
        "pbrMetallicRoughness/metallicFactor": (1, (1.0,)),
        "pbrMetallicRoughness/roughnessFactor": (1, (1.0,)),
        "emissiveFactor": (3, (0.0, 0.0, 0.0)),
        "alphaCutoff": (1, (0.5,)),
        "extensions/KHR_materials_emissive_strength/emissiveStrength": (1, (1.0,)),
        BASE_COLOR_TRANSFORM + "offset": (2, (0.0, 0.0)),
        BASE_COLOR_TRANSFORM + "rotation": (1, (0.0,)),
        BASE_COLOR_TRANSFORM + "scale": (2, (1.0, 1.0)),
    },
    "light": {
        "color": (3, (1.0, 1.0, 1.0)),
        "intensity": (1, (1.0,)),
        "range": (1, (float("inf"),)),  # absent: no cutoff
        "spot/innerConeAngle": (1, (0.0,)),
        "spot/outerConeAngle": (1, (np.pi / 4.0,)),
    },
    "camera": {
        "perspective/yfov": (1, (0.8,)),
        "perspective/znear": (1, (0.01,)),
        "perspective/zfar": (1, (float("inf"),)),  # absent: an infinite projection
        "perspective/aspectRatio": (1, (1.0,)),
        "orthographic/xmag": (1, (1.0,)),
        "orthographic/ymag": (1, (1.0,)),
        "orthographic/znear": (1, (0.01,)),
        "orthographic/zfar": (1, (100.0,)),
    },
}
#: Node pointer tails read as ordinary node tracks.
NODE_TRACK_PATHS = ("translation", "rotation", "scale", "weights")
_POINTER = re.compile(r"^/(nodes|materials|cameras|extensions/KHR_lights_punctual/lights)/(0|[1-9][0-9]{0,8})/(.+)$")
_KIND = {"nodes": "node", "materials": "material", "cameras": "camera", "extensions/KHR_lights_punctual/lights": "light"}


def parse_pointer(pointer: str) -> tuple[str, int, str] | None:
    """``(kind, index, tail)`` of a pointer to a node, material, camera or KHR_lights_punctual light;
    None for any other pointer.

    >>> parse_pointer("/materials/2/emissiveFactor")
    ('material', 2, 'emissiveFactor')
    """
    match = _POINTER.match(pointer)
    if match is None:
        return None
    return _KIND[match.group(1)], int(match.group(2)), match.group(3)


def pointer_target(pointer: str) -> PointerTarget | None:
    """The :class:`PointerTarget` of a supported property pointer (not node TRS/weights); None when
    skeletal does not read that pointer."""
    parsed = parse_pointer(pointer)
    if parsed is None:
        return None
    kind, index, tail = parsed
    known = POINTER_KINDS[kind].get(tail)
    if known is None:
        return None
    return PointerTarget(kind, index, tail, known[0], known[1])
