"""Animated properties other than node transforms: the KHR_animation_pointer targets.

A glTF file with ``KHR_animation_pointer`` animates any property by JSON pointer. Node translation,
rotation, scale and morph weights become ordinary :class:`skeletal.clip.Track` s; everything else
(material factors, texture transforms, lights, cameras, node visibility) becomes a
:class:`PropertyTrack` next to them in :attr:`skeletal.clip.Clip.properties`.

Like morph weights, every animated property of an asset lives in one flat float64 array, laid out by
a :class:`PropertyLayout` (``asset.properties``): property ``p`` (a pointer) owns
``values[start[p] : start[p + 1]]``, its rest value (the file's, or the schema default) in ``rest``.
Sampling is batch-first and compiled (:func:`sample_properties`: (T, M) for T times; the Mixer blends
its actions' values into ``Mixer.property_values`` (B, M), see :mod:`skeletal.playback.properties`)
and shares the TRS tracks' key search and interpolation (:func:`skeletal.sampling.sample_track_into`):
STEP, LINEAR (component-wise lerp) and CUBICSPLINE (the glTF Hermite spline).

>>> import numpy as np
>>> track = PropertyTrack("/materials/0/emissiveFactor", "LINEAR", np.array([0, 1], np.float32),
...                       np.array([[0, 0, 0], [1, 0.5, 0]], np.float32))
>>> layout = PropertyLayout({"/materials/0/emissiveFactor": np.zeros(3)})
>>> clip = skeletal.Clip("glow", [], properties=[track])        # doctest: +SKIP
>>> sample_properties(clip, layout, [0.5])[0].tolist()           # doctest: +SKIP
[0.5, 0.25, 0.0]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np
from numba import njit, prange

from .clip import INTERP_CODE, LOOP_CODE
from ..document import PropertyTrack
from ..errors import ClipError
from ..io.pointer import (BASE_COLOR_TRANSFORM, CURVE_PREFIX, NODE_TRACK_PATHS, POINTER_KINDS, PointerTarget, curve_pointer,
                         parse_pointer, pointer_target)
from .sampling import loop_time, sample_track_into

if TYPE_CHECKING:
    from .clip import Clip

__all__ = ["PropertyTrack", "PropertyLayout", "PointerTarget", "parse_pointer", "pointer_target", "sample_properties",
           "NODE_TRACK_PATHS", "material_values", "node_visibility", "curve_pointer",
           "POINTER_KINDS"]


# ---------------------------------------------------------------------------------------------------
# The flat layout of an asset's animated properties
# ---------------------------------------------------------------------------------------------------
class PropertyLayout:
    """Where each animated property lives in one flat float64 array (as morph weights do).

    ``pointers`` (P,) in first-seen order, ``start`` (P+1,) int64 offsets, ``rest`` (M,) float64 the
    values when nothing animates them. Built from ``{pointer: rest value}``.

    >>> layout = PropertyLayout({"/cameras/0/perspective/yfov": np.array([0.7])})
    >>> layout.slice("/cameras/0/perspective/yfov"), layout.rest.tolist()
    (slice(0, 1, None), [0.7])
    """

    def __init__(self, rest: dict[str, np.ndarray]):
        self.pointers = list(rest)
        self.index = {p: i for i, p in enumerate(self.pointers)}
        widths = [len(np.atleast_1d(rest[p])) for p in self.pointers]
        self.start = np.zeros(len(widths) + 1, np.int64)
        np.cumsum(np.asarray(widths, np.int64), out=self.start[1:])
        self.rest = (np.concatenate([np.asarray(rest[p], np.float64).reshape(-1) for p in self.pointers])
                     if self.pointers else np.zeros(0))

    def __len__(self) -> int:
        return len(self.pointers)

    @property
    def size(self) -> int:
        """M: the floats of all properties together."""
        return int(self.start[-1])

    def slice(self, pointer: str) -> slice:
        i = self.index[pointer]
        return slice(int(self.start[i]), int(self.start[i + 1]))

    def value(self, values: np.ndarray, pointer: str, default=None) -> np.ndarray | None:
        """``pointer``'s part of ``values`` (..., M); ``default`` when the layout does not hold it."""
        if pointer not in self.index:
            return default
        return values[..., self.slice(pointer)]

    @property
    def curve_names(self) -> list[str]:
        """The named float curves (``curve/<name>`` properties) the asset's clips carry."""
        return [p[len(CURVE_PREFIX):] for p in self.pointers if p.startswith(CURVE_PREFIX)]

    def curve(self, values: np.ndarray, name: str) -> np.ndarray:
        """The named float curve ``name`` in ``values`` (..., M): (...,); KeyError for an unknown name.

        >>> layout = PropertyLayout({"curve/foot_l": np.zeros(1)})
        >>> layout.curve(np.array([[0.25], [1.0]]), "foot_l").tolist()
        [0.25, 1.0]
        """
        key = curve_pointer(name)
        if key not in self.index:
            raise KeyError(f"no curve named {name!r} (curves: {', '.join(self.curve_names) or 'none'})")
        return values[..., int(self.start[self.index[key]])]

    def offsets(self, clip: Clip) -> np.ndarray:
        """(K,) int64: where each of ``clip``'s property tracks writes in the flat array. A track whose
        pointer the layout does not hold raises :class:`ClipError`."""
        out = np.empty(len(clip.properties), np.int64)
        for k, track in enumerate(clip.properties):
            i = self.index.get(track.pointer)
            if i is None:
                raise ClipError(f"clip {clip.name!r} animates {track.pointer}, which this asset does not have")
            if int(self.start[i + 1] - self.start[i]) != track.width:
                raise ClipError(f"clip {clip.name!r}: {track.pointer} has {track.width} values per key, "
                                f"the asset's property has {int(self.start[i + 1] - self.start[i])}")
            out[k] = self.start[i]
        return out


@dataclass
class PackedProperties:
    """A clip's property tracks in the packed form the kernels read (as :class:`skeletal.clip.Clip`
    packs its node tracks): key and value ranges per track, widths, interpolation codes, and where in
    the flat property array each track writes."""

    key_start: np.ndarray
    times: np.ndarray
    value_start: np.ndarray
    values: np.ndarray
    width: np.ndarray
    interp: np.ndarray
    offset: np.ndarray
    kind: np.ndarray  # all 0 (never a rotation): what sample_track_into reads as the path

    @classmethod
    def of(cls, tracks: Sequence[PropertyTrack], offsets: np.ndarray) -> PackedProperties:
        n = len(tracks)
        key_start = np.zeros(n + 1, np.int64)
        value_start = np.zeros(n + 1, np.int64)
        np.cumsum([len(t.times) for t in tracks], out=key_start[1:])
        np.cumsum([t.values.size for t in tracks], out=value_start[1:])
        times = np.concatenate([t.times for t in tracks]) if n else np.zeros(0, np.float32)
        values = np.concatenate([t.values.reshape(-1) for t in tracks]) if n else np.zeros(0, np.float32)
        return cls(key_start, times, value_start, values, np.array([t.width for t in tracks], np.int64),
                   np.array([INTERP_CODE[t.interpolation] for t in tracks], np.int64),
                   np.asarray(offsets, np.int64), np.zeros(n, np.int64))

    @classmethod
    def concat(cls, parts: Sequence[PackedProperties]) -> tuple[PackedProperties, np.ndarray]:
        """Several clips' packs as one, and (C+1,) where each clip's tracks start in it."""
        track_start = np.zeros(len(parts) + 1, np.int64)
        np.cumsum([len(p.width) for p in parts], out=track_start[1:])
        key_base = np.cumsum([0] + [len(p.times) for p in parts])
        value_base = np.cumsum([0] + [len(p.values) for p in parts])

        def starts(name, base):
            pieces = [getattr(p, name)[:-1] + base[i] for i, p in enumerate(parts)]
            return np.concatenate(pieces + [np.array([base[-1]], np.int64)]).astype(np.int64)

        def join(name, dtype):
            return np.concatenate([getattr(p, name) for p in parts]).astype(dtype) if parts else np.zeros(0, dtype)

        packed = cls(starts("key_start", key_base), join("times", np.float32), starts("value_start", value_base),
                     join("values", np.float32), join("width", np.int64), join("interp", np.int64),
                     join("offset", np.int64), join("kind", np.int64))
        return packed, track_start


def pack_properties(clip: Clip, layout: PropertyLayout) -> PackedProperties:
    """``clip``'s property tracks packed for ``layout`` (made once per clip and layout)."""
    cached = clip.__dict__.get("_packed_properties")
    if cached is not None and cached[0] is layout and cached[1] is clip.properties:
        return cached[2]
    packed = PackedProperties.of(clip.properties, layout.offsets(clip))
    clip.__dict__["_packed_properties"] = (layout, clip.properties, packed)
    return packed


# ---------------------------------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------------------------------
@njit(cache=True)
def sample_properties_into(t, first, last, key_start, times, value_start, values, width, interp, kind, offset, out):
    """Write property tracks ``first .. last - 1`` at clip-local time ``t`` into ``out`` (M,) at their
    offsets; properties no track animates are left as they are."""
    for k in range(first, last):
        sample_track_into(k, t, key_start, times, value_start, values, width, interp, kind, 0, out, offset[k])


@njit(cache=True, parallel=True)
def sample_properties_many(query_times, duration, loop, rest, key_start, times, value_start, values, width, interp,
                           kind, offset, out):
    """(T, M) property values of one clip at T query times (through the loop mode), in parallel."""
    for i in prange(len(query_times)):
        out[i] = rest
        t = loop_time(query_times[i], duration, loop)
        sample_properties_into(t, 0, len(width), key_start, times, value_start, values, width, interp, kind, offset, out[i])


def sample_properties(clip: Clip, layout: PropertyLayout, times: Sequence[float] | np.ndarray | float,
                      loop: str = "clamp") -> np.ndarray:
    """The asset's animated properties under ``clip`` at query ``times``: (T, M) float64, laid out by
    ``layout`` (``asset.properties``); properties the clip does not animate hold their rest values."""
    query = np.atleast_1d(np.asarray(times, dtype=np.float64))
    out = np.empty((len(query), layout.size), np.float64)
    p = pack_properties(clip, layout)
    sample_properties_many(query, float(clip.duration), LOOP_CODE[loop], layout.rest, p.key_start, p.times,
                           p.value_start, p.values, p.width, p.interp, p.kind, p.offset, out)
    return out


# ---------------------------------------------------------------------------------------------------
# What the animated properties change in a drawing
# ---------------------------------------------------------------------------------------------------
def node_visibility(asset, values: np.ndarray | None = None) -> np.ndarray:
    """(nodes,) bool by file node index: whether each node is drawn under KHR_node_visibility: its
    own ``visible`` (animated in ``values`` (M,), laid out by ``asset.properties``, when given) and
    every ancestor's (a hidden node hides everything below it)."""
    nodes = asset.document.nodes
    own = np.array([n.visible for n in nodes], dtype=bool)
    layout = asset.properties
    if values is not None and len(layout):
        for i in range(len(nodes)):
            v = layout.value(values, f"/nodes/{i}/extensions/KHR_node_visibility/visible")
            if v is not None:
                own[i] = bool(v[0] >= 0.5)
    rig = asset.rig
    shown = own[rig.node_of]  # rig order: parents first
    for r in range(len(shown)):
        p = rig.parents[r]
        if p >= 0 and not shown[p]:
            shown[r] = False
    return shown[rig.index_of]


def material_values(asset, material: int, values: np.ndarray) -> dict[str, np.ndarray | float]:
    """The drawn values of ``material`` under the animated ``values`` (M,): ``base_color`` (4,),
    ``emissive`` (3,) times the emissive strength, ``alpha_cutoff`` (for MASK materials, else -1) and
    ``uv`` (3, 3) the base colour texture's transform, row-major; a value the clip does not animate is
    the material's own."""
    from ..document import uv_matrix

    m = asset.document.materials[material]
    layout = asset.properties
    base = f"/materials/{material}/"

    def get(tail, own):
        v = layout.value(values, base + tail)
        return np.asarray(own, np.float64) if v is None else np.asarray(v, np.float64)

    t = m.base_color_transform
    offset = get(BASE_COLOR_TRANSFORM + "offset", t.offset if t is not None else (0.0, 0.0))
    rotation = float(get(BASE_COLOR_TRANSFORM + "rotation", [t.rotation if t is not None else 0.0])[0])
    scale = get(BASE_COLOR_TRANSFORM + "scale", t.scale if t is not None else (1.0, 1.0))
    strength = float(get("extensions/KHR_materials_emissive_strength/emissiveStrength", [m.emissive_strength])[0])
    cutoff = float(get("alphaCutoff", [m.alpha_cutoff])[0]) if m.alpha_mode == "MASK" else -1.0
    return {"base_color": get("pbrMetallicRoughness/baseColorFactor", m.base_color_factor),
            "emissive": get("emissiveFactor", m.emissive_factor) * strength,
            "alpha_cutoff": cutoff, "uv": uv_matrix(offset, rotation, scale)}
