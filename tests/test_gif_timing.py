"""GIF frame delays (issue 21, item 6): whole hundredths of a second that average to the frame rate,
never below 2 (browsers slow shorter delays down to 10); higher rates drop frames and say so."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from skeletal.render.output import _GifWriter, gif_delays, gif_frame_step

PIL = pytest.importorskip("PIL.Image", reason="pillow is not installed (pip install 'skeletal[render]')")
pytest.importorskip("imageio", reason="imageio is not installed (pip install 'skeletal[render]')")


def read_delays_ms(path) -> list[int]:
    """Each frame's duration as stored in the GIF (milliseconds, multiples of 10)."""
    out = []
    with PIL.open(path) as image:
        for index in range(image.n_frames):
            image.seek(index)
            out.append(int(image.info["duration"]))
    return out


def distinct_frames(count: int) -> list[np.ndarray]:
    frames = []
    for i in range(count):
        frame = np.zeros((8, 16, 3), np.uint8)
        frame[:, i % 16] = 255  # each frame differs from the one before (Pillow merges equal ones)
        frame[0, 0] = i
        frames.append(frame)
    return frames


@pytest.mark.parametrize("fps, count", [(30.0, 30), (25.0, 25), (24.0, 48), (50.0, 50), (12.5, 10), (29.97, 60)])
def test_written_delays_average_the_rate(tmp_path, fps, count):
    path = str(tmp_path / "t.gif")
    writer = _GifWriter(path, fps, False)
    for frame in distinct_frames(count):
        writer.append(frame)
    writer.close()
    delays = read_delays_ms(path)
    assert len(delays) == count
    assert min(delays) >= 20
    assert all(d % 10 == 0 for d in delays)
    assert abs(sum(delays) - 1000.0 * count / fps) <= 5.0  # the whole loop lasts count / fps seconds
    ends = np.cumsum(delays)
    true_ends = 1000.0 * np.arange(1, count + 1) / fps
    assert np.max(np.abs(ends - true_ends)) <= 5.0  # every frame ends within half a hundredth of its time


def test_thirty_fps_alternates_three_and_four_hundredths():
    assert gif_delays(9, 30.0) == [3, 4, 3, 3, 4, 3, 3, 4, 3]
    assert gif_delays(4, 50.0) == [2, 2, 2, 2]
    assert gif_delays(3, 10.0) == [10, 10, 10]


def test_frame_step_keeps_delays_at_two_hundredths_or_more():
    assert [gif_frame_step(f) for f in (10, 30, 50, 50.5, 60, 100, 120, 240)] == [1, 1, 1, 2, 2, 2, 3, 5]
    for fps in (51, 60, 75, 100, 120, 144, 240, 1000):
        kept = fps / gif_frame_step(fps)
        assert kept <= 50 and min(gif_delays(100, kept)) >= 2


def render_gif(tmp_path, fps: float) -> tuple[subprocess.CompletedProcess, object]:
    pytest.importorskip("moderngl", reason="moderngl is not installed (pip install moderngl)")
    out = tmp_path / f"walk{fps:g}.gif"
    run = subprocess.run([sys.executable, "-m", "skeletal", "render", "--out", str(out), "--fps", f"{fps:g}",
                          "--seconds", "0.5", "--size", "48x32"], capture_output=True, text=True, timeout=1200)
    if run.returncode == 2 and ("OpenGL" in run.stderr or "EGL" in run.stderr):
        pytest.skip(f"no headless OpenGL: {run.stderr.strip()}")
    assert run.returncode == 0, run.stderr
    return run, out


def test_render_gif_at_30_fps(tmp_path):
    run, out = render_gif(tmp_path, 30)
    delays = read_delays_ms(out)
    assert sum(delays) == 500 and set(delays) <= {30, 40}
    assert "warning" not in run.stderr


def test_render_gif_at_60_fps_drops_every_other_frame_and_says_so(tmp_path):
    run, out = render_gif(tmp_path, 60)
    delays = read_delays_ms(out)
    assert sum(delays) == 500 and min(delays) >= 20
    warnings = [line for line in run.stderr.splitlines() if line.startswith("skeletal: warning:")]
    assert len(warnings) == 1 and "every 2nd frame, 30 fps" in warnings[0], run.stderr
    assert "wrote" in run.stdout and "(15 frames" in run.stdout
