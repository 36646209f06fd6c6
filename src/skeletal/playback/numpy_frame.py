"""A mixer's frame in plain numpy: what serves frames while the compiled kernels are still compiling.

On a fresh install the compiled update (:mod:`skeletal.playback.kernels`) takes numba several
seconds to compile; :mod:`skeletal.playback.coldstart` compiles it in a background process and, meanwhile,
runs each frame through :func:`step` here: the same stages (clocks and fades, sampling, blending,
world matrices, palettes) with the same arithmetic, vectorised over tracks, nodes and instances
with numpy (the clocks run the kernels' own per-action Python body, a handful of actions). Results
equal the compiled path's to rounding (1e-12; slerp's sines come from libm instead of the kernels'
polynomial).

Covered (:func:`covers`): a :class:`~skeletal.Player` or a :class:`~skeletal.Mixer` of up to
:data:`MAX_INSTANCES` with float64 outputs, override layers (weights, masks), crossfades and blends
of any number of actions, morph weights. Not covered (the caller compiles as before): IK stages,
controllers (blend spaces, state machines, root motion...), additive layers, a fading snapshot, a
:class:`~skeletal.Crowd`'s layouts, float32 outputs, a clip that animates one node's path twice.

>>> from skeletal.playback import numpy_frame
>>> numpy_frame.covers(player.mixer)                            # doctest: +SKIP
True
>>> events = numpy_frame.step(player.mixer, 1 / 60, kernels.ALL)   # doctest: +SKIP
"""

from __future__ import annotations

import types
from typing import Any

import numpy as np

from ..anim.clip import INTERP_CODE, PATH_POSE_OFFSET
from ..quat import NLERP_ABOVE_COS
from . import kernels as K
from .clipset import (CL_MARKER_END, CL_MARKER_START, CL_SEGMENT_END, CL_SEGMENT_START, CL_TIMELINE_END, CL_TIMELINE_START,
                      SEG_CONSTANT, SEG_END, SEG_FAST_END, SEG_FIRST, SEG_KIND, SEG_LERP3, SEG_NLERP, SEG_SLERP,
                      TK_INTERP, TK_NODE, TK_PATH, TK_TIMELINE, TK_VALUE_START, TK_WIDTH)

# How a track is interpolated between two keys (outside its keys every mode holds the nearest key)
HOLD, LERP, SLERP, NLERP, CUBIC = 0, 1, 2, 3, 4
_STEP, _LINEAR, _CUBIC = INTERP_CODE["STEP"], INTERP_CODE["LINEAR"], INTERP_CODE["CUBICSPLINE"]
_T, _R, _S, _W = K.TRANSLATION, K.ROTATION, K.SCALE, K.WEIGHTS


def _python_advance():
    """The kernels' per-action clock (:func:`skeletal.playback.kernels._advance_one`) as plain Python:
    the same body, with its helper's Python function in place of the compiled one (nothing compiles)."""
    src = K._advance_one.py_func
    scope = {**src.__globals__, "_crossings": K._crossings.py_func}
    return types.FunctionType(src.__code__, scope, src.__name__, src.__defaults__, src.__closure__)


advance_one = _python_advance()


def advance(fs: np.ndarray, ist: np.ndarray, slot_clip: np.ndarray, clip_table: np.ndarray,
            clip_duration: np.ndarray, marker_time: np.ndarray, dt: float) -> int:
    """:func:`skeletal.playback.kernels.advance` without compiling: every action of every instance
    by ``dt`` seconds (``fs`` (B, S, NF), ``ist`` (B, S, NI), in place). Returns how many instances
    reported an event."""
    events = 0
    ranges = [(clip_duration[c], int(clip_table[c, CL_MARKER_START]), int(clip_table[c, CL_MARKER_END]))
              for c in slot_clip.tolist()]
    for b in range(fs.shape[0]):
        hit = False
        for s, (duration, m0, m1) in enumerate(ranges):
            row = ist[b, s]
            advance_one(fs[b, s], row, duration, dt, marker_time, m0, m1)
            if row[K.I_EV_LOOPS] != 0 or row[K.I_EV_FINISHED] != 0 or row[K.I_EV_MARKERS] != 0:
                hit = True
        events += hit
    return events


#: the most instances :func:`step` serves (it poses them one after another): a larger mixer compiles
MAX_INSTANCES = 8


def covers(mixer: Any) -> bool:
    """Whether :func:`step` computes ``mixer``'s frame (see the module docstring for what it covers)."""
    if type(mixer)._world_fields.__qualname__ != "Mixer._world_fields":  # a crowd's own layouts (3x4 rows, lanes)
        return False
    if mixer.count > MAX_INSTANCES or mixer.controllers:  # controllers (blend spaces, state machines, root
        return False                                      # motion, inertialization...) may add stages
    world = mixer.world
    if world.ndim != 4 or world.shape[2] != 4:
        return False
    if world.dtype != np.float64 or mixer.palettes.dtype != np.float64 or mixer.local_pose.dtype != np.float64:
        return False
    if mixer._ik is not None or mixer._snap_fading or bool(np.any(mixer.snap_weight > 0.0)):
        return False
    if bool(np.any(mixer.layer_additive)):
        return False
    if mixer._inertia.count:  # an inertialized switch made the update kernel's stage: compiled only
        return False
    return _plan(mixer).unique


class _Clip:
    """One clip's tracks, as arrays, for vectorised sampling (built once per clip set version)."""

    def __init__(self, cs, c: int, clip_table: np.ndarray, segments: np.ndarray, morph_start: np.ndarray):
        tracks = cs.track_table
        seg = segments[clip_table[c, CL_SEGMENT_START]:clip_table[c, CL_SEGMENT_END]]
        ids = [np.arange(g[SEG_FIRST], g[SEG_END]) for g in seg]
        k = np.concatenate(ids) if ids else np.zeros(0, np.int64)
        kind = np.repeat(seg[:, SEG_KIND], [len(i) for i in ids]) if ids else np.zeros(0, np.int64)
        fast_end = np.repeat(seg[:, SEG_FAST_END], [len(i) for i in ids]) if ids else np.zeros(0, np.int64)
        interp, path = tracks[k, TK_INTERP], tracks[k, TK_PATH]
        # the mode between two keys: the blend path's (the segment's kind) and the single-action path's
        # (a rotation segment's leading tracks within the single-action nlerp limit take nlerp)
        general = np.select([interp == _STEP, interp == _CUBIC, path == _R], [HOLD, CUBIC, SLERP], LERP)
        blend = np.select([kind == SEG_CONSTANT, kind == SEG_LERP3, kind == SEG_NLERP, kind == SEG_SLERP],
                          [HOLD, LERP, NLERP, SLERP], general)
        rotation_seg = (kind == SEG_NLERP) | (kind == SEG_SLERP)
        single = np.where(rotation_seg, np.where(k < fast_end, NLERP, SLERP), blend)
        first_tl = clip_table[c, CL_TIMELINE_START]
        timeline = tracks[k, TK_TIMELINE]
        self.timelines = cs.timeline_keys[first_tl:clip_table[c, CL_TIMELINE_END]] if len(k) else cs.timeline_keys[:0]
        self.tl = np.where(timeline >= 0, timeline - first_tl, -1)
        self.count = np.where(timeline >= 0, cs.timeline_keys[np.maximum(timeline, 0), 1], 1)
        self.node, self.path = tracks[k, TK_NODE], path
        self.width = tracks[k, TK_WIDTH]
        self.value_start = tracks[k, TK_VALUE_START]
        self.varying = kind != SEG_CONSTANT
        pose_offset = PATH_POSE_OFFSET[path]
        self.dest = np.where(path == _W, morph_start[self.node], self.node * 10 + pose_offset)  # flat pose / morph
        # groups of tracks sampled together: (mode, width, cubic, rotation, weights, their rows in this clip)
        self.groups: dict[str, list] = {}
        for name, modes in (("blend", blend), ("single", single)):
            groups = []
            keys = np.stack([modes, self.width, interp == _CUBIC, path == _R, path == _W], axis=1) if len(k) else np.zeros((0, 5), np.int64)
            for key in np.unique(keys, axis=0):
                rows = np.flatnonzero((keys == key).all(axis=1))
                groups.append((int(key[0]), int(key[1]), bool(key[2]), bool(key[3]), bool(key[4]), rows))
            self.groups[name] = groups
        # each (node, path) at most once: the blend below accumulates with fancy indexing
        pairs = self.node * 4 + path
        self.unique = len(np.unique(pairs)) == len(pairs)

    def locate(self, times: np.ndarray, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per timeline of the clip: (key, u, span) at clip-local time t, as the kernels' locate_key
        (key -1 before the first key, count - 1 at or after the last; u and span 0 there)."""
        n = len(self.timelines)
        key, u, span = np.zeros(n, np.int64), np.zeros(n), np.zeros(n)
        for i, (start, count) in enumerate(self.timelines.tolist()):
            keys = times[start:start + count].astype(np.float64)
            j = int(np.searchsorted(keys, t, side="right")) - 1
            key[i] = j
            if 0 <= j < count - 1:
                t0 = keys[j]
                span[i] = keys[j + 1] - t0
                u[i] = (t - t0) / span[i]
        return key, u, span

    def sample(self, values: np.ndarray, times: np.ndarray, t: float, path_name: str, varying_only: bool = False):
        """Every track at clip-local time t: yields (rows of this clip's tracks, (n, width) float64
        values, rotation, weights) per group (``path_name`` "blend" or "single": which modes)."""
        key_tl, u_tl, span_tl = self.locate(times, t)
        for mode, width, cubic, rotation, weights, rows in self.groups[path_name]:
            if varying_only:
                rows = rows[self.varying[rows]]
                if not len(rows):
                    continue
            tl = self.tl[rows]
            constant = tl < 0
            key = np.where(constant, -1, key_tl[np.maximum(tl, 0)] if len(key_tl) else -1)
            u = np.where(constant, 0.0, u_tl[np.maximum(tl, 0)] if len(u_tl) else 0.0)
            span = np.where(constant, 0.0, span_tl[np.maximum(tl, 0)] if len(span_tl) else 0.0)
            stride, mid = (3 * width, width) if cubic else (width, 0)
            lanes = np.arange(width)
            vs = self.value_start[rows]
            held = np.take(values, (vs + np.maximum(key, 0) * stride + mid)[:, None] + lanes).astype(np.float64)
            inside = (key >= 0) & (key < self.count[rows] - 1)
            if mode != HOLD and inside.any():
                a = (vs + np.where(inside, key, 0) * stride)[:, None]
                u2 = u[:, None]
                if mode == CUBIC:
                    out = _hermite(values, a, a + stride, width, u2, span[:, None], rotation)
                else:
                    va = np.take(values, a + lanes).astype(np.float64)
                    vb = np.take(values, a + stride + lanes).astype(np.float64)
                    if mode == LERP:
                        out = va * (1.0 - u2) + vb * u2
                    elif mode == NLERP:
                        out = _nlerp(va, vb, u)
                    else:
                        out = _slerp(va, vb, u)
                held = np.where(inside[:, None], out, held)
            yield rows, held, rotation, weights


def _dot4(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise xyzw dot products, summed left to right as the kernels do."""
    return a[:, 0] * b[:, 0] + a[:, 1] * b[:, 1] + a[:, 2] * b[:, 2] + a[:, 3] * b[:, 3]


def _nlerp(a: np.ndarray, b: np.ndarray, u: np.ndarray) -> np.ndarray:
    """:func:`skeletal.anim.sampling.nlerp_into` over rows: (n, 4) keys, (n,) fractions."""
    b = np.where((_dot4(a, b) < 0.0)[:, None], -b, b)
    q = a + (b - a) * u[:, None]
    inv = 1.0 / np.sqrt(q[:, 0] * q[:, 0] + q[:, 1] * q[:, 1] + q[:, 2] * q[:, 2] + q[:, 3] * q[:, 3])
    return q * inv[:, None]


def _slerp(a: np.ndarray, b: np.ndarray, u: np.ndarray) -> np.ndarray:
    """:func:`skeletal.quat.slerp_into` over rows (shortest path; a normalised lerp for nearly parallel
    keys; identical keys give a unchanged)."""
    cos = _dot4(a, b)
    flip = cos < 0.0
    b = np.where(flip[:, None], -b, b)
    cos = np.where(flip, -cos, cos)
    s0, s1 = 1.0 - u, u.copy()
    far = cos < NLERP_ABOVE_COS
    if far.any():
        angle = np.arccos(cos[far])
        inv = 1.0 / np.sin(angle)
        s0[far] = np.sin(s0[far] * angle) * inv
        s1[far] = np.sin(s1[far] * angle) * inv
    q = a * s0[:, None] + b * s1[:, None]
    near = ~far
    if near.any():
        qn = q[near]
        inv = 1.0 / np.sqrt(qn[:, 0] * qn[:, 0] + qn[:, 1] * qn[:, 1] + qn[:, 2] * qn[:, 2] + qn[:, 3] * qn[:, 3])
        q[near] = qn * inv[:, None]
    same = (a == b).all(axis=1) & ~flip
    return np.where(same[:, None], a, q)


def _hermite(values: np.ndarray, a: np.ndarray, b: np.ndarray, c: int, u: np.ndarray, span: np.ndarray,
             rotation: bool) -> np.ndarray:
    """glTF's cubic spline between the key records at ``a`` and ``b`` (in-tangent, value, out-tangent),
    as :func:`skeletal.anim.sampling.interpolate_between`; rotations normalised (zero: identity)."""
    lanes = np.arange(c)
    u2 = u * u
    u3 = u2 * u
    h00 = 2.0 * u3 - 3.0 * u2 + 1.0
    h10 = (u3 - 2.0 * u2 + u) * span
    h01 = -2.0 * u3 + 3.0 * u2
    h11 = (u3 - u2) * span
    v0 = np.take(values, a + c + lanes).astype(np.float64)
    m0 = np.take(values, a + 2 * c + lanes).astype(np.float64)
    v1 = np.take(values, b + c + lanes).astype(np.float64)
    m1 = np.take(values, b + lanes).astype(np.float64)
    out = h00 * v0 + h10 * m0 + h01 * v1 + h11 * m1
    if rotation:
        n = np.sqrt(out[:, 0] ** 2 + out[:, 1] ** 2 + out[:, 2] ** 2 + out[:, 3] ** 2)
        ok = n > 0.0
        inv = np.where(ok, 1.0 / np.where(ok, n, 1.0), 0.0)
        out = out * inv[:, None]
        out[~ok] = (0.0, 0.0, 0.0, 1.0)
    return out


class _Plan:
    """A mixer's numpy frame state: its clips' track arrays and its rig's depth levels, rebuilt when
    the clip tables or the rig change."""

    def __init__(self, mixer: Any):
        cs = mixer.clipset
        clip_table, segments, base_pose, base_morph = mixer._clip_tables()
        self.key = (cs.version, id(clip_table), id(mixer.rig))
        self.clip_table, self.base_pose, self.base_morph = clip_table, base_pose, base_morph
        morph_start = np.asarray(mixer.asset.morph_start, np.int64)
        self.clips = [_Clip(cs, c, clip_table, segments, morph_start) for c in range(len(cs.clips))]
        self.unique = all(clip.unique for clip in self.clips)
        parents = np.asarray(mixer.rig.parents, np.int64)
        depth = np.zeros(len(parents), np.int64)
        for i, p in enumerate(parents.tolist()):  # parent-first: once per rig, not per frame
            depth[i] = 0 if p < 0 else depth[p] + 1
        self.roots = np.flatnonzero(parents < 0)
        self.levels = [(np.flatnonzero(depth == d), parents[depth == d]) for d in range(1, int(depth.max(initial=0)) + 1)]


def _plan(mixer: Any) -> _Plan:
    plan = getattr(mixer, "_numpy_plan", None)
    tables = mixer._clip_tables()
    if plan is None or plan.key != (mixer.clipset.version, id(tables[0]), id(mixer.rig)):
        plan = mixer._numpy_plan = _Plan(mixer)
    return plan


def step(mixer: Any, dt: float, stages: int = K.ALL) -> int:
    """Run ``stages`` (bits of :data:`~skeletal.playback.kernels.ALL`) of ``mixer``'s update in numpy,
    on its own arrays (``fs``, ``ist``, ``local_pose``, ``morph_weights``, ``world``, ``palettes``), as
    the compiled update does; returns how many instances reported an event. Only for a mixer
    :func:`covers` accepts."""
    plan = _plan(mixer)
    cs = mixer.clipset
    fs, ist = mixer.fs, mixer.ist
    events = 0
    if stages & K.ADVANCE:
        events = advance(fs, ist, mixer.slot_clip, plan.clip_table, cs.duration, cs.marker_time, dt)
    if stages & K.BLEND:
        blended = False
        for b in range(mixer.count):
            blended |= _pose_instance(mixer, plan, b)
        if blended:
            mixer._blends = True  # as the compiled path: the kernel with blending from now on
    if stages & K.WORLD:
        _world(plan, mixer.local_pose, mixer.world)
        _palettes(mixer.world, mixer.palette_joints, mixer._inverse_bind, mixer.palettes)
    return events


def _single_slot(mixer: Any, b: int) -> int:
    """The kernels' ``_single_slot_of``: the slot whose action is instance b's whole base layer (it
    plays alone at full weight, unmasked, no snapshot), -1 when none plays, -2 when blending is needed."""
    fs, lw = mixer.fs, mixer.layer_weight
    if not (mixer._base_unmasked and lw[b, 0] == 1.0 and mixer.snap_weight[b] <= 0.0):
        return -1
    single = -1
    for s in np.flatnonzero((mixer.slot_layer == 0) & (fs[b, :, K.F_EFFECTIVE] > 0.0)).tolist():
        single = s if single == -1 and fs[b, s, K.F_EFFECTIVE] == 1.0 else -2
    return single


def _pose_instance(mixer: Any, plan: _Plan, b: int) -> bool:
    """Instance b's local pose and morph weights from its actions (the kernels' _pose_single or
    _evaluate_instance, in the update's order); True when that took blending (more than one action,
    a part weight, a layer over the base), which the single-action kernel has not compiled."""
    cs = mixer.clipset
    pose, morph = mixer.local_pose[b], mixer.morph_weights[b]
    fs = mixer.fs[b]
    single = _single_slot(mixer, b)
    if single >= 0:  # its clip's base pose with the varying tracks sampled in (the kernels' _pose_single)
        c = int(mixer.slot_clip[single])
        pose[:] = plan.base_pose[c]
        morph[:] = plan.base_morph[c]
        clip = plan.clips[c]
        flat = pose.reshape(-1)
        for rows, value, _, weights in clip.sample(cs.values, cs.times, fs[single, K.F_SAMPLE], "single", True):
            dest = clip.dest[rows][:, None] + np.arange(value.shape[1])
            (morph if weights else flat)[dest] = value
        if not (mixer.layer_weight[b, 1:] > 0.0).any():
            return False
    else:
        pose[:] = mixer.rig.rest
        morph[:] = mixer.asset.rest_morph
        if mixer.snap_weight[b] <= 0.0 and not (fs[:, K.F_EFFECTIVE] > 0.0).any():
            return False  # nothing plays: the rest pose (the single-action kernel's _rest_if_idle)
    n_nodes, n_morph = pose.shape[0], morph.shape[0]
    for layer in range(mixer.layer_weight.shape[1]):
        lw = float(mixer.layer_weight[b, layer])
        if lw <= 0.0 or (layer == 0 and single >= 0):
            continue
        mask = mixer.layer_mask[layer]
        acc = np.zeros((n_nodes, K.ACC_WIDTH))
        accm = np.zeros((n_morph, 2))
        for s in np.flatnonzero(mixer.slot_layer == layer).tolist():
            w = float(fs[s, K.F_EFFECTIVE])
            if w <= 0.0:
                continue
            clip = plan.clips[int(mixer.slot_clip[s])]
            for rows, value, rotation, weights in clip.sample(cs.values, cs.times, fs[s, K.F_SAMPLE], "blend"):
                nodes = clip.node[rows]
                keep = mask[nodes] > 0.0
                if not keep.all():
                    rows, value, nodes = rows[keep], value[keep], nodes[keep]
                if weights:
                    dest = (clip.dest[rows][:, None] + np.arange(value.shape[1])).reshape(-1)
                    accm[dest, 0] += w * value.reshape(-1)
                    accm[dest, 1] += w
                elif rotation:
                    q = acc[nodes, 3:7]
                    flip = (acc[nodes, 11] > 0.0) & (_dot4(q, value) < 0.0)
                    ww = np.where(flip, -w, w)
                    acc[nodes, 3:7] = q + ww[:, None] * value
                    acc[nodes, 11] += np.abs(ww)
                    acc[nodes, 13] += 1.0
                else:
                    paths = clip.path[rows]
                    for p, o, col in ((_T, 0, 10), (_S, 7, 12)):
                        sel = paths == p
                        if sel.any():
                            acc[nodes[sel], o:o + 3] += w * value[sel]
                            acc[nodes[sel], col] += w
        m = mask * lw
        mixed = np.flatnonzero(m > 0.0)
        if len(mixed):
            _mix_layer(pose, acc, mixed, np.minimum(m[mixed], 1.0))
        wm = accm[:, 1]
        on = wm > 0.0
        if on.any():
            rest_w = np.where(wm[on] < 1.0, 1.0 - wm[on], 0.0)
            value = (accm[on, 0] + rest_w * morph[on]) / (wm[on] + rest_w)
            morph[on] += (value - morph[on]) * min(lw, 1.0)
    return True


def _mix_layer(pose: np.ndarray, acc: np.ndarray, nodes: np.ndarray, m: np.ndarray) -> None:
    """The kernels' ``_mix_layer_into`` for the rows ``nodes`` of ``pose`` (N, 10) at mix ``m`` (n,)."""
    for p, o, width in ((_T, 0, 3), (_R, 3, 4), (_S, 7, 3)):
        w = acc[nodes, 10 + p]
        on = w > 0.0
        if not on.any():
            continue
        rows, w, mm = nodes[on], w[on], m[on]
        rest = np.where(w < 1.0, 1.0 - w, 0.0)
        cur = pose[rows, o:o + width]
        a = acc[rows, o:o + width]
        if p != _R:
            value = (a + rest[:, None] * cur) / (w + rest)[:, None]
            pose[rows, o:o + width] = cur + (value - cur) * mm[:, None]
            continue
        exact = (rest == 0.0) & (w == 1.0) & (acc[rows, 13] == 1.0) & (mm == 1.0)
        sign = np.where(_dot4(a, cur) < 0.0, -1.0, 1.0)
        q = a + (sign * rest)[:, None] * cur
        norm = np.sqrt(q[:, 0] * q[:, 0] + q[:, 1] * q[:, 1] + q[:, 2] * q[:, 2] + q[:, 3] * q[:, 3])
        ok = norm != 0.0
        q = q / np.where(ok, norm, 1.0)[:, None]
        part = mm < 1.0
        if part.any():
            qp, cp = q[part], cur[part]
            qp = np.where((_dot4(qp, cp) < 0.0)[:, None], -qp, qp)
            qp = cp + (qp - cp) * mm[part][:, None]
            n2 = np.sqrt(qp[:, 0] * qp[:, 0] + qp[:, 1] * qp[:, 1] + qp[:, 2] * qp[:, 2] + qp[:, 3] * qp[:, 3])
            q[part] = qp / n2[:, None]
        q = np.where(exact[:, None], a, np.where(ok[:, None], q, cur))
        pose[rows, 3:7] = q


def _local_rows(pose: np.ndarray) -> np.ndarray:
    """(..., 3, 4) top rows of T @ R @ S per local row (..., 10): the kernels' ``_trs_rows``."""
    tx, ty, tz = pose[..., 0], pose[..., 1], pose[..., 2]
    x, y, z, w = pose[..., 3], pose[..., 4], pose[..., 5], pose[..., 6]
    sx, sy, sz = pose[..., 7], pose[..., 8], pose[..., 9]
    x2, y2, z2 = x + x, y + y, z + z
    xx, xy, xz, yy, yz, zz = x * x2, x * y2, x * z2, y * y2, y * z2, z * z2
    wx, wy, wz = w * x2, w * y2, w * z2
    rows = np.stack([(1.0 - (yy + zz)) * sx, (xy - wz) * sy, (xz + wy) * sz, tx,
                     (xy + wz) * sx, (1.0 - (xx + zz)) * sy, (yz - wx) * sz, ty,
                     (xz - wy) * sx, (yz + wx) * sy, (1.0 - (xx + yy)) * sz, tz], axis=-1)
    return rows.reshape(pose.shape[:-1] + (3, 4))


def _affine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b for affine (..., 3|4, 4) matrices taken by their top rows (bottom rows 0 0 0 1): the
    kernels' arithmetic (three products summed left to right, then the translation)."""
    out = a[..., :3, 0:1] * b[..., 0:1, :] + a[..., :3, 1:2] * b[..., 1:2, :] + a[..., :3, 2:3] * b[..., 2:3, :]
    out[..., 3] += a[..., :3, 3]
    return out


def _world(plan: _Plan, pose: np.ndarray, world: np.ndarray) -> None:
    """World matrices (B, N, 4, 4) of every node from the local poses (B, N, 10), a depth level at a time."""
    world[:, :, :3, :] = _local_rows(pose)
    world[:, :, 3, :] = (0.0, 0.0, 0.0, 1.0)
    for nodes, parents in plan.levels:
        world[:, nodes, :3, :] = _affine(world[:, parents], world[:, nodes])


def _palettes(world: np.ndarray, joints: np.ndarray, inverse_bind: np.ndarray, out: np.ndarray) -> None:
    """out[b, j] = world[b, joints[j]] @ inverse_bind[j] (affine; bottom rows 0 0 0 1)."""
    if not len(joints):
        return
    out[:, :, :3, :] = _affine(world[:, joints], inverse_bind[None])
    out[:, :, 3, :] = (0.0, 0.0, 0.0, 1.0)


__all__ = ["covers", "step", "advance"]
