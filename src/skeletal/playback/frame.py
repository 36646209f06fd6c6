"""One mixer's frame as a named object: the jobs its compiled update runs on, the entry points, and
which clip set they were built for.

A :class:`~skeletal.Mixer` (and so a :class:`~skeletal.Player` or :class:`~skeletal.Crowd`) builds one
:class:`Frame` from its arrays (:meth:`skeletal.Mixer.build_frame`) and keeps it in ``mixer.frame``
until one of those arrays is replaced (a slot, layer or IK stage added, the clip set grown, an
output reallocated): each of them is a :class:`FrameInput`, whose assignment drops the frame, so
the next update builds it again. Arrays changed in place need nothing: the jobs hold the arrays
themselves.

>>> frame = player.mixer.frame                                     # doctest: +SKIP
>>> events = frame.step(1 / 60)   # clocks, blending, world rows, palettes: one compiled call  # doctest: +SKIP
"""

from __future__ import annotations

from operator import attrgetter
from typing import TYPE_CHECKING, Any, Callable, Generic, TypeVar, overload

from . import kernels as K
from .jobs import IKJob, PlaybackJob, WideJob

T = TypeVar("T")


class FrameInput(property, Generic[T]):
    """A mixer attribute its frame's jobs are built from (an array the kernels read or write, or a
    flag they are compiled with). Reading it is reading the attribute; assigning it stores the new
    value and drops the owner's frame (``owner.frame = None``): the next update builds the jobs from
    the new value. In-place changes (``mixer.fs[...] = x``) need nothing. A property whose getter is
    C code (:func:`operator.attrgetter` of the stored value), so a read costs a few tens of ns.

    ``then``: the name of a method of the owner called (no arguments) after each assignment, for
    state derived from the new value (e.g. :meth:`skeletal.Mixer._palettes_replaced`).

    >>> class Mixer:                                                   # doctest: +SKIP
    ...     fs = FrameInput[np.ndarray]()
    ...     palettes = FrameInput[np.ndarray](then="_palettes_replaced")
    """

    def __init__(self, then: str | None = None) -> None:
        super().__init__()
        self._then = then

    def __set_name__(self, owner: type, name: str) -> None:
        key = "_input_" + name
        then = self._then

        def assign(obj: Any, value: T) -> None:
            setattr(obj, key, value)  # (no descriptor has that name: a plain instance attribute)
            obj.frame = None
            if then is not None:
                getattr(obj, then)()

        property.__init__(self, attrgetter(key), assign, None, f"(a frame input: assigning it drops the frame) {name}")

    if TYPE_CHECKING:  # what a read and an assignment give, for type checkers (property's own at run time)
        @overload
        def __get__(self, obj: None, objtype: type | None = None) -> "FrameInput[T]": ...

        @overload
        def __get__(self, obj: object, objtype: type | None = None) -> T: ...

        def __get__(self, obj: object | None, objtype: type | None = None) -> "T | FrameInput[T]": ...

        def __set__(self, obj: Any, value: T) -> None: ...


class Frame:
    """The compiled state of one mixer's update (see the module docstring).

    ``job``: the :class:`~skeletal.playback.jobs.PlaybackJob` (every array of the update, by name);
    ``ik``: the :class:`~skeletal.playback.jobs.IKJob` of the mixer's IK stages, or None; ``version``:
    the clip set version the job's clip tables come from; ``call``: the compiled entry point of the
    update kernel on these jobs (``call(job, ik, dt, stages) -> events``), None until the first
    per-instance update needs it (a crowd whose groups all go wide never compiles it); ``wide``: a
    crowd's :class:`~skeletal.playback.jobs.WideJob` (the lane layout's arrays, by name in
    ``wide_arrays``), or None, and ``wide_call`` the wide kernel's entry point (``wide_call(job, ik, wide, dt, mode) -> events``).

    >>> frame.call(frame.job, frame.ik, 1 / 60, kernels.ALL)   # what Player.update runs  # doctest: +SKIP
    """

    __slots__ = ("job", "ik", "version", "call", "wide", "wide_arrays", "wide_call")

    def __init__(self, job: PlaybackJob, ik: IKJob | None, version: int, call: Callable[..., int] | None = None):
        self.job = job
        self.ik = ik
        self.version = version
        self.call = call
        self.wide: WideJob | None = None
        self.wide_arrays: dict[str, Any] = {}
        self.wide_call: Callable[..., int] | None = None

    def step(self, dt: float, stages: int = K.ALL) -> int:
        """Run ``stages`` (bits of :data:`~skeletal.playback.kernels.ALL`) of the compiled update by
        ``dt`` seconds; returns how many instances reported an event (plus
        :data:`~skeletal.playback.kernels.NEEDS_BLEND` per instance the single-action kernel left
        unposed)."""
        return self.call(self.job, self.ik, dt, stages)  # type: ignore[misc]

    def step_wide(self, dt: float, mode: int) -> int:
        """The crowd's wide kernel (:func:`skeletal.playback.wide.update_wide`) in ``mode`` (0 advance
        and pose, 1 rebuild the lane store's rows, 2 pose without advancing); returns the event count."""
        return self.wide_call(self.job, self.ik, self.wide, dt, mode)  # type: ignore[misc]


__all__ = ["Frame", "FrameInput"]
