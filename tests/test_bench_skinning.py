"""skeletal.bench.skinning: issue 17's one-thread skinning rows (a character mesh, thread CPU clock)."""

import numpy as np

from skeletal import bench as B
from skeletal.bench import skinning
from skeletal.demo import demo_asset


def test_rows_have_stats_baselines_and_load():
    asset = demo_asset()
    result = skinning.bench_rows(asset, B.walk_clip(asset), None, quick=True)
    assert len(result["rows"]) == 2
    for row, mode in zip(result["rows"], ("cofactor", "linear")):
        s = row["stat"]
        assert s["unit"] == "M vertices/s" and 0 < s["min"] <= s["median"] <= s["max"]
        assert mode in row["name"] and "1 thr (CPU time, load" in row["name"]
        assert "two-vertex kernel" in row["baseline"] and "numpy" in row["baseline"]
        assert row["ratio"].endswith("x") and "ozz" in row["reference"]
    assert np.isfinite(result["load_before"]) and result["vertices"] > 0
    assert result["skin_char_numpy_mverts_per_s"]["median"] > 0


def test_character_mesh_is_the_largest_skinned_primitive():
    asset = demo_asset()
    mesh = skinning.character_mesh(asset, B.walk_clip(asset))
    assert mesh is not None  # the built-in character: a skinned body with normals
    palette, joints, weights, positions, normals, label = mesh
    assert palette.dtype == np.float32 and palette.shape[1:] == (3, 4)
    assert joints.dtype == np.uint16 and joints.shape == weights.shape and len(positions) == len(normals)
    assert int(joints.max()) < len(palette) and label == f"{len(positions)} verts"


def test_synthetic_fallback_without_a_skinned_mesh():
    assert skinning.character_mesh(object(), None) is None
