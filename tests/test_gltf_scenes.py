"""Scenes (issue 29): ``load`` shows the file's default scene (or the one asked for), nodes outside
it are neither drawn nor animated, clips that animate them say so, ``info`` lists the scenes, every
command that reads a model takes ``--scene``, and ``export`` keeps the choice."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from click.testing import CliRunner

import skeletal
from skeletal.cli import cli
from skeletal.summary import describe

from fixtures.gltf_extensions import two_scenes_model


def _load(path, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asset = skeletal.load(path, **kwargs)
    return asset, [str(w.message) for w in caught]


def _shown_names(asset):
    return sorted(name for name, shown in zip(asset.rig.names, asset.scene_nodes) if shown)


def test_the_default_scene_is_shown_and_its_joints_hanging_outside_too(tmp_path):
    asset, told = _load(two_scenes_model(tmp_path / "two.glb", default=1))
    assert asset.scene == 1 and asset.scene_name == "back"
    assert _shown_names(asset) == ["b", "bone", "skinned"]  # bone: a joint of skinned's skin, in no scene
    assert sorted(asset.document.nodes[m.node].name for m in asset.mesh_instances) == ["b", "skinned"]
    clip = asset.clip("move")
    assert clip.outside_scene == ["a", "loose"] and clip.track_count == 2 and clip.duration == 1.0
    assert len(told) == 1 and "scene 'back'" in told[0] and "'move' (2: a, loose)" in told[0]
    world = skeletal.bake(asset, clip, [1.0])["node_world"][0]
    assert world[0][:3, 3].tolist() == [-3.0, 0.0, 0.0]  # a: outside, stays at rest
    assert world[1][:3, 3].tolist() == [3.0, 1.0, 0.0]  # b: animated


def test_a_scene_chosen_by_index_or_name(tmp_path):
    path = two_scenes_model(tmp_path / "two.glb", default=1)
    for key in (0, "0", "front"):
        asset, told = _load(path, scene=key)
        assert asset.scene == 0 and _shown_names(asset) == ["a"]
        assert asset.clip("move").outside_scene == ["b", "bone", "loose"]
    with pytest.raises(skeletal.ModelError, match=r"two.glb: scenes: no scene 'side' \(scenes: 0 'front', 1 'back'\)"):
        skeletal.load(path, scene="side")
    with pytest.raises(skeletal.ModelError, match="no scene 2"):
        skeletal.load(path, scene=2)


def test_without_a_default_scene_the_first_is_shown(tmp_path):
    asset, _ = _load(two_scenes_model(tmp_path / "nodefault.glb", default=None))
    assert asset.document.scene is None and asset.scene == 0


def test_a_document_without_scenes_shows_every_node(tmp_path):
    from skeletal.io.gltf import read_gltf

    doc = read_gltf(two_scenes_model(tmp_path / "two.glb"))
    doc.scenes, doc.scene = [], None
    asset = skeletal.Asset(doc)
    assert asset.scene is None and asset.scene_nodes.all() and asset.clip("move").outside_scene == []
    assert len(asset.mesh_instances) == 3


def test_export_keeps_the_scene_shown_as_the_default(tmp_path):
    asset, _ = _load(two_scenes_model(tmp_path / "two.glb", default=1), scene="front")
    skeletal.export(asset, tmp_path / "out.gltf")
    gltf = json.loads((tmp_path / "out.gltf").read_text())
    assert gltf["scene"] == 0 and [s.get("name") for s in gltf["scenes"]] == ["front", "back"]
    again, _ = _load(tmp_path / "out.gltf")
    assert again.scene == 0 and _shown_names(again) == ["a"]


def test_info_lists_the_scenes_and_every_model_command_takes_scene(tmp_path):
    path = two_scenes_model(tmp_path / "two.glb", default=1)
    runner = CliRunner()
    result = runner.invoke(cli, ["info", str(path)])
    assert result.exit_code == 0, result.output
    assert "scenes: [0] front (1 root)   [1] back (2 roots, default, shown)" in result.output
    assert "animates 2 node(s) outside the scene shown" in result.output
    result = runner.invoke(cli, ["info", str(path), "--scene", "front", "--json"])
    info = json.loads(result.output[result.output.index("{"):])
    assert info["scene"] == 0 and info["default_scene"] == 1 and info["scene_names"] == ["front", "back"]
    result = runner.invoke(cli, ["bake", str(path), "--scene", "front", "--times", "1", "--out", str(tmp_path / "b.npz")])
    assert result.exit_code == 0, result.output
    assert np.load(tmp_path / "b.npz")["node_world"][0, 0, 1, 3] == 1.0  # a, animated in scene front
    result = runner.invoke(cli, ["export", str(path), "--scene", "back", "--out", str(tmp_path / "e.glb")])
    assert result.exit_code == 0, result.output
    result = runner.invoke(cli, ["bake", str(path), "--scene", "nope", "--times", "1", "--out", str(tmp_path / "c.npz")])
    assert result.exit_code == 2 and result.output.strip().splitlines()[-1].startswith("skeletal: error: two.glb: scenes: no scene")
    for command in ("render", "view", "html", "compress", "export", "bake", "info"):
        help_text = runner.invoke(cli, [command, "--help"]).output
        assert "--scene" in help_text, command


def test_a_single_scene_file_shows_everything_as_before():
    from skeletal.demo import demo_asset

    asset = demo_asset()
    info = describe(asset)
    assert info["scene"] == 0 and asset.scene_nodes.all()
    assert all(c["outside_scene"] == [] for c in info["clips"])


def test_scene_choice_matches_threejs(tmp_path):
    """tests/data/gltf29/two_scenes.json (three.js, tools/make_gltf29_truth.py): three.js shows the
    same nodes (the default scene's plus the joint hanging in no scene), binds the same tracks, and
    poses them the same."""
    import hashlib
    from pathlib import Path

    from fixtures.truth_compare import compare_truth, load_truth

    truth = load_truth(Path(__file__).parent / "data" / "gltf29" / "two_scenes.json")
    path = two_scenes_model(tmp_path / "two_scenes.glb")
    assert hashlib.sha256(path.read_bytes()).hexdigest() == truth["model"]["sha256"], "rerun tools/make_gltf29_truth.py"
    asset, _ = _load(path)
    three_shown = set(truth["scene_nodes"]) | set(truth["orphan_joint_roots"])
    assert set(asset.rig.node_of[asset.scene_nodes].tolist()) == three_shown
    unbound = sorted(t["name"].split(".")[0] for c in truth["clips"] for t in c["tracks"] if not t["bound"])
    assert asset.clip("move").outside_scene == unbound
    report = compare_truth(truth, lambda clip, times, loop: skeletal.bake(asset, clip, times, loop=loop))
    assert report.samples_compared == 5 and report.max_matrix_rel_error < 1e-6, report.summary()
