"""The crowd's wide path (16 instances per SIMD lane group, skeletal.playback.wide) against the
per-instance path: same poses and palettes within float32 rounding, for groups that go wide and
groups that fall back (crossfades, other clips, a partial last group), with the key-major packs
checked against the clip set they come from."""

from __future__ import annotations

import numpy as np
import pytest

from skeletal.demo import demo_asset
from skeletal.playback import Crowd
from skeletal.playback.clipset import SEG_END, SEG_FIRST, SEG_KIND, SEG_LERP3, SEG_NLERP, TK_OUT, TK_VALUE_START
from skeletal.playback.wide import LANES, key_major, wide_clips


@pytest.fixture(scope="module")
def asset():
    return demo_asset()


def _pair(asset, count, **options):
    return Crowd(asset, count, **options), Crowd(asset, count, wide=False, **options)


def _step_both(wide, narrow, steps, dt=1 / 60):
    for _ in range(steps):
        wide.update(dt)
        narrow.update(dt)


def test_wide_matches_the_per_instance_path(asset):
    count = 3 * LANES + 5  # three full groups and a partial one (per instance)
    offsets = np.linspace(0, asset.clip("walk").duration, count, endpoint=False)
    speeds = np.linspace(0.5, 1.5, count)
    wide, narrow = _pair(asset, count)
    for crowd in (wide, narrow):
        crowd.play("walk", offsets=offsets, speeds=speeds)
    _step_both(wide, narrow, 20)
    assert wide.frame.wide is not None, "the wide kernel did not run"
    assert narrow.frame.wide is None
    np.testing.assert_allclose(wide.palettes, narrow.palettes, atol=2e-5)
    np.testing.assert_allclose(wide.local_pose, narrow.local_pose, atol=2e-5)
    np.testing.assert_array_equal(wide.cursors, narrow.cursors)


def test_wide_groups_fall_back_per_instance(asset):
    count = 2 * LANES
    wide, narrow = _pair(asset, count)
    clips = [c.name for c in asset.clips]
    other = next(n for n in clips if n != "walk")
    for crowd in (wide, narrow):
        crowd.play("walk", offsets=np.linspace(0, 0.5, count))
        # one instance of the second group crossfades: that group goes per instance, the first stays wide
        crowd.crossfade(other, 0.3, instances=[LANES + 3])
    _step_both(wide, narrow, 10)
    np.testing.assert_allclose(wide.palettes, narrow.palettes, atol=2e-5)
    np.testing.assert_allclose(wide.local_pose, narrow.local_pose, atol=2e-5)
    # after the fade the whole crowd is single-clip again (two clips, each group on one)
    _step_both(wide, narrow, 30)
    np.testing.assert_allclose(wide.palettes, narrow.palettes, atol=2e-5)


def test_key_major_packs_hold_the_clip_values(asset):
    crowd = Crowd(asset, LANES)
    crowd.play("walk")
    clip_table, segments, _, _ = crowd._clip_tables()
    cs = crowd.clipset
    wide = wide_clips(clip_table, segments, cs.timeline_keys, cs.track_table)
    assert wide[cs.index("walk")]
    packed, seg_table, dest = key_major(clip_table, segments, cs.timeline_keys, cs.track_table, cs.values, wide)
    checked = 0
    for g in range(len(segments)):
        kind = segments[g, SEG_KIND]
        if seg_table[g, 0] < 0 or kind not in (SEG_LERP3, SEG_NLERP):
            continue
        first, end = segments[g, SEG_FIRST], segments[g, SEG_END]
        m, width = end - first, 3 if kind == SEG_LERP3 else 4
        for t, k in enumerate(range(first, end)):
            for i in range(width):
                x = t * 3 + i if kind == SEG_LERP3 else i * m + t
                key = 1
                assert packed[seg_table[g, 0] + key * width * m + x] == cs.values[
                    cs.track_table[k, TK_VALUE_START] + key * width + i]
                assert dest[seg_table[g, 1] + x] == (cs.track_table[k, TK_OUT] + i) * LANES
                checked += 1
    assert checked > 0


def test_wide_is_off_where_it_cannot_run(asset):
    crowd = Crowd(asset, LANES, keep_world=True)
    crowd.play("walk")
    crowd.update(1 / 60)
    assert not crowd._wide_ok()  # kept world matrices: the per-instance kernel runs
    crowd = Crowd(asset, LANES)
    crowd.play("walk")
    crowd.add_layer("upper", weight=0.5)
    assert not crowd._wide_ok()


def test_transpose4_to_moves_4x4_blocks():
    from numba import njit

    from skeletal.playback.wide import transpose4_to

    @njit
    def blocks(src, dst, width, rows):
        for x in range(0, width, 4):
            for lane in range(0, 8, 4):
                transpose4_to(src, lane * width + x, width, dst, rows[x] + lane, rows[x + 1] + lane,
                              rows[x + 2] + lane, rows[x + 3] + lane)

    width = 8
    src = np.arange(8 * width, dtype=np.float32)  # [lane][x]
    rows = np.array([5, 0, 7, 2, 1, 6, 3, 4], np.int64) * 8  # x -> its destination row, scattered
    dst = np.full(8 * 8, -1.0, np.float32)
    blocks(src, dst, width, rows)
    expected = np.empty_like(dst)
    for x in range(width):
        expected[rows[x]:rows[x] + 8] = src.reshape(8, width)[:, x]
    np.testing.assert_array_equal(dst, expected)


def test_local_pose_is_current_whenever_it_is_read(asset):
    """The wide groups' local rows stay in the lane layout until read: reads after wide updates, after
    updates where a group falls back per instance, after evaluate() and after an assignment all see
    what the per-instance path computes."""
    count = 2 * LANES
    wide, narrow = _pair(asset, count)
    other = next(c.name for c in asset.clips if c.name != "walk")
    for crowd in (wide, narrow):
        crowd.play("walk", offsets=np.linspace(0, 0.7, count))
    _step_both(wide, narrow, 5)  # wide updates, local_pose not read in between
    assert wide._pose_lanes is not None, "the wide path left its rows in the lane store"
    np.testing.assert_allclose(wide.local_pose, narrow.local_pose, atol=2e-5)
    assert wide._pose_lanes is None
    _step_both(wide, narrow, 3)
    for crowd in (wide, narrow):  # group 0 falls back per instance, group 1 stays wide
        crowd.crossfade(other, 0.2, instances=[2])
    _step_both(wide, narrow, 4)
    np.testing.assert_allclose(wide.local_pose, narrow.local_pose, atol=2e-5)
    _step_both(wide, narrow, 30)  # the fade is over: group 0 plays two clips (per instance), group 1 wide
    np.testing.assert_allclose(wide.local_pose, narrow.local_pose, atol=2e-5)
    _step_both(wide, narrow, 2)
    wide.evaluate()
    narrow.evaluate()
    np.testing.assert_allclose(wide.local_pose, narrow.local_pose, atol=2e-5)
    np.testing.assert_allclose(wide.palettes, narrow.palettes, atol=2e-5)
    _step_both(wide, narrow, 2)
    wide.local_pose = wide.local_pose.copy()  # a new array: the next wide update fills it when read
    _step_both(wide, narrow, 2)
    np.testing.assert_allclose(wide.local_pose, narrow.local_pose, atol=2e-5)


def _twins(asset, count, ik=False):
    """Two wide crowds in the same state: ``eager`` reads ``local_pose`` after every update (its rows
    move to the lane store after the first read), ``lazy`` keeps them in per-thread scratch until read."""
    offsets = np.linspace(0, asset.clip("walk").duration, count, endpoint=False)
    twins = Crowd(asset, count), Crowd(asset, count)
    for crowd in twins:
        crowd.play("walk", offsets=offsets, speeds=np.linspace(0.6, 1.4, count))
    if ik:
        from test_crowd_wide_ik import _legs

        _legs(twins, count, near=True)
    return twins


@pytest.mark.parametrize("ik", [False, True], ids=["no-ik", "two-bone-legs"])
def test_scratch_rows_rebuild_the_same_pose_when_first_read(asset, ik):
    """Until ``local_pose`` is first read, wide groups keep their local rows in per-thread scratch; the
    first read rebuilds them (the same sampling, the rotations IK left put back): bit for bit what a
    crowd that kept them in its lane store all along holds, and the palettes never differ."""
    count = 3 * LANES + 3
    eager, lazy = _twins(asset, count, ik)
    for _ in range(6):
        eager.update(1 / 50)
        lazy.update(1 / 50)
        eager.local_pose  # noqa: B018 (read every frame: the lane store from the first read on)
        np.testing.assert_array_equal(lazy.palettes, eager.palettes)
    assert lazy.frame.wide_arrays["store"].shape[0] == 0, "the lazy crowd's rows stayed in scratch"
    assert eager.frame.wide_arrays["store"].shape[0] == 3, "the eager crowd's rows went to the lane store"
    np.testing.assert_array_equal(lazy.local_pose, eager.local_pose)
    assert lazy.frame.wide_arrays["store"].shape[0] == 3
    for _ in range(3):  # from now on both write their lane stores
        eager.update(1 / 50)
        lazy.update(1 / 50)
    np.testing.assert_array_equal(lazy.local_pose, eager.local_pose)
    np.testing.assert_array_equal(lazy.palettes, eager.palettes)


def test_the_rebuilt_pose_is_the_last_updates_not_the_new_clocks(asset):
    """Changing the actions after an update (seek, another clip) and reading ``local_pose`` before the
    next update gives the pose of that update, as the lane store did: the rebuild uses the sample
    times and clips each group had then."""
    count = 2 * LANES
    eager, lazy = _twins(asset, count)
    other = next(c.name for c in asset.clips if c.name != "walk")
    for crowd in (eager, lazy):
        crowd.update(1 / 40)
        crowd.update(1 / 40)
    expected = eager.local_pose.copy()
    lazy.seek("walk", 0.123, instances=list(range(LANES, count)))
    lazy.play(other, restart=True, instances=list(range(LANES)))
    np.testing.assert_array_equal(lazy.local_pose, expected)


def test_evaluate_runs_the_wide_kernel_without_advancing(asset):
    """``Crowd.evaluate`` poses the clocks as they are through the wide kernel (mode 2: no advance, no
    events), so a crowd never needs the per-instance kernel compiled: the same poses and palettes as
    the per-instance path, the action clocks untouched, and evaluating again changes nothing."""
    count = 2 * LANES
    wide, narrow = _pair(asset, count)
    for crowd in (wide, narrow):
        crowd.play("walk", offsets=np.linspace(0, 0.9, count))
        crowd.update(1 / 30)
        crowd.seek("walk", np.linspace(0.1, 0.6, count))
    clocks = wide.fs.copy()
    wide.evaluate()
    narrow.evaluate()
    np.testing.assert_array_equal(wide.fs, clocks)
    assert wide.frame.wide is not None, "the wide kernel ran"
    np.testing.assert_allclose(wide.palettes, narrow.palettes, atol=2e-5)
    np.testing.assert_allclose(wide.local_pose, narrow.local_pose, atol=2e-5)
    first = wide.palettes.copy()
    wide.evaluate()
    np.testing.assert_array_equal(wide.palettes, first)


def test_a_new_crowd_holds_the_rest_pose_without_a_kernel(asset):
    """Building a crowd evaluates the rest pose without the update kernel (nothing plays yet): the same
    palettes and poses as the per-instance kernel gives a crowd built with ``wide=False``, and no wide
    job state until the first update."""
    wide, narrow = _pair(asset, LANES + 2)
    assert wide.frame is None or wide.frame.wide is None
    np.testing.assert_allclose(wide.palettes, narrow.palettes, atol=2e-6)
    np.testing.assert_array_equal(wide.local_pose, narrow.local_pose)
    np.testing.assert_array_equal(wide.morph_weights, narrow.morph_weights)
    wide.update(1 / 60)  # nothing plays: the kernel keeps the rest pose
    np.testing.assert_allclose(wide.palettes, narrow.palettes, atol=2e-6)
