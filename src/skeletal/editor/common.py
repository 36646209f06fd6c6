"""What the editor's panels share: constants, the shortcut table, the ImGui/GLFW import, colours, key names."""

from __future__ import annotations

import numpy as np

from ..render.errors import RenderError
from .model import (
    EditError,
)

AUTOSAVE_SECONDS = 60.0
PATHS = ("translation", "rotation", "scale")
PATH_SHORT = {"translation": "loc", "rotation": "rot", "scale": "scale"}

SHORTCUTS = [
    ("Ctrl+S / Ctrl+Shift+S", "save / save as"),
    ("Ctrl+Z / Ctrl+Y (Ctrl+Shift+Z)", "undo / redo"),
    ("K / Shift+K", "insert key: selected bone / whole pose"),
    ("Delete or X", "delete the selected keys"),
    ("Ctrl+C / Ctrl+V", "copy keys / paste them at the current time"),
    ("Space", "play / pause"),
    ("L", "loop on / off"),
    ("Left / Right", "previous / next frame"),
    ("Up / Down", "previous / next key of the selection"),
    ("Home / End", "first / last frame"),
    ("W / E / R", "gizmo: translate / rotate / scale"),
    ("T", "gizmo space: local / world"),
    ("I", "IK drag: move a hand or foot with the translate gizmo"),
    ("O", "onion skin on / off"),
    ("B", "skeleton overlay on / off"),
    ("C", "colliders on / off"),
    ("N", "snap keys and time to frames on / off"),
    ("Tab", "dope sheet / curve view"),
    ("Escape", "clear the key selection; the gizmo back on the bone"),
    ("F1 or ?", "this help"),
    ("Ctrl+Q", "quit (asks to save unsaved changes)"),
    ("mouse", "left click: select a bone; right drag: orbit; middle drag: pan; wheel: zoom"),
    ("dope sheet", "click/shift-click keys, drag to move, click the ruler to scrub"),
    ("curve view", "drag key points (values); cubic keys show their tangents"),
]


def import_gui():
    """imgui_bundle first (it points pyGLFW at the GLFW library it ships), then glfw."""
    try:
        from imgui_bundle import imgui, imguizmo, implot
    except ImportError as exc:
        raise RenderError(f"the editor needs imgui-bundle ({exc}): pip install 'skeletal[edit]'") from None
    try:
        import glfw
    except ImportError as exc:
        raise RenderError(f"the editor needs the glfw package ({exc}): pip install glfw") from None
    return imgui, implot, imguizmo.im_guizmo, glfw


# ImGuiMouseCursor -> GLFW standard cursor (GLFW 3.4+ names; ImGui 1.92's order: arrow, text input,
# resize all, ns, ew, nesw, nwse, hand, wait, progress, not allowed)
CURSOR_SHAPES = {0: "ARROW_CURSOR", 1: "IBEAM_CURSOR", 2: "RESIZE_ALL_CURSOR", 3: "RESIZE_NS_CURSOR",
                  4: "RESIZE_EW_CURSOR", 5: "RESIZE_NESW_CURSOR", 6: "RESIZE_NWSE_CURSOR", 7: "POINTING_HAND_CURSOR",
                  10: "NOT_ALLOWED_CURSOR"}


def rgba(imgui, r, g, b, a=1.0) -> int:
    return imgui.IM_COL32(int(r * 255), int(g * 255), int(b * 255), int(a * 255))


KEY_PLAIN = np.array([0.85, 0.85, 0.88, 1.0])
KEY_CHANNEL = np.array([0.55, 0.7, 0.95, 1.0])
KEY_SELECTED = np.array([1.0, 0.75, 0.2, 1.0])

_KEY_NAMES = {"delete": "delete", "space": "space", "left": "left_arrow", "right": "right_arrow", "up": "up_arrow",
              "down": "down_arrow", "enter": "enter", "escape": "escape", "tab": "tab", "home": "home", "end": "end",
              "f1": "f1", "backspace": "backspace"}


def imgui_key(imgui, name: str):
    low = name.lower()
    attr = _KEY_NAMES.get(low, low)
    if len(attr) == 1 and attr.isdigit():
        attr = f"_{attr}"
    try:
        return getattr(imgui.Key, attr)
    except AttributeError:
        raise EditError(f"script: unknown key {name!r}") from None
