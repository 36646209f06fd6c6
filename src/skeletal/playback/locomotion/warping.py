"""Stride and orientation warping: a clip played at a speed or in a direction it was not recorded at,
the feet still planted (Unreal's Stride Warping and Orientation Warping nodes).

* **Orientation warping** turns the lower body by ``angle`` (radians about model +Y) about the pelvis
  and the upper body back by the same angle, spread evenly over the spine joints between the pelvis and
  the neck: the legs step along the turned direction while the chest and head keep facing ahead. The
  root-motion delta turns with them.
* **Stride warping** scales each foot's offset from the pelvis along the clip's direction of motion by
  ``stride``: a planted foot, which moves back under the body at the clip's speed, now moves back
  ``stride`` times as fast, so the character can move ``stride`` times as fast with that foot still.
  The pelvis lowers as far as the legs need to reach their targets; each leg's two-bone IK
  (:func:`skeletal.ik.two_bone_one`) puts its foot on its target with the foot's rotation kept. The
  root-motion delta scales by ``stride``.

Both run in one compiled call over the whole batch (:mod:`.warp_kernels`), after the mixer's update
and its other controllers; the mixer's world rows and skin palettes are then rebuilt (its WORLD
stage). On a :class:`~skeletal.Player` or :class:`~skeletal.Mixer` (float64 or float32), and on a
:class:`~skeletal.Crowd` (its poses read out of its SIMD lanes, world rows built in the same compiled
call, per-instance ``stride``/``angle``/``axis``: each instance warps as a Player with the same
settings would, within float32 rounding); under
:class:`~.controller.MotionMatching` with ``warping=True``, which sets ``stride`` and ``angle`` from
the desired and the clip's velocity.

>>> import skeletal
>>> from skeletal.demo import demo_asset
>>> player = skeletal.Player(demo_asset())
>>> warp = Warping(player)
>>> warp.stride[:] = 1.4         # 40% longer steps: move 1.4x the clip's speed
>>> _ = player.play("walk"); player.update(1 / 60)
>>> bool(warp.targets.any())
True
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ...errors import SkeletalError
from ...anim.pose import ancestors_and_self, world_matrices
from ...quat import decompose_trs
from .. import kernels as K
from ..contacts import Leg, find_legs
from ..footplacement import common_parent
from .mixer_hook import _root_motion_of
from ..procedural import find_head_chain
from .warp_kernels import warp_kernel, warp_posed_kernel, warp_posed_serial, warp_serial
from ..._threads import capped_threads

#: Batches up to this size run the serial kernel.
SERIAL_BELOW = 4

#: A detached foot keeps its offset from its chain's end up to this fraction of the leg's length (the
#: IK controls of RobotExpressive's Walking and Running clips sit up to 3.7% of it off their legs).
FOLLOW_SLACK = 0.04


def leg_chains(rig: Any, legs: list[Leg]) -> tuple[list[Leg], list[int]]:
    """The two-bone chains the warping's leg IK bends, and each leg's detached foot (-1: none).

    Most rigs' feet end their legs' chains (``thigh -> knee -> foot``), and ``legs`` is returned as
    it is. Some rigs' feet are IK controls hung elsewhere (RobotExpressive's ``FootL`` hangs off the
    armature's root bone, and its leg ``UpperLegL -> LowerLegL`` ends in ``LowerLegL_end`` at the
    same place, which the exported clips keep on the control). Then the legs found by name share
    their thigh and knee (the armature's bones), and each leg is rebound: its chain ends at the joint
    outside the foot's own subtree that sits nearest the foot in the rest pose (within a tenth of
    the leg's length), the knee is that joint's parent and the thigh the knee's parent. The foot then
    follows the chain's end (:meth:`Warping.apply` puts it where it sits on the end in the rest pose
    and turns it with the lower body). Raises :class:`SkeletalError` naming the foot when no such chain exists."""
    a, b = legs[0], legs[1]
    if len({a.thigh, a.knee, a.foot, b.thigh, b.knee, b.foot}) == 6:
        return list(legs), [-1] * len(legs)
    parents = np.asarray(rig.parents)
    rest = world_matrices(parents, rig.rest)[:, :3, 3]
    chains, followers = [], []
    for leg in legs:
        own = {leg.foot}
        for j in range(leg.foot + 1, len(parents)):  # parent-first: the foot's subtree
            if parents[j] in own:
                own.add(j)
        distance = np.linalg.norm(rest - rest[leg.foot], axis=1)
        distance[list(own)] = np.inf
        end = int(np.argmin(distance))
        knee = int(parents[end])
        thigh = int(parents[knee]) if knee >= 0 else -1
        length = (np.linalg.norm(rest[end] - rest[knee]) + np.linalg.norm(rest[knee] - rest[thigh])
                  if thigh >= 0 else 0.0)
        if thigh < 0 or not distance[end] <= 0.1 * length:
            raise SkeletalError(f"warping: foot {rig.names[leg.foot]!r} is not on a leg chain, and no "
                                "two-bone chain ends where it sits (pass legs=)")
        chains.append(Leg(thigh, knee, end, -1, leg.side))
        followers.append(leg.foot)
    c, d = chains
    if len({c.thigh, c.knee, c.foot, d.thigh, d.knee, d.foot}) != 6:
        raise SkeletalError(f"warping: the feet {rig.names[a.foot]!r} and {rig.names[b.foot]!r} rebind to "
                            "shared joints (pass legs=)")
    return chains, followers


def find_spine(rig: Any, pelvis: int) -> list[int]:
    """The joints strictly between ``pelvis`` and the neck (or head), parent first, found by name
    (:func:`~skeletal.playback.procedural.find_head_chain`); empty when no head is found."""
    try:
        neck = find_head_chain(rig)[0]
    except SkeletalError:
        return []
    chain = []
    j = int(rig.parents[neck])
    while j >= 0 and j != pelvis:
        chain.append(j)
        j = int(rig.parents[j])
    return chain[::-1] if j == pelvis else []


class Warping:
    """Stride and orientation warping on a Player, Mixer or Crowd (see the module docstring).

    Per instance, settable in place: ``stride`` (B,) (1: as recorded; clamped to 0.25..4), ``angle``
    (B,) radians about +Y (0: as recorded; clamped to +-``max_angle`` degrees), ``axis`` (B, 2) the
    clip's direction of motion in model (x, z) (default +Z), ``weight`` (B,) (0 switches an instance off). ``targets`` (B, L, 3): the feet's
    model-space targets of the last update.

    ``legs``: a list of :class:`~skeletal.playback.contacts.Leg` or a dict as
    :func:`~skeletal.playback.contacts.find_legs` takes; ``spine``: joint names or indices that turn
    the upper body back (default :func:`find_spine`); ``reach``: the fraction of a leg's length it may
    stretch to before the pelvis lowers; ``soft``: the IK's soft limit; ``attach``: run after every
    update of the mixer (as its last controller); False: the caller calls :meth:`apply` after each
    update (what :class:`~.controller.MotionMatching` does).

    >>> warp = Warping(player)                  # doctest: +SKIP
    >>> warp.angle[:] = math.radians(30)        # doctest: +SKIP
    >>> crowd_warp = Warping(skeletal.Crowd(asset, 100))              # doctest: +SKIP
    >>> crowd_warp.stride[:] = np.random.uniform(0.7, 1.4, 100)        # doctest: +SKIP
    """

    def __init__(self, target: Any, *, legs: Any = None, spine: Sequence[str | int] | None = None,
                 reach: float = 0.98, soft: float = 0.0, max_angle: float = 90.0, attach: bool = True):
        mixer = getattr(target, "mixer", target)
        if not (hasattr(mixer, "rig") and hasattr(mixer, "local_pose") and hasattr(mixer, "controllers")):
            raise SkeletalError(f"warping runs on a Player, Mixer or Crowd, not a {type(target).__name__}")
        self.mixer = mixer
        #: a Crowd: its world matrices are not kept (or kept as 3x4 rows), so the kernel builds them
        self.crowd = hasattr(mixer, "_wide_ok")
        self._world: np.ndarray | None = None
        rig = mixer.rig
        if legs is None or isinstance(legs, dict):
            legs = find_legs(rig, legs)
        #: the IK chains, and per leg the foot that follows its chain's end (-1: the chain's own end)
        self.legs: list[Leg]
        self.legs, followers = leg_chains(rig, list(legs))
        self.followers = np.array(followers, np.int64)
        keep = [j for j in followers if j >= 0] + [leg.foot for leg, f in zip(self.legs, followers) if f >= 0]
        # the joints whose world rows the followers need, and where each sits in that subset
        self._follow_chain = ancestors_and_self(np.asarray(rig.parents), np.array(keep, np.int64)) if keep \
            else np.zeros(0, np.int64)
        where = {int(j): i for i, j in enumerate(self._follow_chain)}
        self._follow_parents = np.array([where[int(rig.parents[j])] if rig.parents[j] >= 0 else -1
                                         for j in self._follow_chain], np.int64)
        if not (0.0 < reach <= 1.0 and 0.0 <= soft < 1.0 and 0.0 <= max_angle <= 180.0):
            raise SkeletalError("warping: need 0 < reach <= 1, 0 <= soft < 1, 0 <= max_angle <= 180")
        self.reach, self.soft, self.max_angle = float(reach), float(soft), math.radians(max_angle)
        thighs = [leg.thigh for leg in self.legs]
        self.pelvis = common_parent(rig.parents, thighs, "warping")
        if spine is None:
            joints = find_spine(rig, self.pelvis)
        else:
            joints = []
            for j in spine:
                try:
                    joints.append(rig.find(j) if isinstance(j, str) else int(j))
                except KeyError:
                    raise SkeletalError(f"warping: no spine joint named {j!r}") from None
        self.spine = np.array(joints, np.int64)
        self._legs = np.ascontiguousarray(np.array([[l.thigh for l in self.legs], [l.knee for l in self.legs],
                                                    [l.foot for l in self.legs]], np.int64))
        rest = world_matrices(rig.parents, rig.rest)
        self.leg_length = np.array([np.linalg.norm(rest[l.knee, :3, 3] - rest[l.thigh, :3, 3])
                                    + np.linalg.norm(rest[l.foot, :3, 3] - rest[l.knee, :3, 3]) for l in self.legs])
        #: (L,) how far (model units) a detached foot may sit from its chain's end after the warp
        self.follow_slack = FOLLOW_SLACK * self.leg_length
        b = mixer.count
        self.stride = np.ones(b)
        self.angle = np.zeros(b)
        self.axis = np.tile([0.0, 1.0], (b, 1))
        self.weight = np.ones(b)
        self.targets = np.zeros((b, len(self.legs), 3))
        self._parents = np.ascontiguousarray(rig.parents, np.int64)
        # the joints a warp rewrites, their rows before (float64) and after (the mixer's dtype) the last
        # warp: what :meth:`unwarped_pose` puts back (None: the last update was not changed)
        changed = {self.pelvis, *self.spine.tolist(), *self._legs.ravel().tolist(), *[f for f in followers if f >= 0]}
        self._changed = np.array(sorted(int(j) for j in changed), np.int64)
        self._unwarped: np.ndarray | None = None
        self._warped: np.ndarray | None = None
        mixer.__dict__["_warping"] = self  # read by inertialized switches (not through __setattr__)
        self.attached = bool(attach)
        if attach:
            mixer.controllers = [*mixer.controllers, self]

    def _move_followers(self, pose: np.ndarray, before: np.ndarray, angle: np.ndarray, on: np.ndarray,
                        active: np.ndarray) -> bool:
        """Detached feet (:func:`leg_chains`) follow their chain's end, in place in ``pose`` (B, N, 10),
        for the instances ``on`` (B,) bool; ``before``: the subset's world rows (B, M, 4, 4) before the
        warp. A foot's row is rewritten where the instance warped (``active`` (B,) bool) or the foot
        was capped; returns whether any row was.

        Each foot keeps its offset from the end in the end's own frame (so it turns and moves with the
        leg), its length capped at :attr:`follow_slack`, and its model-space rotation turned by the lower
        body's ``angle`` about +Y. The cap puts back on its leg a foot that the pose before the warp had
        left behind: a clip that does not animate the controls (RobotExpressive's Idle, blended into its
        starts and stops), or an inertialized switch that carries the control and the leg's joints on
        each by its own velocity."""
        after = world_matrices(self._follow_parents, pose[:, self._follow_chain])
        index = {int(j): i for i, j in enumerate(self._follow_chain)}
        c, s = np.cos(angle), np.sin(angle)
        turn = np.zeros((len(angle), 3, 3))
        turn[:, 0, 0], turn[:, 0, 2], turn[:, 2, 0], turn[:, 2, 2], turn[:, 1, 1] = c, s, -s, c, 1.0
        parents = self.mixer.rig.parents
        changed = False
        for leg, foot, slack in zip(self.legs, self.followers, self.follow_slack):
            if foot < 0:
                continue
            f, e = index[int(foot)], index[int(leg.foot)]
            moved = before[:, f].copy()
            moved[:, :3, :3] = turn @ moved[:, :3, :3]
            # the foot's offset from the end: model space -> the end's frame (before), capped, and back (after)
            gap = before[:, f, :3, 3] - before[:, e, :3, 3]
            length = np.linalg.norm(gap, axis=1)
            capped = length > slack
            gap *= (slack / np.maximum(length, slack))[:, None]
            local = np.linalg.solve(before[:, e, :3, :3], gap[:, :, None])
            moved[:, :3, 3] = (after[:, e, :3, :3] @ local)[:, :, 0] + after[:, e, :3, 3]
            p = int(parents[foot])
            parent = after[:, index[p]] if p >= 0 else np.broadcast_to(np.eye(4), moved.shape)
            t, q, sc = decompose_trs(np.linalg.inv(parent) @ moved)
            rows = np.flatnonzero(on & (active | capped))
            pose[rows, foot, 0:3], pose[rows, foot, 3:7], pose[rows, foot, 7:10] = t[rows], q[rows], sc[rows]
            changed = changed or len(rows) > 0
        return changed

    def unwarped_pose(self, rows: Any = None) -> np.ndarray:
        """The mixer's pose (n, N, 10) float64 of instances ``rows`` (default: all) as its update made
        it: the last warp's changes undone, for the instances whose warped joints still hold what the
        warp wrote. An inertialized switch starts from this pose and its velocity (the warp is made
        again after every update): started from the warped pose, the clips' velocity ahead would hold
        the warp's whole change in one frame, and a dead blend would carry the legs and the detached
        feet on by it.

        >>> warp.unwarped_pose([0]).shape == player.local_pose[None].shape   # doctest: +SKIP
        True
        """
        mixer = self.mixer
        rows = np.arange(mixer.count) if rows is None else np.atleast_1d(np.asarray(rows)).astype(np.int64)
        native = np.asarray(mixer.local_pose[rows])
        pose = native.astype(np.float64)
        if self._unwarped is not None and self._warped is not None:
            same = np.flatnonzero((native[:, self._changed] == self._warped[rows]).all(axis=(1, 2)))
            pose[same[:, None], self._changed[None, :]] = self._unwarped[rows[same]]
        return pose

    def _written(self, native: np.ndarray, pose: np.ndarray, unwarped: np.ndarray) -> None:
        """The warped ``pose`` into the mixer's ``native`` rows; its world rows, IK and palettes rebuilt;
        the changed joints' rows kept for :meth:`unwarped_pose`."""
        if pose is not native:
            native[...] = pose
        self._unwarped, self._warped = unwarped, native[:, self._changed].copy()
        self.mixer._run(0.0, K.WORLD)  # world rows, the mixer's IK, palettes of the warped pose

    def remove(self) -> None:
        """Stop warping after each update (detach from the mixer; its switches no longer undo this warp)."""
        self.mixer.controllers = [c for c in self.mixer.controllers if c is not self]
        self.attached = False
        self._unwarped = self._warped = None
        if self.mixer.__dict__.get("_warping") is self:
            del self.mixer.__dict__["_warping"]

    # the mixer's controller protocol
    def before_update(self, dt: float) -> None:
        pass

    def after_update(self, dt: float) -> None:
        controllers = self.mixer.controllers
        if controllers[-1] is not self:
            # last from the next update on (an inertialized switch puts its controller last): a new list,
            # the mixer is iterating the old one
            self.mixer.controllers = [c for c in controllers if c is not self] + [self]
        self.apply(dt)

    def apply(self, dt: float = 0.0) -> None:
        """Warp the mixer's current pose (one compiled call), rebuild its world rows and palettes, and
        scale and turn its root-motion delta (when it has root motion)."""
        mixer = self.mixer
        stride = np.clip(np.nan_to_num(self.stride, nan=1.0), 0.25, 4.0)
        angle = np.clip(np.nan_to_num(self.angle), -self.max_angle, self.max_angle)
        root = _root_motion_of(mixer)
        axis = np.array(self.axis, np.float64)
        if not (np.isfinite(axis).all() and np.isfinite(self.weight).all()):
            raise SkeletalError("warping: axis and weight must be finite")
        norm = np.hypot(axis[:, 0], axis[:, 1])
        axis = np.where(norm[:, None] > 1e-9, axis / np.maximum(norm, 1e-300)[:, None], [0.0, 1.0])
        on = self.weight > 0
        active = on & ((stride != 1.0) | (angle != 0.0))
        self._unwarped = self._warped = None
        if not active.any() and not (len(self._follow_chain) and on.any()):
            return
        native = mixer.local_pose  # a crowd: its SIMD lanes' rows written out first
        pose = native if native.dtype == np.float64 else native.astype(np.float64)
        unwarped = pose[:, self._changed].copy()
        before = world_matrices(self._follow_parents, pose[:, self._follow_chain]) if len(self._follow_chain) else None
        if not active.any():
            # as recorded: only detached feet left off their legs are put back (nothing else changes)
            assert before is not None
            if not self._move_followers(pose, before, angle, on, active):
                return
            self._written(native, pose, unwarped)
            return
        if self.crowd:
            # world rows from the poses, in the kernel (scratch kept between updates)
            if self._world is None or self._world.shape[:2] != pose.shape[:2]:
                self._world = np.zeros(pose.shape[:2] + (4, 4))
            world = self._world
            kernel = warp_posed_serial if mixer.count <= SERIAL_BELOW else warp_posed_kernel
        else:
            world = mixer.world if mixer.world.dtype == np.float64 else mixer.world.astype(np.float64)
            kernel = warp_serial if mixer.count <= SERIAL_BELOW else warp_kernel
        with capped_threads():
            kernel(pose, world, self._parents, self.pelvis, self.spine, self._legs, self.leg_length, stride, angle,
                   axis, self.reach, self.soft, active.astype(np.float64), self.targets)
        if before is not None:
            self._move_followers(pose, before, angle, on, active)
        self._written(native, pose, unwarped)
        if root is not None:
            delta = root.delta
            x, z = delta[:, 0] * stride, delta[:, 1] * stride
            c, s = np.cos(angle), np.sin(angle)
            delta[active, 0] = (x * c + z * s)[active]
            delta[active, 1] = (-x * s + z * c)[active]
