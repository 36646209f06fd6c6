"""skeletal -> pygfx: a character as pygfx skinned meshes whose bone-matrix buffers are skeletal's palettes.

pygfx skins on the GPU (its ``SkinnedMesh`` reads a storage buffer of 4x4 bone matrices). Here that
buffer is filled straight from a skeletal :class:`~skeletal.Player`, :class:`~skeletal.Mixer` or
:class:`~skeletal.Crowd` palette each frame (one numpy copy per skin, no pygfx ``Bone`` objects to
move): skeletal samples, blends, runs IK and state machines; pygfx draws. Morph targets go to pygfx's
morph buffers (weights from skeletal), rigid meshes follow their node's world matrix.

pygfx skins with 4 influences per vertex: a primitive with more keeps its 4 heaviest, renormalised.

>>> import pygfx as gfx, skeletal                                         # doctest: +SKIP
>>> from skeletal.bridges.pygfx import Character                           # doctest: +SKIP
>>> asset = skeletal.load(skeletal.examples.path("demo.glb"))              # doctest: +SKIP
>>> player = skeletal.Player(asset); player.play("walk")                   # doctest: +SKIP
>>> character = Character(asset); scene = gfx.Scene(); scene.add(character.group)   # doctest: +SKIP
>>> player.update(1 / 60); character.update(player)                        # doctest: +SKIP
"""

from __future__ import annotations

import io

import numpy as np

from ..asset import Asset
from .posed import FrameState, Part, frame_state, parts, require

gfx = require("pygfx", "pygfx")

#: Influences per vertex that pygfx's skinning shader reads.
PYGFX_INFLUENCES = 4


def four_influences(joints: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(V, K) joints and weights -> (V, 4) uint32 and float32: the 4 heaviest, rows renormalised to 1
    (K < 4 is padded with zero weights)."""
    joints, weights = np.asarray(joints), np.asarray(weights, np.float32)
    v, k = weights.shape
    if k > PYGFX_INFLUENCES:
        order = np.argsort(-weights, axis=1, kind="stable")[:, :PYGFX_INFLUENCES]
        joints = np.take_along_axis(joints, order, axis=1)
        weights = np.take_along_axis(weights, order, axis=1)
    elif k < PYGFX_INFLUENCES:
        joints = np.concatenate([joints, np.zeros((v, PYGFX_INFLUENCES - k), joints.dtype)], axis=1)
        weights = np.concatenate([weights, np.zeros((v, PYGFX_INFLUENCES - k), np.float32)], axis=1)
    total = weights.sum(axis=1, keepdims=True)
    weights = np.where(total > 0, weights / np.where(total > 0, total, 1), weights)
    return np.ascontiguousarray(joints, np.uint32), np.ascontiguousarray(weights, np.float32)


class PaletteSkeleton(gfx.Skeleton):
    """A pygfx skeleton whose bone-matrix buffer is written from a skeletal palette by :meth:`set_palette`
    (its bones are placeholders that nothing moves; pygfx's per-frame ``update`` is a no-op)."""

    def __init__(self, joint_count: int):
        count = max(int(joint_count), 1)
        super().__init__([gfx.Bone(name=f"joint{j}") for j in range(count)], [np.eye(4)] * count)
        matrices = self.bone_matrices_buffer.data["bone_matrices"]
        matrices[:] = np.eye(4, dtype=np.float32)
        self.bone_matrices_buffer.update_full()

    def set_palette(self, palette: np.ndarray) -> None:
        """Write ``palette`` (J, 3 or 4, 4) row-major (``world @ inverse_bind``) into the GPU buffer.
        pygfx stores each matrix transposed (WGSL's column-major), so rows become columns."""
        matrices = self.bone_matrices_buffer.data["bone_matrices"]
        matrices[:, :, :3] = np.swapaxes(palette[:, :3, :], 1, 2)
        self.bone_matrices_buffer.update_full()

    def update(self) -> None:  # pygfx calls this every frame; the buffer is written by set_palette
        pass


class _PaletteSkinnedMesh(gfx.SkinnedMesh):
    """A SkinnedMesh bound to a :class:`PaletteSkeleton`: bounds from the geometry (pygfx's own
    estimate walks every vertex's bones in Python)."""

    def _get_bounds_from_geometry(self):
        return gfx.Mesh._get_bounds_from_geometry(self)


def _material(asset: Asset, part: Part, textures: dict, unlit: bool):
    doc = asset.document
    if unlit:
        return gfx.MeshBasicMaterial(color=(1, 1, 1, 1), side="both")
    if part.material is None or not 0 <= part.material < len(doc.materials):
        return gfx.MeshStandardMaterial(color=(0.8, 0.8, 0.8, 1), side="both")
    m = doc.materials[part.material]
    material = gfx.MeshStandardMaterial(color=tuple(float(c) for c in m.base_color_factor),
                                        roughness=float(m.roughness_factor), metalness=float(m.metallic_factor),
                                        side="both" if m.double_sided else "front")
    image = m.base_color_texture
    uv = part.primitive.source.attributes.get(f"TEXCOORD_{m.base_color_texcoord}")
    if image is not None and uv is not None and 0 <= image < len(doc.images):
        if image not in textures:
            try:
                from PIL import Image as PILImage

                pixels = np.asarray(PILImage.open(io.BytesIO(doc.images[image].data)).convert("RGBA"))
                textures[image] = gfx.Texture(np.ascontiguousarray(pixels), dim=2, colorspace="srgb")
            except Exception:  # an image PIL cannot decode: the factor alone
                textures[image] = None
        if textures[image] is not None:
            material.map = textures[image]
    return material


class Character:
    """pygfx objects for one instance of ``asset``: :attr:`group` (add it to a ``gfx.Scene``) holds one
    mesh per triangle primitive; skinned ones share a :class:`PaletteSkeleton` per skin.

    :meth:`update` copies a frame (a Player, Mixer, Crowd or :class:`~.posed.FrameState`, ``instance``
    of it) into the skeletons' buffers, the morph weights and the rigid meshes' matrices.
    ``unlit``: flat white materials (silhouettes, tests) instead of the model's.
    """

    def __init__(self, asset: Asset, *, instance: int = 0, unlit: bool = False):
        asset.require_nodes("draw")
        self.asset = asset
        self.instance = int(instance)
        self.group = gfx.Group(name=asset.name)
        self.skeletons = [PaletteSkeleton(len(b.joints)) for b in asset.skins]
        self._starts = []
        start = 0
        for b in asset.skins:
            self._starts.append(start)
            start += len(b.joints)
        self.meshes: list = []
        self._rigid: list[tuple[object, int]] = []  # (mesh, rig node)
        self._morphed: list[tuple[object, slice]] = []  # (mesh, slice of the flat morph weights)
        textures: dict = {}
        for part in parts(asset):
            mesh = self._mesh(part, _material(asset, part, textures, unlit))
            mesh.name = part.name
            self.meshes.append(mesh)
            self.group.add(mesh)

    def _mesh(self, part: Part, material):
        src, prim = part.primitive.source, part.primitive
        fields: dict = {"positions": np.ascontiguousarray(src.positions, np.float32),
                        "indices": np.ascontiguousarray(part.triangles, np.uint32)}
        if src.normals is not None:
            fields["normals"] = np.ascontiguousarray(src.normals, np.float32)
        uv = src.attributes.get("TEXCOORD_0")
        if uv is not None:
            fields["texcoords"] = np.ascontiguousarray(uv, np.float32)
        if part.skin is not None:
            fields["skin_indices"], fields["skin_weights"] = four_influences(prim.joints, prim.weights)
        geometry = gfx.Geometry(**fields)
        if prim.morph_positions is not None:
            geometry.morph_positions = [np.ascontiguousarray(d, np.float32) for d in prim.morph_positions]
            if prim.morph_normals is not None and src.normals is not None:
                geometry.morph_normals = [np.ascontiguousarray(d, np.float32) for d in prim.morph_normals]
            geometry.morph_targets_relative = True
        if part.skin is not None:
            mesh = _PaletteSkinnedMesh(geometry, material)
            mesh.bind(self.skeletons[part.skin], np.eye(4))
            mesh.bind_mode = "detached"  # palettes are world space: no bind matrix around them
        else:
            mesh = gfx.Mesh(geometry, material)
            self._rigid.append((mesh, part.rig_node))
        if prim.morph_positions is not None:
            self._morphed.append((mesh, part.morph))
            mesh.morph_target_influences = np.zeros(len(prim.morph_positions), np.float32)
        return mesh

    def update(self, source: object) -> None:
        """Copy the current frame of ``source`` (after its ``update``) into the pygfx objects."""
        state: FrameState = frame_state(source)
        i = self.instance
        palettes = state.palettes[i]
        for skeleton, start, binding in zip(self.skeletons, self._starts, self.asset.skins):
            skeleton.set_palette(palettes[start:start + len(binding.joints)])
        if self._rigid:
            if state.world is None:
                from .posed import BridgeError

                raise BridgeError("the model has rigid meshes: make the Crowd with keep_world=True")
            for mesh, node in self._rigid:
                m = np.eye(4)
                m[:3] = state.world[i, node, :3]
                mesh.local.matrix = m
        for mesh, span in self._morphed:
            mesh.morph_target_influences = state.morph[i, span]


def crowd_characters(asset: Asset, count: int, offsets: np.ndarray | None = None, *, unlit: bool = False) -> list[Character]:
    """``count`` :class:`Character` objects, instance ``k`` reading ``Crowd`` instance ``k``, each group
    placed at ``offsets[k]`` (count, 3) when given."""
    out = []
    for k in range(int(count)):
        character = Character(asset, instance=k, unlit=unlit)
        if offsets is not None:
            character.group.local.position = tuple(float(v) for v in offsets[k])
        out.append(character)
    return out


def offscreen_frame(scene, camera, size: tuple[int, int] = (640, 480)) -> np.ndarray:
    """Draw ``scene`` through ``camera`` headless (wgpu's offscreen canvas; Mesa's lavapipe without a
    GPU) and return (height, width, 4) uint8 RGBA."""
    from rendercanvas.offscreen import RenderCanvas

    canvas = RenderCanvas(size=size, pixel_ratio=1)
    renderer = gfx.renderers.WgpuRenderer(canvas, pixel_ratio=1)
    canvas.request_draw(lambda: renderer.render(scene, camera))
    return np.asarray(canvas.draw())


__all__ = ["Character", "PaletteSkeleton", "crowd_characters", "four_influences", "offscreen_frame"]
