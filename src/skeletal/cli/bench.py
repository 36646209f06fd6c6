"""``skeletal bench``: the command over :mod:`skeletal.bench` (``python -m skeletal.cli.bench``).

The table's rows are printed as their stages finish (a long run shows its figures as it goes, and a
run stopped early keeps what it printed); progress (``[k/n] stage (s so far)``) goes to stderr."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ..bench import format_footer, format_header, format_row, format_title, run_suite

#: What ``--quick`` promises. Measured on 2 cores at a load average of 10: 54 s with the kernels
#: compiled (after ``skeletal warmup``), 4.4 min on a first run that compiles them as it goes.
QUICK_PROMISE = "about 1 minute (minutes more before skeletal warmup)"


@click.command("bench")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Also write the results as JSON to FILE.")
@click.option("--quick", is_flag=True, help=f"Fewer repeats and smaller bandwidth arrays: {QUICK_PROMISE}.")
@click.option("--model", type=click.Path(exists=True, dir_okay=False),
              help="Model for the crowd/single/load figures (default: Soldier.glb from the shared assets, "
                   "else the built-in character).")
def bench(json_path: str | None, quick: bool, model: str | None) -> None:
    """Measure crowd, single-character, skinning and loading speed against same-run baselines.

    Each row is printed as soon as its stage finishes (progress on stderr)."""
    def start(result: dict) -> None:
        click.echo(format_title(result))
        click.echo("")
        for line in format_header():
            click.echo(line)

    def row(r: tuple) -> None:
        for line in format_row(r):
            click.echo(line)

    if quick:
        click.echo(f"skeletal bench --quick: {QUICK_PROMISE}; rows as they finish", err=True)
    result = run_suite(quick=quick, model=model, progress=lambda msg: click.echo(f"... {msg}", err=True),
                       on_row=row, on_start=start)
    click.echo("")
    click.echo(format_footer(result))
    if json_path:
        Path(json_path).write_text(json.dumps(result, indent=2) + "\n")
        click.echo(f"wrote {json_path}", err=True)


if __name__ == "__main__":  # python -m skeletal.cli.bench
    sys.exit(bench.main(standalone_mode=True))
