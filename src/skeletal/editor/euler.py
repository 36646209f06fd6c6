"""Euler angles for the editor's rotation fields: degrees in a chosen order, to and from xyzw quaternions.

Order ``"XYZ"`` rotates about X first, then Y, then Z, all about the parent's fixed axes
(``R = Rz @ Ry @ Rx``; Blender's "XYZ Euler"). Every order of three distinct axes is allowed.

>>> import numpy as np
>>> q = euler_to_quat([0.0, 90.0, 0.0], "XYZ")
>>> np.round(quat_to_euler(q, "XYZ"), 6).tolist()
[0.0, 90.0, 0.0]
"""

from __future__ import annotations

import numpy as np

from ..quat import quat_mul, quat_to_matrix

ORDERS = ("XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX")
_AXIS = {"X": 0, "Y": 1, "Z": 2}


def _axis_quat(axis: int, degrees: float) -> np.ndarray:
    h = np.radians(degrees) / 2.0
    q = np.zeros(4)
    q[axis] = np.sin(h)
    q[3] = np.cos(h)
    return q


def euler_to_quat(angles_deg, order: str = "XYZ") -> np.ndarray:
    """(4,) xyzw from three angles in degrees, ``angles_deg[k]`` about axis ``order[k]``... given as
    (x, y, z) angles: ``angles_deg`` is always indexed by axis (x, y, z), ``order`` says which turns first."""
    if order not in ORDERS:
        raise ValueError(f"rotation order {order!r} is not one of {', '.join(ORDERS)}")
    q = np.array([0.0, 0.0, 0.0, 1.0])
    for name in order:  # the first axis turns first: it is the rightmost factor
        a = _AXIS[name]
        q = quat_mul(_axis_quat(a, float(angles_deg[a])), q)
    return q / np.linalg.norm(q)


def quat_to_euler(q, order: str = "XYZ") -> np.ndarray:
    """(3,) angles in degrees about (x, y, z) such that ``euler_to_quat(angles, order)`` gives ``q``'s
    rotation; the middle axis' angle is in [-90, 90]."""
    if order not in ORDERS:
        raise ValueError(f"rotation order {order!r} is not one of {', '.join(ORDERS)}")
    i, j, k = (_AXIS[c] for c in order)
    s = 1.0 if (i, j, k) in ((0, 1, 2), (1, 2, 0), (2, 0, 1)) else -1.0
    r = quat_to_matrix(np.asarray(q, dtype=np.float64) / np.linalg.norm(q))
    out = np.zeros(3)
    out[j] = np.degrees(np.arcsin(np.clip(-s * r[k, i], -1.0, 1.0)))
    if abs(r[k, i]) < 1.0 - 1e-9:
        out[i] = np.degrees(np.arctan2(s * r[k, j], r[k, k]))
        out[k] = np.degrees(np.arctan2(s * r[j, i], r[i, i]))
    else:  # gimbal lock: put the whole remaining turn on the first axis
        out[i] = np.degrees(np.arctan2(-s * r[j, k], r[j, j]))
        out[k] = 0.0
    return out
