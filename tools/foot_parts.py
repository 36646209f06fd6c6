"""Where foot placement's range spends its cycles, part by part, on one thread and on two.

    PYTHONPATH=src python tools/foot_parts.py [threads ...]        # default: 1 2

A copy of ``playback/footrange.py`` is written to a temporary package with ``rdtsc`` stamps (LLVM's
``readcyclecounter``) between its loops, and a copy of ``foot_kernel`` that calls it; it runs phase 3
with the update's clocks and blend (what ``FootFrame`` runs) on a Mixer of 100 Soldier walkers on
terrain, and prints each part's cycles per character as microseconds (the TSC's rate measured against
``time.perf_counter``), summed over the threads, median of 9 blocks of 200 frames:

    blend        the update's clocks and blend (``clock_and_blend``) of each block
    loop1        contact weights, the probe's rows, the foot targets and locks, the terrain's arguments
      contact    of which ``_contact_one``
      probe      of which the probe's world rows
    sincos       the block's terrain sines and cosines
    heights      ground heights, reach limits, the pelvis spring
    pelvis+gather  the pelvis' move and the legs into the lanes
    lanes        ``leg_lanes``
    write+world  the legs' rotations written, every world row and palette entry
    range        the whole range

On two threads a part that costs more per character than on one thread is where the threads get in
each other's way (this found the job's shared reference count: docs/guides/performance.md, "The job's
reference count"). The stamps are not serialising: a part's cost can show in its neighbour. Compare
parts within one run; between processes the whole frame moves by a few percent.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
import tempfile
import time

os.environ.setdefault("SKELETAL_NO_FALLBACK", "1")

import numba
import numpy as np

import skeletal._threads as threads_module
from skeletal._aligned import aligned_zeros
from foot_ratio import planned_walkers  # (this folder: the same scene as tools/foot_ratio.py)

PARTS = ("blend", "loop1", "sincos", "heights", "pelvis+gather", "lanes", "write+world", "range", "contact", "probe")
_COLUMNS = [0, 1, 2, 3, 4, 5, 6, 7, 12, 13]  # the stats columns of PARTS

_RDTSC = '''
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


@intrinsic
def rdtsc(typingctx):
    def codegen(context, builder, signature, args):
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(64), []),
                                            "llvm.readcyclecounter")
        return builder.call(fn, [])
    return types.uint64(), codegen
'''

_KERNEL = '''
import numpy as np
from numba import njit, prange
from skeletal.playback.jobs import field
from .stamped_range import foot_range


@njit(parallel=True)
def foot_kernel(job, phase, chunks, update, stats):
    n = field(job, "pose").shape[0]
    chunks = max(min(n, chunks), 1)
    for c in prange(chunks):
        foot_range(job, np.int64(phase), np.int64(c), np.int64(chunks), update, stats)
'''

# (a line of footrange.py, the stats column the time since the last stamp goes to); "start" opens a block
_MARKS = (
    ("        if update is not None:  # FootFrame", "start"),
    ("        # each character's contact weights, world rows", 0),
    ("        if phase == 1:\n            continue", 1),
    ("        fresh_points = 0  # counted again below", 2),
    ("        # then each one's pelvis moved", 3),
    ("        # the block's legs solved in SIMD lanes", 4),
    ("        for b in range(b0, b1):\n            solved = solve[b - b0]", 5),
)


def stamped_source(source: str) -> str:
    """footrange.py's text with the stamps and a ``stats`` (threads, 16) uint64 argument added, its
    relative imports made absolute (the copy lives outside the package). Raises if a marked line moved."""
    text = re.sub(r"^from \.\.(\w)", r"from skeletal.\1", source, flags=re.M)
    text = re.sub(r"^from \. import", "from skeletal.playback import", text, flags=re.M)
    text = re.sub(r"^from \.(\w)", r"from skeletal.playback.\1", text, flags=re.M)
    text = text.replace("import numpy as np\n", "import numpy as np\nfrom .rdtsc import rdtsc\n", 1)
    text = text.replace("def foot_range(job, phase, c, chunks, update):",
                        "def foot_range(job, phase, c, chunks, update, stats):")
    for line, column in _MARKS:
        if text.count(line) != 1:
            raise SystemExit(f"foot_parts: footrange.py changed; no single line {line.strip()!r} to stamp")
        indent = re.match(r" *", line).group(0)
        if column == "start":
            stamp = f"{indent}t_now = rdtsc(); stats[tid, 6] += t_now - t_prev; t_prev = t_now\n"
        else:
            stamp = f"{indent}t_now = rdtsc(); stats[tid, {column}] += t_now - t_prev; t_prev = t_now\n"
        text = text.replace(line, stamp + line)
    extra = (
        ("    n = pose.shape[0]\n", "    n = pose.shape[0]\n    t_prev = rdtsc()\n    t_start = t_prev\n"),
        ("    keep_alive(li_own, lo_own)",
         "    t_now = rdtsc()\n    stats[tid, 6] += t_now - t_prev\n    stats[tid, 7] += t_now - t_start\n"
         "    keep_alive(li_own, lo_own)"),
        ("                _contact_one(b, job)\n",
         "                t_c0 = rdtsc()\n                _contact_one(b, job)\n"
         "                t_c1 = rdtsc()\n                stats[tid, 12] += t_c1 - t_c0\n"),
        ("                elif scalars[6] == 0.0:  # the world rows are not current yet\n",
         "                    stats[tid, 13] += rdtsc() - t_c1\n"
         "                elif scalars[6] == 0.0:  # the world rows are not current yet\n"),
    )
    for old, new in extra:
        if text.count(old) != 1:
            raise SystemExit(f"foot_parts: footrange.py changed; no single line {old.strip()!r} to stamp")
        text = text.replace(old, new)
    return text


def stamped_kernel():
    """The stamped copy written to a temporary package and imported: its ``foot_kernel``."""
    import skeletal.playback.footrange as footrange

    folder = tempfile.mkdtemp(prefix="foot_parts_")
    package = os.path.join(folder, "foot_parts_copy")
    os.makedirs(package)
    with open(footrange.__file__) as f:
        source = f.read()
    for name, text in (("__init__.py", ""), ("rdtsc.py", _RDTSC), ("stamped_range.py", stamped_source(source)),
                       ("kernel.py", _KERNEL)):
        with open(os.path.join(package, name), "w") as f:
            f.write(text)
    sys.path.insert(0, folder)
    return importlib.import_module("foot_parts_copy.kernel").foot_kernel


def tsc_ghz() -> float:
    """The cycle counter's rate against time.perf_counter, over 0.2 s."""
    from numba import njit

    from foot_parts_copy.rdtsc import rdtsc

    stamp = njit(lambda: rdtsc())
    stamp()
    t0, c0 = time.perf_counter(), stamp()
    time.sleep(0.2)
    t1, c1 = time.perf_counter(), stamp()
    return (c1 - c0) / (t1 - t0) / 1e9


def main(argv) -> int:
    thread_counts = [int(a) for a in argv[1:]] or [1, 2]
    threads_module._NO_CAP = True  # the chosen thread count, whatever the load
    kernel = stamped_kernel()
    ghz = tsc_ghz()
    asset, count, frame = planned_walkers()
    update, foot = (frame.update_job, 1 / 60), frame.foot_job
    print(f"{asset.name} Walk, Mixer of {count} on terrain; us a character, all threads' cycles at {ghz:.3f} GHz")
    print("threads " + " ".join(f"{p:>13}" for p in PARTS))
    for threads in thread_counts:
        numba.set_num_threads(threads)
        # a row of 16 counters (128 bytes) per thread, from a cache line: two threads' stamps never
        # write one line (numpy's 16-byte placement put one row's end and the next's start in one)
        stats = aligned_zeros((max(thread_counts) + 2, 16), np.uint64)
        for _ in range(100):
            kernel(foot, 3, threads, update, stats)
        rows = []
        for _ in range(9):
            stats[:] = 0
            for _ in range(200):
                kernel(foot, 3, threads, update, stats)
            rows.append(stats[:, _COLUMNS].astype(float).sum(0) / 200 / ghz / 1e3 / count)
        print(f"{threads:>7} " + " ".join(f"{v:13.4f}" for v in np.median(np.array(rows), 0)))
    print(f"load {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
