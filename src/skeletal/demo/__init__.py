# Over 600 lines: the built-in character is data: the joint table, the mesh generator and the keyframes of
# four clips.
"""The built-in demo character: a skinned humanoid and its clips, made entirely by code.

>>> import skeletal.demo
>>> asset = skeletal.demo.demo_asset()
>>> [c.name for c in asset.clips]
['idle', 'walk', 'run', 'wave']

Conventions (glTF's): Y up, metres, the figure faces +Z, so its left side is +X. It is about 1.8 m
tall, standing on y = 0 in its bind pose (arms hanging slightly away from the body).

The rig (:data:`JOINTS`): every joint's rest rotation is the identity, so each joint's local axes
are the model's axes in the bind pose and the clips can be written as plain Euler angles:
rotation about +X swings a limb (negative = a leg or arm forward, positive = knee bent), about +Z
raises it sideways, about +Y twists it.

The mesh: one skinned mesh, one primitive per material (skin, shirt, trousers, shoes, hair). The body
(torso, neck, arms, legs) is one smooth closed surface: a smooth union of ellipsoids and round cones,
blended wide at the hips and shoulders, meshed once by :mod:`skeletal.isosurface` with normals from
the field's gradient (see :func:`body_field`), cut straight at the belt and the collar. Head, hands
and shoes are surfaces of revolution (tapered tubes with rounded ends, ellipsoids) with area-weighted
face normals. Weights come from the distance of each vertex to the bone segments of the joints that
may move its part: ``w ~ gate(p) / distance^POWER``, top 4 kept, normalised; so near an elbow or knee
a vertex blends two or three bones, falling off smoothly along the bone; on the body the parts'
weights are mixed by how much of each part the surface is made of there (through the hip and the
armpit).

The clips are written like seed 004's ``Keyframe{duration, ...}`` lists: a few whole-body poses
(Euler angles in degrees per joint, a hips offset) with the time each lasts. The hips height is
solved so that the lowest skinned shoe vertex touches the ground (at every key, and for LINEAR clips
also between keys, so the feet neither sink nor float; run adds its flight phase on top), and walk
and run play in place: only the hips move, and only up and down. ``idle`` uses
CUBICSPLINE (Catmull-Rom tangents, periodic), the others LINEAR. Every clip ends on its first pose,
so it loops seamlessly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable, Sequence

import numpy as np

from skeletal.asset import Asset
from skeletal.document import Animation, Channel, Document, Material, Mesh, Node, Primitive, Skin
from skeletal.quat import quat_mul, quat_slerp, quat_to_matrix

# ---------------------------------------------------------------------------------------------
# the skeleton

#: (name, parent name, bind-pose head position in model space, metres). Parents come first.
JOINTS: tuple[tuple[str, str | None, tuple[float, float, float]], ...] = (
    ("root", None, (0.0, 0.0, 0.0)),
    ("hips", "root", (0.0, 0.98, 0.0)),
    ("spine", "hips", (0.0, 1.10, 0.0)),
    ("chest", "spine", (0.0, 1.26, 0.0)),
    ("neck", "chest", (0.0, 1.49, 0.0)),
    ("head", "neck", (0.0, 1.60, 0.01)),
    ("left_shoulder", "chest", (0.025, 1.435, 0.0)),
    ("left_upper_arm", "left_shoulder", (0.185, 1.415, -0.01)),
    ("left_forearm", "left_upper_arm", (0.24, 1.145, -0.02)),
    ("left_hand", "left_forearm", (0.28, 0.885, 0.0)),
    ("right_shoulder", "chest", (-0.025, 1.435, 0.0)),
    ("right_upper_arm", "right_shoulder", (-0.185, 1.415, -0.01)),
    ("right_forearm", "right_upper_arm", (-0.24, 1.145, -0.02)),
    ("right_hand", "right_forearm", (-0.28, 0.885, 0.0)),
    ("left_thigh", "hips", (0.095, 0.93, 0.0)),
    ("left_shin", "left_thigh", (0.10, 0.51, 0.012)),
    ("left_foot", "left_shin", (0.105, 0.09, -0.01)),
    ("left_toe", "left_foot", (0.105, 0.025, 0.13)),
    ("right_thigh", "hips", (-0.095, 0.93, 0.0)),
    ("right_shin", "right_thigh", (-0.10, 0.51, 0.012)),
    ("right_foot", "right_shin", (-0.105, 0.09, -0.01)),
    ("right_toe", "right_foot", (-0.105, 0.025, 0.13)),
)

#: Bone segment ends for joints whose bone has no single child to point at (model space, bind pose).
_TAILS: dict[str, tuple[float, float, float]] = {
    "root": (0.0, 0.98, 0.0),
    "hips": (0.0, 1.10, 0.0),
    "chest": (0.0, 1.49, 0.0),
    "head": (0.0, 1.80, 0.01),
    "left_hand": (0.295, 0.72, 0.02),
    "right_hand": (-0.295, 0.72, 0.02),
    "left_toe": (0.105, 0.02, 0.21),
    "right_toe": (-0.105, 0.02, 0.21),
}

JOINT_NAMES: tuple[str, ...] = tuple(j[0] for j in JOINTS)
_INDEX = {name: i for i, name in enumerate(JOINT_NAMES)}
_PARENT = np.array([-1 if p is None else _INDEX[p] for _, p, _ in JOINTS], dtype=np.int64)
_BIND = np.array([j[2] for j in JOINTS], dtype=np.float64)  # (J, 3) model-space joint heads


def _bone_segments() -> tuple[np.ndarray, np.ndarray]:
    """(J, 3) heads and (J, 3) tails of every bone: the tail is the only child's head, or _TAILS."""
    tails = np.empty_like(_BIND)
    for j, name in enumerate(JOINT_NAMES):
        children = [c for c in range(len(JOINTS)) if _PARENT[c] == j]
        if name in _TAILS:
            tails[j] = _TAILS[name]
        elif len(children) == 1:
            tails[j] = _BIND[children[0]]
        else:
            raise AssertionError(f"joint {name} needs a tail in _TAILS")
    return _BIND.copy(), tails


# ---------------------------------------------------------------------------------------------
# small maths


def quat_from_euler(x: float, y: float, z: float) -> np.ndarray:
    """Unit xyzw quaternion of Euler angles in DEGREES, applied X first, then Y, then Z
    (matrix ``Rz @ Ry @ Rx``): so a twist about a limb's own Y axis comes before its swing."""
    hx, hy, hz = np.radians([x, y, z]) / 2.0
    qx = np.array([np.sin(hx), 0.0, 0.0, np.cos(hx)])
    qy = np.array([0.0, np.sin(hy), 0.0, np.cos(hy)])
    qz = np.array([0.0, 0.0, np.sin(hz), np.cos(hz)])
    return quat_mul(qz, quat_mul(qy, qx))


def _smoothstep(edge0: float, edge1: float, x: np.ndarray) -> np.ndarray:
    """0 below edge0, 1 above edge1 (edges may be reversed), C1-smooth in between."""
    t = np.clip((np.asarray(x, dtype=np.float64) - edge0) / (edge1 - edge0), 0.0, 1.0)
    return t * t * (3.0 - 2.0 * t)


def _world_transforms(rotations: np.ndarray, hips_offset: np.ndarray) -> np.ndarray:
    """(J, 4, 4) model-space joint matrices of a pose: local rotations (J, 4) on the rest
    translations, the hips moved by ``hips_offset``."""
    world = np.zeros((len(JOINTS), 4, 4))
    for j in range(len(JOINTS)):
        local = np.eye(4)
        local[:3, :3] = quat_to_matrix(rotations[j])
        p = _PARENT[j]
        local[:3, 3] = _BIND[j] - (_BIND[p] if p >= 0 else 0.0)
        if j == _INDEX["hips"]:
            local[:3, 3] += hips_offset
        world[j] = local if p < 0 else world[p] @ local
    return world


# ---------------------------------------------------------------------------------------------
# the mesh

#: Skin weights fall off as distance ** -POWER from each bone segment.
POWER = 5.0
RING_SEGMENTS = 24  # vertices around every tube / ellipsoid
STEP = 0.02  # ring spacing along tubes, metres

Gate = Callable[[np.ndarray], np.ndarray]  # (V, 3) model-space points -> (V,) factor in [0, 1]


@dataclass
class _Part:
    """A closed surface in the bind pose and the joints allowed to move it.

    ``bones`` maps a joint name to an optional gate: its weight is multiplied by ``gate(points)``,
    e.g. to let a thigh move only the torso vertices below the hip joints.
    """

    positions: np.ndarray  # (V, 3) float64
    triangles: np.ndarray  # (T, 3) int64, counter-clockwise seen from outside
    material: str
    bones: dict[str, Gate | None]
    normals: np.ndarray | None = None  # (V, 3); None: area-weighted face normals
    influences: tuple[np.ndarray, np.ndarray] | None = None  # joints, weights; None: from ``bones``


def _lathe(centers: np.ndarray, radii: np.ndarray, width_axis: Sequence[float], segments: int = RING_SEGMENTS) -> tuple[np.ndarray, np.ndarray]:
    """A closed surface of revolution around a polyline.

    ``centers`` (n, 3) ring centres; ``radii`` (n, 2) the ring's half-widths along ``width_axis``
    (projected perpendicular to the polyline) and along the third axis. The first and the last ring
    must have radius 0: each becomes one pole vertex, so the surface is closed. Returns positions
    (V, 3) and outward-facing triangles (T, 3).
    """
    centers = np.asarray(centers, dtype=np.float64)
    radii = np.asarray(radii, dtype=np.float64)
    n = len(centers)
    tangent = np.gradient(centers, axis=0)
    tangent /= np.linalg.norm(tangent, axis=1, keepdims=True)
    u = np.asarray(width_axis, dtype=np.float64)[None, :] - (tangent @ np.asarray(width_axis, dtype=np.float64))[:, None] * tangent
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    w = np.cross(tangent, u)
    angles = 2.0 * np.pi * np.arange(segments) / segments
    cos, sin = np.cos(angles), np.sin(angles)
    rings = (centers[1:-1, None, :]
             + radii[1:-1, 0, None, None] * cos[None, :, None] * u[1:-1, None, :]
             + radii[1:-1, 1, None, None] * sin[None, :, None] * w[1:-1, None, :])
    positions = np.concatenate([centers[:1], rings.reshape(-1, 3), centers[-1:]])
    first, last = 0, len(positions) - 1
    ring = lambda i: 1 + i * segments  # index of ring i's first vertex (i = 0..n-3)
    j = np.arange(segments)
    k = (j + 1) % segments
    tris = []
    # Going round (+angle) then along (+i), the quad's normal (d/dangle x d/di) points outward.
    tris.append(np.stack([np.full(segments, first), ring(0) + k, ring(0) + j], axis=1))
    for i in range(n - 3):
        a, b = ring(i), ring(i + 1)
        tris.append(np.stack([a + j, a + k, b + j], axis=1))
        tris.append(np.stack([a + k, b + k, b + j], axis=1))
    tris.append(np.stack([ring(n - 3) + j, ring(n - 3) + k, np.full(segments, last)], axis=1))
    return positions, np.concatenate(tris).astype(np.int64)


def _tube(path: Sequence[Sequence[float]], radii: Sequence[Sequence[float]], width_axis: Sequence[float],
          *, cap_rings: int = 6, cap_depth: tuple[float, float] = (1.0, 1.0)) -> tuple[np.ndarray, np.ndarray]:
    """A tapered tube along a polyline with rounded ends (elliptic radii (rx, rz) at each polyline
    point, interpolated linearly in between; rings every :data:`STEP` metres). Each end cap bulges
    ``cap_depth`` times the end's mean radius beyond the end of the path (1 = a hemisphere)."""
    path = np.asarray(path, dtype=np.float64)
    radii = np.asarray(radii, dtype=np.float64)
    seg_len = np.linalg.norm(np.diff(path, axis=0), axis=1)
    arc = np.concatenate([[0.0], np.cumsum(seg_len)])
    s = np.linspace(0.0, arc[-1], max(2, int(np.ceil(arc[-1] / STEP)) + 1))
    centers = np.stack([np.interp(s, arc, path[:, c]) for c in range(3)], axis=1)
    r = np.stack([np.interp(s, arc, radii[:, c]) for c in range(2)], axis=1)
    # Rounded caps: quarter-ellipse profiles that close each end in a pole.
    def cap(end: int, direction: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        depth = float(np.mean(r[end])) * cap_depth[0 if end == 0 else 1]
        phi = np.linspace(0.0, np.pi / 2, cap_rings + 1)[1:]
        c = centers[end] + np.outer(np.sin(phi) * depth, direction)
        return c, np.outer(np.cos(phi), r[end])
    d0 = centers[0] - centers[1]
    d1 = centers[-1] - centers[-2]
    c0, r0 = cap(0, d0 / np.linalg.norm(d0))
    c1, r1 = cap(-1, d1 / np.linalg.norm(d1))
    all_c = np.concatenate([c0[::-1], centers, c1])
    all_r = np.concatenate([r0[::-1], r, r1])
    all_r[0] = all_r[-1] = 0.0
    return _lathe(all_c, all_r, width_axis)


def _ellipsoid(center: Sequence[float], radii: Sequence[float], rings: int = 16) -> tuple[np.ndarray, np.ndarray]:
    """An ellipsoid with semi-axes ``radii`` (x, y, z) around the Y axis."""
    cx, cy, cz = center
    rx, ry, rz = radii
    theta = np.linspace(0.0, np.pi, rings + 1)
    centers = np.stack([np.full_like(theta, cx), cy - ry * np.cos(theta), np.full_like(theta, cz)], axis=1)
    r = np.stack([rx * np.sin(theta), rz * np.sin(theta)], axis=1)
    r[0] = r[-1] = 0.0
    return _lathe(centers, r, (1.0, 0.0, 0.0))


def _mirror_x(points: np.ndarray) -> np.ndarray:
    return points * np.array([-1.0, 1.0, 1.0])


# -- the body: one smooth surface ------------------------------------------------------------------
#
# Torso, neck, arms and legs are one implicit surface: each is a signed distance (negative inside) of
# simple shapes (ellipsoids for the torso, round cones along the limbs), joined by a smooth minimum
# whose blend width k is wide at the hips and shoulders and zero elsewhere, so that an arm hanging
# beside the chest stays apart from it. The surface is meshed once (skeletal.isosurface) and split
# by material. Every vertex also knows how much of it comes from each shape ("membership", the
# smooth minimum's mixing factor): its skin weights are the shapes' own distance-based weights
# mixed by membership, so they run smoothly through the hip and the armpit.

#: The body's components, in membership order.
BODY_COMPONENTS = ("torso", "neck", "left_arm", "right_arm", "left_leg", "right_leg")
#: Torso ellipsoids: (centre, semi-axes), blended with :data:`TORSO_BLEND`.
TORSO_ELLIPSOIDS = (
    ((0.0, 0.94, -0.008), (0.165, 0.115, 0.11)),   # pelvis
    ((0.0, 1.07, 0.0), (0.148, 0.10, 0.097)),      # waist
    ((0.0, 1.24, 0.008), (0.145, 0.14, 0.108)),    # chest
    ((0.0, 1.415, -0.005), (0.15, 0.07, 0.095)),   # shoulder girdle
)
TORSO_BLEND = 0.09
#: Left limbs as (point, radius) chains; the right ones are mirrored.
ARM_CHAIN = (((0.15, 1.42, -0.01), 0.045), ((0.185, 1.415, -0.01), 0.044), ((0.212, 1.28, -0.015), 0.04),
             ((0.24, 1.145, -0.02), 0.039), ((0.262, 1.01, -0.01), 0.038), ((0.28, 0.89, 0.0), 0.031))
LEG_CHAIN = (((0.092, 0.95, 0.0), 0.085), ((0.095, 0.85, 0.0), 0.08), ((0.098, 0.68, 0.008), 0.066),
             ((0.10, 0.51, 0.014), 0.054), ((0.102, 0.38, 0.0), 0.058), ((0.104, 0.22, -0.01), 0.047),
             ((0.105, 0.10, -0.01), 0.041))
NECK_CHAIN = (((0.0, 1.42, 0.0), 0.052), ((0.0, 1.62, 0.015), 0.05))
#: Height of the belt (the torso's shirt above, trousers below) and of the collar (the neck's skin above).
BELT = 0.965
COLLAR = 1.50
#: Grid spacing of the body's mesh, metres.
BODY_CELL = 0.012


def _ellipsoid_distance(points: np.ndarray, center, radii) -> np.ndarray:
    """Approximate signed distance to an ellipsoid (exact on its axes, smooth everywhere)."""
    radii = np.asarray(radii, dtype=np.float64)
    return (np.linalg.norm((points - np.asarray(center)) / radii, axis=1) - 1.0) * radii.min()


def _chain_distance(points: np.ndarray, chain, mirror: bool = False) -> np.ndarray:
    """Signed distance to round cones along a chain of (point, radius): the distance to each segment
    minus the radius interpolated at the closest point, least over the segments."""
    centers = np.array([c for c, _ in chain], dtype=np.float64) * (np.array([-1.0, 1.0, 1.0]) if mirror else 1.0)
    radii = np.array([r for _, r in chain], dtype=np.float64)
    # Points farther than _FAR from the chain's box get the distance to that box, a lower bound that is
    # still beyond every blend width: the smooth minima come out the same.
    box_lo, box_hi = centers.min(axis=0) - radii.max(), centers.max(axis=0) + radii.max()
    outside = np.linalg.norm(np.maximum(np.maximum(box_lo - points, points - box_hi), 0.0), axis=1)
    best = outside.copy()
    near = np.flatnonzero(outside < _FAR)
    p = points[near]
    exact = np.full(len(p), np.inf)
    for a, b, ra, rb in zip(centers[:-1], centers[1:], radii[:-1], radii[1:]):
        d = b - a
        u = np.clip((p - a) @ d / (d @ d), 0.0, 1.0)
        rel = p - (a + u[:, None] * d)
        exact = np.minimum(exact, np.sqrt(np.einsum("ij,ij->i", rel, rel)) - (ra + (rb - ra) * u))
    best[near] = exact
    return best


#: Beyond this distance from a limb's box its exact distance is not needed (more than any blend width).
_FAR = 0.08


def _smooth_min(a: np.ndarray, ma: np.ndarray | None, b: np.ndarray, mb: np.ndarray | None, k):
    """Polynomial smooth minimum of distances a and b with blend width k (0: the plain minimum), and
    the memberships (V, C) mixed by the same factor (None when not asked for)."""
    k = np.maximum(np.asarray(k, dtype=np.float64), 1e-9)
    h = np.clip(0.5 + 0.5 * (b - a) / k, 0.0, 1.0)  # how much of a
    d = b + (a - b) * h - k * h * (1.0 - h)
    return d, (None if ma is None else ma * h[:, None] + mb * (1.0 - h)[:, None])


def body_distance(points: np.ndarray) -> np.ndarray:
    """Signed distance (P,) of ``points`` (P, 3) to the body surface, negative inside."""
    return body_field(points, memberships=False)[0]


def body_field(points: np.ndarray, memberships: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
    """Signed distance (P,) of ``points`` (P, 3) to the body surface (negative inside) and each
    point's membership (P, 6) of :data:`BODY_COMPONENTS` (rows sum to 1; None unless asked for)."""
    n, y = len(points), points[:, 1]
    eye = np.eye(len(BODY_COMPONENTS))
    one = (lambda c: np.broadcast_to(eye[c], (n, len(BODY_COMPONENTS)))) if memberships else (lambda c: None)
    torso, m = _ellipsoid_distance(points, *TORSO_ELLIPSOIDS[0]), one(0)
    for center, radii in TORSO_ELLIPSOIDS[1:]:
        torso, m = _smooth_min(torso, m, _ellipsoid_distance(points, center, radii), one(0), TORSO_BLEND)
    d, m = _smooth_min(torso, m, _chain_distance(points, NECK_CHAIN), one(1), 0.03)
    legs = [_chain_distance(points, LEG_CHAIN, mirror) for mirror in (False, True)]
    left_leg = legs[0] <= legs[1]
    d, m = _smooth_min(d, m, np.minimum(*legs), np.where(left_leg[:, None], one(4), one(5)) if memberships else None,
                       0.05 * _smoothstep(0.80, 0.90, y))
    for c, mirror in ((2, False), (3, True)):
        d, m = _smooth_min(d, m, _chain_distance(points, ARM_CHAIN, mirror), one(c), 0.06 * _smoothstep(1.34, 1.39, y))
    return d, m


def _body_bones() -> list[dict[str, Gate | None]]:
    """The joints that move each of :data:`BODY_COMPONENTS`, with gates as in :func:`skin_weights`."""
    below_hip_joint: Gate = lambda p: _smoothstep(0.95, 0.86, p[:, 1])
    off_centre: Gate = lambda p: _smoothstep(0.04, 0.12, np.abs(p[:, 0]))
    side = lambda sign: (lambda p: _smoothstep(-0.01, 0.03, sign * p[:, 0]))
    torso: dict[str, Gate | None] = {
        "hips": None, "spine": None, "chest": None,
        "left_shoulder": lambda p: off_centre(p) * side(1)(p), "right_shoulder": lambda p: off_centre(p) * side(-1)(p),
        "left_thigh": lambda p: below_hip_joint(p) * side(1)(p), "right_thigh": lambda p: below_hip_joint(p) * side(-1)(p),
    }
    neck: dict[str, Gate | None] = {"chest": None, "neck": None, "head": None}
    arm = lambda s: {f"{s}_shoulder": None, f"{s}_upper_arm": None, f"{s}_forearm": None, f"{s}_hand": None}
    leg = lambda s: {"hips": lambda p: _smoothstep(0.9, 1.0, p[:, 1]), f"{s}_thigh": None, f"{s}_shin": None,
                     f"{s}_foot": None}
    return [torso, neck, arm("left"), arm("right"), leg("left"), leg("right")]


def _dense_weights(points: np.ndarray, bones: dict[str, Gate | None]) -> np.ndarray:
    """(V, J) weights ``gate(p) / max(d, 5 mm) ** POWER`` over the allowed bones, rows summing to 1."""
    heads, tails = _bone_segments()
    idx = np.array([_INDEX[n] for n in bones])
    raw = 1.0 / np.maximum(_point_segment_distance(points, heads[idx], tails[idx]), 0.005) ** POWER
    for k, gate in enumerate(bones.values()):
        if gate is not None:
            raw[:, k] *= gate(points)
    dense = np.zeros((len(points), len(JOINTS)))
    dense[:, idx] = raw / np.maximum(raw.sum(axis=1, keepdims=True), 1e-300)
    return dense


def _top_influences(dense: np.ndarray, influences: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """The ``influences`` largest of (V, J) weights, normalised; ties ranked by joint index on a
    2^-20 grid (reproducible bytes), unused slots joint 0 weight 0."""
    rank = np.round(dense / dense.sum(axis=1, keepdims=True) * 2.0**20)
    joint = np.broadcast_to(np.arange(dense.shape[1]), dense.shape)
    order = np.lexsort((joint, -rank), axis=1)[:, :influences]
    top = np.take_along_axis(dense, order, axis=1)
    top = top / top.sum(axis=1, keepdims=True)
    joints = np.where(top > 0, order, 0)
    return joints.astype(np.uint32), top.astype(np.float32)


@lru_cache(maxsize=1)
def _body_mesh() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Positions, normals, triangles, joints, weights and each triangle's material index of the body."""
    from .isosurface import gradient, mesh_isosurface

    distance = body_distance
    half = 30.5 * BODY_CELL  # a grid symmetric about x = 0 (no sample on the plane), so is the mesh
    positions, triangles = mesh_isosurface(distance, (-half, 0.03, -0.174), (half, 1.70, 0.174), BODY_CELL)
    positions, triangles = _cut_at_height(positions, triangles, BELT)  # a straight belt line
    positions, triangles = _cut_at_height(positions, triangles, COLLAR)  # and collar
    positions = positions.astype(np.float32).astype(np.float64)  # weights and normals from the stored values
    normals = gradient(distance, positions)
    normals /= np.linalg.norm(normals, axis=1, keepdims=True)
    _, membership = body_field(positions)
    dense = sum(membership[:, c:c + 1] * _dense_weights(positions, bones) for c, bones in enumerate(_body_bones()))
    joints, weights = _top_influences(dense)
    centre = positions[triangles].mean(axis=1)
    owner = np.argmax(body_field(centre)[1], axis=1)
    names = list(MATERIALS)
    # The neck is skin above the collar, the arms are sleeves; torso and legs are trousers below the
    # belt, shirt above.
    trousers = (owner != 2) & (owner != 3) & (centre[:, 1] < BELT)
    skin = (owner <= 1) & (centre[:, 1] > COLLAR)
    material = np.where(skin, names.index("skin"), np.where(trousers, names.index("trousers"), names.index("shirt")))
    return positions, normals, triangles, joints, weights, material


def _cut_at_height(positions: np.ndarray, triangles: np.ndarray, height: float) -> tuple[np.ndarray, np.ndarray]:
    """Split the triangles that cross the plane y = ``height`` along it (one new vertex per cut edge,
    shared by the triangles on both sides), so that no triangle lies on both sides. Vertices closer
    to the plane than a sixth of a cell are first moved to that distance, so no sliver is made."""
    positions = positions.copy()
    gap = BODY_CELL / 6.0
    close = np.abs(positions[:, 1] - height) < gap
    positions[close, 1] = height + np.where(positions[close, 1] >= height, gap, -gap)
    above = positions[:, 1] >= height
    side = above[triangles]
    mixed = side.any(axis=1) & ~side.all(axis=1)
    # Rotate each mixed triangle so that corner 0 is the one alone on its side (orientation kept).
    lone = np.where(side.sum(axis=1) == 1, np.argmax(side, axis=1), np.argmin(side, axis=1))[mixed]
    tri = triangles[mixed]
    tri = np.stack([tri[np.arange(len(tri)), (lone + k) % 3] for k in range(3)], axis=1)
    edges = np.sort(np.concatenate([tri[:, [0, 1]], tri[:, [0, 2]]]), axis=1)
    unique, inverse = np.unique(edges, axis=0, return_inverse=True)
    a, b = positions[unique[:, 0]], positions[unique[:, 1]]
    t = (height - a[:, 1]) / (b[:, 1] - a[:, 1])
    new = len(positions) + inverse.reshape(2, -1)  # the cut points on edges 0-1 and 0-2
    p01, p02 = new[0], new[1]
    cut = np.concatenate([np.stack([tri[:, 0], p01, p02], axis=1),
                          np.stack([p01, tri[:, 1], tri[:, 2]], axis=1),
                          np.stack([p01, tri[:, 2], p02], axis=1)])
    return np.concatenate([positions, a + t[:, None] * (b - a)]), np.concatenate([triangles[~mixed], cut])


def _body_surface() -> list[_Part]:
    """The body (torso, neck, arms, legs) as one part per material, cut along triangle edges: the
    cut's vertices are copied with the same position, normal and weights, so the surface stays whole."""
    positions, normals, triangles, joints, weights, material = _body_mesh()
    parts = []
    for m, name in enumerate(MATERIALS):
        tris = triangles[material == m]
        if not len(tris):
            continue
        used, local = np.unique(tris, return_inverse=True)
        parts.append(_Part(positions[used], local.reshape(-1, 3).astype(np.int64), name, {},
                           normals=normals[used], influences=(joints[used], weights[used])))
    return parts


def _body_parts() -> list[_Part]:
    """Every surface of the figure, left side built once and mirrored (positions are bind pose)."""
    parts: list[_Part] = []

    def add(geometry: tuple[np.ndarray, np.ndarray], material: str, bones: dict[str, Gate | None]) -> None:
        # Rounded to float32 here, so that normals and weights are computed from exactly the stored
        # positions: then ulp-level differences of sin/cos between machines almost never reach the
        # file's bytes (the committed three.js truth is tied to them by hash).
        positions = geometry[0].astype(np.float32).astype(np.float64)
        parts.append(_Part(positions, geometry[1], material, bones))

    # Torso, neck, arms and legs: one smooth surface (see _body_surface), split by material.
    parts.extend(_body_surface())

    # Head: skull, nose, ears, hair cap; all rigid on the head joint.
    head = {"head": None}
    add(_ellipsoid((0.0, 1.70, 0.015), (0.078, 0.105, 0.098)), "skin", head)
    add(_ellipsoid((0.0, 1.64, 0.045), (0.058, 0.045, 0.065)), "skin", head)  # jaw and chin
    add(_tube([(0.0, 1.695, 0.1), (0.0, 1.678, 0.122)], [(0.012, 0.011), (0.009, 0.007)], (1, 0, 0), cap_rings=3), "skin", head)
    add(_ellipsoid((0.0, 1.728, -0.02), (0.084, 0.092, 0.1)), "hair", head)
    for sign in (1.0, -1.0):
        add(_ellipsoid((sign * 0.078, 1.695, 0.005), (0.012, 0.025, 0.018), rings=8), "skin", head)
        add(_ellipsoid((sign * 0.03, 1.715, 0.099), (0.011, 0.009, 0.006), rings=8), "hair", head)  # eyes

    for sign, prefix in ((1.0, "left_"), (-1.0, "right_")):
        flip = (lambda a: np.asarray(a, dtype=np.float64)) if sign > 0 else (lambda a: _mirror_x(np.asarray(a, dtype=np.float64)))
        b = lambda name: prefix + name

        # Hand: a flat mitten (wide along z, thin along x) and a thumb.
        add(_tube(flip([(0.281, 0.88, 0.0), (0.29, 0.80, 0.01), (0.296, 0.73, 0.02)]), [(0.04, 0.017), (0.045, 0.016), (0.035, 0.012)], (0, 0, 1)),
            "skin", {b("forearm"): None, b("hand"): None})
        add(_tube(flip([(0.275, 0.86, 0.03), (0.27, 0.80, 0.052)]), [(0.012, 0.012), (0.01, 0.01)], (0, 0, 1), cap_rings=4),
            "skin", {b("hand"): None})

        # Shoe: heel to toe along +z, the sole flattened onto y = 0.
        shoe_path = flip([(0.105, 0.05, -0.045), (0.105, 0.05, 0.04), (0.105, 0.04, 0.13), (0.105, 0.035, 0.175)])
        shoe_radii = [(0.045, 0.055), (0.05, 0.052), (0.052, 0.04), (0.042, 0.03)]
        positions, triangles = _tube(shoe_path, shoe_radii, (1, 0, 0), cap_rings=5)
        positions[:, 1] = np.maximum(positions[:, 1], 0.0)
        add((positions, triangles), "shoes", {b("shin"): None, b("foot"): None, b("toe"): None})
    return parts


def _vertex_normals(positions: np.ndarray, triangles: np.ndarray) -> np.ndarray:
    """Area-weighted averages of the adjacent face normals, unit length."""
    a, b, c = (positions[triangles[:, i]] for i in range(3))
    face = np.cross(b - a, c - a)  # length = 2 * area, so the sum is area-weighted
    normals = np.zeros_like(positions)
    for i in range(3):
        np.add.at(normals, triangles[:, i], face)
    return normals / np.linalg.norm(normals, axis=1, keepdims=True)


def _point_segment_distance(points: np.ndarray, heads: np.ndarray, tails: np.ndarray) -> np.ndarray:
    """(V, B) distances of points (V, 3) to segments heads[b]..tails[b] (B, 3)."""
    d = tails - heads
    rel = points[:, None, :] - heads[None, :, :]
    u = np.clip(np.einsum("vbc,bc->vb", rel, d) / np.einsum("bc,bc->b", d, d), 0.0, 1.0)
    closest = heads[None, :, :] + u[..., None] * d[None, :, :]
    return np.linalg.norm(points[:, None, :] - closest, axis=2)


def skin_weights(points: np.ndarray, bones: dict[str, Gate | None], influences: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """Smooth skin weights of bind-pose ``points`` (V, 3) over the allowed ``bones``.

    Each allowed bone gets ``gate(p) / max(d, 5 mm) ** POWER`` where d is the distance to its
    segment; the ``influences`` largest are kept and normalised. Returns joints (V, influences)
    uint32 (rig joint indices; unused slots 0) and weights (V, influences) float32 summing to 1.
    """
    heads, tails = _bone_segments()
    names = list(bones)
    idx = np.array([_INDEX[n] for n in names])
    dist = _point_segment_distance(points, heads[idx], tails[idx])
    raw = 1.0 / np.maximum(dist, 0.005) ** POWER
    for k, name in enumerate(names):
        gate = bones[name]
        if gate is not None:
            raw[:, k] *= gate(points)
    # Rank by weight rounded to 2^-20, ties broken by joint: near-ties (symmetric points) then rank
    # the same way on every machine, which keeps the written bytes reproducible.
    rank = np.round(raw / raw.sum(axis=1, keepdims=True) * 2.0**20)
    order = np.lexsort((np.broadcast_to(idx, raw.shape), -rank), axis=1)[:, :influences]
    top = np.take_along_axis(raw, order, axis=1)
    top /= top.sum(axis=1, keepdims=True)
    joints = idx[order]
    if top.shape[1] < influences:
        pad = influences - top.shape[1]
        top = np.concatenate([top, np.zeros((len(top), pad))], axis=1)
        joints = np.concatenate([joints, np.zeros((len(joints), pad), np.int64)], axis=1)
    joints = np.where(top > 0, joints, 0)
    return joints.astype(np.uint32), top.astype(np.float32)


#: Material name -> base colour (linear RGBA).
MATERIALS: dict[str, tuple[float, float, float, float]] = {
    "skin": (0.80, 0.55, 0.42, 1.0),
    "shirt": (0.12, 0.32, 0.62, 1.0),
    "trousers": (0.16, 0.17, 0.22, 1.0),
    "shoes": (0.30, 0.16, 0.08, 1.0),
    "hair": (0.09, 0.06, 0.04, 1.0),
}


def _build_primitives() -> list[Primitive]:
    """One primitive per material, parts concatenated in :func:`_body_parts` order."""
    parts = _body_parts()
    primitives = []
    for m, material in enumerate(MATERIALS):
        positions, normals, triangles, joints, weights = [], [], [], [], []
        base = 0
        for part in (p for p in parts if p.material == material):
            positions.append(part.positions)
            normals.append(part.normals if part.normals is not None else _vertex_normals(part.positions, part.triangles))
            triangles.append(part.triangles + base)
            j, w = part.influences if part.influences is not None else skin_weights(part.positions, part.bones)
            joints.append(j)
            weights.append(w)
            base += len(part.positions)
        primitives.append(Primitive(
            positions=np.concatenate(positions).astype(np.float32),
            normals=np.concatenate(normals).astype(np.float32),
            indices=np.concatenate(triangles).reshape(-1).astype(np.uint32),
            joints=np.concatenate(joints),
            weights=np.concatenate(weights),
            material=m,
        ))
    return primitives


# ---------------------------------------------------------------------------------------------
# clips


@dataclass
class Keyframe:
    """One whole-body pose held for ``duration`` seconds before the next key (seed 004).

    ``rotations``: joint name -> Euler angles in degrees (see :func:`quat_from_euler`); joints not
    named keep their rest rotation. ``hips``: offset of the hips from their rest position, metres,
    added after the automatic ground contact (see :func:`_ground_offset`).
    """

    duration: float
    rotations: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    hips: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def mirrored(self) -> "Keyframe":
        """The same pose reflected through the x = 0 plane: left and right swapped, x offsets and
        the y and z rotation angles negated."""
        swap = {"left_": "right_", "right_": "left_"}
        rotations = {}
        for name, (x, y, z) in self.rotations.items():
            for a, b in swap.items():
                if name.startswith(a):
                    name = b + name[len(a):]
                    break
            rotations[name] = (x, -y, -z)
        return Keyframe(self.duration, rotations, (-self.hips[0], self.hips[1], self.hips[2]))


@lru_cache(maxsize=1)
def _shoe_skin() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bind positions (V, 3), joints (V, 4) and weights (V, 4) of the shoe vertices: what touches
    the ground."""
    shoes = [p for p in _body_parts() if p.material == "shoes"]
    positions = np.concatenate([p.positions for p in shoes])
    influences = [skin_weights(p.positions, p.bones) for p in shoes]
    return positions, np.concatenate([j for j, _ in influences]), np.concatenate([w for _, w in influences])


def _pose_rotations(key: Keyframe) -> np.ndarray:
    """(J, 4) local rotations of a key: identity for joints it does not name."""
    rotations = np.tile([0.0, 0.0, 0.0, 1.0], (len(JOINTS), 1))
    for name, angles in key.rotations.items():
        rotations[_INDEX[name]] = quat_from_euler(*angles)
    return rotations


def _ground_offset(rotations: np.ndarray) -> float:
    """How far to move the hips up so that the lowest shoe vertex of the pose (linear blend skinned,
    as a player will show it) touches y = 0."""
    world = _world_transforms(rotations, np.zeros(3))
    palette = world.copy()
    palette[:, :3, 3] -= np.einsum("jab,jb->ja", world[:, :3, :3], _BIND)  # world @ inverse bind
    positions, joints, weights = _shoe_skin()
    heights = np.einsum("vk,vkc,vc->v", weights, palette[joints, 1, :3], positions) + np.einsum("vk,vk->v", weights, palette[joints, 1, 3])
    return -float(heights.min())


def _cubic_tangents(times: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Catmull-Rom slopes (dv/dt) of a looping key sequence whose last key repeats the first, so the
    curve is C1 across the loop point."""
    k = len(times)
    slopes = np.empty_like(values)
    for i in range(k):
        prev_i, next_i = i - 1, i + 1
        t_prev = times[i - 1] if i > 0 else times[0] - (times[-1] - times[-2])
        t_next = times[i + 1] if i < k - 1 else times[-1] + (times[1] - times[0])
        v_prev = values[prev_i] if i > 0 else values[-2]
        v_next = values[next_i] if i < k - 1 else values[1]
        slopes[i] = (v_next - v_prev) / (t_next - t_prev)
    return slopes


def _animation(name: str, keys: Sequence[Keyframe], interpolation: str = "LINEAR", ground_steps: int = 4) -> Animation:
    """Keyframes -> one rotation channel per joint that any key names, one hips translation channel.

    Key i sits at ``sum(duration[:i])``; the last key's duration is ignored (it ends the clip).
    Quaternions are kept in one hemisphere along each track (needed for CUBICSPLINE, harmless for
    slerp). Channel nodes are file node indices, which equal :data:`JOINTS` indices.

    Ground contact: for LINEAR clips the hips height is solved (:func:`_ground_offset`) at
    ``ground_steps`` evenly spaced times in every key interval, on the slerped pose a player shows
    there, so the hips track has more keys than the rotation tracks and the feet neither sink nor
    float between keys. CUBICSPLINE clips solve it at their keys only.
    """
    times = np.concatenate([[0.0], np.cumsum([k.duration for k in keys[:-1]])])
    rotations = np.stack([_pose_rotations(k) for k in keys])  # (K, J, 4)
    for i in range(1, len(keys)):  # one hemisphere per joint track
        flip = np.sum(rotations[i] * rotations[i - 1], axis=1) < 0
        rotations[i, flip] *= -1.0
    offsets = np.array([k.hips for k in keys], dtype=np.float64)

    if interpolation == "LINEAR":
        steps = np.arange(ground_steps) / ground_steps
        hips_times = np.append((times[:-1, None] + np.diff(times)[:, None] * steps[None, :]).reshape(-1), times[-1])
        poses, hips_offsets = [], []
        for t in hips_times:
            i = min(int(np.searchsorted(times, t, side="right")) - 1, len(times) - 2)
            u = float((t - times[i]) / (times[i + 1] - times[i]))
            poses.append(quat_slerp(rotations[i], rotations[i + 1], u))
            hips_offsets.append((1.0 - u) * offsets[i] + u * offsets[i + 1])
    else:
        hips_times, poses, hips_offsets = times, list(rotations), list(offsets)
    hips = np.array([_BIND[_INDEX["hips"]] + np.array([0.0, _ground_offset(q), 0.0]) + off
                     for q, off in zip(poses, hips_offsets)])

    animated = sorted({_INDEX[n] for k in keys for n in k.rotations})
    tracks = [(_INDEX["hips"], "translation", hips_times, hips)]
    tracks += [(j, "rotation", times, rotations[:, j]) for j in animated]
    channels = []
    for node, path, key_times, values in tracks:
        if interpolation == "CUBICSPLINE":
            slopes = _cubic_tangents(key_times, values)
            values = np.stack([slopes, values, slopes], axis=1).reshape(-1, values.shape[1])
        channels.append(Channel(node, path, interpolation, key_times.astype(np.float32), values.astype(np.float32)))
    return Animation(name, channels)


def _idle() -> list[Keyframe]:
    """4 s of breathing (chest and shoulders rise and fall twice), a slow weight shift from one foot
    to the other, and small head movements. CUBICSPLINE."""
    arms = {"left_upper_arm": (2.0, 0.0, 3.0), "right_upper_arm": (2.0, 0.0, -3.0),
            "left_forearm": (-10.0, 0.0, 0.0), "right_forearm": (-10.0, 0.0, 0.0)}

    def pose(duration: float, breath: float, shift: float, head: tuple[float, float, float]) -> Keyframe:
        # Shifting the hips sideways by `shift` metres: the legs lean the other way so the feet stay.
        lean = -np.degrees(np.arcsin(shift / 0.84))
        roll = -40.0 * shift  # the pelvis drops a little on the unloaded side
        rotations = dict(arms)
        rotations.update({
            "hips": (0.0, 0.0, roll),
            "left_thigh": (0.0, 0.0, lean - roll), "right_thigh": (0.0, 0.0, lean - roll),
            "left_foot": (0.0, 0.0, -lean), "right_foot": (0.0, 0.0, -lean),
            "spine": (-0.8 * breath, 0.0, -roll * 1.2),
            "chest": (-1.6 * breath, 0.0, 0.0),
            "left_shoulder": (0.0, 0.0, 2.5 * breath), "right_shoulder": (0.0, 0.0, -2.5 * breath),
            "head": head,
        })
        return Keyframe(duration, rotations, (shift, 0.0, 0.0))

    return [
        pose(1.0, 0.0, 0.0, (0.0, 0.0, 0.0)),
        pose(1.0, 1.0, 0.015, (-2.0, 6.0, 1.0)),
        pose(1.0, 0.0, 0.0, (2.0, 0.0, 0.0)),
        pose(1.0, 1.0, -0.015, (-1.0, -5.0, -1.0)),
        pose(0.0, 0.0, 0.0, (0.0, 0.0, 0.0)),
    ]


def _gait(half: Sequence[Keyframe]) -> list[Keyframe]:
    """A full cycle from the half cycle that leads with the left leg: the mirrored half follows, then
    the first key again so the cycle loops. The thighs take the opposite of the pelvis roll (hips z),
    so the pelvis can tilt without throwing the feet sideways."""
    keys = []
    for key in half:
        roll = key.rotations.get("hips", (0.0, 0.0, 0.0))[2]
        rotations = dict(key.rotations)
        for thigh in ("left_thigh", "right_thigh"):
            x, y, z = rotations.get(thigh, (0.0, 0.0, 0.0))
            rotations[thigh] = (x, y, z - roll)
        keys.append(Keyframe(key.duration, rotations, key.hips))
    return keys + [k.mirrored() for k in keys] + [keys[0]]


def _walk() -> list[Keyframe]:
    """A 1.12 s walk cycle in place: contact, down, passing, up for each leg."""
    d = 1.12 / 8
    body = {"spine": (4.0, 0.0, 0.0), "neck": (-2.0, 0.0, 0.0)}
    contact = Keyframe(d, {**body,
        "hips": (0.0, -5.0, 0.0), "chest": (0.0, 9.0, 0.0), "head": (-2.0, -4.0, 0.0),
        "left_thigh": (-24.0, 0.0, 0.0), "left_shin": (4.0, 0.0, 0.0), "left_foot": (-2.0, 0.0, 0.0),
        "right_thigh": (14.0, 0.0, 0.0), "right_shin": (14.0, 0.0, 0.0), "right_foot": (14.0, 0.0, 0.0), "right_toe": (-28.0, 0.0, 0.0),
        "left_upper_arm": (18.0, 0.0, 4.0), "left_forearm": (-8.0, 0.0, 0.0),
        "right_upper_arm": (-20.0, 0.0, -4.0), "right_forearm": (-28.0, 0.0, 0.0),
    })
    down = Keyframe(d, {**body,
        "hips": (0.0, -4.0, 3.0), "chest": (0.0, 7.0, -2.0), "head": (-1.0, -3.0, -1.0),
        "left_thigh": (-19.0, 0.0, 0.0), "left_shin": (18.0, 0.0, 0.0), "left_foot": (-2.0, 0.0, 0.0),
        "right_thigh": (18.0, 0.0, 0.0), "right_shin": (34.0, 0.0, 0.0), "right_foot": (18.0, 0.0, 0.0), "right_toe": (-12.0, 0.0, 0.0),
        "left_upper_arm": (16.0, 0.0, 4.0), "left_forearm": (-10.0, 0.0, 0.0),
        "right_upper_arm": (-18.0, 0.0, -4.0), "right_forearm": (-30.0, 0.0, 0.0),
    })
    passing = Keyframe(d, {**body,
        "hips": (0.0, 0.0, 2.0), "chest": (0.0, 0.0, -1.0), "head": (0.0, 0.0, -1.0),
        "left_thigh": (-3.0, 0.0, 0.0), "left_shin": (6.0, 0.0, 0.0), "left_foot": (-2.0, 0.0, 0.0),
        "right_thigh": (-14.0, 0.0, 0.0), "right_shin": (58.0, 0.0, 0.0), "right_foot": (-6.0, 0.0, 0.0), "right_toe": (0.0, 0.0, 0.0),
        "left_upper_arm": (0.0, 0.0, 4.0), "left_forearm": (-14.0, 0.0, 0.0),
        "right_upper_arm": (-2.0, 0.0, -4.0), "right_forearm": (-16.0, 0.0, 0.0),
    })
    up = Keyframe(d, {**body,
        "hips": (0.0, 3.0, 1.0), "chest": (0.0, -5.0, 0.0), "head": (-1.0, 2.0, 0.0),
        "left_thigh": (12.0, 0.0, 0.0), "left_shin": (4.0, 0.0, 0.0), "left_foot": (6.0, 0.0, 0.0), "left_toe": (-10.0, 0.0, 0.0),
        "right_thigh": (-27.0, 0.0, 0.0), "right_shin": (26.0, 0.0, 0.0), "right_foot": (-12.0, 0.0, 0.0),
        "left_upper_arm": (-14.0, 0.0, 4.0), "left_forearm": (-24.0, 0.0, 0.0),
        "right_upper_arm": (12.0, 0.0, -4.0), "right_forearm": (-10.0, 0.0, 0.0),
    })
    return _gait([contact, down, passing, up])


def _run() -> list[Keyframe]:
    """A 0.68 s run cycle in place: contact, down (loading), push-off, flight for each leg; the torso
    leans forward and the elbows are bent at about 90 degrees."""
    d = 0.68 / 8
    body = {"spine": (10.0, 0.0, 0.0), "chest": (4.0, 0.0, 0.0), "neck": (-6.0, 0.0, 0.0)}
    arms = lambda left, right, lf, rf: {
        "left_upper_arm": (left, 0.0, 8.0), "right_upper_arm": (right, 0.0, -8.0),
        "left_forearm": (lf, 0.0, 0.0), "right_forearm": (rf, 0.0, 0.0),
        "left_hand": (0.0, 0.0, -10.0), "right_hand": (0.0, 0.0, 10.0),
    }
    contact = Keyframe(d, {**body, **arms(30.0, -38.0, -70.0, -95.0),
        "hips": (0.0, -8.0, 0.0), "chest": (4.0, 14.0, 0.0), "head": (-8.0, -6.0, 0.0),
        "left_thigh": (-36.0, 0.0, 0.0), "left_shin": (14.0, 0.0, 0.0), "left_foot": (12.0, 0.0, 0.0),
        "right_thigh": (16.0, 0.0, 0.0), "right_shin": (62.0, 0.0, 0.0), "right_foot": (22.0, 0.0, 0.0), "right_toe": (-10.0, 0.0, 0.0),
    })
    down = Keyframe(d, {**body, **arms(22.0, -26.0, -75.0, -90.0),
        "hips": (0.0, -4.0, 4.0), "chest": (4.0, 8.0, -2.0), "head": (-8.0, -4.0, -1.0),
        "left_thigh": (-22.0, 0.0, 0.0), "left_shin": (38.0, 0.0, 0.0), "left_foot": (-14.0, 0.0, 0.0),
        "right_thigh": (-4.0, 0.0, 0.0), "right_shin": (100.0, 0.0, 0.0), "right_foot": (18.0, 0.0, 0.0),
    })
    push = Keyframe(d, {**body, **arms(-24.0, 26.0, -90.0, -75.0),
        "hips": (0.0, 4.0, 2.0), "chest": (4.0, -8.0, 0.0), "head": (-8.0, 4.0, 0.0),
        "left_thigh": (18.0, 0.0, 0.0), "left_shin": (10.0, 0.0, 0.0), "left_foot": (24.0, 0.0, 0.0), "left_toe": (-45.0, 0.0, 0.0),
        "right_thigh": (-48.0, 0.0, 0.0), "right_shin": (80.0, 0.0, 0.0), "right_foot": (-4.0, 0.0, 0.0),
    }, hips=(0.0, 0.01, 0.0))
    flight = Keyframe(d, {**body, **arms(-34.0, 34.0, -95.0, -70.0),
        "hips": (0.0, 7.0, 0.0), "chest": (4.0, -12.0, 0.0), "head": (-8.0, 6.0, 0.0),
        "left_thigh": (24.0, 0.0, 0.0), "left_shin": (70.0, 0.0, 0.0), "left_foot": (18.0, 0.0, 0.0),
        "right_thigh": (-46.0, 0.0, 0.0), "right_shin": (34.0, 0.0, 0.0), "right_foot": (-8.0, 0.0, 0.0),
    }, hips=(0.0, 0.05, 0.0))
    return _gait([contact, down, push, flight])


def _wave() -> list[Keyframe]:
    """2.6 s: the right arm rises to the side with the elbow bent and the palm forward, the forearm
    waves three times, the arm comes back down. The head tilts toward the hand."""
    rest = {"left_upper_arm": (2.0, 0.0, 3.0), "right_upper_arm": (2.0, 0.0, -3.0),
            "left_forearm": (-10.0, 0.0, 0.0), "right_forearm": (-10.0, 0.0, 0.0)}

    def raised(duration: float, swing: float) -> Keyframe:
        return Keyframe(duration, {**rest,
            "spine": (0.0, 0.0, 3.0), "chest": (0.0, -4.0, 2.0), "head": (-3.0, -12.0, -6.0),
            "right_shoulder": (0.0, 0.0, -14.0),
            "right_upper_arm": (-12.0, 0.0, -92.0),
            "right_forearm": (0.0, -90.0, -62.0 + swing),
            "right_hand": (0.0, 0.0, 0.4 * swing),
        })

    return [
        Keyframe(0.6, dict(rest)),
        raised(0.3, 0.0),
        raised(0.3, 22.0),
        raised(0.3, -18.0),
        raised(0.3, 22.0),
        raised(0.5, -18.0),
        raised(0.3, 0.0),
        Keyframe(0.0, dict(rest)),
    ]


#: Clip name -> (keyframes, interpolation).
CLIPS: dict[str, tuple[Callable[[], list[Keyframe]], str]] = {
    "idle": (_idle, "CUBICSPLINE"),
    "walk": (_walk, "LINEAR"),
    "run": (_run, "LINEAR"),
    "wave": (_wave, "LINEAR"),
}


# ---------------------------------------------------------------------------------------------
# the document


def build_demo_document() -> Document:
    """The demo character as a :class:`~skeletal.document.Document` (a new one on every call).

    File nodes: 0..21 the joints in :data:`JOINTS` order (``root`` first), 22 the skinned mesh node
    ``body`` (a scene root with no transform, as the glTF spec wants for skinned meshes). One skin
    over all joints, skeleton ``root``; inverse bind matrices from the bind pose; clips ``idle``,
    ``walk``, ``run``, ``wave``.
    """
    nodes = []
    for j, (name, _parent, position) in enumerate(JOINTS):
        p = _PARENT[j]
        translation = np.asarray(position, dtype=np.float64) - (_BIND[p] if p >= 0 else 0.0)
        children = [int(c) for c in np.flatnonzero(_PARENT == j)]
        nodes.append(Node(name=name, children=children, translation=translation, parent=int(p)))
    body = len(nodes)
    nodes.append(Node(name="body", mesh=0, skin=0))

    inverse_bind = np.tile(np.eye(4), (len(JOINTS), 1, 1))
    inverse_bind[:, :3, 3] = -_BIND  # rest rotations are identity: the bind world is a translation
    skin = Skin(name="body_skin", joints=np.arange(len(JOINTS), dtype=np.int64), inverse_bind=inverse_bind, skeleton=0)
    mesh = Mesh(name="body", primitives=_build_primitives())
    # Cloth and skin: dielectric and fairly rough (glTF's defaults would make the figure look metallic).
    materials = [
        Material(name=name, base_color_factor=np.array(color), metallic_factor=0.0, roughness_factor=0.8)
        for name, color in MATERIALS.items()
    ]
    animations = [_animation(name, make(), interpolation) for name, (make, interpolation) in CLIPS.items()]
    from skeletal.version import __version__

    return Document(
        path="<skeletal demo>",
        nodes=nodes,
        meshes=[mesh],
        skins=[skin],
        animations=animations,
        scenes=[[0, body]],
        scene=0,
        materials=materials,
        asset_info={"version": "2.0", "generator": f"skeletal {__version__}"},
    )


@lru_cache(maxsize=1)
def demo_asset() -> Asset:
    """The demo character as an :class:`~skeletal.asset.Asset` (built once, then shared: treat it as
    read-only)."""
    return Asset(build_demo_document())


def locomotion_asset() -> Asset:
    """The demo character with its four clips plus a locomotion set that moves over the ground (walks
    and runs at several speeds, turns, starts and stops; :mod:`skeletal.demo_locomotion`), for motion
    matching and root motion without any download. Built once, then shared: treat it as read-only.

    >>> len(locomotion_asset().clips) > 10                  # doctest: +SKIP
    True
    """
    from skeletal.demo.locomotion import with_locomotion

    return with_locomotion(demo_asset())
