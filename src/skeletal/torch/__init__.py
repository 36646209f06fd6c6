"""skeletal.torch: the posing and skinning pipeline as differentiable PyTorch functions.

Everything here takes and returns ``torch.Tensor`` with any leading batch axes (``(B, N, ...)``,
``(B, T, N, ...)``), runs on whatever device and dtype its inputs have (CPU or CUDA, float32 or
float64), and is built from out-of-place tensor operations only, so ``loss.backward()`` reaches every
input. The same contracts as the numba path (:mod:`skeletal.pose`, :mod:`skeletal.skin`):

* local pose rows ``t(3) q(4) s(3)`` (..., N, 10), quaternions xyzw, used as given (normalise
  quaternions you optimise, or optimise 6D rotations);
* world matrices (..., N, 4, 4) row-major acting on column vectors, ``W[i] = W[parent[i]] @ T @ R @ S``;
* palettes (..., J, 4, 4) ``W[joint j] @ inverse_bind[j]``;
* 6D rotations (..., 6): the first two *columns* of the rotation matrix (Zhou et al. 2019),
  Gram-Schmidt back to a matrix.

Modules: :mod:`~skeletal.torch.kinematics` (rotations, FK, palettes), :mod:`~skeletal.torch.skinning`
(LBS, DQS, morphs), :mod:`~skeletal.torch.convert` (rigs, skins, meshes, clips <-> tensors),
:mod:`~skeletal.torch.data` (a ``Dataset`` of motion windows over a folder of files).

``import skeletal`` never imports torch; this subpackage needs the ``torch`` extra
(``pip install "skeletal[torch]"``).

>>> import skeletal, skeletal.torch as st                         # doctest: +SKIP
>>> asset = skeletal.demo.demo_asset()                           # doctest: +SKIP
>>> rig = st.rig_tensors(asset.rig)                              # parents, depth levels, rest pose
>>> motion = st.clip_to_tensors(asset.clip("walk"), asset.rig, fps=30)   # motion.pose (T, N, 10)
>>> world = st.world_matrices(rig, motion.pose)                  # (T, N, 4, 4), differentiable
"""

from __future__ import annotations

try:
    import torch as _torch  # noqa: F401  (the real PyTorch: imports here are absolute)
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError(
        "skeletal.torch needs PyTorch, which is not installed: pip install \"skeletal[torch]\" "
        f"(or see https://pytorch.org for a CUDA build) [{exc}]"
    ) from None

from .kinematics import (
    RigTensors, compose_pose, compose_trs, forward_kinematics, joint_positions, matrix_to_quat,
    matrix_to_rot6d, normalize_quat, quat_mul, quat_to_matrix, quat_to_rot6d, rig_tensors, rot6d_to_matrix,
    rot6d_to_quat, skin_palette, world_from_rotations, world_matrices, local_matrices, rotation_matrices,
)
from .skinning import apply_morphs, dqs, lbs, palette_to_dual_quat
from .convert import (
    ClipTensors, MeshTensors, SkinTensors, clip_to_tensors, mesh_tensors, skin_tensors, tensors_to_clip,
)
from .data import MotionWindows

__all__ = [
    "RigTensors", "rig_tensors", "compose_pose", "compose_trs", "forward_kinematics", "joint_positions",
    "matrix_to_quat", "matrix_to_rot6d", "normalize_quat", "quat_mul", "quat_to_matrix", "quat_to_rot6d",
    "rot6d_to_matrix", "rot6d_to_quat", "skin_palette", "world_matrices", "world_from_rotations",
    "local_matrices", "rotation_matrices", "apply_morphs", "dqs", "lbs",
    "palette_to_dual_quat", "ClipTensors", "MeshTensors", "SkinTensors", "clip_to_tensors", "mesh_tensors",
    "skin_tensors", "tensors_to_clip", "MotionWindows",
]
