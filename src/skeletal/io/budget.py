"""One memory budget for every reader, decoder and command that samples time (issue 32).

**Files.** Reading a model file of N bytes may allocate at most ``max(256 MiB, 64 x N)`` bytes of
data that the file does not hold byte for byte: arrays of zeros (glTF accessors without a
bufferView, sparse accessors made dense), bufferViews decoded from EXT_meshopt_compression, and
decoded textures. A :class:`FileBudget` is charged before each such allocation and refuses with
:class:`BudgetError`, one line naming the file, the object and the bytes it would need.

**Commands.** Commands that sample a clip in time (``render``, ``export`` to BVH, ``retarget --fps``,
``html``, ``bake``, ``batch``) count their frames with :func:`frame_count` (finite, positive rates
and durations only) and check the estimate with :func:`check_output` before allocating: above
:data:`OUTPUT_LIMIT_BYTES` (2 GB) or :data:`FRAME_LIMIT` frames they refuse and say ``pass --force``;
past :data:`MAX_FRAMES` nothing is sampled, forced or not.

**Trusted files.** One setting raises (or lowers) the file budget: the environment variable
``SKELETAL_MEMORY_BUDGET`` (``4G``, ``512M``, a number of bytes, or ``unlimited``), or
:func:`set_memory_budget` from Python. ``skeletal batch --trusted`` sets it to ``unlimited`` in its
workers.

>>> budget = FileBudget("model.glb", 10_000)
>>> budget.limit == 256 << 20
True
>>> budget.charge(1 << 20, "accessors[3]", "zeros")       # fine: 1 MiB of 256 MiB
>>> frame_count(2.0, 30.0, what="clip 'walk'")
61
"""

from __future__ import annotations

import math
import os
import re

from skeletal.errors import ModelError, SkeletalError

#: Every file may cost this much, however small it is...
FLOOR_BYTES = 256 << 20
#: ...or this many times its own size, when that is more.
RATIO = 64
#: The environment variable of the one setting (see the module docstring).
ENV = "SKELETAL_MEMORY_BUDGET"

#: Sampled output (frames x bytes per frame) above which a command asks for ``--force`` (bake's rule).
OUTPUT_LIMIT_BYTES = 2 * 10**9
#: Frames above which a command asks for ``--force`` even when each frame is small (one hour at 30 fps).
FRAME_LIMIT = 108_000
#: Frames no command samples, forced or not (a clip of 3e38 s, ``--fps 1e300``).
MAX_FRAMES = 10**9
#: The highest frame rate any command accepts.
MAX_FPS = 10_000.0

_override: str | int | None = None


class BudgetError(ModelError):
    """A file would need more memory than its budget allows (names the file, the object, the bytes)."""


class SamplingError(SkeletalError):
    """A command would sample too many frames (says how many, how big, and what to pass)."""


def human_bytes(size: float) -> str:
    """``5.6 GB``, ``310 MB``, ``12 kB``: decimal units, 3 significant digits.

    >>> human_bytes(1.27e12), human_bytes(999)
    ('1.27e+03 GB', '999 bytes')
    """
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size / scale:.3g} {unit}"
    return f"{int(size)} bytes"


def parse_budget(text: str | int | None) -> int | None:
    """``"4G"``, ``"512M"``, ``"100k"``, ``"1000000"`` -> bytes (binary units); ``"unlimited"`` -> None.

    >>> parse_budget("4G") == 4 << 30, parse_budget("unlimited")
    (True, None)
    """
    if isinstance(text, int) and not isinstance(text, bool):
        if text <= 0:
            raise SkeletalError(f"{ENV}: the budget must be positive, got {text}")
        return text
    value = str(text).strip().lower()
    if value in ("unlimited", "none", "trusted", "inf"):
        return None
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?", value)
    if not match or float(match.group(1)) <= 0:
        raise SkeletalError(f"{ENV}={text!r}: give a size such as 4G, 512M or 1000000 (bytes), or 'unlimited'")
    scale = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[match.group(2)]
    return int(float(match.group(1)) * scale)


def set_memory_budget(value: str | int | None) -> None:
    """Set the per-file budget of this process: bytes, a size such as ``"4G"``, or ``"unlimited"``
    (trusted files); None returns to ``SKELETAL_MEMORY_BUDGET`` or the default rule.

    >>> set_memory_budget("unlimited"); file_budget(10) is None
    True
    >>> set_memory_budget(None)
    """
    if value is not None:
        parse_budget(value)  # a bad value fails here, not at the next load
    global _override
    _override = value


def file_budget(file_bytes: int) -> int | None:
    """The bytes a file of ``file_bytes`` may cost beyond its own (None: unlimited, trusted)."""
    setting = _override if _override is not None else os.environ.get(ENV)
    if setting is not None and str(setting).strip():
        return parse_budget(setting)
    return max(FLOOR_BYTES, RATIO * int(file_bytes))


def budget_hint() -> str:
    return f"set {ENV}=4G (or unlimited) for a trusted file"


class FileBudget:
    """What one file has spent of its budget; :meth:`charge` before every allocation it does not back.

    ``file``: the file's name (for messages); ``file_bytes``: its size on disk (or in memory).
    """

    def __init__(self, file: str | os.PathLike | None, file_bytes: int):
        self.file = file
        self.file_bytes = int(file_bytes)
        self.limit = file_budget(self.file_bytes)
        self.spent = 0

    def add_source(self, nbytes: int) -> None:
        """The file brought ``nbytes`` more of its own (an external buffer): its budget grows with it."""
        self.file_bytes += int(nbytes)
        if self.limit is not None:
            self.limit = file_budget(self.file_bytes)

    def allows(self, nbytes: int) -> bool:
        return self.limit is None or self.spent + nbytes <= self.limit

    def charge(self, nbytes: int, where: str | None, what: str) -> None:
        """Count ``nbytes`` for ``what`` (e.g. "zeros for 1,398,096 VEC3 of FLOAT") at ``where``, or raise
        :class:`BudgetError` before anything is allocated."""
        if not self.allows(nbytes):
            raise BudgetError(self.file, where, self.refusal(nbytes, what))
        self.spent += int(nbytes)

    def refusal(self, nbytes: int, what: str) -> str:
        before = f" after {human_bytes(self.spent)} already" if self.spent else ""
        return (f"{what} would need {human_bytes(nbytes)}{before}, over this file's memory budget of "
                f"{human_bytes(self.limit or 0)} (max(256 MiB, {RATIO} x its {human_bytes(self.file_bytes)})): "
                f"{budget_hint()}")


# -- commands that sample time ------------------------------------------------------------------


def check_fps(fps: float, what: str = "--fps") -> float:
    """``fps`` as a float, or SamplingError unless it is finite, positive and at most :data:`MAX_FPS`."""
    try:
        value = float(fps)
    except (TypeError, ValueError):
        raise SamplingError(f"{what}: {fps!r} is not a number") from None
    if not (math.isfinite(value) and value > 0):
        raise SamplingError(f"{what}: fps must be positive and finite, got {fps}")
    if value > MAX_FPS:
        raise SamplingError(f"{what}: {value:g} frames per second is more than the {MAX_FPS:g} any command samples")
    return value


def frame_count(duration: float, fps: float, *, what: str, inclusive: bool = True) -> int:
    """Frames of ``duration`` seconds at ``fps`` (``inclusive``: both ends, as bake samples), checked
    before anything is allocated: SamplingError for a non-finite count or more than :data:`MAX_FRAMES`.

    >>> frame_count(1.0, 30.0, what="x", inclusive=False)
    30
    """
    rate = check_fps(fps)
    seconds = float(duration)
    if not math.isfinite(seconds) or seconds < 0:
        raise SamplingError(f"{what}: the length {duration} s is not a finite, non-negative number of seconds")
    exact = seconds * rate
    if not math.isfinite(exact) or exact >= MAX_FRAMES:
        raise SamplingError(f"{what} is {seconds:.4g} s: at {rate:g} fps that is {exact:.3g} frames, more than "
                            f"any command samples ({MAX_FRAMES:.0e}); choose a shorter length or a lower rate")
    if inclusive:
        count = int(math.floor(exact + 1e-9)) + 1
        if seconds > 0 and (count - 1) / rate < seconds - 1e-9:
            count += 1
        return count
    return max(1, int(round(exact)))


def check_output(what: str, frames: int, bytes_per_frame: float, *, force: bool = False,
                 hint: str = "fewer frames (--fps, --seconds)", streamed: bool = False) -> float:
    """Refuse (SamplingError, ``pass --force``) when ``frames`` x ``bytes_per_frame`` is over
    :data:`OUTPUT_LIMIT_BYTES` (unless ``streamed``: frames written one at a time cost no memory as they
    add up) or ``frames`` over :data:`FRAME_LIMIT`; past :data:`MAX_FRAMES` even with ``force``.
    Returns the estimate in bytes.

    >>> check_output("walk.bvh", 300, 5_000)
    1500000.0
    """
    size = float(frames) * float(bytes_per_frame)
    if frames > MAX_FRAMES:
        raise SamplingError(f"{what} would be {frames:.3g} frames, more than any command samples ({MAX_FRAMES:.0e})")
    if force:
        return size
    if size > OUTPUT_LIMIT_BYTES and not streamed:
        raise SamplingError(f"{what} would be about {human_bytes(size)} ({frames} frames, over "
                            f"{human_bytes(OUTPUT_LIMIT_BYTES)}): pass --force to make it, or {hint}")
    if frames > FRAME_LIMIT:
        about = "" if streamed else f", about {human_bytes(size)}"
        raise SamplingError(f"{what} would be {frames} frames (over {FRAME_LIMIT}{about}): "
                            f"pass --force to make it, or {hint}")
    return size
