"""Rig order, world matrices, palettes and skinning against plain numpy references."""

import numpy as np
import pytest

from skeletal.anim.pose import skin_palette, world_matrices
from skeletal.quat import compose_trs, decompose_trs, matrix_to_quat, quat_to_matrix
from skeletal.anim.rig import Rig, parent_first_order
from skeletal.skinning.lbs import apply_morphs, normalize_weights, skin, skin_positions

from fixtures.rigs import random_quats, reference_world


def random_pose(rng, n):
    pose = np.zeros((n, 10))
    pose[:, 0:3] = rng.normal(size=(n, 3))
    pose[:, 3:7] = random_quats(rng, n)
    pose[:, 7:10] = rng.uniform(0.5, 2.0, size=(n, 3))
    return pose


# -- rig ---------------------------------------------------------------------------------------


def test_parent_first_order_puts_parents_first():
    parents = np.array([3, -1, 1, 1, 2, -1])
    order = parent_first_order(parents)
    position = {node: i for i, node in enumerate(order)}
    for node, p in enumerate(parents):
        if p >= 0:
            assert position[p] < position[node]
    rig = Rig.from_parents(list("abcdef"), parents)
    assert all(rig.parents[i] < i for i in range(len(rig)))
    assert rig.names[rig.index_of[0]] == "a"
    assert np.array_equal(rig.node_of[rig.index_of], np.arange(6))


def test_cycle_is_an_error():
    with pytest.raises(ValueError, match="cycle"):
        parent_first_order(np.array([-1, 2, 1]))


def test_descendants_mask():
    rig = Rig.from_parents(["root", "spine", "arm", "leg"], [-1, 0, 1, 0])
    mask = rig.descendants(rig.find("spine"))
    assert {rig.names[i] for i in np.flatnonzero(mask)} == {"spine", "arm"}


# -- transforms --------------------------------------------------------------------------------


def test_quaternion_matrix_round_trip():
    rng = np.random.default_rng(2)
    q = random_quats(rng, 100)
    back = matrix_to_quat(quat_to_matrix(q))
    np.testing.assert_allclose(np.abs(np.sum(back * q, axis=1)), 1.0, atol=1e-12)


def test_decompose_inverts_compose_including_mirror():
    rng = np.random.default_rng(3)
    pose = random_pose(rng, 20)
    pose[::3, 7] *= -1  # mirrored nodes
    m = compose_trs(pose[:, 0:3], pose[:, 3:7], pose[:, 7:10])
    t, q, s = decompose_trs(m)
    np.testing.assert_allclose(compose_trs(t, q, s), m, atol=1e-12)


@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-12), (np.float32, 1e-4)])
def test_world_matrices_match_reference(dtype, tol):
    rng = np.random.default_rng(4)
    parents = np.array([-1, 0, 1, 1, 0, 4, -1, 6])
    pose = random_pose(rng, len(parents))
    world = world_matrices(parents, pose.astype(dtype))
    assert world.dtype == dtype
    np.testing.assert_allclose(world, reference_world(parents, pose), atol=tol)


def test_world_matrices_batched():
    rng = np.random.default_rng(5)
    parents = np.array([-1, 0, 1])
    poses = np.stack([random_pose(rng, 3) for _ in range(6)]).reshape(2, 3, 3, 10)
    world = world_matrices(parents, poses)
    assert world.shape == (2, 3, 3, 4, 4)
    np.testing.assert_allclose(world[1, 2], reference_world(parents, poses[1, 2]), atol=1e-12)


def test_palette_is_world_times_inverse_bind():
    rng = np.random.default_rng(6)
    parents = np.array([-1, 0, 1, 2])
    world = reference_world(parents, random_pose(rng, 4))
    joints = np.array([3, 1])
    ibm = np.linalg.inv(reference_world(parents, random_pose(rng, 4))[[3, 1]])
    np.testing.assert_allclose(skin_palette(world, joints, ibm), world[joints] @ ibm, atol=1e-12)


def test_palette_of_bind_pose_is_identity():
    rng = np.random.default_rng(7)
    parents = np.array([-1, 0, 1])
    world = reference_world(parents, random_pose(rng, 3))
    joints = np.arange(3)
    np.testing.assert_allclose(skin_palette(world, joints, np.linalg.inv(world)), np.eye(4)[None].repeat(3, 0), atol=1e-12)


# -- skinning ----------------------------------------------------------------------------------


def test_normalize_weights():
    w = np.array([[2, 2, 0, 0], [0, 0, 0, 0], [0.5, 0, 0, 0.5]], np.float32)
    np.testing.assert_allclose(normalize_weights(w), [[0.5, 0.5, 0, 0], [1, 0, 0, 0], [0.5, 0, 0, 0.5]])


@pytest.mark.parametrize("influences", [1, 4, 8, 12])
def test_skinning_matches_reference(influences):
    rng = np.random.default_rng(influences)
    n_joints, v = 9, 500
    palette = compose_trs(rng.normal(size=(n_joints, 3)), random_quats(rng, n_joints), rng.uniform(0.5, 2, (n_joints, 3)))
    joints = rng.integers(0, n_joints, size=(v, influences)).astype(np.int32)
    weights = normalize_weights(rng.uniform(0, 1, size=(v, influences)).astype(np.float32))
    positions = rng.normal(size=(v, 3)).astype(np.float32)
    normals = rng.normal(size=(v, 3)).astype(np.float32)
    normals /= np.linalg.norm(normals, axis=1, keepdims=True)
    tangents = np.concatenate([rng.normal(size=(v, 3)), np.sign(rng.normal(size=(v, 1)))], axis=1).astype(np.float32)
    out_p, out_n, out_t = skin(palette, joints, weights, positions, normals, tangents)
    blended = np.einsum("vk,vkij->vij", weights.astype(np.float64), palette[joints])
    exp_p = np.einsum("vij,vj->vi", blended[:, :3, :3], positions) + blended[:, :3, 3]
    exp_n = np.einsum("vji,vj->vi", np.linalg.inv(blended[:, :3, :3]), normals)
    exp_n /= np.linalg.norm(exp_n, axis=1, keepdims=True)
    exp_t = np.einsum("vij,vj->vi", blended[:, :3, :3], tangents[:, :3])
    exp_t /= np.linalg.norm(exp_t, axis=1, keepdims=True)
    np.testing.assert_allclose(out_p, exp_p, atol=1e-9)
    np.testing.assert_allclose(out_n, exp_n, atol=1e-9)
    np.testing.assert_allclose(out_t[:, :3], exp_t, atol=1e-9)
    np.testing.assert_array_equal(out_t[:, 3], tangents[:, 3])
    np.testing.assert_allclose(skin_positions(palette, joints, weights, positions), exp_p, atol=1e-9)


def test_normals_stay_perpendicular_under_non_uniform_scale():
    palette = compose_trs(np.zeros((1, 3)), np.array([[0, 0, 0, 1.0]]), np.array([[4.0, 1.0, 1.0]]))
    # A surface along the diagonal x = y: tangent (1, 1, 0), normal (1, -1, 0)/sqrt2.
    tangent = np.array([[1.0, 1.0, 0.0, 1.0]], np.float32)
    normal = np.array([[1.0, -1.0, 0.0]], np.float32) / np.sqrt(2)
    _, n, t = skin(palette, np.zeros((1, 1), np.int32), np.ones((1, 1), np.float32), np.zeros((1, 3), np.float32), normal, tangent)
    assert abs(np.dot(n[0], t[0, :3])) < 1e-12
    assert abs(np.linalg.norm(n[0]) - 1) < 1e-12


def test_mirrored_joint_keeps_normals_outward():
    palette = compose_trs(np.zeros((1, 3)), np.array([[0, 0, 0, 1.0]]), np.array([[-1.0, 1.0, 1.0]]))
    _, n, _ = skin(palette, np.zeros((1, 1), np.int32), np.ones((1, 1), np.float32), np.array([[1.0, 0, 0]], np.float32), np.array([[1.0, 0, 0]], np.float32))
    np.testing.assert_allclose(n[0], [-1, 0, 0])  # the point moved to -x and still faces away from 0


def test_morphs_add_weighted_deltas():
    base = np.zeros((2, 3), np.float32)
    deltas = np.array([[[1, 0, 0], [0, 1, 0]], [[0, 0, 2], [0, 0, 0]]], np.float32)
    out = np.empty((2, 3))
    apply_morphs(base, deltas, np.array([0.5, 0.25]), out)
    np.testing.assert_allclose(out, [[0.5, 0, 0.5], [0, 0.5, 0]])


def test_quaternion_from_half_turns_about_each_axis():
    # Trace -1: only the x/y/z branches of the conversion are well conditioned here.
    for q in ([1.0, 0, 0, 0], [0, 1.0, 0, 0], [0, 0, 1.0, 0], [0.6, 0.8, 0, 0]):
        back = matrix_to_quat(quat_to_matrix(np.array(q)))
        assert abs(abs(np.dot(back, q)) - 1) < 1e-12


def test_decompose_sheared_and_zero_scale_matrices_give_unit_rotations():
    sheared = np.eye(4)
    sheared[0, 1] = 0.05
    flat = np.diag([1.0, 0.0, 2.0, 1.0])
    t, q, s = decompose_trs(np.stack([sheared, flat]))
    np.testing.assert_allclose(np.linalg.norm(q, axis=1), 1.0)
    np.testing.assert_allclose(s[1], [1, 0, 2])
