"""IK solver kernels on one pose: two-bone, aim (look-at), CCD and FABRIK, with joint limits.

Each solver reads the model-space matrices of its chain (``world`` (N, 3|4, 4), valid for the chain
joints and their ancestors) and writes corrected local rotations (xyzw) into ``pose`` (N, 10) rows
``t q s``, blended by ``weight`` in [0, 1]; targets, poles and up vectors are model-space 3-tuples.
Chain solvers take the chain's per-joint parameter rows (``JP_*`` of :mod:`skeletal.anim.ik_layout`)
and a scratch array (chain length, ``SCRATCH_WIDTH``). The batched API and the stage table that runs
them are in :mod:`skeletal.anim.ik`.

>>> import numpy as np
>>> from skeletal.anim.ik_solvers import soft_distance
>>> float(soft_distance(2.0, 1.0, 0.0)), float(soft_distance(0.5, 1.0, 0.1))
(1.0, 0.5)
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .ik_layout import (JP_AXIS, JP_CONE, JP_LIMIT, JP_MAX, JP_MIN, JP_PITCH, JP_REF, JP_ROLL, JP_SHARE,
                        JP_YAW, LIMIT_HINGE, LIMIT_NONE)
from .vec import (EPS, _add, _any_perpendicular, _arc, _arc_to_unit, _axis_angle, _cross, _dot, _finite3,
                  _half_turn, _len, _local_rotation, _local_turn, _matrix_rotation, _out_of_frame,
                  _parent_rotation, _position, _qconj, _qmul, _qnorm, _qrot, _quat, _quat_at, _scale,
                  _scale_rotation, _sub, _vec_at, _write_rotation)


# ---------------------------------------------------------------------------------------------
# two-bone


@njit(cache=True)
def soft_distance(d, length, soft):
    """Distance the end effector is placed at for a target ``d`` away, with a chain of ``length``:
    ``d`` up to ``length * (1 - soft)``, then an exponential approach that reaches ``length`` only at
    infinity (continuous with its first derivative: no snap when the leg straightens)."""
    if soft <= 0.0:
        return min(d, length)
    band = soft * length
    start = length - band
    if d <= start:
        return d
    return start + band * (1.0 - np.exp(-(d - start) / band))


@njit(cache=True, forceinline=True)
def knee_pole(world, thigh, knee, foot, length):
    """A leg's pole for :func:`two_bone_one`: the point ``length`` from the knee (world rows ``world``
    (N, 3|4, 4)), away from the thigh-foot midpoint, so that the knee keeps bending the way it bends
    now; a straight leg (offset under 1e-4 of ``length``) bends toward the model's front (+Z)."""
    kx, ky, kz = world[knee, 0, 3], world[knee, 1, 3], world[knee, 2, 3]
    ox = kx - 0.5 * (world[thigh, 0, 3] + world[foot, 0, 3])
    oy = ky - 0.5 * (world[thigh, 1, 3] + world[foot, 1, 3])
    oz = kz - 0.5 * (world[thigh, 2, 3] + world[foot, 2, 3])
    on = np.sqrt(ox * ox + oy * oy + oz * oz)
    if on < 1e-4 * length:
        ox, oy, oz, on = 0.0, 0.0, 1.0, 1.0
    k = length / on
    return (kx + ox * k, ky + oy * k, kz + oz * k)


@njit(cache=True)
def two_bone_one(pose, world, parents, a, b, c, target, pole, weight, soft, mid_axis, end_rotation):
    """Two-bone IK for one pose: rotate joints ``a`` (root) and ``b`` (mid) so that ``c`` (end; any
    descendant of ``b``, ``b`` any descendant of ``a``) reaches ``target``.

    Law of cosines at the mid joint (bend about ``mid_axis`` given in b's local frame, or about the
    normal of the current bend plane), then the shortest turn of the root that puts the end on the
    root-target line, then a turn about that line so that the mid joint lies on the side of ``pole``
    (when finite). ``soft``: see :func:`soft_distance`. Unreachable targets leave the chain straight
    toward them; a target at the root keeps the current direction; zero-length bones fall back to
    aiming the other bone. ``end_rotation``: model-space rotation for c (finite) or NaN.
    ``weight`` in [0, 1] slerps the local rotations from the input; <= 0 returns at once.
    Tuples: target, pole (3,), mid_axis (3,), end_rotation (4,).

    Every turn is built from the cosine and sine of its angle (no trigonometric calls), and model-space
    turns become local ones through the parents' world matrices (:func:`_local_turn`): this runs per
    leg per character per frame inside the crowd update.
    """
    if not weight > 0.0:
        return
    pa = _position(world, a)
    pb = _position(world, b)
    pc = _position(world, c)
    u = _sub(pb, pa)
    v = _sub(pc, pb)
    l1 = _len(u)
    l2 = _len(v)
    t = target
    d = _sub(t, pa)
    dist = _len(d)
    rh = (0.0, 0.0, 0.0, 1.0)  # bend at b (model space, applied first)
    q = (0.0, 0.0, 0.0, 1.0)  # turn of the root (model space, applied last)
    if l1 < EPS and l2 < EPS:
        pass
    elif l1 < EPS:
        rh = _arc(v, _sub(t, pb))
    elif l2 < EPS:
        q = _arc(u, d)
    else:
        # direction to the target (a target at the root keeps the current end direction)
        if dist > EPS:
            direction = _scale(d, 1.0 / dist)
        else:
            e = _sub(pc, pa)
            le = _len(e)
            direction = _scale(e, 1.0 / le) if le > EPS else _scale(u, 1.0 / l1)
        reach = soft_distance(dist, l1 + l2, soft)
        reach = max(reach, abs(l1 - l2))
        # bend axis at b
        has_pole = _finite3(pole)
        if _finite3(mid_axis):
            h = _out_of_frame(world, b, mid_axis)
        else:
            h = _cross(u, v)
            if _len(h) < 1e-7 * l1 * l2:
                if has_pole:
                    h = _cross(u, _sub(pole, pa))
                if _len(h) < 1e-7 * l1 * max(_len(_sub(pole, pa)), 1.0) or not has_pole:
                    h = _any_perpendicular(_scale(u, 1.0 / l1))
        lh = _len(h)
        if lh > EPS:
            h = _scale(h, 1.0 / lh)
            # |u + R(h, phi) v| = reach:  A cos(phi) + B sin(phi) = K - C  (Rodrigues)
            uh = _dot(u, h)
            vh = _dot(v, h)
            ca = _dot(u, v) - uh * vh
            cb = _dot(u, _cross(h, v))
            cc = uh * vh
            k = 0.5 * (reach * reach - l1 * l1 - l2 * l2)
            r = np.sqrt(ca * ca + cb * cb)
            if r > EPS * l1 * l2:
                # phi = atan2(cb, ca) + acos(x), as its cosine and sine
                inv_r = 1.0 / r
                x = min(max((k - cc) * inv_r, -1.0), 1.0)
                y = np.sqrt(1.0 - x * x)
                rh = _half_turn(h, (ca * x - cb * y) * inv_r, (cb * x + ca * y) * inv_r)
        e2 = _add(u, _qrot(rh, v))
        q = _arc_to_unit(e2, direction)
        if has_pole:
            # the turn about ``direction`` taking the mid joint's side m onto the pole's side p
            m = _qrot(q, u)
            m = _sub(m, _scale(direction, _dot(direction, m)))
            p = _sub(pole, pa)
            p = _sub(p, _scale(direction, _dot(direction, p)))
            if _dot(m, m) > 1e-14 * l1 * l1 and _dot(p, p) > EPS * EPS:
                cos_r = _dot(m, p)  # |m||p| cos, |m||p| sin of the turn (m, p are normal to direction)
                sin_r = _dot(direction, _cross(m, p))
                rr = np.sqrt(cos_r * cos_r + sin_r * sin_r)
                w = rr + cos_r
                if w > 1e-12 * rr:  # (direction sin, 1 + cos) normalised: norm^2 = 2 rr (rr + cos)
                    kk = 1.0 / np.sqrt(2.0 * rr * w)
                    q = _qmul((direction[0] * sin_r * kk, direction[1] * sin_r * kk, direction[2] * sin_r * kk,
                               w * kk), q)
                else:  # a half turn
                    q = _qmul((direction[0], direction[1], direction[2], 0.0), q)
    qla = _local_rotation(pose, a)
    qlb = _local_rotation(pose, b)
    rc = end_rotation
    if np.isfinite(rc[0]) and np.isfinite(rc[1]) and np.isfinite(rc[2]) and np.isfinite(rc[3]):
        qlc = _local_rotation(pose, c)
        qpc = _matrix_rotation(world, parents[c])
        qpc_new = _qmul(q, _qmul(rh, qpc))
        _write_rotation(pose, c, qlc, _qmul(_qconj(qpc_new), _qnorm(rc)), weight)
    _write_rotation(pose, a, qla, _local_turn(world, parents[a], q, qla), weight)
    _write_rotation(pose, b, qlb, _local_turn(world, parents[b], rh, qlb), weight)


# ---------------------------------------------------------------------------------------------
# aim


@njit(cache=True)
def _clamp_euler(d, s, up, f, max_yaw, max_pitch, max_roll):
    """Clamp rotation d (model space) to |yaw| <= max_yaw about ``up``, |pitch| about ``s`` and
    |roll| about ``f`` (an orthonormal right-handed basis s = up x f), Euler order yaw-pitch-roll."""
    if not (max_yaw < np.pi or max_pitch < np.pi or max_roll < np.pi):
        return d
    # the quaternion in basis coordinates (x = s, y = up, z = f)
    v = (d[0], d[1], d[2])
    x, y, z, w = _dot(v, s), _dot(v, up), _dot(v, f), d[3]
    # rotation matrix entries used by the YXZ decomposition
    m02 = 2.0 * (x * z + w * y)
    m22 = 1.0 - 2.0 * (x * x + y * y)
    m12 = 2.0 * (y * z - w * x)
    m10 = 2.0 * (x * y + w * z)
    m11 = 1.0 - 2.0 * (x * x + z * z)
    pitch = np.arcsin(min(max(-m12, -1.0), 1.0))
    yaw = np.arctan2(m02, m22)
    roll = np.arctan2(m10, m11)
    if abs(yaw) <= max_yaw and abs(pitch) <= max_pitch and abs(roll) <= max_roll:
        return d
    yaw = min(max(yaw, -max_yaw), max_yaw)
    pitch = min(max(pitch, -max_pitch), max_pitch)
    roll = min(max(roll, -max_roll), max_roll)
    qb = _qmul(_qmul(_axis_angle((0.0, 1.0, 0.0), yaw), _axis_angle((1.0, 0.0, 0.0), pitch)),
               _axis_angle((0.0, 0.0, 1.0), roll))
    vx = _add(_add(_scale(s, qb[0]), _scale(up, qb[1])), _scale(f, qb[2]))
    return (vx[0], vx[1], vx[2], qb[3])


@njit(cache=True)
def aim_one(pose, world, parents, joints, jp, target, up_vector, weight, forward, up, scratch):
    """Aim for one pose: the chain ``joints`` (root first; each a descendant of the previous) turns so
    that the last joint's ``forward`` axis (its local frame) points at ``target``, its ``up`` axis
    toward the model-space ``up_vector`` (when finite). Each joint k takes ``jp[k, JP_SHARE]`` of the
    turn still left (the last takes it all), clamped to ``jp[k, JP_YAW/PITCH/ROLL]`` measured in the
    aim frame (up, side, forward of the last joint at that moment). ``scratch`` (>= len(joints), 4)."""
    n = joints.shape[0]
    if not weight > 0.0 or n == 0:
        return
    last = joints[n - 1]
    ph0 = _position(world, last)
    wh0 = _matrix_rotation(world, last)
    # running rigid map of everything below the joints corrected so far: x -> g x + tg
    g = (0.0, 0.0, 0.0, 1.0)
    tg = (0.0, 0.0, 0.0)
    has_up = _finite3(up_vector)
    for k in range(n):
        j = joints[k]
        pk = _add(_qrot(g, _position(world, j)), tg)
        wp = _parent_rotation(world, parents, j)
        if k > 0:
            wp = _qmul(g, wp)
        ql = _local_rotation(pose, j)
        wk = _qmul(wp, ql)
        ph = _add(_qrot(g, ph0), tg)
        wh = _qmul(g, wh0)
        fw = _qrot(wh, forward)
        full = _arc(fw, _sub(target, ph))
        if has_up:
            f2 = _qrot(full, fw)
            lf = _len(f2)
            if lf > EPS:
                f2 = _scale(f2, 1.0 / lf)
                u2 = _qrot(full, _qrot(wh, up))
                u2 = _sub(u2, _scale(f2, _dot(f2, u2)))
                uv = _sub(up_vector, _scale(f2, _dot(f2, up_vector)))
                if _len(u2) > EPS and _len(uv) > EPS:
                    roll = np.arctan2(_dot(f2, _cross(u2, uv)), _dot(u2, uv))
                    full = _qmul(_axis_angle(f2, roll), full)
        share = jp[k, JP_SHARE] if k < n - 1 else 1.0
        dq = _scale_rotation(full, share)
        # limits, in the aim frame of the moment
        fu = _qrot(wh, forward)
        uu = _qrot(wh, up)
        lf = _len(fu)
        if lf > EPS:
            fu = _scale(fu, 1.0 / lf)
            uu = _sub(uu, _scale(fu, _dot(fu, uu)))
            lu = _len(uu)
            if lu > EPS:
                uu = _scale(uu, 1.0 / lu)
                ss = _cross(uu, fu)
                dq = _clamp_euler(dq, ss, uu, fu, jp[k, JP_YAW], jp[k, JP_PITCH], jp[k, JP_ROLL])
        new_local = _qmul(_qconj(wp), _qmul(dq, wk))
        scratch[k, 0] = new_local[0]
        scratch[k, 1] = new_local[1]
        scratch[k, 2] = new_local[2]
        scratch[k, 3] = new_local[3]
        # everything below j turns by dq about pk
        g = _qmul(dq, g)
        tg = _add(_sub(_qrot(dq, tg), _qrot(dq, pk)), pk)
    for k in range(n):
        j = joints[k]
        _write_rotation(pose, j, _local_rotation(pose, j), _quat(scratch[k], 0), weight)


# ---------------------------------------------------------------------------------------------
# chains: limits, CCD, FABRIK


@njit(cache=True, forceinline=True)
def _put3(a, k, o, v):
    a[k, o] = v[0]
    a[k, o + 1] = v[1]
    a[k, o + 2] = v[2]


@njit(cache=True, forceinline=True)
def _put4(a, k, o, q):
    a[k, o] = q[0]
    a[k, o + 1] = q[1]
    a[k, o + 2] = q[2]
    a[k, o + 3] = q[3]

# scratch columns per chain joint
C_P = 0  # current position (3)
C_W = 3  # current world rotation (4)
C_WP = 7  # current world rotation of the parent (4)
C_L = 11  # current local rotation (4)
C_O = 15  # original offset to the next chain joint, model space (3)
C_LEN = 18  # its length
C_A = 19  # that offset in the joint's own frame (the bone axis cone limits use; constant)
C_W0 = 22  # the joint's world rotation in the input pose (constant)


@njit(cache=True)
def _apply_limit(jp, k, ql, bone_axis):
    """Clamp local rotation ql to the joint's limit (hinge or cone), measured from its reference."""
    kind = jp[k, JP_LIMIT]
    if kind == LIMIT_NONE:
        return ql
    ref = _quat_at(jp, k, JP_REF)
    delta = _qnorm(_qmul(_qconj(ref), ql))
    if kind == LIMIT_HINGE:
        h = _vec_at(jp, k, JP_AXIS)
        s = _dot((delta[0], delta[1], delta[2]), h)
        angle = 2.0 * np.arctan2(s, delta[3])
        if angle > np.pi:
            angle -= 2.0 * np.pi
        elif angle < -np.pi:
            angle += 2.0 * np.pi
        angle = min(max(angle, jp[k, JP_MIN]), jp[k, JP_MAX])
        return _qmul(ref, _axis_angle(h, angle))
    # cone: swing of the bone axis within JP_CONE, twist about it within [JP_MIN, JP_MAX]
    a = bone_axis
    la = _len(a)
    if la < EPS:
        return ql
    a = _scale(a, 1.0 / la)
    s = _dot((delta[0], delta[1], delta[2]), a)
    tw = (a[0] * s, a[1] * s, a[2] * s, delta[3])
    if s * s + delta[3] * delta[3] < 1e-24:
        tw = (0.0, 0.0, 0.0, 1.0)
    else:
        tw = _qnorm(tw)
    sw = _qmul(delta, _qconj(tw))
    if sw[3] < 0.0:
        sw = (-sw[0], -sw[1], -sw[2], -sw[3])
    swing_angle = 2.0 * np.arctan2(np.sqrt(sw[0] * sw[0] + sw[1] * sw[1] + sw[2] * sw[2]), sw[3])
    cone = jp[k, JP_CONE]
    if swing_angle > cone:
        sw = _scale_rotation(sw, cone / swing_angle)
    if tw[3] < 0.0:
        tw = (-tw[0], -tw[1], -tw[2], -tw[3])
    tangle = 2.0 * np.arctan2(_dot((tw[0], tw[1], tw[2]), a), tw[3])
    lo, hi = jp[k, JP_MIN], jp[k, JP_MAX]
    if tangle < lo or tangle > hi:
        tw = _axis_angle(a, min(max(tangle, lo), hi))
    return _qmul(ref, _qmul(sw, tw))


@njit(cache=True)
def _chain_setup(pose, world, parents, joints, sc):
    """Fill the chain scratch from the pose; returns the chain length (sum of segment lengths)."""
    n = joints.shape[0]
    total = 0.0
    for k in range(n):
        j = joints[k]
        p = _position(world, j)
        wp = _parent_rotation(world, parents, j)
        ql = _local_rotation(pose, j)
        w = _qmul(wp, ql)
        _put3(sc, k, C_P, p)
        _put4(sc, k, C_W, w)
        _put4(sc, k, C_W0, w)
        _put4(sc, k, C_WP, wp)
        _put4(sc, k, C_L, ql)
    for k in range(n):
        if k + 1 < n:
            o = _sub(_vec_at(sc, k + 1, C_P), _vec_at(sc, k, C_P))
        else:
            o = (0.0, 0.0, 0.0)
        _put3(sc, k, C_O, o)
        sc[k, C_LEN] = _len(o)
        _put3(sc, k, C_A, _qrot(_qconj(_quat_at(sc, k, C_W)), o))
        total += sc[k, C_LEN]
    return total


@njit(cache=True)
def _bone_axis_local(sc, k):
    """Direction to the next chain joint in joint k's own frame (from the original pose)."""
    return _vec_at(sc, k, C_A)


@njit(cache=True)
def _set_local(sc, k, ql_new, n):
    """Joint k gets local rotation ql_new: its world rotation changes by dq, the chain below it turns
    rigidly about its position."""
    w_old = _quat_at(sc, k, C_W)
    w_new = _qnorm(_qmul(_quat_at(sc, k, C_WP), ql_new))
    dq = _qmul(w_new, _qconj(w_old))
    _put4(sc, k, C_L, ql_new)
    _put4(sc, k, C_W, w_new)
    pk = _vec_at(sc, k, C_P)
    for m in range(k + 1, n):
        _put3(sc, m, C_P, _add(pk, _qrot(dq, _sub(_vec_at(sc, m, C_P), pk))))
        _put4(sc, m, C_W, _qnorm(_qmul(dq, _quat_at(sc, m, C_W))))
        _put4(sc, m, C_WP, _qnorm(_qmul(dq, _quat_at(sc, m, C_WP))))


@njit(cache=True)
def _chain_has_limits(jp, n):
    for k in range(n):
        if jp[k, JP_LIMIT] != LIMIT_NONE:
            return True
    return False


@njit(cache=True)
def _enforce_limits(jp, sc, n):
    for k in range(n - 1):
        if jp[k, JP_LIMIT] != LIMIT_NONE:
            ql = _quat_at(sc, k, C_L)
            _set_local(sc, k, _apply_limit(jp, k, ql, _bone_axis_local(sc, k)), n)


@njit(cache=True)
def _write_chain(pose, joints, sc, weight):
    for k in range(joints.shape[0] - 1):
        j = joints[k]
        _write_rotation(pose, j, _local_rotation(pose, j), _quat_at(sc, k, C_L), weight)


@njit(cache=True)
def _straighten(jp, sc, n, target, limited):
    """Unreachable target: every bone points along root -> target (then limits, if any)."""
    root = _vec_at(sc, 0, C_P)
    for k in range(n - 1):
        dq = _arc(_vec_at(sc, k, C_O), _sub(target, root))
        w_new = _qmul(dq, _quat_at(sc, k, C_W0))
        ql = _qmul(_qconj(_quat_at(sc, k, C_WP)), w_new)
        if limited:
            ql = _apply_limit(jp, k, ql, _bone_axis_local(sc, k))
        _set_local(sc, k, ql, n)


@njit(cache=True)
def ccd_one(pose, world, parents, joints, jp, target, weight, iterations, tolerance, scratch):
    """Cyclic coordinate descent for one pose: from the joint before the end back to the root, each
    joint turns so that the end effector (last of ``joints``) lies on its line to ``target``; its local
    rotation is clamped to its limit (``jp`` rows) right away. Stops after ``iterations`` sweeps or
    when the end is within ``tolerance``. Unreachable targets: the chain straight toward them.
    ``scratch`` (>= len(joints), SCRATCH_WIDTH)."""
    n = joints.shape[0]
    if not weight > 0.0 or n < 2:
        return
    sc = scratch
    total = _chain_setup(pose, world, parents, joints, sc)
    limited = _chain_has_limits(jp, n)
    if limited:
        _enforce_limits(jp, sc, n)
    if _len(_sub(target, _vec_at(sc, 0, C_P))) >= total:
        _straighten(jp, sc, n, target, limited)
    else:
        for _ in range(iterations):
            if _len(_sub(target, _vec_at(sc, n - 1, C_P))) <= tolerance:
                break
            for k in range(n - 2, -1, -1):
                pk = _vec_at(sc, k, C_P)
                dq = _arc(_sub(_vec_at(sc, n - 1, C_P), pk), _sub(target, pk))
                w_new = _qmul(dq, _quat_at(sc, k, C_W))
                ql = _qnorm(_qmul(_qconj(_quat_at(sc, k, C_WP)), w_new))
                if limited:
                    ql = _apply_limit(jp, k, ql, _bone_axis_local(sc, k))
                _set_local(sc, k, ql, n)
    _write_chain(pose, joints, sc, weight)


@njit(cache=True)
def _positions_to_rotations(jp, sc, n, pos, limited):
    """Give each joint (root first) the world rotation of the input pose turned by the smallest
    rotation from its input bone direction onto ``pos[k + 1] - pos[k]``: no twist about the bone is
    added, so every bone keeps the twist it had in the animated pose. Limits clamp each local
    rotation; the chain below follows rigidly (scratch positions)."""
    for k in range(n - 1):
        want = (pos[k + 1, 0] - pos[k, 0], pos[k + 1, 1] - pos[k, 1], pos[k + 1, 2] - pos[k, 2])
        dq = _arc(_vec_at(sc, k, C_O), want)
        w_new = _qmul(dq, _quat_at(sc, k, C_W0))
        ql = _qnorm(_qmul(_qconj(_quat_at(sc, k, C_WP)), w_new))
        if limited:
            ql = _apply_limit(jp, k, ql, _bone_axis_local(sc, k))
        _set_local(sc, k, ql, n)


@njit(cache=True)
def fabrik_one(pose, world, parents, joints, jp, target, weight, iterations, tolerance, scratch, pos):
    """FABRIK for one pose: backward (end at the target) and forward (root back in place) passes over
    the chain's joint positions, segment lengths kept; then each joint gets the smallest rotation
    onto its new bone direction (twist preserved, see :func:`_positions_to_rotations`). With limits
    the positions are converted, clamped and re-derived after every iteration. ``scratch`` as in
    :func:`ccd_one`; ``pos`` (>= len(joints), 3) scratch."""
    n = joints.shape[0]
    if not weight > 0.0 or n < 2:
        return
    sc = scratch
    total = _chain_setup(pose, world, parents, joints, sc)
    limited = _chain_has_limits(jp, n)
    if limited:
        _enforce_limits(jp, sc, n)
    root = _vec_at(sc, 0, C_P)
    if _len(_sub(target, root)) >= total:
        _straighten(jp, sc, n, target, limited)
        _write_chain(pose, joints, sc, weight)
        return
    for k in range(n):
        pos[k, 0], pos[k, 1], pos[k, 2] = sc[k, C_P], sc[k, C_P + 1], sc[k, C_P + 2]
    for _ in range(iterations):
        end = (pos[n - 1, 0], pos[n - 1, 1], pos[n - 1, 2])
        if _len(_sub(target, end)) <= tolerance:
            break
        pos[n - 1, 0], pos[n - 1, 1], pos[n - 1, 2] = target
        for k in range(n - 2, -1, -1):
            nxt = (pos[k + 1, 0], pos[k + 1, 1], pos[k + 1, 2])
            d = _sub((pos[k, 0], pos[k, 1], pos[k, 2]), nxt)
            ld = _len(d)
            seg = sc[k, C_LEN]
            if ld > EPS:
                p = _add(nxt, _scale(d, seg / ld))
            else:
                p = _add(nxt, _scale(_vec_at(sc, k, C_O), -1.0))
            pos[k, 0], pos[k, 1], pos[k, 2] = p
        pos[0, 0], pos[0, 1], pos[0, 2] = root
        for k in range(n - 1):
            cur = (pos[k, 0], pos[k, 1], pos[k, 2])
            d = _sub((pos[k + 1, 0], pos[k + 1, 1], pos[k + 1, 2]), cur)
            ld = _len(d)
            seg = sc[k, C_LEN]
            if ld > EPS:
                p = _add(cur, _scale(d, seg / ld))
            else:
                p = _add(cur, _vec_at(sc, k, C_O))
            pos[k + 1, 0], pos[k + 1, 1], pos[k + 1, 2] = p
        if limited:
            _positions_to_rotations(jp, sc, n, pos, True)
            for k in range(n):
                pos[k, 0], pos[k, 1], pos[k, 2] = sc[k, C_P], sc[k, C_P + 1], sc[k, C_P + 2]
    if not limited:
        _positions_to_rotations(jp, sc, n, pos, False)
    _write_chain(pose, joints, sc, weight)
