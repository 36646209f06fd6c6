"""What the editor's panels share, declared: the view state (:class:`EditorState`) and the window's
resources every panel may use (:class:`Panel`).

The window (:class:`skeletal.editor.app.Editor`) is one object made of panel mixins (bone tree,
inspector, colliders, dope sheet, curves, viewport, menu, autosave, script). Each panel class derives
from :class:`Panel`, which lists what a panel may read: the document, the GUI modules, the renderer
and camera, and ``state``, the one :class:`EditorState` they all read and write. Anything else a panel
keeps (its caches, its GL objects) is its own: set and read in its own module only.

>>> editor.state.selected = editor.doc.asset.rig.find("Head")      # doctest: +SKIP
>>> editor.state.time, editor.state.playing                         # doctest: +SKIP
(0.0, False)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .model import EditDocument


@dataclass
class EditorState:
    """The editor's view state (everything the user changes goes through the document's commands; this
    is only how the document is looked at and what the tools are set to)."""

    # what is shown
    clip: int | None = None  #: the clip being edited (index into the document's clips), None without clips
    time: float = 0.0  #: seconds into the clip
    playing: bool = False
    loop: bool = True  #: playback wraps at the clip's end
    tab: str = "dope"  #: the bottom panel: "dope" (dope sheet) or "curve"
    curve_path: str = "rotation"  #: the channel the curve view shows
    # selection
    selected: int | None = None  #: the selected bone (rig index)
    selected_collider: int | None = None  #: the selected hit/hurt volume
    key_selection: set[tuple[int, str, float]] = field(default_factory=set)  #: (bone, path, time) keys
    clipboard: list = field(default_factory=list)  #: copied keys
    search: str = ""  #: the bone tree's filter
    # tools
    operation: str = "rotate"  #: the gizmo's operation: "rotate", "translate" or "scale"
    local_space: bool = True  #: the gizmo turns about the bone's own axes
    ik_mode: bool = False  #: dragging a bone moves an IK chain's end
    snap: bool = True  #: dragged keys snap to frames
    euler_order: str = "XYZ"  #: the inspector's Euler angle order
    use_quaternion: bool = False  #: the inspector edits quaternions instead of Euler angles
    # overlays
    onion: bool = False  #: onion skins around the current time
    onion_frames: int = 3
    onion_step: int = 2
    skeleton: bool = True  #: the bones drawn over the mesh
    show_colliders: bool = True
    show_help: bool = False
    # messages, text fields, popups
    message: str = ""  #: the status line
    message_time: float = 0.0  #: when the message was set (perf_counter seconds)
    rename_text: str = ""  #: the inspector's rename field
    save_as_text: str = "edited.glb"  #: the "save as" field
    closing_popup: bool = False  #: "save changes?" is open
    save_as_popup: bool = False  #: "save as" is open
    quit: bool = False  #: the window closes after this frame
    # drags in progress and the merging of their commands into one undo step
    drag: Any = None  #: the dope sheet's key drag
    collider_drag: Any = None  #: the collider gizmo's drag: start collider, frame, merge key
    merge_serial: int = 0  #: a new number per drag: commands with one merge key undo together


class Panel:
    """What a panel of the editor may use besides its own attributes (set up by the editor window)."""

    state: EditorState  #: the shared view state
    doc: EditDocument  #: the document (edit it through its commands)
    imgui: Any  #: Dear ImGui, ImPlot, ImGuizmo and GLFW (imgui_bundle's)
    implot: Any
    gizmo: Any
    glfw: Any
    window: Any  #: the GLFW window
    ctx: Any  #: the moderngl context
    renderer: Any  #: the 3-D view's :class:`skeletal.render.Renderer`
    camera: Any  #: its orbit camera
    view_rect: tuple[float, float, float, float]  #: the 3-D view's rectangle in the window (x, y, w, h)
    log: Any  #: where messages go, or None


__all__ = ["EditorState", "Panel"]
