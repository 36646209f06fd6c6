"""Hit and hurt volumes on bones: spheres and capsules stored in the glTF ``extras`` of their node,
with keyed visibility per clip in the ``extras`` of the animation.

Schema (JSON, what :func:`node_extras` writes and :func:`read_colliders` reads)::

    nodes[i].extras.colliders = [
      {"name": "fist_r",           # unique in the model
       "shape": "sphere",          # "sphere" | "capsule"
       "tag": "hit",               # "hit" (deals damage) | "hurt" (takes damage)
       "radius": 0.08,             # model units, > 0, in the node's space
       "center": [0, 0.1, 0],      # in the node's local space; a capsule's first end
       "end": [0, 0.3, 0]}         # a capsule's second end (spheres: absent, taken = center)
    ]
    animations[k].extras.colliderVisibility = {
      "fist_r": {"times": [0.0, 0.25, 0.4], "visible": [false, true, false]}
    }

Visibility keys are STEP: a collider shows the value of the last key at or before the time (the
first key's before it). A collider that a clip does not key is visible throughout that clip, and
visible when no clip plays.

World space: both ends are transformed by the node's world matrix; the radius is multiplied by the
largest axis scale of that matrix (a bound that stays a sphere/capsule under non-uniform scale).

>>> cs = ColliderSet([Collider("head", 0, "sphere", "hurt", 0.1, np.zeros(3), np.zeros(3))])
>>> cs.world(np.eye(4)[None]).radius.tolist()
[0.1]
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..errors import ModelError

SHAPES = ("sphere", "capsule")
TAGS = ("hit", "hurt")
#: Key of the collider list in a node's extras, and of the visibility keys in an animation's extras.
NODE_KEY = "colliders"
CLIP_KEY = "colliderVisibility"


@dataclass(frozen=True)
class Collider:
    """One volume on rig node ``node``: ``center``/``end`` (3,) float64 in the node's local space
    (equal for a sphere), ``radius`` in the node's units, ``tag`` one of :data:`TAGS`."""

    name: str
    node: int
    shape: str
    tag: str
    radius: float
    center: np.ndarray
    end: np.ndarray

    def __post_init__(self):
        if self.shape not in SHAPES:
            raise ValueError(f"collider {self.name!r}: shape {self.shape!r} is not one of {SHAPES}")
        if self.tag not in TAGS:
            raise ValueError(f"collider {self.name!r}: tag {self.tag!r} is not one of {TAGS}")
        if not (math.isfinite(self.radius) and self.radius > 0):
            raise ValueError(f"collider {self.name!r}: radius must be a positive number, got {self.radius}")
        center = np.asarray(self.center, dtype=np.float64).reshape(3)
        end = center.copy() if self.shape == "sphere" else np.asarray(self.end, dtype=np.float64).reshape(3)
        if not (np.all(np.isfinite(center)) and np.all(np.isfinite(end))):
            raise ValueError(f"collider {self.name!r}: center and end must be finite")
        object.__setattr__(self, "center", center)
        object.__setattr__(self, "end", end)
        object.__setattr__(self, "radius", float(self.radius))

    def moved(self, **changes: Any) -> "Collider":
        """A copy with some fields changed (``moved(radius=0.2)``)."""
        return replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "shape": self.shape, "tag": self.tag, "radius": self.radius,
                               "center": [float(v) for v in self.center]}
        if self.shape == "capsule":
            out["end"] = [float(v) for v in self.end]
        return out

    def same_as(self, other: "Collider", tol: float = 0.0) -> bool:
        return (self.name, self.node, self.shape, self.tag) == (other.name, other.node, other.shape, other.tag) \
            and abs(self.radius - other.radius) <= tol and np.allclose(self.center, other.center, atol=tol, rtol=0) \
            and np.allclose(self.end, other.end, atol=tol, rtol=0)


@dataclass
class VisibilityTrack:
    """STEP keys of one collider's visibility in one clip: ``times`` (K,) increasing, ``visible`` (K,) bool."""

    times: np.ndarray
    visible: np.ndarray

    def at(self, t: float) -> bool:
        k = int(np.searchsorted(self.times, t, side="right")) - 1
        return bool(self.visible[max(k, 0)])


@dataclass
class ColliderFrame:
    """World-space colliders at one pose (C colliders; with a batch of I poses every array gains a
    leading I axis): ``a``/``b`` (C, 3) segment ends (equal for spheres), ``radius`` (C,),
    ``tag`` (C,) int8 (0 hit, 1 hurt, see :data:`TAGS`), ``capsule`` (C,) bool, ``visible`` (C,) bool,
    ``node`` (C,) rig indices and ``names``."""

    a: np.ndarray
    b: np.ndarray
    radius: np.ndarray
    tag: np.ndarray
    capsule: np.ndarray
    visible: np.ndarray
    node: np.ndarray
    names: list[str] = field(default_factory=list)

    def select(self, tag: str | None = None, visible_only: bool = True) -> np.ndarray:
        """Indices of the colliders with ``tag`` ("hit"/"hurt", None: both), visible ones only by default."""
        keep = np.ones(len(self.names), dtype=bool)
        if tag is not None:
            keep &= self.tag == TAGS.index(tag)
        if visible_only:
            keep &= self.visible if self.visible.ndim == 1 else self.visible.all(axis=0)
        return np.flatnonzero(keep)


class ColliderSet:
    """Every collider of a model, as arrays for the world-space query, plus per-clip visibility.

    ``visibility``: clip name -> {collider name -> :class:`VisibilityTrack`}.
    """

    def __init__(self, colliders: list[Collider], visibility: dict[str, dict[str, VisibilityTrack]] | None = None):
        names = [c.name for c in colliders]
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise ValueError(f"collider names must be unique; repeated: {', '.join(map(repr, dup))}")
        self.colliders = list(colliders)
        self.names = names
        self.visibility = visibility or {}
        c = len(colliders)
        self.node = np.array([x.node for x in colliders], dtype=np.int64)
        self.center = np.array([x.center for x in colliders], dtype=np.float64).reshape(c, 3)
        self.end = np.array([x.end for x in colliders], dtype=np.float64).reshape(c, 3)
        self.radius = np.array([x.radius for x in colliders], dtype=np.float64)
        self.tag = np.array([TAGS.index(x.tag) for x in colliders], dtype=np.int8)
        self.capsule = np.array([x.shape == "capsule" for x in colliders], dtype=bool)

    def __len__(self) -> int:
        return len(self.colliders)

    def __iter__(self):
        return iter(self.colliders)

    def __getitem__(self, key: int | str) -> Collider:
        return self.colliders[self.names.index(key) if isinstance(key, str) else key]

    def __repr__(self) -> str:
        return f"ColliderSet({len(self)} colliders, {len(self.visibility)} clips keyed)"

    def visible(self, clip: str | None, t: float) -> np.ndarray:
        """(C,) bool: which colliders show in ``clip`` (a name; None: all) at clip-local time ``t``."""
        out = np.ones(len(self), dtype=bool)
        tracks = self.visibility.get(clip, {}) if clip is not None else {}
        for name, track in tracks.items():
            if name in self.names:
                out[self.names.index(name)] = track.at(t)
        return out

    def world(self, world: np.ndarray, visible: np.ndarray | None = None) -> ColliderFrame:
        """World-space colliders from rig-order world matrices ``world`` (N, 4, 4) or (I, N, 4, 4)."""
        w = np.asarray(world, dtype=np.float64)
        m = w[..., self.node, :, :]  # (..., C, 4, 4)
        rot = m[..., :3, :3]
        a = np.einsum("...ij,...j->...i", rot, np.broadcast_to(self.center, m.shape[:-2] + (3,))) + m[..., :3, 3]
        b = np.einsum("...ij,...j->...i", rot, np.broadcast_to(self.end, m.shape[:-2] + (3,))) + m[..., :3, 3]
        scale = np.sqrt((rot ** 2).sum(axis=-2)).max(axis=-1) if len(self) else np.zeros(m.shape[:-2])
        vis = np.ones(m.shape[:-2], dtype=bool) if visible is None else np.broadcast_to(visible, m.shape[:-2]).copy()
        return ColliderFrame(a, b, self.radius * scale, self.tag.copy(), self.capsule.copy(), vis, self.node.copy(),
                             list(self.names))


# -- reading and writing the extras ----------------------------------------------------------------------


def _vec3(path: str, where: str, value: Any) -> np.ndarray:
    if not (isinstance(value, list) and len(value) == 3 and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                                for v in value)):
        raise ModelError(path, where, f"must be a list of 3 numbers, got {value!r}"[:200])
    return np.asarray(value, dtype=np.float64)


def parse_node_colliders(path: str, file_node: int, rig_node: int, extras: dict) -> list[Collider]:
    """The colliders in one node's ``extras`` (ModelError naming ``nodes[i].extras.colliders[k]``)."""
    items = extras.get(NODE_KEY)
    if items is None:
        return []
    base = f"nodes[{file_node}].extras.{NODE_KEY}"
    if not isinstance(items, list):
        raise ModelError(path, base, f"must be a list, got {type(items).__name__}")
    out = []
    for k, item in enumerate(items):
        where = f"{base}[{k}]"
        if not isinstance(item, dict):
            raise ModelError(path, where, f"must be an object, got {type(item).__name__}")
        name, shape, tag = item.get("name"), item.get("shape", "sphere"), item.get("tag", "hurt")
        if not isinstance(name, str) or not name:
            raise ModelError(path, where, "needs a non-empty string 'name'")
        if shape not in SHAPES:
            raise ModelError(path, where, f"shape {shape!r} is not one of {', '.join(SHAPES)}")
        if tag not in TAGS:
            raise ModelError(path, where, f"tag {tag!r} is not one of {', '.join(TAGS)}")
        radius = item.get("radius")
        if not isinstance(radius, (int, float)) or isinstance(radius, bool) or not (math.isfinite(radius) and radius > 0):
            raise ModelError(path, where, f"radius must be a positive number, got {radius!r}")
        center = _vec3(path, where + ".center", item.get("center", [0, 0, 0]))
        end = _vec3(path, where + ".end", item.get("end", list(center))) if shape == "capsule" else center
        out.append(Collider(name, rig_node, shape, tag, float(radius), center, end))
    return out


def parse_clip_visibility(path: str, index: int, extras: dict) -> dict[str, VisibilityTrack]:
    """The visibility keys in one animation's ``extras`` (ModelError naming the entry at fault)."""
    table = extras.get(CLIP_KEY)
    if table is None:
        return {}
    base = f"animations[{index}].extras.{CLIP_KEY}"
    if not isinstance(table, dict):
        raise ModelError(path, base, f"must be an object, got {type(table).__name__}")
    out = {}
    for name, entry in table.items():
        where = f"{base}.{name}"
        if not isinstance(entry, dict):
            raise ModelError(path, where, "must be an object with 'times' and 'visible'")
        times, visible = entry.get("times"), entry.get("visible")
        if not (isinstance(times, list) and isinstance(visible, list) and len(times) == len(visible) and times):
            raise ModelError(path, where, "needs 'times' and 'visible' lists of the same, non-zero length")
        if not all(isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t) for t in times):
            raise ModelError(path, where, "times must be finite numbers")
        if not all(isinstance(v, bool) for v in visible):
            raise ModelError(path, where, "visible must be true/false values")
        t = np.asarray(times, dtype=np.float64)
        if np.any(np.diff(t) <= 0):
            raise ModelError(path, where, "times must be strictly increasing")
        out[name] = VisibilityTrack(t, np.asarray(visible, dtype=bool))
    return out


def read_colliders(asset) -> ColliderSet:
    """Every collider of an :class:`~skeletal.Asset` (its document's node and animation extras)."""
    doc = asset.document
    colliders: list[Collider] = []
    for i, node in enumerate(doc.nodes):
        extras = getattr(node, "extras", None) or {}
        colliders.extend(parse_node_colliders(asset.path, i, int(asset.rig.index_of[i]), extras))
    visibility = {}
    for k, anim in enumerate(doc.animations):
        tracks = parse_clip_visibility(asset.path, k, getattr(anim, "extras", None) or {})
        if tracks:
            visibility[asset.clips[k].name] = tracks
    try:
        return ColliderSet(colliders, visibility)
    except ValueError as exc:
        raise ModelError(asset.path, "nodes[*].extras.colliders", str(exc)) from None


def node_extras(extras: dict, colliders: list[Collider]) -> dict:
    """``extras`` with its collider list replaced by ``colliders`` (removed when empty)."""
    out = {k: v for k, v in (extras or {}).items() if k != NODE_KEY}
    if colliders:
        out[NODE_KEY] = [c.to_json() for c in colliders]
    return out


def clip_extras(extras: dict, tracks: dict[str, VisibilityTrack]) -> dict:
    """``extras`` with its visibility table replaced by ``tracks`` (removed when empty)."""
    out = {k: v for k, v in (extras or {}).items() if k != CLIP_KEY}
    if tracks:
        out[CLIP_KEY] = {name: {"times": [float(t) for t in tr.times], "visible": [bool(v) for v in tr.visible]}
                         for name, tr in tracks.items()}
    return out


__all__ = ["Collider", "ColliderFrame", "ColliderSet", "VisibilityTrack", "SHAPES", "TAGS", "read_colliders",
           "node_extras", "clip_extras"]
