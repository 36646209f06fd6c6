"""``skeletal warmup``: compile every kernel once, in parallel processes (see :mod:`skeletal.warmup`)."""

from __future__ import annotations

import time

import click


@click.command("warmup")
@click.option("--jobs", "-j", "processes", type=int, default=None,
              help="Worker processes (default: one per CPU).")
@click.option("--only", "only", multiple=True,
              help="Compile only these features (repeat), in this order: player, crowd, transitions, ik, procedural, skin, dq.")
def warmup_command(processes, only) -> None:
    """Compile skeletal's numba kernels for this CPU now, into numba's on-disk cache, so that the
    first Player, Crowd, render or bake of later runs starts in about a second. It says which
    features are compiling and how many are left as it goes."""
    from ..batch.warmup import JOBS, warmup

    names = list(only) if only else list(JOBS)
    for name in names:
        if name not in JOBS:
            raise click.BadParameter(f"{name!r} is not one of {', '.join(JOBS)}", param_hint="--only")
    start = time.perf_counter()
    click.echo(f"skeletal: compiling kernels for {', '.join(names)} (once per CPU and skeletal version)", err=True)

    report = warmup(names, processes, status=lambda line: click.echo(f"  {line}", err=True))
    failed = [n for n, r in report.items() if not r["ok"]]
    click.echo(f"skeletal: kernels ready in {time.perf_counter() - start:.1f} s"
               + (f"; failed: {', '.join(failed)}" if failed else ""), err=True)
    if failed:
        raise SystemExit(1)
