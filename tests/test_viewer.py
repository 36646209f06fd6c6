"""The interactive viewer (``skeletal view``): its window-free state (driving a real
:class:`skeletal.Player`: crossfades, blend space, clocks) and layout, its command's errors, and
real windows under Xvfb (skipped with the reason when Xvfb, glfw or moderngl is missing).

The window tests start their own ``Xvfb`` (tests/fixtures/xvfb.py) and run the
command in a subprocess with DISPLAY set: a GL context made in this process would replace the one
the other render tests share.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from skeletal import Player
from skeletal.playback.kernels import F_SAMPLE, F_SPEED
from skeletal.render.errors import RenderError
from skeletal.render.viewer_ui import (
    BLEND_PARAMETER, CROSSFADE_SECONDS, HELP_LINE, SPEEDS, STEP_SECONDS, OrbitCamera, ViewerState, compute_layout,
    default_blend_samples, ellipsize, parse_blend, slider_marks, wrap_text,
)

from fixtures import demo_asset

CLIPS = ["idle", "walk", "run", "wave"]  # the demo character's clips
DURATIONS = [4.0, 1.12, 0.68, 2.6]
JOINTS = ["hips", "spine", "chest", "head"]


def measure(text: str) -> float:
    """A monospace stand-in for the font: 7 px a character."""
    return 7.0 * len(text)


def test_the_demo_clips_are_the_ones_these_tests_expect(demo):
    assert [c.name for c in demo.clips] == CLIPS
    assert np.allclose([c.duration for c in demo.clips], DURATIONS)


def make_state(**kw) -> ViewerState:
    state = ViewerState(Player(demo_asset()), JOINTS, **kw)
    state.camera = OrbitCamera(yaw=30.0, pitch=12.0, distance=4.0, target=np.array([0.0, 0.9, 0.0]), radius=1.0)
    set_layout(state)
    return state


def set_layout(state: ViewerState) -> None:
    """The layout the window would use now (the slider row in blend mode)."""
    state.layout = compute_layout(800, 500, [state.clip_row_text(i) for i in range(state.clip_count)], state.clip,
                                  measure, 18, slider=state.blending)


def sample(state: ViewerState, clip: str, field: int) -> float:
    """A field (skeletal.playback.kernels.F_*) of the blend space's own action for ``clip``."""
    space = state.blend.space
    name_of = [state.player.mixer.clipset.clips[c].name for c in state.player.mixer.slot_clip[space.slots]]
    return float(state.player.mixer.fs[0, space.slots[name_of.index(clip)], field])


def running(state: ViewerState) -> dict[str, float]:
    """The Player's running plain actions (not a blend space's own): clip name -> effective weight."""
    return {a.clip.name: round(a.effective_weight, 9) for a in state.player.actions
            if a.slot == state.player.action(a.clip.name).slot}


def pose_jump(state: ViewerState, change) -> float:
    """How far any joint moves when ``change()`` runs (no time passes): 0 when the pose is continuous."""
    player = state.player
    player.update(0.0)
    before = player.world.copy()
    change()
    player.update(0.0)  # the outputs of the new state, at the same instant
    return float(np.abs(player.world - before).max())


# -- state: keys -----------------------------------------------------------------------------------


def test_number_keys_and_arrows_choose_clips():
    state = make_state()
    state.crossfade = False  # cuts: player.stop() + player.play(clip)
    assert state.clip == 0 and state.clip_name == "idle" and running(state) == {"idle": 1.0}
    assert state.key("3") and state.clip == 2 and state.local_time == 0.0
    assert running(state) == {"run": 1.0}
    assert state.key("9") is False and state.clip == 2  # no ninth clip: nothing changes
    state.key("down")
    assert state.clip == 3
    state.key("down")
    assert state.clip == 0  # wraps
    state.key("up")
    assert state.clip == 3 and running(state) == {"wave": 1.0}
    assert state.key("0") is False and state.clip == 3


def test_speed_steps_and_bounds():
    state = make_state()
    assert state.speed == 1.0
    state.key("+")
    assert state.speed == 1.5 and state.player.action("idle").speed == 1.5
    for _ in range(20):
        state.key("+")
    assert state.speed == SPEEDS[-1]
    for _ in range(20):
        state.key("-")
    assert state.speed == SPEEDS[0] and state.player.action("idle").speed == SPEEDS[0]
    state.advance(1.0)
    assert state.local_time == pytest.approx(SPEEDS[0])
    state.key("2")  # a new clip plays at the chosen speed
    assert state.player.action("walk").speed == SPEEDS[0]


def test_play_pause_and_loop_modes():
    state = make_state(clip=1)  # walk, 1.12 s
    action = state.player.action("walk")
    state.advance(0.5)
    assert state.local_time == pytest.approx(0.5)
    state.key("space")
    assert not state.playing and action.paused
    state.advance(0.5)
    assert state.local_time == pytest.approx(0.5)
    state.key("space")
    assert not action.paused
    state.advance(1.0)  # 1.5 s: repeat wraps to 0.38
    assert state.loop == "repeat" and state.local_time == pytest.approx(1.5 - 1.12)

    state.key("l")  # pingpong: the shown time does not jump, then it plays backwards after the end
    assert state.loop == action.loop == "pingpong" and state.local_time == pytest.approx(0.38)
    state.advance(1.0)  # 1.38 -> reflected: 2 * 1.12 - 1.38
    assert state.local_time == pytest.approx(2 * 1.12 - 1.38)

    state.key("L")  # clamp (either case): stops at the end, space at the end starts again
    assert state.loop == action.loop == "clamp"
    assert state.local_time == pytest.approx(2 * 1.12 - 1.38)
    state.advance(5.0)
    assert state.local_time == pytest.approx(1.12) and action.finished
    state.key("space")
    state.key("space")
    assert state.playing and state.local_time == 0.0 and not action.finished
    state.key("l")
    assert state.loop == "repeat"


def test_overlay_keys():
    state = make_state(default_joint=2)
    assert not state.skeleton and not state.weights and state.heat_joint is None
    state.key("s")
    assert state.skeleton
    state.key("S")
    assert not state.skeleton
    state.key("w")
    assert state.weights and state.heat_joint == 2 and state.joint_name == "chest"
    state.key("]")
    assert state.joint_name == "head"
    state.key("]")
    assert state.joint_name == "hips"  # wraps
    state.key("[")
    assert state.joint_name == "head"
    state.key("w")
    assert state.heat_joint is None
    state.key("[")  # cycling shows the heat-map again
    assert state.heat_joint == 2
    assert state.overlay_text("weights") == ("W  weights", "chest 3/4")
    assert state.overlay_text("skeleton") == ("S  skeleton", "off")
    state.key("w")
    assert state.overlay_text("weights")[1] == "off"
    # The overlay rows under the clip list toggle them too.
    (_, skeleton_row), (_, weights_row) = state.layout.overlay_rows
    assert skeleton_row.y >= state.layout.clip_rows[-1][1].bottom
    state.mouse_down(skeleton_row.x + 5, skeleton_row.y + 5)
    state.mouse_up()
    state.mouse_down(weights_row.x + 5, weights_row.y + 5)
    state.mouse_up()
    assert state.skeleton and state.heat_joint == 2 and state.dragging is None
    assert ViewerState(Player(demo_asset())).overlay_text("weights") == ("W  weights", "no skin")


def test_help_step_home_and_quit_keys():
    state = make_state(clip=1)
    state.key("h")
    assert state.show_help
    state.key("f1")
    assert not state.show_help
    state.key("right")
    assert not state.playing and state.player.action("walk").paused
    assert state.local_time == pytest.approx(STEP_SECONDS)
    state.key("left")
    state.key("left")
    assert state.local_time == pytest.approx(1.12 - STEP_SECONDS)  # wraps backwards under repeat
    state.advance(0.5)  # paused: the clock holds
    assert state.local_time == pytest.approx(1.12 - STEP_SECONDS)
    state.key("home")
    assert state.local_time == 0.0
    assert not state.quit
    state.key("escape")
    assert state.quit
    assert state.key("x") is False


# -- state: crossfade ------------------------------------------------------------------------------


def test_crossfade_between_clips():
    state = make_state(clip=1)
    walk = state.player.action("walk")
    state.advance(0.4)
    state.key("3")  # walk -> run while playing: player.crossfade
    assert state.clip == 2 and state.local_time == 0.0
    assert running(state) == {"walk": 1.0, "run": 0.0} and state.fade_weight == 0.0
    state.advance(CROSSFADE_SECONDS / 2)
    assert running(state) == pytest.approx({"walk": 0.5, "run": 0.5})
    assert state.fade_weight == pytest.approx(0.5) and "fading 50%" in state.status_text()
    assert walk.time == pytest.approx(0.55)  # the old clip keeps playing while it fades out
    assert state.local_time == pytest.approx(0.15)
    state.advance(0.16)
    assert running(state) == {"run": 1.0} and state.fade_weight == 1.0 and "crossfade on" in state.status_text()

    state.key("c")  # cut
    assert not state.crossfade
    state.key("1")
    assert state.clip == 0 and running(state) == {"idle": 1.0} and state.fade_weight == 1.0


def test_a_third_clip_chosen_mid_fade_blends_from_the_current_mix():
    state = make_state(clip=2)  # run
    state.advance(0.5)
    state.key("4")  # run -> wave ...
    state.advance(0.2 * CROSSFADE_SECONDS)
    assert running(state) == pytest.approx({"run": 0.8, "wave": 0.2})
    mix = state.player.world.copy()
    # ... and at 20 % on to idle: no clip drops out, the pose does not move at the switch.
    assert pose_jump(state, lambda: state.key("1")) < 1e-9
    assert state.clip == 0 and running(state) == pytest.approx({"run": 0.8, "wave": 0.2, "idle": 0.0})
    state.advance(CROSSFADE_SECONDS / 2)  # three clips in the pose, every weight moving linearly
    assert running(state) == pytest.approx({"run": 0.4, "wave": 0.1, "idle": 0.5})
    assert state.fade_weight == pytest.approx(0.5)
    assert not np.allclose(state.player.world, mix, atol=1e-3)
    state.advance(CROSSFADE_SECONDS / 2 + 0.01)
    assert running(state) == {"idle": 1.0}

    # Back to a clip that is still fading out: it fades in again from where it is, its clock running on.
    state.key("4")
    state.advance(0.1)
    wave_time = state.player.action("wave").time
    assert pose_jump(state, lambda: state.key("1")) < 1e-9
    assert state.player.action("idle").time > 0.0  # idle was fading out: not restarted
    assert state.player.action("wave").time == pytest.approx(wave_time)


def test_crossfade_finishes_while_paused_and_seek_ends_it():
    state = make_state(clip=1)
    state.key("space")
    state.key("4")
    assert state.fade_weight == 0.0 and all(a.paused for a in state.player.actions)
    state.advance(0.2)
    assert state.fade_weight == pytest.approx(0.2 / CROSSFADE_SECONDS) and state.local_time == 0.0
    state.seek(1.0)
    assert state.fade_weight == 1.0 and running(state) == {"wave": 1.0} and state.local_time == pytest.approx(1.0)
    assert not state.playing and state.player.action("wave").paused
    state.key("1")
    state.advance(1.0)
    assert state.fade_weight == 1.0 and running(state) == {"idle": 1.0} and state.local_time == 0.0


# -- state: blend mode -----------------------------------------------------------------------------


def test_blend_samples_from_the_command_line_and_by_default():
    assert parse_blend("idle:0, walk:1.4,run:4") == [("idle", 0.0), ("walk", 1.4), ("run", 4.0)]
    assert parse_blend("mixamo:Walk:1,Run:-2") == [("mixamo:Walk", 1.0), ("Run", -2.0)]
    for bad, message in [("idle", "CLIP:POSITION"), ("idle:x,walk:1", "CLIP:POSITION"), (":1,walk:2", "CLIP:POSITION"),
                         ("idle:0", "at least two"), ("idle:0,idle:1", "twice"), ("idle:1,walk:1", "same position")]:
        with pytest.raises(ValueError, match=message):
            parse_blend(bad)
    assert default_blend_samples(CLIPS) == [(0, 0.0), (1, 1.0), (2, 2.0)]
    assert default_blend_samples(["Idle", "TPose", "Run", "Walk"]) == [(0, 0.0), (3, 1.0), (2, 2.0)]
    assert default_blend_samples(["mixamo.com|walk", "Armature:RUN", "jump"]) == [(0, 1.0), (1, 2.0)]
    assert default_blend_samples(["a", "b", "c", "d"]) == [(0, 0.0), (1, 1.0), (2, 2.0)]
    assert default_blend_samples(["a", "b"]) == [(0, 0.0), (1, 1.0)]
    assert default_blend_samples(["a"]) == []


def test_blend_mode_slider_drives_the_parameter_and_the_rows_show_the_weights():
    state = make_state(clip=1)  # walk
    state.advance(0.3)
    assert state.key(",") is False and state.key(".") is False  # no slider outside blend mode
    # B: the blend space over idle/walk/run at 0, 1, 2, the slider at walk: walk plays on at weight 1.
    assert pose_jump(state, lambda: state.key("b")) < 1e-9
    blend = state.blend
    assert state.blending and blend.clips == [0, 1, 2] and blend.positions == [0.0, 1.0, 2.0] and blend.value == 1.0
    assert state.player.action("walk").time == pytest.approx(0.3)  # its clock kept: the cycle's phase
    set_layout(state)
    lay = state.layout
    track, hit = lay.slider, lay.slider_hit
    assert track is not None and lay.bottom_panel.contains(track.x, track.y) and track.bottom < lay.timeline.y
    assert hit.bottom <= lay.timeline_hit.y and hit.contains(track.x + 1, lay.slider_names_y + 1)
    state.advance(CROSSFADE_SECONDS)

    # Dragging the slider sets the parameter (player.set) and the weights follow.
    state.mouse_down(track.x + 0.75 * track.w, track.y + 1)
    assert state.dragging == "slider" and blend.value == pytest.approx(1.5)
    assert blend.space.value[0] == pytest.approx(1.5)
    state.mouse_move(track.x + 0.25 * track.w, track.y + 60)  # off the track: still dragging
    state.mouse_move(track.x + 0.25 * track.w, track.y + 60)
    assert blend.value == pytest.approx(0.5)
    state.mouse_up()
    state.advance(1 / 30)
    assert state.clip_weights() == pytest.approx([0.5, 0.5, 0.0, 0.0])
    assert [state.clip_row_value(i) for i in range(4)] == ["w 0.50", "w 0.50", "w 0.00", "2.60 s"]
    assert "blend 0.50" in state.status_text() and state.slider_text() == f"{BLEND_PARAMETER}  0.50"
    assert state.duration == pytest.approx(0.5 * 4.0 + 0.5 * 1.12)  # the blended cycle
    assert state.describe_playback() == "blend 0.50 (idle 0.50, walk 0.50)"

    # , and . nudge it by a twentieth of the range, within the range.
    assert state.key(".") and blend.value == pytest.approx(0.6)
    for _ in range(30):
        state.key(",")
    state.advance(1 / 30)
    state.advance(CROSSFADE_SECONDS)  # the walk the blend space replaced has faded out
    assert blend.value == 0.0 and state.clip_weights() == pytest.approx([1.0, 0.0, 0.0, 0.0])
    idle_pose = state.player.world.copy()
    state.set_blend_value(2.0)
    state.advance(1 / 30)
    assert state.clip_weights() == pytest.approx([0.0, 0.0, 1.0, 0.0])
    assert np.abs(state.player.world - idle_pose).max() > 0.05  # the pose follows the parameter

    # The speed scales the samples' synchronised speeds.
    state.key("+")
    state.advance(1 / 30)
    assert sample(state, "run", F_SPEED) == pytest.approx(1.5)

    # The ticks and names of the samples over the track.
    marks = slider_marks(track, blend.positions, ["idle", "walk", "run"], blend.lo, blend.hi, measure)
    assert [m[0] for m in marks] == pytest.approx([track.x, track.x + track.w / 2, track.right])
    assert [m[2] for m in marks] == ["idle", "walk", "run"]
    assert all(track.x <= m[1] and m[1] + measure(m[2]) <= track.right for m in marks)
    crowded = slider_marks(track, [0.0, 0.01, 2.0], ["idle", "walk", "run"], 0.0, 2.0, measure)
    assert crowded[1][2] in ("", "w...") or crowded[1][1] >= crowded[0][1] + measure("idle")


def test_leaving_blend_mode_crossfades_to_the_clip_without_a_jump():
    state = make_state(clip=3, blend=[("idle", 0.0), ("walk", 1.4), ("run", 4.0)], blend_value=2.0, blend_mode=True)
    assert state.blending and state.clip_weights() == pytest.approx([0.0, 2.0 / 2.6, 0.6 / 2.6, 0.0])
    state.advance(0.5)
    # walk, the strongest sample (0.77), hands its phase over: the plain walk starts where it is.
    walk_time = sample(state, "walk", F_SAMPLE)
    assert pose_jump(state, lambda: state.key("2")) < 1e-9
    assert not state.blending and state.clip == 1 and state.fade_weight == 0.0
    assert state.player.action("walk").time == pytest.approx(walk_time)
    state.advance(CROSSFADE_SECONDS / 2)
    assert state.fade_weight == pytest.approx(0.5) and running(state) == pytest.approx({"walk": 0.5})
    state.advance(CROSSFADE_SECONDS / 2 + 0.01)
    assert running(state) == {"walk": 1.0} and state.player.action("walk").speed == 1.0

    # B enters at walk's position; B again leaves for the sample that weighs most.
    state.key("b")
    assert state.blending and state.blend.value == 1.4
    state.set_blend_value(3.5)
    state.advance(0.4)
    assert pose_jump(state, lambda: state.key("b")) < 1e-9
    assert not state.blending and state.clip == 2  # run
    # A clip that is no sample: a plain crossfade, the samples fade out as they are.
    state.key("b")
    state.advance(0.4)
    assert pose_jump(state, lambda: state.key("4")) < 1e-9
    state.advance(CROSSFADE_SECONDS / 2)
    assert running(state)["wave"] == pytest.approx(0.5) and "fading 50%" in state.status_text()


def test_entering_blend_mode_mid_fade_does_not_jump():
    state = make_state(clip=0)  # idle
    state.advance(0.5)
    state.key("2")  # idle -> walk ...
    state.advance(0.1)
    # ... and B at a third of the fade: idle, a sample, would lose its weight at once; the pose
    # is frozen and the blend space fades in under it.
    assert pose_jump(state, lambda: state.key("b")) < 1e-9
    assert state.blending and state.blend.value == 1.0 and state.fade_weight == 0.0
    state.advance(CROSSFADE_SECONDS + 0.01)
    assert state.clip_weights() == pytest.approx([0.0, 1.0, 0.0, 0.0]) and state.fade_weight == 1.0
    assert state.player.mixer.snap_weight[0] == 0.0


def test_blend_mode_needs_two_clips_and_cuts_without_crossfade():
    import test_render

    asset = test_render.tube_asset()  # one clip
    state = ViewerState(Player(asset))
    assert state.key("b") and not state.blending and "2 or more clips" in state.status_text()
    with pytest.raises(ValueError, match="two clips"):
        ViewerState(Player(asset), blend_mode=True)

    state = make_state(clip=3)
    state.key("c")
    state.key("b")  # a cut: the samples only, at once
    assert state.blending and {a.clip.name for a in state.player.actions} == {"idle", "walk", "run"}
    assert state.fade_weight == 1.0
    assert state.blend.value == 0.0  # wave is no sample: the first sample's position
    state.key("space")
    state.key("down")  # leaving by a cut, paused
    assert running(state) == {"idle": 1.0} and state.player.action("idle").paused


# -- state: mouse ------------------------------------------------------------------------------------


def test_timeline_scrubbing():
    state = make_state(clip=3)  # wave, 2.6 s
    bar = state.layout.timeline
    y = bar.y + bar.h / 2
    state.key("2")  # a fade in progress ends when scrubbing
    state.mouse_down(bar.x + 0.25 * bar.w, y)
    assert state.dragging == "scrub" and state.fade_weight == 1.0 and running(state) == {"walk": 1.0}
    assert state.local_time == pytest.approx(0.25 * 1.12)
    state.advance(0.5)  # the clock holds while the bar is held
    assert state.local_time == pytest.approx(0.25 * 1.12)
    state.mouse_move(bar.x + 0.75 * bar.w, y + 30)  # dragging away from the bar keeps scrubbing
    assert state.local_time == pytest.approx(0.75 * 1.12)
    state.mouse_move(bar.x + 2 * bar.w, y)  # clamped to the clip: its last pose
    assert state.local_time == pytest.approx(1.12)
    state.mouse_up()
    assert state.dragging is None
    state.seek_fraction(0.5)
    state.advance(0.1)
    assert state.local_time == pytest.approx(0.66)

    state.key("b")  # in blend mode the timeline is the blended cycle
    state.advance(1.0)
    set_layout(state)
    bar = state.layout.timeline
    state.mouse_down(bar.x + 0.5 * bar.w, bar.y + 1)
    assert state.local_time == pytest.approx(0.5 * state.duration)
    assert sample(state, "run", F_SAMPLE) == pytest.approx(0.5 * 0.68)  # every sample at the same phase
    state.mouse_up()
def test_clip_rows_are_clickable_and_drags_move_the_camera():
    state = make_state()
    state.crossfade = False
    index, row = state.layout.clip_rows[2]
    state.mouse_down(row.x + 5, row.y + row.h / 2)
    state.mouse_up()
    assert index == 2 and state.clip == 2

    cam = state.camera
    yaw, pitch, distance, target = cam.yaw, cam.pitch, cam.distance, cam.target.copy()
    state.mouse_down(400, 200)
    assert state.dragging == "orbit"
    state.mouse_move(440, 220)
    state.mouse_up()
    assert cam.yaw == pytest.approx(yaw - 40 * OrbitCamera.ORBIT_DEG_PER_PIXEL)
    assert cam.pitch == pytest.approx(pitch + 20 * OrbitCamera.ORBIT_DEG_PER_PIXEL)
    state.mouse_down(400, 200, "right")
    assert state.dragging == "pan"
    state.mouse_move(450, 200)
    state.mouse_up("right")
    assert not np.allclose(cam.target, target) and cam.target[1] == pytest.approx(target[1])
    state.mouse_down(400, 200, "left", shift=True)
    assert state.dragging == "pan"
    state.mouse_up()
    state.scroll(2)
    assert cam.distance == pytest.approx(distance * OrbitCamera.ZOOM_STEP ** 2)
    state.scroll(-100)
    assert cam.distance == pytest.approx(50 * cam.radius)
    for _ in range(10):
        state.mouse_down(400, 200)
        state.mouse_move(400, 500)
        state.mouse_up()
    assert cam.pitch == OrbitCamera.MAX_PITCH
    state.key("r")
    assert (cam.yaw, cam.pitch, cam.distance) == (yaw, pitch, distance) and np.allclose(cam.target, target)


def test_orbit_camera_reproduces_a_framed_camera():
    from skeletal.render.camera import frame

    framed = frame("yaw=40,pitch=20", np.array([-0.3, 0.0, -0.2]), np.array([0.3, 1.8, 0.2]), 1.6)
    orbit = OrbitCamera.from_camera(framed, 1.0)
    again = orbit.camera(1.6)
    assert np.allclose(again.eye, framed.eye) and np.allclose(again.target, framed.target)
    assert np.allclose(again.view, framed.view) and again.fov == framed.fov
    narrow = orbit.camera(0.8)  # half the framed aspect: the same horizontal field of view
    assert np.tan(np.radians(narrow.fov) / 2) * 0.8 == pytest.approx(np.tan(np.radians(framed.fov) / 2) * 1.6)


# -- layout ------------------------------------------------------------------------------------------


def test_layout_fits_the_window():
    state = make_state()
    lay = state.layout
    assert lay.timeline.bottom <= lay.help_y and lay.bottom_panel.bottom == 500
    assert lay.status_y >= lay.bottom_panel.y
    assert all(measure(line) <= 800 for line in lay.help_lines)
    assert " ".join(" ".join(lay.help_lines).split()) == " ".join(HELP_LINE.split())
    assert [i for i, _ in lay.clip_rows] == [0, 1, 2, 3]
    assert all(row.bottom <= lay.bottom_panel.y for _, row in lay.clip_rows)
    assert lay.clip_panel.bottom <= lay.bottom_panel.y and lay.overlay_rows[-1][1].bottom <= lay.clip_panel.bottom
    assert lay.clip_at(5000, 5000) is None and lay.overlay_at(5000, 5000) is None

    names = [f"clip{i:02d}" for i in range(40)]  # more clips than fit: the rows follow the current one
    small = compute_layout(640, 360, names, 30, measure, 18)
    shown = [i for i, _ in small.clip_rows]
    assert 30 in shown and len(shown) < 40 and shown == list(range(shown[0], shown[0] + len(shown)))
    assert all(row.bottom <= small.bottom_panel.y for _, row in small.clip_rows)
    assert small.clip_panel.bottom <= small.bottom_panel.y


def test_text_helpers():
    assert wrap_text("a: 1   b: 2   c: 3", 7 * 12, measure) == ["a: 1   b: 2", "c: 3"]
    assert ellipsize("short", 100, measure) == "short"
    cut = ellipsize("Armature|Take 001|BaseLayer", 70, measure)
    assert cut.endswith("...") and measure(cut) <= 70


def test_layout_makes_room_for_the_slider():
    labels = [f"{i + 1}  {name}    4.00 s" for i, name in enumerate(CLIPS)]
    plain = compute_layout(800, 500, labels, 0, measure, 18)
    lay = compute_layout(800, 500, labels, 0, measure, 18, slider=True)
    assert plain.slider is None and plain.slider_hit is None
    assert lay.bottom_panel.h > plain.bottom_panel.h and lay.bottom_panel.bottom == 500
    assert lay.status_y + 18 <= lay.slider_names_y < lay.slider.y < lay.timeline.y < lay.help_y
    assert lay.slider_label.right < lay.slider.x and lay.slider.right <= 800
    assert lay.slider_hit.bottom <= lay.timeline_hit.y  # the two grab areas do not overlap
    assert all(row.bottom <= lay.bottom_panel.y for _, row in lay.clip_rows)


# -- the Player is the pose source -------------------------------------------------------------------


def test_the_player_poses_the_clip_at_the_time_shown(demo):
    from skeletal.render.layout import pose_at

    state = ViewerState(Player(demo), clip=1, time=0.3)
    world, morph = pose_at(demo, demo.clip("walk"), [0.3])
    assert np.allclose(state.player.world, world[0]) and np.allclose(state.player.morph_weights, morph[0])
    state.advance(0.2)
    assert np.allclose(state.player.world, pose_at(demo, demo.clip("walk"), [0.5])[0][0])
    assert state.timings["update"] > 0.0
    late = ViewerState(Player(demo), clip=1, time=1.5)  # past the end: wrapped like the loop mode
    assert late.local_time == pytest.approx(1.5 - 1.12)
    rest = ViewerState(Player(demo), clip=1, loop="clamp", time=9.0)
    assert rest.local_time == pytest.approx(1.12)


@pytest.mark.parametrize("kind", ["scalable", "bitmap"])
def test_font_atlas(kind):
    pytest.importorskip("moderngl", reason="the viewer module imports moderngl")
    from PIL import ImageFont

    from skeletal.render.viewer import FontAtlas

    font = ImageFont.load_default_imagefont() if kind == "bitmap" else None
    atlas = FontAtlas.build(14, font)
    quads, uv, width = atlas.shape("Hg 1.5")
    assert len(quads) in (5, 6) and width == pytest.approx(atlas.measure("Hg 1.5")) and width > atlas.measure("Hg")
    assert np.all(quads[:, 2:] > 0) and np.all((uv >= 0) & (uv <= 1))
    assert 10 <= atlas.line_height <= 24
    # Every glyph lies within its line: from the top of the line (y = -ascent) to its bottom.
    visible = atlas.chars.replace(" ", "")
    all_quads, all_uv, _ = atlas.shape(visible)
    tops, bottoms = all_quads[:, 1], all_quads[:, 1] + all_quads[:, 3]
    assert tops.min() >= -atlas.ascent - 2 and bottoms.max() <= atlas.descent + 2
    assert len(all_uv) == len(visible)
    for u0, v0, u1, v1 in all_uv:  # each glyph's texels hold ink
        x0, y0 = int(u0 * atlas.image.shape[1]), int(v0 * atlas.image.shape[0])
        x1, y1 = int(round(u1 * atlas.image.shape[1])), int(round(v1 * atlas.image.shape[0]))
        assert atlas.image[y0:y1, x0:x1].max() > 0
    assert atlas.glyphs("\u20ac").tolist() == [atlas.index["?"]]  # unknown characters show as ?


# -- the command -----------------------------------------------------------------------------------------


def test_importing_the_command_imports_no_gl():
    code = ("import sys, skeletal.cli.view, skeletal.render.viewer_ui; "
            "print(sorted(m for m in ('moderngl', 'glfw', 'PIL') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_no_display_is_one_line_error(monkeypatch, capsys):
    from skeletal.cli.view import main, view

    result = CliRunner().invoke(view, ["--frames", "1"], env={"DISPLAY": None, "WAYLAND_DISPLAY": None})
    if sys.platform.startswith("linux"):
        assert isinstance(result.exception, RenderError)
        assert str(result.exception) == "no display: set DISPLAY or run under xvfb-run"
        monkeypatch.delenv("DISPLAY", raising=False)
        monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
        assert main(["--frames", "1"]) == 2
        err = capsys.readouterr().err
        assert err == "skeletal: error: no display: set DISPLAY or run under xvfb-run\n"


def test_bad_options_fail_before_any_window(monkeypatch, capsys, tmp_path):
    from skeletal.cli.view import main

    pytest.importorskip("moderngl", reason="the viewer module imports moderngl")
    monkeypatch.setenv("DISPLAY", ":9999")  # never opened: every error below comes first
    assert main(["--clip", "nope", "--frames", "1"]) == 2
    assert "no clip named 'nope'" in capsys.readouterr().err
    assert main(["--screenshot", str(tmp_path / "shot.jpg")]) == 2
    assert "must end in .png" in capsys.readouterr().err
    assert main(["--size", "big"]) == 2
    assert "WIDTHxHEIGHT" in capsys.readouterr().err
    assert main(["--weights", "no_such_joint"]) == 2
    assert "no joint named 'no_such_joint'" in capsys.readouterr().err
    assert main(["--weights", "body"]) == 2  # the mesh node: no skin joint
    assert "not a joint of any skin" in capsys.readouterr().err
    assert main(["--speed", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "speed must be positive" in err


def test_blend_options_fail_before_any_window(monkeypatch, capsys):
    from skeletal.cli.view import main

    pytest.importorskip("moderngl", reason="the viewer module imports moderngl")
    monkeypatch.setenv("DISPLAY", ":9999")  # never opened: every error below comes first
    for args, message in [(["--blend", "idle:0"], "at least two"),
                          (["--blend", "idle:0,dance:1"], "no clip named 'dance'"),
                          (["--blend", "idle:0,walk"], "CLIP:POSITION"), (["--blend", "idle:0,0:1"], "one clip twice"),
                          (["--blend-value", "nan"], "must be a number")]:
        assert main(args + ["--frames", "1"]) == 2, args
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, (args, err)


# -- real windows under Xvfb ------------------------------------------------------------------------------


def screenshot(display: str, path, *args: str) -> np.ndarray:
    """Run ``python -m skeletal.cli.view`` on ``display`` and return its screenshot."""
    import imageio.v3 as iio

    env = {**os.environ, "DISPLAY": display}
    env.pop("WAYLAND_DISPLAY", None)
    cmd = [sys.executable, "-m", "skeletal.cli.view", "--size", "640x400", "--frames", "2",
           "--screenshot", str(path), *args]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"wrote {path}" in done.stdout
    return iio.imread(path)


def character_mask(image: np.ndarray, box) -> np.ndarray:
    """Pixels in ``box`` (y0, y1, x0, x1) far from their row's median colour (the background and floor)."""
    y0, y1, x0, x1 = box
    rows = image[y0:y1].astype(np.int32)
    median = np.median(rows, axis=1, keepdims=True)
    return np.abs(rows - median).max(axis=2)[:, x0:x1] > 40


def test_window_shows_the_character_and_the_ui(xdisplay, tmp_path):
    first = screenshot(xdisplay, tmp_path / "a.png", "--clip", "walk", "--time", "0")
    later = screenshot(xdisplay, tmp_path / "b.png", "--clip", "walk", "--time", "0.5")
    assert first.shape == later.shape == (400, 640, 3)
    box = (200, 290, 256, 384)  # the middle of the 3D view below the top panels: the legs
    mask = character_mask(first, box)
    assert mask.mean() > 0.05, f"only {mask.mean():.1%} of the centre differs from the background"
    edges = character_mask(first, (200, 290, 0, 96))  # floor only (its grid lines count a little)
    assert edges.mean() < 0.1 and mask.mean() > 3 * edges.mean()
    y0, y1, x0, x1 = box
    moved = np.abs(first[y0:y1, x0:x1].astype(int) - later[y0:y1, x0:x1].astype(int)).max(axis=2) > 40
    assert moved.mean() > 0.01, "the walk looks the same at 0.0 s and 0.5 s"

    # The bottom panel: dark and opaque, with lighter text (status line and help line) on it.
    panel = first[-40:].astype(int)
    assert np.median(panel) < 60
    assert (panel.min(axis=2) > 150).mean() > 0.005
    # The timeline's filled part (accent blue) grows with time.
    blue = lambda img: ((img[..., 2] > 180) & (img[..., 0] < 120))[300:].sum()
    assert blue(later) > blue(first)


def test_window_overlays(xdisplay, tmp_path):
    image = screenshot(xdisplay, tmp_path / "heat.png", "--clip", "run", "--skeleton", "--weights", "chest",
                       "--loop", "pingpong", "--camera", "yaw=0")
    y0, y1, x0, x1 = 40, 280, 200, 440
    region = image[y0:y1, x0:x1].astype(int)
    cold = (region[..., 2] > 170) & (region[..., 0] < 80) & (region[..., 1] < 80)  # heat 0: blue
    hot = (region[..., 0] > 170) & (region[..., 1] < 90) & (region[..., 2] < 90)  # heat 1: red
    bones = (region[..., 0] > 200) & (region[..., 1] > 150) & (region[..., 2] < 80)  # skeleton: yellow
    assert cold.mean() > 0.02 and hot.sum() > 20 and bones.sum() > 30


def test_window_blend_slider(xdisplay, tmp_path):
    """Blend mode from the command line at two parameter values: the pose, the slider's knob and
    the clip list's weight bars differ."""
    samples = "idle:0,walk:1.4,run:4"
    low = screenshot(xdisplay, tmp_path / "low.png", "--blend", samples, "--blend-value", "0")
    high = screenshot(xdisplay, tmp_path / "high.png", "--blend", samples, "--blend-value", "3")
    assert low.shape == high.shape == (400, 640, 3)
    box = (150, 220, 256, 384)  # the character's legs, above the (taller) bottom panel
    assert character_mask(low, box).mean() > 0.05 and character_mask(high, box).mean() > 0.05
    y0, y1, x0, x1 = box
    moved = np.abs(low[y0:y1, x0:x1].astype(int) - high[y0:y1, x0:x1].astype(int)).max(axis=2) > 40
    assert moved.mean() > 0.02, "idle and a walk/run blend look the same"

    def knob_x(image):  # the slider's knob: the only warm yellow right of the value label
        part = image[230:, 110:].astype(int)
        warm = (part[..., 0] > 200) & (part[..., 1] > 150) & (part[..., 2] < 110)
        cols = np.flatnonzero(warm.sum(axis=0) >= 5)
        assert len(cols), "no slider knob"
        return 110 + cols.mean()

    # 0 is the left end of the track, 3 sits at 3/4 of it
    assert knob_x(high) - knob_x(low) > 0.6 * 640 * 0.75 - 40

    def weight_rows(image):  # mean y of the blue weight bars behind the clip rows (top-left panel)
        part = image[20:130, 12:120].astype(int)
        bar = (part[..., 2] > 120) & (part[..., 2] > part[..., 0] + 50)
        ys, _ = np.nonzero(bar)
        assert len(ys) > 50, "no weight bars in the clip list"
        return ys.mean()

    assert weight_rows(high) > weight_rows(low) + 10  # idle's row (first) at 0; walk and run's lower at 3
