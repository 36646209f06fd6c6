"""The motion-matching controller on a Player: it walks, runs and turns where it is asked to."""

from __future__ import annotations

import math

import numpy as np
import pytest

from skeletal.demo import demo_asset, locomotion_asset
from skeletal.errors import SkeletalError
from skeletal.playback import Player
from skeletal.playback.locomotion.controller import MotionMatching
from skeletal.playback.locomotion.database import MatchingDatabase

IN_PLACE = ("idle", "wave", "walk", "run")


@pytest.fixture(scope="module")
def db():
    return MatchingDatabase.build(locomotion_asset(), exclude=IN_PLACE)


def _drive(db, goal, seconds=4.0):
    mm = MotionMatching(Player(locomotion_asset()), db)
    mm.set_goal(goal)
    positions, clips = [], []
    for _ in range(int(seconds * 60)):
        mm.update(1 / 60)
        positions.append(mm.position.copy())
        clips.append(mm.clip)
    return mm, np.array(positions), clips


def test_walks_and_runs_at_about_the_speed_asked(db):
    walk, p_walk, c_walk = _drive(db, (0.0, 1.0))
    run, p_run, c_run = _drive(db, (0.0, 4.4))
    v_walk = p_walk[-1] - p_walk[-61]  # over the last second
    v_run = p_run[-1] - p_run[-61]
    assert 0.6 < v_walk[2] < 1.3 and abs(v_walk[0]) < 0.1
    assert v_run[2] > 3.0 and abs(v_run[0]) < 0.3
    assert all(c.startswith("walk") for c in c_walk[-60:]) and all(c.startswith("run") for c in c_run[-60:])
    # searches every 6th frame; jumps only when a frame beats the one playing
    assert walk.searches >= 240 // 6 and walk.jumps < walk.searches // 2


def test_turns_toward_the_velocity_asked(db):
    mm, positions, clips = _drive(db, (1.0, 0.0), seconds=5.0)  # +x: the character's left at the start
    assert math.degrees(mm.facing) > 45.0
    step = positions[-1] - positions[-61]
    assert step[0] > 0.6 and step[0] > 2 * abs(step[2])
    assert any("turn_left" in c for c in clips)
    np.testing.assert_allclose(mm.transform[:3, 3], mm.position)


def test_prediction_reaches_the_goal(db):
    mm = MotionMatching(Player(locomotion_asset()), db)
    mm.set_goal((0.0, 2.0))
    positions, facings = mm.predicted_trajectory()
    assert positions.shape == (3, 3) and np.all(np.diff(positions[:, 2]) > 0)
    # from rest, the spring covers less than the goal speed times the time
    assert positions[-1, 2] < 2.0 * 1.0 and positions[-1, 2] > 0.5
    np.testing.assert_allclose(facings, 0.0, atol=1e-9)


def test_mirrored_rows_play_mirrored_clips():
    """With only the left turn recorded, turning right takes its mirror image."""
    db = MatchingDatabase.build(locomotion_asset(), include=("walk_forward", "walk_turn_left"), mirror=True)
    mm, positions, clips = _drive(db, (-1.0, 0.0), seconds=5.0)  # -x: the character's right
    assert "walk_turn_left.mirrored" in clips
    assert math.degrees(mm.facing) < -45.0
    step = positions[-1] - positions[-61]
    assert step[0] < -0.6


def test_refuses_what_it_cannot_play(db):
    mirrored = MatchingDatabase.build(locomotion_asset(), exclude=IN_PLACE, mirror=True)
    player = Player(locomotion_asset())
    player.enable_root_motion("root")
    with pytest.raises(SkeletalError, match="mirror"):
        MotionMatching(player, mirrored)
    with pytest.raises(SkeletalError, match="no clips"):
        MotionMatching(Player(demo_asset()), db)
    mm = MotionMatching(Player(locomotion_asset()), db)
    with pytest.raises(SkeletalError, match="velocity"):
        mm.set_goal((1.0, float("nan")))


def test_figure_eight_benchmark_runs_both_drivers():
    """The path benchmark's measuring code, on a short path (no figure is checked but that they exist)."""
    from skeletal.bench.motion_path import figure_eight

    for driver in ("motion matching", "warping", "state machine"):
        row = figure_eight(1.0, 4.0, seconds=3.0, driver=driver)
        assert np.isfinite(row["mean_error_m"]) and row["mean_error_m"] < 2.0, driver
        assert row["slide_median_cm"] >= 0.0 and row["clips"], driver
