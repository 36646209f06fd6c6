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
        from skeletal.anim.properties import material_values

        np.testing.assert_allclose(np.reshape(quad["uv"], (3, 3)), material_values(asset, 0, want)["uv"], atol=1e-6)
        assert flag["visible"] == bool(layout.value(want, "/nodes/4/extensions/KHR_node_visibility/visible")[0]), t


# -- morph targets in the page and the widget ------------------------------------------------------


def _morph_asset(tmp_path):
    from fixtures.gltf_extensions import morph_model

    return skeletal.load(morph_model(tmp_path / "morph.glb"))


def _skeletal_morph(asset, clip, t):
    """{glTF node: weights} from skeletal's sampling at clip time t."""
    from skeletal.anim.sampling import sample

    _, morph = sample(clip, [t], asset.rig.rest, asset.morph_start, asset.rest_morph)
    out = {}
    for node in range(len(asset.document.nodes)):
        r = asset.rig.index_of[node]
        if asset.morph_start[r + 1] > asset.morph_start[r]:
            out[node] = morph[0, asset.morph_start[r]:asset.morph_start[r + 1]]
    return out


def test_page_morph_weights_and_positions_match_skeletal(browser, tmp_path: Path):  # noqa: F811
    """Morph weights (LINEAR, CUBICSPLINE, the mesh's defaults before any clip) and the morphed
    positions in Chromium equal skeletal's sampling and apply_morphs; the joints match the bake."""
    from skeletal.skinning.lbs import apply_morphs
    from test_web import check_against_bake

    asset = _morph_asset(tmp_path)
    page = write_page(tmp_path, "morph", asset)
    check_against_bake(browser, asset, list(asset.clips), page)
    instance = next(m for m in asset.mesh_instances if m.node == 0)
    source = instance.primitives[0]
    for k, clip in enumerate(asset.clips):
        for t in (0.0, 0.2, 0.5, 0.8, 1.0, 1.7):
            browser.execute_script(f"const v = window.skeletalViewer; v.setClip({k}); v.setTime({t})")
            got = {m["node"]: m["weights"] for m in browser.execute_script("return window.skeletalViewer.morphWeights()")}
            want = _skeletal_morph(asset, clip, t)
            assert sorted(got) == sorted(want) == [0, 2]
            for node in want:
                np.testing.assert_allclose(got[node], want[node], atol=1e-6, err_msg=f"{clip.name} t={t} node {node}")
            positions = np.empty((source.source.vertex_count, 3))
            apply_morphs(source.source.positions, source.morph_positions, want[0], positions)
            page_positions = np.reshape(browser.execute_script("return window.skeletalViewer.primitivePositions(0)"), (-1, 3))
            np.testing.assert_allclose(page_positions, positions, atol=1e-6)


def test_page_morph_screenshot_matches_headless_render(browser, tmp_path: Path):  # noqa: F811
    pytest.importorskip("moderngl", reason="the headless renderer needs moderngl")
    from test_web import compare_screenshot, open_page

    asset = _morph_asset(tmp_path)
    open_page(browser, write_page(tmp_path, "morph_shot", asset, clip="linear"))
    iou = compare_screenshot(browser, asset, 0, 0.5)
    assert iou > 0.95, f"page and headless render cover different pixels: IoU {iou:.3f}"


def test_widget_streams_morph_weights_and_properties(browser, tmp_path: Path):  # noqa: F811
    pytest.importorskip("anywidget", reason="anywidget is not installed (pip install 'skeletal[notebook]')")
    import warnings

    from fixtures.gltf_extensions import pointer_model
    from test_web import _widget_harness

    asset = _morph_asset(tmp_path)
    player = skeletal.Player(asset)
    player.play("cubic")
    player.update(0.3)
    widget = skeletal.show(player, still=False)
    weights = np.frombuffer(widget.morph, np.float32)
    want = _skeletal_morph(asset, asset.clip("cubic"), 0.3)
    np.testing.assert_allclose(weights, np.concatenate([want[0], want[2]]), atol=1e-6)
    open_page(browser, _widget_harness(tmp_path, widget))
    got = {m["node"]: m["weights"] for m in browser.execute_script("return window.skeletalViewer.morphWeights()")}
    np.testing.assert_allclose(got[0], want[0], atol=1e-6)
    np.testing.assert_allclose(got[2], want[2], atol=1e-6)
    # a Player of a model with animated properties streams them too; the page draws them
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pointers = skeletal.load(pointer_model(tmp_path / "ptr.glb"))
    player = skeletal.Player(pointers)
    player.play("pointers")
    player.update(0.6)
    widget = skeletal.show(player, still=False)
    color = "/materials/0/pbrMetallicRoughness/baseColorFactor"
    np.testing.assert_allclose(widget.properties[color], pointers.properties.value(player.property_values, color))
    open_page(browser, _widget_harness(tmp_path, widget))
    looks = browser.execute_script("return window.skeletalViewer.materials()")
    quad = next(m for m in looks if m["material"] == 0)
    np.testing.assert_allclose(quad["color"], widget.properties[color], atol=1e-6)
    flag = next(m for m in looks if m["node"] == 4)
    assert flag["visible"] is False  # hidden from t = 0.5 to 1 (STEP)
