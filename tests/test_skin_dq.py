"""Dual quaternion skinning (skeletal.skin_dq): analytic cases, the candy-wrapper twist measured,
the fast path against the float64 reference, and the shaders against the CPU for every palette path.

Fixtures are generated here (a cylinder twisted between two joints, random rigs); nothing needs ../shared.
"""

from __future__ import annotations


import numpy as np
import pytest

from skeletal.errors import SkeletalError
from skeletal.skinning.lbs import skin
from skeletal.skinning.dqs import (DQ_STRIDE, dual_quaternions, gpu_dq_palette, pack_dq_palette, skin_dq,
                              skin_dq_into)

# -- helpers -----------------------------------------------------------------------------------


def quat_matrix(q):
    """Unit quaternions (..., 4) xyzw -> rotation matrices (..., 3, 3)."""
    x, y, z, w = np.moveaxis(np.asarray(q, np.float64), -1, 0)
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)], -1),
        np.stack([2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)], -1),
        np.stack([2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], -1),
    ], -2)


def rotation_y(degrees):
    a = np.radians(degrees)
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])


def affine(linear, translation=(0, 0, 0)):
    m = np.eye(4)
    m[:3, :3] = linear
    m[:3, 3] = translation
    return m


def random_rigid(rng, n):
    q = rng.normal(size=(n, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    out = np.repeat(np.eye(4)[None], n, 0)
    out[:, :3, :3] = quat_matrix(q)
    out[:, :3, 3] = rng.normal(size=(n, 3))
    return out


def random_mesh(rng, v, joints, k, sort=False):
    """Positions, unit normals, tangents (w = +-1), joint indices and weights (unsorted unless ``sort``)."""
    positions = rng.normal(size=(v, 3)).astype(np.float32)
    normals = rng.normal(size=(v, 3))
    normals = (normals / np.linalg.norm(normals, axis=1, keepdims=True)).astype(np.float32)
    tangents = np.cross(normals, rng.normal(size=(v, 3)))
    tangents /= np.linalg.norm(tangents, axis=1, keepdims=True)
    tangents = np.concatenate([tangents, np.sign(rng.normal(size=(v, 1)))], 1).astype(np.float32)
    j = np.stack([rng.permutation(joints)[:k] for _ in range(v)]).astype(np.int64)
    w = rng.uniform(0.05, 1.0, (v, k))
    if sort:
        w = -np.sort(-w, axis=1)
    w = (w / w.sum(1, keepdims=True)).astype(np.float32)
    return positions, normals, np.ascontiguousarray(tangents), j, w


def cylinder(rings=21, sides=32, length=2.0, radius=0.3, blend=0.5):
    """A cylinder along +y (0..length), skinned to joint 0 (bottom) and joint 1 (top): weights ramp
    linearly from joint 0 to joint 1 over ``blend`` around the middle, so the middle ring is 50/50.
    Returns positions, outward unit normals, joints (V, 2), weights (V, 2), the middle ring's indices."""
    ys = np.linspace(0.0, length, rings)
    angles = np.linspace(0.0, 2 * np.pi, sides, endpoint=False)
    positions = np.array([[radius * np.cos(a), y, radius * np.sin(a)] for y in ys for a in angles], np.float32)
    normals = np.array([[np.cos(a), 0.0, np.sin(a)] for _ in ys for a in angles], np.float32)
    t = np.clip((positions[:, 1] - (length / 2 - blend / 2)) / blend, 0.0, 1.0)
    weights = np.stack([1 - t, t], 1).astype(np.float32)
    joints = np.tile(np.array([[0, 1]], np.uint8), (len(positions), 1))
    middle = np.arange(sides) + (rings // 2) * sides
    assert np.allclose(positions[middle, 1], length / 2)
    return positions, normals, joints, weights, middle


def ring_area(points):
    """Area of a closed polygon in the xz plane (shoelace)."""
    x, z = points[:, 0], points[:, 2]
    return 0.5 * abs(np.dot(x, np.roll(z, -1)) - np.dot(z, np.roll(x, -1)))


def twist_palette(degrees_top, degrees_bottom=0.0):
    return np.stack([affine(rotation_y(degrees_bottom)), affine(rotation_y(degrees_top))])


def fast(palette, joints, weights, positions, normals=None, tangents=None, **kw):
    v = len(positions)
    out_p = np.empty((v, 3), np.float32)
    out_n = np.empty((v, 3), np.float32) if normals is not None else None
    out_t = np.empty((v, 4), np.float32) if tangents is not None else None
    return skin_dq_into(palette, np.ascontiguousarray(joints), np.ascontiguousarray(weights, dtype=np.float32),
                        positions, normals, tangents, out_p, out_n, out_t, **kw)


# -- conversion --------------------------------------------------------------------------------


def test_dual_quaternions_round_trip_rotation_translation_and_scale():
    rng = np.random.default_rng(0)
    palette = random_rigid(rng, 20)
    scale = np.diag([1.5, 0.5, 2.0])
    palette[3, :3, :3] = palette[3, :3, :3] @ scale  # scaled in bind space
    palette[4, :3, :3] = palette[4, :3, :3] @ np.diag([1, 1, -1])  # mirrored
    qr, qd, s, non_rigid = dual_quaternions(palette)
    assert np.allclose(np.linalg.norm(qr, axis=1), 1.0, atol=1e-12)
    assert np.allclose(quat_matrix(qr) @ s, palette[:, :3, :3], atol=1e-10)  # A = R S
    assert np.all(np.linalg.det(quat_matrix(qr)) > 0)  # proper rotations: the mirror is in S
    assert np.allclose(s, np.swapaxes(s, 1, 2), atol=1e-10)  # polar factor: symmetric
    assert np.allclose(s[3], scale, atol=1e-10) and np.linalg.det(s[4]) < 0
    # t = 2 qd qr*
    t = 2 * (qr[:, 3:] * qd[:, :3] - qd[:, 3:] * qr[:, :3] + np.cross(qr[:, :3], qd[:, :3]))
    assert np.allclose(t, palette[:, :3, 3], atol=1e-10)
    assert non_rigid.tolist() == [i in (3, 4) for i in range(20)]
    packed = pack_dq_palette(palette)
    assert packed.shape == (20, DQ_STRIDE) == (20, 16)  # qr, qd, (s00, s01, s02, s11), (s12, s22, scales, 0)
    assert np.allclose(packed[:, :4], qr, atol=1e-7) and np.allclose(packed[:, 4:8], qd, atol=1e-6)
    sym = s[:, [0, 0, 0, 1, 1, 2], [0, 1, 2, 1, 2, 2]]
    assert np.allclose(packed[:, 8:14], sym, atol=1e-6) and not packed[:, 15].any()
    assert packed[:, 14].tolist() == [float(i in (3, 4)) for i in range(20)]
    gpu = gpu_dq_palette(palette.astype(np.float32)[None])
    assert gpu.shape == (1, 20, 4, 4)
    assert np.array_equal(gpu[0].reshape(20, 16), pack_dq_palette(palette.astype(np.float32)))  # one layout
    assert np.allclose(gpu[0, 3, 2], [1.5, 0, 0, 0.5], atol=1e-6) and np.allclose(gpu[0, 3, 3], [0, 2, 1, 0], atol=1e-6)


def packed_reference(palette):
    """pack_dq_palette's layout from the float64 reference (dual_quaternions), rounded to float32 once."""
    qr, qd, s, non_rigid = dual_quaternions(np.asarray(palette, np.float64))
    sym = 0.5 * (s + np.swapaxes(s, -1, -2))
    out = np.zeros((len(qr), 16))
    out[:, :4], out[:, 4:8] = qr, qd
    out[:, 8:14] = sym[:, [0, 0, 0, 1, 1, 2], [0, 1, 2, 1, 2, 2]]
    out[:, 14] = non_rigid
    return out.astype(np.float32)


def conversion_cases(rng):
    """Joints of every kind the packing meets: (name, (n, 4, 4) palette)."""
    rigid = random_rigid(rng, 24)
    cases = [("rigid", rigid), ("rigid float32", rigid.astype(np.float32).astype(np.float64))]
    for size in (1e-6, 2e-5, 1e-4, 1e-3, 1e-1):  # near-rigid: either side of the fast path's 3e-5
        near = rigid.copy()
        near[:, :3, :3] += rng.uniform(-size, size, (24, 3, 3))
        cases.append((f"near-rigid {size:g}", near))
    scaled = rigid.copy()
    scaled[:, :3, :3] = scaled[:, :3, :3] @ np.array([np.diag(d) for d in rng.uniform(0.5, 2.0, (24, 3))])
    scaled[:8, :3, :3] += rng.normal(0, 0.2, (8, 3, 3))  # shear too
    cases.append(("scaled and sheared", scaled))
    mirrored = rigid.copy()
    mirrored[:, :3, :3] = mirrored[:, :3, :3] @ np.diag([1.0, -1.0, 1.0])
    mirrored[::2, :3, :3] *= 1.7
    cases.append(("mirrored", mirrored))
    half_turns = np.repeat(np.eye(4)[None], 8, 0)  # w = 0: the x, y, z branches of the quaternion
    half_turns[0, :3, :3] = np.diag([1.0, -1.0, -1.0])
    half_turns[1, :3, :3] = np.diag([-1.0, 1.0, -1.0])
    half_turns[2, :3, :3] = np.diag([-1.0, -1.0, 1.0])
    axis = np.array([1.0, 2.0, -2.0]) / 3.0
    half_turns[3, :3, :3] = 2 * np.outer(axis, axis) - np.eye(3)
    for i, degrees in enumerate((179.0, 181.0, 90.0, 0.0)):
        half_turns[4 + i, :3, :3] = rotation_y(degrees)
    cases.append(("half turns", half_turns))
    singular = rigid[:7].copy()
    singular[0, :3, :3] = 0.0  # a hidden joint: scale 0
    singular[1, :3, :3] = singular[1, :3, :3] @ np.diag([1.0, 1.0, 0.0])  # flattened
    singular[2, :3, :3] = np.outer([1.0, 2.0, 3.0], [0.5, -1.0, 0.25])  # rank 1
    singular[3, :3, :3] *= 1e-40  # a determinant of 1e-120 (float32: subnormal entries)
    singular[4, :3, :3] *= 1e36  # 1e108: past the iteration's range, as the one above
    singular[5, :3, :3] *= 1e30  # 1e90 and 1e-30 (1e-90): inside it
    singular[6, :3, :3] *= 1e-30
    cases.append(("singular and extreme", singular))
    return cases


@pytest.mark.parametrize("layout", ["3x4 float32", "4x4 float64", "strided"])
def test_packing_matches_the_reference_conversion(layout):
    """pack_dq_palette (rigid fast path, orthogonal columns without iteration: "scaled" and "mirrored",
    the float32-tuned iteration, the branch-free quaternion; singular joints by the reference's own code)
    against dual_quaternions, for every kind of joint."""
    rng = np.random.default_rng(12)
    for name, palette in conversion_cases(rng):
        expect = packed_reference(palette)
        given = palette[:, :3].astype(np.float32) if layout == "3x4 float32" else palette
        if layout == "strided":
            given = np.concatenate([palette, palette], axis=2)[:, :, ::2]  # (J, 4, 4) with a column stride
            given[:] = palette
        got = pack_dq_palette(given)
        if layout == "3x4 float32":
            expect = packed_reference(given)  # the reference of the rounded matrices
        assert got.dtype == np.float32 and got.shape == expect.shape, name
        # q and -q: the same rotation; both conversions give w >= 0, which leaves a choice only at w = 0
        flip = np.where(np.sum(got[:, :4] * expect[:, :4], axis=1) < 0, -1.0, 1.0)[:, None]
        assert np.all(flip[np.abs(expect[:, 3]) > 1e-6] == 1.0), name
        scale = np.maximum(1.0, np.abs(expect[:, None, 8:14]).max(axis=2))
        np.testing.assert_allclose(got[:, :4], flip * expect[:, :4], atol=2e-7, err_msg=name)
        np.testing.assert_allclose(got[:, 4:8], flip * expect[:, 4:8], atol=4e-7 * max(1.0, float(np.abs(expect[:, 4:8]).max())),
                                   err_msg=name)
        np.testing.assert_allclose(got[:, 8:14] / scale, expect[:, 8:14] / scale, atol=2e-7, err_msg=name)
        np.testing.assert_array_equal(got[:, 14:], expect[:, 14:], err_msg=name)


def test_packing_singular_joints_take_the_reference_code():
    """Where the iteration would divide by a vanishing determinant, the packing runs _dq_joint itself:
    the reference's result, rounded to float32, to the last bit."""
    rng = np.random.default_rng(3)
    singular = dict(conversion_cases(rng))["singular and extreme"][:5]
    np.testing.assert_array_equal(pack_dq_palette(singular), packed_reference(singular))
    assert packed_reference(singular)[:, 14].all()


# -- analytic cases ----------------------------------------------------------------------------


def test_rigid_motion_both_methods_give_the_exact_rigid_transform():
    """Every joint moves by the same rigid transform (and, separately, one joint per vertex): LBS and
    DQS (reference and fast path) both equal the transform applied to the mesh."""
    rng = np.random.default_rng(1)
    positions, normals, tangents, joints, weights = random_mesh(rng, 500, 12, 4)
    motion = random_rigid(rng, 1)[0]
    exact_p = positions @ motion[:3, :3].T + motion[:3, 3]
    exact_n = normals @ motion[:3, :3].T
    same = np.repeat(motion[None], 12, 0)
    lbs = skin(same, joints, weights, positions, normals, tangents)
    ref = skin_dq(same, joints, weights, positions, normals, tangents)
    got = fast(same.astype(np.float32), joints, weights, positions, normals, tangents)
    for p, n, t in (lbs, ref, got):
        assert np.abs(p - exact_p).max() < 2e-5
        assert np.abs(n - exact_n).max() < 2e-5
        assert np.abs(t[:, :3] - tangents[:, :3] @ motion[:3, :3].T).max() < 2e-5
        assert np.array_equal(t[:, 3], tangents[:, 3])
    # One influence per vertex, different rigid joints: each vertex follows its own joint exactly.
    palette = random_rigid(rng, 12)
    one = joints[:, :1]
    w1 = np.ones((len(one), 1), np.float32)
    exact = np.einsum("vij,vj->vi", palette[one[:, 0], :3, :3], positions) + palette[one[:, 0], :3, 3]
    for p, _, _ in (skin(palette, one, w1, positions), skin_dq(palette, one, w1, positions),
                    fast(palette.astype(np.float32), one, w1, positions)):
        assert np.abs(p - exact).max() < 2e-5


@pytest.mark.parametrize("degrees, lbs_ratio", [(90.0, 0.500), (180.0, 0.000)])
def test_twisted_cylinder_lbs_collapses_dqs_keeps_the_cross_section(degrees, lbs_ratio):
    """The candy wrapper: joint 1 twisted about the cylinder's axis; the middle ring (50/50 weights)
    under LBS shrinks by cos^2(angle / 2) in area (0.5 at 90 degrees, 0 at 180); DQS keeps it (1.0)."""
    positions, normals, joints, weights, middle = cylinder()
    palette = twist_palette(degrees)
    rest = ring_area(positions[middle])
    lbs_p, _, _ = skin(palette, joints, weights, positions, normals)
    dqs_p, dqs_n, _ = skin_dq(palette, joints, weights, positions, normals)
    fast_p, fast_n, _ = fast(palette.astype(np.float32), joints, weights, positions, normals)
    lbs_area = ring_area(lbs_p[middle]) / rest
    dqs_area = ring_area(dqs_p[middle]) / rest
    fast_area = ring_area(fast_p[middle]) / rest
    assert lbs_area == pytest.approx(lbs_ratio, abs=1e-3)
    assert dqs_area == pytest.approx(1.0, abs=1e-3) and fast_area == pytest.approx(1.0, abs=1e-3)
    assert dqs_area - lbs_area > 0.49
    # Every ring of the twisted part keeps its radius under DQS (no thinning anywhere)...
    radius = np.hypot(fast_p[:, 0], fast_p[:, 2])
    assert np.abs(radius - 0.3).max() < 1e-5
    assert np.abs(fast_p[:, 1] - positions[:, 1]).max() < 1e-5  # a twist about y moves nothing along y
    # ...and the middle ring is turned by half the twist (slerp midpoint).
    expect = positions[middle] @ rotation_y(degrees / 2).T
    assert np.abs(fast_p[middle] - expect).max() < 1e-5 or np.abs(fast_p[middle] - expect * [-1, 1, -1]).max() < 1e-5
    # Normals: unit, and still the radial direction of the skinned surface.
    for n in (dqs_n, fast_n):
        assert np.abs(np.linalg.norm(n, axis=1) - 1).max() < 1e-5
        radial = fast_p[:, [0, 2]] / radius[:, None]
        assert np.abs(n[:, [0, 2]] - radial).max() < 1e-4 and np.abs(n[:, 1]).max() < 1e-5


def test_antipodal_quaternions_blend_along_the_short_arc():
    """Joints at +130 and -130 degrees about y: their quaternions (both with w > 0) have a negative dot
    product. Blended naively they cancel toward the identity; DQS flips one into the pivot's
    hemisphere, so the 50/50 ring turns by 180 degrees (the short way round) with its full radius."""
    positions, normals, joints, weights, middle = cylinder()
    palette = twist_palette(130.0, -130.0)
    qr, _, _, _ = dual_quaternions(palette)
    assert np.dot(qr[0], qr[1]) < 0 and qr[0, 3] > 0 and qr[1, 3] > 0
    for p, _, _ in (skin_dq(palette, joints, weights, positions, normals),
                    fast(palette.astype(np.float32), joints, weights, positions, normals)):
        assert np.abs(p[middle] - positions[middle] * [-1, 1, -1]).max() < 1e-5
    # Negating a joint's dual quaternion (the same rigid transform) changes nothing, whatever the pivot.
    rng = np.random.default_rng(2)
    pal = random_rigid(rng, 8).astype(np.float32)
    positions, normals, tangents, j, w = random_mesh(rng, 300, 8, 4)
    packed = pack_dq_palette(pal)
    flipped = packed.copy()
    flipped[::2, :8] *= -1
    a = fast(packed, j, w, positions, normals, tangents)
    b = fast(flipped, j, w, positions, normals, tangents)
    for x, y in zip(a, b):
        assert np.abs(x - y).max() < 1e-5


def test_scaled_joints_use_the_scale_separated_method():
    """Documented method: p' = DQ(rigid parts) (sum w S) p. A single scaled (even mirrored) joint is
    exact, as LBS; two joints with different scales blend S linearly; "ignore" drops the scale."""
    rng = np.random.default_rng(3)
    positions, normals, tangents, _, _ = random_mesh(rng, 200, 4, 1)
    rot = quat_matrix(np.array([0.2, -0.4, 0.1, 0.9]) / np.linalg.norm([0.2, -0.4, 0.1, 0.9]))
    shear = np.array([[1.4, 0.2, 0.0], [0.2, 0.6, 0.1], [0.0, 0.1, 1.1]])
    for linear in (rot @ shear, rot @ np.diag([1.3, 0.8, -1.0])):
        palette = affine(linear, (0.5, -1.0, 2.0))[None]
        one, w1 = np.zeros((200, 1), np.int64), np.ones((200, 1), np.float32)
        lbs = skin(palette, one, w1, positions, normals, tangents)
        for got in (skin_dq(palette, one, w1, positions, normals, tangents),
                    fast(palette.astype(np.float32), one, w1, positions, normals, tangents)):
            for x, y in zip(got, lbs):
                assert np.abs(x - y).max() < 2e-5  # positions exact; normals via the cofactor, outward
    # Two joints, same rotation and translation, uniform scales 2 and 0.5, weights 0.25 / 0.75.
    palette = np.stack([affine(rot * 2.0, (1, 2, 3)), affine(rot * 0.5, (1, 2, 3))])
    j2 = np.tile([[0, 1]], (200, 1))
    w2 = np.tile(np.array([[0.25, 0.75]], np.float32), (200, 1))
    expect = (0.25 * 2.0 + 0.75 * 0.5) * positions @ rot.T + [1, 2, 3]
    ref = skin_dq(palette, j2, w2, positions, normals)
    got = fast(palette.astype(np.float32), j2, w2, positions, normals)
    auto_kernel = fast(palette.astype(np.float32), j2, w2, positions, normals, scale="separate")
    for p, n, _ in (ref, got, auto_kernel):
        assert np.abs(p - expect).max() < 2e-5
        assert np.abs(n - normals @ rot.T).max() < 2e-5  # uniform scale: normals only rotate
    ignored = fast(palette.astype(np.float32), j2, w2, positions, normals, scale="ignore")[0]
    assert np.abs(ignored - (positions @ rot.T + [1, 2, 3])).max() < 2e-5


# -- the fast path against the reference -------------------------------------------------------


@pytest.mark.parametrize("k", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("scaled", [False, True])
def test_fast_path_matches_reference(k, scaled):
    """Unrolled (1, 2, 4, 8) and looped (3) influence counts, rigid and scale-separated kernels, unsorted
    weights, 4099 vertices (uint8 joints take the padded palette; odd: the single-vertex tail)."""
    rng = np.random.default_rng(10 + k)
    palette = random_rigid(rng, 40)
    if scaled:
        palette[:, :3, :3] = palette[:, :3, :3] @ np.array([np.diag(d) for d in rng.uniform(0.6, 1.6, (40, 3))])
    positions, normals, tangents, j, w = random_mesh(rng, 4099, 40, k)
    ref = skin_dq(palette, j, w, positions, normals, tangents)
    for dtype in ((np.uint8, np.uint16, np.int32, np.int64) if k == 4 else (np.uint8,)):
        got = fast(palette.astype(np.float32), j.astype(dtype), w, positions, normals, tangents)
        for x, y in zip(got, ref):
            assert np.abs(x - y).max() < 1e-5 * max(1.0, float(np.abs(y).max()))


def test_packed_palette_positions_only_and_in_place():
    rng = np.random.default_rng(4)
    palette = random_rigid(rng, 30)
    positions, _, _, j, w = random_mesh(rng, 999, 30, 4)
    j = j.astype(np.uint8)
    ref = skin_dq(palette, j, w, positions)[0]
    packed = pack_dq_palette(palette)
    p_only = fast(packed, j, w, positions)[0]
    assert np.abs(p_only - ref).max() < 1e-5 * float(np.abs(ref).max())
    work = positions.copy()
    skin_dq_into(packed, j, w, work, None, None, work)
    assert np.array_equal(work, p_only)


def test_strided_rows_and_untouched_neighbours():
    rng = np.random.default_rng(5)
    palette = random_rigid(rng, 6).astype(np.float32)
    positions, normals, _, j, w = random_mesh(rng, 101, 6, 4)
    records = np.full((101, 8), 7.0, np.float32)  # position, pad, normal, pad
    records[:, 0:3], records[:, 4:7] = positions, normals
    out = np.full((101, 8), -3.0, np.float32)
    skin_dq_into(palette, j, w, records[:, 0:3], records[:, 4:7], None, out[:, 0:3], out[:, 4:7])
    ref = skin_dq(palette, j, w, positions, normals)
    assert np.abs(out[:, 0:3] - ref[0]).max() < 1e-5 and np.abs(out[:, 4:7] - ref[1]).max() < 1e-5
    assert np.all(out[:, 3] == -3.0) and np.all(out[:, 7] == -3.0)


def test_bad_input_is_a_skeletal_error():
    rng = np.random.default_rng(6)
    positions, normals, _, j, w = random_mesh(rng, 10, 4, 2)
    out = np.empty_like(positions)
    palette = random_rigid(rng, 4).astype(np.float32)
    with pytest.raises(SkeletalError, match="palette"):
        skin_dq_into(palette[:, :2], j, w, positions, None, None, out)
    with pytest.raises(SkeletalError, match="scale"):
        skin_dq_into(palette, j, w, positions, None, None, out, scale="uniform")
    with pytest.raises(SkeletalError, match="float32"):
        skin_dq_into(palette, j, w.astype(np.float64), positions, None, None, out)
    with pytest.raises(SkeletalError, match="out_normals"):
        skin_dq_into(palette, j, w, positions, normals, None, out)
    with pytest.raises(SkeletalError, match="joint indices"):
        skin_dq(palette, j + 10, w, positions)
    bad = palette.copy()
    bad[0, 0, 0] = np.nan
    with pytest.raises(SkeletalError, match="non-finite"):
        dual_quaternions(bad)


# -- GPU: the shaders' DQS equals the CPU's, for every palette upload path -----------------------


@pytest.mark.parametrize("influences", [4, 8])
@pytest.mark.parametrize("path", ["uniform", "ubo", "ssbo", "texture", "texture-2d"])
def test_gpu_dqs_matches_cpu_for_every_palette_path(ctx, path, influences):
    """Transform feedback of skinning.glsl with SKINNING_DQS vs skin_dq, two instances in one draw:
    a random rig with scaled and mirrored joints (unsorted weights), and the antipodal twist."""
    from skeletal.render.feedback import SkinningProbe
    from skeletal.render.palette import create_store, mode_capacity

    mode = path.split("-")[0]
    if ctx.version_code < 430 and mode == "ssbo":
        pytest.skip("SSBOs need OpenGL 4.3")
    rng = np.random.default_rng(20 + influences)
    joints_n = 12
    rig = random_rigid(rng, joints_n)
    rig[2, :3, :3] = rig[2, :3, :3] @ np.diag([1.5, 0.7, 1.2])
    rig[5, :3, :3] = rig[5, :3, :3] @ np.diag([1.0, -1.0, 1.0])
    twist = np.repeat(np.eye(4)[None], joints_n, 0)
    twist[:2] = twist_palette(130.0, -130.0)
    palette = np.stack([rig, twist])[:, :, :3, :].astype(np.float32)  # (2, J, 3, 4)
    positions, normals, _, j, w = random_mesh(rng, 257, joints_n, influences)
    cyl_p, cyl_n, cyl_j, cyl_w, middle = cylinder(rings=5, sides=8)
    positions = np.concatenate([positions, cyl_p])
    normals = np.concatenate([normals, cyl_n])
    j = np.concatenate([j, np.pad(cyl_j.astype(np.int64), ((0, 0), (0, influences - 2)))])
    w = np.concatenate([w, np.pad(cyl_w, ((0, 0), (0, influences - 2)))])
    store = create_store(ctx, mode, palette.shape[0] * palette.shape[1], texture_2d=(path == "texture-2d"),
                         rows_per_matrix=4)
    assert mode_capacity(ctx, mode, 4)[0] >= store.capacity and store.rows == 4 * store.capacity
    probe = SkinningProbe(ctx, store, influences, skinning="dqs")
    try:
        gpu_p, gpu_n = probe.run(palette, j, w, positions, normals)
    finally:
        probe.release()
        store.release()
    for i in range(2):
        cpu_p, cpu_n, _ = skin_dq(palette[i].astype(np.float64), j, w, positions, normals)
        assert np.abs(gpu_p[i] - cpu_p).max() <= 2e-5 * max(1.0, float(np.abs(cpu_p).max()))
        assert np.abs(gpu_n[i] - cpu_n).max() <= 2e-5
        fast_p, fast_n, _ = fast(palette[i], j, w, positions, normals)
        assert np.abs(gpu_p[i] - fast_p).max() <= 2e-5 * max(1.0, float(np.abs(cpu_p).max()))
    ring = 257 + middle  # the cylinder's middle ring
    assert np.abs(gpu_p[1, ring] - positions[ring] * [-1, 1, -1]).max() < 1e-5  # the short arc on the GPU too


def test_renderer_draws_dqs_and_it_differs_from_lbs_on_a_twist(ctx):
    """A two-joint twisted cylinder drawn by Renderer(skinning=...): the LBS image has the pinched
    waist, so the two images differ; a bad skinning name is a RenderError."""
    from skeletal.render.errors import RenderError
    from skeletal.render.renderer import Renderer

    asset = twisted_limb_asset()
    from skeletal.render.layout import pose_at

    world, morph = pose_at(asset, asset.clip("twist"), [1.0], loop="clamp")
    images = {}
    for method in ("lbs", "dqs"):
        with Renderer(asset, 96, 96, skinning=method, samples=0, ground=False, camera="yaw=0,pitch=0") as r:
            images[method] = r.draw((world, morph)).astype(np.int32)
            assert method.upper() in r.describe()
    assert np.abs(images["lbs"] - images["dqs"]).sum(axis=2).astype(bool).sum() > 30
    with pytest.raises(RenderError, match="skinning"):
        Renderer(asset, 32, 32, skinning="quaternion")


def twisted_limb_asset(twist_degrees=180.0):
    """An asset: a vertical cylinder skinned to two joints; clip "twist" turns joint 1 about the limb's
    axis (y) from 0 to ``twist_degrees`` over one second."""
    from skeletal.asset import Asset
    from skeletal.document import Animation, Channel, Document, Material, Mesh, Node, Primitive, Skin

    positions, normals, joints, weights, _ = cylinder(rings=25, sides=24, length=2.0, radius=0.3, blend=1.0)
    rings, sides = 25, 24
    indices = []
    for r in range(rings - 1):
        for s in range(sides):
            a, b = r * sides + s, r * sides + (s + 1) % sides
            indices += [a, a + sides, b, b, a + sides, b + sides]
    nodes = [Node(name="upper", children=[1], translation=np.zeros(3)),
             Node(name="lower", translation=np.array([0.0, 1.0, 0.0]), parent=0),
             Node(name="limb", mesh=0, skin=0)]
    inverse_bind = np.repeat(np.eye(4)[None], 2, 0)
    inverse_bind[1, 1, 3] = -1.0
    prim = Primitive(positions=positions, normals=normals, indices=np.array(indices, np.uint32),
                     joints=joints.astype(np.uint32), weights=weights, material=0)
    half = np.radians(twist_degrees) / 2
    times = np.array([0.0, 1.0], np.float32)
    values = np.array([[0, 0, 0, 1], [0, np.sin(half), 0, np.cos(half)]], np.float32)
    doc = Document(path="limb.gltf", nodes=nodes, meshes=[Mesh("limb", [prim])],
                   skins=[Skin("limb", np.arange(2), inverse_bind)],
                   animations=[Animation("twist", [Channel(1, "rotation", "LINEAR", times, values)])],
                   scenes=[[0, 2]], scene=0, materials=[Material("skin", np.array([0.85, 0.55, 0.4, 1.0]))])
    return Asset(doc)


def test_render_command_takes_skinning(ctx, tmp_path):
    pytest.importorskip("imageio.v3", reason="imageio is not installed")
    from click.testing import CliRunner

    from skeletal.cli import cli

    out = tmp_path / "dqs.png"
    result = CliRunner().invoke(cli, ["render", "--skinning", "dqs", "--size", "64x48", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert out.stat().st_size > 0
    bad = CliRunner().invoke(cli, ["render", "--skinning", "both", "--out", str(tmp_path / "x.png")])
    assert bad.exit_code != 0 and "both" in bad.output
