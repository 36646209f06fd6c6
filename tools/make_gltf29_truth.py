#!/usr/bin/env python3
"""Generate the three.js references for the glTF models of issue 29 (``tests/fixtures/gltf_extensions.py``).

* ``two_scenes.json``: ``shared/tools/threejs-truth/gen_truth.mjs`` on the two-scene model (which
  nodes three.js puts in the default scene, which tracks bind, world matrices over the clip);
* ``pointer_*.json``: ``tools/threejs-pointer/gen_pointer.mjs`` (three.js + the
  ``@needle-tools/three-animation-pointer`` plugin) on each KHR_animation_pointer model: the value
  of every animated property at a few times.

Usage::

    cp -r ../shared/tools/threejs-truth /tmp/threejs-truth && (cd /tmp/threejs-truth && npm ci)
    (cd tools/threejs-pointer && npm ci)
    .venv/bin/python tools/make_gltf29_truth.py /tmp/threejs-truth

The models are byte-deterministic: the tests rebuild them and check ``model.sha256``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from fixtures import gltf_extensions

OUT_DIR = REPO / "tests" / "data" / "gltf29"
POINTER_TOOL = REPO / "tools" / "threejs-pointer"
SCENE_TIMES = "0,0.25,0.5,1,1.5"


def _name_skinned_meshes(out: Path, model: Path) -> None:
    """gen_truth.mjs leaves ``gltf_node`` null for a skinned mesh three.js made without a parser
    association (here: the single-primitive skinned quad); fill it in from the node of that name
    (names are unique in these models), so the positions are compared too."""
    from skeletal.io.gltf import read_gltf

    doc = read_gltf(model)
    truth = json.loads(out.read_text())
    for info in truth["skinned_meshes"]:
        if info["gltf_node"] is None:
            node = [n.name for n in doc.nodes].index(info["three_name"])
            info.update(gltf_node=node, gltf_mesh=doc.nodes[node].mesh, gltf_primitive=0, skin=doc.nodes[node].skin)
            truth["notes"].append(f"skinned mesh {info['three_name']!r}: gltf_node/mesh/primitive/skin filled in by "
                                  "tools/make_gltf29_truth.py from the node of that name (three.js gave no association)")
    out.write_text(json.dumps(truth, separators=(",", ":")) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("threejs_dir", type=Path, nargs="?", default=Path("/tmp/threejs-truth"))
    args = ap.parse_args()
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        model = gltf_extensions.two_scenes_model(Path(folder) / "two_scenes.glb")
        cmd = ["node", str(args.threejs_dir / "gen_truth.mjs"), str(model), "--out", str(OUT_DIR / "two_scenes.json"),
               "--times", SCENE_TIMES, "--loops", "once", "--digits", "10"]
        subprocess.run(cmd, cwd=args.threejs_dir, check=True)
        _name_skinned_meshes(OUT_DIR / "two_scenes.json", model)
        for name, build in gltf_extensions.POINTER_MODELS.items():
            model = build(Path(folder) / f"{name}.glb")
            out = OUT_DIR / f"{name}.json"
            subprocess.run(["node", str(POINTER_TOOL / "gen_pointer.mjs"), str(model), "--out", str(out),
                            "--times", gltf_extensions.POINTER_TIMES], cwd=POINTER_TOOL, check=True)
            print(f"  {out.relative_to(REPO)}: {json.loads(out.read_text())['summary']}")


if __name__ == "__main__":
    main()
