"""USD (UsdSkel) in and out (``skeletal.io.usd``, ``skeletal.io.usd_write``).

* A stage built here with the pxr API (quads, two influences per vertex, a mesh joint order that is
  not the skeleton's, a geomBindTransform, a sparse blend shape, an animation over a subset of joints
  in its own order, 24 time codes per second starting at 1, Y-up metres and Z-up centimetres): usd-core's
  own skinning (``UsdSkel.BakeSkinning``) agrees with skeletal's bake of the stage to 1e-5 of the
  model's size at every time sample.
* The built-in character (and ../shared/assets/Soldier.glb when present) written as .usda/.usdc/.usdz
  passes usd-core's validators (what ``usdchecker`` runs), reads back baking like the original, and
  usd-core's skinning of the written stage matches skeletal's bake of the original.
* Bad stages (missing joints, indices out of range, weights that do not match elementSize, ...) give one
  ModelError naming the file and the prim; the CLI prints one line.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from click.testing import CliRunner

import skeletal
from skeletal.tools.bake import bake
from skeletal.demo import demo_asset
from skeletal.errors import ModelError

pxr = pytest.importorskip("pxr", reason="usd-core is not installed (pip install 'skeletal[usd]')")
from pxr import Gf, Sdf, Usd, UsdGeom, UsdSkel, Vt

from skeletal.cli import cli
from skeletal.tools.usd_write import check_usd, write_usd

from fixtures.shared_assets import ASSETS, need as _need

TOL = 1e-5  # of the model's size


def _size(points: np.ndarray) -> float:
    return float(np.linalg.norm(points.max(axis=0) - points.min(axis=0)))


def _m(t=(0, 0, 0), axis=(0, 0, 1), deg=0.0, s=1.0) -> Gf.Matrix4d:
    """A Gf matrix (row vectors): scale, then rotate about ``axis``, then translate."""
    m = Gf.Matrix4d(1.0)
    m.SetScale(Gf.Vec3d(s, s, s))
    r = Gf.Matrix4d(1.0)
    r.SetRotate(Gf.Rotation(Gf.Vec3d(*axis), deg))
    tr = Gf.Matrix4d(1.0)
    tr.SetTranslate(Gf.Vec3d(*t))
    return m * r * tr


def _q(axis, deg) -> Gf.Quatf:
    q = Gf.Rotation(Gf.Vec3d(*axis), deg).GetQuat()
    return Gf.Quatf(q.GetReal(), Gf.Vec3f(q.GetImaginary()))


def make_stage(path: str, up: str = "Y", meters: float = 1.0, scale_keys: bool = True) -> None:
    """A small skinned, morphed, animated UsdSkel stage (see the module docstring); ``scale_keys``:
    the mid joint's scale changes over time (else it stays 1)."""
    stage = Usd.Stage.CreateNew(path)
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z if up == "Z" else UsdGeom.Tokens.y)
    UsdGeom.SetStageMetersPerUnit(stage, meters)
    stage.SetTimeCodesPerSecond(24)
    stage.SetStartTimeCode(1)
    stage.SetEndTimeCode(25)
    root = UsdSkel.Root.Define(stage, "/Char")
    UsdGeom.Xformable(root).AddTransformOp().Set(_m((0.5, 0, 0.2), (0, 1, 0), 30))
    stage.SetDefaultPrim(root.GetPrim())
    skel = UsdSkel.Skeleton.Define(stage, "/Char/Skel")
    UsdGeom.Xformable(skel).AddTransformOp().Set(_m((0, 0.1, 0), (1, 0, 0), 10, 1.5))
    joints = ["root", "root/mid", "root/mid/tip"]
    skel.CreateJointsAttr(joints)
    rest = [_m((0, 0, 0)), _m((0, 1, 0), (0, 0, 1), 20), _m((0, 1, 0), (0, 0, 1), -10)]
    skel.CreateRestTransformsAttr(Vt.Matrix4dArray(rest))
    # Binds: a pose other than the rest pose, in skeleton space.
    b0 = _m((0, 0, 0))
    b1 = _m((0, 1, 0)) * b0
    b2 = _m((0, 1, 0)) * b1
    skel.CreateBindTransformsAttr(Vt.Matrix4dArray([b0, b1, b2]))
    anim = UsdSkel.Animation.Define(stage, "/Char/Skel/Bend")
    anim.CreateJointsAttr(["root/mid/tip", "root/mid"])  # a subset, in its own order
    tr, rot, sc = anim.CreateTranslationsAttr(), anim.CreateRotationsAttr(), anim.CreateScalesAttr()
    anim.CreateBlendShapesAttr(["bulge"])
    wt = anim.CreateBlendShapeWeightsAttr()
    for k, code in enumerate((1, 7, 13, 19, 25)):
        tr.Set(Vt.Vec3fArray([Gf.Vec3f(0, 1, 0.05 * k), Gf.Vec3f(0, 1, 0)]), code)
        rot.Set(Vt.QuatfArray([_q((0, 0, 1), -15 * k), _q((1, 0, 0), 12 * k)]), code)
        sc.Set(Vt.Vec3hArray([Gf.Vec3h(1, 1, 1), Gf.Vec3h(1, 1 + 0.125 * k * scale_keys, 1)]), code)
        wt.Set(Vt.FloatArray([0.25 * k]), code)
    UsdSkel.BindingAPI.Apply(skel.GetPrim()).CreateAnimationSourceRel().SetTargets([anim.GetPath()])

    # A column of quads around the bones, in mesh space offset by the geomBindTransform.
    mesh = UsdGeom.Mesh.Define(stage, "/Char/Body")
    rows = 7
    ring = [(-0.2, 0.2), (0.2, 0.2), (0.2, -0.2), (-0.2, -0.2)]
    points = [Gf.Vec3f(x, 2.0 * r / (rows - 1) - 0.3, z) for r in range(rows) for x, z in ring]
    counts, indices = [], []
    for r in range(rows - 1):
        for k in range(4):
            a, b = r * 4 + k, r * 4 + (k + 1) % 4
            counts.append(4)
            indices += [a, b, b + 4, a + 4]
    mesh.CreatePointsAttr(points)
    mesh.CreateFaceVertexCountsAttr(counts)
    mesh.CreateFaceVertexIndicesAttr(indices)
    binding = UsdSkel.BindingAPI.Apply(mesh.GetPrim())
    binding.CreateSkeletonRel().SetTargets([skel.GetPath()])
    binding.CreateJointsAttr(["root/mid/tip", "root", "root/mid"])  # mesh order: tip=0, root=1, mid=2
    ji, jw = [], []
    for r in range(rows):
        h = 2.0 * r / (rows - 1)
        lo, hi, u = (1, 2, h) if h < 1 else (2, 0, h - 1)
        for _ in ring:
            ji += [lo, hi]
            jw += [1 - 0.8 * u, 0.8 * u]
    binding.CreateJointIndicesPrimvar(False, 2).Set(ji)
    binding.CreateJointWeightsPrimvar(False, 2).Set(jw)
    binding.CreateGeomBindTransformAttr(_m((0, 0.3, 0)))
    shape = UsdSkel.BlendShape.Define(stage, "/Char/Body/bulge")
    shape.CreateOffsetsAttr([Gf.Vec3f(0.1, 0, 0), Gf.Vec3f(0, 0, 0.2)])
    shape.CreatePointIndicesAttr([13, 14])
    binding.CreateBlendShapesAttr(["bulge"])
    binding.CreateBlendShapeTargetsRel().SetTargets([shape.GetPath()])
    stage.GetRootLayer().Save()


def usd_skinned(path: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """usd-core's own skinning of the stage at ``path``: mesh name -> (times in seconds from the start,
    (T, V, 3) world points in the stage's units and axes)."""
    stage = Usd.Stage.Open(path)
    for prim in stage.Traverse():
        if prim.IsA(UsdSkel.Root):
            assert UsdSkel.BakeSkinning(UsdSkel.Root(prim))
    tcps = stage.GetTimeCodesPerSecond()
    start = stage.GetStartTimeCode()
    meshes = [p for p in stage.Traverse() if p.IsA(UsdGeom.Mesh)]
    # A rigidly bound mesh is baked as an animated transform, a skinned one as points: one time line.
    codes = sorted({float(c) for p in meshes for c in (*UsdGeom.Mesh(p).GetPointsAttr().GetTimeSamples(),
                                                           *UsdGeom.Xformable(p).GetTimeSamples())}) or [start]
    out = {}
    for prim in meshes:
        attr = UsdGeom.Mesh(prim).GetPointsAttr()
        frames = []
        for c in codes:
            p = np.array(attr.Get(c), dtype=np.float64)
            m = np.array(UsdGeom.Xformable(prim).ComputeLocalToWorldTransform(c), dtype=np.float64)
            frames.append(p @ m[:3, :3] + m[3, :3])
        out[prim.GetName()] = ((np.array(codes) - start) / tcps, np.array(frames))
    return out


def _to_y_up(points: np.ndarray, up: str, meters: float) -> np.ndarray:
    if up == "Z":
        points = np.stack([points[..., 0], points[..., 2], -points[..., 1]], axis=-1)
    return points * meters


def _skeletal_positions(asset, clip, times) -> dict[str, np.ndarray]:
    """Skinned world positions (T, V, 3) by mesh node name, every primitive of a mesh in one array."""
    out = bake(asset, clip, times=times)
    return {asset.document.nodes[i.node].name: np.concatenate(
        [out[f"positions_node{i.node}_prim{p}"] for p in range(len(i.primitives))], axis=1)
        for i in asset.skinned_instances}


def _all_positions(asset, clip, times) -> np.ndarray:
    """Every skinned vertex (T, V, 3), meshes in file order (the writer keeps it)."""
    return np.concatenate(list(_skeletal_positions(asset, clip, times).values()), axis=1)


@pytest.mark.parametrize("up,meters,scale_keys", [("Y", 1.0, True), ("Z", 0.01, False)])
def test_skinning_matches_usd_core(tmp_path, up, meters, scale_keys):
    """At the authored samples; with constant scales also at every frame between them (usd-core
    interpolates a half3 scale in half precision, 1.0208 -> 1.021, so in between it differs by the
    half's rounding, 2e-4 of the size here)."""
    path = str(tmp_path / "char.usda")
    make_stage(path, up, meters, scale_keys)
    asset = skeletal.load(path)
    assert [c.name for c in asset.clips] == ["Bend"]
    assert len(asset.clip(0).tracks) == 3 * 2 + 1  # 2 joints x T/R/S + the blend shape weights
    reference = usd_skinned(path)
    times, points = reference["Body"]
    assert len(times) == 25 and times[-1] == pytest.approx(1.0)  # every frame of the range
    if scale_keys:
        times, points = times[::6], points[::6]  # the authored samples: codes 1, 7, 13, 19, 25
    ours = _skeletal_positions(asset, "Bend", times)["Body"]
    expect = _to_y_up(points, up, meters)
    size = _size(expect.reshape(-1, 3))
    assert np.abs(ours - expect).max() < TOL * size
    # The motion is not trivial: the tip moves by a good fraction of the model's size.
    assert np.abs(expect[-1] - expect[0]).max() > 0.2 * size


def test_reader_structure(tmp_path):
    path = str(tmp_path / "char.usdc")
    make_stage(path)
    asset = skeletal.load(path)
    names = asset.rig.names
    for joint in ("root", "mid", "tip", "Skel", "Char", "Body"):
        assert joint in names
    assert names.index("root") < names.index("mid") < names.index("tip")
    assert asset.rig.parents[names.index("tip")] == names.index("mid")
    skin = asset.skins[0]
    assert [names[j] for j in skin.joints] == ["tip", "root", "mid"]  # the mesh's skel:joints order
    prim = asset.skinned_instances[0].primitives[0]
    assert prim.source.indices.size == 6 * 4 * 2 * 3  # 24 quads -> 48 triangles
    assert prim.morph_positions.shape == (1, 28, 3) and prim.morph_positions[0, 13, 0] == pytest.approx(0.1)
    assert asset.clip("Bend").duration == pytest.approx(1.0)


def _world_vertices(asset, clip, times) -> np.ndarray:
    """Every mesh vertex in world space (T, V, 3), meshes and primitives in file order (the writer
    keeps it): skinned ones as baked, rigid ones by their node's world matrix, morphs applied to both
    (bake itself does not morph rigid meshes; the writer binds them to their node's joint)."""
    from skeletal.anim.sampling import sample

    the_clip = asset.clip(clip)
    baked = bake(asset, the_clip, times=times)
    _, morph = sample(the_clip, times, asset.rig.rest, asset.morph_start, asset.rest_morph)
    parts = []
    for inst in asset.mesh_instances:
        r = int(asset.rig.index_of[inst.node])
        w = morph[:, asset.morph_start[r]:asset.morph_start[r + 1]]
        for p, prim in enumerate(inst.primitives):
            if prim.source.mode != 4:
                continue
            if inst.skinned and prim.joints is not None:
                parts.append(baked[f"positions_node{inst.node}_prim{p}"])
                continue
            base = np.broadcast_to(prim.source.positions.astype(np.float64), (len(times),) + prim.source.positions.shape)
            if prim.morph_positions is not None:
                base = base + np.einsum("tk,kvc->tvc", w, prim.morph_positions)
            m = baked["node_world"][:, inst.node]
            parts.append(np.einsum("tij,tvj->tvi", m[:, :3, :3], base) + m[:, None, :3, 3])
    return np.concatenate(parts, axis=1)


def _roundtrip(asset, path, clips=None) -> None:
    """Written, validated, read back: every vertex bakes like the original at 13 times of every clip;
    usd-core's skinning of the written stage (its bound, first clip) matches the original's bake."""
    write_usd(asset, path, clips)
    assert check_usd(path) == []
    back = skeletal.load(path)
    chosen = asset.clips if clips is None else [asset.clip(c) for c in clips]
    assert [c.name for c in back.clips] == [c.name for c in chosen]
    size = None
    for clip in chosen:
        times = np.linspace(0.0, clip.duration, 13)
        pa, pb = _world_vertices(asset, clip.name, times), _world_vertices(back, clip.name, times)
        assert pa.shape == pb.shape and pa.size
        if size is None:  # the model's size: the diagonal of its posed world vertices' box
            size = float(np.linalg.norm(np.ptp(pa.reshape(-1, 3), axis=0)))
        assert np.abs(pa - pb).max() < TOL * size, clip.name
    reference = usd_skinned(path)  # usd-core's skinning of what was written
    times = next(iter(reference.values()))[0]
    theirs = np.concatenate([points for _t, points in reference.values()], axis=1)
    ours = _world_vertices(asset, chosen[0].name, times)
    assert theirs.shape == ours.shape
    assert np.abs(ours - theirs).max() < TOL * size


@pytest.mark.parametrize("suffix", [".usda", ".usdc", ".usdz"])
def test_demo_roundtrip(tmp_path, suffix):
    _roundtrip(demo_asset(), str(tmp_path / f"demo{suffix}"))


def test_soldier_roundtrip(tmp_path):
    _need("Soldier.glb")
    asset = skeletal.load(ASSETS / "Soldier.glb")
    _roundtrip(asset, str(tmp_path / "soldier.usdc"))


def test_robot_roundtrip(tmp_path):
    """RobotExpressive.glb: four skins, fifteen rigid meshes on joints, morph targets with weights
    tracks (blend shapes on rigidly bound meshes)."""
    _need("RobotExpressive.glb")
    asset = skeletal.load(ASSETS / "RobotExpressive.glb")
    clips = ["Yes", "Wave"]
    assert any(t.path == "weights" for t in asset.clip("Yes").tracks)
    _roundtrip(asset, str(tmp_path / "robot.usdz"), clips)


def test_bvh_step_and_spline_clips_roundtrip(tmp_path):
    """A rig without meshes (read from BVH) with STEP and CUBICSPLINE clips: the written samples replay
    the same joint positions (STEP exactly away from the keys, splines through 120 samples a second)."""
    from skeletal.asset import Asset
    from skeletal.anim.clip import Clip, Track
    from skeletal.tools.export import write_bvh
    from skeletal.io.bvh import parse_bvh
    from skeletal.anim.pose import world_matrices
    from skeletal.anim.sampling import sample

    demo = demo_asset()
    asset = Asset(parse_bvh(write_bvh(demo, "walk"), "walk.bvh"))
    walk = asset.clips[0]
    step = Clip("held", [Track(t.node, t.path, "STEP", t.times, t.values) for t in walk.tracks])
    spline = Clip("spline", [Track(t.node, t.path, "CUBICSPLINE", t.times,
                                   np.stack([np.zeros_like(t.values), t.values, np.zeros_like(t.values)], axis=1)
                                   .reshape(-1, t.values.shape[1])) for t in walk.tracks])
    path = str(tmp_path / "held.usda")
    write_usd(asset, path, [step, spline])
    assert check_usd(path) == []
    back = skeletal.load(path)
    assert not back.mesh_instances and [c.name for c in back.clips] == ["held", "spline"]
    order = [back.rig.find(n) for n in asset.rig.names]
    keys = walk.tracks[0].times.astype(np.float64)
    size = float(np.ptp(world_matrices(asset.rig.parents, asset.rig.rest)[:, :3, 3], axis=0).max())
    for clip, tol in ((step, 1e-6), (spline, 2e-3)):
        times = (keys[:-1] + 0.37 * np.diff(keys))  # between keys
        pa, _ = sample(clip, times, asset.rig.rest, asset.morph_start, asset.rest_morph)
        pb, _ = sample(back.clip(clip.name), times, back.rig.rest, back.morph_start, back.rest_morph)
        wa = world_matrices(asset.rig.parents, pa)[..., :3, 3]
        wb = world_matrices(back.rig.parents, pb)[:, order][..., :3, 3]
        assert np.abs(wa - wb).max() < tol * size, clip.name


def test_time_codes_on_the_frame_grid(tmp_path):
    """Issue 28: times on the clip's frame grid are written as whole time codes (a 479-frame clip at
    30 fps ends at 479, not 478.99999...; float32 15.96 s is 478.8, not 478.8000011444092), and a STEP
    key's held sample just before the next key keeps its own code."""
    from skeletal.anim.clip import Clip, Track
    from skeletal.tools.usd_write import _time_codes

    assert _time_codes(np.array([float(np.float32(479 / 30))]), 30.0)[0] == 479.0
    assert _time_codes(np.array([float(np.float32(15.96))]), 30.0)[0] == 478.8
    for rate in (10.0, 30.0, 240.0):  # a STEP key's held sample (1e-4 s before the key) keeps its own code
        for key in (1.0, 999.0):
            held = _time_codes(np.array([key - 1e-4, key]), rate)
            assert held[0] < held[1] == key * rate, (rate, key, held)
    demo = demo_asset()
    quiet = np.tile(np.array([0, 0, 0, 1], np.float32), (480, 1))
    frames = Clip("frames", [Track(0, "rotation", "LINEAR", (np.arange(480) / 30).astype(np.float32), quiet)])
    odd = Clip("odd", [Track(0, "rotation", "LINEAR", np.array([0, 0.5, 15.96], np.float32), quiet[:3])])
    for clip, end in ((frames, 479.0), (odd, 478.8)):
        path = tmp_path / f"{clip.name}.usda"
        write_usd(demo, str(path), [clip])
        stage = Usd.Stage.Open(str(path))
        assert stage.GetEndTimeCode() == end
        text = path.read_text()
        assert f"endTimeCode = {end:g}\n" in text, text[:300]
        codes = [float(t) for prim in stage.Traverse() if prim.IsA(UsdSkel.Animation)
                 for t in prim.GetAttribute("rotations").GetTimeSamples()]
        assert codes[-1] == end and all(round(c, 4) == c for c in codes)
        if clip is frames:
            assert codes == [float(k) for k in range(480)]


# ---------------------------------------------------------------------------------------------
# bad input


def _broken(tmp_path, edit) -> str:
    path = str(tmp_path / "bad.usda")
    make_stage(path)
    stage = Usd.Stage.Open(path)
    edit(stage)
    stage.GetRootLayer().Save()
    return path


BAD = {
    "missing joint": (lambda s: UsdSkel.BindingAPI(s.GetPrimAtPath("/Char/Body")).GetJointsAttr().Set(["root/mid/nope", "root", "root/mid"]),
                      "</Char/Body>", "root/mid/nope"),
    "no skeleton": (lambda s: UsdSkel.BindingAPI(s.GetPrimAtPath("/Char/Body")).GetSkeletonRel().SetTargets(["/Char/Nothing"]),
                    "</Char/Body>", "/Char/Nothing"),
    "no joints": (lambda s: UsdSkel.Skeleton(s.GetPrimAtPath("/Char/Skel")).GetJointsAttr().Set([]),
                  "</Char/Skel>", "no joints"),
    "index out of range": (lambda s: s.GetPrimAtPath("/Char/Body").GetAttribute("primvars:skel:jointIndices").Set([0, 3] + [0] * 54),
                           "</Char/Body>", "index 3"),
    "weights vs elementSize": (lambda s: s.GetPrimAtPath("/Char/Body").GetAttribute("primvars:skel:jointWeights").Set([0.5] * 55),
                               "</Char/Body>", "elementSize 2"),
    "elementSize differs": (lambda s: UsdGeom.Primvar(s.GetPrimAtPath("/Char/Body").GetAttribute("primvars:skel:jointWeights")).SetElementSize(4),
                            "</Char/Body>", "elementSize"),
    "blend shape index": (lambda s: UsdSkel.BlendShape(s.GetPrimAtPath("/Char/Body/bulge")).GetPointIndicesAttr().Set([13, 99]),
                          "</Char/Body/bulge>", "index 99"),
    "anim length": (lambda s: UsdSkel.Animation(s.GetPrimAtPath("/Char/Skel/Bend")).GetTranslationsAttr().Set(Vt.Vec3fArray([Gf.Vec3f(0)]), 7),
                    "</Char/Skel/Bend>", "translations"),
    "bind count": (lambda s: UsdSkel.Skeleton(s.GetPrimAtPath("/Char/Skel")).GetBindTransformsAttr().Set(Vt.Matrix4dArray([Gf.Matrix4d(1)])),
                   "</Char/Skel>", "bindTransforms"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_usd_is_one_model_error(tmp_path, case):
    edit, where, detail = BAD[case]
    path = _broken(tmp_path, edit)
    with pytest.raises(ModelError) as info:
        skeletal.load(path)
    message = str(info.value)
    assert message.startswith("bad.usda: ") and where in message and detail in message, message
    result = CliRunner().invoke(cli, ["info", path])
    assert result.exit_code != 0
    assert "Traceback" not in result.output and where in result.output


def test_not_usd_and_outside_references(tmp_path):
    junk = tmp_path / "junk.usdc"
    junk.write_bytes(b"\x00" * 64 + b"not a crate file")
    with pytest.raises(ModelError, match="junk.usdc"):
        skeletal.load(junk)
    inner = tmp_path / "model"
    inner.mkdir()
    secret = tmp_path / "secret.usda"
    make_stage(str(secret))
    stage = Usd.Stage.CreateNew(str(inner / "ref.usda"))
    stage.DefinePrim("/X").GetReferences().AddReference("../secret.usda")
    stage.GetRootLayer().Save()
    with pytest.raises(ModelError, match="outside the model's folder"):
        skeletal.load(inner / "ref.usda")
    # the same arc, absolute, inside a .usdz package (a zip made by hand, so the path stays in it)
    import zipfile

    stage = Usd.Stage.CreateNew(str(tmp_path / "abs.usda"))
    stage.DefinePrim("/X").GetReferences().AddReference(str(secret))
    stage.GetRootLayer().Save()
    with zipfile.ZipFile(inner / "abs.usdz", "w", zipfile.ZIP_STORED) as z:
        z.write(tmp_path / "abs.usda", "root.usda")
    with pytest.raises(ModelError, match="outside the model's folder"):
        skeletal.load(inner / "abs.usdz")
    inside = inner / "char.usda"
    make_stage(str(inside))
    stage = Usd.Stage.CreateNew(str(inner / "ok.usda"))
    stage.DefinePrim("/X").GetReferences().AddReference("./char.usda")
    stage.GetRootLayer().Save()
    assert skeletal.load(inner / "ok.usda").skins


def test_missing_usd_core_says_how_to_install(tmp_path, monkeypatch):
    path = str(tmp_path / "char.usda")
    make_stage(path)
    for name in [m for m in sys.modules if m == "pxr" or m.startswith("pxr.")]:
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(ModelError, match=r'pip install "skeletal\[usd\]"'):
        skeletal.load(path)
    with pytest.raises(ModelError, match=r'pip install "skeletal\[usd\]"'):
        skeletal.export(demo_asset(), str(tmp_path / "x.usdz"))


def test_cli_export_info_bake(tmp_path):
    runner = CliRunner()
    glb = str(tmp_path / "demo.glb")
    assert runner.invoke(cli, ["demo", "--export", glb]).exit_code == 0
    usdz = str(tmp_path / "demo.usdz")
    result = runner.invoke(cli, ["export", glb, "--out", usdz])
    assert result.exit_code == 0, result.output
    assert check_usd(usdz) == []
    result = runner.invoke(cli, ["info", usdz])
    assert result.exit_code == 0 and "walk" in result.output, result.output
    npz = str(tmp_path / "walk.npz")
    result = runner.invoke(cli, ["bake", usdz, "--clip", "walk", "--out", npz])
    assert result.exit_code == 0, result.output
    assert os.path.getsize(npz) > 0
    result = runner.invoke(cli, ["export", glb, "--out", str(tmp_path / "x.usdq")])
    assert result.exit_code != 0 and ".usdz" in result.output
    # retarget: a USD source onto a glTF target, written as USD
    out = str(tmp_path / "walk_on_demo.usda")
    result = runner.invoke(cli, ["retarget", usdz, glb, "--clip", "walk", "--out", out])
    assert result.exit_code == 0, result.output
    assert check_usd(out) == []
    done = skeletal.load(out)
    assert [c.name for c in done.clips] == ["walk"]
    demo = demo_asset()
    times = np.linspace(0, demo.clip("walk").duration, 9)
    lo, hi = demo.bind_bounds
    err = np.abs(_all_positions(done, "walk", times) - _all_positions(demo, "walk", times)).max()
    assert err < 1e-3 * float(np.linalg.norm(hi - lo))  # the walk retargeted onto its own rig


def test_bench_usd_load_row():
    from skeletal.bench.usd import bench_usd_load

    result = bench_usd_load(quick=True)
    names = [r["name"] for r in result["rows"]]
    assert names == ["load demo USD (usdc)", "load demo USD (usda)"]
    for key in ("glb_load_ms", "usdc_load_ms", "usda_load_ms", "usdc_thread_ms", "usdc_process_cpu_ms", "usdc_in_process_ms"):
        assert result[key]["repeats"] == 3 and result[key]["median"] > 0
    assert result["usdc_load_ms"]["bytes"] > 0


def test_render_usd_like_gltf(tmp_path):
    """``skeletal render`` draws a USD file as it draws the glTF it was written from (same silhouette,
    same colours from displayColor)."""
    pytest.importorskip("moderngl", reason="moderngl is not installed: the render check is skipped")
    iio = pytest.importorskip("imageio.v3", reason="imageio is not installed: the render check is skipped")
    from skeletal.render.context import shared_context
    from skeletal.render.errors import RenderError

    try:
        shared_context()
    except RenderError as exc:
        pytest.skip(f"no headless OpenGL context: {exc}")
    runner = CliRunner()
    glb = str(tmp_path / "demo.glb")
    assert runner.invoke(cli, ["demo", "--export", glb]).exit_code == 0
    usdc = str(tmp_path / "demo.usdc")
    assert runner.invoke(cli, ["export", glb, "--out", usdc]).exit_code == 0
    images = []
    for model in (glb, usdc):
        png = str(tmp_path / (os.path.basename(model) + ".png"))
        result = runner.invoke(cli, ["render", model, "--clip", "walk", "--time", "0.3",
                                     "--size", "160x120", "--out", png])
        assert result.exit_code == 0, result.output
        images.append(iio.imread(png).astype(np.float64)[..., :3])
    masks = [np.abs(im - im[0, 0]).sum(axis=2) > 12 for im in images]
    assert masks[0].sum() > 200  # the character covers a good part of the frame
    overlap = (masks[0] & masks[1]).sum() / (masks[0] | masks[1]).sum()
    assert overlap > 0.97, overlap
    both = masks[0] & masks[1]
    assert np.abs(images[0][both] - images[1][both]).mean() < 25.0


def test_check_usd_finds_problems(tmp_path):
    """The validator run is not a rubber stamp: a skinned mesh without SkelBindingAPI fails it."""
    path = str(tmp_path / "unbound.usda")
    stage = Usd.Stage.CreateNew(path)
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.y)
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)
    root = UsdSkel.Root.Define(stage, "/Root")
    stage.SetDefaultPrim(root.GetPrim())
    mesh = UsdGeom.Mesh.Define(stage, "/Root/Mesh")
    mesh.CreatePointsAttr([Gf.Vec3f(0, 0, 0), Gf.Vec3f(1, 0, 0), Gf.Vec3f(0, 1, 0)])
    mesh.CreateFaceVertexCountsAttr([3])
    mesh.CreateFaceVertexIndicesAttr([0, 1, 2])
    UsdGeom.PrimvarsAPI(mesh.GetPrim()).CreatePrimvar("skel:jointIndices", Sdf.ValueTypeNames.IntArray,
                                                      UsdGeom.Tokens.vertex, 1).Set([0, 0, 0])
    stage.GetRootLayer().Save()
    problems = check_usd(path)
    assert problems and any("SkelBindingAPI" in p for p in problems), problems


def _nested_xforms(out: str, depth: int) -> str:
    stage = Usd.Stage.CreateInMemory()
    layer = stage.GetRootLayer()
    path = Sdf.Path("/r")
    with Sdf.ChangeBlock():
        for _ in range(depth):
            Sdf.CreatePrimInLayer(layer, path).specifier = Sdf.SpecifierDef
            layer.GetPrimAtPath(path).typeName = "Xform"
            path = path.AppendChild("c")
    layer.Export(out)
    return out


def test_deep_prim_nesting_reads(tmp_path):
    """1000 nested Xforms (Python's recursion limit) read as a 1000-node chain, no RecursionError; 3000
    are refused in one line (skeletal reads at most 1000 levels in every format, issue 32)."""
    asset = skeletal.load(_nested_xforms(str(tmp_path / "deep.usdc"), 1000))
    assert len(asset.rig) == 1000 and int(asset.rig.parents[-1]) == 998
    with pytest.raises(skeletal.ModelError, match=r"deeper.usdc: nodes\[1000\]: node 'c' is nested 1001 levels deep"):
        skeletal.load(_nested_xforms(str(tmp_path / "deeper.usdc"), 3000))
