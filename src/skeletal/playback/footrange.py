"""The body of foot placement's compiled stage, one range of characters at a time (:func:`foot_range`,
which :func:`skeletal.playback.footplacement.foot_kernel` calls once a range, in parallel or as its
serial twin): contact weights (:func:`.footcontact._contact_one`), the rows that place the pelvis,
planted-foot locks, the ground under the foot targets, the pelvis spring, the legs' IK in SIMD lanes
(:mod:`.footlanes`), the legs' rows or (phase 3) every world row and palette entry.

Frames: the pose stays model space, grounds and foot targets are world coordinates through the
driver's ``placement`` (B, 4, 4); quaternions xyzw; matrices row-major acting on column vectors.
"""

from __future__ import annotations

import math

import numpy as np
from numba import get_thread_id, njit

from ..anim.pose import _joint_times_bind, palettes_one, world_node_into, world_subset_staged
from . import kernels as K
from .footcontact import _contact_one
from .footpairs import gather_two_legs
from .footlanes import (LW, any_bad, block_waves, borrowed, gather_legs, keep_alive, lane_count, leg_lanes,
                        range_scratch, write_leg)
from .ground import GROUND_TERRAIN, ground_at, queried_at, sincos_lanes, terrain_sum
from .jobs import borrow, field
from .procstage import _all_rows, _moved_rows

#: A contact weight at or above this counts as planted (the foot's world position locks).
PLANTED = 0.999


@njit(cache=True)
def foot_range(job, phase, c, chunks, update):
    """Range ``c`` of ``chunks`` of :func:`~skeletal.playback.footplacement.foot_kernel` (its arguments
    and their contract: see there): the characters of one thread's part, in blocks. A plain compiled
    function that the kernel's parallel loop calls once a range (the job's two reference counts the
    only atomic operations), and its serial twin too: the body compiled inside the parallel region's
    outlined function ran 0.07-0.09 us a character slower on one thread than the same code here.
    ``phase``, ``c`` and ``chunks`` int64 (one compile for both callers).

    >>> foot_range(job, np.int64(3), np.int64(0), np.int64(1), None)    # doctest: +SKIP
    """
    # fields read without taking references (see :func:`.jobs.field`): views of them take none either
    pose, world, parents = field(job, "pose"), field(job, "world"), field(job, "parents")
    placement, legs, pelvis = field(job, "placement"), field(job, "legs"), field(job, "pelvis")
    pelvis_nodes, leg_nodes, leg_start = field(job, "pelvis_nodes"), field(job, "leg_nodes"), field(job, "leg_start")
    g_kind = field(job, "g_kind")
    g_params, g_grid, heights = field(job, "g_params"), field(job, "g_grid"), field(job, "heights")
    queried = field(job, "queried")
    normals, contact, ankle = field(job, "normals"), field(job, "contact"), field(job, "ankle")
    leg_len, scalars, weight = field(job, "leg_len"), field(job, "scalars"), field(job, "weight")
    state, initialised, plant = field(job, "state"), field(job, "initialised"), field(job, "plant")
    locked, lock, targets = field(job, "locked"), field(job, "lock"), field(job, "targets")
    pelvis_offset, pal, pal_joints = field(job, "pelvis_offset"), field(job, "pal"), field(job, "pal_joints")
    inv_bind, pal_idx, pal_start = field(job, "inv_bind"), field(job, "pal_idx"), field(job, "pal_start")
    probe_nodes, world_nodes = field(job, "probe_nodes"), field(job, "world_nodes")
    before_world = phase == 3  # the update left the world rows and palettes to this stage
    probe_split = 0  # the pelvis' place in probe_nodes (its ancestors before it, its subtree's rows after)
    while probe_split < probe_nodes.shape[0] - 1 and probe_nodes[probe_split] != pelvis:
        probe_split += 1
    n_legs = legs.shape[1]
    floor, reach, omega, dt, max_tilt = scalars[0], scalars[1], scalars[2], scalars[3], scalars[5]
    decay = math.exp(-omega * dt)  # the pelvis spring's decay over dt: the same for every instance
    # |w| >= cos(max_tilt / 2) means 2 acos|w| <= max_tilt (acos decreases); the bound is widened by a
    # few ulps so that rounding never skips a turn that the exact comparison would limit
    cos_half_tilt = math.cos(0.5 * max_tilt) * (1.0 + 1e-12)
    # a terrain's W waves at every leg's point of a block's characters: the W * L arguments of each, then
    # the block's sines and cosines in SIMD lanes (:func:`.ground.sincos_lanes`), summed per leg
    # (:func:`.ground.terrain_sum`)
    n_waves = int(g_params[1]) if g_kind == GROUND_TERRAIN else 0
    terrain_lanes = g_kind == GROUND_TERRAIN and (phase == 0 or before_world)
    soft = scalars[4]
    per_block = max(LW // n_legs, 1)  # characters whose legs fill a block of lanes (footlanes.LW)
    n_block_waves = block_waves(n_legs, n_waves, per_block)
    # scratch of this range of instances (its thread's part of the job's, no allocation per call): a
    # block's terrain wave arguments, sines and cosines, its legs' IK inputs and outputs, its characters
    # whose legs are in the lanes
    tid = get_thread_id()
    wave_args, wave_sins, wave_coss, li_own, lo_own, solve = range_scratch(job, n_block_waves, per_block, tid)
    li, lo = borrowed(li_own), borrowed(lo_own)  # passed to inlined calls without reference counts
    # the characters OpenMP's static split of the update's prange gives this range's thread (chunks is
    # the thread count): equal ranges to the character, so neither thread waits on the other's extra
    # block, and each character's pose is in the cache of the core whose update wrote it. A range's last
    # block may be a part block (one lane pass for fewer legs).
    n = pose.shape[0]
    stop = (c + 1) * n // chunks
    for b0 in range(c * n // chunks, stop, per_block):
        b1 = min(b0 + per_block, stop)
        if update is not None:  # FootFrame: the block's update (clocks, blend) first, on this thread
            for b in range(b0, b1):
                K.clock_and_blend(b, tid, borrow(update[0]), update[1], K.ADVANCE | K.BLEND)
        # each character's contact weights, world rows and foot targets' world (x, z), then the ground
        # under them (a terrain: the whole block's waves at once), then each one's pelvis and legs
        fresh_points = 0  # a terrain's legs queried anew in this block (the others' point is unchanged)
        for b in range(b0, b1):
            # this character's rows of the job's (B, ...) fields, as views made once (views of job fields hold no
            # reference: jobs.field); rows and matrices below are indexed, not sliced (one index less each)
            targets_b, queried_b, contact_b, locked_b, lock_b = targets[b], queried[b], contact[b], locked[b], lock[b]
            M, pose_b, world_b = placement[b], pose[b], world[b]
            if phase != 2:
                _contact_one(b, job)
                if before_world:  # the world rows that place the pelvis
                    for k in range(probe_nodes.shape[0]):
                        world_node_into(probe_nodes[k], parents, pose_b, world_b)
                elif scalars[6] == 0.0:  # the world rows are not current yet
                    _all_rows(parents, pose_b, world_b)
                for l in range(n_legs):
                    fj = legs[2, l]
                    fx = (M[0, 0] * world_b[fj, 0, 3]
                          + M[0, 1] * world_b[fj, 1, 3] + M[0, 2] * world_b[fj, 2, 3] + M[0, 3])
                    fz = (M[2, 0] * world_b[fj, 0, 3]
                          + M[2, 1] * world_b[fj, 1, 3] + M[2, 2] * world_b[fj, 2, 3] + M[2, 3])
                    if plant:
                        u = contact_b[l]
                        if u >= PLANTED:
                            if not locked_b[l]:  # touchdown: the foot stays where it landed
                                locked_b[l] = True
                                lock_b[l, 0], lock_b[l, 1] = fx, fz
                            fx, fz = lock_b[l, 0], lock_b[l, 1]
                        elif locked_b[l]:
                            if u > 0.0:  # lifting off: from the lock back to the animated position
                                fx += (lock_b[l, 0] - fx) * u
                                fz += (lock_b[l, 1] - fz) * u
                            else:
                                locked_b[l] = False
                    targets_b[l, 0], targets_b[l, 2] = fx, fz
            if terrain_lanes:
                for l in range(n_legs):
                    x, z = targets_b[l, 0], targets_b[l, 2]
                    if queried_at(queried_b, l, x, z):
                        continue  # heights / normals hold this point's query (a planted foot's lock: ~40%)
                    at = fresh_points * n_waves
                    fresh_points += 1
                    for i in range(n_waves):
                        wave_args[at + i] = (x * g_params[2 + i] + z * g_params[2 + n_waves + i]
                                             + g_params[2 + 2 * n_waves + i])
        if phase == 1:
            continue
        if terrain_lanes and fresh_points > 0:
            sincos_lanes(wave_args, wave_sins, wave_coss, (fresh_points * n_waves + 7) // 8 * 8)
        fresh_points = 0  # counted again below, in the same order
        solving = False
        # each character's ground, foot targets' heights and pelvis offset: a short chain of divisions and
        # square roots a character, run for the whole block in one loop so that the characters' chains
        # overlap (with the world rows' work between them, each waited on its own)
        for b in range(b0, b1):
            targets_b, queried_b, contact_b = targets[b], queried[b], contact[b]
            heights_b, normals_b, state_b = heights[b], normals[b], state[b]
            M = placement[b]
            world_b = world[b]
            floor_w = M[1, 3] + floor * M[1, 1]
            goal = np.inf
            for l in range(n_legs):
                if phase == 0 or before_world:
                    x, z = targets_b[l, 0], targets_b[l, 2]
                    if terrain_lanes:  # the same bits as ground_at's, from the lanes' sines and cosines
                        if not queried_at(queried_b, l, x, z):  # (the first pass's test: the same legs)
                            h, nx, ny, nz = terrain_sum(g_params, wave_sins, wave_coss, fresh_points * n_waves)
                            fresh_points += 1
                            heights_b[l] = h
                            normals_b[l, 0], normals_b[l, 1], normals_b[l, 2] = nx, ny, nz
                            queried_b[l, 0], queried_b[l, 1] = x, z
                    else:
                        h, nx, ny, nz = ground_at(g_kind, g_params, g_grid, x, z)
                        heights_b[l] = h
                        normals_b[l, 0], normals_b[l, 1], normals_b[l, 2] = nx, ny, nz
                        queried_b[l, 0], queried_b[l, 1] = x, z
                fj = legs[2, l]
                fy = M[1, 0] * world_b[fj, 0, 3] + M[1, 1] * world_b[fj, 1, 3] + M[1, 2] * world_b[fj, 2, 3] + M[1, 3]
                ny = max(normals_b[l, 1], 0.2)
                lift = heights_b[l] - floor_w + ankle[l] * (1.0 / ny - 1.0) * contact_b[l]
                targets_b[l, 1] = fy + lift
                goal = min(goal, lift)
            # lower the pelvis further where a leg could not reach its target
            hard = np.inf
            for l in range(n_legs):
                hj, fj = legs[0, l], legs[2, l]
                h0, h1, h2 = world_b[hj, 0, 3], world_b[hj, 1, 3], world_b[hj, 2, 3]
                hx = M[0, 0] * h0 + M[0, 1] * h1 + M[0, 2] * h2 + M[0, 3]
                hy = M[1, 0] * h0 + M[1, 1] * h1 + M[1, 2] * h2 + M[1, 3]
                hz = M[2, 0] * h0 + M[2, 1] * h1 + M[2, 2] * h2 + M[2, 3]
                anim = math.sqrt((world_b[fj, 0, 3] - h0) ** 2 + (world_b[fj, 1, 3] - h1) ** 2
                                 + (world_b[fj, 2, 3] - h2) ** 2)
                r = max(anim, reach * leg_len[l])
                dxz2 = (targets_b[l, 0] - hx) ** 2 + (targets_b[l, 2] - hz) ** 2
                d_max = targets_b[l, 1] - hy + math.sqrt(max(r * r - dxz2, 0.0))
                hard = min(hard, d_max)
            goal = min(goal, hard)
            if not initialised[b] or not (dt > 0.0):
                if not initialised[b]:
                    state_b[0] = goal
                    state_b[1] = 0.0
            else:
                d0 = state_b[0] - goal
                j = state_b[1] + omega * d0
                e = decay
                state_b[0] = goal + (d0 + j * dt) * e
                state_b[1] = (state_b[1] - omega * j * dt) * e
            if state_b[0] > hard:
                # never so high that a leg cannot reach: the smoothing only ever lags downward moves' ends
                state_b[0] = hard
                state_b[1] = min(state_b[1], 0.0)
            initialised[b] = True
            pelvis_offset[b] = state_b[0] * weight[b]
        # then each one's pelvis moved, its world rows and palettes, its legs into the lanes
        for b in range(b0, b1):
            M = placement[b]
            pose_b = pose[b]
            world_b = world[b]
            pal_b = pal[b]
            w = weight[b]
            # world -> model: R^T (p - t); world up in model space is R's second row
            upx, upy, upz = M[1, 0], M[1, 1], M[1, 2]
            d = pelvis_offset[b]
            if d != 0.0:
                vx, vy, vz = upx * d, upy * d, upz * d  # the world-vertical move, in model space
                p = parents[pelvis]
                if p >= 0:
                    # solve P3 x = v (P3 the parent's 3x3, scale included) by Cramer's rule
                    a00, a01, a02 = world_b[p, 0, 0], world_b[p, 0, 1], world_b[p, 0, 2]
                    a10, a11, a12 = world_b[p, 1, 0], world_b[p, 1, 1], world_b[p, 1, 2]
                    a20, a21, a22 = world_b[p, 2, 0], world_b[p, 2, 1], world_b[p, 2, 2]
                    det = a00 * (a11 * a22 - a12 * a21) - a01 * (a10 * a22 - a12 * a20) + a02 * (a10 * a21 - a11 * a20)
                    if abs(det) > 1e-300:
                        lx = ((vx * (a11 * a22 - a12 * a21) - a01 * (vy * a22 - a12 * vz)
                              + a02 * (vy * a21 - a11 * vz)) / det)
                        ly = ((a00 * (vy * a22 - a12 * vz) - vx * (a10 * a22 - a12 * a20)
                              + a02 * (a10 * vz - vy * a20)) / det)
                        lz = ((a00 * (a11 * vz - vy * a21) - a01 * (a10 * vz - vy * a20)
                              + vx * (a10 * a21 - a11 * a20)) / det)
                        vx, vy, vz = lx, ly, lz
                pose_b[pelvis, 0] += vx
                pose_b[pelvis, 1] += vy
                pose_b[pelvis, 2] += vz
            if before_world:
                # the probe's rows below the pelvis keep their translations: the legs' joints go into the
                # lanes moved (the same sums as phases 0-2's moved rows), and every row and palette entry
                # is built after the block's IK
                if w > 0.0:
                    lane0 = (b - b0) * n_legs
                    if n_legs == 2:  # a biped: each input field of both legs in one store (footpairs)
                        if d != 0.0:
                            gather_two_legs(b, job, pose_b, world_b, M, upx, upy, upz, li, lane0,
                                            (upx * d, upy * d, upz * d))
                        else:
                            gather_two_legs(b, job, pose_b, world_b, M, upx, upy, upz, li, lane0, None)
                    elif d != 0.0:
                        gather_legs(b, job, pose_b, world_b, M, upx, upy, upz, li, lane0, (upx * d, upy * d, upz * d))
                    else:
                        gather_legs(b, job, pose_b, world_b, M, upx, upy, upz, li, lane0, None)
                    solve[b - b0] = solving = True
                continue
            if d != 0.0:
                # the pelvis' subtree moves by the model-space vector: world rows and palettes translate,
                # but of legs that the IK below rebuilds (w > 0) only the rows it reads (thigh, knee, foot)
                mx, my, mz = upx * d, upy * d, upz * d
                rebuilt = w > 0.0
                for k in range(pelvis_nodes.shape[0]):
                    node = pelvis_nodes[k]
                    world_b[node, 0, 3] += mx
                    world_b[node, 1, 3] += my
                    world_b[node, 2, 3] += mz
                for l in range(n_legs):
                    for k in range(3 if rebuilt else leg_start[l + 1] - leg_start[l]):
                        node = legs[k, l] if rebuilt else leg_nodes[leg_start[l] + k]
                        world_b[node, 0, 3] += mx
                        world_b[node, 1, 3] += my
                        world_b[node, 2, 3] += mz
                if scalars[7] != 0.0:
                    for k in range(pal_start[0], pal_start[1] if rebuilt else pal_start[n_legs + 1]):
                        q = pal_idx[k]
                        pal_b[q, 0, 3] += mx
                        pal_b[q, 1, 3] += my
                        pal_b[q, 2, 3] += mz
            if w > 0.0:
                if n_legs == 2:
                    gather_two_legs(b, job, pose_b, world_b, M, upx, upy, upz, li, (b - b0) * 2, None)
                else:
                    gather_legs(b, job, pose_b, world_b, M, upx, upy, upz, li, (b - b0) * n_legs, None)
                solve[b - b0] = solving = True
        # the block's legs solved in SIMD lanes (footlanes.leg_lanes: whole vectors of 8, the lanes past
        # the block's legs left unread), then each character's new rotations written, its legs' world
        # rows rebuilt and its palette entries written (phase 3: all its rows and entries)
        if solving:
            leg_lanes(li, lo, np.uint64(lane_count((b1 - b0) * n_legs)), soft > 0.0, cos_half_tilt)
        for b in range(b0, b1):
            solved = solve[b - b0]
            if not solved and not before_world:
                continue
            solve[b - b0] = False
            pose_b, world_b, pal_b = pose[b], world[b], pal[b]
            w = weight[b]
            if before_world and solved and pelvis_offset[b] != 0.0 and any_bad(lo, (b - b0) * n_legs, n_legs):
                # a lane the scalar solver redoes reads the world rows: those from the pelvis down moved first
                _moved_rows(parents, probe_nodes, probe_split, probe_nodes.shape[0], pose_b, world_b)
            for l in range(n_legs if solved else 0):
                write_leg(li, lo, (b - b0) * n_legs + l, pose_b, world_b, parents, legs[0, l], legs[1, l],
                          legs[2, l], w, soft, cos_half_tilt, max_tilt)
                if before_world:
                    continue  # (every row below)
                # (_rows and _palette_rows written out: inlined, no call taking references)
                for k in range(leg_start[l], leg_start[l + 1]):
                    world_node_into(leg_nodes[k], parents, pose_b, world_b)
                if scalars[7] != 0.0:
                    for k in range(pal_start[l + 1], pal_start[l + 2]):
                        q = pal_idx[k]  # (palettes_one's product: affine_product_into's arithmetic)
                        _joint_times_bind(pal_b, q, world_b, pal_joints[q], inv_bind)
            if before_world:
                # the final pose (the pelvis moved, the legs' new rotations): every world row and palette
                # entry once, the update's own pass (its arithmetic and, with this character's rows in the
                # first cache level, its speed)
                world_subset_staged(parents, world_nodes, pose_b, world_b)
                palettes_one(world_b, pal_joints, inv_bind, pal_b)
    keep_alive(li_own, lo_own)  # the owners live until every block is done
