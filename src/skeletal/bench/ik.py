"""IK figures for ``skeletal bench`` (registered in :data:`skeletal.bench.FEATURE_BENCHES`).

* two-bone IK on both legs of 1000 characters: ``Crowd.update`` with two IK stages, microseconds per
  character, against the same crowd without IK measured in the same run (interleaved samples, so a
  busy machine slows both alike); the ratio is the cost IK adds to the crowd update (goal < 1.20).
* FABRIK on a 10-joint chain, 10 iterations, converted back to local rotations: solves per second
  over a batch of chains (:func:`skeletal.ik.fabrik`, all threads), against :func:`numpy_fabrik`, the
  same algorithm vectorised over the batch in numpy.
"""

from __future__ import annotations

import time

import numpy as np

from ..anim import ik
from . import rate, stat, time_samples
from ..anim.pose import world_matrices
from ..quat import quat_conjugate, quat_mul

LEG_NAMES = [
    ("LeftUpLeg", "LeftLeg", "LeftFoot"), ("RightUpLeg", "RightLeg", "RightFoot"),
    ("left_thigh", "left_shin", "left_foot"), ("right_thigh", "right_shin", "right_foot"),
    ("thigh.L", "shin.L", "foot.L"), ("thigh.R", "shin.R", "foot.R"),
]


def _find(names, wanted: str) -> int | None:
    for i, name in enumerate(names):
        if name == wanted or name.endswith(":" + wanted) or name.endswith("_" + wanted):
            return i
    return None


def leg_chains(asset) -> list[tuple[int, int, int]]:
    """(thigh, shin, foot) rig indices of the asset's legs, by common naming schemes; else the two
    deepest three-joint chains ending at a joint whose name contains "foot"."""
    names = asset.rig.names
    legs = []
    for chain in LEG_NAMES:
        idx = [_find(names, n) for n in chain]
        if all(i is not None for i in idx):
            legs.append(tuple(idx))
    if legs:
        return legs[:2]
    parents = asset.rig.parents
    for i, name in enumerate(names):
        if "foot" in name.lower() and parents[i] >= 0 and parents[parents[i]] >= 0:
            legs.append((int(parents[parents[i]]), int(parents[i]), i))
    return legs[:2]


def _crowd_with_legs(asset, clip: str, count: int, offsets: np.ndarray, ik_on: bool):
    import skeletal

    crowd = skeletal.Crowd(asset, count=count)
    crowd.play(clip, offsets=offsets)
    if ik_on:
        rng = np.random.default_rng(5)
        world = world_matrices(asset.rig.parents, asset.rig.rest)
        for k, (a, b, c) in enumerate(leg_chains(asset)):
            foot = world[c, :3, 3]
            knee = world[b, :3, 3]
            leg = np.linalg.norm(knee - world[a, :3, 3]) + np.linalg.norm(foot - knee)
            targets = foot + rng.normal(size=(count, 3)) * 0.1 * leg
            targets[:, 1] += 0.15 * leg  # feet lifted: the knees bend
            crowd.add_ik(f"leg{k}", "two_bone", (a, b, c), target=targets, pole=knee + (0.0, 0.0, leg))
    return crowd


def _interleaved(plain, legs, repeats: int, dt: float) -> tuple[list[float], list[float]]:
    with_ik, without = [], []
    for _ in range(repeats):  # interleaved: a busy machine slows both alike
        for crowd, out in ((plain, without), (legs, with_ik)):
            start = time.perf_counter()
            crowd.update(dt)
            out.append(time.perf_counter() - start)
    return with_ik, without


def bench_two_bone_crowd(asset, clip: str, count: int, repeats: int) -> dict:
    import numba

    rng = np.random.default_rng(1)
    offsets = rng.uniform(0, asset.clip(clip).duration, count)
    plain = _crowd_with_legs(asset, clip, count, offsets, False)
    legs = _crowd_with_legs(asset, clip, count, offsets, True)
    dt = 1 / 60
    for _ in range(5):
        plain.update(dt)
        legs.update(dt)
    with_ik, without = _interleaved(plain, legs, repeats, dt)
    # one thread as well: on a shared machine the all-thread figures swing with other processes' load
    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        with_ik1, without1 = _interleaved(plain, legs, repeats, dt)
    finally:
        numba.set_num_threads(threads)
    us = lambda values: stat([s / count * 1e6 for s in values], "us")
    return {"count": count, "legs": len(leg_chains(asset)), "threads": threads,
            "us_per_char": us(with_ik), "us_per_char_no_ik": us(without),
            "ratio": float(np.median(with_ik) / np.median(without)),
            "us_per_char_1thread": us(with_ik1), "us_per_char_no_ik_1thread": us(without1),
            "ratio_1thread": float(np.median(with_ik1) / np.median(without1))}


# ---------------------------------------------------------------------------------------------
# FABRIK: numpy baseline


def _arc_np(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """(B, 4) smallest rotations taking directions u to v (B, 3) (non-opposite)."""
    u = u / np.linalg.norm(u, axis=-1, keepdims=True)
    v = v / np.linalg.norm(v, axis=-1, keepdims=True)
    q = np.concatenate([np.cross(u, v), 1.0 + np.sum(u * v, axis=-1, keepdims=True)], axis=-1)
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def numpy_fabrik(positions: np.ndarray, world_rot: np.ndarray, parent_rot: np.ndarray, target: np.ndarray,
                 iterations: int) -> np.ndarray:
    """FABRIK in numpy over a batch: ``positions`` (B, n, 3) joint positions, ``world_rot`` (B, n, 4)
    their world rotations, ``parent_rot`` (B, 4) the chain root's parent rotation, ``target`` (B, 3).
    Returns the new local rotations (B, n - 1, 4), each bone turned by the smallest rotation onto its
    new direction (the same contract as :func:`skeletal.ik.fabrik`)."""
    pos = positions.copy()
    offsets = np.diff(positions, axis=1)
    length = np.linalg.norm(offsets, axis=-1)
    root = positions[:, 0].copy()
    n = positions.shape[1]
    for _ in range(iterations):
        pos[:, -1] = target
        for k in range(n - 2, -1, -1):
            d = pos[:, k] - pos[:, k + 1]
            pos[:, k] = pos[:, k + 1] + d * (length[:, k] / np.linalg.norm(d, axis=-1))[:, None]
        pos[:, 0] = root
        for k in range(n - 1):
            d = pos[:, k + 1] - pos[:, k]
            pos[:, k + 1] = pos[:, k] + d * (length[:, k] / np.linalg.norm(d, axis=-1))[:, None]
    new_world = quat_mul(_arc_np(offsets, np.diff(pos, axis=1)), world_rot[:, :-1])
    parents_new = np.concatenate([parent_rot[:, None], new_world[:, :-1]], axis=1)
    return quat_mul(quat_conjugate(parents_new), new_world)


def _chain_fixture(n_joints: int, count: int):
    from ..anim.rig import Rig

    rng = np.random.default_rng(2)
    rest = np.zeros((n_joints, 10))
    rest[:, 6] = 1.0
    rest[:, 7:] = 1.0
    rest[1:, 1] = 0.3
    angles = rng.uniform(-0.3, 0.3, size=(n_joints, 3))
    half = np.linalg.norm(angles, axis=1, keepdims=True) / 2
    rest[:, 3:6] = angles / np.maximum(2 * half, 1e-12) * np.sin(half)
    rest[:, 6] = np.cos(half[:, 0])
    rig = Rig.from_parents([f"j{i}" for i in range(n_joints)], list(range(-1, n_joints - 1)), rest)
    poses = np.repeat(rest[None], count, axis=0)
    world = world_matrices(rig.parents, poses)
    total = 0.3 * (n_joints - 1)
    d = rng.normal(size=(count, 3))
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    targets = d * total * rng.uniform(0.3, 0.9, size=(count, 1))
    return rig, poses, world, targets


def bench_fabrik(count: int, repeats: int, numpy_repeats: int, n_joints: int = 10, iterations: int = 10) -> dict:
    from ..quat import matrix_to_quat

    rig, poses, world, targets = _chain_fixture(n_joints, count)
    chain = list(range(n_joints))
    out = poses.copy()
    table = ik.StageTable(rig.parents)
    table.add("fabrik", chain, iterations=iterations, tolerance=0.0)
    inputs = table.inputs(count)
    inputs[:, 0, ik.IN_TARGET:ik.IN_TARGET + 3] = targets
    scratch, pos = table.scratch()
    work = world.copy()

    def solve():
        out[...] = poses
        work[...] = world
        ik.solve_batch(out, work, rig.parents, table.stage_i, table.stage_f, table.joints, table.jp, inputs,
                       table.update, scratch, pos)

    secs = time_samples(solve, repeats, warmup=2)
    positions = world[:, :, :3, 3]
    rot = matrix_to_quat(world[:, :, :3, :3])
    parent = np.tile([0.0, 0.0, 0.0, 1.0], (count, 1))
    base = time_samples(lambda: numpy_fabrik(positions, rot, parent, targets, iterations), numpy_repeats, warmup=1)
    # the two compute the same rotations
    solve()
    ref = numpy_fabrik(positions, rot, parent, targets, iterations)
    err = np.abs(np.abs(np.sum(ref * out[:, :-1, 3:7], axis=-1)) - 1.0).max()
    return {"count": count, "joints": n_joints, "iterations": iterations,
            "solves_per_s": rate(secs, count, 1.0, "solves/s"),
            "solves_per_s_numpy": rate(base, count, 1.0, "solves/s"), "max_rotation_mismatch": float(err)}


def bench_rows(asset, clip: str, path, quick: bool) -> dict:
    """The IK rows of ``skeletal bench`` (see the module docstring)."""
    legs = bench_two_bone_crowd(asset, clip, 1000, 15 if quick else 40)
    fab = bench_fabrik(2000 if quick else 10000, 5 if quick else 20, 2 if quick else 5)
    cost = (legs["us_per_char"]["median"] - legs["us_per_char_no_ik"]["median"])
    rows = [
        {"name": f"IK: two-bone, {legs['legs']} legs x 1000 characters (Crowd.update)", "stat": legs["us_per_char"],
         "baseline": f"no IK {legs['us_per_char_no_ik']['median']:.2f} us/char",
         "ratio": f"{legs['ratio']:.2f}x time", "reference": "goal < 1.20x"},
        {"name": "IK: the same, 1 thread", "stat": legs["us_per_char_1thread"],
         "baseline": f"no IK {legs['us_per_char_no_ik_1thread']['median']:.2f} us/char",
         "ratio": f"{legs['ratio_1thread']:.2f}x time", "reference": "goal < 1.20x"},
        {"name": f"FABRIK: {fab['joints']}-joint chain, {fab['iterations']} iterations",
         "stat": fab["solves_per_s"], "baseline": f"numpy {fab['solves_per_s_numpy']['median']:,.0f} solves/s",
         "ratio": f"{fab['solves_per_s']['median'] / fab['solves_per_s_numpy']['median']:.1f}x", "reference": ""},
    ]
    return {"rows": rows, "two_bone_crowd": legs, "ik_cost_us_per_char": cost, "fabrik": fab}
