"""The single-character update path (issue 17): one full-weight action sampled straight into the
pose with per-key slerp angles (``ClipSet.slerp_keys``), the opt-in nlerp limit of that path
(``Mixer.single_nlerp_max_gap``, ``SEG_FAST_END``), and ``Player.update``'s direct call.

Expectations are independent: ``skeletal.sample`` / ``skeletal.bake`` (slerp) and the documented
blend of clips sampled alone. No timing here (the bench measures it)."""

from __future__ import annotations

import numpy as np
import pytest

import skeletal
from skeletal.demo import demo_asset
from skeletal.playback import Player
from skeletal.anim.clip import INTERP_CODE, PATH_CODE
from skeletal.playback.clipset import (SEG_END, SEG_FAST_END, SEG_FIRST, SEG_KIND, SEG_NLERP, SEG_SLERP, TK_INTERP,
                                       TK_PATH, ClipSet)
from skeletal.quat import slerp_into


@pytest.fixture(scope="module")
def asset():
    return demo_asset()


def alone(asset, clip, t):
    pose, _ = skeletal.sample(asset.clip(clip), [t], asset.rig.rest, asset.morph_start, asset.rest_morph,
                              loop="repeat")
    return pose[0]


def rotation_error(a, b):
    """Largest angle (rad) between the rotations of two (N, 10) poses, normalised first (acos near 1
    would turn a float32 key's 6e-8 norm defect into a 7e-4 rad 'error')."""
    qa = a[:, 3:7] / np.linalg.norm(a[:, 3:7], axis=1, keepdims=True)
    qb = b[:, 3:7] / np.linalg.norm(b[:, 3:7], axis=1, keepdims=True)
    dots = np.clip(np.abs(np.sum(qa * qb, axis=1)), 0.0, 1.0)
    return float(np.max(2.0 * np.arccos(dots)))


def test_slerp_keys_reproduce_slerp(asset):
    cs = ClipSet(asset.clips)
    tracks = cs.track_table
    checked = 0
    for k in range(cs.track_count):
        track_keys = slice(cs.key_start[k], cs.key_start[k + 1])
        table = cs.slerp_keys[track_keys]
        values = cs.values[cs.value_start[k] : cs.value_start[k + 1]].astype(np.float64)
        if tracks[k, TK_PATH] != PATH_CODE["rotation"] or tracks[k, TK_INTERP] != INTERP_CODE["LINEAR"]:
            assert not table.any()
            continue
        q = values.reshape(-1, 4)
        for i in range(len(q) - 1):
            theta, inv = table[i]
            if theta == 0.0:
                continue
            a, b = q[i], q[i + 1] * (1.0 if np.dot(q[i], q[i + 1]) >= 0 else -1.0)
            assert inv == pytest.approx(1.0 / np.sin(theta))
            for u in (0.0, 0.3, 0.99):
                out = np.zeros(4)
                slerp_into(out, 0, *a, *b, u)
                fast = (np.sin((1 - u) * theta) * a + np.sin(u * theta) * b) * inv
                np.testing.assert_allclose(fast, out, atol=1e-15)
                checked += 1
    assert checked > 0


def test_single_action_equals_bake_exactly(asset):
    player = Player(asset)
    player.play("walk")
    for _ in range(25):
        player.update(1 / 60)
    t = 25 / 60
    baked = skeletal.bake(asset, "walk", [t], loop="repeat")
    np.testing.assert_allclose(player.node_world, baked["node_world"][0], atol=1e-12)
    np.testing.assert_allclose(player.local_pose, alone(asset, "walk", t), atol=1e-12)
    skin = asset.skins[0]
    np.testing.assert_allclose(player.palettes[0], player.world[skin.joints] @ skin.inverse_bind, atol=1e-12)


def test_fast_end_marks_the_rotations_within_the_single_limit(asset):
    cs = ClipSet(asset.clips)
    limit = 10.0
    segments, _ = cs.segments(0.0, single_gap_degrees=limit)
    fast = cs.fast_rotations(limit)
    for row in segments:
        first, end, fast_end = row[SEG_FIRST], row[SEG_END], row[SEG_FAST_END]
        assert first <= fast_end <= end
        if row[SEG_KIND] in (SEG_NLERP, SEG_SLERP):
            assert fast[first:fast_end].all() and not fast[fast_end:end].any()
        else:
            assert fast_end == first
    # without a single limit the column follows the mixer's own: everything slerps at 0
    plain, _ = cs.segments(0.0)
    np.testing.assert_array_equal(plain[:, SEG_FAST_END], plain[:, SEG_FIRST])


def test_single_nlerp_is_opt_in_close_to_slerp_and_leaves_blends_exact(asset):
    exact, fast = Player(asset), Player(asset)
    fast.mixer.single_nlerp_max_gap = 15.0
    for p in (exact, fast):
        p.play("walk")
        for _ in range(20):
            p.update(1 / 60)
    error = rotation_error(exact.local_pose, fast.local_pose)
    assert error < 7.5e-5  # the crowd's proven bound for 15-degree keys
    # a crossfade blends through the exact path: both players agree with the documented blend again
    for p in (exact, fast):
        p.crossfade("run", duration=0.5)
        p.update(0.25)
    np.testing.assert_allclose(fast.local_pose, exact.local_pose, atol=1e-12)


def test_direct_update_keeps_time_events_and_layers(asset):
    player = Player(asset)
    player.play("walk")
    events = []
    player.on("loop", events.append)
    duration = asset.clip("walk").duration
    steps = int(np.ceil(duration / 0.05)) + 1
    for _ in range(steps):
        player.update(0.05)
    assert player.time == pytest.approx(steps * 0.05)
    assert [e.kind for e in events] == ["loop"]
    t = (steps * 0.05) % duration
    np.testing.assert_allclose(player.local_pose, alone(asset, "walk", t), atol=1e-9)
    # a layer over the single action: the general path takes over
    upper = player.add_layer("upper", mask="chest")
    player.play("wave", layer=upper)
    player.update(0.05)
    masked = asset.rig.descendants(asset.rig.find("chest"))
    assert rotation_error(player.local_pose[~masked], alone(asset, "walk", t + 0.05)[~masked]) < 1e-6
    assert not np.allclose(player.local_pose[masked], alone(asset, "walk", t + 0.05)[masked])


def _script(player, asset, events):
    """The same frames for two players: idle, one clip, a crossfade (the switch to blending) in a frame
    where a non-looping clip also ends (its event must not be lost), a layer, everything stopped."""
    player.on("finished", lambda e: events.append(("finished", e.clip)))
    player.on("loop", lambda e: events.append(("loop", e.clip)))
    clips = [c.name for c in asset.clips]
    other = next(c for c in clips if c != "walk")
    yield
    player.play("walk", loop="once")
    yield
    yield
    player.action("walk").time = asset.clip("walk").duration - 0.01  # ends within the next frame
    player.crossfade(other, 0.2)
    yield
    yield
    upper = player.add_layer("upper", mask="chest")
    player.play("walk", layer=upper)
    yield
    player.stop(fade=0.0)
    player.stop(layer=upper)
    yield


def test_single_action_kernel_switches_to_blending_without_a_lost_frame(asset):
    """A character starts on the update kernel compiled without blending (a cold first frame compiles
    less); the first frame that needs a blend runs the full kernel's blend on the same clocks and from
    then on the full kernel: every frame's pose, palettes and events equal a player's that had
    blending from the start, and idle frames (nothing playing) give the rest pose on either kernel."""
    from skeletal.playback import kernels as K

    lazy, full = Player(asset), Player(asset)
    full.mixer.__dict__["_blends"] = True
    events: dict = {"lazy": [], "full": []}
    kernels = []
    for _ in zip(_script(lazy, asset, events["lazy"]), _script(full, asset, events["full"])):
        lazy.update(0.05)
        full.update(0.05)
        kernels.append(lazy.mixer.__dict__.get("_blends", False))
        np.testing.assert_array_equal(lazy.local_pose, full.local_pose)
        for a, b in zip(lazy.palettes, full.palettes):
            np.testing.assert_array_equal(a, b)
    assert kernels == [False, False, False, True, True, True, True], "switched at the crossfade, not before"
    assert events["lazy"] == events["full"] and ("finished", "walk") in events["lazy"]
    np.testing.assert_array_equal(lazy.local_pose, asset.rig.rest)
    assert K.NEEDS_BLEND > 2 ** 31  # far above any event count


def _fast_script(player, asset):
    """Frames that change what Player.update's armed fast path depends on: a new slot, a snapshot
    crossfade, an IK stage, a clip added to the clip set, a seek, speed and weight written in place."""
    clips = [c.name for c in asset.clips]
    other = next(c for c in clips if c != "walk")
    player.play("walk")
    yield
    yield
    player.action("walk").speed = 1.5  # in place: the job stays
    yield
    player.crossfade(other, 0.1, snapshot=True)  # a fading snapshot: the general path until it ends
    for _ in range(4):
        yield
    player.mixer.clip_index(skeletal.Clip(name="walk again", tracks=list(asset.clip("walk").tracks)))  # added
    yield
    player.action(other).time = 0.25  # a seek
    yield
    chain = [asset.rig.names[i] for i in _leg_chain(asset)]
    handle = player.add_ik("leg", chain=chain, target=(0.1, 0.2, 0.3))
    yield
    handle.target = (0.2, 0.1, 0.3)  # in place
    yield
    player.play("walk", restart=True)
    for _ in range(int(asset.clip("walk").duration / 0.3) + 2):  # past a loop of walk
        yield


def _leg_chain(asset):
    """Three rig nodes, each the parent of the next (a two-bone chain)."""
    parents = asset.rig.parents
    for end in range(len(parents) - 1, -1, -1):
        mid = parents[end]
        if mid >= 0 and parents[mid] >= 0:
            return [int(parents[mid]), int(mid), int(end)]
    raise AssertionError("no three-node chain")


def _direct(player) -> bool:
    """Whether Player.update takes its direct route (the clock and one compiled call on the mixer's frame)."""
    mixer = player.mixer
    return mixer.frame is not None and not mixer.controllers and not mixer._snap_fading


def test_direct_route_equals_the_general_route(asset):
    """Player.update's direct route (the clock and one compiled call on ``mixer.frame``) gives every
    frame the pose, world rows, palettes, time and events of the mixer's general route, and is left
    whenever the frame is dropped (a clip added, a job input replaced) or a snapshot fades."""
    fast, general = Player(asset), Player(asset)
    events: dict = {"fast": [], "general": []}
    fast.on("*", lambda e: events["fast"].append(e))
    general.on("*", lambda e: events["general"].append(e))
    armed = []
    for _ in zip(_fast_script(fast, asset), _fast_script(general, asset)):
        for _ in range(3):
            armed.append(_direct(fast))
            fast.update(0.1)
            general.mixer.update(0.1)  # never the direct route
            assert fast.time == general.time
            np.testing.assert_array_equal(fast.local_pose, general.local_pose)
            np.testing.assert_array_equal(fast.world, general.world)
            for a, b in zip(fast.palettes, general.palettes):
                np.testing.assert_array_equal(a, b)
    assert events["fast"] == events["general"] and any(e.kind == "loop" for e in events["fast"])
    assert sum(armed) > len(armed) // 2 and not all(armed)
    # what drops it
    player = Player(asset)
    player.play("walk")
    player.update(0.01)
    player.update(0.01)
    assert _direct(player)
    player.crossfade("walk", 0.2, snapshot=True)
    assert not _direct(player)
    for _ in range(3):
        player.update(0.1)  # the fade ends
    player.update(0.01)
    assert _direct(player)
    player.mixer.clip_index(skeletal.Clip(name="extra", tracks=list(asset.clip("walk").tracks)))
    assert not _direct(player)
    player.update(0.01)  # the general route builds the frame again
    assert _direct(player)
    player.mixer.layer_weight = player.mixer.layer_weight.copy()  # a job input replaced: the frame goes
    assert not _direct(player)


def test_job_entry_point_rejects_what_is_not_a_job(asset):
    """The job unboxer (jobs._define_boxing) raises for an object without ``_meminfo`` instead of
    reading a null; a job still round-trips (built by a compiled constructor, passed back in)."""
    player = Player(asset)
    player.play("walk")
    player.update(0.01)
    frame = player.mixer.frame
    call = frame.call
    assert call(frame.job, frame.ik, 0.0, 0) == 0
    with pytest.raises(AttributeError):
        call(object(), frame.ik, 0.0, 0)
