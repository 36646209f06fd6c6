"""Stride-warping figures: foot slide of planted feet with and without warping, in the same run.

``python -m skeletal.bench.warping [--quick] [--json FILE]`` plays a walking clip (the built-in
character's ``walk``; Soldier's ``Walk`` when ``$SKELETAL_ASSETS/Soldier.glb`` exists) with root
motion, moving the character at 0.7x, 1.0x and 1.4x the clip's own speed, once without warping (the
clip as recorded, the character simply moved faster or slower) and once with
:class:`~skeletal.playback.locomotion.warping.Warping` ``stride`` at that ratio. Foot slide: the mean
horizontal distance (cm) a planted foot's world position moves per 60 Hz frame, over the frames where
the foot is planted in this frame and the last (contact weight at least
:data:`~skeletal.playback.procedural.PLANTED`, :func:`~skeletal.playback.contacts.detect_contacts`).

The character's velocity: the clip's own (its root-motion delta plus the planted feet's velocity in
the played clip, measured over one cycle) times the ratio; with warping the delta is the warped one.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np

RATIOS = (0.7, 1.0, 1.4)


def _models() -> list[tuple[str, object, str]]:
    from ..demo import demo_asset

    models = [("built-in", demo_asset(), "walk")]
    soldier = Path(os.environ.get("SKELETAL_ASSETS", "assets")) / "Soldier.glb"
    if soldier.exists():
        import skeletal

        models.append(("Soldier", skeletal.load(str(soldier)), "Walk"))
    return models


def foot_slide(asset, clip: str, ratio: float, warp: bool, seconds: float = 4.0, fps: float = 60.0) -> dict:
    """Mean and 95th-percentile foot slide (cm per frame) of planted feet, moving at ``ratio`` times
    the clip's speed, with stride warping or without."""
    import skeletal

    from ..playback.contacts import detect_contacts, find_legs
    from ..playback.locomotion.warping import Warping
    from ..playback.procedural import PLANTED

    legs = find_legs(asset.rig)
    phases = detect_contacts(asset, clip, legs, fps=fps)
    player = skeletal.Player(asset)
    root = player.enable_root_motion()
    dt = 1.0 / fps
    # the clip's own velocity (model x, z): one cycle's mean root-motion delta minus the planted feet's
    # velocity in the clip as recorded (in-place clips: minus the feet; root-translating ones: the delta)
    player.play(clip)
    steps = max(int(round(phases.duration * fps)), 1)
    total = np.zeros(2)
    for _ in range(steps):
        player.update(dt)
        total += root.delta[0, :2]
    ground = np.asarray(phases.ground_velocity).mean(axis=0)
    velocity = total / (steps * dt) - ground
    speed = float(np.hypot(*velocity))
    warping = Warping(player) if warp else None
    if warping is not None:
        warping.stride[:] = ratio
        warping.axis[0] = velocity / max(speed, 1e-9)
    player.play(clip)
    feet = [leg.foot for leg in legs]
    position = np.zeros(2)
    last = None
    last_planted = None
    slides = []
    for _ in range(int(seconds * fps)):
        player.update(dt)
        # warped: the delta is already scaled by the stride
        position += (root.delta[0, :2] if warp else ratio * root.delta[0, :2]) - ratio * ground * dt
        now = player.world[feet][:, [0, 2], 3] + position
        t = player.action(clip).time
        f = int(round(t * phases.fps)) % len(phases.times)
        planted = phases.weight[f] >= PLANTED
        if last is not None:
            both = planted & last_planted
            slides += list(np.hypot(*(now - last)[both].T) * 100.0)
        last, last_planted = now, planted
    slides_a = np.array(slides) if slides else np.zeros(1)
    return dict(ratio=ratio, warp=warp, speed=speed * ratio, slide_cm=float(slides_a.mean()),
                slide_p95_cm=float(np.percentile(slides_a, 95)), planted_frames=len(slides))


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(prog="python -m skeletal.bench.warping", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the built-in character only, 2 s a case")
    parser.add_argument("--json", help="also write the rows to this JSON file")
    args = parser.parse_args(argv)
    models = _models()[:1] if args.quick else _models()
    seconds = 2.0 if args.quick else 4.0
    print(f"stride warping: foot slide of planted feet, load average {os.getloadavg()[0]:.1f}")
    print(f"{'model':>10} {'speed':>6} {'m/s':>5} {'warping':>8} {'slide cm/frame':>15} {'p95 cm':>7} {'frames':>7}")
    table = []
    for name, asset, clip in models:
        for ratio in RATIOS:
            for warp in (False, True):
                if ratio == 1.0 and warp:
                    continue
                row = foot_slide(asset, clip, ratio, warp, seconds=seconds)
                row["model"] = name
                table.append(row)
                print(f"{name:>10} {ratio:>5.1f}x {row['speed']:>5.2f} {'on' if warp else 'off':>8} "
                      f"{row['slide_cm']:>15.3f} {row['slide_p95_cm']:>7.3f} {row['planted_frames']:>7}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(table, f, indent=1)
    return table


if __name__ == "__main__":
    main()
