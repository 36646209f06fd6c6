"""``skeletal bake-texture``: clips baked into an animation texture (:mod:`skeletal.render.anim_texture`)."""

from __future__ import annotations

import click

from ..errors import SkeletalError


@click.command("bake-texture")
@click.argument("model", type=click.Path())
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False),
              help="Texture file: .npy or .bin (float32) or .png (16-bit RGBA); a .json beside it describes it.")
@click.option("--fps", type=float, default=30.0, show_default=True, help="Frames baked per second of each clip.")
@click.option("--clip", "clip_keys", multiple=True, help="Clip to bake (repeat; default: all).")
def bake_texture_command(model, out_path, fps, clip_keys) -> None:
    """Bake MODEL's clips into a texture of skin palettes for GPU crowds (one row per frame, three RGBA
    texels per joint), plus a JSON description; print how far it moves a vertex from live posing at the
    baked frames and between them (where the shader lerps two frames).

    \b
    Example:
      skeletal bake-texture Soldier.glb --out soldier_anim.png --fps 60
    """
    from ..asset import load
    from ..render.anim_texture import bake_texture, load_texture, save_texture, sidecar, texture_error

    asset = load(model)
    texture = bake_texture(asset, list(clip_keys) or None, fps)
    save_texture(texture, out_path)
    stored = load_texture(out_path)  # the error of what was written (16-bit PNG: quantised)
    error = texture_error(asset, stored)
    save_texture(texture, out_path, error)
    height, width = texture.texels.shape[:2]
    click.echo(f"wrote {out_path} ({width} x {height} texels: {texture.joint_count} palette matrices x "
               f"{height} frames of {len(texture.clips)} clip{'s' if len(texture.clips) != 1 else ''} at {fps:g} fps) "
               f"and {sidecar(out_path)}")
    size = error["size"]
    for label, name in (("at_frames", "at baked frames"), ("between_frames", "between frames")):
        worst = error[label]["max"]
        click.echo(f"error against live posing {name}: {worst:.3g} model units ({100 * worst / size:.3g}% of the "
                   f"model's {size:.3g})")


__all__ = ["bake_texture_command", "SkeletalError"]
