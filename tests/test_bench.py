"""skeletal bench: the command runs and writes every figure; the numpy baselines compute what the
library computes. No timing is asserted anywhere."""

import json

import numpy as np
import pytest
from click.testing import CliRunner

import skeletal
from skeletal import bench as B
from skeletal.cli.bench import bench as bench_command
from skeletal.demo import build_demo_document, demo_asset
from skeletal.skinning.lbs import pack_palette, skin, skin_into

SOLDIER = B.DEFAULT_MODEL
STAT_KEYS = {"median", "min", "max", "repeats", "unit"}


def assert_stat(s):
    assert STAT_KEYS <= set(s), s
    assert s["min"] <= s["median"] <= s["max"]
    assert s["repeats"] >= 1 and np.isfinite([s["min"], s["median"], s["max"]]).all()


def test_bench_quick_writes_every_figure(tmp_path):
    out = tmp_path / "bench.json"
    result = CliRunner().invoke(bench_command, ["--quick", "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "crowd" in result.output and "skinning" in result.output
    data = json.loads(out.read_text())
    for key in ("crowd_chars_per_s", "crowd_10k_frame_ms", "single_update_us", "skin_mverts_per_s", "skin_mverts_per_s_1thread",
                "skin_fraction_of_bandwidth", "load_ms"):
        assert_stat(data[key])
    baselines = data["baselines"]
    for key in ("crowd_chars_per_s_numpy", "crowd_10k_frame_ms_numpy", "single_update_us_numpy", "skin_mverts_per_s_numpy", "load_ms_numpy",
                "bandwidth_gbs", "dram_bandwidth_gbs", "copy_bandwidth_gbs"):
        assert_stat(baselines[key])
    assert baselines["threads"] == data["threads"] == data["machine"]["threads"] >= 1
    for key in ("cpu_model", "numba", "numpy", "cpu_count"):
        assert data["machine"][key]
    assert data["quick"] is True
    # the default model: Soldier.glb from the shared assets when they are there, else the built-in character
    expected = SOLDIER.name if SOLDIER.exists() else f"built-in demo character ({SOLDIER.name} not found)"
    assert data["model"] == expected
    assert data["config"]["big_crowd_count"] == 10_000
    assert data["config"]["crowd_count"] == 1000 and data["config"]["skin_vertices"] == 100_000
    assert data["config"]["skin_bytes_per_vertex"] == 68  # uint8 joints, 4 influences, positions + normals
    assert set(data["ratios"]) >= {"crowd_vs_numpy", "single_vs_numpy", "skin_vs_numpy", "load_vs_numpy"}
    assert data["skin_fraction_of_bandwidth"]["bound_mverts_per_s"] > 0


def test_model_fallback_is_the_demo_character(monkeypatch, tmp_path):
    monkeypatch.setattr(B, "DEFAULT_MODEL", tmp_path / "missing.glb")
    asset, label, path = B.resolve_model(None)
    assert path is None and "demo" in label and "missing.glb" in label
    assert B.walk_clip(asset) == "walk"
    load = B.bench_load(None, repeats=1)
    assert load["load_ms"]["file"] == "demo.glb"


@pytest.fixture(scope="module")
def soldier_or_demo():
    return skeletal.load(SOLDIER) if SOLDIER.exists() else demo_asset()


def test_numpy_poser_matches_player_and_crowd(soldier_or_demo):
    asset = soldier_or_demo
    clip = B.walk_clip(asset)
    poser = B.NumpyPoser(asset, asset.clip(clip))
    player = skeletal.Player(asset)
    player.play(clip)
    for _ in range(7):
        player.update(0.173)
        t = player.mixer.fs[0, 0, 1]  # the clip-local time the pose shows
        expected = np.concatenate([p[:, :3, :] for p in player.palettes])
        np.testing.assert_allclose(poser.update(np.array([t]))[0], expected, atol=1e-5)
    # a crowd at random phases (the crowd may use nlerp for close keys and float32: looser)
    rng = np.random.default_rng(0)
    offsets = rng.uniform(0, asset.clip(clip).duration, 64)
    crowd, _ = B.make_crowd(asset, 64, clip, offsets)
    crowd.update(1 / 60)
    size = np.abs(poser.inverse_bind[:, :3, 3]).max() + 1
    np.testing.assert_allclose(B.crowd_palettes(crowd), poser.update(offsets + 1 / 60), atol=5e-4 * size)


def test_numpy_poser_cubic_and_step_tracks():
    asset = demo_asset()  # idle is CUBICSPLINE
    idle = asset.clip("idle")
    assert {t.interpolation for t in idle.tracks} == {"CUBICSPLINE"}
    poser = B.NumpyPoser(asset, idle)
    player = skeletal.Player(asset)
    player.play("idle")
    for _ in range(5):
        player.update(0.37)
        t = player.mixer.fs[0, 0, 1]
        np.testing.assert_allclose(poser.update(np.array([t]))[0], player.palettes[0][:, :3, :], atol=1e-5)
    step = skeletal.Clip("step", [skeletal.Track(asset.rig.find("hips"), "translation", "STEP",
                                                 np.array([0.0, 0.5, 1.0], np.float32),
                                                 np.array([[0, 1, 0], [0, 2, 0], [0, 3, 0]], np.float32))])
    pose = B.NumpyPoser(asset, step).local_pose(np.array([0.25, 0.75]))
    np.testing.assert_array_equal(pose[1, asset.rig.find("hips")], [1.0, 2.0])  # y of both instances


def test_numpy_skin_matches_library():
    palette, joints, weights, positions, normals = B.synthetic_mesh(5000, joints=20)
    p, n = B.numpy_skin(palette, joints, weights, positions, normals)
    pal44 = np.zeros((20, 4, 4))
    pal44[:, :3] = palette
    pal44[:, 3, 3] = 1
    ref_p, ref_n, _ = skin(pal44, joints, weights, positions, normals)
    np.testing.assert_allclose(p, ref_p, atol=1e-4)
    np.testing.assert_allclose(n, ref_n, atol=1e-4)
    out_p, out_n = np.empty_like(positions), np.empty_like(normals)
    skin_into(pack_palette(palette), joints, weights, positions, normals, None, out_p, out_n)
    np.testing.assert_allclose(out_p, p, atol=1e-4)
    np.testing.assert_allclose(out_n, n, atol=1e-4)


def test_numpy_glb_decode_matches_the_reader(tmp_path):
    from skeletal.io.gltf import read_gltf
    from skeletal.io.gltf_write import write_gltf

    path = tmp_path / "demo.glb"
    write_gltf(build_demo_document(), str(path))
    doc_json, arrays = B.numpy_glb_decode(path)
    assert len(arrays) == len(doc_json["accessors"])
    doc = read_gltf(path)
    prim = doc_json["meshes"][0]["primitives"][0]["attributes"]
    np.testing.assert_array_equal(arrays[prim["POSITION"]], doc.meshes[0].primitives[0].positions)
    np.testing.assert_array_equal(arrays[prim["JOINTS_0"]], doc.meshes[0].primitives[0].joints)


def test_bandwidth_and_table_helpers():
    bw = B.measure_bandwidth(1 << 20, repeats=2)
    assert bw["unit"] == "GB/s" and bw["median"] > 0 and bw["bytes"] > 0.99 * (1 << 20)
    s = B.rate([2.0, 1.0, 4.0], 8.0, 1.0, "x/s")
    assert (s["min"], s["median"], s["max"]) == (2.0, 4.0, 8.0)
    assert B.skin_bytes_per_vertex(np.zeros((1, 4), np.uint16), 4) == 72


def test_machine_info_names_the_vector_width():
    """Every benchmark title carries the CPU and its vector width: ratios differ between an AVX-512
    and an AVX2 machine, so a report must say which it came from."""
    from skeletal.bench import machine_info, vector_info

    vec = vector_info()
    assert vec["vector_bits"] in (0, 128, 256, 512)
    assert vec["isa"] and vec["llvm_cpu"]
    info = machine_info()
    assert info["vector_bits"] == vec["vector_bits"] and info["llvm_cpu"] == vec["llvm_cpu"]
    assert info["cpu_model"].startswith(info["cpu_name"])
    assert vec["llvm_cpu"] in info["cpu_model"]
    if vec["vector_bits"]:
        assert f"{vec['vector_bits']}-bit vectors" in info["cpu_model"]
