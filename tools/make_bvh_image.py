#!/usr/bin/env python3
"""Render ``docs/images/bvh-cmu-walk.png``: the CMU walk (../shared/assets/cmu_12_01_walk.bvh) drawn
as bone capsules, several frames of the clip in one picture (one instanced draw), seen from the side.

Usage (needs ../shared/assets and the render extra)::

    PYTHONPATH=src .venv/bin/python tools/make_bvh_image.py [--frames 7] [--size 720x300]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from fixtures.shared_assets import ASSETS  # $SKELETAL_ASSETS, default ../shared/assets
OUT = REPO / "docs" / "images" / "bvh-cmu-walk.png"


def main() -> None:
    import imageio.v3 as iio

    import skeletal
    from skeletal.render.layout import pose_at
    from skeletal.render.renderer import Renderer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=7)
    parser.add_argument("--size", default="720x300")
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    asset = skeletal.load(ASSETS / "cmu_12_01_walk.bvh")
    clip = asset.clips[0]
    times = np.linspace(0.1, clip.duration, args.frames)  # frame 0 of the capture is a calibration pose
    world, morph = pose_at(asset, clip, times, loop="clamp")
    with Renderer(asset, width, height, clip=clip, camera="yaw=70,pitch=8,zoom=1.15") as renderer:
        image = renderer.draw((world, morph))
    iio.imwrite(OUT, image, optimize=True)
    print(f"wrote {OUT.relative_to(REPO)} ({OUT.stat().st_size // 1024} KB): {args.frames} frames of {clip.name!r}")


if __name__ == "__main__":
    main()
