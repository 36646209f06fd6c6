"""Foot placement interleaved with the mixer's update, a block of characters at a time
(:class:`FootBlocks`): a planned frame of foot placement alone on one thread runs the update's clocks
and blend (:func:`~skeletal.playback.kernels.update`'s ADVANCE | BLEND) for ``BLOCK`` characters, then
the stage on them (:func:`~skeletal.playback.footplacement.foot_kernel`'s phase 3: their world rows,
IK and palettes), then the next block, all in one compiled call. Each block's pose, world rows and
palettes (some 40 KB a Soldier) are still in the core's cache when the stage reads them; a whole
batch blended first and placed after (2 MB for 100 Soldiers) is not.

The same bits as the update then the stage over the whole batch: each character's work reads no
other character's. Each block's jobs are views of the whole batch's arrays (their first axis sliced),
built once per frame plan.
"""

from __future__ import annotations

from typing import Any

from numba import njit, typed

from .._compile import serial_variant
from .._threads import capped_threads, thread_count
from . import kernels as K
from .footplacement import foot_kernel
from .jobs import entry, foot_job, playback_job

#: characters per block: their pose, world rows and palettes stay in the core's L2 between the blend and
#: the stage (100 Soldiers, 1 thread: 16 beat 8, 12, 24 and 32)
BLOCK = 16

#: a PlaybackJob's fields with the batch axis first (the rest: clips, rig, per-thread scratch)
UPDATE_BATCH = frozenset({"fs", "ist", "cursors", "layer_weight", "snap_weight", "snap_pose", "snap_morph",
                          "pose", "morph", "worlds", "palettes"})
#: a FootJob's fields with the batch axis first
FOOT_BATCH = frozenset({"pose", "world", "placement", "fs", "heights", "normals", "queried", "contact",
                        "weight", "state", "initialised", "locked", "lock", "targets", "pelvis_offset", "pal"})

_ADVANCE_BLEND = K.ADVANCE | K.BLEND
_DRIVER: dict = {}


def _blocks_py(updates, feet, dt):
    """Each block's update (clocks and blend, serial) then its foot placement (phase 3); returns the
    update's event count. Compiled by :func:`_driver` (its callees are serial variants made at run time)."""
    events = 0
    for i in range(len(updates)):
        events += _UPDATE_SERIAL(updates[i], None, dt, _ADVANCE_BLEND)  # noqa: F821 (set by _driver)
        _FOOT_SERIAL(feet[i], 3, 1)  # noqa: F821
    return events


def _driver():
    """:func:`_blocks_py` compiled (cached on disk), its callees' serial variants made first."""
    fn = _DRIVER.get("blocks")
    if fn is None:
        g = globals()
        g["_UPDATE_SERIAL"] = serial_variant(K.update)
        g["_FOOT_SERIAL"] = serial_variant(foot_kernel)
        fn = _DRIVER["blocks"] = njit(cache=True)(_blocks_py)
    return fn


def _views(fields: dict, batch: frozenset, b0: int, b1: int) -> dict:
    return {k: (v[b0:b1] if k in batch else v) for k, v in fields.items()}


class FootBlocks:
    """A frame plan's blocked update and foot placement (see the module docstring) for ``mixer`` (a
    :class:`~skeletal.Mixer` without IK stages or inertialized transitions) and its only stage
    ``stage`` (a :class:`~skeletal.playback.footplacement.FootPlacement` on a built-in ground, its job
    current). Its jobs and compiled call are made on the first :meth:`run`.

    >>> blocks = FootBlocks(mixer, feet)                                 # doctest: +SKIP
    >>> blocks.run(1 / 60)  # True: the frame's update and stage ran     # doctest: +SKIP
    """

    def __init__(self, mixer: Any, stage: Any, block: int = BLOCK):
        self.mixer = mixer
        self.stage = stage
        self.block = int(block)
        self.call: Any = None
        self.updates: Any = None
        self.feet: Any = None

    @staticmethod
    def fits(mixer: Any, stage: Any) -> bool:
        """Whether a frame of ``mixer`` and ``stage`` can run in blocks: the plain Mixer update kernel
        (not a crowd's wide one), no IK stages, the stage's job built (inertialized transitions are
        checked on the first :meth:`run`)."""
        frame = mixer.frame
        return frame is not None and frame.ik is None and mixer._update_kernel() is K.update and bool(stage.job_fields)

    def _build(self) -> None:
        mixer, count, n = self.mixer, self.mixer.count, self.block
        update_fields, foot_fields = mixer._job_fields(), self.stage.job_fields
        if update_fields["inert_state"].shape[0] != 0:  # inertialized transitions: the whole-batch path
            self.call = False
            return
        updates, feet = typed.List(), typed.List()
        for b0 in range(0, count, n):
            b1 = min(b0 + n, count)
            updates.append(playback_job(**_views(update_fields, UPDATE_BATCH, b0, b1)))
            feet.append(foot_job(**_views(foot_fields, FOOT_BATCH, b0, b1)))
        self.updates, self.feet = updates, feet
        self.call = entry(_driver(), updates, feet, 0.0)

    def run(self, dt: float) -> bool:
        """The frame's update and foot placement by ``dt``, when the update runs on one thread (numba's
        count, capped as the update caps it); False, nothing done, otherwise. Events are not collected
        (the caller runs this only for a mixer that does not collect them)."""
        with capped_threads():
            if thread_count() != 1:
                return False
            if self.call is None:
                self._build()
            if self.call is False:
                return False
            self.call(self.updates, self.feet, dt)
        return True


__all__ = ["FootBlocks", "BLOCK", "UPDATE_BATCH", "FOOT_BATCH"]
