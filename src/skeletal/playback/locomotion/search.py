"""Nearest-frame search in a motion-matching database: brute force and a tree of boxes, batched.

Both searches take N queries (N, D) against F database rows (F, D) (float32, normalised and weighted:
:class:`~skeletal.playback.locomotion.database.MatchingDatabase`) and return, per query, the row with
the smallest squared distance, the first such row on ties, and that distance. One compiled call
runs every query, in parallel over queries (numba's threads, capped like the crowd's while other
processes keep the CPUs busy: :mod:`skeletal._threads`).

The accelerated search (:func:`box_search`) grows out of D. Holden's Motion-Matching ``database.h``
(per-column bounds of runs of consecutive rows, skipped when their bound is above the best distance
so far), with three changes:

* **principal axes**: the boxes are taken in the rows' principal-component frame (``basis`` (D, D),
  an orthonormal rotation about ``center``, axes in decreasing order of variance), where the
  correlated columns of a feature vector (a trajectory's 20-, 40- and 60-frame points, a foot's
  position and velocity) no longer blow an axis-aligned box up. A rotation keeps distances, so the
  distance to a box there is a lower bound of the distance to every row in it;
* **a whole tree**: the rows are put in k-d order (:func:`tree_order`) and cut into blocks of
  :data:`WIDTH` (16) consecutive rows; every run of 16 blocks has a node, every run of 16 such nodes
  a node above, and so on up to one root. The search goes depth first from the root, opening a
  node's children nearest first and skipping every child whose box is farther than the best
  distance found;
* **16 at once**: a node's 16 children's bounds, and a block's 16 rows' distances, are each one loop
  over the columns on a vector of 16 float32 lanes (the boxes and rows stored column by column),
  written in LLVM IR (:func:`_block_distances`, :func:`_child_bounds`): numba's loop vectoriser, given
  16 lanes, ran them through its scalar remainder loop. A block's partial sums are checked once after
  16 columns (a block whose rows are all already farther than the best is left there), and the rows
  and children that pass come back as bits.

A hint per query (a row that is probably near, such as the frame playing) starts the best distance
at its own, so that far nodes are never opened.

It returns the **same row** as brute force, bit for bit: a row's distance is summed over the
original columns in the same order and precision (float32) as brute force sums it (16 rows side by
side change nothing in each row's additions), equal distances go to the lower row index (the one
brute force meets first), and a node is skipped only when its bound (float32, in the rotated frame,
boxes rounded outward) is above the best distance by more than every rounding error of the rotation
and of the float32 sums can explain (:data:`RELATIVE_SLACK`, :data:`ABSOLUTE_SLACK`). The vector
code keeps this: each lane's additions are a scalar loop's (0.0 first, column by column, a multiply
then an add, never fused), and a partial sum only grows, so a row whose partial sum is already above
the best would have lost (its full distance is larger; a tie needs an equal one).

>>> import numpy as np
>>> rows = np.random.default_rng(0).normal(size=(1000, 8)).astype(np.float32)
>>> boxes = build_boxes(rows)
>>> q = rows[[10, 500]] + 0.01
>>> brute_force(rows, q)[0].tolist() == box_search(rows, boxes, q)[0].tolist() == [10, 500]
True
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.cpython.unsafe.numbers import trailing_zeros
from numba.extending import intrinsic

from ..._threads import capped_threads, thread_count
from ...errors import SkeletalError

WIDTH = 16  # rows per block and children per node (one AVX-512 register of float32)
#: A node is skipped when its bound exceeds ``best * RELATIVE_SLACK + ABSOLUTE_SLACK * M**2`` (M: the
#: largest magnitude of a rotated coordinate of the rows or the query). Bounds are float32 sums over
#: the query's rotated coordinates rounded to float32 (each gap off by at most ~3 float32 roundings of
#: M) and a row's float32 distance is within ~30 float32 roundings (2e-6) of the exact one; the slacks
#: cover both with a wide margin and cost no pruning worth measuring.
RELATIVE_SLACK = 1.0005
ABSOLUTE_SLACK = 1e-7
_STACK = 512  # depth-first stack per query: at most 16 entries per level


class Boxes(NamedTuple):
    """The search structure of some rows (see the module docstring). ``order`` (F,) the rows' indices
    in tree order; the rows in blocks of :data:`WIDTH` consecutive rows of that order (L blocks):
    ``blocks`` (L, D, WIDTH) float32 column by column (padded with zeros), ``block_rows`` (L, WIDTH)
    their indices (-1: padding), ``block_size`` (L,) how many; ``center`` (D,) and ``basis`` (D, D)
    float64 the principal frame (``(row - center) @ basis``: a row's rotated coordinates); the nodes,
    level by level from the blocks' parents (level 1) up to the root, each with up to WIDTH
    children (node n of level k: nodes WIDTH n .. WIDTH n + WIDTH - 1 of level k - 1, blocks for
    k = 1): ``lo``/``hi`` (G, D, WIDTH) float32 the children's boxes in rotated coordinates (rounded
    outward), ``level_first`` (K + 1,) where each level's nodes start in them (level k at
    ``level_first[k - 1]``; the last entry: G), ``level_count`` (K + 1,) how many blocks (entry 0) and
    nodes (entry k) each level has; ``magnitude`` (1,) the largest rotated coordinate of a row."""

    order: np.ndarray
    blocks: np.ndarray
    block_rows: np.ndarray
    block_size: np.ndarray
    center: np.ndarray
    basis: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    level_first: np.ndarray
    level_count: np.ndarray
    magnitude: np.ndarray


def principal_frame(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(center (D,), basis (D, D))`` float64: the rows' mean and their principal axes (orthonormal
    columns of ``basis``, largest variance first): ``(row - center) @ basis`` are a row's coordinates
    along them."""
    x = rows.astype(np.float64)
    D = x.shape[1]
    center = x.mean(axis=0) if len(x) else np.zeros(D)
    if len(x) < 2 or D == 0:
        return center, np.eye(D)
    centered = x - center
    _, vectors = np.linalg.eigh(centered.T @ centered)
    return center, np.ascontiguousarray(vectors[:, ::-1])


def tree_order(rotated: np.ndarray) -> np.ndarray:
    """A permutation (F,) of the rows ``rotated`` (F, D) that makes every aligned run of
    ``WIDTH * 2**k`` rows a subtree of a k-d tree: a run of n rows is split along the axis the rows
    vary most along, the lowest ``u`` rows first, where ``u`` is the largest ``WIDTH * 2**k`` below n
    (the median when n is twice such a unit), down to runs of WIDTH."""
    F = len(rotated)
    order = np.arange(F)
    stack = [(0, F)]
    while stack:
        a, b = stack.pop()
        n = b - a
        if n <= WIDTH:
            continue
        unit = WIDTH
        while 2 * unit < n:
            unit *= 2
        idx = order[a:b]
        sub = rotated[idx]
        axis = int(np.argmax(sub.var(axis=0)))
        order[a:b] = idx[np.argpartition(sub[:, axis], unit - 1)]
        stack += [(a, a + unit), (a + unit, b)]
    return order


def _runs(values: np.ndarray, reduce) -> np.ndarray:
    """``reduce`` (np.minimum or np.maximum) over runs of WIDTH rows of ``values`` (n, D) (the last
    run may be shorter)."""
    count = -(-len(values) // WIDTH)
    padded = np.concatenate([values, np.repeat(values[-1:], count * WIDTH - len(values), axis=0)])
    return reduce.reduce(padded.reshape(count, WIDTH, values.shape[1]), axis=1)


def _children(boxes: np.ndarray) -> np.ndarray:
    """Boxes (n, D) as the children of their parents, WIDTH each: (ceil(n / WIDTH), D, WIDTH), the
    missing ones +inf."""
    count = -(-len(boxes) // WIDTH)
    out = np.full((count * WIDTH, boxes.shape[1]), np.inf, np.float32)
    out[: len(boxes)] = boxes
    return np.ascontiguousarray(out.reshape(count, WIDTH, boxes.shape[1]).transpose(0, 2, 1))


def build_boxes(rows: np.ndarray) -> Boxes:
    """The search structure of ``rows`` (F, D) float32 (finite): the principal frame, the tree order
    in it, the blocks and the nodes' boxes."""
    rows = _rows(rows)
    if not np.isfinite(rows).all():
        raise SkeletalError("database rows must be finite numbers")
    F, D = rows.shape
    center, basis = principal_frame(rows)
    rotated = (rows.astype(np.float64) - center) @ basis
    order = tree_order(rotated)
    rotated = rotated[order]
    count = -(-F // WIDTH)
    block_size = np.minimum(F - WIDTH * np.arange(count), WIDTH).astype(np.int64)
    padded = np.zeros((count * WIDTH, D), np.float32)
    padded[:F] = rows[order]
    blocks = np.ascontiguousarray(padded.reshape(count, WIDTH, D).transpose(0, 2, 1))
    block_rows = np.full(count * WIDTH, -1, np.int64)
    block_rows[:F] = order
    block_rows = block_rows.reshape(count, WIDTH)
    # the boxes (float64) of the blocks, then of runs of WIDTH of them, ... up to one; kept as float32
    # rounded outward
    lo_levels, hi_levels, counts = [], [], [count]
    lo = _runs(rotated, np.minimum) if F else np.zeros((0, D))
    hi = _runs(rotated, np.maximum) if F else np.zeros((0, D))
    while True:
        low, high = lo.astype(np.float32), hi.astype(np.float32)
        low = np.where(low > lo, np.nextafter(low, np.float32(-np.inf)), low)
        high = np.where(high < hi, np.nextafter(high, np.float32(np.inf)), high)
        lo_levels.append(_children(low))
        hi_levels.append(_children(high))
        counts.append(len(lo_levels[-1]))
        if counts[-1] <= 1:
            break
        lo, hi = _runs(lo, np.minimum), _runs(hi, np.maximum)
    first = np.concatenate([[0], np.cumsum([len(x) for x in lo_levels])]).astype(np.int64)
    magnitude = np.array([np.abs(rotated).max() if rotated.size else 0.0])
    return Boxes(order.astype(np.int64), blocks, block_rows, block_size, center, basis,
                 np.concatenate(lo_levels), np.concatenate(hi_levels), first, np.array(counts, np.int64), magnitude)


def _rows(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    if a.ndim != 2 or a.dtype != np.float32 or not a.flags.c_contiguous:
        raise SkeletalError(f"database rows must be a C-contiguous float32 (F, D) array, got {a.dtype} {a.shape}")
    return a


def _queries(q: np.ndarray, width: int) -> np.ndarray:
    q = np.ascontiguousarray(np.atleast_2d(np.asarray(q, np.float32)))
    if q.ndim != 2 or q.shape[1] != width:
        raise SkeletalError(f"queries must be (N, {width}), got {q.shape}")
    if not np.isfinite(q).all():
        raise SkeletalError("queries must be finite numbers")
    return q


@njit(cache=True, inline="always")
def _distance(rows, i, query, best):
    """Squared distance of row i to the query, summed in column order; stops once above ``best``."""
    d = np.float32(0.0)
    for c in range(rows.shape[1]):
        e = rows[i, c] - query[c]
        d += e * e
        if d > best:
            break
    return d


@njit(cache=True, inline="always")
def _brute_one(rows, query):
    best = np.float32(np.inf)
    best_i = -1
    for i in range(rows.shape[0]):
        d = _distance(rows, i, query, best)
        if d < best:
            best, best_i = d, i
    return best_i, best


# -- 16 lanes at once, written in LLVM IR: numba's loop vectoriser, given a 16-iteration inner loop, keeps
# its vector loop for 64 and runs 16 lanes through the scalar remainder (a tenth of the speed)

_F32 = ir.FloatType()
_LANES = ir.VectorType(_F32, WIDTH)
_ZERO = ir.Constant(ir.IntType(64), 0)
_CHECK = 16  # columns after which a block's partial sums are checked against the best


def _lane_types_ok(*arrays, out) -> bool:
    """Compile-time contract of the lane intrinsics: float32 arrays, the 3-d ones and ``out``
    C-contiguous, so that lanes 0..WIDTH-1 of a [g, c] (and of ``out``) are adjacent."""
    return all(isinstance(a, types.Array) and a.dtype == types.float32 and (a.ndim == 1 or a.layout == "C")
               for a in arrays + (out,)) and out.ndim == 1 and out.layout == "C"


def _lanes_at(context, builder, array_type, array, indices):
    """Pointer to the WIDTH float32 lanes starting at ``array[indices]``."""
    pointer = cgutils.get_item_pointer(context, builder, array_type, array, indices)
    return builder.bitcast(pointer, _LANES.as_pointer())


def _splat(builder, x):
    """A scalar float32 in every lane."""
    one = builder.insert_element(ir.Constant(_LANES, ir.Undefined), x, ir.Constant(ir.IntType(32), 0))
    return builder.shuffle_vector(one, ir.Constant(_LANES, ir.Undefined),
                                  ir.Constant(ir.VectorType(ir.IntType(32), WIDTH), [0] * WIDTH))


def _lane_sums(builder, first, end, term, total=None):
    """``total`` (default 0.0) ``+ sum over c = first, first + 1, ... end - 1, in that order, of
    term(c)**2`` in WIDTH float32 lanes, each lane's additions one after the other (the roundings of a
    scalar loop; no fused multiply-add)."""
    before = builder.block
    head = builder.append_basic_block("lanes.head")
    body = builder.append_basic_block("lanes.body")
    done = builder.append_basic_block("lanes.done")
    builder.branch(head)
    builder.position_at_end(head)
    c = builder.phi(end.type)
    sums = builder.phi(_LANES)
    c.add_incoming(first, before)
    sums.add_incoming(ir.Constant(_LANES, [0.0] * WIDTH) if total is None else total, before)
    builder.cbranch(builder.icmp_signed("<", c, end), body, done)
    builder.position_at_end(body)
    e = term(c)
    c.add_incoming(builder.add(c, ir.Constant(end.type, 1)), builder.block)
    sums.add_incoming(builder.fadd(sums, builder.fmul(e, e)), builder.block)
    builder.branch(head)
    builder.position_at_end(done)
    return sums


def _lane_sums_until(builder, columns, term, cut):
    """:func:`_lane_sums` over ``columns`` columns, but returning the partial sums after the first
    :data:`_CHECK` when every lane is already above ``cut`` (a float32 value; the sums only grow, so
    each lane's full sum would be too)."""
    split = builder.select(builder.icmp_signed("<", columns, ir.Constant(columns.type, _CHECK)), columns,
                           ir.Constant(columns.type, _CHECK))
    partial = _lane_sums(builder, ir.Constant(columns.type, 0), split, term)
    above = builder.bitcast(builder.fcmp_ordered(">", partial, _splat(builder, cut)), ir.IntType(WIDTH))
    checked = builder.block
    rest = builder.append_basic_block("lanes.rest")
    done = builder.append_basic_block("lanes.all")
    builder.cbranch(builder.icmp_signed("==", above, ir.Constant(ir.IntType(WIDTH), -1)), done, rest)
    builder.position_at_end(rest)
    full = _lane_sums(builder, split, columns, term, partial)
    finished = builder.block
    builder.branch(done)
    builder.position_at_end(done)
    result = builder.phi(_LANES)
    result.add_incoming(partial, checked)
    result.add_incoming(full, finished)
    return result


def _store_lanes(context, builder, out_type, out, lanes):
    builder.store(lanes, _lanes_at(context, builder, out_type, context.make_array(out_type)(context, builder, out),
                                   [_ZERO]), align=4)


@intrinsic
def _block_distances(typingctx, blocks, b, query, out, cut):
    """``_block_distances(blocks, b, query, out, cut) -> int64``: the squared distances of block b's
    rows (padding included) to ``query`` (D,) into ``out`` (WIDTH,) float32, all 16 lanes at once, for
    each row the same additions in the same order as :func:`_distance`; returns the rows whose
    distance is at most ``cut`` (float32) as bits (row j: 1 << j). Once every lane's partial sum is
    above ``cut`` (checked after :data:`_CHECK` columns) it stops there and returns 0."""
    if not (_lane_types_ok(blocks, query, out=out) and blocks.ndim == 3 and isinstance(b, types.Integer)
            and cut == types.float32):
        return None

    def codegen(context, builder, signature, args):
        blocks_type, _, query_type, out_type, _ = signature.args
        rows = context.make_array(blocks_type)(context, builder, args[0])
        q = context.make_array(query_type)(context, builder, args[2])
        index = context.cast(builder, args[1], signature.args[1], types.intp)

        def term(c):
            x = builder.load(_lanes_at(context, builder, blocks_type, rows, [index, c, _ZERO]), align=4)
            value = builder.load(cgutils.get_item_pointer(context, builder, query_type, q, [c]))
            return builder.fsub(x, _splat(builder, value))

        lanes = _lane_sums_until(builder, builder.extract_value(rows.shape, 1), term, args[4])
        _store_lanes(context, builder, out_type, args[3], lanes)
        near = builder.fcmp_ordered("<=", lanes, _splat(builder, args[4]))
        return builder.zext(builder.bitcast(near, ir.IntType(WIDTH)), ir.IntType(64))

    return types.int64(blocks, b, query, out, cut), codegen


@intrinsic
def _child_bounds(typingctx, lo, hi, g, rotated, out, limit):
    """``_child_bounds(lo, hi, g, rotated, out, limit) -> int64``: the squared distances (float32) of
    the rotated query (D,) to node g's children's boxes into ``out`` (WIDTH,), all children at once
    like :func:`_block_distances` (per axis ``max(lo - q, q - hi, 0)`` squared; a missing child's:
    inf); returns the children whose bound is at most ``limit`` (float64) as bits (child j: 1 << j)."""
    if not (_lane_types_ok(lo, hi, rotated, out=out) and lo.ndim == hi.ndim == 3 and isinstance(g, types.Integer)
            and limit == types.float64):
        return None

    def codegen(context, builder, signature, args):
        lo_type, hi_type, _, query_type, out_type, _ = signature.args
        low = context.make_array(lo_type)(context, builder, args[0])
        high = context.make_array(hi_type)(context, builder, args[1])
        q = context.make_array(query_type)(context, builder, args[3])
        node = context.cast(builder, args[2], signature.args[2], types.intp)
        zeros = ir.Constant(_LANES, [0.0] * WIDTH)

        def term(c):
            value = _splat(builder, builder.load(cgutils.get_item_pointer(context, builder, query_type, q, [c])))
            below = builder.fsub(builder.load(_lanes_at(context, builder, lo_type, low, [node, c, _ZERO]), align=4), value)
            above = builder.fsub(value, builder.load(_lanes_at(context, builder, hi_type, high, [node, c, _ZERO]), align=4))
            gap = builder.select(builder.fcmp_ordered(">", above, below), above, below)
            return builder.select(builder.fcmp_ordered(">", gap, zeros), gap, zeros)

        lanes = _lane_sums(builder, ir.Constant(ir.IntType(64), 0), builder.extract_value(low.shape, 1), term)
        _store_lanes(context, builder, out_type, args[4], lanes)
        wide = builder.fpext(lanes, ir.VectorType(ir.DoubleType(), WIDTH))
        limits = builder.insert_element(ir.Constant(wide.type, ir.Undefined), args[5], ir.Constant(ir.IntType(32), 0))
        limits = builder.shuffle_vector(limits, ir.Constant(wide.type, ir.Undefined),
                                        ir.Constant(ir.VectorType(ir.IntType(32), WIDTH), [0] * WIDTH))
        near = builder.bitcast(builder.fcmp_ordered("<=", wide, limits), ir.IntType(WIDTH))
        return builder.zext(near, ir.IntType(64))

    return types.int64(lo, hi, g, rotated, out, limit), codegen


@njit(cache=True)
def _tree_range(rows, blocks, block_rows, block_size, center, basis, lo, hi, level_first, level_count, magnitude,
                queries, hints, first, end, index, cost):
    """Queries ``first`` .. ``end - 1``: each one's nearest row and its distance into ``index`` and
    ``cost``. Depth first from the root, each node's children's bounds at once, the nearer children
    first, skipping those whose bound is above the best distance (plus the slack); a block's rows all
    at once. ``hints[n]`` (a row, or -1): a row whose distance starts as the best; ties still go to
    the lower index, as brute force gives them.

    One function for the whole range, written out, with no helper taking arrays in the loops: numba
    counts references to the arrays a function is handed, and each such call in a loop (inlined or
    not) cost two atomic operations per array, more than a block's distances."""
    D = rows.shape[1]
    query = np.empty(D, np.float32)
    wide = np.empty(D)
    rotated = np.empty(D, np.float32)
    lanes = np.empty(WIDTH, np.float32)
    stack_node = np.empty(_STACK, np.int64)
    stack_level = np.empty(_STACK, np.int64)
    stack_bound = np.empty(_STACK)
    top_level = level_count.shape[0] - 1
    for n in range(first, end):
        for c in range(D):
            query[c] = queries[n, c]
        best, best_i = np.float32(np.inf), -1
        hint = hints[n]
        if hint >= 0:
            best, best_i = np.float32(0.0), hint
            for c in range(D):  # as _distance sums it
                e = rows[hint, c] - query[c]
                best += e * e
        # the query in the principal frame, float64 (wide) then float32 (rotated), and the absolute
        # slack of the bounds (ABSOLUTE_SLACK times the largest coordinate of the rows or the query,
        # squared); axis by axis at once (a loop the compiler vectorises)
        for k in range(D):
            wide[k] = 0.0
        for c in range(D):
            x = np.float64(query[c]) - center[c]
            for k in range(D):
                wide[k] += x * basis[c, k]
        m = magnitude[0]
        for k in range(D):
            rotated[k] = wide[k]
            m = max(m, abs(wide[k]))
        absolute = ABSOLUTE_SLACK * m * m
        limit = np.float64(best) * RELATIVE_SLACK + absolute
        stack_node[0], stack_level[0], stack_bound[0] = level_first[top_level - 1], top_level, 0.0
        top = 1
        while top > 0:
            top -= 1
            if stack_bound[top] > limit:
                continue
            node, level = stack_node[top], stack_level[top]
            if level == 0:
                # the block's rows against the best so far, the lower index on equal distances (brute
                # force meets it first); none can win, not even a tie, when all are farther
                near = _block_distances(blocks, node, query, lanes, best) & ((1 << block_size[node]) - 1)
                if near:
                    while near:
                        j = trailing_zeros(near)
                        near &= near - 1
                        d = lanes[j]
                        i = block_rows[node, j]
                        if d < best or (d == best and i < best_i):
                            best, best_i = d, i
                    limit = np.float64(best) * RELATIVE_SLACK + absolute
                continue
            base = WIDTH * (node - level_first[level - 1])  # the first child's index in its level
            near = _child_bounds(lo, hi, node, rotated, lanes, limit) & ((1 << min(WIDTH, level_count[level - 1] - base)) - 1)
            start = top
            while near:
                j = trailing_zeros(near)
                near &= near - 1
                bound = np.float64(lanes[j])
                # insert in the stack segment kept in decreasing order of bound: the nearest on top
                at = top
                while at > start and stack_bound[at - 1] < bound:
                    stack_node[at], stack_level[at], stack_bound[at] = stack_node[at - 1], stack_level[at - 1], stack_bound[at - 1]
                    at -= 1
                stack_node[at] = base + j if level == 1 else level_first[level - 2] + base + j
                stack_level[at], stack_bound[at] = level - 1, bound
                top += 1
        index[n], cost[n] = best_i, best


@njit(cache=True, parallel=True)
def brute_force_kernel(rows, queries, index, cost):
    """Every query's nearest row (index (N,) int64, cost (N,) float32), queries in parallel."""
    for n in prange(queries.shape[0]):
        index[n], cost[n] = _brute_one(rows, queries[n])


@njit(cache=True)
def brute_force_serial(rows, queries, index, cost):
    """:func:`brute_force_kernel` on one thread (one query: no thread pool)."""
    for n in range(queries.shape[0]):
        index[n], cost[n] = _brute_one(rows, queries[n])


@njit(cache=True, parallel=True)
def box_search_kernel(rows, blocks, block_rows, block_size, center, basis, lo, hi, level_first, level_count, magnitude,
                      queries, hints, index, cost):
    """:func:`brute_force_kernel`'s answer through the tree, queries in parallel, 16 to a task;
    ``hints`` (N,) rows or -1."""
    N = queries.shape[0]
    for t in prange((N + 15) // 16):
        _tree_range(rows, blocks, block_rows, block_size, center, basis, lo, hi, level_first, level_count, magnitude,
                    queries, hints, 16 * t, min(16 * t + 16, N), index, cost)


@njit(cache=True)
def box_search_serial(rows, blocks, block_rows, block_size, center, basis, lo, hi, level_first, level_count, magnitude,
                      queries, hints, index, cost):
    """:func:`box_search_kernel` on one thread."""
    _tree_range(rows, blocks, block_rows, block_size, center, basis, lo, hi, level_first, level_count, magnitude,
                queries, hints, 0, queries.shape[0], index, cost)


def brute_force(rows: np.ndarray, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The nearest row of ``rows`` (F, D) float32 to each of ``queries`` (N, D): (index (N,), squared
    distance (N,)); index -1 for an empty database."""
    rows = _rows(rows)
    q = _queries(queries, rows.shape[1])
    index = np.empty(len(q), np.int64)
    cost = np.empty(len(q), np.float32)
    if len(q) == 1:
        brute_force_serial(rows, q, index, cost)
    else:
        with capped_threads():
            brute_force_kernel(rows, q, index, cost)
    return index, cost


def box_search(rows: np.ndarray, boxes: Boxes, queries: np.ndarray,
               hints: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`brute_force`'s answer (the same rows) through ``boxes`` (:func:`build_boxes` of ``rows``).

    ``hints`` (N,) int: a row per query (-1: none) that is probably near, such as the query's answer a
    few frames ago or the frame playing; its distance bounds the search from the start (faster, the
    same answer)."""
    rows = _rows(rows)
    q = _queries(queries, rows.shape[1])
    if boxes.order.shape != (len(rows),) or boxes.basis.shape != (rows.shape[1],) * 2:
        raise SkeletalError("the boxes were not built from these rows")
    index = np.empty(len(q), np.int64)
    cost = np.empty(len(q), np.float32)
    if len(rows) == 0:
        index[:], cost[:] = -1, np.inf
        return index, cost
    at = _hint_rows(hints, len(q), len(rows))
    arrays = (rows, boxes.blocks, boxes.block_rows, boxes.block_size, boxes.center, boxes.basis, boxes.lo, boxes.hi,
              boxes.level_first, boxes.level_count, boxes.magnitude)
    with capped_threads(parallel=len(q) > 1):
        if len(q) == 1 or thread_count() == 1:  # no thread pool (its fork and join cost ~10 us a call)
            box_search_serial(*arrays, q, at, index, cost)
        else:
            box_search_kernel(*arrays, q, at, index, cost)
    return index, cost


def _hint_rows(hints: np.ndarray | None, count: int, F: int) -> np.ndarray:
    """The hints as int64 rows (-1 where none), checked."""
    if hints is None:
        return np.full(count, -1, np.int64)
    h = np.asarray(hints)
    if h.shape != (count,) or not np.issubdtype(h.dtype, np.integer):
        raise SkeletalError(f"hints must be {count} integer row indices (-1: none), got {h.dtype} {h.shape}")
    if count and (h.min() < -1 or h.max() >= F):
        raise SkeletalError(f"hints must be row indices in 0..{F - 1} or -1")
    return np.ascontiguousarray(h, np.int64)
