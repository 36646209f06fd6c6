"""The compiled side of inertialization now lives in :mod:`skeletal.playback.inertia_kernels` (the update
kernel's inertialization stage reads it); this module keeps the old import path."""

from ..inertia_kernels import *  # noqa: F403
from ..inertia_kernels import (BLEND_CODES, C_DURATION, C_ELAPSED, C_HALFLIFE, C_KEPT, C_LAST_DT, DEAD,  # noqa: F401
                               IDLE, NCH, NCLOCK, PENDING, QUINTIC, SPRING, ACTIVE, add_offset, apply, apply_serial,
                               left_jacobian_inverse, pose_difference, pose_velocity_into, poses_velocity_into,
                               quat_exp, quat_log, quintic_weights, shown_velocity, start_offsets)
from ...quat import qmul  # noqa: F401  (tests reach it through this module)
