"""skeletal <-> Blender: Blender (``bpy``, in a child process) as the oracle for what it reads and writes.

Both ways, for any model skeletal reads:

* **Blender writes, skeletal reads.** Blender imports the model with its bundled importer (factory
  settings), exports it with its own writers (binary FBX, glTF, BVH and USD; one BVH and USD file
  per action), and records every pose bone's head in world space after ``scene.frame_set`` (the
  evaluated depsgraph) at several frames of every action. skeletal loads every export and poses
  the same clip at the same times; :func:`compare` measures the largest joint distance.
* **skeletal writes, Blender reads.** ``skeletal.export`` writes glTF (all clips), BVH and USD (one
  file per clip); Blender imports each and records its pose the same way; skeletal's pose of the
  original model is the reference.

Each format has its own conventions, which a comparison states rather than hides: the axes (Blender
is Z up; glTF, BVH and FBX as written are Y up), the unit (a scale), and the time of Blender frame F
(``F/fps`` or counted from the action's first frame or from frame 1). :func:`compare` fits those
(a signed axis permutation and a scale from the first sample, a time origin among the three) and
reports them with the error; joints are matched by name (Blender's renamings folded).

bpy is large (about 350 MB to download, 820 MB installed) and has global state: it runs in a child
Python, :func:`blender_python` (``$SKELETAL_BLENDER_PYTHON``, or this interpreter when it has bpy).

>>> rows = check_model("Fox.glb", "/tmp/fox-blender")          # doctest: +SKIP
>>> print(format_table(rows))                                  # doctest: +SKIP
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from ..asset import Asset, load
from ..errors import SkeletalError
from .posed import BridgeError, clip_state

#: Largest joint distance accepted, as a fraction of the model's size (its joints' bounding-box diagonal).
TOLERANCE = 1e-4
#: Blender's exports checked (Blender writes, skeletal reads) and skeletal's (skeletal writes, Blender reads).
BLENDER_EXPORTS = ("glb", "fbx", "bvh", "usd")
SKELETAL_EXPORTS = ("glb", "bvh", "usd")
CHILD = Path(__file__).with_name("blender_child.py")
_KIND = {".glb": "gltf", ".gltf": "gltf", ".fbx": "fbx", ".bvh": "bvh", ".usd": "usd", ".usda": "usd",
         ".usdc": "usd", ".usdz": "usd"}


def blender_python() -> str | None:
    """A Python interpreter that imports ``bpy``: ``$SKELETAL_BLENDER_PYTHON`` when set, else this one
    when bpy is installed here, else None."""
    configured = os.environ.get("SKELETAL_BLENDER_PYTHON")
    if configured:
        return configured if shutil.which(configured) or os.path.isfile(configured) else None
    return sys.executable if importlib.util.find_spec("bpy") is not None else None


def run_blender(model: str | os.PathLike, out_json: str | os.PathLike, *, exports: dict[str, str] | None = None,
                samples: int = 4, python: str | None = None, timeout: float = 600.0) -> dict:
    """Run :mod:`.blender_child` on ``model``: import, sample every action at ``samples`` frames,
    export to ``exports`` ({"glb"|"fbx": file, "bvh"|"usd": folder}). Returns its JSON report."""
    python = python or blender_python()
    if python is None:
        raise BridgeError('no Python with bpy: pip install "skeletal[blender]" or set SKELETAL_BLENDER_PYTHON')
    suffix = Path(model).suffix.lower()
    if suffix not in _KIND:
        raise BridgeError(f"{model}: Blender's importers here read {', '.join(sorted(_KIND))}")
    job = {"input": os.fspath(Path(model).resolve()), "kind": _KIND[suffix], "samples": int(samples),
           "out": os.fspath(out_json), "exports": exports or {}}
    job_path = Path(out_json).with_suffix(".job.json")
    job_path.write_text(json.dumps(job), encoding="utf-8")
    try:
        run = subprocess.run([python, os.fspath(CHILD), os.fspath(job_path)], capture_output=True, text=True,
                             timeout=timeout, env=dict(os.environ, PYTHONPATH=""))
    except subprocess.TimeoutExpired:
        raise BridgeError(f"{model}: Blender did not finish within {timeout:g} s") from None
    if run.returncode != 0 or not Path(out_json).is_file():
        tail = (run.stderr or run.stdout).strip().splitlines()[-1:] or ["no output"]
        raise BridgeError(f"{model}: Blender failed (exit {run.returncode}): {tail[0]}")
    return json.loads(Path(out_json).read_text(encoding="utf-8"))


def _key(name: str) -> str:
    """A name as both sides keep it: Blender and its writers replace some characters (``:`` ``.``
    ``|`` spaces by ``_``)."""
    return re.sub(r"[^0-9a-zA-Z]+", "_", name).strip("_").lower()


def _name_index(names: Sequence[str]) -> dict[str, int]:
    """Key -> index for ``names``, each also under its name without a namespace (``mixamorig:Hips`` ->
    ``hips``: importers and USD's path rules drop or rewrite the prefix)."""
    index: dict[str, int] = {}
    for i, n in enumerate(names):
        if n:
            index.setdefault(_key(n), i)
    for i, n in enumerate(names):
        if n and ":" in n:
            index.setdefault(_key(n.split(":")[-1]), i)
    return index


def _lookup(index: dict[str, int], name: str) -> int | None:
    """The index of Blender's ``name`` (``mixamorig:Hips``, ``mixamorig_Hips`` after USD's path rules,
    or ``Hips`` from an importer that dropped the namespace)."""
    return index.get(_key(name))


def model_size(asset: Asset) -> float:
    """The model's size: the diagonal of the bounds of its meshes in the rest pose (world space), or
    (no mesh) of its nodes' rest positions."""
    from .posed import Poser

    poser = Poser(asset)
    if poser.parts:  # the meshes in the rest pose, in world space (skinned and rigid alike)
        points = np.concatenate([p for p, _ in poser.pose(clip_state(asset, None, [0.0]))])
        return float(np.linalg.norm(points.max(axis=0) - points.min(axis=0)))
    _, world = joint_positions(asset, None, [0.0])
    pts = world[0]
    return float(np.linalg.norm(pts.max(axis=0) - pts.min(axis=0)))


def joint_positions(asset: Asset, clip, times: Sequence[float]) -> tuple[list[str], np.ndarray]:
    """Names and world positions (T, N, 3) of every node of ``asset`` posed by ``clip`` at ``times``."""
    state = clip_state(asset, clip, np.asarray(times, np.float64))
    return list(asset.rig.names), np.asarray(state.world)[:, :, :3, 3]


def _signed_permutations() -> list[np.ndarray]:
    out = []
    for perm in itertools.permutations(range(3)):
        for signs in itertools.product((1.0, -1.0), repeat=3):
            m = np.zeros((3, 3))
            m[[0, 1, 2], perm] = signs
            if np.linalg.det(m) > 0:  # rotations only: no format here mirrors
                out.append(m)
    return out


_ROTATIONS = _signed_permutations()
_AXES = "xyz"


def axes_text(rotation: np.ndarray) -> str:
    """The signed permutation as "x,z,-y": skeletal's x, y, z in terms of Blender's axes."""
    parts = []
    for row in rotation:
        j = int(np.argmax(np.abs(row)))
        parts.append(("-" if row[j] < 0 else "") + _AXES[j])
    return ",".join(parts)


def fit_axes(blender: np.ndarray, skeletal: np.ndarray) -> tuple[np.ndarray, float]:
    """The rotation among the 24 signed axis permutations, and the scale, that best map ``blender``
    points (K, 3) onto ``skeletal`` points (K, 3) (least squares, no translation)."""
    best = (np.inf, np.eye(3), 1.0)
    for r in _ROTATIONS:
        mapped = blender @ r.T
        denom = float((mapped * mapped).sum())
        scale = float((mapped * skeletal).sum()) / denom if denom > 0 else 1.0
        residual = float(np.abs(scale * mapped - skeletal).max())
        if residual < best[0]:
            best = (residual, r, scale)
    return best[1], _snap_scale(best[2])


def _snap_scale(scale: float) -> float:
    """Unit scales are powers of ten (and inches): snap a fitted scale within 1e-5 to one."""
    for unit in (1.0, 0.01, 100.0, 0.001, 1000.0, 0.0254, 1 / 0.0254):
        if abs(scale / unit - 1.0) < 1e-5:
            return unit
    return scale


@dataclass
class Check:
    """One comparison: ``direction`` "blender->skeletal" (skeletal reads Blender's export) or
    "skeletal->blender" (Blender reads skeletal's), or "import" (both read the original file)."""

    model: str
    direction: str
    format: str
    clip: str
    joints: int
    frames: int
    max_error: float = float("nan")  # model units
    size: float = float("nan")
    relative: float = float("nan")  # max_error / size
    axes: str = ""
    scale: float = 1.0
    time_origin: str = ""
    passed: bool = False
    note: str = ""
    seconds: float = 0.0  # the writer's time (Blender's or skeletal's)
    bytes: int = 0
    times: list[float] = field(default_factory=list)


#: Candidate times of Blender frame F: (label, function of frame, action's first frame, fps, the
#: clip's key times). "key[F-first]": the file's own frame F-first (a BVH writes its Frame Time
#: rounded to 6 decimals, so whole frames drift from F/fps: 1/24 s is written 0.041667).
TIME_ORIGINS = (
    ("F/fps", lambda f, first, fps, keys: f / fps),
    ("(F-first)/fps", lambda f, first, fps, keys: (f - first) / fps),
    ("(F-1)/fps", lambda f, first, fps, keys: (f - 1) / fps),
    ("(F-start)/fps", lambda f, first, fps, keys: (f - first) / fps),
    ("key[F-first]", lambda f, first, fps, keys: float(keys[int(round(f - first))])
     if keys is not None and 0 <= round(f - first) < len(keys) and float(f).is_integer() else None),
)


def compare(action: dict, fps: float, asset: Asset, clip, *, model: str = "", direction: str = "", fmt: str = "",
            tolerance: float = TOLERANCE, at: str = "samples") -> Check:
    """Compare Blender's sampled heads of ``action`` (from :func:`run_blender`) with ``asset`` posed by
    ``clip``: joints matched by name, axes and scale fitted on the first sample, each time origin of
    :data:`TIME_ORIGINS` tried (the best one is reported). ``at``: "samples" (whole frames: where
    Blender's exporters bake their keys), "range_samples" (the action's first frame plus whole steps:
    where the FBX writer bakes them), "any" (the better of those two) or "key_samples" (the action's
    own key frames: where no interpolation is involved, for files Blender read)."""
    if at == "any":  # whole frames, or whole steps from the action's start: the better fit
        rows = [compare(action, fps, asset, clip, model=model, direction=direction, fmt=fmt, tolerance=tolerance, at=a)
                for a in ("samples", "range_samples") if action.get(a)]
        return min(rows, key=lambda r: r.relative if np.isfinite(r.relative) else np.inf)
    samples = action[at] or action["samples"]
    first = float(np.floor(action["frame_range"][0] + 1e-6))
    if at == "range_samples":
        first = float(action["frame_range"][0])
    index = _name_index(asset.rig.names)
    found = {b: _lookup(index, b) for b in samples[0]["heads"]}
    bones = [b for b, i in found.items() if i is not None]
    if len(set(found[b] for b in bones)) < len(bones):  # two Blender bones on one joint: keep the first
        seen: set[int] = set()
        bones = [b for b in bones if not (found[b] in seen or seen.add(found[b]))]
    clip_name = clip.name if hasattr(clip, "name") else str(clip)
    check = Check(model, direction, fmt, clip_name, len(bones), len(samples))
    if len(bones) < 2:
        check.note = f"{len(bones)} joint names in common"
        return check
    rows = [found[b] for b in bones]
    heads = np.array([[s["heads"][b] for b in bones] for s in samples], np.float64)  # (T, K, 3)
    best = None
    tracks = getattr(clip, "tracks", None) or []
    keys = max((t.times for t in tracks), key=len, default=None)
    for label, to_time in TIME_ORIGINS:
        times = [to_time(s["frame"], first, fps, keys) for s in samples]
        if any(t is None for t in times):
            continue
        _, world = joint_positions(asset, clip, times)
        ours = world[:, rows]
        rotation, scale = fit_axes(heads[0], ours[0])
        err = float(np.linalg.norm(scale * heads @ rotation.T - ours, axis=2).max())
        if best is None or err < best[0]:
            best = (err, label, rotation, scale, times, ours)
    err, label, rotation, scale, times, ours = best
    size = model_size(asset)
    check.max_error, check.size, check.relative = err, size, err / size if size > 0 else float("inf")
    check.axes, check.scale, check.times = axes_text(rotation), scale, times
    check.time_origin = label + (" (F = start + k)" if at == "range_samples" else "")
    check.passed = check.relative <= tolerance
    return check


def _match_clip(asset: Asset, action_name: str, position: int, count: int):
    """The clip of ``asset`` that Blender's action ``action_name`` came from or went to: the same
    name, else the one clip whose name ends with ``|`` and the action's ("Armature|Walk") or the other
    way round, else one whose name is inside the action's, else the only clip, else by position."""
    if not asset.clips:
        return None
    clips = asset.clips
    for c in clips:
        if c.name == action_name:
            return c
    key = _key(action_name)
    suffixed = [c for c in clips if _key(c.name).endswith("_" + key) or key.endswith("_" + _key(c.name))]
    if len(suffixed) == 1:  # "Armature|Jump" for "Jump" (not "Armature|WalkJump")
        return suffixed[0]
    inside = [c for c in clips if _key(c.name) and (_key(c.name) in key or key in _key(c.name))]
    if inside:
        return max(inside, key=lambda c: len(c.name))
    if len(clips) == 1:
        return clips[0]
    return clips[position] if count == len(clips) and position < len(clips) else None


def _merged_takes(asset: Asset, action_name: str):
    """One clip from the FBX takes Blender wrote for ``action_name``: its FBX writer writes one take per
    animated object and action (``Character|Idle``, ``mixamorig:LeftHandPinky3|Idle``, ...), which
    Assimp reads as separate animations. None when there are fewer than two."""
    from ..anim.clip import Clip

    takes = [c for c in asset.clips if c.name.endswith("|" + action_name)]
    if len(takes) < 2:
        return None
    seen: set[tuple[int, str]] = set()
    tracks = []
    for clip in takes:
        for track in clip.tracks:
            if (track.node, track.path) not in seen:
                seen.add((track.node, track.path))
                tracks.append(track)
    return Clip(action_name, tracks)


def check_model(model: str | os.PathLike, folder: str | os.PathLike | None = None, *,
                blender_exports: Sequence[str] = BLENDER_EXPORTS, skeletal_exports: Sequence[str] = SKELETAL_EXPORTS,
                samples: int = 4, python: str | None = None, tolerance: float = TOLERANCE) -> list[Check]:
    """Every comparison for ``model`` (see the module docstring) as :class:`Check` rows; exports go
    to ``folder`` (a temporary one, removed, by default)."""
    model = Path(model)
    own = folder is None
    work = Path(tempfile.mkdtemp(prefix="skeletal-blender-")) if own else Path(folder)
    work.mkdir(parents=True, exist_ok=True)
    try:
        return _check_model(model, work, blender_exports, skeletal_exports, samples, python, tolerance)
    finally:
        if own:
            shutil.rmtree(work, ignore_errors=True)


def _check_model(model: Path, work: Path, blender_exports, skeletal_exports, samples, python, tolerance) -> list[Check]:
    name = model.stem
    original = load(model)
    files = {"glb": "blender.glb", "fbx": "blender.fbx", "fbx-exact": "blender_exact.fbx"}
    exports = {fmt: os.fspath(work / files.get(fmt, f"blender_{fmt}")) for fmt in blender_exports}
    report = run_blender(model, work / "blender.json", exports=exports, samples=samples, python=python)
    actions, fps = report["actions"], float(report["fps"])
    rows: list[Check] = []
    n = len(actions)
    for i, action in enumerate(actions):  # Blender and skeletal both read the original
        clip = _match_clip(original, action["name"], i, n)
        if clip is not None:
            rows.append(compare(action, fps, original, clip, model=name, direction="import",
                                fmt=model.suffix.lstrip("."), tolerance=tolerance, at="key_samples"))
    for fmt in blender_exports:  # Blender writes, skeletal reads
        info = report["exports"].get(fmt, {})
        files = info.get("files", [])
        for i, action in enumerate(actions):
            path = files[0] if fmt.startswith(("glb", "fbx")) else (files[i] if i < len(files) else None)
            row = Check(name, "blender->skeletal", fmt, action["name"], 0, len(action["samples"]),
                        seconds=float(info.get("seconds", 0.0)), bytes=int(info.get("bytes", 0)))
            try:
                exported = load(path) if path else None
            except SkeletalError as exc:
                row.note = f"skeletal cannot read it: {exc}"
                rows.append(row)
                continue
            clip = None if exported is None else (
                (_merged_takes(exported, action["name"]) if fmt.startswith("fbx") else None)
                or _match_clip(exported, action["name"], i, n))
            if clip is None:
                row.note = "no matching clip in the export"
                rows.append(row)
                continue
            checked = compare(action, fps, exported, clip, model=name, direction="blender->skeletal", fmt=fmt,
                              tolerance=tolerance, at="any")
            checked.seconds, checked.bytes, checked.clip = row.seconds, row.bytes, action["name"]
            rows.append(checked)
    for fmt in ("fbx", "fbx-exact"):  # Blender reads its own FBX back: is the file right?
        files = report["exports"].get(fmt, {}).get("files", [])
        if files:
            back = run_blender(files[0], work / f"reread_{fmt}.json", samples=0, python=python)
            for action in actions:
                again = _match_action(back["actions"], action["name"])
                if again is not None:
                    rows.append(compare_blender(action, again, model=name, fmt=fmt, tolerance=tolerance))
    for fmt in skeletal_exports:  # skeletal writes, Blender reads
        rows.extend(_reverse(original, name, fmt, work, samples, python, tolerance))
    return rows


def _match_action(actions: list[dict], name: str) -> dict | None:
    """The action among ``actions`` named ``name`` or ending with it (FBX takes come back as
    ``Armature|Armature|walk``)."""
    for a in actions:
        if a["name"] == name:
            return a
    ends = [a for a in actions if a["name"].endswith(name) or name.endswith(a["name"])]
    return ends[0] if ends else None


def compare_blender(reference: dict, action: dict, *, model: str = "", fmt: str = "fbx",
                    tolerance: float = TOLERANCE) -> Check:
    """Blender's pose of ``reference`` (sampled whole frames) against its pose of ``action`` read back
    from its own export (every whole frame sampled): the best whole-frame offset (an importer may start
    the take at frame 1) and axes/scale fitted as in :func:`compare`; the error relative to the
    joints' extent. Direction "blender->blender": whether the file holds what Blender meant to write."""
    frames = {s["frame"]: s["heads"] for s in action["samples"]}
    ref = reference["samples"]
    bones = [b for b in ref[0]["heads"] if b in frames.get(next(iter(frames), 0), {})]
    check = Check(model, "blender->blender", fmt, reference["name"], len(bones), len(ref))
    if len(bones) < 2:
        check.note = f"{len(bones)} bone names in common"
        return check
    a = np.array([[s["heads"][b] for b in bones] for s in ref], np.float64)
    size = float(np.linalg.norm(a.reshape(-1, 3).max(axis=0) - a.reshape(-1, 3).min(axis=0))) or 1.0
    best = None
    for offset in range(-2, 3):
        if any(s["frame"] + offset not in frames for s in ref):
            continue
        b = np.array([[frames[s["frame"] + offset][n] for n in bones] for s in ref], np.float64)
        rotation, scale = fit_axes(b[0], a[0])
        err = float(np.linalg.norm(scale * b @ rotation.T - a, axis=2).max())
        if best is None or err < best[0]:
            best = (err, offset, rotation, scale)
    if best is None:
        check.note = "the frames read back do not cover the reference's"
        return check
    err, offset, rotation, scale = best
    check.max_error, check.size, check.relative = err, size, err / size
    check.axes, check.scale, check.time_origin = axes_text(rotation), scale, f"F{offset:+d} read back"
    check.passed = check.relative <= tolerance
    return check


def _reverse(original: Asset, name: str, fmt: str, work: Path, samples: int, python, tolerance) -> list[Check]:
    from ..tools.export import export, write_bvh

    rows = []
    clips = original.clips if fmt != "glb" else [None]
    for k, clip in enumerate(clips):
        path = work / (f"skeletal.{fmt}" if clip is None else f"skeletal_{k:02d}.{fmt}")
        t0 = time.perf_counter()
        try:
            if fmt == "bvh":
                write_bvh(original, clip, path)
            else:
                export(original, path, None if clip is None else [clip])
        except SkeletalError as exc:
            rows.append(Check(name, "skeletal->blender", fmt, getattr(clip, "name", "all"), 0, 0,
                              note=f"skeletal cannot write it: {exc}"))
            continue
        seconds = time.perf_counter() - t0
        report = run_blender(path, work / f"{path.name}.json", samples=samples, python=python)
        actions = report["actions"]
        fps, note = float(report["fps"]), ""
        if fmt == "usd":
            # Blender's USD importer puts time code T on frame T and leaves the scene's rate as it was
            # (24 fps): the stage's timeCodesPerSecond gives the times.
            rate = _usd_time_codes_per_second(path)
            if rate and abs(rate - fps) > 1e-9:
                note = (f"Blender keeps the scene at {fps:g} fps and puts time code T on frame T: the stage's "
                        f"{rate:g} time codes per second play {fps / rate:.2f}x as fast in Blender")
                fps = rate
        for i, action in enumerate(actions):
            target = clip if clip is not None else _match_clip(original, action["name"], i, len(actions))
            if target is None:
                continue
            row = compare(action, fps, original, target, model=name, direction="skeletal->blender",
                          fmt=fmt, tolerance=tolerance, at="key_samples")
            row.seconds, row.bytes, row.note = seconds, path.stat().st_size, note
            if fmt == "usd" and not row.passed and row.times:
                row.note = "; ".join(filter(None, [note, _usd_core_note(path, original, target, row.times)]))
            rows.append(row)
        if not actions:
            rows.append(Check(name, "skeletal->blender", fmt, getattr(clip, "name", "all"), 0, 0,
                              note="Blender imported no animated armature"))
    return rows


def usd_core_positions(path: str | os.PathLike, names: Sequence[str], times: Sequence[float]) -> np.ndarray | None:
    """World positions (T, K, 3) of the joints ``names`` (last path component) of the first skeleton
    of a USD stage at ``times`` (seconds from ``startTimeCode``), as usd-core's own UsdSkel evaluation
    gives them (``SkeletonQuery.ComputeJointSkelTransforms`` and the skeleton's world transform):
    the reference implementation, to tell which reader of a stage is right. None without usd-core."""
    try:
        from pxr import Usd, UsdGeom, UsdSkel
    except ImportError:
        return None
    stage = Usd.Stage.Open(os.fspath(path))
    cache = UsdSkel.Cache()
    skeleton = next((UsdSkel.Skeleton(p) for p in stage.Traverse() if p.IsA(UsdSkel.Skeleton)), None)
    if skeleton is None:
        return None
    query = cache.GetSkelQuery(skeleton)
    order = [str(j).split("/")[-1] for j in query.GetJointOrder()]
    pick = [order.index(n) if n in order else -1 for n in names]
    start, rate = stage.GetStartTimeCode(), stage.GetTimeCodesPerSecond() or 24.0
    xform = UsdGeom.XformCache()
    out = np.full((len(times), len(names), 3), np.nan)
    for t, seconds in enumerate(times):
        code = Usd.TimeCode(start + seconds * rate)
        xform.SetTime(code)
        skel_to_world = np.array(xform.GetLocalToWorldTransform(skeleton.GetPrim()))  # row vectors
        joints = np.array(query.ComputeJointSkelTransforms(code))  # (J, 4, 4) row vectors
        for k, j in enumerate(pick):
            if j >= 0:
                out[t, k] = (joints[j] @ skel_to_world)[3, :3]
    return out


def _usd_time_codes_per_second(path: Path) -> float | None:
    try:
        from pxr import Usd
    except ImportError:
        return None
    stage = Usd.Stage.Open(os.fspath(path))
    return float(stage.GetTimeCodesPerSecond()) if stage else None


def _usd_core_note(path: Path, original: Asset, clip, times: list[float]) -> str:
    """How far usd-core's evaluation of skeletal's stage is from skeletal's pose of the original."""
    names, world = joint_positions(original, clip, times)
    keep = [i for i, n in enumerate(names) if n]
    reference = usd_core_positions(path, [names[i] for i in keep], times)
    if reference is None:
        return ""
    ours = world[:, keep]
    found = ~np.isnan(reference[..., 0])
    if not found.any():
        return ""
    err = float(np.linalg.norm(reference[found] - ours[found], axis=-1).max())
    pts = ours[found]
    size = float(np.linalg.norm(pts.max(axis=0) - pts.min(axis=0))) or 1.0
    return f"usd-core's own UsdSkel evaluation of the same stage agrees with skeletal to {err / size:.1e} of the size"


def format_table(rows: Sequence[Check]) -> str:
    """The rows as a Markdown table, one line per model, direction and format (the worst clip)."""
    groups: dict[tuple[str, str, str], list[Check]] = {}
    for r in rows:
        groups.setdefault((r.model, r.direction, r.format), []).append(r)
    lines = ["| model | direction | format | clips | joints | frames | worst error / size | axes | scale | time of frame F | pass |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for (model, direction, fmt), group in groups.items():
        worst = max(group, key=lambda r: (r.relative if np.isfinite(r.relative) else np.inf))
        ok = all(r.passed for r in group)
        rel = f"{worst.relative:.1e}" if np.isfinite(worst.relative) else (worst.note or "-")
        lines.append(f"| {model} | {direction} | {fmt} | {len(group)} | {worst.joints} | {sum(r.frames for r in group)} | "
                     f"{rel} | {worst.axes} | {worst.scale:g} | {worst.time_origin} | {'yes' if ok else 'NO'} |")
    return "\n".join(lines)


def rows_to_json(rows: Sequence[Check]) -> list[dict]:
    return [asdict(r) for r in rows]


__all__ = ["Check", "TOLERANCE", "blender_python", "check_model", "compare", "fit_axes", "format_table",
           "joint_positions", "run_blender", "rows_to_json"]
