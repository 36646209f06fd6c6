"""Pure functions on tracks and clips that the editor's commands are made of (no state, no GL).

Every function returns new :class:`~skeletal.clip.Track`/:class:`~skeletal.clip.Clip` objects and
leaves its inputs alone, so a command can keep the before and after values for undo.

Conventions: a *channel* is ``(node, path)`` with ``node`` a rig index and ``path`` one of
translation/rotation/scale; key times are float32 seconds; two times within :data:`TIME_EPS` are the
same key. Rotation values are stored as unit float32 quaternions, canonical for the glTF writer
(:func:`canonical_quats`), so that a saved file reloads to exactly the values held here.

>>> import numpy as np
>>> from skeletal.clip import Track
>>> tr = Track(0, "translation", "LINEAR", np.array([0, 1], np.float32), np.zeros((2, 3), np.float32))
>>> insert_key(tr, 0.5, np.ones(3)).times.tolist()
[0.0, 0.5, 1.0]
"""

from __future__ import annotations

import math

import numpy as np

from ..anim.clip import INTERPOLATIONS, Clip, Track
from ..errors import ClipError

TIME_EPS = 1e-5
CHANNEL_PATHS = ("translation", "rotation", "scale")


def canonical_quats(q: np.ndarray) -> np.ndarray:
    """(K, 4) float32 unit quaternions that the glTF writer's normalisation maps to themselves."""
    q = np.asarray(q, dtype=np.float64).reshape(-1, 4)
    n = np.linalg.norm(q, axis=1, keepdims=True)
    q = np.where(n > 0, q / np.where(n > 0, n, 1.0), np.array([0.0, 0.0, 0.0, 1.0]))
    out = q.astype(np.float32)
    for _ in range(4):  # unit(f64(out)) -> f32 is the writer's step; iterate to its fixed point
        d = out.astype(np.float64)
        nxt = (d / np.linalg.norm(d, axis=1, keepdims=True)).astype(np.float32)
        if np.array_equal(nxt, out):
            break
        out = nxt
    return out


def canonical_track(track: Track) -> Track:
    """The track with its rotation key values canonical (tangents untouched); others unchanged."""
    if track.path != "rotation":
        return track
    values = track.values.copy()
    if track.interpolation == "CUBICSPLINE":
        values[1::3] = canonical_quats(values[1::3])
    else:
        values = canonical_quats(values)
    return Track(track.node, track.path, track.interpolation, track.times, values)


def key_values(track: Track) -> np.ndarray:
    """(K, C) the keys' values (the middle rows of CUBICSPLINE triples)."""
    return track.values[1::3] if track.interpolation == "CUBICSPLINE" else track.values


def key_tangents(track: Track) -> tuple[np.ndarray, np.ndarray]:
    """(in, out) tangents (K, C) of a CUBICSPLINE track (zeros for other interpolations)."""
    if track.interpolation != "CUBICSPLINE":
        z = np.zeros_like(track.values)
        return z, z
    return track.values[0::3], track.values[2::3]


def find_key(track: Track, t: float) -> int:
    """Index of the key at time ``t`` (within :data:`TIME_EPS`), or -1."""
    k = int(np.searchsorted(track.times, np.float32(t) - TIME_EPS))
    if k < len(track.times) and abs(float(track.times[k]) - t) <= TIME_EPS:
        return k
    return -1


def _build(track: Track, times: np.ndarray, values: np.ndarray, tin: np.ndarray | None, tout: np.ndarray | None,
           interpolation: str | None = None) -> Track:
    interp = interpolation or track.interpolation
    values = np.asarray(values, dtype=np.float32)
    if track.path == "rotation":
        values = canonical_quats(values)
    if interp == "CUBICSPLINE":
        k, c = values.shape
        tin = np.zeros((k, c), np.float32) if tin is None else tin
        tout = np.zeros((k, c), np.float32) if tout is None else tout
        rows = np.empty((3 * k, c), np.float32)
        rows[0::3], rows[1::3], rows[2::3] = tin, values, tout
        values = rows
    return Track(track.node, track.path, interp, np.asarray(times, np.float32), values)


def insert_key(track: Track, t: float, value: np.ndarray) -> Track:
    """``track`` with a key of ``value`` at ``t`` (replacing the value of a key already there).

    A new CUBICSPLINE key gets tangents from its neighbours' slope (a smooth curve through it)."""
    value = np.asarray(value, dtype=np.float64).reshape(1, -1)
    if value.shape[1] != track.width:
        raise ClipError(f"a {track.path} key needs {track.width} values, got {value.shape[1]}")
    if not np.all(np.isfinite(value)):
        raise ClipError(f"key values must be finite, got {value.ravel().tolist()}")
    if not (math.isfinite(t) and t >= 0):
        raise ClipError(f"key time must be a non-negative number, got {t}")
    values = key_values(track).astype(np.float64)
    tin, tout = key_tangents(track)
    if track.path == "rotation":  # the same hemisphere as the key before (or after) it: the short way round
        at = int(np.searchsorted(track.times, np.float32(t) - TIME_EPS))
        ref = values[at - 1] if at > 0 else (values[at + 1] if at + 1 < len(values) and find_key(track, t) == at
                                              else values[at] if at < len(values) else None)
        if ref is not None and float(np.dot(ref, value[0])) < 0:
            value = -value
    k = find_key(track, t)
    if k >= 0:
        values[k] = value
        return _build(track, track.times, values, tin, tout)
    at = int(np.searchsorted(track.times, np.float32(t)))
    times = np.insert(track.times, at, np.float32(t))
    values = np.insert(values, at, value, axis=0)
    if track.interpolation == "CUBICSPLINE":
        slope = _slopes(times, values)[at]
        tin = np.insert(tin, at, slope, axis=0)
        tout = np.insert(tout, at, slope, axis=0)
    return _build(track, times, values, tin, tout)


def _slopes(times: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Finite-difference slopes (units per second) at each key: central inside, one-sided at the ends."""
    t = np.asarray(times, np.float64)
    v = np.asarray(values, np.float64)
    if len(t) < 2:
        return np.zeros_like(v)
    return np.gradient(v, t, axis=0)


def delete_keys(track: Track, indices) -> Track | None:
    """``track`` without the keys at ``indices``; None when no key is left."""
    keep = np.ones(len(track.times), dtype=bool)
    keep[np.asarray(list(indices), dtype=np.int64)] = False
    if not keep.any():
        return None
    tin, tout = key_tangents(track)
    return _build(track, track.times[keep], key_values(track)[keep], tin[keep], tout[keep])


def move_keys(track: Track, indices, dt: float) -> Track:
    """``track`` with the keys at ``indices`` shifted by ``dt`` seconds (clamped so none goes below 0).
    A moved key landing on a key that stays replaces it."""
    idx = np.asarray(sorted(set(int(i) for i in indices)), dtype=np.int64)
    if len(idx) == 0 or dt == 0:
        return track
    times = track.times.astype(np.float64)
    dt = max(float(dt), -float(times[idx].min()))
    moved = np.zeros(len(times), dtype=bool)
    moved[idx] = True
    new_times = times.copy()
    new_times[moved] += dt
    keep = moved.copy()
    for k in np.flatnonzero(~moved):  # a staying key under a moved one is dropped
        keep[k] = not np.any(np.abs(new_times[moved] - times[k]) <= TIME_EPS)
    values = key_values(track)
    tin, tout = key_tangents(track)
    order = np.argsort(new_times[keep], kind="stable")
    sel = np.flatnonzero(keep)[order]
    return _build(track, new_times[sel].astype(np.float32), values[sel], tin[sel], tout[sel])


def set_key_value(track: Track, index: int, value: np.ndarray, tangents: tuple | None = None) -> Track:
    """``track`` with key ``index`` given ``value`` (and, for CUBICSPLINE, ``(in, out)`` tangents)."""
    values = key_values(track).astype(np.float64)
    values[index] = np.asarray(value, dtype=np.float64).reshape(-1)
    tin, tout = (a.copy() for a in key_tangents(track))
    if tangents is not None:
        tin[index], tout[index] = tangents
    return _build(track, track.times, values, tin, tout)


def set_interpolation(track: Track, interpolation: str) -> Track:
    """``track`` with another interpolation. To CUBICSPLINE: tangents from the neighbouring keys'
    slopes (the curve goes through the same keys, smoothly); from it: the tangents are dropped."""
    if interpolation not in INTERPOLATIONS:
        raise ClipError(f"interpolation {interpolation!r} is not one of {INTERPOLATIONS}")
    if interpolation == track.interpolation:
        return track
    values = key_values(track)
    if interpolation == "CUBICSPLINE":
        slope = _slopes(track.times, values).astype(np.float32)
        return _build(track, track.times, values, slope, slope, interpolation)
    return _build(track, track.times, values, None, None, interpolation)


def sample_track(track: Track, t: float) -> np.ndarray:
    """The track's value at clip-local time ``t`` (clamped), float64 (C,)."""
    from ..anim.sampling import sample_track_into  # the runtime's own kernel

    clip = Clip("_", [track])
    out = np.zeros(track.width, np.float64)
    sample_track_into(0, float(t), clip.key_start, clip.times, clip.value_start, clip.values, clip.width,
                      clip.interp, clip.path, 0, out, 0)
    return out


def trim_track(track: Track, length: float, old_duration: float) -> Track:
    """``track`` for a clip of ``length`` seconds: keys past it dropped with a key at ``length`` holding
    the value there; a track that reached the old end is held to the new, longer end."""
    last = float(track.times[-1])
    if last > length + TIME_EPS:
        value = sample_track(track, length)
        keep = track.times <= np.float32(length) - TIME_EPS
        if keep.any():
            tin, tout = key_tangents(track)
            cut = _build(track, track.times[keep], key_values(track)[keep], tin[keep], tout[keep])
        else:
            cut = _build(track, np.array([length], np.float32), value[None], None, None)
            return cut
        return insert_key(cut, length, value)
    if last >= old_duration - TIME_EPS and length > last + TIME_EPS:
        return insert_key(track, length, key_values(track)[-1])
    return track


def with_tracks(clip: Clip, tracks: list[Track], name: str | None = None) -> Clip:
    """A new clip like ``clip`` (markers, additive flag) with other tracks or another name."""
    return Clip(clip.name if name is None else name, list(tracks), dict(clip.markers), clip.additive)


def track_index(clip: Clip, node: int, path: str) -> int:
    """Index of the clip's track for channel ``(node, path)``, or -1."""
    for i, tr in enumerate(clip.tracks):
        if tr.node == node and tr.path == path:
            return i
    return -1


def guess_fps(clip: Clip) -> float:
    """The frame rate the keys sit on: the common fps (24, 25, 30, 48, 50, 60, 120) that the most key
    times fall on within a millisecond; 30 when none fits."""
    times = np.unique(np.concatenate([t.times for t in clip.tracks])) if clip.tracks else np.zeros(0)
    if len(times) < 3:
        return 30.0
    best, score = 30.0, -1.0
    for fps in (30.0, 24.0, 25.0, 60.0, 50.0, 48.0, 120.0):
        f = times.astype(np.float64) * fps
        hit = float(np.mean(np.abs(f - np.round(f)) < 1e-3 * fps))
        if hit > score + 1e-9:
            best, score = fps, hit
    return best


__all__ = ["canonical_quats", "canonical_track", "key_values", "key_tangents", "find_key", "insert_key",
           "delete_keys", "move_keys", "set_key_value", "set_interpolation", "sample_track", "trim_track",
           "with_tracks", "track_index", "guess_fps", "TIME_EPS", "CHANNEL_PATHS"]
