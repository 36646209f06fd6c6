"""Clip compression (skeletal.compress / skeletal.cliptools.compress): the world-space error bound
on generated clips, the demo character and the shared models, hierarchy propagation, glTF round
trips (16-bit rotation keys included), playback of compressed clips and the ``skeletal compress``
command.

Errors are checked independently of the module's own measure: both clips are sampled with
``skeletal.sample``, posed with ``skeletal.world_matrices`` and the virtual vertices compared in
numpy here.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import skeletal
from skeletal.cli import cli
from skeletal.anim.clip import Clip, Track
from skeletal.tools.cliptools import compress, make_additive
from skeletal.tools.compress import (animation_bytes, compress_asset, compression_stats, default_distance, dense_times,
                               max_error, quantize_rotations)
from skeletal.demo import demo_asset
from skeletal.io.gltf_write import short_codes
from skeletal.anim.rig import Rig

from fixtures.shared_assets import ASSETS

REPO = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------------------------------
# an independent measure


def world_error(original: Clip, compressed: Clip, rig: Rig, distance: float, times: np.ndarray) -> np.ndarray:
    """(T, N) errors of the origin and virtual vertices at ``distance`` along each node's original
    world axes, from the library's sampler and posing (numpy maths here)."""
    n = len(rig)
    width = max([t.width for t in original.tracks if t.path == "weights"], default=0)
    ms = np.arange(n + 1) * width
    p0, _ = skeletal.sample(original, times, rig.rest, ms, np.zeros(n * width))
    p1, _ = skeletal.sample(compressed, times, rig.rest, ms, np.zeros(n * width))
    w0 = skeletal.world_matrices(rig.parents, p0)
    w1 = skeletal.world_matrices(rig.parents, p1)
    axes = w0[..., :3, :3] / np.linalg.norm(w0[..., :3, :3], axis=-2, keepdims=True)
    points0 = [w0[..., :3, 3]] + [w0[..., :3, 3] + distance * axes[..., :, a] for a in range(3)]
    # the same material points carried by the compressed transform
    inv0 = np.linalg.inv(w0)
    err = np.zeros(w0.shape[:2])
    for p in points0:
        local = np.einsum("tnij,tnj->tni", inv0[..., :3, :3], p) + inv0[..., :3, 3]
        moved = np.einsum("tnij,tnj->tni", w1[..., :3, :3], local) + w1[..., :3, 3]
        err = np.maximum(err, np.linalg.norm(moved - p, axis=-1))
    return err


def axis_angle(axis, angle) -> np.ndarray:
    axis = np.asarray(axis, np.float64) / np.linalg.norm(axis)
    return np.array([*(axis * math.sin(angle / 2)), math.cos(angle / 2)])


def chain_rig(n: int, length: float = 1.0) -> Rig:
    """n joints in a line along +y, each ``length`` from its parent."""
    rest = np.zeros((n, 10))
    rest[1:, 1] = length
    rest[:, 6] = 1.0
    rest[:, 7:10] = 1.0
    return Rig.from_parents([f"j{i}" for i in range(n)], [-1] + list(range(n - 1)), rest)


def smooth_clip(rig: Rig, frames: int = 61, fps: float = 30.0, seed: int = 0, interpolation: str = "LINEAR",
                noise: float = 0.0) -> Clip:
    """Sinusoidal rotations on every joint, a root translation and a scale track, sampled at ``fps``."""
    rng = np.random.default_rng(seed)
    times = (np.arange(frames) / fps).astype(np.float32)
    t = times.astype(np.float64)
    tracks = []
    for j in range(len(rig)):
        axis = rng.normal(size=3)
        freq, amp = rng.uniform(0.5, 2.0), rng.uniform(0.1, 0.6)
        angles = amp * np.sin(2 * np.pi * freq * t + rng.uniform(0, 6)) + noise * rng.normal(size=len(t))
        q = np.array([axis_angle(axis, a) for a in angles])
        q = quat_rest(rig, j, q)
        tracks.append(Track(j, "rotation", interpolation, times, cubic(q, t) if interpolation == "CUBICSPLINE" else q))
    trans = np.stack([0.3 * np.sin(2 * np.pi * 0.7 * t), 0.05 * np.cos(2 * np.pi * 1.3 * t), 0.2 * t], axis=1)
    tracks.append(Track(0, "translation", interpolation, times, cubic(trans, t) if interpolation == "CUBICSPLINE" else trans))
    scale = np.ones((len(t), 3)) + 0.05 * np.sin(2 * np.pi * t)[:, None]
    tracks.append(Track(1, "scale", interpolation, times, cubic(scale, t) if interpolation == "CUBICSPLINE" else scale))
    return Clip(f"smooth-{interpolation}", tracks)


def quat_rest(rig: Rig, j: int, q: np.ndarray) -> np.ndarray:
    return q / np.linalg.norm(q, axis=1, keepdims=True)


def cubic(values: np.ndarray, t: np.ndarray) -> np.ndarray:
    """CUBICSPLINE keys with finite-difference tangents (in, value, out per key)."""
    d = np.gradient(values, t, axis=0)
    return np.stack([d, values, d], axis=1).reshape(-1, values.shape[1])


def check_bound(original: Clip, small: Clip, rig: Rig, error: float, distance: float | None = None) -> float:
    if distance is None:
        distance = default_distance(original, rig)
    err = world_error(original, small, rig, distance, dense_times(original))
    worst = float(err.max())
    assert worst <= error * (1 + 1e-9), f"{original.name}: max error {worst:g} > bound {error:g}"
    own = max_error(original, small, rig, distance=distance)
    assert own == pytest.approx(worst, rel=1e-6, abs=1e-12)
    return worst


# ------------------------------------------------------------------------------------------------
# generated clips


@pytest.mark.parametrize("interpolation", ["LINEAR", "STEP", "CUBICSPLINE"])
def test_bound_on_generated_clips(interpolation):
    rig = chain_rig(6, 0.5)
    clip = smooth_clip(rig, interpolation=interpolation, seed=3)
    for error in (1e-2, 1e-3):
        small = compress(clip, rig, error=error)
        worst = check_bound(clip, small, rig, error)
        if interpolation != "STEP":  # STEP keys step: the whole budget is rarely usable
            assert worst > 0.2 * error  # the budget is used, not wasted
        assert [t.interpolation for t in small.tracks] == [interpolation] * len(small.tracks)
        assert small.duration == clip.duration
        for track in small.tracks:  # keys are a subset of the original ones
            orig = next(t for t in clip.tracks if t.node == track.node and t.path == track.path)
            assert np.isin(track.times, orig.times).all()
        if interpolation == "LINEAR" and error == 1e-2:
            assert animation_bytes(clip) / animation_bytes(small) > 2
        else:
            assert animation_bytes(small) < animation_bytes(clip)
        if interpolation == "CUBICSPLINE":
            assert min(t.key_count for t in small.tracks) >= 2  # glTF's minimum for CUBICSPLINE


def test_bound_with_noisy_keys_and_explicit_distance():
    rig = chain_rig(8, 0.3)
    clip = smooth_clip(rig, frames=91, seed=5, noise=0.003)
    small = compress(clip, rig, error=5e-3, distance=0.1)
    check_bound(clip, small, rig, 5e-3, distance=0.1)
    # a larger virtual vertex distance is a stricter bound: fewer keys go
    strict = compress(clip, rig, error=5e-3, distance=1.0)
    check_bound(clip, strict, rig, 5e-3, distance=1.0)
    assert animation_bytes(strict) >= animation_bytes(small)


def test_hierarchy_propagation_long_chain():
    """A small root wiggle is harmless on a short rig but moves the tip of a long chain by its lever
    arm: compression must keep the root's keys there, and the tip's error stays within the bound."""
    frames = 61
    times = (np.arange(frames) / 30).astype(np.float32)
    angle = 2e-3 * np.sin(2 * np.pi * 2 * times.astype(np.float64))  # 2 mrad root wiggle
    q = np.array([axis_angle([0, 0, 1], a) for a in angle])
    error = 1e-3
    kept, clips, rigs, small = {}, {}, {}, {}
    for n in (2, 30):  # 1 unit vs 29 units of chain below the root
        rig = chain_rig(n, 1.0)
        clip = Clip("wiggle", [Track(0, "rotation", "LINEAR", times, q),
                               Track(n - 1, "translation", "LINEAR", times, np.tile(rig.rest[n - 1, :3], (frames, 1)))])
        small[n] = compress(clip, rig, error=error, distance=0.01, quantize=False)
        worst_by_node = world_error(clip, small[n], rig, 0.01, dense_times(clip)).max(axis=0)
        assert worst_by_node.max() <= error
        root = [t for t in small[n].tracks if t.node == 0 and t.path == "rotation"]
        kept[n] = root[0].key_count if root else 0
        clips[n], rigs[n] = clip, rig
    assert kept[2] <= 12, kept  # 2 mrad at 1 unit: a few keys do
    assert kept[30] > 3 * max(kept[2], 1), kept  # 2 mrad at 29 units: most keys stay
    # the short rig's root track on the long chain: fine at the root, over the bound at the tip
    root_only = Clip("root", [t for t in small[2].tracks if t.node == 0] + clips[30].tracks[1:])
    err = world_error(clips[30], root_only, rigs[30], 0.01, dense_times(clips[30])).max(axis=0)
    assert err[1] <= 2 * error and err[-1] > 5 * error and np.all(np.diff(err[1:]) >= -1e-12)


def test_rest_tracks_dropped_and_duration_kept():
    rig = chain_rig(3)
    times = np.linspace(0, 2, 21).astype(np.float32)
    still = np.tile(rig.rest[1, 3:7], (21, 1))
    moving = np.stack([np.sin(times), np.zeros(21), np.zeros(21)], axis=1)
    clip = Clip("c", [Track(1, "rotation", "LINEAR", times, still),
                      Track(0, "translation", "LINEAR", times, moving),
                      Track(2, "scale", "STEP", times[:5], np.ones((5, 3)))], markers={"step": 0.5})
    small = compress(clip, rig, error=1e-4)
    assert small.duration == clip.duration
    assert [(t.node, t.path) for t in small.tracks] == [(0, "translation")]
    assert small.markers == {"step": 0.5}
    kept = compress(clip, rig, error=1e-4, drop_rest_tracks=False)
    assert [t.key_count for t in kept.tracks] == [1, kept.tracks[1].key_count, 1]
    check_bound(clip, kept, rig, 1e-4)


def test_weights_tracks_per_channel():
    rig = chain_rig(2)
    times = np.linspace(0, 1, 31).astype(np.float32)
    w = np.stack([times, (times > 0.5).astype(np.float32) * 0.5], axis=1)
    clip = Clip("m", [Track(1, "weights", "LINEAR", times, w)])
    small = compress(clip, rig, error=1e-3, weight_error=1e-3)
    stats = compression_stats(clip, small, rig)
    assert stats.max_weight_error <= 1e-3
    assert small.tracks[0].key_count == 4  # 0, the two corners of the step, 1
    assert stats.ratio > 3


def test_quantised_rotations_round_trip_exactly(tmp_path):
    q = quantize_rotations(np.array([[0.1, 0.2, 0.3, 0.9], [0.0, 0.0, 0.0, 1.0], [-0.5, 0.5, -0.5, 0.5]]))
    codes = short_codes(q)
    assert codes is not None and codes.dtype == np.int16
    assert np.array_equal(codes.astype(np.float32) / np.float32(32767), q)
    assert short_codes(np.array([[0.1, 0.2, 0.3, 0.9]], np.float32)) is None  # not on the grid


def test_bad_arguments():
    asset = demo_asset()
    walk = asset.clip("walk")
    with pytest.raises(skeletal.ClipError, match="positive"):
        compress(walk, asset.rig, error=0)
    with pytest.raises(skeletal.ClipError, match="additive"):
        compress(make_additive(walk), asset.rig)
    with pytest.raises(skeletal.ClipError, match="node 99"):
        compress(Clip("x", [Track(99, "translation", "LINEAR", [0, 1], np.zeros((2, 3)))]), asset.rig)
    assert compress(Clip("empty", []), asset.rig).track_count == 0


# ------------------------------------------------------------------------------------------------
# the demo character: bound, playback, glTF


@pytest.fixture(scope="module")
def demo():
    asset = demo_asset()
    clips, stats = compress_asset(asset, error=1e-3)
    return asset, clips, stats


def test_demo_bound_and_sizes(demo):
    asset, clips, stats = demo
    for original, small, s in zip(asset.clips, clips, stats):
        worst = check_bound(original, small, asset.rig, 1e-3)
        assert s.max_error == pytest.approx(worst, rel=1e-6, abs=1e-12)
        assert s.bytes_after < s.bytes_before
        assert small.name == original.name and small.duration == original.duration


def test_demo_plays_and_blends(demo):
    asset, clips, _ = demo
    player = skeletal.Player(asset)
    reference = skeletal.Player(asset)
    player.play(clips[1])
    reference.play(asset.clip(clips[1].name))
    for _ in range(10):
        player.update(1 / 30)
        reference.update(1 / 30)
    player.crossfade(clips[2], 0.2)
    reference.crossfade(asset.clip(clips[2].name), 0.2)
    for _ in range(5):
        player.update(1 / 30)
        reference.update(1 / 30)
    # a blend of two compressed clips stays close to the blend of the originals (each within 1e-3
    # at its virtual vertices; blending is a convex combination)
    diff = np.abs(player.node_world[:, :3, 3] - reference.node_world[:, :3, 3]).max()
    assert diff < 2e-3


def test_demo_exports_and_reloads(demo, tmp_path):
    asset, clips, _ = demo
    path = tmp_path / "demo-small.glb"
    skeletal.export(asset, path, clips, short_rotations=True)
    back = skeletal.load(path)
    for small in clips:
        loaded = back.clip(small.name)
        assert loaded.track_count == small.track_count
        for a, b in zip(small.tracks, loaded.tracks):
            assert (a.node, a.path, a.interpolation) == (b.node, b.path, b.interpolation)
            assert np.array_equal(a.times, b.times)
            assert np.array_equal(a.values, b.values)  # 16-bit rotations read back exactly
    gltf = json.loads(path.read_bytes()[20:20 + int.from_bytes(path.read_bytes()[12:16], "little")])
    shorts = [a for a in gltf["accessors"] if a.get("normalized") and a["componentType"] == 5122]
    assert shorts, "quantised rotations are written as normalised SHORT"
    full = tmp_path / "demo-full.glb"
    skeletal.export(asset, full)
    assert path.stat().st_size < full.stat().st_size
    plain = json.loads(full.read_bytes()[20:20 + int.from_bytes(full.read_bytes()[12:16], "little")])
    assert not [a for a in plain["accessors"] if a.get("normalized")], "float rotations unless asked (Assimp 5.2)"


def test_compressed_file_passes_khronos_validator(demo, tmp_path):
    from test_demo_writer import ensure_npm_packages, validate, NPM_DIR

    reason = ensure_npm_packages()
    if reason:
        pytest.skip(reason)
    asset, clips, _ = demo
    path = tmp_path / "demo-small.glb"
    skeletal.export(asset, path, clips, short_rotations=True)
    report = validate(path, NPM_DIR / "node_modules")
    problems = [m for m in report["issues"]["messages"] if m["severity"] <= 1]
    assert not problems, problems[:10]


# ------------------------------------------------------------------------------------------------
# shared models


def test_soldier_run_at_acl_bound():
    path = ASSETS / "Soldier.glb"
    if not path.is_file():
        pytest.skip(f"{path} is missing (shared test assets)")
    asset = skeletal.load(path)
    run = asset.clip("Run")
    small = compress(run, asset.rig, error=1e-4)
    check_bound(run, small, asset.rig, 1e-4)
    assert animation_bytes(small) < animation_bytes(run) / 1.5


# ------------------------------------------------------------------------------------------------
# CLI


def test_cli_compress(tmp_path):
    src = tmp_path / "demo.glb"
    skeletal.export(demo_asset(), src)
    out = tmp_path / "small.glb"
    runner = CliRunner()
    result = runner.invoke(cli, ["compress", str(src), "--out", str(out), "--error", "0.001"])
    assert result.exit_code == 0, result.output
    assert "animation data:" in result.output and "max error" in result.output and "file size:" in result.output
    assert out.is_file()
    result = runner.invoke(cli, ["compress", str(src), "--out", str(tmp_path / "w.glb"), "--error", "0.001",
                                 "--clip", "walk", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert [c["name"] for c in report["clips"]] == ["walk"]
    assert report["max_error"] <= 0.001 and report["animation_bytes_after"] < report["animation_bytes_before"]
    assert report["output_file"] < report["uncompressed_file"]
    assert [c.name for c in skeletal.load(tmp_path / "w.glb").clips] == ["walk"]


def test_cli_compress_errors(tmp_path):
    runner = CliRunner()
    src = tmp_path / "demo.glb"
    skeletal.export(demo_asset(), src)
    bad = runner.invoke(cli, ["compress", str(src), "--out", str(tmp_path / "x.npz")])
    assert bad.exit_code == 2 and "must end in .glb" in bad.output
    bad = runner.invoke(cli, ["compress", str(src), "--out", str(tmp_path / "x.glb"), "--error", "-1"])
    assert bad.exit_code == 2 and "positive" in bad.output
    broken = tmp_path / "broken.glb"
    broken.write_bytes(b"glTF\x02\x00\x00\x00garbage")
    bad = runner.invoke(cli, ["compress", str(broken), "--out", str(tmp_path / "x.glb")])
    assert bad.exit_code == 2 and "broken.glb" in bad.output and "Traceback" not in bad.output
