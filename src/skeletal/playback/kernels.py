# Over 600 lines: the fused per-instance update (clocks, sampling, blending, layers, additive, IK hook,
# world rows, palettes) and its single-action fast path share inlined helpers that numba compiles as one unit.
"""Mixer kernels: advance action clocks and fades, then sample and blend every action into poses.

State layout (B instances, S action slots; see :class:`skeletal.playback.mixer.Mixer`):

* ``fs`` (B, S, NF) float64 fields, indices below (``F_*``)
* ``ist`` (B, S, NI) int64 fields (``I_*``)

Blending contract (one override layer): per node and path, the weighted sum of every action's value;
rotations are accumulated sign-aligned to the first contribution and normalised (normalised quaternion
averaging, exact for two actions: the 50/50 mix of two rotations is their slerp midpoint). When the
weights sum to less than 1 the pose beneath (rest pose for the base layer) fills the remainder; above
1 they are normalised. A layer is then mixed over the pose beneath by ``layer weight * mask[node]``.
Additive layers apply each action's deltas in turn (conventions in :class:`skeletal.clip.Clip`).
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange
from numba.extending import overload

from ..anim.ik import solve_stages_at
from ..anim.pose import palettes_one, world_subset_staged
from ..quat import near_slerp_known_into, qmul, sin_quarter, slerp_into
from ..anim.sampling import interpolate_into, lerp3_into, locate_key, nlerp_into
from .clipset import (CL_MARKER_END, CL_MARKER_START, CL_SEGMENT_END, CL_SEGMENT_START, CL_TIMELINE_END,
                      CL_TIMELINE_START, SEG_CONSTANT, SEG_END, SEG_FIRST, SEG_KIND, SEG_LERP3, SEG_NLERP,
                      SEG_FAST_END, SEG_SLERP, SEG_TIMELINE, TK_INTERP, TK_KEY_START, TK_NODE, TK_OUT, TK_PATH, TK_VALUE_START, TK_WIDTH)
from .inertia_kernels import IDLE, ST_PHASE, ST_REPOSED, inertialize_instance
from .jobs import borrow, field
from .single_lanes import copy_rows, lerp_lanes_into, slerp_lanes_into

# float fields
F_TIME = 0  # action clock: [0, d] (once/clamp/repeat) or the unfolded phase [0, 2d) (pingpong)
F_SAMPLE = 1  # clip-local time the pose is sampled at
F_SPEED = 2  # time scale (negative plays backwards)
F_WEIGHT = 3  # user weight
F_FADE_FROM = 4
F_FADE_TO = 5
F_FADE_ELAPSED = 6
F_FADE_DURATION = 7  # 0: no fade running (the envelope is FADE_TO)
F_WARP_FROM = 8  # time-scale multiplier at the start of the fade ...
F_WARP_TO = 9  # ... and at its end (crossfade time warp)
F_REPETITIONS = 10  # loops (repeat) or bounces (pingpong) before finishing; inf = forever
F_EFFECTIVE = 11  # output: weight * fade envelope, 0 when disabled
F_PREV_SAMPLE = 12  # sample time before the last update (root motion)
NF = 13

# int fields
I_LOOP = 0  # LOOP_* below
I_LOOP_COUNT = 1
I_FLAGS = 2  # FLAG_* bits
I_EV_LOOPS = 3  # output of the last update: loops completed
I_EV_FINISHED = 4  # output: 1 if the action finished during the last update
I_EV_MARKERS = 5  # output: bit m set if the clip's marker m was crossed
NI = 6

LOOP_ONCE, LOOP_REPEAT, LOOP_PINGPONG, LOOP_CLAMP = 0, 1, 2, 3
LOOP_NAMES = {"once": LOOP_ONCE, "repeat": LOOP_REPEAT, "pingpong": LOOP_PINGPONG, "clamp": LOOP_CLAMP}
FLAG_ENABLED, FLAG_PAUSED, FLAG_FINISHED = 1, 2, 4

TRANSLATION, ROTATION, SCALE, WEIGHTS = 0, 1, 2, 3

# unsigned offsets for index arithmetic in uint64 (numba types uint64 + int64 as float64)
_U1, _U2, _U3, _U4, _U5, _U6, _U7 = (np.uint64(k) for k in range(1, 8))


@njit(cache=True, forceinline=True)
def _crossings(lo, hi, m, period, forward):
    """How many of the points m + k*period lie in (lo, hi] (forward) or [lo, hi) (backward)."""
    if forward:
        return np.floor((hi - m) / period) - np.floor((lo - m) / period)
    return np.ceil((hi - m) / period) - np.ceil((lo - m) / period)


@njit(cache=True)
def _advance_one(fs, ist, d, dt, marker_time, m0, m1):
    """Advance one action by dt seconds of mixer time (see module docstring for the fields)."""
    ist[I_EV_LOOPS] = 0
    ist[I_EV_FINISHED] = 0
    ist[I_EV_MARKERS] = 0
    flags = ist[I_FLAGS]
    if flags & FLAG_ENABLED == 0:
        fs[F_EFFECTIVE] = 0.0
        return
    # Fade envelope, and the time warp averaged over this step (it ramps linearly during the fade,
    # then holds), so that the clock advances by the exact integral of speed * warp.
    alpha = 1.0
    warp = fs[F_WARP_TO]
    duration = fs[F_FADE_DURATION]
    if duration > 0.0:
        e0 = fs[F_FADE_ELAPSED]
        e1 = e0 + dt
        fs[F_FADE_ELAPSED] = e1
        alpha = min(e1 / duration, 1.0)
        w0 = fs[F_WARP_FROM] + (fs[F_WARP_TO] - fs[F_WARP_FROM]) * min(e0 / duration, 1.0)
        w1 = fs[F_WARP_FROM] + (fs[F_WARP_TO] - fs[F_WARP_FROM]) * alpha
        if dt > 0.0:
            ramp = max(min(e1, duration) - e0, 0.0)
            warp = (ramp * 0.5 * (w0 + w1) + (dt - ramp) * fs[F_WARP_TO]) / dt
        else:
            warp = w0
    envelope = fs[F_FADE_FROM] + (fs[F_FADE_TO] - fs[F_FADE_FROM]) * alpha
    if alpha >= 1.0 and fs[F_FADE_DURATION] > 0.0:
        fs[F_FADE_DURATION] = 0.0
        fs[F_FADE_FROM] = fs[F_FADE_TO]
        fs[F_WARP_FROM] = fs[F_WARP_TO]
        if fs[F_FADE_TO] <= 0.0:  # faded out: the action stops
            ist[I_FLAGS] = flags & ~FLAG_ENABLED
            fs[F_EFFECTIVE] = 0.0
            return
    fs[F_PREV_SAMPLE] = fs[F_SAMPLE]
    delta = 0.0
    if flags & (FLAG_PAUSED | FLAG_FINISHED) == 0:
        delta = dt * fs[F_SPEED] * warp
    loop = ist[I_LOOP]
    if d <= 0.0:
        fs[F_TIME] = 0.0
        fs[F_SAMPLE] = 0.0
        fs[F_EFFECTIVE] = fs[F_WEIGHT] * envelope
        return
    t0 = fs[F_TIME]
    t1 = t0 + delta
    forward = delta >= 0.0
    if delta != 0.0:
        # Markers crossed on the way from t0 to t1 (unfolded clock).
        for m in range(m0, m1):
            mt = marker_time[m]
            hit = 0.0
            if loop == LOOP_REPEAT:
                hit = _crossings(min(t0, t1), max(t0, t1), mt, d, forward)
            elif loop == LOOP_PINGPONG:
                hit = _crossings(min(t0, t1), max(t0, t1), mt, 2.0 * d, forward)
                if mt > 0.0 and mt < d:
                    hit += _crossings(min(t0, t1), max(t0, t1), 2.0 * d - mt, 2.0 * d, forward)
            else:
                lo = min(t0, t1)
                hi = min(max(t0, t1), d)
                lo = max(lo, 0.0)
                if (forward and lo < mt <= hi) or (not forward and lo <= mt < hi):
                    hit = 1.0
            if hit > 0.0 and m - m0 < 63:
                ist[I_EV_MARKERS] |= np.int64(1) << (m - m0)
    finished = False
    if loop == LOOP_ONCE or loop == LOOP_CLAMP:
        if t1 >= d and delta > 0.0:
            t1 = d
            finished = True
        elif t1 <= 0.0 and delta < 0.0:
            t1 = 0.0
            finished = True
        sample = t1
    else:
        period = d if loop == LOOP_REPEAT else 2.0 * d
        # Loops completed = multiples of d crossed (each bounce counts for ping-pong): forward the
        # n-th is k = floor(t0/d) + n, backward k = floor(t0/d) - n + 1.
        loops = abs(np.floor(t1 / d) - np.floor(t0 / d))
        if loops > 0.0:
            done = ist[I_LOOP_COUNT]
            if done + loops >= fs[F_REPETITIONS]:
                rounds_left = fs[F_REPETITIONS] - done
                if forward:
                    k = np.floor(t0 / d) + rounds_left
                else:
                    k = np.floor(t0 / d) - rounds_left + 1.0
                if loop == LOOP_REPEAT:
                    sample = d if forward else 0.0
                else:
                    sample = d if k - 2.0 * np.floor(k / 2.0) == 1.0 else 0.0
                t1 = sample
                loops = rounds_left
                finished = True
            # The last boundary of a finished action is reported as "finished", not as a loop.
            ist[I_EV_LOOPS] = np.int64(loops) - (1 if finished else 0)
            ist[I_LOOP_COUNT] = done + np.int64(loops)
        if not finished:
            t1 = t1 - period * np.floor(t1 / period)
            if loop == LOOP_REPEAT:
                sample = t1
            else:
                sample = 2.0 * d - t1 if t1 > d else t1
    fs[F_TIME] = t1
    fs[F_SAMPLE] = sample
    if finished:
        ist[I_EV_FINISHED] = 1
        if loop == LOOP_ONCE:
            ist[I_FLAGS] = flags & ~FLAG_ENABLED
            fs[F_EFFECTIVE] = 0.0
            return
        ist[I_FLAGS] = flags | FLAG_FINISHED
    fs[F_EFFECTIVE] = fs[F_WEIGHT] * envelope


@njit(cache=True, forceinline=True)
def _advance_instance(b, dt, fs, ist, slot_clip, clip_table, clip_duration, marker_time):
    """Advance every action of instance b; True when one of them reported an event."""
    any_event = False
    for s in range(slot_clip.shape[0]):
        c = slot_clip[s]
        _advance_one(fs[b, s], ist[b, s], clip_duration[c], dt, marker_time,
                     clip_table[c, CL_MARKER_START], clip_table[c, CL_MARKER_END])
        if ist[b, s, I_EV_LOOPS] != 0 or ist[b, s, I_EV_FINISHED] != 0 or ist[b, s, I_EV_MARKERS] != 0:
            any_event = True
    return any_event


@njit(cache=True, parallel=True)
def advance(fs, ist, slot_clip, clip_table, clip_duration, marker_time, dt):
    """Advance every action of every instance by ``dt`` seconds."""
    for b in prange(fs.shape[0]):
        _advance_instance(b, dt, fs, ist, slot_clip, clip_table, clip_duration, marker_time)


# ---------------------------------------------------------------------------------------------
# blending

ACC_WIDTH = 14  # per node: values t(3) q(4) s(3), weights (t, r, s), rotation contributions


@njit(cache=True, forceinline=True)
def _accumulate(acc, n, p, w, tmp):
    """Add w * tmp (a sampled value of path p) to node n's accumulator."""
    row = acc[n]
    if p == TRANSLATION:
        for i in range(3):
            row[i] += w * tmp[i]
        row[10] += w
    elif p == SCALE:
        for i in range(3):
            row[7 + i] += w * tmp[i]
        row[12] += w
    else:
        if row[11] > 0.0 and row[3] * tmp[0] + row[4] * tmp[1] + row[5] * tmp[2] + row[6] * tmp[3] < 0.0:
            w = -w
        for i in range(4):
            row[3 + i] += w * tmp[i]
        row[11] += abs(w)
        row[13] += 1.0


@njit(cache=True, forceinline=True)
def _mix_layer_into(pose_row, acc_row, m):
    """Resolve one node's accumulated layer value and mix it over ``pose_row`` by m in (0, 1]."""
    for p in range(3):
        o = 0 if p == 0 else (3 if p == 1 else 7)
        width = 4 if p == 1 else 3
        w = acc_row[10 + p]
        if w <= 0.0:
            continue
        rest = 1.0 - w if w < 1.0 else 0.0
        if p == 1:
            # Rotations: fill the remainder with the pose beneath, sign-aligned, then normalise.
            # A single full-weight action is used exactly as sampled (no renormalisation).
            if rest == 0.0 and w == 1.0 and acc_row[13] == 1.0 and m == 1.0:
                for i in range(4):
                    pose_row[3 + i] = acc_row[3 + i]
                continue
            sign = 1.0
            if acc_row[3] * pose_row[3] + acc_row[4] * pose_row[4] + acc_row[5] * pose_row[5] + acc_row[6] * pose_row[6] < 0.0:
                sign = -1.0
            qx = acc_row[3] + sign * rest * pose_row[3]
            qy = acc_row[4] + sign * rest * pose_row[4]
            qz = acc_row[5] + sign * rest * pose_row[5]
            qw = acc_row[6] + sign * rest * pose_row[6]
            norm = np.sqrt(qx * qx + qy * qy + qz * qz + qw * qw)
            if norm == 0.0:
                continue
            qx /= norm
            qy /= norm
            qz /= norm
            qw /= norm
            if m < 1.0:
                # nlerp from the pose beneath (sign-aligned) towards the layer's rotation.
                if qx * pose_row[3] + qy * pose_row[4] + qz * pose_row[5] + qw * pose_row[6] < 0.0:
                    qx, qy, qz, qw = -qx, -qy, -qz, -qw
                qx = pose_row[3] + (qx - pose_row[3]) * m
                qy = pose_row[4] + (qy - pose_row[4]) * m
                qz = pose_row[5] + (qz - pose_row[5]) * m
                qw = pose_row[6] + (qw - pose_row[6]) * m
                norm = np.sqrt(qx * qx + qy * qy + qz * qz + qw * qw)
                qx /= norm
                qy /= norm
                qz /= norm
                qw /= norm
            pose_row[3] = qx
            pose_row[4] = qy
            pose_row[5] = qz
            pose_row[6] = qw
        else:
            total = w + rest
            for i in range(width):
                value = (acc_row[o + i] + rest * pose_row[o + i]) / total
                pose_row[o + i] = pose_row[o + i] + (value - pose_row[o + i]) * m


@njit(cache=True, forceinline=True)
def _add_rotation(pose_row, dq, w):
    """pose rotation q <- q * slerp(identity, dq, w) (Hamilton product, xyzw; nlerp from identity)."""
    if dq[3] < 0.0:
        dx, dy, dz, dw = -dq[0], -dq[1], -dq[2], -dq[3]
    else:
        dx, dy, dz, dw = dq[0], dq[1], dq[2], dq[3]
    # slerp(I, dq, w): angle scaling in axis-angle form
    sin_half = np.sqrt(dx * dx + dy * dy + dz * dz)
    if sin_half < 1e-12:
        return
    half = np.arctan2(sin_half, dw) * w
    k = np.sin(half) / sin_half
    bx, by, bz, bw = dx * k, dy * k, dz * k, np.cos(half)
    pose_row[3], pose_row[4], pose_row[5], pose_row[6] = qmul(pose_row[3], pose_row[4], pose_row[5],
                                                              pose_row[6], bx, by, bz, bw)


@njit(cache=True, forceinline=True)
def _locate_timelines(c, t, clip_table, timeline_keys, times, cursors, locs):
    """Find clip c's key interval at time t on each of its timelines (once, for all their tracks):
    ``locs[l - first]`` = (key, u, span) for timeline l; ``cursors`` (L,) are read and updated."""
    first = clip_table[c, CL_TIMELINE_START]
    for tl in range(first, clip_table[c, CL_TIMELINE_END]):
        key, u, span = locate_key(times, timeline_keys[tl, 0], timeline_keys[tl, 1], t, cursors[tl])
        cursors[tl] = max(key, 0)
        row = locs[tl - first]
        row[0] = key
        row[1] = u
        row[2] = span


@njit(cache=True, forceinline=True)
def _segment_interval(g, segments, first_timeline, locs, timeline_keys):
    """(key, u, span, key count) of segment g's timeline; a constant segment holds its first key."""
    tl = segments[g, SEG_TIMELINE]
    if segments[g, SEG_KIND] == SEG_CONSTANT:
        return -1, 0.0, 0.0, 1
    loc = locs[tl - first_timeline]
    return np.int64(loc[0]), loc[1], loc[2], timeline_keys[tl, 1]


@njit(cache=True)
def _sample_track_into(kind, k, interval, tracks, values, out, o):
    """Track k of a segment of ``kind`` at ``interval`` (key, u, span, key count: see
    :func:`_segment_interval`) into ``out[o:]``. Between two keys the
    segment kinds with a known layout take their own short path; everything else (outside the keys,
    STEP, CUBICSPLINE, other widths) goes through the one general :func:`interpolate_into`. Not
    inlined: the evaluate kernels call it from three places, and numba's IR inlining of this body
    into each of them made the playback kernels take minutes to compile."""
    key, u, span, count = interval
    vs = tracks[k, TK_VALUE_START]
    if 0 <= key < count - 1:
        if kind == SEG_LERP3:
            a = vs + key * 3
            s = 1.0 - u
            for i in range(3):
                out[o + i] = np.float64(values[a + i]) * s + np.float64(values[a + 3 + i]) * u
            return
        if kind == SEG_NLERP or kind == SEG_SLERP:
            a = vs + key * 4
            ax, ay, az, aw = np.float64(values[a]), np.float64(values[a + 1]), np.float64(values[a + 2]), np.float64(values[a + 3])
            bx, by, bz, bw = np.float64(values[a + 4]), np.float64(values[a + 5]), np.float64(values[a + 6]), np.float64(values[a + 7])
            if kind == SEG_NLERP:
                nlerp_into(out, o, ax, ay, az, aw, bx, by, bz, bw, u)
            else:
                slerp_into(out, o, ax, ay, az, aw, bx, by, bz, bw, u)
            return
    interpolate_into(values, vs, tracks[k, TK_WIDTH], tracks[k, TK_INTERP], tracks[k, TK_PATH] == ROTATION,
                     key, u, span, count, out, o, False)


# ``hot_tracks`` columns (one 16-byte row per track): what the single-action path reads per track
HOT_VALUE_START, HOT_OUT, HOT_KEY_START = 0, 1, 2


def hot_tracks(track_table: np.ndarray) -> np.ndarray:
    """(T, 4) int32: each track's value start, pose offset (``TK_OUT``, -1 for morph weights) and first
    key (``TK_KEY_START``), padded to 16 bytes: the columns :func:`_sample_clip_direct` reads per
    track, four tracks to a cache line (a ``track_table`` row is 64 bytes). int64 for clip sets too
    large for int32 offsets.

    >>> hot = hot_tracks(clipset.track_table)                          # doctest: +SKIP
    """
    cols = track_table[:, [TK_VALUE_START, TK_OUT, TK_KEY_START, TK_OUT]]
    small = cols.size == 0 or int(np.abs(cols).max()) < 2**31 - 8
    return np.ascontiguousarray(cols, dtype=np.int32 if small else np.int64)


@njit(cache=True, forceinline=True)
def _sample_clip_direct(c, job, locs, flat, out_m, keyed):
    """Write clip c's varying tracks straight into a pose (``flat``: its (N * 10) rows flattened)
    and morph weights ``out_m``, at the key intervals in ``locs`` (see :func:`_locate_timelines`), the
    clip tables from ``job`` (a :class:`~skeletal.playback.jobs.PlaybackJob`): a tight
    loop per segment, with the key and fraction shared by all its tracks, reading each track's value
    start, pose offset and first key from ``hot`` (:func:`hot_tracks`: 16 bytes a track, where a
    ``tracks`` row is a 64-byte cache line). ``slerp_keys``: the clip
    set's per-key slerp angles (:attr:`~skeletal.playback.clipset.ClipSet.slerp_keys`; two sines per
    slerp instead of an arccos and three) with the near keys' flags in column 1
    (:func:`skeletal.quat.near_slerp_table`), used when ``keyed`` (else :func:`skeletal.quat.slerp_into`)."""
    clip_table, segments, tracks, hot = field(job, "clip_table"), field(job, "segments"), field(job, "tracks"), field(job, "hot_tracks")
    timeline_keys, values, morph_start = field(job, "timeline_keys"), field(job, "values"), field(job, "morph_start")
    slerp_keys = field(job, "slerp_keys")
    lanes_seg, lanes_out = field(job, "lanes_seg"), field(job, "lanes_out")
    lanes_values, lanes_coef, lanes_kind = field(job, "lanes_values"), field(job, "lanes_coef"), field(job, "lanes_kind")
    lerp_seg, lerp_out, lerp_values = field(job, "lerp_seg"), field(job, "lerp_out"), field(job, "lerp_values")
    first_timeline = clip_table[c, CL_TIMELINE_START]
    for g in range(clip_table[c, CL_SEGMENT_START], clip_table[c, CL_SEGMENT_END]):
        kind = segments[g, SEG_KIND]
        if kind == SEG_CONSTANT:
            continue  # already in the clip's base pose
        interval = _segment_interval(g, segments, first_timeline, locs, timeline_keys)
        key, u, span, count = interval
        inside = key >= 0 and key < count - 1
        if kind == SEG_LERP3 and inside:
            # unsigned indices: numba's negative-index wraparound (a compare and select per signed
            # index) doubled this loop's time (docs/guides/performance.md)
            key3 = np.uint64(key * 3)
            lerp_end = segments[g, SEG_END]
            if keyed and lerp_lanes_into(flat, lerp_seg, g, key, u, lerp_out, lerp_values):
                lerp_end = segments[g, SEG_FIRST]  # eight tracks to a vector (single_lanes.py)
            for k in range(np.uint64(segments[g, SEG_FIRST]), np.uint64(lerp_end)):
                lerp3_into(flat, np.uint64(hot[k, HOT_OUT]), values, np.uint64(hot[k, HOT_VALUE_START]) + key3, u)
        elif (kind == SEG_NLERP or kind == SEG_SLERP) and inside:
            # nlerp for the prefix whose keys are close enough (see ClipSet.segments), slerp after it
            fast_end = segments[g, SEG_FAST_END]
            key4, ukey = np.uint64(key * 4), np.uint64(key)
            # keyed: the slerp tracks eight to a vector when the segment is packed (single_lanes.py)
            slerp_end = segments[g, SEG_END]
            if keyed and slerp_lanes_into(flat, lanes_seg, g, key, u, lanes_out, lanes_values, lanes_coef, lanes_kind):
                slerp_end = fast_end
            for k in range(np.uint64(fast_end), np.uint64(slerp_end)):
                a = np.uint64(hot[k, HOT_VALUE_START]) + key4
                row = np.uint64(hot[k, HOT_KEY_START]) + ukey
                theta = slerp_keys[row, 0] if keyed else 0.0
                if keyed and theta <= 0.0:
                    # no tabulated angle: identical or nearly parallel keys (most keys of a 30 fps
                    # clip: 86% of Soldier's Walk), slerp_into's own branch 4-wide, its tests tabulated
                    near_slerp_known_into(flat, np.int64(hot[k, HOT_OUT]), values, a, u, slerp_keys[row, 1])
                    continue
                ax, ay = np.float64(values[a]), np.float64(values[a + _U1])
                az, aw = np.float64(values[a + _U2]), np.float64(values[a + _U3])
                bx, by = np.float64(values[a + _U4]), np.float64(values[a + _U5])
                bz, bw = np.float64(values[a + _U6]), np.float64(values[a + _U7])
                if theta > 0.0:
                    # slerp_into's arithmetic with its key angle looked up: the same value to an ulp
                    if ax * bx + ay * by + az * bz + aw * bw < 0.0:
                        bx, by, bz, bw = -bx, -by, -bz, -bw
                    inv = slerp_keys[row, 1]
                    s0 = sin_quarter((1.0 - u) * theta) * inv
                    s1 = sin_quarter(u * theta) * inv
                    o = np.uint64(hot[k, HOT_OUT])
                    flat[o] = ax * s0 + bx * s1
                    flat[o + _U1] = ay * s0 + by * s1
                    flat[o + _U2] = az * s0 + bz * s1
                    flat[o + _U3] = aw * s0 + bw * s1
                else:
                    slerp_into(flat, np.int64(hot[k, HOT_OUT]), ax, ay, az, aw, bx, by, bz, bw, u)
            for k in range(np.uint64(segments[g, SEG_FIRST]), np.uint64(fast_end)):
                a = np.uint64(hot[k, HOT_VALUE_START]) + key4
                nlerp_into(
                    flat, np.int64(hot[k, HOT_OUT]),
                    np.float64(values[a]), np.float64(values[a + _U1]), np.float64(values[a + _U2]), np.float64(values[a + _U3]),
                    np.float64(values[a + _U4]), np.float64(values[a + _U5]), np.float64(values[a + _U6]), np.float64(values[a + _U7]),
                    u,
                )
        else:
            for k in range(segments[g, SEG_FIRST], segments[g, SEG_END]):
                o = tracks[k, TK_OUT]
                if o >= 0:
                    _sample_track_into(kind, k, interval, tracks, values, flat, o)
                else:
                    _sample_track_into(kind, k, interval, tracks, values, out_m, morph_start[tracks[k, TK_NODE]])


@njit(cache=True, forceinline=True)
def _single_slot_of(b, base_unmasked, layer_weight, snap_weight, slot_layer, fs):
    """The slot of instance b's one action when it is the whole pose (the base layer plays it alone
    at full weight, unmasked, no snapshot fading): -1 when none plays, -2 when it is not alone."""
    single = -1
    if base_unmasked and layer_weight[b, 0] == 1.0 and snap_weight[b] <= 0.0:
        for s in range(slot_layer.shape[0]):
            if slot_layer[s] == 0 and fs[b, s, F_EFFECTIVE] > 0.0:
                single = s if single == -1 and fs[b, s, F_EFFECTIVE] == 1.0 else -2
    return single


@njit(cache=True, forceinline=True)
def _copy_flat(src, dst):
    """dst[:] = src for 1-D contiguous arrays of one length: a plain loop that LLVM turns into vector
    moves (numba's slice assignment walks the indices one element at a time, several times slower)."""
    for i in range(np.uint64(dst.shape[0])):
        dst[i] = src[i]


@njit(cache=True)
def _pose_single(b, s, tid, job, pose, morph, keyed):
    """Instance b's pose when slot s plays alone (see :func:`_single_slot_of`) into ``pose[b]`` and
    ``morph[b]``: the clip's base pose (rest + its constant tracks) with its varying tracks sampled
    straight in, the same result as blending without the blending. ``keyed``: slerp with the clip
    set's per-key angles (see :func:`_sample_clip_direct`); ``tid``: this thread's scratch row."""
    slot_clip, clip_table, fs = field(job, "slot_clip"), field(job, "clip_table"), field(job, "fs")
    c = slot_clip[s]
    out = pose[b]
    out_m = morph[b]
    # the rows the clip does not sample in full (single_lanes.base_rows); the others are all written below
    starts = field(job, "base_rows_start")
    copy_rows(field(job, "base_pose")[c], out, field(job, "base_rows"), starts[c], starts[c + 1])
    _copy_flat(field(job, "base_morph")[c], out_m)
    locs = field(job, "locs")[tid]
    _locate_timelines(c, fs[b, s, F_SAMPLE], clip_table, field(job, "timeline_keys"), field(job, "times"),
                      field(job, "cursors")[b], locs)
    _sample_clip_direct(c, job, locs, out.reshape(-1), out_m, keyed)


@njit(cache=True)
def _evaluate_instance(b, tid, job, layer_weight, pose, morph):
    """Blend every active action of instance ``b`` into ``pose[b]`` (N, 10) and ``morph[b]`` (M,)
    with the layer weights ``layer_weight`` (B, layers); every other array from ``job`` (a
    :class:`~skeletal.playback.jobs.PlaybackJob`; ``tid``: the thread's row of its scratch ``acc``,
    ``accm``, ``tmp``, ``locs``: no allocation here). See :func:`evaluate`."""
    tracks, clip_table, segments = field(job, "tracks"), field(job, "clip_table"), field(job, "segments")
    timeline_keys, times, values = field(job, "timeline_keys"), field(job, "times"), field(job, "values")
    slot_clip, slot_layer, fs, cursors = field(job, "slot_clip"), field(job, "slot_layer"), field(job, "fs"), field(job, "cursors")
    layer_mask, layer_additive = field(job, "layer_mask"), field(job, "layer_additive")
    snap_weight, snap_pose, snap_morph = field(job, "snap_weight"), field(job, "snap_pose"), field(job, "snap_morph")
    rest, rest_morph, morph_start = field(job, "rest"), field(job, "rest_morph"), field(job, "morph_start")
    acc, accm, tmp, locs = field(job, "acc")[tid], field(job, "accm")[tid], field(job, "tmp")[tid], field(job, "locs")[tid]
    n_nodes = rest.shape[0]
    n_morph = rest_morph.shape[0]
    n_slots = slot_clip.shape[0]
    n_layers = layer_weight.shape[1]
    out = pose[b]
    out_m = morph[b]
    # The common case: the base layer plays one full-weight action and nothing is masked or frozen.
    # Then the clip's base pose (rest + its constant tracks) is copied and its varying tracks are
    # sampled straight into the pose: the same result as blending, without the blending.
    single = _single_slot_of(b, field(job, "base_unmasked"), layer_weight, snap_weight, slot_layer, fs)
    if single >= 0:
        _pose_single(b, single, tid, job, pose, morph, False)
    else:
        out[:, :] = rest
        out_m[:] = rest_morph
    for layer in range(n_layers):
        lw = layer_weight[b, layer]
        if lw <= 0.0 or (layer == 0 and single >= 0):
            continue
        additive = layer_additive[layer]
        if not additive:
            acc[:, :] = 0.0
            accm[:, :] = 0.0
            if layer == 0 and snap_weight[b] > 0.0:
                w = snap_weight[b]
                for n in range(n_nodes):
                    for p in range(3):
                        o = 0 if p == 0 else (3 if p == 1 else 7)
                        for i in range(4 if p == 1 else 3):
                            tmp[i] = snap_pose[b, n, o + i]
                        _accumulate(acc, n, p, w, tmp)
                for i in range(n_morph):
                    accm[i, 0] += w * snap_morph[b, i]
                    accm[i, 1] += w
        for s in range(n_slots):
            if slot_layer[s] != layer:
                continue
            w = fs[b, s, F_EFFECTIVE]
            if w <= 0.0:
                continue
            c = slot_clip[s]
            _locate_timelines(c, fs[b, s, F_SAMPLE], clip_table, timeline_keys, times, cursors[b], locs)
            first_timeline = clip_table[c, CL_TIMELINE_START]
            for g in range(clip_table[c, CL_SEGMENT_START], clip_table[c, CL_SEGMENT_END]):
                kind = segments[g, SEG_KIND]
                interval = _segment_interval(g, segments, first_timeline, locs, timeline_keys)
                for k in range(segments[g, SEG_FIRST], segments[g, SEG_END]):
                    n = tracks[k, TK_NODE]
                    p = tracks[k, TK_PATH]
                    m = layer_mask[layer, n]
                    if m <= 0.0:
                        continue
                    c_width = min(tracks[k, TK_WIDTH], 64)
                    _sample_track_into(kind, k, interval, tracks, values, tmp, 0)
                    if additive:
                        wa = w * lw * m
                        if p == TRANSLATION:
                            for i in range(3):
                                out[n, i] += wa * tmp[i]
                        elif p == ROTATION:
                            _add_rotation(out[n], tmp, wa)
                        elif p == SCALE:
                            for i in range(3):
                                out[n, 7 + i] *= 1.0 + wa * (tmp[i] - 1.0)
                        else:
                            o = morph_start[n]
                            for i in range(c_width):
                                out_m[o + i] += wa * tmp[i]
                    elif p == WEIGHTS:
                        o = morph_start[n]
                        for i in range(c_width):
                            accm[o + i, 0] += w * tmp[i]
                            accm[o + i, 1] += w
                    else:
                        _accumulate(acc, n, p, w, tmp)
        if additive:
            continue
        for n in range(n_nodes):
            m = layer_mask[layer, n] * lw
            if m > 0.0:
                _mix_layer_into(out[n], acc[n], min(m, 1.0))
        for i in range(n_morph):
            w = accm[i, 1]
            if w > 0.0:
                rest_w = 1.0 - w if w < 1.0 else 0.0
                value = (accm[i, 0] + rest_w * out_m[i]) / (w + rest_w)
                out_m[i] += (value - out_m[i]) * min(lw, 1.0)


@njit(cache=True, parallel=True)
def evaluate(job, layer_weight, pose, morph):
    """Blend every active action of every instance into ``pose`` (B, N, 10) and ``morph`` (B, M),
    in parallel over instances, with the layer weights ``layer_weight`` (B, layers) (the job's own,
    or e.g. only the base layer's for a snapshot); everything else from ``job`` (a
    :class:`~skeletal.playback.jobs.PlaybackJob`: its per-thread scratch, no allocation here).
    ``base_unmasked`` (the base layer's mask is all ones) allows the single-action fast path.
    """
    for b in prange(pose.shape[0]):
        _evaluate_instance(b, numba.get_thread_id(), borrow(job), layer_weight, pose, morph)


# ---------------------------------------------------------------------------------------------
# a whole update in one call: advance + blend + world matrices (+ IK) + palettes

# the stages of an update (bit flags of the ``stages`` argument)
ADVANCE = 1  # advance every action's clock and fade by dt
BLEND = 2  # sample and blend the actions into the job's pose and morph weights
WORLD = 4  # world rows of world_nodes, the IK stages (when an IKJob is given), palettes
ALL = ADVANCE | BLEND | WORLD
# (with BLEND, instances with an inertialized transition running get its offsets added to the blended
# pose, dt seconds on: playback.inertia_kernels.inertialize_instance)


@njit(cache=True, forceinline=True)
def _rest_if_idle(b, job, pose, morph):
    """Instance b's pose and morph weights set to the rest values when no action has weight and no
    snapshot fades (what blending gives then); False, nothing written, otherwise."""
    fs = field(job, "fs")
    if field(job, "snap_weight")[b] > 0.0:
        return False
    for s in range(fs.shape[1]):
        if fs[b, s, F_EFFECTIVE] > 0.0:
            return False
    _copy_flat(field(job, "rest").reshape(-1), pose[b].reshape(-1))
    _copy_flat(field(job, "rest_morph"), morph[b])
    return True


# The inertialization stage, decided by the job's type: a job whose ``inert_state`` is (B, 4) runs it
# (playback.inertia_kernels), one that never had a transition holds a (0,) array and compiles none of
# it (a plain player's cold start compiles no inertialization kernel).


def inertia_stage(b, tid, job, dt, pose):
    """(Compiled code only.) Instance b's inertialized transition, when one runs, added to its just-blended
    pose ``pose[b]``, ``dt`` seconds on (:func:`~skeletal.playback.inertia_kernels.inertialize_instance`);
    nothing, compiled away, on a job without inertialization rows."""
    raise NotImplementedError("inertia_stage runs inside compiled kernels only")


@overload(inertia_stage)
def _inertia_stage(b, tid, job, dt, pose):
    if job.field_dict["inert_state"].ndim != 2:
        def skip(b, tid, job, dt, pose):
            return None
        return skip

    def stage(b, tid, job, dt, pose):
        if field(job, "inert_state")[b, ST_PHASE] != IDLE:
            inertialize_instance(b, tid, job, dt, pose)
    return stage


def in_transition(state, b):
    """(Compiled code only.) Whether instance b has an inertialized transition running, ``state`` the job's
    ``inert_state``: False, at compile time, for a (0,) one."""
    raise NotImplementedError("in_transition runs inside compiled kernels only")


@overload(in_transition)
def _in_transition(state, b):
    if state.ndim != 2:
        return lambda state, b: False
    return lambda state, b: state[b, ST_PHASE] != IDLE


def posed_alone(state, b, alone):
    """(Compiled code only.) Record in ``state[b, ST_REPOSED]`` whether instance b of a crowd's wide
    group was posed on its own (``alone``, returned); nothing for a (0,) ``state``."""
    raise NotImplementedError("posed_alone runs inside compiled kernels only")


@overload(posed_alone)
def _posed_alone(state, b, alone):
    if state.ndim != 2:
        return lambda state, b, alone: False

    def record(state, b, alone):
        state[b, ST_REPOSED] = 1 if alone else 0
        return alone
    return record


#: compile-time switch of :func:`update`'s blending (a module constant numba folds; False only in
#: :func:`single_action_update`'s copy of the body)
_BLENDS = True
#: added to :func:`single_action_update`'s return value for every instance it could not pose
NEEDS_BLEND = 1 << 40


@njit(cache=True, forceinline=True)
def clock_and_blend(b, tid, job, dt, stages):
    """Instance ``b``'s part of :func:`update` before its world rows, for ``stages`` (bits ADVANCE |
    BLEND) of a :class:`~skeletal.playback.jobs.PlaybackJob`: its clocks advanced by ``dt``, its pose
    blended, its inertialized transition's offsets added. ``tid``: the calling thread's index into the
    job's per-thread scratch. Returns 1 when the advance reported an event, else 0; plus
    :data:`NEEDS_BLEND` when the instance was left unposed (:func:`single_action_update`'s copy, whose
    ``_BLENDS`` is False). Inlined into :func:`update` and
    :func:`~skeletal.playback.footplacement.foot_kernel` (a block's update before its foot placement)."""
    clip_duration, marker_time, ist = field(job, "clip_duration"), field(job, "marker_time"), field(job, "ist")
    slot_clip, slot_layer, fs, clip_table = field(job, "slot_clip"), field(job, "slot_layer"), field(job, "fs"), field(job, "clip_table")
    layer_weight, snap_weight, base_unmasked = field(job, "layer_weight"), field(job, "snap_weight"), field(job, "base_unmasked")
    pose, morph = field(job, "pose"), field(job, "morph")
    events = 0
    if stages & ADVANCE:
        if _advance_instance(b, dt, fs, ist, slot_clip, clip_table, clip_duration, marker_time):
            events = 1
    single = -1
    if stages & BLEND:
        single = _single_slot_of(b, base_unmasked, layer_weight, snap_weight, slot_layer, fs)
        for layer in range(1, layer_weight.shape[1]):
            if layer_weight[b, layer] > 0.0:
                single = -1  # another layer blends over it: _evaluate_instance does both
    if single >= 0:
        _pose_single(b, single, tid, job, pose, morph, True)
    elif stages & BLEND:
        if _BLENDS:
            _evaluate_instance(b, tid, job, layer_weight, pose, morph)
        elif not _rest_if_idle(b, job, pose, morph):
            return events + NEEDS_BLEND
    if stages & BLEND:
        inertia_stage(b, tid, job, dt, pose)
    return events


#: the per-instance body :func:`update` calls (:func:`single_action_update`'s copy: one without blending)
_CLOCK_AND_BLEND = clock_and_blend


@njit(cache=True, parallel=True)
def update(job, ik, dt, stages):
    """Run ``stages`` (bits ADVANCE | BLEND | WORLD) of a :class:`~skeletal.playback.jobs.PlaybackJob`
    for every instance in parallel, each instance's work kept in cache from its clock to its palette.
    One or a few characters run its serial twin (:func:`skeletal._compile.serial_variant`: the same
    body with ``prange`` as ``range``, no thread pool).
    ``ik``: an :class:`~skeletal.playback.jobs.IKJob` run between world matrices and palettes, or
    None (the IK branch is then pruned at compile time). Returns how many instances reported an
    event (loop, finished, marker) in the advance (:func:`single_action_update`: plus
    :data:`NEEDS_BLEND` per instance left unposed). Between BLEND and WORLD, an instance with an
    inertialized transition running gets its decaying offsets added to the pose (the job's
    ``inert_*`` fields; :func:`~skeletal.playback.inertia_kernels.inertialize_instance`)."""
    parents, world_nodes, worlds, scratch_world = field(job, "parents"), field(job, "world_nodes"), field(job, "worlds"), field(job, "scratch_world")
    palette_joints, inverse_bind, palettes = field(job, "palette_joints"), field(job, "inverse_bind"), field(job, "palettes")
    pose = field(job, "pose")
    if ik is not None:
        stage_i, stage_f, joints, jp = ik.stage_i, ik.stage_f, ik.joints, ik.jp
        inputs, ik_update, ik_scratch, ik_pos = ik.inputs, ik.update, ik.scratch, ik.pos
    keep_world = worlds.shape[0] > 0
    events = 0
    for b in prange(pose.shape[0]):
        tid = numba.get_thread_id()
        r = _CLOCK_AND_BLEND(b, tid, borrow(job), dt, stages)  # (no atomic reference count per instance)
        events += r
        if r >= NEEDS_BLEND:
            continue  # the single-action variant has no blending compiled: the caller runs the full kernel
        if stages & WORLD:
            w = worlds[b] if keep_world else scratch_world[tid]
            pb = pose[b]
            world_subset_staged(parents, world_nodes, pb, w)
            if ik is not None:
                solve_stages_at(pb, w, parents, stage_i, stage_f, joints, jp, inputs, b, ik_update, ik_scratch,
                                ik_pos, tid)
            palettes_one(w, palette_joints, inverse_bind, palettes[b])
    return events


def single_action_update():
    """The serial :func:`update` compiled without blending (``_evaluate_instance``: layers, fades,
    masks, additive clips, snapshots): a character that plays one clip at a time never needs it, and
    it is a fifth of a cold first frame's compile. An instance that needs
    blending is advanced but left unposed (no world rows, no palettes) and adds :data:`NEEDS_BLEND`
    to the return value; the caller then runs the full kernel's BLEND | WORLD stages on the same job
    (:meth:`skeletal.Mixer._blend_from_now_on`), which also compiles it, once.

    >>> call = entry(single_action_update(), job, None, 0.0, ALL)    # doctest: +SKIP
    """
    from .._compile import serial_variant

    unblended = serial_variant(clock_and_blend, "_single_action", {"_BLENDS": False})
    return serial_variant(update, "_single_action", {"_BLENDS": False, "_CLOCK_AND_BLEND": unblended})
