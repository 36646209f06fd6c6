"""All clips a mixer can play, packed into one set of flat arrays for the kernels.

Track ``k`` of clip ``c`` is global track ``track_start[c] + k``; its keys and values are addressed
through ``key_start``/``value_start`` exactly like a single :class:`~skeletal.clip.Clip`'s packed arrays
(see :mod:`skeletal.sampling`), so the per-track sampler serves both.

Laid out for playback (the crowd's hot path), not in the clip's own track order:

* each clip's *varying* tracks come first (``track_start[c] <= k < varying_end[c]``), its *constant*
  tracks (every key the same value) after them. A constant track needs no key search; a clip's
  constant tracks are folded once into a per-clip base pose (:meth:`ClipSet.base_poses`), so a
  character playing one clip copies that and samples only the varying tracks.
* tracks with identical key times share a *timeline* (exported clips usually sample every bone at the
  same times: Soldier.glb's Walk has 51 varying tracks on one 25-key timeline). The key search runs
  once per timeline, not once per track, and the per-instance key cursors are per timeline.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..anim.clip import INTERP_CODE, PATH_CODE, PATH_POSE_OFFSET, Clip, resolve_clip
from ..quat import NLERP_ABOVE_COS, _sin_quarter


# ``ClipSet.track_table`` columns (one int64 row per track)
TK_VALUE_START = 0  # first float of the track in ``values``
TK_WIDTH = 1  # floats per value (3, 4, or the morph target count)
TK_INTERP = 2  # STEP, LINEAR, CUBICSPLINE (see skeletal.sampling)
TK_PATH = 3  # translation, rotation, scale, weights (see skeletal.clip.PATH_CODE)
TK_NODE = 4  # rig index
TK_TIMELINE = 5  # global timeline index; -1 for a constant track
TK_OUT = 6  # where the value goes in a flattened (N * 10) pose row: node * 10 + path offset (-1: morph)
TK_KEY_START = 7  # first key of the track (its row in ``ClipSet.slerp_keys``)
NTK = 8

# ``ClipSet.clip_table`` columns (one int64 row per clip): ranges of global tracks, timelines,
# markers, and (filled in by ``ClipSet.segments``) of segments
CL_TRACK_START, CL_VARYING_END, CL_TRACK_END = 0, 1, 2
CL_TIMELINE_START, CL_TIMELINE_END = 3, 4
CL_MARKER_START, CL_MARKER_END = 5, 6
CL_SEGMENT_START, CL_SEGMENT_END = 7, 8
NCL = 9

# ``ClipSet.segments`` columns: a run of tracks [first, end) sampled by one kernel on one timeline;
# SEG_FAST_END: for a rotation segment, tracks [first, fast_end) may use nlerp on the single-action
# path (their keys are at most ``single_gap_degrees`` apart; a prefix, as tracks are sorted by gap)
SEG_FIRST, SEG_END, SEG_KIND, SEG_TIMELINE, SEG_FAST_END = 0, 1, 2, 3, 4
NSEG = 5
# segment kinds
SEG_CONSTANT = 0  # constant tracks (timeline -1): their first value
SEG_LERP3 = 1  # LINEAR translation or scale
SEG_NLERP = 2  # LINEAR rotation, normalised lerp
SEG_SLERP = 3  # LINEAR rotation, slerp
SEG_OTHER = 4  # anything else (STEP, CUBICSPLINE, morph weights): the general sampler


class ClipSet:
    """Clips packed for the mixer kernels.

    Attributes (C clips, T tracks in all):
        track_start (C+1,), key_start (T+1,), value_start (T+1,), times, values (float32),
        duration (C,) float64, additive (C,) bool, marker_start (C+1,), marker_time (K,) float64
        and marker_names (K names); varying_end (C,): end of each clip's varying tracks;
        timeline_start (C+1,): clip c owns timelines ``timeline_start[c]:timeline_start[c+1]``;
        timeline_keys (L, 2): [first key in ``times``, key count] of each timeline.
        For the kernels: ``track_table`` (T, NTK) and ``clip_table`` (C, NCL), int64 with the
        named columns ``TK_*`` / ``CL_*`` above.
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
        ordered = []  # every clip's tracks in playback order (see the module docstring)
        self.track_start = np.zeros(len(clips) + 1, dtype=np.int64)
        self.marker_start = np.zeros(len(clips) + 1, dtype=np.int64)
        self.timeline_start = np.zeros(len(clips) + 1, dtype=np.int64)
        self.varying_end = np.zeros(len(clips), dtype=np.int64)
        timeline_of: list[int] = []
        timeline_first_track: list[int] = []
        for c, clip in enumerate(clips):
            timelines: dict[bytes, int] = {}
            varying, constant = [], []
            for track in clip.tracks:
                if _is_constant(track):
                    constant.append(track)
                    continue
                first = timelines.setdefault(track.times.tobytes(), len(timelines))
                varying.append((first, _kind_order(track), _widest_key_gap(track), len(varying), track))
            # Varying tracks grouped by timeline, then by kind (LINEAR vectors, LINEAR rotations by
            # widest key gap, so that the nlerp-able ones form a prefix whatever the limit, others).
            varying.sort(key=lambda entry: entry[:4])
            first_timeline = len(timeline_first_track)
            for tl, _, _, _, track in varying:
                if first_timeline + tl == len(timeline_first_track):
                    timeline_first_track.append(len(ordered))
                timeline_of.append(first_timeline + tl)
                ordered.append(track)
            self.varying_end[c] = len(ordered)
            for track in constant:
                timeline_of.append(-1)
                ordered.append(track)
            self.track_start[c + 1] = len(ordered)
            self.timeline_start[c + 1] = len(timeline_first_track)
            self.marker_start[c + 1] = self.marker_start[c] + len(clip.markers)
        self.key_start = np.zeros(len(ordered) + 1, dtype=np.int64)
        self.value_start = np.zeros(len(ordered) + 1, dtype=np.int64)
        self.key_start[1:] = np.cumsum([t.key_count for t in ordered], dtype=np.int64)
        self.value_start[1:] = np.cumsum([t.values.size for t in ordered], dtype=np.int64)
        self.times = np.concatenate([t.times for t in ordered]).astype(np.float32) if ordered else np.zeros(0, np.float32)
        self.values = (np.concatenate([t.values.reshape(-1) for t in ordered]).astype(np.float32)
                       if ordered else np.zeros(0, np.float32))
        tracks = np.zeros((len(ordered), NTK), dtype=np.int64)
        tracks[:, TK_VALUE_START] = self.value_start[:-1]
        tracks[:, TK_WIDTH] = [t.width for t in ordered]
        tracks[:, TK_INTERP] = [INTERP_CODE[t.interpolation] for t in ordered]
        tracks[:, TK_PATH] = [PATH_CODE[t.path] for t in ordered]
        tracks[:, TK_NODE] = [t.node for t in ordered]
        tracks[:, TK_TIMELINE] = timeline_of
        pose_path = tracks[:, TK_PATH] != PATH_CODE["weights"]
        tracks[:, TK_OUT] = np.where(pose_path, tracks[:, TK_NODE] * 10 + PATH_POSE_OFFSET[tracks[:, TK_PATH]], -1)
        tracks[:, TK_KEY_START] = self.key_start[:-1]
        self.track_table = tracks
        self.slerp_keys = _slerp_keys(ordered, self.key_start, self.values)
        first = np.array(timeline_first_track, dtype=np.int64)
        self.timeline_keys = np.zeros((len(first), 2), dtype=np.int64)
        self.timeline_keys[:, 0] = self.key_start[first]
        self.timeline_keys[:, 1] = self.key_start[first + 1] - self.key_start[first]
        table = np.zeros((len(clips), NCL), dtype=np.int64)
        table[:, CL_TRACK_START] = self.track_start[:-1]
        table[:, CL_VARYING_END] = self.varying_end
        table[:, CL_TRACK_END] = self.track_start[1:]
        table[:, CL_TIMELINE_START] = self.timeline_start[:-1]
        table[:, CL_TIMELINE_END] = self.timeline_start[1:]
        table[:, CL_MARKER_START] = self.marker_start[:-1]
        table[:, CL_MARKER_END] = self.marker_start[1:]
        self.clip_table = table
        self.max_timelines = int(np.diff(self.timeline_start).max(initial=0))
        self.duration = np.array([clip.duration for clip in clips], dtype=np.float64)
        self.additive = np.array([clip.additive for clip in clips], dtype=np.bool_)
        self.rotation_gap = np.array([_widest_key_gap(t) for t in ordered], dtype=np.float64)
        self.marker_names = [name for clip in clips for name in clip.markers]
        self.marker_time = np.array([t for clip in clips for t in clip.markers.values()], dtype=np.float64)

    def base_poses(self, rest: np.ndarray, rest_morph: np.ndarray, morph_start: np.ndarray,
                   dtype=np.float64) -> tuple[np.ndarray, np.ndarray]:
        """Per clip, the rest pose with the clip's constant tracks written in: (C, N, 10) poses and
        (C, M) morph weights. A character playing only clip c starts from ``base[c]`` and samples
        the varying tracks on top (identical to sampling every track over the rest pose)."""
        pose = np.repeat(np.asarray(rest, dtype=dtype)[None], len(self.clips), axis=0)
        morph = np.repeat(np.asarray(rest_morph, dtype=dtype)[None], len(self.clips), axis=0)
        for c in range(len(self.clips)):
            for k in range(self.varying_end[c], self.track_start[c + 1]):
                vs, width, interp, path, node = self.track_table[k, :TK_NODE + 1]
                value = self.values[vs + (width if interp == INTERP_CODE["CUBICSPLINE"] else 0):][:width]
                if path == PATH_CODE["weights"]:
                    o = morph_start[node]
                    morph[c, o : o + width] = value
                else:
                    o = PATH_POSE_OFFSET[path]
                    pose[c, node, o : o + width] = value
        return pose, morph

    def fast_rotations(self, max_gap_degrees: float) -> np.ndarray:
        """(T,) bool: LINEAR rotation tracks whose keys are at most ``max_gap_degrees`` apart, where
        normalised lerp stands in for slerp (its error grows with the cube of the gap: 7.2e-5 rad at
        15 degrees)."""
        return self.rotation_gap <= max_gap_degrees

    def segments(self, max_gap_degrees: float,
                 single_gap_degrees: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The sampling program for a mixer with this nlerp limit: runs of consecutive tracks of one
        clip that share a timeline and a kernel (``SEG_*``), as ``segments`` (G, NSEG) int64, and
        a copy of ``clip_table`` with each clip's segment range filled in (CL_SEGMENT_*).

        ``single_gap_degrees`` (default: ``max_gap_degrees``) is the nlerp limit of the single-action
        path: column ``SEG_FAST_END`` ends the prefix of a rotation segment's tracks within it
        (``SEG_END`` for an nlerp segment, ``SEG_FIRST`` for other kinds).

        >>> segments, table = clipset.segments(0.0, single_gap_degrees=15.0)   # doctest: +SKIP
        """
        tracks = self.track_table
        kind = np.full(len(tracks), SEG_OTHER, dtype=np.int64)
        linear = tracks[:, TK_INTERP] == INTERP_CODE["LINEAR"]
        vector = (tracks[:, TK_PATH] == PATH_CODE["translation"]) | (tracks[:, TK_PATH] == PATH_CODE["scale"])
        rotation = tracks[:, TK_PATH] == PATH_CODE["rotation"]
        kind[linear & vector] = SEG_LERP3
        kind[linear & rotation] = np.where(self.fast_rotations(max_gap_degrees)[linear & rotation], SEG_NLERP, SEG_SLERP)
        kind[tracks[:, TK_TIMELINE] < 0] = SEG_CONSTANT
        clip_of = np.repeat(np.arange(len(self.clips)), np.diff(self.track_start))
        n = len(tracks)
        change = np.ones(n, dtype=bool)
        if n:
            change[1:] = ((clip_of[1:] != clip_of[:-1]) | (kind[1:] != kind[:-1])
                          | (tracks[1:, TK_TIMELINE] != tracks[:-1, TK_TIMELINE]))
        first = np.flatnonzero(change)
        segments = np.zeros((len(first), NSEG), dtype=np.int64)
        segments[:, SEG_FIRST] = first
        segments[:, SEG_END] = np.append(first[1:], n)
        segments[:, SEG_KIND] = kind[first]
        segments[:, SEG_TIMELINE] = tracks[first, TK_TIMELINE]
        single = max_gap_degrees if single_gap_degrees is None else max(single_gap_degrees, max_gap_degrees)
        fast = self.fast_rotations(single)
        segments[:, SEG_FAST_END] = segments[:, SEG_FIRST]
        for row in segments:
            if row[SEG_KIND] == SEG_NLERP or row[SEG_KIND] == SEG_SLERP:
                end = row[SEG_FIRST]  # the leading run within the limit (all of it: tracks sorted by gap)
                while end < row[SEG_END] and fast[end]:
                    end += 1
                row[SEG_FAST_END] = end
        table = self.clip_table.copy()
        seg_clip = clip_of[first]
        table[:, CL_SEGMENT_START] = np.searchsorted(seg_clip, np.arange(len(self.clips)), side="left")
        table[:, CL_SEGMENT_END] = np.searchsorted(seg_clip, np.arange(len(self.clips)), side="right")
        return segments, table

    @property
    def track_count(self) -> int:
        return int(self.track_start[-1])

    def __len__(self) -> int:
        return len(self.clips)


def _slerp_keys(ordered, key_start: np.ndarray, values: np.ndarray) -> np.ndarray:
    """(keys, 2) float64: for key i of a LINEAR rotation track, the angle between it and key i + 1
    (``theta`` of slerp, on the shortest path) and ``1 / sin(theta)``, so that sampling needs two
    sines instead of an arccos and three sines; 0, 0 where :func:`skeletal.quat.slerp_into` takes
    another branch (identical or nearly parallel keys) and for every other track. Computed from the
    float32 keys in float64 exactly as ``slerp_into`` computes them (its sines included:
    :func:`skeletal.quat.sin_quarter`)."""
    table = np.zeros((int(key_start[-1]), 2), dtype=np.float64)
    offset = 0
    for k, track in enumerate(ordered):
        size = track.values.size
        if track.path == "rotation" and track.interpolation == "LINEAR" and track.key_count > 1:
            q = values[offset : offset + size].astype(np.float64).reshape(-1, 4)
            a, b = q[:-1], q[1:]
            cos = np.abs(a[:, 0] * b[:, 0] + a[:, 1] * b[:, 1] + a[:, 2] * b[:, 2] + a[:, 3] * b[:, 3])
            use = (cos < NLERP_ABOVE_COS) & ~np.all(a == b, axis=1)
            theta = np.arccos(np.where(use, cos, 0.0))
            rows = table[key_start[k] : key_start[k] + len(cos)]
            rows[:, 0] = np.where(use, theta, 0.0)
            with np.errstate(divide="ignore"):
                rows[:, 1] = np.where(use, 1.0 / _sin_quarter(theta), 0.0)
        offset += size
    return table


def _kind_order(track) -> int:
    """Sort key that groups a clip's tracks by sampling kernel (see ``ClipSet.segments``)."""
    if track.interpolation == "LINEAR" and track.path in ("translation", "scale"):
        return 0
    if track.interpolation == "LINEAR" and track.path == "rotation":
        return 1
    return 2


def _is_constant(track) -> bool:
    """Every key holds the same value (for CUBICSPLINE: and every tangent is zero)."""
    values = track.values
    if track.interpolation == "CUBICSPLINE":
        keys = values.reshape(track.key_count, 3, -1)
        return bool(np.all(keys[:, 1] == keys[0, 1]) and not np.any(keys[:, 0]) and not np.any(keys[:, 2]))
    return bool(np.all(values == values[0]))


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
