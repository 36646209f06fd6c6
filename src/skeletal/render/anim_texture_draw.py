"""Drawing a crowd from a baked animation texture (:mod:`.anim_texture`): per instance a clip, a clock
and a speed uploaded once; per frame one uniform, ``u_time`` (``shaders/anim_texture.glsl``).

>>> texture = bake_texture(asset, fps=30)                                   # doctest: +SKIP
>>> r = TextureCrowdRenderer(asset, texture, 960, 540)                      # doctest: +SKIP
>>> r.set_instances(clips, clocks, speeds, placements)                      # doctest: +SKIP
>>> image = r.draw_at(1.25)          # nothing uploaded but the time        # doctest: +SKIP
"""

from __future__ import annotations

import time

import moderngl
import numpy as np
import numpy.typing as npt

from .anim_texture import AnimTexture
from .context import limit
from .errors import RenderError
from .feedback import skinning_defines
from .layout import pose_at
from .palette import PALETTE_TEXTURE_UNIT
from .programs import set_uniform
from .renderer import Renderer


class TextureCrowdRenderer(Renderer):
    """A :class:`~skeletal.render.renderer.Renderer` whose skinning reads palettes from ``texture``
    (an :class:`~skeletal.render.anim_texture.AnimTexture` of ``asset``): linear blend skinning, every
    instance at its own clip and clock. :meth:`set_instances` once, then :meth:`draw_at` (or
    :meth:`render_at` without reading the image back) per frame. Shadows sit under each placement at
    the rest pose's centre; morph weights stay at rest."""

    def __init__(self, asset, texture: AnimTexture, width: int = 640, height: int = 480, **options):
        super().__init__(asset, width, height, instances=1, **options)
        if texture.joint_count != self.layout.joint_count:
            raise RenderError(f"the animation texture holds {texture.joint_count} palette matrices per frame; "
                              f"{asset.name} needs {self.layout.joint_count}")
        rows, width_texels = texture.texels.shape[:2]
        side = limit(self.ctx, "GL_MAX_TEXTURE_SIZE", 4096)
        if rows > side or width_texels > side:
            raise RenderError(f"the animation texture is {width_texels} x {rows} texels; GL_MAX_TEXTURE_SIZE is {side}")
        self.texture = texture
        self._anim_tex = self.ctx.texture((width_texels, rows), 4, np.ascontiguousarray(texture.texels).tobytes(),
                                          dtype="f4")
        self._anim_tex.filter = (moderngl.NEAREST, moderngl.NEAREST)
        self._clip_table = np.array([(c["first_row"], c["frames"], c["duration"]) for c in texture.clips], np.float32)
        self.mesh_program = self._programs.get("mesh.vert.glsl", "mesh.frag.glsl", {
            "PALETTE_ANIM_TEXTURE": 1, "ANIM_CLIPS": len(texture.clips), **skinning_defines("lbs"),
            "INFLUENCES": self.influences})
        self._anim_buffer = None
        self._placements_now = np.zeros((1, 3), np.float32)
        self._invalidate_vaos()
        self.time = 0.0
        rest_world = pose_at(asset, None, [0.0])[0]
        self._rest_world = rest_world  # (1, N, 4, 4): the shadows' centre

    def set_instances(self, clips: npt.ArrayLike, clocks: npt.ArrayLike, speeds: npt.ArrayLike = 1.0,
                      placements: npt.ArrayLike | None = None) -> None:
        """Per instance: clip (index into the texture's clips, or one name/index for all), clock at time 0
        (seconds) and speed; ``placements`` (I, 3) in the ground plane. Uploaded once, here."""
        clocks = np.atleast_1d(np.asarray(clocks, np.float64))
        n = len(clocks) if placements is None else len(np.asarray(placements).reshape(-1, 3))
        if isinstance(clips, (str, int, np.integer)):
            clips = np.full(n, self.texture.clip_index(clips))
        table = np.zeros((n, 3), np.float32)
        table[:, 0] = np.broadcast_to(np.asarray(clips), (n,))
        if np.any((table[:, 0] < 0) | (table[:, 0] >= len(self.texture.clips))):
            raise RenderError(f"clip indices must be 0..{len(self.texture.clips) - 1}")
        table[:, 1] = np.broadcast_to(clocks, (n,))
        table[:, 2] = np.broadcast_to(np.asarray(speeds, np.float64), (n,))
        self._placements_now = self._placements(placements, n)
        self._ensure_capacity(n, palettes=False)
        if self._anim_buffer is not None:
            self._anim_buffer.release()
        self._anim_buffer = self.ctx.buffer(table.tobytes())
        self._offsets_buffer.write(self._placements_now.tobytes())
        self._invalidate_vaos()

    def _instance_attributes(self) -> list:
        return [] if self._anim_buffer is None else [(self._anim_buffer, "3f/i", "a_anim")]

    def bind(self, program) -> None:
        """The palette source of :meth:`render_at`'s draws: the texture and this frame's time."""
        self._anim_tex.use(location=PALETTE_TEXTURE_UNIT)
        set_uniform(program, "u_anim_tex", PALETTE_TEXTURE_UNIT)
        set_uniform(program, "u_time", float(self.time))
        member = program.get("u_anim_clips", None)
        if member is not None:
            member.write(self._clip_table.tobytes())

    def render_at(self, seconds: float, finish: bool = False) -> dict[str, float]:
        """Draw the frame at ``seconds`` into the framebuffer: one uniform changes, nothing is uploaded."""
        if self._anim_buffer is None:
            raise RenderError("call set_instances() before drawing a texture crowd")
        t0 = time.perf_counter()
        self.time = float(seconds)
        self._palette_source = self
        n = len(self._placements_now)
        morph = np.broadcast_to(self.asset.rest_morph, (n, len(self.asset.rest_morph)))
        return self._draw_frame(self._rest_world, morph, self._placements_now, None, False, finish, t0, t0, t0)

    def draw_at(self, seconds: float) -> np.ndarray:
        """:meth:`render_at`, read back as (height, width, 3) uint8."""
        self.render_at(seconds)
        return self.read()

    def release(self) -> None:
        self._anim_tex.release()
        if self._anim_buffer is not None:
            self._anim_buffer.release()
        super().release()
