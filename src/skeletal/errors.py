"""Exception types raised by skeletal.

Every error that bad input can cause is a :class:`SkeletalError`. Errors about a model file name the
file and the glTF object at fault, so that one line is enough to find the problem::

    Soldier.glb: accessors[12]: count 7325 needs 117200 bytes, bufferViews[3] has 800
"""

from __future__ import annotations

import os


class SkeletalError(Exception):
    """Base class of every error skeletal raises on purpose."""


class ModelError(SkeletalError):
    """A model file is malformed, unsupported or unsafe to read.

    ``file`` is the model's path (shown by its base name), ``where`` the JSON pointer-like object path
    (``"accessors[12]"``, ``"animations[0].channels[3]"``), ``detail`` what is wrong.
    """

    def __init__(self, file: str | os.PathLike | None, where: str | None, detail: str):
        self.file = os.fspath(file) if file is not None else None
        self.where = where
        self.detail = detail
        parts = []
        if self.file:
            parts.append(os.path.basename(self.file))
        if where:
            parts.append(where)
        parts.append(detail)
        super().__init__(": ".join(parts))


class UnsupportedExtensionError(ModelError):
    """A required glTF extension is unknown, or its decoder package is not installed."""


class ClipError(SkeletalError):
    """A clip name or index does not exist, or clip data is inconsistent."""
