"""The motion-matching controllers' prediction: critically damped springs carrying a velocity and a
facing toward the caller's goal (D. Holden's ``simulation_positions_update``), exact solutions, used
by :class:`~skeletal.playback.locomotion.controller.MotionMatching` (scalars and (2,) vectors) and
:class:`~skeletal.playback.locomotion.crowd_matching.CrowdMotionMatching` (an instance axis first).

>>> dx, v, a = _spring_velocity(np.zeros(2), np.zeros(2), np.array([0.0, 1.0]), 0.3, 10.0)
>>> np.round(v, 6).tolist()
[0.0, 1.0]
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

LN2 = math.log(2.0)
#: Half-life (s) with which the warping's stride and angle ease toward the ones asked.
WARP_EASE = 0.4


def _spring_velocity(v: np.ndarray, a: np.ndarray, goal: np.ndarray, halflife: float,
                     t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Displacement, velocity and acceleration after ``t`` seconds of a velocity ``v`` (2,) with
    acceleration ``a`` driven toward ``goal`` by a critically damped spring (exact solution)."""
    y = 2.0 * LN2 / halflife
    j0 = v - goal
    j1 = a + j0 * y
    e = math.exp(-y * t)
    dx = e * (-j1 / (y * y) + (-j0 - j1 * t) / y) + j1 / (y * y) + j0 / y + goal * t
    return dx, e * (j0 + j1 * t) + goal, e * (a - j1 * y * t)


def _spring_angle(angle: Any, rate: Any, goal: Any, halflife: float, t: float) -> tuple[Any, Any]:
    """Angle and angular rate after ``t`` seconds of a critically damped spring toward ``goal``
    (the short way round); floats, or arrays (N,) element by element."""
    y = 2.0 * LN2 / halflife
    j0 = (angle - goal + math.pi) % (2.0 * math.pi) - math.pi
    j1 = rate + j0 * y
    e = math.exp(-y * t)
    return e * (j0 + j1 * t) + goal, e * (rate - j1 * y * t)


#: The goal's turn rate (rad/s) the prediction extrapolates is clamped to this.
MAX_GOAL_TURN = 2.0
#: Frames (at the database's fps) per step of the prediction when the goal turns.
STEP_FRAMES = 10


def _turn_goal(turn_rate: Any, previous: Any, heading: Any, moving: Any, dt: float, halflife: float) -> Any:
    """The goal heading's turn rate (rad/s, floats or (N,) arrays) after a frame of ``dt`` in which
    it went from ``previous`` to ``heading`` (radians), smoothed with ``halflife`` (s; 0: off, the
    rate stays 0) and clamped to :data:`MAX_GOAL_TURN`; where not ``moving`` (a goal slower than
    0.1 m/s) it decays toward 0."""
    if halflife <= 0.0 or dt <= 0.0:
        return turn_rate * 0.0
    step = (heading - previous + math.pi) % (2.0 * math.pi) - math.pi
    rate = np.where(moving, step / dt, 0.0)
    out = turn_rate + (rate - turn_rate) * (1.0 - math.exp(-LN2 * dt / halflife))
    return np.clip(out, -MAX_GOAL_TURN, MAX_GOAL_TURN) if np.ndim(out) else min(max(float(out), -MAX_GOAL_TURN),
                                                                                MAX_GOAL_TURN)


def _predict(velocity: np.ndarray, acceleration: np.ndarray, goal: np.ndarray, facing: Any, facing_rate: Any,
             goal_facing: Any, turn_rate: Any, facing_turns: Any, velocity_halflife: float, facing_halflife: float,
             frames: list[int], fps: float) -> tuple[np.ndarray, np.ndarray]:
    """The springs' predicted ground displacements (..., K, 2) (world x, z, from the position now) and
    facings (..., K) at ``frames`` (sorted, at ``fps``). Leading axes: none for one character (``velocity``
    (2,), floats), or (N,) for a crowd. The goal velocity turns at ``turn_rate`` (rad/s about +Y) over
    the horizon, and the goal facing with it where ``facing_turns``: a goal that has been turning is
    expected to go on turning (a path's curve), not to stop where it points now. With ``turn_rate``
    0 this is the springs' exact solution toward a fixed goal."""
    v, a = np.array(velocity, np.float64), np.array(acceleration, np.float64)
    f, fr = facing, facing_rate
    w = np.asarray(turn_rate, np.float64)
    still = not np.any(w)
    fw = np.where(facing_turns, w, 0.0)
    shift = np.zeros_like(v)
    t = 0.0
    displacements, facings = [], []
    for k in frames:
        end = k / fps
        while t < end - 1e-12:
            h = end - t if still else min(STEP_FRAMES / fps, end - t)
            mid = t + 0.5 * h  # the goal at the middle of the step (the exact solution when it does not turn)
            c, s = np.cos(w * mid), np.sin(w * mid)
            turned = np.stack([c * goal[..., 0] + s * goal[..., 1], -s * goal[..., 0] + c * goal[..., 1]], axis=-1)
            dx, v, a = _spring_velocity(v, a, turned, velocity_halflife, h)
            f, fr = _spring_angle(f, fr, goal_facing + fw * mid, facing_halflife, h)
            shift = shift + dx
            t += h
        displacements.append(shift)
        facings.append(f)
    return np.stack(displacements, axis=-2), np.stack(np.broadcast_arrays(*facings), axis=-1)
