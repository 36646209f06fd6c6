"""The ``skeletal locomotion`` command (registered in :mod:`skeletal.cli`): the built-in character, or
any model with idle/walk/run clips (a model file or a folder of BVH takes), following a scripted path
under motion matching, rendered headless with the desired and the matched trajectories drawn on the
ground.

Importing this module imports click only; the renderer and the playback come when the command runs.
"""

from __future__ import annotations

import click

from ..playback.locomotion.paths import PATHS, SPEEDS


@click.command("locomotion")
@click.argument("model", required=False, type=click.Path(exists=True))
@click.option("--clips", "clips", default=None, metavar="A,B,...",
              help="The MODEL's clips to build the locomotion set from, by name, comma separated "
                   "(default: those named like idle, walk, run, jog); ROLE=NAME gives a clip its role "
                   "(idle, walk or run), e.g. walk=Walking,run=Sprint_02,idle=Breathe.")
@click.option("--path", "path", default="figure8", show_default=True, type=click.Choice(PATHS),
              help="The scripted path (a figure eight: 8 m x 4 m walking, 21 m x 10.5 m running, for the "
                   "built-in character; as wide for a MODEL's gait speed).")
@click.option("--speed", default="walk", show_default=True, type=click.Choice(tuple(SPEEDS)),
              help="Path speed: walk (1 m/s) or run (3.5 m/s) for the built-in character; a MODEL's own walk "
                   "or run speed.")
@click.option("--out", "out", default="locomotion.mp4", show_default=True, type=click.Path(dir_okay=False),
              help="Output file: .mp4, .gif, or .png (the last frame).")
@click.option("--seconds", default=12.0, show_default=True, type=float, help="Length to render.")
@click.option("--fps", default=30.0, show_default=True, type=float, help="Frames per second (simulated at 60 Hz).")
@click.option("--size", default="640x480", show_default=True, help="Image size WIDTHxHEIGHT.")
@click.option("--camera", default=None, help="Camera spec as for `skeletal render` (yaw, pitch, distance...); "
                                            "it follows the character.")
@click.option("--no-warping", "no_warping", is_flag=True, help="Motion matching without stride and orientation warping.")
def locomotion_command(model, clips, path, speed, out, seconds, fps, size, camera, no_warping):
    """Render a character walking or running a path under motion matching: the built-in character, or
    MODEL (a glTF/FBX/BVH... file, or a folder of BVH takes of one skeleton) from its idle, walk and run
    clips (moving, turning, starting and stopping versions are made from them; the path runs at the
    gait's own speed).

    Lines on the ground: the path (grey), where the character has been (green), the desired trajectory
    over the next second (blue) and the trajectory of the database frame playing (orange).

    \b
    Examples:
      skeletal locomotion --speed walk --out walk8.mp4
      skeletal locomotion --speed run --seconds 20 --out run8.mp4
      skeletal locomotion Soldier.glb --speed run --out soldier.mp4
      skeletal locomotion RobotExpressive.glb --clips Idle,Walking,Running
      skeletal locomotion mocap/ --clips walk01,run02      (a folder of .bvh files)
      skeletal locomotion mocap/ --clips walk=take_07,run=take_12,idle=take_01
      skeletal view --locomotion        (steer it with WASD / the arrow keys)
    """
    from ..playback.locomotion.gaits import clip_names_option
    from ..render.locomotion import render_locomotion

    result = render_locomotion(out, path=path, speed=speed, seconds=seconds, fps=fps, size=size,
                               warping=not no_warping, camera=camera, model=model, clips=clip_names_option(clips))
    w, h = result["size"]
    click.echo(f"wrote {result['paths'][0]} ({result['frames']} frames, {w}x{h}, {result['searches']} searches, "
               f"{result['jumps']} jumps)")


__all__ = ["locomotion_command"]
