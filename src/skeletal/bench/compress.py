"""``skeletal bench`` rows of clip compression (:mod:`skeletal.compress`)."""

from __future__ import annotations

import numpy as np

from ..anim.clip import Clip
from ..tools.compress import world_positions, acl_bound, compress, compression_stats, dense_times
from . import stat


def bench_rows(asset, clip, path, quick: bool) -> dict:
    """``skeletal bench`` rows: the bench clip compressed at the ACL bound (ratio of animation bytes
    against the same clip uncompressed in this run, measured worst error) and the compression time
    against sampling and posing the clip at its dense times once (the error evaluation's unit of work)."""
    import time


    original = asset.clip(clip) if not isinstance(clip, Clip) else clip
    error, distance = acl_bound(original, asset.rig)
    samples, small = [], None
    for _ in range(1 if quick else 3):
        start = time.perf_counter()
        small = compress(original, asset.rig, error, distance=distance)
        samples.append(time.perf_counter() - start)
    s = compression_stats(original, small, asset.rig, distance=distance)
    times = dense_times(original)
    posing = []
    for _ in range(3 if quick else 10):
        start = time.perf_counter()
        world_positions(original, asset.rig, times)
        posing.append(time.perf_counter() - start)
    base_ms = float(np.median(posing)) * 1e3
    compress_ms = [x * 1e3 for x in samples]
    return {
        "rows": [
            {"name": f"compress {original.name} at the ACL bound (0.01 cm on 1.8 m)", "stat": stat([s.ratio], "x"),
             "baseline": f"uncompressed {s.bytes_before:,} B -> {s.bytes_after:,} B",
             "ratio": f"max err {s.max_error / error:.2f} of bound", "reference": "ACL on CMU: ~0.01 cm"},
            {"name": f"compress {original.name}: time", "stat": stat(compress_ms, "ms"),
             "baseline": f"one pose pass over {len(times)} dense times: {base_ms:.1f} ms",
             "ratio": f"{float(np.median(compress_ms)) / base_ms:.0f} passes", "reference": ""},
        ],
        "error_bound": error, "distance": distance, "bytes_before": s.bytes_before, "bytes_after": s.bytes_after,
        "max_error": s.max_error, "keys_before": s.keys_before, "keys_after": s.keys_after,
    }
