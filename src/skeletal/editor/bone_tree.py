"""The bone tree panel (left): the rig's hierarchy, animated bones marked, selection.

A part of :class:`skeletal.editor.app.Editor` (a mixin: it reads and writes the editor's state,
set up in ``Editor.__init__``)."""

from __future__ import annotations
from .state import Panel


class BoneTree(Panel):
    def _bones_panel(self, fb_h) -> None:
        imgui = self.imgui
        top = 20
        if self._fixed_window("Bones", 0, top, self.LEFT_W, fb_h - top - self.BOTTOM_H):
            changed, self.state.search = imgui.input_text_with_hint("##search", "search bones", self.state.search)
            self._remember("bone search")
            names = self.doc.asset.rig.names
            # Deep or long names (mixamorig:LeftHandIndex3) scroll sideways instead of being cut off.
            imgui.begin_child("bone list", imgui.ImVec2(0, 0), 0, imgui.WindowFlags_.horizontal_scrollbar)
            if self.state.search.strip():
                needle = self.state.search.strip().lower()
                for i, name in enumerate(names):
                    if needle in (name or "").lower():
                        if imgui.selectable(f"{name}##b{i}", self.state.selected == i)[0]:
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
                    flags = tree_flags[(not kids, self.state.selected == i)]
                    imgui.set_next_item_open(True, once)
                    label = names[i] or f"node {int(self.doc.asset.rig.node_of[i])}"
                    keyed = self.state.clip is not None and i in self._animated_nodes()
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
        key = (self.doc.revision, self.state.clip)
        if getattr(self, "_animated_key", None) != key:
            self._animated_key = key
            self._animated = {t.node for t in self.doc.clips[self.state.clip].tracks} if self.state.clip is not None else set()
        return self._animated

    def select_bone(self, node: int | None) -> None:
        """Select a bone (the gizmo then acts on it, not on a collider)."""
        self.state.selected = node
        self.state.selected_collider = None
