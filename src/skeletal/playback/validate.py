"""Checks a job's arrays once, when it is built: shapes that agree, dtypes the kernels were written for,
index arrays inside the ranges they index (the kernels read without bounds checks). A job that fails
raises :class:`~skeletal.errors.SkeletalError` naming the job and the field at fault, instead of a
kernel reading outside an array later.

Shapes are written with symbols bound on first sight: ``("B", "N", 10)`` binds B and N from the first
array checked and requires every later ``B`` / ``N`` to agree; ``None`` takes any length.

>>> validate_playback(mixer._job_fields())                          # doctest: +SKIP
"""

from __future__ import annotations

import numpy as np

from ..errors import SkeletalError

_FLOAT = "f"
_INT = "i"


class _Checker:
    """Binds shape symbols across one job's fields and reports the first mismatch."""

    def __init__(self, job: str, fields: dict):
        self.job = job
        self.fields = fields
        self.sizes: dict[str, int] = {}

    def fail(self, name: str, message: str) -> SkeletalError:
        return SkeletalError(f"{self.job}: field {name!r} {message}")

    def array(self, name: str, shape: tuple, kind: str | None = None, dtype: type | None = None) -> np.ndarray:
        """The field ``name``, checked against ``shape`` (ints, symbols, None), a dtype kind ("f", "i",
        "b", "u") or an exact ``dtype``."""
        value = self.fields[name]
        if not isinstance(value, np.ndarray):
            raise self.fail(name, f"is {type(value).__name__}, expected an array")
        if value.ndim != len(shape):
            raise self.fail(name, f"has shape {value.shape}, expected {len(shape)} dimensions {shape}")
        for axis, (size, want) in enumerate(zip(value.shape, shape)):
            if want is None:
                continue
            if isinstance(want, str):
                bound = self.sizes.setdefault(want, size)
                if bound != size:
                    raise self.fail(name, f"has shape {value.shape}: axis {axis} is {size}, expected {want} = {bound}")
            elif size != want:
                raise self.fail(name, f"has shape {value.shape}: axis {axis} is {size}, expected {want}")
        if dtype is not None and value.dtype != np.dtype(dtype):
            raise self.fail(name, f"has dtype {value.dtype}, expected {np.dtype(dtype)}")
        if kind is not None and value.dtype.kind != kind and not (kind == _INT and value.dtype.kind == "u"):
            raise self.fail(name, f"has dtype {value.dtype}, expected {'float' if kind == _FLOAT else 'integer'}")
        return value

    def indices(self, name: str, low: int, high: int, values: np.ndarray | None = None) -> None:
        """Every entry of the field (or of ``values`` taken from it) in [low, high)."""
        a = self.fields[name] if values is None else values
        if a.size and (int(a.min()) < low or int(a.max()) >= high):
            raise self.fail(name, f"holds indices in [{int(a.min())}, {int(a.max())}], expected [{low}, {high})")


def validate_playback(f: dict) -> None:
    """A :class:`~skeletal.playback.jobs.PlaybackJob`'s fields (B instances, N nodes, M morph weights,
    C clips, S slots, L layers, T threads, J palette joints, R = 3 or 4 matrix rows)."""
    c = _Checker("PlaybackJob", f)
    parents = c.array("parents", ("N",), _INT)
    n = len(parents)
    c.indices("parents", -1, n)
    c.array("rest", ("N", 10), _FLOAT)
    c.array("rest_morph", ("M",), _FLOAT)
    morph_start = c.array("morph_start", (None,), _INT)  # per node, and the end (N + 1,)
    if len(morph_start) < n:
        raise c.fail("morph_start", f"has {len(morph_start)} entries for {n} nodes")
    c.array("pose", ("B", "N", 10), _FLOAT)
    c.array("morph", ("B", "M"), _FLOAT)
    c.array("clip_duration", ("C",), _FLOAT)
    c.array("clip_table", ("C", None), _INT)
    c.array("base_pose", ("C", "N", 10), _FLOAT)
    c.array("base_morph", ("C", "M"), _FLOAT)
    c.array("tracks", (None, None), _INT)
    c.array("segments", (None, None), _INT)
    c.array("timeline_keys", ("timelines", 2), _INT)
    c.array("times", (None,), _FLOAT)
    c.array("values", (None,), _FLOAT)
    _check_single_lanes(c, f, n)
    c.array("slot_clip", ("S",), _INT)
    c.indices("slot_clip", 0, len(f["clip_duration"]))
    c.array("fs", ("B", "S", None), dtype=np.float64)
    c.array("ist", ("B", "S", None), dtype=np.int64)
    c.array("cursors", ("B", "timelines"), dtype=np.int64)
    c.array("layer_weight", ("B", "L"), _FLOAT)
    c.array("layer_mask", ("L", "N"), _FLOAT)
    c.array("layer_additive", ("L",), dtype=np.bool_)
    c.array("slot_layer", ("S",), _INT)
    c.indices("slot_layer", 0, len(f["layer_additive"]))
    c.array("snap_weight", ("B",), _FLOAT)
    c.array("snap_pose", ("B", "N", 10), _FLOAT)
    c.array("snap_morph", ("B", "M"), _FLOAT)
    c.array("acc", ("T", "N", None), _FLOAT)
    c.array("accm", ("T", "M", 2), _FLOAT)
    c.array("tmp", ("T", None), _FLOAT)
    c.array("locs", ("T", None, 3), _FLOAT)
    c.array("world_nodes", (None,), _INT)
    c.indices("world_nodes", 0, n)
    c.array("palette_joints", ("J",), _INT)
    c.indices("palette_joints", 0, n)
    c.array("inverse_bind", ("J", "R", 4), _FLOAT)
    c.array("palettes", ("B", "J", "R", 4), _FLOAT)
    worlds = c.array("worlds", (None, None, "R", 4), _FLOAT)
    if worlds.shape[0]:
        c.array("worlds", ("B", "N", "R", 4))
    else:
        c.array("scratch_world", (None, "N", "R", 4), _FLOAT)
    _inertia_fields(c)


def _inertia_fields(c: _Checker) -> None:
    """The inertialization stage's arrays: one row per instance, or none at all (``inert_state`` (0,): the
    update kernel compiles no stage)."""
    if isinstance(c.fields["inert_state"], np.ndarray) and c.fields["inert_state"].ndim == 1:
        c.array("inert_state", (0,), dtype=np.int64)
    else:
        c.array("inert_state", (None, 4), dtype=np.int64)
    state = c.fields["inert_state"]
    rows = "B" if state.ndim == 2 else 0
    nodes = "N" if state.ndim == 2 else None
    if state.ndim == 2:
        c.array("inert_state", (rows, 4))
    c.array("inert_clock", (rows, 5), dtype=np.float64)  # inertia_kernels.NKCLOCK columns
    for name in ("inert_offset", "inert_velocity"):
        c.array(name, (rows, nodes, 9), dtype=np.float64)
    for name in ("inert_source", "inert_anchor"):
        c.array(name, (rows, nodes, 10), dtype=np.float64)
    lanes = -(-c.sizes["N"] // 8) * 8 if state.ndim == 2 else None  # the rig's nodes rounded up to 8
    c.array("inert_joints", (rows, lanes), dtype=np.int64)
    width = 9 * lanes if state.ndim == 2 else None  # channel-major rows of every lane (inertia_kernels.lanes)
    for name in ("inert_x", "inert_v"):
        c.array(name, (rows, width), dtype=np.float64)
    c.array("inert_scratch", ("T" if state.ndim == 2 else None, 2, width), dtype=np.float64)
    if state.ndim == 2:
        c.indices("inert_state", 0, 4, state[:, :2])
        c.indices("inert_joints", 0, c.sizes["N"])
        c.indices("inert_state", 0, c.sizes["N"] + 1, state[:, 3])


def _check_single_lanes(c: _Checker, f: dict, n: int) -> None:
    """The packed slerp and LERP3 segments (:mod:`skeletal.playback.single_lanes`): one row per segment, and
    every packed segment's keys, intervals and pose offsets inside their arrays (the vector loads and
    stores are not bounds-checked)."""
    from .clipset import SEG_TIMELINE
    from .single_lanes import LANES

    segments = f["segments"]
    values = c.array("lanes_values", (None,), dtype=np.float32)
    coef = c.array("lanes_coef", (None,), dtype=np.float64)
    outs = c.array("lanes_out", (None,), dtype=np.int64)
    kinds = c.array("lanes_kind", (None,), dtype=np.int64)
    seg = c.array("lanes_seg", (len(segments), 5), dtype=np.int64)
    c.indices("lanes_out", 0, max(n * 10 - 3, 0))
    for g in np.flatnonzero(seg[:, 4] >= 0):
        at_v, at_c, at_o, at_k, width = (int(x) for x in seg[g])
        intervals = int(f["timeline_keys"][segments[g, SEG_TIMELINE], 1]) - 1
        if (width <= 0 or width % LANES or min(at_v, at_c, at_o, at_k) < 0 or at_v + intervals * 8 * width > len(values)
                or at_c + intervals * 2 * width > len(coef) or at_o + intervals * width > len(outs)
                or at_k + intervals * width // LANES > len(kinds)):
            raise c.fail("lanes_seg", f"row {g} {seg[g].tolist()} does not fit the packed arrays")
    rows = c.array("base_rows", (None,), dtype=np.int64)
    c.indices("base_rows", 0, n)
    starts = c.array("base_rows_start", (len(f["clip_duration"]) + 1,), dtype=np.int64)
    if starts.size and (starts[0] != 0 or (np.diff(starts) < 0).any() or starts[-1] != len(rows)):
        raise c.fail("base_rows_start", f"is not a run of offsets from 0 to {len(rows)}")
    values = c.array("lerp_values", (None,), dtype=np.float32)
    outs = c.array("lerp_out", (None,), dtype=np.int64)
    seg = c.array("lerp_seg", (len(segments), 3), dtype=np.int64)
    c.indices("lerp_out", 0, max(n * 10 - 2, 0))
    for g in np.flatnonzero(seg[:, 2] >= 0):
        at_v, at_o, width = (int(x) for x in seg[g])
        keys = int(f["timeline_keys"][segments[g, SEG_TIMELINE], 1])
        if width <= 0 or width % LANES or min(at_v, at_o) < 0 or at_v + keys * 3 * width > len(values) \
                or at_o + width > len(outs):
            raise c.fail("lerp_seg", f"row {g} {seg[g].tolist()} does not fit the packed arrays")


def validate_ik(f: dict) -> None:
    """An :class:`~skeletal.playback.jobs.IKJob`'s fields (stages, joints, instances)."""
    c = _Checker("IKJob", f)
    c.array("stage_i", ("stages", None), _INT)
    c.array("stage_f", ("stages", None), _FLOAT)
    c.array("joints", (None,), _INT)
    c.array("inputs", (None, "stages", None), _FLOAT)
    c.array("update", (None,), _INT)


def validate_wide(f: dict) -> None:
    """A :class:`~skeletal.playback.jobs.WideJob`'s fields (G full groups, T threads, R local rows of a group)."""
    c = _Checker("WideJob", f)
    lanes = f["lanes"]
    if not isinstance(lanes, int) or lanes <= 0:
        raise c.fail("lanes", f"is {lanes!r}, expected a positive int")
    c.array("wide_clip", ("C",), dtype=np.bool_)
    c.array("packed", (None,), dtype=np.float32)
    c.array("seg_table", (None, 2), dtype=np.int64)
    c.array("dest", (None,), dtype=np.uint64)
    c.array("slerp_angles", (None, 2), dtype=np.float64)
    c.array("done", ("G",), dtype=np.uint8)
    c.array("group_clip", ("G",), dtype=np.int64)
    c.array("held", ("G", 1), dtype=np.int64)
    store = c.array("store", (None, "R"), dtype=np.float32)
    if store.shape[0] not in (0, c.sizes["G"]):
        raise c.fail("store", f"has {store.shape[0]} rows, expected 0 or one per full group ({c.sizes['G']})")
    c.array("sample_t", (None,), dtype=np.float64)
    c.array("ik_rows", ("G", None), dtype=np.float32)
    c.array("rows", ("T", "R"), dtype=np.float32)
    c.array("held_rows", ("T", 1), dtype=np.int64)
    c.array("world_rows", ("T", None), dtype=np.float32)
    c.array("palette_rows", ("T", None), dtype=np.float32)
    c.array("keys", ("T", None, lanes), dtype=np.int64)
    c.array("fractions", ("T", None, lanes), dtype=np.float32)
    c.array("samples", ("T", None), dtype=np.float32)
    c.array("ik_scratch", ("T", None), dtype=np.float64)


def validate_foot(f: dict) -> None:
    """A :class:`~skeletal.playback.jobs.FootJob`'s fields (B instances, N nodes, L legs, S slots, C clips,
    F contact frames, J palette entries kept current)."""
    c = _Checker("FootJob", f)
    parents = c.array("parents", ("N",), _INT)
    n = len(parents)
    c.array("pose", ("B", "N", 10), dtype=np.float64)
    c.array("world", ("B", "N", 4, 4), dtype=np.float64)
    c.array("placement", ("B", 4, 4), _FLOAT)
    c.array("legs", (3, "L"), _INT)
    c.indices("legs", 0, n)
    pelvis = f["pelvis"]
    if not 0 <= int(pelvis) < n:
        raise c.fail("pelvis", f"is {pelvis}, expected a node in [0, {n})")
    for name in ("pelvis_nodes", "leg_nodes"):
        c.array(name, (None,), _INT)
        c.indices(name, 0, n)
    leg_start = c.array("leg_start", (None,), _INT)
    c.indices("leg_start", 0, len(f["leg_nodes"]) + 1)
    if len(leg_start) != c.sizes["L"] + 1:
        raise c.fail("leg_start", f"has {len(leg_start)} entries for {c.sizes['L']} legs")
    c.array("fs", ("B", "S", None), dtype=np.float64)
    c.array("slot_clip", ("S",), _INT)
    c.array("slot_additive", ("S",), dtype=np.bool_)
    c.array("tables", ("C", None, "L"), _FLOAT)
    c.indices("slot_clip", 0, c.sizes["C"])
    c.array("frames", ("C",), _INT)
    c.array("fps", ("C",), _FLOAT)
    c.array("durations", ("C",), _FLOAT)
    c.array("looping", ("C",), dtype=np.bool_)
    c.array("heights", ("B", "L"), _FLOAT)
    c.array("normals", ("B", "L", 3), _FLOAT)
    c.array("queried", ("B", "L", 2), _FLOAT)
    c.array("contact", ("B", "L"), _FLOAT)
    c.array("ankle", ("L",), _FLOAT)
    c.array("leg_len", ("L",), _FLOAT)
    c.array("scalars", (8,), _FLOAT)
    c.array("weight", ("B",), _FLOAT)
    c.array("state", ("B", 2), _FLOAT)
    c.array("initialised", ("B",), dtype=np.bool_)
    c.array("locked", ("B", "L"), dtype=np.bool_)
    c.array("lock", ("B", "L", 2), _FLOAT)
    c.array("targets", ("B", "L", 3), _FLOAT)
    c.array("pelvis_offset", ("B",), _FLOAT)
    c.array("pal", ("B", "J", 4, 4), _FLOAT)
    c.array("pal_joints", ("J",), _INT)
    c.indices("pal_joints", 0, n)
    c.array("inv_bind", ("J", 4, 4), _FLOAT)
    c.array("pal_idx", (None,), _INT)
    c.indices("pal_idx", 0, c.sizes["J"])
    c.array("pal_start", (None,), _INT)
    c.indices("pal_start", 0, len(f["pal_idx"]) + 1)
    for name in ("probe_nodes", "world_nodes"):
        c.array(name, (None,), _INT)
        c.indices(name, 0, n)
    c.array("wave_scratch", (3, None), dtype=np.float64)  # (sizes: checked where used, footlanes.range_scratch)
    c.array("lane_in", (None,), dtype=np.float64)
    c.array("lane_out", (None,), dtype=np.float64)
    c.array("solve_scratch", (None,), dtype=np.bool_)


def validate_look(f: dict) -> None:
    """A :class:`~skeletal.playback.jobs.LookJob`'s fields (B instances, N nodes, one aim stage, J palette
    entries kept current)."""
    c = _Checker("LookJob", f)
    parents = c.array("parents", ("N",), _INT)
    n = len(parents)
    c.array("pose", ("B", "N", 10), dtype=np.float64)
    c.array("world", ("B", "N", 4, 4), dtype=np.float64)
    c.array("placement", ("B", 4, 4), _FLOAT)
    c.array("target", ("B", 3), _FLOAT)
    c.array("smoothed", ("B", 3), _FLOAT)
    c.array("velocity", ("B", 3), _FLOAT)
    c.array("weight", ("B",), _FLOAT)
    c.array("stage_i", ("stages", None), _INT)
    if c.sizes["stages"] < 1:
        raise c.fail("stage_i", "holds no stage (the look-at stage needs its aim stage)")
    c.array("stage_f", ("stages", None), _FLOAT)
    c.array("joints", (None,), _INT)
    c.indices("joints", 0, n)
    c.array("jp", (None, None), _FLOAT)
    c.array("inputs", ("B", "stages", None), _FLOAT)
    c.array("update", (None,), _INT)
    c.indices("update", 0, n)
    c.array("pal", ("B", "J", 4, 4), _FLOAT)
    c.array("pal_joints", ("J",), _INT)
    c.indices("pal_joints", 0, n)
    c.array("inv_bind", ("J", 4, 4), _FLOAT)
    c.array("pal_idx", (None,), _INT)
    c.indices("pal_idx", 0, c.sizes["J"])


def validate_jiggle(f: dict) -> None:
    """A :class:`~skeletal.playback.jobs.JiggleJob`'s fields (B instances, N nodes, C chains, P particles)."""
    c = _Checker("JiggleJob", f)
    parents = c.array("parents", ("N",), _INT)
    c.array("world", ("B", "N", None, 4), _FLOAT)
    c.array("pose", ("B", "N", 10), _FLOAT)
    c.array("placement", ("B", 4, 4), _FLOAT)
    c.array("chain_start", (None,), _INT)
    joints = c.array("joints", ("P",), _INT)
    c.indices("joints", 0, len(parents))
    c.indices("chain_start", 0, len(joints) + 1)
    c.array("stiffness", ("C",), _FLOAT)
    c.array("damping", ("C",), _FLOAT)
    c.array("gravity", (3,), _FLOAT)
    c.array("pos", ("B", "P", 3), _FLOAT)
    c.array("vel", ("B", "P", 3), _FLOAT)
    c.array("rest_len", ("B", "P"), _FLOAT)
    c.array("initialised", ("B",), dtype=np.bool_)
    c.array("weight", ("B",), _FLOAT)


__all__ = ["validate_playback", "validate_ik", "validate_wide", "validate_foot", "validate_look", "validate_jiggle"]
