"""Inverse kinematics: two-bone, aim (look-at), CCD and FABRIK, as numba kernels over batched poses.

Every solver reads the model-space pose (world matrices of the chain, as :mod:`skeletal.pose` builds
them) and writes corrected **local rotations** into the local pose rows, so its result composes with
whatever produced the pose (layers, masks, additive clips) and the world matrices / palettes built
afterwards see it. Translations and scales are never changed.

Shapes (B = instances, N = rig nodes; batch axis first, row-major, quaternions xyzw):

* ``pose`` (B, N, 10) local rows ``t q s`` (float32 or float64), corrected in place
* ``world`` (B, N, 4, 4) or (B, N, 3, 4): model-space matrices, valid at least for the chain joints
  and their ancestors; the solvers rebuild the rows of the nodes they move (see ``update``)
* targets, poles, up vectors: (B, 3) model-space points / directions; ``NaN`` means "none"
* weights: (B,) in [0, 1]; weight 0 leaves the pose bit-identical (the solver returns at once)

One instance's work is a *stage*: an int row (``SI_*``), a float row (``SF_*``), its chain joints
(a slice of ``joints`` with per-joint parameters ``JP_*``) and a per-instance input row (``IN_*``).
The batched functions below build one stage and call :func:`solve_batch`; the playback classes
(:meth:`skeletal.Mixer.add_ik`) keep a table of stages and run them inside their update kernels.

>>> import numpy as np
>>> from skeletal.rig import Rig
>>> rest = np.zeros((3, 10)); rest[:, 6] = 1; rest[:, 7:] = 1; rest[1:, 1] = 1.0   # a 2-bone leg
>>> rig = Rig.from_parents(["hip", "knee", "foot"], [-1, 0, 1], rest)
>>> pose = two_bone(rig.parents, rest[None], (0, 1, 2), target=[[0.0, 1.2, 0.8]], pole=[[0, 1, 1]])
>>> np.round(world_positions(rig.parents, pose)[0, 2], 6) + 0.0
array([0. , 1.2, 0.8])
"""


# The kernels and tables live in modules of their own; this module keeps every name importable here.
# ik_layout: table column layouts; vec: tuple quaternion / vector helpers; ik_solvers: the solvers
# on one pose; ik_stages: the stage kernels and StageTable. Below: the batched functions.

from __future__ import annotations

import numpy as np

from ..errors import SkeletalError
from .ik_layout import (  # noqa: F401 (re-exported: importable from skeletal.anim.ik as before)
    IN_POLE, IN_ROTATION, IN_TARGET, IN_WEIGHT, IN_WIDTH, JP_AXIS, JP_CONE, JP_LIMIT, JP_MAX, JP_MIN, JP_PITCH,
    JP_REF, JP_ROLL, JP_SHARE, JP_WIDTH, JP_YAW, KIND_AIM, KIND_CCD, KIND_FABRIK, KIND_TWO_BONE, KINDS, LIMIT_CONE,
    LIMIT_HINGE, LIMIT_NONE, SCRATCH_WIDTH, SF_FORWARD, SF_MID_AXIS, SF_SOFT, SF_TOL, SF_UP, SF_WIDTH, SI_DEFERS,
    SI_ITER, SI_J0, SI_J1, SI_KIND, SI_U0, SI_U1, SI_WIDTH)
from .vec import (  # noqa: F401 (re-exported: importable from skeletal.anim.ik as before)
    _add, _any_perpendicular, _arc, _arc_to_unit, _axis_angle, _column, _cross, _dot, EPS, _finite3, _half_turn,
    _into_frame, _inv_len, _len, _local_rotation, _local_turn, _matrix_rotation, _out_of_frame, _parent_rotation,
    _position, _qconj, _qmul, _qnorm, _qrot, _quat, _quat_at, _scale, _scale_rotation, _slerp, _sub, _vec, _vec_at,
    _write_rotation)
from .ik_solvers import (  # noqa: F401 (re-exported: importable from skeletal.anim.ik as before)
    aim_one, _apply_limit, _bone_axis_local, C_A, C_L, C_LEN, C_O, C_P, C_W, C_W0, C_WP, ccd_one,
    _chain_has_limits, _chain_setup, _clamp_euler, _enforce_limits, fabrik_one, _positions_to_rotations, _put3,
    _put4, _set_local, soft_distance, _straighten, knee_pole, two_bone_one, _write_chain)
from .ik_stages import (  # noqa: F401 (re-exported: importable from skeletal.anim.ik as before)
    AimLimit, Cone, Hinge, solve_batch, solve_stage_at, solve_stages_at, solve_stages_one, StageTable, _unit3)
from .pose import world_matrices


# ---------------------------------------------------------------------------------------------
# batched functions (one stage each)


def _batch(pose: np.ndarray) -> tuple[np.ndarray, bool]:
    pose = np.asarray(pose)
    single = pose.ndim == 2
    if single:
        pose = pose[None]
    if pose.ndim != 3 or pose.shape[-1] != 10:
        raise SkeletalError(f"pose must be (N, 10) or (B, N, 10), got {pose.shape}")
    if pose.dtype not in (np.float32, np.float64):
        pose = pose.astype(np.float64)
    return pose, single


def _rows(value, count: int, width: int, what: str) -> np.ndarray:
    """(count, width) from None (NaN), one row, or one row per instance."""
    if value is None:
        return np.full((count, width), np.nan)
    a = np.asarray(value, dtype=np.float64)
    if a.shape == (width,):
        return np.broadcast_to(a, (count, width))
    if a.shape == (count, width):
        return a
    raise SkeletalError(f"{what} must be ({width},) or ({count}, {width}), got {a.shape}")


def _run(parents, pose, world, kind: str, chain, target, *, pole=None, weight=1.0, rotation=None, out=None,
         **options) -> np.ndarray:
    parents = np.asarray(parents, dtype=np.int32)
    pose, single = _batch(pose)
    b = pose.shape[0]
    result = pose.copy() if out is None else out.reshape(pose.shape)
    if out is not None and out is not pose:
        result[...] = pose
    table = StageTable(parents, rest=options.pop("rest", None))
    table.add(kind, chain, **options)
    if world is None:
        world = world_matrices(parents, result)
    else:
        world = np.array(world, dtype=result.dtype).reshape(result.shape[:2] + np.shape(world)[-2:])
    inputs = table.inputs(b)
    inputs[:, 0, IN_TARGET:IN_TARGET + 3] = _rows(target, b, 3, "target")
    inputs[:, 0, IN_POLE:IN_POLE + 3] = _rows(pole, b, 3, "pole / up vector")
    inputs[:, 0, IN_ROTATION:IN_ROTATION + 4] = _rows(rotation, b, 4, "end rotation")
    inputs[:, 0, IN_WEIGHT] = np.broadcast_to(np.asarray(weight, dtype=np.float64), (b,))
    table.solve(result, world, inputs)
    return result[0] if single else result


def two_bone(parents, pose, chain, target, *, pole=None, weight=1.0, soft: float = 0.0, mid_axis=None,
             end_rotation=None, world=None, out=None) -> np.ndarray:
    """Two-bone IK over a batch of poses; returns the poses with corrected local rotations.

    ``parents`` (N,) parent-first; ``pose`` (B, N, 10) or (N, 10) local rows; ``chain`` (root, mid,
    end) rig indices; ``target`` (B, 3) or (3,) model-space points; ``pole`` (B, 3)/(3,) points the
    mid joint (knee, elbow) bends toward, or None; ``weight`` scalar or (B,); ``soft`` in [0, 1):
    soft-limit band near full extension (fraction of the chain length); ``mid_axis`` (3,) hinge axis
    in the mid joint's local frame (positive turns bend it); ``end_rotation`` (B, 4)/(4,) model-space
    xyzw rotation for the end joint; ``world`` (B, N, 3|4, 4) model-space matrices of ``pose`` (built
    when None); ``out``: write there (e.g. ``out=pose`` for in place). See :func:`two_bone_one`.
    """
    return _run(parents, pose, world, "two_bone", chain, target, pole=pole, weight=weight, rotation=end_rotation,
                out=out, soft=soft, mid_axis=mid_axis)


def aim(parents, pose, joints, target, *, forward=(0.0, 0.0, 1.0), up=(0.0, 1.0, 0.0), up_vector=None,
        weight=1.0, shares=None, limits=None, world=None, out=None) -> np.ndarray:
    """Aim / look-at over a batch of poses: the last of ``joints`` points its local ``forward`` axis at
    ``target`` (B, 3), its ``up`` axis toward ``up_vector`` (B, 3) (a model-space direction, or None).
    With several joints (spine, neck, head) each takes a share of the turn (``shares``: relative
    amounts, equal by default); ``limits``: an :class:`AimLimit` (or one per joint) bounding each
    joint's yaw / pitch / roll. See :func:`aim_one`."""
    return _run(parents, pose, world, "aim", joints, target, pole=up_vector, weight=weight, out=out,
                forward=forward, up=up, shares=shares, limits=limits)


def ccd(parents, pose, joints, target, *, limits=None, iterations: int = 10, tolerance: float = 1e-5, weight=1.0,
        rest=None, world=None, out=None) -> np.ndarray:
    """CCD over a batch of poses for the chain ``joints`` (root first, end effector last); ``limits``
    a :class:`Hinge` / :class:`Cone` / None per joint (or one for all), measured from ``rest`` (N, 10)
    local rows (identity rotations when None) unless the limit names its own reference. See
    :func:`ccd_one`."""
    return _run(parents, pose, world, "ccd", joints, target, weight=weight, out=out, limits=limits,
                iterations=iterations, tolerance=tolerance, rest=rest)


def fabrik(parents, pose, joints, target, *, limits=None, iterations: int = 10, tolerance: float = 1e-5, weight=1.0,
           rest=None, world=None, out=None) -> np.ndarray:
    """FABRIK over a batch of poses, converted back to local rotations that keep each bone's twist.
    Options as :func:`ccd`; see :func:`fabrik_one`."""
    return _run(parents, pose, world, "fabrik", joints, target, weight=weight, out=out, limits=limits,
                iterations=iterations, tolerance=tolerance, rest=rest)


def world_positions(parents, pose) -> np.ndarray:
    """Model-space joint positions (..., N, 3) of local pose rows (..., N, 10)."""
    return world_matrices(np.asarray(parents), np.asarray(pose, dtype=np.float64))[..., :3, 3]
