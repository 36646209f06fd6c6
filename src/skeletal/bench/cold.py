"""Bench rows for issue 17's first impressions: the cold first frame and threads on a busy machine.

* **cold first frame**: ``Player(asset).play(clip); update()`` in a fresh Python process with an
  empty numba cache directory, wall clock from the process's launch: with numpy frames while the
  kernels compile in the background (:mod:`skeletal.playback.coldstart`, the default), next to the kernels
  compiled in process (``SKELETAL_NO_FALLBACK=1``) and to the same process run again on the cache
  the first one filled (the warm start every later run gets); and when the same process reaches full
  speed (its mixer running the compiled kernels).
* **busy machine**: the crowd update (1000 characters) and skinning (100k vertices) on all threads
  while another process keeps one core busy spinning, next to one thread under the same spinner,
  interleaved in rounds. Goal: all threads never below one thread.

>>> from skeletal.bench.cold import bench_rows
>>> rows = bench_rows(quick=True)["rows"]                 # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

_FIRST_FRAME = r"""
import json, os, sys, time
t0 = time.perf_counter(); c0 = time.process_time()
from numba.core import event
compiled = set()
class Seen(event.Listener):
    def on_start(self, ev):
        f = getattr(ev.data.get("dispatcher"), "py_func", None)
        if f is not None and (f.__module__ or "").startswith("skeletal"):
            compiled.add(f.__module__ + "." + f.__qualname__)
    def on_end(self, ev):
        pass
event.register("numba:compile", Seen())
import skeletal
t1 = time.perf_counter()
if sys.argv[1]:
    asset = skeletal.load(sys.argv[1])
else:
    from skeletal.demo import demo_asset
    asset = demo_asset()
t2 = time.perf_counter(); c2 = time.process_time()
player = skeletal.Player(asset)
player.play(sys.argv[2])
player.update(1 / 60)
palettes = player.palettes
t3 = time.perf_counter()
first_wall = time.time() - float(sys.argv[3])  # from the parent's launch: the interpreter's start included
result = {"import_s": t1 - t0, "load_s": t2 - t1, "first_frame_s": t3 - t2,
          "first_frame_cpu_s": time.process_time() - c2, "total_s": t3 - t0, "first_frame_wall_s": first_wall,
          "numpy_frames": player.mixer.frame is None}
# Full speed: an application's loop (an update, then ~10 ms of other work) until the mixer runs the
# compiled kernels (at once when they were compiled in process or loaded from the cache).
frames, numpy_s = 0, []
deadline = t3 + float(sys.argv[4])
while player.mixer.frame is None and time.perf_counter() < deadline:
    s = time.perf_counter()
    player.update(1 / 60)
    numpy_s.append(time.perf_counter() - s)
    time.sleep(0.01)
result["full_speed_wall_s"] = time.time() - float(sys.argv[3]) if player.mixer.frame is not None else None
result["numpy_frame_s"] = sorted(numpy_s)[len(numpy_s) // 2] if numpy_s else None
s = time.perf_counter()
for _ in range(200):
    player.update(1 / 60)
result["compiled_frame_s"] = (time.perf_counter() - s) / 200 if player.mixer.frame is not None else None
result["compiled"] = sorted(compiled)
print(json.dumps(result))
"""


def first_frame(path: str | None, clip: str, cache_dir: str, timeout: float = 900.0, quiet: bool = True,
                fallback: bool | None = None) -> dict:
    """Time the first ``Player`` frame in a new Python process using numba cache ``cache_dir``
    (``path`` None: the built-in character), then its loop until the compiled kernels run. Returns the
    child's timings (``first_frame_wall_s`` and ``full_speed_wall_s`` from its launch, wall clock;
    ``numpy_frames``: the first frame ran in numpy while the kernels compiled in the background) and,
    under "stderr", what it printed there (the compile notice when ``quiet`` is False and the cache was
    cold). ``fallback``: True/False turn the numpy frames on/off (``SKELETAL_NO_FALLBACK``), None
    leaves the environment's setting."""
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir, SKELETAL_QUIET_COMPILE="1" if quiet else "0")
    if fallback is not None:
        env["SKELETAL_NO_FALLBACK"] = "0" if fallback else "1"
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    out = subprocess.run([sys.executable, "-c", _FIRST_FRAME, path or "", clip, repr(time.time()), str(timeout)],
                         env=env, capture_output=True, text=True, timeout=timeout + 60)
    if out.returncode != 0:
        raise RuntimeError(f"the first-frame child failed ({out.returncode}): {out.stderr.strip()[-2000:]}")
    return {**json.loads(out.stdout.strip().splitlines()[-1]), "stderr": out.stderr}


def _spinner() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "while True: pass"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def busy_threads(asset, clip: str, rounds: int, crowd_count: int = 1000, vertices: int = 100_000) -> dict:
    """Wall-clock rates of the crowd and skinning at 1 thread and at all threads, while one spinning
    process keeps a core busy; rounds alternate 1 thread / all threads so both see the same machine."""
    import numba

    from ..skinning.lbs import pack_palette, skin_into
    from . import make_crowd, synthetic_mesh

    palette, joints, weights, positions, normals = synthetic_mesh(vertices)
    out_p, out_n = np.empty_like(positions), np.empty_like(normals)
    packed = pack_palette(palette)

    def skin():
        pack_palette(palette, packed)
        skin_into(packed, joints, weights, positions, normals, None, out_p, out_n)

    crowd, _ = make_crowd(asset, crowd_count, clip, np.random.default_rng(1).uniform(0.0, 1.0, crowd_count))

    def crowd_step():
        crowd.update(1 / 60)

    threads = numba.get_num_threads()
    jobs = {"skin": (skin, vertices / 1e6, 20), "crowd": (crowd_step, float(crowd_count), 10)}
    for fn, _, _ in jobs.values():  # compile (and fault in) before timing
        fn()
    rates: dict = {(name, n): [] for name in jobs for n in (1, threads)}
    spinner = _spinner()
    try:
        time.sleep(0.3)
        for _ in range(rounds):
            for n in (1, threads):
                numba.set_num_threads(n)
                for name, (fn, work, reps) in jobs.items():
                    fn()
                    start = time.perf_counter()
                    for _ in range(reps):
                        fn()
                    rates[(name, n)].append(work * reps / (time.perf_counter() - start))
    finally:
        spinner.kill()
        spinner.wait()
        numba.set_num_threads(threads)
    return {"threads": threads, "threading_layer": numba.threading_layer(),
            **{f"{name}_{n}thr": values for (name, n), values in rates.items()}}


def bench_rows(asset=None, clip=None, path=None, quick: bool = False) -> dict:
    from . import load_average, stat

    if asset is None and path is not None:  # the model the cold row loads is the one the busy rows pose
        from ..asset import load

        asset = load(path)
    if asset is None:
        from ..demo import demo_asset

        asset = demo_asset()
    clip = clip or asset.clips[0].name
    rows, figures = [], {}
    load = load_average()
    # The cold row compiles the playback kernels from nothing in a subprocess (tens of seconds): in the
    # full run always, in a quick run only when SKELETAL_BENCH_COLD=1.
    if os.environ.get("SKELETAL_BENCH_COLD", "0" if quick else "1") != "0":
        p = str(path) if path else None
        with tempfile.TemporaryDirectory(prefix="skeletal-numba-cache-") as before_cache, \
                tempfile.TemporaryDirectory(prefix="skeletal-numba-cache-") as cache:
            before = first_frame(p, clip, before_cache, fallback=False)  # compiled in process (issue 17's row)
            cold = first_frame(p, clip, cache, fallback=True)            # numpy frames, kernels in the background
            warm = first_frame(p, clip, cache, fallback=True)
        figures["cold_first_frame_in_process"] = before
        figures["cold_first_frame"], figures["warm_first_frame"] = cold, warm
        rows.append({
            "name": "first Player frame, empty numba cache (new process, wall from launch)",
            "stat": stat([cold["first_frame_wall_s"]], "s", cpu_s=cold["first_frame_cpu_s"]),
            "baseline": (f"compiled in process {before['first_frame_wall_s']:.2f} s (CPU {before['first_frame_cpu_s']:.1f} s); "
                         f"warm cache {warm['first_frame_wall_s']:.2f} s; load {load:.1f}"),
            "ratio": f"{before['first_frame_wall_s'] / max(cold['first_frame_wall_s'], 1e-9):.1f}x sooner",
            "reference": "goal <= 2 s wall (issue 33)",
        })
        full = cold["full_speed_wall_s"]
        rows.append({
            "name": "same process: compiled kernels running (full speed), wall from launch",
            "stat": stat([full if full is not None else float("nan")], "s"),
            "baseline": (f"numpy frames until then ({1e6 * (cold['numpy_frame_s'] or 0):.0f} us each, compiled "
                         f"{1e6 * (cold['compiled_frame_s'] or 0):.1f} us); compiled in process: "
                         f"{before['full_speed_wall_s']:.2f} s"),
            "ratio": (f"{full / max(before['full_speed_wall_s'], 1e-9):.2f}x the in-process compile's time"
                      if full is not None else "not reached"),
            "reference": "no action from the user",
        })
    busy = busy_threads(asset, clip, 2 if quick else 5)
    figures["busy"] = busy
    n = busy["threads"]
    for name, unit, label in (("crowd", "characters/s", "crowd 1000"), ("skin", "M vertices/s", "skinning 100k")):
        many, one = busy[f"{name}_{n}thr"], busy[f"{name}_1thr"]
        ratios = [a / b for a, b in zip(many, one)]
        rows.append({
            "name": f"{label}, {n} thr, one core kept busy ({busy['threading_layer']})",
            "stat": stat(many, unit),
            "baseline": f"1 thread, same spinner: {statistics.median(one):,.1f} {unit}",
            "ratio": f"{statistics.median(ratios):.2f}x (min {min(ratios):.2f})",
            "reference": f"goal >= 1.00x; load {load:.1f}",
        })
    return {"rows": rows, **figures}
