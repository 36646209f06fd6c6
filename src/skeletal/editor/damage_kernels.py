"""Compiled parts of the compositor's damage tracking (see :mod:`.compose`): what changed between two
frames' versions of one Dear ImGui draw list, and which screen tiles that touches.

Contract: a draw list is ``words`` (V, 5) uint32 (``ImDrawVert``: pos.x, pos.y, uv.x, uv.y as float32
bits, colour), ``pos`` the same memory as (V, 5) float32 (columns 0-1 are the position in window
pixels), ``idx`` (N,) uint32, ``cmds`` (C, 8) float64 (clip x0 y0 x1 y1, texture, index offset,
vertex offset, element count) and ``cmd_bits`` (C, 5) uint64, the first five columns' bits (what a
triangle's identity includes besides its corners). Boxes are (K, 4) float64 x0 y0 x1 y1 in window
pixels, one pixel wider than the triangle on each side and cut to its command's clip rectangle.

>>> boxes = changed_boxes(new.vtx, new.pos, new.idx, new.cmds, new.cmd_bits,      # doctest: +SKIP
...                       old.vtx, old.pos, old.idx, old.cmds, old.cmd_bits, same_shape=True)
"""

from __future__ import annotations

import numba
import numpy as np

_MIX = np.uint64(0x9E3779B97F4A7C15)  # odd: multiplying by it permutes 64-bit values


@numba.njit(cache=True, nogil=True)
def _triangle_count(idx, cmds) -> int:
    total = 0
    for c in range(cmds.shape[0]):
        n = int(cmds[c, 7])
        if n >= 3:
            total += n // 3
    return total if idx.shape[0] > 0 else 0


@numba.njit(cache=True, nogil=True)
def _corners(words, idx, cmds):
    """(T, 3) vertex index of each drawn triangle's corners and (T,) its command."""
    t_count = _triangle_count(idx, cmds)
    corner = np.zeros((t_count, 3), np.int64)
    cmd_of = np.zeros(t_count, np.int64)
    v_last = words.shape[0] - 1
    i_last = idx.shape[0] - 1
    t = 0
    if v_last < 0:
        return corner[:0], cmd_of[:0]
    for c in range(cmds.shape[0]):
        n = int(cmds[c, 7])
        if n < 3:
            continue
        first, base = int(cmds[c, 5]), int(cmds[c, 6])
        for k in range(n // 3):
            for j in range(3):
                corner[t, j] = min(int(idx[min(first + 3 * k + j, i_last)]) + base, v_last)
            cmd_of[t] = c
            t += 1
    return corner, cmd_of


@numba.njit(cache=True, nogil=True, forceinline=True)
def _put_box(out, k, pos, corner, t, cmds, c):
    x0 = y0 = np.inf
    x1 = y1 = -np.inf
    for j in range(3):
        x, y = pos[corner[t, j], 0], pos[corner[t, j], 1]
        x0, y0, x1, y1 = min(x0, x), min(y0, y), max(x1, x), max(y1, y)
    out[k, 0] = max(x0 - 1.0, cmds[c, 0])
    out[k, 1] = max(y0 - 1.0, cmds[c, 1])
    out[k, 2] = min(x1 + 1.0, cmds[c, 2])
    out[k, 3] = min(y1 + 1.0, cmds[c, 3])


@numba.njit(cache=True, nogil=True)
def _hashes(words, corner, cmd_of, cmd_bits):
    """(T,) uint64: each triangle's corners (all five words each), clip rectangle and texture."""
    out = np.empty(corner.shape[0], np.uint64)
    for t in range(corner.shape[0]):
        h = np.uint64(0)
        for j in range(3):
            for w in range(5):
                h = (h ^ np.uint64(words[corner[t, j], w])) * _MIX
                h ^= h >> np.uint64(29)
        for w in range(cmd_bits.shape[1]):
            h = (h ^ cmd_bits[cmd_of[t], w]) * _MIX
            h ^= h >> np.uint64(29)
        out[t] = h
    return out


@numba.njit(cache=True, nogil=True)
def _missing_from(h, other_sorted):
    """(T,) bool: which of hashes ``h`` are not among ``other_sorted``."""
    pos = np.searchsorted(other_sorted, h)
    out = np.ones(h.shape[0], np.bool_)
    n = other_sorted.shape[0]
    for t in range(h.shape[0]):
        if pos[t] < n and other_sorted[pos[t]] == h[t]:
            out[t] = False
    return out


@numba.njit(cache=True, nogil=True)
def changed_boxes(new_words, new_pos, new_idx, new_cmds, new_bits, old_words, old_pos, old_idx, old_cmds, old_bits,
                  same_shape):
    """Boxes (K, 4) of what differs between a draw list's old and new version. ``same_shape`` (same
    indices and commands; vertices may differ): the triangles touching a changed vertex, before and
    after; otherwise the triangles (hashed with their clip rectangle and texture) that appeared or
    vanished."""
    corner_n, cmd_n = _corners(new_words, new_idx, new_cmds)
    if same_shape:
        corner_o, cmd_o = corner_n, cmd_n
        moved = np.zeros(new_words.shape[0], np.bool_)
        for v in range(min(new_words.shape[0], old_words.shape[0])):
            for w in range(5):
                if new_words[v, w] != old_words[v, w]:
                    moved[v] = True
                    break
        pick_n = np.zeros(corner_n.shape[0], np.bool_)
        for t in range(corner_n.shape[0]):
            pick_n[t] = moved[corner_n[t, 0]] or moved[corner_n[t, 1]] or moved[corner_n[t, 2]]
        pick_o = pick_n
    else:
        corner_o, cmd_o = _corners(old_words, old_idx, old_cmds)
        h_n = _hashes(new_words, corner_n, cmd_n, new_bits)
        h_o = _hashes(old_words, corner_o, cmd_o, old_bits)
        pick_n = _missing_from(h_n, np.sort(h_o))
        pick_o = _missing_from(h_o, np.sort(h_n))
    out = np.empty((int(pick_n.sum()) + int(pick_o.sum()), 4))
    k = 0
    for t in range(corner_n.shape[0]):
        if pick_n[t]:
            _put_box(out, k, new_pos, corner_n, t, new_cmds, cmd_n[t])
            k += 1
    for t in range(corner_o.shape[0]):
        if pick_o[t]:
            _put_box(out, k, old_pos, corner_o, t, old_cmds, cmd_o[t])
            k += 1
    return out


@numba.njit(cache=True, nogil=True)
def all_boxes(words, pos, idx, cmds):
    """Boxes (T, 4) of every triangle of a draw list (one that appeared or vanished whole)."""
    corner, cmd_of = _corners(words, idx, cmds)
    out = np.empty((corner.shape[0], 4))
    for t in range(corner.shape[0]):
        _put_box(out, t, pos, corner, t, cmds, cmd_of[t])
    return out


@numba.njit(cache=True, nogil=True)
def dirty_tiles(boxes, tile, grid_w, grid_h):
    """(grid_h, grid_w) bool: the ``tile`` x ``tile`` pixel tiles any non-empty box touches."""
    dirty = np.zeros((grid_h, grid_w), np.bool_)
    for k in range(boxes.shape[0]):
        x0, y0, x1, y1 = boxes[k, 0], boxes[k, 1], boxes[k, 2], boxes[k, 3]
        if not (x1 > x0 and y1 > y0):
            continue
        a = min(max(int(np.floor(x0 / tile)), 0), grid_w)
        b = min(max(int(np.floor(y0 / tile)), 0), grid_h)
        c = min(max(int(np.ceil(x1 / tile)), 0), grid_w)
        d = min(max(int(np.ceil(y1 / tile)), 0), grid_h)
        for gy in range(b, d):
            for gx in range(a, c):
                dirty[gy, gx] = True
    return dirty
