"""Inertialization: switch to a new motion at once and let the difference from the old one fade.

A crossfade samples both clips for the whole fade. Inertialization (D. Bollo, "Inertialization:
High-Performance Animation Transitions in Gears of War", GDC 2018) samples only the new one: at the
switch it records, per joint, the offset between the pose shown and the new clip's pose, and between
their velocities, and adds that offset, decaying to zero over the blend time, to every later pose.
The shown pose and its velocity do not jump at the switch, and a switch during a transition starts
from what is shown then (chained switches need nothing special).

:class:`Inertializer` is the stage over batch-first local poses (B, J, 10) (rows ``t q s``, xyzw):

>>> import numpy as np
>>> stage = Inertializer(count=1, joints=2)
>>> old = np.tile([0, 0, 0, 0, 0, 0, 1, 1, 1, 1.0], (1, 2, 1))
>>> new = old.copy(); new[0, :, 0] = 1.0             # the new motion stands 1 m along x
>>> stage.switch(new, 0.3, source=old, source_velocity=np.zeros((1, 2, 9)), target_velocity=np.zeros((1, 2, 9)))
>>> shown = new.copy(); stage.apply(shown, 0.0)       # at the switch: still the old pose
1
>>> float(shown[0, 0, 0])
0.0

On a :class:`~skeletal.Player` or :class:`~skeletal.Mixer` it is a transition mode of
``crossfade``: ``player.crossfade("run", 0.3, blend="inertialize")`` (Bollo's quintic), ``blend=
"inertialize_spring"`` (a critically damped spring) or ``blend="dead_blend"`` (the old pose carried on
by its decaying velocity and blended out). See :func:`inertialized_crossfade` for how it plugs in.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from ...errors import SkeletalError
from .. import inertia_kernels as IK

BLENDS = tuple(IK.BLEND_CODES)


def pose_velocity(pose0: np.ndarray, pose1: np.ndarray, dt: float) -> np.ndarray:
    """The velocity (..., J, 9) of poses (..., J, 10) that go from ``pose0`` to ``pose1`` in ``dt``
    seconds: translation (m/s), parent-frame angular velocity (rad/s, scaled axis), scale (1/s).

    >>> a = np.tile([0, 0, 0, 0, 0, 0, 1, 1, 1, 1.0], (1, 1)); b = a.copy(); b[0, 1] = 0.5
    >>> pose_velocity(a, b, 0.5)[0, :3].tolist()
    [0.0, 1.0, 0.0]
    """
    p0 = np.ascontiguousarray(pose0, np.float64)
    p1 = np.ascontiguousarray(pose1, np.float64)
    if p0.shape != p1.shape or p0.shape[-1] != 10:
        raise SkeletalError(f"poses must be (..., J, 10) of one shape, got {p0.shape} and {p1.shape}")
    flat0, flat1 = p0.reshape(-1, p0.shape[-2], 10), p1.reshape(-1, p0.shape[-2], 10)
    out = np.empty(flat0.shape[:2] + (IK.NCH,))
    IK.poses_velocity_into(flat0, flat1, float(dt), out)
    return out.reshape(p0.shape[:-1] + (IK.NCH,))


class Inertializer:
    """Decaying per-joint offsets for ``count`` instances of a ``joints``-joint pose (see the module
    docstring). :meth:`switch` starts a transition for some instances; :meth:`apply` adds the offsets
    to the new motion's pose each frame, in place, and keeps the shown pose for the next switch's
    velocity. One compiled call per frame for all instances (threaded over instances when there are
    several).

    >>> stage = Inertializer(count=100, joints=65)
    >>> bool(stage.running.any())
    False
    """

    def __init__(self, count: int, joints: int):
        if count < 1 or joints < 1:
            raise SkeletalError(f"an Inertializer needs at least one instance and one joint, got {count} x {joints}")
        self.count, self.joints = int(count), int(joints)
        b, j = self.count, self.joints
        self.mode = np.zeros(b, np.int64)  # (B,) SPRING, QUINTIC or DEAD (inertia_kernels)
        self.phase = np.zeros(b, np.int64)  # (B,) IDLE, PENDING (switched, offsets not made yet), ACTIVE
        self.clock = np.zeros((b, IK.NCLOCK))  # (B, 5) elapsed, duration, last dt, halflife, poses kept
        self.offset = np.zeros((b, j, IK.NCH))  # offsets (QUINTIC: at the switch; SPRING: now)
        self.velocity = np.zeros((b, j, IK.NCH))  # their rates (DEAD: the source's velocity)
        self.source = np.zeros((b, j, 10))  # the pose shown at the switch
        self.anchor = np.zeros((b, j, 10))  # the new motion's pose at the switch
        self.history = np.zeros((b, 2, j, 10))  # the last two poses shown (newest[b] is the later)
        self.newest = np.zeros(b, np.int64)
        self.target_velocity = np.zeros((b, j, IK.NCH))  # the new motion's velocity, when given
        self.known = np.zeros(b, np.bool_)  # the target's velocity was given (else found at the next apply)
        threads = numba.config.NUMBA_NUM_THREADS
        self._scratch = np.zeros((threads, 2, j, IK.NCH))

    @property
    def running(self) -> np.ndarray:
        """(B,) bool: instances whose offsets are not yet zero."""
        return self.phase != IK.IDLE

    def _rows(self, instances: Any) -> np.ndarray:
        rows = np.arange(self.count)[slice(None) if instances is None else instances]
        return np.atleast_1d(rows).astype(np.int64)

    def shown(self, instances: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """The last shown pose (n, J, 10) and its velocity (n, J, 9) of the selected instances, as kept by
        :meth:`apply` (velocity 0 until two frames were applied)."""
        rows = self._rows(instances)
        velocity = np.zeros((len(rows), self.joints, IK.NCH))
        IK.shown_velocity(rows, self.history, self.newest, self.clock, velocity)
        return self.history[rows, self.newest[rows]].copy(), velocity

    def switch(self, target: np.ndarray, duration: float = 0.3, *, blend: str = "inertialize",
               source: np.ndarray | None = None, source_velocity: np.ndarray | None = None,
               target_velocity: np.ndarray | None = None, instances: Any = None,
               extrapolation_halflife: float = 0.1) -> None:
        """Start a transition for the selected instances: the new motion's pose now is ``target``
        (n, J, 10); the old one is ``source`` moving at ``source_velocity`` (n, J, 9) (default: what
        :meth:`apply` showed last, and its velocity). ``target_velocity`` (n, J, 9) defaults to the
        finite difference between ``target`` and the pose the next :meth:`apply` receives.
        ``blend``: "inertialize" (Bollo's quintic, zero at ``duration``), "inertialize_spring" (critically
        damped, halflife ``duration / 5``) or "dead_blend" (the source extrapolated with a velocity
        halving every ``extrapolation_halflife`` seconds, smoothstep-blended to the target)."""
        if blend not in IK.BLEND_CODES:
            raise SkeletalError(f"blend {blend!r} is not one of {BLENDS}")
        if not (duration > 0 and np.isfinite(duration)):
            raise SkeletalError(f"an inertialized transition needs a positive duration, got {duration}")
        if not (extrapolation_halflife > 0):
            raise SkeletalError(f"extrapolation_halflife must be positive, got {extrapolation_halflife}")
        rows = self._rows(instances)
        n = len(rows)

        def rows_of(a: np.ndarray | None, width: int, name: str) -> np.ndarray | None:
            if a is None:
                return None
            a = np.asarray(a, np.float64)
            if a.shape != (n, self.joints, width):
                raise SkeletalError(f"{name} must have shape {(n, self.joints, width)}, got {a.shape}")
            return a

        target_a = rows_of(target, 10, "target")
        shown_pose, shown_velocity = self.shown(rows) if source is None or source_velocity is None else (None, None)
        source_a = rows_of(source, 10, "source")
        if source_a is None:
            source_a = shown_pose
        source_v = rows_of(source_velocity, IK.NCH, "source_velocity")
        if source_v is None:
            source_v = shown_velocity
        code = IK.BLEND_CODES[blend]
        self.mode[rows] = code
        self.phase[rows] = IK.PENDING
        self.clock[rows, IK.C_ELAPSED] = 0.0
        self.clock[rows, IK.C_DURATION] = 2.0 * duration if code == IK.SPRING else duration
        self.clock[rows, IK.C_HALFLIFE] = extrapolation_halflife
        self.source[rows] = source_a
        self.velocity[rows] = source_v
        self.anchor[rows] = target_a
        target_v = rows_of(target_velocity, IK.NCH, "target_velocity")
        self.known[rows] = target_v is not None
        if target_v is not None:
            self.target_velocity[rows] = target_v

    def apply(self, pose: np.ndarray, dt: float) -> int:
        """Advance the transitions by ``dt`` seconds and add their offsets to ``pose`` (B, J, 10) in
        place (the new motion's pose in, the pose to show out); returns how many instances changed.
        A ``dt`` of 0 re-poses the same moment (after a switch: the source pose)."""
        if pose.shape != (self.count, self.joints, 10) or pose.dtype != np.float64:
            raise SkeletalError(f"pose must be float64 {(self.count, self.joints, 10)}, got {pose.dtype} {pose.shape}")
        dt = float(dt)
        if not (dt >= 0 and np.isfinite(dt)):
            raise SkeletalError(f"dt must be a finite number >= 0, got {dt}")
        kernel = IK.apply if self.count > 1 else IK.apply_serial
        return int(kernel(pose, dt, self.mode, self.phase, self.clock, self.offset, self.velocity,
                          self.source, self.anchor, self.known, self.target_velocity, self.history, self.newest, self._scratch))
