"""skeletal.bridges.panda3d: panda3d GeomNodes whose vertices skeletal skins, drawn in an offscreen buffer.

* The vertex arrays panda3d holds after ``update(player)`` equal skeletal's bake of that frame to 1e-5
  of the model's size (float32 skinning), for each part; the model's materials become panda3d
  Materials (base colour, roughness, metallic). Run in a child: panda3d is never loaded in the test
  process (with panda3d and wgpu both loaded, the render tests' shared context stops making buffers).
* One frame drawn by panda3d offscreen (EGL; Mesa's llvmpipe without a GPU), unlit white on black,
  through a lens matched to skeletal's own camera, covers the same pixels as skeletal's own renderer
  (``skeletal.render.Renderer``, the character's pixels: those that differ from a frame with the
  character moved out of view): silhouette IoU >= 0.99 at 256x256 (1.0 measured: both
  rasterise the same triangles; the margin is for other drivers' edge rules). A different frame of the clip scores well below, so the check sees the pose.
  panda3d runs in a child process: its GL context would replace the one the other render tests share,
  and it allows one ShowBase per process.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

if importlib.util.find_spec("panda3d") is None:
    pytest.skip('panda3d is not installed (pip install "skeletal[panda3d]")', allow_module_level=True)

SIZE = 256
IOU = 0.99
TOL = 1e-5  # of the model's size

#: The in-process checks, run in a child: panda3d must not be loaded in the test process (with it and
#: wgpu both loaded there, the shared OpenGL context of the render tests fails to make buffers).
ARRAYS = textwrap.dedent("""
    import json, sys
    import numpy as np
    import skeletal
    from skeletal.bridges.panda3d import PandaCharacter
    from skeletal.bridges.posed import parts

    asset = skeletal.load(skeletal.examples.path("demo.glb"))
    player = skeletal.Player(asset)
    player.play("run")
    player.update(0.3)
    character = PandaCharacter(asset)
    character.update(player)
    baked = skeletal.bake(asset, "run", [0.3])
    expect = [baked[f"positions_node{p.node}_prim{p.primitive_index}"][0] for p in parts(asset)]
    size = float(np.linalg.norm(np.ptp(np.concatenate(expect), axis=0)))
    errors = [float(np.abs(g - e).max()) / size for g, e in zip(character.positions(), expect)]
    materials = []
    for part, path in zip(parts(asset), character.nodes):
        m = asset.document.materials[part.material]
        got = path.getMaterial()
        materials.append({"expect": list(map(float, m.base_color_factor)), "roughness": float(m.roughness_factor),
                          "got": None if got is None else list(got.getBaseColor()),
                          "got_roughness": None if got is None else got.getRoughness()})
    json.dump({"errors": errors, "parts": len(expect), "materials": materials}, open(sys.argv[1], "w"))
""")


def _child(code: str, *args: str) -> None:
    run = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]


def test_vertex_arrays_hold_skeletal_bake_and_materials_carry_over(tmp_path):
    out = tmp_path / "arrays.json"
    _child(ARRAYS, str(out))
    result = json.loads(out.read_text())
    assert result["parts"] > 0 and len(result["errors"]) == result["parts"]
    assert max(result["errors"]) < TOL, result["errors"]
    for m in result["materials"]:
        assert m["got"] is not None
        np.testing.assert_allclose(m["got"], m["expect"], atol=1e-6)
        assert m["got_roughness"] == pytest.approx(m["roughness"])


CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    import skeletal
    from skeletal.bridges.panda3d import PandaCharacter, match_camera, offscreen_base, screenshot
    from skeletal.render.camera import Camera

    spec = json.loads(sys.argv[1])
    asset = skeletal.load(skeletal.examples.path("demo.glb"))
    base = offscreen_base(spec["size"], spec["size"])
    base.setBackgroundColor(0, 0, 0, 1)
    character = PandaCharacter(asset, unlit=True)
    character.root.reparentTo(base.render)
    cam = spec["camera"]
    match_camera(base, Camera(np.array(cam["eye"]), np.array(cam["target"]), cam["fov"], cam["aspect"],
                              cam["near"], cam["far"], np.array(cam["up"])))
    for time, out in zip(spec["times"], spec["outs"]):
        player = skeletal.Player(asset)
        player.play("walk")
        player.update(time)
        character.update(player)
        np.save(out, screenshot(base).max(axis=2) > 127)
""")


def _iou(a, b) -> float:
    return float((a & b).sum() / max((a | b).sum(), 1))


def test_offscreen_frame_matches_skeletal_renderer(demo, ctx, tmp_path):
    from skeletal.render.renderer import Renderer

    renderer = Renderer(demo, SIZE, SIZE, ground=False, samples=0, clip=demo.clip("walk"))
    import skeletal

    player = skeletal.Player(demo)
    player.play("walk")
    player.update(0.4)
    drawn = renderer.draw(player).astype(np.int16)
    empty = renderer.draw(player, instances=np.array([[1e5, 0.0, 0.0]])).astype(np.int16)
    reference = np.abs(drawn - empty).max(axis=2) > 8
    renderer.release()
    cam = renderer.camera
    spec = {"size": SIZE, "times": [0.4, 0.0], "outs": [str(tmp_path / "same.npy"), str(tmp_path / "other.npy")],
            "camera": {"eye": cam.eye.tolist(), "target": cam.target.tolist(), "up": cam.up.tolist(),
                       "fov": cam.fov, "aspect": cam.aspect, "near": cam.near, "far": cam.far}}
    run = subprocess.run([sys.executable, "-c", CHILD, json.dumps(spec)], capture_output=True, text=True, timeout=300)
    if run.returncode != 0 and "display" in run.stderr.lower() and "could not" in run.stderr.lower():
        pytest.skip(f"panda3d could not open an offscreen buffer: {run.stderr.strip().splitlines()[-1]}")
    assert run.returncode == 0, run.stderr[-2000:]
    same, other = np.load(tmp_path / "same.npy"), np.load(tmp_path / "other.npy")
    assert reference.mean() > 0.02  # the character is in the picture
    match, mismatch = _iou(same, reference), _iou(other, reference)
    print(f"panda3d vs skeletal's renderer: IoU {match:.4f} (same frame), {mismatch:.4f} (another frame)")
    assert match >= IOU, f"IoU {match:.4f}"
    assert mismatch < match - 0.05, f"IoU {mismatch:.4f} for another frame"
