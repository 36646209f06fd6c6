"""A biped's two legs gathered into foot placement's lanes as pairs (:func:`gather_two_legs`).

The two legs of a character sit in neighbouring lanes of :mod:`.footlanes`' input rows (lanes
``2k`` and ``2k + 1``), so each of the 69 input fields of both legs goes in with one 16-byte store
(:func:`_put2`) instead of two 8-byte ones. The same values as :func:`.footlanes.gather_legs` (the same
loads and the same arithmetic, in the same order): the lanes' inputs are bit-identical, and so is
everything the lanes compute from them. Measured on Soldier (1 thread, a copy of the range A/B in one
process): the gather 0.055-0.058 -> 0.042-0.044 us a character.

>>> gather_two_legs(b, job, pose_b, world_b, M, upx, upy, upz, li, 2 * k, None)   # doctest: +SKIP
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from .footlanes import (I_FA, I_FB, I_FC, I_FOOT, I_LEN, I_N, I_PA, I_PB, I_PC, I_QLA, I_QLB, I_QLC, I_REACH, I_T,
                        I_U, I_UP, _moved_position, _r, target_and_normal)
from ..anim.ik_solvers import soft_distance
from ..anim.vec import _len, _sub
from .jobs import field


@intrinsic
def _put2(typingctx, rows, at, first, second):
    """``rows[at], rows[at + 1] = first, second`` as one 16-byte store (``rows`` float64, C-contiguous;
    not bounds-checked)."""
    if not (isinstance(rows, types.Array) and rows.dtype == types.float64 and rows.layout == "C"
            and isinstance(at, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        pair = ir.VectorType(ir.DoubleType(), 2)
        value = builder.insert_element(ir.Constant(pair, ir.Undefined), args[2], ir.Constant(ir.IntType(32), 0))
        value = builder.insert_element(value, args[3], ir.Constant(ir.IntType(32), 1))
        at = context.cast(builder, args[1], signature.args[1], types.uint64)
        builder.store(value, builder.bitcast(builder.gep(data, [at]), pair.as_pointer()), align=8)
        return context.get_dummy_value()

    return types.void(rows, at, types.float64, types.float64), codegen


@njit(cache=True, forceinline=True)
def _columns2(li, k, lane, world_b, j0, j1):
    """Rows ``k .. k + 8`` of lanes ``lane``, ``lane + 1``: the columns of the rotation-scale blocks of
    ``world_b[j0]`` and ``world_b[j1]`` (a negative ``j``: a root thigh, the model frame)."""
    for col in range(3):
        for row in range(3):
            v0 = world_b[j0, row, col] if j0 >= 0 else (1.0 if row == col else 0.0)
            v1 = world_b[j1, row, col] if j1 >= 0 else (1.0 if row == col else 0.0)
            _put2(li, _r(k + 3 * col + row) + lane, v0, v1)


@njit(cache=True, forceinline=True)
def _soft_reach(world_b, a, b, c, target, move, soft):
    """The soft two-bone reach of one leg (:func:`.footlanes.gather_leg`'s ``I_REACH``)."""
    pa, pb, pc = _moved_position(world_b, a, move), _moved_position(world_b, b, move), _moved_position(world_b, c, move)
    return soft_distance(_len(_sub(target, pa)), _len(_sub(pb, pa)) + _len(_sub(pc, pb)), soft)


@njit(cache=True, forceinline=True)
def gather_two_legs(b, job, pose_b, world_b, M, upx, upy, upz, li, lane0, move):
    """:func:`.footlanes.gather_legs` for a job of two legs, into lanes ``lane0`` (even) and ``lane0 + 1``:
    instance ``b``'s pose rows ``pose_b``, world rows ``world_b``, placement ``M``, world up in model
    space, ``move`` None or the model-space 3-tuple its joints' positions are gathered moved by."""
    parents, legs = field(job, "parents"), field(job, "legs")
    targets, normals, contact, leg_len = field(job, "targets"), field(job, "normals"), field(job, "contact"), field(job, "leg_len")
    soft = field(job, "scalars")[4]
    lane = np.uint64(lane0)
    t0, n0 = target_and_normal(targets, normals, b, 0, M)
    t1, n1 = target_and_normal(targets, normals, b, 1, M)
    joints = ((legs[0, 0], legs[0, 1], I_PA), (legs[1, 0], legs[1, 1], I_PB), (legs[2, 0], legs[2, 1], I_PC))
    for j0, j1, row in joints:
        p0, p1 = _moved_position(world_b, j0, move), _moved_position(world_b, j1, move)
        for k in range(3):
            _put2(li, _r(row + k) + lane, p0[k], p1[k])
    for k in range(3):
        _put2(li, _r(I_T + k) + lane, t0[k], t1[k])
        _put2(li, _r(I_N + k) + lane, n0[k], n1[k])
    _put2(li, _r(I_UP) + lane, upx, upx)
    _put2(li, _r(I_UP + 1) + lane, upy, upy)
    _put2(li, _r(I_UP + 2) + lane, upz, upz)
    for j0, j1, row in ((legs[0, 0], legs[0, 1], I_QLA), (legs[1, 0], legs[1, 1], I_QLB), (legs[2, 0], legs[2, 1], I_QLC)):
        for k in range(4):
            _put2(li, _r(row + k) + lane, pose_b[j0, 3 + k], pose_b[j1, 3 + k])
    _put2(li, _r(I_U) + lane, contact[b, 0], contact[b, 1])
    _put2(li, _r(I_LEN) + lane, leg_len[0], leg_len[1])
    if soft > 0.0:
        _put2(li, _r(I_REACH) + lane, _soft_reach(world_b, legs[0, 0], legs[1, 0], legs[2, 0], t0, move, soft),
              _soft_reach(world_b, legs[0, 1], legs[1, 1], legs[2, 1], t1, move, soft))
    _columns2(li, I_FA, lane, world_b, parents[legs[0, 0]], parents[legs[0, 1]])
    _columns2(li, I_FB, lane, world_b, parents[legs[1, 0]], parents[legs[1, 1]])
    _columns2(li, I_FC, lane, world_b, parents[legs[2, 0]], parents[legs[2, 1]])
    _columns2(li, I_FOOT, lane, world_b, legs[2, 0], legs[2, 1])


__all__ = ["gather_two_legs"]
