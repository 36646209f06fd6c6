"""The dual quaternion palettes: (J, 3|4, 4) skinning matrices to unit dual quaternions plus a
residual scale/shear, for the CPU kernels and the GPU.

* :func:`dual_quaternions` (float64, numpy and numba): per joint ``qr`` (J, 4) and ``qd`` (J, 4) xyzw
  (rotation and translation parts), ``scale`` (J, 3, 3) the polar factor S of M = R S (identity for
  rigid joints) and the rigid mask.
* :func:`pack_dq_palette`: the kernels' packed float32 palette, ``DQ_STRIDE`` (16) floats per joint:
  qr, qd, then S's six upper-triangle entries and a rigid flag (see :mod:`skeletal.skinning.dqs`).
* :func:`gpu_dq_palette`: ``GPU_ROWS`` (4) vec4 rows per joint for the shaders.

Matrices are row-major and act on column vectors; quaternions are xyzw.

>>> import numpy as np
>>> from skeletal.skinning.dq_palette import pack_dq_palette
>>> pack_dq_palette(np.eye(4, dtype=np.float32)[None]).shape
(1, 16)
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..errors import SkeletalError
from .ir import _F32_DTYPE
from .lbs import aligned_empty, cofactors3

#: A joint whose S differs from the identity by at most this (max abs element) counts as rigid.
#: Float32 inverse-bind matrices of real models are orthonormal to about 1e-6.
RIGID_TOLERANCE = 1e-5
#: float32 values per joint in the packed CPU palette
DQ_STRIDE = 16
#: vec4 rows per joint in the GPU palette
GPU_ROWS = 4


# ---------------------------------------------------------------------------------------------
# palette conversion


@njit(cache=True, nogil=True)
def _cofactors(m, cof):
    """The cofactor matrix of 3x3 ``m`` (det(m) * inverse(m)^T) into ``cof``; returns det(m)."""
    c = cofactors3(m[0, 0], m[0, 1], m[0, 2], m[1, 0], m[1, 1], m[1, 2], m[2, 0], m[2, 1], m[2, 2])
    for k in range(9):
        cof[k // 3, k % 3] = c[k]
    return m[0, 0] * cof[0, 0] + m[0, 1] * cof[0, 1] + m[0, 2] * cof[0, 2]


@njit(cache=True, nogil=True)
def _polar(a, r, s):
    """a (3, 3) float64 -> r (proper rotation) and s = r^T a. Scaled Newton iteration for the polar
    factor (Higham): X <- (g X + X^-T / g) / 2, on -a when det(a) < 0 so that r stays a rotation.
    X is iterated in r, with s as scratch (no allocation: this runs per joint per frame)."""
    det = (a[0, 0] * (a[1, 1] * a[2, 2] - a[1, 2] * a[2, 1]) - a[0, 1] * (a[1, 0] * a[2, 2] - a[1, 2] * a[2, 0])
           + a[0, 2] * (a[1, 0] * a[2, 1] - a[1, 1] * a[2, 0]))
    sign = 1.0 if det >= 0.0 else -1.0
    x = r
    cof = s
    for i in range(3):
        for j in range(3):
            x[i, j] = sign * a[i, j]
    for _ in range(40):
        d = _cofactors(x, cof)  # det * inverse^T
        if not (abs(d) > 1e-300):
            break  # singular: keep what we have (orthonormalised below)
        nx = 0.0
        ni = 0.0
        inv_d = 1.0 / d
        for i in range(3):
            for j in range(3):
                cof[i, j] *= inv_d  # inverse transpose
                nx += x[i, j] * x[i, j]
                ni += cof[i, j] * cof[i, j]
        g = np.sqrt(np.sqrt(ni / nx))
        inv_g = 1.0 / g
        change = 0.0
        for i in range(3):
            for j in range(3):
                v = 0.5 * (g * x[i, j] + cof[i, j] * inv_g)
                change = max(change, abs(v - x[i, j]))
                x[i, j] = v
        if change < 1e-9:  # quadratic convergence: the error after this step is about change**2
            break
    for i in range(3):
        for j in range(3):
            s[i, j] = r[0, i] * a[0, j] + r[1, i] * a[1, j] + r[2, i] * a[2, j]


@njit(cache=True, nogil=True)
def _quat_from_rotation(r, q):
    """Rotation matrix (row-major, column vectors) -> unit quaternion xyzw (Shepperd's method)."""
    tr = r[0, 0] + r[1, 1] + r[2, 2]
    if tr > 0.0:
        k = 2.0 * np.sqrt(1.0 + tr)
        q[3] = 0.25 * k
        q[0] = (r[2, 1] - r[1, 2]) / k
        q[1] = (r[0, 2] - r[2, 0]) / k
        q[2] = (r[1, 0] - r[0, 1]) / k
    elif r[0, 0] > r[1, 1] and r[0, 0] > r[2, 2]:
        k = 2.0 * np.sqrt(max(1.0 + r[0, 0] - r[1, 1] - r[2, 2], 1e-300))
        q[3] = (r[2, 1] - r[1, 2]) / k
        q[0] = 0.25 * k
        q[1] = (r[0, 1] + r[1, 0]) / k
        q[2] = (r[0, 2] + r[2, 0]) / k
    elif r[1, 1] > r[2, 2]:
        k = 2.0 * np.sqrt(max(1.0 + r[1, 1] - r[0, 0] - r[2, 2], 1e-300))
        q[3] = (r[0, 2] - r[2, 0]) / k
        q[0] = (r[0, 1] + r[1, 0]) / k
        q[1] = 0.25 * k
        q[2] = (r[1, 2] + r[2, 1]) / k
    else:
        k = 2.0 * np.sqrt(max(1.0 + r[2, 2] - r[0, 0] - r[1, 1], 1e-300))
        q[3] = (r[1, 0] - r[0, 1]) / k
        q[0] = (r[0, 2] + r[2, 0]) / k
        q[1] = (r[1, 2] + r[2, 1]) / k
        q[2] = 0.25 * k
    n = np.sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
    for i in range(4):
        q[i] /= n


@njit(cache=True, nogil=True)
def _dq_joint(m, a, r, s, q, qd):
    """One palette matrix m (R, 4) -> q (unit rotation quaternion, w >= 0), qd (its dual part) and
    s = R^T A (3, 3); a, r are (3, 3) scratch. Returns whether s is farther than RIGID_TOLERANCE
    from the identity."""
    for i in range(3):
        for j in range(3):
            a[i, j] = m[i, j]
    _polar(a, r, s)
    _quat_from_rotation(r, q)
    if q[3] < 0.0:  # canonical sign (w >= 0); blending flips per vertex anyway (see the pivot)
        for i in range(4):
            q[i] = -q[i]
    tx, ty, tz = np.float64(m[0, 3]), np.float64(m[1, 3]), np.float64(m[2, 3])
    # qd = 0.5 * (t, 0) * q
    qd[0] = 0.5 * (tx * q[3] + ty * q[2] - tz * q[1])
    qd[1] = 0.5 * (-tx * q[2] + ty * q[3] + tz * q[0])
    qd[2] = 0.5 * (tx * q[1] - ty * q[0] + tz * q[3])
    qd[3] = -0.5 * (tx * q[0] + ty * q[1] + tz * q[2])
    off = 0.0
    for i in range(3):
        for j in range(3):
            off = max(off, abs(s[i, j] - (1.0 if i == j else 0.0)))
    return off > RIGID_TOLERANCE


@njit(cache=True, nogil=True)
def _dq_convert(palette, qr, qd, scale, non_rigid):
    """palette (N, R, 4) -> qr, qd (N, 4), scale (N, 3, 3) float64, non_rigid (N,) bool."""
    a = np.empty((3, 3))
    r = np.empty((3, 3))
    for n in range(palette.shape[0]):
        non_rigid[n] = _dq_joint(palette[n], a, r, scale[n], qr[n], qd[n])


def dual_quaternions(palette: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Skin palette (..., J, 4, 4) or (..., J, 3, 4) row-major -> ``(qr, qd, scale, non_rigid)``:
    unit rotation quaternions (..., J, 4) xyzw, dual parts (..., J, 4), the scale/shear matrices
    S = R^T A (..., J, 3, 3) and whether each joint's S is farther than :data:`RIGID_TOLERANCE` from
    the identity, all float64 (bool). ``A = R @ S`` with R the rotation of ``qr``.

    >>> m = np.eye(4); m[:3, 3] = (1, 2, 3)
    >>> qr, qd, s, nr = dual_quaternions(m[None])
    >>> qr[0].tolist(), (qd[0] + 0.0).tolist(), bool(nr[0])   # qd = t q / 2 (+ 0.0: no -0.0)
    ([0.0, 0.0, 0.0, 1.0], [0.5, 1.0, 1.5, 0.0], False)
    """
    flat, lead = _flat_palette(palette)
    if not np.all(np.isfinite(flat[:, :3])):
        raise SkeletalError("palette has non-finite values")
    n = len(flat)
    qr, qd = np.empty((n, 4)), np.empty((n, 4))
    scale, non_rigid = np.empty((n, 3, 3)), np.empty(n, np.bool_)
    _dq_convert(flat, qr, qd, scale, non_rigid)
    return qr.reshape(lead + (4,)), qd.reshape(lead + (4,)), scale.reshape(lead + (3, 3)), non_rigid.reshape(lead)


def _flat_palette(palette) -> tuple[np.ndarray, tuple]:
    """(..., J, R, 4) float palette -> C-contiguous (N, R, 4) and the leading shape (shape checked)."""
    palette = np.asarray(palette)
    if palette.ndim < 3 or palette.shape[-2] not in (3, 4) or palette.shape[-1] != 4 or palette.dtype.kind != "f":
        raise SkeletalError(f"palette must be float (..., J, 4, 4) or (..., J, 3, 4), got {palette.dtype} {palette.shape}")
    return np.ascontiguousarray(palette.reshape((-1,) + palette.shape[-2:])), palette.shape[:-2]


#: The packing's polar iteration stops when a step changes X by less than this (Frobenius norm): Newton's
#: method converges quadratically, so the error after that step is about its square (1e-8 here), below
#: float32 rounding. (The float64 reference, :func:`_polar`, iterates to a change of 1e-9.)
PACK_STEP = 1e-4
#: Joints whose X^T X is within this of the identity (max abs element) skip the iteration (see
#: :func:`_pack_joint`); float32 rotations are orthonormal to ~1e-7.
RIGID_FAST = 3e-5


@njit(cache=True, forceinline=True)
def _gram_error(x00, x01, x02, x10, x11, x12, x20, x21, x22):
    """E = X^T X - I of a 3x3 matrix (rows x0., x1., x2.), its six distinct elements (e00, e11, e22,
    e01, e02, e12)."""
    return (x00 * x00 + x10 * x10 + x20 * x20 - 1.0, x01 * x01 + x11 * x11 + x21 * x21 - 1.0,
            x02 * x02 + x12 * x12 + x22 * x22 - 1.0, x00 * x01 + x10 * x11 + x20 * x21,
            x00 * x02 + x10 * x12 + x20 * x22, x01 * x02 + x11 * x12 + x21 * x22)


@njit(cache=True, forceinline=True)
def _schulz_step(x00, x01, x02, x10, x11, x12, x20, x21, x22, e00, e11, e22, e01, e02, e12):
    """One Newton-Schulz step toward the polar factor, X (I - E/2), given E = X^T X - I
    (:func:`_gram_error`): the nine elements of the result, row by row."""
    h00, h11, h22, h01, h02, h12 = 1.0 - 0.5 * e00, 1.0 - 0.5 * e11, 1.0 - 0.5 * e22, -0.5 * e01, -0.5 * e02, \
        -0.5 * e12
    return (x00 * h00 + x01 * h01 + x02 * h02, x00 * h01 + x01 * h11 + x02 * h12, x00 * h02 + x01 * h12 + x02 * h22,
            x10 * h00 + x11 * h01 + x12 * h02, x10 * h01 + x11 * h11 + x12 * h12, x10 * h02 + x11 * h12 + x12 * h22,
            x20 * h00 + x21 * h01 + x22 * h02, x20 * h01 + x21 * h11 + x22 * h12, x20 * h02 + x21 * h12 + x22 * h22)


@njit(cache=True, nogil=True, error_model="numpy")
def _pack_joint(m, o) -> int:
    """One palette matrix m (R, 4) -> its packed record o (16,) float32 (:func:`_pack_dq`'s layout), in
    float64 registers: the polar factor, for rigid joints and joints whose columns are orthogonal
    (axis-aligned scale) by one Newton-Schulz step from X (or X with its columns normalised), else by the
    scaled Newton iteration of :func:`_polar` (one division less per step, stopped by
    :data:`PACK_STEP`), the quaternion by a branch-free Shepperd (largest of
    the four diagonal combinations, chosen by selects), qd and S as :func:`_dq_joint`. Returns 1 where
    S is off the identity (by more than RIGID_TOLERANCE), 0 where not, -1 (o untouched) where the
    iteration meets a determinant outside 1e-100 .. 1e100 or does not converge in 40 steps (singular,
    degenerate or non-finite joints: the caller then takes :func:`_dq_joint`, the reference)."""
    a00, a01, a02 = np.float64(m[0, 0]), np.float64(m[0, 1]), np.float64(m[0, 2])
    a10, a11, a12 = np.float64(m[1, 0]), np.float64(m[1, 1]), np.float64(m[1, 2])
    a20, a21, a22 = np.float64(m[2, 0]), np.float64(m[2, 1]), np.float64(m[2, 2])
    det = a00 * (a11 * a22 - a12 * a21) - a01 * (a10 * a22 - a12 * a20) + a02 * (a10 * a21 - a11 * a20)
    sign = 1.0 if det >= 0.0 else -1.0  # a mirror goes into S: R stays a proper rotation
    x00, x01, x02 = sign * a00, sign * a01, sign * a02
    x10, x11, x12 = sign * a10, sign * a11, sign * a12
    x20, x21, x22 = sign * a20, sign * a21, sign * a22
    # Rigid (up to rounding): X^T X = I + E with |E| <= RIGID_FAST. Then R = X (I - E/2) (one Newton-Schulz
    # step; R^T R = I - 3/4 E^2, the polar factor X (I + E)^-1/2 to 3/8 E^2 ~ 1e-10) and S = R^T A =
    # sign (I + E/2) to E^2/2: no iteration, no division, no square root.
    e00, e11, e22, e01, e02, e12 = _gram_error(x00, x01, x02, x10, x11, x12, x20, x21, x22)
    rigid = max(max(abs(e00), abs(e11)), max(max(abs(e22), abs(e01)), max(abs(e02), abs(e12)))) <= RIGID_FAST
    converged = rigid
    if rigid:
        x00, x01, x02, x10, x11, x12, x20, x21, x22 = _schulz_step(x00, x01, x02, x10, x11, x12, x20, x21, x22,
                                                                  e00, e11, e22, e01, e02, e12)
    elif 1e-100 < abs(det) < 1e100:  # (the iteration's domain: outside it the reference's code runs)
        # Orthogonal columns (axis-aligned scale, A = R D with D positive diagonal, a mirror aside): the polar
        # factor is X with its columns normalised, A (A^T A)^-1/2 = A D^-1. Checked as Y^T Y = I + F within
        # RIGID_FAST for Y = X D^-1, then R = Y (I - F/2) as above: no iteration.
        n0 = np.sqrt(e00 + 1.0)
        n1 = np.sqrt(e11 + 1.0)
        n2 = np.sqrt(e22 + 1.0)
        if n0 > 1e-100 and n1 > 1e-100 and n2 > 1e-100:
            i0, i1, i2 = 1.0 / n0, 1.0 / n1, 1.0 / n2
            y00, y01, y02 = x00 * i0, x01 * i1, x02 * i2
            y10, y11, y12 = x10 * i0, x11 * i1, x12 * i2
            y20, y21, y22 = x20 * i0, x21 * i1, x22 * i2
            f00, f11, f22, f01, f02, f12 = _gram_error(y00, y01, y02, y10, y11, y12, y20, y21, y22)
            if max(max(abs(f00), abs(f11)), max(max(abs(f22), abs(f01)), max(abs(f02), abs(f12)))) <= RIGID_FAST:
                x00, x01, x02, x10, x11, x12, x20, x21, x22 = _schulz_step(y00, y01, y02, y10, y11, y12, y20, y21,
                                                                          y22, f00, f11, f22, f01, f02, f12)
                converged = True
    for _ in range(0 if converged else 40):
        # cofactors (det X times X^-T)
        c00, c01, c02, c10, c11, c12, c20, c21, c22 = cofactors3(x00, x01, x02, x10, x11, x12, x20, x21, x22)
        d = x00 * c00 + x01 * c01 + x02 * c02
        if not (1e-100 < abs(d) < 1e100):
            return -1
        nx = ((x00 * x00 + x01 * x01) + (x02 * x02 + x10 * x10)) + ((x11 * x11 + x12 * x12) + (x20 * x20 + x21 * x21)) \
            + x22 * x22
        nc = ((c00 * c00 + c01 * c01) + (c02 * c02 + c10 * c10)) + ((c11 * c11 + c12 * c12) + (c20 * c20 + c21 * c21)) \
            + c22 * c22
        # X <- (g X + X^-T / g) / 2 with g^4 = |X^-1|^2 / |X|^2 = nc / (d^2 nx)
        g = np.sqrt(np.sqrt(nc / (d * d * nx)))
        p = 0.5 * g
        q = 0.5 / (g * d)
        y00, y01, y02 = p * x00 + q * c00, p * x01 + q * c01, p * x02 + q * c02
        y10, y11, y12 = p * x10 + q * c10, p * x11 + q * c11, p * x12 + q * c12
        y20, y21, y22 = p * x20 + q * c20, p * x21 + q * c21, p * x22 + q * c22
        e0, e1, e2 = y00 - x00, y01 - x01, y02 - x02
        e3, e4, e5 = y10 - x10, y11 - x11, y12 - x12
        e6, e7, e8 = y20 - x20, y21 - x21, y22 - x22
        change = ((e0 * e0 + e1 * e1) + (e2 * e2 + e3 * e3)) + ((e4 * e4 + e5 * e5) + (e6 * e6 + e7 * e7)) + e8 * e8
        x00, x01, x02, x10, x11, x12, x20, x21, x22 = y00, y01, y02, y10, y11, y12, y20, y21, y22
        if change < PACK_STEP * PACK_STEP:
            converged = True
            break
    if not converged:
        return -1
    # quaternion (xyzw) of the rotation X: the largest of 4w^2, 4x^2, 4y^2, 4z^2 by selects, the other
    # three from the off-diagonal sums and differences (4 big times q), normalised, w >= 0
    tw = 1.0 + x00 + x11 + x22
    tx = 1.0 + x00 - x11 - x22
    ty = 1.0 - x00 + x11 - x22
    tz = 1.0 - x00 - x11 + x22
    wx, wy, wz = x21 - x12, x02 - x20, x10 - x01
    xy, xz, yz = x01 + x10, x02 + x20, x12 + x21
    use_w = (tw >= tx) & (tw >= ty) & (tw >= tz)
    use_x = (not use_w) & (tx >= ty) & (tx >= tz)
    use_y = (not use_w) & (not use_x) & (ty >= tz)
    qx = wx if use_w else (tx if use_x else (xy if use_y else xz))
    qy = wy if use_w else (xy if use_x else (ty if use_y else yz))
    qz = wz if use_w else (xz if use_x else (yz if use_y else tz))
    qw = tw if use_w else (wx if use_x else (wy if use_y else wz))
    # (4 big) q up to scale; normalised here (X is orthonormal to ~1e-9: the length is 4 big, about)
    f = 1.0 / np.sqrt(qx * qx + qy * qy + qz * qz + qw * qw)
    f = -f if qw < 0.0 else f  # canonical sign (w >= 0); and, & and this compile to selects, not branches
    qx, qy, qz, qw = qx * f, qy * f, qz * f, qw * f
    tx_, ty_, tz_ = np.float64(m[0, 3]), np.float64(m[1, 3]), np.float64(m[2, 3])
    if rigid:  # S = sign (I + E/2)
        s00, s11, s22 = sign * (1.0 + 0.5 * e00), sign * (1.0 + 0.5 * e11), sign * (1.0 + 0.5 * e22)
        s01 = s10 = sign * 0.5 * e01
        s02 = s20 = sign * 0.5 * e02
        s12 = s21 = sign * 0.5 * e12
    else:  # S = X^T A
        s00 = x00 * a00 + x10 * a10 + x20 * a20
        s01 = x00 * a01 + x10 * a11 + x20 * a21
        s02 = x00 * a02 + x10 * a12 + x20 * a22
        s10 = x01 * a00 + x11 * a10 + x21 * a20
        s11 = x01 * a01 + x11 * a11 + x21 * a21
        s12 = x01 * a02 + x11 * a12 + x21 * a22
        s20 = x02 * a00 + x12 * a10 + x22 * a20
        s21 = x02 * a01 + x12 * a11 + x22 * a21
        s22 = x02 * a02 + x12 * a12 + x22 * a22
    off = max(max(max(abs(s00 - 1.0), abs(s11 - 1.0)), max(abs(s22 - 1.0), abs(s01))),
              max(max(abs(s02), abs(s10)), max(abs(s12), max(abs(s20), abs(s21)))))
    scales = off > RIGID_TOLERANCE
    o[0], o[1], o[2], o[3] = qx, qy, qz, qw
    # qd = 0.5 * (t, 0) * q
    o[4] = 0.5 * (tx_ * qw + ty_ * qz - tz_ * qy)
    o[5] = 0.5 * (-tx_ * qz + ty_ * qw + tz_ * qx)
    o[6] = 0.5 * (tx_ * qy - ty_ * qx + tz_ * qw)
    o[7] = -0.5 * (tx_ * qx + ty_ * qy + tz_ * qz)
    o[8] = s00
    o[9] = 0.5 * (s01 + s10)
    o[10] = 0.5 * (s02 + s20)
    o[11] = s11
    o[12] = 0.5 * (s12 + s21)
    o[13] = s22
    o[14] = 1.0 if scales else 0.0  # not read by the blend (nor the shaders): the kernel choice
    o[15] = 0.0
    return 1 if scales else 0


@njit(cache=True, nogil=True)
def _pack_dq(palette, out):
    """palette (N, R, 4) -> out (N, 16) float32: qr, qd, (s00, s01, s02, s11), (s12, s22, scales, 0),
    S symmetrised (it is symmetric up to rounding: S = R^T A for the polar R); ``scales`` 1 where S is
    off the identity (by more than RIGID_TOLERANCE), else 0. Returns whether any joint scales. Each
    joint by :func:`_pack_joint`, or where that declines (singular joints) by :func:`_dq_joint`."""
    scales = False
    scratch = None
    for i in range(palette.shape[0]):
        got = _pack_joint(palette[i], out[i])
        if got >= 0:
            scales |= got == 1
            continue
        if scratch is None:
            scratch = np.empty((3, 3, 3))
        q = np.empty(4)
        qd = np.empty(4)
        a, r, s = scratch[0], scratch[1], scratch[2]
        joint_scales = _dq_joint(palette[i], a, r, s, q, qd)
        scales |= joint_scales
        o = out[i]
        for c in range(4):
            o[c] = q[c]
            o[4 + c] = qd[c]
        o[8] = s[0, 0]
        o[9] = 0.5 * (s[0, 1] + s[1, 0])
        o[10] = 0.5 * (s[0, 2] + s[2, 0])
        o[11] = s[1, 1]
        o[12] = 0.5 * (s[1, 2] + s[2, 1])
        o[13] = s[2, 2]
        o[14] = 1.0 if joint_scales else 0.0
        o[15] = 0.0
    return scales


@njit(cache=True, nogil=True)
def _pack_dq_one(palette, out):
    """:func:`_pack_dq` for one (J, R, 4) palette (any layout) into a C-contiguous (J, 16) ``out``; False
    (nothing written) where the shapes or out's strides do not fit (the caller then names the fault)."""
    if (palette.shape[1] != 3 and palette.shape[1] != 4) or palette.shape[2] != 4:
        return False
    if out.shape[0] != palette.shape[0] or out.shape[1] != DQ_STRIDE or out.strides[1] != 4 \
            or out.strides[0] != 4 * DQ_STRIDE:
        return False
    _pack_dq(palette, out)
    return True


def _packed_out(out, shape) -> np.ndarray:
    if out is None:
        return aligned_empty(shape)  # 64-byte records on cache lines (the kernels read them whole)
    if out.shape != shape or out.dtype != np.float32 or not out.flags.c_contiguous:
        raise SkeletalError(f"out must be C-contiguous float32 {shape}, got {out.dtype} {out.shape}")
    return out


def pack_dq_palette(palette: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Skin palette (J, 4, 4) / (J, 3, 4) row-major (any float dtype) -> the packed dual quaternion
    palette (J, 16) float32 that :func:`skin_dq_into` reads (convert once per frame, into a reused
    ``out``, when several meshes share a palette). Layout: see the module docstring.

    >>> m = np.eye(4, dtype=np.float32)[None]; m[0, :3, 3] = (2, 0, 0)
    >>> (pack_dq_palette(m)[0, :8] + 0.0).tolist()   # qr = identity, qd = t qr / 2 (+ 0.0: no -0.0)
    [0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    """
    if (type(out) is np.ndarray and type(palette) is np.ndarray and out.ndim == 2 and palette.ndim == 3
            and out.dtype is _F32_DTYPE and palette.dtype.kind == "f" and _pack_dq_one(palette, out)):
        return out  # the per-frame call: one palette into a reused buffer (~1 us less than below)
    palette = np.asarray(palette)
    if palette.ndim != 3:
        raise SkeletalError(f"palette must be float (J, 4, 4) or (J, 3, 4), got {palette.dtype} {palette.shape}")
    flat, _ = _flat_palette(palette)
    out = _packed_out(out, (palette.shape[0], DQ_STRIDE))
    _pack_dq(flat, out)
    return out


def gpu_dq_palette(palette: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Skin palette (..., J, 3|4, 4) row-major -> the shaders' DQS palette (..., J, 4, 4) float32:
    four vec4 rows per joint, ``qr``, ``qd``, ``(s00, s01, s02, s11)``, ``(s12, s22, scales, 0)`` (S is
    symmetric, so six numbers hold it): :func:`pack_dq_palette`'s layout. See
    ``render/shaders/skinning.glsl``."""
    flat, lead = _flat_palette(palette)
    out = _packed_out(out, lead + (GPU_ROWS, 4))
    _pack_dq(flat, out.reshape((-1, DQ_STRIDE)))
    return out
