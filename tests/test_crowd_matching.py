"""Motion matching on a Crowd: per-instance goals, one batched search per update, root motion, and
each instance driven as a Player would be."""

from __future__ import annotations

import math

import numpy as np
import pytest

import skeletal
from skeletal.demo import locomotion_asset
from skeletal.errors import SkeletalError
from skeletal.playback import Player
from skeletal.playback.locomotion import CrowdMotionMatching, MatchingDatabase, MotionMatching

IN_PLACE = ("idle", "wave", "walk", "run")
GOALS = np.array([(0.0, 1.0), (1.0, 0.0), (0.0, 4.0), (-0.7, -0.7)])  # walk ahead, walk left, run, walk back


@pytest.fixture(scope="module")
def asset():
    return locomotion_asset()


@pytest.fixture(scope="module")
def db(asset):
    return MatchingDatabase.build(asset, exclude=IN_PLACE)


def test_each_instance_moves_as_a_player_with_the_same_goal(asset, db):
    """A float64 crowd (searching all instances on the same frames, linear switches) against one
    MotionMatching per instance on a Player: the same clips, positions and facings."""
    n = len(GOALS)
    crowd = skeletal.Crowd(asset, n, dtype=np.float64, wide=False)
    mm = MotionMatching(crowd, db, blend="linear", stagger=False)
    assert isinstance(mm, CrowdMotionMatching)
    mm.set_goal(GOALS)
    singles = []
    for goal in GOALS:
        single = MotionMatching(Player(asset), db, blend="linear")
        single.set_goal(goal)
        singles.append(single)
    calls = 0
    for frame in range(150):
        before = mm.search_calls
        mm.update(1 / 60)
        calls += mm.search_calls - before
        for single in singles:
            single.update(1 / 60)
        assert mm.clips == [s.clip for s in singles], frame
    for i, single in enumerate(singles):
        np.testing.assert_allclose(mm.position[i], single.position, atol=1e-6)
        assert abs(mm.facing[i] - single.facing) < 1e-6
        np.testing.assert_allclose(mm.transforms[i], single.transform, atol=1e-6)
    # one batched call per searching frame, every instance's query in it
    assert calls == mm.search_calls and mm.searches == sum(s.searches for s in singles)
    assert mm.search_calls <= 150 and mm.searches >= 3 * mm.search_calls


def test_a_wide_crowd_follows_its_goals_with_staggered_searches(asset, db):
    n = 12
    crowd = skeletal.Crowd(asset, n)  # float32, wide: the default crowd
    mm = MotionMatching(crowd, db)
    goals = np.tile(GOALS, (n // len(GOALS), 1))
    mm.set_goal(goals)
    frames = 240
    positions = []
    for _ in range(frames):
        mm.update(1 / 60)
        positions.append(mm.position.copy())
    step = positions[-1] - positions[-61]  # the last second
    for i, goal in enumerate(goals):
        speed = float(np.hypot(*goal))
        moved = step[i, [0, 2]]
        assert np.dot(moved, goal) / speed > 0.6 * speed, (i, moved, goal)  # along the goal, near its speed
        sideways = abs(goal[0] * moved[1] - goal[1] * moved[0]) / speed
        assert sideways < math.tan(math.radians(30)) * np.dot(moved, goal) / speed  # within 30 degrees
    assert all(c.startswith("run") for c in np.array(mm.clips)[goals[:, 1] > 3])
    # staggered: about 1/6 of the instances query each frame (plus the forced ones), one call a frame
    assert n * frames / 6 <= mm.searches < n * frames / 6 * 1.5
    assert mm.search_calls <= frames
    assert np.isfinite(crowd.palettes).all()


def test_paths_and_warping_on_a_crowd(asset, db):
    n = 3
    mm = MotionMatching(skeletal.Crowd(asset, n), db, warping=True)
    assert mm.warping is not None and mm.warping.crowd
    radius = np.array([3.0, 4.0, 5.0])
    for k in range(180):
        t = k / 60
        w = 1.0 / radius  # 1 m/s around circles of different radii
        points = np.stack([radius * np.sin(w * t), radius * (1 - np.cos(w * t))], axis=-1)
        velocities = np.stack([np.cos(w * t), np.sin(w * t)], axis=-1)
        mm.follow(points, velocities)
        mm.update(1 / 60)
    assert np.isfinite(mm.position).all() and np.isfinite(mm.crowd.local_pose).all()
    t = 3.0
    points = np.stack([radius * np.sin(t / radius), radius * (1 - np.cos(t / radius))], axis=-1)
    assert np.hypot(*(mm.position[:, [0, 2]] - points).T).max() < 1.0
    assert (mm.warping.stride != 1.0).any()


def test_refuses_bad_goals(asset, db):
    mm = MotionMatching(skeletal.Crowd(asset, 2), db)
    with pytest.raises(SkeletalError, match="desired velocity"):
        mm.set_goal(np.zeros((3, 2)))
    with pytest.raises(SkeletalError, match="follow"):
        mm.follow(np.zeros((2, 3)), np.zeros((2, 2)))
    mm.set_goal((0.0, 1.0), facing=math.pi / 2, instances=[1])
    assert np.isnan(mm.desired_facing[0]) and mm.desired_facing[1] == pytest.approx(math.pi / 2)


def test_mirrored_rows_turn_a_crowd_the_other_way(asset):
    """A database without right turns, mirrored: instances asked to go right play the mirrored left
    turn (the controller adds the mirrored clips to the crowd before root motion)."""
    db = MatchingDatabase.build(asset, exclude=IN_PLACE + ("walk_turn_right", "run_turn_right"), mirror=True)
    crowd = skeletal.Crowd(asset, 2)
    mm = MotionMatching(crowd, db)
    mm.set_goal(np.array([(-1.0, 0.3), (1.0, 0.3)]))  # right (-x) and left (+x)
    played = [set(), set()]
    for _ in range(240):
        mm.update(1 / 60)
        for i, clip in enumerate(mm.clips):
            played[i].add(clip)
    assert "walk_turn_left.mirrored" in played[0] and mm.facing[0] < -0.6
    assert "walk_turn_left" in played[1] and mm.facing[1] > 0.6
    with pytest.raises(SkeletalError, match="without root motion"):
        crowd2 = skeletal.Crowd(asset, 2)
        skeletal.playback.rootmotion.RootMotion(crowd2, "root")
        MotionMatching(crowd2, db)


def test_the_crowd_benchmark_prints_its_rows(capsys):
    from skeletal.bench.crowd_locomotion import main

    rows = main(["--count", "16", "--frames", "2", "--repeats", "1"])
    assert [r["case"] for r in rows] == ["crowd update", "crowd + warping", "motion matching",
                                         "motion matching + warping"]
    assert all(r["cpu_ms"] > 0 and r["wall_ms"] > 0 for r in rows) and rows[0]["ratio"] == 1.0
    assert "load average" in capsys.readouterr().out
