"""skeletal -> panda3d: a character as panda3d GeomNodes whose vertices skeletal skins each frame.

panda3d (and ursina on top of it) animates only what its own loaders read (egg/bam, glTF through
panda3d-gltf). Here skeletal reads the model (glTF, FBX, BVH, USD, ...), plays it (Player, Mixer,
state machines, IK, Crowd) and skins it with its numba kernel straight into the panda3d vertex arrays
(positions and normals; one write per part, no per-joint Python). panda3d draws it as any other
dynamic geometry, with the model's base colour, texture, metallic and roughness as a ``Material``.

The character's root NodePath turns skeletal's Y-up world into panda3d's Z-up one (glTF +Z, the
character's front, becomes panda3d's -Y, towards the default camera).

>>> from skeletal.bridges.panda3d import PandaCharacter                   # doctest: +SKIP
>>> character = PandaCharacter(asset); character.root.reparentTo(base.render)   # doctest: +SKIP
>>> player.update(dt); character.update(player)                         # doctest: +SKIP
"""

from __future__ import annotations

import numpy as np

from ..asset import Asset
from .posed import FrameState, Part, Poser, frame_state, require

p3d = require("panda3d.core", "panda3d")

#: Y-up (skeletal, glTF) to Z-up (panda3d), column-vector convention: (x, y, z) -> (x, -z, y).
Y_UP_TO_Z_UP = np.array([[1.0, 0, 0, 0], [0, 0, -1, 0], [0, 1, 0, 0], [0, 0, 0, 1]])


def panda_mat(m: np.ndarray):
    """A row-major, column-vector 4x4 (skeletal's convention) as a panda3d ``LMatrix4f`` (row vectors:
    the transpose)."""
    return p3d.LMatrix4f(*np.asarray(m, np.float64).T.ravel().tolist())


def _format(normals: bool, uv: bool):
    """Vertex format with one array per attribute, so that positions and normals are plain (V, 3)
    float32 blocks skeletal can write whole."""
    fmt = p3d.GeomVertexFormat()
    for name, kind, n in [(p3d.InternalName.getVertex(), p3d.Geom.C_point, 3)] + \
            ([(p3d.InternalName.getNormal(), p3d.Geom.C_normal, 3)] if normals else []) + \
            ([(p3d.InternalName.getTexcoord(), p3d.Geom.C_texcoord, 2)] if uv else []):
        array = p3d.GeomVertexArrayFormat()
        array.addColumn(name, n, p3d.Geom.NT_float32, kind)
        fmt.addArray(array)
    return p3d.GeomVertexFormat.registerFormat(fmt)


def _array_view(vdata, index: int, width: int) -> np.ndarray:
    """Writable (V, width) float32 view of vertex array ``index`` (valid until panda3d next copies it)."""
    return np.asarray(memoryview(vdata.modifyArray(index))).view(np.float32).reshape(-1, width)


def _texture(asset: Asset, image: int, cache: dict):
    if image not in cache:
        pnm = p3d.PNMImage()
        data = asset.document.images[image].data
        cache[image] = None
        if data and pnm.read(p3d.StringStream(bytes(data))):
            tex = p3d.Texture(asset.document.images[image].name or f"image{image}")
            tex.load(pnm)
            cache[image] = tex
    return cache[image]


class PandaCharacter:
    """panda3d nodes for one instance of ``asset``: :attr:`root` (a NodePath; reparent it to
    ``base.render``) holds one GeomNode per triangle primitive. :meth:`update` skins a frame of a
    Player/Mixer/Crowd (``instance`` of it) or :class:`~.posed.FrameState` into their vertex arrays.
    ``unlit``: flat white, no lighting (silhouettes, tests) instead of the model's materials."""

    def __init__(self, asset: Asset, *, instance: int = 0, unlit: bool = False):
        asset.require_nodes("draw")
        self.asset = asset
        self.instance = int(instance)
        self.poser = Poser(asset)
        self.root = p3d.NodePath(p3d.PandaNode(asset.name or "skeletal"))
        self.root.setMat(panda_mat(Y_UP_TO_Z_UP))
        self.vertex_data = []
        self.nodes = []
        textures: dict = {}
        for part in self.poser.parts:
            node = self._geom_node(part)
            path = self.root.attachNewNode(node)
            if unlit:
                path.setLightOff(1)
                path.setColor(1, 1, 1, 1)
                path.setTwoSided(True)
            else:
                self._apply_material(path, part, textures)
            self.nodes.append(path)

    def _geom_node(self, part: Part):
        src = part.primitive.source
        uv = src.attributes.get("TEXCOORD_0")
        has_n = src.normals is not None
        vdata = p3d.GeomVertexData(part.name, _format(has_n, uv is not None), p3d.Geom.UH_dynamic)
        vdata.uncleanSetNumRows(src.vertex_count)
        _array_view(vdata, 0, 3)[:] = src.positions
        if has_n:
            _array_view(vdata, 1, 3)[:] = src.normals
        if uv is not None:
            # glTF's UV origin is the top left, panda3d's the bottom left
            _array_view(vdata, 2 if has_n else 1, 2)[:] = np.column_stack([uv[:, 0], 1.0 - uv[:, 1]])
        tris = p3d.GeomTriangles(p3d.Geom.UH_static)
        tris.setIndexType(p3d.Geom.NT_uint32)
        handle = tris.modifyVertices()
        handle.uncleanSetNumRows(part.triangles.size)
        np.asarray(memoryview(handle)).view(np.uint32)[:] = part.triangles.ravel()
        geom = p3d.Geom(vdata)
        geom.addPrimitive(tris)
        node = p3d.GeomNode(part.name)
        node.addGeom(geom)
        self.vertex_data.append((vdata, has_n))
        return node

    def _apply_material(self, path, part: Part, textures: dict) -> None:
        doc = self.asset.document
        if part.material is None or not 0 <= part.material < len(doc.materials):
            return
        m = doc.materials[part.material]
        material = p3d.Material(m.name or f"material{part.material}")
        material.setBaseColor(p3d.LVecBase4f(*[float(c) for c in m.base_color_factor]))
        material.setRoughness(float(m.roughness_factor))
        material.setMetallic(float(m.metallic_factor))
        path.setMaterial(material, 1)
        path.setColor(*[float(c) for c in m.base_color_factor])
        if m.double_sided:
            path.setTwoSided(True)
        if m.base_color_texture is not None and 0 <= m.base_color_texture < len(doc.images):
            tex = _texture(self.asset, m.base_color_texture, textures)
            if tex is not None and part.primitive.source.attributes.get("TEXCOORD_0") is not None:
                path.setTexture(tex, 1)

    def update(self, source: object) -> None:
        """Skin the current frame of ``source`` (after its ``update``) into the GeomNodes' vertices."""
        state: FrameState = frame_state(source)
        for (positions, normals), (vdata, has_n) in zip(self.poser.pose(state, self.instance), self.vertex_data):
            _array_view(vdata, 0, 3)[:] = positions
            if has_n and normals is not None:
                _array_view(vdata, 1, 3)[:] = normals

    def positions(self) -> list[np.ndarray]:
        """The vertex positions panda3d holds now, one (V, 3) float32 copy per part (skeletal's world
        space, before :attr:`root`'s axis turn)."""
        return [np.array(np.asarray(memoryview(vdata.getArray(0))).view(np.float32).reshape(-1, 3))
                for vdata, _ in self.vertex_data]


def offscreen_base(width: int = 640, height: int = 480):
    """A ``ShowBase`` drawing into an offscreen buffer (headless: EGL, Mesa's llvmpipe without a GPU),
    no audio, no multisampling. One per process (panda3d's rule)."""
    p3d.loadPrcFileData("skeletal-offscreen", "\n".join([
        "window-type offscreen", "load-display p3headlessgl", "aux-display pandagl", "audio-library-name null",
        f"win-size {int(width)} {int(height)}", "sync-video false", "framebuffer-multisample 0",
        "notify-level-device fatal", "notify-level-display error"]))
    from direct.showbase.ShowBase import ShowBase

    return ShowBase()


def screenshot(base) -> np.ndarray:
    """Draw a frame of ``base`` and return it as (height, width, 3) uint8 RGB, row 0 at the top."""
    base.graphicsEngine.renderFrame()
    base.graphicsEngine.renderFrame()  # the first frame of a new buffer may come back empty
    tex = base.win.getScreenshot()
    pixels = np.frombuffer(bytes(tex.getRamImageAs("RGB")), np.uint8)
    return np.ascontiguousarray(pixels.reshape(tex.getYSize(), tex.getXSize(), 3)[::-1])


def match_camera(base, camera) -> None:
    """Point ``base``'s camera like a :class:`skeletal.render.camera.Camera` (eye, target, up, vertical
    fov, aspect, near, far) looking at a :class:`PandaCharacter` (whose root turns Y-up into Z-up)."""
    eye = Y_UP_TO_Z_UP[:3, :3] @ np.asarray(camera.eye, np.float64)
    target = Y_UP_TO_Z_UP[:3, :3] @ np.asarray(camera.target, np.float64)
    up = Y_UP_TO_Z_UP[:3, :3] @ np.asarray(camera.up, np.float64)
    base.camera.setPos(*eye.tolist())
    base.camera.lookAt(p3d.LPoint3f(*target.tolist()), p3d.LVector3f(*up.tolist()))
    lens = p3d.PerspectiveLens()
    vfov = float(camera.fov)
    hfov = float(np.degrees(2 * np.arctan(np.tan(np.radians(vfov) / 2) * camera.aspect)))
    lens.setFov(hfov, vfov)
    lens.setNearFar(float(camera.near), float(camera.far))
    base.cam.node().setLens(lens)


__all__ = ["PandaCharacter", "offscreen_base", "screenshot", "match_camera", "panda_mat", "Y_UP_TO_Z_UP"]
