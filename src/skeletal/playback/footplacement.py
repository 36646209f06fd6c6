"""Foot placement, a procedural stage (:meth:`skeletal.playback.procedural.Procedural.foot_placement`):
the legs of a walking clip follow a ground. Holds :class:`FootPlacement`, its compiled stage
(:func:`foot_kernel`, one call for the whole batch, in parallel over ranges of instances or as its
serial twin) and the split of the batch over threads (:func:`_foot_chunks`); the contact weights it reads
from the clips are :mod:`.footcontact`'s (:func:`~.footcontact._contact_one`), the legs' IK in lanes
:mod:`.footlanes`'.

Frames: the pose stays model space, grounds and foot targets are world coordinates through the
driver's ``placement`` (B, 4, 4); quaternions xyzw; matrices row-major acting on column vectors.

``proc`` (the stage's owner) is the :class:`~skeletal.playback.procedural.Procedural` driver, typed ``Any``
here: the driver imports this module, so it cannot import the driver back.
"""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np
from numba import get_thread_id, njit, prange

from .._compile import serial_variant
from .._threads import capped_threads, thread_count
from ..errors import SkeletalError
from ..anim.pose import (_joint_times_bind, depth_order, palettes_one, world_matrices, world_node_into,
                         world_subset_staged)
from . import kernels as K
from .footcontact import _contact_one
from .jobs import entry, field, foot_job
from .contacts import ContactPhases, Leg, detect_contacts, find_legs
from .footlanes import (LW, block_waves, borrowed, gather_legs, keep_alive, lane_count, leg_lanes, range_scratch,
                        thread_scratch, write_leg)
from .ground import GROUND_TERRAIN, Ground, as_ground, ground_at, queried_at, sincos_lanes, terrain_sum
from .procstage import SERIAL_BELOW, PlanInput, _LastFrame, _all_rows, _drop_plan, _moved_rows


#: A contact weight at or above this counts as planted (the foot's world position locks).
PLANTED = 0.999


@njit(cache=True, parallel=True)
def foot_kernel(job, phase, chunks, update):
    """Foot placement for every instance of a :class:`~skeletal.playback.jobs.FootJob` (see
    :class:`FootPlacement`), one compiled call for the whole stage: contact weights, world rows,
    planted-foot locks, ground query, pelvis spring, leg IK. In parallel over ``chunks`` ranges of
    instances (whole blocks of characters, in order; a few per thread, see :func:`_foot_chunks`); a few
    characters run its serial twin (:func:`skeletal._compile.serial_variant`: the same body,
    ``prange`` as ``range``). Each range is one call of :func:`_foot_range`, given the job (whose
    arrays it reads without references) rather than its arrays: a call of a numba function takes a
    reference on every array it is given (two atomic operations each, some 40 arrays, contended
    between threads on the shared arrays), so the per-instance work is written out there, not called
    per instance. Characters go in blocks of ``footlanes.LW // legs``: each one's work up to the legs'
    IK (inputs gathered), the block's legs solved in SIMD lanes (:mod:`.footlanes`), then each one's
    rotations, legs' rows and palettes.

    ``phase``: 0 all of it (a built-in ground, queried by :func:`.ground.ground_at`); 1 only up to the
    foot targets' world (x, z) in ``targets`` (a Python ground is then queried there into
    ``heights``/``normals``); 2 the rest, from those heights; 3 all of it on a built-in ground after an
    update that ran without its WORLD stage (ADVANCE | BLEND): the world rows of ``probe_nodes`` alone
    (by depth: the pelvis' ancestors, the pelvis, the joints from it to the feet; what the pelvis' move
    and the legs' IK read), the pelvis moved in the pose and those rows' translations after it
    (:func:`.procstage._moved_rows`), the leg IK, then per character, right after its legs' rotations
    are written, the update's own world pass over ``world_nodes`` (every node, by depth) and every
    palette entry (``pal`` must be the mixer's own palettes): each row and entry of the final pose
    written once, while that character's rows are in the first cache level.
    pose (B, N, 10) float64 local rows, rewritten; world (B, N, 4, 4) their model-space matrices,
    kept current; placement (B, 4, 4) model -> world (a turn about +Y and a move); legs (3, L): thigh,
    knee and foot rig indices; pelvis: the joint moved up/down; leg_nodes[leg_start[l]:leg_start[l +
    1]]: each thigh's subtree, its chain to the foot first (world rows rebuilt), pelvis_nodes: the pelvis'
    subtree without them; fs .. looping: the mixer's slot state and the contact tables (:func:`.footcontact._contact_one`);
    g_kind, g_params, g_grid: :meth:`.ground.Ground.kernel_args`; heights (B, L), normals (B, L, 3):
    the ground under each foot target (world), written (phase 0) or read (phase 2); queried (B, L, 2)
    the world (x, z) that ``heights``/``normals`` hold the query of (NaN: none); a terrain is queried at
    each leg's point unless it is that one (a planted foot's lock), the block's points' sines and
    cosines in SIMD lanes (:func:`.ground.sincos_lanes`); contact (B, L)
    0..1, written; ankle (L,) foot joint height over the floor when planted flat; leg_len (L,);
    scalars (8,): floor (model y of the clips' floor), reach (fraction of the leg length a leg may
    stretch to), omega, dt (the pelvis spring), soft (two-bone soft limit), max_tilt (radians),
    fresh (1: ``world`` already matches ``pose``), palettes (1: keep ``pal`` current); weight (B,);
    state (B, 2) pelvis spring (value, velocity), initialised (B,);
    plant: lock planted feet; locked (B, L), lock (B, L, 2): the locks' world (x, z). Outputs:
    targets (B, L, 3) world foot targets, pelvis_offset (B,); pal (B, J, 4, 4) the mixer's skin
    palettes (``pal_joints`` (J,), ``inv_bind`` (J, 4, 4)), kept current when scalars[7] is 1 (they
    matched ``world`` before): the entries ``pal_idx[pal_start[0]:pal_start[1]]`` (joints under the
    pelvis, not in a leg) translate with it (those of the legs too where the IK does not run), ``pal_idx[pal_start[l + 1]:pal_start[l + 2]]`` (under leg l) are
    recomputed after its IK. ``update``: None (pruned), or (PlaybackJob, dt), phase 3: each block's clocks and blend
    first (:func:`~skeletal.playback.kernels.clock_and_blend`; :class:`~skeletal.playback.footframe.FootFrame`)."""
    # Everything a range reads is taken from the job inside the range's call: the parallel loop body's
    # live-in variables are what OpenMP's region is given, and each costs the launch (some 45 arrays:
    # ~0.9 us a frame on 2 threads, more than the few ns of reading them again per range).
    n = field(job, "pose").shape[0]
    chunks = max(min(n, chunks), 1)
    for c in prange(chunks):
        # (one type per argument, so that the serial twin and the parallel kernel share one compile of it)
        _foot_range(job, np.int64(phase), np.int64(c), np.int64(chunks), update)


@njit(cache=True)
def _foot_range(job, phase, c, chunks, update):
    """Range ``c`` of ``chunks`` of :func:`foot_kernel` (its arguments; see there): the characters of
    one thread's part, in blocks. A plain compiled function that the parallel loop's body calls (one
    call a range, its two arguments' references the only atomic operations) and the serial twin too:
    the body compiled inside the parallel region's outlined function ran 0.07-0.09 us a character
    slower on one thread than the same code in a plain function."""
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
                K.clock_and_blend(b, tid, update[0], update[1], K.ADVANCE | K.BLEND)
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
                # the probe's rows below the pelvis follow its move (the IK reads the chains); every row and
                # palette entry after the block's IK
                if d != 0.0:  # the rows from the pelvis down: only their translations moved
                    _moved_rows(parents, probe_nodes, probe_split, probe_nodes.shape[0], pose_b, world_b)
                if w > 0.0:  # the legs into the lanes
                    gather_legs(b, job, pose_b, world_b, M, upx, upy, upz, li, (b - b0) * n_legs)
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
                gather_legs(b, job, pose_b, world_b, M, upx, upy, upz, li, (b - b0) * n_legs)
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
            if before_world:
                # the final pose (the pelvis moved, the legs' new rotations): every world row and palette
                # entry once, the update's own pass (its arithmetic and, with this character's rows in the
                # first cache level, its speed)
                if solved:
                    for l in range(n_legs):
                        write_leg(li, lo, (b - b0) * n_legs + l, pose_b, world_b, parents, legs[0, l], legs[1, l],
                                  legs[2, l], w, soft, cos_half_tilt, max_tilt)
                world_subset_staged(parents, world_nodes, pose_b, world_b)
                palettes_one(world_b, pal_joints, inv_bind, pal_b)
                continue
            for l in range(n_legs):
                write_leg(li, lo, (b - b0) * n_legs + l, pose_b, world_b, parents, legs[0, l], legs[1, l],
                          legs[2, l], w, soft, cos_half_tilt, max_tilt)
                # (_rows and _palette_rows written out: inlined, no call taking references)
                for k in range(leg_start[l], leg_start[l + 1]):
                    world_node_into(leg_nodes[k], parents, pose_b, world_b)
                if scalars[7] != 0.0:
                    for k in range(pal_start[l + 1], pal_start[l + 2]):
                        q = pal_idx[k]  # (palettes_one's product: affine_product_into's arithmetic)
                        _joint_times_bind(pal_b, q, world_b, pal_joints[q], inv_bind)
    keep_alive(li_own, lo_own)  # the owners live until every block is done


def _foot_chunks(count: int, threads: int) -> int:
    """How many instance ranges :func:`foot_kernel` hands out for ``count`` characters on ``threads`` of
    numba's pool: one per thread, split to the character as OpenMP's static schedule splits the playback
    update's ``prange`` over instances; one (its serial twin, in the calling thread) for a few characters
    or one thread (a parallel region on one thread costs more than the work). With more threads the
    stage runs in parallel even for a hundred characters, on as many threads as the playback update
    before it (:meth:`FootPlacement._run_parallel`): each character is then on the thread that updated
    it, its pose, world rows and palettes still in that core's cache; run on another thread, they are
    pulled from the other core and the next update pulls them back (twice the time:
    docs/guides/performance.md). Equal ranges, not whole blocks of characters: 100 characters in blocks
    of 8 split 48 / 52, and the frame waits on the longer range (4% more characters than an even half;
    a range may now end in a part block's lane pass instead). An argument, not computed in
    the kernel: ``numba.get_num_threads()`` inside it would keep its serial twin out of the cache.

    >>> _foot_chunks(100, 2), _foot_chunks(100, 1), _foot_chunks(3, 2)
    (2, 1, 1)
    """
    return max(1, min(count, threads)) if count > SERIAL_BELOW and threads > 1 else 1


def _chain_first(parents, thigh: int, foot: int, below: np.ndarray) -> np.ndarray:
    """A thigh's subtree (``below``: a mask over the rig) as rig indices: its thigh-to-``foot`` chain
    first, then the rest, each part ascending (still parents first: the kernel's phases 0-2 rebuild the rows
    in this order after the IK)."""
    chain, j = set(), foot
    while j != thigh and j >= 0:
        chain.add(j)
        j = int(parents[j])
    chain.add(thigh)
    nodes = np.flatnonzero(below)
    return np.concatenate([[k for k in nodes if k in chain], [k for k in nodes if k not in chain]]).astype(np.int64)


def common_parent(parents, thighs, stage: str = "foot placement") -> int:
    """The nearest joint above every thigh in ``thighs`` (the pelvis), by the rig's ``parents``;
    SkeletalError naming ``stage`` when the legs share none."""
    chains = []
    for t in thighs:
        up, j = [], int(parents[t])
        while j >= 0:
            up.append(j)
            j = int(parents[j])
        chains.append(up)
    common = [j for j in chains[0] if all(j in c for c in chains[1:])]
    if not common:
        raise SkeletalError(f"{stage}: the legs share no parent joint (pelvis)")
    return common[0]


class FootPlacement:
    """Legs follow a ground: pelvis lowered, two-bone IK per leg, feet turned to the ground normal.

    ``ground``: a :class:`.ground.Ground`, spec string (``"terrain:amplitude=0.2"``, ``"slope:angle=10"``),
    number, height array or callable ``f(x, z) -> y`` (see :func:`.ground.as_ground`);
    ``legs``: a list of :class:`.contacts.Leg`, or a dict ``{"left": (thigh, knee, foot[, toe]),
    "right": (...)}`` of joint names / indices overriding the automatic search (:func:`.contacts.find_legs`);
    ``floor``: model-space height of the clips' floor (0: glTF characters stand on y = 0);
    ``pelvis_smooth``: seconds, the pelvis spring's smooth time (0.1); ``reach``: fraction of a leg's
    length it may stretch to before the pelvis drops further (0.97; a leg the clip itself stretches
    further keeps its animated reach); ``soft``: the two-bone soft limit band (0: the pelvis drop
    already keeps targets reachable, and a soft band would pull up feet the clip puts at full reach); ``max_tilt``: degrees the feet turn at most (35); ``weight`` (B,) or scalar;
    ``plant``: lock a planted foot's world (x, z) at touchdown (contact weight reaching 1), hold it
    while the weight stays 1 and blend back to the animated position by the weight over lift-off
    (True); ``contact_options``: passed to :func:`.contacts.detect_contacts`.

    After each update: ``contact`` (B, L) weights used, ``targets`` (B, L, 3) world foot targets,
    ``pelvis_offset`` (B,) metres the pelvis moved (negative: down), ``locked`` (B, L) bool and
    ``lock`` (B, L, 2) the planted feet's world (x, z), ``phases`` {clip index:
    :class:`.contacts.ContactPhases`}.

    Per frame the stage is one compiled call for the built-in grounds (two, with a Python query
    between, for a callable ground); for a float64 Player / Mixer it also keeps the mixer's world
    matrices and skin palettes current, so no full world / palette pass follows it.
    """

    builds_world = True  # computes the world matrices it needs from the pose itself
    keeps_world = True  # and leaves them matching the pose it writes

    @property
    def palettes_current(self) -> bool:
        """Whether the last apply kept the mixer's palettes current too."""
        return self.last.palettes_current

    # the settings the plan's compiled call is built from: assigning one drops the driver's plan (the
    # ground too: its setter below); arrays changed in place need nothing
    plant = PlanInput[bool]()
    floor = PlanInput[float]()
    reach = PlanInput[float]()
    soft = PlanInput[float]()
    max_tilt = PlanInput[float]()
    omega = PlanInput[float]()
    weight = PlanInput[np.ndarray]()
    ankle = PlanInput[np.ndarray]()

    def __init__(self, proc: Any, ground="flat", *, legs=None, floor: float = 0.0, pelvis_smooth: float = 0.1,
                 reach: float = 0.97, soft: float = 0.0, max_tilt: float = 35.0, weight=1.0, plant: bool = True,
                 contact_options: dict | None = None):
        self.proc = proc
        self.last = _LastFrame()
        rig = proc.rig
        self.ground = ground
        self.plant = bool(plant)
        if legs is None or isinstance(legs, dict):
            legs = find_legs(rig, legs)
        self.legs: list[Leg] = list(legs)
        if not (0.0 < reach <= 1.0 and 0.0 <= soft < 1.0 and pelvis_smooth > 0 and 0.0 <= max_tilt <= 90.0):
            raise SkeletalError("foot placement: need 0 < reach <= 1, 0 <= soft < 1, pelvis_smooth > 0, 0 <= max_tilt <= 90")
        self.floor, self.reach, self.soft = float(floor), float(reach), float(soft)
        self.max_tilt = math.radians(max_tilt)
        self.omega = 2.0 / float(pelvis_smooth)
        self.contact_options = dict(contact_options or {})
        b, n_legs = proc.count, len(self.legs)
        self.weight = np.broadcast_to(np.asarray(weight, np.float64), (b,)).copy()
        self.thighs = np.array([l.thigh for l in self.legs], np.int64)
        self.knees = np.array([l.knee for l in self.legs], np.int64)
        self.feet = np.array([l.foot for l in self.legs], np.int64)
        self.pelvis = common_parent(rig.parents, self.thighs)
        self.pelvis_nodes = np.flatnonzero(rig.descendants(self.pelvis)).astype(np.int64)
        parts = [_chain_first(rig.parents, int(l.thigh), int(l.foot), rig.descendants(int(l.thigh))) for l in self.legs]
        self.leg_nodes = np.concatenate(parts)
        # the kernel solves a block's legs before rebuilding any leg's rows: no leg may move another's
        if len(np.unique(self.leg_nodes)) != len(self.leg_nodes):
            raise SkeletalError("foot placement: one leg's thigh is inside another leg (the legs' joints overlap)")
        if len(self.legs) > LW:
            raise SkeletalError(f"foot placement: at most {LW} legs, got {len(self.legs)}")
        self.leg_start = np.cumsum([0] + [len(p) for p in parts]).astype(np.int64)
        # the kernel translates these rows with the pelvis, and the legs' own as it needs them
        self._body_nodes = np.setdiff1d(self.pelvis_nodes, self.leg_nodes).astype(np.int64)
        # after an update without its world pass (foot_kernel's phase 3): the rows that place the pelvis
        parents = rig.parents
        chains = set()  # the thigh-to-foot chains, and the joints from each thigh up to the pelvis
        for l in self.legs:
            j = int(l.foot)
            while j != self.pelvis:
                chains.add(j)
                j = int(parents[j])
        up = [self.pelvis]
        while parents[up[-1]] >= 0:
            up.append(int(parents[up[-1]]))
        # by depth: the pelvis' ancestors, the pelvis, then the rows below it (see foot_kernel's phase 3)
        self._probe_nodes = depth_order(parents, np.array(sorted(chains | set(up)), np.int64))
        # every row, by depth: the final pass after the legs' IK
        self._world_nodes = depth_order(parents, np.arange(len(parents), dtype=np.int64))
        rest = world_matrices(rig.parents, rig.rest)
        self.leg_length = np.array([np.linalg.norm(rest[l.knee, :3, 3] - rest[l.thigh, :3, 3])
                                    + np.linalg.norm(rest[l.foot, :3, 3] - rest[l.knee, :3, 3]) for l in self.legs])
        self.ankle = np.array([rest[l.foot, 1, 3] - self.floor for l in self.legs])  # until a clip says better
        self._legs = np.ascontiguousarray(np.stack([self.thighs, self.knees, self.feet]))
        self.state = np.zeros((b, 2))
        self.initialised = np.zeros(b, np.bool_)
        self.contact = np.ones((b, n_legs))
        self.targets = np.zeros((b, n_legs, 3))
        self.pelvis_offset = np.zeros(b)
        self.heights = np.zeros((b, n_legs))
        self.normals = np.zeros((b, n_legs, 3))
        self._queried = np.full((b, n_legs, 2), np.nan)  # the (x, z) heights/normals hold a query of
        self.locked = np.zeros((b, n_legs), np.bool_)
        self.lock = np.zeros((b, n_legs, 2))
        self._scalars = np.zeros(8)
        self._scalar_values: tuple = ()  # what _scalars holds (apply)
        # the mixer's skin palettes this stage keeps current: entries under the pelvis, then each leg
        self._palettes, self._pal, self._pal_idx, self._pal_start = proc._palette_groups(
            [self.pelvis] + [int(t) for t in self.thighs])
        # the pelvis' group without the legs' entries (the groups after it): those translate with the
        # pelvis only when the IK does not rebuild them
        idx, start = self._pal_idx, self._pal_start
        body = idx[: start[1]][~np.isin(idx[: start[1]], idx[start[1]:])]
        self._pal_idx = np.concatenate([body, idx[start[1]:]]).astype(np.int64)
        self._pal_start = (start - start[1] + len(body)).astype(np.int64)
        self._pal_start[0] = 0
        self.phases: dict[int, ContactPhases] = {}
        self._tables_key = None
        self._args_from = None

    @property
    def ground(self) -> Ground:
        """The ground the feet follow (settable: anything :func:`.ground.as_ground` takes)."""
        return self._ground

    @ground.setter
    def ground(self, ground) -> None:
        self._ground = as_ground(ground)
        self._ground_args = self._ground.kernel_args()
        _drop_plan(self)

    def reset(self) -> None:
        """Forget the pelvis spring and the planted feet's locks (after a teleport)."""
        self.initialised[:] = False
        self.locked[:] = False
        self._queried[...] = np.nan

    def phases_for(self, clip) -> ContactPhases:
        """The contact phases of a clip (name, index or Clip) for these legs (cached)."""
        mixer = self.proc.mixer
        c = mixer.clip_index(clip)
        if c not in self.phases:
            opts = {"floor": self.floor, **self.contact_options}
            self.phases[c] = detect_contacts(self.proc.asset, mixer.clipset.clips[c], self.legs, **opts)
        return self.phases[c]

    def _tables(self):
        mixer = self.proc.mixer
        key = self._tables_key
        # the mixer replaces its slot arrays when it adds a slot: identity and the clip set's version
        # tell whether anything changed, without hashing per frame
        if (key is None or key[0] != mixer.clipset.version or key[1] is not mixer.slot_clip
                or key[2] is not mixer.slot_layer or key[3] != len(mixer.layers)
                or key[4] != [layer.additive for layer in mixer.layers]):
            key = (mixer.clipset.version, mixer.slot_clip, mixer.slot_layer, len(mixer.layers),
                   [layer.additive for layer in mixer.layers])
            used = sorted(set(int(c) for c in mixer.slot_clip))
            n_clips = len(mixer.clipset.clips)
            phases = {c: self.phases_for(c) for c in used}
            frames_max = max([len(p.times) for p in phases.values()] + [1])
            tables = np.ones((n_clips, frames_max, len(self.legs)))
            frames = np.ones(n_clips, np.int64)
            fps = np.ones(n_clips)
            durations = np.zeros(n_clips)
            looping = np.zeros(n_clips, np.bool_)
            for c, p in phases.items():
                tables[c, : len(p.times)] = p.weight
                frames[c], fps[c], durations[c], looping[c] = len(p.times), p.fps, p.duration, p.looping
            if phases:
                # the ankle height over the floor when planted: from the clips (lowest over them)
                self.ankle = np.min([p.ankle_height for p in phases.values()], axis=0)
            additive = np.array([mixer.layers[int(l)].additive for l in mixer.slot_layer], np.bool_)
            self._packed = (tables, frames, fps, durations, looping, additive)
            self._tables_key = key
        return self._packed

    def apply(self, pose: np.ndarray, world: np.ndarray, dt: float, fresh: bool = False) -> None:
        """One frame: ``fresh`` says ``world`` already matches ``pose`` (no full rebuild needed)."""
        proc = self.proc
        mixer = proc.mixer
        packed = self._tables()
        kind, params, grid = self._ground_args
        keep = bool(fresh and self._palettes and kind >= 0)  # palettes kept current here
        values = (self.floor, self.reach, self.omega, dt, self.soft, self.max_tilt, 1.0 if fresh else 0.0,
                  1.0 if keep else 0.0)
        if values != self._scalar_values:  # written when one changed (eight numpy stores are not free)
            self._scalars[:] = values
            self._scalar_values = values
        sc = self._scalars
        self.last.palettes_current = keep
        # the kernel's job changes rarely: rebuilt only when one of the objects it comes from did
        c = self._args_from
        if (c is None or c[0] is not packed or c[1] is not pose or c[2] is not world or c[3] is not mixer.fs
                or c[4] is not self.weight or c[5] is not self._ground_args or c[6] != self.plant
                or c[7] is not self.ankle or c[8] is not proc.placement):
            tables, frames, fps, durations, looping, additive = packed
            pal, pal_joints, inv_bind = self._pal
            self._queried[...] = np.nan  # a new ground (or arrays): nothing queried yet
            job = foot_job(
                pose=pose, world=world, parents=proc.rig.parents, placement=proc.placement, legs=self._legs,
                pelvis=self.pelvis, pelvis_nodes=self._body_nodes, leg_nodes=self.leg_nodes,
                leg_start=self.leg_start, fs=mixer.fs, slot_clip=mixer.slot_clip, slot_additive=additive,
                tables=tables, frames=frames, fps=fps, durations=durations, looping=looping, g_kind=kind,
                g_params=params, g_grid=grid, heights=self.heights, normals=self.normals, queried=self._queried,
                contact=self.contact,
                ankle=self.ankle, leg_len=self.leg_length, scalars=sc, weight=self.weight, state=self.state,
                initialised=self.initialised, plant=self.plant, locked=self.locked, lock=self.lock,
                targets=self.targets, pelvis_offset=self.pelvis_offset, pal=pal, pal_joints=pal_joints,
                inv_bind=inv_bind, pal_idx=self._pal_idx, pal_start=self._pal_start,
                probe_nodes=self._probe_nodes, world_nodes=self._world_nodes,
                **thread_scratch(len(self.legs), int(params[1]) if kind == GROUND_TERRAIN else 0,
                                 numba.config.NUMBA_NUM_THREADS))
            # the serial twin's entry point for a few characters; for more the parallel kernel's (and the
            # serial twin's once a frame runs on one thread: not compiled before a cold start needs it)
            if proc.count > SERIAL_BELOW:
                serial, parallel = None, entry(foot_kernel, job, 0, 2, None)
            else:
                serial, parallel = entry(serial_variant(foot_kernel), job, 0, 1, None), None
            self.last.calls = (job, serial, parallel)
            self._args_from = (packed, pose, world, mixer.fs, self.weight, self._ground_args, self.plant, self.ankle,
                               proc.placement)
        job, serial, parallel = self.last.calls
        call = serial if parallel is None else self._run_parallel
        if kind >= 0:  # a built-in ground: one compiled call for the whole stage
            call(job, 0, 1, None)
            return
        call(job, 1, 1, None)  # up to the targets' (x, z), then the Python ground there, then the rest
        h, n = self._ground.height_normal(self.targets[..., 0], self.targets[..., 2])
        self.heights[...] = h
        self.normals[...] = n
        call(job, 2, 1, None)

    def _run_parallel(self, job, phase: int, _chunks: int = 0, _update: None = None) -> None:
        """The stage on more than a few characters: on the threads the playback update just used (numba's
        count, capped as the update caps it while other processes keep the CPUs busy), in
        :func:`_foot_chunks` ranges; on one thread, the serial twin (no parallel region)."""
        _, serial, parallel = self.last.calls
        with capped_threads():
            threads = thread_count()
            if threads > 1:
                parallel(job, phase, _foot_chunks(self.proc.count, threads), None)
                return
        if serial is None:
            serial = entry(serial_variant(foot_kernel), job, 0, 1, None)
            self.last.calls = (job, serial, parallel)
        serial(job, phase, 1, None)
