"""The single-update fast paths of issue 17 compute what the plain code computes, bit for bit:
``quat.near_slerp_into`` (slerp_into's identical / nearly-parallel branch, 4-wide), the 4-wide affine
rows of world matrices and palettes (``pose``), ``quat.sin_quarter`` (compiled and numpy twins),
``jobs.field`` (a job's arrays read without reference counts), ``sampling.lerp3_into`` (4-wide
translation / scale lerps), ``pose.world_subset_staged`` (world rows in two passes, depth order) and
``quat.near_slerp_known_into`` (the near-key slerp with its tests tabulated).
No timing here (the bench measures it)."""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit

import skeletal
from skeletal.bench import DEFAULT_MODEL
from skeletal.demo import demo_asset
from skeletal.playback.clipset import TK_INTERP, TK_KEY_START, TK_PATH, TK_VALUE_START, TK_WIDTH, ClipSet
from skeletal.playback.jobs import borrow, field
from skeletal.anim.pose import (ancestors_and_self, depth_order, local_into, skin_palette, world_matrices,
                                world_rows_most, world_subset_one, world_subset_staged)
from skeletal.quat import (NEAR_FLIP, NEAR_SAME, _sin_quarter, near_slerp_into, near_slerp_known_into,
                           near_slerp_table, sin_quarter, slerp_into)
from skeletal.anim.sampling import lerp3_into


@pytest.fixture(scope="module")
def asset():
    return skeletal.load(DEFAULT_MODEL) if DEFAULT_MODEL.exists() else demo_asset()


def test_sin_quarter_is_within_two_ulp_and_the_twins_agree():
    x = np.linspace(0.0, np.pi / 2, 20001)
    poly = _sin_quarter(x)
    assert np.all(np.abs(poly - np.sin(x)) <= 2 * np.spacing(np.sin(x)))
    compiled = np.array([sin_quarter(v) for v in x[::97]])
    assert np.array_equal(compiled, poly[::97])  # the numpy table and the kernels round alike
    assert sin_quarter(0.0) == 0.0 and abs(sin_quarter(np.pi / 2) - 1.0) <= 2.3e-16


@njit(cache=False)
def _both(values, starts, us, near, plain):
    for i in range(starts.shape[0]):
        a = starts[i]
        near_slerp_into(near, 4 * i, values, a, us[i])
        slerp_into(plain, 4 * i, np.float64(values[a]), np.float64(values[a + 1]), np.float64(values[a + 2]),
                   np.float64(values[a + 3]), np.float64(values[a + 4]), np.float64(values[a + 5]),
                   np.float64(values[a + 6]), np.float64(values[a + 7]), us[i])


def test_near_slerp_equals_slerp_into_bit_for_bit(asset):
    cs = skeletal.Player(asset).mixer.clipset
    starts = []
    for k, row in enumerate(cs.track_table):
        if row[TK_PATH] != 1:
            continue
        keys = (cs.value_start[k + 1] - cs.value_start[k]) // 4
        zero = cs.slerp_keys[row[TK_KEY_START]:row[TK_KEY_START] + keys - 1, 0] == 0.0
        starts.extend(row[TK_VALUE_START] + 4 * np.flatnonzero(zero))
    # and by construction: identical keys, a key against its near copy with the opposite sign
    q = np.array([0.1, 0.2, 0.3, 0.9], np.float32)
    q /= np.linalg.norm(q)
    r = -(q + np.float32(1e-3) * np.array([1, -1, 0.5, 0], np.float32))
    values = np.concatenate([cs.values, q, q, q, r]).astype(np.float32)
    n = len(cs.values)
    starts = np.array(list(starts) + [n, n + 4], np.int64)
    assert len(starts) > 100
    us = np.random.default_rng(3).uniform(0.0, 1.0, len(starts))
    us[:3] = 0.0, 1.0, 0.5
    near, plain = np.full(4 * len(starts), np.nan), np.full(4 * len(starts), np.nan)
    _both(values, starts, us, near, plain)
    assert np.array_equal(near.view(np.int64), plain.view(np.int64))
    assert np.array_equal(near[-8:-4], q.astype(np.float64))  # identical keys: a unchanged
    # a float32 pose (the crowd's) takes slerp_into itself
    near32, plain32 = np.zeros(4 * len(starts), np.float32), np.zeros(4 * len(starts), np.float32)
    _both(values, starts, us, near32, plain32)
    assert np.array_equal(near32, plain32) and np.array_equal(near32, plain.astype(np.float32))


def _world_scalar(parents, pose):
    """The scalar formula of pose.world_node_into, in the same order of operations (numpy float64)."""
    out = np.zeros((len(parents), 4, 4))
    for i, p in enumerate(parents):
        tx, ty, tz, x, y, z, w, sx, sy, sz = (float(v) for v in pose[i])
        x2, y2, z2 = x + x, y + y, z + z
        xx, xy, xz, yy, yz, zz = x * x2, x * y2, x * z2, y * y2, y * z2, z * z2
        wx, wy, wz = w * x2, w * y2, w * z2
        local = [[(1.0 - (yy + zz)) * sx, (xy - wz) * sy, (xz + wy) * sz, tx],
                 [(xy + wz) * sx, (1.0 - (xx + zz)) * sy, (yz - wx) * sz, ty],
                 [(xz - wy) * sx, (yz + wx) * sy, (1.0 - (xx + yy)) * sz, tz]]
        if p < 0:
            out[i, :3] = local
        else:
            for r in range(3):
                a0, a1, a2, a3 = (float(v) for v in out[p, r])
                for c in range(4):
                    out[i, r, c] = a0 * local[0][c] + a1 * local[1][c] + a2 * local[2][c] + (a3 if c == 3 else 0.0)
        out[i, 3] = 0.0, 0.0, 0.0, 1.0
    return out


def test_vector_affine_rows_equal_the_scalar_formula(asset):
    player = skeletal.Player(asset)
    player.play(asset.clips[0].name)
    player.update(0.37)
    pose, parents = player.local_pose.astype(np.float64), asset.rig.parents
    expected = _world_scalar(parents, pose)
    world = world_matrices(parents, pose)
    assert np.array_equal(world, expected)
    assert np.array_equal(player.world, expected)  # the update kernel's world rows
    skin = asset.skins[0]
    joints, inverse_bind = np.asarray(skin.joints), np.asarray(skin.inverse_bind, np.float64)
    palette = skin_palette(world, joints, inverse_bind)
    scalar = np.zeros_like(palette)
    for j, i in enumerate(joints):
        for r in range(3):
            a0, a1, a2, a3 = (float(v) for v in world[i, r])
            for c in range(4):
                b0, b1, b2 = (float(inverse_bind[j, k, c]) for k in range(3))
                scalar[j, r, c] = a0 * b0 + a1 * b1 + a2 * b2 + (a3 if c == 3 else 0.0)
        scalar[j, 3] = 0.0, 0.0, 0.0, 1.0
    assert np.array_equal(palette, scalar)


@njit(cache=False)
def _field_sums(job, n):
    total = 0.0
    for _ in range(n):
        fs = field(job, "fs")
        pose = field(job, "pose")
        total += fs.sum() + pose[0].sum()
    return total, field(job, "base_unmasked")


def test_field_reads_a_jobs_arrays_in_place(asset):
    player = skeletal.Player(asset)
    player.play(asset.clips[0].name)
    player.update(0.1)
    mixer = player.mixer
    job = mixer.frame.job
    total, unmasked = _field_sums(job, 1000)  # borrowed reads: no reference taken or dropped
    assert unmasked == bool(mixer._base_unmasked)
    assert total == pytest.approx(1000 * (mixer.fs.sum() + mixer.local_pose[0].sum()))
    before = mixer.local_pose.copy()
    player.update(0.2)  # the job is still whole after the reads
    assert not np.array_equal(before, mixer.local_pose)
    assert np.isfinite(player.palettes[0]).all()


@njit(cache=False)
def _passes_on(job, n):
    """Reads the job through an inner function n times (one that numba does not inline)."""
    total = 0.0
    for _ in range(n):
        total += _inner_sum(job)
    return total


@njit(cache=False, inline="never")
def _inner_sum(job):
    return field(job, "fs").sum() + field(job, "pose")[0].sum()


def test_a_borrowed_job_reads_the_same_and_takes_no_reference(asset):
    # borrow(job) is the job's fields by a plain pointer: field() reads the same arrays through it, and
    # code that passes it on has no reference count to take (in the update's and foot placement's
    # per-instance bodies the structref took several atomic ones per character, on two threads all on
    # the one cache line of the shared job's count)
    player = skeletal.Player(asset)
    player.play(asset.clips[0].name)
    player.update(0.1)
    job = player.mixer.frame.job
    expected = 50 * (player.mixer.fs.sum() + player.mixer.local_pose[0].sum())

    @njit(cache=False)
    def borrowed(job, n):
        return _passes_on(borrow(job), n)

    assert borrowed(job, 50) == pytest.approx(expected)
    assert _passes_on(job, 50) == pytest.approx(expected)
    borrowed_sig = [s for s in _passes_on.signatures if "Borrowed" in str(s)]
    assert len(borrowed_sig) == 1 and len(_passes_on.signatures) == 2
    borrowed_ir = _passes_on.inspect_llvm(borrowed_sig[0])
    assert "call void @NRT_incref" not in borrowed_ir and "call void @NRT_decref" not in borrowed_ir
    assert borrowed(job, 1) == _passes_on(job, 1)


@njit(cache=False)
def _lerp3_both(values, starts, us, fast, plain):
    for i in range(starts.shape[0]):
        lerp3_into(fast[i], 0, values, np.uint64(starts[i]), us[i])
        s = 1.0 - us[i]
        for c in range(3):
            plain[i, c] = np.float64(values[starts[i] + c]) * s + np.float64(values[starts[i] + 3 + c]) * us[i]


def test_lerp3_equals_the_scalar_lerp_bit_for_bit(asset):
    """sampling.lerp3_into (4 lanes wide, float32 keys into float64) against the scalar formula, for every
    key interval of every LINEAR translation and scale track of the model's clips, and for the last
    interval of a value array (no float to read past it: the scalar fallback)."""
    cs = ClipSet(asset.clips)
    tracks = cs.track_table
    starts = []
    for k in range(cs.track_count):
        if tracks[k, TK_PATH] in (0, 2) and tracks[k, TK_WIDTH] == 3 and tracks[k, TK_INTERP] == 1:
            keys = cs.key_start[k + 1] - cs.key_start[k]
            starts += [tracks[k, TK_VALUE_START] + 3 * key for key in range(keys - 1)]
    starts = np.array(starts, dtype=np.int64)
    assert len(starts) > 10
    us = np.random.default_rng(4).uniform(0.0, 1.0, len(starts))
    fast, plain = np.zeros((len(starts), 3)), np.zeros((len(starts), 3))
    _lerp3_both(cs.values, starts, us, fast, plain)
    np.testing.assert_array_equal(fast, plain)
    tail = np.arange(6, dtype=np.float32) * np.float32(0.37)  # one interval, nothing after it
    fast, plain = np.zeros((1, 3)), np.zeros((1, 3))
    _lerp3_both(tail, np.zeros(1, np.int64), np.array([0.3]), fast, plain)
    np.testing.assert_array_equal(fast, plain)


@njit(cache=False)
def _worlds(parents, nodes, staged_nodes, pose, one, staged):
    world_subset_one(parents, nodes, pose, one)
    world_subset_staged(parents, staged_nodes, pose, staged)


def test_staged_world_rows_equal_world_subset_one(asset):
    """pose.world_subset_staged (float64: local matrices first, then the parent products in depth
    order) writes the rows world_subset_one writes, bit for bit: every node, a subset (the skin's joints
    and their ancestors), and float32 3x4 rows (the plain path)."""
    player = skeletal.Player(asset)
    player.play(asset.clips[0].name)
    player.update(0.37)
    parents, pose = asset.rig.parents, player.local_pose.astype(np.float64)
    n = len(parents)
    every = np.arange(n, dtype=np.int64)
    subset = ancestors_and_self(parents, asset.skins[0].joints)
    for nodes, width, dtype in ((every, 4, np.float64), (subset, 4, np.float64), (every, 3, np.float32)):
        order = depth_order(parents, nodes)
        assert sorted(order.tolist()) == nodes.tolist()
        assert all(parents[i] < 0 or list(order).index(parents[i]) < k for k, i in enumerate(order))
        one = np.zeros((n, width, 4), dtype)
        staged = np.full((n, width, 4), 7.0, dtype)
        staged[np.setdiff1d(every, nodes)] = 0.0  # rows not listed are left alone by both
        _worlds(parents, nodes, order, pose.astype(dtype), one, staged)
        np.testing.assert_array_equal(staged, one)


@njit(cache=False)
def _most_and_locals(parents, nodes, pose, most, locals_):
    world_rows_most(parents, nodes, pose, most)
    for i in range(pose.shape[0]):
        local_into(i, pose, locals_)


def test_world_rows_most_equal_the_staged_rows_of_its_nodes(asset):
    """pose.world_rows_most (foot placement's rows before its IK: every local matrix eight at a time,
    then the listed nodes' products) writes the listed rows world_subset_staged writes for every node,
    bit for bit, and leaves each other row holding its local matrix."""
    player = skeletal.Player(asset)
    player.play(asset.clips[0].name)
    player.update(0.37)
    parents, pose = asset.rig.parents, player.local_pose.astype(np.float64)
    n = len(parents)
    every = np.arange(n, dtype=np.int64)
    subset = ancestors_and_self(parents, asset.skins[0].joints[: max(1, len(asset.skins[0].joints) // 2)])
    assert 0 < len(subset) < n
    full = np.zeros((n, 4, 4))
    _worlds(parents, every, depth_order(parents, every), pose, np.zeros((n, 4, 4)), full)
    most, locals_ = np.full((n, 4, 4), 7.0), np.zeros((n, 4, 4))
    _most_and_locals(parents, depth_order(parents, subset), pose, most, locals_)
    np.testing.assert_array_equal(most[subset], full[subset])
    rest = np.setdiff1d(every, subset)
    np.testing.assert_array_equal(most[rest][:, :3], locals_[rest][:, :3])


@njit(cache=False)
def _known_both(values, starts, us, flags, known, near):
    for i in range(starts.shape[0]):
        near_slerp_known_into(known, 4 * i, values, starts[i], us[i], flags[i])
        near_slerp_into(near, 4 * i, values, starts[i], us[i])


def test_near_slerp_with_tabulated_tests_equals_near_slerp(asset):
    """quat.near_slerp_known_into (the identical-keys and sign tests read from near_slerp_table)
    against near_slerp_into, bit for bit: every near key pair of the model's LINEAR rotation tracks,
    plus identical keys and a pair that needs its sign flipped, made for the purpose."""
    cs = skeletal.Player(asset).mixer.clipset
    q = np.array([0.1, 0.2, 0.3, 0.9], np.float32)
    q /= np.linalg.norm(q)
    r = -(q + np.float32(1e-3) * np.array([1, -1, 0.5, 0], np.float32))
    values = np.concatenate([cs.values, q, q, q, r]).astype(np.float32)
    n = len(cs.values)
    rotation = [(int(cs.key_start[k]), int(cs.value_start[k]), int(cs.key_start[k + 1] - cs.key_start[k]))
                for k in range(cs.track_count) if cs.track_table[k, TK_PATH] == 1 and cs.track_table[k, TK_INTERP] == 1]
    extra_row = len(cs.slerp_keys)
    keys = np.vstack([cs.slerp_keys, np.zeros((3, 2))])
    table = near_slerp_table(keys, rotation + [(extra_row, n, 4)], values)
    starts, flags = [], []
    for row, start, count in rotation + [(extra_row, n, 4)]:
        for i in range(count - 1):
            if table[row + i, 0] == 0.0:
                starts.append(start + 4 * i)
                flags.append(table[row + i, 1])
    flags = np.array(flags)
    assert len(starts) > 100 and (flags == NEAR_SAME).any() and (flags == NEAR_FLIP).any()
    assert np.array_equal(table[table[:, 0] > 0], keys[table[:, 0] > 0])  # tabulated angles untouched
    us = np.random.default_rng(5).uniform(0.0, 1.0, len(starts))
    known, near = np.full(4 * len(starts), np.nan), np.full(4 * len(starts), np.nan)
    _known_both(values, np.array(starts, np.int64), us, flags, known, near)
    assert np.array_equal(known.view(np.int64), near.view(np.int64))


def test_the_playback_state_starts_on_a_cache_line(asset):
    # numpy places an array 16-byte aligned, so a (4, 4) float64 world matrix straddled three cache lines
    # in three placements of four, and a Mixer's update ran 0.36-0.39 us a character on two threads by
    # where its arrays fell; skeletal._aligned allocates the per-instance arrays at a 64-byte boundary
    from skeletal._aligned import ALIGN, aligned_copy, aligned_empty, aligned_zeros
    from skeletal.playback.footlanes import thread_scratch
    from skeletal.playback.procedural import Procedural

    for shape, dtype in (((3, 5, 4, 4), np.float64), ((7,), np.bool_), (11, np.int64), ((2, 3), np.float32)):
        a = aligned_zeros(shape, dtype)
        assert a.ctypes.data % ALIGN == 0 and a.flags.c_contiguous and a.flags.writeable and a.dtype == dtype
        assert not a.any() and aligned_empty(shape, dtype).shape == a.shape
    b = aligned_copy(np.arange(12.0).reshape(3, 4), np.float32)
    assert b.ctypes.data % ALIGN == 0 and b.dtype == np.float32 and np.array_equal(b, np.arange(12).reshape(3, 4))

    mixer = skeletal.Mixer(asset, 5, events=False)
    mixer.play(0)
    crowd = skeletal.Crowd(asset, 5)
    feet = Procedural(mixer).foot_placement("terrain:amplitude=0.2,wavelength=3")
    mixer.update(1 / 60)
    arrays = {name: getattr(mixer, name) for name in
              ("local_pose", "morph_weights", "world", "palettes", "fs", "ist", "cursors", "snap_pose")}
    arrays["crowd palettes"] = crowd.palettes
    for name in ("state", "contact", "targets", "heights", "normals", "_queried", "locked", "lock"):
        arrays[f"foot {name}"] = getattr(feet, name)
    for name, array in thread_scratch(2, 6, 2).items():  # foot placement's lanes: vectors of 8 float64
        arrays[f"lanes {name}"] = array
    for name, array in arrays.items():
        assert array.size == 0 or array.ctypes.data % ALIGN == 0, f"{name} starts {array.ctypes.data % ALIGN} bytes into a line"
