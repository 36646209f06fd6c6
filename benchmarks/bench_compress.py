"""Compression: ratio and measured worst error for every shared model and the CMU BVH walk.

    python benchmarks/bench_compress.py [--loose] [--json FILE] [MODEL ...]

For each model, every clip is compressed with :func:`skeletal.compress.compress_asset` at ACL's
published CMU operating point scaled to the figure (error 0.01 cm and virtual vertex distance 3 cm
for a 1.8 m figure; the figure's size is the largest extent of its joints over the clip; see
``skeletal.compress.acl_bound``), and ``--loose`` adds a 10x looser run (1 mm on a 1.8 m figure).
Sizes, all measured in this run with the same writer:

* animation data: bytes of key times and values as the glTF writer stores them (shared time
  accessors counted once; 16-bit rotations at 2 bytes a component);
* file: the model written as .glb with its clips uncompressed, and with them compressed.

The measured error is the worst world-space error over every node and dense time (every key time
and the midpoints between), recomputed with the library's sampler; the bound is guaranteed there.
Anchor: ACL reports about 0.01 cm worst error on CMU (its own ratio comes from variable bit-rate
quantisation, which glTF cannot store: translations and scales must be float32 there).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from fixtures.shared_assets import ASSETS  # $SKELETAL_ASSETS, default ../shared/assets
MODELS = ["Fox.glb", "Soldier.glb", "RobotExpressive.glb", "Mannequin.glb", "cmu_12_01_walk.bvh"]


def run_model(path: Path, scale: float) -> dict:
    import skeletal
    from skeletal.tools.compress import acl_bound, compress, compression_stats
    from skeletal.tools.export import asset_to_document
    from skeletal.io.gltf_write import glb_bytes

    asset = skeletal.load(path)
    small, rows = [], []
    start = time.perf_counter()
    worst_fraction = 0.0
    for clip in asset.clips:
        error, distance = acl_bound(clip, asset.rig)
        error *= scale
        c = compress(clip, asset.rig, error, distance=distance)
        s = compression_stats(clip, c, asset.rig, distance=distance)
        small.append(c)
        rows.append(s)
        worst_fraction = max(worst_fraction, s.max_error / error)
    seconds = time.perf_counter() - start
    before = sum(s.bytes_before for s in rows)
    after = sum(s.bytes_after for s in rows)
    figure = acl_bound(asset.clips[0], asset.rig)[1] / 0.03 * 1.8
    return {
        "model": path.name, "clips": len(rows), "figure_size": figure,
        "error_bound": acl_bound(asset.clips[0], asset.rig)[0] * scale,
        "keys_before": sum(s.keys_before for s in rows), "keys_after": sum(s.keys_after for s in rows),
        "bytes_before": before, "bytes_after": after, "ratio": before / after,
        "max_error_of_bound": worst_fraction,
        "max_error_cm_equiv": worst_fraction * 0.01 * scale,
        "file_before": len(glb_bytes(asset_to_document(asset, asset.clips))),
        "file_after": len(glb_bytes(asset_to_document(asset, small), short_rotations=True)),
        "seconds": seconds,
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("models", nargs="*", help="model files (default: the shared models and the CMU BVH)")
    parser.add_argument("--loose", action="store_true", help="also a 10x looser bound (1 mm on a 1.8 m figure)")
    parser.add_argument("--json", dest="json_path", help="write the results as JSON")
    args = parser.parse_args(argv)
    paths = [Path(p) for p in args.models] or [ASSETS / m for m in MODELS]
    missing = [p for p in paths if not p.is_file()]
    if missing:
        print(f"missing: {', '.join(map(str, missing))} (shared test assets)", file=sys.stderr)
        paths = [p for p in paths if p.is_file()]
    results = []
    header = (f"{'model':<22} {'bound':>10} {'clips':>5} {'keys':>15} {'anim bytes':>19} {'ratio':>6} "
              f"{'max err':>8} {'file .glb':>21} {'time':>6}")
    for scale, label in [(1.0, "ACL bound: 0.01 cm on 1.8 m")] + ([(10.0, "1 mm on 1.8 m")] if args.loose else []):
        print(f"\n{label} (max err: worst measured error / bound)")
        print(header)
        for path in paths:
            r = run_model(path, scale)
            r["bound_label"] = label
            results.append(r)
            print(f"{r['model']:<22} {r['error_bound']:>10.3g} {r['clips']:>5} "
                  f"{r['keys_before']:>7}->{r['keys_after']:<7} {r['bytes_before']:>9}->{r['bytes_after']:<9} "
                  f"{r['ratio']:>5.2f}x {r['max_error_of_bound']:>8.3f} {r['file_before']:>10}->{r['file_after']:<10} "
                  f"{r['seconds']:>5.1f}s", flush=True)
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
