"""Optional decoder packages (DracoPy, meshopt): imported only when a file needs them.

A missing package is reported as :class:`~skeletal.errors.UnsupportedExtensionError` naming the
glTF extension and the ``pip install`` line that fixes it.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from skeletal.errors import UnsupportedExtensionError


def is_installed(module: str) -> bool:
    """Whether ``module`` can be imported."""
    try:
        importlib.import_module(module)
        return True
    except ImportError:
        return False


def require(module: str, extension: str, file: str, where: str | None = None) -> ModuleType:
    """Import ``module`` (the decoder of ``extension``), or raise UnsupportedExtensionError saying
    which package to install. The pip package has the module's name."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise UnsupportedExtensionError(
            file, where, f"{extension} needs the Python package '{module}' (pip install {module})"
        ) from None
