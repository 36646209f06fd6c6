"""The viewer's model: everything ``skeletal view`` does that needs no window and no OpenGL.

* :class:`ViewerState` -- clip choice, playback clock (speed, loop mode, crossfade), overlays and
  the orbit camera. Keyboard and mouse arrive as plain method calls (:meth:`ViewerState.key`,
  :meth:`ViewerState.mouse_down`...), so tests drive it without a window.
* :class:`OrbitCamera` -- yaw/pitch/distance around a target, built from :func:`.camera.frame`.
* :func:`compute_layout` -- where the clip list, the timeline and the help line sit in a window of a
  given size (hit-testing for clicks uses the same rectangles the UI is drawn in).
* :class:`ClipBlend` -- the pose source: samples the current clip and, during a crossfade, the clip
  being faded out, and mixes the two local poses. It is the stand-in for :class:`skeletal.Player`
  (see its docstring for the switch).

Coordinates are framebuffer pixels, origin at the top left, y down. Importing this module imports
numpy and the library's CPU modules only (no moderngl, no glfw).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from .camera import Camera

#: speeds the +/- keys step through
SPEEDS: tuple[float, ...] = (0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0)
#: the L key cycles through these, in this order
LOOP_CYCLE: tuple[str, ...] = ("repeat", "pingpong", "clamp")
#: length of a crossfade between clips, seconds (wall clock)
CROSSFADE_SECONDS = 0.3
#: the step of the left/right arrow keys, seconds of clip time
STEP_SECONDS = 1.0 / 30.0

#: (keys, what they do): the help panel (H) lists these; HELP_LINE is the one-line summary always shown
CONTROLS: tuple[tuple[str, str], ...] = (
    ("left drag", "orbit the camera"),
    ("right / middle / shift drag", "pan"),
    ("wheel", "zoom"),
    ("R", "reset the camera framing"),
    ("1-9, Up / Down, click", "choose a clip"),
    ("space", "play / pause"),
    ("click / drag the bar", "seek (scrub) the timeline"),
    ("Left / Right, Home", "step one frame, back to the start"),
    ("+ / -", "playback speed"),
    ("L", "loop mode: repeat, pingpong, clamp"),
    ("C", "crossfade (0.3 s) or cut between clips"),
    ("S", "skeleton overlay"),
    ("W, [ and ]", "weight heat-map, previous / next joint"),
    ("P", "save a screenshot (skeletal-view-N.png)"),
    ("H / F1", "this help"),
    ("Esc / Q", "quit"),
)
HELP_LINE = ("drag: orbit   right-drag: pan   wheel: zoom   R: reset view   1-9/Up/Down: clip   space: play   "
             "+/-: speed   L: loop   C: crossfade   S: skeleton   W [ ]: weights   P: screenshot   H: help   Esc: quit")


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
    that grabs clicks; ``help_lines`` the help text wrapped to the window's width.
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


def compute_layout(width: int, height: int, clip_labels: Sequence[str], current_clip: int,
                   measure: Callable[[str], float], line_height: int, scale: float = 1.0,
                   help_text: str = HELP_LINE, overlay_labels: Sequence[str] = ()) -> Layout:
    """The UI layout for a ``width`` x ``height`` framebuffer.

    ``clip_labels`` are the clip list's row texts and ``overlay_labels`` the overlay rows' widest
    texts (their widths size the panel), ``measure`` gives a text's width in pixels and
    ``line_height`` a text line's height. Clip rows that do not fit above the bottom panel are
    scrolled so that ``current_clip`` stays visible.
    """
    pad = max(2, round(8 * scale))
    margin = max(2, round(10 * scale))
    # Bottom panel: status line, timeline bar, wrapped help lines.
    help_lines = wrap_text(help_text, width - 2 * pad, measure)
    bar_h = max(4, round(10 * scale))
    bottom_h = pad + line_height + pad // 2 + bar_h + pad + len(help_lines) * line_height + pad
    bottom = Rect(0, height - bottom_h, width, bottom_h)
    status_y = int(bottom.y + pad)
    timeline = Rect(pad, status_y + line_height + pad // 2, max(1, width - 2 * pad), bar_h)
    grab = max(6, round(7 * scale))
    timeline_hit = Rect(0, timeline.y - grab, width, timeline.h + 2 * grab)
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
                  timeline_hit, help_lines, help_y)


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


# -- state ---------------------------------------------------------------------------------------


@dataclass
class Fade:
    """A crossfade in progress: clip ``source`` (at its own playback ``time``) fades out while the
    current clip fades in; ``elapsed`` of ``duration`` seconds (wall clock) have passed."""

    source: int
    time: float
    elapsed: float = 0.0
    duration: float = CROSSFADE_SECONDS

    @property
    def weight(self) -> float:
        """Weight of the clip fading in (0 at the start, 1 at the end)."""
        return 1.0 if self.duration <= 0 else min(1.0, max(0.0, self.elapsed / self.duration))


def loop_local_time(t: float, duration: float, loop: str) -> float:
    """Clip-local time for a playback time (same rules as :func:`skeletal.map_time`)."""
    if duration <= 0:
        return 0.0
    if loop == "clamp":
        return min(max(t, 0.0), duration)
    if loop == "repeat":
        return t - duration * math.floor(t / duration)
    m = t - 2.0 * duration * math.floor(t / (2.0 * duration))
    return 2.0 * duration - m if m > duration else m


def _wrap_playback(t: float, duration: float, loop: str) -> float:
    """Keep a playback time in one period (so it never grows without bound) without moving the pose."""
    if duration <= 0:
        return 0.0
    if loop == "clamp":
        return min(max(t, 0.0), duration)
    period = duration if loop == "repeat" else 2.0 * duration
    return t - period * math.floor(t / period)


class ViewerState:
    """Everything the viewer shows, and how keys and the mouse change it. No window needed.

    Args:
        clip_names, durations: the model's clips (may be empty: the rest pose is shown).
        joint_names: names of the joints the weight heat-map can show, in cycling order.
        clip: index of the clip to start with; ``time`` its start time.
        default_joint: index into ``joint_names`` shown first by the heat-map.

    Playback: ``time`` is the current clip's playback time (``local_time`` maps it through the loop
    mode), advanced by :meth:`advance` at ``speed`` while ``playing``. Choosing another clip either
    cuts or (``crossfade`` on, the default) starts a :class:`Fade` of :data:`CROSSFADE_SECONDS` from
    the old clip, which keeps playing until the fade ends. Fades run on wall-clock time, so they also
    finish while paused.
    """

    def __init__(self, clip_names: Sequence[str], durations: Sequence[float], joint_names: Sequence[str] = (),
                 *, clip: int = 0, time: float = 0.0, speed: float = 1.0, loop: str = "repeat",
                 default_joint: int = 0):
        if len(clip_names) != len(durations):
            raise ValueError("one duration per clip name")
        if loop not in LOOP_CYCLE:
            raise ValueError(f"loop mode {loop!r} is not one of {', '.join(LOOP_CYCLE)}")
        self.clip_names = list(clip_names)
        self.durations = [float(d) for d in durations]
        self.joint_names = list(joint_names)
        self.clip = min(max(int(clip), 0), max(len(self.clip_names) - 1, 0))
        self.loop = loop
        self.time = _wrap_playback(float(time), self.duration, loop)
        self.playing = True
        self.speed = float(speed)
        self.crossfade = True
        self.fade: Fade | None = None
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
        self._drag: str | None = None  # "orbit", "pan", "scrub"
        self._mouse = (0.0, 0.0)

    # -- derived values --------------------------------------------------------------------------

    @property
    def clip_count(self) -> int:
        return len(self.clip_names)

    @property
    def clip_name(self) -> str:
        return self.clip_names[self.clip] if self.clip_names else "rest pose"

    @property
    def duration(self) -> float:
        return self.durations[self.clip] if self.durations else 0.0

    @property
    def local_time(self) -> float:
        """The current clip's time as shown (0..duration; a seek to the very end shows the end)."""
        if self.duration > 0 and self.time == self.duration:
            return self.duration
        return loop_local_time(self.time, self.duration, self.loop)

    @property
    def fade_local_time(self) -> float:
        """The fading-out clip's local time (0 without a fade)."""
        if self.fade is None:
            return 0.0
        return loop_local_time(self.fade.time, self.durations[self.fade.source], self.loop)

    @property
    def fade_weight(self) -> float:
        """Weight of the current clip: 1 unless a crossfade is in progress."""
        return 1.0 if self.fade is None else self.fade.weight

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

    # -- playback --------------------------------------------------------------------------------

    def show_message(self, text: str, seconds: float = 4.0) -> None:
        """Show ``text`` at the end of the status line for ``seconds`` (wall clock)."""
        self.message, self._message_left = text, float(seconds)

    def advance(self, dt: float) -> None:
        """Move the clock by ``dt`` seconds of wall time."""
        dt = max(0.0, float(dt))
        if self.message:
            self._message_left -= dt
            if self._message_left <= 0.0:
                self.message = ""
        if self.fade is not None:
            self.fade.elapsed += dt
            if self.playing:
                self.fade.time = _wrap_playback(self.fade.time + dt * self.speed, self.durations[self.fade.source],
                                                self.loop)
            if self.fade.elapsed >= self.fade.duration:
                self.fade = None
        if self.playing and self._drag != "scrub":
            self.time = _wrap_playback(self.time + dt * self.speed, self.duration, self.loop)

    def select_clip(self, index: int) -> None:
        """Switch to clip ``index`` from its start: a crossfade when enabled, else a cut.

        Only two clips blend: a choice made during a crossfade fades from whichever of the two
        clips dominates the pose at that moment (the other one drops out)."""
        if not self.clip_names or not 0 <= index < self.clip_count or index == self.clip:
            return
        if not self.crossfade:
            self.fade = None
        elif self.fade is not None and self.fade.weight < 0.5 and self.fade.source != index:
            self.fade = Fade(self.fade.source, self.fade.time)
        else:
            self.fade = Fade(self.clip, self.time)
        self.clip = index
        self.time = 0.0

    def toggle_play(self) -> None:
        """Play or pause; playing a clamped clip that reached its end starts it again."""
        if not self.playing and self.loop == "clamp" and self.duration > 0 and self.time >= self.duration:
            self.time = 0.0
        self.playing = not self.playing

    def change_speed(self, step: int) -> None:
        """One step up or down :data:`SPEEDS` (from the nearest step to the current speed)."""
        nearest = min(range(len(SPEEDS)), key=lambda i: abs(SPEEDS[i] - self.speed))
        self.speed = SPEEDS[min(max(nearest + step, 0), len(SPEEDS) - 1)]

    def cycle_loop(self) -> None:
        """Next loop mode; the pose shown does not jump."""
        local, fade_local = self.local_time, self.fade_local_time
        self.loop = LOOP_CYCLE[(LOOP_CYCLE.index(self.loop) + 1) % len(LOOP_CYCLE)]
        self.time = local
        if self.fade is not None:
            self.fade.time = fade_local

    def seek(self, t: float) -> None:
        """Show clip time ``t`` (clamped to the clip); ends any crossfade."""
        self.fade = None
        self.time = min(max(float(t), 0.0), self.duration)

    def seek_fraction(self, fraction: float) -> None:
        self.seek(min(max(float(fraction), 0.0), 1.0) * self.duration)

    def step(self, frames: int) -> None:
        """Pause and move by ``frames`` steps of :data:`STEP_SECONDS` (wrapping like the loop mode)."""
        self.playing = False
        self.fade = None
        self.time = _wrap_playback(self.local_time + frames * STEP_SECONDS, self.duration, self.loop)

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
        """A button pressed at (x, y): the timeline seeks and starts scrubbing, a clip row selects its
        clip, elsewhere left starts orbiting and right/middle (or shift+left) panning."""
        self._mouse = (x, y)
        layout = self.layout
        if button == "left" and layout is not None and not shift:
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

    # -- text ------------------------------------------------------------------------------------

    def clip_label(self, index: int) -> str:
        """A clip list row: ``"3  walk"`` (keys 1-9 shown for the first nine)."""
        key = str(index + 1) if index < 9 else " "
        return f"{key}  {self.clip_names[index]}"

    def clip_row_text(self, index: int) -> str:
        """A row's full text, label and duration, as wide as the row needs to be."""
        return f"{self.clip_label(index)}    {self.durations[index]:.2f} s"

    def status_text(self) -> str:
        """The status line above the timeline."""
        parts = [
            "playing" if self.playing else "paused",
            f"{self.clip_name}  {self.local_time:.3f} / {self.duration:.3f} s",
            f"speed {self.speed:g}x",
            f"loop {self.loop}",
            f"crossfade {'on' if self.crossfade else 'off (cut)'}",
        ]
        if self.fade is not None:
            parts[-1] = f"fading {100 * self.fade_weight:.0f}%"
        if self.message:
            parts.append(self.message)
        return "   ".join(parts)

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


# -- pose source ---------------------------------------------------------------------------------


@dataclass
class Pose:
    """World matrices (N, 4, 4) and morph weights (M,) of one frame, with CPU timings (seconds)."""

    world: np.ndarray
    morph: np.ndarray
    timings: dict[str, float]


class ClipBlend:
    """Poses the asset for a :class:`ViewerState`: the current clip at its local time, mixed during a
    crossfade with the clip fading out (local poses: translations and scales lerped, rotations
    nlerped along the shortest arc, morph weights lerped), then world matrices.

    This is the viewer's only pose source (:meth:`pose` is the one call the viewer makes), a
    stand-in for :class:`skeletal.Player`. Switching to the Player is a change of this class only::

        __init__:  self.player = skeletal.Player(asset); self.shown = None
        pose():    clip = asset.clips[state.clip]
                   if state.clip != self.shown:            # the user chose a clip
                       if state.fade: self.player.crossfade(clip, state.fade.duration)
                       else:          self.player.play(clip, loop=state.loop)
                       self.shown = state.clip
                   self.player.action(clip).seek(state.local_time)  # the state's clock stays the
                   self.player.update(wall_dt)                      # master (scrubbing); fades advance
                   return Pose(self.player.world, self.player.morph_weights, timings)

    (``world`` is in rig order, as the renderer wants; ``node_world`` is in glTF node order.) The
    viewer could then upload ``player.palettes`` (one (J, 4, 4) per skin) instead of computing
    palettes from the world matrices, see :meth:`.viewer.WindowRenderer.render_frame`.
    """

    def __init__(self, asset):
        self.asset = asset
        self._rest_clip = None

    def _clip(self, index: int):
        if self.asset.clips:
            return self.asset.clips[index]
        if self._rest_clip is None:
            from .layout import rest_clip

            self._rest_clip = rest_clip()
        return self._rest_clip

    def _sample(self, index: int, t: float) -> tuple[np.ndarray, np.ndarray]:
        from ..sampling import sample

        asset = self.asset
        pose, morph = sample(self._clip(index), t, asset.rig.rest, asset.morph_start, asset.rest_morph, loop="clamp")
        return pose[0], morph[0]

    def pose(self, state: ViewerState) -> Pose:
        """The pose to draw for ``state`` (with ``sample`` and ``world`` timings)."""
        from ..pose import world_matrices

        t0 = time.perf_counter()
        local, morph = self._sample(state.clip, state.local_time)
        if state.fade is not None and state.fade_weight < 1.0:
            other, other_morph = self._sample(state.fade.source, state.fade_local_time)
            local, morph = blend_local_poses(other, other_morph, local, morph, state.fade_weight)
        t1 = time.perf_counter()
        world = world_matrices(self.asset.rig.parents, local)
        t2 = time.perf_counter()
        return Pose(world, morph, {"sample": t1 - t0, "world": t2 - t1})


def blend_local_poses(a: np.ndarray, morph_a: np.ndarray, b: np.ndarray, morph_b: np.ndarray,
                      w: float) -> tuple[np.ndarray, np.ndarray]:
    """Mix local poses (N, 10) ``a`` -> ``b`` by ``w`` (0 = a, 1 = b): translation and scale lerp,
    rotation normalised lerp on the shortest arc; morph weights (M,) lerp."""
    out = a * (1.0 - w) + b * w
    qa, qb = a[:, 3:7], b[:, 3:7]
    sign = np.where(np.sum(qa * qb, axis=1, keepdims=True) < 0.0, -1.0, 1.0)
    q = qa * (1.0 - w) + qb * sign * w
    norm = np.linalg.norm(q, axis=1, keepdims=True)
    out[:, 3:7] = np.where(norm > 1e-12, q / np.maximum(norm, 1e-12), qb)
    return out, morph_a * (1.0 - w) + morph_b * w
