"""The float64 dual quaternion skinning reference: :func:`skin_dq` and its numba kernel.

The fast float32 kernels (:func:`skeletal.skinning.dqs.skin_dq_into`) are tested against it. Same
arguments as :func:`skeletal.skin`: ``palette`` (J, 3|4, 4) row-major matrices acting on column vectors,
``joints`` / ``weights`` (V, K), ``positions`` / ``normals`` (V, 3), ``tangents`` (V, 4) xyz + handedness.

>>> import numpy as np
>>> from skeletal.skinning.dq_reference import skin_dq
>>> p, n, t = skin_dq(np.eye(4)[None], np.zeros((1, 1), np.int32), np.ones((1, 1)), np.ones((1, 3)))
>>> p.tolist(), n, t
([[1.0, 1.0, 1.0]], None, None)
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..errors import SkeletalError
from .dq_palette import _cofactors, dual_quaternions


@njit(cache=True)
def _mat3_times(m, x, y, z):
    """(m @ (x, y, z)) for a 3x3 array ``m``, as three floats."""
    return (m[0, 0] * x + m[0, 1] * y + m[0, 2] * z,
            m[1, 0] * x + m[1, 1] * y + m[1, 2] * z,
            m[2, 0] * x + m[2, 1] * y + m[2, 2] * z)


@njit(cache=True)
def _rotate_by_unnormalised(qx, qy, qz, qw, inv, px, py, pz):
    """p rotated by q/|q| without normalising q: p + inv q x (q x p + w p), ``inv`` = 2 / |q|^2."""
    ux = qy * pz - qz * py + qw * px
    uy = qz * px - qx * pz + qw * py
    uz = qx * py - qy * px + qw * pz
    return px + inv * (qy * uz - qz * uy), py + inv * (qz * ux - qx * uz), pz + inv * (qx * uy - qy * ux)


@njit(cache=True)
def _skin_dq_reference(qr, qd, scale, joints, weights, positions, normals, tangents, out_p, out_n, out_t):
    do_n = normals.shape[0] > 0
    do_t = tangents.shape[0] > 0
    k_count = joints.shape[1]
    cof = np.empty((3, 3))
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
        px, py, pz = _mat3_times(s, np.float64(positions[v, 0]), np.float64(positions[v, 1]),
                                 np.float64(positions[v, 2]))
        rx, ry, rz = _rotate_by_unnormalised(qx, qy, qz, qw, inv, px, py, pz)
        out_p[v, 0] = rx + tx
        out_p[v, 1] = ry + ty
        out_p[v, 2] = rz + tz
        if do_n:  # by the cofactor matrix of the blended scale (inverse transpose times det), then rotated
            det = _cofactors(s, cof)
            px, py, pz = _mat3_times(cof, np.float64(normals[v, 0]), np.float64(normals[v, 1]),
                                     np.float64(normals[v, 2]))
            rx, ry, rz = _rotate_by_unnormalised(qx, qy, qz, qw, inv, px, py, pz)
            length = np.sqrt(rx * rx + ry * ry + rz * rz)
            f = 0.0
            if length > 0.0:
                f = 1.0 / length if det >= 0.0 else -1.0 / length
            out_n[v, 0] = rx * f
            out_n[v, 1] = ry * f
            out_n[v, 2] = rz * f
        if do_t:
            px, py, pz = _mat3_times(s, np.float64(tangents[v, 0]), np.float64(tangents[v, 1]),
                                     np.float64(tangents[v, 2]))
            rx, ry, rz = _rotate_by_unnormalised(qx, qy, qz, qw, inv, px, py, pz)
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
