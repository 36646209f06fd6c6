"""The ``skeletal edit`` command (see :mod:`skeletal.editor.app`).

Importing this module imports click only: imgui-bundle, glfw and moderngl are imported when the
window opens. Errors are one line (the CLI group prints :class:`skeletal.SkeletalError`);
:func:`main` runs the command outside the group (``python -m skeletal.cli.edit``).
"""

from __future__ import annotations

import sys

import click

from .up import up_option


@click.command("edit")
@click.argument("model", required=False, type=click.Path())
@click.option("--clip", "clip", default=None, help="Clip to start with, name or index (default: the first).")
@click.option("--size", default="1280x720", show_default=True, help="Window size WIDTHxHEIGHT.")
@click.option("--msaa", "samples", default=4, show_default=True, type=click.IntRange(0, 16),
              help="Multisampling of the 3D view (0: off).")
@click.option("--frames", default=None, type=click.IntRange(min=1),
              help="Run N frames on a fixed 1/30 s clock, then exit (with --verbose: frame times).")
@click.option("--screenshot", default=None, type=click.Path(dir_okay=False),
              help="Save the last frame to this .png and exit (after --frames, default 1).")
@click.option("--script", default=None, type=click.Path(dir_okay=False),
              help="Scripted input: a JSON list of steps (click, drag, key, text, wait, screenshot, close); "
                   "the window closes when it has run.")
@click.option("--autosave-interval", "autosave", default=60.0, show_default=True, type=click.FloatRange(min=0),
              help="Seconds between autosaves of unsaved changes to NAME.autosave.glb.")
@click.option("--verbose", "-v", is_flag=True, help="Print saves, autosaves and frame times.")
@up_option
def edit(model, clip, size, samples, frames, screenshot, script, autosave, verbose, up):
    """Edit the clips of MODEL in a window: any format skeletal reads (.gltf/.glb, .bvh, .fbx, .dae and
    Assimp's other formats), saved as .glb/.gltf; default: the built-in demo character.

    \b
    Panels: bone tree with search, inspector (bone transform as Euler angles
    in a chosen order or a quaternion, clips, hit/hurt colliders, view),
    timeline with dope sheet and curve view, 3D view with gizmo, skeleton
    overlay, onion skin and colliders. F1 in the window lists the shortcuts:
      K / Shift+K: key the bone / whole pose   Ctrl+Z / Ctrl+Y: undo / redo
      W/E/R: move/rotate/scale gizmo   I: IK drag   Space: play   Ctrl+S: save
    Unsaved work is autosaved to NAME.autosave.glb every minute (--autosave-interval)
    and on errors; a save removes the autosave.

    \b
    Examples:
      skeletal edit Soldier.glb --clip Walk
      xvfb-run skeletal edit --frames 10 --screenshot editor.png
    """
    from ..editor.app import edit as run_editor  # imports imgui-bundle, glfw and moderngl only now

    if frames is None and screenshot:
        frames = 1
    log = (lambda text: click.echo(text, err=True)) if verbose else None
    result = run_editor(model, clip=clip, size=size, samples=samples, frames=frames, screenshot=screenshot,
                        script=script, autosave_seconds=autosave, log=log, up=up)
    if result.screenshot:
        click.echo(f"wrote {result.screenshot} ({result.frames} frame{'s' if result.frames != 1 else ''})")
    if result.dirty and (frames or script):
        click.echo("closed with unsaved changes", err=True)


def main(argv: list[str] | None = None) -> int:
    """Run ``skeletal edit`` on its own: errors as one line on stderr, exit status 2."""
    from .view import run_standalone

    return run_standalone(edit, "skeletal edit", argv)


__all__ = ["edit", "main"]

if __name__ == "__main__":
    sys.exit(main())
