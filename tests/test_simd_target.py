"""The kernels' vector width follows the CPU numba compiles for, not the CPU the tests run on:
``NUMBA_CPU_NAME=haswell NUMBA_CPU_FEATURES=`` (empty: that CPU's own features) builds AVX2 code on any
x86-64 host, which must take the 8-lane skinning groups, say so in the benchmark titles, hold no
512-bit instruction, and skin to the same result as the host's build (the skinning tests' tolerance)."""

import json
import os
import platform
import subprocess
import sys

import numpy as np
import pytest

from skeletal import _simd
from skeletal.skinning.ir import CHUNK, LANES, planar_lanes
from skeletal.skinning.lbs import pack_palette, skin, skin_into

from test_skin_kernels import make_case, well_conditioned

X86 = platform.machine().lower() in ("x86_64", "amd64")


def test_the_width_follows_the_compile_target():
    bits = _simd.vector_bits()
    assert bits in (0, 128, 256, 512)
    assert planar_lanes() == (LANES if bits >= 512 else 8)
    assert _simd.float32_lanes() == max(4, min(16, bits // 32))
    if _simd.target_is_host() and X86:  # the probe agrees with the host's feature list
        assert bits == _simd._bits_from_features()
        assert _simd.isa_name() in ("AVX-512", "AVX2", "AVX", "SSE")


def _run_for_haswell(script: str, case: dict, tmp_path):
    """``script`` in a child process whose numba compiles for haswell (AVX2, no AVX-512), given
    ``case`` saved as an .npz (argv[1]) and an output path (argv[2]): (its last stdout line as JSON,
    the arrays it saved)."""
    np.savez(tmp_path / "case.npz", **case)
    env = dict(os.environ, NUMBA_CPU_NAME="haswell", NUMBA_CPU_FEATURES="")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "case.npz"), str(tmp_path / "out.npz")],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), np.load(tmp_path / "out.npz")


_CHILD = """
import json, re, sys
import numpy as np
from numba import njit
from skeletal.anim.pose_ir import _wide_vectors
from skeletal.bench import machine_info, vector_info
from skeletal.skinning.ir import _skin_chunk, _skin_chunk_parallel, planar_lanes
from skeletal.skinning.lbs import pack_palette, skin_into

case = np.load(sys.argv[1])
packed = pack_palette(case["palette"])
p, n = case["positions"], case["normals"]
out_p, out_n = np.empty_like(p), np.empty_like(n)
skin_into(packed, case["joints"], case["weights"], p, n, None, out_p, out_n)
np.savez(sys.argv[2], positions=out_p, normals=out_n)

@njit(cache=False)
def group_kernel(palette, joints, weights, positions, normals, out_p, out_n):
    _skin_chunk(palette, joints, weights, positions, normals, None, out_p, out_n, None, 0, (0, 0, 0, 0), None, None)

@njit(cache=False)
def outlined_kernel(palette, joints, weights, positions, normals, out_p, out_n):
    _skin_chunk_parallel(palette, joints, weights, positions, normals, None, out_p, out_n, None, 0, (0, 0, 0, 0),
                         None, None)

group_kernel(packed, case["joints"], case["weights"], p, n, out_p, out_n)
asm = "".join(group_kernel.inspect_asm().values())
out_p2, out_n2 = np.empty_like(p), np.empty_like(n)
outlined_kernel(packed, case["joints"], case["weights"], p, n, out_p2, out_n2)
asm2 = "".join(outlined_kernel.inspect_asm().values())
print(json.dumps({"vector": vector_info(), "cpu_model": machine_info()["cpu_model"], "lanes": planar_lanes(),
                  "wide": _wide_vectors(), "zmm": len(re.findall("zmm", asm)), "ymm": len(re.findall("ymm", asm)),
                  "outlined": "skeletal_planar8_lbs" in asm2 and "skeletal_planar8_lbs" not in asm,
                  "outlined_same": bool((out_p2 == out_p).all() and (out_n2 == out_n).all())}))
"""


@pytest.mark.skipif(not X86, reason="the AVX2 target is an x86-64 one")
def test_an_avx2_build_takes_eight_lanes_and_skins_like_the_host(tmp_path):
    rng = np.random.default_rng(11)
    v = 5 * 16 + 8 + 3  # whole 16- and 8-vertex groups and a tail for the two-vertex kernel
    palette, joints, weights, positions, normals, _ = make_case(rng, v, 4, joint_dtype=np.uint16)
    zero = np.isin(np.arange(v), [5, 40, v - 2])  # zero normals (8-lane groups and the pair tail) stay zero
    normals[zero] = 0.0
    joints[[6, 41]] = 0  # wholly on a mirrored joint (make_case mirrors every 4th): normals flipped outward
    assert np.linalg.det(palette[0, :3, :3]) < 0
    case = {"palette": palette.astype(np.float32), "joints": joints, "weights": weights,
            "positions": positions, "normals": normals}
    got, avx2 = _run_for_haswell(_CHILD, case, tmp_path)
    assert got["vector"] == {"llvm_cpu": "haswell", "isa": "AVX2", "vector_bits": 256, "emulated": True}
    assert "code for haswell" in got["cpu_model"] and "AVX2: 256-bit vectors" in got["cpu_model"]
    assert got["lanes"] == 8 and got["wide"] is False
    assert got["zmm"] == 0 and got["ymm"] > 0
    assert got["outlined"] and got["outlined_same"]  # a prange body's chunk: its own function, the same bits

    out_p, out_n = np.empty_like(positions), np.empty_like(normals)
    skin_into(pack_palette(case["palette"]), joints, weights, positions, normals, None, out_p, out_n)
    ref_p, ref_n, _ = skin(palette, joints.astype(np.int64), weights, positions, normals)
    ok = well_conditioned(palette, joints, weights) & ~zero
    assert ok[[6, 41]].all()
    size = np.abs(ref_p).max()
    for p, n in ((avx2["positions"], avx2["normals"]), (out_p, out_n)):
        assert (n[zero] == 0).all()
        np.testing.assert_allclose(p, ref_p, rtol=1e-5, atol=1e-5 * size)
        np.testing.assert_allclose(n[ok], ref_n[ok], atol=1e-5)
    np.testing.assert_allclose(avx2["positions"], out_p, rtol=1e-5, atol=1e-5 * size)
    np.testing.assert_allclose(avx2["normals"][ok], out_n[ok], atol=1e-5)


_POSE_CHILD = """
import json, re, sys
import numpy as np
from numba import njit
from skeletal.anim.pose import depth_order, skin_palette, world_matrices, world_subset_staged
from skeletal.anim.pose_ir import _spread_rows, _wide_vectors

case = np.load(sys.argv[1])
parents, poses, joints, inverse_bind = case["parents"], case["poses"], case["joints"], case["inverse_bind"]
world = world_matrices(parents, poses)
palettes = skin_palette(world, joints, inverse_bind)

@njit(cache=False)
def staged(parents, nodes, pose, world):
    world_subset_staged(parents, nodes, pose, world)

nodes = depth_order(parents, np.arange(len(parents)))
staged_world = np.empty((len(poses), len(parents), 4, 4))
for b in range(len(poses)):
    staged(parents, nodes, poses[b], staged_world[b])
np.savez(sys.argv[2], world=world, palettes=palettes, staged=staged_world)
asm = "".join(staged.inspect_asm().values())
print(json.dumps({"wide": _wide_vectors(), "spread": _spread_rows(), "vpermpd": len(re.findall("vpermpd", asm)),
                  "zmm": len(re.findall("zmm", asm))}))
"""


def _pose_case(rng, nodes=37, batch=3):
    parents = np.array([-1] + [int(rng.integers(0, i)) for i in range(1, nodes)], np.int32)
    poses = np.empty((batch, nodes, 10))
    poses[..., :3] = rng.normal(size=(batch, nodes, 3))
    q = rng.normal(size=(batch, nodes, 4))
    poses[..., 3:7] = q / np.linalg.norm(q, axis=-1, keepdims=True)
    poses[..., 7:] = rng.uniform(0.5, 1.5, (batch, nodes, 3))
    poses[0, 5, :3] = -0.0  # signs of zero travel through the products
    joints = rng.choice(nodes, 20, replace=False).astype(np.int64)
    inverse_bind = np.tile(np.eye(4), (20, 1, 1))
    inverse_bind[:, :3, :] += rng.normal(scale=0.3, size=(20, 3, 4))
    return {"parents": parents, "poses": poses, "joints": joints, "inverse_bind": inverse_bind}


@pytest.mark.skipif(not X86, reason="the AVX2 target is an x86-64 one")
def test_an_avx2_build_poses_to_the_same_bits_as_the_host(tmp_path):
    """World rows and palettes (float64) are the same bits in every target's vector form: AVX2's
    products spread the parent's rows by shuffles (``pose_ir._spread_rows_codegen``), AVX-512's take two
    rows at once (``pose_ir._two_rows_codegen``)."""
    from skeletal.anim.pose import skin_palette, world_matrices

    case = _pose_case(np.random.default_rng(5))
    got, avx2 = _run_for_haswell(_POSE_CHILD, case, tmp_path)
    assert got == {"wide": False, "spread": 2, "vpermpd": got["vpermpd"], "zmm": 0} and got["vpermpd"] > 0
    world = world_matrices(case["parents"], case["poses"])
    for name, ref in (("world", world), ("staged", world), ("palettes", skin_palette(world, case["joints"],
                                                                                      case["inverse_bind"]))):
        np.testing.assert_array_equal(avx2[name], ref, err_msg=name)
        assert np.array_equal(np.signbit(avx2[name]), np.signbit(ref)), name


_DQ_CHILD = """
import json, re, sys
import numpy as np
from numba import njit
from skeletal.skinning.ir import planar_lanes
from skeletal.skinning.dq_ir import _skin_dq_chunk
from skeletal.skinning.dqs import _hemisphere_signs, _signed_records, dq_hemisphere_pairs, skin_dq_into

case = np.load(sys.argv[1])
joints, weights, p, n = case["joints"], case["weights"], case["positions"], case["normals"]
pairs = dq_hemisphere_pairs(joints, weights)
out, same = {}, {}
for scale in ("rigid", "diagonal", "sheared"):
    packed = case[scale]
    table = [np.empty_like(p), np.empty_like(n)]
    skin_dq_into(packed, joints, weights, p, n, None, *table)  # the sign table on every vertex
    masked = [np.empty_like(p), np.empty_like(n)]
    skin_dq_into(packed, joints, weights, p, n, None, *masked, pairs=pairs)  # sign-free, the table where pairs fail
    same[scale] = bool(np.array_equal(table[0], masked[0]) and np.array_equal(table[1], masked[1])
                       and not _hemisphere_signs(packed, pairs.pairs, np.empty(len(packed), np.int32)))
    out.update({scale + "_p": table[0], scale + "_n": table[1]})
    if scale != "diagonal":  # (the group kernel takes a diagonal S as any S: the sheared case's code)
        small = [np.empty_like(p[:200]), np.empty_like(n[:200])]  # under SIGNED_MIN_VERTICES: the group kernel
        skin_dq_into(packed, joints[:200], weights[:200], p[:200], n[:200], None, *small)
        out.update({scale + "_small_p": small[0], scale + "_small_n": small[1]})
np.savez(sys.argv[2], **out)

@njit(cache=False)
def signed_kernel(palette, joints, weights, positions, normals, out_p, out_n, signs):
    _skin_dq_chunk(palette, joints, weights, positions, normals, None, out_p, out_n, None, 0, (0, 0, 0, 0), True,
                   None, signs)

signs = np.empty((len(case["sheared"]),) * 2, np.int32)
_signed_records(case["sheared"], signs)
signed_kernel(case["sheared"], joints, weights, p, n, np.empty_like(p), np.empty_like(n), signs)
asm = "".join(signed_kernel.inspect_asm().values())
print(json.dumps({"lanes": planar_lanes(), "same": same, "zmm": len(re.findall("zmm", asm)),
                  "ymm": len(re.findall("ymm", asm))}))
"""


@pytest.mark.skipif(not X86, reason="the AVX2 target is an x86-64 one")
def test_an_avx2_build_dual_quaternion_skins_in_eight_lanes_like_the_reference(tmp_path):
    """DQS's planar kernels (the signed-record kernel with the sign table, without it where the mesh's pairs
    pass, and the group kernel of small meshes) take 8 lanes on AVX2: no 512-bit instruction, the reference's
    result for rigid, axis-aligned and sheared scale, and the pairs' masks give the table's output bit for
    bit where some pairs fail (their 16-vertex blocks are two 8-vertex groups; the mesh's partial last block
    ends in the two-vertex kernel either way)."""
    from skeletal.skinning.dqs import pack_dq_palette, skin_dq, skin_dq_into

    from test_skin_dq_hemispheres import chain_mesh, chain_rig, turn

    # tangled_case's mesh: a 24-joint chain whose joints 0, 1, 2 no signs put in one hemisphere, blended
    # together only by the chosen rows (in three 16-vertex blocks, the last the mesh's partial one)
    chosen = [50, CHUNK + 40, 2 * CHUNK + 3 * LANES + 2, 53, CHUNK + 41, 2 * CHUNK + 3 * LANES + 4]
    rng = np.random.default_rng(41)
    n_joints, v = 24, 2 * CHUNK + 3 * LANES + 5
    joints, weights, positions, normals = chain_mesh(rng, v, n_joints, 4)
    joints[joints.min(axis=1) < 3] += 3
    for i, row in enumerate(chosen):
        joints[row] = [[0, 1, 2, 3], [1, 2, 0, 3], [2, 0, 1, 3]][i % 3]
    weights[chosen] = [0.4, 0.3, 0.2, 0.1]
    joints = joints.astype(np.uint8)
    case, palettes = {}, {}
    for scale in (None, "diagonal", "sheared"):
        palette = chain_rig(rng, n_joints, 40.0, scale)
        for joint, degrees in ((0, 0.0), (1, 240.0), (2, 120.0)):
            palette[joint, :3, :3] = turn(np.array([0.0, 0.0, 1.0]), degrees) @ palette[joint, :3, :3]
        palettes[scale or "rigid"] = palette
        case[scale or "rigid"] = pack_dq_palette(palette)
    case.update(joints=joints, weights=weights, positions=positions, normals=normals)
    got, avx2 = _run_for_haswell(_DQ_CHILD, case, tmp_path)
    assert got["lanes"] == 8 and got["zmm"] == 0 and got["ymm"] > 0
    assert got["same"] == {"rigid": True, "diagonal": True, "sheared": True}
    for scale in ("rigid", "diagonal", "sheared"):
        ref_p, ref_n, _ = skin_dq(palettes[scale], joints, weights, positions, normals)
        size = float(np.abs(ref_p).max())
        host = [np.empty_like(positions), np.empty_like(normals)]
        skin_dq_into(case[scale], joints, weights, positions, normals, None, *host)
        for p, n in ((avx2[scale + "_p"], avx2[scale + "_n"]), tuple(host)):
            np.testing.assert_allclose(p, ref_p, rtol=1e-5, atol=1e-5 * size, err_msg=scale)
            np.testing.assert_allclose(n, ref_n, atol=1e-5, err_msg=scale)
        if scale != "diagonal":
            np.testing.assert_allclose(avx2[scale + "_small_p"], ref_p[:200], rtol=1e-5, atol=1e-5 * size,
                                       err_msg=scale)
            np.testing.assert_allclose(avx2[scale + "_small_n"], ref_n[:200], atol=1e-5, err_msg=scale)
