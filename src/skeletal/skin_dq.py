"""Dual quaternion skinning (DQS): positions, normals and tangents, beside :mod:`skeletal.skin`'s LBS.

Linear blend skinning averages matrices, and an average of rotations is not a rotation: a joint
twisted 180 degrees against its neighbour collapses the skin between them to a line (the "candy
wrapper"). DQS (Kavan et al. 2008) blends unit dual quaternions instead and renormalises, which is
always a rigid transform: twists keep their volume, bends do not lose it at the elbow.

Contracts (as :mod:`skeletal.skin`, which this mirrors):

* ``palette`` (J, 4, 4) or (J, 3, 4) row-major affine matrices ``world[joint] @ inverse_bind``;
  ``joints``/``weights`` (V, K); positions/normals (V, 3), tangents (V, 4) (w = handedness, kept).
* Quaternions are xyzw. A joint's dual quaternion is ``qr + eps qd`` with ``qd = 0.5 * t * qr``, and
  the conversion gives ``qr.w >= 0``.
* Antipodality: q and -q are the same rotation, but blending them cancels. Per vertex, every
  influence's dual quaternion is sign-flipped into the hemisphere of the **pivot**, the influence
  with the largest weight (the first of equal ones), before the weighted sum.
* Scale: the **scale-separated** method (Kavan et al. 2008, section 4.5): each joint's 3x3 part is
  split ``A = R @ S`` (R a rotation from the polar decomposition, S = R^T A symmetric: scale and
  shear, with any mirroring in it). Per vertex the S matrices are blended linearly and applied first,
  in bind space; the rotations and translations are blended as dual quaternions and applied after:
  ``p' = DQ(sum w R,t) (sum w S) p``. Rigid palettes (every S within :data:`RIGID_TOLERANCE` of the
  identity) take a kernel that skips the S blend; the choice is made per call (per frame) from the
  palette. For rigid joints both methods reproduce any single joint's transform exactly; where
  joints scale differently the blend of S is linear, as LBS is.
* Normals: through the blended S's cofactor matrix (its inverse transpose times det, flipped when
  det < 0, as LBS), then rotated; tangents' xyz through S, then rotated. Both renormalised.

Two implementations, as for LBS:

* :func:`skin_dq`: the reference. Float64, any dtype in, the palette's dtype out.
* :func:`skin_dq_into`: the real-time path. Float32 into caller-owned outputs, the same argument
  contract as :func:`skeletal.skin.skin_into` (uint8/uint16/int32/int64 joints, strided rows,
  in-place allowed), LLVM IR code per influence count (1, 2, 4, 8 unrolled, any K looped), two
  vertices per 8-lane vector, parallel over chunks. The palette is converted once per call
  (:func:`pack_dq_palette`: J polar decompositions and quaternions), or given packed.

>>> import numpy as np
>>> palette = np.eye(4)[None].repeat(2, 0); palette[1, 0, 3] = 2.0   # joint 1 moves 2 along x
>>> p, _, _ = skin_dq(palette, np.array([[0, 1]]), np.array([[0.5, 0.5]], np.float32), np.zeros((1, 3)))
>>> np.round(p, 6).tolist()
[[1.0, 0.0, 0.0]]

Packed layout (:func:`pack_dq_palette`): (J, 32) float32 per joint (128 bytes, so a joint's index
times 128 is its address): ``qr`` (4), ``qd`` (4), the three columns of S each padded to 4 lanes
(12), ``[non_rigid, 0, 0, 0]``, then 8 zeros. The GPU palette (:func:`gpu_dq_palette`) is
(..., J, 4, 4): rows ``qr``, ``qd``, ``(s00, s01, s02, s11)``, ``(s12, s22, 0, 0)`` (S symmetrised).

Speed (``skeletal bench``, rows from :mod:`skeletal.bench_dq`; 100k vertices, 4 influences, positions
+ normals, one thread, the same run's ``skin_into`` as baseline): 0.66x LBS with a rigid palette,
0.60x with scaled joints, on a 2-vCPU VM shared with other jobs. The rigid loop is about 200
instructions per pair of vertices against LBS's 155: DQS blends 8 floats per influence instead of
12, but pays for the pivot, the hemisphere signs (four dot products by in-group hadds, their sign
bits xor-ed into the weights) and two quaternion rotations per vertex.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from .errors import SkeletalError
from .skin import CHUNK, PAD_MIN_VERTICES, _F32, _FM, _I32, _I64, _JOINT_DTYPES, _UNROLLED, _Emit, _Rows, \
    _check_rows, _vec

#: A joint whose S differs from the identity by at most this (max abs element) counts as rigid.
#: Float32 inverse-bind matrices of real models are orthonormal to about 1e-6.
RIGID_TOLERANCE = 1e-5
#: float32 values per joint in the packed CPU palette
DQ_STRIDE = 32
#: vec4 rows per joint in the GPU palette
GPU_ROWS = 4


# ---------------------------------------------------------------------------------------------
# palette conversion


@njit(cache=True, nogil=True)
def _polar(a, r, s):
    """a (3, 3) float64 -> r (proper rotation) and s = r^T a. Scaled Newton iteration for the polar
    factor (Higham): X <- (g X + X^-T / g) / 2, on -a when det(a) < 0 so that r stays a rotation."""
    det = (a[0, 0] * (a[1, 1] * a[2, 2] - a[1, 2] * a[2, 1]) - a[0, 1] * (a[1, 0] * a[2, 2] - a[1, 2] * a[2, 0])
           + a[0, 2] * (a[1, 0] * a[2, 1] - a[1, 1] * a[2, 0]))
    sign = 1.0 if det >= 0.0 else -1.0
    x = np.empty((3, 3))
    for i in range(3):
        for j in range(3):
            x[i, j] = sign * a[i, j]
    cof = np.empty((3, 3))
    for _ in range(40):
        # cofactor matrix = det * inverse^T
        cof[0, 0] = x[1, 1] * x[2, 2] - x[1, 2] * x[2, 1]
        cof[0, 1] = x[1, 2] * x[2, 0] - x[1, 0] * x[2, 2]
        cof[0, 2] = x[1, 0] * x[2, 1] - x[1, 1] * x[2, 0]
        cof[1, 0] = x[0, 2] * x[2, 1] - x[0, 1] * x[2, 2]
        cof[1, 1] = x[0, 0] * x[2, 2] - x[0, 2] * x[2, 0]
        cof[1, 2] = x[0, 1] * x[2, 0] - x[0, 0] * x[2, 1]
        cof[2, 0] = x[0, 1] * x[1, 2] - x[0, 2] * x[1, 1]
        cof[2, 1] = x[0, 2] * x[1, 0] - x[0, 0] * x[1, 2]
        cof[2, 2] = x[0, 0] * x[1, 1] - x[0, 1] * x[1, 0]
        d = x[0, 0] * cof[0, 0] + x[0, 1] * cof[0, 1] + x[0, 2] * cof[0, 2]
        if not (abs(d) > 1e-300):
            break  # singular: keep what we have (orthonormalised below)
        nx = 0.0
        ni = 0.0
        for i in range(3):
            for j in range(3):
                cof[i, j] /= d  # inverse transpose
                nx += x[i, j] * x[i, j]
                ni += cof[i, j] * cof[i, j]
        g = np.sqrt(np.sqrt(ni / nx))
        change = 0.0
        for i in range(3):
            for j in range(3):
                v = 0.5 * (g * x[i, j] + cof[i, j] / g)
                change = max(change, abs(v - x[i, j]))
                x[i, j] = v
        if change < 1e-15:
            break
    for i in range(3):
        for j in range(3):
            r[i, j] = x[i, j]
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
def _dq_convert(palette, qr, qd, scale, non_rigid):
    """palette (N, R, 4) -> qr, qd (N, 4), scale (N, 3, 3) float64, non_rigid (N,) bool."""
    a = np.empty((3, 3))
    r = np.empty((3, 3))
    s = np.empty((3, 3))
    q = np.empty(4)
    for n in range(palette.shape[0]):
        m = palette[n]
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
        qd[n, 0] = 0.5 * (tx * q[3] + ty * q[2] - tz * q[1])
        qd[n, 1] = 0.5 * (-tx * q[2] + ty * q[3] + tz * q[0])
        qd[n, 2] = 0.5 * (tx * q[1] - ty * q[0] + tz * q[3])
        qd[n, 3] = -0.5 * (tx * q[0] + ty * q[1] + tz * q[2])
        off = 0.0
        for i in range(4):
            qr[n, i] = q[i]
        for i in range(3):
            for j in range(3):
                scale[n, i, j] = s[i, j]
                off = max(off, abs(s[i, j] - (1.0 if i == j else 0.0)))
        non_rigid[n] = off > RIGID_TOLERANCE


def dual_quaternions(palette: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Skin palette (..., J, 4, 4) or (..., J, 3, 4) row-major -> ``(qr, qd, scale, non_rigid)``:
    unit rotation quaternions (..., J, 4) xyzw, dual parts (..., J, 4), the scale/shear matrices
    S = R^T A (..., J, 3, 3) and whether each joint's S is farther than :data:`RIGID_TOLERANCE` from
    the identity, all float64 (bool). ``A = R @ S`` with R the rotation of ``qr``.

    >>> m = np.eye(4); m[:3, 3] = (1, 2, 3)
    >>> qr, qd, s, nr = dual_quaternions(m[None])
    >>> qr[0].tolist(), (2 * qd[0]).tolist(), bool(nr[0])
    ([0.0, 0.0, 0.0, 1.0], [0.5, 1.0, 1.5, 0.0], False)
    """
    palette = np.asarray(palette)
    if palette.ndim < 3 or palette.shape[-2] not in (3, 4) or palette.shape[-1] != 4 or palette.dtype.kind != "f":
        raise SkeletalError(f"palette must be float (..., J, 4, 4) or (..., J, 3, 4), got {palette.dtype} {palette.shape}")
    lead = palette.shape[:-2]
    flat = np.ascontiguousarray(palette.reshape((-1,) + palette.shape[-2:]))
    n = len(flat)
    qr, qd = np.empty((n, 4)), np.empty((n, 4))
    scale, non_rigid = np.empty((n, 3, 3)), np.empty(n, np.bool_)
    if not np.all(np.isfinite(flat[:, :3])):
        raise SkeletalError("palette has non-finite values")
    _dq_convert(flat, qr, qd, scale, non_rigid)
    return qr.reshape(lead + (4,)), qd.reshape(lead + (4,)), scale.reshape(lead + (3, 3)), non_rigid.reshape(lead)


@njit(cache=True, nogil=True)
def _pack_dq(palette, out):
    """palette (N, R, 4) -> out (N, 24) float32 (see the module docstring's packed layout)."""
    n = palette.shape[0]
    qr = np.empty((n, 4))
    qd = np.empty((n, 4))
    scale = np.empty((n, 3, 3))
    non_rigid = np.empty(n, np.bool_)
    _dq_convert(palette, qr, qd, scale, non_rigid)
    for i in range(n):
        o = out[i]
        for c in range(4):
            o[c] = qr[i, c]
            o[4 + c] = qd[i, c]
        for c in range(3):
            o[8 + 4 * c] = scale[i, 0, c]
            o[9 + 4 * c] = scale[i, 1, c]
            o[10 + 4 * c] = scale[i, 2, c]
            o[11 + 4 * c] = 0.0
        o[20] = 1.0 if non_rigid[i] else 0.0
        for c in range(21, 32):
            o[c] = 0.0


def pack_dq_palette(palette: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Skin palette (J, 4, 4) / (J, 3, 4) row-major (any float dtype) -> the packed dual quaternion
    palette (J, 24) float32 that :func:`skin_dq_into` reads (convert once per frame, into a reused
    ``out``, when several meshes share a palette)."""
    palette = np.asarray(palette)
    if palette.ndim != 3 or palette.shape[1:] not in ((3, 4), (4, 4)) or palette.dtype.kind != "f":
        raise SkeletalError(f"palette must be float (J, 4, 4) or (J, 3, 4), got {palette.dtype} {palette.shape}")
    shape = (palette.shape[0], DQ_STRIDE)
    if out is None:
        out = np.empty(shape, np.float32)
    elif out.shape != shape or out.dtype != np.float32 or not out.flags.c_contiguous:
        raise SkeletalError(f"out must be C-contiguous float32 {shape}, got {out.dtype} {out.shape}")
    _pack_dq(palette, out)
    return out


@njit(cache=True, nogil=True)
def _gpu_pack(palette, out):
    """palette (N, R, 4) -> out (N, 4, 4) float32 rows: qr, qd, (s00, s01, s02, s11), (s12, s22, 0, 0)
    with S symmetrised (it is symmetric up to rounding: S = R^T A for the polar R)."""
    n = palette.shape[0]
    qr = np.empty((n, 4))
    qd = np.empty((n, 4))
    scale = np.empty((n, 3, 3))
    non_rigid = np.empty(n, np.bool_)
    _dq_convert(palette, qr, qd, scale, non_rigid)
    for i in range(n):
        o = out[i]
        s = scale[i]
        for c in range(4):
            o[0, c] = qr[i, c]
            o[1, c] = qd[i, c]
        o[2, 0] = s[0, 0]
        o[2, 1] = 0.5 * (s[0, 1] + s[1, 0])
        o[2, 2] = 0.5 * (s[0, 2] + s[2, 0])
        o[2, 3] = s[1, 1]
        o[3, 0] = 0.5 * (s[1, 2] + s[2, 1])
        o[3, 1] = s[2, 2]
        o[3, 2] = 0.0
        o[3, 3] = 0.0


def gpu_dq_palette(palette: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Skin palette (..., J, 3|4, 4) row-major -> the shaders' DQS palette (..., J, 4, 4) float32:
    four vec4 rows per joint, ``qr``, ``qd``, ``(s00, s01, s02, s11)``, ``(s12, s22, 0, 0)`` (S is
    symmetric, so six numbers hold it). See ``render/shaders/skinning.glsl``."""
    palette = np.asarray(palette)
    if palette.ndim < 3 or palette.shape[-2] not in (3, 4) or palette.shape[-1] != 4 or palette.dtype.kind != "f":
        raise SkeletalError(f"palette must be float (..., J, 4, 4) or (..., J, 3, 4), got {palette.dtype} {palette.shape}")
    shape = palette.shape[:-2] + (GPU_ROWS, 4)
    if out is None:
        out = np.empty(shape, np.float32)
    elif out.shape != shape or out.dtype != np.float32 or not out.flags.c_contiguous:
        raise SkeletalError(f"out must be C-contiguous float32 {shape}, got {out.dtype} {out.shape}")
    flat = np.ascontiguousarray(palette.reshape((-1,) + palette.shape[-2:]))
    _gpu_pack(flat, out.reshape((-1, GPU_ROWS, 4)))
    return out


# ---------------------------------------------------------------------------------------------
# the reference


@njit(cache=True)
def _skin_dq_reference(qr, qd, scale, joints, weights, positions, normals, tangents, out_p, out_n, out_t):
    do_n = normals.shape[0] > 0
    do_t = tangents.shape[0] > 0
    k_count = joints.shape[1]
    for v in range(positions.shape[0]):
        pivot = 0
        for k in range(1, k_count):
            if weights[v, k] > weights[v, pivot]:
                pivot = k
        jp = joints[v, pivot]
        b = np.zeros(8)
        s = np.zeros((3, 3))
        for k in range(k_count):
            w = np.float64(weights[v, k])
            j = joints[v, k]
            dot = qr[j, 0] * qr[jp, 0] + qr[j, 1] * qr[jp, 1] + qr[j, 2] * qr[jp, 2] + qr[j, 3] * qr[jp, 3]
            ws = -w if dot < 0.0 else w
            for c in range(4):
                b[c] += ws * qr[j, c]
                b[4 + c] += ws * qd[j, c]
            for r in range(3):
                for c in range(3):
                    s[r, c] += w * scale[j, r, c]
        n2 = b[0] * b[0] + b[1] * b[1] + b[2] * b[2] + b[3] * b[3]
        inv = 2.0 / n2 if n2 > 0.0 else 0.0
        qx, qy, qz, qw = b[0], b[1], b[2], b[3]
        dx, dy, dz, dw = b[4], b[5], b[6], b[7]
        # translation 2 (d q*)_xyz / |q|^2
        tx = inv * (qw * dx - dw * qx + qy * dz - qz * dy)
        ty = inv * (qw * dy - dw * qy + qz * dx - qx * dz)
        tz = inv * (qw * dz - dw * qz + qx * dy - qy * dx)
        x, y, z = np.float64(positions[v, 0]), np.float64(positions[v, 1]), np.float64(positions[v, 2])
        px = s[0, 0] * x + s[0, 1] * y + s[0, 2] * z
        py = s[1, 0] * x + s[1, 1] * y + s[1, 2] * z
        pz = s[2, 0] * x + s[2, 1] * y + s[2, 2] * z
        # p + inv * q x (q x p + w p)
        ux = qy * pz - qz * py + qw * px
        uy = qz * px - qx * pz + qw * py
        uz = qx * py - qy * px + qw * pz
        out_p[v, 0] = px + inv * (qy * uz - qz * uy) + tx
        out_p[v, 1] = py + inv * (qz * ux - qx * uz) + ty
        out_p[v, 2] = pz + inv * (qx * uy - qy * ux) + tz
        if do_n:
            c00 = s[1, 1] * s[2, 2] - s[1, 2] * s[2, 1]
            c01 = s[1, 2] * s[2, 0] - s[1, 0] * s[2, 2]
            c02 = s[1, 0] * s[2, 1] - s[1, 1] * s[2, 0]
            c10 = s[0, 2] * s[2, 1] - s[0, 1] * s[2, 2]
            c11 = s[0, 0] * s[2, 2] - s[0, 2] * s[2, 0]
            c12 = s[0, 1] * s[2, 0] - s[0, 0] * s[2, 1]
            c20 = s[0, 1] * s[1, 2] - s[0, 2] * s[1, 1]
            c21 = s[0, 2] * s[1, 0] - s[0, 0] * s[1, 2]
            c22 = s[0, 0] * s[1, 1] - s[0, 1] * s[1, 0]
            det = s[0, 0] * c00 + s[0, 1] * c01 + s[0, 2] * c02
            x, y, z = np.float64(normals[v, 0]), np.float64(normals[v, 1]), np.float64(normals[v, 2])
            px = c00 * x + c01 * y + c02 * z
            py = c10 * x + c11 * y + c12 * z
            pz = c20 * x + c21 * y + c22 * z
            ux = qy * pz - qz * py + qw * px
            uy = qz * px - qx * pz + qw * py
            uz = qx * py - qy * px + qw * pz
            rx = px + inv * (qy * uz - qz * uy)
            ry = py + inv * (qz * ux - qx * uz)
            rz = pz + inv * (qx * uy - qy * ux)
            length = np.sqrt(rx * rx + ry * ry + rz * rz)
            f = 0.0
            if length > 0.0:
                f = 1.0 / length if det >= 0.0 else -1.0 / length
            out_n[v, 0] = rx * f
            out_n[v, 1] = ry * f
            out_n[v, 2] = rz * f
        if do_t:
            x, y, z = np.float64(tangents[v, 0]), np.float64(tangents[v, 1]), np.float64(tangents[v, 2])
            px = s[0, 0] * x + s[0, 1] * y + s[0, 2] * z
            py = s[1, 0] * x + s[1, 1] * y + s[1, 2] * z
            pz = s[2, 0] * x + s[2, 1] * y + s[2, 2] * z
            ux = qy * pz - qz * py + qw * px
            uy = qz * px - qx * pz + qw * py
            uz = qx * py - qy * px + qw * pz
            rx = px + inv * (qy * uz - qz * uy)
            ry = py + inv * (qz * ux - qx * uz)
            rz = pz + inv * (qx * uy - qy * ux)
            length = np.sqrt(rx * rx + ry * ry + rz * rz)
            f = 1.0 / length if length > 0.0 else 0.0
            out_t[v, 0] = rx * f
            out_t[v, 1] = ry * f
            out_t[v, 2] = rz * f
            out_t[v, 3] = tangents[v, 3]


def skin_dq(
    palette: np.ndarray,
    joints: np.ndarray,
    weights: np.ndarray,
    positions: np.ndarray,
    normals: np.ndarray | None = None,
    tangents: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Dual quaternion skinning, float64 reference: like :func:`skeletal.skin.skin` (same arguments,
    ``(positions, normals, tangents)`` in the palette's dtype, None for what was not given)."""
    palette = np.asarray(palette)
    dtype = palette.dtype if palette.dtype.kind == "f" else np.float64
    qr, qd, scale, _ = dual_quaternions(palette)
    joints = np.asarray(joints)
    weights = np.asarray(weights)
    positions = np.asarray(positions)
    v = len(positions)
    if joints.ndim != 2 or joints.shape != weights.shape or len(joints) != v:
        raise SkeletalError(f"joints {joints.shape} and weights {weights.shape} must both be ({v}, K)")
    if v and (joints.min() < 0 or joints.max() >= len(qr)):
        raise SkeletalError(f"joint indices must be in 0..{len(qr) - 1}")
    no3, no4 = np.zeros((0, 3)), np.zeros((0, 4))
    out_p = np.empty((v, 3))
    out_n = np.empty((v, 3)) if normals is not None else no3
    out_t = np.empty((v, 4)) if tangents is not None else no4
    _skin_dq_reference(qr, qd, scale, joints, weights, positions,
                       no3 if normals is None else np.asarray(normals), no4 if tangents is None else np.asarray(tangents),
                       out_p, out_n, out_t)
    return (out_p.astype(dtype), out_n.astype(dtype) if normals is not None else None,
            out_t.astype(dtype) if tangents is not None else None)


# ---------------------------------------------------------------------------------------------
# the fast path: float32 LLVM IR kernels (the machinery of skeletal.skin's fast path)


def _masked_load3(b, ptr):
    """<4 x float> from 3 floats at ptr (lane 3 = 0; the memory after them is not read)."""
    m = ir.Constant(ir.VectorType(ir.IntType(1), 4), [1, 1, 1, 0])
    fnty = ir.FunctionType(_vec(4), [_vec(4).as_pointer(), _I32, m.type, _vec(4)])
    fn = cgutils.get_or_insert_function(b.module, fnty, "llvm.masked.load.v4f32.p0")
    return b.call(fn, [b.bitcast(ptr, _vec(4).as_pointer()), ir.Constant(_I32, 4), m,
                       ir.Constant(_vec(4), [0.0] * 4)])


def _emit_dq_vertices(context, b, A, args, v0, n_influences, k_const, n_vert: int, scaled: bool,
                      clamp: bool) -> None:
    """IR dual quaternion skinning of vertices v0 .. v0 + n_vert - 1 (n_vert 1 or 2); A/args: the
    kernel's argument types and values (packed palette, joints, weights, positions, normals,
    tangents, their three outputs)."""
    do_n = not isinstance(A[4], types.NoneType)
    do_t = not isinstance(A[5], types.NoneType)
    lanes = 4 * n_vert
    e = _Emit(b)
    pal = _Rows(context, b, A[0], args[0], DQ_STRIDE)
    jnt, wgt = (_Rows(context, b, A[i], args[i], k_const) for i in (1, 2))
    jmax = b.sub(pal.shape[0], ir.Constant(_I64, 1))
    pdata = b.bitcast(pal.data, _vec(8).as_pointer())
    verts = [b.add(v0, ir.Constant(_I64, i)) for i in range(n_vert)]
    zero8 = ir.Constant(_vec(8), [0.0] * 8)

    def record(jrow, k):
        """Index (in 8-lane units) of influence k's packed joint."""
        j = jnt.load(jrow, k)
        j = b.sext(j, _I64) if A[1].dtype.signed else b.zext(j, _I64)
        if clamp:
            j = b.select(b.icmp_unsigned("<=", j, jmax), j, jmax)
        return b.shl(j, ir.Constant(_I64, 2))  # DQ_STRIDE = 32 floats = 4 x 8 lanes

    def load8(at, extra=0):
        if extra:
            at = b.add(at, ir.Constant(_I64, extra))
        return b.load(b.gep(pdata, [at]), align=4)

    i8 = ir.VectorType(_I32, 8)
    sign_bits = ir.Constant(i8, [-0x80000000] * 8)

    def signed(d, pivot, w):
        """splat(w) (8 lanes), negated when d's rotation quaternion is in the other hemisphere from the
        pivot's: the sign bit of their dot product xor-ed into w's, all in vector registers."""
        m = e.mul(e.shuf(d, None, range(4)), e.shuf(pivot, None, range(4)))
        h = e.add(m, e.shuf(m, None, [2, 3, 0, 1]))
        dot = e.add(e.shuf(h, None, [0] * 8), e.shuf(h, None, [1] * 8))
        flip = b.and_(b.bitcast(dot, i8), sign_bits)
        return b.bitcast(b.xor(b.bitcast(e.splat(w, 8), i8), flip), _vec(8))

    # 1. Per vertex: the pivot (largest weight), then the hemisphere-corrected DQ sum (and the S sum).
    blended = []
    for v in verts:
        jrow, wrow = jnt.row(v), wgt.row(v)
        if k_const is not None:
            at = [record(jrow, k) for k in range(k_const)]
            ws = [wgt.load(wrow, k) for k in range(k_const)]
            ds = [load8(a) for a in at]
            pivot_at, pw = at[0], ws[0]
            for k in range(1, k_const):  # index selects (cmov), then one more load: no branches
                better = b.fcmp_ordered(">", ws[k], pw)
                pivot_at, pw = b.select(better, at[k], pivot_at), b.select(better, ws[k], pw)
            if k_const == 1:
                wks = [e.splat(ws[0], 8)]
            else:
                # Hemisphere signs, four influences at a time: dot products by in-group hadds, their
                # sign bits xor-ed into the weights, then each weight broadcast (no compares, no branches).
                pivot = e.shuf(load8(pivot_at), None, range(4))
                wks = []
                for g in range(0, k_const, 4):
                    group = range(g, min(g + 4, k_const))
                    dots = e.hsum([e.mul(e.shuf(ds[k], None, range(4)), pivot) for k in group])
                    wvec = ir.Constant(_vec(4), ir.Undefined)
                    for i, k in enumerate(group):
                        wvec = b.insert_element(wvec, ws[k], ir.Constant(_I32, i))
                    i4 = ir.VectorType(_I32, 4)
                    flip = b.and_(b.bitcast(dots, i4), ir.Constant(i4, [-0x80000000] * 4))
                    wsig = b.bitcast(b.xor(b.bitcast(wvec, i4), flip), _vec(4))
                    wks += [e.shuf(wsig, None, [i] * 8) for i in range(len(group))]
            acc = s_lo = s_hi = None
            for k in range(k_const):
                acc = e.mul(wks[k], ds[k]) if acc is None else e.fma(wks[k], ds[k], acc)
                if scaled:
                    wv = e.splat(ws[k], 8)
                    lo, hi = load8(at[k], 1), load8(at[k], 2)
                    s_lo = e.mul(wv, lo) if s_lo is None else e.fma(wv, lo, s_lo)
                    s_hi = e.mul(wv, hi) if s_hi is None else e.fma(wv, hi, s_hi)
        else:
            pw_ptr = cgutils.alloca_once_value(b, wgt.load(wrow, ir.Constant(_I64, 0)))
            pat_ptr = cgutils.alloca_once_value(b, record(jrow, ir.Constant(_I64, 0)))
            with cgutils.for_range(b, n_influences) as loop:
                w = wgt.load(wrow, loop.index)
                better = b.fcmp_ordered(">", w, b.load(pw_ptr))
                b.store(b.select(better, w, b.load(pw_ptr)), pw_ptr)
                b.store(b.select(better, record(jrow, loop.index), b.load(pat_ptr)), pat_ptr)
            pivot = load8(b.load(pat_ptr))
            acc_ptr = cgutils.alloca_once_value(b, zero8)
            lo_ptr = cgutils.alloca_once_value(b, zero8)
            hi_ptr = cgutils.alloca_once_value(b, zero8)
            with cgutils.for_range(b, n_influences) as loop:
                at = record(jrow, loop.index)
                w = wgt.load(wrow, loop.index)
                d = load8(at)
                b.store(e.fma(signed(d, pivot, w), d, b.load(acc_ptr)), acc_ptr)
                if scaled:
                    wv = e.splat(w, 8)
                    b.store(e.fma(wv, load8(at, 1), b.load(lo_ptr)), lo_ptr)
                    b.store(e.fma(wv, load8(at, 2), b.load(hi_ptr)), hi_ptr)
            acc, s_lo, s_hi = b.load(acc_ptr), b.load(lo_ptr), b.load(hi_ptr)
        blended.append((acc, s_lo, s_hi))

    # 2. Regroup: one 4-lane group per vertex.
    if n_vert == 1:
        (acc, s_lo, s_hi), = blended
        q, dual = e.shuf(acc, None, range(4)), e.shuf(acc, None, range(4, 8))
        if scaled:
            c0, c1, c2 = e.shuf(s_lo, None, range(4)), e.shuf(s_lo, None, range(4, 8)), e.shuf(s_hi, None, range(4))
    else:
        (acc_a, lo_a, hi_a), (acc_b, lo_b, hi_b) = blended
        first, second = [0, 1, 2, 3, 8, 9, 10, 11], [4, 5, 6, 7, 12, 13, 14, 15]
        q, dual = e.shuf(acc_a, acc_b, first), e.shuf(acc_a, acc_b, second)
        if scaled:
            c0, c1, c2 = e.shuf(lo_a, lo_b, first), e.shuf(lo_a, lo_b, second), e.shuf(hi_a, hi_b, first)

    pg = lambda pattern: e.per_group(lanes, pattern)
    yzx = lambda c: e.shuf(c, None, pg([1, 2, 0, 3]))
    vt = _vec(lanes)
    zero = ir.Constant(vt, [0.0] * lanes)

    w_q = e.shuf(q, None, pg([3, 3, 3, 3]))
    w_d = e.shuf(dual, None, pg([3, 3, 3, 3]))
    y_q = yzx(q)

    def cross_q(x):  # q.xyz x x.xyz (lane 3: 0 when x's lane 3 is 0 or q's)
        return yzx(e.sub(e.mul(q, yzx(x)), e.mul(y_q, x)))

    def load_rows(i):
        src = _Rows(context, b, A[i], args[i], 4 if i == 5 else 3)
        parts = [_masked_load3(b, src.ptr(src.row(v), 0)) for v in verts]
        return parts[0] if n_vert == 1 else e.shuf(parts[0], parts[1], range(8))

    def store_rows(i, vec):
        dst = _Rows(context, b, A[i], args[i], 4 if i == 8 else 3)
        for g, v in enumerate(verts):
            e.store3(vec if n_vert == 1 else e.shuf(vec, None, range(4 * g, 4 * g + 4)), dst.ptr(dst.row(v), 0))

    def scale_by_s(x):  # S x (S blended; padding lanes of its columns are 0)
        bx, by, bz = (e.shuf(x, None, pg([c] * 4)) for c in range(3))
        return e.linear3(c0, c1, c2, bx, by, bz)

    # 3. Normals (cofactor of S) and tangents (S) before rotation (which keeps lengths), so that one
    # in-group hadd sum gives |q|^2 and their squared lengths (and det S), and one rsqrt all inverses.
    squares, results, det_lane = [e.mul(q, q)], [], None
    if do_n:
        n = load_rows(4)
        if scaled:
            yc0, yc1, yc2 = yzx(c0), yzx(c1), yzx(c2)
            cross_u = lambda a_, ya, b_, yb: e.sub(e.mul(a_, yb), e.mul(ya, b_))
            xu, yu, zu = cross_u(c1, yc1, c2, yc2), cross_u(c2, yc2, c0, yc0), cross_u(c0, yc0, c1, yc1)
            bx, by, bz = (e.shuf(n, None, pg([c] * 4)) for c in range(3))
            n = yzx(e.linear3(xu, yu, zu, bx, by, bz))
            results.append((7, n, len(squares)))
            squares.append(e.mul(n, n))
            det_lane = len(squares)
            squares.append(e.mul(e.shuf(c0, None, pg([2, 0, 1, 3])), xu))  # det = c0 . (c1 x c2)
        else:
            results.append((7, n, len(squares)))
            squares.append(e.mul(n, n))
    if do_t:
        t = load_rows(5)
        if scaled:
            t = scale_by_s(t)
        results.append((8, t, len(squares)))
        squares.append(e.mul(t, t))
    sums = e.hsum(squares)
    sqrt = cgutils.get_or_insert_function(b.module, ir.FunctionType(vt, [vt]), f"llvm.sqrt.v{lanes}f32")
    rs = b.fdiv(ir.Constant(vt, [1.0] * lanes), b.call(sqrt, [sums], fastmath=_FM), flags=_FM)
    rs = b.select(b.fcmp_ordered(">", sums, zero), rs, zero)  # zero length stays zero
    # 2 / |q|^2: rotation by q/|q| and translation 2 (d q*) / |q|^2 both scale by it.
    r_q = e.shuf(rs, None, pg([0] * 4))
    inv = e.mul(e.add(r_q, r_q), r_q)

    def rotate(x):  # x + 2/|q|^2 q x (q x x + w x): rotation by q/|q| (x's lane 3 = 0)
        return e.fma(inv, cross_q(e.fma(w_q, x, cross_q(x))), x)

    # 4. Positions: p' = R(S p) + t, with R(x) + t = x + inv (q x (q x x + w x + d) + w d - dw q).
    p = load_rows(3)
    if scaled:
        p = scale_by_s(p)
    u = e.add(e.fma(w_q, p, cross_q(p)), dual)
    moved = e.sub(e.fma(w_q, dual, cross_q(u)), e.mul(w_d, q))
    store_rows(6, e.fma(inv, moved, p))

    # 5. Normals and tangents: rotated and normalised.
    for out, vec, lane in results:
        factor = e.shuf(rs, None, pg([lane] * 4))
        if out == 7 and det_lane is not None:  # mirrored blend of S: flip to keep normals outward
            det = e.shuf(sums, None, pg([det_lane] * 4))
            factor = b.select(b.fcmp_ordered("<", det, zero), b.fsub(zero, factor, flags=_FM), factor)
        store_rows(out, e.mul(rotate(vec), factor))
        if out == 8:  # tangent w (handedness) is copied
            src, dst = _Rows(context, b, A[5], args[5], 4), _Rows(context, b, A[8], args[8], 4)
            for v in verts:
                b.store(src.load(src.row(v), 3), dst.ptr(dst.row(v), 3), align=4)


@intrinsic
def _skin_dq_chunk(typingctx, palette, joints, weights, positions, normals, tangents,
                   out_positions, out_normals, out_tangents, chunk, kspec, scaled, unclamped):
    """DQ-skin vertices ``chunk * CHUNK`` .. ``+ CHUNK`` (clipped), two at a time. Compile-time
    choices as for :func:`skeletal.skin._skin_chunk`; ``scaled`` None (rigid palette: no S blend)
    or anything else (the scale-separated kernel)."""
    sig = types.void(palette, joints, weights, positions, normals, tangents, out_positions, out_normals,
                     out_tangents, chunk, kspec, scaled, unclamped)
    clamp = isinstance(unclamped, types.NoneType)
    k_const = len(kspec) if isinstance(kspec, types.BaseTuple) else None
    use_scale = not isinstance(scaled, types.NoneType)

    def codegen(context, b, signature, args):
        A = signature.args
        n = _Rows(context, b, A[3], args[3], 3).shape[0]
        kk = ir.Constant(_I64, k_const) if k_const is not None else _Rows(context, b, A[1], args[1]).shape[1]
        chunk_index = context.cast(b, args[9], A[9], types.int64)
        lo = b.mul(chunk_index, ir.Constant(_I64, CHUNK))
        hi = b.add(lo, ir.Constant(_I64, CHUNK))
        hi = b.select(b.icmp_signed("<", hi, n), hi, n)
        count = b.sub(hi, lo)
        with cgutils.for_range(b, b.ashr(count, ir.Constant(_I64, 1))) as loop:
            v = b.add(lo, b.shl(loop.index, ir.Constant(_I64, 1)))
            _emit_dq_vertices(context, b, A, args, v, kk, k_const, 2, use_scale, clamp)
        with b.if_then(b.icmp_signed("!=", b.and_(count, ir.Constant(_I64, 1)), ir.Constant(_I64, 0))):
            _emit_dq_vertices(context, b, A, args, b.sub(hi, ir.Constant(_I64, 1)), kk, k_const, 1, use_scale, clamp)
        return context.get_dummy_value()

    return sig, codegen


@njit(cache=True, parallel=True, nogil=True)
def _skin_dq_fast(palette, joints, weights, positions, normals, tangents, out_positions, out_normals, out_tangents,
                  kspec, scaled, unclamped):
    for c in prange((positions.shape[0] + CHUNK - 1) // CHUNK):
        _skin_dq_chunk(palette, joints, weights, positions, normals, tangents, out_positions, out_normals,
                       out_tangents, c, kspec, scaled, unclamped)


_scratch = {}


def _scratch_dq(rows: int) -> np.ndarray:
    import threading

    key = threading.get_ident()
    buf = _scratch.get(key)
    if buf is None or len(buf) < rows:
        buf = _scratch[key] = np.empty((max(rows, 256), DQ_STRIDE), np.float32)
    return buf


def _dq_kernel_palette(palette: np.ndarray, joints: np.ndarray, n: int) -> tuple[np.ndarray, bool, bool]:
    """The packed palette the kernel reads, whether joint indices must be clamped, whether any joint scales."""
    packed_given = (palette.ndim == 2 and palette.shape[1] == DQ_STRIDE and palette.dtype == np.float32
                    and palette.flags.c_contiguous)
    if not packed_given and not (palette.ndim == 3 and palette.shape[1:] in ((3, 4), (4, 4))
                                 and palette.dtype.kind == "f"):
        raise SkeletalError(f"palette must be packed (J, {DQ_STRIDE}) float32 C-contiguous (pack_dq_palette), "
                            f"or (J, 3, 4) / (J, 4, 4); got {palette.dtype} {palette.shape}")
    j = palette.shape[0]
    if j == 0:
        raise SkeletalError("palette has no joints")
    pad = joints.dtype == np.uint8 and n >= PAD_MIN_VERTICES and j < 256
    if packed_given and not pad:
        packed = palette
    else:
        buf = _scratch_dq(256 if pad else j)
        if packed_given:
            buf[:j] = palette
        else:
            pack_dq_palette(palette, buf[:j])
        if pad:
            buf[j:256] = buf[j - 1]
        packed = buf[: 256 if pad else j]
    clamp = not (joints.dtype == np.uint8 and len(packed) >= 256)
    return packed, clamp, bool(packed[:j, 20].any())


def skin_dq_into(
    palette: np.ndarray,
    joints: np.ndarray,
    weights: np.ndarray,
    positions: np.ndarray,
    normals: np.ndarray | None,
    tangents: np.ndarray | None,
    out_positions: np.ndarray,
    out_normals: np.ndarray | None = None,
    out_tangents: np.ndarray | None = None,
    *,
    scale: str = "auto",
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Real-time dual quaternion skinning in float32 into caller-owned arrays.

    Arguments as :func:`skeletal.skin.skin_into`, except ``palette``: (J, 4, 4) / (J, 3, 4) row-major,
    or packed (J, 24) float32 from :func:`pack_dq_palette`. ``scale``: "auto" (the scale-separated
    kernel when any joint of the palette scales or shears, the rigid kernel otherwise), "separate"
    (always the scale-separated kernel) or "ignore" (the rigid kernel: scale is dropped). Returns the
    three outputs. Errors are :class:`skeletal.SkeletalError`.

    >>> import numpy as np
    >>> pal = np.eye(4, dtype=np.float32)[None]; pal[0, :3, 3] = (0, 1, 0)
    >>> out = np.empty((1, 3), np.float32)
    >>> skin_dq_into(pal, np.zeros((1, 1), np.uint8), np.ones((1, 1), np.float32),
    ...              np.zeros((1, 3), np.float32), None, None, out)[0].tolist()
    [[0.0, 1.0, 0.0]]
    """
    if scale not in ("auto", "separate", "ignore"):
        raise SkeletalError(f"scale must be 'auto', 'separate' or 'ignore', got {scale!r}")
    palette = np.asarray(palette)
    positions = _check_rows("positions", positions, None, 3)
    n = positions.shape[0]
    if not isinstance(joints, np.ndarray) or joints.ndim != 2 or joints.shape[0] != n:
        raise SkeletalError(f"joints must be ({n}, K), got {getattr(joints, 'shape', type(joints).__name__)}")
    if joints.dtype not in _JOINT_DTYPES:
        raise SkeletalError(f"joints must be uint8, uint16, int32 or int64, got {joints.dtype}")
    k = joints.shape[1]
    if k == 0:
        raise SkeletalError("joints has no influences (K = 0)")
    _check_rows("weights", weights, n, k)
    if joints.shape[0] and joints.strides[1] != joints.itemsize:
        raise SkeletalError("joints: each row must be contiguous")
    _check_rows("out_positions", out_positions, n, 3, out=True)
    if normals is not None:
        _check_rows("normals", normals, n, 3)
        if out_normals is None:
            raise SkeletalError("normals given without out_normals")
        _check_rows("out_normals", out_normals, n, 3, out=True)
    elif out_normals is not None:
        raise SkeletalError("out_normals given without normals")
    if tangents is not None:
        _check_rows("tangents", tangents, n, 4)
        if out_tangents is None:
            raise SkeletalError("tangents given without out_tangents")
        _check_rows("out_tangents", out_tangents, n, 4, out=True)
    elif out_tangents is not None:
        raise SkeletalError("out_tangents given without tangents")
    packed, clamp, scales = _dq_kernel_palette(palette, joints, n)
    scaled = scale == "separate" or (scale == "auto" and scales)
    if n:
        _skin_dq_fast(packed, joints, weights, positions, normals, tangents, out_positions, out_normals, out_tangents,
                      _UNROLLED.get(k), True if scaled else None, None if clamp else True)
    return out_positions, out_normals, out_tangents
