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
