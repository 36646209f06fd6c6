"""skeletal.bridges.blender: Blender (bpy, in a child process) against skeletal, both ways.

Without bpy (the first group): the axis/scale fit recovers a known turn and unit; :func:`compare`
passes Blender-like samples made from skeletal's own pose turned into Z up, and fails a wrong pose.

With bpy (``$SKELETAL_BLENDER_PYTHON`` or bpy in this Python; scripts/test makes ``.venv-blender``),
for the built-in character and Fox (when the shared assets are there), every clip at 3 frames:

* Blender's import of the original and skeletal agree to 1e-4 of the model's size at the clips' key frames;
* skeletal reads Blender's glTF, BVH and USD exports and poses them as Blender does to 1e-4 of the
  size; Blender's FBX (read through Assimp) within 1e-2, and where it misses 1e-4, Blender's own
  importer reading the same file back misses Blender's pose by at least half as much (the file does
  not hold the pose that precisely: the format table in docs/guides/bridges.md has the figures);
  the built-in character's FBX without keyframe reduction to 1e-4 (its walk and run leave a bone
  unkeyed, which Blender's FBX writer fills with the pose the export starts from: rest here);
* Blender reads skeletal's glTF and BVH and poses them as skeletal does to 1e-4; for skeletal's USD,
  where Blender's importer disagrees, usd-core's own UsdSkel evaluation of the same stage agrees with
  skeletal to 1e-4 (the row says so).
"""

from __future__ import annotations

import numpy as np
import pytest

import skeletal
from skeletal.bridges.blender import TOLERANCE, Check, blender_python, check_model, compare, fit_axes, format_table

from fixtures.shared_assets import need

Z_UP = np.array([[1.0, 0, 0], [0, 0, -1], [0, 1, 0]])  # Blender's import of a Y-up file: (x, y, z) -> (x, -z, y)


def _fake_action(asset, clip, frames, fps, turn=Z_UP, scale=1.0, names=None):
    """Samples as blender_child writes them, made from skeletal's own pose (heads in a Z-up world)."""
    from skeletal.bridges.blender import joint_positions

    all_names, world = joint_positions(asset, clip, [f / fps for f in frames])
    keep = names or [n for n in all_names if n]
    rows = [all_names.index(n) for n in keep]
    samples = [{"frame": f, "heads": {n: (scale * turn @ world[i, r]).tolist() for n, r in zip(keep, rows)}}
               for i, f in enumerate(frames)]
    return {"name": clip.name, "frame_range": [frames[0], frames[-1]], "samples": samples, "key_samples": samples,
            "range_samples": samples}


def test_fit_axes_recovers_turn_and_unit():
    rng = np.random.default_rng(3)
    points = rng.normal(size=(20, 3))
    rotation, scale = fit_axes(points, 100.0 * points @ Z_UP.T)
    np.testing.assert_array_equal(rotation, Z_UP)
    assert scale == 100.0


def test_compare_passes_the_same_pose_and_fails_another(demo):
    clip = demo.clip("walk")
    action = _fake_action(demo, clip, [0, 8, 16, 24], 24.0, scale=0.01)
    row = compare(action, 24.0, demo, clip, model="demo", direction="blender->skeletal", fmt="glb")
    assert row.passed and row.relative < 1e-9, row
    assert row.axes == "x,z,-y" and row.scale == 100.0 and row.time_origin == "F/fps"
    assert row.joints == len([n for n in demo.rig.names if n])
    wrong = compare(action, 24.0, demo, demo.clip("run"), model="demo", direction="blender->skeletal", fmt="glb")
    assert not wrong.passed and wrong.relative > 10 * TOLERANCE
    assert "demo" in format_table([row, wrong]) and "NO" in format_table([row, wrong])


@pytest.fixture(scope="module")
def bpy_python():
    python = blender_python()
    if python is None:
        pytest.skip('bpy is not installed (pip install "skeletal[blender]", or set SKELETAL_BLENDER_PYTHON): '
                    "Blender round trips skipped")
    return python


def _by(rows: list[Check], direction: str, fmt: str) -> list[Check]:
    return [r for r in rows if r.direction == direction and r.format == fmt]


def _check(model, python, tmp_path, exports=("glb", "fbx", "bvh", "usd")):
    rows = check_model(model, tmp_path, blender_exports=exports, samples=3, python=python)
    print(format_table(rows))
    asset = skeletal.load(model)
    n_clips = len(asset.clips)
    imports = [r for r in rows if r.direction == "import"]
    assert len(imports) == n_clips and all(r.passed for r in imports), format_table(imports)
    for fmt in ("glb", "bvh", "usd"):
        got = _by(rows, "blender->skeletal", fmt)
        assert len(got) == n_clips and all(r.passed for r in got), format_table(got)
    # FBX (through Assimp): within 1e-2 of the size, not 1e-4; Blender's own importer reading the same
    # file back is no closer to Blender's pose (see docs/guides/bridges.md, Blender)
    got = _by(rows, "blender->skeletal", "fbx")
    back = {r.clip: r for r in _by(rows, "blender->blender", "fbx")}
    assert len(got) == n_clips and all(r.relative < 1e-2 for r in got), format_table(got)
    for r in got:
        if not r.passed:
            assert r.clip in back and back[r.clip].relative >= 0.5 * r.relative, format_table([r, *back.values()])
    for fmt in ("glb", "bvh"):
        got = _by(rows, "skeletal->blender", fmt)
        assert len(got) == n_clips and all(r.passed for r in got), format_table(got)
    for r in _by(rows, "skeletal->blender", "usd"):
        if not r.passed:  # Blender's USD importer: the reference implementation decides
            agree = float(r.note.rsplit("agrees with skeletal to ", 1)[1].split()[0])
            assert agree <= TOLERANCE, r.note
    return rows


def test_blender_both_ways_on_the_built_in_character(bpy_python, tmp_path):
    rows = _check(skeletal.examples.path("demo.glb"), bpy_python, tmp_path,
                  exports=("glb", "fbx", "bvh", "usd", "fbx-exact"))
    # walk and run do not key right_shoulder: Blender's FBX writer bakes into it whatever pose the
    # armature holds when the export starts, so the child exports from the rest pose (without that,
    # the right arm was 2.0e-3 of the size off in this row)
    exact = _by(rows, "blender->skeletal", "fbx-exact")
    assert {r.clip for r in exact} >= {"walk", "run"} and all(r.passed and r.scale == 1.0 for r in exact), \
        format_table(exact)


def test_blender_both_ways_on_fox(bpy_python, tmp_path):
    _check(need("Fox.glb"), bpy_python, tmp_path)
