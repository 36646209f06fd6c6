"""Inertialized switches on a :class:`~skeletal.Mixer` (and so a :class:`~skeletal.Player`, a
:class:`~skeletal.Crowd`, a state machine and a blend space).

How it plugs into the frame (the only change to the mixer is two lines at the top of
``Mixer.crossfade``, which hand ``blend != "linear"`` to :func:`inertialized_crossfade`):

1. the switch (:func:`inertialized_switch`): the pose shown now and its velocity (the shown motion
   one 60 Hz step ahead, transitions still running included, the switched instances alone:
   :func:`_shown_ahead`) become the source; the change is made at once (``crossfade(clip, 0)``: one clip sampled from now on; a
   blend space's weights jumped); the instances' rows of the mixer's
   :class:`~skeletal.playback.inertia_kernels.InertiaArrays` are set (mode, PENDING, source, its
   velocity, blend time) and the mixer is evaluated: the update kernel samples the target, keeps it
   as the anchor and shows the source.
2. every update: the update kernel's inertialization stage, between blending and world rows, adds
   the decaying offsets to the just-sampled pose of the instances in a transition
   (:func:`~skeletal.playback.inertia_kernels.inertialize_instance`); nothing runs in Python, so a
   Player's update stays its one compiled call. A Crowd's wide path poses an instance in a
   transition on its own while it lasts (:func:`skeletal.playback.wide.update_wide`).
3. root motion: with a :class:`~skeletal.playback.rootmotion.RootMotion` on the mixer, a controller
   (:class:`RootInertialization`, on the mixer only while a root transition runs) makes the old
   root velocity's excess fade out (smootherstep), so the character does not slide or jump.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from numba import njit

from ..._compile import serial_variant
from ...errors import SkeletalError
from .. import kernels as K
from ..jobs import field
from ..inertia_kernels import (BLEND_CODES, K_DURATION, K_ELAPSED, K_HALFLIFE, PENDING, SPRING, ST_MODE, ST_PHASE,
                               ST_REPOSED, InertiaArrays)
from .inertialize import BLENDS, pose_velocity

# The mixer, its crowd and root motion are not imported here (the mixer imports this module: no cycle);
# ``mixer`` below is a skeletal.Mixer (or Player's mixer), found by what it has.


class RootInertialization:
    """The mixer controller that fades a switched instance's old root-motion velocity into the new one
    (made by the first inertialized switch on a mixer with root motion; ``mixer._root_inertialization``;
    on the mixer's controllers only while a root transition runs)."""

    def __init__(self, mixer: Any):
        self.mixer = mixer
        self.root_velocity = np.zeros((mixer.count, 3))  # shown (dx, dz, dyaw) per second
        self.root_offset = np.zeros((mixer.count, 3))  # old minus new root velocity at the switch
        self.root_clock = np.zeros((mixer.count, 2))  # elapsed, duration (0: no root transition)
        self.root_pending = np.zeros(mixer.count, np.bool_)
        self.tracked = False  # root_velocity holds the shown velocity (an update ran since attaching)
        mixer.__dict__["_root_inertialization"] = self  # (not through __setattr__: no job depends on it)

    def before_update(self, dt: float) -> None:
        pass

    def after_update(self, dt: float) -> None:
        root = _root_motion_of(self.mixer)
        if root is not None and dt > 0:
            fade_root_delta(self.root_velocity, self.root_offset, self.root_clock, self.root_pending, root.delta, dt)
            self.tracked = True
        if root is None or not (self.root_pending.any() or self.root_clock[:, 1].any()):
            # every root transition has ended: off the mixer until the next switch; the next one finds the
            # old velocity by looking ahead
            self.tracked = False
            self.mixer.controllers = [c for c in self.mixer.controllers if c is not self]  # a new list: the mixer may be iterating the old one

    def switch(self, rows: np.ndarray, velocity: np.ndarray, duration: float) -> None:
        """The selected instances switched; ``velocity`` (n, 3) their root velocity before."""
        self.root_velocity[rows] = velocity
        self.root_pending[rows] = True
        self.root_clock[rows] = (0.0, duration)
        # last (after root motion, which sets the delta this adjusts), in a new list: a controller (a
        # state machine) may be switching from inside the mixer's loop over the old one
        self.mixer.controllers = [c for c in self.mixer.controllers if c is not self] + [self]


def fade_root_delta(velocity: np.ndarray, offset: np.ndarray, clock: np.ndarray, pending: np.ndarray,
                    delta: np.ndarray, dt: float) -> None:
    """Fade switched instances' old root-motion velocity into the new one, in place: ``delta`` (B, 3)
    this update's root motion (dx, dz, dyaw), ``velocity`` (B, 3) the shown velocity per second (set
    from the adjusted delta), ``offset`` (B, 3) old minus new velocity, taken at the first update after
    a switch (``pending`` (B,) bool, cleared), ``clock`` (B, 2) elapsed and duration (0: none running),
    decayed by 1 - smootherstep of the elapsed fraction."""
    if pending.any():
        offset[pending] = velocity[pending] - delta[pending] / dt
        pending[:] = False
    active = clock[:, 1] > 0
    if active.any():
        clock[active, 0] += dt
        u = np.minimum(clock[:, 0] / np.where(active, clock[:, 1], 1.0), 1.0)
        keep = np.where(active, 1.0 - u * u * u * (10.0 - 15.0 * u + 6.0 * u * u), 0.0)  # 1 - smootherstep
        delta += offset * (keep * dt)[:, None]
        clock[u >= 1.0] = 0.0
    velocity[:] = delta / dt


def _root_motion_of(mixer: Any) -> Any:
    """The mixer's :class:`~skeletal.playback.rootmotion.RootMotion` controller (the one with motion
    curves and a per-update delta), or None."""
    for controller in mixer.controllers:
        if hasattr(controller, "curves") and hasattr(controller, "delta"):
            return controller
    return None


def _check(blend: str, extrapolation_halflife: float) -> None:
    if blend not in BLENDS:
        raise SkeletalError(f"blend {blend!r} is not one of ('linear', {', '.join(map(repr, BLENDS))})")
    if not (extrapolation_halflife > 0 and np.isfinite(extrapolation_halflife)):
        raise SkeletalError(f"extrapolation_halflife must be a positive number, got {extrapolation_halflife}")


def inertialized_switch(mixer: Any, rows: np.ndarray, duration: float, blend: str, change: Callable[[], Any], *,
                        extrapolation_halflife: float = 0.1) -> Any:
    """Make ``change()`` (a change of what the selected instances ``rows`` (n,) play, made at once: a
    crossfade of length 0, a blend space's new weights) an inertialized switch: the difference from
    the pose and velocity shown before fades out over ``duration`` seconds, the way ``blend`` says
    ("inertialize": Bollo's quintic; "inertialize_spring": a critically damped spring of halflife
    ``duration / 5``; "dead_blend": the old pose carried on by its velocity, halving every
    ``extrapolation_halflife`` seconds, blended out by a smoothstep). Returns what ``change`` returned.

    >>> inertialized_switch(mixer, np.array([0, 3]), 0.3, "inertialize",
    ...                     lambda: mixer.crossfade("run", 0.0, instances=[0, 3]))   # doctest: +SKIP
    """
    _check(blend, extrapolation_halflife)
    if not (duration > 0 and np.isfinite(duration)):
        raise SkeletalError(f"an inertialized switch needs a positive, finite duration, got {duration}")
    if mixer._inertia.count == 0:
        mixer._inertia = InertiaArrays(mixer.count, len(mixer.rig))  # (a frame input: the next call rebuilds the job)
    rows = np.atleast_1d(np.asarray(rows)).astype(np.int64)
    source = _made_pose(mixer, rows)  # the pose shown now (a copy)
    velocity, root_velocity = _velocity_ahead(mixer, rows)
    root = _root_motion_of(mixer)
    hook = mixer.__dict__.get("_root_inertialization")
    if root is not None and hook is not None and hook in mixer.controllers and hook.tracked:
        root_velocity = hook.root_velocity[rows]  # a root transition is running: the velocity it shows
    result = change()
    arrays = mixer._inertia
    code = BLEND_CODES[blend]
    arrays.state[rows, ST_MODE] = code
    arrays.state[rows, ST_PHASE] = PENDING
    arrays.state[rows, ST_REPOSED] = 0
    arrays.clock[rows, K_ELAPSED] = 0.0
    arrays.clock[rows, K_DURATION] = 2.0 * duration if code == SPRING else duration
    arrays.clock[rows, K_HALFLIFE] = extrapolation_halflife
    arrays.source[rows] = source
    arrays.velocity[rows] = velocity
    mixer.evaluate()  # the update kernel: the target sampled now becomes the anchor; the source is shown
    if root is not None:
        if hook is None:
            hook = RootInertialization(mixer)
        hook.switch(rows, root_velocity, float(duration))
    return result


def inertialized_crossfade(mixer: Any, clip: Any, duration: float, blend: str, *, layer: int = 0,
                           sync: bool = False, instances: Any = None,
                           extrapolation_halflife: float = 0.1, **play_options: Any) -> int:
    """``mixer.crossfade(clip, duration, blend=...)`` for ``blend`` other than "linear": switch the
    layer to ``clip`` at once (only it is sampled from now on) and fade out the difference from the
    pose shown before over ``duration`` seconds (see the module docstring). Returns the slot.

    >>> player.crossfade("run", 0.3, blend="inertialize")        # doctest: +SKIP
    """
    _check(blend, extrapolation_halflife)
    if not (duration > 0):
        return mixer.crossfade(clip, 0.0, layer=layer, sync=sync, instances=instances, **play_options)
    if play_options.pop("warp", False) or play_options.pop("snapshot", False):
        raise SkeletalError("warp and snapshot are linear-crossfade options; an inertialized switch has no fade to warp")
    rows = np.arange(mixer.count)[slice(None) if instances is None else instances]
    return inertialized_switch(
        mixer, rows, float(duration), blend,
        lambda: mixer.crossfade(clip, 0.0, layer=layer, sync=sync, instances=instances, **play_options),
        extrapolation_halflife=extrapolation_halflife)


def _made_pose(mixer: Any, rows: np.ndarray) -> np.ndarray:
    """The pose (n, J, 10) float64 of instances ``rows`` as the mixer's update made it (a copy): a
    :class:`~skeletal.playback.locomotion.warping.Warping`'s last change undone (it is made again after
    every update; its pose against the clips' pose ahead would count the warp as velocity)."""
    warping = mixer.__dict__.get("_warping")
    if warping is not None:
        return np.asarray(warping.unwarped_pose(rows))
    return np.asarray(mixer.local_pose[rows], np.float64)


def _velocity_ahead(mixer: Any, rows: np.ndarray, step: float = 1.0 / 60.0) -> tuple[np.ndarray, np.ndarray | None]:
    """The velocity (n, J, 9) of the motion the mixer shows for instances ``rows``: its pose ``step``
    seconds ahead (the update kernel's clock, blend and inertialization stages, run for those
    instances alone by :func:`_shown_ahead`, which puts their state back) minus its pose now, and the
    root-motion velocity (n, 3) of a RootMotion on the mixer over the same step (None without one):
    the rows' clocks stepped on copies and read by
    :meth:`~skeletal.playback.rootmotion.RootMotion.delta_of`. The other instances and every output
    stay untouched, so the cost grows with the instances switched, not with the mixer. A step of one
    60 Hz frame: the first frame after the switch then moves as the old motion would have (a clip
    keyed at 30 Hz changes velocity at its keys; an instantaneous velocity would carry the key's step
    on)."""
    now = _made_pose(mixer, rows)
    ahead = np.empty_like(now)
    _shown_ahead(mixer.current_frame().job, rows, float(step), ahead)
    root = _root_motion_of(mixer)
    if root is None:
        return pose_velocity(now, ahead, step), None
    fs, ist = mixer.fs[rows].copy(), mixer.ist[rows].copy()
    enabled = (ist[:, :, K.I_FLAGS] & K.FLAG_ENABLED) != 0
    fs[~enabled, K.F_EFFECTIVE] = 0.0  # as the clock step leaves a stopped action
    _advance_pairs(mixer, fs, ist, *np.nonzero(enabled), float(step))
    return pose_velocity(now, ahead, step), root.delta_of(fs, ist) / step


def _advance_pairs(mixer: Any, fs: np.ndarray, ist: np.ndarray, rows: np.ndarray, slots: np.ndarray, dt: float) -> None:
    """Step the clocks of the actions ``(rows[i], slots[i])`` of ``fs`` (n, S, NF) and ``ist`` (n, S,
    NI) (rows of the mixer's clock arrays, or copies) by ``dt`` seconds, in place: what the update
    kernel's clock stage does to them, in one serial call over those actions alone."""
    if not len(rows):
        return
    pair_fs, pair_ist = fs[rows, slots][None], ist[rows, slots][None]  # one "instance" whose actions are the pairs
    args = (pair_fs, pair_ist, mixer.slot_clip[slots], mixer.clipset.clip_table, mixer.clipset.duration,
            mixer.clipset.marker_time, dt)
    if mixer._cold:  # kernels compiling in the background: the clock in numpy
        from .. import numpy_frame

        numpy_frame.advance(*args)
    else:
        serial_variant(K.advance)(*args)
    fs[rows, slots] = pair_fs[0]
    ist[rows, slots] = pair_ist[0]


@njit(cache=True)
def _shown_ahead(job, rows, step, ahead):
    """The pose (n, N, 10) of instances ``rows`` (n,) ``step`` seconds ahead, into ``ahead``: each one's
    clocks advanced, its actions blended and its running transition's offsets added, as the update
    kernel would (:func:`skeletal.playback.kernels._evaluate_instance`,
    :func:`~skeletal.playback.kernels.inertia_stage`), then its clocks, pose, morph weights and
    transition put back as they were. Serial, on the job's scratch row 0; needs the job's
    inertialization rows (the mixer's ``InertiaArrays`` made)."""
    fs, ist, cursors = field(job, "fs"), field(job, "ist"), field(job, "cursors")
    pose, morph, layer_weight = field(job, "pose"), field(job, "morph"), field(job, "layer_weight")
    slot_clip, clip_table = field(job, "slot_clip"), field(job, "clip_table")
    clip_duration, marker_time = field(job, "clip_duration"), field(job, "marker_time")
    state, clock, offset = field(job, "inert_state"), field(job, "inert_clock"), field(job, "inert_offset")
    x, v, joints, anchor = field(job, "inert_x"), field(job, "inert_v"), field(job, "inert_joints"), field(job, "inert_anchor")
    for i in range(rows.shape[0]):
        b = rows[i]
        kept_fs, kept_ist, kept_cursors, kept_pose, kept_morph = fs[b].copy(), ist[b].copy(), cursors[b].copy(), pose[b].copy(), morph[b].copy()
        kept_state, kept_clock, kept_offset = state[b].copy(), clock[b].copy(), offset[b].copy()
        kept_x, kept_v, kept_joints, kept_anchor = x[b].copy(), v[b].copy(), joints[b].copy(), anchor[b].copy()
        K._advance_instance(b, step, fs, ist, slot_clip, clip_table, clip_duration, marker_time)
        K._evaluate_instance(b, 0, job, layer_weight, pose, morph)
        K.inertia_stage(b, 0, job, step, pose)
        for n in range(pose.shape[1]):
            for c in range(10):
                ahead[i, n, c] = pose[b, n, c]
        fs[b], ist[b], cursors[b], pose[b], morph[b] = kept_fs, kept_ist, kept_cursors, kept_pose, kept_morph
        state[b], clock[b], offset[b] = kept_state, kept_clock, kept_offset
        x[b], v[b], joints[b], anchor[b] = kept_x, kept_v, kept_joints, kept_anchor


def switch_many(mixer: Any, clips: Any, duration: float, blend: str = "dead_blend", *, offsets: Any = 0.0,
                instances: Any = None, layer: int = 0, extrapolation_halflife: float = 0.1) -> None:
    """Switch many instances, each to its own clip, in one inertialized switch: what one
    ``mixer.crossfade(clip, duration, blend=blend, offset=..., restart=True, instances=...)`` call per
    target clip does, with the same result, but with the shown pose's velocity looked ahead once and
    the mixer evaluated once for all of them (each crossfade call does both for the whole mixer).

    ``clips``: one clip (name, index or Clip) for every selected instance, or a sequence with one per
    selected instance; ``offsets``: the start times (seconds), a scalar or one per instance;
    ``instances``: the selection (default all). Each target starts afresh at its offset (as
    ``restart=True``), at speed and weight 1, looping; the layer's other actions stop at once and
    their pose fades out the way ``blend`` says. ``blend`` "linear" makes the linear crossfades, one
    call per clip.

    >>> switch_many(crowd, ["run_forward", "walk_forward"], 0.2, offsets=[0.4, 1.1],
    ...             instances=[3, 17])                                  # doctest: +SKIP
    """
    rows = np.arange(mixer.count)[slice(None) if instances is None else instances]
    rows = np.atleast_1d(rows).astype(np.int64)
    if isinstance(clips, (str, int, np.integer)) or hasattr(clips, "tracks"):
        clips = [clips] * len(rows)
    clips = list(clips)
    if len(clips) != len(rows):
        raise SkeletalError(f"switch_many: {len(clips)} clips for {len(rows)} instances (give one per instance)")
    start = np.broadcast_to(np.asarray(offsets, np.float64), rows.shape).copy()
    if not np.isfinite(start).all():
        raise SkeletalError("switch_many: offsets must be finite")
    if not len(rows):
        return
    names: dict[Any, int] = {}
    slots = np.empty(len(rows), np.int64)
    for i, c in enumerate(clips):  # every slot made before any array is read (a new slot grows them)
        key = c if isinstance(c, (str, int, np.integer)) else id(c)
        if key not in names:
            names[key] = mixer.slot(c, layer)
        slots[i] = names[key]
    if blend == "linear" or not (duration > 0):
        for s in np.unique(slots):
            sel = slots == s
            mixer.crossfade(int(mixer.slot_clip[s]), float(max(duration, 0.0)), layer=layer, blend=blend,
                            offset=start[sel], restart=True, instances=rows[sel])
        return
    _check(blend, extrapolation_halflife)
    inertialized_switch(mixer, rows, float(duration), blend, lambda: _restart_at(mixer, rows, slots, start, layer),
                        extrapolation_halflife=extrapolation_halflife)


def _restart_at(mixer: Any, rows: np.ndarray, slots: np.ndarray, start: np.ndarray, layer: int) -> None:
    """The change of :func:`switch_many`, made at once: instance ``rows[i]`` plays slot ``slots[i]``
    from ``start[i]`` at full weight and the layer's other actions stop, as
    ``crossfade(clip, 0.0, offset=..., restart=True)`` would for each clip; the targets' clocks
    refreshed in one zero-length step."""
    fs, ist = mixer.fs, mixer.ist
    for s in np.flatnonzero(mixer.slot_layer == layer):
        sel = rows[slots != s]
        sel = sel[(ist[sel, s, K.I_FLAGS] & K.FLAG_ENABLED) != 0]
        if sel.size:
            mixer._start_fade(int(s), sel, mixer.envelope(int(s))[sel], 0.0, 0.0)
    if layer == 0:
        mixer._refade_snapshot(rows, 0.0)
    for s in np.unique(slots):
        r = rows[slots == s]
        fs[r, s, K.F_SPEED] = 1.0
        fs[r, s, K.F_WEIGHT] = 1.0
        fs[r, s, K.F_REPETITIONS] = np.inf
        ist[r, s, K.I_LOOP] = K.LOOP_NAMES["repeat"]
        fs[r, s, K.F_TIME] = start[slots == s]
        ist[r, s, K.I_LOOP_COUNT] = 0
        ist[r, s, K.I_FLAGS] = K.FLAG_ENABLED
        mixer._start_fade(int(s), r, 1.0, 1.0, 0.0)
    # the targets' sample times and weights: a zero-length step of their clocks (event outputs kept)
    events = ist[rows, slots, K.I_EV_LOOPS:K.I_EV_MARKERS + 1].copy()
    _advance_pairs(mixer, fs, ist, rows, slots, 0.0)
    ist[rows, slots, K.I_EV_LOOPS:K.I_EV_MARKERS + 1] = events
