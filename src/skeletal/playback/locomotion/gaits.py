"""A motion-matching locomotion set from any model's gait clips (an idle, a walk, a run).

Real models ship a few in-place loops (Soldier.glb: Idle, Walk, Run; RobotExpressive.glb: Idle,
Walking, Running) or a mocap take that walks across the floor (a BVH file). Motion matching needs
clips that move and turn, with a future trajectory for each frame. :func:`locomotion_set` makes them:

1. **the gaits**: the clips named like an idle, a walk or a run (``idle``; ``walk``; ``run``,
   ``jog``, ``sprint``; case-insensitive; names with ``jump``, ``death``, ``dance``... left out), or
   the clips the caller names (their role given as ``"walk=Walking"``, else from the name, else from
   their speed: the slowest still one is the idle, the moving ones walk then run by speed);
2. **their velocity**: the pelvis's own drift over the clip minus the velocity of the ground under
   the planted feet (:func:`~skeletal.playback.contacts.detect_contacts`): what an in-place loop
   would move at with its feet planted, and what a mocap take moves at;
3. **the moving clips**, sampled at 60 fps into LINEAR tracks: every moving gait straight
   (``walk_forward``), slower and faster (``walk_slow``, ``walk_fast``: played at 0.7 and 1.25 times
   its rate; 0.8 and 1.15 for a run), turning left and right (``walk_turn_left``/``_right``, 60 degrees a second
   for a walk, 90 for a run), veering left and right (``walk_veer_left``/``_right``, 25 degrees a second
   for a walk, 30 for a run; a loop also at its fast rate, ``walk_fast_veer_left``/``_right``) and, with an idle, starting from and stopping to it (``walk_start``,
   ``walk_stop``, the gait blended in or out over a cycle); the idle as it is (``idle_loop``). The
   pelvis carries the body along its velocity (the clip's own drift taken out), each clip turned so
   that the character walks toward +Z (the controller's facing 0); loops are repeated to at least
   3 s (a take of 3 s or more whose ends differ is used once, without slow, fast, start and stop
   versions);
4. **the database**: those clips with Holden's features on the model's feet and pelvis (found by
   name: :func:`~skeletal.playback.contacts.find_legs`), the pelvis as the root joint.

The result, a :class:`LocomotionSet`, holds the model with the generated clips added (play it with
:class:`~skeletal.playback.locomotion.controller.MotionMatching`), the database, and the gait speeds
and the model's scale (model units per metre, from its height) for paths.

>>> import skeletal
>>> from skeletal.playback.locomotion.gaits import locomotion_set
>>> moves = locomotion_set("Soldier.glb")                                        # doctest: +SKIP
>>> mm = skeletal.playback.locomotion.MotionMatching(skeletal.Player(moves.asset), moves.database)  # doctest: +SKIP

A folder of BVH files (one take each, all of one skeleton) is read as one model whose clips are the
files (named by their stems): ``locomotion_set("mocap/")``; ``clips=`` picks some of them.
"""

from __future__ import annotations

import copy
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ...anim.clip import Clip, Track
from ...anim.pose import world_matrices
from ...anim.sampling import sample
from ...asset import Asset
from ...errors import SkeletalError
from ...quat import decompose_trs
from ..contacts import detect_contacts, find_legs
from ..footplacement import common_parent
from .database import MatchingDatabase
from .features import default_features
from .warping import leg_chains

FPS = 60.0
#: Words naming each gait in a clip name (lowercase), and words that disqualify a clip.
GAIT_WORDS = {"idle": ("idle", "breath"), "walk": ("walk",), "run": ("run", "jog", "sprint")}
NOT_GAITS = ("jump", "death", "die", "dance", "punch", "attack", "sit", "wave", "fall", "hit", "kick", "pose",
             "crouch", "swim", "climb", "strafe", "back")
#: Turn rates (degrees per second) of the turning clips per gait.
TURN = {"walk": 60.0, "run": 90.0}
#: Turn rates (degrees per second) of the gentle turning clips (``walk_veer_left``, ``walk_fast_veer_left``...)
#: per gait: a path's curves mostly ask for less than the sharp turns give.
VEER = {"walk": 25.0, "run": 30.0}
#: The slow and fast variants' play rates per gait.
RATES = {"walk": (0.7, 1.25), "run": (0.8, 1.15)}
#: A still gait moves slower than this (metres per second, scaled to the model).
STILL = 0.15
MIN_SECONDS = 3.0


@dataclass
class LocomotionSet:
    """What :func:`locomotion_set` makes: ``asset`` (the model with the generated clips added),
    ``database`` (a :class:`~skeletal.playback.locomotion.database.MatchingDatabase` of them),
    ``gaits`` (role "idle"/"walk"/"run" -> the source clip's name), ``speeds`` (role -> model units
    per second), ``scale`` (model units per metre: the rig's rest height over 1.8 m), ``generated``
    (the new clips' names)."""

    asset: Asset
    database: MatchingDatabase
    gaits: dict[str, str]
    speeds: dict[str, float]
    scale: float
    generated: list[str] = field(default_factory=list)
    #: whether stride and orientation warping can run on the model: each foot sits on a two-bone leg
    #: chain of its own (thigh, knee, foot), or is an IK control outside the legs with a chain ending
    #: where it sits (RobotExpressive's FootL/FootR hang off the armature's root bone, its legs end in
    #: LowerLegL_end/LowerLegR_end under them): :func:`~skeletal.playback.locomotion.warping.leg_chains`.
    warping_ok: bool = True


def read_model(source: str | os.PathLike[str]) -> Asset:
    """A model file (anything :func:`skeletal.load` reads) or a folder of BVH files of one skeleton
    (one model, a clip per file named by its stem)."""
    from ...asset import load

    path = Path(source)
    if not path.is_dir():
        return load(path)
    files = sorted(p for p in path.iterdir() if p.suffix.lower() == ".bvh" and p.is_file())
    if not files:
        raise SkeletalError(f"{path}: a folder without .bvh files (a locomotion folder holds BVH takes of one skeleton)")
    assets = [load(f) for f in files]
    first = max(assets, key=lambda a: len(a.rig))  # the fullest skeleton (takes may differ in end sites)
    index = {n: i for i, n in enumerate(first.rig.names)}
    parent_of = {n: (first.rig.names[p] if p >= 0 else None) for n, p in zip(first.rig.names, first.rig.parents)}
    clips: list[Clip] = []
    for f, a in zip(files, assets):
        names = a.rig.names
        # the animated joints and their ancestors must be the common skeleton's (end sites may differ)
        needed: set[int] = set()
        for j in {t.node for c in a.clips for t in c.tracks}:
            while j >= 0 and j not in needed:
                needed.add(j)
                j = int(a.rig.parents[j])
        same = all(names[j] in index and parent_of[names[j]] == (names[a.rig.parents[j]] if a.rig.parents[j] >= 0
                                                                 else None) for j in needed)
        if not same:
            raise SkeletalError(f"{f}: its skeleton differs from the other takes' (retarget the takes onto one "
                                "skeleton first)")
        for c in a.clips:  # the tracks onto the common skeleton's joints, by name
            tracks = [Track(index[names[t.node]], t.path, t.interpolation, t.times, t.values) for t in c.tracks]
            clips.append(Clip(f.stem if len(a.clips) == 1 else f"{f.stem}_{c.name}", tracks, dict(c.markers),
                              c.additive))
    model = copy.copy(first)
    model.clips = clips
    return model


def _role(name: str) -> str | None:
    low = name.lower()
    if any(w in low for w in NOT_GAITS):
        return None
    for role, words in GAIT_WORDS.items():
        if any(w in low for w in words):
            return role
    return None


def _sample(asset: Asset, clip: Clip, times: np.ndarray, loop: str = "repeat") -> np.ndarray:
    rig = asset.rig
    pose, _ = sample(clip, times, rig.rest, asset.morph_start, asset.rest_morph, loop=loop)
    return pose


@dataclass
class _Gait:
    clip: Clip
    velocity: np.ndarray  # (2,) model x, z per second: where the gait goes with its feet planted
    drift: np.ndarray  # (2,) the pelvis's own horizontal velocity in the clip
    looping: bool

    @property
    def speed(self) -> float:
        return float(np.hypot(*self.velocity))


def _gait(asset: Asset, clip: Clip, legs: list[Any], pelvis: int) -> _Gait:
    """The gait's velocity: the pelvis's drift over the clip minus the planted feet's ground velocity."""
    if not clip.duration > 0:
        raise SkeletalError(f"{asset.path}: clip {clip.name!r} has no duration")
    phases = detect_contacts(asset, clip, legs, fps=FPS)
    ends = world_matrices(asset.rig.parents, _sample(asset, clip, np.array([0.0, clip.duration]), loop="clamp"))
    drift = (ends[1, pelvis, [0, 2], 3] - ends[0, pelvis, [0, 2], 3]) / clip.duration
    ground = np.asarray(phases.ground_velocity, np.float64).mean(axis=0) if len(phases.ground_velocity) else np.zeros(2)
    # a loop: its last pose is about its first, the pelvis's drift aside (within 30% of a leg's length:
    # many loops end a frame before their first pose comes round again)
    joints = ends[:, :, :3, 3] - ends[:, pelvis, None, :3, 3]
    leg = float(np.linalg.norm(ends[0, legs[0].thigh, :3, 3] - ends[0, legs[0].foot, :3, 3]))
    # a clip shorter than MIN_SECONDS is taken for a loop whatever its ends (a short take cannot give
    # a second of future trajectory otherwise)
    looping = bool(np.abs(joints[1] - joints[0]).max() < 0.3 * max(leg, 1e-9)) or clip.duration < MIN_SECONDS
    return _Gait(clip, drift - ground, drift, looping)


def _rig_height(asset: Asset) -> float:
    rest = world_matrices(asset.rig.parents, asset.rig.rest)[:, 1, 3]
    return float(rest.max() - rest.min())


def _yaw_matrix(angle: np.ndarray) -> np.ndarray:
    """(T, 4, 4) rotations about +Y."""
    c, s = np.cos(angle), np.sin(angle)
    m = np.zeros(angle.shape + (4, 4))
    m[:, 0, 0], m[:, 0, 2], m[:, 2, 0], m[:, 2, 2] = c, s, -s, c
    m[:, 1, 1] = m[:, 3, 3] = 1.0
    return m


def _moving_clip(asset: Asset, name: str, gait: _Gait, pelvis: int, heading: float, turn: float = 0.0,
                 ramp: str | None = None, idle: _Gait | None = None, rate: float = 1.0, idle_turn: float = 0.0) -> Clip:
    """``gait`` played ``rate`` times as fast, carried along its velocity by the pelvis, turned by
    ``heading`` (radians: the gait's own direction to +Z), turning ``turn`` degrees a second, ``ramp``
    "start"/"stop" blended with ``idle`` (its pelvis turned by ``idle_turn`` radians about +Y first, so
    that it faces where the gait faces)."""
    from ...demo.locomotion import blend_poses

    d = gait.clip.duration / rate  # one pass of the clip, in the new clip's seconds
    duration = max(math.ceil(MIN_SECONDS / d), 2) * d if gait.looping and d < MIN_SECONDS else d
    if ramp is not None:
        duration = max(2.0 * d, 1.5) if gait.looping else d
    times = np.arange(0.0, duration + 0.5 / FPS, 1.0 / FPS)
    local = (times % d if duration > d else np.minimum(times, d)) * rate  # the source clip's time
    pose = _sample(asset, gait.clip, local, loop="clamp")
    # the pelvis in place: its own drift taken out (per cycle for a loop)
    world = world_matrices(asset.rig.parents, pose)
    parent = int(asset.rig.parents[pelvis])
    pelvis_world = world[:, pelvis].copy()
    pelvis_world[:, 0, 3] -= gait.drift[0] * local
    pelvis_world[:, 2, 3] -= gait.drift[1] * local
    pelvis_world[:, [0, 2], 3] -= pelvis_world[0, [0, 2], 3]  # starting over the origin
    speed = np.full(len(times), gait.speed * rate)
    if ramp is not None and idle is not None:
        cycle = min(d, duration / 2.0)
        u = np.clip(times / cycle if ramp == "start" else (duration - times) / cycle, 0.0, 1.0)
        weight = u * u * (3.0 - 2.0 * u)
        still = _sample(asset, idle.clip, times % idle.clip.duration, loop="clamp")
        still_all = world_matrices(asset.rig.parents, still)
        still_world = still_all[:, pelvis]
        still_world[:, :3, :3] = _yaw_matrix(np.full(len(times), idle_turn))[:, :3, :3] @ still_world[:, :3, :3]
        still_parent = still_all[:, parent] if parent >= 0 else np.broadcast_to(np.eye(4), still_world.shape)
        t0, q0, s0 = decompose_trs(np.linalg.inv(still_parent) @ still_world)
        still[:, pelvis, 0:3], still[:, pelvis, 3:7], still[:, pelvis, 7:10] = t0, q0, s0
        still_world[:, [0, 2], 3] -= still_world[0, [0, 2], 3]
        pose = blend_poses(still, pose, weight)
        # the pelvis blended in place as well (world rows: model space)
        blended = world_matrices(asset.rig.parents, pose)[:, pelvis]
        offset = (still_world[:, :3, 3] + (pelvis_world[:, :3, 3] - still_world[:, :3, 3]) * weight[:, None])
        pelvis_world = blended
        pelvis_world[:, :3, 3] = offset
        speed = speed * weight
    yaw_rate = math.radians(turn)
    yaw = yaw_rate * times
    step = np.diff(times, prepend=0.0)
    middle = yaw - 0.5 * yaw_rate * step
    x = np.cumsum(speed * step * np.sin(middle))
    z = np.cumsum(speed * step * np.cos(middle))
    placed = _yaw_matrix(yaw) @ _yaw_matrix(np.full(len(times), heading)) @ pelvis_world
    placed[:, 0, 3] += x
    placed[:, 2, 3] += z
    parent_world = world[:, parent] if parent >= 0 else np.broadcast_to(np.eye(4), placed.shape)
    t, q, s = decompose_trs(np.linalg.inv(parent_world) @ placed)
    pose[:, pelvis, 0:3], pose[:, pelvis, 3:7], pose[:, pelvis, 7:10] = t, q, s
    animated = {(tr.node, tr.path) for tr in gait.clip.tracks if tr.path != "weights"}
    if idle is not None and ramp is not None:
        animated |= {(tr.node, tr.path) for tr in idle.clip.tracks if tr.path != "weights"}
    animated |= {(pelvis, "translation"), (pelvis, "rotation")}
    tracks = []
    for node, path in sorted(animated):
        columns = {"translation": slice(0, 3), "rotation": slice(3, 7), "scale": slice(7, 10)}[path]
        values = pose[:, node, columns].copy()
        if path == "rotation":  # one hemisphere along the track (the keys are slerped)
            flip = np.cumsum(np.sum(values[1:] * values[:-1], axis=1) < 0) % 2 == 1
            values[1:][flip] *= -1.0
        tracks.append(Track(node, path, "LINEAR", times, values))
    return Clip(name, tracks)


def _pelvis_rotations(asset: Asset, clip: Clip, pelvis: int) -> np.ndarray:
    """(T, 3, 3) the pelvis's model-space rotations (scale out) over one pass of ``clip`` at 30 fps."""
    times = np.arange(0.0, clip.duration + 1e-9, 1.0 / 30.0)
    m = world_matrices(asset.rig.parents, _sample(asset, clip, times, loop="clamp"))[:, pelvis, :3, :3]
    return np.asarray(m / np.linalg.norm(m, axis=-2, keepdims=True))


def _forward_axis(asset: Asset, gait: _Gait, pelvis: int) -> np.ndarray:
    """The pelvis's local axis (3,) that points, on average over ``gait``, along its motion."""
    motion = np.array([gait.velocity[0], 0.0, gait.velocity[1]]) / max(gait.speed, 1e-12)
    local = np.einsum("tji,j->ti", _pelvis_rotations(asset, gait.clip, pelvis), motion)
    axis = local.mean(axis=0)
    return np.asarray(axis / max(float(np.linalg.norm(axis)), 1e-12))


def _facing(asset: Asset, clip: Clip, pelvis: int, forward: np.ndarray) -> float:
    """The mean heading (radians about +Y, 0 = +Z) of the pelvis's ``forward`` axis over ``clip``."""
    f = np.einsum("tij,j->ti", _pelvis_rotations(asset, clip, pelvis), forward)
    return float(np.arctan2(np.sin(np.arctan2(f[:, 0], f[:, 2])).mean(), np.cos(np.arctan2(f[:, 0], f[:, 2])).mean()))


def locomotion_set(source: Asset | str | os.PathLike[str], clips: Sequence[str] | Mapping[str, str] | None = None, *,
                   mirror: bool = False, legs: Any = None) -> LocomotionSet:
    """The locomotion set of ``source`` (an Asset, a model file, or a folder of BVH files; see the
    module docstring). ``clips``: the source clips to use (default: those named like an idle, a walk
    or a run): names, entries ``"role=name"`` that give a clip its role (``"walk=Walking"``; roles
    idle, walk, run), or a dict ``{role: name}``; ``mirror``: add mirrored rows (left/right joint names needed); ``legs``: as
    :func:`~skeletal.playback.contacts.find_legs` takes. Raises :class:`SkeletalError` with one line
    naming the model when it has no usable locomotion clips."""
    asset = source if isinstance(source, Asset) else read_model(source)
    where = str(asset.path if isinstance(source, Asset) else source)
    names = [c.name for c in asset.clips]
    try:
        leg_list = find_legs(asset.rig, legs)
    except SkeletalError as e:
        raise SkeletalError(f"{where}: no usable locomotion clips: {e}") from None
    pelvis = common_parent(asset.rig.parents, [leg.thigh for leg in leg_list], "locomotion")
    if clips is None:
        chosen = [n for n in names if _role(n) is not None]
        if not chosen:
            raise SkeletalError(f"{where}: no usable locomotion clips (no clip named like idle, walk or run among "
                                f"{', '.join(names) or 'none'}; choose some with --clips)")
    forced: dict[str, str] = {}
    if clips is not None:
        pairs = list(clips.items()) if isinstance(clips, Mapping) else [_tagged(c, names) for c in clips]
        for role, name in pairs:
            if role is None:
                continue
            if role not in GAIT_WORDS:
                raise SkeletalError(f"{where}: {role}={name}: the role must be one of {', '.join(GAIT_WORDS)}")
            if forced.setdefault(role, name) != name:
                raise SkeletalError(f"{where}: two clips for {role} ({forced[role]!r} and {name!r})")
        missing = [n for _, n in pairs if n not in names]
        if missing:
            raise SkeletalError(f"{where}: no clip {', '.join(map(repr, missing))} (it has {', '.join(names) or 'none'})")
        chosen = list(dict.fromkeys(n for _, n in pairs))
    scale = max(_rig_height(asset), 1e-9) / 1.8
    gaits = {n: _gait(asset, asset.clip(n), leg_list, pelvis) for n in chosen}
    roles: dict[str, str] = dict(forced)
    taken_names = set(forced.values())
    for n in sorted((n for n in chosen if n not in taken_names), key=lambda n: gaits[n].speed):
        # the roles named by the caller first, then those in the clip names, then by speed
        role = _role(n)
        if role is None:
            role = "idle" if gaits[n].speed < STILL * scale else ("walk" if "walk" not in roles else "run")
        roles.setdefault(role, n)
    moving = [r for r in ("walk", "run") if r in roles and gaits[roles[r]].speed >= STILL * scale]
    if not moving:
        raise SkeletalError(f"{where}: no usable locomotion clips (no walking or running clip among "
                            f"{', '.join(chosen)}: each moves slower than {STILL} m/s)")
    idle = gaits[roles["idle"]] if "idle" in roles else None
    # the pelvis's local axis that points along the first gait's motion, on average over the clip: the
    # character's forward (the database's root frame); each clip's facing by that axis
    first = gaits[roles[moving[0]]]
    forward = _forward_axis(asset, first, pelvis)
    new: list[Clip] = []
    idle_heading = -_facing(asset, idle.clip, pelvis, forward) if idle is not None else 0.0
    for role in moving:
        g = gaits[roles[role]]
        heading = -math.atan2(g.velocity[0], g.velocity[1])  # the gait's direction onto +Z
        new.append(_moving_clip(asset, f"{role}_forward", g, pelvis, heading))
        if g.looping:  # slower and faster (the same steps, played slower or faster)
            new.append(_moving_clip(asset, f"{role}_slow", g, pelvis, heading, rate=RATES[role][0]))
            new.append(_moving_clip(asset, f"{role}_fast", g, pelvis, heading, rate=RATES[role][1]))
        new.append(_moving_clip(asset, f"{role}_turn_left", g, pelvis, heading, turn=TURN[role]))
        new.append(_moving_clip(asset, f"{role}_turn_right", g, pelvis, heading, turn=-TURN[role]))
        new.append(_moving_clip(asset, f"{role}_veer_left", g, pelvis, heading, turn=VEER[role]))
        new.append(_moving_clip(asset, f"{role}_veer_right", g, pelvis, heading, turn=-VEER[role]))
        if g.looping:
            for side, sign in (("left", 1.0), ("right", -1.0)):
                new.append(_moving_clip(asset, f"{role}_fast_veer_{side}", g, pelvis, heading, turn=sign * VEER[role],
                                        rate=RATES[role][1]))
        if idle is not None and g.looping:
            new.append(_moving_clip(asset, f"{role}_start", g, pelvis, heading, ramp="start", idle=idle,
                                    idle_turn=idle_heading - heading))
            new.append(_moving_clip(asset, f"{role}_stop", g, pelvis, heading, ramp="stop", idle=idle,
                                    idle_turn=idle_heading - heading))
    if idle is not None:
        still = _Gait(idle.clip, np.zeros(2), idle.drift, idle.looping)
        new.append(_moving_clip(asset, "idle_loop", still, pelvis, idle_heading))
    taken = {c.name for c in new}
    clash = [n for n in names if n in taken]
    if clash:
        raise SkeletalError(f"{where}: its clips {clash} have the names of generated ones; rename them")
    model = copy.copy(asset)
    model.clips = list(asset.clips) + new
    features = default_features(model.rig.names[leg_list[0].foot], model.rig.names[leg_list[1].foot],
                                model.rig.names[pelvis])
    database = MatchingDatabase.build(model, [c.name for c in new], features=features, root=model.rig.names[pelvis],
                                      forward=tuple(float(x) for x in forward), mirror=mirror)
    try:  # warping's leg IK needs a two-bone chain per foot (the foot's own, or one ending where it sits)
        chains = len(leg_chains(model.rig, leg_list)[0]) == 2
    except SkeletalError:
        chains = False
    return LocomotionSet(model, database, {r: roles[r] for r in roles}, {r: gaits[roles[r]].speed for r in roles},
                         scale, [c.name for c in new], warping_ok=chains)


def _tagged(item: str, names: Sequence[str]) -> tuple[str | None, str]:
    """``(role, clip name)`` of one ``clips`` entry: ``"walk=Walking"`` gives the clip a role (idle,
    walk or run), a plain name leaves its role to its name and speed (a clip whose own name has a ``=``
    stays a name)."""
    if "=" in item and item not in names:
        role, _, name = item.partition("=")
        return role.strip().lower(), name.strip()
    return None, item


def clip_names_option(value: str | None) -> list[str] | None:
    """``--clips`` as the command takes it: entries separated by commas, each a clip name or
    ``role=name`` (role idle, walk or run) (None: choose by name)."""
    if value is None:
        return None
    names = [n.strip() for n in re.split(r",", value) if n.strip()]
    if not names:
        raise SkeletalError("--clips needs at least one clip name")
    return names
