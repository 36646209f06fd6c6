"""The browser page (``skeletal html``, :func:`skeletal.to_html`) and the notebook widget
(:func:`skeletal.show`), checked in a real browser: Debian's headless Chromium driven by Selenium.

* joint world matrices read back from the page's JavaScript equal skeletal's bake at the same clip
  and time, to 1e-5 of the model's size: the built-in character (every clip: CUBICSPLINE, LINEAR,
  plus an edited STEP clip), a BVH written from it (bones only), a clip retargeted onto that BVH rig,
  the character written as USD and as FBX and read back, and with ../shared Soldier.glb, the CMU
  BVH walk and that walk retargeted onto Soldier;
* a screenshot of the page covers the same pixels as skeletal's headless render of the same frame
  (same camera; IoU of the character masks);
* hostile names (``<script>``, ``<img onerror>``) show as text and run nothing; a broken model shows
  an error instead of hanging; the page's CSP blocks fetches;
* the widget: its ES module runs in Chromium with a stand-in for anywidget's model (the model bytes
  arrive as a DataView, a streamed pose moves the joints), a followed Player streams poses on
  ``update()``, the output carries a PNG still; the example notebook runs under nbclient.

One Chromium is started for the whole module. The README's screenshots: ``python tests/test_web.py
--screenshots`` (docs/images/web_page.png) and ``python tools/web_jupyterlab.py`` (web_widget.png:
the example notebook run in a real JupyterLab).
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import skeletal
from skeletal.anim.clip import Clip, Track
from skeletal.demo import build_demo_document, demo_asset
from skeletal.errors import SkeletalError
from skeletal.web import Prepared, page_html, prepare

from fixtures.shared_assets import need

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
WAIT_S = 120.0  # a loaded 2-core machine: SwiftShader WebGL can be slow to start


# -- the browser -----------------------------------------------------------------------------------


def _make_driver():
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install selenium)")
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    if not CHROMIUM or not CHROMEDRIVER:
        pytest.skip("Chromium and chromedriver are not installed (apt-get install chromium chromium-driver)")
    options = Options()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--use-angle=swiftshader",
                "--enable-unsafe-swiftshader", "--window-size=900,760", "--force-device-scale-factor=1",
                "--allow-file-access-from-files"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_script_timeout(WAIT_S)
    return driver


@pytest.fixture(scope="module")
def browser():
    driver = _make_driver()
    yield driver
    driver.quit()


def open_page(driver, path: Path) -> None:
    """Load ``path`` and wait until the viewer is ready or has failed (never forever)."""
    driver.get(path.resolve().as_uri())
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        state = driver.execute_script("const v = window.skeletalViewer; return v ? [!!v.ready, !!v.failed] : null")
        if state and (state[0] or state[1]):
            return
        time.sleep(0.1)
    raise AssertionError(f"the viewer in {path} was neither ready nor failed after {WAIT_S} s")


def browser_world(driver, clip: int, t: float) -> np.ndarray:
    flat = driver.execute_script(f"const v = window.skeletalViewer; v.setClip({clip}); v.setTime({t!r}); return v.jointWorld()")
    return np.asarray(flat, dtype=np.float64).reshape(-1, 4, 4)


def check_against_bake(driver, asset, clips, page: Path, samples: int = 3) -> float:
    """Open ``page`` (made from ``asset`` with ``clips``) and compare every clip at ``samples`` times
    (start, inside, end; plus past the end, clamped) with :func:`skeletal.bake`. Returns the worst error."""
    open_page(driver, page)
    assert driver.execute_script("return window.skeletalViewer.ready"), driver.execute_script("return window.skeletalViewer.error")
    assert driver.execute_script("return window.skeletalViewer.clips()") == [c.name for c in clips]
    lo, hi = _node_bounds(asset, clips)
    tol = 1e-5 * max(float(np.linalg.norm(hi - lo)), 1e-6)
    worst = 0.0
    for k, clip in enumerate(clips):
        times = list(np.linspace(0.0, clip.duration, samples)) + [clip.duration * 0.37 + 0.001, clip.duration + 0.5]
        for t in times:
            got = browser_world(driver, k, float(t))
            want = skeletal.bake(asset, clip, [float(t)])["node_world"][0]
            assert got.shape == want.shape
            err = float(np.abs(got - want).max())
            worst = max(worst, err)
            assert err <= tol, f"{clip.name} at t={t:.4f}: browser and bake differ by {err:.3g} (tolerance {tol:.3g})"
    return worst


def _node_bounds(asset, clips):
    points = [skeletal.bake(asset, c, np.linspace(0, c.duration, 5))["node_world"][..., :3, 3].reshape(-1, 3) for c in clips]
    allp = np.concatenate(points) if points else np.zeros((1, 3))
    return allp.min(axis=0), allp.max(axis=0)


def write_page(tmp_path: Path, name: str, obj, **kwargs) -> Path:
    path = tmp_path / f"{name}.html"
    assert skeletal.to_html(obj, path, **kwargs) == os.fspath(path)
    return path


def step_clip(asset) -> Clip:
    """The walk, every track switched to STEP (an edited clip)."""
    walk = asset.clip("walk")
    tracks = [Track(t.node, t.path, "STEP", t.times, t.values) for t in walk.tracks if t.interpolation != "CUBICSPLINE"]
    return Clip("walk_step", tracks)


# -- the built-in character (no ../shared needed) --------------------------------------------------


def test_demo_page_matches_bake(browser, tmp_path):
    asset = demo_asset()
    clips = list(asset.clips) + [step_clip(asset)]
    assert {c.tracks[0].interpolation for c in clips} >= {"CUBICSPLINE", "LINEAR", "STEP"}
    page = write_page(tmp_path, "demo", asset, clips=clips, clip="walk")
    text = page.read_text()
    assert re.search(r"https?://", text) is None, "the page names a network address"
    assert "Content-Security-Policy" in text and "default-src 'none'" in text
    worst = check_against_bake(browser, asset, clips, page)
    assert worst < 1e-5
    # the first clip shown is the one asked for; the UI lists every clip by name (as text)
    assert browser.execute_script("return document.querySelector('select').options.length") == len(clips)
    # the CSP is in force: a fetch from the page is refused
    outcome = browser.execute_async_script(
        "const done = arguments[0]; fetch('data:text/plain,x').then(() => done('fetched'), () => done('blocked'))")
    assert outcome == "blocked"


def _iou_masks(render_image: np.ndarray, background: np.ndarray, page_png: bytes) -> tuple[float, int]:
    from PIL import Image

    page = np.asarray(Image.open(io.BytesIO(page_png)).convert("RGB")).astype(np.int32)
    assert page.shape == render_image.shape, (page.shape, render_image.shape)
    skeletal_mask = np.abs(render_image.astype(np.int32) - background.astype(np.int32)).max(axis=2) > 10
    page_mask = np.abs(page - np.array([255, 0, 255])).max(axis=2) > 60
    union = int((skeletal_mask | page_mask).sum())
    return float((skeletal_mask & page_mask).sum()) / max(union, 1), int(skeletal_mask.sum())


def compare_screenshot(driver, asset, clip_index: int, t: float, width: int = 640, height: int = 480) -> float:
    """IoU of the character's pixels: the open page (magenta background, no grid, no bones) against
    skeletal's headless renderer at the same clip, time and camera (its background from a frame with
    the character moved out of view)."""
    pytest.importorskip("moderngl", reason="the headless renderer needs moderngl")
    from skeletal.render.layout import pose_at
    from skeletal.render.renderer import Renderer

    clip = asset.clips[clip_index]
    renderer = Renderer(asset, width, height, clip=clip, ground=False)
    try:
        state = pose_at(asset, clip, [t], loop="clamp")
        image = renderer.draw(state)
        background = renderer.draw(state, np.array([[1e6, 0.0, 0.0]]))
    finally:
        renderer.release()
    driver.execute_script(
        f"const v = window.skeletalViewer; v.setClip({clip_index}); v.setTime({t!r}); "
        "v.show({skeleton: false, grid: false}); v.setBackground([1, 0, 1]);")
    data_url = driver.execute_script("return window.skeletalViewer.canvas.toDataURL('image/png')")
    iou, pixels = _iou_masks(image, background, base64.b64decode(data_url.split(",", 1)[1]))
    assert pixels > 0.02 * width * height, "the character covers almost nothing in skeletal's render"
    return iou


def test_demo_screenshot_matches_headless_render(browser, tmp_path):
    asset = demo_asset()
    page = write_page(tmp_path, "demo_shot", asset, clip="walk")
    open_page(browser, page)
    iou = compare_screenshot(browser, asset, asset.clips.index(asset.clip("walk")), 0.4)
    assert iou > 0.95, f"page and headless render cover different pixels: IoU {iou:.3f}"


def _demo_bvh(tmp_path: Path):
    pytest.importorskip("skeletal.io.bvh", reason="the BVH reader is not available")
    path = tmp_path / "demo_walk.bvh"
    skeletal.write_bvh(demo_asset(), "walk", path)
    return skeletal.load(path)


def test_bvh_page_shows_bones_and_matches_bake(browser, tmp_path):
    bvh = _demo_bvh(tmp_path)
    assert not bvh.mesh_instances
    page = write_page(tmp_path, "bvh", bvh)
    check_against_bake(browser, bvh, list(bvh.clips), page)
    # bones only: the page draws its bone lines (something other than the background is on screen)
    browser.execute_script("const v = window.skeletalViewer; v.show({grid: false}); v.setBackground([1, 0, 1]);")
    png = base64.b64decode(browser.execute_script("return window.skeletalViewer.canvas.toDataURL('image/png')").split(",", 1)[1])
    from PIL import Image

    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    assert (np.abs(pixels - [255, 0, 255]).max(axis=2) > 60).sum() > 200, "no bones drawn for a BVH"


def test_retargeted_clip_page_matches_bake(browser, tmp_path):
    bvh = _demo_bvh(tmp_path)
    demo = demo_asset()
    clip = skeletal.retarget(demo.clip("run"), demo.rig, bvh.rig, name="run_retargeted")
    page = write_page(tmp_path, "retarget", bvh, clips=[clip])
    check_against_bake(browser, bvh, [clip], page)


@pytest.mark.parametrize("kind", ["usd", "fbx"])
def test_usd_and_fbx_go_through_export(browser, tmp_path, kind):
    """A model read from USD or FBX (the built-in character written out and read back) plays in the
    page as skeletal bakes it: the page only ever sees skeletal.export's GLB."""
    demo = demo_asset()
    if kind == "usd":
        pytest.importorskip("pxr", reason="usd-core is not installed (pip install 'skeletal[usd]')")
        from skeletal.tools.usd_write import write_usd

        path = tmp_path / "demo.usda"
        write_usd(demo, path, ["walk", "idle"])
    else:
        from fixtures.assimp_convert import assimp_command, convert

        if assimp_command() is None:
            pytest.skip("the assimp command is not installed (apt-get install assimp-utils)")
        pytest.importorskip("cffi", reason="the FBX reader needs cffi (pip install 'skeletal[assimp]')")
        glb = tmp_path / "demo.glb"
        skeletal.export(demo, glb, ["walk"])
        path = convert(glb, tmp_path / "demo.fbx")
    model = skeletal.load(path)
    assert model.clips and model.mesh_instances
    check_against_bake(browser, model, list(model.clips), write_page(tmp_path, kind, model))


# -- shared models ------------------------------------------------------------------------------


def test_soldier_page_matches_bake_and_render(browser, tmp_path):
    soldier = skeletal.load(need("Soldier.glb"))
    page = write_page(tmp_path, "soldier", soldier, clip="Walk")
    check_against_bake(browser, soldier, list(soldier.clips), page)
    walk = [c.name for c in soldier.clips].index("Walk")
    iou = compare_screenshot(browser, soldier, walk, 0.5)
    assert iou > 0.93, f"Soldier: page and headless render cover different pixels: IoU {iou:.3f}"


def test_cmu_bvh_and_retarget_onto_soldier(browser, tmp_path):
    cmu = skeletal.load(need("cmu_12_01_walk.bvh"))
    soldier = skeletal.load(need("Soldier.glb"))
    check_against_bake(browser, cmu, list(cmu.clips), write_page(tmp_path, "cmu", cmu), samples=4)
    clip = skeletal.retarget(cmu.clips[0], cmu.rig, soldier.rig, name="cmu_walk")
    check_against_bake(browser, soldier, [clip], write_page(tmp_path, "cmu_on_soldier", soldier, clips=[clip]), samples=4)


# -- bad input -----------------------------------------------------------------------------------


HOSTILE_NODE = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">'
HOSTILE_CLIP = '</option><img src=y onerror="window.pwned = 3">walk'


def test_hostile_names_are_text(browser, tmp_path):
    doc = build_demo_document()
    doc.nodes[3].name = HOSTILE_NODE
    doc.animations[1].name = HOSTILE_CLIP
    doc.path = str(tmp_path / "<b onmouseover=x>.glb")
    asset = skeletal.Asset(doc)
    page = write_page(tmp_path, "hostile", asset)
    open_page(browser, page)
    assert browser.execute_script("return window.skeletalViewer.ready")
    assert browser.execute_script("return window.pwned === undefined")
    assert HOSTILE_NODE in browser.execute_script("return window.skeletalViewer.nodeNames()")
    options = browser.execute_script("return Array.from(document.querySelectorAll('option')).map(o => o.textContent)")
    assert any(HOSTILE_CLIP in o for o in options)
    assert browser.execute_script("return document.querySelectorAll('img').length") == 0


def _patch_glb(glb: bytes, change) -> bytes:
    """``glb`` with its JSON chunk passed through ``change(gltf)``."""
    length = int.from_bytes(glb[12:16], "little")
    gltf = json.loads(glb[20 : 20 + length])
    change(gltf)
    text = json.dumps(gltf).encode()
    text += b" " * (-len(text) % 4)
    body = len(text).to_bytes(4, "little") + b"JSON" + text + glb[20 + length :]
    return glb[:8] + (12 + len(body)).to_bytes(4, "little") + body


def _make_cycle(gltf):  # root's first child names root as its child
    gltf["nodes"][1]["children"] = gltf["nodes"][1].get("children", []) + [0]


def _huge_count(gltf):  # an accessor claiming far more elements than its buffer holds
    for accessor in gltf["accessors"]:
        accessor["count"] = 99_999_999


def _bad_joint(gltf):  # a skin joint that is not a node
    gltf["skins"][0]["joints"][3] = 10_000


@pytest.mark.parametrize("damage", ["garbage", "truncated", "cycle", "huge_count", "bad_joint"])
def test_broken_model_says_why_and_does_not_hang(browser, tmp_path, damage):
    good = prepare(demo_asset())
    glb = {"garbage": lambda g: b"not a model at all" * 10, "truncated": lambda g: g[: len(g) // 3],
           "cycle": lambda g: _patch_glb(g, _make_cycle), "huge_count": lambda g: _patch_glb(g, _huge_count),
           "bad_joint": lambda g: _patch_glb(g, _bad_joint)}[damage](good.glb)
    broken = Prepared(glb, good.asset, good.clips, 0, good.view)
    page = tmp_path / f"broken_{damage}.html"
    page.write_text(page_html(broken))
    open_page(browser, page)
    assert browser.execute_script("return window.skeletalViewer.failed")
    message = browser.execute_script("return String(window.skeletalViewer.error)")
    expected = {"garbage": "not a GLB", "truncated": "past the end", "cycle": "cycle", "huge_count": "runs past",
                "bad_joint": "bad joint"}[damage]
    assert expected in message, message
    assert "skeletal viewer:" in browser.execute_script("return document.body.textContent")


def test_export_failure_and_size_limit_say_why():
    asset = demo_asset()
    additive = skeletal.cliptools.make_additive(asset.clip("walk"))
    with pytest.raises(SkeletalError, match="cannot export it for the browser: .*additive"):
        prepare(asset, [additive])
    with pytest.raises(SkeletalError, match=r"the model is .* as GLB, over the .* limit"):
        prepare(asset, max_bytes=1000)
    with pytest.raises(SkeletalError, match="no clip 'nope'"):
        prepare(asset, clip="nope")


def test_cli_html(tmp_path):
    from click.testing import CliRunner

    from skeletal.cli import cli

    bvh_path = tmp_path / "walk.bvh"
    skeletal.write_bvh(demo_asset(), "walk", bvh_path)
    out = tmp_path / "walk.html"
    result = CliRunner().invoke(cli, ["html", str(bvh_path), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert out.is_file() and "walk.bvh ->" in result.output and "MB" in result.output
    bad = CliRunner().invoke(cli, ["html", str(bvh_path), "--out", str(tmp_path / "x.txt")])
    assert bad.exit_code != 0 and "must end in .html" in bad.output and "Traceback" not in bad.output
    missing = CliRunner().invoke(cli, ["html", str(tmp_path / "none.glb"), "--out", str(out)])
    assert missing.exit_code != 0 and "no such file" in missing.output
    noclip = CliRunner().invoke(cli, ["html", str(bvh_path), "--out", str(out), "--clip", "nope"])
    assert noclip.exit_code != 0 and "Traceback" not in noclip.output
    nofolder = CliRunner().invoke(cli, ["html", str(bvh_path), "--out", str(tmp_path / "no" / "x.html")])
    assert nofolder.exit_code != 0 and "does not exist" in nofolder.output
    badsize = CliRunner().invoke(cli, ["html", str(bvh_path), "--out", str(out), "--size", "big"])
    assert badsize.exit_code != 0 and "WIDTHxHEIGHT" in badsize.output
    # --clip picks and orders the clips; --size sets the view
    glb = tmp_path / "demo.glb"
    skeletal.export(demo_asset(), glb)
    sized = CliRunner().invoke(cli, ["html", str(glb), "--out", str(out), "--clip", "wave", "--clip", "idle", "--size", "320x200"])
    assert sized.exit_code == 0, sized.output
    page = out.read_text()
    assert '"width": 320' in page and '"height": 200' in page and '"clip": 0' in page and "2 clip(s)" in page


def test_model_without_clips_shows_its_rest_pose(browser, tmp_path):
    doc = build_demo_document()
    doc.animations = []
    asset = skeletal.Asset(doc)
    page = write_page(tmp_path, "rest", asset)
    open_page(browser, page)
    assert browser.execute_script("return window.skeletalViewer.ready")
    assert browser.execute_script("return window.skeletalViewer.clips()") == []
    got = np.asarray(browser.execute_script("return window.skeletalViewer.jointWorld()")).reshape(-1, 4, 4)
    np.testing.assert_allclose(got, skeletal.bake(asset, 0, [0.0])["node_world"][0], atol=1e-12)


# -- the widget ------------------------------------------------------------------------------------


def _widget_harness(tmp_path: Path, widget) -> Path:
    """A page that imports the widget's ES module (from a data: URL, as is) and renders it with a
    stand-in for anywidget's model: ``get``/``on``/``off``, the model bytes as a DataView."""
    from skeletal.web import widget_source

    esm = base64.b64encode(widget_source().encode()).decode()
    state = {"options": widget.options, "glb": base64.b64encode(widget.glb).decode(),
             "pose": base64.b64encode(widget.pose).decode(), "morph": base64.b64encode(widget.morph).decode(),
             "properties": widget.properties}
    page = tmp_path / "widget.html"
    page.write_text(f"""<!DOCTYPE html><html><head><meta charset="utf-8"><title>widget</title></head>
<body style="margin:12px;font:13px sans-serif"><div style="border:1px solid #ccc;padding:8px;display:inline-block">
<div style="color:#555;margin-bottom:6px">[1]: skeletal.show(player)</div><div id="out"></div></div>
<script type="module">
const state = {json.dumps(state)};
const bytes = b64 => {{ const s = atob(b64), u = new Uint8Array(s.length); for (let i = 0; i < s.length; i++) u[i] = s.charCodeAt(i); return u; }};
const values = {{options: state.options, glb: new DataView(bytes(state.glb).buffer), pose: new DataView(bytes(state.pose).buffer),
                 morph: new DataView(bytes(state.morph).buffer), properties: state.properties}};
const listeners = {{}};
const model = {{
  get: k => values[k],
  on: (e, f) => {{ (listeners[e] = listeners[e] || []).push(f); }},
  off: (e, f) => {{ listeners[e] = (listeners[e] || []).filter(g => g !== f); }},
}};
window.harnessSetPose = (b64, morph, properties) => {{
  if (morph !== undefined) values.morph = new DataView(bytes(morph).buffer);
  if (properties !== undefined) values.properties = properties;
  values.pose = new DataView(bytes(b64).buffer); (listeners["change:pose"] || []).forEach(f => f());
}};
const module = await import("data:text/javascript;base64,{esm}");
module.default.render({{model, el: document.getElementById("out")}});
</script></body></html>""")
    return page


def test_widget_follows_player_and_runs_in_chromium(browser, tmp_path):
    pytest.importorskip("anywidget", reason="anywidget is not installed (pip install 'skeletal[notebook]')")
    asset = demo_asset()
    player = skeletal.Player(asset)
    player.play("walk")
    player.update(0.1)
    widget = skeletal.show(player)
    world0 = np.frombuffer(widget.pose, np.float32).reshape(-1, 4, 4)
    np.testing.assert_allclose(world0, player.node_world, atol=1e-6)
    # update() streams the new pose: 64 bytes a node, no model
    sent = []
    widget.observe(lambda change: sent.append(change["new"]), names="pose")
    for _ in range(3):
        player.update(1 / 30)
    assert len(sent) == 3 and all(len(s) == 64 * len(asset.document.nodes) for s in sent)
    np.testing.assert_allclose(np.frombuffer(widget.pose, np.float32).reshape(-1, 4, 4), player.node_world, atol=1e-6)
    # the output: the widget view, a PNG still for script-less viewers, text
    data, _ = widget._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in data
    if widget.still_png is None:
        pytest.fail(f"no still image: {widget.still_error}")
    assert base64.b64decode(data["image/png"])[:8] == b"\x89PNG\r\n\x1a\n"
    # the same ES module in Chromium: the model arrives with the current pose; a streamed pose moves the joints
    open_page(browser, _widget_harness(tmp_path, widget))
    assert browser.execute_script("return window.skeletalViewer.ready"), browser.execute_script("return window.skeletalViewer.error")
    got = np.asarray(browser.execute_script("return window.skeletalViewer.jointWorld()")).reshape(-1, 4, 4)
    np.testing.assert_allclose(got, player.node_world, atol=1e-6)
    browser.execute_script(f"window.harnessSetPose({base64.b64encode(world0.tobytes()).decode()!r})")
    got = np.asarray(browser.execute_script("return window.skeletalViewer.jointWorld()")).reshape(-1, 4, 4)
    np.testing.assert_allclose(got, world0, atol=1e-6)
    assert not np.allclose(got, player.node_world, atol=1e-4)
    with pytest.raises(SkeletalError, match="over the"):
        skeletal.show(asset, max_bytes=1000)


def test_widget_follows_a_mixer_instance():
    pytest.importorskip("anywidget", reason="anywidget is not installed (pip install 'skeletal[notebook]')")
    asset = demo_asset()
    mixer = skeletal.Mixer(asset, 3)
    mixer.play("run", offset=np.array([0.0, 0.3, 0.6]))
    mixer.update(0.1)
    widget = skeletal.show(mixer, instance=1, still=False)
    assert widget.options["clip"] == [c.name for c in asset.clips].index("run")
    index_of = asset.rig.index_of
    np.testing.assert_allclose(np.frombuffer(widget.pose, np.float32).reshape(-1, 4, 4), mixer.world[1][index_of], atol=1e-6)
    mixer.update(0.25)
    np.testing.assert_allclose(np.frombuffer(widget.pose, np.float32).reshape(-1, 4, 4), mixer.world[1][index_of], atol=1e-6)
    with pytest.raises(SkeletalError, match="instance 5"):
        skeletal.show(mixer, instance=5, still=False)
    with pytest.raises(SkeletalError, match="cannot show a dict"):
        skeletal.show({})


def test_example_notebook_runs(tmp_path):
    nbformat = pytest.importorskip("nbformat", reason="nbformat is not installed")
    nbclient = pytest.importorskip("nbclient", reason="nbclient is not installed")
    pytest.importorskip("ipykernel", reason="ipykernel is not installed")
    pytest.importorskip("anywidget", reason="anywidget is not installed")
    notebook = nbformat.read(REPO / "examples" / "notebook.ipynb", as_version=4)
    env_path = os.environ.get("PYTHONPATH", "")
    src = str(REPO / "src")
    os.environ["PYTHONPATH"] = src + (os.pathsep + env_path if env_path else "")
    try:
        client = nbclient.NotebookClient(notebook, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}},
                                         store_widget_state=True)
        client.execute()
    finally:
        os.environ["PYTHONPATH"] = env_path
        if not env_path:
            del os.environ["PYTHONPATH"]
    views, pngs = [], []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "application/vnd.jupyter.widget-view+json" in data:
                views.append(data["application/vnd.jupyter.widget-view+json"]["model_id"])
                pngs.append(data.get("image/png"))
    assert len(views) >= 2, "the notebook shows no widgets"
    assert all(p and base64.b64decode(p)[:4] == b"\x89PNG" for p in pngs), "a widget output has no PNG still"
    state = notebook.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    for model_id in views:
        model = state[model_id]["state"]
        assert model["_anywidget_id"] == "skeletal.web.widget.SkeletalWidget"
        assert "createSkeletalViewer" in model["_esm"]
    # the last cell printed how far the followed player moved and that the widget holds its pose
    printed = "".join(o.get("text", "") for o in notebook.cells[-1].get("outputs", []) if o.get("output_type") == "stream")
    assert "widget pose matches the player: True" in printed


# -- README screenshots ----------------------------------------------------------------------------


def write_screenshots() -> None:
    """docs/images/web_page.png: the page (Soldier if ../shared has it, else the built-in character)."""
    import tempfile

    driver = _make_driver()
    images = REPO / "docs" / "images"
    try:
        with tempfile.TemporaryDirectory() as folder:
            folder = Path(folder)
            try:
                model = skeletal.load(need("Soldier.glb"))
                clip = "Walk"
            except pytest.skip.Exception:  # no ../shared: the built-in character
                model, clip = demo_asset(), "walk"
            page = write_page(folder, "page", model, clip=clip, width=720, height=480)
            driver.set_window_size(820, 900)
            open_page(driver, page)
            driver.execute_script("window.skeletalViewer.setTime(0.55)")
            driver.find_element("tag name", "body").screenshot(str(images / "web_page.png"))
    finally:
        driver.quit()
    print(images / "web_page.png")


if __name__ == "__main__":
    if "--screenshots" in sys.argv:
        write_screenshots()
