"""A skeletal character in a pygfx window: skeletal plays and poses, pygfx skins and draws.

    pip install "skeletal[pygfx]"
    python examples/bridges/pygfx_window.py                         # the built-in character walking
    python examples/bridges/pygfx_window.py Soldier.glb --clip Run --crowd 9
    python examples/bridges/pygfx_window.py --screenshot pygfx.png  # headless: one frame to a PNG

With ``--crowd N`` a :class:`skeletal.Crowd` poses N instances (one batched update a frame) and each
pygfx character reads its instance's palettes. Orbit with the mouse (pygfx's OrbitController).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import skeletal
from skeletal.render.camera import animated_bounds
from skeletal.render.layout import crowd_phases, grid_offsets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", help="any model skeletal reads (default: the built-in character)")
    parser.add_argument("--clip", default=None, help="clip to play (default: walk, or the model's first)")
    parser.add_argument("--crowd", type=int, default=1, help="instances (default 1)")
    parser.add_argument("--screenshot", help="draw one frame offscreen into this PNG and exit")
    parser.add_argument("--size", default="800x600", help="window size WxH")
    args = parser.parse_args()

    import pygfx as gfx

    from skeletal.bridges.pygfx import crowd_characters

    asset = skeletal.load(args.model or skeletal.examples.path("demo.glb"))
    clip = args.clip or ("walk" if args.model is None else asset.clips[0].name)
    lo, hi = animated_bounds(asset, asset.clip(clip))
    height = float(hi[1] - lo[1])
    offsets = grid_offsets(args.crowd, 1.5 * max(float(hi[0] - lo[0]), float(hi[2] - lo[2]), 0.5 * height))
    crowd = skeletal.Crowd(asset, args.crowd, keep_world=True)
    crowd.play(clip, offsets=crowd_phases(args.crowd, asset.clip(clip).duration))  # out of step
    characters = crowd_characters(asset, args.crowd, offsets)

    scene = gfx.Scene()
    scene.add(gfx.Background.from_color((0.16, 0.18, 0.22, 1), (0.35, 0.38, 0.45, 1)))
    scene.add(gfx.AmbientLight(intensity=0.7))
    light = gfx.DirectionalLight(intensity=2.5)
    light.local.position = (1.0, 2.0, 3.0)
    scene.add(light)
    for c in characters:
        scene.add(c.group)
    w, h = (int(v) for v in args.size.split("x"))
    camera = gfx.PerspectiveCamera(40, w / h)
    center = (lo + hi) / 2 + offsets.mean(axis=0)
    reach = float(np.linalg.norm(hi - lo)) + float(np.ptp(offsets[:, 0]) if len(offsets) > 1 else 0.0)
    camera.local.position = tuple(center + np.array([0.35, 0.25, 1.0]) * 1.6 * reach)
    camera.look_at(tuple(center))

    if args.screenshot:
        from skeletal.bridges.pygfx import offscreen_frame

        crowd.update(0.5)
        for c in characters:
            c.update(crowd)
        from PIL import Image

        Image.fromarray(offscreen_frame(scene, camera, (w, h))[..., :3]).save(args.screenshot)
        print(f"wrote {args.screenshot}")
        return

    from rendercanvas.auto import RenderCanvas, loop

    canvas = RenderCanvas(size=(w, h), title=f"skeletal + pygfx: {asset.name} {clip}")
    renderer = gfx.renderers.WgpuRenderer(canvas)
    gfx.OrbitController(camera, register_events=renderer, target=tuple(center))
    last = [time.perf_counter()]

    def animate():
        now = time.perf_counter()
        crowd.update(min(now - last[0], 0.1))  # skeletal: sample, blend, world matrices, palettes
        last[0] = now
        for c in characters:
            c.update(crowd)  # copy the palettes into pygfx's bone-matrix buffers
        renderer.render(scene, camera)
        canvas.request_draw()

    canvas.request_draw(animate)
    loop.run()


if __name__ == "__main__":
    main()
