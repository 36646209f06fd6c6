"""The editor window (``skeletal edit``): Dear ImGui panels over the renderer, on one GL context.

Drawing: the window is GLFW's (opened, looped and closed by :class:`skeletal.render.viewer.WindowApp`,
shared with the viewer; :func:`skeletal.render.viewer.open_window` makes its OpenGL
3.3 core context moderngl adopts); the character is drawn by :class:`skeletal.render.Renderer`
through moderngl into its framebuffer (skinned by numba, back faces culled; at ``moving_scale`` of
the viewport's size without MSAA and with ``moving_lod`` times fewer triangles while something moves,
sharp with MSAA and the full mesh when still), then
:mod:`.compose` blits it into the viewport's place and has Dear ImGui (``imgui-bundle``: ImGui,
ImPlot, ImGuizmo; its OpenGL3 backend, same context, same frame) redraw only the rectangles where
the panels changed, on top of the back buffer it keeps. In :meth:`Editor.run` frames are pipelined
(:meth:`Editor.frame`): a software rasteriser finishes one frame while Python builds the next.
``imgui_bundle`` is imported before ``glfw`` so that both use the GLFW library it ships.

Everything the user changes goes through :mod:`skeletal.editor.model` commands; this module holds only
view state (selection, time, camera, toggles) and turns input into commands.

Per frame the Python work is bounded by what is visible: the pose is sampled once (numba), the dope
sheet's rows are built once per document revision (numpy key times per row) and only the visible
rows' visible keys are drawn, the curve view's samples are cached per revision.

Scripted input (``script=``, ``skeletal edit --script FILE``): a JSON list of steps fed to ImGui as
if typed and clicked, one event per frame, so that tests and demos drive the real widgets:
``{"click": TARGET}``, ``{"drag": [TARGET, TARGET], "steps": 8}``, ``{"move": TARGET}``,
``{"key": "K", "ctrl": false, "shift": false}``, ``{"text": "45"}``, ``{"wait": FRAMES}``,
``{"screenshot": "a.png"}``, ``{"close": true}`` (the window's close button). A TARGET is
``[x, y]`` (pixels), ``{"bone": NAME}`` (the joint on screen), ``{"collider": NAME}`` (its middle on
screen), ``{"item": LABEL, "fx": 0.5, "fy": 0.5}`` (a widget by its label, at a fraction of its
rectangle); a dict target may add ``"dx"``/``"dy"`` pixels. A drag places both ends when it starts.
"""

from __future__ import annotations

import ctypes
import gc
import json
import math
import os
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..render.errors import RenderError
from ..render.viewer import WindowApp
from . import keys as K
from .compose import Compositor
from .euler import ORDERS, euler_to_quat, quat_to_euler
from .model import (
    AddCollider, ClearPoseEdits, Collider, DeleteClip, DeleteKeys, EditDocument, EditError, InsertPoseKeys,
    KeyColliderVisibility, MoveKeys, PasteKeys, RemoveCollider, RenameClip, SetClipLength, SetCollider, SetFps,
    SetInterpolation, SetKeyValue, SetPose, TransformCollider, autosave_path, collider_gizmo_matrix, copy_keys,
    duplicate_clip, ik_chain, ik_pose, new_clip,
)

AUTOSAVE_SECONDS = 60.0
PATHS = ("translation", "rotation", "scale")
PATH_SHORT = {"translation": "loc", "rotation": "rot", "scale": "scale"}

SHORTCUTS = [
    ("Ctrl+S / Ctrl+Shift+S", "save / save as"),
    ("Ctrl+Z / Ctrl+Y (Ctrl+Shift+Z)", "undo / redo"),
    ("K / Shift+K", "insert key: selected bone / whole pose"),
    ("Delete or X", "delete the selected keys"),
    ("Ctrl+C / Ctrl+V", "copy keys / paste them at the current time"),
    ("Space", "play / pause"),
    ("L", "loop on / off"),
    ("Left / Right", "previous / next frame"),
    ("Up / Down", "previous / next key of the selection"),
    ("Home / End", "first / last frame"),
    ("W / E / R", "gizmo: translate / rotate / scale"),
    ("T", "gizmo space: local / world"),
    ("I", "IK drag: move a hand or foot with the translate gizmo"),
    ("O", "onion skin on / off"),
    ("B", "skeleton overlay on / off"),
    ("C", "colliders on / off"),
    ("N", "snap keys and time to frames on / off"),
    ("Tab", "dope sheet / curve view"),
    ("Escape", "clear the key selection; the gizmo back on the bone"),
    ("F1 or ?", "this help"),
    ("Ctrl+Q", "quit (asks to save unsaved changes)"),
    ("mouse", "left click: select a bone; right drag: orbit; middle drag: pan; wheel: zoom"),
    ("dope sheet", "click/shift-click keys, drag to move, click the ruler to scrub"),
    ("curve view", "drag key points (values); cubic keys show their tangents"),
]


def _imports():
    """imgui_bundle first (it points pyGLFW at the GLFW library it ships), then glfw."""
    try:
        from imgui_bundle import imgui, imguizmo, implot
    except ImportError as exc:
        raise RenderError(f"the editor needs imgui-bundle ({exc}): pip install 'skeletal[edit]'") from None
    try:
        import glfw
    except ImportError as exc:
        raise RenderError(f"the editor needs the glfw package ({exc}): pip install glfw") from None
    return imgui, implot, imguizmo.im_guizmo, glfw


# ImGuiMouseCursor -> GLFW standard cursor (GLFW 3.4+ names; ImGui 1.92's order: arrow, text input,
# resize all, ns, ew, nesw, nwse, hand, wait, progress, not allowed)
_CURSOR_SHAPES = {0: "ARROW_CURSOR", 1: "IBEAM_CURSOR", 2: "RESIZE_ALL_CURSOR", 3: "RESIZE_NS_CURSOR",
                  4: "RESIZE_EW_CURSOR", 5: "RESIZE_NESW_CURSOR", 6: "RESIZE_NWSE_CURSOR", 7: "POINTING_HAND_CURSOR",
                  10: "NOT_ALLOWED_CURSOR"}


def _col(imgui, r, g, b, a=1.0) -> int:
    return imgui.IM_COL32(int(r * 255), int(g * 255), int(b * 255), int(a * 255))


@dataclass
class EditorResult:
    """What a run did: frames drawn, screenshot written, frame times (ms) and the document state."""

    frames: int
    screenshot: str | None
    frame_ms: list[float] = field(default_factory=list)
    saved: str | None = None
    dirty: bool = False
    message: str = ""

    def summary(self) -> str:
        if not self.frame_ms:
            return f"{self.frames} frames"
        ms = np.asarray(self.frame_ms[min(10, len(self.frame_ms) // 4):])  # past the warm-up frames
        return (f"{self.frames} frames, frame time median {np.median(ms):.1f} ms, mean {ms.mean():.1f} ms, "
                f"p90 {np.percentile(ms, 90):.1f} ms")


class Editor(WindowApp):
    """The editor window on an :class:`EditDocument`; :meth:`run` runs it."""

    LEFT_W, RIGHT_W, BOTTOM_H, ROW_H, LABEL_W = 230, 330, 250, 18, 170

    def __init__(self, doc: EditDocument, size=(1280, 720), *, clip: int = 0, samples: int = 4,
                 autosave_seconds: float = AUTOSAVE_SECONDS, log: Callable[[str], None] | None = None,
                 moving_scale: float = 0.5, moving_lod: float = 4.0):
        from ..render.viewer import check_display

        check_display()
        self.imgui, self.implot, self.gizmo, self.glfw = _imports()
        self.doc = doc
        self.log = log
        self.autosave_seconds = float(autosave_seconds)
        self._moving_scale_arg = moving_scale
        self.moving_lod = max(float(moving_lod), 1.0)
        self.window = None
        self.ctx = None
        self.renderer = None
        self._imgui_ready = False
        self._errors: list[str] = []
        try:
            self._open(size, samples)
        except BaseException:
            self.close()
            raise
        # view state
        self.clip = min(max(clip, 0), len(doc.clips) - 1) if doc.clips else None
        self.time = 0.0
        self.playing = False
        self.loop = True
        self.selected: int | None = None
        self.key_selection: set[tuple[int, str, float]] = set()
        self.clipboard = []
        self.operation = "rotate"
        self.local_space = True
        self.ik_mode = False
        self.onion = False
        self.onion_frames = 3
        self.onion_step = 2
        self.skeleton = True
        self.show_colliders = True
        self.snap = True
        self.euler_order = "XYZ"
        self.use_quaternion = False
        self.tab = "dope"
        self.search = ""
        self.show_help = False
        self.message = ""
        self.message_time = 0.0
        self.curve_path = "rotation"
        self.selected_collider: int | None = None
        self.rename_text = ""
        # A model read from another format (BVH, FBX...) is saved as glTF beside it.
        self.save_as_text = (os.path.splitext(doc.path)[0] + ".glb") if doc.path else "edited.glb"
        self.quit = False
        self.want_close = False
        self._closing_popup = False
        self._save_as_popup = False
        self._drag = None
        self._collider_drag = None  # the collider gizmo's drag: start collider, frame, merge key
        self._merge_serial = 0
        self._rows_key = None
        self._rows = []
        self._curve_key = None
        self._curve = None
        self._pose_key = None
        self._item_rects: dict[str, tuple[float, float, float, float]] = {}
        self._script: list = []
        self._last_autosave = time.perf_counter()
        self._autosaved_revision = doc.revision
        self.frame_ms: list[float] = []
        self.frame_cpu_ms: list[float] = []
        self.frame_main_ms: list[float] = []
        self.timing_log: list[dict] = []
        self.view_renders = 0
        self.stage_finish = False  # wait for the GL after the 3D view (profiling: timings per stage)
        self.pipelined = False  # frame() swaps the previous frame itself (see frame(); run() sets it)
        self._unpresented = False
        self._children = self._child_lists()
        f = self.imgui.TreeNodeFlags_  # (leaf, selected) -> the bone tree's flags, as ints (enum arithmetic is slow)
        base = f.open_on_arrow | f.span_avail_width
        self._tree_flags = {(leaf, sel): int(base | (f.leaf if leaf else 0) | (f.selected if sel else 0))
                            for leaf in (False, True) for sel in (False, True)}
        self._segments = self._bone_segments()
        # The heap is large and long-lived (numba, LLVM, ImGui's bindings): without this, the garbage
        # collector's full passes over it took ~8% of a playing frame's CPU.
        gc.collect()
        gc.freeze()

    # -- setup --------------------------------------------------------------------------------------------

    def _open(self, size, samples) -> None:
        from ..render.camera import frame
        from ..render.renderer import Renderer
        from ..render.viewer_ui import OrbitCamera

        imgui, glfw = self.imgui, self.glfw
        self.moving_scale = min(max(float(self._moving_scale_arg), 0.1), 1.0)
        self._open_window(size, f"skeletal edit - {os.path.basename(self.doc.path or self.doc.asset.name)}")
        fb_w, fb_h = glfw.get_framebuffer_size(self.window)
        vw, vh = self._viewport_size(fb_w, fb_h)
        # The 3D view is rendered at the viewport's size into the renderer's framebuffer (MSAA resolved
        # into a texture) and blitted into the viewport's place by the compositor (.compose).
        # Skinning on the CPU (numba) and back faces culled: llvmpipe's vertex stage runs on this thread.
        self.renderer = Renderer(self.doc.asset, vw, vh, samples=samples, ctx=self.ctx,
                                 clip=self.doc.clips[0] if self.doc.clips else None, cull=True, cpu_skinning=True)
        # While things move (playing, dragging) frames come from a renderer without MSAA at
        # ``moving_scale`` of the viewport's size, scaled up by the blit (llvmpipe's cost is per
        # fragment); a still view is drawn again sharp, with MSAA. The moving view draws a coarser mesh
        # too (``moving_lod``: about 1/4 of the triangles by vertex clustering, see render.lod): llvmpipe
        # sets triangles up on this thread.
        self._fast_renderer = None
        if self.renderer.samples or self.moving_scale < 1.0 or self.moving_lod > 1.0:
            fw, fh = self._moving_size(vw, vh)
            self._fast_renderer = Renderer(self.doc.asset, fw, fh, samples=0, ctx=self.ctx,
                                           clip=self.doc.clips[0] if self.doc.clips else None, cull=True,
                                           cpu_skinning=True, lod=self.moving_lod)
        self._make_view_texture(vw, vh)
        self._view_source = self._view_fbo
        self._damaged: list[tuple[float, float, float, float]] = []  # window rectangles whose pictures changed
        self.compositor = Compositor(self.ctx)
        self.view_rect = (float(self.LEFT_W), 20.0, float(vw), float(vh))
        lo, hi = self.renderer.bounds
        framed = frame(self.renderer.camera_spec, lo, hi, vw / vh, facing=self.renderer.facing)
        self.camera = OrbitCamera.from_camera(framed, 0.5 * float(np.linalg.norm(hi - lo)))
        imgui.create_context()
        self.implot.create_context()
        self._imgui_ready = True
        io = imgui.get_io()
        io.set_ini_filename("")  # no imgui.ini next to the user's files
        imgui.style_colors_dark()
        address = ctypes.cast(self.window, ctypes.c_void_p).value
        imgui.backends.glfw_init_for_opengl(address, True)
        imgui.backends.opengl3_init("#version 330")
        self._window_address = address
        # Window and framebuffer sizes follow GLFW's events instead of being asked for every frame (each
        # question is an X server round trip: ~45 us idle, ~0.3 ms while llvmpipe keeps both cores busy).
        self._window_size = tuple(glfw.get_window_size(self.window))
        self._framebuffer_size = tuple(glfw.get_framebuffer_size(self.window))
        glfw.set_window_size_callback(self.window, lambda _w, w, h: setattr(self, "_window_size", (w, h)))
        glfw.set_framebuffer_size_callback(self.window, lambda _w, w, h: setattr(self, "_framebuffer_size", (w, h)))
        self._last_frame_time = time.perf_counter()
        self._cursor_shown = None
        self._cursors: dict[int, object] = {}

    def _make_view_texture(self, w: int, h: int) -> None:
        if getattr(self, "_view_fbo", None) is not None:
            self._view_fbo.release()
            self._view_tex.release()
        self._view_tex = self.ctx.texture((w, h), 4)
        self._view_fbo = self.ctx.framebuffer(color_attachments=[self._view_tex])

    def _moving_size(self, vw: int, vh: int) -> tuple[int, int]:
        return max(1, round(vw * self.moving_scale)), max(1, round(vh * self.moving_scale))

    def _viewport_size(self, fb_w, fb_h):
        return max(fb_w - self.LEFT_W - self.RIGHT_W, 1), max(fb_h - self.BOTTOM_H - 20, 1)

    def _child_lists(self) -> list[list[int]]:
        parents = self.doc.asset.rig.parents
        children: list[list[int]] = [[] for _ in range(len(parents))]
        for i, p in enumerate(parents):
            if p >= 0:
                children[p].append(i)
        return children

    def _bone_segments(self) -> np.ndarray:
        from ..render.overlays import bone_segments

        return bone_segments(self.doc.asset)

    # -- running ------------------------------------------------------------------------------------------

    def load_script(self, steps: list) -> None:
        """Queue scripted input (see the module docstring)."""
        for step in steps:
            self._script.extend(self._expand(step))

    def run(self, frames: int | None = None, screenshot: str | None = None, fps: float = 30.0) -> EditorResult:
        """Show frames until the window closes (or ``frames`` frames on a fixed 1/``fps`` s clock; also
        until a script has run out when one was given); ``screenshot``: the last frame as PNG."""
        scripted = bool(self._script)

        def step(dt: float) -> None:
            try:
                self.frame(dt)
            except Exception as exc:  # never lose the document: autosave, then report
                saved = self._autosave(force=True)
                where = f"; the document was autosaved to {saved}" if saved else ""
                raise EditError(f"the editor failed ({type(exc).__name__}: {exc}){where}") from exc

        def stop() -> bool:
            return self.quit or (scripted and not self._script and frames is None)

        self.pipelined = True  # frame() shows the previous frame itself
        try:
            drawn = self._frame_loop(step, stop, frames=frames, fixed=frames is not None or scripted, fps=fps,
                                     screenshot=screenshot, swap=False)
            self.present()
        finally:
            self.pipelined = False
        result = EditorResult(drawn, screenshot, list(self.frame_ms), self.doc.path, self.doc.dirty, self.message)
        if self.log:
            self.log(f"skeletal edit: {result.summary()}")
        return result

    def frame(self, dt: float) -> None:
        """One frame: input, time, the 3D view (queued to the GL first, so that it is rasterised while
        the panels are built), panels (ImGui's draw data), ImGui's changed rectangles over the view.

        With :attr:`pipelined` (set by :meth:`run`), the frame also shows the previous one: once this
        frame's Python is done it waits for the previous frame's rasterising and swaps, then queues
        this frame's ImGui drawing and returns without waiting for it; so a software rasteriser
        (llvmpipe) draws one frame while Python builds the next (the picture is one frame's Python
        late). Without it the frame's GL work is finished on return and the caller swaps."""
        t0, c0, m0 = time.perf_counter(), time.process_time(), time.thread_time()
        imgui, glfw = self.imgui, self.glfw
        glfw.poll_events()
        if glfw.window_should_close(self.window):
            glfw.set_window_should_close(self.window, False)
            self.request_quit()
        self._script_step()
        imgui.backends.opengl3_new_frame()
        self._platform_new_frame()
        imgui.new_frame()
        self.gizmo.begin_frame()
        fb_w, fb_h = self._framebuffer_size
        if fb_w < 1 or fb_h < 1:
            imgui.render()
            return
        vw, vh = self._viewport_size(fb_w, fb_h)
        if (vw, vh) != (self.renderer.width, self.renderer.height):
            self.present()
            self.renderer.resize(vw, vh)
            if self._fast_renderer is not None:
                self._fast_renderer.resize(*self._moving_size(vw, vh))
            self._make_view_texture(vw, vh)
            self._view_source = self._view_fbo
        self._advance(dt)
        self._compute_pose()
        self._aim_view(vw, vh)  # the camera this frame's view and overlay share (panels may move it)
        t_view = time.perf_counter()
        self._render_view()  # rasterised while the panels' Python runs
        t_view = time.perf_counter() - t_view
        self._menu_bar()
        self._bones_panel(fb_h)
        self._inspector(fb_w, fb_h)
        self._bottom_panel(fb_w, fb_h)
        self._viewport(fb_w, fb_h)
        self._help()
        self._popups()
        self._shortcuts()
        self._status(fb_w, fb_h)
        imgui.render()
        t_python = time.perf_counter()
        self.present()  # the previous frame (pipelined): its rasterising overlapped the Python above
        self.compositor.check_kept((fb_w, fb_h))
        t_present = time.perf_counter()
        if self.stage_finish:  # profiling: the GL work so far (the view's) counted before ImGui's
            self.ctx.finish()
        t_ui = time.perf_counter()
        t_view += t_ui - t_present
        # only the rectangles that changed are redrawn (.compose)
        extra, self._damaged = self._damaged, []
        self.compositor.compose(imgui, imgui.backends.opengl3_render_draw_data, (fb_w, fb_h),
                                view=(self._view_source, self.view_rect), extra=extra)
        self._autosave()
        if self.pipelined:
            self.compositor.flush()  # rasterised while the next frame's Python runs; shown by its present()
            self._unpresented = True
        else:
            self.ctx.finish()
        end = time.perf_counter()
        self.frame_ms.append(1000.0 * (end - t0))
        self.frame_cpu_ms.append(1000.0 * (time.process_time() - c0))  # all threads (llvmpipe's too)
        self.frame_main_ms.append(1000.0 * (time.thread_time() - m0))  # this thread's CPU
        # wall ms: the Python side (input, pose, panels, draw lists), waiting for the previous frame and
        # swapping (pipelined), the 3D view (drawn when something moved), ImGui's GL drawing
        self.timings = {"python": 1000.0 * (t_python - t0 - t_view), "present": 1000.0 * (t_present - t_python),
                        "view": 1000.0 * t_view, "ui_gl": 1000.0 * (end - t_ui)}
        self.timing_log.append(self.timings)

    def _platform_new_frame(self) -> None:
        """What ImGui's GLFW backend does before a frame, from state GLFW's events keep (its own
        ``glfw_new_frame`` asks the X server for the window size, framebuffer size and cursor each
        frame: ~1.4 ms of a playing frame on llvmpipe). Input arrives through the backend's callbacks;
        gamepads are not used."""
        imgui, glfw = self.imgui, self.glfw
        io = imgui.get_io()
        (w, h), (fw, fh) = self._window_size, self._framebuffer_size
        io.display_size = imgui.ImVec2(float(w), float(h))
        if w > 0 and h > 0:
            io.display_framebuffer_scale = imgui.ImVec2(fw / w, fh / h)
        now = time.perf_counter()
        io.delta_time = max(now - self._last_frame_time, 1e-6)
        self._last_frame_time = now
        cursor = int(imgui.get_mouse_cursor())
        if cursor != self._cursor_shown and not (io.config_flags & imgui.ConfigFlags_.no_mouse_cursor_change):
            self._cursor_shown = cursor
            if cursor == int(imgui.MouseCursor_.none) or io.mouse_draw_cursor:
                glfw.set_input_mode(self.window, glfw.CURSOR, glfw.CURSOR_HIDDEN)
            else:
                if cursor not in self._cursors:
                    shape = _CURSOR_SHAPES.get(cursor, "ARROW_CURSOR")
                    self._cursors[cursor] = glfw.create_standard_cursor(getattr(glfw, shape))
                glfw.set_cursor(self.window, self._cursors[cursor])
                glfw.set_input_mode(self.window, glfw.CURSOR, glfw.CURSOR_NORMAL)

    def present(self) -> None:
        """Show the frame :meth:`frame` left queued (pipelined): wait for its rasterising, swap."""
        if self._unpresented:
            self._unpresented = False
            self.glfw.swap_buffers(self.window)

    def _aim_view(self, vw: int, vh: int) -> None:
        """This frame's camera for both renderers and the overlay, and the key of the view's picture."""
        cam = self.camera
        self.renderer.camera = cam.camera(vw / vh)
        if self._fast_renderer is not None:
            self._fast_renderer.camera = self.renderer.camera
        self._view_aim = (vw, vh, cam.yaw, cam.pitch, cam.distance, tuple(cam.target))

    def _render_view(self) -> None:
        """The character at the current pose into the view's framebuffer (blitted in by the compositor)."""
        imgui = self.imgui
        moving = (self.playing or bool(self._drag) or getattr(self, "_gizmo_active", False)
                  or imgui.is_mouse_down(1) or imgui.is_mouse_down(2) or imgui.is_any_item_active())
        renderer = self._fast_renderer if (moving and self._fast_renderer is not None) else self.renderer
        onion = (self.onion and self.clip is not None, self.onion_frames, self.onion_step, self.loop)
        key = (self._pose_key, self._view_aim, id(renderer), onion)
        if key == getattr(self, "_view_key", None):
            return  # nothing moved: the texture still shows this frame (llvmpipe's rasterising is the big cost)
        self._view_key = key
        renderer.render((self.world[None], None))
        if onion[0]:
            self._draw_onion(renderer)
        if renderer.samples:
            self.ctx.copy_framebuffer(self._view_fbo, renderer.framebuffer)  # resolves MSAA, colour only
            self._view_source = self._view_fbo
        else:  # blitted into the window as it is: no copy that would wait for the rasteriser here
            self._view_source = renderer.framebuffer
        self.compositor.flush()  # the view rasterised while the panels are built
        self._damaged.append(self.view_rect)
        self.view_renders += 1

    # -- document helpers ---------------------------------------------------------------------------------

    @property
    def duration(self) -> float:
        return self.doc.clips[self.clip].duration if self.clip is not None else 0.0

    @property
    def fps(self) -> float:
        return self.doc.info[self.clip].fps if self.clip is not None else 30.0

    def run_command(self, make: Callable, quiet: bool = False):
        """Build and execute a command; an EditError becomes the status message."""
        try:
            cmd = self.doc.execute(make())
        except (EditError, ValueError) as exc:
            self.say(str(exc))
            return None
        if not quiet:
            self.say(cmd.label)
        return cmd

    def say(self, text: str) -> None:
        self.message, self.message_time = text, time.perf_counter()
        if self.log:
            self.log(f"skeletal edit: {text}")

    def snap_time(self, t: float) -> float:
        t = min(max(t, 0.0), max(self.duration, 0.0)) if self.duration > 0 else max(t, 0.0)
        return self.doc.snap_time(self.clip, t) if (self.snap and self.clip is not None) else float(np.float32(t))

    def set_time(self, t: float) -> None:
        self.time = self.snap_time(t)

    def select_clip(self, index: int | None) -> None:
        if index is not None and not 0 <= index < len(self.doc.clips):
            index = len(self.doc.clips) - 1 if self.doc.clips else None
        if index != self.clip:
            self.key_selection.clear()
        self.clip = index
        self.time = min(self.time, self.duration)

    def save(self, path: str | None = None) -> bool:
        try:
            written = self.doc.save(path)
        except EditError as exc:
            self.say(str(exc))
            return False
        self.say(f"saved {written}")
        stale = autosave_path(written)
        if os.path.exists(stale):  # the saved file supersedes it
            try:
                os.unlink(stale)
            except OSError:
                pass
        self.glfw.set_window_title(self.window, f"skeletal edit - {os.path.basename(written)}")
        return True

    def request_quit(self) -> None:
        if self.doc.dirty:
            self._closing_popup = True
        else:
            self.quit = True

    def _autosave(self, force: bool = False) -> str | None:
        now = time.perf_counter()
        if not force and (now - self._last_autosave < self.autosave_seconds or self.doc.revision == self._autosaved_revision):
            return None
        self._last_autosave = now
        if not self.doc.dirty and not force:
            return None
        path = autosave_path(self.doc.path or os.path.join(os.getcwd(), "untitled.glb"))
        try:
            self.doc.write_copy(path)
        except Exception as exc:  # noqa: BLE001 - autosave must never take the editor down
            if self.log:
                self.log(f"skeletal edit: autosave to {path} failed: {exc}")
            return None
        self._autosaved_revision = self.doc.revision
        if self.log:
            self.log(f"skeletal edit: autosaved to {path}")
        return path

    # -- time and pose --------------------------------------------------------------------------------------

    def _advance(self, dt: float) -> None:
        if not self.playing or self.clip is None:
            return
        d = self.duration
        if d <= 0:
            self.playing = False
            return
        t = self.time + dt
        if t > d:
            if self.loop:
                t = t % d
            else:
                t, self.playing = d, False
        self.time = t

    def _compute_pose(self) -> None:
        key = (self.doc.revision, self.clip, self.time)
        if key == self._pose_key:
            return
        self._pose_key = key
        self.pose = self.doc.pose(self.clip, self.time)
        self.world = self.doc.world(self.pose)

    # -- panels -------------------------------------------------------------------------------------------

    def _fixed_window(self, name: str, x, y, w, h, flags=0) -> bool:
        imgui = self.imgui
        imgui.set_next_window_pos(imgui.ImVec2(x, y))
        imgui.set_next_window_size(imgui.ImVec2(w, h))
        f = (imgui.WindowFlags_.no_move | imgui.WindowFlags_.no_resize | imgui.WindowFlags_.no_collapse
             | imgui.WindowFlags_.no_saved_settings | flags)
        expanded, _ = imgui.begin(name, None, f)
        return expanded

    def _remember(self, label: str) -> None:
        """Record the last widget's rectangle under ``label`` (script targets; only while a script runs)."""
        if not self._script:
            return
        imgui = self.imgui
        a, b = imgui.get_item_rect_min(), imgui.get_item_rect_max()
        self._item_rects[label] = (a.x, a.y, b.x - a.x, b.y - a.y)

    def _menu_bar(self) -> None:
        imgui = self.imgui
        if not imgui.begin_main_menu_bar():
            return
        if imgui.begin_menu("File"):
            if imgui.menu_item("Save", "Ctrl+S", False)[0]:
                self._save_or_ask()
            if imgui.menu_item("Save as...", "Ctrl+Shift+S", False)[0]:
                self._save_as_popup = True
            if imgui.menu_item("Quit", "Ctrl+Q", False)[0]:
                self.request_quit()
            imgui.end_menu()
        if imgui.begin_menu("Edit"):
            u = self.doc.undo_stack[-1].label if self.doc.undo_stack else ""
            r = self.doc.redo_stack[-1].label if self.doc.redo_stack else ""
            if imgui.menu_item(f"Undo {u}", "Ctrl+Z", False, bool(u))[0]:
                self._undo()
            if imgui.menu_item(f"Redo {r}", "Ctrl+Y", False, bool(r))[0]:
                self._redo()
            if imgui.menu_item("Copy keys", "Ctrl+C", False, bool(self.key_selection))[0]:
                self._copy()
            if imgui.menu_item("Paste keys", "Ctrl+V", False, bool(self.clipboard))[0]:
                self._paste()
            if imgui.menu_item("Delete keys", "Delete", False, bool(self.key_selection))[0]:
                self._delete_keys()
            if imgui.menu_item("Clear pose edits", "", False, bool(self.doc.pose_edits))[0]:
                self.run_command(lambda: ClearPoseEdits(self.doc))
            imgui.end_menu()
        if imgui.begin_menu("Key"):
            if imgui.menu_item("Insert key (selected bone)", "K", False, self.selected is not None)[0]:
                self._insert_key(whole=False)
            if imgui.menu_item("Key whole pose", "Shift+K", False, self.clip is not None)[0]:
                self._insert_key(whole=True)
            imgui.end_menu()
        if imgui.begin_menu("View"):
            self.skeleton = imgui.menu_item("Skeleton", "B", self.skeleton)[1]
            self.onion = imgui.menu_item("Onion skin", "O", self.onion)[1]
            self.show_colliders = imgui.menu_item("Colliders", "C", self.show_colliders)[1]
            self.show_help = imgui.menu_item("Help", "F1", self.show_help)[1]
            imgui.end_menu()
        dirty = " *" if self.doc.dirty else ""
        imgui.text_disabled(f"   {os.path.basename(self.doc.path or 'untitled')}{dirty}")
        imgui.end_main_menu_bar()

    def _bones_panel(self, fb_h) -> None:
        imgui = self.imgui
        top = 20
        if self._fixed_window("Bones", 0, top, self.LEFT_W, fb_h - top - self.BOTTOM_H):
            changed, self.search = imgui.input_text_with_hint("##search", "search bones", self.search)
            self._remember("bone search")
            names = self.doc.asset.rig.names
            # Deep or long names (mixamorig:LeftHandIndex3) scroll sideways instead of being cut off.
            imgui.begin_child("bone list", imgui.ImVec2(0, 0), 0, imgui.WindowFlags_.horizontal_scrollbar)
            if self.search.strip():
                needle = self.search.strip().lower()
                for i, name in enumerate(names):
                    if needle in (name or "").lower():
                        if imgui.selectable(f"{name}##b{i}", self.selected == i)[0]:
                            self.select_bone(i)
                        self._remember(f"bone:{name}")
            else:
                roots = [i for i, p in enumerate(self.doc.asset.rig.parents) if p < 0]
                tree_flags, once = self._tree_flags, int(imgui.Cond_.once)
                stack = [(r, False) for r in reversed(roots)]
                # iterative tree: (node, closing) entries; a closing entry pops the tree level
                while stack:
                    i, closing = stack.pop()
                    if closing:
                        imgui.tree_pop()
                        continue
                    kids = self._children[i]
                    flags = tree_flags[(not kids, self.selected == i)]
                    imgui.set_next_item_open(True, once)
                    label = names[i] or f"node {int(self.doc.asset.rig.node_of[i])}"
                    keyed = self.clip is not None and i in self._animated_nodes()
                    is_open = imgui.tree_node_ex(f"{label}{' *' if i in self.doc.pose_edits else ''}##t{i}", flags)
                    if imgui.is_item_hovered():
                        imgui.set_tooltip(label)  # the whole name, however deep the row
                    if keyed:
                        imgui.same_line()
                        imgui.text_disabled("\u25c6" if False else "k")
                    self._remember(f"bone:{label}")
                    if imgui.is_item_clicked() and not imgui.is_item_toggled_open():
                        self.select_bone(i)
                    if is_open:
                        stack.append((i, True))
                        stack.extend((k, False) for k in reversed(kids))
            imgui.end_child()
        imgui.end()

    def _animated_nodes(self) -> set:
        key = (self.doc.revision, self.clip)
        if getattr(self, "_animated_key", None) != key:
            self._animated_key = key
            self._animated = {t.node for t in self.doc.clips[self.clip].tracks} if self.clip is not None else set()
        return self._animated

    def select_bone(self, node: int | None) -> None:
        """Select a bone (the gizmo then acts on it, not on a collider)."""
        self.selected = node
        self.selected_collider = None

    def _inspector(self, fb_w, fb_h) -> None:
        imgui = self.imgui
        top = 20
        if self._fixed_window("Inspector", fb_w - self.RIGHT_W, top, self.RIGHT_W, fb_h - top - self.BOTTOM_H):
            if imgui.collapsing_header("Bone", imgui.TreeNodeFlags_.default_open):
                self._bone_section()
            if imgui.collapsing_header("Clip", imgui.TreeNodeFlags_.default_open):
                self._clip_section()
            if imgui.collapsing_header("Colliders", imgui.TreeNodeFlags_.default_open):
                self._collider_section()
            if imgui.collapsing_header("View"):
                self.skeleton = imgui.checkbox("skeleton overlay (B)", self.skeleton)[1]
                self.onion = imgui.checkbox("onion skin (O)", self.onion)[1]
                self.onion_frames = imgui.slider_int("ghosts each side", self.onion_frames, 1, 6)[1]
                self.onion_step = imgui.slider_int("frames apart", self.onion_step, 1, 10)[1]
                self.show_colliders = imgui.checkbox("colliders (C)", self.show_colliders)[1]
                if imgui.button("reset camera"):
                    self.camera.reset()
        imgui.end()

    def _bone_section(self) -> None:
        imgui, doc = self.imgui, self.doc
        n = self.selected
        if n is None:
            imgui.text_disabled("click a bone in the view or the tree")
            return
        imgui.text(doc.node_name(n))
        if n in doc.pose_edits:
            imgui.same_line()
            imgui.text_colored(imgui.ImVec4(1, 0.8, 0.3, 1), "(posed, not keyed: K)")
        for i, op in enumerate(("translate", "rotate", "scale")):
            if i:
                imgui.same_line()
            if imgui.radio_button(op, self.operation == op):
                self.operation = op
        imgui.same_line()
        self.local_space = imgui.checkbox("local", self.local_space)[1]
        self.ik_mode = imgui.checkbox("IK drag (I): translate a hand/foot bends its limb", self.ik_mode)[1]
        local = self.pose[n].copy()
        changed, t = imgui.drag_float3("location", [float(v) for v in local[0:3]], 0.005, 0.0, 0.0, "%.4f")
        self._remember("location")
        if changed:
            local[0:3] = t
            self._set_pose(n, local, "location")
        self._end_field_merge()
        _, self.use_quaternion = imgui.checkbox("quaternion", self.use_quaternion)
        if not self.use_quaternion:
            imgui.same_line()
            imgui.set_next_item_width(80)
            changed, k = imgui.combo("order", ORDERS.index(self.euler_order), list(ORDERS))
            if changed:
                self.euler_order = ORDERS[k]
            e = quat_to_euler(local[3:7], self.euler_order)
            changed, e2 = imgui.drag_float3("rotation", [float(v) for v in e], 0.5, 0.0, 0.0, "%.2f\u00b0")
            self._remember("rotation")
            if changed:
                local[3:7] = euler_to_quat(e2, self.euler_order)
                self._set_pose(n, local, "rotation")
        else:
            changed, q = imgui.drag_float4("xyzw", [float(v) for v in local[3:7]], 0.005, -1.0, 1.0, "%.4f")
            self._remember("rotation")
            if changed and np.linalg.norm(q) > 1e-6:
                local[3:7] = np.asarray(q) / np.linalg.norm(q)
                self._set_pose(n, local, "rotation")
        self._end_field_merge()
        changed, s = imgui.drag_float3("scale", [float(v) for v in local[7:10]], 0.005, 0.0, 0.0, "%.4f")
        self._remember("scale")
        if changed:
            local[7:10] = s
            self._set_pose(n, local, "scale")
        self._end_field_merge()
        if imgui.button("insert key (K)"):
            self._insert_key(False)
        self._remember("insert key")
        imgui.same_line()
        if imgui.button("key whole pose (Shift+K)"):
            self._insert_key(True)

    def _set_pose(self, node, local, what) -> None:
        self.run_command(lambda: SetPose(self.doc, node, local, merge_key=("field", node, what, self._merge_serial)),
                         quiet=True)

    def _end_field_merge(self) -> None:
        if self.imgui.is_item_deactivated_after_edit():
            self.doc.end_merge()
            self._merge_serial += 1

    def _clip_section(self) -> None:
        imgui, doc = self.imgui, self.doc
        for i, c in enumerate(doc.clips):
            if imgui.selectable(f"{c.name}  ({c.duration:.2f}s, {len(c.tracks)} ch)##c{i}", i == self.clip)[0]:
                self.select_clip(i)
            self._remember(f"clip:{c.name}")
        if imgui.button("new"):
            cmd = self.run_command(lambda: new_clip(doc, doc.unique_clip_name("new clip"), 1.0, 30.0))
            if cmd:
                self.select_clip(cmd.index)
        imgui.same_line()
        if imgui.button("duplicate") and self.clip is not None:
            cmd = self.run_command(lambda: duplicate_clip(doc, self.clip))
            if cmd:
                self.select_clip(cmd.index)
        imgui.same_line()
        if imgui.button("delete") and self.clip is not None:
            if self.run_command(lambda: DeleteClip(doc, self.clip)):
                self.select_clip(min(self.clip, len(doc.clips) - 1) if doc.clips else None)
        if self.clip is None:
            return
        imgui.set_next_item_width(170)
        _, self.rename_text = imgui.input_text_with_hint("##rename", doc.clips[self.clip].name, self.rename_text)
        imgui.same_line()
        if imgui.button("rename") and self.rename_text.strip():
            if self.run_command(lambda: RenameClip(doc, self.clip, self.rename_text)):
                self.rename_text = ""
        imgui.set_next_item_width(120)
        changed, length = imgui.input_float("length (s)", self.duration, 0.0, 0.0, "%.3f",
                                            imgui.InputTextFlags_.enter_returns_true)
        if changed and abs(length - self.duration) > 1e-6:
            self.run_command(lambda: SetClipLength(doc, self.clip, float(length)))
            self.time = min(self.time, self.duration)
        imgui.set_next_item_width(120)
        changed, fps = imgui.input_float("frame rate", self.fps, 0.0, 0.0, "%.2f",
                                         imgui.InputTextFlags_.enter_returns_true)
        if changed and abs(fps - self.fps) > 1e-6:
            self.run_command(lambda: SetFps(doc, self.clip, float(fps)))

    def _collider_section(self) -> None:
        imgui, doc = self.imgui, self.doc
        vis = doc.collider_set().visible(doc.clips[self.clip].name if self.clip is not None else None, self.time)
        for i, c in enumerate(doc.colliders):
            label = f"{c.name}  [{c.tag} {c.shape}] on {doc.node_name(c.node)}{'' if vis[i] else ' (hidden)'}##col{i}"
            if imgui.selectable(label, i == self.selected_collider)[0]:
                self.selected_collider = i  # the gizmo now acts on it (a bone click gives it back)
            self._remember(f"collider:{c.name}")
        if self.selected is not None:
            for shape in ("sphere", "capsule"):
                clicked = imgui.button(f"add {shape}")
                self._remember(f"add {shape}")
                if clicked:
                    base = f"{doc.node_name(self.selected)}_{shape}"
                    name, k = base, 2
                    while name in [c.name for c in doc.colliders]:
                        name, k = f"{base}{k}", k + 1
                    length = self._bone_length(self.selected)
                    end = np.array([0.0, length, 0.0]) if shape == "capsule" else np.zeros(3)
                    col = Collider(name, self.selected, shape, "hurt", max(0.25 * length, 0.02), np.zeros(3), end)
                    if self.run_command(lambda: AddCollider(doc, col)):
                        self.selected_collider = len(doc.colliders) - 1
                imgui.same_line()
            imgui.new_line()
        i = self.selected_collider
        if i is None or i >= len(doc.colliders):
            return
        c = doc.colliders[i]
        key = ("collider", i, self._merge_serial)
        changed, name = imgui.input_text("name##colname", c.name, imgui.InputTextFlags_.enter_returns_true)
        if changed and name.strip() and name != c.name:
            self.run_command(lambda: SetCollider(doc, i, c.moved(name=name.strip())))
        changed, tag = imgui.combo("tag", ("hit", "hurt").index(c.tag), ["hit", "hurt"])
        if changed:
            self.run_command(lambda: SetCollider(doc, i, c.moved(tag=("hit", "hurt")[tag])))
        changed, shape = imgui.combo("shape", ("sphere", "capsule").index(c.shape), ["sphere", "capsule"])
        if changed:
            self.run_command(lambda: SetCollider(doc, i, c.moved(shape=("sphere", "capsule")[shape], end=c.center + [0, 0.1, 0])))
        changed, r = imgui.drag_float("radius", c.radius, 0.002, 0.001, 100.0, "%.3f")
        if changed and r > 0:
            self.run_command(lambda: SetCollider(doc, i, c.moved(radius=float(r)), merge_key=key), quiet=True)
        self._end_field_merge()
        changed, p = imgui.drag_float3("center", [float(v) for v in c.center], 0.002, 0.0, 0.0, "%.3f")
        if changed:
            self.run_command(lambda: SetCollider(doc, i, c.moved(center=np.asarray(p)), merge_key=key), quiet=True)
        self._end_field_merge()
        if c.shape == "capsule":
            changed, p = imgui.drag_float3("end", [float(v) for v in c.end], 0.002, 0.0, 0.0, "%.3f")
            if changed:
                self.run_command(lambda: SetCollider(doc, i, c.moved(end=np.asarray(p)), merge_key=key), quiet=True)
            self._end_field_merge()
        if self.clip is not None:
            if imgui.button("key visible"):
                self.run_command(lambda: KeyColliderVisibility(doc, self.clip, c.name, self.time, True))
            imgui.same_line()
            if imgui.button("key hidden"):
                self.run_command(lambda: KeyColliderVisibility(doc, self.clip, c.name, self.time, False))
            track = doc.info[self.clip].visibility.get(c.name)
            if track is not None:
                imgui.same_line()
                if imgui.button("unkey") and np.any(np.abs(track.times - self.time) < 1e-5):
                    self.run_command(lambda: KeyColliderVisibility(doc, self.clip, c.name, self.time, None))
                imgui.text_disabled("keys: " + ", ".join(f"{t:.2f}s {'on' if v else 'off'}"
                                                         for t, v in zip(track.times, track.visible)))
        if imgui.button("remove collider"):
            if self.run_command(lambda: RemoveCollider(doc, i)):
                self.selected_collider = None

    def _bone_length(self, node: int) -> float:
        kids = self._children[node]
        if kids:
            return float(np.linalg.norm(self.doc.asset.rig.rest[kids[0], 0:3])) or 0.1
        return float(np.linalg.norm(self.doc.asset.rig.rest[node, 0:3])) * 0.5 or 0.1

    # -- bottom: transport, dope sheet, curves -------------------------------------------------------------

    def _bottom_panel(self, fb_w, fb_h) -> None:
        imgui, doc = self.imgui, self.doc
        if self._fixed_window("Timeline", 0, fb_h - self.BOTTOM_H, fb_w, self.BOTTOM_H):
            if imgui.button("pause" if self.playing else "play"):
                self.playing = not self.playing
            imgui.same_line()
            self.loop = imgui.checkbox("loop", self.loop)[1]
            imgui.same_line()
            self.snap = imgui.checkbox("snap", self.snap)[1]
            imgui.same_line()
            frame = self.time * self.fps
            imgui.text(f"{self.time:6.3f}s  frame {frame:6.1f} / {self.duration * self.fps:.0f}")
            imgui.same_line()
            imgui.set_next_item_width(130)
            interps = ["STEP", "LINEAR", "CUBICSPLINE"]
            channels = self._selected_channels()
            current = 1
            if channels and self.clip is not None:
                c = doc.clips[self.clip]
                i = K.track_index(c, *channels[0])
                current = interps.index(c.tracks[i].interpolation) if i >= 0 else 1
            changed, k = imgui.combo("interpolation", current, interps)
            self._remember("interpolation")
            if changed and channels:
                self.run_command(lambda: SetInterpolation(doc, self.clip, channels, interps[k]))
            imgui.same_line()
            for name, label in (("dope", "dope sheet"), ("curve", "curves")):
                if imgui.radio_button(label, self.tab == name):
                    self.tab = name
                imgui.same_line()
            imgui.new_line()
            if self.clip is None:
                imgui.text_disabled("no clip: make one in the inspector (Clip > new)")
            elif self.tab == "dope":
                self._dope_sheet()
            else:
                self._curves()
        imgui.end()

    def _selected_channels(self) -> list[tuple[int, str]]:
        """The channels of the selected keys; with none selected, the selected bone's channels."""
        channels = list(dict.fromkeys((n, p) for n, p, _ in sorted(self.key_selection)))
        if not channels and self.selected is not None and self.clip is not None:
            channels = [(t.node, t.path) for t in self.doc.clips[self.clip].tracks
                        if t.node == self.selected and t.path != "weights"]
        return channels

    def _dope_rows(self):
        """Rows (label, node, path or None, times float32 array), rebuilt when the document, clip or
        selected bone changes: one summary row per animated node, its channels under the selected one."""
        key = (self.doc.revision, self.clip, self.selected)
        if key == self._rows_key:
            return self._rows
        self._rows_key = key
        clip = self.doc.clips[self.clip]
        by_node: dict[int, list] = {}
        for tr in clip.tracks:
            if tr.path != "weights":
                by_node.setdefault(tr.node, []).append(tr)
        rows = []
        for node in sorted(by_node):
            tracks = by_node[node]
            times = np.unique(np.concatenate([t.times for t in tracks]))
            rows.append((self.doc.node_name(node), node, None, times))
            if node == self.selected:
                for tr in sorted(tracks, key=lambda t: PATHS.index(t.path)):
                    rows.append((f"    {PATH_SHORT[tr.path]} ({tr.interpolation[:3].lower()})", node, tr.path, tr.times))
        self._rows = rows
        return rows

    def _dope_sheet(self) -> None:
        imgui = self.imgui
        rows = self._dope_rows()
        origin = imgui.get_cursor_screen_pos()
        avail = imgui.get_content_region_avail()
        x0, y0, w, h = origin.x, origin.y, avail.x, avail.y
        ruler_h, rh, lw = 18.0, float(self.ROW_H), float(self.LABEL_W)
        kx0, kx1 = x0 + lw + 8, x0 + w - 12
        d = max(self.duration, 1e-3)
        scale = (kx1 - kx0) / d

        def tx(t):
            return kx0 + t * scale

        dl = imgui.get_window_draw_list()
        io = imgui.get_io()
        mx, my = io.mouse_pos.x, io.mouse_pos.y
        # ruler with frame ticks
        dl.add_rect_filled(imgui.ImVec2(x0, y0), imgui.ImVec2(x0 + w, y0 + ruler_h), _col(imgui, 0.16, 0.17, 0.2))
        fps = self.fps
        frames = int(d * fps + 1e-6)
        step = max(1, int(math.ceil(frames / max((kx1 - kx0) / 40.0, 1))))
        for f in range(0, frames + 1, step):
            x = tx(f / fps)
            dl.add_line(imgui.ImVec2(x, y0 + ruler_h - 5), imgui.ImVec2(x, y0 + ruler_h), _col(imgui, 0.6, 0.6, 0.65))
            dl.add_text(imgui.ImVec2(x + 2, y0 + 1), _col(imgui, 0.6, 0.6, 0.65), str(f))
        self._item_rects["ruler"] = (kx0, y0, kx1 - kx0, ruler_h)
        # the rows: a scrolling child; only visible rows and keys are drawn
        imgui.set_cursor_screen_pos(imgui.ImVec2(x0, y0 + ruler_h))
        imgui.begin_child("dope rows", imgui.ImVec2(w, h - ruler_h), 0, imgui.WindowFlags_.no_move)
        dl = imgui.get_window_draw_list()
        imgui.dummy(imgui.ImVec2(w - 20, rh * len(rows)))
        scroll = imgui.get_scroll_y()
        top = y0 + ruler_h
        view_h = h - ruler_h
        first = max(0, int(scroll // rh))
        last = min(len(rows), int((scroll + view_h) // rh) + 1)
        sel_by_row: dict[tuple, np.ndarray] = {}
        for n, p, t in self.key_selection:
            sel_by_row.setdefault((n, p), []).append(t)
            sel_by_row.setdefault((n, None), []).append(t)
        text_col, dim = _col(imgui, 0.9, 0.9, 0.92), _col(imgui, 0.55, 0.56, 0.6)
        key_col, key_sel, chan_col = _col(imgui, 0.85, 0.85, 0.88), _col(imgui, 1.0, 0.75, 0.2), _col(imgui, 0.55, 0.7, 0.95)
        hovered_key = None
        diamonds = []  # (x, y, selected, channel) per visible key, drawn by the GPU key layer
        for r in range(first, last):
            label, node, path, times = rows[r]
            y = top + r * rh - scroll
            if node == self.selected and path is None:
                dl.add_rect_filled(imgui.ImVec2(x0, y), imgui.ImVec2(x0 + w, y + rh), _col(imgui, 0.22, 0.3, 0.45, 0.6))
            elif r % 2:
                dl.add_rect_filled(imgui.ImVec2(x0, y), imgui.ImVec2(x0 + w, y + rh), _col(imgui, 1, 1, 1, 0.03))
            dl.add_text(imgui.ImVec2(x0 + 4, y + 2), text_col if path is None else dim, label)
            self._item_rects[f"row:{label.strip()}"] = (kx0, y, kx1 - kx0, rh)
            if len(times) == 0:
                continue
            xs = kx0 + times.astype(np.float64) * scale
            sel = sel_by_row.get((node, path))
            chosen = np.isin(times, np.asarray(sel, np.float32)) if sel else np.zeros(len(times), bool)
            diamonds.append((xs, np.full(len(xs), y + rh / 2), chosen, np.full(len(xs), path is not None)))
            if y <= my < y + rh:
                k = int(np.argmin(np.abs(xs - mx)))
                if abs(xs[k] - mx) <= 5:
                    hovered_key = (node, path, float(times[k]))
        del key_col, key_sel, chan_col
        self._draw_keys(dl, diamonds, (x0, top, w, view_h), rh * 0.3,
                        (self.doc.revision, self.clip, self.selected, first, last, scroll, x0, top, w, view_h,
                         frozenset(self.key_selection)))
        # the current time
        xt = tx(self.time)
        dl.add_line(imgui.ImVec2(xt, top), imgui.ImVec2(xt, top + view_h), _col(imgui, 1.0, 0.35, 0.3), 2.0)
        self._dope_input(hovered_key, kx0, kx1, top, view_h, scale, y0)
        imgui.end_child()

    def _draw_keys(self, dl, diamonds, rect, half, key) -> None:
        """Every visible key of the dope sheet as a diamond, in one moderngl draw into a texture that
        ImGui shows over the rows: the per-key work is numpy, and it is redone only when ``key``
        (document revision, clip, scroll, size, selection) changes."""
        x0, y0, w, h = rect
        imgui = self.imgui
        tw, th = max(int(w), 1), max(int(h), 1)
        layer = getattr(self, "_key_layer", None)
        if layer is None or layer["size"] != (tw, th):
            if layer is not None:
                layer["fbo"].release()
                layer["tex"].release()
            tex = self.ctx.texture((tw, th), 4)
            layer = self._key_layer = {"size": (tw, th), "tex": tex, "fbo": self.ctx.framebuffer([tex]), "key": None}
            if not hasattr(self, "_key_prog"):
                self._key_prog = self.ctx.program(vertex_shader=_KEY_VS, fragment_shader=_KEY_FS)
                self._key_vbo = None
        if layer["key"] != key:
            layer["key"] = key
            if diamonds:
                xs = np.concatenate([d[0] for d in diamonds]) - x0
                ys = np.concatenate([d[1] for d in diamonds]) - y0
                sel = np.concatenate([d[2] for d in diamonds])
                chan = np.concatenate([d[3] for d in diamonds])
            else:
                xs = ys = np.zeros(0)
                sel = chan = np.zeros(0, bool)
            colors = np.where(sel[:, None], _KEY_SELECTED, np.where(chan[:, None], _KEY_CHANNEL, _KEY_PLAIN))
            corners = np.array([[-1, 0], [0, -1], [1, 0], [-1, 0], [1, 0], [0, 1]], np.float64) * half
            pos = np.stack([xs, ys], 1)[:, None, :] + corners[None]  # (K, 6, 2) two triangles a diamond
            data = np.concatenate([pos, np.repeat(colors[:, None, :], 6, 1)], axis=2).astype(np.float32)
            layer["fbo"].use()
            layer["fbo"].clear(0.0, 0.0, 0.0, 0.0)
            if len(xs):
                raw = data.tobytes()
                if self._key_vbo is None or self._key_vbo.size < len(raw):
                    if self._key_vbo is not None:
                        self._key_vbo.release()
                    self._key_vbo = self.ctx.buffer(reserve=max(len(raw), 1 << 16), dynamic=True)
                self._key_vbo.write(raw)
                self._key_prog["u_size"].value = (float(tw), float(th))
                vao = self.ctx.vertex_array(self._key_prog, [(self._key_vbo, "2f 4f", "a_pos", "a_color")])
                self.ctx.disable(0x0B71)  # GL_DEPTH_TEST
                vao.render(vertices=6 * len(xs))
                vao.release()
            self.ctx.screen.use()
            self._damaged.append((x0, y0, float(tw), float(th)))
        dl.add_image(imgui.ImTextureRef(layer["tex"].glo), imgui.ImVec2(x0, y0), imgui.ImVec2(x0 + tw, y0 + th),
                     imgui.ImVec2(0, 1), imgui.ImVec2(1, 0))

    def _keys_of(self, node, path, t) -> list[tuple[int, str, float]]:
        """The keys a click on (node, path, t) selects: one channel key, or all of a summary row's at t."""
        clip = self.doc.clips[self.clip]
        out = []
        for tr in clip.tracks:
            if tr.node == node and (path is None or tr.path == path) and tr.path != "weights" and K.find_key(tr, t) >= 0:
                out.append((node, tr.path, float(np.float32(t))))
        return out

    def _dope_input(self, hovered, kx0, kx1, top, view_h, scale, ruler_y) -> None:
        imgui, doc = self.imgui, self.doc
        io = imgui.get_io()
        mx, my = io.mouse_pos.x, io.mouse_pos.y
        inside = kx0 - 6 <= mx <= kx1 + 6 and ruler_y <= my <= top + view_h
        if imgui.is_mouse_clicked(0) and inside and imgui.is_window_hovered():
            if hovered is not None and my >= top:
                keys = set(self._keys_of(*hovered))
                if io.key_shift:
                    self.key_selection ^= keys
                elif not keys <= self.key_selection:
                    self.key_selection = keys
                self._drag = {"kind": "keys", "x": mx, "applied": 0.0, "serial": self._merge_serial}
                self._merge_serial += 1
            else:
                if not io.key_shift and my >= top:
                    self.key_selection.clear()
                self._drag = {"kind": "scrub"}
                self.playing = False
                self.set_time((mx - kx0) / scale)
        if self._drag and imgui.is_mouse_down(0):
            if self._drag["kind"] == "scrub":
                self.set_time((mx - kx0) / scale)
            elif self._drag["kind"] == "keys" and self.key_selection:
                want = (mx - self._drag["x"]) / scale
                if self.snap:
                    want = round(want * self.fps) / self.fps
                delta = want - self._drag["applied"]
                if abs(delta) > 1e-6:
                    refs = sorted(self.key_selection)
                    def move():
                        cmd = MoveKeys(doc, self.clip, refs, delta, merge_key=("drag", self._drag["serial"]))
                        self._last_move_dt = cmd.dt  # clamped at 0
                        return cmd

                    cmd = self.run_command(move, quiet=True)
                    if cmd is not None:
                        moved = self._last_move_dt
                        self._drag["applied"] += moved
                        self.key_selection = {(n, p, float(np.float32(t + moved))) for n, p, t in refs}
                        self.say(f"moved {len(refs)} key(s) by {self._drag['applied']:+.3f}s")
        if self._drag and imgui.is_mouse_released(0):
            self._drag = None
            self.doc.end_merge()

    def _curve_data(self):
        """Samples (T,), values (T, C) of the selected bone's chosen channel, and its track; cached."""
        key = (self.doc.revision, self.clip, self.selected, self.curve_path)
        if key == self._curve_key:
            return self._curve
        self._curve_key = key
        self._curve = None
        if self.selected is None or self.clip is None:
            return None
        clip = self.doc.clips[self.clip]
        i = K.track_index(clip, self.selected, self.curve_path)
        if i < 0:
            return None
        tr = clip.tracks[i]
        from ..clip import Clip
        from ..sampling import sample

        ts = np.linspace(0.0, max(clip.duration, 1e-3), 240)
        one = Clip("_", [tr])
        rig = self.doc.asset.rig
        pose, _ = sample(one, ts, rig.rest, self.doc.asset.morph_start, self.doc.asset.rest_morph)
        sl = {"translation": slice(0, 3), "rotation": slice(3, 7), "scale": slice(7, 10)}[tr.path]
        self._curve = (ts, pose[:, tr.node, sl].copy(), tr)
        return self._curve

    def _curves(self) -> None:
        imgui, implot, doc = self.imgui, self.implot, self.doc
        for p in PATHS:
            if imgui.radio_button(p, self.curve_path == p):
                self.curve_path = p
            imgui.same_line()
        imgui.new_line()
        data = self._curve_data()
        if data is None:
            imgui.text_disabled("select an animated bone to see its curves")
            return
        ts, vals, tr = data
        names = ("x", "y", "z", "w")
        if implot.begin_plot("##curves", imgui.ImVec2(-1, -1)):
            implot.setup_axes("time (s)", tr.path)
            implot.setup_axis_limits(implot.ImAxis_.x1, -0.02, max(self.duration, 1e-3) + 0.02, imgui.Cond_.once)
            for c in range(vals.shape[1]):
                implot.plot_line(names[c], ts, np.ascontiguousarray(vals[:, c]))
            kv = K.key_values(tr)
            tin, tout = K.key_tangents(tr)
            times = tr.times.astype(np.float64)
            if tr.interpolation == "CUBICSPLINE" and len(times) > 1:
                gaps = np.diff(times)
                before = np.r_[gaps[:1], gaps] / 3.0
                after = np.r_[gaps, gaps[-1:]] / 3.0
                for c in range(kv.shape[1]):
                    xs = np.stack([times - before, times, times + after, np.full_like(times, np.nan)], 1).ravel()
                    ys = np.stack([kv[:, c] - tin[:, c] * before, kv[:, c], kv[:, c] + tout[:, c] * after,
                                   np.full_like(times, np.nan)], 1).ravel().astype(np.float64)
                    implot.plot_line(f"tangents {names[c]}", xs, ys)
            for k in range(len(times)):
                for c in range(kv.shape[1]):
                    changed, x, y, _, _, held = implot.drag_point(
                        k * 4 + c, float(times[k]), float(kv[k, c]), imgui.ImVec4(1, 0.8, 0.3, 1), 4,
                        implot.DragToolFlags_.none, None, None, False)
                    if changed:
                        value = kv[k].astype(np.float64).copy()
                        value[c] = y
                        self.run_command(lambda: SetKeyValue(doc, self.clip, (tr.node, tr.path, float(times[k])), value,
                                                             merge_key=("curve", k, c, self._merge_serial)), quiet=True)
            if imgui.is_mouse_released(0):
                self.doc.end_merge()
                self._merge_serial += 1
            implot.end_plot()

    # -- the 3D viewport ------------------------------------------------------------------------------------

    def project(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """World points (..., 3) -> screen pixels (..., 2) in the viewport, and whether each is in front."""
        vx, vy, vw, vh = self.view_rect
        cam = self.renderer.camera
        p = np.asarray(points, np.float64)
        h = np.concatenate([p, np.ones(p.shape[:-1] + (1,))], axis=-1) @ cam.view_projection.T
        w = h[..., 3:4]
        ndc = h[..., :2] / np.where(np.abs(w) < 1e-12, 1e-12, w)
        sx = vx + (ndc[..., 0] * 0.5 + 0.5) * vw
        sy = vy + (1.0 - (ndc[..., 1] * 0.5 + 0.5)) * vh
        return np.stack([sx, sy], axis=-1), w[..., 0] > 1e-6

    def _viewport(self, fb_w, fb_h) -> None:
        imgui = self.imgui
        vx, vy = float(self.LEFT_W), 20.0
        vw, vh = self._viewport_size(fb_w, fb_h)
        self.view_rect = (vx, vy, float(vw), float(vh))
        dl = imgui.get_background_draw_list()  # over the 3D view, which the compositor blits in first
        # clipped to the view: the compositor then skips comparing it when the view is redrawn anyway
        dl.push_clip_rect(imgui.ImVec2(vx, vy), imgui.ImVec2(vx + vw, vy + vh))
        try:
            self._viewport_overlay(dl, vx, vy, vw, vh)
        finally:
            dl.pop_clip_rect()

    def _viewport_overlay(self, dl, vx, vy, vw, vh) -> None:
        imgui, gizmo = self.imgui, self.gizmo
        if self.skeleton:
            self._draw_skeleton(dl, self.world, _col(imgui, 0.95, 0.9, 0.3, 0.9), 2.0, joints=True)
        if self.show_colliders and self.doc.colliders:
            self._draw_colliders(dl)
        io = imgui.get_io()
        mx, my = io.mouse_pos.x, io.mouse_pos.y
        over_view = vx <= mx < vx + vw and vy <= my < vy + vh and not io.want_capture_mouse
        # gizmo on the selected bone
        using = False
        if self.selected_collider is not None and self.selected_collider < len(self.doc.colliders):
            using = self._collider_gizmo(dl)
        elif self.selected is not None:
            using = self._gizmo(dl)
        if over_view and not using and not gizmo.is_over():
            if imgui.is_mouse_clicked(0):
                self.select_bone(self.pick(mx, my))
            if imgui.is_mouse_dragging(1) or (imgui.is_mouse_dragging(0) and io.key_alt):
                self.camera.orbit(io.mouse_delta.x, io.mouse_delta.y)
            if imgui.is_mouse_dragging(2):
                self.camera.pan(io.mouse_delta.x, io.mouse_delta.y, vh)
            if io.mouse_wheel:
                self.camera.zoom(io.mouse_wheel)
        # a label for the selection
        if self.selected is not None:
            (sx, sy), front = self.project(self.world[self.selected, :3, 3])
            if front:
                dl.add_text(imgui.ImVec2(sx + 8, sy - 18), _col(imgui, 1, 1, 1), self.doc.node_name(self.selected))
        mode = f"{self.operation}{' (IK)' if self.ik_mode and self.operation == 'translate' else ''}, " \
               f"{'local' if self.local_space else 'world'}"
        dl.add_text(imgui.ImVec2(vx + 8, vy + 6), _col(imgui, 0.85, 0.85, 0.9), f"gizmo: {mode}   F1: help")

    def pick(self, x: float, y: float, radius: float = 14.0) -> int | None:
        """The joint drawn nearest to screen point (x, y), within ``radius`` pixels (None if none)."""
        nodes = np.asarray(self.doc.joints or range(len(self.doc.asset.rig)), dtype=np.int64)
        screen, front = self.project(self.world[nodes, :3, 3])
        d = np.hypot(screen[:, 0] - x, screen[:, 1] - y)
        d[~front] = np.inf
        k = int(np.argmin(d)) if len(d) else -1
        return int(nodes[k]) if k >= 0 and d[k] <= radius else None

    def _draw_skeleton(self, dl, world, color, thickness, joints=False) -> None:
        imgui = self.imgui
        seg = self._segments
        if len(seg) == 0:
            return
        pts, front = self.project(world[:, :3, 3])
        a, b = pts[seg[:, 0]], pts[seg[:, 1]]
        ok = front[seg[:, 0]] & front[seg[:, 1]]
        for (ax, ay), (bx, by) in zip(a[ok].tolist(), b[ok].tolist()):
            dl.add_line(imgui.ImVec2(ax, ay), imgui.ImVec2(bx, by), color, thickness)
        if joints:
            nodes = self.doc.joints
            for i, (x, y) in zip(nodes, pts[nodes].tolist()):
                sel = i == self.selected
                dl.add_circle_filled(imgui.ImVec2(x, y), 5.0 if sel else 3.0,
                                     _col(imgui, 1.0, 0.4, 0.2) if sel else color)

    def _draw_onion(self, renderer) -> None:
        """Ghost skeletons ``onion_frames`` poses apart by ``onion_step`` frames before (blue) and after
        (green) the current time, fading with distance: GL lines over the character in the view's
        framebuffer (one draw; numpy builds the vertices)."""
        n, step = self.onion_frames, self.onion_step / self.fps
        offsets = np.r_[-np.arange(n, 0, -1), np.arange(1, n + 1)] * step
        times = self.time + offsets
        d = self.duration
        times = np.mod(times, d) if (self.loop and d > 0) else np.clip(times, 0, d)
        key = (self.doc.revision, self.clip, self.time, n, step, self.loop)
        if getattr(self, "_onion_key", None) != key:
            self._onion_key = key
            self._onion_world = self.doc.world(self.doc.poses(self.clip, times))
        seg = self._segments
        if len(seg) == 0:
            return
        fade = 1.0 - (np.abs(offsets) / step - 1) / (n + 0.5)
        colors = np.where((offsets < 0)[:, None], [0.4, 0.6, 1.0], [0.4, 1.0, 0.55])
        rgba = np.concatenate([colors, 0.55 * fade[:, None]], axis=1)  # (G, 4)
        ends = self._onion_world[:, :, :3, 3][:, seg]  # (G, S, 2, 3)
        data = np.concatenate([ends, np.broadcast_to(rgba[:, None, None, :], ends.shape[:3] + (4,))], axis=3)
        raw = np.ascontiguousarray(data, np.float32).tobytes()
        ctx = self.ctx
        if getattr(self, "_ghost_prog", None) is None:
            self._ghost_prog = ctx.program(vertex_shader=_GHOST_VS, fragment_shader=_KEY_FS)
            self._ghost_vbo = None
        if self._ghost_vbo is None or self._ghost_vbo.size < len(raw):
            if self._ghost_vbo is not None:
                self._ghost_vbo.release()
            self._ghost_vbo = ctx.buffer(reserve=max(len(raw), 1 << 14), dynamic=True)
        self._ghost_vbo.write(raw)
        self._ghost_prog["u_view_proj"].write(np.ascontiguousarray(renderer.camera.view_projection.T, np.float32))
        vao = ctx.vertex_array(self._ghost_prog, [(self._ghost_vbo, "3f 4f", "a_pos", "a_color")])
        renderer.framebuffer.use()
        ctx.disable(0x0B71)  # GL_DEPTH_TEST: over the character, as the skeleton overlay
        ctx.enable(0x0BE2)  # GL_BLEND
        ctx.blend_func = 0x0302, 0x0303  # SRC_ALPHA, ONE_MINUS_SRC_ALPHA
        vao.render(1, vertices=len(data.reshape(-1, 7)))  # GL_LINES
        vao.release()

    def _draw_colliders(self, dl) -> None:
        imgui = self.imgui
        cs = self.doc.collider_set()
        clip = self.doc.clips[self.clip].name if self.clip is not None else None
        frame = cs.world(self.world, cs.visible(clip, self.time))
        cam = self.renderer.camera
        vh = self.view_rect[3]
        focal = 0.5 * vh / math.tan(math.radians(cam.fov) / 2)
        eye = np.asarray(cam.eye)
        sa, fa = self.project(frame.a)
        sb, fb = self.project(frame.b)
        for i in range(len(cs)):
            if not (fa[i] and fb[i]):
                continue
            base = (1.0, 0.3, 0.25) if frame.tag[i] == 0 else (0.3, 0.85, 1.0)
            alpha = 0.9 if frame.visible[i] else 0.25
            if i == self.selected_collider:
                base = (1.0, 0.9, 0.3)
            color = _col(imgui, *base, alpha)
            ra = frame.radius[i] * focal / max(np.linalg.norm(frame.a[i] - eye), 1e-6)
            rb = frame.radius[i] * focal / max(np.linalg.norm(frame.b[i] - eye), 1e-6)
            a, b = sa[i], sb[i]
            dl.add_circle(imgui.ImVec2(*a), float(ra), color, 24, 1.5)
            if frame.capsule[i]:
                dl.add_circle(imgui.ImVec2(*b), float(rb), color, 24, 1.5)
                axis = b - a
                length = np.linalg.norm(axis)
                if length > 1e-6:
                    nrm = np.array([-axis[1], axis[0]]) / length
                    for s in (1, -1):
                        dl.add_line(imgui.ImVec2(*(a + s * nrm * ra)), imgui.ImVec2(*(b + s * nrm * rb)), color, 1.5)

    def _gizmo_frame(self, dl):
        """Point ImGuizmo at the 3D view's rectangle and draw list; returns its (view, projection)."""
        gizmo = self.gizmo
        vx, vy, vw, vh = self.view_rect
        gizmo.set_drawlist(dl)
        gizmo.set_rect(vx, vy, vw, vh)
        cam = self.renderer.camera
        return (gizmo.Matrix16(cam.view.T.ravel().astype(np.float32).tolist()),
                gizmo.Matrix16(cam.projection.T.ravel().astype(np.float32).tolist()))

    def _gizmo(self, dl) -> bool:
        gizmo, doc = self.gizmo, self.doc
        n = self.selected
        view, proj = self._gizmo_frame(dl)
        world = self.world[n].copy()
        ik = self.ik_mode and self.operation == "translate"
        obj = gizmo.Matrix16(world.T.ravel().astype(np.float32).tolist())
        ops = {"translate": gizmo.OPERATION.translate, "rotate": gizmo.OPERATION.rotate, "scale": gizmo.OPERATION.scale}
        mode = gizmo.MODE.local if (self.local_space or self.operation == "scale") else gizmo.MODE.world
        changed = gizmo.manipulate(view, proj, ops[self.operation], mode, obj)
        using = gizmo.is_using()
        if using and not getattr(self, "_gizmo_active", False):
            self._gizmo_active = True
            self._merge_serial += 1
        if changed:
            new = np.asarray(obj.values, np.float64).reshape(4, 4).T
            key = ("gizmo", n, self._merge_serial)
            if ik:
                try:
                    ik_chain(doc, n)
                    self.run_command(lambda: ik_pose(doc, self.clip, self.time, n, new[:3, 3], merge_key=key), quiet=True)
                except EditError as exc:
                    self.say(str(exc))
            else:
                local = doc.local_from_world(self.pose, n, new)
                if self.operation == "rotate":  # keep location and scale exactly
                    keep = self.pose[n].copy()
                    keep[3:7] = local[3:7]
                    local = keep
                elif self.operation == "translate":
                    keep = self.pose[n].copy()
                    keep[0:3] = local[0:3]
                    local = keep
                self.run_command(lambda: SetPose(doc, n, local, merge_key=key), quiet=True)
            self._compute_pose()
        if not using and getattr(self, "_gizmo_active", False):
            self._gizmo_active = False
            doc.end_merge()
        return using

    def _collider_gizmo(self, dl) -> bool:
        """The gizmo on the selected collider: translate moves it, rotate turns a capsule about its
        middle, scale resizes it (Y: a capsule's length; X/Z, or all three for a sphere: the radius).
        One drag is one undoable TransformCollider."""
        gizmo, doc = self.gizmo, self.doc
        i = self.selected_collider
        c = doc.colliders[i]
        view, proj = self._gizmo_frame(dl)
        bone = self.world[c.node]
        drag = getattr(self, "_collider_drag", None)
        if drag is not None and drag["index"] == i:
            frame = drag["frame"]
        else:
            frame = collider_gizmo_matrix(c, bone)
        obj = gizmo.Matrix16(frame.T.ravel().astype(np.float32).tolist())
        ops = {"translate": gizmo.OPERATION.translate, "rotate": gizmo.OPERATION.rotate, "scale": gizmo.OPERATION.scale}
        mode = gizmo.MODE.local if (self.local_space or self.operation == "scale") else gizmo.MODE.world
        changed = gizmo.manipulate(view, proj, ops[self.operation], mode, obj)
        using = gizmo.is_using()
        if using and drag is None:
            self._merge_serial += 1
            drag = self._collider_drag = {"index": i, "start": c, "frame": frame, "key": ("collider gizmo", i,
                                                                                          self._merge_serial)}
        if changed and drag is not None:
            drag["frame"] = np.asarray(obj.values, np.float64).reshape(4, 4).T
            self.run_command(lambda: TransformCollider(doc, i, drag["start"], bone, drag["frame"],
                                                       merge_key=drag["key"]), quiet=True)
        if not using and drag is not None:
            self._collider_drag = None
            doc.end_merge()
            self.say(f"moved collider {c.name!r}")
        return using

    # -- commands from keys and menus -----------------------------------------------------------------------

    def _insert_key(self, whole: bool) -> None:
        if self.clip is None:
            self.say("no clip to key: make one first")
            return
        if not whole and self.selected is None:
            self.say("select a bone to key (or Shift+K for the whole pose)")
            return
        nodes = None if whole else [self.selected]
        self.run_command(lambda: InsertPoseKeys(self.doc, self.clip, self.time, nodes))

    def _delete_keys(self) -> None:
        if self.key_selection and self.clip is not None:
            refs = sorted(self.key_selection)
            if self.run_command(lambda: DeleteKeys(self.doc, self.clip, refs)):
                self.key_selection.clear()

    def _copy(self) -> None:
        if self.key_selection and self.clip is not None:
            try:
                self.clipboard = copy_keys(self.doc, self.clip, sorted(self.key_selection))
                self.say(f"copied {len(self.clipboard)} key(s)")
            except EditError as exc:
                self.say(str(exc))

    def _paste(self) -> None:
        if self.clip is not None:
            self.run_command(lambda: PasteKeys(self.doc, self.clip, self.time, self.clipboard))

    def _undo(self) -> None:
        cmd = self.doc.undo()
        self.say(f"undo {cmd.label}" if cmd else "nothing to undo")
        self._after_history()

    def _redo(self) -> None:
        cmd = self.doc.redo()
        self.say(f"redo {cmd.label}" if cmd else "nothing to redo")
        self._after_history()

    def _after_history(self) -> None:
        self.select_clip(self.clip if self.clip is not None and self.clip < len(self.doc.clips) else
                         (0 if self.doc.clips else None))
        self.key_selection = {k for k in self.key_selection if self._key_exists(k)}

    def _key_exists(self, ref) -> bool:
        clip = self.doc.clips[self.clip]
        i = K.track_index(clip, ref[0], ref[1])
        return i >= 0 and K.find_key(clip.tracks[i], ref[2]) >= 0

    def _save_or_ask(self) -> None:
        if self.doc.path and os.path.splitext(self.doc.path)[1].lower() in (".glb", ".gltf"):
            self.save()
        else:
            self._save_as_popup = True

    def _step_key(self, direction: int) -> None:
        clip = self.doc.clips[self.clip]
        nodes = {self.selected} if self.selected is not None else None
        times = [tr.times for tr in clip.tracks if nodes is None or tr.node in nodes]
        if not times:
            return
        allt = np.unique(np.concatenate(times)).astype(np.float64)
        if direction > 0:
            later = allt[allt > self.time + 1e-5]
            if len(later):
                self.time = float(later[0])
        else:
            earlier = allt[allt < self.time - 1e-5]
            if len(earlier):
                self.time = float(earlier[-1])

    def _shortcuts(self) -> None:
        imgui = self.imgui
        io = imgui.get_io()
        if io.want_text_input:
            return
        Key = imgui.Key
        pressed = imgui.is_key_pressed
        ctrl, shift = io.key_ctrl, io.key_shift
        if ctrl:
            if pressed(Key.z, False):
                self._redo() if shift else self._undo()
            elif pressed(Key.y, False):
                self._redo()
            elif pressed(Key.s, False):
                self._save_as_popup = True if shift else self._save_as_popup
                if not shift:
                    self._save_or_ask()
            elif pressed(Key.c, False):
                self._copy()
            elif pressed(Key.v, False):
                self._paste()
            elif pressed(Key.q, False):
                self.request_quit()
            return
        if pressed(Key.k, False):
            self._insert_key(whole=shift)
        if pressed(Key.delete, False) or pressed(Key.x, False):
            self._delete_keys()
        if pressed(Key.space, False):
            self.playing = not self.playing
        if pressed(Key.l, False):
            self.loop = not self.loop
        if self.clip is not None:
            if pressed(Key.right_arrow):
                self.playing = False
                self.set_time(self.doc.snap_time(self.clip, self.time) + 1.0 / self.fps)
            if pressed(Key.left_arrow):
                self.playing = False
                self.set_time(self.doc.snap_time(self.clip, self.time) - 1.0 / self.fps)
            if pressed(Key.up_arrow):
                self._step_key(1)
            if pressed(Key.down_arrow):
                self._step_key(-1)
            if pressed(Key.home, False):
                self.time = 0.0
            if pressed(Key.end, False):
                self.time = self.duration
        for key, op in ((Key.w, "translate"), (Key.e, "rotate"), (Key.r, "scale")):
            if pressed(key, False):
                self.operation = op
        if pressed(Key.t, False):
            self.local_space = not self.local_space
        if pressed(Key.i, False):
            self.ik_mode = not self.ik_mode
            if self.ik_mode:
                self.operation = "translate"
        if pressed(Key.o, False):
            self.onion = not self.onion
        if pressed(Key.b, False):
            self.skeleton = not self.skeleton
        if pressed(Key.c, False):
            self.show_colliders = not self.show_colliders
        if pressed(Key.n, False):
            self.snap = not self.snap
        if pressed(Key.tab, False):
            self.tab = "curve" if self.tab == "dope" else "dope"
        if pressed(Key.escape, False):
            self.key_selection.clear()
            self.selected_collider = None
        if pressed(Key.f1, False) or (shift and pressed(Key.slash, False)):
            self.show_help = not self.show_help

    def _help(self) -> None:
        if not self.show_help:
            return
        imgui = self.imgui
        imgui.set_next_window_size(imgui.ImVec2(780, 0))
        imgui.set_next_window_pos(imgui.get_main_viewport().get_center(), imgui.Cond_.always, imgui.ImVec2(0.5, 0.5))
        expanded, opened = imgui.begin("Help: shortcuts", True, imgui.WindowFlags_.no_collapse)
        if expanded and imgui.begin_table("keys", 2, imgui.TableFlags_.row_bg):
            for keys, what in SHORTCUTS:
                imgui.table_next_row()
                imgui.table_next_column()
                imgui.text_colored(imgui.ImVec4(1, 0.8, 0.3, 1), keys)
                imgui.table_next_column()
                imgui.text(what)
            imgui.end_table()
        imgui.end()
        if opened is False:
            self.show_help = False

    def _popups(self) -> None:
        imgui = self.imgui
        if self._closing_popup:
            imgui.open_popup("Unsaved changes")
            self._closing_popup = False
        if self._save_as_popup:
            imgui.open_popup("Save as")
            self._save_as_popup = False
        center = imgui.get_main_viewport().get_center()
        imgui.set_next_window_pos(center, imgui.Cond_.appearing, imgui.ImVec2(0.5, 0.5))
        if imgui.begin_popup_modal("Unsaved changes", None, imgui.WindowFlags_.always_auto_resize)[0]:
            imgui.text(f"{os.path.basename(self.doc.path or 'untitled')} has unsaved changes.")
            imgui.text("Save them before closing?")
            if imgui.button("Save"):
                imgui.close_current_popup()
                if self.doc.path and self.save():
                    self.quit = True
                elif not self.doc.path:
                    self._save_as_popup = True
            self._remember("popup save")
            imgui.same_line()
            if imgui.button("Discard"):
                imgui.close_current_popup()
                self.quit = True
            self._remember("popup discard")
            imgui.same_line()
            if imgui.button("Cancel"):
                imgui.close_current_popup()
            imgui.end_popup()
        imgui.set_next_window_pos(center, imgui.Cond_.appearing, imgui.ImVec2(0.5, 0.5))
        if imgui.begin_popup_modal("Save as", None, imgui.WindowFlags_.always_auto_resize)[0]:
            imgui.set_next_item_width(420)
            _, self.save_as_text = imgui.input_text("path (.glb/.gltf)", self.save_as_text)
            if imgui.button("Save"):
                if self.save(self.save_as_text):
                    imgui.close_current_popup()
            imgui.same_line()
            if imgui.button("Cancel"):
                imgui.close_current_popup()
            imgui.end_popup()

    def _status(self, fb_w, fb_h) -> None:
        imgui = self.imgui
        if not self.message or time.perf_counter() - self.message_time > 6.0:
            return
        dl = imgui.get_foreground_draw_list()
        x, y = self.LEFT_W + 8, fb_h - self.BOTTOM_H - 22
        dl.add_rect_filled(imgui.ImVec2(x - 4, y - 2), imgui.ImVec2(x + 8 + 7 * len(self.message), y + 17),
                           _col(imgui, 0, 0, 0, 0.6))
        dl.add_text(imgui.ImVec2(x, y), _col(imgui, 1, 0.9, 0.5), self.message)

    # -- scripted input -------------------------------------------------------------------------------------

    def _expand(self, step: dict) -> list:
        if "wait" in step:
            return [("wait",)] * int(step["wait"])
        if "move" in step:
            return [("pos", step["move"])]
        if "click" in step:
            b = int(step.get("button", 0))
            mods = [("key", "shift", True)] if step.get("shift") else []
            unmods = [("key", "shift", False)] if step.get("shift") else []
            return mods + [("pos", step["click"]), ("wait",), ("button", b, True), ("button", b, False), ("wait",)] + unmods
        if "drag" in step:
            a, b = step["drag"]
            n = int(step.get("steps", 8))
            btn = int(step.get("button", 0))
            ends: dict = {}  # both ends placed once, when the drag starts (a dragged thing moves)
            out = [("pos", a), ("wait",), ("button", btn, True), ("wait",)]
            out += [("lerp", a, b, (k + 1) / n, ends) for k in range(n)]
            return out + [("wait",), ("button", btn, False), ("wait",)]
        if "key" in step:
            mods = [m for m in ("ctrl", "shift", "alt") if step.get(m)]
            return ([("key", m, True) for m in mods] + [("key", step["key"], True), ("key", step["key"], False)]
                    + [("key", m, False) for m in mods] + [("wait",)])
        if "text" in step:
            return [("text", step["text"]), ("wait",)]
        if "screenshot" in step:
            return [("wait",), ("screenshot", step["screenshot"])]
        if "close" in step:
            return [("close",), ("wait",)]
        raise EditError(f"unknown script step {json.dumps(step)[:80]}")

    def _target(self, target) -> tuple[float, float]:
        if isinstance(target, (list, tuple)):
            return float(target[0]), float(target[1])
        x, y = self._place(target)
        return x + float(target.get("dx", 0.0)), y + float(target.get("dy", 0.0))

    def _place(self, target) -> tuple[float, float]:
        if "bone" in target:
            node = self.doc.asset.rig.find(target["bone"])
            (x, y), _ = self.project(self.world[node, :3, 3])
            return float(x), float(y)
        if "collider" in target:
            names = [c.name for c in self.doc.colliders]
            if target["collider"] not in names:
                raise EditError(f"script: no collider {target['collider']!r}")
            c = self.doc.colliders[names.index(target["collider"])]
            (x, y), _ = self.project(collider_gizmo_matrix(c, self.world[c.node])[:3, 3])
            return float(x), float(y)
        if "item" in target:
            if target["item"] not in self._item_rects:
                raise EditError(f"script: no widget {target['item']!r} on screen")
            x, y, w, h = self._item_rects[target["item"]]
            return x + w * float(target.get("fx", 0.5)), y + h * float(target.get("fy", 0.5))
        raise EditError(f"script: cannot place {target!r}")

    def _script_step(self) -> None:
        if not self._script:
            return
        imgui, glfw = self.imgui, self.glfw
        io = imgui.get_io()
        event = self._script.pop(0)
        kind = event[0]
        if kind in ("pos", "lerp"):
            if kind == "pos":
                x, y = self._target(event[1])
            else:
                ends = event[4]
                if not ends:
                    ends["a"], ends["b"] = self._target(event[1]), self._target(event[2])
                (ax, ay), (bx, by) = ends["a"], ends["b"]
                x, y = ax + (bx - ax) * event[3], ay + (by - ay) * event[3]
            glfw.set_cursor_pos(self.window, x, y)
            io.add_mouse_pos_event(x, y)
        elif kind == "button":
            io.add_mouse_button_event(event[1], event[2])
        elif kind == "key":
            name = event[1]
            mod = {"ctrl": (imgui.Key.left_ctrl, imgui.Key.mod_ctrl), "shift": (imgui.Key.left_shift, imgui.Key.mod_shift),
                   "alt": (imgui.Key.left_alt, imgui.Key.mod_alt)}
            if name in mod:
                for k in mod[name]:
                    io.add_key_event(k, event[2])
            else:
                io.add_key_event(_key(imgui, name), event[2])
        elif kind == "text":
            for ch in event[1]:
                io.add_input_character(ord(ch))
        elif kind == "screenshot":
            import imageio.v3 as iio

            iio.imwrite(event[1], self.read_screen())
        elif kind == "close":
            glfw.set_window_should_close(self.window, True)

    # -- cleanup --------------------------------------------------------------------------------------------

    def close(self) -> None:
        gc.unfreeze()
        imgui = self.imgui
        if self._imgui_ready:
            imgui.backends.opengl3_shutdown()
            imgui.backends.glfw_shutdown()
            self.implot.destroy_context()
            imgui.destroy_context()
            self._imgui_ready = False
        if getattr(self, "_view_fbo", None) is not None:
            self._view_fbo.release()
            self._view_tex.release()
            self._view_fbo = None
        if getattr(self, "compositor", None) is not None:
            self.compositor.release()
            self.compositor = None
        layer = getattr(self, "_key_layer", None)
        if layer is not None:
            layer["fbo"].release()
            layer["tex"].release()
            self._key_layer = None
        if getattr(self, "_key_vbo", None) is not None:
            self._key_vbo.release()
            self._key_vbo = None
        if getattr(self, "_key_prog", None) is not None:
            self._key_prog.release()
            del self._key_prog
        if getattr(self, "_ghost_prog", None) is not None:
            self._ghost_prog.release()
            self._ghost_prog = None
            if self._ghost_vbo is not None:
                self._ghost_vbo.release()
                self._ghost_vbo = None
        if self.renderer is not None:
            self.renderer.release()
            self.renderer = None
        if getattr(self, "_fast_renderer", None) is not None:
            self._fast_renderer.release()
            self._fast_renderer = None
        if self.window is not None:  # the size callbacks hold this editor
            self.glfw.set_window_size_callback(self.window, None)
            self.glfw.set_framebuffer_size_callback(self.window, None)
            for cursor in getattr(self, "_cursors", {}).values():
                self.glfw.destroy_cursor(cursor)
            self._cursors = {}
        self._close_window()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


_KEY_VS = """#version 330 core
in vec2 a_pos;
in vec4 a_color;
uniform vec2 u_size;
out vec4 v_color;
void main() {
    gl_Position = vec4(a_pos.x / u_size.x * 2.0 - 1.0, 1.0 - a_pos.y / u_size.y * 2.0, 0.0, 1.0);
    v_color = a_color;
}
"""
_GHOST_VS = """#version 330 core
in vec3 a_pos;
in vec4 a_color;
uniform mat4 u_view_proj;
out vec4 v_color;
void main() {
    gl_Position = u_view_proj * vec4(a_pos, 1.0);
    v_color = a_color;
}
"""
_KEY_FS = """#version 330 core
in vec4 v_color;
out vec4 f_color;
void main() { f_color = v_color; }
"""
_KEY_PLAIN = np.array([0.85, 0.85, 0.88, 1.0])
_KEY_CHANNEL = np.array([0.55, 0.7, 0.95, 1.0])
_KEY_SELECTED = np.array([1.0, 0.75, 0.2, 1.0])

_KEY_NAMES = {"delete": "delete", "space": "space", "left": "left_arrow", "right": "right_arrow", "up": "up_arrow",
              "down": "down_arrow", "enter": "enter", "escape": "escape", "tab": "tab", "home": "home", "end": "end",
              "f1": "f1", "backspace": "backspace"}


def _key(imgui, name: str):
    low = name.lower()
    attr = _KEY_NAMES.get(low, low)
    if len(attr) == 1 and attr.isdigit():
        attr = f"_{attr}"
    try:
        return getattr(imgui.Key, attr)
    except AttributeError:
        raise EditError(f"script: unknown key {name!r}") from None


def edit(model=None, clip: str | int | None = None, size=(1280, 720), *, samples: int = 4, frames: int | None = None,
         screenshot: str | None = None, script: str | list | None = None, autosave_seconds: float = AUTOSAVE_SECONDS,
         log: Callable[[str], None] | None = None, moving_scale: float = 0.5,
         moving_lod: float = 4.0) -> EditorResult:
    """Open the editor on a model (a path; None: the built-in demo character, saved as ``demo.glb``
    in the current folder unless saved elsewhere). ``frames``/``screenshot``: run that many frames
    and save the last one (tests, pictures); ``script``: scripted input (a JSON file or a list);
    ``moving_scale``: the 3D view's resolution while something moves (1.0: full, never soft);
    ``moving_lod``: its triangles reduced about this many times meanwhile (1.0: the full mesh)."""
    from ..render.output import parse_size
    from ..render.viewer import check_display

    check_display()
    width, height = parse_size(size)
    if screenshot is not None and not screenshot.lower().endswith(".png"):
        raise RenderError(f"cannot write {screenshot!r}: the screenshot must end in .png")
    if model is None:
        from ..demo import demo_asset

        doc = EditDocument(demo_asset(), os.path.abspath("demo.glb"))
    else:
        doc = EditDocument.open(os.fspath(model))
    doc.asset.require_nodes("edit")
    index = 0
    if clip is not None:
        if not doc.clips:
            raise EditError(f"{os.path.basename(doc.path)} has no clips (asked for {clip!r})")
        from ..clip import resolve_clip

        index = doc.clips.index(resolve_clip(doc.clips, clip))
    steps = None
    if script is not None:
        if isinstance(script, (str, os.PathLike)):
            try:
                with open(script, encoding="utf-8") as f:
                    steps = json.load(f)
            except (OSError, ValueError) as exc:
                raise EditError(f"cannot read the script {script}: {exc}") from None
        else:
            steps = list(script)
    if not (autosave_seconds >= 0):
        raise EditError(f"the autosave interval must be 0 or more seconds, got {autosave_seconds}")
    with Editor(doc, (width, height), clip=index, samples=samples, autosave_seconds=autosave_seconds, log=log,
                moving_scale=moving_scale, moving_lod=moving_lod) as editor:
        if steps:
            editor.load_script(steps)
        return editor.run(frames=frames, screenshot=screenshot)
