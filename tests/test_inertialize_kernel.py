"""Inertialized transitions inside the compiled update (the kernel's stage between blending and world
rows): the same poses as the Python-side implementation it replaced (``fixtures/inertia_reference``),
one clip sampled per instance, velocity continuous at a switch, chained switches, a Crowd whose
instances not in a transition stay bit for bit what they were, blend-space switches."""

from __future__ import annotations

import numpy as np
import pytest
from fixtures.inertia_reference import reference_crossfade
from fixtures.shared_assets import need

from skeletal.demo import demo_asset
from skeletal.errors import SkeletalError
from skeletal.playback import BlendSpace1D, Crowd, Mixer, Player
from skeletal.playback import kernels as K
from skeletal.playback.inertia_kernels import IDLE, ST_PHASE
from skeletal.playback.locomotion.inertialize import pose_velocity

BLENDS = ("inertialize", "inertialize_spring", "dead_blend")
DT = 1 / 60


def _normalised(poses: np.ndarray) -> np.ndarray:
    """Poses (..., N, 10) with unit rotations (the kernel stage keeps the clip's own quaternion norm;
    the reference renormalised after adding an offset: they differ by the clips' norm error, ~3e-8)."""
    out = poses.copy()
    q = out[..., 3:7]
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    return out


def _sequence(asset, clips, switches, switch, count: int = 1):
    """Poses and world matrices of ``count`` instances (a Player for one) playing ``clips[0]`` then switched
    to the next clips at ``switches`` (frames) by ``switch(mixer, clip)``; the clips sampled per instance
    in each frame."""
    if count == 1:
        player = Player(asset)
        mixer = player.mixer
    else:
        mixer = Mixer(asset, count)
    mixer.play(clips[0], offset=np.linspace(0.0, 0.5, count) if count > 1 else 0.0)
    mixer.evaluate()
    poses, worlds, sampled = [], [], []
    at = dict(zip(switches, clips[1:]))
    for k in range(max(switches) + 30):
        if k in at:
            switch(mixer, at[k])
        mixer.update(DT)
        poses.append(mixer.local_pose.copy())
        worlds.append(mixer.world.copy())
        sampled.append((mixer.fs[:, :, K.F_EFFECTIVE] > 0).sum(axis=1).max())
    return np.array(poses), np.array(worlds), sampled


def _assert_same_as_reference(asset, clips, blend, count=1, instances=None):
    switches = (30, 70)  # each transition over before the next switch (the spring runs twice the blend time)

    def kernel(m, clip):
        m.crossfade(clip, 0.3, blend=blend, instances=instances)

    def reference(m, clip):
        reference_crossfade(m, clip, 0.3, blend, instances=instances)

    poses, worlds, sampled = _sequence(asset, clips, switches, kernel, count)
    ref_poses, ref_worlds, _ = _sequence(asset, clips, switches, reference, count)
    np.testing.assert_allclose(_normalised(poses), _normalised(ref_poses), rtol=0, atol=1e-9)
    np.testing.assert_allclose(worlds, ref_worlds, rtol=0, atol=1e-6)  # (the quaternions' norms, through the matrices)
    assert max(sampled[30:]) == 1  # one clip sampled per instance, transitions included


@pytest.mark.parametrize("blend", BLENDS)
def test_player_switch_matches_the_python_side_implementation(blend):
    _assert_same_as_reference(demo_asset(), ("idle", "walk", "run"), blend)


def test_soldier_idle_walk_run_matches_the_python_side_implementation():
    import skeletal

    asset = skeletal.load(need("Soldier.glb"))
    _assert_same_as_reference(asset, ("Idle", "Walk", "Run"), "inertialize")


def test_mixer_switch_of_some_instances_matches_the_python_side_implementation():
    _assert_same_as_reference(demo_asset(), ("idle", "walk", "run"), "inertialize", count=3, instances=[0, 2])


def _jump(poses: np.ndarray, switch: int) -> float:
    """The largest change of any joint's angular velocity between the frame before a switch and the first
    frame after it (rad/s)."""
    w = pose_velocity(poses[:-1], poses[1:], DT)[..., 3:6]
    return float(np.linalg.norm(w[switch - 1] - w[switch - 2], axis=-1).max())


def test_velocity_is_continuous_at_a_switch_and_at_a_chained_one():
    """Idle -> walk, then run 0.15 s later (in the middle of the first transition): the angular velocity's
    jump at each switch, against a pop and a linear crossfade, and against the clips' own frame-to-frame
    changes (the jump an inertialized switch leaves is below those)."""
    asset = demo_asset()
    switches = (30, 39)
    runs = {}
    for blend in ("pop", "linear") + BLENDS:
        if blend == "pop":
            def switch(m, clip):
                m.crossfade(clip, 0.0)
        elif blend == "linear":
            def switch(m, clip):
                m.crossfade(clip, 0.3)
        else:
            def switch(m, clip, blend=blend):
                m.crossfade(clip, 0.3, blend=blend)
        poses, _, sampled = _sequence(asset, ("idle", "walk", "run"), switches, switch)
        runs[blend] = (poses[:, 0], sampled)
    pop = runs["pop"][0]
    w = pose_velocity(pop[:-1], pop[1:], DT)[..., 3:6]
    own = np.percentile(np.linalg.norm(np.diff(w, axis=0), axis=-1).max(axis=1), 99)  # the clips' own changes
    for blend in BLENDS:
        poses, sampled = runs[blend]
        for s in switches:
            assert _jump(poses, s) < 0.25 * _jump(pop, s)
            assert _jump(poses, s) < own
        assert max(sampled[30:]) == 1
    assert max(runs["linear"][1][30:]) == 3  # the linear crossfade samples all three clips after the chained switch


def test_chained_switch_against_the_python_side_implementation():
    """A switch during a transition: the velocity shown before it is found by looking one step ahead
    (the reference took the last two shown poses), so the poses differ a little after the second switch
    (here up to ~0.03 rad), and both keep the velocity about as continuous."""
    asset = demo_asset()

    def kernel(m, clip):
        m.crossfade(clip, 0.3, blend="inertialize")

    def reference(m, clip):
        reference_crossfade(m, clip, 0.3, "inertialize")

    poses, _, _ = _sequence(asset, ("idle", "walk", "run"), (30, 39), kernel)
    ref, _, _ = _sequence(asset, ("idle", "walk", "run"), (30, 39), reference)
    np.testing.assert_allclose(_normalised(poses[:39]), _normalised(ref[:39]), rtol=0, atol=1e-9)
    assert np.abs(poses[39:] - ref[39:]).max() < 0.1
    np.testing.assert_allclose(poses[-1], ref[-1], atol=1e-9)  # both the run alone again
    assert _jump(poses[:, 0], 39) < 1.5 * _jump(ref[:, 0], 39) + 1.0


def test_a_plain_player_has_no_inertialization_rows_and_bad_rows_are_refused():
    from skeletal.playback.jobs import playback_job

    player = Player(demo_asset())
    player.play("walk")
    player.update(DT)
    assert player.mixer._inertia.state.shape == (0,)  # a job type whose update compiles no stage
    player.crossfade("run", 0.2, blend="inertialize")
    assert player.mixer._inertia.state.shape == (1, 4)
    fields = player.mixer._job_fields()
    fields["inert_x"] = np.zeros((1, 9, 3))
    with pytest.raises(SkeletalError, match="inert_x"):
        playback_job(**fields)
    with pytest.raises(SkeletalError, match="duration"):
        player.mixer.crossfade("walk", float("inf"), blend="inertialize")


def test_crowd_switch_leaves_other_instances_bit_identical():
    """56 instances walking (three wide lane groups of 16 and 8 posed one by one); instances 3, 20 (in wide
    groups) and 50 (in the tail) switch to run, inertialized. While the transition runs, every other
    instance's palette and pose equal bit for bit those of the same crowd without the switch (their groups
    stay wide); after it, those of the untouched group still do. The switched instances follow a
    float64 Mixer given the same switch (within the crowd's float32 and nlerp)."""
    asset = demo_asset()
    count = 56
    offsets = np.linspace(0.0, 0.9, count)
    switched, plain = Crowd(asset, count), Crowd(asset, count)
    reference = Mixer(asset, count)
    for crowd in (switched, plain):
        crowd.play("walk", offsets=offsets)
    reference.play("walk", offset=offsets)
    rows = [3, 20, 50]
    others = np.setdiff1d(np.arange(count), rows)
    untouched = np.arange(32, 48)
    for k in range(40):
        if k == 10:
            switched.crossfade("run", 0.3, blend="inertialize", instances=rows)
            reference.crossfade("run", 0.3, blend="inertialize", instances=rows)
        for m in (switched, plain, reference):
            m.update(DT)
        running = switched._inertia.running.any()
        kept = others if (k < 10 or running) else untouched
        np.testing.assert_array_equal(switched.palettes[kept], plain.palettes[kept])
        if k % 4 == 0:
            np.testing.assert_array_equal(switched.local_pose[kept], plain.local_pose[kept])
            assert np.abs(switched.local_pose[rows] - reference.local_pose[rows]).max() < 1e-4
            assert np.abs(switched.palettes[rows] - reference.palettes[rows][:, :, :3]).max() < 1e-4
        if 10 <= k < 27:
            assert running and (switched.fs[:, :, K.F_EFFECTIVE] > 0).sum(axis=1).max() == 1
    assert (switched._inertia.state[:, ST_PHASE] == IDLE).all()
    # the switched instances, now plain run, went back to the lanes where their group plays run
    assert np.abs(switched.local_pose[rows] - reference.local_pose[rows]).max() < 1e-4


def test_blend_space_parameter_jump_and_entry_can_be_inertialized():
    asset = demo_asset()

    def run(action):
        player = Player(asset)
        player.play("idle")
        space = BlendSpace1D(player, [("walk", 1.4), ("run", 4.0)])
        space.set(1.4)
        poses = []
        for k in range(70):
            if k in action:
                action[k](space)
            player.update(DT)
            poses.append(player.local_pose.copy())
        return np.array(poses)

    enter_pop = run({20: lambda s: s.play()})
    enter = run({20: lambda s: s.play(fade=0.3, blend="inertialize")})
    jump_pop = run({20: lambda s: s.play(), 40: lambda s: s.set(4.0)})
    jump = run({20: lambda s: s.play(), 40: lambda s: s.set(4.0, blend="inertialize", duration=0.3)})
    assert _jump(enter, 20) < 0.25 * _jump(enter_pop, 20)
    assert _jump(jump, 40) < 0.25 * _jump(jump_pop, 40)
    np.testing.assert_allclose(enter[-1], enter_pop[-1], atol=1e-9)  # the blend space's own pose again
    np.testing.assert_allclose(jump[-1], jump_pop[-1], atol=1e-9)


def test_state_machine_transition_into_a_blend_space_can_be_inertialized():
    player = Player(demo_asset())
    machine = player.state_machine({
        "parameters": {"speed": 0.0},
        "states": {"idle": {"clip": "idle"},
                   "move": {"blend1d": {"parameter": "speed", "samples": [["walk", 1.4], ["run", 4.0]]}}},
        "transitions": [{"from": "idle", "to": "move", "when": "speed > 1", "duration": 0.3, "blend": "inertialize"}],
    })
    for _ in range(20):
        player.update(DT)
    poses = [player.local_pose.copy()]
    player.set("speed", 3.0)
    for _ in range(25):
        player.update(DT)
        poses.append(player.local_pose.copy())
    assert machine.state_of(0) == "move"
    step = pose_velocity(poses[0], poses[1], DT)[:, 3:6]
    assert np.linalg.norm(step, axis=-1).max() < 20.0  # a pop into the blend moves some joint at tens of rad/s
    assert not player.mixer._inertia.running.any()


def test_transition_bench_counts_one_clip_and_prints_the_ratios():
    from skeletal.bench.transitions import run_sequence

    row = run_sequence(demo_asset(), ("idle", "walk", "run"), "inertialize", (0.2, 0.35), repeats=1)
    assert row["clips_sampled"] == 1 and row["ratio"] > 0
    assert run_sequence(demo_asset(), ("idle", "walk", "run"), "linear", (0.2, 0.35), repeats=1)["clips_sampled"] == 3


def test_dead_blend_slerp_without_atan2_matches_the_atan2_form():
    """The stage's dead blending (branch-free slerp: tangent halvings and atan's series) against
    :func:`decay_into`'s ``atan2`` form: zero angles, near-equal and opposite-sign rotations, angles
    near pi, extrapolated turns past the series' range (redone with quat_exp), unnormalised clip
    quaternions (source and pose), the loop down the joints padded to whole vectors or not."""
    from skeletal.playback.inertia_kernels import DEAD, _dead_blend_into, decay_into

    rng = np.random.default_rng(7)
    joints = 37
    for trial in range(40):
        source = np.zeros((joints, 10))
        source[:, :3] = rng.normal(size=(joints, 3))
        source[:, 7:] = 1.0 + 0.1 * rng.normal(size=(joints, 3))
        q = rng.normal(size=(joints, 4))
        source[:, 3:7] = q / np.linalg.norm(q, axis=1, keepdims=True)
        pose = source.copy()
        source[:, 3:7] *= 1.0 + 1e-6 * rng.normal(size=(joints, 1))  # a clip's norm error (not renormalised)
        q = rng.normal(size=(joints, 4))
        pose[:, 3:7] = q / np.linalg.norm(q, axis=1, keepdims=True) * (1.0 + 1e-6 * rng.normal(size=(joints, 1)))
        pose[:4, 3:7] = source[:4, 3:7]  # no way left: a zero angle
        pose[4:8, 3:7] = -source[4:8, 3:7] + 1e-9 * rng.normal(size=(4, 4))  # the same rotation, other sign
        half_turn = np.array([np.sin(1.5), 0.0, 0.0, np.cos(1.5)])  # pi - 0.14 rad of way left
        pose[8, 3:7] = [half_turn[3] * source[8, 3] + half_turn[0] * source[8, 6],
                        half_turn[3] * source[8, 4] - half_turn[0] * source[8, 5],
                        half_turn[3] * source[8, 5] + half_turn[0] * source[8, 4],
                        half_turn[3] * source[8, 6] - half_turn[0] * source[8, 3]]
        velocity = rng.normal(size=(joints, 9)) * (10.0 if trial % 2 else 1.0)
        velocity[0, 3:6] = [400.0, 0.0, 0.0]  # a turn past the series' range within the blend
        velocity[1] = 0.0
        t = rng.uniform(0.0, 0.3)
        expected = pose.copy()
        decay_into(expected, DEAD, t, DT, 0.3, 0.05, np.zeros((joints, 9)), velocity, source)
        got = pose.copy()
        # rows padded to 40 lanes (room for them), or 37 long (a scratch of 15 rows of the joints)
        _dead_blend_into(got, t, 0.3, 0.05, velocity, source, np.zeros((18 if trial % 4 < 2 else 15) * joints))
        assert np.all(np.isfinite(got))
        np.testing.assert_allclose(got[:, [0, 1, 2, 7, 8, 9]], expected[:, [0, 1, 2, 7, 8, 9]], rtol=0, atol=1e-13)
        same_sign = np.where(np.sum(got[:, 3:7] * expected[:, 3:7], axis=1, keepdims=True) < 0, -1.0, 1.0)
        np.testing.assert_allclose(got[:, 3:7] * same_sign, expected[:, 3:7], rtol=0, atol=1e-12)


def _moving_offsets(rng, joints, moving, scale):
    """Offsets and rates (joints, 9) of which the first ``moving`` joints' are not zero, gathered as the
    stage keeps them: (n, joints (L,), x, v (9 * L,))."""
    from skeletal.playback.inertia_kernels import _gather_moving, lanes

    offset, rate = rng.normal(size=(joints, 9)) * scale, rng.normal(size=(joints, 9)) * scale
    offset[moving:] = rate[moving:] = 0.0
    width = lanes(joints)
    index, x, v = np.zeros(width, np.int64), np.zeros(9 * width), np.zeros(9 * width)
    n = _gather_moving(offset, rate, index, x, v)
    return offset, rate, n, index, x, v


def test_stage_rotation_offsets_match_quat_exp_at_every_size():
    """The stage's offsets as quaternions (7 terms of the series, the 13 past 1.2 rad, quat_exp past 2 pi)
    against :func:`quat_exp`, for offsets from 0.05 to several radians; the joints without offsets
    (the vector loop's padding lanes among them) left exactly as they were."""
    from skeletal.playback.inertia_kernels import QUINTIC, _decay_moving, _rotation_bounds, quat_exp, quintic_weights

    rng = np.random.default_rng(3)
    joints = 50
    for scale in [0.05, 0.3, 1.0, 3.0] * 10:
        moving = joints - 3
        offset, rate, n, index, x, v = _moving_offsets(rng, joints, moving, scale)
        assert n == moving
        pose = np.zeros((joints, 10))
        pose[:, 6] = 1.0
        t = rng.uniform(0.0, 0.3)
        _decay_moving(pose, QUINTIC, t, 0.3, n, index, x, v, np.zeros_like(x), *_rotation_bounds(x, v, n))
        wp, wq = quintic_weights(t, 0.3)
        rotations = offset[:moving, 3:6] * wp + rate[:moving, 3:6] * wq
        expected = np.array([quat_exp(*r) for r in rotations])
        np.testing.assert_allclose(pose[:moving, 3:7], expected, rtol=0, atol=1e-13)
        np.testing.assert_array_equal(pose[moving:, 3:7], [[0.0, 0.0, 0.0, 1.0]] * 3)


@pytest.mark.parametrize("joints, moving", [(50, 47), (50, 48), (50, 9), (50, 3), (23, 18), (6, 4), (8, 8)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_stage_adds_offsets_as_the_scalar_formula(joints, moving, dtype):
    """Eight joints a vector (float64) or one by one (float32, a rig under eight nodes): each moving
    joint's row plus its offset now, the rotation left-multiplied, as the scalar formula gives it (the
    same bits in float64); every other row untouched (the vector loop's padding lanes rewrite rows
    with an offset of exactly zero); QUINTIC and SPRING (closed form)."""
    from skeletal.playback.inertia_kernels import (QUINTIC, SPRING, _decay_moving, _rotation_bounds, quat_exp, quintic_weights,
                                                   spring_weights)

    rng = np.random.default_rng(joints * 100 + moving)
    offset, rate, n, index, x, v = _moving_offsets(rng, joints, moving, 0.2)
    assert n == moving and sorted(index[:n]) == list(range(moving))
    base = rng.normal(size=(joints, 10)).astype(dtype)
    base[:, 3:7] /= np.linalg.norm(base[:, 3:7], axis=1, keepdims=True)
    for mode, weights in ((QUINTIC, quintic_weights), (SPRING, spring_weights)):
        t = 0.07
        pose = base.copy()
        _decay_moving(pose, mode, t, 0.3, n, index, x, v, np.zeros_like(x), *_rotation_bounds(x, v, n))
        wp, wq = weights(t, 0.3)
        now = offset[:moving] * wp + rate[:moving] * wq
        b = base[:moving].astype(np.float64)
        turn = np.array([quat_exp(*r) for r in now[:, 3:6]])
        ax, ay, az, aw = turn.T
        bx, by, bz, bw = b[:, 3:7].T
        expected = np.concatenate([b[:, :3] + now[:, :3],
                                   np.stack([aw * bx + ax * bw + ay * bz - az * by, aw * by - ax * bz + ay * bw + az * bx,
                                             aw * bz + ax * by - ay * bx + az * bw, aw * bw - ax * bx - ay * by - az * bz], 1),
                                   b[:, 7:] + now[:, 6:]], 1)
        tolerance = 1e-13 if dtype == np.float64 else 1e-6
        np.testing.assert_allclose(pose[:moving], expected, rtol=0, atol=tolerance)
        np.testing.assert_array_equal(pose[moving:], base[moving:])


def test_spring_weights_match_the_stepped_spring():
    """The stage's spring in closed form equals :func:`decay_into`'s exact per-frame steps (one channel
    from x0, v0 at the switch), whatever the frames."""
    from skeletal.playback.inertia_kernels import _spring_step, spring_weights

    x0, v0, duration = 0.7, -3.0, 0.6
    y = 2.0 * np.log(2.0) * 10.0 / duration
    x, v, t = x0, v0, 0.0
    for dt in [1 / 60, 1 / 30, 0.001, 1 / 144, 0.05] * 4:
        x, v = _spring_step(x, v, y, dt)
        t += dt
        wp, wq = spring_weights(t, duration)
        assert abs(x0 * wp + v0 * wq - x) < 1e-14
