"""``skeletal batch``: the command over :mod:`skeletal.batch`."""

from __future__ import annotations

import json
import os
from typing import Any

import click

from ..batch import RAY_MISSING, BatchError, ray_available, run_batch
from ..batch.jobs import JOBS
from ..batch.workers import DEFAULT_MEMORY, DEFAULT_TIMEOUT


@click.command("batch")
@click.argument("command", type=click.Choice(sorted(JOBS)))
@click.argument("inputs")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Output folder.")
@click.option("--ray", "ray_address", is_flag=False, flag_value="local", default=None, metavar="[auto|ADDRESS]",
              help="Run on Ray: alone a local runtime, 'auto' the running cluster, or a cluster address.")
@click.option("--jobs", "-j", "workers", type=int, default=None, help="Worker processes of the local pool (default: CPUs).")
@click.option("--serial", is_flag=True, help="No pool: one file after another (in one supervised worker).")
@click.option("--chunk", type=int, default=1, show_default=True, help="Files per task sent to a worker.")
@click.option("--force", is_flag=True, help="Redo files whose outputs are up to date.")
@click.option("--timeout", type=float, default=DEFAULT_TIMEOUT, show_default=True,
              help="Seconds one file may take (wall clock; also its CPU-time limit); then it fails.")
@click.option("--memory", type=int, default=DEFAULT_MEMORY >> 20, show_default=True,
              help="MB of memory one file may use beyond its worker's own (0: no limit).")
@click.option("--follow-symlinks", is_flag=True, help="Also take symbolic links that lead out of an input folder.")
@click.option("--trusted", is_flag=True,
              help="Trusted files: read Assimp formats in the worker itself (no child process per file) and lift "
                   "the per-file memory budget (SKELETAL_MEMORY_BUDGET=unlimited).")
@click.option("--report", "report", type=click.Path(dir_okay=False), default=None,
              help="JSON report path (default: OUT/batch-report.json).")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@click.option("--json", "as_json", is_flag=True, help="info: write JSON (the only form batch writes; accepted for symmetry).")
@click.option("--clip", "clip_keys", multiple=True, help="bake/retarget: the clip (first one given); compress/export: clips to write.")
@click.option("--fps", type=float, default=None, help="bake: sample rate (default 30); retarget: key rate.")
@click.option("--error", type=float, default=1e-4, show_default=True, help="compress: error bound in model units.")
@click.option("--distance", type=float, default=None, help="compress: virtual vertex distance in model units.")
@click.option("--target", type=click.Path(dir_okay=False), default=None, help="retarget: the target model.")
@click.option("--map", "map_path", type=click.Path(dir_okay=False), default=None,
              help="retarget: JSON object of source joint name -> target joint name (or null).")
def batch_command(command, inputs, out_dir, ray_address, workers, serial, chunk, force, timeout, memory,
                  follow_symlinks, trusted, report, no_progress, as_json, clip_keys, fps, error, distance, target,
                  map_path) -> None:
    """Run COMMAND (bake, compress, export, retarget, info) on every model in INPUTS (a folder or a
    glob pattern such as 'mocap/**/*.bvh'), writing OUT/<same relative path>.<npz|glb|json>.

    Files whose outputs are newer than their inputs are skipped (resume); failures are listed in
    the JSON report (rewritten as files finish) and do not stop the batch: each file runs in a
    supervised worker under --timeout and --memory, and one that crashes or hangs is reported and
    replaced. Exit status 1 when any file failed."""
    if serial and ray_address is not None:
        raise BatchError("give --serial or --ray, not both")
    if ray_address is not None and not ray_available():
        raise BatchError(RAY_MISSING)
    options: dict[str, Any] = {}
    if command in ("bake", "retarget"):
        if clip_keys:
            options["clip"] = clip_keys[0]
        if fps is not None:
            options["fps"] = fps
    if command in ("compress", "export") and clip_keys:
        options["clips"] = list(clip_keys)
    if command == "compress":
        options["error"] = error
        if distance is not None:
            options["distance"] = distance
    if command == "retarget":
        if target is None:
            raise BatchError("retarget needs --target MODEL")
        options["target"] = os.path.abspath(target)
        if map_path is not None:
            try:
                with open(map_path, encoding="utf-8") as f:
                    options["mapping"] = json.load(f)
            except ValueError as exc:
                raise BatchError(f"{map_path}: not JSON ({exc})") from None
    if trusted:
        options["isolate"] = False
    executor = "serial" if serial else ("ray" if ray_address is not None else "pool")
    summary = run_batch(command, inputs, out_dir, options=options, executor=executor, workers=workers,
                        ray_address=ray_address, chunk=chunk, force=force,
                        report="" if report is None else report, progress=not no_progress, timeout=timeout,
                        memory=(memory << 20) if memory else None, follow_symlinks=follow_symlinks)
    click.echo(summary.table(), err=True)
    if summary.failed:
        raise SystemExit(1)
