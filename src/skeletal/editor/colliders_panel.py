"""Hit and hurt volumes: the inspector's collider section, their drawing in the viewport and
their gizmo.

A part of :class:`skeletal.editor.app.Editor` (a mixin: it reads and writes the editor's state,
set up in ``Editor.__init__``)."""

from __future__ import annotations

import math

import numpy as np

from .common import rgba
from .model import (
    AddCollider,
    Collider,
    KeyColliderVisibility,
    RemoveCollider,
    SetCollider,
    TransformCollider,
    collider_gizmo_matrix,
)
from .state import Panel


class CollidersPanel(Panel):
    def _collider_section(self) -> None:
        imgui, doc = self.imgui, self.doc
        vis = doc.collider_set().visible(doc.clips[self.state.clip].name if self.state.clip is not None else None, self.state.time)
        for i, c in enumerate(doc.colliders):
            label = f"{c.name}  [{c.tag} {c.shape}] on {doc.node_name(c.node)}{'' if vis[i] else ' (hidden)'}##col{i}"
            if imgui.selectable(label, i == self.state.selected_collider)[0]:
                self.state.selected_collider = i  # the gizmo now acts on it (a bone click gives it back)
            self._remember(f"collider:{c.name}")
        if self.state.selected is not None:
            for shape in ("sphere", "capsule"):
                clicked = imgui.button(f"add {shape}")
                self._remember(f"add {shape}")
                if clicked:
                    base = f"{doc.node_name(self.state.selected)}_{shape}"
                    name, k = base, 2
                    while name in [c.name for c in doc.colliders]:
                        name, k = f"{base}{k}", k + 1
                    length = self._bone_length(self.state.selected)
                    end = np.array([0.0, length, 0.0]) if shape == "capsule" else np.zeros(3)
                    col = Collider(name, self.state.selected, shape, "hurt", max(0.25 * length, 0.02), np.zeros(3), end)
                    if self.run_command(lambda: AddCollider(doc, col)):
                        self.state.selected_collider = len(doc.colliders) - 1
                imgui.same_line()
            imgui.new_line()
        i = self.state.selected_collider
        if i is None or i >= len(doc.colliders):
            return
        c = doc.colliders[i]
        key = ("collider", i, self.state.merge_serial)
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
        if self.state.clip is not None:
            if imgui.button("key visible"):
                self.run_command(lambda: KeyColliderVisibility(doc, self.state.clip, c.name, self.state.time, True))
            imgui.same_line()
            if imgui.button("key hidden"):
                self.run_command(lambda: KeyColliderVisibility(doc, self.state.clip, c.name, self.state.time, False))
            track = doc.info[self.state.clip].visibility.get(c.name)
            if track is not None:
                imgui.same_line()
                if imgui.button("unkey") and np.any(np.abs(track.times - self.state.time) < 1e-5):
                    self.run_command(lambda: KeyColliderVisibility(doc, self.state.clip, c.name, self.state.time, None))
                imgui.text_disabled("keys: " + ", ".join(f"{t:.2f}s {'on' if v else 'off'}"
                                                         for t, v in zip(track.times, track.visible)))
        if imgui.button("remove collider"):
            if self.run_command(lambda: RemoveCollider(doc, i)):
                self.state.selected_collider = None

    def _bone_length(self, node: int) -> float:
        kids = self._children[node]
        if kids:
            return float(np.linalg.norm(self.doc.asset.rig.rest[kids[0], 0:3])) or 0.1
        return float(np.linalg.norm(self.doc.asset.rig.rest[node, 0:3])) * 0.5 or 0.1

    def _draw_colliders(self, dl) -> None:
        imgui = self.imgui
        cs = self.doc.collider_set()
        clip = self.doc.clips[self.state.clip].name if self.state.clip is not None else None
        frame = cs.world(self.world, cs.visible(clip, self.state.time))
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
            if i == self.state.selected_collider:
                base = (1.0, 0.9, 0.3)
            color = rgba(imgui, *base, alpha)
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

    def _collider_gizmo(self, dl) -> bool:
        """The gizmo on the selected collider: translate moves it, rotate turns a capsule about its
        middle, scale resizes it (Y: a capsule's length; X/Z, or all three for a sphere: the radius).
        One drag is one undoable TransformCollider."""
        gizmo, doc = self.gizmo, self.doc
        i = self.state.selected_collider
        c = doc.colliders[i]
        view, proj = self._gizmo_frame(dl)
        bone = self.world[c.node]
        drag = self.state.collider_drag
        if drag is not None and drag["index"] == i:
            frame = drag["frame"]
        else:
            frame = collider_gizmo_matrix(c, bone)
        obj = gizmo.Matrix16(frame.T.ravel().astype(np.float32).tolist())
        ops = {"translate": gizmo.OPERATION.translate, "rotate": gizmo.OPERATION.rotate, "scale": gizmo.OPERATION.scale}
        mode = gizmo.MODE.local if (self.state.local_space or self.state.operation == "scale") else gizmo.MODE.world
        changed = gizmo.manipulate(view, proj, ops[self.state.operation], mode, obj)
        using = gizmo.is_using()
        if using and drag is None:
            self.state.merge_serial += 1
            drag = self.state.collider_drag = {"index": i, "start": c, "frame": frame, "key": ("collider gizmo", i,
                                                                                          self.state.merge_serial)}
        if changed and drag is not None:
            drag["frame"] = np.asarray(obj.values, np.float64).reshape(4, 4).T
            self.run_command(lambda: TransformCollider(doc, i, drag["start"], bone, drag["frame"],
                                                       merge_key=drag["key"]), quiet=True)
        if not using and drag is not None:
            self.state.collider_drag = None
            doc.end_merge()
            self.say(f"moved collider {c.name!r}")
        return using
