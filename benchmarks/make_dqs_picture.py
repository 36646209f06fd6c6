"""docs/images/dqs-vs-lbs.png: a limb twisted 90 and 180 degrees, linear blend vs dual quaternion
skinning, rendered headless (skeletal.render.Renderer with skinning="lbs" / "dqs").

    PYTHONPATH=src python benchmarks/make_dqs_picture.py [OUT.png]
"""

from __future__ import annotations

import os
import sys


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))

from test_skin_dq import twisted_limb_asset  # the tests' generated two-joint limb

from skeletal.render.layout import pose_at
from skeletal.render.renderer import Renderer


def main(out: str) -> None:
    from PIL import Image, ImageDraw

    w, h = 300, 300
    canvas = Image.new("RGB", (2 * w, 2 * h + 24), (40, 44, 52))
    draw = ImageDraw.Draw(canvas)
    for row, degrees in enumerate((90.0, 180.0)):
        asset = twisted_limb_asset(degrees)
        world, morph = pose_at(asset, asset.clip("twist"), [1.0], loop="clamp")
        for col, method in enumerate(("lbs", "dqs")):
            with Renderer(asset, w, h, skinning=method, camera="yaw=25,pitch=12,zoom=1.15", samples=4) as r:
                image = r.draw((world, morph), skeleton=True)
            canvas.paste(Image.fromarray(image), (col * w, 24 + row * h))
            label = f"{'LBS' if method == 'lbs' else 'DQS'}, twist {degrees:.0f} deg"
            draw.text((col * w + 8, 24 + row * h + 6), label, fill=(20, 20, 20))
    draw.text((8, 6), "linear blend (left) vs dual quaternion skinning (right): joint 2 twisted about the limb",
              fill=(230, 230, 230))
    canvas.save(out, optimize=True)
    print(f"wrote {out} ({os.path.getsize(out) // 1024} KB)")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "docs", "images", "dqs-vs-lbs.png"))
