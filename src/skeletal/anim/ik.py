# Over 600 lines: the solvers (two-bone, aim, CCD, FABRIK, limits) share tuple helpers that numba inlines into
# each solver; one module keeps that inlining (and the compile time) in one place.
"""Inverse kinematics: two-bone, aim (look-at), CCD and FABRIK, as numba kernels over batched poses.

Every solver reads the model-space pose (world matrices of the chain, as :mod:`skeletal.pose` builds
them) and writes corrected **local rotations** into the local pose rows, so its result composes with
whatever produced the pose (layers, masks, additive clips) and the world matrices / palettes built
afterwards see it. Translations and scales are never changed.

Shapes (B = instances, N = rig nodes; batch axis first, row-major, quaternions xyzw):

* ``pose`` (B, N, 10) local rows ``t q s`` (float32 or float64), corrected in place
* ``world`` (B, N, 4, 4) or (B, N, 3, 4): model-space matrices, valid at least for the chain joints
  and their ancestors; the solvers rebuild the rows of the nodes they move (see ``update``)
* targets, poles, up vectors: (B, 3) model-space points / directions; ``NaN`` means "none"
* weights: (B,) in [0, 1]; weight 0 leaves the pose bit-identical (the solver returns at once)

One instance's work is a *stage*: an int row (``SI_*``), a float row (``SF_*``), its chain joints
(a slice of ``joints`` with per-joint parameters ``JP_*``) and a per-instance input row (``IN_*``).
The batched functions below build one stage and call :func:`solve_batch`; the playback classes
(:meth:`skeletal.Mixer.add_ik`) keep a table of stages and run them inside their update kernels.

>>> import numpy as np
>>> from skeletal.rig import Rig
>>> rest = np.zeros((3, 10)); rest[:, 6] = 1; rest[:, 7:] = 1; rest[1:, 1] = 1.0   # a 2-bone leg
>>> rig = Rig.from_parents(["hip", "knee", "foot"], [-1, 0, 1], rest)
>>> pose = two_bone(rig.parents, rest[None], (0, 1, 2), target=[[0.0, 1.2, 0.8]], pole=[[0, 1, 1]])
>>> np.round(world_positions(rig.parents, pose)[0, 2], 6) + 0.0
array([0. , 1.2, 0.8])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numba
import numpy as np
from numba import njit, prange

from ..errors import SkeletalError
from .pose import ancestors_and_self, world_matrices, world_node_into, world_subset_one
from ..quat import qmul, qnormalize, qrotate, quat_from_rotation

# ---------------------------------------------------------------------------------------------
# table layouts

KIND_TWO_BONE, KIND_AIM, KIND_CCD, KIND_FABRIK = 0, 1, 2, 3
KINDS = {"two_bone": KIND_TWO_BONE, "aim": KIND_AIM, "look_at": KIND_AIM, "ccd": KIND_CCD, "fabrik": KIND_FABRIK}

# stage int row
SI_KIND = 0
SI_J0 = 1  # chain joints: joints[J0:J1], root first (two-bone: root, mid, end; aim: first..last aiming)
SI_J1 = 2
SI_ITER = 3  # CCD / FABRIK iterations
SI_U0 = 4  # world rows to rebuild after the stage: update[U0:U1] (ascending rig indices)
SI_U1 = 5
SI_DEFERS = 6  # 1: some of the stage's update rows are left to it by the caller (see rows_before_stages)
SI_WIDTH = 7

# stage float row
SF_SOFT = 0  # two-bone: soft-limit band as a fraction of the chain length (0 = hard)
SF_MID_AXIS = 1  # two-bone: hinge axis of the mid joint in its local frame (NaN: from the pose)
SF_FORWARD = 4  # aim: forward axis in the last joint's local frame
SF_UP = 7  # aim: up axis in the last joint's local frame
SF_TOL = 10  # CCD / FABRIK: stop when the end effector is this close to the target
SF_WIDTH = 11

# per chain joint float row
JP_LIMIT = 0  # LIMIT_* below
JP_AXIS = 1  # hinge axis (joint's local frame)
JP_MIN = 4  # hinge: angle range; cone: twist range (radians)
JP_MAX = 5
JP_CONE = 6  # cone: largest swing of the bone away from its reference direction (radians)
JP_REF = 7  # reference local rotation the limits are measured from (xyzw; the rest pose by default)
JP_SHARE = 11  # aim chains: fraction of the remaining turn this joint takes (the last one takes 1)
JP_YAW = 12  # aim: largest |yaw|, |pitch|, |roll| of this joint's correction (radians; inf = free)
JP_PITCH = 13
JP_ROLL = 14
JP_WIDTH = 15

LIMIT_NONE, LIMIT_HINGE, LIMIT_CONE = 0, 1, 2

# per instance and stage input row
IN_TARGET = 0  # target point (3)
IN_POLE = 3  # two-bone: pole point; aim: world up direction; NaN = none
IN_WEIGHT = 6
IN_ROTATION = 7  # two-bone: model-space rotation for the end joint (xyzw), NaN = none
IN_WIDTH = 11

EPS = 1e-9
SCRATCH_WIDTH = 26  # per chain joint, see _chain_setup

# ---------------------------------------------------------------------------------------------
# scalar quaternion / vector helpers (tuples in, tuples out)


# The quaternion maths is skeletal.quat's (qmul, qrotate, qnormalize, quat_from_rotation); these
# adapters only unpack the tuples the solvers pass around.


@njit(cache=True, forceinline=True)
def _qmul(a, b):
    return qmul(a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3])


@njit(cache=True, forceinline=True)
def _qconj(q):
    return (-q[0], -q[1], -q[2], q[3])


@njit(cache=True, forceinline=True)
def _qnorm(q):
    return qnormalize(q[0], q[1], q[2], q[3])


@njit(cache=True, forceinline=True)
def _qrot(q, v):
    """Rotate vector v by unit quaternion q."""
    return qrotate(q[0], q[1], q[2], q[3], v[0], v[1], v[2])


@njit(cache=True, forceinline=True)
def _dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


@njit(cache=True, forceinline=True)
def _cross(a, b):
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


@njit(cache=True, forceinline=True)
def _sub(a, b):
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2])


@njit(cache=True, forceinline=True)
def _add(a, b):
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


@njit(cache=True, forceinline=True)
def _scale(a, s):
    return (a[0] * s, a[1] * s, a[2] * s)


@njit(cache=True, forceinline=True)
def _len(a):
    return np.sqrt(a[0] * a[0] + a[1] * a[1] + a[2] * a[2])


@njit(cache=True, forceinline=True)
def _axis_angle(axis, angle):
    """Rotation by ``angle`` about the unit ``axis``."""
    s = np.sin(0.5 * angle)
    return (axis[0] * s, axis[1] * s, axis[2] * s, np.cos(0.5 * angle))


@njit(cache=True)
def _half_turn(axis, cos_angle, sin_angle):
    """Rotation about the unit ``axis`` by the angle in (-pi, pi] whose cosine and sine are given
    (w >= 0, as ``_axis_angle`` of that angle): (axis sin(a/2), cos(a/2)) from the half-angle
    identities, without calling atan2/sin/cos."""
    c = min(max(cos_angle, -1.0), 1.0)
    w = np.sqrt(0.5 * (1.0 + c))  # cos(a/2) >= 0
    if w > 1e-4:
        s = 0.5 * sin_angle / w  # sin(a) = 2 sin(a/2) cos(a/2): accurate for small angles
    else:  # near a half turn
        s = np.sqrt(max(0.5 * (1.0 - c), 0.0))
        if sin_angle < 0.0:
            s = -s
    return (axis[0] * s, axis[1] * s, axis[2] * s, w)  # unit: w^2 + s^2 = 1 when cos^2 + sin^2 = 1


@njit(cache=True)
def _any_perpendicular(u):
    ax, ay, az = abs(u[0]), abs(u[1]), abs(u[2])
    if ax <= ay and ax <= az:
        p = _cross(u, (1.0, 0.0, 0.0))
    elif ay <= az:
        p = _cross(u, (0.0, 1.0, 0.0))
    else:
        p = _cross(u, (0.0, 0.0, 1.0))
    n = _len(p)
    if n < 1e-300:
        return (1.0, 0.0, 0.0)
    return _scale(p, 1.0 / n)


@njit(cache=True)
def _arc(u, v):
    """The smallest rotation taking direction u to direction v (identity when either is ~zero; a
    half turn about a perpendicular axis when they are opposite): :func:`_arc_to_unit` to v / |v|."""
    lv = _len(v)
    if lv < EPS:
        return (0.0, 0.0, 0.0, 1.0)
    return _arc_to_unit(u, _scale(v, 1.0 / lv))


@njit(cache=True)
def _slerp(a, b, u):
    """Shortest-path slerp from a to b by u (exact at u = 0 and u = 1)."""
    if u >= 1.0:
        return b
    if u <= 0.0:
        return a
    c = a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3]
    if c < 0.0:
        b = (-b[0], -b[1], -b[2], -b[3])
        c = -c
    if c > 0.9995:
        return _qnorm((a[0] + (b[0] - a[0]) * u, a[1] + (b[1] - a[1]) * u,
                       a[2] + (b[2] - a[2]) * u, a[3] + (b[3] - a[3]) * u))
    ang = np.arccos(min(c, 1.0))
    s = np.sin(ang)
    s0 = np.sin((1.0 - u) * ang) / s
    s1 = np.sin(u * ang) / s
    return (a[0] * s0 + b[0] * s1, a[1] * s0 + b[1] * s1, a[2] * s0 + b[2] * s1, a[3] * s0 + b[3] * s1)


@njit(cache=True)
def _scale_rotation(q, u):
    """slerp(identity, q, u): the same axis, u times the angle (shortest way)."""
    if q[3] < 0.0:
        q = (-q[0], -q[1], -q[2], -q[3])
    s = np.sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2])
    if s < 1e-15:
        return (0.0, 0.0, 0.0, 1.0)
    half = np.arctan2(s, q[3]) * u
    k = np.sin(half) / s
    return (q[0] * k, q[1] * k, q[2] * k, np.cos(half))


@njit(cache=True)
def _matrix_rotation(world, i):
    """The rotation of ``world[i]``'s top-left 3x3 block (columns normalised: exact for any positive
    scale that is uniform or axis-aligned with the rotation). Indexes the array directly: no view (a
    view of an array shared by threads costs an atomic reference count)."""
    c0 = (np.float64(world[i, 0, 0]), np.float64(world[i, 1, 0]), np.float64(world[i, 2, 0]))
    c1 = (np.float64(world[i, 0, 1]), np.float64(world[i, 1, 1]), np.float64(world[i, 2, 1]))
    c2 = (np.float64(world[i, 0, 2]), np.float64(world[i, 1, 2]), np.float64(world[i, 2, 2]))
    l0, l1, l2 = _len(c0), _len(c1), _len(c2)
    if l0 < 1e-300 or l1 < 1e-300 or l2 < 1e-300:
        return (0.0, 0.0, 0.0, 1.0)
    return quat_from_rotation(c0[0] / l0, c1[0] / l1, c2[0] / l2,
                              c0[1] / l0, c1[1] / l1, c2[1] / l2,
                              c0[2] / l0, c1[2] / l1, c2[2] / l2)


@njit(cache=True, forceinline=True)
def _position(world, i):
    return (np.float64(world[i, 0, 3]), np.float64(world[i, 1, 3]), np.float64(world[i, 2, 3]))


@njit(cache=True, forceinline=True)
def _local_rotation(pose, i):
    return (np.float64(pose[i, 3]), np.float64(pose[i, 4]), np.float64(pose[i, 5]), np.float64(pose[i, 6]))


@njit(cache=True)
def _parent_rotation(world, parents, i):
    p = parents[i]
    if p < 0:
        return (0.0, 0.0, 0.0, 1.0)
    return _matrix_rotation(world, p)


@njit(cache=True, forceinline=True)
def _vec(row, o):
    return (np.float64(row[o]), np.float64(row[o + 1]), np.float64(row[o + 2]))


@njit(cache=True, forceinline=True)
def _quat(row, o):
    return (np.float64(row[o]), np.float64(row[o + 1]), np.float64(row[o + 2]), np.float64(row[o + 3]))


@njit(cache=True, forceinline=True)
def _vec_at(a, s, o):
    return (np.float64(a[s, o]), np.float64(a[s, o + 1]), np.float64(a[s, o + 2]))


@njit(cache=True, forceinline=True)
def _quat_at(a, s, o):
    return (np.float64(a[s, o]), np.float64(a[s, o + 1]), np.float64(a[s, o + 2]), np.float64(a[s, o + 3]))


@njit(cache=True, forceinline=True)
def _finite3(v):
    return np.isfinite(v[0]) and np.isfinite(v[1]) and np.isfinite(v[2])


@njit(cache=True)
def _write_rotation(pose, i, q_old, q_new, weight):
    """pose[i] rotation <- slerp(q_old, q_new, weight), normalised."""
    q = _qnorm(_slerp(q_old, q_new, weight)) if weight < 1.0 else _qnorm(q_new)
    if not (np.isfinite(q[0]) and np.isfinite(q[1]) and np.isfinite(q[2]) and np.isfinite(q[3])):
        return
    pose[i, 3] = q[0]
    pose[i, 4] = q[1]
    pose[i, 5] = q[2]
    pose[i, 6] = q[3]


# ---------------------------------------------------------------------------------------------
# two-bone


@njit(cache=True)
def soft_distance(d, length, soft):
    """Distance the end effector is placed at for a target ``d`` away, with a chain of ``length``:
    ``d`` up to ``length * (1 - soft)``, then an exponential approach that reaches ``length`` only at
    infinity (continuous with its first derivative: no snap when the leg straightens)."""
    if soft <= 0.0:
        return min(d, length)
    band = soft * length
    start = length - band
    if d <= start:
        return d
    return start + band * (1.0 - np.exp(-(d - start) / band))


@njit(cache=True)
def _column(world, j, k):
    return (np.float64(world[j, 0, k]), np.float64(world[j, 1, k]), np.float64(world[j, 2, k]))


@njit(cache=True)
def _inv_len(v):
    n = _len(v)
    return 1.0 / n if n > 1e-300 else 0.0


@njit(cache=True)
def _into_frame(world, j, v):
    """``R_j^T v``: model-space vector v in the frame of node j, R_j = world[j]'s rotation (its
    columns normalised: exact for positive scale that is uniform or aligned with the rotation); v
    itself for j < 0. A model-space turn (v, w) of the subtree below j is the local turn
    (R_j^T v, w) there, ``conj(q_j) (v, w) q_j``, without converting world[j] to a quaternion."""
    if j < 0:
        return v
    c0, c1, c2 = _column(world, j, 0), _column(world, j, 1), _column(world, j, 2)
    return (_dot(c0, v) * _inv_len(c0), _dot(c1, v) * _inv_len(c1), _dot(c2, v) * _inv_len(c2))


@njit(cache=True)
def _out_of_frame(world, j, v):
    """``R_j v``: a vector given in node j's frame, in model space (see :func:`_into_frame`)."""
    c0, c1, c2 = _column(world, j, 0), _column(world, j, 1), _column(world, j, 2)
    return _add(_add(_scale(c0, v[0] * _inv_len(c0)), _scale(c1, v[1] * _inv_len(c1))),
                _scale(c2, v[2] * _inv_len(c2)))


@njit(cache=True)
def _arc_to_unit(u, d):
    """:func:`_arc` from direction u to the unit vector d: (u x d, |u| + u.d), normalised by
    sqrt(2 |u| (|u| + u.d)) (one square root fewer than normalising both)."""
    lu = _len(u)
    if lu < EPS:
        return (0.0, 0.0, 0.0, 1.0)
    w = lu + _dot(u, d)
    if w < 1e-12 * lu:
        p = _any_perpendicular(_scale(u, 1.0 / lu))
        return (p[0], p[1], p[2], 0.0)
    x = _cross(u, d)
    k = 1.0 / np.sqrt(2.0 * lu * w)
    return (x[0] * k, x[1] * k, x[2] * k, w * k)


@njit(cache=True)
def _local_turn(world, j, turn, q_local):
    """New local rotation of a node whose parent is j after the model-space ``turn`` of its subtree:
    conj(q_j) turn q_j q_local (see :func:`_into_frame`)."""
    axis = _into_frame(world, j, (turn[0], turn[1], turn[2]))
    return _qmul((axis[0], axis[1], axis[2], turn[3]), q_local)


@njit(cache=True)
def two_bone_one(pose, world, parents, a, b, c, target, pole, weight, soft, mid_axis, end_rotation):
    """Two-bone IK for one pose: rotate joints ``a`` (root) and ``b`` (mid) so that ``c`` (end; any
    descendant of ``b``, ``b`` any descendant of ``a``) reaches ``target``.

    Law of cosines at the mid joint (bend about ``mid_axis`` given in b's local frame, or about the
    normal of the current bend plane), then the shortest turn of the root that puts the end on the
    root-target line, then a turn about that line so that the mid joint lies on the side of ``pole``
    (when finite). ``soft``: see :func:`soft_distance`. Unreachable targets leave the chain straight
    toward them; a target at the root keeps the current direction; zero-length bones fall back to
    aiming the other bone. ``end_rotation``: model-space rotation for c (finite) or NaN.
    ``weight`` in [0, 1] slerps the local rotations from the input; <= 0 returns at once.
    Tuples: target, pole (3,), mid_axis (3,), end_rotation (4,).

    Every turn is built from the cosine and sine of its angle (no trigonometric calls), and model-space
    turns become local ones through the parents' world matrices (:func:`_local_turn`): this runs per
    leg per character per frame inside the crowd update.
    """
    if not weight > 0.0:
        return
    pa = _position(world, a)
    pb = _position(world, b)
    pc = _position(world, c)
    u = _sub(pb, pa)
    v = _sub(pc, pb)
    l1 = _len(u)
    l2 = _len(v)
    t = target
    d = _sub(t, pa)
    dist = _len(d)
    rh = (0.0, 0.0, 0.0, 1.0)  # bend at b (model space, applied first)
    q = (0.0, 0.0, 0.0, 1.0)  # turn of the root (model space, applied last)
    if l1 < EPS and l2 < EPS:
        pass
    elif l1 < EPS:
        rh = _arc(v, _sub(t, pb))
    elif l2 < EPS:
        q = _arc(u, d)
    else:
        # direction to the target (a target at the root keeps the current end direction)
        if dist > EPS:
            direction = _scale(d, 1.0 / dist)
        else:
            e = _sub(pc, pa)
            le = _len(e)
            direction = _scale(e, 1.0 / le) if le > EPS else _scale(u, 1.0 / l1)
        reach = soft_distance(dist, l1 + l2, soft)
        reach = max(reach, abs(l1 - l2))
        # bend axis at b
        has_pole = _finite3(pole)
        if _finite3(mid_axis):
            h = _out_of_frame(world, b, mid_axis)
        else:
            h = _cross(u, v)
            if _len(h) < 1e-7 * l1 * l2:
                if has_pole:
                    h = _cross(u, _sub(pole, pa))
                if _len(h) < 1e-7 * l1 * max(_len(_sub(pole, pa)), 1.0) or not has_pole:
                    h = _any_perpendicular(_scale(u, 1.0 / l1))
        lh = _len(h)
        if lh > EPS:
            h = _scale(h, 1.0 / lh)
            # |u + R(h, phi) v| = reach:  A cos(phi) + B sin(phi) = K - C  (Rodrigues)
            uh = _dot(u, h)
            vh = _dot(v, h)
            ca = _dot(u, v) - uh * vh
            cb = _dot(u, _cross(h, v))
            cc = uh * vh
            k = 0.5 * (reach * reach - l1 * l1 - l2 * l2)
            r = np.sqrt(ca * ca + cb * cb)
            if r > EPS * l1 * l2:
                # phi = atan2(cb, ca) + acos(x), as its cosine and sine
                inv_r = 1.0 / r
                x = min(max((k - cc) * inv_r, -1.0), 1.0)
                y = np.sqrt(1.0 - x * x)
                rh = _half_turn(h, (ca * x - cb * y) * inv_r, (cb * x + ca * y) * inv_r)
        e2 = _add(u, _qrot(rh, v))
        q = _arc_to_unit(e2, direction)
        if has_pole:
            # the turn about ``direction`` taking the mid joint's side m onto the pole's side p
            m = _qrot(q, u)
            m = _sub(m, _scale(direction, _dot(direction, m)))
            p = _sub(pole, pa)
            p = _sub(p, _scale(direction, _dot(direction, p)))
            if _dot(m, m) > 1e-14 * l1 * l1 and _dot(p, p) > EPS * EPS:
                cos_r = _dot(m, p)  # |m||p| cos, |m||p| sin of the turn (m, p are normal to direction)
                sin_r = _dot(direction, _cross(m, p))
                rr = np.sqrt(cos_r * cos_r + sin_r * sin_r)
                w = rr + cos_r
                if w > 1e-12 * rr:  # (direction sin, 1 + cos) normalised: norm^2 = 2 rr (rr + cos)
                    kk = 1.0 / np.sqrt(2.0 * rr * w)
                    q = _qmul((direction[0] * sin_r * kk, direction[1] * sin_r * kk, direction[2] * sin_r * kk,
                               w * kk), q)
                else:  # a half turn
                    q = _qmul((direction[0], direction[1], direction[2], 0.0), q)
    qla = _local_rotation(pose, a)
    qlb = _local_rotation(pose, b)
    rc = end_rotation
    if np.isfinite(rc[0]) and np.isfinite(rc[1]) and np.isfinite(rc[2]) and np.isfinite(rc[3]):
        qlc = _local_rotation(pose, c)
        qpc = _matrix_rotation(world, parents[c])
        qpc_new = _qmul(q, _qmul(rh, qpc))
        _write_rotation(pose, c, qlc, _qmul(_qconj(qpc_new), _qnorm(rc)), weight)
    _write_rotation(pose, a, qla, _local_turn(world, parents[a], q, qla), weight)
    _write_rotation(pose, b, qlb, _local_turn(world, parents[b], rh, qlb), weight)


# ---------------------------------------------------------------------------------------------
# aim


@njit(cache=True)
def _clamp_euler(d, s, up, f, max_yaw, max_pitch, max_roll):
    """Clamp rotation d (model space) to |yaw| <= max_yaw about ``up``, |pitch| about ``s`` and
    |roll| about ``f`` (an orthonormal right-handed basis s = up x f), Euler order yaw-pitch-roll."""
    if not (max_yaw < np.pi or max_pitch < np.pi or max_roll < np.pi):
        return d
    # the quaternion in basis coordinates (x = s, y = up, z = f)
    v = (d[0], d[1], d[2])
    x, y, z, w = _dot(v, s), _dot(v, up), _dot(v, f), d[3]
    # rotation matrix entries used by the YXZ decomposition
    m02 = 2.0 * (x * z + w * y)
    m22 = 1.0 - 2.0 * (x * x + y * y)
    m12 = 2.0 * (y * z - w * x)
    m10 = 2.0 * (x * y + w * z)
    m11 = 1.0 - 2.0 * (x * x + z * z)
    pitch = np.arcsin(min(max(-m12, -1.0), 1.0))
    yaw = np.arctan2(m02, m22)
    roll = np.arctan2(m10, m11)
    if abs(yaw) <= max_yaw and abs(pitch) <= max_pitch and abs(roll) <= max_roll:
        return d
    yaw = min(max(yaw, -max_yaw), max_yaw)
    pitch = min(max(pitch, -max_pitch), max_pitch)
    roll = min(max(roll, -max_roll), max_roll)
    qb = _qmul(_qmul(_axis_angle((0.0, 1.0, 0.0), yaw), _axis_angle((1.0, 0.0, 0.0), pitch)),
               _axis_angle((0.0, 0.0, 1.0), roll))
    vx = _add(_add(_scale(s, qb[0]), _scale(up, qb[1])), _scale(f, qb[2]))
    return (vx[0], vx[1], vx[2], qb[3])


@njit(cache=True)
def aim_one(pose, world, parents, joints, jp, target, up_vector, weight, forward, up, scratch):
    """Aim for one pose: the chain ``joints`` (root first; each a descendant of the previous) turns so
    that the last joint's ``forward`` axis (its local frame) points at ``target``, its ``up`` axis
    toward the model-space ``up_vector`` (when finite). Each joint k takes ``jp[k, JP_SHARE]`` of the
    turn still left (the last takes it all), clamped to ``jp[k, JP_YAW/PITCH/ROLL]`` measured in the
    aim frame (up, side, forward of the last joint at that moment). ``scratch`` (>= len(joints), 4)."""
    n = joints.shape[0]
    if not weight > 0.0 or n == 0:
        return
    last = joints[n - 1]
    ph0 = _position(world, last)
    wh0 = _matrix_rotation(world, last)
    # running rigid map of everything below the joints corrected so far: x -> g x + tg
    g = (0.0, 0.0, 0.0, 1.0)
    tg = (0.0, 0.0, 0.0)
    has_up = _finite3(up_vector)
    for k in range(n):
        j = joints[k]
        pk = _add(_qrot(g, _position(world, j)), tg)
        wp = _parent_rotation(world, parents, j)
        if k > 0:
            wp = _qmul(g, wp)
        ql = _local_rotation(pose, j)
        wk = _qmul(wp, ql)
        ph = _add(_qrot(g, ph0), tg)
        wh = _qmul(g, wh0)
        fw = _qrot(wh, forward)
        full = _arc(fw, _sub(target, ph))
        if has_up:
            f2 = _qrot(full, fw)
            lf = _len(f2)
            if lf > EPS:
                f2 = _scale(f2, 1.0 / lf)
                u2 = _qrot(full, _qrot(wh, up))
                u2 = _sub(u2, _scale(f2, _dot(f2, u2)))
                uv = _sub(up_vector, _scale(f2, _dot(f2, up_vector)))
                if _len(u2) > EPS and _len(uv) > EPS:
                    roll = np.arctan2(_dot(f2, _cross(u2, uv)), _dot(u2, uv))
                    full = _qmul(_axis_angle(f2, roll), full)
        share = jp[k, JP_SHARE] if k < n - 1 else 1.0
        dq = _scale_rotation(full, share)
        # limits, in the aim frame of the moment
        fu = _qrot(wh, forward)
        uu = _qrot(wh, up)
        lf = _len(fu)
        if lf > EPS:
            fu = _scale(fu, 1.0 / lf)
            uu = _sub(uu, _scale(fu, _dot(fu, uu)))
            lu = _len(uu)
            if lu > EPS:
                uu = _scale(uu, 1.0 / lu)
                ss = _cross(uu, fu)
                dq = _clamp_euler(dq, ss, uu, fu, jp[k, JP_YAW], jp[k, JP_PITCH], jp[k, JP_ROLL])
        new_local = _qmul(_qconj(wp), _qmul(dq, wk))
        scratch[k, 0] = new_local[0]
        scratch[k, 1] = new_local[1]
        scratch[k, 2] = new_local[2]
        scratch[k, 3] = new_local[3]
        # everything below j turns by dq about pk
        g = _qmul(dq, g)
        tg = _add(_sub(_qrot(dq, tg), _qrot(dq, pk)), pk)
    for k in range(n):
        j = joints[k]
        _write_rotation(pose, j, _local_rotation(pose, j), _quat(scratch[k], 0), weight)


# ---------------------------------------------------------------------------------------------
# chains: limits, CCD, FABRIK


@njit(cache=True, forceinline=True)
def _put3(a, k, o, v):
    a[k, o] = v[0]
    a[k, o + 1] = v[1]
    a[k, o + 2] = v[2]


@njit(cache=True, forceinline=True)
def _put4(a, k, o, q):
    a[k, o] = q[0]
    a[k, o + 1] = q[1]
    a[k, o + 2] = q[2]
    a[k, o + 3] = q[3]

# scratch columns per chain joint
C_P = 0  # current position (3)
C_W = 3  # current world rotation (4)
C_WP = 7  # current world rotation of the parent (4)
C_L = 11  # current local rotation (4)
C_O = 15  # original offset to the next chain joint, model space (3)
C_LEN = 18  # its length
C_A = 19  # that offset in the joint's own frame (the bone axis cone limits use; constant)
C_W0 = 22  # the joint's world rotation in the input pose (constant)


@njit(cache=True)
def _apply_limit(jp, k, ql, bone_axis):
    """Clamp local rotation ql to the joint's limit (hinge or cone), measured from its reference."""
    kind = jp[k, JP_LIMIT]
    if kind == LIMIT_NONE:
        return ql
    ref = _quat_at(jp, k, JP_REF)
    delta = _qnorm(_qmul(_qconj(ref), ql))
    if kind == LIMIT_HINGE:
        h = _vec_at(jp, k, JP_AXIS)
        s = _dot((delta[0], delta[1], delta[2]), h)
        angle = 2.0 * np.arctan2(s, delta[3])
        if angle > np.pi:
            angle -= 2.0 * np.pi
        elif angle < -np.pi:
            angle += 2.0 * np.pi
        angle = min(max(angle, jp[k, JP_MIN]), jp[k, JP_MAX])
        return _qmul(ref, _axis_angle(h, angle))
    # cone: swing of the bone axis within JP_CONE, twist about it within [JP_MIN, JP_MAX]
    a = bone_axis
    la = _len(a)
    if la < EPS:
        return ql
    a = _scale(a, 1.0 / la)
    s = _dot((delta[0], delta[1], delta[2]), a)
    tw = (a[0] * s, a[1] * s, a[2] * s, delta[3])
    if s * s + delta[3] * delta[3] < 1e-24:
        tw = (0.0, 0.0, 0.0, 1.0)
    else:
        tw = _qnorm(tw)
    sw = _qmul(delta, _qconj(tw))
    if sw[3] < 0.0:
        sw = (-sw[0], -sw[1], -sw[2], -sw[3])
    swing_angle = 2.0 * np.arctan2(np.sqrt(sw[0] * sw[0] + sw[1] * sw[1] + sw[2] * sw[2]), sw[3])
    cone = jp[k, JP_CONE]
    if swing_angle > cone:
        sw = _scale_rotation(sw, cone / swing_angle)
    if tw[3] < 0.0:
        tw = (-tw[0], -tw[1], -tw[2], -tw[3])
    tangle = 2.0 * np.arctan2(_dot((tw[0], tw[1], tw[2]), a), tw[3])
    lo, hi = jp[k, JP_MIN], jp[k, JP_MAX]
    if tangle < lo or tangle > hi:
        tw = _axis_angle(a, min(max(tangle, lo), hi))
    return _qmul(ref, _qmul(sw, tw))


@njit(cache=True)
def _chain_setup(pose, world, parents, joints, sc):
    """Fill the chain scratch from the pose; returns the chain length (sum of segment lengths)."""
    n = joints.shape[0]
    total = 0.0
    for k in range(n):
        j = joints[k]
        p = _position(world, j)
        wp = _parent_rotation(world, parents, j)
        ql = _local_rotation(pose, j)
        w = _qmul(wp, ql)
        _put3(sc, k, C_P, p)
        _put4(sc, k, C_W, w)
        _put4(sc, k, C_W0, w)
        _put4(sc, k, C_WP, wp)
        _put4(sc, k, C_L, ql)
    for k in range(n):
        if k + 1 < n:
            o = _sub(_vec_at(sc, k + 1, C_P), _vec_at(sc, k, C_P))
        else:
            o = (0.0, 0.0, 0.0)
        _put3(sc, k, C_O, o)
        sc[k, C_LEN] = _len(o)
        _put3(sc, k, C_A, _qrot(_qconj(_quat_at(sc, k, C_W)), o))
        total += sc[k, C_LEN]
    return total


@njit(cache=True)
def _bone_axis_local(sc, k):
    """Direction to the next chain joint in joint k's own frame (from the original pose)."""
    return _vec_at(sc, k, C_A)


@njit(cache=True)
def _set_local(sc, k, ql_new, n):
    """Joint k gets local rotation ql_new: its world rotation changes by dq, the chain below it turns
    rigidly about its position."""
    w_old = _quat_at(sc, k, C_W)
    w_new = _qnorm(_qmul(_quat_at(sc, k, C_WP), ql_new))
    dq = _qmul(w_new, _qconj(w_old))
    _put4(sc, k, C_L, ql_new)
    _put4(sc, k, C_W, w_new)
    pk = _vec_at(sc, k, C_P)
    for m in range(k + 1, n):
        _put3(sc, m, C_P, _add(pk, _qrot(dq, _sub(_vec_at(sc, m, C_P), pk))))
        _put4(sc, m, C_W, _qnorm(_qmul(dq, _quat_at(sc, m, C_W))))
        _put4(sc, m, C_WP, _qnorm(_qmul(dq, _quat_at(sc, m, C_WP))))


@njit(cache=True)
def _chain_has_limits(jp, n):
    for k in range(n):
        if jp[k, JP_LIMIT] != LIMIT_NONE:
            return True
    return False


@njit(cache=True)
def _enforce_limits(jp, sc, n):
    for k in range(n - 1):
        if jp[k, JP_LIMIT] != LIMIT_NONE:
            ql = _quat_at(sc, k, C_L)
            _set_local(sc, k, _apply_limit(jp, k, ql, _bone_axis_local(sc, k)), n)


@njit(cache=True)
def _write_chain(pose, joints, sc, weight):
    for k in range(joints.shape[0] - 1):
        j = joints[k]
        _write_rotation(pose, j, _local_rotation(pose, j), _quat_at(sc, k, C_L), weight)


@njit(cache=True)
def _straighten(jp, sc, n, target, limited):
    """Unreachable target: every bone points along root -> target (then limits, if any)."""
    root = _vec_at(sc, 0, C_P)
    for k in range(n - 1):
        dq = _arc(_vec_at(sc, k, C_O), _sub(target, root))
        w_new = _qmul(dq, _quat_at(sc, k, C_W0))
        ql = _qmul(_qconj(_quat_at(sc, k, C_WP)), w_new)
        if limited:
            ql = _apply_limit(jp, k, ql, _bone_axis_local(sc, k))
        _set_local(sc, k, ql, n)


@njit(cache=True)
def ccd_one(pose, world, parents, joints, jp, target, weight, iterations, tolerance, scratch):
    """Cyclic coordinate descent for one pose: from the joint before the end back to the root, each
    joint turns so that the end effector (last of ``joints``) lies on its line to ``target``; its local
    rotation is clamped to its limit (``jp`` rows) right away. Stops after ``iterations`` sweeps or
    when the end is within ``tolerance``. Unreachable targets: the chain straight toward them.
    ``scratch`` (>= len(joints), SCRATCH_WIDTH)."""
    n = joints.shape[0]
    if not weight > 0.0 or n < 2:
        return
    sc = scratch
    total = _chain_setup(pose, world, parents, joints, sc)
    limited = _chain_has_limits(jp, n)
    if limited:
        _enforce_limits(jp, sc, n)
    if _len(_sub(target, _vec_at(sc, 0, C_P))) >= total:
        _straighten(jp, sc, n, target, limited)
    else:
        for _ in range(iterations):
            if _len(_sub(target, _vec_at(sc, n - 1, C_P))) <= tolerance:
                break
            for k in range(n - 2, -1, -1):
                pk = _vec_at(sc, k, C_P)
                dq = _arc(_sub(_vec_at(sc, n - 1, C_P), pk), _sub(target, pk))
                w_new = _qmul(dq, _quat_at(sc, k, C_W))
                ql = _qnorm(_qmul(_qconj(_quat_at(sc, k, C_WP)), w_new))
                if limited:
                    ql = _apply_limit(jp, k, ql, _bone_axis_local(sc, k))
                _set_local(sc, k, ql, n)
    _write_chain(pose, joints, sc, weight)


@njit(cache=True)
def _positions_to_rotations(jp, sc, n, pos, limited):
    """Give each joint (root first) the world rotation of the input pose turned by the smallest
    rotation from its input bone direction onto ``pos[k + 1] - pos[k]``: no twist about the bone is
    added, so every bone keeps the twist it had in the animated pose. Limits clamp each local
    rotation; the chain below follows rigidly (scratch positions)."""
    for k in range(n - 1):
        want = (pos[k + 1, 0] - pos[k, 0], pos[k + 1, 1] - pos[k, 1], pos[k + 1, 2] - pos[k, 2])
        dq = _arc(_vec_at(sc, k, C_O), want)
        w_new = _qmul(dq, _quat_at(sc, k, C_W0))
        ql = _qnorm(_qmul(_qconj(_quat_at(sc, k, C_WP)), w_new))
        if limited:
            ql = _apply_limit(jp, k, ql, _bone_axis_local(sc, k))
        _set_local(sc, k, ql, n)


@njit(cache=True)
def fabrik_one(pose, world, parents, joints, jp, target, weight, iterations, tolerance, scratch, pos):
    """FABRIK for one pose: backward (end at the target) and forward (root back in place) passes over
    the chain's joint positions, segment lengths kept; then each joint gets the smallest rotation
    onto its new bone direction (twist preserved, see :func:`_positions_to_rotations`). With limits
    the positions are converted, clamped and re-derived after every iteration. ``scratch`` as in
    :func:`ccd_one`; ``pos`` (>= len(joints), 3) scratch."""
    n = joints.shape[0]
    if not weight > 0.0 or n < 2:
        return
    sc = scratch
    total = _chain_setup(pose, world, parents, joints, sc)
    limited = _chain_has_limits(jp, n)
    if limited:
        _enforce_limits(jp, sc, n)
    root = _vec_at(sc, 0, C_P)
    if _len(_sub(target, root)) >= total:
        _straighten(jp, sc, n, target, limited)
        _write_chain(pose, joints, sc, weight)
        return
    for k in range(n):
        pos[k, 0], pos[k, 1], pos[k, 2] = sc[k, C_P], sc[k, C_P + 1], sc[k, C_P + 2]
    for _ in range(iterations):
        end = (pos[n - 1, 0], pos[n - 1, 1], pos[n - 1, 2])
        if _len(_sub(target, end)) <= tolerance:
            break
        pos[n - 1, 0], pos[n - 1, 1], pos[n - 1, 2] = target
        for k in range(n - 2, -1, -1):
            nxt = (pos[k + 1, 0], pos[k + 1, 1], pos[k + 1, 2])
            d = _sub((pos[k, 0], pos[k, 1], pos[k, 2]), nxt)
            ld = _len(d)
            seg = sc[k, C_LEN]
            if ld > EPS:
                p = _add(nxt, _scale(d, seg / ld))
            else:
                p = _add(nxt, _scale(_vec_at(sc, k, C_O), -1.0))
            pos[k, 0], pos[k, 1], pos[k, 2] = p
        pos[0, 0], pos[0, 1], pos[0, 2] = root
        for k in range(n - 1):
            cur = (pos[k, 0], pos[k, 1], pos[k, 2])
            d = _sub((pos[k + 1, 0], pos[k + 1, 1], pos[k + 1, 2]), cur)
            ld = _len(d)
            seg = sc[k, C_LEN]
            if ld > EPS:
                p = _add(cur, _scale(d, seg / ld))
            else:
                p = _add(cur, _vec_at(sc, k, C_O))
            pos[k + 1, 0], pos[k + 1, 1], pos[k + 1, 2] = p
        if limited:
            _positions_to_rotations(jp, sc, n, pos, True)
            for k in range(n):
                pos[k, 0], pos[k, 1], pos[k, 2] = sc[k, C_P], sc[k, C_P + 1], sc[k, C_P + 2]
    if not limited:
        _positions_to_rotations(jp, sc, n, pos, False)
    _write_chain(pose, joints, sc, weight)


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


# ---------------------------------------------------------------------------------------------
# batched functions (one stage each)


def _batch(pose: np.ndarray) -> tuple[np.ndarray, bool]:
    pose = np.asarray(pose)
    single = pose.ndim == 2
    if single:
        pose = pose[None]
    if pose.ndim != 3 or pose.shape[-1] != 10:
        raise SkeletalError(f"pose must be (N, 10) or (B, N, 10), got {pose.shape}")
    if pose.dtype not in (np.float32, np.float64):
        pose = pose.astype(np.float64)
    return pose, single


def _rows(value, count: int, width: int, what: str) -> np.ndarray:
    """(count, width) from None (NaN), one row, or one row per instance."""
    if value is None:
        return np.full((count, width), np.nan)
    a = np.asarray(value, dtype=np.float64)
    if a.shape == (width,):
        return np.broadcast_to(a, (count, width))
    if a.shape == (count, width):
        return a
    raise SkeletalError(f"{what} must be ({width},) or ({count}, {width}), got {a.shape}")


def _run(parents, pose, world, kind: str, chain, target, *, pole=None, weight=1.0, rotation=None, out=None,
         **options) -> np.ndarray:
    parents = np.asarray(parents, dtype=np.int32)
    pose, single = _batch(pose)
    b = pose.shape[0]
    result = pose.copy() if out is None else out.reshape(pose.shape)
    if out is not None and out is not pose:
        result[...] = pose
    table = StageTable(parents, rest=options.pop("rest", None))
    table.add(kind, chain, **options)
    if world is None:
        world = world_matrices(parents, result)
    else:
        world = np.array(world, dtype=result.dtype).reshape(result.shape[:2] + np.shape(world)[-2:])
    inputs = table.inputs(b)
    inputs[:, 0, IN_TARGET:IN_TARGET + 3] = _rows(target, b, 3, "target")
    inputs[:, 0, IN_POLE:IN_POLE + 3] = _rows(pole, b, 3, "pole / up vector")
    inputs[:, 0, IN_ROTATION:IN_ROTATION + 4] = _rows(rotation, b, 4, "end rotation")
    inputs[:, 0, IN_WEIGHT] = np.broadcast_to(np.asarray(weight, dtype=np.float64), (b,))
    table.solve(result, world, inputs)
    return result[0] if single else result


def two_bone(parents, pose, chain, target, *, pole=None, weight=1.0, soft: float = 0.0, mid_axis=None,
             end_rotation=None, world=None, out=None) -> np.ndarray:
    """Two-bone IK over a batch of poses; returns the poses with corrected local rotations.

    ``parents`` (N,) parent-first; ``pose`` (B, N, 10) or (N, 10) local rows; ``chain`` (root, mid,
    end) rig indices; ``target`` (B, 3) or (3,) model-space points; ``pole`` (B, 3)/(3,) points the
    mid joint (knee, elbow) bends toward, or None; ``weight`` scalar or (B,); ``soft`` in [0, 1):
    soft-limit band near full extension (fraction of the chain length); ``mid_axis`` (3,) hinge axis
    in the mid joint's local frame (positive turns bend it); ``end_rotation`` (B, 4)/(4,) model-space
    xyzw rotation for the end joint; ``world`` (B, N, 3|4, 4) model-space matrices of ``pose`` (built
    when None); ``out``: write there (e.g. ``out=pose`` for in place). See :func:`two_bone_one`.
    """
    return _run(parents, pose, world, "two_bone", chain, target, pole=pole, weight=weight, rotation=end_rotation,
                out=out, soft=soft, mid_axis=mid_axis)


def aim(parents, pose, joints, target, *, forward=(0.0, 0.0, 1.0), up=(0.0, 1.0, 0.0), up_vector=None,
        weight=1.0, shares=None, limits=None, world=None, out=None) -> np.ndarray:
    """Aim / look-at over a batch of poses: the last of ``joints`` points its local ``forward`` axis at
    ``target`` (B, 3), its ``up`` axis toward ``up_vector`` (B, 3) (a model-space direction, or None).
    With several joints (spine, neck, head) each takes a share of the turn (``shares``: relative
    amounts, equal by default); ``limits``: an :class:`AimLimit` (or one per joint) bounding each
    joint's yaw / pitch / roll. See :func:`aim_one`."""
    return _run(parents, pose, world, "aim", joints, target, pole=up_vector, weight=weight, out=out,
                forward=forward, up=up, shares=shares, limits=limits)


def ccd(parents, pose, joints, target, *, limits=None, iterations: int = 10, tolerance: float = 1e-5, weight=1.0,
        rest=None, world=None, out=None) -> np.ndarray:
    """CCD over a batch of poses for the chain ``joints`` (root first, end effector last); ``limits``
    a :class:`Hinge` / :class:`Cone` / None per joint (or one for all), measured from ``rest`` (N, 10)
    local rows (identity rotations when None) unless the limit names its own reference. See
    :func:`ccd_one`."""
    return _run(parents, pose, world, "ccd", joints, target, weight=weight, out=out, limits=limits,
                iterations=iterations, tolerance=tolerance, rest=rest)


def fabrik(parents, pose, joints, target, *, limits=None, iterations: int = 10, tolerance: float = 1e-5, weight=1.0,
           rest=None, world=None, out=None) -> np.ndarray:
    """FABRIK over a batch of poses, converted back to local rotations that keep each bone's twist.
    Options as :func:`ccd`; see :func:`fabrik_one`."""
    return _run(parents, pose, world, "fabrik", joints, target, weight=weight, out=out, limits=limits,
                iterations=iterations, tolerance=tolerance, rest=rest)


def world_positions(parents, pose) -> np.ndarray:
    """Model-space joint positions (..., N, 3) of local pose rows (..., N, 10)."""
    return world_matrices(np.asarray(parents), np.asarray(pose, dtype=np.float64))[..., :3, 3]
