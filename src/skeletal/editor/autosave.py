"""Saving: explicit saves, autosave every ``autosave_seconds`` to the file's autosave path, quit requests.

A part of :class:`skeletal.editor.app.Editor` (a mixin: it reads and writes the editor's state,
set up in ``Editor.__init__``)."""

from __future__ import annotations

import os
import time

from .model import (
    EditError,
    autosave_path,
)
from .state import Panel


class Autosave(Panel):
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
            self.state.closing_popup = True
        else:
            self.state.quit = True

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
        except Exception as exc:  # autosave must never take the editor down
            if self.log:
                self.log(f"skeletal edit: autosave to {path} failed: {exc}")
            return None
        self._autosaved_revision = self.doc.revision
        if self.log:
            self.log(f"skeletal edit: autosaved to {path}")
        return path
