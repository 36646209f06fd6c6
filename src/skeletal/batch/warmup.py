"""Compile every kernel once, in parallel processes, so that later runs load them from numba's cache.

numba compiles a kernel the first time it is called with new argument types and keeps the machine
code in its on-disk cache (``cache=True``; ``__pycache__`` beside the sources or ``NUMBA_CACHE_DIR``).
A cold cache costs tens of seconds of compiling spread over a first session; ``skeletal warmup``
(or :func:`warmup`) pays it up front, one process per feature, so that on a machine with several
cores it takes about as long as the slowest feature. Each job drives a feature through its public API
on the built-in character (:func:`skeletal.demo.demo_asset`) with the argument types a real model
gives, which is what decides the compiled specialisations.

>>> from skeletal.warmup import warmup
>>> report = warmup(jobs=["player"], processes=1)          # doctest: +SKIP
>>> report["player"]["ok"]                                 # doctest: +SKIP
True
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor

import numpy as np

LEGS = ("left_thigh", "left_shin", "left_foot")  # the built-in character's left leg


def _asset():
    from ..demo import demo_asset

    return demo_asset()


def _clip_name(asset) -> str:
    names = [c.name for c in asset.clips]
    return "walk" if "walk" in names else names[0]


def job_player() -> None:
    """One character: play, update (the fused serial kernel), crossfade (the general path)."""
    import skeletal

    asset = _asset()
    player = skeletal.Player(asset)
    player.play(_clip_name(asset))
    player.update(1 / 60)
    player.crossfade(asset.clips[-1].name, duration=0.2)
    player.update(1 / 60)


def job_crowd() -> None:
    """Many characters: the crowd's one-pass parallel update, a Mixer's advance/evaluate/palettes."""
    import skeletal

    asset = _asset()
    crowd = skeletal.Crowd(asset, 8)
    crowd.play(_clip_name(asset), offsets=np.linspace(0.0, 0.5, 8))
    crowd.update(1 / 60)
    mixer = skeletal.Mixer(asset, count=4)
    mixer.play(_clip_name(asset))
    mixer.update(1 / 60)
    for dtype in (np.float32,):
        m = skeletal.Mixer(asset, count=2, dtype=dtype)
        m.play(_clip_name(asset))
        m.update(1 / 60)


def job_skin() -> None:
    """Linear blend skinning of the character's meshes (what bake and the renderer run)."""
    import skeletal

    asset = _asset()
    skeletal.bake(asset, _clip_name(asset), fps=10)


def job_dq() -> None:
    """Dual quaternion skinning."""
    import skeletal

    asset = _asset()
    player = skeletal.Player(asset)
    player.play(_clip_name(asset))
    player.update(1 / 60)
    inst = asset.skinned_instances[0]
    prim = inst.primitives[0]
    skeletal.skin_dq(player.palettes[0], prim.joints, prim.weights, prim.source.positions, prim.source.normals)


def job_ik() -> None:
    """IK stages inside a Player and a Crowd update."""
    import skeletal

    asset = _asset()
    player = skeletal.Player(asset)
    player.play(_clip_name(asset))
    player.add_ik("foot", kind="two_bone", chain=LEGS, target=(0.1, 0.05, 0.2), pole=(0.1, 0.5, 1.0))
    player.update(1 / 60)
    crowd = skeletal.Crowd(asset, 4)
    crowd.play(_clip_name(asset))
    crowd.add_ik("foot", "two_bone", LEGS, target=np.zeros((4, 3)), pole=np.ones((4, 3)))
    crowd.update(1 / 60)


def job_procedural() -> None:
    """Foot placement and look-at stages."""
    import skeletal

    asset = _asset()
    player = skeletal.Player(asset)
    player.play(_clip_name(asset))
    proc = skeletal.Procedural(player)
    proc.foot_placement("terrain:amplitude=0.2")
    proc.look_at((1.0, 1.6, 3.0), smooth_time=0.25)
    player.update(1 / 60)


def job_transitions() -> None:
    """Inertialized transitions (``crossfade(..., blend=...)``) in a Player, a Mixer and a Crowd, and a
    crowd under motion matching with warping (its search, switch and warp kernels): the update kernels
    with their inertialization stage compiled in."""
    import skeletal

    from ..demo import locomotion_asset
    from ..playback.locomotion import MatchingDatabase, MotionMatching

    asset = locomotion_asset()
    player = skeletal.Player(asset)
    player.play("walk_forward")
    player.update(1 / 60)
    player.crossfade("run_forward", 0.2, blend="inertialize")
    player.update(1 / 60)
    mixer = skeletal.Mixer(asset, count=3)
    mixer.play("walk_forward")
    mixer.update(1 / 60)
    mixer.crossfade("run_forward", 0.2, blend="dead_blend")
    mixer.update(1 / 60)
    crowd = skeletal.Crowd(asset, 16)
    matching = MotionMatching(crowd, MatchingDatabase.build(asset, exclude=("idle", "wave", "walk", "run")),
                              warping=True)
    matching.set_goal(np.tile([1.0, 0.5], (16, 1)))
    for _ in range(8):
        matching.update(1 / 60)


#: The jobs by name, in the order they are started (the longest first).
JOBS: dict[str, Callable[[], None]] = {
    "player": job_player,
    "crowd": job_crowd,
    "transitions": job_transitions,
    "ik": job_ik,
    "procedural": job_procedural,
    "skin": job_skin,
    "dq": job_dq,
}


def _run(name: str) -> dict:
    os.environ.setdefault("SKELETAL_QUIET_COMPILE", "1")
    # compile here, always: with the cold-start numpy frames on, a Player's first frame would leave its
    # kernels to a background process that this warm-up does not wait for (skeletal.playback.coldstart)
    os.environ["SKELETAL_NO_FALLBACK"] = "1"
    start, cpu = time.perf_counter(), time.process_time()
    try:
        JOBS[name]()
    except Exception as exc:  # reported, not raised: one feature must not stop the others
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}", "seconds": time.perf_counter() - start}
    return {"ok": True, "seconds": time.perf_counter() - start, "cpu_seconds": time.process_time() - cpu}


def warmup(jobs: Iterable[str] | None = None, processes: int | None = None,
           progress: Callable[[str, dict], None] | None = None,
           status: Callable[[str], None] | None = None, heartbeat: float = 15.0) -> dict:
    """Compile the kernels of ``jobs`` (default: all of :data:`JOBS`, in that order; the order given is
    the order they start) in ``processes`` worker processes (default: one per CPU, at most one per
    job); returns {job: {"ok", "seconds", ...}}.

    ``progress(job, result)``: each job's result as soon as it finishes. ``status(line)``: what is
    going on, in words, for a person watching: which features are compiling, how many are left, and
    every ``heartbeat`` seconds while nothing finishes (a loaded machine can take minutes per feature).

    >>> report = warmup(["player"], 1, status=print)      # doctest: +SKIP
    compiling player (1 of 1) ...
    player ready in 12.7 s (CPU 12.0 s); all 1 ready
    """
    names = list(JOBS) if jobs is None else list(jobs)
    unknown = [n for n in names if n not in JOBS]
    if unknown:
        raise ValueError(f"unknown warmup job(s) {', '.join(unknown)} (known: {', '.join(JOBS)})")
    processes = max(1, min(processes or os.cpu_count() or 1, len(names)))
    say = status or (lambda line: None)
    report: dict = {}
    total = len(names)
    started = time.perf_counter()

    def finished(name: str, result: dict, running: list[str], waiting: list[str]) -> None:
        report[name] = result
        if progress:
            progress(name, result)
        done = len(report)
        what = (f"{name} ready in {result['seconds']:.1f} s (CPU {result['cpu_seconds']:.1f} s)" if result["ok"]
                else f"{name} failed: {result['error']}")
        left = total - done
        rest = (f"; {left} left: " + ", ".join(running + waiting) + (f" (compiling {', '.join(running)})" if running else "")
                if left else f"; all {total} done in {time.perf_counter() - started:.0f} s")
        say(f"[{done}/{total}] {what}{rest}")

    if processes == 1:
        for k, name in enumerate(names):
            say(f"compiling {name} ({k + 1} of {total}) ...")
            finished(name, _run(name), [], names[k + 1:])
        return report
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED
    from concurrent.futures import wait as wait_for

    with ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn")) as pool:
        waiting = list(names)
        running: dict = {}  # future -> name, at most ``processes`` at a time, in the order given
        while waiting or running:
            started_now = False
            while waiting and len(running) < processes:
                name = waiting.pop(0)
                running[pool.submit(_run, name)] = name
                started_now = True
            if started_now:
                say(f"compiling {', '.join(running.values())} ({len(report) + len(running)} of {total} started, "
                    f"{len(waiting)} waiting) ...")
            while True:
                done, _ = wait_for(list(running), timeout=heartbeat, return_when=FIRST_COMPLETED)
                if done:
                    break
                say(f"still compiling {', '.join(running.values())} ({time.perf_counter() - started:.0f} s so far; "
                    f"{len(waiting)} waiting)")
            for future in done:
                name = running.pop(future)
                finished(name, future.result(), list(running.values()), waiting)
    return report
