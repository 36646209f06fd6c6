"""A closed triangle mesh of an implicit surface ``f(p) = 0`` (negative inside), by surface nets.

Used by :mod:`skeletal.demo` to mesh the built-in character's body once, as one smooth surface.

Surface nets, in three steps over a grid of samples of ``f``:

1. every grid cell whose eight corners are not all on one side gets one vertex: the mean of the
   points where ``f`` crosses zero along the cell's twelve edges (linear interpolation);
2. every grid edge along which ``f`` changes sign is shared by four cells, all with vertices: their
   four vertices make a quad (two triangles), turned to face outside;
3. each vertex is then moved onto the surface by Newton steps along the gradient of ``f``.

Everything is whole-array numpy; ``f`` is called a few times on (P, 3) arrays of points.

>>> import numpy as np
>>> sphere = lambda p: np.linalg.norm(p, axis=1) - 1.0
>>> positions, triangles = mesh_isosurface(sphere, (-1.2, -1.2, -1.2), (1.2, 1.2, 1.2), 0.1)
>>> bool(np.allclose(np.linalg.norm(positions, axis=1), 1.0, atol=1e-3))
True
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

Field = Callable[[np.ndarray], np.ndarray]  # (P, 3) points -> (P,) values, negative inside

#: The 8 corners of a cell (offsets in cells) and its 12 edges as corner pairs.
_CORNERS = np.array([[i, j, k] for i in (0, 1) for j in (0, 1) for k in (0, 1)], dtype=np.int64)
_EDGES = [(a, b) for a in range(8) for b in range(a + 1, 8) if np.abs(_CORNERS[a] - _CORNERS[b]).sum() == 1]


#: Tetrahedron directions for the gradient: sum_i f(p + eps t_i) t_i = 4 eps grad f + O(eps^3).
_TETRA = np.array([[1.0, -1.0, -1.0], [-1.0, -1.0, 1.0], [-1.0, 1.0, -1.0], [1.0, 1.0, 1.0]])


def gradient(field: Field, points: np.ndarray, eps: float = 1e-4) -> np.ndarray:
    """(P, 3) gradient of ``field`` at ``points`` from four samples around each (a tetrahedron),
    all evaluated in one call."""
    offsets = eps * _TETRA
    values = field((points[None, :, :] + offsets[:, None, :]).reshape(-1, 3)).reshape(4, len(points))
    return np.einsum("kp,kc->pc", values, _TETRA) / (4.0 * eps)


def _sample_near_surface(field: Field, lo: np.ndarray, counts: np.ndarray, cell: float) -> np.ndarray:
    """``field`` on the grid ``lo + cell * (i, j, k)``, ``counts`` points per axis: first on every
    other point, then on the rest only near the surface (where a coarse value is within a few cells
    of zero, or next to such a point); far from it a point takes its coarse neighbour's value, whose
    sign is all that matters there."""
    axes = [lo[a] + cell * np.arange(counts[a]) for a in range(3)]
    coarse_axes = [ax[::2] for ax in axes]
    coarse_grid = np.stack(np.meshgrid(*coarse_axes, indexing="ij"), axis=-1).reshape(-1, 3)
    coarse = field(coarse_grid).reshape(tuple(len(ax) for ax in coarse_axes))
    near = np.abs(coarse) < 2.5 * cell
    for axis in range(3):  # grow by one coarse point each way
        grown = near.copy()
        lead = [slice(None)] * 3
        trail = [slice(None)] * 3
        lead[axis], trail[axis] = slice(1, None), slice(None, -1)
        grown[tuple(lead)] |= near[tuple(trail)]
        grown[tuple(trail)] |= near[tuple(lead)]
        near = grown
    parent = [np.arange(counts[a]) // 2 for a in range(3)]
    ii, jj, kk = np.meshgrid(*parent, indexing="ij")
    values = coarse[ii, jj, kk]
    todo = near[ii, jj, kk]
    where = np.nonzero(todo)
    points = np.stack([axes[0][where[0]], axes[1][where[1]], axes[2][where[2]]], axis=1)
    values[where] = field(points)
    return values


def mesh_isosurface(field: Field, lo: Sequence[float], hi: Sequence[float], cell: float,
                    newton_steps: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """Positions (V, 3) float64 and outward-facing triangles (T, 3) int64 of ``field = 0`` inside the
    box ``lo``..``hi``, sampled every ``cell`` (the surface must not touch the box)."""
    lo = np.asarray(lo, dtype=np.float64)
    counts = np.floor((np.asarray(hi, dtype=np.float64) - lo) / cell).astype(np.int64) + 1
    values = _sample_near_surface(field, lo, counts, cell)
    if np.any(values[[0, -1], :, :] < 0) or np.any(values[:, [0, -1], :] < 0) or np.any(values[:, :, [0, -1]] < 0):
        raise ValueError("the surface reaches the edge of the sampling box")
    inside = values < 0
    nx, ny, nz = counts - 1  # cells per axis

    def corner(c: int) -> tuple[slice, slice, slice]:
        i, j, k = _CORNERS[c]
        return slice(i, i + nx), slice(j, j + ny), slice(k, k + nz)

    # 1. one vertex per cell the surface passes through: the mean of its edges' zero crossings.
    sums = np.zeros((nx, ny, nz, 3))
    hits = np.zeros((nx, ny, nz), dtype=np.int64)
    for a, b in _EDGES:
        fa, fb = values[corner(a)], values[corner(b)]
        crossing = inside[corner(a)] != inside[corner(b)]
        t = np.where(crossing, fa / np.where(crossing, fa - fb, 1.0), 0.0)
        point = _CORNERS[a][None, None, None, :] + t[..., None] * (_CORNERS[b] - _CORNERS[a])[None, None, None, :]
        sums += np.where(crossing[..., None], point, 0.0)
        hits += crossing
    active = hits > 0
    vertex_of = np.full((nx, ny, nz), -1, dtype=np.int64)
    cells = np.argwhere(active)
    vertex_of[active] = np.arange(len(cells))
    positions = lo + cell * (cells + sums[active] / hits[active][:, None])

    # 2. a quad around every sign-changing grid edge that is not on the box's faces.
    quads = []
    for axis in range(3):
        u, v = [a for a in range(3) if a != axis]
        a_slices = [slice(0, counts[0]), slice(0, counts[1]), slice(0, counts[2])]
        b_slices = list(a_slices)
        a_slices[axis] = slice(0, counts[axis] - 1)
        b_slices[axis] = slice(1, counts[axis])
        change = inside[tuple(a_slices)] != inside[tuple(b_slices)]
        idx = np.argwhere(change)
        idx = idx[(idx[:, u] >= 1) & (idx[:, v] >= 1) & (idx[:, u] < counts[u] - 1) & (idx[:, v] < counts[v] - 1)]
        ring = []
        for du, dv in ((-1, -1), (0, -1), (0, 0), (-1, 0)):
            c = idx.copy()
            c[:, u] += du
            c[:, v] += dv
            ring.append(vertex_of[c[:, 0], c[:, 1], c[:, 2]])
        quads.append(np.stack(ring, axis=1))
    quads = np.concatenate(quads)
    triangles = np.concatenate([quads[:, [0, 1, 2]], quads[:, [0, 2, 3]]])

    # 3. onto the surface: Newton steps along the gradient.
    for _ in range(newton_steps):
        g = gradient(field, positions)
        positions = positions - (field(positions) / np.maximum(np.einsum("ij,ij->i", g, g), 1e-12))[:, None] * g

    # Outward: each triangle's normal along the field's gradient at its centre.
    a, b, c = (positions[triangles[:, i]] for i in range(3))
    normal = np.cross(b - a, c - a)
    outward = np.einsum("ij,ij->i", normal, gradient(field, (a + b + c) / 3.0)) >= 0
    triangles = np.where(outward[:, None], triangles, triangles[:, [0, 2, 1]])
    area2 = np.linalg.norm(normal, axis=1)
    return positions, triangles[area2 > 1e-14].astype(np.int64)
