"""Loading speed: skeletal's glTF reader against pygltflib parsing the same file, in the same run.

    python benchmarks/bench_load.py [MODEL ...]     (default: $SKELETAL_ASSETS/Soldier.glb, ../shared/assets)

pygltflib only parses the JSON and keeps the binary chunk (it decodes no accessor), so it is a
lower bound for any loader; skeletal decodes every accessor, builds the rig and packs the clips.
Prints median / min / max over repeats and the ratio skeletal / pygltflib (< 1 means faster).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from fixtures.shared_assets import ASSETS  # $SKELETAL_ASSETS, default ../shared/assets

DEFAULT_MODEL = ASSETS / "Soldier.glb"


def timed(fn, repeats: int) -> list[float]:
    fn()  # warm up: imports, numba, page cache
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples


def summary(samples: list[float]) -> str:
    ms = [s * 1e3 for s in samples]
    return f"{statistics.median(ms):8.2f} ms  (min {min(ms):.2f}, max {max(ms):.2f})"


def main(paths: list[str]) -> int:
    import pygltflib

    import skeletal
    from skeletal.io.gltf import read_gltf

    for path in paths or [str(DEFAULT_MODEL)]:
        if not Path(path).exists():
            print(f"{path}: not found (the shared assets are needed for this benchmark)")
            return 1
        repeats = 30
        base = timed(lambda: pygltflib.GLTF2().load(path), repeats)
        doc = timed(lambda: read_gltf(path), repeats)
        asset = timed(lambda: skeletal.load(path), repeats)
        ref = statistics.median(base)
        print(Path(path).name)
        print(f"  pygltflib GLTF2().load   {summary(base)}")
        print(f"  skeletal read_gltf       {summary(doc)}   ratio {statistics.median(doc) / ref:.2f}")
        print(f"  skeletal load (Asset)    {summary(asset)}   ratio {statistics.median(asset) / ref:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
