"""Foot placement's outputs over a set of scenarios, saved or compared bit for bit.

Runs Players and Mixers (Soldier when ``SKELETAL_ASSETS`` holds it, and the built-in character) with foot
placement on terrain, a slope, a soft limit, a Python ground function and with look-at, on 1 and 2
threads, and records every frame's local pose, world rows, palettes, foot targets, contact weights,
pelvis offsets and locks.

    PYTHONPATH=src python tools/foot_bits.py save /tmp/foot_main.npz
    PYTHONPATH=src python tools/foot_bits.py compare /tmp/foot_main.npz
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("SKELETAL_NO_FALLBACK", "1")  # compiled frames from the first (no numpy frames)

import numba
import numpy as np

import skeletal
import skeletal._threads as threads_module
from skeletal.demo import demo_asset
from skeletal.playback.procedural import Procedural

DT = 1 / 60


def _assets():
    out = {"demo": (demo_asset(), "walk")}
    path = os.path.join(os.environ.get("SKELETAL_ASSETS", "/work/shared/assets"), "Soldier.glb")
    if os.path.exists(path):
        out["soldier"] = (skeletal.load(path), "Walk")
    return out


def _run(asset, clip, count, ground, frames, threads, *, player=False, look=False, weight=1.0, options=None,
         blend=None):
    """One scenario's outputs per frame, stacked: {name: (frames, ...)}."""
    numba.set_num_threads(threads)
    if player:
        target = skeletal.Player(asset)
        target.play(clip)
        mixer = target.mixer
    else:
        target = mixer = skeletal.Mixer(asset, count, events=False)
        duration = asset.clip(clip).duration
        mixer.play(clip, offset=np.linspace(0.0, duration, count, endpoint=False))
        if blend is not None:  # a second clip at partial weight on every character
            other, w = blend
            mixer.play(other, weight=w, offset=np.linspace(0.1, 0.7, count))
    proc = Procedural(target)
    n = 1 if player else count
    weights = weight if np.isscalar(weight) else np.resize(np.asarray(weight, np.float64), n)
    stage = proc.foot_placement(ground, weight=weights, **(options or {}))
    g = np.random.default_rng(3).uniform(-3, 3, (n, 3))
    proc.place(g, np.linspace(0.0, 2.0, n))
    if look:
        proc.look_at((0.5, 1.5, 2.0))
    rec: dict = {}
    for _ in range(frames):
        target.update(DT)
        for name, value in (("pose", mixer.local_pose), ("world", mixer.world), ("palettes", mixer.palettes),
                            ("targets", stage.targets), ("contact", stage.contact), ("pelvis", stage.pelvis_offset),
                            ("lock", stage.lock), ("locked", stage.locked)):
            rec.setdefault(name, []).append(np.array(value, copy=True))
    return {k: np.stack(v) for k, v in rec.items()}


def scenarios():
    terrain = "terrain:amplitude=0.2,wavelength=3,seed=4"
    for name, (asset, clip) in _assets().items():
        other = "run" if name == "demo" else "Run"
        for threads in (1, 2):
            yield f"{name}/mixer9/terrain/t{threads}", lambda: _run(asset, clip, 9, terrain, 90, threads)
            yield f"{name}/mixer40/blend/t{threads}", lambda: _run(
                asset, clip, 40, terrain, 90, threads, weight=[1.0, 0.3, 0.6, 0.0, 0.9], blend=(other, 0.4))
            yield f"{name}/mixer17/slope_soft/t{threads}", lambda: _run(
                asset, clip, 17, "slope:angle=10", 80, threads, options={"soft": 0.1})
            yield f"{name}/mixer12/python/t{threads}", lambda: _run(
                asset, clip, 12, lambda x, z: 0.1 * np.sin(x) + 0.05 * z, 60, threads)
            yield f"{name}/player/terrain_look/t{threads}", lambda: _run(
                asset, clip, 1, terrain, 90, threads, player=True, look=True)
            yield f"{name}/player/slope/t{threads}", lambda: _run(
                asset, clip, 1, "slope:angle=8", 60, threads, player=True, weight=0.7)
            yield f"{name}/mixer3/terrain_look/t{threads}", lambda: _run(
                asset, clip, 3, terrain, 60, threads, look=True)


def collect() -> dict:
    threads_module._NO_CAP = True  # the chosen thread count, whatever the load
    before = numba.get_num_threads()
    out = {}
    try:
        for key, make in scenarios():
            for field, value in make().items():
                out[f"{key}/{field}"] = value
    finally:
        numba.set_num_threads(before)
    return out


def main(argv) -> int:
    mode, path = argv[1], argv[2]
    now = collect()
    if mode == "save":
        np.savez_compressed(path, **now)
        print(f"saved {len(now)} arrays to {path}")
        return 0
    ref = np.load(path)
    bad = 0
    worst = 0.0
    for key in ref.files:
        a, b = ref[key], now.get(key)
        if b is None or a.shape != b.shape:
            print("MISSING/SHAPE", key)
            bad += 1
            continue
        if not np.array_equal(a, b, equal_nan=True):
            d = float(np.nanmax(np.abs(a.astype(np.float64) - b.astype(np.float64))))
            worst = max(worst, d)
            print(f"DIFFERS {key}: max {d:.3g}")
            bad += 1
    extra = sorted(set(now) - set(ref.files))
    print(f"{len(ref.files)} arrays compared, {bad} differ (max {worst:.3g}); {len(extra)} new")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
