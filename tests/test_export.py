"""Export (``skeletal.export``, ``skeletal export``): any asset with any clips -> glTF.

* round trips: the written file bakes like the in-memory asset with those clips (retargeted clips,
  cliptools clips, a subset of the asset's own clips);
* the Khronos glTF-Validator finds no errors or warnings in exported files (retargeted, skeleton-only);
* three.js truth: ``tests/data/retarget/*-truth.json`` were generated (``--regenerate-truth``) from the
  exported files whose sha256 they record (Soldier's Run and the CMU BVH walk retargeted onto the
  built-in character; the built-in character converted to FBX by ``assimp`` and read back); the
  files are rebuilt here, and both the file read back and the in-memory asset are compared.

Regenerate the truth after changing the retargeting, the demo or the writer::

    PYTHONPATH=src .venv/bin/python tests/test_export.py --regenerate-truth
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import skeletal
from skeletal.cli import cli
from skeletal.demo import demo_asset
from skeletal.tools.export import asset_to_document

from fixtures.truth_compare import compare_truth, load_truth, negative_pingpong
from test_demo_writer import NPM_DIR, ensure_npm_packages, validate

REPO = Path(__file__).resolve().parents[1]
from fixtures.shared_assets import need as _need
DATA = REPO / "tests" / "data" / "retarget"
TRUTH_OPTIONS = ["--loops", "repeat,once", "--max-verts", "24", "--vert-stride", "113", "--digits", "8", "--no-local"]


def _bvh_asset(name: str):
    pytest.importorskip("skeletal.io.bvh", reason="the BVH reader (skeletal.io.bvh) is not in this branch yet")
    return skeletal.load(_need(name))


# The exported files with committed three.js truth. Each builder writes its file into ``folder`` and
# returns (path, asset, clips): the in-memory asset and clip list the file was written from.
def soldier_run_on_demo(folder: Path):
    """Soldier's Run retargeted onto the built-in character, with the demo's own walk kept."""
    soldier = skeletal.load(_need("Soldier.glb"))
    demo = demo_asset()
    clips = [demo.clip("walk"), skeletal.retarget(soldier.clip("Run"), soldier.rig, demo.rig, name="soldier_run")]
    path = folder / "soldier_run_on_demo.glb"
    skeletal.export(demo, path, clips)
    return path, demo, clips


def cmu_walk_on_demo(folder: Path):
    """The CMU BVH walk (first 1.2 s, via cliptools) retargeted onto the built-in character."""
    bvh = _bvh_asset("cmu_12_01_walk.bvh")
    demo = demo_asset()
    part = skeletal.cliptools.subclip(bvh.clips[0], 0.0, 1.2)
    clips = [skeletal.retarget(part, bvh.rig, demo.rig, fps=30, name="cmu_walk")]
    path = folder / "cmu_walk_on_demo.glb"
    skeletal.export(demo, path, clips)
    return path, demo, clips


def demo_from_fbx(folder: Path):
    """The built-in character with its walk, converted to FBX by the assimp command, read back by
    skeletal's Assimp reader and exported to glTF."""
    pytest.importorskip("skeletal.io.assimp", reason="the Assimp reader (skeletal.io.assimp) is not in this branch yet")
    if shutil.which("assimp") is None:
        pytest.skip("the assimp command (Debian package assimp-utils) makes the FBX file")
    try:
        from skeletal.io.assimp_ffi import library

        library()
    except skeletal.ModelError as exc:
        pytest.skip(f"the Assimp library is not installed: {exc}")
    from fixtures.assimp_convert import convert  # ASCII FBX, with Assimp 5.2's exporter bugs corrected

    glb, fbx = folder / "demo_walk.glb", folder / "demo_walk.fbx"
    skeletal.export(demo_asset(), glb, ["walk"])
    convert(glb, fbx)
    asset = skeletal.load(fbx)
    path = folder / "demo_from_fbx.glb"
    skeletal.export(asset, path)
    return path, asset, list(asset.clips)


TRUTH_CASES = {"soldier_run_on_demo": soldier_run_on_demo, "cmu_walk_on_demo": cmu_walk_on_demo, "demo_from_fbx": demo_from_fbx}


@pytest.fixture(scope="session")
def npm_modules() -> Path:
    reason = ensure_npm_packages()
    if reason:
        pytest.skip(reason)
    return NPM_DIR / "node_modules"


def _assert_bakes_alike(a, b, clip_a, clip_b, duration: float) -> None:
    times = np.linspace(-0.1, duration * 1.2, 11)
    for loop in ("clamp", "repeat"):
        x = skeletal.bake(a, clip_a, times, loop=loop)
        y = skeletal.bake(b, clip_b, times, loop=loop)
        assert set(x) == set(y)
        for key in x:
            np.testing.assert_allclose(y[key], x[key], atol=2e-5, rtol=0, err_msg=f"{key} {loop}")


# ---------------------------------------------------------------------------------------------
# round trips


def test_export_retargeted_and_cliptools_clips(tmp_path):
    demo = demo_asset()
    walk = demo.clip("walk")
    clips = [
        skeletal.retarget(walk, demo.rig, demo.rig, name="retargeted"),
        skeletal.cliptools.reverse(walk),
        skeletal.cliptools.resample(skeletal.cliptools.subclip(demo.clip("idle"), 0.5, 2.0), fps=20),
        "run",
    ]
    clips[1].name = "walk_backwards"
    clips[2].name = "idle_part"
    path = tmp_path / "out.glb"
    skeletal.export(demo, path, clips)
    back = skeletal.load(path)
    assert [c.name for c in back.clips] == ["retargeted", "walk_backwards", "idle_part", "run"]
    for clip in clips[:3] + [demo.clip("run")]:
        _assert_bakes_alike(demo, back, clip, clip.name, clip.duration)
    assert len(back.document.meshes) == len(demo.document.meshes) and len(back.skins) == 1


def test_export_default_is_every_clip_and_errors(tmp_path):
    demo = demo_asset()
    doc = asset_to_document(demo)
    assert [a.name for a in doc.animations] == [c.name for c in demo.clips]
    assert doc.nodes is demo.document.nodes  # shared, not copied
    with pytest.raises(skeletal.ClipError, match="additive"):
        skeletal.export(demo, tmp_path / "x.glb", [skeletal.cliptools.make_additive(demo.clip("wave"))])
    with pytest.raises(skeletal.ClipError, match="unique"):
        skeletal.export(demo, tmp_path / "x.glb", ["walk", "walk"])
    with pytest.raises(skeletal.ClipError, match="no clip named"):
        skeletal.export(demo, tmp_path / "x.glb", ["nope"])


def test_export_gltf_model_with_retargeted_clip(tmp_path):
    mannequin = skeletal.load(_need("Mannequin.glb"))
    demo = demo_asset()
    walk = skeletal.retarget(demo.clip("walk"), demo.rig, mannequin.rig)
    path = tmp_path / "mannequin_walk.glb"
    skeletal.export(mannequin, path, [walk])
    back = skeletal.load(path)
    times = np.linspace(0, walk.duration, 4)
    x = skeletal.bake(mannequin, walk, times)["node_world"]
    y = skeletal.bake(back, "walk", times)["node_world"]
    np.testing.assert_allclose(y, x, atol=1e-5 * max(1.0, np.abs(x).max()))


def test_cli_export(tmp_path):
    runner = CliRunner()
    demo = tmp_path / "demo.glb"
    assert runner.invoke(cli, ["demo", "--export", str(demo)]).exit_code == 0
    out = tmp_path / "two.gltf"
    result = runner.invoke(cli, ["export", str(demo), "--out", str(out), "--clip", "wave", "--clip", "1"])
    assert result.exit_code == 0, result.output
    assert [c.name for c in skeletal.load(out).clips] == ["wave", "walk"]
    result = runner.invoke(cli, ["export", str(demo), "--out", str(tmp_path / "x.fbx")])
    assert result.exit_code == 2 and ".glb, .gltf or .bvh" in result.output
    result = runner.invoke(cli, ["export", str(tmp_path / "missing.glb"), "--out", str(out)])
    assert result.exit_code == 2 and "missing.glb" in result.output


def test_export_bvh_skeleton(tmp_path):
    bvh = _bvh_asset("cmu_12_01_walk.bvh")
    path = tmp_path / "walk.glb"
    skeletal.export(bvh, path)
    back = skeletal.load(path)
    assert not back.document.meshes and len(back.clips) == 1
    _assert_bakes_alike(bvh, back, bvh.clips[0], 0, bvh.clips[0].duration)


# ---------------------------------------------------------------------------------------------
# the Khronos validator and the three.js truth


def _problems(report: dict) -> list:
    return [m for m in report["issues"]["messages"] if m["severity"] <= 1]


@pytest.mark.parametrize("case", [*TRUTH_CASES, "bvh_skeleton", "mannequin"])
def test_khronos_validator(case, tmp_path, npm_modules):
    if case in TRUTH_CASES:
        path = TRUTH_CASES[case](tmp_path)[0]
    elif case == "bvh_skeleton":
        path = tmp_path / "walk.glb"
        skeletal.export(_bvh_asset("cmu_12_01_walk.bvh"), path)
    else:
        mannequin = skeletal.load(_need("Mannequin.glb"))
        demo = demo_asset()
        path = tmp_path / "mannequin.glb"
        skeletal.export(mannequin, path, [skeletal.retarget(demo.clip("run"), demo.rig, mannequin.rig)])
    report = validate(path, npm_modules)
    problems = _problems(report)
    if case == "mannequin":
        # The original's own layout warnings (its skinned mesh sits under the Armature node, which the
        # spec allows but warns about) are kept by design: nothing beyond them is accepted.
        original = {(m["code"], m.get("pointer")) for m in _problems(validate(_need("Mannequin.glb"), npm_modules))}
        assert original <= {("NODE_SKINNED_MESH_NON_ROOT", "/nodes/65")}, original
        problems = [m for m in problems if (m["code"], m.get("pointer")) not in original]
    assert not problems, json.dumps(problems[:20], indent=1)
    assert report["issues"]["numErrors"] == 0


@pytest.mark.parametrize("case", sorted(TRUTH_CASES))
def test_exported_file_matches_threejs_truth(case, tmp_path):
    """three.js plays the exported file as skeletal plays it: both the file read back and the
    in-memory asset + clips it was written from (FBX asset, retargeted clips) match the truth."""
    truth_path = DATA / f"{case}-truth.json"
    path, source, clips = TRUTH_CASES[case](tmp_path)
    if not truth_path.is_file():
        pytest.fail(f"{truth_path} is missing; regenerate it: {sys.executable} tests/test_export.py --regenerate-truth")
    truth = load_truth(truth_path)
    same_bytes = hashlib.sha256(path.read_bytes()).hexdigest() == truth["model"]["sha256"]
    written = skeletal.load(path)
    rest = skeletal.Clip("rest", [])
    bakers = {
        "written": lambda clip, times, loop: skeletal.bake(written, clip, times, loop=loop),
        "in memory": lambda clip, times, loop: skeletal.bake(source, clips[clip], times, loop=loop),
    }
    for which, bake_fn in bakers.items():
        try:
            report = compare_truth(truth, bake_fn, rest_fn=lambda: skeletal.bake(written, rest, [0.0]), skip=negative_pingpong)
        except AssertionError as exc:
            if same_bytes:
                raise
            raise AssertionError(f"{path.name} is not the file the committed truth was made from (retargeting, demo, "
                                 f"reader or writer changed); regenerate: {sys.executable} tests/test_export.py "
                                 f"--regenerate-truth\n{exc}") from None
        assert report.samples_compared >= len(clips) * 2 * 7, which
        print(which, report.summary())


def regenerate_truth() -> None:
    from test_demo_writer import truth_tool, write_truth

    tool = truth_tool()
    DATA.mkdir(parents=True, exist_ok=True)
    for case, build in TRUTH_CASES.items():
        try:
            model = build(NPM_DIR)[0]
        except pytest.skip.Exception as exc:
            print(f"skipped {case}: {exc}")
            continue
        write_truth(tool, model, DATA / f"{case}-truth.json", TRUTH_OPTIONS)


if __name__ == "__main__":
    if sys.argv[1:] == ["--regenerate-truth"]:
        regenerate_truth()
    else:
        raise SystemExit(f"usage: {sys.argv[0]} --regenerate-truth")
