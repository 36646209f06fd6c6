"""The notebook widget behind :func:`skeletal.show`: an ``anywidget`` widget running ``viewer.js``.

Traits (synced with the browser): ``glb`` (the model, sent once), ``options`` (camera, ground grid,
first clip, size), ``pose`` (float32 row-major world matrices of every glTF node, 64 bytes a node:
what a followed Player/Mixer streams on each ``update()``; empty = the browser plays the clips), with
``morph`` (float32 morph weights of the nodes with morph targets, glTF node order) and ``properties``
(the animated KHR_animation_pointer values, ``{pointer: [floats]}``).

The output also carries ``image/png``, a still of the first frame from skeletal's headless renderer,
which notebook viewers that run no scripts (GitHub, nbviewer) show instead of the widget.

>>> import skeletal
>>> player = skeletal.Player(skeletal.load("Soldier.glb")); player.play("Walk")   # doctest: +SKIP
>>> widget = skeletal.show(player)          # doctest: +SKIP
>>> player.update(1 / 30)                   # the widget follows   # doctest: +SKIP
"""

from __future__ import annotations

import base64
import os
import tempfile
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..anim.clip import Clip
from ..errors import SkeletalError
from . import SHOW_MAX_BYTES, prepare, widget_source

try:
    import anywidget
    import traitlets
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise SkeletalError("skeletal.show needs anywidget: pip install 'skeletal[notebook]'") from exc

__all__ = ["SkeletalWidget"]


def _follow(mixer, widget: SkeletalWidget) -> None:
    """Make ``mixer.update`` (a Mixer's or a Player's) push the new pose to ``widget`` (and any other
    widget following it). The object's own ``update`` is wrapped once, on that instance; widgets are
    held weakly."""
    followers = mixer.__dict__.get("_skeletal_web_followers")
    if followers is None:
        followers = weakref.WeakSet()
        original = mixer.update

        def update(dt: float) -> None:
            original(dt)
            for w in list(followers):
                w.push()

        update.__doc__ = original.__doc__
        update.__wrapped__ = original  # type: ignore[attr-defined]
        mixer._skeletal_web_followers = followers
        mixer.update = update
    followers.add(widget)


class SkeletalWidget(anywidget.AnyWidget):
    """An inline viewer (see the module docstring); made by :func:`skeletal.show`.

    >>> w = SkeletalWidget(skeletal.demo.demo_asset(), clip="walk")   # doctest: +SKIP
    """

    _esm = widget_source()
    glb = traitlets.Bytes(b"").tag(sync=True)
    options = traitlets.Dict({}).tag(sync=True)
    pose = traitlets.Bytes(b"").tag(sync=True)
    #: With the pose: morph weights (float32, glTF node order, the nodes with morph targets) and the
    #: animated properties ({pointer: values}, KHR_animation_pointer) of the followed instance.
    morph = traitlets.Bytes(b"").tag(sync=True)
    properties = traitlets.Dict({}).tag(sync=True)

    def __init__(self, obj, *, clips: Sequence[Clip | str | int] | None = None, clip: str | int | None = None,
                 width: int = 640, height: int = 480, max_bytes: int = SHOW_MAX_BYTES, still: bool = True,
                 instance: int = 0, up: str = "y", follow: bool = False):
        from ..playback import Mixer, Player

        prepared = prepare(obj, clips, clip, max_bytes=max_bytes, width=width, height=height, up=up, follow=follow)
        self.prepared = prepared
        self.asset = prepared.asset
        self._mixer = obj.mixer if isinstance(obj, Player) else obj if isinstance(obj, Mixer) else None
        if self._mixer is not None and not 0 <= instance < self._mixer.count:
            raise SkeletalError(f"instance {instance} is not among the mixer's {self._mixer.count}")
        self._instance = int(instance)
        name = os.path.basename(self.asset.path) if self.asset.path else self.asset.name
        options = {"camera": prepared.view["camera"], "ground": prepared.view["ground"], "clip": prepared.clip_index,
                   "follow": prepared.view["follow"],
                   "width": int(width), "height": int(height),
                   "note": f"{name}: {len(prepared.clips)} clip(s), model {prepared.size_text}"
                           + (" — following Python's update() calls" if self._mixer is not None else "")}
        super().__init__(glb=prepared.glb, options=options)
        self.still_png: bytes | None = None
        self.still_error: str | None = None
        if still:
            self._render_still(width, height)
        if self._mixer is not None:
            self.push()
            # follow the object whose update() the user calls: a Player's own update runs the compiled
            # step directly (it does not go through its Mixer's update)
            _follow(obj if isinstance(obj, Player) else self._mixer, self)

    # -- streaming --------------------------------------------------------------------------------

    def world(self) -> np.ndarray:
        """The followed pose: (N_nodes, 4, 4) world matrices in glTF node order."""
        if self._mixer is None:
            raise SkeletalError("this widget shows an asset's clips; it follows no Player or Mixer")
        return self._mixer.world[self._instance][self.asset.rig.index_of]

    def push(self) -> None:
        """Send the followed Player's/Mixer's current pose to the browser (``update()`` does this)."""
        if self._mixer is not None:
            asset, b = self.asset, self._instance
            weights = self._mixer.morph_weights[b]
            ranges = [(asset.morph_start[r], asset.morph_start[r + 1]) for r in asset.rig.index_of.tolist()]
            morph = [weights[s:e] for s, e in ranges if e > s]  # glTF node order
            self.morph = np.concatenate(morph).astype(np.float32).tobytes() if morph else b""
            values = getattr(self._mixer, "property_values", None)
            if values is not None and values.shape[1]:
                layout = asset.properties
                self.properties = {p: layout.value(values[b], p).tolist() for p in layout.pointers}
            self.pose = np.ascontiguousarray(self.world(), dtype=np.float32).tobytes()  # last: it redraws

    # -- the still image --------------------------------------------------------------------------

    def _render_still(self, width: int, height: int) -> None:
        """A PNG of what the widget first shows, by skeletal's headless renderer; when OpenGL is not
        available the output has no image and ``still_error`` says why."""
        try:
            import imageio.v3 as iio

            from ..render.layout import pose_at
            from ..render.renderer import Renderer

            clip = self.asset.clip(self.prepared.clips[self.prepared.clip_index]) if self.prepared.clips else None
            renderer = Renderer(self.asset, width, height, clip=clip)
            try:
                if self._mixer is not None:
                    state = (self._mixer.world[self._instance], self._mixer.morph_weights[self._instance])
                else:  # clip None: the rest pose
                    state = pose_at(self.asset, clip, np.zeros(1), loop="clamp")
                image = renderer.draw(state, skeleton=not self.asset.mesh_instances)
            finally:
                renderer.release()
            with tempfile.TemporaryDirectory(prefix="skeletal-still-") as folder:
                path = os.path.join(folder, "still.png")
                iio.imwrite(path, image)
                with open(path, "rb") as f:
                    self.still_png = f.read()
        except Exception as exc:  # the still is optional: no GL, no image, and say why
            self.still_error = f"{type(exc).__name__}: {exc}"

    def _repr_mimebundle_(self, **kwargs: Any):
        bundle = super()._repr_mimebundle_(**kwargs)
        data, metadata = bundle if isinstance(bundle, tuple) else (bundle, {})
        if data is None:
            return None
        data = dict(data)
        if self.still_png is not None:
            data["image/png"] = base64.b64encode(self.still_png).decode("ascii")
        data["text/plain"] = (f"skeletal viewer: {self.asset.name}, {len(self.prepared.clips)} clip(s) "
                              f"(run the notebook to play it)")
        return data, metadata
