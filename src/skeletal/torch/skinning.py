"""Skinning as differentiable torch functions: morph targets, linear blend and dual quaternion skinning.

Contracts (the same as :mod:`skeletal.skin`; ``...`` = batch axes, V vertices, K influences):

* ``palette`` (..., J, 4, 4) affine, row-major (:func:`skeletal.torch.skin_palette`);
* ``joints`` (V, K) integer indices into the palette, ``weights`` (V, K) or (..., V, K) rows summing
  to 1 (:func:`skeletal.normalize_weights`; :func:`skeletal.torch.mesh_tensors` gives them so);
* ``positions`` (V, 3) or (..., V, 3) bind-space (after morphs), ``normals`` likewise,
  ``tangents`` (V, 4) / (..., V, 4) with the handedness in w.

Linear blend skinning blends the K matrices, then transforms once; normals go through the blended
3x3's cofactor matrix (its inverse transpose times the determinant: exact under non-uniform scale,
what the numba kernels use) and are renormalised, flipped where the determinant is negative.

Dual quaternion skinning (Kavan et al. 2008) uses the scale-separated form, so palettes with scale
(or shear) stay exact where they are rigid and degrade gracefully where they are not: each palette
matrix ``A = [M | t]`` splits into a rotation R (the polar factor of M, of -M when det M < 0) and a
bind-space stretch ``S = R^T M`` (so ``M = R S``
holds exactly). Per vertex the stretches are blended linearly, the rigid parts as dual quaternions
(sign-aligned to the influence of largest weight, normalised): ``p' = R_b (S_b p) + t_b``. For rigid palettes
S = I and this is classic DQS; normals go through ``R_b`` times the cofactor of ``S_b``. This is the
method of the numba kernels in :mod:`skeletal.skin_dq` (:func:`skeletal.skin_dq.skin_dq`), which
the tests compare against.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .kinematics import matrix_to_quat, quat_mul, quat_to_matrix


def apply_morphs(base: Tensor, deltas: Tensor, weights: Tensor) -> Tensor:
    """``base + sum_i weights[..., i] * deltas[i]``: base (V, C), deltas (T, V, C), weights (..., T) ->
    (..., V, C) (glTF morph targets, in bind space, before skinning)."""
    return base + torch.einsum("...t,tvc->...vc", weights.to(base.dtype), deltas.to(base.dtype))


def _gather_rows(table: Tensor, joints: Tensor) -> Tensor:
    """table (..., J, C) indexed by joints (V, K) -> (..., V, K, C)."""
    joints = joints.to(device=table.device, dtype=torch.long)
    return table.index_select(-2, joints.reshape(-1)).unflatten(-2, tuple(joints.shape))


#: Above this many joints the dense (V, J) weight matrix is not used (memory V * J).
DENSE_MAX_JOINTS = 512


def weight_matrix(joints: Tensor, weights: Tensor, joint_count: int) -> Tensor:
    """Dense skinning weights (..., V, J) from influences (V, K) / (..., V, K) (repeated joints add up)."""
    joints = joints.to(device=weights.device, dtype=torch.long).expand(weights.shape)
    zeros = torch.zeros(weights.shape[:-1] + (joint_count,), dtype=weights.dtype, device=weights.device)
    return zeros.scatter_add(-1, joints, weights)


def blend_matrices(palette: Tensor, joints: Tensor, weights: Tensor) -> Tensor:
    """Per-vertex blended affine rows (..., V, 3, 4) = ``sum_k weights[v, k] * palette[joints[v, k], :3]``.

    With one set of weights (V, K) for all poses and up to :data:`DENSE_MAX_JOINTS` joints this is
    one matmul of the dense (V, J) weight matrix with the palettes' rows (BLAS: about 7x faster than
    gathering (..., V, K, 12) on the CPU for Soldier's 7k vertices x 65 joints); otherwise a gather.
    """
    rows = palette[..., :3, :].flatten(-2)  # (..., J, 12)
    weights = weights.to(rows.dtype)
    if weights.dim() == 2 and rows.shape[-2] <= DENSE_MAX_JOINTS:
        blended = torch.matmul(weight_matrix(joints, weights, rows.shape[-2]), rows)
    else:
        blended = (weights.unsqueeze(-1) * _gather_rows(rows, joints)).sum(-2)
    return blended.unflatten(-1, (3, 4))


def _apply3(m: Tensor, v: Tensor) -> Tensor:
    """(..., 3, 3) times (..., 3) vectors."""
    return (m * v.unsqueeze(-2)).sum(-1)


def _cofactor_apply(m: Tensor, n: Tensor) -> Tensor:
    """Normalised ``cof(m) @ n`` flipped where det(m) < 0 (the inverse transpose's direction)."""
    c0, c1, c2 = m[..., :, 0], m[..., :, 1], m[..., :, 2]
    x12 = torch.linalg.cross(c1, c2, dim=-1)
    x20 = torch.linalg.cross(c2, c0, dim=-1)
    x01 = torch.linalg.cross(c0, c1, dim=-1)
    out = x12 * n[..., 0:1] + x20 * n[..., 1:2] + x01 * n[..., 2:3]
    det = (c0 * x12).sum(-1, keepdim=True)
    sign = torch.where(det < 0, -1.0, 1.0).to(out.dtype)
    return sign * out / out.norm(dim=-1, keepdim=True).clamp_min(1e-30)


def _unit(v: Tensor) -> Tensor:
    return v / v.norm(dim=-1, keepdim=True).clamp_min(1e-30)


def _results(positions: Tensor, normals: Tensor | None, tangents: Tensor | None):
    if normals is None and tangents is None:
        return positions
    return positions, normals, tangents


def lbs(palette: Tensor, joints: Tensor, weights: Tensor, positions: Tensor, normals: Tensor | None = None,
        tangents: Tensor | None = None):
    """Linear blend skinning. Returns positions (..., V, 3); with ``normals`` or ``tangents`` given, the
    tuple ``(positions, normals, tangents)`` (None for what was not given).

    >>> import torch
    >>> palette = torch.eye(4).repeat(2, 1, 1); palette[1, 0, 3] = 2.0   # joint 1 moves 2 along x
    >>> lbs(palette, torch.tensor([[0, 1]]), torch.tensor([[0.5, 0.5]]), torch.zeros(1, 3)).tolist()
    [[1.0, 0.0, 0.0]]
    """
    m = blend_matrices(palette, joints, weights)
    linear = m[..., :3]
    out_p = _apply3(linear, positions.to(m.dtype)) + m[..., 3]
    out_n = _cofactor_apply(linear, normals.to(m.dtype)) if normals is not None else None
    out_t = None
    if tangents is not None:
        tangents = tangents.to(m.dtype)
        xyz = _unit(_apply3(linear, tangents[..., :3]))
        out_t = torch.cat([xyz, tangents[..., 3:4].expand(xyz.shape[:-1] + (1,))], dim=-1)
    return _results(out_p, out_n, out_t)


def _cofactor(m: Tensor) -> Tensor:
    """Cofactor matrices (..., 3, 3) (= det * inverse transpose): columns c1 x c2, c2 x c0, c0 x c1."""
    c0, c1, c2 = m[..., :, 0], m[..., :, 1], m[..., :, 2]
    return torch.stack([torch.linalg.cross(c1, c2, dim=-1), torch.linalg.cross(c2, c0, dim=-1),
                        torch.linalg.cross(c0, c1, dim=-1)], dim=-1)


def polar_rotation(m: Tensor, max_iterations: int = 30) -> Tensor:
    """The rotation factor R of the polar decomposition ``m = R S`` (S symmetric) of (..., 3, 3)
    matrices, as :mod:`skeletal.skin_dq` defines it: for det m < 0 the polar factor of -m (so R is
    proper and S carries the mirror). Scaled Newton iteration (Higham) ``X <- (g X + X^-T / g) / 2``,
    unrolled (differentiable; exact at once for a rotation); it stops when no entry changes by more
    than a few ulps."""
    det = torch.linalg.det(m)
    x = m * torch.where(det < 0, -1.0, 1.0).to(m.dtype)[..., None, None]
    tol = 8 * torch.finfo(m.dtype).eps
    for _ in range(max_iterations):
        cof = _cofactor(x)
        d = (x[..., :, 0] * cof[..., :, 0]).sum(-1)[..., None, None]
        d = torch.where(d.abs() > 1e-300, d, torch.ones_like(d))
        inv_t = cof / d
        g = (inv_t.square().sum((-1, -2)) / x.square().sum((-1, -2)).clamp_min(1e-300)).sqrt().sqrt()[..., None, None]
        nxt = 0.5 * (g * x + inv_t / g)
        done = bool((nxt - x).abs().max() <= tol) if nxt.numel() else True
        x = nxt
        if done:
            break
    return x


def palette_to_dual_quat(palette: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Split affine palettes (..., J, 4, 4) into unit dual quaternions and bind-space stretches, as
    :func:`skeletal.skin_dq.dual_quaternions` does.

    Returns ``real`` (..., J, 4) xyzw rotation (the polar factor of the 3x3 part; see
    :func:`polar_rotation`), ``dual`` (..., J, 4) = ``0.5 * (t, 0) * real``, and ``stretch``
    (..., J, 3, 3) = ``R^T M`` (scale, shear and any mirror; identity for rigid joints).
    """
    m = palette[..., :3, :3]
    t = palette[..., :3, 3]
    rot = polar_rotation(m)
    real = matrix_to_quat(rot)
    stretch = torch.matmul(quat_to_matrix(real).transpose(-1, -2), m)
    pure_t = torch.cat([t, torch.zeros_like(t[..., :1])], dim=-1)
    dual = 0.5 * quat_mul(pure_t, real)
    return real, dual, stretch


def dqs(palette: Tensor, joints: Tensor, weights: Tensor, positions: Tensor, normals: Tensor | None = None,
        tangents: Tensor | None = None):
    """Dual quaternion skinning (scale-separated; see the module docstring). Same arguments and results
    as :func:`lbs`. Rigid palettes move every vertex rigidly per joint and keep volume at twists where
    LBS collapses (the candy wrapper)."""
    real, dual, stretch = palette_to_dual_quat(palette)
    r_k = _gather_rows(real, joints)  # (..., V, K, 4)
    d_k = _gather_rows(dual, joints)
    s_k = _gather_rows(stretch.flatten(-2), joints)  # (..., V, K, 9)
    w = weights.to(real.dtype)
    # antipodality: every influence into the hemisphere of the pivot, the largest weight (first of equal ones)
    pivot = torch.argmax(w, dim=-1, keepdim=True)  # (..., V, 1)
    pivot = pivot.expand(r_k.shape[:-2] + (1,))
    r_pivot = torch.gather(r_k, -2, pivot.unsqueeze(-1).expand(pivot.shape + (4,)))
    sign = torch.where((r_k * r_pivot).sum(-1) < 0, -1.0, 1.0).to(real.dtype)
    ws = (w * sign).unsqueeze(-1)
    b_r = (ws * r_k).sum(-2)
    b_d = (ws * d_k).sum(-2)
    s_b = (w.unsqueeze(-1) * s_k).sum(-2).unflatten(-1, (3, 3))
    length = b_r.norm(dim=-1, keepdim=True).clamp_min(1e-30)
    b_r = b_r / length
    b_d = b_d / length
    # translation of a normalised dual quaternion with a non-orthogonal dual part: 2 (w_r v_d - w_d v_r + v_r x v_d)
    v_r, w_r = b_r[..., :3], b_r[..., 3:4]
    v_d, w_d = b_d[..., :3], b_d[..., 3:4]
    trans = 2.0 * (w_r * v_d - w_d * v_r + torch.linalg.cross(v_r, v_d, dim=-1))
    rot = quat_to_matrix(b_r)
    out_p = _apply3(rot, _apply3(s_b, positions.to(real.dtype))) + trans
    out_n = _apply3(rot, _cofactor_apply(s_b, normals.to(real.dtype))) if normals is not None else None
    out_t = None
    if tangents is not None:
        tangents = tangents.to(real.dtype)
        xyz = _unit(_apply3(rot, _apply3(s_b, tangents[..., :3])))
        out_t = torch.cat([xyz, tangents[..., 3:4].expand(xyz.shape[:-1] + (1,))], dim=-1)
    return _results(out_p, out_n, out_t)
