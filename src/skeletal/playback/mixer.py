# Over 600 lines: the Mixer's public API (play, crossfade, layers, masks, events, IK) over one set of state
# arrays; its kernels live in playback/kernels.py.
"""The batched playback engine: B instances of one rig, each with any number of actions and layers.

Everything per instance is an array with the instance axis first, so one character and ten thousand
characters run the same code: ``update(dt)`` is a handful of compiled kernel calls (advance clocks and
fades; sample and blend; world matrices; skin palettes) and never loops over instances or joints in
Python. :class:`~skeletal.playback.player.Player` is the one-instance face of it, and
:class:`~skeletal.playback.crowd.Crowd` the many-instance one.

Vocabulary (as in three.js's AnimationMixer / AnimationAction):

* an **action** is a clip playing on a layer, with its own clock, speed, weight, loop mode and fade;
  actions live in *slots*, one per (clip, layer), created on first use;
* a **layer** blends its actions over the layers below it, with a weight and a per-joint mask
  (override), or adds them (additive);
* a **crossfade** fades every other action of the layer out while the target fades in; fades start
  from the current weights, so interrupting a fade never snaps. ``snapshot=True`` instead freezes
  the current pose and fades from it (seed 004's approach).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numba
import numpy as np
import numpy.typing as npt

from ..asset import Asset, require_nodes
from ..anim.clip import INTERP_CODE, PATH_CODE, Clip
from ..errors import ClipError, SkeletalError
from ..anim.pose import depth_order
from ..quat import near_slerp_table
from .._aligned import aligned_copy, aligned_zeros
from .._compile import serial_variant
from .._threads import capped_threads
from . import kernels as K
from .clipset import CL_SEGMENT_END, CL_SEGMENT_START, TK_INTERP, TK_PATH, ClipSet
from .frame import Frame, FrameInput
from .inertia_kernels import InertiaArrays
from .jobs import entry, playback_job
from . import coldstart as _coldstart, numpy_frame
from .single_lanes import base_rows, pack_lerp_lanes, pack_rotation_lanes
from .properties import PropertyStage


InstanceSelector = int | Sequence[int] | np.ndarray | slice | None
#: Joints a layer applies to: names or indices (with their descendants), a (N,) weight array, or None (all).
JointMask = Sequence[str | int] | np.ndarray | None

if TYPE_CHECKING:
    from .ikstage import IKHandle


@dataclass(frozen=True)
class Event:
    """Something that happened during an update: ``kind`` is "loop", "finished" or "marker"."""

    kind: str
    clip: str
    instance: int
    layer: int
    name: str | None = None  # the marker's name
    count: int = 1  # loops completed (kind "loop")


@dataclass
class Layer:
    """A blending layer. ``mask`` (N,) per rig node in [0, 1]; ``additive`` adds instead of mixing."""

    name: str
    index: int
    additive: bool


class Mixer:
    """Batched playback state for ``count`` instances of ``asset``.

    Outputs after :meth:`update` (instance axis first):
    ``local_pose`` (B, N, 10) rig order, ``morph_weights`` (B, M), ``world`` (B, N, 4, 4) rig order,
    ``palettes`` (B, J, 4, 4): ``world[palette_joints[j]] @ inverse_bind[j]`` for the joints of every
    skin, concatenated (skin ``s`` owns ``palettes[:, skin_ranges[s][0]:skin_ranges[s][1]]``, also
    given as the views :attr:`skin_palettes`), all float64 unless ``dtype=np.float32`` (palettes and
    world only; blending always runs in float64). A :class:`~skeletal.Crowd`'s palettes have the same
    layout with 3x4 matrices.
    """

    # The attributes the frame's jobs are built from: assigning one (a new array) drops ``frame``, and
    # the next update builds it again (see build_frame). Arrays changed in place need nothing.
    asset = FrameInput[Asset]()
    rig = FrameInput[Any]()
    clipset = FrameInput[ClipSet]()
    cursors = FrameInput[np.ndarray]()
    slot_clip = FrameInput[np.ndarray]()
    slot_layer = FrameInput[np.ndarray]()
    fs = FrameInput[np.ndarray]()
    ist = FrameInput[np.ndarray]()
    layer_weight = FrameInput[np.ndarray]()
    layer_mask = FrameInput[np.ndarray]()
    layer_additive = FrameInput[np.ndarray]()
    _base_unmasked = FrameInput[bool]()
    snap_weight = FrameInput[np.ndarray]()
    snap_pose = FrameInput[np.ndarray]()
    snap_morph = FrameInput[np.ndarray]()
    local_pose = FrameInput[np.ndarray]()
    morph_weights = FrameInput[np.ndarray]()
    world = FrameInput[np.ndarray]()
    palettes = FrameInput[np.ndarray](then="_palettes_replaced")
    palette_joints = FrameInput[np.ndarray]()
    _ik = FrameInput[Any]()
    _inertia = FrameInput[InertiaArrays]()

    def __init__(self, asset: Asset, count: int = 1, *, dtype: npt.DTypeLike = np.float64, events: bool = True):
        #: the compiled state of an update (:class:`~skeletal.playback.frame.Frame`), None until built
        #: (:meth:`build_frame`) and after any attribute it is built from is replaced
        self.frame: Frame | None = None
        if count < 1:
            raise SkeletalError(f"count must be at least 1, got {count}")
        require_nodes(asset, "animate")  # any object with a rig may drive a mixer, not only an Asset
        self.asset = asset
        self.rig = asset.rig
        self.count = int(count)
        self.dtype = np.dtype(dtype)
        self.collect_events = events
        self.nlerp_max_gap = 0.0  # slerp everywhere (the Crowd raises it)
        self.single_nlerp_max_gap = None  # the one-action path as the rest (see the property)
        self.clipset = ClipSet(asset.clips)
        self.time = 0.0  # seconds of updates so far
        self._blends = False  # a single character's update needed blending once: the full kernel from then on
        #: cold start (skeletal.playback.coldstart): None until the first run decides, False for compiled frames,
        #: or the background compile that numpy frames wait on
        self._cold: Any = None
        n, m = len(self.rig), len(asset.rest_morph)
        self.slot_clip = np.zeros(0, np.int64)
        self.slot_layer = np.zeros(0, np.int64)
        self._slots: dict[tuple[int, int], int] = {}
        # the per-instance arrays the update kernel reads and writes start on a cache line (skeletal._aligned)
        self.fs = aligned_zeros((count, 0, K.NF))
        self.ist = aligned_zeros((count, 0, K.NI), np.int64)
        self._tables_key = None  # see _clip_tables
        self.layers: list[Layer] = [Layer("base", 0, False)]
        self.layer_weight = np.ones((count, 1))
        self.layer_mask = np.ones((1, n))
        self.layer_additive = np.zeros(1, np.bool_)
        self._base_unmasked = True
        self.snap_weight = np.zeros(count)
        self.snap_pose = aligned_zeros((count, n, 10))
        self.snap_morph = np.zeros((count, m))
        self._snap_fade = np.zeros((count, 3))  # from, elapsed, duration
        self._snap_fading = False  # some instance's snapshot is fading (saves a numpy call per update)
        threads = numba.config.NUMBA_NUM_THREADS
        self._scratch = np.zeros((threads, n, K.ACC_WIDTH))
        self._scratch_morph = np.zeros((threads, m, 2))
        self._scratch_tmp = np.zeros((threads, 64))
        self.local_pose = aligned_copy(np.broadcast_to(self.rig.rest, (count, n, 10)))
        self.morph_weights = aligned_copy(np.broadcast_to(asset.rest_morph, (count, m)))
        self._allocate_outputs()
        self._listeners: dict[str, list[Callable[[Event], None]]] = {}
        self._slerp_table_cache: tuple | None = None  # (clip set, version, near_slerp_table): see _slerp_table
        self._single_lanes_cache: tuple | None = None  # (segments, slot clips, packed arrays): see _single_lanes
        self._event_slots: tuple | None = None  # see _collect_events
        self._pending: list[Event] = []
        # Objects with ``before_update(dt)`` (blend spaces, state machines, root motion) run first.
        self.controllers: list = []
        self._ik = None  # IK stages run after blending (see add_ik)
        # the last update ran without its world pass: its only controller builds the world rows and palettes
        # (a Procedural's planned foot placement, see update)
        self._world_skipped = False
        # the inertialized transitions' arrays (playback/inertia_kernels.py): none until the first
        # inertialized switch (locomotion/mixer_hook.py makes them)
        self._inertia = InertiaArrays(0, n)
        # Animated properties (KHR_animation_pointer, named curves): ``property_values`` (B, M), laid
        # out by asset.properties, sampled by a stage of their own (playback/properties.py).
        self._no_property_values = np.zeros((count, 0))
        self._properties = PropertyStage(self, Event) if len(getattr(asset, "properties", ())) else None
        self.evaluate()

    @property
    def property_values(self) -> np.ndarray:
        """(B, M) float64: the animated properties (materials, lights, cameras, visibility, named
        curves), laid out by ``asset.properties``; sampled after an update when first read (see
        :mod:`skeletal.playback.properties`). (B, 0) for an asset without any."""
        stage = self._properties
        return self._no_property_values if stage is None else stage.current()

    def _allocate_outputs(self) -> None:
        """World matrices (B, N, 4, 4) and the palettes (B, J, 4, 4) of every skin's joints, which the
        update kernel fills in one pass."""
        skins = self.asset.skins
        world = aligned_zeros((self.count, len(self.rig), 4, 4), self.dtype)  # filled by evaluate()
        world[:, :, 3, 3] = 1.0
        self.world = world
        self._skin_joints()
        self._inverse_bind = np.ascontiguousarray(
            np.concatenate([s.inverse_bind for s in skins] or [np.zeros((0, 4, 4))]), dtype=self.dtype)
        self.palettes = aligned_zeros((self.count, len(self.palette_joints), 4, 4), self.dtype)

    def _skin_joints(self) -> None:
        """``palette_joints`` (J,): the rig nodes of every skin's joints, concatenated, and ``skin_ranges``:
        skin ``s``'s entries ``[start, end)`` of them."""
        skins = self.asset.skins
        self.palette_joints = np.concatenate([s.joints for s in skins] or [np.zeros(0)]).astype(np.int64)
        self.skin_ranges: list[tuple[int, int]] = []
        start = 0
        for skin in skins:
            self.skin_ranges.append((start, start + len(skin.joints)))
            start += len(skin.joints)

    def _palettes_replaced(self) -> None:
        """After :attr:`palettes` is assigned: ``_first_palettes``, instance 0's (J_s, R, 4) palette per
        skin as a tuple of views into it (what :attr:`skeletal.Player.palettes` returns, read by a C
        getter: no Python frame or allocation per read)."""
        palettes = self.palettes
        self._first_palettes = tuple(palettes[0, start:end] for start, end in self.skin_ranges)

    @property
    def skin_palettes(self) -> list[np.ndarray]:
        """One palette array (B, J_s, R, 4) per skin: views into :attr:`palettes` (updated in place).

        >>> mixer.skin_palettes[0].shape                  # doctest: +SKIP
        (4, 19, 4, 4)
        """
        palettes = self.palettes
        return [palettes[:, start:end] for start, end in self.skin_ranges]

    @property
    def nlerp_max_gap(self) -> float:
        """LINEAR rotation tracks whose keys are at most this many degrees apart use normalised lerp
        instead of slerp (0: slerp everywhere, as three.js does)."""
        return self._nlerp_max_gap

    @nlerp_max_gap.setter
    def nlerp_max_gap(self, degrees: float) -> None:
        self._nlerp_max_gap = float(degrees)
        self._tables_key = None
        self.frame = None  # new clip tables: a new job

    @property
    def single_nlerp_max_gap(self) -> float | None:
        """The nlerp limit (degrees) of the single-action path (one full-weight action on the base
        layer, nothing else blended; None: ``nlerp_max_gap``, the default): there, rotation tracks
        whose keys are at most this far apart use normalised lerp (within 7.2e-5 rad of slerp at 15
        degrees, the crowd's limit), the others slerp. Crossfades, layers and blends keep
        ``nlerp_max_gap``. 15 saves a :class:`~skeletal.Player` a few percent of an update; the default
        stays exact (slerp, as three.js and :func:`skeletal.bake`).

        >>> player.mixer.single_nlerp_max_gap = 15.0      # doctest: +SKIP
        """
        return self._single_nlerp_max_gap

    @single_nlerp_max_gap.setter
    def single_nlerp_max_gap(self, degrees: float | None) -> None:
        self._single_nlerp_max_gap = None if degrees is None else float(degrees)
        self._tables_key = None
        self.frame = None  # new clip tables: a new job

    def _clip_tables(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The kernels' view of the clip set, rebuilt when it or ``nlerp_max_gap`` changes: the
        clip table and segments for this mixer's nlerp limit, and the per-clip base poses
        (C, N, 10) and morph weights (C, M). Also sizes the key cursors (B, timelines) and the
        scratch."""
        cs = self.clipset
        key = (cs.version, self._nlerp_max_gap, self._single_nlerp_max_gap)
        if self._tables_key != key:
            segments, clip_table = cs.segments(self._nlerp_max_gap, self._single_nlerp_max_gap)
            base_pose, base_morph = cs.base_poses(self.rig.rest, self.asset.rest_morph, self.asset.morph_start,
                                                  dtype=self.local_pose.dtype)
            self._tables = (clip_table, segments, base_pose, base_morph)
            timelines = len(cs.timeline_keys)
            self.cursors = aligned_zeros((self.count, timelines), np.int64)  # hints only: resetting is safe
            threads = numba.config.NUMBA_NUM_THREADS
            # per thread: whole cache lines each (8 timelines of 3 float64 are three), so that two threads
            # never write one line
            self._scratch_locs = aligned_zeros((threads, -(-max(cs.max_timelines, 1) // 8) * 8, 3))
            self._tables_key = key
            self.frame = None  # (built from these tables: a frame built now is assigned after this)
        return self._tables

    # -- slots -----------------------------------------------------------------------------------

    def clip_index(self, clip: str | int | Clip) -> int:
        """Index of a clip in this mixer's clip set (a Clip object not yet in it is added)."""
        version = self.clipset.version
        c = self.clipset.index(clip)
        if self.clipset.version != version:  # the job's clip tables are stale: the next update rebuilds it
            self.frame = None
        return c

    def slot(self, clip: str | int | Clip, layer: int = 0, owner: object = None) -> int:
        """The action slot of ``clip`` on ``layer``, created (stopped) on first use. An ``owner`` (a
        blend space) gets slots of its own, so its weights never clash with a plain action of the
        same clip that is, say, still fading out."""
        self._check_layer(layer)
        c = self.clip_index(clip)
        if self.clipset.additive[c] != self.layers[layer].additive:
            kind = "additive" if self.clipset.additive[c] else "non-additive"
            raise ClipError(f"clip {self.clipset.clips[c].name!r} is {kind}; layer {self.layers[layer].name!r} is not")
        key = (c, layer, id(owner) if owner is not None else None)
        if key not in self._slots:
            self._slots[key] = len(self.slot_clip)
            self.slot_clip = np.append(self.slot_clip, c)
            self.slot_layer = np.append(self.slot_layer, layer)
            fs = np.zeros((self.count, 1, K.NF))
            fs[:, 0, K.F_SPEED] = 1.0
            fs[:, 0, K.F_WEIGHT] = 1.0
            fs[:, 0, K.F_WARP_FROM] = fs[:, 0, K.F_WARP_TO] = 1.0
            fs[:, 0, K.F_REPETITIONS] = math.inf
            self.fs = aligned_copy(np.concatenate([self.fs, fs], axis=1))
            ist = np.zeros((self.count, 1, K.NI), np.int64)
            ist[:, 0, K.I_LOOP] = K.LOOP_REPEAT
            self.ist = aligned_copy(np.concatenate([self.ist, ist], axis=1))
        return self._slots[key]

    def _instances(self, instances: InstanceSelector) -> np.ndarray | slice:
        if instances is None:
            return slice(None)
        if isinstance(instances, slice):
            return instances
        idx = np.atleast_1d(np.asarray(instances))
        if idx.dtype == np.bool_:
            if idx.shape != (self.count,):
                raise SkeletalError(f"instance mask has shape {idx.shape}, expected ({self.count},)")
            return np.flatnonzero(idx)
        if idx.size and (idx.min() < -self.count or idx.max() >= self.count):
            raise SkeletalError(f"instance index out of range for {self.count} instances")
        return idx.astype(np.int64)

    def envelope(self, slot: int) -> np.ndarray:
        """Current fade envelope (B,) of a slot (0 when stopped)."""
        fs = self.fs[:, slot]
        duration = fs[:, K.F_FADE_DURATION]
        alpha = np.where(duration > 0, np.minimum(fs[:, K.F_FADE_ELAPSED] / np.where(duration > 0, duration, 1), 1), 1.0)
        env = fs[:, K.F_FADE_FROM] + (fs[:, K.F_FADE_TO] - fs[:, K.F_FADE_FROM]) * alpha
        return np.where(self.ist[:, slot, K.I_FLAGS] & K.FLAG_ENABLED, env, 0.0)

    # -- controls --------------------------------------------------------------------------------

    def play(
        self,
        clip: str | int | Clip,
        *,
        layer: int = 0,
        fade: float = 0.0,
        loop: str = "repeat",
        speed: float | np.ndarray = 1.0,
        weight: float | np.ndarray = 1.0,
        offset: float | np.ndarray = 0.0,
        repetitions: float = math.inf,
        restart: bool = False,
        instances: InstanceSelector = None,
    ) -> int:
        """Start (or keep playing) ``clip`` on ``layer``; returns the slot.

        An action that is already running keeps its clock unless ``restart``; ``offset`` is the start
        time (per instance if an array), ``fade`` fades it in from its current weight.
        """
        if loop not in K.LOOP_NAMES:
            raise ClipError(f"loop mode {loop!r} is not one of {tuple(K.LOOP_NAMES)}")
        s = self.slot(clip, layer)
        idx = self._instances(instances)
        envelope = self.envelope(s)[idx]
        flags = self.ist[idx, s, K.I_FLAGS]
        running = (flags & K.FLAG_ENABLED) != 0
        fresh = ~running | ((flags & K.FLAG_FINISHED) != 0) | restart
        fs = self.fs[:, s]
        ist = self.ist[:, s]
        fs[idx, K.F_SPEED] = speed
        fs[idx, K.F_WEIGHT] = weight
        fs[idx, K.F_REPETITIONS] = repetitions
        ist[idx, K.I_LOOP] = K.LOOP_NAMES[loop]
        start = np.broadcast_to(np.asarray(offset, np.float64), np.shape(envelope))
        fs[idx, K.F_TIME] = np.where(fresh, start, fs[idx, K.F_TIME])
        ist[idx, K.I_LOOP_COUNT] = np.where(fresh, 0, ist[idx, K.I_LOOP_COUNT])
        ist[idx, K.I_FLAGS] = np.where(fresh, K.FLAG_ENABLED, (flags | K.FLAG_ENABLED) & ~K.FLAG_PAUSED)
        self._start_fade(s, idx, np.where(fresh & ~running, 0.0, envelope), 1.0, fade)
        self._refresh_sample_time(s, idx)
        return s

    def stop(self, clip: str | int | Clip, *, layer: int = 0, fade: float = 0.0, instances: InstanceSelector = None) -> None:
        """Stop an action, at once or fading out over ``fade`` seconds."""
        self.stop_slot(self.slot(clip, layer), fade=fade, instances=instances)

    def stop_slot(self, s: int, *, fade: float = 0.0, instances: InstanceSelector = None) -> None:
        """:meth:`stop` for a slot given by number (e.g. one of a blend space's)."""
        idx = self._instances(instances)
        if fade > 0:
            self._start_fade(s, idx, self.envelope(s)[idx], 0.0, fade)
        else:
            self.ist[idx, s, K.I_FLAGS] &= ~K.FLAG_ENABLED
            self.fs[idx, s, K.F_EFFECTIVE] = 0.0

    def stop_all(self, *, layer: int | None = None, instances: InstanceSelector = None) -> None:
        idx = self._instances(instances)
        for s in range(len(self.slot_clip)):
            if layer is None or self.slot_layer[s] == layer:
                self.ist[idx, s, K.I_FLAGS] &= ~K.FLAG_ENABLED
                self.fs[idx, s, K.F_EFFECTIVE] = 0.0
        if layer in (None, 0):
            self.snap_weight[idx] = 0.0
            self._snap_fade[idx] = 0.0

    def crossfade(
        self,
        clip: str | int | Clip,
        duration: float = 0.3,
        *,
        layer: int = 0,
        sync: bool = False,
        warp: bool = False,
        snapshot: bool = False,
        instances: InstanceSelector = None,
        blend: str = "linear",
        **play_options: Any,
    ) -> int:
        """Fade from whatever ``layer`` shows now to ``clip`` over ``duration`` seconds (linear weights).

        The target starts at ``offset`` (default 0) unless it is still fading out from an earlier
        transition, in which case it fades back in from where it is (no snap). ``sync`` starts the
        target at the same phase (time / duration) as the strongest action it replaces; ``warp``
        scales both clocks during the fade so their cycles line up (three.js's ``warp``).
        ``snapshot`` freezes the layer's current pose and fades from it instead of from the running
        actions (base layer only), which stops them at once.
        ``blend``: "linear" (this), or "inertialize", "inertialize_spring", "dead_blend": switch at once
        and fade out the difference from the old pose (:mod:`skeletal.playback.locomotion.mixer_hook`).
        """
        if blend != "linear":  # the inertialization hook (playback/locomotion/mixer_hook.py)
            from .locomotion.mixer_hook import inertialized_crossfade

            return inertialized_crossfade(self, clip, duration, blend, layer=layer, sync=sync, warp=warp,
                                          snapshot=snapshot, instances=instances, **play_options)
        target = self.slot(clip, layer)
        idx = self._instances(instances)
        others = [s for s in range(len(self.slot_clip)) if self.slot_layer[s] == layer and s != target]
        envelopes = {s: self.envelope(s)[idx] for s in others}
        d_target = self.clipset.duration[self.slot_clip[target]]
        source_phase = source_duration = None
        if (sync or warp) and others:
            strengths = np.stack([envelopes[s] * self.fs[idx, s, K.F_WEIGHT] for s in others])
            strongest = np.asarray(others)[np.argmax(strengths, axis=0)]
            rows = np.arange(self.count)[idx]
            d_source = self.clipset.duration[self.slot_clip[strongest]]
            sample = self.fs[rows, strongest, K.F_SAMPLE]
            source_phase = np.where(d_source > 0, sample / np.where(d_source > 0, d_source, 1), 0.0)
            source_duration = d_source
        if snapshot:
            if layer != 0:
                raise SkeletalError("snapshot crossfades work on the base layer only")
            self._capture_snapshot(idx, duration)
            for s in others:
                self.ist[idx, s, K.I_FLAGS] &= ~K.FLAG_ENABLED
                self.fs[idx, s, K.F_EFFECTIVE] = 0.0
        else:
            for s in others:
                # Every enabled action fades out, even one whose fade-in has not begun to show yet.
                running = (self.ist[idx, s, K.I_FLAGS] & K.FLAG_ENABLED) != 0
                if np.any(running):
                    sel = np.arange(self.count)[idx][running]
                    self._start_fade(s, sel, envelopes[s][running], 0.0, duration)
            if layer == 0:
                self._refade_snapshot(idx, duration)
        offset = play_options.pop("offset", 0.0)
        if sync and source_phase is not None:
            offset = source_phase * d_target
        s = self.play(clip, layer=layer, fade=duration, offset=offset, instances=instances, **play_options)
        if snapshot:
            # The target fades in under the frozen pose: its weight rises as the snapshot's falls.
            self._start_fade(s, idx, 0.0, 1.0, duration)
            self._refresh_sample_time(s, idx)
        if warp and source_duration is not None and d_target > 0:
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(source_duration > 0, source_duration / d_target, 1.0)
            self.fs[idx, s, K.F_WARP_FROM] = 1.0 / ratio
            self.fs[idx, s, K.F_WARP_TO] = 1.0
            for o in others:
                self.fs[idx, o, K.F_WARP_FROM] = 1.0
                self.fs[idx, o, K.F_WARP_TO] = ratio
        return s

    def fade_to_slots(self, targets: Sequence[int], duration: float, *, instances: InstanceSelector = None,
                      offsets: Sequence[float] | None = None) -> None:
        """Fade every other action of the targets' layer out and the target slots in (each from its
        current weight) over ``duration``: the multi-clip crossfade blend spaces and states use.
        Targets that are not running start at ``offsets[i]`` (default 0)."""
        idx = self._instances(instances)
        layers = {int(self.slot_layer[t]) for t in targets}
        if 0 in layers:
            self._refade_snapshot(idx, duration)
        for s in range(len(self.slot_clip)):
            if self.slot_layer[s] in layers and s not in targets:
                env = self.envelope(s)[idx]
                running = (self.ist[idx, s, K.I_FLAGS] & K.FLAG_ENABLED) != 0
                if np.any(running):
                    self._start_fade(s, np.arange(self.count)[idx][running], env[running], 0.0, duration)
        for i, t in enumerate(targets):
            env = self.envelope(t)[idx]
            flags = self.ist[idx, t, K.I_FLAGS]
            fresh = (flags & K.FLAG_ENABLED) == 0
            start = 0.0 if offsets is None else offsets[i]
            self.fs[idx, t, K.F_TIME] = np.where(fresh, start, self.fs[idx, t, K.F_TIME])
            self.ist[idx, t, K.I_LOOP_COUNT] = np.where(fresh, 0, self.ist[idx, t, K.I_LOOP_COUNT])
            self.ist[idx, t, K.I_FLAGS] = (flags | K.FLAG_ENABLED) & ~(K.FLAG_PAUSED | K.FLAG_FINISHED)
            self._start_fade(t, idx, np.where(fresh, 0.0, env), 1.0, duration)
            self._refresh_sample_time(t, idx)

    def _refade_snapshot(self, idx, duration: float) -> None:
        """A frozen pose still fading out now fades over the new transition, from its current weight,
        like every other action it replaces (so the weights keep summing to 1)."""
        rows = np.arange(self.count)[idx]
        rows = rows[self.snap_weight[rows] > 0]
        if rows.size:
            self._snap_fade[rows] = np.column_stack(
                [self.snap_weight[rows], np.zeros(rows.size), np.full(rows.size, max(duration, 1e-9))])
            self._snap_fading = True

    def seek(self, clip: str | int | Clip, time: float | np.ndarray, *, layer: int = 0, instances: InstanceSelector = None) -> None:
        """Move an action's clock to ``time`` seconds (clip-local)."""
        self.seek_slot(self.slot(clip, layer), time, instances=instances)

    def seek_slot(self, s: int, time: float | np.ndarray, *, instances: InstanceSelector = None) -> None:
        """:meth:`seek` for a slot given by number."""
        idx = self._instances(instances)
        self.fs[idx, s, K.F_TIME] = time
        self.ist[idx, s, K.I_FLAGS] &= ~K.FLAG_FINISHED
        self._refresh_sample_time(s, idx)

    def set_paused(self, clip: str | int | Clip, paused: bool, *, layer: int = 0, instances: InstanceSelector = None) -> None:
        """Pause or resume an action (its clock stops; fades still run)."""
        self.set_paused_slot(self.slot(clip, layer), paused, instances=instances)

    def set_paused_slot(self, s: int, paused: bool, *, instances: InstanceSelector = None) -> None:
        """:meth:`set_paused` for a slot given by number."""
        idx = self._instances(instances)
        if paused:
            self.ist[idx, s, K.I_FLAGS] |= K.FLAG_PAUSED
        else:
            self.ist[idx, s, K.I_FLAGS] &= ~K.FLAG_PAUSED

    def _start_fade(self, s: int, idx, start, end: float, duration: float) -> None:
        fs = self.fs[:, s]
        fs[idx, K.F_FADE_FROM] = start if duration > 0 else end
        fs[idx, K.F_FADE_TO] = end
        fs[idx, K.F_FADE_ELAPSED] = 0.0
        fs[idx, K.F_FADE_DURATION] = max(duration, 0.0)
        fs[idx, K.F_WARP_FROM] = fs[idx, K.F_WARP_TO] = 1.0
        if duration <= 0 and end <= 0:
            self.ist[idx, s, K.I_FLAGS] &= ~K.FLAG_ENABLED

    def _refresh_sample_time(self, s: int, idx) -> None:
        """Recompute sample time and effective weight after a control change (a zero-length step)."""
        fs = self.fs[idx, s].reshape(-1, K.NF).copy()
        ist = self.ist[idx, s].reshape(-1, K.NI).copy()
        events = ist[:, K.I_EV_LOOPS : K.I_EV_MARKERS + 1].copy()
        if self._cold:  # kernels compiling in the background: the clock in numpy
            advance = numpy_frame.advance
        else:
            advance = K.advance if len(fs) > 1 else serial_variant(K.advance)  # one: no thread pool to compile
        advance(fs[:, None], ist[:, None], self.slot_clip[s : s + 1], self.clipset.clip_table,
                self.clipset.duration, self.clipset.marker_time, 0.0)
        ist[:, K.I_EV_LOOPS : K.I_EV_MARKERS + 1] = events
        self.fs[idx, s] = fs.reshape(self.fs[idx, s].shape)
        self.ist[idx, s] = ist.reshape(self.ist[idx, s].shape)

    # -- layers ----------------------------------------------------------------------------------

    def add_layer(self, name: str, *, weight: float = 1.0, mask: JointMask = None, additive: bool = False) -> int:
        """A new layer on top; ``mask`` as accepted by :meth:`joint_mask`. Returns its index."""
        index = len(self.layers)
        self.layers.append(Layer(name, index, additive))
        self.layer_weight = np.concatenate([self.layer_weight, np.full((self.count, 1), float(weight))], axis=1)
        self.layer_mask = np.concatenate([self.layer_mask, self.joint_mask(mask)[None]], axis=0)
        self.layer_additive = np.append(self.layer_additive, additive)
        return index

    def layer(self, key: str | int) -> int:
        if isinstance(key, str):
            for layer in self.layers:
                if layer.name == key:
                    return layer.index
            raise SkeletalError(f"no layer named {key!r}")
        self._check_layer(key)
        return int(key)

    def set_layer_weight(self, layer: str | int, weight: float | np.ndarray, *, instances: InstanceSelector = None) -> None:
        self.layer_weight[self._instances(instances), self.layer(layer)] = weight

    def set_layer_mask(self, layer: str | int, mask: JointMask) -> None:
        self.layer_mask[self.layer(layer)] = self.joint_mask(mask)
        self._base_unmasked = bool(np.all(self.layer_mask[0] == 1.0))

    def joint_mask(self, mask: JointMask) -> np.ndarray:
        """A per-node weight array (N,) in rig order from: None (all 1), a joint name (that joint and
        its descendants), a list of names, a dict ``{name: weight}`` (each with its descendants,
        later entries override deeper ones), or an (N,) array."""
        n = len(self.rig)
        if mask is None:
            return np.ones(n)
        if isinstance(mask, np.ndarray) or (isinstance(mask, (list, tuple)) and mask and not isinstance(mask[0], str)):
            arr = np.asarray(mask, dtype=np.float64)
            if arr.shape != (n,):
                raise SkeletalError(f"mask array has shape {arr.shape}, expected ({n},)")
            return np.clip(arr, 0.0, 1.0)
        if isinstance(mask, str):
            mask = {mask: 1.0}
        elif not isinstance(mask, dict):
            mask = {name: 1.0 for name in mask}
        out = np.zeros(n)
        # Apply shallow joints first so that a deeper entry overrides its ancestors' weight.
        entries = sorted(((self.rig.find(name), float(w)) for name, w in mask.items()), key=lambda e: e[0])
        for index, w in entries:
            out[self.rig.descendants(index)] = w
        return np.clip(out, 0.0, 1.0)

    def _check_layer(self, layer: int) -> None:
        if not 0 <= layer < len(self.layers):
            raise SkeletalError(f"layer {layer} does not exist ({len(self.layers)} layers)")

    # -- snapshot --------------------------------------------------------------------------------

    def _capture_snapshot(self, idx, duration: float) -> None:
        """Freeze the base layer's current output for the selected instances; fade it out."""
        weights = self.layer_weight.copy()
        weights[:, 1:] = 0.0
        pose = np.empty_like(self.local_pose)
        morph = np.empty_like(self.morph_weights)
        self._evaluate_into(weights, pose, morph)
        self.snap_pose[idx] = pose[idx]
        self.snap_morph[idx] = morph[idx]
        self.snap_weight[idx] = 1.0
        self._snap_fade[idx] = [1.0, 0.0, max(duration, 1e-9)]
        self._snap_fading = True

    # -- update ----------------------------------------------------------------------------------

    def update(self, dt: float) -> None:
        """Advance every action by ``dt`` seconds, then evaluate poses, world matrices and palettes.

        The one route of a frame (a :class:`~skeletal.Player` without controllers calls its frame's
        compiled update directly): the controllers' ``before_update``, a fading snapshot's weight,
        the compiled update on :attr:`frame` (:meth:`_step`), the events, the controllers'
        ``after_update``. A :class:`~skeletal.playback.procedural.Procedural` alone may run the whole
        frame as one compiled call instead (its ``fused_frame``), or, with foot placement alone, take
        over the world rows and palettes (its ``builds_world_for``: the update runs ADVANCE | BLEND,
        and its ``after_update`` builds them around the stage's pose edits)."""
        dt = float(dt)
        self.time += dt
        controllers = self.controllers
        builds_world = None
        if controllers:
            if len(controllers) == 1:
                fused = getattr(controllers[0], "fused_frame", None)
                if fused is not None and not self._snap_fading and fused(dt):
                    return
                builds_world = getattr(controllers[0], "builds_world_for", None)
            for controller in controllers:
                controller.before_update(dt)
        if self._snap_fading:
            self._fade_snapshot(dt)
        if builds_world is not None and builds_world(dt):
            # the clocks and the blend only: the controller's after_update builds the world rows and
            # palettes around its own pose edits (once, instead of a full pass then a partial redo)
            self._world_skipped = True
            if self._run(dt, K.ADVANCE | K.BLEND) and self.collect_events:
                self._run(0.0, K.WORLD)  # events see a whole frame: the world pass first, as usual
                self._world_skipped = False
                self._collect_events()
        elif self._step(dt) and self.collect_events:
            self._collect_events()
        # the list as it is now: a controller's before_update may have added one (an inertialized
        # switch made by a state machine adds its stage, which acts after this very update)
        for controller in self.controllers:
            after = getattr(controller, "after_update", None)
            if after is not None:
                after(dt)

    def _fade_snapshot(self, dt: float) -> None:
        """A frozen pose's weight one step further along its fade (in place: the job keeps the array)."""
        fade = self._snap_fade
        active = fade[:, 2] > 0
        fade[active, 1] += dt
        alpha = np.minimum(fade[:, 1] / np.where(active, fade[:, 2], 1.0), 1.0)
        self.snap_weight[:] = np.where(active, fade[:, 0] * (1.0 - alpha), 0.0)
        fade[alpha >= 1.0] = 0.0
        self._snap_fading = bool(fade[:, 2].any())

    def _step(self, dt: float) -> int:
        """The whole update (clocks, blending, world matrices, IK, palettes) in one compiled call:
        serial for one character (no thread pool), parallel over instances otherwise. Returns how many
        instances reported an event."""
        return self._run(dt, K.ALL)

    def current_frame(self) -> Frame:
        """:attr:`frame`, built first when there is none or its clip tables are stale."""
        frame = self.frame
        if frame is None or frame.version != self.clipset.version:
            frame = self.build_frame()
        return frame

    def _run(self, dt: float, stages: int) -> int:
        """Run ``stages`` of the update kernel on this mixer's frame; returns the event count. Until the
        kernels are compiled on a cold start, the frame runs in numpy instead (skeletal.playback.coldstart)."""
        if self.frame is None and self._cold is not False:
            r = _coldstart.step(self, dt, stages)
            if r is not None:
                return r
        frame = self.current_frame()
        if frame.call is None:
            frame.call = entry(self._update_kernel(), frame.job, frame.ik, 0.0, K.ALL)
        if self.count == 1:
            r = frame.step(dt, stages)
            return self._blend_from_now_on(r, stages, dt) if r >= K.NEEDS_BLEND else r
        with capped_threads():  # fewer threads while other processes keep the CPUs busy (_threads.busy_cap)
            return frame.step(dt, stages)

    def _update_kernel(self):
        """The update kernel for this mixer's job: parallel for many characters; for one the serial twin
        (no thread pool; a cold start never compiles the parallel one), without blending until an
        update needed it (:func:`~skeletal.playback.kernels.single_action_update`)."""
        if self.count > 1:
            return K.update
        return serial_variant(K.update) if self._blends else K.single_action_update()

    def _blend_from_now_on(self, r: int, stages: int, dt: float = 0.0) -> int:
        """After the single-action kernel returned ``r`` >= NEEDS_BLEND (an instance needed blending and
        was left unposed): switch this mixer to the full kernel for good (compiling it once), run its
        BLEND and WORLD stages of ``stages`` (the clocks have advanced by ``dt``; an inertialized
        transition's stage, skipped with the pose, advances by it now), and return the event count."""
        self._blends = True
        if self._cold is False and _coldstart.resume(self):  # the kernel still compiling: numpy frames till then
            self.frame = None
            numpy_frame.step(self, 0.0, stages & (K.BLEND | K.WORLD))
            return r % K.NEEDS_BLEND
        frame = self.current_frame()
        frame.call = entry(self._update_kernel(), frame.job, frame.ik, 0.0, K.ALL)
        frame.step(float(dt), stages & (K.BLEND | K.WORLD))
        return r % K.NEEDS_BLEND

    def _after_call(self, r: int, dt: float = 0.0) -> None:
        """A whole update's compiled call by ``dt`` returned ``r`` (not 0): the switch to blending when the
        single-action kernel left an instance unposed, then the events, when any happened."""
        if r >= K.NEEDS_BLEND:
            r = self._blend_from_now_on(r, K.ALL, dt)
        if r and self.collect_events:
            self._collect_events()

    def evaluate(self) -> None:
        """Recompute the outputs from the current state without advancing time: the update kernel's
        blend and world stages (world matrices, IK, palettes), so that a player's first frame
        compiles one kernel, not a second set for play() and crossfade()."""
        self._run(0.0, K.BLEND | K.WORLD)
        if self._properties is not None:
            self._properties.evaluate()

    # -- inverse kinematics ------------------------------------------------------------------------

    def add_ik(self, name: str, kind: str = "two_bone", chain: Sequence[str | int] = (), *,
               target: npt.ArrayLike | None = None, pole: npt.ArrayLike | None = None,
               weight: float | npt.ArrayLike = 1.0, **options: Any) -> IKHandle:
        """Add an IK stage run after blending, before world matrices and palettes are final; returns its
        :class:`~skeletal.playback.ikstage.IKHandle` (set ``target``, ``pole``, ``weight`` per frame: one
        value or one row per instance). ``kind``: "two_bone" (chain = root, mid, end), "aim" (chain =
        the joints sharing the turn, the aiming one last), "ccd" or "fabrik" (root ... end effector);
        joints by name or rig index; ``options`` as :func:`skeletal.ik.two_bone` / :func:`~skeletal.ik.aim`
        / :func:`~skeletal.ik.ccd` (``soft``, ``mid_axis``, ``end_rotation``, ``forward``, ``up``,
        ``up_vector``, ``shares``, ``limits``, ``iterations``, ``tolerance``). Stages run in the order
        added; targets are model-space points (the space of ``world``)."""
        from .ikstage import IKStages

        if self._ik is None:
            self._ik = IKStages(self.rig, self.count)
        handle = self._ik.add(name, kind, chain, target=target, pole=pole, weight=weight, **options)
        self._ik_changed()
        self.frame = None  # the stage table's arrays were replaced
        self.evaluate()
        return handle

    def _ik_changed(self) -> None:
        """The stage table changed (the crowd restricts the world rows it rebuilds)."""

    @property
    def ik(self) -> dict:
        """The IK stages by name (handles)."""
        return {} if self._ik is None else dict(self._ik.handles)

    def _world_fields(self) -> dict:
        """The job's world and palette fields: every node's 4x4 world matrix into ``world``, the
        skins' 4x4 palettes into one (B, J, 4, 4) array (the crowd keeps 3x4 rows instead)."""
        return dict(
            world_nodes=depth_order(self.rig.parents, np.arange(len(self.rig))), worlds=self.world,
            scratch_world=np.zeros((1, 1) + self.world.shape[2:], self.world.dtype),
            palette_joints=self.palette_joints, inverse_bind=self._inverse_bind, palettes=self.palettes,
        )

    def _job_fields(self) -> dict:
        """Every field of this mixer's :class:`~skeletal.playback.jobs.PlaybackJob`, by name."""
        cs = self.clipset
        clip_table, segments, base_pose, base_morph = self._clip_tables()
        return dict(
            tracks=cs.track_table, hot_tracks=K.hot_tracks(cs.track_table), clip_table=clip_table, segments=segments,
            timeline_keys=cs.timeline_keys,
            times=cs.times, values=cs.values, base_pose=base_pose, base_morph=base_morph,
            clip_duration=cs.duration, marker_time=cs.marker_time, slerp_keys=self._slerp_table(),
            **self._single_lanes(segments),
            slot_clip=self.slot_clip, slot_layer=self.slot_layer, fs=self.fs, ist=self.ist, cursors=self.cursors,
            layer_weight=self.layer_weight, layer_mask=self.layer_mask, layer_additive=self.layer_additive,
            base_unmasked=bool(self._base_unmasked),
            snap_weight=self.snap_weight, snap_pose=self.snap_pose, snap_morph=self.snap_morph,
            rest=self.rig.rest, rest_morph=self.asset.rest_morph, morph_start=self.asset.morph_start,
            parents=self.rig.parents,
            acc=self._scratch, accm=self._scratch_morph, tmp=self._scratch_tmp, locs=self._scratch_locs,
            pose=self.local_pose, morph=self.morph_weights, **self._world_fields(), **self._inertia.fields(),
        )

    def _single_lanes(self, segments: np.ndarray) -> dict:
        """The single-action path's slerp and LINEAR vector segments packed eight tracks a vector
        (:mod:`~skeletal.playback.single_lanes`) for the clips of this mixer's slots only (a copy of
        their keys: a clip library costs nothing until its clips are played), made once per
        ``segments`` table and set of slot clips; ``base_rows`` for every clip."""
        clips = tuple(sorted({int(c) for c in self.slot_clip}))
        cached = self._single_lanes_cache
        if cached is None or cached[0] is not segments or cached[1] != clips:
            cs = self.clipset
            clip_table = self._clip_tables()[0]
            played = np.zeros(len(segments), bool)
            for c in clips:
                played[clip_table[c, CL_SEGMENT_START]:clip_table[c, CL_SEGMENT_END]] = True
            hot = K.hot_tracks(cs.track_table)
            packed = pack_rotation_lanes(segments, cs.timeline_keys, hot, cs.values, self._slerp_table(), played)
            packed.update(pack_lerp_lanes(segments, cs.timeline_keys, hot, cs.values, played))
            packed.update(base_rows(clip_table, segments, cs.track_table, len(self.rig)))
            cached = self._single_lanes_cache = (segments, clips, packed)
        return cached[2]

    def _slerp_table(self) -> np.ndarray:
        """The clip set's ``slerp_keys`` with the near keys' flags (:func:`skeletal.quat.near_slerp_table`),
        made once per clip set version."""
        cs = self.clipset
        cached = self._slerp_table_cache
        if cached is None or cached[0] is not cs or cached[1] != cs.version:
            tracks = cs.track_table
            rotation = np.flatnonzero((tracks[:, TK_PATH] == PATH_CODE["rotation"])
                                      & (tracks[:, TK_INTERP] == INTERP_CODE["LINEAR"]))
            keys = [(int(cs.key_start[k]), int(cs.value_start[k]), int(cs.key_start[k + 1] - cs.key_start[k]))
                    for k in rotation]
            cached = (cs, cs.version, near_slerp_table(cs.slerp_keys, keys, cs.values))
            self._slerp_table_cache = cached
        return cached[2]

    def build_frame(self) -> Frame:
        """Build :attr:`frame` from the current arrays: the :class:`~skeletal.playback.jobs.PlaybackJob`,
        the IK stages' job, and the compiled update's entry point (a crowd's: when first needed)."""
        version = self.clipset.version
        job = playback_job(**self._job_fields())
        ik = None if self._ik is None else self._ik.job()
        frame = Frame(job, ik, version)
        if self._compiles_update_now():
            frame.call = entry(self._update_kernel(), job, ik, 0.0, K.ALL)
        self.frame = frame
        return frame

    def _compiles_update_now(self) -> bool:
        """Whether :meth:`build_frame` finds the update's entry point at once (a Mixer's next update needs
        it; a wide crowd may never)."""
        return True

    def _evaluate_into(self, layer_weight: np.ndarray, pose: np.ndarray, morph: np.ndarray) -> None:
        frame = self.current_frame()
        (K.evaluate if self.count > 1 else serial_variant(K.evaluate))(frame.job, layer_weight, pose, morph)

    # -- events ----------------------------------------------------------------------------------

    def on(self, kind: str, callback: Callable[[Event], None]) -> None:
        """Call ``callback(event)`` for every event of ``kind`` ("loop", "finished", "marker", "curve"
        (see :func:`skeletal.playback.properties.watch_curve`) or "*")."""
        if kind not in ("loop", "finished", "marker", "curve", "*"):
            raise SkeletalError(f"unknown event kind {kind!r}")
        self._listeners.setdefault(kind, []).append(callback)

    def poll_events(self) -> list[Event]:
        """The events since the last poll (those delivered to callbacks included)."""
        events, self._pending = self._pending, []
        return events

    def _collect_events(self) -> None:
        """Turn the last update's event fields into :class:`Event` objects, queued for
        :meth:`poll_events` and passed to the listeners. One character's loop and finished events
        are made once per slot, clip name, layer and count and handed out again (they are frozen, and
        making one costs more than the update that reports it)."""
        if self.count == 1:  # a Player's loop event: plain lists, no numpy reductions (~3x cheaper)
            rows = self.ist[0, :, K.I_EV_LOOPS : K.I_EV_MARKERS + 1].tolist()
            hits = [(0, s, row) for s, row in enumerate(rows) if row[0] or row[1] or row[2]]
        else:
            ev = self.ist[:, :, K.I_EV_LOOPS : K.I_EV_MARKERS + 1]
            if not ev.any():
                return
            hits = [(int(b), int(s), ev[b, s].tolist()) for b, s in zip(*np.nonzero(ev.any(axis=2)))]
        # the slots' clips and layers as Python ints while the slot arrays are the same objects (adding a
        # slot replaces them), and the events made so far for one character (None for many)
        slots = self._event_slots
        if slots is None or slots[0] is not self.slot_clip or slots[1] is not self.slot_layer:
            slots = (self.slot_clip, self.slot_layer, self.slot_clip.tolist(), self.slot_layer.tolist(),
                     {} if self.count == 1 else None)
            self._event_slots = slots
        clips, made = self.clipset.clips, slots[4]
        new: list[Event] = []
        for b, s, (loops, finished, markers) in hits:
            c, layer = slots[2][s], slots[3][s]
            name = clips[c].name
            if markers:
                start = self.clipset.marker_start[c]
                for m in range(63):
                    if markers >> m & 1:
                        new.append(Event("marker", name, b, layer, self.clipset.marker_names[start + m]))
            if loops > 0:
                event = None if made is None else made.get((s, name, layer, loops))
                if event is None:
                    event = Event("loop", name, b, layer, count=loops)
                    if made is not None and loops < 8:
                        made[s, name, layer, loops] = event
                new.append(event)
            if finished:
                event = None if made is None else made.get((s, name, layer, 0))
                if event is None:
                    event = Event("finished", name, b, layer)
                    if made is not None:
                        made[s, name, layer, 0] = event
                new.append(event)
        self._pending.extend(new)
        listeners = self._listeners
        if listeners:
            for event in new:
                for callback in listeners.get(event.kind, []) + listeners.get("*", []):
                    callback(event)
