"""Locomotion: inertialized transitions and motion matching (issue 27's foundations).

* :mod:`~skeletal.playback.locomotion.inertialize`: :class:`Inertializer`, decaying per-joint pose
  offsets over batch-first local poses; ``crossfade(..., blend="inertialize")`` on a Player or Mixer
  (:mod:`~skeletal.playback.locomotion.mixer_hook`).
* :mod:`~skeletal.playback.locomotion.features` and :mod:`~skeletal.playback.locomotion.database`:
  :class:`MatchingDatabase`, every frame of a set of clips with its feature vector, in one file.
* :mod:`~skeletal.playback.locomotion.search`: brute-force and bounding-box searches, batched.
* :mod:`~skeletal.playback.locomotion.controller`: :class:`MotionMatching`, a Player driven by a
  desired velocity through the database.
* :mod:`~skeletal.playback.locomotion.crowd_matching`: :class:`CrowdMotionMatching`, the controller
  on a Crowd (what ``MotionMatching(crowd, db)`` returns): per-instance goals, one batched search.
* :mod:`~skeletal.playback.locomotion.mirror`: :func:`mirror_clip`, a clip reflected with left and
  right swapped (what mirrored database rows play).
* :mod:`~skeletal.playback.locomotion.warping`: :class:`Warping`, stride and orientation warping of a
  Player's or a Crowd's pose (two-bone leg IK keeps the feet on their scaled targets), alone or under
  ``MotionMatching(..., warping=True)``.
"""

from .controller import MotionMatching
from .crowd_matching import CrowdMotionMatching
from .database import MatchingDatabase, Range
from .features import Feature, default_features
from .inertialize import Inertializer, pose_velocity
from .mirror import mirror_clip
from .warping import Warping

__all__ = ["CrowdMotionMatching", "Feature", "Inertializer", "MatchingDatabase", "MotionMatching", "Range", "default_features",
           "Warping", "mirror_clip", "pose_velocity"]
