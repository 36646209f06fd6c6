"""``skeletal warmup``: compile every kernel once, in parallel processes (see :mod:`skeletal.warmup`)."""

from __future__ import annotations

import time

import click


@click.command("warmup")
@click.option("--jobs", "-j", "processes", type=int, default=None,
              help="Worker processes (default: one per CPU).")
@click.option("--only", "only", multiple=True,
              help="Compile only these features (repeat): player, crowd, ik, procedural, skin, dq.")
def warmup_command(processes, only) -> None:
    """Compile skeletal's numba kernels for this CPU now, into numba's on-disk cache, so that the
    first Player, Crowd, render or bake of later runs starts in about a second."""
    from ..warmup import JOBS, warmup

    names = list(only) if only else list(JOBS)
    for name in names:
        if name not in JOBS:
            raise click.BadParameter(f"{name!r} is not one of {', '.join(JOBS)}", param_hint="--only")
    start = time.perf_counter()
    click.echo(f"skeletal: compiling kernels for {', '.join(names)} (once per CPU and skeletal version)", err=True)

    def progress(name: str, result: dict) -> None:
        if result["ok"]:
            click.echo(f"  {name}: {result['seconds']:.1f} s (CPU {result['cpu_seconds']:.1f} s)", err=True)
        else:
            click.echo(f"  {name}: failed: {result['error']}", err=True)

    report = warmup(names, processes, progress)
    failed = [n for n, r in report.items() if not r["ok"]]
    click.echo(f"skeletal: kernels ready in {time.perf_counter() - start:.1f} s"
               + (f"; failed: {', '.join(failed)}" if failed else ""), err=True)
    if failed:
        raise SystemExit(1)
