"""IK as a post-process stage of playback: after blending (layers, masks, additive clips) and before the
world matrices and palettes are final, inside the same compiled update.

A mixer owns an :class:`IKStages`: the :class:`~skeletal.ik.StageTable` of its solvers and their
per-instance inputs ``inputs`` (B, S, IN_WIDTH) (targets, poles, weights, end rotations; see
:mod:`skeletal.ik`). :meth:`skeletal.Mixer.add_ik` adds a stage and returns an :class:`IKHandle`
whose ``target`` / ``pole`` / ``weight`` write those rows (one value for all instances, or one per
instance). The mixer's and the crowd's update kernel (:func:`skeletal.playback.kernels.update`, or its
serial twin for one character) runs them when given the mixer's :class:`~skeletal.playback.jobs.IKJob`: per
instance, world matrices of the nodes the solvers and skins read, the stages (each rebuilds only the
world rows of the subtree it moved), palettes.

>>> player = skeletal.Player(asset); player.play("Walk")                      # doctest: +SKIP
>>> foot = player.add_ik("left_foot", kind="two_bone",                        # doctest: +SKIP
...                      chain=("mixamorig:LeftUpLeg", "mixamorig:LeftLeg", "mixamorig:LeftFoot"),
...                      target=(0.1, 0.1, 0.2), pole=(0.1, 0.5, 1.0))
>>> foot.target = (0.1, 0.12, 0.25); player.update(1 / 60)                  # doctest: +SKIP
"""

from __future__ import annotations

import numpy as np

from ..anim import ik
from ..errors import SkeletalError
from .jobs import IKJob, ik_job


class IKHandle:
    """One IK stage of a mixer. ``target`` / ``pole`` (or ``up_vector``) / ``end_rotation``: a (3,)
    (or (4,)) value for every instance or (B, 3) per instance, ``None`` clears (a stage without a
    target does nothing); ``weight`` scalar or (B,). Reading returns the (B, k) rows (a copy)."""

    def __init__(self, stages: "IKStages", index: int, name: str, kind: str):
        self._stages = stages
        self.index = index
        self.name = name
        self.kind = kind

    def _get(self, start: int, width: int) -> np.ndarray:
        return self._stages.inputs[:, self.index, start:start + width].copy()

    def _set(self, start: int, width: int, value, what: str) -> None:
        self._stages.set_rows(self.index, start, width, value, what)

    @property
    def target(self) -> np.ndarray:
        return self._get(ik.IN_TARGET, 3)

    @target.setter
    def target(self, value) -> None:
        self._set(ik.IN_TARGET, 3, value, "target")

    @property
    def pole(self) -> np.ndarray:
        return self._get(ik.IN_POLE, 3)

    @pole.setter
    def pole(self, value) -> None:
        self._set(ik.IN_POLE, 3, value, "pole")

    up_vector = pole  # aim stages: the model-space direction the up axis turns toward

    @property
    def end_rotation(self) -> np.ndarray:
        return self._get(ik.IN_ROTATION, 4)

    @end_rotation.setter
    def end_rotation(self, value) -> None:
        self._set(ik.IN_ROTATION, 4, value, "end_rotation")

    @property
    def weight(self) -> np.ndarray:
        return self._stages.inputs[:, self.index, ik.IN_WEIGHT].copy()

    @weight.setter
    def weight(self, value) -> None:
        w = np.asarray(value, dtype=np.float64)
        if w.shape not in ((), (self._stages.count,)):
            raise SkeletalError(f"IK weight must be a scalar or ({self._stages.count},), got {w.shape}")
        self._stages.inputs[:, self.index, ik.IN_WEIGHT] = np.clip(w, 0.0, 1.0)

    def __repr__(self) -> str:
        return f"IKHandle({self.name!r}, kind={self.kind!r}, stage={self.index})"


class IKStages:
    """The IK stages of one mixer (``count`` instances of one rig)."""

    def __init__(self, rig, count: int):
        self.rig = rig
        self.count = int(count)
        self.table = ik.StageTable(rig.parents, rig.rest, rig.names)
        self.inputs = self.table.inputs(self.count)
        self.handles: dict[str, IKHandle] = {}
        self.scratch, self.pos = self.table.scratch()

    def __len__(self) -> int:
        return len(self.table.kinds)

    def add(self, name: str, kind: str, chain, *, target=None, pole=None, up_vector=None, end_rotation=None,
            weight=1.0, **options) -> IKHandle:
        if name in self.handles:
            raise SkeletalError(f"an IK stage named {name!r} exists already")
        index = self.table.add(kind, chain, **options)
        inputs = self.table.inputs(self.count)
        inputs[:, :index] = self.inputs
        self.inputs = inputs
        self.scratch, self.pos = self.table.scratch()
        handle = IKHandle(self, index, name, kind)
        self.handles[name] = handle
        if target is not None:
            handle.target = target
        if pole is not None or up_vector is not None:
            handle.pole = pole if pole is not None else up_vector
        if end_rotation is not None:
            handle.end_rotation = end_rotation
        handle.weight = weight
        return handle

    def set_rows(self, index: int, start: int, width: int, value, what: str) -> None:
        rows = self.inputs[:, index, start:start + width]
        if value is None:
            rows[...] = np.nan
            return
        a = np.asarray(value, dtype=np.float64)
        if a.shape not in ((width,), (self.count, width)):
            raise SkeletalError(f"IK {what} must be ({width},) or ({self.count}, {width}), got {a.shape}")
        rows[...] = a

    def args(self) -> tuple:
        t = self.table
        return (t.stage_i, t.stage_f, t.joints, t.jp, self.inputs, t.update, self.scratch, self.pos)

    def job(self) -> IKJob:
        """The stage table and inputs as the :class:`~skeletal.playback.jobs.IKJob` the update kernels
        take (rebuilt by the mixer whenever a stage is added: the arrays are replaced then)."""
        t = self.table
        return ik_job(stage_i=t.stage_i, stage_f=t.stage_f, joints=t.joints, jp=t.jp, inputs=self.inputs,
                      update=t.update, scratch=self.scratch, pos=self.pos)
