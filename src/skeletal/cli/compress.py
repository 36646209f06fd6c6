"""``skeletal compress``: the command over :mod:`skeletal.compress`."""

from __future__ import annotations

import click

from ..tools.compress import compress_asset
from ..errors import ClipError
from .options import scene_option
from ..shown import shown


@click.command("compress")
@click.argument("model", type=click.Path())
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False), help="Output .glb or .gltf.")
@click.option("--error", "error", type=float, default=1e-4, show_default=True,
              help="World-space error bound in model units (1e-4: ACL's 0.01 cm for a model in metres).")
@click.option("--distance", type=float, default=None,
              help="Virtual vertex distance in model units (default: 3 cm on a 1.8 m figure, scaled).")
@click.option("--clip", "clip_keys", multiple=True, help="Clip to compress and write (repeat; default: all).")
@click.option("--no-quantize", is_flag=True, help="Keep rotations as float32 (no 16-bit rotation keys).")
@click.option("--keep-rest-tracks", is_flag=True, help="Keep tracks that only hold the rest pose.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@scene_option
def compress_command(model, out_path, error, distance, clip_keys, no_quantize, keep_rest_tracks, as_json, scene) -> None:
    """Compress MODEL's clips to a world-space error bound and write them as glTF.

    Reports, per clip and in total, keys and bytes of animation data before and after, and the
    measured worst error; then the file sizes (MODEL, MODEL re-written uncompressed, OUT)."""
    import json
    import os

    from ..asset import load
    from ..tools.export import asset_to_document, export
    from ..io.gltf_write import glb_bytes

    if not out_path.lower().endswith((".glb", ".gltf")):
        raise ClipError(f"--out {out_path!r}: the file must end in .glb or .gltf")
    asset = load(model, scene=scene)
    if not asset.clips:
        raise ClipError(f"{model}: has no clips to compress")
    originals = [asset.clip(k) for k in clip_keys] if clip_keys else list(asset.clips)
    clips, stats = compress_asset(asset, originals, error, distance=distance, quantize=not no_quantize,
                                  drop_rest_tracks=not keep_rest_tracks)
    export(asset, out_path, clips, short_rotations=True)
    sizes = {"input_file": os.path.getsize(model), "uncompressed_file": len(glb_bytes(asset_to_document(asset, originals))),
             "output_file": os.path.getsize(out_path)}
    before = sum(s.bytes_before for s in stats)
    after = sum(s.bytes_after for s in stats)
    worst = max(s.max_error for s in stats)
    report = {
        "file": model, "out": out_path, "error_bound": error,
        "clips": [{"name": s.name, "keys_before": s.keys_before, "keys_after": s.keys_after,
                   "bytes_before": s.bytes_before, "bytes_after": s.bytes_after, "ratio": s.ratio,
                   "max_error": s.max_error, "max_weight_error": s.max_weight_error} for s in stats],
        "animation_bytes_before": before, "animation_bytes_after": after,
        "ratio": before / after if after else None, "max_error": worst, **sizes,
    }
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    click.echo(f"{os.path.basename(model)} -> {out_path}: error bound {error:g} (model units)")
    for s in stats:
        click.echo(f"  {shown(s.name)}: keys {s.keys_before} -> {s.keys_after}, animation data {s.bytes_before} -> "
                   f"{s.bytes_after} bytes ({s.ratio:.2f}x), max error {s.max_error:.3g}")
    click.echo(f"animation data: {before} -> {after} bytes ({before / after if after else float('inf'):.2f}x), "
               f"max error {worst:.3g} (bound {error:g})")
    click.echo(f"file size: {sizes['input_file']} bytes ({os.path.basename(model)}), "
               f"{sizes['uncompressed_file']} bytes uncompressed as .glb -> {sizes['output_file']} bytes")
