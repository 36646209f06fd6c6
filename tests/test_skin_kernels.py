"""The float32 fast skinning path (skin_into) against the float64 reference kernel (skin)."""

import tracemalloc

import numpy as np
import pytest

from skeletal.errors import SkeletalError
from skeletal.quat import compose_trs
from skeletal.skinning.lbs import CHUNK, normalize_weights, pack_palette, skin, skin_into

from fixtures.rigs import random_quats


def make_case(rng, v, k, n_joints=9, joint_dtype=np.int32, mirrored=True):
    """Palette (rotation, translation, non-uniform scale 0.5-2, some mirrored), random influences."""
    scale = rng.uniform(0.5, 2.0, (n_joints, 3))
    if mirrored:
        scale[::4, 0] *= -1
    palette = compose_trs(rng.normal(size=(n_joints, 3)), random_quats(rng, n_joints), scale)
    joints = rng.integers(0, n_joints, size=(v, k)).astype(joint_dtype)
    weights = normalize_weights(rng.uniform(0, 1, size=(v, k)).astype(np.float32))
    positions = rng.normal(size=(v, 3)).astype(np.float32)
    normals = rng.normal(size=(v, 3))
    normals = (normals / np.linalg.norm(normals, axis=1, keepdims=True)).astype(np.float32)
    tangents = np.concatenate([rng.normal(size=(v, 3)), np.sign(rng.normal(size=(v, 1)))], axis=1).astype(np.float32)
    return palette, joints, weights, positions, normals, tangents


def fast(palette, joints, weights, positions, normals=None, tangents=None, **kw):
    out_p = np.full_like(positions, np.nan)
    out_n = None if normals is None else np.full_like(normals, np.nan)
    out_t = None if tangents is None else np.full_like(tangents, np.nan)
    return skin_into(palette, joints, weights, positions, normals, tangents, out_p, out_n, out_t, **kw)


def well_conditioned(palette, joints, weights, limit=1e3):
    """Vertices whose blended 3x3 has condition number below ``limit`` (float32 cofactors of nearly
    singular blends lose digits in any implementation)."""
    blended = np.einsum("vk,vkij->vij", weights.astype(np.float64), palette[joints][:, :, :3, :3])
    return np.linalg.cond(blended) < limit


@pytest.mark.parametrize("k, joint_dtype", [(1, np.uint8), (2, np.uint16), (3, np.int64), (4, np.uint8),
                                            (4, np.int32), (8, np.uint16), (12, np.int32)])
def test_fast_path_matches_float64_reference(k, joint_dtype):
    rng = np.random.default_rng(100 + k)
    v = 2 * CHUNK + 3  # several chunks, an odd tail
    palette, joints, weights, positions, normals, tangents = make_case(rng, v, k, joint_dtype=joint_dtype)
    out_p, out_n, out_t = fast(palette.astype(np.float32), joints, weights, positions, normals, tangents)
    ref_p, ref_n, ref_t = skin(palette, joints.astype(np.int64), weights, positions, normals, tangents)
    size = np.abs(ref_p).max()
    np.testing.assert_allclose(out_p, ref_p, rtol=1e-5, atol=1e-5 * size)
    ok = well_conditioned(palette, joints, weights)
    assert ok.mean() > 0.95
    np.testing.assert_allclose(out_n[ok], ref_n[ok], atol=1e-5)
    np.testing.assert_allclose(out_t[ok, :3], ref_t[ok, :3], atol=1e-5)
    np.testing.assert_allclose(out_n, ref_n, atol=2e-3)  # nearly singular blends too, looser
    np.testing.assert_array_equal(out_t[:, 3], tangents[:, 3])


def test_palette_forms_agree():
    rng = np.random.default_rng(1)
    palette, joints, weights, positions, normals, _ = make_case(rng, 1001, 4)
    p44 = palette.astype(np.float32)
    results = [fast(p, joints, weights, positions, normals) for p in (p44, p44[:, :3, :], palette, pack_palette(palette))]
    for p, n, _ in results[1:]:
        np.testing.assert_array_equal(p, results[0][0])
        np.testing.assert_array_equal(n, results[0][1])


def test_pack_palette_layout_and_batches():
    rng = np.random.default_rng(2)
    pal = rng.normal(size=(2, 3, 5, 3, 4))
    packed = pack_palette(pal)
    assert packed.shape == (2, 3, 5, 16) and packed.dtype == np.float32
    cols = packed.reshape(2, 3, 5, 4, 4)  # [..., column, row]
    np.testing.assert_allclose(cols[..., :3], np.swapaxes(pal, -1, -2), rtol=1e-6)
    np.testing.assert_array_equal(cols[..., 3], 0.0)
    out = np.empty((2, 3, 5, 16), np.float32)
    assert pack_palette(pal, out) is out


def test_outputs_written_in_place_without_allocation():
    rng = np.random.default_rng(3)
    v = 50_000
    palette, joints, weights, positions, normals, tangents = make_case(rng, v, 4, joint_dtype=np.uint8)
    packed = pack_palette(palette)
    out_p, out_n, out_t = np.full((v, 3), np.nan, np.float32), np.full((v, 3), np.nan, np.float32), np.full((v, 4), np.nan, np.float32)
    args = (packed, joints, weights, positions, normals, tangents, out_p, out_n, out_t)
    skin_into(*args)  # compile
    out_p[:], out_n[:], out_t[:] = np.nan, np.nan, np.nan
    tracemalloc.start()
    try:
        for _ in range(3):
            result = skin_into(*args)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result[0] is out_p and result[1] is out_n and result[2] is out_t
    assert np.isfinite(out_p).all() and np.isfinite(out_n).all() and np.isfinite(out_t).all()
    assert peak < 64 * 1024, f"{peak} bytes allocated while skinning (outputs are {out_p.nbytes} bytes each)"
    # The (J, 4, 4) form packs into a reused per-thread buffer: still no per-call arrays.
    skin_into(palette.astype(np.float32), *args[1:])
    tracemalloc.start()
    try:
        skin_into(palette.astype(np.float32), *args[1:])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024 + palette.astype(np.float32).nbytes


def test_in_place_and_interleaved_records():
    rng = np.random.default_rng(4)
    v = 777
    palette, joints, weights, positions, normals, tangents = make_case(rng, v, 4)
    p32 = palette.astype(np.float32)
    dense = fast(p32, joints, weights, positions, normals, tangents)
    # interleaved vertex records [p p p s n n n s t t t t s] with sentinels that must survive
    rec_in = np.full((v, 13), 7.0, np.float32)
    rec_in[:, 0:3], rec_in[:, 4:7], rec_in[:, 8:12] = positions, normals, tangents
    rec_out = np.full((v, 13), -3.0, np.float32)
    skin_into(p32, joints, weights, rec_in[:, 0:3], rec_in[:, 4:7], rec_in[:, 8:12],
              rec_out[:, 0:3], rec_out[:, 4:7], rec_out[:, 8:12])
    np.testing.assert_array_equal(rec_out[:, 0:3], dense[0])
    np.testing.assert_array_equal(rec_out[:, 4:7], dense[1])
    np.testing.assert_array_equal(rec_out[:, 8:12], dense[2])
    np.testing.assert_array_equal(rec_out[:, [3, 7, 12]], -3.0)
    # in place
    p, n, t = positions.copy(), normals.copy(), tangents.copy()
    skin_into(p32, joints, weights, p, n, t, p, n, t)
    np.testing.assert_array_equal(p, dense[0])
    np.testing.assert_array_equal(n, dense[1])
    np.testing.assert_array_equal(t, dense[2])
    # strided joints/weights (every other row of a larger array)
    big_j = np.repeat(joints, 2, axis=0)
    big_w = np.repeat(weights, 2, axis=0)
    strided = fast(p32, big_j[::2], big_w[::2], positions, normals, tangents)
    np.testing.assert_array_equal(strided[0], dense[0])


def test_zero_weight_rows_and_zero_influences():
    rng = np.random.default_rng(5)
    palette, joints, weights, positions, normals, tangents = make_case(rng, 64, 4)
    weights[::3] = 0.0  # rows with no weight at all: the blended matrix is zero
    weights[1::3, 2:] = 0.0  # rows using 2 of 4 influences
    weights[1::3, :2] = normalize_weights(weights[1::3, :2])
    out_p, out_n, out_t = fast(palette.astype(np.float32), joints, weights, positions, normals, tangents)
    ref_p, ref_n, ref_t = skin(palette, joints, weights, positions, normals, tangents)
    np.testing.assert_array_equal(out_p[::3], 0.0)
    np.testing.assert_array_equal(out_n[::3], 0.0)
    np.testing.assert_array_equal(out_t[::3, :3], 0.0)
    np.testing.assert_allclose(out_p, ref_p, atol=1e-5)
    np.testing.assert_allclose(out_n, ref_n, atol=1e-5)
    np.testing.assert_allclose(out_t, ref_t, atol=1e-5)


def test_positions_only_and_tangents_without_normals():
    rng = np.random.default_rng(6)
    palette, joints, weights, positions, normals, tangents = make_case(rng, 301, 4)
    ref_p, _, ref_t = skin(palette, joints, weights, positions, None, tangents)
    p, n, t = fast(palette.astype(np.float32), joints, weights, positions)
    assert n is None and t is None
    np.testing.assert_allclose(p, ref_p, atol=2e-5)
    p, n, t = fast(palette.astype(np.float32), joints, weights, positions, None, tangents)
    np.testing.assert_allclose(t, ref_t, atol=1e-5)


def test_cofactor_normals_under_non_uniform_scale_and_mirroring():
    palette = compose_trs(np.zeros((2, 3)), np.array([[0, 0, 0, 1.0]] * 2), np.array([[4.0, 1.0, 1.0], [-1.0, 1.0, 1.0]]))
    tangent = np.array([[1.0, 1.0, 0.0, 1.0]], np.float32)
    normal = (np.array([[1.0, -1.0, 0.0]]) / np.sqrt(2)).astype(np.float32)
    ones = np.ones((1, 1), np.float32)
    _, n, t = fast(palette.astype(np.float32), np.zeros((1, 1), np.uint8), ones, np.zeros((1, 3), np.float32), normal, tangent)
    assert abs(np.dot(n[0], t[0, :3])) < 1e-6
    assert abs(np.linalg.norm(n[0]) - 1) < 1e-6
    # the mirrored joint moves +x to -x and the normal still faces away from the origin
    _, n, _ = fast(palette.astype(np.float32), np.ones((1, 1), np.uint8), ones, np.array([[1.0, 0, 0]], np.float32),
                   np.array([[1.0, 0, 0]], np.float32))
    np.testing.assert_allclose(n[0], [-1, 0, 0], atol=1e-6)


def test_linear_normal_transform_is_the_blended_3x3():
    rng = np.random.default_rng(7)
    palette, joints, weights, positions, normals, _ = make_case(rng, 500, 4, mirrored=False)
    _, n, _ = fast(palette.astype(np.float32), joints, weights, positions, normals, normal_transform="linear")
    blended = np.einsum("vk,vkij->vij", weights.astype(np.float64), palette[joints])[:, :3, :3]
    expected = np.einsum("vij,vj->vi", blended, normals)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(n, expected, atol=1e-5)
    # for a single rigid joint both transforms agree
    rigid = compose_trs(rng.normal(size=(1, 3)), random_quats(rng, 1), np.ones((1, 3))).astype(np.float32)
    one = np.zeros((500, 1), np.uint8)
    w1 = np.ones((500, 1), np.float32)
    a = fast(rigid, one, w1, positions, normals)[1]
    b = fast(rigid, one, w1, positions, normals, normal_transform="linear")[1]
    np.testing.assert_allclose(a, b, atol=1e-6)


def test_out_of_range_joints_read_the_last_joint():
    rng = np.random.default_rng(8)
    palette, joints, weights, positions, normals, _ = make_case(rng, 40, 2, n_joints=5)
    bad = joints.copy()
    bad[::2, 0] = 200
    bad[1::2, 1] = -7
    clamped = joints.copy()
    clamped[::2, 0] = 4
    clamped[1::2, 1] = 4
    a = fast(palette.astype(np.float32), bad, weights, positions, normals)
    b = fast(palette.astype(np.float32), clamped, weights, positions, normals)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])


@pytest.mark.parametrize("v", [40, 5000])  # below and above PAD_MIN_VERTICES (uint8: padded palette)
@pytest.mark.parametrize("packed", [False, True])
def test_out_of_range_uint8_joints_read_the_last_joint(v, packed):
    rng = np.random.default_rng(11)
    palette, joints, weights, positions, normals, _ = make_case(rng, v, 4, n_joints=7, joint_dtype=np.uint8)
    pal = pack_palette(palette) if packed else palette.astype(np.float32)
    bad = joints.copy()
    bad[::3, 1] = 255
    bad[1::3, 3] = 7
    clamped = np.where(bad >= 7, 6, bad).astype(np.uint8)
    a = fast(pal, bad, weights, positions, normals)
    b = fast(pal, clamped.astype(np.int32), weights, positions, normals)  # int32: the clamping kernel
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])


def test_uint8_joints_with_a_full_palette():
    rng = np.random.default_rng(12)
    palette, joints, weights, positions, normals, _ = make_case(rng, 6000, 4, n_joints=300, joint_dtype=np.uint8)
    a = fast(pack_palette(palette), joints, weights, positions, normals)
    ref = skin(palette, joints, weights, positions, normals)
    np.testing.assert_allclose(a[0], ref[0], atol=1e-5 * np.abs(ref[0]).max())


def test_empty_and_tiny_meshes():
    rng = np.random.default_rng(9)
    for v in (0, 1, 2, 3):
        palette, joints, weights, positions, normals, _ = make_case(rng, v, 4)
        p, n, _ = fast(palette.astype(np.float32), joints, weights, positions, normals)
        ref_p, ref_n, _ = skin(palette, joints, weights, positions, normals)
        np.testing.assert_allclose(p, ref_p, atol=1e-5)
        np.testing.assert_allclose(n, ref_n, atol=1e-5)


def test_wrong_inputs_give_clear_errors():
    rng = np.random.default_rng(10)
    palette, joints, weights, positions, normals, tangents = make_case(rng, 10, 4)
    p32 = palette.astype(np.float32)
    out3 = np.empty((10, 3), np.float32)

    def call(**changes):
        args = dict(palette=p32, joints=joints, weights=weights, positions=positions, normals=normals, tangents=None,
                    out_positions=out3, out_normals=np.empty((10, 3), np.float32), out_tangents=None)
        args.update(changes)
        return skin_into(**args)

    cases = [
        (dict(positions=np.zeros((10, 4), np.float32)), "positions must have shape"),
        (dict(positions=positions.astype(np.float64)), "positions must be float32"),
        (dict(positions=np.zeros((10, 6), np.float32)[:, ::2]), "contiguous"),
        (dict(weights=weights[:5]), r"weights must have shape \(10, 4\)"),
        (dict(weights=weights[:, :3]), r"weights must have shape \(10, 4\)"),
        (dict(joints=joints.astype(np.float32)), "joints must be uint8, uint16, int32 or int64"),
        (dict(joints=joints[:9]), r"joints must be \(10, K\)"),
        (dict(joints=np.zeros((10, 0), np.int32), weights=np.zeros((10, 0), np.float32)), "K = 0"),
        (dict(out_normals=None), "normals given without out_normals"),
        (dict(normals=None), "out_normals given without normals"),
        (dict(out_positions=np.empty((9, 3), np.float32)), "out_positions must have shape"),
        (dict(out_positions=np.empty((10, 3), np.float64)), "out_positions must be float32"),
        (dict(tangents=tangents), "tangents given without out_tangents"),
        (dict(tangents=tangents[:, :3], out_tangents=np.empty((10, 3), np.float32)), "tangents must have shape"),
        (dict(palette=np.zeros((5, 2, 4), np.float32)), r"palette must be"),
        (dict(palette=np.zeros((5, 12), np.float32)), r"palette must be packed"),
        (dict(palette=np.zeros((0, 16), np.float32)), "no joints"),
        (dict(palette=np.zeros((5, 4, 4), np.int32)), "floating point"),
    ]
    for changes, message in cases:
        with pytest.raises(SkeletalError, match=message):
            call(**changes)
    readonly = np.empty((10, 3), np.float32)
    readonly.flags.writeable = False
    with pytest.raises(SkeletalError, match="read-only"):
        call(out_positions=readonly)
    with pytest.raises(SkeletalError, match="normal_transform"):
        skin_into(p32, joints, weights, positions, None, None, out3, normal_transform="inverse")
    with pytest.raises(SkeletalError):
        skin_into(p32, joints, weights, positions.tolist(), None, None, out3)
