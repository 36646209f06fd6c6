"""Look at a character in a browser or a notebook: a self-contained HTML page and a Jupyter widget.

Both use one viewer, ``viewer.js`` in this package: a small WebGL2 program written for skeletal (no
three.js: a vendored copy would add about a megabyte to every page, and the viewer only has to read
what :func:`skeletal.export` writes). It parses the GLB, samples the clips as :mod:`skeletal.sampling`
does (STEP, LINEAR with slerp, CUBICSPLINE), poses the nodes in float64, skins on the GPU and draws
the bones on top (morph targets blended on the CPU), with a clip list, play/pause, a timeline, speed, an orbit camera (drag: turn,
shift/right drag: pan, wheel: zoom) and a bones toggle. A model without meshes (a BVH) shows bones.

* :func:`to_html` / ``skeletal html MODEL --out page.html``: one file, the model embedded as base64,
  no network at view time (a Content-Security-Policy meta tag forbids every fetch; the two inline
  scripts are allowed by their SHA-256 hashes only). Names from the file are inserted as text.
* :func:`show`: an ``anywidget`` widget (``pip install skeletal[notebook]``) for JupyterLab, Jupyter
  Notebook and VS Code, with a still PNG (skeletal's headless renderer) in the same output for
  viewers that run no scripts (a notebook on GitHub). A :class:`skeletal.Player` or
  :class:`skeletal.Mixer` shown this way follows its ``update()`` calls: each one sends the new node
  world matrices (float32, 64 bytes a node), never the model again.

Every asset goes through :func:`skeletal.export` to GLB first, so glTF, FBX, BVH, USD, retargeted and
edited clips all look the same. The camera starts where ``skeletal render`` puts it (the clip's
animated bounds, front three-quarter view), so a page and a rendered frame match.

>>> import skeletal
>>> from skeletal.demo import demo_asset
>>> skeletal.to_html(demo_asset(), "demo.html", clip="walk")    # doctest: +SKIP
'demo.html'
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

import numpy as np

from ..asset import Asset
from ..anim.clip import Clip
from ..errors import SkeletalError

if TYPE_CHECKING:  # the widget needs anywidget (skeletal[notebook]): imported when show() runs
    from ..playback import Mixer, Player
    from .widget import SkeletalWidget

__all__ = ["HTML_MAX_BYTES", "SHOW_MAX_BYTES", "Prepared", "page_html", "prepare", "show", "to_html"]

#: The largest GLB :func:`to_html` embeds (base64 makes the page 4/3 of it); bigger models are refused.
HTML_MAX_BYTES = 256 * 1024 * 1024
#: The largest GLB :func:`show` sends to a notebook (``max_bytes=`` raises it).
SHOW_MAX_BYTES = 64 * 1024 * 1024


def viewer_source() -> str:
    """The viewer's JavaScript (defines ``createSkeletalViewer(root, options)``)."""
    return resources.files(__package__).joinpath("viewer.js").read_text(encoding="utf-8")


def widget_source() -> str:
    """The anywidget ES module: the viewer plus its ``render({model, el})`` glue."""
    glue = resources.files(__package__).joinpath("widget.js").read_text(encoding="utf-8")
    return viewer_source() + "\n" + glue


@dataclass
class Prepared:
    """What a page or widget needs: the GLB bytes, the asset, the clip names and first clip, and the
    view (camera and ground grid, as ``skeletal render`` frames that clip)."""

    glb: bytes
    asset: Asset
    clips: list[str]
    clip_index: int
    view: dict[str, Any]

    @property
    def size_text(self) -> str:
        return _size_text(len(self.glb))


def _size_text(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n / 1e3:.1f} kB"


def _asset_of(obj, up: str = "y") -> tuple[Asset, str | None]:
    """(asset, the clip it is playing or None) for an Asset, Player, Mixer or model path (loaded with
    ``up``, see :func:`skeletal.load`)."""
    from ..playback import Mixer, Player

    if isinstance(obj, Asset):
        return obj, None
    if isinstance(obj, Player):
        mixer = obj.mixer
    elif isinstance(obj, Mixer):
        mixer = obj
    elif isinstance(obj, (str, os.PathLike)):
        from ..asset import load

        return load(obj, up=up), None
    else:
        raise SkeletalError(f"cannot show a {type(obj).__name__}: give an Asset, a Player, a Mixer or a model path")
    # the clip list starts at the clip of the mixer's first action (the streamed pose shows the rest)
    playing = mixer.clipset.clips[int(mixer.slot_clip[0])].name if len(mixer.slot_clip) else None
    return mixer.asset, playing


def prepare(obj, clips: Sequence[Clip | str | int] | None = None, clip: str | int | None = None, *,
            max_bytes: int = HTML_MAX_BYTES, width: int = 640, height: int = 480, up: str = "y",
            follow: bool = False) -> Prepared:
    """Export ``obj`` (Asset, Player, Mixer or path) with ``clips`` (default: all of the asset's) to
    GLB bytes, pick the first clip shown (``clip``: name or index among ``clips``) and frame it.
    ``up``: a model path's up axis, as :func:`skeletal.load` takes it ("auto" stands Z-up mocap up).
    ``follow``: the camera starts following the character's root (a checkbox in the viewer); else
    it frames the clip's whole path.

    Raises :class:`skeletal.SkeletalError` with one line saying why when the asset cannot be exported
    (an additive clip, duplicate clip names...) or the GLB is over ``max_bytes``.
    """
    from ..tools.export import export

    asset, playing = _asset_of(obj, up)
    name = os.path.basename(asset.path) if asset.path else asset.name
    chosen = list(asset.clips) if clips is None else [c if isinstance(c, Clip) else asset.clip(c) for c in clips]
    with tempfile.TemporaryDirectory(prefix="skeletal-web-") as folder:
        path = os.path.join(folder, "model.glb")
        try:
            export(asset, path, chosen)
        except SkeletalError as exc:
            raise type(exc)(f"{name}: cannot export it for the browser: {exc}") from None
        except (ValueError, TypeError, OverflowError) as exc:
            raise SkeletalError(f"{name}: cannot export it for the browser: {exc}") from None
        size = os.path.getsize(path)
        if size > max_bytes:
            raise SkeletalError(f"{name}: the model is {_size_text(size)} as GLB, over the {_size_text(max_bytes)} "
                                "limit for a browser view (pass fewer clips, or raise max_bytes)")
        with open(path, "rb") as f:
            glb = f.read()
    names = [c.name for c in chosen]
    index = 0
    key = clip if clip is not None else playing
    if key is not None:
        if isinstance(key, int) and not isinstance(key, bool):
            if not 0 <= key < len(names):
                raise SkeletalError(f"{name}: no clip {key} (it has {len(names)})")
            index = key
        elif key in names:
            index = names.index(key)
        elif clip is not None:
            raise SkeletalError(f"{name}: no clip {key!r} (clips: {', '.join(names) or 'none'})")
    view = frame_view(asset, chosen[index] if chosen else None, width, height, follow=follow)
    return Prepared(glb, asset, names, index, view)


def frame_view(asset: Asset, clip: Clip | None, width: int = 640, height: int = 480,
               follow: bool = False) -> dict[str, Any]:
    """The camera (eye, target, fov, near, far) and ground grid that ``skeletal render`` uses for
    ``clip`` at this image size (see :func:`skeletal.render.camera.frame`): the whole path of a clip
    that travels, seen from its side; with ``follow`` the character alone, the camera then moving
    with its root (``"follow"``: the node, whether on, and the root's start, for the viewer)."""
    from ..render.camera import (CameraSpec, animated_bounds, facing_yaw, follow_bounds, frame, motion_node, nice_step,
                                 path_facing, root_path)

    facing = facing_yaw(asset, clip)
    reference = None
    if follow and clip is not None and clip.duration > 0:
        lo, hi, reference = follow_bounds(asset, clip)
    else:
        lo, hi = animated_bounds(asset, clip)
        facing = path_facing(asset, clip, facing, lo, hi, CameraSpec().yaw)
    cam = frame(None, lo, hi, width / height, facing=facing)
    size = hi - lo
    tall = max(float(size[1]), float(np.linalg.norm(size)) * 0.3, 1e-3)
    if reference is None and clip is not None and len(asset.rig):
        reference = root_path(asset, clip, [0.0])[0]
    node = int(asset.rig.node_of[motion_node(asset)]) if len(asset.rig) else -1
    return {
        "follow": {"node": node, "on": bool(follow and reference is not None),
                   "reference": [float(reference[0]), float(reference[2])] if reference is not None else None},
        "camera": {"eye": cam.eye.tolist(), "target": cam.target.tolist(), "fov": cam.fov, "near": cam.near, "far": cam.far},
        "ground": {"y": float(lo[1]), "cell": nice_step(tall / 4.0), "half": 1.6 * float(np.linalg.norm(size)) + 2.0 * tall
                   + (_path_extent(asset, clip) if follow else 0.0), "center": cam.target.tolist()},
        "size": float(np.linalg.norm(size)),
    }


def _path_extent(asset: Asset, clip: Clip | None) -> float:
    """How far the root travels over ``clip`` (the larger horizontal extent; 0 for none)."""
    from ..render.camera import root_path

    if clip is None or not clip.duration > 0 or not len(asset.rig):
        return 0.0
    path = root_path(asset, clip, np.linspace(0.0, clip.duration, 16))
    return float(np.ptp(path[:, [0, 2]], axis=0).max())


def _script_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def page_html(prepared: Prepared, *, title: str | None = None, width: int = 640, height: int = 480) -> str:
    """The self-contained page for a :class:`Prepared` model (see the module docstring)."""
    options = {"camera": prepared.view["camera"], "ground": prepared.view["ground"], "clip": prepared.clip_index,
               "follow": prepared.view["follow"],
               "width": int(width), "height": int(height)}
    name = title or prepared.asset.name
    note = f"{name}: {len(prepared.clips)} clip(s), model {prepared.size_text} — drag to turn, shift-drag to pan, wheel to zoom"
    options["note"] = note
    # JSON inside a script: "<" is escaped so that no text from the file can close the script element.
    options_js = json.dumps(options).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    boot = (
        "(function () {\n"
        "  var root = document.getElementById('skeletal-root');\n"
        "  var status = document.getElementById('skeletal-loading');\n"
        f"  var options = {options_js};\n"
        "  // the loading line (with the model's size) is painted before the decoding starts\n"
        "  requestAnimationFrame(function () { setTimeout(function () {\n"
        "    try {\n"
        "      var t0 = performance.now();\n"
        "      var text = document.getElementById('skeletal-model').textContent.replace(/\\s+/g, '');\n"
        "      var raw = atob(text), bytes = new Uint8Array(raw.length);\n"
        "      for (var i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);\n"
        "      options.glb = bytes;\n"
        "      status.remove();\n"
        "      var t1 = performance.now();\n"
        "      window.skeletalViewer = createSkeletalViewer(root, options);\n"
        "      if (window.skeletalViewer.timings) window.skeletalViewer.timings.decode_ms = t1 - t0;\n"
        "    } catch (err) {\n"
        "      status.textContent = 'skeletal viewer: cannot read the embedded model: ' + (err && err.message || err);\n"
        "      window.skeletalViewer = {ready: false, failed: true, error: String(err)};\n"
        "    }\n"
        "  }, 0); });\n"
        "})();\n"
    )
    viewer = viewer_source()
    csp = (f"default-src 'none'; script-src {_script_hash(viewer)} {_script_hash(boot)}; "
           "style-src 'unsafe-inline'; img-src data: blob:; connect-src 'none'; form-action 'none'; base-uri 'none'")
    model_b64 = base64.b64encode(prepared.glb).decode("ascii")
    # base64 is [A-Za-z0-9+/=] only: nothing in it can end the element
    lines = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{html.escape(csp, quote=False)}">',
        f"<title>{html.escape(name)} — skeletal</title>",
        "<style>body{margin:12px;background:#f4f5f7;font:13px sans-serif}h1{font-size:15px;margin:0 0 8px}</style>",
        "</head><body>",
        f"<h1>{html.escape(name)}</h1>",
        '<div id="skeletal-root"></div>',
        f'<div id="skeletal-loading">loading the model ({html.escape(prepared.size_text)})…</div>',
        f'<script type="application/octet-stream" id="skeletal-model">{model_b64}</script>',
        f"<script>{viewer}</script>",
        f"<script>{boot}</script>",
        "</body></html>",
    ]
    return "\n".join(lines)


def to_html(obj: Asset | Player | Mixer | str | os.PathLike, path: str | os.PathLike, *, clips: Sequence[Clip | str | int] | None = None,
            clip: str | int | None = None, width: int = 640, height: int = 480, title: str | None = None,
            up: str = "y", follow: bool = False) -> str:
    """Write a self-contained page that plays ``obj`` (Asset, Player, Mixer or model path) to ``path``.

    ``clips``: the clips to include (Clip objects, e.g. retargeted or edited ones, or names/indices of
    the asset's; default all), ``clip`` the one shown first, ``width``/``height`` the view in CSS
    pixels; ``up``: a model path's up axis (see :func:`skeletal.load`); ``follow``: the camera follows
    the character (else it frames the whole path; the page has a checkbox). Returns the path. Raises :class:`skeletal.SkeletalError` (one line) when the asset cannot
    be exported or is over :data:`HTML_MAX_BYTES` as GLB.

    >>> skeletal.to_html(skeletal.load("walk.bvh"), "walk.html")   # doctest: +SKIP
    'walk.html'
    """
    folder = os.path.dirname(os.path.abspath(os.fspath(path)))
    if not os.path.isdir(folder):
        raise SkeletalError(f"cannot write {os.fspath(path)}: folder {folder} does not exist")
    prepared = prepare(obj, clips, clip, width=width, height=height, up=up, follow=follow)
    text = page_html(prepared, title=title, width=width, height=height)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return os.fspath(path)


def show(obj: Asset | Player | Mixer | str | os.PathLike, *, clips: Sequence[Clip | str | int] | None = None, clip: str | int | None = None,
         width: int = 640, height: int = 480, max_bytes: int = SHOW_MAX_BYTES, still: bool = True,
         instance: int = 0, up: str = "y", follow: bool = False) -> SkeletalWidget:
    """A notebook widget playing ``obj`` (Asset, Player, Mixer or model path); see :class:`.widget.SkeletalWidget`.

    A Player or Mixer is followed live: after each of its ``update()`` calls the widget receives the
    new pose (``instance``: which of a Mixer's instances). ``still``: put a PNG of the first frame in
    the output for viewers that run no scripts. Models over ``max_bytes`` as GLB are refused with a
    message (the widget sends the model once, whole). ``up``: a model path's up axis, as
    :func:`skeletal.load` takes it (``skeletal.show("walk_zup.bvh", up="auto")`` stands it up);
    ``follow``: the camera follows the character's root (else it frames the whole path).

    >>> w = skeletal.show(skeletal.Player(asset))       # doctest: +SKIP
    """
    from .widget import SkeletalWidget

    return SkeletalWidget(obj, clips=clips, clip=clip, width=width, height=height, max_bytes=max_bytes,
                          still=still, instance=instance, up=up, follow=follow)
