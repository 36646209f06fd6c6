"""The module names skeletal had before its stages moved into packages, kept importable.

``skeletal.rig`` is now ``skeletal.anim.rig``, ``skeletal.skin`` is ``skeletal.skinning.lbs`` and so
on (:data:`MOVED`). Code written against the old names keeps working: ``import skeletal.skin``,
``from skeletal.ik import two_bone`` and ``skeletal.clip.Clip`` all give the module at its new place
(the same module object, so monkeypatching either name patches both). The finder below answers only
for the names in :data:`MOVED`; everything else goes to Python's normal import system.

>>> import skeletal.skin, skeletal.skinning.lbs
>>> skeletal.skin is skeletal.skinning.lbs
True
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from types import ModuleType

#: old name -> new name
MOVED: dict[str, str] = {
    "skeletal.rig": "skeletal.anim.rig",
    "skeletal.clip": "skeletal.anim.clip",
    "skeletal.sampling": "skeletal.anim.sampling",
    "skeletal.pose": "skeletal.anim.pose",
    "skeletal.ik": "skeletal.anim.ik",
    "skeletal.colliders": "skeletal.anim.colliders",
    "skeletal.skin": "skeletal.skinning.lbs",
    "skeletal.skin_dq": "skeletal.skinning.dqs",
    "skeletal.bake": "skeletal.tools.bake",
    "skeletal.cliptools": "skeletal.tools.cliptools",
    "skeletal.compress": "skeletal.tools.compress",
    "skeletal.retarget": "skeletal.tools.retarget",
    "skeletal.export": "skeletal.tools.export",
    "skeletal.io.usd_write": "skeletal.tools.usd_write",
    "skeletal.jobs": "skeletal.batch.jobs",
    "skeletal.workers": "skeletal.batch.workers",
    "skeletal.warmup": "skeletal.batch.warmup",
    "skeletal.isosurface": "skeletal.demo.isosurface",
}


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self) -> None:
        self._specs: dict[str, object] = {}

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec) -> ModuleType:
        # the real module, imported under its new name; the import system then files it under the
        # old name too
        module = importlib.import_module(MOVED[spec.name])
        self._specs[spec.name] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # the import system has just given the module the alias's spec: give it back its own
        for old, new in MOVED.items():
            if new == module.__name__ and old in self._specs:
                module.__spec__ = self._specs[old]


def install() -> None:
    """Put the finder on ``sys.meta_path`` (once; done when this module is imported)."""
    if not any(isinstance(f, _Alias) for f in sys.meta_path):
        sys.meta_path.insert(0, _Alias())


def link_loaded() -> None:
    """File the moved modules that are already imported under their old names too, directly.

    Needed where a package attribute shares the old name: ``skeletal.skin`` is the function
    :func:`skeletal.skin` and the old name of the module :mod:`skeletal.skinning.lbs`. Loading the
    alias through the finder would set the package's attribute to the module (the import system does
    that for every submodule it loads); an entry already in ``sys.modules`` is not loaded again.
    """
    for old, new in MOVED.items():
        if new in sys.modules and old not in sys.modules:
            sys.modules[old] = sys.modules[new]


def attribute(package: str, name: str) -> ModuleType:
    """``skeletal.<name>`` for a moved module (the package's ``__getattr__``); AttributeError otherwise."""
    old = f"{package}.{name}"
    if old not in MOVED:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    return importlib.import_module(old)


install()
