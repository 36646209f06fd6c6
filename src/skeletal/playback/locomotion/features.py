"""Motion-matching features: what a database frame says about the pose and where the character goes.

A feature vector describes one frame in the **character frame**: the root's ground position (x, z;
y is height above the ground) turned so that the character faces +Z (its left is +X, y up, glTF's
convention). Each :class:`Feature` is one group of columns:

* ``position``: a joint's position in the character frame (3 columns, metres);
* ``velocity``: a joint's velocity in the character frame (3 columns, m/s; backward difference of
  world positions, rotated into the frame of the later frame);
* ``trajectory_position``: the root's ground position ``frames`` ahead (2 columns (x, z) each);
* ``trajectory_direction``: the root's facing ``frames`` ahead (2 columns (x, z) each, unit).

The defaults (:func:`default_features`) are those of D. Holden's Motion-Matching demo: both feet's
positions and velocities, the hips' velocity, and the trajectory 20, 40 and 60 frames ahead at 60 fps
(27 columns).

**Mirroring** is a map of columns: a frame reflected through the character's x = 0 plane, with
left and right joints swapped, has the features of the original with the columns of every group
swapped with its partner's (the group of the same kind on the mirrored joint) and its x columns
negated (:func:`mirror_columns`).

>>> features = default_features()
>>> [f.name for f in features][:2]
['left_foot_position', 'right_foot_position']
>>> sum(f.width for f in features)
27
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ...errors import SkeletalError

KINDS = ("position", "velocity", "trajectory_position", "trajectory_direction")


@dataclass(frozen=True)
class Feature:
    """One group of feature columns (see the module docstring). ``weight`` scales the group after
    normalisation (a larger weight makes the search care more about it); ``frames`` are the frames
    ahead (at the database's fps) of a trajectory group."""

    name: str
    kind: str
    joint: str | None = None
    weight: float = 1.0
    frames: tuple[int, ...] = (20, 40, 60)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise SkeletalError(f"feature {self.name!r}: kind {self.kind!r} is not one of {KINDS}")
        if self.kind in ("position", "velocity") and not self.joint:
            raise SkeletalError(f"feature {self.name!r}: a {self.kind} feature needs a joint")
        if not (np.isfinite(self.weight) and self.weight > 0):
            raise SkeletalError(f"feature {self.name!r}: weight must be positive, got {self.weight}")
        if self.kind.startswith("trajectory") and (not self.frames or min(self.frames) < 1):
            raise SkeletalError(f"feature {self.name!r}: trajectory frames must be at least 1, got {self.frames}")

    @property
    def width(self) -> int:
        """How many columns the group has."""
        return 3 if self.kind in ("position", "velocity") else 2 * len(self.frames)

    def x_columns(self) -> list[int]:
        """The group's columns that are x components (negated by mirroring)."""
        return [0] if self.kind in ("position", "velocity") else list(range(0, self.width, 2))


def default_features(left_foot: str = "left_foot", right_foot: str = "right_foot", hips: str = "hips", *,
                     foot_position: float = 0.75, foot_velocity: float = 1.0, hip_velocity: float = 1.0,
                     trajectory_position: float = 1.0, trajectory_direction: float = 1.5,
                     frames: tuple[int, ...] = (20, 40, 60)) -> tuple[Feature, ...]:
    """Holden's feature set for a rig's feet and hips (joint names; the demo character's by default)
    with his weights.

    >>> [f.name for f in default_features("mixamorig:LeftFoot", "mixamorig:RightFoot", "mixamorig:Hips")][4]
    'hip_velocity'
    """
    return (
        Feature("left_foot_position", "position", left_foot, foot_position),
        Feature("right_foot_position", "position", right_foot, foot_position),
        Feature("left_foot_velocity", "velocity", left_foot, foot_velocity),
        Feature("right_foot_velocity", "velocity", right_foot, foot_velocity),
        Feature("hip_velocity", "velocity", hips, hip_velocity),
        Feature("trajectory_position", "trajectory_position", None, trajectory_position, frames),
        Feature("trajectory_direction", "trajectory_direction", None, trajectory_direction, frames),
    )


_SIDES = (("left", "right"), ("Left", "Right"), ("LEFT", "RIGHT"), (" L ", " R "), ("l_", "r_"), ("L_", "R_"),
          ("_l", "_r"), ("_L", "_R"), (".l", ".r"), (".L", ".R"))


def mirror_name(name: str) -> str:
    """The name of the joint on the other side (left <-> right in the usual spellings); the name itself
    for a joint on the middle line.

    >>> mirror_name("mixamorig:LeftUpLeg"), mirror_name("Bip01 R Foot"), mirror_name("hips")
    ('mixamorig:RightUpLeg', 'Bip01 L Foot', 'hips')
    """
    for a, b in _SIDES:
        for x, y in ((a, b), (b, a)):
            if x.startswith(("_", ".")) and name.endswith(x):
                return name[: -len(x)] + y
            if x.endswith("_") and name.startswith(x):
                return y + name[len(x):]
            if not x.startswith(("_", ".")) and not x.endswith("_") and x in name:
                return re.sub(re.escape(x), y, name, count=1)
    return name


def mirror_joints(names: tuple[str, ...] | list[str]) -> np.ndarray:
    """(N,) the rig index of each joint's mirror (itself on the middle line); a name whose mirror is
    not in the rig maps to itself."""
    index = {n: i for i, n in enumerate(names)}
    return np.array([index.get(mirror_name(n), i) for i, n in enumerate(names)], np.int64)


def layout(features: tuple[Feature, ...]) -> list[slice]:
    """The column slice of each group."""
    out, start = [], 0
    for f in features:
        out.append(slice(start, start + f.width))
        start += f.width
    return out


def mirror_columns(features: tuple[Feature, ...]) -> tuple[np.ndarray, np.ndarray]:
    """``(source, sign)`` (D,) so that ``mirrored[:, c] = sign[c] * features[:, source[c]]``."""
    slices = layout(features)
    width = slices[-1].stop if slices else 0
    source = np.arange(width)
    sign = np.ones(width)
    for g, f in enumerate(features):
        partner = g
        if f.joint is not None and mirror_name(f.joint) != f.joint:
            matches = [h for h, o in enumerate(features) if o.kind == f.kind and o.joint == mirror_name(f.joint)]
            if not matches:
                raise SkeletalError(f"feature {f.name!r} on {f.joint!r} has no mirrored partner on {mirror_name(f.joint)!r}")
            partner = matches[0]
            if features[partner].width != f.width:
                raise SkeletalError(f"features {f.name!r} and {features[partner].name!r} differ in width")
        source[slices[g]] = np.arange(slices[partner].start, slices[partner].stop)
        for c in f.x_columns():
            sign[slices[g].start + c] = -1.0
    return source, sign


def root_frames(world: np.ndarray, root: int, forward: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The character frame of each of T frames from the root joint's world matrices ``world[:, root]``
    (T, N, 4, 4): ground position (T, 3) (y = 0) and yaw (T,) (radians about +Y; 0 faces +Z) of the
    root's ``forward`` axis (its local axis, (3,))."""
    m = world[:, root]
    position = m[:, :3, 3].copy()
    position[:, 1] = 0.0
    facing = m[:, :3, :3] @ np.asarray(forward, np.float64)
    return position, np.arctan2(facing[:, 0], facing[:, 2])


def _to_frame(vectors: np.ndarray, yaw: np.ndarray) -> np.ndarray:
    """World vectors (T, ..., 3) turned by -yaw about +Y (into the character frame of each frame)."""
    c, s = np.cos(yaw), np.sin(yaw)
    shape = (-1,) + (1,) * (vectors.ndim - 2)
    c, s = c.reshape(shape), s.reshape(shape)
    x, z = vectors[..., 0], vectors[..., 2]
    return np.stack([c * x - s * z, vectors[..., 1], s * x + c * z], axis=-1)


def compute_features(positions: np.ndarray, root_position: np.ndarray, root_yaw: np.ndarray, fps: float,
                     features: tuple[Feature, ...], joint_index: dict[str, int]) -> np.ndarray:
    """Raw (un-normalised) features (T, D) of one clip's T consecutive frames: world joint positions
    ``positions`` (T, N, 3), the character frames (:func:`root_frames`), ``fps`` frames per second.
    Velocities of the first frame use the second (forward difference); trajectory frames past the
    clip's end are its last frame's."""
    T = len(positions)
    if T < 2:
        raise SkeletalError("a clip needs at least two frames for features")
    columns = []
    yaw = np.asarray(root_yaw, np.float64)
    for f in features:
        if f.kind in ("position", "velocity"):
            if f.joint not in joint_index:
                raise SkeletalError(f"feature {f.name!r}: the rig has no joint {f.joint!r}")
            p = positions[:, joint_index[f.joint]]
            if f.kind == "position":
                columns.append(_to_frame(p - root_position, yaw))
            else:
                v = np.empty_like(p)
                v[1:] = (p[1:] - p[:-1]) * fps
                v[0] = v[1]
                columns.append(_to_frame(v, yaw))
        else:
            ahead = np.minimum(np.arange(T)[:, None] + np.asarray(f.frames)[None, :], T - 1)  # (T, K)
            if f.kind == "trajectory_position":
                world = root_position[ahead] - root_position[:, None]
            else:
                world = np.stack([np.sin(yaw[ahead]), np.zeros(ahead.shape), np.cos(yaw[ahead])], axis=-1)
            local = _to_frame(world, yaw)
            columns.append(local[..., [0, 2]].reshape(T, -1))
    return np.concatenate(columns, axis=1)
