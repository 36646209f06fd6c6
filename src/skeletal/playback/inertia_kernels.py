# Over 600 lines: the stage's three decays (spring, quintic, dead blending), the job columns they read and the
# entry the update kernel inlines share their series and clock constants; the eight-joint vector pass is in inertia_lanes.
"""The compiled side of inertialization (:mod:`skeletal.playback.locomotion.inertialize`).

Poses are batch-first local poses (B, J, 10), rows ``t(3) q(4, xyzw) s(3)``. A pose *offset* or
*velocity* has 9 channels per joint (B, J, 9): translation (3, metres or m/s), rotation as a scaled
axis (3: angle times unit axis, radians or rad/s, in the joint's parent frame) and scale (3).

Pose arithmetic (parent-frame, left-multiplied rotations):

* ``a - b``: ``t_a - t_b``, ``log(q_a * conj(q_b))`` (shortest way), ``s_a - s_b``;
* ``offset + b``: ``t_b + o_t``, ``exp(o_r) * q_b``, ``s_b + o_s``;
* velocity of two poses ``dt`` apart: ``(p1 - p0) / dt``.

With ``q(t) = exp(r(t)) * q_new(t)`` the parent-frame angular velocity is
``J_l(r) r' + R(r) w_new`` (``J_l``: SO(3)'s left Jacobian), so a switch whose offset starts at
``r0 = log(q_old q_new^-1)`` with ``r0' = J_l(r0)^-1 (w_old - R(r0) w_new)`` keeps the angular
velocity exactly continuous (:func:`start_offsets`).

Decays of one channel, ``x0``, ``v0`` at the switch, time ``t`` since:

* ``SPRING``: critically damped, ``x = e^(-y t) (x0 + (v0 + y x0) t)``, ``y = 2 ln 2 / halflife``
  (D. Holden, "Spring-It-On"), halflife a fifth of the blend time; the update kernel's stage
  evaluates it in closed form from the switch's ``x0`` and ``v0`` (:func:`spring_weights`),
  :func:`decay_into` steps it exactly each frame: either way the split of time into frames does not
  matter; it runs for twice the blend time (then under 2e-5 of its start) and stops.
* ``QUINTIC``: D. Bollo's polynomial (GDC 2018), the quintic with ``x(0) = x0``, ``x'(0) = v0``,
  ``x(t1) = x'(t1) = x''(t1) = 0`` and ``x''(0) = (-8 v0 t1 - 20 x0) / t1^2``; zero from ``t1`` on.
  Per channel and without Bollo's overshoot clamps (those change ``v0`` and break the continuity of
  velocity this stage exists for).
* ``DEAD``: dead blending (D. Holden, 2023): the old pose is extrapolated with its velocity, which
  decays with ``extrapolation_halflife``, and blended to the new pose by ``smoothstep(t / t1)``.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import njit, prange

from ..quat import qmul, qnormalize, qrotate
from .inertia_lanes import _C, _S, SHORT_LIMIT, _offset_blocks
from .jobs import field

SPRING = 1
QUINTIC = 2
DEAD = 3
BLEND_CODES = {"inertialize": QUINTIC, "inertialize_spring": SPRING, "dead_blend": DEAD}

IDLE = 0  # phase: nothing to add; the stage only keeps the pose for velocities
PENDING = 1  # switched; the new motion's velocity is found at the next apply (finite difference)
ACTIVE = 2

# per-instance clock columns
C_ELAPSED = 0  # seconds since the switch
C_DURATION = 1  # the blend time (QUINTIC, DEAD); SPRING: twice it (10 halflives of blend time / 5)
C_LAST_DT = 2  # the dt of the last apply (0: no previous pose kept yet)
C_HALFLIFE = 3  # DEAD: the extrapolated velocity's halflife
C_KEPT = 4  # how many shown poses the history holds (0, 1, 2)
NCLOCK = 5

NCH = 9  # offset / velocity channels per joint
LN2 = math.log(2.0)  # (a constant in compiled code: no log call per frame)


@njit(cache=True)
def quat_log(x, y, z, w):
    """Scaled axis (angle * unit axis) of a unit quaternion, the shorter way round (angle <= pi)."""
    if w < 0.0:
        x, y, z, w = -x, -y, -z, -w
    n = math.sqrt(x * x + y * y + z * z)
    if n < 1e-12:
        return 2.0 * x, 2.0 * y, 2.0 * z
    k = 2.0 * math.atan2(n, w) / n
    return x * k, y * k, z * k


@njit(cache=True)
def quat_exp(rx, ry, rz):
    """The unit quaternion of a scaled axis (inverse of :func:`quat_log`)."""
    angle = math.sqrt(rx * rx + ry * ry + rz * rz)
    if angle < 1e-12:
        return qnormalize(0.5 * rx, 0.5 * ry, 0.5 * rz, 1.0)
    k = math.sin(0.5 * angle) / angle
    return rx * k, ry * k, rz * k, math.cos(0.5 * angle)


# Taylor coefficients of cos(h) and sin(h) / h in h^2, 13 terms: within 3e-14 of them for h <= pi (a
# rotation of 2 pi); further out :func:`quat_exp` takes over (SERIES_LIMIT: the largest angle squared)
SERIES_LIMIT = 4.0 * math.pi * math.pi
_U = tuple(np.uint64(k) for k in range(10))  # unsigned 0..9: a pose row's channels, the offsets' rows


@njit(cache=True, forceinline=True)
def _series(h2, h4, h8, k):
    """Estrin's scheme of one of the two 13-term series (k 0: cosine, 1: sine / h) at h^2 (short
    dependency chains: the vector loop's latency)."""
    a = _C if k == 0 else _S
    low = (a[0] + a[1] * h2) + (a[2] + a[3] * h2) * h4
    mid = (a[4] + a[5] * h2) + (a[6] + a[7] * h2) * h4
    high = (a[8] + a[9] * h2) + (a[10] + a[11] * h2) * h4
    return low + mid * h8 + (high + a[12] * h8) * (h8 * h8)


@njit(cache=True, forceinline=True)
def _short_series(h2, h4, k):
    """The first 7 terms of :func:`_series` (k 0: cosine, 1: sine / h) at ``h2 = h^2 <=``
    :data:`SHORT_LIMIT`."""
    a = _C if k == 0 else _S
    return (a[0] + a[1] * h2) + (a[2] + a[3] * h2) * h4 + ((a[4] + a[5] * h2) + a[6] * h4) * (h4 * h4)


@njit(cache=True, forceinline=True)
def quat_exp_series(rx, ry, rz):
    """:func:`quat_exp` by the series of the half angle's cosine and sine: no libm calls and no branch,
    so that a loop over joints vectorises; within 3e-14 of it for angles up to 2 pi (the caller
    redoes larger ones with :func:`quat_exp`: see :data:`SERIES_LIMIT`)."""
    h2 = 0.25 * (rx * rx + ry * ry + rz * rz)
    h4 = h2 * h2
    h8 = h4 * h4
    k = 0.5 * _series(h2, h4, h8, 1)
    return rx * k, ry * k, rz * k, _series(h2, h4, h8, 0)


@njit(cache=True)
def pose_difference(a, b, out):
    """``out (J, 9) = a - b`` for poses (J, 10) (see the module docstring)."""
    for j in range(a.shape[0]):
        for c in range(3):
            out[j, c] = a[j, c] - b[j, c]
            out[j, 6 + c] = a[j, 7 + c] - b[j, 7 + c]
        q = qmul(a[j, 3], a[j, 4], a[j, 5], a[j, 6], -b[j, 3], -b[j, 4], -b[j, 5], b[j, 6])
        out[j, 3], out[j, 4], out[j, 5] = quat_log(q[0], q[1], q[2], q[3])


@njit(cache=True)
def add_offset(offset, pose, j, ox, oy, oz, rx, ry, rz, sx, sy, sz):
    """Row ``j`` of ``pose`` (J, 10) plus an offset given by its 9 channels, in place."""
    pose[j, 0] += ox
    pose[j, 1] += oy
    pose[j, 2] += oz
    e = quat_exp(rx, ry, rz)
    q = qnormalize(*qmul(e[0], e[1], e[2], e[3], pose[j, 3], pose[j, 4], pose[j, 5], pose[j, 6]))
    pose[j, 3], pose[j, 4], pose[j, 5], pose[j, 6] = q
    pose[j, 7] += sx
    pose[j, 8] += sy
    pose[j, 9] += sz


@njit(cache=True)
def left_jacobian_inverse(rx, ry, rz, wx, wy, wz):
    """``J_l(r)^-1 w``: the rate of the scaled axis r whose rotation turns at angular velocity w."""
    angle = math.sqrt(rx * rx + ry * ry + rz * rz)
    # r x w and r x (r x w)
    cx, cy, cz = ry * wz - rz * wy, rz * wx - rx * wz, rx * wy - ry * wx
    dx, dy, dz = ry * cz - rz * cy, rz * cx - rx * cz, rx * cy - ry * cx
    if angle < 1e-4:
        k = 1.0 / 12.0
    else:
        k = 1.0 / (angle * angle) - (1.0 + math.cos(angle)) / (2.0 * angle * math.sin(angle))
    return wx - 0.5 * cx + k * dx, wy - 0.5 * cy + k * dy, wz - 0.5 * cz + k * dz


@njit(cache=True)
def start_offsets(source, source_velocity, target, target_velocity, offset, velocity):
    """The offsets (J, 9) and their rates at a switch from ``source`` (J, 10) moving at
    ``source_velocity`` (J, 9) to ``target`` moving at ``target_velocity``: the shown pose and its
    velocity are unchanged by the switch."""
    pose_difference(source, target, offset)
    for j in range(source.shape[0]):
        for c in (0, 1, 2, 6, 7, 8):
            velocity[j, c] = source_velocity[j, c] - target_velocity[j, c]
        e = quat_exp(offset[j, 3], offset[j, 4], offset[j, 5])
        wn = qrotate(e[0], e[1], e[2], e[3], target_velocity[j, 3], target_velocity[j, 4], target_velocity[j, 5])
        velocity[j, 3], velocity[j, 4], velocity[j, 5] = left_jacobian_inverse(
            offset[j, 3], offset[j, 4], offset[j, 5],
            source_velocity[j, 3] - wn[0], source_velocity[j, 4] - wn[1], source_velocity[j, 5] - wn[2])


@njit(cache=True)
def quintic_weights(t, t1):
    """``(P, Q)`` with Bollo's quintic ``x(t) = x0 P + v0 Q``: for ``u = t / t1``,
    ``P = 1 - 10u^2 + 20u^3 - 15u^4 + 4u^5`` and ``Q = t1 u (1 - u)^4`` (his
    ``a0 = (-8 v0 t1 - 20 x0) / t1^2`` and the three zero conditions at ``t1``, collected by x0 and v0)."""
    u = t / t1
    w = 1.0 - u
    return 1.0 + u * u * (-10.0 + u * (20.0 + u * (-15.0 + 4.0 * u))), t1 * u * w * w * w * w


@njit(cache=True)
def _spring_step(x, v, y, dt):
    """Exact step of the critically damped spring toward 0 (damping y = 2 ln 2 / halflife)."""
    j1 = v + x * y
    e = math.exp(-y * dt)
    return e * (x + j1 * dt), e * (v - j1 * y * dt)


@njit(cache=True)
def poses_velocity_into(p0, p1, dt, out):
    """``out (n, J, 9) = (p1 - p0) / dt`` for batches of poses (n, J, 10)."""
    for i in range(p0.shape[0]):
        pose_velocity_into(p0[i], p1[i], dt, out[i])


@njit(cache=True)
def pose_velocity_into(p0, p1, dt, out):
    """``out (J, 9) = (p1 - p0) / dt`` for poses (J, 10)."""
    pose_difference(p1, p0, out)
    inv = 1.0 / dt
    for j in range(out.shape[0]):
        for c in range(NCH):
            out[j, c] *= inv


@njit(cache=True)
def decay_into(pose, mode, t, dt, duration, halflife, offset, velocity, source):
    """Add one instance's decaying offsets at ``t`` seconds into a transition of length ``duration`` to its
    new motion's pose (J, 10), in place (``t < duration``). ``offset`` / ``velocity`` (J, 9): QUINTIC,
    the offsets and their rates at the switch; SPRING, the offsets now (stepped by ``dt`` here, in
    place); DEAD, the source's velocity, ``source`` (J, 10) the pose shown at the switch and
    ``halflife`` its velocity's halflife (see the module docstring)."""
    J = pose.shape[0]
    if mode == SPRING:
        y = 2.0 * math.log(2.0) * 10.0 / duration  # halflife = blend time / 5 = duration / 10
        for j in range(J):
            for c in range(NCH):
                offset[j, c], velocity[j, c] = _spring_step(offset[j, c], velocity[j, c], y, dt)
            o = offset[j]
            add_offset(offset, pose, j, o[0], o[1], o[2], o[3], o[4], o[5], o[6], o[7], o[8])
    elif mode == QUINTIC:  # offset and velocity hold x0 and v0 from the switch
        wp, wq = quintic_weights(t, duration)
        for j in range(J):
            o, v = offset[j], velocity[j]
            add_offset(offset, pose, j, o[0] * wp + v[0] * wq, o[1] * wp + v[1] * wq, o[2] * wp + v[2] * wq,
                       o[3] * wp + v[3] * wq, o[4] * wp + v[4] * wq, o[5] * wp + v[5] * wq,
                       o[6] * wp + v[6] * wq, o[7] * wp + v[7] * wq, o[8] * wp + v[8] * wq)
    else:  # DEAD
        lam = math.log(2.0) / halflife
        f = (1.0 - math.exp(-lam * t)) / lam  # distance the decaying velocity carries in time t
        u = t / duration
        alpha = u * u * (3.0 - 2.0 * u)
        for j in range(J):
            p = pose[j]
            for c in range(3):
                ext_t = source[j, c] + velocity[j, c] * f
                p[c] = ext_t + (p[c] - ext_t) * alpha
                ext_s = source[j, 7 + c] + velocity[j, 6 + c] * f
                p[7 + c] = ext_s + (p[7 + c] - ext_s) * alpha
            e = quat_exp(velocity[j, 3] * f, velocity[j, 4] * f, velocity[j, 5] * f)
            qe = qnormalize(*qmul(e[0], e[1], e[2], e[3], source[j, 3], source[j, 4], source[j, 5], source[j, 6]))
            # slerp(ext, new, alpha) = exp(alpha * log(new * ext^-1)) * ext
            d = qmul(p[3], p[4], p[5], p[6], -qe[0], -qe[1], -qe[2], qe[3])
            r = quat_log(d[0], d[1], d[2], d[3])
            s = quat_exp(r[0] * alpha, r[1] * alpha, r[2] * alpha)
            q = qnormalize(*qmul(s[0], s[1], s[2], s[3], qe[0], qe[1], qe[2], qe[3]))
            p[3], p[4], p[5], p[6] = q


@njit(cache=True)
def _apply_one(b, pose, dt, mode, phase, clock, offset, velocity, source, anchor, known, target_velocity, history, newest, scratch):
    """One instance of :func:`apply`; returns 1 when its pose was changed."""
    changed = 0
    if phase[b] == PENDING:
        if mode[b] != DEAD:
            # the new motion's velocity (given, or from its pose at the switch and now), then the offsets
            tv = scratch[0]
            if known[b]:
                tv[:] = target_velocity[b]
            elif dt > 0.0:
                pose_velocity_into(anchor[b], pose[b], dt, tv)
            else:  # the switch's own moment, re-posed: the source is shown; the offsets wait for a step
                pose[b] = source[b]
                return 1
            start_offsets(source[b], velocity[b], anchor[b], tv, offset[b], scratch[1])
            velocity[b] = scratch[1]
        phase[b] = ACTIVE
        clock[b, C_ELAPSED] = 0.0
    if phase[b] == ACTIVE:
        t = clock[b, C_ELAPSED] + dt
        clock[b, C_ELAPSED] = t
        duration = clock[b, C_DURATION]
        if t >= duration:
            phase[b] = IDLE  # the offsets are zero from here on (SPRING: below 2e-5 of where they began)
        else:
            decay_into(pose[b], mode[b], t, dt, duration, clock[b, C_HALFLIFE], offset[b], velocity[b], source[b])
            changed = 1
    if dt > 0.0:  # (a dt of 0 re-poses the same moment: the history stays)
        slot = 1 - newest[b]  # the shown pose goes over the older of the two kept
        history[b, slot] = pose[b]
        newest[b] = slot
        clock[b, C_LAST_DT] = dt
        clock[b, C_KEPT] = min(clock[b, C_KEPT] + 1.0, 2.0)
    return changed


@njit(cache=True, parallel=True)
def apply(pose, dt, mode, phase, clock, offset, velocity, source, anchor, known, target_velocity, history, newest, scratch):
    """Add every instance's decaying offsets to ``pose`` (B, J, 10) in place (the new motion's pose in,
    the shown pose out) and keep the result in ``history[b, newest[b]]`` (B, 2, J, 10), over the older
    of the two poses kept, for the shown velocity at the next switch. ``scratch`` (threads, 2, J, 9).
    Returns how many instances were changed. Serial twin: :func:`apply_serial`."""
    changed = 0
    for b in prange(pose.shape[0]):
        tid = numba.get_thread_id()
        changed += _apply_one(b, pose, dt, mode, phase, clock, offset, velocity, source, anchor, known, target_velocity, history, newest,
                              scratch[tid])
    return changed


@njit(cache=True)
def apply_serial(pose, dt, mode, phase, clock, offset, velocity, source, anchor, known, target_velocity, history, newest, scratch):
    """:func:`apply` on one thread (one or a few instances: no thread pool)."""
    changed = 0
    for b in range(pose.shape[0]):
        changed += _apply_one(b, pose, dt, mode, phase, clock, offset, velocity, source, anchor, known, target_velocity, history, newest,
                              scratch[0])
    return changed


@njit(cache=True)
def shown_velocity(rows, history, newest, clock, out):
    """The velocity (len(rows), J, 9) of the shown pose of instances ``rows``: the last two poses
    :func:`apply` kept, over the last dt; 0 where fewer than two were kept."""
    for i in range(rows.shape[0]):
        b = rows[i]
        dt = clock[b, C_LAST_DT]
        if dt > 0.0 and clock[b, C_KEPT] >= 2.0:
            pose_velocity_into(history[b, 1 - newest[b]], history[b, newest[b]], dt, out[i])
        else:
            out[i] = 0.0




# ---------------------------------------------------------------------------------------------
# the update kernel's stage (playback.kernels.update: between BLEND and WORLD)

# columns of a PlaybackJob's ``inert_state`` (B, 4) int64
ST_MODE = 0  # SPRING, QUINTIC or DEAD
ST_PHASE = 1  # IDLE, PENDING (switched; the offsets are made at the next step), ACTIVE
ST_REPOSED = 2  # a crowd's wide path posed this instance on its own in the last update (see wide.update_wide)
ST_COUNT = 3  # QUINTIC, SPRING: how many joints have offsets (inert_joints[b, :count], inert_x / inert_v columns)
NSTATE = 4
# columns of ``inert_clock`` (B, 5) float64
K_ELAPSED = 0  # seconds since the switch
K_DURATION = 1  # the blend time (QUINTIC, DEAD); SPRING: twice it
K_HALFLIFE = 2  # DEAD: the extrapolated velocity's halflife
K_X_BOUND = 3  # QUINTIC, SPRING: the largest rotation offset at the switch (radians; see _rotation_bounds)
K_V_BOUND = 4  # ... and the largest rate (rad/s)
NKCLOCK = 5


@njit(cache=True, forceinline=True)
def inertialize_instance(b, tid, job, dt, pose):
    """The inertialization stage of the update kernel for instance ``b`` with a transition running
    (``inert_state[b, ST_PHASE] != IDLE``), right after its pose (B, N, 10) was sampled and blended:
    the decaying offsets ``dt`` seconds further on added to ``pose[b]`` in place. The arrays, from the
    :class:`~skeletal.playback.jobs.PlaybackJob` ``job``: ``inert_state`` (B, 4) int64 (mode, phase,
    reposed, joint count), ``inert_clock`` (B, 5) (elapsed, duration, halflife, the largest rotation
    offset and rate at the switch), ``inert_source`` (B, N, 10) the pose shown at the switch and
    ``inert_velocity`` (B, N, 9) its velocity, ``inert_anchor`` (B, N, 10) the new motion's pose
    there, ``inert_offset`` (B, N, 9) (DEAD: unused), ``inert_x`` and ``inert_v`` (B, 9 * L) the
    offsets and their rates at the switch of the ``inert_joints`` (B, L) that have any, channel-major
    in lanes of ``L = lanes(N)`` (see :func:`_gather_moving`), ``inert_scratch`` (T, 2, 9 * L)
    (``tid``: this thread's row). A switch leaves the instance PENDING with the source pose and
    velocity set; a ``dt`` of 0 then (the switch's own evaluation) keeps the just-sampled pose as the
    anchor and shows the source; the first step after it makes the offsets (the new motion's velocity:
    the anchor to the pose now) and goes ACTIVE. Past the blend time the phase goes IDLE and the
    pose is the new motion's own."""
    state, clock = field(job, "inert_state"), field(job, "inert_clock")
    velocity, source, anchor = field(job, "inert_velocity"), field(job, "inert_source"), field(job, "inert_anchor")
    p = pose[b]
    mode = state[b, ST_MODE]
    if state[b, ST_PHASE] == PENDING:
        if dt <= 0.0:  # the switch's moment: the target as sampled now is the anchor; the source is shown
            anchor[b] = p
            p[:, :] = source[b]
            return
        if mode != DEAD:
            scratch, offset = field(job, "inert_scratch")[tid], field(job, "inert_offset")
            J = p.shape[0]
            target_velocity = scratch[0][:NCH * J].reshape(-1, NCH)  # (J, 9) views of the scratch rows
            rate = scratch[1][:NCH * J].reshape(-1, NCH)
            pose_velocity_into(anchor[b], p, dt, target_velocity)
            start_offsets(source[b], velocity[b], anchor[b], target_velocity, offset[b], rate)
            x, v = field(job, "inert_x")[b], field(job, "inert_v")[b]
            n = _gather_moving(offset[b], rate, field(job, "inert_joints")[b], x, v)
            state[b, ST_COUNT] = n
            clock[b, K_X_BOUND], clock[b, K_V_BOUND] = _rotation_bounds(x, v, n)
        state[b, ST_PHASE] = ACTIVE
        clock[b, K_ELAPSED] = 0.0
    t = clock[b, K_ELAPSED] + dt
    clock[b, K_ELAPSED] = t
    duration = clock[b, K_DURATION]
    if t >= duration:
        state[b, ST_PHASE] = IDLE  # the offsets are zero from here on (SPRING: below 2e-5 of where they began)
        return
    if mode == DEAD:
        _dead_blend_into(p, t, duration, clock[b, K_HALFLIFE], velocity[b], source[b],
                         field(job, "inert_scratch")[tid].reshape(-1))
        return
    if state[b, ST_COUNT] == 0:
        return
    scratch = field(job, "inert_scratch")[tid]
    _decay_moving(p, mode, t, duration, state[b, ST_COUNT], field(job, "inert_joints")[b], field(job, "inert_x")[b],
                  field(job, "inert_v")[b], scratch[1], clock[b, K_X_BOUND], clock[b, K_V_BOUND])


def lanes(nodes: int) -> int:
    """The lanes of a rig of ``nodes`` nodes in the stage's channel-major rows: ``nodes`` rounded up to
    eight (the stage adds offsets eight joints a vector; see :func:`_gather_moving`).

    >>> lanes(65), lanes(8)
    (72, 8)
    """
    return -(-int(nodes) // 8) * 8


@njit(cache=True)
def _gather_moving(offset, rate, joints, x, v):
    """The joints whose offset (J, 9) or rate (J, 9) is not zero into ``joints`` (L,), their channels
    into ``x`` and ``v`` (9 * L,) channel-major (channel c of the i-th at ``c * L + i``: the decay's
    loops run down the channels); returns how many (n). The lanes from n up to a multiple of eight
    hold zeros and, as joints, rows that the vector loop's last eight may rewrite unchanged (the
    offset of zero is exact): the first eight moving joints' (processed before), or with eight or
    fewer moving, rows of joints not moving; with fewer than eight nodes there is no such padding (the
    stage then adds joint by joint: :func:`_padded`)."""
    J = offset.shape[0]
    L = joints.shape[0]
    n = 0
    for j in range(J):
        moving = False
        for c in range(NCH):
            if offset[j, c] != 0.0 or rate[j, c] != 0.0:
                moving = True
        if moving:
            joints[n] = j
            for c in range(NCH):
                x[c * L + n] = offset[j, c]
                v[c * L + n] = rate[j, c]
            n += 1
    for c in range(NCH):  # the rest of each channel: zeros
        for i in range(n, L):
            x[c * L + i] = 0.0
            v[c * L + i] = 0.0
    padded = -(-n // 8) * 8
    if n > 8:
        for i in range(n, padded):
            joints[i] = joints[i - n + n % 8]  # the first block's lanes n % 8 .. 7
    elif J >= 8:
        i, j, k = n, 0, 0  # the first rows not moving (joints[:n] ascending)
        while i < padded:
            if k < n and joints[k] == j:
                k += 1
            else:
                joints[i] = j
                i += 1
            j += 1
    return n


@njit(cache=True, forceinline=True)
def _padded(n, nodes):
    """How many lanes the vector loop of :func:`_decay_moving` runs for ``n`` moving joints of a rig of
    ``nodes`` nodes: ``n`` rounded up to eight, or 0 (fewer than eight nodes: no padding rows)."""
    return (n + 7) // 8 * 8 if nodes >= 8 else 0


@njit(cache=True, forceinline=True)
def spring_weights(t, duration):
    """``(P, Q)`` with the critically damped spring ``x(t) = x0 P + v0 Q`` toward 0 (``y = 2 ln 2 /
    halflife``, halflife ``duration / 10``): ``P = e^(-y t) (1 + y t)``, ``Q = t e^(-y t)`` (Holden's
    ``x = e^(-y t) (x0 + (v0 + y x0) t)``, collected by x0 and v0)."""
    y = 2.0 * LN2 * 10.0 / duration
    e = math.exp(-y * t)
    return e * (1.0 + y * t), e * t


@njit(cache=True)
def _rotation_bounds(x, v, n):
    """The largest rotation offset (radians) and rate (rad/s) among the ``n`` moving joints' channels
    ``x``, ``v`` (9 * L,) (see :func:`_gather_moving`): no rotation offset of the transition is larger
    than ``x_bound |P| + v_bound |Q|`` (the offsets are ``x P + v Q``)."""
    L = x.shape[0] // NCH
    xb = vb = 0.0
    for i in range(n):
        xb = max(xb, math.sqrt(x[3 * L + i] ** 2 + x[4 * L + i] ** 2 + x[5 * L + i] ** 2))
        vb = max(vb, math.sqrt(v[3 * L + i] ** 2 + v[4 * L + i] ** 2 + v[5 * L + i] ** 2))
    return xb, vb


@njit(cache=True, forceinline=True)
def _decay_moving(pose, mode, t, duration, n, joints, x, v, turn, x_bound, v_bound):
    """QUINTIC and SPRING offsets of the ``n`` moving joints (``joints`` (L,); ``x`` and ``v`` (9 * L,)
    the offsets and their rates at the switch, channel-major: see :func:`_gather_moving`) ``t`` seconds
    after the switch, added to ``pose`` (J, 10): the offsets now are ``x * P + v * Q`` with the mode's
    weights (:func:`quintic_weights`, :func:`spring_weights`: one pair for every channel). When no
    rotation can be past 2 pi now (``x_bound``, ``v_bound``: :func:`_rotation_bounds`), one pass of
    eight joints a vector does it all (:func:`_offset_rows8`: the rotations' exp by the series, rotations
    left-multiplied). Otherwise the rotations as quaternions into ``turn`` (rows of L: x, y, z, w)
    in a loop down the lanes (:func:`_short_series`; rotations past 1.2 rad redone by
    :func:`quat_exp_series`, past 2 pi by :func:`quat_exp`), then added eight joints a vector
    (:func:`_turned_rows8`). A float32 pose or a rig of under eight nodes: joint by joint. Flat rows
    and unsigned indices: a view per channel and signed index arithmetic each cost more than these
    loops on a few dozen joints."""
    L = np.uint64(joints.shape[0])
    if mode == SPRING:
        wp, wq = spring_weights(t, duration)
    else:
        wp, wq = quintic_weights(t, duration)
    lanes = np.uint64(_padded(n, pose.shape[0]))
    u0, u1, u2, u3, u4, u5, u6, u7, u8, u9 = _U
    bound = x_bound * abs(wp) + v_bound * abs(wq)  # no rotation offset is larger now
    if lanes > u0 and bound * bound <= SERIES_LIMIT and _offset_blocks(pose, joints, lanes, x, v, turn, wp, wq, False):
        return
    m = lanes if lanes > np.uint64(n) else np.uint64(n)  # lanes to turn (the padding's: exactly no turn)
    r0, r1, r2 = u3 * L, u4 * L, u5 * L  # the rotation channels' rows
    beyond = 0  # rotations past the short series' range (redone below)
    for i in range(m):
        rx, ry, rz = x[r0 + i] * wp + v[r0 + i] * wq, x[r1 + i] * wp + v[r1 + i] * wq, x[r2 + i] * wp + v[r2 + i] * wq
        h2 = 0.25 * (rx * rx + ry * ry + rz * rz)  # the half angle squared
        h4 = h2 * h2
        k = 0.5 * _short_series(h2, h4, 1)
        turn[i] = rx * k
        turn[L + i] = ry * k
        turn[u2 * L + i] = rz * k
        turn[u3 * L + i] = _short_series(h2, h4, 0)
        beyond += h2 > SHORT_LIMIT
    if beyond:  # the full series, or past its range quat_exp
        for i in range(m):
            rx, ry, rz = x[r0 + i] * wp + v[r0 + i] * wq, x[r1 + i] * wp + v[r1 + i] * wq, x[r2 + i] * wp + v[r2 + i] * wq
            a2 = rx * rx + ry * ry + rz * rz
            if 0.25 * a2 > SHORT_LIMIT:
                e = quat_exp_series(rx, ry, rz) if a2 <= SERIES_LIMIT else quat_exp(rx, ry, rz)
                turn[i], turn[L + i], turn[u2 * L + i], turn[u3 * L + i] = e
    if lanes > u0 and _offset_blocks(pose, joints, lanes, x, v, turn, wp, wq, True):
        return
    for i in range(np.uint64(n)):  # joint by joint
        j = joints[i]
        pose[j, 0] += x[i] * wp + v[i] * wq
        pose[j, 1] += x[L + i] * wp + v[L + i] * wq
        pose[j, 2] += x[u2 * L + i] * wp + v[u2 * L + i] * wq
        pose[j, 7] += x[u6 * L + i] * wp + v[u6 * L + i] * wq
        pose[j, 8] += x[u7 * L + i] * wp + v[u7 * L + i] * wq
        pose[j, 9] += x[u8 * L + i] * wp + v[u8 * L + i] * wq
        ax, ay, az, aw = turn[i], turn[L + i], turn[u2 * L + i], turn[u3 * L + i]
        bx, by, bz, bw = pose[j, 3], pose[j, 4], pose[j, 5], pose[j, 6]
        # exp(offset) * q: a unit quaternion (to 3e-14) times the pose's, left as it comes: the rotation
        # keeps the norm the clip gave it, so nothing jumps when the transition ends
        pose[j, 3] = aw * bx + ax * bw + ay * bz - az * by
        pose[j, 4] = aw * by - ax * bz + ay * bw + az * bx
        pose[j, 5] = aw * bz + ax * by - ay * bx + az * bw
        pose[j, 6] = aw * bw - ax * bx - ay * by - az * bz


@njit(cache=True, forceinline=True)
def _unit(x, y, z, w):
    """A product of unit quaternions renormalised (one division: this stage's hot loop)."""
    inv = 1.0 / math.sqrt(x * x + y * y + z * z + w * w)
    return x * inv, y * inv, z * inv, w * inv


# atan(y) / y = sum (-1)^m y^2m / (2m + 1), 10 terms: within 2e-15 of it for y <= tan(pi / 16) (the
# slerp's angle after three halvings, see _dead_turns)
_ATAN = tuple((-1.0) ** m / (2 * m + 1) for m in range(10))


@njit(cache=True, forceinline=True)
def _atan_ratio(z):
    """``atan(y) / y`` at ``z = y^2`` (y <= tan(pi / 16)), by its series (Horner)."""
    a = _ATAN
    r = a[9]
    for m in range(8, -1, -1):
        r = r * z + a[m]
    return r


@njit(cache=True, forceinline=True)
def _slerp_from(ex, ey, ez, ew, px, py, pz, pw, alpha):
    """``slerp(e, p, alpha) = exp(alpha * log(p * e^-1)) * e`` the shorter way round, renormalised, for
    quaternions e and p (of any norms: only their directions count), without ``atan2`` and without a branch (a loop of it vectorises): the
    half angle ``a`` of ``d = p * e^-1`` (``|d.xyz| = n``, ``|d| = r``, ``d.w >= 0``) as
    ``tan(a / 2) = n / (r + d.w)``, halved twice more by ``tan(x / 2) = tan x / (1 + sqrt(1 + tan^2 x))``
    to at most ``tan(pi / 16)``, then ``atan``'s series; ``a / n`` comes out without dividing by ``n``
    (no special case at ``n = 0``). Within 1e-14 of the ``atan2`` form."""
    dx, dy, dz, dw = qmul(px, py, pz, pw, -ex, -ey, -ez, ew)
    sign = 1.0 if dw >= 0.0 else -1.0
    dx, dy, dz, dw = dx * sign, dy * sign, dz * sign, dw * sign
    n2 = dx * dx + dy * dy + dz * dz
    g1 = 1.0 / (math.sqrt(n2 + dw * dw) + dw)
    y1 = math.sqrt(n2) * g1  # tan(a / 2)
    g2 = 1.0 / (1.0 + math.sqrt(1.0 + y1 * y1))
    y2 = y1 * g2  # tan(a / 4)
    g3 = 1.0 / (1.0 + math.sqrt(1.0 + y2 * y2))
    y3 = y2 * g3  # tan(a / 8)
    ratio = 8.0 * g1 * g2 * g3 * _atan_ratio(y3 * y3)  # a / n
    h = alpha * ratio * math.sqrt(n2)  # alpha times the half angle
    h2 = h * h
    h4 = h2 * h2
    h8 = h4 * h4
    k = alpha * ratio * _series(h2, h4, h8, 1)  # sin(h) / n
    return _unit(*qmul(dx * k, dy * k, dz * k, _series(h2, h4, h8, 0), ex, ey, ez, ew))


@njit(cache=True, error_model="numpy")
def _dead_blend_into(pose, t, duration, halflife, velocity, source, scratch):
    """:func:`decay_into`'s DEAD branch for the update kernel's stage: the same blend of the source
    (J, 10) carried on by its decaying velocity (J, 9) into ``pose`` (J, 10). Translations and scales
    row by row; the rotations in channel-major rows of ``scratch`` (at least 15 * J): the source's
    and the pose's quaternions and the extrapolated turn gathered, then one branch-free loop down the
    joints (:func:`_dead_turn`: it vectorises; the rows padded to a multiple of 8 lanes when
    ``scratch`` has room, so that it runs in whole vectors), then scattered back; a turn
    past the series' range (rare) is redone with :func:`quat_exp`. Within 1e-13 of :func:`decay_into`."""
    lam = LN2 / halflife
    f = (1.0 - math.exp(-lam * t)) / lam  # distance the decaying velocity carries in time t
    u = t / duration
    alpha = u * u * (3.0 - 2.0 * u)
    J = np.uint64(pose.shape[0])
    # the channel rows' length: J rounded up to 8 when the scratch has room (the loop down the joints then
    # runs in whole vectors, without a scalar remainder: the padding lanes turn identities, not stored)
    S = (J + np.uint64(7)) // np.uint64(8) * np.uint64(8)
    if np.uint64(15) * S > np.uint64(scratch.shape[0]):
        S = J
    flat = pose.reshape(-1)
    vel = velocity.reshape(-1)
    src = source.reshape(-1)
    w10, w9 = np.uint64(10), np.uint64(9)
    u0, u1, u2, u3, u4, u5, u6, u7, u8, u9 = _U
    beyond = 0
    for j in range(J):
        o, ov = j * w10, j * w9
        for c in (u0, u1, u2, u7, u8, u9):
            ext = src[o + c] + vel[ov + (c if c < u3 else c - u1)] * f
            flat[o + c] = ext + (flat[o + c] - ext) * alpha
        rx, ry, rz = vel[ov + u3] * f, vel[ov + u4] * f, vel[ov + u5] * f
        scratch[j], scratch[S + j], scratch[u2 * S + j] = rx, ry, rz
        beyond += rx * rx + ry * ry + rz * rz > SERIES_LIMIT
        for c in range(u4):
            scratch[(u3 + c) * S + j] = src[o + u3 + c]
            scratch[(u7 + c) * S + j] = flat[o + u3 + c]
    for j in range(J, S):  # padding lanes: no turn, identity rotations
        for c in range(u9 + u2):
            scratch[c * S + j] = 1.0 if c == u6 or c == u9 + u1 else 0.0
    out = u9 + u2  # rows 11..14: the blended rotations
    for j in range(S):
        _dead_turn(scratch, S, j, alpha, out)
    for j in range(J):
        o = j * w10
        for c in range(u4):
            flat[o + u3 + c] = scratch[(out + c) * S + j]
    if beyond:
        for j in range(J):
            rx, ry, rz = scratch[j], scratch[S + j], scratch[u2 * S + j]
            if rx * rx + ry * ry + rz * rz > SERIES_LIMIT:
                e = quat_exp(rx, ry, rz)
                ex, ey, ez, ew = _unit(*qmul(e[0], e[1], e[2], e[3], source[j, 3], source[j, 4], source[j, 5], source[j, 6]))
                q = _slerp_from(ex, ey, ez, ew, scratch[u7 * S + j], scratch[u8 * S + j], scratch[u9 * S + j],
                                scratch[(u9 + u1) * S + j], alpha)
                pose[j, 3], pose[j, 4], pose[j, 5], pose[j, 6] = q


@njit(cache=True, forceinline=True, error_model="numpy")
def _dead_turn(scratch, S, j, alpha, out):
    """Lane ``j`` of :func:`_dead_blend_into`'s loop down the joints (channel rows ``S`` long): the
    source turned by its extrapolated rotation, slerped toward the pose by ``alpha``, into rows
    ``out`` to ``out + 3``."""
    u1, u2, u3, u4, u5, u6, u7, u8, u9 = _U[1:]
    ex, ey, ez, ew = quat_exp_series(scratch[j], scratch[S + j], scratch[u2 * S + j])
    # (not renormalised: the slerp's result does not depend on its start's norm, and it renormalises)
    ex, ey, ez, ew = qmul(ex, ey, ez, ew, scratch[u3 * S + j], scratch[u4 * S + j], scratch[u5 * S + j],
                          scratch[u6 * S + j])
    q = _slerp_from(ex, ey, ez, ew, scratch[u7 * S + j], scratch[u8 * S + j], scratch[u9 * S + j],
                    scratch[(u9 + u1) * S + j], alpha)
    for c in range(u4):
        scratch[(out + c) * S + j] = q[c]


class InertiaArrays:
    """The arrays of the update kernel's inertialization stage for ``count`` instances of an
    ``nodes``-node rig (the ``inert_*`` fields of a :class:`~skeletal.playback.jobs.PlaybackJob`; see
    :func:`inertialize_instance`). ``count`` 0: the empty set a mixer starts with (no stage compiled
    in, nothing changes for a plain player); the first inertialized switch makes the full one.

    >>> InertiaArrays(0, 65).state.shape, InertiaArrays(4, 65).offset.shape
    ((0,), (4, 65, 9))
    """

    def __init__(self, count: int, nodes: int):
        b, n = int(count), int(nodes)
        threads = numba.config.NUMBA_NUM_THREADS if b else 0
        self.count = b
        # (0,) without instances: a job type whose update kernel compiles no stage (kernels.inertia_stage)
        self.state = np.zeros((b, NSTATE) if b else 0, np.int64)
        self.clock = np.zeros((b, NKCLOCK))
        self.offset = np.zeros((b, n, NCH))
        self.velocity = np.zeros((b, n, NCH))
        self.source = np.zeros((b, n, 10))
        self.anchor = np.zeros((b, n, 10))
        width = lanes(n)  # the channel-major rows' lanes (a multiple of 8: see _gather_moving)
        self.joints = np.zeros((b, width), np.int64)
        self.x = np.zeros((b, NCH * width))
        self.v = np.zeros((b, NCH * width))
        self.scratch = np.zeros((threads, 2, NCH * width))

    def fields(self) -> dict:
        """The job's ``inert_*`` fields, by name."""
        return dict(inert_state=self.state, inert_clock=self.clock, inert_offset=self.offset,
                    inert_velocity=self.velocity, inert_source=self.source, inert_anchor=self.anchor,
                    inert_joints=self.joints, inert_x=self.x, inert_v=self.v, inert_scratch=self.scratch)

    @property
    def running(self) -> np.ndarray:
        """(B,) bool: instances with a transition running (none for the empty set)."""
        return self.state[:, ST_PHASE] != IDLE if self.count else np.zeros(0, np.bool_)

    def reposed(self) -> np.ndarray:
        """The instances a crowd's wide path posed on their own in its last update (see
        :func:`skeletal.playback.wide.update_wide`)."""
        return np.flatnonzero(self.state[:, ST_REPOSED]) if self.count else np.zeros(0, np.int64)
