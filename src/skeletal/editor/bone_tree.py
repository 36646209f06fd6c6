"""The bone tree panel (left): the rig's hierarchy, animated bones marked, selection. Its right edge
drags to widen it (the viewport gives way); the tree indents 6 px a level and leaves out a namespace
most names share (``mixamorig:``), so that names stay visible 14 levels down a Mixamo hand.

A part of :class:`skeletal.editor.app.Editor` (a mixin: it reads and writes the editor's state,
set up in ``Editor.__init__``)."""

from __future__ import annotations
from .state import Panel


#: The bone panel's width limits in pixels (drag its right edge between them) and the tree's indent per
#: level: a Mixamo hand is 11 levels deep, and imgui's default 21 px a level left its names blank.
BONES_MIN_W, BONES_MAX_FRACTION, TREE_INDENT = 150, 0.5, 6.0


def name_prefix(names) -> str:
    """A namespace most names share ("mixamorig:"), which the tree leaves out (the tooltip and the
    search keep the whole name); "" when fewer than half the names start with the same ``word:``."""
    heads: dict[str, int] = {}
    for name in names:
        head, sep, rest = (name or "").partition(":")
        if sep and rest:
            heads[head + sep] = heads.get(head + sep, 0) + 1
    if not heads:
        return ""
    best = max(heads, key=lambda h: heads[h])
    return best if heads[best] * 2 >= len(names) else ""


class BoneTree(Panel):
    def _bones_edge(self, top: float, height: float) -> None:
        """The panel's right edge, a 6 px handle: dragging it sets ``self.LEFT_W`` (the viewport and
        the panels follow from the next frame), between :data:`BONES_MIN_W` and half the window."""
        imgui = self.imgui
        widest = max(float(BONES_MIN_W), BONES_MAX_FRACTION * float(self._framebuffer_size[0]))
        imgui.set_next_window_pos(imgui.ImVec2(self.LEFT_W - 3, top))
        imgui.set_next_window_size(imgui.ImVec2(6, height))
        flags = (imgui.WindowFlags_.no_decoration | imgui.WindowFlags_.no_move | imgui.WindowFlags_.no_saved_settings
                 | imgui.WindowFlags_.no_background | imgui.WindowFlags_.no_scroll_with_mouse)
        imgui.push_style_var(imgui.StyleVar_.window_padding, imgui.ImVec2(0, 0))
        imgui.begin("##bones edge", None, flags)
        imgui.invisible_button("bones edge", imgui.ImVec2(6, max(height, 1.0)))
        self._remember("bones edge")
        if imgui.is_item_hovered() or imgui.is_item_active():
            imgui.set_mouse_cursor(imgui.MouseCursor_.resize_ew)
        if imgui.is_item_active():
            x = imgui.get_io().mouse_pos.x
            self.LEFT_W = int(round(min(max(x, float(BONES_MIN_W)), widest)))
            self._bones_resized = True
        elif getattr(self, "_bones_resized", False):
            self._bones_resized = False
            self.say(f"bones panel {self.LEFT_W} px wide")
        imgui.end()
        imgui.pop_style_var()

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
                imgui.push_style_var(imgui.StyleVar_.indent_spacing, TREE_INDENT)
                prefix = name_prefix(names)
                if prefix:
                    imgui.text_disabled(f"names without \"{prefix}\"")
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
                    shown = label[len(prefix):] if prefix and label.startswith(prefix) else label
                    keyed = self.state.clip is not None and i in self._animated_nodes()
                    is_open = imgui.tree_node_ex(f"{shown}{' *' if i in self.doc.pose_edits else ''}##t{i}", flags)
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
                imgui.pop_style_var()
            imgui.end_child()
        imgui.end()
        self._bones_edge(top, fb_h - top - self.BOTTOM_H)

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
