"""Opening model files safely: regular files only.

A path that names a named pipe (FIFO), a device such as ``/dev/zero``, a socket or a directory must
not reach ``open()`` + ``read()``: a FIFO blocks the open until a writer appears (forever), a device
reads without end (a MemoryError after gigabytes), a directory fails with a platform-dependent error.
:func:`open_regular` opens with ``O_NONBLOCK`` (so a FIFO's open returns at once), checks the opened
descriptor with ``fstat`` (so a path swapped after a check cannot slip through), and refuses anything
that is not a regular file with :class:`NotRegularFile`, whose message says what the path is.

Every reader uses it: :func:`skeletal.load`'s front door (so BVH and any other reader is covered),
the glTF reader for the model and the buffers/images it references, and the Assimp reader for the
model and the side files Assimp asks for.

>>> with open_regular(__file__) as f:
...     len(f.read(3))
3
"""

from __future__ import annotations

import os
import stat
from typing import BinaryIO

__all__ = ["NotRegularFile", "open_regular", "read_regular", "check_regular", "kind_of"]


class NotRegularFile(OSError):
    """The path exists but is not a regular file (a FIFO, a device, a socket or a directory)."""


def kind_of(mode: int) -> str:
    """A few words naming the file type of an ``st_mode`` (``"a named pipe (FIFO)"``)."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def open_regular(path: str | os.PathLike) -> BinaryIO:
    """``open(path, "rb")`` for a regular file; :class:`NotRegularFile` for anything else.

    Never blocks on a FIFO (the open is non-blocking and the type is checked on the open descriptor).
    Other failures are the usual :class:`OSError` (``FileNotFoundError``, ``PermissionError``...).

    >>> open_regular("/dev/null")
    Traceback (most recent call last):
    ...
    skeletal.io.files.NotRegularFile: [Errno 19] not a regular file: '/dev/null' is a character device
    """
    name = os.fspath(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0) \
        | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(name, flags)
    except IsADirectoryError:
        raise NotRegularFile(19, f"not a regular file: {name!r} is a directory") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(19, f"not a regular file: {name!r} is {kind_of(mode)}")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | os.PathLike, max_bytes: int | None = None) -> bytes:
    """The bytes of a regular file (at most ``max_bytes`` of them); errors as :func:`open_regular`."""
    with open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        return f.read(size if max_bytes is None else min(size, max_bytes))


def check_regular(path: str | os.PathLike) -> None:
    """Raise :class:`NotRegularFile` (or another :class:`OSError`) unless ``path`` is a readable
    regular file; opens nothing that could block."""
    open_regular(path).close()
