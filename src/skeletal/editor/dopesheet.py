"""The bottom panel's timeline and dope sheet: rows per bone/channel, keys drawn with one GL draw,
selection, dragging and scrubbing.

A part of :class:`skeletal.editor.app.Editor` (a mixin: it reads and writes the editor's state,
set up in ``Editor.__init__``)."""

from __future__ import annotations

import math

import numpy as np

from ..render.programs import shader_source
from . import keys as K
from .common import KEY_CHANNEL, KEY_PLAIN, KEY_SELECTED, PATH_SHORT, PATHS, rgba
from .model import (
    MoveKeys,
    SetInterpolation,
)
from .state import Panel


class DopeSheet(Panel):
    # -- bottom: transport, dope sheet, curves -------------------------------------------------------------

    def _bottom_panel(self, fb_w, fb_h) -> None:
        imgui, doc = self.imgui, self.doc
        if self._fixed_window("Timeline", 0, fb_h - self.BOTTOM_H, fb_w, self.BOTTOM_H):
            if imgui.button("pause" if self.state.playing else "play"):
                self.state.playing = not self.state.playing
            imgui.same_line()
            self.state.loop = imgui.checkbox("loop", self.state.loop)[1]
            imgui.same_line()
            self.state.snap = imgui.checkbox("snap", self.state.snap)[1]
            imgui.same_line()
            frame = self.state.time * self.fps
            imgui.text(f"{self.state.time:6.3f}s  frame {frame:6.1f} / {self.duration * self.fps:.0f}")
            imgui.same_line()
            imgui.set_next_item_width(130)
            interps = ["STEP", "LINEAR", "CUBICSPLINE"]
            channels = self._selected_channels()
            current = 1
            if channels and self.state.clip is not None:
                c = doc.clips[self.state.clip]
                i = K.track_index(c, *channels[0])
                current = interps.index(c.tracks[i].interpolation) if i >= 0 else 1
            changed, k = imgui.combo("interpolation", current, interps)
            self._remember("interpolation")
            if changed and channels:
                self.run_command(lambda: SetInterpolation(doc, self.state.clip, channels, interps[k]))
            imgui.same_line()
            for name, label in (("dope", "dope sheet"), ("curve", "curves")):
                if imgui.radio_button(label, self.state.tab == name):
                    self.state.tab = name
                imgui.same_line()
            imgui.new_line()
            if self.state.clip is None:
                imgui.text_disabled("no clip: make one in the inspector (Clip > new)")
            elif self.state.tab == "dope":
                self._dope_sheet()
            else:
                self._curves()
        imgui.end()

    def _selected_channels(self) -> list[tuple[int, str]]:
        """The channels of the selected keys; with none selected, the selected bone's channels."""
        channels = list(dict.fromkeys((n, p) for n, p, _ in sorted(self.state.key_selection)))
        if not channels and self.state.selected is not None and self.state.clip is not None:
            channels = [(t.node, t.path) for t in self.doc.clips[self.state.clip].tracks
                        if t.node == self.state.selected and t.path != "weights"]
        return channels

    def _dope_rows(self):
        """Rows (label, node, path or None, times float32 array), rebuilt when the document, clip or
        selected bone changes: one summary row per animated node, its channels under the selected one."""
        key = (self.doc.revision, self.state.clip, self.state.selected)
        if key == self._rows_key:
            return self._rows
        self._rows_key = key
        clip = self.doc.clips[self.state.clip]
        by_node: dict[int, list] = {}
        for tr in clip.tracks:
            if tr.path != "weights":
                by_node.setdefault(tr.node, []).append(tr)
        rows = []
        for node in sorted(by_node):
            tracks = by_node[node]
            times = np.unique(np.concatenate([t.times for t in tracks]))
            rows.append((self.doc.node_name(node), node, None, times))
            if node == self.state.selected:
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
        dl.add_rect_filled(imgui.ImVec2(x0, y0), imgui.ImVec2(x0 + w, y0 + ruler_h), rgba(imgui, 0.16, 0.17, 0.2))
        fps = self.fps
        frames = int(d * fps + 1e-6)
        step = max(1, int(math.ceil(frames / max((kx1 - kx0) / 40.0, 1))))
        for f in range(0, frames + 1, step):
            x = tx(f / fps)
            dl.add_line(imgui.ImVec2(x, y0 + ruler_h - 5), imgui.ImVec2(x, y0 + ruler_h), rgba(imgui, 0.6, 0.6, 0.65))
            dl.add_text(imgui.ImVec2(x + 2, y0 + 1), rgba(imgui, 0.6, 0.6, 0.65), str(f))
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
        for n, p, t in self.state.key_selection:
            sel_by_row.setdefault((n, p), []).append(t)
            sel_by_row.setdefault((n, None), []).append(t)
        text_col, dim = rgba(imgui, 0.9, 0.9, 0.92), rgba(imgui, 0.55, 0.56, 0.6)
        key_col, key_sel, chan_col = rgba(imgui, 0.85, 0.85, 0.88), rgba(imgui, 1.0, 0.75, 0.2), rgba(imgui, 0.55, 0.7, 0.95)
        hovered_key = None
        diamonds = []  # (x, y, selected, channel) per visible key, drawn by the GPU key layer
        for r in range(first, last):
            label, node, path, times = rows[r]
            y = top + r * rh - scroll
            if node == self.state.selected and path is None:
                dl.add_rect_filled(imgui.ImVec2(x0, y), imgui.ImVec2(x0 + w, y + rh), rgba(imgui, 0.22, 0.3, 0.45, 0.6))
            elif r % 2:
                dl.add_rect_filled(imgui.ImVec2(x0, y), imgui.ImVec2(x0 + w, y + rh), rgba(imgui, 1, 1, 1, 0.03))
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
                        (self.doc.revision, self.state.clip, self.state.selected, first, last, scroll, x0, top, w, view_h,
                         frozenset(self.state.key_selection)))
        # the current time
        xt = tx(self.state.time)
        dl.add_line(imgui.ImVec2(xt, top), imgui.ImVec2(xt, top + view_h), rgba(imgui, 1.0, 0.35, 0.3), 2.0)
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
                self._key_prog = self.ctx.program(vertex_shader=shader_source("editor_keys.vert.glsl"), fragment_shader=shader_source("editor_flat.frag.glsl"))
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
            colors = np.where(sel[:, None], KEY_SELECTED, np.where(chan[:, None], KEY_CHANNEL, KEY_PLAIN))
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
        clip = self.doc.clips[self.state.clip]
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
                    self.state.key_selection ^= keys
                elif not keys <= self.state.key_selection:
                    self.state.key_selection = keys
                self.state.drag = {"kind": "keys", "x": mx, "applied": 0.0, "serial": self.state.merge_serial}
                self.state.merge_serial += 1
            else:
                if not io.key_shift and my >= top:
                    self.state.key_selection.clear()
                self.state.drag = {"kind": "scrub"}
                self.state.playing = False
                self.set_time((mx - kx0) / scale)
        if self.state.drag and imgui.is_mouse_down(0):
            if self.state.drag["kind"] == "scrub":
                self.set_time((mx - kx0) / scale)
            elif self.state.drag["kind"] == "keys" and self.state.key_selection:
                want = (mx - self.state.drag["x"]) / scale
                if self.state.snap:
                    want = round(want * self.fps) / self.fps
                delta = want - self.state.drag["applied"]
                if abs(delta) > 1e-6:
                    refs = sorted(self.state.key_selection)
                    def move():
                        cmd = MoveKeys(doc, self.state.clip, refs, delta, merge_key=("drag", self.state.drag["serial"]))
                        self._last_move_dt = cmd.dt  # clamped at 0
                        return cmd

                    cmd = self.run_command(move, quiet=True)
                    if cmd is not None:
                        moved = self._last_move_dt
                        self.state.drag["applied"] += moved
                        self.state.key_selection = {(n, p, float(np.float32(t + moved))) for n, p, t in refs}
                        self.say(f"moved {len(refs)} key(s) by {self.state.drag['applied']:+.3f}s")
        if self.state.drag and imgui.is_mouse_released(0):
            self.state.drag = None
            self.doc.end_merge()
