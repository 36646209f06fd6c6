"""GPU posing (skeletal.render.gpu_pose): the compute shaders' palettes against the CPU crowd's float32
palettes, on llvmpipe, for every clip of the built-in character and of the shared models, at random
times, crossfades and layers (override with a partial mask, additive). Skipped, saying why, without an
OpenGL 4.3 context."""

from __future__ import annotations

import numpy as np
import pytest

import skeletal
from fixtures.shared_assets import need
from skeletal.tools.cliptools import make_additive

#: the issue's tolerance: a vertex moves at most this fraction of the model's size
TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def gl(ctx):
    from skeletal.render.gpu_pose import compute_support

    why = compute_support(ctx)
    if why is not None:
        pytest.skip(why)
    return ctx


def model_sizes(asset) -> tuple[float, float]:
    """(largest distance of a bind-pose vertex from the origin, diagonal of the rest pose's joints): a
    palette error dL (linear part) and dt (translation) moves a vertex by at most dL * first + dt."""
    lo, hi = asset.bind_bounds
    reach = float(np.abs(np.stack([lo, hi])).max()) * np.sqrt(3.0)
    world = skeletal.world_matrices(asset.rig.parents, asset.rig.rest)[:, :3, 3]
    return max(reach, 1e-9), max(float(np.linalg.norm(world.max(0) - world.min(0))), 1e-9)


def vertex_error(asset, gpu: np.ndarray, cpu: np.ndarray) -> float:
    """The largest vertex displacement the palette difference can cause, over the model's size."""
    reach, size = model_sizes(asset)
    linear = float(np.abs(gpu[..., :3] - cpu[..., :3]).max(initial=0.0))
    shift = float(np.abs(gpu[..., 3] - cpu[..., 3]).max(initial=0.0))
    return (linear * reach + shift) / size


def random_state(asset, count: int, rng, extra_clips: int = 0):
    """Per instance: base clips a != b, blend weight, sample times, layer clip, time and weight. The
    first instances play each clip alone (blend 0, layer weight 0)."""
    clips = len(asset.clips) + extra_clips
    a = rng.integers(0, clips, count)
    b = (a + rng.integers(1, max(clips, 2), count)) % max(clips, 1)
    blend = rng.uniform(0.0, 1.0, count)
    blend[rng.uniform(size=count) < 0.2] = 1.0
    solo = np.arange(count) < 3 * clips
    a[solo] = np.arange(count)[solo] % clips
    blend[solo] = 0.0
    if clips < 2:
        blend[:] = 0.0  # one clip (Fox.glb): nothing to crossfade with (the CPU mixer has one slot per clip)
    layer_weight = rng.uniform(0.0, 1.0, count)
    layer_weight[rng.uniform(size=count) < 0.2] = 1.0
    layer_weight[solo] = 0.0
    return a, b, blend, layer_weight


def pose_both(asset, gl, count, rng, *, additive: bool):
    """A GPU crowd and a CPU crowd in the same random state (see random_state); returns both."""
    from skeletal.render.gpu_pose import GpuCrowd

    extra = make_additive(asset.clips[-1], name="delta") if additive else None
    a, b, blend, layer_weight = random_state(asset, count, rng)
    durations = np.array([c.duration for c in asset.clips])
    ta = rng.uniform(0.0, 1.0, count) * durations[a]
    tb = rng.uniform(0.0, 1.0, count) * durations[b]
    layer_clip = extra if additive else asset.clips[0]
    tl = rng.uniform(0.0, 1.0, count) * layer_clip.duration
    mask = rng.uniform(-0.3, 1.3, len(asset.rig))
    gpu = GpuCrowd(asset, count, ctx=gl)
    cpu = skeletal.Crowd(asset, count)
    gpu.add_layer("top", mask=mask, additive=additive)
    cpu.add_layer("top", mask=mask, additive=additive)
    for c in range(len(asset.clips)):
        weight = np.where(a == c, 1.0 - blend, 0.0) + np.where(b == c, blend, 0.0)
        cpu.play(c, weights=weight, offsets=np.where(a == c, ta, tb))
    gpu.set_blend(a, ta, b, tb, blend)
    cpu.play(layer_clip, layer=1, offsets=tl)
    gpu.play(layer_clip, layer=1, offsets=tl)
    cpu.set_layer_weight(1, layer_weight)
    gpu.set_layer_weight(1, layer_weight)
    cpu.evaluate()
    gpu.evaluate()
    return gpu, cpu


@pytest.mark.parametrize("additive", [False, True], ids=["override", "additive"])
@pytest.mark.parametrize("model", ["demo", "Soldier.glb", "Fox.glb", "RobotExpressive.glb"])
def test_gpu_palettes_match_cpu(gl, demo, model, additive):
    asset = demo if model == "demo" else skeletal.load(str(need(model)))
    gpu, cpu = pose_both(asset, gl, 384, np.random.default_rng(7), additive=additive)
    try:
        error = vertex_error(asset, gpu.palettes, cpu.palettes)
        assert error < TOLERANCE, f"{model}: GPU palettes differ from the CPU's by {error:.2e} of the model's size"
        # the whole renderer layout: skins, then rigid slots (world matrices of the mesh nodes)
        assert gpu.read_palettes().shape == (384, gpu.joint_count, 3, 4)
    finally:
        gpu.release()


def test_every_clip_alone_matches_cpu(gl, demo):
    """Each clip of the demo played alone (the single-action path of the CPU crowd, nlerp and slerp
    tracks as it chooses) at many times, after advancing on the GPU with per-instance speeds."""
    from skeletal.render.gpu_pose import GpuCrowd

    count = 64 * len(demo.clips)
    rng = np.random.default_rng(3)
    offsets = rng.uniform(0.0, 1.0, count)
    speeds = rng.uniform(0.5, 1.5, count)
    gpu = GpuCrowd(demo, count, ctx=gl)
    cpu = skeletal.Crowd(demo, count)
    try:
        for c in range(len(demo.clips)):
            sel = slice(c * 64, (c + 1) * 64)
            gpu.play(c, offsets=offsets[sel], speeds=speeds[sel], instances=sel)
            cpu.play(c, offsets=offsets[sel], speeds=speeds[sel], instances=sel)
        for _ in range(5):
            gpu.update(0.07)
            cpu.update(0.07)
        clocks = gpu.read_clocks()[:, 0]
        durations = np.repeat([clip.duration for clip in demo.clips], 64)
        expected = np.mod(offsets + 0.35 * speeds, durations)
        assert np.abs(clocks - expected).max() < 1e-7  # two-float clocks: float64-like times
        assert vertex_error(demo, gpu.palettes, cpu.palettes) < TOLERANCE
    finally:
        gpu.release()


def test_crossfade_advances_on_the_gpu(gl, demo):
    """crossfade() moves the weight on the GPU; the CPU's copy of it agrees, with no readback."""
    from skeletal.render.gpu_pose import S_BLEND, S_CLIP0, S_CLIP1, GpuCrowd

    gpu = GpuCrowd(demo, 100, ctx=gl)
    try:
        gpu.play("walk")
        gpu.update(0.1)
        gpu.crossfade("run", 0.5, instances=slice(0, 50))
        gpu.update(0.2)
        state = gpu.read_state()
        assert np.allclose(state[:50, S_BLEND], 0.4, atol=1e-6) and np.all(state[50:, S_BLEND] == 0.0)
        assert np.allclose(gpu.blend_weights()[:50], 0.4) and np.all(state[:50, S_CLIP1] == demo.clips.index(demo.clip("run")))
        gpu.update(0.4)
        assert np.all(gpu.read_state()[:50, S_BLEND] == 1.0)
        gpu.crossfade("idle", 0.0, instances=slice(0, 50))  # from the run (slot 1) to idle in slot 0, at once
        gpu.update(0.0)
        state = gpu.read_state()
        assert np.all(state[:50, S_BLEND] == 0.0) and np.all(state[:50, S_CLIP0] == demo.clips.index(demo.clip("idle")))
    finally:
        gpu.release()


def test_nothing_uploaded_per_frame(gl, demo):
    """After the game's last change, an update uploads nothing: no edits are queued."""
    from skeletal.render.gpu_pose import GpuCrowd

    gpu = GpuCrowd(demo, 32, ctx=gl)
    try:
        gpu.play("walk", offsets=np.linspace(0, 1, 32))
        gpu.update(1 / 60)
        assert gpu.pending_edits == 0
        before = gpu.read_palettes()
        gpu.update(1 / 60)
        assert gpu.pending_edits == 0 and not np.array_equal(before, gpu.read_palettes())
        gpu.set_speeds(2.0, instances=[3, 4])
        assert gpu.pending_edits == 4  # two instances, two base slots
    finally:
        gpu.release()


def test_unsupported_is_one_line_and_bad_input(gl, demo):
    from skeletal.render.gpu_pose import UNSUPPORTED, GpuCrowd

    assert "\n" not in UNSUPPORTED and "IK" in UNSUPPORTED and "events" in UNSUPPORTED
    gpu = GpuCrowd(demo, 4, ctx=gl)
    try:
        with pytest.raises(skeletal.SkeletalError, match="loop mode"):
            gpu.play("walk", loop="sideways")
        with pytest.raises(skeletal.SkeletalError, match="layer 1 does not exist"):
            gpu.play("walk", layer=1)
        gpu.add_layer("top", mask="Spine" if "Spine" in demo.rig.names else None)
        with pytest.raises(skeletal.SkeletalError, match="one layer"):
            gpu.add_layer("second")
        with pytest.raises(skeletal.SkeletalError):
            gpu.play("no such clip")
    finally:
        gpu.release()
    with pytest.raises(skeletal.SkeletalError, match="count must be at least 1"):
        GpuCrowd(demo, 0, ctx=gl)
    with pytest.raises(skeletal.SkeletalError, match="work groups"):  # refused before any allocation
        GpuCrowd(demo, 10**10, ctx=gl)


def odd_interpolations(asset, rng) -> skeletal.Clip:
    """The demo's walk with its tracks turned STEP (every third), CUBICSPLINE with random tangents
    (every third) or kept LINEAR: the interpolations the shipped models do not use."""
    tracks = []
    for i, track in enumerate(asset.clip("walk").tracks):
        values = track.values.reshape(len(track.times), -1)
        if i % 3 == 0:
            tracks.append(skeletal.Track(track.node, track.path, "STEP", track.times, values))
        elif i % 3 == 1:
            tangents = rng.normal(0.0, 0.3, (2,) + values.shape).astype(np.float32)
            triples = np.stack([tangents[0], values, tangents[1]], axis=1).reshape(-1, values.shape[1])
            tracks.append(skeletal.Track(track.node, track.path, "CUBICSPLINE", track.times, triples))
        else:
            tracks.append(track)
    return skeletal.Clip("odd", tracks)


def test_step_cubicspline_and_pingpong_match_cpu(gl, demo):
    from skeletal.render.gpu_pose import GpuCrowd

    rng = np.random.default_rng(11)
    clip = odd_interpolations(demo, rng)
    count = 256
    offsets = rng.uniform(0.0, 2.0 * clip.duration, count)
    gpu = GpuCrowd(demo, count, ctx=gl)
    cpu = skeletal.Crowd(demo, count)
    try:
        gpu.play(clip, offsets=offsets, loop="pingpong")
        cpu.play(clip, offsets=offsets, loop="pingpong")
        for dt in (0.0, 0.13, 0.41):
            gpu.update(dt)
            cpu.update(dt)
            assert vertex_error(demo, gpu.palettes, cpu.palettes) < TOLERANCE
    finally:
        gpu.release()


def test_renderer_draws_a_gpu_crowd_like_the_cpu_poses(gl, demo):
    """The renderer's crowd path: a GpuCrowd drawn from its own buffer gives the image of the same
    poses computed on the CPU and uploaded (no ground: the GPU path's shadows sit at the rest pose)."""
    from skeletal.render.gpu_pose import GpuCrowd
    from skeletal.render.layout import grid_offsets, pose_at
    from skeletal.render.renderer import Renderer

    count = 9
    phases = np.linspace(0.0, 0.9, count)
    gpu = GpuCrowd(demo, count, ctx=gl)
    renderer = Renderer(demo, 160, 120, instances=count, ground=False, samples=0, ctx=gl)
    try:
        if renderer.store.mode != "ssbo":
            pytest.skip(f"the renderer chose the {renderer.store.mode} palette path, not ssbo")
        offsets = grid_offsets(count, 1.2)
        renderer.set_bounds(*renderer.bounds, offsets)
        gpu.play("walk", offsets=phases)
        gpu.update(0.25)
        image = renderer.draw(gpu, offsets)
        world, morph = pose_at(demo, demo.clip("walk"), phases + 0.25)
        reference = renderer.draw((world, morph), offsets)
        differ = np.abs(image.astype(int) - reference.astype(int)).max(axis=2) > 8
        assert image.std() > 5 and differ.mean() < 0.002, f"{differ.mean():.4f} of the pixels differ"
        with pytest.raises(skeletal.SkeletalError, match="placements"):
            renderer.draw(gpu, offsets[:4])
    finally:
        renderer.release()
        gpu.release()


def test_render_command_gpu_pose(gl, tmp_path):
    """``skeletal render --crowd N --gpu-pose`` draws the crowd from GPU palettes; what it cannot do is a
    one-line error."""
    from click.testing import CliRunner

    from skeletal.cli.render import render

    out = tmp_path / "crowd.gif"
    result = CliRunner().invoke(render, ["--crowd", "6", "--gpu-pose", "--out", str(out), "--size", "96x64",
                                       "--seconds", "0.1", "-v"])
    assert result.exit_code == 0, result.output
    assert out.stat().st_size > 0 and "GpuCrowd: 6 instances" in result.output
    result = CliRunner().invoke(render, ["--crowd", "6", "--gpu-pose", "--skeleton", "--out", str(out)])
    message = str(result.exception)  # the command group prints it as one line on stderr
    assert isinstance(result.exception, skeletal.SkeletalError) and "--gpu-pose" in message and "\n" not in message


def test_bench_rows(gl, monkeypatch):
    """skeletal bench's GPU rows (small counts here): posing, and whole frames posed on the GPU, from a
    baked texture and on the CPU, each row with its same-run baseline."""
    from skeletal.bench import gpu as bench_gpu

    monkeypatch.setattr(bench_gpu, "POSE_COUNTS", (64,))
    monkeypatch.setattr(bench_gpu, "FRAME_COUNTS", (32,))
    result = bench_gpu.bench_rows(quick=True)
    names = [row["name"] for row in result["rows"]]
    assert len(names) == 3 and "GPU posing" in names[0] and "Texture crowd" in names[2]
    for row in result["rows"]:
        assert row["stat"]["median"] > 0 and row["ratio"].endswith("x") and row["baseline"]
    assert result["frame_32"]["triangles"] > 0 and result["device"]
    # the reference column says what the rows measure: llvmpipe's cost, or the named GPU's speed
    llvmpipe = "llvmpipe" in gl.info["GL_RENDERER"].lower()
    assert all(row["reference"] == result["reference"] for row in result["rows"])
    assert result["reference"] == ("llvmpipe: cost, not GPU speed" if llvmpipe else f"{gl.info['GL_RENDERER']}: GPU speed")
