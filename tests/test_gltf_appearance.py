"""Appearance extensions (issue 29): KHR_texture_transform and KHR_materials_unlit in
``extensionsRequired`` are read and drawn; other appearance-only extensions are read with one warning
and a stated fallback instead of refusing the file; ``export`` writes the extensions back; the
headless renderer shows the transformed texture unlit."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import skeletal
from skeletal.document import TextureTransform, uv_matrix
from skeletal.errors import UnsupportedExtensionError
from skeletal.io.gltf import read_gltf

from fixtures.gltf_builder import GltfBuilder
from fixtures.gltf_extensions import appearance_model, quad_mesh


def _load_quietly(path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asset = skeletal.load(path)
    return asset, [str(w.message) for w in caught]


def test_required_texture_transform_and_unlit_are_read(tmp_path):
    asset, told = _load_quietly(appearance_model(tmp_path / "quad.glb", fallback=None))
    assert told == []  # supported: nothing to warn about
    material = asset.document.materials[0]
    assert material.unlit and material.fallbacks == []
    t = material.base_color_transform
    assert t is not None and t.offset.tolist() == [0.5, 0.0] and t.scale.tolist() == [1.0, 1.0] and t.rotation == 0.0
    assert material.emissive_factor.tolist() == [0.25, 0.5, 0.0] and material.emissive_strength == 2.0
    assert asset.clip("slide").track_count == 1 and asset.clip("slide").duration == 1.0


def test_an_appearance_extension_skeletal_does_not_draw_is_a_warning_not_a_refusal(tmp_path):
    asset, told = _load_quietly(appearance_model(tmp_path / "coat.glb", fallback="KHR_materials_clearcoat"))
    assert len(told) == 1, told  # one line, naming the extension and what is drawn instead
    assert "KHR_materials_clearcoat: no clearcoat layer" in told[0] and "coat.glb" in told[0] and "\n" not in told[0]
    assert asset.document.materials[0].fallbacks == ["KHR_materials_clearcoat"]
    assert asset.clip("slide").track_count == 1  # the animation is read whole


def test_a_required_extension_that_changes_more_than_appearance_is_still_refused(tmp_path):
    path = appearance_model(tmp_path / "inst.glb", fallback="EXT_mesh_gpu_instancing")
    with pytest.raises(UnsupportedExtensionError, match="inst.glb: extensionsRequired: required extension "
                                                         "EXT_mesh_gpu_instancing is not supported"):
        read_gltf(path)


def test_texture_transform_matrix_is_translation_rotation_scale():
    m = uv_matrix([0.25, 0.5], np.pi / 2, [2.0, 3.0])
    # the extension's definition: T(offset) R(rotation) S(scale), R = [[c, s], [-s, c]]
    t = np.array([[1, 0, 0.25], [0, 1, 0.5], [0, 0, 1]])
    r = np.array([[0, 1, 0], [-1, 0, 0], [0, 0, 1]])
    s = np.diag([2.0, 3.0, 1.0])
    assert np.allclose(m, t @ r @ s)
    assert TextureTransform().is_identity and not TextureTransform(rotation=0.1).is_identity


def test_export_writes_the_appearance_extensions_back(tmp_path):
    asset, _ = _load_quietly(appearance_model(tmp_path / "quad.glb", fallback="KHR_materials_sheen"))
    out = tmp_path / "again.gltf"
    skeletal.export(asset, out)
    import json

    gltf = json.loads(out.read_text())
    assert gltf["extensionsRequired"] == ["KHR_texture_transform"]
    assert set(gltf["extensionsUsed"]) == {"KHR_texture_transform", "KHR_materials_unlit", "KHR_materials_emissive_strength"}
    again = read_gltf(out).materials[0]
    first = asset.document.materials[0]
    assert again.unlit and again.emissive_strength == 2.0
    assert again.base_color_transform.offset.tolist() == first.base_color_transform.offset.tolist()
    assert again.emissive_factor.tolist() == first.emissive_factor.tolist()


def test_alpha_mode_is_read_and_checked(tmp_path):
    b = GltfBuilder()
    b.add_scene([b.add_node("q", mesh=quad_mesh(b, b.add_material({"alphaMode": "MASK", "alphaCutoff": 0.3})))])
    material = read_gltf(b.write_glb(tmp_path / "mask.glb")).materials[0]
    assert (material.alpha_mode, material.alpha_cutoff) == ("MASK", 0.3)
    b.doc["materials"][0]["alphaMode"] = "CUTOUT"
    with pytest.raises(skeletal.ModelError, match=r"materials\[0\].alphaMode: unknown alphaMode 'CUTOUT'"):
        read_gltf(b.write_glb(tmp_path / "bad.glb"))


def _front_render(asset, width=64, height=48):
    from skeletal.render.layout import pose_at
    from skeletal.render.renderer import Renderer

    with Renderer(asset, width, height, camera="yaw=0,pitch=0", ground=False) as r:
        world, morph = pose_at(asset, None, [0.0])
        return r.draw((world, morph))


def test_renderer_draws_the_transformed_texture_unlit(ctx, tmp_path):
    """The quad's texture is red on its left half and blue on its right; shifted by 0.5 in u the left
    of the quad shows blue and the right red, in the texels' own colours (unlit: no shading)."""
    plain, _ = _load_quietly(appearance_model(tmp_path / "plain.glb", fallback=None, offset=(0.0, 0.0)))
    shifted, _ = _load_quietly(appearance_model(tmp_path / "shifted.glb", fallback=None, offset=(0.5, 0.0)))
    for asset, left, right in ((plain, (255, 0, 0), (0, 0, 255)), (shifted, (0, 0, 255), (255, 0, 0))):
        image = _front_render(asset).astype(int)
        row = image[image.shape[0] // 2]
        for x, want in ((image.shape[1] // 2 - 6, left), (image.shape[1] // 2 + 6, right)):
            assert np.abs(row[x] - np.array(want)).max() <= 3, (asset.name, x, row[x].tolist(), want)
