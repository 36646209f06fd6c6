"""The Mixer's animated properties (KHR_animation_pointer: materials, lights, cameras, visibility).

A stage of its own, after the node update: one compiled call samples the property tracks of every
running action of every instance at the action's sample time and blends them into
``Mixer.property_values`` (B, M) float64, laid out by ``asset.properties``
(:class:`skeletal.properties.PropertyLayout`). It never touches the node kernels or their job, and it
costs nothing until read: ``property_values`` is sampled when first read after an update (or at
``Mixer.evaluate``), so a Player keeps its one-call update. Only curves that drive weights or fire
events make it a controller run after every update.

Named float curves (``curve/<name>`` properties, see :mod:`skeletal.io.pointer`) ride along: they
blend like the rest, :func:`drive_weight` makes one set an IK handle's or a procedural stage's
``weight`` every update (IK then runs again with it, in the same update), and :func:`watch_curve`
fires ``"curve"`` events when one crosses a threshold.

Blending, per float of the flat array (as three.js's PropertyMixer does): with the actions that
animate it weighing ``w_1 .. w_k`` (their effective weight: user weight x fade envelope) and summing
to W, the value is ``sum(w_i v_i) / W`` when W >= 1, else ``rest (1 - W) + sum(w_i v_i)``. Actions on
additive layers and layer weights/masks (which are per joint) do not apply to properties.

>>> player = skeletal.Player(asset)                  # doctest: +SKIP
>>> player.play("glow"); player.update(0.5)          # doctest: +SKIP
>>> asset.properties.value(player.mixer.property_values[0], "/materials/0/emissiveFactor")  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit, prange

from ..anim.properties import PackedProperties, curve_pointer, pack_properties, sample_properties_into
from .._compile import serial_variant
from . import kernels as K

__all__ = ["PropertyStage", "drive_weight", "watch_curve"]


@njit(cache=True, parallel=True)
def blend_properties(fs, ist, slot_clip, slot_layer, layer_additive, clip_track_start, key_start, times, value_start,
                     values, width, interp, kind, offset, rest, scratch, total, out):
    """``out`` (B, M): every instance's running actions' property tracks at their sample times,
    blended as the module docstring says. ``scratch`` and ``total`` (B, M) are work arrays."""
    for b in prange(out.shape[0]):
        acc = scratch[b]
        weight = total[b]
        acc[:] = 0.0
        weight[:] = 0.0
        for s in range(len(slot_clip)):
            w = fs[b, s, K.F_EFFECTIVE]
            if w <= 0.0 or (ist[b, s, K.I_FLAGS] & K.FLAG_ENABLED) == 0 or layer_additive[slot_layer[s]]:
                continue
            c = slot_clip[s]
            t = fs[b, s, K.F_SAMPLE]
            for k in range(clip_track_start[c], clip_track_start[c + 1]):
                o = offset[k]
                n = width[k]
                row = out[b]  # used as the sample's scratch: rewritten below
                sample_properties_into(t, k, k + 1, key_start, times, value_start, values, width, interp, kind, offset, row)
                for i in range(o, o + n):
                    acc[i] += w * row[i]
                    weight[i] += w
        for i in range(out.shape[1]):
            if weight[i] >= 1.0:
                out[b, i] = acc[i] / weight[i]
            else:
                out[b, i] = rest[i] * (1.0 - weight[i]) + acc[i]


class PropertyStage:
    """Keeps ``mixer.property_values`` (B, M) current; made by the Mixer when its asset has animated
    properties (``len(asset.properties) > 0``). A controller (``after_update``) and called by
    ``Mixer.evaluate``."""

    def __init__(self, mixer: Any, event: type):  # a Mixer and its Event class (not imported: mixer imports this)
        self.mixer = mixer
        self._event = event
        self.layout = mixer.asset.properties
        self.values = np.repeat(self.layout.rest[None], mixer.count, axis=0)
        self._scratch = np.zeros_like(self.values)
        self._total = np.zeros_like(self.values)
        self._stamp: tuple | None = None  # (mixer time, clip set version, slots) the values were sampled at
        self._kernel = blend_properties if mixer.count > 1 else serial_variant(blend_properties)
        self._tables: tuple | None = None  # (clip set version, packed tracks of every clip, track starts)
        self._drives: list[tuple[Any, int, float]] = []  # (object with .weight, curve column, scale)
        self._watched: list[tuple[str, int, float]] = []  # (curve name, column, threshold)
        self._before: np.ndarray | None = None

    def current(self) -> np.ndarray:
        """The values, sampled again when the mixer has moved since the last sampling."""
        m = self.mixer
        if self._stamp != (m.__dict__.get("time"), getattr(m.clipset, "version", None), len(m.slot_clip)):
            self.evaluate()
        return self.values

    def _run_every_update(self) -> None:
        """Drives and watches need the values after every update: run as a controller."""
        if self not in self.mixer.controllers:
            self.mixer.controllers.insert(0, self)  # before procedural stages, which may read the weights

    def before_update(self, dt: float) -> None:
        """Nothing before the node update but remembering the curves' values (for crossings)."""
        if self._watched:
            self._before = self.current().copy()

    def after_update(self, dt: float) -> None:
        self.evaluate()
        self._apply_drives()
        if self._watched and self._before is not None:
            self._fire_crossings(self._before)
            self._before = None

    # -- curves as weights and events --------------------------------------------------------------

    def _apply_drives(self) -> None:
        """Each driven object's ``weight`` from its curve (per instance); IK runs again when one of
        them is an IK handle, so that the weight counts in this very update."""
        if not self._drives:
            return
        values = self.values
        rerun = False
        for target, column, scale in self._drives:
            target.weight = values[:, column] * scale
            rerun = rerun or hasattr(target, "_stages")  # an IKHandle: the weight is read by the update kernel
        if rerun:
            self.mixer._run(0.0, K.BLEND | K.WORLD)  # the same clocks: blend, IK, world matrices again

    def _fire_crossings(self, before: np.ndarray) -> None:
        Event = self._event
        after = self.values
        new = []
        for name, column, threshold in self._watched:
            was, now = before[:, column], after[:, column]
            for b in np.flatnonzero((was < threshold) & (now >= threshold)).tolist():
                new.append(Event("curve", "", b, -1, name, 1))
            for b in np.flatnonzero((was >= threshold) & (now < threshold)).tolist():
                new.append(Event("curve", "", b, -1, name, -1))
        if not new:
            return
        mixer = self.mixer
        if mixer.collect_events:
            mixer._pending.extend(new)
        for event in new:
            for callback in mixer._listeners.get("curve", []) + mixer._listeners.get("*", []):
                callback(event)

    def _packed(self) -> tuple[PackedProperties, np.ndarray]:
        clipset = self.mixer.clipset
        version = getattr(clipset, "version", None)
        if self._tables is None or self._tables[0] != version or self._tables[3] != len(clipset.clips):
            packed, starts = PackedProperties.concat([pack_properties(c, self.layout) for c in clipset.clips])
            self._tables = (version, packed, starts, len(clipset.clips))
        return self._tables[1], self._tables[2]

    def evaluate(self) -> None:
        """Sample and blend every instance's actions' properties into ``mixer.property_values``."""
        m = self.mixer
        p, starts = self._packed()
        self._kernel(m.fs, m.ist, m.slot_clip, m.slot_layer, m.layer_additive, starts, p.key_start, p.times,
                     p.value_start, p.values, p.width, p.interp, p.kind, p.offset, self.layout.rest,
                     self._scratch, self._total, self.values)
        self._stamp = (m.__dict__.get("time"), getattr(m.clipset, "version", None), len(m.slot_clip))


def _stage_and_column(owner, curve: str) -> tuple[PropertyStage, int]:
    mixer = getattr(owner, "mixer", owner)  # a Player or a Mixer
    stage = getattr(mixer, "_properties", None)
    layout = mixer.asset.properties
    key = curve_pointer(curve)
    if stage is None or key not in layout.index:
        from ..errors import SkeletalError

        raise SkeletalError(f"no curve named {curve!r} in {mixer.asset.name} (curves: {', '.join(layout.curve_names) or 'none'})")
    return stage, int(layout.start[layout.index[key]])


def drive_weight(owner, target, curve: str, scale: float = 1.0) -> None:
    """After every update of ``owner`` (a Player or Mixer), set ``target.weight`` to the named float
    curve's blended value times ``scale``, per instance: ``target`` is an IK handle
    (:meth:`skeletal.Mixer.add_ik`; IK then runs again, so the weight counts in the same update) or a
    procedural stage with a ``weight`` (foot placement, look-at).

    >>> hand = player.mixer.add_ik("hand", "two_bone", ["arm", "forearm", "hand"])   # doctest: +SKIP
    >>> drive_weight(player, hand, "grab")                                             # doctest: +SKIP
    """
    stage, column = _stage_and_column(owner, curve)
    stage._drives.append((target, column, float(scale)))
    stage._run_every_update()
    stage.current()
    stage._apply_drives()


def watch_curve(owner, curve: str, threshold: float) -> None:
    """Fire a ``"curve"`` event (:class:`skeletal.playback.mixer.Event` with ``name`` the curve,
    ``instance``, and ``count`` +1 rising through ``threshold``, -1 falling below it) whenever the
    named float curve crosses ``threshold`` during an update; listen with ``on("curve", ...)`` or
    read ``poll_events()``.

    >>> watch_curve(player, "foot_l", 0.5); player.on("curve", print)   # doctest: +SKIP
    """
    stage, column = _stage_and_column(owner, curve)
    stage._watched.append((curve, column, float(threshold)))
    stage._run_every_update()
