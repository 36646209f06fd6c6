"""GPU posing of a crowd: OpenGL 4.3 compute shaders advance the clocks, sample, blend, run the
hierarchy and write the skin palettes straight into the buffer the skinning shader reads.

:class:`GpuCrowd` is the GPU twin of :class:`skeletal.Crowd` for the biggest crowds. Per frame the CPU
sends one uniform (``dt``) and one dispatch; nothing is uploaded and nothing read back. The state
the game changes (clips, clocks, speeds, crossfades, layer weights) lives in a GPU buffer of
``STATE_WIDTH`` floats per instance; :meth:`GpuCrowd.play` and friends queue *edits* (float index,
value) that a second small compute shader writes at the next update, so only what changed travels.

On the GPU (``shaders/gpu_pose.comp.glsl``), one invocation per instance:

* clocks: repeat, ping-pong or clamp, as the CPU mixer's loop modes (``once`` is ``clamp`` here);
* sampling: the clip set's own float32 arrays (:class:`~skeletal.playback.clipset.ClipSet` ``values``
  and ``times``, the keys the CPU kernels read), STEP, LINEAR (nlerp for rotation tracks whose keys
  are at most ``nlerp_max_gap`` degrees apart, slerp for the others: the CPU crowd's choice, track by
  track) and CUBICSPLINE;
* blending: a crossfade of two clips on the base layer, then one layer over it, additive or masked
  override (the CPU mixer's formulas: :mod:`skeletal.playback.kernels`);
* the hierarchy parents first (rig order), then ``world[joint] @ inverse_bind`` into the palette, in
  the renderer's slot layout (:class:`~skeletal.render.layout.PaletteLayout`: skins, then rigid meshes).

What it does not do is one line, :data:`UNSUPPORTED`. The palettes equal the CPU crowd's float32
palettes to float32 rounding (``tests/test_gpu_pose.py``).

>>> crowd = GpuCrowd(asset, 10_000)                                       # doctest: +SKIP
>>> crowd.play("Walk", offsets=np.random.uniform(0, 1, 10_000))           # doctest: +SKIP
>>> crowd.crossfade("Run", 0.5, instances=slice(0, 5000))                 # doctest: +SKIP
>>> crowd.update(1 / 60)                       # one dispatch; palettes stay on the GPU   # doctest: +SKIP
>>> renderer.render(crowd, offsets)            # drawn from the same buffer   # doctest: +SKIP
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from ..anim.clip import INTERP_CODE, PATH_CODE, Clip
from ..errors import SkeletalError
from ..playback.clipset import TK_INTERP, TK_KEY_START, TK_NODE, TK_PATH, TK_TIMELINE, TK_VALUE_START, ClipSet
from ..playback.mixer import Mixer
from .errors import RenderError
from .layout import PaletteLayout
from .programs import compute_source

#: What the GPU path leaves to the CPU :class:`skeletal.Crowd`, in one line.
UNSUPPORTED = ("GPU posing (GpuCrowd) does not run IK stages, procedural stages (ground, look-at, springs), "
               "events, root motion, morph weights, blend spaces or state machines, and blends at most two "
               "base-layer clips (a crossfade) plus one layer; use skeletal.Crowd for those")

#: floats per instance in the state buffer, and their meaning (the shader's S_* constants). A clock is
#: two floats, hi + lo (``S_TIME*`` and ``S_TIME*_LO``: float32 hi and the rest), for float64-like times.
STATE_WIDTH = 20
S_CLIP0, S_TIME0, S_SPEED0, S_LOOP0 = 0, 1, 2, 3  # slot 0: clip id (-1 none), clock, speed, loop mode
S_CLIP1, S_TIME1, S_SPEED1, S_LOOP1 = 4, 5, 6, 7  # slot 1: the crossfade's other clip
S_BLEND, S_BLEND_RATE, S_LAYER_WEIGHT = 8, 9, 10  # slot 1's weight (0..1), its change per second
S_CLIPL, S_TIMEL, S_SPEEDL, S_LOOPL = 12, 13, 14, 15  # the layer's clip
S_TIME0_LO, S_TIME1_LO, S_TIMEL_LO = 16, 17, 18
CLOCKS = ((S_TIME0, S_TIME0_LO), (S_TIME1, S_TIME1_LO), (S_TIMEL, S_TIMEL_LO))
LOOPS = {"repeat": 1, "pingpong": 2, "clamp": 3, "once": 3}
LAYER_NONE, LAYER_OVERRIDE, LAYER_ADDITIVE = 0, 1, 2
TRACK_NLERP = 4  # mode bit of a rotation track sampled with nlerp
TIMELINE_SHIFT = 4  # mode bits from here: the track's timeline within its clip + 1 (0: a constant track)
LOCAL_SIZE = 64  # invocations per work group (both shaders)
SHADER_STORAGE_BARRIER_BIT = 0x2000  # GL_SHADER_STORAGE_BARRIER_BIT (moderngl is imported lazily)
# storage buffer bindings (the shaders' ``binding = N``); 0 is the palette, as skinning.glsl reads it
B_PALETTE, B_VALUES, B_TIMES, B_TRACKS, B_NODE_TRACKS, B_RIG_F, B_RIG_I, B_STATE, B_EDITS, B_SLERP_KEYS = range(10)
STORAGE_BLOCKS = 9  # bound by the posing shader (all but B_EDITS)


def compute_support(ctx) -> str | None:
    """None when ``ctx`` runs compute shaders with storage buffers (OpenGL 4.3), else why not."""
    version = getattr(ctx, "version_code", 0)
    if version < 430:
        return f"GPU posing needs OpenGL 4.3 compute shaders; the context is OpenGL {version // 100}.{version % 100 // 10}"
    blocks = int(ctx.info.get("GL_MAX_COMPUTE_SHADER_STORAGE_BLOCKS", 16) or 0)
    if blocks < STORAGE_BLOCKS:
        return f"GPU posing needs {STORAGE_BLOCKS} storage buffers in a compute shader; GL_MAX_COMPUTE_SHADER_STORAGE_BLOCKS is {blocks}"
    return None


def track_modes(clipset: ClipSet, nlerp_max_gap: float) -> np.ndarray:
    """(T,) int32: each track's interpolation code, with :data:`TRACK_NLERP` set on the LINEAR rotation
    tracks whose keys are at most ``nlerp_max_gap`` degrees apart (the CPU crowd's nlerp choice), and
    its timeline within its clip + 1 from bit :data:`TIMELINE_SHIFT` (0: constant, no key search)."""
    table = clipset.track_table
    modes = table[:, TK_INTERP].astype(np.int64)
    nlerp = ((table[:, TK_PATH] == PATH_CODE["rotation"]) & (table[:, TK_INTERP] == INTERP_CODE["LINEAR"])
             & clipset.fast_rotations(nlerp_max_gap))
    clip_of = np.repeat(np.arange(len(clipset)), np.diff(clipset.track_start))
    timeline = np.where(table[:, TK_TIMELINE] >= 0, table[:, TK_TIMELINE] - clipset.timeline_start[clip_of] + 1, 0)
    return (modes | np.where(nlerp, TRACK_NLERP, 0) | (timeline << TIMELINE_SHIFT)).astype(np.int32)


def node_track_table(clipset: ClipSet, nodes: int) -> np.ndarray:
    """(C, nodes, 3) int32: the track of clip c that drives node n's translation, rotation or scale
    (-1: the clip leaves it at the pose beneath). Morph-weight tracks are not posed on the GPU."""
    out = np.full((max(len(clipset), 1), nodes, 3), -1, np.int32)
    table = clipset.track_table
    for c in range(len(clipset)):
        k = np.arange(clipset.track_start[c], clipset.track_start[c + 1])
        path = table[k, TK_PATH]
        pose = path < PATH_CODE["weights"]
        out[c, table[k[pose], TK_NODE], path[pose]] = k[pose]
    return out


class GpuCrowd:
    """``count`` instances of ``asset`` posed by compute shaders on ``ctx`` (default: the shared
    headless context), palettes kept on the GPU in the renderer's layout.

    The API follows :class:`skeletal.Crowd` for what the GPU path does (:data:`UNSUPPORTED` says
    what it does not): :meth:`play`, :meth:`crossfade`, :meth:`stop`, :meth:`seek`,
    :meth:`set_speeds`, :meth:`add_layer`, :meth:`set_layer_weight`, :meth:`update`,
    :meth:`evaluate`. ``palettes`` reads them back (tests, debugging; a frame never needs it).

    The base layer holds two slots. :meth:`play` puts a clip in slot 0 alone; :meth:`crossfade`
    puts the new clip in the slot with the smaller weight and moves the weight towards it over
    ``duration`` (a crossfade started mid-fade drops the fading-out clip). The CPU keeps a copy of
    what it wrote and of each fade's start, so that it knows the weights without reading them back.

    >>> crowd = GpuCrowd(skeletal.demo_asset(), 1000)                         # doctest: +SKIP
    >>> crowd.play("walk", offsets=np.linspace(0, 1, 1000)); crowd.update(1 / 60)   # doctest: +SKIP
    """

    #: what the GPU path leaves to :class:`skeletal.Crowd`, in one line
    UNSUPPORTED = UNSUPPORTED

    def __init__(self, asset, count: int, *, ctx=None, nlerp_max_gap: float = 15.0):
        if int(count) < 1:
            raise SkeletalError(f"count must be at least 1, got {count}")
        if ctx is None:
            from .context import shared_context

            ctx = shared_context()
        why = compute_support(ctx)
        if why is not None:
            raise RenderError(why)
        groups = -(-int(count) // LOCAL_SIZE)
        if groups > 65535:
            raise RenderError(f"GpuCrowd of {count} instances needs {groups} work groups; at most 65535 "
                              f"(GL_MAX_COMPUTE_WORK_GROUP_COUNT): {65535 * LOCAL_SIZE} instances")
        self.ctx = ctx
        self.asset = asset
        self.rig = asset.rig
        self.count = int(count)
        self.nlerp_max_gap = float(nlerp_max_gap)
        self.layout = PaletteLayout(asset)
        self.joint_count = self.layout.joint_count  # palette matrices per instance (the renderer's stride)
        self.skin_joint_count = sum(len(s.joints) for s in asset.skins)
        self.clipset = ClipSet(asset.clips)
        self.time = 0.0
        self.layer_mode = LAYER_NONE
        self.layer_mask = np.ones(len(self.rig))
        # the CPU's copy of what it wrote (clocks in it are as written, not as advanced)
        self.control = np.zeros((self.count, STATE_WIDTH), np.float32)
        self.control[:, [S_CLIP0, S_CLIP1, S_CLIPL]] = -1.0
        self.control[:, [S_SPEED0, S_SPEED1, S_SPEEDL, S_LAYER_WEIGHT]] = 1.0
        self.control[:, [S_LOOP0, S_LOOP1, S_LOOPL]] = LOOPS["repeat"]
        self._fade = np.zeros((self.count, 3))  # per instance: blend at the fade's start, rate (1/s), start time
        self._edits: list[tuple[np.ndarray, np.ndarray]] = []
        self._buffers: dict[int, object] = {}
        self._clip_version = -1
        self._pose_program = None
        nbytes = self.count * self.joint_count * 48
        size_limit = int(ctx.info.get("GL_MAX_SHADER_STORAGE_BLOCK_SIZE", 1 << 27))
        if nbytes > size_limit:
            raise RenderError(f"GpuCrowd palettes of {self.count} x {self.joint_count} matrices take {nbytes} bytes; "
                              f"GL_MAX_SHADER_STORAGE_BLOCK_SIZE is {size_limit}")
        self.palette_buffer = ctx.buffer(reserve=max(nbytes, 16))
        self._buffers[B_STATE] = ctx.buffer(self.control.tobytes())
        self._upload_rig()
        self._edit_program = ctx.compute_shader(compute_source("gpu_edits.comp.glsl", {}))
        self.evaluate()

    # -- set-up ---------------------------------------------------------------------------------

    def _replace(self, binding: int, data: np.ndarray) -> None:
        old = self._buffers.pop(binding, None)
        if old is not None:
            old.release()
        data = np.ascontiguousarray(data)
        self._buffers[binding] = self.ctx.buffer(data.tobytes() if data.nbytes else np.zeros(4, np.float32).tobytes())

    def _upload_rig(self) -> None:
        """Rest rows, the layer mask, the palette's inverse binds, clip durations; parents, slot nodes."""
        rig = self.rig
        layout = self.layout
        slots = self.joint_count
        inverse_bind = np.zeros((slots, 3, 4), np.float64)
        inverse_bind[:, :3, :3] = np.eye(3)  # rigid slots (and an empty palette): identity
        slot_nodes = np.zeros(slots, np.int64)
        for binding, start in zip(self.asset.skins, layout.skin_offset):
            count = len(binding.joints)
            inverse_bind[start:start + count] = np.asarray(binding.inverse_bind)[:, :3, :]
            slot_nodes[start:start + count] = binding.joints
        for node, slot in layout.rigid_slot.items():
            slot_nodes[slot] = rig.index_of[node]
        self._rig_floats = [np.asarray(rig.rest, np.float32).reshape(-1), self.layer_mask.astype(np.float32),
                            inverse_bind.astype(np.float32).reshape(-1)]
        self._replace(B_RIG_I, np.concatenate([np.asarray(rig.parents), slot_nodes]).astype(np.int32))
        self._upload_clips()

    def _upload_clips(self) -> None:
        """The clip set's keys and tables (again when a clip was added)."""
        cs = self.clipset
        if cs.version == self._clip_version:
            return
        table = cs.track_table
        key_counts = np.diff(cs.key_start)
        tracks = np.stack([table[:, TK_VALUE_START], table[:, TK_KEY_START], key_counts,
                           track_modes(cs, self.nlerp_max_gap)], axis=1) if len(table) else np.zeros((0, 4))
        # then the timelines (first key, key count) and each clip's timeline range, in the same buffer
        timelines = np.zeros((len(cs.timeline_keys), 4), np.int64)
        timelines[:, :2] = cs.timeline_keys
        ranges = np.zeros((len(cs), 4), np.int64)
        ranges[:, 0], ranges[:, 1] = cs.timeline_start[:-1], cs.timeline_start[1:]
        self._timelines_at = len(tracks)
        self._clip_timelines_at = len(tracks) + len(timelines)
        tracks = np.concatenate([tracks, timelines, ranges, np.zeros((1, 4), np.int64)])
        if cs.values.size >= 2**31 or cs.times.size >= 2**31:
            raise RenderError(f"{self.asset.name}: the clips hold {cs.values.size} floats, more than GPU posing indexes")
        self._replace(B_VALUES, cs.values.astype(np.float32))
        self._replace(B_TIMES, cs.times.astype(np.float32))
        self._replace(B_TRACKS, tracks.astype(np.int32))
        self._replace(B_NODE_TRACKS, node_track_table(cs, len(self.rig)))
        self._replace(B_SLERP_KEYS, cs.slerp_keys.astype(np.float32))
        self._clip_version = cs.version
        self._upload_rig_floats()
        timelines_needed = max(cs.max_timelines, 1)
        if getattr(self, "_timelines", None) != timelines_needed:  # the shader's per-action key arrays
            if getattr(self, "_pose_program", None) is not None:
                self._pose_program.release()
            self._pose_program = self.ctx.compute_shader(compute_source("gpu_pose.comp.glsl", {
                "NODES": len(self.rig), "SLOTS": self.joint_count, "TIMELINES": timelines_needed}))
            self._timelines = timelines_needed

    def _upload_rig_floats(self) -> None:
        wide = self.clipset.duration if len(self.clipset) else np.zeros(1)
        hi = wide.astype(np.float32)
        durations = np.stack([hi, (wide - hi).astype(np.float32)], axis=1).reshape(-1)  # hi, lo per clip
        self._rig_floats[1] = self.layer_mask.astype(np.float32)
        self._replace(B_RIG_F, np.concatenate(self._rig_floats + [durations]))

    # -- the game's changes ---------------------------------------------------------------------

    def _instances(self, instances) -> np.ndarray:
        """Instance indices (int64) from None (all), a slice, a boolean mask or indices."""
        every = np.arange(self.count)
        if instances is None:
            return every
        try:
            return np.atleast_1d(every[instances]).astype(np.int64)
        except IndexError as exc:
            raise SkeletalError(f"instances {instances!r} do not select from {self.count} instances ({exc})") from None

    def _set(self, idx: np.ndarray, fields: dict[int, npt.ArrayLike]) -> None:
        """Queue writes of ``fields`` ({S_* field: scalar or per-selected-instance values}) for ``idx``;
        a clock (S_TIME0, S_TIME1, S_TIMEL) is given in float64 and written as hi + lo."""
        for f, values in fields.items():
            lo_field = dict(CLOCKS).get(f)
            wide = np.broadcast_to(np.asarray(values, np.float64), idx.shape)
            column = wide.astype(np.float32)
            parts = [(f, column)]
            if lo_field is not None:
                parts.append((lo_field, (wide - column).astype(np.float32)))
            for field, part in parts:
                self.control[idx, field] = part
                self._edits.append((idx * STATE_WIDTH + field, part.copy()))

    def clip_index(self, clip: str | int | Clip) -> int:
        """Index of a clip (name, index or Clip; a Clip not in the set is added)."""
        index = self.clipset.index(clip)
        self._upload_clips()
        return index

    def _loop(self, loop: str) -> int:
        if loop not in LOOPS:
            raise SkeletalError(f"loop mode {loop!r} is not one of {tuple(LOOPS)}")
        return LOOPS[loop]

    def blend_weights(self, instances=None) -> np.ndarray:
        """Slot 1's weight (0..1) per selected instance now, from the fades the CPU started (no readback)."""
        idx = self._instances(instances)
        start, rate, at = self._fade[idx].T
        return np.clip(start + rate * (self.time - at), 0.0, 1.0)

    def play(self, clip: str | int | Clip, *, offsets: float | npt.ArrayLike = 0.0, speeds: float | npt.ArrayLike = 1.0,
             layer: int = 0, fade: float = 0.0, loop: str = "repeat", instances=None) -> None:
        """Play ``clip`` alone on the base layer (``layer`` 0; ``fade`` > 0 crossfades to it instead) or on
        the layer made by :meth:`add_layer` (``layer`` 1). ``offsets`` (start times) and ``speeds``: scalars
        or per-selected-instance arrays."""
        if layer == 0 and fade > 0.0:
            self.crossfade(clip, fade, offsets=offsets, speeds=speeds, loop=loop, instances=instances)
            return
        c = self.clip_index(clip)
        idx = self._instances(instances)
        mode = self._loop(loop)
        if layer == 0:
            self._set(idx, {S_CLIP0: c, S_TIME0: offsets, S_SPEED0: speeds, S_LOOP0: mode, S_CLIP1: -1.0,
                            S_BLEND: 0.0, S_BLEND_RATE: 0.0})
            self._fade[idx] = (0.0, 0.0, self.time)
        else:
            self._check_layer(layer)
            self._set(idx, {S_CLIPL: c, S_TIMEL: offsets, S_SPEEDL: speeds, S_LOOPL: mode})

    def crossfade(self, clip: str | int | Clip, duration: float, *, offsets: float | npt.ArrayLike = 0.0,
                  speeds: float | npt.ArrayLike = 1.0, loop: str = "repeat", instances=None) -> None:
        """Fade the base layer to ``clip`` over ``duration`` seconds (advanced on the GPU by :meth:`update`)."""
        c = self.clip_index(clip)
        idx = self._instances(instances)
        mode = self._loop(loop)
        blend = self.blend_weights(idx)
        offsets = np.broadcast_to(np.asarray(offsets, np.float64), idx.shape)  # clocks: float64 until split
        speeds = np.broadcast_to(np.asarray(speeds, np.float64), idx.shape)
        rate = 1.0 / duration if duration > 0.0 else math.inf
        to_one = blend < 0.5  # slot 0 carries the pose: the new clip goes to slot 1, and the weight to it
        for upward, side in ((True, to_one), (False, ~to_one)):
            target = idx[side]
            if not len(target):
                continue
            fields = (S_CLIP1, S_TIME1, S_SPEED1, S_LOOP1) if upward else (S_CLIP0, S_TIME0, S_SPEED0, S_LOOP0)
            signed = rate if upward else -rate
            now = blend[side]
            if math.isinf(rate):  # no fade: the new clip at full weight now
                now, signed = np.full_like(now, 1.0 if upward else 0.0), 0.0
            self._set(target, {fields[0]: c, fields[1]: offsets[side], fields[2]: speeds[side], fields[3]: mode,
                               S_BLEND: now, S_BLEND_RATE: signed})
            self._fade[target, 0] = now
            self._fade[target, 1] = signed
            self._fade[target, 2] = self.time

    def set_blend(self, clip0: npt.ArrayLike, time0: npt.ArrayLike, clip1: npt.ArrayLike, time1: npt.ArrayLike,
                  weight: npt.ArrayLike, *, instances=None) -> None:
        """Set the base layer's two slots directly: clip ids (-1: none; per instance or one for all),
        clocks (seconds) and slot 1's weight (0..1), held until changed (a blend space, say, or a
        game that computes its own weights). The crossfade rate stops.

        >>> crowd.set_blend(walk, t, run, t * run_len / walk_len, speed_weight)   # doctest: +SKIP
        """
        idx = self._instances(instances)
        weight = np.clip(np.broadcast_to(np.asarray(weight, np.float64), idx.shape), 0.0, 1.0)
        for clip in np.unique(np.concatenate([np.ravel(clip0), np.ravel(clip1)])):
            if not -1 <= clip < len(self.clipset):
                raise SkeletalError(f"clip id {clip} is not -1 or one of the {len(self.clipset)} clips")
        self._set(idx, {S_CLIP0: clip0, S_TIME0: time0, S_CLIP1: clip1, S_TIME1: time1, S_BLEND: weight,
                        S_BLEND_RATE: 0.0})
        self._fade[idx, 0] = weight
        self._fade[idx, 1] = 0.0
        self._fade[idx, 2] = self.time

    def stop(self, *, layer: int = 0, instances=None) -> None:
        """Stop the base layer's clips (the rest pose) or the layer's clip."""
        idx = self._instances(instances)
        if layer == 0:
            self._set(idx, {S_CLIP0: -1.0, S_CLIP1: -1.0, S_BLEND: 0.0, S_BLEND_RATE: 0.0})
            self._fade[idx] = (0.0, 0.0, self.time)
        else:
            self._check_layer(layer)
            self._set(idx, {S_CLIPL: -1.0})

    def seek(self, clip: str | int | Clip, time: float | npt.ArrayLike, *, layer: int = 0, instances=None) -> None:
        """Set the clock of ``clip`` (wherever the selected instances play it on ``layer``) to ``time``."""
        c = self.clip_index(clip)
        idx = self._instances(instances)
        times = np.broadcast_to(np.asarray(time, np.float64), idx.shape)
        pairs = ((S_CLIP0, S_TIME0), (S_CLIP1, S_TIME1)) if layer == 0 else ((S_CLIPL, S_TIMEL),)
        for clip_field, time_field in pairs:
            hit = self.control[idx, clip_field] == c
            if hit.any():
                self._set(idx[hit], {time_field: times[hit]})

    def set_speeds(self, speeds: float | npt.ArrayLike, *, layer: int = 0, instances=None) -> None:
        """Time scale of the selected instances' clips on ``layer`` (0 pauses them)."""
        idx = self._instances(instances)
        fields = (S_SPEED0, S_SPEED1) if layer == 0 else (S_SPEEDL,)
        self._set(idx, {f: speeds for f in fields})

    def add_layer(self, name: str = "layer", *, weight: float = 1.0, mask=None, additive: bool = False) -> int:
        """The one layer over the base layer (returns 1): ``mask`` as :meth:`skeletal.Mixer.joint_mask`
        takes it (a joint name, names, {name: weight} or an (N,) array), ``additive`` for delta clips."""
        if self.layer_mode != LAYER_NONE:
            raise SkeletalError(f"GpuCrowd has one layer over the base layer (asked for {name!r}): {UNSUPPORTED}")
        self.layer_name = name
        self.layer_mode = LAYER_ADDITIVE if additive else LAYER_OVERRIDE
        self.layer_mask = Mixer.joint_mask(self, mask)  # type: ignore[arg-type]  # it reads only .rig
        self._upload_rig_floats()
        self.set_layer_weight(1, weight)
        return 1

    def _check_layer(self, layer: int | str) -> None:
        if self.layer_mode == LAYER_NONE or layer not in (1, getattr(self, "layer_name", None)):
            raise SkeletalError(f"layer {layer!r} does not exist (GpuCrowd: the base layer 0 and one add_layer() layer)")

    def set_layer_weight(self, layer: int | str, weight: float | npt.ArrayLike, *, instances=None) -> None:
        """The layer's weight per selected instance (scalar or array)."""
        self._check_layer(layer)
        self._set(self._instances(instances), {S_LAYER_WEIGHT: weight})

    # -- frames ---------------------------------------------------------------------------------

    @property
    def pending_edits(self) -> int:
        """Floats queued for the next update (0 while the game changes nothing: nothing is uploaded)."""
        return sum(len(e[0]) for e in self._edits)

    def _flush(self) -> None:
        """Write the queued edits into the state buffer: one upload and one dispatch, the last edit of
        each float winning."""
        if not self._edits:
            return
        where = np.concatenate([e[0] for e in self._edits])
        values = np.concatenate([e[1] for e in self._edits]).astype(np.float32)
        self._edits = []
        last = len(where) - 1 - np.unique(where[::-1], return_index=True)[1]
        pairs = np.empty((len(last), 2), np.uint32)
        pairs[:, 0] = where[last]
        pairs[:, 1] = values[last].view(np.uint32)
        self._replace(B_EDITS, pairs)
        self._buffers[B_STATE].bind_to_storage_buffer(B_STATE)
        self._buffers[B_EDITS].bind_to_storage_buffer(B_EDITS)
        self._edit_program["u_edits"].value = len(pairs)
        self._storage_barrier()  # the last posing dispatch wrote the state these edits overwrite
        self._edit_program.run(-(-len(pairs) // LOCAL_SIZE))

    def _dispatch(self, dt: float) -> None:
        self._flush()
        for binding, buffer in self._buffers.items():
            if binding != B_EDITS:
                buffer.bind_to_storage_buffer(binding)
        self.palette_buffer.bind_to_storage_buffer(B_PALETTE)
        program = self._pose_program
        for name, value in (("u_count", self.count), ("u_clips", len(self.clipset)), ("u_dt", float(dt)),
                            ("u_layer_mode", self.layer_mode), ("u_timelines_at", self._timelines_at),
                            ("u_clip_timelines_at", self._clip_timelines_at)):
            member = program.get(name, None)
            if member is not None:
                member.value = value
        self._storage_barrier()  # the edits' and the last frame's writes of the state buffer
        program.run(-(-self.count // LOCAL_SIZE))

    def _storage_barrier(self) -> None:
        """Make the storage-buffer writes of the dispatches before visible to the next one. Without it a
        GPU may run the next dispatch on stale caches (an NVIDIA H200 did: clocks lost whole updates;
        llvmpipe runs dispatches one after the other and hid it)."""
        self.ctx.memory_barrier(SHADER_STORAGE_BARRIER_BIT)

    def update(self, dt: float) -> None:
        """Advance every clock and crossfade by ``dt`` seconds and pose every instance, on the GPU."""
        self._dispatch(float(dt))
        self.time += float(dt)

    def evaluate(self) -> None:
        """Pose every instance at its clocks as they are (nothing advances)."""
        self._dispatch(0.0)

    # -- reading and drawing --------------------------------------------------------------------

    def read_palettes(self) -> np.ndarray:
        """(count, joint_count, 3, 4) float32: the whole palette in the renderer's slot layout, read back."""
        self.ctx.memory_barrier()
        data = np.frombuffer(self.palette_buffer.read(size=self.count * self.joint_count * 48), np.float32)
        return data.reshape(self.count, self.joint_count, 3, 4).copy()

    @property
    def palettes(self) -> np.ndarray:
        """(count, J, 3, 4) float32, the skins' joints as :attr:`skeletal.Crowd.palettes` has them: a
        readback, for tests and debugging."""
        return self.read_palettes()[:, :self.skin_joint_count]

    def read_clocks(self) -> np.ndarray:
        """(count, 3) float64: the clocks of slot 0, slot 1 and the layer (seconds), read back."""
        state = self.read_state().astype(np.float64)
        return np.stack([state[:, hi] + state[:, lo] for hi, lo in CLOCKS], axis=1)

    def read_state(self) -> np.ndarray:
        """(count, STATE_WIDTH) float32: the state buffer as the GPU has it (clocks advanced), read back."""
        self._flush()
        self.ctx.memory_barrier()
        return np.frombuffer(self._buffers[B_STATE].read(), np.float32).reshape(self.count, STATE_WIDTH).copy()

    # the palette-store interface the renderer binds (skinning.glsl's PALETTE_SSBO path)
    defines = {"PALETTE_SSBO": 1}

    def bind(self, program=None) -> None:
        """Make the palette buffer the skinning shader's storage block (binding 0), after the
        posing dispatch's writes."""
        self.ctx.memory_barrier()
        self.palette_buffer.bind_to_storage_buffer(B_PALETTE)

    def describe(self) -> str:
        return (f"GpuCrowd: {self.count} instances x {self.joint_count} palette matrices posed by compute shaders "
                f"({len(self.clipset)} clips, {self.clipset.values.size} key floats on the GPU)")

    def release(self) -> None:
        for buffer in self._buffers.values():
            buffer.release()
        self._buffers.clear()
        self.palette_buffer.release()
        self._pose_program.release()
        self._edit_program.release()

    def __enter__(self) -> GpuCrowd:
        return self

    def __exit__(self, *exc) -> None:
        self.release()
