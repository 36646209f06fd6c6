"""Rotations, forward kinematics and skin palettes as differentiable torch functions.

Shapes (``...`` = any batch axes, first; N rig nodes; J skin joints):

* rotations: quaternions (..., 4) xyzw, 6D (..., 6) = the first two columns of the matrix, or
  matrices (..., 3, 3)
* local pose rows (..., N, 10) ``t(3) q(4) s(3)``; local and world matrices (..., N, 4, 4) row-major
* palettes (..., J, 4, 4) ``world[joints[j]] @ inverse_bind[j]``

Forward kinematics runs one batched matmul per depth level of the hierarchy (roots, their children,
...), never a Python loop over poses or joints: a 65-node Mixamo rig has about 20 levels. Each level
is a new tensor (no in-place writes), and the levels are put back into rig order with one gather.

>>> import torch
>>> from skeletal.rig import Rig
>>> rig = rig_tensors(Rig.from_parents(["a", "b"], [-1, 0]), dtype=torch.float64)
>>> pose = rig.rest.clone(); pose[:, 0] = 1.0           # both nodes move 1 along x
>>> world_matrices(rig, pose)[1, 0, 3].item()            # the child is 2 along x
2.0
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from ..anim.rig import Rig

# -- rotations -----------------------------------------------------------------------------------


def quat_to_matrix(q: Tensor) -> Tensor:
    """Rotation matrices (..., 3, 3) from quaternions (..., 4) xyzw.

    The same formula as the numba kernels (``1 - 2(y^2 + z^2)``, ...), exact for unit quaternions and
    not normalised here: call :func:`normalize_quat` first on quaternions that drift off unit length.
    """
    x, y, z, w = q.unbind(-1)
    x2, y2, z2 = x + x, y + y, z + z
    xx, xy, xz, yy, yz, zz = x * x2, x * y2, x * z2, y * y2, y * z2, z * z2
    wx, wy, wz = w * x2, w * y2, w * z2
    one = torch.ones_like(x)
    m = torch.stack([
        one - (yy + zz), xy - wz, xz + wy,
        xy + wz, one - (xx + zz), yz - wx,
        xz - wy, yz + wx, one - (xx + yy),
    ], dim=-1)
    return m.unflatten(-1, (3, 3))


def normalize_quat(q: Tensor, eps: float = 1e-12) -> Tensor:
    """Quaternions (..., 4) divided by their length (a zero quaternion stays zero)."""
    return q / q.norm(dim=-1, keepdim=True).clamp_min(eps)


def quat_mul(a: Tensor, b: Tensor) -> Tensor:
    """Hamilton product ``a * b`` (..., 4) xyzw, broadcasting; ``R(a * b) = R(a) @ R(b)``."""
    ax, ay, az, aw = a.unbind(-1)
    bx, by, bz, bw = b.unbind(-1)
    return torch.stack([
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
        aw * bw - ax * bx - ay * by - az * bz,
    ], dim=-1)


def matrix_to_quat(m: Tensor) -> Tensor:
    """Unit quaternions (..., 4) xyzw from rotation matrices (..., 3, 3), w >= 0 not enforced.

    Shepperd's method like :func:`skeletal.quat.matrix_to_quat`: every matrix uses the formula built
    on the largest of (m00, m11, m22, trace), so the square root stays away from zero (differentiable
    everywhere except where two candidates tie, where both give the same rotation).
    """
    m00, m11, m22 = m[..., 0, 0], m[..., 1, 1], m[..., 2, 2]
    trace = m00 + m11 + m22
    d01, d10 = m[..., 0, 1], m[..., 1, 0]
    d02, d20 = m[..., 0, 2], m[..., 2, 0]
    d12, d21 = m[..., 1, 2], m[..., 2, 1]
    big = torch.stack([1 + m00 - m11 - m22, 1 + m11 - m00 - m22, 1 + m22 - m00 - m11, 1 + trace], dim=-1)
    pick = torch.argmax(torch.stack([m00, m11, m22, trace], dim=-1), dim=-1, keepdim=True)  # (..., 1)
    cands = torch.stack([
        torch.stack([big[..., 0], d01 + d10, d02 + d20, d21 - d12], dim=-1),
        torch.stack([d01 + d10, big[..., 1], d12 + d21, d02 - d20], dim=-1),
        torch.stack([d02 + d20, d12 + d21, big[..., 2], d10 - d01], dim=-1),
        torch.stack([d21 - d12, d02 - d20, d10 - d01, big[..., 3]], dim=-1),
    ], dim=-2)  # (..., 4 candidates, 4)
    chosen = torch.gather(cands, -2, pick[..., None].expand(*pick.shape[:-1], 1, 4)).squeeze(-2)
    return normalize_quat(chosen)


def rot6d_to_matrix(d6: Tensor) -> Tensor:
    """Rotation matrices (..., 3, 3) from 6D rotations (..., 6) (Zhou et al.: two columns, Gram-Schmidt).

    Any 6-vector whose halves are not parallel maps to a proper rotation, continuously: the
    representation to optimise (quaternions and Euler angles are discontinuous somewhere).
    """
    a1, a2 = d6[..., 0:3], d6[..., 3:6]
    b1 = F.normalize(a1, dim=-1)
    b2 = F.normalize(a2 - (b1 * a2).sum(-1, keepdim=True) * b1, dim=-1)
    b3 = torch.linalg.cross(b1, b2, dim=-1)
    return torch.stack([b1, b2, b3], dim=-1)


def matrix_to_rot6d(m: Tensor) -> Tensor:
    """6D rotations (..., 6): the first two columns of (..., 3, 3) matrices."""
    return torch.cat([m[..., :, 0], m[..., :, 1]], dim=-1)


def quat_to_rot6d(q: Tensor) -> Tensor:
    """6D rotations (..., 6) from quaternions (..., 4) xyzw."""
    return matrix_to_rot6d(quat_to_matrix(q))


def rot6d_to_quat(d6: Tensor) -> Tensor:
    """Unit quaternions (..., 4) xyzw from 6D rotations (..., 6)."""
    return matrix_to_quat(rot6d_to_matrix(d6))


def rotation_matrices(rotations: Tensor, n: int | None = None) -> Tensor:
    """(..., 3, 3) matrices from rotations given as quaternions (..., 4), 6D (..., 6) or matrices.

    ``n`` (the node count), when given, checks the node axis.
    """
    if rotations.dim() >= 2 and rotations.shape[-2:] == (3, 3) and (n is None or rotations.dim() >= 3 and rotations.shape[-3] == n):
        out = rotations
    elif rotations.shape[-1] == 4:
        out = quat_to_matrix(rotations)
    elif rotations.shape[-1] == 6:
        out = rot6d_to_matrix(rotations)
    else:
        raise ValueError(f"rotations of shape {tuple(rotations.shape)}: expected (..., 4) xyzw quaternions, "
                         "(..., 6) 6D rotations or (..., 3, 3) matrices")
    if n is not None and (out.dim() < 3 or out.shape[-3] != n):
        raise ValueError(f"rotations of shape {tuple(rotations.shape)} do not have the rig's {n} nodes")
    return out


def compose_trs(t: Tensor, r: Tensor, s: Tensor | None = None) -> Tensor:
    """Row-major 4x4 matrices ``T @ R @ S`` (..., 4, 4) from t (..., 3), rotation matrices r (..., 3, 3)
    and scales s (..., 3) (None: 1)."""
    rs = r if s is None else r * s.unsqueeze(-2)
    batch = torch.broadcast_shapes(t.shape[:-1], rs.shape[:-2])
    top = torch.cat([rs.expand(batch + (3, 3)), t.unsqueeze(-1).expand(batch + (3, 1))], dim=-1)  # (..., 3, 4)
    bottom = torch.zeros(top.shape[:-2] + (1, 4), dtype=top.dtype, device=top.device)
    bottom = bottom + torch.tensor([0.0, 0.0, 0.0, 1.0], dtype=top.dtype, device=top.device)
    return torch.cat([top, bottom], dim=-2)


# -- the rig as tensors -------------------------------------------------------------------------


@dataclass(frozen=True)
class RigTensors:
    """A :class:`~skeletal.rig.Rig`'s hierarchy and rest pose as tensors, grouped by depth.

    Attributes:
        names: node names (rig order).
        parents: (N,) int64, ``parents[i] < i``, -1 for roots.
        rest: (N, 10) rest local pose ``t q s`` in the chosen dtype.
        levels: per depth d, (nodes (N_d,) int64 rig indices at depth d, ascending; parent_slots (N_d,)
            int64 position of each node's parent within level d-1's nodes; empty for d = 0).
        inverse_order: (N,) int64, the position of rig node i in the levels concatenated.
    """

    names: tuple[str, ...]
    parents: Tensor
    rest: Tensor
    levels: tuple[tuple[Tensor, Tensor], ...]
    inverse_order: Tensor

    @property
    def size(self) -> int:
        return len(self.names)

    def __len__(self) -> int:
        return len(self.names)

    @property
    def device(self) -> torch.device:
        return self.rest.device

    @property
    def dtype(self) -> torch.dtype:
        return self.rest.dtype

    def to(self, device=None, dtype: torch.dtype | None = None) -> "RigTensors":
        """A copy on ``device`` (indices too) with the rest pose in ``dtype``."""
        def move(x: Tensor) -> Tensor:
            return x.to(device=device)
        return RigTensors(
            self.names, move(self.parents), self.rest.to(device=device, dtype=dtype or self.rest.dtype),
            tuple((move(a), move(b)) for a, b in self.levels), move(self.inverse_order),
        )

    @classmethod
    def from_parents(cls, parents, names=None, rest=None, *, device=None, dtype: torch.dtype = torch.float32) -> "RigTensors":
        """From parent indices already in parent-first order (``parents[i] < i``)."""
        parents = np.asarray(parents.cpu() if isinstance(parents, Tensor) else parents, dtype=np.int64).reshape(-1)
        n = len(parents)
        if np.any(parents >= np.arange(n)):
            bad = int(np.flatnonzero(parents >= np.arange(n))[0])
            raise ValueError(f"parents are not parent-first: node {bad} has parent {parents[bad]} "
                             "(build the rig with skeletal.Rig.from_parents, which sorts)")
        depth = np.zeros(n, dtype=np.int64)
        for i in range(n):  # once per rig, not per pose
            if parents[i] >= 0:
                depth[i] = depth[parents[i]] + 1
        slot = np.zeros(n, dtype=np.int64)  # position of each node within its level
        levels = []
        order = []
        for d in range(int(depth.max()) + 1 if n else 0):
            nodes = np.flatnonzero(depth == d)
            slot[nodes] = np.arange(len(nodes))
            parent_slots = slot[parents[nodes]] if d > 0 else np.zeros(0, dtype=np.int64)
            levels.append((torch.as_tensor(nodes, device=device), torch.as_tensor(parent_slots, device=device)))
            order.append(nodes)
        order_arr = np.concatenate(order) if order else np.zeros(0, np.int64)
        inverse = np.empty(n, dtype=np.int64)
        inverse[order_arr] = np.arange(n)
        if rest is None:
            rest = np.zeros((n, 10))
            rest[:, 6] = 1.0
            rest[:, 7:10] = 1.0
        rest_t = torch.as_tensor(np.asarray(rest.cpu() if isinstance(rest, Tensor) else rest), dtype=dtype, device=device)
        names = tuple(names) if names is not None else tuple(f"node{i}" for i in range(n))
        return cls(names, torch.as_tensor(parents, device=device), rest_t, tuple(levels),
                   torch.as_tensor(inverse, device=device))


def rig_tensors(rig: Rig | RigTensors, *, device=None, dtype: torch.dtype = torch.float32) -> RigTensors:
    """A :class:`~skeletal.rig.Rig` as :class:`RigTensors` on ``device`` (rest pose in ``dtype``).

    Build it once and reuse it: the functions here accept a plain ``Rig`` too but then rebuild this.

    >>> import skeletal                                          # doctest: +SKIP
    >>> rig = rig_tensors(skeletal.load("Soldier.glb").rig, device="cuda")   # doctest: +SKIP
    """
    if isinstance(rig, RigTensors):
        return rig.to(device=device, dtype=dtype)
    return RigTensors.from_parents(rig.parents, rig.names, rig.rest, device=device, dtype=dtype)


def _as_rig(rig: Rig | RigTensors, like: Tensor) -> RigTensors:
    if isinstance(rig, RigTensors):
        if rig.parents.device != like.device or rig.rest.dtype != like.dtype:
            return rig.to(device=like.device, dtype=like.dtype)
        return rig
    return rig_tensors(rig, device=like.device, dtype=like.dtype)


# -- forward kinematics --------------------------------------------------------------------------


def forward_kinematics(rig: Rig | RigTensors, local: Tensor) -> Tensor:
    """World matrices (..., N, 4, 4) from local matrices (..., N, 4, 4): ``W[i] = W[parent[i]] @ L[i]``.

    One batched matmul per depth level; affine inputs give affine outputs (any 4x4 works).
    """
    rig = _as_rig(rig, local)
    n = len(rig)
    if local.shape[-3:] != (n, 4, 4):
        raise ValueError(f"local matrices of shape {tuple(local.shape)}, expected (..., {n}, 4, 4)")
    batch = local.shape[:-3]
    flat = local.reshape((-1, n, 4, 4))
    levels = []
    previous = None
    for d, (nodes, parent_slots) in enumerate(rig.levels):
        mats = flat.index_select(1, nodes)
        if d > 0:
            mats = torch.matmul(previous.index_select(1, parent_slots), mats)
        levels.append(mats)
        previous = mats
    world = torch.cat(levels, dim=1).index_select(1, rig.inverse_order)
    return world.reshape(batch + (n, 4, 4))


def local_matrices(pose: Tensor) -> Tensor:
    """Local matrices ``T @ R @ S`` (..., N, 4, 4) from pose rows (..., N, 10)."""
    return compose_trs(pose[..., 0:3], quat_to_matrix(pose[..., 3:7]), pose[..., 7:10])


def world_matrices(rig: Rig | RigTensors, pose: Tensor) -> Tensor:
    """World matrices (..., N, 4, 4) from local pose rows (..., N, 10) ``t q(xyzw) s``.

    The torch twin of :func:`skeletal.world_matrices`; quaternions are used as given.
    """
    if pose.shape[-1] != 10:
        raise ValueError(f"pose rows of shape {tuple(pose.shape)}, expected (..., N, 10) t(3) q(4) s(3)")
    return forward_kinematics(rig, local_matrices(pose))


def _rest_part(rig: RigTensors, part: slice, like: Tensor) -> Tensor:
    return rig.rest[:, part].to(device=like.device, dtype=like.dtype)


def compose_pose(rig: Rig | RigTensors, rotations: Tensor, translations: Tensor | None = None,
                 scales: Tensor | None = None) -> Tensor:
    """Local pose rows (..., N, 10) from rotations in any form (quaternions, 6D, matrices; converted to
    unit quaternions) and translations/scales (..., N, 3), the rig's rest values where None."""
    ref = rotations
    rig = _as_rig(rig, ref)
    n = len(rig)
    if rotations.shape[-1] == 4 and rotations.shape[-2] == n:
        q = rotations
    else:
        q = matrix_to_quat(rotation_matrices(rotations, n))
    t = translations if translations is not None else _rest_part(rig, slice(0, 3), q)
    s = scales if scales is not None else _rest_part(rig, slice(7, 10), q)
    batch = torch.broadcast_shapes(q.shape[:-1], t.shape[:-1], s.shape[:-1])
    return torch.cat([t.expand(batch + (3,)), q.expand(batch + (4,)), s.expand(batch + (3,))], dim=-1)


def world_from_rotations(rig: Rig | RigTensors, rotations: Tensor, translations: Tensor | None = None,
                         scales: Tensor | None = None) -> Tensor:
    """World matrices (..., N, 4, 4) from per-node rotations (quaternions (..., N, 4) xyzw, 6D
    (..., N, 6) or matrices (..., N, 3, 3)); translations and scales (..., N, 3) default to the
    rig's rest values (so optimising rotations alone keeps the bone lengths)."""
    rig = _as_rig(rig, rotations)
    n = len(rig)
    r = rotation_matrices(rotations, n)
    batch = r.shape[:-3]
    t = translations if translations is not None else _rest_part(rig, slice(0, 3), r).expand(batch + (n, 3))
    s = scales if scales is not None else _rest_part(rig, slice(7, 10), r).expand(batch + (n, 3))
    return forward_kinematics(rig, compose_trs(t, r, s))


def joint_positions(world: Tensor) -> Tensor:
    """World positions (..., N, 3) of nodes: the translation column of their world matrices."""
    return world[..., :3, 3]


def skin_palette(world: Tensor, joints: Tensor, inverse_bind: Tensor) -> Tensor:
    """Skin palettes (..., J, 4, 4) ``world[..., joints] @ inverse_bind`` from world (..., N, 4, 4).

    ``joints`` (J,) int64 rig indices, ``inverse_bind`` (J, 4, 4) (see :func:`skin_tensors`).
    """
    joints = joints.to(device=world.device)
    return torch.matmul(world.index_select(-3, joints), inverse_bind.to(device=world.device, dtype=world.dtype))
