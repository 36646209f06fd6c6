"""Export: any :class:`~skeletal.asset.Asset` (from glTF, FBX or BVH) with any list of clips
(its own, retargeted, made with :mod:`skeletal.cliptools`) -> a glTF 2.0 ``Document`` -> a file.

The asset's document keeps its nodes, meshes, skins, materials and images; its animations are
replaced by the given clips, one glTF animation per clip, each track one channel (rig indices mapped
back to file node indices, times and values as stored). A BVH asset has no mesh: its file is a
skeleton with animations, which is valid glTF.

>>> import skeletal
>>> from skeletal.demo import demo_asset
>>> doc = asset_to_document(demo_asset(), ["walk"])
>>> [a.name for a in doc.animations]
['walk']
"""

from __future__ import annotations

import dataclasses
import os
from typing import Sequence

import numpy as np

from .asset import Asset
from .clip import Clip
from .document import Animation, Channel, Document
from .errors import ClipError


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
    return Animation(clip.name, channels)


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
    return dataclasses.replace(doc, animations=[clip_to_animation(c, asset) for c in chosen])


def export(asset: Asset, path: str | os.PathLike, clips: Sequence[Clip | str | int] | None = None) -> None:
    """Write ``asset`` with ``clips`` (see :func:`asset_to_document`) as ``.glb`` or ``.gltf``.

    >>> skeletal.export(skeletal.load("walk.bvh"), "walk.glb")         # doctest: +SKIP
    """
    from .io.gltf_write import write_gltf

    write_gltf(asset_to_document(asset, clips), path)
