"""Locomotion: inertialized transitions and motion matching (issue 27's foundations).

* :mod:`~skeletal.playback.locomotion.inertialize`: :class:`Inertializer`, decaying per-joint pose
  offsets over batch-first local poses; ``crossfade(..., blend="inertialize")`` on a Player or Mixer.
* :mod:`~skeletal.playback.locomotion.features` and :mod:`~skeletal.playback.locomotion.database`:
  a motion-matching database of every frame of a set of clips.
* :mod:`~skeletal.playback.locomotion.search`: brute-force and bounding-box searches, batched.
"""

from .inertialize import Inertializer, pose_velocity

__all__ = ["Inertializer", "pose_velocity"]
