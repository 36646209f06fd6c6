"""What the procedural stages (:mod:`.procedural` and its stage modules :mod:`.footplacement`,
:mod:`.lookat`, :mod:`.jiggle`) share: partial world-row and palette kernels, a stage's per-frame
record and the hook that drops its driver's frame plan.

Contracts: ``pose`` (N, 10) local rows (translation, xyzw quaternion, scale) of one instance, ``world``
(N, 4, 4) float64 row-major model-space matrices acting on column vectors, rebuilt parents first.
"""

from __future__ import annotations

from operator import attrgetter
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

import numpy as np
from numba import njit

from ..anim.pose import affine_product_into, local_to_world_one, world_node_into

_NAN3 = (np.nan, np.nan, np.nan)

#: Batches up to this size run serial kernels (a parallel launch costs more than a few characters).
SERIAL_BELOW = 4

T = TypeVar("T")


class PlanInput(property, Generic[T]):
    """A setting a :class:`~skeletal.playback.procedural.Procedural`'s frame plan is built from (on the
    Procedural itself or on one of its stages: a flag, a scalar, an array the compiled calls hold).
    Reading it is reading the attribute; assigning it stores the value and drops the plan (the next
    frame takes the general path and plans again). Other attributes keep the plan; arrays changed in
    place (``stage.weight[...] = x``) need nothing. The getter is C code (:func:`operator.attrgetter`).

    >>> class LookAt:                                                   # doctest: +SKIP
    ...     smooth_time = PlanInput[float]()
    """

    def __set_name__(self, owner: type, name: str) -> None:
        key = "_setting_" + name

        def assign(obj: Any, value: T) -> None:
            setattr(obj, key, value)  # (no descriptor has that name: a plain instance attribute)
            # a stage's driver is its ``proc`` (not set yet while the stage sets itself up); a
            # Procedural is its own
            proc = obj.__dict__.get("proc", obj)
            proc._plan = None

        property.__init__(self, attrgetter(key), assign, None, f"(a plan input: assigning it drops the frame plan) {name}")

    if TYPE_CHECKING:  # what a read and an assignment give, for type checkers (property's own at run time)
        @overload
        def __get__(self, obj: None, objtype: type | None = None) -> "PlanInput[T]": ...

        @overload
        def __get__(self, obj: object, objtype: type | None = None) -> T: ...

        def __get__(self, obj: object | None, objtype: type | None = None) -> "T | PlanInput[T]": ...

        def __set__(self, obj: Any, value: T) -> None: ...


@njit(cache=True)
def _all_rows(parents, pose, world):
    """World rows of one pose (a plain call: the inlined row loop is compiled once, here)."""
    local_to_world_one(parents, pose, world)


@njit(cache=True)
def _rows(parents, nodes, start, stop, pose, world):
    """World rows of one pose for ``nodes[start:stop]`` (ascending, parents first)."""
    for k in range(start, stop):
        world_node_into(nodes[k], parents, pose, world)


@njit(cache=True, forceinline=True)
def _moved_rows(parents, nodes, start, stop, pose, world):
    """After ``pose[nodes[start]]``'s translation moved: the translation column of the world rows of
    ``nodes[start:stop]`` (that node and rows below it, each after its parent) from the pose, their
    rotation-scale blocks kept (a translation changes none). The products' arithmetic and order
    (:func:`~skeletal.anim.pose.world_products`: ``(w0 t0 + w1 t1) + w2 t2``, then the parent's translation), so the same bits
    as building the rows again."""
    for k in range(start, stop):
        i = nodes[k]
        p = parents[i]
        t0, t1, t2 = pose[i, 0], pose[i, 1], pose[i, 2]
        if p < 0:
            world[i, 0, 3], world[i, 1, 3], world[i, 2, 3] = t0, t1, t2
        else:
            for r in range(3):
                world[i, r, 3] = ((world[p, r, 0] * t0 + world[p, r, 1] * t1) + world[p, r, 2] * t2) + world[p, r, 3]


@njit(cache=True)
def _palette_rows(world, joints, inverse_bind, idx, start, stop, out):
    """Palette entries ``idx[start:stop]`` of one pose: out[k] = world[joints[k]] @ inverse_bind[k]."""
    for i in range(start, stop):
        k = idx[i]
        affine_product_into(world[joints[k]], inverse_bind[k], out[k])


class _LastFrame:
    """What a stage's last frame left, apart from its settings: assigning these keeps its Procedural's
    plan (a stage's :class:`PlanInput` settings drop it). ``palettes_current``: the last apply kept the mixer's
    palettes current too; ``started``: the look-at spring has a value; ``calls``: the foot stage's
    (job, serial call, parallel call)."""

    __slots__ = ("palettes_current", "started", "calls")

    def __init__(self) -> None:
        self.palettes_current = False
        self.started = False
        self.calls: tuple = ()


def _drop_plan(stage) -> None:
    """A stage's setting changed outside a :class:`PlanInput` (a new ground: ``FootPlacement.ground``'s
    setter): its Procedural's frame plan is dropped (:meth:`Procedural._build_plan`)."""
    proc = getattr(stage, "proc", None)  # (None while the stage sets itself up)
    if proc is not None:
        proc._plan = None
