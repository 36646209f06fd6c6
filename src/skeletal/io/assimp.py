# Over 600 lines: one conversion of Assimp's scene into a Document (nodes, FBX pivot helpers, meshes, skins,
# animations), in the order the Document needs them.
"""FBX, Collada and the other formats Assimp reads -> :class:`skeletal.document.Document`.

The Assimp scene becomes the same Document a glTF file gives, so the rig, clips, skins, bake, render,
retargeting and export work on it unchanged:

* nodes: the ``aiNode`` tree, depth first (file index = that order), rest TRS decomposed from
  ``mTransformation`` (row-major, like skeletal's matrices);
* meshes: the ``aiMesh`` list of each node becomes one :class:`Mesh` whose primitives are those
  meshes (triangles, after Assimp's Triangulate, JoinIdenticalVertices and SortByPType steps; point and
  line meshes are dropped); UVs flipped to glTF's top-left origin, tangents given glTF's w;
* skins: each mesh node's bones become one :class:`Skin`, inverse bind = ``mOffsetMatrix`` (mesh
  space -> bone space, which includes the mesh node's bind transform, so a mesh whose node transform
  is not the bind pose skins correctly, and the mesh node's own transform is ignored as glTF does). A
  bone with no node of its name gets a static node under the mesh node. *All* influences are kept
  (the vertex's influence count rounded up to a multiple of 4); meshes of one node whose bones
  disagree on a bind matrix go on separate child nodes;
* animations: ``aiNodeAnim`` position/rotation/scaling keys, each channel with its own key times,
  in seconds = ticks / ``mTicksPerSecond`` (25 when the file says 0, Assimp's default); LINEAR
  (Assimp's vector lerp and quaternion slerp); keys whose time does not increase are dropped;
  morph-weight keys (``aiMeshMorphAnim``) become ``weights`` channels;
* FBX pivots: Assimp splits a node with pivots, offsets or pre/post rotations into a chain of
  ``<name>_$AssimpFbx$_<Part>`` helper nodes. Each chain is collapsed into its real node, so names
  and the joint hierarchy are the authoring tool's: the rest pose is the chain's product; keys that
  Assimp puts on the real node already hold the whole local transform (Assimp bakes the chain into
  them; applying the helpers again would count a pre-rotation twice), and keys on the helpers
  themselves are multiplied out at the union of their key times (exact at every key, and between keys
  for chains without rotation/scaling pivots);
* units: FBX stores its unit in ``UnitScaleFactor`` (centimetres per unit; 1 = cm). skeletal works in
  metres like glTF, so translations, vertices and bind matrices are scaled by
  ``UnitScaleFactor / 100`` (``unit_scale=None`` keeps the file's units). FBX's up axis is turned to
  +Y (a rotation on the root node). Collada's ``<unit>`` and up axis Assimp applies itself.

Safety: the model's bytes are pre-validated in Python (:mod:`skeletal.io.fbx_check`: binary FBX
record sizes, offsets, array lengths and nesting; ASCII FBX and Collada array counts against the file
size) before Assimp sees them, and Assimp reads files only through a sandbox limited to the model's
folder (:mod:`skeletal.io.assimp_ffi`). Everything Assimp returns is checked before use (vertex and
joint indices, counts, finite key times). Every defect raises :class:`~skeletal.errors.ModelError`
naming the file and the Assimp object (``meshes[2] 'body'``, ``animations[0].channels[5] 'hips'``).

>>> doc = read_assimp("Soldier.fbx")                 # doctest: +SKIP
"""

from __future__ import annotations

import os
import warnings

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from skeletal.document import Animation, Channel, Document, Material, Mesh, MorphTarget, Node, Primitive, Skin
from skeletal.errors import ModelError
from skeletal.io import assimp_ffi, fbx_check
from skeletal.io.formats import ASSIMP_SUFFIXES
from skeletal.io.assimp_child import Limits, read_isolated
from skeletal.io.files import read_regular
from skeletal.quat import compose_trs, decompose_trs

__all__ = ["read_assimp", "Limits", "SUFFIXES", "HELPER_TAG", "DEFAULT_TICKS_PER_SECOND"]

#: File suffixes :func:`skeletal.load` sends here (formats Assimp reads that can carry bones or
#: animation, plus common static ones).
SUFFIXES = ASSIMP_SUFFIXES
#: Marker of Assimp's FBX pivot helper nodes.
HELPER_TAG = "_$AssimpFbx$_"
#: Assimp's documented ticks per second when a file gives none.
DEFAULT_TICKS_PER_SECOND = 25.0
#: Largest influence count per vertex accepted (real files have 4-8).
MAX_INFLUENCES = 64

_AI_FLOAT, _AI_DOUBLE, _AI_INT32, _AI_BOOL = 3, 4, 1, 0
_TRIANGLE = 0x4


def read_assimp(path: str | os.PathLike, *, unit_scale: str | None = "metres", isolate: bool = True,
                limits: Limits | None = None) -> Document:
    """Read any format the installed Assimp reads into a :class:`Document`.

    ``unit_scale="metres"`` converts FBX files to metres by their ``UnitScaleFactor``; ``None`` keeps
    the file's units. ``isolate`` (the default) runs Assimp in a child process under ``limits``
    (:class:`skeletal.io.assimp_child.Limits`: memory, CPU time, wall-clock timeout), so that a file
    that crashes, exhausts or hangs the C library gives a :class:`ModelError`;
    ``isolate=False`` runs it in this process (faster by the child's start, for trusted files only).

    >>> doc = read_assimp("Soldier.fbx", limits=Limits(timeout=30))   # doctest: +SKIP
    """
    file = os.fspath(path)
    try:
        data = read_regular(file)
    except OSError as exc:
        raise ModelError(file, None, f"cannot read the file: {exc.strerror or exc}") from None
    if isolate:
        return read_isolated(file, data, unit_scale, limits)
    return _read_in_process(file, data, unit_scale)


def _read_in_process(file: str, data: bytes, unit_scale: str | None) -> Document:
    """Pre-check, import and convert in this process (the isolated child's work too)."""
    fbx_check.check(data, file)
    scene = assimp_ffi.import_scene(file, data, file)
    try:
        return _Converter(scene, file, unit_scale).document()
    finally:
        scene.release()


def _warm_kernels() -> None:
    """Compile (or load from numba's cache) the kernels the converter calls, in this process."""
    _gather_faces(np.zeros(0, np.uint32), np.zeros(0, np.uint64), np.uint32(0), np.zeros(0, np.uint32))


# ---------------------------------------------------------------------------------------------------
# Raw memory reads (face index lists live in one allocation per face)
# ---------------------------------------------------------------------------------------------------
@intrinsic
def _load_u32(typingctx, address):
    sig = types.uint32(types.uint64)

    def codegen(context, builder, signature, args):
        pointer = builder.inttoptr(args[0], ir.IntType(32).as_pointer())
        return builder.load(pointer)

    return sig, codegen


@njit(cache=True)
def _gather_faces(counts, pointers, vertex_count, out):
    """Triangle indices of faces whose ``counts`` are 3; returns the number written or -(face+1) of
    the first face with an index past ``vertex_count``."""
    n = 0
    for f in range(counts.shape[0]):
        if counts[f] != 3:
            continue
        for k in range(3):
            v = _load_u32(pointers[f] + np.uint64(4 * k))
            if v >= vertex_count:
                return -(f + 1)
            out[n] = v
            n += 1
    return n


class _Converter:
    def __init__(self, imported: assimp_ffi.ImportedScene, file: str, unit_scale: str | None):
        self.ffi = imported.library.ffi
        self.scene = imported.scene
        self.file = file
        self.unit_scale = unit_scale
        self.nodes: list[Node] = []
        self.node_ptrs: list = []
        self.by_name: dict[str, int] = {}
        self.meshes: list[Mesh] = []
        self.skins: list[Skin] = []
        self._morph_defaults: dict[int, np.ndarray] = {}  # aiMesh index -> default morph weights
        self.metadata = self._metadata(self.scene.mMetaData)
        self.vec_dtype = np.dtype({"names": ["t", "v"], "formats": ["<f8", ("<f4", 3)], "offsets": [0, 8],
                                   "itemsize": self.ffi.sizeof("struct aiVectorKey")})
        self.quat_dtype = np.dtype({"names": ["t", "v"], "formats": ["<f8", ("<f4", 4)], "offsets": [0, 8],
                                    "itemsize": self.ffi.sizeof("struct aiQuatKey")})

    def fail(self, where: str, detail: str):
        raise ModelError(self.file, where, detail)

    # -- helpers --------------------------------------------------------------------------------
    def _string(self, s) -> str:
        length = int(s.length)
        if length > 1023:
            return ""
        return bytes(self.ffi.buffer(s.data, length)).decode("utf-8", "replace")

    def _array(self, pointer, count: int, dtype, width: int = 1) -> np.ndarray:
        if pointer == self.ffi.NULL or count == 0:
            return np.zeros((count, width) if width > 1 else count, dtype=dtype)
        nbytes = count * width * np.dtype(dtype).itemsize
        out = np.frombuffer(self.ffi.buffer(pointer, nbytes), dtype=dtype).copy()
        return out.reshape(count, width) if width > 1 else out

    def _matrix(self, m) -> np.ndarray:
        return np.frombuffer(self.ffi.buffer(m.m, 64), dtype=np.float32).astype(np.float64).reshape(4, 4)

    def _metadata(self, md) -> dict:
        out = {}
        if md == self.ffi.NULL:
            return out
        for i in range(min(int(md.mNumProperties), 4096)):
            key = self._string(md.mKeys[i])
            entry = md.mValues[i]
            if entry.mData == self.ffi.NULL:
                continue
            kind = int(entry.mType)
            if kind == _AI_FLOAT:
                out[key] = float(self.ffi.cast("float *", entry.mData)[0])
            elif kind == _AI_DOUBLE:
                out[key] = float(self.ffi.cast("double *", entry.mData)[0])
            elif kind == _AI_INT32:
                out[key] = int(self.ffi.cast("int32_t *", entry.mData)[0])
            elif kind == _AI_BOOL:
                out[key] = bool(self.ffi.cast("_Bool *", entry.mData)[0])
        return out

    # -- top level ------------------------------------------------------------------------------
    def document(self) -> Document:
        if self.scene.mRootNode == self.ffi.NULL:
            self.fail("scene", "has no root node")
        self._nodes()
        materials = self._materials()
        self._meshes()
        animations = self._animations()
        self._collapse_helpers(animations)
        scale = self._unit_scale()
        if scale != 1.0:
            self._apply_scale(scale, animations)
        self._apply_axes()
        roots = self._skinned_meshes_to_roots()
        fmt = self.metadata.get("SourceAsset_Format")
        return Document(
            path=self.file, nodes=self.nodes, meshes=self.meshes, skins=self.skins, animations=animations,
            scenes=[roots], scene=0, materials=materials,
            asset_info={"generator": f"Assimp {'.'.join(map(str, assimp_ffi.library().version))}",
                        "version": "2.0", "unit_scale": scale, **({"source_format": fmt} if fmt else {})},
        )

    # -- nodes ----------------------------------------------------------------------------------
    def _nodes(self) -> None:
        stack = [(self.scene.mRootNode, -1, 0)]
        while stack:
            ptr, parent, depth = stack.pop()
            if depth > fbx_check.MAX_DEPTH:
                self.fail("nodes", f"the node hierarchy is deeper than {fbx_check.MAX_DEPTH} levels")
            index = len(self.nodes)
            name = self._string(ptr.mName)
            matrix = self._matrix(ptr.mTransformation)
            if not np.all(np.isfinite(matrix)):
                self.fail(f"nodes[{index}] {name!r}", "transform has non-finite values")
            node = Node(name=name, parent=parent, matrix=matrix)
            self.nodes.append(node)
            self.node_ptrs.append(ptr)
            self.by_name.setdefault(name, index)
            if parent >= 0:
                self.nodes[parent].children.append(index)
            count = int(ptr.mNumChildren)
            for c in reversed(range(count)):
                child = ptr.mChildren[c]
                if child == self.ffi.NULL:
                    self.fail(f"nodes[{index}] {name!r}", f"child {c} is missing")
                stack.append((child, index, depth + 1))
        t, q, s = decompose_trs(np.stack([node.matrix for node in self.nodes]))  # one batch for all nodes
        for i, node in enumerate(self.nodes):
            node.translation, node.rotation, node.scale = t[i], q[i], s[i]

    def _add_node(self, name: str, parent: int, matrix: np.ndarray) -> int:
        index = len(self.nodes)
        node = Node(name=name, parent=parent, matrix=matrix)
        node.translation, node.rotation, node.scale = decompose_trs(matrix)
        self.nodes.append(node)
        self.node_ptrs.append(None)
        self.by_name.setdefault(name, index)
        if parent >= 0:
            self.nodes[parent].children.append(index)
        return index

    # -- materials ------------------------------------------------------------------------------
    def _materials(self) -> list[Material]:
        materials = []
        color = self.ffi.new("struct aiColor4D *")
        name = self.ffi.new("struct aiString *")
        lib = assimp_ffi.library().lib
        for i in range(int(self.scene.mNumMaterials)):
            mat = self.scene.mMaterials[i]
            material = Material(name=f"material_{i}")
            if lib.aiGetMaterialString(mat, b"?mat.name", 0, 0, name) == 0:
                material.name = self._string(name[0]) or material.name
            for key in (b"$clr.base", b"$clr.diffuse"):
                if lib.aiGetMaterialColor(mat, key, 0, 0, color) == 0:
                    material.base_color_factor = np.array([color.r, color.g, color.b, color.a], dtype=np.float64)
                    break
            material.metallic_factor = 0.0  # Assimp's legacy materials are not metals
            materials.append(material)
        return materials

    # -- meshes and skins -----------------------------------------------------------------------
    def _meshes(self) -> None:
        count = int(self.scene.mNumMeshes)
        cache: dict[int, tuple[Primitive, list[str], np.ndarray]] = {}
        for node_index in range(len(self.nodes)):
            ptr = self.node_ptrs[node_index]
            if ptr is None or int(ptr.mNumMeshes) == 0:
                continue
            ids = self._array(ptr.mMeshes, int(ptr.mNumMeshes), np.uint32)
            groups: list[dict] = []  # {"bones": {name: offset}, "prims": [(prim, bone names)]}
            for m in ids.tolist():
                if m >= count:
                    self.fail(f"nodes[{node_index}] {self.nodes[node_index].name!r}", f"mesh {m} past the {count} meshes")
                if m not in cache:
                    cache[m] = self._primitive(m)
                prim, bone_names, offsets = cache[m]
                if prim is None:
                    continue
                group = self._group_for(groups, bone_names, offsets)
                group["prims"].append((m, prim, bone_names))
            for g, group in enumerate(groups):
                target = node_index
                if g > 0:  # meshes that cannot share a skin with the first group: own child node
                    target = self._add_node(f"{self.nodes[node_index].name}_mesh{g}", node_index, np.eye(4))
                self._place(target, group)

    def _group_for(self, groups: list[dict], bone_names: list[str], offsets: np.ndarray) -> dict:
        skinned = bool(bone_names)
        for group in groups:
            if group["skinned"] != skinned:
                continue
            if not skinned:
                return group
            if all(np.allclose(group["bones"][n], offsets[b], rtol=1e-5, atol=1e-6)
                   for b, n in enumerate(bone_names) if n in group["bones"]):
                group["bones"].update({n: offsets[b] for b, n in enumerate(bone_names)})
                return group
        group = {"skinned": skinned, "bones": {n: offsets[b] for b, n in enumerate(bone_names)}, "prims": []}
        groups.append(group)
        return group

    def _place(self, node_index: int, group: dict) -> None:
        prims = []
        skin_index = None
        if group["skinned"]:
            names = list(group["bones"])
            slot = {n: j for j, n in enumerate(names)}
            joints = np.empty(len(names), dtype=np.int64)
            inverse_bind = np.empty((len(names), 4, 4))
            for j, n in enumerate(names):
                inverse_bind[j] = group["bones"][n]
                node = self.by_name.get(n)
                if node is None:
                    # A bone that is not a node: a static node at its bind pose under the mesh's node
                    # (its palette entry is then the mesh node's world matrix: the vertices stay put).
                    node = self._add_node(n, node_index, np.linalg.inv(group["bones"][n]))
                joints[j] = node
            self.skins.append(Skin(name=self.nodes[node_index].name or f"skin_{len(self.skins)}",
                                   joints=joints, inverse_bind=inverse_bind))
            skin_index = len(self.skins) - 1
            for _m, prim, bone_names in group["prims"]:
                if prim.joints is not None:
                    remap = np.array([slot[n] for n in bone_names], dtype=np.uint32)
                    prim = Primitive(**{**prim.__dict__, "joints": remap[prim.joints]})
                prims.append(prim)
        else:
            prims = [prim for _m, prim, _b in group["prims"]]
        names = [self._string(self.scene.mMeshes[m].mName) for m, _p, _b in group["prims"]]
        self.meshes.append(Mesh(name=names[0] or self.nodes[node_index].name, primitives=prims))
        node = self.nodes[node_index]
        node.mesh = len(self.meshes) - 1
        node.skin = skin_index
        n_targets = {len(p.targets) for p in prims}
        if len(n_targets) > 1:
            self.fail(f"nodes[{node_index}] {node.name!r}", f"its meshes have different morph target counts {sorted(n_targets)}")
        if prims and prims[0].targets:
            self.meshes[-1].weights = self._morph_defaults.get(group["prims"][0][0])

    def _primitive(self, m: int):
        """One aiMesh -> (Primitive or None when it has no triangles, bone names, offsets (B, 4, 4))."""
        mesh = self.scene.mMeshes[m]
        name = self._string(mesh.mName)
        where = f"meshes[{m}] {name!r}"
        if not int(mesh.mPrimitiveTypes) & _TRIANGLE:
            return None, [], np.zeros((0, 4, 4))
        v = int(mesh.mNumVertices)
        if v == 0 or mesh.mVertices == self.ffi.NULL:
            self.fail(where, "has no vertices")
        positions = self._array(mesh.mVertices, v, np.float32, 3)
        prim = Primitive(positions=positions)
        if mesh.mNormals != self.ffi.NULL:
            prim.normals = self._array(mesh.mNormals, v, np.float32, 3)
        if mesh.mTangents != self.ffi.NULL and mesh.mBitangents != self.ffi.NULL and prim.normals is not None:
            t = self._array(mesh.mTangents, v, np.float32, 3)
            b = self._array(mesh.mBitangents, v, np.float32, 3)
            w = np.where(np.einsum("ij,ij->i", np.cross(prim.normals, t), b) < 0, -1.0, 1.0).astype(np.float32)
            prim.tangents = np.concatenate([t, w[:, None]], axis=1)
        for k in range(8):
            if mesh.mTextureCoords[k] == self.ffi.NULL:
                continue
            uv = self._array(mesh.mTextureCoords[k], v, np.float32, 3)[:, :2].copy()
            uv[:, 1] = 1.0 - uv[:, 1]  # Assimp's origin is bottom-left, glTF's top-left
            prim.attributes[f"TEXCOORD_{len([a for a in prim.attributes if a.startswith('TEXCOORD_')])}"] = uv
        for k in range(8):
            if mesh.mColors[k] != self.ffi.NULL:
                prim.attributes[f"COLOR_{k}"] = self._array(mesh.mColors[k], v, np.float32, 4)
        for array, label in ((positions, "vertex positions"), (prim.normals, "normals")):
            if array is not None and not np.all(np.isfinite(array)):
                self.fail(where, f"{label} have non-finite values")
        prim.indices = self._faces(mesh, v, where)
        prim.material = int(mesh.mMaterialIndex) if int(mesh.mMaterialIndex) < int(self.scene.mNumMaterials) else None
        bone_names, offsets = self._bones(mesh, v, prim, where)
        prim.targets = self._targets(mesh, m, positions, prim.normals, where)
        return prim, bone_names, offsets

    def _faces(self, mesh, v: int, where: str) -> np.ndarray:
        f = int(mesh.mNumFaces)
        if f == 0 or mesh.mFaces == self.ffi.NULL:
            return np.zeros(0, np.uint32)
        raw = np.frombuffer(self.ffi.buffer(mesh.mFaces, f * self.ffi.sizeof("struct aiFace")), dtype=np.uint8)
        stride = self.ffi.sizeof("struct aiFace")
        pointer_offset = self.ffi.offsetof("struct aiFace", "mIndices")
        records = raw.reshape(f, stride)
        counts = records[:, :4].copy().view(np.uint32).reshape(f)
        pointers = records[:, pointer_offset:pointer_offset + 8].copy().view(np.uint64).reshape(f)
        if np.any(pointers[counts > 0] == 0):
            self.fail(where, "a face has no index list")
        out = np.empty(3 * int(np.count_nonzero(counts == 3)), np.uint32)
        n = _gather_faces(counts, pointers, np.uint32(v), out)
        if n < 0:
            self.fail(f"{where}.faces[{-n - 1}]", f"has a vertex index past the mesh's {v} vertices")
        return out[:n]

    def _bones(self, mesh, v: int, prim: Primitive, where: str):
        count = int(mesh.mNumBones)
        if count == 0:
            return [], np.zeros((0, 4, 4))
        names, offsets, vids, bids, weights = [], np.empty((count, 4, 4)), [], [], []
        vw = np.dtype([("v", "<u4"), ("w", "<f4")])
        for b in range(count):
            bone = mesh.mBones[b]
            if bone == self.ffi.NULL:
                self.fail(where, f"bone {b} is missing")
            name = self._string(bone.mName)
            offset = self._matrix(bone.mOffsetMatrix)
            if not np.all(np.isfinite(offset)) or not np.allclose(offset[3], (0, 0, 0, 1), atol=1e-4):
                self.fail(f"{where}.bones[{b}] {name!r}", "offset matrix is not an affine transform")
            names.append(name)
            offsets[b] = offset
            n = int(bone.mNumWeights)
            if n > 64 * v + 64:
                self.fail(f"{where}.bones[{b}] {name!r}", f"has {n} weights for {v} vertices")
            if n:
                pairs = np.frombuffer(self.ffi.buffer(bone.mWeights, n * 8), dtype=vw)
                vids.append(pairs["v"].astype(np.int64))
                weights.append(pairs["w"].astype(np.float32))
                bids.append(np.full(n, b, np.uint32))
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            self.fail(where, f"bone {dup!r} is listed twice")
        if not vids:
            prim.joints = np.zeros((v, 4), np.uint32)
            prim.weights = np.zeros((v, 4), np.float32)
            prim.weights[:, 0] = 1.0
            return names, offsets
        vid, bid, w = np.concatenate(vids), np.concatenate(bids), np.concatenate(weights)
        if vid.max() >= v:
            b = int(bid[np.argmax(vid)])
            self.fail(f"{where}.bones[{b}] {names[b]!r}", f"weights vertex {int(vid.max())}, the mesh has {v} vertices")
        if not np.all(np.isfinite(w)):
            self.fail(where, "bone weights have non-finite values")
        order = np.lexsort((-w, vid))  # by vertex, heaviest first
        vid, bid, w = vid[order], bid[order], w[order]
        per_vertex = np.bincount(vid, minlength=v)
        k = int(per_vertex.max())
        if k > MAX_INFLUENCES:
            self.fail(where, f"a vertex has {k} bone influences (more than {MAX_INFLUENCES})")
        width = max(4, -(-k // 4) * 4)
        start = np.concatenate([[0], np.cumsum(per_vertex)[:-1]])
        slot = np.arange(len(vid)) - start[vid]
        joints = np.zeros((v, width), np.uint32)
        wts = np.zeros((v, width), np.float32)
        joints[vid, slot] = bid
        wts[vid, slot] = w
        prim.joints, prim.weights = joints, wts
        return names, offsets

    def _targets(self, mesh, m: int, positions, normals, where: str) -> list[MorphTarget]:
        count = int(mesh.mNumAnimMeshes)
        targets = []
        defaults = []
        v = positions.shape[0]
        for i in range(count):
            anim = mesh.mAnimMeshes[i]
            if anim == self.ffi.NULL:
                continue
            if int(anim.mNumVertices) != v:
                self.fail(f"{where}.animMeshes[{i}]", f"has {int(anim.mNumVertices)} vertices, the mesh has {v}")
            target = MorphTarget()
            if anim.mVertices != self.ffi.NULL:
                target.position = self._array(anim.mVertices, v, np.float32, 3) - positions
            if anim.mNormals != self.ffi.NULL and normals is not None:
                target.normal = self._array(anim.mNormals, v, np.float32, 3) - normals
            targets.append(target)
            defaults.append(float(anim.mWeight))
        if targets:
            self._morph_defaults[m] = np.array(defaults)
        return targets

    # -- animations -----------------------------------------------------------------------------
    def _animations(self) -> list[Animation]:
        animations = []
        names_seen: set[str] = set()
        for a in range(int(self.scene.mNumAnimations)):
            anim = self.scene.mAnimations[a]
            name = self._string(anim.mName) or f"animation_{a}"
            half = (len(name) - 1) // 2
            if len(name) % 2 == 1 and name[half] == "_" and name[:half] == name[half + 1:]:
                name = name[:half]  # Assimp's Collada reader names a lone animation "<id>_<id>"
            if name in names_seen:
                name = f"{name}_{a}"
            names_seen.add(name)
            tps = float(anim.mTicksPerSecond)
            if not np.isfinite(tps) or tps <= 0:
                tps = DEFAULT_TICKS_PER_SECOND
            channels = []
            for c in range(int(anim.mNumChannels)):
                ch = anim.mChannels[c]
                node_name = self._string(ch.mNodeName)
                where = f"animations[{a}] {name!r}.channels[{c}] {node_name!r}"
                node = self.by_name.get(node_name)
                if node is None:
                    warnings.warn(f"{os.path.basename(self.file)}: {where}: no node of that name; channel ignored", stacklevel=4)
                    continue
                for path, ptr, n, dtype in (("translation", ch.mPositionKeys, ch.mNumPositionKeys, self.vec_dtype),
                                            ("rotation", ch.mRotationKeys, ch.mNumRotationKeys, self.quat_dtype),
                                            ("scale", ch.mScalingKeys, ch.mNumScalingKeys, self.vec_dtype)):
                    n = int(n)
                    if n == 0 or ptr == self.ffi.NULL:
                        continue
                    keys = np.frombuffer(self.ffi.buffer(ptr, n * dtype.itemsize), dtype=dtype)
                    times, values = self._keys(keys["t"] / tps, keys["v"], where, path)
                    if path == "rotation":
                        values = values[:, [1, 2, 3, 0]]  # Assimp's (w, x, y, z) -> xyzw
                    channels.append(Channel(node, path, "LINEAR", times, np.ascontiguousarray(values, np.float32)))
            channels += self._morph_channels(anim, a, name, tps)
            animations.append(Animation(name=name, channels=channels, duration=self._duration(anim, tps, channels)))
        return animations

    def _duration(self, anim, tps: float, channels: list[Channel]) -> float | None:
        """The clip length the file authored: Assimp's ``mDuration / mTicksPerSecond``.

        What Assimp 5.x puts there, by format (its readers' sources): FBX the take's ``LocalStop -
        LocalStart`` (keys shifted to start at 0); B3D the ANIM chunk's frame count; LWS ``LastFrame -
        FirstFrame + 1`` frames (Assimp's own "fixme: zero or one-based?": a scene that starts at frame
        0 comes out one frame longer than it is); CSM the last frame; SMD its last frame at a fixed
        25 fps (SMD stores no rate: Assimp's "FIXME: is this correct?"); Collada, X, MD5 and (by
        Assimp's ScenePreprocessor) MS3D the last key time, so nothing is gained or lost there.
        Used when it is a length no shorter than the keys; otherwise (non-finite, 0, Assimp's -1 for
        "unknown", or shorter than the last key, which would cut keys off) the clip ends at its last
        key, as a glTF clip does."""
        ticks = float(anim.mDuration)
        if not np.isfinite(ticks) or ticks <= 0:
            return None
        seconds = ticks / tps
        last = max((float(ch.times[-1]) for ch in channels if len(ch.times)), default=0.0)
        if seconds < last - 1e-6 or seconds > 1e6:
            return None
        return float(np.float32(seconds))

    def _keys(self, times: np.ndarray, values: np.ndarray, where: str, path: str):
        if not np.all(np.isfinite(times)) or not np.all(np.isfinite(values)):
            self.fail(where, f"{path} keys have non-finite times or values")
        t32 = times.astype(np.float32)
        keep = np.ones(len(t32), bool)
        if len(t32) > 1:
            running = np.maximum.accumulate(t32)
            keep[1:] = t32[1:] > running[:-1]  # a key whose time does not increase is dropped
        return t32[keep], values[keep]

    def _morph_channels(self, anim, a: int, name: str, tps: float) -> list[Channel]:
        channels = []
        for c in range(int(anim.mNumMorphMeshChannels)):
            ch = anim.mMorphMeshChannels[c]
            target_name = self._string(ch.mName).split("*")[0]
            where = f"animations[{a}] {name!r}.morphChannels[{c}] {target_name!r}"
            node = self.by_name.get(target_name)
            if node is None or self.nodes[node].mesh is None:
                warnings.warn(f"{os.path.basename(self.file)}: {where}: no mesh node of that name; channel ignored", stacklevel=4)
                continue
            width = len(self.meshes[self.nodes[node].mesh].primitives[0].targets)
            n = int(ch.mNumKeys)
            times = np.empty(n)
            values = np.zeros((n, width), np.float32)
            for k in range(n):
                key = ch.mKeys[k]
                times[k] = key.mTime
                count = int(key.mNumValuesAndWeights)
                ids = self._array(key.mValues, count, np.uint32)
                ws = self._array(key.mWeights, count, np.float64)
                if count and ids.max() >= width:
                    self.fail(where, f"key {k} names morph target {int(ids.max())}, the mesh has {width}")
                values[k, ids] = ws
            if n and width:
                times, values = self._keys(times / tps, values, where, "weights")
                channels.append(Channel(node, "weights", "LINEAR", times, values))
        return channels

    # -- FBX pivot helpers ----------------------------------------------------------------------
    def _collapse_helpers(self, animations: list[Animation]) -> None:
        """Fold each chain of ``<name>_$AssimpFbx$_<Part>`` nodes into the real node ``<name>`` below it."""
        helpers = [i for i, n in enumerate(self.nodes) if HELPER_TAG in n.name]
        if not helpers:
            return
        is_helper = np.zeros(len(self.nodes), bool)
        is_helper[helpers] = True
        # chains: real node -> [top helper, ..., lowest helper] (each helper's only child is the next)
        chains: dict[int, list[int]] = {}
        for i in helpers:
            if self.nodes[i].parent >= 0 and is_helper[self.nodes[i].parent]:
                continue  # not the top of a chain
            chain = [i]
            while True:
                kids = self.nodes[chain[-1]].children
                if len(kids) != 1:
                    break
                if is_helper[kids[0]]:
                    chain.append(kids[0])
                    continue
                real = kids[0]
                base = self.nodes[i].name.split(HELPER_TAG)[0]
                if self.nodes[real].name == base:
                    chains[real] = chain
                break
        if not chains:
            return
        for anim in animations:
            by_node: dict[int, list[Channel]] = {}
            for ch in anim.channels:
                by_node.setdefault(ch.node, []).append(ch)
            kept = [ch for ch in anim.channels
                    if not is_helper[ch.node] and ch.node not in chains]
            for real, chain in chains.items():
                members = chain + [real]
                own = [ch for ch in by_node.get(real, []) if ch.path != "weights"]
                kept += [ch for ch in by_node.get(real, []) if ch.path == "weights"]
                if own:
                    # Assimp bakes the whole chain (pivots, pre/post rotation) into the keys it puts on
                    # the real node: they are the full local transform; the static helpers above it
                    # must not be applied again.
                    kept += own
                    continue
                chans = [ch for n in chain for ch in by_node.get(n, []) if ch.path != "weights"]
                if chans:  # keys on the helpers themselves (complex pivots): multiply the chain out
                    kept += self._collapsed_channels(members, chans, real)
            anim.channels = kept
        # Rest pose: the product of the chain, then rewire the tree without the helpers.
        remove = set()
        for real, chain in chains.items():
            members = chain + [real]
            m = np.eye(4)
            for n in members:
                m = m @ self._rest_matrix(n)
            node = self.nodes[real]
            node.matrix = m
            node.translation, node.rotation, node.scale = decompose_trs(m)
            top_parent = self.nodes[chain[0]].parent
            node.parent = top_parent
            if top_parent >= 0:
                kids = self.nodes[top_parent].children
                kids[kids.index(chain[0])] = real
            remove.update(chain)
        self._remove_nodes(sorted(remove), animations)

    def _rest_matrix(self, n: int) -> np.ndarray:
        node = self.nodes[n]
        return compose_trs(node.translation, node.rotation, node.scale)

    def _collapsed_channels(self, members: list[int], chans: list[Channel], real: int) -> list[Channel]:
        times = np.unique(np.concatenate([ch.times for ch in chans]).astype(np.float32))
        k = len(times)
        product = np.tile(np.eye(4), (k, 1, 1))
        for n in members:
            node = self.nodes[n]
            t = np.tile(node.translation, (k, 1))
            q = np.tile(node.rotation, (k, 1))
            s = np.tile(node.scale, (k, 1))
            for ch in chans:
                if ch.node != n:
                    continue
                sampled = _sample_linear(ch.times, ch.values, times, ch.path == "rotation")
                if ch.path == "translation":
                    t = sampled
                elif ch.path == "rotation":
                    q = sampled
                else:
                    s = sampled
            product = product @ compose_trs(t, q, s)
        t, q, s = decompose_trs(product)
        # keep the quaternion path continuous (no sign flips between neighbouring keys)
        for i in range(1, k):
            if np.dot(q[i], q[i - 1]) < 0:
                q[i] = -q[i]
        out = []
        paths = {ch.path for ch in chans}
        if "translation" in paths or len(members) > 1:
            out.append(Channel(real, "translation", "LINEAR", times, t.astype(np.float32)))
        out.append(Channel(real, "rotation", "LINEAR", times, q.astype(np.float32)))
        if not np.allclose(s, s[0], atol=1e-7) or not np.allclose(s[0], self.nodes[real].scale, atol=1e-7) or "scale" in paths:
            out.append(Channel(real, "scale", "LINEAR", times, s.astype(np.float32)))
        return out

    def _remove_nodes(self, remove: list[int], animations: list[Animation]) -> None:
        keep = [i for i in range(len(self.nodes)) if i not in set(remove)]
        new_index = np.full(len(self.nodes), -1, np.int64)
        new_index[keep] = np.arange(len(keep))
        nodes = []
        for i in keep:
            node = self.nodes[i]
            node.parent = int(new_index[node.parent]) if node.parent >= 0 else -1
            node.children = [int(new_index[c]) for c in node.children if new_index[c] >= 0]
            nodes.append(node)
        self.nodes = nodes
        self.node_ptrs = [self.node_ptrs[i] for i in keep]
        self.by_name = {}
        for i, node in enumerate(nodes):
            self.by_name.setdefault(node.name, i)
        for skin in self.skins:
            if np.any(new_index[skin.joints] < 0):
                self.fail(f"skin {skin.name!r}", "a bone is an FBX pivot helper node")
            skin.joints = new_index[skin.joints]
        for anim in animations:
            for ch in anim.channels:
                ch.node = int(new_index[ch.node])

    def _skinned_meshes_to_roots(self) -> list[int]:
        """Skinned mesh nodes become scene roots (their world transform kept as their rest pose).

        Skinning ignores a skinned mesh node's transform (glTF, and Assimp's offset matrices already
        hold it), so this changes no vertex; it makes an exported glTF follow the spec's advice (the
        Khronos validator warns about skinned meshes below transformed nodes)."""
        world = {}
        roots = [0]
        for i, node in enumerate(self.nodes):  # depth-first order: parents come first
            local = compose_trs(node.translation, node.rotation, node.scale)
            world[i] = world[node.parent] @ local if node.parent >= 0 else local
        for i, node in enumerate(self.nodes):
            if node.skin is None or node.parent < 0:
                continue
            self.nodes[node.parent].children.remove(i)
            node.parent = -1
            node.matrix = world[i]
            node.translation, node.rotation, node.scale = decompose_trs(world[i])
            roots.append(i)
        return roots

    # -- units and axes -------------------------------------------------------------------------
    def _unit_scale(self) -> float:
        if self.unit_scale is None or "UnitScaleFactor" not in self.metadata:
            return 1.0
        factor = float(self.metadata["UnitScaleFactor"])
        if not np.isfinite(factor) or factor <= 0:
            self.fail("GlobalSettings.UnitScaleFactor", f"is {factor}")
        return factor / 100.0

    def _apply_scale(self, f: float, animations: list[Animation]) -> None:
        """Every length times ``f`` (a uniform change of units: rotations and scales unchanged)."""
        for node in self.nodes:
            node.translation = node.translation * f
            if node.matrix is not None:
                node.matrix = node.matrix.copy()
                node.matrix[:3, 3] *= f
        for mesh in self.meshes:
            for prim in mesh.primitives:
                prim.positions = prim.positions * np.float32(f)
                for target in prim.targets:
                    if target.position is not None:
                        target.position = target.position * np.float32(f)
        for skin in self.skins:
            skin.inverse_bind = skin.inverse_bind.copy()
            skin.inverse_bind[:, :3, 3] *= f
        for anim in animations:
            for ch in anim.channels:
                if ch.path == "translation":
                    ch.values = ch.values * np.float32(f)

    def _apply_axes(self) -> None:
        """FBX axis system -> glTF's (+Y up, +Z front, +X right): a rotation on the root node."""
        md = self.metadata
        if "UpAxis" not in md or "CoordAxis" not in md or "FrontAxis" not in md:
            return
        try:
            axes = [(int(md["CoordAxis"]), int(md.get("CoordAxisSign", 1))),
                    (int(md["UpAxis"]), int(md.get("UpAxisSign", 1))),
                    (int(md["FrontAxis"]), int(md.get("FrontAxisSign", 1)))]
        except (TypeError, ValueError):
            return
        if sorted(a for a, _s in axes) != [0, 1, 2]:
            return
        r = np.zeros((3, 3))
        for row, (axis, sign) in enumerate(axes):
            r[row, axis] = 1.0 if sign >= 0 else -1.0
        if np.allclose(r, np.eye(3)) or np.linalg.det(r) < 0:
            return  # already glTF's axes, or a mirror (not a rotation): leave as Assimp gives it
        m = np.eye(4)
        m[:3, :3] = r
        root = self.nodes[0]
        root.matrix = m @ compose_trs(root.translation, root.rotation, root.scale)
        root.translation, root.rotation, root.scale = decompose_trs(root.matrix)


def _sample_linear(times: np.ndarray, values: np.ndarray, at: np.ndarray, rotation: bool) -> np.ndarray:
    """A LINEAR channel sampled at ``at`` (clamped at the ends); slerp for rotations."""
    times = times.astype(np.float64)
    values = values.astype(np.float64)
    if len(times) == 1:
        return np.tile(values[0], (len(at), 1))
    i = np.clip(np.searchsorted(times, at, side="right") - 1, 0, len(times) - 2)
    u = np.clip((at - times[i]) / (times[i + 1] - times[i]), 0.0, 1.0)[:, None]
    a, b = values[i], values[i + 1]
    if not rotation:
        return a + (b - a) * u
    dot = np.sum(a * b, axis=1, keepdims=True)
    b = np.where(dot < 0, -b, b)
    dot = np.abs(dot)
    theta = np.arccos(np.clip(dot, -1.0, 1.0))
    small = theta < 1e-6
    sin = np.where(small, 1.0, np.sin(theta))
    wa = np.where(small, 1.0 - u, np.sin((1.0 - u) * theta) / sin)
    wb = np.where(small, u, np.sin(u * theta) / sin)
    q = wa * a + wb * b
    return q / np.linalg.norm(q, axis=1, keepdims=True)

