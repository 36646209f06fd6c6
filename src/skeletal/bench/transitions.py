"""Transition figures: inertialized switches against a linear crossfade and a pop, in the same run.

``python -m skeletal.bench.transitions [--model PATH]`` plays, on one :class:`~skeletal.Player` at 60
fps, the sequence idle -> walk (at 1 s) -> run (at 2 s), and the same with run chained 0.15 s after
walk (a switch in the middle of a transition), with each transition mode (blend time 0.3 s):

* ``pop``: ``crossfade(clip, 0)``; ``linear``: ``crossfade(clip, 0.3)``;
* ``inertialize`` (Bollo's quintic), ``inertialize_spring``, ``dead_blend``: ``crossfade(clip, 0.3,
  blend=...)``.

Per mode it prints the most clips sampled in one frame during the transitions (actions with weight >
0), the largest jump of any joint's angular velocity at a switch frame (rad/s: the change between the
frame before the switch and the first frame after it, finite differences of the shown local
rotations), the largest such frame-to-frame change anywhere in the 0.3 s after a switch, the same
figure over the frames away from any switch (the clips' own level, for scale: 99th percentile), and
the update's cost (median microseconds of thread CPU over 7 runs) during the transitions, before the
first switch and after the last transition has ended, and ``ratio``: the cost during the transitions
over the cost before, and ``vs pop``: over the cost of the same frames switched by a pop (the same
clips playing, no transition: the plain update of those clips; the goal for inertialized modes: at
most 1.15). Clips
sampled are counted per instance per frame: an inertialized transition samples exactly one. The
models: the built-in character (idle, walk, run) and Soldier.glb (Idle, Walk, Run) when ``--model``
names it. Each of the 7 runs plays every mode once, in an order rotating from run to run, so that
other load on the machine falls on every mode alike.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from ..playback import kernels as K
from ..playback.locomotion.inertialize import pose_velocity

MODES = ("pop", "linear", "inertialize", "inertialize_spring", "dead_blend")
FPS = 60
BLEND = 0.3


def _switch(player, clip: str, mode: str) -> None:
    if mode == "pop":
        player.crossfade(clip, 0.0)
    elif mode == "linear":
        player.crossfade(clip, BLEND)
    else:
        player.crossfade(clip, BLEND, blend=mode)


def run_sequences(asset, clips: tuple[str, str, str], modes: tuple[str, ...], switches: tuple[float, float],
                  repeats: int = 7) -> dict[str, dict]:
    """Play ``clips`` switching at ``switches`` seconds with each of ``modes`` (``repeats`` times, for the
    timings; the poses of the first): each run plays every mode's sequence on a new Player, one after
    the other, the order rotating from run to run, so that a change in the machine's load falls on
    all modes alike. The figures of the module docstring, by mode."""
    from ..playback import Player

    dt = 1.0 / FPS
    frames = int((max(switches) + 1.0) * FPS)
    at = {int(round(s * FPS)): c for s, c in zip(switches, clips[1:])}
    keys = ("poses", "sampled", "cost", "plain", "after")
    data = {m: {k: [] for k in keys} for m in modes}
    for repeat in range(repeats):
        turn = repeat % len(modes)
        for mode in modes[turn:] + modes[:turn]:
            player, d = Player(asset), data[mode]
            player.play(clips[0])
            for k in range(frames):
                if k in at:
                    _switch(player, at[k], mode)
                start = time.thread_time_ns()
                player.update(dt)
                spent = (time.thread_time_ns() - start) / 1e3
                if repeat == 0:
                    d["poses"].append(player.local_pose.copy())
                if any(0 <= k - s < BLEND * FPS for s in at):
                    d["sampled"].append(int((player.mixer.fs[0, :, K.F_EFFECTIVE] > 0).sum()))
                    d["cost"].append(spent)
                elif 10 < k < min(at):
                    d["plain"].append(spent)
                elif k > max(at) + BLEND * FPS + 2:
                    d["after"].append(spent)
    rows = {}
    for mode in modes:
        d = data[mode]
        poses = d["poses"]
        w = pose_velocity(np.array(poses[:-1]), np.array(poses[1:]), dt)[..., 3:6]  # w[k]: frame k -> k + 1
        change = np.linalg.norm(np.diff(w, axis=0), axis=-1).max(axis=1)  # change[k]: w[k + 1] - w[k]
        # the update at frame k (after the switch) makes pose k; its velocity is w[k - 1]; before: w[k - 2]
        switch_jump = max(float(change[s - 2]) for s in at)
        window = [k for s in at for k in range(s - 2, s - 2 + int(BLEND * FPS))]
        away = [k for k in range(5, len(change)) if all(abs(k - (s - 2)) > BLEND * FPS + 2 for s in at)]
        cost, plain = statistics.median(d["cost"]), statistics.median(d["plain"])
        rows[mode] = dict(mode=mode, clips_sampled=max(d["sampled"]), ratio=cost / plain, switch_jump=switch_jump,
                          transition_change=float(change[window].max()),
                          clip_change=float(np.percentile(change[away], 99)), update_us=cost, plain_us=plain,
                          after_us=statistics.median(d["after"]))
    return rows


def run_sequence(asset, clips: tuple[str, str, str], mode: str, switches: tuple[float, float], repeats: int = 7) -> dict:
    """:func:`run_sequences` of one mode."""
    return run_sequences(asset, clips, (mode,), switches, repeats)[mode]


def table(asset, clips: tuple[str, str, str], label: str) -> list[dict]:
    rows = []
    for chained, switches in ((False, (1.0, 2.0)), (True, (1.0, 1.15))):
        by_mode = run_sequences(asset, clips, MODES, switches)
        pop_us = by_mode["pop"]["update_us"]  # the baseline of ``vs_pop``: the same frames, no transition
        for mode in MODES:
            row = by_mode[mode]
            row.update(model=label, chained=chained, vs_pop=row["update_us"] / pop_us)
            rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(prog="python -m skeletal.bench.transitions", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="a model with Idle, Walk and Run clips (e.g. Soldier.glb)")
    args = parser.parse_args(argv)
    from ..demo import demo_asset

    models = [(demo_asset(), ("idle", "walk", "run"), "built-in")]
    if args.model:
        import skeletal

        models.append((skeletal.load(args.model), ("Idle", "Walk", "Run"), os.path.basename(args.model)))
    for asset, clips, _label in models:  # compile everything once before measuring
        run_sequences(asset, clips, MODES, (0.2, 0.4), repeats=1)
    print(f"transitions at {FPS} fps, blend {BLEND} s, load average {os.getloadavg()[0]:.1f}")
    print(f"{'model':>12} {'sequence':>9} {'mode':>19} {'clips':>5} {'switch jump':>11} {'max in blend':>12} "
          f"{'clip p99':>8} {'us/update':>9} {'before us':>9} {'after us':>8} {'ratio':>6} {'vs pop':>6}")
    out = []
    for asset, clips, label in models:
        for row in table(asset, clips, label):
            out.append(row)
            print(f"{row['model']:>12} {'chained' if row['chained'] else 'spaced':>9} {row['mode']:>19} "
                  f"{row['clips_sampled']:>5} {row['switch_jump']:>11.2f} {row['transition_change']:>12.2f} "
                  f"{row['clip_change']:>8.2f} {row['update_us']:>9.2f} {row['plain_us']:>9.2f} {row['after_us']:>8.2f} "
                  f"{row['ratio']:>6.2f} {row['vs_pop']:>6.2f}")
    return out


if __name__ == "__main__":
    main()
