"""The motion-matching prediction carries a turning goal's turn over its horizon, so a curved path is
predicted as a curve and followed closely; without a turn it is the springs' exact solution."""

from __future__ import annotations

import math

import numpy as np
import pytest

from skeletal.demo import locomotion_asset
from skeletal.errors import SkeletalError
from skeletal.playback import Crowd, Player
from skeletal.playback.locomotion.controller import MotionMatching
from skeletal.playback.locomotion.database import MatchingDatabase
from skeletal.playback.locomotion.prediction import MAX_GOAL_TURN, _predict, _spring_angle, _spring_velocity, _turn_goal

IN_PLACE = ("idle", "wave", "walk", "run")


@pytest.fixture(scope="module")
def db():
    return MatchingDatabase.build(locomotion_asset(), exclude=IN_PLACE)


def test_without_a_turn_the_prediction_is_the_exact_spring():
    v, a, goal = np.array([0.3, 1.0]), np.array([0.5, -0.2]), np.array([-1.0, 2.5])
    shift, facings = _predict(v, a, goal, 0.2, 0.4, 1.1, 0.0, True, 0.3, 0.25, [20, 40, 60], 60.0)
    for j, k in enumerate((20, 40, 60)):
        dx, _, _ = _spring_velocity(v, a, goal, 0.3, k / 60)
        np.testing.assert_allclose(shift[j], dx, atol=1e-12)
        assert facings[j] == pytest.approx(_spring_angle(0.2, 0.4, 1.1, 0.25, k / 60)[0], abs=1e-12)


def test_a_turning_goal_is_predicted_as_a_curve():
    """A goal velocity straight ahead (+Z) that turns left at 1 rad/s: the prediction bends to +X (the
    character's left) and its facing keeps turning past the goal's heading now; an explicit facing
    goal (facing_turns False) stays put."""
    v = np.array([0.0, 3.0])
    straight, f0 = _predict(v, np.zeros(2), v, 0.0, 0.0, 0.0, 0.0, True, 0.3, 0.3, [20, 40, 60], 60.0)
    curved, f1 = _predict(v, np.zeros(2), v, 0.0, 0.0, 0.0, 1.0, True, 0.3, 0.3, [20, 40, 60], 60.0)
    _, f2 = _predict(v, np.zeros(2), v, 0.0, 0.0, 0.0, 1.0, False, 0.3, 0.3, [20, 40, 60], 60.0)
    np.testing.assert_allclose(straight[:, 0], 0.0, atol=1e-12)
    assert np.all(np.diff(curved[:, 0]) > 0) and curved[-1, 0] > 0.4  # bending left, more and more
    assert f1[-1] > 0.5 and np.all(np.diff(f1) > 0)  # the goal heads 1 rad left in a second; the spring lags
    np.testing.assert_allclose(f2, f0, atol=1e-12)
    # the goal's turn rate: smoothed toward the heading's change per second, clamped, and off at halflife 0
    rate = 0.0
    for _ in range(120):
        rate = _turn_goal(rate, 0.0, 0.5 / 60, True, 1 / 60, 0.25)
    assert rate == pytest.approx(0.5 * (1 - 0.5 ** 8), rel=1e-9)  # 2 s: 8 half-lives
    assert _turn_goal(0.0, 0.0, 0.5, True, 1 / 60, 0.01) == pytest.approx(MAX_GOAL_TURN)
    assert _turn_goal(0.7, 0.0, 0.5, True, 1 / 60, 0.0) == 0.0
    np.testing.assert_allclose(_turn_goal(np.array([0.4, 0.4]), np.zeros(2), np.zeros(2), np.array([True, False]),
                                          1 / 60, 0.25), [0.4 * 0.5 ** (1 / 15)] * 2)


def _circle(db, seconds: float, **options):
    """Run a circle of radius 8 m at 3.5 m/s (25 degrees a second to the left) with the path's
    velocity plus a pull toward its point as the goal; mean distance to the point after 1.5 s."""
    mm = MotionMatching(Player(locomotion_asset()), db, **options)
    r, w = 8.0, 3.5 / 8.0
    errors = []
    for k in range(int(seconds * 60)):
        t = k / 60
        p = r * np.array([1.0 - math.cos(w * t), math.sin(w * t)])
        v = r * w * np.array([math.sin(w * t), math.cos(w * t)])
        mm.set_goal(v + (p - mm.position[[0, 2]]))
        mm.update(1 / 60)
        if t > 1.5:
            q = r * np.array([1.0 - math.cos(w * (t + 1 / 60)), math.sin(w * (t + 1 / 60))])
            errors.append(float(np.hypot(*(mm.position[[0, 2]] - q))))
    return mm, float(np.mean(errors))


def test_following_a_curve_at_running_speed(db):
    mm, error = _circle(db, 5.0)
    _, straight_error = _circle(db, 5.0, goal_turn_halflife=0.0)
    assert mm.goal_turn_rate == pytest.approx(3.5 / 8.0, abs=0.15)  # the path's own turn rate
    assert error < 1.5 and error < straight_error


def test_crowd_tracks_the_goal_turn_like_the_player(db):
    crowd = MotionMatching(Crowd(locomotion_asset(), 2), db, stagger=False)
    player = MotionMatching(Player(locomotion_asset()), db)
    for k in range(90):
        v = 3.0 * np.array([math.sin(0.02 * k), math.cos(0.02 * k)])
        crowd.set_goal(np.stack([v, v]))
        player.set_goal(v)
        crowd.update(1 / 60)
        player.update(1 / 60)
    assert player.goal_turn_rate == pytest.approx(1.2, rel=0.03)  # 0.02 rad a frame
    np.testing.assert_allclose(crowd.goal_turn_rate, player.goal_turn_rate, rtol=1e-9)
    np.testing.assert_allclose(crowd.predicted_trajectory()[0][0], player.predicted_trajectory()[0], atol=1e-3)
    with pytest.raises(SkeletalError, match="goal_turn_halflife"):
        MotionMatching(Player(locomotion_asset()), db, goal_turn_halflife=-1.0)
