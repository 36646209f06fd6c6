"""Clips: keyframe tracks per (node, path), packed into flat arrays for the sampling kernels.

A :class:`Clip` holds one :class:`Track` per animated property. Key times are float32 (as glTF stores
them) and strictly increasing; values are float32, ``(K, C)`` for STEP and LINEAR, ``(3K, C)`` for
CUBICSPLINE laid out ``[in-tangent, value, out-tangent]`` per key. Rotations are xyzw and used as
stored, like three.js does: glTF requires unit keys, so for conformant files this changes nothing, and
for the few files with slightly non-unit keys (SimpleSkin's norm is 0.99985) the world matrices agree
with the reference viewers instead of differing by the keys' scale. Interpolated results are unit for
unit keys: slerp keeps the norm, and CUBICSPLINE rotations are normalised after interpolation.

A clip lasts from 0 to the latest last key of any track. A clip whose every track has one key has
duration 0 and always shows that key (Soldier's ``TPose``).

>>> import numpy as np
>>> track = Track(node=0, path="translation", interpolation="LINEAR",
...               times=np.array([0, 1], np.float32), values=np.array([[0, 0, 0], [2, 0, 0]], np.float32))
>>> Clip("slide", [track]).duration
1.0
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

from ..document import PropertyTrack  # noqa: F401  (re-exported: a clip's property tracks, next to Track)
from ..errors import ClipError

PATHS = ("translation", "rotation", "scale", "weights")
INTERPOLATIONS = ("STEP", "LINEAR", "CUBICSPLINE")
LOOP_MODES = ("clamp", "repeat", "pingpong")

# Integer codes used by the kernels.
PATH_CODE = {name: i for i, name in enumerate(PATHS)}
INTERP_CODE = {name: i for i, name in enumerate(INTERPOLATIONS)}
LOOP_CODE = {name: i for i, name in enumerate(LOOP_MODES)}
# Where each path lands in a node's 10-wide local pose row (weights go to the morph array instead).
PATH_POSE_OFFSET = np.array([0, 3, 7, -1], dtype=np.int64)
PATH_WIDTH = {"translation": 3, "rotation": 4, "scale": 3}


@dataclass
class Track:
    """One animated property of one node.

    ``node`` is a rig index (see :class:`skeletal.rig.Rig`), ``path`` one of :data:`PATHS`.
    """

    node: int
    path: str
    interpolation: str
    times: np.ndarray  # (K,) float32, strictly increasing
    values: np.ndarray  # (K, C) or (3K, C) float32

    def __post_init__(self):
        if self.path not in PATHS:
            raise ClipError(f"track path {self.path!r} is not one of {PATHS}")
        if self.interpolation not in INTERPOLATIONS:
            raise ClipError(f"interpolation {self.interpolation!r} is not one of {INTERPOLATIONS}")
        self.times = np.ascontiguousarray(self.times, dtype=np.float32).reshape(-1)
        values = np.asarray(self.values, dtype=np.float32)
        if values.ndim == 1:
            values = values.reshape(len(values), 1) if self.path == "weights" else values.reshape(-1, PATH_WIDTH[self.path])
        rows = len(self.times) * (3 if self.interpolation == "CUBICSPLINE" else 1)
        if len(self.times) == 0:
            raise ClipError(f"track {self.path} of node {self.node} has no keys")
        if values.shape[0] != rows:
            raise ClipError(
                f"track {self.path} of node {self.node}: {len(self.times)} keys need {rows} value rows, got {values.shape[0]}"
            )
        if self.path in PATH_WIDTH and values.shape[1] != PATH_WIDTH[self.path]:
            raise ClipError(f"track {self.path} of node {self.node}: values have {values.shape[1]} components")
        if len(self.times) > 1 and not np.all(np.diff(self.times) > 0):
            raise ClipError(f"track {self.path} of node {self.node}: key times are not strictly increasing")
        self.values = np.ascontiguousarray(values)

    @classmethod
    def checked(cls, node: int, path: str, interpolation: str, times: np.ndarray, values: np.ndarray,
                increasing: bool = False) -> Track:
        """A Track from arrays a reader has already checked (``increasing``: the times are known to be
        finite and strictly increasing, e.g. one input accessor shared by many channels and checked
        once). Float32 (K,) times and (rows, width) float32 values are kept as they are; anything else
        takes the full checks of the constructor."""
        if (increasing and path in PATH_WIDTH and interpolation in INTERPOLATIONS and times.dtype == np.float32
                and times.ndim == 1 and times.flags.c_contiguous and len(times) and values.dtype == np.float32
                and values.ndim == 2 and values.flags.c_contiguous and values.shape[1] == PATH_WIDTH[path]
                and values.shape[0] == len(times) * (3 if interpolation == "CUBICSPLINE" else 1)):
            track = cls.__new__(cls)
            track.node, track.path, track.interpolation, track.times, track.values = node, path, interpolation, times, values
            return track
        return cls(node, path, interpolation, times, values)

    @classmethod
    def trusted(cls, node: int, path: str, interpolation: str, times: np.ndarray, values: np.ndarray) -> Track:
        """A Track from arrays already known to be right (a reader's packed channels, see
        :class:`skeletal.document.PackedChannels`): float32 (K,) strictly increasing times and C-contiguous
        float32 (rows, width) values; nothing is checked or copied."""
        track = cls.__new__(cls)
        track.__dict__.update(node=node, path=path, interpolation=interpolation, times=times, values=values)
        return track

    @property
    def key_count(self) -> int:
        return len(self.times)

    @property
    def width(self) -> int:
        return int(self.values.shape[1])


@dataclass
class Clip:
    """A named set of tracks; see the module docstring for the conventions.

    The packed arrays (``key_start``, ``times``, ``value_start``, ``values``, ...) are what the numba
    kernels in :mod:`skeletal.sampling` read; they are built once, here.
    """

    name: str
    tracks: list[Track]
    markers: dict[str, float] = field(default_factory=dict)
    # An additive clip's tracks hold differences from a reference pose, applied on top of a base pose
    # with a weight w (see :mod:`skeletal.cliptools`, ``make_additive``):
    #   translation: t = t_base + w * dt            (dt = t_clip - t_ref)
    #   rotation:    q = q_base * slerp(I, dq, w)   (dq = conj(q_ref) * q_clip, xyzw, Hamilton product)
    #   scale:       s = s_base * (1 + w * (ds - 1)) (ds = s_clip / s_ref)
    #   weights:     m = m_base + w * dm            (dm = m_clip - m_ref)
    additive: bool = False
    #: Names of the nodes this clip animates in the file that lie outside the scene shown (their
    #: tracks are left out: see :func:`skeletal.load`'s ``scene``).
    outside_scene: list[str] = field(default_factory=list)
    #: Animated properties other than node transforms (KHR_animation_pointer: materials, lights,
    #: cameras, visibility): :class:`skeletal.properties.PropertyTrack` s, sampled into the asset's
    #: flat property array (see :mod:`skeletal.properties`). They count towards the duration.
    properties: list = field(default_factory=list)

    def __post_init__(self):
        self._pack()
        self.include_properties()

    def include_properties(self) -> None:
        """Stretch :attr:`duration` to the last key of the property tracks (after they are set)."""
        for track in self.properties:
            self.duration = max(self.duration, float(track.times[-1]))

    def _pack(self) -> None:
        tracks = self.tracks
        n = len(tracks)
        times = [t.times for t in tracks]
        values = [t.values for t in tracks]
        self.key_start = np.zeros(n + 1, dtype=np.int64)
        self.value_start = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, times), np.int64, n), out=self.key_start[1:])
        np.cumsum(np.fromiter((v.size for v in values), np.int64, n), out=self.value_start[1:])
        self.times = np.concatenate(times) if n else np.zeros(0, np.float32)
        self.values = np.concatenate([v.reshape(-1) for v in values]) if n else np.zeros(0, np.float32)
        self.width = np.fromiter((v.shape[1] for v in values), np.int64, n)
        self.interp = np.fromiter((INTERP_CODE[t.interpolation] for t in tracks), np.int64, n)
        self.path = np.fromiter((PATH_CODE[t.path] for t in tracks), np.int64, n)
        self.node = np.fromiter((t.node for t in tracks), np.int64, n)
        # the last key of each track: the entries just before the next track's start
        self.duration = float(self.times[self.key_start[1:] - 1].max()) if n else 0.0

    @classmethod
    def from_layout(cls, name: str, node: np.ndarray, path: np.ndarray, interp: np.ndarray, width: np.ndarray,
                    key_start: np.ndarray, value_start: np.ndarray, times: np.ndarray, values: np.ndarray) -> Clip:
        """A clip given by its packed arrays (as :meth:`_pack` builds them: a reader that gathered every
        track's keys at once hands them over instead of a list of tracks). The arrays must be what
        the constructor would accept: float32 strictly increasing times per track, float32 values,
        paths translation/rotation/scale. Its ``tracks`` are made on first use, as views of
        ``times``/``values``.

        >>> clip = Clip.from_layout("slide", np.array([0]), np.array([0]), np.array([1]), np.array([3]),
        ...                         np.array([0, 2]), np.array([0, 6]), np.array([0, 1], np.float32),
        ...                         np.array([0, 0, 0, 2, 0, 0], np.float32))
        >>> clip.duration, clip.tracks[0].values.tolist()
        (1.0, [[0.0, 0.0, 0.0], [2.0, 0.0, 0.0]])
        """
        clip = cls.__new__(cls)
        clip.__dict__.update(name=name, markers={}, additive=False, outside_scene=[], properties=[], key_start=key_start, value_start=value_start,
                             times=times, values=values, width=width, interp=interp, path=path, node=node,
                             _tracks_from_layout=True)
        n = len(node)
        clip.duration = float(times[key_start[1:] - 1].max()) if n else 0.0
        return clip

    def __getattr__(self, name: str):
        # Only reached for attributes not set: the tracks of a from_layout clip, made once.
        if name == "tracks" and self.__dict__.get("_tracks_from_layout"):
            tracks = self.__dict__["tracks"] = self._layout_tracks()
            del self.__dict__["_tracks_from_layout"]
            return tracks
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _layout_tracks(self) -> list[Track]:
        times, values, trusted = self.times, self.values, Track.trusted
        key_start, value_start = self.key_start.tolist(), self.value_start.tolist()
        return [
            trusted(node, PATHS[p], INTERPOLATIONS[i], times[key_start[k] : key_start[k + 1]],
                    values[value_start[k] : value_start[k + 1]].reshape(-1, w))
            for k, (node, p, i, w) in enumerate(zip(self.node.tolist(), self.path.tolist(), self.interp.tolist(),
                                                    self.width.tolist()))
        ]

    @property
    def track_count(self) -> int:
        if self.__dict__.get("_tracks_from_layout"):
            return len(self.key_start) - 1  # without making the tracks
        return len(self.tracks)

    @property
    def interpolations(self) -> list[str]:
        """The distinct interpolations used, in the order STEP, LINEAR, CUBICSPLINE."""
        used = {t.interpolation for t in self.tracks}
        return [name for name in INTERPOLATIONS if name in used]

    def __repr__(self) -> str:
        kind = ", additive" if self.additive else ""
        return f"Clip({self.name!r}, duration={self.duration:g}s, tracks={self.track_count}{kind})"


def map_time(t: np.ndarray | float, duration: float, loop: str = "clamp") -> np.ndarray:
    """Clip-local time for query times ``t`` (seconds, any shape) under a loop mode.

    ``clamp`` holds the ends, ``repeat`` wraps (``t - d*floor(t/d)``, so ``t = d`` shows the first
    frame), ``pingpong`` is a triangle wave (odd rounds play backwards). A zero-length clip maps every
    time to 0.

    >>> map_time([1.5, -0.25], 1.0, "repeat").tolist()
    [0.5, 0.75]
    >>> map_time(1.5, 1.0, "pingpong").item()
    0.5
    """
    if loop not in LOOP_CODE:
        raise ClipError(f"loop mode {loop!r} is not one of {LOOP_MODES}")
    t = np.asarray(t, dtype=np.float64)
    d = float(duration)
    if d <= 0.0:
        return np.zeros_like(t)
    if loop == "clamp":
        return np.clip(t, 0.0, d)
    if loop == "repeat":
        return t - d * np.floor(t / d)
    m = t - 2 * d * np.floor(t / (2 * d))
    return np.where(m > d, 2 * d - m, m)


def resolve_clip(clips: Sequence[Clip], key: str | int) -> Clip:
    """A clip by name or index (an integer given as a string counts as an index if no clip has that name)."""
    if isinstance(key, (int, np.integer)):
        if -len(clips) <= key < len(clips):
            return clips[key]
        raise ClipError(f"clip index {key} out of range: the model has {len(clips)} clips")
    for clip in clips:
        if clip.name == key:
            return clip
    if isinstance(key, str) and key.lstrip("-").isdigit():
        return resolve_clip(clips, int(key))
    names = ", ".join(repr(c.name) for c in clips) or "none"
    raise ClipError(f"no clip named {key!r} (clips: {names})")


def clip_from_keyframes(
    name: str,
    node_indices: Iterable[int],
    durations: Sequence[float],
    translations: np.ndarray | None = None,
    rotations: np.ndarray | None = None,
    scales: np.ndarray | None = None,
    interpolation: str = "LINEAR",
) -> Clip:
    """A clip from a list of whole-pose keyframes (seed 004's ``Keyframe{duration, positions, ...}``).

    ``durations[k]`` is how long keyframe k lasts before the next one; key k sits at
    ``sum(durations[:k])``. ``translations``/``scales`` are (K, J, 3), ``rotations`` (K, J, 4) xyzw,
    for the J rig nodes in ``node_indices``; any may be None (not animated).
    """
    nodes = list(node_indices)
    times = np.concatenate([[0.0], np.cumsum(np.asarray(durations, dtype=np.float64))])[: len(durations)]
    tracks = []
    for path, data in (("translation", translations), ("rotation", rotations), ("scale", scales)):
        if data is None:
            continue
        data = np.asarray(data, dtype=np.float32)
        if data.shape[:2] != (len(times), len(nodes)):
            raise ClipError(f"{path} keyframes have shape {data.shape}, expected ({len(times)}, {len(nodes)}, ...)")
        for j, node in enumerate(nodes):
            tracks.append(Track(node, path, interpolation, times.astype(np.float32), data[:, j]))
    return Clip(name, tracks)


def clip_frame_time(clip: Clip) -> float | None:
    """The key spacing when every track's keys sit on one uniform grid from 0 (as a BVH or a baked
    clip's do), else None."""
    times = [t.times for t in clip.tracks if t.key_count > 1]
    if not times or any(len(t) != len(times[0]) for t in times) or float(times[0][0]) != 0.0:
        return None
    grid = times[0].astype(np.float64)
    step = float(grid[-1]) / (len(grid) - 1)
    expected = np.arange(len(grid)) * step
    tol = 1e-6 * max(float(grid[-1]), 1.0)
    if any(np.abs(t.astype(np.float64) - expected).max() > tol for t in times):
        return None
    # The shortest decimal step whose float32 grid is the keys exactly (0.033333, not 0.0333329987):
    # written back, a reader rebuilds the very same key times.
    for digits in range(3, 10):
        candidate = float(f"{step:.{digits}g}")
        if np.array_equal((np.arange(len(grid)) * candidate).astype(np.float32), times[0]):
            return candidate
    return step
