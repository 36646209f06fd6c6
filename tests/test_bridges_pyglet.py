"""skeletal.bridges.pyglet: skeletal's renderer inside a pyglet window, driven by a keyboard game loop.

The example game (examples/bridges/pyglet_game.py) runs scripted under a private Xvfb server in a
child process (its GL context would replace the one the other render tests share): Up held for
frames 0-30, then released, Space at frame 70. Checked:

* the state machine went idle -> move (walk/run blend) -> idle -> wave, in that order;
* the character moved forward (+Z, its facing) while Up was held;
* the last frame drawn in pyglet's context, and the window's own pixels (below the text label),
  equal skeletal's own headless renderer drawing the dumped pose through the same camera: mean
  absolute difference under 1 (of 255) and under 0.5 % of pixels off by more than 24 (two contexts
  of the same driver, no multisampling; measured 0 and 0).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pyglet", reason='pyglet is not installed (pip install "skeletal[pyglet]")')

from fixtures.xvfb import xvfb_display

GAME = Path(__file__).resolve().parents[1] / "examples" / "bridges" / "pyglet_game.py"
SIZE = (320, 240)

#: skeletal's headless renderer drawing the game's dumped pose through the game's camera (argv: dump, out).
REFERENCE = """
import sys
import numpy as np
import skeletal
from skeletal.render.errors import RenderError
from skeletal.render.renderer import Renderer

data = np.load(sys.argv[1])
asset = skeletal.load(skeletal.examples.path("demo.glb"))
height, width = data["image"].shape[:2]
try:
    renderer = Renderer(asset, width, height, samples=0, clip=asset.clip("walk"))
except RenderError as exc:
    print(exc, file=sys.stderr)
    sys.exit(3)
lo, hi = data["bounds"]
renderer.set_bounds(lo, hi)
np.testing.assert_allclose(renderer.camera.eye, data["eye"], atol=1e-9)
np.save(sys.argv[2], renderer.draw((data["world"], data["morph"])))
"""


@pytest.fixture(scope="module")
def pyglet_display():
    yield from xvfb_display("1024x768x24", ("pyglet", "moderngl"), 'pip install "skeletal[pyglet]"')


def test_game_loop_drives_the_state_machine_and_draws_like_skeletal(pyglet_display, tmp_path):
    dump = tmp_path / "game.npz"
    env = dict(os.environ, DISPLAY=pyglet_display)
    run = subprocess.run([sys.executable, str(GAME), "--size", f"{SIZE[0]}x{SIZE[1]}", "--frames", "90",
                          "--keys", "UP:0-30,SPACE:70", "--dump", str(dump), "--screenshot", str(tmp_path / "g.png")],
                         env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    data = np.load(dump)
    states = json.loads(str(data["states"]))
    order = [s for i, s in enumerate(states) if i == 0 or s != states[i - 1]]
    assert order[:4] == ["idle", "move", "idle", "wave"] or order[:3] == ["move", "idle", "wave"], order
    assert data["world"][0, 2, 3] > 0.3  # walked forward along +Z while Up was held

    # skeletal's own headless renderer, in a child too: a fresh process, whatever GL or Vulkan state
    # the tests before this one left in the test process
    ours_path = tmp_path / "ours.npy"
    run = subprocess.run([sys.executable, "-c", REFERENCE, str(dump), str(ours_path)], capture_output=True, text=True,
                         timeout=300)
    if run.returncode == 3:
        pytest.skip(f"no headless OpenGL context: {run.stderr.strip().splitlines()[-1]}")
    assert run.returncode == 0, run.stderr[-2000:]
    ours = np.load(ours_path).astype(np.int16)
    window = data["image"].astype(np.int16)
    diff = np.abs(ours - window).max(axis=2)
    print(f"pyglet window vs skeletal headless: mean |diff| {diff.mean():.3f}, pixels off by >24: {(diff > 24).mean():.4%}")
    assert diff.mean() < 1.0
    assert (diff > 24).mean() < 0.005
    # the window's own pixels (saved from its back buffer before the flip): the same, below the label
    from PIL import Image

    shown = np.asarray(Image.open(tmp_path / "g.png").convert("RGB")).astype(np.int16)
    below_label = np.abs(shown[40:] - ours[40:]).max(axis=2)
    print(f"window pixels below the label: mean |diff| {below_label.mean():.3f}")
    assert below_label.mean() < 1.0
