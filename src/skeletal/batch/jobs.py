"""Per-file jobs of ``skeletal batch``: plain module-level functions, so that a process pool or a Ray
worker can pickle them by name.

Every job has the signature ``job(source, output, options) -> dict``: read ``source`` (a model file:
glTF/GLB, BVH, or anything :func:`skeletal.load` reads), write ``output`` (the batch runner picks its
name and suffix, see :data:`OUTPUT_SUFFIX`), return a small JSON-ready dict of figures for the report.
A job raises on bad input (a :class:`skeletal.SkeletalError` naming the file, or any exception);
:func:`run_task` turns that into a failed :class:`FileResult` instead of stopping the batch.

Outputs are written to a temporary name next to the final one and renamed when complete, so an
interrupted batch never leaves a half-written file that a resumed run would take as done.

>>> import tempfile, os
>>> from skeletal.demo import build_demo_document
>>> from skeletal.io.gltf_write import write_gltf
>>> folder = tempfile.mkdtemp()
>>> write_gltf(build_demo_document(), os.path.join(folder, "demo.glb"))
>>> r = run_task(Task("info", os.path.join(folder, "demo.glb"), os.path.join(folder, "demo.json"), {}))
>>> r.status, r.details["clips"]
('ok', 4)
"""

from __future__ import annotations

import json
import os
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

__all__ = ["Task", "FileResult", "run_task", "JOBS", "OUTPUT_SUFFIX", "CONFINE_OPTION", "bake_job", "compress_job", "export_job",
           "retarget_job", "info_job"]


@dataclass(frozen=True)
class Task:
    """One file's job: ``command`` (a key of :data:`JOBS`), ``source`` and ``output`` paths, options."""

    command: str
    source: str
    output: str
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class FileResult:
    """What became of one file: ``status`` is ``"ok"``, ``"failed"`` or ``"skipped"``; ``error`` the
    one-line message of a failure (``"ModelError: x.glb: accessors[3]: ..."``)."""

    source: str
    output: str
    status: str
    seconds: float = 0.0
    error: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _atomic(output: str, write: Callable[[str], None]) -> None:
    """Call ``write(tmp)`` with a temporary path beside ``output`` (same suffix), then rename it."""
    out = Path(output)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.stem}.{os.getpid()}.part{out.suffix}")
    try:
        write(str(tmp))
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            tmp.unlink()


#: The option naming the real folder a task's source must lie in (set by the batch for folder inputs).
CONFINE_OPTION = "confine"


def _load(source: str, options: dict[str, Any]):
    """:func:`skeletal.load`; ``options["isolate"] = False`` reads Assimp formats in the worker itself
    and lifts the memory budget of :mod:`skeletal.io.budget` (trusted files: the batch's worker
    supervision is then the only isolation)."""
    from ..asset import load

    if not options.get("isolate", True):
        from ..io.budget import set_memory_budget

        set_memory_budget("unlimited")
    return load(source, isolate=bool(options.get("isolate", True)))


def _check_confined(source: str, root: str) -> None:
    """Refuse ``source`` unless the file it names now (links followed) lies inside ``root``: what the
    folder walk saw may have been swapped for a link to a file outside since."""
    from ..errors import ModelError

    real = os.path.realpath(source)
    try:
        inside = os.path.commonpath([real, root]) == root
    except ValueError:
        inside = False
    if not inside:
        raise ModelError(source, None, f"now leads outside the input folder {root} (a symbolic link?): not read")


def _clip_keys(asset, options: dict[str, Any]) -> list:
    keys = options.get("clips") or []
    return [asset.clip(k) for k in keys] if keys else list(asset.clips)


# ---------------------------------------------------------------------------------------------
# the jobs


def bake_job(source: str, output: str, options: dict[str, Any]) -> dict[str, Any]:
    """``skeletal bake`` of one file: clip ``options["clip"]`` (default 0) at ``options["fps"]``
    (default 30) -> ``.npz`` (times, node_world, skinned positions; see :mod:`skeletal.bake`)."""
    import numpy as np

    from ..tools.bake import bake

    asset = _load(source, options)
    clip = asset.clip(options.get("clip", 0)) if asset.clips else 0
    arrays = bake(asset, clip, fps=float(options.get("fps") or 30.0), loop=options.get("loop", "clamp"))

    def write(tmp: str) -> None:
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)

    _atomic(output, write)
    return {"times": int(len(arrays["times"])), "nodes": int(arrays["node_world"].shape[1])}


def compress_job(source: str, output: str, options: dict[str, Any]) -> dict[str, Any]:
    """``skeletal compress`` of one file: every clip (or ``options["clips"]``) compressed to
    ``options["error"]`` -> glTF with the compressed clips."""
    from ..tools.compress import compress_asset
    from ..tools.export import export

    asset = _load(source, options)
    clips, stats = compress_asset(asset, _clip_keys(asset, options), error=float(options.get("error", 1e-4)),
                                  distance=options.get("distance"))
    _atomic(output, lambda tmp: export(asset, tmp, clips, short_rotations=True))
    before = sum(s.bytes_before for s in stats)
    after = sum(s.bytes_after for s in stats)
    return {"clips": len(clips), "bytes_before": before, "bytes_after": after,
            "ratio": before / after if after else None,
            "max_error": max((s.max_error for s in stats), default=0.0)}


def export_job(source: str, output: str, options: dict[str, Any]) -> dict[str, Any]:
    """``skeletal export`` of one file: any readable model -> glTF (all clips, or ``options["clips"]``)."""
    from ..tools.export import export

    asset = _load(source, options)
    clips = _clip_keys(asset, options)
    _atomic(output, lambda tmp: export(asset, tmp, clips))
    return {"nodes": len(asset.rig), "clips": len(clips)}


def retarget_job(source: str, output: str, options: dict[str, Any]) -> dict[str, Any]:
    """``skeletal retarget`` of one file onto ``options["target"]`` (a model path): the source's clip
    ``options["clip"]`` (default 0) played by the target, written with the target's meshes."""
    from ..errors import ClipError
    from ..tools.export import export
    from ..tools.retarget import retarget

    target_path = options.get("target")
    if not target_path:
        raise ClipError("retarget needs a target model (--target MODEL)")
    src, tgt = _load(source, options), _load(target_path, options)
    if not src.clips:
        raise ClipError(f"{source}: has no clips to retarget")
    clip = retarget(src.clip(options.get("clip", 0)), src.rig, tgt.rig, options.get("mapping"),
                    fps=options.get("fps"))
    _atomic(output, lambda tmp: export(tgt, tmp, [clip]))
    return {"clip": clip.name, "duration": clip.duration, "tracks": clip.track_count}


def info_job(source: str, output: str, options: dict[str, Any]) -> dict[str, Any]:
    """``skeletal info --json`` of one file -> ``.json``."""
    from ..summary import describe

    summary = describe(_load(source, options))

    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=2)

    _atomic(output, write)
    return {"nodes": len(summary["nodes"]), "clips": len(summary["clips"])}


#: command -> job function.
JOBS: dict[str, Callable[[str, str, dict[str, Any]], dict[str, Any]]] = {
    "bake": bake_job, "compress": compress_job, "export": export_job, "retarget": retarget_job, "info": info_job,
}
#: command -> suffix of its output files.
OUTPUT_SUFFIX = {"bake": ".npz", "compress": ".glb", "export": ".glb", "retarget": ".glb", "info": ".json"}


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or "(no message)"
    return f"{type(exc).__name__}: {text}"


def run_task(task: Task) -> FileResult:
    """Run one task; never raises for a problem with the file (the result says ``failed`` and why)."""
    start = time.perf_counter()
    try:
        options = dict(task.options)
        root = options.pop(CONFINE_OPTION, None)
        if root is not None:
            _check_confined(task.source, root)
        details = JOBS[task.command](task.source, task.output, options)
        return FileResult(task.source, task.output, "ok", time.perf_counter() - start, None, details)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # a batch reports every failure and goes on
        details = {}
        if os.environ.get("SKELETAL_DEBUG"):
            details["traceback"] = traceback.format_exc()
        return FileResult(task.source, task.output, "failed", time.perf_counter() - start, _one_line(exc), details)


def run_chunk(tasks: list[Task]) -> list[FileResult]:
    """Several tasks in one call (fewer round trips to a pool or a cluster for small files)."""
    return [run_task(t) for t in tasks]
