"""Jiggle, a procedural stage (:meth:`skeletal.playback.procedural.Procedural.jiggle`): spring bones on
joint chains (a tail...), the stage over :class:`.springs.JiggleChains` (which holds the kernels).

``proc`` (the stage's owner) is the :class:`~skeletal.playback.procedural.Procedural` driver, typed ``Any``
here: the driver imports this module, so it cannot import the driver back.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import SkeletalError
from .springs import JiggleChains, find_tail_chains


class Jiggle:
    """Spring bones (:class:`.springs.JiggleChains`) as a stage; ``chains`` default: the tails."""

    builds_world = False
    keeps_world = False
    palettes_current = False

    def __init__(self, proc: Any, chains=None, **options):
        self.proc = proc
        if chains is None:
            chains = find_tail_chains(proc.rig)
            if not chains:
                raise SkeletalError("no tail joints found by name: pass chains=[[joint, ...], ...]")
        self.chains = JiggleChains(proc.rig, proc.count, chains, **options)

    def reset(self) -> None:
        self.chains.reset()

    def apply(self, pose: np.ndarray, world: np.ndarray, dt: float) -> None:
        self.chains.placement = self.proc.placement
        self.chains.apply(world, pose, dt)
