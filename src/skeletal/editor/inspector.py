"""The inspector panel (right): the selected bone's pose fields and the clip's settings.

A part of :class:`skeletal.editor.app.Editor` (a mixin: it reads and writes the editor's state,
set up in ``Editor.__init__``)."""

from __future__ import annotations

import numpy as np

from .euler import ORDERS, euler_to_quat, quat_to_euler
from .model import (
    DeleteClip,
    RenameClip,
    SetClipLength,
    SetFps,
    SetPose,
    duplicate_clip,
    new_clip,
)
from .state import Panel


class Inspector(Panel):
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
                self.state.skeleton = imgui.checkbox("skeleton overlay (B)", self.state.skeleton)[1]
                self.state.onion = imgui.checkbox("onion skin (O)", self.state.onion)[1]
                self.state.onion_frames = imgui.slider_int("ghosts each side", self.state.onion_frames, 1, 6)[1]
                self.state.onion_step = imgui.slider_int("frames apart", self.state.onion_step, 1, 10)[1]
                self.state.show_colliders = imgui.checkbox("colliders (C)", self.state.show_colliders)[1]
                if imgui.button("reset camera"):
                    self.camera.reset()
        imgui.end()

    def _bone_section(self) -> None:
        imgui, doc = self.imgui, self.doc
        n = self.state.selected
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
            if imgui.radio_button(op, self.state.operation == op):
                self.state.operation = op
        imgui.same_line()
        self.state.local_space = imgui.checkbox("local", self.state.local_space)[1]
        self.state.ik_mode = imgui.checkbox("IK drag (I): translate a hand/foot bends its limb", self.state.ik_mode)[1]
        local = self.pose[n].copy()
        changed, t = imgui.drag_float3("location", [float(v) for v in local[0:3]], 0.005, 0.0, 0.0, "%.4f")
        self._remember("location")
        if changed:
            local[0:3] = t
            self._set_pose(n, local, "location")
        self._end_field_merge()
        _, self.state.use_quaternion = imgui.checkbox("quaternion", self.state.use_quaternion)
        if not self.state.use_quaternion:
            imgui.same_line()
            imgui.set_next_item_width(80)
            changed, k = imgui.combo("order", ORDERS.index(self.state.euler_order), list(ORDERS))
            if changed:
                self.state.euler_order = ORDERS[k]
            e = quat_to_euler(local[3:7], self.state.euler_order)
            changed, e2 = imgui.drag_float3("rotation", [float(v) for v in e], 0.5, 0.0, 0.0, "%.2f\u00b0")
            self._remember("rotation")
            if changed:
                local[3:7] = euler_to_quat(e2, self.state.euler_order)
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
        self.run_command(lambda: SetPose(self.doc, node, local, merge_key=("field", node, what, self.state.merge_serial)),
                         quiet=True)

    def _end_field_merge(self) -> None:
        if self.imgui.is_item_deactivated_after_edit():
            self.doc.end_merge()
            self.state.merge_serial += 1

    def _clip_section(self) -> None:
        imgui, doc = self.imgui, self.doc
        for i, c in enumerate(doc.clips):
            if imgui.selectable(f"{c.name}  ({c.duration:.2f}s, {len(c.tracks)} ch)##c{i}", i == self.state.clip)[0]:
                self.select_clip(i)
            self._remember(f"clip:{c.name}")
        if imgui.button("new"):
            cmd = self.run_command(lambda: new_clip(doc, doc.unique_clip_name("new clip"), 1.0, 30.0))
            if cmd:
                self.select_clip(cmd.index)
        imgui.same_line()
        if imgui.button("duplicate") and self.state.clip is not None:
            cmd = self.run_command(lambda: duplicate_clip(doc, self.state.clip))
            if cmd:
                self.select_clip(cmd.index)
        imgui.same_line()
        if imgui.button("delete") and self.state.clip is not None:
            if self.run_command(lambda: DeleteClip(doc, self.state.clip)):
                self.select_clip(min(self.state.clip, len(doc.clips) - 1) if doc.clips else None)
        if self.state.clip is None:
            return
        imgui.set_next_item_width(170)
        _, self.state.rename_text = imgui.input_text_with_hint("##rename", doc.clips[self.state.clip].name, self.state.rename_text)
        imgui.same_line()
        if imgui.button("rename") and self.state.rename_text.strip():
            if self.run_command(lambda: RenameClip(doc, self.state.clip, self.state.rename_text)):
                self.state.rename_text = ""
        imgui.set_next_item_width(120)
        changed, length = imgui.input_float("length (s)", self.duration, 0.0, 0.0, "%.3f",
                                            imgui.InputTextFlags_.enter_returns_true)
        if changed and abs(length - self.duration) > 1e-6:
            self.run_command(lambda: SetClipLength(doc, self.state.clip, float(length)))
            self.state.time = min(self.state.time, self.duration)
        imgui.set_next_item_width(120)
        changed, fps = imgui.input_float("frame rate", self.fps, 0.0, 0.0, "%.2f",
                                         imgui.InputTextFlags_.enter_returns_true)
        if changed and abs(fps - self.fps) > 1e-6:
            self.run_command(lambda: SetFps(doc, self.state.clip, float(fps)))
