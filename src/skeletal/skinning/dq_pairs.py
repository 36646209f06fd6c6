"""Hemisphere pairs for :func:`skeletal.skinning.dqs.skin_dq_into`'s ``pairs``: the joint pairs that decide a
mesh's per-vertex hemisphere signs (found once per mesh, :func:`dq_hemisphere_pairs`), the per-frame walk that
gives each joint one sign putting every pair in one hemisphere (:func:`_hemisphere_checks`), and the
16-vertex blocks that must keep the per-vertex signs where a few pairs cannot (:func:`_failing_runs`). A block
is 16 vertices on every target: one planar group of the DQS kernel on AVX-512, two of 8 on 256-bit targets
(:func:`~skeletal.skinning.ir.planar_lanes`), so a run of blocks is whole groups either way (and the mesh's
partial last block ends in the two-vertex kernel, as in a whole-mesh call). The
design, and why the output is the sign table's bit for bit, is in :mod:`skeletal.skinning.dqs` ("Hemisphere
pairs").

>>> import numpy as np
>>> found = dq_hemisphere_pairs(np.array([[0, 1], [1, 2]]), np.full((2, 2), 0.5, np.float32))
>>> found.pairs.tolist(), found.starts.tolist(), found.blocks.tolist()
([[0, 1], [1, 2]], [0, 1, 2], [0, 0])
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit
from numba.core import types
from numba.extending import overload

from ..errors import SkeletalError
from .ir import LANES


@njit(cache=True, nogil=True)
def _hemisphere_checks(packed, pairs, flips, failed):
    """Per joint a sign (``flips`` (J,) int32: 1 keep, -1 negate qr and qd) such that the joint pairs of
    ``pairs`` (:func:`dq_hemisphere_pairs`) lie in one hemisphere: ``qr_a . qr_b`` (the float32 dot product
    of :func:`_signed_records`) negative exactly where the two signs differ. The pairs are taken in order,
    each joint's sign fixed by the first pair that reaches it (a component's first joint keeps its own);
    the later pairs are checks, and a check that fails is listed in ``failed`` (its pair index) and the
    walk goes on. Returns the number of failing checks (their indices in ``failed[:count]``), or
    ``len(failed) + 1`` once more fail than ``failed`` holds (the walk then stops), or -1 where a pair
    names a joint outside 0 .. J - 1. Every pair not listed holds for the returned signs (tree pairs by
    construction)."""
    n = packed.shape[0]
    for j in range(n):
        flips[j] = 0  # not yet fixed
    count = 0
    for i in range(pairs.shape[0]):
        a, b = pairs[i, 0], pairs[i, 1]
        if not (0 <= a < n and 0 <= b < n):
            return -1
        dot = (packed[a, 0] * packed[b, 0] + packed[a, 1] * packed[b, 1]) \
            + (packed[a, 2] * packed[b, 2] + packed[a, 3] * packed[b, 3])
        opposite = dot < 0  # as the sign table: 0 and NaN keep the sign
        if flips[a] == 0:
            flips[a] = 1 if flips[b] == 0 else (-flips[b] if opposite else flips[b])
        if flips[b] == 0:
            flips[b] = -flips[a] if opposite else flips[a]
        elif (flips[a] != flips[b]) != opposite:
            if count == failed.shape[0]:
                return count + 1
            failed[count] = i
            count += 1
    return count


@njit(cache=True, nogil=True)
def _hemisphere_signs(packed, pairs, flips):
    """True where :func:`_hemisphere_checks` finds signs (in ``flips``) that put every pair in one
    hemisphere; False where a check fails or a pair names a joint outside 0 .. J - 1."""
    return _hemisphere_checks(packed, pairs, flips, flips[:0]) == 0


#: A frame whose failing pairs touch more than this share of the mesh's LANES-vertex blocks takes the sign
#: table for the whole mesh (the masked path runs the sign-free kernel over every block and the table's
#: over the failing ones again: with the table kernel taking ~1.2x the sign-free one's time, that pays while the
#: failing blocks are fewer than about 1/6 of them).
MASK_SHARE = 0.125


@njit(cache=True, nogil=True)
def _failing_runs(starts, blocks, failed, count, n):
    """The vertex ranges (R, 2) int64 ``[a, e)``, merged, of the LANES-vertex blocks (vertices
    ``LANES * b`` .. ``LANES * b + LANES - 1``, the last clipped to ``n``) that blend a failing pair
    (``failed[:count]``, indices into ``starts``: pair i's blocks are ``blocks[starts[i]:starts[i + 1]]``).
    Empty (0 rows) where the blocks are not this mesh's (``starts`` too short, a block past ``n``) or cover
    more than :data:`MASK_SHARE` of the mesh: the caller then takes the sign table everywhere."""
    nblocks = (n + LANES - 1) // LANES
    none = np.empty((0, 2), np.int64)
    if starts.shape[0] < 1 or nblocks == 0:
        return none
    mark = np.zeros(nblocks, np.bool_)
    total = 0
    limit = MASK_SHARE * nblocks
    for i in range(count):
        p = failed[i]
        if p + 1 >= starts.shape[0]:
            return none
        lo, hi = starts[p], starts[p + 1]
        if not (0 <= lo <= hi <= blocks.shape[0]):
            return none
        for s in range(lo, hi):
            blk = blocks[s]
            if not 0 <= blk < nblocks:
                return none
            if not mark[blk]:
                mark[blk] = True
                total += 1
                if total > limit:
                    return none
    runs = np.empty((total, 2), np.int64)
    r = 0
    blk = 0
    while blk < nblocks:
        if mark[blk]:
            first = blk
            while blk < nblocks and mark[blk]:
                blk += 1
            runs[r, 0], runs[r, 1] = LANES * first, min(LANES * blk, n)
            r += 1
        else:
            blk += 1
    return runs[:r]


@njit(cache=True, nogil=True)
def _span(a):
    """The byte range [lo, hi) that a 2-D array's elements lie in (any strides)."""
    lo = hi = a.ctypes.data
    for d in range(2):
        reach = (a.shape[d] - 1) * a.strides[d]
        if reach < 0:
            lo += reach
        else:
            hi += reach
    return lo, hi + a.itemsize


@njit(cache=True, nogil=True)
def _apart(a, b):
    """Whether two non-empty 2-D arrays' byte ranges are disjoint."""
    a_lo, a_hi = _span(a)
    b_lo, b_hi = _span(b)
    return a_hi <= b_lo or b_hi <= a_lo


def _rows_of(x, a, e):
    """``x[a:e]``, or None for None (compiled: :func:`_rows_of_impl`)."""
    return None if x is None else x[a:e]


@overload(_rows_of)
def _rows_of_impl(x, a, e):
    if isinstance(x, types.NoneType):
        return lambda x, a, e: None
    return lambda x, a, e: x[a:e]


#: :func:`dq_hemisphere_pairs` records joint indices below this (its scratch is two PAIR_JOINTS^2 bool
#: matrices and an int32 one at most: 6 MB); a mesh with others gets the one pair (-1, -1), which never passes (the sign table
#: then serves every frame; the signed-record kernel needs V >= J^2 anyway, a million vertices at this J).
PAIR_JOINTS = 1 << 10


@njit(cache=True, nogil=True)
def _vertex_links(joints, weights, v, n, out):
    """The joint pairs (p, c), p != c, that vertex v links: p its pivot's joint (influence 0 when K <= 2,
    else the first largest weight: the kernels' choice), c the joint of another influence with a non-zero
    weight (only those pairs decide its hemisphere signs: the sign table's row is the pivot's), written to
    ``out`` (at least K rows); returns their number (repeats possible), or -1 where an index lies outside
    0 .. n - 1."""
    k = joints.shape[1]
    pivot = 0
    if k > 2:
        best = weights[v, 0]
        for i in range(1, k):
            if weights[v, i] > best:
                pivot, best = i, weights[v, i]
    p = np.int64(joints[v, pivot])
    if not 0 <= p < n:
        return -1
    count = 0
    for i in range(k):
        if i == pivot or weights[v, i] == 0:
            continue
        c = np.int64(joints[v, i])
        if not 0 <= c < n:
            return -1
        if c != p:
            out[count, 0], out[count, 1] = p, c
            count += 1
    return count


@njit(cache=True, nogil=True)
def _linked_joints(joints, weights, n):
    """(n, n) bool: joints a != b linked where some vertex blends both (:func:`_vertex_links`). Returns
    None where an index lies outside 0 .. n - 1."""
    linked = np.zeros((n, n), np.bool_)
    k = joints.shape[1]
    links = np.empty((k, 2), np.int64)
    for v in range(joints.shape[0]):
        count = _vertex_links(joints, weights, v, n, links)
        if count < 0:
            return None
        for i in range(count):
            a, c = links[i, 0], links[i, 1]
            linked[a, c] = True
            linked[c, a] = True
    return linked


@njit(cache=True, nogil=True)
def _ordered_pairs(linked):
    """The linked pairs (P, 2) int32: first each component's spanning-tree edges in breadth-first order
    (parent, child), then the other pairs (the checks)."""
    n = linked.shape[0]
    total = 0
    for a in range(n):
        for c in range(a + 1, n):
            total += linked[a, c]
    out = np.empty((total, 2), np.int32)
    tree = np.zeros((n, n), np.bool_)
    seen = np.zeros(n, np.bool_)
    queue = np.empty(n, np.int64)
    count = 0
    for root in range(n):
        if seen[root]:
            continue
        seen[root] = True
        head, tail = 0, 1
        queue[0] = root
        while head < tail:
            a = queue[head]
            head += 1
            for c in range(n):
                if linked[a, c] and not seen[c]:
                    seen[c] = True
                    queue[tail] = c
                    tail += 1
                    tree[a, c] = tree[c, a] = True
                    out[count, 0], out[count, 1] = a, c
                    count += 1
    for a in range(n):
        for c in range(a + 1, n):
            if linked[a, c] and not tree[a, c]:
                out[count, 0], out[count, 1] = a, c
                count += 1
    return out


@njit(cache=True, nogil=True)
def _pair_blocks(joints, weights, pairs, n):
    """Per pair of ``pairs`` (indices below ``n``), the LANES-vertex blocks (v // LANES, ascending) with a
    vertex that links it (:func:`_vertex_links`), as ``(starts, blocks)``: pair i's are
    ``blocks[starts[i]:starts[i + 1]]``."""
    index = np.full((n, n), -1, np.int32)
    for i in range(pairs.shape[0]):
        index[pairs[i, 0], pairs[i, 1]] = index[pairs[i, 1], pairs[i, 0]] = i
    k = joints.shape[1]
    links = np.empty((k, 2), np.int64)
    starts = np.zeros(pairs.shape[0] + 1, np.int64)
    last = np.full(pairs.shape[0], -1, np.int64)
    for sweep in range(2):  # count, then fill
        if sweep == 1:
            for i in range(pairs.shape[0]):
                starts[i + 1] += starts[i]
            blocks = np.empty(starts[-1], np.int32)
            fill = starts[:-1].copy()
            last[:] = -1
        for v in range(joints.shape[0]):
            blk = v // LANES
            for i in range(_vertex_links(joints, weights, v, n, links)):
                p = index[links[i, 0], links[i, 1]]
                if last[p] != blk:
                    last[p] = blk
                    if sweep == 0:
                        starts[p + 1] += 1
                    else:
                        blocks[fill[p]] = blk
                        fill[p] += 1
    return starts, blocks


class HemispherePairs(NamedTuple):
    """A mesh's joint pairs for :func:`skin_dq_into`'s ``pairs`` (from :func:`dq_hemisphere_pairs`).

    ``pairs`` (P, 2) int32: the joint pairs that some vertex blends, each group of linked joints' spanning
    tree (breadth first) before the other pairs. ``starts`` (P + 1,) int64 and ``blocks`` int32: pair i is
    blended in the LANES-vertex blocks ``blocks[starts[i]:starts[i + 1]]`` (block b: vertices ``16 b`` ..
    ``16 b + 15``), so that a frame where a few pairs cannot share a hemisphere runs the per-vertex signs on
    those blocks only. ``vertices``: the mesh's vertex count V."""

    pairs: np.ndarray
    starts: np.ndarray
    blocks: np.ndarray
    vertices: int


def dq_hemisphere_pairs(joints: np.ndarray, weights: np.ndarray) -> HemispherePairs:
    """The joint pairs that some vertex blends (both weights non-zero), and where, for :func:`skin_dq_into`'s
    ``pairs``: a :class:`HemispherePairs`. Build it once per mesh (when its joints and weights are bound)
    and pass it with every frame: where the frame's joint rotations let every pair share a hemisphere
    (neighbouring joints of a rig turn less than 180 degrees against each other), the kernel flips the
    palette's signs once per frame instead of per influence, with the same result; where a few pairs
    cannot, the per-vertex signs serve the 16-vertex blocks that blend them, and the whole frame where
    those blocks are many.

    >>> found = dq_hemisphere_pairs(np.array([[0, 1], [1, 2], [2, 0]]), np.full((3, 2), 0.5, np.float32))
    >>> found.pairs.tolist(), found.blocks.tolist()
    ([[0, 1], [0, 2], [1, 2]], [0, 0, 0])
    """
    joints, weights = np.asarray(joints), np.asarray(weights)
    if joints.ndim != 2 or joints.dtype.kind not in "iu" or weights.shape != joints.shape or weights.dtype.kind != "f":
        raise SkeletalError(f"joints and weights must be integer and float (V, K) arrays of one shape, got "
                            f"{joints.dtype} {joints.shape} and {weights.dtype} {weights.shape}")
    top = int(joints.max()) + 1 if joints.size else 0
    n = min(max(top, 0), PAIR_JOINTS)
    linked = _linked_joints(joints, weights, n) if top <= PAIR_JOINTS else None
    if linked is None:
        return HemispherePairs(np.full((1, 2), -1, np.int32), np.zeros(2, np.int64), np.empty(0, np.int32),
                               len(joints))
    pairs = _ordered_pairs(linked)
    starts, blocks = _pair_blocks(joints, weights, pairs, n)
    return HemispherePairs(pairs, starts, blocks, len(joints))


#: ``starts`` and ``blocks`` for a bare (P, 2) pairs array (no blocks: a failing pair sends the frame to the table).
_NO_STARTS, _NO_BLOCKS = np.empty(0, np.int64), np.empty(0, np.int32)
