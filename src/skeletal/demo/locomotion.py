"""A locomotion set for the built-in character: walks and runs at several speeds, turning sharply,
veering gently and straight, starts and stops, all moving over the ground (root motion on the ``root`` joint).

Made from the character's own in-place clips (:mod:`skeletal.demo`): each is sampled at 60 fps,
played faster or slower for the speeds, blended with ``idle`` for starts and stops, and given a root
trajectory. The root speed of a gait is the speed at which the in-place clip's planted foot slides
backwards (:func:`gait_speed`), so the feet stay planted when the root carries the body forward;
turning clips rotate the root about +Y at a constant rate and carry it along the turned heading.

>>> from skeletal.demo import locomotion_asset
>>> asset = locomotion_asset()
>>> sorted(c.name for c in asset.clips)[:4]
['idle', 'run', 'run_forward', 'run_slow']

Every clip has LINEAR keys at 60 fps on the joints the source clips animate plus ``root``
translation (x, 0, z) and rotation (yaw); the character starts each clip at the origin facing +Z.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..asset import Asset
from ..anim.clip import Clip
from ..document import Animation, Channel
from ..anim.pose import world_matrices
from ..anim.sampling import sample

FPS = 60.0


@dataclass(frozen=True)
class Locomotion:
    """One generated clip: ``gait`` ("walk" or "run") played ``rate`` times its own speed for
    ``cycles`` cycles, turning at ``turn`` degrees per second (positive: to the left, about +Y), and
    ``ramp`` "start" (from idle), "stop" (to idle) or None."""

    name: str
    gait: str
    rate: float = 1.0
    turn: float = 0.0
    cycles: float = 2.0
    ramp: str | None = None


#: The set :func:`locomotion_clips` makes (names are what a matching database's tags use).
SET: tuple[Locomotion, ...] = (
    Locomotion("walk_forward", "walk"),
    Locomotion("walk_slow", "walk", rate=0.7),
    Locomotion("walk_fast", "walk", rate=1.25),
    Locomotion("walk_turn_left", "walk", turn=60.0, cycles=3.0),
    Locomotion("walk_turn_right", "walk", turn=-60.0, cycles=3.0),
    Locomotion("walk_veer_left", "walk", turn=25.0, cycles=3.0),
    Locomotion("walk_veer_right", "walk", turn=-25.0, cycles=3.0),
    Locomotion("walk_start", "walk", cycles=1.5, ramp="start"),
    Locomotion("walk_stop", "walk", cycles=1.5, ramp="stop"),
    Locomotion("run_forward", "run", cycles=3.0),
    Locomotion("run_slow", "run", rate=0.8, cycles=3.0),
    Locomotion("run_fast", "run", rate=1.15, cycles=3.0),
    Locomotion("run_turn_left", "run", turn=90.0, cycles=4.0),
    Locomotion("run_turn_right", "run", turn=-90.0, cycles=4.0),
    Locomotion("run_veer_left", "run", turn=30.0, cycles=4.0),
    Locomotion("run_veer_right", "run", turn=-30.0, cycles=4.0),
    Locomotion("run_fast_veer_left", "run", rate=1.15, turn=30.0, cycles=4.0),
    Locomotion("run_fast_veer_right", "run", rate=1.15, turn=-30.0, cycles=4.0),
    Locomotion("run_start", "run", cycles=2.0, ramp="start"),
    Locomotion("run_stop", "run", cycles=2.0, ramp="stop"),
)


def _sample(asset: Asset, clip: Clip, times: np.ndarray) -> np.ndarray:
    rig = asset.rig
    pose, _ = sample(clip, times, rig.rest, asset.morph_start, asset.rest_morph, loop="repeat")
    return pose


def gait_speed(asset: Asset, clip: Clip, side: str = "left") -> float:
    """The speed (m/s) at which the ``side`` ankle slides backwards (-z) in the in-place ``clip`` while
    that foot is planted (its toe within 1 cm of its lowest height): the speed to carry the root at."""
    times = np.arange(0.0, clip.duration, 1.0 / 240.0)
    world = world_matrices(asset.rig.parents, _sample(asset, clip, times))
    toe = world[:, asset.rig.find(f"{side}_toe"), 1, 3]
    ankle = world[:, asset.rig.find(f"{side}_foot"), 2, 3]
    planted = toe < toe.min() + 0.01
    return float(np.median(-np.gradient(ankle, times)[planted]))


def _yaw_quaternions(yaw: np.ndarray) -> np.ndarray:
    half = 0.5 * yaw
    return np.stack([np.zeros_like(yaw), np.sin(half), np.zeros_like(yaw), np.cos(half)], axis=-1)


def blend_poses(a: np.ndarray, b: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Poses (T, N, 10) ``a`` toward ``b`` by weights (T,): lerped translations and scales, normalised
    lerp of rotations in one hemisphere (the starts and stops here and in
    :mod:`skeletal.playback.locomotion.gaits`).

    >>> a = np.zeros((1, 1, 10)); a[..., 6] = 1.0; b = a.copy(); b[..., 0] = 2.0
    >>> blend_poses(a, b, np.array([0.25]))[0, 0, 0]
    np.float64(0.5)
    """
    out = a + (b - a) * w[:, None, None]
    qa, qb = a[..., 3:7], b[..., 3:7].copy()
    qb[np.sum(qa * qb, axis=-1) < 0] *= -1.0
    q = qa + (qb - qa) * w[:, None, None]
    out[..., 3:7] = q / np.linalg.norm(q, axis=-1, keepdims=True)
    return out


def make_animation(asset: Asset, spec: Locomotion) -> Animation:
    """The animation ``spec`` describes, for the demo character's document (see the module docstring)."""
    gait = asset.clip(spec.gait)
    duration = spec.cycles * gait.duration / spec.rate
    times = np.arange(0.0, duration + 0.5 / FPS, 1.0 / FPS)
    pose = _sample(asset, gait, times * spec.rate)
    speed = gait_speed(asset, gait) * spec.rate * np.ones_like(times)
    if spec.ramp is not None:
        # the gait fades in over the first cycle (start) or out over the last (stop), the speed with it
        cycle = gait.duration / spec.rate
        u = np.clip(times / cycle if spec.ramp == "start" else (duration - times) / cycle, 0.0, 1.0)
        weight = u * u * (3.0 - 2.0 * u)
        idle = _sample(asset, asset.clip("idle"), times)
        pose = blend_poses(idle, pose, weight)
        speed = speed * weight
    yaw_rate = np.radians(spec.turn)
    yaw = yaw_rate * times
    step = np.diff(times, prepend=0.0)
    heading = yaw - 0.5 * yaw_rate * step  # the heading in the middle of each step
    x = np.cumsum(speed * step * np.sin(heading))
    z = np.cumsum(speed * step * np.cos(heading))
    root = asset.rig.find("root")
    pose[:, root, 0:3] = np.stack([x, np.zeros_like(x), z], axis=-1)
    pose[:, root, 3:7] = _yaw_quaternions(yaw)
    return Animation(spec.name, _channels(asset, gait, times, pose))


def _channels(asset: Asset, gait: Clip, times: np.ndarray, pose: np.ndarray) -> list[Channel]:
    root = asset.rig.find("root")
    animated = sorted({(t.node, t.path) for t in gait.tracks} | {(root, "translation"), (root, "rotation")})
    file_node = np.empty(len(asset.rig.index_of), np.int64)  # rig index -> file node index
    file_node[asset.rig.index_of] = np.arange(len(asset.rig.index_of))
    channels = []
    for node, path in animated:
        columns = {"translation": slice(0, 3), "rotation": slice(3, 7), "scale": slice(7, 10)}[path]
        values = pose[:, node, columns].copy()
        if path == "rotation":  # one hemisphere along the track (the keys are slerped)
            flip = np.cumsum(np.sum(values[1:] * values[:-1], axis=1) < 0) % 2 == 1
            values[1:][flip] *= -1.0
        channels.append(Channel(int(file_node[node]), path, "LINEAR", times.astype(np.float32),
                                values.astype(np.float32)))
    return channels


@lru_cache(maxsize=2)
def with_locomotion(base: Asset) -> Asset:
    """The demo character ``base`` (:func:`skeletal.demo.demo_asset`) with its clips and the locomotion
    set :data:`SET` added (built once per base, shared: treat it as read-only);
    :func:`skeletal.demo.locomotion_asset` is this for the demo asset."""
    document = copy.copy(base.document)
    document.animations = list(base.document.animations) + [make_animation(base, spec) for spec in SET]
    return Asset(document)


def locomotion_clips(base: Asset) -> list[Clip]:
    """The clips of :data:`SET` on the demo character's rig (playable on a player of ``base``)."""
    asset = with_locomotion(base)
    return [asset.clip(spec.name) for spec in SET]
