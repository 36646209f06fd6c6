"""Blend spaces: a parameter (speed; direction x speed) picks the weights of several clips.

* :class:`BlendSpace1D`: samples at positions on a line; the two neighbours of the parameter blend
  linearly (clamped at the ends).
* :class:`BlendSpace2D`: samples at 2D points, Delaunay-triangulated; inside a triangle the weights
  are the barycentric coordinates, outside the hull the parameter moves to the nearest hull point.

With ``sync=True`` (the default) all samples share one normalised phase: each clip plays at
``duration_i / D`` where ``D = sum(w_i * duration_i)`` is the blended cycle length, and their clocks
are re-aligned to the phase every update, so a walk and a run blend keep their feet in step.

Batched: parameters are (B,) / (B, 2) arrays; a blend space controls one mixer slot per sample and
does no per-instance Python work.

Inertialized switches (:mod:`skeletal.playback.locomotion.mixer_hook`): ``play(fade=0.3,
blend="inertialize")`` enters the blend space at once and fades out the difference from the pose shown
before; ``set(value, blend="inertialize", duration=0.3)`` jumps the parameter (the weights change at
once) the same way, instead of the pop a jump of the weights makes ("inertialize_spring" and
"dead_blend" as for a crossfade).

>>> walk_run = BlendSpace1D(player, [("idle", 0.0), ("walk", 1.4), ("run", 4.0)])   # doctest: +SKIP
>>> walk_run.play(fade=0.3); walk_run.set(2.1)                                      # doctest: +SKIP
>>> walk_run.set(4.0, blend="inertialize", duration=0.25)   # a jump to run, no pop # doctest: +SKIP
"""

from __future__ import annotations

import itertools
from typing import Sequence

import numpy as np

from ..anim.clip import Clip
from ..errors import SkeletalError
from . import kernels as K
from .mixer import InstanceSelector, Mixer


def _mixer_of(target) -> Mixer:
    return target if isinstance(target, Mixer) else target.mixer


class _BlendSpace:
    """Shared machinery: sample slots, weights -> slot weights and synchronised clocks."""

    dims = 1

    def __init__(self, target, clips: Sequence[str | int | Clip], *, layer: int = 0, sync: bool = True,
                 parameter: str | None = None):
        self.mixer = _mixer_of(target)
        self.layer = layer
        self.sync = sync
        self.parameter = parameter
        self.slots = [self.mixer.slot(clip, layer, owner=self) for clip in clips]
        self.durations = self.mixer.clipset.duration[self.mixer.slot_clip[self.slots]]
        shape = (self.mixer.count,) if self.dims == 1 else (self.mixer.count, 2)
        self.value = np.zeros(shape)
        self.speed = np.ones(self.mixer.count)  # playback rate of the blended cycle (per instance)
        self.active = np.zeros(self.mixer.count, dtype=bool)
        self.mixer.controllers.append(self)

    # -- control ------------------------------------------------------------------------------

    def set(self, value, *, instances: InstanceSelector = None, blend: str = "linear", duration: float = 0.3) -> None:
        """Set the parameter (scalar, or per instance). ``blend`` "inertialize" (or "inertialize_spring",
        "dead_blend"): the new weights apply at once and the difference from the pose shown before
        fades out over ``duration`` seconds (a jump of the parameter without a pop); "linear" (the
        default): the weights simply change."""
        idx = self.mixer._instances(instances)
        if blend != "linear":
            self._inertialized(idx, blend, duration, lambda: self.set(value, instances=idx))
            return
        self.value[idx] = value
        self._apply_weights(idx)

    def _inertialized(self, idx, blend: str, duration: float, change) -> None:
        from .locomotion.mixer_hook import inertialized_switch

        rows = np.atleast_1d(np.arange(self.mixer.count)[idx])
        inertialized_switch(self.mixer, rows, float(duration), blend, change)

    def play(self, *, fade: float = 0.0, instances: InstanceSelector = None, blend: str = "linear") -> None:
        """Crossfade from whatever the layer plays to this blend space (a cut when ``fade`` is 0).
        ``blend`` "inertialize" (or "inertialize_spring", "dead_blend"): enter it at once and fade out
        the difference from the pose shown before over ``fade`` seconds instead."""
        idx = self.mixer._instances(instances)
        if blend != "linear" and fade > 0:
            self._inertialized(idx, blend, fade, lambda: self.play(fade=0.0, instances=idx))
            return
        # Start in step with what plays now: the phase of the strongest action on the layer.
        phase = self.phase()[idx] if self.active[idx].any() else self._layer_phase()[idx]
        self.mixer.fade_to_slots(self.slots, fade, instances=idx, offsets=list(np.asarray(phase).mean() * self.durations))
        self.active[idx] = True
        self._apply_weights(idx)

    def stop(self, *, fade: float = 0.0, instances: InstanceSelector = None) -> None:
        idx = self.mixer._instances(instances)
        for s in self.slots:
            self.mixer.stop_slot(s, fade=fade, instances=idx)
        self.active[idx] = False

    def set_speed(self, speed, *, instances: InstanceSelector = None) -> None:
        """Playback rate of the blended cycle (scalar or per instance), applied at once."""
        idx = self.mixer._instances(instances)
        self.speed[idx] = speed
        self._apply_weights(idx)

    def seek(self, phase, *, instances: InstanceSelector = None) -> None:
        """Move every sample to normalised ``phase`` (0..1) of its cycle."""
        idx = self.mixer._instances(instances)
        for i, s in enumerate(self.slots):
            self.mixer.fs[idx, s, K.F_TIME] = np.asarray(phase, dtype=np.float64) * self.durations[i]
            self.mixer.ist[idx, s, K.I_FLAGS] &= ~K.FLAG_FINISHED
            self.mixer._refresh_sample_time(s, idx)

    def sample_times(self) -> np.ndarray:
        """Clip-local times (B, n_samples) the samples show."""
        return self.mixer.fs[:, self.slots, K.F_SAMPLE].copy()

    def phase(self) -> np.ndarray:
        """Normalised phase (B,) in [0, 1) of the strongest sample."""
        weights = self.mixer.fs[:, self.slots, K.F_WEIGHT]
        strongest = np.argmax(weights, axis=1)
        rows = np.arange(self.mixer.count)
        times = self.mixer.fs[rows, np.asarray(self.slots)[strongest], K.F_SAMPLE]
        d = self.durations[strongest]
        return np.where(d > 0, times / np.where(d > 0, d, 1.0), 0.0)

    def _layer_phase(self) -> np.ndarray:
        """Normalised phase (B,) of the strongest running action on this layer (0 when none)."""
        mixer = self.mixer
        others = [s for s in range(len(mixer.slot_clip)) if mixer.slot_layer[s] == self.layer and s not in self.slots]
        if not others:
            return np.zeros(mixer.count)
        strength = mixer.fs[:, others, K.F_EFFECTIVE]
        strongest = np.asarray(others)[np.argmax(strength, axis=1)]
        rows = np.arange(mixer.count)
        d = mixer.clipset.duration[mixer.slot_clip[strongest]]
        phase = np.where(d > 0, mixer.fs[rows, strongest, K.F_SAMPLE] / np.where(d > 0, d, 1.0), 0.0)
        return np.where(strength.max(axis=1) > 0, phase, 0.0)

    def weights(self, value: np.ndarray | None = None) -> np.ndarray:
        """Sample weights (B, n_samples) for parameter values (default: the current ones)."""
        return self._weights(self.value if value is None else np.asarray(value, dtype=np.float64))

    # -- per update ---------------------------------------------------------------------------

    def _apply_weights(self, idx) -> None:
        w = self.weights(self.value[idx])
        fs = self.mixer.fs
        for i, s in enumerate(self.slots):
            fs[idx, s, K.F_WEIGHT] = w[:, i]
        speed = self.speed[idx][:, None] if np.ndim(self.speed[idx]) else self.speed[idx]
        if self.sync:
            blended = w @ self.durations
            with np.errstate(divide="ignore", invalid="ignore"):
                speeds = np.where(blended[:, None] > 0, self.durations[None, :] / blended[:, None], 1.0)
            speeds = speeds * speed
        else:
            speeds = np.broadcast_to(speed, w.shape)
        for i, s in enumerate(self.slots):
            fs[idx, s, K.F_SPEED] = speeds[:, i]

    def before_update(self, dt: float) -> None:
        if not self.active.any():
            return
        idx = np.flatnonzero(self.active)
        self._apply_weights(idx)
        if self.sync:
            # Re-align every sample's clock to the strongest one's phase (no drift over long runs).
            phase = self.phase()[idx]
            for i, s in enumerate(self.slots):
                self.mixer.fs[idx, s, K.F_TIME] = phase * self.durations[i]


class BlendSpace1D(_BlendSpace):
    """Clips placed on a line: ``samples`` is a list of ``(clip, position)``."""

    dims = 1

    def __init__(self, target, samples: Sequence[tuple[str | int | Clip, float]], **options):
        if len(samples) < 1:
            raise SkeletalError("a blend space needs at least one sample")
        ordered = sorted(samples, key=lambda s: s[1])
        self.positions = np.array([p for _, p in ordered], dtype=np.float64)
        if np.any(np.diff(self.positions) <= 0):
            raise SkeletalError("blend space sample positions must be distinct")
        super().__init__(target, [c for c, _ in ordered], **options)

    def _weights(self, value: np.ndarray) -> np.ndarray:
        x = np.atleast_1d(value).astype(np.float64)
        n = len(self.positions)
        w = np.zeros((len(x), n))
        if n == 1:
            w[:, 0] = 1.0
            return w
        x = np.clip(x, self.positions[0], self.positions[-1])
        i = np.clip(np.searchsorted(self.positions, x, side="right") - 1, 0, n - 2)
        a = (x - self.positions[i]) / (self.positions[i + 1] - self.positions[i])
        rows = np.arange(len(x))
        w[rows, i] = 1.0 - a
        w[rows, i + 1] += a
        return w


class BlendSpace2D(_BlendSpace):
    """Clips placed on a plane: ``samples`` is a list of ``(clip, (x, y))``; needs 3+ points not
    all on one line."""

    dims = 2

    def __init__(self, target, samples: Sequence[tuple[str | int | Clip, Sequence[float]]], **options):
        self.points = np.array([p for _, p in samples], dtype=np.float64).reshape(-1, 2)
        if len(self.points) < 3:
            raise SkeletalError("a 2D blend space needs at least 3 samples")
        self.triangles = delaunay(self.points)
        if len(self.triangles) == 0:
            raise SkeletalError("2D blend space samples are all on one line")
        self.hull_edges = _hull_edges(self.triangles)
        super().__init__(target, [c for c, _ in samples], **options)

    def _weights(self, value: np.ndarray) -> np.ndarray:
        q = np.atleast_2d(value).astype(np.float64)
        w = np.zeros((len(q), len(self.points)))
        found = np.zeros(len(q), dtype=bool)
        for tri in self.triangles:
            bary = barycentric(self.points[tri], q)
            inside = ~found & np.all(bary >= -1e-9, axis=1)
            if inside.any():
                b = np.clip(bary[inside], 0.0, None)
                w[np.ix_(np.flatnonzero(inside), tri)] = b / b.sum(axis=1, keepdims=True)
                found |= inside
        if not found.all():
            # Outside the hull: the nearest point on a hull edge, linear between its two samples.
            rest = np.flatnonzero(~found)
            best = np.full(len(rest), np.inf)
            for a, b in self.hull_edges:
                pa, pb = self.points[a], self.points[b]
                edge = pb - pa
                u = np.clip(((q[rest] - pa) @ edge) / (edge @ edge), 0.0, 1.0)
                dist = np.linalg.norm(pa + u[:, None] * edge - q[rest], axis=1)
                closer = dist < best
                best[closer] = dist[closer]
                rows = rest[closer]
                w[rows] = 0.0
                w[rows, a] = 1.0 - u[closer]
                w[rows, b] += u[closer]
        return w


def barycentric(tri: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Barycentric coordinates (Q, 3) of points q (Q, 2) in the triangle tri (3, 2)."""
    a, b, c = tri
    m = np.array([[b[0] - a[0], c[0] - a[0]], [b[1] - a[1], c[1] - a[1]]])
    uv = np.linalg.solve(m, (q - a).T).T
    return np.column_stack([1.0 - uv[:, 0] - uv[:, 1], uv[:, 0], uv[:, 1]])


def delaunay(points: np.ndarray) -> np.ndarray:
    """Delaunay triangles (T, 3) of a few 2D points, by the empty-circumcircle test on every triple.

    O(n^4), meant for blend spaces (a handful to a few dozen samples), where it is instant and has
    no degenerate-case machinery to get wrong. Co-circular points keep the first valid triangles.
    """
    n = len(points)
    triangles: list[tuple[int, int, int]] = []
    scale = np.ptp(points, axis=0).max() or 1.0
    for i, j, k in itertools.combinations(range(n), 3):
        a, b, c = points[i], points[j], points[k]
        area = (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0])
        if abs(area) < 1e-12 * scale * scale:
            continue
        # In-circle determinant, sign-corrected for orientation.
        others = np.delete(points, [i, j, k], axis=0)
        if len(others):
            d = np.column_stack([
                a[0] - others[:, 0], a[1] - others[:, 1], (a[0] - others[:, 0]) ** 2 + (a[1] - others[:, 1]) ** 2,
                b[0] - others[:, 0], b[1] - others[:, 1], (b[0] - others[:, 0]) ** 2 + (b[1] - others[:, 1]) ** 2,
                c[0] - others[:, 0], c[1] - others[:, 1], (c[0] - others[:, 0]) ** 2 + (c[1] - others[:, 1]) ** 2,
            ]).reshape(-1, 3, 3)
            incircle = np.linalg.det(d) * np.sign(area)
            if np.any(incircle > 1e-12 * scale**4):
                continue
        triangles.append((i, j, k))
    triangles = _drop_overlaps(points, triangles)
    return np.array(triangles, dtype=np.int64).reshape(-1, 3)


def _drop_overlaps(points: np.ndarray, triangles: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """With co-circular points (a square's corners) several triangulations are Delaunay: keep a
    non-overlapping set: a later triangle is dropped when one of its interior probe points, halfway
    between its centroid and each corner, lies strictly inside an earlier one)."""
    kept: list[tuple[int, int, int]] = []
    for tri in triangles:
        corners = points[list(tri)]
        probes = (corners + corners.mean(axis=0)) / 2.0
        if any(np.any(np.all(barycentric(points[list(k)], probes) > 1e-9, axis=1)) for k in kept):
            continue
        kept.append(tri)
    return kept


def _hull_edges(triangles: np.ndarray) -> list[tuple[int, int]]:
    """Edges used by exactly one triangle: the boundary of the triangulation (its convex hull)."""
    count: dict[tuple[int, int], int] = {}
    for tri in triangles:
        for a, b in ((tri[0], tri[1]), (tri[1], tri[2]), (tri[2], tri[0])):
            key = (min(a, b), max(a, b))
            count[key] = count.get(key, 0) + 1
    return [edge for edge, c in count.items() if c == 1]
