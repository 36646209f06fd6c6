"""skin_into's planar group kernel (dense rows, K unrolled, no tangents: 16 vertices per group, one lane
per vertex after the blend) against the float64 reference and the two-vertex kernel it stands in for."""

import numpy as np
import pytest

from skeletal.errors import SkeletalError
from skeletal.skinning.lbs import ALIGN_MIN_VERTICES, CHUNK, LANES, pack_palette, skin, skin_into

from test_skin_kernels import fast, make_case, well_conditioned


def strided_twin(a):
    """The same rows as interleaved records (a strided view): skin_into then takes the two-vertex kernel."""
    rec = np.zeros((len(a), a.shape[1] + 2), a.dtype)
    rec[:, : a.shape[1]] = a
    return rec[:, : a.shape[1]]


@pytest.mark.parametrize("v", [1, LANES - 1, LANES, LANES + 5, 3 * LANES + 7, CHUNK + LANES + 3])
@pytest.mark.parametrize("k, joint_dtype", [(1, np.uint8), (2, np.int64), (4, np.uint16), (4, np.int32),
                                            (8, np.uint8)])
def test_planar_kernel_matches_reference_and_two_vertex_kernel(v, k, joint_dtype):
    rng = np.random.default_rng(7 * v + k)
    palette, joints, weights, positions, normals, _ = make_case(rng, v, k, joint_dtype=joint_dtype)
    p32 = palette.astype(np.float32)
    ref_p, ref_n, _ = skin(palette, joints.astype(np.int64), weights, positions, normals)
    ok = well_conditioned(palette, joints, weights)
    size = np.abs(ref_p).max()
    for mode in ("cofactor", "linear"):
        out_p, out_n, _ = fast(p32, joints, weights, positions, normals, normal_transform=mode)
        two_p, two_n, _ = fast(p32, joints, weights, strided_twin(positions), strided_twin(normals),
                               normal_transform=mode)
        np.testing.assert_allclose(out_p, two_p, rtol=1e-5, atol=1e-5 * size)
        np.testing.assert_allclose(out_n[ok], two_n[ok], atol=1e-5)
        np.testing.assert_allclose(out_p, ref_p, rtol=1e-5, atol=1e-5 * size)
        if mode == "cofactor":
            np.testing.assert_allclose(out_n[ok], ref_n[ok], atol=1e-5)
        assert np.allclose(np.linalg.norm(out_n[ok], axis=1), 1.0, atol=1e-5)
    # positions only
    out_p, _, _ = fast(p32, joints, weights, positions)
    np.testing.assert_allclose(out_p, ref_p, rtol=1e-5, atol=1e-5 * size)


def test_planar_kernel_clamps_indices_past_the_palette():
    rng = np.random.default_rng(3)
    v = 5 * LANES + 3
    palette, joints, weights, positions, normals, _ = make_case(rng, v, 4, n_joints=5, joint_dtype=np.int32)
    bad = joints.copy()
    bad[::3, 0] = 1000
    bad[1::3, 2] = -7  # negative: also the last joint
    clamped = np.where((bad < 0) | (bad >= 5), 4, bad)
    a = fast(palette.astype(np.float32), bad, weights, positions, normals)
    b = fast(palette.astype(np.float32), clamped, weights, positions, normals)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])


def test_misaligned_packed_palette_gives_the_same_result():
    rng = np.random.default_rng(4)
    v = ALIGN_MIN_VERTICES + 2 * LANES + 1
    palette, joints, weights, positions, normals, _ = make_case(rng, v, 4, joint_dtype=np.uint16)
    packed = pack_palette(palette)
    assert packed.ctypes.data % 64 == 0  # pack_palette allocates on a cache line
    raw = np.empty(packed.size + 1, np.float32)
    shifted = raw[1:].reshape(packed.shape) if raw[1:].ctypes.data % 64 else raw[:-1].reshape(packed.shape)
    shifted[:] = packed
    assert shifted.ctypes.data % 64 != 0
    a = fast(packed, joints, weights, positions, normals)
    b = fast(shifted, joints, weights, positions, normals)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])


def test_pack_palette_into_a_reused_buffer():
    rng = np.random.default_rng(5)
    palette = make_case(rng, 3, 2)[0]
    out = np.empty((len(palette), 16), np.float32)
    assert pack_palette(palette, out) is out
    np.testing.assert_array_equal(out, pack_palette(palette))
    np.testing.assert_array_equal(out.reshape(-1, 4, 4)[:, :, :3], palette[:, :3, :].transpose(0, 2, 1).astype(np.float32))
    with pytest.raises(SkeletalError, match="out must be"):
        pack_palette(palette, np.empty((len(palette), 12), np.float32))
    with pytest.raises(SkeletalError, match="out must be"):
        pack_palette(palette, np.empty((len(palette) + 1, 16), np.float32))
    with pytest.raises(SkeletalError, match="floating point"):
        pack_palette(palette.astype(np.int32), out)


def test_bad_arguments_are_named_not_typing_errors():
    rng = np.random.default_rng(6)
    palette, joints, weights, positions, normals, _ = make_case(rng, 20, 4, joint_dtype=np.uint16)
    p32 = palette.astype(np.float32)
    out_p, out_n = np.empty_like(positions), np.empty_like(normals)
    readonly = np.empty_like(positions)
    readonly.flags.writeable = False
    cases = [
        ((p32, joints, weights, positions.astype(np.float64), normals, None, out_p, out_n), "positions must be float32"),
        ((p32, joints, weights, positions, normals, None, readonly, out_n), "read-only"),
        ((p32, joints.astype(np.int8), weights, positions, normals, None, out_p, out_n), "joints must be"),
        ((p32, joints, weights, positions, None, None, out_p, out_n), "without normals"),
        ((p32, joints, weights[:-1], positions, normals, None, out_p, out_n), "weights must have shape"),
        ((p32, joints, weights, positions, normals, None, out_p[:-1], out_n), "out_positions must have shape"),
    ]
    for args, match in cases:
        with pytest.raises(SkeletalError, match=match):
            skin_into(*args)
