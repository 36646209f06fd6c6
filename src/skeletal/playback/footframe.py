"""A planned frame of foot placement alone as one compiled call (:class:`FootFrame`): the mixer's update
kernel's clocks and blend (:func:`~skeletal.playback.kernels.update`'s ADVANCE | BLEND), then the stage
(:func:`~skeletal.playback.footplacement.foot_kernel`'s phase 3: the world rows, the IK and the palettes).

* On one thread: the update's serial twin for the whole batch, then the stage's serial twin, in one
  compiled call (no parallel region's launch, no Python between the two calls).
* On more threads: one parallel region, the stage's parallel kernel given the update job: each range of
  characters runs, a block at a time, the update's per-instance clocks and blend
  (:func:`~skeletal.playback.kernels.clock_and_blend`, the body the update kernel itself calls) and then
  the block's foot placement, on the same thread (one launch instead of two, and a character's pose is
  still in that core's cache when its foot placement reads it).

Either way every instance gets the same operations in the same order as the update then the stage
through Python: the same bits.
"""

from __future__ import annotations

from typing import Any

from numba import njit

from .._compile import serial_variant
from .._threads import capped_threads, thread_count
from . import kernels as K
from .footplacement import _foot_chunks, foot_kernel
from .jobs import entry

_ADVANCE_BLEND = K.ADVANCE | K.BLEND
_DRIVER: dict = {}


def _frame_py(update, foot, dt):
    """The update's clocks and blend on every instance, then foot placement (phase 3); returns the
    update's event count. Compiled by :func:`_driver` (its callees are serial variants made at run time)."""
    events = _UPDATE_SERIAL(update, None, dt, _ADVANCE_BLEND)  # noqa: F821 (set by _driver)
    _FOOT_SERIAL(foot, 3, 1, None)  # noqa: F821
    return events


def _driver():
    """:func:`_frame_py` compiled (cached on disk), its callees' serial variants made first."""
    fn = _DRIVER.get("frame")
    if fn is None:
        g = globals()
        g["_UPDATE_SERIAL"] = serial_variant(K.update)
        g["_FOOT_SERIAL"] = serial_variant(foot_kernel)
        fn = _DRIVER["frame"] = njit(cache=True)(_frame_py)
    return fn


class FootFrame:
    """A frame plan's update and foot placement as one compiled call (see the module docstring) for
    ``mixer`` (a :class:`~skeletal.Mixer` of ``count`` characters without IK stages) and ``foot_job``,
    the job of its only stage (foot placement on a built-in ground). The compiled entry points are
    found on the first :meth:`run` on one thread and on more.

    >>> frame = FootFrame(mixer, feet.last.calls[0], mixer.count)        # doctest: +SKIP
    >>> frame.run(1 / 60)  # True: the frame's update and stage ran      # doctest: +SKIP
    """

    def __init__(self, mixer: Any, foot_job: Any, count: int):
        self.update_job = mixer.frame.job
        self.foot_job = foot_job
        self.count = count
        self.call: Any = None
        self.parallel: Any = None
        self._chunks = (0, 1)  # (thread count, _foot_chunks for it): computed again when the count changes

    @staticmethod
    def fits(mixer: Any) -> bool:
        """Whether ``mixer``'s frame can run so: the plain Mixer update kernel (not another subclass's),
        no IK stages."""
        frame = mixer.frame
        return frame is not None and frame.ik is None and mixer._update_kernel() is K.update

    def run(self, dt: float) -> bool:
        """The frame's update and foot placement by ``dt`` (numba's count of threads, capped as the update
        caps it); False, nothing done, where on more threads the stage would run serially (a few
        characters: the old path's parallel update then serial stage). Events are not collected (the
        caller runs this only for a mixer that does not collect them)."""
        with capped_threads():
            threads = thread_count()
            if threads == 1:
                if self.call is None:
                    self.call = entry(_driver(), self.update_job, self.foot_job, 0.0)
                self.call(self.update_job, self.foot_job, dt)
                return True
            seen, chunks = self._chunks
            if seen != threads:
                chunks = _foot_chunks(self.count, threads)
                self._chunks = (threads, chunks)
            if chunks == 1:
                return False
            parallel = self.parallel
            if parallel is None:
                parallel = self.parallel = entry(foot_kernel, self.foot_job, 3, chunks, (self.update_job, 0.0))
            parallel(self.foot_job, 3, chunks, (self.update_job, dt))
        return True


__all__ = ["FootFrame"]
