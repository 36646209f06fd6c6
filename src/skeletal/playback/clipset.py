"""All clips a mixer can play, packed into one set of flat arrays for the kernels.

Track ``k`` of clip ``c`` is global track ``track_start[c] + k``; its keys and values are addressed
through ``key_start``/``value_start`` exactly like a single :class:`~skeletal.clip.Clip`'s packed arrays
(see :mod:`skeletal.sampling`), so the per-track sampler serves both.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..clip import Clip, resolve_clip


class ClipSet:
    """Clips packed for the mixer kernels.

    Attributes (C clips, T tracks in all):
        track_start (C+1,), key_start (T+1,), value_start (T+1,), times, values,
        width/interp/path/node (T,), duration (C,) float64, additive (C,) bool,
        marker_start (C+1,), marker_time (K,) float64 and marker_names (K names).
    """

    def __init__(self, clips: Sequence[Clip]):
        self.clips = list(clips)
        self._pack()

    def add(self, clip: Clip) -> int:
        """Append a clip (e.g. an additive version of another) and return its index."""
        self.clips.append(clip)
        self._pack()
        return len(self.clips) - 1

    def index(self, key: str | int | Clip) -> int:
        """Index of a clip given by name, index or the Clip object itself."""
        if isinstance(key, Clip):
            for i, clip in enumerate(self.clips):
                if clip is key:
                    return i
            return self.add(key)
        return self.clips.index(resolve_clip(self.clips, key))

    def _pack(self) -> None:
        self.version = getattr(self, "version", 0) + 1  # lets users of the packed arrays cache derived data
        clips = self.clips
        self.track_start = np.zeros(len(clips) + 1, dtype=np.int64)
        self.marker_start = np.zeros(len(clips) + 1, dtype=np.int64)
        for c, clip in enumerate(clips):
            self.track_start[c + 1] = self.track_start[c] + clip.track_count
            self.marker_start[c + 1] = self.marker_start[c] + len(clip.markers)
        key_parts, value_parts = [np.zeros(1, np.int64)], [np.zeros(1, np.int64)]
        key_base = value_base = 0
        for clip in clips:
            key_parts.append(clip.key_start[1:] + key_base)
            value_parts.append(clip.value_start[1:] + value_base)
            key_base += int(clip.key_start[-1])
            value_base += int(clip.value_start[-1])
        self.key_start = np.concatenate(key_parts)
        self.value_start = np.concatenate(value_parts)

        def cat(name, dtype):
            parts = [getattr(clip, name) for clip in clips]
            return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype)

        self.times = cat("times", np.float32)
        self.values = cat("values", np.float32)
        self.width = cat("width", np.int64)
        self.interp = cat("interp", np.int64)
        self.path = cat("path", np.int64)
        self.node = cat("node", np.int64)
        self.duration = np.array([clip.duration for clip in clips], dtype=np.float64)
        self.additive = np.array([clip.additive for clip in clips], dtype=np.bool_)
        self.rotation_gap = np.concatenate(
            [[_widest_key_gap(t) for t in clip.tracks] for clip in clips] or [np.zeros(0)]
        ).astype(np.float64)
        self.marker_names = [name for clip in clips for name in clip.markers]
        self.marker_time = np.array([t for clip in clips for t in clip.markers.values()], dtype=np.float64)

    def fast_rotations(self, max_gap_degrees: float) -> np.ndarray:
        """(T,) bool: LINEAR rotation tracks whose keys are at most ``max_gap_degrees`` apart, where
        normalised lerp stands in for slerp (its error grows with the cube of the gap: 7.2e-5 rad at
        15 degrees)."""
        return self.rotation_gap <= max_gap_degrees

    @property
    def track_count(self) -> int:
        return int(self.track_start[-1])

    def __len__(self) -> int:
        return len(self.clips)


def _widest_key_gap(track) -> float:
    """Largest rotation (degrees) between consecutive keys of a LINEAR rotation track; inf otherwise."""
    if track.path != "rotation" or track.interpolation != "LINEAR":
        return np.inf
    if track.key_count < 2:
        return 0.0
    q = track.values.astype(np.float64)
    q /= np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-300)
    cos = np.clip(np.abs(np.sum(q[1:] * q[:-1], axis=1)), 0.0, 1.0)
    return float(np.degrees(2.0 * np.arccos(cos)).max())
