"""Scripted input (``script=``): steps fed to ImGui as typed and clicked, one event per frame (see
:mod:`skeletal.editor.app`).

A part of :class:`skeletal.editor.app.Editor` (a mixin: it reads and writes the editor's state,
set up in ``Editor.__init__``)."""

from __future__ import annotations

import json

from .common import imgui_key
from .model import (
    EditError,
    collider_gizmo_matrix,
)
from .state import Panel


class Scripted(Panel):
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
                io.add_key_event(imgui_key(imgui, name), event[2])
        elif kind == "text":
            for ch in event[1]:
                io.add_input_character(ord(ch))
        elif kind == "screenshot":
            import imageio.v3 as iio

            iio.imwrite(event[1], self.read_screen())
        elif kind == "close":
            glfw.set_window_should_close(self.window, True)
