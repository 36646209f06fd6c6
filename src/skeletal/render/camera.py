"""The camera: a spec string, automatic framing from the clip's animated bounds, view/projection.

Camera spec syntax (``--camera``): comma-separated ``key=value`` pairs, any subset, any order::

    yaw=30,pitch=15,distance=3
    yaw=-90,fov=25,zoom=1.3
    target=0:1:0,distance=4

=========  ========  =====================================================================
key        default   meaning
=========  ========  =====================================================================
yaw        30        degrees around the vertical (+Y) axis, from in front of the character:
                     0 = facing it, 90 = on its left (see :func:`facing_yaw`)
pitch      12        degrees above the horizontal (negative: from below)
distance   auto      from the target, in model units; auto fits the animated bounds
fov        35        vertical field of view, degrees
zoom       1         divides the automatic distance (2 = twice as close)
target     auto      point looked at, ``x:y:z``; auto = centre of the animated bounds
follow     off       ``follow`` (or ``follow=1``): the camera moves with the character's root
                     (its hips), framed on the character alone, instead of framing the path
=========  ========  =====================================================================

A clip that travels (its root moves further than 3/4 of the character's height, a retargeted mocap
walk) is framed whole and looked at from the side of its path (:func:`path_facing`): seen from in
front, a character walking towards the camera would start small in the distance and end large.

The character's front is estimated from how the clip drawn poses it, else from its bind pose
(:func:`facing_yaw`): glTF characters face +Z, but many files turn them (Soldier.glb faces -Z) and a
retargeted clip may turn them again, so yaw=30 means front-3/4 for all of them.

Matrices are row-major numpy (``p_clip = projection @ view @ p``), OpenGL clip space (z in -1..1).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace

import numpy as np

from .errors import RenderError

_KEYS = ("yaw", "pitch", "distance", "fov", "zoom", "target", "follow")


@dataclass(frozen=True)
class CameraSpec:
    """What the user asked for; None = choose automatically."""

    yaw: float = 30.0
    pitch: float = 12.0
    distance: float | None = None
    fov: float = 35.0
    zoom: float = 1.0
    target: tuple[float, float, float] | None = None
    follow: bool = False


def parse_camera(spec: str | CameraSpec | None) -> CameraSpec:
    """A :class:`CameraSpec` from ``"yaw=30,pitch=15,distance=3"`` (see the module docstring)."""
    if spec is None or isinstance(spec, CameraSpec):
        return spec or CameraSpec()
    values: dict[str, object] = {}
    for part in str(spec).split(","):
        part = part.strip()
        if not part or part.lower() == "auto":
            continue
        if part.lower() == "follow":
            values["follow"] = True
            continue
        key, sep, text = part.partition("=")
        key = key.strip().lower()
        if not sep or key not in _KEYS:
            raise RenderError(f"camera spec {spec!r}: {part!r} is not key=value with a key among {', '.join(_KEYS)}")
        try:
            if key == "target":
                xyz = tuple(float(v) for v in text.replace(" ", "").split(":"))
                if len(xyz) != 3:
                    raise ValueError
                values[key] = xyz
            elif key == "follow":
                if text.strip().lower() not in ("0", "1", "on", "off", "true", "false", "yes", "no"):
                    raise ValueError
                values[key] = text.strip().lower() in ("1", "on", "true", "yes")
                continue
            else:
                values[key] = float(text)
        except ValueError:
            want = {"target": "x:y:z", "follow": "1 or 0"}.get(key, "a number")
            raise RenderError(f"camera spec {spec!r}: {key} wants {want}, got {text.strip()!r}") from None
        if key != "target" and not math.isfinite(values[key]):
            raise RenderError(f"camera spec {spec!r}: {key} must be finite")
    if "distance" in values and not values["distance"] > 0:
        raise RenderError(f"camera spec {spec!r}: distance must be positive")
    if "zoom" in values and not values["zoom"] > 0:
        raise RenderError(f"camera spec {spec!r}: zoom must be positive")
    if "fov" in values and not 1.0 <= values["fov"] <= 170.0:
        raise RenderError(f"camera spec {spec!r}: fov must be between 1 and 170 degrees")
    return replace(CameraSpec(), **values)


@dataclass
class Camera:
    """A perspective camera. ``fov`` vertical, degrees; ``aspect`` width / height."""

    eye: np.ndarray
    target: np.ndarray
    fov: float
    aspect: float
    near: float
    far: float
    up: np.ndarray = field(default_factory=lambda: np.array([0.0, 1.0, 0.0]))

    @property
    def view(self) -> np.ndarray:
        return look_at(self.eye, self.target, self.up)

    @property
    def projection(self) -> np.ndarray:
        return perspective(self.fov, self.aspect, self.near, self.far)

    @property
    def view_projection(self) -> np.ndarray:
        return self.projection @ self.view

    def project(self, points: np.ndarray) -> np.ndarray:
        """World points (..., 3) -> normalised device coordinates (..., 3)."""
        p = np.asarray(points, dtype=np.float64)
        h = np.concatenate([p, np.ones(p.shape[:-1] + (1,))], axis=-1) @ self.view_projection.T
        return h[..., :3] / h[..., 3:4]


def look_at(eye, target, up) -> np.ndarray:
    """Row-major view matrix: camera at ``eye`` looking at ``target``, -Z forward in view space.
    (Scalar arithmetic: a viewer asks for it several times a frame, and numpy's small-array calls
    cost ~20x more than the maths.)"""
    ex, ey, ez = (float(v) for v in eye)
    fx, fy, fz = float(target[0]) - ex, float(target[1]) - ey, float(target[2]) - ez
    n = math.sqrt(fx * fx + fy * fy + fz * fz)
    fx, fy, fz = fx / n, fy / n, fz / n
    ux, uy, uz = (float(v) for v in up)
    sx, sy, sz = fy * uz - fz * uy, fz * ux - fx * uz, fx * uy - fy * ux  # forward x up
    n = math.sqrt(sx * sx + sy * sy + sz * sz)
    if n < 1e-9:  # looking straight up or down: forward x +Z
        sx, sy, sz = fy, -fx, 0.0
        n = math.sqrt(sx * sx + sy * sy)
    sx, sy, sz = sx / n, sy / n, sz / n
    vx, vy, vz = sy * fz - sz * fy, sz * fx - sx * fz, sx * fy - sy * fx  # side x forward
    return np.array([[sx, sy, sz, -(sx * ex + sy * ey + sz * ez)],
                     [vx, vy, vz, -(vx * ex + vy * ey + vz * ez)],
                     [-fx, -fy, -fz, fx * ex + fy * ey + fz * ez],
                     [0.0, 0.0, 0.0, 1.0]])


def perspective(fov_deg: float, aspect: float, near: float, far: float) -> np.ndarray:
    """Row-major OpenGL projection matrix (right-handed view space, clip z in -1..1)."""
    f = 1.0 / math.tan(math.radians(fov_deg) / 2.0)
    m = np.zeros((4, 4))
    m[0, 0] = f / aspect
    m[1, 1] = f
    m[2, 2] = (far + near) / (near - far)
    m[2, 3] = 2.0 * far * near / (near - far)
    m[3, 2] = -1.0
    return m


def _direction(yaw_deg: float, pitch_deg: float) -> np.ndarray:
    """Unit vector from the target towards the camera."""
    yaw, pitch = math.radians(yaw_deg), math.radians(pitch_deg)
    return np.array([math.sin(yaw) * math.cos(pitch), math.sin(pitch), math.cos(yaw) * math.cos(pitch)])


def _box_corners(lo, hi) -> np.ndarray:
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    return np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])])


def _fit_distance(corners, target, back, right, up, tan_x, tan_y) -> float:
    """Smallest distance along ``back`` from ``target`` at which every corner is inside the frustum."""
    rel = corners - target
    depth_offset = rel @ back  # corners nearer the camera than the target have positive values
    need_x = np.abs(rel @ right) / tan_x + depth_offset
    need_y = np.abs(rel @ up) / tan_y + depth_offset
    return float(max(need_x.max(), need_y.max()))


def frame(spec: CameraSpec | str | None, lo, hi, aspect: float, fill: float = 0.8, facing: float = 0.0) -> Camera:
    """A camera for ``spec`` that shows the box ``lo``..``hi`` (world units) whole.

    Automatic distance: the box's 8 corners fill ``fill`` of the tighter image dimension; the target
    is then nudged so that the box's projection is centred, and the distance refitted. ``facing``
    (degrees about +Y, 0 = +Z) is where the character looks; ``spec.yaw`` is measured from it.
    """
    spec = parse_camera(spec)
    lo, hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
    if not float(np.linalg.norm(hi - lo)) > 1e-6:  # one node, no mesh: a unit box around the point
        lo, hi = lo - 0.5, hi + 0.5
    size = hi - lo
    radius = max(0.5 * float(np.linalg.norm(size)), 1e-3)
    back = _direction(spec.yaw + facing, spec.pitch)
    right = np.cross([0.0, 1.0, 0.0], back)
    right = right / np.linalg.norm(right) if np.linalg.norm(right) > 1e-9 else np.array([1.0, 0.0, 0.0])
    up = np.cross(back, right)
    tan_y = math.tan(math.radians(spec.fov) / 2.0) * fill
    tan_x = tan_y * aspect
    corners = _box_corners(lo, hi)
    target = np.asarray(spec.target, float) if spec.target is not None else 0.5 * (lo + hi)
    distance = spec.distance
    if distance is None:
        distance = _fit_distance(corners, target, back, right, up, tan_x, tan_y)
        if spec.target is None:
            for _ in range(2):  # centre the projected box, then refit
                rel = corners - target
                depth = distance - rel @ back
                sx = (rel @ right) / (depth * tan_x)
                sy = (rel @ up) / (depth * tan_y)
                shift_x = 0.5 * (sx.max() + sx.min()) * distance * tan_x
                shift_y = 0.5 * (sy.max() + sy.min()) * distance * tan_y
                target = target + right * shift_x + up * shift_y
                distance = _fit_distance(corners, target, back, right, up, tan_x, tan_y)
        distance = max(distance, radius * 0.2) / spec.zoom
    eye = target + back * distance
    near = max(distance - 2.5 * radius, distance * 0.02)
    far = distance + 40.0 * radius
    return Camera(eye=eye, target=target, fov=spec.fov, aspect=aspect, near=near, far=far)


_LEFT = re.compile("left", re.IGNORECASE)
_SIDE_SUFFIX = re.compile(r"(?<=[a-z0-9_.])L(?=$|[_.0-9])")  # FootL, Hand_L, UpperArmL.001


def _right_name(name: str) -> str | None:
    """The name of the mirror joint of a left-side joint (Left->Right, FootL->FootR), or None."""
    if _LEFT.search(name):
        return _LEFT.sub(lambda m: "RIGHT" if m.group(0).isupper() else ("Right" if m.group(0)[0].isupper() else "right"), name)
    if _SIDE_SUFFIX.search(name):
        return _SIDE_SUFFIX.sub("R", name)
    return None


def facing_yaw(asset, clip=None, samples: int = 8) -> float:
    """Degrees about +Y from +Z to where the character faces, from its bind pose, or with ``clip``
    from how the clip poses it (``samples`` times spread over the clip, the left direction summed):
    a retargeted clip may turn the character away from its bind pose's front.

    Left/right joint pairs (``LeftArm``/``RightArm``, ``FootL``/``FootR``) give the character's left
    direction L (summed left-minus-right bind positions, bind pose = inverse of the inverse bind
    matrices); it faces ``L x up``. The answer is snapped to a multiple of 90 degrees when within 15
    of one (files are authored axis-aligned). 0 (+Z, glTF's convention) when there are no pairs.
    A skeleton without skins (BVH) uses its nodes' rest-pose positions instead.
    """
    bind: dict[int, np.ndarray] = {}
    if not asset.skins:
        from ..anim.pose import world_matrices

        rest = world_matrices(asset.rig.parents, asset.rig.rest)[:, :3, 3]
        bind = {i: rest[i] for i in range(len(rest))}
    for skin in asset.skins:
        for joint, inverse_bind in zip(skin.joints, skin.inverse_bind):
            try:
                bind[int(joint)] = np.linalg.inv(inverse_bind)[:3, 3]
            except np.linalg.LinAlgError:
                continue
    index = {name: i for i, name in enumerate(asset.rig.names)}
    left = np.zeros(3)
    for i, name in enumerate(asset.rig.names):
        mirror = _right_name(name) if i in bind else None
        r = index.get(mirror) if mirror else None
        if r is not None and r != i and r in bind:
            left += bind[i] - bind[r]
    if np.hypot(left[0], left[2]) < 1e-9:
        return 0.0
    yaw = math.degrees(math.atan2(-left[2], left[0]))  # forward = left x up = (-L.z, 0, L.x)
    if clip is not None and clip.duration > 0:
        # Whole quarter turns only: a retargeted clip turns the character by 90 or 180 degrees, while
        # a stance that stands a little turned (Soldier.glb's Idle, 43 degrees) keeps the bind front.
        yaw += 90.0 * round(clip_turn(asset, clip, samples, bind) / 90.0)
        yaw = (yaw + 180.0) % 360.0 - 180.0
    snapped = 90.0 * round(yaw / 90.0)
    return snapped if abs(yaw - snapped) <= 15.0 else yaw


def clip_turn(asset, clip, samples: int = 8, bind: dict[int, np.ndarray] | None = None) -> float:
    """Degrees about +Y that ``clip`` turns the character's hips from the bind pose (``bind``: rig index
    -> bind position; default the rest pose), on average over ``samples`` times: the turn of the line
    between the upper legs (found by name as :func:`skeletal.retarget.canonical_names` finds them).
    0 when the rig has no such pair.

    A clip retargeted from a source that faces another way turns the whole character; the camera's
    front (:func:`facing_yaw`) follows it.
    """
    from ..anim.pose import world_matrices
    from ..tools.retarget import canonical_names
    from ..anim.sampling import sample

    names = canonical_names(asset.rig)
    left, right = names.get("left_upper_leg"), names.get("right_upper_leg")
    if left is None or right is None or not clip.duration > 0:
        return 0.0
    rest = world_matrices(asset.rig.parents, asset.rig.rest)[:, :3, 3]
    times = np.linspace(0.0, clip.duration, max(2, samples))
    pose, _ = sample(clip, times, asset.rig.rest, asset.morph_start, asset.rest_morph)
    posed = world_matrices(asset.rig.parents, pose)[:, :, :3, 3]  # (T, N, 3)
    bind = bind or {}
    before = bind.get(left, rest[left]) - bind.get(right, rest[right])
    after = np.sum(posed[:, left] - posed[:, right], axis=0)
    if not (np.all(np.isfinite(after)) and np.hypot(after[0], after[2]) > 1e-9 and np.hypot(before[0], before[2]) > 1e-9):
        return 0.0
    turn = math.degrees(math.atan2(-after[2], after[0]) - math.atan2(-before[2], before[0]))
    return (turn + 180.0) % 360.0 - 180.0


def animated_bounds(asset, clip=None, samples: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """World-space (min, max) of every posed vertex over ``samples`` times spread across ``clip``
    (rest pose when None): skinned vertices through the library's bake (CPU skinning), rigid ones
    through their node's world matrix."""
    from ..tools.bake import bake
    from .layout import rest_clip

    clip = clip if clip is not None else rest_clip()
    n = 1 if clip.duration <= 0 else max(2, samples)
    times = np.linspace(0.0, clip.duration, n)
    baked = bake(asset, clip, times)
    points = []
    for instance in asset.mesh_instances:
        for p, prim in enumerate(instance.primitives):
            key = f"positions_node{instance.node}_prim{p}"
            if key in baked:
                points.append(baked[key].reshape(-1, 3))
            elif len(prim.source.positions):
                world = baked["node_world"][:, instance.node]  # (T, 4, 4)
                pos = prim.source.positions.astype(np.float64)
                points.append((pos @ world[:, :3, :3].transpose(0, 2, 1) + world[:, None, :3, 3]).reshape(-1, 3))
    if not points:  # no meshes: frame the nodes
        points.append(baked["node_world"][:, :, :3, 3].reshape(-1, 3))
    allp = np.concatenate(points)
    allp = allp[np.all(np.isfinite(allp), axis=1)]
    if not len(allp):
        return np.full(3, -1.0), np.full(3, 1.0)
    return allp.min(axis=0), allp.max(axis=0)


def nice_step(length: float) -> float:
    """A round grid spacing (1, 2 or 5 x 10^k) near ``length``."""
    if not length > 0:
        return 1.0
    k = math.floor(math.log10(length))
    for m in (1.0, 2.0, 5.0, 10.0):
        if m * 10**k >= length * 0.75:
            return m * 10**k
    return 10.0 ** (k + 1)


# ---------------------------------------------------------------------------------------------
# travelling clips: the path seen from the side, or the root followed


def motion_node(asset) -> int:
    """Rig index of the node whose motion carries the character: its hips (found by name as
    :func:`skeletal.retarget.canonical_names` finds them), else the parent-most joint of its first
    skin, else the first root."""
    from ..tools.retarget import canonical_names

    hips = canonical_names(asset.rig).get("hips")
    if hips is not None:
        return int(hips)
    if asset.skins and len(asset.skins[0].joints):
        return int(np.min(asset.skins[0].joints))
    return 0


def root_path(asset, clip, times) -> np.ndarray:
    """World positions (T, 3) of :func:`motion_node` at clip ``times`` (clamped to the clip)."""
    from ..anim.pose import world_matrices
    from ..anim.sampling import sample

    times = np.clip(np.asarray(times, np.float64).reshape(-1), 0.0, max(float(clip.duration), 0.0))
    pose, _ = sample(clip, times, asset.rig.rest, asset.morph_start, asset.rest_morph)
    return world_matrices(asset.rig.parents, pose)[:, motion_node(asset), :3, 3]


#: A clip whose root moves further than this fraction of the character's height travels.
TRAVEL_FRACTION = 0.75


def path_facing(asset, clip, facing: float, lo, hi, yaw: float = 30.0, samples: int = 16) -> float:
    """The facing (degrees about +Y, as :func:`facing_yaw`) that the camera's ``yaw`` is measured
    from: ``facing`` itself, or for a clip that travels (its root's horizontal path longer than
    :data:`TRAVEL_FRACTION` of the bounds' height) the one that puts the camera square to the side of
    the path (the side nearer where ``yaw`` would have put it), so that the whole path crosses the
    picture at one distance instead of coming at the camera."""
    if clip is None or not clip.duration > 0:
        return facing
    path = root_path(asset, clip, np.linspace(0.0, clip.duration, samples))
    travel = path[-1] - path[0]
    height = max(float(np.asarray(hi)[1] - np.asarray(lo)[1]), 1e-6)
    if not (np.all(np.isfinite(travel)) and math.hypot(travel[0], travel[2]) > TRAVEL_FRACTION * height):
        return facing
    heading = math.degrees(math.atan2(travel[0], travel[2]))  # about +Y from +Z, as facing
    wanted = facing + yaw  # where the camera would be
    gap = lambda a: abs((a - wanted + 180.0) % 360.0 - 180.0)
    side = min((heading + 90.0, heading - 90.0), key=gap)
    return (side - yaw + 180.0) % 360.0 - 180.0


def follow_bounds(asset, clip, samples: int = 8) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lo, hi, reference) for following the root: the animated bounds of the character with its
    root's horizontal motion taken out (so they frame the character, not its path), placed at the
    root's start, and that start (3,). A camera framed on them, shifted each frame by the root's
    horizontal offset from ``reference``, follows the character."""
    from ..tools.bake import bake
    from .layout import rest_clip

    clip = clip if clip is not None else rest_clip()
    n = 1 if clip.duration <= 0 else max(2, samples)
    times = np.linspace(0.0, clip.duration, n)
    baked = bake(asset, clip, times)
    path = root_path(asset, clip, times) if clip.duration > 0 else np.zeros((1, 3))
    shift = path - path[0]
    shift[:, 1] = 0.0
    points = []
    for instance in asset.mesh_instances:
        for p, prim in enumerate(instance.primitives):
            key = f"positions_node{instance.node}_prim{p}"
            if key in baked:
                points.append((baked[key] - shift[:, None]).reshape(-1, 3))
            elif len(prim.source.positions):
                world = baked["node_world"][:, instance.node]
                pos = prim.source.positions.astype(np.float64)
                moved = pos @ world[:, :3, :3].transpose(0, 2, 1) + world[:, None, :3, 3] - shift[:, None]
                points.append(moved.reshape(-1, 3))
    if not points:
        points.append((baked["node_world"][:, :, :3, 3] - shift[:, None]).reshape(-1, 3))
    allp = np.concatenate(points)
    allp = allp[np.all(np.isfinite(allp), axis=1)]
    if not len(allp):
        return np.full(3, -1.0), np.full(3, 1.0), path[0]
    return allp.min(axis=0), allp.max(axis=0), path[0]


def follow_shift(reference, root) -> np.ndarray:
    """The camera's shift (3,) for a root at ``root`` (3,): its horizontal offset from ``reference``."""
    d = np.asarray(root, np.float64) - np.asarray(reference, np.float64)
    d[1] = 0.0
    return d
