"""Foot placement, a procedural stage (:meth:`skeletal.playback.procedural.Procedural.foot_placement`):
the legs of a walking clip follow a ground. Holds :class:`FootPlacement`, its compiled stage
(:func:`foot_kernel`, one call for the whole batch, in parallel over ranges of instances or as its
serial twin) and the split of the batch over threads (:func:`_foot_chunks`); a range's work is
:mod:`.footrange`'s (:func:`~.footrange.foot_range`), the contact weights it reads from the clips
:mod:`.footcontact`'s (:func:`~.footcontact._contact_one`), the legs' IK in lanes :mod:`.footlanes`'.

Frames: the pose stays model space, grounds and foot targets are world coordinates through the
driver's ``placement`` (B, 4, 4); quaternions xyzw; matrices row-major acting on column vectors.

``proc`` (the stage's owner) is the :class:`~skeletal.playback.procedural.Procedural` driver, typed ``Any``
here: the driver imports this module, so it cannot import the driver back.
"""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np
from numba import njit, prange

from .._aligned import aligned_copy, aligned_zeros
from .._compile import serial_variant
from .._threads import capped_threads, thread_count
from ..errors import SkeletalError
from ..anim.pose import depth_order, world_matrices
from .footrange import foot_range
from .jobs import entry, field, foot_job
from .contacts import ContactPhases, Leg, detect_contacts, find_legs
from .footlanes import LW, thread_scratch
from .ground import GROUND_TERRAIN, Ground, as_ground
from .procstage import SERIAL_BELOW, PlanInput, _LastFrame, _drop_plan


@njit(cache=True, parallel=True)
def foot_kernel(job, phase, chunks, update):
    """Foot placement for every instance of a :class:`~skeletal.playback.jobs.FootJob` (see
    :class:`FootPlacement`), one compiled call for the whole stage: contact weights, world rows,
    planted-foot locks, ground query, pelvis spring, leg IK. In parallel over ``chunks`` ranges of
    instances (whole blocks of characters, in order; a few per thread, see :func:`_foot_chunks`); a few
    characters run its serial twin (:func:`skeletal._compile.serial_variant`: the same body,
    ``prange`` as ``range``). Each range is one call of :func:`.footrange.foot_range`, given the job (whose
    arrays it reads without references) rather than its arrays: a call of a numba function takes a
    reference on every array it is given (two atomic operations each, some 40 arrays, contended
    between threads on the shared arrays), so the per-instance work is written out there, not called
    per instance. Characters go in blocks of ``footlanes.LW // legs``: each one's work up to the legs'
    IK (inputs gathered), the block's legs solved in SIMD lanes (:mod:`.footlanes`), then each one's
    rotations, legs' rows and palettes.

    ``phase``: 0 all of it (a built-in ground, queried by :func:`.ground.ground_at`); 1 only up to the
    foot targets' world (x, z) in ``targets`` (a Python ground is then queried there into
    ``heights``/``normals``); 2 the rest, from those heights; 3 all of it on a built-in ground after an
    update that ran without its WORLD stage (ADVANCE | BLEND): the world rows of ``probe_nodes`` alone
    (by depth: the pelvis' ancestors, the pelvis, the joints from it to the feet; what the pelvis' move
    and the legs' IK read), the pelvis moved in the pose, the leg IK given its joints' positions
    plus the pelvis' model-space move (phases 0-2 add the same vector to the rows: the same inputs,
    so the same pose bit for bit; the rows themselves are not moved, except before the scalar solver
    redoes a lane: :func:`.procstage._moved_rows`), then per character, right after its legs' rotations
    are written, the update's own world pass over ``world_nodes`` (every node, by depth) and every
    palette entry (``pal`` must be the mixer's own palettes): each row and entry of the final pose
    written once, while that character's rows are in the first cache level.
    pose (B, N, 10) float64 local rows, rewritten; world (B, N, 4, 4) their model-space matrices,
    kept current; placement (B, 4, 4) model -> world (a turn about +Y and a move); legs (3, L): thigh,
    knee and foot rig indices; pelvis: the joint moved up/down; leg_nodes[leg_start[l]:leg_start[l +
    1]]: each thigh's subtree, its chain to the foot first (world rows rebuilt), pelvis_nodes: the pelvis'
    subtree without them; fs .. looping: the mixer's slot state and the contact tables (:func:`.footcontact._contact_one`);
    g_kind, g_params, g_grid: :meth:`.ground.Ground.kernel_args`; heights (B, L), normals (B, L, 3):
    the ground under each foot target (world), written (phase 0) or read (phase 2); queried (B, L, 2)
    the world (x, z) that ``heights``/``normals`` hold the query of (NaN: none); a terrain is queried at
    each leg's point unless it is that one (a planted foot's lock), the block's points' sines and
    cosines in SIMD lanes (:func:`.ground.sincos_lanes`); contact (B, L)
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
    recomputed after its IK. ``update``: None (pruned), or (PlaybackJob, dt), phase 3: each block's clocks and blend
    first (:func:`~skeletal.playback.kernels.clock_and_blend`; :class:`~skeletal.playback.footframe.FootFrame`)."""
    # Everything a range reads is taken from the job inside the range's call: the parallel loop body's
    # live-in variables are what OpenMP's region is given, and each costs the launch (some 45 arrays:
    # ~0.9 us a frame on 2 threads, more than the few ns of reading them again per range).
    n = field(job, "pose").shape[0]
    chunks = max(min(n, chunks), 1)
    for c in prange(chunks):
        # (one type per argument, so that the serial twin and the parallel kernel share one compile of it)
        foot_range(job, np.int64(phase), np.int64(c), np.int64(chunks), update)


def _foot_chunks(count: int, threads: int) -> int:
    """How many instance ranges :func:`foot_kernel` hands out for ``count`` characters on ``threads`` of
    numba's pool: one per thread, split to the character as OpenMP's static schedule splits the playback
    update's ``prange`` over instances; one (its serial twin, in the calling thread) for a few characters
    or one thread (a parallel region on one thread costs more than the work). With more threads the
    stage runs in parallel even for a hundred characters, on as many threads as the playback update
    before it (:meth:`FootPlacement._run_parallel`): each character is then on the thread that updated
    it, its pose, world rows and palettes still in that core's cache; run on another thread, they are
    pulled from the other core and the next update pulls them back (twice the time:
    docs/guides/performance.md). Equal ranges, not whole blocks of characters: 100 characters in blocks
    of 8 split 48 / 52, and the frame waits on the longer range (4% more characters than an even half;
    a range may now end in a part block's lane pass instead). An argument, not computed in
    the kernel: ``numba.get_num_threads()`` inside it would keep its serial twin out of the cache.

    >>> _foot_chunks(100, 2), _foot_chunks(100, 1), _foot_chunks(3, 2)
    (2, 1, 1)
    """
    return max(1, min(count, threads)) if count > SERIAL_BELOW and threads > 1 else 1


def _chain_first(parents, thigh: int, foot: int, below: np.ndarray) -> np.ndarray:
    """A thigh's subtree (``below``: a mask over the rig) as rig indices: its thigh-to-``foot`` chain
    first, then the rest, each part ascending (still parents first: the kernel's phases 0-2 rebuild the rows
    in this order after the IK)."""
    chain, j = set(), foot
    while j != thigh and j >= 0:
        chain.add(j)
        j = int(parents[j])
    chain.add(thigh)
    nodes = np.flatnonzero(below)
    return np.concatenate([[k for k in nodes if k in chain], [k for k in nodes if k not in chain]]).astype(np.int64)


def common_parent(parents, thighs, stage: str = "foot placement") -> int:
    """The nearest joint above every thigh in ``thighs`` (the pelvis), by the rig's ``parents``;
    SkeletalError naming ``stage`` when the legs share none."""
    chains = []
    for t in thighs:
        up, j = [], int(parents[t])
        while j >= 0:
            up.append(j)
            j = int(parents[j])
        chains.append(up)
    common = [j for j in chains[0] if all(j in c for c in chains[1:])]
    if not common:
        raise SkeletalError(f"{stage}: the legs share no parent joint (pelvis)")
    return common[0]


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

    # the settings the plan's compiled call is built from: assigning one drops the driver's plan (the
    # ground too: its setter below); arrays changed in place need nothing
    plant = PlanInput[bool]()
    floor = PlanInput[float]()
    reach = PlanInput[float]()
    soft = PlanInput[float]()
    max_tilt = PlanInput[float]()
    omega = PlanInput[float]()
    weight = PlanInput[np.ndarray]()
    ankle = PlanInput[np.ndarray]()

    def __init__(self, proc: Any, ground="flat", *, legs=None, floor: float = 0.0, pelvis_smooth: float = 0.1,
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
        self.pelvis = common_parent(rig.parents, self.thighs)
        self.pelvis_nodes = np.flatnonzero(rig.descendants(self.pelvis)).astype(np.int64)
        parts = [_chain_first(rig.parents, int(l.thigh), int(l.foot), rig.descendants(int(l.thigh))) for l in self.legs]
        self.leg_nodes = np.concatenate(parts)
        # the kernel solves a block's legs before rebuilding any leg's rows: no leg may move another's
        if len(np.unique(self.leg_nodes)) != len(self.leg_nodes):
            raise SkeletalError("foot placement: one leg's thigh is inside another leg (the legs' joints overlap)")
        if len(self.legs) > LW:
            raise SkeletalError(f"foot placement: at most {LW} legs, got {len(self.legs)}")
        self.leg_start = np.cumsum([0] + [len(p) for p in parts]).astype(np.int64)
        # the kernel translates these rows with the pelvis, and the legs' own as it needs them
        self._body_nodes = np.setdiff1d(self.pelvis_nodes, self.leg_nodes).astype(np.int64)
        # after an update without its world pass (foot_kernel's phase 3): the rows that place the pelvis
        parents = rig.parents
        chains = set()  # the thigh-to-foot chains, and the joints from each thigh up to the pelvis
        for l in self.legs:
            j = int(l.foot)
            while j != self.pelvis:
                chains.add(j)
                j = int(parents[j])
        up = [self.pelvis]
        while parents[up[-1]] >= 0:
            up.append(int(parents[up[-1]]))
        # by depth: the pelvis' ancestors, the pelvis, then the rows below it (see foot_kernel's phase 3)
        self._probe_nodes = depth_order(parents, np.array(sorted(chains | set(up)), np.int64))
        # every row, by depth: the final pass after the legs' IK
        self._world_nodes = depth_order(parents, np.arange(len(parents), dtype=np.int64))
        rest = world_matrices(rig.parents, rig.rest)
        self.leg_length = np.array([np.linalg.norm(rest[l.knee, :3, 3] - rest[l.thigh, :3, 3])
                                    + np.linalg.norm(rest[l.foot, :3, 3] - rest[l.knee, :3, 3]) for l in self.legs])
        self.ankle = np.array([rest[l.foot, 1, 3] - self.floor for l in self.legs])  # until a clip says better
        self._legs = np.ascontiguousarray(np.stack([self.thighs, self.knees, self.feet]))
        # per-instance state, each array starting on a cache line (skeletal._aligned)
        self.state = aligned_zeros((b, 2))
        self.initialised = aligned_zeros(b, np.bool_)
        self.contact = aligned_copy(np.ones((b, n_legs)))
        self.targets = aligned_zeros((b, n_legs, 3))
        self.pelvis_offset = aligned_zeros(b)
        self.heights = aligned_zeros((b, n_legs))
        self.normals = aligned_zeros((b, n_legs, 3))
        self._queried = aligned_copy(np.full((b, n_legs, 2), np.nan))  # the (x, z) heights/normals hold a query of
        self.locked = aligned_zeros((b, n_legs), np.bool_)
        self.lock = aligned_zeros((b, n_legs, 2))
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
        _drop_plan(self)

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
                inv_bind=inv_bind, pal_idx=self._pal_idx, pal_start=self._pal_start,
                probe_nodes=self._probe_nodes, world_nodes=self._world_nodes,
                **thread_scratch(len(self.legs), int(params[1]) if kind == GROUND_TERRAIN else 0,
                                 numba.config.NUMBA_NUM_THREADS))
            # the serial twin's entry point for a few characters; for more the parallel kernel's (and the
            # serial twin's once a frame runs on one thread: not compiled before a cold start needs it)
            if proc.count > SERIAL_BELOW:
                serial, parallel = None, entry(foot_kernel, job, 0, 2, None)
            else:
                serial, parallel = entry(serial_variant(foot_kernel), job, 0, 1, None), None
            self.last.calls = (job, serial, parallel)
            self._args_from = (packed, pose, world, mixer.fs, self.weight, self._ground_args, self.plant, self.ankle,
                               proc.placement)
        job, serial, parallel = self.last.calls
        call = serial if parallel is None else self._run_parallel
        if kind >= 0:  # a built-in ground: one compiled call for the whole stage
            call(job, 0, 1, None)
            return
        call(job, 1, 1, None)  # up to the targets' (x, z), then the Python ground there, then the rest
        h, n = self._ground.height_normal(self.targets[..., 0], self.targets[..., 2])
        self.heights[...] = h
        self.normals[...] = n
        call(job, 2, 1, None)

    def _run_parallel(self, job, phase: int, _chunks: int = 0, _update: None = None) -> None:
        """The stage on more than a few characters: on the threads the playback update just used (numba's
        count, capped as the update caps it while other processes keep the CPUs busy), in
        :func:`_foot_chunks` ranges; on one thread, the serial twin (no parallel region)."""
        _, serial, parallel = self.last.calls
        with capped_threads():
            threads = thread_count()
            if threads > 1:
                parallel(job, phase, _foot_chunks(self.proc.count, threads), None)
                return
        if serial is None:
            serial = entry(serial_variant(foot_kernel), job, 0, 1, None)
            self.last.calls = (job, serial, parallel)
        serial(job, phase, 1, None)
