"""The 3-D viewport: projection and picking, the skeleton, onion skins and the transform gizmo.

A part of :class:`skeletal.editor.app.Editor` (a mixin: it reads and writes the editor's state,
set up in ``Editor.__init__``)."""

from __future__ import annotations

import numpy as np

from ..render.programs import shader_source
from .common import rgba
from .model import (
    EditError,
    SetPose,
    ik_chain,
    ik_pose,
)
from .state import Panel


class Viewport(Panel):
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
        if self.state.skeleton:
            self._draw_skeleton(dl, self.world, rgba(imgui, 0.95, 0.9, 0.3, 0.9), 2.0, joints=True)
        if self.state.show_colliders and self.doc.colliders:
            self._draw_colliders(dl)
        io = imgui.get_io()
        mx, my = io.mouse_pos.x, io.mouse_pos.y
        over_view = vx <= mx < vx + vw and vy <= my < vy + vh and not io.want_capture_mouse
        # gizmo on the selected bone
        using = False
        if self.state.selected_collider is not None and self.state.selected_collider < len(self.doc.colliders):
            using = self._collider_gizmo(dl)
        elif self.state.selected is not None:
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
        if self.state.selected is not None:
            (sx, sy), front = self.project(self.world[self.state.selected, :3, 3])
            if front:
                dl.add_text(imgui.ImVec2(sx + 8, sy - 18), rgba(imgui, 1, 1, 1), self.doc.node_name(self.state.selected))
        mode = f"{self.state.operation}{' (IK)' if self.state.ik_mode and self.state.operation == 'translate' else ''}, " \
               f"{'local' if self.state.local_space else 'world'}"
        dl.add_text(imgui.ImVec2(vx + 8, vy + 6), rgba(imgui, 0.85, 0.85, 0.9), f"gizmo: {mode}   F1: help")

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
                sel = i == self.state.selected
                dl.add_circle_filled(imgui.ImVec2(x, y), 5.0 if sel else 3.0,
                                     rgba(imgui, 1.0, 0.4, 0.2) if sel else color)

    def _draw_onion(self, renderer) -> None:
        """Ghost skeletons ``onion_frames`` poses apart by ``onion_step`` frames before (blue) and after
        (green) the current time, fading with distance: GL lines over the character in the view's
        framebuffer (one draw; numpy builds the vertices)."""
        n, step = self.state.onion_frames, self.state.onion_step / self.fps
        offsets = np.r_[-np.arange(n, 0, -1), np.arange(1, n + 1)] * step
        times = self.state.time + offsets
        d = self.duration
        times = np.mod(times, d) if (self.state.loop and d > 0) else np.clip(times, 0, d)
        key = (self.doc.revision, self.state.clip, self.state.time, n, step, self.state.loop)
        if getattr(self, "_onion_key", None) != key:
            self._onion_key = key
            self._onion_world = self.doc.world(self.doc.poses(self.state.clip, times))
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
            self._ghost_prog = ctx.program(vertex_shader=shader_source("editor_ghost.vert.glsl"), fragment_shader=shader_source("editor_flat.frag.glsl"))
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
        n = self.state.selected
        view, proj = self._gizmo_frame(dl)
        world = self.world[n].copy()
        ik = self.state.ik_mode and self.state.operation == "translate"
        obj = gizmo.Matrix16(world.T.ravel().astype(np.float32).tolist())
        ops = {"translate": gizmo.OPERATION.translate, "rotate": gizmo.OPERATION.rotate, "scale": gizmo.OPERATION.scale}
        mode = gizmo.MODE.local if (self.state.local_space or self.state.operation == "scale") else gizmo.MODE.world
        changed = gizmo.manipulate(view, proj, ops[self.state.operation], mode, obj)
        using = gizmo.is_using()
        if using and not getattr(self, "_gizmo_active", False):
            self._gizmo_active = True
            self.state.merge_serial += 1
        if changed:
            new = np.asarray(obj.values, np.float64).reshape(4, 4).T
            key = ("gizmo", n, self.state.merge_serial)
            if ik:
                try:
                    ik_chain(doc, n)
                    self.run_command(lambda: ik_pose(doc, self.state.clip, self.state.time, n, new[:3, 3], merge_key=key), quiet=True)
                except EditError as exc:
                    self.say(str(exc))
            else:
                local = doc.local_from_world(self.pose, n, new)
                if self.state.operation == "rotate":  # keep location and scale exactly
                    keep = self.pose[n].copy()
                    keep[3:7] = local[3:7]
                    local = keep
                elif self.state.operation == "translate":
                    keep = self.pose[n].copy()
                    keep[0:3] = local[0:3]
                    local = keep
                self.run_command(lambda: SetPose(doc, n, local, merge_key=key), quiet=True)
            self._compute_pose()
        if not using and getattr(self, "_gizmo_active", False):
            self._gizmo_active = False
            doc.end_merge()
        return using
