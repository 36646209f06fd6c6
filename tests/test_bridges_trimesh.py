"""skeletal.bridges.trimesh: posed meshes and scenes as trimesh objects.

* Every posed vertex equals skeletal's own bake (``skeletal.bake``, float64) to 1e-5 of the model's size
  (the bridge skins in float32 with :func:`skeletal.skin_into`), for the built-in character at three
  times of a clip, for a whole clip, and for a live Player's frame; rigid parts follow their node.
* Materials: the glTF base colour factor, metallic/roughness and (for textured shared models) the
  texture with its UVs flipped to trimesh's origin.
* A scene written by trimesh as GLB loads in skeletal with the same posed vertices.
"""

from __future__ import annotations

import numpy as np
import pytest

import skeletal
from skeletal.bridges.posed import parts

trimesh = pytest.importorskip("trimesh", reason='trimesh is not installed (pip install "skeletal[trimesh]")')
import skeletal.bridges.trimesh as st

from fixtures.shared_assets import need

TOL = 1e-5  # of the model's size


def _size(points: np.ndarray) -> float:
    return float(np.linalg.norm(points.max(axis=0) - points.min(axis=0)))


def _baked(asset, clip, times):
    """bake's positions for every part, (T, V, 3), in the bridge's part order."""
    out = skeletal.bake(asset, clip, times)
    return [out[f"positions_node{p.node}_prim{p.primitive_index}"] for p in parts(asset)]


@pytest.mark.parametrize("time", [0.0, 0.37, 0.9])
def test_posed_meshes_match_bake(demo, time):
    meshes = st.posed_meshes(demo, "walk", time)
    baked = _baked(demo, "walk", [time])
    assert len(meshes) == len(baked) > 0
    size = _size(np.concatenate([b[0] for b in baked]))
    for mesh, ref in zip(meshes, baked):
        assert isinstance(mesh, trimesh.Trimesh)
        assert np.abs(mesh.vertices - ref[0]).max() < TOL * size
        assert mesh.faces.max() < len(mesh.vertices) and len(mesh.faces) > 0


def test_posed_mesh_concatenates_and_scene_names_parts(demo):
    one = st.posed_mesh(demo, "run", 0.2)
    meshes = st.posed_meshes(demo, "run", 0.2)
    assert len(one.vertices) == sum(len(m.vertices) for m in meshes)
    assert len(one.faces) == sum(len(m.faces) for m in meshes)
    scene = st.posed_scene(demo, "run", 0.2)
    assert isinstance(scene, trimesh.Scene)
    assert sorted(scene.geometry) == sorted(p.name for p in parts(demo))
    np.testing.assert_allclose(scene.bounds, one.bounds, atol=1e-9)


def test_clip_meshes_is_the_whole_clip(demo):
    clip = demo.clip("wave")
    meshes = st.clip_meshes(demo, "wave", fps=10)
    times = skeletal.sample_times(clip, 10)
    assert len(meshes) == len(times)
    baked = _baked(demo, "wave", times)
    size = _size(np.concatenate([b[0] for b in baked]))
    for f in (0, len(times) // 2, len(times) - 1):
        expect = np.concatenate([b[f] for b in baked])
        assert np.abs(meshes[f].vertices - expect).max() < TOL * size


def test_scene_from_a_player_frame(demo):
    player = skeletal.Player(demo)
    player.play("walk")
    player.update(0.4)
    scene = st.scene_from(demo, player)
    ref = _baked(demo, "walk", [0.4])
    size = _size(np.concatenate([b[0] for b in ref]))
    for part, r in zip(parts(demo), ref):
        assert np.abs(scene.geometry[part.name].vertices - r[0]).max() < TOL * size


def test_materials_carry_over(demo):
    for part, mesh in zip(parts(demo), st.posed_meshes(demo, None)):
        m = demo.document.materials[part.material]
        mat = mesh.visual.material
        np.testing.assert_array_equal(mat.baseColorFactor, np.round(np.asarray(m.base_color_factor) * 255))
        assert mat.roughnessFactor == pytest.approx(m.roughness_factor)
        assert mat.metallicFactor == pytest.approx(m.metallic_factor)


def test_textured_model_keeps_its_texture_and_uvs():
    asset = skeletal.load(need("Soldier.glb"))
    meshes = st.posed_meshes(asset, "Walk", 0.5)
    textured = [m for m in meshes if getattr(m.visual.material, "baseColorTexture", None) is not None]
    assert textured, "Soldier's body is textured"
    for part, mesh in zip(parts(asset), meshes):
        uv = part.primitive.source.attributes.get("TEXCOORD_0")
        if mesh in textured and uv is not None:
            np.testing.assert_allclose(mesh.visual.uv[:, 1], 1.0 - uv[:, 1], atol=1e-6)


def test_rigid_part_follows_its_node():
    asset = skeletal.load(need("RobotExpressive.glb"))
    rigid = [p for p in parts(asset) if p.skin is None]
    if not rigid:
        pytest.skip("RobotExpressive has no rigid parts in this version of the file")
    from skeletal.bridges.posed import clip_state

    state = clip_state(asset, 0, [0.3])
    meshes = dict(zip([p.name for p in parts(asset)], st.posed_meshes(asset, 0, 0.3)))
    for p in rigid:
        m = state.world[0, p.rig_node]
        expect = p.positions @ m[:3, :3].T + m[:3, 3]
        assert np.abs(meshes[p.name].vertices - expect).max() < TOL * _size(expect) + 1e-9


def test_exported_scene_loads_back_in_skeletal(demo, tmp_path):
    scene = st.posed_scene(demo, "walk", 0.5)
    out = tmp_path / "posed.glb"
    scene.export(out)
    back = skeletal.load(out)
    got = np.concatenate([p.positions for p in parts(back)])
    expect = np.concatenate([m.vertices for m in scene.geometry.values()])
    assert got.shape == expect.shape
    # trimesh writes float32 positions, in its own geometry order: compare the sorted point sets
    np.testing.assert_allclose(np.sort(got, axis=0), np.sort(expect, axis=0), atol=TOL * _size(expect))


def test_missing_trimesh_is_one_line(demo, monkeypatch):
    import builtins

    from skeletal.bridges import BridgeError

    real = builtins.__import__

    def no_trimesh(name, *a, **k):
        if name == "trimesh" or name.startswith("trimesh."):
            raise ImportError("No module named 'trimesh'")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_trimesh)
    import importlib

    monkeypatch.setattr(importlib, "import_module", lambda n, *a: no_trimesh(n))
    with pytest.raises(BridgeError, match=r'pip install "skeletal\[trimesh\]"'):
        st.posed_meshes(demo, None)
