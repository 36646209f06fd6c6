"""Table layouts of the IK stages: the column offsets of the int / float stage rows, the per-joint
parameter rows, the per-instance input rows and the per-joint solver scratch.

A stage is one int row (``SI_*``, width ``SI_WIDTH``), one float row (``SF_*``), its chain joints
(a slice of the joint table with per-joint parameters ``JP_*``) and, per instance, an input row
(``IN_*``). Vector fields take 3 columns and quaternions (xyzw) 4, starting at the given offset;
``NaN`` in an input means "none". See :class:`skeletal.anim.ik.StageTable`.

>>> from skeletal.anim.ik_layout import KINDS, KIND_CCD, IN_WIDTH
>>> KINDS["ccd"] == KIND_CCD, IN_WIDTH
(True, 11)
"""

from __future__ import annotations


# ---------------------------------------------------------------------------------------------
# table layouts

KIND_TWO_BONE, KIND_AIM, KIND_CCD, KIND_FABRIK = 0, 1, 2, 3
KINDS = {"two_bone": KIND_TWO_BONE, "aim": KIND_AIM, "look_at": KIND_AIM, "ccd": KIND_CCD, "fabrik": KIND_FABRIK}

# stage int row
SI_KIND = 0
SI_J0 = 1  # chain joints: joints[J0:J1], root first (two-bone: root, mid, end; aim: first..last aiming)
SI_J1 = 2
SI_ITER = 3  # CCD / FABRIK iterations
SI_U0 = 4  # world rows to rebuild after the stage: update[U0:U1] (ascending rig indices)
SI_U1 = 5
SI_DEFERS = 6  # 1: some of the stage's update rows are left to it by the caller (see rows_before_stages)
SI_WIDTH = 7

# stage float row
SF_SOFT = 0  # two-bone: soft-limit band as a fraction of the chain length (0 = hard)
SF_MID_AXIS = 1  # two-bone: hinge axis of the mid joint in its local frame (NaN: from the pose)
SF_FORWARD = 4  # aim: forward axis in the last joint's local frame
SF_UP = 7  # aim: up axis in the last joint's local frame
SF_TOL = 10  # CCD / FABRIK: stop when the end effector is this close to the target
SF_WIDTH = 11

# per chain joint float row
JP_LIMIT = 0  # LIMIT_* below
JP_AXIS = 1  # hinge axis (joint's local frame)
JP_MIN = 4  # hinge: angle range; cone: twist range (radians)
JP_MAX = 5
JP_CONE = 6  # cone: largest swing of the bone away from its reference direction (radians)
JP_REF = 7  # reference local rotation the limits are measured from (xyzw; the rest pose by default)
JP_SHARE = 11  # aim chains: fraction of the remaining turn this joint takes (the last one takes 1)
JP_YAW = 12  # aim: largest |yaw|, |pitch|, |roll| of this joint's correction (radians; inf = free)
JP_PITCH = 13
JP_ROLL = 14
JP_WIDTH = 15

LIMIT_NONE, LIMIT_HINGE, LIMIT_CONE = 0, 1, 2

# per instance and stage input row
IN_TARGET = 0  # target point (3)
IN_POLE = 3  # two-bone: pole point; aim: world up direction; NaN = none
IN_WEIGHT = 6
IN_ROTATION = 7  # two-bone: model-space rotation for the end joint (xyzw), NaN = none
IN_WIDTH = 11
SCRATCH_WIDTH = 26  # per chain joint, see _chain_setup
