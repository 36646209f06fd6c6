"""Foot contact phases detected from a clip (not hand-set), and the legs of common rigs.

:func:`detect_contacts` samples a clip, takes each foot joint's model-space height and velocity, and
marks a foot planted while it is both low and still, with thresholds relative to the clip's own range
(so centimetres or metres, Mixamo or a hand-made rig, all work) and hysteresis (a foot must rise past
a higher mark to leave contact than to enter it, so noise does not flicker it). "Still" is measured
against the clip's *ground velocity*: a walk played in place moves a planted foot backward at
walking speed, so the reference is the median horizontal velocity of the foot while it is lowest;
a clip with root motion has ground velocity ~0. The result, :class:`ContactPhases`, holds the
per-frame contact flags and a smoothed weight (ramps of ``blend`` seconds), per foot, and is what the
foot placement stage reads at each action's clip time.

:func:`find_legs` finds (thigh, knee, foot, toe) chains by name for Mixamo ("mixamorig:LeftUpLeg"),
CMU BVH ("LeftUpLeg"/"LeftLeg"/"LeftFoot"), the built-in demo character ("left_thigh"), Soldier,
Mannequin, Fox ("b_LeftLeg01") and similar rigs: the foot is the topmost joint of a side whose name
says foot or ankle, and the knee and thigh are its parent and grandparent.

>>> from skeletal.demo import demo_asset
>>> asset = demo_asset()
>>> legs = find_legs(asset.rig)
>>> [asset.rig.names[leg.foot] for leg in legs]
['left_foot', 'right_foot']
>>> phases = detect_contacts(asset, "walk", legs)
>>> [len(phases.intervals(i)) for i in range(2)]    # one stance per foot per cycle
[1, 1]
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..anim.clip import Clip
from ..errors import SkeletalError
from ..anim.pose import world_matrices
from ..anim.sampling import sample


@dataclass(frozen=True)
class Leg:
    """A leg as rig indices: ``thigh`` (hip joint) -> ``knee`` -> ``foot`` (ankle), ``toe`` (-1 if
    none); ``side`` "left" or "right"."""

    thigh: int
    knee: int
    foot: int
    toe: int = -1
    side: str = ""


def _side(name: str) -> str:
    base = name.split(":")[-1].split("|")[-1]
    low = base.lower()
    if "left" in low:
        return "left"
    if "right" in low:
        return "right"
    stripped = re.sub(r"(foot|ankle|toe|leg|end|\d+|[_\.\- ])", " ", low).split()
    tokens = set(stripped)
    if "l" in tokens or low.endswith("_l") or low.endswith(".l") or low.startswith("l_"):
        return "left"
    if "r" in tokens or low.endswith("_r") or low.endswith(".r") or low.startswith("r_"):
        return "right"
    return ""


def _is_foot(name: str) -> bool:
    low = name.split(":")[-1].lower()
    return ("foot" in low or "ankle" in low) and not any(w in low for w in ("toe", "end", "ik", "pole", "target"))


def _depth(parents, j: int) -> int:
    d = 0
    while parents[j] >= 0:
        j = parents[j]
        d += 1
    return d


def find_legs(rig, override: dict | None = None) -> list[Leg]:
    """The left and right legs of ``rig`` (in that order), found by name; ``override`` maps "left" /
    "right" to a (thigh, knee, foot[, toe]) tuple of joint names or indices to use instead.
    Raises :class:`SkeletalError` when no pair of legs is found (give ``override``)."""
    names = rig.names
    parents = rig.parents

    def index(j) -> int:
        if isinstance(j, (int, np.integer)):
            if not 0 <= int(j) < len(rig):
                raise SkeletalError(f"leg joint index {j} is out of range (0..{len(rig) - 1})")
            return int(j)
        try:
            return rig.find(j)
        except KeyError:
            raise SkeletalError(f"leg joint {j!r}: no joint of that name") from None

    legs: dict[str, Leg] = {}
    for side, chain in (override or {}).items():
        if side not in ("left", "right"):
            raise SkeletalError(f"leg override key {side!r} must be 'left' or 'right'")
        idx = [index(j) for j in chain]
        if len(idx) not in (3, 4):
            raise SkeletalError(f"leg {side}: give (thigh, knee, foot[, toe]) joints, got {len(idx)}")
        if parents[idx[1]] != idx[0] and idx[0] not in _ancestors(parents, idx[1]):
            raise SkeletalError(f"leg {side}: {names[idx[1]]!r} is not below {names[idx[0]]!r}")
        if idx[2] not in _descendants(parents, idx[1]):
            raise SkeletalError(f"leg {side}: {names[idx[2]]!r} is not below {names[idx[1]]!r}")
        legs[side] = Leg(idx[0], idx[1], idx[2], idx[3] if len(idx) == 4 else _first_child(parents, idx[2]), side)
    for side in ("left", "right"):
        if side in legs:
            continue
        candidates = [j for j, n in enumerate(names) if _is_foot(n) and _side(n) == side and _depth(parents, j) >= 3]
        if not candidates:
            continue
        foot = min(candidates, key=lambda j: (_depth(parents, j), j))
        knee = int(parents[foot])
        thigh = int(parents[knee])
        legs[side] = Leg(thigh, knee, foot, _first_child(parents, foot), side)
    if "left" not in legs or "right" not in legs:
        found = ", ".join(f"{s}: {names[l.foot]}" for s, l in legs.items()) or "none"
        raise SkeletalError(f"could not find both legs by name (found {found}); pass legs="
                            "{'left': (thigh, knee, foot), 'right': (...)}")
    return [legs["left"], legs["right"]]


def _first_child(parents, j: int) -> int:
    kids = np.flatnonzero(np.asarray(parents) == j)
    return int(kids[0]) if len(kids) else -1


def _ancestors(parents, j: int) -> set[int]:
    out = set()
    while parents[j] >= 0:
        j = int(parents[j])
        out.add(j)
    return out


def _descendants(parents, j: int) -> set[int]:
    out = {j}
    for i in range(j + 1, len(parents)):
        if parents[i] in out:
            out.add(i)
    out.discard(j)
    return out


@dataclass
class ContactPhases:
    """Contact of each foot over one clip, sampled at ``fps`` from time 0 (``times`` (F,)).

    ``contact`` (F, L) bool; ``weight`` (F, L) in [0, 1], the contact smoothed with ramps of about
    ``blend`` seconds (what the foot placement stage blends by); ``height`` (F, L) foot joint heights
    (model space); ``planted_height`` (L,) the foot joint's median height over the clip's floor
    (``floor``) while planted; ``ankle_height`` (L,) its lowest height over the floor (the foot flat
    on the ground); ``ground_velocity`` (L, 2) the (x, z) velocity of a
    planted foot in model space (about minus the walking velocity for an in-place clip);
    ``looping``: whether the phases wrap around the clip's end.
    """

    clip: str
    fps: float
    duration: float
    times: np.ndarray
    contact: np.ndarray
    weight: np.ndarray
    height: np.ndarray
    planted_height: np.ndarray
    ground_velocity: np.ndarray
    ankle_height: np.ndarray
    floor: float = 0.0
    looping: bool = True

    @property
    def ground_speed(self) -> float:
        """Speed (model units/s) at which the ground passes under planted feet, mean over the feet:
        how fast an in-place clip walks."""
        return float(np.linalg.norm(self.ground_velocity, axis=1).mean()) if len(self.ground_velocity) else 0.0

    def intervals(self, leg: int) -> list[tuple[float, float]]:
        """Contact intervals of foot ``leg`` as (start, end) seconds; for a looping clip an interval
        that wraps over the end is one interval (end < start)."""
        c = self.contact[:, leg]
        f = len(c)
        if c.all():
            return [(0.0, self.duration)]
        if not c.any():
            return []
        starts = [i for i in range(f) if c[i] and not c[i - 1]] if self.looping else \
            [i for i in range(f) if c[i] and (i == 0 or not c[i - 1])]
        out = []
        for s in starts:
            e = s
            while c[(e + 1) % f] and (self.looping or e + 1 < f):
                e += 1
            out.append((s / self.fps, ((e + 1) % f if self.looping else e + 1) / self.fps))
        return out

    def weight_at(self, t: float) -> np.ndarray:
        """Contact weights (L,) at clip time ``t`` (wrapped for a looping clip), linearly interpolated."""
        return contact_weight(self.weight, self.fps, self.duration, float(t), self.looping)


def contact_weight(table: np.ndarray, fps: float, duration: float, t: float, looping: bool) -> np.ndarray:
    f = table.shape[0]
    if f == 1 or duration <= 0:
        return table[0].copy()
    if looping:
        u = (t % duration) * fps
        i0 = int(np.floor(u)) % f
        i1 = (i0 + 1) % f
    else:
        u = min(max(t, 0.0), duration) * fps
        i0 = min(int(np.floor(u)), f - 1)
        i1 = min(i0 + 1, f - 1)
    a = u - np.floor(u)
    return table[i0] * (1 - a) + table[i1] * a


def _hysteresis(score: np.ndarray, enter: float, leave: float, looping: bool) -> np.ndarray:
    """Contact where ``score`` drops to ``enter`` or below, kept until it rises above ``leave``;
    a looping clip is scanned twice so the state at frame 0 follows from the clip's end."""
    f = len(score)
    out = np.zeros(f, bool)
    state = bool(score[0] <= enter) if not looping else bool(score[-1] <= (enter + leave) / 2)
    for _ in range(2 if looping else 1):
        for i in range(f):
            if state and score[i] > leave:
                state = False
            elif not state and score[i] <= enter:
                state = True
            out[i] = state
    return out


def detect_contacts(asset, clip: str | int | Clip, legs: list[Leg] | None = None, *, fps: float = 60.0,
                    height: float = 0.2, speed: float = 0.25, hysteresis: float = 1.5, blend: float = 0.08,
                    floor: float = 0.0, min_duration: float = 0.05, looping: bool | None = None) -> ContactPhases:
    """Contact phases of each foot of ``legs`` (default :func:`find_legs`) over ``clip``.

    A frame counts as planted when ``max(h / height, s / speed) <= 1`` for the foot joint or for
    its toe (heel strike to toe off), where ``h`` is the joint's height above its lowest point over
    the clip divided by its height range, and ``s`` its speed relative to the ground velocity (or to
    the model, whichever is smaller) divided by the largest such speed (ranges are floored at 5% of
    the leg's length, and at 5% of a leg length per second, so a clip that barely moves a foot reads
    as planted throughout); it stays planted until the score exceeds ``hysteresis``. Contacts
    shorter than ``min_duration`` seconds are dropped. ``looping`` (default: yes unless the clip's
    feet are far apart at its two ends) wraps the analysis around the clip's end.
    """
    if not fps > 0:
        raise SkeletalError(f"fps must be positive, got {fps}")
    if not (height > 0 and speed > 0 and hysteresis >= 1.0):
        raise SkeletalError("contact thresholds must be positive and hysteresis >= 1")
    clip = clip if isinstance(clip, Clip) else asset.clip(clip)
    rig = asset.rig
    legs = find_legs(rig) if legs is None else legs
    duration = float(clip.duration)
    count = max(1, min(int(round(duration * fps)), 100_000))
    times = np.arange(count) / fps if duration > 0 else np.zeros(1)
    n_legs = len(legs)
    # the foot joint (heel/ankle) of each leg, then its toe (or the foot again when it has none)
    feet = np.array([leg.foot for leg in legs] + [leg.toe if leg.toe >= 0 else leg.foot for leg in legs], np.int64)
    pose, _ = sample(clip, np.append(times, duration), rig.rest, asset.morph_start, asset.rest_morph, loop="clamp")
    world = world_matrices(rig.parents, pose)
    pos = world[:, feet][..., :3, 3]  # (F+1, 2L, 3)
    rest_world = world_matrices(rig.parents, rig.rest)
    leg_len = np.array([np.linalg.norm(rest_world[l.knee, :3, 3] - rest_world[l.thigh, :3, 3])
                        + np.linalg.norm(rest_world[l.foot, :3, 3] - rest_world[l.knee, :3, 3]) for l in legs])
    leg_len = np.tile(np.maximum(leg_len, 1e-6), 2)
    if looping is None:
        looping = bool(np.all(np.linalg.norm(pos[-1] - pos[0], axis=-1) < 0.1 * leg_len)) and duration > 0
    pos = pos[:-1] if duration > 0 else pos[:1]
    f = len(pos)
    y = pos[..., 1]
    lo = y.min(axis=0)
    rng = np.maximum(y.max(axis=0) - lo, 0.05 * leg_len)
    h = (y - lo) / rng
    if f > 2:
        if looping:
            vel = (np.roll(pos, -1, axis=0) - np.roll(pos, 1, axis=0)) * (fps / 2)
        else:
            vel = np.gradient(pos, 1.0 / fps, axis=0)
    else:
        vel = np.zeros_like(pos)
    lowest = h <= 0.1
    ground = np.zeros((2 * n_legs, 2))
    for l in range(2 * n_legs):
        if lowest[:, l].any():
            ground[l] = np.median(vel[lowest[:, l], l][:, [0, 2]], axis=0)
    rel = vel.copy()
    rel[..., 0] -= ground[:, 0]
    rel[..., 2] -= ground[:, 1]
    # still = still relative to the ground velocity (a walk in place) or to the model (standing)
    dev = np.minimum(np.linalg.norm(rel, axis=-1), np.linalg.norm(vel, axis=-1))
    s = dev / np.maximum(dev.max(axis=0), 0.05 * leg_len)
    both = np.maximum(h / height, s / speed)
    score = np.minimum(both[:, :n_legs], both[:, n_legs:])  # heel or toe down
    ground = ground[:n_legs]
    y = y[:, :n_legs]
    lo = lo[:n_legs]
    contact = np.stack([_hysteresis(score[:, l], 1.0, hysteresis, looping) for l in range(n_legs)], axis=1)
    min_frames = int(round(min_duration * fps))
    for l in range(len(legs)):
        _drop_short(contact[:, l], min_frames, looping)
    weight = _smooth(contact.astype(np.float64), max(int(round(blend * fps)), 0), looping)
    planted = np.array([np.median(y[contact[:, l], l]) - floor if contact[:, l].any() else lo[l] - floor
                        for l in range(len(legs))])
    return ContactPhases(clip.name, float(fps), duration, times, contact, weight, y, planted, ground, lo - floor,
                         float(floor), looping)


def _drop_short(c: np.ndarray, min_frames: int, looping: bool) -> None:
    """Clear runs of True shorter than ``min_frames`` in place."""
    f = len(c)
    if min_frames <= 1 or c.all() or not c.any():
        return
    start = int(np.flatnonzero(~c)[0]) if looping else 0
    i = 0
    while i < f:
        j = (start + i) % f
        if c[j]:
            run = 0
            while run < f and c[(j + run) % f] and (looping or j + run < f):
                run += 1
            if run < min_frames:
                for r in range(run):
                    c[(j + r) % f] = False
            i += run
        else:
            i += 1


def _smooth(x: np.ndarray, half: int, looping: bool) -> np.ndarray:
    """Triangle filter of half-width ``half`` frames along axis 0 (circular when looping)."""
    if half <= 0:
        return x.copy()
    k = np.concatenate([np.arange(1, half + 2), np.arange(half, 0, -1)]).astype(np.float64)
    k /= k.sum()
    f = len(x)
    out = np.empty_like(x)
    for l in range(x.shape[1]):
        if looping:
            padded = np.concatenate([x[-half - 1:, l], x[:, l], x[: half + 1, l]]) if f > half + 1 else np.tile(x[:, l], 3)
            full = np.convolve(padded, k, mode="same")
            out[:, l] = full[half + 1: half + 1 + f] if f > half + 1 else full[f: 2 * f]
        else:
            padded = np.concatenate([np.full(half, x[0, l]), x[:, l], np.full(half, x[-1, l])])
            out[:, l] = np.convolve(padded, k, mode="valid")
    return np.clip(out, 0.0, 1.0)
