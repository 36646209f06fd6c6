"""Write the committed fuzz seeds (``tests/fuzz/seeds/<target>/``) from the tests' generated models.

Run from the repository root when the generators change::

    PYTHONPATH=src python tests/fuzz/make_seeds.py

Seeds are kept small (a few KB each, under 64 KB): the fuzzer mutates them, and big inputs make each
run slow. The shared models (``../shared/assets``) are added at run time by ``scripts/fuzz``, not
committed. Needs the ``assimp`` command (``apt-get install assimp-utils``) for the FBX and Collada
seeds; without it those are skipped with a message.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import numpy as np

MAX_SEED = 64 * 1024

# A small hand-written BVH with what real files mix: 6- and 3-channel joints in several orders, tabs,
# an End Site, a name with a space, two frames.
SMALL_BVH = """HIERARCHY
ROOT Hips
{
\tOFFSET 0.0 0.0 0.0
\tCHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation
\tJOINT Left Leg
\t{
\t\tOFFSET 1.5 -2.0 0.25
\t\tCHANNELS 3 Xrotation Yrotation Zrotation
\t\tEnd Site
\t\t{
\t\t\tOFFSET 0.0 -3.0 0.0
\t\t}
\t}
\tJOINT Spine
\t{
\t\tOFFSET 0 2 0
\t\tCHANNELS 6 Xposition Yposition Zposition Yrotation Xrotation Zrotation
\t\tEnd Site
\t\t{
\t\t\tOFFSET 0 1 0
\t\t}
\t}
}
MOTION
Frames: 2
Frame Time: 0.0333333
0.0 10.5 -1e-3 90 45 -30 1.25 2.5 3.75 0 2 0 10 20 30
1.0 10.25 2E+1 -90 -45 30 0.5 0.25 0.125 0.1 2.1 0.1 -10 -20 -30
"""


def _write(folder: Path, name: str, data: bytes) -> None:
    if len(data) > MAX_SEED:
        print(f"  skip {folder.name}/{name}: {len(data)} bytes (over {MAX_SEED})")
        return
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data)
    print(f"  {folder.name}/{name}: {len(data)} bytes")


def _small_skinned(path: Path) -> Path:
    """A two-bone skinned triangle with a two-key rotation: the smallest model that has every part
    (mesh, skin, hierarchy, animation) an FBX or Collada export writes."""
    from fixtures.gltf_builder import ARRAY_BUFFER, GltfBuilder

    b = GltfBuilder()
    pos = b.add_accessor(np.array([[0, 0, 0], [1, 0, 0], [0, 2, 0]], np.float32), target=ARRAY_BUFFER, min_max=True)
    joints = b.add_accessor(np.array([[0, 0, 0, 0], [0, 0, 0, 0], [1, 0, 0, 0]], np.uint8), target=ARRAY_BUFFER)
    weights = b.add_accessor(np.array([[1, 0, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0]], np.float32), target=ARRAY_BUFFER)
    mesh = b.add_mesh([b.primitive({"POSITION": pos, "JOINTS_0": joints, "WEIGHTS_0": weights})])
    tip = b.add_node(name="tip", translation=[0.0, 1.0, 0.0])
    root = b.add_node(name="root", children=[tip])
    ibm = np.stack([np.eye(4), np.eye(4)])
    ibm[1, 1, 3] = -1.0
    skin = b.add_skin([root, tip], ibm.astype(np.float32))
    body = b.add_node(name="body", mesh=mesh, skin=skin)
    b.add_scene([root, body])
    b.add_animation([{"node": tip, "path": "rotation", "interpolation": "LINEAR",
                      "times": np.array([0.0, 1.0], np.float32),
                      "values": np.array([[0, 0, 0, 1], [0, 0, 0.38268343, 0.9238795]], np.float32)}], name="bend")
    return b.write_glb(path)


def main() -> None:
    import skeletal
    from fixtures import models
    from fixtures.assimp_convert import assimp_command, convert
    from fixtures.fbx_binary import ascii_to_binary
    from fixtures.gltf_builder import GltfBuilder
    from skeletal.demo import demo_asset

    seeds = HERE / "seeds"
    for sub in ("bvh", "gltf", "fbx", "collada", "usd"):
        shutil.rmtree(seeds / sub, ignore_errors=True)
    demo = demo_asset()

    # BVH: the hand-written file, its CRLF twin, and the demo character's walk written by write_bvh
    _write(seeds / "bvh", "small.bvh", SMALL_BVH.encode())
    _write(seeds / "bvh", "small_crlf.bvh", SMALL_BVH.replace("\n", "\r\n").encode())
    walk = skeletal.write_bvh(demo, demo.clip("walk"), fps=4, rotation_order="YXZ", decimals=3)
    _write(seeds / "bvh", "demo_walk.bvh", walk.encode())

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        # glTF: the generated test models (GLB) and a minimal .gltf with an embedded data URI
        for name in models.FIXTURES:
            (tmp / name).mkdir()
            path = models.build(name, tmp / name)
            _write(seeds / "gltf", path.name, path.read_bytes())
        b = GltfBuilder()
        pos = b.add_accessor(np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0]], np.float32), min_max=True)
        mesh = b.add_mesh([b.primitive({"POSITION": pos})])
        b.add_scene([b.add_node(name="tri", mesh=mesh, translation=[0.0, 1.0, 0.0])])
        b.write_gltf(tmp / "tri.gltf", embed=True)
        _write(seeds / "gltf", "tri_embedded.gltf", (tmp / "tri.gltf").read_bytes())

        small = _small_skinned(tmp / "small.glb")
        _write(seeds / "gltf", "small_skinned.glb", small.read_bytes())

        # USD: the small skinned model as .usda text (needs usd-core)
        try:
            from skeletal.tools.usd_write import write_usd

            write_usd(skeletal.load(small), tmp / "small.usda")
            _write(seeds / "usd", "small.usda", (tmp / "small.usda").read_bytes())
        except skeletal.ModelError as exc:
            print(f"  USD seeds skipped: {exc}")

        # FBX (ASCII and binary) and Collada: the small skinned model through `assimp export`
        if assimp_command() is None:
            print("  no `assimp` command (apt-get install assimp-utils): FBX and Collada seeds skipped")
            return
        fbx = convert(small, tmp / "small.fbx")
        text = fbx.read_text(encoding="utf-8", errors="surrogateescape")
        _write(seeds / "fbx", "small_ascii.fbx", fbx.read_bytes())
        _write(seeds / "fbx", "small_binary.fbx", ascii_to_binary(text))
        dae = convert(small, tmp / "small.dae")
        _write(seeds / "collada", "small.dae", dae.read_bytes())


if __name__ == "__main__":
    main()
