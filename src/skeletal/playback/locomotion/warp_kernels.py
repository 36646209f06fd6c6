"""Compiled kernels of stride and orientation warping (:mod:`.warping`), batch first.

Contracts: ``pose`` (B, N, 10) float64 local rows (translation xyz, rotation xyzw, scale xyz), rewritten
in place; ``world`` (B, N, 4, 4) float64 their model-space matrices (row-major, acting on column
vectors), current on entry and on exit; ``parents`` (N,) parent-first. Model space is Y up.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ...anim.ik import knee_pole, two_bone_one
from ...anim.pose import local_to_world_one
from ...anim.vec import _local_rotation, _local_turn, _matrix_rotation, _write_rotation

_NAN3 = (np.nan, np.nan, np.nan)


@njit(cache=True)
def _turn_joint(pose_b, world_b, parents, j, angle):
    """Turn joint j's subtree by ``angle`` radians about model +Y, about j's own origin (its local
    rotation changes; ``world_b`` as it was before any turn of this pass: turns about one axis commute)."""
    h = 0.5 * angle
    q = _local_rotation(pose_b, j)
    turned = _local_turn(world_b, parents[j], (0.0, math.sin(h), 0.0, math.cos(h)), q)
    _write_rotation(pose_b, j, q, turned, 1.0)


@njit(cache=True)
def _lower(pose_b, world_b, parents, j, drop):
    """Move joint j (and its subtree) by ``drop`` along model +Y: its local translation changes by the
    parent's 3x3 (scale included) inverse applied to (0, drop, 0), by Cramer's rule."""
    p = parents[j]
    vx, vy, vz = 0.0, drop, 0.0
    if p >= 0:
        a00, a01, a02 = world_b[p, 0, 0], world_b[p, 0, 1], world_b[p, 0, 2]
        a10, a11, a12 = world_b[p, 1, 0], world_b[p, 1, 1], world_b[p, 1, 2]
        a20, a21, a22 = world_b[p, 2, 0], world_b[p, 2, 1], world_b[p, 2, 2]
        det = a00 * (a11 * a22 - a12 * a21) - a01 * (a10 * a22 - a12 * a20) + a02 * (a10 * a21 - a11 * a20)
        if abs(det) < 1e-300:
            return
        vx = (-a01 * (drop * a22) + a02 * (drop * a21)) / det
        vy = (a00 * (drop * a22) - a02 * (drop * a20)) / det
        vz = (a00 * (-drop * a21) - a01 * (-drop * a20)) / det
    pose_b[j, 0] += vx
    pose_b[j, 1] += vy
    pose_b[j, 2] += vz


@njit(cache=True)
def _warp_one(pose_b, world_b, parents, pelvis, spine, legs, leg_len, stride, angle, ax, az, reach, soft, targets_b):
    """One instance (see :func:`warp_kernel`); ``targets_b`` (L, 3) receives the feet's targets."""
    if angle != 0.0:
        _turn_joint(pose_b, world_b, parents, pelvis, angle)
        n = spine.shape[0]
        for k in range(n):  # the upper body turned back, a share per spine joint
            _turn_joint(pose_b, world_b, parents, spine[k], -angle / n)
        local_to_world_one(parents, pose_b, world_b)
        c, s = math.cos(angle), math.sin(angle)
        ax, az = ax * c + az * s, -ax * s + az * c
    n_legs = legs.shape[1]
    px, pz = world_b[pelvis, 0, 3], world_b[pelvis, 2, 3]
    for l in range(n_legs):
        f = legs[2, l]
        fx, fy, fz = world_b[f, 0, 3], world_b[f, 1, 3], world_b[f, 2, 3]
        along = (fx - px) * ax + (fz - pz) * az  # the foot's offset from the pelvis along the motion
        targets_b[l, 0] = fx + (stride - 1.0) * along * ax
        targets_b[l, 1] = fy
        targets_b[l, 2] = fz + (stride - 1.0) * along * az
    if stride == 1.0:
        return
    # the pelvis lowered as far as the legs need to reach their targets
    drop = 0.0
    for l in range(n_legs):
        h, f = legs[0, l], legs[2, l]
        hx, hy, hz = world_b[h, 0, 3], world_b[h, 1, 3], world_b[h, 2, 3]
        anim = math.sqrt((world_b[f, 0, 3] - hx) ** 2 + (world_b[f, 1, 3] - hy) ** 2 + (world_b[f, 2, 3] - hz) ** 2)
        r = max(anim, reach * leg_len[l])
        dxz2 = (targets_b[l, 0] - hx) ** 2 + (targets_b[l, 2] - hz) ** 2
        drop = min(drop, targets_b[l, 1] - hy + math.sqrt(max(r * r - dxz2, 0.0)))
    if drop < 0.0:
        _lower(pose_b, world_b, parents, pelvis, drop)
        local_to_world_one(parents, pose_b, world_b)
    for l in range(n_legs):
        thigh, knee, foot = legs[0, l], legs[1, l], legs[2, l]
        # the knee bends the way it bends now (a straight leg: toward the model's front, +Z)
        pole = knee_pole(world_b, thigh, knee, foot, leg_len[l])
        keep = _matrix_rotation(world_b, foot)  # the foot keeps its model-space rotation
        two_bone_one(pose_b, world_b, parents, thigh, knee, foot,
                     (targets_b[l, 0], targets_b[l, 1], targets_b[l, 2]), pole, 1.0, soft, _NAN3, keep)
        local_to_world_one(parents, pose_b, world_b)


@njit(cache=True, parallel=True)
def warp_kernel(pose, world, parents, pelvis, spine, legs, leg_len, stride, angle, axis, reach, soft, weight, targets):
    """Orientation then stride warping of every instance, in parallel over instances.

    ``pelvis``: the joint the lower body turns about (the legs' common parent); ``spine`` (S,): the
    joints between it and the neck that turn the upper body back, a 1/S share each; ``legs`` (3, L):
    thigh, knee, foot rig indices; ``leg_len`` (L,) rest lengths; per instance ``stride`` (B,): the
    scale of each foot's offset from the pelvis along the motion, ``angle`` (B,) radians about +Y that
    the lower body (and the motion) turns, ``axis`` (B, 2) the clip's motion direction (model x, z,
    unit) before the turn, ``weight`` (B,) 0 leaves an instance as it is; ``reach``: the fraction of a
    leg's length it may stretch to before the pelvis lowers; ``soft``: the two-bone soft limit.
    ``targets`` (B, L, 3): the feet's model-space targets, written."""
    for b in prange(pose.shape[0]):
        if weight[b] > 0.0:
            _warp_one(pose[b], world[b], parents, pelvis, spine, legs, leg_len, stride[b], angle[b], axis[b, 0],
                      axis[b, 1], reach, soft, targets[b])


@njit(cache=True)
def warp_serial(pose, world, parents, pelvis, spine, legs, leg_len, stride, angle, axis, reach, soft, weight, targets):
    """:func:`warp_kernel` on one thread (a few characters: no thread pool)."""
    for b in range(pose.shape[0]):
        if weight[b] > 0.0:
            _warp_one(pose[b], world[b], parents, pelvis, spine, legs, leg_len, stride[b], angle[b], axis[b, 0],
                      axis[b, 1], reach, soft, targets[b])


@njit(cache=True, parallel=True)
def warp_posed_kernel(pose, world, parents, pelvis, spine, legs, leg_len, stride, angle, axis, reach, soft, weight,
                      targets):
    """:func:`warp_kernel` for poses that come without world matrices (a :class:`~skeletal.Crowd`'s):
    each active instance's ``world`` rows are built from its ``pose`` first (``world`` is scratch on
    entry), in parallel over instances."""
    for b in prange(pose.shape[0]):
        if weight[b] > 0.0:
            local_to_world_one(parents, pose[b], world[b])
            _warp_one(pose[b], world[b], parents, pelvis, spine, legs, leg_len, stride[b], angle[b], axis[b, 0],
                      axis[b, 1], reach, soft, targets[b])


@njit(cache=True)
def warp_posed_serial(pose, world, parents, pelvis, spine, legs, leg_len, stride, angle, axis, reach, soft, weight,
                      targets):
    """:func:`warp_posed_kernel` on one thread."""
    for b in range(pose.shape[0]):
        if weight[b] > 0.0:
            local_to_world_one(parents, pose[b], world[b])
            _warp_one(pose[b], world[b], parents, pelvis, spine, legs, leg_len, stride[b], angle[b], axis[b, 0],
                      axis[b, 1], reach, soft, targets[b])
