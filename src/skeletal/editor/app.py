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

Everything the user changes goes through :mod:`skeletal.editor.model` commands; the window holds only
view state (selection, time, camera, toggles) and turns input into commands.

The window is :class:`Editor` (this module: set-up, the frame loop, time, commands, clean-up); each
panel is a module of its own whose class :class:`Editor` inherits from, all reading and writing the
one declared view state ``self.state`` (:class:`~skeletal.editor.state.EditorState`) and using the
window's resources that :class:`~skeletal.editor.state.Panel` lists: :mod:`.bone_tree` (the bone tree),
:mod:`.inspector` (the selected bone and clip), :mod:`.colliders_panel` (hit/hurt volumes),
:mod:`.dopesheet` (timeline and dope sheet), :mod:`.curves` (the curve view), :mod:`.viewport` (the 3-D
view, picking, gizmos, onion skins), :mod:`.menu` (menu bar, shortcuts, help, popups, status line),
:mod:`.autosave` (saving) and :mod:`.script` (scripted input); :mod:`.common` holds what they share.
Their GLSL is in ``render/shaders/editor_*.glsl``.

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
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..render.errors import RenderError
from ..render.viewer import WindowApp
from .autosave import Autosave
from .bone_tree import BoneTree
from .colliders_panel import CollidersPanel
from .common import CURSOR_SHAPES, AUTOSAVE_SECONDS, import_gui
from .compose import Compositor
from .curves import Curves
from .dopesheet import DopeSheet
from .inspector import Inspector
from .menu import MenuAndShortcuts
from .model import (
    EditDocument,
    EditError,
)
from .script import Scripted
from .state import EditorState
from .viewport import Viewport


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


class Editor(MenuAndShortcuts, BoneTree, Inspector, CollidersPanel, DopeSheet, Curves, Viewport, Autosave, Scripted, WindowApp):
    """The editor window on an :class:`EditDocument`; :meth:`run` runs it."""

    LEFT_W, RIGHT_W, BOTTOM_H, ROW_H, LABEL_W = 230, 330, 250, 18, 170

    def __init__(self, doc: EditDocument, size=(1280, 720), *, clip: int = 0, samples: int = 4,
                 autosave_seconds: float = AUTOSAVE_SECONDS, log: Callable[[str], None] | None = None,
                 moving_scale: float = 0.5, moving_lod: float = 4.0):
        from ..render.viewer import check_display

        check_display()
        self.state = EditorState()
        self.imgui, self.implot, self.gizmo, self.glfw = import_gui()
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
        # the view state the panels share (see .state)
        self.state.clip = min(max(clip, 0), len(doc.clips) - 1) if doc.clips else None
        # A model read from another format (BVH, FBX...) is saved as glTF beside it.
        self.state.save_as_text = (os.path.splitext(doc.path)[0] + ".glb") if doc.path else "edited.glb"
        self.want_close = False
        self.state.closing_popup = False
        self.state.save_as_popup = False
        self.state.drag = None
        self.state.collider_drag = None  # the collider gizmo's drag: start collider, frame, merge key
        self.state.merge_serial = 0
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
            return self.state.quit or (scripted and not self._script and frames is None)

        self.pipelined = True  # frame() shows the previous frame itself
        try:
            drawn = self._frame_loop(step, stop, frames=frames, fixed=frames is not None or scripted, fps=fps,
                                     screenshot=screenshot, swap=False)
            self.present()
        finally:
            self.pipelined = False
        result = EditorResult(drawn, screenshot, list(self.frame_ms), self.doc.path, self.doc.dirty, self.state.message)
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
                    shape = CURSOR_SHAPES.get(cursor, "ARROW_CURSOR")
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
        moving = (self.state.playing or bool(self.state.drag) or getattr(self, "_gizmo_active", False)
                  or imgui.is_mouse_down(1) or imgui.is_mouse_down(2) or imgui.is_any_item_active())
        renderer = self._fast_renderer if (moving and self._fast_renderer is not None) else self.renderer
        onion = (self.state.onion and self.state.clip is not None, self.state.onion_frames, self.state.onion_step, self.state.loop)
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
        return self.doc.clips[self.state.clip].duration if self.state.clip is not None else 0.0

    @property
    def fps(self) -> float:
        return self.doc.info[self.state.clip].fps if self.state.clip is not None else 30.0

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
        self.state.message, self.state.message_time = text, time.perf_counter()
        if self.log:
            self.log(f"skeletal edit: {text}")

    def snap_time(self, t: float) -> float:
        t = min(max(t, 0.0), max(self.duration, 0.0)) if self.duration > 0 else max(t, 0.0)
        return self.doc.snap_time(self.state.clip, t) if (self.state.snap and self.state.clip is not None) else float(np.float32(t))

    def set_time(self, t: float) -> None:
        self.state.time = self.snap_time(t)

    def select_clip(self, index: int | None) -> None:
        if index is not None and not 0 <= index < len(self.doc.clips):
            index = len(self.doc.clips) - 1 if self.doc.clips else None
        if index != self.state.clip:
            self.state.key_selection.clear()
        self.state.clip = index
        self.state.time = min(self.state.time, self.duration)

    # -- time and pose --------------------------------------------------------------------------------------

    def _advance(self, dt: float) -> None:
        if not self.state.playing or self.state.clip is None:
            return
        d = self.duration
        if d <= 0:
            self.state.playing = False
            return
        t = self.state.time + dt
        if t > d:
            if self.state.loop:
                t = t % d
            else:
                t, self.state.playing = d, False
        self.state.time = t

    def _compute_pose(self) -> None:
        key = (self.doc.revision, self.state.clip, self.state.time)
        if key == self._pose_key:
            return
        self._pose_key = key
        self.pose = self.doc.pose(self.state.clip, self.state.time)
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



def edit(model=None, clip: str | int | None = None, size=(1280, 720), *, samples: int = 4, frames: int | None = None,
         screenshot: str | None = None, script: str | list | None = None, autosave_seconds: float = AUTOSAVE_SECONDS,
         log: Callable[[str], None] | None = None, moving_scale: float = 0.5,
         moving_lod: float = 4.0, up: str = "y") -> EditorResult:
    """Open the editor on a model (a path; None: the built-in demo character, saved as ``demo.glb``
    in the current folder unless saved elsewhere). ``frames``/``screenshot``: run that many frames
    and save the last one (tests, pictures); ``script``: scripted input (a JSON file or a list);
    ``moving_scale``: the 3D view's resolution while something moves (1.0: full, never soft);
    ``moving_lod``: its triangles reduced about this many times meanwhile (1.0: the full mesh);
    ``up``: the file's up axis as :func:`skeletal.load` takes it (a turned file is said on stderr)."""
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
        doc = EditDocument.open(os.fspath(model), up=up)
        turned = doc.asset.up.line(os.path.basename(doc.path))
        if turned:
            print(turned, file=sys.stderr)
    doc.asset.require_nodes("edit")
    index = 0
    if clip is not None:
        if not doc.clips:
            raise EditError(f"{os.path.basename(doc.path)} has no clips (asked for {clip!r})")
        from ..anim.clip import resolve_clip

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
