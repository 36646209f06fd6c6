"""The animation stages: rig, clip, sampling, pose, IK, colliders."""
