"""A pyglet game loop: the keyboard drives a character through a skeletal state machine, drawn by
skeletal's own shaders inside pyglet's OpenGL context.

    pip install "skeletal[pyglet]"
    python examples/bridges/pyglet_game.py

Keys: Up walks (with Shift: runs), Left/Right turn, Space waves, Escape quits. The state machine
(idle, move = a walk/run blend space on ``speed``, wave) crossfades between the clips; the
character moves by its speed and heading, and the camera follows it.

For tests and pictures the loop also runs scripted, with a fixed step and no real time:
``--frames 60 --keys UP:0-40,SPACE:45 --screenshot game.png --dump game.npz`` (key NAME held over
frames A-B, or pressed at frame A) writes the last frame and its pose, camera and states.
"""

from __future__ import annotations

import argparse
import json
import math

import numpy as np

import skeletal
from skeletal.bridges.pyglet import WindowRenderer, heading

MACHINE = {
    "parameters": {"speed": 0.0, "wave": "trigger"},
    "initial": "idle",
    "states": {
        "idle": {"clip": "idle"},
        "move": {"blend1d": {"parameter": "speed", "samples": [["walk", 1.4], ["run", 4.0]]}},
        "wave": {"clip": "wave", "loop": "once"},
    },
    "transitions": [
        {"from": "idle", "to": "move", "when": "speed > 0.1", "duration": 0.3},
        {"from": "move", "to": "idle", "when": "speed <= 0.1", "duration": 0.3},
        {"from": "idle", "to": "wave", "when": "wave", "duration": 0.2},
        {"from": "wave", "to": "idle", "exit_time": 0.95, "duration": 0.3},
    ],
}


class Game:
    """The character's state: the player (clips, state machine), heading, position and speed."""

    def __init__(self, asset):
        self.asset = asset
        self.player = skeletal.Player(asset)
        self.machine = self.player.state_machine(MACHINE)
        self.yaw, self.position, self.speed = 0.0, np.zeros(3), 0.0

    def step(self, dt: float, keys: set[str]) -> None:
        """Advance ``dt`` seconds with ``keys`` held ("UP", "LEFT", "RIGHT", "SHIFT")."""
        target = (4.0 if "SHIFT" in keys else 1.4) if "UP" in keys else 0.0
        self.speed += (target - self.speed) * min(1.0, 4.0 * dt)  # ease towards the key's speed
        self.yaw += (("LEFT" in keys) - ("RIGHT" in keys)) * 2.0 * dt
        self.player.set("speed", self.speed)
        self.player.update(dt)
        # the character faces +Z in its own space
        self.position += self.speed * dt * np.array([math.sin(self.yaw), 0.0, math.cos(self.yaw)])

    def wave(self) -> None:
        self.player.trigger("wave")

    def pose(self) -> tuple[np.ndarray, np.ndarray]:
        """(world (N, 4, 4) turned and moved, morph weights): what the renderer draws."""
        return heading(self.player.world, self.yaw, self.position), self.player.morph_weights


def parse_keys(text: str) -> list[tuple[str, int, int]]:
    """"UP:0-40,SPACE:45" -> [("UP", 0, 40), ("SPACE", 45, 45)]."""
    out = []
    for item in filter(None, text.split(",")):
        name, frames = item.split(":")
        a, _, b = frames.partition("-")
        out.append((name.upper(), int(a), int(b or a)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="800x600")
    parser.add_argument("--frames", type=int, help="scripted: run this many frames of 1/30 s, then exit")
    parser.add_argument("--keys", default="", help="scripted keys: NAME:A-B held, NAME:A pressed")
    parser.add_argument("--screenshot", help="scripted: the last frame as PNG")
    parser.add_argument("--dump", help="scripted: the last frame's pose, camera and states as .npz")
    args = parser.parse_args()

    import pyglet
    from pyglet.window import key

    w, h = (int(v) for v in args.size.split("x"))
    window = pyglet.window.Window(w, h, caption="skeletal + pyglet", resizable=args.frames is None)
    asset = skeletal.load(skeletal.examples.path("demo.glb"))
    game = Game(asset)
    view = WindowRenderer(window, asset, clip=asset.clip("walk"), samples=0 if args.frames else 4)
    lo, hi = view.renderer.bounds
    label = pyglet.text.Label("", x=10, y=h - 24, font_size=12, color=(230, 230, 230, 255))

    def follow() -> None:  # the camera keeps the character in view
        view.renderer.set_bounds(lo + game.position, hi + game.position)

    def render() -> None:
        window.clear()
        follow()
        view.draw(game.pose())
        label.text = f"{game.machine.state_of(0)}  speed {game.speed:.2f}  (Up, Shift, Left/Right, Space)"
        label.draw()

    if args.frames is not None:
        script = parse_keys(args.keys)
        states = []
        for frame in range(args.frames):
            held = {n for n, a, b in script if a <= frame <= b and a != b}
            if any(n == "SPACE" and a == frame for n, a, _ in script):
                game.wave()
            game.step(1 / 30, held)
            states.append(game.machine.state_of(0))
            window.dispatch_events()
            render()
            if args.screenshot and frame == args.frames - 1:  # the window itself, the label included
                pyglet.image.get_buffer_manager().get_color_buffer().save(args.screenshot)
            window.flip()
        if args.dump:
            world, morph = game.pose()
            cam = view.camera
            np.savez(args.dump, world=world, morph=morph, eye=cam.eye, target=cam.target, up=cam.up,
                     lens=np.array([cam.fov, cam.aspect, cam.near, cam.far]), image=view.read(),
                     bounds=np.array(view.renderer.bounds), states=np.array(json.dumps(states)))
        window.close()
        return

    held: set[str] = set()
    names = {key.UP: "UP", key.LEFT: "LEFT", key.RIGHT: "RIGHT", key.LSHIFT: "SHIFT", key.RSHIFT: "SHIFT"}

    @window.event
    def on_key_press(symbol, modifiers):
        if symbol == key.SPACE:
            game.wave()
        elif symbol in names:
            held.add(names[symbol])

    @window.event
    def on_key_release(symbol, modifiers):
        held.discard(names.get(symbol, ""))

    @window.event
    def on_resize(width, height):
        view.resize()

    window.on_draw = render
    pyglet.clock.schedule_interval(lambda dt: game.step(min(dt, 0.1), held), 1 / 60)
    pyglet.app.run()


if __name__ == "__main__":
    main()
