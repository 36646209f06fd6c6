"""The animation editor (``skeletal edit``): a document/command model with no GL
(:mod:`.model`, :mod:`.keys`) and the window that drives it (:mod:`.app`, imported only when a
window opens).

>>> from skeletal.editor import EditDocument, InsertPoseKeys      # doctest: +SKIP
"""

from .model import (
    AddClip, AddCollider, Batch, ClearPoseEdits, ClipEdit, ClipInfo, Command, CopiedKey, DeleteClip, DeleteKeys,
    EditDocument, EditError, InsertPoseKeys, KeyColliderVisibility, MoveKeys, PasteKeys, RemoveCollider, RenameClip,
    SetClipLength, SetCollider, SetFps, SetInterpolation, SetKeyValue, SetPose, SetPoses, autosave_path, copy_keys,
    duplicate_clip, ik_chain, ik_pose, new_clip, TransformCollider, collider_gizmo_matrix, transformed_collider,
)

__all__ = [
    "AddClip", "AddCollider", "Batch", "ClearPoseEdits", "ClipEdit", "ClipInfo", "Command", "CopiedKey",
    "DeleteClip", "DeleteKeys", "EditDocument", "EditError", "InsertPoseKeys", "KeyColliderVisibility", "MoveKeys",
    "PasteKeys", "RemoveCollider", "RenameClip", "SetClipLength", "SetCollider", "SetFps", "SetInterpolation",
    "SetKeyValue", "SetPose", "SetPoses", "autosave_path", "copy_keys", "duplicate_clip", "ik_chain", "ik_pose", "new_clip",
    "TransformCollider", "collider_gizmo_matrix", "transformed_collider",
]
