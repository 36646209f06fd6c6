"""Export: an :class:`~skeletal.asset.Asset` (from glTF, FBX or BVH) with any list of clips (its own,
retargeted, made with :mod:`skeletal.cliptools`) written back out.

* glTF/GLB (:func:`export`, :func:`asset_to_document`): the asset's document keeps its nodes, meshes,
  skins, materials and images; its animations are replaced by the given clips, one glTF animation per
  clip, each track one channel (rig indices mapped back to file node indices, times and values as
  stored). A BVH asset has no mesh: its file is a skeleton with animations, which is valid glTF.
* BVH (:func:`write_bvh`): samples a clip of any rig at a fixed frame rate, poses it (world
  matrices) and hands the frames to :func:`skeletal.io.bvh.format_bvh`, which turns them into BVH
  joints and Euler channels. What BVH cannot carry is dropped with a warning: morph weights, scale
  (world scale is baked into the OFFSETs, so joint positions stay exact), non-joint nodes (meshes,
  cameras) of a skinned model.

>>> import skeletal
>>> from skeletal.demo import demo_asset
>>> doc = asset_to_document(demo_asset(), ["walk"])
>>> [a.name for a in doc.animations]  # the clip names
['walk']
>>> skeletal.write_bvh(skeletal.load("Soldier.glb"), "Walk", "walk.bvh", rotation_order="ZXY")  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from pathlib import Path
from typing import Sequence

import numpy as np

from ..asset import Asset
from ..anim.clip import Clip, clip_frame_time
from ..document import Animation, Channel, Document
from ..errors import ClipError
from ..io.bvh import format_bvh
from ..anim.pose import world_matrices
from ..anim.rig import Rig
from ..anim.sampling import sample

__all__ = ["export", "asset_to_document", "clip_to_animation", "write_bvh", "clip_frame_time"]


def clip_to_animation(clip: Clip, asset: Asset) -> Animation:
    """One glTF animation from a clip of ``asset``'s rig (tracks -> channels, file node indices).

    Raises :class:`skeletal.ClipError` for an additive clip (glTF players apply tracks as absolute
    values) or a track whose node is not in the rig.
    """
    if clip.additive:
        raise ClipError(f"clip {clip.name!r} is additive: glTF has no additive animations; apply it to a base clip first")
    n = len(asset.rig)
    channels = []
    for k, track in enumerate(clip.tracks):
        if not 0 <= track.node < n:
            raise ClipError(f"clip {clip.name!r}: track {k} targets node {track.node}, the rig has {n} nodes")
        channels.append(Channel(int(asset.rig.node_of[track.node]), track.path, track.interpolation,
                                np.asarray(track.times, np.float32), np.asarray(track.values, np.float32)))
    animation = Animation(clip.name, channels)
    animation.properties = list(getattr(clip, "properties", []))  # KHR_animation_pointer tracks, by pointer
    return animation


def asset_to_document(asset: Asset, clips: Sequence[Clip | str | int] | None = None) -> Document:
    """A copy of ``asset``'s document whose animations are ``clips`` (Clip objects, or names/indices of
    the asset's own clips; default: all of the asset's clips). Node, mesh and skin data are shared
    with the asset's document, not copied (the writer only reads them)."""
    chosen = asset.clips if clips is None else [c if isinstance(c, Clip) else asset.clip(c) for c in clips]
    names = [c.name for c in chosen]
    if len(set(names)) != len(names):
        dupes = sorted({n for n in names if names.count(n) > 1})
        raise ClipError(f"clip names must be unique in one file, got {dupes} more than once")
    doc = asset.document
    scene = asset.scene if asset.scene is not None else doc.scene  # the scene shown is the file's default
    return dataclasses.replace(doc, animations=[clip_to_animation(c, asset) for c in chosen], scene=scene)


def export(asset: Asset, path: str | os.PathLike, clips: Sequence[Clip | str | int] | None = None, *,
           short_rotations: bool = False) -> None:
    """Write ``asset`` with ``clips`` (see :func:`asset_to_document`) as ``.glb`` or ``.gltf``, or as
    USD (UsdSkel) for ``.usda``/``.usdc``/``.usd``/``.usdz`` (:func:`skeletal.io.usd_write.write_usd`,
    needs ``skeletal[usd]``); ``short_rotations``: see :func:`skeletal.io.gltf_write.write_gltf` (on
    for compressed clips; glTF only).

    >>> skeletal.export(skeletal.load("walk.bvh"), "walk.glb")         # doctest: +SKIP
    >>> skeletal.export(skeletal.load("Soldier.glb"), "soldier.usdz")  # doctest: +SKIP
    """
    if os.path.splitext(os.fspath(path))[1].lower() in (".usda", ".usdc", ".usd", ".usdz"):
        from .usd_write import write_usd

        write_usd(asset, path, clips)
        return
    from ..io.gltf_write import write_gltf

    write_gltf(asset_to_document(asset, clips), path, short_rotations=short_rotations)


# ---------------------------------------------------------------------------------------------
# BVH

DEFAULT_FPS = 30.0


def write_bvh(
    source: Asset | Rig,
    clip: Clip | str | int | None,
    path: str | os.PathLike | None = None,
    *,
    rotation_order: str | dict[str, str] | None = "ZYX",
    fps: float | None = None,
    nodes: list[int] | np.ndarray | None = None,
    decimals: int = 6,
    force: bool = False,
) -> str:
    """Write ``clip`` of ``source`` (an :class:`Asset` or a :class:`Rig`) as BVH; returns the text.

    * ``clip``: a :class:`Clip`, a clip name/index of the asset, or None for the rest pose (1 frame).
    * ``rotation_order``: the Euler order of every joint's rotation channels (one of
      :data:`skeletal.io.bvh.ROTATION_ORDERS`), a dict joint name -> order, or None to keep each
      joint's order from the BVH file the asset was read from ("ZYX" otherwise).
    * ``fps``: frame rate; by default the clip's own key spacing when its keys lie on one uniform grid
      (a clip read from BVH is written back at its frame time, on its keys), else 30. Frames run
      from 0 until the clip's end is reached (the last frame may lie up to one frame past the end and
      shows the final pose).
    * ``nodes``: rig indices of the joints to write. By default every joint of every skin when the
      asset has skins (meshes, cameras and helper nodes are left out, their transforms folded into
      the joints below them; leaf joints stay named JOINTs), else every node (static leaves become
      End Sites).

    Angles are in degrees, lengths in the rig's units. Raises :class:`ClipError` for a bad clip or
    fps, for frames past :data:`skeletal.io.budget.FRAME_LIMIT` or 2 GB of text (unless ``force``), and
    ``ValueError`` for an unknown rotation order.
    """
    asset = source if isinstance(source, Asset) else None
    rig = asset.rig if asset is not None else source
    if asset is not None:
        asset.require_nodes("write as BVH (a BVH file is a skeleton)")
    elif len(rig) == 0:
        raise ClipError("the rig has no nodes: nothing to write as BVH")
    if isinstance(clip, Clip):
        the_clip = clip
    elif clip is None:
        the_clip = Clip("rest", [])
    elif asset is not None:
        the_clip = asset.clip(clip)
    else:
        raise ClipError("a Rig has no clips by name: pass a Clip")
    weights = sum(1 for t in the_clip.tracks if t.path == "weights")
    if weights:
        warnings.warn(f"BVH has no morph weights: {weights} weights tracks of clip {the_clip.name!r} are dropped", stacklevel=2)

    from ..io.budget import SamplingError, check_output, check_fps

    try:
        if fps is not None:
            check_fps(fps)
        frame_time = 1.0 / fps if fps is not None else (clip_frame_time(the_clip) or 1.0 / DEFAULT_FPS)
        # Frames cover the whole clip: the last one is at or up to one frame past its end (clamped there).
        exact = the_clip.duration / frame_time
        out_name = os.path.basename(os.fspath(path)) if path is not None else "the BVH text"
        if not np.isfinite(exact) or exact > 1e9:
            raise SamplingError(f"{out_name}: clip {the_clip.name!r} is {the_clip.duration:.4g} s: at "
                                f"{1.0 / frame_time:g} fps that is {exact:.3g} frames, more than any command samples")
        count = int(np.ceil(exact - 1e-6)) + 1
        # per frame and joint: a pose (80 bytes), a world matrix (128) and about 6 channels of text (80)
        check_output(out_name, count, 300 * len(rig), force=force, hint="a lower --fps")
    except SamplingError as exc:
        raise ClipError(str(exc)) from None
    times = np.arange(count) * frame_time
    if fps is None and count > 1 and clip_frame_time(the_clip) == frame_time:
        # Sample on the keys themselves (float32 times), not a float64 grid a hair away from them.
        times = next(t.times for t in the_clip.tracks if t.key_count > 1).astype(np.float64)

    if asset is not None:
        morph_start, rest_morph = asset.morph_start, asset.rest_morph
    else:
        morph_start, rest_morph = np.zeros(len(rig) + 1, dtype=np.int64), np.zeros(0)
    pose, _ = sample(the_clip, times, rig.rest, morph_start, rest_morph)
    world = world_matrices(rig.parents, pose)
    rest_world = world_matrices(rig.parents, rig.rest)

    if nodes is None and asset is not None and asset.skins:
        nodes = np.unique(np.concatenate([s.joints for s in asset.skins]))
    if rotation_order is None:
        channels = (asset.document.asset_info.get("channels", {}) if asset is not None else {}) or {}
        rotation_order = {name: "".join(c[0] for c in chans if c.endswith("rotation"))
                          for name, chans in channels.items()}
        rotation_order = {k: v for k, v in rotation_order.items() if len(v) == 3}
    out_file = os.fspath(path) if path is not None else "<bvh>"
    text = format_bvh(list(rig.names), rig.parents, world, rest_world, frame_time,
                      rotation_order=rotation_order, nodes=nodes, decimals=decimals,
                      end_sites=not (asset is not None and asset.skins), file=out_file)
    if path is not None:
        Path(path).write_text(text, encoding="utf-8")
    return text
