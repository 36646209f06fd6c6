"""A primitive's vertex data as the skinning shader wants it (CPU side, plain numpy).

Contracts of :class:`PrimitiveData` (V vertices):

* ``positions``, ``normals`` (V, 3) float32 in bind space (skinned meshes) or node space (rigid ones);
  missing normals are computed (area-weighted face normals summed per vertex).
* ``uv`` (V, 2) float32, zeros when the primitive has no TEXCOORD.
* ``joints`` (V, influences) int32 skin-local joint indices, ``weights`` (V, influences) float32
  rows summing to 1, ``influences`` 4 or 8. A rigid primitive gets joint 0 with weight 1: its palette
  slot is the node's world matrix, so rigid and skinned meshes share one shader.
* ``indices`` (I,) uint32 or None (draw arrays); ``mode`` the GL primitive mode (4 = triangles).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MAX_INFLUENCES = 8


@dataclass
class PrimitiveData:
    positions: np.ndarray
    normals: np.ndarray
    uv: np.ndarray
    joints: np.ndarray
    weights: np.ndarray
    indices: np.ndarray | None
    mode: int
    skinned: bool

    @property
    def vertex_count(self) -> int:
        return int(self.positions.shape[0])


def influences_needed(max_k: int) -> int:
    """Attribute pairs to use for ``max_k`` influences per vertex: 4 or 8 (more are truncated)."""
    return 4 if max_k <= 4 else MAX_INFLUENCES


def fit_influences(joints: np.ndarray, weights: np.ndarray, influences: int) -> tuple[np.ndarray, np.ndarray]:
    """Influences (V, K) -> exactly (V, influences): pad with (joint 0, weight 0), or when K is larger
    keep the ``influences`` heaviest per vertex and renormalise them to sum 1."""
    joints = np.asarray(joints, dtype=np.int32)
    weights = np.asarray(weights, dtype=np.float32)
    v, k = joints.shape
    if k > influences:
        order = np.argsort(-weights, axis=1, kind="stable")[:, :influences]
        joints = np.take_along_axis(joints, order, axis=1)
        weights = np.take_along_axis(weights, order, axis=1)
        total = weights.sum(axis=1, keepdims=True)
        weights = np.where(total > 0, weights / np.where(total > 0, total, 1), weights).astype(np.float32)
        k = influences
    out_j = np.zeros((v, influences), np.int32)
    out_w = np.zeros((v, influences), np.float32)
    out_j[:, :k] = joints
    out_w[:, :k] = weights
    return out_j, out_w


def vertex_normals(positions: np.ndarray, indices: np.ndarray | None) -> np.ndarray:
    """Smooth normals (V, 3) float32 for a triangle list: area-weighted face normals summed per vertex."""
    p = np.asarray(positions, dtype=np.float64)
    tri = (np.arange(len(p)) if indices is None else np.asarray(indices, dtype=np.int64))
    tri = tri[: len(tri) // 3 * 3].reshape(-1, 3)
    normals = np.zeros_like(p)
    if len(tri):
        face = np.cross(p[tri[:, 1]] - p[tri[:, 0]], p[tri[:, 2]] - p[tri[:, 0]])
        for c in range(3):
            np.add.at(normals, tri[:, c], face)
    length = np.linalg.norm(normals, axis=1, keepdims=True)
    normals = np.where(length > 0, normals / np.where(length > 0, length, 1), np.array([0.0, 1.0, 0.0]))
    return normals.astype(np.float32)


def prepare(skinned_primitive, influences: int, texcoord: int = 0) -> PrimitiveData:
    """A :class:`skeletal.asset.SkinnedPrimitive` as shader attributes (see the module contract)."""
    src = skinned_primitive.source
    positions = np.ascontiguousarray(src.positions, dtype=np.float32)
    v = len(positions)
    if src.normals is not None:
        normals = np.ascontiguousarray(src.normals, dtype=np.float32)
    else:
        normals = vertex_normals(positions, src.indices if src.mode == 4 else None)
    uv = src.attributes.get(f"TEXCOORD_{texcoord}")
    uv = np.zeros((v, 2), np.float32) if uv is None else np.ascontiguousarray(uv, dtype=np.float32)[:, :2]
    skinned = skinned_primitive.joints is not None
    if skinned:
        joints, weights = fit_influences(skinned_primitive.joints, skinned_primitive.weights, influences)
    else:
        joints = np.zeros((v, influences), np.int32)
        weights = np.zeros((v, influences), np.float32)
        weights[:, 0] = 1.0
    indices = None if src.indices is None else np.ascontiguousarray(src.indices, dtype=np.uint32)
    return PrimitiveData(positions, normals, uv, joints, weights, indices, int(src.mode), skinned)
