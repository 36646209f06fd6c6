"""The Blender format table: every shared model and the built-in character through Blender both ways.

    SKELETAL_BLENDER_PYTHON=/path/to/python-with-bpy python tools/blender_table.py [--json OUT.json]
        [--folder DIR] [--samples 4] [MODEL ...]

For each model (default: the built-in character and every model in ../shared/assets) runs
:func:`skeletal.bridges.blender.check_model` (Blender imports it, exports binary FBX, FBX without
keyframe reduction, glTF, BVH and USD; skeletal loads each; skeletal exports glTF, BVH and USD and
Blender imports them; joint world positions compared at several frames of every clip) and prints
the Markdown table of docs/guides/bridges.md, then the rows that did not pass with their notes.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import skeletal
from skeletal.bridges.blender import BLENDER_EXPORTS, blender_python, check_model, format_table, rows_to_json

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from fixtures.shared_assets import ASSETS  # $SKELETAL_ASSETS, default ../shared/assets
MODELS = ["Soldier.glb", "Fox.glb", "RobotExpressive.glb", "Mannequin.glb", "SimpleSkin.gltf", "bvh_example.bvh",
          "cmu_12_01_walk.bvh"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", help="model files (default: the built-in character and the shared models)")
    parser.add_argument("--json", help="write every row as JSON here")
    parser.add_argument("--folder", help="keep the exports in this folder (default: a temporary one)")
    parser.add_argument("--samples", type=int, default=4, help="frames per clip (default 4)")
    args = parser.parse_args()
    if blender_python() is None:
        print("no Python with bpy: pip install 'skeletal[blender]' or set SKELETAL_BLENDER_PYTHON", file=sys.stderr)
        return 2
    import os

    assets = Path(os.environ.get("SKELETAL_ASSETS") or ASSETS)
    models = [Path(m) for m in args.models] or [Path(skeletal.examples.path("demo.glb"))] + \
        [assets / m for m in MODELS if (assets / m).is_file()]
    root = Path(args.folder or tempfile.mkdtemp(prefix="skeletal-blender-table-"))
    rows = []
    for model in models:
        t0 = time.perf_counter()
        got = check_model(model, root / model.stem, blender_exports=BLENDER_EXPORTS + ("fbx-exact",),
                          samples=args.samples)
        rows.extend(got)
        print(f"{model.name}: {len(got)} comparisons in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    print(format_table(rows))
    print()
    for r in rows:
        if not r.passed:
            print(f"- {r.model} {r.direction} {r.format} {r.clip}: {r.relative:.1e} of the size. {r.note}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows_to_json(rows), indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
