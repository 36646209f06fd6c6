"""Benchmark rows for the torch backend (``skeletal bench``, see ``FEATURE_BENCHES`` in :mod:`skeletal.bench`).

A batch of B poses of the benchmark's clip (the Soldier's Walk by default) through forward kinematics,
palettes and linear blend skinning of every skinned primitive, float32 on the CPU:

* :mod:`skeletal.torch` without autograd (``torch.no_grad``), and forward + backward (the gradient
  of the sum of squared skinned positions with respect to the local pose, what training costs);
* baseline, same run: the numba path, :func:`skeletal.world_matrices` and :func:`skeletal.skin_palette`
  over the batch, then :func:`skeletal.skin_into` per pose and primitive (the real-time kernels).

Figures are skinned vertices per second (poses x vertices / time). Without torch installed the rows
are empty and ``skipped`` says why; this module imports torch only inside :func:`bench_rows`.

>>> rows = bench_rows(skeletal.load("Soldier.glb"), "Walk", None, quick=True)["rows"]   # doctest: +SKIP
"""

from __future__ import annotations

import numpy as np

from . import rate, time_samples


def bench_rows(asset=None, clip=None, path=None, quick: bool = False) -> dict:
    """Rows for ``skeletal bench``: torch FK + palettes + LBS against the numba kernels."""
    try:
        import torch
    except ImportError:
        return {"rows": [], "skipped": "torch is not installed (pip install \"skeletal[torch]\")"}
    import skeletal
    import skeletal.torch as st
    from skeletal.demo import demo_asset
    from skeletal.anim.sampling import sample

    if asset is None or not asset.skinned_instances:
        asset, clip = demo_asset(), "walk"
    the_clip = asset.clip(clip) if clip is not None and asset.clips else (asset.clips[0] if asset.clips else skeletal.Clip("rest", []))
    batch = 4 if quick else 64
    repeats = 2 if quick else 10
    times = np.linspace(0.0, the_clip.duration, batch)
    pose64, _ = sample(the_clip, times, asset.rig.rest, asset.morph_start, asset.rest_morph)
    pose32 = pose64.astype(np.float32)
    meshes = st.mesh_tensors(asset)
    skins = [st.skin_tensors(asset, s) for s in range(len(asset.skins))]
    vertices = sum(len(m.positions) for m in meshes)
    rig = asset.rig

    threads = torch.get_num_threads()
    rig_t = st.rig_tensors(rig)
    pose_t = torch.as_tensor(pose32)

    def torch_forward(pose):
        world = st.world_matrices(rig_t, pose)
        palettes = [st.skin_palette(world, s.joints, s.inverse_bind) for s in skins]
        return [st.lbs(palettes[m.skin], m.joints, m.weights, m.positions) for m in meshes]

    def run_no_grad():
        with torch.no_grad():
            torch_forward(pose_t)

    def run_backward():
        pose = pose_t.clone().requires_grad_(True)
        loss = sum(out.square().sum() for out in torch_forward(pose))
        loss.backward()

    outs = [np.empty((len(m.positions), 3), np.float32) for m in meshes]
    prims = [(m.joints.numpy().astype(np.int32), m.weights.numpy(), m.positions.numpy()) for m in meshes]
    bindings = asset.skins

    def run_numba():
        world = skeletal.world_matrices(rig.parents, pose32)
        palettes = [skeletal.skin_palette(world, b.joints, b.inverse_bind.astype(np.float32)) for b in bindings]
        for f in range(batch):
            for m, (joints, weights, positions), out in zip(meshes, prims, outs):
                skeletal.skin_into(palettes[m.skin][f], joints, weights, positions, None, None, out)

    work = batch * vertices / 1e6
    t_numba = time_samples(run_numba, repeats, warmup=1)
    t_torch = time_samples(run_no_grad, repeats, warmup=1)
    t_back = time_samples(run_backward, repeats, warmup=1)
    s_numba, s_torch, s_back = (rate(t, work, 1.0, "M vertices/s") for t in (t_numba, t_torch, t_back))
    what = f"{batch} poses x {vertices} vertices, {len(rig)} nodes, float32 CPU, {threads} threads"
    rows = [
        {"name": f"torch FK + palettes + LBS, no grad ({what})", "stat": s_torch,
         "baseline": f"numba world_matrices + skin_palette + skin_into: {s_numba['median']:.1f} M vertices/s",
         "ratio": f"{s_torch['median'] / s_numba['median']:.2f}x", "reference": ""},
        {"name": "torch FK + palettes + LBS, forward + backward to the pose", "stat": s_back,
         "baseline": f"torch no grad: {s_torch['median']:.1f} M vertices/s",
         "ratio": f"{s_back['median'] / s_torch['median']:.2f}x", "reference": ""},
    ]
    return {"rows": rows, "batch": batch, "vertices": vertices, "torch_mverts_per_s": s_torch,
            "torch_backward_mverts_per_s": s_back, "numba_mverts_per_s": s_numba, "torch": torch.__version__}
