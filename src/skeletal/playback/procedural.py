# Over 600 lines: foot placement, look-at and jiggle share the Procedural driver, its placement state and the
# stage kernels run inside the playback update.
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

import math
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Sequence

import numpy as np
import numpy.typing as npt
from numba import njit, prange

from .._compile import serial_variant
from .._threads import capped_threads, thread_count
from ..errors import SkeletalError
from ..anim.ik import (AimLimit, IN_POLE, IN_TARGET, IN_WEIGHT, SF_FORWARD, SF_UP, SI_J0, SI_J1, SI_U0, SI_U1, StageTable,
                  aim_one, two_bone_one)
from ..anim.pose import (affine_product_into, local_to_world_one, palette_batch, world_matrices, world_node_into,
                    world_palettes_34)
from . import kernels as K
from .frame import Frame
from .jobs import FootJob, LookJob, entry, field, foot_job, fused_job, look_job
from .contacts import ContactPhases, Leg, detect_contacts, find_legs
from .ground import GROUND_TERRAIN, Ground, as_ground, ground_at
from .springs import (JiggleChains, critical_spring, find_tail_chains, nlerp_identity, qmul, qnormalize,
                      quat_from_to, quat_from_world)

if TYPE_CHECKING:
    from .crowd import Crowd
    from .mixer import Mixer
    from .player import Player

_NAN3 = (np.nan, np.nan, np.nan)
_FLOAT64 = np.dtype(np.float64)

#: Batches up to this size run serial kernels (a parallel launch costs more than a few characters).
SERIAL_BELOW = 4


@njit(cache=True)
def _all_rows(parents, pose, world):
    """World rows of one pose (a plain call: the inlined row loop is compiled once, here)."""
    local_to_world_one(parents, pose, world)


@njit(cache=True)
def _rows(parents, nodes, start, stop, pose, world):
    """World rows of one pose for ``nodes[start:stop]`` (ascending, parents first)."""
    for k in range(start, stop):
        world_node_into(nodes[k], parents, pose, world)


@njit(cache=True)
def _palette_rows(world, joints, inverse_bind, idx, start, stop, out):
    """Palette entries ``idx[start:stop]`` of one pose: out[k] = world[joints[k]] @ inverse_bind[k]."""
    for i in range(start, stop):
        k = idx[i]
        affine_product_into(world[joints[k]], inverse_bind[k], out[k])


@njit(cache=True)
def look_kernel(job, mode, omega, dt, keep_palettes):
    """The look-at stage of a few instances in one call, on a :class:`~skeletal.playback.jobs.LookJob`:
    the smoothed point follows ``target`` (B, 3) world through a critically damped spring (``mode`` 0:
    step it, 1: jump to the target), goes to model space through ``placement`` (B, 4, 4) into the aim
    stage's ``inputs`` (the head's up kept toward world up, ``weight`` (B,)), then the aim chain (the
    table's one stage) is solved by :func:`skeletal.ik.aim_one`; with ``keep_palettes`` the palette
    entries ``pal_idx`` (those under the chain) of ``pal`` (B, J, 4, 4) are recomputed too. False
    (nothing done) if a target is not finite."""
    pose, world, parents, placement = field(job, "pose"), field(job, "world"), field(job, "parents"), field(job, "placement")
    stage_i, stage_f, joints, jp = field(job, "stage_i"), field(job, "stage_f"), field(job, "joints"), field(job, "jp")
    inputs, update, scratch = field(job, "inputs"), field(job, "update"), field(job, "scratch")
    target, smoothed, velocity, weight = field(job, "target"), field(job, "smoothed"), field(job, "velocity"), field(job, "weight")
    pal, pal_joints, inv_bind, pal_idx = field(job, "pal"), field(job, "pal_joints"), field(job, "inv_bind"), field(job, "pal_idx")
    for b in range(pose.shape[0]):
        for i in range(3):
            if not math.isfinite(target[b, i]):
                return False
    e = math.exp(-omega * dt)
    for b in range(pose.shape[0]):
        M = placement[b]
        for i in range(3):
            if mode == 1:
                smoothed[b, i] = target[b, i]
                velocity[b, i] = 0.0
            elif dt > 0.0:
                d = smoothed[b, i] - target[b, i]
                j = velocity[b, i] + omega * d
                smoothed[b, i] = target[b, i] + (d + j * dt) * e
                velocity[b, i] = (velocity[b, i] - omega * j * dt) * e
        px, py, pz = smoothed[b, 0] - M[0, 3], smoothed[b, 1] - M[1, 3], smoothed[b, 2] - M[2, 3]
        for i in range(3):  # world -> model: R^T (p - t); world up in model space is R's second row
            inputs[b, 0, IN_TARGET + i] = M[0, i] * px + M[1, i] * py + M[2, i] * pz
            inputs[b, 0, IN_POLE + i] = M[1, i]
        inputs[b, 0, IN_WEIGHT] = weight[b]
        # the one aim stage, called directly (not through the stage runner, which would compile every
        # solver kind with it)
        j0, j1 = stage_i[0, SI_J0], stage_i[0, SI_J1]
        sf = stage_f[0]
        row = inputs[b, 0]
        aim_one(pose[b], world[b], parents, joints[j0:j1], jp[j0:j1], (row[IN_TARGET], row[IN_TARGET + 1],
                row[IN_TARGET + 2]), (row[IN_POLE], row[IN_POLE + 1], row[IN_POLE + 2]), min(weight[b], 1.0),
                (sf[SF_FORWARD], sf[SF_FORWARD + 1], sf[SF_FORWARD + 2]), (sf[SF_UP], sf[SF_UP + 1], sf[SF_UP + 2]),
                scratch[0])
        _rows(parents, update, stage_i[0, SI_U0], stage_i[0, SI_U1], pose[b], world[b])
        if keep_palettes:
            _palette_rows(world[b], pal_joints, inv_bind, pal_idx, 0, pal_idx.shape[0], pal[b])
    return True


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


def _frame_py(frame, dt, ik, chunks, mode, omega, keep):
    """The planned frame of one character (:meth:`Procedural.fused_frame`) on a
    :class:`~skeletal.playback.jobs.FusedJob`:
    the mixer's serial update kernel (every stage), then (no event possible) foot placement and
    look-at. Returns 1 when an event may have happened (the stages not run: events come first), -1
    for a non-finite look-at target, else 0. Compiled by :func:`_fused_frame` (its callees are
    serial variants made at run time)."""
    if _UPDATE_SERIAL(frame.update, ik, dt, _ALL) > 0:  # noqa: F821 (set by _fused_frame)
        return 1
    _FOOT_SERIAL(frame.foot, 0, chunks)  # noqa: F821
    if not look_kernel(frame.look, mode, omega, dt, keep):
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
    """Foot placement's compiled call in a plan: ``call(job, 0, chunks)``."""

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
    """One character's whole planned frame as one compiled call: ``call(job, dt, *args)`` (see _frame_py)."""

    call: Callable[..., Any]
    job: Any
    args: tuple


class _Plan:
    """A Procedural's frame as compiled calls, valid while the mixer keeps ``frame`` and dt stays ``dt``
    (None: not plannable while this frame stays)."""

    __slots__ = ("dt", "frame", "foot", "look", "fused")

    def __init__(self, dt: float | None, frame: Frame, foot: _FootCall | None = None, look: _LookCall | None = None,
                 fused: _FusedCall | None = None):
        self.dt = dt
        self.frame = frame
        self.foot = foot
        self.look = look
        self.fused = fused


class _LastFrame:
    """What a stage's last frame left, apart from its settings: assigning these keeps its Procedural's
    plan (a stage's own attributes drop it). ``palettes_current``: the last apply kept the mixer's
    palettes current too; ``started``: the look-at spring has a value; ``calls``: the foot stage's
    (job, serial call, parallel call)."""

    __slots__ = ("palettes_current", "started", "calls")

    def __init__(self) -> None:
        self.palettes_current = False
        self.started = False
        self.calls: tuple = ()


def _drop_plan(stage) -> None:
    """A stage's attribute changed (a new target, ground, weight array...): its Procedural's frame plan
    is dropped (:meth:`Procedural._build_plan`)."""
    proc = getattr(stage, "proc", None)  # (None while the stage sets itself up)
    if proc is not None:
        proc._plan = None


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
    placement and look-at, a Player's whole update is one compiled call. Setting any attribute of this
    object or of its stages (a new target, ground, weight array, ``enabled``...) drops the plan;
    arrays changed in place (``weight[...]``, ``target[...]``, :meth:`place`) need nothing.

    >>> proc = Procedural(player)                                     # doctest: +SKIP
    >>> proc.foot_placement("terrain:amplitude=0.2"); proc.look_at((0.5, 1.5, 2.0))  # doctest: +SKIP
    >>> player.update(1 / 60)                                         # doctest: +SKIP
    """

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
            self.world = np.zeros((self.count, len(self.rig), 4, 4))
        self.enabled = True
        self._plan: _Plan | None = None  # the frame as compiled calls (see _build_plan)
        self.mixer.controllers.append(self)

    def __setattr__(self, name: str, value: Any) -> None:
        # any attribute set (stages replaced, enabled, placement...) drops the frame plan; the next
        # frame takes the general path and plans again
        object.__setattr__(self, name, value)
        if name != "_plan":
            object.__setattr__(self, "_plan", None)

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

    def after_update(self, dt: float) -> None:
        """Run the stages on the freshly blended pose, then rebuild world matrices and palettes."""
        plan = self._plan
        # the planned frame: the same dt and the same mixer frame (any array the stages read replaced,
        # a slot or layer added, the clip set changed: a new frame) -- the stages' compiled calls only
        if plan is not None and plan.frame is self.mixer.frame:
            if plan.dt == dt:
                foot, look = plan.foot, plan.look
                if foot is not None:
                    foot.call(foot.job, 0, foot.chunks)
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
        frame), or None without a frame. Setting any attribute of this object or its stages drops the
        plan (their ``__setattr__``)."""
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
            job = fused_job(frame.job, foot.job, look.job)
            args = (frame.ik, foot.chunks, look.mode, look.omega, look.keep)
            fused = _FusedCall(entry(_fused_frame(), job, float(dt), *args), job, args)
        return _Plan(float(dt), frame, foot, look, fused)

    def fused_frame(self, dt: float) -> bool:
        """A whole frame of the mixer whose only controller this is (:meth:`skeletal.Mixer.update`, the
        clock advanced) as one compiled call when the frame is planned and fused: the mixer's update,
        then foot placement and look-at (an event still comes before the stages: the call stops after
        the update, then :meth:`after_fused`). False, nothing done, otherwise."""
        plan = self._plan
        if plan is None or plan.fused is None or plan.dt != dt:
            return False
        if plan.frame is not self.mixer.frame:  # (a clip set grown, an input replaced: a new frame)
            return False
        fused = plan.fused
        r = fused.call(fused.job, dt, *fused.args)
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


# ---------------------------------------------------------------------------------------------
# foot placement


@njit(cache=True)
def _contact_one(b, job):
    """Contact weight per leg of instance ``b`` of a :class:`~skeletal.playback.jobs.FootJob`, into its
    ``contact`` (B, L): the actions' contact curves (``tables`` (C, F, L)) at their clip times, averaged
    with their effective weights (1 = planted when no action plays). Each action's frame pair is found
    once for all legs; out[b, l] accumulates over the actions in slot order (the same sums as leg by
    leg)."""
    fs, slot_clip, slot_additive = field(job, "fs"), field(job, "slot_clip"), field(job, "slot_additive")
    tables, frames, fps = field(job, "tables"), field(job, "frames"), field(job, "fps")
    durations, looping, out = field(job, "durations"), field(job, "looping"), field(job, "contact")
    n_legs = out.shape[1]
    for l in range(n_legs):
        out[b, l] = 0.0
    wsum = 0.0
    for s in range(slot_clip.shape[0]):
        if slot_additive[s]:
            continue
        w = fs[b, s, K.F_EFFECTIVE]
        if not w > 0.0:
            continue
        c = slot_clip[s]
        f = frames[c]
        t = fs[b, s, K.F_SAMPLE]
        if f <= 1 or durations[c] <= 0.0:
            for l in range(n_legs):
                out[b, l] += w * tables[c, 0, l]
        else:
            if looping[c]:
                t = t % durations[c]
                u = t * fps[c]
                i0 = int(math.floor(u)) % f
                i1 = (i0 + 1) % f
            else:
                u = min(max(t, 0.0), durations[c]) * fps[c]
                i0 = min(int(math.floor(u)), f - 1)
                i1 = min(i0 + 1, f - 1)
            a = u - math.floor(u)
            for l in range(n_legs):
                out[b, l] += w * (tables[c, i0, l] * (1.0 - a) + tables[c, i1, l] * a)
        wsum += w
    for l in range(n_legs):
        out[b, l] = out[b, l] / wsum if wsum > 0.0 else 1.0


#: A contact weight at or above this counts as planted (the foot's world position locks).
PLANTED = 0.999


@njit(cache=True, parallel=True)
def foot_kernel(job, phase, chunks):
    """Foot placement for every instance of a :class:`~skeletal.playback.jobs.FootJob` (see
    :class:`FootPlacement`), one compiled call for the whole stage: contact weights, world rows,
    planted-foot locks, ground query, pelvis spring, leg IK. In parallel over ``chunks`` ranges of
    instances (balanced to one instance; a few per thread, see :func:`_foot_chunks`); a few
    characters run its serial twin (:func:`skeletal._compile.serial_variant`: the same body,
    ``prange`` as ``range``). The per-instance work is written out here, not called per instance or
    per range: a call of a numba function takes a reference on every array it is given (two atomic
    operations each, some 40 arrays, contended between threads on the shared arrays).

    ``phase``: 0 all of it (a built-in ground, queried by :func:`.ground.ground_at`); 1 only up to the
    foot targets' world (x, z) in ``targets`` (a Python ground is then queried there into
    ``heights``/``normals``); 2 the rest, from those heights.
    pose (B, N, 10) float64 local rows, rewritten; world (B, N, 4, 4) their model-space matrices,
    kept current; placement (B, 4, 4) model -> world (a turn about +Y and a move); legs (3, L): thigh,
    knee and foot rig indices; pelvis: the joint moved up/down; leg_nodes[leg_start[l]:leg_start[l +
    1]]: ascending rig indices of each thigh's subtree (world rows rebuilt), pelvis_nodes: the pelvis'
    subtree without them; fs .. looping: the mixer's slot state and the contact tables (:func:`_contact_one`);
    g_kind, g_params, g_grid: :meth:`.ground.Ground.kernel_args`; heights (B, L), normals (B, L, 3):
    the ground under each foot target (world), written (phase 0) or read (phase 2); queried (B, L, 2)
    the world (x, z) that ``heights``/``normals`` hold a terrain's query of (NaN: none; a point queried
    the frame before is not queried again, phase 0); contact (B, L)
    0..1, written; ankle (L,) foot joint height over the floor when planted flat; leg_len (L,);
    scalars (8,): floor (model y of the clips' floor), reach (fraction of the leg length a leg may
    stretch to), omega, dt (the pelvis spring), soft (two-bone soft limit), max_tilt (radians),
    fresh (1: ``world`` already matches ``pose``), palettes (1: keep ``pal`` current); weight (B,);
    state (B, 2) pelvis spring (value, velocity), initialised (B,);
    plant: lock planted feet; locked (B, L), lock (B, L, 2): the locks' world (x, z). Outputs:
    targets (B, L, 3) world foot targets, pelvis_offset (B,); pal (B, J, 4, 4) the mixer's skin
    palettes (``pal_joints`` (J,), ``inv_bind`` (J, 4, 4)), kept current when scalars[7] is 1 (they
    matched ``world`` before): the entries ``pal_idx[pal_start[0]:pal_start[1]]`` (joints under the
    pelvis, not in a leg) translate with it (those of the legs too where the IK does not run), ``pal_idx[pal_start[l + 1]:pal_start[l + 2]]`` (under leg l) are
    recomputed after its IK."""
    # fields read without taking references (see :func:`.jobs.field`): views of them take none either
    pose, world, parents = field(job, "pose"), field(job, "world"), field(job, "parents")
    placement, legs, pelvis = field(job, "placement"), field(job, "legs"), field(job, "pelvis")
    pelvis_nodes, leg_nodes, leg_start = field(job, "pelvis_nodes"), field(job, "leg_nodes"), field(job, "leg_start")
    g_kind = field(job, "g_kind")
    g_params, g_grid, heights = field(job, "g_params"), field(job, "g_grid"), field(job, "heights")
    queried = field(job, "queried")
    normals, contact, ankle = field(job, "normals"), field(job, "contact"), field(job, "ankle")
    leg_len, scalars, weight = field(job, "leg_len"), field(job, "scalars"), field(job, "weight")
    state, initialised, plant = field(job, "state"), field(job, "initialised"), field(job, "plant")
    locked, lock, targets = field(job, "locked"), field(job, "lock"), field(job, "targets")
    pelvis_offset, pal, pal_joints = field(job, "pelvis_offset"), field(job, "pal"), field(job, "pal_joints")
    inv_bind, pal_idx, pal_start = field(job, "inv_bind"), field(job, "pal_idx"), field(job, "pal_start")
    n = pose.shape[0]
    chunks = max(min(n, chunks), 1)
    n_legs = legs.shape[1]
    floor, reach, omega, dt, soft, max_tilt = scalars[0], scalars[1], scalars[2], scalars[3], scalars[4], scalars[5]
    decay = math.exp(-omega * dt)  # the pelvis spring's decay over dt: the same for every instance
    # |w| >= cos(max_tilt / 2) means 2 acos|w| <= max_tilt (acos decreases); the bound is widened by a
    # few ulps so that rounding never skips a turn that the exact comparison would limit
    cos_half_tilt = math.cos(0.5 * max_tilt) * (1.0 + 1e-12)
    for c in prange(chunks):
        for b in range(c * n // chunks, (c + 1) * n // chunks):
            # This instance's arrays as views made once (a view costs an atomic reference count on an array
            # every thread shares); rows and matrices below are indexed, not sliced.
            M = placement[b]
            pose_b = pose[b]
            world_b = world[b]
            pal_b = pal[b]
            if phase != 2:
                _contact_one(b, job)
                if scalars[6] == 0.0:  # the world rows are not current yet
                    _all_rows(parents, pose_b, world_b)
                for l in range(n_legs):
                    fj = legs[2, l]
                    fx = (M[0, 0] * world_b[fj, 0, 3]
                          + M[0, 1] * world_b[fj, 1, 3] + M[0, 2] * world_b[fj, 2, 3] + M[0, 3])
                    fz = (M[2, 0] * world_b[fj, 0, 3]
                          + M[2, 1] * world_b[fj, 1, 3] + M[2, 2] * world_b[fj, 2, 3] + M[2, 3])
                    if plant:
                        u = contact[b, l]
                        if u >= PLANTED:
                            if not locked[b, l]:  # touchdown: the foot stays where it landed
                                locked[b, l] = True
                                lock[b, l, 0], lock[b, l, 1] = fx, fz
                            fx, fz = lock[b, l, 0], lock[b, l, 1]
                        elif locked[b, l]:
                            if u > 0.0:  # lifting off: from the lock back to the animated position
                                fx += (lock[b, l, 0] - fx) * u
                                fz += (lock[b, l, 1] - fz) * u
                            else:
                                locked[b, l] = False
                    targets[b, l, 0], targets[b, l, 2] = fx, fz
                if phase == 1:
                    continue
            w = weight[b]
            # world -> model: R^T (p - t); world up in model space is R's second row
            upx, upy, upz = M[1, 0], M[1, 1], M[1, 2]
            floor_w = M[1, 3] + floor * M[1, 1]
            goal = np.inf
            for l in range(n_legs):
                if phase == 0:
                    x, z = targets[b, l, 0], targets[b, l, 2]
                    # a planted foot's target stays on its lock: the terrain's 12 sines and cosines a point
                    # (two octaves) are not evaluated again at the point queried last frame (NaN: none)
                    if not (g_kind == GROUND_TERRAIN and x == queried[b, l, 0] and z == queried[b, l, 1]):
                        h, nx, ny, nz = ground_at(g_kind, g_params, g_grid, x, z)
                        heights[b, l] = h
                        normals[b, l, 0], normals[b, l, 1], normals[b, l, 2] = nx, ny, nz
                        queried[b, l, 0], queried[b, l, 1] = x, z
                fj = legs[2, l]
                fy = M[1, 0] * world_b[fj, 0, 3] + M[1, 1] * world_b[fj, 1, 3] + M[1, 2] * world_b[fj, 2, 3] + M[1, 3]
                ny = max(normals[b, l, 1], 0.2)
                lift = heights[b, l] - floor_w + ankle[l] * (1.0 / ny - 1.0) * contact[b, l]
                targets[b, l, 1] = fy + lift
                goal = min(goal, lift)
            # lower the pelvis further where a leg could not reach its target
            hard = np.inf
            for l in range(n_legs):
                hj, fj = legs[0, l], legs[2, l]
                h0, h1, h2 = world_b[hj, 0, 3], world_b[hj, 1, 3], world_b[hj, 2, 3]
                hx = M[0, 0] * h0 + M[0, 1] * h1 + M[0, 2] * h2 + M[0, 3]
                hy = M[1, 0] * h0 + M[1, 1] * h1 + M[1, 2] * h2 + M[1, 3]
                hz = M[2, 0] * h0 + M[2, 1] * h1 + M[2, 2] * h2 + M[2, 3]
                anim = math.sqrt((world_b[fj, 0, 3] - h0) ** 2 + (world_b[fj, 1, 3] - h1) ** 2
                                 + (world_b[fj, 2, 3] - h2) ** 2)
                r = max(anim, reach * leg_len[l])
                dxz2 = (targets[b, l, 0] - hx) ** 2 + (targets[b, l, 2] - hz) ** 2
                d_max = targets[b, l, 1] - hy + math.sqrt(max(r * r - dxz2, 0.0))
                hard = min(hard, d_max)
            goal = min(goal, hard)
            if not initialised[b] or not (dt > 0.0):
                if not initialised[b]:
                    state[b, 0] = goal
                    state[b, 1] = 0.0
            else:
                d0 = state[b, 0] - goal
                j = state[b, 1] + omega * d0
                e = decay
                state[b, 0] = goal + (d0 + j * dt) * e
                state[b, 1] = (state[b, 1] - omega * j * dt) * e
            if state[b, 0] > hard:
                # never so high that a leg cannot reach: the smoothing only ever lags downward moves' ends
                state[b, 0] = hard
                state[b, 1] = min(state[b, 1], 0.0)
            initialised[b] = True
            d = state[b, 0] * w
            pelvis_offset[b] = d
            if d != 0.0:
                vx, vy, vz = upx * d, upy * d, upz * d  # the world-vertical move, in model space
                p = parents[pelvis]
                if p >= 0:
                    # solve P3 x = v (P3 the parent's 3x3, scale included) by Cramer's rule
                    a00, a01, a02 = world_b[p, 0, 0], world_b[p, 0, 1], world_b[p, 0, 2]
                    a10, a11, a12 = world_b[p, 1, 0], world_b[p, 1, 1], world_b[p, 1, 2]
                    a20, a21, a22 = world_b[p, 2, 0], world_b[p, 2, 1], world_b[p, 2, 2]
                    det = a00 * (a11 * a22 - a12 * a21) - a01 * (a10 * a22 - a12 * a20) + a02 * (a10 * a21 - a11 * a20)
                    if abs(det) > 1e-300:
                        lx = ((vx * (a11 * a22 - a12 * a21) - a01 * (vy * a22 - a12 * vz)
                              + a02 * (vy * a21 - a11 * vz)) / det)
                        ly = ((a00 * (vy * a22 - a12 * vz) - vx * (a10 * a22 - a12 * a20)
                              + a02 * (a10 * vz - vy * a20)) / det)
                        lz = ((a00 * (a11 * vz - vy * a21) - a01 * (a10 * vz - vy * a20)
                              + vx * (a10 * a21 - a11 * a20)) / det)
                        vx, vy, vz = lx, ly, lz
                pose_b[pelvis, 0] += vx
                pose_b[pelvis, 1] += vy
                pose_b[pelvis, 2] += vz
                # the pelvis' subtree moves by the model-space vector: world rows and palettes translate,
                # but of legs that the IK below rebuilds (w > 0) only the rows it reads (thigh, knee, foot)
                mx, my, mz = upx * d, upy * d, upz * d
                rebuilt = w > 0.0
                for k in range(pelvis_nodes.shape[0]):
                    node = pelvis_nodes[k]
                    world_b[node, 0, 3] += mx
                    world_b[node, 1, 3] += my
                    world_b[node, 2, 3] += mz
                for l in range(n_legs):
                    for k in range(3 if rebuilt else leg_start[l + 1] - leg_start[l]):
                        node = legs[k, l] if rebuilt else leg_nodes[leg_start[l] + k]
                        world_b[node, 0, 3] += mx
                        world_b[node, 1, 3] += my
                        world_b[node, 2, 3] += mz
                if scalars[7] != 0.0:
                    for k in range(pal_start[0], pal_start[1] if rebuilt else pal_start[n_legs + 1]):
                        q = pal_idx[k]
                        pal_b[q, 0, 3] += mx
                        pal_b[q, 1, 3] += my
                        pal_b[q, 2, 3] += mz
            if not w > 0.0:
                continue
            for l in range(n_legs):
                thigh, knee, foot = legs[0, l], legs[1, l], legs[2, l]
                # target and pole in model space
                px = targets[b, l, 0] - M[0, 3]
                py = targets[b, l, 1] - M[1, 3]
                pz = targets[b, l, 2] - M[2, 3]
                tx = M[0, 0] * px + M[1, 0] * py + M[2, 0] * pz
                ty = M[0, 1] * px + M[1, 1] * py + M[2, 1] * pz
                tz = M[0, 2] * px + M[1, 2] * py + M[2, 2] * pz
                kx, ky, kz = world_b[knee, 0, 3], world_b[knee, 1, 3], world_b[knee, 2, 3]
                ox = kx - 0.5 * (world_b[thigh, 0, 3] + world_b[foot, 0, 3])
                oy = ky - 0.5 * (world_b[thigh, 1, 3] + world_b[foot, 1, 3])
                oz = kz - 0.5 * (world_b[thigh, 2, 3] + world_b[foot, 2, 3])
                on = math.sqrt(ox * ox + oy * oy + oz * oz)
                if on < 1e-4 * leg_len[l]:
                    ox, oy, oz, on = 0.0, 0.0, 1.0, 1.0  # a straight leg: bend toward the model's front (+Z)
                s = leg_len[l] / on
                pole = (kx + ox * s, ky + oy * s, kz + oz * s)
                # foot: the animated model-space rotation, turned from up to the ground normal by the contact
                nwx, nwy, nwz = normals[b, l, 0], normals[b, l, 1], normals[b, l, 2]
                nx = M[0, 0] * nwx + M[1, 0] * nwy + M[2, 0] * nwz
                ny = M[0, 1] * nwx + M[1, 1] * nwy + M[2, 1] * nwz
                nz = M[0, 2] * nwx + M[1, 2] * nwy + M[2, 2] * nwz
                ax, ay, az, aw = quat_from_to(upx, upy, upz, nx, ny, nz)
                u = contact[b, l]
                if abs(aw) < cos_half_tilt:  # the turn's angle 2 acos|w| may exceed max_tilt: acos only then
                    angle = 2.0 * math.acos(min(abs(aw), 1.0))
                    if angle > max_tilt:
                        u *= max_tilt / angle
                ax, ay, az, aw = nlerp_identity(ax, ay, az, aw, u)
                qx, qy, qz, qw = quat_from_world(world_b[foot])
                ex, ey, ez, ew = qmul(ax, ay, az, aw, qx, qy, qz, qw)
                ex, ey, ez, ew = qnormalize(ex, ey, ez, ew)
                two_bone_one(pose_b, world_b, parents, thigh, knee, foot, (tx, ty, tz), pole, w, soft, _NAN3,
                             (ex, ey, ez, ew))
                _rows(parents, leg_nodes, leg_start[l], leg_start[l + 1], pose_b, world_b)
                if scalars[7] != 0.0:
                    _palette_rows(world_b, pal_joints, inv_bind, pal_idx, pal_start[l + 1], pal_start[l + 2], pal_b)


def _foot_chunks(count: int, threads: int) -> int:
    """How many instance ranges :func:`foot_kernel` hands out for ``count`` characters on ``threads`` of
    numba's pool: four per thread, at most one per instance; one (its serial twin, in the calling
    thread) for a few characters or one thread (a parallel region on one thread costs more than the work).
    With more threads the stage runs in parallel even for a hundred characters, on as many threads as
    the playback update before it (:meth:`FootPlacement._run_parallel`): that update ran each
    character on the thread that OpenMP's static split gives it, and so does this split (equal ranges
    in order), so a character's pose, world rows and palettes are still in that core's cache; run on
    another thread, they are pulled from the other core and the next update pulls them back (twice the
    time: docs/guides/performance.md). An argument, not computed in
    the kernel: ``numba.get_num_threads()`` inside it would keep its serial twin out of the cache.

    >>> _foot_chunks(100, 2), _foot_chunks(100, 1), _foot_chunks(3, 2)
    (8, 1, 1)
    """
    return max(1, min(count, 4 * threads)) if count > SERIAL_BELOW and threads > 1 else 1


class FootPlacement:
    """Legs follow a ground: pelvis lowered, two-bone IK per leg, feet turned to the ground normal.

    ``ground``: a :class:`.ground.Ground`, spec string (``"terrain:amplitude=0.2"``, ``"slope:angle=10"``),
    number, height array or callable ``f(x, z) -> y`` (see :func:`.ground.as_ground`);
    ``legs``: a list of :class:`.contacts.Leg`, or a dict ``{"left": (thigh, knee, foot[, toe]),
    "right": (...)}`` of joint names / indices overriding the automatic search (:func:`.contacts.find_legs`);
    ``floor``: model-space height of the clips' floor (0: glTF characters stand on y = 0);
    ``pelvis_smooth``: seconds, the pelvis spring's smooth time (0.1); ``reach``: fraction of a leg's
    length it may stretch to before the pelvis drops further (0.97; a leg the clip itself stretches
    further keeps its animated reach); ``soft``: the two-bone soft limit band (0: the pelvis drop
    already keeps targets reachable, and a soft band would pull up feet the clip puts at full reach); ``max_tilt``: degrees the feet turn at most (35); ``weight`` (B,) or scalar;
    ``plant``: lock a planted foot's world (x, z) at touchdown (contact weight reaching 1), hold it
    while the weight stays 1 and blend back to the animated position by the weight over lift-off
    (True); ``contact_options``: passed to :func:`.contacts.detect_contacts`.

    After each update: ``contact`` (B, L) weights used, ``targets`` (B, L, 3) world foot targets,
    ``pelvis_offset`` (B,) metres the pelvis moved (negative: down), ``locked`` (B, L) bool and
    ``lock`` (B, L, 2) the planted feet's world (x, z), ``phases`` {clip index:
    :class:`.contacts.ContactPhases`}.

    Per frame the stage is one compiled call for the built-in grounds (two, with a Python query
    between, for a callable ground); for a float64 Player / Mixer it also keeps the mixer's world
    matrices and skin palettes current, so no full world / palette pass follows it.
    """

    builds_world = True  # computes the world matrices it needs from the pose itself
    keeps_world = True  # and leaves them matching the pose it writes

    @property
    def palettes_current(self) -> bool:
        """Whether the last apply kept the mixer's palettes current too."""
        return self.last.palettes_current

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        _drop_plan(self)

    def __init__(self, proc: Procedural, ground="flat", *, legs=None, floor: float = 0.0, pelvis_smooth: float = 0.1,
                 reach: float = 0.97, soft: float = 0.0, max_tilt: float = 35.0, weight=1.0, plant: bool = True,
                 contact_options: dict | None = None):
        self.proc = proc
        self.last = _LastFrame()
        rig = proc.rig
        self.ground = ground
        self.plant = bool(plant)
        if legs is None or isinstance(legs, dict):
            legs = find_legs(rig, legs)
        self.legs: list[Leg] = list(legs)
        if not (0.0 < reach <= 1.0 and 0.0 <= soft < 1.0 and pelvis_smooth > 0 and 0.0 <= max_tilt <= 90.0):
            raise SkeletalError("foot placement: need 0 < reach <= 1, 0 <= soft < 1, pelvis_smooth > 0, 0 <= max_tilt <= 90")
        self.floor, self.reach, self.soft = float(floor), float(reach), float(soft)
        self.max_tilt = math.radians(max_tilt)
        self.omega = 2.0 / float(pelvis_smooth)
        self.contact_options = dict(contact_options or {})
        b, n_legs = proc.count, len(self.legs)
        self.weight = np.broadcast_to(np.asarray(weight, np.float64), (b,)).copy()
        self.thighs = np.array([l.thigh for l in self.legs], np.int64)
        self.knees = np.array([l.knee for l in self.legs], np.int64)
        self.feet = np.array([l.foot for l in self.legs], np.int64)
        self.pelvis = self._common_parent(rig.parents, self.thighs)
        self.pelvis_nodes = np.flatnonzero(rig.descendants(self.pelvis)).astype(np.int64)
        parts = [np.flatnonzero(rig.descendants(int(t))).astype(np.int64) for t in self.thighs]
        self.leg_nodes = np.concatenate(parts)
        self.leg_start = np.cumsum([0] + [len(p) for p in parts]).astype(np.int64)
        # the kernel translates these rows with the pelvis, and the legs' own as it needs them
        self._body_nodes = np.setdiff1d(self.pelvis_nodes, self.leg_nodes).astype(np.int64)
        rest = world_matrices(rig.parents, rig.rest)
        self.leg_length = np.array([np.linalg.norm(rest[l.knee, :3, 3] - rest[l.thigh, :3, 3])
                                    + np.linalg.norm(rest[l.foot, :3, 3] - rest[l.knee, :3, 3]) for l in self.legs])
        self.ankle = np.array([rest[l.foot, 1, 3] - self.floor for l in self.legs])  # until a clip says better
        self._legs = np.ascontiguousarray(np.stack([self.thighs, self.knees, self.feet]))
        self.state = np.zeros((b, 2))
        self.initialised = np.zeros(b, np.bool_)
        self.contact = np.ones((b, n_legs))
        self.targets = np.zeros((b, n_legs, 3))
        self.pelvis_offset = np.zeros(b)
        self.heights = np.zeros((b, n_legs))
        self.normals = np.zeros((b, n_legs, 3))
        self._queried = np.full((b, n_legs, 2), np.nan)  # the (x, z) heights/normals hold a query of
        self.locked = np.zeros((b, n_legs), np.bool_)
        self.lock = np.zeros((b, n_legs, 2))
        self._scalars = np.zeros(8)
        self._scalar_values: tuple = ()  # what _scalars holds (apply)
        # the mixer's skin palettes this stage keeps current: entries under the pelvis, then each leg
        self._palettes, self._pal, self._pal_idx, self._pal_start = proc._palette_groups(
            [self.pelvis] + [int(t) for t in self.thighs])
        # the pelvis' group without the legs' entries (the groups after it): those translate with the
        # pelvis only when the IK does not rebuild them
        idx, start = self._pal_idx, self._pal_start
        body = idx[: start[1]][~np.isin(idx[: start[1]], idx[start[1]:])]
        self._pal_idx = np.concatenate([body, idx[start[1]:]]).astype(np.int64)
        self._pal_start = (start - start[1] + len(body)).astype(np.int64)
        self._pal_start[0] = 0
        self.phases: dict[int, ContactPhases] = {}
        self._tables_key = None
        self._args_from = None

    @property
    def ground(self) -> Ground:
        """The ground the feet follow (settable: anything :func:`.ground.as_ground` takes)."""
        return self._ground

    @ground.setter
    def ground(self, ground) -> None:
        self._ground = as_ground(ground)
        self._ground_args = self._ground.kernel_args()

    @staticmethod
    def _common_parent(parents, thighs) -> int:
        chains = []
        for t in thighs:
            up, j = [], int(parents[t])
            while j >= 0:
                up.append(j)
                j = int(parents[j])
            chains.append(up)
        common = [j for j in chains[0] if all(j in c for c in chains[1:])]
        if not common:
            raise SkeletalError("foot placement: the legs share no parent joint (pelvis)")
        return common[0]

    def reset(self) -> None:
        """Forget the pelvis spring and the planted feet's locks (after a teleport)."""
        self.initialised[:] = False
        self.locked[:] = False
        self._queried[...] = np.nan

    def phases_for(self, clip) -> ContactPhases:
        """The contact phases of a clip (name, index or Clip) for these legs (cached)."""
        mixer = self.proc.mixer
        c = mixer.clip_index(clip)
        if c not in self.phases:
            opts = {"floor": self.floor, **self.contact_options}
            self.phases[c] = detect_contacts(self.proc.asset, mixer.clipset.clips[c], self.legs, **opts)
        return self.phases[c]

    def _tables(self):
        mixer = self.proc.mixer
        key = self._tables_key
        # the mixer replaces its slot arrays when it adds a slot: identity and the clip set's version
        # tell whether anything changed, without hashing per frame
        if (key is None or key[0] != mixer.clipset.version or key[1] is not mixer.slot_clip
                or key[2] is not mixer.slot_layer or key[3] != len(mixer.layers)
                or key[4] != [layer.additive for layer in mixer.layers]):
            key = (mixer.clipset.version, mixer.slot_clip, mixer.slot_layer, len(mixer.layers),
                   [layer.additive for layer in mixer.layers])
            used = sorted(set(int(c) for c in mixer.slot_clip))
            n_clips = len(mixer.clipset.clips)
            phases = {c: self.phases_for(c) for c in used}
            frames_max = max([len(p.times) for p in phases.values()] + [1])
            tables = np.ones((n_clips, frames_max, len(self.legs)))
            frames = np.ones(n_clips, np.int64)
            fps = np.ones(n_clips)
            durations = np.zeros(n_clips)
            looping = np.zeros(n_clips, np.bool_)
            for c, p in phases.items():
                tables[c, : len(p.times)] = p.weight
                frames[c], fps[c], durations[c], looping[c] = len(p.times), p.fps, p.duration, p.looping
            if phases:
                # the ankle height over the floor when planted: from the clips (lowest over them)
                self.ankle = np.min([p.ankle_height for p in phases.values()], axis=0)
            additive = np.array([mixer.layers[int(l)].additive for l in mixer.slot_layer], np.bool_)
            self._packed = (tables, frames, fps, durations, looping, additive)
            self._tables_key = key
        return self._packed

    def apply(self, pose: np.ndarray, world: np.ndarray, dt: float, fresh: bool = False) -> None:
        """One frame: ``fresh`` says ``world`` already matches ``pose`` (no full rebuild needed)."""
        proc = self.proc
        mixer = proc.mixer
        packed = self._tables()
        kind, params, grid = self._ground_args
        keep = bool(fresh and self._palettes and kind >= 0)  # palettes kept current here
        values = (self.floor, self.reach, self.omega, dt, self.soft, self.max_tilt, 1.0 if fresh else 0.0,
                  1.0 if keep else 0.0)
        if values != self._scalar_values:  # written when one changed (eight numpy stores are not free)
            self._scalars[:] = values
            self._scalar_values = values
        sc = self._scalars
        self.last.palettes_current = keep
        # the kernel's job changes rarely: rebuilt only when one of the objects it comes from did
        c = self._args_from
        if (c is None or c[0] is not packed or c[1] is not pose or c[2] is not world or c[3] is not mixer.fs
                or c[4] is not self.weight or c[5] is not self._ground_args or c[6] != self.plant
                or c[7] is not self.ankle or c[8] is not proc.placement):
            tables, frames, fps, durations, looping, additive = packed
            pal, pal_joints, inv_bind = self._pal
            self._queried[...] = np.nan  # a new ground (or arrays): nothing queried yet
            job = foot_job(
                pose=pose, world=world, parents=proc.rig.parents, placement=proc.placement, legs=self._legs,
                pelvis=self.pelvis, pelvis_nodes=self._body_nodes, leg_nodes=self.leg_nodes,
                leg_start=self.leg_start, fs=mixer.fs, slot_clip=mixer.slot_clip, slot_additive=additive,
                tables=tables, frames=frames, fps=fps, durations=durations, looping=looping, g_kind=kind,
                g_params=params, g_grid=grid, heights=self.heights, normals=self.normals, queried=self._queried,
                contact=self.contact,
                ankle=self.ankle, leg_len=self.leg_length, scalars=sc, weight=self.weight, state=self.state,
                initialised=self.initialised, plant=self.plant, locked=self.locked, lock=self.lock,
                targets=self.targets, pelvis_offset=self.pelvis_offset, pal=pal, pal_joints=pal_joints,
                inv_bind=inv_bind, pal_idx=self._pal_idx, pal_start=self._pal_start)
            # the serial twin's entry point for a few characters; for more the parallel kernel's (and the
            # serial twin's once a frame runs on one thread: not compiled before a cold start needs it)
            if proc.count > SERIAL_BELOW:
                serial, parallel = None, entry(foot_kernel, job, 0, 2)
            else:
                serial, parallel = entry(serial_variant(foot_kernel), job, 0, 1), None
            self.last.calls = (job, serial, parallel)
            self._args_from = (packed, pose, world, mixer.fs, self.weight, self._ground_args, self.plant, self.ankle,
                               proc.placement)
        job, serial, parallel = self.last.calls
        call = serial if parallel is None else self._run_parallel
        if kind >= 0:  # a built-in ground: one compiled call for the whole stage
            call(job, 0, 1)
            return
        call(job, 1, 1)  # up to the targets' (x, z), then the Python ground there, then the rest
        h, n = self._ground.height_normal(self.targets[..., 0], self.targets[..., 2])
        self.heights[...] = h
        self.normals[...] = n
        call(job, 2, 1)

    def _run_parallel(self, job, phase: int, _chunks: int = 0) -> None:
        """The stage on more than a few characters: on the threads the playback update just used (numba's
        count, capped as the update caps it while other processes keep the CPUs busy), in
        :func:`_foot_chunks` ranges; on one thread, the serial twin (no parallel region)."""
        _, serial, parallel = self.last.calls
        with capped_threads():
            threads = thread_count()
            if threads > 1:
                parallel(job, phase, _foot_chunks(self.proc.count, threads))
                return
        if serial is None:
            serial = entry(serial_variant(foot_kernel), job, 0, 1)
            self.last.calls = (job, serial, parallel)
        serial(job, phase, 1)


# ---------------------------------------------------------------------------------------------
# look-at


def find_head_chain(rig) -> list[int]:
    """[neck, head] (or [head]) rig indices found by name ("Neck", "Head", "b_Head", "mixamorig:Head";
    not "HeadTop_End" and the like)."""
    def base(n: str) -> str:
        return n.split(":")[-1].split("|")[-1].lower()

    skip = ("top", "end", "nub", "site")
    heads = [j for j, n in enumerate(rig.names) if "head" in base(n) and not any(s in base(n) for s in skip)]
    if not heads:
        raise SkeletalError("no head joint found by name: pass joints=[...] to look_at")
    head = min(heads, key=lambda j: (len(_ancestors(rig.parents, j)), j))
    p = int(rig.parents[head])
    if p >= 0 and "neck" in base(rig.names[p]):
        return [p, head]
    return [head]


def _ancestors(parents, j: int) -> list[int]:
    out = []
    while parents[j] >= 0:
        j = int(parents[j])
        out.append(j)
    return out


class LookAt:
    """A neck + head chain (or any aim chain) turns so the head's forward axis points at a target.

    ``target``: world point(s) (B, 3) or (3,) (set :attr:`target` any time; None = not looking);
    ``joints``: the aim chain, parent first (default :func:`find_head_chain`); ``forward`` / ``up``:
    the last joint's local axes (default: the model's +Z / +Y in its rest pose); ``smooth_time``:
    seconds of the critically damped spring the target is followed through (0: no smoothing);
    ``limits``: :class:`skeletal.ik.AimLimit` per joint or one for all (default 50 deg yaw, 35 deg
    pitch, 15 deg roll each); ``shares``: relative share of the turn per joint (default neck 0.4, head
    0.6); ``weight`` (B,) or scalar.

    ``smoothed`` (B, 3): the point looked at after the last update.
    """

    builds_world = False
    keeps_world = True  # the aim stage rebuilds the rows it moves

    @property
    def palettes_current(self) -> bool:
        """Whether the last apply kept the mixer's palettes current too."""
        return self.last.palettes_current

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        _drop_plan(self)

    def __init__(self, proc: Procedural, target=None, *, joints=None, forward=None, up=None, smooth_time: float = 0.25,
                 limits=None, shares=None, weight=1.0):
        self.proc = proc
        self.last = _LastFrame()
        rig = proc.rig
        chain = find_head_chain(rig) if joints is None else [self._index(rig, j) for j in joints]
        self.joints = chain
        rest = world_matrices(rig.parents, rig.rest)
        r = rest[chain[-1], :3, :3]
        r = r / np.linalg.norm(r, axis=0, keepdims=True)
        fwd = r.T @ np.array([0.0, 0.0, 1.0]) if forward is None else np.asarray(forward, np.float64)
        upv = r.T @ np.array([0.0, 1.0, 0.0]) if up is None else np.asarray(up, np.float64)
        if limits is None:
            limits = AimLimit(math.radians(50), math.radians(35), math.radians(15))
        if shares is None and len(chain) == 2:
            shares = (0.4, 0.6)
        self.table = StageTable(rig.parents, rig.rest, rig.names)
        self.table.add("aim", chain, forward=fwd, up=upv, limits=limits, shares=shares)
        b = proc.count
        self.inputs = self.table.inputs(b)
        self._scratch = self.table.scratch()
        if smooth_time < 0:
            raise SkeletalError(f"smooth_time must not be negative, got {smooth_time}")
        self.smooth_time = float(smooth_time)
        self.weight = np.broadcast_to(np.asarray(weight, np.float64), (b,)).copy()
        self.target = None if target is None else np.broadcast_to(np.asarray(target, np.float64), (b, 3)).copy()
        self.smoothed = np.zeros((b, 3))
        self.velocity = np.zeros((b, 3))
        self._palettes, self._pal, self._pal_idx, _ = proc._palette_groups([chain[0]])
        self._look_arrays: tuple | None = None  # the serial call's job, what it was built from, entry point
        self._look_job: Any = None
        self._look_call: Any = None

    @staticmethod
    def _index(rig, j) -> int:
        if isinstance(j, (int, np.integer)):
            return int(j)
        try:
            return rig.find(j)
        except KeyError:
            raise SkeletalError(f"look-at joint {j!r}: no joint of that name") from None

    def set_target(self, target) -> None:
        self.target = np.broadcast_to(np.asarray(target, np.float64), (self.proc.count, 3)).copy()

    def apply(self, pose: np.ndarray, world: np.ndarray, dt: float) -> None:
        last = self.last  # (what this frame leaves: assigning its fields keeps the plan)
        last.palettes_current = True  # nothing moved yet
        if self.target is None:
            return
        if self.proc.count <= SERIAL_BELOW:  # one compiled call: spring, model-space target, aim chain
            jump = not last.started or self.smooth_time == 0.0
            omega = 2.0 / self.smooth_time if self.smooth_time > 0.0 else 0.0
            # the arrays change rarely: the compiled entry point and its array arguments are kept while
            # they are the same objects (no per-frame type resolution of 23 arguments by the dispatcher)
            arrays = self._look_arrays
            if (arrays is None or arrays[0] is not pose or arrays[1] is not world or arrays[2] is not self.proc.placement
                    or arrays[3] is not self.target or arrays[4] is not self.smoothed
                    or arrays[5] is not self.velocity or arrays[6] is not self.weight):
                t = self.table
                arrays = (pose, world, self.proc.placement, self.target, self.smoothed, self.velocity, self.weight)
                pal, pal_joints, inv_bind = self._pal
                job = look_job(pose=pose, world=world, parents=t.parents, stage_i=t.stage_i, stage_f=t.stage_f,
                               joints=t.joints, jp=t.jp, inputs=self.inputs, update=t.update, scratch=self._scratch[0],
                               placement=self.proc.placement, target=self.target, smoothed=self.smoothed,
                               velocity=self.velocity, weight=self.weight, pal=pal, pal_joints=pal_joints,
                               inv_bind=inv_bind, pal_idx=self._pal_idx)
                self._look_arrays = arrays
                self._look_job = job
                self._look_call = entry(look_kernel, job, 0, 0.0, 0.0, bool(self._palettes))
            if not self._look_call(self._look_job, 1 if jump else 0, float(omega), float(dt), bool(self._palettes)):
                raise SkeletalError("look-at target must be finite")
            last.started = True
            last.palettes_current = self._palettes
            return
        last.palettes_current = False
        if not np.all(np.isfinite(self.target)):
            raise SkeletalError("look-at target must be finite")
        if not last.started or self.smooth_time == 0.0:
            self.smoothed[...] = self.target
            self.velocity[...] = 0.0
            last.started = True
        elif dt > 0:
            critical_spring(self.smoothed, self.velocity, np.ascontiguousarray(self.target), 2.0 / self.smooth_time, dt)
        m = self.proc.placement
        local = np.einsum("bji,bj->bi", m[:, :3, :3], self.smoothed - m[:, :3, 3])  # world -> model
        self.inputs[:, 0, IN_TARGET:IN_TARGET + 3] = local
        self.inputs[:, 0, IN_POLE:IN_POLE + 3] = m[:, 1, :3]  # keep the head's up toward world up
        self.inputs[:, 0, IN_WEIGHT] = self.weight
        self.table.solve(pose, world, self.inputs)


# ---------------------------------------------------------------------------------------------
# jiggle


class Jiggle:
    """Spring bones (:class:`.springs.JiggleChains`) as a stage; ``chains`` default: the tails."""

    builds_world = False
    keeps_world = False
    palettes_current = False

    def __init__(self, proc: Procedural, chains=None, **options):
        self.proc = proc
        if chains is None:
            chains = find_tail_chains(proc.rig)
            if not chains:
                raise SkeletalError("no tail joints found by name: pass chains=[[joint, ...], ...]")
        self.chains = JiggleChains(proc.rig, proc.count, chains, **options)

    def reset(self) -> None:
        self.chains.reset()

    def apply(self, pose: np.ndarray, world: np.ndarray, dt: float) -> None:
        self.chains.placement = self.proc.placement
        self.chains.apply(world, pose, dt)
