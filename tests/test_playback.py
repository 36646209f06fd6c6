"""Playback: actions, loop modes, events, crossfades, layers and masks, batched instances.

Expectations are computed independently: a clip alone is ``skeletal.sample``; a blend is the
documented weighted average (sign-aligned normalised quaternion sum) of clips sampled alone.
"""

from __future__ import annotations

import numpy as np
import pytest

import skeletal
from skeletal.anim.clip import Clip, Track
from skeletal.demo import demo_asset
from skeletal.playback import Mixer, Player


@pytest.fixture(scope="module")
def asset():
    return demo_asset()


def alone(asset, clip, t, loop="repeat"):
    """Local pose (N, 10) of one clip sampled at clip-local time t."""
    pose, _ = skeletal.sample(asset.clip(clip), [t], asset.rig.rest, asset.morph_start, asset.rest_morph, loop=loop)
    return pose[0]


def blend(poses, weights):
    """The documented blend of full-weight poses: weighted mean, sign-aligned quaternion sum."""
    weights = np.asarray(weights, float) / np.sum(weights)
    out = np.zeros_like(poses[0])
    for p, w in zip(poses, weights):
        q = p[:, 3:7].copy()
        if out[:, 3:7].any():
            flip = np.sum(out[:, 3:7] * q, axis=1) < 0
            q[flip] *= -1
        out[:, 0:3] += w * p[:, 0:3]
        out[:, 3:7] += w * q
        out[:, 7:10] += w * p[:, 7:10]
    out[:, 3:7] /= np.linalg.norm(out[:, 3:7], axis=1, keepdims=True)
    return out


def overlay(base, top, clip, nodes):
    """``base`` with the rows/paths that ``clip`` animates on ``nodes`` (a mask) taken from ``top``:
    an override layer replaces only what its clips animate."""
    out = base.copy()
    columns = {"translation": slice(0, 3), "rotation": slice(3, 7), "scale": slice(7, 10)}
    for track in clip.tracks:
        if nodes[track.node] and track.path in columns:
            out[track.node, columns[track.path]] = top[track.node, columns[track.path]]
    return out


def same_rotation(a, b, atol=1e-9):
    dots = np.abs(np.sum(a * b, axis=-1))
    np.testing.assert_allclose(dots, 1.0, atol=atol)


def assert_pose(actual, expected, atol=1e-9):
    np.testing.assert_allclose(actual[:, 0:3], expected[:, 0:3], atol=atol)
    np.testing.assert_allclose(actual[:, 7:10], expected[:, 7:10], atol=atol)
    same_rotation(actual[:, 3:7], expected[:, 3:7], atol=atol)


# -- the contract --------------------------------------------------------------------------------


def test_play_update_matches_sampling_and_bake(asset):
    player = Player(asset)
    player.play("walk")
    for _ in range(10):
        player.update(0.07)
    t = 0.7 % asset.clip("walk").duration
    assert_pose(player.local_pose, alone(asset, "walk", t))
    baked = skeletal.bake(asset, "walk", [0.7], loop="repeat")
    np.testing.assert_allclose(player.node_world, baked["node_world"][0], atol=1e-12)
    assert player.node_world.shape == (len(asset.document.nodes), 4, 4)
    assert len(player.palettes) == len(asset.skins)
    skin = asset.skins[0]
    np.testing.assert_allclose(player.palettes[0], player.world[skin.joints] @ skin.inverse_bind, atol=1e-12)


def test_crossfade_midpoint_is_the_50_50_blend_and_ends_on_the_target(asset):
    player = Player(asset)
    player.play("walk")
    player.update(0.3)
    player.crossfade("run", duration=0.5)
    player.update(0.25)  # halfway: walk at 0.55, run at 0.25, weights 0.5 / 0.5
    expected = blend([alone(asset, "walk", 0.55), alone(asset, "run", 0.25)], [0.5, 0.5])
    assert_pose(player.local_pose, expected)
    player.update(0.25)  # fade over: walk stopped, run alone at 0.5
    assert_pose(player.local_pose, alone(asset, "run", 0.5))
    assert [a.clip.name for a in player.actions] == ["run"]


def test_crossfade_from_nothing_starts_at_rest_pose(asset):
    player = Player(asset)
    player.crossfade("wave", duration=1.0)
    assert_pose(player.local_pose, asset.rig.rest)
    player.update(0.25)
    expected = blend([asset.rig.rest, alone(asset, "wave", 0.25)], [0.75, 0.25])
    assert_pose(player.local_pose, expected)


@pytest.mark.parametrize("snapshot", [False, True])
def test_interrupted_fade_does_not_snap(asset, snapshot):
    player = Player(asset)
    player.play("walk")
    player.update(0.2)
    player.crossfade("run", 0.6)
    player.update(0.3)
    before = player.local_pose.copy()
    player.crossfade("wave", 0.4, snapshot=snapshot)  # interrupt halfway
    assert_pose(player.local_pose, before)
    player.update(1e-4)
    np.testing.assert_allclose(player.local_pose, before, atol=2e-3)
    player.update(0.4)
    assert_pose(player.local_pose, alone(asset, "wave", 0.4001), atol=1e-9)


def test_fading_back_to_an_action_keeps_its_clock(asset):
    player = Player(asset)
    player.play("walk")
    player.update(0.3)
    player.crossfade("run", 0.5)
    player.update(0.1)
    walk = player.action("walk")
    assert 0 < walk.effective_weight < 1
    t = walk.time
    player.crossfade("walk", 0.5)
    assert player.action("walk").time == pytest.approx(t)


def test_snapshot_crossfade_blends_from_the_frozen_pose(asset):
    player = Player(asset)
    player.play("walk")
    player.update(0.3)
    frozen = player.local_pose.copy()
    player.crossfade("run", 0.5, snapshot=True)
    player.update(0.25)
    assert_pose(player.local_pose, blend([frozen, alone(asset, "run", 0.25)], [0.5, 0.5]))


def test_phase_sync_and_warp(asset):
    walk, run = asset.clip("walk").duration, asset.clip("run").duration
    player = Player(asset)
    player.play("walk", offset=0.25 * walk)
    player.crossfade("run", 0.4, sync=True)
    assert player.action("run").time == pytest.approx(0.25 * run)
    player = Player(asset)
    player.play("walk")
    player.crossfade("run", 0.4, warp=True)
    player.update(0.4)
    # warp: run's clock starts at walk's rate (run/walk) and ends at 1: average speed in between.
    mean_rate = (run / walk + 1.0) / 2
    assert player.action("run").time == pytest.approx((0.4 * mean_rate) % run, rel=1e-6)


# -- actions: loop modes, speed, events ---------------------------------------------------------


def test_loop_modes_and_negative_speed(asset):
    d = asset.clip("wave").duration
    cases = {
        ("once", 1.0, 1.3 * d): None,  # finished and stopped: rest pose
        ("clamp", 1.0, 1.3 * d): d,
        ("repeat", 1.0, 1.3 * d): 0.3 * d,
        ("pingpong", 1.0, 1.3 * d): 0.7 * d,
        ("repeat", -1.0, 0.25 * d): 0.75 * d,
        ("clamp", -1.0, 0.25 * d): 0.0,
    }
    for (loop, speed, elapsed), expected_t in cases.items():
        player = Player(asset)
        action = player.play("wave", loop=loop, speed=speed)
        player.update(elapsed)
        if expected_t is None:
            assert not action.running
            assert_pose(player.local_pose, asset.rig.rest)
        else:
            assert action.time == pytest.approx(expected_t), (loop, speed)
            assert_pose(player.local_pose, alone(asset, "wave", expected_t, loop="clamp"))


def test_repetitions_finish_and_hold(asset):
    d = asset.clip("walk").duration
    player = Player(asset)
    action = player.play("walk", loop="repeat", repetitions=2)
    player.update(2.5 * d)
    assert action.finished and action.running and action.loop_count == 2
    assert action.time == pytest.approx(d)
    events = player.events()
    assert [e.kind for e in events] == ["loop", "finished"] and events[0].count == 1


def test_loop_finished_and_marker_events(asset):
    clip = asset.clip("walk")
    d = clip.duration
    marked = Clip("walk_marked", clip.tracks, markers={"left_foot": 0.25 * d, "right_foot": 0.75 * d})
    player = Player(asset)
    got = []
    player.on("*", got.append)
    player.play(marked)
    player.update(0.5 * d)
    assert [(e.kind, e.name) for e in got] == [("marker", "left_foot")]
    player.update(0.8 * d)  # to 1.3 d: crosses right_foot, the loop point, then left_foot again
    kinds = sorted((e.kind, e.name) for e in got[1:])
    assert kinds == [("loop", None), ("marker", "left_foot"), ("marker", "right_foot")]
    assert len(player.events()) == 4
    once = Player(asset)
    once.play("wave", loop="once")
    once.update(10.0)
    assert [e.kind for e in once.events()] == ["finished"]


def test_pingpong_markers_fire_both_ways(asset):
    d = asset.clip("wave").duration
    clip = Clip("wave_marked", asset.clip("wave").tracks, markers={"peak": 0.5 * d})
    player = Player(asset)
    player.play(clip, loop="pingpong")
    player.update(0.6 * d)
    player.update(0.8 * d)  # to 1.4 d: bounced at d, crossed the marker again at 1.5 d? no: 1.4 d < 1.5 d
    names = [e.name for e in player.events() if e.kind == "marker"]
    assert names == ["peak"]
    player.update(0.2 * d)  # 1.6 d: passes 1.5 d (the marker on the way back)
    assert [e.name for e in player.events() if e.kind == "marker"] == ["peak"]


def test_seek_pause_and_weight(asset):
    player = Player(asset)
    action = player.play("walk")
    action.seek(0.4)
    player.update(0)
    assert_pose(player.local_pose, alone(asset, "walk", 0.4))
    action.pause()
    player.update(0.3)
    assert action.time == pytest.approx(0.4)
    action.resume()
    player.update(0.1)
    assert action.time == pytest.approx(0.5)
    action.weight = 0.5  # half the walk, half the rest pose beneath
    player.update(0)
    assert_pose(player.local_pose, blend([alone(asset, "walk", 0.5), asset.rig.rest], [0.5, 0.5]))


def test_weights_above_one_are_normalised(asset):
    # Two clips animating the same nodes (walk, and walk again as another clip started later).
    walk = asset.clip("walk")
    player = Player(asset)
    player.play(walk, weight=3.0)
    player.play(Clip("walk_copy", walk.tracks), weight=1.0, offset=0.3)
    player.update(0.2)
    assert_pose(player.local_pose, blend([alone(asset, "walk", 0.2), alone(asset, "walk", 0.5)], [3, 1]))


def test_unanimated_joints_keep_rest_pose(asset):
    hips = asset.rig.find("hips")
    track = Track(hips, "translation", "LINEAR", np.array([0, 1], np.float32), np.array([[0, 1, 0], [0, 2, 0]], np.float32))
    player = Player(asset)
    player.play(Clip("lift", [track]))
    player.update(0.5)
    others = np.arange(len(asset.rig)) != hips
    np.testing.assert_array_equal(player.local_pose[others], asset.rig.rest[others])
    np.testing.assert_allclose(player.local_pose[hips, 0:3], [0, 1.5, 0])


# -- layers and masks --------------------------------------------------------------------------


def test_masked_layer_leaves_other_joints_untouched(asset):
    player = Player(asset)
    player.play("walk")
    upper = player.add_layer("upper", mask="chest")
    player.play("wave", layer=upper)
    player.update(0.4)
    walk, wave = alone(asset, "walk", 0.4), alone(asset, "wave", 0.4)
    masked = asset.rig.descendants(asset.rig.find("chest"))
    assert_pose(player.local_pose[~masked], walk[~masked])  # hips translation too, though wave animates it
    assert_pose(player.local_pose, overlay(walk, wave, asset.clip("wave"), masked))


def test_soft_mask_and_layer_weight(asset):
    player = Player(asset)
    player.play("walk")
    upper = player.add_layer("upper", mask={"chest": 1.0, "left_upper_arm": 0.5})
    player.play("wave", layer=upper)
    player.update(0.4)
    walk, wave = alone(asset, "walk", 0.4), alone(asset, "wave", 0.4)
    arm = asset.rig.find("left_upper_arm")  # animated by wave, mask weight 0.5
    assert_pose(player.local_pose[arm : arm + 1], blend([walk[arm : arm + 1], wave[arm : arm + 1]], [0.5, 0.5]))
    player.set_layer_weight(upper, 0.0)
    assert_pose(player.local_pose, walk)
    player.set_layer_weight(upper, 0.25)
    chest = asset.rig.find("chest")
    assert_pose(player.local_pose[chest : chest + 1], blend([walk[chest : chest + 1], wave[chest : chest + 1]], [0.75, 0.25]))


# -- batched -----------------------------------------------------------------------------------


def test_mixer_instances_are_independent_arrays(asset):
    offsets = np.array([0.0, 0.1, 0.2, 0.3])
    speeds = np.array([1.0, 0.5, 2.0, -1.0])
    mixer = Mixer(asset, count=4)
    mixer.play("walk", offset=offsets, speed=speeds)
    mixer.crossfade("run", 0.5, instances=[2])
    mixer.update(0.2)
    d = asset.clip("walk").duration
    for b in (0, 1, 3):
        assert_pose(mixer.local_pose[b], alone(asset, "walk", (offsets[b] + 0.2 * speeds[b]) % d))
    expected = blend([alone(asset, "walk", 0.6), alone(asset, "run", 0.2)], [0.6, 0.4])
    assert_pose(mixer.local_pose[2], expected)
    assert mixer.world.shape == (4, len(asset.rig), 4, 4)
    assert mixer.palettes.shape == (4, sum(len(s.joints) for s in asset.skins), 4, 4)
    assert mixer.skin_palettes[0].shape == (4, len(asset.skins[0].joints), 4, 4)


def test_float32_outputs(asset):
    mixer = Mixer(asset, count=2, dtype=np.float32)
    mixer.play("run")
    mixer.update(0.1)
    assert mixer.world.dtype == np.float32 and mixer.palettes.dtype == np.float32
    ref = Mixer(asset, count=1)
    ref.play("run")
    ref.update(0.1)
    np.testing.assert_allclose(mixer.world[0], ref.world[0], atol=1e-5)


def test_bad_requests_are_clear_errors(asset):
    player = Player(asset)
    with pytest.raises(skeletal.ClipError, match="no clip named 'dance'"):
        player.play("dance")
    with pytest.raises(skeletal.ClipError, match="loop mode"):
        player.play("walk", loop="forever")
    with pytest.raises(skeletal.SkeletalError, match="layer"):
        player.play("walk", layer=3)
    with pytest.raises(KeyError):
        player.add_layer("x", mask="no_such_joint")


def test_a_crossfade_right_after_another_fades_out_the_action_just_started(asset):
    player = Player(asset)
    player.play("walk")
    player.crossfade("run", 0.3)  # run has weight 0 so far ...
    player.crossfade("wave", 0.3)  # ... and must fade out too, not keep fading in
    player.update(0.3)
    assert [a.clip.name for a in player.actions] == ["wave"]
    assert_pose(player.local_pose, alone(asset, "wave", 0.3))
