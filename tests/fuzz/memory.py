"""The fuzz harness's memory-amplification check: an input of N bytes that makes a target's traced
peak allocation exceed ``floor + ratio x N`` is a finding, like a crash (issue 32).

The bound follows the budget rule of :mod:`skeletal.io.budget` (a file may cost a multiple of its own
size), with the fuzzing budget :data:`FUZZ_BUDGET` in place of the 256 MiB floor so that a few hundred
bytes that cost a few hundred megabytes are caught long before ``-rss_limit_mb``. Allocations are
measured with :mod:`tracemalloc`, which numpy reports its arrays to; the peak is reset before each
input, so every input is judged on its own.

>>> run = checked(lambda data: bytearray(100 * len(data)), floor=1 << 20, ratio=64)
>>> run(b"x" * 10)                                     # 1 KB from 10 bytes: within 1 MiB
>>> run(b"x" * 100_000)                                # doctest: +SKIP
AmplificationError: 100000 bytes of input made the target allocate 10.0 MB at its peak ...
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable

from skeletal.io.budget import RATIO, human_bytes

#: The per-file memory budget the harness sets for the readers while fuzzing (SKELETAL_MEMORY_BUDGET).
FUZZ_BUDGET = 32 << 20
#: The amplification bound: an input of N bytes may reach a traced peak of FLOOR + RATIO x N bytes
#: (the budget, plus room for the document and the asset built over it).
FLOOR_BYTES = 2 * FUZZ_BUDGET


class AmplificationError(Exception):
    """A small input made a target allocate far more than its size allows."""


def amplification_limit(size: int, floor: int = FLOOR_BYTES, ratio: int = RATIO) -> int:
    """The most bytes an input of ``size`` bytes may make a target allocate at its peak."""
    return floor + ratio * size


def checked(target: Callable[[bytes], None], *, floor: int = FLOOR_BYTES, ratio: int = RATIO) -> Callable[[bytes], None]:
    """``target``, raising :class:`AmplificationError` after an input whose traced peak allocation is
    over :func:`amplification_limit` (tracemalloc is started on the first call)."""

    def run(data: bytes) -> None:
        if not tracemalloc.is_tracing():
            tracemalloc.start(1)
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        target(data)
        peak = tracemalloc.get_traced_memory()[1] - base
        limit = amplification_limit(len(data), floor, ratio)
        if peak > limit:
            raise AmplificationError(f"{len(data)} bytes of input made the target allocate {human_bytes(peak)} at "
                                     f"its peak, over {human_bytes(limit)} ({human_bytes(floor)} + {ratio} x the input)")

    return run
