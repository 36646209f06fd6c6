"""``skeletal view --locomotion``: steer the built-in character (or ``skeletal view MODEL --locomotion``:
a model with idle, walk and run clips, :func:`~skeletal.playback.locomotion.gaits.locomotion_set`)
under motion matching with the keyboard (speeds scaled to the model's size).

Keys (relative to the screen; the camera follows the character): **W A S D** the desired velocity
(forward, left, back, right), **Shift** held: run (3.5 m/s) instead of walk (1.2 m/s); the **arrow
keys** held: the desired facing (the character strafes or backs up, with orientation warping);
**Esc / Q**: quit. The lines on the ground are those of ``skeletal locomotion``: where the character
has been (green), the predicted trajectory (blue) and the matched frame's trajectory (orange).
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from .errors import RenderError
from .locomotion import PathRenderer, PathScene
from .viewer import WindowApp, _import_glfw, check_display

WALK, RUN = 1.2, 3.5  # m/s
#: screen directions (right, forward) of the steering keys
MOVES = {"w": (0.0, 1.0), "s": (0.0, -1.0), "a": (-1.0, 0.0), "d": (1.0, 0.0)}
FACES = {"up": (0.0, 1.0), "down": (0.0, -1.0), "left": (-1.0, 0.0), "right": (1.0, 0.0)}


def goal_from_keys(held: set[str], camera_yaw: float) -> tuple[np.ndarray, float | None]:
    """The desired world (x, z) velocity and facing (radians, or None: along the velocity) for the
    keys ``held`` (names in :data:`MOVES`, :data:`FACES` and "shift"), with the camera looking along
    the heading ``camera_yaw`` (radians about +Y, 0 = +Z).

    >>> v, f = goal_from_keys({"w"}, 0.0)
    >>> v.round(2).tolist(), f
    ([0.0, 1.2], None)
    """
    def to_world(right: float, forward: float) -> np.ndarray:
        c, s = math.cos(camera_yaw), math.sin(camera_yaw)
        # forward is (sin yaw, cos yaw); screen right is forward turned -90 degrees about +Y
        return np.array([forward * s - right * c, forward * c + right * s])

    move = np.sum([MOVES[k] for k in held if k in MOVES] or [(0.0, 0.0)], axis=0)
    face = np.sum([FACES[k] for k in held if k in FACES] or [(0.0, 0.0)], axis=0)
    velocity = np.zeros(2)
    if np.hypot(*move) > 0:
        velocity = to_world(*move) / np.hypot(*move) * (RUN if "shift" in held else WALK)
    facing = None
    if np.hypot(*face) > 0:
        f = to_world(*face)
        facing = math.atan2(f[0], f[1])
    return velocity, facing


class LocomotionViewer(WindowApp):
    """A window on :class:`.locomotion.PathScene` without a path, steered by the keys (module docstring).
    ``hold``: keys held from the start (scripted runs and tests: names as :func:`goal_from_keys` takes)."""

    def __init__(self, size: tuple[int, int] = (1024, 640), *, warping: bool = True, hold: str | set = (),
                 log: Callable[[str], None] | None = None, model: str | None = None, clips: list[str] | None = None):
        self.scene = PathScene(None, "walk", warping=warping, model=model, clips=clips)  # a bad model: before any window
        check_display()
        self.glfw = _import_glfw()
        self._errors: list[str] = []
        self.log = log
        self.renderer: PathRenderer | None = None
        self.hold = set(hold.split(",") if isinstance(hold, str) and hold else hold)
        unknown = self.hold - set(MOVES) - set(FACES) - {"shift"}
        if unknown:
            raise RenderError(f"unknown keys {sorted(unknown)}: use w, a, s, d, up, down, left, right, shift")
        self.quit = False
        try:
            self._open_window(size, "skeletal view - locomotion (WASD: move, Shift: run, arrows: face)")
            fb_w, fb_h = self.glfw.get_framebuffer_size(self.window)
            self.renderer = PathRenderer(self.scene.asset, max(fb_w, 1), max(fb_h, 1), ctx=self.ctx,
                                         camera="yaw=180,pitch=35")
            self.renderer.frame_area(1.5 * self.scene.scale, 1.8 * self.scene.scale)
            self._install_callbacks()
        except BaseException:
            self.close()
            raise

    def _install_callbacks(self) -> None:
        glfw = self.glfw

        def on_key(_win, key, _scancode, action, _mods):
            if action == glfw.PRESS and key in (glfw.KEY_ESCAPE, glfw.KEY_Q):
                self.quit = True

        glfw.set_key_callback(self.window, on_key)

    def held(self) -> set[str]:
        """The steering keys down now (and those in ``hold``)."""
        glfw, win = self.glfw, self.window
        keys = {"w": glfw.KEY_W, "a": glfw.KEY_A, "s": glfw.KEY_S, "d": glfw.KEY_D, "up": glfw.KEY_UP,
                "down": glfw.KEY_DOWN, "left": glfw.KEY_LEFT, "right": glfw.KEY_RIGHT,
                "shift": glfw.KEY_LEFT_SHIFT}
        down = {name for name, key in keys.items() if glfw.get_key(win, key) == glfw.PRESS}
        if glfw.get_key(win, glfw.KEY_RIGHT_SHIFT) == glfw.PRESS:
            down.add("shift")
        return down | self.hold

    def camera_yaw(self) -> float:
        """The heading the camera looks along (radians about +Y)."""
        cam = self.renderer.camera
        d = cam.target - cam.eye
        return math.atan2(d[0], d[2])

    def _frame(self, dt: float) -> None:
        glfw, renderer, scene = self.glfw, self.renderer, self.scene
        glfw.poll_events()
        velocity, facing = goal_from_keys(self.held(), self.camera_yaw())
        scene.steer(velocity, facing)
        for _ in range(max(int(round(dt * 60.0)), 1 if dt > 0 else 0)):
            scene.step(1.0 / 60.0)
        fb_w, fb_h = glfw.get_framebuffer_size(self.window)
        if fb_w < 1 or fb_h < 1:
            return
        if (fb_w, fb_h) != (renderer.width, renderer.height):
            renderer.resize(fb_w, fb_h)
            renderer.frame_area(1.5 * scene.scale, 1.8 * scene.scale)
        renderer.lines = scene.lines()
        renderer.follow_point(scene.controller.position)
        renderer.render(scene.world[None])
        renderer.present(self.ctx.screen)

    def run(self, frames: int | None = None, screenshot: str | None = None, fps: float = 30.0) -> int:
        """Show frames until the window closes (Esc/Q), or exactly ``frames`` on a fixed 1/``fps`` s
        clock; the last one to ``screenshot``. Returns the frames drawn."""
        return self._frame_loop(self._frame, lambda: self.glfw.window_should_close(self.window) or self.quit,
                                frames=frames, fixed=bool(frames), fps=fps, screenshot=screenshot)

    def close(self) -> None:
        if self.renderer is not None:
            self.renderer.release()
            self.renderer = None
        self._close_window()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
