# Over 600 lines: one reader pass over a glTF file, validating every object in the order the spec defines
# them; its helpers (accessors, buffers, Draco, meshopt, URIs) are already modules of their own.
"""glTF 2.0 reader: a ``.gltf`` or ``.glb`` file -> :class:`skeletal.document.Document`.

The pipeline of this module, one helper module per job:

* :mod:`~skeletal.io.glb`: file bytes -> JSON document + GLB BIN chunk (one file read, no copies);
* :mod:`~skeletal.io.jsonobj`: typed JSON access whose errors name the object (``nodes[3].mesh``);
* :mod:`~skeletal.io.uris`: buffers and images by data URI or by file inside the allowed folder;
* :mod:`~skeletal.io.buffers`: buffers and bufferViews as checked byte ranges (+ EXT_meshopt_compression);
* :mod:`~skeletal.io.accessors`: accessors -> numpy arrays (zero-copy views where the layout allows);
* :mod:`~skeletal.io.draco`: KHR_draco_mesh_compression primitives;
* this module: nodes, meshes, skins, animations, materials, images and scenes -> the Document.

Conventions (see :mod:`skeletal.document`): quaternions xyzw; matrices row-major (glTF's column-major
transposed); vertex attributes float32 with normalised integers decoded per spec; joints and indices
uint32. Every defect of the input raises :class:`~skeletal.errors.ModelError` naming the file and the
object; a required extension that is unknown, or whose decoder package is missing, raises
:class:`~skeletal.errors.UnsupportedExtensionError`.
"""

from __future__ import annotations

import gc
import math
import operator
import os
import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import chain, repeat

import numpy as np

from skeletal.document import (
    Animation,
    Channel,
    Document,
    Image,
    Material,
    Mesh,
    MorphTarget,
    Node,
    PackedChannels,
    Primitive,
    PropertyTrack,
    Skin,
    TextureTransform,
)
from skeletal.errors import ModelError, UnsupportedExtensionError
from skeletal.io import draco as draco_ext
from skeletal.io import meshopt as meshopt_ext
from skeletal.io.accessors import (
    BYTE,
    COMPONENT_NAMES,
    FLOAT,
    SHORT,
    UNSIGNED_BYTE,
    UNSIGNED_INT,
    UNSIGNED_SHORT,
    AccessorInfo,
    Accessors,
    decode_float32,
)
from skeletal.io.buffers import BinaryData
from skeletal.io.files import read_regular
from skeletal.io.glb import GLTF1_HINT, parse_container
from skeletal.io.jsonobj import JsonObject, codes, plain_ints
from skeletal.io.uris import UriError, read_uri
from skeletal.io.pointer import NODE_TRACK_PATHS, PointerTarget, curve_pointer, parse_pointer, pointer_target
from skeletal.quat import decompose_trs

__all__ = ["read_gltf", "SUPPORTED_EXTENSIONS", "gc_paused"]

KHR_MESH_QUANTIZATION = "KHR_mesh_quantization"
KHR_TEXTURE_TRANSFORM = "KHR_texture_transform"
KHR_MATERIALS_UNLIT = "KHR_materials_unlit"
KHR_MATERIALS_EMISSIVE_STRENGTH = "KHR_materials_emissive_strength"
KHR_ANIMATION_POINTER = "KHR_animation_pointer"
KHR_NODE_VISIBILITY = "KHR_node_visibility"
#: Extensions this reader implements; any other in ``extensionsRequired`` is refused, except the
#: appearance-only ones of :data:`APPEARANCE_FALLBACKS`.
SUPPORTED_EXTENSIONS = (KHR_MESH_QUANTIZATION, draco_ext.EXTENSION, meshopt_ext.EXTENSION, KHR_TEXTURE_TRANSFORM,
                        KHR_MATERIALS_UNLIT, KHR_MATERIALS_EMISSIVE_STRENGTH, KHR_ANIMATION_POINTER, KHR_NODE_VISIBILITY)
#: Extensions that only change how a surface looks, which skeletal does not draw: a file that requires
#: one is still read (its animation is whole) and drawn with the stated fallback, after one warning.
APPEARANCE_FALLBACKS = {
    "KHR_materials_pbrSpecularGlossiness": "its metallic-roughness base colour",
    "KHR_materials_clearcoat": "no clearcoat layer",
    "KHR_materials_sheen": "no sheen",
    "KHR_materials_transmission": "opaque",
    "KHR_materials_diffuse_transmission": "opaque",
    "KHR_materials_volume": "no volume",
    "KHR_materials_ior": "the default index of refraction",
    "KHR_materials_specular": "the default specular",
    "KHR_materials_iridescence": "no iridescence",
    "KHR_materials_anisotropy": "isotropic",
    "KHR_materials_dispersion": "no dispersion",
    "KHR_materials_variants": "the default material of each primitive",
    "KHR_texture_basisu": "the base colour factor where no PNG/JPEG image is given",
    "EXT_texture_webp": "the base colour factor where the image cannot be decoded",
    "EXT_texture_avif": "the base colour factor where the image cannot be decoded",
    "KHR_lights_punctual": "skeletal's own key light (the lights' animation is read)",
    "EXT_lights_image_based": "skeletal's own ambient light",
    "KHR_xmp_json_ld": "metadata not read",
}

INTERPOLATIONS = ("LINEAR", "STEP", "CUBICSPLINE")
_ALL_INTS = frozenset({BYTE, UNSIGNED_BYTE, SHORT, UNSIGNED_SHORT})
_SIGNED_INTS = frozenset({BYTE, SHORT})
_UNSIGNED_INTS = frozenset({UNSIGNED_BYTE, UNSIGNED_SHORT})


# ---------------------------------------------------------------------------------------------------
# What each use of an accessor may be (glTF 2.0 spec tables, widened by KHR_mesh_quantization)
# ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Expect:
    """The accessor ``types`` a use allows, whether FLOAT components are allowed, and which integer
    component types are allowed normalised and not normalised."""

    types: tuple[str, ...]
    float_ok: bool = True
    normalized: frozenset[int] = frozenset()
    plain: frozenset[int] = frozenset()

    def check(self, obj: JsonObject, key: str, info: AccessorInfo) -> None:
        ct = info.component_type
        ok = info.type in self.types and (
            (ct == FLOAT and self.float_ok)
            or (info.normalized and ct in self.normalized)
            or (not info.normalized and ct in self.plain)
        )
        if not ok:
            obj.fail(f"accessors[{info.index}] is {info.describe()}, expected {self.describe()}", key)

    def describe(self) -> str:
        forms = []
        if self.float_ok:
            forms.append("FLOAT")
        forms += [f"{COMPONENT_NAMES[c]} normalized" for c in sorted(self.normalized)]
        forms += [COMPONENT_NAMES[c] for c in sorted(self.plain)]
        return f"{' or '.join(self.types)} of {', '.join(forms)}"


EXPECT_POSITION = Expect(("VEC3",), normalized=_ALL_INTS, plain=_ALL_INTS)
EXPECT_NORMAL = Expect(("VEC3",), normalized=_SIGNED_INTS)
EXPECT_TANGENT = Expect(("VEC4",), normalized=_SIGNED_INTS)
EXPECT_TEXCOORD = Expect(("VEC2",), normalized=_ALL_INTS, plain=_ALL_INTS)
EXPECT_COLOR = Expect(("VEC3", "VEC4"), normalized=_UNSIGNED_INTS)
EXPECT_JOINTS = Expect(("VEC4",), float_ok=False, plain=_UNSIGNED_INTS | {UNSIGNED_INT})
EXPECT_WEIGHTS = Expect(("VEC4",), normalized=_UNSIGNED_INTS)
EXPECT_TARGET_POSITION = Expect(("VEC3",), normalized=_SIGNED_INTS, plain=_SIGNED_INTS)
EXPECT_TARGET_DIRECTION = Expect(("VEC3",), normalized=_SIGNED_INTS)
EXPECT_INDICES = Expect(("SCALAR",), float_ok=False, plain=_UNSIGNED_INTS | {UNSIGNED_INT})
EXPECT_INVERSE_BIND = Expect(("MAT4",))
EXPECT_KEY_TIMES = Expect(("SCALAR",))
EXPECT_CUSTOM = Expect(tuple(["SCALAR", "VEC2", "VEC3", "VEC4", "MAT2", "MAT3", "MAT4"]),
                       normalized=_ALL_INTS, plain=_ALL_INTS | {UNSIGNED_INT})
#: Animation outputs by target path; translation/scale also quantized (as gltfpack/gltf-transform write).
EXPECT_OUTPUT = {
    "translation": Expect(("VEC3",), normalized=_ALL_INTS, plain=_ALL_INTS),
    "rotation": Expect(("VEC4",), normalized=_ALL_INTS),
    "scale": Expect(("VEC3",), normalized=_ALL_INTS, plain=_ALL_INTS),
    "weights": Expect(("SCALAR",), normalized=_ALL_INTS),
}
_PATH_WIDTH = {"translation": 3, "rotation": 4, "scale": 3}
#: KHR_animation_pointer outputs by width: floats or normalised integers (a boolean is UNSIGNED_BYTE).
EXPECT_POINTER = {1: Expect(("SCALAR",), normalized=_ALL_INTS, plain=_UNSIGNED_INTS),
                  2: Expect(("VEC2",), normalized=_ALL_INTS), 3: Expect(("VEC3",), normalized=_ALL_INTS),
                  4: Expect(("VEC4",), normalized=_ALL_INTS)}
_PATH_TYPE = {"translation": "VEC3", "rotation": "VEC4", "scale": "VEC3"}
_SAMPLER, _TARGET, _NODE, _PATH = (operator.itemgetter(k) for k in ("sampler", "target", "node", "path"))
_INPUT, _OUTPUT = operator.itemgetter("input"), operator.itemgetter("output")
_MISSING = object()
#: Node fields :meth:`_GltfReader._plain_node` reads (plus ones no reader uses); any other goes the full way.
_PLAIN_NODE_KEYS = frozenset({"name", "children", "translation", "rotation", "scale", "mesh", "skin", "extras",
                              "extensions"})
_NODE_TRS = (("translation", 3, (0.0, 0.0, 0.0)), ("rotation", 4, (0.0, 0.0, 0.0, 1.0)), ("scale", 3, (1.0, 1.0, 1.0)))
_NUMBER_TYPES = frozenset({int, float})
_NAME_TYPES = frozenset({str, type(None)})  # None: absent (an explicit null is told apart)
_LIST_TYPES = frozenset({list, tuple})  # tuple: the defaults
_NO_CHILDREN = ()
_PATH_CODES = {"translation": 0, "rotation": 1, "scale": 2, "weights": 3}  # as skeletal.clip.PATH_CODE
_INTERP_NAMES = ("STEP", "LINEAR", "CUBICSPLINE")  # codes as skeletal.clip.INTERP_CODE
_INTERP_CODES = {name: i for i, name in enumerate(_INTERP_NAMES)}
_CUBIC = _INTERP_CODES["CUBICSPLINE"]
_PATH_CODES_1 = {name: code + 1 for name, code in _PATH_CODES.items()}  # for _codes: 0 is "none of these"
_INTERP_CODES_1 = {name: code + 1 for name, code in _INTERP_CODES.items()}
_PATH_WIDTHS = np.array([3, 4, 3, 0], dtype=np.int64)  # by path code; weights: the node's mesh's targets
_INFLUENCE = re.compile(r"^(JOINTS|WEIGHTS)_(0|[1-9][0-9]*)$")


# ---------------------------------------------------------------------------------------------------
# Public entry point
# ---------------------------------------------------------------------------------------------------
def read_gltf(path: str | os.PathLike, *, base_dir: str | os.PathLike | None = None,
              data: bytes | None = None) -> Document:
    """Read a glTF 2.0 model (``.gltf`` with external or data-URI buffers, or binary ``.glb``).

    ``base_dir``: where relative URIs resolve and must stay. By default that is the model's own folder
    (subfolders allowed); passing ``base_dir`` is the explicit opt-in to read buffers and images from
    anywhere under that folder instead. Absolute paths, other URI schemes and network access are never
    allowed.

    Raises :class:`ModelError` (naming the file and the glTF object) for anything malformed, unsafe or
    inconsistent, and :class:`UnsupportedExtensionError` for a required extension this reader cannot
    handle (or whose decoder package, ``DracoPy`` / ``meshopt``, is not installed).

    ``data``: the file's bytes when the caller has read them already (:func:`skeletal.load` does, to
    look at the head first); ``path`` then only names the file and anchors its URIs.
    """
    file = os.fspath(path)
    if data is None:
        try:
            data = read_regular(file)  # the one read of the model file; GLB arrays are views into it
        except OSError as exc:
            raise ModelError(file, None, f"cannot read the file: {exc.strerror or exc}") from None
    with gc_paused():
        document, glb_bin = parse_container(data, file)
        uri_root = os.fspath(base_dir) if base_dir is not None else os.path.dirname(os.path.abspath(file))
        return _GltfReader(JsonObject(file, "", document), glb_bin, uri_root, file_bytes=len(data)).read()


@contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector held off while a model is read: parsing the JSON and building
    the document make tens of thousands of containers, none of them in a reference cycle, and the
    collections they would trigger cost 0.3-0.7 ms of Soldier.glb's load. Re-enabled on the way out
    (only when it was enabled on the way in, so nesting and other code's choice are kept)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# ---------------------------------------------------------------------------------------------------
# The reader
# ---------------------------------------------------------------------------------------------------
@dataclass
class _Tables:
    """Lengths of the top-level arrays, for index checks."""

    nodes: int = 0
    meshes: int = 0
    skins: int = 0
    materials: int = 0
    textures: int = 0
    images: int = 0
    cameras: int = 0


class _GltfReader:
    """Builds a Document from one parsed glTF JSON document; one instance per read."""

    def __init__(self, root: JsonObject, glb_bin: memoryview | None, uri_root: str, file_bytes: int | None = None):
        self.root = root
        self.file = root.file
        self.uri_root = uri_root
        self.asset = self._check_asset()
        self.extensions_used = self._string_list("extensionsUsed")
        self.extensions_required = self._string_list("extensionsRequired")
        self._check_required_extensions()
        self.binary = BinaryData(root, glb_bin, uri_root, file_bytes)
        self.accessors = Accessors(root, self.binary)
        self.tables = _Tables(
            nodes=len(root.array("nodes", [])),
            meshes=len(root.array("meshes", [])),
            skins=len(root.array("skins", [])),
            materials=len(root.array("materials", [])),
            textures=len(root.array("textures", [])),
            images=len(root.array("images", [])),
            cameras=len(root.array("cameras", [])),
        )
        self._checked_times: set[int] = set()  # input accessors already found strictly increasing
        self._pointers_warned: set[str] = set()  # unsupported KHR_animation_pointer pointers told once
        self.pointer_rest: dict[str, np.ndarray] = {}  # see Document.pointer_rest

    # -- document-level checks ------------------------------------------------------------------
    def _check_asset(self) -> dict:
        head = self.root.data.get("asset")
        raw = head.get("version") if isinstance(head, dict) else None
        hint = GLTF1_HINT  # the same words a GLB version 1 container gets (skeletal.io.glb)
        if (isinstance(raw, (int, float)) and not isinstance(raw, bool)) or (
                isinstance(raw, str) and re.match(r"^(0|1)(\.[0-9]+)?$", raw)):
            raise ModelError(self.file, "asset.version", f"{hint}: the file says {raw!r}")
        if raw is None and any(isinstance(self.root.data.get(k), dict) for k in ("meshes", "nodes", "accessors")):
            self.root.fail(f"{hint}: its top-level objects are dictionaries, glTF 2.x uses arrays")
        asset = self.root.object("asset", required=True)
        version = asset.string("version")
        if not re.match(r"^2\.[0-9]+$", version):
            asset.fail(f"glTF version {version!r} is not supported (this reader reads glTF 2.x)", "version")
        min_version = asset.string("minVersion", None)
        if min_version is not None and min_version != "2.0":
            asset.fail(f"the file needs glTF {min_version}; this reader implements 2.0", "minVersion")
        return dict(asset.data)

    def _string_list(self, key: str) -> list[str]:
        values = self.root.array(key, [])
        for i, value in enumerate(values):
            if not isinstance(value, str):
                self.root.fail("expected an extension name (a string)", f"{key}[{i}]")
        return list(values)

    def _check_required_extensions(self) -> None:
        fallbacks = [name for name in self.extensions_required
                     if name not in SUPPORTED_EXTENSIONS and name in APPEARANCE_FALLBACKS]
        if fallbacks:  # appearance only: read the file, draw it without them, and say so once
            told = "; ".join(f"{name}: {APPEARANCE_FALLBACKS[name]}" for name in fallbacks)
            warnings.warn(f"{os.path.basename(self.file)}: extensionsRequired: appearance extension(s) skeletal does "
                          f"not draw, read anyway and drawn with a fallback ({told})", stacklevel=4)
        for name in self.extensions_required:
            if name not in SUPPORTED_EXTENSIONS and name not in APPEARANCE_FALLBACKS:
                raise UnsupportedExtensionError(
                    self.file, "extensionsRequired",
                    f"required extension {name} is not supported (supported: {', '.join(SUPPORTED_EXTENSIONS)})",
                )
        # A required compression extension cannot fall back: its decoder package must be installed.
        if draco_ext.EXTENSION in self.extensions_required:
            draco_ext.load_module(self.file, "extensionsRequired")
        if meshopt_ext.EXTENSION in self.extensions_required:
            meshopt_ext.load_module(self.file, "extensionsRequired")

    # -- top level ------------------------------------------------------------------------------
    def read(self) -> Document:
        if self.root.data.get("animations"):
            # Built for the animations' bulk read anyway; built first, it also locates the meshes'
            # plain float accessors (Accessors.floats) without reading each one's bufferView again.
            self.accessors.plain_float_table()
        images = self._images()
        materials = self._materials()
        meshes = [self._mesh(i, obj) for i, obj in enumerate(self.root.objects("meshes"))]
        skins = [self._skin(i, obj) for i, obj in enumerate(self.root.objects("skins"))]
        nodes = self._nodes()
        cameras, lights = self._cameras_and_lights(nodes)
        self._check_skinned_joints(nodes, meshes, skins)
        animation_objects = self.root.objects("animations")
        animations = self._packed_animations(animation_objects.raw, nodes, meshes)
        if animations is None:
            animations = [self._animation(i, obj, nodes, meshes) for i, obj in enumerate(animation_objects)]
        for obj, animation in zip(animation_objects, animations):
            animation.properties.extend(self._curves(obj))
        scene_objects = self.root.objects("scenes")
        scenes = [obj.indices("nodes", "nodes", len(nodes), []) for obj in scene_objects]
        scene_names = [obj.string("name", "") for obj in scene_objects]
        scene = self.root.index("scene", "scenes", len(scenes), None)
        return Document(
            path=self.file,
            nodes=nodes,
            meshes=meshes,
            skins=skins,
            animations=animations,
            scenes=scenes,
            scene=scene,
            materials=materials,
            images=images,
            extensions_used=self.extensions_used,
            extensions_required=self.extensions_required,
            asset_info=self.asset,
            scene_names=scene_names,
            pointer_rest=self.pointer_rest,
            cameras=cameras,
            lights=lights,
        )

    def _cameras_and_lights(self, nodes: list[Node]) -> tuple[list[dict], list[dict]]:
        """The cameras and KHR_lights_punctual lights (their JSON, checked to be objects with a known
        ``type``), and each node's ``camera``, ``light`` and KHR_node_visibility ``visible``."""
        cameras = [dict(obj.data) for obj in self.root.objects("cameras")]
        for camera in self.root.objects("cameras"):
            kind = camera.string("type")
            if kind not in ("perspective", "orthographic"):
                camera.fail(f"unknown camera type {kind!r} (expected perspective or orthographic)", "type")
            camera.object(kind, required=True)
        lights_ext = self.root.object("extensions").object("KHR_lights_punctual")
        lights = [dict(obj.data) for obj in lights_ext.objects("lights")]
        for light in lights_ext.objects("lights"):
            kind = light.string("type")
            if kind not in ("directional", "point", "spot"):
                light.fail(f"unknown light type {kind!r} (expected directional, point or spot)", "type")
        for i, raw in enumerate(self.root.array("nodes", [])):
            if "camera" not in raw and "extensions" not in raw:
                continue
            obj = self.root.objects("nodes")[i]
            nodes[i].camera = obj.index("camera", "cameras", len(cameras), None)
            light = obj.extension("KHR_lights_punctual")
            if light is not None:
                nodes[i].light = light.index("light", "KHR_lights_punctual lights", len(lights))
            visibility = obj.extension(KHR_NODE_VISIBILITY)
            if visibility is not None:
                nodes[i].visible = visibility.boolean("visible", True)
        return cameras, lights

    def _accessor(self, obj: JsonObject, key: str, expect: Expect) -> AccessorInfo:
        """The accessor ``obj[key]`` refers to, checked to exist and to suit its use."""
        index = obj.index(key, "accessors", len(self.accessors))
        info = self.accessors.info(index)
        expect.check(obj, key, info)
        return info

    # -- nodes ----------------------------------------------------------------------------------
    def _nodes(self) -> list[Node]:
        """All nodes, with parents filled in; two parents or a cycle is an error. Iterative throughout,
        so a 10,000-deep chain is no problem."""
        objs = self.root.objects("nodes")
        plain = self._plain_nodes(objs.raw)
        if plain is not None:
            self._check_acyclic(plain)
            return plain
        count = len(objs)
        parents = [-1] * count
        nodes: list[Node] = []
        for i, obj in enumerate(objs):
            children = obj.indices("children", "nodes", count, [])
            for child in children:
                if child == i:
                    obj.fail(f"nodes[{i}] lists itself as a child", "children")
                if parents[child] != -1:
                    obj.fail(f"nodes[{child}] has two parents, nodes[{parents[child]}] and nodes[{i}]", "children")
                parents[child] = i
            nodes.append(self._plain_node(i, obj.data, children) or self._node(i, obj, children))
        for i, parent in enumerate(parents):
            nodes[i].parent = parent
        self._check_acyclic(nodes)
        return nodes

    def _node(self, i: int, obj: JsonObject, children: list[int]) -> Node:
        node = Node(name=obj.string("name", f"node_{i}"), children=children)
        if obj.has("matrix"):
            # glTF stores the matrix column-major: reshaping gives its transpose.
            matrix = obj.numbers("matrix", length=16).reshape(4, 4).T.copy()
            if not np.allclose(matrix[3], (0.0, 0.0, 0.0, 1.0), atol=1e-6):
                obj.fail(f"matrix is not affine (its last row is {matrix[3].tolist()})", "matrix")
            node.matrix = matrix
            node.translation, node.rotation, node.scale = decompose_trs(matrix)
        else:
            node.translation = obj.numbers("translation", np.zeros(3), length=3)
            node.rotation = obj.numbers("rotation", np.array([0.0, 0.0, 0.0, 1.0]), length=4)
            node.scale = obj.numbers("scale", np.ones(3), length=3)
        node.mesh = obj.index("mesh", "meshes", self.tables.meshes, None)
        node.skin = obj.index("skin", "skins", self.tables.skins, None)
        obj.index("camera", "cameras", self.tables.cameras, None)
        node.weights = obj.numbers("weights", None)
        node.extras = _extras(obj)
        return node

    def _plain_nodes(self, raw: list[dict]) -> list[Node] | None:
        """Every node at once, when all are the common kind :meth:`_plain_node` reads and the children
        lists are sound (indices in range, nobody its own child, one parent each): fields pulled out with
        one C-level pass each, numbers checked with numpy. None otherwise; then the nodes are read one
        by one, which words the error. The parents are filled in; the cycle check is the caller's."""
        count = len(raw)
        keys = set().union(*raw)  # every key any node has: one pass, and no pass for keys none has
        if not count or not keys <= _PLAIN_NODE_KEYS:
            return None
        names = list(map(dict.get, raw, repeat("name"), repeat(None)))
        children = list(map(dict.get, raw, repeat("children"), repeat(_NO_CHILDREN)))
        refs = [list(map(dict.get, raw, repeat(key), repeat(-1))) for key in ("mesh", "skin")]
        if (not set(map(type, names)) <= _NAME_TYPES or not set(map(type, children)) <= _LIST_TYPES
                or not set(map(type, refs[0] + refs[1])) <= {int}):
            return None
        if None in names and any(d.get("name", "") is None for d in raw):
            return None  # an explicit null name: the full path reports it
        lengths = list(map(len, children))
        flat = list(chain.from_iterable(children))
        if not set(map(type, flat)) <= {int}:
            return None
        try:
            child = np.array(flat, dtype=np.int64)
            mesh = np.array(refs[0], dtype=np.int64)
            skin = np.array(refs[1], dtype=np.int64)
        except OverflowError:
            return None
        owner = np.repeat(np.arange(count), lengths)
        if child.size and (child.min() < 0 or child.max() >= count or (child == owner).any()
                           or np.bincount(child, minlength=count).max() > 1):
            return None
        # -1 stands for "absent": an explicit negative index (which the full path reports) shows as a
        # node that has the key but no index >= 0.
        if (mesh.min() < -1 or mesh.max() >= self.tables.meshes or skin.min() < -1 or skin.max() >= self.tables.skins
                or sum(map(operator.contains, raw, repeat("mesh"))) != int((mesh >= 0).sum())
                or sum(map(operator.contains, raw, repeat("skin"))) != int((skin >= 0).sum())):
            return None
        trs = []
        for key, length, default in _NODE_TRS:
            if key not in keys:
                trs.append(list(np.tile(np.array(default), (count, 1))))  # one row view per node
                continue
            values = list(map(dict.get, raw, repeat(key), repeat(default)))
            if not set(map(type, values)) <= _LIST_TYPES or set(map(len, values)) != {length}:
                return None
            flat = list(chain.from_iterable(values))
            if not set(map(type, flat)) <= _NUMBER_TYPES:
                return None
            try:
                array = np.array(flat, dtype=np.float64).reshape(count, length)
            except OverflowError:
                return None
            if not np.isfinite(array).all():
                return None
            trs.append(list(array))  # one row view per node
        parent = np.full(count, -1, dtype=np.int64)
        parent[child] = owner
        names = [f"node_{i}" if name is None else name for i, name in enumerate(names)]
        if "extras" in keys:
            extras = [bounded_extras(e, self.file, f"nodes[{i}]") for i, e in enumerate(map(dict.get, raw, repeat("extras")))]
        else:
            extras = [{} for _ in range(count)]
        meshes = [None if m < 0 else m for m in refs[0]]
        skins = [None if k < 0 else k for k in refs[1]]
        return list(map(Node, names, map(list, children), trs[0], trs[1], trs[2], repeat(None), meshes, skins,
                        repeat(None), parent.tolist(), extras))

    def _plain_node(self, i: int, d: dict, children: list[int]) -> Node | None:
        """The common node (name, TRS of finite numbers, mesh, skin, extras; no matrix, camera or
        weights) read with plain dict reads, to the same Node :meth:`_node` makes; None for anything
        else or anything wrong, which :meth:`_node` then reads and reports."""
        if not d.keys() <= _PLAIN_NODE_KEYS:
            return None
        name = d.get("name", _MISSING)
        if name is _MISSING:
            name = f"node_{i}"
        elif type(name) is not str:
            return None
        trs = []
        for key, length, default in _NODE_TRS:
            value = d.get(key, _MISSING)
            if value is _MISSING:
                trs.append(np.array(default))
                continue
            if type(value) is not list or len(value) != length or not set(map(type, value)) <= _NUMBER_TYPES:
                return None
            try:
                if not all(map(math.isfinite, value)):
                    return None
            except OverflowError:
                return None
            trs.append(np.array(value, dtype=np.float64))
        refs = []
        for key, size in (("mesh", self.tables.meshes), ("skin", self.tables.skins)):
            value = d.get(key, _MISSING)
            if value is _MISSING:
                refs.append(None)
            elif type(value) is int and 0 <= value < size:
                refs.append(value)
            else:
                return None
        extras = d.get("extras")
        return Node(name=name, children=children, translation=trs[0], rotation=trs[1], scale=trs[2],
                    mesh=refs[0], skin=refs[1], extras=bounded_extras(extras, self.file, f"nodes[{i}]"))

    def _check_acyclic(self, nodes: list[Node]) -> None:
        """With at most one parent each, the nodes not reachable from a root are exactly those on or
        hanging below a cycle: find one and name the cycle."""
        reached = [False] * len(nodes)
        stack = [i for i, node in enumerate(nodes) if node.parent == -1]
        while stack:
            i = stack.pop()
            reached[i] = True
            stack.extend(nodes[i].children)
        if all(reached):
            return
        start = reached.index(False)
        seen: set[int] = set()
        i = start
        while i not in seen:  # walk up the parents until we go round
            seen.add(i)
            i = nodes[i].parent
        cycle = [i]
        j = nodes[i].parent
        while j != i:
            cycle.append(j)
            j = nodes[j].parent
        path = " -> ".join(f"nodes[{k}]" for k in reversed(cycle + [i]))  # parent -> child order
        raise ModelError(self.file, f"nodes[{i}]", f"the node hierarchy has a cycle: {path}")

    # -- meshes ---------------------------------------------------------------------------------
    def _mesh(self, index: int, obj: JsonObject) -> Mesh:
        primitives = [self._primitive(p) for p in obj.objects("primitives", required=True, min_length=1)]
        target_counts = {len(p.targets) for p in primitives}
        if len(target_counts) > 1:
            obj.fail(f"its primitives have different numbers of morph targets: {sorted(target_counts)}", "primitives")
        n_targets = target_counts.pop()
        weights = obj.numbers("weights", None)
        if weights is not None and len(weights) != n_targets:
            obj.fail(f"{len(weights)} default weights for {n_targets} morph targets", "weights")
        extras = obj.raw("extras")
        names = extras.get("targetNames") if isinstance(extras, dict) else None
        target_names = list(names) if isinstance(names, list) and all(isinstance(n, str) for n in names) else None
        return Mesh(name=obj.string("name", f"mesh_{index}"), primitives=primitives, weights=weights,
                    target_names=target_names)

    def _primitive(self, p: JsonObject) -> Primitive:
        attrs = p.object("attributes", required=True)
        mode = p.int("mode", 4, maximum=6)
        material = p.index("material", "materials", self.tables.materials, None)

        # Check every attribute's accessor against its semantic before reading any data.
        infos: dict[str, AccessorInfo] = {}
        n_accessors, info_of = len(self.accessors), self.accessors.info
        for name, index in attrs.data.items():
            expect = _ATTRIBUTE_EXPECTS.get(name) or _attribute_expect(name)
            if type(index) is int and 0 <= index < n_accessors:  # what _accessor checks, in one go
                info = info_of(index)
                expect.check(attrs, name, info)
                infos[name] = info
            else:
                infos[name] = self._accessor(attrs, name, expect)
        if "POSITION" not in infos:
            attrs.fail("the primitive has no POSITION attribute")
        vertex_count = infos["POSITION"].count
        for name, info in infos.items():
            if info.count != vertex_count:
                attrs.fail(f"accessors[{info.index}] has {info.count} elements, POSITION has {vertex_count}", name)
        index_info = self._accessor(p, "indices", EXPECT_INDICES) if p.has("indices") else None

        decoded = self._draco_primitive(p, infos, index_info)

        def raw(name: str) -> np.ndarray:
            """Attribute ``name`` in its stored component type."""
            if decoded is not None and name in decoded.raw:
                return decoded.raw[name]
            return self.accessors.raw(infos[name].index)

        def attribute(name: str) -> np.ndarray:
            """Attribute ``name`` as float32 (the accessor cache shares it between primitives)."""
            if decoded is not None and name in decoded.raw:
                return decode_float32(decoded.raw[name], infos[name])
            return self.accessors.floats(infos[name].index)

        prim = Primitive(positions=attribute("POSITION"), mode=mode, material=material)
        if "NORMAL" in infos:
            prim.normals = attribute("NORMAL")
        if "TANGENT" in infos:
            prim.tangents = attribute("TANGENT")

        # Influence sets JOINTS_n/WEIGHTS_n, n = 0, 1, ... side by side: (V, 4 * sets).
        joint_sets = sorted(int(m.group(2)) for m in map(_INFLUENCE.match, infos) if m and m.group(1) == "JOINTS")
        weight_sets = sorted(int(m.group(2)) for m in map(_INFLUENCE.match, infos) if m and m.group(1) == "WEIGHTS")
        if joint_sets != weight_sets or joint_sets != list(range(len(joint_sets))):
            attrs.fail(f"JOINTS_n and WEIGHTS_n must come in pairs numbered from 0 "
                       f"(found JOINTS {joint_sets}, WEIGHTS {weight_sets})")
        if joint_sets:
            joints = [raw(f"JOINTS_{n}").astype(np.uint32) for n in joint_sets]
            weights = [attribute(f"WEIGHTS_{n}") for n in weight_sets]
            # Weights stay exactly as stored (the skin stage renormalises).
            prim.joints = joints[0] if len(joints) == 1 else np.concatenate(joints, axis=1)
            prim.weights = weights[0] if len(weights) == 1 else np.concatenate(weights, axis=1)

        for name in infos:
            if name not in ("POSITION", "NORMAL", "TANGENT") and not _INFLUENCE.match(name):
                prim.attributes[name] = attribute(name)

        if decoded is not None:
            prim.indices = decoded.indices  # Draco's faces (None for a point cloud)
        elif index_info is not None:
            prim.indices = self.accessors.uints(index_info.index)
        if prim.indices is not None and prim.indices.size:
            top = int(prim.indices.max())
            if top >= vertex_count:
                p.fail(f"index {top} is out of range for {vertex_count} vertices", "indices")

        prim.targets = [self._target(t, vertex_count) for t in p.objects("targets")]
        return prim

    def _draco_primitive(self, p: JsonObject, infos: dict[str, AccessorInfo],
                         index_info: AccessorInfo | None) -> draco_ext.DracoPrimitive | None:
        """Decode the primitive's KHR_draco_mesh_compression stream, or None when it has none (or has
        one that is optional and no DracoPy, in which case its uncompressed accessors are used)."""
        ext = p.extension(draco_ext.EXTENSION)
        if ext is None:
            return None
        ids = ext.object("attributes", required=True)
        for name in ids.data:
            if name not in infos:
                ids.fail(f"attribute {name} is not in the primitive's attributes", name)
        if not draco_ext.available():
            # Optional extension: fall back to the plain accessors if they have data.
            listed = [infos[name] for name in ids.data]
            if all(self.accessors.objects[info.index].has("bufferView") for info in listed):
                return None
            draco_ext.load_module(self.file, ext.where)  # raises UnsupportedExtensionError
        view = ext.index("bufferView", "bufferViews", len(self.binary.views))
        stream = self.binary.view_bytes(view)
        listed = {name: infos[name] for name in ids.data}
        # each primitive is within Draco's ratio; many decoding one stream are summed in the file's budget
        headers = [*listed.values(), *([index_info] if index_info else [])]
        draco_ext.check_declared_size(ext, headers, len(stream))  # this primitive's own ratio first
        declared = sum(info.count * info.element_size for info in headers)
        self.binary.budget.charge(declared, ext.where, f"a Draco mesh of {declared} declared bytes decoded")
        return draco_ext.decode_primitive(ext, stream, listed, index_info, self.file)

    def _target(self, t: JsonObject, vertex_count: int) -> MorphTarget:
        target = MorphTarget()
        for name, expect, slot in (
            ("POSITION", EXPECT_TARGET_POSITION, "position"),
            ("NORMAL", EXPECT_TARGET_DIRECTION, "normal"),
            ("TANGENT", EXPECT_TARGET_DIRECTION, "tangent"),
        ):
            if not t.has(name):
                continue
            info = self._accessor(t, name, expect)
            if info.count != vertex_count:
                t.fail(f"accessors[{info.index}] has {info.count} elements, the primitive has {vertex_count} vertices", name)
            setattr(target, slot, self.accessors.floats(info.index))
        return target

    def _check_skinned_joints(self, nodes: list[Node], meshes: list[Mesh], skins: list[Skin]) -> None:
        """Every joint index of a skinned mesh must name a joint of the skin it is used with."""
        largest: dict[tuple[int, int], int] = {}
        for node_index, node in enumerate(nodes):
            if node.mesh is None or node.skin is None:
                continue
            joint_count = len(skins[node.skin].joints)
            for p_index, prim in enumerate(meshes[node.mesh].primitives):
                if prim.joints is None:
                    continue
                key = (node.mesh, p_index)
                if key not in largest:
                    largest[key] = int(prim.joints.max())
                if largest[key] >= joint_count:
                    column = int(np.argmax(prim.joints.max(axis=0)))
                    raise ModelError(
                        self.file, f"meshes[{node.mesh}].primitives[{p_index}]",
                        f"JOINTS_{column // 4} has joint index {largest[key]}, but skins[{node.skin}] "
                        f"(the skin of nodes[{node_index}]) has {joint_count} joints",
                    )

    # -- skins ----------------------------------------------------------------------------------
    def _skin(self, index: int, obj: JsonObject) -> Skin:
        joints = obj.indices("joints", "nodes", self.tables.nodes, min_length=1)
        joint_count = len(joints)
        if obj.has("inverseBindMatrices"):
            info = self._accessor(obj, "inverseBindMatrices", EXPECT_INVERSE_BIND)
            if info.count < joint_count:
                obj.fail(f"accessors[{info.index}] has {info.count} matrices for {joint_count} joints", "inverseBindMatrices")
            # (J, column, row) as stored -> (J, row, column): row-major.
            inverse_bind = self.accessors.floats(info.index)[:joint_count].transpose(0, 2, 1).astype(np.float64)
            finite = np.isfinite(inverse_bind).all(axis=(1, 2))
            if not finite.all():  # a NaN matrix would make every vertex it weighs NaN
                obj.fail(f"accessors[{info.index}] matrix {int(np.argmin(finite))} is not finite", "inverseBindMatrices")
        else:
            inverse_bind = np.tile(np.eye(4), (joint_count, 1, 1))
        return Skin(
            name=obj.string("name", f"skin_{index}"),
            joints=np.array(joints, dtype=np.int64),
            inverse_bind=inverse_bind,
            skeleton=obj.index("skeleton", "nodes", self.tables.nodes, None),
        )

    # -- animations -----------------------------------------------------------------------------
    def _animation(self, a_index: int, obj: JsonObject, nodes: list[Node], meshes: list[Mesh]) -> Animation:
        name = obj.string("name", f"animation_{a_index}")
        samplers = obj.objects("samplers", required=True)
        n_nodes, n_accessors = len(nodes), len(self.accessors)
        channel_objects = obj.objects("channels", required=True)
        packed = self._packed_channels(channel_objects.raw, samplers.raw, nodes, meshes)
        if packed is not None:
            return Animation.from_packed(name, packed, _extras(obj))
        channels: list[Channel] = []
        properties: list[PropertyTrack] = []
        for c_index, c_raw in enumerate(channel_objects.raw):
            plain = self._plain_channel(c_raw, samplers.raw, n_nodes, n_accessors)
            if plain is not None:
                channels.append(plain)
                continue
            c = channel_objects[c_index]
            s_index = c.int("sampler")
            if s_index >= len(samplers):
                c.fail(f"refers to sampler {s_index}, but animation {name!r} has {len(samplers)} samplers", "sampler")
            target = c.object("target", required=True)
            path = target.string("path")
            if path == "pointer" and target.extension(KHR_ANIMATION_POINTER) is not None:
                read = self._pointer_channel(c, target, name, s_index, samplers[s_index], nodes, meshes)
                if isinstance(read, Channel):
                    channels.append(read)
                elif read is not None:
                    properties.append(read)
                continue
            if not target.has("node"):
                continue  # the spec allows this: the target is defined by an extension we do not implement
            node = target.index("node", "nodes", len(nodes))
            if path in _PATH_WIDTH:
                width = _PATH_WIDTH[path]
            elif path == "weights":
                mesh = nodes[node].mesh
                width = 0 if mesh is None else len(meshes[mesh].primitives[0].targets)
                if width == 0:
                    target.fail(f"a weights channel targets nodes[{node}], which has no mesh with morph targets")
            else:
                target.fail(f"unknown path {path!r} (expected translation, rotation, scale or weights)", "path")
            channels.append(self._channel(c, name, s_index, samplers[s_index], node, path, width))
        animation = Animation(name=name, channels=channels, extras=_extras(obj))
        animation.properties = properties
        return animation

    def _pointer_channel(self, c: JsonObject, target: JsonObject, anim_name: str, s_index: int, sampler: JsonObject,
                         nodes: list[Node], meshes: list[Mesh]) -> Channel | PropertyTrack | None:
        """A KHR_animation_pointer channel: a node's TRS or weights as an ordinary :class:`Channel`,
        a supported property (see :data:`skeletal.properties.POINTER_KINDS`) as a
        :class:`PropertyTrack` (its rest value noted in ``pointer_rest``), anything else None after one
        warning per pointer."""
        ext = target.extension(KHR_ANIMATION_POINTER)
        assert ext is not None
        pointer = ext.string("pointer")
        parsed = parse_pointer(pointer)
        if parsed is not None and parsed[0] == "node" and parsed[2] in NODE_TRACK_PATHS:
            node, path = parsed[1], parsed[2]
            if node >= len(nodes):
                ext.fail(f"{pointer} names nodes[{node}], which does not exist (the file has {len(nodes)})", "pointer")
            if path == "weights":
                mesh = nodes[node].mesh
                width = 0 if mesh is None else len(meshes[mesh].primitives[0].targets)
                if width == 0:
                    ext.fail(f"{pointer}: nodes[{node}] has no mesh with morph targets", "pointer")
            else:
                width = _PATH_WIDTH[path]
            return self._channel(c, anim_name, s_index, sampler, node, path, width)
        found = pointer_target(pointer)
        if found is None:
            if pointer not in self._pointers_warned:
                self._pointers_warned.add(pointer)
                warnings.warn(f"{os.path.basename(self.file)}: {c.where}: KHR_animation_pointer {pointer} is not a "
                              "property skeletal animates; channel ignored", stacklevel=5)
            return None
        rest = self._pointer_rest(ext, pointer, found)
        about = f"animation {anim_name!r}, samplers[{s_index}]"
        interpolation = sampler.string("interpolation", "LINEAR")
        if interpolation not in INTERPOLATIONS:
            raise ModelError(self.file, c.where, f"{about}: unknown interpolation {interpolation!r} "
                                                  f"(expected {', '.join(INTERPOLATIONS)})")
        input_info = self._accessor(sampler, "input", EXPECT_KEY_TIMES)
        output_info = self._accessor(sampler, "output", EXPECT_POINTER[found.width])
        keys = input_info.count
        rows = 3 * keys if interpolation == "CUBICSPLINE" else keys
        if output_info.count != rows:
            raise ModelError(self.file, c.where, f"{about}: output accessors[{output_info.index}] has "
                                                  f"{output_info.count} elements, expected {rows} for {keys} keys of {pointer}")
        times = self.accessors.floats(input_info.index)
        if input_info.index not in self._checked_times:
            self._check_times(c, about, input_info, times)
            self._checked_times.add(input_info.index)
        values = np.asarray(self.accessors.floats(output_info.index), np.float32).reshape(rows, found.width)
        if not np.isfinite(values).all():
            k = int(np.argmin(np.isfinite(values).all(axis=1)))
            raise ModelError(self.file, c.where, f"{about}: output accessors[{output_info.index}] element {k} is not finite")
        if found.property == "extensions/KHR_node_visibility/visible":
            # a boolean: switched, never blended (as three.js's BooleanKeyframeTrack); any non-zero is true
            values = (values[1::3] if interpolation == "CUBICSPLINE" else values) != 0
            interpolation = "STEP"
        self.pointer_rest.setdefault(pointer, rest)
        return PropertyTrack(pointer, interpolation, times, values)

    def _curves(self, obj: JsonObject) -> list[PropertyTrack]:
        """An animation's named float curves (see :mod:`skeletal.io.pointer`, ``curve/<name>``): samplers
        no channel uses whose ``extras.curve`` names them (SCALAR outputs), and the inline ones of the
        animation's ``extras.curves`` (``{name: {"times": [...], "values": [...], "interpolation": ...}}``)."""
        raw_samplers = obj.raw("samplers")
        raw_channels = obj.raw("channels")
        if not (isinstance(obj.raw("extras"), dict) and "curves" in obj.raw("extras")) and not (
                isinstance(raw_samplers, list) and any(isinstance(s, dict) and isinstance(s.get("extras"), dict)
                                                       and "curve" in s["extras"] for s in raw_samplers)):
            return []  # the common case: no curves, nothing to look at
        curves: list[PropertyTrack] = []
        used = {c.get("sampler") for c in raw_channels if isinstance(c, dict)} if isinstance(raw_channels, list) else set()
        for s_index, sampler in enumerate(obj.objects("samplers")):
            extras = sampler.raw("extras")
            if s_index in used or not isinstance(extras, dict) or "curve" not in extras:
                continue
            name = sampler.object("extras").string("curve")
            interpolation = sampler.string("interpolation", "LINEAR")
            if interpolation not in INTERPOLATIONS:
                sampler.fail(f"unknown interpolation {interpolation!r}", "interpolation")
            input_info = self._accessor(sampler, "input", EXPECT_KEY_TIMES)
            output_info = self._accessor(sampler, "output", EXPECT_POINTER[1])
            rows = input_info.count * (3 if interpolation == "CUBICSPLINE" else 1)
            if output_info.count != rows:
                sampler.fail(f"curve {name!r}: {output_info.count} values for {input_info.count} keys ({interpolation})", "output")
            times = self.accessors.floats(input_info.index)
            self._check_times(sampler, f"curve {name!r}", input_info, times)
            curves.append(self._curve(sampler, name, interpolation, times, self.accessors.floats(output_info.index)))
        inline = obj.object("extras").raw("curves", {})
        if not isinstance(inline, dict):
            obj.object("extras").fail("expected an object of named curves", "curves")
        holder = obj.object("extras").object("curves")
        for name in inline:
            curve = holder.object(name)
            interpolation = curve.string("interpolation", "LINEAR")
            if interpolation not in INTERPOLATIONS:
                curve.fail(f"unknown interpolation {interpolation!r}", "interpolation")
            seconds = curve.numbers("times")
            if np.abs(seconds).max(initial=0.0) > float(np.finfo(np.float32).max):
                curve.fail("a key time is too large for float32", "times")
            times = seconds.astype(np.float32)
            values = curve.numbers("values")
            if not len(times) or len(values) != len(times) * (3 if interpolation == "CUBICSPLINE" else 1):
                curve.fail(f"{len(values)} values for {len(times)} keys ({interpolation})", "values")
            if (np.diff(times) <= 0).any():
                curve.fail("key times are not strictly increasing (as float32)", "times")
            curves.append(self._curve(curve, name, interpolation, times, values))
        return curves

    def _curve(self, where: JsonObject, name: str, interpolation: str, times, values) -> PropertyTrack:
        values = np.asarray(values)
        if values.dtype == np.float64 and np.abs(values).max(initial=0.0) > float(np.finfo(np.float32).max):
            where.fail(f"curve {name!r} has a value too large for float32")
        values = values.astype(np.float32).reshape(-1, 1)
        if not np.isfinite(values).all():
            where.fail(f"curve {name!r} has a value that is not finite")
        pointer = curve_pointer(name)
        self.pointer_rest.setdefault(pointer, np.zeros(1))
        return PropertyTrack(pointer, interpolation, times, values)

    def _pointer_rest(self, ext: JsonObject, pointer: str, found: PointerTarget) -> np.ndarray:
        """The value ``pointer`` names before animation: the file's, or the schema default when the
        property is absent. The object it belongs to (material, light, camera, node, and the
        ``perspective``/``orthographic``/``spot`` part) must exist."""
        table = {"node": ("nodes", self.tables.nodes), "material": ("materials", self.tables.materials),
                 "camera": ("cameras", self.tables.cameras)}.get(found.kind)
        if table is None:  # a light
            lights = self.root.data.get("extensions", {}).get("KHR_lights_punctual", {}).get("lights", [])
            table = ("KHR_lights_punctual lights", len(lights) if isinstance(lights, list) else 0)
            holder: object = lights
        else:
            holder = self.root.data.get(table[0], [])
        if found.index >= table[1]:
            ext.fail(f"{pointer} names {table[0]}[{found.index}], which does not exist (the file has {table[1]})", "pointer")
        value: object = holder[found.index]  # type: ignore[index]
        parts = found.property.split("/")
        for depth, part in enumerate(parts):
            if not isinstance(value, dict):
                ext.fail(f"{pointer}: {'/'.join(parts[:depth])} is not an object", "pointer")
            if part not in value:
                if found.kind in ("camera", "light") and part in ("perspective", "orthographic", "spot"):
                    # the camera's projection, the light's spot cone: the pointer names what is not there
                    ext.fail(f"{pointer}: {table[0]}[{found.index}] has no {part}", "pointer")
                return np.array(found.default, np.float64)  # absent (or its extension object is): the default
            value = value[part]
        if isinstance(value, bool):
            return np.array([1.0 if value else 0.0])
        numbers = value if isinstance(value, list) else [value]
        if len(numbers) != found.width or not all(type(v) in (int, float) for v in numbers) \
                or not all(map(math.isfinite, numbers)):
            ext.fail(f"{pointer}: the file's value {value!r} is not {found.width} finite number(s)", "pointer")
        return np.array(numbers, np.float64)

    def _channel(self, c: JsonObject, anim_name: str, s_index: int, sampler: JsonObject,
                 node: int, path: str, width: int) -> Channel:
        """One channel: its sampler's key times and values, every count and order checked."""
        about = f"animation {anim_name!r}, samplers[{s_index}]"
        interpolation = sampler.string("interpolation", "LINEAR")
        if interpolation not in INTERPOLATIONS:
            raise ModelError(self.file, c.where, f"{about}: unknown interpolation {interpolation!r} "
                                                  f"(expected {', '.join(INTERPOLATIONS)})")
        input_info = self._accessor(sampler, "input", EXPECT_KEY_TIMES)
        output_info = self._accessor(sampler, "output", EXPECT_OUTPUT[path])
        keys = input_info.count
        rows = 3 * keys if interpolation == "CUBICSPLINE" else keys
        expected = rows * (width if path == "weights" else 1)
        if output_info.count != expected:
            raise ModelError(self.file, c.where, (
                f"{about}: output accessors[{output_info.index}] has {output_info.count} elements, expected "
                f"{expected} for {keys} keys of {path}" + (" (CUBICSPLINE stores 3 per key)" if rows != keys else "")
            ))
        times = self.accessors.floats(input_info.index)
        if input_info.index not in self._checked_times:  # samplers often share one input accessor
            self._check_times(c, about, input_info, times)
            self._checked_times.add(input_info.index)
        values = self.accessors.floats(output_info.index).reshape(rows, width)
        finite = np.isfinite(values).all(axis=1)
        if not finite.all():  # NaN/inf key values would poison every pose sampled near them (found by fuzzing)
            k = int(np.argmin(finite))
            raise ModelError(self.file, c.where, f"{about}: output accessors[{output_info.index}] element {k} is not "
                                                  f"finite ({', '.join(f'{v:g}' for v in values[k])})")
        return Channel(node=node, path=path, interpolation=interpolation, times=times, values=values)

    def _packed_animations(self, raw: list[dict], nodes: list[Node], meshes: list[Mesh]) -> list[Animation] | None:
        """Every animation at once, when each one is plain (a string name or none, arrays of objects for
        samplers and channels, at least one channel) and :meth:`_packed_channels` takes all their
        channels together: the numpy checks and gathers then run once for the file rather than once
        per animation, and each animation gets its slice. None otherwise (then animation by animation)."""
        if len(raw) < 2:
            return None  # one animation: the per-animation path is the same work
        names, channels, samplers, counts, sampler_counts = [], [], [], [], []
        for i, obj in enumerate(raw):
            name = obj.get("name", _MISSING)
            chans, samps = obj.get("channels"), obj.get("samplers")
            # (that every channel and sampler is an object, _packed_channels finds as it reads them)
            if type(chans) is not list or type(samps) is not list or not chans:
                return None
            if name is _MISSING:
                name = f"animation_{i}"
            elif type(name) is not str:
                return None
            names.append(name)
            channels += chans
            samplers += samps
            counts.append(len(chans))
            sampler_counts.append(len(samps))
        count = np.array(counts, dtype=np.int64)
        sampler_count = np.array(sampler_counts, dtype=np.int64)
        offsets = np.zeros(len(raw), np.int64)
        np.cumsum(sampler_count[:-1], out=offsets[1:])
        packed = self._packed_channels(channels, samplers, nodes, meshes,
                                       (np.repeat(sampler_count, count), np.repeat(offsets, count)))
        if packed is None:
            return None
        ends = np.cumsum(count)
        bounds = [0, *ends.tolist()]
        key_start = [0, *packed.key_start[ends].tolist()]  # where each animation's keys and values begin
        value_start = [0, *packed.value_start[ends].tolist()]
        animations = []
        for a, obj in enumerate(raw):
            c0, c1 = bounds[a], bounds[a + 1]
            k0, k1, v0, v1 = key_start[a], key_start[a + 1], value_start[a], value_start[a + 1]
            part = PackedChannels(packed.node[c0:c1], packed.path[c0:c1], packed.interp[c0:c1], packed.width[c0:c1],
                                  packed.key_start[c0 : c1 + 1] - k0, packed.value_start[c0 : c1 + 1] - v0,
                                  packed.times[k0:k1], packed.values[v0:v1], packed.source,
                                  packed.time_at[c0:c1], packed.value_at[c0:c1])
            extras = bounded_extras(obj.get("extras"), self.file, f"animations[{a}]")
            animations.append(Animation.from_packed(names[a], part, extras))
        return animations

    def _packed_channels(self, channels: list[dict], samplers: list[dict], node_list: list[Node],
                         meshes: list[Mesh], sampler_range: tuple[np.ndarray, np.ndarray] | None = None,
                         ) -> PackedChannels | None:
        """All channels of one animation at once, when every one is the common kind (translation,
        rotation, scale or morph weights of a node, FLOAT key times and values in plain bufferViews of
        one buffer, finite values, strictly increasing times): the fields are
        pulled out with one list pass each and checked with numpy over all channels together. None
        when anything is unusual or wrong; then the channels are read one by one, which words the error.
        ``sampler_range``: for the channels of several animations, per channel how many samplers its
        animation has and where they start in ``samplers``.
        No Channel object is made here: :class:`PackedChannels` makes them if anybody asks (views of the
        buffer, a shared input accessor giving one shared times array, as the one-by-one path gives them)."""
        n = len(channels)
        table = self.accessors.plain_float_table() if n and samplers else None
        if table is None:
            return None
        try:
            targets = list(map(_TARGET, channels))
            # path and interpolation names -> codes + 1 (0: anything else, which goes the one-by-one way)
            path = codes(list(map(_PATH, targets)), _PATH_CODES_1) - 1
            interp = codes(list(map(dict.get, samplers, repeat("interpolation"), repeat("LINEAR"))), _INTERP_CODES_1) - 1
            sampler = plain_ints(list(map(_SAMPLER, channels)))
            node = plain_ints(list(map(_NODE, targets)))
            sampler_input = plain_ints(list(map(_INPUT, samplers)))
            sampler_output = plain_ints(list(map(_OUTPUT, samplers)))
        except (KeyError, TypeError, IndexError):
            return None
        if (sampler is None or node is None or sampler_input is None or sampler_output is None
                or path.min() < 0 or interp.min() < 0):
            return None
        n_accessors, n_nodes = len(table.ok), len(node_list)
        if sampler_range is None:  # one animation: its channels name its samplers
            if sampler.min() < 0 or sampler.max() >= len(samplers):
                return None
        else:  # several animations' channels and samplers, one after another: each names its own
            limit, offset = sampler_range
            if sampler.min() < 0 or (sampler >= limit).any():
                return None
            sampler = sampler + offset
        if node.min() < 0 or node.max() >= n_nodes:
            return None
        inp, out = sampler_input[sampler], sampler_output[sampler]
        if min(inp.min(), out.min()) < 0 or max(inp.max(), out.max()) >= n_accessors:
            return None
        interp = interp[sampler]
        weights = path == _PATH_CODES["weights"]
        width = _PATH_WIDTHS[path]
        if weights.any():  # a morph weights channel is as wide as its node's mesh has targets
            for c in np.flatnonzero(weights).tolist():
                mesh = node_list[int(node[c])].mesh
                targets_count = 0 if mesh is None else len(meshes[mesh].primitives[0].targets)
                if not targets_count:
                    return None
                width[c] = targets_count
        keys = table.count[inp]
        rows = keys * np.where(interp == _CUBIC, 3, 1)
        buffer = table.buffer[inp]
        # weights are SCALAR accessors of rows * width elements, the others VECn of rows elements
        if not (table.ok[inp].all() and table.ok[out].all() and (table.components[inp] == 1).all()
                and (table.components[out] == np.where(weights, 1, width)).all()
                and (table.count[out] == rows * np.where(weights, width, 1)).all()
                and (buffer == buffer[0]).all() and (table.buffer[out] == buffer[0]).all()):
            return None
        try:
            floats = self.accessors.buffer_floats(int(buffer[0]))
        except ModelError:
            return None  # the one-by-one path meets (and reports) it in its own order
        if floats is None:
            return None
        # Every channel's keys and values gathered into two flat arrays with one index array each.
        times = _gather(floats, table.start[inp], keys)
        values = _gather(floats, table.start[out], rows * width)
        key_start = np.zeros(n + 1, np.int64)
        np.cumsum(keys, out=key_start[1:])
        steps = times[1:] > times[:-1]
        steps[key_start[1:-1] - 1] = True  # from one channel's last key to the next one's first
        if not (np.isfinite(values).all() and np.isfinite(times).all() and steps.all()):
            return None
        value_start = np.zeros(n + 1, np.int64)
        np.cumsum(rows * width, out=value_start[1:])
        return PackedChannels(node, path, interp, width,
                              key_start, value_start, times, values, floats, table.start[inp], table.start[out])

    def _plain_channel(self, c: dict, samplers: list[dict], n_nodes: int, n_accessors: int) -> Channel | None:
        """The common channel (a translation, rotation or scale of a node, LINEAR/STEP/CUBICSPLINE over
        FLOAT accessors) read with plain dict reads and the same checks as :meth:`_channel`; None for
        anything else or anything wrong, which the full path then reads and reports."""
        s_index = c.get("sampler")
        target = c.get("target")
        if type(s_index) is not int or not 0 <= s_index < len(samplers) or type(target) is not dict:
            return None
        node, path = target.get("node"), target.get("path")
        if type(node) is not int or not 0 <= node < n_nodes or type(path) is not str or path not in _PATH_WIDTH:
            return None
        sampler = samplers[s_index]
        interpolation = sampler.get("interpolation", "LINEAR")
        input_index, output_index = sampler.get("input"), sampler.get("output")
        if (type(interpolation) is not str or interpolation not in INTERPOLATIONS
                or type(input_index) is not int or not 0 <= input_index < n_accessors
                or type(output_index) is not int or not 0 <= output_index < n_accessors):
            return None
        accessors = self.accessors
        input_info, output_info = accessors.info(input_index), accessors.info(output_index)
        keys = input_info.count
        if (input_info.component_type != FLOAT or input_info.type != "SCALAR" or input_info.normalized
                or output_info.component_type != FLOAT or output_info.type != _PATH_TYPE[path]
                or output_info.count != (3 * keys if interpolation == "CUBICSPLINE" else keys)):
            return None
        times = accessors.floats(input_index)
        if input_index not in self._checked_times:
            if not (np.isfinite(times[0]) and np.isfinite(times[-1]) and (times[1:] > times[:-1]).all()):
                return None  # not finite or not increasing: the full path says which key
            self._checked_times.add(input_index)
        values = accessors.floats(output_index)
        if not np.isfinite(values).all():
            return None  # NaN/inf key values: the full path says which element
        return Channel(node=node, path=path, interpolation=interpolation, times=times, values=values)

    def _check_times(self, c: JsonObject, about: str, info: AccessorInfo, times: np.ndarray) -> None:
        finite = np.isfinite(times)
        if not finite.all():
            k = int(np.argmin(finite))
            raise ModelError(self.file, c.where, f"{about}: input accessors[{info.index}] key {k} time is {times[k]}")
        steps = np.diff(times)
        if steps.size and not (steps > 0).all():
            k = int(np.argmin(steps > 0)) + 1
            raise ModelError(self.file, c.where, (
                f"{about}: key times of input accessors[{info.index}] are not strictly increasing: "
                f"key {k} (t={float(times[k])}) follows key {k - 1} (t={float(times[k - 1])})"
            ))

    # -- materials and images -------------------------------------------------------------------
    def _materials(self) -> list[Material]:
        textures = self.root.objects("textures")
        samplers = len(self.root.array("samplers", []))
        for texture in textures:
            texture.index("sampler", "samplers", samplers, None)
        materials = []
        for i, obj in enumerate(self.root.objects("materials")):
            pbr = obj.object("pbrMetallicRoughness")
            material = Material(
                name=obj.string("name", f"material_{i}"),
                base_color_factor=pbr.numbers("baseColorFactor", np.ones(4), length=4),
                metallic_factor=float(pbr.number("metallicFactor", 1.0)),
                roughness_factor=float(pbr.number("roughnessFactor", 1.0)),
                double_sided=obj.boolean("doubleSided", False),
            )
            if pbr.has("baseColorTexture"):
                info = pbr.object("baseColorTexture")
                texture = textures[info.index("index", "textures", len(textures))]
                material.base_color_texture = self._texture_image(texture)
                material.base_color_texcoord = info.int("texCoord", 0)
                material.base_color_transform = _texture_transform(info)
                if material.base_color_transform is not None and material.base_color_transform.texcoord is not None:
                    material.base_color_texcoord = material.base_color_transform.texcoord  # the override wins
            self._material_extensions(obj, material)
            materials.append(material)
        return materials

    def _material_extensions(self, obj: JsonObject, material: Material) -> None:
        """Emissive, alpha, KHR_materials_unlit and KHR_materials_emissive_strength of one material;
        the appearance extensions it uses that skeletal does not draw go to ``material.fallbacks``."""
        material.emissive_factor = obj.numbers("emissiveFactor", np.zeros(3), length=3)
        material.alpha_mode = obj.string("alphaMode", "OPAQUE")
        if material.alpha_mode not in ("OPAQUE", "MASK", "BLEND"):
            obj.fail(f"unknown alphaMode {material.alpha_mode!r} (expected OPAQUE, MASK or BLEND)", "alphaMode")
        material.alpha_cutoff = obj.number("alphaCutoff", 0.5)
        extensions = obj.object("extensions")
        material.unlit = extensions.has(KHR_MATERIALS_UNLIT)
        if extensions.has(KHR_MATERIALS_EMISSIVE_STRENGTH):
            strength = extensions.object(KHR_MATERIALS_EMISSIVE_STRENGTH).number("emissiveStrength", 1.0)
            if strength < 0:
                extensions.fail(f"emissiveStrength {strength} is negative", f"{KHR_MATERIALS_EMISSIVE_STRENGTH}.emissiveStrength")
            material.emissive_strength = strength
        material.fallbacks = [name for name in extensions.data if name in APPEARANCE_FALLBACKS]

    def _texture_image(self, texture: JsonObject) -> int | None:
        """The image a texture shows: its ``source``, else the ``source`` of an image-format extension
        (KHR_texture_basisu, EXT_texture_webp, ...); None when it has neither."""
        if texture.has("source"):
            return texture.index("source", "images", self.tables.images)
        extensions = texture.object("extensions")
        for name in extensions.data:
            ext = extensions.object(name)
            if ext.has("source"):
                return ext.index("source", "images", self.tables.images)
        return None

    def _images(self) -> list[Image]:
        images = []
        for i, obj in enumerate(self.root.objects("images")):
            mime = obj.string("mimeType", None)
            data: bytes | memoryview | None = None
            if obj.has("bufferView"):  # a view of the file's bytes: Image copies it when first read
                data = self.binary.view(obj.index("bufferView", "bufferViews", len(self.binary.views))).data
            elif obj.has("uri"):
                uri = obj.string("uri")
                try:
                    data, uri_mime = read_uri(uri, self.uri_root)
                    mime = mime or uri_mime
                except UriError as exc:
                    # Images are optional for animation: keep going without this one.
                    warnings.warn(f"{os.path.basename(self.file)}: {obj.where}.uri: {exc}; image data left empty",
                                  stacklevel=3)
            images.append(Image(name=obj.string("name", f"image_{i}"), data=data, mime_type=mime or _sniff_mime(data)))
        return images


def _gather(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``data[starts[i] : starts[i] + lengths[i]]`` of every span, one after another, as a new array:
    one copy when the spans follow each other in ``data`` (channels written in order), else a gather."""
    if len(starts) and (starts[1:] == starts[:-1] + lengths[:-1]).all():
        return data[int(starts[0]) : int(starts[-1] + lengths[-1])].copy()
    return data[_spans(starts, lengths)]


def _spans(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The indices ``starts[i] .. starts[i] + lengths[i] - 1`` of every span, one after another."""
    ends = np.cumsum(lengths)
    return np.repeat(starts - (ends - lengths), lengths) + np.arange(int(ends[-1]) if len(ends) else 0)


def _texture_transform(info: JsonObject) -> TextureTransform | None:
    """The KHR_texture_transform of a texture reference (``baseColorTexture``...), None without one."""
    ext = info.extension(KHR_TEXTURE_TRANSFORM)
    if ext is None:
        return None
    texcoord = ext.int("texCoord", None)
    return TextureTransform(offset=ext.numbers("offset", np.zeros(2), length=2),
                            rotation=float(ext.number("rotation", 0.0)),
                            scale=ext.numbers("scale", np.ones(2), length=2), texcoord=texcoord)


def _extras(obj: JsonObject) -> dict:
    """An object's ``extras`` when it is a JSON object (the spec allows any value there; anything
    else is application-specific data that skeletal does not use, and is dropped)."""
    return bounded_extras(obj.raw("extras"), obj.file, obj.where)


#: JSON objects and arrays inside one ``extras`` may nest this deep; deeper ones are dropped (with a
#: warning) at load, so that no writer, printer or page later recurses through them.
MAX_EXTRAS_DEPTH = 64


def bounded_extras(extras: object, file: str, where: str) -> dict:
    """``extras`` as a dict when it is a JSON object nested at most :data:`MAX_EXTRAS_DEPTH` deep; {} for
    anything else (the spec allows any value; skeletal keeps objects), with a warning when too deep."""
    if not isinstance(extras, dict):
        return {}
    if extras:
        stack = [(extras, 1)]
        while stack:
            value, depth = stack.pop()
            if depth > MAX_EXTRAS_DEPTH:
                warnings.warn(f"{os.path.basename(file)}: {where}.extras: nested deeper than {MAX_EXTRAS_DEPTH} "
                              "levels; dropped", stacklevel=2)
                return {}
            children = value.values() if isinstance(value, dict) else value
            stack.extend((v, depth + 1) for v in children if isinstance(v, (dict, list)) and v)
    return dict(extras)


def _attribute_expect(name: str) -> Expect:
    """What a vertex attribute's accessor may be, by its glTF name."""
    if name == "POSITION":
        return EXPECT_POSITION
    if name == "NORMAL":
        return EXPECT_NORMAL
    if name == "TANGENT":
        return EXPECT_TANGENT
    if name.startswith("TEXCOORD_"):
        return EXPECT_TEXCOORD
    if name.startswith("COLOR_"):
        return EXPECT_COLOR
    if name.startswith("JOINTS_"):
        return EXPECT_JOINTS
    if name.startswith("WEIGHTS_"):
        return EXPECT_WEIGHTS
    return EXPECT_CUSTOM  # application-specific (_NAME) attributes


#: The common attribute names' expectations, looked up without :func:`_attribute_expect`'s tests.
_ATTRIBUTE_EXPECTS = {"POSITION": EXPECT_POSITION, "NORMAL": EXPECT_NORMAL, "TANGENT": EXPECT_TANGENT,
                      **{f"TEXCOORD_{n}": EXPECT_TEXCOORD for n in range(8)},
                      **{f"COLOR_{n}": EXPECT_COLOR for n in range(4)},
                      **{f"JOINTS_{n}": EXPECT_JOINTS for n in range(4)},
                      **{f"WEIGHTS_{n}": EXPECT_WEIGHTS for n in range(4)}}

_MAGIC_MIME = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"),
               (b"\xabKTX 20\xbb", "image/ktx2"))


def _sniff_mime(data: bytes | memoryview | None) -> str | None:
    """The image type told by the data's first bytes, when the file did not say it."""
    if not data:
        return None
    data = bytes(data[:16])
    for magic, mime in _MAGIC_MIME:
        if data.startswith(magic):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None
