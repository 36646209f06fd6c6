"""Clips that travel stay in the picture (issue 28): ``render``, ``html`` and the widget frame the whole
path seen from its side (a walk towards the camera started small and ended large), or, with
``--camera follow`` / ``follow=True`` / the page's checkbox, move the camera with the character's root."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import skeletal
from skeletal.anim.clip import Clip, Track
from skeletal.demo import demo_asset
from skeletal.render.camera import (animated_bounds, facing_yaw, follow_bounds, follow_shift, frame, motion_node,
                                    parse_camera, path_facing, root_path)


@pytest.fixture(scope="module")
def traveller():
    """The built-in character walking 3 m straight ahead (+Z, where it faces) in 1.1 s."""
    asset = demo_asset()
    walk = asset.clip("walk")
    hips = asset.rig.find("hips")
    tracks = [t for t in walk.tracks if not (t.node == hips and t.path == "translation")]
    times = np.linspace(0.0, walk.duration, 12).astype(np.float32)
    rest = asset.rig.rest[hips, :3]
    values = np.stack([np.full(12, rest[0]), np.full(12, rest[1]), rest[2] + 3.0 * times / walk.duration], axis=1)
    clip = Clip("travel", tracks + [Track(hips, "translation", "LINEAR", times, values.astype(np.float32))])
    asset.clips.append(clip)
    return asset, clip


def sizes_along(asset, clip, cam) -> tuple[float, float]:
    """The character's projected height (NDC) at the start and at the end of the clip."""
    heights = []
    for t in (0.0, clip.duration):
        world = skeletal.bake(asset, clip, [t])["node_world"][0]
        pts = world[:, :3, 3]
        ndc = cam.project(pts)
        heights.append(float(ndc[:, 1].max() - ndc[:, 1].min()))
    return heights[0], heights[1]


def test_a_travelling_clip_is_seen_from_the_side_of_its_path(traveller):
    asset, clip = traveller
    lo, hi = animated_bounds(asset, clip)
    facing = facing_yaw(asset, clip)
    old = frame(None, lo, hi, 4 / 3, facing=facing)  # framed from the front, as before
    start, end = sizes_along(asset, clip, old)
    assert end / start > 1.3  # the trap: small far away, large near the camera
    new = frame(None, lo, hi, 4 / 3, facing=path_facing(asset, clip, facing, lo, hi, parse_camera(None).yaw))
    start, end = sizes_along(asset, clip, new)
    assert 0.9 < end / start < 1.1
    view = new.eye - new.target
    assert abs(view[2]) < 0.05 * np.linalg.norm(view)  # square to the path (+Z)
    # a clip in place keeps the character's front
    walk = asset.clip("walk")
    lo, hi = animated_bounds(asset, walk)
    assert path_facing(asset, walk, 10.0, lo, hi) == 10.0


def test_follow_keeps_the_root_where_it_was_framed(traveller):
    asset, clip = traveller
    lo, hi, reference = follow_bounds(asset, clip)
    assert hi[2] - lo[2] < 1.5  # the character, not its 3 m path
    cam = frame(parse_camera("follow"), lo, hi, 4 / 3, facing=facing_yaw(asset, clip))
    node = motion_node(asset)
    assert asset.rig.names[node] == "hips"
    seen = []
    for t in np.linspace(0.0, clip.duration, 5):
        root = root_path(asset, clip, [t])[0]
        d = follow_shift(reference, root)
        moved = type(cam)(eye=cam.eye + d, target=cam.target + d, fov=cam.fov, aspect=cam.aspect, near=cam.near,
                          far=cam.far)
        seen.append(moved.project(root[None])[0, :2])
    seen = np.array(seen)
    assert np.abs(seen - seen[0]).max() < 0.05
    assert parse_camera("yaw=10,follow").follow and not parse_camera("follow=0").follow
    with pytest.raises(skeletal.SkeletalError, match="follow wants 1 or 0"):
        parse_camera("follow=maybe")


def test_render_follow_and_path(traveller, tmp_path):
    try:
        from skeletal.render.context import shared_context

        shared_context()
    except Exception as exc:  # moderngl missing, no EGL
        pytest.skip(f"no headless OpenGL context: {exc}")
    from skeletal.render.output import render_clip

    asset, clip = traveller
    import imageio.v3 as iio

    def box(path):
        """(mean x, height) of the character's pixels: coloured, where floor and sky are grey-blue."""
        image = iio.imread(path).astype(np.int32)
        mask = image.max(axis=2) - image.min(axis=2) > 50
        ys, xs = np.nonzero(mask)
        return xs.mean(), ys.max() - ys.min()

    for camera in (None, "follow"):
        boxes = []
        for t in (0.0, clip.duration * 0.95):
            out = tmp_path / f"{camera}_{t:.2f}.png"
            render_clip(asset, clip="travel", out_path=str(out), size=(200, 150), camera=camera, start=t, progress=False)
            boxes.append(box(out))
        (x0, h0), (x1, h1) = boxes
        assert 0.8 < h1 / h0 < 1.25, (camera, boxes)  # the same size at both ends of the walk
        if camera == "follow":
            assert abs(x1 - x0) < 20, boxes  # and in the same place
        else:
            assert abs(x1 - x0) > 30, boxes  # crossing the picture


def test_page_options_carry_the_follow_camera(traveller, tmp_path):
    asset, clip = traveller
    for follow in (False, True):
        page = tmp_path / f"page_{follow}.html"
        skeletal.to_html(asset, page, clips=[clip], follow=follow)
        options = json.loads(re.search(r"var options = (\{.*?\});\n", page.read_text()).group(1)
                             .replace("\\u003c", "<").replace("\\u003e", ">").replace("\\u0026", "&"))
        assert options["follow"]["node"] == int(asset.rig.node_of[asset.rig.find("hips")])
        assert options["follow"]["on"] is follow and len(options["follow"]["reference"]) == 2
    from click.testing import CliRunner

    from skeletal.cli import cli

    glb = tmp_path / "travel.glb"
    skeletal.export(asset, glb, [clip])
    result = CliRunner().invoke(cli, ["html", str(glb), "--out", str(tmp_path / "cli.html"), "--follow"])
    assert result.exit_code == 0, result.output
    assert '"on": true' in (tmp_path / "cli.html").read_text()


def test_the_page_follows_in_a_browser(traveller, tmp_path):
    from test_web import _make_driver, open_page

    asset, clip = traveller
    page = tmp_path / "follow.html"
    skeletal.to_html(asset, page, clips=[clip], follow=True)
    driver = _make_driver()
    try:
        open_page(driver, page)
        assert driver.execute_script("return window.skeletalViewer.ready"), driver.execute_script(
            "return window.skeletalViewer.error")
        target = lambda t: np.array(driver.execute_script(
            f"const v = window.skeletalViewer; v.setTime({t}); v.jointWorld(); return v.cameraTarget()"))
        a, b = target(0.0), target(clip.duration)
        assert 2.5 < b[2] - a[2] < 3.5  # moved with the 3 m walk
        driver.execute_script("window.skeletalViewer.setFollow(false)")
        c, d = target(0.0), target(clip.duration)
        assert np.allclose(c, d)  # unticked: the camera stays
    finally:
        driver.quit()
