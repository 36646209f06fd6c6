"""Playback jobs: the named bundles of arrays the compiled playback kernels run on.

A *job* is one numba structref holding a kernel's arrays under names (the fields below), validated
once when it is built (:mod:`skeletal.playback.validate`: shapes, dtypes, index ranges); the Python
side builds it from a mixer's state (:meth:`skeletal.Mixer.build_frame`) and rebuilds it only when
one of those arrays is replaced (a slot, layer or IK stage added, a clip set grown), so a frame's
call unboxes one object instead of dozens of arrays, a fraction of their cost. Inside a kernel,
fields are read with :func:`field` (``field(job, "tracks")``): ``job.tracks`` takes an atomic
reference per array read. (Measurements: docs/guides/performance.md.)

>>> job = playback_job(tracks=..., clip_table=..., ...)                 # doctest: +SKIP
>>> call = entry(kernels.update, job, None, 1 / 60, kernels.ALL)         # doctest: +SKIP
>>> events = call(job, None, 1 / 60, kernels.ALL)                       # doctest: +SKIP

Fields of a :class:`PlaybackJob` (B instances, S action slots, N rig nodes, M morph weights, J
palette joints, T threads; clip tables as :class:`~skeletal.playback.clipset.ClipSet` packs them):

========================  =====================================================================
clip data                 ``tracks`` (track table), ``hot_tracks`` (the columns the single-action
                          path reads: :func:`~skeletal.playback.kernels.hot_tracks`),
                          ``clip_table`` and ``segments`` (for the mixer's nlerp limit),
                          ``timeline_keys``, ``times``, ``values``, ``base_pose`` (C, N, 10),
                          ``base_morph`` (C, M), ``clip_duration`` (C,), ``marker_time``,
                          ``slerp_keys`` (keys, 2) per-key slerp angles, the near keys' tests in
                          column 1 (:func:`~skeletal.quat.near_slerp_table`); ``lanes_values``,
                          ``lanes_coef``, ``lanes_out``, ``lanes_kind``, ``lanes_seg`` and
                          ``lerp_values``, ``lerp_out``, ``lerp_seg``: the slerp and LINEAR vector
                          segments packed eight tracks a vector (:mod:`~skeletal.playback.single_lanes`);
                          ``base_rows``, ``base_rows_start``: per clip, the base pose rows that
                          path copies (:func:`~skeletal.playback.single_lanes.base_rows`)
actions                   ``slot_clip`` (S,), ``slot_layer`` (S,), ``fs`` (B, S, NF) float fields,
                          ``ist`` (B, S, NI) int fields, ``cursors`` (B, timelines) key hints
layers                    ``layer_weight`` (B, layers), ``layer_mask`` (layers, N),
                          ``layer_additive`` (layers,), ``base_unmasked`` (the base layer's mask is
                          all ones: the single-action fast path is allowed)
snapshot                  ``snap_weight`` (B,), ``snap_pose`` (B, N, 10), ``snap_morph`` (B, M)
rig                       ``rest`` (N, 10), ``rest_morph`` (M,), ``morph_start`` (N,), ``parents``
per-thread scratch        ``acc`` (T, N, ACC_WIDTH), ``accm`` (T, M, 2), ``tmp`` (T, 64),
                          ``locs`` (T, timelines per clip, 3), ``scratch_world`` (T, N, 3|4, 4)
outputs                   ``pose`` (B, N, 10), ``morph`` (B, M); world rows of ``world_nodes``
                          (ascending, ancestors included) into ``worlds`` (B, N, 3|4, 4), or into
                          ``scratch_world`` when ``worlds`` is empty; ``palettes`` (B, J, 3|4, 4) =
                          ``world[palette_joints[j]] @ inverse_bind[j]``
inertialization           ``inert_state`` (B, 4) int64, ``inert_clock`` (B, 5), ``inert_offset`` and
                          ``inert_velocity`` (B, N, 9), ``inert_source`` and ``inert_anchor`` (B, N,
                          10), ``inert_joints`` (B, L) int64, ``inert_x`` and ``inert_v`` (B, 9 * L),
                          ``inert_scratch`` (T, 2, 9 * L) (L: N rounded up to 8): the stage between blending and world
                          rows (:func:`~skeletal.playback.inertia_kernels.inertialize_instance`); zero
                          rows (no transition ever started) skip it
========================  =====================================================================

A :class:`FootJob` holds a foot-placement stage's arrays (``FOOT_FIELDS``; see
:class:`skeletal.playback.footplacement.FootPlacement`), a :class:`LookJob` a few characters' look-at
stage (``LOOK_FIELDS``), a :class:`FusedJob` the three jobs of one character's planned frame (and its stages' fixed
arguments), and a
:class:`WideJob` a crowd's wide path (``WIDE_FIELDS``; see :mod:`skeletal.playback.wide`).

An :class:`IKJob` holds a mixer's IK stage table (see :mod:`skeletal.ik`): ``stage_i``, ``stage_f``,
``joints``, ``jp``, ``inputs`` (B, stages, IN_WIDTH), ``update``, and the per-thread ``scratch`` /
``pos``. Kernels take it as a second argument, or ``None`` for no IK (the IK branch is then pruned
at compile time: a plain player never compiles the solvers).
"""

from __future__ import annotations

from typing import Callable

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.experimental import structref
from numba.core.datamodel import models
from numba.extending import NativeValue, box, intrinsic, register_model, unbox

PLAYBACK_FIELDS = (
    # clip data
    "tracks", "hot_tracks", "clip_table", "segments", "timeline_keys", "times", "values", "base_pose",
    "base_morph", "clip_duration", "marker_time", "slerp_keys",
    # the single-action path's rotation segments, eight tracks a vector (playback/single_lanes.py)
    "lanes_values", "lanes_coef", "lanes_out", "lanes_kind", "lanes_seg", "lerp_values", "lerp_out", "lerp_seg",
    "base_rows", "base_rows_start",
    # actions
    "slot_clip", "slot_layer", "fs", "ist", "cursors",
    # layers
    "layer_weight", "layer_mask", "layer_additive", "base_unmasked",
    # snapshot
    "snap_weight", "snap_pose", "snap_morph",
    # rig
    "rest", "rest_morph", "morph_start", "parents",
    # per-thread scratch
    "acc", "accm", "tmp", "locs", "scratch_world",
    # outputs
    "pose", "morph", "world_nodes", "worlds", "palette_joints", "inverse_bind", "palettes",
    # inertialized transitions (zero rows until a mixer's first inertialized switch)
    "inert_state", "inert_clock", "inert_offset", "inert_velocity", "inert_source", "inert_anchor", "inert_joints",
    "inert_x", "inert_v", "inert_scratch",
)

IK_FIELDS = ("stage_i", "stage_f", "joints", "jp", "inputs", "update", "scratch", "pos")

#: a :class:`WideJob`'s fields: the crowd's wide path (:mod:`skeletal.playback.wide`), G full groups of
#: LANES instances, T threads, R = N * 10 * LANES local rows of a group
WIDE_FIELDS = (
    # LANES as a run-time value (so that LLVM vectorises the lane loops instead of unrolling them)
    "lanes",
    # the clips: which can go wide (C,), their LINEAR segments key-major (see wide.key_major), the
    # SLERP segments' key angles (keys, 2) (see wide.slerp_angles)
    "wide_clip", "packed", "seg_table", "dest", "slerp_angles",
    # per full group: the lane store (G or 0, R), the clip its constant rows hold (G, 1), posed wide (G,),
    # each instance's sample time (B,), each group's clip (G,), the rotations IK left (G, ...)
    "store", "held", "done", "sample_t", "group_clip", "ik_rows",
    # per thread: local rows while there is no store (T, R) and their clip (T, 1), world rows, palette
    # rows, key indices and fractions (T, timelines, LANES), one segment's samples, IK scratch
    "rows", "held_rows", "world_rows", "palette_rows", "keys", "fractions", "samples", "ik_scratch",
)

#: a :class:`LookJob`'s fields: the look-at stage of a few characters
#: (:func:`skeletal.playback.lookat.look_kernel`)
LOOK_FIELDS = ("pose", "world", "parents", "stage_i", "stage_f", "joints", "jp", "inputs", "update", "scratch",
               "placement", "target", "smoothed", "velocity", "weight", "pal", "pal_joints", "inv_bind", "pal_idx")

#: a :class:`JiggleJob`'s fields: spring chains (:func:`skeletal.playback.springs.jiggle_kernel`)
JIGGLE_FIELDS = ("world", "placement", "pose", "parents", "chain_start", "joints", "stiffness", "damping", "gravity",
                 "pos", "vel", "rest_len", "initialised", "weight")

#: a :class:`FusedJob`'s fields: the jobs of one character's planned frame (the mixer's PlaybackJob, the
#: FootJob, the LookJob) and the stages' fixed arguments (foot placement's ``chunks``, look-at's ``mode``,
#: ``omega`` and ``keep``: see :func:`skeletal.playback.procedural._frame_py`), so a frame's call passes
#: only the job, the IK job and dt
FUSED_FIELDS = ("update", "foot", "look", "chunks", "mode", "omega", "keep")

#: a :class:`FootJob`'s fields: see :func:`skeletal.playback.footplacement.foot_kernel` for each
FOOT_FIELDS = (
    # the pose it edits and the rig
    "pose", "world", "parents", "placement",
    # legs (3, L) thigh/knee/foot, the pelvis, the world rows each part needs
    "legs", "pelvis", "pelvis_nodes", "leg_nodes", "leg_start",
    # the mixer's actions and the clips' contact tables
    "fs", "slot_clip", "slot_additive", "tables", "frames", "fps", "durations", "looping",
    # the ground (kind, parameters, height grid), the per-frame queries and the points last queried
    "g_kind", "g_params", "g_grid", "heights", "normals", "queried",
    # per-instance state: contacts, ankle heights, leg lengths, scalars (floor, reach, omega, dt, soft,
    # max tilt, fresh, palettes), weights, pelvis spring, plants and locks, targets, pelvis offset
    "contact", "ankle", "leg_len", "scalars", "weight", "state", "initialised", "plant", "locked", "lock",
    "targets", "pelvis_offset",
    # the skin palettes kept current (entries under the pelvis and each leg)
    "pal", "pal_joints", "inv_bind", "pal_idx", "pal_start",
    # the world rows the stage builds itself after an update without its WORLD stage (phase 3)
    "probe_nodes", "world_nodes",
    # scratch of a call over one range of instances (a few characters' serial twin, or one thread)
    "wave_scratch", "lane_in", "lane_out", "solve_scratch",
)


class _Fields(types.StructRef):
    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(t)) for name, t in fields)


@structref.register
class PlaybackJobType(_Fields):
    """numba type of a :class:`PlaybackJob` (one per combination of field types)."""


@structref.register
class IKJobType(_Fields):
    """numba type of an :class:`IKJob`."""


@structref.register
class FootJobType(_Fields):
    """numba type of a :class:`FootJob`."""


@structref.register
class WideJobType(_Fields):
    """numba type of a :class:`WideJob`."""


@structref.register
class LookJobType(_Fields):
    """numba type of a :class:`LookJob`."""


@structref.register
class JiggleJobType(_Fields):
    """numba type of a :class:`JiggleJob`."""


@structref.register
class FusedJobType(_Fields):
    """numba type of a :class:`FusedJob`."""


class PlaybackJob(structref.StructRefProxy):
    """The arrays one playback update reads and writes, by name (see the module docstring).
    Build with :func:`playback_job`; fields are read inside compiled kernels only."""


class IKJob(structref.StructRefProxy):
    """A mixer's IK stage table and inputs (see the module docstring). Build with :func:`ik_job`."""


class FootJob(structref.StructRefProxy):
    """A foot-placement stage's arrays (``FOOT_FIELDS``). Build with :func:`foot_job`."""


class WideJob(structref.StructRefProxy):
    """A crowd's wide-path arrays (``WIDE_FIELDS``). Build with :func:`wide_job`."""


class LookJob(structref.StructRefProxy):
    """A few characters' look-at stage (``LOOK_FIELDS``). Build with :func:`look_job`."""


class JiggleJob(structref.StructRefProxy):
    """Spring chains' arrays and state (``JIGGLE_FIELDS``). Build with :func:`jiggle_job`."""


class FusedJob(structref.StructRefProxy):
    """The three jobs of one character's planned frame and its stages' fixed arguments (``FUSED_FIELDS``).
    Build with :func:`fused_job`."""


def _define_boxing(struct_type, proxy_class) -> None:
    """Boxing and unboxing of a job type: numba's structref boxing, with an unboxer that reads the
    proxy's ``_meminfo`` through a name interned once per process. numba's own unboxer calls
    ``PyObject_GetAttrString(obj, "_meminfo")``, which makes a new string and misses the type's
    attribute cache on every call (a third of a small entry point's call). An object without
    ``_meminfo`` raises AttributeError (numba's went on with a null)."""

    @box(struct_type)
    def _box(typ, val, c):
        meminfo = structref._Utils(c.context, c.builder, typ).get_struct_ref(val).meminfo
        boxed = c.box(types.MemInfoPointer(types.voidptr), meminfo)
        ctor = c.pyapi.unserialize(c.pyapi.serialize_object(proxy_class._numba_box_))
        typ_obj = c.pyapi.unserialize(c.pyapi.serialize_object(typ))
        result = c.pyapi.call_function_objargs(ctor, [typ_obj, boxed])
        c.pyapi.decref(ctor)
        c.pyapi.decref(typ_obj)
        c.pyapi.decref(boxed)
        return result

    @unbox(struct_type)
    def _unbox(typ, obj, c):
        builder, pyapi = c.builder, c.pyapi
        module = builder.module
        # the interned name, made on the first call (the wrapper holds the GIL) and kept for good
        cache = module.globals.get(_MEMINFO_NAME_GLOBAL)
        if cache is None:
            cache = ir.GlobalVariable(module, pyapi.pyobj, _MEMINFO_NAME_GLOBAL)
            cache.linkage = "internal"
            cache.initializer = ir.Constant(pyapi.pyobj, None)
        with builder.if_then(cgutils.is_null(builder, builder.load(cache)), likely=False):
            intern = pyapi._get_function(ir.FunctionType(pyapi.pyobj, [pyapi.cstring]), name="PyUnicode_InternFromString")
            builder.store(builder.call(intern, [c.context.insert_const_string(module, "_meminfo")]), cache)
        mi_obj = pyapi.object_getattr(obj, builder.load(cache))  # a new reference, or null with an exception set
        failed = cgutils.is_null(builder, mi_obj)
        out = cgutils.alloca_once_value(builder, cgutils.get_null_value(c.context.get_value_type(typ)))
        with builder.if_then(builder.not_(failed), likely=True):
            meminfo = pyapi.nrt_meminfo_from_pyobject(mi_obj)  # acquired: the wrapper releases it after the call
            builder.store(structref._Utils(c.context, c.builder, typ).new_struct_ref(meminfo)._getvalue(), out)
            pyapi.decref(mi_obj)
        return NativeValue(builder.load(out), is_error=failed)


_MEMINFO_NAME_GLOBAL = "skeletal_jobs_meminfo_name"

for _proxy, _type, _fields in ((PlaybackJob, PlaybackJobType, PLAYBACK_FIELDS), (IKJob, IKJobType, IK_FIELDS),
                               (FootJob, FootJobType, FOOT_FIELDS), (WideJob, WideJobType, WIDE_FIELDS),
                               (LookJob, LookJobType, LOOK_FIELDS), (JiggleJob, JiggleJobType, JIGGLE_FIELDS),
                               (FusedJob, FusedJobType, FUSED_FIELDS)):
    structref.define_constructor(_proxy, _type, list(_fields))
    _define_boxing(_type, _proxy)


class BorrowedJob(types.Type):
    """numba type of a job read through a plain pointer to its fields (:func:`borrow`): no reference
    count, so passing it to a function (inlined or not) or assigning it takes no atomic operation.
    :func:`field` reads it as it reads the job."""

    def __init__(self, job_type):
        self.job_type = job_type
        super().__init__(name=f"Borrowed({job_type.name})")

    @property
    def field_dict(self):
        return self.job_type.field_dict


@register_model(BorrowedJob)
class _BorrowedJobModel(models.OpaqueModel):
    """A pointer to the job's fields (its structref's payload)."""


@intrinsic
def borrow(typingctx, job):
    """``job`` (a job, or a job already borrowed) as a :class:`BorrowedJob`: the pointer to its fields.
    A structref passed on inside a kernel takes an atomic reference at each assignment and call that
    numba cannot prove it may skip -- several per character in the per-instance bodies, and on two
    threads every one of them contends for the same cache line (the shared job's reference count).
    Contract: ``job`` outlives every use of the result (an argument of the kernel that borrows it).

    >>> clock_and_blend(b, tid, borrow(job), dt, stages)     # inside an @njit kernel  # doctest: +SKIP
    """
    if isinstance(job, BorrowedJob):
        return job(job), lambda context, builder, signature, args: args[0]
    if not isinstance(job, types.StructRef):
        return None

    def codegen(context, builder, signature, args):
        data = structref._Utils(context, builder, job).get_data_pointer(args[0])
        return builder.bitcast(data, context.get_value_type(signature.return_type))

    return BorrowedJob(job)(job), codegen


def _payload(context, builder, job, value):
    """The fields of ``value``, a job (structref) or a :class:`BorrowedJob`, as a struct proxy."""
    if isinstance(job, BorrowedJob):
        data_type = job.job_type.get_data_type()
        pointer = builder.bitcast(value, context.data_model_manager[data_type].get_value_type().as_pointer())
        return cgutils.create_struct_proxy(data_type)(context, builder, ref=pointer)
    return structref._Utils(context, builder, job).get_data_struct(value)


@intrinsic
def field(typingctx, job, name):
    """``job.<name>`` read inside a compiled kernel without taking a reference: for a field that holds
    an array, the array comes back with no owner (a null NRT meminfo; numba's reference counting
    skips those), so the read costs two loads instead of an atomic increment now and an atomic
    decrement when the variable dies (a quarter of the cost of ``job.<name>`` for a whole job's
    fields). Contract: the job outlives the kernel call (it is an
    argument), its fields are not reassigned during it, and neither the array nor a view of it
    escapes the call (returned, stored in a container or another job). ``name`` is a string
    constant. Other field types (bool) are returned as they are.

    >>> tracks = field(job, "tracks")     # inside an @njit kernel          # doctest: +SKIP
    """
    if not isinstance(job, (types.StructRef, BorrowedJob)) or not isinstance(name, types.StringLiteral):
        return None
    attr = name.literal_value
    fieldtype = job.field_dict[attr]

    def codegen(context, builder, signature, args):
        payload = _payload(context, builder, job, args[0])
        value = getattr(payload, attr)
        if not isinstance(fieldtype, types.Array):
            return value
        array = context.make_array(fieldtype)(context, builder, value)
        array.meminfo = cgutils.get_null_value(array.meminfo.type)
        array.parent = cgutils.get_null_value(array.parent.type)
        return array._getvalue()

    return fieldtype(job, name), codegen


# Cached constructors. Calling a proxy class (``PlaybackJob(*values)``) goes through a constructor that
# numba compiles again in every new process (most of a warm start's first frame); the
# same construction inside a cached function is compiled once and loaded from the disk cache after.
@njit(cache=True)
def _new_playback_job(*values):
    return PlaybackJob(*values)


@njit(cache=True)
def _new_ik_job(*values):
    return IKJob(*values)


@njit(cache=True)
def _new_foot_job(*values):
    return FootJob(*values)


@njit(cache=True)
def _new_wide_job(*values):
    return WideJob(*values)


@njit(cache=True)
def _new_look_job(*values):
    return LookJob(*values)


@njit(cache=True)
def _new_jiggle_job(*values):
    return JiggleJob(*values)


@njit(cache=True)
def _new_fused_job(*values):
    return FusedJob(*values)


def _check(kind: str, fields: tuple, given: dict) -> list:
    missing = [f for f in fields if f not in given]
    extra = [f for f in given if f not in fields]
    if missing or extra:
        raise TypeError(f"{kind}: missing fields {missing}, unknown fields {extra}")
    values = []
    for name in fields:
        value = given[name]
        if isinstance(value, np.ndarray) and not (value.flags.c_contiguous or value.size == 0):
            value = np.ascontiguousarray(value)  # one array layout per field: one compiled kernel
        values.append(value)
    return values


def playback_job(**fields) -> PlaybackJob:
    """A :class:`PlaybackJob` from its named arrays (every field of ``PLAYBACK_FIELDS``, by name).

    >>> job = playback_job(**mixer._job_fields())                         # doctest: +SKIP
    """
    values = _check("PlaybackJob", PLAYBACK_FIELDS, fields)
    validate_playback(dict(zip(PLAYBACK_FIELDS, values)))
    return _new_playback_job(*values)


def ik_job(**fields) -> IKJob:
    """An :class:`IKJob` from its named arrays (every field of ``IK_FIELDS``)."""
    values = _check("IKJob", IK_FIELDS, fields)
    validate_ik(dict(zip(IK_FIELDS, values)))
    return _new_ik_job(*values)


def foot_job(**fields) -> FootJob:
    """A :class:`FootJob` from its named arrays (every field of ``FOOT_FIELDS``)."""
    values = _check("FootJob", FOOT_FIELDS, fields)
    validate_foot(dict(zip(FOOT_FIELDS, values)))
    return _new_foot_job(*values)


def wide_job(**fields) -> WideJob:
    """A :class:`WideJob` from its named arrays (every field of ``WIDE_FIELDS``)."""
    values = _check("WideJob", WIDE_FIELDS, fields)
    validate_wide(dict(zip(WIDE_FIELDS, values)))
    return _new_wide_job(*values)


def look_job(**fields) -> LookJob:
    """A :class:`LookJob` from its named arrays (every field of ``LOOK_FIELDS``)."""
    values = _check("LookJob", LOOK_FIELDS, fields)
    validate_look(dict(zip(LOOK_FIELDS, values)))
    return _new_look_job(*values)


def jiggle_job(**fields) -> JiggleJob:
    """A :class:`JiggleJob` from its named arrays (every field of ``JIGGLE_FIELDS``)."""
    values = _check("JiggleJob", JIGGLE_FIELDS, fields)
    validate_jiggle(dict(zip(JIGGLE_FIELDS, values)))
    return _new_jiggle_job(*values)


def fused_job(update: PlaybackJob, foot: FootJob, look: LookJob, chunks: int, mode: int, omega: float,
              keep: bool) -> FusedJob:
    """A :class:`FusedJob` of the three jobs of one character's planned frame and its stages' fixed
    arguments (``FUSED_FIELDS``; typed int64, int64, float64, bool whatever number types are given)."""
    return _new_fused_job(update, foot, look, int(chunks), int(mode), float(omega), bool(keep))


def entry(kernel, *args) -> Callable:
    """The compiled entry point of ``kernel`` for the types of ``args`` (compiling or loading it from
    the cache on first use): calling it skips the dispatcher's per-call type resolution. The caller
    must keep passing arguments of the same types (a job is typed by its fields; scalars as
    ``float``/``int``/``bool``); otherwise call ``kernel`` itself."""
    from numba import typeof

    sig = tuple(typeof(a) for a in args)
    cres = kernel.overloads.get(sig)
    if cres is None:
        kernel.compile(sig)  # compile, or load from the on-disk cache; nothing runs
        cres = kernel.overloads.get(sig)
        if cres is None:  # a signature numba resolved differently: stay with the dispatcher
            return kernel
    return cres.entry_point


from .validate import (validate_foot, validate_ik, validate_jiggle, validate_look, validate_playback,  # noqa: E402
                       validate_wide)

__all__ = ["PLAYBACK_FIELDS", "IK_FIELDS", "FOOT_FIELDS", "WIDE_FIELDS", "LOOK_FIELDS", "JIGGLE_FIELDS", "FUSED_FIELDS",
           "PlaybackJob", "IKJob", "FootJob", "WideJob", "LookJob", "JiggleJob", "FusedJob", "PlaybackJobType",
           "IKJobType", "FootJobType", "WideJobType", "LookJobType", "JiggleJobType", "FusedJobType", "playback_job",
           "ik_job", "foot_job", "wide_job", "look_job", "jiggle_job", "fused_job", "entry", "field", "borrow",
           "BorrowedJob"]
