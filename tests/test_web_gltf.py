"""The browser page for the glTF features of issue 29, checked in Chromium as tests/test_web.py
checks joint matrices: KHR_texture_transform and KHR_materials_unlit drawn."""

from __future__ import annotations

import base64
import io
import time
from pathlib import Path

import numpy as np
import pytest

import skeletal

from fixtures.gltf_extensions import appearance_model
from test_web import WAIT_S, browser, open_page, write_page  # noqa: F401  (browser: the module's Chromium)


def _canvas_pixels(driver) -> np.ndarray:
    Image = pytest.importorskip("PIL.Image", reason="Pillow is not installed")
    data_url = driver.execute_script("return window.skeletalViewer.canvas.toDataURL('image/png')")
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(data_url.split(",", 1)[1]))).convert("RGB")).astype(int)


def _wait_for_textures(driver) -> None:
    deadline = time.monotonic() + WAIT_S
    while driver.execute_script("return window.skeletalViewer.pendingTextures()"):
        assert time.monotonic() < deadline, "the page's textures were not decoded in time"
        time.sleep(0.1)


def test_page_draws_texture_transform_and_unlit(browser, tmp_path: Path):  # noqa: F811
    for offset, left, right in (((0.0, 0.0), (255, 0, 0), (0, 0, 255)), ((0.5, 0.0), (0, 0, 255), (255, 0, 0))):
        asset = skeletal.load(appearance_model(tmp_path / f"quad{offset[0]}.glb", fallback=None, offset=offset))
        open_page(browser, write_page(tmp_path, f"quad{offset[0]}", asset))
        looks = browser.execute_script("return window.skeletalViewer.materials()")
        assert len(looks) == 1 and looks[0]["unlit"] is True
        np.testing.assert_allclose(np.reshape(looks[0]["uv"], (3, 3)), asset.document.materials[0].base_color_transform.matrix(),
                                   atol=1e-12)
        np.testing.assert_allclose(looks[0]["emissive"], [0.5, 1.0, 0.0])
        browser.execute_script("const v = window.skeletalViewer; v.show({skeleton: false, grid: false}); "
                               "v.setBackground([1, 0, 1]); v.setTime(0)")
        _wait_for_textures(browser)
        row = _canvas_pixels(browser)[240]
        quad = np.flatnonzero(np.abs(row - np.array([255, 0, 255])).max(axis=1) > 60)  # the quad's pixels
        assert len(quad) > 100
        lo, hi = quad.min(), quad.max()
        for x, want in ((lo + (hi - lo) // 4, left), (lo + 3 * (hi - lo) // 4, right)):
            assert np.abs(row[x] - np.array(want)).max() <= 4, (offset, x, row[x].tolist(), want)


def test_page_shows_the_scene_chosen(browser, tmp_path: Path):  # noqa: F811
    import warnings

    from fixtures.gltf_extensions import two_scenes_model
    from test_web import check_against_bake

    path = two_scenes_model(tmp_path / "two.glb")
    for scene in ("front", "back"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            asset = skeletal.load(path, scene=scene)
        page = write_page(tmp_path, f"scene_{scene}", asset)
        check_against_bake(browser, asset, list(asset.clips), page)
        shown = browser.execute_script("return window.skeletalViewer.shownNodes()")
        assert shown == asset.scene_nodes[asset.rig.index_of].astype(int).tolist(), scene


def test_page_draws_animated_pointer_properties(browser, tmp_path: Path):  # noqa: F811
    """KHR_animation_pointer in the page: material values and node visibility at clip times equal
    skeletal's sampled properties; node TRS by pointer moves the nodes as the bake does."""
    import warnings

    from fixtures.gltf_extensions import pointer_model
    from test_web import check_against_bake

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        asset = skeletal.load(pointer_model(tmp_path / "ptr.glb"))
    page = write_page(tmp_path, "pointer", asset)
    check_against_bake(browser, asset, list(asset.clips), page)
    layout = asset.properties
    for t in (0.0, 0.3, 0.6, 1.0):
        browser.execute_script(f"window.skeletalViewer.setTime({t})")
        looks = {(m["material"], m["node"]): m for m in browser.execute_script("return window.skeletalViewer.materials()")}
        want = skeletal.bake(asset, 0, [t])["properties"][0]
        quad, flag = looks[(0, 0)], looks[(1, 4)]
        np.testing.assert_allclose(quad["color"], layout.value(want, "/materials/0/pbrMetallicRoughness/baseColorFactor"), atol=1e-6)
        strength = layout.value(want, "/materials/0/extensions/KHR_materials_emissive_strength/emissiveStrength")
        np.testing.assert_allclose(quad["emissive"], layout.value(want, "/materials/0/emissiveFactor") * strength, atol=1e-6)
        assert quad["cutoff"] == pytest.approx(float(layout.value(want, "/materials/0/alphaCutoff")[0]), abs=1e-6)
        from skeletal.properties import material_values

        np.testing.assert_allclose(np.reshape(quad["uv"], (3, 3)), material_values(asset, 0, want)["uv"], atol=1e-6)
        assert flag["visible"] == bool(layout.value(want, "/nodes/4/extensions/KHR_node_visibility/visible")[0]), t

