# Over 600 lines: the editor's GL-free document: every undoable command next to the state it changes and its
# inverse.
"""The editor's document and commands: everything the animation editor changes, with no GL in it.

An :class:`EditDocument` holds what a model file will contain after saving -- the clips (runtime
:class:`~skeletal.clip.Clip` objects), each clip's frame rate and collider visibility keys, the
colliders -- plus the unkeyed pose edits (:attr:`EditDocument.pose_edits`). Every change is a
:class:`Command` with ``apply``/``revert``, run through :meth:`EditDocument.execute` so that it can be
undone and redone; the window (:mod:`skeletal.editor.app`) only builds commands.

Key commands keep the clip before and after (clips are small: a 100-key x 65-bone clip is ~300 KB),
which makes every undo exact.

>>> doc = EditDocument.from_asset(skeletal.demo.demo_asset())        # doctest: +SKIP
>>> doc.execute(InsertPoseKeys(doc, clip=0, time=0.5, nodes=[3]))    # doctest: +SKIP
>>> doc.undo(); doc.dirty                                             # doctest: +SKIP
False
"""

from __future__ import annotations

import copy
import math
import os
import tempfile
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

from ..anim.clip import PATH_WIDTH, Clip, Track
from ..anim.colliders import Collider, ColliderSet, VisibilityTrack, clip_extras, node_extras, read_colliders
from ..document import Animation, Channel, Document
from ..errors import ClipError, SkeletalError
from ..anim.pose import world_matrices
from ..quat import compose_trs, decompose_trs
from ..anim.rig import R_SLICE, S_SLICE, T_SLICE
from ..anim.sampling import sample
from . import keys as K

SLICES = {"translation": T_SLICE, "rotation": R_SLICE, "scale": S_SLICE}
FPS_KEY = "fps"  # animations[k].extras.fps: the clip's frame rate in the editor (glTF has none)


class EditError(SkeletalError):
    """An edit that cannot be made (bad value, unknown clip or collider) or a save that failed."""


@dataclass
class ClipInfo:
    """Per-clip data the editor keeps beside the Clip: frame rate, collider visibility keys, and the
    animation's other ``extras`` (kept as read)."""

    fps: float = 30.0
    visibility: dict[str, VisibilityTrack] = field(default_factory=dict)
    extras: dict[str, Any] = field(default_factory=dict)

    def copy(self) -> "ClipInfo":
        return ClipInfo(self.fps, {k: VisibilityTrack(v.times.copy(), v.visible.copy()) for k, v in self.visibility.items()},
                        copy.deepcopy(self.extras))


# -- commands --------------------------------------------------------------------------------------------


class Command:
    """One undoable edit. Subclasses set ``label`` and implement :meth:`apply` and :meth:`revert`.

    ``merge_key``: two commands in a row with the same non-None key (a drag) become one undo step.
    """

    label = "edit"
    merge_key: Any = None

    def apply(self, doc: "EditDocument") -> None:
        raise NotImplementedError

    def revert(self, doc: "EditDocument") -> None:
        raise NotImplementedError

    def merge(self, later: "Command") -> bool:
        """Absorb ``later`` (same merge key) so that one revert undoes both; True if done."""
        return False

    def __repr__(self) -> str:
        return f"<{type(self).__name__}: {self.label}>"


class ClipEdit(Command):
    """Replaces clip ``clip`` by ``after`` (kept with ``before``): the base of every key edit."""

    def __init__(self, doc: "EditDocument", clip: int, after: Clip, label: str):
        doc.check_clip(clip)
        self.clip = clip
        self.before = doc.clips[clip]
        self.after = after
        self.label = label

    def apply(self, doc):
        doc.clips[self.clip] = self.after

    def revert(self, doc):
        doc.clips[self.clip] = self.before

    def merge(self, later):
        if isinstance(later, ClipEdit) and later.clip == self.clip and later.before is self.after:
            self.after = later.after
            if isinstance(self, MoveKeys) and isinstance(later, MoveKeys):
                self.dt += later.dt
                self.label = f"move {self.count} key(s) by {self.dt:+.3f}s"
            return True
        return False


def _channel_edit(doc, clip: int, edits: dict[tuple[int, str], Track | None], new_tracks: list[Track]) -> Clip:
    """The clip with some tracks replaced (None: removed) and ``new_tracks`` appended."""
    c = doc.clips[clip]
    tracks = []
    for tr in c.tracks:
        key = (tr.node, tr.path)
        if key in edits:
            if edits[key] is not None:
                tracks.append(edits[key])
        else:
            tracks.append(tr)
    return K.with_tracks(c, tracks + new_tracks)


class InsertPoseKeys(ClipEdit):
    """Key the shown pose (sampled clip + unkeyed edits) at ``time`` for ``nodes`` (None: every
    node the clip animates or the user posed, i.e. the whole pose). ``paths``: which channels;
    None keys rotation always, translation and scale where the clip already animates them or the
    pose differs from the rest pose. Keyed nodes lose their unkeyed edits."""

    def __init__(self, doc, clip: int, time: float, nodes: Iterable[int] | None = None,
                 paths: Iterable[str] | None = None):
        doc.check_clip(clip)
        time = doc.check_time(time)
        c = doc.clips[clip]
        pose = doc.pose(clip, time)
        if nodes is None:
            nodes = sorted({tr.node for tr in c.tracks if tr.path != "weights"} | set(doc.pose_edits) | set(doc.joints))
        nodes = [doc.check_node(n) for n in nodes]
        edits: dict[tuple[int, str], Track | None] = {}
        new: list[Track] = []
        rest = doc.asset.rig.rest
        for n in nodes:
            for path in (paths or K.CHANNEL_PATHS):
                value = pose[n, SLICES[path]]
                i = K.track_index(c, n, path)
                if paths is None and path != "rotation" and i < 0 and np.allclose(value, rest[n, SLICES[path]], atol=1e-6):
                    continue
                if i >= 0:
                    edits[(n, path)] = K.insert_key(c.tracks[i], time, value)
                else:
                    new.append(K._build(Track(n, path, "LINEAR", np.zeros(1, np.float32),
                                              np.zeros((1, PATH_WIDTH[path]), np.float32)),
                                        np.array([time], np.float32), value[None], None, None))
        self.nodes = nodes
        self.old_edits = {n: doc.pose_edits[n] for n in nodes if n in doc.pose_edits}
        where = f"{len(nodes)} bones" if len(nodes) != 1 else doc.node_name(nodes[0])
        super().__init__(doc, clip, _channel_edit(doc, clip, edits, new), f"insert key ({where}) at {time:.3f}s")

    def apply(self, doc):
        super().apply(doc)
        for n in self.old_edits:
            doc.pose_edits.pop(n, None)

    def revert(self, doc):
        super().revert(doc)
        doc.pose_edits.update(self.old_edits)


KeyRef = tuple  # (node, path, time): a key by its channel and time (indices change under edits)


def _group(doc, clip: int, refs: Iterable[KeyRef]) -> dict[tuple[int, str], list[int]]:
    """Key refs grouped by channel as key indices (unknown keys are an EditError)."""
    c = doc.clips[clip]
    out: dict[tuple[int, str], list[int]] = {}
    for node, path, t in refs:
        i = K.track_index(c, node, path)
        k = K.find_key(c.tracks[i], t) if i >= 0 else -1
        if k < 0:
            raise EditError(f"clip {c.name!r} has no {path} key of {doc.node_name(node)} at {t:.4f}s")
        out.setdefault((node, path), []).append(k)
    return out


class DeleteKeys(ClipEdit):
    """Delete keys (a channel left with none is removed from the clip)."""

    def __init__(self, doc, clip: int, refs: Iterable[KeyRef]):
        doc.check_clip(clip)
        refs = list(refs)
        groups = _group(doc, clip, refs)
        c = doc.clips[clip]
        edits = {ch: K.delete_keys(c.tracks[K.track_index(c, *ch)], ks) for ch, ks in groups.items()}
        super().__init__(doc, clip, _channel_edit(doc, clip, edits, []), f"delete {len(refs)} key(s)")


class MoveKeys(ClipEdit):
    """Shift keys by ``dt`` seconds (no key goes below 0; a moved key replaces one it lands on)."""

    def __init__(self, doc, clip: int, refs: Iterable[KeyRef], dt: float, *, merge_key=None):
        doc.check_clip(clip)
        refs = list(refs)
        if not math.isfinite(dt):
            raise EditError(f"cannot move keys by {dt}")
        groups = _group(doc, clip, refs)
        c = doc.clips[clip]
        low = min((float(c.tracks[K.track_index(c, *ch)].times[k]) for ch, ks in groups.items() for k in ks), default=0.0)
        dt = max(float(dt), -low)
        edits = {ch: K.move_keys(c.tracks[K.track_index(c, *ch)], ks, dt) for ch, ks in groups.items()}
        self.dt, self.count = dt, len(refs)
        self.merge_key = merge_key
        super().__init__(doc, clip, _channel_edit(doc, clip, edits, []), f"move {len(refs)} key(s) by {dt:+.3f}s")


class SetKeyValue(ClipEdit):
    """Give one key a new value (and, for CUBICSPLINE, new in/out tangents): the curve view's drag."""

    def __init__(self, doc, clip: int, ref: KeyRef, value, tangents=None, *, merge_key=None):
        doc.check_clip(clip)
        (ch, ks), = _group(doc, clip, [ref]).items()
        c = doc.clips[clip]
        value = np.asarray(value, dtype=np.float64)
        if not np.all(np.isfinite(value)):
            raise EditError("key values must be finite")
        edits = {ch: K.set_key_value(c.tracks[K.track_index(c, *ch)], ks[0], value, tangents)}
        self.merge_key = merge_key
        super().__init__(doc, clip, _channel_edit(doc, clip, edits, []), f"set {ch[1]} key of {doc.node_name(ch[0])}")


class SetInterpolation(ClipEdit):
    """Change the interpolation of channels (glTF keeps one interpolation per channel)."""

    def __init__(self, doc, clip: int, channels: Iterable[tuple[int, str]], interpolation: str):
        doc.check_clip(clip)
        c = doc.clips[clip]
        channels = list(dict.fromkeys(channels))
        edits = {}
        for ch in channels:
            i = K.track_index(c, *ch)
            if i < 0:
                raise EditError(f"clip {c.name!r} does not animate the {ch[1]} of {doc.node_name(ch[0])}")
            try:
                edits[ch] = K.set_interpolation(c.tracks[i], interpolation)
            except ClipError as exc:
                raise EditError(str(exc)) from None
        super().__init__(doc, clip, _channel_edit(doc, clip, edits, []),
                         f"{interpolation} on {len(channels)} channel(s)")


@dataclass
class CopiedKey:
    node: int
    path: str
    offset: float  # seconds after the earliest copied key
    value: np.ndarray  # (C,)


def copy_keys(doc, clip: int, refs: Iterable[KeyRef]) -> list[CopiedKey]:
    """The clipboard content for keys (times relative to the first one)."""
    refs = list(refs)
    groups = _group(doc, clip, refs)
    c = doc.clips[clip]
    out = []
    for (node, path), ks in groups.items():
        tr = c.tracks[K.track_index(c, node, path)]
        for k in ks:
            out.append(CopiedKey(node, path, float(tr.times[k]), K.key_values(tr)[k].astype(np.float64)))
    t0 = min((k.offset for k in out), default=0.0)
    for k in out:
        k.offset -= t0
    return out


class PasteKeys(ClipEdit):
    """Insert copied keys at ``time`` (+ their offsets), into the clip's channels (created if needed).
    ``node_map`` sends a copied node elsewhere (paste a bone's keys onto another bone)."""

    def __init__(self, doc, clip: int, time: float, keys: list[CopiedKey], node_map: dict[int, int] | None = None):
        doc.check_clip(clip)
        time = doc.check_time(time)
        if not keys:
            raise EditError("nothing to paste: copy some keys first")
        c = doc.clips[clip]
        tracks = {(tr.node, tr.path): tr for tr in c.tracks}
        order = [(tr.node, tr.path) for tr in c.tracks]
        for key in keys:
            node = (node_map or {}).get(key.node, key.node)
            ch = (doc.check_node(node), key.path)
            t = doc.snap_time(clip, time + key.offset)
            if ch in tracks:
                tracks[ch] = K.insert_key(tracks[ch], t, key.value)
            else:
                tracks[ch] = K._build(Track(node, key.path, "LINEAR", np.zeros(1, np.float32),
                                            np.zeros((1, len(key.value)), np.float32)),
                                      np.array([t], np.float32), key.value[None], None, None)
                order.append(ch)
        super().__init__(doc, clip, K.with_tracks(c, [tracks[ch] for ch in order]), f"paste {len(keys)} key(s)")


class SetClipLength(ClipEdit):
    """Make the clip ``length`` seconds long (keys past it cut, with a key at the end holding the
    value there; channels that reached the old end held to a longer one)."""

    def __init__(self, doc, clip: int, length: float):
        doc.check_clip(clip)
        if not (math.isfinite(length) and length > 0):
            raise EditError(f"clip length must be a positive number of seconds, got {length}")
        c = doc.clips[clip]
        tracks = [K.trim_track(tr, float(length), c.duration) for tr in c.tracks]
        super().__init__(doc, clip, K.with_tracks(c, tracks), f"clip length {length:.3f}s")


class SetFps(Command):
    def __init__(self, doc, clip: int, fps: float):
        doc.check_clip(clip)
        if not (math.isfinite(fps) and 1 <= fps <= 1000):
            raise EditError(f"frame rate must be between 1 and 1000, got {fps}")
        self.clip, self.fps, self.old = clip, float(fps), doc.info[clip].fps
        self.label = f"{fps:g} fps"

    def apply(self, doc):
        doc.info[self.clip].fps = self.fps

    def revert(self, doc):
        doc.info[self.clip].fps = self.old


class AddClip(Command):
    """Insert a clip (with its info) at ``index`` (None: at the end)."""

    def __init__(self, doc, clip: Clip, info: ClipInfo, index: int | None = None, label: str | None = None):
        if not clip.name.strip():
            raise EditError("a clip needs a name")
        if clip.name in doc.clip_names():
            raise EditError(f"there is already a clip named {clip.name!r}")
        self.clip, self.info = clip, info
        self.index = len(doc.clips) if index is None else index
        self.label = label or f"add clip {clip.name!r}"

    def apply(self, doc):
        doc.clips.insert(self.index, self.clip)
        doc.info.insert(self.index, self.info)

    def revert(self, doc):
        del doc.clips[self.index]
        del doc.info[self.index]


def new_clip(doc, name: str, length: float = 1.0, fps: float = 30.0) -> AddClip:
    """A command adding a clip of the rest pose: rotation keys of every joint (and the translation of
    root joints) at 0 and at ``length``."""
    if not (math.isfinite(length) and length > 0):
        raise EditError(f"clip length must be positive, got {length}")
    rest = doc.asset.rig.rest
    parents = doc.asset.rig.parents
    times = np.array([0.0, length], np.float32)
    tracks = []
    for n in doc.joints:
        tracks.append(K.canonical_track(Track(n, "rotation", "LINEAR", times, np.repeat(rest[n:n + 1, R_SLICE], 2, 0))))
        if parents[n] < 0 or parents[n] not in set(doc.joints):
            tracks.append(Track(n, "translation", "LINEAR", times, np.repeat(rest[n:n + 1, T_SLICE], 2, 0)))
    return AddClip(doc, Clip(name, tracks), ClipInfo(fps=fps), label=f"new clip {name!r}")


def duplicate_clip(doc, clip: int, name: str | None = None) -> AddClip:
    doc.check_clip(clip)
    src = doc.clips[clip]
    name = name or doc.unique_clip_name(src.name + " copy")
    return AddClip(doc, K.with_tracks(src, list(src.tracks), name), doc.info[clip].copy(), clip + 1,
                   f"duplicate clip {src.name!r}")


class RenameClip(Command):
    def __init__(self, doc, clip: int, name: str):
        doc.check_clip(clip)
        name = name.strip()
        if not name:
            raise EditError("a clip needs a name")
        if name in doc.clip_names() and doc.clips[clip].name != name:
            raise EditError(f"there is already a clip named {name!r}")
        self.clip, self.old, self.new = clip, doc.clips[clip].name, name
        self.label = f"rename clip {self.old!r} to {name!r}"

    def apply(self, doc):
        doc.clips[self.clip] = K.with_tracks(doc.clips[self.clip], doc.clips[self.clip].tracks, self.new)

    def revert(self, doc):
        doc.clips[self.clip] = K.with_tracks(doc.clips[self.clip], doc.clips[self.clip].tracks, self.old)


class DeleteClip(Command):
    def __init__(self, doc, clip: int):
        doc.check_clip(clip)
        self.index, self.clip, self.info = clip, doc.clips[clip], doc.info[clip]
        self.label = f"delete clip {self.clip.name!r}"

    def apply(self, doc):
        del doc.clips[self.index]
        del doc.info[self.index]

    def revert(self, doc):
        doc.clips.insert(self.index, self.clip)
        doc.info.insert(self.index, self.info)


class SetPose(Command):
    """An unkeyed pose edit: node ``node``'s local TRS row (10,) as shown (``None``: drop the edit).
    A gizmo drag passes ``merge_key`` so that the whole drag is one undo step."""

    def __init__(self, doc, node: int, local: np.ndarray | None, *, merge_key=None):
        node = doc.check_node(node)
        if local is not None:
            local = np.asarray(local, dtype=np.float64).reshape(10).copy()
            if not np.all(np.isfinite(local)):
                raise EditError("pose values must be finite")
            q = local[R_SLICE]
            local[R_SLICE] = q / (np.linalg.norm(q) or 1.0)
        self.node, self.local, self.old = node, local, doc.pose_edits.get(node)
        self.merge_key = merge_key
        self.label = f"pose {doc.node_name(node)}"

    def apply(self, doc):
        if self.local is None:
            doc.pose_edits.pop(self.node, None)
        else:
            doc.pose_edits[self.node] = self.local

    def revert(self, doc):
        if self.old is None:
            doc.pose_edits.pop(self.node, None)
        else:
            doc.pose_edits[self.node] = self.old

    def merge(self, later):
        if isinstance(later, SetPose) and later.node == self.node:
            self.local = later.local
            return True
        return False


class SetPoses(Command):
    """Unkeyed edits of several nodes at once (IK moves a chain): ``{node: local (10,)}``."""

    def __init__(self, doc, locals_: dict[int, np.ndarray], *, merge_key=None, label: str = "pose"):
        self.new = {doc.check_node(n): np.asarray(v, np.float64).reshape(10).copy() for n, v in locals_.items()}
        self.old = {n: doc.pose_edits.get(n) for n in self.new}
        self.merge_key = merge_key
        self.label = label

    def apply(self, doc):
        doc.pose_edits.update(self.new)

    def revert(self, doc):
        for n, v in self.old.items():
            if v is None:
                doc.pose_edits.pop(n, None)
            else:
                doc.pose_edits[n] = v

    def merge(self, later):
        if isinstance(later, SetPoses):
            for n in later.new:
                self.old.setdefault(n, later.old[n])
            self.new.update(later.new)
            return True
        return False


def ik_chain(doc, end: int) -> tuple[int, int, int]:
    """The two-bone chain (root, mid, end) that dragging ``end`` (a hand, a foot) moves: its parent
    and grandparent. EditError for a node with fewer than two ancestors."""
    parents = doc.asset.rig.parents
    mid = int(parents[doc.check_node(end)])
    root = int(parents[mid]) if mid >= 0 else -1
    if root < 0:
        raise EditError(f"{doc.node_name(end)} has no two bones above it to bend")
    return root, mid, int(end)


def ik_pose(doc, clip: int | None, time: float, end: int, target, *, merge_key=None) -> SetPoses:
    """IK-assisted posing: an unkeyed pose edit that bends the two bones above ``end`` so that it
    reaches the model-space point ``target`` (3,), keeping the current bend side (the pole is the mid
    joint's current position pushed away from the root-end line). Uses :func:`skeletal.ik.two_bone`."""
    from ..anim import ik

    root, mid, end = ik_chain(doc, end)
    target = np.asarray(target, dtype=np.float64).reshape(3)
    if not np.all(np.isfinite(target)):
        raise EditError("the IK target must be a finite point")
    pose = doc.pose(clip, time)
    world = doc.world(pose)
    pa, pb, pc = world[root, :3, 3], world[mid, :3, 3], world[end, :3, 3]
    pole = pb + (pb - 0.5 * (pa + pc))
    solved = ik.two_bone(doc.asset.rig.parents, pose, (root, mid, end), target, pole=pole)
    solved = np.asarray(solved).reshape(pose.shape)
    return SetPoses(doc, {root: solved[root], mid: solved[mid]}, merge_key=merge_key,
                    label=f"IK {doc.node_name(end)}")


class ClearPoseEdits(SetPoses):
    def __init__(self, doc):
        self.new = {}
        self.old = dict(doc.pose_edits)
        self.label = "clear pose edits"

    def apply(self, doc):
        doc.pose_edits.clear()

    def revert(self, doc):
        doc.pose_edits.update(self.old)


# -- collider commands --------------------------------------------------------------------------------


class AddCollider(Command):
    def __init__(self, doc, collider: Collider):
        if collider.name in [c.name for c in doc.colliders]:
            raise EditError(f"there is already a collider named {collider.name!r}")
        doc.check_node(collider.node)
        self.collider = collider
        self.label = f"add {collider.tag} {collider.shape} {collider.name!r}"

    def apply(self, doc):
        doc.colliders.append(self.collider)

    def revert(self, doc):
        doc.colliders.pop()


class SetCollider(Command):
    """Replace collider ``index`` (move, resize, rename, retag, reshape, re-bone). A rename carries
    its visibility keys along in every clip."""

    def __init__(self, doc, index: int, collider: Collider, *, merge_key=None):
        if not 0 <= index < len(doc.colliders):
            raise EditError(f"no collider {index}")
        if collider.name != doc.colliders[index].name and collider.name in [c.name for c in doc.colliders]:
            raise EditError(f"there is already a collider named {collider.name!r}")
        doc.check_node(collider.node)
        self.index, self.old, self.new = index, doc.colliders[index], collider
        self.merge_key = merge_key
        self.label = f"edit collider {collider.name!r}"

    def _set(self, doc, frm: Collider, to: Collider):
        doc.colliders[self.index] = to
        if frm.name != to.name:
            for info in doc.info:
                if frm.name in info.visibility:
                    info.visibility[to.name] = info.visibility.pop(frm.name)

    def apply(self, doc):
        self._set(doc, self.old, self.new)

    def revert(self, doc):
        self._set(doc, self.new, self.old)

    def merge(self, later):
        if isinstance(later, SetCollider) and later.index == self.index and later.old is self.new:
            self.new = later.new
            return True
        return False


def collider_gizmo_matrix(collider: Collider, bone_world: np.ndarray) -> np.ndarray:
    """The world frame (4, 4) the viewport gizmo manipulates for ``collider`` on a bone whose world
    matrix is ``bone_world`` (row-major, may scale): origin at the shape's middle (a sphere's centre,
    a capsule's mid-point), unit axes, Y along a capsule's axis (X, Z completing the bone's rotation;
    a sphere takes the bone's rotation). Its scale after a drag is read by :func:`transformed_collider`."""
    b = np.asarray(bone_world, np.float64)
    lin = b[:3, :3]
    norms = np.linalg.norm(lin, axis=0)
    rot = lin / np.where(norms > 1e-12, norms, 1.0)
    mid = 0.5 * (collider.center + collider.end)
    axis = lin @ (0.5 * (collider.end - collider.center))
    if collider.shape == "capsule" and np.linalg.norm(axis) > 1e-12:
        y = axis / np.linalg.norm(axis)
        x = rot[:, 0] - y * float(rot[:, 0] @ y)  # the bone's X, made perpendicular to the axis
        if np.linalg.norm(x) < 1e-6:
            x = rot[:, 2] - y * float(rot[:, 2] @ y)
        x /= np.linalg.norm(x)
        rot = np.stack([x, y, np.cross(x, y)], axis=1)
    out = np.eye(4)
    out[:3, :3] = rot
    out[:3, 3] = lin @ mid + b[:3, 3]
    return out


def transformed_collider(start: Collider, bone_world: np.ndarray, frame: np.ndarray) -> Collider:
    """``start`` moved, turned and resized so that its gizmo frame (:func:`collider_gizmo_matrix` of
    ``start``) becomes ``frame`` (4, 4) world: the frame's origin is the new middle, its Y axis a
    capsule's new axis; its axis lengths are scale factors, on the half length (Y) and the radius (the
    mean of X and Z for a capsule, of all three for a sphere). Bone-local values, as stored."""
    b = np.asarray(bone_world, np.float64)
    f = np.asarray(frame, np.float64)
    lin = b[:3, :3]
    if not np.all(np.isfinite(f)) or abs(np.linalg.det(lin)) < 1e-18:
        raise EditError(f"cannot place collider {start.name!r}: degenerate matrix")
    inv = np.linalg.inv(lin)
    scale = np.linalg.norm(f[:3, :3], axis=0)
    if np.any(scale < 1e-9):
        raise EditError(f"cannot scale collider {start.name!r} to nothing")
    mid = inv @ (f[:3, 3] - b[:3, 3])
    if start.shape == "sphere":
        radius = start.radius * float(scale.mean())
        return start.moved(center=mid, end=mid, radius=radius)
    half_world = float(np.linalg.norm(lin @ (0.5 * (start.end - start.center))))
    half = inv @ (f[:3, 1] * half_world)  # the Y axis: new direction, its length the factor on the length
    radius = start.radius * float(0.5 * (scale[0] + scale[2]))
    return start.moved(center=mid - half, end=mid + half, radius=radius)


class TransformCollider(SetCollider):
    """Collider ``index`` placed by the viewport gizmo: ``start`` is the collider when the drag began
    and ``frame`` the gizmo's world matrix now (see :func:`transformed_collider`); ``bone_world`` the
    collider's bone in the pose on screen. Successive frames of one drag (same ``merge_key``) are one
    undo step."""

    def __init__(self, doc, index: int, start: Collider, bone_world, frame, *, merge_key=None):
        super().__init__(doc, index, transformed_collider(start, bone_world, frame), merge_key=merge_key)
        self.label = f"move collider {start.name!r}"


class RemoveCollider(Command):
    def __init__(self, doc, index: int):
        if not 0 <= index < len(doc.colliders):
            raise EditError(f"no collider {index}")
        self.index, self.collider = index, doc.colliders[index]
        self.tracks = {i: info.visibility[self.collider.name] for i, info in enumerate(doc.info)
                       if self.collider.name in info.visibility}
        self.label = f"remove collider {self.collider.name!r}"

    def apply(self, doc):
        del doc.colliders[self.index]
        for i in self.tracks:
            doc.info[i].visibility.pop(self.collider.name, None)

    def revert(self, doc):
        doc.colliders.insert(self.index, self.collider)
        for i, tr in self.tracks.items():
            doc.info[i].visibility[self.collider.name] = tr


class KeyColliderVisibility(Command):
    """Key collider ``name`` visible/hidden from ``time`` on in clip ``clip`` (``visible=None``
    deletes the key at ``time``)."""

    def __init__(self, doc, clip: int, name: str, time: float, visible: bool | None):
        doc.check_clip(clip)
        if name not in [c.name for c in doc.colliders]:
            raise EditError(f"no collider named {name!r}")
        time = doc.check_time(time)
        old = doc.info[clip].visibility.get(name)
        times = [] if old is None else list(old.times)
        vis = [] if old is None else list(old.visible)
        at = [i for i, t in enumerate(times) if abs(t - time) <= K.TIME_EPS]
        if visible is None:
            if not at:
                raise EditError(f"collider {name!r} has no visibility key at {time:.3f}s")
            del times[at[0]], vis[at[0]]
        elif at:
            vis[at[0]] = bool(visible)
        else:
            k = int(np.searchsorted(times, time))
            times.insert(k, time)
            vis.insert(k, bool(visible))
        self.clip, self.name, self.old = clip, name, old
        self.new = VisibilityTrack(np.asarray(times, np.float64), np.asarray(vis, bool)) if times else None
        what = "unkey" if visible is None else ("show" if visible else "hide")
        self.label = f"{what} {name!r} at {time:.3f}s"

    def _put(self, doc, track):
        if track is None:
            doc.info[self.clip].visibility.pop(self.name, None)
        else:
            doc.info[self.clip].visibility[self.name] = track

    def apply(self, doc):
        self._put(doc, self.new)

    def revert(self, doc):
        self._put(doc, self.old)


class Batch(Command):
    """Several commands as one undo step (applied in order, reverted in reverse)."""

    def __init__(self, commands: list[Command], label: str):
        self.commands, self.label = commands, label

    def apply(self, doc):
        for c in self.commands:
            c.apply(doc)

    def revert(self, doc):
        for c in reversed(self.commands):
            c.revert(doc)


# -- the document ---------------------------------------------------------------------------------------


class EditDocument:
    """The editable state of one model; see the module docstring.

    Attributes: ``asset`` (rig, meshes; its clips are not edited in place), ``clips`` (list of Clip),
    ``info`` (list of :class:`ClipInfo`, one per clip), ``colliders`` (list of Collider),
    ``pose_edits`` ({rig node: local TRS (10,)}: posed but not keyed), ``path`` (where it saves),
    ``joints`` (rig indices of the skin joints: what "the whole pose" keys).
    """

    def __init__(self, asset, path: str | None = None):
        from ..render.overlays import joint_nodes

        self.asset = asset
        self.path = path if path is not None else asset.path
        doc = asset.document
        self.clips: list[Clip] = [K.with_tracks(c, [K.canonical_track(t) for t in c.tracks]) for c in asset.clips]
        colliders = read_colliders(asset)
        self.colliders: list[Collider] = list(colliders.colliders)
        self.info: list[ClipInfo] = []
        for clip, anim in zip(self.clips, doc.animations):
            extras = dict(getattr(anim, "extras", {}) or {})
            fps = extras.get(FPS_KEY)
            fps = float(fps) if isinstance(fps, (int, float)) and not isinstance(fps, bool) and 1 <= fps <= 1000 \
                else K.guess_fps(clip)
            self.info.append(ClipInfo(fps, dict(colliders.visibility.get(clip.name, {})),
                                      {k: v for k, v in extras.items() if k not in (FPS_KEY, "colliderVisibility")}))
        self.pose_edits: dict[int, np.ndarray] = {}
        self.joints = [int(j) for j in joint_nodes(asset)]
        self.undo_stack: list[Command] = []
        self.redo_stack: list[Command] = []
        self._serial = 0
        self._saved_state = self.state_id
        self.revision = 0  # bumped by every change (caches key on it)

    @classmethod
    def from_asset(cls, asset, path: str | None = None) -> "EditDocument":
        return cls(asset, path)

    @classmethod
    def open(cls, path: str, up: str = "y") -> "EditDocument":
        """Load a model to edit (the loader's ModelError on a malformed file); ``up`` as
        :func:`skeletal.load` takes it (a file turned to stand Y up is saved turned)."""
        from ..asset import load

        return cls(load(path, up=up), path)

    # -- checks and names ---------------------------------------------------------------------------

    def check_clip(self, clip: int) -> int:
        if not (isinstance(clip, (int, np.integer)) and 0 <= clip < len(self.clips)):
            raise EditError(f"no clip {clip} (the document has {len(self.clips)})")
        return int(clip)

    def check_node(self, node: int) -> int:
        if not (isinstance(node, (int, np.integer)) and 0 <= node < len(self.asset.rig)):
            raise EditError(f"no node {node} (the rig has {len(self.asset.rig)})")
        return int(node)

    @staticmethod
    def check_time(t: float) -> float:
        if not (isinstance(t, (int, float, np.floating)) and math.isfinite(t) and t >= 0):
            raise EditError(f"time must be a non-negative number of seconds, got {t}")
        return float(np.float32(t))

    def node_name(self, node: int) -> str:
        return self.asset.rig.names[node] or f"node {int(self.asset.rig.node_of[node])}"

    def clip_names(self) -> list[str]:
        return [c.name for c in self.clips]

    def unique_clip_name(self, base: str) -> str:
        names = set(self.clip_names())
        if base not in names:
            return base
        k = 2
        while f"{base} {k}" in names:
            k += 1
        return f"{base} {k}"

    def snap_time(self, clip: int, t: float) -> float:
        """``t`` on the clip's nearest frame."""
        fps = self.info[clip].fps
        return float(np.float32(max(0.0, round(t * fps) / fps)))

    # -- history ------------------------------------------------------------------------------------

    @property
    def state_id(self) -> int:
        return getattr(self.undo_stack[-1], "_serial", 0) if self.undo_stack else 0

    @property
    def dirty(self) -> bool:
        """Changes since the last save (or load)."""
        return self.state_id != self._saved_state

    def execute(self, command: Command) -> Command:
        """Apply ``command`` and push it on the undo stack (merged into the previous one when both
        have the same ``merge_key``); clears the redo stack."""
        command.apply(self)
        self.revision += 1
        top = self.undo_stack[-1] if self.undo_stack else None
        if (top is not None and command.merge_key is not None and top.merge_key == command.merge_key
                and self.state_id != self._saved_state and top.merge(command)):
            self.redo_stack.clear()
            return top
        self._serial += 1
        command._serial = self._serial
        self.undo_stack.append(command)
        self.redo_stack.clear()
        return command

    def undo(self) -> Command | None:
        if not self.undo_stack:
            return None
        command = self.undo_stack.pop()
        command.revert(self)
        self.redo_stack.append(command)
        self.revision += 1
        return command

    def redo(self) -> Command | None:
        if not self.redo_stack:
            return None
        command = self.redo_stack.pop()
        command.apply(self)
        self.undo_stack.append(command)
        self.revision += 1
        return command

    def end_merge(self) -> None:
        """Stop merging into the last command (a drag ended)."""
        if self.undo_stack:
            self.undo_stack[-1].merge_key = None

    # -- poses --------------------------------------------------------------------------------------

    def clip_pose(self, clip: int | None, t: float) -> np.ndarray:
        """(N, 10) local pose of the clip at ``t`` (clamped; rest pose without a clip), no edits."""
        rig = self.asset.rig
        if clip is None or not self.clips:
            return rig.rest.copy()
        pose, _ = sample(self.clips[clip], t, rig.rest, self.asset.morph_start, self.asset.rest_morph)
        return pose[0]

    def pose(self, clip: int | None, t: float) -> np.ndarray:
        """The shown local pose: the clip at ``t`` with the unkeyed edits on top."""
        pose = self.clip_pose(clip, t)
        for n, local in self.pose_edits.items():
            pose[n] = local
        return pose

    def poses(self, clip: int, times: np.ndarray) -> np.ndarray:
        """(T, N, 10) clip poses at several times (onion skin), no edits."""
        rig = self.asset.rig
        pose, _ = sample(self.clips[clip], np.asarray(times, np.float64), rig.rest, self.asset.morph_start,
                         self.asset.rest_morph)
        return pose

    def world(self, pose: np.ndarray) -> np.ndarray:
        return world_matrices(self.asset.rig.parents, pose)

    def local_from_world(self, pose: np.ndarray, node: int, world_matrix: np.ndarray) -> np.ndarray:
        """The local TRS row (10,) giving ``node`` the world matrix ``world_matrix`` under ``pose``'s parents."""
        parent = int(self.asset.rig.parents[node])
        if parent >= 0:
            pw = self.world(pose)[parent]
            local_m = np.linalg.inv(pw) @ np.asarray(world_matrix, np.float64)
        else:
            local_m = np.asarray(world_matrix, np.float64)
        t, q, s = decompose_trs(local_m)
        return np.concatenate([t, q, s])

    @staticmethod
    def local_matrix(local: np.ndarray) -> np.ndarray:
        return compose_trs(local[T_SLICE], local[R_SLICE], local[S_SLICE])

    def collider_set(self) -> ColliderSet:
        names = self.clip_names()
        return ColliderSet(list(self.colliders), {names[i]: dict(info.visibility) for i, info in enumerate(self.info)
                                                  if info.visibility})

    # -- saving -------------------------------------------------------------------------------------

    def to_document(self) -> Document:
        """The glTF document to write: the loaded one with these clips, frame rates, colliders."""
        src = self.asset.document
        rig = self.asset.rig
        out = copy.copy(src)
        by_node: dict[int, list[Collider]] = {}
        for c in self.colliders:
            by_node.setdefault(int(rig.node_of[c.node]), []).append(c)
        nodes = []
        for i, node in enumerate(src.nodes):
            n = copy.copy(node)
            n.extras = node_extras(getattr(node, "extras", {}) or {}, by_node.get(i, []))
            nodes.append(n)
        out.nodes = nodes
        animations = []
        for clip, info in zip(self.clips, self.info):
            channels = [Channel(int(rig.node_of[t.node]), t.path, t.interpolation, t.times, t.values) for t in clip.tracks]
            extras = dict(info.extras)
            extras[FPS_KEY] = info.fps
            animations.append(Animation(clip.name, channels, clip_extras(extras, info.visibility)))
        out.animations = animations
        return out

    def save(self, path: str | None = None) -> str:
        """Write the document to ``path`` (default: where it came from) as .glb or .gltf, through a
        temporary file in the same folder (a failed save leaves the old file alone). EditError with
        one line when the path cannot be written; the document then stays unsaved."""
        from ..io.gltf_write import write_gltf

        path = os.fspath(path or self.path or "")
        if not path:
            raise EditError("no file to save to: give a path ending in .glb or .gltf")
        suffix = os.path.splitext(path)[1].lower()
        if suffix not in (".glb", ".gltf"):
            raise EditError(f"cannot save {path}: the file name must end in .glb or .gltf")
        for clip in self.clips:
            if not clip.tracks:
                raise EditError(f"cannot save {path}: clip {clip.name!r} has no keys (glTF animations need a channel)")
        document = self.to_document()
        folder = os.path.dirname(os.path.abspath(path))
        tmp = None
        try:
            fd, tmp = tempfile.mkstemp(suffix=suffix, prefix=".skeletal-save-", dir=folder)
            os.close(fd)
            write_gltf(document, tmp, embed=True)
            os.replace(tmp, path)
            tmp = None
        except OSError as exc:
            raise EditError(f"cannot save {path}: {exc.strerror or exc}") from None
        finally:
            if tmp is not None and os.path.exists(tmp):
                os.unlink(tmp)
        self.path = path
        self._saved_state = self.state_id
        return path

    def write_copy(self, path: str) -> str:
        """Write the document to ``path`` without marking it saved (autosave)."""
        from ..io.gltf_write import write_gltf

        write_gltf(self.to_document(), path)
        return path

    def mark_saved(self) -> None:
        self._saved_state = self.state_id


def autosave_path(path: str) -> str:
    """The sibling file autosaves go to: ``walk.glb`` -> ``walk.autosave.glb``."""
    root = os.path.splitext(os.fspath(path))[0]
    return root + ".autosave.glb"


__all__ = [
    "EditDocument", "EditError", "ClipInfo", "Command", "ClipEdit", "InsertPoseKeys", "DeleteKeys", "MoveKeys",
    "SetKeyValue", "SetInterpolation", "PasteKeys", "CopiedKey", "copy_keys", "SetClipLength", "SetFps",
    "AddClip", "new_clip", "duplicate_clip", "RenameClip", "DeleteClip", "SetPose", "SetPoses", "ClearPoseEdits",
    "ik_chain", "ik_pose", "AddCollider", "SetCollider", "RemoveCollider", "KeyColliderVisibility", "Batch", "autosave_path",
]
