"""``skeletal locomotion`` (the built-in character on a scripted path under motion matching, drawn with
its trajectories) and ``skeletal view --locomotion`` (steered with the keys)."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from skeletal.render.errors import RenderError
from skeletal.render.locomotion import PathScene, ribbon
from skeletal.render.locomotion_viewer import goal_from_keys


def test_keys_steer_relative_to_the_camera():
    v, f = goal_from_keys({"w", "shift"}, 0.0)
    np.testing.assert_allclose(v, [0.0, 3.5], atol=1e-12)
    assert f is None
    v, _ = goal_from_keys({"d"}, 0.0)  # looking along +Z, screen right is -X
    np.testing.assert_allclose(v, [-1.2, 0.0], atol=1e-12)
    v, f = goal_from_keys({"w", "left"}, math.pi / 2)  # looking along +X: screen left is -Z
    np.testing.assert_allclose(v, [1.2, 0.0], atol=1e-12)
    assert abs(abs(f) - math.pi) < 1e-12
    v, f = goal_from_keys(set(), 0.0)
    assert not v.any() and f is None


def test_scene_follows_the_figure_eight_and_gives_its_lines():
    scene = PathScene("figure8", "walk")
    for _ in range(240):
        scene.step(1 / 60)
    p, _ = scene.path(scene.time)
    assert np.hypot(*(scene.controller.position[[0, 2]] - p)) < 1.0
    lines = scene.lines()
    assert len(lines) == 4  # path, trail, desired, matched
    matched = scene.matched_trajectory()
    assert matched.shape == (4, 3)  # the root and the 20/40/60-frame points
    np.testing.assert_array_equal(matched[0], scene.controller.position)
    assert np.hypot(*(matched[-1] - matched[0])[[0, 2]]) > 0.5  # a second of walking ahead
    assert scene.desired_trajectory().shape == (16, 3)
    with pytest.raises(RenderError, match="speed"):
        PathScene("figure8", "crawl")


def test_ribbon_is_a_flat_strip_of_the_width_asked():
    strip = ribbon(np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 2.0]]), 0.2, 0.01)
    assert strip.shape == (6, 3)
    np.testing.assert_allclose(np.abs(strip[:, 0]), 0.1, atol=1e-6)
    np.testing.assert_allclose(strip[:, 1], 0.01, atol=1e-7)


def _count(image: np.ndarray, colour: str) -> int:
    """Pixels of the matched line's orange or the desired line's blue (the ground and the character
    are grey, skin, blue-grey: none is this saturated)."""
    r, g, b = (image[..., k].astype(int) for k in range(3))
    if colour == "orange":
        return int(((r > 170) & (g > 60) & (g < 170) & (b < 90)).sum())
    return int(((b > 170) & (r < 90) & (b - g > 60)).sum())


def test_renders_the_walk_with_both_trajectories(tmp_path, ctx, imageio):
    from skeletal.cli import cli

    out = tmp_path / "walk.gif"
    result = CliRunner().invoke(cli, ["locomotion", "--out", str(out), "--seconds", "2", "--fps", "10",
                                      "--size", "200x150"])
    assert result.exit_code == 0, result.output
    frames = imageio.imread(out, index=None)
    assert frames.shape == (20, 150, 200, 3)
    assert all(np.abs(frames[i + 1].astype(int) - frames[i].astype(int)).sum() > 0 for i in range(19))
    # both lines are drawn (where the matched one lies on the desired one, it hides it: any frame)
    assert max(_count(f, "orange") for f in frames) > 10 and max(_count(f, "blue") for f in frames) > 10
    bad = CliRunner().invoke(cli, ["locomotion", "--out", str(tmp_path / "x.txt")])
    assert bad.exit_code == 2 and "must end in" in bad.output


def _glb(tmp_path, clips):
    """The built-in character with only ``clips`` as a .glb file."""
    import copy

    from skeletal.demo import demo_asset
    from skeletal.io.gltf_write import glb_bytes

    document = copy.copy(demo_asset().document)
    document.animations = [a for a in document.animations if a.name in clips]
    path = tmp_path / "model.glb"
    path.write_bytes(glb_bytes(document))
    return path


def test_view_locomotion_refuses_a_model_without_locomotion_clips(tmp_path):
    from skeletal.cli import cli

    bad = CliRunner().invoke(cli, ["view", str(_glb(tmp_path, ("wave",))), "--locomotion"])
    assert bad.exit_code == 2 and "no usable locomotion clips" in bad.output


def test_renders_a_model_from_its_idle_walk_and_run(tmp_path, ctx, imageio):
    from skeletal.cli import cli

    out = tmp_path / "model.png"
    model = _glb(tmp_path, ("idle", "walk", "run", "wave"))
    result = CliRunner().invoke(cli, ["locomotion", str(model), "--clips", "idle,walk", "--out", str(out),
                                      "--seconds", "1", "--fps", "10", "--size", "200x150"])
    assert result.exit_code == 0, result.output
    image = imageio.imread(out)
    assert image.shape == (150, 200, 3) and _count(image, "blue") > 10
    bad = CliRunner().invoke(cli, ["locomotion", str(model), "--clips", "idle,walk", "--speed", "run",
                                   "--out", str(out)])
    assert bad.exit_code == 2 and "no running clip" in bad.output


def test_view_locomotion_window_moves_with_held_keys(xdisplay, tmp_path):
    import imageio.v3 as iio

    env = {**os.environ, "DISPLAY": xdisplay}
    env.pop("WAYLAND_DISPLAY", None)
    shot = tmp_path / "steer.png"
    code = ("from skeletal.render.locomotion_viewer import LocomotionViewer\n"
            f"with LocomotionViewer((320, 200), hold='d') as v:\n"
            f"    v.run(frames=45, screenshot={str(shot)!r})\n"
            "    print(*v.scene.controller.position)\n")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    x, _, z = map(float, done.stdout.split())
    assert x < -0.5 and abs(z) < 1.0  # screen right, looking along +Z: toward -X
    assert iio.imread(shot).shape == (200, 320, 3)
    cli = subprocess.run([sys.executable, "-m", "skeletal", "view", "--locomotion", "--frames", "2", "--size",
                          "320x200", "--screenshot", str(tmp_path / "cli.png")], env=env, capture_output=True,
                         text=True, timeout=300)
    assert cli.returncode == 0, cli.stderr
    assert "wrote" in cli.stdout and (tmp_path / "cli.png").exists()


def test_view_locomotion_steers_a_model(xdisplay, tmp_path):
    env = {**os.environ, "DISPLAY": xdisplay}
    env.pop("WAYLAND_DISPLAY", None)
    model = _glb(tmp_path, ("idle", "walk", "run"))
    shot = tmp_path / "model.png"
    cli = subprocess.run([sys.executable, "-m", "skeletal", "view", str(model), "--locomotion", "--frames", "30",
                          "--size", "320x200", "--screenshot", str(shot)], env=env, capture_output=True, text=True,
                         timeout=300)
    assert cli.returncode == 0, cli.stderr
    assert "wrote" in cli.stdout and shot.exists()
