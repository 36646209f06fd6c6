"""skeletal -> pyglet: skeletal's own renderer (its GLSL skinning shaders) drawing inside a pyglet window.

pyglet 2 gives a window, an OpenGL 3.3+ context, input and a clock; it has no skinning or animation
system. :class:`WindowRenderer` wraps the window's context in moderngl and draws a
:class:`skeletal.render.Renderer` frame into it (GPU skinning from the palettes of a Player, Mixer or
Crowd, or any ``(world, morph)`` pose), then blits its colour to the window's back buffer; pyglet's own
drawing (labels, batches) can go on top. :func:`heading` turns a pose about the vertical axis and
moves it, for characters that walk around.

>>> window = pyglet.window.Window(800, 600)                                 # doctest: +SKIP
>>> view = WindowRenderer(window, asset, clip=asset.clip("walk"))           # doctest: +SKIP
>>> @window.event
... def on_draw():
...     window.clear(); view.draw(player)                                   # doctest: +SKIP
"""

from __future__ import annotations

import numpy as np

from ..asset import Asset
from .posed import require


def heading(world: np.ndarray, yaw: float, position=(0.0, 0.0, 0.0)) -> np.ndarray:
    """World matrices (..., N, 4, 4) turned by ``yaw`` radians about +Y (counter-clockwise seen from
    above) and moved by ``position`` (3,): ``T @ R @ world`` for every node, a new array."""
    c, s = float(np.cos(yaw)), float(np.sin(yaw))
    m = np.array([[c, 0, s, position[0]], [0, 1, 0, position[1]], [-s, 0, c, position[2]], [0, 0, 0, 1]])
    return np.matmul(m, world)


class WindowRenderer:
    """A :class:`skeletal.render.Renderer` that draws into a pyglet window's OpenGL context.

    ``window``: a ``pyglet.window.Window`` (its context must be OpenGL 3.3 or newer, pyglet 2's
    default); ``renderer_options`` go to :class:`~skeletal.render.Renderer` (``clip`` frames the
    camera, ``skinning``, ``ground``, ``samples``, ``camera``, ``instances``...). The renderer draws
    at the window's framebuffer size (:meth:`resize` follows a resized window).
    """

    def __init__(self, window, asset: Asset, **renderer_options):
        require("pyglet", "pyglet")
        moderngl = require("moderngl", "render")
        from ..render.renderer import Renderer

        window.switch_to()
        self.window = window
        self.ctx = moderngl.create_context()  # wraps pyglet's current context, creates none
        width, height = window.get_framebuffer_size()
        self.renderer = Renderer(asset, width, height, ctx=self.ctx, **renderer_options)
        self._drain_errors()

    @property
    def camera(self):
        """The renderer's :class:`~skeletal.render.camera.Camera` (framed on the clip given, or the rest pose)."""
        return self.renderer.camera

    def resize(self) -> None:
        """Follow the window's framebuffer size (call from ``on_resize``)."""
        width, height = self.window.get_framebuffer_size()
        if (width, height) != (self.renderer.width, self.renderer.height) and width > 0 and height > 0:
            self.renderer.resize(width, height)

    def draw(self, state, instances=None, **options) -> dict[str, float]:
        """Draw ``state`` (a Player, Mixer, Crowd-like ``(world, morph)`` pair or world array, as
        :meth:`skeletal.render.Renderer.render` takes it) and copy the frame to the window. Returns
        the renderer's CPU timings. Leaves pyglet's context current with the window's framebuffer bound."""
        self.window.switch_to()
        timings = self.renderer.render(state, instances, **options)
        self._blit_colour()
        self._drain_errors()
        return timings

    def _blit_colour(self) -> None:
        """Copy (and resolve) the renderer's colour into the window's back buffer. Colour only: the
        window's depth/stencil format is the windowing system's choice, and a blit of depth between
        different formats is an invalid operation."""
        from pyglet import gl

        src = self.renderer.framebuffer
        w, h = self.renderer.width, self.renderer.height
        gl.glBindFramebuffer(gl.GL_READ_FRAMEBUFFER, src.glo)
        gl.glBindFramebuffer(gl.GL_DRAW_FRAMEBUFFER, 0)
        gl.glBlitFramebuffer(0, 0, w, h, 0, 0, w, h, gl.GL_COLOR_BUFFER_BIT, gl.GL_NEAREST)
        gl.glBindFramebuffer(gl.GL_FRAMEBUFFER, 0)
        self.ctx.screen.use()

    def _drain_errors(self) -> None:
        """Read away GL error flags the renderer's probes leave (a feature test that is allowed to
        fail): pyglet checks glGetError after its own calls and would blame itself."""
        for _ in range(16):
            if self.ctx.error == "GL_NO_ERROR":
                break

    def read(self) -> np.ndarray:
        """The last frame drawn, (height, width, 3) uint8 RGB, row 0 at the top."""
        return self.renderer.read()

    def release(self) -> None:
        self.renderer.release()


__all__ = ["WindowRenderer", "heading"]
