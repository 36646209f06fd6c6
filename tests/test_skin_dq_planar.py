"""skin_dq_into's planar group kernel (dense rows, K unrolled, no tangents: 16 vertices per group, one lane
per vertex) against the float64 reference and the two-vertex kernel it stands in for: both of its blends
(weights sorted in every lane of a group: influence 0 is the pivot, streamed; else the tournament), rigid
and scale-separated, the chunk tails, clamped joint indices."""

import numpy as np
import pytest

from skeletal.skinning.lbs import CHUNK, LANES, UNROLLED
from skeletal.skinning.dqs import (SIGNED_MIN_VERTICES, _presigned_records, _presigned_scratch, _scale_kind,
                                   _signed_records, _signed_scratch, _skin_dq_checked, pack_dq_palette, skin_dq,
                                   skin_dq_into)

from test_skin_dq import random_mesh, random_rigid


def scaled_rig(rng, n):
    palette = random_rigid(rng, n)
    palette[:, :3, :3] = palette[:, :3, :3] @ np.array([np.diag(d) for d in rng.uniform(0.6, 1.6, (n, 3))])
    palette[3, :3, :3] = palette[3, :3, :3] @ np.diag([-1.0, 1.0, 1.0])  # a mirrored joint
    return palette


def planar_case(rng, v, k, n_joints=40, scaled=False):
    """A mesh whose first CHUNK vertices have weights sorted largest first (the streamed blend) with some
    ties, and the rest unsorted (the tournament); groups mixing both are in between."""
    palette = scaled_rig(rng, n_joints) if scaled else random_rigid(rng, n_joints)
    positions, normals, _, joints, weights = random_mesh(rng, v, n_joints, k)
    head = min(v, CHUNK)
    order = np.argsort(-weights[:head], axis=1, kind="stable")
    weights[:head] = np.take_along_axis(weights[:head], order, 1)
    joints[:head] = np.take_along_axis(joints[:head], order, 1)
    if k > 1:
        weights[:head:7, 1] = weights[:head:7, 0]  # ties: the first of equal weights is the pivot
    weights[head + LANES: head + 2 * LANES] = np.sort(weights[head + LANES: head + 2 * LANES], axis=1)  # ascending
    weights /= weights.sum(axis=1, keepdims=True)  # rows sum to 1 (the contract)
    return palette, joints, weights, positions, normals


def strided(a):
    """The same rows as interleaved records (a strided view): skin_dq_into then takes the two-vertex kernel."""
    rec = np.zeros((len(a), a.shape[1] + 2), a.dtype)
    rec[:, : a.shape[1]] = a
    return rec[:, : a.shape[1]]


def run(palette, joints, weights, positions, normals=None, **kw):
    out_p = np.empty_like(positions)
    out_n = None if normals is None else np.empty_like(normals)
    return skin_dq_into(palette, joints, weights, positions, normals, None, out_p, out_n, **kw)[:2]


@pytest.mark.parametrize("k, joint_dtype, scaled", [(1, np.uint8, True), (2, np.int64, False), (4, np.uint8, False),
                                                    (4, np.uint8, True), (4, np.uint16, True), (8, np.uint8, True)])
def test_planar_kernel_matches_reference(k, joint_dtype, scaled):
    rng = np.random.default_rng(11 * k + scaled)
    v = 2 * CHUNK + 3 * LANES + 5  # three chunks, whole groups and a tail; uint8 joints: the padded palette
    palette, joints, weights, positions, normals = planar_case(rng, v, k, scaled=scaled)
    ref_p, ref_n, _ = skin_dq(palette, joints.astype(np.int64), weights, positions, normals)
    packed = pack_dq_palette(palette)
    size = float(np.abs(ref_p).max())
    for n in (v, LANES - 1, LANES, 2 * LANES + 1):  # from fewer vertices than a group on
        got_p, got_n = run(packed, joints[:n].astype(joint_dtype), weights[:n], positions[:n], normals[:n])
        np.testing.assert_allclose(got_p, ref_p[:n], rtol=1e-5, atol=1e-5 * size)
        np.testing.assert_allclose(got_n, ref_n[:n], atol=1e-5)
        assert np.allclose(np.linalg.norm(got_n, axis=1), 1.0, atol=1e-5)


def test_planar_kernel_agrees_with_two_vertex_kernel_and_positions_only():
    rng = np.random.default_rng(5)
    v = CHUNK + 2 * LANES + 3
    palette, joints, weights, positions, normals = planar_case(rng, v, 4, scaled=True)
    packed = pack_dq_palette(palette)
    planar_p, planar_n = run(packed, joints, weights, positions, normals)
    two_p, two_n = run(packed, joints, weights, strided(positions), strided(normals))
    size = float(np.abs(two_p).max())
    # the same maths; the streamed blend sums in a chain where the two-vertex kernel sums a tree
    np.testing.assert_allclose(planar_p, two_p, rtol=2e-6, atol=2e-6 * size)
    np.testing.assert_allclose(planar_n, two_n, atol=2e-6)
    only_p, none_n = run(packed, joints, weights, positions)
    assert none_n is None
    np.testing.assert_allclose(only_p, planar_p, rtol=1e-6, atol=1e-6 * size)  # (a chunk's odd vertex: 1 ulp)


def test_planar_blends_give_the_same_result_in_any_influence_order():
    """Sorted influences (streamed blend) and the same influences reversed (tournament): the same pivot."""
    rng = np.random.default_rng(8)
    palette, joints, weights, positions, normals = planar_case(rng, 3 * LANES, 4, scaled=True)
    w = np.sort(rng.uniform(0.05, 1.0, (len(weights), 4)), axis=1)[:, ::-1].astype(np.float32)
    w /= w.sum(axis=1, keepdims=True)
    sorted_p, sorted_n = run(palette.astype(np.float32), joints, w, positions, normals)
    rev_p, rev_n = run(palette.astype(np.float32), joints[:, ::-1].copy(), w[:, ::-1].copy(), positions, normals)
    np.testing.assert_allclose(sorted_p, rev_p, rtol=2e-6, atol=2e-6 * float(np.abs(sorted_p).max()))
    np.testing.assert_allclose(sorted_n, rev_n, atol=2e-6)


def test_planar_kernel_clamps_indices_past_the_palette():
    rng = np.random.default_rng(3)
    v = 5 * LANES + 3
    palette, joints, weights, positions, normals = planar_case(rng, v, 4, n_joints=5)
    bad = joints.astype(np.int32)
    bad[::3, 0] = 1000
    bad[1::3, 2] = -7  # negative: also the last joint
    clamped = np.where((bad < 0) | (bad >= 5), 4, bad)
    packed = pack_dq_palette(palette)
    a = run(packed, bad, weights, positions, normals)
    b = run(packed, clamped, weights, positions, normals)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])


# -- the signed-record kernel (V >= SIGNED_MIN_VERTICES and V >= J^2): table look-ups instead of transposes --


def old_group_kernel(monkeypatch):
    """skin_dq_into with the signed-record kernel switched off (every mesh takes the group kernel)."""
    import skeletal.skinning.dqs  # noqa: F401  (the module: skeletal.skin_dq the attribute is the function)
    import sys

    monkeypatch.setattr(sys.modules["skeletal.skinning.dqs"], "SIGNED_MIN_VERTICES", 1 << 40)


@pytest.mark.parametrize("k, joint_dtype, scaled", [(1, np.uint8, True), (2, np.int64, False), (4, np.uint8, False),
                                                    (4, np.uint8, True), (4, np.uint16, True), (4, np.int32, True),
                                                    (8, np.uint8, True)])
def test_signed_kernel_matches_reference_and_group_kernel(k, joint_dtype, scaled, monkeypatch):
    """Sorted groups (influence 0 the pivot, no look-up for it), unsorted and mixed groups (the pivot by
    a chain of selects), ties, chunk tails; the same results as the group kernel it stands in for."""
    rng = np.random.default_rng(70 + 11 * k + scaled)
    v = 2 * CHUNK + 3 * LANES + 5
    palette, joints, weights, positions, normals = planar_case(rng, v, k, scaled=scaled)
    assert len(palette) ** 2 <= v and v >= SIGNED_MIN_VERTICES
    ref_p, ref_n, _ = skin_dq(palette, joints.astype(np.int64), weights, positions, normals)
    packed = pack_dq_palette(palette)
    j = joints.astype(joint_dtype)
    got_p, got_n = run(packed, j, weights, positions, normals)
    size = float(np.abs(ref_p).max())
    np.testing.assert_allclose(got_p, ref_p, rtol=1e-5, atol=1e-5 * size)
    np.testing.assert_allclose(got_n, ref_n, atol=1e-5)
    only_p, _ = run(packed, j, weights, positions)
    np.testing.assert_allclose(only_p, got_p, rtol=1e-6, atol=1e-6 * size)
    old_group_kernel(monkeypatch)
    old_p, old_n = run(packed, j, weights, positions, normals)
    # the same maths; sums in influence order where the group kernel's unsorted groups sum trees (rounding)
    np.testing.assert_allclose(got_p, old_p, rtol=2e-6, atol=2e-6 * size)
    np.testing.assert_allclose(got_n, old_n, atol=5e-6)


def test_signed_kernel_hemispheres_for_opposed_and_antipodal_joints(monkeypatch):
    """Joints stored with qr and -qr (the same rotation), and joints rotated 160 / 200 degrees from another
    (their qr far from orthogonal, of either sign: exactly 180 would make the hemisphere a coin toss):
    every influence's record comes from the table's hemisphere, as the group kernel's signs say."""
    rng = np.random.default_rng(21)
    v = SIGNED_MIN_VERTICES + 7
    palette, joints, weights, positions, normals = planar_case(rng, v, 4, n_joints=12, scaled=True)
    palette[6] = palette[5]  # the same joint twice: identical records
    for joint, degrees in ((7, 160.0), (8, 200.0)):  # |qr . qr'| = cos(80 degrees), of either sign
        c, s = np.cos(np.radians(degrees)), np.sin(np.radians(degrees))
        palette[joint, :3, :3] = palette[4, :3, :3] @ np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    packed = pack_dq_palette(palette)
    packed[5, :8] *= -1  # -qr, -qd: the same transform, the opposite hemisphere
    ref_p, ref_n, _ = skin_dq(palette, joints, weights, positions, normals)
    got = run(packed, joints.astype(np.uint8), weights, positions, normals)
    size = float(np.abs(ref_p).max())
    np.testing.assert_allclose(got[0], ref_p, rtol=1e-5, atol=1e-5 * size)
    np.testing.assert_allclose(got[1], ref_n, atol=1e-5)
    old_group_kernel(monkeypatch)
    old = run(packed, joints.astype(np.uint8), weights, positions, normals)
    np.testing.assert_allclose(got[0], old[0], rtol=2e-6, atol=2e-6 * size)
    np.testing.assert_allclose(got[1], old[1], atol=5e-6)


def test_signed_records_sign_table():
    rng = np.random.default_rng(9)
    packed = pack_dq_palette(scaled_rig(rng, 9))
    packed[2, :8] *= -1
    n = len(packed)
    table = _signed_scratch(n)
    _signed_records(packed, table)
    assert table.ctypes.data % 64 == 0 and table.shape == (n, n) and table.dtype == np.int32
    qr = packed[:, :4]
    dots = qr @ qr.T  # [p, j]
    assert (dots < 0).any() and (dots > 0).any()
    np.testing.assert_array_equal(table, np.where(dots < 0, np.int32(-0x80000000), np.int32(0)))
    assert np.all(np.diag(table) == 0)  # a joint is in its own hemisphere


def test_presigned_records_are_the_records_negated_where_the_sign_table_says():
    """The 256-bit signed-record kernel's table: row p holds every joint's qr and qd, each negated (its sign
    bit flipped, NaN and zero included) where the sign table has joint j in the other hemisphere than p."""
    rng = np.random.default_rng(11)
    packed = pack_dq_palette(scaled_rig(rng, 13))
    packed[2, :8] *= -1
    packed[5, 0] = 0.0
    n = len(packed)
    table, out = np.empty((n, n), np.int32), np.full((n, 8 * n), np.nan, np.float32)
    _presigned_records(packed, table, out)
    expected_table = np.empty_like(table)
    _signed_records(packed, expected_table)
    np.testing.assert_array_equal(table, expected_table)
    assert (table < 0).any() and (table == 0).any()
    bits = packed[:, :8].view(np.int32)
    expected = (bits[None, :, :] ^ table[:, :, None]).reshape(n, 8 * n)
    np.testing.assert_array_equal(out.view(np.int32), expected)
    assert np.array_equal(out.reshape(n, n, 8)[0, 2], -packed[2, :8]) == (table[0, 2] < 0)
    scratch = _presigned_scratch(n)  # 256-bit targets only (the kernel's table); None where 16 lanes
    assert scratch is None or (scratch.shape == (n, 8 * n) and scratch.ctypes.data % 64 == 0)


def test_signed_kernel_clamps_indices_past_the_palette():
    """uint8 joints are not padded for this kernel (its table is J x J): every index is clamped to J - 1."""
    rng = np.random.default_rng(13)
    v = SIGNED_MIN_VERTICES + 2 * LANES + 3
    palette, joints, weights, positions, normals = planar_case(rng, v, 4, n_joints=5, scaled=True)
    packed = pack_dq_palette(palette)
    for dtype, bad_value in ((np.uint8, 255), (np.int32, -7), (np.int64, 1 << 40)):
        bad = joints.astype(dtype)
        bad[::3, 0] = bad_value  # the pivot of sorted rows: the table's row
        bad[1::3, 2] = bad_value  # another influence: the table's column
        clamped = np.where((bad.astype(np.int64) < 0) | (bad.astype(np.int64) >= 5), 4, bad).astype(dtype)
        a = run(packed, bad, weights, positions, normals)
        b = run(packed, clamped, weights, positions, normals)
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_array_equal(a[1], b[1])


@pytest.mark.parametrize("v, n_joints", [(SIGNED_MIN_VERTICES - 1, 20), (SIGNED_MIN_VERTICES, 32),
                                         (SIGNED_MIN_VERTICES, 33)])
def test_signed_kernel_thresholds_agree(v, n_joints, monkeypatch):
    """Either side of V = SIGNED_MIN_VERTICES and of V = J^2 (33^2 > 1024): the same results."""
    rng = np.random.default_rng(v + n_joints)
    palette, joints, weights, positions, normals = planar_case(rng, v, 4, n_joints=n_joints, scaled=True)
    packed = pack_dq_palette(palette)
    got = run(packed, joints.astype(np.uint8), weights, positions, normals)
    old_group_kernel(monkeypatch)
    old = run(packed, joints.astype(np.uint8), weights, positions, normals)
    size = float(np.abs(old[0]).max())
    np.testing.assert_allclose(got[0], old[0], rtol=2e-6, atol=2e-6 * size)
    np.testing.assert_allclose(got[1], old[1], atol=5e-6)


@pytest.mark.parametrize("joint_dtype", [np.uint8, np.uint16, np.int32, np.int64])
@pytest.mark.parametrize("scaled", [False, True])
def test_signed_kernel_group_check_equals_the_clamped_blend(joint_dtype, scaled):
    """Dense influences: each group is checked once (every index below J, weights sorted) and then blended
    without clamps; groups that fail take the clamped blend. Bit for bit what the clamped blend gives for
    the same rows (non-contiguous influences take it everywhere), and the reference's result with the
    out-of-range indices clamped to the last joint."""
    rng = np.random.default_rng(31 + scaled)
    n_joints = 12
    v = SIGNED_MIN_VERTICES + 4 * LANES + 5
    palette, joints, weights, positions, normals = planar_case(rng, v, 4, n_joints=n_joints, scaled=scaled)
    order = np.argsort(-weights, axis=1, kind="stable")  # every row sorted: the fast blend's groups
    weights = np.take_along_axis(weights, order, 1)
    joints = np.take_along_axis(joints, order, 1).astype(joint_dtype)
    top = {np.uint8: 255, np.uint16: 65535, np.int32: -3, np.int64: 1 << 40}[joint_dtype]
    joints[LANES + 3, 2] = top  # a group with an index past the palette (clamped)
    joints[2 * LANES + 7, 0] = n_joints  # the pivot itself one past the last joint
    joints[3 * LANES, 1] = n_joints - 1  # the last joint: in range
    weights[4 * LANES + 2, [0, 1]] = weights[4 * LANES + 2, [1, 0]]  # an unsorted row: the tournament
    packed = pack_dq_palette(palette)
    got = run(packed, joints, weights, positions, normals)
    wide_j = np.zeros((v, 5), joint_dtype)
    wide_w = np.zeros((v, 5), np.float32)
    wide_j[:, :4], wide_w[:, :4] = joints, weights
    clamped = run(packed, wide_j[:, :4], wide_w[:, :4], positions, normals)  # non-contiguous: clamped blend
    np.testing.assert_array_equal(got[0], clamped[0])
    np.testing.assert_array_equal(got[1], clamped[1])
    in_range = joints.astype(np.int64)
    in_range = np.where((in_range < 0) | (in_range >= n_joints), n_joints - 1, in_range)
    ref_p, ref_n, _ = skin_dq(palette, in_range, weights, positions, normals)
    size = float(np.abs(ref_p).max())
    np.testing.assert_allclose(got[0], ref_p, rtol=1e-5, atol=1e-5 * size)
    np.testing.assert_allclose(got[1], ref_n, atol=1e-5)


# -- the signed-record kernel's diagonal variant (every joint's S diagonal: axis-aligned or uniform scale) --

def sheared_rig(rng, n):
    """Non-uniform scale along rotated axes (S = B D B^T, not diagonal): the general scale-separated kernel."""
    palette = random_rigid(rng, n)
    axes = random_rigid(rng, n)[:, :3, :3]
    scale = np.array([np.diag(d) for d in rng.uniform(0.6, 1.6, (n, 3))])
    palette[:, :3, :3] = palette[:, :3, :3] @ axes @ scale @ axes.transpose(0, 2, 1)
    return palette


def test_scale_kind_tells_rigid_diagonal_and_general_palettes():
    rng = np.random.default_rng(5)
    rigid, diagonal, general = random_rigid(rng, 9), scaled_rig(rng, 9), sheared_rig(rng, 9)
    uniform = random_rigid(rng, 9)
    uniform[:, :3, :3] *= 1.7
    assert _scale_kind(pack_dq_palette(rigid), 9) == 0
    assert _scale_kind(pack_dq_palette(diagonal), 9) == 1  # axis-aligned scale, a mirrored joint among them
    assert _scale_kind(pack_dq_palette(uniform), 9) == 1
    assert _scale_kind(pack_dq_palette(general), 9) == 3
    packed = pack_dq_palette(diagonal)
    packed[4, 10] = 1e-3  # one off-diagonal past the tolerance: the general kernel
    assert _scale_kind(packed, 9) == 3
    packed[4, 10] = np.nan
    assert _scale_kind(packed, 9) == 3


@pytest.mark.parametrize("joint_dtype", [np.uint8, np.int32])
def test_signed_diagonal_kernel_matches_the_general_one_and_the_reference(joint_dtype):
    """Diagonal S (axis-aligned and uniform scale, a mirrored joint): the same result as the general
    scale-separated kernel to float32 rounding (the off-diagonals it leaves out are below half an ulp of
    the diagonal), and as the float64 reference; a sheared palette takes the general kernel."""
    rng = np.random.default_rng(41)
    v = 2 * CHUNK + 3 * LANES + 5
    for palette in (planar_case(rng, v, 4, scaled=True)[0], sheared_rig(rng, 40)):
        _, joints, weights, positions, normals = planar_case(rng, v, 4, scaled=True)
        packed = pack_dq_palette(palette)
        j = joints.astype(joint_dtype)
        ref_p, ref_n, _ = skin_dq(palette, joints.astype(np.int64), weights, positions, normals)
        got_p, got_n = run(packed, j, weights, positions, normals)
        size = float(np.abs(ref_p).max())
        np.testing.assert_allclose(got_p, ref_p, rtol=1e-5, atol=1e-5 * size)
        np.testing.assert_allclose(got_n, ref_n, atol=1e-5)
        general = [np.empty_like(positions), np.empty_like(normals)]
        assert _skin_dq_checked(packed, j, weights, positions, normals, None, *general, None, UNROLLED.get(4),
                                True, None, _signed_scratch(len(packed)), None, np.empty(0, np.int64),
                                np.empty(0, np.int32), _presigned_scratch(len(packed)))
        np.testing.assert_allclose(got_p, general[0], rtol=1e-6, atol=1e-6 * size)
        np.testing.assert_allclose(got_n, general[1], atol=1e-6)
