"""USD (UsdSkel) writer: any :class:`~skeletal.asset.Asset` with a list of clips -> ``.usda``, ``.usdc``
or ``.usdz``, through Pixar's ``usd-core`` (the optional extra ``skeletal[usd]``).

The stage (Y up, metres, ``timeCodesPerSecond`` = the clips' key rate, else 30) holds one ``SkelRoot`` named
after the file:

* ``Skeleton``: *every* node of the rig is a joint (meshes, helpers and roots included, so rigid meshes
  and non-joint nodes keep moving), joint paths built from the node names made valid identifiers; the
  original names are kept in ``jointNames``; ``restTransforms`` are the rest pose, ``bindTransforms``
  the skins' bind matrices. Skins whose inverse binds disagree with a skeleton's binds by more than one
  matrix per mesh (``geomBindTransform``) get a skeleton of their own, playing the same animations.
* ``Animations/<clip>``: one ``SkelAnimation`` per clip with the joints the clip animates, sampled at
  the union of the clip's key times (plus a key just before each STEP key and samples of CUBICSPLINE
  tracks at 120 per second, at least 8 per key interval, so USD's linear interpolation plays the same motion), and blend shape weights.
  The first clip is bound (``skel:animationSource``); skeletal reads the others back as clips too.
  Rotations are ``quatf``; scales are ``half3`` as UsdSkel prescribes (three decimal digits).
* the clips' named float curves (``curve/<name>`` properties) as custom float attributes of their
  ``SkelAnimation``, sampled as the joints are (a key just before each STEP key, splines densely);
* One ``Mesh`` per primitive (triangles) with normals, ``primvars:st`` (t flipped), ``displayColor``
  from the base colour, ``SkelBindingAPI`` influences (``skel:joints`` in the skin's order, indices and
  weights with ``elementSize`` = influences per vertex) and ``BlendShape`` children for morph targets
  (sparse ``pointIndices``). A rigid mesh is bound to its node's joint with ``constant`` interpolation.

:func:`check_usd` runs usd-core's validators (what ``usdchecker`` runs) on a file.

>>> write_usd(skeletal.load("Soldier.glb"), "soldier.usdc")        # doctest: +SKIP
>>> check_usd("soldier.usdc")                                       # doctest: +SKIP
[]
"""

from __future__ import annotations

import os
import shutil
import tempfile
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from skeletal.anim.clip import Clip
from skeletal.errors import ClipError, ModelError
from skeletal.io.usd import import_pxr
from skeletal.anim.pose import world_matrices
from skeletal.quat import compose_trs
from skeletal.anim.sampling import sample

if TYPE_CHECKING:
    from skeletal.asset import Asset

__all__ = ["WRITE_SUFFIXES", "check_usd", "write_usd"]

#: Suffixes :func:`write_usd` writes.
WRITE_SUFFIXES = (".usda", ".usdc", ".usd", ".usdz")
#: A CUBICSPLINE track is written as samples (USD interpolates linearly between them): at least this
#: many per key interval, and at least :data:`SPLINE_FPS` per second.
SPLINE_STEPS = 8
SPLINE_FPS = 120.0
_STEP_EPS = 1e-4  # seconds: where a STEP key's held value ends, just before the next key


def _gf(m: np.ndarray) -> np.ndarray:
    """(N, 4, 4) skeletal (column-vector) matrices -> Gf layout (row vectors)."""
    return np.ascontiguousarray(np.asarray(m, dtype=np.float64).transpose(0, 2, 1))


def _identifiers(names: Sequence[str], parents: np.ndarray | None = None) -> list[str]:
    """Valid, sibling-unique USD identifiers for ``names`` (siblings by ``parents``; all unique if None)."""
    from pxr import Tf

    out: list[str] = []
    used: dict[int, set[str]] = {}
    for i, name in enumerate(names):
        key = -2 if parents is None else int(parents[i])
        taken = used.setdefault(key, set())
        base = Tf.MakeValidIdentifier(name or f"node{i}")
        ident, k = base, 1
        while ident in taken:
            ident, k = f"{base}_{k}", k + 1
        taken.add(ident)
        out.append(ident)
    return out


def _clip_times(clip: Clip) -> np.ndarray:
    """Sample times (seconds, float64) at which linear interpolation between samples replays ``clip``."""
    return _replay_times(clip.tracks)


def _replay_times(tracks) -> np.ndarray:
    """Sample times (seconds, float64) at which linear interpolation replays ``tracks`` (node or
    property tracks: anything with ``times`` and ``interpolation``)."""
    keys = [np.asarray(t.times, np.float64) for t in tracks]
    times = np.concatenate(keys + [np.zeros(1)]) if keys else np.zeros(1)
    extra = []
    for t in tracks:
        if t.interpolation == "STEP" and len(t.times) > 1:
            extra.append(np.asarray(t.times[1:], np.float64) - _STEP_EPS)
        if t.interpolation == "CUBICSPLINE" and len(t.times) > 1:
            k = np.asarray(t.times, np.float64)
            for a, span in zip(k[:-1], np.diff(k)):
                steps = max(SPLINE_STEPS, int(np.ceil(span * SPLINE_FPS)))
                extra.append(a + span * np.arange(1, steps) / steps)
    times = np.unique(np.concatenate([times] + extra))
    times = times[times >= 0]
    # One sample per float32 second value (a spline sample a hair from a key would repeat it).
    keep = np.concatenate([[True], np.diff(times.astype(np.float32)) > 1e-6])
    return times[keep]


def _time_codes(seconds: np.ndarray, rate: float) -> np.ndarray:
    """Time codes (float64) of ``seconds`` at ``rate`` codes a second, on the clip's frame grid where
    they lie on it: a whole code when within the float32 key times' precision of one (``15.96 s`` at 30
    is code 479 if the key was 479/30, not ``478.80000114``), else rounded to 1e-4 of a code."""
    codes = np.asarray(seconds, np.float64) * rate
    whole = np.round(codes)
    tolerance = np.minimum(5e-4, 2.4e-7 * np.abs(codes) + 1e-9)  # 2 float32 ulps, below a STEP key's offset (1e-4 s at 10 fps and up)
    return np.where(np.abs(codes - whole) <= tolerance, whole, np.round(codes, 4)) + 0.0  # + 0.0: no -0


def _write_curves(prim, clip: Clip, rate: float) -> None:
    """The clip's named float curves as custom float attributes of its SkelAnimation (what
    :mod:`skeletal.io.usd` reads back), sampled so that USD's linear interpolation replays them."""
    from pxr import Sdf, Usd

    from skeletal.io.pointer import CURVE_PREFIX
    from skeletal.anim.properties import PropertyLayout, sample_properties

    for track in getattr(clip, "properties", []):
        if not track.pointer.startswith(CURVE_PREFIX):
            continue  # material, light, camera properties: not in this USD writer
        name = track.pointer[len(CURVE_PREFIX):]
        if not Sdf.Path.IsValidNamespacedIdentifier(name):
            warnings.warn(f"clip {clip.name!r}: curve {name!r} is not a USD attribute name; left out", stacklevel=4)
            continue
        times = _replay_times([track])
        layout = PropertyLayout({track.pointer: np.zeros(1)})
        values = sample_properties(Clip("curve", [], properties=[track]), layout, times)[:, 0]
        attr = prim.CreateAttribute(name, Sdf.ValueTypeNames.Float, custom=True)
        for t, v in zip(times, values):
            attr.Set(float(v), Usd.TimeCode(float(t) * rate))


def _frame_rate(clips: Sequence[Clip]) -> float:
    """timeCodesPerSecond: the key rate of the first clip keyed uniformly at 10 to 240 keys a second
    without splines (a BVH's 120, a baked clip's 30), else 30 (viewers step whole time codes)."""
    from skeletal.anim.clip import clip_frame_time

    for clip in clips:
        if any(t.interpolation == "CUBICSPLINE" for t in clip.tracks):
            continue
        step = clip_frame_time(clip)
        if step and 10.0 <= 1.0 / step <= 240.0:
            return round(1.0 / step, 6)
    return 30.0


class _SkeletonGroup:
    """One Skeleton prim: skeleton-space bind matrices, which joints a skin has claimed."""

    def __init__(self, rest_world: np.ndarray):
        self.bind = rest_world.copy()
        self.claimed = np.zeros(len(rest_world), dtype=bool)

    def fit(self, joints: np.ndarray, inverse_bind: np.ndarray) -> np.ndarray | None:
        """The geomBindTransform that makes this skeleton's binds reproduce ``inverse_bind`` for
        ``joints`` (claiming the unclaimed joints), or None when they cannot."""
        claimed = self.claimed[joints]
        geom = np.eye(4)
        if claimed.any():
            j = int(np.flatnonzero(claimed)[0])
            geom = self.bind[joints[j]] @ inverse_bind[j]
            for k in np.flatnonzero(claimed):
                g = self.bind[joints[k]] @ inverse_bind[k]
                if not np.allclose(g, geom, rtol=1e-6, atol=1e-6 * max(1.0, float(np.abs(geom).max()))):
                    return None
        try:
            for k in np.flatnonzero(~claimed):
                self.bind[joints[k]] = geom @ np.linalg.inv(inverse_bind[k])
        except np.linalg.LinAlgError:
            return None
        self.claimed[joints] = True
        return geom


def write_usd(asset: Asset, path: str | os.PathLike, clips: Sequence[Clip | str | int] | None = None) -> None:
    """Write ``asset`` with ``clips`` (Clip objects or the asset's clip names/indices; default: all
    of its clips) as a UsdSkel stage; the suffix picks the format (``.usda`` text, ``.usdc``/``.usd``
    binary, ``.usdz`` package). See the module docstring for the layout.

    Raises :class:`skeletal.ClipError` for an additive clip or duplicate clip names and
    :class:`skeletal.ModelError` when usd-core is missing or cannot write the file.

    >>> write_usd(skeletal.demo.demo_asset(), "demo.usda")           # doctest: +SKIP
    """
    out = os.fspath(path)
    import_pxr(out)
    suffix = os.path.splitext(out)[1].lower()
    if suffix not in WRITE_SUFFIXES:
        raise ModelError(out, None, f"USD files end in {', '.join(WRITE_SUFFIXES)}")
    chosen = asset.clips if clips is None else [c if isinstance(c, Clip) else asset.clip(c) for c in clips]
    names = [c.name for c in chosen]
    if len(set(names)) != len(names):
        raise ClipError(f"clip names must be unique in one file, got {sorted({n for n in names if names.count(n) > 1})} more than once")
    for c in chosen:
        if c.additive:
            raise ClipError(f"clip {c.name!r} is additive: UsdSkel has no additive animations; apply it to a base clip first")
    if suffix == ".usdz":
        with tempfile.TemporaryDirectory(prefix="skeletal-usdz-") as tmp:
            inner = os.path.join(tmp, os.path.splitext(os.path.basename(out))[0] + ".usdc")
            _write_stage(asset, inner, chosen)
            from pxr import Sdf, UsdUtils

            tmp_out = os.path.join(tmp, "package.usdz")
            if not UsdUtils.CreateNewUsdzPackage(Sdf.AssetPath(inner), tmp_out):
                raise ModelError(out, None, "usd-core could not write the .usdz package")
            shutil.copyfile(tmp_out, out)
    else:
        _write_stage(asset, out, chosen)


def _write_stage(asset: Asset, out: str, clips: Sequence[Clip]) -> None:
    from pxr import Gf, Sdf, Tf, Usd, UsdGeom, UsdSkel, Vt

    rig = asset.rig
    n = len(rig)
    try:
        if os.path.exists(out):
            os.remove(out)
        stage = Usd.Stage.CreateNew(out)
    except (Tf.ErrorException, OSError) as exc:
        raise ModelError(out, None, f"cannot create the file: {str(exc).strip().splitlines()[-1]}") from None
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.y)
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)
    rate = _frame_rate(clips)
    stage.SetTimeCodesPerSecond(rate)
    stage.SetFramesPerSecond(rate)
    stage.SetStartTimeCode(0.0)
    stage.SetEndTimeCode(float(_time_codes(np.array([max([c.duration for c in clips] + [0.0])]), rate)[0]))

    root_name = _identifiers([os.path.splitext(os.path.basename(out))[0]])[0]
    root = UsdSkel.Root.Define(stage, f"/{root_name}")
    stage.SetDefaultPrim(root.GetPrim())
    base = f"/{root_name}"

    # Joint paths: every rig node, its identifier under its parent's.
    idents = _identifiers(rig.names, rig.parents)
    tokens: list[str] = []
    for i in range(n):
        p = int(rig.parents[i])
        tokens.append(idents[i] if p < 0 else f"{tokens[p]}/{idents[i]}")
    rest_local = compose_trs(rig.rest[:, 0:3], rig.rest[:, 3:7], rig.rest[:, 7:10])
    rest_world = world_matrices(rig.parents, rig.rest)

    # Skins -> skeleton groups (+ geomBindTransform per skin).
    groups: list[_SkeletonGroup] = []
    skin_place: list[tuple[int, np.ndarray]] = []
    for binding in asset.skins:
        for g, group in enumerate(groups):
            geom = group.fit(binding.joints, binding.inverse_bind)
            if geom is not None:
                skin_place.append((g, geom))
                break
        else:
            groups.append(_SkeletonGroup(rest_world))
            geom = groups[-1].fit(binding.joints, binding.inverse_bind)
            if geom is None:
                raise ModelError(asset.path, f"skins[{len(skin_place)}]", "an inverse bind matrix cannot be inverted")
            skin_place.append((len(groups) - 1, geom))
    if not groups:
        groups.append(_SkeletonGroup(rest_world))

    # Morph targets: one blend shape name per (mesh node, target).
    morph_nodes = [i for i in range(n) if asset.morph_start[i + 1] > asset.morph_start[i]]
    shape_names = {r: [f"{idents[r]}_{k}" for k in range(int(asset.morph_start[r + 1] - asset.morph_start[r]))] for r in morph_nodes}
    all_shapes = [s for r in morph_nodes for s in shape_names[r]]

    # Animations.
    UsdGeom.Scope.Define(stage, f"{base}/Animations") if clips else None
    anim_paths = []
    clip_idents = _identifiers([c.name for c in clips])
    for clip, ident in zip(clips, clip_idents):
        anim_path = f"{base}/Animations/{ident}"
        anim_paths.append(anim_path)
        anim = UsdSkel.Animation.Define(stage, anim_path)
        animated = sorted({t.node for t in clip.tracks if t.path != "weights"})
        anim.CreateJointsAttr(Vt.TokenArray([tokens[i] for i in animated]))
        times = _clip_times(clip)
        codes = _time_codes(times, rate)
        distinct = np.concatenate([[True], np.diff(codes) > 0])  # samples rounded onto one code: the first
        times, codes = times[distinct], codes[distinct]
        pose, morph = sample(clip, times, rig.rest, asset.morph_start, asset.rest_morph)
        cols = np.asarray(animated, dtype=np.int64)
        t_attr = anim.CreateTranslationsAttr()
        r_attr = anim.CreateRotationsAttr()
        s_attr = anim.CreateScalesAttr()
        w_attr = None
        if all_shapes:
            anim.CreateBlendShapesAttr(Vt.TokenArray(all_shapes))
            w_attr = anim.CreateBlendShapeWeightsAttr()
        morph_cols = np.concatenate([np.arange(asset.morph_start[r], asset.morph_start[r + 1]) for r in morph_nodes]) \
            if morph_nodes else np.zeros(0, np.int64)
        for k in range(len(times)):
            code = Usd.TimeCode(float(codes[k]))
            frame = pose[k, cols]
            t_attr.Set(Vt.Vec3fArray.FromNumpy(np.ascontiguousarray(frame[:, 0:3], np.float32)), code)
            r_attr.Set(Vt.QuatfArray.FromNumpy(np.ascontiguousarray(frame[:, 3:7], np.float32)), code)
            s_attr.Set(Vt.Vec3hArray.FromNumpy(np.ascontiguousarray(frame[:, 7:10], np.float16)), code)
            if w_attr is not None:
                w_attr.Set(Vt.FloatArray.FromNumpy(np.ascontiguousarray(morph[k, morph_cols], np.float32)), code)
        _write_curves(anim.GetPrim(), clip, rate)

    # Skeletons.
    skel_paths = []
    for g, group in enumerate(groups):
        skel_path = f"{base}/Skeleton" + (f"_{g}" if g else "")
        skel_paths.append(skel_path)
        skel = UsdSkel.Skeleton.Define(stage, skel_path)
        skel.CreateJointsAttr(Vt.TokenArray(tokens))
        skel.CreateJointNamesAttr(Vt.TokenArray([name or idents[i] for i, name in enumerate(rig.names)]))
        skel.CreateRestTransformsAttr(Vt.Matrix4dArray.FromNumpy(_gf(rest_local)))
        skel.CreateBindTransformsAttr(Vt.Matrix4dArray.FromNumpy(_gf(group.bind)))
        binding = UsdSkel.BindingAPI.Apply(skel.GetPrim())
        if anim_paths:
            binding.CreateAnimationSourceRel().SetTargets([Sdf.Path(anim_paths[0])])

    # Meshes.
    doc = asset.document
    mesh_idents = _identifiers([doc.meshes[m.mesh].name or doc.nodes[m.node].name or f"mesh{m.mesh}"
                                for m in asset.mesh_instances])
    used: set[str] = set()
    for instance, ident in zip(asset.mesh_instances, mesh_idents):
        r = int(rig.index_of[instance.node])
        for p, prim in enumerate(instance.primitives):
            src = prim.source
            if src.mode != 4:
                warnings.warn(f"{os.path.basename(out)}: {ident} primitive {p}: mode {src.mode} is not triangles; left out", stacklevel=3)
                continue
            name = ident if len(instance.primitives) == 1 else f"{ident}_{p}"
            while name in used or name in ("Skeleton", "Animations"):
                name += "_"
            used.add(name)
            mesh_path = f"{base}/{name}"
            mesh = UsdGeom.Mesh.Define(stage, mesh_path)
            positions = np.ascontiguousarray(src.positions, np.float32)
            v = len(positions)
            indices = src.indices if src.indices is not None else np.arange(v, dtype=np.uint32)
            indices = np.asarray(indices, np.int32)[: len(indices) // 3 * 3]
            mesh.CreatePointsAttr(Vt.Vec3fArray.FromNumpy(positions))
            mesh.CreateFaceVertexCountsAttr(Vt.IntArray.FromNumpy(np.full(len(indices) // 3, 3, np.int32)))
            mesh.CreateFaceVertexIndicesAttr(Vt.IntArray.FromNumpy(np.ascontiguousarray(indices)))
            mesh.CreateSubdivisionSchemeAttr(UsdGeom.Tokens.none)
            mesh.CreateDoubleSidedAttr(bool(src.material is not None and src.material < len(doc.materials)
                                            and doc.materials[src.material].double_sided))
            if v:
                mesh.CreateExtentAttr(Vt.Vec3fArray([Gf.Vec3f(*map(float, positions.min(0))), Gf.Vec3f(*map(float, positions.max(0)))]))
            if src.normals is not None:
                mesh.CreateNormalsAttr(Vt.Vec3fArray.FromNumpy(np.ascontiguousarray(src.normals, np.float32)))
                mesh.SetNormalsInterpolation(UsdGeom.Tokens.vertex)
            primvars = UsdGeom.PrimvarsAPI(mesh.GetPrim())
            uv = src.attributes.get("TEXCOORD_0")
            if uv is not None and len(uv) == v:
                st = np.array(uv, np.float32)[:, :2].copy()
                st[:, 1] = 1.0 - st[:, 1]
                primvars.CreatePrimvar("st", Sdf.ValueTypeNames.TexCoord2fArray, UsdGeom.Tokens.vertex).Set(
                    Vt.Vec2fArray.FromNumpy(st))
            if src.material is not None and src.material < len(doc.materials):
                color = np.asarray(doc.materials[src.material].base_color_factor, np.float64)[:3]
                mesh.CreateDisplayColorPrimvar(UsdGeom.Tokens.constant).Set(Vt.Vec3fArray([Gf.Vec3f(*map(float, color))]))
                alpha = float(np.asarray(doc.materials[src.material].base_color_factor, np.float64)[3])
                if alpha < 1.0:
                    mesh.CreateDisplayOpacityPrimvar(UsdGeom.Tokens.constant).Set(Vt.FloatArray([alpha]))

            bind = UsdSkel.BindingAPI.Apply(mesh.GetPrim())
            if instance.skin is not None and prim.joints is not None and prim.weights is not None:
                g, geom = skin_place[instance.skin]
                joints = asset.skins[instance.skin].joints
                k = prim.joints.shape[1]
                bind.CreateJointsAttr(Vt.TokenArray([tokens[j] for j in joints]))
                bind.CreateJointIndicesPrimvar(False, k).Set(Vt.IntArray.FromNumpy(np.ascontiguousarray(prim.joints.reshape(-1), np.int32)))
                bind.CreateJointWeightsPrimvar(False, k).Set(Vt.FloatArray.FromNumpy(np.ascontiguousarray(prim.weights.reshape(-1), np.float32)))
            else:  # rigid: follows its own node, a joint of the first skeleton
                g = 0
                geom = groups[0].bind[r]
                bind.CreateJointsAttr(Vt.TokenArray([tokens[r]]))
                bind.CreateJointIndicesPrimvar(True, 1).Set(Vt.IntArray([0]))
                bind.CreateJointWeightsPrimvar(True, 1).Set(Vt.FloatArray([1.0]))
            bind.CreateGeomBindTransformAttr(Gf.Matrix4d(*_gf(geom[None])[0].reshape(-1).tolist()))
            bind.CreateSkeletonRel().SetTargets([Sdf.Path(skel_paths[g])])

            if prim.morph_positions is not None and r in shape_names:
                names = shape_names[r]
                targets = []
                for i, shape_name in enumerate(names):
                    shape = UsdSkel.BlendShape.Define(stage, f"{mesh_path}/{shape_name}")
                    d = prim.morph_positions[i]
                    dn = prim.morph_normals[i] if prim.morph_normals is not None else None
                    moved = np.flatnonzero(np.any(d != 0, axis=1) | (np.any(dn != 0, axis=1) if dn is not None else False))
                    shape.CreateOffsetsAttr(Vt.Vec3fArray.FromNumpy(np.ascontiguousarray(d[moved], np.float32)))
                    shape.CreatePointIndicesAttr(Vt.IntArray.FromNumpy(moved.astype(np.int32)))
                    if dn is not None:
                        shape.CreateNormalOffsetsAttr(Vt.Vec3fArray.FromNumpy(np.ascontiguousarray(dn[moved], np.float32)))
                    targets.append(Sdf.Path(f"{mesh_path}/{shape_name}"))
                bind.CreateBlendShapesAttr(Vt.TokenArray(names))
                bind.CreateBlendShapeTargetsRel().SetTargets(targets)
    stage.GetRootLayer().Save()


def check_usd(path: str | os.PathLike) -> list[str]:
    """usd-core's validators (the ones ``usdchecker`` runs) on the file at ``path``: a list of error
    and warning lines, empty when the file passes.

    >>> check_usd("demo.usda")                      # doctest: +SKIP
    []
    """
    file = os.fspath(path)
    import_pxr(file)
    from pxr import Usd, UsdValidation

    stage = Usd.Stage.Open(file)
    registry = UsdValidation.ValidationRegistry()
    context = UsdValidation.ValidationContext(registry.GetOrLoadAllValidators())
    errors = context.Validate(stage)
    return [f"{e.GetType()}: {e.GetName()}: {e.GetMessage()}" for e in errors]
