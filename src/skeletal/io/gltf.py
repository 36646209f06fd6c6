"""glTF 2.0 reader: a ``.gltf`` or ``.glb`` file -> :class:`skeletal.document.Document`.

The pipeline of this module, one helper module per job:

* :mod:`~skeletal.io.glb`: file bytes -> JSON document + GLB BIN chunk (one file read, no copies);
* :mod:`~skeletal.io.jsonobj`: typed JSON access whose errors name the object (``nodes[3].mesh``);
* :mod:`~skeletal.io.uris`: buffers and images by data URI or by file inside the allowed folder;
* :mod:`~skeletal.io.buffers`: buffers and bufferViews as checked byte ranges (+ EXT_meshopt_compression);
* :mod:`~skeletal.io.accessors`: accessors -> numpy arrays (zero-copy views where the layout allows);
* :mod:`~skeletal.io.draco`: KHR_draco_mesh_compression primitives;
* :mod:`~skeletal.io.gltf_checks`: what each use of an accessor may be; bounded ``extras``;
* :mod:`~skeletal.io.gltf_fast`: the fast twins of the node and animation readers (common cases at once);
* :mod:`~skeletal.io.gltf_animation`: the one-by-one animation readers (channels, pointers, curves);
* :mod:`~skeletal.io.gltf_appearance`: materials, textures and images;
* this module: nodes, meshes, skins and scenes, and the parts above -> the Document.

Conventions (see :mod:`skeletal.document`): quaternions xyzw; matrices row-major (glTF's column-major
transposed); vertex attributes float32 with normalised integers decoded per spec; joints and indices
uint32. Every defect of the input raises :class:`~skeletal.errors.ModelError` naming the file and the
object; a required extension that is unknown, or whose decoder package is missing, raises
:class:`~skeletal.errors.UnsupportedExtensionError`.
"""

from __future__ import annotations

import gc
import os
import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from skeletal.document import (
    Document,
    Mesh,
    MorphTarget,
    Node,
    Primitive,
    Skin,
)
from skeletal.errors import ModelError, UnsupportedExtensionError
from skeletal.io import draco as draco_ext
from skeletal.io import meshopt as meshopt_ext
from skeletal.io.accessors import (
    AccessorInfo,
    Accessors,
    decode_float32,
)
from skeletal.io.buffers import BinaryData
from skeletal.io.files import read_regular
from skeletal.io.glb import GLTF1_HINT, parse_container
from skeletal.io.jsonobj import JsonObject
from skeletal.io.gltf_animation import KHR_ANIMATION_POINTER, _AnimationReader
from skeletal.io.gltf_appearance import (  # noqa: F401  (the names below stay importable from this module)
    APPEARANCE_FALLBACKS,
    _MAGIC_MIME,
    KHR_MATERIALS_EMISSIVE_STRENGTH,
    KHR_MATERIALS_UNLIT,
    KHR_TEXTURE_TRANSFORM,
    _AppearanceReader,
    _sniff_mime,
    _texture_transform,
)
from skeletal.io.gltf_checks import (  # noqa: F401  (the names below stay importable from this module)
    _ALL_INTS,
    _ATTRIBUTE_EXPECTS,
    _PATH_WIDTH,
    _SIGNED_INTS,
    _UNSIGNED_INTS,
    EXPECT_COLOR,
    EXPECT_CUSTOM,
    EXPECT_INDICES,
    EXPECT_INVERSE_BIND,
    EXPECT_JOINTS,
    EXPECT_KEY_TIMES,
    EXPECT_NORMAL,
    EXPECT_OUTPUT,
    EXPECT_POINTER,
    EXPECT_POSITION,
    EXPECT_TANGENT,
    EXPECT_TARGET_DIRECTION,
    EXPECT_TARGET_POSITION,
    EXPECT_TEXCOORD,
    EXPECT_WEIGHTS,
    INTERPOLATIONS,
    MAX_EXTRAS_DEPTH,
    Expect,
    _attribute_expect,
    _extras,
    _Tables,
    bounded_extras,
)
from skeletal.io.gltf_fast import (  # noqa: F401  (the names below stay importable from this module)
    _CUBIC,
    _INPUT,
    _INTERP_CODES,
    _INTERP_CODES_1,
    _INTERP_NAMES,
    _LIST_TYPES,
    _MISSING,
    _NAME_TYPES,
    _NO_CHILDREN,
    _NODE,
    _NODE_TRS,
    _NUMBER_TYPES,
    _OUTPUT,
    _PATH,
    _PATH_CODES,
    _PATH_CODES_1,
    _PATH_TYPE,
    _PATH_WIDTHS,
    _PLAIN_NODE_KEYS,
    _SAMPLER,
    _TARGET,
    _FastReader,
    _gather,
    _spans,
)
from skeletal.quat import decompose_trs

__all__ = ["read_gltf", "SUPPORTED_EXTENSIONS", "gc_paused"]

KHR_MESH_QUANTIZATION = "KHR_mesh_quantization"
KHR_NODE_VISIBILITY = "KHR_node_visibility"
#: Extensions this reader implements; any other in ``extensionsRequired`` is refused, except the
#: appearance-only ones of :data:`APPEARANCE_FALLBACKS`.
SUPPORTED_EXTENSIONS = (KHR_MESH_QUANTIZATION, draco_ext.EXTENSION, meshopt_ext.EXTENSION, KHR_TEXTURE_TRANSFORM,
                        KHR_MATERIALS_UNLIT, KHR_MATERIALS_EMISSIVE_STRENGTH, KHR_ANIMATION_POINTER, KHR_NODE_VISIBILITY)

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
class _GltfReader(_AnimationReader, _AppearanceReader):
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
