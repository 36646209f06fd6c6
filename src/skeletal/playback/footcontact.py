"""Foot placement's contact weights (:func:`_contact_one`), a stage of
:func:`skeletal.playback.footplacement.foot_kernel`: how planted each leg of a character is this frame,
read from its actions' contact curves (:class:`.contacts.ContactPhases`, packed by
:meth:`~skeletal.playback.footplacement.FootPlacement._tables`) at their clip times."""

from __future__ import annotations

import math

from numba import njit

from . import kernels as K
from .jobs import field


@njit(cache=True, forceinline=True)
def _contact_one(b, job):
    """Contact weight per leg of instance ``b`` of a :class:`~skeletal.playback.jobs.FootJob`, into its
    ``contact`` (B, L): the actions' contact curves (``tables`` (C, F, L)) at their clip times, averaged
    with their effective weights (1 = planted when no action plays). Each action's frame pair is found
    once for all legs; out[b, l] accumulates over the actions in slot order (the same sums as leg by
    leg). Inlined into :func:`foot_kernel` (no call per character)."""
    fs, slot_clip, slot_additive = field(job, "fs"), field(job, "slot_clip"), field(job, "slot_additive")
    tables, frames, fps = field(job, "tables"), field(job, "frames"), field(job, "fps")
    durations, looping, out = field(job, "durations"), field(job, "looping"), field(job, "contact")
    n_legs = out.shape[1]
    for l in range(n_legs):
        out[b, l] = 0.0
    wsum = 0.0
    for s in range(slot_clip.shape[0]):
        if slot_additive[s]:
            continue
        w = fs[b, s, K.F_EFFECTIVE]
        if not w > 0.0:
            continue
        c = slot_clip[s]
        f = frames[c]
        t = fs[b, s, K.F_SAMPLE]
        if f <= 1 or durations[c] <= 0.0:
            for l in range(n_legs):
                out[b, l] += w * tables[c, 0, l]
        else:
            if looping[c]:
                if not (0.0 <= t < durations[c]):  # (t % d is t itself there: the wrap's fmod skipped)
                    t = t % durations[c]
                u = t * fps[c]
                fl = math.floor(u)
                i0 = int(fl)
                if i0 >= f:  # (integer divisions only where needed: the same indices)
                    i0 %= f
                i1 = i0 + 1 if i0 + 1 < f else 0
            else:
                u = min(max(t, 0.0), durations[c]) * fps[c]
                fl = math.floor(u)
                i0 = min(int(fl), f - 1)
                i1 = min(i0 + 1, f - 1)
            a = u - fl
            for l in range(n_legs):
                out[b, l] += w * (tables[c, i0, l] * (1.0 - a) + tables[c, i1, l] * a)
        wsum += w
    if wsum != 1.0:  # (x / 1.0 is x: one action at full weight divides by nothing)
        for l in range(n_legs):
            out[b, l] = out[b, l] / wsum if wsum > 0.0 else 1.0
