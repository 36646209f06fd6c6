"""Additive layers, blend spaces, the state machine and root motion, against analytic expectations."""

from __future__ import annotations

import json

import numpy as np
import pytest

import skeletal
from skeletal.anim.clip import Clip, Track
from skeletal.tools.cliptools import make_additive
from skeletal.demo import demo_asset
from skeletal.playback import BlendSpace1D, Mixer, Player, StateMachine, StateMachineError
from skeletal.playback.rootmotion import rotate_y
from test_playback import alone, assert_pose, blend


@pytest.fixture(scope="module")
def asset():
    return demo_asset()


# -- additive ----------------------------------------------------------------------------------


def test_additive_of_the_reference_pose_is_the_identity(asset):
    walk = asset.clip("walk")
    delta = make_additive(walk, rest=asset.rig.rest)  # relative to walk's own first frame
    player = Player(asset)
    player.play("run")
    lean = player.add_layer("lean", additive=True)
    player.play(delta, layer=lean)
    player.update(0.0)  # the additive clip at its reference frame adds nothing
    assert_pose(player.local_pose, alone(asset, "run", 0.0))


def test_additive_reproduces_the_clip_over_its_reference(asset):
    walk = asset.clip("walk")
    delta = make_additive(walk, rest=asset.rig.rest)
    player = Player(asset)
    base = player.play("walk")
    base.pause()  # the base holds the reference frame (walk at 0)
    lean = player.add_layer("lean", additive=True)
    player.play(delta, layer=lean)
    player.update(0.3)
    assert_pose(player.local_pose, alone(asset, "walk", 0.3), atol=1e-6)
    player.set_layer_weight(lean, 0.0)
    assert_pose(player.local_pose, alone(asset, "walk", 0.0))


def test_additive_clip_needs_an_additive_layer(asset):
    delta = make_additive(asset.clip("wave"), rest=asset.rig.rest)
    with pytest.raises(skeletal.ClipError, match="additive"):
        Player(asset).play(delta)


# -- blend spaces ------------------------------------------------------------------------------


def test_blend_space_1d_at_a_sample_is_that_clip_and_blends_in_phase(asset):
    player = Player(asset)
    space = player.blend_space_1d([("idle", 0.0), ("walk", 1.4), ("run", 4.0)], parameter="speed")
    space.play()
    player.set("speed", 1.4)
    player.update(0.3)
    assert_pose(player.local_pose, alone(asset, "walk", 0.3))
    np.testing.assert_allclose(space.weights(), [[0, 1, 0]])
    player.set("speed", 2.7)  # halfway between walk and run
    player.update(0.2)
    d_walk, d_run = asset.clip("walk").duration, asset.clip("run").duration
    t_walk, t_run = space.sample_times()[0, 1:]
    assert t_walk / d_walk == pytest.approx(t_run / d_run, abs=1e-9)  # feet in step
    expected = blend([alone(asset, "walk", t_walk), alone(asset, "run", t_run)], [0.5, 0.5])
    assert_pose(player.local_pose, expected)
    # blended cycle: both clips advance their phase by dt / (0.5 d_walk + 0.5 d_run)
    player.update(0.05)
    new_phase = space.sample_times()[0, 1] / d_walk
    assert (new_phase - t_walk / d_walk) % 1 == pytest.approx(0.05 / (0.5 * d_walk + 0.5 * d_run), rel=1e-9)


def test_blend_space_1d_clamps_outside_its_range(asset):
    space = BlendSpace1D(Mixer(asset), [("walk", 1.0), ("run", 3.0)])
    np.testing.assert_allclose(space.weights(np.array([-5.0, 2.5, 9.0])), [[1, 0], [0.25, 0.75], [0, 1]])


def test_blend_space_2d_barycentric_and_samples(asset):
    player = Player(asset)
    points = [("idle", (0.0, 0.0)), ("walk", (0.0, 1.0)), ("run", (0.0, 3.0)), ("wave", (1.0, 1.0))]
    space = player.blend_space_2d(points, parameter="move", sync=False)
    space.play()
    player.set("move", [0.0, 1.0])
    player.update(0.2)
    assert_pose(player.local_pose, alone(asset, "walk", 0.2))
    w = space.weights(np.array([[0.25, 1.0], [0.5, 0.5], [3.0, 1.0]]))
    np.testing.assert_allclose(w.sum(axis=1), 1.0)
    np.testing.assert_allclose(w[0], [0, 0.75, 0, 0.25])  # on the walk-wave edge
    np.testing.assert_allclose(w @ np.array([p for _, p in points]), [[0.25, 1.0], [0.5, 0.5], [1.0, 1.0]])
    assert w[2, 3] == pytest.approx(1.0)  # outside the hull: nearest hull point is the wave sample


# -- state machine -----------------------------------------------------------------------------

SPEC = {
    "parameters": {"speed": 0.0, "wave": "trigger"},
    "initial": "idle",
    "states": {
        "idle": {"clip": "idle"},
        "move": {"blend1d": {"parameter": "speed", "samples": [["walk", 1.4], ["run", 4.0]]}},
        "wave": {"clip": "wave", "loop": "clamp"},
    },
    "transitions": [
        {"from": "idle", "to": "move", "when": "speed > 0.1", "duration": 0.2},
        {"from": "move", "to": "idle", "when": "speed <= 0.1", "duration": 0.2},
        {"from": "*", "to": "wave", "when": "wave", "duration": 0.1},
        {"from": "wave", "to": "idle", "exit_time": 1.0, "duration": 0.2},
    ],
}


def test_state_machine_transitions_fire_on_conditions(asset, tmp_path):
    path = tmp_path / "locomotion.json"
    path.write_text(json.dumps(SPEC))
    player = Player(asset)
    machine = player.state_machine(path)
    seen = []
    machine.on_transition.append(lambda a, b, rows: seen.append((a, b)))
    player.update(0.1)
    assert machine.state_of() == "idle"
    player.set("speed", 4.0)
    player.update(0.05)
    assert machine.state_of() == "move" and seen == [("idle", "move")]
    player.update(0.5)  # fade over: the run sample alone
    run_time = machine.states["move"].blend.sample_times()[0, 1]
    assert_pose(player.local_pose, alone(asset, "run", run_time))
    player.trigger("wave")
    player.update(0.05)
    assert machine.state_of() == "wave"
    assert machine.params["wave"][0] == 0.0  # the trigger was consumed
    player.update(asset.clip("wave").duration)  # wave reaches its end: exit time 1.0
    player.update(0.01)
    assert machine.state_of() == "idle"
    player.set("speed", 0.0)
    assert seen == [("idle", "move"), ("move", "wave"), ("wave", "idle")]


def test_state_machine_is_batched(asset):
    mixer = Mixer(asset, count=3)
    machine = StateMachine.from_dict(mixer, SPEC)
    machine.set("speed", np.array([0.0, 2.0, 5.0]))
    mixer.update(0.05)
    assert [machine.state_of(i) for i in range(3)] == ["idle", "move", "move"]


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda s: s["transitions"].append({"from": "idle", "to": "fly", "when": "speed > 1"}), "no state 'fly'"),
        (lambda s: s["transitions"].append({"from": "idle", "to": "move", "when": "height > 1"}), "unknown parameter 'height'"),
        (lambda s: s["transitions"].append({"from": "idle", "to": "move", "when": "speed >> 1"}), "cannot parse"),
        (lambda s: s["transitions"].append({"from": "idle", "to": "move"}), "needs a condition or an exit time"),
        (lambda s: s["states"].__setitem__("bad", {}), "plays nothing"),
    ],
)
def test_state_machine_definition_errors(asset, change, message):
    spec = json.loads(json.dumps(SPEC))
    change(spec)
    with pytest.raises(StateMachineError, match=message):
        StateMachine.from_dict(Mixer(asset), spec)


def test_state_machine_bad_file(asset, tmp_path):
    path = tmp_path / "broken.json"
    path.write_text("{states")
    with pytest.raises(StateMachineError, match="broken.json: invalid JSON"):
        StateMachine.from_file(Mixer(asset), path)


# -- root motion -------------------------------------------------------------------------------


def travelling_clip(asset, turn_degrees: float) -> Clip:
    """The hips move 2 m forward (+z) over 1 s while bobbing, and turn by ``turn_degrees``."""
    hips = asset.rig.find("hips")
    rest = asset.rig.rest[hips]
    times = np.array([0.0, 0.5, 1.0], np.float32)
    move = np.array([[0, 0, 0], [0, 0.05, 1.0], [0, 0, 2.0]], np.float32) + rest[0:3].astype(np.float32)
    half = np.radians(turn_degrees) / 2 * np.array([0.0, 0.5, 1.0])
    turn = np.stack([np.zeros(3), np.sin(half), np.zeros(3), np.cos(half)], axis=1).astype(np.float32)
    return Clip("travel", [Track(hips, "translation", "LINEAR", times, move), Track(hips, "rotation", "LINEAR", times, turn)])


def integrate(player, steps):
    position, heading = np.zeros(2), 0.0
    for dt in steps:
        player.update(dt)
        delta, yaw = player.root_motion
        position = position + rotate_y(delta[[0, 2]], heading)
        heading += yaw
    return position, heading


def test_root_motion_over_a_loop_sums_to_the_displacement(asset):
    player = Player(asset)
    player.play(travelling_clip(asset, 0.0))
    player.enable_root_motion("hips", yaw=False)
    position, _ = integrate(player, [0.13] * 7 + [0.09])  # exactly 1 s, with uneven steps
    np.testing.assert_allclose(position, [0.0, 2.0], atol=1e-9)
    hips = asset.rig.find("hips")
    # in place: the hips keep their first-frame horizontal position; the bob stays
    np.testing.assert_allclose(player.local_pose[hips, [0, 2]], asset.rig.rest[hips, [0, 2]], atol=1e-12)


def test_root_motion_is_loop_correct_with_turns(asset):
    player = Player(asset)
    player.play(travelling_clip(asset, 90.0))
    player.enable_root_motion("hips")
    position, heading = integrate(player, [0.3] * 7 + [0.1] * 4)  # 2.5 s: wraps in mid-step twice
    # Cycle k moves 2 m along the heading reached after k quarter turns; the last half cycle moves the
    # clip's own (0, 1) of its first 0.5 s, along the heading after two cycles (180 degrees).
    expected = np.array([0.0, 2.0]) + rotate_y(np.array([0.0, 2.0]), np.pi / 2) + rotate_y(np.array([0.0, 1.0]), np.pi)
    np.testing.assert_allclose(position, expected, atol=1e-6)
    assert heading == pytest.approx(np.radians(225.0))
    hips = asset.rig.find("hips")
    np.testing.assert_allclose(player.local_pose[hips, 3:7], asset.rig.rest[hips, 3:7], atol=1e-6)  # no turn in place
