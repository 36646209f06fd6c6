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


@dataclass
class PackedChannels:
    """A reader's channels of one animation laid out for the sampling kernels, so that the clip stage
    need not rebuild it channel by channel: per channel its file ``node``, ``path`` code (0-2:
    translation, rotation, scale, as :data:`skeletal.clip.PATH_CODE`), ``interp`` code (as
    :data:`skeletal.clip.INTERP_CODE`), value ``width``; ``key_start``/``value_start`` (n+1,) offsets
    into ``times`` (every channel's key times, float32) and ``values`` (every channel's values,
    flattened, float32). ``channels`` are the Channel objects it was made with: the layout stands for
    the animation only while ``Animation.channels`` still holds exactly those, unchanged."""

    channels: list[Channel]
    node: np.ndarray
    path: np.ndarray
    interp: np.ndarray
    width: np.ndarray
    key_start: np.ndarray
    value_start: np.ndarray
    times: np.ndarray
    values: np.ndarray
    _keys: list = field(init=False, repr=False, compare=False)
    _times: list = field(init=False, repr=False, compare=False)
    _values: list = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        channels = self.channels
        self._keys = list(map(_CHANNEL_KEY, channels))
        self._times = list(map(_TIMES, channels))
        self._values = list(map(_VALUES, channels))

    def describes(self, channels: list[Channel]) -> bool:
        """Whether ``channels`` are still the channels packed here: the same nodes, paths and
        interpolations, and the very same times and values arrays."""
        return (len(channels) == len(self._keys) and list(map(_CHANNEL_KEY, channels)) == self._keys
                and all(map(is_, map(_TIMES, channels), self._times))
                and all(map(is_, map(_VALUES, channels), self._values)))


_CHANNEL_KEY = attrgetter("node", "path", "interpolation")
_TIMES = attrgetter("times")
_VALUES = attrgetter("values")


@dataclass
class Animation:
    """One animation's channels. ``packed``: a reader's :class:`PackedChannels` for them, or None."""

    name: str
    channels: list[Channel]
    extras: dict[str, Any] = field(default_factory=dict)  # glTF ``extras`` (JSON object), kept as read
    # The authored length in seconds when the format stores one (Assimp's ``mDuration``); None: the
    # last key time, as glTF.
    duration: float | None = None
    packed: PackedChannels | None = field(default=None, repr=False, compare=False)


@dataclass
class Material:
    name: str
    base_color_factor: np.ndarray = field(default_factory=lambda: np.ones(4))
    metallic_factor: float = 1.0  # glTF defaults: fully metallic, fully rough
    roughness_factor: float = 1.0
    base_color_texture: int | None = None  # index into Document.images (texture resolved to its image)
    base_color_texcoord: int = 0  # which TEXCOORD_n the texture uses
    double_sided: bool = False


@dataclass
class Image:
    """Encoded image bytes (PNG/JPEG/...) with its MIME type; decoding is left to the renderer."""

    name: str
    data: bytes | None
    mime_type: str | None


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
