"""Foot placement's leg IK in SIMD lanes (skeletal.playback.footlanes) against the scalar solver it
replaces: the same bits for every lane it solves, the scalar solver itself for the cases it leaves.

The legs are generated: a five-node chain (root, pelvis, thigh, knee, foot) posed at random, with
targets near and past full reach, at the thigh, straight legs, feet turned past the tilt limit and
ground normals facing down.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from numba import njit

import skeletal
from skeletal.demo import demo_asset
from skeletal.errors import SkeletalError
from skeletal.anim.ik_solvers import knee_pole, two_bone_one
from skeletal.anim.pose import world_matrices
from skeletal.anim.vec import _matrix_rotation
from skeletal.playback import footlanes as FL
from skeletal.playback.footpairs import gather_two_legs
from skeletal.playback.jobs import field
from skeletal.playback.procedural import Procedural, find_legs

PARENTS = np.array([-1, 0, 1, 2, 3], np.int32)
A, B, C = 2, 3, 4  # thigh, knee, foot
MAX_TILT = math.radians(35.0)
COS_HALF_TILT = math.cos(0.5 * MAX_TILT) * (1.0 + 1e-12)


@njit(cache=True)
def _solve_lanes(poses, worlds, targets, ups, normals, contact, length, weight, soft, bad):
    """Every case in lanes (blocks of LW): gather, solve, write back; ``bad`` gets the lanes' marks."""
    li, lo = FL.lane_scratch()
    n = poses.shape[0]
    for b0 in range(0, n, FL.LW):
        b1 = min(b0 + FL.LW, n)
        for b in range(b0, b1):
            t = (targets[b, 0], targets[b, 1], targets[b, 2])
            FL.gather_leg(li, b - b0, poses[b], worlds[b], PARENTS, A, B, C, t, (ups[b, 0], ups[b, 1], ups[b, 2]),
                          (normals[b, 0], normals[b, 1], normals[b, 2]), contact[b], length, soft, None)
        FL.leg_lanes(li, lo, np.uint64(b1 - b0), soft > 0.0, COS_HALF_TILT)
        for b in range(b0, b1):
            bad[b] = lo[FL.O_BAD * FL.LW + b - b0] != 0.0
            FL.write_leg(li, lo, b - b0, poses[b], worlds[b], PARENTS, A, B, C, weight[b], soft, COS_HALF_TILT,
                         MAX_TILT)


@njit(cache=True)
def _solve_scalar(poses, worlds, targets, ups, normals, contact, length, weight, soft):
    """The scalar path the lanes replace (foot placement's former per-leg IK)."""
    for b in range(poses.shape[0]):
        rc = FL.foot_rotation((ups[b, 0], ups[b, 1], ups[b, 2]), (normals[b, 0], normals[b, 1], normals[b, 2]),
                              contact[b], worlds[b, C], COS_HALF_TILT, MAX_TILT)
        pole = knee_pole(worlds[b], A, B, C, length)
        two_bone_one(poses[b], worlds[b], PARENTS, A, B, C, (targets[b, 0], targets[b, 1], targets[b, 2]), pole,
                     weight[b], soft, (np.nan, np.nan, np.nan), rc)


def _random_unit_quats(rng, n):
    q = rng.normal(size=(n, 4))
    return q / np.linalg.norm(q, axis=1, keepdims=True)


def _legs(n=400, seed=0):
    """Random chains and IK inputs, with every special case the lanes leave to the scalar solver."""
    rng = np.random.default_rng(seed)
    poses = np.zeros((n, 5, 10))
    poses[:, :, 7:] = 1.0
    poses[:, :, 3:7] = _random_unit_quats(rng, 5 * n).reshape(n, 5, 4)
    poses[:, :, 3:7][:, A:, :] = _random_unit_quats(rng, 3 * n).reshape(n, 3, 4) * [0.4, 0.4, 0.4, 1.0]
    poses[:, :, 3:7] /= np.linalg.norm(poses[:, :, 3:7], axis=2, keepdims=True)
    poses[:, 1, :3] = rng.normal(size=(n, 3))
    poses[:, 2, :3] = rng.normal(scale=0.2, size=(n, 3))
    poses[:, 3, :3] = [0.0, -0.45, 0.0]
    poses[:, 4, :3] = [0.0, -0.42, 0.02]
    poses[:, 1:, 7:] *= rng.uniform(0.7, 1.3, size=(n, 4, 1))  # uniform scale per node
    poses[:20, C, 3:7] = poses[:20, B, 3:7] = [0.0, 0.0, 0.0, 1.0]  # straight legs
    poses[20:24, B, :3] = 0.0  # a zero-length thigh
    worlds = world_matrices(PARENTS, poses)
    thigh, foot = worlds[:, A, :3, 3], worlds[:, C, :3, 3]
    length = 0.87
    # targets: around the foot, some past full reach, some at the thigh
    targets = foot + rng.normal(scale=0.15, size=(n, 3))
    targets[30:60] = thigh[30:60] + rng.normal(size=(30, 3)) * 3.0
    targets[60:64] = thigh[60:64]
    ups = np.tile([0.0, 1.0, 0.0], (n, 1))
    ups[::7] = rng.normal(size=(len(ups[::7]), 3))
    normals = ups + rng.normal(scale=0.3, size=(n, 3))
    normals[70:80] = [0.0, -1.0, 0.0]  # a ground facing down (opposite turn)
    normals[80:100] = ups[80:100] + rng.normal(scale=3.0, size=(20, 3))  # past the tilt limit
    normals /= np.linalg.norm(normals, axis=1, keepdims=True)
    contact = rng.uniform(0.0, 1.0, n)
    contact[::3] = 1.0
    weight = np.where(rng.uniform(size=n) < 0.7, 1.0, rng.uniform(0.05, 1.0, n))
    return poses, worlds, targets, ups, normals, contact, length, weight


def test_leg_lanes_give_the_scalar_solvers_bits():
    for soft in (0.0, 0.1):
        poses, worlds, targets, ups, normals, contact, length, weight = _legs(seed=1 if soft else 0)
        lanes, scalar = poses.copy(), poses.copy()
        bad = np.zeros(len(poses), np.bool_)
        _solve_lanes(lanes, worlds, targets, ups, normals, contact, length, weight, soft, bad)
        _solve_scalar(scalar, worlds, targets, ups, normals, contact, length, weight, soft)
        assert np.array_equal(lanes, scalar), np.abs(lanes - scalar).max()
        assert not np.array_equal(lanes, poses)  # the legs moved
        # most legs solved in the lanes; the special cases (zero-length bone, target at the thigh,
        # opposite turns, tilts past the limit) by the scalar solver
        assert 0.5 * len(bad) < np.count_nonzero(~bad) < len(bad)
        assert bad[20:24].all() and bad[60:64].all() and bad[70:80].all()


@njit(cache=True)
def _gather_all(li, poses, worlds, targets, ups, normals, contact, length, soft, moves, moved):
    """Leg b's inputs into lane b of ``li`` (at most LW legs), its move added (``moved``) or not."""
    for b in range(poses.shape[0]):
        t = (targets[b, 0], targets[b, 1], targets[b, 2])
        up, n = (ups[b, 0], ups[b, 1], ups[b, 2]), (normals[b, 0], normals[b, 1], normals[b, 2])
        if moved:
            FL.gather_leg(li, b, poses[b], worlds[b], PARENTS, A, B, C, t, up, n, contact[b], length, soft,
                          (moves[b, 0], moves[b, 1], moves[b, 2]))
        else:
            FL.gather_leg(li, b, poses[b], worlds[b], PARENTS, A, B, C, t, up, n, contact[b], length, soft, None)


def test_a_leg_gathered_with_a_move_equals_the_leg_of_rows_moved_first():
    # foot placement's phase 3 gathers each leg's joint positions plus the pelvis' move instead of moving
    # the rows; the lanes must hold what the moved rows would give (phases 0-2: rows + move), bit for bit
    for soft in (0.0, 0.1):
        poses, worlds, targets, ups, normals, contact, length, _ = _legs(seed=3)
        pick = np.arange(0, len(poses), len(poses) // FL.LW)[:FL.LW]  # a lane each, across the cases
        poses, worlds, targets, ups, normals, contact = (x[pick] for x in (poses, worlds, targets, ups, normals, contact))
        moves = np.random.default_rng(5).normal(scale=0.1, size=(FL.LW, 3))
        moved_rows = worlds.copy()
        moved_rows[:, 1:, :3, 3] += moves[:, None, :]  # the pelvis' subtree
        by_move, by_rows = np.zeros(FL.N_IN * FL.LW), np.zeros(FL.N_IN * FL.LW)
        _gather_all(by_move, poses, worlds, targets, ups, normals, contact, length, soft, moves, True)
        _gather_all(by_rows, poses, moved_rows, targets, ups, normals, contact, length, soft, moves, False)
        assert np.array_equal(by_move, by_rows)
        unmoved = np.zeros(FL.N_IN * FL.LW)
        _gather_all(unmoved, poses, worlds, targets, ups, normals, contact, length, soft, moves, False)
        assert not np.array_equal(unmoved, by_move)  # (the move reached the lanes)


@njit(cache=True)
def _shepperd_scalar(m, out):
    for i in range(m.shape[0]):
        out[i, 0], out[i, 1], out[i, 2], out[i, 3] = _matrix_rotation(m, i)


@njit(cache=True)
def _shepperd_lanes(m, out):
    li, lo = FL.lane_scratch()
    for i in range(m.shape[0]):
        for col in range(3):
            for row in range(3):
                li[(FL.I_FC + 3 * col + row) * FL.LW] = m[i, row, col]
        q = FL._matrix_rotation(li, FL.I_FC, np.uint64(0))
        out[i, 0], out[i, 1], out[i, 2], out[i, 3] = q


def test_one_root_quaternion_gives_every_case_of_shepperds_bits():
    rng = np.random.default_rng(3)
    q = _random_unit_quats(rng, 4000)
    x, y, z, w = q.T
    m = np.stack([np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
                  np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
                  np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1)], 1)
    m *= rng.uniform(0.5, 2.0, size=(len(m), 1, 3))  # scaled columns (normalised first)
    lanes = np.zeros((len(m), 4))
    _shepperd_lanes(m, lanes)
    ref = np.zeros_like(lanes)
    _shepperd_scalar(m, ref)
    cases = set()
    for i in range(len(m)):
        d = np.diag(m[i] / np.sqrt((m[i] ** 2).sum(axis=0)))
        cases.add(0 if d.sum() > 0 else int(np.argmax(d)) + 1)
    assert cases == {0, 1, 2, 3}
    assert np.array_equal(lanes, ref), np.abs(lanes - ref).max()


def test_overlapping_legs_are_refused():
    # the kernel solves a block's legs before rebuilding any leg's rows: no leg may hold another
    asset = demo_asset()
    leg = find_legs(asset.rig)[0]
    proc = Procedural(skeletal.Mixer(asset, 2, events=False))
    with pytest.raises(SkeletalError, match="overlap"):
        proc.foot_placement("flat", legs={"left": (leg.thigh, leg.knee, leg.foot), "right": (leg.thigh, leg.knee, leg.foot)})


@njit(cache=True)
def _write_through_borrowed(a):
    view = FL.borrowed(a)
    view[1] = 7.0
    view[2] += 1.0
    return FL.keep_alive(a, view)


def test_a_borrowed_array_is_the_same_memory():
    # the owner-less view the kernel passes to its inlined helpers writes the owner's elements
    a = np.zeros(4)
    assert _write_through_borrowed(a) == 8
    assert a.tolist() == [0.0, 7.0, 1.0, 0.0]


def test_thread_scratch_gives_each_thread_its_own_part_and_the_same_bits_as_fresh_scratch(monkeypatch):
    # the job's per-thread scratch (footlanes.thread_scratch) against new arrays per range (a job made
    # without it: range_scratch's fallback), 13 characters (a block of 8 and one of 5: the block's terrain
    # lanes of a short block), 1 thread (the one call) and 2 (ranges in parallel): the same bits
    import numba

    import skeletal._threads as threads_module
    from skeletal.playback import footplacement as FP

    job = FL.thread_scratch(2, 6, 3)
    per_block = FL.LW // 2
    waves = FL.block_waves(2, 6, per_block)
    assert waves % 8 == 0 and waves >= per_block * 2 * 6 + 8
    assert job["wave_scratch"].shape == (3, 3 * waves) and job["lane_in"].shape == (3 * FL.LI_PART,)
    assert job["lane_out"].shape == (3 * FL.LO_PART,) and job["solve_scratch"].shape == (3 * (per_block + 64),)
    assert FL.LI_PART >= FL.LI_SIZE + 8 and FL.LO_PART >= FL.LO_SIZE + 8  # a cache line between two threads' parts
    demo = demo_asset()
    count = 13

    def make(scratch):
        monkeypatch.setattr(FP, "thread_scratch", scratch)
        mixer = skeletal.Mixer(demo, count, events=False)
        mixer.play("walk", offset=np.linspace(0.0, 0.9, count))
        proc = Procedural(mixer)
        stage = proc.foot_placement("terrain:amplitude=0.2,wavelength=3,seed=4", weight=np.linspace(0.2, 1.0, count))
        proc.place(np.stack([np.linspace(-2, 2, count), np.zeros(count), np.linspace(1, -1, count)], 1), 0.3)
        return mixer, stage

    def none(*_):
        return {"wave_scratch": np.zeros((3, 0)), "lane_in": np.zeros(0), "lane_out": np.zeros(0),
                "solve_scratch": np.zeros(0, np.bool_)}

    (own, own_stage), (fresh, fresh_stage) = make(FL.thread_scratch), make(none)
    monkeypatch.setattr(threads_module, "_NO_CAP", True)
    threads = numba.get_num_threads()
    try:
        for frame in range(30):
            numba.set_num_threads(1 if frame < 15 or threads < 2 else 2)
            own.update(1 / 60)
            fresh.update(1 / 60)
            for a, b in ((own.local_pose, fresh.local_pose), (own.world, fresh.world), (own.palettes, fresh.palettes),
                         (own_stage.targets, fresh_stage.targets), (own_stage.normals, fresh_stage.normals)):
                assert np.array_equal(a, b), frame
    finally:
        numba.set_num_threads(threads)
    assert np.abs(own_stage.pelvis_offset).max() > 0.0 and np.ptp(own_stage.heights) > 0.05


@njit(cache=True)
def _solve_few(poses, worlds, targets, ups, normals, contact, length, weight, soft, few):
    """:func:`_solve_lanes` ``few`` legs a block, run as :func:`~skeletal.playback.footlanes.lane_count`
    lanes: the lanes past them hold NaN or an earlier block's legs."""
    li, lo = FL.lane_scratch()
    li[:] = np.nan
    n = poses.shape[0]
    for b0 in range(0, n, few):
        b1 = min(b0 + few, n)
        for b in range(b0, b1):
            t = (targets[b, 0], targets[b, 1], targets[b, 2])
            FL.gather_leg(li, b - b0, poses[b], worlds[b], PARENTS, A, B, C, t, (ups[b, 0], ups[b, 1], ups[b, 2]),
                          (normals[b, 0], normals[b, 1], normals[b, 2]), contact[b], length, soft, None)
        FL.leg_lanes(li, lo, np.uint64(FL.lane_count(b1 - b0)), soft > 0.0, COS_HALF_TILT)
        for b in range(b0, b1):
            FL.write_leg(li, lo, b - b0, poses[b], worlds[b], PARENTS, A, B, C, weight[b], soft, COS_HALF_TILT,
                         MAX_TILT)


def test_a_few_legs_run_in_whole_vectors_with_the_same_bits():
    assert [FL.lane_count(n) for n in (1, 2, 8, 9, 15, 16)] == [8, 8, 8, 16, 16, 16]
    poses, worlds, targets, ups, normals, contact, length, weight = _legs(n=120, seed=2)
    scalar = poses.copy()
    _solve_scalar(scalar, worlds, targets, ups, normals, contact, length, weight, 0.0)
    for few in (2, 3, 11):
        lanes = poses.copy()
        _solve_few(lanes, worlds, targets, ups, normals, contact, length, weight, 0.0, few)
        assert np.array_equal(lanes, scalar), (few, np.abs(lanes - scalar).max())


@njit(cache=True)
def _gather_both_ways(job, b, up, pairs, legs, move):
    pose, world, placement = field(job, "pose"), field(job, "world"), field(job, "placement")
    gather_two_legs(b, job, pose[b], world[b], placement[b], up[0], up[1], up[2], pairs, 2 * b, move)
    FL.gather_legs(b, job, pose[b], world[b], placement[b], up[0], up[1], up[2], legs, 2 * b, move)


def test_a_bipeds_legs_gathered_as_pairs_equal_the_legs_gathered_one_by_one():
    # footpairs.gather_two_legs stores both legs' inputs with one 16-byte store a field: the lanes must
    # hold what gather_legs puts there, bit for bit, with and without the pelvis' move and a soft band
    asset = demo_asset()
    assert len(find_legs(asset.rig)) == 2
    for soft in (0.0, 0.15):
        mixer = skeletal.Mixer(asset, 6, events=False)
        mixer.play(0, offset=np.linspace(0.0, 0.9, 6))
        feet = Procedural(mixer).foot_placement("terrain:amplitude=0.2,wavelength=3", soft=soft)
        for _ in range(3):
            mixer.update(1 / 60)
        job = feet.last.calls[0]
        up = (0.1, 0.98, -0.05)
        for move in (None, (0.01, -0.03, 0.002)):
            pairs, legs = np.full(FL.N_IN * FL.LW, 7.0), np.full(FL.N_IN * FL.LW, 7.0)
            for b in range(6):
                _gather_both_ways(job, b, up, pairs, legs, move)
            assert np.array_equal(pairs, legs), (soft, move)
            written = np.delete(legs.reshape(FL.N_IN, FL.LW)[:, :12], [] if soft else [FL.I_REACH], axis=0)
            assert not np.any(written == 7.0)  # (every field of the twelve lanes was written)
