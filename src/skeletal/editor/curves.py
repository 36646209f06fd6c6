"""The curve view: the selected channels' values over time, keys and tangents draggable.

A part of :class:`skeletal.editor.app.Editor` (a mixin: it reads and writes the editor's state,
set up in ``Editor.__init__``)."""

from __future__ import annotations

import numpy as np

from . import keys as K
from .common import PATHS
from .model import (
    SetKeyValue,
)
from .state import Panel


class Curves(Panel):
    def _curve_data(self):
        """Samples (T,), values (T, C) of the selected bone's chosen channel, and its track; cached."""
        key = (self.doc.revision, self.state.clip, self.state.selected, self.state.curve_path)
        if key == self._curve_key:
            return self._curve
        self._curve_key = key
        self._curve = None
        if self.state.selected is None or self.state.clip is None:
            return None
        clip = self.doc.clips[self.state.clip]
        i = K.track_index(clip, self.state.selected, self.state.curve_path)
        if i < 0:
            return None
        tr = clip.tracks[i]
        from ..anim.clip import Clip
        from ..anim.sampling import sample

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
            if imgui.radio_button(p, self.state.curve_path == p):
                self.state.curve_path = p
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
                        self.run_command(lambda: SetKeyValue(doc, self.state.clip, (tr.node, tr.path, float(times[k])), value,
                                                             merge_key=("curve", k, c, self.state.merge_serial)), quiet=True)
            if imgui.is_mouse_released(0):
                self.doc.end_merge()
                self.state.merge_serial += 1
            implot.end_plot()
