"""skin_dq_into's ``pairs`` (:func:`dq_hemisphere_pairs`): the joint pairs a mesh blends, found once; per
frame the palette's signs are chosen so that every pair shares a hemisphere, and the signed-record kernel
then runs without per-vertex sign work. The result must be the sign table's, bit for bit, on rig-like
palettes (rigid, axis-aligned and sheared scale, large turns), and frames whose pairs cannot share one
hemisphere fall back to the table."""

import numpy as np
import pytest

from skeletal import SkeletalError
from skeletal.skinning.lbs import CHUNK, LANES
from skeletal.skinning.dqs import (MASK_SHARE, PAIR_JOINTS, SIGNED_MIN_VERTICES, _failing_runs, _hemisphere_checks,
                                   _hemisphere_signs, dq_hemisphere_pairs, pack_dq_palette, skin_dq, skin_dq_into)

from test_skin_dq import random_mesh
from test_skin_dq_planar import run


def turn(axis, degrees):
    """The rotation matrix of ``degrees`` about the unit ``axis``."""
    x, y, z = axis
    c, s = np.cos(np.radians(degrees)), np.sin(np.radians(degrees))
    k = np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])
    return np.eye(3) + s * k + (1 - c) * k @ k


def chain_rig(rng, n, degrees, scale=None):
    """A chain of n joints, each turned by 1/2 to 1 times ``degrees`` against the one before, about axes near
    z: world rotations coil all round (the canonical qr.w >= 0 puts neighbours in opposite hemispheres
    where qr.w crosses 0), neighbours stay close.
    ``scale``: None, "diagonal" (axis-aligned) or "sheared" (along rotated axes)."""
    palette = np.repeat(np.eye(4)[None], n, 0)
    world = np.eye(3)
    for j in range(n):
        axis = np.array([0.0, 0.0, 1.0]) + 0.3 * rng.normal(size=3)  # a coil about z: qr.w crosses 0 often
        world = world @ turn(axis / np.linalg.norm(axis), rng.uniform(0.5, 1.0) * degrees)
        palette[j, :3, :3] = world
        palette[j, :3, 3] = rng.normal(size=3)
    if scale is not None:
        d = np.array([np.diag(x) for x in rng.uniform(0.6, 1.6, (n, 3))])
        if scale == "sheared":
            axes = np.array([turn(a / np.linalg.norm(a), 70.0) for a in rng.normal(size=(n, 3))])
            d = axes @ d @ axes.transpose(0, 2, 1)
        palette[:, :3, :3] = palette[:, :3, :3] @ d
    return palette


def chain_mesh(rng, v, n, k):
    """Each vertex blends k consecutive joints of the chain (in shuffled order); the first CHUNK rows have
    their weights sorted largest first, one row in 7 of them with a tie; a few zero weights."""
    positions, normals, _, _, weights = random_mesh(rng, v, n, k)
    base = rng.integers(0, n - k + 1, v)
    joints = base[:, None] + np.argsort(rng.uniform(size=(v, k)), axis=1)
    head = min(v, CHUNK)
    weights[:head] = -np.sort(-weights[:head], axis=1)
    if k > 1:
        weights[:head:7, 1] = weights[:head:7, 0]
        weights[head::11, -1] = 0.0  # a zero weight: its joint's sign does not matter
    weights /= weights.sum(axis=1, keepdims=True)
    return joints, weights.astype(np.float32), positions, normals


def test_pairs_are_the_blended_joints_tree_first():
    joints = np.array([[0, 1, 2, 3], [4, 5, 0, 0], [6, 7, 8, 9], [2, 2, 2, 2], [1, 0, 2, 5]])
    weights = np.array([[0.4, 0.3, 0.3, 0.0], [0.0, 0.0, 0.0, 0.0], [0.0, 0.6, 0.4, 0.0], [0.5, 0.5, 0, 0],
                        [0.3, 0.0, 0.7, 0.0]], np.float32)
    pairs = dq_hemisphere_pairs(joints, weights).pairs
    assert pairs.dtype == np.int32 and pairs.shape[1] == 2
    # row 0: the pivot 0 with 1 and 2 (3 has no weight; 1 and 2 are no pair: neither is the pivot); row 1: all
    # weights 0, the pivot (influence 0, joint 4) has no partner with weight; row 2: the pivot 7 and 8; row 3:
    # one joint; row 4: the pivot 2 and 1
    assert sorted(map(tuple, pairs.tolist())) == [(0, 1), (0, 2), (1, 2), (7, 8)]
    assert pairs.tolist()[:2] == [[0, 1], [0, 2]] and pairs.tolist()[-1] == [1, 2]  # tree edges, then checks
    # K <= 2: influence 0 is the pivot even with no weight, so it is paired with the other
    assert dq_hemisphere_pairs(np.array([[3, 5]]), np.array([[0.0, 1.0]], np.float32)).pairs.tolist() == [[3, 5]]
    # K > 2: the pivot is the first largest weight, paired even where every weight is 0 or less
    assert dq_hemisphere_pairs(np.array([[3, 5, 6]]), np.array([[0.0, -1.0, 0.0]], np.float32)).pairs.tolist() == [[3, 5]]
    assert dq_hemisphere_pairs(np.array([[-1, 2]]), np.ones((1, 2), np.float32)).pairs.tolist() == [[-1, -1]]
    for big in (PAIR_JOINTS, 1 << 40):  # past what it records: the pair that never passes
        assert dq_hemisphere_pairs(np.array([[big, 2]], np.int64), np.ones((1, 2), np.float32)).pairs.tolist() == [[-1, -1]]
    assert len(dq_hemisphere_pairs(np.array([[PAIR_JOINTS - 1, 2]]), np.ones((1, 2), np.float32)).pairs) == 1
    with pytest.raises(SkeletalError, match="joints and weights"):
        dq_hemisphere_pairs(np.zeros((3, 2), np.int32), np.zeros((3, 3), np.float32))


@pytest.mark.parametrize("k, joint_dtype, scale", [(4, np.uint8, None), (4, np.uint8, "diagonal"),
                                                   (4, np.int32, "sheared"), (2, np.uint8, "sheared")])
def test_consistent_signs_give_the_sign_tables_result(k, joint_dtype, scale):
    """Rig-like palettes whose neighbouring joints turn up to 40 degrees against each other (several in
    opposite hemispheres as packed): the per-frame signs pass, and the output is the sign table's bit for bit,
    and the reference's."""
    rng = np.random.default_rng(5 + k)
    n = 24
    v = 2 * CHUNK + 3 * LANES + 5
    palette = chain_rig(rng, n, 40.0, scale)
    joints, weights, positions, normals = chain_mesh(rng, v, n, k)
    assert n * n <= v and v >= SIGNED_MIN_VERTICES
    packed = pack_dq_palette(palette)
    pairs = dq_hemisphere_pairs(joints, weights)
    flips = np.empty(n, np.int32)
    assert _hemisphere_signs(packed, pairs.pairs, flips)
    assert (flips == -1).any() and (flips == 1).any()  # some joints change hemisphere
    signed_qr = packed[:, :4] * flips[:, None]
    assert all(signed_qr[a] @ signed_qr[b] >= 0 for a, b in pairs.pairs)
    j = joints.astype(joint_dtype)
    table = run(packed, j, weights, positions, normals)
    got = run(packed, j, weights, positions, normals, pairs=pairs)
    np.testing.assert_array_equal(got[0], table[0])
    np.testing.assert_array_equal(got[1], table[1])
    only_p, _ = run(packed, j, weights, positions, pairs=pairs)
    np.testing.assert_array_equal(only_p, table[0])
    ref_p, ref_n, _ = skin_dq(palette, joints, weights, positions, normals)
    size = float(np.abs(ref_p).max())
    np.testing.assert_allclose(got[0], ref_p, rtol=1e-5, atol=1e-5 * size)
    np.testing.assert_allclose(got[1], ref_n, atol=1e-5)


def test_frames_whose_pairs_cannot_share_a_hemisphere_fall_back():
    """Three joints blended pairwise at 0, 240 and 120 degrees about one axis: qr_0 . qr_1 < 0 while qr_2 is
    within 90 degrees of both, so no signs put all three pairs in one hemisphere; large turns (120 degrees
    between neighbours) fail too. Such frames take the sign table: the same output as without pairs."""
    rng = np.random.default_rng(17)
    n = 24
    v = CHUNK + 2 * LANES + 3
    z = np.array([0.0, 0.0, 1.0])
    tangled = chain_rig(rng, n, 20.0, "sheared")
    for joint, degrees in ((0, 0.0), (1, 240.0), (2, 120.0)):
        tangled[joint, :3, :3] = turn(z, degrees) @ np.diag([1.2, 0.9, 1.0])
    for palette in (tangled, chain_rig(rng, n, 120.0), chain_rig(rng, n, 120.0, "diagonal")):
        joints, weights, positions, normals = chain_mesh(rng, v, n, 4)
        joints[:LANES] = [0, 1, 2, 3]
        packed = pack_dq_palette(palette)
        pairs = dq_hemisphere_pairs(joints, weights)
        assert not _hemisphere_signs(packed, pairs.pairs, np.empty(n, np.int32))
        table = run(packed, joints.astype(np.uint8), weights, positions, normals)
        got = run(packed, joints.astype(np.uint8), weights, positions, normals, pairs=pairs)
        np.testing.assert_array_equal(got[0], table[0])
        np.testing.assert_array_equal(got[1], table[1])


def test_pairs_past_the_palette_or_of_the_wrong_type():
    rng = np.random.default_rng(23)
    n = 12
    v = SIGNED_MIN_VERTICES + 5
    palette = chain_rig(rng, n, 30.0)
    joints, weights, positions, normals = chain_mesh(rng, v, n, 4)
    packed = pack_dq_palette(palette)
    pairs = dq_hemisphere_pairs(joints, weights)
    assert _hemisphere_signs(packed, pairs.pairs, np.empty(n, np.int32))
    assert not _hemisphere_signs(packed[:n - 1], pairs.pairs, np.empty(n, np.int32))  # joint n - 1 is past J
    assert not _hemisphere_signs(packed, np.array([[-1, -1]], np.int32), np.empty(n, np.int32))
    table = run(packed[:n - 1], joints.astype(np.uint8), weights, positions, normals)
    got = run(packed[:n - 1], joints.astype(np.uint8), weights, positions, normals, pairs=pairs)
    np.testing.assert_array_equal(got[0], table[0])
    with pytest.raises(SkeletalError, match="pairs"):
        run(packed, joints.astype(np.uint8), weights, positions, normals, pairs=pairs.pairs.astype(np.int64))


def test_bench_rig_mesh_passes_and_its_rows_run(tmp_path, monkeypatch):
    """The DQS bench's rig-like mesh: every palette's pairs share hemispheres with some joints flipped (so the
    rows time the sign-free kernel), and the rows come out for each palette at both thread counts; without
    the shared assets the Soldier rows are left out."""
    from skeletal.bench.dq import bench_rows, rig_mesh

    monkeypatch.setenv("SKELETAL_ASSETS", str(tmp_path))  # (Soldier's rows: the next test)

    palettes, joints, weights, positions, normals = rig_mesh(5000)
    assert joints.dtype == np.uint8 and joints.shape == (5000, 4) and set(palettes) == {"rigid", "scaled", "sheared"}
    pairs = dq_hemisphere_pairs(joints, weights)
    for palette in palettes.values():
        flips = np.empty(len(palette), np.int32)
        assert _hemisphere_signs(pack_dq_palette(palette), pairs.pairs, flips) and (flips == -1).any()
    got = bench_rows(quick=True, vertices=5000)
    assert len(got["rows"]) == 9 and all(float(r["ratio"].rstrip("x")) > 0 for r in got["rows"])
    assert got["dqs_sheared_1thr"]["ratio"]["median"] > 0


def tangled_case(rng, scale, chosen):
    """A 24-joint chain (40-degree turns) whose joints 0, 1 and 2 turn 0, 240 and 120 degrees about z (no
    signs put the three in one hemisphere), blended together (with joint 3) only by the ``chosen`` rows;
    pivots 0, 1 and 2 in turn; every other row blends consecutive joints from 3 on."""
    n, v = 24, 2 * CHUNK + 3 * LANES + 5
    palette = chain_rig(rng, n, 40.0, scale)
    z = np.array([0.0, 0.0, 1.0])
    for joint, degrees in ((0, 0.0), (1, 240.0), (2, 120.0)):
        palette[joint, :3, :3] = turn(z, degrees) @ palette[joint, :3, :3]
    joints, weights, positions, normals = chain_mesh(rng, v, n, 4)
    joints[joints.min(axis=1) < 3] += 3
    for i, row in enumerate(chosen):  # pivots 0, 1, 2 in turn: the pairs (0, 1), (0, 2), (1, 2) all decide signs
        joints[row] = [[0, 1, 2, 3], [1, 2, 0, 3], [2, 0, 1, 3]][i % 3]
    weights[chosen] = [0.4, 0.3, 0.2, 0.1]
    return pack_dq_palette(palette), joints.astype(np.uint8), weights, positions, normals


def failing_runs(packed, found, joints, weights):
    """The vertex ranges the masked path sends to the sign table this frame (empty: the table serves all),
    and the same found here: the merged 16-vertex blocks with a vertex whose pivot (its first largest weight)
    forms a failing pair with another of its joints of non-zero weight."""
    scratch = np.empty(packed.shape[0] ** 2, np.int32)
    count = _hemisphere_checks(packed, found.pairs, np.empty(packed.shape[0], np.int32), scratch)
    assert count > 0
    failing = {tuple(sorted(pair)) for pair in found.pairs[scratch[:count]].tolist()}
    v = len(joints)
    blocks = set()
    for row in range(v):
        pivot = int(joints[row, np.argmax(weights[row])])
        if any(tuple(sorted((pivot, int(j)))) in failing for j, w in zip(joints[row], weights[row]) if w != 0):
            blocks.add(row // LANES)
    runs = []
    for b in sorted(blocks):
        if runs and runs[-1][1] == LANES * b:
            runs[-1][1] = min(LANES * b + LANES, v)
        else:
            runs.append([LANES * b, min(LANES * b + LANES, v)])
    return _failing_runs(found.starts, found.blocks, scratch, count, v).tolist(), runs


def test_pair_blocks_list_the_blocks_that_blend_each_pair():
    joints = np.array([[0, 1]] * 20 + [[1, 2]] * 20 + [[0, 1]] * 2, np.uint8)
    weights = np.full(joints.shape, 0.5, np.float32)
    weights[17] = [1.0, 0.0]  # influence 0 is the pivot (K = 2): still linked
    found = dq_hemisphere_pairs(joints, weights)
    assert found.vertices == 42 and found.pairs.tolist() == [[0, 1], [1, 2]]
    # (0, 1): rows 0-19 (blocks 0, 1) and 40-41 (block 2); (1, 2): rows 20-39 (blocks 1, 2)
    assert found.starts.tolist() == [0, 3, 5] and found.blocks.tolist() == [0, 1, 2, 1, 2]
    assert found.starts.dtype == np.int64 and found.blocks.dtype == np.int32


@pytest.mark.parametrize("scale", [None, "diagonal", "sheared"])
def test_failing_pairs_take_the_table_only_in_their_blocks(scale):
    """A few rows blend joints that no signs put in one hemisphere: only their 16-vertex blocks (one inside
    a chunk, one across nothing but its own, the mesh's last, partial block) take the sign table, the others
    the sign-free kernel, and the output is the table's bit for bit, positions with and without normals;
    in place (outputs over the inputs) the table serves the whole frame, with the same output."""
    rng = np.random.default_rng(41)
    chosen = [50, CHUNK + 40, 2 * CHUNK + 3 * LANES + 2, 53, CHUNK + 41, 2 * CHUNK + 3 * LANES + 4]
    packed, joints, weights, positions, normals = tangled_case(rng, scale, chosen)
    found = dq_hemisphere_pairs(joints, weights)
    assert not _hemisphere_signs(packed, found.pairs, np.empty(len(packed), np.int32))
    got, expected = failing_runs(packed, found, joints, weights)
    assert got == expected and 1 <= len(got) <= 3 and all(hi - lo <= LANES for lo, hi in got)
    table = run(packed, joints, weights, positions, normals)
    got = run(packed, joints, weights, positions, normals, pairs=found)
    np.testing.assert_array_equal(got[0], table[0])
    np.testing.assert_array_equal(got[1], table[1])
    only_p, _ = run(packed, joints, weights, positions, pairs=found)  # (the tail's two-vertex kernel rounds
    np.testing.assert_array_equal(only_p, run(packed, joints, weights, positions)[0])  # apart without normals)
    in_p, in_n = positions.copy(), normals.copy()
    skin_dq_into(packed, joints, weights, in_p, in_n, None, in_p, in_n, pairs=found)
    np.testing.assert_array_equal(in_p, table[0])
    np.testing.assert_array_equal(in_n, table[1])
    # the sign-free kernel alone (signs from the tree, the failing checks ignored) is wrong in those blocks
    flips = np.empty(len(packed), np.int32)
    _hemisphere_checks(packed, found.pairs, flips, np.empty(len(found.pairs), np.int32))
    signed = packed.copy()
    signed[:, :8] *= np.where(flips == 0, 1, flips)[:, None]
    free = run(signed, joints, weights, positions, normals, pairs=np.zeros((0, 2), np.int32))  # no checks
    wrong = np.flatnonzero((free[0] != table[0]).any(axis=1))
    assert len(wrong) and set(wrong) <= set(chosen)


def test_failing_pairs_in_many_blocks_or_a_bare_pairs_array_take_the_table():
    rng = np.random.default_rng(43)
    chosen = list(range(0, 2 * CHUNK, 2 * LANES))  # one block in 2: of them more than MASK_SHARE fail
    packed, joints, weights, positions, normals = tangled_case(rng, "diagonal", chosen)
    found = dq_hemisphere_pairs(joints, weights)
    assert len(failing_runs(packed, found, joints, weights)[1]) > MASK_SHARE * len(joints) / LANES
    assert failing_runs(packed, found, joints, weights)[0] == []
    table = run(packed, joints, weights, positions, normals)
    for pairs in (found, found.pairs):
        got = run(packed, joints, weights, positions, normals, pairs=pairs)
        np.testing.assert_array_equal(got[0], table[0])
        np.testing.assert_array_equal(got[1], table[1])
    with pytest.raises(SkeletalError, match="vertices"):
        run(packed, joints[:-1], weights[:-1], positions[:-1], normals[:-1], pairs=found)


def test_soldier_run_and_walk_pass_every_frame_and_match_the_table():
    """Soldier's body mesh (the bench's real-character rows): with the pivot's pairs only, every frame of Run
    (whose hands blend three joints that no signs put in one hemisphere) and Walk passes, and the output is
    the sign table's bit for bit."""
    from skeletal.bench.dq import soldier_frames

    from fixtures.shared_assets import need

    need("Soldier.glb")
    for clip in ("Run", "Walk"):
        palettes, joints, weights, positions, normals = soldier_frames(clip, 12)
        found = dq_hemisphere_pairs(joints, weights)
        assert found.vertices == len(joints) == 7325 and len(palettes) == 12
        for palette in palettes:
            packed = pack_dq_palette(palette)
            assert _hemisphere_signs(packed, found.pairs, np.empty(len(packed), np.int32))
        table = run(packed, joints, weights, positions, normals)
        got = run(packed, joints, weights, positions, normals, pairs=found)
        np.testing.assert_array_equal(got[0], table[0])
        np.testing.assert_array_equal(got[1], table[1])
