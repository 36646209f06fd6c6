"""Frame time of the editor window on a 100-key x 65-bone clip at 1280x720, panels open.

Run under an X server (``xvfb-run python tools/editor_frame_time.py``): loads Mannequin.glb (65 skin
joints) from ../shared/assets, gives it a clip with 100 LINEAR rotation keys on every joint, opens the
editor at 1280x720 and times frames in four phases: playing (the 3D view re-rendered every frame,
dope sheet showing the selected bone's channels), paused (nothing moves: nothing is redrawn), playing
with the curve view, playing with the onion skin. Frames are pipelined as in ``skeletal edit`` (each
frame swaps the previous one), so a frame's time runs from its start to the next one's, swap
included; ``--serial`` times frames the old way (GL finished inside the frame, the swap outside the
timing). Prints per phase the wall time's median / p90, the CPU time of all threads and of the main
thread (ms), and the wall time's parts. ``--stages`` waits for the GL after the 3D view so that its GL
work is counted in its part; ``--moving-scale`` sets the 3D view's resolution while playing (the
editor's default 0.5), ``--moving-lod`` its triangle reduction (default 4; 1: the full mesh).
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np


def main() -> int:
    parser = argparse.ArgumentParser()
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
    from fixtures.shared_assets import ASSETS  # $SKELETAL_ASSETS, default ../shared/assets

    parser.add_argument("--model", default=str(ASSETS / "Mannequin.glb"))
    parser.add_argument("--frames", type=int, default=60)
    parser.add_argument("--msaa", type=int, default=4)
    parser.add_argument("--moving-scale", type=float, default=0.5)
    parser.add_argument("--moving-lod", type=float, default=4.0,
                        help="triangles reduced this many times while playing (1: the full mesh)")
    parser.add_argument("--serial", action="store_true",
                        help="frames as before pipelining: GL finished in the frame, swap outside the timing")
    parser.add_argument("--stages", action="store_true",
                        help="wait for the GL after the 3D view, so that its GL work is counted in its stage")
    args = parser.parse_args()

    import skeletal
    from skeletal.anim.clip import Clip, Track
    from skeletal.editor.app import Editor
    from skeletal.editor.model import EditDocument

    asset = skeletal.load(args.model)
    joints = np.unique(np.concatenate([s.joints for s in asset.skins]))
    rng = np.random.default_rng(7)
    times = (np.arange(100) / 30.0).astype(np.float32)
    tracks = []
    for j in joints:
        axis = rng.normal(size=3)
        axis /= np.linalg.norm(axis)
        angle = 0.3 * np.sin(np.linspace(0, 4 * np.pi, 100) + rng.uniform(0, 6))
        q = np.concatenate([axis[None] * np.sin(angle / 2)[:, None], np.cos(angle / 2)[:, None]], axis=1)
        rest = asset.rig.rest[j, 3:7]
        from skeletal.quat import quat_mul

        tracks.append(Track(int(j), "rotation", "LINEAR", times, quat_mul(rest, q)))
    clip = Clip("bench100x65", tracks)
    asset.clips = [clip] + asset.clips
    asset.document.animations = [skeletal.document.Animation("bench100x65", [])] + asset.document.animations
    doc = EditDocument(asset, "/tmp/bench.glb")
    print(f"clip: {len(tracks)} bones x {len(times)} keys; {skeletal.render.context.describe(None) if False else ''}",
          file=sys.stderr)
    with Editor(doc, (1280, 720), samples=args.msaa, moving_scale=args.moving_scale,
                moving_lod=args.moving_lod) as ed:
        ed.state.selected = int(joints[10])
        ed.stage_finish = args.stages
        ed.pipelined = not args.serial  # as Editor.run(): the frame swaps the previous one (timed with it)
        ed.state.show_colliders = True
        results = {}
        for phase in ("playing", "paused", "playing + curves", "playing + onion skin"):
            ed.state.playing = phase.startswith("playing")
            ed.state.tab = "curve" if "curves" in phase else "dope"
            ed.state.onion = "onion" in phase
            ed.frame_ms.clear()
            ed.frame_cpu_ms.clear()
            ed.frame_main_ms.clear()
            ed.timing_log.clear()
            for _ in range(args.frames):
                ed.frame(1 / 30)
                if args.serial:
                    ed.glfw.swap_buffers(ed.window)
            ms = np.asarray(ed.frame_ms[5:])
            cpu = np.asarray(ed.frame_cpu_ms[5:])
            main = np.asarray(ed.frame_main_ms[5:])
            results[phase] = ms
            print(f"{phase:22s} wall median {np.median(ms):6.1f} ms  p90 {np.percentile(ms, 90):6.1f} ms   "
                  f"CPU (all threads) median {np.median(cpu):6.1f} ms, main thread {np.median(main):6.1f} ms  "
                  f"({len(ms)} frames)")
            parts = {k: np.median([t[k] for t in ed.timing_log[5:]]) for k in ("python", "present", "view", "ui_gl")}
            print(f"{'':22s} of which (wall medians): Python {parts['python']:.1f} ms, previous frame's wait + swap "
                  f"{parts['present']:.1f} ms, 3D view {parts['view']:.1f} ms, ImGui GL {parts['ui_gl']:.1f} ms")
        print(f"GL: {ed.ctx.info['GL_RENDERER']}, MSAA {args.msaa}, cores {os.cpu_count()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
