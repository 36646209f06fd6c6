"""The first hour, second pass (issue 28): what a new user meets at the command line."""

from __future__ import annotations

from click.testing import CliRunner

from skeletal.cli import cli


def test_top_level_help_names_more_than_gltf():
    text = CliRunner().invoke(cli, ["--help"]).output
    first = text.split("Options:")[0]
    assert "rigged glTF characters" not in first
    for word in ("BVH", "FBX", "USD", "render", "edit", "retarget"):
        assert word in first, word


# -- skeletal bench --quick streams its rows --------------------------------------------------------


def _tiny_suite(monkeypatch):
    """skeletal.bench with tiny sizes and one fake feature benchmark (a long row name), so that the
    suite runs in seconds."""
    import sys
    import types

    import skeletal.bench as B

    tiny = {"crowd": 8, "crowd_repeats": 2, "crowd_numpy_repeats": 1, "big_crowd": 16, "big_crowd_repeats": 2,
            "single_repeats": 2, "single_inner": 2, "skin_vertices": 2000, "skin_repeats": 2, "skin_numpy_repeats": 1,
            "bw_repeats": 2, "dram_bytes": 1 << 20, "dram_repeats": 1, "load_repeats": 1}
    monkeypatch.setitem(B.SIZES, "quick", tiny)
    fake = types.ModuleType("fake_feature_bench")
    fake.bench_rows = lambda **kw: {"rows": [{
        "name": "procedural: one character with foot placement on terrain, look-at and spring bones, per update",
        "stat": B.stat([1.0, 2.0], "ms"), "baseline": "without the stages 0.5 ms", "ratio": "2.69x the update (median of 5 rounds)"}]}
    monkeypatch.setitem(sys.modules, "fake_feature_bench", fake)
    monkeypatch.setattr(B, "FEATURE_BENCHES", ["fake_feature_bench"])
    return B


def test_bench_rows_arrive_as_their_stages_finish(monkeypatch):
    B = _tiny_suite(monkeypatch)
    events = []
    B.run_suite(quick=True, progress=lambda m: events.append(("progress", m)),
                on_row=lambda r: events.append(("row", r[0])), on_start=lambda r: events.append(("start", r["model"])))
    kinds = [k for k, _ in events]
    assert kinds.index("start") < kinds.index("row")
    steps = [m for k, m in events if k == "progress" and m.startswith("[")]
    assert [s.split("]")[0] for s in steps] == [f"[{k}/7" for k in range(1, 8)]
    # the crowd's row comes before the second stage starts, the last feature's row after the last stage
    first_row = kinds.index("row")
    assert first_row < next(i for i, (k, m) in enumerate(events) if k == "progress" and m.startswith("[2/7]"))
    assert events[-1] == ("row", "procedural: one character with foot placement on terrain, look-at and spring "
                                 "bones, per update")


def test_bench_command_prints_rows_within_100_columns(monkeypatch):
    from click.testing import CliRunner

    _tiny_suite(monkeypatch)
    from skeletal.cli.bench import bench

    result = CliRunner().invoke(bench, ["--quick"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(len(line) for line in lines) <= 100, max(lines, key=len)
    assert any(line.startswith("... [1/7] crowd: 8 x ") for line in lines)
    assert any(line.startswith("crowd: 8 x ") for line in lines)
    long = lines.index("procedural: one character with foot placement on terrain, look-at and spring bones, per update")
    assert lines[long + 1].strip().startswith("1.50") and lines[long + 1].endswith(" 2.69x")
    assert lines[long + 2].strip() == "ratio: 2.69x the update (median of 5 rounds); baseline: without the stages 0.5 ms"
    assert "about 1 minute (minutes more before skeletal warmup)" in lines[0]


# -- skeletal warmup says what it does; the suite's warmup is proportional ------------------------------


def test_warmup_says_which_feature_and_how_many_are_left():
    from skeletal.batch.warmup import warmup

    lines: list[str] = []
    report = warmup(["skin", "dq"], processes=1, status=lines.append)
    assert all(r["ok"] for r in report.values()), report
    assert lines[0] == "compiling skin (1 of 2) ..."
    assert lines[1].startswith("[1/2] skin ready in ") and lines[1].endswith("; 1 left: dq")
    assert lines[2] == "compiling dq (2 of 2) ..."
    assert lines[3].startswith("[2/2] dq ready in ") and "all 2 done in" in lines[3]


def test_warmup_in_processes_reports_running_and_waiting_features():
    from skeletal.batch.warmup import warmup

    lines: list[str] = []
    report = warmup(["dq", "skin"], processes=1 + 1, status=lines.append, heartbeat=0.05)
    assert set(report) == {"dq", "skin"} and all(r["ok"] for r in report.values()), report
    assert lines[0] == "compiling dq, skin (2 of 2 started, 0 waiting) ..."
    assert any(line.startswith("still compiling ") for line in lines)  # while nothing finishes
    done = [line for line in lines if line.startswith("[")]
    assert len(done) == 2 and done[-1].startswith("[2/2]") and "all 2 done" in done[-1]


def test_the_suites_warmup_compiles_what_the_tests_need_in_order():
    from pathlib import Path

    from fixtures.warmup_plan import plan

    tests = Path(__file__).parent
    assert plan([str(tests / "test_sniff.py")])[:1] == ["player"]
    assert "crowd" in plan([str(tests / "test_crowd.py")]) and "ik" not in plan([str(tests / "test_sniff.py")])
    everything = plan([])
    assert sorted(everything) == sorted(["player", "crowd", "transitions", "skin", "ik", "procedural", "dq"])
    assert everything[0] == "player"  # the first test files use a Player; the IK and DQ ones come later
    assert plan(["-x", "-k", "walk"]) == everything  # no path: the whole suite
    script = (tests.parent / "scripts" / "test").read_text()
    assert "tests/fixtures/warmup_plan.py" in script and 'warmup "${WARMUP_PLAN[@]}"' in script
