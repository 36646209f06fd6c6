"""Inertialized transitions: the stage on analytic motions (pose and velocity continuous at a switch,
chained switches, offsets gone after the blend time) and as a Player crossfade mode."""

from __future__ import annotations

import numpy as np
import pytest

from skeletal.demo import demo_asset
from skeletal.errors import SkeletalError
from skeletal.playback import Player
from skeletal.playback import kernels as K
from skeletal.playback.locomotion import inertia_kernels as IK
from skeletal.playback.locomotion.inertialize import Inertializer, pose_velocity

BLENDS = ("inertialize", "inertialize_spring", "dead_blend")
J = 4


def _exp(r: np.ndarray) -> np.ndarray:
    return np.array([IK.quat_exp(*row) for row in r])


def _mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.array([IK.qmul(*x, *y) for x, y in zip(a, b)])


class Motion:
    """Joints turning at constant angular velocities (parent frame) and moving at constant speeds."""

    def __init__(self, seed: int):
        rng = np.random.default_rng(seed)
        self.q0 = _exp(rng.normal(size=(J, 3)))
        self.w = rng.normal(size=(J, 3)) * 3.0
        self.t0 = rng.normal(size=(J, 3))
        self.v = rng.normal(size=(J, 3))
        self.s0 = 1.0 + 0.1 * rng.normal(size=(J, 3))
        self.sv = 0.2 * rng.normal(size=(J, 3))

    def pose(self, t: float) -> np.ndarray:
        p = np.empty((J, 10))
        p[:, 0:3] = self.t0 + self.v * t
        p[:, 3:7] = _mul(_exp(self.w * t), self.q0)
        p[:, 7:10] = self.s0 + self.sv * t
        return p

    def velocity(self) -> np.ndarray:
        return np.concatenate([self.v, self.w, self.sv], axis=1)


def _run(stage: Inertializer, motion: Motion, t_from: float, steps: int, h: float) -> list[np.ndarray]:
    shown = []
    for k in range(1, steps + 1):
        pose = motion.pose(t_from + k * h)[None].copy()
        stage.apply(pose, h)
        shown.append(pose[0])
    return shown


@pytest.mark.parametrize("blend", BLENDS)
@pytest.mark.parametrize("known_velocity", [True, False])
def test_switch_keeps_pose_and_velocity(blend, known_velocity):
    old, new = Motion(1), Motion(2)
    stage = Inertializer(1, J)
    h = 1e-5
    target_velocity = new.velocity()[None] if known_velocity else None
    stage.switch(new.pose(0.0)[None], 0.3, blend=blend, source=old.pose(0.0)[None],
                 source_velocity=old.velocity()[None], target_velocity=target_velocity)
    at_switch = new.pose(0.0)[None].copy()
    stage.apply(at_switch, 0.0)
    np.testing.assert_allclose(at_switch[0], old.pose(0.0), atol=1e-12)
    shown = [old.pose(0.0)] + _run(stage, new, 0.0, 2, h)
    velocity = pose_velocity(np.array(shown[:-1]), np.array(shown[1:]), h)
    # the first steps move as the old motion did (to O(h): accelerations are ~1e3 rad/s^2 here)
    np.testing.assert_allclose(velocity[0], old.velocity(), atol=0.05)
    np.testing.assert_allclose(velocity[1], old.velocity(), atol=0.05)
    # whereas a pop would have jumped by the difference of the motions
    assert np.abs(new.velocity() - old.velocity()).max() > 2.0


@pytest.mark.parametrize("blend", BLENDS)
def test_offsets_vanish_after_the_blend_time(blend):
    old, new = Motion(3), Motion(4)
    stage = Inertializer(1, J)
    stage.switch(new.pose(0.0)[None], 0.25, blend=blend, source=old.pose(0.0)[None],
                 source_velocity=old.velocity()[None])
    h = 1 / 60
    shown = _run(stage, new, 0.0, 40, h)  # 0.67 s: past twice the blend time (the spring's end)
    np.testing.assert_allclose(shown[-1], new.pose(40 * h), atol=1e-9)
    assert not stage.running.any()
    # halfway, the shown pose is between: neither the old motion carried on nor the new one
    assert np.abs(shown[7] - new.pose(8 * h)).max() > 1e-3


@pytest.mark.parametrize("blend", BLENDS)
def test_chained_switches_stay_continuous(blend):
    a, b, c = Motion(5), Motion(6), Motion(7)
    stage = Inertializer(1, J)
    h = 1e-4
    stage.switch(b.pose(0.0)[None], 0.3, blend=blend, source=a.pose(0.0)[None], source_velocity=a.velocity()[None])
    shown = _run(stage, b, 0.0, 500, h)  # 0.05 s into the first transition
    before = pose_velocity(shown[-2], shown[-1], h)
    stage.switch(c.pose(0.0)[None], 0.3, blend=blend)  # source: what the stage showed, and its velocity
    after = _run(stage, c, 0.0, 1, h)[0]
    assert np.abs(after - shown[-1])[:, [0, 1, 2, 7, 8, 9]].max() < 5e-3  # one step of ~10 m/s at most
    velocity = pose_velocity(shown[-1], after, h)
    np.testing.assert_allclose(velocity, before, atol=0.3)  # vs jumps of several rad/s between the motions


def test_bad_arguments_are_refused():
    stage = Inertializer(2, J)
    pose = np.zeros((2, J, 10))
    with pytest.raises(SkeletalError, match="blend"):
        stage.switch(pose, 0.3, blend="cubic")
    with pytest.raises(SkeletalError, match="duration"):
        stage.switch(pose, 0.0)
    with pytest.raises(SkeletalError, match="shape"):
        stage.switch(pose[:, :2], 0.3)
    with pytest.raises(SkeletalError, match="pose"):
        stage.apply(np.zeros((2, J, 9)), 0.1)


# -- on a Player -----------------------------------------------------------------------------------


def _frames(blend: str | None, frames_before: int = 30, frames_after: int = 40, dt: float = 1 / 60):
    """Poses of the demo character walking, switched to run (``blend`` None: a pop), and the number of
    actions sampled (weight > 0) in each frame after the switch."""
    player = Player(demo_asset())
    player.play("walk")
    poses, sampled = [], []
    for _ in range(frames_before):
        player.update(dt)
        poses.append(player.local_pose.copy())
    if blend is None:
        player.crossfade("run", 0.0)
    elif blend == "linear":
        player.crossfade("run", 0.3)
    else:
        player.crossfade("run", 0.3, blend=blend)
    for _ in range(frames_after):
        player.update(dt)
        poses.append(player.local_pose.copy())
        sampled.append(int((player.mixer.fs[0, :, K.F_EFFECTIVE] > 0).sum()))
    return np.array(poses), sampled, player


def _switch_jump(poses: np.ndarray, switch: int = 30, dt: float = 1 / 60) -> float:
    """The largest change of any joint's angular velocity between the frame before the switch and the first
    frame after it (rad/s)."""
    w = pose_velocity(poses[:-1], poses[1:], dt)[..., 3:6]
    return float(np.linalg.norm(w[switch - 1] - w[switch - 2], axis=-1).max())


def test_player_inertialized_crossfade_samples_one_clip_and_does_not_pop():
    pop, _, _ = _frames(None)
    linear, sampled_linear, _ = _frames("linear")
    for blend in BLENDS:
        poses, sampled, player = _frames(blend)
        assert max(sampled) == 1  # only the new clip is sampled during the transition
        assert _switch_jump(poses) < 0.25 * _switch_jump(pop)
        # after the transition the pose is the run clip's own (what the pop shows at the same clock)
        np.testing.assert_allclose(poses[-1], pop[-1], atol=1e-9)
        # the transition ran inside the compiled update (no controller) and is over
        assert not player.mixer.controllers and not player.mixer._inertia.running.any()
    assert max(sampled_linear) == 2


def test_a_later_switch_starts_from_the_motion_shown():
    """After a transition has ended (the stage is off the mixer), the next switch finds the old motion's
    velocity by looking ahead: as continuous as the first."""
    jumps = {}
    for blend in (None, "inertialize"):
        player = Player(demo_asset())
        player.play("walk")
        shown = []
        for k in range(100):
            for at, clip in ((30, "run"), (70, "walk")):
                if k == at:
                    player.crossfade(clip, 0.0) if blend is None else player.crossfade(clip, 0.3, blend=blend)
            player.update(1 / 60)
            shown.append(player.local_pose.copy())
        jumps[blend] = _switch_jump(np.array(shown), switch=70)
    assert jumps[None] > 20.0 and jumps["inertialize"] < 0.25 * jumps[None]


def test_crossfade_blend_name_is_checked():
    player = Player(demo_asset())
    player.play("walk")
    with pytest.raises(SkeletalError, match="blend"):
        player.crossfade("run", 0.3, blend="smooth")
    with pytest.raises(SkeletalError, match="warp"):
        player.crossfade("run", 0.3, blend="inertialize", warp=True)
    with pytest.raises(SkeletalError, match="halflife"):
        player.crossfade("run", 0.3, blend="dead_blend", extrapolation_halflife=0.0)


def test_root_motion_velocity_fades_instead_of_jumping():
    from skeletal.demo import locomotion_asset

    asset = locomotion_asset()
    dt = 1 / 60
    runs = {}
    for blend in (None, "inertialize"):
        player = Player(asset)
        root = player.enable_root_motion("root")
        player.play("walk_forward")
        speeds = []
        for k in range(60):
            if k == 30:
                player.crossfade("run_forward", 0.0) if blend is None else player.crossfade("run_forward", 0.4, blend=blend)
            player.update(dt)
            speeds.append(np.hypot(*root.delta[0, :2]) / dt)
        runs[blend] = np.array(speeds)
    pop, smooth = runs[None], runs["inertialize"]
    assert abs(pop[30] - pop[29]) > 1.0  # walk to run speed at once
    assert abs(smooth[30] - smooth[29]) < 0.25 * abs(pop[30] - pop[29])
    np.testing.assert_allclose(smooth[-5:], pop[-5:], atol=1e-9)


def test_state_machine_transitions_can_be_inertialized():
    from skeletal.playback import StateMachineError

    player = Player(demo_asset())
    machine = player.state_machine({
        "parameters": {"speed": 0.0},
        "states": {"walk": {"clip": "walk"}, "run": {"clip": "run"}},
        "transitions": [{"from": "walk", "to": "run", "when": "speed > 2", "duration": 0.3, "blend": "inertialize"}],
    })
    for _ in range(20):
        player.update(1 / 60)
    before = player.local_pose.copy()
    player.set("speed", 3.0)
    poses, sampled = [before], []
    for _ in range(12):
        player.update(1 / 60)
        poses.append(player.local_pose.copy())
        sampled.append(int((player.mixer.fs[0, :, K.F_EFFECTIVE] > 0).sum()))
    assert machine.state_of(0) == "run" and max(sampled) == 1
    step = pose_velocity(poses[0], poses[1], 1 / 60)[:, 3:6]
    assert np.linalg.norm(step, axis=-1).max() < 20.0  # a pop to run moves some joint at ~70 rad/s
    with pytest.raises(StateMachineError, match="blend"):
        machine.add_transition("run", "walk", "speed < 1", blend="smooth")


def test_quintic_weights_meet_bollos_conditions():
    t1, h = 0.3, 1e-5

    def x(t, x0, v0):
        p, q = IK.quintic_weights(t, t1)
        return x0 * p + v0 * q

    for x0, v0 in ((1.0, 0.0), (0.0, 1.0), (0.4, -2.0)):
        assert x(0.0, x0, v0) == pytest.approx(x0)
        assert (x(h, x0, v0) - x(0.0, x0, v0)) / h == pytest.approx(v0, abs=3e-3)  # + a h / 2
        accel = (x(2 * h, x0, v0) - 2 * x(h, x0, v0) + x(0.0, x0, v0)) / h**2
        assert accel == pytest.approx((-8 * v0 * t1 - 20 * x0) / t1**2, rel=1e-3, abs=1e-2)
        for d in (0.0, h, 2 * h):  # value, velocity and acceleration all zero at t1
            assert abs(x(t1 - d, x0, v0)) < 1e-12


def test_mixer_switches_only_the_selected_instances():
    from skeletal.playback import Mixer

    asset = demo_asset()
    switched, plain = Mixer(asset, 3), Mixer(asset, 3)
    for m in (switched, plain):
        m.play("walk", offset=np.array([0.0, 0.2, 0.4]))
        for _ in range(10):
            m.update(1 / 60)
    switched.crossfade("run", 0.3, blend="inertialize", instances=[1])
    plain.crossfade("run", 0.0, instances=[1])
    for k in range(30):
        switched.update(1 / 60)
        plain.update(1 / 60)
        if k == 0:
            assert np.abs(switched.local_pose[1] - plain.local_pose[1]).max() > 0.05  # offsets shown
    np.testing.assert_array_equal(switched.local_pose[[0, 2]], plain.local_pose[[0, 2]])
    np.testing.assert_allclose(switched.local_pose[1], plain.local_pose[1], atol=1e-9)  # the run alone again
    np.testing.assert_allclose(switched.world, plain.world, atol=1e-9)
