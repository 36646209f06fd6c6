"""What every bridge shares: an asset's drawable parts, a frame's pose arrays, and posed vertices.

skeletal poses; a bridge copies the result into another library's objects. This module holds the
library-free half of that:

* :func:`parts` lists the triangle parts of an :class:`~skeletal.Asset` (one per triangle primitive of
  each mesh instance): bind-pose vertices, triangles (F, 3) uint32, material index, and where its
  skinning matrices sit in the concatenated palette of all skins.
* :func:`frame_state` reads a :class:`~skeletal.Player`, :class:`~skeletal.Mixer` or
  :class:`~skeletal.Crowd` after ``update`` as one :class:`FrameState` (instance axis first);
  :func:`clip_state` samples a clip at given times into the same form (no player needed).
* :class:`Poser` skins every part of one instance of a :class:`FrameState` on the CPU
  (:func:`skeletal.skin_into`, float32, morph targets applied first) into buffers it owns.

Conventions as everywhere in skeletal: matrices row-major acting on column vectors; world matrices
in rig order (``asset.rig``), palettes ``world[joint] @ inverse_bind``.

>>> state = clip_state(asset, "walk", [0.5])                    # doctest: +SKIP
>>> positions, normals = Poser(asset).pose(state)[0]            # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..asset import Asset, SkinnedPrimitive
from ..anim.clip import Clip
from ..errors import SkeletalError
from ..anim.pose import skin_palette, world_matrices
from ..anim.sampling import sample
from ..skinning.lbs import apply_morphs, skin_into

#: glTF primitive modes: TRIANGLES, TRIANGLE_STRIP, TRIANGLE_FAN (points and lines are not surfaces).
_TRIANGLE_MODES = (4, 5, 6)


class BridgeError(SkeletalError):
    """A bridge cannot do what was asked (a missing optional package, a state it cannot draw)."""


@dataclass
class Part:
    """One triangle primitive of a mesh instance, ready to pose.

    ``node``: file node index of the mesh instance; ``rig_node``: the same node in rig order;
    ``skin``: skin index or None (rigid: follows ``rig_node``'s world matrix); ``palette_start``:
    first row of this part's skin in the concatenated palette of all skins (0 for rigid parts);
    ``morph``: the slice of the flat morph weights that belongs to the node; ``triangles`` (F, 3) uint32.
    """

    name: str
    node: int
    rig_node: int
    primitive_index: int
    skin: int | None
    palette_start: int
    morph: slice
    primitive: SkinnedPrimitive
    triangles: np.ndarray
    material: int | None

    @property
    def positions(self) -> np.ndarray:
        """Bind-pose positions (V, 3) float32."""
        return self.primitive.source.positions

    @property
    def normals(self) -> np.ndarray | None:
        return self.primitive.source.normals


def triangles_of(indices: np.ndarray | None, vertex_count: int, mode: int) -> np.ndarray:
    """A primitive's triangles (F, 3) uint32 from its index list (None: vertices in order) and glTF
    mode (4 list, 5 strip, 6 fan; strips alternate winding so that every triangle keeps the first's)."""
    idx = np.arange(vertex_count, dtype=np.uint32) if indices is None else np.asarray(indices, np.uint32)
    if mode == 4:
        return idx[: len(idx) // 3 * 3].reshape(-1, 3)
    n = max(len(idx) - 2, 0)
    i = np.arange(n)
    if mode == 5:
        odd = (i % 2).astype(bool)
        a, b, c = idx[i], idx[i + 1], idx[i + 2]
        tri = np.stack([a, np.where(odd, c, b), np.where(odd, b, c)], axis=1)
    else:
        tri = np.stack([np.full(n, idx[0] if len(idx) else 0, np.uint32), idx[i + 1], idx[i + 2]], axis=1)
    return np.ascontiguousarray(tri, dtype=np.uint32)


def skin_starts(asset: Asset) -> list[int]:
    """First row of each skin in the concatenated palette of all skins (the Mixer's and Crowd's order)."""
    starts, n = [], 0
    for binding in asset.skins:
        starts.append(n)
        n += len(binding.joints)
    return starts


def parts(asset: Asset) -> list[Part]:
    """The triangle parts of ``asset`` in mesh-instance order (points and lines are left out)."""
    starts = skin_starts(asset)
    out = []
    for instance in asset.mesh_instances:
        rig_node = int(asset.rig.index_of[instance.node])
        morph = slice(int(asset.morph_start[rig_node]), int(asset.morph_start[rig_node + 1]))
        mesh_name = asset.document.meshes[instance.mesh].name or f"mesh{instance.mesh}"
        for p, prim in enumerate(instance.primitives):
            src = prim.source
            if src.mode not in _TRIANGLE_MODES:
                continue
            skinned = instance.skin is not None and prim.joints is not None
            out.append(Part(
                name=f"{mesh_name}.{p}" if len(instance.primitives) > 1 else mesh_name,
                node=instance.node, rig_node=rig_node, primitive_index=p,
                skin=instance.skin if skinned else None,
                palette_start=starts[instance.skin] if skinned else 0,
                morph=morph, primitive=prim,
                triangles=triangles_of(src.indices, src.vertex_count, src.mode),
                material=src.material,
            ))
    return out


@dataclass
class FrameState:
    """One frame of ``count`` instances, instance axis first.

    ``palettes`` (B, J_all, 3 or 4, 4): every skin's ``world[joint] @ inverse_bind``, skin after skin;
    ``world`` (B, N, 3 or 4, 4) rig order, or None when the source keeps no world matrices (a
    :class:`~skeletal.Crowd` without ``keep_world``); ``morph`` (B, M) flat morph weights.
    """

    palettes: np.ndarray
    world: np.ndarray | None
    morph: np.ndarray

    @property
    def count(self) -> int:
        return int(self.morph.shape[0])


def frame_state(source) -> FrameState:
    """The current frame of a :class:`~skeletal.Player`, :class:`~skeletal.Mixer` or :class:`~skeletal.Crowd`
    (read after its ``update``; the arrays are the source's own, not copies), or a :class:`FrameState` as is."""
    from ..playback import Crowd, Mixer, Player

    if isinstance(source, FrameState):
        return source
    if isinstance(source, Player):
        source = source.mixer
    if isinstance(source, Crowd):
        world = source.world34 if source.world34.shape[0] == source.count else None
        return FrameState(source.palettes, world, source.morph_weights)
    if isinstance(source, Mixer):  # palettes: (B, J_all, 4, 4), every skin's, skin after skin
        return FrameState(source.palettes, source.world, source.morph_weights)
    raise BridgeError(f"cannot read a frame from a {type(source).__name__}: give a Player, Mixer, Crowd or FrameState")


def clip_state(asset: Asset, clip: str | int | Clip | None = 0, times: Sequence[float] | np.ndarray | float = 0.0,
               *, loop: str = "clamp") -> FrameState:
    """``clip`` of ``asset`` sampled at ``times`` (T,) as a :class:`FrameState` of T instances, float64.
    ``clip`` None (or an asset without clips) gives the rest pose."""
    asset.require_nodes("pose")
    if clip is None or not asset.clips:
        clip = Clip("rest", [])
    elif not isinstance(clip, Clip):
        clip = asset.clip(clip)
    times = np.atleast_1d(np.asarray(times, dtype=np.float64))
    pose, morph = sample(clip, times, asset.rig.rest, asset.morph_start, asset.rest_morph, loop=loop)
    world = world_matrices(asset.rig.parents, pose)
    per_skin = [skin_palette(world, b.joints, b.inverse_bind) for b in asset.skins]
    palettes = np.concatenate(per_skin, axis=1) if per_skin else np.zeros((len(times), 0, 4, 4))
    return FrameState(palettes, world, morph)


class Poser:
    """Skins every :class:`Part` of an asset on the CPU into float32 buffers it owns.

    :meth:`pose` returns one ``(positions (V, 3), normals (V, 3) or None)`` pair per part, in world
    space; the arrays are overwritten by the next call (copy them to keep them).
    """

    def __init__(self, asset: Asset, part_list: list[Part] | None = None):
        self.asset = asset
        self.parts = parts(asset) if part_list is None else part_list
        self._positions = [np.empty((p.primitive.source.vertex_count, 3), np.float32) for p in self.parts]
        self._normals = [None if p.normals is None else np.empty_like(self._positions[i])
                         for i, p in enumerate(self.parts)]
        # morphed bind-pose inputs (only for parts with morph targets)
        self._morphed = [None if p.primitive.morph_positions is None else np.empty_like(self._positions[i])
                         for i, p in enumerate(self.parts)]
        self._morphed_n = [None if (p.primitive.morph_normals is None or p.normals is None)
                           else np.empty_like(self._positions[i]) for i, p in enumerate(self.parts)]
        self._sizes = [len(b.joints) for b in asset.skins]

    def pose(self, state: FrameState, instance: int = 0) -> list[tuple[np.ndarray, np.ndarray | None]]:
        """Posed positions and normals of every part for ``state``'s ``instance``."""
        if not 0 <= instance < state.count:
            raise BridgeError(f"instance {instance} is not in a frame of {state.count}")
        palettes, morph = state.palettes[instance], state.morph[instance]
        out = []
        for i, part in enumerate(self.parts):
            prim = part.primitive
            src = prim.source
            positions, normals = src.positions, src.normals
            weights = morph[part.morph]
            if self._morphed[i] is not None and weights.size and np.any(weights != 0):
                apply_morphs(src.positions, prim.morph_positions, weights, self._morphed[i])
                positions = self._morphed[i]
                if self._morphed_n[i] is not None:
                    apply_morphs(src.normals, prim.morph_normals, weights, self._morphed_n[i])
                    normals = self._morphed_n[i]
            out_p, out_n = self._positions[i], self._normals[i]
            if part.skin is not None:
                start = part.palette_start
                palette = palettes[start:start + self._sizes[part.skin]]
                skin_into(palette, prim.joints, prim.weights, positions, normals, None, out_p, out_n)
            else:
                if state.world is None:
                    raise BridgeError(f"{part.name}: a rigid mesh needs world matrices: make the Crowd with keep_world=True")
                m = np.asarray(state.world[instance, part.rig_node], np.float64)
                np.matmul(positions, m[:3, :3].T, out=out_p, casting="unsafe")
                out_p += m[:3, 3]
                if out_n is not None and normals is not None:
                    np.matmul(normals, np.linalg.inv(m[:3, :3]), out=out_n, casting="unsafe")
                    out_n /= np.maximum(np.linalg.norm(out_n, axis=1, keepdims=True), 1e-12)
            out.append((out_p, out_n))
        return out


def require(module: str, extra: str):
    """Import the optional package ``module`` or raise :class:`BridgeError` saying which extra installs it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise BridgeError(f"{module} is not installed ({exc}): pip install \"skeletal[{extra}]\"") from None
