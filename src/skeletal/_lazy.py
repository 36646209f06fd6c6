"""Lazy package attributes (PEP 562): a package's public names import their module on first use.

``import skeletal`` then costs the package's own set-up, not the import of every stage (playback,
skinning, the tools...): ``skeletal.Player`` or ``from skeletal import Player`` imports
:mod:`skeletal.playback.player` the first time it is asked for, and files the class in the package's
namespace, so later reads are plain attribute reads. ``dir()`` and ``__all__`` list every public name
whether loaded or not; type checkers read the ``if TYPE_CHECKING:`` imports each package keeps beside
its table (``tests/test_imports.py`` checks that the two agree).

>>> from skeletal._lazy import attach
>>> __getattr__, __dir__ = attach(__name__, globals(), {"Player": ".playback.player"})  # doctest: +SKIP
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, Callable


def attach(package: str, namespace: dict[str, Any], attributes: dict[str, str],
           modules: dict[str, str] | None = None) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package`` (its ``globals()`` as ``namespace``).

    ``attributes``: public name -> the module (relative to ``package``) that defines it under that
    name; ``modules``: public name -> a module that is itself the attribute (``skeletal.ik``). Any other
    name is tried as a submodule (``skeletal.playback`` after a bare ``import skeletal``; the old
    module names of :mod:`skeletal._aliases` too), else AttributeError.
    """
    modules = modules or {}

    def __getattr__(name: str) -> Any:
        where = attributes.get(name)
        if where is not None:
            value = getattr(importlib.import_module(where, package), name)
        elif name in modules:
            value = importlib.import_module(modules[name], package)
        else:
            value = _submodule(package, name)
            if value is None:
                raise AttributeError(f"module {package!r} has no attribute {name!r}")
        namespace[name] = value  # later reads skip this function
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(attributes) | set(modules))

    return __getattr__, __dir__


def _submodule(package: str, name: str) -> ModuleType | None:
    """``package.name`` imported when it is a module of the package; None when there is none (an
    error inside an existing module propagates)."""
    if name.startswith("__"):
        return None
    full = f"{package}.{name}"
    try:
        return importlib.import_module(full)
    except ModuleNotFoundError as error:
        if error.name == full:
            return None
        raise


class ShieldedPackage(ModuleType):
    """A package module whose public names in ``_SHIELDED`` keep their values when the import system
    files a submodule of the same name on the package (it does so after loading ``package.name``).
    skeletal needs it because old module names (:mod:`skeletal._aliases`: ``skeletal.skin``,
    ``skeletal.bake``...) are also the names of public functions: ``import skeletal.skin`` must leave
    ``skeletal.skin`` the function. Set with ``sys.modules[__name__].__class__ = ShieldedPackage``."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, ModuleType) and name in self.__dict__.get("_SHIELDED", ()):
            return  # the function stays (loaded now or on first use); the module is in sys.modules
        super().__setattr__(name, value)
