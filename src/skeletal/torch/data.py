"""A ``torch.utils.data.Dataset`` of fixed-length motion windows over a folder of motion files.

Every file :func:`skeletal.load` reads (glTF/GLB, BVH, and whatever other readers are installed) is
loaded once; each of its clips is sampled on a uniform grid at ``fps`` by the library's sampler
(so files at 24, 30 or 120 fps, or keyed irregularly, all come out at one rate), posed by the numba
kernels, and cut into windows of ``window`` frames every ``stride`` frames. An item is a dict:

* ``pose`` (W, N, 10) float local pose rows ``t q(xyzw) s`` (feed to :func:`skeletal.torch.world_matrices`)
* ``positions`` (W, N, 3) float world positions of the nodes
* ``file`` (str), ``clip`` (str), ``start`` (int, first frame), ``fps`` (float)

so ``DataLoader(dataset, batch_size=B)`` gives (B, W, N, 10) and (B, W, N, 3). Batching needs the
same N everywhere: files must share their node names (checked here), or pass ``names`` to pick the
same joints, by name, from every file (e.g. the 22 body joints of a mixed Mixamo/BVH collection).

>>> ds = MotionWindows("motions/", window=60, stride=30, fps=30)              # doctest: +SKIP
>>> loader = torch.utils.data.DataLoader(ds, batch_size=32, shuffle=True)      # doctest: +SKIP
>>> next(iter(loader))["pose"].shape                                           # doctest: +SKIP
torch.Size([32, 60, 69, 10])
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import torch
from torch.utils.data import Dataset

from ..asset import READERS, load
from ..errors import ClipError, SkeletalError
from ..anim.pose import world_matrices
from ..anim.rig import Rig
from ..anim.sampling import sample
from .convert import frame_times


def motion_suffixes() -> tuple[str, ...]:
    """File suffixes :func:`skeletal.load` reads (glTF, GLB and every registered reader)."""
    return tuple(sorted({".gltf", ".glb", *(READERS.keys())}))


@dataclass(frozen=True)
class _Sequence:
    file: str
    clip: str
    slot: int  # position among the file's used clips
    frames: int
    pose: np.ndarray | None       # (T, N, 10) float32 when cached
    positions: np.ndarray | None  # (T, N, 3)


class MotionWindows(Dataset):
    """Fixed-length windows of local poses and world joint positions over a folder of motion files.

    Args:
        root: a folder (searched recursively unless ``recursive=False``), or a list of files.
        window: frames per item. ``stride``: frames between window starts (default ``window``: no
            overlap). A clip shorter than ``window`` frames gives no item.
        fps: the rate every clip is resampled to.
        clips: clip names to use (default: every clip of every file).
        names: node names to output, in this order, found in every file (default: all nodes; then all
            files must have the same node names).
        loop: loop mode for sampling (``clamp`` is the clip as authored).
        on_error: ``"raise"`` (default) stops at the first unreadable file with its
            :class:`skeletal.SkeletalError`; ``"skip"`` leaves it out and records it in ``errors``.
        cache: keep every sampled clip in memory (default; float32: T * N * 52 bytes). With False,
            only frame counts are kept and a file is reloaded when an item needs it.
        dtype: tensor dtype of ``pose`` and ``positions``.

    Attributes: ``files`` (the files used), ``errors`` (file -> message, with ``on_error="skip"``),
    ``rig`` (the first file's :class:`~skeletal.Rig`, for FK on the items when ``names`` is None),
    ``node_names`` (the N names of the output axis).
    """

    def __init__(self, root: str | os.PathLike | Iterable[str | os.PathLike], window: int, stride: int | None = None,
                 fps: float = 30.0, *, clips: Sequence[str] | None = None, names: Sequence[str] | None = None,
                 recursive: bool = True, loop: str = "clamp", on_error: str = "raise", cache: bool = True,
                 dtype: torch.dtype = torch.float32):
        if int(window) < 1:
            raise ValueError(f"window must be at least 1 frame, got {window}")
        stride = int(window) if stride is None else int(stride)
        if stride < 1:
            raise ValueError(f"stride must be at least 1 frame, got {stride}")
        if not fps > 0:
            raise ClipError(f"fps must be positive, got {fps}")
        if on_error not in ("raise", "skip"):
            raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
        self.window, self.stride, self.fps = int(window), stride, float(fps)
        self.clip_names = None if clips is None else tuple(clips)
        self.names = None if names is None else tuple(names)
        self.loop, self.cache, self.dtype = loop, cache, dtype
        self.errors: dict[str, str] = {}
        self.files = self._find_files(root, recursive)
        if not self.files:
            raise FileNotFoundError(f"no motion files ({', '.join(motion_suffixes())}) in {os.fspath(root) if isinstance(root, (str, os.PathLike)) else 'the list'}")
        self.rig: Rig | None = None
        self.node_names: tuple[str, ...] | None = None
        self._sequences: list[_Sequence] = []
        for file in self.files:
            try:
                self._sequences.extend(self._read(file, keep=cache))
            except (SkeletalError, OSError, ValueError) as exc:
                if on_error == "raise":
                    raise
                self.errors[file] = str(exc)
        self.files = [f for f in self.files if f not in self.errors]
        starts = []
        for s, seq in enumerate(self._sequences):
            for start in range(0, seq.frames - self.window + 1, self.stride):
                starts.append((s, start))
        self._index = np.asarray(starts, dtype=np.int64).reshape(-1, 2)
        self._memo: tuple[str, list[_Sequence]] | None = None

    # -- Dataset ------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._index)

    def __getitem__(self, i: int) -> dict:
        if not -len(self) <= i < len(self):
            raise IndexError(f"window {i} out of range ({len(self)} windows)")
        s, start = (int(v) for v in self._index[i])
        seq = self._sequences[s]
        if seq.pose is None:
            seq = self._reload(seq)
        stop = start + self.window
        return {
            "pose": torch.tensor(seq.pose[start:stop], dtype=self.dtype),  # copies: items never alias the cache
            "positions": torch.tensor(seq.positions[start:stop], dtype=self.dtype),
            "file": seq.file, "clip": seq.clip, "start": start, "fps": self.fps,
        }

    @property
    def sequences(self) -> list[tuple[str, str, int]]:
        """(file, clip, frame count at ``fps``) of every clip used."""
        return [(s.file, s.clip, s.frames) for s in self._sequences]

    # -- internals ----------------------------------------------------------------------------------

    @staticmethod
    def _find_files(root, recursive: bool) -> list[str]:
        suffixes = motion_suffixes()
        if isinstance(root, (str, os.PathLike)):
            path = Path(root)
            if path.is_file():
                return [str(path)]
            if not path.is_dir():
                raise FileNotFoundError(f"{os.fspath(root)}: no such folder")
            found = path.rglob("*") if recursive else path.glob("*")
            return sorted(str(p) for p in found if p.is_file() and p.suffix.lower() in suffixes)
        return [os.fspath(p) for p in root]

    def _read(self, file: str, keep: bool) -> list[_Sequence]:
        asset = load(file)
        rig = asset.rig
        if self.names is not None:
            missing = [n for n in self.names if n not in rig.names]
            if missing:
                raise SkeletalError(f"{os.path.basename(file)}: no nodes named {missing[:5]}")
            pick = np.array([rig.names.index(n) for n in self.names], dtype=np.int64)
            out_names = self.names
        else:
            pick = None
            out_names = rig.names
        if self.node_names is None:
            self.rig, self.node_names = rig, tuple(out_names)
        elif tuple(out_names) != self.node_names:
            raise SkeletalError(
                f"{os.path.basename(file)}: its {len(out_names)} node names differ from the first file's "
                f"{len(self.node_names)}; pass names=[...] to take the same joints from every file")
        clips = asset.clips if self.clip_names is None else [c for c in asset.clips if c.name in self.clip_names]
        out = []
        for slot, clip in enumerate(clips):
            times = frame_times(clip.duration, self.fps)
            if not keep:
                out.append(_Sequence(file, clip.name, slot, len(times), None, None))
                continue
            pose, _ = sample(clip, times, rig.rest, asset.morph_start, asset.rest_morph, loop=self.loop)
            positions = world_matrices(rig.parents, pose)[..., :3, 3]
            if pick is not None:
                pose, positions = pose[:, pick], positions[:, pick]
            out.append(_Sequence(file, clip.name, slot, len(times), pose.astype(np.float32), positions.astype(np.float32)))
        return out

    def _reload(self, seq: _Sequence) -> _Sequence:
        if self._memo is None or self._memo[0] != seq.file:
            self._memo = (seq.file, self._read(seq.file, keep=True))
        loaded = self._memo[1]
        if seq.slot < len(loaded) and loaded[seq.slot].clip == seq.clip:
            return loaded[seq.slot]
        raise SkeletalError(f"{os.path.basename(seq.file)}: clip {seq.clip!r} is gone (the file changed)")
