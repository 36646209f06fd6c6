"""Arrays whose data begin on a cache line (64 bytes, one AVX-512 vector).

numpy's allocator aligns to 16 bytes, so an array's start falls at random on 0, 16, 32 or 48 bytes
into a cache line, and a (4, 4) float64 matrix then spans three lines instead of two. A Mixer's
update, whose world pass reads and writes such matrices and rows, measured 0.364-0.369 us a
character on two threads with its outputs aligned, against 0.359-0.394 as numpy placed them (Soldier,
Mixer of 100, twelve mixers in one process; docs/guides/performance.md). The playback state's
per-instance arrays are allocated here.

>>> a = aligned_zeros((100, 65, 4, 4))
>>> a.ctypes.data % ALIGN, a.flags.c_contiguous
(0, True)
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

#: the alignment of the arrays' first byte
ALIGN = 64


def aligned_empty(shape: int | tuple[int, ...], dtype: npt.DTypeLike = np.float64) -> np.ndarray:
    """An uninitialised C-contiguous array whose data begin on an ``ALIGN``-byte boundary (it keeps its
    buffer alive through ``.base``)."""
    dtype = np.dtype(dtype)
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    buffer = np.empty(nbytes + ALIGN, np.uint8)
    start = -buffer.ctypes.data % ALIGN
    return buffer[start:start + nbytes].view(dtype).reshape(shape)


def aligned_zeros(shape: int | tuple[int, ...], dtype: npt.DTypeLike = np.float64) -> np.ndarray:
    """:func:`aligned_empty` filled with zeros."""
    out = aligned_empty(shape, dtype)
    out.fill(0)
    return out


def aligned_copy(array: npt.ArrayLike, dtype: npt.DTypeLike | None = None) -> np.ndarray:
    """A C-contiguous, aligned copy of ``array`` (as ``dtype`` when given)."""
    array = np.asarray(array)
    out = aligned_empty(array.shape, array.dtype if dtype is None else dtype)
    out[...] = array
    return out
