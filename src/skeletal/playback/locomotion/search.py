"""Nearest-frame search in a motion-matching database: brute force and a box tree, batched.

Both searches take N queries (N, D) against F database rows (F, D) (float32, normalised and weighted:
:class:`~skeletal.playback.locomotion.database.MatchingDatabase`) and return, per query, the row with
the smallest squared distance, the first such row on ties, and that distance. One compiled call
runs every query, in parallel over queries (numba's threads, capped like the crowd's while other
processes keep the CPUs busy: :mod:`skeletal._threads`).

The accelerated search (:func:`box_search`) grows out of D. Holden's Motion-Matching ``database.h``
(per-column bounds of runs of consecutive rows, skipped when their bound is above the best distance
so far), with two changes that make the boxes tight:

* **principal axes**: the boxes are taken in the rows' principal-component frame (``basis`` (D, D),
  an orthonormal rotation about ``center``, axes in decreasing order of variance), where the
  correlated columns of a feature vector (a trajectory's 20-, 40- and 60-frame points, a foot's
  position and velocity) no longer blow an axis-aligned box up. A rotation keeps distances, so the
  distance to a box there is a lower bound of the distance to every row in it;
* **a whole tree**: rows are split at the median of the axis they vary most along, again and again,
  down to leaves of at most :data:`LEAF` rows, and every node of that tree has its box. The search
  goes depth first, the nearer child first, and skips a node whose box is farther than the best
  distance found.

A hint per query (a row that is probably near, such as the frame playing) starts the best distance
at its own, so that far nodes are never opened.

It returns the **same row** as brute force, bit for bit: a row's distance is summed over the
original columns in the same order and precision (float32) as brute force sums it, equal distances
go to the lower row index (the one brute force meets first), and a node is skipped only when its
bound (float64, in the rotated frame, the boxes rounded outward to float32) is above the best
distance by more than every rounding error of the rotation and of the float32 sums can explain
(:data:`RELATIVE_SLACK`, :data:`ABSOLUTE_SLACK`).

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
from numba import njit, prange

from ..._threads import capped_threads
from ...errors import SkeletalError

LEAF = 16  # most rows in a leaf of the tree
BLOCK = 16  # rows whose distances are summed side by side (:func:`_block_distances` is written for 16)
#: A node is skipped when its bound exceeds ``best * RELATIVE_SLACK + ABSOLUTE_SLACK * M**2`` (M: the
#: largest magnitude of a rotated coordinate of the rows or the query). The float32 distance of a row
#: is within ~30 float32 roundings (2e-6) of the exact one, and the float64 rotation's error is
#: ~D**2 float64 roundings of M per coordinate; the slacks are far above both, and cost no pruning
#: worth measuring.
RELATIVE_SLACK = 1.0005
ABSOLUTE_SLACK = 1e-12
_STACK = 128  # depth-first stack per query: two entries per level (a median tree of 2**60 rows fits)


class Boxes(NamedTuple):
    """The search structure of some rows (see the module docstring). ``order`` (F,) the rows' indices
    in tree order; the leaves' rows in blocks of :data:`BLOCK` (L blocks, in tree order): ``blocks``
    (L, D, BLOCK) float32 the rows, column by column (padded with zeros), ``block_rows`` (L, BLOCK)
    their indices (-1: padding) and ``block_size`` (L,) how many; ``leaf`` (M, 2) the first and end
    block of each leaf node (0, 0 for an inner node);
    ``center`` (D,) and ``basis`` (D, D) float64 the principal frame (``basis @ (row - center)``: a
    row's rotated coordinates); per node (M nodes, the root first, parents before children):
    ``lo``/``hi`` (M, D) float32 its box in rotated coordinates, ``first``/``end`` (M,) its rows in
    tree order, ``left``/``right`` (M,) its children (-1 for a leaf); ``magnitude`` (1,) the largest
    rotated coordinate of a row."""

    order: np.ndarray
    blocks: np.ndarray
    block_rows: np.ndarray
    block_size: np.ndarray
    leaf: np.ndarray
    center: np.ndarray
    basis: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    first: np.ndarray
    end: np.ndarray
    left: np.ndarray
    right: np.ndarray
    magnitude: np.ndarray


def principal_frame(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(center (D,), basis (D, D))`` float64: the rows' mean and their principal axes (orthonormal
    rows of ``basis``, largest variance first)."""
    x = rows.astype(np.float64)
    D = x.shape[1]
    center = x.mean(axis=0) if len(x) else np.zeros(D)
    if len(x) < 2 or D == 0:
        return center, np.eye(D)
    centered = x - center
    _, vectors = np.linalg.eigh(centered.T @ centered)
    return center, np.ascontiguousarray(vectors[:, ::-1].T)


def _split_tree(rotated: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The median tree of ``rotated`` (F, D) rows: their order (F,) and the nodes (M, 4) (first, end,
    left, right) in that order, parents before children."""
    F = len(rotated)
    order = np.arange(F)
    nodes = [[0, F, -1, -1]]
    stack = [0]
    while stack:
        k = stack.pop()
        a, b = nodes[k][0], nodes[k][1]
        if b - a <= LEAF:
            continue
        idx = order[a:b]
        sub = rotated[idx]
        axis = int(np.argmax(sub.var(axis=0)))
        half = (b - a) // 2
        if half > BLOCK:  # whole blocks on the left: leaves of full blocks (but the last)
            half = -(-half // BLOCK) * BLOCK
        order[a:b] = idx[np.argpartition(sub[:, axis], half - 1)]
        nodes[k][2], nodes[k][3] = len(nodes), len(nodes) + 1
        nodes.append([a, a + half, -1, -1])
        nodes.append([a + half, b, -1, -1])
        stack += [nodes[k][2], nodes[k][3]]
    return order, np.array(nodes, np.int64).reshape(-1, 4)


@njit(cache=True)
def _node_bounds(rotated, first, end, left, right, lo, hi):
    """Each node's per-column minimum and maximum of its rows (float64, ``rotated`` in tree order),
    children before parents."""
    for k in range(first.shape[0] - 1, -1, -1):
        if left[k] < 0:
            for c in range(rotated.shape[1]):
                lo[k, c] = rotated[first[k], c]
                hi[k, c] = rotated[first[k], c]
            for i in range(first[k] + 1, end[k]):
                for c in range(rotated.shape[1]):
                    lo[k, c] = min(lo[k, c], rotated[i, c])
                    hi[k, c] = max(hi[k, c], rotated[i, c])
        else:
            for c in range(rotated.shape[1]):
                lo[k, c] = min(lo[left[k], c], lo[right[k], c])
                hi[k, c] = max(hi[left[k], c], hi[right[k], c])


def build_boxes(rows: np.ndarray) -> Boxes:
    """The search structure of ``rows`` (F, D) float32 (finite): the principal frame, the median tree
    in it and its nodes' boxes."""
    rows = _rows(rows)
    if not np.isfinite(rows).all():
        raise SkeletalError("database rows must be finite numbers")
    F, D = rows.shape
    center, basis = principal_frame(rows)
    rotated = (rows.astype(np.float64) - center) @ basis.T
    order, nodes = _split_tree(rotated)
    rotated = np.ascontiguousarray(rotated[order])
    first, end, left, right = (np.ascontiguousarray(nodes[:, j]) for j in range(4))
    lo64 = np.empty((len(nodes), D))
    hi64 = np.empty((len(nodes), D))
    if F:
        _node_bounds(rotated, first, end, left, right, lo64, hi64)
    else:
        lo64[:], hi64[:] = np.inf, -np.inf
    # float32 boxes that still hold every row: rounded outward
    lo = lo64.astype(np.float32)
    lo = np.where(lo > lo64, np.nextafter(lo, np.float32(-np.inf)), lo)
    hi = hi64.astype(np.float32)
    hi = np.where(hi < hi64, np.nextafter(hi, np.float32(np.inf)), hi)
    magnitude = np.array([np.abs(rotated).max() if rotated.size else 0.0])
    leaves = np.flatnonzero(left < 0)
    count = -(-(end[leaves] - first[leaves]) // BLOCK)  # blocks per leaf
    leaf = np.zeros((len(nodes), 2), np.int64)
    leaf[leaves, 1] = np.cumsum(count)
    leaf[leaves, 0] = leaf[leaves, 1] - count
    start = np.repeat(first[leaves], count) + BLOCK * (np.arange(count.sum()) - np.repeat(leaf[leaves, 0], count))
    block_size = np.minimum(np.repeat(end[leaves], count) - start, BLOCK).astype(np.int64)
    blocks = np.zeros((len(start), D, BLOCK), np.float32)
    block_rows = np.full((len(start), BLOCK), -1, np.int64)
    for j in range(BLOCK):  # the j-th row of every block that has one
        has = block_size > j
        at = order[start[has] + j]
        blocks[has, :, j] = rows[at]
        block_rows[has, j] = at
    return Boxes(order.astype(np.int64), blocks, block_rows, block_size, leaf, center, basis,
                 np.ascontiguousarray(lo), np.ascontiguousarray(hi), first, end, left, right, magnitude)


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


@njit(cache=True, fastmath={"reassoc", "contract", "nsz"})
def _node_bound(lo, hi, k, rotated):
    """Squared distance (float64) of the rotated query to node k's box, without branches (the sum may
    be reassociated: its rounding is within the slack)."""
    d = 0.0
    for c in range(lo.shape[1]):
        q = rotated[c]
        e = max(max(np.float64(lo[k, c]) - q, q - np.float64(hi[k, c])), 0.0)
        d += e * e
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


@njit(cache=True, inline="always")
def _block_distances(blocks, b, query):
    """The squared distances of block b's :data:`BLOCK` rows (padding included) to the query, summed column
    by column in 16 separate float32 accumulators (so that the compiler keeps them in registers and
    runs them side by side): for each row the same additions, in the same order, as :func:`_distance`."""
    d0 = d1 = d2 = d3 = d4 = d5 = d6 = d7 = np.float32(0.0)
    d8 = d9 = d10 = d11 = d12 = d13 = d14 = d15 = np.float32(0.0)
    for c in range(blocks.shape[1]):
        x = blocks[b, c]
        q = query[c]
        e0, e1, e2, e3 = x[0] - q, x[1] - q, x[2] - q, x[3] - q
        d0, d1, d2, d3 = d0 + e0 * e0, d1 + e1 * e1, d2 + e2 * e2, d3 + e3 * e3
        e4, e5, e6, e7 = x[4] - q, x[5] - q, x[6] - q, x[7] - q
        d4, d5, d6, d7 = d4 + e4 * e4, d5 + e5 * e5, d6 + e6 * e6, d7 + e7 * e7
        e8, e9, e10, e11 = x[8] - q, x[9] - q, x[10] - q, x[11] - q
        d8, d9, d10, d11 = d8 + e8 * e8, d9 + e9 * e9, d10 + e10 * e10, d11 + e11 * e11
        e12, e13, e14, e15 = x[12] - q, x[13] - q, x[14] - q, x[15] - q
        d12, d13, d14, d15 = d12 + e12 * e12, d13 + e13 * e13, d14 + e14 * e14, d15 + e15 * e15
    return (d0, d1, d2, d3, d4, d5, d6, d7, d8, d9, d10, d11, d12, d13, d14, d15)


@njit(cache=True, inline="always")
def _scan_leaf(blocks, block_rows, block_size, first, end, query, best, best_i):
    """The rows of blocks ``first`` to ``end`` against the best so far: the (best, index) pair, the
    lower index on equal distances (brute force meets it first)."""
    for b in range(first, end):
        distances = _block_distances(blocks, b, query)
        for j in range(block_size[b]):
            d = distances[j]
            i = block_rows[b, j]
            if d < best or (d == best and i < best_i):
                best, best_i = d, i
    return best, best_i


@njit(cache=True, inline="always")
def _tree_one(rows, blocks, block_rows, block_size, leaf, center, basis, lo, hi, left, right, magnitude, query, hint,
              rotated, stack_node, stack_bound):
    """The nearest row and its distance: depth first through the tree, the nearer child first,
    skipping nodes whose bound is above the best distance (plus the slack). ``hint`` (a row, or -1):
    a row whose distance starts as the best; ties still go to the lower index, as brute force gives
    them. ``rotated`` (D,), ``stack_node`` and ``stack_bound`` (:data:`_STACK`,):
    scratch."""
    D = rows.shape[1]
    best, best_i = np.float32(np.inf), -1
    if hint >= 0:
        best, best_i = _distance(rows, hint, query, best), hint
    m = magnitude[0]
    for k in range(D):
        s = 0.0
        for c in range(D):
            s += basis[k, c] * (np.float64(query[c]) - center[c])
        rotated[k] = s
        m = max(m, abs(s))
    absolute = ABSOLUTE_SLACK * m * m
    limit = np.float64(best) * RELATIVE_SLACK + absolute
    top = 0
    bound = _node_bound(lo, hi, 0, rotated)
    if bound <= limit:
        stack_node[0], stack_bound[0] = 0, bound
        top = 1
    while top > 0:
        top -= 1
        node = stack_node[top]
        if stack_bound[top] > limit:
            continue
        a = left[node]
        if a < 0:
            best, best_i = _scan_leaf(blocks, block_rows, block_size, leaf[node, 0], leaf[node, 1], query, best, best_i)
            limit = np.float64(best) * RELATIVE_SLACK + absolute
            continue
        b = right[node]
        bound_a = _node_bound(lo, hi, a, rotated)
        bound_b = _node_bound(lo, hi, b, rotated)
        if bound_a > bound_b:
            a, b = b, a
            bound_a, bound_b = bound_b, bound_a
        # the farther child below the nearer one on the stack: the nearer is opened first
        if bound_b <= limit:
            stack_node[top], stack_bound[top] = b, bound_b
            top += 1
        if bound_a <= limit:
            stack_node[top], stack_bound[top] = a, bound_a
            top += 1
    return best_i, best


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
def box_search_kernel(rows, blocks, block_rows, block_size, leaf, center, basis, lo, hi, left, right, magnitude,
                      queries, hints, index, cost):
    """:func:`brute_force_kernel`'s answer through the box tree, queries in parallel; ``hints`` (N,)
    rows or -1."""
    D = rows.shape[1]
    for n in prange(queries.shape[0]):
        rotated = np.empty(D)
        stack_node = np.empty(_STACK, np.int64)
        stack_bound = np.empty(_STACK)
        index[n], cost[n] = _tree_one(rows, blocks, block_rows, block_size, leaf, center, basis, lo, hi, left, right,
                                      magnitude, queries[n], hints[n], rotated, stack_node, stack_bound)


@njit(cache=True)
def box_search_serial(rows, blocks, block_rows, block_size, leaf, center, basis, lo, hi, left, right, magnitude,
                      queries, hints, index, cost):
    """:func:`box_search_kernel` on one thread."""
    rotated = np.empty(rows.shape[1])
    stack_node = np.empty(_STACK, np.int64)
    stack_bound = np.empty(_STACK)
    for n in range(queries.shape[0]):
        index[n], cost[n] = _tree_one(rows, blocks, block_rows, block_size, leaf, center, basis, lo, hi, left, right,
                                      magnitude, queries[n], hints[n], rotated, stack_node, stack_bound)


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
    arrays = (rows, boxes.blocks, boxes.block_rows, boxes.block_size, boxes.leaf, boxes.center, boxes.basis,
              boxes.lo, boxes.hi, boxes.left, boxes.right, boxes.magnitude)
    if len(q) == 1:
        box_search_serial(*arrays, q, at, index, cost)
    else:
        with capped_threads():
            box_search_kernel(*arrays, q, at, index, cost)
    return index, cost


def _hint_rows(hints: np.ndarray | None, count: int, F: int) -> np.ndarray:
    """The hints as int64 rows (-1 where none), checked."""
    if hints is None:
        return np.full(count, -1, np.int64)
    h = np.asarray(hints)
    if h.shape != (count,) or not np.issubdtype(h.dtype, np.integer):
        raise SkeletalError(f"hints must be {count} integer row indices (-1: none), got {h.dtype} {h.shape}")
    if ((h < -1) | (h >= F)).any():
        raise SkeletalError(f"hints must be row indices in 0..{F - 1} or -1")
    return h.astype(np.int64)
