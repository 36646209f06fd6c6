"""Split a node's 4x4 ``matrix`` into the translation / rotation / scale a rig animates.

glTF lets a node give its local transform as a matrix instead of TRS (such a node may not be
animated, but a rig still wants its rest TRS). Matrices here are row-major, acting on column vectors
(``p' = M @ p``); quaternions are (x, y, z, w).
"""

from __future__ import annotations

import numpy as np


def rotation_matrix_to_quaternion(r: np.ndarray) -> np.ndarray:
    """The unit quaternion (x, y, z, w) of a 3x3 rotation matrix (Shepperd's method: the branch on
    the largest diagonal term keeps the square root away from zero)."""
    m00, m01, m02 = r[0]
    m10, m11, m12 = r[1]
    m20, m21, m22 = r[2]
    trace = m00 + m11 + m22
    if trace > 0.0:
        s = 2.0 * np.sqrt(trace + 1.0)
        q = [(m21 - m12) / s, (m02 - m20) / s, (m10 - m01) / s, 0.25 * s]
    elif m00 > m11 and m00 > m22:
        s = 2.0 * np.sqrt(1.0 + m00 - m11 - m22)
        q = [0.25 * s, (m01 + m10) / s, (m02 + m20) / s, (m21 - m12) / s]
    elif m11 > m22:
        s = 2.0 * np.sqrt(1.0 + m11 - m00 - m22)
        q = [(m01 + m10) / s, 0.25 * s, (m12 + m21) / s, (m02 - m20) / s]
    else:
        s = 2.0 * np.sqrt(1.0 + m22 - m00 - m11)
        q = [(m02 + m20) / s, (m12 + m21) / s, 0.25 * s, (m10 - m01) / s]
    quat = np.array(q, dtype=np.float64)
    return quat / np.linalg.norm(quat)


def decompose_matrix(m: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(translation (3,), rotation xyzw (4,), scale (3,)) of a row-major affine 4x4 matrix, float64.

    T is the last column. S is the norms of the upper 3x3's columns, the x scale negated when the
    determinant is negative (a mirror), so that R is a proper rotation. R is the rotation nearest to
    the normalised columns (polar decomposition by SVD), so a slightly sheared or noisy matrix - or
    one with a zero scale - still gives a valid unit quaternion.
    """
    m = np.asarray(m, dtype=np.float64)
    translation = m[:3, 3].copy()
    linear = m[:3, :3]
    scale = np.linalg.norm(linear, axis=0)
    if np.linalg.det(linear) < 0.0:
        scale[0] = -scale[0]
    safe = np.where(scale != 0.0, scale, 1.0)
    u, _sigma, vt = np.linalg.svd(linear / safe)
    rotation = u @ vt
    if np.linalg.det(rotation) < 0.0:  # only when a zero scale left the columns rank-deficient
        u[:, -1] = -u[:, -1]
        rotation = u @ vt
    return translation, rotation_matrix_to_quaternion(rotation), scale
