"""An :class:`Asset`: a loaded model turned into the runtime's structures (rig, clips, skins, meshes).

>>> asset = skeletal.load("Soldier.glb")            # doctest: +SKIP
>>> asset.clip("Walk").duration                     # doctest: +SKIP
1.0
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from .anim.clip import PATH_CODE, Clip, Track, resolve_clip
from .document import Document, PackedChannels, Primitive
from .errors import ModelError
from .io.formats import ASSIMP_SUFFIXES, BVH_SUFFIX, USD_SUFFIXES
from .anim.properties import PropertyLayout
from .anim.rig import Rig
from .skinning.lbs import normalize_weights
from .up import UpAxis


@dataclass(frozen=True)
class SkinBinding:
    """A skin in rig terms: ``joints`` (J,) rig indices, ``inverse_bind`` (J, 4, 4) row-major float64."""

    name: str
    joints: np.ndarray
    inverse_bind: np.ndarray


@dataclass
class SkinnedPrimitive:
    """A primitive ready for skinning: influences normalised, morph deltas dense.

    ``joints`` (V, K) int32 and ``weights`` (V, K) float32 rows summing to 1 (all influence sets);
    ``morph_positions``/``morph_normals`` (T, V, 3) float32 or None.
    """

    source: Primitive
    joints: np.ndarray | None
    weights: np.ndarray | None
    morph_positions: np.ndarray | None
    morph_normals: np.ndarray | None


@dataclass
class MeshInstance:
    """A mesh placed on a node. ``skin`` is None for rigid meshes (they follow their node)."""

    node: int  # file node index
    mesh: int  # file mesh index
    skin: int | None
    primitives: list[SkinnedPrimitive] = field(default_factory=list)

    @property
    def skinned(self) -> bool:
        return self.skin is not None


def choose_scene(document: Document, scene: int | str | None) -> int | None:
    """The index of the scene to show: ``scene`` by index or by name, else the document's default
    ``scene``, else its first (as three.js and Blender do); None when it has no scenes. A scene that
    does not exist raises :class:`ModelError` listing the scenes."""
    count = len(document.scenes)
    if scene is None:
        if not count:
            return None
        return document.scene if document.scene is not None and 0 <= document.scene < count else 0
    names = list(document.scene_names) + [""] * (count - len(document.scene_names))
    if isinstance(scene, str) and scene in names:
        return names.index(scene)
    if isinstance(scene, str) and scene.lstrip("-").isdigit():
        scene = int(scene)
    if isinstance(scene, (int, np.integer)) and not isinstance(scene, bool) and 0 <= scene < count:
        return int(scene)
    listed = ", ".join(f"{i} {n!r}" if n else str(i) for i, n in enumerate(names)) or "none"
    raise ModelError(document.path, "scenes", f"no scene {scene!r} (scenes: {listed})")


def scene_nodes(document: Document, scene: int | None) -> np.ndarray | None:
    """(nodes,) bool by file node index: the nodes a viewer shows for ``scene`` (None: no scene
    chosen, every node). They are the scene's root nodes and everything below them, and, as three.js
    poses them, the whole hierarchy of every joint (and ``skeleton`` root) of the skins that the
    scene's meshes use, even where that hierarchy hangs outside the scene."""
    if scene is None:
        return None
    nodes = document.nodes
    shown = np.zeros(len(nodes), dtype=bool)

    def add_below(roots) -> None:
        stack = [int(r) for r in roots]
        while stack:
            i = stack.pop()
            if not shown[i]:
                shown[i] = True
                stack.extend(nodes[i].children)

    add_below(document.scenes[scene])
    skins = {nodes[i].skin for i in np.flatnonzero(shown).tolist() if nodes[i].skin is not None and nodes[i].mesh is not None}
    for k in sorted(skins):
        skin = document.skins[k]
        joints = [int(j) for j in skin.joints] + ([skin.skeleton] if skin.skeleton is not None else [])
        tops = set()
        for j in joints:
            while nodes[j].parent >= 0:
                j = nodes[j].parent
            tops.add(j)
        add_below(sorted(tops))
    return shown


#: The deepest node hierarchy any reader accepts (BVH's own limit too): every writer and printer
#: below may then walk a chain without running out of stack, memory or screen.
MAX_NODE_DEPTH = 1000


def check_depth(rig: Rig, file: str | os.PathLike | None) -> None:
    """Raise :class:`ModelError` when ``rig``'s hierarchy is nested deeper than :data:`MAX_NODE_DEPTH`
    (a 50,000-deep chain of a 3.5 MB glTF: ``info`` would print gigabytes of indentation)."""
    parents = rig.parents.tolist()
    depth = [0] * len(parents)
    for i, parent in enumerate(parents):  # parents first: a parent's depth is known before its children's
        if parent >= 0:
            depth[i] = level = depth[parent] + 1
            if level >= MAX_NODE_DEPTH:
                name = rig.names[i] if len(rig.names[i]) <= 64 else rig.names[i][:64] + "..."
                raise ModelError(file, f"nodes[{int(rig.node_of[i])}]",
                                 f"node {name!r} is nested {level + 1} levels deep; skeletal reads at most "
                                 f"{MAX_NODE_DEPTH} levels")


def require_nodes(model, purpose: str) -> None:
    """Raise :class:`ModelError` when ``model`` (an :class:`Asset`, or anything with a ``rig`` and
    maybe a ``path``) has no nodes, naming ``purpose``: ``empty.glb: has no nodes: nothing to animate``."""
    if len(model.rig) == 0:
        raise ModelError(getattr(model, "path", None), None, f"has no nodes: nothing to {purpose}")


class Asset:
    """A model ready to animate: a :class:`Rig`, its :class:`Clip` list, skins and mesh instances.

    Node order: ``asset.rig.names`` (and ``Player.world``) are in rig order, parents first;
    ``asset.node_names`` (and ``Player.node_world``, ``bake()['node_world']``) in the file's (glTF)
    node order. Look nodes up by name rather than mixing them: ``player.world_of("mixamorig:Hips")``,
    ``asset.node_names.index(name)``, ``asset.rig.find(name)`` (see :class:`Rig`).

    Morph weights of all nodes live in one flat array; ``morph_start[i]:morph_start[i+1]`` are rig
    node i's (empty for nodes without a morphed mesh), ``rest_morph`` their defaults.
    """

    def __init__(self, document: Document, scene: int | str | None = None):
        self.document = document
        self.path = document.path
        self.rig = Rig.from_document(document)
        #: The scene shown (index into ``document.scenes``): ``scene`` by index or name, else the
        #: file's default scene, else its first; None for a file without scenes (every node shown).
        self.scene: int | None = choose_scene(document, scene)
        #: (N,) bool, rig order: the nodes of :attr:`scene` (see :func:`scene_nodes`); all True without scenes.
        self.scene_nodes: np.ndarray = self.rig_mask(scene_nodes(document, self.scene))
        check_depth(self.rig, document.path)
        self._build_morph_layout()
        self.skins = [self._bind_skin(i) for i in range(len(document.skins))]
        #: Where the animated properties (KHR_animation_pointer: materials, lights, cameras,
        #: visibility) live in one flat float64 array, with their rest values; see :mod:`skeletal.properties`.
        self.properties = PropertyLayout(document.pointer_rest)
        self.clips = [self._with_properties(self._clip(i), i) for i in range(len(document.animations))]
        self._leave_out_other_scenes()
        self.up = UpAxis()  # the file's up axis and whether it was turned (skeletal.load(up=...))
        self._check_skinned_primitives()  # mesh_instances are built on first use, their errors found now

    # -- public ---------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return os.path.basename(self.path)

    @property
    def node_names(self) -> tuple[str, ...]:
        """Node names in file (glTF node) order, the order of ``Player.node_world`` and of
        ``bake()['node_world']``: ``node_world[asset.node_names.index("Hips")]``. (``asset.rig.names``
        is in rig order, parents first: it indexes ``Player.world``.)"""
        return self.rig.node_names

    def clip(self, key: str | int) -> Clip:
        """A clip by name or index."""
        return resolve_clip(self.clips, key)

    @cached_property
    def colliders(self):
        """The model's hit/hurt spheres and capsules (:class:`skeletal.colliders.ColliderSet`), read
        from the nodes' and animations' glTF ``extras`` on first use (ModelError when malformed)."""
        from .anim.colliders import read_colliders

        return read_colliders(self)

    @cached_property
    def mesh_instances(self) -> list[MeshInstance]:
        """Every mesh placed on a node of the scene shown, ready for skinning (influences normalised,
        morph deltas dense); built on first use, so that loading a model to play its clips does not
        pay for it."""
        shown = self.scene_nodes[self.rig.index_of] if len(self.rig) else np.zeros(0, bool)  # by file index
        return [self._mesh_instance(i) for i, n in enumerate(self.document.nodes) if n.mesh is not None and shown[i]]

    @property
    def scene_name(self) -> str | None:
        """The name of the scene shown (``scene_<i>`` for an unnamed one); None without scenes."""
        if self.scene is None:
            return None
        names = self.document.scene_names
        return names[self.scene] if self.scene < len(names) and names[self.scene] else f"scene_{self.scene}"

    def rig_mask(self, file_mask: np.ndarray | None) -> np.ndarray:
        """A (N,) bool mask in rig order from one by file node index (None: every node)."""
        if file_mask is None:
            return np.ones(len(self.rig), dtype=bool)
        return np.asarray(file_mask, dtype=bool)[self.rig.node_of]

    @property
    def skinned_instances(self) -> list[MeshInstance]:
        return [m for m in self.mesh_instances if m.skinned]

    @cached_property
    def bind_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """(min, max) corners of every skinned or rigid primitive's bind positions (model units)."""
        points = [p.source.positions for m in self.mesh_instances for p in m.primitives]
        if not points:
            return np.zeros(3), np.zeros(3)
        lo = np.min([np.min(p, axis=0) for p in points if len(p)], axis=0)
        hi = np.max([np.max(p, axis=0) for p in points if len(p)], axis=0)
        return lo.astype(np.float64), hi.astype(np.float64)

    def require_nodes(self, purpose: str) -> None:
        """Raise :class:`ModelError` when the model has no nodes (an empty scene), naming ``purpose``.

        >>> asset.require_nodes("animate")   # doctest: +SKIP
        skeletal.errors.ModelError: empty.glb: has no nodes: nothing to animate
        """
        require_nodes(self, purpose)

    def __repr__(self) -> str:
        return f"Asset({self.name!r}, nodes={len(self.rig)}, skins={len(self.skins)}, clips={len(self.clips)})"

    # -- construction ---------------------------------------------------------------------------

    def _build_morph_layout(self) -> None:
        doc = self.document
        counts = np.zeros(len(self.rig), dtype=np.int64)
        defaults: list[np.ndarray] = [np.zeros(0)] * len(self.rig)
        for file_index, node in enumerate(doc.nodes):
            if node.mesh is None:
                continue
            mesh = doc.meshes[node.mesh]
            n_targets = max((len(p.targets) for p in mesh.primitives), default=0)
            if n_targets == 0:
                continue
            w = node.weights if node.weights is not None else mesh.weights
            w = np.zeros(n_targets) if w is None else np.asarray(w, dtype=np.float64)
            if len(w) != n_targets:
                raise ModelError(doc.path, f"nodes[{file_index}]", f"has {len(w)} morph weights, mesh has {n_targets} targets")
            r = self.rig.index_of[file_index]
            counts[r] = n_targets
            defaults[r] = w
        self.morph_start = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self.rest_morph = np.concatenate(defaults) if counts.sum() else np.zeros(0)

    def _bind_skin(self, index: int) -> SkinBinding:
        skin = self.document.skins[index]
        joints = self.rig.index_of[np.asarray(skin.joints, dtype=np.int64)].astype(np.int64)
        return SkinBinding(skin.name, joints, np.ascontiguousarray(skin.inverse_bind, dtype=np.float64))

    def _clip(self, index: int) -> Clip:
        anim = self.document.animations[index]
        packed = anim.packed
        if packed is not None and (not anim.channels_made or packed.describes(anim.channels)):
            clip = self._packed_clip(index, packed)
            if clip is not None:
                return clip
        tracks = []
        index_of = self.rig.index_of.tolist()
        increasing: dict[int, np.ndarray] = {}  # id -> times checked here (kept alive: ids stay unique)
        for c, channel in enumerate(anim.channels):
            node = index_of[channel.node]
            if channel.path == "weights":
                expected = self.morph_start[node + 1] - self.morph_start[node]
                if channel.values.shape[1] != expected:
                    raise ModelError(
                        self.path, f"animations[{index}].channels[{c}]",
                        f"weights track has {channel.values.shape[1]} values per key, the node's mesh has {expected} morph targets",
                    )
            times = channel.times
            if (id(times) not in increasing and isinstance(times, np.ndarray) and times.ndim == 1 and len(times)
                    and np.isfinite(times[0]) and np.isfinite(times[-1]) and (times[1:] > times[:-1]).all()):
                increasing[id(times)] = times
            tracks.append(Track.checked(node, channel.path, channel.interpolation, times, channel.values,
                                        increasing=id(times) in increasing))
        clip = Clip(anim.name or f"animation_{index}", tracks)
        if anim.duration is not None and anim.duration > clip.duration:
            clip.duration = float(anim.duration)  # the authored length (a scene that ends after its last key)
        return clip

    def _packed_clip(self, index: int, packed: PackedChannels) -> Clip | None:
        """The clip of an animation whose reader packed its channels (checked there): rig node indices
        in one numpy step, the packed arrays taken as they are, the Track objects made when first asked
        for. None when a weights channel does not fit its node's morph targets (then the channel by
        channel path reports it)."""
        anim = self.document.animations[index]
        node = self.rig.index_of[packed.node].astype(np.int64)
        weights = packed.path == PATH_CODE["weights"]
        if weights.any():
            targets = self.morph_start[node + 1] - self.morph_start[node]
            if (packed.width[weights] != targets[weights]).any():
                return None
        arrays = (packed.path, packed.interp, packed.width, packed.key_start, packed.value_start, packed.times,
                  packed.values)
        if packed.taken:  # a second asset of one document: its own arrays, as _pack would make them
            arrays = tuple(a.copy() for a in arrays)
        packed.taken = True
        clip = Clip.from_layout(anim.name or f"animation_{index}", node, *arrays)
        if anim.duration is not None and anim.duration > clip.duration:
            clip.duration = float(anim.duration)
        return clip

    def _with_properties(self, clip: Clip, index: int) -> Clip:
        """``clip`` with the property tracks of animation ``index`` (its duration stretched to them)."""
        tracks = self.document.animations[index].properties
        if tracks:
            clip.properties = list(tracks)
            clip.include_properties()
        return clip

    def _leave_out_other_scenes(self) -> None:
        """Tracks on nodes outside the scene shown are taken out of the clips (those nodes stay at
        rest and are not drawn); each clip lists them in ``outside_scene`` and one warning says so."""
        if self.scene_nodes.all():
            return
        told = []
        for c, clip in enumerate(self.clips):
            outside = ~self.scene_nodes[clip.node] if clip.track_count else np.zeros(0, bool)
            if not outside.any():
                continue
            names = sorted({self.rig.names[int(n)] or f"node_{int(self.rig.node_of[n])}" for n in clip.node[outside]})
            kept = [t for t, out in zip(clip.tracks, outside.tolist()) if not out]
            replaced = Clip(clip.name, kept, dict(clip.markers), clip.additive, properties=list(clip.properties))
            replaced.duration = clip.duration  # the authored length stays
            replaced.outside_scene = names
            self.clips[c] = replaced
            told.append(f"{clip.name!r} ({len(names)}: {', '.join(names[:4])}{', ...' if len(names) > 4 else ''})")
        if told:
            warnings.warn(f"{os.path.basename(self.path)}: scene {self.scene_name!r}: clip(s) animating nodes outside "
                          f"it, left at rest and not drawn: {'; '.join(told)}", stacklevel=3)

    def _check_skinned_primitives(self) -> None:
        """Raise now what :meth:`_mesh_instance` would find wrong later: a joint index past the joints
        of the skin a node uses its mesh with (each primitive's largest joint index taken once)."""
        doc = self.document
        largest: dict[int, int] = {}
        for node in doc.nodes:
            if node.mesh is None or node.skin is None:
                continue
            n_joints = len(doc.skins[node.skin].joints)
            for p, prim in enumerate(doc.meshes[node.mesh].primitives):
                if prim.joints is None or not len(prim.joints):
                    continue
                top = largest.get(id(prim))
                if top is None:
                    top = largest[id(prim)] = int(prim.joints.max())
                if top >= n_joints:
                    raise ModelError(doc.path, f"meshes[{node.mesh}].primitives[{p}]",
                                     f"joint index {top} past the {n_joints} joints of skins[{node.skin}]")

    def _mesh_instance(self, file_node: int) -> MeshInstance:
        doc = self.document
        node = doc.nodes[file_node]
        mesh = doc.meshes[node.mesh]
        instance = MeshInstance(file_node, node.mesh, node.skin)
        n_joints = len(doc.skins[node.skin].joints) if node.skin is not None else 0
        for p, prim in enumerate(mesh.primitives):
            joints = weights = None
            if node.skin is not None and prim.joints is not None:
                if len(prim.joints) and int(prim.joints.max()) >= n_joints:
                    raise ModelError(
                        doc.path, f"meshes[{node.mesh}].primitives[{p}]",
                        f"joint index {int(prim.joints.max())} past the {n_joints} joints of skins[{node.skin}]",
                    )
                joints = np.ascontiguousarray(prim.joints, dtype=np.int32)
                weights = normalize_weights(prim.weights)
            morph_p = morph_n = None
            if prim.targets:
                v = prim.vertex_count
                morph_p = np.zeros((len(prim.targets), v, 3), np.float32)
                for i, target in enumerate(prim.targets):
                    if target.position is not None:
                        morph_p[i] = target.position
                if prim.normals is not None and any(t.normal is not None for t in prim.targets):
                    morph_n = np.zeros((len(prim.targets), v, 3), np.float32)
                    for i, target in enumerate(prim.targets):
                        if target.normal is not None:
                            morph_n[i] = target.normal
            instance.primitives.append(SkinnedPrimitive(prim, joints, weights, morph_p, morph_n))
        return instance


def load(path: str | os.PathLike, *, base_dir: str | os.PathLike | None = None, isolate: bool = True,
         up: str = "y", scene: int | str | None = None) -> Asset:
    """Load a model file (``.gltf``/``.glb``, ``.bvh`` motion capture, or FBX, Collada and the other
    formats Assimp reads) as an :class:`Asset`.

    A ``.bvh`` file gives a rig and one clip, no meshes (see :mod:`skeletal.io.bvh`). ``.fbx``,
    ``.dae``, ``.x``, ``.md5mesh``, ... go through the system's Assimp library (see
    :mod:`skeletal.io.assimp`; FBX is converted to metres), which runs in a child process under
    memory, CPU and time limits so that a file that crashes or hangs Assimp gives a ModelError;
    ``isolate=False`` runs it in this process (trusted files only).
    ``.usd``/``.usda``/``.usdc``/``.usdz`` (UsdSkel) need usd-core (see :mod:`skeletal.io.usd`), which
    runs in a child process under the same limits (``isolate=False``: in this process).

    ``up``: the file's up axis, "y" (default: the axes as they are), "z", "-z", "x", "-x", "-y", or
    "auto" (found from the skeleton and motion for BVH and the Assimp formats; glTF and USD are Y up by
    definition). A file whose up axis is not Y is turned to stand Y up where it is loaded;
    ``asset.up`` (:class:`skeletal.up.UpAxis`) says what was found and done (see :mod:`skeletal.up`).

    Only regular files are read: a named pipe, a device or a directory is refused at once. URIs
    inside the file may only name files in the model's folder or below, unless ``base_dir`` is given
    (then anything under ``base_dir``). Errors are :class:`skeletal.ModelError`.

    ``scene``: the scene to show, by index or name (default: the file's default ``scene``, else its
    first, as the glTF spec and every viewer do). Nodes outside it are not drawn and not animated;
    clips that animate them say so (``Clip.outside_scene``, one warning). See :attr:`Asset.scene`.

    >>> asset = skeletal.load("Soldier.glb")        # doctest: +SKIP
    >>> walk = skeletal.load("walk_zup.bvh", up="auto")  # doctest: +SKIP
    >>> walk.up.turned                                  # doctest: +SKIP
    True
    """
    from .up import check_up

    up = check_up(up)
    asset = _load(path, base_dir, isolate, scene)
    if up == "y":
        return asset
    from .up import resolve_up, turn_document

    axis = resolve_up(asset, up, model_suffix(path))
    if axis.turned:
        turn_document(asset.document, axis.motion, axis.rest)
        asset = Asset(asset.document, scene=scene)
    asset.up = axis
    return asset


def _load(path: str | os.PathLike, base_dir: str | os.PathLike | None, isolate: bool,
          scene: int | str | None) -> Asset:
    """:func:`load` without the up axis."""
    from .io.files import check_regular
    from .io.sniff import check_kind

    file = os.fspath(path)
    if os.path.isdir(file):  # the commonest wrong path: say what to do
        raise ModelError(file, None, "is a folder, not a model file (give the model file inside it)")
    suffix = model_suffix(file)
    if suffix not in READERS:  # glTF: the file opened and read once, for the sniffing and the reader
        data = _read_gltf_file(file, path)
        from .io.gltf import gc_paused, read_gltf

        with gc_paused():  # the document and the asset's tracks: many objects, no cycles
            return Asset(read_gltf(path, base_dir=base_dir, data=data), scene=scene)
    try:
        check_regular(file)  # the front door: every reader below sees a regular file (no FIFO/device)
    except OSError as exc:
        raise ModelError(file, None, f"cannot read the file: {exc.strerror or exc}") from None
    check_kind(path, other_reader=True)  # an empty, renamed or wrong file: one clear line
    if suffix in ASSIMP_SUFFIXES:
        return Asset(_read_assimp(path, isolate=isolate), scene=scene)
    if suffix in USD_SUFFIXES:
        return Asset(_read_usd(path, isolate=isolate), scene=scene)
    return Asset(READERS[suffix](path), scene=scene)


def _read_gltf_file(file: str, path: str | os.PathLike) -> bytes:
    """The bytes of a glTF model file, after :func:`~skeletal.io.sniff.check_kind` has looked at its
    head (an empty, renamed or wrong file is told in one clear line before the rest is read). A regular
    file only (no FIFO or device), opened once; errors are :class:`ModelError`."""
    from .io.files import open_regular
    from .io.sniff import HEAD_BYTES, check_kind

    try:
        f = open_regular(file)
    except OSError as exc:
        raise ModelError(file, None, f"cannot read the file: {exc.strerror or exc}") from None
    with f:
        try:
            size = os.fstat(f.fileno()).st_size
            head = os.pread(f.fileno(), HEAD_BYTES, 0) if hasattr(os, "pread") else f.read(HEAD_BYTES)
        except OSError as exc:
            raise ModelError(file, None, f"cannot read the file: {exc.strerror or exc}") from None
        check_kind(path, head)
        try:
            f.seek(0)
            return f.read(size)
        except OSError as exc:
            raise ModelError(file, None, f"cannot read the file: {exc.strerror or exc}") from None


def model_suffix(path: str | os.PathLike) -> str:
    """The lower-case suffix that picks a file's reader: the longest known one the name ends with
    (``"x.mesh.xml"`` -> ``".mesh.xml"``), else the last suffix (``".glb"``)."""
    name = os.path.basename(os.fspath(path)).lower()
    for suffix in sorted(READERS, key=len, reverse=True):
        if name.endswith(suffix) and len(name) > len(suffix):
            return suffix
    return os.path.splitext(name)[1]


def model_suffixes() -> tuple[str, ...]:
    """Every file suffix :func:`load` reads (glTF, BVH, the Assimp formats and any other reader in
    ``READERS``): the one list ``skeletal batch`` collects folders by."""
    return (".gltf", ".glb", *READERS)


def _read_bvh(path):
    from .io.bvh import read_bvh

    return read_bvh(path)


def _read_usd(path, isolate: bool = True):
    from .io.usd import read_usd

    return read_usd(path, isolate=isolate)


def _read_assimp(path, isolate: bool = True):
    from .io.assimp import read_assimp

    return read_assimp(path, isolate=isolate)


# Readers of formats other than glTF, by lower-case file suffix; anything else is read as glTF.
READERS = {BVH_SUFFIX: _read_bvh, **{suffix: _read_assimp for suffix in ASSIMP_SUFFIXES},
            **{suffix: _read_usd for suffix in USD_SUFFIXES}}  # USD (UsdSkel): skeletal[usd]
