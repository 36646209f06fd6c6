"""A coarser index buffer for a triangle mesh, by vertex clustering (level of detail for moving views).

Contract of :func:`cluster_indices`: ``positions`` (V, 3) in bind space, ``indices`` (3T,) a triangle
list into them; the result (3T',) uint32 is a triangle list into the SAME vertices (each index one of
the input's vertex indices), so vertex buffers, skinning attributes and shaders are shared with the
full mesh. Triangles keep their winding (back-face culling still works).
"""

from __future__ import annotations

import numpy as np


def _cluster_map(positions: np.ndarray, lo: np.ndarray, cell: float, groups: np.ndarray | None) -> np.ndarray:
    """(V,) int64: each vertex's representative, the vertex of its (cell, group) nearest the cell's mean."""
    q = np.floor((positions - lo) / cell).astype(np.int64)
    q = np.clip(q, 0, (1 << 20) - 1)
    key = (q[:, 0] << 40) | (q[:, 1] << 20) | q[:, 2]
    if groups is not None:
        key = np.stack([key, np.asarray(groups, np.int64)], axis=1)
        _, cluster = np.unique(key, axis=0, return_inverse=True)
    else:
        _, cluster = np.unique(key, return_inverse=True)
    cluster = cluster.reshape(-1)
    n = int(cluster.max()) + 1
    count = np.bincount(cluster, minlength=n).astype(np.float64)
    mean = np.stack([np.bincount(cluster, positions[:, c], minlength=n) for c in range(3)], axis=1) / count[:, None]
    dist = np.einsum("ij,ij->i", positions - mean[cluster], positions - mean[cluster])
    order = np.lexsort((dist, cluster))  # by cluster, nearest first
    first = np.ones(len(order), bool)
    first[1:] = cluster[order[1:]] != cluster[order[:-1]]
    rep = np.empty(n, np.int64)
    rep[cluster[order[first]]] = order[first]
    return rep[cluster]


def _collapse(tri: np.ndarray, mapping: np.ndarray) -> np.ndarray:
    """Triangles (T, 3) mapped through ``mapping``, those with a repeated index dropped."""
    t = mapping[tri]
    keep = (t[:, 0] != t[:, 1]) & (t[:, 1] != t[:, 2]) & (t[:, 0] != t[:, 2])
    return t[keep]


def cluster_indices(positions: np.ndarray, indices: np.ndarray | None, reduction: float = 4.0,
                    groups: np.ndarray | None = None) -> np.ndarray:
    """A triangle list with about ``1/reduction`` of the triangles, by vertex clustering.

    The bind-pose ``positions`` (V, 3) are quantised to a grid of cubic cells spanning their bounding
    box; every vertex is replaced by its cell's representative (the existing vertex nearest the cell's
    mean, so the result indexes the same vertex buffers); triangles whose three indices are no longer
    distinct are dropped, and duplicates (same vertices, same winding) are removed. The cell size is
    searched (bisection on the number of cells along the box's longest side) so that the triangle count
    comes closest to ``T / reduction``. ``groups`` (V,) ints, optional: vertices of different groups
    never merge (the renderer passes each vertex's heaviest joint, so that no triangle comes to
    stretch between bones that move apart). ``indices`` None means ``arange(V)`` (an unindexed list).

    Returns (3T',) uint32; ``reduction <= 1`` or an empty mesh gives the input's triangles unchanged. A
    mesh with triangles never comes back empty: when every cell size collapses a tiny primitive (a
    12-vertex prop) to nothing, its own triangles are kept (T' >= 1 whenever T >= 1).

    Example::

        lod = cluster_indices(data.positions, data.indices, 4.0)  # ~1/4 of the triangles
    """
    p = np.asarray(positions, dtype=np.float64).reshape(-1, 3)
    idx = np.arange(len(p)) if indices is None else np.asarray(indices, dtype=np.int64).reshape(-1)
    tri = idx[: len(idx) // 3 * 3].reshape(-1, 3)
    if reduction <= 1.0 or len(tri) == 0 or len(p) == 0:
        return tri.reshape(-1).astype(np.uint32)
    lo, hi = p.min(axis=0), p.max(axis=0)
    longest = float((hi - lo).max())
    if not np.isfinite(longest) or longest <= 0.0:
        return tri.reshape(-1).astype(np.uint32)
    target = len(tri) / float(reduction)
    # Bisection on the divisions of the longest side: more divisions keep more triangles.
    best, best_err = tri, abs(len(tri) - target)
    a, b = 1, 4096
    while a <= b:
        n = (a + b) // 2
        cell = longest / n * (1.0 + 1e-9)
        t = _collapse(tri, _cluster_map(p, lo, cell, groups))
        err = abs(len(t) - target)
        if len(t) and err < best_err:  # never nothing: a tiny primitive keeps at least one triangle
            best, best_err = t, err
        if len(t) < target:
            a = n + 1
        else:
            b = n - 1
    # Duplicates: the same three vertices in the same winding (rotated so the smallest index leads).
    if len(best):
        shift = np.argmin(best, axis=1)
        rows = np.arange(len(best))[:, None]
        rotated = best[rows, (shift[:, None] + np.arange(3)[None]) % 3]
        _, first = np.unique(rotated, axis=0, return_index=True)
        best = best[np.sort(first)]
    return np.ascontiguousarray(best.reshape(-1), dtype=np.uint32)


def used_vertices(indices: np.ndarray, vertex_count: int) -> tuple[np.ndarray, np.ndarray]:
    """(kept (U,) int64 vertex indices in increasing order, the index list (3T',) uint32 renumbered
    into them) for a coarse index list that references only some of ``vertex_count`` vertices; a
    CPU-skinned coarse mesh then skins and uploads only those."""
    indices = np.asarray(indices, np.int64)
    kept = np.unique(indices)
    new_index = np.zeros(max(int(vertex_count), 1), np.int64)
    new_index[kept] = np.arange(len(kept))
    return kept, new_index[indices].astype(np.uint32)
