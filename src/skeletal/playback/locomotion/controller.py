"""A motion-matching controller for one :class:`~skeletal.Player`: the caller says where to go, the
controller picks the frames.

Each update:

1. a critically damped spring carries the character's velocity toward ``desired_velocity`` (world x,
   z, m/s) and its facing toward ``desired_facing`` (radians about +Y; default: the direction of the
   desired velocity), predicting the root's position and facing at the database's trajectory frames
   (D. Holden's ``simulation_positions_update``);
2. every ``search_every`` frames the query is the shown pose's features (from the player's world
   matrices placed in the world, velocities over the last update) with that predicted trajectory; when the best frame beats the playing one by more than ``margin`` (and is not the same
   clip within 0.2 s), the player jumps to it with an inertialized crossfade (``blend``). Past the last
   row of its clip (the database leaves out the frames whose future runs past the clip's end) the
   player jumps to the best frame with the last row's pose features;
3. the player updates with root motion on the database's root joint; with ``warping=True`` a
   :class:`~skeletal.playback.locomotion.warping.Warping` then scales the stride to the predicted
   speed and turns the lower body toward the predicted direction of motion (the ratio and the angle
   between the spring's velocity and the clip's own, both smoothed, within ``max_stride`` and
   ``max_angle``; the root-motion delta scaled and turned with them); the controller moves the
   character by the root-motion delta: ``position`` (x, 0, z) and ``facing`` (yaw), ``transform``
   (4, 4) to place the model with.

>>> from skeletal.demo import locomotion_asset
>>> from skeletal.playback.locomotion.database import MatchingDatabase
>>> asset = locomotion_asset()
>>> db = MatchingDatabase.build(asset, exclude=("idle", "wave", "walk", "run"))
>>> mm = MotionMatching(skeletal.Player(asset), db)                  # doctest: +SKIP
>>> mm.desired_velocity = (0.0, 1.0)                                   # doctest: +SKIP
>>> for _ in range(120): mm.update(1 / 60)                             # doctest: +SKIP

On a :class:`~skeletal.Crowd`, ``MotionMatching(crowd, db)`` returns a
:class:`~skeletal.playback.locomotion.crowd_matching.CrowdMotionMatching`: the same controller with an
instance axis first (per-instance goals, one batched search call per update).

The database must be built from the player's clips. Mirrored rows play mirrored clips
(:func:`~skeletal.playback.locomotion.mirror.mirror_clip`), which the controller adds to the player
before enabling root motion (so the player must not have root motion enabled yet).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ...errors import SkeletalError
from .database import MatchingDatabase
from .features import compute_features, root_frames
from .mirror import SUFFIX, mirror_clip
from .prediction import LN2, WARP_EASE, _predict, _spring_angle, _spring_velocity, _turn_goal
from .warping import Warping

class MotionMatching:
    """Motion matching on ``player`` over ``database`` (see the module docstring).

    ``search_every``: frames between searches; ``blend``/``blend_time``: the jump's transition
    (:meth:`~skeletal.Player.crossfade` ``blend``); ``margin``: how much better (in squared
    normalised distance) a frame must be to jump to it; ``velocity_halflife``/``facing_halflife``:
    the prediction springs' half-lives (s). ``warping``: stride and orientation warping toward the
    predicted velocity (:attr:`warping`, a :class:`~skeletal.playback.locomotion.warping.Warping`, or
    None), ``max_stride`` the (lowest, highest) stride ratio and ``max_angle`` the largest turn
    (degrees) it applies. ``goal_turn_halflife``: the half-life (s) with which the desired velocity's
    turn rate is smoothed (:attr:`goal_turn_rate`); the prediction carries that turn on over its
    horizon, so a goal that keeps turning (a curved path) predicts a curve and the search picks
    turning frames in time; 0 predicts toward the goal as it points now. ``searches``/``jumps`` count
    what happened.
    """

    def __new__(cls, player: Any, *args: Any, **options: Any) -> Any:
        # a Crowd gets the batched controller (its own class: per-instance state, one search call)
        if cls is MotionMatching and hasattr(getattr(player, "mixer", player), "_wide_ok"):
            from .crowd_matching import CrowdMotionMatching

            return CrowdMotionMatching(player, *args, **options)
        return super().__new__(cls)

    def __init__(self, player: Any, database: MatchingDatabase, *, search_every: int = 6,
                 blend: str = "dead_blend", blend_time: float = 0.2, margin: float = 0.05,
                 velocity_halflife: float = 0.3, facing_halflife: float = 0.3, warping: bool = False,
                 max_stride: tuple[float, float] = (0.7, 1.5), max_angle: float = 20.0,
                 goal_turn_halflife: float = 0.25):
        clips = {c.name for c in player.asset.clips}
        missing = [n for n in database.clip_names if n not in clips]
        if missing:
            raise SkeletalError(f"the player's asset has no clips {missing} of the database")
        groups = {f.kind for f in database.feature_set}
        if not {"trajectory_position", "trajectory_direction"} <= groups:
            raise SkeletalError("the database needs trajectory_position and trajectory_direction features")
        self.player = player
        self.db = database
        self.search_every = max(int(search_every), 1)
        self.blend, self.blend_time, self.margin = blend, float(blend_time), float(margin)
        self.velocity_halflife, self.facing_halflife = float(velocity_halflife), float(facing_halflife)
        self.desired_velocity = np.zeros(2)
        self.desired_facing: float | None = None
        self.position = np.zeros(3)
        self.facing = 0.0
        self.velocity = np.zeros(2)  # the prediction spring's state (world x, z)
        self.acceleration = np.zeros(2)
        self.facing_rate = 0.0
        if not (np.isfinite(goal_turn_halflife) and goal_turn_halflife >= 0.0):
            raise SkeletalError(f"goal_turn_halflife must be 0 (off) or positive, got {goal_turn_halflife}")
        self.goal_turn_halflife = float(goal_turn_halflife)
        self.goal_turn_rate = 0.0  # how fast the desired velocity's direction turns (rad/s, smoothed)
        self._goal_heading: float | None = None
        self.searches = 0
        self.jumps = 0
        self._frame = 0
        self._clip: str | None = None
        self._rows = {}
        for c, name in enumerate(database.clip_names):
            self._rows[name] = np.flatnonzero((database.clip == c) & ~database.mirrored)
            if database.mirrored.any():
                self._rows[name + SUFFIX] = np.flatnonzero((database.clip == c) & database.mirrored)
        if database.mirrored.any():
            # mirrored rows play mirrored clips, added before root motion takes the clips' motion out
            if player._root_motion is not None:
                raise SkeletalError("a database with mirrored rows needs a Player without root motion yet: "
                                    "the controller adds the mirrored clips, then enables it")
            for name in database.clip_names:
                player.mixer.clip_index(mirror_clip(player.asset, player.asset.clip(name), fps=database.fps))
        if player._root_motion is None:
            player.enable_root_motion(database.root)
        self._traj = [(f, database.group(f.name)) for f in database.feature_set if f.kind.startswith("trajectory")]
        self._pose = tuple(f for f in database.feature_set if not f.kind.startswith("trajectory"))
        self._pose_columns = np.concatenate([np.arange(database.width)[database.group(f.name)] for f in self._pose]
                                            or [np.zeros(0, np.int64)])
        rig = player.asset.rig
        self._joint_index = {n: i for i, n in enumerate(rig.names)}
        self._root_index = rig.find(database.root)
        self._shown: list[np.ndarray] = []  # world matrices (N, 4, 4) of the last two frames shown
        self._last_dt = 1.0 / database.fps
        lo, hi = (float(x) for x in max_stride)
        if not (0.0 < lo <= 1.0 <= hi and 0.0 <= max_angle <= 90.0):
            raise SkeletalError("warping needs 0 < max_stride[0] <= 1 <= max_stride[1] and 0 <= max_angle <= 90")
        self.max_stride, self.max_angle = (lo, hi), math.radians(max_angle)
        self.warping: Warping | None = Warping(player, attach=False) if warping else None
        self.clip_velocity = np.zeros(2)  # the clip's own root velocity (character x, z), smoothed

    # -- the caller's side ---------------------------------------------------------------------

    def set_goal(self, velocity: Sequence[float], facing: float | None = None) -> None:
        """Desired world velocity (x, z) in m/s and, optionally, facing (radians about +Y, 0 = +Z)."""
        v = np.asarray(velocity, np.float64)
        if v.shape != (2,) or not np.isfinite(v).all():
            raise SkeletalError(f"desired velocity must be two finite numbers (x, z), got {velocity}")
        self.desired_velocity = v
        self.desired_facing = None if facing is None else float(facing)

    @property
    def transform(self) -> np.ndarray:
        """(4, 4) model matrix placing the character: rotation ``facing`` about +Y, then ``position``."""
        c, s = math.cos(self.facing), math.sin(self.facing)
        m = np.eye(4)
        m[0, 0], m[0, 2], m[2, 0], m[2, 2] = c, s, -s, c
        m[:3, 3] = self.position
        return m

    @property
    def clip(self) -> str | None:
        """The clip playing now."""
        return self._clip

    # -- per frame -----------------------------------------------------------------------------

    def predicted_trajectory(self) -> tuple[np.ndarray, np.ndarray]:
        """The predicted root positions (K, 3) (world, y = 0) and facings (K,) at the database's
        trajectory frames."""
        frames = sorted({k for f, _ in self._traj for k in f.frames})
        shift, facings = _predict(self.velocity, self.acceleration, self.desired_velocity, self.facing,
                                  self.facing_rate, self._goal_facing(), self.goal_turn_rate,
                                  self.desired_facing is None, self.velocity_halflife, self.facing_halflife,
                                  frames, self.db.fps)
        positions = np.zeros((len(frames), 3))
        positions[:, 0] = self.position[0] + shift[:, 0]
        positions[:, 2] = self.position[2] + shift[:, 1]
        return positions, np.asarray(facings, np.float64)

    def _goal_facing(self) -> float:
        if self.desired_facing is not None:
            return self.desired_facing
        v = self.desired_velocity
        return math.atan2(v[0], v[1]) if np.hypot(v[0], v[1]) > 1e-3 else self.facing

    def _current_row(self) -> tuple[int, bool]:
        """The database row nearest the frame playing (-1 before anything plays) and whether it is that
        frame (False past the end of the clip's rows: the trajectory there runs past the clip's end)."""
        if self._clip is None or self._clip not in self._rows:
            return -1, False
        rows = self._rows[self._clip]
        t = self.player.action(self._clip).time
        times = self.db.time[rows]
        i = int(np.searchsorted(times, t))
        if i >= len(rows) or (i > 0 and t - times[i - 1] < times[i] - t):
            i -= 1
        return int(rows[i]), abs(times[i] - t) <= 1.5 / self.db.fps

    def pose_features(self) -> np.ndarray:
        """Raw features of the pose groups (positions, velocities) of the pose shown now, from the
        player's world matrices placed by :attr:`transform` (velocities over the last update)."""
        shown = self._shown
        if not shown:
            return np.zeros(len(self._pose_columns))
        world = np.stack([shown[0], shown[-1]])  # (2, N, 4, 4): the previous frame (or this one) and now
        position, yaw = root_frames(world, self._root_index, np.asarray(self.db.forward))
        fps = 1.0 / self._last_dt if len(shown) > 1 else self.db.fps
        raw = compute_features(world[:, :, :3, 3], position, yaw, fps, self._pose, self._joint_index)
        return raw[1]

    def _keep_shown(self) -> None:
        world = np.einsum("ab,nbc->nac", self.transform, self.player.world)
        self._shown = (self._shown + [world])[-2:]

    def _query(self) -> np.ndarray:
        """The shown pose's normalised features with the predicted trajectory."""
        db = self.db
        query = np.zeros(db.width)
        columns = self._pose_columns
        query[columns] = (self.pose_features() - db.mean[columns]) / db.scale[columns]
        positions, facings = self.predicted_trajectory()
        frames = sorted({k for f, _ in self._traj for k in f.frames})
        c, s = math.cos(self.facing), math.sin(self.facing)
        for f, group in self._traj:
            raw = []
            for k in f.frames:
                j = frames.index(k)
                if f.kind == "trajectory_position":
                    x, z = positions[j, 0] - self.position[0], positions[j, 2] - self.position[2]
                else:
                    x, z = math.sin(facings[j]), math.cos(facings[j])
                raw += [c * x - s * z, s * x + c * z]  # into the character frame
            query[group] = (np.array(raw) - db.mean[group]) / db.scale[group]
        return query.astype(np.float32)

    def update(self, dt: float) -> None:
        """Advance the prediction, search when due (jumping when it pays), update the player and move
        the character by the root motion."""
        dt = float(dt)
        row, inside = self._current_row()
        if row < 0 or not inside or self._frame % self.search_every == 0:
            self._search(row, inside)
        self._frame += 1
        self._track_goal_turn(dt)
        _, self.velocity, self.acceleration = _spring_velocity(self.velocity, self.acceleration,
                                                               self.desired_velocity, self.velocity_halflife, dt)
        self.facing_rate = _spring_angle(self.facing, self.facing_rate, self._goal_facing(), self.facing_halflife, dt)[1]
        self.player.update(dt)
        if self.warping is not None:
            self._warp(dt)
        move, turn = self.player.root_motion
        c, s = math.cos(self.facing), math.sin(self.facing)
        self.position += np.array([c * move[0] + s * move[2], 0.0, -s * move[0] + c * move[2]])
        self.facing = (self.facing + turn + math.pi) % (2.0 * math.pi) - math.pi
        if dt > 0:
            self._last_dt = dt
            self._keep_shown()

    def _track_goal_turn(self, dt: float) -> None:
        """Smooth how fast the desired velocity's direction turns (:attr:`goal_turn_rate`)."""
        v = self.desired_velocity
        moving = float(np.hypot(v[0], v[1])) > 0.1
        heading = math.atan2(v[0], v[1]) if moving else (self._goal_heading or 0.0)
        previous = heading if self._goal_heading is None else self._goal_heading
        self.goal_turn_rate = float(_turn_goal(self.goal_turn_rate, previous, heading, moving, dt,
                                               self.goal_turn_halflife))
        self._goal_heading = heading

    def _warp(self, dt: float) -> None:
        """Set the warping's stride, angle and axis from the clip's smoothed velocity and the
        prediction spring's (both in the character's frame), then warp the pose and the delta."""
        warp = self.warping
        assert warp is not None
        if dt > 0:
            raw = self.player._root_motion.delta[0, :2] / dt
            self.clip_velocity += (raw - self.clip_velocity) * (1.0 - math.exp(-LN2 * dt / 0.15))
        c, s = math.cos(self.facing), math.sin(self.facing)
        vx, vz = self.velocity
        want = np.array([c * vx - s * vz, s * vx + c * vz])  # world -> character frame
        clip_speed, want_speed = float(np.hypot(*self.clip_velocity)), float(np.hypot(*want))
        stride, angle = 1.0, 0.0
        if clip_speed > 0.3 and want_speed > 0.1:
            stride = min(max(want_speed / clip_speed, self.max_stride[0]), self.max_stride[1])
            turn = math.atan2(want[0], want[1]) - math.atan2(self.clip_velocity[0], self.clip_velocity[1])
            turn = (turn + math.pi) % (2.0 * math.pi) - math.pi
            angle = min(max(turn, -self.max_angle), self.max_angle)
            warp.axis[0] = self.clip_velocity / clip_speed
        # eased toward the goal (a new clip's speed or a stop changes it at once)
        k = 1.0 - math.exp(-LN2 * dt / WARP_EASE) if dt > 0 else 0.0
        warp.stride[0] += (stride - warp.stride[0]) * k
        warp.angle[0] += (angle - warp.angle[0]) * k
        warp.apply(dt)

    def _played_name(self, row: int) -> str:
        """The clip that plays database row ``row`` (its mirror for a mirrored row)."""
        name = self.db.clip_name(row)
        return name + SUFFIX if self.db.mirrored[row] else name

    def _search(self, row: int, inside: bool) -> None:
        self.searches += 1
        query = self._query()
        best, cost = self.db.search(query, hints=np.array([row]))  # the frame playing bounds the search
        best_row = int(best[0])
        if best_row < 0:
            return
        if self._clip is not None:
            now = self.player.action(self._clip).time
            if self._played_name(best_row) == self._clip and abs(self.db.time[best_row] - now) < 0.2:
                return  # where it is already going
            # past its clip's last row the frame playing has no row to beat (the best frame anywhere wins)
            if inside and cost[0] >= float(np.sum((self.db.features[row] - query) ** 2)) - self.margin:
                return
        clip, time = self._played_name(best_row), float(self.db.time[best_row])
        if self._clip is None:
            self.player.play(clip, offset=time)
        else:
            self.player.crossfade(clip, self.blend_time, blend=self.blend, offset=time, restart=True)
        self._clip = clip
        self.jumps += 1
