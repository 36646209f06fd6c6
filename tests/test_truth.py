"""End-to-end fidelity: ``skeletal.bake`` against three.js reference outputs.

Two sources of truth:

* ``$SKELETAL_TRUTH`` (default ``../shared/truth``) for the real models in ``$SKELETAL_ASSETS``
  (default ``../shared/assets``; see tests/fixtures/shared_assets.py), each skipped when absent;
* ``tests/data/truth`` for the fixture models the tests build themselves (always run): CUBICSPLINE
  tracks, sparse and quantised accessors, 8 influences, a joint root outside every scene.

Ping-pong at negative times is left out: skeletal's ping-pong is the triangle wave symmetric about 0
(``t mod 2d``, reflected in the second half), while three.js starts counting rounds at -1 when time
runs backwards, which shifts negative times by one round.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

import skeletal
from fixtures import models
from fixtures.shared_assets import need, need_truth
from fixtures.truth_compare import compare_truth, load_truth, negative_pingpong

REPO = Path(__file__).resolve().parents[1]
FIXTURE_TRUTH = REPO / "tests" / "data" / "truth"

SHARED_MODELS = [
    "SimpleSkin.gltf", "Fox.glb", "Fox-draco.glb", "Soldier.glb", "Soldier-quantized.glb",
    "RobotExpressive.glb", "RobotExpressive-meshopt.glb", "Mannequin.glb",
]


def check(asset: skeletal.Asset, truth: dict):
    rest = skeletal.Clip("rest", [])
    return compare_truth(
        truth,
        lambda clip, times, loop: skeletal.bake(asset, clip, times, loop=loop),
        rest_fn=lambda: skeletal.bake(asset, rest, [0.0]),
        skip=negative_pingpong,
    )


@pytest.mark.parametrize("model", SHARED_MODELS)
def test_shared_model_matches_threejs(model):
    truth = load_truth(need_truth(Path(model).stem + ".json"))
    report = check(skeletal.load(need(model)), truth)
    assert report.samples_compared > 0


@pytest.fixture(scope="module")
def fixture_models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("truth-fixtures")
    return {name: models.build(name, folder) for name in models.FIXTURES}


@pytest.mark.parametrize("name", ["cubic_spline_arm", "sparse_and_quantized", "orphan_joint_root"])
def test_fixture_model_matches_threejs(name, fixture_models):
    report = check(skeletal.load(fixture_models[name]), load_truth(FIXTURE_TRUTH / f"{name}.json"))
    assert report.samples_compared > 0


def test_eight_influences(fixture_models):
    asset = skeletal.load(fixture_models["eight_influences"])
    assert asset.mesh_instances[0].primitives[0].joints.shape[1] == 8
    # three.js skins with the first influence set only: compare its world matrices ...
    three = copy.deepcopy(load_truth(FIXTURE_TRUTH / "eight_influences.json"))
    three["skinned_meshes"] = []
    check(asset, three)
    # ... and all 8 influences against the independent float64 reference of the glTF formulas.
    check(asset, load_truth(FIXTURE_TRUTH / "eight_influences-8inf.json"))
