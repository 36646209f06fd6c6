"""skeletal -> trimesh: posed meshes as :class:`trimesh.Trimesh`, a posed model as :class:`trimesh.Scene`.

trimesh has no skeletons or animation; skeletal poses the model (any format it reads, any clip and
time, or a live :class:`~skeletal.Player`/:class:`~skeletal.Mixer`/:class:`~skeletal.Crowd`) and hands
trimesh plain triangle meshes in world space, with the model's glTF material where trimesh has one
(:class:`trimesh.visual.material.PBRMaterial`: base colour factor and texture with its UVs, metallic,
roughness, double-sided) or the vertex colours.

>>> import skeletal, skeletal.bridges.trimesh as st                      # doctest: +SKIP
>>> asset = skeletal.load(skeletal.examples.path("demo.glb"))            # doctest: +SKIP
>>> scene = st.posed_scene(asset, "walk", 0.5)                           # doctest: +SKIP
>>> scene.export("walk.glb"); st.posed_mesh(asset, "walk", 0.5).bounds   # doctest: +SKIP
"""

from __future__ import annotations

import io
from typing import Any, Sequence

import numpy as np

from ..asset import Asset
from ..tools.bake import sample_times
from ..anim.clip import Clip
from .posed import FrameState, Part, Poser, clip_state, frame_state, parts, require


def _trimesh():
    return require("trimesh", "trimesh")


def _visual(asset: Asset, part: Part, cache: dict[int, Any]):
    """trimesh visuals for ``part``: its PBR material (texture and UVs when it has them), else vertex colours."""
    tm = _trimesh()
    src = part.primitive.source
    doc = asset.document
    if part.material is not None and 0 <= part.material < len(doc.materials):
        if part.material not in cache:
            m = doc.materials[part.material]
            texture = None
            if m.base_color_texture is not None and 0 <= m.base_color_texture < len(doc.images):
                try:
                    from PIL import Image as PILImage

                    texture = PILImage.open(io.BytesIO(doc.images[m.base_color_texture].data))
                    texture.load()
                except Exception:  # an image PIL cannot decode: the factor alone
                    texture = None
            factor = np.clip(np.round(np.asarray(m.base_color_factor, np.float64) * 255), 0, 255).astype(np.uint8)
            cache[part.material] = (tm.visual.material.PBRMaterial(
                name=m.name or f"material{part.material}", baseColorFactor=factor,
                metallicFactor=float(m.metallic_factor), roughnessFactor=float(m.roughness_factor),
                baseColorTexture=texture, doubleSided=bool(m.double_sided)), m.base_color_texcoord)
        material, texcoord = cache[part.material]
        uv = src.attributes.get(f"TEXCOORD_{texcoord}")
        if material.baseColorTexture is not None and uv is not None:
            # glTF's UV origin is the top left, trimesh's (OpenGL's) the bottom left
            uv = np.column_stack([uv[:, 0], 1.0 - uv[:, 1]])
            return tm.visual.TextureVisuals(uv=uv, material=material)
        return tm.visual.TextureVisuals(material=material)
    colors = src.attributes.get("COLOR_0")
    if colors is not None:
        colors = np.asarray(colors, np.float64)
        if colors.shape[1] == 3:
            colors = np.column_stack([colors, np.ones(len(colors))])
        return tm.visual.ColorVisuals(vertex_colors=np.clip(np.round(colors * 255), 0, 255).astype(np.uint8))
    return None


def _meshes(asset: Asset, state: FrameState, instance: int, poser: Poser, cache: dict) -> list[tuple[Part, Any]]:
    tm = _trimesh()
    out = []
    for part, (positions, normals) in zip(poser.parts, poser.pose(state, instance)):
        mesh = tm.Trimesh(vertices=positions.astype(np.float64), faces=part.triangles,
                          vertex_normals=None if normals is None else normals.astype(np.float64),
                          visual=_visual(asset, part, cache), process=False, validate=False)
        mesh.metadata["name"] = part.name
        mesh.metadata["node"] = part.node
        out.append((part, mesh))
    return out


def posed_meshes(asset: Asset, clip: str | int | Clip | None = 0, time: float = 0.0, *,
                 loop: str = "clamp") -> list:
    """One :class:`trimesh.Trimesh` per triangle primitive of ``asset``, posed by ``clip`` at ``time``
    (seconds; None clip: the rest pose), in world space, with its material. Vertices and triangles
    keep the model's order (vertex i of the mesh is vertex i of the primitive)."""
    return [m for _, m in _meshes(asset, clip_state(asset, clip, [time], loop=loop), 0, Poser(asset), {})]


def posed_mesh(asset: Asset, clip: str | int | Clip | None = 0, time: float = 0.0, *, loop: str = "clamp"):
    """The whole posed model as one :class:`trimesh.Trimesh` (the parts concatenated, their vertex
    order kept; trimesh merges their materials where it can)."""
    return _trimesh().util.concatenate(posed_meshes(asset, clip, time, loop=loop))


def clip_meshes(asset: Asset, clip: str | int | Clip = 0, times: Sequence[float] | np.ndarray | None = None, *,
                fps: float = 30.0, loop: str = "clamp") -> list:
    """A whole clip as one :class:`trimesh.Trimesh` per time (``times``, default 0..duration at ``fps``),
    each the concatenated posed model. Posing is one batched call for all times."""
    tm = _trimesh()
    clip_obj = asset.clip(clip) if not isinstance(clip, Clip) and asset.clips else clip
    if times is None:
        times = sample_times(clip_obj, fps) if isinstance(clip_obj, Clip) else np.zeros(1)
    state = clip_state(asset, clip_obj if isinstance(clip_obj, Clip) else None, times, loop=loop)
    poser, cache = Poser(asset), {}
    return [tm.util.concatenate([m for _, m in _meshes(asset, state, i, poser, cache)]) for i in range(state.count)]


def scene_from(asset: Asset, source, instance: int = 0, *, poser: Poser | None = None):
    """The current frame of a :class:`~skeletal.Player`, :class:`~skeletal.Mixer`, :class:`~skeletal.Crowd`
    (``instance``) or :class:`~.posed.FrameState` as a :class:`trimesh.Scene`: one geometry per part,
    named after its mesh (``"Body"``, ``"Body.1"`` for a second primitive)."""
    tm = _trimesh()
    scene = tm.Scene()
    for part, mesh in _meshes(asset, frame_state(source), instance, poser or Poser(asset), {}):
        scene.add_geometry(mesh, geom_name=part.name, node_name=part.name)
    return scene


def posed_scene(asset: Asset, clip: str | int | Clip | None = 0, time: float = 0.0, *, loop: str = "clamp"):
    """``asset`` posed by ``clip`` at ``time`` as a :class:`trimesh.Scene` (see :func:`scene_from`)."""
    return scene_from(asset, clip_state(asset, clip, [time], loop=loop))


__all__ = ["posed_meshes", "posed_mesh", "clip_meshes", "posed_scene", "scene_from", "parts"]
