"""A skeletal character in panda3d: skeletal reads, plays and skins it; panda3d draws it.

    pip install "skeletal[panda3d]"
    python examples/bridges/panda3d_character.py                    # the built-in character
    python examples/bridges/panda3d_character.py Soldier.glb        # any format skeletal reads (FBX too)
    python examples/bridges/panda3d_character.py --screenshot panda3d.png   # headless: one frame

Keys 1-9 crossfade to the model's clips (0.3 s). Works the same under ursina (it is a ShowBase).
"""

from __future__ import annotations

import argparse

import skeletal


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", help="any model skeletal reads (default: the built-in character)")
    parser.add_argument("--screenshot", help="draw one frame offscreen into this PNG and exit")
    parser.add_argument("--size", default="800x600", help="window size WxH")
    args = parser.parse_args()
    w, h = (int(v) for v in args.size.split("x"))

    from panda3d.core import AmbientLight, DirectionalLight, loadPrcFileData

    from skeletal.bridges.panda3d import PandaCharacter, match_camera, offscreen_base, screenshot
    from skeletal.render.camera import animated_bounds, frame

    asset = skeletal.load(args.model or skeletal.examples.path("demo.glb"))
    clips = [c.name for c in asset.clips]
    first = "walk" if "walk" in clips else (clips[0] if clips else None)
    if args.screenshot:
        base = offscreen_base(w, h)
    else:
        loadPrcFileData("", f"win-size {w} {h}\nwindow-title skeletal + panda3d: {asset.name}")
        from direct.showbase.ShowBase import ShowBase

        base = ShowBase()
        base.disableMouse()
    base.setBackgroundColor(0.2, 0.22, 0.26, 1)
    character = PandaCharacter(asset)
    character.root.reparentTo(base.render)
    ambient = base.render.attachNewNode(AmbientLight("ambient"))
    ambient.node().setColor((0.45, 0.45, 0.5, 1))
    sun = base.render.attachNewNode(DirectionalLight("sun"))
    sun.node().setColor((1.2, 1.15, 1.1, 1))
    sun.setHpr(30, -40, 0)
    base.render.setLight(ambient)
    base.render.setLight(sun)
    lo, hi = animated_bounds(asset, asset.clip(first) if first else None)
    match_camera(base, frame("yaw=25,pitch=10", lo, hi, w / h))

    player = skeletal.Player(asset)
    if first:
        player.play(first)
    if args.screenshot:
        player.update(0.5)
        character.update(player)
        from PIL import Image

        Image.fromarray(screenshot(base)).save(args.screenshot)
        print(f"wrote {args.screenshot}")
        return

    for key, name in zip("123456789", clips):
        base.accept(key, lambda name=name: player.crossfade(name, 0.3))

    def tick(task):
        player.update(min(base.taskMgr.globalClock.getDt(), 0.1))  # skeletal: play, blend, pose
        character.update(player)  # skeletal skins into panda3d's vertex arrays
        return task.cont

    base.taskMgr.add(tick, "skeletal")
    print("keys: " + ", ".join(f"{k} {n}" for k, n in zip("123456789", clips)))
    base.run()


if __name__ == "__main__":
    main()
