"""Rendering procedural animation: a ground surface under the characters, posed by a Player/Mixer
with :class:`skeletal.playback.procedural.Procedural` stages (``skeletal render --ground/--look-at/--jiggle``).

:class:`TerrainRenderer` is a :class:`.renderer.Renderer` whose ground is a shaded mesh of a
:class:`skeletal.playback.ground.Ground` (the usual grid lines on it) instead of the flat grid.
:class:`ProceduralPoser` steps a :class:`skeletal.Mixer` frame by frame with foot placement, look-at
and jiggle stages; an in-place walk travels over the ground at the speed its planted feet pass under
it (:attr:`skeletal.playback.contacts.ContactPhases.ground_velocity`), so planted feet stay put on the
ground; the view follows the character (the ground is drawn shifted by the distance travelled).
"""

from __future__ import annotations

import math

import moderngl
import numpy as np

from ..errors import SkeletalError
from .errors import RenderError
from .programs import set_uniform, write_matrix
from .renderer import FLOOR_COLOR, FLOOR_LINE_COLOR, Renderer


class TerrainRenderer(Renderer):
    """A Renderer drawing ``ground`` (a :class:`skeletal.playback.ground.Ground`) as a lit mesh.

    ``shift`` (3,): world offset subtracted from the ground when drawing (the distance a character
    has travelled, so the view follows it). ``cells``: grid resolution of the drawn patch.
    """

    def __init__(self, asset, width: int = 640, height: int = 480, *, ground, cells: int = 120, **options):
        self.ground_surface = ground
        self.shift = np.zeros(3)
        self._cells = int(cells)
        self._terrain_vao = None
        self._terrain_buffers = ()
        self._terrain_key = None
        super().__init__(asset, width, height, **options)
        self._terrain_program = self._programs.get("terrain.vert.glsl", "terrain.frag.glsl")

    def _draw_ground(self, view_proj) -> None:
        ctx, program = self.ctx, self._terrain_program
        center = self._ground_center + np.array([self.shift[0], 0.0, self.shift[2]])
        half = self._ground_half
        # the patch moves in whole grid cells, so its vertices stay on the same ground points
        step = 2.0 * half / self._cells
        snapped = (round(center[0] / step) * step, round(center[2] / step) * step)
        key = (snapped, half)
        if key != self._terrain_key:
            positions, normals, indices = self.ground_surface.mesh(snapped, half, self._cells)
            if not (np.all(np.isfinite(positions)) and np.all(np.isfinite(normals))):
                raise RenderError("the ground has non-finite heights or normals in view")
            if self._terrain_vao is None:
                self._terrain_buffers = (ctx.buffer(positions.tobytes()), ctx.buffer(normals.tobytes()),
                                         ctx.buffer(indices.tobytes()))
                pos_buf, nrm_buf, idx_buf = self._terrain_buffers
                self._terrain_vao = ctx.vertex_array(program, [(pos_buf, "3f", "a_position"), (nrm_buf, "3f", "a_normal")],
                                                     index_buffer=idx_buf, index_element_size=4)
            else:
                self._terrain_buffers[0].write(positions.tobytes())
                self._terrain_buffers[1].write(normals.tobytes())
            self._terrain_key = key
        ctx.enable(moderngl.DEPTH_TEST | moderngl.BLEND)
        ctx.disable(moderngl.CULL_FACE)
        ctx.blend_func = moderngl.SRC_ALPHA, moderngl.ONE_MINUS_SRC_ALPHA
        write_matrix(program, "u_view_proj", view_proj)
        set_uniform(program, "u_shift", tuple(float(v) for v in self.shift))
        set_uniform(program, "u_center", (float(center[0]), float(center[1]), float(center[2])))
        set_uniform(program, "u_half_size", float(half))
        set_uniform(program, "u_cell", self._grid_cell)
        set_uniform(program, "u_floor_color", FLOOR_COLOR)
        set_uniform(program, "u_line_color", FLOOR_LINE_COLOR)
        set_uniform(program, "u_light_dir", tuple(float(v) for v in self._light_direction()))
        self._terrain_vao.render(moderngl.TRIANGLES)

    def _draw_shadows(self, view_proj, world, offsets) -> None:
        pass  # the blob shadows assume a flat floor

    def release(self) -> None:
        if self._terrain_vao is not None:
            self._terrain_vao.release()
            for buf in self._terrain_buffers:
                buf.release()
            self._terrain_vao = None
        super().release()


def parse_point(text: str, what: str = "--look-at") -> np.ndarray:
    """``"x,y,z"`` -> (3,) float array."""
    try:
        values = [float(v) for v in text.replace(":", ",").split(",")]
    except ValueError:
        raise RenderError(f"{what} {text!r} is not x,y,z (three numbers)") from None
    if len(values) != 3 or not all(math.isfinite(v) for v in values):
        raise RenderError(f"{what} {text!r} is not x,y,z (three finite numbers)")
    return np.array(values)


class ProceduralPoser:
    """Poses ``len(phases)`` instances of ``clip`` frame by frame with procedural stages.

    ``ground``: spec / Ground or None (no foot placement); ``look_at``: (3,) world point or None;
    ``jiggle``: True for tail springs (chains found by name); ``offsets`` (I, 3): where the
    instances stand (the crowd grid); ``travel``: move in-place walks over the ground.

    Calling ``poser(t)`` (t increasing) returns ``(world (I, N, 4, 4), morph (I, M), placements
    (I, 3))``: placements are the drawing offsets (the character's height on the ground, the grid;
    the distance travelled is in :attr:`shift`, for the ground).
    """

    def __init__(self, asset, clip, phases: np.ndarray, first: float, *, ground=None, look_at=None, jiggle=False,
                 offsets=None, travel: bool = True, fade=None):
        from ..playback import Mixer
        from ..playback.ground import as_ground
        from ..playback.procedural import Procedural

        count = len(phases)
        self.mixer = Mixer(asset, count, events=False)
        self.mixer.play(clip, offset=phases + first)
        self.fade = fade
        self.proc = Procedural(self.mixer)
        self.offsets = np.zeros((count, 3)) if offsets is None else np.asarray(offsets, np.float64).reshape(count, 3)
        self.ground = as_ground(ground) if ground is not None else None
        self.feet = None
        self.velocity = np.zeros(3)
        try:
            if self.ground is not None:
                self.feet = self.proc.foot_placement(self.ground, plant=travel)  # standing still: no foot lock
                if travel:
                    ph = self.feet.phases_for(clip)
                    v = -ph.ground_velocity.mean(axis=0)
                    self.velocity = np.array([v[0], 0.0, v[1]])
            if look_at is not None:
                self.proc.look_at(np.asarray(look_at, np.float64))
            if jiggle:
                self.proc.jiggle()
        except SkeletalError as exc:
            raise RenderError(str(exc)) from None
        self.now = first
        self.start = first
        self.shift = np.zeros(3)
        self._faded = False
        self._place(first)
        self.mixer.update(0.0)

    def _place(self, t: float) -> None:
        self.shift = self.velocity * (t - self.start)
        pos = self.offsets + self.shift
        if self.ground is not None:
            pos[:, 1] = self.ground.height(pos[:, 0], pos[:, 2])
        self.positions = pos
        self.proc.place(pos, 0.0)

    def __call__(self, t: float):
        if self.fade is not None and not self._faded and t >= self.fade[2]:
            self.mixer.update(max(self.fade[2] - self.now, 0.0))
            self.now = max(self.fade[2], self.now)
            self.mixer.crossfade(self.fade[1], self.fade[3])
            self._faded = True
        self._place(t)
        self.mixer.update(t - self.now)
        self.now = t
        placements = self.positions - np.array([self.shift[0], 0.0, self.shift[2]])
        return self.mixer.world, self.mixer.morph_weights, placements
