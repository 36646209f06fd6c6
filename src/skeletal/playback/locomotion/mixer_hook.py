"""Inertialized crossfades on a :class:`~skeletal.Mixer` (and so a :class:`~skeletal.Player`).

How it plugs into the frame (the only change to the mixer is two lines at the top of
``Mixer.crossfade``, which hand ``blend != "linear"`` to :func:`inertialized_crossfade`):

1. the switch: the pose shown now and its velocity (kept by the stage) become the source; the layer
   switches to the target clip at once (a crossfade of length 0: one clip sampled from now on) and
   is evaluated; that pose is the target at the switch.
2. every update while a transition runs: the mixer's compiled update runs as always (clocks, the one
   clip's pose, world matrices, palettes); then this controller's ``after_update`` adds the decaying
   offsets to ``local_pose`` in one compiled call
   (:class:`~skeletal.playback.locomotion.inertialize.Inertializer`) and re-runs the update kernel's
   WORLD stage (world rows, IK, palettes) on the changed pose. When every transition has ended the
   controller takes itself off the mixer (a Player's update is its plain fast path again). The root-motion delta of a :class:`~skeletal.playback.rootmotion.RootMotion`
   on the mixer gets the same treatment: the old velocity's excess fades out (smootherstep).

The extra WORLD pass is the price of staying outside the kernels; fused into
``playback.kernels.update`` (a stage between BLEND and WORLD reading the stage's arrays from the job)
it disappears. A :class:`~skeletal.Crowd`'s wide path keeps its poses in SIMD lanes, so it is
refused here for now.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import SkeletalError
from .. import kernels as K
from .inertia_kernels import C_KEPT
from .inertialize import BLENDS, Inertializer, pose_velocity

# The mixer, its crowd and root motion are not imported here (the mixer imports this module: no cycle);
# ``mixer`` below is a skeletal.Mixer (or Player's mixer), found by what it has.


class MixerInertialization:
    """The mixer controller that applies an :class:`Inertializer` to a mixer's ``local_pose`` after
    each update (made by the first :func:`inertialized_crossfade` on a mixer; ``mixer._inertialization``)."""

    def __init__(self, mixer: Any):
        if hasattr(mixer, "_wide_ok"):  # a Crowd: its wide path keeps the poses in SIMD lanes
            raise SkeletalError("inertialized crossfades are not available on a Crowd yet (use blend='linear')")
        self.mixer = mixer
        self.stage = Inertializer(mixer.count, len(mixer.rig))
        self.root_velocity = np.zeros((mixer.count, 3))  # shown (dx, dz, dyaw) per second
        self.root_offset = np.zeros((mixer.count, 3))  # old minus new root velocity at the switch
        self.root_clock = np.zeros((mixer.count, 2))  # elapsed, duration (0: no root transition)
        self.root_pending = np.zeros(mixer.count, np.bool_)
        self.frames_posed = 0  # updates whose pose this stage changed (for measurements)
        mixer.__dict__["_inertialization"] = self  # (not through __setattr__: no job depends on it)

    def before_update(self, dt: float) -> None:
        pass

    def after_update(self, dt: float) -> None:
        mixer = self.mixer
        changed = self.stage.apply(mixer.local_pose, dt)
        if changed:
            self.frames_posed += 1
            mixer._run(0.0, K.WORLD)
        self._root_motion(dt)
        if not changed and not self.stage.running.any() and not self.root_pending.any() and not self.root_clock[:, 1].any():
            # every transition has ended: off the mixer until the next switch (its plain, fast update
            # again); the next switch finds the velocity by looking ahead (shown pose = mixer pose then)
            self.stage.clock[:, C_KEPT] = 0.0
            mixer.controllers = [c for c in mixer.controllers if c is not self]  # a new list: the mixer may be iterating the old one

    def _root_motion(self, dt: float) -> None:
        root = _root_motion_of(self.mixer)
        if root is None or dt <= 0:
            return
        delta = root.delta
        pending = self.root_pending
        if pending.any():
            self.root_offset[pending] = self.root_velocity[pending] - delta[pending] / dt
            pending[:] = False
        active = self.root_clock[:, 1] > 0
        if active.any():
            clock = self.root_clock
            clock[active, 0] += dt
            u = np.minimum(clock[:, 0] / np.where(active, clock[:, 1], 1.0), 1.0)
            keep = np.where(active, 1.0 - u * u * u * (10.0 - 15.0 * u + 6.0 * u * u), 0.0)  # 1 - smootherstep
            delta += self.root_offset * (keep * dt)[:, None]
            clock[u >= 1.0] = 0.0
        self.root_velocity[:] = delta / dt

    def switch(self, rows: np.ndarray, source: np.ndarray, velocity: np.ndarray, duration: float, blend: str,
               options: dict) -> None:
        """After the mixer switched the selected instances: the target is the pose it shows now."""
        self.stage.switch(self.mixer.local_pose[rows], duration, blend=blend, source=source, source_velocity=velocity,
                          instances=rows, **options)
        self.stage.apply(self.mixer.local_pose, 0.0)  # the switch's moment: the source pose again
        self.mixer._run(0.0, K.WORLD)
        if _root_motion_of(self.mixer) is not None:
            self.root_pending[rows] = True
            self.root_clock[rows] = (0.0, duration)
        # last (after root motion, which sets the delta this adjusts), in a new list: a controller (a
        # state machine) may be switching from inside the mixer's loop over the old one
        self.mixer.controllers = [c for c in self.mixer.controllers if c is not self] + [self]


def _root_motion_of(mixer: Any) -> Any:
    """The mixer's :class:`~skeletal.playback.rootmotion.RootMotion` controller (the one with motion
    curves and a per-update delta), or None."""
    for controller in mixer.controllers:
        if hasattr(controller, "curves") and hasattr(controller, "delta"):
            return controller
    return None


def inertialized_crossfade(mixer: Any, clip: Any, duration: float, blend: str, *, layer: int = 0,
                           sync: bool = False, instances: Any = None,
                           extrapolation_halflife: float = 0.1, **play_options: Any) -> int:
    """``mixer.crossfade(clip, duration, blend=...)`` for ``blend`` other than "linear": switch the
    layer to ``clip`` at once (only it is sampled from now on) and fade out the difference from the
    pose shown before over ``duration`` seconds (see the module docstring). Returns the slot.

    >>> player.crossfade("run", 0.3, blend="inertialize")        # doctest: +SKIP
    """
    if blend not in BLENDS:
        raise SkeletalError(f"blend {blend!r} is not one of ('linear', {', '.join(map(repr, BLENDS))})")
    if not (duration > 0):
        return mixer.crossfade(clip, 0.0, layer=layer, sync=sync, instances=instances, **play_options)
    if play_options.pop("warp", False) or play_options.pop("snapshot", False):
        raise SkeletalError("warp and snapshot are linear-crossfade options; an inertialized switch has no fade to warp")
    hook = mixer.__dict__.get("_inertialization")
    if hook is None:
        hook = MixerInertialization(mixer)
    rows = np.arange(mixer.count)[slice(None) if instances is None else instances]
    rows = np.atleast_1d(rows).astype(np.int64)
    source, velocity = hook.stage.shown(rows)
    unknown = hook.stage.clock[rows, C_KEPT] < 2  # fewer than two shown poses kept (a new stage)
    if unknown.any():
        source[unknown] = mixer.local_pose[rows[unknown]]
        velocity[unknown], root_velocity = _velocity_ahead(mixer, rows[unknown])
        if root_velocity is not None:
            hook.root_velocity[rows[unknown]] = root_velocity
    slot = mixer.crossfade(clip, 0.0, layer=layer, sync=sync, instances=instances, **play_options)
    mixer.evaluate()
    hook.switch(rows, source, velocity, float(duration), blend, {"extrapolation_halflife": extrapolation_halflife})
    return slot


def _velocity_ahead(mixer: Any, rows: np.ndarray, step: float = 1.0 / 60.0) -> tuple[np.ndarray, np.ndarray | None]:
    """The velocity (n, J, 9) of the mixer's current motion for instances ``rows``: its pose ``step``
    seconds ahead (the update kernel's ADVANCE and BLEND stages) minus its pose now, the clocks, fades
    and event fields put back after (used when no earlier shown pose was kept); and the root-motion
    velocity (n, 3) of a RootMotion on the mixer over the same step (None without one). A step of one
    60 Hz frame: the first frame after the switch then moves as the old motion would have (a clip
    keyed at 30 Hz changes velocity at its keys; an instantaneous velocity would carry the key's
    step on)."""
    saved = (mixer.fs.copy(), mixer.ist.copy(), mixer.cursors.copy())
    now = mixer.local_pose[rows].copy()
    mixer._run(step, K.ADVANCE | K.BLEND)
    ahead = mixer.local_pose[rows].copy()
    root = _root_motion_of(mixer)
    root_velocity = None
    if root is not None:
        delta = root.delta.copy()
        root.after_update(step)
        root_velocity = root.delta[rows] / step
        root.delta = delta
    mixer.fs[...], mixer.ist[...], mixer.cursors[...] = saved
    mixer._run(0.0, K.BLEND | K.WORLD)
    return pose_velocity(now, ahead, step), root_velocity
