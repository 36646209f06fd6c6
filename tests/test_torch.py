"""skeletal.torch: differentiable FK, palettes, LBS and DQS against the numba path and numpy references,
gradcheck in float64, clip <-> tensor round trips, the motion-window Dataset and the pose-fitting example.

One module (torch's import is slow); the shared models in ../shared/assets are skipped when absent.
CUDA cases run only where a GPU is present.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the torch extra is not installed")

import skeletal
import skeletal.torch as st
from skeletal.demo import demo_asset
from skeletal.quat import compose_trs, quat_mul, quat_to_matrix
from skeletal.anim.rig import Rig
from skeletal.anim.sampling import sample
from fixtures.rigs import random_quats, reference_world
from fixtures.shared_assets import ASSETS

ROOT = Path(__file__).resolve().parents[1]
CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny tensors: one thread avoids oversubscription on a shared 2-core machine (restored after)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# -- helpers ----------------------------------------------------------------------------------------


def random_rig(rng, n=7):
    parents = [-1] + [int(rng.integers(0, i)) for i in range(1, n)]
    rest = np.zeros((n, 10))
    rest[:, 0:3] = rng.normal(size=(n, 3))
    rest[:, 3:7] = random_quats(rng, n)
    rest[:, 7:10] = rng.uniform(0.5, 2.0, size=(n, 3))
    return Rig.from_parents([f"j{i}" for i in range(n)], parents, rest)


def random_poses(rng, rig, batch):
    pose = np.repeat(rig.rest[None], batch, axis=0)
    n = len(rig)
    pose[..., 0:3] += rng.normal(scale=0.3, size=(batch, n, 3))
    pose[..., 3:7] = random_quats(rng, batch * n).reshape(batch, n, 4)
    pose[..., 7:10] = rng.uniform(0.5, 2.0, size=(batch, n, 3))
    return pose


def small_skin(rng, joints=5, vertices=12, influences=3, dtype=torch.float64):
    idx = np.stack([rng.choice(joints, size=influences, replace=False) for _ in range(vertices)])
    w = rng.uniform(0.1, 1.0, size=(vertices, influences))
    w /= w.sum(1, keepdims=True)
    positions = rng.normal(size=(vertices, 3))
    normals = rng.normal(size=(vertices, 3))
    normals /= np.linalg.norm(normals, axis=1, keepdims=True)
    as_t = lambda a: torch.as_tensor(a, dtype=dtype)
    return torch.as_tensor(idx), as_t(w), as_t(positions), as_t(normals)


def random_palette(rng, joints, scale=(0.7, 1.4), dtype=torch.float64):
    return torch.as_tensor(compose_trs(rng.normal(size=(joints, 3)), random_quats(rng, joints),
                                       rng.uniform(*scale, size=(joints, 3))), dtype=dtype)


# -- import contract -------------------------------------------------------------------------------


def test_skeletal_does_not_import_torch_and_a_missing_torch_names_the_extra():
    code = (
        "import sys\n"
        "import skeletal\n"
        "assert 'torch' not in sys.modules, 'import skeletal imported torch'\n"
        "sys.modules['torch'] = None\n"
        "try:\n"
        "    import skeletal.torch\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
        "else:\n"
        "    raise SystemExit('imported without torch')\n"
        "from skeletal.bench.torch import bench_rows\n"
        "print(bench_rows(quick=True))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert 'pip install "skeletal[torch]"' in out.stdout
    assert "{'rows': [], 'skipped': 'torch is not installed" in out.stdout  # the bench rows step aside


# -- rotations ---------------------------------------------------------------------------------------


def test_rotation_conversions_round_trip_and_match_numpy():
    rng = np.random.default_rng(1)
    q = random_quats(rng, 200)
    qt = torch.as_tensor(q)
    assert torch.allclose(st.quat_to_matrix(qt), torch.as_tensor(quat_to_matrix(q)), atol=1e-12)
    back = st.matrix_to_quat(st.quat_to_matrix(qt)).numpy()
    assert np.allclose(np.abs(np.sum(back * q, axis=1)), 1.0, atol=1e-12)  # same rotation, up to sign
    d6 = st.quat_to_rot6d(qt)
    assert torch.allclose(st.rot6d_to_matrix(d6), st.quat_to_matrix(qt), atol=1e-12)
    assert torch.allclose(st.rot6d_to_quat(d6).abs(), st.matrix_to_quat(st.quat_to_matrix(qt)).abs(), atol=1e-12)
    # any 6-vector gives a proper rotation
    m = st.rot6d_to_matrix(torch.as_tensor(rng.normal(size=(50, 6))))
    assert torch.allclose(m.transpose(-1, -2) @ m, torch.eye(3, dtype=m.dtype).expand(50, 3, 3), atol=1e-12)
    assert torch.allclose(torch.linalg.det(m), torch.ones(50, dtype=m.dtype), atol=1e-12)
    qa, qb = random_quats(rng, 10), random_quats(rng, 10)
    assert np.allclose(st.quat_mul(torch.as_tensor(qa), torch.as_tensor(qb)).numpy(), quat_mul(qa, qb))
    with pytest.raises(ValueError, match="expected"):
        st.rotation_matrices(torch.zeros(3, 5))


# -- forward kinematics -----------------------------------------------------------------------------


def test_fk_matches_numpy_reference_for_every_batch_shape():
    rng = np.random.default_rng(2)
    rig = random_rig(rng, 9)
    poses = random_poses(rng, rig, 6)
    rig_t = st.rig_tensors(rig, dtype=torch.float64)
    world = st.world_matrices(rig_t, torch.as_tensor(poses))
    for b in range(6):
        assert np.allclose(world[b].numpy(), reference_world(rig.parents, poses[b]), atol=1e-12)
    # extra batch axes, an unbatched pose, a plain Rig, and the numba path
    w23 = st.world_matrices(rig, torch.as_tensor(poses).reshape(2, 3, len(rig), 10))
    assert torch.equal(w23.reshape(world.shape), world)
    assert torch.allclose(st.world_matrices(rig_t, torch.as_tensor(poses[4])), world[4])
    assert np.allclose(skeletal.world_matrices(rig.parents, poses), world.numpy(), atol=1e-12)
    # rotations in other forms give the same world matrices
    q = torch.as_tensor(poses[..., 3:7])
    t, s = torch.as_tensor(poses[..., 0:3]), torch.as_tensor(poses[..., 7:10])
    for rot in (q, st.quat_to_rot6d(q), st.quat_to_matrix(q)):
        assert torch.allclose(st.world_from_rotations(rig_t, rot, t, s), world, atol=1e-12)
        pose = st.compose_pose(rig_t, rot, t, s)
        assert torch.allclose(st.world_matrices(rig_t, pose), world, atol=1e-12)
    # rest translations and scales by default
    rest_t = rig_t.rest
    assert torch.allclose(st.world_from_rotations(rig_t, rest_t[:, 3:7]), st.world_matrices(rig_t, rest_t), atol=1e-12)
    with pytest.raises(ValueError, match="10"):
        st.world_matrices(rig_t, torch.zeros(2, len(rig), 7))
    with pytest.raises(ValueError, match="nodes"):
        st.world_from_rotations(rig_t, torch.zeros(len(rig) + 1, 6))


def test_rig_tensors_levels_and_rig_to_torch():
    rig = Rig.from_parents(list("abcdef"), [-1, 0, 1, 0, -1, 4])
    rt = rig.to_torch(dtype=torch.float64)
    assert isinstance(rt, st.RigTensors) and rt.dtype == torch.float64 and len(rt) == 6
    depth_nodes = [nodes.tolist() for nodes, _ in rt.levels]
    assert sorted(sum(depth_nodes, [])) == list(range(6))
    for d, (nodes, slots) in enumerate(rt.levels[1:], start=1):
        parents_here = rt.levels[d - 1][0][slots]
        assert torch.equal(parents_here, rt.parents[nodes])
    with pytest.raises(ValueError, match="parent-first"):
        st.RigTensors.from_parents([1, -1])


def test_palette_and_lbs_match_numba_on_a_random_rig():
    rng = np.random.default_rng(3)
    rig = random_rig(rng, 8)
    poses = random_poses(rng, rig, 3)
    joints = np.array([1, 2, 4, 5, 7])
    inv = np.linalg.inv(skeletal.world_matrices(rig.parents, rig.rest)[joints])
    world_np = skeletal.world_matrices(rig.parents, poses)
    pal_np = skeletal.skin_palette(world_np, joints, inv)
    world = st.world_matrices(rig, torch.as_tensor(poses))
    pal = st.skin_palette(world, torch.as_tensor(joints), torch.as_tensor(inv))
    assert np.allclose(pal.numpy(), pal_np, atol=1e-11)
    idx, w, pos, nrm = small_skin(rng, joints=5, vertices=40, influences=4)
    tan = torch.cat([nrm.roll(1, -1), torch.ones(40, 1, dtype=nrm.dtype)], dim=1)
    p, n, t = st.lbs(pal, idx, w, pos, nrm, tan)
    for b in range(3):
        rp, rn, rt = skeletal.skin(pal_np[b], idx.numpy(), w.numpy().astype(np.float32), pos.numpy(), nrm.numpy(),
                                   tan.numpy())
        assert np.allclose(p[b].numpy(), rp, atol=1e-5)  # numba reads float32 weights
        assert np.allclose(n[b].numpy(), rn, atol=1e-5)
        assert np.allclose(t[b].numpy(), rt, atol=1e-5)
    # per-pose weights take the gather path: the same result as the dense weight matrix
    assert torch.allclose(st.lbs(pal, idx, w.expand(3, -1, -1), pos), p, atol=1e-12)
    # morphs: base + sum w_i delta_i
    deltas = torch.as_tensor(rng.normal(size=(2, 40, 3)))
    mw = torch.tensor([[0.5, 0.25]], dtype=torch.float64)
    assert torch.allclose(st.apply_morphs(pos, deltas, mw)[0], pos + 0.5 * deltas[0] + 0.25 * deltas[1])


# -- agreement with the numba path on real models ---------------------------------------------------

MODELS = ["demo", "Soldier.glb", "Fox.glb"]


def _model(name):
    if name == "demo":
        return demo_asset()
    path = ASSETS / name
    if not path.exists():
        pytest.skip(f"{path} not found (the shared assets are not checked out)")
    return skeletal.load(path)


@pytest.mark.parametrize("name", MODELS)
def test_float32_agrees_with_numba_bake_on_models(name):
    asset = _model(name)
    rig = asset.rig
    lo, hi = asset.bind_bounds
    size = float(np.linalg.norm(hi - lo))
    rig_t = st.rig_tensors(rig, dtype=torch.float32)
    skins = [st.skin_tensors(asset, s) for s in range(len(asset.skins))]
    meshes = st.mesh_tensors(asset)
    assert meshes, "model without skinned meshes"
    from skeletal.skinning.dqs import skin_dq

    worst = {"world": 0.0, "palette": 0.0, "positions": 0.0, "normals": 0.0, "dqs": 0.0}
    for clip in asset.clips[:3]:
        times = np.linspace(0.0, clip.duration, 4)
        baked = skeletal.bake(asset, clip, times, normals=True, palettes=True)
        motion = st.clip_to_tensors(clip, asset, times=times)
        world = st.world_matrices(rig_t, motion.pose)  # (T, N, 4, 4) float32
        ref_world = baked["node_world"][:, rig.node_of]
        scale = np.abs(ref_world[..., :3, :3]).max()
        worst["world"] = max(worst["world"], np.abs(world[..., :3, :3].numpy() - ref_world[..., :3, :3]).max() / scale,
                             np.abs(world[..., :3, 3].numpy() - ref_world[..., :3, 3]).max() / size)
        for s, skin in enumerate(skins):
            pal = st.skin_palette(world, skin.joints, skin.inverse_bind)
            ref = baked[f"palette_skin{s}"]
            worst["palette"] = max(worst["palette"], np.abs(pal[..., :3, 3].numpy() - ref[..., :3, 3]).max() / size,
                                   np.abs(pal[..., :3, :3].numpy() - ref[..., :3, :3]).max())
        palettes = {s: st.skin_palette(world, skin.joints, skin.inverse_bind) for s, skin in enumerate(skins)}
        for mesh in meshes:
            positions = mesh.positions
            if mesh.morph_positions is not None:
                a, b = mesh.morph_slice
                positions = st.apply_morphs(mesh.positions, mesh.morph_positions, motion.morph[:, a:b])
            p, n, _ = st.lbs(palettes[mesh.skin], mesh.joints, mesh.weights, positions, mesh.normals)
            key = f"node{mesh.node}_prim{mesh.primitive}"
            worst["positions"] = max(worst["positions"], np.abs(p.numpy() - baked["positions_" + key]).max() / size)
            if n is not None and "normals_" + key in baked and mesh.morph_normals is None:
                worst["normals"] = max(worst["normals"], np.abs(n.numpy() - baked["normals_" + key]).max())
            dq = st.dqs(palettes[mesh.skin][1:3], mesh.joints, mesh.weights, positions[1:3] if positions.dim() == 3 else positions)
            for f in (1, 2):
                ref_dq, _, _ = skin_dq(baked[f"palette_skin{mesh.skin}"][f], mesh.joints.numpy(), mesh.weights.numpy(),
                                       (positions[f] if positions.dim() == 3 else positions).double().numpy())
                worst["dqs"] = max(worst["dqs"], np.abs(dq[f - 1].numpy() - ref_dq).max() / size)
    print(name, {k: f"{v:.2e}" for k, v in worst.items()})
    assert worst["world"] < 1e-5 and worst["palette"] < 1e-5 and worst["positions"] < 1e-5 and worst["dqs"] < 1e-5
    assert worst["normals"] < 1e-4  # unit vectors; float32 cofactors of tiny (0.01-scaled) matrices


# -- gradients --------------------------------------------------------------------------------------


def test_gradcheck_float64_small_rig():
    rng = np.random.default_rng(4)
    rig = random_rig(rng, 5)
    rig_t = st.rig_tensors(rig, dtype=torch.float64)
    pose = torch.as_tensor(random_poses(rng, rig, 2)).requires_grad_(True)
    fast = dict(fast_mode=True)  # a random projection of the Jacobian: same check, a fraction of the time
    assert torch.autograd.gradcheck(lambda p: st.world_matrices(rig_t, p), (pose,))
    d6 = torch.as_tensor(rng.normal(size=(2, 5, 6))).requires_grad_(True)
    trans = torch.as_tensor(rng.normal(size=(2, 5, 3))).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda r, t: st.world_from_rotations(rig_t, r, t), (d6, trans), **fast)
    assert torch.autograd.gradcheck(st.rot6d_to_matrix, (d6,))
    mats = st.rot6d_to_matrix(torch.as_tensor(rng.normal(size=(6, 6)))).detach().requires_grad_(True)
    assert torch.autograd.gradcheck(st.matrix_to_quat, (mats,))
    joints = torch.tensor([0, 2, 3, 4])
    inv = torch.as_tensor(np.linalg.inv(compose_trs(rng.normal(size=(4, 3)), random_quats(rng, 4),
                                                    rng.uniform(0.8, 1.2, size=(4, 3)))))
    world = st.world_matrices(rig_t, pose.detach()).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda w: st.skin_palette(w, joints, inv), (world,))
    idx, w, pos, nrm = small_skin(rng, joints=4, vertices=6, influences=3)
    pal = st.skin_palette(world.detach(), joints, inv).requires_grad_(True)
    w.requires_grad_(True), pos.requires_grad_(True), nrm.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda a, b, c, d: st.lbs(a, idx, b, c, d)[:2], (pal, w, pos, nrm), **fast)
    assert torch.autograd.gradcheck(lambda a, b, c, d: st.dqs(a, idx, b, c, d)[:2], (pal, w, pos, nrm), **fast)
    # end to end: pose -> world -> palette -> skinned positions
    assert torch.autograd.gradcheck(
        lambda p: st.lbs(st.skin_palette(st.world_matrices(rig_t, p), joints, inv), idx, w.detach(), pos.detach()),
        (pose,), **fast)


def test_autograd_reaches_the_pose_through_skinning():
    asset = demo_asset()
    rig_t = st.rig_tensors(asset.rig)
    skin = st.skin_tensors(asset)
    mesh = st.mesh_tensors(asset)[0]
    rot = st.quat_to_rot6d(rig_t.rest[:, 3:7]).repeat(2, 1, 1).requires_grad_(True)
    world = st.world_from_rotations(rig_t, rot)
    for skinning in (st.lbs, st.dqs):
        out = skinning(st.skin_palette(world, skin.joints, skin.inverse_bind), mesh.joints, mesh.weights, mesh.positions)
        assert out.shape == (2, len(mesh.positions), 3)
        grad, = torch.autograd.grad(out.square().sum(), rot, retain_graph=True)
        assert torch.isfinite(grad).all() and grad.abs().sum() > 0


# -- dual quaternion skinning -----------------------------------------------------------------------


def numpy_dqs(palette, joints, weights, positions):
    """Independent reference: per vertex, scale-separated DQS in numpy (rotation: the polar factor by
    SVD, of -A for a mirror; blend sign-aligned to the largest weight)."""
    out = np.empty_like(positions)
    for v in range(len(positions)):
        real, dual, stretch = np.zeros(4), np.zeros(4), np.zeros((3, 3))
        quats = []
        for k in range(joints.shape[1]):
            m = palette[joints[v, k]]
            a = m[:3, :3] * np.sign(np.linalg.det(m[:3, :3]))
            u, _, vt = np.linalg.svd(a)
            rot = u @ vt
            quats.append((skeletal.quat.matrix_to_quat(rot), rot, m))
        pivot = quats[int(np.argmax(weights[v]))][0]
        for k, (q, rot, m) in enumerate(quats):
            sign = 1.0 if q @ pivot >= 0 else -1.0
            real += weights[v, k] * sign * q
            dual += weights[v, k] * sign * 0.5 * quat_mul(np.array([*m[:3, 3], 0.0]), q)
            stretch += weights[v, k] * (rot.T @ m[:3, :3])
        n = np.linalg.norm(real)
        real, dual = real / n, dual / n
        t = 2.0 * quat_mul(dual, skeletal.quat.quat_conjugate(real))[:3]
        out[v] = quat_to_matrix(real) @ (stretch @ positions[v]) + t
    return out


def test_dqs_matches_numpy_reference_numba_kernel_and_exact_rigid_motion():
    from skeletal.skinning.dqs import skin_dq

    rng = np.random.default_rng(5)
    idx, w, pos, nrm = small_skin(rng, joints=6, vertices=30, influences=3)
    tan = torch.cat([nrm.roll(1, -1), -torch.ones(30, 1, dtype=nrm.dtype)], dim=1)
    rigid = random_palette(rng, 6, scale=(1.0, 1.0))
    ref = numpy_dqs(rigid.numpy(), idx.numpy(), w.numpy(), pos.numpy())
    got, n, _ = st.dqs(rigid, idx, w, pos, nrm)
    assert np.allclose(got.numpy(), ref, atol=1e-12)
    assert torch.allclose(n.norm(dim=-1), torch.ones(30, dtype=n.dtype))
    # non-uniform scale, a mirrored joint, and shear (a general affine 3x3)
    scaled = random_palette(rng, 6)
    scaled[2, :3, 0] *= -1.0
    sheared = scaled.clone()
    sheared[:, :3, :3] = sheared[:, :3, :3] @ torch.as_tensor(np.eye(3) + 0.2 * rng.normal(size=(6, 3, 3)))
    for palette in (rigid, scaled, sheared):
        p, n, t = st.dqs(palette, idx, w, pos, nrm, tan)
        assert np.allclose(p.numpy(), numpy_dqs(palette.numpy(), idx.numpy(), w.numpy(), pos.numpy()), atol=1e-10)
        rp, rn, rt = skin_dq(palette.numpy(), idx.numpy(), w.numpy(), pos.numpy(), nrm.numpy(), tan.numpy())
        assert np.allclose(p.numpy(), rp, atol=1e-10)  # skeletal.skin_dq's float64 reference kernel
        assert np.allclose(n.numpy(), rn, atol=1e-10)
        assert np.allclose(t.numpy(), rt, atol=1e-10)
    # one influence, rigid or scaled: the joint's own transform, like LBS
    one = torch.zeros(30, 1, dtype=torch.long) + 3
    ones = torch.ones(30, 1, dtype=torch.float64)
    for palette in (rigid, scaled, sheared):
        exact = (palette[3, :3, :3] @ pos.T).T + palette[3, :3, 3]
        assert torch.allclose(st.dqs(palette, one, ones, pos), exact, atol=1e-12)
        assert torch.allclose(st.lbs(palette, one, ones, pos), exact, atol=1e-12)
    # batched palettes give the per-pose results
    batch = torch.stack([rigid, scaled])
    assert torch.allclose(st.dqs(batch, idx, w, pos)[1], st.dqs(scaled, idx, w, pos), atol=1e-12)


def test_dqs_keeps_volume_at_a_twist_where_lbs_collapses():
    # a cylinder along x from 0 to 2, joint 0 fixed, joint 1 twisted by 180 degrees about x; weights ramp
    x = np.linspace(0.0, 2.0, 21)
    a = np.linspace(0.0, 2 * np.pi, 16, endpoint=False)
    xx, aa = np.meshgrid(x, a, indexing="ij")
    pos = torch.as_tensor(np.stack([xx, 0.2 * np.cos(aa), 0.2 * np.sin(aa)], -1).reshape(-1, 3))
    w1 = np.clip((xx.reshape(-1) - 0.5) / 1.0, 0.0, 1.0)
    weights = torch.as_tensor(np.stack([1 - w1, w1], 1))
    joints = torch.tensor([[0, 1]]).expand(len(pos), 2)
    twist = torch.as_tensor(compose_trs(np.zeros((2, 3)), [[0, 0, 0, 1.0], [1.0, 0, 0, 0]], np.ones((2, 3))))
    middle = np.abs(xx.reshape(-1) - 1.0) < 1e-9  # the ring with weights 0.5 / 0.5
    r_lbs = st.lbs(twist, joints, weights, pos)[middle][:, 1:].norm(dim=-1).max().item()
    r_dqs = st.dqs(twist, joints, weights, pos)[middle][:, 1:].norm(dim=-1)
    assert r_lbs < 1e-9  # the candy wrapper: LBS collapses the ring to its axis
    assert torch.allclose(r_dqs, torch.full_like(r_dqs, 0.2), atol=1e-12)


# -- conversions ------------------------------------------------------------------------------------


def test_clip_tensors_round_trip_plays_and_exports(tmp_path):
    asset = demo_asset()
    rig = asset.rig
    walk = asset.clip("walk")
    motion = st.clip_to_tensors(walk, asset, fps=30)
    frames = int(np.floor(walk.duration * 30 + 1e-6)) + 1
    assert motion.pose.shape == (frames, len(rig), 10) and motion.fps == 30.0
    assert torch.allclose(motion.times[1:] - motion.times[:-1], torch.full((frames - 1,), 1 / 30))
    clip = st.tensors_to_clip(motion.pose, rig, fps=30, name="walk2")
    assert isinstance(clip, skeletal.Clip) and clip.name == "walk2"
    animated = {t.node for t in walk.tracks}
    assert {t.node for t in clip.tracks} <= animated | {i for i in range(len(rig))}
    # sampled at its keys, the new clip gives the poses back (float32)
    again, _ = sample(clip, motion.times.double().numpy(), rig.rest, asset.morph_start, asset.rest_morph)
    assert np.abs(again - motion.pose.double().numpy()).max() < 1e-5
    # it plays in a Player, and exports as glTF that loads back with the same motion
    player = skeletal.Player(asset)
    player.play(clip)
    player.update(0.25)
    assert np.all(np.isfinite(player.node_world))
    out = tmp_path / "walk2.glb"
    skeletal.export(asset, out, [clip])
    loaded = skeletal.load(out)
    back = st.clip_to_tensors(loaded.clip("walk2"), loaded, fps=30)
    assert torch.allclose(back.pose, motion.pose, atol=1e-5)
    # explicit nodes and times; bad shapes are ClipErrors
    one = st.tensors_to_clip(motion.pose[:1], rig, times=[0.0], nodes=[1, 2])
    assert {(t.node, t.path) for t in one.tracks} == {(n, p) for n in (1, 2) for p in ("translation", "rotation", "scale")}
    with pytest.raises(skeletal.ClipError, match="expected"):
        st.tensors_to_clip(torch.zeros(3, len(rig) + 1, 10), rig)
    with pytest.raises(skeletal.ClipError, match="fps"):
        st.clip_to_tensors(walk, rig, fps=0)


def test_fitted_6d_pose_becomes_a_clip():
    rig = demo_asset().rig
    rig_t = st.rig_tensors(rig, dtype=torch.float64)
    rng = np.random.default_rng(6)
    d6 = torch.as_tensor(rng.normal(size=(3, len(rig), 6)))
    pose = st.compose_pose(rig_t, d6)
    clip = st.tensors_to_clip(pose, rig, fps=10)
    again, _ = sample(clip, np.arange(3) / 10, rig.rest, np.zeros(len(rig) + 1, np.int64), np.zeros(0))
    assert np.allclose(skeletal.world_matrices(rig.parents, again), st.world_from_rotations(rig_t, d6).numpy(), atol=1e-5)


# -- the Dataset ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def motion_folder(tmp_path_factory):
    """Two GLB files of the built-in character (different clips), one BVH of its walk, one broken file."""
    folder = tmp_path_factory.mktemp("motions")
    asset = demo_asset()
    skeletal.export(asset, folder / "walk_run.glb", ["walk", "run"])
    sub = folder / "more"
    sub.mkdir()
    skeletal.export(asset, sub / "idle_wave.glb", ["idle", "wave"])
    skeletal.write_bvh(asset, "walk", folder / "walk.bvh", fps=30)
    (folder / "notes.txt").write_text("not a motion file")
    return folder


def expected_windows(frames, window, stride):
    return max(0, (frames - window) // stride + 1)


def test_motion_windows_over_a_generated_folder(motion_folder):
    asset = demo_asset()
    (motion_folder / "broken.glb").write_bytes(b"glTF but not really")
    try:
        with pytest.raises(skeletal.SkeletalError, match="broken.glb"):
            st.MotionWindows(motion_folder, window=8)
        ds = st.MotionWindows(motion_folder, window=8, stride=4, fps=30, on_error="skip",
                              names=[n for n in asset.rig.names if n != "body"])
    finally:
        (motion_folder / "broken.glb").unlink()
    assert list(ds.errors) == [str(motion_folder / "broken.glb")]
    assert sorted(Path(f).name for f in ds.files) == ["idle_wave.glb", "walk.bvh", "walk_run.glb"]
    assert len(ds.sequences) == 5
    assert len(ds) == sum(expected_windows(frames, 8, 4) for _, _, frames in ds.sequences)
    item = ds[0]
    n = len(ds.node_names)
    assert item["pose"].shape == (8, n, 10) and item["positions"].shape == (8, n, 3)
    # an item is the clip sampled at k / fps, posed: check one against the library directly
    for i in range(len(ds)):
        it = ds[i]
        if Path(it["file"]).name == "walk_run.glb" and it["clip"] == "run" and it["start"] == 4:
            break
    run = asset.clip("run")
    pose, _ = sample(run, (4 + np.arange(8)) / 30, asset.rig.rest, asset.morph_start, asset.rest_morph)
    pick = [asset.rig.names.index(name) for name in ds.node_names]
    positions = skeletal.world_matrices(asset.rig.parents, pose)[:, pick][..., :3, 3]
    assert np.allclose(it["pose"].numpy(), pose[:, pick], atol=1e-6)
    assert np.allclose(it["positions"].numpy(), positions, atol=1e-6)
    # the positions are FK of the pose (same rig) in torch too
    rig_t = st.rig_tensors(ds.rig)
    full = ds.rig.rest.copy()
    # BVH windows: same joints by name, the walk at the same times (BVH stores Euler angles: close, not exact)
    bvh = [ds[i] for i in range(len(ds)) if ds[i]["file"].endswith(".bvh")]
    glb_walk = [ds[i] for i in range(len(ds)) if ds[i]["file"].endswith("walk_run.glb") and ds[i]["clip"] == "walk"]
    assert len(bvh) == len(glb_walk)
    assert np.allclose(bvh[1]["positions"].numpy(), glb_walk[1]["positions"].numpy(), atol=1e-3)
    del rig_t, full
    # DataLoader batching
    loader = torch.utils.data.DataLoader(ds, batch_size=4, shuffle=True, num_workers=0,
                                         generator=torch.Generator().manual_seed(0))
    batch = next(iter(loader))
    assert batch["pose"].shape == (4, 8, n, 10) and batch["positions"].shape == (4, 8, n, 3)
    assert len(batch["file"]) == 4 and batch["start"].shape == (4,)
    assert sum(b["pose"].shape[0] for b in loader) == len(ds)


def test_motion_windows_resampling_stride_and_lazy_loading(motion_folder):
    ds30 = st.MotionWindows(motion_folder / "walk_run.glb", window=10, fps=30)
    ds15 = st.MotionWindows([motion_folder / "walk_run.glb"], window=5, stride=1, fps=15, cache=False)
    walk = demo_asset().clip("walk")
    frames30 = dict((c, f) for _, c, f in ds30.sequences)
    frames15 = dict((c, f) for _, c, f in ds15.sequences)
    assert frames30["walk"] == int(np.floor(walk.duration * 30 + 1e-6)) + 1
    assert frames15["walk"] == int(np.floor(walk.duration * 15 + 1e-6)) + 1
    assert len(ds15) == sum(expected_windows(f, 5, 1) for f in frames15.values())
    # frame k at 15 fps is frame 2k at 30 fps
    a = ds30[0]  # walk, frames 0..9 at 30 fps
    b = ds15[0]  # walk, frames 0..4 at 15 fps
    assert a["clip"] == b["clip"] == "walk"
    assert torch.allclose(b["pose"], a["pose"][0::2], atol=1e-6)
    # torch FK of an item's pose gives its positions
    rig_t = st.rig_tensors(ds30.rig)
    assert torch.allclose(st.joint_positions(st.world_matrices(rig_t, a["pose"])), a["positions"], atol=1e-5)
    # only some clips; errors for bad arguments and mixed rigs
    assert {c for _, c, _ in st.MotionWindows(motion_folder, 4, clips=["run"], names=["hips"]).sequences} == {"run"}
    with pytest.raises(skeletal.SkeletalError, match="node names"):
        st.MotionWindows(motion_folder, window=4)  # the BVH has end sites, not the "body" node
    with pytest.raises(ValueError, match="window"):
        st.MotionWindows(motion_folder, window=0)
    with pytest.raises(FileNotFoundError):
        st.MotionWindows(motion_folder / "nowhere", window=4)


# -- the example ------------------------------------------------------------------------------------


def test_fit_pose_example_converges():
    spec = importlib.util.spec_from_file_location("fit_pose", ROOT / "examples" / "fit_pose.py")
    fit_pose = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fit_pose)
    asset = demo_asset()
    nodes = fit_pose.fitted_nodes(asset)
    target_pose = fit_pose.random_pose(asset.rig, seed=0)
    targets = st.joint_positions(st.world_matrices(st.rig_tensors(asset.rig, dtype=torch.float64), target_pose))[nodes]
    pose, history = fit_pose.fit_pose(asset.rig, targets, nodes, steps=150)
    print(f"fit_pose: mean joint error {history[0]:.4g} -> {history[-1]:.3g} m in 150 steps")
    assert history[0] > 0.1
    assert history[-1] < FIT_ERROR
    got = st.joint_positions(st.world_matrices(st.rig_tensors(asset.rig), pose))[nodes]
    assert (got - targets.float()).norm(dim=-1).mean() < FIT_ERROR


FIT_ERROR = 2.5e-3


# -- CUDA -------------------------------------------------------------------------------------------


@CUDA
@pytest.mark.parametrize("dtype, tolerance", [(torch.float64, 1e-10), (torch.float32, 1e-4)])
def test_cuda_matches_cpu(dtype, tolerance):
    """FK, palette, LBS, DQS and the pose's gradient on CUDA against the CPU. ``tolerance`` is relative to
    each tensor's largest value: the gradient sums ~19k vertices' terms (values ~2e4) in another order on
    the GPU, so float32 cannot agree to a fixed 1e-4."""
    asset = demo_asset()
    motion = st.clip_to_tensors(asset.clip("run"), asset, fps=30, dtype=dtype)
    mesh = st.mesh_tensors(asset, dtype=dtype)[0]
    skin = st.skin_tensors(asset, dtype=dtype)
    results = {}
    for device in ("cpu", "cuda"):
        rig_t = st.rig_tensors(asset.rig, device=device, dtype=dtype)
        # a fresh leaf per device: .to("cpu") returns the tensor itself, so requires_grad_ would mark the
        # shared motion.pose and make the CUDA copy a non-leaf without .grad
        pose = motion.pose.detach().clone().to(device).requires_grad_(True)
        world = st.world_matrices(rig_t, pose)
        pal = st.skin_palette(world, skin.joints.to(device), skin.inverse_bind.to(device))
        out = st.lbs(pal, mesh.joints.to(device), mesh.weights.to(device), mesh.positions.to(device))
        out_dq = st.dqs(pal, mesh.joints.to(device), mesh.weights.to(device), mesh.positions.to(device))
        (out.square().sum() + out_dq.square().sum()).backward()
        assert out.device.type == device and pose.grad.device.type == device
        results[device] = (out.detach().cpu(), out_dq.detach().cpu(), pose.grad.cpu())
    for name, a, b in zip(("lbs", "dqs", "pose gradient"), results["cpu"], results["cuda"]):
        assert a.dtype == b.dtype == dtype
        error = float((a - b).abs().max() / a.abs().max())
        print(f"{name} {dtype}: CUDA - CPU = {error:.2e} of the largest value")
        assert error < tolerance, f"{name}: CUDA differs from the CPU by {error:.2e} of the largest value"
