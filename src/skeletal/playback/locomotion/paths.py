"""Scripted paths for locomotion controllers: where a character should be at a given time.

>>> p, v = figure_eight_path(1.0, 4.0)(0.0)
>>> p.tolist(), round(float(np.hypot(*v)), 2)
([0.0, 0.0], 1.46)
"""

from __future__ import annotations

import math

import numpy as np



#: The scripted paths, and per speed name (path speed in m/s, the figure eight's radius in m).
SPEEDS = {"walk": (1.0, 4.0), "run": (3.5, 10.5)}
PATHS = ("figure8",)

def figure_eight_path(speed: float, radius: float):
    """The figure eight ``x = R sin(w t)``, ``z = R sin(2 w t) / 2`` of ``radius`` (m) run at about
    ``speed`` m/s: a function of time (s) giving the path point (x, z) and its velocity (m/s).
    """
    # the path's length per cycle, to set the angular rate for the speed asked
    u = np.linspace(0.0, 2.0 * math.pi, 2001)
    length = np.sum(np.hypot(np.diff(radius * np.sin(u)), np.diff(radius * np.sin(2.0 * u) / 2.0)))
    w = speed * 2.0 * math.pi / length

    def path(t: float) -> tuple[np.ndarray, np.ndarray]:
        p = np.array([radius * math.sin(w * t), radius * math.sin(2.0 * w * t) / 2.0])
        v = np.array([radius * w * math.cos(w * t), radius * w * math.cos(2.0 * w * t)])
        return p, v

    return path
