"""Warnings on the command line: one ``skeletal: warning: ...`` line each, no source file or line.

>>> import warnings
>>> with warnings.catch_warnings():
...     warnings.showwarning = show_warning
...     warnings.warn("walk.bvh: BVH has no scale channels")   # doctest: +SKIP
skeletal: warning: walk.bvh: BVH has no scale channels
"""

from __future__ import annotations

import click

from ..shown import shown


def show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """``warnings.showwarning`` for the CLI: the message on one line of stderr."""
    text = shown(" ".join(str(message).split()))
    click.echo(f"skeletal: warning: {text}", err=True)
