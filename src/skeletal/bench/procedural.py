"""``skeletal bench`` rows of procedural animation (:mod:`skeletal.playback.procedural`): foot placement
and look-at against the playback update they follow."""

from __future__ import annotations

import numpy as np

from ..demo import demo_asset
from ..errors import SkeletalError
from ..playback import Mixer, Player
from ..playback.procedural import Procedural, find_legs
from . import stat



def bench_rows(asset=None, clip=None, path=None, quick: bool = False) -> dict:
    """Cost of the procedural stages against the same-run playback update they follow: one Player
    (foot placement on terrain + look-at) and Mixers of 100 (and 1000) instances (foot placement), in
    microseconds per character per frame; blocks of both interleaved, ratios per round."""
    import time


    try:
        if asset is None:
            raise SkeletalError("no asset")
        find_legs(asset.rig)
        clip = clip if clip is not None else 0
        asset.clip(clip)
    except (SkeletalError, KeyError, IndexError):
        asset, clip = demo_asset(), "walk"
    ground = "terrain:amplitude=0.2,wavelength=3"
    frames = 60 if quick else 300
    rounds = 5 if quick else 15
    counts = (100,) if quick else (100, 1000)

    def update_of(target):
        return lambda: target.update(1 / 60)

    def interleaved(base, with_stages, n):
        """Blocks of ``n`` updates of each, alternating (the machine's speed drifts between blocks):
        per-update seconds of each, and the per-round ratios."""
        base()
        with_stages()  # compile / warm
        xs, ys = [], []
        for _ in range(rounds):
            for f, out in ((base, xs), (with_stages, ys)):
                t0 = time.perf_counter()
                for _ in range(n):
                    f()
                out.append((time.perf_counter() - t0) / n)
        return xs, ys, [y / x for x, y in zip(xs, ys)]

    def player(stages: bool):
        p = Player(asset)
        p.play(clip)
        if stages:
            proc = Procedural(p)
            proc.foot_placement(ground)
            proc.look_at((0.5, 1.5, 2.0))
        return update_of(p)

    def mixer(stages: bool, count: int):
        m = Mixer(asset, count, events=False)
        m.play(clip, offset=np.random.default_rng(0).uniform(0, asset.clip(clip).duration, count))
        if stages:
            proc = Procedural(m)
            proc.foot_placement(ground)
            g = np.random.default_rng(1).uniform(-5, 5, (count, 3))
            proc.place(g, 0.0)
        return update_of(m)

    us = 1e6
    base1, with1, r1 = interleaved(player(False), player(True), frames)
    rows = [
        {"name": f"one character: Player update + foot placement on terrain + look-at ({asset.name}, {clip})",
         "stat": stat([s * us for s in with1], "us"),
         "baseline": f"Player update alone, interleaved: {statistics_median(base1) * us:.1f} us",
         "ratio": f"{statistics_median(r1):.2f}x the update (median of {rounds} rounds)", "reference": "goal: < 3x"},
    ]
    for count in counts:
        base_n, with_n, rn = interleaved(mixer(False, count), mixer(True, count), max(frames * 20 // count, 3))
        rows.append(
            {"name": f"Mixer of {count}: update + foot placement on terrain, per character",
             "stat": stat([s * us / count for s in with_n], "us"),
             "baseline": (f"Mixer update alone, interleaved: {statistics_median(base_n) * us / count:.2f} us per "
                          "character"),
             "ratio": f"{statistics_median(rn):.2f}x the update (median of {rounds} rounds)",
             "reference": "goal: < 1.5x"})
    return {"rows": rows, "asset": asset.name, "clip": str(clip)}


def statistics_median(values) -> float:
    return float(np.median(values))
