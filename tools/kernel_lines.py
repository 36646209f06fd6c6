"""Where a compiled numba kernel spends its time, by source line: Linux ``perf`` samples of the kernel's
machine code, mapped to the Python lines it was compiled from (numba's debug info), inlined callees
included.

    NUMBA_DEBUGINFO=1 NUMBA_CACHE_DIR=/tmp/kernel-lines PYTHONPATH=src python tools/kernel_lines.py [seconds]

The example (``__main__``) profiles foot placement's phase 3 (``foot_kernel``'s ranges, ``footrange.foot_range``) on a Mixer
of 100 Soldier walkers on terrain, one thread: it prints the share of samples per source file and the
hottest lines. For another kernel, call :func:`profile` with its dispatcher and a function that runs it.

How: numba compiles with ``NUMBA_DEBUGINFO=1`` (set before numba loads; the cache directory keeps those
builds apart from the normal ones), the kernel's object code is written out and disassembled with
``objdump -d -l`` (machine-code offsets to ``file:line``), ``perf record -p`` samples this process while
``run`` loops, and each sample inside the kernel is charged to the line of the instruction it hit.
Samples skid by an instruction or two, and a slow instruction's cost often shows on the next one: read
lines in groups (a loop, a call), not one by one. Needs ``perf`` and ``objdump`` (binutils), and a
kernel the process has already compiled.
"""

from __future__ import annotations

import bisect
import collections
import os
import re
import signal
import subprocess
import sys
import tempfile
import time


def _line_table(obj: bytes, workdir: str) -> tuple[list[int], list[tuple[str, int]], int]:
    """Offsets of the object's first text symbol (the kernel) -> (file, line), and its size."""
    path = os.path.join(workdir, "kernel.o")
    with open(path, "wb") as f:
        f.write(obj)
    dis = subprocess.run(["objdump", "-d", "-l", "--no-show-raw-insn", path], capture_output=True, text=True,
                         check=True).stdout
    table: dict[int, tuple[str, int]] = {}
    where = None
    for line in dis.splitlines():
        m = re.match(r"^(/\S+):(\d+)", line)
        if m:
            where = (os.path.basename(m.group(1)), int(m.group(2)))
            continue
        m = re.match(r"^\s+([0-9a-f]+):\s", line)
        if m and where is not None:
            table[int(m.group(1), 16)] = where
    symbols = subprocess.run(["objdump", "-t", path], capture_output=True, text=True, check=True).stdout
    size = max(int(m.group(1), 16) for m in re.finditer(r"^0+ g\s+F \S*text\S*\s+([0-9a-f]+) ", symbols, re.M))
    offsets = sorted(table)
    return offsets, [table[o] for o in offsets], size


def profile(dispatcher, run, seconds: float = 10.0, top: int = 40) -> collections.Counter:
    """Samples of ``dispatcher``'s (one compiled signature) machine code by source line while ``run()``
    is called for ``seconds``; prints files' shares and the ``top`` lines, returns {(file, line): samples}."""
    sig = dispatcher.signatures[0]
    cres = dispatcher.overloads[sig]
    address = cres.library.get_pointer_to_function(cres.fndesc.llvm_func_name)
    try:
        obj = cres.library._get_compiled_object()
    except RuntimeError:
        sys.exit("kernel_lines: the kernel came from numba's cache without its object code; "
                 "run with an empty NUMBA_CACHE_DIR")
    with tempfile.TemporaryDirectory() as workdir:
        offsets, lines, size = _line_table(obj, workdir)
        data = os.path.join(workdir, "perf.data")
        perf = subprocess.Popen(["perf", "record", "-q", "-F", "4999", "-p", str(os.getpid()), "-o", data],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)  # perf attaches
        stop = time.time() + seconds
        while time.time() < stop:
            run()
        perf.send_signal(signal.SIGINT)
        perf.wait()
        ips = subprocess.run(["perf", "script", "-i", data, "-F", "ip"], capture_output=True, text=True).stdout
    counts: collections.Counter = collections.Counter()
    inside = 0
    for text in ips.split():
        offset = int(text, 16) - address
        if 0 <= offset < size:
            inside += 1
            k = bisect.bisect_right(offsets, offset) - 1
            counts[lines[k] if k >= 0 else ("?", 0)] += 1
    files: collections.Counter = collections.Counter()
    for (name, _), n in counts.items():
        files[name] += n
    print(f"{inside} samples in the kernel")
    for name, n in files.most_common():
        print(f"  {name:24s} {n:7d}  {100.0 * n / max(inside, 1):5.1f}%")
    for (name, line), n in counts.most_common(top):
        print(f"  {n:7d}  {100.0 * n / max(inside, 1):5.1f}%  {name}:{line}")
    return counts


def _foot_example(seconds: float) -> None:
    import numba
    import numpy as np

    import skeletal._threads as threads_module
    from skeletal._compile import serial_variant
    from skeletal.playback import footplacement, footrange, kernels
    from foot_ratio import planned_walkers  # (this folder: the same scene as tools/foot_ratio.py)

    threads_module._NO_CAP = True
    numba.set_num_threads(1)
    asset, count, frame = planned_walkers()
    update, stage = serial_variant(kernels.update), serial_variant(footplacement.foot_kernel, "_lines")
    stage(frame.foot_job, 3, 1, None)
    footrange.foot_range(frame.foot_job, np.int64(3), np.int64(0), np.int64(1), None)  # compiled here too

    def run() -> None:
        for _ in range(100):
            update(frame.update_job, None, 1 / 60, kernels.ADVANCE | kernels.BLEND)
            stage(frame.foot_job, 3, 1, None)

    profile(footrange.foot_range, run, seconds)  # the ranges' body: a plain function the kernel calls


if __name__ == "__main__":
    if os.environ.get("NUMBA_DEBUGINFO") != "1":
        sys.exit("kernel_lines: run with NUMBA_DEBUGINFO=1 and an empty NUMBA_CACHE_DIR (see the docstring)")
    os.environ.setdefault("SKELETAL_NO_FALLBACK", "1")
    _foot_example(float(sys.argv[1]) if len(sys.argv) > 1 else 10.0)
