#!/usr/bin/env python3
"""Generate the three.js truth files for the test fixtures in ``tests/fixtures/models.py``.

For every fixture: build it into a temporary folder, run the three.js generator
(``shared/tools/threejs-truth/gen_truth.mjs``) on it, check the numpy reference
(``tests/fixtures/reference.py``) agrees with what three.js wrote, and write
``tests/data/truth/<fixture>.json``. For ``eight_influences`` it also writes
``tests/data/truth/eight_influences-8inf.json``: the same file with the skinned positions (and the
skin indices/weights) recomputed by the reference from ALL influence sets, since three.js reads only
JOINTS_0/WEIGHTS_0.

Usage::

    # once: a copy of the generator with its node modules (shared/ is read-only)
    cp -r ../shared/tools/threejs-truth /tmp/threejs-truth && (cd /tmp/threejs-truth && npm ci)
    .venv/bin/python tools/make_fixture_truth.py /tmp/threejs-truth
    # or let the script do the copy and `npm ci`:
    .venv/bin/python tools/make_fixture_truth.py /tmp/threejs-truth --setup

The fixture models are deterministic, so the truth's ``model.sha256`` stays valid for the model
that tests rebuild; rerun this script whenever ``gltf_builder.py`` or ``models.py`` changes a byte.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

import numpy as np

from fixtures import models
from fixtures.reference import ReferenceModel, reference_bake_fn
from fixtures.truth_compare import compare_truth

OUT_DIR = REPO / "tests" / "data" / "truth"
from fixtures.shared_assets import TOOLS  # $SKELETAL_TOOLS, default ../shared/tools

SHARED_TOOL = TOOLS / "threejs-truth"

#: options for every fixture: all three loop modes at the default times plus times before 0,
#: inside the clip and past its end; bulk numbers rounded to 10 significant digits.
COMMON_ARGS = ["--loops", "repeat,once,pingpong", "--extra-times", "-0.4,-2.5,0.3,4.5", "--digits", "10"]

#: per fixture: which vertices to write (keeps each file under 300 KB). The strides keep the
#: interesting vertices: eight_influences' zero-weight rows (0, 4, ..., 24), sparse_and_quantized's
#: sparse ridge (12, 42, 72, 102) and morphed tip (78 .. 102), both boxes and the blended ring of
#: the orphan tail (0, 2, ..., 18).
FIXTURE_ARGS = {
    "cubic_spline_arm": ["--vert-stride", "8"],
    "sparse_and_quantized": ["--vert-stride", "6"],
    "eight_influences": ["--vert-stride", "4"],
    "orphan_joint_root": ["--vert-stride", "2"],
}

DIGITS = 10


def setup_tool(dest: Path) -> None:
    """Copy the generator from shared/ and install its node modules (``npm ci``)."""
    if not SHARED_TOOL.is_dir():
        sys.exit(f"cannot set up: {SHARED_TOOL} not found")
    if not dest.exists():
        shutil.copytree(SHARED_TOOL, dest)
        for p in [dest, *dest.rglob("*")]:
            p.chmod(p.stat().st_mode | 0o200)
    subprocess.run(["npm", "ci"], cwd=dest, check=True)


def run_generator(tool: Path, model: Path, out: Path, extra: list[str]) -> None:
    cmd = ["node", str(tool / "gen_truth.mjs"), str(model), "--out", str(out), *COMMON_ARGS, *extra]
    print("  $", " ".join(c if "/" not in c else Path(c).name for c in cmd[1:]))
    subprocess.run(cmd, cwd=tool, check=True)


def _round(x, digits: int = DIGITS):
    """Round like gen_truth.mjs --digits (Number.toPrecision): floats only, integers kept."""
    if isinstance(x, (list, tuple, np.ndarray)):
        return [_round(v, digits) for v in x]
    x = float(x)
    if not np.isfinite(x) or x == int(x):
        return int(x) if np.isfinite(x) else str(x)
    return float(f"{x:.{digits - 1}e}")


def eight_influence_truth(three_truth: dict, model_path: Path) -> dict:
    """three's truth with positions recomputed from all JOINTS_n/WEIGHTS_n sets by the reference."""
    model = ReferenceModel(model_path)
    out = json.loads(json.dumps(three_truth))
    out["generator"] = {
        "tool": "tests/fixtures/reference.py (numpy reference of the glTF formulas)",
        "based_on": dict(three_truth["generator"]),
        "script": "tools/make_fixture_truth.py",
    }
    out["notes"] = list(out.get("notes", [])) + [
        "positions, rest positions, skin_indices and skin_weights_normalized recomputed by "
        "tests/fixtures/reference.py from ALL influence sets (JOINTS_0/WEIGHTS_0 + JOINTS_1/WEIGHTS_1, "
        "8 per vertex, renormalised to sum 1, all-zero rows to their first joint); three.js reads only "
        "the first set. World matrices, joints_local and everything else are three.js's, unchanged."]
    out["conventions"]["positions"] = (
        "world space: sum over all 8 influences of w_k * jointWorld_k * inverseBind_k * p (reference.py)")
    out["conventions"]["skin_weights"] = "all influence sets, divided by their sum; all-zero -> first joint"
    for mi, info in enumerate(out["skinned_meshes"]):
        idx = [info["vertex_selection"].get("start", 0) + info["vertex_selection"].get("stride", 1) * k
               for k in range(info["vertex_selection"]["count"])]
        j, w = model.influences(info["gltf_node"], info["gltf_primitive"], sets=None)
        info["skin_indices"] = j[idx].tolist()
        info["skin_weights_normalized"] = _round(w[idx])
        key = f"positions_node{info['gltf_node']}_prim{info['gltf_primitive']}"
        rest = model.bake(None, [0.0], "repeat")[key][0]
        out["rest_pose"]["meshes"][mi]["positions"] = _round(rest[idx])
        for clip in out["clips"]:
            by_loop: dict[str, list[int]] = {}
            for si, s in enumerate(clip["samples"]):
                by_loop.setdefault(s["loop"], []).append(si)
            for loop, sample_ids in by_loop.items():
                times = [clip["samples"][si]["t"] for si in sample_ids]
                loop_name = {"repeat": "repeat", "once": "clamp", "pingpong": "pingpong"}[loop]
                pos = model.bake(clip["index"], times, loop_name)[key]
                for k, si in enumerate(sample_ids):
                    clip["samples"][si]["meshes"][mi]["positions"] = _round(pos[k][idx])
    return out


def verify(truth: dict, model_path: Path, sets: int | None, label: str) -> None:
    """Check the reference against a truth file (raises AssertionError when out of tolerance)."""
    model = ReferenceModel(model_path)
    report = compare_truth(truth, reference_bake_fn(model, sets=sets),
                           rest_fn=lambda: model.bake(None, [0.0], "repeat", sets=sets))
    print(f"  reference vs {label}: {report.summary()}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("threejs_dir", type=Path, nargs="?", default=Path("/tmp/threejs-truth"),
                    help="a copy of shared/tools/threejs-truth with node_modules installed")
    ap.add_argument("--setup", action="store_true", help="copy the generator there and run npm ci first")
    ap.add_argument("--out", type=Path, default=OUT_DIR, help=f"output folder (default {OUT_DIR})")
    ap.add_argument("--only", nargs="*", help="fixture names (default: all)")
    args = ap.parse_args()

    tool = args.threejs_dir.resolve()
    if args.setup:
        setup_tool(tool)
    if not (tool / "node_modules" / "three").is_dir():
        sys.exit(f"{tool} has no node_modules/three: run with --setup, or copy {SHARED_TOOL} there and `npm ci`")
    args.out.mkdir(parents=True, exist_ok=True)

    names = args.only or list(models.FIXTURES)
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            print(name)
            model_path = models.build(name, tmp)
            out = args.out / f"{name}.json"
            run_generator(tool, model_path, out, FIXTURE_ARGS.get(name, []))
            truth = json.loads(out.read_text())
            verify(truth, model_path, sets=1, label="three.js (first influence set only)")
            if name == "eight_influences":
                eight = eight_influence_truth(truth, model_path)
                path8 = args.out / "eight_influences-8inf.json"
                path8.write_text(json.dumps(eight, separators=(",", ":")))
                verify(eight, model_path, sets=None, label="8-influence truth")
                print(f"  wrote {path8.name} ({path8.stat().st_size / 1e3:.0f} KB)")
            print(f"  wrote {out.name} ({out.stat().st_size / 1e3:.0f} KB)")


if __name__ == "__main__":
    main()
