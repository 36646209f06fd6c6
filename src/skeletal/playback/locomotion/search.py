"""Nearest-frame search in a motion-matching database: brute force and bounding boxes, batched.

Both searches take N queries (N, D) against F database rows (F, D) (float32, normalised and weighted:
:class:`~skeletal.playback.locomotion.database.MatchingDatabase`) and return, per query, the row with
the smallest squared distance, the first such row on ties, and that distance. One compiled call
runs every query, in parallel over queries (numba's threads, capped like the crowd's while other
processes keep the CPUs busy: :mod:`skeletal._threads`).

The accelerated search builds on D. Holden's Motion-Matching ``database.h`` scheme (the per-column
minimum and maximum of every run of :data:`SMALL` consecutive rows and of every run of :data:`LARGE`),
with a third level over runs of :data:`TOP` rows, all over the rows put in k-d order first
(:func:`kd_order`: recursive median splits), so that a run holds near rows, not 1 s of one clip
(whose feet sweep the whole stride). It computes every top box's distance bound and opens the top
boxes nearest first until the next one's bound is above the best distance found; in each, the
nearest large box first, then every large box whose bound is not above the best so far, skipping
small boxes the same way; a row's distance stops adding up once it passes the best. A hint per query
(a row that is probably near, such as the frame playing) starts the best distance at its own, so
that far boxes are never opened. It returns the **same row** as brute force, bit for bit: every distance
is summed over the columns in the same order and in the same precision, a box's bound is such a sum
of terms no larger than any of its rows' (rounding is monotonic), so a skipped box holds no row as
near as the best, and equal distances go to the lower row index, which is the one brute force meets
first.

>>> import numpy as np
>>> rows = np.random.default_rng(0).normal(size=(1000, 8)).astype(np.float32)
>>> boxes = build_boxes(rows)
>>> q = rows[[10, 500]] + 0.01
>>> brute_force(rows, q)[0].tolist() == box_search(rows, boxes, q)[0].tolist() == [10, 500]
True
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np
from numba import njit, prange

from ..._threads import capped_threads
from ...errors import SkeletalError

SMALL = 16  # rows per small box
LARGE = 64  # rows per large box (a multiple of SMALL)
TOP = 2048  # rows per top box (a multiple of LARGE)


class Boxes(NamedTuple):
    """The search structure of some rows: ``order`` (F,) the rows' indices in k-d order, ``rows``
    (F, D) the rows in that order, and the per-column bounds (B, D) of every run of SMALL and of
    LARGE consecutive rows in it; ``position`` the inverse of ``order``; the bounds of every run of
    :data:`TOP` rows."""

    order: np.ndarray
    rows: np.ndarray
    small_min: np.ndarray
    small_max: np.ndarray
    large_min: np.ndarray
    large_max: np.ndarray
    position: np.ndarray  # (F,) each original row's place in ``order`` (its inverse)
    top_min: np.ndarray
    top_max: np.ndarray


def kd_order(rows: np.ndarray) -> np.ndarray:
    """A permutation (F,) of the rows that puts near rows next to each other: the rows are split in
    two at the median of the column they vary most along, again and again, down to runs of
    :data:`SMALL`; splits fall on multiples of :data:`TOP` (LARGE, SMALL for shorter runs), so every
    run of TOP (LARGE, SMALL) consecutive rows of the order is one subtree (a box around near rows)."""
    F = len(rows)
    order = np.arange(F)
    stack = [(0, F)]
    while stack:
        a, b = stack.pop()
        n = b - a
        if n <= SMALL:
            continue
        unit = TOP if n > 2 * TOP else LARGE if n > 2 * LARGE else SMALL
        half = -(-(n // 2) // unit) * unit
        if half >= n:
            half = n - unit if n > unit else n // 2
        idx = order[a:b]
        sub = rows[idx]
        column = int(np.argmax(sub.var(axis=0)))
        order[a:b] = idx[np.argpartition(sub[:, column], half - 1)]
        stack.append((a, a + half))
        stack.append((a + half, b))
    return order


def build_boxes(rows: np.ndarray) -> Boxes:
    """The search structure of ``rows`` (F, D) float32: :func:`kd_order`, the rows in it, and the
    boxes of its runs (the last runs may be shorter)."""
    rows = _rows(rows)
    F, D = rows.shape
    if F == 0:
        empty = np.zeros((0, D), np.float32)
        return Boxes(np.zeros(0, np.int64), empty, empty, empty, empty, empty, np.zeros(0, np.int64), empty, empty)
    order = kd_order(rows).astype(np.int64)
    ordered = np.ascontiguousarray(rows[order])

    def bounds(size: int) -> tuple[np.ndarray, np.ndarray]:
        count = -(-F // size)
        pad = count * size - F
        lo = np.concatenate([ordered, np.repeat(ordered[-1:], pad, axis=0)]).reshape(count, size, D)
        return np.ascontiguousarray(lo.min(axis=1)), np.ascontiguousarray(lo.max(axis=1))

    small_min, small_max = bounds(SMALL)
    large_min, large_max = bounds(LARGE)
    top_min, top_max = bounds(TOP)
    position = np.empty(F, np.int64)
    position[order] = np.arange(F)
    return Boxes(order, ordered, small_min, small_max, large_min, large_max, position, top_min, top_max)


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
def _box_bound(lo, hi, b, query, best):
    """Squared distance of the query to box b (each term no larger than any row's); stops once above ``best``."""
    d = np.float32(0.0)
    for c in range(lo.shape[1]):
        q = query[c]
        if q < lo[b, c]:
            e = lo[b, c] - q
        elif q > hi[b, c]:
            e = q - hi[b, c]
        else:
            e = np.float32(0.0)
        d += e * e
        if d > best:
            break
    return d


@njit(cache=True)
def _brute_one(rows, query):
    best = np.float32(np.inf)
    best_i = -1
    for i in range(rows.shape[0]):
        d = _distance(rows, i, query, best)
        if d < best:
            best, best_i = d, i
    return best_i, best


@njit(cache=True, inline="always")
def _scan_large(order, rows, small_min, small_max, lb, query, best, best_i):
    """Rows (in k-d order) of large box lb whose small box is not above ``best``: the (best, original
    index) pair, the lower original index on equal distances (as brute force, which meets it first)."""
    F = rows.shape[0]
    per_large = LARGE // SMALL
    for sb in range(lb * per_large, min((lb + 1) * per_large, small_min.shape[0])):
        if _box_bound(small_min, small_max, sb, query, best) > best:
            continue
        for i in range(sb * SMALL, min((sb + 1) * SMALL, F)):
            d = _distance(rows, i, query, best)
            if d < best or (d == best and order[i] < best_i):
                best, best_i = d, order[i]
    return best, best_i


@njit(cache=True)
def _box_one(order, rows, small_min, small_max, large_min, large_max, top_min, top_max, query, scratch, hint):
    """The nearest row (its original index), best first over two levels of boxes: every top box's
    bound, then the top boxes in increasing order of bound until the next is above the best distance
    found (no row in it or in any later one can be nearer); in each, its large boxes' bounds, the
    nearest scanned first, then the others not above the best (their small boxes the same way, then
    row by row). ``hint`` (a row in k-d order, or -1): a row whose distance starts as the best (a
    previous answer: boxes farther than it are never opened); ties still go to the lower original
    index, as brute force gives them. ``scratch`` (top boxes + LARGE // ... ) float32: the bounds."""
    inf = np.float32(np.inf)
    best, best_i = inf, -1
    if hint >= 0:
        best, best_i = _distance(rows, hint, query, inf), order[hint]
    n_top = top_min.shape[0]
    n_large = large_min.shape[0]
    per_top = TOP // LARGE
    for t in range(n_top):
        scratch[t] = _box_bound(top_min, top_max, t, query, best)
    ranked = np.argsort(scratch[:n_top], kind="quicksort")
    for k in range(n_top):
        t = ranked[k]
        if scratch[t] > best:
            break
        first = t * per_top
        last = min(first + per_top, n_large)
        nearest = first
        for lb in range(first, last):
            scratch[n_top + lb - first] = _box_bound(large_min, large_max, lb, query, best)
            if scratch[n_top + lb - first] < scratch[n_top + nearest - first]:
                nearest = lb
        if scratch[n_top + nearest - first] <= best:
            best, best_i = _scan_large(order, rows, small_min, small_max, nearest, query, best, best_i)
        for lb in range(first, last):
            if lb != nearest and scratch[n_top + lb - first] <= best:
                best, best_i = _scan_large(order, rows, small_min, small_max, lb, query, best, best_i)
    return best_i, best


@njit(cache=True, parallel=True)
def brute_force_kernel(rows, queries, index, cost):
    """Every query's nearest row (index (N,) int64, cost (N,) float32), queries in parallel."""
    for n in prange(queries.shape[0]):
        index[n], cost[n] = _brute_one(rows, queries[n])


@njit(cache=True, parallel=True)
def box_search_kernel(order, rows, small_min, small_max, large_min, large_max, top_min, top_max, queries, index, cost,
                      scratch, hints):
    """:func:`brute_force_kernel`'s answer through the bounding boxes, queries in parallel;
    ``scratch`` (threads, :func:`scratch_size`) float32; ``hints`` (N,) rows in k-d order or -1."""
    for n in prange(queries.shape[0]):
        index[n], cost[n] = _box_one(order, rows, small_min, small_max, large_min, large_max, top_min, top_max,
                                     queries[n], scratch[numba.get_thread_id()], hints[n])


@njit(cache=True)
def brute_force_serial(rows, queries, index, cost):
    """:func:`brute_force_kernel` on one thread (one query: no thread pool)."""
    for n in range(queries.shape[0]):
        index[n], cost[n] = _brute_one(rows, queries[n])


@njit(cache=True)
def box_search_serial(order, rows, small_min, small_max, large_min, large_max, top_min, top_max, queries, index,
                      cost, scratch, hints):
    """:func:`box_search_kernel` on one thread."""
    for n in range(queries.shape[0]):
        index[n], cost[n] = _box_one(order, rows, small_min, small_max, large_min, large_max, top_min, top_max,
                                     queries[n], scratch[0], hints[n])


def scratch_size(boxes: Boxes) -> int:
    """Floats of per-thread scratch the box search needs: the top boxes' bounds and one top box's
    large boxes' bounds."""
    return len(boxes.top_min) + TOP // LARGE


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
    few frames ago; its distance bounds the search from the start (faster, the same answer)."""
    rows = _rows(rows)
    q = _queries(queries, rows.shape[1])
    if boxes.rows.shape != rows.shape or boxes.order.shape != (len(rows),):
        raise SkeletalError("the boxes were not built from these rows")
    index = np.empty(len(q), np.int64)
    cost = np.empty(len(q), np.float32)
    if len(rows) == 0:
        index[:], cost[:] = -1, np.inf
        return index, cost
    at = _hint_rows(boxes, hints, len(q))
    arrays = (*boxes[:6], boxes.top_min, boxes.top_max)
    if len(q) == 1:
        box_search_serial(*arrays, q, index, cost, np.empty((1, scratch_size(boxes)), np.float32), at)
    else:
        scratch = np.empty((numba.config.NUMBA_NUM_THREADS, scratch_size(boxes)), np.float32)
        with capped_threads():
            box_search_kernel(*arrays, q, index, cost, scratch, at)
    return index, cost


def _hint_rows(boxes: Boxes, hints: np.ndarray | None, count: int) -> np.ndarray:
    """The hints' positions in k-d order (-1 where none)."""
    if hints is None:
        return np.full(count, -1, np.int64)
    h = np.asarray(hints)
    if h.shape != (count,) or not np.issubdtype(h.dtype, np.integer):
        raise SkeletalError(f"hints must be {count} integer row indices (-1: none), got {h.dtype} {h.shape}")
    F = len(boxes.order)
    if ((h < -1) | (h >= F)).any():
        raise SkeletalError(f"hints must be row indices in 0..{F - 1} or -1")
    return np.where(h >= 0, boxes.position[np.maximum(h, 0)], -1).astype(np.int64)
