"""``skeletal bench`` rows for dual quaternion skinning (registered in :data:`skeletal.bench.FEATURE_BENCHES`).

A rig-like mesh (:func:`rig_mesh`): the skinning stage's vertex count, weights (4 per vertex, sorted largest
first, uint8 joints), positions and normals (:func:`skeletal.bench.synthetic_mesh`), 65 joints as a coiled
chain whose neighbours turn 15-30 degrees against each other (world rotations go all round, so the packed
qr.w >= 0 puts neighbours in opposite hemispheres along the way), each vertex blending four consecutive
joints, as skin follows neighbouring bones. Three palettes: **rigid** (the rotations and translations
only, the common case of real rigs), **scaled** (the stage's scale, 0.8-1.25 along each joint's axes: S is
diagonal, and DQS takes the diagonal variant of its scale-separated kernel) and **sheared** (the same
scales along randomly rotated axes, S = B D B^T: the general scale-separated kernel). Per frame each method
converts its palette (``pack_palette`` / ``pack_dq_palette``) and skins; DQS is given the mesh's
:func:`~skeletal.skinning.dqs.dq_hemisphere_pairs` (found once, outside the timing). Baseline:
:func:`skeletal.skin_into` (LBS) on the same mesh and palette, timed interleaved with DQS (LBS, DQS, LBS,
DQS, ...) so that background load hits both alike; the ratio is the median of the paired ratios. One-thread
rows time the calling thread's CPU time (numba runs a one-thread parallel loop there), which time slicing
by other processes does not inflate. Goal: DQS at least 0.80 of LBS throughput (issue 33; 0.70 before).

One more set of rows, one thread: the same palettes on :func:`random_mesh` (four random joints of 65 per
vertex), where no per-joint signs fit and DQS finds each vertex's hemisphere itself: the kernel's worst
case, and the mesh of the rows before the rig mesh.

And a real character, one thread (:func:`soldier_frames`; skipped where ``Soldier.glb`` is not in the shared
assets, :func:`skeletal.bench.assets_dir`): Soldier's body mesh (7325 vertices, 4 uint16 influences, 49 joints)
with the palettes of :data:`SOLDIER_FRAMES` frames of its Run and Walk clips, a frame per call, in turn; LBS,
DQS with the mesh's pairs and DQS without them (the sign table) interleaved, each row's ratio against LBS.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import numpy as np

GOAL = 0.80

#: Frames of each Soldier clip the real-character rows cycle through (evenly over the clip).
SOLDIER_FRAMES = 30


def soldier_frames(clip: str, frames: int = SOLDIER_FRAMES, path=None):
    """Soldier's body mesh (its largest skinned primitive) and ``frames`` palettes of ``clip``, evenly over
    the clip: ``(palettes (F, J, 3, 4) float32, joints uint16, weights, positions, normals)``, or None where
    the model (``path``, else ``Soldier.glb`` in :func:`skeletal.bench.assets_dir`) is absent."""
    import skeletal

    from . import assets_dir

    path = assets_dir() / "Soldier.glb" if path is None else Path(path)
    if not path.is_file():
        return None
    asset = skeletal.load(str(path))
    inst = max((s for s in asset.skinned_instances if s.primitives), key=lambda s: s.primitives[0].source.vertex_count)
    prim = inst.primitives[0]
    player = skeletal.Player(asset)
    player.play(clip)
    step = asset.clip(clip).duration / frames
    palettes = []
    for _ in range(frames):
        player.update(step)
        palettes.append(np.asarray(player.palettes[inst.skin])[:, :3, :])
    src = prim.source
    return (np.ascontiguousarray(palettes, np.float32), np.ascontiguousarray(prim.joints, np.uint16),
            np.ascontiguousarray(prim.weights, np.float32), np.ascontiguousarray(src.positions, np.float32),
            np.ascontiguousarray(src.normals, np.float32))


def rig_mesh(vertices: int = 100_000, joints: int = 65, seed: int = 0):
    """The bench's rig-like mesh: ``(palettes, joint_idx, weights, positions, normals)``, ``palettes`` a dict
    of (J, 3, 4) float32 palettes ``rigid``, ``scaled`` and ``sheared`` (see the module docstring)."""
    from . import _quat_to_matrix, synthetic_mesh

    scaled, _, weights, positions, normals = synthetic_mesh(vertices, joints, seed=seed)
    rng = np.random.default_rng(seed + 1)
    axes = np.array([0.0, 0.0, 1.0]) + 0.3 * rng.normal(size=(joints, 3))  # a coil about z, wobbling
    axes /= np.linalg.norm(axes, axis=1, keepdims=True)
    half = np.radians(rng.uniform(15.0, 30.0, joints)) / 2
    local = np.concatenate([axes * np.sin(half)[:, None], np.cos(half)[:, None]], 1)
    world = np.empty((joints, 3, 3))
    world[0] = _quat_to_matrix(local[0])
    for j in range(1, joints):
        world[j] = world[j - 1] @ _quat_to_matrix(local[j])
    stretch = np.linalg.norm(scaled[:, :, :3], axis=1)  # the stage palette's scale per axis
    rigid = scaled.copy()
    rigid[:, :, :3] = world
    scaled = rigid.copy()
    scaled[:, :, :3] = world * stretch[:, None, :]
    shear_axes = np.linalg.qr(rng.normal(size=(joints, 3, 3)))[0]
    sheared = rigid.copy()
    sheared[:, :, :3] = world @ (shear_axes * stretch[:, None, :]) @ shear_axes.transpose(0, 2, 1)
    base = rng.integers(0, joints - 3, vertices)
    joint_idx = (base[:, None] + np.argsort(rng.uniform(size=(vertices, 4)), axis=1)).astype(np.uint8)
    palettes = {"rigid": rigid.astype(np.float32), "scaled": scaled.astype(np.float32),
                "sheared": sheared.astype(np.float32)}
    return palettes, joint_idx, weights, positions, normals


def random_mesh(vertices: int = 100_000, joints: int = 65, seed: int = 0):
    """The skinning stage's own mesh (:func:`skeletal.bench.synthetic_mesh`: four random joints of 65 per
    vertex, so every pair of joints shares some vertex and no per-joint signs put them in one hemisphere)
    with :func:`rig_mesh`'s three palettes: ``(palettes, joint_idx, weights, positions, normals)``. DQS
    then finds each vertex's hemispheres itself (the sign table), the worst case of the kernel."""
    from . import synthetic_mesh

    palettes = rig_mesh(vertices, joints, seed)[0]
    _, joint_idx, weights, positions, normals = synthetic_mesh(vertices, joints, seed=seed)
    return palettes, joint_idx, weights, positions, normals


def bench_rows(asset=None, clip=None, path=None, quick: bool = False, vertices: int = 100_000) -> dict:
    import numba

    from . import interleaved, load_average, rate, stat
    from ..skinning.lbs import pack_palette, skin_into
    from ..skinning.dqs import dq_hemisphere_pairs, pack_dq_palette, skin_dq_into

    repeats = 5 if quick else 21
    inner = max(1, int(2e5 // vertices))
    threads = numba.get_num_threads()
    rows, figures = [], {}

    def measure(mesh: str, label: str, built, with_pairs: bool, thread_counts) -> None:
        palettes, joints, weights, positions, normals = built
        pairs = dq_hemisphere_pairs(joints, weights) if with_pairs else None  # once per mesh
        out_p, out_n = np.empty_like(positions), np.empty_like(normals)
        packed, dq_packed = pack_palette(palettes["scaled"]), pack_dq_palette(palettes["scaled"])

        def lbs(palette):
            def run():
                pack_palette(palette, packed)
                skin_into(packed, joints, weights, positions, normals, None, out_p, out_n)
            return run

        def dqs(palette):
            def run():
                pack_dq_palette(palette, dq_packed)
                skin_dq_into(dq_packed, joints, weights, positions, normals, None, out_p, out_n, pairs=pairs)
            return run

        for n_threads in thread_counts:
            numba.set_num_threads(n_threads)
            try:
                for kind, palette in palettes.items():
                    # One thread runs in this thread: its CPU time is immune to time slicing by other processes.
                    lbs_secs, dqs_secs = interleaved([lbs(palette), dqs(palette)], repeats, inner,
                                                     time.perf_counter if n_threads > 1 else time.thread_time,
                                                     warmup=2)
                    mverts = rate(dqs_secs, vertices, 1e6, "M vertices/s")
                    base = rate(lbs_secs, vertices, 1e6, "M vertices/s")
                    ratios = [b / d for b, d in zip(lbs_secs, dqs_secs)]
                    key = f"dqs_{kind}_{n_threads}thr" + ("" if mesh == "rig" else f"_{mesh}")
                    figures[key] = {"dqs_mverts_per_s": mverts, "lbs_mverts_per_s": base,
                                    "ratio": stat(ratios, "fraction of LBS")}
                    rows.append({
                        "name": f"DQS skinning: {vertices // 1000}k x4 {label}, pos+nrm, {kind} palette, {n_threads} thr"
                                + ("" if n_threads > 1 else " (CPU time)"),
                        "stat": mverts,
                        "baseline": f"LBS skin_into {base['median']:.1f} Mverts/s",
                        "ratio": f"{statistics.median(ratios):.2f}x",
                        "reference": f"goal >= {GOAL:.2f} of LBS",
                    })
            finally:
                numba.set_num_threads(threads)

    def soldier(clip: str) -> None:
        found = soldier_frames(clip)
        if found is None:
            return
        palettes, joints, weights, positions, normals = found
        pairs = dq_hemisphere_pairs(joints, weights)  # once per mesh
        out_p, out_n = np.empty_like(positions), np.empty_like(normals)
        packed, dq_packed = pack_palette(palettes[0]), pack_dq_palette(palettes[0])
        frame = [0, 0, 0]

        def lbs():
            pack_palette(palettes[frame[0]], packed)
            skin_into(packed, joints, weights, positions, normals, None, out_p, out_n)
            frame[0] = (frame[0] + 1) % len(palettes)

        def dqs(with_pairs: bool, slot: int):
            def run():
                pack_dq_palette(palettes[frame[slot]], dq_packed)
                skin_dq_into(dq_packed, joints, weights, positions, normals, None, out_p, out_n,
                             pairs=pairs if with_pairs else None)
                frame[slot] = (frame[slot] + 1) % len(palettes)
            return run

        numba.set_num_threads(1)
        try:
            load_before = load_average()
            lbs_secs, pair_secs, table_secs = interleaved([lbs, dqs(True, 1), dqs(False, 2)], repeats,
                                                          len(palettes), time.thread_time, warmup=len(palettes))
            load_after = load_average()
        finally:
            numba.set_num_threads(threads)
        v = len(positions)
        mverts, base = rate(pair_secs, v, 1e6, "M vertices/s"), rate(lbs_secs, v, 1e6, "M vertices/s")
        ratios = [b / d for b, d in zip(lbs_secs, pair_secs)]
        table = statistics.median(b / d for b, d in zip(lbs_secs, table_secs))
        figures[f"dqs_soldier_{clip.lower()}_1thr"] = {
            "dqs_mverts_per_s": mverts, "lbs_mverts_per_s": base, "ratio": stat(ratios, "fraction of LBS"),
            "table_ratio": table, "vertices": v, "frames": len(palettes), "load": [load_before, load_after]}
        rows.append({
            "name": f"DQS skinning: Soldier {v} verts x{joints.shape[1]}, pos+nrm, {clip} ({len(palettes)} frames), "
                    f"pairs, 1 thr (CPU time, load {load_before:.1f}-{load_after:.1f})",
            "stat": mverts,
            "baseline": f"LBS skin_into {base['median']:.1f} Mverts/s; DQS without pairs {table:.2f}x",
            "ratio": f"{statistics.median(ratios):.2f}x",
            "reference": f"goal >= {GOAL:.2f} of LBS",
        })

    rig = rig_mesh(vertices)
    measure("rig", "rig", rig, True, (threads, 1))
    # The worst case, one thread: random joints per vertex, hemispheres found per vertex.
    measure("random", "random joints", random_mesh(vertices), False, (1,))
    # A real character: Soldier's body, its Run and Walk clips (skipped without the shared assets).
    for clip in ("Run", "Walk"):
        soldier(clip)
    return {"rows": rows, "vertices": vertices, "joints": len(rig[0]["rigid"]), "influences": rig[1].shape[1],
            "threads": threads, **figures}
