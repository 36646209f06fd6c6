"""The up axis of a model file, found once where the file is loaded, and the file turned to stand Y up.

glTF is Y up by definition; motion capture is not: a BVH recorded Z up (MotionBuilder/Vicon exports,
height in the Z channel) lies on the floor when its axes are taken as they are. :func:`skeletal.load`
takes ``up=``, and so does every command (``--up auto|y|z|...``):

* ``"y"`` (the API's default): the file's axes as they are;
* ``"auto"`` (the commands' default): for formats without an up convention (BVH, and the Assimp
  formats), the axis is found from the skeleton and its motion by
  :func:`skeletal.retarget.detect_up` (the mean spine and leg directions of the first clip, snapped to
  +-X, +-Y, +-Z; the rest pose alone when the file has no motion; "y" for a rig without a
  recognisable hips joint). glTF and USD files are taken as their formats define them (Y up);
* ``"z"``, ``"-z"``, ``"x"``, ``"-x"``, ``"-y"``: the up axis of the file's motion, given (the rest
  pose of a humanoid is turned by its own axis, found from its skeleton: exports often keep a Y-up
  rest skeleton under Z-up motion).

Turning a file (:func:`turn_document`) happens on its :class:`~skeletal.document.Document` before the
asset is built: every root node's local transform, and the root nodes' translation and rotation keys,
are turned by the smallest rotation taking the up axis to +Y. Everything below the roots, skins
included (their inverse bind matrices are relative to the joints), follows; an export or an editor
save writes the turned model. ``asset.up`` (an :class:`UpAxis`) says what was found and done, and
:meth:`UpAxis.line` says it in one line (the commands print it on stderr).

>>> import skeletal
>>> asset = skeletal.load("walk_zup.bvh", up="auto")       # doctest: +SKIP
>>> asset.up.line("walk_zup.bvh")                           # doctest: +SKIP
'walk_zup.bvh: Z up (found from its skeleton and motion): turned to stand Y up (--up y keeps it as it is)'
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from .errors import SkeletalError

__all__ = ["UP_CHOICES", "UpAxis", "resolve_up", "turn_document", "check_up", "lying_roots"]

#: What ``up=`` / ``--up`` accepts: "auto" or the file's up axis.
UP_CHOICES: tuple[str, ...] = ("auto", "y", "z", "-z", "x", "-x", "-y")

#: Suffixes of formats with a defined up axis (Y): "auto" takes them as they are.
_Y_UP_FORMATS = (".gltf", ".glb", ".usd", ".usda", ".usdc", ".usdz")


@dataclass(frozen=True)
class UpAxis:
    """What :func:`skeletal.load` did about the file's up axis.

    ``motion``: the up axis of the file's clips ("y", "z", "-z", ...); ``rest``: that of its rest pose
    (exports often keep a Y-up rest skeleton under Z-up motion); ``how``: where they came from
    ("as read", "given", "found from its skeleton and motion", ...). ``turned``: whether the file was
    turned (either axis is not "y")."""

    motion: str = "y"
    rest: str = "y"
    how: str = "as read"

    @property
    def turned(self) -> bool:
        return self.motion != "y" or self.rest != "y"

    def line(self, name: str) -> str | None:
        """One line saying the file was turned (None when it was not)."""
        if not self.turned:
            return None
        axes = (f"{_axis_name(self.motion)} up" if self.motion == self.rest else
                f"motion {_axis_name(self.motion)} up, rest pose {_axis_name(self.rest)} up")
        return f"{name}: {axes} ({self.how}): turned to stand Y up (--up y keeps it as it is)"


def _axis_name(axis: str) -> str:
    return axis.upper()


def check_up(up: str | None) -> str:
    """``up`` normalised ("+Z" -> "z", None -> "y"); SkeletalError when it is not one of UP_CHOICES."""
    value = "y" if up is None else str(up).lower().replace("+", "").strip()
    if value not in UP_CHOICES:
        raise SkeletalError(f"up must be one of {', '.join(UP_CHOICES)}, got {up!r}")
    return value


def resolve_up(asset, up: str | None, suffix: str) -> UpAxis:
    """The :class:`UpAxis` of a loaded ``asset`` (read from a file with ``suffix``) for ``up``."""
    up = check_up(up)
    if up == "y":
        return UpAxis()
    if up != "auto":  # the motion's axis given; a humanoid's rest pose may stand otherwise (found)
        from .tools.retarget import _rest_up, canonical_names

        humanoid = len(asset.rig) > 0 and "hips" in canonical_names(asset.rig)
        return UpAxis(up, _rest_up(asset.rig) if humanoid else up, "given")
    if suffix.lower() in _Y_UP_FORMATS or len(asset.rig) == 0:
        return UpAxis("y", "y", "as its format defines")
    from .tools.retarget import _rest_up, canonical_names, detect_up

    if "hips" not in canonical_names(asset.rig):
        return UpAxis("y", "y", "no hips joint to find it from")
    rest = _rest_up(asset.rig)
    motion = detect_up(asset.clips[0], asset.rig) if asset.clips else rest
    how = "found from its skeleton and motion" if asset.clips else "found from its skeleton"
    return UpAxis(motion, rest, how)


def _turn(axis: str) -> tuple[np.ndarray, np.ndarray]:
    from .tools.retarget import _turn_to_y

    return _turn_to_y(axis)


def _turning_points(document, animated: set[int]) -> list[tuple[int, np.ndarray]]:
    """(node, P) for the nodes a turn is applied at: from every root down, the first node that has
    translation or rotation keys, or no keyed node below it; P (4, 4) is the world matrix of the
    static nodes above it (identity for a root). A static ``Root`` above keyed hips (common in BVH)
    thus stays as it is and the hips turn."""
    from .quat import compose_trs

    nodes = document.nodes
    keyed_below: dict[int, bool] = {}

    def has_keys(i: int) -> bool:
        stack, seen = [i], set()
        while stack:
            k = stack.pop()
            if k in seen:
                continue
            seen.add(k)
            if k in animated:
                return True
            stack.extend(nodes[k].children)
        return False

    points = []
    stack = [(i, np.eye(4)) for i, n in enumerate(nodes) if n.parent < 0]
    seen: set[int] = set()
    while stack:
        i, above = stack.pop()
        if i in seen:  # a malformed file's cycle: the reader refuses it, but never loop here
            continue
        seen.add(i)
        node = nodes[i]
        if i in animated or not keyed_below.setdefault(i, has_keys(i)) or not node.children:
            points.append((i, above))
            continue
        local = compose_trs(np.asarray(node.translation, np.float64), np.asarray(node.rotation, np.float64),
                            np.asarray(node.scale, np.float64))
        stack.extend((c, above @ local) for c in node.children)
    return points


def turn_document(document, motion: str, rest: str) -> None:
    """Turn ``document`` in place so that it stands Y up, by the smallest rotation taking axis
    ``motion`` to +Y for the clips and the one taking ``rest`` to +Y for the rest pose.

    The turn is applied at the turning points (:func:`_turning_points`; the roots in most files): a
    point with translation or rotation keys has its keys turned by ``motion`` (CUBICSPLINE tangents
    too) and its rest transform by ``rest``; a point without keys (a prop, a static subtree) turns by
    ``motion``. The turn is a world-space one: a point below static nodes (world matrix P) gets
    ``P^-1 Q P`` applied to its local transform. Scale keys and everything below the points are
    unchanged. Static nodes above the points must scale uniformly (as every exporter writes them)."""
    from .quat import compose_trs, decompose_trs, quat_mul

    animated = {c.node for a in document.animations for c in a.channels if c.path in ("translation", "rotation")}
    points = _turning_points(document, animated)

    def world_turn(axis: str, above: np.ndarray) -> np.ndarray:
        """The turn by ``axis`` as a change of a local matrix below ``above``: P^-1 Q P (4, 4)."""
        q4 = np.eye(4)
        q4[:3, :3] = _turn(axis)[1]
        return np.linalg.inv(above) @ q4 @ above

    key_turns: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    for i, above in points:
        node = document.nodes[i]
        axis = rest if i in animated else motion
        if axis != "y":
            change = world_turn(axis, above)
            if node.matrix is not None:
                node.matrix = change @ np.asarray(node.matrix, np.float64)
            local = compose_trs(np.asarray(node.translation, np.float64), np.asarray(node.rotation, np.float64),
                                np.asarray(node.scale, np.float64))
            t, r, _ = decompose_trs(change @ local)
            node.translation, node.rotation = t, r / np.linalg.norm(r)
        if i in animated and motion != "y":
            change = world_turn(motion, above)
            linear = change[:3, :3]
            _, q, _ = decompose_trs(change)  # P^-1 Q P with a uniformly scaled P: a rotation
            key_turns[i] = (linear, change[:3, 3], q / np.linalg.norm(q))
    if not key_turns:
        return
    for animation in document.animations:
        channels = []
        for channel in animation.channels:  # made from the packed arrays when the reader packed them
            values = channel.values
            turn = key_turns.get(channel.node)
            if turn is not None and channel.path == "translation":
                linear, offset, _ = turn
                v = values.astype(np.float64) @ linear.T
                if channel.interpolation == "CUBICSPLINE":
                    v[1::3] += offset  # [in-tangent, value, out-tangent]: tangents take the linear part
                else:
                    v += offset
                values = v.astype(channel.values.dtype)
            elif turn is not None and channel.path == "rotation":
                values = quat_mul(turn[2], values.astype(np.float64)).astype(channel.values.dtype)
            channels.append(dataclasses.replace(channel, values=values))
        animation.channels = channels
        animation.packed = None  # the clip is built from the turned channels


def lying_roots(document) -> list[str]:
    """Notes (one line each) on roots in no scene that carry a skin's joints and a rotation that tips
    the skeleton over (old COLLADA2GLTF exports: the model renders lying down, in three.js too), each
    with the ``--up`` axis that stands it up. Empty for a well-formed file.

    The suggested axis is where the root's rotation sends its local +Y (snapped to +-X, +-Y, +-Z);
    loading with that ``up`` turns the root back."""
    from .quat import quat_to_matrix

    in_scene = {int(r) for scene in document.scenes for r in scene}
    joint_nodes = {int(j) for skin in document.skins for j in skin.joints}
    children = {i: list(n.children) for i, n in enumerate(document.nodes)}
    notes = []
    for i, node in enumerate(document.nodes):
        if node.parent >= 0 or i in in_scene:
            continue
        stack, holds = [i], False
        seen: set[int] = set()
        while stack and not holds:
            k = stack.pop()
            if k in seen:
                continue
            seen.add(k)
            holds = k in joint_nodes
            stack.extend(children.get(k, ()))
        if not holds:
            continue
        q = np.asarray(node.rotation, np.float64)
        up = quat_to_matrix(q / max(np.linalg.norm(q), 1e-12)) @ np.array([0.0, 1.0, 0.0])
        k = int(np.argmax(np.abs(up)))
        axis = ("-" if up[k] < 0 else "") + "xyz"[k]
        if axis == "y":
            continue
        degrees = float(np.degrees(np.arccos(np.clip(up[1], -1.0, 1.0))))
        name = node.name or f"<node {i}>"
        notes.append(f"the skeleton root {name} [{i}] is in no scene and rotated {degrees:.0f} degrees off Y up: "
                     f"the model may lie down (three.js shows it so too); --up {axis} stands it up")
    return notes
