"""Level of detail by vertex clustering (:func:`skeletal.render.lod.cluster_indices`) on generated closed
meshes, and the renderer's ``lod`` option (headless, EGL; skips with the reason without a context)."""

from __future__ import annotations

import numpy as np
import pytest

from skeletal.render.lod import cluster_indices, used_vertices


def _sphere(rings=48, segments=96, center=(0.0, 0.0, 0.0)):
    """A closed UV sphere (radius 1), outward winding: positions (V, 3), indices (3T,)."""
    theta = np.linspace(0, np.pi, rings + 1)[1:-1]
    phi = np.linspace(0, 2 * np.pi, segments, endpoint=False)
    st, ct = np.sin(theta)[:, None], np.cos(theta)[:, None]
    ring = np.stack([st * np.cos(phi), ct * np.ones_like(phi), st * np.sin(phi)], axis=-1).reshape(-1, 3)
    positions = np.concatenate([[[0, 1, 0]], ring, [[0, -1, 0]]]) + np.asarray(center)
    top, bottom = 0, len(positions) - 1
    r = lambda i, j: 1 + i * segments + (j % segments)
    tris = []
    for j in range(segments):
        tris.append((top, r(0, j + 1), r(0, j)))
        tris.append((bottom, r(rings - 2, j), r(rings - 2, j + 1)))
    for i in range(rings - 2):
        for j in range(segments):
            a, b, c, d = r(i, j), r(i, j + 1), r(i + 1, j), r(i + 1, j + 1)
            tris += [(a, b, d), (a, d, c)]
    return positions.astype(np.float32), np.asarray(tris, np.uint32).reshape(-1)


def _volume(positions, indices):
    t = positions.astype(np.float64)[np.asarray(indices, np.int64).reshape(-1, 3)]
    return float(np.einsum("ij,ij->i", t[:, 0], np.cross(t[:, 1], t[:, 2])).sum() / 6.0)


def _open_edge_fraction(indices):
    """Fraction of (undirected) edges used by an odd number of triangles: 0 for a closed mesh."""
    t = np.asarray(indices, np.int64).reshape(-1, 3)
    edges = np.sort(np.concatenate([t[:, [0, 1]], t[:, [1, 2]], t[:, [2, 0]]]), axis=1)
    _, counts = np.unique(edges, axis=0, return_counts=True)
    return float((counts % 2 == 1).mean())


def test_clustering_reduces_a_closed_sphere_and_keeps_it_closed():
    positions, indices = _sphere()
    assert _volume(positions, indices) > 0 and _open_edge_fraction(indices) == 0.0
    lod = cluster_indices(positions, indices, 4.0)
    assert lod.dtype == np.uint32 and lod.ndim == 1 and len(lod) % 3 == 0
    ratio = len(indices) / len(lod)
    assert 3.0 < ratio < 5.5, ratio  # about the asked-for 4x
    assert lod.max() < len(positions)  # existing vertices only: inside the bounding box by construction
    used = positions[lod]
    assert (used >= positions.min(axis=0)).all() and (used <= positions.max(axis=0)).all()
    t = lod.reshape(-1, 3)
    assert ((t[:, 0] != t[:, 1]) & (t[:, 1] != t[:, 2]) & (t[:, 0] != t[:, 2])).all()  # no degenerate
    rotated = np.array([np.roll(row, -int(np.argmin(row))) for row in t])
    assert len(np.unique(rotated, axis=0)) == len(t)  # no duplicates
    assert _open_edge_fraction(lod) < 0.03  # mostly closed
    # Winding kept (outward): the enclosed volume stays close to the full sphere's.
    assert _volume(positions, lod) == pytest.approx(_volume(positions, indices), rel=0.15)
    # Stronger reduction, fewer triangles; 1 or less: unchanged.
    assert len(cluster_indices(positions, indices, 10.0)) < len(lod)
    np.testing.assert_array_equal(cluster_indices(positions, indices, 1.0), indices)


def test_groups_never_merge_and_unindexed_lists_work():
    a_pos, a_idx = _sphere(24, 48)
    b_pos, b_idx = _sphere(24, 48, center=(1.2, 0.0, 0.0))  # overlapping the first sphere's cells
    positions = np.concatenate([a_pos, b_pos])
    indices = np.concatenate([a_idx, b_idx + len(a_pos)])
    groups = np.repeat([0, 1], [len(a_pos), len(b_pos)])
    lod = cluster_indices(positions, indices, 4.0, groups).reshape(-1, 3)
    g = groups[lod]
    assert (g == g[:, :1]).all()  # no triangle joins the two groups
    assert len(indices) / lod.size > 2.5
    flat = positions[indices]  # the same mesh as an unindexed triangle list
    lod_flat = cluster_indices(flat, None, 4.0)
    assert lod_flat.max() < len(flat) and len(flat) / len(lod_flat) > 2.5
    assert len(cluster_indices(np.zeros((0, 3)), None, 4.0)) == 0


def test_renderer_lod_draws_the_same_silhouette_with_fewer_triangles():
    try:
        from skeletal.render.context import shared_context

        ctx = shared_context()
    except Exception as exc:  # moderngl missing, no EGL
        pytest.skip(f"no headless OpenGL context: {exc}")
    from skeletal.demo import demo_asset
    from skeletal.render.renderer import Renderer

    from skeletal.editor.model import EditDocument

    asset = demo_asset()
    doc = EditDocument(asset, "x.glb")
    world = doc.world(doc.pose([c.name for c in doc.clips].index("walk"), 0.3))
    images, counts, vertices, heat = {}, {}, {}, {}
    joint = asset.rig.names[int(asset.skins[0].joints[1])]
    for lod in (1.0, 4.0):
        with Renderer(asset, 240, 180, samples=0, ctx=ctx, cull=True, cpu_skinning=True, lod=lod,
                      ground=False) as r:
            images[lod] = r.draw(world).astype(np.int32)
            counts[lod] = sum(len(p.data.indices) if p.data.indices is not None else p.data.vertex_count
                              for p in r._primitives)
            vertices[lod] = sum(p.data.vertex_count for p in r._primitives)
            heat[lod] = r.draw(world, weights_joint=joint).astype(np.int32)  # per-vertex heat, kept vertices
    assert counts[4.0] < counts[1.0] / 2.5, counts
    assert vertices[4.0] < vertices[1.0] / 1.5, vertices  # CPU skinning: only the vertices drawn
    assert np.abs(heat[4.0] - images[4.0]).max() > 50  # the heat map shows
    background = images[1.0][0, 0]
    full = np.abs(images[1.0] - background).max(axis=2) > 10
    coarse = np.abs(images[4.0] - background).max(axis=2) > 10
    iou = (full & coarse).sum() / max((full | coarse).sum(), 1)
    assert full.sum() > 500 and iou > 0.85, iou


def test_used_vertices_renumbers_a_coarse_index_list():
    positions, indices = _sphere(12, 24)
    lod = cluster_indices(positions, indices, 4.0)
    kept, renumbered = used_vertices(lod, len(positions))
    assert np.all(np.diff(kept) > 0) and len(kept) < len(positions)
    assert renumbered.dtype == np.uint32 and renumbered.max() == len(kept) - 1
    np.testing.assert_array_equal(positions[kept][renumbered], positions[lod])  # the same triangles


def test_a_tiny_primitive_is_never_reduced_to_nothing():
    """A 12-vertex prop (20 triangles), a 48-vertex tube and a single triangle keep at least one triangle
    at any reduction (the editor's moving view once uploaded an empty index buffer for them)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from fixtures.models import _icosahedron, tube

    ico, ico_tris = _icosahedron(0.02, (0.0, 0.0, 0.0))
    pos, _, tris = tube(0.0, 0.05, 0.015, rings=4, segments=12)
    for positions, indices in ((ico, ico_tris), (pos, tris), (ico[:3], np.arange(3))):
        for reduction in (2.0, 4.0, 16.0, 1000.0):
            for groups in (None, np.zeros(len(positions), np.int64)):
                lod = cluster_indices(positions, indices, reduction, groups)
                assert 3 <= len(lod) <= len(indices) and len(lod) % 3 == 0, (len(positions), reduction)
                kept, renumbered = used_vertices(lod, len(positions))
                assert len(kept) >= 3 and len(renumbered) == len(lod)
