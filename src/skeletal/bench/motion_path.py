"""Motion matching on a scripted path: how closely the built-in character follows a figure eight.

``python -m skeletal.bench.motion_path`` drives :class:`~skeletal.playback.locomotion.MotionMatching`
(the demo locomotion set, no mirrored rows) along a figure eight, ``x = R sin(w t)``,
``z = R sin(2 w t) / 2``, at a walking (1 m/s, R = 4 m) and a running (3.5 m/s, R = 10.5 m) path
speed (the path's own speed varies from 0.73 to 1.46 times that along the eight). Each frame the desired
velocity is the path's velocity plus a pull of 1/s toward the path point. Printed per speed:

* the mean and largest distance (m) between the character's root and the path point at the same time
  (after the first 2 s, the start from rest);
* the foot slide of planted feet: the horizontal movement (cm per 60 Hz frame) of each toe joint while
  its height is within 2 cm of its lowest, median and 90th percentile;
* searches, jumps and the clips played.

Rows "warping": the same controller with ``warping=True`` (stride and orientation warping toward the
predicted velocity). The baseline, in the same run: :class:`StateDriver`, the same clips switched by thresholds on the
goal with linear crossfades, as a state machine would (searches 0; jumps: its transitions).

``--model FILE`` (a model file or a BVH folder with idle, walk and run clips) drives that model's
:func:`~skeletal.playback.locomotion.gaits.locomotion_set` instead, on paths at its own walk and run
speeds (as wide for those speeds as the built-in character's), distances in metres at the model's
size (its height taken as 1.8 m); the state machine uses the same generated clips.
"""

from __future__ import annotations

import argparse
import math
import os
from typing import Any

import numpy as np

from ..errors import SkeletalError
from ..playback.locomotion.paths import figure_eight_path



class StateDriver:
    """The baseline: the same clips driven the way a state machine does today. The state is a clip
    chosen from the goal (walk below ``run_above``, 2.5 m/s by default, else run;
    ``_turn_left``/``_turn_right`` when the goal's heading is more than 15 degrees off the facing, else
    ``_forward``), entered by a linear crossfade of 0.3 s; root motion (on ``root``) moves the character.
    Same face as :class:`MotionMatching` for the path."""

    def __init__(self, player, root: str = "root", run_above: float = 2.5):
        self.player = player
        self.run_above = float(run_above)
        player.enable_root_motion(root)
        self.position = np.zeros(3)
        self.facing = 0.0
        self.clip: str | None = None
        self.goal = np.zeros(2)
        self.searches = self.jumps = 0

    def set_goal(self, velocity) -> None:
        self.goal = np.asarray(velocity, np.float64)

    @property
    def transform(self) -> np.ndarray:
        c, s = math.cos(self.facing), math.sin(self.facing)
        m = np.eye(4)
        m[0, 0], m[0, 2], m[2, 0], m[2, 2] = c, s, -s, c
        m[:3, 3] = self.position
        return m

    def update(self, dt: float) -> None:
        speed = float(np.hypot(*self.goal))
        gait = "walk" if speed < self.run_above else "run"
        error = (math.atan2(self.goal[0], self.goal[1]) - self.facing + math.pi) % (2 * math.pi) - math.pi
        turn = "_turn_left" if error > math.radians(15) else "_turn_right" if error < -math.radians(15) else "_forward"
        state = gait + turn
        if state != self.clip:
            if self.clip is None:
                self.player.play(state)
            else:
                self.player.crossfade(state, 0.3)
                self.jumps += 1
            self.clip = state
        self.player.update(dt)
        move, yaw = self.player.root_motion
        c, s = math.cos(self.facing), math.sin(self.facing)
        self.position += np.array([c * move[0] + s * move[2], 0.0, -s * move[0] + c * move[2]])
        self.facing = (self.facing + yaw + math.pi) % (2.0 * math.pi) - math.pi


def figure_eight(speed: float, radius: float, seconds: float = 20.0, fps: float = 60.0,
                 driver: str = "motion matching", model: str | None = None) -> dict:
    """Drive the demo character along the figure eight of ``radius`` (m) at about ``speed`` m/s with
    ``driver`` ("motion matching", "warping": motion matching with stride and orientation warping, or
    "state machine": :class:`StateDriver`); the figures above. ``model``: a model file (or BVH folder)
    driven through its :func:`~skeletal.playback.locomotion.gaits.locomotion_set` instead, on a path at
    its walk's (``speed`` below 2.5) or run's own speed, as wide for that speed as the demo's; distances
    are reported in metres at the model's size (its height taken as 1.8 m)."""
    from ..demo import locomotion_asset
    from ..playback import Player
    from ..playback.contacts import find_legs
    from ..playback.locomotion import MatchingDatabase, MotionMatching

    scale = 1.0
    if model is None:
        asset = locomotion_asset()
        db = MatchingDatabase.build(asset, exclude=("idle", "wave", "walk", "run"))
        run_above = 2.5
    else:
        from ..playback.locomotion.gaits import locomotion_set

        moves = locomotion_set(model)
        asset, db, scale = moves.asset, moves.database, moves.scale
        gait = "walk" if speed < 2.5 else "run"
        if gait not in moves.speeds:
            raise SkeletalError(f"{model}: no {gait} clip in its locomotion set")
        radius, speed = radius * moves.speeds[gait] / speed, moves.speeds[gait]
        run_above = 0.5 * (moves.speeds["walk"] + moves.speeds.get("run", 2.0 * moves.speeds["walk"]))
        if driver == "warping" and not moves.warping_ok:
            raise SkeletalError(f"{model}: its feet are not on its leg chains (no leg IK, no warping)")
    if driver == "state machine":
        mm: Any = StateDriver(Player(asset), db.root, run_above)
    else:
        mm = MotionMatching(Player(asset), db, warping=driver == "warping")
    path = figure_eight_path(speed, radius)

    toes = [leg.toe if leg.toe >= 0 else leg.foot for leg in find_legs(asset.rig)]
    dt = 1.0 / fps
    errors, toe_world, clips = [], [], set()
    for k in range(int(seconds * fps)):
        t = k * dt
        p, v = path(t)
        mm.set_goal(v + 1.0 * (p - mm.position[[0, 2]]))
        mm.update(dt)
        target, _ = path(t + dt)
        if t > 2.0:
            errors.append(float(np.hypot(*(mm.position[[0, 2]] - target))) / scale)
        world = mm.transform @ mm.player.world[toes]  # (2, 4, 4)
        toe_world.append(world[:, :3, 3])
        clips.add(mm.clip)
    toe = np.array(toe_world)[int(2.0 * fps):]  # (T, 2, 3)
    slides = []
    for side in range(2):
        height = toe[:, side, 1]
        planted = height < height.min() + 0.02 * scale
        step = np.hypot(*(toe[1:, side, [0, 2]] - toe[:-1, side, [0, 2]]).T) * 100.0 / scale
        slides.append(step[planted[1:] & planted[:-1]])
    slide = np.concatenate(slides)
    if not len(slide):  # no toe stayed down two frames running (warped strides can lift them all)
        slide = np.array([np.nan])
    return dict(driver=driver, speed=speed / scale, model=model or "built-in", mean_error_m=float(np.mean(errors)), max_error_m=float(np.max(errors)),
                slide_median_cm=float(np.median(slide)), slide_p90_cm=float(np.percentile(slide, 90)),
                searches=mm.searches, jumps=mm.jumps, clips=sorted(clips))


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(prog="python -m skeletal.bench.motion_path", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--model", help="a model file or BVH folder driven through its locomotion set "
                                        "(skeletal.playback.locomotion.gaits) instead of the built-in character")
    args = parser.parse_args(argv)
    rows = []
    print(f"figure eight, {args.model or 'the built-in character'}, load average {os.getloadavg()[0]:.1f}")
    print(f"{'driver':>15} {'speed':>5} {'mean err m':>10} {'max err m':>9} {'slide cm/frame':>14} {'p90':>5} "
          f"{'searches':>8} {'jumps':>5}")
    for speed, radius in ((1.0, 4.0), (3.5, 10.5)):
        for driver in ("motion matching", "warping", "state machine"):
            try:
                row = figure_eight(speed, radius, args.seconds, driver=driver, model=args.model)
            except SkeletalError as e:  # a model without that gait
                print(f"{driver:>15} {speed:>5.1f} skipped: {e}")
                continue
            rows.append(row)
            print(f"{driver:>15} {row['speed']:>5.1f} {row['mean_error_m']:>10.2f} {row['max_error_m']:>9.2f} "
                  f"{row['slide_median_cm']:>14.2f} {row['slide_p90_cm']:>5.2f} {row['searches']:>8} {row['jumps']:>5}")
            print(f"{'':>15} clips: {', '.join(row['clips'])}")
    return rows


if __name__ == "__main__":
    main()
