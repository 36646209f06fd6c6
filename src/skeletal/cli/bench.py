"""``skeletal bench``: the command over :mod:`skeletal.bench` (``python -m skeletal.cli.bench``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ..bench import format_table, run_suite


@click.command("bench")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Also write the results as JSON to FILE.")
@click.option("--quick", is_flag=True, help="Fewer repeats and smaller bandwidth arrays (about 20 s).")
@click.option("--model", type=click.Path(exists=True, dir_okay=False),
              help="Model for the crowd/single/load figures (default: Soldier.glb from the shared assets, "
                   "else the built-in character).")
def bench(json_path: str | None, quick: bool, model: str | None) -> None:
    """Measure crowd, single-character, skinning and loading speed against same-run baselines."""
    result = run_suite(quick=quick, model=model, progress=lambda msg: click.echo(f"... {msg}", err=True))
    click.echo(format_table(result))
    if json_path:
        Path(json_path).write_text(json.dumps(result, indent=2) + "\n")
        click.echo(f"wrote {json_path}", err=True)


if __name__ == "__main__":  # python -m skeletal.cli.bench
    sys.exit(bench.main(standalone_mode=True))
