"""The loaded model, format-neutral: what a reader (``skeletal.io``) produces and what the rig, clip and
skin stages consume.

Conventions used everywhere in skeletal:

* Indices here are *file* indices (glTF node / mesh / skin numbers). The :class:`~skeletal.rig.Rig`
  maps them to its flat parent-first order.
* Quaternions are ``(x, y, z, w)``.
* Matrices are 4x4, **row-major**, acting on column vectors: ``p_world = M @ p``. glTF stores
  column-major; readers transpose on load, writers transpose back.
* Arrays are numpy; vertex attributes are float32 after decoding (normalised integers decoded as the
  glTF spec says), indices are uint32.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter, is_
from typing import Any

import numpy as np

from .errors import ClipError

Interpolation = str  # "STEP" | "LINEAR" | "CUBICSPLINE"
TrackPath = str  # "translation" | "rotation" | "scale" | "weights"


@dataclass
class Node:
    """One scene-graph node. ``translation``/``rotation``/``scale`` are the rest TRS (float64);
    a node given by ``matrix`` in the file has it decomposed here and the original kept in ``matrix``."""

    name: str
    children: list[int] = field(default_factory=list)
    translation: np.ndarray = field(default_factory=lambda: np.zeros(3))
    rotation: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, 0.0, 1.0]))
    scale: np.ndarray = field(default_factory=lambda: np.ones(3))
    matrix: np.ndarray | None = None  # (4, 4) row-major, only when the file gave a matrix
    mesh: int | None = None
    skin: int | None = None
    weights: np.ndarray | None = None  # default morph weights overriding the mesh's
    parent: int = -1  # filled by the reader from ``children``; -1 for roots
    extras: dict[str, Any] = field(default_factory=dict)  # glTF ``extras`` (JSON object), kept as read
    camera: int | None = None  # index into Document.cameras
    light: int | None = None  # KHR_lights_punctual: index into Document.lights
    visible: bool = True  # KHR_node_visibility (hides the node and everything below it)


@dataclass
class MorphTarget:
    """Per-vertex displacements, each (V, 3) float32 or None when the target does not move it."""

    position: np.ndarray | None = None
    normal: np.ndarray | None = None
    tangent: np.ndarray | None = None  # (V, 3): glTF morph tangents have no w


@dataclass
class Primitive:
    """One draw call's geometry.

    ``joints``/``weights``: all influence sets concatenated, shape (V, 4*n_sets); joints are uint32
    indices into the skin's joint list, weights float32 exactly as stored (renormalised by the skin
    stage). ``attributes`` keeps every other attribute by glTF name (``TEXCOORD_0``, ``COLOR_0``,...).
    """

    positions: np.ndarray  # (V, 3) float32
    normals: np.ndarray | None = None  # (V, 3) float32
    tangents: np.ndarray | None = None  # (V, 4) float32, w = handedness
    indices: np.ndarray | None = None  # (I,) uint32
    mode: int = 4  # GL primitive mode, 4 = TRIANGLES
    joints: np.ndarray | None = None  # (V, K) uint32
    weights: np.ndarray | None = None  # (V, K) float32
    targets: list[MorphTarget] = field(default_factory=list)
    attributes: dict[str, np.ndarray] = field(default_factory=dict)
    material: int | None = None

    @property
    def vertex_count(self) -> int:
        return int(self.positions.shape[0])

    @property
    def influence_count(self) -> int:
        return 0 if self.joints is None else int(self.joints.shape[1])


@dataclass
class Mesh:
    name: str
    primitives: list[Primitive]
    weights: np.ndarray | None = None  # default morph weights (n_targets,)
    target_names: list[str] | None = None


@dataclass
class Skin:
    name: str
    joints: np.ndarray  # (J,) int64 file node indices
    inverse_bind: np.ndarray  # (J, 4, 4) float64 row-major; identity when the file has none
    skeleton: int | None = None  # file node index of the skeleton root, if given


@dataclass
class Channel:
    """One animated property of one node.

    ``times``: (K,) float32, strictly increasing. ``values``: (K, C) float32 for STEP/LINEAR, (3K, C)
    for CUBICSPLINE laid out [in-tangent, value, out-tangent] per key, as glTF stores them. C is 3 for
    translation/scale, 4 for rotation (xyzw), the morph target count for weights.
    """

    node: int
    path: TrackPath
    interpolation: Interpolation
    times: np.ndarray
    values: np.ndarray


_PACKED_PATHS = ("translation", "rotation", "scale", "weights")  # codes as skeletal.clip.PATH_CODE
_PACKED_INTERPOLATIONS = ("STEP", "LINEAR", "CUBICSPLINE")  # codes as skeletal.clip.INTERP_CODE


@dataclass
class PackedChannels:
    """A reader's channels of one animation laid out for the sampling kernels, so that neither the
    reader nor the clip stage goes channel by channel: per channel its file ``node``, ``path`` code
    (0-3: translation, rotation, scale, weights, as :data:`skeletal.clip.PATH_CODE`), ``interp`` code (as
    :data:`skeletal.clip.INTERP_CODE`), value ``width``; ``key_start``/``value_start`` (n+1,) offsets
    into ``times`` (every channel's key times, float32) and ``values`` (every channel's values,
    flattened, float32). ``source`` is the float32 data the channels come from (a view of the file's
    buffer) and ``time_at``/``value_at`` where each channel's times and values start in it: the
    :class:`Channel` objects, made on first use, are read-only views of it, channels with one input
    accessor sharing one times array, as a reader gives them."""

    node: np.ndarray
    path: np.ndarray
    interp: np.ndarray
    width: np.ndarray
    key_start: np.ndarray
    value_start: np.ndarray
    times: np.ndarray
    values: np.ndarray
    source: np.ndarray
    time_at: np.ndarray
    value_at: np.ndarray
    _made: tuple | None = field(default=None, init=False, repr=False, compare=False)
    #: Whether a clip already uses these arrays (a second clip of them gets copies).
    taken: bool = field(default=False, init=False, repr=False, compare=False)

    def make_channels(self) -> list[Channel]:
        """The Channel objects (remembered, so that :meth:`describes` can tell whether they changed)."""
        source = self.source
        keys = np.diff(self.key_start)
        rows = np.diff(self.value_start) // self.width
        shared = {a: source[a : a + k] for a, k in zip(self.time_at.tolist(), keys.tolist())}
        channels = [
            Channel(n, _PACKED_PATHS[p], _PACKED_INTERPOLATIONS[i], shared[t], source[v : v + r * w].reshape(r, w))
            for n, p, i, t, v, r, w in zip(self.node.tolist(), self.path.tolist(), self.interp.tolist(),
                                           self.time_at.tolist(), self.value_at.tolist(), rows.tolist(),
                                           self.width.tolist())
        ]
        self._made = (list(map(_CHANNEL_KEY, channels)), list(map(_TIMES, channels)), list(map(_VALUES, channels)))
        return channels

    def describes(self, channels: list[Channel]) -> bool:
        """Whether ``channels`` are still the ones :meth:`make_channels` made: the same nodes, paths and
        interpolations, and the very same times and values arrays."""
        if self._made is None:
            return False
        keys, times, values = self._made
        return (len(channels) == len(keys) and list(map(_CHANNEL_KEY, channels)) == keys
                and all(map(is_, map(_TIMES, channels), times)) and all(map(is_, map(_VALUES, channels), values)))


_CHANNEL_KEY = attrgetter("node", "path", "interpolation")
_TIMES = attrgetter("times")
_VALUES = attrgetter("values")


@dataclass
class PropertyTrack:
    """One animated property: ``pointer`` a JSON pointer into the glTF document
    (``/materials/0/pbrMetallicRoughness/baseColorFactor``), key ``times`` (K,) float32 strictly
    increasing, ``values`` (K, C) float32 ((3K, C) for CUBICSPLINE: in-tangent, value, out-tangent)."""

    pointer: str
    interpolation: str
    times: np.ndarray
    values: np.ndarray

    def __post_init__(self):
        if self.interpolation not in _PACKED_INTERPOLATIONS:
            raise ClipError(f"property {self.pointer}: interpolation {self.interpolation!r} is not one of {_PACKED_INTERPOLATIONS}")
        self.times = np.ascontiguousarray(self.times, dtype=np.float32).reshape(-1)
        values = np.asarray(self.values, dtype=np.float32)
        if values.ndim == 1:
            values = values.reshape(-1, 1)
        rows = len(self.times) * (3 if self.interpolation == "CUBICSPLINE" else 1)
        if not len(self.times):
            raise ClipError(f"property {self.pointer}: no keys")
        if values.shape[0] != rows:
            raise ClipError(f"property {self.pointer}: {len(self.times)} keys need {rows} value rows, got {values.shape[0]}")
        if len(self.times) > 1 and not np.all(np.diff(self.times) > 0):
            raise ClipError(f"property {self.pointer}: key times are not strictly increasing")
        self.values = np.ascontiguousarray(values)

    @property
    def width(self) -> int:
        return int(self.values.shape[1])


@dataclass
class Animation:
    """One animation's channels.

    ``packed``: a reader's :class:`PackedChannels` for them, or None. An animation a reader made with
    :meth:`from_packed` makes its ``channels`` list on first use; the clip stage builds its clip from
    ``packed`` directly while nobody has asked for them (or they are unchanged)."""

    name: str
    channels: list[Channel]
    extras: dict[str, Any] = field(default_factory=dict)  # glTF ``extras`` (JSON object), kept as read
    # The authored length in seconds when the format stores one (Assimp's ``mDuration``); None: the
    # last key time, as glTF.
    duration: float | None = None
    packed: PackedChannels | None = field(default=None, repr=False, compare=False)
    #: KHR_animation_pointer channels on anything but node TRS/weights (those are ``channels``):
    #: :class:`skeletal.clip.PropertyTrack` s.
    properties: list = field(default_factory=list)

    @classmethod
    def from_packed(cls, name: str, packed: PackedChannels, extras: dict[str, Any] | None = None) -> Animation:
        """An animation whose channels are made from ``packed`` when first used."""
        animation = cls.__new__(cls)
        animation.__dict__.update(name=name, extras={} if extras is None else extras, duration=None, packed=packed,
                                  properties=[])
        return animation

    @property
    def channels_made(self) -> bool:
        """False while the channels of an animation made by :meth:`from_packed` have not been asked for."""
        return "channels" in self.__dict__

    def __getattr__(self, name: str) -> Any:
        # Only reached for attributes not set: the channels of a from_packed animation, made once.
        packed = self.__dict__.get("packed")
        if name == "channels" and packed is not None:
            channels = self.__dict__["channels"] = packed.make_channels()
            return channels
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


@dataclass
class TextureTransform:
    """KHR_texture_transform on a texture reference: ``uv' = T(offset) R(rotation) S(scale) uv``.

    ``offset`` and ``scale`` (2,) float64 in UV units, ``rotation`` radians (counter-clockwise in UV
    space, as the extension defines it), ``texcoord`` the TEXCOORD_n it overrides or None.

    >>> TextureTransform(offset=np.array([0.5, 0.0])).matrix()[0].tolist()
    [1.0, 0.0, 0.5]
    """

    offset: np.ndarray = field(default_factory=lambda: np.zeros(2))
    rotation: float = 0.0
    scale: np.ndarray = field(default_factory=lambda: np.ones(2))
    texcoord: int | None = None

    def matrix(self) -> np.ndarray:
        """(3, 3) float64 row-major, acting on column vectors ``(u, v, 1)``."""
        return uv_matrix(self.offset, self.rotation, self.scale)

    @property
    def is_identity(self) -> bool:
        return (not self.offset.any() and self.rotation == 0.0 and bool((self.scale == 1.0).all())
                and self.texcoord is None)


def uv_matrix(offset, rotation: float, scale) -> np.ndarray:
    """The KHR_texture_transform matrix ``T(offset) @ R(rotation) @ S(scale)``, (3, 3) row-major."""
    c, s = np.cos(rotation), np.sin(rotation)
    return np.array([[c * scale[0], s * scale[1], offset[0]],
                     [-s * scale[0], c * scale[1], offset[1]],
                     [0.0, 0.0, 1.0]], dtype=np.float64)


@dataclass
class Material:
    """A glTF material as skeletal draws it: base colour (factor x texture, optionally through a
    KHR_texture_transform), emissive colour (x KHR_materials_emissive_strength), alpha mode and
    cutoff, KHR_materials_unlit. ``fallbacks``: the appearance extensions the material uses that
    skeletal does not draw (it is drawn without them)."""

    name: str
    base_color_factor: np.ndarray = field(default_factory=lambda: np.ones(4))
    metallic_factor: float = 1.0  # glTF defaults: fully metallic, fully rough
    roughness_factor: float = 1.0
    base_color_texture: int | None = None  # index into Document.images (texture resolved to its image)
    base_color_texcoord: int = 0  # which TEXCOORD_n the texture uses
    double_sided: bool = False
    base_color_transform: TextureTransform | None = None  # KHR_texture_transform of baseColorTexture
    unlit: bool = False  # KHR_materials_unlit: shown as its base colour, no lighting
    emissive_factor: np.ndarray = field(default_factory=lambda: np.zeros(3))  # linear RGB
    emissive_strength: float = 1.0  # KHR_materials_emissive_strength
    alpha_mode: str = "OPAQUE"  # OPAQUE, MASK or BLEND
    alpha_cutoff: float = 0.5
    fallbacks: list[str] = field(default_factory=list)


class Image:
    """Encoded image bytes (PNG/JPEG/...) with its MIME type; decoding is left to the renderer.

    ``data`` may be given as a ``memoryview`` (a reader's view of the file's bytes): it is copied to
    ``bytes`` the first time it is read, so that loading a model to animate it does not copy its
    textures.

    >>> Image("dot", memoryview(b"\\x89PNG..."), "image/png").data[:4]
    b'\\x89PNG'
    """

    __slots__ = ("name", "_data", "mime_type")

    def __init__(self, name: str, data: bytes | memoryview | None, mime_type: str | None):
        self.name = name
        self._data = data
        self.mime_type = mime_type

    @property
    def data(self) -> bytes | None:
        if self._data is not None and type(self._data) is not bytes:
            self._data = bytes(self._data)
        return self._data  # type: ignore[return-value]

    @data.setter
    def data(self, value: bytes | memoryview | None) -> None:
        self._data = value

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Image)
        return (self.name, self.data, self.mime_type) == (other.name, other.data, other.mime_type)

    __hash__ = None  # type: ignore[assignment]  # mutable, as the dataclass it replaces

    def __repr__(self) -> str:
        return f"Image(name={self.name!r}, data={self.data!r}, mime_type={self.mime_type!r})"

    def __reduce__(self):
        return (Image, (self.name, self.data, self.mime_type))


@dataclass
class Document:
    """A whole model file. ``path`` is where it was read from (used in error messages)."""

    path: str
    nodes: list[Node]
    meshes: list[Mesh]
    skins: list[Skin]
    animations: list[Animation]
    scenes: list[list[int]]  # root node indices of each scene
    scene: int | None  # default scene
    materials: list[Material] = field(default_factory=list)
    images: list[Image] = field(default_factory=list)
    extensions_used: list[str] = field(default_factory=list)
    extensions_required: list[str] = field(default_factory=list)
    asset_info: dict[str, Any] = field(default_factory=dict)  # glTF "asset": generator, version
    scene_names: list[str] = field(default_factory=list)  # a name for each of ``scenes``
    #: The value before animation of every property a KHR_animation_pointer channel animates
    #: (pointer -> float64 array; the schema default where the file gives none).
    pointer_rest: dict[str, np.ndarray] = field(default_factory=dict)
    #: glTF cameras and KHR_lights_punctual lights, as their JSON objects (skeletal draws with its own
    #: camera and light; these are kept so that their animation means something and is written back).
    cameras: list[dict[str, Any]] = field(default_factory=list)
    lights: list[dict[str, Any]] = field(default_factory=list)
