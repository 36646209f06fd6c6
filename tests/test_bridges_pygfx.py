"""skeletal.bridges.pygfx: pygfx skinned meshes driven by skeletal's palettes, drawn headless.

pygfx draws through wgpu; without a GPU, Mesa's Vulkan driver (lavapipe, Debian ``mesa-vulkan-drivers``)
runs it on the CPU. The check: a frame of the built-in character skinned by pygfx's shader from a
Player's palettes covers the same pixels as the same camera's drawing of skeletal's own bake of that
frame (CPU-skinned vertices in a plain pygfx mesh): silhouette IoU >= 0.99 at 256x256 (1.0 measured;
GPU and CPU float32 rounding may move an edge pixel); a different frame of the clip scores well
below that, so the check sees the pose. The drawing runs in a child: wgpu (Vulkan) started in the
test process breaks the OpenGL context the render tests share. Also (in process, no GPU): the bone-matrix buffer holds the palette transposed,
more than 4 influences are cut to the 4 heaviest, a Crowd drives one Character per instance, rigid
and morphed parts follow (RobotExpressive, when the shared assets are there).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import skeletal
from skeletal.bridges.posed import parts

gfx = pytest.importorskip("pygfx", reason='pygfx is not installed (pip install "skeletal[pygfx]")')
from skeletal.bridges.pygfx import Character, crowd_characters, four_influences

from fixtures.shared_assets import need

SIZE = (256, 256)
IOU = 0.99


#: The frame drawn by pygfx and the two references, in a child: wgpu (Vulkan) must not start in the test
#: process, where it breaks the OpenGL context the render tests share. Exit 3: no wgpu adapter.
DRAW = textwrap.dedent("""
    import json, os, sys
    import numpy as np
    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
    import pygfx as gfx
    import wgpu
    import skeletal
    from skeletal.bridges.posed import Poser, clip_state, parts
    from skeletal.bridges.pygfx import Character, offscreen_frame
    from skeletal.render.camera import animated_bounds

    try:
        wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    except Exception as exc:
        print(f"no wgpu adapter ({exc}): apt-get install mesa-vulkan-drivers", file=sys.stderr)
        sys.exit(3)
    size = int(sys.argv[2])
    asset = skeletal.load(skeletal.examples.path("demo.glb"))
    lo, hi = animated_bounds(asset, asset.clip("walk"))
    camera = gfx.PerspectiveCamera(40, 1.0)
    center = (lo + hi) / 2
    camera.local.position = tuple(center + np.array([0.0, 0.0, 2.5 * float(np.linalg.norm(hi - lo))]))
    camera.look_at(tuple(center))

    def mask(group):
        scene = gfx.Scene()
        scene.add(gfx.Background.from_color((0, 0, 0, 1)))
        scene.add(group)
        return offscreen_frame(scene, camera, (size, size))[..., :3].max(axis=2) > 127

    def baked(time):  # skeletal's own posing of that frame, CPU-skinned, in a plain mesh
        group = gfx.Group()
        for part, (positions, _) in zip(parts(asset), Poser(asset).pose(clip_state(asset, "walk", [time]))):
            geometry = gfx.Geometry(positions=positions.copy(), indices=part.triangles)
            group.add(gfx.Mesh(geometry, gfx.MeshBasicMaterial(color=(1, 1, 1, 1), side="both")))
        return group

    player = skeletal.Player(asset)
    player.play("walk")
    player.update(0.4)
    character = Character(asset, unlit=True)
    character.update(player)
    drawn, same, other = mask(character.group), mask(baked(0.4)), mask(baked(0.0))
    iou = lambda a, b: float((a & b).sum() / max((a | b).sum(), 1))
    json.dump({"coverage": float(drawn.mean()), "same": iou(drawn, same), "other": iou(drawn, other)},
              open(sys.argv[1], "w"))
""")


def test_gpu_skinned_frame_matches_skeletal_bake(tmp_path):
    out = tmp_path / "draw.json"
    run = subprocess.run([sys.executable, "-c", DRAW, str(out), str(SIZE[0])], capture_output=True, text=True,
                         timeout=300)
    if run.returncode == 3:
        pytest.skip(run.stderr.strip().splitlines()[-1])
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(out.read_text())
    match, mismatch = result["same"], result["other"]
    print(f"pygfx vs skeletal's bake: IoU {match:.4f} (same frame), {mismatch:.4f} (another frame)")
    assert result["coverage"] > 0.02  # the character is in the picture
    assert match >= IOU, f"IoU {match:.4f}"
    assert mismatch < match - 0.05, f"IoU {mismatch:.4f} for another frame"


def test_bone_buffer_is_the_palette_transposed(demo):
    player = skeletal.Player(demo)
    player.play("run")
    player.update(0.3)
    character = Character(demo)
    character.update(player)
    buffer = character.skeletons[0].bone_matrices_buffer.data["bone_matrices"]
    np.testing.assert_allclose(np.swapaxes(buffer, 1, 2), player.palettes[0], atol=1e-6)


def test_four_influences_keeps_the_heaviest():
    joints = np.array([[0, 1, 2, 3, 4, 5]], np.uint32)
    weights = np.array([[0.05, 0.3, 0.05, 0.2, 0.1, 0.3]], np.float32)
    j, w = four_influences(joints, weights)
    assert sorted(j[0].tolist()) == [1, 3, 4, 5]
    assert w.sum() == pytest.approx(1.0)
    j2, w2 = four_influences(joints[:, :2], weights[:, :2])
    assert j2.shape == (1, 4) and w2[0, 2:].tolist() == [0, 0] and w2.sum() == pytest.approx(1.0)


def test_crowd_drives_one_character_per_instance(demo):
    crowd = skeletal.Crowd(demo, 3)
    crowd.play("walk")
    crowd.update(0.25)
    characters = crowd_characters(demo, 3, offsets=np.array([[0, 0, 0], [1, 0, 0], [2, 0, 0]]))
    for k, c in enumerate(characters):
        c.update(crowd)
        buffer = c.skeletons[0].bone_matrices_buffer.data["bone_matrices"]
        np.testing.assert_allclose(np.swapaxes(buffer, 1, 2)[:, :3], crowd.palettes[k], atol=1e-6)
    assert tuple(characters[2].group.local.position) == (2, 0, 0)


def test_rigid_and_morphed_parts_follow():
    asset = skeletal.load(need("RobotExpressive.glb"))
    player = skeletal.Player(asset)
    player.play(0)
    player.update(0.3)
    player.mixer.morph_weights[0, :] = 0.5  # every morph target half on
    character = Character(asset)
    character.update(player)
    for part, mesh in zip(parts(asset), character.meshes):
        if part.skin is None:
            expect = player.world[part.rig_node, :3]  # pygfx keeps it in float32 (as position, rotation, scale)
            np.testing.assert_allclose(mesh.local.matrix[:3], expect, atol=1e-5 * np.abs(expect).max())
        if part.primitive.morph_positions is not None:
            np.testing.assert_allclose(mesh.morph_target_influences, 0.5)
