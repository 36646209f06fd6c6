"""Print the README's performance table (Markdown) from a run of the benchmark suite.

    python benchmarks/make_table.py [--quick] [--model MODEL] [--json FILE] [--from-json FILE]

Runs ``skeletal.bench.run_suite`` (the same code as ``skeletal bench``), or reads a JSON file it wrote
(``--from-json``), and prints the table plus a line saying where and how it was measured. Every
figure is the median over repeats; baselines were measured in the same run. ``--json`` also saves the
raw results.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import date


def _k(x: float) -> str:
    return f"{x / 1000:,.0f}k"


def _span(s: dict, fmt, unit: str = "") -> str:
    return f"{fmt(s['median'])}{unit} ({fmt(s['min'])}-{fmt(s['max'])})"


def markdown(r: dict) -> str:
    b, m, cfg, ratio = r["baselines"], r["machine"], r["config"], r["ratios"]
    us = lambda x: f"{x:.1f}" if x < 100 else f"{x:,.0f}"
    ms = lambda x: f"{x:.1f}"
    mv = lambda x: f"{x:,.0f}"
    frac = r["skin_fraction_of_bandwidth"]
    dram = r.get("skin_fraction_of_dram_bandwidth")
    busy = [x for x in (m.get("background_load_before"), m.get("background_load_after")) if x is not None]
    lines = [
        f"Measured on {m['cpu_model']} ({m['cpu_count']} CPUs, {m['threads']} numba threads), numba {m['numba']}, "
        f"numpy {m['numpy']}, {date.today().isoformat()}; model: {r['model']}. Median (min-max) over repeats; "
        "baselines measured in the same run. `python benchmarks/make_table.py` regenerates this table.",
        "",
        "| what | skeletal | same-run baseline | published reference |",
        "|---|---|---|---|",
        f"| load {r['load_ms'].get('file', 'model')} as an Asset (rig, clips, skins) | {_span(r['load_ms'], ms, ' ms')} | "
        f"json + `np.frombuffer` of every accessor: {ms(b['load_ms_numpy']['median'])} ms | |",
        f"| one character: Player update + palettes ({r['clip']}) | {_span(r['single_update_us'], us, ' us')} | "
        f"numpy: {us(b['single_update_us_numpy']['median'])} us ({ratio['single_vs_numpy']:.0f}x) | three.js 0.187 mixer + skeleton: ~60 us |",
        f"| crowd: {cfg['crowd_count']} characters playing {r['clip']} at random phases (sample, blend, world, palettes) | "
        f"{_span(r['crowd_chars_per_s'], _k)} characters/s | numpy: {_k(b['crowd_chars_per_s_numpy']['median'])}/s "
        f"({ratio['crowd_vs_numpy']:.1f}x) | ozz-animation 0.16: 788k/s |",
        f"| crowd: {cfg['big_crowd_count']:,} characters playing {r['clip']}, one frame | "
        f"{_span(r['crowd_10k_frame_ms'], ms, ' ms')} | numpy: {ms(b['crowd_10k_frame_ms_numpy']['median'])} ms "
        f"({ratio['crowd_10k_vs_numpy']:.0f}x) | a 60 Hz frame: 16 ms |",
        f"| skinning {cfg['skin_vertices'] // 1000}k vertices x {cfg['skin_influences']} influences, positions + normals, "
        f"{cfg['skin_joints']} joints, {r['threads']} threads | {_span(r['skin_mverts_per_s'], mv)} M vertices/s | "
        f"numpy: {b['skin_mverts_per_s_numpy']['median']:.1f} M/s ({ratio['skin_vs_numpy']:.0f}x) | "
        "ozz SkinningJob: 188 M/s per thread; three.js CPU: ~7 M/s |",
        f"| skinning, 1 thread | {_span(r['skin_mverts_per_s_1thread'], mv)} M vertices/s | | ozz: 188 M/s per thread |",
        f"| skinning as a fraction of the memory bound ({cfg['skin_bytes_per_vertex']} bytes/vertex) | "
        f"{frac['median']:.2f} of {frac['bound_mverts_per_s']:,.0f} M/s | triad over the same {cfg['skin_bytes_per_vertex'] * cfg['skin_vertices'] / 1e6:.1f} MB: "
        f"{b['bandwidth_gbs']['median']:.1f} GB/s"
        + (f"; from DRAM ({b['dram_bandwidth_gbs']['bytes'] / 1e6:.0f} MB triad, {b['dram_bandwidth_gbs']['median']:.1f} GB/s) "
           f"the bound would be {dram['bound_mverts_per_s']:,.0f} M/s ({dram['median']:.2f} of it)" if dram else "")
        + " | |",
    ]
    if busy and max(busy) > 0.25:
        lines += ["", f"Note: other processes kept {max(busy):.2f} CPUs busy during this run; multi-threaded figures are pessimistic."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats (about 20 s)")
    ap.add_argument("--model", help="model for the crowd/single/load rows (default Soldier.glb, else the built-in character)")
    ap.add_argument("--json", help="also write the raw results here")
    ap.add_argument("--from-json", help="print the table of an earlier run instead of measuring")
    args = ap.parse_args(argv)
    if args.from_json:
        with open(args.from_json) as f:
            result = json.load(f)
    else:
        from skeletal.bench import run_suite

        result = run_suite(quick=args.quick, model=args.model, progress=lambda msg: print(f"... {msg}", file=sys.stderr))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=2)
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
