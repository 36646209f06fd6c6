"""The built-in character's body as one smooth skinned surface (issue 21, item 9), and the surface
nets mesher it is made with (skeletal.isosurface)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from skeletal import demo
from skeletal.demo.isosurface import gradient, mesh_isosurface


def edge_counts(triangles: np.ndarray) -> Counter:
    return Counter(map(tuple, np.concatenate([triangles[:, [0, 1]], triangles[:, [1, 2]], triangles[:, [2, 0]]])))


def assert_closed_and_oriented(positions: np.ndarray, triangles: np.ndarray, euler: int) -> None:
    """Every directed edge once, its reverse once (closed, consistently oriented), V - E + F as given."""
    edges = edge_counts(triangles)
    assert max(edges.values()) == 1
    assert all((b, a) in edges for a, b in edges)
    assert len(positions) - len(edges) // 2 + len(triangles) == euler


def test_sphere_and_torus():
    sphere = lambda p: np.linalg.norm(p - 0.0123, axis=1) - 1.0
    positions, triangles = mesh_isosurface(sphere, (-1.2,) * 3, (1.3,) * 3, 0.05)
    assert_closed_and_oriented(positions, triangles, 2)
    assert np.abs(sphere(positions)).max() < 1e-6
    a, b, c = (positions[triangles[:, i]] for i in range(3))
    outward = np.einsum("ij,ij->i", np.cross(b - a, c - a), (a + b + c) / 3 - 0.0123)
    assert np.all(outward > 0)

    def torus(p):
        q = np.stack([np.hypot(p[:, 0], p[:, 2]) - 0.7, p[:, 1]], axis=1)
        return np.linalg.norm(q, axis=1) - 0.25

    positions, triangles = mesh_isosurface(torus, (-1.01, -0.4, -1.01), (1.03, 0.41, 1.02), 0.04)
    assert_closed_and_oriented(positions, triangles, 0)  # one handle


def test_gradient_of_a_linear_field_is_exact():
    field = lambda p: p @ np.array([1.0, -2.0, 0.5]) + 3.0
    np.testing.assert_allclose(gradient(field, np.random.default_rng(0).normal(size=(10, 3))),
                               np.tile([1.0, -2.0, 0.5], (10, 1)), atol=1e-8)


def test_a_surface_touching_the_box_is_refused():
    with pytest.raises(ValueError, match="edge of the sampling box"):
        mesh_isosurface(lambda p: np.linalg.norm(p, axis=1) - 1.0, (-0.5,) * 3, (0.5,) * 3, 0.1)


@pytest.fixture(scope="module")
def body():
    """The body's parts (shirt, trousers and the neck's skin) welded back by position."""
    parts = [p for p in demo._body_surface()]
    positions = np.concatenate([p.positions for p in parts])
    normals = np.concatenate([p.normals for p in parts])
    joints = np.concatenate([p.influences[0] for p in parts])
    weights = np.concatenate([p.influences[1] for p in parts])
    offsets = np.cumsum([0] + [len(p.positions) for p in parts])
    triangles = np.concatenate([p.triangles + o for p, o in zip(parts, offsets)])
    unique, first, inverse = np.unique(positions, axis=0, return_index=True, return_inverse=True)
    return {"parts": parts, "positions": positions, "normals": normals, "joints": joints, "weights": weights,
            "welded": unique, "triangles": inverse.reshape(-1)[triangles], "first": first, "inverse": inverse.reshape(-1)}


def test_the_body_is_one_closed_surface(body):
    assert sorted(p.material for p in body["parts"]) == ["shirt", "skin", "trousers"]
    assert_closed_and_oriented(body["welded"], body["triangles"], 2)  # one piece, no holes, no handles


def test_cut_vertices_agree_on_both_sides(body):
    # A vertex copied into two materials' primitives has the same normal and the same influences in both.
    rep = body["first"][body["inverse"]]
    np.testing.assert_array_equal(body["normals"], body["normals"][rep])
    np.testing.assert_array_equal(body["joints"], body["joints"][rep])
    np.testing.assert_array_equal(body["weights"], body["weights"][rep])
    assert len(body["positions"]) > len(body["welded"])  # there are cuts (belt, collar)


def test_the_belt_and_collar_are_straight(body):
    for part in body["parts"]:
        centre = part.positions[part.triangles].mean(axis=1)
        if part.material == "trousers":
            assert centre[:, 1].max() < demo.BELT
        if part.material == "skin":
            assert centre[:, 1].min() > demo.COLLAR


def test_normals_point_out_and_are_smooth(body):
    np.testing.assert_allclose(np.linalg.norm(body["normals"], axis=1), 1.0, atol=1e-6)
    for part in body["parts"]:
        a, b, c = (part.positions[part.triangles[:, i]] for i in range(3))
        face = np.cross(b - a, c - a)
        face /= np.linalg.norm(face, axis=1, keepdims=True)
        mean_normal = part.normals[part.triangles].mean(axis=1)
        cosine = np.einsum("ij,ij->i", face, mean_normal / np.linalg.norm(mean_normal, axis=1, keepdims=True))
        assert cosine.min() > 0.5 and np.median(cosine) > 0.99


def test_weights_blend_through_the_hip_and_the_armpit(body):
    positions, weights, joints = body["positions"], body["weights"].astype(np.float64), body["joints"]
    x, y = positions[:, 0], positions[:, 1]
    for joint, region in (("left_thigh", (x > 0.03) & (y > 0.75) & (y < 1.1)),
                          ("left_upper_arm", (x > 0.1) & (y > 1.2) & (y < 1.5))):
        share = np.where(joints[region] == demo._INDEX[joint], weights[region], 0.0).sum(axis=1)
        assert region.sum() > 100
        # From the torso to the limb the limb's share runs from none to all, with many vertices between.
        assert share.min() < 0.1 and share.max() > 0.9, joint
        assert np.sum((share > 0.1) & (share < 0.9)) > 30, joint


def test_arms_and_legs_stand_apart_below_the_armpit_and_crotch():
    # Below the blends the arms and the legs are their own round limbs: points between them are outside.
    between_arm_and_chest = np.array([[0.17, 1.25, 0.0], [-0.17, 1.25, 0.0], [0.2, 1.05, 0.0]])
    between_legs = np.array([[0.0, 0.7, 0.0], [0.0, 0.5, 0.01], [0.0, 0.3, 0.0]])
    assert np.all(demo.body_distance(between_arm_and_chest) > 0.005)
    assert np.all(demo.body_distance(between_legs) > 0.005)


def test_memberships_sum_to_one():
    points = np.random.default_rng(1).uniform((-0.4, 0.0, -0.2), (0.4, 1.7, 0.2), size=(500, 3))
    distance, membership = demo.body_field(points)
    np.testing.assert_allclose(membership.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_array_equal(distance, demo.body_distance(points))
