"""Arithmetic for loops that LLVM vectorises across lanes (characters, legs): tuples of float64, every
helper inlined, no division checks, no branches with loads or stores inside.

Shared by the crowd's wide sampler (:mod:`skeletal.playback.wide`) and foot placement's legs
(:mod:`skeletal.playback.footlanes`). Quaternions are xyzw tuples.

>>> _lq_mul((0.0, 0.0, 0.0, 1.0), (1.0, 0.0, 0.0, 0.0))
(1.0, 0.0, 0.0, 0.0)
"""

from __future__ import annotations

from numba import njit

# The options of lane code: tuples of float64, no calls that stay calls (every helper inlined), no
# division checks (error_model="numpy": x / 0 is inf or NaN, discarded by a select), no branches with
# loads or stores inside (both sides computed, one selected), so that LLVM vectorises the loop.
_LANE = dict(cache=True, forceinline=True, error_model="numpy")


@njit(**_LANE)
def _finite(x):
    """x is finite (neither inf nor NaN): x - x is 0 exactly then, NaN otherwise."""
    return x - x == 0.0


@njit(**_LANE)
def _lq_mul(a, b):
    """Hamilton product a b (xyzw tuples; b first, then a), :func:`skeletal.quat.qmul`'s arithmetic."""
    return (a[3] * b[0] + a[0] * b[3] + a[1] * b[2] - a[2] * b[1],
            a[3] * b[1] - a[0] * b[2] + a[1] * b[3] + a[2] * b[0],
            a[3] * b[2] + a[0] * b[1] - a[1] * b[0] + a[2] * b[3],
            a[3] * b[3] - a[0] * b[0] - a[1] * b[1] - a[2] * b[2])


@njit(**_LANE)
def _lq_rot(q, v):
    """v rotated by the unit quaternion q, :func:`skeletal.quat.qrotate`'s arithmetic."""
    tx = 2.0 * (q[1] * v[2] - q[2] * v[1])
    ty = 2.0 * (q[2] * v[0] - q[0] * v[2])
    tz = 2.0 * (q[0] * v[1] - q[1] * v[0])
    return (v[0] + q[3] * tx + q[1] * tz - q[2] * ty,
            v[1] + q[3] * ty + q[2] * tx - q[0] * tz,
            v[2] + q[3] * tz + q[0] * ty - q[1] * tx)
