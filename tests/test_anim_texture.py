"""Baked animation textures (skeletal.render.anim_texture): the bake against live posing, the files
(.npy, .bin, 16-bit .png) round-tripping within the error the command prints, the command, and the
shader drawing a crowd from the texture like the CPU-posed crowd (llvmpipe; skipped without GL)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from skeletal.errors import SkeletalError
from skeletal.render.anim_texture import (AnimTexture, PaletteLayout, bake_texture, frame_times, load_texture,
                                          save_texture, sidecar, slot_boxes, texture_error, vertex_displacement)
from skeletal.render.layout import pose_at


@pytest.fixture(scope="module")
def baked(demo):
    return bake_texture(demo, fps=30)


def test_layout_and_frames(demo, baked):
    layout = PaletteLayout(demo)
    assert baked.texels.shape == (sum(c["frames"] for c in baked.clips), 3 * layout.joint_count, 4)
    walk = baked.clips[baked.clip_index("walk")]
    assert walk["frames"] >= walk["duration"] * 30 + 1
    times = frame_times(walk["duration"], walk["frames"])
    assert times[0] == 0.0 and times[-1] == pytest.approx(walk["duration"])
    world, _ = pose_at(demo, demo.clip("walk"), times, loop="clamp")
    rows = baked.texels[walk["first_row"]:walk["first_row"] + walk["frames"]]
    assert np.array_equal(rows, layout.palettes(world).reshape(len(times), -1, 4))  # frames hold live palettes
    # between frames the texture's palettes are the lerp of the two neighbours (the shader's formula)
    mid = (times[3] + times[4]) / 2
    assert np.allclose(baked.palettes("walk", [mid])[0].reshape(-1, 4), (rows[3] + rows[4]) / 2, atol=1e-6)


@pytest.mark.parametrize("suffix", [".npy", ".bin", ".png"])
def test_files_round_trip_within_the_printed_error(demo, baked, tmp_path, suffix):
    path = tmp_path / f"anim{suffix}"
    save_texture(baked, path)
    loaded = load_texture(path)
    error = texture_error(demo, loaded)
    save_texture(baked, path, error)
    meta = json.loads(sidecar(path).read_text())
    assert meta["error"] == error and meta["clips"] == baked.clips and meta["width"] == baked.texels.shape[1]
    if suffix != ".png":
        assert np.array_equal(loaded.texels, baked.texels) and error["at_frames"]["max"] < 1e-9
    else:  # 16 bits per channel over each channel's range
        assert 0.0 < error["at_frames"]["relative"] < 1e-4
    # at random times the loaded texture stays within the printed error (between frames)
    layout = PaletteLayout(demo)
    boxes = slot_boxes(demo, layout)
    rng = np.random.default_rng(5)
    for i, entry in enumerate(loaded.clips):
        times = rng.uniform(0.0, entry["duration"], 40)
        world, _ = pose_at(demo, demo.clip(entry["name"]), times, loop="clamp")
        moved = vertex_displacement(loaded.palettes(i, times), layout.palettes(world), boxes)
        assert moved.max() <= 1.5 * error["between_frames"]["max"] + error["at_frames"]["max"]


def test_error_shrinks_with_the_rate(demo, baked):
    coarse = texture_error(demo, bake_texture(demo, ["walk"], fps=10))["between_frames"]["max"]
    fine = texture_error(demo, bake_texture(demo, ["walk"], fps=60))["between_frames"]["max"]
    assert 0.0 < fine < coarse / 3


def test_bad_input(demo, tmp_path):
    with pytest.raises(SkeletalError, match="fps must be positive"):
        bake_texture(demo, fps=0)
    with pytest.raises(SkeletalError, match="over 16384 on a side"):  # refused before posing anything
        bake_texture(demo, fps=1e12)
    with pytest.raises(SkeletalError, match=r"\.npy or \.bin"):
        save_texture(AnimTexture(np.zeros((1, 3, 4), np.float32), 30.0), tmp_path / "x.exr")
    with pytest.raises(SkeletalError, match="cannot read"):
        load_texture(tmp_path / "missing.png")
    (tmp_path / "bad.png").write_bytes(b"not a png")
    save_texture(AnimTexture(np.zeros((1, 3, 4), np.float32), 30.0), tmp_path / "ok.png")
    sidecar(tmp_path / "bad.png").write_text(sidecar(tmp_path / "ok.png").read_text())
    with pytest.raises(SkeletalError, match="bad.png"):
        load_texture(tmp_path / "bad.png")


def test_bake_texture_command(tmp_path):
    from click.testing import CliRunner

    from skeletal.cli.bake_texture import bake_texture_command
    from skeletal.examples import path as example

    out = tmp_path / "demo_anim.png"
    result = CliRunner().invoke(bake_texture_command, [example("demo.glb"), "--out", str(out), "--fps", "24",
                                                       "--clip", "walk", "--clip", "run"])
    assert result.exit_code == 0, result.output
    assert "between frames" in result.output and "at baked frames" in result.output
    meta = json.loads(sidecar(out).read_text())
    assert [c["name"] for c in meta["clips"]] == ["walk", "run"] and meta["encoding"]["type"] == "unorm16"
    assert f"{meta['error']['between_frames']['max']:.3g} model units" in result.output


def test_texture_crowd_draws_like_cpu_posing(ctx, demo):
    """The shader's palettes (anim_texture.glsl) against the CPU posing of the same clocks: a texture
    baked at 240 fps drawn at a time between frames gives the CPU-posed image (no ground)."""
    from skeletal.render.anim_texture_draw import TextureCrowdRenderer
    from skeletal.render.layout import grid_offsets
    from skeletal.render.renderer import Renderer

    texture = bake_texture(demo, ["walk", "run"], fps=240)
    count = 8
    clips = np.arange(count) % 2
    clocks = np.linspace(0.0, 0.6, count)
    speeds = np.linspace(0.8, 1.2, count)
    offsets = grid_offsets(count, 1.2)
    drawer = TextureCrowdRenderer(demo, texture, 160, 120, ground=False, samples=0, ctx=ctx)
    reference = Renderer(demo, 160, 120, instances=count, ground=False, samples=0, ctx=ctx)
    try:
        for r in (drawer, reference):
            r.set_bounds(*r.bounds, offsets)
        drawer.set_instances(clips, clocks, speeds, offsets)
        now = 0.731
        image = drawer.draw_at(now)
        worlds = []
        for i in range(count):
            clip = demo.clip(texture.clips[clips[i]]["name"])
            worlds.append(pose_at(demo, clip, [clocks[i] + speeds[i] * now], loop="repeat")[0][0])
        expected = reference.draw((np.stack(worlds), None), offsets)
        differ = np.abs(image.astype(int) - expected.astype(int)).max(axis=2) > 8
        assert image.std() > 5 and differ.mean() < 0.003, f"{differ.mean():.4f} of the pixels differ"
    finally:
        drawer.release()
        reference.release()
