"""Benchmark rows for ``skeletal bench``: FBX and Collada load times next to the GLB load of the same
character.

The bench model (Soldier.glb, or the built-in character written as GLB) is converted at bench time
with the ``assimp export`` command (Debian ``assimp-utils``) into a temporary folder: ASCII FBX
(Assimp 5.2's binary FBX writer makes files its own reader refuses) and Collada. Each row is
``skeletal.load`` of that file (median of repeats, after a warm-up), with the GLB load measured in the
same run as the baseline, plus the share of the time spent inside Assimp's C import and the same load
without the child process (``isolate=False``), whose difference is the cost of the isolation. Without the
command or the library the rows are omitted with a note.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path


def bench_rows(asset=None, clip=None, path: Path | None = None, quick: bool = False) -> dict:
    import skeletal

    from . import duration, model_glb, time_samples

    if shutil.which("assimp") is None:
        return {"rows": [], "note": "FBX/Collada rows omitted: the assimp command (assimp-utils) is not installed"}
    try:
        from ..io.assimp_ffi import import_scene, library

        library()
    except skeletal.ModelError as exc:
        return {"rows": [], "note": f"FBX/Collada rows omitted: {exc}"}
    repeats = 3 if quick else 10
    folder = Path(tempfile.mkdtemp(prefix="skeletal-bench-assimp-"))
    try:
        glb, label = model_glb(path, folder)
        base = time_samples(lambda: skeletal.load(glb), repeats, warmup=1)
        glb_ms = duration(base, 1e3, "ms", file=glb.name)
        rows, figures = [], {"glb_load_ms": glb_ms}
        for suffix, fmt, title in ((".fbx", "fbxa", "FBX (ASCII)"), (".dae", "collada", "Collada")):
            out = folder / f"model{suffix}"
            done = subprocess.run(["assimp", "export", str(glb), str(out), f"-f{fmt}"], capture_output=True,
                                  text=True, timeout=300)
            if done.returncode != 0 or not out.is_file():
                figures[f"{suffix[1:]}_note"] = f"assimp export failed: {done.stdout[-200:]}"
                continue
            try:
                secs = time_samples(lambda: skeletal.load(out), repeats, warmup=1)
            except skeletal.ModelError as exc:  # Assimp 5.2's own exporters write some files it cannot read back
                figures[f"{suffix[1:]}_note"] = f"the file assimp export wrote is unreadable: {exc}"
                continue
            plain = time_samples(lambda: skeletal.load(out, isolate=False), repeats, warmup=1)
            data = out.read_bytes()
            c_secs = time_samples(lambda: import_scene(str(out), data, str(out)).release(), repeats, warmup=0)
            stat = duration(secs, 1e3, "ms", file=out.name, bytes=len(data))
            c_ms = duration(c_secs, 1e3, "ms")
            plain_ms = duration(plain, 1e3, "ms")
            figures[f"{suffix[1:]}_in_process_load_ms"] = plain_ms
            figures[f"{suffix[1:]}_load_ms"] = stat
            figures[f"{suffix[1:]}_assimp_import_ms"] = c_ms
            ratio = stat["median"] / glb_ms["median"]
            rows.append({"name": f"load {label} {title}", "stat": stat,
                         "baseline": f"GLB {glb_ms['median']:.1f} ms",
                         "ratio": f"{ratio:.1f}x GLB",
                         "reference": f"Assimp's C import alone {c_ms['median']:.0f} ms; in-process "
                                      f"(isolate=False, no child) {plain_ms['median']:.0f} ms"})
        return {"rows": rows, **figures}
    finally:
        shutil.rmtree(folder, ignore_errors=True)
