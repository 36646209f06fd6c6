# Over 600 lines: the `skeletal view` window: its loop, input handling and drawing; the GL-free UI state is
# render/viewer_ui.py.
"""The interactive viewer behind ``skeletal view``: a window, the skinned character drawn by the
:class:`.renderer.Renderer`, a timeline, a clip list, overlays and frame statistics.

Windowing library: **glfw** (the ``glfw`` package, pyGLFW). Why:

* its wheels ship the GLFW 3.4 shared library (X11, Wayland, GLX, EGL), so ``pip install glfw`` is
  the whole installation, like moderngl's own wheels; it is maintained and small (ctypes only);
* it makes an OpenGL 3.3+ core context and nothing else, which ``moderngl.create_context()`` adopts
  as it is. It keeps no GL state of its own, so the :class:`Renderer` and the UI drawn here are the
  only users of the context (pyglet 2 also draws with GL and caches bindings and programs, which
  then fight moderngl's);
* the main loop is ours (``poll_events`` / ``swap_buffers``): ``--frames N --screenshot FILE``
  runs exactly N frames on a fixed clock and reads the back buffer, with no event-loop scheduling.

GLFW draws no text, so the UI's text comes from a glyph atlas that Pillow (already a dependency of
the renderer) rasterises from its built-in font; every panel, bar and glyph of a frame is one
vertex buffer drawn with one call (:class:`UIPainter`).

Layers: :mod:`.viewer_ui` holds the state and the layout (no window: unit-tested), and the
state drives a :class:`skeletal.Player` (crossfades, blend space, clocks); this module opens the
window, turns GLFW callbacks into :class:`.viewer_ui.ViewerState` calls, and each frame updates
the Player and draws its pose with :meth:`.renderer.Renderer.render` (the Player's own palettes,
no readback) before blitting the frame to the window and drawing the UI over it.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from typing import Callable

import moderngl
import numba
import numpy as np

from .camera import animated_bounds, frame
from .context import PREFERRED_GL, adopt_context
from .errors import RenderError
from .renderer import Renderer
from .viewer_ui import (
    CONTROLS, LOOP_CYCLE, Layout, OrbitCamera, Rect, ViewerState, compute_layout, ellipsize, parse_blend, slider_marks,
)

# -- look (display-space RGBA) ---------------------------------------------------------------------
TEXT = (0.93, 0.94, 0.96, 1.0)
TEXT_DIM = (0.66, 0.69, 0.74, 1.0)
ACCENT = (0.27, 0.53, 0.93, 1.0)
ACCENT_TEXT = (1.0, 1.0, 1.0, 1.0)
WARM = (1.0, 0.80, 0.25, 1.0)
PANEL = (0.07, 0.08, 0.10, 0.74)
BOTTOM_PANEL = (0.09, 0.10, 0.12, 1.0)
BAR_TRACK = (0.26, 0.28, 0.32, 1.0)
BAR_FADE = (0.95, 0.62, 0.20, 0.85)
BAR_WEIGHT = (0.27, 0.53, 0.93, 0.55)  # a blend sample's weight, behind its clip row
TICK = (0.62, 0.66, 0.72, 1.0)

NO_DISPLAY = "no display: set DISPLAY or run under xvfb-run"
FONT_PIXELS = 14


def _import_glfw():
    try:
        import glfw
    except ImportError as exc:  # not installed, or its bundled library does not load
        raise RenderError(f"the viewer needs the glfw package ({exc}): pip install glfw") from None
    return glfw


def check_display() -> None:
    """RenderError with a one-line hint when no window system can be reached (Linux/BSD only:
    Windows and macOS always have one)."""
    if sys.platform.startswith(("linux", "freebsd", "openbsd", "netbsd")):
        if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
            raise RenderError(NO_DISPLAY)


def open_window(glfw, size: tuple[int, int], title: str, errors: list[str], on_error=None):
    """Initialise GLFW and open a window with an OpenGL 3.3 core context, current on this thread and
    adopted by moderngl (the renderer and anything else drawing with GL share it). Returns
    ``(window, ctx)``. GLFW's error texts are appended to ``errors`` (by ``on_error`` when given);
    RenderError with one line when no window can be made. The caller terminates GLFW.

    Used by the viewer and by the editor (:mod:`skeletal.editor.app`).
    """
    def collect(code: int, message: bytes) -> None:
        text = message.decode("utf-8", "replace") if isinstance(message, bytes) else str(message)
        errors.append(" ".join(text.split()))

    glfw.set_error_callback(on_error or collect)
    if not glfw.init():
        where = os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY") or "?"
        detail = errors[-1] if errors else "glfw.init() failed"
        raise RenderError(f"cannot open a window on display {where} ({detail}): "
                          "is the X server running? try xvfb-run")
    glfw.window_hint(glfw.OPENGL_PROFILE, glfw.OPENGL_CORE_PROFILE)
    glfw.window_hint(glfw.OPENGL_FORWARD_COMPAT, True)
    glfw.window_hint(glfw.SAMPLES, 0)  # the renderer multisamples in its own framebuffer
    window = None
    for version in PREFERRED_GL:  # 4.3 first: some drivers give exactly the version asked for
        glfw.window_hint(glfw.CONTEXT_VERSION_MAJOR, version // 100)
        glfw.window_hint(glfw.CONTEXT_VERSION_MINOR, version % 100 // 10)
        window = glfw.create_window(int(size[0]), int(size[1]), title, None, None)
        if window:
            break
    if not window:
        detail = errors[-1] if errors else "no reason given"
        raise RenderError(f"cannot create an OpenGL 3.3 core window ({detail})")
    glfw.make_context_current(window)
    # .rawgl loads extra GL functions from EGL or GLX: say which one made this context.
    api = glfw.get_window_attrib(window, glfw.CONTEXT_CREATION_API)
    return window, adopt_context(None, "egl" if api == glfw.EGL_CONTEXT_API else "glx")


class WindowApp:
    """What the viewer and the editor (:mod:`skeletal.editor.app`) share around their own frames: the
    GLFW window and its moderngl context (numba on one thread while it is open), the frame loop on
    a free or fixed clock with a screenshot of the last frame, the back buffer as an image, and the
    teardown. A subclass sets ``glfw`` and ``_errors`` (a list) before :meth:`_open_window`, draws
    in its own step function and releases its own GL objects before :meth:`_close_window`.
    """

    window = None
    ctx = None

    def _open_window(self, size: tuple[int, int], title: str) -> None:
        # One pose per frame: numba's worker threads would only wait for cores that a software
        # rasteriser (llvmpipe) keeps busy (12 ms instead of 0.15 ms per frame on two cores).
        self._numba_threads = numba.get_num_threads()
        numba.set_num_threads(1)
        self._glfw_ready = True  # open_window initialises GLFW first; _close_window terminates it
        self.window, self.ctx = open_window(self.glfw, size, title, self._errors)

    def read_screen(self) -> np.ndarray:
        """The window's back buffer as (height, width, 3) uint8 RGB, row 0 at the top."""
        fb_w, fb_h = self.glfw.get_framebuffer_size(self.window)
        data = self.ctx.screen.read(viewport=(0, 0, fb_w, fb_h), components=3, alignment=1)
        return np.ascontiguousarray(np.frombuffer(data, np.uint8).reshape(fb_h, fb_w, 3)[::-1])

    def _frame_loop(self, step: Callable[[float], None], stop: Callable[[], bool], *, frames: int | None = None,
                    fixed: bool = False, fps: float = 30.0, screenshot: str | None = None,
                    after: Callable[[], None] | None = None, swap: bool = True) -> int:
        """Call ``step(dt)`` and swap until ``stop()`` or ``frames`` frames; ``fixed``: a 1/``fps`` s
        clock and no vsync (tests, pictures), else the wall clock (capped at 0.1 s) with vsync; the
        first frame gets dt 0. ``after()`` runs after each step. ``screenshot``: the frame ``frames``
        (or the last one) as PNG, read from the back buffer. ``swap=False``: the step swaps itself
        (the editor's pipelined frames). Returns the frames drawn."""
        glfw = self.glfw
        glfw.swap_interval(0 if fixed else 1)
        drawn, last, image = 0, time.perf_counter(), None
        while not stop():
            if frames is not None and drawn >= frames:
                break
            now = time.perf_counter()
            dt = 1.0 / fps if fixed else min(now - last, 0.1)
            last = now
            step(dt if drawn else 0.0)
            drawn += 1
            if after is not None:
                after()
            if screenshot and frames is not None and drawn == frames:
                image = self.read_screen()
            if swap:
                glfw.swap_buffers(self.window)
        if screenshot:
            import imageio.v3 as iio

            iio.imwrite(screenshot, image if image is not None else self.read_screen())
        return drawn

    def _close_window(self) -> None:
        """numba's threads back, the context, the window and GLFW gone (safe to call twice)."""
        if getattr(self, "_numba_threads", None):
            numba.set_num_threads(self._numba_threads)
            self._numba_threads = None
        if self.ctx is not None:
            self.ctx.release()
            self.ctx = None
        if self.window is not None:
            self.glfw.destroy_window(self.window)
            self.window = None
        if getattr(self, "_glfw_ready", False):
            self.glfw.terminate()
            self._glfw_ready = False


# -- text and 2D drawing ----------------------------------------------------------------------------


@dataclass
class FontAtlas:
    """Glyphs of one font size in a one-channel texture. Per glyph (index = position in ``chars``):
    ``advance``, the quad's offset from the pen on the baseline ``(ox, oy)``, its size ``(w, h)`` and
    its texture rectangle ``uv`` (u0, v0, u1, v1). ``white`` is a texel-centre uv inside a solid block."""

    chars: str
    advance: np.ndarray
    offset: np.ndarray
    size: np.ndarray
    uv: np.ndarray
    ascent: int
    descent: int
    image: np.ndarray
    white: tuple[float, float]
    index: dict[str, int] = field(default_factory=dict)
    _shapes: dict = field(default_factory=dict, repr=False)

    @classmethod
    def build(cls, pixels: int, font=None) -> "FontAtlas":
        """Rasterise printable ASCII (and a few symbols) with ``font`` (a Pillow font; default: Pillow's
        built-in scalable font at ``pixels`` px, or its fixed bitmap font without FreeType)."""
        from PIL import Image, ImageDraw, ImageFont

        if font is None:
            try:
                font = ImageFont.load_default(size=pixels)
            except (TypeError, OSError, ImportError):  # old Pillow or no FreeType: the fixed bitmap font
                font = ImageFont.load_default()
        # FreeType fonts place glyphs on a baseline ("ls" anchor); bitmap fonts only from the top left.
        anchor = "ls" if isinstance(font, ImageFont.FreeTypeFont) else None
        chars = "".join(chr(c) for c in range(32, 127)) + "\u00b7\u00d7"
        boxes = [font.getbbox(ch, anchor=anchor) if anchor else font.getbbox(ch) for ch in chars]
        width, gap = 512, 2
        x, y, row_h = 4 + gap, 0, 4
        places = []
        for left, top, right, bottom in boxes:
            w, h = max(0, right - left), max(0, bottom - top)
            if x + w + gap > width:
                x, y, row_h = 0, y + row_h + gap, 0
            places.append((x, y))
            x += w + gap
            row_h = max(row_h, h)
        height = y + row_h + gap
        image = Image.new("L", (width, height), 0)
        draw = ImageDraw.Draw(image)
        draw.rectangle((0, 0, 3, 3), fill=255)  # the solid block rectangles sample
        for ch, (left, top, _, _), (px, py) in zip(chars, boxes, places):
            draw.text((px - left, py - top), ch, font=font, fill=255, anchor=anchor)
        if anchor:
            ascent, descent = font.getmetrics()
        else:  # quads are then placed from the line's top
            ascent, descent = 0, max(b[3] for b in boxes) + 1
        box = np.asarray(boxes, np.float32)
        pos = np.asarray(places, np.float32)
        size = np.stack([box[:, 2] - box[:, 0], box[:, 3] - box[:, 1]], axis=1).clip(0)
        uv = np.concatenate([pos, pos + size], axis=1) / np.array([width, height, width, height], np.float32)
        advance = np.array([font.getlength(ch) for ch in chars], np.float32)
        atlas = cls(chars, advance, box[:, :2].copy(), size, uv, int(ascent), int(descent),
                    np.asarray(image, np.uint8), (2.0 / width, 2.0 / height))
        atlas.index = {ch: i for i, ch in enumerate(chars)}
        return atlas

    @property
    def line_height(self) -> int:
        return self.ascent + self.descent

    def glyphs(self, text: str) -> np.ndarray:
        """Glyph indices of ``text`` (``?`` for characters the atlas lacks)."""
        fallback = self.index["?"]
        return np.fromiter((self.index.get(ch, fallback) for ch in text), np.int64, len(text))

    def shape(self, text: str) -> tuple[np.ndarray, np.ndarray, float]:
        """Quads of ``text`` set from x = 0 on the baseline: (n, 4) x, y, w, h (empty glyphs left
        out), their texture rectangles (n, 4), and the advance width. Cached: most UI text repeats."""
        cached = self._shapes.get(text)
        if cached is None:
            g = self.glyphs(text)
            pen = np.concatenate([[0.0], np.cumsum(self.advance[g])[:-1]])
            xywh = np.empty((len(g), 4), np.float32)
            xywh[:, 0] = pen + self.offset[g, 0]
            xywh[:, 1] = self.offset[g, 1]
            xywh[:, 2:4] = self.size[g]
            keep = (xywh[:, 2] > 0) & (xywh[:, 3] > 0)
            cached = (xywh[keep], self.uv[g][keep], float(self.advance[g].sum()))
            if len(self._shapes) > 2048:
                self._shapes.clear()
            self._shapes[text] = cached
        return cached

    def measure(self, text: str) -> float:
        return self.shape(text)[2]


_UI_VERTEX = """#version 330 core
in vec2 a_pos;
in vec2 a_uv;
in vec4 a_color;
uniform vec2 u_screen;
out vec2 v_uv;
out vec4 v_color;
void main() {
    gl_Position = vec4(a_pos.x / u_screen.x * 2.0 - 1.0, 1.0 - a_pos.y / u_screen.y * 2.0, 0.0, 1.0);
    v_uv = a_uv;
    v_color = a_color;
}
"""
_UI_FRAGMENT = """#version 330 core
uniform sampler2D u_atlas;
in vec2 v_uv;
in vec4 v_color;
out vec4 f_color;
void main() {
    f_color = vec4(v_color.rgb, v_color.a * texture(u_atlas, v_uv).r);
}
"""
_CORNERS = np.array([[0, 0], [1, 0], [0, 1], [0, 1], [1, 0], [1, 1]], np.float32)


class UIPainter:
    """Collects rectangles and text of a frame (pixels, origin top-left) and draws them with one call."""

    def __init__(self, ctx, font_pixels: int):
        self.ctx = ctx
        self.font = FontAtlas.build(font_pixels)
        self.program = ctx.program(vertex_shader=_UI_VERTEX, fragment_shader=_UI_FRAGMENT)
        image = self.font.image
        self.texture = ctx.texture((image.shape[1], image.shape[0]), 1, np.ascontiguousarray(image).tobytes())
        self.texture.filter = (moderngl.NEAREST, moderngl.NEAREST)
        self.buffer = ctx.buffer(reserve=64 * 1024, dynamic=True)
        self.vao = self._make_vao()
        self._parts: list[np.ndarray] = []

    def _make_vao(self):
        return self.ctx.vertex_array(self.program, [(self.buffer, "2f 2f 4f", "a_pos", "a_uv", "a_color")])

    def measure(self, text: str) -> float:
        return self.font.measure(text)

    @property
    def line_height(self) -> int:
        return self.font.line_height

    def _quads(self, xywh: np.ndarray, uv: np.ndarray, color) -> None:
        """Quads (n, 4) x, y, w, h with texture rectangles (n, 4) -> 6 vertices each."""
        n = len(xywh)
        if not n:
            return
        out = np.empty((n, 6, 8), np.float32)
        out[:, :, 0:2] = xywh[:, None, 0:2] + _CORNERS[None] * xywh[:, None, 2:4]
        out[:, :, 2:4] = uv[:, None, 0:2] + _CORNERS[None] * (uv[:, None, 2:4] - uv[:, None, 0:2])
        out[:, :, 4:8] = color
        self._parts.append(out.reshape(-1, 8))

    def rect(self, r: Rect, color) -> None:
        u, v = self.font.white
        self._quads(np.array([[r.x, r.y, r.w, r.h]], np.float32), np.array([[u, v, u, v]], np.float32), color)

    def text(self, x: float, y: float, text: str, color=TEXT) -> float:
        """Draw ``text`` with its line's top at ``y``; returns its width."""
        if not text:
            return 0.0
        quads, uv, width = self.font.shape(text)
        placed = quads.copy()
        placed[:, 0] = np.round(placed[:, 0] + x)
        placed[:, 1] += round(y) + self.font.ascent
        self._quads(placed, uv, color)
        return width

    def flush(self, width: int, height: int) -> None:
        """Draw everything collected on the bound framebuffer (alpha blended, no depth)."""
        if not self._parts:
            return
        data = np.concatenate(self._parts)
        self._parts = []
        if data.nbytes > self.buffer.size:
            self.vao.release()
            self.buffer.orphan(max(data.nbytes, 2 * self.buffer.size))
            self.vao = self._make_vao()
        self.buffer.write(data.tobytes())
        ctx = self.ctx
        ctx.disable(moderngl.DEPTH_TEST | moderngl.CULL_FACE)
        ctx.enable(moderngl.BLEND)
        ctx.blend_func = moderngl.SRC_ALPHA, moderngl.ONE_MINUS_SRC_ALPHA
        self.program["u_screen"].value = (float(width), float(height))
        self.program["u_atlas"].value = 0
        self.texture.use(location=0)
        self.vao.render(moderngl.TRIANGLES, vertices=len(data))

    def release(self) -> None:
        for obj in (self.vao, self.buffer, self.texture, self.program):
            obj.release()


# -- frame statistics -----------------------------------------------------------------------------


class FrameStats:
    """Averages of the per-frame timings over about half a second (what the stats panel shows):
    ``update`` (``Player.update``: advance the clocks and fades, sample and blend the clips, world
    matrices and skin palettes), ``palette`` (arranging the Player's palettes for the GPU),
    ``upload`` (writing them), ``draw`` (drawing the frame, waiting for the GPU) and ``frame``.

    The first frame is left out (it compiles shaders in the driver); until the first half second
    is complete, the averages so far are shown, updated every frame. ``skinned=False`` (a model with
    no skinned mesh, such as a BVH skeleton): no skinning rows, the drawing time as ``draw``.

    >>> FrameStats(skinned=False).rows()
    [('measuring...', '')]
    """

    WINDOW = 0.5

    def __init__(self, skinned: bool = True):
        self.skinned = skinned
        self._sums: dict[str, float] = {}
        self._frames = 0
        self._start = time.perf_counter()
        self._skip = 1
        self._complete = False
        self.shown: dict[str, float] = {}

    def add(self, timings: dict[str, float]) -> None:
        now = time.perf_counter()
        if self._skip:
            self._skip -= 1
            self._start = now
            return
        for key, value in timings.items():
            self._sums[key] = self._sums.get(key, 0.0) + value
        self._frames += 1
        elapsed = now - self._start
        if elapsed >= self.WINDOW or not self._complete:
            self.shown = {key: value / self._frames for key, value in self._sums.items()}
            self.shown["fps"] = self._frames / max(elapsed, 1e-9)
        if elapsed >= self.WINDOW:
            self._sums, self._frames, self._start, self._complete = {}, 0, now, True

    def rows(self) -> list[tuple[str, str]]:
        """(label, value) rows of the stats panel; labels starting with a space are details."""
        s = self.shown
        if not s:
            return [("measuring...", "")]
        ms = {k: 1000.0 * s.get(k, 0.0) for k in ("update", "palette", "upload", "draw", "frame")}
        if not self.skinned:
            return [
                (f"{s.get('fps', 0.0):.1f} fps", f"{ms['frame']:.1f} ms"),
                ("pose (CPU)", f"{ms['update'] + ms['palette']:.2f} ms"),
                ("  player.update", f"{ms['update']:.2f}"),
                ("draw (no skin)", f"{ms['upload'] + ms['draw']:.2f} ms"),
            ]
        return [
            (f"{s.get('fps', 0.0):.1f} fps", f"{ms['frame']:.1f} ms"),
            ("pose (CPU)", f"{ms['update'] + ms['palette']:.2f} ms"),
            ("  player.update", f"{ms['update']:.2f}"),
            ("  palette", f"{ms['palette']:.2f}"),
            ("skinning", f"{ms['upload'] + ms['draw']:.2f} ms"),
            ("  upload", f"{ms['upload']:.2f}"),
            ("  draw", f"{ms['draw']:.2f}"),
        ]

    def summary(self) -> str:
        """The rows on one line (for --verbose)."""
        return ", ".join(f"{label.strip()} {value}".strip() for label, value in self.rows())


# -- the viewer -------------------------------------------------------------------------------------


@dataclass
class ViewResult:
    """What a viewer run did: frames drawn, the screenshot written (if any), GL description, the
    last shown stats (seconds), the clip chosen last and what played at the end (``clip 'walk'``
    or ``blend 1.40 (walk 0.82, run 0.18)``)."""

    frames: int
    screenshot: str | None
    info: str
    stats: dict[str, float]
    clip: str
    playback: str = ""


def heat_joints(asset) -> tuple[list[int], list[str], int]:
    """Rig indices and names of the skin joints (the heat-map's cycle), and the index of the joint
    with the most total skin weight (a useful first view)."""
    from .overlays import joint_nodes

    joints = [int(j) for j in joint_nodes(asset)] if asset.skins else []
    total = np.zeros(len(asset.rig))
    for instance in asset.mesh_instances:
        if instance.skin is None:
            continue
        skin_joints = asset.skins[instance.skin].joints
        for prim in instance.primitives:
            if prim.joints is not None:
                sums = np.bincount(prim.joints.ravel(), prim.weights.ravel(), minlength=len(skin_joints))
                np.add.at(total, skin_joints, sums[:len(skin_joints)])
    names = [asset.rig.names[j] or f"node {int(asset.rig.node_of[j])}" for j in joints]
    best = int(np.argmax(total[joints])) if joints else 0
    return joints, names, best


def heat_joint_index(asset, key: str | int) -> int:
    """Position in :func:`heat_joints`' list of the joint named by ``key`` (name or glTF node index);
    RenderError when it is no skin joint."""
    from .overlays import resolve_joint

    joints = heat_joints(asset)[0]
    rig_index = resolve_joint(asset, key)
    if rig_index not in joints:
        raise RenderError(f"{key!r} is not a joint of any skin: it has no weights to show")
    return joints.index(rig_index)


class Viewer(WindowApp):
    """A window showing ``asset``; :meth:`run` runs the event loop.

    Args:
        asset: a :class:`skeletal.Asset`.
        size: window size in screen coordinates.
        clip: index of the first clip; ``start``: its start time; ``speed``, ``loop``: playback.
        camera: a camera spec string (see :mod:`.camera`) for the initial framing.
        skeleton, weights_joint: overlays on at the start (joint: name or glTF node index).
        blend: blend-space samples ``[(clip, position), ...]`` to start in blend mode with (None:
            clip mode; the B key then blends the default samples); ``blend_value``: the parameter.
        palette_mode, samples, skinning: passed to the :class:`Renderer`.
        log: where verbose lines go (None: quiet).
    """

    def __init__(self, asset, size: tuple[int, int] = (1024, 640), *, clip: int = 0, start: float = 0.0,
                 speed: float = 1.0, loop: str = "repeat", camera: str | None = None, skeleton: bool = False,
                 weights_joint: str | int | None = None, blend=None, blend_value: float | None = None,
                 palette_mode: str = "auto", samples: int = 4, title: str | None = None,
                 log: Callable[[str], None] | None = None, skinning: str = "lbs"):
        check_display()
        self._skinning = skinning
        self.glfw = _import_glfw()
        self.asset = asset
        self.log = log
        self._errors: list[str] = []
        self.window = None
        self.ctx = None
        self.renderer: Renderer | None = None
        self.ui: UIPainter | None = None
        try:
            self._open_window(size, title or f"skeletal view - {asset.name}")
            self._setup(clip, start, speed, loop, camera, skeleton, weights_joint, blend, blend_value, palette_mode,
                        samples)
        except BaseException:
            self.close()
            raise

    # -- setup ----------------------------------------------------------------------------------

    def _setup(self, clip, start, speed, loop, camera, skeleton, weights_joint, blend, blend_value, palette_mode,
               samples) -> None:
        glfw, asset = self.glfw, self.asset
        fb_w, fb_h = glfw.get_framebuffer_size(self.window)
        win_w, win_h = glfw.get_window_size(self.window)
        self.pixel_ratio = (fb_w / max(win_w, 1), fb_h / max(win_h, 1))
        self.scale = max(1.0, float(glfw.get_window_content_scale(self.window)[1]))
        self.ui = UIPainter(self.ctx, round(FONT_PIXELS * self.scale))

        from ..playback.player import Player

        clips = asset.clips
        self.joints, joint_names, best = heat_joints(asset)
        self.player = Player(asset)  # compiles (or loads) the mixer's kernels now, before the first frame
        try:
            state = ViewerState(self.player, joint_names, clip=clip, time=start, speed=speed, loop=loop,
                                default_joint=best, blend=blend, blend_value=blend_value, blend_mode=blend is not None)
        except ValueError as exc:
            raise RenderError(str(exc)) from None
        state.skeleton = skeleton
        if weights_joint is not None:
            state.joint, state.weights = heat_joint_index(asset, weights_joint), True
        self.state = state
        self.layout = self._layout(fb_w, fb_h)
        view_h = self._view_height()

        self.renderer = Renderer(asset, fb_w, fb_h, palette_mode=palette_mode, samples=samples, camera=camera,
                                 skinning=self._skinning,
                                 clip=clips[state.clip] if clips and not state.blending else None, ctx=self.ctx)
        if state.blending:  # frame every sample's motion
            bounds = [animated_bounds(asset, clips[c]) for c in state.blend.clips]
            self.renderer.set_bounds(np.min([lo for lo, _ in bounds], axis=0), np.max([hi for _, hi in bounds], axis=0))
        # The renderer framed the clip (and sized its ground) for the whole window; frame again for
        # the 3D viewport above the bottom panel and hand that camera to the orbit controls.
        lo, hi = self.renderer.bounds
        framed = frame(self.renderer.camera_spec, lo, hi, fb_w / view_h, facing=self.renderer.facing)
        state.camera = OrbitCamera.from_camera(framed, 0.5 * float(np.linalg.norm(hi - lo)))
        self.stats = FrameStats(skinned=bool(self.renderer.asset.skinned_instances))
        gl = self.ctx.info.get("GL_RENDERER", "?").split(" (")[0]
        self.info_line = (f"{gl}, GL {self.ctx.version_code // 100}.{self.ctx.version_code % 100 // 10}, "
                          f"{self.renderer.palette_choice.mode}, MSAA {self.renderer.samples or 'off'}")
        self._install_callbacks()
        if self.log:
            self.log(f"skeletal view: {asset.name}, {len(clips)} clip(s), window {win_w}x{win_h} "
                     f"(framebuffer {fb_w}x{fb_h})")
            self.log(f"skeletal view: {self.renderer.describe()}")

    def _layout(self, width: int, height: int) -> Layout:
        """The layout for this framebuffer size (recomputed only when the size, the clip or the mode changes)."""
        s = self.state
        key = (width, height, s.clip, s.mode)
        if getattr(self, "_layout_key", None) == key:
            return self.layout
        self._layout_key = key
        return compute_layout(width, height, [s.clip_row_text(i) for i in range(s.clip_count)], s.clip,
                              self.ui.measure, self.ui.line_height, self.scale, overlay_labels=s.overlay_widest(),
                              slider=s.blending)

    def _view_height(self) -> int:
        """Height of the 3D viewport: the window above the bottom panel."""
        return max(1, int(self.layout.bottom_panel.y))

    # -- input ----------------------------------------------------------------------------------

    def _install_callbacks(self) -> None:
        glfw, win = self.glfw, self.window
        special = {glfw.KEY_ESCAPE: "escape", glfw.KEY_UP: "up", glfw.KEY_DOWN: "down", glfw.KEY_LEFT: "left",
                   glfw.KEY_RIGHT: "right", glfw.KEY_HOME: "home", glfw.KEY_F1: "f1"}
        buttons = {glfw.MOUSE_BUTTON_LEFT: "left", glfw.MOUSE_BUTTON_RIGHT: "right",
                   glfw.MOUSE_BUTTON_MIDDLE: "middle"}

        def on_key(_win, key, _scancode, action, _mods):
            if action in (glfw.PRESS, glfw.REPEAT) and key in special:
                self.state.key(special[key])

        def on_char(_win, codepoint):
            ch = chr(codepoint)
            self.state.key("space" if ch == " " else ch)

        def on_button(_win, button, action, mods):
            if button not in buttons:
                return
            x, y = self._cursor()
            if action == glfw.PRESS:
                self.state.mouse_down(x, y, buttons[button], shift=bool(mods & glfw.MOD_SHIFT))
            else:
                self.state.mouse_up(buttons[button])

        def on_move(_win, x, y):
            self.state.mouse_move(x * self.pixel_ratio[0], y * self.pixel_ratio[1])

        def on_scroll(_win, _dx, dy):
            self.state.scroll(dy)

        glfw.set_key_callback(win, on_key)
        glfw.set_char_callback(win, on_char)
        glfw.set_mouse_button_callback(win, on_button)
        glfw.set_cursor_pos_callback(win, on_move)
        glfw.set_scroll_callback(win, on_scroll)

    def _cursor(self) -> tuple[float, float]:
        x, y = self.glfw.get_cursor_pos(self.window)
        return x * self.pixel_ratio[0], y * self.pixel_ratio[1]

    # -- the loop -------------------------------------------------------------------------------

    def run(self, frames: int | None = None, screenshot: str | None = None, fps: float = 30.0) -> ViewResult:
        """Show frames until the window closes (or Esc/Q), or exactly ``frames`` frames on a fixed
        clock of 1/``fps`` seconds a frame; then write the last frame (with the UI) to ``screenshot``."""
        glfw = self.glfw

        def step(dt: float) -> None:
            glfw.poll_events()
            self._frame(dt)

        def after() -> None:
            if self.state.screenshot_requested:
                self.state.screenshot_requested = False
                self._save_numbered_screenshot()

        drawn = self._frame_loop(step, lambda: glfw.window_should_close(self.window) or self.state.quit,
                                 frames=frames, fixed=bool(frames), fps=fps, screenshot=screenshot, after=after)
        if self.log:
            self.log(f"skeletal view: {drawn} frame(s); {self.stats.summary()}")
        return ViewResult(drawn, screenshot, self.renderer.describe(), dict(self.stats.shown), self.state.clip_name,
                          self.state.describe_playback())

    def _frame(self, dt: float) -> None:
        """Advance the Player by ``dt``, draw its pose and the UI."""
        t_start = time.perf_counter()
        glfw, state, player = self.glfw, self.state, self.player
        fb_w, fb_h = glfw.get_framebuffer_size(self.window)
        state.advance(dt)  # player.update(dt)
        if fb_w < 1 or fb_h < 1:  # minimised
            return
        if (fb_w, fb_h) != (self.renderer.width, self.renderer.height):
            self.renderer.resize(fb_w, fb_h)
        self.layout = self._layout(fb_w, fb_h)
        state.layout = self.layout
        view_h = self._view_height()

        self.renderer.camera = state.camera.camera(fb_w / view_h)
        heat = None if state.heat_joint is None else int(self.asset.rig.node_of[self.joints[state.heat_joint]])
        gpu = self.renderer.render(player, palettes=player.palettes, viewport=(0, fb_h - view_h, fb_w, view_h),
                                   skeleton=state.skeleton, weights_joint=heat, finish=True)
        self.renderer.present(self.ctx.screen)
        self.ctx.screen.use()
        self.ctx.viewport = (0, 0, fb_w, fb_h)
        self._draw_ui(fb_w, fb_h)
        self.stats.add({"update": state.timings["update"], **gpu, "frame": time.perf_counter() - t_start})

    def _save_numbered_screenshot(self) -> None:
        """The P key: the frame just drawn to ``skeletal-view-N.png`` (first free N) in the current folder."""
        import imageio.v3 as iio

        n = 1
        while os.path.exists(f"skeletal-view-{n}.png"):
            n += 1
        path = f"skeletal-view-{n}.png"
        try:
            iio.imwrite(path, self.read_screen())
            self.state.show_message(f"saved {path}")
        except OSError as exc:
            self.state.show_message(f"cannot save {path}: {exc.strerror or exc}")
        if self.log:
            self.log(f"skeletal view: {self.state.message}")

    # -- UI -------------------------------------------------------------------------------------

    def _draw_ui(self, width: int, height: int) -> None:
        ui, state, lay = self.ui, self.state, self.layout
        lh, pad = lay.line_height, lay.pad
        row_text_dy = (lay.clip_rows[0][1].h - lh) / 2 if lay.clip_rows else 0

        # Clip list: the chosen clip highlighted (clip mode); behind every other row the weight its
        # clip has in the pose now (fading out, or a blend sample's weight).
        ui.rect(lay.clip_panel, PANEL)
        ui.text(lay.clip_title.x, lay.clip_title.y + row_text_dy, "Clips", TEXT_DIM)
        ui.text(lay.clip_title.x + ui.measure("Clips  "), lay.clip_title.y + row_text_dy, "(1-9, Up/Down)", TEXT_DIM)
        if not state.clip_count:
            ui.text(lay.clip_title.x, lay.clip_title.bottom + row_text_dy, "(no clips: rest pose)", TEXT_DIM)
        weights = state.clip_weights()
        samples = set(state.blend.clips) if state.blending else set()
        for index, row in lay.clip_rows:
            current = index == state.clip and not state.blending
            weight = min(max(weights[index], 0.0), 1.0)
            if current:
                ui.rect(row, ACCENT)
            elif weight > 0.0:
                ui.rect(Rect(row.x, row.y, row.w * weight, row.h), BAR_WEIGHT if index in samples else BAR_FADE)
            value = state.clip_row_value(index, weights)
            label = ellipsize(state.clip_label(index), row.w - 3 * pad - ui.measure(value), ui.measure)
            ui.text(row.x + pad, row.y + row_text_dy, label, ACCENT_TEXT if current else TEXT)
            ui.text(row.right - pad - ui.measure(value), row.y + row_text_dy, value,
                    ACCENT_TEXT if current else (WARM if index in samples and weight > 0 else TEXT_DIM))

        for name, row in lay.overlay_rows:
            label, value = state.overlay_text(name)
            on = value not in ("off", "no skin")
            value = ellipsize(value, row.w - 4 * pad - ui.measure(label), ui.measure)
            ui.text(row.x + pad, row.y + row_text_dy, label, TEXT if on else TEXT_DIM)
            ui.text(row.right - pad - ui.measure(value), row.y + row_text_dy, value, WARM if on else TEXT_DIM)
        if lay.overlay_rows:
            top = lay.overlay_rows[0][1].y - pad / 2
            ui.rect(Rect(lay.clip_panel.x + pad, top, lay.clip_panel.w - 2 * pad, 1), BAR_TRACK)

        # Frame statistics, top right: a narrow table, numbers right-aligned.
        rows = self.stats.rows()
        info = self.info_line
        value_w = ui.measure("000.00 ms")
        panel_w = max(max(ui.measure(label) for label, _ in rows) + pad + value_w, ui.measure(info)) + 2 * pad
        margin = lay.clip_panel.x
        panel = Rect(width - margin - panel_w, margin, panel_w, (len(rows) + 1) * lh + 2 * pad)
        ui.rect(panel, PANEL)
        for k, (label, value) in enumerate(rows):
            y = panel.y + pad + k * lh
            detail = label.startswith(" ")
            ui.text(panel.x + pad, y, label, TEXT_DIM if detail else TEXT)
            ui.text(panel.right - pad - ui.measure(value), y, value, TEXT_DIM if detail else TEXT)
        ui.text(panel.x + pad, panel.y + pad + len(rows) * lh, info, TEXT_DIM)

        # Bottom panel: status, [blend slider], timeline, help.
        ui.rect(lay.bottom_panel, BOTTOM_PANEL)
        x = float(pad)
        for k, part in enumerate(state.status_text().split("   ")):
            if k:
                x += pad
                x += ui.text(x, lay.status_y, "|", BAR_TRACK) + pad
            color = WARM if k == 0 and state.playing else (TEXT if k < 2 else TEXT_DIM)
            room = width - pad - x
            if ui.measure(part) > room:  # a narrow window: cut the line here
                ui.text(x, lay.status_y, ellipsize(part, room, ui.measure), color)
                break
            x += ui.text(x, lay.status_y, part, color)
        if lay.slider is not None and state.blend is not None:
            self._draw_slider()
        bar = lay.timeline
        ui.rect(bar, BAR_TRACK)
        fraction = min(state.local_time / state.duration, 1.0) if state.duration > 0 else 0.0
        ui.rect(Rect(bar.x, bar.y, bar.w * fraction, bar.h), ACCENT)
        knob_w = max(3.0, 3 * lay.scale)
        ui.rect(Rect(bar.x + bar.w * fraction - knob_w / 2, bar.y - 3 * lay.scale, knob_w, bar.h + 6 * lay.scale),
                TEXT)
        gap = ui.measure("   ")
        for k, line in enumerate(lay.help_lines):  # "keys: action" items, keys brighter
            x = float(pad)
            for item in line.split("   "):
                keys, sep, what = item.partition(": ")
                x += ui.text(x, lay.help_y + k * lh, keys + sep, TEXT)
                x += ui.text(x, lay.help_y + k * lh, what, TEXT_DIM) + gap

        if state.show_help:
            self._draw_help(width, height)
        ui.flush(width, height)

    def _draw_slider(self) -> None:
        """The blend slider: the parameter's value, a track with a tick and the name of every
        sample above it, the filled part up to the knob."""
        ui, state, lay = self.ui, self.state, self.layout
        blend, track, s = state.blend, lay.slider, lay.scale
        label = lay.slider_label
        ui.text(label.x, track.y + track.h / 2 - lay.line_height / 2, state.slider_text(), WARM)
        ui.rect(track, BAR_TRACK)
        fraction = blend.fraction()
        ui.rect(Rect(track.x, track.y, track.w * fraction, track.h), BAR_WEIGHT)
        names = [state.clip_names[c] for c in blend.clips]
        for tick_x, name_x, name in slider_marks(track, blend.positions, names, blend.lo, blend.hi, ui.measure):
            tick_w = max(1.0, round(s))
            ui.rect(Rect(tick_x - tick_w / 2, track.y - 3 * s, tick_w, track.h + 3 * s), TICK)
            if name:
                ui.text(name_x, lay.slider_names_y, name, TEXT_DIM)
        knob_w = max(5.0, 5 * s)
        knob_x = track.x + track.w * fraction
        ui.rect(Rect(knob_x - knob_w / 2, track.y - 3 * s, knob_w, track.h + 6 * s), WARM)

    def _draw_help(self, width: int, height: int) -> None:
        ui, lay = self.ui, self.layout
        lh, pad = lay.line_height, lay.pad
        key_w = max(ui.measure(keys) for keys, _ in CONTROLS) + 3 * pad
        text_w = max(ui.measure(what) for _, what in CONTROLS)
        column_w = key_w + text_w + 2 * pad
        # One column, or two side by side when one does not fit above the bottom panel.
        columns = 2 if (len(CONTROLS) + 2) * lh + 2 * pad > lay.bottom_panel.y and 2 * column_w <= width else 1
        rows = -(-len(CONTROLS) // columns)
        w, h = columns * column_w, (rows + 2) * lh + 2 * pad
        panel = Rect((width - w) / 2, max(0.0, (lay.bottom_panel.y - h) / 2), w, h)
        ui.rect(panel, (0.05, 0.06, 0.08, 0.9))
        ui.text(panel.x + pad, panel.y + pad, "Controls  (H to close)", TEXT)
        for k, (keys, what) in enumerate(CONTROLS):
            x = panel.x + pad + (k // rows) * column_w
            y = panel.y + pad + (k % rows + 2) * lh
            ui.text(x, y, keys, WARM)
            ui.text(x + key_w, y, what, TEXT)

    # -- cleanup --------------------------------------------------------------------------------

    def close(self) -> None:
        """Free the GL objects, the window and GLFW (safe to call twice)."""
        if self.ui is not None:
            self.ui.release()
            self.ui = None
        if self.renderer is not None:
            self.renderer.release()
            self.renderer = None
        self._close_window()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def view(model=None, clip: str | int | None = None, size: tuple[int, int] | str = (1024, 640), *,
         start: float = 0.0, speed: float = 1.0, loop: str = "repeat", camera: str | None = None,
         skeleton: bool = False, weights_joint: str | int | None = None, blend=None,
         blend_value: float | None = None, palette_mode: str = "auto", samples: int = 4,
         frames: int | None = None, screenshot: str | None = None,
         log: Callable[[str], None] | None = None, skinning: str = "lbs") -> ViewResult:
    """Open the viewer on a model (path, :class:`skeletal.Asset`, or None for the demo character).

    ``blend``: start in blend mode on these blend-space samples, ``"idle:0,walk:1.4,run:4"`` or
    ``[(clip, position), ...]``; ``blend_value``: the parameter to start at (alone: blend mode on
    the default samples, see :func:`.viewer_ui.default_blend_samples`).
    With ``frames``, run that many frames on a fixed 1/30 s clock and return; with ``screenshot``
    (a .png), also save the last frame, UI included. ``skinning``: "lbs" or "dqs" (see :class:`Renderer`).
    """
    from .viewer_ui import default_blend_samples

    from .output import load_model, parse_size

    check_display()
    width, height = parse_size(size)
    if frames is not None and frames < 1:
        raise RenderError(f"frames must be at least 1, got {frames}")
    if not speed > 0:
        raise RenderError(f"speed must be positive, got {speed}")
    if skinning not in ("lbs", "dqs"):
        raise RenderError(f"skinning {skinning!r} is not one of lbs, dqs")
    if loop not in LOOP_CYCLE:
        raise RenderError(f"loop mode {loop!r} is not one of {', '.join(LOOP_CYCLE)}")
    if screenshot is not None:
        if not screenshot.lower().endswith(".png"):
            raise RenderError(f"cannot write {screenshot!r}: the screenshot must end in .png")
        folder = os.path.dirname(os.path.abspath(screenshot))
        if not os.path.isdir(folder):
            raise RenderError(f"cannot write {screenshot}: folder {folder} does not exist")
        frames = frames or 1
    asset = load_model(model)
    asset.require_nodes("show")
    index = 0
    if clip is not None:
        if not asset.clips:
            raise RenderError(f"{asset.name} has no clips (asked for {clip!r})")
        index = asset.clips.index(asset.clip(clip))
    if weights_joint is not None:
        heat_joint_index(asset, weights_joint)  # a bad joint fails before the window opens
    if blend_value is not None and not np.isfinite(blend_value):
        raise RenderError(f"--blend-value must be a number, got {blend_value}")
    if isinstance(blend, str):
        try:
            blend = parse_blend(blend)
        except ValueError as exc:
            raise RenderError(str(exc)) from None
    elif blend is None and blend_value is not None:
        blend = default_blend_samples([c.name for c in asset.clips])
        if not blend:
            raise RenderError(f"{asset.name} has {len(asset.clips)} clip(s): blend mode needs at least two")
    if blend is not None:
        blend = [(key if isinstance(key, int) else asset.clips.index(asset.clip(key)), float(position))
                 for key, position in blend]  # an unknown clip fails before the window opens
        if len({key for key, _ in blend}) != len(blend):
            raise RenderError("--blend names one clip twice")
    with Viewer(asset, (width, height), clip=index, start=start, speed=speed, loop=loop, camera=camera,
                skeleton=skeleton, weights_joint=weights_joint, blend=blend, blend_value=blend_value,
                palette_mode=palette_mode, samples=samples, log=log, skinning=skinning) as viewer:
        return viewer.run(frames=frames, screenshot=screenshot)
