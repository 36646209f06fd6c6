"""Motion matching on a :class:`~skeletal.Crowd`: every instance with its own goal, one search call
for all of them.

:class:`CrowdMotionMatching` is :class:`~skeletal.playback.locomotion.controller.MotionMatching`
with an instance axis first (``MotionMatching(crowd, db)`` makes one). Each update:

1. the instances whose search is due (every ``search_every`` frames, staggered over the instances so
   that about 1/``search_every`` of them search each frame; at once for an instance past its clip's
   last database row or playing nothing) build their queries (pose features of the pose shown, from
   the crowd's poses placed by each instance's :attr:`transforms`, velocities over the last update;
   the trajectory predicted by each instance's spring) and the database answers all of them in one
   batched call (:meth:`~skeletal.playback.locomotion.database.MatchingDatabase.search`); the
   instances whose best frame beats the playing one by ``margin`` switch to it, all in one
   inertialized switch (:func:`~skeletal.playback.locomotion.mixer_hook.switch_many`: per-instance
   clips and offsets);
2. the prediction springs advance (per instance, in numpy over the instance axis), the crowd updates
   (its compiled kernels), stride and orientation warping (``warping=True``: one compiled call over
   the crowd, :class:`~skeletal.playback.locomotion.warping.Warping`) scales and turns each instance
   toward its predicted velocity, and each instance moves by its root-motion delta.

The caller sets goals per instance: :meth:`CrowdMotionMatching.set_goal` (velocities (N, 2) and
facings), or :meth:`CrowdMotionMatching.follow` (path points and their velocities: the goal is the
path's velocity plus a pull toward the point). ``position`` (N, 3), ``facing`` (N,) and
``transforms`` (N, 4, 4) place the instances.

>>> import skeletal
>>> from skeletal.demo import locomotion_asset
>>> from skeletal.playback.locomotion import MatchingDatabase, MotionMatching
>>> asset = locomotion_asset()
>>> db = MatchingDatabase.build(asset, exclude=("idle", "wave", "walk", "run"))   # doctest: +SKIP
>>> mm = MotionMatching(skeletal.Crowd(asset, 100), db)                            # doctest: +SKIP
>>> mm.set_goal(np.random.uniform(-1, 1, (100, 2)))                                # doctest: +SKIP
>>> for _ in range(120): mm.update(1 / 60)                                         # doctest: +SKIP
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from ...anim.pose import ancestors_and_self, world_matrices
from ...errors import SkeletalError
from .. import kernels as K
from .database import MatchingDatabase
from .mirror import SUFFIX, mirror_clip
from .mixer_hook import _root_motion_of, switch_many
from .prediction import LN2, WARP_EASE, _predict, _spring_angle, _spring_velocity, _turn_goal
from .warping import Warping


def _to_frame(v: np.ndarray, yaw: np.ndarray) -> np.ndarray:
    """Vectors (n, ..., 3) turned by -yaw (n,) about +Y: into each instance's character frame."""
    c = np.cos(yaw).reshape((-1,) + (1,) * (v.ndim - 2))
    s = np.sin(yaw).reshape((-1,) + (1,) * (v.ndim - 2))
    x, z = v[..., 0], v[..., 2]
    return np.stack([c * x - s * z, v[..., 1], s * x + c * z], axis=-1)


class CrowdMotionMatching:
    """Motion matching on every instance of ``crowd`` over ``database`` (see the module docstring).

    Arguments as :class:`~skeletal.playback.locomotion.controller.MotionMatching`'s, plus ``stagger``
    (default True: instance i searches on the frames where ``(frame + i) % search_every == 0``;
    False: all on the same frames). ``blend`` None: "dead_blend", the Player controller's default (a
    crowd runs inertialized crossfades in its update kernel like a Player). Per instance: ``desired_velocity`` (N, 2), ``desired_facing`` (N,)
    (NaN: face the desired velocity), ``position`` (N, 3), ``facing`` (N,), the springs' ``velocity``,
    ``acceleration`` (N, 2) and ``facing_rate`` (N,). Counts: ``searches`` (queries), ``search_calls``
    (batched calls), ``jumps``.
    """

    def __init__(self, crowd: Any, database: MatchingDatabase, *, search_every: int = 6, blend: str | None = None,
                 blend_time: float = 0.2, margin: float = 0.05, velocity_halflife: float = 0.3,
                 facing_halflife: float = 0.3, warping: bool = False, max_stride: tuple[float, float] = (0.7, 1.5),
                 max_angle: float = 20.0, stagger: bool = True, goal_turn_halflife: float = 0.25):
        crowd = getattr(crowd, "mixer", crowd)
        clips = {c.name for c in crowd.asset.clips}
        missing = [n for n in database.clip_names if n not in clips]
        if missing:
            raise SkeletalError(f"the crowd's asset has no clips {missing} of the database")
        if not {"trajectory_position", "trajectory_direction"} <= {f.kind for f in database.feature_set}:
            raise SkeletalError("the database needs trajectory_position and trajectory_direction features")
        lo, hi = (float(x) for x in max_stride)
        if not (0.0 < lo <= 1.0 <= hi and 0.0 <= max_angle <= 90.0):
            raise SkeletalError("warping needs 0 < max_stride[0] <= 1 <= max_stride[1] and 0 <= max_angle <= 90")
        self.crowd = crowd
        self.db = database
        n = crowd.count
        self.count = n
        self.search_every = max(int(search_every), 1)
        self.blend = "dead_blend" if blend is None else str(blend)
        self.blend_time, self.margin = float(blend_time), float(margin)
        self.velocity_halflife, self.facing_halflife = float(velocity_halflife), float(facing_halflife)
        self.max_stride, self.max_angle = (lo, hi), math.radians(max_angle)
        self.desired_velocity = np.zeros((n, 2))
        self.desired_facing = np.full(n, np.nan)
        self.position = np.zeros((n, 3))
        self.facing = np.zeros(n)
        self.velocity = np.zeros((n, 2))
        self.acceleration = np.zeros((n, 2))
        self.facing_rate = np.zeros(n)
        if not (np.isfinite(goal_turn_halflife) and goal_turn_halflife >= 0.0):
            raise SkeletalError(f"goal_turn_halflife must be 0 (off) or positive, got {goal_turn_halflife}")
        self.goal_turn_halflife = float(goal_turn_halflife)
        self.goal_turn_rate = np.zeros(n)  # how fast each desired velocity's direction turns (rad/s, smoothed)
        self._goal_heading = np.full(n, np.nan)
        self.clip_velocity = np.zeros((n, 2))  # each clip's own root velocity (character x, z), smoothed
        self.searches = self.search_calls = self.jumps = 0
        self._frame = 0
        self._phase = np.arange(n) % self.search_every if stagger else np.zeros(n, np.int64)
        # the clips the rows play: the database's, then their mirrors
        mirrored = bool(database.mirrored.any())
        self._names = list(database.clip_names) + ([c + SUFFIX for c in database.clip_names] if mirrored else [])
        self._rows = [np.flatnonzero((database.clip == c) & (database.mirrored == m))
                      for m in ((False, True) if mirrored else (False,)) for c in range(len(database.clip_names))]
        if mirrored:
            if _root_motion_of(crowd) is not None:
                raise SkeletalError("a database with mirrored rows needs a Crowd without root motion yet: "
                                    "the controller adds the mirrored clips, then enables it")
            for name in database.clip_names:
                crowd.clip_index(mirror_clip(crowd.asset, crowd.asset.clip(name), fps=database.fps))
        self._root = _root_motion_of(crowd)
        if self._root is None:
            from ..rootmotion import RootMotion

            self._root = RootMotion(crowd, database.root)
        self._slots = np.array([crowd.slot(name, 0) for name in self._names], np.int64)
        self._played = np.full(n, -1, np.int64)  # index into _names per instance (-1: nothing yet)
        rig = crowd.asset.rig
        self._traj = [(f, database.group(f.name)) for f in database.feature_set if f.kind.startswith("trajectory")]
        self._traj_frames = sorted({k for f, _ in self._traj for k in f.frames})
        self._pose = tuple(f for f in database.feature_set if not f.kind.startswith("trajectory"))
        self._pose_columns = [np.arange(database.width)[database.group(f.name)] for f in self._pose]
        try:
            joints = [rig.find(str(f.joint)) for f in self._pose]
        except KeyError as e:
            raise SkeletalError(f"the database's features name a joint the crowd's rig lacks: {e}") from None
        self._root_index = rig.find(database.root)
        self._kept = np.array(sorted({self._root_index, *joints}), np.int64)  # joints whose world rows are kept
        self._feature_joint = np.searchsorted(self._kept, joints)
        self._kept_root = int(np.searchsorted(self._kept, self._root_index))
        # the kept joints' chains to the root: the only world rows built each frame (rig order, remapped)
        self._chain = ancestors_and_self(rig.parents, self._kept).astype(np.int64)
        where = {int(j): i for i, j in enumerate(self._chain)}
        self._chain_parents = np.array([where[int(rig.parents[j])] if rig.parents[j] >= 0 else -1
                                        for j in self._chain], np.int32)
        self._chain_kept = np.array([where[int(j)] for j in self._kept], np.int64)
        self._shown: list[np.ndarray] = []  # the kept joints' world matrices (N, J, 4, 4), last two frames
        self._last_dt = 1.0 / database.fps
        self.warping: Warping | None = Warping(crowd, attach=False) if warping else None

    # -- the caller's side ---------------------------------------------------------------------

    def set_goal(self, velocity: npt.ArrayLike, facing: float | npt.ArrayLike | None = None, *,
                 instances: Any = None) -> None:
        """Desired world velocities (x, z) in m/s, (2,) for every selected instance or one row each,
        and facings (radians about +Y, 0 = +Z; None or NaN: face the velocity)."""
        rows = np.arange(self.count)[slice(None) if instances is None else instances]
        v = np.asarray(velocity, np.float64)
        if v.shape not in ((2,), (np.size(rows), 2)) or not np.isfinite(v).all():
            raise SkeletalError(f"desired velocity must be finite (x, z) pairs, (2,) or ({np.size(rows)}, 2); "
                                f"got shape {v.shape}")
        self.desired_velocity[rows] = v
        self.desired_facing[rows] = np.nan if facing is None else np.asarray(facing, np.float64)

    def follow(self, points: npt.ArrayLike, velocities: npt.ArrayLike, pull: float = 1.0) -> None:
        """Goals toward paths: each instance's desired velocity is its path's velocity (N, 2) plus
        ``pull`` (1/s) times its offset from its path point (N, 2) (world x, z)."""
        p = np.asarray(points, np.float64)
        v = np.asarray(velocities, np.float64)
        if p.shape != (self.count, 2) or v.shape != (self.count, 2):
            raise SkeletalError(f"follow needs points and velocities of shape ({self.count}, 2)")
        self.set_goal(v + float(pull) * (p - self.position[:, [0, 2]]))

    @property
    def transforms(self) -> np.ndarray:
        """(N, 4, 4) model matrices placing the instances: rotation ``facing`` about +Y, then ``position``."""
        c, s = np.cos(self.facing), np.sin(self.facing)
        m = np.zeros((self.count, 4, 4))
        m[:, 0, 0], m[:, 0, 2], m[:, 2, 0], m[:, 2, 2] = c, s, -s, c
        m[:, 1, 1] = m[:, 3, 3] = 1.0
        m[:, :3, 3] = self.position
        return m

    @property
    def clips(self) -> list[str | None]:
        """The clip each instance plays now."""
        return [self._names[k] if k >= 0 else None for k in self._played]

    # -- per frame -----------------------------------------------------------------------------

    def _goal_facing(self) -> np.ndarray:
        v = self.desired_velocity
        moving = np.hypot(v[:, 0], v[:, 1]) > 1e-3
        toward = np.where(moving, np.arctan2(v[:, 0], v[:, 1]), self.facing)
        return np.where(np.isnan(self.desired_facing), toward, self.desired_facing)

    def predicted_trajectory(self, who: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Predicted root positions (n, K, 3) (world, y = 0) and facings (n, K) at the database's
        trajectory frames, of instances ``who`` (default: all)."""
        rows = np.arange(self.count) if who is None else np.asarray(who)
        shift, facings = _predict(self.velocity[rows], self.acceleration[rows], self.desired_velocity[rows],
                                  self.facing[rows], self.facing_rate[rows], self._goal_facing()[rows],
                                  self.goal_turn_rate[rows], np.isnan(self.desired_facing[rows]),
                                  self.velocity_halflife, self.facing_halflife, self._traj_frames, self.db.fps)
        positions = np.zeros((len(rows), len(self._traj_frames), 3))
        positions[:, :, 0] = self.position[rows, 0, None] + shift[:, :, 0]
        positions[:, :, 2] = self.position[rows, 2, None] + shift[:, :, 1]
        return positions, np.asarray(facings, np.float64)

    def _current_rows(self) -> tuple[np.ndarray, np.ndarray]:
        """Per instance, the database row nearest the frame playing (-1: nothing plays) and whether it
        is that frame (False past the clip's last row)."""
        row = np.full(self.count, -1, np.int64)
        inside = np.zeros(self.count, np.bool_)
        for k in np.unique(self._played[self._played >= 0]):
            who = np.flatnonzero(self._played == k)
            rows = self._rows[k]
            times = self.db.time[rows]
            t = self.crowd.fs[who, self._slots[k], K.F_SAMPLE]
            i = np.searchsorted(times, t)
            before = np.clip(i - 1, 0, len(rows) - 1)
            after = np.clip(i, 0, len(rows) - 1)
            i = np.where((i >= len(rows)) | ((i > 0) & (t - times[before] < times[after] - t)), before, after)
            row[who] = rows[i]
            inside[who] = np.abs(times[i] - t) <= 1.5 / self.db.fps
        return row, inside

    def _pose_features(self, who: np.ndarray) -> np.ndarray:
        """Raw pose-group features (n, P) of instances ``who`` from the last two frames shown."""
        if not self._shown:
            return np.zeros((len(who), sum(len(c) for c in self._pose_columns)))
        now = self._shown[-1][who]
        prev = self._shown[0][who]
        fps = 1.0 / self._last_dt if len(self._shown) > 1 else self.db.fps
        root = now[:, self._kept_root]
        ground = root[:, :3, 3].copy()
        ground[:, 1] = 0.0
        facing = root[:, :3, :3] @ np.asarray(self.db.forward, np.float64)
        yaw = np.arctan2(facing[:, 0], facing[:, 2])
        columns = []
        for f, j in zip(self._pose, self._feature_joint):
            p = now[:, j, :3, 3]
            v = p - ground if f.kind == "position" else (p - prev[:, j, :3, 3]) * fps
            columns.append(_to_frame(v, yaw))
        return np.concatenate(columns, axis=1)

    def _queries(self, who: np.ndarray) -> np.ndarray:
        """Normalised queries (n, D) float32 of instances ``who``."""
        db = self.db
        query = np.zeros((len(who), db.width))
        if self._pose_columns:
            columns = np.concatenate(self._pose_columns)
            query[:, columns] = (self._pose_features(who) - db.mean[columns]) / db.scale[columns]
        positions, facings = self.predicted_trajectory(who)
        c, s = np.cos(self.facing[who])[:, None], np.sin(self.facing[who])[:, None]
        for f, group in self._traj:
            j = [self._traj_frames.index(k) for k in f.frames]
            if f.kind == "trajectory_position":
                x = positions[:, j, 0] - self.position[who, 0][:, None]
                z = positions[:, j, 2] - self.position[who, 2][:, None]
            else:
                x, z = np.sin(facings[:, j]), np.cos(facings[:, j])
            raw = np.stack([c * x - s * z, s * x + c * z], axis=-1).reshape(len(who), -1)  # character frame
            query[:, group] = (raw - db.mean[group]) / db.scale[group]
        return query.astype(np.float32)

    def _search(self, who: np.ndarray, row: np.ndarray, inside: np.ndarray) -> None:
        """One batched search for instances ``who``; switch those whose best frame pays."""
        db = self.db
        self.searches += len(who)
        self.search_calls += 1
        query = self._queries(who)
        best, cost = db.search(query, hints=row[who])
        played = np.where(db.mirrored[np.maximum(best, 0)], len(db.clip_names), 0) + db.clip[np.maximum(best, 0)]
        target_time = db.time[np.maximum(best, 0)]
        current = self._played[who]
        now = np.where(current >= 0, self.crowd.fs[who, self._slots[np.maximum(current, 0)], K.F_SAMPLE], 0.0)
        there = (played == current) & (np.abs(target_time - now) < 0.2)  # where it is already going
        current_cost = np.full(len(who), np.inf)
        known = inside[who] & (row[who] >= 0)
        current_cost[known] = np.sum((db.features[row[who][known]] - query[known]) ** 2, axis=1)
        jump = (best >= 0) & ((current < 0) | (~there & (~known | (cost < current_cost - self.margin))))
        fresh = jump & (current < 0)
        for k in np.unique(played[fresh]):  # the first clip of an instance: played, nothing to fade from
            sel = fresh & (played == k)
            self.crowd.play(self._names[int(k)], offsets=target_time[sel], instances=who[sel])
        moving = jump & (current >= 0)
        if moving.any():  # every other jump in one switch (one look-ahead and one evaluation for all)
            switch_many(self.crowd, [self._names[int(k)] for k in played[moving]], self.blend_time, self.blend,
                        offsets=target_time[moving], instances=who[moving])
        self._played[who[jump]] = played[jump]
        self.jumps += int(jump.sum())

    def update(self, dt: float) -> None:
        """Search where due (one batched call), advance the springs, update the crowd, warp, and move
        every instance by its root motion."""
        dt = float(dt)
        row, inside = self._current_rows()
        due = (row < 0) | ~inside | ((self._frame + self._phase) % self.search_every == 0)
        who = np.flatnonzero(due)
        if len(who):
            self._search(who, row, inside)
        self._frame += 1
        self._track_goal_turn(dt)
        goal = self._goal_facing()
        _, self.velocity, self.acceleration = _spring_velocity(self.velocity, self.acceleration, self.desired_velocity,
                                                               self.velocity_halflife, dt)
        self.facing_rate = _spring_angle(self.facing, self.facing_rate, goal, self.facing_halflife, dt)[1]
        self.crowd.update(dt)
        if self.warping is not None:
            self._warp(dt)
        delta = self._root.delta
        c, s = np.cos(self.facing), np.sin(self.facing)
        self.position[:, 0] += c * delta[:, 0] + s * delta[:, 1]
        self.position[:, 2] += -s * delta[:, 0] + c * delta[:, 1]
        self.facing = (self.facing + delta[:, 2] + math.pi) % (2.0 * math.pi) - math.pi
        if dt > 0:
            self._last_dt = dt
            self._keep_shown()

    def _track_goal_turn(self, dt: float) -> None:
        """Smooth how fast each desired velocity's direction turns (:attr:`goal_turn_rate`)."""
        v = self.desired_velocity
        moving = np.hypot(v[:, 0], v[:, 1]) > 0.1
        kept = np.where(np.isnan(self._goal_heading), 0.0, self._goal_heading)
        heading = np.where(moving, np.arctan2(v[:, 0], v[:, 1]), kept)
        previous = np.where(np.isnan(self._goal_heading), heading, self._goal_heading)
        self.goal_turn_rate = np.asarray(_turn_goal(self.goal_turn_rate, previous, heading, moving, dt,
                                                    self.goal_turn_halflife), np.float64)
        self._goal_heading = heading

    def _keep_shown(self) -> None:
        """The kept joints' world matrices of the pose shown now, placed by :attr:`transforms`."""
        pose = np.asarray(self.crowd.local_pose[:, self._chain], np.float64)
        world = world_matrices(self._chain_parents, pose)[:, self._chain_kept]
        placed = self.transforms[:, None] @ world
        self._shown = (self._shown + [placed])[-2:]

    def _warp(self, dt: float) -> None:
        """Each instance's stride, angle and axis from its clip's smoothed velocity and its spring's (in
        its character frame), eased; then one warping call over the crowd."""
        warp = self.warping
        assert warp is not None
        if dt > 0:
            raw = self._root.delta[:, :2] / dt
            self.clip_velocity += (raw - self.clip_velocity) * (1.0 - math.exp(-LN2 * dt / 0.15))
        c, s = np.cos(self.facing), np.sin(self.facing)
        vx, vz = self.velocity[:, 0], self.velocity[:, 1]
        want = np.stack([c * vx - s * vz, s * vx + c * vz], axis=-1)  # world -> character frame
        clip_speed = np.hypot(self.clip_velocity[:, 0], self.clip_velocity[:, 1])
        want_speed = np.hypot(want[:, 0], want[:, 1])
        on = (clip_speed > 0.3) & (want_speed > 0.1)
        safe = np.where(on, clip_speed, 1.0)
        stride = np.where(on, np.clip(want_speed / safe, *self.max_stride), 1.0)
        turn = np.arctan2(want[:, 0], want[:, 1]) - np.arctan2(self.clip_velocity[:, 0], self.clip_velocity[:, 1])
        turn = (turn + math.pi) % (2.0 * math.pi) - math.pi
        angle = np.where(on, np.clip(turn, -self.max_angle, self.max_angle), 0.0)
        warp.axis[on] = self.clip_velocity[on] / safe[on, None]
        k = 1.0 - math.exp(-LN2 * dt / WARP_EASE) if dt > 0 else 0.0
        warp.stride += (stride - warp.stride) * k
        warp.angle += (angle - warp.angle) * k
        warp.apply(dt)


__all__ = ["CrowdMotionMatching"]
