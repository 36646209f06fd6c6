"""Foot placement's leg IK across characters in SIMD lanes (:func:`skeletal.playback.footplacement.foot_kernel`).

The kernel gathers the legs of a block of characters into a structure-of-arrays scratch, one lane per
(character, leg) and one row per input field (:func:`gather_leg`), solves every lane in one loop
without branches (:func:`leg_lanes`: :func:`skeletal.anim.ik_solvers.two_bone_one`'s arithmetic with
the leg's pole (:func:`skeletal.anim.ik_solvers.knee_pole`) and the foot's end rotation, every branch a
select, so that LLVM runs it 8 float64 lanes wide on AVX-512, 4 on AVX2), then writes each leg's new
local rotations back (:func:`write_leg`). The operations and their order are the scalar solver's, and
square roots and divisions round the same in lanes, so a solved lane gives the scalar solver's bits. A
lane whose case the loop does not cover (a zero-length bone or target at the thigh, a straight leg
whose pole is on its line, half turns, a foot turn that may pass the tilt limit, non-finite inputs)
is marked and :func:`write_leg` solves it with :func:`~skeletal.anim.ik_solvers.two_bone_one` itself
(the foot's rotation by :func:`foot_rotation`). A partial weight slerps per leg in :func:`write_leg`.

Layout: ``li`` (N_IN * LW,) float64 input rows and ``lo`` (N_OUT * LW,) output rows, row ``k`` of lane
``i`` at ``k * LW + i`` (unsigned offsets and a constant stride: numba's negative-index wraparound and a
run-time stride each keep LLVM from proving the rows independent). Positions and targets are model
space; quaternions xyzw; a node's rotation-scale block is stored as its three columns (9 rows).

>>> li, lo = lane_scratch()                                         # doctest: +SKIP
>>> gather_leg(li, lane, pose_b, world_b, parents, a, b, c, target, up, normal, u, length, soft)  # doctest: +SKIP
>>> leg_lanes(li, lo, np.uint64(n), soft > 0.0, cos_half_tilt)      # doctest: +SKIP
>>> write_leg(li, lo, lane, pose_b, world_b, parents, a, b, c, weight, soft, cos_half_tilt, max_tilt)  # doctest: +SKIP
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from .._aligned import aligned_zeros
from ..anim.lanes import _LANE, _finite
from ..anim.lanes import _lq_mul as _qmul
from ..anim.lanes import _lq_rot as _qrot
from ..anim.ik_solvers import knee_pole, soft_distance, two_bone_one
from ..anim.vec import EPS, _cross, _dot, _len, _qnorm, _slerp, _sub
from ..quat import nlerp_identity, qmul, qnormalize, quat_from_to, quat_from_world
from .jobs import field

#: lanes per block (the rows' stride): 16 float64, two AVX-512 vectors; a block holds LW // legs characters
LW = 16
_S = np.uint64(LW)

# input rows of ``li``
I_PA, I_PB, I_PC = 0, 3, 6  # thigh, knee, foot positions (3 each)
I_T = 9  # target (3)
I_LEN = 12  # the leg's length (the pole's distance)
I_REACH = 13  # soft > 0: soft_distance of the target's distance
I_UP = 14  # world up in model space (3)
I_N = 17  # the ground normal under the foot in model space (3)
I_U = 20  # the foot's contact weight (how far it turns to the normal)
I_QLA, I_QLB, I_QLC = 21, 25, 29  # local rotations of thigh, knee, foot (4 each)
I_FA, I_FB, I_FC = 33, 42, 51  # columns of the parents' world rotation-scale blocks (9 each)
I_FOOT = 60  # columns of the foot's world rotation-scale block (9)
N_IN = 69
# output rows of ``lo``
O_NA, O_NB, O_NC = 0, 4, 8  # new local rotations of thigh, knee, foot before the weight (4 each)
O_UA, O_UB, O_UC = 12, 16, 20  # the same normalised (4 each)
O_BAD = 24  # 1: the scalar solver's case (see the module docstring)
N_OUT = 25

#: sizes of a block's input and output rows (:func:`lane_scratch`)
LI_SIZE, LO_SIZE = N_IN * LW, N_OUT * LW
#: a thread's part of a job's lane rows and flags (:func:`thread_scratch`): the rows, then a cache line
#: that no thread writes, so that two threads' parts never share one
LI_PART, LO_PART, PAD_FLAGS = LI_SIZE + 8, LO_SIZE + 8, 64


def thread_scratch(n_legs: int, n_waves: int, threads: int) -> dict:
    """A :class:`~skeletal.playback.jobs.FootJob`'s scratch for
    :func:`~skeletal.playback.footplacement.foot_kernel` (made with the job, not per call), one part per
    thread of numba's pool (``threads``: ``numba.config.NUMBA_NUM_THREADS``; a range of instances uses
    its thread's part, :func:`range_scratch`): a block's terrain wave arguments, sines and cosines
    (:func:`block_waves` per part; zeros: the padding's arguments), a block's lane inputs and outputs
    (:func:`lane_scratch`'s sizes), the block's flags (False).

    >>> scratch = thread_scratch(2, 6, 4)   # two legs, a terrain of six waves, four threads
    >>> scratch["lane_in"].shape == (4 * LI_PART,)
    True
    """
    per_block = max(LW // max(n_legs, 1), 1)
    t = max(int(threads), 1)
    # aligned to a cache line: a part's vectors of 8 lanes (64 bytes) then never straddle two lines
    # (each part's size is a whole number of vectors)
    return {"wave_scratch": aligned_zeros((3, t * block_waves(n_legs, n_waves, per_block))),
            "lane_in": aligned_zeros(t * LI_PART), "lane_out": aligned_zeros(t * LO_PART),
            "solve_scratch": aligned_zeros(t * (per_block + PAD_FLAGS), np.bool_)}


@njit(cache=True, forceinline=True)
def block_waves(n_legs, n_waves, per_block):
    """Lanes of a block's terrain wave arguments: ``per_block`` characters' ``n_legs * n_waves`` in whole
    vectors of 8 (at least 8; the padding's arguments stay 0), plus a vector so that one thread's part
    never shares a cache line with the next one's.

    >>> block_waves(2, 6, 8)   # 8 two-legged characters, 6 waves: 96 arguments, then the gap
    104
    """
    return (max(per_block * n_legs * n_waves, 1) + 7) // 8 * 8 + 8


@njit(cache=True, forceinline=True)
def lane_scratch():
    """A block's input and output rows (zeros: lanes no leg uses hold finite values)."""
    return np.zeros(N_IN * LW), np.zeros(N_OUT * LW)


@njit(cache=True, forceinline=True)
def range_scratch(job, n_waves_block, per_block, tid):
    """A foot-placement range's scratch on thread ``tid`` (``numba.get_thread_id()``): a terrain's wave
    arguments (``n_waves_block``: :func:`block_waves`; zeros past those written), sines and cosines, a
    block's lane rows (:func:`lane_scratch`) and its ``per_block`` flags (False): the thread's part of
    the :class:`~skeletal.playback.jobs.FootJob`'s own (:func:`thread_scratch`; no allocation per call,
    holding between calls what fresh ones would where it is read before written; ranges on one thread
    run one after another), else (a thread past the parts, a job made for other sizes) new arrays."""
    ws, li, lo, solve = field(job, "wave_scratch"), field(job, "lane_in"), field(job, "lane_out"), field(job, "solve_scratch")
    t = tid + 1
    flags = per_block + PAD_FLAGS
    if (tid >= 0 and t * n_waves_block <= ws.shape[1] and t * LI_PART <= li.shape[0] and t * LO_PART <= lo.shape[0]
            and t * flags <= solve.shape[0]):
        w0, w1 = tid * n_waves_block, t * n_waves_block
        return (ws[0, w0:w1], ws[1, w0:w1], ws[2, w0:w1], li[tid * LI_PART:tid * LI_PART + LI_SIZE],
                lo[tid * LO_PART:tid * LO_PART + LO_SIZE], solve[tid * flags:tid * flags + per_block])
    li_new, lo_new = lane_scratch()
    return (np.zeros(n_waves_block), np.empty(n_waves_block), np.empty(n_waves_block), li_new, lo_new,
            np.zeros(per_block, np.bool_))


@intrinsic
def borrowed(typingctx, arr):
    """``arr`` (a 1-D array) without an owner: a null NRT meminfo, which numba's reference counting
    skips, so passing it to the inlined gather and write-back costs no atomic increment and decrement
    per call (a character's few such pairs cost about as much as the lanes' solve). Contract: the owner
    ``arr`` stays alive while the result is used (:func:`keep_alive` after the last use)."""
    if not (isinstance(arr, types.Array) and arr.ndim == 1):
        return None

    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        array.meminfo = cgutils.get_null_value(array.meminfo.type)
        array.parent = cgutils.get_null_value(array.parent.type)
        return array._getvalue()

    return arr(arr), codegen


@njit(cache=True, forceinline=True)
def keep_alive(a, b):
    """A use of ``a`` and ``b``: numba keeps an array alive until its last use (see :func:`borrowed`)."""
    return a.shape[0] + b.shape[0]


@njit(**_LANE)
def _r(k):
    """Offset of row ``k``: k * LW, unsigned."""
    return np.uint64(k) * _S


@njit(**_LANE)
def _get3(a, k, i):
    return (a[_r(k) + i], a[_r(k + 1) + i], a[_r(k + 2) + i])


@njit(**_LANE)
def _get4(a, k, i):
    return (a[_r(k) + i], a[_r(k + 1) + i], a[_r(k + 2) + i], a[_r(k + 3) + i])


@njit(**_LANE)
def _put4(a, k, i, q):
    a[_r(k) + i], a[_r(k + 1) + i], a[_r(k + 2) + i], a[_r(k + 3) + i] = q[0], q[1], q[2], q[3]


@njit(**_LANE)
def _qnormalize(q):
    """:func:`skeletal.quat.qnormalize` with a select for its zero case."""
    n = np.sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
    k = 1.0 / n
    small = n < 1e-300
    return ((0.0 if small else q[0] * k), (0.0 if small else q[1] * k), (0.0 if small else q[2] * k),
            (1.0 if small else q[3] * k))


@njit(**_LANE)
def _inv_len(c):
    """:func:`skeletal.anim.vec._inv_len` with a select."""
    n = _len(c)
    return 1.0 / n if n > 1e-300 else 0.0


@njit(**_LANE)
def _into_frame(li, k, v, i):
    """``R^T v`` for the columns at rows ``k`` (:func:`skeletal.anim.vec._into_frame`'s arithmetic)."""
    c0, c1, c2 = _get3(li, k, i), _get3(li, k + 3, i), _get3(li, k + 6, i)
    return (_dot(c0, v) * _inv_len(c0), _dot(c1, v) * _inv_len(c1), _dot(c2, v) * _inv_len(c2))


@njit(**_LANE)
def _sel4(c, a, b):
    return (a[0] if c else b[0], a[1] if c else b[1], a[2] if c else b[2], a[3] if c else b[3])


@njit(**_LANE)
def _shepperd(r00, r01, r02, r10, r11, r12, r20, r21, r22):
    """:func:`skeletal.quat.quat_from_rotation` with one square root: the case the scalar code takes (the
    trace, or the largest diagonal entry) selected first, then its formula's operations. Case 0 (trace > 0):
    s = 0.5 / sqrt(tr + 1), (n * s, 0.25 / s); cases 1-3: s = 2 sqrt(max(1 + r_ii - r_jj - r_kk, 1e-300)),
    0.25 s in slot i and the other three n / s."""
    tr = r00 + r11 + r22
    c0 = tr > 0.0
    c1 = (not c0) & (r00 > r11) & (r00 > r22)
    c2 = (not c0) & (not c1) & (r11 > r22)
    arg = (1.0 + r00 - r11 - r22) if c1 else ((1.0 + r11 - r00 - r22) if c2 else (1.0 + r22 - r00 - r11))
    sq = np.sqrt((tr + 1.0) if c0 else max(arg, 1e-300))
    # case 0
    s0 = 0.5 / sq
    x0, y0, z0, w0 = (r21 - r12) * s0, (r02 - r20) * s0, (r10 - r01) * s0, 0.25 / s0
    # cases 1-3: the three numerators in slot order, the diagonal's slot left out; w's always last
    s = 2.0 * sq
    na = (r02 + r20) if (not c1) & (not c2) else (r01 + r10)
    nb = (r02 + r20) if c1 else (r12 + r21)
    nc = (r21 - r12) if c1 else ((r02 - r20) if c2 else (r10 - r01))
    da, db, dc = na / s, nb / s, nc / s
    big = 0.25 * s
    x = big if c1 else da
    y = da if c1 else (big if c2 else db)
    z = big if (not c1) & (not c2) else db
    return _qnormalize(((x0 if c0 else x), (y0 if c0 else y), (z0 if c0 else z), (w0 if c0 else dc)))


@njit(**_LANE)
def _matrix_rotation(li, k, i):
    """:func:`skeletal.anim.vec._matrix_rotation` of the columns at rows ``k`` (divided by their lengths)."""
    c0, c1, c2 = _get3(li, k, i), _get3(li, k + 3, i), _get3(li, k + 6, i)
    l0, l1, l2 = _len(c0), _len(c1), _len(c2)
    q = _shepperd(c0[0] / l0, c1[0] / l1, c2[0] / l2, c0[1] / l0, c1[1] / l1, c2[1] / l2,
                  c0[2] / l0, c1[2] / l1, c2[2] / l2)
    degenerate = (l0 < 1e-300) | (l1 < 1e-300) | (l2 < 1e-300)
    return _sel4(degenerate, (0.0, 0.0, 0.0, 1.0), q)


@njit(**_LANE)
def _quat_from_world(li, k, i):
    """:func:`skeletal.quat.quat_from_world` of the columns at rows ``k`` (times their inverse lengths)."""
    c0, c1, c2 = _get3(li, k, i), _get3(li, k + 3, i), _get3(li, k + 6, i)
    l0 = np.sqrt(c0[0] ** 2 + c0[1] ** 2 + c0[2] ** 2)
    l1 = np.sqrt(c1[0] ** 2 + c1[1] ** 2 + c1[2] ** 2)
    l2 = np.sqrt(c2[0] ** 2 + c2[1] ** 2 + c2[2] ** 2)
    k0 = 1.0 / l0 if l0 > 1e-300 else 0.0
    k1 = 1.0 / l1 if l1 > 1e-300 else 0.0
    k2 = 1.0 / l2 if l2 > 1e-300 else 0.0
    return _shepperd(c0[0] * k0, c1[0] * k1, c2[0] * k2, c0[1] * k0, c1[1] * k1, c2[1] * k2,
                     c0[2] * k0, c1[2] * k1, c2[2] * k2)


@njit(**_LANE)
def _foot_turn(li, i, cos_half_tilt):
    """The foot's model-space rotation (``(rotation, ok)``): its animated one turned from up toward the
    ground normal by its contact weight (:func:`skeletal.quat.quat_from_to`, then
    :func:`skeletal.quat.nlerp_identity`), as :func:`foot_rotation` computes it; ``ok`` False where
    the scalar code takes another branch (opposite directions, a turn that may exceed the tilt limit)."""
    ax, ay, az = _get3(li, I_UP, i)
    bx, by, bz = _get3(li, I_N, i)
    la = np.sqrt(ax * ax + ay * ay + az * az)
    lb = np.sqrt(bx * bx + by * by + bz * bz)
    zero = (la < 1e-12) | (lb < 1e-12)
    ax, ay, az = ax / la, ay / la, az / la
    bx, by, bz = bx / lb, by / lb, bz / lb
    d = ax * bx + ay * by + az * bz
    ok = zero | (not d < -0.999999)
    t = _qnormalize((ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx, 1.0 + d))
    t = _sel4(zero, (0.0, 0.0, 0.0, 1.0), t)
    ok = ok & (not abs(t[3]) < cos_half_tilt)
    u = li[_r(I_U) + i]
    neg = t[3] < 0.0
    t = _sel4(neg, (-t[0], -t[1], -t[2], -t[3]), t)
    t = _qnormalize((t[0] * u, t[1] * u, t[2] * u, 1.0 - u + t[3] * u))
    return _qnormalize(_qmul(t, _quat_from_world(li, I_FOOT, i))), ok


@njit(**_LANE)
def _leg_lane(li, lo, i, is_soft, cos_half_tilt):
    """One lane of :func:`leg_lanes` (inlined into its loop)."""
    pa, pb, pc = _get3(li, I_PA, i), _get3(li, I_PB, i), _get3(li, I_PC, i)
    u = _sub(pb, pa)
    v = _sub(pc, pb)
    l1 = _len(u)
    l2 = _len(v)
    t = _get3(li, I_T, i)
    d = _sub(t, pa)
    dist = _len(d)
    bad = (l1 < EPS) | (l2 < EPS) | (not dist > EPS) | (not _finite(l1 + l2 + dist))
    k = 1.0 / dist
    direction = (d[0] * k, d[1] * k, d[2] * k)
    reach = li[_r(I_REACH) + i] if is_soft else min(dist, l1 + l2)
    reach = max(reach, abs(l1 - l2))
    # the pole (knee_pole): away from the thigh-foot midpoint; a straight leg toward +Z
    length = li[_r(I_LEN) + i]
    ox = pb[0] - 0.5 * (pa[0] + pc[0])
    oy = pb[1] - 0.5 * (pa[1] + pc[1])
    oz = pb[2] - 0.5 * (pa[2] + pc[2])
    on = np.sqrt(ox * ox + oy * oy + oz * oz)
    straight = on < 1e-4 * length
    ox, oy, oz, on = (0.0 if straight else ox), (0.0 if straight else oy), (1.0 if straight else oz), (
        1.0 if straight else on)
    k = length / on
    pole = (pb[0] + ox * k, pb[1] + oy * k, pb[2] + oz * k)
    bad = bad | (not (_finite(pole[0]) & _finite(pole[1]) & _finite(pole[2])))
    # bend axis: the bend plane's normal, or (a straight leg) the normal of the thigh and the pole
    h = _cross(u, v)
    pp = _sub(pole, pa)
    flat = _len(h) < 1e-7 * l1 * l2
    hp = _cross(u, pp)
    bad = bad | (flat & (_len(hp) < 1e-7 * l1 * max(_len(pp), 1.0)))
    h = (hp[0] if flat else h[0], hp[1] if flat else h[1], hp[2] if flat else h[2])
    lh = _len(h)
    k = 1.0 / lh
    h = (h[0] * k, h[1] * k, h[2] * k)
    # |u + R(h, phi) v| = reach:  A cos(phi) + B sin(phi) = K - C  (Rodrigues)
    uh = _dot(u, h)
    vh = _dot(v, h)
    ca = _dot(u, v) - uh * vh
    cb = _dot(u, _cross(h, v))
    cc = uh * vh
    kk = 0.5 * (reach * reach - l1 * l1 - l2 * l2)
    r = np.sqrt(ca * ca + cb * cb)
    bend = (lh > EPS) & (r > EPS * l1 * l2)
    inv_r = 1.0 / r
    x = min(max((kk - cc) * inv_r, -1.0), 1.0)
    y = np.sqrt(1.0 - x * x)
    # the bend as a half-angle turn (_half_turn; its near-half-turn formula left to the scalar solver)
    cos_a = (ca * x - cb * y) * inv_r
    sin_a = (cb * x + ca * y) * inv_r
    c = min(max(cos_a, -1.0), 1.0)
    hw = np.sqrt(0.5 * (1.0 + c))
    bad = bad | (bend & (not hw > 1e-4))
    hs = 0.5 * sin_a / hw
    rh = ((h[0] * hs if bend else 0.0), (h[1] * hs if bend else 0.0), (h[2] * hs if bend else 0.0),
          (hw if bend else 1.0))
    # the root's turn putting the end on the thigh-target line (_arc_to_unit)
    e2 = _qrot(rh, v)
    e2 = (u[0] + e2[0], u[1] + e2[1], u[2] + e2[2])
    lu = _len(e2)
    wq = lu + _dot(e2, direction)
    some = not lu < EPS
    bad = bad | (some & (wq < 1e-12 * lu))
    xq = _cross(e2, direction)
    kq = 1.0 / np.sqrt(2.0 * lu * wq)
    q = ((xq[0] * kq if some else 0.0), (xq[1] * kq if some else 0.0), (xq[2] * kq if some else 0.0),
         (wq * kq if some else 1.0))
    # then about that line, the knee onto the pole's side
    m = _qrot(q, u)
    dm = _dot(direction, m)
    m = (m[0] - direction[0] * dm, m[1] - direction[1] * dm, m[2] - direction[2] * dm)
    dp = _dot(direction, pp)
    p = (pp[0] - direction[0] * dp, pp[1] - direction[1] * dp, pp[2] - direction[2] * dp)
    turn = (_dot(m, m) > 1e-14 * l1 * l1) & (_dot(p, p) > EPS * EPS)
    cos_r = _dot(m, p)
    sin_r = _dot(direction, _cross(m, p))
    rr = np.sqrt(cos_r * cos_r + sin_r * sin_r)
    wr = rr + cos_r
    bad = bad | (turn & (not wr > 1e-12 * rr))
    kr = 1.0 / np.sqrt(2.0 * rr * wr)
    qt = _qmul((direction[0] * sin_r * kr, direction[1] * sin_r * kr, direction[2] * sin_r * kr, wr * kr), q)
    q = _sel4(turn, qt, q)
    # the foot's end rotation, then the model-space turns as local rotations (_local_turn)
    rc, ok = _foot_turn(li, i, cos_half_tilt)
    bad = bad | (not ok) | (not (_finite(rc[0]) & _finite(rc[1]) & _finite(rc[2]) & _finite(rc[3])))
    qpc = _matrix_rotation(li, I_FC, i)
    qpc = _qmul(q, _qmul(rh, qpc))
    nc = _qmul((-qpc[0], -qpc[1], -qpc[2], qpc[3]), _qnormalize(rc))
    axis = _into_frame(li, I_FA, (q[0], q[1], q[2]), i)
    na = _qmul((axis[0], axis[1], axis[2], q[3]), _get4(li, I_QLA, i))
    axis = _into_frame(li, I_FB, (rh[0], rh[1], rh[2]), i)
    nb = _qmul((axis[0], axis[1], axis[2], rh[3]), _get4(li, I_QLB, i))
    _put4(lo, O_NA, i, na)
    _put4(lo, O_NB, i, nb)
    _put4(lo, O_NC, i, nc)
    _put4(lo, O_UA, i, _qnormalize(na))
    _put4(lo, O_UB, i, _qnormalize(nb))
    _put4(lo, O_UC, i, _qnormalize(nc))
    lo[_r(O_BAD) + i] = 1.0 if bad else 0.0


@njit(cache=True, forceinline=True)
def lane_count(n):
    """Lanes :func:`leg_lanes` runs for ``n`` legs: whole vectors of 8 (at most :data:`LW`), so that a few
    legs (one character's) take one SIMD pass instead of the loop's scalar tail, one lane at a time. The
    lanes past ``n`` hold what earlier blocks (or zeros) left: finite or not, their outputs are not read,
    and a lane's arithmetic never reads another's.

    >>> lane_count(2), lane_count(10)
    (8, 16)
    """
    return min((n + 7) // 8 * 8, LW)


@njit(cache=True, error_model="numpy")
def leg_lanes(li, lo, n, is_soft, cos_half_tilt):
    """Two-bone IK of the legs in lanes ``0 .. n - 1`` (``n`` uint64) of ``li`` into ``lo`` (see the
    module docstring): one loop without branches; ``is_soft``: the reach is ``li[I_REACH]``;
    ``cos_half_tilt``: a foot turn whose w is under it is left to the scalar code (its angle may
    exceed the tilt limit, see :func:`foot_rotation`)."""
    for i in range(n):
        _leg_lane(li, lo, i, is_soft, cos_half_tilt)


@njit(cache=True, forceinline=True)
def foot_rotation(up, normal, u, foot_world, cos_half_tilt, max_tilt):
    """The foot's model-space rotation for the IK's end: its animated one (``foot_world`` (>=3, 4), its
    world rows) turned from ``up`` toward the ground ``normal`` (model space, 3-tuples) by the contact
    weight ``u``, the turn limited to ``max_tilt`` radians (``cos_half_tilt``: cos(max_tilt / 2),
    widened by a few ulps, below which the turn's angle is computed)."""
    ax, ay, az, aw = quat_from_to(up[0], up[1], up[2], normal[0], normal[1], normal[2])
    if abs(aw) < cos_half_tilt:  # the turn's angle 2 acos|w| may exceed max_tilt: acos only then
        angle = 2.0 * math.acos(min(abs(aw), 1.0))
        if angle > max_tilt:
            u *= max_tilt / angle
    ax, ay, az, aw = nlerp_identity(ax, ay, az, aw, u)
    qx, qy, qz, qw = quat_from_world(foot_world)
    ex, ey, ez, ew = qmul(ax, ay, az, aw, qx, qy, qz, qw)
    return qnormalize(ex, ey, ez, ew)


@njit(cache=True, forceinline=True)
def _put_columns(li, k, lane, world_b, j):
    """The columns of ``world_b[j]``'s rotation-scale block into rows ``k .. k + 8`` of ``lane``."""
    for col in range(3):
        for row in range(3):
            li[_r(k + 3 * col + row) + lane] = world_b[j, row, col]


@njit(cache=True, forceinline=True)
def _moved_position(world_b, j, move):
    """Joint ``j``'s position (its world row's translation) plus ``move`` (see :func:`gather_leg`)."""
    if move is None:
        return world_b[j, 0, 3], world_b[j, 1, 3], world_b[j, 2, 3]
    return world_b[j, 0, 3] + move[0], world_b[j, 1, 3] + move[1], world_b[j, 2, 3] + move[2]


@njit(cache=True, forceinline=True)
def gather_leg(li, lane, pose_b, world_b, parents, a, b, c, target, up, normal, u, length, soft, move):
    """One leg's inputs into ``lane`` of ``li``: joints ``a`` (thigh), ``b`` (knee), ``c`` (foot) of one
    pose (``pose_b`` (N, 10), its world rows ``world_b`` (N, 4, 4)), the model-space ``target``, world
    ``up`` and ground ``normal`` (3-tuples), the foot's contact weight ``u``, the leg's ``length`` (its
    pole's distance) and the two-bone ``soft`` band. ``move``: None, or the model-space vector (3-tuple)
    that the rows' translations have not been moved by yet (the pelvis' move; the joints' positions are
    gathered moved, as :func:`~skeletal.playback.footplacement.foot_kernel`'s phases 0-2 move the rows)."""
    ul = np.uint64(lane)
    pa, pb, pc = _moved_position(world_b, a, move), _moved_position(world_b, b, move), _moved_position(world_b, c, move)
    for k in range(3):
        li[_r(I_PA + k) + ul] = pa[k]
        li[_r(I_PB + k) + ul] = pb[k]
        li[_r(I_PC + k) + ul] = pc[k]
        li[_r(I_T + k) + ul] = target[k]
        li[_r(I_UP + k) + ul] = up[k]
        li[_r(I_N + k) + ul] = normal[k]
    for k in range(4):
        li[_r(I_QLA + k) + ul] = pose_b[a, 3 + k]
        li[_r(I_QLB + k) + ul] = pose_b[b, 3 + k]
        li[_r(I_QLC + k) + ul] = pose_b[c, 3 + k]
    li[_r(I_U) + ul] = u
    li[_r(I_LEN) + ul] = length
    if soft > 0.0:
        li[_r(I_REACH) + ul] = soft_distance(_len(_sub(target, pa)), _len(_sub(pb, pa)) + _len(_sub(pc, pb)), soft)
    pa_, pb_, pc_ = parents[a], parents[b], parents[c]
    if pa_ >= 0:
        _put_columns(li, I_FA, ul, world_b, pa_)
    else:  # a root thigh: the model frame
        for k in range(9):
            li[_r(I_FA + k) + ul] = 1.0 if k % 4 == 0 else 0.0
    _put_columns(li, I_FB, ul, world_b, pb_)
    _put_columns(li, I_FC, ul, world_b, pc_)
    _put_columns(li, I_FOOT, ul, world_b, c)


@njit(cache=True, forceinline=True)
def target_and_normal(targets, normals, b, l, M):
    """Leg ``l`` of instance ``b``: its foot target and the ground normal under it, from world to model
    space through the placement ``M`` (4, 4): two 3-tuples (the normal turns the foot in the lanes)."""
    px = targets[b, l, 0] - M[0, 3]
    py = targets[b, l, 1] - M[1, 3]
    pz = targets[b, l, 2] - M[2, 3]
    nwx, nwy, nwz = normals[b, l, 0], normals[b, l, 1], normals[b, l, 2]
    return ((M[0, 0] * px + M[1, 0] * py + M[2, 0] * pz, M[0, 1] * px + M[1, 1] * py + M[2, 1] * pz,
             M[0, 2] * px + M[1, 2] * py + M[2, 2] * pz),
            (M[0, 0] * nwx + M[1, 0] * nwy + M[2, 0] * nwz, M[0, 1] * nwx + M[1, 1] * nwy + M[2, 1] * nwz,
             M[0, 2] * nwx + M[1, 2] * nwy + M[2, 2] * nwz))


@njit(cache=True, forceinline=True)
def gather_legs(b, job, pose_b, world_b, M, upx, upy, upz, li, lane0, move):
    """The two-bone IK inputs of every leg of instance ``b`` of :func:`~skeletal.playback.footplacement.foot_kernel`'s job into lanes
    ``lane0 ..`` of ``li`` (:func:`gather_leg`): its target and the ground normal under it in
    model space, world up (model space) and its contact weight; ``move``: see :func:`gather_leg`. Inlined into the kernel (views of the
    job's fields taken here hold no references: see :func:`.jobs.field`)."""
    parents, legs = field(job, "parents"), field(job, "legs")
    targets, normals, contact, leg_len = field(job, "targets"), field(job, "normals"), field(job, "contact"), field(job, "leg_len")
    soft = field(job, "scalars")[4]
    for l in range(legs.shape[1]):
        target, normal = target_and_normal(targets, normals, b, l, M)
        gather_leg(li, lane0 + l, pose_b, world_b, parents, legs[0, l], legs[1, l], legs[2, l], target,
                   (upx, upy, upz), normal, contact[b, l], leg_len[l], soft, move)


@njit(cache=True, forceinline=True)
def _write(pose_b, j, lo, raw, unit, lane, q_old, weight):
    """:func:`skeletal.anim.vec._write_rotation` from a lane's rotation: the normalised one at full weight,
    else the slerp from ``q_old``; not written where not finite."""
    if weight < 1.0:
        q = _qnorm(_slerp(q_old, _get4(lo, raw, lane), weight))
    else:
        q = _get4(lo, unit, lane)
    if np.isfinite(q[0]) and np.isfinite(q[1]) and np.isfinite(q[2]) and np.isfinite(q[3]):
        pose_b[j, 3], pose_b[j, 4], pose_b[j, 5], pose_b[j, 6] = q[0], q[1], q[2], q[3]


@njit(cache=True, forceinline=True)
def any_bad(lo, lane0, count):
    """Whether any of lanes ``lane0 .. lane0 + count`` is marked for the scalar solver (see :func:`write_leg`)."""
    for lane in range(lane0, lane0 + count):
        if lo[_r(O_BAD) + np.uint64(lane)] != 0.0:
            return True
    return False


@njit(cache=True, forceinline=True)
def write_leg(li, lo, lane, pose_b, world_b, parents, a, b, c, weight, soft, cos_half_tilt, max_tilt):
    """The solved leg of ``lane`` into the pose's local rotations (foot, thigh, knee, as
    :func:`~skeletal.anim.ik_solvers.two_bone_one` writes them); a lane marked bad is solved by it
    (the foot's rotation by :func:`foot_rotation`)."""
    ul = np.uint64(lane)
    if lo[_r(O_BAD) + ul] != 0.0:
        pole = knee_pole(world_b, a, b, c, li[_r(I_LEN) + ul])
        rc = foot_rotation(_get3(li, I_UP, ul), _get3(li, I_N, ul), li[_r(I_U) + ul], world_b[c], cos_half_tilt,
                           max_tilt)
        two_bone_one(pose_b, world_b, parents, a, b, c, _get3(li, I_T, ul), pole, weight, soft,
                     (np.nan, np.nan, np.nan), rc)
        return
    _write(pose_b, c, lo, O_NC, O_UC, ul, _get4(li, I_QLC, ul), weight)
    _write(pose_b, a, lo, O_NA, O_UA, ul, _get4(li, I_QLA, ul), weight)
    _write(pose_b, b, lo, O_NB, O_UB, ul, _get4(li, I_QLB, ul), weight)
