"""Where everything sits in a frame's palette, and the CPU posing the renderer relies on.

The renderer draws every mesh with one skinning shader. Per instance the palette holds J matrices
(``PaletteLayout.joint_count``): every skin's joints, skin after skin, then one slot per rigid mesh
node (its world matrix; rigid primitives bind all vertices to that slot with weight 1). A skinned
primitive reads ``slot = skin_offset[skin] + joint``; glTF says skinned meshes ignore their node's
transform, which is what this does.

All posing is done by the library (:func:`skeletal.sampling.sample`, :func:`skeletal.pose.world_matrices`,
:func:`skeletal.pose.skin_palette`); this module only arranges the results.
"""

from __future__ import annotations

import numpy as np

from ..anim.clip import Clip
from ..anim.pose import skin_palette, world_matrices
from ..anim.sampling import sample


class PaletteLayout:
    """Palette slots of an :class:`skeletal.Asset` (see the module docstring).

    Attributes:
        skin_offset: (n_skins,) first slot of each skin.
        rigid_slot: {file node index: slot} for nodes carrying a rigid (unskinned) mesh.
        joint_count: J, slots per instance.
    """

    def __init__(self, asset):
        self.asset = asset
        offsets, n = [], 0
        for binding in asset.skins:
            offsets.append(n)
            n += len(binding.joints)
        self.skin_offset = np.asarray(offsets, dtype=np.int64)
        self.rigid_slot: dict[int, int] = {}
        for instance in asset.mesh_instances:
            rigid = instance.skin is None or any(p.joints is None for p in instance.primitives)
            if rigid and instance.node not in self.rigid_slot:
                self.rigid_slot[instance.node] = n
                n += 1
        self.joint_count = max(n, 1)
        self._rigid_nodes = np.asarray([asset.rig.index_of[f] for f in self.rigid_slot], dtype=np.int64)

    def slot_of(self, instance, primitive) -> int:
        """Palette slot of the primitive's joint 0 (its skin's first joint, or its rigid node)."""
        if instance.skin is not None and primitive.joints is not None:
            return int(self.skin_offset[instance.skin])
        return self.rigid_slot[instance.node]

    def palettes(self, world: np.ndarray) -> np.ndarray:
        """World matrices (I, N, 4, 4) row-major, rig order -> palettes (I, J, 3, 4) float32 row-major:
        the top three rows of ``world[joint] @ inverse_bind`` per skin joint, of ``world[node]`` per rigid slot."""
        world = np.asarray(world)
        out = np.zeros((world.shape[0], self.joint_count, 3, 4), np.float32)
        for binding, start in zip(self.asset.skins, self.skin_offset):
            out[:, start:start + len(binding.joints)] = skin_palette(world, binding.joints, binding.inverse_bind)[:, :, :3, :]
        if len(self._rigid_nodes):
            first = self.joint_count - len(self._rigid_nodes)
            out[:, first:] = world[:, self._rigid_nodes, :3, :]
        return out


def rest_clip() -> Clip:
    """An empty clip: sampling it gives the rest pose (for models without animations)."""
    return Clip("rest", [])


def pose_at(asset, clip: Clip | None, times, loop: str = "repeat") -> tuple[np.ndarray, np.ndarray]:
    """World matrices (T, N, 4, 4) float64 (rig order) and morph weights (T, M) of ``clip`` at ``times``."""
    clip = clip if clip is not None else rest_clip()
    pose, morph = sample(clip, np.atleast_1d(np.asarray(times, dtype=np.float64)), asset.rig.rest,
                         asset.morph_start, asset.rest_morph, loop=loop)
    return world_matrices(asset.rig.parents, pose), morph


def grid_offsets(count: int, spacing: float) -> np.ndarray:
    """(count, 3) float32 placements on a square grid in the ground plane (xz), centred on the origin,
    rows going back (-z) so that the front row is nearest a camera in front (+z)."""
    cols = int(np.ceil(np.sqrt(count)))
    rows = int(np.ceil(count / max(cols, 1)))
    i = np.arange(count)
    x = (i % cols - (cols - 1) / 2.0) * spacing
    z = -(i // cols - (rows - 1) / 2.0) * spacing
    return np.stack([x, np.zeros(count), z], axis=1).astype(np.float32)


def crowd_phases(count: int, duration: float) -> np.ndarray:
    """(count,) time offsets spread over the clip (golden-ratio steps: neighbours never in step)."""
    if duration <= 0:
        return np.zeros(count)
    return np.mod(np.arange(count) * 0.6180339887498949, 1.0) * duration
