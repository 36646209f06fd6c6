"""Procedural animation stages run after playback: foot placement on uneven ground, look-at, jiggle.

A :class:`Procedural` attaches to a :class:`~skeletal.Player`, :class:`~skeletal.Mixer` or
:class:`~skeletal.Crowd` and runs its stages at the end of every ``update(dt)``, after the clips are
blended (and after the mixer's own IK stages), then rebuilds the world matrices and skin palettes,
so renderers and exporters see the corrected pose. Every stage works on the whole batch at once
(instance axis first, numba kernels); a Player is a batch of one.

Stages, in the order they run:

* :meth:`Procedural.foot_placement` - legs of a walking clip follow a ground (height function,
  height field or spec string, see :mod:`.ground`): per frame and instance, the ground under each
  foot; the pelvis lowered (through a critically damped spring) so the lower foot stays reachable;
  two-bone IK (:func:`skeletal.ik.two_bone_one`) per leg so the foot keeps its animated lift over
  the ground; the foot turned to the ground normal, weighted by its contact; a planted foot's
  world position locked from touchdown to lift-off. Contact weights come
  from the clips themselves (:func:`.contacts.detect_contacts`), read at each action's clip time
  and blended by the actions' weights.
* :meth:`Procedural.look_at` - a neck + head chain (found by name) aims at a target point that is
  smoothed by a critically damped spring (:mod:`.springs`), with per-joint angle limits
  (:func:`skeletal.ik.aim` kernels).
* :meth:`Procedural.jiggle` - spring bones on chains, e.g. a tail (:class:`.springs.JiggleChains`).

This module is the driver (:class:`Procedural`, its frame plan and the fused frame); the stages live in
:mod:`.footplacement`, :mod:`.lookat` and :mod:`.jiggle` (what they share in :mod:`.procstage`), and
their names stay importable from here.

Frames: the stages see the character in *world* space through a placement per instance (``place``:
position and heading about +Y; the model is Y up, its floor at model y = ``floor``); grounds and
look-at targets are world coordinates, the pose stays model space.

>>> player = skeletal.Player(skeletal.demo.demo_asset())               # doctest: +SKIP
>>> player.play("walk")                                                 # doctest: +SKIP
>>> proc = Procedural(player)                                           # doctest: +SKIP
>>> feet = proc.foot_placement("slope:angle=8")                         # doctest: +SKIP
>>> proc.look_at((0.5, 1.6, 2.0))                                       # doctest: +SKIP
>>> player.update(1 / 60)   # blended, then feet on the slope, head turned  # doctest: +SKIP
"""
from __future__ import annotations

from operator import attrgetter
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Sequence

import numpy as np
import numpy.typing as npt
from numba import njit

from .._aligned import aligned_zeros
from .._compile import serial_variant
from ..errors import SkeletalError
from ..anim.pose import palette_batch, world_matrices, world_palettes_34
from . import kernels as K
from .frame import Frame
from .jobs import FootJob, LookJob, entry, field, fused_job
from .contacts import find_legs as find_legs
# the stages, and what they share, live in their own modules; every name this module held stays importable
# from here (those it does not use re-exported as "x as x": tests and other modules read them here)
from .procstage import SERIAL_BELOW, PlanInput
from .procstage import _NAN3 as _NAN3, _LastFrame as _LastFrame, _all_rows as _all_rows, _drop_plan as _drop_plan
from .procstage import _palette_rows as _palette_rows, _rows as _rows
from .footcontact import _contact_one as _contact_one
from .footplacement import FootPlacement, foot_kernel
from .footplacement import _foot_chunks as _foot_chunks
from .footrange import PLANTED as PLANTED
from .footframe import FootFrame
from .lookat import LookAt, find_head_chain as find_head_chain, look_kernel
from .lookat import _ancestors as _ancestors
from .jiggle import Jiggle

if TYPE_CHECKING:
    from .crowd import Crowd
    from .mixer import Mixer
    from .player import Player

_FLOAT64 = np.dtype(np.float64)


def _worlds(parents, pose, world) -> None:
    """World matrices of every instance (the serial twin for one)."""
    world_matrices(parents, pose, out=world)


def _mixer_of(target):
    mixer = getattr(target, "mixer", target)
    if not hasattr(mixer, "local_pose") or not hasattr(mixer, "controllers"):
        raise SkeletalError(f"cannot attach procedural stages to {type(target).__name__} (give a Player, Mixer or Crowd)")
    return mixer


_ALL = K.ALL
_FUSED: dict = {}


def _frame_py(frame, ik, dt):
    """The planned frame of one character (:meth:`Procedural.fused_frame`) on a
    :class:`~skeletal.playback.jobs.FusedJob` (its jobs and the stages' fixed arguments) and ``ik`` (the
    mixer's IKJob or None): the mixer's serial update kernel (every stage), then (no event possible)
    foot placement and look-at. Returns 1 when an event may have happened (the stages not run: events
    come first), -1 for a non-finite look-at target, else 0. Compiled by :func:`_fused_frame` (its
    callees are serial variants made at run time)."""
    if _UPDATE_SERIAL(frame.update, ik, dt, _ALL) > 0:  # noqa: F821 (set by _fused_frame)
        return 1
    _FOOT_SERIAL(frame.foot, 0, field(frame, "chunks"), None)  # noqa: F821
    if not look_kernel(frame.look, field(frame, "mode"), field(frame, "omega"), dt, field(frame, "keep")):
        return -1
    return 0


def _fused_frame():
    """:func:`_frame_py` compiled (cached on disk), its callees' serial variants made first."""
    fn = _FUSED.get("frame")
    if fn is None:
        g = globals()
        g["_UPDATE_SERIAL"] = serial_variant(K.update)
        g["_FOOT_SERIAL"] = serial_variant(foot_kernel)
        fn = _FUSED["frame"] = njit(cache=True)(_frame_py)
    return fn


class _FootCall(NamedTuple):
    """Foot placement's compiled call in a plan: ``call(job, 0, chunks, None)``."""

    call: Callable[..., Any]
    job: FootJob
    chunks: int


class _LookCall(NamedTuple):
    """Look-at's compiled call in a plan: ``call(job, mode, omega, dt, keep)`` (False: a non-finite target)."""

    call: Callable[..., Any]
    job: LookJob
    mode: int
    omega: float
    keep: bool


class _FusedCall(NamedTuple):
    """One character's whole planned frame as one compiled call: ``call(job, ik, dt)`` (see _frame_py; the
    stages' fixed arguments are the job's fields, ``ik`` the mixer's IKJob or None)."""

    call: Callable[..., Any]
    job: Any
    ik: Any


class _Plan:
    """A Procedural's frame as compiled calls, valid while the mixer keeps ``frame`` and dt stays ``dt``
    (None: not plannable while this frame stays)."""

    __slots__ = ("dt", "frame", "foot", "look", "fused", "before_world", "one_call")

    def __init__(self, dt: float | None, frame: Frame, foot: _FootCall | None = None, look: _LookCall | None = None,
                 fused: _FusedCall | None = None, before_world: bool = False, one_call: FootFrame | None = None):
        self.dt = dt
        self.frame = frame
        self.foot = foot
        self.look = look
        self.fused = fused
        # foot placement alone, on a mixer without IK stages: the update may skip its world pass and the
        # stage build the world rows and palettes itself (builds_world_for; foot_kernel's phase 3)
        self.before_world = before_world
        # and on one thread, a mixer that collects no events: the update's clocks and blend and the stage
        # in one compiled call (footframe.py; fused_frame)
        self.one_call = one_call


def placement_matrices(positions, headings, count: int) -> np.ndarray:
    """(count, 4, 4) model -> world matrices: a turn of ``headings`` radians about +Y (counter-
    clockwise seen from above: +Z turns toward +X), then a move to ``positions`` (count, 3) or (3,)."""
    pos = np.broadcast_to(np.asarray(positions, np.float64), (count, 3))
    yaw = np.broadcast_to(np.asarray(headings, np.float64), (count,))
    if not (np.all(np.isfinite(pos)) and np.all(np.isfinite(yaw))):
        raise SkeletalError("placement positions and headings must be finite")
    c, s = np.cos(yaw), np.sin(yaw)
    m = np.zeros((count, 4, 4))
    m[:, 0, 0], m[:, 0, 2], m[:, 2, 0], m[:, 2, 2] = c, s, -s, c
    m[:, 1, 1] = 1.0
    m[:, :3, 3] = pos
    m[:, 3, 3] = 1.0
    return m


class Procedural:
    """Procedural stages over a Player / Mixer / Crowd (see the module docstring).

    ``placement`` (B, 4, 4): where each instance stands in the world (:meth:`place`); identity by
    default. ``world`` (B, N, 4, 4) float64: the model-space world matrices after the stages.

    After a general frame the next ones are planned (:meth:`_build_plan`): while dt and the mixer's
    frame stay the same, a frame is the stages' compiled calls only -- for one character with foot
    placement and look-at, a Player's whole update is one compiled call. Assigning a setting the plan is
    built from (:class:`~skeletal.playback.procstage.PlanInput`: here ``stages``, ``enabled``,
    ``placement``, ``world``, ``mixer``; a stage's target, ground, weight array, scalars...) drops the plan;
    arrays changed in place (``weight[...]``, ``target[...]``, :meth:`place`) need nothing.

    >>> proc = Procedural(player)                                     # doctest: +SKIP
    >>> proc.foot_placement("terrain:amplitude=0.2"); proc.look_at((0.5, 1.5, 2.0))  # doctest: +SKIP
    >>> player.update(1 / 60)                                         # doctest: +SKIP
    """

    def _set_plan(self, plan: _Plan | None) -> None:
        """Assigning ``_plan`` (a new plan, or None: dropped) also sets :attr:`fused_route`."""
        self._plan_value = plan
        fused = plan.fused if plan is not None else None
        self.fused_route = None if fused is None else (plan.dt, plan.frame, fused.call, fused.job, fused.ik)

    #: the frame as compiled calls (see _build_plan); its fused call, when it has one, is also
    #: ``fused_route``: (dt, frame, call, job, ik), which a :class:`~skeletal.Player` runs itself as
    #: ``r = call(job, ik, dt)`` while its mixer's frame is ``frame`` and dt is ``dt`` (then
    #: :meth:`after_fused` when r is not 0), without :meth:`fused_frame`'s Python frames
    _plan = property(attrgetter("_plan_value"), _set_plan)
    fused_route: tuple | None

    def __init__(self, target: Player | Mixer | Crowd):
        self.mixer = _mixer_of(target)
        self.asset = self.mixer.asset
        self.rig = self.asset.rig
        self.count = self.mixer.count
        self.stages: list = []
        self.placement = placement_matrices((0.0, 0.0, 0.0), 0.0, self.count)
        world = getattr(self.mixer, "world", None)
        if (not hasattr(self.mixer, "world34") and isinstance(world, np.ndarray) and world.dtype == np.float64
                and world.shape == (self.count, len(self.rig), 4, 4) and world.flags.c_contiguous):
            self.world = world  # a float64 Player/Mixer: the stages write its world matrices in place
        else:
            self.world = aligned_zeros((self.count, len(self.rig), 4, 4))
        self.enabled = True
        self._plan: _Plan | None = None  # the frame as compiled calls (see _build_plan)
        self.mixer.controllers.append(self)

    # the settings the frame plan is built from: assigning one drops the plan (see PlanInput)
    mixer = PlanInput[Any]()
    stages = PlanInput[list]()
    placement = PlanInput[np.ndarray]()
    world = PlanInput[np.ndarray]()
    enabled = PlanInput[bool]()

    # -- set up -----------------------------------------------------------------------------

    def place(self, position: npt.ArrayLike = (0.0, 0.0, 0.0), heading: float | npt.ArrayLike = 0.0) -> None:
        """Where the instances stand: ``position`` (B, 3) or (3,) world coordinates of the model's
        origin, ``heading`` (B,) or scalar radians about +Y."""
        self.placement[...] = placement_matrices(position, heading, self.count)

    def foot_placement(self, ground: Any = "flat", **options: Any) -> "FootPlacement":
        """Add (or replace) the foot placement stage; see :class:`FootPlacement` for ``options``."""
        stage = FootPlacement(self, ground, **options)
        self._add(stage)
        return stage

    def look_at(self, target: npt.ArrayLike | None = None, **options: Any) -> "LookAt":
        """Add (or replace) the look-at stage; see :class:`LookAt`."""
        stage = LookAt(self, target, **options)
        self._add(stage)
        return stage

    def jiggle(self, chains: Sequence[Sequence[str | int]] | None = None, **options: Any) -> "Jiggle":
        """Add (or replace) spring bones on ``chains`` (joint names / indices, parent first; default:
        the chains whose names contain "tail"); ``options``: stiffness, damping, gravity, max_step
        (see :class:`.springs.JiggleChains`)."""
        stage = Jiggle(self, chains, **options)
        self._add(stage)
        return stage

    def _palette_groups(self, roots) -> tuple[bool, tuple, np.ndarray, np.ndarray]:
        """For a stage that keeps the mixer's skin palettes current itself (a float64 Player / Mixer
        whose world matrices this object shares): whether it can, (palettes, their joints, inverse
        binds), and the palette entries under each of ``roots`` as ``idx[start[g]:start[g + 1]]``."""
        mixer = self.mixer
        pal = mixer.palettes
        ok = (self.world is getattr(mixer, "world", None) and pal.dtype == np.float64 and pal.shape[2] == 4)
        if ok:
            pj = mixer.palette_joints
            arrays = (pal, pj, mixer._inverse_bind)
            groups = [np.flatnonzero(self.rig.descendants(int(r))[pj]) for r in roots]
        else:
            arrays = (np.zeros((self.count, 0, 4, 4)), np.zeros(0, np.int64), np.zeros((0, 4, 4)))
            groups = [np.zeros(0, np.int64)] * len(roots)
        idx = np.concatenate(groups).astype(np.int64)
        start = np.cumsum([0] + [len(g) for g in groups]).astype(np.int64)
        return ok, arrays, idx, start

    def _add(self, stage) -> None:
        order = {FootPlacement: 0, LookAt: 1, Jiggle: 2}
        self.stages = [s for s in self.stages if type(s) is not type(stage)] + [stage]
        self.stages.sort(key=lambda s: order.get(type(s), 3))

    def remove(self) -> None:
        """Detach from the mixer (the stages stop running)."""
        if self in self.mixer.controllers:
            self.mixer.controllers.remove(self)

    # -- per frame ----------------------------------------------------------------------------

    def before_update(self, dt: float) -> None:  # the mixer's controller protocol
        pass

    def builds_world_for(self, dt: float) -> bool:
        """Whether this frame's update may leave the world rows and palettes to :meth:`after_update`
        (the mixer's protocol for its only controller, asked after ``before_update``): a planned frame of
        foot placement alone, for this dt and the mixer's current frame. The mixer then runs its update's
        ADVANCE | BLEND stages only and sets its ``_world_skipped``."""
        plan = self._plan
        return plan is not None and plan.before_world and plan.dt == dt and plan.frame is self.mixer.frame

    def after_update(self, dt: float) -> None:
        """Run the stages on the freshly blended pose, then rebuild world matrices and palettes."""
        plan = self._plan
        mixer = self.mixer
        if mixer._world_skipped:  # the update ran without its world pass (builds_world_for)
            mixer._world_skipped = False
            if plan is not None and plan.before_world and plan.frame is mixer.frame and plan.dt == dt:
                foot = plan.foot
                foot.call(foot.job, 3, foot.chunks, None)  # type: ignore[union-attr]
                return
            mixer._run(0.0, K.WORLD)  # (the frame changed in between: the world pass, then as usual)
        # the planned frame: the same dt and the same mixer frame (any array the stages read replaced,
        # a slot or layer added, the clip set changed: a new frame) -- the stages' compiled calls only
        if plan is not None and plan.frame is self.mixer.frame:
            if plan.dt == dt:
                foot, look = plan.foot, plan.look
                if foot is not None:
                    foot.call(foot.job, 0, foot.chunks, None)
                if look is not None and not look.call(look.job, look.mode, look.omega, dt, look.keep):
                    raise SkeletalError("look-at target must be finite")
                return
            if plan.dt is None:  # not plannable while nothing changes: the general path, no planning
                if self.enabled and self.stages:
                    self.apply(dt)
                return
        if not (self.enabled and self.stages):
            return
        self.apply(dt)
        self._plan = self._build_plan(dt)  # (the one attribute whose assignment keeps the plan)

    def _build_plan(self, dt: float) -> _Plan | None:
        """After a general frame: the same frame as compiled calls with their arguments, when that is all
        it takes -- a float64 Player / Mixer whose world matrices and palettes the stages keep current
        themselves, foot placement on a built-in ground, look-at on a few characters (or without a
        target); otherwise a plan without dt: not plannable while this frame stays (no planning per
        frame), or None without a frame. Assigning a setting of this object or its stages drops the
        plan (their :class:`~skeletal.playback.procstage.PlanInput` attributes)."""
        mixer = self.mixer
        frame = mixer.frame
        if frame is None:
            return None
        never = _Plan(None, frame)
        if (not self.enabled or self.world is not getattr(mixer, "world", None)
                or mixer.local_pose.dtype != np.float64):
            return never
        foot = look = None
        for stage in self.stages:
            if type(stage) is FootPlacement and stage._ground_args[0] >= 0 and stage.palettes_current:
                job, serial, parallel = stage.last.calls
                # a few characters' serial call, or the per-frame choice of threads
                foot = _FootCall(serial, job, 1) if parallel is None else _FootCall(stage._run_parallel, job, 0)
            elif type(stage) is LookAt and self.count <= SERIAL_BELOW and stage.palettes_current:
                if stage.target is not None:
                    mode = 1 if stage.smooth_time == 0.0 else 0
                    omega = 2.0 / stage.smooth_time if stage.smooth_time > 0.0 else 0.0
                    look = _LookCall(stage._look_call, stage._look_job, mode, float(omega), bool(stage._palettes))
            else:
                return never
        fused = None
        if foot is not None and look is not None and self.count <= SERIAL_BELOW:
            # the mixer's serial update and both stages in one compiled call (see fused_frame)
            job = fused_job(frame.job, foot.job, look.job, foot.chunks, look.mode, look.omega, look.keep)
            fused = _FusedCall(entry(_fused_frame(), job, frame.ik, float(dt)), job, frame.ik)
        before_world = (foot is not None and look is None and len(self.stages) == 1 and frame.ik is None
                        and self.count > 1 and self.mixer.controllers == [self])
        one_call = FootFrame(mixer, foot.job, self.count) if before_world and foot is not None and FootFrame.fits(mixer) else None
        return _Plan(float(dt), frame, foot, look, fused, before_world, one_call)

    def fused_frame(self, dt: float) -> bool:
        """A whole frame of the mixer whose only controller this is (:meth:`skeletal.Mixer.update`, the
        clock advanced) as one compiled call when the frame is planned and fused: the mixer's update,
        then foot placement and look-at (an event still comes before the stages: the call stops after
        the update, then :meth:`after_fused`); or with foot placement alone on one thread and no events
        collected, the update's clocks and blend and the stage in one compiled call
        (:class:`~skeletal.playback.footframe.FootFrame`). False, nothing done, otherwise."""
        plan = self._plan
        if plan is None or plan.dt != dt:
            return False
        if plan.frame is not self.mixer.frame:  # (a clip set grown, an input replaced: a new frame)
            return False
        fused = plan.fused
        if fused is None:  # foot placement alone: on one thread, the update and the stage in one call
            one_call = plan.one_call
            return one_call is not None and not self.mixer.collect_events and one_call.run(dt)
        r = fused.call(fused.job, fused.ik, dt)
        if r:
            self.after_fused(r, dt)
        return True

    def after_fused(self, r: int, dt: float) -> None:
        """The rest of a frame whose fused call returned ``r`` (not 0): 1, an event may have happened
        and the stages have not run (events, then :meth:`after_update`); -1, a non-finite target."""
        if r < 0:
            raise SkeletalError("look-at target must be finite")
        mixer = self.mixer
        if mixer.collect_events:
            mixer._collect_events()
        self.after_update(dt)

    def apply(self, dt: float) -> None:
        mixer = self.mixer
        parents = self.rig.parents
        native = mixer.local_pose
        dtype = native.dtype  # ``is`` first: the common case without numpy's dtype comparison
        pose = native if (dtype is _FLOAT64 or dtype == np.float64) else native.astype(np.float64)
        world = self.world
        # whether ``world`` matches ``pose``: the mixer's own world matrices (aliased) are current
        current = world is getattr(mixer, "world", None) and pose is native
        palettes = current  # and the mixer's palettes match them
        for stage in self.stages:
            if stage.builds_world:
                stage.apply(pose, world, float(dt), current)
                palettes = palettes and stage.palettes_current
            else:
                if not current:
                    _worlds(parents, pose, world)
                    palettes = False
                stage.apply(pose, world, float(dt))
                palettes = palettes and stage.palettes_current
            current = stage.keeps_world  # the stage left ``world`` matching the pose it wrote
        if pose is not native:
            native[...] = pose
        if not current:
            _worlds(parents, pose, world)
        if not palettes:
            self._refresh_outputs()

    def _refresh_outputs(self) -> None:
        mixer = self.mixer
        if hasattr(mixer, "palette_joints") and hasattr(mixer, "world34"):  # a Crowd
            world_palettes_34(self.rig.parents, mixer._world_nodes, mixer.local_pose, mixer.palette_joints,
                               mixer.inverse_bind34, mixer.palettes, mixer.world34, mixer._world_scratch)
            return
        if mixer.world is not self.world:
            mixer.world[...] = self.world
        if len(mixer.palette_joints):
            kernel = palette_batch if self.count > SERIAL_BELOW else serial_variant(palette_batch)
            kernel(mixer.world, mixer.palette_joints, mixer._inverse_bind, mixer.palettes)
