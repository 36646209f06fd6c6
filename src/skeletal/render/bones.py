"""Bones drawn as shaded capsules, for assets without a mesh (a BVH file is a skeleton and a clip).

One instanced draw call per frame: the capsule mesh (a unit sphere split at its equator, see
:file:`shaders/bones.vert.glsl`) is uploaded once; per frame the CPU writes one instance per bone and
placement (parent joint, child joint, radius, colour), computed with numpy from the same world
matrices the rest of the frame uses. Left bones are blue, right bones orange, the rest ivory (sides
from the joint names: ``Left*``/``L*``/``*_L``/``*.L``...), so the gait reads at a glance.

Radii: 9% of the bone's length, kept between 0.4% and 1.4% of the skeleton's rest height (so
fingers and long bones both stay visible); a zero-length bone is a ball at the joint.

>>> mesh = capsule_mesh(8, 4)
>>> mesh[0].shape[1], mesh[1].shape[1], mesh[2].shape[1]
(3, 1, 3)
"""

from __future__ import annotations

import re

import moderngl
import numpy as np

from .overlays import bone_segments, joint_nodes
from .programs import set_uniform, write_matrix

LEFT_COLOR = (0.16, 0.36, 0.85)  # linear RGB
RIGHT_COLOR = (0.95, 0.38, 0.08)
CENTER_COLOR = (0.80, 0.74, 0.58)
RADIUS_OF_LENGTH = 0.09
RADIUS_MIN = 0.004  # x rest height
RADIUS_MAX = 0.014


def side_of(name: str) -> int:
    """+1 for a left joint, -1 for a right one, 0 otherwise, from its name.

    >>> [side_of(n) for n in ["LeftUpLeg", "RHipJoint", "hand.L", "mixamorig:RightFoot", "Spine", "Lhand"]]
    [1, -1, 1, -1, 0, 0]
    """
    bare = name.rsplit(":", 1)[-1]
    if re.search(r"left", bare, re.IGNORECASE) or re.match(r"^L(?=[A-Z_.\- ]|$)", bare) or re.search(r"[_.\- ][lL]$", bare) \
            or re.search(r"(?<=[a-z])L$", bare):
        return 1
    if re.search(r"right", bare, re.IGNORECASE) or re.match(r"^R(?=[A-Z_.\- ]|$)", bare) or re.search(r"[_.\- ][rR]$", bare) \
            or re.search(r"(?<=[a-z])R$", bare):
        return -1
    return 0


def capsule_mesh(segments: int = 16, rings: int = 6) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sphere (V, 3) float32 unit normals, end (V, 1) float32 0/1, triangles (T, 3) uint32).

    ``rings`` latitude steps per hemisphere; the equator ring is there twice (end 0 and end 1).
    """
    lat_low = np.linspace(-0.5 * np.pi, 0.0, rings + 1)
    lat_high = np.linspace(0.0, 0.5 * np.pi, rings + 1)
    lats = np.concatenate([lat_low, lat_high])
    ends = np.concatenate([np.zeros(rings + 1), np.ones(rings + 1)])
    lon = np.linspace(0.0, 2.0 * np.pi, segments + 1)
    la, lo = np.meshgrid(lats, lon, indexing="ij")  # (R, S)
    sphere = np.stack([np.cos(la) * np.cos(lo), np.sin(la), -np.cos(la) * np.sin(lo)], axis=-1).reshape(-1, 3)
    end = np.repeat(ends, segments + 1)[:, None]
    rows, cols = len(lats), segments + 1
    r, c = np.meshgrid(np.arange(rows - 1), np.arange(cols - 1), indexing="ij")
    a = (r * cols + c).ravel()
    b, d, e = a + 1, a + cols, a + cols + 1
    triangles = np.concatenate([np.stack([a, b, e], 1), np.stack([a, e, d], 1)])
    return sphere.astype(np.float32), end.astype(np.float32), triangles.astype(np.uint32)


class BoneDrawer:
    """GPU state and per-frame instance data for the bone capsules of one asset."""

    def __init__(self, ctx, programs, asset):
        self.ctx = ctx
        self.program = programs.get("bones.vert.glsl", "bones.frag.glsl")
        self.segments = bone_segments(asset)  # (S, 2) child, parent
        names = asset.rig.names
        sides = np.array([side_of(names[c]) for c, _ in self.segments], dtype=np.int64)
        colors = np.empty((len(self.segments), 3))
        colors[:] = CENTER_COLOR
        colors[sides > 0] = LEFT_COLOR
        colors[sides < 0] = RIGHT_COLOR
        self.colors = colors
        rest_world = _rest_world(asset)
        joints = joint_nodes(asset)
        pts = rest_world[joints, :3, 3] if len(joints) else np.zeros((1, 3))
        self.height = max(float(np.linalg.norm(pts.max(axis=0) - pts.min(axis=0))), 1e-6)
        sphere, end, triangles = capsule_mesh()
        self._sphere = ctx.buffer(sphere.tobytes())
        self._end = ctx.buffer(end.tobytes())
        self._indices = ctx.buffer(triangles.tobytes())
        self._instances = None
        self._vao = None

    def instance_data(self, world: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """(I*S, 10) float32 per bone and placement: start xyz, stop xyz, radius, colour rgb.

        ``world`` (I, N, 4, 4) row-major rig-order world matrices, ``offsets`` (I, 3) placements.
        """
        positions = world[:, :, :3, 3] + np.asarray(offsets, np.float64)[:, None, :]
        start = positions[:, self.segments[:, 1]]
        stop = positions[:, self.segments[:, 0]]
        length = np.linalg.norm(stop - start, axis=-1)
        radius = np.clip(RADIUS_OF_LENGTH * length, RADIUS_MIN * self.height, RADIUS_MAX * self.height)
        colors = np.broadcast_to(self.colors, start.shape)
        data = np.concatenate([start, stop, radius[..., None], colors], axis=-1)
        return np.ascontiguousarray(data.reshape(-1, 10), dtype=np.float32)

    def draw(self, view_proj, world, offsets, lighting: dict) -> None:
        if not len(self.segments):
            return
        data = self.instance_data(world, offsets)
        if self._instances is None or self._instances.size < data.nbytes:
            if self._instances is not None:
                self._instances.release()
                self._vao.release()
            self._instances = self.ctx.buffer(reserve=max(data.nbytes, 4096), dynamic=True)
            self._vao = self.ctx.vertex_array(self.program, [
                (self._sphere, "3f", "a_sphere"), (self._end, "1f", "a_end"),
                (self._instances, "3f 3f 1f 3f/i", "a_start", "a_stop", "a_radius", "a_color"),
            ], index_buffer=self._indices, index_element_size=4)
        self._instances.write(data.tobytes())
        self.ctx.enable(moderngl.DEPTH_TEST)
        self.ctx.disable(moderngl.BLEND | moderngl.CULL_FACE)
        write_matrix(self.program, "u_view_proj", view_proj)
        for key, value in lighting.items():
            set_uniform(self.program, key, value)
        self._vao.render(moderngl.TRIANGLES, instances=len(data))

    def release(self) -> None:
        for obj in (self._vao, self._instances, self._sphere, self._end, self._indices):
            if obj is not None:
                obj.release()


def _rest_world(asset) -> np.ndarray:
    from ..anim.pose import world_matrices

    return world_matrices(asset.rig.parents, asset.rig.rest)
