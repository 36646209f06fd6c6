"""Look-at, a procedural stage (:meth:`skeletal.playback.procedural.Procedural.look_at`): a neck + head
chain aims at a world point followed through a critically damped spring. Holds :class:`LookAt`, the
compiled call of a few characters (:func:`look_kernel`) and the head chain found by name
(:func:`find_head_chain`).

Frames: targets are world coordinates, taken to model space through the driver's ``placement``
(B, 4, 4); the pose stays model space; matrices row-major acting on column vectors.

``proc`` (the stage's owner) is the :class:`~skeletal.playback.procedural.Procedural` driver, typed ``Any``
here: the driver imports this module, so it cannot import the driver back.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit

from ..errors import SkeletalError
from ..anim.ik import (AimLimit, IN_POLE, IN_TARGET, IN_WEIGHT, SF_FORWARD, SF_UP, SI_J0, SI_J1, SI_U0, SI_U1, StageTable,
                       aim_one)
from ..anim.pose import _joint_times_bind, world_matrices, world_node_into
from .jobs import entry, field, look_job
from .procstage import SERIAL_BELOW, PlanInput, _LastFrame
from .springs import critical_spring


@njit(cache=True)
def look_kernel(job, mode, omega, dt, keep_palettes):
    """The look-at stage of a few instances in one call, on a :class:`~skeletal.playback.jobs.LookJob`:
    the smoothed point follows ``target`` (B, 3) world through a critically damped spring (``mode`` 0:
    step it, 1: jump to the target), goes to model space through ``placement`` (B, 4, 4) into the aim
    stage's ``inputs`` (the head's up kept toward world up, ``weight`` (B,)), then the aim chain (the
    table's one stage) is solved by :func:`skeletal.ik.aim_one`; with ``keep_palettes`` the palette
    entries ``pal_idx`` (those under the chain) of ``pal`` (B, J, 4, 4) are recomputed too. False
    (nothing done) if a target is not finite."""
    pose, world, parents, placement = field(job, "pose"), field(job, "world"), field(job, "parents"), field(job, "placement")
    stage_i, stage_f, joints, jp = field(job, "stage_i"), field(job, "stage_f"), field(job, "joints"), field(job, "jp")
    inputs, update, scratch = field(job, "inputs"), field(job, "update"), field(job, "scratch")
    target, smoothed, velocity, weight = field(job, "target"), field(job, "smoothed"), field(job, "velocity"), field(job, "weight")
    pal, pal_joints, inv_bind, pal_idx = field(job, "pal"), field(job, "pal_joints"), field(job, "inv_bind"), field(job, "pal_idx")
    for b in range(pose.shape[0]):
        for i in range(3):
            if not math.isfinite(target[b, i]):
                return False
    e = math.exp(-omega * dt)
    for b in range(pose.shape[0]):
        M = placement[b]
        for i in range(3):
            if mode == 1:
                smoothed[b, i] = target[b, i]
                velocity[b, i] = 0.0
            elif dt > 0.0:
                d = smoothed[b, i] - target[b, i]
                j = velocity[b, i] + omega * d
                smoothed[b, i] = target[b, i] + (d + j * dt) * e
                velocity[b, i] = (velocity[b, i] - omega * j * dt) * e
        px, py, pz = smoothed[b, 0] - M[0, 3], smoothed[b, 1] - M[1, 3], smoothed[b, 2] - M[2, 3]
        for i in range(3):  # world -> model: R^T (p - t); world up in model space is R's second row
            inputs[b, 0, IN_TARGET + i] = M[0, i] * px + M[1, i] * py + M[2, i] * pz
            inputs[b, 0, IN_POLE + i] = M[1, i]
        inputs[b, 0, IN_WEIGHT] = weight[b]
        # the one aim stage, called directly (not through the stage runner, which would compile every
        # solver kind with it)
        j0, j1 = stage_i[0, SI_J0], stage_i[0, SI_J1]
        sf = stage_f[0]
        row = inputs[b, 0]
        aim_one(pose[b], world[b], parents, joints[j0:j1], jp[j0:j1], (row[IN_TARGET], row[IN_TARGET + 1],
                row[IN_TARGET + 2]), (row[IN_POLE], row[IN_POLE + 1], row[IN_POLE + 2]), min(weight[b], 1.0),
                (sf[SF_FORWARD], sf[SF_FORWARD + 1], sf[SF_FORWARD + 2]), (sf[SF_UP], sf[SF_UP + 1], sf[SF_UP + 2]),
                scratch[0])
        # the rows below the chain, then its palette entries (_rows, _palette_rows written out: inlined,
        # no call taking references on each array)
        pose_b, world_b = pose[b], world[b]
        for k in range(stage_i[0, SI_U0], stage_i[0, SI_U1]):
            world_node_into(update[k], parents, pose_b, world_b)
        if keep_palettes:
            pal_b = pal[b]
            for i in range(pal_idx.shape[0]):
                q = pal_idx[i]
                _joint_times_bind(pal_b, q, world_b, pal_joints[q], inv_bind)  # (affine_product_into's arithmetic)
    return True


def find_head_chain(rig) -> list[int]:
    """[neck, head] (or [head]) rig indices found by name ("Neck", "Head", "b_Head", "mixamorig:Head";
    not "HeadTop_End" and the like)."""
    def base(n: str) -> str:
        return n.split(":")[-1].split("|")[-1].lower()

    skip = ("top", "end", "nub", "site")
    heads = [j for j, n in enumerate(rig.names) if "head" in base(n) and not any(s in base(n) for s in skip)]
    if not heads:
        raise SkeletalError("no head joint found by name: pass joints=[...] to look_at")
    head = min(heads, key=lambda j: (len(_ancestors(rig.parents, j)), j))
    p = int(rig.parents[head])
    if p >= 0 and "neck" in base(rig.names[p]):
        return [p, head]
    return [head]


def _ancestors(parents, j: int) -> list[int]:
    out = []
    while parents[j] >= 0:
        j = int(parents[j])
        out.append(j)
    return out


class LookAt:
    """A neck + head chain (or any aim chain) turns so the head's forward axis points at a target.

    ``target``: world point(s) (B, 3) or (3,) (set :attr:`target` any time; None = not looking);
    ``joints``: the aim chain, parent first (default :func:`find_head_chain`); ``forward`` / ``up``:
    the last joint's local axes (default: the model's +Z / +Y in its rest pose); ``smooth_time``:
    seconds of the critically damped spring the target is followed through (0: no smoothing);
    ``limits``: :class:`skeletal.ik.AimLimit` per joint or one for all (default 50 deg yaw, 35 deg
    pitch, 15 deg roll each); ``shares``: relative share of the turn per joint (default neck 0.4, head
    0.6); ``weight`` (B,) or scalar.

    ``smoothed`` (B, 3): the point looked at after the last update.
    """

    builds_world = False
    keeps_world = True  # the aim stage rebuilds the rows it moves

    @property
    def palettes_current(self) -> bool:
        """Whether the last apply kept the mixer's palettes current too."""
        return self.last.palettes_current

    # the settings the plan's compiled call is built from: assigning one drops the driver's plan;
    # arrays changed in place (``target[...] = p``) need nothing
    target = PlanInput["np.ndarray | None"]()
    smooth_time = PlanInput[float]()
    weight = PlanInput[np.ndarray]()
    smoothed = PlanInput[np.ndarray]()
    velocity = PlanInput[np.ndarray]()

    def __init__(self, proc: Any, target=None, *, joints=None, forward=None, up=None, smooth_time: float = 0.25,
                 limits=None, shares=None, weight=1.0):
        self.proc = proc
        self.last = _LastFrame()
        rig = proc.rig
        chain = find_head_chain(rig) if joints is None else [self._index(rig, j) for j in joints]
        self.joints = chain
        rest = world_matrices(rig.parents, rig.rest)
        r = rest[chain[-1], :3, :3]
        r = r / np.linalg.norm(r, axis=0, keepdims=True)
        fwd = r.T @ np.array([0.0, 0.0, 1.0]) if forward is None else np.asarray(forward, np.float64)
        upv = r.T @ np.array([0.0, 1.0, 0.0]) if up is None else np.asarray(up, np.float64)
        if limits is None:
            limits = AimLimit(math.radians(50), math.radians(35), math.radians(15))
        if shares is None and len(chain) == 2:
            shares = (0.4, 0.6)
        self.table = StageTable(rig.parents, rig.rest, rig.names)
        self.table.add("aim", chain, forward=fwd, up=upv, limits=limits, shares=shares)
        b = proc.count
        self.inputs = self.table.inputs(b)
        self._scratch = self.table.scratch()
        if smooth_time < 0:
            raise SkeletalError(f"smooth_time must not be negative, got {smooth_time}")
        self.smooth_time = float(smooth_time)
        self.weight = np.broadcast_to(np.asarray(weight, np.float64), (b,)).copy()
        self.target = None if target is None else np.broadcast_to(np.asarray(target, np.float64), (b, 3)).copy()
        self.smoothed = np.zeros((b, 3))
        self.velocity = np.zeros((b, 3))
        self._palettes, self._pal, self._pal_idx, _ = proc._palette_groups([chain[0]])
        self._look_arrays: tuple | None = None  # the serial call's job, what it was built from, entry point
        self._look_job: Any = None
        self._look_call: Any = None

    @staticmethod
    def _index(rig, j) -> int:
        if isinstance(j, (int, np.integer)):
            return int(j)
        try:
            return rig.find(j)
        except KeyError:
            raise SkeletalError(f"look-at joint {j!r}: no joint of that name") from None

    def set_target(self, target) -> None:
        self.target = np.broadcast_to(np.asarray(target, np.float64), (self.proc.count, 3)).copy()

    def apply(self, pose: np.ndarray, world: np.ndarray, dt: float) -> None:
        last = self.last  # (what this frame leaves: assigning its fields keeps the plan)
        last.palettes_current = True  # nothing moved yet
        if self.target is None:
            return
        if self.proc.count <= SERIAL_BELOW:  # one compiled call: spring, model-space target, aim chain
            jump = not last.started or self.smooth_time == 0.0
            omega = 2.0 / self.smooth_time if self.smooth_time > 0.0 else 0.0
            # the arrays change rarely: the compiled entry point and its array arguments are kept while
            # they are the same objects (no per-frame type resolution of 23 arguments by the dispatcher)
            arrays = self._look_arrays
            if (arrays is None or arrays[0] is not pose or arrays[1] is not world or arrays[2] is not self.proc.placement
                    or arrays[3] is not self.target or arrays[4] is not self.smoothed
                    or arrays[5] is not self.velocity or arrays[6] is not self.weight):
                t = self.table
                arrays = (pose, world, self.proc.placement, self.target, self.smoothed, self.velocity, self.weight)
                pal, pal_joints, inv_bind = self._pal
                job = look_job(pose=pose, world=world, parents=t.parents, stage_i=t.stage_i, stage_f=t.stage_f,
                               joints=t.joints, jp=t.jp, inputs=self.inputs, update=t.update, scratch=self._scratch[0],
                               placement=self.proc.placement, target=self.target, smoothed=self.smoothed,
                               velocity=self.velocity, weight=self.weight, pal=pal, pal_joints=pal_joints,
                               inv_bind=inv_bind, pal_idx=self._pal_idx)
                self._look_arrays = arrays
                self._look_job = job
                self._look_call = entry(look_kernel, job, 0, 0.0, 0.0, bool(self._palettes))
            if not self._look_call(self._look_job, 1 if jump else 0, float(omega), float(dt), bool(self._palettes)):
                raise SkeletalError("look-at target must be finite")
            last.started = True
            last.palettes_current = self._palettes
            return
        last.palettes_current = False
        if not np.all(np.isfinite(self.target)):
            raise SkeletalError("look-at target must be finite")
        if not last.started or self.smooth_time == 0.0:
            self.smoothed[...] = self.target
            self.velocity[...] = 0.0
            last.started = True
        elif dt > 0:
            critical_spring(self.smoothed, self.velocity, np.ascontiguousarray(self.target), 2.0 / self.smooth_time, dt)
        m = self.proc.placement
        local = np.einsum("bji,bj->bi", m[:, :3, :3], self.smoothed - m[:, :3, 3])  # world -> model
        self.inputs[:, 0, IN_TARGET:IN_TARGET + 3] = local
        self.inputs[:, 0, IN_POLE:IN_POLE + 3] = m[:, 1, :3]  # keep the head's up toward world up
        self.inputs[:, 0, IN_WEIGHT] = self.weight
        self.table.solve(pose, world, self.inputs)
