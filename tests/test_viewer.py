"""The interactive viewer (``skeletal view``): its window-free state and layout, its pose source, its
command's errors, and real windows under Xvfb (skipped with the reason when Xvfb, glfw or moderngl
is missing).

The window tests start their own ``Xvfb`` (``-displayfd`` picks a free display number) and run the
command in a subprocess with DISPLAY set: a GL context made in this process would replace the one
the other render tests share.
"""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from skeletal.render.errors import RenderError
from skeletal.render.viewer_ui import (
    CROSSFADE_SECONDS, HELP_LINE, SPEEDS, STEP_SECONDS, ClipBlend, OrbitCamera, ViewerState, blend_local_poses,
    compute_layout, ellipsize, wrap_text,
)

CLIPS = ["idle", "walk", "run", "wave"]
DURATIONS = [4.0, 1.12, 0.68, 2.6]
JOINTS = ["hips", "spine", "chest", "head"]


def measure(text: str) -> float:
    """A monospace stand-in for the font: 7 px a character."""
    return 7.0 * len(text)


def make_state(**kw) -> ViewerState:
    state = ViewerState(CLIPS, DURATIONS, JOINTS, **kw)
    state.camera = OrbitCamera(yaw=30.0, pitch=12.0, distance=4.0, target=np.array([0.0, 0.9, 0.0]), radius=1.0)
    state.layout = compute_layout(800, 500, [state.clip_row_text(i) for i in range(4)], state.clip, measure, 18)
    return state


# -- state: keys -----------------------------------------------------------------------------------


def test_number_keys_and_arrows_choose_clips():
    state = make_state()
    state.crossfade = False
    assert state.clip == 0 and state.clip_name == "idle"
    assert state.key("3") and state.clip == 2 and state.time == 0.0
    assert not state.key("9") or state.clip == 2  # no ninth clip: nothing changes
    assert state.clip == 2
    state.key("down")
    assert state.clip == 3
    state.key("down")
    assert state.clip == 0  # wraps
    state.key("up")
    assert state.clip == 3
    assert state.key("0") is False and state.clip == 3


def test_speed_steps_and_bounds():
    state = make_state()
    assert state.speed == 1.0
    state.key("+")
    assert state.speed == 1.5
    for _ in range(20):
        state.key("+")
    assert state.speed == SPEEDS[-1]
    for _ in range(20):
        state.key("-")
    assert state.speed == SPEEDS[0]
    state.advance(1.0)
    assert state.time == pytest.approx(SPEEDS[0])


def test_play_pause_and_loop_modes():
    state = make_state(clip=1)  # walk, 1.12 s
    state.advance(0.5)
    assert state.local_time == pytest.approx(0.5)
    state.key("space")
    assert not state.playing
    state.advance(0.5)
    assert state.local_time == pytest.approx(0.5)
    state.key("space")
    state.advance(1.0)  # 1.5 s: repeat wraps to 0.38
    assert state.loop == "repeat" and state.local_time == pytest.approx(1.5 - 1.12)

    state.key("l")  # pingpong: the shown time does not jump, then it plays backwards after the end
    assert state.loop == "pingpong" and state.local_time == pytest.approx(0.38)
    state.advance(1.0)  # 1.38 -> reflected: 2 * 1.12 - 1.38
    assert state.local_time == pytest.approx(2 * 1.12 - 1.38)

    state.key("L")  # clamp (either case): stops at the end, space at the end starts again
    assert state.loop == "clamp"
    state.advance(5.0)
    assert state.local_time == pytest.approx(1.12)
    state.key("space")
    state.key("space")
    assert state.playing and state.time == 0.0
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
    assert ViewerState(CLIPS, DURATIONS).overlay_text("weights") == ("W  weights", "no skin")


def test_help_step_home_and_quit_keys():
    state = make_state(clip=1)
    state.key("h")
    assert state.show_help
    state.key("f1")
    assert not state.show_help
    state.key("right")
    assert not state.playing and state.time == pytest.approx(STEP_SECONDS)
    state.key("left")
    state.key("left")
    assert state.local_time == pytest.approx(1.12 - STEP_SECONDS)  # wraps backwards under repeat
    state.key("home")
    assert state.time == 0.0
    assert not state.quit
    state.key("escape")
    assert state.quit
    assert state.key("x") is False


# -- state: crossfade ------------------------------------------------------------------------------


def test_crossfade_between_clips():
    state = make_state(clip=1)
    state.advance(0.4)
    state.key("3")  # walk -> run while playing
    assert state.clip == 2 and state.time == 0.0
    assert state.fade is not None and state.fade.source == 1 and state.fade.duration == CROSSFADE_SECONDS
    assert state.fade_weight == 0.0 and state.fade_local_time == pytest.approx(0.4)
    state.advance(0.15)
    assert state.fade_weight == pytest.approx(0.5)
    assert state.fade_local_time == pytest.approx(0.55)  # the old clip keeps playing
    assert state.local_time == pytest.approx(0.15)
    assert "fading 50%" in state.status_text()
    state.advance(0.16)
    assert state.fade is None and state.fade_weight == 1.0

    state.key("4")  # run -> wave, then at 20% on to idle: the fade keeps run, the dominant clip
    state.advance(0.06)
    state.key("1")
    assert state.clip == 0 and state.fade.source == 2 and state.fade_weight == 0.0
    state.advance(0.2)  # now idle dominates: a new choice fades from it
    state.key("2")
    assert state.clip == 1 and state.fade.source == 0
    state.advance(1.0)

    state.key("c")  # cut
    assert not state.crossfade
    state.key("1")
    assert state.clip == 0 and state.fade is None


def test_crossfade_finishes_while_paused_and_seek_ends_it():
    state = make_state(clip=1)
    state.key("space")
    state.key("4")
    assert state.fade is not None
    state.advance(0.2)
    assert state.fade_weight == pytest.approx(0.2 / CROSSFADE_SECONDS) and state.time == 0.0
    state.seek(1.0)
    assert state.fade is None and state.time == 1.0
    state.key("1")
    state.advance(1.0)
    assert state.fade is None


# -- state: mouse ------------------------------------------------------------------------------------


def test_timeline_scrubbing():
    state = make_state(clip=3)  # wave, 2.6 s
    bar = state.layout.timeline
    y = bar.y + bar.h / 2
    state.key("2")  # a fade in progress ends when scrubbing
    state.mouse_down(bar.x + 0.25 * bar.w, y)
    assert state.dragging == "scrub" and state.fade is None
    assert state.local_time == pytest.approx(0.25 * 1.12)
    state.advance(0.5)  # the clock holds while the bar is held
    assert state.local_time == pytest.approx(0.25 * 1.12)
    state.mouse_move(bar.x + 0.75 * bar.w, y + 30)  # dragging away from the bar keeps scrubbing
    assert state.local_time == pytest.approx(0.75 * 1.12)
    state.mouse_move(bar.x + 2 * bar.w, y)  # clamped to the clip
    assert state.local_time == pytest.approx(1.12)
    state.mouse_up()
    assert state.dragging is None
    state.seek_fraction(0.5)
    state.advance(0.1)
    assert state.local_time == pytest.approx(0.66)


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


# -- pose source ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo():
    from skeletal.demo import demo_asset

    return demo_asset()


def test_clip_blend_matches_sampling_and_mixes_during_a_fade(demo):
    from skeletal.render.layout import pose_at

    names = [c.name for c in demo.clips]
    state = ViewerState(names, [c.duration for c in demo.clips], clip=names.index("walk"), time=0.3)
    blend = ClipBlend(demo)
    pose = blend.pose(state)
    world, morph = pose_at(demo, demo.clip("walk"), [0.3])
    assert np.allclose(pose.world, world[0]) and set(pose.timings) == {"sample", "world"}

    state.key(str(names.index("run") + 1))
    start = blend.pose(state)  # weight 0: still all walk
    assert np.allclose(start.world, world[0], atol=1e-6)  # only renormalised rotations differ
    state.advance(CROSSFADE_SECONDS / 2)
    mid = blend.pose(state)
    walk_now = pose_at(demo, demo.clip("walk"), [0.3 + CROSSFADE_SECONDS / 2])[0][0]
    run_now = pose_at(demo, demo.clip("run"), [CROSSFADE_SECONDS / 2])[0][0]
    assert not np.allclose(mid.world, walk_now, atol=1e-3) and not np.allclose(mid.world, run_now, atol=1e-3)
    hips = demo.rig.names.index("hips")
    expected_height = 0.5 * (walk_now[hips, 1, 3] + run_now[hips, 1, 3])  # the root does not move
    assert mid.world[hips, 1, 3] == pytest.approx(expected_height, abs=1e-9)
    rot = mid.world[:, :3, :3]
    assert np.allclose(np.einsum("nij,nkj->nik", rot, rot), np.eye(3), atol=1e-9)  # still rotations
    state.advance(CROSSFADE_SECONDS)
    end = blend.pose(state)
    assert np.allclose(end.world, pose_at(demo, demo.clip("run"), [state.local_time])[0][0])


def test_blend_local_poses_takes_the_short_arc():
    a = np.zeros((1, 10))
    a[0, 3:7] = [0.0, 0.0, np.sin(0.2), np.cos(0.2)]
    a[0, 7:10] = 1.0
    b = a.copy()
    b[0, 3:7] *= -1.0  # the same rotation
    b[0, 0] = 2.0
    out, morph = blend_local_poses(a, np.zeros(2), b, np.ones(2), 0.25)
    assert np.allclose(out[0, 3:7], a[0, 3:7]) and out[0, 0] == pytest.approx(0.5)
    assert np.allclose(morph, 0.25)


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
    code = ("import sys, skeletal.render.view_command, skeletal.render.viewer_ui; "
            "print(sorted(m for m in ('moderngl', 'glfw', 'PIL') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_no_display_is_one_line_error(monkeypatch, capsys):
    from skeletal.render.view_command import main, view

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
    from skeletal.render.view_command import main

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


# -- real windows under Xvfb ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def xdisplay():
    """A private Xvfb server (1024x768x24): its DISPLAY string; killed after the module."""
    xvfb = shutil.which("Xvfb")
    if xvfb is None:
        pytest.skip("Xvfb is not installed (apt-get install xvfb): the window tests need an X server")
    for module in ("glfw", "moderngl"):
        try:
            __import__(module)
        except Exception as exc:  # missing, or its shared library does not load
            pytest.skip(f"{module} is not usable ({exc}): pip install glfw moderngl")
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen([xvfb, "-displayfd", str(write_fd), "-screen", "0", "1024x768x24", "-nolisten", "tcp"],
                            pass_fds=(write_fd,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(write_fd)
    try:
        ready, _, _ = select.select([read_fd], [], [], 15.0)
        number = os.read(read_fd, 64).decode().strip() if ready else ""
        if not number.isdigit():
            pytest.skip("Xvfb did not start (no display number within 15 s)")
        yield f":{number}"
    finally:
        os.close(read_fd)
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def screenshot(display: str, path, *args: str) -> np.ndarray:
    """Run ``python -m skeletal.render.view_command`` on ``display`` and return its screenshot."""
    import imageio.v3 as iio

    env = {**os.environ, "DISPLAY": display}
    env.pop("WAYLAND_DISPLAY", None)
    cmd = [sys.executable, "-m", "skeletal.render.view_command", "--size", "640x400", "--frames", "2",
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
    blue = lambda img: ((img[..., 2] > 180) & (img[..., 0] < 120))[300:].sum()  # noqa: E731
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
