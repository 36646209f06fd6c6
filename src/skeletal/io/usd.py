# Over 600 lines: one reader pass over a UsdSkel stage (skeletons, animations, skinned meshes, blend shapes)
# in the order the Document needs them, as io/gltf.py does for glTF.
"""USD (UsdSkel) reader: ``.usd``/``.usda``/``.usdc``/``.usdz`` -> :class:`~skeletal.document.Document`,
through Pixar's ``usd-core`` (the optional extra ``skeletal[usd]``).

How a UsdSkel stage maps onto skeletal's model:

* Every transformable prim (``Xform``, ``SkelRoot``, ``Skeleton``, ``Mesh``, ``Scope``...) becomes a
  :class:`~skeletal.document.Node` with its local transform at the earliest time as rest pose;
  materials, shaders, ``SkelAnimation`` and ``BlendShape`` prims are not nodes.
* A ``Skeleton``'s ``joints`` (paths such as ``Hips/Spine``) become nodes below the skeleton's node,
  parented by path (the rig sorts them parent-first). A joint's name is its ``jointNames`` entry when
  authored, else the last element of its path. ``restTransforms`` (joint-local) give the rest pose;
  without them it is derived from ``bindTransforms`` (skeleton space).
* A ``SkelAnimation`` becomes an :class:`~skeletal.document.Animation` (named after the prim) for every
  skeleton that binds it (``skel:animationSource``) or whose joints include all of its joints: one
  translation/rotation/scale channel per joint, keyed at the attributes' time samples converted to
  seconds with the stage's ``timeCodesPerSecond`` (from ``startTimeCode``), LINEAR (STEP on a stage
  whose interpolation is held), and a ``weights`` channel per mesh from ``blendShapeWeights``.
* A mesh bound to a skeleton (``primvars:skel:jointIndices``/``jointWeights`` with their
  ``elementSize``; ``constant`` interpolation for rigid binding) gets a :class:`~skeletal.document.Skin`
  of its own: its joints in the order of the mesh's ``skel:joints`` (else the skeleton's), inverse
  binds ``inverse(bindTransform) @ geomBindTransform``, so that skinning reproduces UsdSkel's
  linear blend skinning in the skeleton's space. Blend shapes (``skel:blendShapes``,
  ``skel:blendShapeTargets``, sparse ``pointIndices``) become morph targets (inbetweens are ignored with
  a warning). Polygons are triangulated as fans; a mesh with face-varying normals or UVs is unwelded
  (one vertex per face corner). ``primvars:st`` becomes ``TEXCOORD_0`` (t flipped, glTF's origin); a constant
  ``displayColor``/``displayOpacity`` the material's base colour.
* Units and axes: lengths are converted to metres (``metersPerUnit``) and a Z-up stage is turned Y-up
  (a -90 degree turn about X), both on the root nodes' rest and motion, as glTF expects.

Bad input raises one :class:`~skeletal.errors.ModelError` naming the file and the prim path, e.g.
``hero.usda: </Hero/Body>: primvars:skel:jointIndices has 10 values, 4 vertices x elementSize 4 need 16``.

Confinement: before usd-core composes anything, every layer the root reaches is opened and every asset
path in it goes through one check (:class:`skeletal.io.usd_guard.Confinement`): sublayers, references and payloads (plain or
``pkg.usdz[layer.usda]`` package paths, in variants too), value clips (``assetPaths``,
``manifestAssetPath``), template clips (``templateAssetPath``, expanded) and asset-valued attributes
(textures), as usd-core's resolver would resolve them. A URL, a path outside the model's folder (a
package's own file counts, wherever its member is) or anything but a regular file is refused in one
line naming the folder and the path; a layer that sets ``expressionVariables`` is refused (what its
``${VAR}`` paths name depends on the layer stack they are composed in). The stage then composes the
layers the walk opened (held in usd-core's registry, so a file swapped after the check is not read),
and every layer it used, clip layers included, is checked again once the Document is built.

Isolation: by default usd-core runs in a child process (:mod:`skeletal.io.isolation`, as Assimp does)
under memory, CPU and wall-clock limits, so that a stage that composes a million prims from a few
kilobytes, or a layer that blocks, costs a ModelError, never the caller. usd-core's diagnostics
(multi-line reports on stderr) are captured and come back as one-line warnings.

>>> doc = read_usd("hero.usdc")                    # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses

import os
import sys
import warnings
from dataclasses import dataclass

import numpy as np

from skeletal.document import (
    Animation,
    Channel,
    Document,
    Material,
    Mesh,
    MorphTarget,
    Node,
    Primitive,
    PropertyTrack,
    Skin,
)
from skeletal.errors import ModelError
from skeletal.io.files import check_regular
from skeletal.io.isolation import Job, Limits, run_isolated
from skeletal.io.usd_guard import Confinement, Diagnostics, composed_prims, first_line
from skeletal.io.pointer import curve_pointer
from skeletal.quat import compose_trs, decompose_trs, quat_mul

__all__ = ["USD_SUFFIXES", "import_pxr", "read_usd", "Limits"]

#: File suffixes read by this module.
USD_SUFFIXES = (".usd", ".usda", ".usdc", ".usdz")

INSTALL_HINT = 'USD needs usd-core: pip install "skeletal[usd]"'


def import_pxr(file: str | None = None):
    """The ``pxr`` modules (Usd, UsdGeom, UsdSkel, Sdf, Gf, Vt); ModelError with the install hint when
    usd-core is missing."""
    global _THREADS_AT_PREPARE, _POOL_UNKNOWN
    first = _THREADS_AT_PREPARE is None and not _POOL_UNKNOWN
    loaded_before = "pxr.Usd" in sys.modules or "pxr.Work" in sys.modules
    try:
        from pxr import Gf, Sdf, Usd, UsdGeom, UsdSkel, Vt, Work  # noqa: F401 - an import test: the modules are imported again where used
    except ImportError:
        raise ModelError(file, None, INSTALL_HINT) from None
    import pxr

    if first and loaded_before:
        # Someone imported usd-core before skeletal did and may have opened stages: its worker pool
        # may be running, and a forked reader would wait for workers that do not exist.
        _POOL_UNKNOWN = True
    elif first:
        # No stage opened yet. usd-core's work runs on this thread from now on (no worker pool is
        # started), so that a reader child forked later never inherits a pool's state.
        Work.SetConcurrencyLimit(1)
        _THREADS_AT_PREPARE = _thread_count()
    return pxr


#: Address space usd-core reserves in a process without using it (its Sdf path pools reserve about
#: 400 MB of virtual memory when the first layer opens, besides the 540 MB its libraries map on
#: import): added to the isolated child's memory limit, which counts address space.
ADDRESS_RESERVE = 640 << 20

# Z-up -> Y-up: a -90 degree turn about X (x, y, z) -> (x, z, -y).
_Z_TO_Y = np.array([-np.sqrt(0.5), 0.0, 0.0, np.sqrt(0.5)])


def read_usd(path: str | os.PathLike, *, isolate: bool = True, limits: Limits | None = None) -> Document:
    """Read a USD stage's skeletons, animations and meshes (see the module docstring).

    ``isolate`` (the default) runs usd-core in a child process under ``limits``
    (:class:`skeletal.io.isolation.Limits`: memory, CPU time, wall clock), so that a file that makes
    the library abort, exhaust memory or hang gives a :class:`ModelError`; ``isolate=False`` reads
    in this process (trusted files only: no limits, but the same confinement to the model's folder).

    >>> doc = read_usd("hero.usda")                  # doctest: +SKIP
    >>> [a.name for a in doc.animations]             # doctest: +SKIP
    ['Walk']
    """
    file = os.fspath(path)
    import_pxr(file)
    try:
        check_regular(file)
        size = os.path.getsize(file)
    except OSError as exc:
        raise ModelError(file, None, f"cannot read the file: {exc.strerror or exc}") from None
    if isolate:
        job = Job("usd-core", __name__, "_work", (file,), size=size, reserve=ADDRESS_RESERVE)
        limits = limits or Limits()
        if limits.method is None and _threads_started():
            limits = dataclasses.replace(limits, method="spawn")
        try:
            doc = run_isolated(file, job, limits, prepare=_prepare_parent)
        except ModelError as exc:
            hint = _address_space_hint()
            if hint and ("crashed" in exc.detail or "aborted" in exc.detail):
                raise ModelError(file, exc.where, f"{exc.detail}; {hint}") from None
            raise
        doc.path = file
        return doc
    with Diagnostics() as diagnostics, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        doc = _read_in_process(file)
    for w in caught:
        warnings.warn(w.message, w.category, stacklevel=2)
    for line in diagnostics.lines(file):
        warnings.warn(line, stacklevel=2)
    return doc


def _address_space_hint() -> str | None:
    """What to say when this process's address-space limit (``ulimit -v``) leaves usd-core less than
    it maps on its own, else None."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft == resource.RLIM_INFINITY:
            return None
        with open("/proc/self/statm", "rb") as f:
            mapped = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (ImportError, OSError, ValueError, IndexError):
        return None
    if mapped + ADDRESS_RESERVE <= soft:
        return None
    return (f"this process may map {soft >> 20} MB (ulimit -v) and already maps {mapped >> 20} MB, which leaves "
            f"usd-core less than the {ADDRESS_RESERVE >> 20} MB of address space it reserves for itself")


def _read_in_process(file: str) -> Document:
    """Confine, compose and convert in this process (the isolated child's work too)."""
    from pxr import Tf

    try:
        return _Reader(file).document()
    except (TypeError, ValueError, IndexError, KeyError, AttributeError, Tf.ErrorException) as exc:
        # Backstop found by fuzzing (tests/fuzz/regressions/usd): an attribute authored with another
        # type than the schema's ("matriz4d" for a matrix4d) reaches numpy as an UnregisteredValue;
        # skel:skeleton authored as an attribute makes pxr raise on GetTargets().
        # One ModelError instead of a traceback; the reader's own checks name the prim where they can.
        raise ModelError(file, None, f"an attribute holds a value of an unexpected type or shape "
                                     f"({type(exc).__name__}: {first_line(exc)[:200]})") from None


def _work(file: str) -> tuple:
    """The isolated child's work: the message :func:`skeletal.io.isolation.run_isolated` expects."""
    with Diagnostics() as diagnostics, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            doc = _read_in_process(file)
        except ModelError as exc:
            return ("model_error", exc.where, exc.detail)
        except MemoryError:
            return ("memory",)
        except RecursionError:
            return ("model_error", None, "the stage is nested too deeply to convert")
        except Exception as exc:  # any other failure is the file's, reported in one line
            return ("model_error", None, f"usd-core failed: {type(exc).__name__}: {first_line(exc)[:200]}")
    notes = [(str(w.message), w.category.__name__) for w in caught]
    notes += [(line, "UserWarning") for line in diagnostics.lines(file)]
    return ("ok", doc, notes)


def _prepare_parent() -> None:
    """Import usd-core's modules here, once, so that every forked child inherits them."""
    from pxr import Ar, Sdf, Tf, Usd, UsdGeom, UsdSkel, UsdUtils  # noqa: F401 - imported for the children


#: Threads of this process when usd-core was first imported through :func:`import_pxr` (None: not yet).
_THREADS_AT_PREPARE: int | None = None
#: usd-core was imported by other code before :func:`import_pxr`: whether its pool runs is unknown.
_POOL_UNKNOWN = False


def _thread_count() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 0


def _threads_started() -> bool:
    """Whether threads started in this process since usd-core was first imported for the children:
    usd-core's own worker pool (an export to USD, an in-process read) or another library's. A fork
    copies only the calling thread, and usd-core's pool state with it: a forked child then waits for
    workers that do not exist (seen: reads that hung until the 120 s timeout after a USD export in
    the same process), and so does a process where other code imported usd-core before skeletal
    did (its pool's state is unknown). Such a process starts its child fresh instead (the spawn
    method: about a second more)."""
    if _POOL_UNKNOWN:
        return True
    if _THREADS_AT_PREPARE is None or not _thread_count():
        return False
    return _thread_count() > _THREADS_AT_PREPARE


#: The range of ``timeCodesPerSecond`` read (film is 24, mocap up to a few hundred; 1e-9 turns a
#: thousand time codes into a clip of 1e12 s that no command could sample).
MIN_TIME_CODES_PER_SECOND = 1e-3
MAX_TIME_CODES_PER_SECOND = 1e6

#: Animation arrays may take this many bytes, or this many times the bytes of the stage's layers.
SAMPLE_BUDGET_FLOOR = 256 << 20
SAMPLE_BUDGET_RATIO = 64

#: Most prims a stage may compose (a character has hundreds to a few thousand): a small file whose
#: references nest in pairs composes 2**levels prims, gigabytes in usd-core, before any check of ours.
#: Raise it for trusted files that really are that large.
MAX_COMPOSED_PRIMS = 250_000


def _gf_matrices(value) -> np.ndarray:
    """Gf matrices (row vectors, translation in the last row) -> (N, 4, 4) float64 row-major
    column-vector matrices (skeletal's convention)."""
    m = np.array(value, dtype=np.float64).reshape(-1, 4, 4)
    return np.ascontiguousarray(m.transpose(0, 2, 1))


@dataclass
class _SkelInfo:
    prim_path: str
    joint_tokens: list[str]
    nodes: np.ndarray  # (J,) document node index of each joint
    bind: np.ndarray  # (J, 4, 4) skeleton-space bind matrices
    anim_paths: list[str]  # the SkelAnimation prims it plays, the bound one first


class _Reader:
    def __init__(self, file: str):
        self.file = file
        self.nodes: list[Node] = []
        self.meshes: list[Mesh] = []
        self.skins: list[Skin] = []
        self.node_of_prim: dict[str, int] = {}
        self.skeletons: dict[str, _SkelInfo] = {}
        self.mesh_nodes: list[tuple[int, object, _SkelInfo | None]] = []  # (node, mesh prim, skeleton)
        self.blend_names: dict[int, list[str]] = {}  # mesh node -> its blend shape names
        self.materials: list[Material] = []
        self.material_of: dict[tuple, int] = {}

    def fail(self, where, detail: str):
        return ModelError(self.file, f"<{where}>" if where else None, detail)

    # -- top level ------------------------------------------------------------------------------

    def document(self) -> Document:
        from pxr import Tf, Usd, UsdGeom

        self.confinement = Confinement(self.file)
        root = self.confinement.walk()
        prims = composed_prims(self.confinement, root, MAX_COMPOSED_PRIMS)
        if prims > MAX_COMPOSED_PRIMS:
            size = sum(os.path.getsize(p) for p in self.confinement.allowed if os.path.isfile(p))
            raise ModelError(self.file, None, f"its references compose more than {MAX_COMPOSED_PRIMS:,} prims from "
                                              f"{size:,} bytes of layers (skeletal.io.usd.MAX_COMPOSED_PRIMS)")
        try:
            self.stage = Usd.Stage.Open(root, self.confinement.context, Usd.Stage.LoadAll)
        except Tf.ErrorException as exc:
            raise ModelError(self.file, None, f"cannot open the stage: {first_line(exc)}") from None
        if self.stage is None:
            raise ModelError(self.file, None, "cannot open the stage")
        stage = self.stage
        self.tcps = float(stage.GetTimeCodesPerSecond()) or 24.0
        if not MIN_TIME_CODES_PER_SECOND <= self.tcps <= MAX_TIME_CODES_PER_SECOND:
            raise self._rate_error()
        self.start = float(stage.GetStartTimeCode()) if stage.HasAuthoredTimeCodeRange() else 0.0
        self.held = stage.GetInterpolationType() == Usd.InterpolationTypeHeld
        self.pointer_rest: dict[str, np.ndarray] = {}  # the named float curves' (custom attributes) rest: 0
        roots: list[int] = []
        # Depth-first, parents before children, with an explicit stack (no recursion limit to hit).
        stack = [(child, -1) for child in reversed(stage.GetPseudoRoot().GetChildren())]
        while stack:
            prim, parent = stack.pop()
            index = self._visit(prim, parent, roots)
            if index is not None:
                stack.extend((child, index) for child in reversed(prim.GetChildren()))
        for node_index, prim, skel in self.mesh_nodes:
            self._mesh(node_index, prim, skel)
        animations = self._animations()
        self._apply_units_and_axes(roots, animations, UsdGeom.GetStageUpAxis(stage), UsdGeom.GetStageMetersPerUnit(stage))
        self.confinement.verify(stage)  # clip layers open as their values are read: checked last
        return Document(
            path=self.file, nodes=self.nodes, meshes=self.meshes, skins=self.skins, animations=animations,
            scenes=[roots], scene=0, materials=self.materials, pointer_rest=self.pointer_rest,
            asset_info={"generator": "usd", "upAxis": str(UsdGeom.GetStageUpAxis(stage)),
                        "metersPerUnit": float(UsdGeom.GetStageMetersPerUnit(stage))},
        )

    def _rate_error(self) -> ModelError:
        """The refusal of a stage whose timeCodesPerSecond is out of range, with the clip it would make."""
        from pxr import Usd, UsdSkel

        span = 0.0
        for prim in self.stage.Traverse(Usd.PrimDefaultPredicate):
            if prim.IsA(UsdSkel.Animation):
                for attr in prim.GetAttributes():
                    samples = attr.GetTimeSamples()
                    if len(samples) > 1:
                        span = max(span, float(samples[-1]) - float(samples[0]))
        seconds = span / self.tcps if self.tcps > 0 else float("inf")
        return ModelError(self.file, None, f"timeCodesPerSecond is {self.tcps:g}, outside {MIN_TIME_CODES_PER_SECOND:g} "
                                           f"to {MAX_TIME_CODES_PER_SECOND:g}: its {span:g} time codes would be a clip of "
                                           f"{seconds:.3g} s, {seconds * 30:.3g} frames at 30 fps")

    def _add_node(self, name: str, parent: int, matrix: np.ndarray) -> int:
        t, q, s = decompose_trs(matrix)
        node = Node(name=name, translation=t, rotation=q, scale=s, parent=parent)
        self.nodes.append(node)
        index = len(self.nodes) - 1
        if parent >= 0:
            self.nodes[parent].children.append(index)
        return index

    def _visit(self, prim, parent: int, roots: list[int]) -> int | None:
        """The node of ``prim`` (under node ``parent``), or None for a prim that is not one (nor its
        children)."""
        from pxr import Tf, Usd, UsdGeom, UsdSkel

        if not prim.IsActive() or not prim.IsDefined() or prim.IsAbstract():
            return None
        if not (prim.IsA(UsdGeom.Xformable) or prim.IsA(UsdGeom.Scope) or prim.GetTypeName() == ""):
            return None  # materials, shaders, SkelAnimation, BlendShape, GeomSubset...
        path = str(prim.GetPath())
        matrix = np.eye(4)
        if prim.IsA(UsdGeom.Xformable):
            try:
                gf = UsdGeom.Xformable(prim).GetLocalTransformation(Usd.TimeCode.EarliestTime())
            except Tf.ErrorException as exc:
                raise self.fail(path, f"bad transform: {first_line(exc)}") from None
            matrix = _gf_matrices(gf)[0]
            if not np.all(np.isfinite(matrix)):
                raise self.fail(path, "transform is not finite")
        index = self._add_node(prim.GetName(), parent, matrix)
        self.node_of_prim[path] = index
        if parent < 0:
            roots.append(index)
        if prim.IsA(UsdSkel.Skeleton):
            self._skeleton(prim, index)
        elif prim.IsA(UsdGeom.Mesh):
            self.mesh_nodes.append((index, prim, None))
        return index

    # -- skeletons ------------------------------------------------------------------------------

    def _skeleton(self, prim, skel_node: int) -> None:
        from pxr import UsdSkel

        path = str(prim.GetPath())
        skel = UsdSkel.Skeleton(prim)
        tokens = [str(t) for t in (skel.GetJointsAttr().Get() or [])]
        if not tokens:
            raise self.fail(path, "Skeleton has no joints")
        if len(set(tokens)) != len(tokens):
            dup = next(t for t in tokens if tokens.count(t) > 1)
            raise self.fail(path, f"joint {dup!r} is listed twice in joints")
        n = len(tokens)
        index = {t: i for i, t in enumerate(tokens)}
        parents = np.full(n, -1, dtype=np.int64)
        for i, t in enumerate(tokens):
            head = t.rsplit("/", 1)[0] if "/" in t else None
            while head is not None and head not in index:  # UsdSkel: the nearest listed ancestor path
                head = head.rsplit("/", 1)[0] if "/" in head else None
            if head is not None:
                parents[i] = index[head]
        names_attr = skel.GetJointNamesAttr().Get() if skel.GetJointNamesAttr() else None
        names = [str(x) for x in names_attr] if names_attr is not None and len(names_attr) == n else \
            [t.rsplit("/", 1)[-1] for t in tokens]

        bind_value = skel.GetBindTransformsAttr().Get()
        rest_value = skel.GetRestTransformsAttr().Get()
        bind = _gf_matrices(bind_value) if bind_value is not None and len(bind_value) else None
        rest = _gf_matrices(rest_value) if rest_value is not None and len(rest_value) else None
        for label, m in (("bindTransforms", bind), ("restTransforms", rest)):
            if m is not None and len(m) != n:
                raise self.fail(path, f"{label} has {len(m)} matrices for {n} joints")
            if m is not None and not np.all(np.isfinite(m)):
                raise self.fail(path, f"{label} is not finite")
        if rest is None:  # local rest from the skeleton-space binds (identity without either)
            rest = np.broadcast_to(np.eye(4), (n, 4, 4)).copy()
            if bind is not None:
                for i in range(n):
                    rest[i] = bind[i] if parents[i] < 0 else _inverse(bind[parents[i]]) @ bind[i]
        order = sorted(range(n), key=lambda i: tokens[i].count("/"))  # parents before children
        nodes = np.empty(n, dtype=np.int64)
        for i in order:
            parent = skel_node if parents[i] < 0 else int(nodes[parents[i]])
            nodes[i] = self._add_node(names[i], parent, rest[i])
        if bind is None:  # skeleton-space rest pose
            bind = np.empty((n, 4, 4))
            for i in order:
                bind[i] = rest[i] if parents[i] < 0 else bind[parents[i]] @ rest[i]

        anim_paths = []
        bound = self._animation_source(prim)
        if bound is not None:
            anim_paths.append(bound)
        self.skeletons[path] = _SkelInfo(path, tokens, nodes, bind, anim_paths)

    def _animation_source(self, prim) -> str | None:
        """The SkelAnimation bound to a skeleton (its own ``skel:animationSource`` or an ancestor's)."""
        from pxr import UsdSkel

        p = prim
        while p and p.IsValid() and not p.IsPseudoRoot():
            rel = p.GetRelationship("skel:animationSource")
            if rel and rel.GetTargets():
                target = rel.GetTargets()[0]
                anim = self.stage.GetPrimAtPath(target)
                if not anim or not anim.IsA(UsdSkel.Animation):
                    raise self.fail(str(prim.GetPath()), f"skel:animationSource names {target}, not a SkelAnimation")
                return str(target)
            p = p.GetParent()
        return None

    def _binding(self, prim, name: str):
        """A skel binding property of ``prim`` or of its nearest ancestor that has it (inherited)."""
        p = prim
        while p and p.IsValid() and not p.IsPseudoRoot():
            prop = p.GetProperty(name)
            if prop and (prop.HasAuthoredValue() if hasattr(prop, "HasAuthoredValue") else prop.GetTargets()):
                return prop
            p = p.GetParent()
        return None

    # -- meshes ---------------------------------------------------------------------------------

    def _mesh(self, node_index: int, prim, _skel) -> None:
        from pxr import Usd, UsdGeom

        path = str(prim.GetPath())
        mesh = UsdGeom.Mesh(prim)
        earliest = Usd.TimeCode.EarliestTime()  # points may be authored as time samples only
        points = mesh.GetPointsAttr().Get(earliest)
        if points is None or len(points) == 0:
            return
        points = np.array(points, dtype=np.float32).reshape(-1, 3)
        v = len(points)
        counts = np.array(mesh.GetFaceVertexCountsAttr().Get() or [], dtype=np.int64)
        corners = np.array(mesh.GetFaceVertexIndicesAttr().Get() or [], dtype=np.int64)
        if counts.sum() != len(corners) or np.any(counts < 0):
            raise self.fail(path, f"faceVertexCounts add up to {int(counts.sum())}, faceVertexIndices has {len(corners)}")
        if len(corners) and (corners.min() < 0 or corners.max() >= v):
            raise self.fail(path, f"faceVertexIndices has index {int(corners.max() if corners.max() >= v else corners.min())}, "
                                  f"the mesh has {v} points")
        if not np.all(np.isfinite(points)):
            raise self.fail(path, "points are not finite")
        left = mesh.GetOrientationAttr().Get() == "leftHanded"

        primvars = UsdGeom.PrimvarsAPI(prim)
        normals, n_interp = None, None
        pv = primvars.GetPrimvar("normals")
        if pv and pv.HasAuthoredValue():
            normals, n_interp = pv.ComputeFlattened(earliest), pv.GetInterpolation()
        elif mesh.GetNormalsAttr().HasAuthoredValue():
            normals, n_interp = mesh.GetNormalsAttr().Get(earliest), mesh.GetNormalsInterpolation()
        st, st_interp = None, None
        pv = primvars.GetPrimvar("st")
        if pv and pv.HasAuthoredValue():
            st, st_interp = pv.ComputeFlattened(), pv.GetInterpolation()
        if normals is not None:
            normals = np.array(normals, dtype=np.float32).reshape(-1, 3)
        if st is not None:
            st = np.array(st, dtype=np.float32).reshape(-1, 2)

        # Per-point data may be expanded to face corners (unwelding) when a primvar is face-varying.
        face_of_corner = np.repeat(np.arange(len(counts)), counts)
        unweld = n_interp in ("faceVarying", "uniform") or st_interp in ("faceVarying", "uniform")
        point_of_vertex = corners if unweld else np.arange(v)

        def per_vertex(values, interp, label):
            if values is None:
                return None
            expect = {"vertex": v, "varying": v, "faceVarying": len(corners), "uniform": len(counts), "constant": 1}.get(interp)
            if expect is None or len(values) != expect:
                raise self.fail(path, f"{label} has {len(values)} values for {interp} interpolation ({expect} expected)")
            if interp in ("vertex", "varying"):
                return values[point_of_vertex]
            if interp == "faceVarying":
                return values
            if interp == "uniform":
                return values[face_of_corner]
            return np.broadcast_to(values, (len(point_of_vertex), values.shape[1])).copy()

        prim_out = Primitive(positions=np.ascontiguousarray(points[point_of_vertex]))
        prim_out.normals = per_vertex(normals, n_interp, "normals")
        uv = per_vertex(st, st_interp, "primvars:st")
        if uv is not None:
            uv = uv.copy()
            uv[:, 1] = 1.0 - uv[:, 1]
            prim_out.attributes["TEXCOORD_0"] = uv
        prim_out.indices = _triangulate(counts, corners if not unweld else np.arange(len(corners)), left)
        prim_out.material = self._material(prim, mesh, primvars)

        skin_index = self._skin(prim, path, v, prim_out, point_of_vertex)
        names, targets = self._blend_shapes(prim, path, v, point_of_vertex)
        prim_out.targets = targets
        self.meshes.append(Mesh(prim.GetName(), [prim_out], np.zeros(len(targets)) if targets else None, names or None))
        node = self.nodes[node_index]
        node.mesh = len(self.meshes) - 1
        node.skin = skin_index
        if targets:
            self.blend_names[node_index] = names

    def _material(self, prim, mesh, primvars) -> int:
        """A material from the mesh's constant ``displayColor``/``displayOpacity`` (grey without) and
        ``doubleSided``; meshes that look alike share one."""
        color = np.array([0.8, 0.8, 0.8, 1.0])
        for name, sl in (("displayColor", slice(0, 3)), ("displayOpacity", slice(3, 4))):
            pv = primvars.GetPrimvar(name)
            if pv and pv.HasAuthoredValue():
                value = np.array(pv.ComputeFlattened() or [], dtype=np.float64).reshape(-1)
                width = sl.stop - sl.start
                if len(value) >= width and np.all(np.isfinite(value[:width])):
                    color[sl] = np.clip(value[:width], 0.0, 1.0)  # the first colour when not constant
        double = bool(mesh.GetDoubleSidedAttr().Get())
        key = (tuple(color.round(6)), double)
        if key not in self.material_of:
            self.materials.append(Material(f"material{len(self.materials)}", base_color_factor=color,
                                           metallic_factor=0.0, roughness_factor=1.0, double_sided=double))
            self.material_of[key] = len(self.materials) - 1
        return self.material_of[key]

    def _skin(self, prim, path: str, v: int, out: Primitive, point_of_vertex: np.ndarray) -> int | None:
        from pxr import UsdGeom, UsdSkel

        api = UsdSkel.BindingAPI(prim)
        ji_attr = prim.GetAttribute("primvars:skel:jointIndices")
        jw_attr = prim.GetAttribute("primvars:skel:jointWeights")
        has_ji = bool(ji_attr) and ji_attr.HasAuthoredValue()
        has_jw = bool(jw_attr) and jw_attr.HasAuthoredValue()
        if not has_ji and not has_jw:
            return None
        if has_ji != has_jw:
            raise self.fail(path, f"has {'jointIndices' if has_ji else 'jointWeights'} without "
                                  f"{'jointWeights' if has_ji else 'jointIndices'}")
        skel_rel = self._binding(prim, "skel:skeleton")
        if skel_rel is None:
            raise self.fail(path, "has joint influences but no skel:skeleton binding (missing skeleton)")
        target = str(skel_rel.GetTargets()[0])
        skel = self.skeletons.get(target)
        if skel is None:
            raise self.fail(path, f"skel:skeleton names {target}, which is not a Skeleton of the stage (missing joints)")
        joints_prop = self._binding(prim, "skel:joints")
        if joints_prop is not None:
            wanted = [str(t) for t in joints_prop.Get()]
            lookup = {t: i for i, t in enumerate(skel.joint_tokens)}
            missing = [t for t in wanted if t not in lookup]
            if missing:
                raise self.fail(path, f"skel:joints names {missing[0]!r}, not a joint of <{target}> (missing joints)")
            order = np.array([lookup[t] for t in wanted], dtype=np.int64)
        else:
            order = np.arange(len(skel.joint_tokens))
        ji, jw = UsdGeom.Primvar(ji_attr), UsdGeom.Primvar(jw_attr)
        size_i, size_w = ji.GetElementSize(), jw.GetElementSize()
        indices = np.array(ji_attr.Get() or [], dtype=np.int64)
        weights = np.array(jw_attr.Get() or [], dtype=np.float64)
        interp = ji.GetInterpolation()
        if size_i != size_w or size_i < 1:
            raise self.fail(path, f"jointIndices elementSize {size_i} and jointWeights elementSize {size_w} differ")
        if interp != jw.GetInterpolation() or interp not in ("vertex", "constant"):
            raise self.fail(path, f"joint influences interpolation {interp!r}/{jw.GetInterpolation()!r}: expected 'vertex' or 'constant' for both")
        rows = v if interp == "vertex" else 1
        for label, arr in (("primvars:skel:jointIndices", indices), ("primvars:skel:jointWeights", weights)):
            if len(arr) != rows * size_i:
                raise self.fail(path, f"{label} has {len(arr)} values, {rows} {'vertices' if interp == 'vertex' else 'row'} "
                                      f"x elementSize {size_i} need {rows * size_i}")
        if len(indices) and (indices.min() < 0 or indices.max() >= len(order)):
            bad = int(indices.max() if indices.max() >= len(order) else indices.min())
            raise self.fail(path, f"primvars:skel:jointIndices has index {bad}, out of range for {len(order)} joints")
        if not np.all(np.isfinite(weights)):
            raise self.fail(path, "primvars:skel:jointWeights is not finite")
        indices = indices.reshape(rows, size_i)
        weights = weights.reshape(rows, size_i)
        if interp == "constant":
            indices = np.broadcast_to(indices, (v, size_i))
            weights = np.broadcast_to(weights, (v, size_i))
        k = max(4, -(-size_i // 4) * 4)  # whole sets of four, as glTF stores them
        j_out = np.zeros((v, k), np.uint32)
        w_out = np.zeros((v, k), np.float32)
        j_out[:, :size_i] = indices
        w_out[:, :size_i] = weights
        out.joints = np.ascontiguousarray(j_out[point_of_vertex])
        out.weights = np.ascontiguousarray(w_out[point_of_vertex])

        geom = np.eye(4)
        for geom_attr in (api.GetGeomBindTransformAttr(), prim.GetAttribute("skel:geomBindTransform")):  # new, old name
            if geom_attr and geom_attr.HasAuthoredValue():
                geom = _gf_matrices(geom_attr.Get())[0]
                break
        inverse_bind = np.stack([_inverse(skel.bind[j]) @ geom for j in order])
        if not np.all(np.isfinite(inverse_bind)):
            raise self.fail(target, "bindTransforms has a matrix that cannot be inverted")
        self.skins.append(Skin(f"{prim.GetName()}_skin", skel.nodes[order].astype(np.int64), inverse_bind,
                               skeleton=self.node_of_prim.get(target)))
        return len(self.skins) - 1

    def _blend_shapes(self, prim, path: str, v: int, point_of_vertex: np.ndarray) -> tuple[list[str], list[MorphTarget]]:
        from pxr import UsdSkel

        names_attr = prim.GetAttribute("skel:blendShapes")
        rel = prim.GetRelationship("skel:blendShapeTargets")
        if not names_attr or not names_attr.HasAuthoredValue():
            return [], []
        names = [str(x) for x in names_attr.Get()]
        targets_paths = rel.GetTargets() if rel else []
        if len(targets_paths) != len(names):
            raise self.fail(path, f"skel:blendShapes has {len(names)} names, skel:blendShapeTargets {len(targets_paths)} targets")
        out = []
        for name, tp in zip(names, targets_paths):
            shape_prim = self.stage.GetPrimAtPath(tp)
            if not shape_prim or not shape_prim.IsA(UsdSkel.BlendShape):
                raise self.fail(path, f"blend shape {name!r}: {tp} is not a BlendShape")
            shape = UsdSkel.BlendShape(shape_prim)
            offsets = np.array(shape.GetOffsetsAttr().Get() or [], dtype=np.float32).reshape(-1, 3)
            normal_offsets = shape.GetNormalOffsetsAttr().Get()
            normal_offsets = np.array(normal_offsets, dtype=np.float32).reshape(-1, 3) if normal_offsets else None
            idx_attr = shape.GetPointIndicesAttr()
            idx_value = idx_attr.Get() if idx_attr and idx_attr.HasAuthoredValue() else None
            if idx_value is not None:  # sparse (an authored empty list moves no point)
                idx = np.array(idx_value, dtype=np.int64)
                if len(idx) and (idx.min() < 0 or idx.max() >= v):
                    raise self.fail(str(tp), f"pointIndices has index {int(idx.max() if idx.max() >= v else idx.min())}, the mesh has {v} points")
            else:
                idx = np.arange(v)
            if len(offsets) != len(idx):
                raise self.fail(str(tp), f"offsets has {len(offsets)} values for {len(idx)} points")
            if normal_offsets is not None and len(normal_offsets) != len(idx):
                raise self.fail(str(tp), f"normalOffsets has {len(normal_offsets)} values for {len(idx)} points")
            if shape.GetInbetweens():
                warnings.warn(f"{os.path.basename(self.file)}: <{tp}>: inbetween shapes are ignored", stacklevel=4)
            dense = np.zeros((v, 3), np.float32)
            dense[idx] = offsets
            target = MorphTarget(position=np.ascontiguousarray(dense[point_of_vertex]))
            if normal_offsets is not None:
                dn = np.zeros((v, 3), np.float32)
                dn[idx] = normal_offsets
                target.normal = np.ascontiguousarray(dn[point_of_vertex])
            out.append(target)
        return names, out

    # -- animations -----------------------------------------------------------------------------

    def _animations(self) -> list[Animation]:
        from pxr import Usd, UsdSkel

        anim_prims = [p for p in self.stage.Traverse(Usd.PrimDefaultPredicate) if p.IsA(UsdSkel.Animation)]
        order: list[str] = []
        for skel in self.skeletons.values():
            tokens = set(skel.joint_tokens)
            for p in anim_prims:
                path = str(p.GetPath())
                joints = [str(t) for t in (UsdSkel.Animation(p).GetJointsAttr().Get() or [])]
                if path not in skel.anim_paths and joints and tokens.issuperset(joints):
                    skel.anim_paths.append(path)
            for path in skel.anim_paths:
                if path not in order:
                    order.append(path)
        # Bound animations first (in skeleton order), then the others.
        bound = [s.anim_paths[0] for s in self.skeletons.values() if s.anim_paths]
        order = [p for p in order if p in bound] + [p for p in order if p not in bound]
        animations = []
        for path in order:
            channels: list[Channel] = []
            for skel in self.skeletons.values():
                if path in skel.anim_paths:
                    channels += self._anim_channels(self.stage.GetPrimAtPath(path), skel)
            animation = Animation(self.stage.GetPrimAtPath(path).GetName(), channels)
            animation.properties = self._custom_curves(self.stage.GetPrimAtPath(path))
            animations.append(animation)
        return animations

    def _custom_curves(self, prim) -> list[PropertyTrack]:
        """A SkelAnimation's custom float attributes with time samples, as named float curves
        (``curve/<attribute name>``, e.g. ``curve/userProperties:foot_l``): sampled like the joints
        (seconds from the stage's start, held or linear as the stage interpolates)."""
        curves = []
        for attr in prim.GetAttributes():
            if not attr.IsCustom() or str(attr.GetTypeName()) not in ("float", "double", "half") \
                    or not attr.GetNumTimeSamples():
                continue
            tc = np.array(attr.GetTimeSamples(), np.float64)
            values = np.array([attr.Get(float(t)) for t in tc], np.float64)
            if not np.all(np.isfinite(values)):
                raise self.fail(str(prim.GetPath()), f"{attr.GetName()} is not finite")
            times = ((tc - min(self.start, float(tc[0]))) / self.tcps).astype(np.float32)
            keep = np.concatenate([[True], np.diff(times) > 0])
            pointer = curve_pointer(attr.GetName())
            self.pointer_rest.setdefault(pointer, np.zeros(1))
            curves.append(PropertyTrack(pointer, "STEP" if self.held else "LINEAR", times[keep], values[keep, None]))
        return curves

    def _times(self, attrs) -> np.ndarray:
        samples = sorted({float(t) for a in attrs if a for t in a.GetTimeSamples()})
        return np.array(samples if samples else [self.start], dtype=np.float64)

    def _charge(self, path: str, name: str, samples: int, count: int, width: int) -> None:
        """Refuse, before allocating, an animation array of ``samples`` x ``count`` x ``width``
        float64 values larger than :data:`SAMPLE_BUDGET_FLOOR` or :data:`SAMPLE_BUDGET_RATIO` times the
        layers' bytes (a crate file stores one array once and points every time sample at it)."""
        need = samples * count * width * 8
        layers = sum(os.path.getsize(p) for p in self.confinement.allowed if os.path.isfile(p))
        budget = max(SAMPLE_BUDGET_FLOOR, SAMPLE_BUDGET_RATIO * layers)
        if need > budget:
            raise self.fail(path, f"{name}: {samples:,} time samples x {count:,} values would need "
                                  f"{need / 1e9:.3g} GB, more than the {budget / 1e9:.3g} GB allowed for "
                                  f"{layers:,} bytes of layers")

    def _anim_channels(self, prim, skel: _SkelInfo) -> list[Channel]:
        from pxr import UsdSkel

        path = str(prim.GetPath())
        anim = UsdSkel.Animation(prim)
        joints = [str(t) for t in (anim.GetJointsAttr().Get() or [])]
        lookup = {t: i for i, t in enumerate(skel.joint_tokens)}
        columns = [(c, int(skel.nodes[lookup[t]])) for c, t in enumerate(joints) if t in lookup]
        attrs = {"translation": anim.GetTranslationsAttr(), "rotation": anim.GetRotationsAttr(), "scale": anim.GetScalesAttr()}
        weights_attr = anim.GetBlendShapeWeightsAttr()
        all_attrs = [a for a in (*attrs.values(), weights_attr) if a and a.HasAuthoredValue()]
        if not all_attrs:
            return []
        tc = self._times(all_attrs)
        origin = min(self.start, float(tc[0]))
        times = ((tc - origin) / self.tcps).astype(np.float32)
        keep = np.concatenate([[True], np.diff(times) > 0])  # samples closer than float32 seconds: the first
        tc, times = tc[keep], times[keep]
        kind = "STEP" if self.held else "LINEAR"
        channels = []
        for label, attr in attrs.items():
            if not attr or not attr.HasAuthoredValue():
                continue
            width = 4 if label == "rotation" else 3
            self._charge(path, attr.GetName(), len(tc), len(joints), width)
            values = np.empty((len(tc), len(joints), width), np.float64)
            for k, t in enumerate(tc):
                value = attr.Get(float(t))
                arr = np.array(value if value is not None else [], dtype=np.float64).reshape(-1, width)
                if len(arr) != len(joints):
                    raise self.fail(path, f"{attr.GetName()} has {len(arr)} values at time {t:g}, joints lists {len(joints)}")
                values[k] = arr
            if not np.all(np.isfinite(values)):
                raise self.fail(path, f"{attr.GetName()} is not finite")
            if label == "rotation":
                values /= np.maximum(np.linalg.norm(values, axis=2, keepdims=True), 1e-30)
            for c, node in columns:
                channels.append(Channel(node, label, kind, times, np.ascontiguousarray(values[:, c], np.float32)))
        # Blend shape weights -> one weights channel per mesh bound to this skeleton.
        if weights_attr and weights_attr.HasAuthoredValue():
            shape_names = [str(x) for x in (anim.GetBlendShapesAttr().Get() or [])]
            self._charge(path, "blendShapeWeights", len(tc), len(shape_names), 1)
            w = np.zeros((len(tc), len(shape_names)))
            for k, t in enumerate(tc):
                arr = np.array(weights_attr.Get(float(t)) or [], dtype=np.float64)
                if len(arr) != len(shape_names):
                    raise self.fail(path, f"blendShapeWeights has {len(arr)} values at time {t:g}, blendShapes lists {len(shape_names)}")
                w[k] = arr
            col = {n: i for i, n in enumerate(shape_names)}
            for node_index, names in self.blend_names.items():
                skin = self.nodes[node_index].skin
                if skin is None or self.skins[skin].skeleton != self.node_of_prim.get(skel.prim_path):
                    continue
                vals = np.zeros((len(tc), len(names)), np.float32)
                hit = False
                for i, n in enumerate(names):
                    if n in col:
                        vals[:, i] = w[:, col[n]]
                        hit = True
                if hit:
                    channels.append(Channel(node_index, "weights", kind, times, vals))
        return channels

    # -- units and axes -------------------------------------------------------------------------

    def _apply_units_and_axes(self, roots: list[int], animations: list[Animation], up: str, meters: float) -> None:
        scale = float(meters) if meters and np.isfinite(meters) and meters > 0 else 1.0
        turn = str(up).upper() == "Z"
        if scale == 1.0 and not turn:
            return
        q = _Z_TO_Y if turn else np.array([0.0, 0.0, 0.0, 1.0])
        m = np.eye(4)
        m[:3, :3] = scale * _rotation(q)
        root_set = set(roots)
        for r in roots:
            node = self.nodes[r]
            node.translation, node.rotation, node.scale = decompose_trs(m @ compose_trs(node.translation, node.rotation, node.scale))
        for anim in animations:
            for ch in anim.channels:
                if ch.node not in root_set:
                    continue
                if ch.path == "translation":
                    ch.values = (ch.values.astype(np.float64) @ m[:3, :3].T).astype(np.float32)
                elif ch.path == "rotation":
                    ch.values = quat_mul(q, ch.values.astype(np.float64)).astype(np.float32)
                elif ch.path == "scale":
                    ch.values = (ch.values.astype(np.float64) * scale).astype(np.float32)


def _rotation(q: np.ndarray) -> np.ndarray:
    from skeletal.quat import quat_to_matrix

    return quat_to_matrix(q)


def _inverse(m: np.ndarray) -> np.ndarray:
    try:
        return np.linalg.inv(m)
    except np.linalg.LinAlgError:
        return np.full((4, 4), np.nan)


def _triangulate(counts: np.ndarray, corners: np.ndarray, left_handed: bool) -> np.ndarray:
    """Fan triangles (I,) uint32 of polygons given by ``counts`` over ``corners``."""
    keep = counts >= 3
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])[keep]
    tris = (counts[keep] - 2)
    if tris.sum() == 0:
        return np.zeros(0, np.uint32)
    first = np.repeat(starts, tris)
    k = np.arange(int(tris.sum())) - np.repeat(np.cumsum(tris) - tris, tris) + 1
    a, b, c = corners[first], corners[first + k], corners[first + k + 1]
    if left_handed:
        b, c = c, b
    return np.stack([a, b, c], axis=1).reshape(-1).astype(np.uint32)
