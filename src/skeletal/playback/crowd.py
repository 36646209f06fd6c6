"""Crowd: thousands of instances of one rig, posed per frame in compiled kernels.

A :class:`Crowd` is a :class:`~skeletal.playback.mixer.Mixer` tuned for numbers: float32 poses and
outputs, normalised lerp instead of slerp for LINEAR rotation tracks whose keys are close enough for
it to be accurate (at most ``nlerp_max_gap`` degrees apart, 15 by default), a direct path for the
common case of one full-weight action per instance (the clip's base pose copied, only its varying
tracks sampled, one key search per shared timeline: see :mod:`skeletal.playback.clipset`), and one
parallel kernel per frame that advances the clocks, poses each instance and builds its world
matrices (only the joints and their ancestors) in cache, writing only its skin palette. Everything
the mixer offers (crossfades, layers, blend spaces, state machines, per-instance selections) still
works.

>>> crowd = skeletal.Crowd(asset, count=1000)                             # doctest: +SKIP
>>> crowd.play("Walk", offsets=np.random.uniform(0, 1, 1000))             # doctest: +SKIP
>>> crowd.update(1 / 60)                                                  # doctest: +SKIP
>>> crowd.palettes.shape      # (instances, joints of all skins, 3, 4) float32, one upload  # doctest: +SKIP
(1000, 49, 3, 4)

nlerp vs slerp: the angle error grows with the cube of the key spacing. Measured on Soldier.glb with
nlerp on every track: 1.0e-3 rad on Walk and Run (keys up to 37 degrees apart), 7e-8 rad on Idle
(keys < 3 degrees apart). With the default 15-degree limit the error stays below 7.5e-5 rad (0.004
degrees) on any clip; see ``tests/test_crowd.py``. ``nlerp_max_gap=0`` keeps slerp everywhere.
"""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np
import numpy.typing as npt

from ..asset import Asset
from ..anim.clip import Clip
from .._aligned import aligned_copy, aligned_zeros
from .._threads import capped_threads
from ..anim.pose import ancestors_and_self, world_matrices
from .frame import Frame, FrameInput
from .jobs import entry, wide_job
from .mixer import InstanceSelector, Mixer
from .wide import LANES, T_ROWS, key_major, lanes_to_pose, slerp_angles, update_wide, wide_clips

# update_wide's modes (its ``mode`` argument)
_UPDATE, _REBUILD_ROWS, _EVALUATE = 0, 1, 2


class Crowd(Mixer):
    """``count`` instances of ``asset`` as array state (instance axis first).

    ``wide`` (default True): groups of 16 instances that play one full-weight action of the same clip
    are posed together, one instance per SIMD lane (:mod:`skeletal.playback.wide`), IK stages
    included; False keeps the per-instance kernel everywhere (same results within float32 rounding).

    After :meth:`update`: ``palettes`` (count, J, 3, 4) float32 — the top rows of
    ``world[joint] @ inverse_bind`` for the joints of every skin, concatenated (skin ``s`` owns
    ``palettes[:, skin_ranges[s][0]:skin_ranges[s][1]]``); ``world34`` (count, N, 3, 4) when
    ``keep_world=True``; ``local_pose`` (count, N, 10) and ``morph_weights`` as in the mixer.
    """

    # the crowd's outputs and what they are computed from (see Mixer: assigning one drops the frame)
    world34 = FrameInput[np.ndarray]()
    inverse_bind34 = FrameInput[np.ndarray]()
    _world_nodes = FrameInput[np.ndarray]()
    _world_nodes_ik = FrameInput[np.ndarray]()

    def __init__(self, asset: Asset, count: int, *, nlerp_max_gap: float = 15.0, keep_world: bool = False,
                 dtype: npt.DTypeLike = np.float32, events: bool = False, wide: bool = True):
        self._keep_world = keep_world
        self.wide = bool(wide)  # groups of 16 instances per SIMD lane group when the state allows
        #: the frame whose wide groups' local rows are not in ``local_pose`` yet (see :attr:`local_pose`)
        self._pose_lanes: Frame | None = None
        super().__init__(asset, count, dtype=dtype, events=events)
        self.nlerp_max_gap = float(nlerp_max_gap)

    def _allocate_outputs(self) -> None:
        self.local_pose = aligned_copy(self.local_pose, self.dtype)  # float32 by default, like every output
        asset = self.asset
        self._skin_joints()
        ibm = [s.inverse_bind[:, :3, :] for s in asset.skins] or [np.zeros((0, 3, 4))]
        self.inverse_bind34 = np.ascontiguousarray(np.concatenate(ibm), dtype=self.dtype)
        n = len(self.rig)
        # World matrices needed: every node's when they are kept, else the joints' and their ancestors'.
        self._world_nodes = (np.arange(n, dtype=np.int64) if self._keep_world
                             else ancestors_and_self(self.rig.parents, self.palette_joints))
        self.palettes = aligned_zeros((self.count, len(self.palette_joints), 3, 4), self.dtype)
        self.world34 = aligned_zeros((self.count if self._keep_world else 0, n if self._keep_world else 1, 3, 4), self.dtype)
        self._world_scratch = aligned_zeros((numba.config.NUMBA_NUM_THREADS, n, 3, 4), self.dtype)

    def _ik_changed(self) -> None:
        """World rows: the skins' joints and the IK chains with their ancestors; after each stage only
        the rows of its moved subtree among those are rebuilt."""
        if not self._keep_world:
            needed = np.union1d(ancestors_and_self(self.rig.parents, self.palette_joints), self._ik.table.world_nodes)
            self._world_nodes = needed.astype(np.int64)
        self._ik.table.restrict_updates(self._world_nodes)
        self._world_nodes_ik = self._ik.table.rows_before_stages(self._world_nodes)  # the rest: by the stages

    def _world_fields(self) -> dict:
        """World 3x4 rows of the skins' joints and their ancestors (with IK: of the rows the stages do
        not rebuild themselves; every node's with ``keep_world``), in ``world34`` or a per-thread
        scratch; 3x4 palettes in the output dtype."""
        return dict(
            world_nodes=self._world_nodes if self._ik is None else self._world_nodes_ik, worlds=self.world34,
            scratch_world=self._world_scratch, palette_joints=self.palette_joints,
            inverse_bind=self.inverse_bind34, palettes=self.palettes,
        )

    def _wide_ok(self) -> bool:
        """Whether the wide kernel (:mod:`skeletal.playback.wide`) may run this crowd's update: float32,
        one layer, no kept world matrices (it keeps world rows in its own lane layout); IK stages run
        inside it."""
        return (self.wide and self.dtype == np.float32 and not self._keep_world
                and self.layer_weight.shape[1] == 1 and self._local_pose.dtype == np.float32)

    @property
    def local_pose(self) -> np.ndarray:
        """Local poses (count, N, 10) in rig order, as of the last update or evaluate. The wide path keeps
        its groups' rows in its own lane layout and transposes them here, on the first read after an
        update, not on every update; until the first read ever, it does not even keep them (they stay in
        per-thread scratch, in cache), and that read rebuilds them (the same floats: see
        :func:`~skeletal.playback.wide.update_wide`).

        >>> crowd.update(1 / 60); crowd.local_pose[0, 0]   # doctest: +SKIP
        """
        self._flush_lanes()
        return self._local_pose

    @local_pose.setter
    def local_pose(self, value: np.ndarray) -> None:
        self._pose_lanes = None  # a new array: nothing stale to transpose into it
        self._local_pose = value
        self.frame = None

    def _flush_lanes(self) -> None:
        """Write the wide groups' rows of the last update (kept in the lane layout) into ``local_pose``:
        before a read, and before a kernel that reads the poses or a new frame replaces the lane store."""
        frame = self._pose_lanes
        if frame is not None:
            self._pose_lanes = None
            # instances of wide groups posed on their own (an inertialized transition): their pose, not the lane's
            alone = self._inertia.reposed()
            kept = self._local_pose[alone]
            lanes_to_pose(_lane_store(frame), frame.wide_arrays["done"], self._local_pose)
            self._local_pose[alone] = kept

    def _compiles_update_now(self) -> bool:
        return not self._wide_ok()  # a wide crowd compiles the per-instance update when a group first needs it

    def _step(self, dt: float) -> int:
        """Clocks, poses, world matrices and palettes of every instance in one parallel kernel: the
        wide one (16 instances per SIMD lane group) when this crowd's state allows it."""
        if not self._wide_ok():
            self._flush_lanes()  # rows the wide path left in its lane store: the kernels may read them
            return super()._step(dt)
        return self._run_wide(dt, _UPDATE)

    def _run_wide(self, dt: float, mode: int) -> int:
        """:func:`~skeletal.playback.wide.update_wide` on this crowd's frame (built when missing or stale,
        its wide job with it), ``mode`` _UPDATE (advance by ``dt``, then pose) or _EVALUATE (pose the
        clocks as they are). Returns the event count."""
        frame = self.current_frame()
        if frame.wide is None:
            self._flush_lanes()  # the old lane store's rows, before it goes
            frame.wide_arrays = self._wide_arrays()
            frame.wide = wide_job(**frame.wide_arrays)
            frame.wide_call = entry(update_wide, frame.job, frame.ik, frame.wide, 0.0, 0)
        with capped_threads():  # fewer threads while other processes keep the CPUs busy (_threads.busy_cap)
            events = frame.step_wide(dt, mode)
        self._pose_lanes = frame  # local_pose: transposed (or rebuilt) from this frame's arrays when read
        return events

    def _wide_arrays(self) -> dict[str, Any]:
        """The fields of this crowd's :class:`~skeletal.playback.jobs.WideJob`: the clips' wide tables
        and the lane layout's state and scratch (see :func:`~skeletal.playback.wide.update_wide`)."""
        clip_table, segments, _, _ = self._clip_tables()
        cs = self.clipset
        wide_clip = wide_clips(clip_table, segments, cs.timeline_keys, cs.track_table)
        packed, seg_table, dest = key_major(clip_table, segments, cs.timeline_keys, cs.track_table, cs.values, wide_clip)
        angles = slerp_angles(clip_table, segments, cs.track_table, cs.timeline_keys, cs.values, wide_clip,
                              max(int(cs.key_start[-1]), 1))
        threads = numba.config.NUMBA_NUM_THREADS
        rows = len(self.rig) * 10 * LANES
        timelines = max(cs.max_timelines, 1)
        widest = max(int((segments[:, 1] - segments[:, 0]).max(initial=1)) * 4, 1) * LANES
        groups = self.count // LANES
        ik_joints = 0 if self._ik is None else len(self._ik.table.joints)
        # the arrays the kernels write start on a cache line (skeletal._aligned): a vector of LANES float32
        # lanes is then one line, never two
        return dict(
            lanes=LANES, wide_clip=wide_clip, packed=packed, seg_table=seg_table, dest=dest, slerp_angles=angles,
            store=aligned_zeros((0, rows), np.float32),  # the lane store: no rows until local_pose is read
            held=np.full((groups, 1), -1, np.int64),  # the clip whose constant rows a store slice holds
            done=aligned_zeros(groups, np.uint8),  # groups posed wide (their local_pose rows are not in pose)
            sample_t=aligned_zeros(self.count),  # each instance's sample time in a wide group
            group_clip=aligned_zeros(groups, np.int64),  # each wide group's clip
            ik_rows=aligned_zeros((groups, ik_joints * 4 * LANES), np.float32),  # the rotations IK left
            # per thread (each thread's part at least a cache line past the previous one's last write,
            # so that no line is written by two threads)
            rows=aligned_zeros((threads, rows), np.float32),  # local rows, per thread until the store has rows
            held_rows=np.full((threads, 1), -1, np.int64),  # the clip whose constant rows each thread's hold
            # world rows, then a copy of one node's rows (wide._world_row's parent rows)
            world_rows=aligned_zeros((threads, (len(self.rig) + 1) * 12 * LANES), np.float32),
            palette_rows=aligned_zeros((threads, max(len(self.palette_joints), 1) * 12 * LANES), np.float32),
            keys=aligned_zeros((threads, timelines + 1, LANES), np.int64),  # a row of padding after each thread's
            fractions=aligned_zeros((threads, timelines + 1, LANES), np.float32),
            samples=aligned_zeros((threads, widest + LANES), np.float32),  # one segment's samples, every lane
            ik_scratch=aligned_zeros((threads, T_ROWS * LANES)),  # IK: inputs and results per lane
        )

    def evaluate(self) -> None:
        """Blend the actions into local poses, then world matrices (IK) and palettes in one fused kernel
        (the wide one when the state allows it: a crowd then never compiles the per-instance kernel,
        half of its cold start)."""
        self._flush_lanes()  # the wide path's rows first: the kernel may read them
        if not self._wide_ok():
            super().evaluate()
        elif self._ik is None and self.slot_clip.size == 0:
            self._rest_outputs()  # nothing has played yet (the constructor): no kernel to compile
        else:
            self._run_wide(0.0, _EVALUATE)

    def _rest_outputs(self) -> None:
        """Every instance at the rest pose: the palettes of the rest pose's world matrices (computed once,
        in float64, rounded to the palettes' dtype), copied to every instance. The constructor's
        evaluation, so that building a crowd compiles nothing but the small world-matrix kernel: the
        update kernel its first update needs (with the IK stages added by then) compiles once, then."""
        self.local_pose[:] = self.rig.rest
        self.morph_weights[:] = self.asset.rest_morph
        world = world_matrices(self.rig.parents, self.rig.rest.astype(np.float64))
        inverse_bind = np.zeros((len(self.palette_joints), 4, 4))
        inverse_bind[:, :3, :] = self.inverse_bind34
        inverse_bind[:, 3, 3] = 1.0
        self.palettes[:] = (world[self.palette_joints] @ inverse_bind)[:, :3, :]

    @property
    def world(self) -> np.ndarray:
        """World matrices (count, N, 4, 4) in rig order, built on demand from ``world34`` (needs
        ``keep_world=True``)."""
        if not self._keep_world:
            raise AttributeError("Crowd(keep_world=False) keeps no world matrices: pass keep_world=True")
        out = np.zeros(self.world34.shape[:2] + (4, 4), dtype=self.dtype)
        out[..., :3, :] = self.world34
        out[..., 3, 3] = 1.0
        return out

    def play(self, clip: str | int | Clip, *, offsets: float | npt.ArrayLike = 0.0, speeds: float | npt.ArrayLike = 1.0,
             weights: float | npt.ArrayLike = 1.0, layer: int = 0,
             fade: float = 0.0, loop: str = "repeat", repetitions: float = math.inf, restart: bool = False,
             instances: InstanceSelector = None, **legacy: Any) -> int:
        """Play ``clip`` on every selected instance; ``offsets`` (start times), ``speeds`` and
        ``weights`` are scalars or per-instance arrays."""
        offsets = legacy.pop("offset", offsets)
        speeds = legacy.pop("speed", speeds)
        weights = legacy.pop("weight", weights)
        if legacy:
            raise TypeError(f"unexpected arguments: {', '.join(legacy)}")
        return super().play(clip, layer=layer, fade=fade, loop=loop, speed=speeds, weight=weights, offset=offsets,
                            repetitions=repetitions, restart=restart, instances=instances)

    def switch(self, clips: Any, duration: float = 0.2, *, blend: str = "dead_blend", offsets: float | npt.ArrayLike = 0.0,
               instances: InstanceSelector = None, layer: int = 0) -> None:
        """Switch the selected instances, each to its own clip (``clips``: one clip, or one per selected
        instance) starting at ``offsets``, in one inertialized switch (``blend`` as
        :meth:`~skeletal.playback.mixer.Mixer.crossfade` takes; "dead_blend" by default): the result of
        one ``crossfade(clip, duration, blend=blend, offset=..., restart=True, instances=...)`` per
        clip, at the cost of one (see
        :func:`skeletal.playback.locomotion.mixer_hook.switch_many`).

        >>> crowd.switch(["run_forward", "walk_forward"], 0.2, offsets=[0.4, 1.1], instances=[3, 17])  # doctest: +SKIP
        """
        from .locomotion.mixer_hook import switch_many

        switch_many(self, clips, duration, blend, offsets=offsets, instances=instances, layer=layer)


def _lane_store(frame: Frame) -> np.ndarray:
    """The wide path's lane store (groups, N * 10 * LANES) of a crowd's ``frame``, holding the local rows
    of the last update's wide groups. Until ``Crowd.local_pose`` is first read, updates keep those rows
    in per-thread scratch (in cache) and record only each group's clip and its instances' sample times
    (and the rotations IK set): the first read allocates the store and rebuilds the rows into it (a
    sampling pass: the same floats), and from then on updates write the store directly, so that
    reading the poses every frame costs one transpose."""
    arrays = frame.wide_arrays
    if arrays["store"].shape[0] == 0:
        arrays["store"] = aligned_zeros((len(arrays["done"]), arrays["store"].shape[1]), np.float32)
        arrays["held"][:] = -1
        frame.wide = wide_job(**arrays)
        frame.step_wide(0.0, _REBUILD_ROWS)  # the last update's rows, nothing else
    return arrays["store"]
