"""GPU skinning read back with transform feedback: the check that the shaders skin like the CPU.

:class:`SkinningProbe` runs ``feedback.vert.glsl`` (the same ``skinning.glsl`` as the mesh shader,
no rasteriser) over a vertex set for I instances and returns world positions and normals, so that
tests can compare every palette path with :func:`skeletal.skin.skin` (and, with ``skinning="dqs"``,
with :func:`skeletal.skin_dq.skin_dq`).
"""

from __future__ import annotations

import numpy as np

from ..skinning.dqs import gpu_dq_palette
from .errors import RenderError
from .geometry import fit_influences, influences_needed
from .palette import PaletteStore
from .programs import ProgramCache, set_uniform

#: Skinning methods of the shaders: linear blend (3 palette rows per joint), dual quaternion (4).
SKINNING_METHODS = ("lbs", "dqs")


def skinning_defines(skinning: str) -> dict[str, int]:
    """The GLSL defines that select ``skinning`` in ``skinning.glsl``."""
    return {"SKINNING_DQS": 1} if skinning == "dqs" else {}


def skinning_rows(skinning: str) -> int:
    """vec4 palette rows per joint for ``skinning``."""
    return 4 if skinning == "dqs" else 3


class SkinningProbe:
    """Skin vertices on the GPU through ``store`` and read the results back. ``skinning``: "lbs", or
    "dqs" (the store must then have 4 rows per matrix: ``create_store(..., rows_per_matrix=4)``)."""

    def __init__(self, ctx, store: PaletteStore, influences: int = 4, skinning: str = "lbs"):
        if skinning not in SKINNING_METHODS:
            raise RenderError(f"skinning must be one of {', '.join(SKINNING_METHODS)}, got {skinning!r}")
        self.ctx = ctx
        self.store = store
        self.skinning = skinning
        self.influences = influences_needed(influences)
        self._programs = ProgramCache(ctx)
        self.program = self._programs.get(
            "feedback.vert.glsl", None, {**store.defines, **skinning_defines(skinning), "INFLUENCES": self.influences},
            varyings=("f_position", "f_normal"),
        )
        self._fbo = ctx.simple_framebuffer((1, 1))  # transform feedback wants a complete framebuffer bound

    def run(self, palette, joints, weights, positions, normals=None, offsets=None, joint_offset: int = 0):
        """Skin ``positions``/``normals`` (V, 3) with ``joints``/``weights`` (V, K) for every instance of
        ``palette`` (I, J, 3, 4) float32 row-major (skin matrices; converted to the DQS palette for
        ``skinning="dqs"``); ``offsets`` (I, 3) are added after skinning.

        Returns ``(positions, normals)``, each (I, V, 3) float32.
        """
        import moderngl

        ctx = self.ctx
        palette = np.ascontiguousarray(palette, dtype=np.float32)
        n_instances, joint_count = palette.shape[:2]
        if self.skinning == "dqs":
            palette = gpu_dq_palette(palette)
        positions = np.ascontiguousarray(positions, dtype=np.float32)
        v = len(positions)
        normals = np.ascontiguousarray(np.zeros_like(positions) if normals is None else normals, dtype=np.float32)
        offsets = np.zeros((n_instances, 3), np.float32) if offsets is None else np.asarray(offsets, np.float32)
        j, w = fit_influences(joints, weights, self.influences)

        self.store.write(palette)
        self.store.bind(self.program)
        set_uniform(self.program, "u_joint_stride", joint_count)
        set_uniform(self.program, "u_joint_offset", joint_offset)
        set_uniform(self.program, "u_instance_base", 0)

        buffers = [ctx.buffer(a.tobytes()) for a in (positions, normals, np.ascontiguousarray(offsets))]
        content = [(buffers[0], "3f", "a_position"), (buffers[1], "3f", "a_normal"), (buffers[2], "3f/i", "a_offset")]
        for k in range(self.influences // 4):
            jb = ctx.buffer(np.ascontiguousarray(j[:, 4 * k:4 * k + 4]).tobytes())
            wb = ctx.buffer(np.ascontiguousarray(w[:, 4 * k:4 * k + 4]).tobytes())
            buffers += [jb, wb]
            content += [(jb, "4i", f"a_joints{k}"), (wb, "4f", f"a_weights{k}")]
        out = ctx.buffer(reserve=n_instances * v * 6 * 4)
        vao = ctx.vertex_array(self.program, content, skip_errors=True)
        try:
            self._fbo.use()
            vao.transform(out, mode=moderngl.POINTS, vertices=v, instances=n_instances)
            data = np.frombuffer(out.read(), np.float32).reshape(n_instances, v, 6)
        finally:
            vao.release()
            out.release()
            for b in buffers:
                b.release()
        return data[..., :3].copy(), data[..., 3:].copy()

    def release(self) -> None:
        self._programs.release()
        self._fbo.release()
