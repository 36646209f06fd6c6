"""GPU renderer (skeletal.render) on headless OpenGL: Mesa llvmpipe through EGL, no GPU needed.

GL tests skip with the reason when no context can be made (moderngl missing, no EGL libraries) or
when the shaders were not installed as package data. Sizes are tiny to keep the file fast.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from skeletal.asset import Asset
from skeletal.document import Animation, Channel, Document, Material, Mesh, MorphTarget, Node, Primitive, Skin
from skeletal.errors import SkeletalError
from skeletal.render.camera import CameraSpec, frame, parse_camera
from skeletal.render.errors import RenderError
from fixtures.shared_assets import ASSETS as _SHARED_ASSETS

ASSETS = str(_SHARED_ASSETS)


# -- a small skinned test asset built in code --------------------------------------------------


def _quat_z(degrees):
    a = np.radians(degrees) / 2.0
    return np.array([0.0, 0.0, np.sin(a), np.cos(a)])


def tube_asset(n_joints=3, influences=4, with_morph=False, with_rigid=False, segment=1.0, radius=0.25):
    """A vertical tube (y = 0..n_joints*segment) skinned to a chain of joints, each joint's weights
    falling off with distance along y (``influences`` nearest joints kept). Clip "bend": joints 1..
    rotate about z, 0 at t=0, most at t=0.5, back at t=1. Optional: one morph target (bulge in x)
    and a rigid box hanging on the last joint."""
    nodes = [Node(name=f"joint{j}", children=[j + 1] if j + 1 < n_joints else [],
                  translation=np.array([0.0, 0.0 if j == 0 else segment, 0.0]), parent=j - 1)
             for j in range(n_joints)]
    mesh_node = len(nodes)
    nodes.append(Node(name="tube", mesh=0, skin=0, translation=np.array([5.0, 0.0, 0.0])))  # ignored: skinned
    rings, sides = n_joints * 4 + 1, 12
    ys = np.linspace(0.0, segment * n_joints, rings)
    angles = np.linspace(0.0, 2 * np.pi, sides, endpoint=False)
    positions = np.array([[radius * np.cos(a), y, radius * np.sin(a)] for y in ys for a in angles], np.float32)
    normals = np.array([[np.cos(a), 0.0, np.sin(a)] for _ in ys for a in angles], np.float32)
    indices = []
    for r in range(rings - 1):
        for s in range(sides):
            a, b = r * sides + s, r * sides + (s + 1) % sides
            indices += [a, a + sides, b, b, a + sides, b + sides]
    joint_y = (np.arange(n_joints) + 0.5) * segment
    dist = np.abs(positions[:, 1:2] - joint_y[None])
    order = np.argsort(dist, axis=1, kind="stable")[:, :influences]
    weights = np.exp(-(np.take_along_axis(dist, order, 1) / (0.8 * segment)) ** 2) + 0.02
    weights /= weights.sum(axis=1, keepdims=True)
    targets = []
    if with_morph:
        bulge = np.zeros_like(positions)
        bulge[:, 0] = 0.3 * np.cos(angles)[None].repeat(rings, 0).reshape(-1)
        targets = [MorphTarget(position=bulge)]
    prim = Primitive(positions=positions, normals=normals, indices=np.array(indices, np.uint32),
                     joints=order.astype(np.uint32), weights=weights.astype(np.float32), targets=targets,
                     material=0)
    inverse_bind = np.repeat(np.eye(4)[None], n_joints, axis=0)
    inverse_bind[:, 1, 3] = -segment * np.arange(n_joints)
    meshes = [Mesh("tube", [prim], weights=np.zeros(1) if with_morph else None)]
    if with_rigid:
        box = np.array([[x, y, z] for x in (-0.2, 0.2) for y in (0.0, 0.4) for z in (-0.2, 0.2)], np.float32)
        box_indices = np.array([0, 1, 3, 0, 3, 2, 4, 6, 7, 4, 7, 5, 0, 4, 5, 0, 5, 1,
                                2, 3, 7, 2, 7, 6, 0, 2, 6, 0, 6, 4, 1, 5, 7, 1, 7, 3], np.uint32)
        meshes.append(Mesh("box", [Primitive(positions=box, indices=box_indices, material=1)]))
        nodes.append(Node(name="box", mesh=1, translation=np.array([0.0, segment, 0.0]), parent=n_joints - 1))
        nodes[n_joints - 1].children.append(len(nodes) - 1)
    times = np.array([0.0, 0.5, 1.0], np.float32)
    channels = [Channel(j, "rotation", "LINEAR", times,
                        np.array([_quat_z(0), _quat_z(45 if j % 2 else -35), _quat_z(0)], np.float32))
                for j in range(1, n_joints)]
    if with_morph:
        channels.append(Channel(mesh_node, "weights", "LINEAR", times, np.array([[0.0], [1.0], [0.0]], np.float32)))
    doc = Document(path="tube.gltf", nodes=nodes, meshes=meshes, skins=[Skin("chain", np.arange(n_joints), inverse_bind)],
                   animations=[Animation("bend", channels)], scenes=[[0, mesh_node]], scene=0,
                   materials=[Material("red", np.array([0.8, 0.25, 0.15, 1.0])), Material("grey")])
    return Asset(doc)


# -- GL availability ---------------------------------------------------------------------------


def _palette4(palette34):
    """(J, 3, 4) -> (J, 4, 4) with the implied bottom row."""
    out = np.zeros(palette34.shape[:-2] + (4, 4), np.float64)
    out[..., :3, :] = palette34
    out[..., 3, 3] = 1.0
    return out


# -- context, command import, camera spec (no GL needed) ---------------------------------------


def test_render_command_import_does_not_import_moderngl():
    code = "import sys; from skeletal.cli.render import render; import skeletal.render; print('moderngl' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_no_context_error_says_what_to_install(monkeypatch):
    moderngl = pytest.importorskip("moderngl", reason="moderngl is not installed")
    from skeletal.render import context

    def fail(*args, **kwargs):
        raise Exception("eglGetDisplay failed\nsecond line")

    monkeypatch.setattr(moderngl, "create_context", fail)
    with pytest.raises(RenderError) as info:
        context.create_context()
    message = str(info.value)
    assert isinstance(info.value, SkeletalError)
    assert "\n" not in message
    assert "apt-get install libegl1 libegl-mesa0 libgl1-mesa-dri" in message and "pip install moderngl" in message


def test_a_new_context_asks_for_opengl_4_3_before_3_3(monkeypatch):
    """NVIDIA's EGL gives exactly the version asked for (3.3 on an H200 when 3.3 was asked), which turned
    off GPU posing and the SSBO palettes there: 4.3 is asked for first, 3.3 only where 4.3 is refused."""
    moderngl = pytest.importorskip("moderngl", reason="moderngl is not installed")
    from types import SimpleNamespace

    from skeletal.render import context

    asked = []

    def exact(standalone, require, **options):  # a driver that gives exactly what is asked for
        asked.append((options.get("backend", "default"), require))
        return SimpleNamespace(version_code=require, extra=None)

    monkeypatch.setattr(moderngl, "create_context", exact)
    ctx = context.create_context()
    assert asked == [("egl", 430)] and ctx.version_code == 430 and ctx.extra == {"backend": "egl"}

    def no_4_3(standalone, require, **options):  # macOS-like: 4.1 at most
        asked.append((options.get("backend", "default"), require))
        if require > 410:
            raise Exception("requested version not available")
        return SimpleNamespace(version_code=require, extra=None)

    asked.clear()
    monkeypatch.setattr(moderngl, "create_context", no_4_3)
    assert context.create_context().version_code == 330
    assert asked == [("egl", 430), ("egl", 330)]


def test_camera_spec_parser():
    spec = parse_camera("yaw=30,pitch=15,distance=3")
    assert (spec.yaw, spec.pitch, spec.distance) == (30.0, 15.0, 3.0)
    spec = parse_camera(" fov = 50 , zoom=2, target=0:1:0 ")
    assert spec.fov == 50 and spec.zoom == 2 and spec.target == (0.0, 1.0, 0.0)
    assert parse_camera(None) == CameraSpec() == parse_camera("auto")
    for bad in ("yaw", "spin=3", "yaw=abc", "distance=-1", "target=1:2", "fov=0"):
        with pytest.raises(RenderError):
            parse_camera(bad)


def test_framing_puts_the_box_inside_the_image():
    lo, hi = np.array([-0.3, 0.0, -0.2]), np.array([0.3, 1.8, 0.2])
    for yaw, aspect in ((0, 1.5), (30, 1.5), (90, 0.5), (200, 1.0)):
        camera = frame(CameraSpec(yaw=yaw), lo, hi, aspect)
        corners = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])])
        ndc = camera.project(corners)
        assert np.all(np.abs(ndc[:, :2]) <= 0.81) and np.abs(ndc[:, :2]).max() > 0.7  # fills, with margin


def test_fit_influences_keeps_the_heaviest():
    from skeletal.render.geometry import fit_influences

    joints = np.array([[0, 1, 2, 3, 4, 5]], np.int32)
    weights = np.array([[0.05, 0.3, 0.05, 0.2, 0.1, 0.3]], np.float32)
    j, w = fit_influences(joints, weights, 4)
    assert set(j[0].tolist()) == {1, 3, 4, 5} and np.isclose(w.sum(), 1.0)
    j, w = fit_influences(joints[:, :2], weights[:, :2], 4)
    assert j.shape == (1, 4) and w[0, 2:].tolist() == [0.0, 0.0]


# -- palette paths: GPU skinning == CPU skinning -------------------------------------------------


PATHS = ["uniform", "ubo", "ssbo", "texture", "texture-2d"]


@pytest.mark.parametrize("influences", [4, 8])
@pytest.mark.parametrize("path", PATHS)
def test_gpu_skinning_matches_cpu_for_every_palette_path(ctx, path, influences):
    """Transform feedback of the shader's skinning vs skeletal.skin.skin with the same palette."""
    from skeletal.render.feedback import SkinningProbe
    from skeletal.render.layout import PaletteLayout, pose_at
    from skeletal.render.palette import create_store, mode_capacity
    from skeletal.skinning.lbs import skin

    mode = path.split("-")[0]
    if ctx.version_code < 430 and mode == "ssbo":
        pytest.skip("SSBOs need OpenGL 4.3")
    asset = tube_asset(n_joints=10 if influences == 8 else 5, influences=influences, segment=0.3)
    layout = PaletteLayout(asset)
    clip = asset.clip("bend")
    world, _ = pose_at(asset, clip, [0.5, 0.2, 0.0])  # three instances, three poses
    palette = layout.palettes(world)  # (3, J, 3, 4) float32
    offsets = np.array([[0, 0, 0], [2, 0, 0], [-1, 0.5, 3]], np.float32)
    store = create_store(ctx, mode, palette.shape[0] * palette.shape[1], texture_2d=(path == "texture-2d"))
    assert mode_capacity(ctx, mode)[0] >= store.capacity
    probe = SkinningProbe(ctx, store, influences)
    try:
        prim = asset.mesh_instances[0].primitives[0]
        assert prim.joints.shape[1] == influences
        src = prim.source
        gpu_p, gpu_n = probe.run(palette, prim.joints, prim.weights, src.positions, src.normals, offsets)
    finally:
        probe.release()
        store.release()
    size = float(np.linalg.norm(src.positions.max(0) - src.positions.min(0)))
    for i in range(len(world)):
        cpu_p, cpu_n, _ = skin(_palette4(palette[i]), prim.joints, prim.weights, src.positions, src.normals)
        assert np.abs(gpu_p[i] - (cpu_p + offsets[i])).max() <= 1e-5 * size
        assert np.abs(gpu_n[i] - cpu_n).max() <= 1e-5
    assert np.abs(gpu_p[0] - gpu_p[1]).max() > 0.1  # the instances really read different palettes


def test_best_available_prefers_ssbo_and_respects_limits(ctx):
    from skeletal.render.palette import best_available, check_mode, mode_capacity

    choice = best_available(ctx, 100)
    assert choice.mode == ("ssbo" if ctx.version_code >= 430 else "texture")
    assert choice.mode in choice.explain()
    ubo_cap, _ = mode_capacity(ctx, "ubo")
    uniform_cap, _ = mode_capacity(ctx, "uniform")
    assert 0 < uniform_cap <= ubo_cap * 1.5
    with pytest.raises(RenderError, match="ubo holds at most"):
        check_mode(ctx, "ubo", ubo_cap + 1)


class _FakeContext:
    """Just the limits best_available reads (no GL): an OpenGL 3.3 driver with small limits."""

    def __init__(self, **info):
        self.version_code = 330
        self.info = info
        self.extra = {"buffer_texture_ok": False}


def test_best_available_falls_back_along_the_preference_order():
    from skeletal.render.palette import best_available

    small = _FakeContext(GL_MAX_TEXTURE_SIZE=16, GL_MAX_UNIFORM_BLOCK_SIZE=16384, GL_MAX_VERTEX_UNIFORM_COMPONENTS=4096)
    assert best_available(small, 50).mode == "texture"  # no SSBO on GL 3.3; 16x16 texels hold 85 matrices
    choice = best_available(small, 100)
    assert choice.mode == "ubo"  # 16384 / 48 = 341 matrices
    assert "needs OpenGL 4.3" in choice.explain() and "texture skipped" in choice.explain()
    tiny = _FakeContext(GL_MAX_TEXTURE_SIZE=16, GL_MAX_UNIFORM_BLOCK_SIZE=1024, GL_MAX_VERTEX_UNIFORM_COMPONENTS=4096)
    assert best_available(tiny, 200).mode == "uniform"  # (4096 - 512) / 12 = 298 matrices
    with pytest.raises(RenderError, match="no palette upload path holds 400 matrices"):
        best_available(tiny, 400)


def test_layout_puts_skins_then_rigid_nodes(ctx):
    from skeletal.render.layout import PaletteLayout, pose_at

    asset = tube_asset(with_rigid=True)
    layout = PaletteLayout(asset)
    assert layout.joint_count == 4  # 3 skin joints + 1 rigid slot
    world, _ = pose_at(asset, asset.clip(0), [0.5])
    palette = layout.palettes(world)
    box_rig = asset.rig.index_of[4]
    np.testing.assert_allclose(palette[0, 3], world[0, box_rig, :3, :], atol=1e-6)


# -- drawing -----------------------------------------------------------------------------------


def _foreground(image, background, threshold=12):
    return np.abs(image.astype(int) - background.astype(int)).max(axis=2) > threshold


def _collapsed(world):
    """World matrices that squash every mesh to a point: what the background looks like."""
    return np.zeros_like(world)


def test_figure_is_in_frame_and_shaded_the_same_by_every_palette_path(ctx):
    from skeletal.render.layout import pose_at
    from skeletal.render.renderer import Renderer

    asset = tube_asset(with_rigid=True)
    clip = asset.clip(0)
    world, morph = pose_at(asset, clip, [0.5])
    images = {}
    for mode in ("uniform", "ubo", "ssbo", "texture"):
        with Renderer(asset, 96, 64, palette_mode=mode, clip=clip, ground=False) as r:
            assert r.store.mode == mode and mode in r.describe()
            images[mode] = r.draw((world, morph))
            if mode == "uniform":
                background = r.draw((_collapsed(world), morph))
    for mode, other in images.items():
        assert np.abs(other.astype(int) - images["uniform"].astype(int)).max() <= 2, mode
    image = images["uniform"]
    assert image.shape == (64, 96, 3) and image.dtype == np.uint8
    mask = _foreground(image, background)
    ys, xs = np.nonzero(mask)
    assert len(ys) > 200
    assert ys.min() > 0 and xs.min() > 0 and ys.max() < 63 and xs.max() < 95  # not touching the borders
    assert ys.max() - ys.min() > 0.6 * 64  # and filling most of the height
    red = image[mask]
    assert np.median(red[:, 0]) > np.median(red[:, 2]) + 40  # the red material
    assert red[:, 0].max() - red[:, 0].min() > 40  # lit: not one flat colour


def test_two_instances_with_different_poses_in_one_draw(ctx):
    from skeletal.render.layout import pose_at
    from skeletal.render.renderer import Renderer

    asset = tube_asset()
    clip = asset.clip(0)
    offsets = np.array([[-1.2, 0, 0], [1.2, 0, 0]], np.float32)
    bent, _ = pose_at(asset, clip, [0.5])
    straight, _ = pose_at(asset, clip, [0.0])
    with Renderer(asset, 96, 64, camera="yaw=0,pitch=5", ground=False) as r:
        r.frame(clip, offsets=offsets)
        both = r.draw(np.concatenate([bent, straight]), offsets)
        all_bent = r.draw(np.concatenate([bent, bent]), offsets)
        all_straight = r.draw(np.concatenate([straight, straight]), offsets)
    half = 48
    diff = lambda a, b: np.abs(a.astype(int) - b.astype(int)).mean()
    assert diff(both[:, :half], all_bent[:, :half]) < 0.5  # instance 0 stands left, bent
    assert diff(both[:, half:], all_straight[:, half:]) < 0.5  # instance 1 stands right, straight
    assert diff(both[:, :half], all_straight[:, :half]) > 2.0
    assert diff(both[:, half:], all_bent[:, half:]) > 2.0


def test_morph_targets_change_the_image_per_instance(ctx):
    from skeletal.render.layout import pose_at
    from skeletal.render.renderer import Renderer

    asset = tube_asset(with_morph=True)
    assert asset.mesh_instances[0].primitives[0].morph_positions is not None
    offsets = np.array([[-1.0, 0, 0], [1.0, 0, 0]], np.float32)
    world, _ = pose_at(asset, None, [0.0])
    with Renderer(asset, 96, 64, camera="yaw=0", ground=False) as r:
        r.frame(None, offsets=offsets)
        flat = r.draw((world, np.array([0.0])), offsets)
        mixed = r.draw((np.concatenate([world, world]), np.array([[0.0], [1.0]])), offsets)
    diff = np.abs(flat.astype(int) - mixed.astype(int)).max(axis=2) > 12
    assert not diff[:, :44].any()  # the left instance keeps weight 0
    assert diff[:, 52:].sum() > 20  # the right one bulges


def test_skeleton_overlay_is_drawn_on_top(ctx):
    from skeletal.render.layout import pose_at
    from skeletal.render.renderer import SKELETON_COLOR, Renderer

    asset = tube_asset()
    with Renderer(asset, 96, 64, clip=asset.clip(0)) as r:
        world, morph = pose_at(asset, asset.clip(0), [0.5])
        plain = r.draw((world, morph))
        overlay = r.draw((world, morph), skeleton=True)
    changed = _foreground(overlay, plain)
    target = np.array(SKELETON_COLOR[:3]) * 255
    close = np.abs(overlay.astype(int) - target).max(axis=2) < 40
    assert (changed & close).sum() >= 15  # yellow pixels over the (red) tube


def test_weight_heat_map_colours(ctx):
    from skeletal.render.layout import pose_at
    from skeletal.render.renderer import Renderer

    asset = tube_asset()
    with Renderer(asset, 96, 64, clip=asset.clip(0)) as r:
        world, morph = pose_at(asset, asset.clip(0), [0.0])
        heat = r.draw((world, morph), weights_joint="joint2")
        with pytest.raises(RenderError, match="no joint named"):
            r.draw((world, morph), weights_joint="nope")
    pixels = heat.reshape(-1, 3).astype(int)
    red = (pixels[:, 0] > 150) & (pixels[:, 1] < 140) & (pixels[:, 2] < 90)  # red to orange
    blue = (pixels[:, 2] > 150) & (pixels[:, 0] < 80) & (pixels[:, 1] < 90)
    assert red.sum() > 10 and blue.sum() > 10
    # joint2 is the top of the tube: red pixels sit above blue ones (image rows grow downwards)
    rows = np.arange(len(pixels)) // 96
    assert rows[red].mean() < rows[blue].mean()


def test_render_draws_without_readback_and_read_gives_the_frame(ctx):
    from skeletal import Player
    from skeletal.render.layout import pose_at
    from skeletal.render.renderer import Renderer

    asset = tube_asset(with_rigid=True)
    clip = asset.clip(0)
    world, morph = pose_at(asset, clip, [0.5])
    with Renderer(asset, 96, 64, clip=clip) as r:
        image = r.draw((world, morph))
        timings = r.render((world, morph), finish=True)
        assert set(timings) == {"palette", "upload", "draw"} and all(v >= 0.0 for v in timings.values())
        assert np.array_equal(r.read(), image)
        assert r.framebuffer.size == (96, 64) and r.framebuffer.samples == r.samples
        # A Player's own palettes (one per skin; the rigid box still from its world matrix): same frame.
        player = Player(asset)
        player.play(clip).seek(0.5)
        player.update(0.0)
        r.render(player, palettes=player.palettes)
        assert np.abs(r.read().astype(int) - image.astype(int)).max() <= 1
        # The whole palette in slot order, (J, 3, 4) or (1, J, 4, 4).
        whole = r.layout.palettes(world)
        assert np.array_equal(r.draw((world, morph), palettes=whole[0]), image)
        assert np.array_equal(r.draw((world, morph), palettes=_palette4(whole)), image)
        # Wrong palettes, a viewport outside the framebuffer: one-line errors.
        with pytest.raises(RenderError, match="skin palettes"):
            r.render((world, morph), palettes=[])
        with pytest.raises(RenderError, match="palettes of shape"):
            r.render((world, morph), palettes=whole[:, :2])
        with pytest.raises(RenderError, match="viewport"):
            r.render((world, morph), viewport=(50, 0, 50, 64))
        # A viewport: the right half drawn (for its own aspect), the left half cleared to black.
        r.camera = frame(r.camera_spec, *r.bounds, 48 / 64, facing=r.facing)
        r.render((world, morph), viewport=(48, 0, 48, 64))
        split = r.read()
        assert split[:, :48].max() == 0 and split[:, 48:].mean() > 30
        assert np.array_equal(r.read((48, 0, 48, 64)), split[:, 48:])
        right = r.draw((world, morph), viewport=(48, 0, 48, 64))
        assert right.shape == (64, 48, 3) and np.array_equal(right, split[:, 48:])


def test_resize_makes_new_framebuffers_and_frames_again(ctx):
    from skeletal.render.layout import pose_at
    from skeletal.render.renderer import Renderer

    asset = tube_asset()
    clip = asset.clip(0)
    world, morph = pose_at(asset, clip, [0.5])
    with Renderer(asset, 96, 64, clip=clip, ground=False) as r:
        background = r.draw((_collapsed(world), morph))
        r.resize(96, 64)  # the same size: nothing to do
        r.resize(48, 80)
        assert (r.width, r.height) == (48, 80) and r.framebuffer.size == (48, 80)
        assert r.camera.aspect == pytest.approx(48 / 80)
        tall = r.draw((world, morph))
        assert tall.shape == (80, 48, 3)
        ys, xs = np.nonzero(_foreground(tall, r.draw((_collapsed(world), morph))))
        assert len(ys) > 100 and ys.min() > 0 and xs.min() > 0 and ys.max() < 79 and xs.max() < 47  # in frame
        with pytest.raises(RenderError, match="out of range"):
            r.resize(0, 10)
        r.resize(96, 64)
        assert np.array_equal(r.draw((_collapsed(world), morph)), background)


def test_adopt_context_keeps_or_sets_the_backend(ctx):
    from skeletal.render.context import adopt_context

    backend = ctx.extra["backend"]
    assert adopt_context(ctx) is ctx and ctx.extra["backend"] == backend
    assert adopt_context(ctx, backend) is ctx and ctx.extra["backend"] == backend


# -- the command, end to end ---------------------------------------------------------------------


@pytest.fixture
def default_model(monkeypatch):
    """The built-in demo character when it exists, else the tube (so the test runs either way)."""
    try:
        import skeletal.demo  # noqa: F401 - only to learn whether the demo module is there
    except ImportError:
        from skeletal.render import output

        real = output.load_model
        monkeypatch.setattr(output, "load_model", lambda m: tube_asset() if m is None else real(m))


def _invoke(args):
    from click.testing import CliRunner

    from skeletal.cli.render import render

    return CliRunner().invoke(render, args, catch_exceptions=True)


def _read_mp4(path):
    import imageio.v2 as iio2

    reader = iio2.get_reader(path, format="FFMPEG")
    try:
        return [frame for frame in reader]
    finally:
        reader.close()


def test_render_command_writes_png_gif_mp4_and_sequences(ctx, imageio, tmp_path, default_model):
    png, gif, mp4 = tmp_path / "a.png", tmp_path / "a.gif", tmp_path / "a.mp4"
    for out in (png, gif, mp4):
        result = _invoke(["--out", str(out), "--size", "96x64", "--fps", "30", "--seconds", "0.1"])
        assert result.exit_code == 0, result.output + repr(result.exception)
        assert out.is_file() and "wrote" in result.output
    assert imageio.imread(png).shape == (64, 96, 3)
    assert imageio.imread(gif, index=None).shape[:3] == (3, 64, 96)
    frames = _read_mp4(str(mp4))
    assert len(frames) == 3 and frames[0].shape == (64, 96, 3)
    seq = tmp_path / "seq.png"
    result = _invoke(["--out", str(seq), "--size", "96x64", "--seconds", "0.1", "--frames", "--skeleton"])
    assert result.exit_code == 0, result.output + repr(result.exception)
    assert sorted(p.name for p in tmp_path.glob("seq_*.png")) == ["seq_0001.png", "seq_0002.png", "seq_0003.png"]


def test_render_command_crowd_and_options(ctx, imageio, tmp_path, default_model):
    out = tmp_path / "crowd.png"
    result = _invoke(["--out", str(out), "--size", "96x64", "--crowd", "4", "--palette", "ubo", "--verbose",
                      "--camera", "yaw=20,pitch=20", "--weights", "0"])
    assert result.exit_code == 0, result.output + repr(result.exception)
    assert "palette mode ubo" in result.output and "OpenGL" in result.output
    assert imageio.imread(out).shape == (64, 96, 3)


@pytest.mark.parametrize("args, message", [
    (["--size", "big"], "WIDTHxHEIGHT"),
    (["--camera", "spin=1"], "camera spec"),
    (["--out", "x.bmp"], "must end in"),
    (["--clip", "nope"], "no clip named"),
    (["--crowd", "0"], "at least 1"),
    (["--weights", "nope"], "no joint named"),
    (["no/such/model.glb"], "no such file"),
])
def test_render_command_errors_are_one_line_skeletal_errors(ctx, tmp_path, default_model, args, message):
    if "--out" not in args:
        args = args + ["--out", str(tmp_path / "x.png")]
    result = _invoke(args + ["--size", "96x64"] if "--size" not in args else args)
    assert result.exit_code != 0
    assert isinstance(result.exception, SkeletalError), repr(result.exception)
    assert message in str(result.exception) and "\n" not in str(result.exception)


# -- real models from ../shared/assets -----------------------------------------------------------


def _asset_path(name):
    path = os.path.normpath(os.path.join(ASSETS, name))
    if not os.path.isfile(path):
        pytest.skip(f"{path} not found (the shared test assets are not checked out; set SKELETAL_ASSETS)")
    return path


def _load(path):
    import skeletal
    from skeletal.errors import UnsupportedExtensionError

    try:
        return skeletal.load(path)
    except UnsupportedExtensionError as exc:
        pytest.skip(f"decoder not installed: {exc}")


def test_soldier_walk_to_gif(ctx, imageio, tmp_path):
    out = tmp_path / "walk.gif"
    result = _invoke([_asset_path("Soldier.glb"), "--clip", "Walk", "--out", str(out), "--size", "96x64",
                      "--seconds", "0.1"])
    assert result.exit_code == 0, result.output + repr(result.exception)
    frames = imageio.imread(out, index=None)
    assert frames.shape[:3] == (3, 64, 96)
    assert np.abs(frames[0].astype(int) - frames[2].astype(int)).max() > 30  # he walks


@pytest.mark.parametrize("name", ["Fox.glb", "RobotExpressive.glb", "Mannequin.glb", "SimpleSkin.gltf",
                                  "Soldier-quantized.glb", "Fox-draco.glb", "RobotExpressive-meshopt.glb"])
def test_real_model_png_with_the_figure_in_frame(ctx, imageio, tmp_path, name):
    from skeletal.render.layout import pose_at
    from skeletal.render.renderer import Renderer

    path = _asset_path(name)
    asset = _load(path)
    out = tmp_path / "model.png"
    result = _invoke([path, "--out", str(out), "--size", "96x64"])
    assert result.exit_code == 0, result.output + repr(result.exception)
    assert imageio.imread(out).shape == (64, 96, 3)
    clip = asset.clips[0] if asset.clips else None
    with Renderer(asset, 96, 64, clip=clip, ground=False) as r:
        world, morph = pose_at(asset, clip, [0.0])
        image = r.draw((world, morph))
        background = r.draw((_collapsed(world), morph))
    ys, xs = np.nonzero(_foreground(image, background))
    assert len(ys) > 100, "nothing drawn"
    assert ys.min() > 0 and xs.min() > 0 and ys.max() < 63 and xs.max() < 95, "the figure touches the border"
    assert max(ys.max() - ys.min(), (xs.max() - xs.min()) * 64 / 96) > 0.45 * 64, "the figure is tiny"
