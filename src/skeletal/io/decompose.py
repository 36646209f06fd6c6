"""Split a node's 4x4 ``matrix`` into the translation / rotation / scale a rig animates.

glTF lets a node give its local transform as a matrix instead of TRS (such a node may not be
animated, but a rig still wants its rest TRS). Matrices here are row-major, acting on column vectors
(``p' = M @ p``); quaternions are (x, y, z, w).

:func:`skeletal.quat.decompose_trs` does the same for well-formed matrices; a file's matrix may be
slightly sheared or carry a zero scale, so here the rotation is first made exactly orthonormal.
"""

from __future__ import annotations

import numpy as np

from skeletal.quat import matrix_to_quat


def decompose_matrix(m: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(translation (3,), rotation xyzw (4,), scale (3,)) of one row-major affine 4x4 matrix, float64.

    T is the last column. S is the norms of the upper 3x3's columns, the x scale negated when the
    determinant is negative (a mirror, as three.js does), so that R is a proper rotation. R is the
    rotation nearest to the normalised columns (polar decomposition by SVD), so a slightly sheared or
    noisy matrix - or one with a zero scale - still gives a valid unit quaternion.
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
    return translation, matrix_to_quat(rotation), scale
