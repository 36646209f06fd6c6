"""The ``skeletal`` command group and its core commands (info, bake, demo, retarget, export).

Every error a user can cause ends as one line on stderr and exit status 2 (never a traceback).
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from typing import Any

import click
import numpy as np

from ..errors import SkeletalError
from ..shown import shown
from ..summary import describe
from .up import load_upright, up_option
from .options import scene_option
from .warn import show_warning


class _Group(click.Group):
    """Turns skeletal errors and OS errors (missing file, permission) into one line + exit 2."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            with warnings.catch_warnings():
                warnings.showwarning = show_warning
                return super().invoke(ctx)
        except SkeletalError as exc:
            raise _fail(str(exc)) from None
        except BrokenPipeError:  # output piped into `head`: stop quietly
            sys.stderr.close()
            raise SystemExit(0) from None
        except OSError as exc:
            where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
            raise _fail(f"{where}{exc.strerror or exc}") from None
        except MemoryError:
            raise _fail("out of memory") from None
        except (click.ClickException, click.exceptions.Exit, click.Abort, SystemExit, KeyboardInterrupt):
            raise
        except Exception as exc:  # a bug in skeletal: still one line, with a way to see more
            if os.environ.get("SKELETAL_DEBUG"):
                raise
            raise _fail(f"internal error ({type(exc).__name__}: {exc}); set SKELETAL_DEBUG=1 for the traceback") from None


class _Failure(click.ClickException):
    exit_code = 2

    def show(self, file=None) -> None:
        click.echo(f"skeletal: error: {shown(self.message)}", err=True)


def _fail(message: str) -> _Failure:
    return _Failure(message)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="skeletal")
def cli() -> None:
    """Skeletal animation for rigged characters and motion capture (glTF, BVH, FBX, Collada, USD...):
    inspect, play, render, edit, retarget, bake, compress and export them."""


# ---------------------------------------------------------------------------------------------
# info


def _print_info(info: dict[str, Any]) -> None:
    def out(line: str) -> None:  # names are the file's text: control characters shown as escapes
        click.echo(shown(line))

    nodes = info["nodes"]
    out(f"{info['file']}" + (f"  (generator: {info['generator']})" if info.get("generator") else ""))
    out(f"nodes: {len(nodes)}   skins: {len(info['skins'])}   meshes: {len(info['meshes'])}   clips: {len(info['clips'])}")
    if info["extensions_used"]:
        req = set(info["extensions_required"])
        out("extensions: " + ", ".join(e + (" (required)" if e in req else "") for e in info["extensions_used"]))
    if info.get("scenes"):
        listed = []
        for k, roots in enumerate(info["scenes"]):
            name = info["scene_names"][k] if k < len(info.get("scene_names", [])) else ""
            tags = [t for t, on in (("default", k == info.get("default_scene")), ("shown", k == info.get("scene"))) if on]
            listed.append(f"[{k}] {name or '<unnamed>'} ({len(roots)} root{'s' if len(roots) != 1 else ''}"
                          + (f", {', '.join(tags)}" if tags else "") + ")")
        out("scenes: " + "   ".join(listed))
    out("")
    out("node tree:")
    roots = [n["index"] for n in nodes if n["parent"] < 0]
    stack = [(r, 0) for r in reversed(roots)]
    orphans = set(info["orphan_roots"])
    while stack:
        i, depth = stack.pop()
        n = nodes[i]
        tags = []
        if n["joint_of_skins"]:
            tags.append("joint of skin " + ",".join(map(str, n["joint_of_skins"])))
        if n["mesh"] is not None:
            tags.append(f"mesh {n['mesh']}" + (f" skinned by skin {n['skin']}" if n["skin"] is not None else ""))
        if i in orphans and depth == 0:
            tags.append("in no scene")
        label = n["name"] or f"<node {i}>"
        out(f"  {'  ' * depth}{label} [{i}]" + (f"  ({'; '.join(tags)})" if tags else ""))
        stack.extend((c, depth + 1) for c in reversed(n["children"]))
    if info["skins"]:
        out("")
        out("skins:")
        for s in info["skins"]:
            out(f"  [{s['index']}] {s['name'] or '<unnamed>'}: {len(s['joints'])} joints")
    if info["meshes"]:
        out("")
        out("meshes:")
        for m in info["meshes"]:
            for p, prim in enumerate(m["primitives"]):
                out(
                    f"  [{m['index']}] {m['name'] or '<unnamed>'} prim {p}: {prim['vertices']} vertices, "
                    f"{prim['influences']} influences, {prim['morph_targets']} morph targets"
                )
    if info["clips"]:
        out("")
        out("clips:")
        for c in info["clips"]:
            out(
                f"  [{c['index']}] {c['name']}: {c['duration']:.4g} s, {c['tracks']} tracks, "
                + (f"{c['property_tracks']} property tracks, " if c.get("property_tracks") else "")
                + f"{'/'.join(c['interpolations']) or 'no keys'}"
                + (f"; animates {len(c['outside_scene'])} node(s) outside the scene shown, left out"
                   if c.get("outside_scene") else "")
            )
    for note in info.get("notes", ()):
        out("")
        out(f"note: {note}")


@cli.command()
@click.argument("model", type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
@up_option
@scene_option
def info(model: str, as_json: bool, up: str, scene: str | None) -> None:
    """Show MODEL's node tree, scenes, skins, meshes, clips and extensions (and its up axis when turned)."""
    from ..up import lying_roots

    asset = load_upright(model, up, scene)
    summary = describe(asset)
    summary["up"] = {"motion": asset.up.motion, "rest": asset.up.rest, "how": asset.up.how, "turned": asset.up.turned}
    summary["notes"] = [] if asset.up.turned else lying_roots(asset.document)
    if as_json:
        click.echo(json.dumps(summary, indent=2))
    else:
        _print_info(summary)


# ---------------------------------------------------------------------------------------------
# bake

#: ``skeletal bake`` asks for ``--force`` above this size, and shows a progress bar above the next.
BAKE_LIMIT_BYTES = 2 * 10**9
BAKE_PROGRESS_BYTES = 50 * 10**6


def _parse_times(text: str) -> np.ndarray:
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise _fail(f"--times: {text!r} is not a comma-separated list of numbers") from None
    if not values or not np.all(np.isfinite(values)):
        raise _fail(f"--times: {text!r} needs at least one finite number")
    return np.asarray(values, dtype=np.float64)


@cli.command()
@click.argument("model", type=click.Path())
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False), help="Output .npz file.")
@click.option("--clip", "clip_key", default="0", show_default=True, help="Clip name or index.")
@click.option("--times", "times_text", default=None, help="Comma-separated query times in seconds (e.g. --times=-0.5,1.2).")
@click.option("--fps", type=float, default=None, help="Sample 0..duration inclusive at this rate (default 30).")
@click.option("--loop", type=click.Choice(["clamp", "repeat", "pingpong"]), default="clamp", show_default=True)
@click.option("--normals", is_flag=True, help="Also write skinned normals.")
@click.option("--palettes", is_flag=True, help="Also write skin palettes.")
@click.option("--force", is_flag=True, help=f"Write the file even when it is larger than {BAKE_LIMIT_BYTES // 10**9} GB.")
@up_option
@scene_option
def bake(model, out_path, clip_key, times_text, fps, loop, normals, palettes, force, up, scene) -> None:
    """Evaluate a clip of MODEL at many times and write the arrays to an .npz file.

    Arrays: times (T,), node_world (T, N, 4, 4) row-major by glTF node index, and
    positions_node{N}_prim{P} (T, V, 3) world-space skinned positions. The clip baked and the
    file's size are said first; above 2 GB the command asks for --force.
    """
    from ..tools.bake import bake as bake_arrays
    from ..tools.bake import bake_bytes, bake_primitives

    if times_text is not None and fps is not None:
        raise _fail("give --times or --fps, not both")
    if fps is not None and not (np.isfinite(fps) and fps > 0):
        raise _fail(f"--fps: fps must be positive, got {fps}")
    from ..io.budget import MAX_FRAMES, check_fps, frame_count

    if fps is not None:
        check_fps(fps)
    times = _parse_times(times_text) if times_text is not None else None
    asset = load_upright(model, up, scene)
    asset.require_nodes("bake")
    if asset.clips:
        clip = asset.clip(clip_key)
        what = f"clip {clip.name!r} ({clip.duration:.4g} s)"
    else:
        from ..anim.clip import Clip

        clip, what = Clip("rest", []), "the rest pose (no clips)"
    if times is not None:
        frames = len(times)
    else:
        rate = fps if fps is not None else 30.0
        try:
            frames = frame_count(clip.duration, rate, what=what)  # as bake.sample_times counts them
        except SkeletalError:
            raise _fail(f"{asset.name}: {what} at {rate:g} fps is too many frames to bake (about "
                        f"{clip.duration * rate:.3g}, more than any command samples: {MAX_FRAMES:.0e})") from None
    size = bake_bytes(asset, frames, normals=normals, palettes=palettes)
    click.echo(f"baking {what} of {asset.name}: {frames} time{'s' if frames != 1 else ''}, about {_human_bytes(size)}", err=True)
    if size > BAKE_LIMIT_BYTES and not force:
        raise _fail(f"{out_path} would be about {_human_bytes(size)} (over {_human_bytes(BAKE_LIMIT_BYTES)}): "
                    "pass --force to write it, or fewer times (--fps, --times)")
    steps = bake_primitives(asset) * frames
    if steps and size > BAKE_PROGRESS_BYTES and sys.stderr.isatty():
        with click.progressbar(length=steps, label="skinning", file=sys.stderr) as bar:
            arrays = bake_arrays(asset, clip, times, fps=fps, loop=loop, normals=normals, palettes=palettes,
                                 progress=bar.update, force=True)
    else:  # sized above (force=True: the check was this command's)
        arrays = bake_arrays(asset, clip, times, fps=fps, loop=loop, normals=normals, palettes=palettes, force=True)
    np.savez(out_path, **arrays)
    n_pos = sum(1 for k in arrays if k.startswith("positions_"))
    click.echo(
        f"wrote {out_path}: {what}, {len(arrays['times'])} time{'s' if len(arrays['times']) != 1 else ''}, {arrays['node_world'].shape[1]} nodes, "
        f"{n_pos} skinned primitives",
        err=True,
    )


def _human_bytes(size: float) -> str:
    """``5.6 GB``, ``310 MB``, ``12 kB``: decimal units, 2-3 significant digits."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size / scale:.3g} {unit}"
    return f"{int(size)} bytes"


# ---------------------------------------------------------------------------------------------
# demo


@cli.command()
@click.option("--export", "export_path", required=True, type=click.Path(dir_okay=False),
              help="Write the built-in character as .glb (or .gltf).")
def demo(export_path: str) -> None:
    """Export the built-in character (rig, skinned mesh, idle/walk/run/wave clips) as glTF."""
    from ..demo import build_demo_document
    from ..io.gltf_write import write_gltf

    if not export_path.lower().endswith((".glb", ".gltf")):
        raise _fail(f"--export {export_path!r}: the file must end in .glb or .gltf")
    write_gltf(build_demo_document(), export_path)
    click.echo(f"wrote {export_path}", err=True)


# ---------------------------------------------------------------------------------------------
# retarget, export


@cli.command()
@click.argument("source", type=click.Path())
@click.argument("target", type=click.Path())
@click.option("--clip", "clip_key", default="0", show_default=True, help="SOURCE's clip (name or index).")
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False),
              help="Output .glb, .gltf or USD (.usda, .usdc, .usdz).")
@click.option("--map", "map_path", type=click.Path(dir_okay=False), default=None,
              help="JSON object of source joint name -> target joint name (or null), over the built-in pairs.")
@click.option("--fps", type=float, default=None, help="Key rate of the new clip (default: the source's key times).")
@click.option("--name", "clip_name", default=None, help="Name of the new clip (default: the source clip's).")
@click.option("--keep-clips", is_flag=True, help="Also write TARGET's own clips.")
@click.option("--up", "up_axis", type=click.Choice(["auto", "y", "z", "-z", "x", "-x", "-y"]), default="auto",
              show_default=True, help="SOURCE's up axis (auto: found from its skeleton and motion; Z-up mocap stands up).")
@click.option("--target-up", "target_up", type=click.Choice(["auto", "y", "z", "-z", "x", "-x", "-y"]), default="auto",
              show_default=True, help="TARGET's up axis, as --up.")
@click.option("--force", is_flag=True, help="Sample even more than 108,000 keys or 2 GB (--fps, spline clips).")
def retarget(source, target, clip_key, out_path, map_path, fps, clip_name, keep_clips, up_axis, target_up,
             force) -> None:
    """Play SOURCE's clip on TARGET's rig and write TARGET with the new clip (e.g. a BVH walk on a glTF
    character). SOURCE and TARGET: .glb/.gltf, .bvh or any format skeletal.load reads."""
    from ..tools.export import export
    from ..tools.retarget import retarget as retarget_clip

    if not out_path.lower().endswith((".glb", ".gltf", ".usda", ".usdc", ".usd", ".usdz")):
        raise _fail(f"--out {out_path!r}: the file must end in .glb or .gltf, or .usda/.usdc/.usd/.usdz (USD)")
    mapping = None
    if map_path is not None:
        try:
            with open(map_path, encoding="utf-8") as f:
                mapping = json.load(f)
        except ValueError as exc:
            raise _fail(f"{map_path}: not JSON ({exc})") from None
        if not isinstance(mapping, dict) or not all(isinstance(k, str) and (v is None or isinstance(v, str)) for k, v in mapping.items()):
            raise _fail(f"{map_path}: expected a JSON object of joint name -> joint name or null")
    src, tgt = load_upright(source, up_axis), load_upright(target, target_up)
    tgt.require_nodes("retarget onto")
    if not src.clips:
        raise _fail(f"{os.path.basename(source)}: has no clips to retarget")
    clip = retarget_clip(src.clip(clip_key), src.rig, tgt.rig, mapping, fps=fps, name=clip_name, up="y", force=force)
    clips = [c for c in tgt.clips if c.name != clip.name] + [clip] if keep_clips else [clip]
    export(tgt, out_path, clips)
    click.echo(f"wrote {out_path}: clip {clip.name!r} ({clip.duration:.4g} s, {clip.track_count} tracks) on "
               f"{os.path.basename(target)}", err=True)


@cli.command()
@click.argument("model", type=click.Path())
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False),
              help="Output .glb, .gltf, .bvh or USD (.usda, .usdc, .usdz).")
@click.option("--clip", "clip_keys", multiple=True, help="Clip to write (name or index; repeat for more; default: all).")
@click.option("--rotation-order", default="ZYX", show_default=True,
              help="BVH only: Euler order of the rotation channels (XYZ, XZY, YXZ, YZX, ZXY, ZYX) or 'keep' "
                   "(each joint's order from the BVH file read).")
@click.option("--fps", type=float, default=None, help="BVH only: frame rate (default: the clip's key spacing, else 30).")
@click.option("--force", is_flag=True, help="BVH only: write even more than 108,000 frames or 2 GB.")
@up_option
@scene_option
def export(model, out_path, clip_keys, rotation_order, fps, force, up, scene) -> None:
    """Write MODEL (any format skeletal.load reads: glTF, BVH, FBX...) as glTF 2.0, or one clip as BVH.

    \b
      skeletal export walk.bvh --out walk.glb
      skeletal export Soldier.glb --clip Walk --out walk.bvh --rotation-order ZXY --fps 30
      skeletal export Soldier.glb --out soldier.usdz
    """
    from ..tools.export import export as export_asset

    lower = out_path.lower()
    if not lower.endswith((".glb", ".gltf", ".bvh", ".usda", ".usdc", ".usd", ".usdz")):
        raise _fail(f"--out {out_path!r}: the file must end in .glb, .gltf or .bvh, or .usda/.usdc/.usd/.usdz (USD)")
    if lower.endswith(".bvh"):
        from ..tools.export import write_bvh
        from ..io.bvh import ROTATION_ORDERS

        order = None if rotation_order.lower() == "keep" else rotation_order.upper()
        if order is not None and order not in ROTATION_ORDERS:
            raise _fail(f"--rotation-order {rotation_order!r} is not one of {', '.join(ROTATION_ORDERS)} or keep")
        if len(clip_keys) > 1:
            raise _fail("a BVH file holds one motion: give at most one --clip")
        asset = load_upright(model, up, scene)
        key = clip_keys[0] if clip_keys else (0 if asset.clips else None)
        write_bvh(asset, key, out_path, rotation_order=order, fps=fps, force=force)
        what = f"clip {asset.clip(key).name!r}" if key is not None else "the rest pose (no clips)"
        click.echo(f"wrote {out_path}: {what} as BVH", err=True)
        return
    asset = load_upright(model, up, scene)
    export_asset(asset, out_path, list(clip_keys) if clip_keys else None)
    n = len(clip_keys) if clip_keys else len(asset.clips)
    click.echo(f"wrote {out_path}: {len(asset.rig)} nodes, {len(asset.document.meshes)} meshes, {n} clips", err=True)


def _register_render() -> None:
    # Importing the commands does not import moderngl/glfw: `skeletal info` stays fast and GL-free.
    from .bench import bench
    from .render import render
    from .view import view

    cli.add_command(render)
    cli.add_command(view)
    cli.add_command(bench)


_register_render()

#: Commands of the feature modules: (module, attribute) pairs, imported lazily at start-up. One entry per
#: feature, each under its own comment, so that work on separate features merges without conflicts.
FEATURE_COMMANDS: list[tuple[str, str]] = [
    # formats: Assimp, BVH (issue 9)

    # inverse kinematics and procedural animation (issue 10)

    # dual quaternion skinning (issue 10)

    # the animation editor (issue 11)
    ("skeletal.cli.edit", "edit"),

    # torch (issue 12)

    # compression (issue 12)
    ("skeletal.cli.compress", "compress_command"),

    # batch processing (issue 12)
    ("skeletal.cli.batch", "batch_command"),

    # cold start: compile every kernel once (issue 17)
    ("skeletal.cli.warmup", "warmup_command"),

    # the browser page and notebook widget (issue 19)
    ("skeletal.cli.html", "html_command"),

    # baked animation textures for GPU crowds (issue 30)
    ("skeletal.cli.bake_texture", "bake_texture_command"),

    # locomotion: motion matching on a scripted path (issue 27)
    ("skeletal.cli.locomotion", "locomotion_command"),

]


def _register_features() -> None:
    import importlib

    for module_name, attribute in FEATURE_COMMANDS:
        cli.add_command(getattr(importlib.import_module(module_name), attribute))


_register_features()


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point."""
    try:
        cli.main(args=argv, prog_name="skeletal", standalone_mode=True)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def console_main() -> None:
    sys.exit(main())
