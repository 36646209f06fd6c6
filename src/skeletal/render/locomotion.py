"""Rendering motion matching: the built-in character (or any model with a locomotion set) following a
scripted path (``skeletal locomotion``)
with the desired and the matched trajectories drawn on the ground.

:class:`PathScene` steps a :class:`~skeletal.playback.locomotion.MotionMatching` controller (the demo
locomotion set, :func:`skeletal.demo.locomotion_asset`) along a path at 60 Hz: each step the goal is
the path's velocity plus a pull of 1/s toward the path point at that time, as in
:mod:`skeletal.bench.motion_path`. Or, with no path, a goal set by the caller (the viewer's keys).
It gives the lines to draw, world (K, 3) points on the ground: the path, the desired trajectory (the
path over the next second), the predicted one (the controller's spring) and the matched one (the
trajectory stored with the database frame playing, placed at the character).

:class:`PathRenderer` is a :class:`.renderer.Renderer` that draws such lines as flat ribbons on the
ground (under the character, hidden by it) and follows the character with its camera.
"""

from __future__ import annotations

import math

import moderngl
import numpy as np

from .errors import RenderError
from .programs import set_uniform, write_matrix
from .renderer import Renderer

#: Path speeds: name -> (path speed m/s, figure-eight radius m), as in the motion-path benchmark.
from ..playback.locomotion.paths import PATHS, SPEEDS  # the command's choices live there (no GL)

PATH_COLOR = (0.45, 0.47, 0.52, 0.55)
DESIRED_COLOR = (0.15, 0.45, 0.95, 0.95)
MATCHED_COLOR = (0.98, 0.50, 0.10, 0.95)
TRAIL_COLOR = (0.20, 0.70, 0.35, 0.8)

_IN_PLACE = ("idle", "wave", "walk", "run")  # the demo's in-place clips: not in the database


class PathScene:
    """A character under motion matching on ``path`` ("figure8", or None: the caller sets the goal with
    :meth:`steer`) at ``speed`` ("walk" or "run"), with stride and orientation warping unless
    ``warping`` is False. The built-in character (its locomotion set), or ``model``: a model file or a
    folder of BVH files whose idle, walk and run clips (or the ``clips`` named) make the set
    (:func:`~skeletal.playback.locomotion.gaits.locomotion_set`); its path runs at the gait's own speed
    and is scaled to the model's size (:attr:`scale`: model units per metre); warping stays off where the
    set says it cannot run (``warping_ok``).

    >>> scene = PathScene("figure8", "walk")                # doctest: +SKIP
    >>> for _ in range(60): scene.step(1 / 60)               # doctest: +SKIP
    >>> scene.lines()["matched"].shape                       # doctest: +SKIP
    (4, 3)
    """

    def __init__(self, path: str | None = "figure8", speed: str = "walk", *, warping: bool = True,
                 model: str | None = None, clips: list[str] | None = None):
        from ..demo import locomotion_asset
        from ..playback import Player
        from ..playback.locomotion import MatchingDatabase, MotionMatching
        from ..playback.locomotion.paths import figure_eight_path

        if path is not None and path not in PATHS:
            raise RenderError(f"unknown path {path!r}: one of {', '.join(PATHS)}")
        if speed not in SPEEDS:
            raise RenderError(f"unknown speed {speed!r}: one of {', '.join(SPEEDS)}")
        self.speed, self.radius = SPEEDS[speed]
        self.scale = 1.0  # model units per metre
        if model is None:
            if clips is not None:
                raise RenderError("--clips chooses a MODEL's clips: give a MODEL")
            self.asset = locomotion_asset()
            self.database = MatchingDatabase.build(self.asset, exclude=_IN_PLACE)
        else:
            from ..playback.locomotion.gaits import locomotion_set

            moves = locomotion_set(model, clips)
            self.asset, self.database, self.scale = moves.asset, moves.database, moves.scale
            if speed not in moves.speeds or moves.speeds[speed] < 1e-9:
                raise RenderError(f"{model}: no {'walking' if speed == 'walk' else 'running'} clip for --speed {speed} "
                                  f"(its locomotion clips: {', '.join(moves.gaits.values())})")
            # the path at the gait's own speed, as wide for it as the built-in character's is for its own
            self.speed, self.radius = moves.speeds[speed], moves.speeds[speed] * self.radius / self.speed
            warping = warping and moves.warping_ok  # no leg IK on a rig whose feet are not on its legs
        self.controller = MotionMatching(Player(self.asset), self.database, warping=warping)
        self.path = figure_eight_path(self.speed, self.radius) if path is not None else None
        self.time = 0.0
        self.trail: list[np.ndarray] = []
        db = self.database
        group = [f for f in db.feature_set if f.kind == "trajectory_position"][0]
        self._traj_columns = np.arange(db.width)[db.group(group.name)]

    def steer(self, velocity, facing: float | None = None) -> None:
        """The goal without a path: world (x, z) velocity in m/s (scaled to the model) and an optional
        facing (radians)."""
        self.controller.set_goal(np.asarray(velocity, np.float64) * self.scale, facing)

    def step(self, dt: float) -> None:
        """Advance the character by ``dt`` seconds (toward the path point, with a path)."""
        mm = self.controller
        if self.path is not None:
            p, v = self.path(self.time)
            mm.set_goal(v + (p - mm.position[[0, 2]]))
        mm.update(dt)
        self.time += dt
        self.trail = (self.trail + [mm.position.copy()])[-240:]

    @property
    def world(self) -> np.ndarray:
        """(N, 4, 4) world matrices of the character (placed by the controller)."""
        return np.einsum("ab,nbc->nac", self.controller.transform, self.controller.player.world)

    def matched_trajectory(self) -> np.ndarray:
        """The trajectory stored with the database frame playing, placed at the character: (K + 1, 3)
        world points from the root."""
        mm, db = self.controller, self.database
        row, _ = mm._current_row()
        start = mm.position.copy()
        if row < 0:
            return start[None]
        raw = db.features[row, self._traj_columns] * db.scale[self._traj_columns] + db.mean[self._traj_columns]
        xz = raw.reshape(-1, 2)
        c, s = math.cos(mm.facing), math.sin(mm.facing)
        world = np.stack([c * xz[:, 0] + s * xz[:, 1], np.zeros(len(xz)), -s * xz[:, 0] + c * xz[:, 1]], axis=1)
        return np.concatenate([start[None], world + start])

    def desired_trajectory(self, seconds: float = 1.0) -> np.ndarray:
        """The path over the next ``seconds`` (with a path), else the controller's predicted trajectory,
        from the root: (K, 3) world points."""
        mm = self.controller
        if self.path is None:
            predicted, _ = mm.predicted_trajectory()
            return np.concatenate([mm.position[None], predicted])
        ts = self.time + np.linspace(0.0, seconds, 16)
        points = np.array([self.path(t)[0] for t in ts])
        return np.stack([points[:, 0], np.zeros(len(ts)), points[:, 1]], axis=1)

    def whole_path(self) -> np.ndarray | None:
        """The whole path (K, 3), or None."""
        if self.path is None:
            return None
        period = 2.0 * math.pi / (self.speed * 2.0 * math.pi / self._path_length())
        points = np.array([self.path(t)[0] for t in np.linspace(0.0, period, 200)])
        return np.stack([points[:, 0], np.zeros(len(points)), points[:, 1]], axis=1)

    def _path_length(self) -> float:
        u = np.linspace(0.0, 2.0 * math.pi, 2001)
        r = self.radius
        return float(np.sum(np.hypot(np.diff(r * np.sin(u)), np.diff(r * np.sin(2.0 * u) / 2.0))))

    def lines(self) -> list[tuple[np.ndarray, tuple[float, float, float, float], float]]:
        """What to draw: (points (K, 3), RGBA colour, width m) per line, path first."""
        out = []
        whole = self.whole_path()
        k = self.scale
        if whole is not None:
            out.append((whole, PATH_COLOR, 0.05 * k))
        if len(self.trail) > 1:
            out.append((np.array(self.trail), TRAIL_COLOR, 0.05 * k))
        out.append((self.desired_trajectory(), DESIRED_COLOR, 0.09 * k))
        out.append((self.matched_trajectory(), MATCHED_COLOR, 0.09 * k))
        return out


def ribbon(points: np.ndarray, width: float, lift: float) -> np.ndarray:
    """A triangle strip (2K, 3) float32 of a flat ribbon ``width`` wide along the polyline ``points``
    (K, 3) on the ground, ``lift`` above it."""
    p = np.asarray(points, np.float64)
    if len(p) < 2:
        return np.zeros((0, 3), np.float32)
    d = np.gradient(p[:, [0, 2]], axis=0)
    n = np.hypot(d[:, 0], d[:, 1])
    d = d / np.maximum(n, 1e-9)[:, None]
    side = np.stack([-d[:, 1], d[:, 0]], axis=1) * (0.5 * width)
    left = p.copy()
    right = p.copy()
    left[:, [0, 2]] += side
    right[:, [0, 2]] -= side
    left[:, 1] = right[:, 1] = p[:, 1] + lift
    return np.stack([left, right], axis=1).reshape(-1, 3).astype(np.float32)


class PathRenderer(Renderer):
    """A Renderer that draws :attr:`lines` ((points, rgba, width) on the ground) under the character
    and, after :meth:`frame_area`, keeps the camera on the character (:meth:`follow_point`)."""

    def __init__(self, asset, width: int = 640, height: int = 480, **options):
        super().__init__(asset, width, height, **options)
        self.lines: list = []
        self._line_buffer = None
        self._base: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def frame_area(self, half: float, height: float = 1.8) -> None:
        """Frame a square of ``half`` m around the origin (the character's surroundings)."""
        self.facing = 0.0
        self.set_bounds(np.array([-half, 0.0, -half]), np.array([half, height, half]))
        self._base = (self.camera.eye.copy(), self.camera.target.copy(), self._ground_center.copy())

    def follow_point(self, point) -> None:
        """Move the camera and the ground patch with the character at world ``point`` (3,)."""
        if self._base is None:
            return
        shift = np.array([point[0], 0.0, point[2]])
        self.camera.eye, self.camera.target = self._base[0] + shift, self._base[1] + shift
        self._ground_center = self._base[2] + shift

    def _draw_shadows(self, view_proj, world, offsets) -> None:
        super()._draw_shadows(view_proj, world, offsets)
        strips = [(ribbon(p, w, 0.004 * (k + 1)), color) for k, (p, color, w) in enumerate(self.lines)]
        strips = [(s, c) for s, c in strips if len(s)]
        if not strips:
            return
        data = np.concatenate([s for s, _ in strips])
        ctx, program = self.ctx, self._overlay_program
        if self._line_buffer is None or self._line_buffer.size < data.nbytes:
            if self._line_buffer is not None:
                self._line_buffer.release()
            self._line_buffer = ctx.buffer(reserve=max(data.nbytes, 16384), dynamic=True)
        self._line_buffer.write(data.tobytes())
        vao = ctx.vertex_array(program, [(self._line_buffer, "3f", "a_position")])
        ctx.enable(moderngl.DEPTH_TEST | moderngl.BLEND)
        ctx.disable(moderngl.CULL_FACE)
        ctx.blend_func = moderngl.SRC_ALPHA, moderngl.ONE_MINUS_SRC_ALPHA
        write_matrix(program, "u_view_proj", view_proj)
        set_uniform(program, "u_round", False)
        set_uniform(program, "u_point_size", 1.0)
        first = 0
        for strip, color in strips:
            set_uniform(program, "u_color", color)
            vao.render(moderngl.TRIANGLE_STRIP, vertices=len(strip), first=first)
            first += len(strip)
        vao.release()

    def release(self) -> None:
        if self._line_buffer is not None:
            self._line_buffer.release()
            self._line_buffer = None
        super().release()


def render_locomotion(out_path: str, *, path: str = "figure8", speed: str = "walk", seconds: float = 12.0,
                      fps: float = 30.0, size: tuple[int, int] | str = (640, 480), warping: bool = True,
                      camera: str | None = None, progress: bool = True, model: str | None = None,
                      clips: list[str] | None = None) -> dict:
    """Render the built-in character (or ``model`` with its ``clips``: see :class:`PathScene`) following
    ``path`` at ``speed`` under motion matching to
    ``out_path`` (.mp4, .gif, or .png: the last frame; see :func:`.output.render_clip`'s formats),
    simulated at 60 Hz and drawn at ``fps``. Returns the frame count, the size and the controller's
    searches and jumps."""
    import os

    from .camera import CameraSpec, parse_camera
    from .output import _WRITERS, FORMATS, _progress, parse_size

    if not (fps > 0 and seconds > 0):
        raise RenderError(f"fps and seconds must be positive, got {fps} and {seconds}")
    ext = os.path.splitext(out_path)[1].lower()
    if ext not in _WRITERS:
        raise RenderError(f"cannot write {out_path!r}: the output must end in {', '.join(FORMATS)}")
    folder = os.path.dirname(os.path.abspath(out_path))
    if not os.path.isdir(folder):
        raise RenderError(f"cannot write {out_path}: folder {folder} does not exist")
    width, height = parse_size(size)
    scene = PathScene(path, speed, warping=warping, model=model, clips=clips)
    spec = parse_camera(camera) if camera is not None else CameraSpec(yaw=35.0, pitch=45.0)
    renderer = PathRenderer(scene.asset, width, height, camera=spec)
    steps = max(int(round(60.0 / fps)), 1)
    count = max(int(round(seconds * fps)), 1)
    try:
        renderer.frame_area((1.3 if speed == "walk" else 2.0) * scene.scale, 1.8 * scene.scale)
        single = ext == ".png"
        writer = _WRITERS[ext](out_path, fps, False)
        bar = _progress(count, os.path.basename(out_path), progress)
        try:
            for k in range(count):
                for _ in range(steps):
                    scene.step(1.0 / 60.0)
                if single and k < count - 1:
                    continue
                renderer.lines = scene.lines()
                renderer.follow_point(scene.controller.position)
                writer.append(renderer.draw(scene.world[None]))
                bar.update(1)
        finally:
            bar.close()
        paths = writer.close()
    finally:
        renderer.release()
    mm = scene.controller
    return dict(paths=paths, frames=1 if ext == ".png" else count, size=(width, height), searches=mm.searches,
                jumps=mm.jumps)
