# Over 600 lines: the viewer's UI state and text overlays, kept GL-free so that tests drive them without a
# window.
"""The viewer's model: everything ``skeletal view`` does that needs no window and no OpenGL.

* :class:`ViewerState` -- what plays and how keys and the mouse change it. Playback is a real
  :class:`skeletal.Player`: choosing a clip crossfades to it (``player.crossfade``) or cuts
  (``player.play``), blending from the current pose even when a fade is interrupted; play/pause,
  speed, loop mode and scrubbing act on the Player's actions (``paused``, ``speed``, ``loop``,
  ``seek``). Blend mode plays a 1D blend space (:meth:`skeletal.Player.blend_space_1d`) whose
  parameter the slider sets (``player.set``). Keyboard and mouse arrive as plain method calls
  (:meth:`ViewerState.key`, :meth:`ViewerState.mouse_down`...), so tests drive it without a window.
* :class:`BlendSlider` -- the blend space's samples (clip, position) and the slider's value.
* :class:`OrbitCamera` -- yaw/pitch/distance around a target, built from :func:`.camera.frame`.
* :func:`compute_layout` -- where the clip list, the blend slider, the timeline and the help line
  sit in a window of a given size (hit-testing for clicks uses the rectangles the UI is drawn in).

Coordinates are framebuffer pixels, origin at the top left, y down. Importing this module imports
numpy and the library's CPU modules only (no moderngl, no glfw).
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from ..playback.player import Player
from .camera import Camera

#: speeds the +/- keys step through
SPEEDS: tuple[float, ...] = (0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0)
#: the L key cycles through these, in this order
LOOP_CYCLE: tuple[str, ...] = ("repeat", "pingpong", "clamp")
#: length of a crossfade between clips (and into or out of blend mode), seconds of playback time
CROSSFADE_SECONDS = 0.3
#: the step of the left/right arrow keys, seconds of clip time
STEP_SECONDS = 1.0 / 30.0
#: name of the blend-space parameter the slider sets (``player.set(BLEND_PARAMETER, value)``)
BLEND_PARAMETER = "blend"
#: the , and . keys move the slider by this fraction of its range
BLEND_NUDGE = 1.0 / 20.0
#: clips the B key blends when the model has them (matched by name), at positions 0, 1, 2
LOCOMOTION = ("idle", "walk", "run")

#: (keys, what they do): the help panel (H) lists these; HELP_LINE is the one-line summary always shown
CONTROLS: tuple[tuple[str, str], ...] = (
    ("left drag", "orbit the camera"),
    ("right / middle / shift drag", "pan"),
    ("wheel", "zoom"),
    ("R", "reset the camera framing"),
    ("1-9, Up / Down, click", "choose a clip (leaves blend mode)"),
    ("space", "play / pause"),
    ("click / drag the bar", "seek (scrub) the timeline"),
    ("Left / Right, Home", "step one frame, back to the start"),
    ("+ / -", "playback speed"),
    ("L", "loop mode: repeat, pingpong, clamp"),
    ("C", "crossfade (0.3 s) or cut between clips"),
    ("B", "blend mode: a blend space over 2-3 clips"),
    ("slider drag, ',' and '.'", "set the blend parameter"),
    ("S", "skeleton overlay"),
    ("W, [ and ]", "weight heat-map, previous / next joint"),
    ("P", "save a screenshot (skeletal-view-N.png)"),
    ("H / F1", "this help"),
    ("Esc / Q", "quit"),
)
HELP_LINE = ("drag: orbit   right-drag: pan   wheel: zoom   R: reset view   1-9/Up/Down: clip   space: play   "
             "+/-: speed   L: loop   C: crossfade   B: blend   , .: blend value   S: skeleton   W [ ]: weights   "
             "P: screenshot   H: help   Esc: quit")


# -- geometry ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rect:
    """An axis-aligned rectangle in pixels (x, y: top-left corner)."""

    x: float
    y: float
    w: float
    h: float

    def contains(self, px: float, py: float) -> bool:
        return self.x <= px < self.x + self.w and self.y <= py < self.y + self.h

    @property
    def right(self) -> float:
        return self.x + self.w

    @property
    def bottom(self) -> float:
        return self.y + self.h


@dataclass
class Layout:
    """Where the interactive parts of the UI are, for one window size (see :func:`compute_layout`).

    The panel at the top left lists the clips (``clip_title``, then ``clip_rows`` pairing each
    visible clip index with its row) and under them the overlays (``overlay_rows``: "skeleton" and
    "weights" rows, clickable too). ``timeline`` is the drawn bar, ``timeline_hit`` the taller area
    that grabs clicks; ``help_lines`` the help text wrapped to the window's width. In blend mode the
    bottom panel also holds the blend slider: ``slider`` the track, ``slider_hit`` the area that grabs
    clicks (the sample names above the track included), ``slider_names_y`` the top of the names'
    line and ``slider_label`` where the parameter's value is written (all None otherwise).
    """

    width: int
    height: int
    scale: float
    line_height: int
    pad: int
    clip_panel: Rect
    clip_title: Rect
    clip_rows: list[tuple[int, Rect]]
    overlay_rows: list[tuple[str, Rect]]
    bottom_panel: Rect
    status_y: int
    timeline: Rect
    timeline_hit: Rect
    help_lines: list[str]
    help_y: int
    slider: Rect | None = None
    slider_hit: Rect | None = None
    slider_names_y: int = 0
    slider_label: Rect | None = None

    def clip_at(self, x: float, y: float) -> int | None:
        """The clip index of the row under (x, y), or None."""
        for index, rect in self.clip_rows:
            if rect.contains(x, y):
                return index
        return None

    def overlay_at(self, x: float, y: float) -> str | None:
        """``"skeleton"`` or ``"weights"`` for a click on that overlay row, else None."""
        for name, rect in self.overlay_rows:
            if rect.contains(x, y):
                return name
        return None


def wrap_text(text: str, width: float, measure: Callable[[str], float], separator: str = "   ") -> list[str]:
    """Split ``text`` at ``separator`` into lines no wider than ``width`` (a too-long part stays whole)."""
    lines: list[str] = []
    current = ""
    for part in text.split(separator):
        candidate = part if not current else current + separator + part
        if current and measure(candidate) > width:
            lines.append(current)
            current = part
        else:
            current = candidate
    if current:
        lines.append(current)
    return lines


def ellipsize(text: str, width: float, measure: Callable[[str], float]) -> str:
    """``text``, cut and ended with ``...`` if it is wider than ``width``."""
    if measure(text) <= width:
        return text
    while text and measure(text + "...") > width:
        text = text[:-1]
    return text + "..."


#: rows under the clip list, in order
OVERLAY_ROWS = ("skeleton", "weights")
#: the widest text the slider's value label shows
SLIDER_LABEL_WIDEST = "blend  -0000.00"


def compute_layout(width: int, height: int, clip_labels: Sequence[str], current_clip: int,
                   measure: Callable[[str], float], line_height: int, scale: float = 1.0,
                   help_text: str = HELP_LINE, overlay_labels: Sequence[str] = (), slider: bool = False) -> Layout:
    """The UI layout for a ``width`` x ``height`` framebuffer.

    ``clip_labels`` are the clip list's row texts and ``overlay_labels`` the overlay rows' widest
    texts (their widths size the panel), ``measure`` gives a text's width in pixels and
    ``line_height`` a text line's height. Clip rows that do not fit above the bottom panel are
    scrolled so that ``current_clip`` stays visible. ``slider``: make room for the blend slider (a
    line of sample names over a track) between the status line and the timeline.
    """
    pad = max(2, round(8 * scale))
    margin = max(2, round(10 * scale))
    # Bottom panel: status line, [blend slider], timeline bar, wrapped help lines.
    help_lines = wrap_text(help_text, width - 2 * pad, measure)
    bar_h = max(4, round(10 * scale))
    slider_h = line_height + bar_h + pad if slider else 0
    bottom_h = pad + line_height + pad // 2 + slider_h + bar_h + pad + len(help_lines) * line_height + pad
    bottom = Rect(0, height - bottom_h, width, bottom_h)
    status_y = int(bottom.y + pad)
    grab = max(6, round(7 * scale))
    track = track_hit = label = None
    names_y = 0
    if slider:
        names_y = status_y + line_height + pad // 2
        label_w = measure(SLIDER_LABEL_WIDEST)
        track_x = pad + label_w + 2 * pad
        track = Rect(track_x, names_y + line_height, max(1, width - track_x - 2 * pad), bar_h)
        label = Rect(pad, names_y, label_w, line_height + bar_h)
        # From the names' line down to halfway to the timeline; wider than the track by a grab.
        track_hit = Rect(track.x - grab, names_y, track.w + 2 * grab, track.bottom + pad // 2 - names_y)
    top = track.bottom + pad if track is not None else status_y + line_height + pad // 2
    timeline = Rect(pad, top, max(1, width - 2 * pad), bar_h)
    above = min(grab, pad - pad // 2) if slider else grab  # not into the slider's hit area
    timeline_hit = Rect(0, timeline.y - above, width, timeline.h + above + grab)
    help_y = int(timeline.bottom + pad)

    # Top left: a title row, one row per clip (windowed around the current clip), a gap, the overlays.
    row_h = line_height + max(1, round(3 * scale))
    texts = list(clip_labels) + list(overlay_labels) + ["Clips  (1-9, Up/Down)", "(no clips: rest pose)"]
    panel_w = min(max(measure(t) for t in texts) + 2 * pad, max(width * 0.45, 1))
    fixed_rows = 1 + pad / row_h + len(OVERLAY_ROWS)
    room = int((bottom.y - 2 * margin - 2 * pad) / row_h - fixed_rows)
    visible = max(0, min(len(clip_labels), room))
    first = 0
    if visible < len(clip_labels):
        first = min(max(0, current_clip - visible // 2), len(clip_labels) - visible)
    title = Rect(margin + pad, margin + pad, panel_w - 2 * pad, row_h)
    rows = [(first + k, Rect(margin, title.bottom + k * row_h, panel_w, row_h)) for k in range(visible)]
    overlay_top = title.bottom + max(visible, 0 if clip_labels else 1) * row_h + pad
    overlays = [(name, Rect(margin, overlay_top + k * row_h, panel_w, row_h)) for k, name in enumerate(OVERLAY_ROWS)]
    panel = Rect(margin, margin, panel_w, overlays[-1][1].bottom + pad - margin)
    return Layout(width, height, scale, line_height, pad, panel, title, rows, overlays, bottom, status_y, timeline,
                  timeline_hit, help_lines, help_y, track, track_hit, names_y, label)


def slider_marks(track: Rect, positions: Sequence[float], names: Sequence[str], lo: float, hi: float,
                 measure: Callable[[str], float], gap: float = 6.0) -> list[tuple[float, float, str]]:
    """Where the slider's sample ticks and names go: ``(tick x, name x, name)`` per sample, names
    centred on their tick but kept over the track; a name that would overlap the one before it is
    shortened (``...``) or, when even that does not fit, left out (``""``)."""
    marks = []
    right_of_last = -math.inf
    span = hi - lo
    for position, name in zip(positions, names):
        x = track.x + (track.w * (position - lo) / span if span > 0 else 0.0)
        room_left = max(right_of_last + gap, track.x)
        text = name
        width = measure(text)
        left = min(max(x - width / 2, track.x), track.right - width)
        if left < room_left:
            text = ellipsize(name, max(0.0, track.right - room_left), measure)
            width = measure(text)
            left = max(room_left, min(x - width / 2, track.right - width))
            if left < room_left or width <= measure("...") or left + width > track.right + 0.5:
                text = ""
        if text:
            right_of_last = left + width
        marks.append((x, left, text))
    return marks


# -- camera --------------------------------------------------------------------------------------


@dataclass
class OrbitCamera:
    """A camera orbiting ``target``: ``yaw`` degrees about +Y (0 = looking from +Z), ``pitch`` degrees
    above the horizontal, ``distance`` from the target. ``radius`` is the size of what is looked at
    (it bounds zoom and sets the clipping planes). ``fit_aspect``: the aspect the view was framed
    for; narrower viewports widen the vertical field of view so that what was framed stays visible
    side to side. :meth:`reset` returns to the pose it was made with."""

    yaw: float
    pitch: float
    distance: float
    target: np.ndarray
    fov: float = 35.0
    radius: float = 1.0
    fit_aspect: float | None = None
    home: tuple | None = field(default=None, repr=False)

    ORBIT_DEG_PER_PIXEL = 0.35
    ZOOM_STEP = 0.88
    MAX_PITCH = 89.0

    def __post_init__(self):
        self.target = np.asarray(self.target, dtype=np.float64).copy()
        if self.home is None:
            self.home = (self.yaw, self.pitch, self.distance, self.target.copy())

    @classmethod
    def from_camera(cls, camera: Camera, radius: float) -> "OrbitCamera":
        """The orbit that reproduces a framed :class:`.camera.Camera` (eye, target, fov, aspect)."""
        back = np.asarray(camera.eye, float) - np.asarray(camera.target, float)
        distance = float(np.linalg.norm(back))
        back /= max(distance, 1e-12)
        yaw = math.degrees(math.atan2(back[0], back[2]))
        pitch = math.degrees(math.asin(max(-1.0, min(1.0, back[1]))))
        return cls(yaw, pitch, distance, np.asarray(camera.target, float), camera.fov, max(float(radius), 1e-3),
                   fit_aspect=camera.aspect)

    def back(self) -> np.ndarray:
        """Unit vector from the target towards the eye."""
        yaw, pitch = math.radians(self.yaw), math.radians(self.pitch)
        return np.array([math.sin(yaw) * math.cos(pitch), math.sin(pitch), math.cos(yaw) * math.cos(pitch)])

    def camera(self, aspect: float) -> Camera:
        """The :class:`.camera.Camera` for a viewport of this aspect (width / height)."""
        eye = self.target + self.back() * self.distance
        near = max(self.distance - 3.0 * self.radius, self.distance * 0.01)
        far = self.distance + 40.0 * self.radius
        fov = self.fov
        if self.fit_aspect and aspect < self.fit_aspect:  # keep the framed width in a narrower window
            half = math.tan(math.radians(fov) / 2.0) * self.fit_aspect / aspect
            fov = min(2.0 * math.degrees(math.atan(half)), 150.0)
        return Camera(eye=eye, target=self.target.copy(), fov=fov, aspect=aspect, near=near, far=far)

    def orbit(self, dx: float, dy: float, scale: float = 1.0) -> None:
        """Turn by a mouse drag of (dx, dy) pixels: right turns the view right, down looks from higher."""
        k = self.ORBIT_DEG_PER_PIXEL / max(scale, 1e-6)
        self.yaw = (self.yaw - dx * k + 180.0) % 360.0 - 180.0
        self.pitch = max(-self.MAX_PITCH, min(self.MAX_PITCH, self.pitch + dy * k))

    def pan(self, dx: float, dy: float, viewport_height: float) -> None:
        """Slide the target so that what is under the cursor follows a drag of (dx, dy) pixels."""
        back = self.back()
        right = np.cross([0.0, 1.0, 0.0], back)
        norm = np.linalg.norm(right)
        right = right / norm if norm > 1e-9 else np.array([1.0, 0.0, 0.0])
        up = np.cross(back, right)
        per_pixel = 2.0 * self.distance * math.tan(math.radians(self.fov) / 2.0) / max(viewport_height, 1.0)
        self.target = self.target - right * dx * per_pixel + up * dy * per_pixel

    def zoom(self, steps: float) -> None:
        """Move in (steps > 0, wheel up) or out; the distance stays within 0.05..50 radii."""
        self.distance = float(np.clip(self.distance * self.ZOOM_STEP ** steps, 0.05 * self.radius, 50.0 * self.radius))

    def reset(self) -> None:
        self.yaw, self.pitch, self.distance, target = self.home
        self.target = target.copy()


# -- blend space ---------------------------------------------------------------------------------


def parse_blend(text: str) -> list[tuple[str, float]]:
    """``"idle:0,walk:1.4,run:4"`` -> ``[("idle", 0.0), ("walk", 1.4), ("run", 4.0)]``.

    A clip name may itself contain ``:`` (the last one separates the position). ValueError with a
    one-line message when the text is not CLIP:POSITION pairs separated by commas, has fewer than
    two of them, names a clip twice or puts two samples at one position."""
    samples: list[tuple[str, float]] = []
    for part in str(text).split(","):
        name, sep, position = part.strip().rpartition(":")
        try:
            value = float(position)
        except ValueError:
            value = math.nan
        if not sep or not name.strip() or not math.isfinite(value):
            raise ValueError(f"--blend wants CLIP:POSITION pairs separated by commas (e.g. idle:0,walk:1.4,run:4), "
                             f"got {part.strip()!r}")
        samples.append((name.strip(), value))
    if len(samples) < 2:
        raise ValueError("--blend needs at least two CLIP:POSITION samples (e.g. idle:0,walk:1.4,run:4)")
    names = [name for name, _ in samples]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ValueError(f"--blend names clip {twice[0]!r} twice")
    positions = sorted(position for _, position in samples)
    if any(b - a <= 0 for a, b in zip(positions, positions[1:])):
        raise ValueError("--blend puts two samples at the same position")
    return samples


def _bare_name(name: str) -> str:
    """``"mixamo.com|Walk"`` / ``"Armature:Run"`` -> ``"walk"`` / ``"run"``."""
    return re.split(r"[|:]", name)[-1].strip().lower()


def default_blend_samples(clip_names: Sequence[str]) -> list[tuple[int, float]]:
    """The B key's blend space: ``[(clip index, position), ...]``. The clips named idle, walk, run
    (ignoring case and a ``prefix|`` or ``prefix:``) at positions 0, 1, 2 when at least two of them
    are present, else the first (up to three) clips at 0, 1, 2; empty with fewer than two clips."""
    if len(clip_names) < 2:
        return []
    bare = [_bare_name(name) for name in clip_names]
    found = [(bare.index(name), float(k)) for k, name in enumerate(LOCOMOTION) if name in bare]
    if len(found) >= 2:
        return found
    return [(i, float(i)) for i in range(min(3, len(clip_names)))]


@dataclass
class BlendSlider:
    """The blend space the slider drives: ``clips`` (clip indices) at ``positions``, in increasing
    position order (the order of the space's own samples); ``value`` the parameter; ``space`` the
    Player's :class:`~skeletal.playback.blendspace.BlendSpace1D`. The slider spans the first to the
    last position."""

    clips: list[int]
    positions: list[float]
    space: object
    value: float

    @property
    def lo(self) -> float:
        return self.positions[0]

    @property
    def hi(self) -> float:
        return self.positions[-1]

    @property
    def step(self) -> float:
        """What , and . move the value by."""
        return (self.hi - self.lo) * BLEND_NUDGE

    def clamp(self, value: float) -> float:
        return min(max(float(value), self.lo), self.hi)

    def fraction(self, value: float | None = None) -> float:
        """Where ``value`` (default: the current one) sits on the slider, 0..1."""
        value = self.value if value is None else value
        return (self.clamp(value) - self.lo) / (self.hi - self.lo) if self.hi > self.lo else 0.0

    def value_at(self, fraction: float) -> float:
        return self.lo + min(max(float(fraction), 0.0), 1.0) * (self.hi - self.lo)

    def weights(self, value: float | None = None) -> np.ndarray:
        """The samples' weights (n,) at ``value`` (default: the current one), from the blend space."""
        return self.space.weights(np.array([self.value if value is None else float(value)]))[0]


class _BlendSpeed:
    """A mixer controller passing the viewer's playback speed to the blend space, which scales its
    samples' synchronised speeds by it."""

    def __init__(self, state: "ViewerState"):
        self.state = state

    def before_update(self, dt: float) -> None:
        blend = self.state.blend
        if blend is not None:
            blend.space.set_speed(self.state.speed)


# -- state ---------------------------------------------------------------------------------------


def wrap_time(t: float, duration: float, loop: str) -> float:
    """A clip-local time for a playback time ``t`` that may lie outside the clip (as
    :func:`skeletal.map_time` maps it: wrapped, reflected or clamped)."""
    if duration <= 0:
        return 0.0
    if loop == "clamp":
        return min(max(t, 0.0), duration)
    if loop == "repeat":
        return t - duration * math.floor(t / duration)
    m = t - 2.0 * duration * math.floor(t / (2.0 * duration))
    return 2.0 * duration - m if m > duration else m


#: a seek to the very end of a repeating clip stops this far short of it (the end, not the start, shows)
_END = 1.0 - 1e-9


class ViewerState:
    """What the viewer plays and shows, and how keys and the mouse change it. No window needed.

    Args:
        player: the :class:`skeletal.Player` to drive (an Asset gets a Player made for it); its
            asset's clips are the clip list (none: the rest pose is shown).
        joint_names: names of the joints the weight heat-map can show, in cycling order.
        clip: index of the clip to start with; ``time`` its start time; ``speed``, ``loop``: playback.
        default_joint: index into ``joint_names`` shown first by the heat-map.
        blend: the blend space's samples, ``[(clip name or index, position), ...]`` (see
            :func:`parse_blend`); None: the B key uses :func:`default_blend_samples`.
        blend_value: the slider's first value (default: the position of ``clip`` when it is a
            sample, else of the first sample).
        blend_mode: start in blend mode.

    Playback is the Player's: :meth:`advance` is ``player.update(dt)`` (its CPU time goes to
    ``timings["update"]``), and ``local_time``, ``playing``, ``speed`` and ``loop`` read and set its
    actions. Choosing a clip crossfades to it over :data:`CROSSFADE_SECONDS` (``player.crossfade``:
    every action fades from its current weight, so a choice made during a fade blends from the
    current mix without a jump) or, with crossfade off (C), cuts to it (``player.play``). Fades run
    on wall-clock time, so they also finish while paused.

    Blend mode (B, or ``blend_mode``) plays the blend space (``space.play(fade=...)``); the slider
    and the , . keys set its parameter (``player.set(BLEND_PARAMETER, value)``); choosing a clip
    leaves it. The blend space has action slots of its own, so entering or leaving it is a plain
    crossfade from the current mix.
    """

    def __init__(self, player, joint_names: Sequence[str] = (), *, clip: int = 0, time: float = 0.0,
                 speed: float = 1.0, loop: str = "repeat", default_joint: int = 0,
                 blend: Sequence[tuple[str | int, float]] | None = None, blend_value: float | None = None,
                 blend_mode: bool = False):
        if loop not in LOOP_CYCLE:
            raise ValueError(f"loop mode {loop!r} is not one of {', '.join(LOOP_CYCLE)}")
        self.player: Player = player if isinstance(player, Player) else Player(player)
        clips = self.player.asset.clips
        self.clip_names = [c.name for c in clips]
        self.durations = [float(c.duration) for c in clips]
        self.joint_names = list(joint_names)
        self.clip = min(max(int(clip), 0), max(len(self.clip_names) - 1, 0))
        self.loop = loop
        self.speed = float(speed)
        self.playing = True
        self.crossfade = True
        self.mode = "clip"  # or "blend"
        self.skeleton = False
        self.weights = False
        self.joint = min(max(int(default_joint), 0), max(len(self.joint_names) - 1, 0))
        self.show_help = False
        self.quit = False
        self.screenshot_requested = False
        self.message = ""  # a short note for the status line (e.g. where a screenshot went)
        self._message_left = 0.0
        self.camera: OrbitCamera | None = None
        self.layout: Layout | None = None
        self.timings: dict[str, float] = {"update": 0.0}
        self._drag: str | None = None  # "orbit", "pan", "scrub", "slider"
        self._mouse = (0.0, 0.0)
        self.blend: BlendSlider | None = None
        if blend is not None:
            self.blend = self._make_blend(blend, blend_value)
        if self.clip_names:
            self.player.play(self.clip, loop=loop, speed=self.speed)
            self.seek(wrap_time(float(time), self.duration, loop))
        if blend_mode:
            if self.ensure_blend() is None:
                raise ValueError("blend mode needs a model with at least two clips")
            if blend_value is not None:
                self.blend.value = self.blend.clamp(blend_value)
            self._start_blend(0.0)
        self.player.update(0.0)

    # -- derived values --------------------------------------------------------------------------

    @property
    def clip_count(self) -> int:
        return len(self.clip_names)

    @property
    def clip_name(self) -> str:
        return self.clip_names[self.clip] if self.clip_names else "rest pose"

    @property
    def blending(self) -> bool:
        return self.mode == "blend"

    @property
    def duration(self) -> float:
        """The current clip's length; in blend mode, the blended cycle (the samples' lengths
        weighted by their weights: the space plays them in step over this time)."""
        if self.blending:
            return float(self.blend.weights() @ np.asarray([self.durations[c] for c in self.blend.clips]))
        return self.durations[self.clip] if self.durations else 0.0

    @property
    def local_time(self) -> float:
        """The time shown: the current clip's local time; in blend mode the cycle's phase x its length."""
        if not self.clip_names:
            return 0.0
        if self.blending:
            return float(self.blend.space.phase()[0]) * self.duration
        return self._action().time

    @property
    def fade_weight(self) -> float:
        """How far the transition to what was chosen has come: 1 - the weight of everything else
        (actions fading out, a frozen pose); 1 when no crossfade is in progress."""
        if not self._in_transition():
            return 1.0
        current = self._current_slots()
        other = sum(a.effective_weight for a in self.player.actions if a.slot not in current)
        return min(max(1.0 - other - float(self.player.mixer.snap_weight[0]), 0.0), 1.0)

    @property
    def joint_name(self) -> str | None:
        return self.joint_names[self.joint] if self.joint_names else None

    @property
    def heat_joint(self) -> int | None:
        """Index into ``joint_names`` of the joint the heat-map shows, or None when it is off."""
        return self.joint if self.weights and self.joint_names else None

    @property
    def dragging(self) -> str | None:
        return self._drag

    def clip_weights(self) -> list[float]:
        """Each clip's effective weight in the pose now (its action's weight x fade; 0 when stopped)."""
        weights = [0.0] * self.clip_count
        for action in self.player.actions:
            if action.layer == 0:
                weights[action.slot_clip_index] += action.effective_weight
        return weights

    def _action(self, clip: int | None = None):
        return self.player.action(self.clip if clip is None else clip)

    def _current_slots(self) -> set[int]:
        """The mixer slots of what was chosen: the blend space's own, or the clip's plain action."""
        return set(self.blend.space.slots) if self.blending else {self._action().slot}

    def _in_transition(self) -> bool:
        """Whether anything but what was chosen still shows (fading out, or the chosen fading in)."""
        mixer = self.player.mixer
        if mixer.snap_weight[0] > 0.0:
            return True
        current = self._current_slots()
        return any(a.slot not in current or mixer.envelope(a.slot)[0] < 1.0 - 1e-9
                   for a in self.player.actions)

    def _fade(self) -> float:
        return CROSSFADE_SECONDS if self.crossfade else 0.0

    def _apply_pause(self) -> None:
        """Every running action paused or not, as ``playing`` says (starting an action unpauses it)."""
        for action in self.player.actions:
            if action.paused == self.playing:
                action.paused = not self.playing

    # -- playback --------------------------------------------------------------------------------

    def show_message(self, text: str, seconds: float = 4.0) -> None:
        """Show ``text`` at the end of the status line for ``seconds`` (wall clock)."""
        self.message, self._message_left = text, float(seconds)

    def advance(self, dt: float) -> None:
        """Move on by ``dt`` seconds of wall time: ``player.update(dt)`` (0 while the timeline is held)."""
        dt = max(0.0, float(dt))
        if self.message:
            self._message_left -= dt
            if self._message_left <= 0.0:
                self.message = ""
        t0 = time.perf_counter()
        self.player.update(0.0 if self._drag == "scrub" else dt)
        self.timings["update"] = time.perf_counter() - t0

    def select_clip(self, index: int) -> None:
        """Switch to clip ``index`` from its start (or, if it is still fading out, from where it is):
        a crossfade from the current pose when enabled, else a cut. Leaves blend mode."""
        if not self.clip_names or not 0 <= index < self.clip_count:
            return
        if not self.blending and index == self.clip:
            return
        fade = self._fade()
        if self.blending:
            self.blend.space.stop(fade=fade)  # the space lets its samples go (they fade out, or stop)
        if fade > 0.0:
            # Leaving blend mode: the clip starts at the phase of the strongest sample (feet in step).
            self.player.crossfade(index, fade, loop=self.loop, speed=self.speed, sync=self.blending)
        else:
            self.player.stop()
            self.player.play(index, loop=self.loop, speed=self.speed)
        self.clip, self.mode = index, "clip"
        self._apply_pause()

    def toggle_play(self) -> None:
        """Play or pause (every action); playing a clamped clip that reached its end starts it again."""
        if not self.playing and not self.blending and self.clip_names:
            action = self._action()
            if action.finished or (self.loop == "clamp" and action.time >= self.duration):
                action.seek(0.0)
        self.playing = not self.playing
        self._apply_pause()

    def change_speed(self, step: int) -> None:
        """One step up or down :data:`SPEEDS` (from the nearest step to the current speed)."""
        nearest = min(range(len(SPEEDS)), key=lambda i: abs(SPEEDS[i] - self.speed))
        self.speed = SPEEDS[min(max(nearest + step, 0), len(SPEEDS) - 1)]
        if not self.blending:  # blend samples: scaled every update (see _BlendSpeed)
            for action in self.player.actions:
                action.speed = self.speed

    def cycle_loop(self) -> None:
        """Next loop mode for the clips; the pose shown does not jump. (The blend cycle always repeats.)"""
        self.loop = LOOP_CYCLE[(LOOP_CYCLE.index(self.loop) + 1) % len(LOOP_CYCLE)]
        if self.blending:
            self.show_message(f"loop {self.loop} applies to clips: the blend cycle repeats")
            return
        for action in self.player.actions:
            shown = action.time
            action.loop = self.loop
            action.seek(shown)  # the clock restarts from the time shown (ping-pong's way back included)

    def seek(self, t: float) -> None:
        """Show time ``t`` (clamped to the clip, or in blend mode to the cycle); ends any crossfade."""
        if not self.clip_names:
            return
        self._settle()
        d = self.duration
        t = min(max(float(t), 0.0), d)
        if self.blending:
            phase = min(t / d, _END) if d > 0 else 0.0
            self.blend.space.seek(phase)
        else:
            if self.loop == "repeat" and d > 0 and t >= d:
                t = d * _END
            self._action().seek(t)

    def seek_fraction(self, fraction: float) -> None:
        self.seek(min(max(float(fraction), 0.0), 1.0) * self.duration)

    def step(self, frames: int) -> None:
        """Pause and move by ``frames`` steps of :data:`STEP_SECONDS` (wrapping like the loop mode)."""
        if self.playing:
            self.toggle_play()
        loop = "repeat" if self.blending else self.loop
        self.seek(wrap_time(self.local_time + frames * STEP_SECONDS, self.duration, loop))

    def _settle(self) -> None:
        """End any transition: only the chosen clip (or the blend space) plays, at full weight."""
        if not self._in_transition():
            return
        self.player.stop()
        if self.blending:
            self.blend.space.play()
        else:
            self.player.play(self.clip, loop=self.loop, speed=self.speed)
        self._apply_pause()

    # -- blend mode ------------------------------------------------------------------------------

    def _make_blend(self, samples, value: float | None) -> BlendSlider:
        asset = self.player.asset
        resolved = [(asset.clips.index(asset.clip(key)), float(position)) for key, position in samples]
        indices = [c for c, _ in resolved]
        if len(set(indices)) != len(indices):
            raise ValueError("the blend space names one clip twice")
        ordered = sorted(resolved, key=lambda s: s[1])
        space = self.player.blend_space_1d(ordered, parameter=BLEND_PARAMETER)
        self.player.mixer.controllers.append(_BlendSpeed(self))  # after the space's controller
        clips, positions = [c for c, _ in ordered], [p for _, p in ordered]
        if value is None:
            value = positions[clips.index(self.clip)] if self.clip in clips else resolved[0][1]
        slider = BlendSlider(clips, positions, space, 0.0)
        slider.value = slider.clamp(value)
        return slider

    def ensure_blend(self) -> BlendSlider | None:
        """The blend space (made with :func:`default_blend_samples` on first use), or None when the
        model has fewer than two clips."""
        if self.blend is None:
            samples = default_blend_samples(self.clip_names)
            if samples:
                self.blend = self._make_blend(samples, None)
        return self.blend

    def toggle_blend(self) -> None:
        """B: enter blend mode (the slider starts at the current clip's position when it is a sample),
        or leave it for the clip that weighs most in the blend."""
        if self.blending:
            self.select_clip(self.blend.clips[int(np.argmax(self.blend.weights()))])
            return
        blend = self.ensure_blend()
        if blend is None:
            self.show_message("blend mode needs a model with 2 or more clips")
            return
        if self.clip in blend.clips:
            blend.value = blend.positions[blend.clips.index(self.clip)]
        self._start_blend(self._fade())

    def _start_blend(self, fade: float) -> None:
        """Crossfade (or cut, ``fade`` 0) from whatever plays to the blend space."""
        blend = self.blend
        if fade <= 0.0:
            self.player.stop()
        # The blend space has action slots of its own: playing it fades out whatever plays (frozen
        # poses included) from its current weight, so nothing jumps.
        self.player.set(BLEND_PARAMETER, blend.value)
        blend.space.play(fade=fade)
        self.mode = "blend"
        self._apply_pause()

    def set_blend_value(self, value: float) -> None:
        """Move the slider to ``value`` (clamped to the samples' range); in blend mode the blend
        space's parameter follows (``player.set``)."""
        if self.blend is None:
            return
        self.blend.value = self.blend.clamp(value)
        if self.blending:
            self.player.set(BLEND_PARAMETER, self.blend.value)

    def nudge_blend(self, steps: int) -> bool:
        """, and .: move the slider by ``steps`` x :attr:`BlendSlider.step` (blend mode only)."""
        if not self.blending:
            return False
        self.set_blend_value(self.blend.value + steps * self.blend.step)
        return True

    # -- overlays --------------------------------------------------------------------------------

    def cycle_joint(self, step: int) -> None:
        """Previous/next joint for the heat-map (and show the heat-map)."""
        if not self.joint_names:
            return
        self.joint = (self.joint + step) % len(self.joint_names)
        self.weights = True

    # -- input -----------------------------------------------------------------------------------

    def key(self, name: str) -> bool:
        """Handle a key by name: a printable character (``"s"``, ``"+"``, ``"3"``; letters in either
        case) or one of ``space escape up down left right home f1``. Returns whether it did anything."""
        k = name.lower() if len(name) == 1 else name
        if k in ("space", " "):
            self.toggle_play()
        elif k.isdigit() and len(k) == 1 and k != "0":
            if int(k) > self.clip_count:
                return False
            self.select_clip(int(k) - 1)
        elif k == "up":
            if self.clip_count:
                self.select_clip((self.clip - 1) % self.clip_count)
        elif k == "down":
            if self.clip_count:
                self.select_clip((self.clip + 1) % self.clip_count)
        elif k in ("+", "="):
            self.change_speed(+1)
        elif k in ("-", "_"):
            self.change_speed(-1)
        elif k == "l":
            self.cycle_loop()
        elif k == "c":
            self.crossfade = not self.crossfade
        elif k == "b":
            self.toggle_blend()
        elif k in (",", "<"):
            return self.nudge_blend(-1)
        elif k in (".", ">"):
            return self.nudge_blend(+1)
        elif k == "s":
            self.skeleton = not self.skeleton
        elif k == "w":
            self.weights = not self.weights and bool(self.joint_names)
        elif k == "[":
            self.cycle_joint(-1)
        elif k == "]":
            self.cycle_joint(+1)
        elif k == "left":
            self.step(-1)
        elif k == "right":
            self.step(+1)
        elif k == "home":
            self.seek(0.0)
        elif k == "r":
            if self.camera is not None:
                self.camera.reset()
        elif k == "p":
            self.screenshot_requested = True
        elif k in ("h", "f1", "?"):
            self.show_help = not self.show_help
        elif k in ("escape", "q"):
            self.quit = True
        else:
            return False
        return True

    def mouse_down(self, x: float, y: float, button: str = "left", shift: bool = False) -> None:
        """A button pressed at (x, y): the blend slider sets the parameter and starts dragging, the
        timeline seeks and starts scrubbing, a clip row selects its clip, elsewhere left starts
        orbiting and right/middle (or shift+left) panning."""
        self._mouse = (x, y)
        layout = self.layout
        if button == "left" and layout is not None and not shift:
            if self.blending and layout.slider_hit is not None and layout.slider_hit.contains(x, y):
                self._drag = "slider"
                self._slide_to(x)
                return
            if layout.timeline_hit.contains(x, y):
                self._drag = "scrub"
                self._scrub_to(x)
                return
            index = layout.clip_at(x, y)
            if index is not None:
                self.select_clip(index)
                return
            overlay = layout.overlay_at(x, y)
            if overlay is not None:
                self.key("s" if overlay == "skeleton" else "w")
                return
            if layout.bottom_panel.contains(x, y):
                return
        if button == "left" and not shift:
            self._drag = "orbit"
        elif button in ("left", "right", "middle"):
            self._drag = "pan"

    def mouse_move(self, x: float, y: float) -> None:
        """The cursor moved to (x, y): continues a drag."""
        dx, dy = x - self._mouse[0], y - self._mouse[1]
        self._mouse = (x, y)
        scale = self.layout.scale if self.layout is not None else 1.0
        if self._drag == "scrub":
            self._scrub_to(x)
        elif self._drag == "slider":
            self._slide_to(x)
        elif self._drag == "orbit" and self.camera is not None:
            self.camera.orbit(dx, dy, scale)
        elif self._drag == "pan" and self.camera is not None:
            height = self.layout.height if self.layout is not None else 480
            self.camera.pan(dx, dy, height)

    def mouse_up(self, button: str = "left") -> None:
        self._drag = None

    def scroll(self, dy: float) -> None:
        """Wheel: up (dy > 0) zooms in."""
        if self.camera is not None:
            self.camera.zoom(dy)

    def _scrub_to(self, x: float) -> None:
        bar = self.layout.timeline
        self.seek_fraction((x - bar.x) / max(bar.w, 1.0))

    def _slide_to(self, x: float) -> None:
        track = self.layout.slider
        if track is not None and self.blend is not None:
            self.set_blend_value(self.blend.value_at((x - track.x) / max(track.w, 1.0)))

    # -- text ------------------------------------------------------------------------------------

    def clip_label(self, index: int) -> str:
        """A clip list row: ``"3  walk"`` (keys 1-9 shown for the first nine)."""
        key = str(index + 1) if index < 9 else " "
        return f"{key}  {self.clip_names[index]}"

    def clip_row_value(self, index: int, weights: Sequence[float] | None = None) -> str:
        """A row's right-hand text: the clip's length, or in blend mode a sample's weight (``w 0.75``)."""
        if self.blending and index in self.blend.clips:
            weight = (weights if weights is not None else self.clip_weights())[index]
            return f"w {weight:.2f}"
        return f"{self.durations[index]:.2f} s"

    def clip_row_text(self, index: int) -> str:
        """A row's widest text, label and value, as wide as the row needs to be."""
        value = max(f"{self.durations[index]:.2f} s", "w 0.00", key=len)
        return f"{self.clip_label(index)}    {value}"

    def status_text(self) -> str:
        """The status line above the timeline."""
        if self.blending:
            what = f"blend {self.blend.value:.2f}  cycle {self.local_time:.3f} / {self.duration:.3f} s"
            loop = "blend cycle repeats"
        else:
            what = f"{self.clip_name}  {self.local_time:.3f} / {self.duration:.3f} s"
            loop = f"loop {self.loop}"
        parts = [
            "playing" if self.playing else "paused",
            what,
            f"speed {self.speed:g}x",
            loop,
            f"crossfade {'on' if self.crossfade else 'off (cut)'}",
        ]
        fade = self.fade_weight
        if fade < 1.0:
            parts[-1] = f"fading {100 * fade:.0f}%"
        if self.message:
            parts.append(self.message)
        return "   ".join(parts)

    def slider_text(self) -> str:
        """The slider's label: the parameter and its value."""
        return f"{BLEND_PARAMETER}  {self.blend.value:.2f}" if self.blend is not None else ""

    def describe_playback(self) -> str:
        """What plays, in a few words: ``clip 'walk'`` or ``blend 1.40 (walk 0.82, run 0.18)``."""
        if not self.blending:
            return f"clip {self.clip_name!r}"
        parts = [f"{self.clip_names[c]} {w:.2f}" for c, w in zip(self.blend.clips, self.blend.weights()) if w > 0]
        return f"blend {self.blend.value:.2f} ({', '.join(parts)})"

    def overlay_text(self, name: str) -> tuple[str, str]:
        """An overlay row: (label with its key, value), e.g. ``("W  weights", "chest 3/22")``."""
        if name == "skeleton":
            return "S  skeleton", "on" if self.skeleton else "off"
        if not self.joint_names:
            return "W  weights", "no skin"
        if self.heat_joint is None:
            return "W  weights", "off"
        return "W  weights", f"{self.joint_name} {self.joint + 1}/{len(self.joint_names)}"

    def overlay_widest(self) -> list[str]:
        """The widest texts the overlay rows can show (to size the panel once)."""
        longest = max(self.joint_names, key=len, default="")
        n = len(self.joint_names)
        return ["S  skeleton    off", f"W  weights    {longest} {n}/{n}", "[ ]  joint"]
