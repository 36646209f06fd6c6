"""Skinning: morph targets, then linear blend skinning of positions, normals and tangents.

Contracts:

* ``joints`` (V, K) integer indices into the skin's joint list, ``weights`` (V, K) float32 that sum to
  1 per row (see :func:`normalize_weights`); K is any number of influences (4 per glTF set).
* ``palette`` (J, 4, 4) row-major affine matrices ``world[joint] @ inverse_bind``.
* Per vertex the K matrices are blended first and the vertex transformed once (ozz's order). Normals go
  through the blended matrix's inverse transpose (computed as its cofactor matrix, which is exact for
  non-uniform scale) and are renormalised; tangents' xyz go through the matrix itself and keep w.
* Morph targets come first, in bind space: ``p + sum_i w_i * dp_i`` (glTF).

>>> import numpy as np
>>> palette = np.eye(4)[None].repeat(2, 0); palette[1, 0, 3] = 2.0   # joint 1 moves 2 along x
>>> skin_positions(palette, np.array([[0, 1]]), np.array([[0.5, 0.5]], np.float32),
...                np.zeros((1, 3), np.float32))[0].tolist()
[1.0, 0.0, 0.0]
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange


def normalize_weights(weights: np.ndarray) -> np.ndarray:
    """Rows divided by their sum of absolute values; an all-zero row binds fully to its first influence.

    This is what three.js's ``normalizeSkinWeights`` does and what the glTF spec expects of exporters.
    """
    w = np.asarray(weights, dtype=np.float32)
    total = np.abs(w).sum(axis=1, keepdims=True, dtype=np.float64)
    out = np.where(total > 0, w / np.where(total > 0, total, 1.0), 0.0).astype(np.float32)
    zero = total[:, 0] == 0
    if zero.any():
        out[zero, 0] = 1.0
    return out


@njit(cache=True, parallel=True)
def apply_morphs(base, deltas, weights, out):
    """out = base + sum_i weights[i] * deltas[i]. base (V, C), deltas (T, V, C), weights (T,)."""
    n_targets = deltas.shape[0]
    for v in prange(base.shape[0]):
        for c in range(base.shape[1]):
            acc = np.float64(base[v, c])
            for i in range(n_targets):
                w = weights[i]
                if w != 0.0:
                    acc += w * deltas[i, v, c]
            out[v, c] = acc


@njit(cache=True, parallel=True)
def skin_kernel(palette, joints, weights, positions, normals, tangents, out_positions, out_normals, out_tangents):
    """Linear blend skinning of V vertices; normals/tangents are skipped when their arrays are empty.

    palette (J, 4, 4); joints, weights (V, K); positions (V, 3); normals (V, 3) or (0, 3);
    tangents (V, 4) or (0, 4); outputs shaped like their inputs (caller-owned, no allocation here).
    """
    do_normals = normals.shape[0] > 0
    do_tangents = tangents.shape[0] > 0
    n_influences = joints.shape[1]
    for v in prange(positions.shape[0]):
        # Blend the top 3 rows of the influencing matrices.
        m00 = m01 = m02 = m03 = 0.0
        m10 = m11 = m12 = m13 = 0.0
        m20 = m21 = m22 = m23 = 0.0
        for k in range(n_influences):
            w = np.float64(weights[v, k])
            if w == 0.0:
                continue
            p = palette[joints[v, k]]
            m00 += w * p[0, 0]
            m01 += w * p[0, 1]
            m02 += w * p[0, 2]
            m03 += w * p[0, 3]
            m10 += w * p[1, 0]
            m11 += w * p[1, 1]
            m12 += w * p[1, 2]
            m13 += w * p[1, 3]
            m20 += w * p[2, 0]
            m21 += w * p[2, 1]
            m22 += w * p[2, 2]
            m23 += w * p[2, 3]
        x = np.float64(positions[v, 0])
        y = np.float64(positions[v, 1])
        z = np.float64(positions[v, 2])
        out_positions[v, 0] = m00 * x + m01 * y + m02 * z + m03
        out_positions[v, 1] = m10 * x + m11 * y + m12 * z + m13
        out_positions[v, 2] = m20 * x + m21 * y + m22 * z + m23
        if do_normals:
            # Cofactor matrix = det * inverse transpose: right direction for any invertible M.
            c00 = m11 * m22 - m12 * m21
            c01 = m12 * m20 - m10 * m22
            c02 = m10 * m21 - m11 * m20
            c10 = m02 * m21 - m01 * m22
            c11 = m00 * m22 - m02 * m20
            c12 = m01 * m20 - m00 * m21
            c20 = m01 * m12 - m02 * m11
            c21 = m02 * m10 - m00 * m12
            c22 = m00 * m11 - m01 * m10
            det = m00 * c00 + m01 * c01 + m02 * c02
            nx = np.float64(normals[v, 0])
            ny = np.float64(normals[v, 1])
            nz = np.float64(normals[v, 2])
            rx = c00 * nx + c01 * ny + c02 * nz
            ry = c10 * nx + c11 * ny + c12 * nz
            rz = c20 * nx + c21 * ny + c22 * nz
            length = np.sqrt(rx * rx + ry * ry + rz * rz)
            if length > 0.0:
                s = 1.0 / length if det >= 0.0 else -1.0 / length
                rx *= s
                ry *= s
                rz *= s
            out_normals[v, 0] = rx
            out_normals[v, 1] = ry
            out_normals[v, 2] = rz
        if do_tangents:
            tx = np.float64(tangents[v, 0])
            ty = np.float64(tangents[v, 1])
            tz = np.float64(tangents[v, 2])
            rx = m00 * tx + m01 * ty + m02 * tz
            ry = m10 * tx + m11 * ty + m12 * tz
            rz = m20 * tx + m21 * ty + m22 * tz
            length = np.sqrt(rx * rx + ry * ry + rz * rz)
            if length > 0.0:
                rx /= length
                ry /= length
                rz /= length
            out_tangents[v, 0] = rx
            out_tangents[v, 1] = ry
            out_tangents[v, 2] = rz
            out_tangents[v, 3] = tangents[v, 3]


_NO_VEC3 = np.zeros((0, 3), np.float32)
_NO_VEC4 = np.zeros((0, 4), np.float32)


def skin_positions(palette, joints, weights, positions, out=None) -> np.ndarray:
    """Skinned positions (V, 3) in the palette's dtype; see the module docstring for the contract."""
    dtype = np.asarray(palette).dtype
    if out is None:
        out = np.empty((len(positions), 3), dtype=dtype)
    skin_kernel(palette, joints, weights, positions, _NO_VEC3, _NO_VEC4, out, _NO_VEC3.astype(dtype), _NO_VEC4.astype(dtype))
    return out


def skin(
    palette: np.ndarray,
    joints: np.ndarray,
    weights: np.ndarray,
    positions: np.ndarray,
    normals: np.ndarray | None = None,
    tangents: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Skin positions, and normals/tangents when given; returns ``(positions, normals, tangents)``
    in the palette's dtype (None for what was not given)."""
    dtype = np.asarray(palette).dtype
    v = len(positions)
    out_p = np.empty((v, 3), dtype=dtype)
    out_n = np.empty((v, 3), dtype=dtype) if normals is not None else _NO_VEC3.astype(dtype)
    out_t = np.empty((v, 4), dtype=dtype) if tangents is not None else _NO_VEC4.astype(dtype)
    skin_kernel(
        palette, joints, weights, positions,
        normals if normals is not None else _NO_VEC3,
        tangents if tangents is not None else _NO_VEC4,
        out_p, out_n, out_t,
    )
    return out_p, (out_n if normals is not None else None), (out_t if tangents is not None else None)
