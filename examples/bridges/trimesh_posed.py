"""A posed character as trimesh objects: one frame as a Scene (written as GLB), a whole clip as meshes.

    pip install "skeletal[trimesh]"
    python examples/bridges/trimesh_posed.py                    # the built-in character
    python examples/bridges/trimesh_posed.py Soldier.glb Walk --out posed.glb

Prints the posed scene's bounds and the front-to-back extent over the clip (the stride of a walk), and writes the frame at ``--time`` as GLB (materials and textures included).
"""

from __future__ import annotations

import argparse

import skeletal
import skeletal.bridges.trimesh as st


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", help="any model skeletal reads (default: the built-in character)")
    parser.add_argument("clip", nargs="?", default=None, help="clip name (default: the first; 'walk' for the built-in)")
    parser.add_argument("--time", type=float, default=0.5, help="seconds into the clip (default 0.5)")
    parser.add_argument("--out", default="posed.glb", help="GLB to write (default posed.glb)")
    args = parser.parse_args()

    asset = skeletal.load(args.model or skeletal.examples.path("demo.glb"))
    clip = args.clip or ("walk" if args.model is None else 0)
    scene = st.posed_scene(asset, clip, args.time)
    print(f"{asset.name}: {len(scene.geometry)} parts, bounds {scene.bounds.round(3).tolist()}")
    scene.export(args.out)
    print(f"wrote {args.out}")

    meshes = st.clip_meshes(asset, clip, fps=15)
    depth = [m.extents[2] for m in meshes]
    print(f"{len(meshes)} frames; front-to-back extent from {min(depth):.3f} to {max(depth):.3f}")


if __name__ == "__main__":
    main()
