# Over 600 lines: the core `skeletal bench` suite: the crowd, single, skinning and load stages with their
# same-run baselines, and the table.
"""``skeletal bench``: the performance figures of the README, each against a baseline measured in the
same run on the same machine.

Stages and their baselines:

* crowd: 1000 instances playing Walk at random phases, ``Crowd.update(1/60)`` (sample, blend, world
  matrices, palettes) -> characters/s. Baseline: :class:`NumpyPoser`, plain numpy vectorised over
  instances (``searchsorted``, lerp, slerp, depth-by-depth world matrices, palettes).
* big crowd: the same with 10,000 instances -> milliseconds per frame (the 16 ms budget of a 60 Hz
  frame is the reference). Baseline: the numpy poser for 10,000 instances.
* single: one :class:`~skeletal.Player` update + palettes -> microseconds. Baseline: the same numpy
  code for one instance.
* skinning: a 100k-vertex synthetic mesh, 4 influences (uint8 joints), positions + normals, 65-joint
  palette, :func:`skeletal.skin.skin_into` on all threads (and on one) -> M vertices/s. Baselines:
  :func:`numpy_skin` (the same maths in numpy) and the memory bound: a streaming triad over the same
  number of bytes gives the bandwidth, divided by the bytes one vertex moves.
* load: ``skeletal.load`` of the model -> ms. Baseline: :func:`numpy_glb_decode`, reading the GLB with
  ``json`` + ``np.frombuffer`` for every accessor (no validation, no rig or clips).

Every figure is the median of repeated samples, reported with min and max. Nothing here asserts a
speed: the ratios are printed and written to JSON (``--json``); ``benchmarks/`` builds the README
table from them. The command is :mod:`skeletal.cli.bench`.
"""

from __future__ import annotations

import importlib
import json
import os
import platform
import statistics
import struct
import textwrap
import time
from pathlib import Path
from typing import Callable

import numpy as np

# A benchmark times the compiled kernels: the cold-start numpy frames (skeletal.playback.coldstart)
# are off in a process that imports it, unless it sets SKELETAL_NO_FALLBACK itself (the cold row's
# subprocesses set it both ways).
os.environ.setdefault("SKELETAL_NO_FALLBACK", "1")

#: Published anchors the figures are compared with (not measured here).
REFERENCES = {
    "crowd_chars_per_s": ("ozz-animation 0.16", 788_000.0),
    "single_update_us": ("three.js 0.187 AnimationMixer.update + skeleton.update", 60.0),
    "skin_mverts_per_s": ("ozz-animation 0.16 SkinningJob, per thread", 188.0),
    "skin_mverts_per_s_cpu_threejs": ("three.js 0.187 CPU skinning", 7.0),
}
#: Targets from the performance issue.
TARGETS = {"crowd_chars_per_s": 250_000.0, "single_update_us": 20.0, "skin_mverts_per_s": 188.0,
           "skin_fraction_of_bandwidth": 0.8}

def interleaved(fns, rounds: int, inner: int, clock=time.thread_time, warmup: int = 1) -> list[list[float]]:
    """Per-call seconds of each of ``fns`` (a sequence of callables) over ``rounds`` rounds of ``inner``
    calls on ``clock``, the functions alternating inside every round so that all see the same state of
    the machine; each is first called ``warmup`` times.

    >>> fast, slow = interleaved([lambda: None, lambda: sum(range(100))], rounds=3, inner=10)
    """
    for fn in fns:
        for _ in range(warmup):
            fn()
    out: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for fn, samples in zip(fns, out):
            t0 = clock()
            for _ in range(inner):
                fn()
            samples.append((clock() - t0) / inner)
    return out


def load_average() -> float:
    """The 1-minute load average (NaN where the OS does not say), printed with every timed row."""
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")


def model_glb(path, folder) -> tuple:
    """``(folder/"model.glb", label)``: a copy of ``path`` when it is a ``.glb``, else the built-in
    character written there; ``label`` names it in bench rows (the file's stem, or ``"demo"``)."""
    import shutil
    from pathlib import Path

    glb = Path(folder) / "model.glb"
    if path is not None and Path(path).suffix.lower() == ".glb":
        shutil.copyfile(path, glb)
    else:
        from ..demo import build_demo_document
        from ..io.gltf_write import write_gltf

        write_gltf(build_demo_document(), str(glb))
    return glb, (Path(path).stem if path is not None else "demo")


#: Feature benchmarks: modules whose ``bench_rows(asset, clip, path, quick)`` returns a JSON-ready dict with
#: ``"rows"``: a list of ``{"name", "stat" (a stat() dict), "baseline" (text), "ratio" (text), "reference"}``
#: measured against same-run baselines, plus any figures of its own. One entry per feature, each under its
#: own comment, so that work on separate features merges without conflicts.
FEATURE_BENCHES: list[str] = [
    # formats: Assimp, BVH load (issue 9)
    "skeletal.bench.assimp",
    "skeletal.bench.bvh",
    # USD (UsdSkel) load next to glTF (issue 18)
    "skeletal.bench.usd",

    # inverse kinematics (issue 10)
    "skeletal.bench.ik",

    # procedural animation (issue 10): foot placement, look-at
    "skeletal.bench.procedural",

    # playback-kernel speed (issue 17): wide crowd, single update, model-mesh skinning, 10k frame
    "skeletal.bench.speed",

    # dual quaternion skinning (issue 10)
    "skeletal.bench.dq",

    # the whole frame on the GPU: compute-shader posing, baked animation textures (issue 30)
    "skeletal.bench.gpu",

    # skinning a character mesh on one thread, thread CPU time, against ozz (issue 17)
    "skeletal.bench.skinning",

    # torch (issue 12)
    "skeletal.bench.torch",

    # compression (issue 12)
    "skeletal.bench.compress",

    # first impressions (issue 17): cold first frame, threads on a busy machine
    "skeletal.bench.cold",

]



def assets_dir() -> Path:
    """Where the shared models are: ``$SKELETAL_ASSETS``, else ``../shared/assets`` from the current
    directory (the layout of a checkout run from its root). Installed copies have no repository around
    them, so the package's own location is not used."""
    return Path(os.environ.get("SKELETAL_ASSETS") or Path.cwd().parent / "shared" / "assets")


DEFAULT_MODEL = assets_dir() / "Soldier.glb"


# ---------------------------------------------------------------------------------------------
# timing


def time_samples(fn: Callable[[], object], repeats: int, inner: int = 1, warmup: int = 1) -> list[float]:
    """Seconds per call of ``fn``: ``repeats`` samples, each the mean over ``inner`` back-to-back calls."""
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        out.append((time.perf_counter() - start) / inner)
    return out


def stat(values: list[float], unit: str, **extra) -> dict:
    """``{median, min, max, repeats, unit}`` of samples already in ``unit``."""
    return {"median": float(statistics.median(values)), "min": float(min(values)), "max": float(max(values)),
            "repeats": len(values), "unit": unit, **extra}


def rate(seconds: list[float], work: float, scale: float, unit: str, **extra) -> dict:
    """Samples of seconds -> a rate (work per second / scale): min/max swap accordingly."""
    return stat([work / s / scale for s in seconds], unit, **extra)


def duration(seconds: list[float], scale: float, unit: str, **extra) -> dict:
    return stat([s * scale for s in seconds], unit, **extra)


# ---------------------------------------------------------------------------------------------
# numpy baselines: posing


def _quat_to_matrix(q: np.ndarray) -> np.ndarray:
    """Rotation matrices (..., 3, 3) from unit quaternions (..., 4) xyzw."""
    x, y, z, w = np.moveaxis(q, -1, 0)
    m = np.empty(q.shape[:-1] + (3, 3))
    m[..., 0, 0] = 1 - 2 * (y * y + z * z)
    m[..., 0, 1] = 2 * (x * y - w * z)
    m[..., 0, 2] = 2 * (x * z + w * y)
    m[..., 1, 0] = 2 * (x * y + w * z)
    m[..., 1, 1] = 1 - 2 * (x * x + z * z)
    m[..., 1, 2] = 2 * (y * z - w * x)
    m[..., 2, 0] = 2 * (x * z - w * y)
    m[..., 2, 1] = 2 * (y * z + w * x)
    m[..., 2, 2] = 1 - 2 * (x * x + y * y)
    return m


class NumpyPoser:
    """Plain numpy posing of B instances of one clip: sample -> local TRS -> world -> palettes.

    Vectorised over instances (and over tracks that share key times, interpolation and path: one
    ``searchsorted`` per group); arrays are component-major (10, N, B) and node-major (N, B, 4, 4) so
    that every operation runs over contiguous memory. Rotations slerp along the shortest path
    (normalised lerp for nearly parallel keys, like the library). World matrices: one batched matmul
    per node in parent-first order. Morph weight tracks are ignored (not part of the palettes).
    """

    OFFSET = {"translation": 0, "rotation": 3, "scale": 7}

    def __init__(self, asset, clip):
        rig = asset.rig
        self.parents = np.asarray(rig.parents, np.int64)
        self.rest = np.asarray(rig.rest, np.float64)
        self.duration = float(clip.duration)
        groups: dict[tuple, list] = {}
        for track in clip.tracks:
            if track.path == "weights":
                continue
            key = (track.path, track.interpolation, track.times.tobytes())
            groups.setdefault(key, []).append(track)
        self.groups = []
        for (path, interp, _), tracks in groups.items():
            times = tracks[0].times.astype(np.float64)
            # (C, T, rows): component, track, key row
            values = np.ascontiguousarray(np.stack([t.values.astype(np.float64) for t in tracks]).transpose(2, 0, 1))
            nodes = np.array([t.node for t in tracks], np.int64)
            self.groups.append((path, interp, times, values, nodes))
        skins = asset.skins
        self.palette_joints = np.concatenate([s.joints for s in skins]).astype(np.int64) if skins else np.zeros(0, np.int64)
        self.inverse_bind = np.concatenate([s.inverse_bind for s in skins]) if skins else np.zeros((0, 4, 4))

    def local_pose(self, t: np.ndarray) -> np.ndarray:
        """Local pose components (10, N, B) at clip times ``t`` (B,), looping (repeat)."""
        t = np.asarray(t, np.float64)
        if self.duration > 0:
            t = t - self.duration * np.floor(t / self.duration)
        pose = np.empty((10, len(self.rest), len(t)))
        pose[:] = self.rest.T[:, :, None]
        for path, interp, times, values, nodes in self.groups:
            n_keys = len(times)
            k = np.clip(np.searchsorted(times, t, side="right") - 1, 0, n_keys - 1)
            o = self.OFFSET[path]
            width = values.shape[0]
            cubic = interp == "CUBICSPLINE"
            if n_keys == 1 or interp == "STEP":
                pose[o:o + width, nodes] = values[:, :, 3 * k + 1 if cubic else k]
                continue
            k1 = np.minimum(k + 1, n_keys - 1)
            dt = np.where(k1 > k, times[k1] - times[k], 1.0)
            u = np.clip((t - times[k]) / dt, 0.0, 1.0)  # before the first key: u = 0 holds key 0
            if interp == "LINEAR":
                a, b = values[:, :, k], values[:, :, k1]  # (C, T, B)
                if path == "rotation":
                    cos = np.einsum("ctb,ctb->tb", a, b)
                    b = np.where(cos < 0, -b, b)
                    cos = np.abs(cos)
                    near = cos >= 0.9995
                    angle = np.arccos(np.minimum(cos, 1.0))
                    sin = np.where(near, 1.0, np.sin(angle))
                    s0 = np.where(near, 1 - u, np.sin((1 - u) * angle) / sin)
                    s1 = np.where(near, u, np.sin(u * angle) / sin)
                    out = a * s0 + b * s1
                    out /= np.where(near, np.sqrt(np.einsum("ctb,ctb->tb", out, out)), 1.0)
                else:
                    out = a + (b - a) * u
            else:  # glTF Hermite: key rows [in-tangent, value, out-tangent]
                u2, u3 = u * u, u * u * u
                h00, h10 = 2 * u3 - 3 * u2 + 1, (u3 - 2 * u2 + u) * dt
                h01, h11 = -2 * u3 + 3 * u2, (u3 - u2) * dt
                out = (h00 * values[:, :, 3 * k + 1] + h10 * values[:, :, 3 * k + 2]
                       + h01 * values[:, :, 3 * k1 + 1] + h11 * values[:, :, 3 * k1])
                if path == "rotation":
                    out /= np.sqrt(np.einsum("ctb,ctb->tb", out, out))
            pose[o:o + width, nodes] = out
        return pose

    def world(self, pose: np.ndarray) -> np.ndarray:
        """World matrices (N, B, 4, 4) from local pose components (10, N, B): ``T @ R @ S`` per node,
        then ``world[i] = world[parent] @ local[i]`` parents first."""
        tx, ty, tz, x, y, z, w, sx, sy, sz = pose
        xx, yy, zz, xy, xz, yz, wx, wy, wz = x * x, y * y, z * z, x * y, x * z, y * z, w * x, w * y, w * z
        zero, one = np.zeros_like(x), np.ones_like(x)
        local = np.stack([
            (1 - 2 * (yy + zz)) * sx, 2 * (xy - wz) * sy, 2 * (xz + wy) * sz, tx,
            2 * (xy + wz) * sx, (1 - 2 * (xx + zz)) * sy, 2 * (yz - wx) * sz, ty,
            2 * (xz - wy) * sx, 2 * (yz + wx) * sy, (1 - 2 * (xx + yy)) * sz, tz,
            zero, zero, zero, one,
        ], axis=-1).reshape(x.shape + (4, 4))
        world = local.copy()
        for i, parent in enumerate(self.parents):
            if parent >= 0:
                np.matmul(world[parent], local[i], out=world[i])
        return world

    def palettes(self, world: np.ndarray) -> np.ndarray:
        """Palettes (B, J, 3, 4) float32: the top rows of ``world[joint] @ inverse_bind``."""
        pal = np.matmul(world[self.palette_joints], self.inverse_bind[:, None])[..., :3, :]
        return np.ascontiguousarray(pal.transpose(1, 0, 2, 3), dtype=np.float32)

    def update(self, t: np.ndarray) -> np.ndarray:
        """Sample, pose and build palettes for instances at clip times ``t`` (B,): (B, J, 3, 4) float32."""
        return self.palettes(self.world(self.local_pose(t)))


# ---------------------------------------------------------------------------------------------
# numpy baselines: skinning and loading


def numpy_skin(palette34: np.ndarray, joints: np.ndarray, weights: np.ndarray, positions: np.ndarray,
               normals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Linear blend skinning in plain numpy, float32, same contract as :func:`skeletal.skin.skin_into`:
    blend the (J, 3, 4) matrices, transform positions, normals through the cofactor (flipped where the
    determinant is negative) and renormalised."""
    m = np.einsum("vk,vkrc->vrc", weights, palette34[joints])  # (V, 3, 4)
    p = np.einsum("vrc,vc->vr", m[:, :, :3], positions) + m[:, :, 3]
    a, b, c = m[:, 0, :3], m[:, 1, :3], m[:, 2, :3]
    bc, ca, ab = np.cross(b, c), np.cross(c, a), np.cross(a, b)
    n = np.stack([np.einsum("vi,vi->v", bc, normals), np.einsum("vi,vi->v", ca, normals),
                  np.einsum("vi,vi->v", ab, normals)], axis=1)
    det = np.einsum("vi,vi->v", a, bc)
    length = np.linalg.norm(n, axis=1)
    scale = np.where(length > 0, 1.0 / np.where(length > 0, length, 1.0), 0.0) * np.where(det < 0, -1.0, 1.0)
    return p, (n * scale[:, None]).astype(np.float32)


_COMPONENT_DTYPES = {5120: np.int8, 5121: np.uint8, 5122: np.int16, 5123: np.uint16, 5125: np.uint32, 5126: np.float32}
_TYPE_SIZES = {"SCALAR": 1, "VEC2": 2, "VEC3": 3, "VEC4": 4, "MAT2": 4, "MAT3": 9, "MAT4": 16}


def numpy_glb_decode(path: str | os.PathLike) -> tuple[dict, list[np.ndarray]]:
    """The loading baseline: a GLB's JSON and every accessor as a numpy array (json + frombuffer; no
    validation, no sparse accessors, no extensions, no rig or clips). Returns ``(json, arrays)``."""
    data = Path(path).read_bytes()
    magic, _, _ = struct.unpack_from("<III", data, 0)
    if magic != 0x46546C67:
        raise ValueError(f"{path}: not a GLB file")
    offset, doc, binary = 12, None, b""
    while offset < len(data):
        length, kind = struct.unpack_from("<II", data, offset)
        chunk = data[offset + 8: offset + 8 + length]
        if kind == 0x4E4F534A:
            doc = json.loads(chunk)
        elif kind == 0x004E4942:
            binary = chunk
        offset += 8 + length
    views = doc.get("bufferViews", [])
    out = []
    for acc in doc.get("accessors", []):
        dtype = np.dtype(_COMPONENT_DTYPES[acc["componentType"]])
        width = _TYPE_SIZES[acc["type"]]
        count = acc["count"]
        if "bufferView" not in acc:
            out.append(np.zeros((count, width), dtype))
            continue
        view = views[acc["bufferView"]]
        start = view.get("byteOffset", 0) + acc.get("byteOffset", 0)
        stride = view.get("byteStride", 0) or width * dtype.itemsize
        if stride == width * dtype.itemsize:
            arr = np.frombuffer(binary, dtype, count * width, start).reshape(count, width)
        else:
            rows = np.frombuffer(binary, np.uint8, (count - 1) * stride + width * dtype.itemsize, start)
            arr = np.lib.stride_tricks.as_strided(rows, (count, width * dtype.itemsize), (stride, 1)).copy().view(dtype)
        out.append(arr)
    return doc, out


# ---------------------------------------------------------------------------------------------
# memory bandwidth


def _triad_kernel():
    from numba import njit, prange

    @njit(cache=True, parallel=True, fastmath=True)
    def triad(a, b, c, s):
        for j in prange(a.shape[0]):  # numba splits the range into one contiguous block per thread
            a[j] = b[j] + s * c[j]

    return triad


def measure_bandwidth(total_bytes: int, repeats: int) -> dict:
    """Streaming triad ``a = b + s * c`` over three float32 arrays of ``total_bytes`` together, on all
    numba threads; bytes moved = 3 x 4 per element (2 reads + 1 write, write-allocate not counted)."""
    n = max(1024, total_bytes // 12)
    a, b, c = np.zeros(n, np.float32), np.ones(n, np.float32), np.full(n, 2.0, np.float32)
    triad = _triad_kernel()
    secs = time_samples(lambda: triad(a, b, c, np.float32(0.5)), repeats, inner=max(1, int(1e6 // n)), warmup=2)
    return rate(secs, 12.0 * n, 1e9, "GB/s", bytes=int(12 * n))


def measure_copy_bandwidth(total_bytes: int, repeats: int) -> dict:
    """``np.copyto`` of a float32 array (bytes moved = read + write)."""
    n = max(1024, total_bytes // 8)
    a, b = np.zeros(n, np.float32), np.ones(n, np.float32)
    secs = time_samples(lambda: np.copyto(a, b), repeats, warmup=1)
    return rate(secs, 8.0 * n, 1e9, "GB/s", bytes=int(8 * n))


# ---------------------------------------------------------------------------------------------
# the stages


def synthetic_mesh(vertices: int, joints: int = 65, influences: int = 4, seed: int = 0):
    """A skinning benchmark mesh: random palette (rotation, translation, scale 0.8-1.25), per-vertex
    joints (uint8 when they fit) with weights decreasing and summing to 1, unit normals."""
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(joints, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    palette = np.zeros((joints, 3, 4), np.float32)
    palette[:, :, :3] = _quat_to_matrix(q) * rng.uniform(0.8, 1.25, (joints, 1, 3))
    palette[:, :, 3] = rng.normal(size=(joints, 3))
    jdtype = np.uint8 if joints <= 256 else np.uint16
    joint_idx = rng.integers(0, joints, (vertices, influences)).astype(jdtype)
    w = np.sort(rng.uniform(0, 1, (vertices, influences)), axis=1)[:, ::-1] ** 2
    weights = (w / w.sum(axis=1, keepdims=True)).astype(np.float32)
    positions = rng.normal(size=(vertices, 3)).astype(np.float32)
    normals = rng.normal(size=(vertices, 3))
    normals = (normals / np.linalg.norm(normals, axis=1, keepdims=True)).astype(np.float32)
    return palette, joint_idx, weights, positions, normals


def skin_bytes_per_vertex(joints: np.ndarray, influences: int) -> int:
    """Bytes one vertex moves when skinning positions + normals: positions and normals in and out
    (4 x 12), joints and weights in."""
    return 4 * 12 + influences * (joints.dtype.itemsize + 4)


def resolve_model(model: str | None):
    """(asset, model label, path or None): the given model, else Soldier.glb next to the repository,
    else the built-in demo character."""
    import skeletal

    if model:
        return skeletal.load(model), Path(model).name, Path(model)
    if DEFAULT_MODEL.exists():
        return skeletal.load(DEFAULT_MODEL), DEFAULT_MODEL.name, DEFAULT_MODEL
    from skeletal.demo import demo_asset

    return demo_asset(), f"built-in demo character ({DEFAULT_MODEL.name} not found)", None


def walk_clip(asset) -> str:
    """The asset's walk clip name ("Walk", "walk", ...), else its first non-empty clip."""
    for c in asset.clips:
        if c.name.lower() == "walk":
            return c.name
    for c in asset.clips:
        if c.duration > 0:
            return c.name
    return asset.clips[0].name


def make_crowd(asset, count: int, clip: str, offsets: np.ndarray):
    """``skeletal.Crowd`` when the library has it, else a float32 ``Mixer`` without events; playing
    ``clip`` at per-instance ``offsets``."""
    import skeletal

    if hasattr(skeletal, "Crowd"):
        crowd = skeletal.Crowd(asset, count=count)
        crowd.play(clip, offsets=offsets)
        return crowd, "Crowd"
    crowd = skeletal.Mixer(asset, count, dtype=np.float32, events=False)
    crowd.play(clip, offset=offsets)
    return crowd, "Mixer"


def crowd_palettes(crowd) -> np.ndarray:
    """A crowd's palettes as (count, J, 3, 4) whatever the class (Crowd: already; Mixer: per skin 4x4)."""
    p = crowd.palettes
    if isinstance(p, np.ndarray):
        return p
    return np.concatenate([x[..., :3, :] for x in p], axis=1) if p else np.zeros((crowd.count, 0, 3, 4))


def bench_crowd(asset, clip: str, count: int, repeats: int, numpy_repeats: int, seed: int = 1) -> dict:
    rng = np.random.default_rng(seed)
    duration = asset.clip(clip).duration
    offsets = rng.uniform(0, duration, count)
    crowd, kind = make_crowd(asset, count, clip, offsets)
    dt = 1 / 60
    secs = time_samples(lambda: crowd.update(dt), repeats, warmup=3)
    poser = NumpyPoser(asset, asset.clip(clip))
    t = offsets.copy()

    def numpy_step():
        t[:] += dt
        poser.update(t)

    base = time_samples(numpy_step, numpy_repeats, warmup=1)
    return {"kind": kind, "count": count,
            "crowd_chars_per_s": rate(secs, count, 1.0, "characters/s"),
            "crowd_chars_per_s_numpy": rate(base, count, 1.0, "characters/s")}


def frame_ms(chars_per_s: dict, count: int) -> dict:
    """A crowd's characters/s statistics as milliseconds per frame of ``count`` characters."""
    out = dict(chars_per_s, unit="ms")
    out["median"] = count / chars_per_s["median"] * 1e3
    out["min"] = count / chars_per_s["max"] * 1e3
    out["max"] = count / chars_per_s["min"] * 1e3
    return out


def bench_single(asset, clip: str, repeats: int, inner: int) -> dict:
    import skeletal

    player = skeletal.Player(asset)
    player.play(clip)

    def step():
        player.update(1 / 60)
        return player.palettes

    secs = time_samples(step, repeats, inner=inner, warmup=20)
    poser = NumpyPoser(asset, asset.clip(clip))
    t = np.zeros(1)

    def numpy_step():
        t[0] += 1 / 60
        return poser.update(t)

    base = time_samples(numpy_step, max(3, repeats // 2), inner=max(1, inner // 10), warmup=2)
    return {"single_update_us": duration(secs, 1e6, "us"), "single_update_us_numpy": duration(base, 1e6, "us")}


def bench_skinning(vertices: int, repeats: int, numpy_repeats: int, bandwidth_repeats: int) -> dict:
    import numba

    from ..skinning.lbs import pack_palette, skin_into

    palette, joints, weights, positions, normals = synthetic_mesh(vertices)
    out_p, out_n = np.empty_like(positions), np.empty_like(normals)
    packed = pack_palette(palette)
    threads = numba.get_num_threads()

    def run():
        pack_palette(palette, packed)  # the per-frame palette conversion is part of the work
        skin_into(packed, joints, weights, positions, normals, None, out_p, out_n)

    inner = max(1, int(1e5 // vertices))
    secs = time_samples(run, repeats, inner=inner, warmup=3)
    numba.set_num_threads(1)
    try:
        secs1 = time_samples(run, max(3, repeats // 2), inner=inner, warmup=2)
    finally:
        numba.set_num_threads(threads)
    base = time_samples(lambda: numpy_skin(palette, joints, weights, positions, normals), numpy_repeats, warmup=1)
    per_vertex = skin_bytes_per_vertex(joints, joints.shape[1])
    working_set = per_vertex * vertices
    bandwidth = measure_bandwidth(working_set, bandwidth_repeats)
    bound = bandwidth["median"] * 1e9 / per_vertex / 1e6  # M vertices/s
    mverts = rate(secs, vertices, 1e6, "M vertices/s")
    fraction = stat([v / bound for v in (vertices / s / 1e6 for s in secs)], "fraction",
                    bound_mverts_per_s=bound, bytes_per_vertex=per_vertex)
    return {"vertices": vertices, "joints": len(palette), "influences": joints.shape[1],
            "joint_dtype": str(joints.dtype), "bytes_per_vertex": per_vertex,
            "skin_mverts_per_s": mverts, "skin_mverts_per_s_1thread": rate(secs1, vertices, 1e6, "M vertices/s"),
            "skin_fraction_of_bandwidth": fraction,
            "skin_mverts_per_s_numpy": rate(base, vertices, 1e6, "M vertices/s"),
            "bandwidth_gbs": bandwidth, "samples": [vertices / s / 1e6 for s in secs]}


def bench_load(asset_path: Path | None, repeats: int) -> dict:
    import skeletal

    if asset_path is None:  # the demo character: write it once as GLB so that there is a file to load
        import tempfile

        from ..demo import build_demo_document
        from ..io.gltf_write import write_gltf

        asset_path = Path(tempfile.mkdtemp(prefix="skeletal-bench-")) / "demo.glb"
        write_gltf(build_demo_document(), str(asset_path))
    # One thread's CPU clock, the two alternating in every round (issue 17): a busy machine's time
    # slicing inflates neither, and both see the same state of the machine.
    secs, base = interleaved([lambda: skeletal.load(asset_path), lambda: numpy_glb_decode(asset_path)], repeats, 1)
    return {"load_ms": duration(secs, 1e3, "ms", file=asset_path.name, clock="thread CPU"),
            "load_ms_numpy": duration(base, 1e3, "ms", clock="thread CPU")}


def vector_info() -> dict:
    """The vector unit numba compiles for: LLVM's name for the target CPU (``znver5``,
    ``sapphirerapids``...; ``NUMBA_CPU_NAME`` where set), the widest SIMD instruction set it has and
    that width in bits (float32 lanes = bits / 32), and ``emulated``: whether ``NUMBA_CPU_NAME`` /
    ``NUMBA_CPU_FEATURES`` retarget numba away from the host (e.g. AVX2 code on an AVX-512 machine).
    The kernels' speed-ups depend on it: a ratio measured with 512-bit vectors does not carry over to
    a 256-bit machine, so every benchmark title prints it.

    >>> vector_info()                                             # doctest: +SKIP
    {'llvm_cpu': 'znver5', 'isa': 'AVX-512', 'vector_bits': 512, 'emulated': False}
    """
    try:
        from .._simd import isa_name, target_cpu, target_is_host, vector_bits

        return {"llvm_cpu": target_cpu(), "isa": isa_name(), "vector_bits": vector_bits(),
                "emulated": not target_is_host()}
    except Exception:  # a description only: never fail a benchmark over it
        return {"llvm_cpu": "unknown", "isa": "unknown", "vector_bits": 0, "emulated": False}


def _cpuinfo() -> dict:
    """``model name``, ``cpu family`` and ``model`` of the first CPU in /proc/cpuinfo (those present)."""
    found: dict = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip().lower()
                if key in ("model name", "cpu family", "model") and key not in found:
                    found[key] = value.strip()
                if not line.strip() and found:
                    break
    except OSError:
        pass
    return found


def machine_info() -> dict:
    """The machine a benchmark ran on. ``cpu_model`` carries the CPU's name, its family/model and the
    vector width (:func:`vector_info`) in one string, so any report that prints it (``skeletal bench``'s
    title, the ozz harness's table) says which kind of machine the ratios come from."""
    import numba

    info = _cpuinfo()
    name = info.get("model name") or platform.processor() or platform.machine()
    vec = vector_info()
    kind = [f"code for {vec['llvm_cpu']} (NUMBA_CPU_NAME/FEATURES), not this host" if vec["emulated"]
            else vec["llvm_cpu"]]
    if "cpu family" in info:
        kind.append(f"family {info['cpu family']} model {info.get('model', '?')}")
    if vec["vector_bits"]:
        kind.append(f"{vec['isa']}: {vec['vector_bits']}-bit vectors, {vec['vector_bits'] // 32} float32 lanes")
    cpu = f"{name} ({'; '.join(kind)})"
    return {"threads": int(numba.get_num_threads()), "cpu_count": os.cpu_count(), "cpu_model": cpu,
            "cpu_name": name, "llvm_cpu": vec["llvm_cpu"], "isa": vec["isa"], "vector_bits": vec["vector_bits"],
            "emulated_target": vec["emulated"],
            "numba": numba.__version__, "numpy": np.__version__, "python": platform.python_version(),
            "platform": platform.platform(), "threading_layer": _threading_layer()}


def background_load(seconds: float = 0.3) -> float | None:
    """CPUs kept busy by other processes while this one sleeps ``seconds`` (from /proc/stat; None where
    unavailable). Other work on the machine slows the multi-threaded figures most: a parallel region
    waits for its slowest thread."""
    from .._threads import cpu_ticks

    first = cpu_ticks()
    if first is None:
        return None
    time.sleep(seconds)
    second = cpu_ticks()
    if second is None:
        return None
    (b0, t0), (b1, t1) = first, second
    if t1 <= t0:
        return 0.0
    return float((b1 - b0) / (t1 - t0) * (os.cpu_count() or 1))


def _threading_layer() -> str:
    import numba

    try:
        return numba.threading_layer()
    except ValueError:  # no parallel region has run yet
        return "unknown"


# ---------------------------------------------------------------------------------------------
# the suite


SIZES = {
    # The crowd count and the skinning mesh are part of the metrics' definitions: quick keeps them and
    # takes fewer samples. The large-array triad should exceed the last-level cache (300 MB here).
    "full": {"crowd": 1000, "crowd_repeats": 1000, "crowd_numpy_repeats": 40, "big_crowd": 10_000, "big_crowd_repeats": 100,
             "single_repeats": 300, "single_inner": 300,
             "skin_vertices": 100_000, "skin_repeats": 1500, "skin_numpy_repeats": 20, "bw_repeats": 300,
             "dram_bytes": 768 << 20, "dram_repeats": 20, "load_repeats": 150},
    "quick": {"crowd": 1000, "crowd_repeats": 30, "crowd_numpy_repeats": 3, "big_crowd": 10_000, "big_crowd_repeats": 8,
              "single_repeats": 15, "single_inner": 100,
              "skin_vertices": 100_000, "skin_repeats": 40, "skin_numpy_repeats": 2, "bw_repeats": 10,
              "dram_bytes": 512 << 20, "dram_repeats": 3, "load_repeats": 8},
}


#: The stages of the suite, in the order they run (each prints its rows when it finishes).
CORE_STAGES = ("crowd", "big crowd", "single", "skinning", "bandwidth", "load")


def run_suite(quick: bool = False, model: str | None = None, progress: Callable[[str], None] | None = None,
              on_row: Callable[[tuple], None] | None = None, on_start: Callable[[dict], None] | None = None) -> dict:
    """Run every stage and return the JSON-ready result (see the module docstring).

    ``progress(message)``: before each stage, ``"[k/n] what"`` with the seconds so far. ``on_start(result)``:
    once the model is known (:func:`format_title` of it is the table's title). ``on_row(row)``: each
    table row (name, stat, baseline, ratio, reference) as soon as its stage has finished
    (:func:`format_row` prints it), so that a long run shows its figures as it goes."""
    say = progress or (lambda msg: None)
    emit = on_row or (lambda row: None)
    size = SIZES["quick" if quick else "full"]
    started = time.perf_counter()
    load_before = background_load()
    asset, label, path = resolve_model(model)
    clip = walk_clip(asset)
    result: dict = {"model": label, "clip": clip, "quick": bool(quick)}
    if path is None:
        result["model_note"] = (f"{DEFAULT_MODEL.name} was not found ({DEFAULT_MODEL}): the figures are for the "
                                "built-in character (--model FILE measures another model)")
        say(result["model_note"])
    info = machine_info()
    info["background_load_before"] = load_before
    result["machine"], result["threads"] = info, info["threads"]
    result["baselines"] = {"threads": info["threads"]}
    if on_start is not None:
        on_start(result)
    stages = len(CORE_STAGES) + len(FEATURE_BENCHES)
    done = [0]

    def stage(what: str) -> None:
        done[0] += 1
        say(f"[{done[0]}/{stages}] {what} ({time.perf_counter() - started:.0f} s so far)")

    def rows(name: str) -> None:
        for row in core_rows(result, name):
            emit(row)

    b = result["baselines"]
    stage(f"crowd: {size['crowd']} x {clip}")
    crowd = bench_crowd(asset, clip, size["crowd"], size["crowd_repeats"], size["crowd_numpy_repeats"])
    result["crowd_chars_per_s"] = crowd["crowd_chars_per_s"]
    b["crowd_chars_per_s_numpy"] = crowd["crowd_chars_per_s_numpy"]
    result["config"] = {"crowd_class": crowd["kind"], "crowd_count": crowd["count"]}
    rows("crowd")
    stage(f"crowd: {size['big_crowd']:,} x {clip}, frame time")
    big = bench_crowd(asset, clip, size["big_crowd"], size["big_crowd_repeats"], 1)
    result["crowd_10k_frame_ms"] = frame_ms(big["crowd_chars_per_s"], big["count"])
    b["crowd_10k_frame_ms_numpy"] = frame_ms(big["crowd_chars_per_s_numpy"], big["count"])
    result["config"]["big_crowd_count"] = big["count"]
    rows("big crowd")
    stage("single character")
    single = bench_single(asset, clip, size["single_repeats"], size["single_inner"])
    result["single_update_us"] = single["single_update_us"]
    b["single_update_us_numpy"] = single["single_update_us_numpy"]
    rows("single")
    stage(f"skinning: {size['skin_vertices']:,} vertices")
    skinning = bench_skinning(size["skin_vertices"], size["skin_repeats"], size["skin_numpy_repeats"], size["bw_repeats"])
    for key in ("skin_mverts_per_s", "skin_mverts_per_s_1thread", "skin_fraction_of_bandwidth"):
        result[key] = skinning[key]
    b["skin_mverts_per_s_numpy"], b["bandwidth_gbs"] = skinning["skin_mverts_per_s_numpy"], skinning["bandwidth_gbs"]
    result["config"].update({"skin_vertices": skinning["vertices"], "skin_joints": skinning["joints"],
                             "skin_influences": skinning["influences"], "skin_joint_dtype": skinning["joint_dtype"],
                             "skin_bytes_per_vertex": skinning["bytes_per_vertex"]})
    rows("skinning")
    stage("memory bandwidth (large arrays)")
    b["dram_bandwidth_gbs"] = dram = measure_bandwidth(size["dram_bytes"], size["dram_repeats"])
    b["copy_bandwidth_gbs"] = measure_copy_bandwidth(size["dram_bytes"] // 2, size["dram_repeats"])
    per_vertex = skinning["bytes_per_vertex"]
    dram_bound = dram["median"] * 1e9 / per_vertex / 1e6
    result["skin_fraction_of_dram_bandwidth"] = stat(
        [v / dram_bound for v in skinning["samples"]], "fraction", bound_mverts_per_s=dram_bound,
        bytes_per_vertex=per_vertex, note="the 100k-vertex mesh sits in cache, so this may exceed 1")
    rows("bandwidth")
    stage("loading")
    load = bench_load(path, size["load_repeats"])
    result["load_ms"], b["load_ms_numpy"] = load["load_ms"], load["load_ms_numpy"]
    rows("load")
    features = result["features"] = {}
    for module_name in FEATURE_BENCHES:
        stage(module_name.rsplit(".", 1)[-1])
        features[module_name] = importlib.import_module(module_name).bench_rows(asset=asset, clip=clip, path=path,
                                                                                 quick=quick)
        for row in feature_rows(features[module_name]):
            emit(row)
    info["background_load_after"] = background_load()
    result["references"] = {k: {"source": s, "value": v} for k, (s, v) in REFERENCES.items()}
    result["targets"] = TARGETS
    result["ratios"] = ratios(result)
    result["seconds"] = time.perf_counter() - started
    return result


def ratios(r: dict) -> dict:
    """Speed-ups against the same-run baselines (> 1: skeletal is faster) and the published anchors."""
    b = r["baselines"]
    med = lambda m: m["median"]
    out = {
        "crowd_vs_numpy": med(r["crowd_chars_per_s"]) / med(b["crowd_chars_per_s_numpy"]),
        "crowd_10k_vs_numpy": med(b["crowd_10k_frame_ms_numpy"]) / med(r["crowd_10k_frame_ms"]),
        "crowd_10k_vs_16ms": 16.0 / med(r["crowd_10k_frame_ms"]),
        "single_vs_numpy": med(b["single_update_us_numpy"]) / med(r["single_update_us"]),
        "skin_vs_numpy": med(r["skin_mverts_per_s"]) / med(b["skin_mverts_per_s_numpy"]),
        "load_vs_numpy": med(b["load_ms_numpy"]) / med(r["load_ms"]),
        "crowd_vs_ozz": med(r["crowd_chars_per_s"]) / REFERENCES["crowd_chars_per_s"][1],
        "single_vs_threejs": REFERENCES["single_update_us"][1] / med(r["single_update_us"]),
        "skin_vs_ozz_per_thread": med(r["skin_mverts_per_s"]) / REFERENCES["skin_mverts_per_s"][1],
        "skin_1thread_vs_ozz_per_thread": med(r["skin_mverts_per_s_1thread"]) / REFERENCES["skin_mverts_per_s"][1],
    }
    return {k: float(v) for k, v in out.items()}


# ---------------------------------------------------------------------------------------------
# output


def _fmt(value: float, unit: str) -> str:
    if unit == "characters/s":
        return f"{value / 1000:,.0f}k"
    if unit == "fraction":
        return f"{value:.2f}"
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


#: ``skeletal bench`` prints its table this many columns wide at most.
TABLE_WIDTH = 100


#: Column widths of a table row: metric, median, min..max, unit, ratio (with 2-space gaps: 100 columns).
COLUMNS = (48, 9, 19, 9, 7)
_UNIT_NAMES = {"characters/s": "chars/s", "M vertices/s": "Mverts/s"}


def _ratio(r: dict, numerator: str, denominator: str, higher_is_better: bool = True) -> str:
    """``"10.0x"``: the speed-up of ``r[numerator]`` over the baseline ``r["baselines"][denominator]``."""
    a, base = r[numerator]["median"], r["baselines"][denominator]["median"]
    value = a / base if higher_is_better else base / a
    return f"{value:.1f}x"


def core_rows(r: dict, stage: str) -> list[tuple]:
    """The table rows (name, stat, baseline, ratio, reference) of one core stage of a (possibly partial)
    result ``r``: what :func:`run_suite` emits when the stage finishes, and :func:`format_table` prints."""
    b, cfg = r["baselines"], r["config"]
    if stage == "crowd":
        return [(f"crowd: {cfg['crowd_count']} x {r['clip']} ({cfg['crowd_class']})", r["crowd_chars_per_s"],
                 f"numpy {_fmt(b['crowd_chars_per_s_numpy']['median'], 'characters/s')}",
                 _ratio(r, "crowd_chars_per_s", "crowd_chars_per_s_numpy"), "ozz 788k")]
    if stage == "big crowd":
        return [(f"crowd: {cfg['big_crowd_count']:,} x {r['clip']}, one frame", r["crowd_10k_frame_ms"],
                 f"numpy {_fmt(b['crowd_10k_frame_ms_numpy']['median'], 'ms')}",
                 _ratio(r, "crowd_10k_frame_ms", "crowd_10k_frame_ms_numpy", higher_is_better=False),
                 "budget 16 ms")]
    if stage == "single":
        return [("single: Player update + palettes", r["single_update_us"],
                 f"numpy {_fmt(b['single_update_us_numpy']['median'], 'us')}",
                 _ratio(r, "single_update_us", "single_update_us_numpy", higher_is_better=False),
                 "three.js ~60 us")]
    if stage == "skinning":
        return [
            (f"skinning: {cfg['skin_vertices'] // 1000}k verts x{cfg['skin_influences']}, pos+nrm, {r['threads']} thr",
             r["skin_mverts_per_s"], f"numpy {_fmt(b['skin_mverts_per_s_numpy']['median'], 'x')}",
             _ratio(r, "skin_mverts_per_s", "skin_mverts_per_s_numpy"), "ozz 188/thread"),
            ("skinning: 1 thread", r["skin_mverts_per_s_1thread"], "", "", "ozz 188/thread"),
            ("skinning / memory bound (same bytes)", r["skin_fraction_of_bandwidth"],
             f"bound {r['skin_fraction_of_bandwidth']['bound_mverts_per_s']:,.0f} Mverts/s", "", "target 0.80"),
            (f"bandwidth: triad {b['bandwidth_gbs']['bytes'] / 1e6:.1f} MB", b["bandwidth_gbs"], "", "", ""),
        ]
    if stage == "bandwidth":
        return [
            ("skinning / large-array (DRAM) bound", r["skin_fraction_of_dram_bandwidth"],
             f"bound {r['skin_fraction_of_dram_bandwidth']['bound_mverts_per_s']:,.0f} Mverts/s", "", ""),
            (f"bandwidth: triad {b['dram_bandwidth_gbs']['bytes'] / 1e6:.0f} MB", b["dram_bandwidth_gbs"],
             f"np.copyto {b['copy_bandwidth_gbs']['median']:.1f} GB/s", "", ""),
        ]
    if stage == "load":
        return [(f"load {r['load_ms'].get('file', '')}", r["load_ms"], f"numpy {_fmt(b['load_ms_numpy']['median'], 'ms')}",
                 _ratio(r, "load_ms", "load_ms_numpy", higher_is_better=False), "")]
    raise ValueError(f"no stage {stage!r}")


def feature_rows(feature: dict) -> list[tuple]:
    """The table rows of one feature benchmark's result (see :data:`FEATURE_BENCHES`)."""
    return [(row["name"], row["stat"], row.get("baseline", ""), row.get("ratio", ""), row.get("reference", ""))
            for row in feature.get("rows", [])]


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def format_header() -> list[str]:
    """The table's column heads and rule."""
    head = ("metric", "median", "min..max", "unit", "ratio")
    right = {1, 2, 4}
    cells = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(head, COLUMNS))]
    return ["  ".join(cells).rstrip(), "  ".join("-" * w for w in COLUMNS)]


def format_row(row: tuple) -> list[str]:
    """One row as lines of at most :data:`TABLE_WIDTH` columns: the metric and its numbers (a metric
    longer than its column gets a line of its own, never wrapped), then indented, the baseline and the
    published reference."""
    name, s, base, ratio, ref = row
    unit = s["unit"]
    long_ratio = ""
    if len(ratio) > COLUMNS[4]:  # "2.69x the update (median of 5 rounds)": the number here, the words below
        long_ratio, ratio = ratio, _fit(ratio.split(" ", 1)[0], COLUMNS[4])
    numbers = [_fmt(s["median"], unit).rjust(COLUMNS[1]),
               _fit(f"{_fmt(s['min'], unit)}..{_fmt(s['max'], unit)}", COLUMNS[2]).rjust(COLUMNS[2]),
               _fit(_UNIT_NAMES.get(unit, unit), COLUMNS[3]).ljust(COLUMNS[3]), ratio.rjust(COLUMNS[4])]
    lines = []
    if len(name) > COLUMNS[0]:
        lines.append(_fit(name, TABLE_WIDTH))
        name = ""
    lines.append("  ".join([name.ljust(COLUMNS[0]), *numbers]).rstrip())
    extra = "; ".join(x for x in (f"ratio: {long_ratio}" if long_ratio else "", f"baseline: {base}" if base else "",
                                  f"reference: {ref}" if ref else "") if x)
    if extra:
        lines.extend(textwrap.wrap(extra, TABLE_WIDTH, initial_indent="    ", subsequent_indent="      "))
    return lines


def format_title(r: dict) -> str:
    """The table's title: model, clip, threads, CPU (wrapped at :data:`TABLE_WIDTH`)."""
    m = r["machine"]
    return textwrap.fill(f"skeletal bench: {r['model']}, clip {r['clip']}, {m['threads']} threads, {m['cpu_model']}, "
                         f"numba {m['numba']}{', quick' if r['quick'] else ''}", TABLE_WIDTH, subsequent_indent="  ")


def format_footer(r: dict) -> str:
    """What follows the rows: how ratios and bounds are meant, the run's length, a busy machine, the model note."""
    m, cfg = r["machine"], r["config"]
    note = ("ratio: speed-up against the baseline measured in this run (> 1 = skeletal faster); "
            f"memory bound = triad bandwidth / {cfg['skin_bytes_per_vertex']} bytes per vertex, with the triad over the "
            "skinning's own bytes (where its data lives) or over arrays larger than the caches")
    busy = [x for x in (m.get("background_load_before"), m.get("background_load_after")) if x is not None]
    footer = [f"({r['seconds']:.1f} s; other processes kept {max(busy):.2f} of {m['cpu_count']} CPUs busy)" if busy
              else f"({r['seconds']:.1f} s)"]
    if busy and max(busy) > 0.25:
        footer.append("warning: the machine was busy with other work; multi-threaded figures are pessimistic")
    if r.get("model_note"):
        footer.append(f"note: {r['model_note']}")
    return "\n".join(textwrap.wrap(note, TABLE_WIDTH) + [line for text in footer for line in textwrap.wrap(text, TABLE_WIDTH)])


def format_table(r: dict) -> str:
    """The plain-text table of a finished run, at most :data:`TABLE_WIDTH` columns wide: one line a
    figure (metric, median, min..max, unit, ratio against the baseline), under it the baseline and the
    published reference; the rows in the order the stages run (``skeletal bench`` prints the same
    rows one by one as they finish)."""
    rows = [row for stage in CORE_STAGES for row in core_rows(r, stage)]
    for feature in r.get("features", {}).values():
        rows += feature_rows(feature)
    lines = [line for row in rows for line in format_row(row)]
    return "\n".join([format_title(r), "", *format_header(), *lines, "", format_footer(r)])
