"""What the procedural stages (:mod:`.procedural` and its stage modules :mod:`.footplacement`,
:mod:`.lookat`, :mod:`.jiggle`) share: partial world-row and palette kernels, a stage's per-frame
record and the hook that drops its driver's frame plan.

Contracts: ``pose`` (N, 10) local rows (translation, xyzw quaternion, scale) of one instance, ``world``
(N, 4, 4) float64 row-major model-space matrices acting on column vectors, rebuilt parents first.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..anim.pose import affine_product_into, local_to_world_one, world_node_into

_NAN3 = (np.nan, np.nan, np.nan)

#: Batches up to this size run serial kernels (a parallel launch costs more than a few characters).
SERIAL_BELOW = 4


@njit(cache=True)
def _all_rows(parents, pose, world):
    """World rows of one pose (a plain call: the inlined row loop is compiled once, here)."""
    local_to_world_one(parents, pose, world)


@njit(cache=True)
def _rows(parents, nodes, start, stop, pose, world):
    """World rows of one pose for ``nodes[start:stop]`` (ascending, parents first)."""
    for k in range(start, stop):
        world_node_into(nodes[k], parents, pose, world)


@njit(cache=True)
def _palette_rows(world, joints, inverse_bind, idx, start, stop, out):
    """Palette entries ``idx[start:stop]`` of one pose: out[k] = world[joints[k]] @ inverse_bind[k]."""
    for i in range(start, stop):
        k = idx[i]
        affine_product_into(world[joints[k]], inverse_bind[k], out[k])


class _LastFrame:
    """What a stage's last frame left, apart from its settings: assigning these keeps its Procedural's
    plan (a stage's own attributes drop it). ``palettes_current``: the last apply kept the mixer's
    palettes current too; ``started``: the look-at spring has a value; ``calls``: the foot stage's
    (job, serial call, parallel call)."""

    __slots__ = ("palettes_current", "started", "calls")

    def __init__(self) -> None:
        self.palettes_current = False
        self.started = False
        self.calls: tuple = ()


def _drop_plan(stage) -> None:
    """A stage's attribute changed (a new target, ground, weight array...): its Procedural's frame plan
    is dropped (:meth:`Procedural._build_plan`)."""
    proc = getattr(stage, "proc", None)  # (None while the stage sets itself up)
    if proc is not None:
        proc._plan = None
