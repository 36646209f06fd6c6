"""A motion-matching database: every frame of a set of clips on one rig, with its feature vector.

Build one from an asset's clips (or any clips on its rig, e.g. a BVH folder retargeted first), save it
as one ``.npz`` file and search it:

>>> from skeletal.demo import locomotion_asset
>>> asset = locomotion_asset()
>>> db = MatchingDatabase.build(asset, exclude=("idle", "wave", "walk", "run"), mirror=True)   # doctest: +SKIP
>>> db.save("locomotion.npz"); db = MatchingDatabase.load("locomotion.npz")                  # doctest: +SKIP
>>> frame = db.search(db.normalise(raw_query))[0]; db.clip_name(frame), db.time[frame]      # doctest: +SKIP

What a row holds (F rows; see :mod:`~skeletal.playback.locomotion.features` for the columns):

* ``features`` (F, D) float32: each group's raw columns minus the group's column means, divided by
  the group's scale (the mean of its columns' standard deviations), times the group's weight; a query
  is made comparable by :meth:`MatchingDatabase.normalise`;
* ``clip`` (F,) the clip's index in ``clip_names``, ``time`` (F,) seconds into it, ``mirrored`` (F,)
  whether the row is the mirror image of that frame (left and right swapped), ``range_of`` (F,) the
  index of the range (``ranges`` (R, 2): first row, end row) the row belongs to.

Rows come in ranges: the frames of one clip from ``start`` to ``stop`` seconds (a :class:`Range`, by
default the whole clip) sampled at ``fps``; a range has tags (default: its clip's name) that
``include``/``exclude`` select by. The last ``end_margin`` frames of each range are left out (their
future trajectory runs past the clip's end). Mirrored rows follow the originals, range by range.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from typing import Iterable, Sequence

import numpy as np

from ...asset import Asset
from ...anim.clip import Clip
from ...errors import SkeletalError
from ...anim.pose import world_matrices
from ...anim.sampling import sample
from . import search as S
from .features import Feature, compute_features, default_features, layout, mirror_columns, root_frames

FORMAT = "skeletal-motion-matching"
VERSION = 1


@dataclass(frozen=True)
class Range:
    """The frames of clip ``clip`` (name) from ``start`` to ``stop`` seconds (None: the clip's end),
    tagged ``tags`` (default: the clip's name)."""

    clip: str
    start: float = 0.0
    stop: float | None = None
    tags: tuple[str, ...] = ()


@dataclass
class MatchingDatabase:
    """Feature rows of every frame of some clips (see the module docstring); :meth:`build` makes one."""

    features: np.ndarray  # (F, D) float32, normalised and weighted
    mean: np.ndarray  # (D,) float64 column means (of raw features)
    scale: np.ndarray  # (D,) float64 group scale / group weight per column
    clip: np.ndarray  # (F,) int64 index into clip_names
    time: np.ndarray  # (F,) float64 seconds
    mirrored: np.ndarray  # (F,) bool
    range_of: np.ndarray  # (F,) int64
    ranges: np.ndarray  # (R, 2) int64 first row, end row
    range_tags: list[tuple[str, ...]]
    clip_names: list[str]
    feature_set: tuple[Feature, ...]
    fps: float
    root: str
    forward: tuple[float, float, float]
    mirror_source: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0, np.int64))  # (D,)
    mirror_sign: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))  # (D,)
    _boxes: S.Boxes | None = field(default=None, repr=False)

    # -- building ------------------------------------------------------------------------------

    @classmethod
    def build(cls, asset: Asset, clips: Iterable[str | Clip | Range] | None = None, *,
              features: Sequence[Feature] | None = None, fps: float = 60.0, root: str | None = None,
              forward: Sequence[float] = (0.0, 0.0, 1.0), include: Iterable[str] | None = None,
              exclude: Iterable[str] = (), mirror: bool = False, end_margin: int | None = None) -> MatchingDatabase:
        """A database of ``clips`` (names, Clip objects on ``asset``'s rig, or :class:`Range`; default:
        every clip of the asset) sampled at ``fps``. ``features``: the groups (default
        :func:`~skeletal.playback.locomotion.features.default_features` for the demo character's joint
        names). ``root``: the joint whose ground position and ``forward`` axis (its local axis) define the
        character frame (default: the rig's first joint). ``include``/``exclude``: tags (a range is kept
        when it has an included tag, or ``include`` is None, and no excluded one). ``mirror``: add the
        mirror image of every row (left/right joint names, see
        :func:`~skeletal.playback.locomotion.features.mirror_name`). ``end_margin``: frames left out at
        each range's end (default: the longest trajectory horizon)."""
        feature_set = tuple(features) if features is not None else default_features()
        if not feature_set:
            raise SkeletalError("a matching database needs at least one feature")
        if not (np.isfinite(fps) and fps > 0):
            raise SkeletalError(f"fps must be positive, got {fps}")
        rig = asset.rig
        root_name = root if root is not None else rig.names[0]
        if root_name not in rig.names:
            raise SkeletalError(f"{asset.path}: the rig has no root joint {root_name!r}")
        root_index = rig.find(root_name)
        forward_axis = np.asarray(forward, np.float64)
        if forward_axis.shape != (3,) or not np.isfinite(forward_axis).all() or np.linalg.norm(forward_axis) == 0:
            raise SkeletalError(f"forward must be a non-zero 3-vector, got {forward}")
        horizon = max([max(f.frames) for f in feature_set if f.kind.startswith("trajectory")], default=0)
        margin = horizon if end_margin is None else int(end_margin)
        ranges = _ranges(asset, clips)
        wanted = None if include is None else set(include)
        unwanted = set(exclude)
        ranges = [(c, r) for c, r in ranges if (wanted is None or wanted & set(r.tags)) and not unwanted & set(r.tags)]
        if not ranges:
            raise SkeletalError(f"{asset.path}: no clip range is left to build a matching database from")
        joint_index = {n: i for i, n in enumerate(rig.names)}
        names: list[str] = []
        raw, clip_of, times, range_tags, bounds = [], [], [], [], []
        for clip, r in ranges:
            if clip.name not in names:
                names.append(clip.name)
            stop = clip.duration if r.stop is None else min(r.stop, clip.duration)
            t = np.arange(r.start, stop + 0.5 / fps, 1.0 / fps)
            t = t[t <= stop + 1e-9]
            if len(t) <= margin + 1:
                continue  # too short to have a frame with a whole future
            pose, _ = sample(clip, t, rig.rest, asset.morph_start, asset.rest_morph)
            world = world_matrices(rig.parents, pose)
            position, yaw = root_frames(world, root_index, forward_axis)
            f = compute_features(world[:, :, :3, 3], position, yaw, fps, feature_set, joint_index)
            keep = len(t) - margin
            raw.append(f[:keep])
            clip_of.append(np.full(keep, names.index(clip.name)))
            times.append(t[:keep])
            range_tags.append(r.tags)
        if not raw:
            raise SkeletalError(f"{asset.path}: every clip range is shorter than the trajectory horizon ({margin} frames)")
        source, sign = mirror_columns(feature_set) if mirror else (np.arange(raw[0].shape[1]), np.ones(raw[0].shape[1]))
        rows, clips_a, times_a, mirrored, range_of = [], [], [], [], []
        for flip in ((False, True) if mirror else (False,)):
            for k, f in enumerate(raw):
                rows.append(f[:, source] * sign if flip else f)
                clips_a.append(clip_of[k])
                times_a.append(times[k])
                mirrored.append(np.full(len(f), flip))
                range_of.append(np.full(len(f), len(bounds)))
                start = sum(len(x) for x in rows[:-1])
                bounds.append((start, start + len(f)))
        all_rows = np.concatenate(rows)
        mean, scale = _normalisation(all_rows, feature_set, source, sign, mirror)
        db = cls(
            features=np.ascontiguousarray(((all_rows - mean) / scale).astype(np.float32)),
            mean=mean, scale=scale, clip=np.concatenate(clips_a).astype(np.int64), time=np.concatenate(times_a),
            mirrored=np.concatenate(mirrored), range_of=np.concatenate(range_of).astype(np.int64),
            ranges=np.array(bounds, np.int64).reshape(-1, 2), range_tags=range_tags * (2 if mirror else 1),
            clip_names=names, feature_set=feature_set, fps=float(fps), root=root_name,
            forward=(float(forward_axis[0]), float(forward_axis[1]), float(forward_axis[2])),
        )
        db.mirror_source, db.mirror_sign = mirror_columns(feature_set) if mirror else (source, sign)
        return db

    # -- queries -------------------------------------------------------------------------------

    @property
    def width(self) -> int:
        """Columns per row (D)."""
        return int(self.features.shape[1])

    def __len__(self) -> int:
        return int(self.features.shape[0])

    def normalise(self, raw: np.ndarray) -> np.ndarray:
        """Raw feature vectors (..., D) (as :func:`~skeletal.playback.locomotion.features.compute_features`
        makes them) in the database's normalised, weighted units (float32)."""
        raw = np.asarray(raw, np.float64)
        if raw.shape[-1:] != (self.width,):
            raise SkeletalError(f"feature vectors must have {self.width} columns, got shape {raw.shape}")
        return ((raw - self.mean) / self.scale).astype(np.float32)

    def mirror(self, rows: np.ndarray) -> np.ndarray:
        """Normalised feature rows (..., D) of the mirror image (left and right swapped) of ``rows``."""
        if not len(self.mirror_source):
            raise SkeletalError("this database was built without mirror=True (no mirror map)")
        return (np.asarray(rows)[..., self.mirror_source] * self.mirror_sign).astype(np.float32)

    @property
    def boxes(self) -> S.Boxes:
        """The bounding boxes of :meth:`search` (built on first use)."""
        if self._boxes is None:
            self._boxes = S.build_boxes(self.features)
        return self._boxes

    def search(self, queries: np.ndarray, *, brute_force: bool = False,
               hints: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The nearest row to each normalised query (N, D) or (D,): (rows (N,), squared distances (N,)),
        by the bounding-box search (or brute force: the same rows). ``hints`` (N,): a row per query
        that is probably near (the one playing; -1: none), which speeds the box search up."""
        if brute_force:
            return S.brute_force(self.features, queries)
        return S.box_search(self.features, self.boxes, queries, hints)

    def clip_name(self, row: int) -> str:
        """The name of the clip row ``row`` comes from."""
        return self.clip_names[int(self.clip[row])]

    def group(self, name: str) -> slice:
        """The columns of the feature group ``name``."""
        for f, columns in zip(self.feature_set, layout(self.feature_set)):
            if f.name == name:
                return columns
        raise SkeletalError(f"no feature group named {name!r} (groups: {[f.name for f in self.feature_set]})")

    # -- files -------------------------------------------------------------------------------

    def save(self, path: str | os.PathLike) -> None:
        """Write the database as one ``.npz`` file (arrays plus a JSON header)."""
        header = dict(format=FORMAT, version=VERSION, clip_names=self.clip_names, range_tags=[list(t) for t in self.range_tags],
                      features=[asdict(f) for f in self.feature_set], fps=self.fps, root=self.root, forward=list(self.forward))
        np.savez(path, header=np.array(json.dumps(header)), features=self.features, mean=self.mean, scale=self.scale,
                 clip=self.clip, time=self.time, mirrored=self.mirrored, range_of=self.range_of, ranges=self.ranges,
                 mirror_source=self.mirror_source, mirror_sign=self.mirror_sign)

    @classmethod
    def load(cls, path: str | os.PathLike) -> MatchingDatabase:
        """Read a database :meth:`save` wrote; a file that is not one raises :class:`SkeletalError`
        naming it."""
        try:
            with np.load(path, allow_pickle=False) as data:
                arrays = {k: data[k] for k in data.files}
            header = json.loads(str(arrays.pop("header")))
            if header.get("format") != FORMAT or header.get("version") != VERSION:
                raise ValueError(f"not a {FORMAT} file of version {VERSION}")
            feature_set = tuple(Feature(**{**f, "frames": tuple(f["frames"])}) for f in header["features"])
            db = cls(features=np.ascontiguousarray(arrays["features"], np.float32), mean=arrays["mean"],
                     scale=arrays["scale"], clip=arrays["clip"], time=arrays["time"], mirrored=arrays["mirrored"],
                     range_of=arrays["range_of"], ranges=arrays["ranges"],
                     range_tags=[tuple(t) for t in header["range_tags"]], clip_names=list(header["clip_names"]),
                     feature_set=feature_set, fps=float(header["fps"]), root=str(header["root"]),
                     forward=tuple(float(x) for x in header["forward"]),  # type: ignore[arg-type]
                     mirror_source=arrays["mirror_source"].astype(np.int64), mirror_sign=arrays["mirror_sign"])
        except (OSError, ValueError, KeyError, TypeError, SkeletalError) as e:
            raise SkeletalError(f"{os.fspath(path)}: not a readable motion-matching database ({e})") from None
        db._check(os.fspath(path))
        return db

    def _check(self, where: str) -> None:
        F, D = self.features.shape if self.features.ndim == 2 else (-1, -1)
        width = sum(f.width for f in self.feature_set)
        problems = []
        if D != width:
            problems.append(f"features have {D} columns, the feature groups {width}")
        for name in ("clip", "time", "mirrored", "range_of"):
            if getattr(self, name).shape != (F,):
                problems.append(f"{name} has shape {getattr(self, name).shape}, expected ({F},)")
        if self.mean.shape != (width,) or self.scale.shape != (width,):
            problems.append("mean/scale do not match the columns")
        if F > 0 and (self.clip.min() < 0 or self.clip.max() >= len(self.clip_names)):
            problems.append("clip indices out of range")
        if F > 0 and (self.range_of.min() < 0 or self.range_of.max() >= len(self.ranges)):
            problems.append("range indices out of range")
        if len(self.mirror_source) and (self.mirror_source.shape != (width,) or self.mirror_source.min() < 0
                                        or self.mirror_source.max() >= width):
            problems.append("the mirror map does not match the columns")
        if not np.isfinite(self.features).all():
            problems.append("features are not all finite")
        if problems:
            raise SkeletalError(f"{where}: not a consistent motion-matching database ({'; '.join(problems)})")


def _ranges(asset: Asset, clips: Iterable[str | Clip | Range] | None) -> list[tuple[Clip, Range]]:
    """(clip, range) pairs for the build's ``clips`` argument."""
    out = []
    for item in (asset.clips if clips is None else clips):
        if isinstance(item, Range):
            clip = asset.clip(item.clip)
            r = item if item.tags else Range(item.clip, item.start, item.stop, (item.clip,))
        elif isinstance(item, Clip):
            clip, r = item, Range(item.name, tags=(item.name,))
        else:
            clip = asset.clip(item)
            r = Range(clip.name, tags=(clip.name,))
        nodes = [t.node for t in clip.tracks]
        if nodes and (min(nodes) < 0 or max(nodes) >= len(asset.rig)):
            raise SkeletalError(f"{asset.path}: clip {clip.name!r} animates node {max(nodes)}, the rig has "
                                f"{len(asset.rig)} (a clip of another rig: retarget it first)")
        if not (np.isfinite(r.start) and (r.stop is None or np.isfinite(r.stop))):
            raise SkeletalError(f"range of clip {clip.name!r}: start and stop must be finite seconds")
        out.append((clip, r))
    return out


def _normalisation(rows: np.ndarray, feature_set: tuple[Feature, ...], source: np.ndarray, sign: np.ndarray,
                   mirror: bool) -> tuple[np.ndarray, np.ndarray]:
    """Column means (D,) and per-column divisors (D,) = group scale / group weight. With mirrored rows
    the statistics are made exactly symmetric (a group and its partner share a scale; means map onto
    each other), so mirroring commutes with normalising."""
    mean = rows.mean(axis=0)
    std = rows.std(axis=0)
    if mirror:
        mean = 0.5 * (mean + mean[source] * sign)
        std = 0.5 * (std + std[source])
    scale = np.empty(rows.shape[1])
    for f, columns in zip(feature_set, layout(feature_set)):
        group = float(std[columns].mean())
        scale[columns] = (group if group > 1e-8 else 1.0) / f.weight
    if mirror:
        scale = 0.5 * (scale + scale[source])
    return mean, scale
