"""Nearest-frame search in a motion-matching database: brute force and bounding boxes, batched.

Both searches take N queries (N, D) against F database rows (F, D) (float32, normalised and weighted:
:class:`~skeletal.playback.locomotion.database.MatchingDatabase`) and return, per query, the row with
the smallest squared distance, the first such row on ties, and that distance. One compiled call
runs every query, in parallel over queries (numba's threads, capped like the crowd's while other
processes keep the CPUs busy: :mod:`skeletal._threads`).

The accelerated search is D. Holden's Motion-Matching ``database.h`` scheme (the per-column minimum
and maximum of every run of :data:`SMALL` consecutive rows and of every run of :data:`LARGE`) over the
rows put in k-d order first (:func:`kd_order`: recursive median splits), so that a run holds near
rows, not 1 s of one clip (whose feet sweep the whole stride). It computes every large box's distance
bound, searches the rows of the nearest box first (a good first guess), then every box whose bound
is not above the best distance so far, skipping small boxes the same way; a row's distance stops adding
up once it passes the best. It returns the **same row** as brute force, bit for bit: every distance
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


class Boxes(NamedTuple):
    """The search structure of some rows: ``order`` (F,) the rows' indices in k-d order, ``rows``
    (F, D) the rows in that order, and the per-column bounds (B, D) of every run of SMALL and of
    LARGE consecutive rows in it."""

    order: np.ndarray
    rows: np.ndarray
    small_min: np.ndarray
    small_max: np.ndarray
    large_min: np.ndarray
    large_max: np.ndarray


def kd_order(rows: np.ndarray) -> np.ndarray:
    """A permutation (F,) of the rows that puts near rows next to each other: the rows are split in
    two at the median of the column they vary most along, again and again, down to runs of
    :data:`SMALL`; splits fall on multiples of :data:`LARGE` (or SMALL for short runs), so every run of
    LARGE (and SMALL) consecutive rows of the order is one subtree (a box around near rows)."""
    F = len(rows)
    order = np.arange(F)
    stack = [(0, F)]
    while stack:
        a, b = stack.pop()
        n = b - a
        if n <= SMALL:
            continue
        unit = LARGE if n > 2 * LARGE else SMALL
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
        return Boxes(np.zeros(0, np.int64), empty, empty, empty, empty, empty)
    order = kd_order(rows).astype(np.int64)
    ordered = np.ascontiguousarray(rows[order])

    def bounds(size: int) -> tuple[np.ndarray, np.ndarray]:
        count = -(-F // size)
        pad = count * size - F
        lo = np.concatenate([ordered, np.repeat(ordered[-1:], pad, axis=0)]).reshape(count, size, D)
        return np.ascontiguousarray(lo.min(axis=1)), np.ascontiguousarray(lo.max(axis=1))

    small_min, small_max = bounds(SMALL)
    large_min, large_max = bounds(LARGE)
    return Boxes(order, ordered, small_min, small_max, large_min, large_max)


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
def _box_one(order, rows, small_min, small_max, large_min, large_max, query, bounds):
    """The nearest row (its original index): every large box's bound first (into ``bounds``), the rows
    of the nearest box (a good first guess), then every other box whose bound is not above the best
    distance found so far."""
    inf = np.float32(np.inf)
    first = 0
    for lb in range(large_min.shape[0]):
        bounds[lb] = _box_bound(large_min, large_max, lb, query, inf)
        if bounds[lb] < bounds[first]:
            first = lb
    best, best_i = _scan_large(order, rows, small_min, small_max, first, query, inf, -1)
    for lb in range(large_min.shape[0]):
        if lb != first and bounds[lb] <= best:
            best, best_i = _scan_large(order, rows, small_min, small_max, lb, query, best, best_i)
    return best_i, best


@njit(cache=True, parallel=True)
def brute_force_kernel(rows, queries, index, cost):
    """Every query's nearest row (index (N,) int64, cost (N,) float32), queries in parallel."""
    for n in prange(queries.shape[0]):
        index[n], cost[n] = _brute_one(rows, queries[n])


@njit(cache=True, parallel=True)
def box_search_kernel(order, rows, small_min, small_max, large_min, large_max, queries, index, cost, bounds):
    """:func:`brute_force_kernel`'s answer through the bounding boxes, queries in parallel;
    ``bounds`` (threads, large boxes) float32 scratch."""
    for n in prange(queries.shape[0]):
        index[n], cost[n] = _box_one(order, rows, small_min, small_max, large_min, large_max, queries[n],
                                     bounds[numba.get_thread_id()])


@njit(cache=True)
def brute_force_serial(rows, queries, index, cost):
    """:func:`brute_force_kernel` on one thread (one query: no thread pool)."""
    for n in range(queries.shape[0]):
        index[n], cost[n] = _brute_one(rows, queries[n])


@njit(cache=True)
def box_search_serial(order, rows, small_min, small_max, large_min, large_max, queries, index, cost, bounds):
    """:func:`box_search_kernel` on one thread."""
    for n in range(queries.shape[0]):
        index[n], cost[n] = _box_one(order, rows, small_min, small_max, large_min, large_max, queries[n], bounds[0])


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


def box_search(rows: np.ndarray, boxes: Boxes, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`brute_force`'s answer (the same rows) through ``boxes`` (:func:`build_boxes` of ``rows``)."""
    rows = _rows(rows)
    q = _queries(queries, rows.shape[1])
    if boxes.rows.shape != rows.shape or boxes.order.shape != (len(rows),):
        raise SkeletalError("the boxes were not built from these rows")
    index = np.empty(len(q), np.int64)
    cost = np.empty(len(q), np.float32)
    if len(rows) == 0:
        index[:], cost[:] = -1, np.inf
    elif len(q) == 1:
        box_search_serial(*boxes, q, index, cost, np.empty((1, len(boxes.large_min)), np.float32))
    else:
        bounds = np.empty((numba.config.NUMBA_NUM_THREADS, len(boxes.large_min)), np.float32)
        with capped_threads():
            box_search_kernel(*boxes, q, index, cost, bounds)
    return index, cost
