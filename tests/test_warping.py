"""Stride and orientation warping: feet on their scaled targets, the upper body kept, root motion
scaled and turned, less foot slide than moving the clip as recorded, and under motion matching."""

from __future__ import annotations

import math

import numpy as np
import pytest

import skeletal
from skeletal.demo import demo_asset, locomotion_asset
from skeletal.errors import SkeletalError
from skeletal.playback import Player
from skeletal.playback.locomotion import MatchingDatabase, MotionMatching, Warping
from skeletal.quat import matrix_to_quat


def _pair(time: float = 0.37):
    """The demo walk at ``time`` on two players: one plain, one with a Warping (returned)."""
    asset = demo_asset()
    plain, warped = Player(asset), Player(asset)
    warp = Warping(warped)
    for p in (plain, warped):
        p.play("walk", offset=time)
    return plain, warped, warp


def _yaw(m: np.ndarray) -> float:
    """Heading of a model-space matrix's +Z axis about +Y."""
    z = m[:3, 2] / np.linalg.norm(m[:3, 2])
    return math.atan2(z[0], z[2])


def test_identity_settings_leave_the_pose_as_it_was():
    plain, warped, _ = _pair()
    plain.update(1 / 60)
    warped.update(1 / 60)
    np.testing.assert_array_equal(plain.local_pose, warped.local_pose)
    np.testing.assert_array_equal(plain.world, warped.world)


@pytest.mark.parametrize("stride", [0.7, 1.4])
def test_stride_scales_the_feet_offsets_along_the_motion(stride):
    plain, warped, warp = _pair()
    warp.stride[:] = stride
    plain.update(1 / 60)
    warped.update(1 / 60)
    feet = [leg.foot for leg in warp.legs]
    pelvis = plain.world[warp.pelvis, :3, 3]
    before = plain.world[feet, :3, 3]
    after = warped.world[feet, :3, 3]
    # along the motion (+Z) each foot's offset from the pelvis is scaled; across and up it is kept
    np.testing.assert_allclose(after[:, 2] - pelvis[2], stride * (before[:, 2] - pelvis[2]), atol=1e-6)
    np.testing.assert_allclose(after[:, [0, 1]], before[:, [0, 1]], atol=1e-6)
    np.testing.assert_allclose(after, warp.targets[0], atol=1e-6)
    # the feet keep their model-space rotation (flat on the ground as recorded)
    for f in feet:
        a, b = matrix_to_quat(plain.world[f, :3, :3]), matrix_to_quat(warped.world[f, :3, :3])
        assert abs(abs(float(np.dot(a, b))) - 1.0) < 1e-9
    # the legs kept their lengths (the IK moved joints, not bones)
    for leg in warp.legs:
        for u, v in ((leg.thigh, leg.knee), (leg.knee, leg.foot)):
            assert abs(np.linalg.norm(warped.world[u, :3, 3] - warped.world[v, :3, 3])
                       - np.linalg.norm(plain.world[u, :3, 3] - plain.world[v, :3, 3])) < 1e-9
    if stride > 1.0:  # longer steps: the pelvis lowers so that the legs reach
        assert warped.world[warp.pelvis, 1, 3] <= plain.world[warp.pelvis, 1, 3]


def test_orientation_turns_the_legs_and_keeps_the_upper_body():
    plain, warped, warp = _pair()
    angle = math.radians(30.0)
    warp.angle[:] = angle
    plain.update(1 / 60)
    warped.update(1 / 60)
    assert len(warp.spine) == 2  # spine and chest of the built-in character
    turned = _yaw(warped.world[warp.pelvis]) - _yaw(plain.world[warp.pelvis])
    assert abs(turned - angle) < 1e-9
    thigh = warp.legs[0].thigh
    assert abs(_yaw(warped.world[thigh]) - _yaw(plain.world[thigh]) - angle) < 1e-9
    neck = int(demo_asset().rig.find("neck"))
    # the chest and head face as recorded (turned back about the spine's own joints: moved a little)
    np.testing.assert_allclose(warped.world[neck, :3, :3], plain.world[neck, :3, :3], atol=1e-9)
    assert np.linalg.norm(warped.world[neck, :3, 3] - plain.world[neck, :3, 3]) < 0.01


def test_root_motion_delta_is_scaled_and_turned():
    asset = locomotion_asset()
    plain, warped = Player(asset), Player(asset)
    for p in (plain, warped):
        p.enable_root_motion("root")
    warp = Warping(warped)
    warp.stride[:], warp.angle[:] = 1.3, math.radians(20.0)
    for p in (plain, warped):
        p.play("walk_forward", offset=0.2)
        p.update(1 / 60)
    (mx, _, mz), yaw = plain.root_motion
    (wx, _, wz), wyaw = warped.root_motion
    assert abs(math.hypot(wx, wz) - 1.3 * math.hypot(mx, mz)) < 1e-9
    assert abs(math.atan2(wx, wz) - math.atan2(mx, mz) - math.radians(20.0)) < 1e-9
    assert wyaw == yaw


def test_less_slide_than_moving_the_clip_as_recorded():
    from skeletal.bench.warping import foot_slide

    asset = demo_asset()
    for ratio in (0.7, 1.4):
        off = foot_slide(asset, "walk", ratio, warp=False, seconds=1.5)
        on = foot_slide(asset, "walk", ratio, warp=True, seconds=1.5)
        assert off["planted_frames"] > 30 and on["planted_frames"] == off["planted_frames"]
        assert on["slide_cm"] < 0.8 * off["slide_cm"], (ratio, on, off)


def test_under_motion_matching_it_follows_the_speed_asked():
    asset = locomotion_asset()
    db = MatchingDatabase.build(asset, exclude=("idle", "wave", "walk", "run"))
    mm = MotionMatching(Player(asset), db, warping=True)
    assert mm.warping is not None and not mm.warping.attached
    mm.set_goal((0.0, 1.6))  # between the walk (~1.1 m/s) and the run
    start = None
    for k in range(240):
        mm.update(1 / 60)
        if k == 119:
            start = mm.position.copy()
    speed = float(np.hypot(*(mm.position - start)[[0, 2]])) / 2.0
    assert abs(speed - 1.6) < 0.35, speed
    assert np.isfinite(mm.player.world).all()
    with pytest.raises(SkeletalError, match="max_stride"):
        MotionMatching(Player(asset), db, warping=True, max_stride=(1.2, 1.5))


def test_unwarped_pose_is_the_pose_the_update_made():
    plain, warped, warp = _pair()
    warp.stride[:], warp.angle[:] = 1.4, math.radians(20.0)
    plain.update(1 / 60)
    warped.update(1 / 60)
    assert np.abs(warped.local_pose - plain.local_pose).max() > 1e-3  # warped
    np.testing.assert_array_equal(warp.unwarped_pose(), plain.local_pose[None])
    np.testing.assert_array_equal(warp.unwarped_pose([0])[0], plain.local_pose)
    warped.mixer.local_pose[0, warp.pelvis, 0] += 0.5  # changed since: the pose as it is now
    np.testing.assert_array_equal(warp.unwarped_pose()[0], warped.local_pose)
    warp.remove()
    assert "_warping" not in warped.mixer.__dict__


def test_a_dead_blended_switch_does_not_carry_the_warp_on():
    """A switch starts from the pose the update made: started from the warped pose, the velocity ahead
    held the whole warp as one frame's motion, and the dead blend threw joints 1.1 m in a frame."""
    player = Player(demo_asset())
    warp = Warping(player)
    warp.stride[:], warp.angle[:] = 1.4, math.radians(25.0)
    player.play("walk", offset=0.3)
    points = []
    for k in range(40):
        if k == 20:
            player.crossfade("run", 0.2, blend="dead_blend")
        player.update(1 / 60)
        points.append(player.world[:, :3, 3].copy())
    steps = np.linalg.norm(np.diff(points, axis=0), axis=2).max(axis=1)  # the fastest joint, per frame
    assert steps[19:].max() < 3.0 * steps[:19].max(), (steps[:19].max(), steps[19:].max())


def test_refuses_bad_targets_and_settings():
    asset = demo_asset()
    with pytest.raises(SkeletalError, match="Player, Mixer or Crowd, not a Asset"):
        Warping(asset)
    with pytest.raises(SkeletalError, match="reach"):
        Warping(Player(asset), reach=1.5)
    with pytest.raises(SkeletalError, match="spine joint"):
        Warping(Player(asset), spine=["no such joint"])
    player = Player(asset)
    warp = Warping(player)
    player.play("walk")
    warp.axis[0] = (np.nan, 1.0)
    with pytest.raises(SkeletalError, match="finite"):
        player.update(1 / 60)


def test_a_float32_mixer_of_several_characters():
    asset = demo_asset()
    mixer = skeletal.Mixer(asset, 6, dtype=np.float32)
    warp = Warping(mixer)
    warp.stride[:] = np.linspace(0.7, 1.4, 6)
    warp.weight[0] = 0.0  # the first one as recorded
    mixer.play("walk", offset=np.linspace(0.0, 1.0, 6))
    mixer.update(1 / 60)
    feet = [leg.foot for leg in warp.legs]
    for b in range(1, 6):
        np.testing.assert_allclose(mixer.world[b][feet, :3, 3], warp.targets[b], atol=2e-4)
    plain = skeletal.Mixer(asset, 6, dtype=np.float32)
    plain.play("walk", offset=np.linspace(0.0, 1.0, 6))
    plain.update(1 / 60)
    np.testing.assert_array_equal(plain.world[0], mixer.world[0])


# -- on a Crowd ---------------------------------------------------------------------------------------

CASES = [  # (clip, start time, stride, angle in degrees) per instance
    ("walk", 0.10, 1.4, 0.0), ("walk", 0.37, 0.7, 25.0), ("run", 0.21, 1.2, -15.0), ("walk", 0.55, 1.0, 0.0),
    ("run", 0.05, 0.8, 10.0),
]


@pytest.mark.parametrize("wide", [True, False])
def test_a_crowd_warps_each_instance_as_a_player_with_the_same_settings(wide):
    """Per-instance stride and angle in one compiled call: each crowd instance's pose, palettes and
    root-motion delta equal a float64 Player's warped with that instance's settings (float32 rounding)."""
    asset = demo_asset()
    n = len(CASES)
    crowd = skeletal.Crowd(asset, n, wide=wide)
    crowd_root = skeletal.playback.rootmotion.RootMotion(crowd, "hips")
    crowd_warp = Warping(crowd)
    assert crowd_warp.crowd
    for i, (clip, time, stride, angle) in enumerate(CASES):
        crowd.play(clip, offsets=time, instances=[i])
        crowd_warp.stride[i] = stride
        crowd_warp.angle[i] = math.radians(angle)
    players, warps = [], []
    for clip, time, stride, angle in CASES:
        p = Player(asset)
        p.enable_root_motion("hips")
        w = Warping(p)
        w.stride[:] = stride
        w.angle[:] = math.radians(angle)
        p.play(clip, offset=time)
        players.append(p)
        warps.append(w)
    for _ in range(3):
        crowd.update(1 / 60)
        for p in players:
            p.update(1 / 60)
    for i, p in enumerate(players):
        np.testing.assert_allclose(crowd_warp.targets[i], warps[i].targets[0], atol=2e-4)
        world = skeletal.anim.pose.world_matrices(asset.rig.parents, crowd.local_pose[i].astype(np.float64))
        np.testing.assert_allclose(world[:, :3, 3], p.world[:, :3, 3], atol=2e-4)
        np.testing.assert_allclose(crowd.palettes[i], p.mixer.palettes[0, :, :3, :] if p.mixer.palettes.shape[-2] == 4
                                   else p.mixer.palettes[0], atol=2e-4)
        np.testing.assert_allclose(crowd_root.delta[i], p._root_motion.delta[0], atol=1e-5)
    # the warped instances differ from the plain pose (the settings did something)
    plain = skeletal.Crowd(asset, n, wide=wide)
    skeletal.playback.rootmotion.RootMotion(plain, "hips")
    for i, (clip, time, _, _) in enumerate(CASES):
        plain.play(clip, offsets=time, instances=[i])
    for _ in range(3):
        plain.update(1 / 60)
    moved = np.abs(plain.local_pose - crowd.local_pose).max(axis=(1, 2))
    assert (moved[[0, 1, 2, 4]] > 1e-3).all() and moved[3] == 0.0


def test_detached_ik_feet_follow_their_leg_chains():
    """RobotExpressive's feet (FootL/FootR) are IK controls off the armature's root bone; its legs
    (UpperLegL -> LowerLegL) end in LowerLegL_end where the foot sits. Warping bends those chains and
    the feet follow their ends: the stride scales the feet's travel, and each foot stays as far from
    its chain's end as in the clip."""
    from fixtures.shared_assets import need
    from skeletal.playback.locomotion.warping import leg_chains

    asset = skeletal.load(need("RobotExpressive.glb"))
    names = asset.rig.names
    warp = Warping(Player(asset))
    assert [(names[leg.thigh], names[leg.knee], names[leg.foot]) for leg in warp.legs] == [
        ("UpperLegL", "LowerLegL", "LowerLegL_end"), ("UpperLegR", "LowerLegR", "LowerLegR_end")]
    assert [names[f] for f in warp.followers] == ["FootL", "FootR"]
    demo_legs = Warping(Player(demo_asset())).legs
    assert leg_chains(demo_asset().rig, demo_legs) == (demo_legs, [-1, -1])  # feet on their own chains

    def run(stride: float, angle: float = 0.0):
        player = Player(asset)
        w = Warping(player)
        w.stride[:], w.angle[:] = stride, angle
        player.play("Walking")
        feet, gaps = [], []
        for _ in range(60):
            player.update(1 / 60)
            world = player.world
            feet.append(world[w.followers, :3, 3].copy())
            gaps.append([np.linalg.norm(world[f, :3, 3] - world[leg.foot, :3, 3]) for leg, f in zip(w.legs, w.followers)])
        return np.array(feet), np.array(gaps)

    plain, plain_gaps = run(1.0)
    slow, slow_gaps = run(0.7, 0.3)
    travel = np.ptp(slow[:, :, 2], axis=0) / np.ptp(plain[:, :, 2], axis=0)
    np.testing.assert_allclose(travel, 0.7, atol=0.05)  # the feet's forward travel scales with the stride
    np.testing.assert_allclose(slow_gaps, plain_gaps, atol=1e-6)  # each foot kept on its chain's end


@pytest.fixture(scope="module")
def robot_moves():
    """RobotExpressive's locomotion set (its feet: IK controls off its legs)."""
    from fixtures.shared_assets import need
    from skeletal.playback.locomotion.gaits import locomotion_set

    return locomotion_set(need("RobotExpressive.glb"))


@pytest.mark.parametrize("ratio", [0.7, 1.4])
def test_detached_feet_stay_on_their_legs_under_motion_matching(robot_moves, ratio):
    """RobotExpressive walking the figure eight under motion matching with warping, at 0.7x and 1.4x its
    walk's speed: through its dead-blended jumps (which carry each joint on by its own velocity) and
    its starts blended with an Idle that leaves the foot controls at rest, every foot control stays
    within ``follow_slack`` (4% of the leg) of its chain's end, and the foot meshes (rigid under the
    controls) stay as near the lower legs' ends as the controls' own size allows."""
    from skeletal.playback.locomotion.paths import figure_eight_path

    moves = robot_moves
    asset, rig = moves.asset, moves.asset.rig
    walk = moves.speeds["walk"]
    path = figure_eight_path(ratio * walk, 4.0 * walk)  # as wide as `skeletal locomotion` draws it
    mm = MotionMatching(Player(asset), moves.database, warping=True)
    warp = mm.warping
    assert warp is not None and [rig.names[f] for f in warp.followers] == ["FootL", "FootR"]
    ends = [leg.foot for leg in warp.legs]
    # each foot mesh's vertices in its node's frame, and how far they reach from the control
    meshes = []
    for foot in warp.followers:
        inst = next(m for m in asset.mesh_instances if int(rig.parents[rig.index_of[m.node]]) == foot)
        points = np.concatenate([p.source.positions for p in inst.primitives]).astype(np.float64)
        meshes.append((rig.index_of[inst.node], np.c_[points, np.ones(len(points))]))
    size = [float(np.linalg.norm((Player(asset).world[node] @ p.T).T[:, :3] - Player(asset).world[f, :3, 3], axis=1).max())
            for (node, p), f in zip(meshes, warp.followers)]
    gaps, reach, strides, drift = [], [], [], []
    for k in range(300):
        p, v = path(k / 60.0)
        mm.set_goal(v + (p - mm.position[[0, 2]]))
        mm.update(1 / 60)
        world = mm.player.world
        gaps.append(np.linalg.norm(world[warp.followers, :3, 3] - world[ends, :3, 3], axis=1))
        reach.append([np.linalg.norm((world[node] @ pts.T).T[:, :3] - world[end, :3, 3], axis=1).max()
                      for (node, pts), end in zip(meshes, ends)])
        strides.append(float(warp.stride[0]))
        made = skeletal.anim.pose.world_matrices(rig.parents, warp.unwarped_pose([0])[0])
        drift.append(np.linalg.norm(made[warp.followers, :3, 3] - made[ends, :3, 3], axis=1))
    gaps, reach = np.array(gaps), np.array(reach)
    assert mm.jumps > 5 and np.ptp(strides) > 0.1  # it jumped between clips and warped the stride
    assert (gaps <= warp.follow_slack + 1e-5).all(), gaps.max(axis=0)
    assert (reach <= np.array(size) + warp.follow_slack + 1e-5).all(), (reach.max(axis=0), size)
    # the pose the mixer made (before the warp): its jumps start from the unwarped pose and velocity
    # (Warping.unwarped_pose), so their dead blends do not carry the feet off (they did, by up to 3x
    # the leg's length, when they started from the warped pose); past the start from Idle, whose
    # controls sit at rest (blended into the starts and stops too), they stay within a quarter leg
    assert (np.array(drift)[30:] <= 0.25 * warp.leg_length).all(), np.array(drift)[30:].max(axis=0)
