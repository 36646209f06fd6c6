"""IK stages: the stage kernels every caller runs (batched functions, Mixer, Crowd) and
:class:`StageTable`, the Python side that builds the tables, with the joint limits
(:class:`Hinge`, :class:`Cone`, :class:`AimLimit`).

The kernels take the whole tables (``stage_i`` (S, SI_WIDTH) int, ``stage_f`` (S, SF_WIDTH),
``joints`` (J,) int32, ``jp`` (J, JP_WIDTH), ``inputs`` (B, S, IN_WIDTH), ``update`` the world rows to
rebuild) and solve each stage in order on one pose, rebuilding the world rows it moved; layouts in
:mod:`skeletal.anim.ik_layout`, solvers in :mod:`skeletal.anim.ik_solvers`.

>>> from skeletal.anim.ik_stages import Hinge
>>> Hinge(axis=(1.0, 0.0, 0.0), min=0.0, max=2.5).max
2.5
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numba
import numpy as np
from numba import njit, prange

from ..errors import SkeletalError
from .ik_layout import (IN_POLE, IN_ROTATION, IN_TARGET, IN_WEIGHT, IN_WIDTH, JP_AXIS, JP_CONE, JP_LIMIT, JP_MAX,
                        JP_MIN, JP_PITCH, JP_REF, JP_ROLL, JP_SHARE, JP_WIDTH, JP_YAW, KIND_AIM, KIND_CCD, KIND_FABRIK,
                        KIND_TWO_BONE, KINDS, LIMIT_CONE, LIMIT_HINGE, SCRATCH_WIDTH, SF_FORWARD, SF_MID_AXIS, SF_SOFT,
                        SF_TOL, SF_UP, SF_WIDTH, SI_DEFERS, SI_ITER, SI_J0, SI_J1, SI_KIND, SI_U0, SI_U1, SI_WIDTH)
from .ik_solvers import aim_one, ccd_one, fabrik_one, two_bone_one
from .pose import ancestors_and_self, world_node_into, world_subset_one
from .vec import _finite3, _vec, _vec_at


# ---------------------------------------------------------------------------------------------
# stages: the table every caller (batched functions, Mixer, Crowd) runs


@njit(cache=True)
def solve_stages_at(pose, world, parents, stage_i, stage_f, joints, jp, inputs, b, update, scratch, pos, tid):
    """Run every stage on one pose in order; after each, rebuild the world rows it moved
    (``update[SI_U0:SI_U1]``) so the next stage (and the caller's palettes) see the result.
    ``pose`` (N, 10) and ``world`` (N, 3|4, 4) are instance ``b``'s; ``inputs`` (B, S, IN_WIDTH) all
    instances' rows; ``scratch`` / ``pos`` the per-thread scratch of every thread, ``tid`` this one's.
    Whole arrays and indices rather than views: a view costs an atomic reference count on an array
    every thread shares, and the two-bone stages (the hot case) need none."""
    for s in range(stage_i.shape[0]):
        solve_stage_at(pose, world, parents, stage_i, stage_f, joints, jp, inputs, b, s, update, scratch, pos, tid)


@njit(cache=True)
def solve_stage_at(pose, world, parents, stage_i, stage_f, joints, jp, inputs, b, s, update, scratch, pos, tid):
    """Stage ``s`` of :func:`solve_stages_at` on one pose (the same arguments), then the world rows it
    moved; an idle stage (weight 0 or no finite target) only builds the rows left to it (SI_DEFERS).
    The crowd's wide path runs it for the instances its lane-wide two-bone does not cover."""
    weight = np.float64(inputs[b, s, IN_WEIGHT])
    target = (np.float64(inputs[b, s, IN_TARGET]), np.float64(inputs[b, s, IN_TARGET + 1]),
              np.float64(inputs[b, s, IN_TARGET + 2]))
    if not (weight > 0.0 and _finite3(target)):  # idle: still build the rows the caller left to it
        if stage_i[s, SI_DEFERS]:
            for k in range(stage_i[s, SI_U0], stage_i[s, SI_U1]):
                world_node_into(update[k], parents, pose, world)
        return
    j0, j1 = stage_i[s, SI_J0], stage_i[s, SI_J1]
    kind = stage_i[s, SI_KIND]
    if kind == KIND_TWO_BONE:
        pole = (np.float64(inputs[b, s, IN_POLE]), np.float64(inputs[b, s, IN_POLE + 1]),
                np.float64(inputs[b, s, IN_POLE + 2]))
        end_rotation = (np.float64(inputs[b, s, IN_ROTATION]), np.float64(inputs[b, s, IN_ROTATION + 1]),
                        np.float64(inputs[b, s, IN_ROTATION + 2]), np.float64(inputs[b, s, IN_ROTATION + 3]))
        two_bone_one(pose, world, parents, joints[j0], joints[j0 + 1], joints[j0 + 2], target, pole,
                     min(weight, 1.0), np.float64(stage_f[s, SF_SOFT]), _vec_at(stage_f, s, SF_MID_AXIS),
                     end_rotation)
        for k in range(stage_i[s, SI_U0], stage_i[s, SI_U1]):
            world_node_into(update[k], parents, pose, world)
        return
    si = stage_i[s]
    sf = stage_f[s]
    row = inputs[b, s]
    chain = joints[j0:j1]
    cjp = jp[j0:j1]
    if kind == KIND_AIM:
        aim_one(pose, world, parents, chain, cjp, target, _vec(row, IN_POLE), min(weight, 1.0),
                _vec(sf, SF_FORWARD), _vec(sf, SF_UP), scratch[tid])
    elif kind == KIND_CCD:
        ccd_one(pose, world, parents, chain, cjp, target, min(weight, 1.0), si[SI_ITER], sf[SF_TOL],
                scratch[tid])
    else:
        fabrik_one(pose, world, parents, chain, cjp, target, min(weight, 1.0), si[SI_ITER], sf[SF_TOL],
                   scratch[tid], pos[tid])
    world_subset_one(parents, update[si[SI_U0]:si[SI_U1]], pose, world)


@njit(cache=True)
def solve_stages_one(pose, world, parents, stage_i, stage_f, joints, jp, inputs, update, scratch, pos):
    """:func:`solve_stages_at` for one instance given its own rows: ``inputs`` (S, IN_WIDTH),
    ``scratch`` (max chain, SCRATCH_WIDTH), ``pos`` (max chain, 3)."""
    solve_stages_at(pose, world, parents, stage_i, stage_f, joints, jp, inputs.reshape((1,) + inputs.shape), 0,
                    update, scratch.reshape((1,) + scratch.shape), pos.reshape((1,) + pos.shape), 0)


@njit(cache=True, parallel=True)
def solve_batch(pose, world, parents, stage_i, stage_f, joints, jp, inputs, update, scratch, pos):
    """:func:`solve_stages_one` for every instance in parallel: ``pose`` (B, N, 10), ``world``
    (B, N, 3|4, 4), ``inputs`` (B, S, IN_WIDTH); ``scratch`` (threads, max chain, SCRATCH_WIDTH) and
    ``pos`` (threads, max chain, 3) per-thread scratch."""
    for b in prange(pose.shape[0]):
        tid = numba.get_thread_id()
        solve_stages_one(pose[b], world[b], parents, stage_i, stage_f, joints, jp, inputs[b], update,
                         scratch[tid], pos[tid])


# ---------------------------------------------------------------------------------------------
# Python side: limits, stage tables


@dataclass(frozen=True)
class Hinge:
    """A hinge: the joint turns only about ``axis`` (its local frame), by ``min``..``max`` radians away
    from its reference rotation (the rest pose unless given)."""

    axis: Sequence[float] = (1.0, 0.0, 0.0)
    min: float = -np.pi
    max: float = np.pi
    reference: Sequence[float] | None = None


@dataclass(frozen=True)
class Cone:
    """A ball joint: the bone (direction to the next chain joint) swings at most ``angle`` radians away
    from where the reference rotation puts it, and twists about itself within ``twist`` radians."""

    angle: float = np.pi
    twist: tuple[float, float] = (-np.pi, np.pi)
    reference: Sequence[float] | None = None


@dataclass(frozen=True)
class AimLimit:
    """Largest correction of one aim joint, radians, in the aim frame: yaw (about up), pitch (about
    the side axis), roll (about forward)."""

    yaw: float = np.inf
    pitch: float = np.inf
    roll: float = np.inf


def _unit3(value, what: str) -> np.ndarray:
    v = np.asarray(value, dtype=np.float64).reshape(-1)
    if v.shape != (3,) or not np.all(np.isfinite(v)) or np.linalg.norm(v) < 1e-12:
        raise SkeletalError(f"{what} must be a non-zero 3-vector, got {value!r}")
    return v / np.linalg.norm(v)


class StageTable:
    """A list of IK stages for one rig, packed into the arrays the kernels read.

    ``add(kind, chain, ...)`` appends a stage and returns its index; ``inputs(count)`` makes the
    per-instance input array (targets NaN = stage idle, weight 1). ``world_nodes`` are the nodes whose
    world matrices the stages read (chain joints and their ancestors).
    """

    def __init__(self, parents: np.ndarray, rest: np.ndarray | None = None, names: Sequence[str] | None = None):
        self.parents = np.asarray(parents, dtype=np.int32)
        self.rest = rest
        self.names = list(names) if names is not None else None
        self.kinds: list[int] = []
        self._si: list[np.ndarray] = []
        self._sf: list[np.ndarray] = []
        self._joints: list[int] = []
        self._jp: list[np.ndarray] = []
        self._pack()

    # -- building --------------------------------------------------------------------------

    def joint_index(self, joint) -> int:
        n = len(self.parents)
        if isinstance(joint, (int, np.integer)):
            if not 0 <= int(joint) < n:
                raise SkeletalError(f"IK joint index {joint} is outside the rig (0..{n - 1})")
            return int(joint)
        if self.names is not None:
            if joint in self.names:
                return self.names.index(joint)
            # "LeftFoot" finds "mixamorig:LeftFoot" (prefixed rigs) when it is the only match
            found = [i for i, name in enumerate(self.names) if name.endswith(":" + str(joint))]
            if len(found) == 1:
                return found[0]
        raise SkeletalError(f"IK joint {joint!r} is not a node of the rig")

    def _check_descendants(self, chain: list[int]) -> None:
        for up, down in zip(chain, chain[1:]):
            node = int(self.parents[down])
            while node >= 0 and node != up:
                node = int(self.parents[node])
            if node != up:
                raise SkeletalError(f"IK chain: joint {down} is not below joint {up}")

    def add(self, kind: str, chain: Sequence, *, soft: float = 0.0, mid_axis=None, forward=(0.0, 0.0, 1.0),
            up=(0.0, 1.0, 0.0), limits=None, shares=None, iterations: int = 10, tolerance: float = 1e-5) -> int:
        """Append a stage; see the batched functions for the options. Returns its index."""
        if kind not in KINDS:
            raise SkeletalError(f"IK kind {kind!r} is not one of {sorted(KINDS)}")
        code = KINDS[kind]
        idx = [self.joint_index(j) for j in chain]
        if code == KIND_TWO_BONE and len(idx) != 3:
            raise SkeletalError(f"two-bone IK takes 3 joints (root, mid, end), got {len(idx)}")
        if code in (KIND_CCD, KIND_FABRIK) and len(idx) < 2:
            raise SkeletalError("a CCD / FABRIK chain needs at least 2 joints")
        if code == KIND_AIM and len(idx) < 1:
            raise SkeletalError("an aim chain needs at least 1 joint")
        self._check_descendants(idx)
        if not 0.0 <= soft < 1.0:
            raise SkeletalError(f"soft must be in [0, 1), got {soft}")
        if int(iterations) < 0:
            raise SkeletalError(f"iterations must be >= 0, got {iterations}")
        n = len(idx)
        sf = np.full(SF_WIDTH, np.nan)
        sf[SF_SOFT] = soft
        if mid_axis is not None:
            sf[SF_MID_AXIS:SF_MID_AXIS + 3] = _unit3(mid_axis, "mid_axis")
        sf[SF_FORWARD:SF_FORWARD + 3] = _unit3(forward, "forward")
        sf[SF_UP:SF_UP + 3] = _unit3(up, "up")
        sf[SF_TOL] = float(tolerance)
        jp = np.zeros((n, JP_WIDTH))
        jp[:, JP_MIN] = -np.pi
        jp[:, JP_MAX] = np.pi
        jp[:, JP_CONE] = np.pi
        jp[:, JP_YAW:JP_ROLL + 1] = np.inf
        jp[:, JP_REF + 3] = 1.0
        if self.rest is not None:
            jp[:, JP_REF:JP_REF + 4] = self.rest[idx, 3:7]
        # aim shares: joint k takes share_k / (sum of the shares from k on) of what is left
        share = np.ones(n) if shares is None else np.asarray(shares, dtype=np.float64).reshape(-1)
        if share.shape != (n,) or np.any(share < 0) or share.sum() <= 0:
            raise SkeletalError(f"shares must be {n} non-negative numbers, got {shares!r}")
        remaining = np.cumsum(share[::-1])[::-1]
        jp[:, JP_SHARE] = np.where(remaining > 0, share / np.maximum(remaining, 1e-300), 0.0)
        if limits is not None:
            if isinstance(limits, (Hinge, Cone, AimLimit)):
                limits = [limits] * n
            limits = list(limits)
            if len(limits) != n:
                raise SkeletalError(f"limits: one per chain joint ({n}) or one for all, got {len(limits)}")
            for k, lim in enumerate(limits):
                self._pack_limit(jp[k], lim)
        si = np.zeros(SI_WIDTH, np.int64)
        si[SI_KIND] = code
        si[SI_ITER] = int(iterations)
        self.kinds.append(code)
        self._si.append(si)
        self._sf.append(sf)
        self._jp.append(jp)
        self._joints.extend(idx)
        self._pack()
        return len(self.kinds) - 1

    @staticmethod
    def _pack_limit(row: np.ndarray, lim) -> None:
        if lim is None:
            return
        if isinstance(lim, Hinge):
            row[JP_LIMIT] = LIMIT_HINGE
            row[JP_AXIS:JP_AXIS + 3] = _unit3(lim.axis, "hinge axis")
            row[JP_MIN], row[JP_MAX] = float(lim.min), float(lim.max)
            if lim.min > lim.max:
                raise SkeletalError(f"hinge limit min {lim.min} > max {lim.max}")
        elif isinstance(lim, Cone):
            row[JP_LIMIT] = LIMIT_CONE
            row[JP_CONE] = float(lim.angle)
            row[JP_MIN], row[JP_MAX] = float(lim.twist[0]), float(lim.twist[1])
            if lim.angle < 0 or lim.twist[0] > lim.twist[1]:
                raise SkeletalError(f"cone limit needs angle >= 0 and twist min <= max, got {lim!r}")
        elif isinstance(lim, AimLimit):
            row[JP_YAW], row[JP_PITCH], row[JP_ROLL] = abs(lim.yaw), abs(lim.pitch), abs(lim.roll)
            return
        else:
            raise SkeletalError(f"unknown IK limit {lim!r} (Hinge, Cone or AimLimit)")
        if lim.reference is not None:
            q = np.asarray(lim.reference, dtype=np.float64).reshape(4)
            row[JP_REF:JP_REF + 4] = q / np.linalg.norm(q)

    def _pack(self) -> None:
        """Concatenate the stages and compute, per stage, the world rows it must rebuild."""
        s = len(self.kinds)
        self.stage_i = np.zeros((s, SI_WIDTH), np.int64)
        self.stage_f = np.zeros((s, SF_WIDTH))
        self.joints = np.asarray(self._joints, dtype=np.int64)
        self.jp = np.concatenate(self._jp) if self._jp else np.zeros((0, JP_WIDTH))
        self.world_nodes = ancestors_and_self(self.parents, self.joints) if len(self.joints) else np.zeros(0, np.int64)
        self.max_chain = 1
        updates: list[np.ndarray] = []
        start = 0
        u0 = 0
        for k in range(s):
            si = self._si[k].copy()
            n = len(self._jp[k])
            si[SI_J0], si[SI_J1] = start, start + n
            chain = self.joints[start:start + n]
            start += n
            self.max_chain = max(self.max_chain, n)
            # the chain root's subtree, restricted to the rows someone reads (set by the owner)
            moved = self.descendants(int(chain[0]))
            updates.append(moved)
            si[SI_U0], si[SI_U1] = u0, u0 + len(moved)
            u0 += len(moved)
            self.stage_i[k] = si
            self.stage_f[k] = self._sf[k]
        self.update = np.concatenate(updates).astype(np.int64) if updates else np.zeros(0, np.int64)
        self._moved = updates

    def descendants(self, root: int) -> np.ndarray:
        below = np.zeros(len(self.parents), dtype=bool)
        below[root] = True
        for i in range(root + 1, len(self.parents)):
            p = self.parents[i]
            if p >= 0 and below[p]:
                below[i] = True
        return np.flatnonzero(below).astype(np.int64)

    def restrict_updates(self, needed: np.ndarray) -> None:
        """Rebuild after each stage only the world rows in ``needed`` (ascending node indices), plus
        what later stages read: for a crowd, the skin joints' and the chains' ancestors."""
        keep = np.zeros(len(self.parents), dtype=bool)
        keep[np.asarray(needed, dtype=np.int64)] = True
        keep[self.world_nodes] = True
        u0 = 0
        parts = []
        for k, moved in enumerate(self._moved):
            part = moved[keep[moved]]
            parts.append(part)
            self.stage_i[k, SI_U0], self.stage_i[k, SI_U1] = u0, u0 + len(part)
            u0 += len(part)
        self.update = np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)

    def rows_before_stages(self, needed: np.ndarray) -> np.ndarray:
        """The rows of ``needed`` (ascending) a caller must build before the stages run: rows some
        stage rebuilds after it runs (or when it is idle) and that no stage reads are left to it, so
        they are not built twice (for legs: the toes below the feet). Marks those stages."""
        reads = np.zeros(len(self.parents), dtype=bool)
        reads[self.world_nodes] = True
        left = np.zeros(len(self.parents), dtype=bool)
        for k in range(len(self.kinds)):
            rows = self.update[self.stage_i[k, SI_U0]:self.stage_i[k, SI_U1]]
            mine = rows[~reads[rows]]
            left[mine] = True
            self.stage_i[k, SI_DEFERS] = 1 if len(mine) else 0
        needed = np.asarray(needed, dtype=np.int64)
        return needed[~left[needed]]

    def inputs(self, count: int) -> np.ndarray:
        """(count, stages, IN_WIDTH): every target/pole/rotation NaN (idle), weight 1."""
        a = np.full((count, len(self.kinds), IN_WIDTH), np.nan)
        a[:, :, IN_WEIGHT] = 1.0
        return a

    def scratch(self) -> tuple[np.ndarray, np.ndarray]:
        threads = numba.config.NUMBA_NUM_THREADS
        return (np.zeros((threads, self.max_chain, SCRATCH_WIDTH)), np.zeros((threads, self.max_chain, 3)))

    def solve(self, pose: np.ndarray, world: np.ndarray, inputs: np.ndarray) -> None:
        """Run every stage on every instance, in place (``pose`` (B, N, 10), ``world`` (B, N, 3|4, 4))."""
        scratch, pos = self.scratch()
        solve_batch(pose, world, self.parents, self.stage_i, self.stage_f, self.joints, self.jp, inputs,
                    self.update, scratch, pos)
