"""The ``skeletal view`` command: an interactive window on a model (see :mod:`.viewer`).

Importing this module imports click only: glfw, moderngl and the renderer are imported when the
command runs. Errors are :class:`RenderError` (or other :class:`skeletal.SkeletalError`) with
one-line messages; the CLI group prints them, and so does :func:`main` when this module is run
directly (``python -m skeletal.cli.view``, which the viewer's tests use).
"""

from __future__ import annotations

import sys

import click

from ..render.errors import INSTALL_HINT, RenderError
from .up import load_upright, up_option
from .options import asset_in_scene, scene_option
from ..shown import shown

PALETTE_CHOICES = ("auto", "uniform", "ubo", "ssbo", "texture")
LOOP_CHOICES = ("repeat", "pingpong", "clamp")
SKINNING_CHOICES = ("lbs", "dqs")


@click.command("view")
@click.argument("model", required=False, type=click.Path())
@click.option("--clip", "clip", default=None, help="Clip to start with, name or index (default: the first).")
@click.option("--size", default="1024x640", show_default=True, help="Window size WIDTHxHEIGHT.")
@click.option("--time", "start", default=0.0, show_default=True, type=float, help="Start time in the clip.")
@click.option("--speed", default=1.0, show_default=True, type=float, help="Playback speed.")
@click.option("--loop", default="repeat", show_default=True, type=click.Choice(LOOP_CHOICES), help="Loop mode.")
@click.option("--camera", default=None,
              help="Initial camera spec, e.g. 'yaw=30,pitch=15' (as for skeletal render).")
@click.option("--skeleton", is_flag=True, help="Start with the skeleton overlay on.")
@click.option("--weights", "weights_joint", default=None, metavar="JOINT",
              help="Start with the weight heat-map of JOINT (name or glTF node index).")
@click.option("--blend", "blend", default=None, metavar="CLIP:POS,...",
              help="Start in blend mode: a 1D blend space over these clips at these positions, "
                   "e.g. idle:0,walk:1.4,run:4 (B in the window blends idle/walk/run or the first clips).")
@click.option("--blend-value", "blend_value", default=None, type=float, metavar="X",
              help="The blend parameter to start at (default: --clip's position, else the first sample's); "
                   "alone, blend mode on the default samples.")
@click.option("--palette", "palette_mode", default="auto", show_default=True, type=click.Choice(PALETTE_CHOICES),
              help="How skin palettes reach the GPU.")
@click.option("--skinning", default="lbs", show_default=True, type=click.Choice(SKINNING_CHOICES),
              help="Linear blend (lbs) or dual quaternion (dqs) skinning.")
@click.option("--msaa", "samples", default=4, show_default=True, type=click.IntRange(0, 16),
              help="Multisampling (0: off).")
@click.option("--frames", default=None, type=click.IntRange(min=1),
              help="Run N frames on a fixed 1/30 s clock, then exit.")
@click.option("--screenshot", default=None, type=click.Path(dir_okay=False),
              help="Save the last frame, UI included, to this .png and exit (after --frames, default 1).")
@click.option("--verbose", "-v", is_flag=True, help="Print the GL renderer, palette path and frame timings.")
@click.option("--locomotion", is_flag=True,
              help="Steer the built-in character (or MODEL, from its idle/walk/run clips) under motion matching: "
                   "WASD move, Shift run, arrows face.")
@up_option
@scene_option
def view(model, clip, size, start, speed, loop, camera, skeleton, weights_joint, blend, blend_value, palette_mode,
         skinning, samples, frames, screenshot, verbose, locomotion, up, scene):
    """Open MODEL (glTF, FBX, Collada, BVH...; default: the built-in demo character) in an interactive window.

    \b
    Controls (H in the window lists them):
      left drag: orbit   right/middle drag: pan   wheel: zoom   R: reset view
      1-9, Up/Down, click: clip   space: play/pause   click/drag the bar: seek
      Left/Right: step a frame   +/-: speed   L: loop mode   C: crossfade or cut
      B: blend mode   drag the slider, , and .: blend parameter
      S: skeleton   W: weight heat-map   [ ]: previous/next joint
      P: save a screenshot   H: help   Esc/Q: quit

    \b
    Examples:
      skeletal view Soldier.glb --clip Walk
      skeletal view --blend idle:0,walk:1.4,run:4 --blend-value 2
      xvfb-run skeletal view --frames 10 --screenshot view.png
      skeletal view --locomotion
      skeletal view Soldier.glb --locomotion
    """
    if locomotion:
        _view_locomotion(model, size, frames, screenshot)
        return
    try:
        from ..render.viewer import view as run_viewer  # imports moderngl only now (glfw when the window opens)
    except ImportError as exc:  # moderngl missing, or its compiled part does not load
        raise RenderError(f"cannot import the viewer ({exc}): {INSTALL_HINT}; pip install glfw") from None

    if model is not None:
        model = load_upright(model, up, scene)
    log = (lambda text: click.echo(text, err=True)) if verbose else None
    result = run_viewer(asset_in_scene(model, scene), clip=clip, size=size, start=start, speed=speed, loop=loop, camera=camera,
                        skeleton=skeleton, weights_joint=weights_joint, blend=blend, blend_value=blend_value,
                        palette_mode=palette_mode, samples=samples, frames=frames, screenshot=screenshot, log=log,
                        skinning=skinning)
    if result.screenshot:
        click.echo(f"wrote {result.screenshot} ({result.frames} frame{'s' if result.frames != 1 else ''}, "
                   f"{result.playback})")


def _view_locomotion(model, size, frames, screenshot) -> None:
    """``--locomotion``: the built-in character (or MODEL's locomotion set) steered with the keyboard
    (:mod:`skeletal.render.locomotion_viewer`)."""
    if screenshot is not None and not screenshot.lower().endswith(".png"):
        raise RenderError(f"cannot write {screenshot!r}: the screenshot must end in .png")
    try:
        from ..render.locomotion_viewer import LocomotionViewer
        from ..render.output import parse_size
    except ImportError as exc:
        raise RenderError(f"cannot import the viewer ({exc}): {INSTALL_HINT}; pip install glfw") from None
    with LocomotionViewer(parse_size(size), model=model) as viewer:
        drawn = viewer.run(frames=frames or (1 if screenshot else None), screenshot=screenshot)
    if screenshot:
        click.echo(f"wrote {screenshot} ({drawn} frame{'s' if drawn != 1 else ''}, locomotion)")


def run_standalone(command: click.Command, prog_name: str, argv: list[str] | None = None) -> int:
    """Run ``command`` outside the ``skeletal`` group: errors as one line on stderr, exit status 2."""
    import warnings

    from ..errors import SkeletalError
    from .warn import show_warning

    try:
        with warnings.catch_warnings():
            warnings.showwarning = show_warning  # one 'skeletal: warning:' line each, as in the group
            command.main(args=argv, prog_name=prog_name, standalone_mode=False)
    except SkeletalError as exc:
        click.echo(f"skeletal: error: {shown(exc)}", err=True)
        return 2
    except click.exceptions.Abort:
        return 1
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except OSError as exc:
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        click.echo(f"skeletal: error: {where}{exc.strerror or exc}", err=True)
        return 2
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run ``skeletal view`` on its own (see :func:`run_standalone`)."""
    return run_standalone(view, "skeletal view", argv)


__all__ = ["view", "main", "RenderError"]

if __name__ == "__main__":
    sys.exit(main())
