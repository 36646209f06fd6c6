"""The single character's vector paths (issue 33): slerp rotations eight tracks to a vector
(``playback/single_lanes.py``) and local matrices eight nodes to a vector (``anim/pose.py``) give
the same bits as the one-track / one-node code they replace, and a Player still equals ``bake``.

The reference is the same Player with the packed segments switched off (every ``lanes_seg`` row -1:
the per-track sampler) and the scalar local-matrix formula (:func:`skeletal.pose.local_into`). No
timing here (the ozz harness and ``skeletal bench`` measure it)."""

from __future__ import annotations

import numpy as np
import pytest

import skeletal
from skeletal.demo import demo_asset
from skeletal.errors import SkeletalError
from skeletal.playback import Player
from skeletal.playback import kernels as K
from skeletal.playback.clipset import (CL_SEGMENT_END, CL_SEGMENT_START, SEG_END, SEG_FAST_END, SEG_FIRST, SEG_KIND,
                                      SEG_LERP3, SEG_SLERP, SEG_TIMELINE)
from skeletal.playback.jobs import playback_job
from skeletal.playback.single_lanes import (KIND_NEAR, KIND_TABULATED, LANES, LERP_MIN_TRACKS, LL_WIDTH, LS_WIDTH,
                                            pack_lerp_lanes, pack_rotation_lanes)

from fixtures.shared_assets import need


def _unpacked(mixer) -> None:
    """Switch the mixer's packed segments off (float64 keys are never packed) and copy every row of the
    base pose: the single-action path as it was before the lanes."""
    def none(segments):
        cs = mixer.clipset
        hot, values = K.hot_tracks(cs.track_table), cs.values.astype(np.float64)
        clips, nodes = len(cs.clips), len(mixer.rig)
        every_row = {"base_rows": np.tile(np.arange(nodes), clips), "base_rows_start": np.arange(clips + 1) * nodes}
        return {**pack_rotation_lanes(segments, cs.timeline_keys, hot, values, mixer._slerp_table()),
                **pack_lerp_lanes(segments, cs.timeline_keys, hot, values), **every_row}

    mixer._single_lanes = none  # (an instance attribute over the method)
    mixer.frame = None


def _pair(asset, clip):
    lanes, plain = Player(asset), Player(asset)
    _unpacked(plain.mixer)
    for p in (lanes, plain):
        p.play(clip)
    return lanes, plain


@pytest.fixture(scope="module")
def asset():
    return demo_asset()


def _packed_tracks(player) -> tuple[int, int]:
    """(slerp tracks, LERP3 tracks) in lanes."""
    mixer = player.mixer
    segments = mixer._clip_tables()[1]
    packed = mixer._single_lanes(segments)
    rotations = np.flatnonzero(packed["lanes_seg"][:, LS_WIDTH] > 0)
    vectors = np.flatnonzero(packed["lerp_seg"][:, LL_WIDTH] > 0)
    return (int(sum(segments[g, SEG_END] - segments[g, SEG_FAST_END] for g in rotations)),
            int(sum(segments[g, SEG_END] - segments[g, SEG_FIRST] for g in vectors)))


def _every_node_clip(asset) -> skeletal.Clip:
    """Translation, rotation and scale keys on every node, 9 keys: random rotations (tabulated angles),
    nearly parallel ones, identical pairs and sign flips, so that every lane kind and group mix occurs."""
    rng = np.random.default_rng(7)
    times = np.linspace(0.0, 1.0, 9)
    tracks = []
    for node in range(len(asset.rig.parents)):
        q = rng.normal(size=(9, 4))
        q[::3] = q[0] + 1e-3 * rng.normal(size=4)  # nearly parallel keys
        q[5] = q[4]  # an identical pair
        q /= np.linalg.norm(q, axis=1, keepdims=True)
        q[7] *= -1.0  # the same rotation, the other sign
        tracks += [skeletal.Track(node, "translation", "LINEAR", times, rng.normal(size=(9, 3))),
                   skeletal.Track(node, "rotation", "LINEAR", times, q),
                   skeletal.Track(node, "scale", "LINEAR", times, rng.uniform(0.5, 1.5, size=(9, 3)))]
    return skeletal.Clip(name="every node", tracks=tracks)


@pytest.mark.parametrize("clip", ["walk", "run", "every node"])
def test_packed_tracks_equal_the_per_track_sampler_bit_for_bit(asset, clip):
    lanes, plain = _pair(asset, _every_node_clip(asset) if clip == "every node" else clip)  # (the asset is shared)
    # irregular steps: every key interval, near, tabulated and identical keys, at many fractions
    for dt in np.random.default_rng(3).uniform(0.001, 0.05, 90):
        lanes.update(dt)
        plain.update(dt)
        np.testing.assert_array_equal(lanes.local_pose, plain.local_pose)
        np.testing.assert_array_equal(lanes.world, plain.world)
        for a, b in zip(lanes.palettes, plain.palettes):
            np.testing.assert_array_equal(a, b)
    assert _packed_tracks(lanes)[0] > 0 and _packed_tracks(plain) == (0, 0)
    if clip == "every node":
        n = len(asset.rig.parents)
        rotations, vectors = _packed_tracks(lanes)  # (every clip of the mixer's clip set)
        assert rotations >= n and vectors >= 2 * n


def test_soldier_walk_equals_the_per_track_path_and_bake():
    asset = skeletal.load(need("Soldier.glb"))
    lanes, plain = _pair(asset, "Walk")
    assert _packed_tracks(lanes) >= (50, 100)
    for _ in range(70):  # past one loop of Walk at 60 frames a second
        lanes.update(1 / 60)
        plain.update(1 / 60)
        np.testing.assert_array_equal(lanes.local_pose, plain.local_pose)
        np.testing.assert_array_equal(lanes.world, plain.world)
    baked = skeletal.bake(asset, "Walk", [lanes.time], loop="repeat")
    np.testing.assert_allclose(lanes.node_world, baked["node_world"][0], atol=1e-12)


def test_packing_layout_sorts_each_interval_and_signs_the_second_key(asset):
    """Per key interval the lanes hold the segment's tracks, tabulated angles first (padding repeats the
    last lane), each group of eight says which formulas it needs, and a tabulated lane's coefficient
    is 1 / sin(theta) signed like the second key (+-1 for nearly parallel keys)."""
    player = Player(asset)
    player.play("walk")
    mixer = player.mixer
    _, segments, _, _ = mixer._clip_tables()
    packed = mixer._single_lanes(segments)
    seg, outs, coef, kinds = packed["lanes_seg"], packed["lanes_out"], packed["lanes_coef"], packed["lanes_kind"]
    hot = K.hot_tracks(mixer.clipset.track_table)
    rows = np.flatnonzero(seg[:, LS_WIDTH] > 0)
    assert len(rows) and all(segments[g, SEG_KIND] == SEG_SLERP for g in rows)
    for g in rows:
        at_v, at_c, at_o, at_k, width = seg[g]
        first, end = segments[g, SEG_FAST_END], segments[g, SEG_END]
        m = end - first
        assert width % LANES == 0 and m <= width < m + LANES
        intervals = mixer.clipset.timeline_keys[segments[g, SEG_TIMELINE], 1] - 1
        lane_out = outs[at_o : at_o + intervals * width].reshape(intervals, width)
        table = coef[at_c : at_c + intervals * 2 * width].reshape(intervals, 2, width)
        group_kind = kinds[at_k : at_k + intervals * width // LANES].reshape(intervals, -1)
        for i in range(intervals):
            assert sorted(lane_out[i, :m]) == sorted(hot[first:end, K.HOT_OUT])
            assert (lane_out[i, m:] == lane_out[i, m - 1]).all()  # padding repeats the last lane
            theta, signed = table[i]
            tab = theta > 0
            assert not (tab[1:] & ~tab[:-1]).any()  # tabulated lanes first
            np.testing.assert_allclose(np.abs(signed[tab]) * np.sin(theta[tab]), 1.0, rtol=1e-12)
            assert set(np.abs(signed[~tab]).tolist()) <= {1.0}
            groups = tab.reshape(-1, LANES)
            want = np.where(groups.any(axis=1), KIND_TABULATED, 0) | np.where((~groups).any(axis=1), KIND_NEAR, 0)
            np.testing.assert_array_equal(group_kind[i], want)
            assert (want == KIND_TABULATED | KIND_NEAR).sum() <= 1  # sorted: one group at most needs both


def test_lerp_layout_keeps_every_key_of_every_track(asset):
    player = Player(asset)
    player.play(_every_node_clip(asset))
    mixer = player.mixer
    _, segments, _, _ = mixer._clip_tables()
    packed = mixer._single_lanes(segments)
    seg, outs, vals = packed["lerp_seg"], packed["lerp_out"], packed["lerp_values"]
    cs, hot = mixer.clipset, K.hot_tracks(mixer.clipset.track_table)
    rows = np.flatnonzero(seg[:, LL_WIDTH] > 0)
    assert len(rows)
    for g in range(len(segments)):
        first, end = segments[g, SEG_FIRST], segments[g, SEG_END]
        keys = cs.timeline_keys[segments[g, SEG_TIMELINE], 1] if segments[g, SEG_TIMELINE] >= 0 else 0
        wanted = segments[g, SEG_KIND] == SEG_LERP3 and end - first >= LERP_MIN_TRACKS and keys >= 2
        assert (g in rows) == wanted
        if not wanted:
            continue
        at_v, at_o, width = seg[g]
        block = vals[at_v : at_v + keys * 3 * width].reshape(keys, 3, width)
        for lane, k in enumerate(list(range(first, end)) + [end - 1] * (width - (end - first))):
            assert outs[at_o + lane] == hot[k, K.HOT_OUT]
            start = hot[k, K.HOT_VALUE_START]
            np.testing.assert_array_equal(block[:, :, lane], cs.values[start : start + 3 * keys].reshape(keys, 3))


def test_float64_keys_and_bad_tables_are_not_used(asset):
    player = Player(asset)
    player.play(_every_node_clip(asset))
    mixer = player.mixer
    _, segments, _, _ = mixer._clip_tables()
    cs = mixer.clipset
    plain = pack_rotation_lanes(segments, cs.timeline_keys, K.hot_tracks(cs.track_table), cs.values.astype(np.float64),
                                mixer._slerp_table())
    assert (plain["lanes_seg"] == -1).all() and plain["lanes_values"].size == 0
    fields = mixer._job_fields()
    g = int(np.flatnonzero(fields["lanes_seg"][:, LS_WIDTH] > 0)[0])
    bad = dict(fields, lanes_seg=fields["lanes_seg"].copy())
    bad["lanes_seg"][g, 0] = fields["lanes_values"].size  # keys past the end of the packed values
    with pytest.raises(SkeletalError, match="lanes_seg"):
        playback_job(**bad)
    bad = dict(fields, lanes_out=fields["lanes_out"] + 10 * len(asset.rig.parents))  # stores past the pose
    with pytest.raises(SkeletalError, match="lanes_out"):
        playback_job(**bad)
    bad = dict(fields, lerp_seg=fields["lerp_seg"].copy())
    bad["lerp_seg"][int(np.flatnonzero(fields["lerp_seg"][:, LL_WIDTH] > 0)[0]), 2] = 4  # not a multiple of 8
    with pytest.raises(SkeletalError, match="lerp_seg"):
        playback_job(**bad)
    plain = pack_lerp_lanes(segments, cs.timeline_keys, K.hot_tracks(cs.track_table), cs.values.astype(np.float64))
    assert (plain["lerp_seg"] == -1).all() and plain["lerp_values"].size == 0


@pytest.mark.parametrize("rows", [3, 4])
@pytest.mark.parametrize("nodes", [5, 8, 21])
def test_local_rows_eight_at_a_time_equal_local_into_bit_for_bit(rows, nodes):
    from numba import njit

    from skeletal.anim.pose import local_into, local_rows_all

    @njit
    def eight(pose, world):
        local_rows_all(pose, world)

    @njit
    def one(pose, world):
        for i in range(pose.shape[0]):
            local_into(i, pose, world)

    rng = np.random.default_rng(nodes + rows)
    pose = rng.normal(size=(nodes, 10))
    pose[:, 3:7] /= np.linalg.norm(pose[:, 3:7], axis=1, keepdims=True)
    pose[:, 7:] = rng.uniform(0.5, 2.0, size=(nodes, 3)) * rng.choice([-1.0, 1.0], size=(nodes, 3))
    pose[0, 3:7] = (0.0, 0.0, 0.0, 1.0)  # exact zeros and ones through the same operations
    got, want = np.full((nodes, rows, 4), np.nan), np.full((nodes, rows, 4), np.nan)
    eight(pose, got)
    one(pose, want)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_base_rows_are_the_rows_a_clip_does_not_sample_in_full(asset):
    from skeletal.playback.single_lanes import base_rows

    player = Player(asset)
    clip = _every_node_clip(asset)
    clip.tracks = [t for t in clip.tracks if not (t.node == 2 and t.path == "scale")]  # node 2: scale constant
    player.play(clip)
    mixer = player.mixer
    clip_table, segments, _, _ = mixer._clip_tables()
    rows = base_rows(clip_table, segments, mixer.clipset.track_table, len(mixer.rig))
    c = mixer.clipset.clips.index(clip)
    mine = rows["base_rows"][rows["base_rows_start"][c] : rows["base_rows_start"][c + 1]]
    assert mine.tolist() == [2]
    walk = mixer.clipset.clips.index(asset.clip("walk"))  # rotations only: every row is copied
    theirs = rows["base_rows"][rows["base_rows_start"][walk] : rows["base_rows_start"][walk + 1]]
    assert theirs.tolist() == list(range(len(mixer.rig)))
    # IK or a user's edit of a copied row is undone by the next frame, like any other row
    player.update(0.1)
    expected = player.local_pose.copy()
    player.local_pose[2, 7:] = 5.0
    player.local_pose[5, :3] = 9.0
    player.action(clip).time = 0.1
    player.update(0.0)
    np.testing.assert_array_equal(player.local_pose, expected)


def test_only_the_played_clips_are_packed(asset):
    """The lanes copy the keys of the clips in the mixer's slots only; a clip played later is packed
    when its slot is added (the frame is rebuilt), and the pose follows it exactly."""
    player = Player(asset)
    player.play("walk")
    player.update(0.1)
    mixer = player.mixer
    clip_table, segments, _, _ = mixer._clip_tables()

    def packed_clips():
        seg = mixer._single_lanes(segments)["lanes_seg"]
        return {c for c in range(len(clip_table))
                if (seg[clip_table[c, CL_SEGMENT_START]:clip_table[c, CL_SEGMENT_END], LS_WIDTH] > 0).any()}

    walk, run = (mixer.clipset.clips.index(asset.clip(n)) for n in ("walk", "run"))
    assert packed_clips() == {walk}
    player.play("run")
    player.stop("walk")
    plain = Player(asset)
    _unpacked(plain.mixer)
    plain.play("walk")
    plain.update(0.1)
    plain.play("run")
    plain.stop("walk")
    for _ in range(5):
        player.update(0.05)
        plain.update(0.05)
        np.testing.assert_array_equal(player.local_pose, plain.local_pose)
    assert run in packed_clips()


def test_a_float32_player_keeps_the_one_track_path(asset):
    """The vector forms are float64; a float32 player samples track by track as before (the same bits
    with or without packed segments) and stays within float32 of the float64 player."""
    lanes, plain = Player(asset, dtype=np.float32), Player(asset, dtype=np.float32)
    _unpacked(plain.mixer)
    exact = Player(asset)
    for p in (lanes, plain, exact):
        p.play("run")
    for _ in range(12):
        for p in (lanes, plain, exact):
            p.update(0.037)
        np.testing.assert_array_equal(lanes.local_pose, plain.local_pose)
        np.testing.assert_array_equal(lanes.world, plain.world)
    np.testing.assert_allclose(lanes.world, exact.world, atol=1e-4)


def _world_in_python(parents, pose):
    """World matrices by the scalar formula in Python floats (IEEE doubles, the kernels' order)."""
    world = np.zeros((len(parents), 4, 4))
    for i, p in enumerate(parents):
        tx, ty, tz, x, y, z, w, sx, sy, sz = (float(v) for v in pose[i])
        x2, y2, z2 = x + x, y + y, z + z
        xx, xy, xz, yy, yz, zz = x * x2, x * y2, x * z2, y * y2, y * z2, z * z2
        wx, wy, wz = w * x2, w * y2, w * z2
        local = ((1.0 - (yy + zz)) * sx, (xy - wz) * sy, (xz + wy) * sz, tx,
                 (xy + wz) * sx, (1.0 - (xx + zz)) * sy, (yz - wx) * sz, ty,
                 (xz - wy) * sx, (yz + wx) * sy, (1.0 - (xx + yy)) * sz, tz)
        if p < 0:
            world[i, :3] = np.reshape(local, (3, 4))
        else:
            for r in range(3):
                a0, a1, a2, a3 = (float(v) for v in world[p, r])
                for c in range(4):
                    world[i, r, c] = a0 * local[c] + a1 * local[4 + c] + a2 * local[8 + c]
                world[i, r, 3] += a3
        world[i, 3] = 0.0, 0.0, 0.0, 1.0
    return world


@pytest.mark.parametrize("rows", [3, 4])
@pytest.mark.parametrize("wide", [False, True])
def test_affine_products_two_rows_to_a_vector_equal_the_four_wide_form(monkeypatch, asset, rows, wide):
    """World rows and palettes with rows 0 and 1 in one 8-wide vector (AVX-512 CPUs) and in the
    4-wide form (others): the scalar formula's bits, signs of zero included, whichever form this CPU
    compiles by default."""
    from numba import njit

    from skeletal.anim import pose as P
    from skeletal.anim import pose_ir

    monkeypatch.setattr(pose_ir, "_wide_vectors", lambda: wide)

    @njit(cache=False)
    def run(parents, nodes, pose, world, joints, inverse_bind, out):
        P.world_subset_staged(parents, nodes, pose, world)
        P.palettes_one(world, joints, inverse_bind, out)

    rng = np.random.default_rng(rows)
    parents = asset.rig.parents
    n = len(parents)
    pose = rng.normal(size=(n, 10))
    pose[:, 3:7] /= np.linalg.norm(pose[:, 3:7], axis=1, keepdims=True)
    pose[1, :] = 0.0  # zeros times negative entries: signed zeros through the products
    pose[1, 6:] = 1.0
    skin = asset.skins[0]
    joints = np.asarray(skin.joints, np.int64)
    inverse_bind = np.ascontiguousarray(np.asarray(skin.inverse_bind, np.float64)[:, :rows])
    world, out = np.full((n, rows, 4), np.nan), np.full((len(joints), rows, 4), np.nan)
    run(parents, P.depth_order(parents, np.arange(n)), pose, world, joints, inverse_bind, out)
    expected = _world_in_python(parents, pose)
    np.testing.assert_array_equal(world, expected[:, :rows])
    np.testing.assert_array_equal(np.signbit(world), np.signbit(expected[:, :rows]))
    palette = np.zeros((len(joints), rows, 4))
    for j, i in enumerate(joints):
        for r in range(3):
            a0, a1, a2, a3 = (float(v) for v in expected[i, r])
            for c in range(4):
                b0, b1, b2 = (float(inverse_bind[j, k, c]) for k in range(3))
                palette[j, r, c] = a0 * b0 + a1 * b1 + a2 * b2
            palette[j, r, 3] += a3
        if rows == 4:
            palette[j, 3] = 0.0, 0.0, 0.0, 1.0
    np.testing.assert_array_equal(out, palette)
    np.testing.assert_array_equal(np.signbit(out), np.signbit(palette))
