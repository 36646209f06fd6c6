"""Scalar quaternion and vector helpers of the numba kernels: tuples in, tuples out.

Vectors are 3-tuples and quaternions 4-tuples (xyzw) of float64; ``world`` arrays are (N, 3|4, 4)
row-major model-space matrices acting on column vectors, ``pose`` arrays (N, 10) local rows ``t q s``.
The IK solvers (:mod:`skeletal.anim.ik`), the crowd's wide two-bone path (:mod:`skeletal.playback.wide`)
and stride warping share them; the small ones are ``forceinline`` so each kernel inlines its own copy.
The quaternion maths is :mod:`skeletal.quat`'s (qmul, qrotate, qnormalize, quat_from_rotation); these
adapters only unpack the tuples the kernels pass around.

>>> from skeletal.anim.vec import _cross, _arc
>>> _cross((1.0, 0.0, 0.0), (0.0, 1.0, 0.0))
(0.0, 0.0, 1.0)
>>> [round(c, 6) + 0.0 for c in _arc((1.0, 0.0, 0.0), (0.0, 2.0, 0.0))]
[0.0, 0.0, 0.707107, 0.707107]
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..quat import qmul, qnormalize, qrotate, quat_from_rotation

EPS = 1e-9  # lengths below this count as zero (no direction)

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


@njit(cache=True, forceinline=True)
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


@njit(cache=True, forceinline=True)
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


@njit(cache=True, forceinline=True)
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
# frames: model-space vectors and turns in a node's frame


@njit(cache=True, forceinline=True)
def _column(world, j, k):
    return (np.float64(world[j, 0, k]), np.float64(world[j, 1, k]), np.float64(world[j, 2, k]))


@njit(cache=True, forceinline=True)
def _inv_len(v):
    n = _len(v)
    return 1.0 / n if n > 1e-300 else 0.0


@njit(cache=True, forceinline=True)
def _into_frame(world, j, v):
    """``R_j^T v``: model-space vector v in the frame of node j, R_j = world[j]'s rotation (its
    columns normalised: exact for positive scale that is uniform or aligned with the rotation); v
    itself for j < 0. A model-space turn (v, w) of the subtree below j is the local turn
    (R_j^T v, w) there, ``conj(q_j) (v, w) q_j``, without converting world[j] to a quaternion."""
    if j < 0:
        return v
    c0, c1, c2 = _column(world, j, 0), _column(world, j, 1), _column(world, j, 2)
    return (_dot(c0, v) * _inv_len(c0), _dot(c1, v) * _inv_len(c1), _dot(c2, v) * _inv_len(c2))


@njit(cache=True, forceinline=True)
def _out_of_frame(world, j, v):
    """``R_j v``: a vector given in node j's frame, in model space (see :func:`_into_frame`)."""
    c0, c1, c2 = _column(world, j, 0), _column(world, j, 1), _column(world, j, 2)
    return _add(_add(_scale(c0, v[0] * _inv_len(c0)), _scale(c1, v[1] * _inv_len(c1))),
                _scale(c2, v[2] * _inv_len(c2)))


@njit(cache=True, forceinline=True)
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


@njit(cache=True, forceinline=True)
def _local_turn(world, j, turn, q_local):
    """New local rotation of a node whose parent is j after the model-space ``turn`` of its subtree:
    conj(q_j) turn q_j q_local (see :func:`_into_frame`)."""
    axis = _into_frame(world, j, (turn[0], turn[1], turn[2]))
    return _qmul((axis[0], axis[1], axis[2], turn[3]), q_local)
