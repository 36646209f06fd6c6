"""The ``skeletal locomotion`` command (registered in :mod:`skeletal.cli`): the built-in character
following a scripted path under motion matching, rendered headless with the desired and the matched
trajectories drawn on the ground.

Importing this module imports click only; the renderer and the playback come when the command runs.
"""

from __future__ import annotations

import click

from ..playback.locomotion.paths import PATHS, SPEEDS


@click.command("locomotion")
@click.option("--path", "path", default="figure8", show_default=True, type=click.Choice(PATHS),
              help="The scripted path (a figure eight: 8 m x 4 m walking, 21 m x 10.5 m running).")
@click.option("--speed", default="walk", show_default=True, type=click.Choice(tuple(SPEEDS)),
              help="Path speed: walk (1 m/s) or run (3.5 m/s).")
@click.option("--out", "out", default="locomotion.mp4", show_default=True, type=click.Path(dir_okay=False),
              help="Output file: .mp4, .gif, or .png (the last frame).")
@click.option("--seconds", default=12.0, show_default=True, type=float, help="Length to render.")
@click.option("--fps", default=30.0, show_default=True, type=float, help="Frames per second (simulated at 60 Hz).")
@click.option("--size", default="640x480", show_default=True, help="Image size WIDTHxHEIGHT.")
@click.option("--camera", default=None, help="Camera spec as for `skeletal render` (yaw, pitch, distance...); "
                                            "it follows the character.")
@click.option("--no-warping", "no_warping", is_flag=True, help="Motion matching without stride and orientation warping.")
def locomotion_command(path, speed, out, seconds, fps, size, camera, no_warping):
    """Render the built-in character walking or running a path under motion matching.

    Lines on the ground: the path (grey), where the character has been (green), the desired trajectory
    over the next second (blue) and the trajectory of the database frame playing (orange).

    \b
    Examples:
      skeletal locomotion --speed walk --out walk8.mp4
      skeletal locomotion --speed run --seconds 20 --out run8.mp4
      skeletal view --locomotion        (steer it with WASD / the arrow keys)
    """
    from ..render.locomotion import render_locomotion

    result = render_locomotion(out, path=path, speed=speed, seconds=seconds, fps=fps, size=size,
                               warping=not no_warping, camera=camera)
    w, h = result["size"]
    click.echo(f"wrote {result['paths'][0]} ({result['frames']} frames, {w}x{h}, {result['searches']} searches, "
               f"{result['jumps']} jumps)")


__all__ = ["locomotion_command"]
