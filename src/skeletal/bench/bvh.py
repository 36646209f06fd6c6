"""Benchmark rows for BVH loading (``skeletal bench``, see ``FEATURE_BENCHES`` in :mod:`skeletal.bench`).

* ``skeletal.load`` of the CMU walk (``../shared/assets/cmu_12_01_walk.bvh``; without the shared
  assets, the built-in character's walk written as BVH at 120 fps) against ``numpy.loadtxt`` of its
  MOTION block alone (the numbers only: no hierarchy, no rotations, no clip), measured in this run;
* ``skeletal.load`` of the same character and motion as glTF (the loaded BVH asset written to a
  temporary ``.glb`` with :func:`skeletal.export`), next to the BVH load;
* ``bvhio.readAsBvh`` (the independent reader of the test extra) when installed, for reference.

>>> rows = bench_rows(None, None, None, quick=True)["rows"]          # doctest: +SKIP
"""

from __future__ import annotations

import io
import tempfile
from pathlib import Path

import numpy as np

from . import assets_dir, duration, time_samples

CMU_WALK = assets_dir() / "cmu_12_01_walk.bvh"


def _bvh_file(folder: Path) -> Path:
    if CMU_WALK.is_file():
        return CMU_WALK
    import skeletal
    from skeletal.demo import demo_asset

    demo = demo_asset()
    path = folder / "demo_walk.bvh"
    skeletal.write_bvh(demo, "walk", path, fps=120)
    return path


def loadtxt_motion(path: Path) -> np.ndarray:
    """The baseline: the file read as text and its MOTION numbers parsed by ``numpy.loadtxt``."""
    text = Path(path).read_text()
    lines = text[text.index("MOTION"):].split("\n", 3)[3]  # after MOTION, Frames:, Frame Time:
    return np.loadtxt(io.StringIO(lines), dtype=np.float64, ndmin=2)


def bench_rows(asset=None, clip=None, path=None, quick: bool = False) -> dict:
    """Rows for ``skeletal bench`` (the arguments, the main benchmark's model, are not used)."""
    import skeletal

    repeats = 5 if quick else 15
    with tempfile.TemporaryDirectory(prefix="skeletal-bvh-bench-") as tmp:
        bvh = _bvh_file(Path(tmp))
        loaded = skeletal.load(bvh)
        glb = Path(tmp) / (bvh.stem + ".glb")
        skeletal.export(loaded, glb)
        frames = loaded.clips[0].tracks[0].key_count
        joints = sum(1 for n in loaded.document.nodes if not n.name.endswith("_End"))
        t_bvh = time_samples(lambda: skeletal.load(bvh), repeats, warmup=2)
        t_txt = time_samples(lambda: loadtxt_motion(bvh), repeats, warmup=1)
        t_glb = time_samples(lambda: skeletal.load(glb), repeats, warmup=2)
        t_bvhio = None
        try:
            import bvhio

            t_bvhio = time_samples(lambda: bvhio.readAsBvh(str(bvh)), 2 if quick else 5, warmup=0 if quick else 1)
        except ImportError:
            pass
    s_bvh, s_txt, s_glb = (duration(t, 1e3, "ms") for t in (t_bvh, t_txt, t_glb))
    what = f"{bvh.name}: {frames} frames x {joints} joints"
    rows = [
        {"name": f"BVH load ({what})", "stat": s_bvh,
         "baseline": f"np.loadtxt of MOTION {s_txt['median']:.1f} ms",
         "ratio": f"{s_txt['median'] / s_bvh['median']:.2f}x", "reference": ""},
        {"name": "glTF load of the same character (BVH -> .glb)", "stat": s_glb,
         "baseline": f"BVH load {s_bvh['median']:.1f} ms", "ratio": f"{s_bvh['median'] / s_glb['median']:.2f}x",
         "reference": ""},
    ]
    out = {"rows": rows, "file": bvh.name, "frames": frames, "joints": joints,
           "bvh_load_ms": s_bvh, "gltf_load_ms": s_glb, "loadtxt_ms": s_txt}
    if t_bvhio is not None:
        s_io = duration(t_bvhio, 1e3, "ms")
        rows.append({"name": "bvhio.readAsBvh (independent reader)", "stat": s_io,
                     "baseline": f"skeletal {s_bvh['median']:.1f} ms", "ratio": f"{s_io['median'] / s_bvh['median']:.1f}x",
                     "reference": "bvhio (test extra)"})
        out["bvhio_ms"] = s_io
    return out
