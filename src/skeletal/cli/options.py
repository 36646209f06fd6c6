"""Options shared by the commands that read a model.

>>> import click
>>> @scene_option
... @click.command()
... def show(scene): ...
"""

from __future__ import annotations

from typing import Any, Callable

import click

SCENE_HELP = "Scene to show, index or name (default: the file's default scene; `skeletal info` lists them)."


def scene_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--scene SCENE`` (passed to the command as ``scene``, None when not given)."""
    return click.option("--scene", "scene", default=None, metavar="SCENE", help=SCENE_HELP)(command)


def asset_in_scene(model: str | None, scene: str | None) -> Any:
    """What the render and view commands take as their model: the path (or an Asset already loaded,
    with its scene) as given when no scene is chosen, else the :class:`skeletal.Asset` loaded with that
    scene (the built-in character when ``model`` is None)."""
    if scene is None or not (model is None or isinstance(model, str)):
        return model
    from ..asset import Asset, load

    if model is None:
        from ..demo import build_demo_document

        return Asset(build_demo_document(), scene=scene)
    return load(model, scene=scene)
