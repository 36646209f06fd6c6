"""Quaternion and transform maths shared by the stages.

Contracts: quaternions are ``(x, y, z, w)``; matrices are row-major and act on column vectors
(``p' = M @ p``); a transform is composed as ``T @ R @ S`` (glTF). The ``*_nb`` functions are numba
device functions for kernels (scalars in, scalars or in-place writes out); the others are vectorised
numpy functions over any leading batch shape.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# ---------------------------------------------------------------------------------------------
# numba device functions (called from kernels)


# Above this |cos| of the half-angle between two keys, slerp is replaced by normalised lerp (the two
# differ by < 1e-7 there). Same threshold as three.js r187's ``Quaternion.slerpFlat``, so that files
# with slightly non-unit keys (quantised, or hand written) give the same matrices as three.js.
NLERP_ABOVE_COS = 0.9995


@njit(cache=True, inline="always")
def slerp_into(out, o, ax, ay, az, aw, bx, by, bz, bw, u):
    """Shortest-path slerp from a to b by u in [0, 1], written to out[o:o+4].

    b is negated when ``a . b < 0``. For nearly parallel keys (cos >= NLERP_ABOVE_COS) the result is a
    normalised lerp; identical keys return a unchanged.
    """
    if ax == bx and ay == by and az == bz and aw == bw:
        out[o] = ax
        out[o + 1] = ay
        out[o + 2] = az
        out[o + 3] = aw
        return
    cos = ax * bx + ay * by + az * bz + aw * bw
    if cos < 0.0:
        bx = -bx
        by = -by
        bz = -bz
        bw = -bw
        cos = -cos
    s0 = 1.0 - u
    s1 = u
    if cos < NLERP_ABOVE_COS:
        angle = np.arccos(cos)
        sin = np.sin(angle)
        s0 = np.sin(s0 * angle) / sin
        s1 = np.sin(s1 * angle) / sin
    x = ax * s0 + bx * s1
    y = ay * s0 + by * s1
    z = az * s0 + bz * s1
    w = aw * s0 + bw * s1
    if cos >= NLERP_ABOVE_COS:
        inv = 1.0 / np.sqrt(x * x + y * y + z * z + w * w)
        x *= inv
        y *= inv
        z *= inv
        w *= inv
    out[o] = x
    out[o + 1] = y
    out[o + 2] = z
    out[o + 3] = w


@njit(cache=True, inline="always")
def normalize4_inplace(out, o):
    """Normalise out[o:o+4]; a zero quaternion becomes identity."""
    n = np.sqrt(out[o] ** 2 + out[o + 1] ** 2 + out[o + 2] ** 2 + out[o + 3] ** 2)
    if n > 0.0:
        inv = 1.0 / n
        out[o] *= inv
        out[o + 1] *= inv
        out[o + 2] *= inv
        out[o + 3] *= inv
    else:
        out[o] = 0.0
        out[o + 1] = 0.0
        out[o + 2] = 0.0
        out[o + 3] = 1.0


# ---------------------------------------------------------------------------------------------
# numpy API (batch-first)


def quat_to_matrix(q: np.ndarray) -> np.ndarray:
    """Rotation matrices (..., 3, 3) from unit quaternions (..., 4) xyzw.

    >>> quat_to_matrix(np.array([0.0, 0.0, 0.0, 1.0]))[0, 0]
    1.0
    """
    q = np.asarray(q, dtype=np.float64)
    x, y, z, w = np.moveaxis(q, -1, 0)
    xx, yy, zz = x * x, y * y, z * z
    xy, xz, yz = x * y, x * z, y * z
    wx, wy, wz = w * x, w * y, w * z
    m = np.empty(q.shape[:-1] + (3, 3))
    m[..., 0, 0] = 1 - 2 * (yy + zz)
    m[..., 0, 1] = 2 * (xy - wz)
    m[..., 0, 2] = 2 * (xz + wy)
    m[..., 1, 0] = 2 * (xy + wz)
    m[..., 1, 1] = 1 - 2 * (xx + zz)
    m[..., 1, 2] = 2 * (yz - wx)
    m[..., 2, 0] = 2 * (xz - wy)
    m[..., 2, 1] = 2 * (yz + wx)
    m[..., 2, 2] = 1 - 2 * (xx + yy)
    return m


def matrix_to_quat(m: np.ndarray) -> np.ndarray:
    """Unit quaternions (..., 4) xyzw from rotation matrices (..., 3, 3).

    Shepperd's method: each matrix uses the formula built on its largest of (trace, m00, m11, m22),
    which keeps the square root away from zero and the result accurate for every angle.
    """
    m = np.asarray(m, dtype=np.float64)
    shape = m.shape[:-2]
    r = m.reshape(-1, 3, 3)
    m00, m11, m22 = r[:, 0, 0], r[:, 1, 1], r[:, 2, 2]
    trace = m00 + m11 + m22
    pick = np.argmax(np.stack([m00, m11, m22, trace], axis=1), axis=1)
    # Candidate 4*q for each branch, rows: (x, y, z, w); the chosen branch's big term is 1 + ...
    big = np.stack([1 + m00 - m11 - m22, 1 + m11 - m00 - m22, 1 + m22 - m00 - m11, 1 + trace], axis=1)
    s = 2.0 * np.sqrt(np.maximum(big[np.arange(len(r)), pick], 1e-300))  # = 4 * |q_pick|
    d10, d01 = r[:, 1, 0], r[:, 0, 1]
    d20, d02 = r[:, 2, 0], r[:, 0, 2]
    d21, d12 = r[:, 2, 1], r[:, 1, 2]
    cands = np.stack([
        np.stack([s * s / 4, d01 + d10, d02 + d20, d21 - d12], axis=1),  # x largest
        np.stack([d01 + d10, s * s / 4, d12 + d21, d02 - d20], axis=1),  # y largest
        np.stack([d02 + d20, d12 + d21, s * s / 4, d10 - d01], axis=1),  # z largest
        np.stack([d21 - d12, d02 - d20, d10 - d01, s * s / 4], axis=1),  # w largest
    ], axis=1)
    q = cands[np.arange(len(r)), pick] / s[:, None]
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    return q.reshape(shape + (4,))


def quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product ``a * b`` of quaternions (..., 4) xyzw, broadcasting over leading axes.

    ``a * b`` rotates by b first, then by a (``R(a * b) = R(a) @ R(b)``).

    >>> quat_mul([0, 0, 0, 1.0], [1.0, 0, 0, 0]).tolist()
    [1.0, 0.0, 0.0, 0.0]
    """
    a = np.asarray(a)
    b = np.asarray(b)
    dtype = np.result_type(a, b, np.float32)
    ax, ay, az, aw = (a[..., i] for i in range(4))
    bx, by, bz, bw = (b[..., i] for i in range(4))
    out = np.empty(np.broadcast_shapes(a.shape, b.shape), dtype=dtype)
    out[..., 0] = aw * bx + ax * bw + ay * bz - az * by
    out[..., 1] = aw * by - ax * bz + ay * bw + az * bx
    out[..., 2] = aw * bz + ax * by - ay * bx + az * bw
    out[..., 3] = aw * bw - ax * bx - ay * by - az * bz
    return out


def quat_conjugate(q: np.ndarray) -> np.ndarray:
    """Conjugates (..., 4) xyzw: ``(-x, -y, -z, w)``; the inverse of a unit quaternion.

    >>> quat_conjugate([1.0, 2.0, 3.0, 4.0]).tolist()
    [-1.0, -2.0, -3.0, 4.0]
    """
    q = np.asarray(q)
    out = np.array(q, dtype=np.result_type(q, np.float32), copy=True)
    out[..., :3] = -out[..., :3]
    return out


def compose_trs(t: np.ndarray, q: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Row-major 4x4 matrices ``T @ R @ S`` (..., 4, 4) from t (..., 3), q (..., 4) xyzw, s (..., 3)."""
    t = np.asarray(t, dtype=np.float64)
    r = quat_to_matrix(q)
    m = np.zeros(r.shape[:-2] + (4, 4))
    m[..., :3, :3] = r * np.asarray(s, dtype=np.float64)[..., None, :]
    m[..., :3, 3] = t
    m[..., 3, 3] = 1.0
    return m


def decompose_trs(m: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Split row-major affine 4x4 matrices (..., 4, 4) into t (..., 3), q (..., 4) xyzw, s (..., 3).

    T is the last column; S the norms of the upper 3x3's columns, with the x scale negated when the
    determinant is negative (a mirror, as three.js does) so that R is a proper rotation. R is the
    rotation nearest to the normalised columns (polar decomposition by SVD): a file's slightly sheared
    or noisy matrix, or one with a zero scale, still gives a valid unit quaternion.
    """
    m = np.asarray(m, dtype=np.float64)
    t = m[..., :3, 3].copy()
    linear = m[..., :3, :3]
    s = np.linalg.norm(linear, axis=-2)
    s[..., 0] = np.where(np.linalg.det(linear) < 0, -s[..., 0], s[..., 0])
    safe = np.where(s == 0, 1.0, s)
    u, _sigma, vt = np.linalg.svd(linear / safe[..., None, :])
    # Rank-deficient columns (a zero scale) can leave u @ vt a reflection: flip u's last axis there.
    flip = np.linalg.det(u @ vt) < 0
    u[..., :, -1] = np.where(flip[..., None], -u[..., :, -1], u[..., :, -1])
    return t, matrix_to_quat(u @ vt), s
