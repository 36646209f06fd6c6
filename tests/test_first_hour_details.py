"""Details a new user meets (issue 21): the camera frames a retargeted character from its front
(item 8), the viewer's stats for a model without skin and `edit --help` (item 10), `bench`'s table
fits 100 columns and says when the built-in character stood in for Soldier.glb (item 12)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

import skeletal
from skeletal import bench as B
from skeletal.anim.clip import Clip, Track
from skeletal.render.camera import clip_turn, facing_yaw

from fixtures.gltf_builder import GltfBuilder
from fixtures.shared_assets import ASSETS
from fixtures.xvfb import xvfb_display


@pytest.fixture(scope="module")
def demo():
    from skeletal.demo import demo_asset

    return demo_asset()


def turned(clip: Clip, degrees: float) -> Clip:
    """``clip`` with its root (rig node 0) turned ``degrees`` about +Y for the whole clip."""
    half = np.radians(degrees) / 2
    q = np.array([0.0, np.sin(half), 0.0, np.cos(half)], np.float32)
    keep = [t for t in clip.tracks if not (t.node == 0 and t.path == "rotation")]
    return Clip(f"{clip.name}_turned", keep + [Track(0, "rotation", "LINEAR", np.array([0.0, clip.duration], np.float32),
                                                      np.stack([q, q]))])


# -- item 8: the front follows the clip ---------------------------------------------------------


def test_the_demo_clips_keep_the_bind_front(demo):
    assert facing_yaw(demo) == 0.0
    for clip in demo.clips:
        assert facing_yaw(demo, clip) == 0.0


@pytest.mark.parametrize("degrees, expected", [(180.0, 180.0), (90.0, 90.0), (-90.0, -90.0), (30.0, 0.0)])
def test_a_clip_that_turns_the_character_turns_the_front(demo, degrees, expected):
    clip = turned(demo.clip("walk"), degrees)
    assert clip_turn(demo, clip) == pytest.approx(degrees, abs=2.0)
    assert facing_yaw(demo, clip) % 360.0 == pytest.approx(expected % 360.0)


def test_a_rig_without_legs_keeps_the_bind_front(tmp_path):
    b = GltfBuilder()
    arm, hand = b.add_node("arm"), b.add_node("hand", translation=[1, 0, 0])
    b.add_children(arm, [hand])
    b.add_scene([arm])
    asset = skeletal.load(b.write_glb(tmp_path / "arm.glb"))
    clip = turned(Clip("still", [Track(1, "translation", "LINEAR", np.array([0.0, 1.0], np.float32),
                                       np.array([[1, 0, 0], [1, 0, 0]], np.float32))]), 180.0)
    assert clip_turn(asset, clip) == 0.0 and facing_yaw(asset, clip) == facing_yaw(asset)


def test_retargeted_soldier_is_framed_from_the_front():
    src, tgt = ASSETS / "cmu_12_01_walk.bvh", ASSETS / "Soldier.glb"
    if not (src.is_file() and tgt.is_file()):
        pytest.skip(f"{src} / {tgt} not found (the shared test assets are not checked out beside the repository)")
    source, soldier = skeletal.load(src), skeletal.load(tgt)
    walk = skeletal.retarget(source.clips[0], source.rig, soldier.rig)
    assert facing_yaw(soldier) == 180.0  # Soldier.glb's bind pose faces -Z
    assert facing_yaw(soldier, walk) % 360.0 == 0.0  # the CMU walk (facing +Z) turned it round
    for clip in soldier.clips:  # its own clips keep its front (Idle stands 43 degrees turned: kept)
        assert facing_yaw(soldier, clip) % 360.0 == 180.0


# -- item 10: viewer stats without skin, edit --help ---------------------------------------------


def test_viewer_stats_without_skin_show_no_skinning():
    from skeletal.render.viewer import FrameStats

    for skinned in (True, False):
        stats = FrameStats(skinned=skinned)
        stats.add({"update": 0.001, "palette": 0.0, "upload": 0.0, "draw": 0.002, "frame": 0.004})  # skipped
        stats.add({"update": 0.001, "palette": 0.0005, "upload": 0.0001, "draw": 0.002, "frame": 0.004})
        labels = [label.strip() for label, _ in stats.rows()]
        if skinned:
            assert "skinning" in labels and "palette" in labels
        else:
            assert "skinning" not in labels and "palette" not in labels and "upload" not in labels
            assert "draw (no skin)" in labels


@pytest.fixture(scope="module")
def xdisplay():
    yield from xvfb_display("640x480x24", ("glfw", "moderngl"), "pip install glfw moderngl")


def test_viewer_shows_no_skinning_time_for_a_bvh(xdisplay, tmp_path):
    bvh = tmp_path / "walk.bvh"
    skeletal.write_bvh(skeletal.load(skeletal.examples.path("demo.glb")), "walk", str(bvh), fps=30)
    run = subprocess.run([sys.executable, "-m", "skeletal", "view", str(bvh), "--frames", "4", "--size", "320x240",
                          "--screenshot", str(tmp_path / "v.png"), "-v"], capture_output=True, text=True,
                         env=dict(os.environ, DISPLAY=xdisplay), timeout=1200)
    assert run.returncode == 0, run.stderr
    timings = [line for line in run.stderr.splitlines() if "pose (CPU)" in line]
    assert timings, run.stderr
    assert "draw (no skin)" in timings[-1] and "skinning" not in timings[-1]


def test_edit_help_names_every_format():
    from skeletal.cli import cli

    result = CliRunner().invoke(cli, ["edit", "--help"])
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    for suffix in (".gltf/.glb", ".bvh", ".fbx", ".dae"):
        assert suffix in text


# -- item 12: bench table width and the stand-in model -------------------------------------------


def stat(value: float, unit: str, **extra) -> dict:
    return {"median": value, "min": value * 0.9, "max": value * 1.25, "repeats": 5, "unit": unit, **extra}


def bench_result(model: str, note: str | None = None) -> dict:
    """A result of the shape run_suite returns, with wide numbers and a long feature row."""
    baselines = {
        "crowd_chars_per_s_numpy": stat(123456.0, "characters/s"), "crowd_10k_frame_ms_numpy": stat(912.5, "ms"),
        "single_update_us_numpy": stat(1234.5, "us"), "skin_mverts_per_s_numpy": stat(45.6, "M vertices/s"),
        "load_ms_numpy": stat(123.4, "ms"), "bandwidth_gbs": stat(23.4, "GB/s", bytes=6.8e6),
        "dram_bandwidth_gbs": stat(11.2, "GB/s", bytes=512e6), "copy_bandwidth_gbs": stat(9.8, "GB/s"),
    }
    return {
        "model": model, "model_note": note, "clip": "walk", "quick": True, "threads": 2, "seconds": 123.4,
        "machine": {"threads": 2, "cpu_model": "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz (a long model name)",
                    "numba": "0.60.0", "cpu_count": 2, "background_load_before": 1.5, "background_load_after": 1.7},
        "config": {"crowd_count": 1000, "crowd_class": "Crowd", "big_crowd_count": 10_000, "skin_vertices": 100_000,
                   "skin_influences": 4, "skin_bytes_per_vertex": 68},
        "baselines": baselines,
        "crowd_chars_per_s": stat(1234567.0, "characters/s"), "crowd_10k_frame_ms": stat(12.3, "ms"),
        "single_update_us": stat(45.6, "us"), "skin_mverts_per_s": stat(345.6, "M vertices/s"),
        "skin_mverts_per_s_1thread": stat(180.2, "M vertices/s"),
        "skin_fraction_of_bandwidth": stat(0.45, "fraction", bound_mverts_per_s=1234.0),
        "skin_fraction_of_dram_bandwidth": stat(0.71, "fraction", bound_mverts_per_s=567.0),
        "load_ms": stat(23.4, "ms", file="Soldier.glb"),
        "ratios": {"crowd_vs_numpy": 10.0, "crowd_10k_vs_numpy": 74.2, "single_vs_numpy": 27.1,
                   "skin_vs_numpy": 7.6, "load_vs_numpy": 5.3},
        "features": {"procedural": {"rows": [
            {"name": "procedural: 1000 x walk on terrain with foot placement, look-at and spring bones (update)",
             "stat": stat(2.34, "ms"), "baseline": "Mixer without procedural stages 1.52 ms", "ratio": "1.54x",
             "reference": "Unreal's Control Rig foot IK on a comparable crowd"}]}},
    }


@pytest.mark.parametrize("note", [None, "Soldier.glb was not found (/x/shared/assets/Soldier.glb): the figures "
                                        "are for the built-in character (--model FILE measures another model)"])
def test_bench_table_fits_100_columns(note):
    model = "built-in demo character (Soldier.glb not found)" if note else "Soldier.glb"
    text = B.format_table(bench_result(model, note))
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 100, max(lines, key=len)
    assert any(line.startswith("crowd: 1000 x walk (Crowd)") for line in lines)
    assert "baseline: numpy 123k; reference: ozz 788k" in text
    assert "Unreal's Control Rig" in text and "procedural: 1000 x walk" in text  # wrapped, not cut
    if note:
        assert "note: Soldier.glb was not found" in " ".join(lines)


def test_bench_says_when_the_built_in_character_stands_in(monkeypatch, tmp_path):
    monkeypatch.setattr(B, "DEFAULT_MODEL", tmp_path / "Soldier.glb")
    said = []

    class Stop(Exception):
        pass

    def stop_after_note(message):
        said.append(message)
        raise Stop

    with pytest.raises(Stop):
        B.run_suite(quick=True, progress=stop_after_note)
    assert said[0].startswith(f"Soldier.glb was not found ({tmp_path / 'Soldier.glb'}): the figures are for the "
                              "built-in character")
