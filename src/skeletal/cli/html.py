"""``skeletal html MODEL --out page.html``: a self-contained page that plays the model's clips."""

from __future__ import annotations

import os

import click

from ..errors import SkeletalError
from .up import load_upright, up_option
from .options import scene_option
from ..shown import shown


@click.command("html")
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False), help="The page to write (.html).")
@click.option("--clip", "clip_keys", multiple=True,
              help="Clip to include (repeat; default: all). The first one is shown first.")
@click.option("--size", default="640x480", show_default=True, help="View size in CSS pixels, WIDTHxHEIGHT.")
@click.option("--title", default=None, help="Page title (default: the model's name).")
@click.option("--follow", is_flag=True, help="The camera follows the character (default: it frames the whole path).")
@up_option
@scene_option
def html_command(model, out_path, clip_keys, size, title, follow, up, scene) -> None:
    """Write one HTML file that plays MODEL in any browser: clip list, play/pause, timeline, speed,
    orbit camera, bones. Everything is embedded; the page fetches nothing from the network.

    \b
    skeletal html Soldier.glb --out soldier.html
    skeletal html walk.bvh --out walk.html
    """
    from ..render.output import parse_size
    from ..web import to_html

    if not os.path.isfile(model):
        raise SkeletalError(f"{model}: no such file")
    if not out_path.lower().endswith((".html", ".htm")):
        raise SkeletalError(f"--out {out_path!r}: the page must end in .html")
    width, height = parse_size(size)
    asset = load_upright(model, up, scene)
    clips = list(clip_keys) or None
    path = to_html(asset, out_path, clips=clips, width=width, height=height, title=title, follow=follow)
    size_bytes = os.path.getsize(path)
    click.echo(f"{shown(os.path.basename(model))} -> {shown(path)}: {len(asset.clips) if clips is None else len(clips)} clip(s), "
               f"page {size_bytes / 1e6:.1f} MB")
