"""The ``skeletal`` command line: thin click commands over the library, one module per command
family (:mod:`.group` holds the group, ``info``/``bake``/``demo``/``retarget``/``export`` and the
``FEATURE_COMMANDS`` list; ``render``, ``view``, ``edit``, ``bench``, ``compress``, ``batch`` have
modules of their own).

Nothing is imported here until asked for, so that ``python -m skeletal.cli.view`` (or ``.edit``,
``.bench``) runs its module without the package having imported it first.

>>> from skeletal.cli import cli            # the click group
>>> "info" in cli.commands
True
"""

from __future__ import annotations

from typing import Any

__all__ = ["cli", "main", "console_main", "describe", "FEATURE_COMMANDS"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import group

        return getattr(group, name)
    raise AttributeError(f"module 'skeletal.cli' has no attribute {name!r}")
