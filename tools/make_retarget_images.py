#!/usr/bin/env python3
"""Render the retargeting pictures in ``docs/images/retarget-*.png``: for each pair, the source clip
(left; a BVH skeleton is drawn as bone capsules) and the retargeted clip on the target (right) at the same
time, side by side, and print the gait measures of each pair (tests/gait.py).

Usage (needs ../shared/assets, the render extra and, for the BVH pairs, the BVH reader)::

    PYTHONPATH=src .venv/bin/python tools/make_retarget_images.py [--only NAME ...]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "docs" / "images"
sys.path.insert(0, str(REPO / "tests"))
from fixtures.shared_assets import ASSETS  # $SKELETAL_ASSETS, default ../shared/assets

import skeletal
from skeletal.cli import cli
from skeletal.demo import demo_asset

from gait import compare, gait

#: name -> (source file or "demo", clip, target file or "demo", time shown, camera seen from the
#: source's front; the target's camera is turned so both are seen from the same world direction)
PAIRS = {
    "cmu-walk-to-demo": ("cmu_12_01_walk.bvh", 0, "demo", 1.0, 70),
    "cmu-walk-to-soldier": ("cmu_12_01_walk.bvh", 0, "Soldier.glb", 1.0, 70),
    "cmu-walk-to-mannequin": ("cmu_12_01_walk.bvh", 0, "Mannequin.glb", 1.0, 70),
    "soldier-run-to-mannequin": ("Soldier.glb", "Run", "Mannequin.glb", 0.2, 70),
    "demo-walk-to-soldier": ("demo", "walk", "Soldier.glb", 0.3, 70),
}
SIZE = (400, 300)


def _path(name: str, folder: Path) -> Path:
    if name == "demo":
        path = folder / "demo.glb"
        if not path.exists():
            skeletal.export(demo_asset(), path)
        return path
    return ASSETS / name


def _close_up(asset, clip, time: float) -> str:
    """Camera target and distance on the character at ``time`` (its hips, sized by its leg length),
    so that a walk that travels far is not framed as a whole."""
    from skeletal.tools.retarget import canonical_names, hip_height

    world = skeletal.bake(asset, clip, [time])["node_world"][0]
    hips = world[asset.rig.node_of[canonical_names(asset.rig)["hips"]], :3, 3]
    leg = hip_height(asset.rig)
    ground = float(world[:, 1, 3].min())
    target = (hips[0], ground + 0.95 * leg, hips[2])
    return f"target={target[0]:.4g}:{target[1]:.4g}:{target[2]:.4g},distance={4.6 * leg:.4g}"


def _render(model: Path, clip, time: float, yaw: float, out: Path, close_up: str) -> np.ndarray:
    import imageio.v3 as iio

    args = ["render", str(model), "--clip", str(clip), "--time", str(time), "--size", f"{SIZE[0]}x{SIZE[1]}",
            "--camera", f"yaw={yaw:g},pitch=10,{close_up}", "--out", str(out)]
    cli.main(args=args, prog_name="skeletal", standalone_mode=False)
    return iio.imread(out)[..., :3]


def make(name: str, folder: Path) -> None:
    import imageio.v3 as iio

    from skeletal.render.camera import facing_yaw

    source, clip_key, target, time, yaw = PAIRS[name]
    src_path, tgt_path = _path(source, folder), _path(target, folder)
    src, tgt = skeletal.load(src_path), skeletal.load(tgt_path)
    clip = src.clip(clip_key)
    out = skeletal.retarget(clip, src.rig, tgt.rig)
    result = folder / f"{name}.glb"
    skeletal.export(tgt, result, [out])
    errors = compare(gait(src.rig, clip), gait(tgt.rig, out))
    print(name, {k: round(v, 3) for k, v in errors.items() if "root" not in k})
    # The retargeted character faces where the source faces; the renderer's front follows each clip
    # (camera.facing_yaw with the clip), so turning the camera by the difference of those facings shows
    # both from the same world direction.
    back = skeletal.load(result)
    back_clip = back.clip(out.name)
    left = _render(src_path, clip.name, time, yaw, folder / "src.png", _close_up(src, clip, time))
    right = _render(result, out.name, time, yaw + facing_yaw(src, clip) - facing_yaw(back, back_clip),
                    folder / "tgt.png", _close_up(back, back_clip, time))
    gap = np.full((SIZE[1], 4, 3), 255, np.uint8)
    path = OUT / f"retarget-{name}.png"
    iio.imwrite(path, np.concatenate([left, gap, right], axis=1), optimize=True)
    print(f"  wrote {path.relative_to(REPO)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", choices=sorted(PAIRS), help="pairs to make (default: all)")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only or PAIRS:
            make(name, Path(tmp))


if __name__ == "__main__":
    main()
