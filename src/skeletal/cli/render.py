"""The ``skeletal render`` command (registered in :mod:`skeletal.cli`).

Importing this module imports click only: moderngl, imageio and the renderer are imported when the
command runs, so ``skeletal --help`` works without them. Errors are :class:`RenderError` (or other
:class:`skeletal.SkeletalError`) with one-line messages; the CLI group prints them.
"""

from __future__ import annotations

import click

from ..render.errors import RenderError
from .up import load_upright, up_option
from .options import asset_in_scene, scene_option

PALETTE_CHOICES = ("auto", "uniform", "ubo", "ssbo", "texture")
SKINNING_CHOICES = ("lbs", "dqs")


@click.command("render")
@click.argument("model", required=False, type=click.Path())
@click.option("--clip", "clip", default=None, help="Clip name or index (default: the first clip).")
@click.option("--out", "out", default=None, type=click.Path(dir_okay=False),
              help="Output file: .png (one frame), .gif or .mp4 (default: MODEL_CLIP.gif).")
@click.option("--fps", default=30.0, show_default=True, type=float, help="Frames per second.")
@click.option("--size", default="640x480", show_default=True, help="Image size WIDTHxHEIGHT.")
@click.option("--seconds", default=None, type=float, help="Length to render (default: the clip's duration).")
@click.option("--time", "start", default=0.0, show_default=True, type=float,
              help="Clip time of the first frame (the only frame of a single .png).")
@click.option("--camera", default=None,
              help="Camera spec, e.g. 'yaw=30,pitch=15,distance=3' (keys: yaw, pitch, distance, fov, zoom, "
                   "target=x:y:z; yaw is from the character's front), or 'follow' to move with the character "
                   "(default: a clip that travels is framed whole, seen from the side of its path).")
@click.option("--skeleton", is_flag=True, help="Draw the skeleton on top.")
@click.option("--weights", "weights_joint", default=None, metavar="JOINT",
              help="Colour by the skin weights of JOINT (name or glTF node index): blue 0 .. red 1.")
@click.option("--crowd", "crowd_n", default=1, show_default=True, type=int,
              help="Draw N instances on a grid at different phases (one instanced draw call).")
@click.option("--gpu-pose", "gpu_pose", is_flag=True,
              help="Pose the crowd in OpenGL 4.3 compute shaders and draw from the GPU's palettes (no per-frame "
                   "palette upload; one clip, LBS).")
@click.option("--frames", is_flag=True, help="With a .png output: write every frame as NAME_0001.png, ...")
@click.option("--palette", "palette_mode", default="auto", show_default=True, type=click.Choice(PALETTE_CHOICES),
              help="How skin palettes reach the GPU.")
@click.option("--skinning", default="lbs", show_default=True, type=click.Choice(SKINNING_CHOICES),
              help="Linear blend (lbs) or dual quaternion (dqs: no candy-wrapper collapse on twists) skinning.")
@click.option("--verbose", "-v", is_flag=True, help="Print the GL renderer, palette path, camera and timings.")
@click.option("--crossfade", default=None, metavar="FROM:TO@START[:DUR]",
              help="Play FROM, then crossfade to TO at START seconds over DUR seconds (e.g. Walk:Run@1.0:0.5).")
@click.option("--ground", default=None, metavar="SPEC",
              help="Foot placement on a ground drawn under the character: terrain[:amplitude=A,wavelength=L,seed=S], "
                   "slope[:angle=DEG,direction=DEG] or flat[:height=H]; an in-place walk travels over it.")
@click.option("--look-at", "look_at", default=None, metavar="X,Y,Z",
              help="The head follows this world point (smoothed by a critically damped spring).")
@click.option("--jiggle", is_flag=True, help="Spring bones on tail chains (joints named *tail*, e.g. Fox.glb).")
@click.option("--force", is_flag=True, help="Render even more than 108,000 frames (an hour at 30 fps).")
@up_option
@scene_option
def render(model, clip, out, fps, size, seconds, start, camera, skeleton, weights_joint, crowd_n, frames,
           palette_mode, skinning, verbose, crossfade, ground, look_at, jiggle, gpu_pose, force, up, scene):
    """Render MODEL (glTF, FBX, Collada, BVH...; default: the built-in demo character) headless to an image or video.

    \b
    Examples:
      skeletal render Soldier.glb --clip Walk --out walk.gif
      skeletal render Fox.glb --out fox.png --camera yaw=90,pitch=5 --skeleton
      skeletal render --crowd 16 --out crowd.mp4 --seconds 2
      skeletal render --crowd 10000 --gpu-pose --out crowd.png
      skeletal render Soldier.glb --crossfade Walk:Run@1.0:0.5 --out fade.mp4
      skeletal render Fox.glb --skinning dqs --out fox.png
      skeletal render Soldier.glb --clip Walk --ground terrain:amplitude=0.2 --look-at 1,1.6,3 --out hills.mp4
    """
    from ..render.output import render_clip  # imports moderngl/imageio only now

    if model is not None:
        model = load_upright(model, up, scene)
    result = render_clip(
        asset_in_scene(model, scene), clip=clip, out_path=out, fps=fps, size=size, seconds=seconds, camera=camera, skeleton=skeleton,
        weights_joint=weights_joint, crowd_n=crowd_n, frames=frames, verbose=verbose, palette_mode=palette_mode,
        start=start, log=lambda text: click.echo(text, err=True), crossfade=crossfade, skinning=skinning,
        ground=ground, look_at=look_at, jiggle=jiggle, force=force, gpu_pose=gpu_pose,
    )
    where = result.paths[0] if len(result.paths) == 1 else f"{result.paths[0]} .. {result.paths[-1]}"
    w, h = result.size
    click.echo(f"wrote {where} ({result.frames} frame{'s' if result.frames != 1 else ''}, {w}x{h}, "
               f"clip {result.clip!r})")


__all__ = ["render", "RenderError"]
