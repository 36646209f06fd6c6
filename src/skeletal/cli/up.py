"""``--up auto|y|z|...``, the one up-axis option of every command that loads a model, and the loader
that prints, in one line on stderr, when a file was turned (see :mod:`skeletal.up`)."""

from __future__ import annotations

import os
from typing import Any, Callable

import click

from ..up import UP_CHOICES

UP_HELP = ("The model's up axis: auto (found from the skeleton and motion for BVH/FBX/..., glTF is Y up), "
           "or y, z, -z, x, -x, -y to turn a file that lies down.")


def up_option(function: Callable[..., Any]) -> Callable[..., Any]:
    """The ``--up`` option (default auto), passed as ``up``."""
    return click.option("--up", "up", type=click.Choice(UP_CHOICES, case_sensitive=False), default="auto",
                        show_default=True, help=UP_HELP)(function)


def say_turned(asset: Any) -> None:
    """Print the one line saying ``asset``'s file was turned (nothing when it was not)."""
    up = getattr(asset, "up", None)
    line = up.line(os.path.basename(asset.path or "model")) if up is not None else None
    if line:
        click.echo(line, err=True)


def load_upright(path: str, up: str, scene: str | None = None) -> Any:
    """:func:`skeletal.load` with ``up`` (and ``scene``), saying in one line on stderr when the file
    was turned."""
    from ..asset import load
    from ..errors import ModelError

    if not os.path.lexists(path):
        raise ModelError(path, None, "no such file")
    asset = load(path, up=up, scene=scene)
    say_turned(asset)
    return asset
