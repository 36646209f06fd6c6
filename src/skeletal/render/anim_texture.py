"""Baked animation textures: clips as a float texture of skin palettes, for crowds drawn with nothing
per frame on the CPU but a time uniform (GPU Gems 3 chapter 2; Unreal's AnimToTexture, bone mode).

Layout (:class:`AnimTexture`): one texture row per baked frame, clip after clip; in a row, texel
``3 * slot + i`` (RGBA) is row ``i`` of palette slot ``slot``'s row-major 3x4 matrix (``world[joint] @
inverse_bind``; slots as :class:`~skeletal.render.layout.PaletteLayout` numbers them: every skin's
joints, then one per rigid mesh node). Clip c's frames are rows ``first_row .. first_row + frames - 1``
at times ``k * duration / (frames - 1)``: both ends and at least ``fps`` frames a second. A shader at clip time
``t`` reads the rows ``floor(f)`` and the next, ``f = t * (frames - 1) / duration``, and lerps them (``shaders/anim_texture.glsl``).
Lerping matrices between frames is the technique's error; :func:`texture_error` measures it against
live posing, at and between the baked frames.

Files (:func:`save_texture`, :func:`load_texture`): ``.npy`` or ``.bin`` (float32, exact; ``.bin`` is raw
little-endian texels for engines), ``.png`` (RGBA, 16 bits
per channel, each channel mapped from its [lo, hi] range: ``value = lo + (hi - lo) * texel / 65535``),
each with a JSON sidecar (``X.json``) describing the layout, the clips and the encoding.

>>> tex = bake_texture(asset, fps=30)                            # doctest: +SKIP
>>> save_texture(tex, "crowd_anim.png")   # and crowd_anim.json  # doctest: +SKIP
>>> texture_error(asset, tex)["between_frames"]                  # doctest: +SKIP
"""

from __future__ import annotations

import json
import math
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from ..errors import SkeletalError
from .layout import PaletteLayout, pose_at

FORMAT = "skeletal-anim-texture"
#: texels per palette matrix (RGBA rows of a 3x4)
TEXELS_PER_SLOT = 3
#: the largest texture side the command writes (GL_MAX_TEXTURE_SIZE of most GPUs is 16384 or more)
MAX_SIDE = 16384


@dataclass
class AnimTexture:
    """Baked palettes: ``texels`` (frames of every clip, slots * 3, 4) float32 (see the module docstring);
    ``clips``: per clip ``{"name", "first_row", "frames", "duration"}``; ``fps``: the baking rate."""

    texels: np.ndarray
    fps: float
    clips: list[dict] = field(default_factory=list)
    slot_names: list[str] = field(default_factory=list)

    @property
    def joint_count(self) -> int:
        return self.texels.shape[1] // TEXELS_PER_SLOT

    def clip_index(self, key: str | int) -> int:
        if isinstance(key, (int, np.integer)) and 0 <= int(key) < len(self.clips):
            return int(key)
        for i, clip in enumerate(self.clips):
            if clip["name"] == key:
                return i
        raise SkeletalError(f"the animation texture has no clip {key!r} (it has {[c['name'] for c in self.clips]})")

    def palettes(self, clip: str | int, times: np.ndarray) -> np.ndarray:
        """(T, slots, 3, 4) float32 at clip-local ``times`` (looped over the clip), interpolated between
        frames exactly as the shader does it: the CPU reference of ``anim_texture.glsl``."""
        entry = self.clips[self.clip_index(clip)]
        times = np.asarray(times, np.float64)
        duration = entry["duration"]
        t = times - duration * np.floor(times / duration) if duration > 0 else np.zeros_like(times)
        steps = entry["frames"] - 1
        f = np.minimum(t * (steps / duration), steps) if duration > 0 else np.zeros_like(t)
        f0 = np.floor(f)
        r0 = (entry["first_row"] + f0).astype(np.int64)
        r1 = (entry["first_row"] + np.minimum(f0 + 1, entry["frames"] - 1)).astype(np.int64)
        a = (f - f0).astype(np.float32)[:, None, None]
        rows = self.texels[r0] * (1 - a) + self.texels[r1] * a
        return rows.reshape(len(times), self.joint_count, 3, 4)

    def describe(self) -> dict:
        """The JSON sidecar's description (without the encoding and the error)."""
        return {"format": FORMAT, "version": 1, "width": int(self.texels.shape[1]), "height": int(self.texels.shape[0]),
                "fps": self.fps, "joint_count": self.joint_count, "texels_per_joint": TEXELS_PER_SLOT,
                "layout": "row = frame (clip after clip); texel 3*slot+i = row i of slot's row-major 3x4 palette "
                          "matrix (world[joint] @ inverse_bind); RGBA = the row's 4 columns",
                "clips": self.clips, "slots": self.slot_names}


def _frame_count(duration: float, fps: float) -> int:
    """Frames of a clip baked at ``fps`` or a little more: both ends and whole steps between (one for a
    still clip)."""
    if duration <= 0:
        return 1
    return int(math.ceil(duration * fps - 1e-9)) + 1


def frame_times(duration: float, frames: int) -> np.ndarray:
    """The clip times of a clip's baked frames: ``frames`` evenly from 0 to ``duration``, both included."""
    if frames <= 1 or duration <= 0:
        return np.zeros(max(frames, 1))
    return np.arange(frames) * (duration / (frames - 1))


def bake_texture(asset, clips: Sequence[str | int] | None = None, fps: float = 30.0) -> AnimTexture:
    """Bake ``clips`` (default: all) of ``asset`` at ``fps`` into an :class:`AnimTexture` (posed in float64
    by :func:`skeletal.sample` and :func:`skeletal.world_matrices`, stored float32)."""
    if not (np.isfinite(fps) and fps > 0):
        raise SkeletalError(f"fps must be positive, got {fps}")
    if not asset.clips:
        raise SkeletalError(f"{asset.name} has no clips to bake")
    chosen = [asset.clip(c) for c in clips] if clips else list(asset.clips)
    layout = PaletteLayout(asset)
    width = layout.joint_count * TEXELS_PER_SLOT
    frames = [_frame_count(c.duration, fps) for c in chosen]
    if width > MAX_SIDE or sum(frames) > MAX_SIDE:
        raise SkeletalError(f"{asset.name}: an animation texture of {width} x {sum(frames)} texels is over "
                            f"{MAX_SIDE} on a side: bake fewer clips or a lower fps")
    rows, entries, first = [], [], 0
    for clip, count in zip(chosen, frames):
        times = frame_times(clip.duration, count)
        world, _ = pose_at(asset, clip, times, loop="clamp")
        rows.append(layout.palettes(world).reshape(count, width, 4))
        entries.append({"name": clip.name, "first_row": first, "frames": count, "duration": float(clip.duration)})
        first += count
    names = [asset.rig.names[j] for s in asset.skins for j in s.joints]
    names += [asset.rig.names[asset.rig.index_of[n]] for n in layout.rigid_slot]
    return AnimTexture(np.ascontiguousarray(np.concatenate(rows), np.float32), float(fps), entries, names)


def slot_boxes(asset, layout: PaletteLayout) -> np.ndarray:
    """(slots, 8, 3): the corners of each palette slot's bounding box of the bind-pose vertices it moves
    (a skin joint: those it weighs; a rigid slot: its meshes' vertices); zeros for a slot without any.
    A palette difference moves those vertices by at most its largest effect on the corners."""
    lo = np.full((layout.joint_count, 3), np.inf)
    hi = np.full((layout.joint_count, 3), -np.inf)
    for instance in asset.mesh_instances:
        for prim in instance.primitives:
            points = np.asarray(prim.source.positions, np.float64)
            if not len(points):
                continue
            if instance.skin is not None and prim.joints is not None:
                slots = (layout.skin_offset[instance.skin] + prim.joints).reshape(-1)
                keep = (prim.weights > 0).reshape(-1)
                where = np.repeat(np.arange(len(points)), prim.joints.shape[1])[keep]
                slots = slots[keep]
            else:
                slots = np.full(len(points), layout.rigid_slot[instance.node])
                where = np.arange(len(points))
            np.minimum.at(lo, slots, points[where])
            np.maximum.at(hi, slots, points[where])
    empty = ~np.isfinite(lo[:, 0])
    lo[empty] = hi[empty] = 0.0
    pick = np.array([[(k >> axis) & 1 for axis in range(3)] for k in range(8)], bool)
    return np.where(pick[None], hi[:, None, :], lo[:, None, :])


def vertex_displacement(a: np.ndarray, b: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """(T,) the most a vertex moves between palettes ``a`` and ``b`` (T, slots, 3, 4), bounded on each
    slot's box corners (``boxes`` from :func:`slot_boxes`): skinning blends the slots' matrices with
    weights summing to 1, so no vertex moves further than its slots' largest difference."""
    delta = a.astype(np.float64) - b.astype(np.float64)
    moved = np.einsum("tsij,scj->tsci", delta[..., :3], boxes) + delta[..., None, :, 3]  # (T, slots, 8, 3)
    return np.linalg.norm(moved, axis=-1).max(axis=(1, 2), initial=0.0)


def model_size(asset, layout: PaletteLayout, boxes: np.ndarray) -> float:
    """The diagonal of the posed mesh's box at the rest pose (every slot's box corners through its rest
    palette), or of the rest pose's joints for a model without meshes: the "size" errors are relative to."""
    world = pose_at(asset, None, [0.0])[0]
    palettes = layout.palettes(world)[0].astype(np.float64)  # (slots, 3, 4)
    used = np.any(boxes != 0.0, axis=(1, 2))
    if used.any():
        points = (np.einsum("sij,scj->sci", palettes[used, :, :3], boxes[used]) + palettes[used, None, :, 3]).reshape(-1, 3)
    else:
        points = world[0, :, :3, 3]
    return max(float(np.linalg.norm(points.max(0) - points.min(0))), 1e-12)


def texture_error(asset, texture: AnimTexture, samples: int = 3) -> dict:
    """How far the texture moves a vertex from live posing, in model units and as a fraction of the
    model's size (the rest pose's joint extent), at the baked frames and between them (``samples``
    points inside each interval): ``{"at_frames": {"max", "relative"}, "between_frames": {...},
    "size": ...}``. Between frames it is the technique's own error (a lerp of matrices); at frames, the
    storage's (float32 rounding, 16-bit quantisation). Sizes are the posed mesh's (:func:`model_size`)."""
    layout = PaletteLayout(asset)
    boxes = slot_boxes(asset, layout)
    size = model_size(asset, layout, boxes)
    out: dict = {"size": size}
    inside = list((np.arange(samples) + 1) / (samples + 1))
    for label, fractions in (("at_frames", [0.0]), ("between_frames", inside)):
        worst = 0.0
        for i, entry in enumerate(texture.clips):
            clip = asset.clip(entry["name"])
            base = frame_times(entry["duration"], entry["frames"])
            step = base[1] - base[0] if len(base) > 1 else 0.0
            times = (base[:, None] + np.asarray(fractions)[None, :] * step).reshape(-1)
            times = times[times < clip.duration] if clip.duration > 0 else times[:1]  # the shader loops at the end
            if not len(times):
                continue
            world, _ = pose_at(asset, clip, times, loop="clamp")
            moved = vertex_displacement(texture.palettes(i, times), layout.palettes(world), boxes)
            worst = max(worst, float(moved.max(initial=0.0)))
        out[label] = {"max": worst, "relative": worst / size}
    return out


# -- files --------------------------------------------------------------------------------------


def sidecar(path: str | Path) -> Path:
    """The JSON file that describes texture file ``path`` (``X.npy`` -> ``X.json``)."""
    return Path(path).with_suffix(".json")


def save_texture(texture: AnimTexture, path: str | Path, error: dict | None = None) -> dict:
    """Write ``texture`` to ``path`` (.npy float32, or .png 16-bit RGBA mapped per channel) and its JSON
    sidecar; returns the sidecar's content. ``error``: :func:`texture_error`'s report, kept in the JSON."""
    path = Path(path)
    suffix = path.suffix.lower()
    meta = texture.describe()
    if suffix == ".npy":
        np.save(path, texture.texels)
        meta["encoding"] = {"type": "float32", "file": "numpy .npy, shape (height, width, 4)"}
    elif suffix == ".bin":
        path.write_bytes(texture.texels.astype("<f4").tobytes())
        meta["encoding"] = {"type": "float32", "file": "raw little-endian float32 RGBA texels, row after row "
                                                       "(a three.js DataTexture / Godot Image FORMAT_RGBAF)"}
    elif suffix == ".png":
        lo = texture.texels.reshape(-1, 4).min(axis=0).astype(np.float64)
        hi = texture.texels.reshape(-1, 4).max(axis=0).astype(np.float64)
        span = np.where(hi > lo, hi - lo, 1.0)
        quantised = np.rint((texture.texels - lo) / span * 65535.0).clip(0, 65535).astype(np.uint16)
        path.write_bytes(_png16(quantised))
        meta["encoding"] = {"type": "unorm16", "lo": lo.tolist(), "hi": hi.tolist(),
                            "decode": "value = lo[c] + (hi[c] - lo[c]) * texel[c] / 65535 (texel as a 16-bit integer)"}
    else:
        raise SkeletalError(f"cannot write an animation texture to {path.name}: use .npy or .bin (float32) or .png "
                            "(16-bit)")
    if error is not None:
        meta["error"] = error
    sidecar(path).write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    return meta


def load_texture(path: str | Path) -> AnimTexture:
    """Read a texture written by :func:`save_texture` (decoded to float32) with its JSON sidecar."""
    path = Path(path)
    try:
        meta = json.loads(sidecar(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SkeletalError(f"{sidecar(path)}: cannot read the animation texture's description ({exc})") from None
    if meta.get("format") != FORMAT:
        raise SkeletalError(f"{sidecar(path)} does not describe a skeletal animation texture")
    encoding = meta.get("encoding", {}).get("type")
    try:
        if encoding == "float32" and path.suffix.lower() == ".bin":
            texels = np.fromfile(path, "<f4").astype(np.float32).reshape(meta["height"], meta["width"], 4)
        elif encoding == "float32":
            texels = np.load(path, allow_pickle=False).astype(np.float32)
        elif encoding == "unorm16":
            lo = np.asarray(meta["encoding"]["lo"], np.float64)
            hi = np.asarray(meta["encoding"]["hi"], np.float64)
            span = np.where(hi > lo, hi - lo, 1.0)
            texels = (lo + span * (_read_png16(path.read_bytes()) / 65535.0)).astype(np.float32)
        else:
            raise SkeletalError(f"{sidecar(path)}: unknown encoding {encoding!r}")
    except (OSError, ValueError, KeyError) as exc:
        raise SkeletalError(f"{path}: cannot read the animation texture ({exc})") from None
    if texels.shape != (meta["height"], meta["width"], 4):
        raise SkeletalError(f"{path}: texels of shape {texels.shape}, the description says "
                            f"({meta['height']}, {meta['width']}, 4)")
    return AnimTexture(texels, float(meta["fps"]), list(meta["clips"]), list(meta.get("slots", [])))


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def _png16(rgba: np.ndarray) -> bytes:
    """A 16-bit RGBA PNG of ``rgba`` (H, W, 4) uint16 (rows unfiltered, zlib-compressed)."""
    height, width = rgba.shape[:2]
    raw = np.zeros((height, 1 + width * 8), np.uint8)  # filter byte 0, then big-endian samples
    raw[:, 1:] = rgba.astype(">u2").reshape(height, -1).view(np.uint8)
    header = struct.pack(">IIBBBBB", width, height, 16, 6, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(raw.tobytes(), 6))
            + _chunk(b"IEND", b""))


def _read_png16(data: bytes) -> np.ndarray:
    """(H, W, 4) float64 samples of a 16-bit RGBA PNG as :func:`_png16` writes it (unfiltered rows)."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG file")
    at, header, idat = 8, None, []
    while at + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        at += 12 + length
    if header is None or header[2:5] != (16, 6, 0) or header[6] != 0:
        raise ValueError("not a 16-bit RGBA, non-interlaced PNG (as skeletal writes them)")
    width, height = header[0], header[1]
    if width * height > MAX_SIDE * MAX_SIDE:
        raise ValueError(f"{width} x {height} texels is too large")
    raw = np.frombuffer(zlib.decompress(b"".join(idat)), np.uint8).reshape(height, 1 + width * 8)
    if np.any(raw[:, 0] != 0):
        raise ValueError("rows use PNG filters (skeletal writes unfiltered rows)")
    return raw[:, 1:].copy().view(">u2").reshape(height, width, 4).astype(np.float64)
