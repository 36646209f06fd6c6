"""The menu bar, the keyboard shortcuts, the help window, popups and the status line; the key
actions they trigger (insert/delete/copy/paste keys, undo/redo, step between keys).

A part of :class:`skeletal.editor.app.Editor` (a mixin: it reads and writes the editor's state,
set up in ``Editor.__init__``)."""

from __future__ import annotations

import os
import time

import numpy as np

from . import keys as K
from .common import SHORTCUTS, rgba
from .model import (
    ClearPoseEdits,
    DeleteKeys,
    EditError,
    InsertPoseKeys,
    PasteKeys,
    copy_keys,
)
from .state import Panel


class MenuAndShortcuts(Panel):
    def _menu_bar(self) -> None:
        imgui = self.imgui
        if not imgui.begin_main_menu_bar():
            return
        if imgui.begin_menu("File"):
            if imgui.menu_item("Save", "Ctrl+S", False)[0]:
                self._save_or_ask()
            if imgui.menu_item("Save as...", "Ctrl+Shift+S", False)[0]:
                self.state.save_as_popup = True
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
            if imgui.menu_item("Copy keys", "Ctrl+C", False, bool(self.state.key_selection))[0]:
                self._copy()
            if imgui.menu_item("Paste keys", "Ctrl+V", False, bool(self.state.clipboard))[0]:
                self._paste()
            if imgui.menu_item("Delete keys", "Delete", False, bool(self.state.key_selection))[0]:
                self._delete_keys()
            if imgui.menu_item("Clear pose edits", "", False, bool(self.doc.pose_edits))[0]:
                self.run_command(lambda: ClearPoseEdits(self.doc))
            imgui.end_menu()
        if imgui.begin_menu("Key"):
            if imgui.menu_item("Insert key (selected bone)", "K", False, self.state.selected is not None)[0]:
                self._insert_key(whole=False)
            if imgui.menu_item("Key whole pose", "Shift+K", False, self.state.clip is not None)[0]:
                self._insert_key(whole=True)
            imgui.end_menu()
        if imgui.begin_menu("View"):
            self.state.skeleton = imgui.menu_item("Skeleton", "B", self.state.skeleton)[1]
            self.state.onion = imgui.menu_item("Onion skin", "O", self.state.onion)[1]
            self.state.show_colliders = imgui.menu_item("Colliders", "C", self.state.show_colliders)[1]
            self.state.show_help = imgui.menu_item("Help", "F1", self.state.show_help)[1]
            imgui.end_menu()
        dirty = " *" if self.doc.dirty else ""
        imgui.text_disabled(f"   {os.path.basename(self.doc.path or 'untitled')}{dirty}")
        imgui.end_main_menu_bar()

    # -- commands from keys and menus -----------------------------------------------------------------------

    def _insert_key(self, whole: bool) -> None:
        if self.state.clip is None:
            self.say("no clip to key: make one first")
            return
        if not whole and self.state.selected is None:
            self.say("select a bone to key (or Shift+K for the whole pose)")
            return
        nodes = None if whole else [self.state.selected]
        self.run_command(lambda: InsertPoseKeys(self.doc, self.state.clip, self.state.time, nodes))

    def _delete_keys(self) -> None:
        if self.state.key_selection and self.state.clip is not None:
            refs = sorted(self.state.key_selection)
            if self.run_command(lambda: DeleteKeys(self.doc, self.state.clip, refs)):
                self.state.key_selection.clear()

    def _copy(self) -> None:
        if self.state.key_selection and self.state.clip is not None:
            try:
                self.state.clipboard = copy_keys(self.doc, self.state.clip, sorted(self.state.key_selection))
                self.say(f"copied {len(self.state.clipboard)} key(s)")
            except EditError as exc:
                self.say(str(exc))

    def _paste(self) -> None:
        if self.state.clip is not None:
            self.run_command(lambda: PasteKeys(self.doc, self.state.clip, self.state.time, self.state.clipboard))

    def _undo(self) -> None:
        cmd = self.doc.undo()
        self.say(f"undo {cmd.label}" if cmd else "nothing to undo")
        self._after_history()

    def _redo(self) -> None:
        cmd = self.doc.redo()
        self.say(f"redo {cmd.label}" if cmd else "nothing to redo")
        self._after_history()

    def _after_history(self) -> None:
        self.select_clip(self.state.clip if self.state.clip is not None and self.state.clip < len(self.doc.clips) else
                         (0 if self.doc.clips else None))
        self.state.key_selection = {k for k in self.state.key_selection if self._key_exists(k)}

    def _key_exists(self, ref) -> bool:
        clip = self.doc.clips[self.state.clip]
        i = K.track_index(clip, ref[0], ref[1])
        return i >= 0 and K.find_key(clip.tracks[i], ref[2]) >= 0

    def _save_or_ask(self) -> None:
        if self.doc.path and os.path.splitext(self.doc.path)[1].lower() in (".glb", ".gltf"):
            self.save()
        else:
            self.state.save_as_popup = True

    def _step_key(self, direction: int) -> None:
        clip = self.doc.clips[self.state.clip]
        nodes = {self.state.selected} if self.state.selected is not None else None
        times = [tr.times for tr in clip.tracks if nodes is None or tr.node in nodes]
        if not times:
            return
        allt = np.unique(np.concatenate(times)).astype(np.float64)
        if direction > 0:
            later = allt[allt > self.state.time + 1e-5]
            if len(later):
                self.state.time = float(later[0])
        else:
            earlier = allt[allt < self.state.time - 1e-5]
            if len(earlier):
                self.state.time = float(earlier[-1])

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
                self.state.save_as_popup = True if shift else self.state.save_as_popup
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
            self.state.playing = not self.state.playing
        if pressed(Key.l, False):
            self.state.loop = not self.state.loop
        if self.state.clip is not None:
            if pressed(Key.right_arrow):
                self.state.playing = False
                self.set_time(self.doc.snap_time(self.state.clip, self.state.time) + 1.0 / self.fps)
            if pressed(Key.left_arrow):
                self.state.playing = False
                self.set_time(self.doc.snap_time(self.state.clip, self.state.time) - 1.0 / self.fps)
            if pressed(Key.up_arrow):
                self._step_key(1)
            if pressed(Key.down_arrow):
                self._step_key(-1)
            if pressed(Key.home, False):
                self.state.time = 0.0
            if pressed(Key.end, False):
                self.state.time = self.duration
        for key, op in ((Key.w, "translate"), (Key.e, "rotate"), (Key.r, "scale")):
            if pressed(key, False):
                self.state.operation = op
        if pressed(Key.t, False):
            self.state.local_space = not self.state.local_space
        if pressed(Key.i, False):
            self.state.ik_mode = not self.state.ik_mode
            if self.state.ik_mode:
                self.state.operation = "translate"
        if pressed(Key.o, False):
            self.state.onion = not self.state.onion
        if pressed(Key.b, False):
            self.state.skeleton = not self.state.skeleton
        if pressed(Key.c, False):
            self.state.show_colliders = not self.state.show_colliders
        if pressed(Key.n, False):
            self.state.snap = not self.state.snap
        if pressed(Key.tab, False):
            self.state.tab = "curve" if self.state.tab == "dope" else "dope"
        if pressed(Key.escape, False):
            self.state.key_selection.clear()
            self.state.selected_collider = None
        if pressed(Key.f1, False) or (shift and pressed(Key.slash, False)):
            self.state.show_help = not self.state.show_help

    def _help(self) -> None:
        if not self.state.show_help:
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
            self.state.show_help = False

    def _popups(self) -> None:
        imgui = self.imgui
        if self.state.closing_popup:
            imgui.open_popup("Unsaved changes")
            self.state.closing_popup = False
        if self.state.save_as_popup:
            imgui.open_popup("Save as")
            self.state.save_as_popup = False
        center = imgui.get_main_viewport().get_center()
        imgui.set_next_window_pos(center, imgui.Cond_.appearing, imgui.ImVec2(0.5, 0.5))
        if imgui.begin_popup_modal("Unsaved changes", None, imgui.WindowFlags_.always_auto_resize)[0]:
            imgui.text(f"{os.path.basename(self.doc.path or 'untitled')} has unsaved changes.")
            imgui.text("Save them before closing?")
            if imgui.button("Save"):
                imgui.close_current_popup()
                if self.doc.path and self.save():
                    self.state.quit = True
                elif not self.doc.path:
                    self.state.save_as_popup = True
            self._remember("popup save")
            imgui.same_line()
            if imgui.button("Discard"):
                imgui.close_current_popup()
                self.state.quit = True
            self._remember("popup discard")
            imgui.same_line()
            if imgui.button("Cancel"):
                imgui.close_current_popup()
            imgui.end_popup()
        imgui.set_next_window_pos(center, imgui.Cond_.appearing, imgui.ImVec2(0.5, 0.5))
        if imgui.begin_popup_modal("Save as", None, imgui.WindowFlags_.always_auto_resize)[0]:
            imgui.set_next_item_width(420)
            _, self.state.save_as_text = imgui.input_text("path (.glb/.gltf)", self.state.save_as_text)
            if imgui.button("Save"):
                if self.save(self.state.save_as_text):
                    imgui.close_current_popup()
            imgui.same_line()
            if imgui.button("Cancel"):
                imgui.close_current_popup()
            imgui.end_popup()

    def _status(self, fb_w, fb_h) -> None:
        imgui = self.imgui
        if not self.state.message or time.perf_counter() - self.state.message_time > 6.0:
            return
        dl = imgui.get_foreground_draw_list()
        x, y = self.LEFT_W + 8, fb_h - self.BOTTOM_H - 22
        dl.add_rect_filled(imgui.ImVec2(x - 4, y - 2), imgui.ImVec2(x + 8 + 7 * len(self.state.message), y + 17),
                           rgba(imgui, 0, 0, 0, 0.6))
        dl.add_text(imgui.ImVec2(x, y), rgba(imgui, 1, 0.9, 0.5), self.state.message)
