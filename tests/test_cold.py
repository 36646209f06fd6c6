"""Issue 17's first impressions: the threading layer, the compile notice, serial twins of parallel
kernels, numba patches, ``skeletal warmup`` and the glTF reader's plain-case paths. No timing is
asserted anywhere."""

import os
import subprocess
import sys

import numba
import numpy as np
import pytest
from click.testing import CliRunner

import skeletal
from skeletal import _compile
from skeletal.bench.cold import first_frame
from skeletal.demo import demo_asset
from skeletal.io import accessors as acc_mod
from skeletal.io import gltf as gltf_mod
from skeletal.anim.pose import _local_to_world_batch
from tests.fixtures import models


def _clean_env() -> dict:
    return {k: v for k, v in os.environ.items()
            if k not in ("SKELETAL_THREADING_LAYER", "NUMBA_THREADING_LAYER", "OMP_WAIT_POLICY", "KMP_BLOCKTIME")}


def test_threading_layer_is_chosen_before_the_first_parallel_kernel():
    """By default: OpenMP with passive waits (numba falls back to TBB, workqueue), set at import."""
    code = ("import os, numba, numpy as np, skeletal; from skeletal.pose import world_matrices; "
            "from skeletal.demo import demo_asset; rig = demo_asset().rig; "
            "world_matrices(rig.parents, np.repeat(rig.rest[None], 3, axis=0)); "  # a parallel kernel
            "print(numba.threading_layer(), numba.config.THREADING_LAYER_PRIORITY[0], "
            "os.environ.get('OMP_WAIT_POLICY'), os.environ.get('KMP_BLOCKTIME'))")
    out = subprocess.run([sys.executable, "-c", code], env=_clean_env(), capture_output=True, text=True, check=True)
    layer, first, policy, blocktime = out.stdout.split()[-4:]
    assert first == "omp" and layer in ("omp", "tbb", "workqueue")
    assert (policy, blocktime) == ("PASSIVE", "0")


def test_threading_layer_can_be_asked_for():
    code = "import numba, skeletal; print(skeletal._threads.chosen_layer(), numba.config.THREADING_LAYER)"
    env = dict(_clean_env(), SKELETAL_THREADING_LAYER="workqueue")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split()[-2:] == ["workqueue", "workqueue"]


def test_busy_cap_lowers_the_thread_count_while_another_process_spins():
    """With a process spinning on one CPU, parallel kernels are capped below the CPU count (a 2-thread
    fork-join region sharing a CPU ran slower than 1 thread); skin_into restores numba's count and
    gives the same result capped or not."""
    from skeletal import _threads
    from skeletal.bench import synthetic_mesh
    from skeletal.skinning.lbs import pack_palette, skin_into

    from skeletal.skinning.lbs import PARALLEL_MIN_VERTICES

    # big enough for a parallel region (smaller meshes skin on the calling thread, uncapped)
    palette, joints, weights, positions, normals = synthetic_mesh(2 * PARALLEL_MIN_VERTICES)
    packed = pack_palette(palette)
    free_p, free_n = np.empty_like(positions), np.empty_like(normals)
    _threads._state.pop("busy", None)
    skin_into(packed, joints, weights, positions, normals, None, free_p, free_n)
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        _threads.busy_cap(interval=0.0)  # the first sample
        import time
        time.sleep(0.6)
        cap = _threads.busy_cap(interval=0.0)
        cpus = os.cpu_count() or 1
        assert (1 <= cap < cpus) if cpus > 1 else cap in (0, 1), cap
        threads = numba.get_num_threads()
        out_p, out_n = np.empty_like(positions), np.empty_like(normals)
        _threads._state["busy"] = (float("inf"), 0.0, 0.0, 1)  # held at 1 thread for this call
        skin_into(packed, joints, weights, positions, normals, None, out_p, out_n)
        assert numba.get_num_threads() == threads
        np.testing.assert_array_equal(out_p, free_p)
        np.testing.assert_array_equal(out_n, free_n)
    finally:
        spinner.kill()
        spinner.wait()
        _threads._state.pop("busy", None)


def test_serial_variant_matches_the_parallel_kernel_and_is_memoised():
    serial = _compile.serial_variant(_local_to_world_batch)
    assert serial is _compile.serial_variant(_local_to_world_batch)
    assert serial.py_func.__qualname__ == "_local_to_world_batch_serial"
    assert not serial.targetoptions.get("parallel")
    rig = demo_asset().rig
    poses = np.repeat(rig.rest[None], 2, axis=0)
    a, b = np.empty(poses.shape[:2] + (4, 4)), np.empty(poses.shape[:2] + (4, 4))
    _local_to_world_batch(rig.parents.astype(np.int32), poses, a)
    serial(rig.parents.astype(np.int32), poses, b)
    np.testing.assert_array_equal(a, b)


def test_slice_shape_error_is_still_raised():
    @numba.njit
    def copy_into(dst, src):
        dst[:, :] = src

    with pytest.raises(ValueError, match="different size"):
        copy_into(np.zeros((2, 3)), np.zeros((3, 3)))


def test_kernels_compile_once_for_plain_types():
    def inner(out, o):
        out[o] = 1.0

    def outer(out):
        inner_jit(out, 0)
        inner_jit(out, 1)

    inner.__module__ = outer.__module__ = "skeletal._probe"
    inner_jit = numba.njit(inner)
    outer_jit = numba.njit(outer)
    out = np.zeros(2)
    outer_jit(out)
    assert out.tolist() == [1.0, 1.0]
    assert [str(s) for s in inner_jit.signatures] == ["(Array(float64, 1, 'C', False, aligned=True), int64)"]


def test_cold_first_frame_prints_one_notice_then_none(tmp_path):
    cache = str(tmp_path / "numba-cache")
    cold = first_frame(None, "walk", cache, quiet=False)
    notices = [line for line in cold["stderr"].splitlines() if line.startswith("skeletal: compiling kernels")]
    assert len(notices) == 1 and "once (about" in notices[0], cold["stderr"]
    # A glTF player compiles playback and pose kernels only: no IK, procedural, compression, DQS, editor.
    allowed = ("skeletal.playback.kernels.", "skeletal.playback.jobs.", "skeletal.playback.single_lanes.",
               "skeletal.anim.pose.", "skeletal.anim.sampling.", "skeletal.quat.", "skeletal._compile.")
    assert cold["compiled"] and all(name.startswith(allowed) for name in cold["compiled"]), cold["compiled"]
    warm = first_frame(None, "walk", cache, quiet=False)
    assert "compiling" not in warm["stderr"], warm["stderr"]
    assert warm["compiled"] == []
    assert cold["first_frame_s"] > 0 and warm["first_frame_s"] > 0


def test_warmup_api_and_command():
    from skeletal.cli.warmup import warmup_command
    from skeletal.batch.warmup import JOBS, warmup

    with pytest.raises(ValueError, match="unknown warmup job"):
        warmup(["nope"])
    report = warmup(["player"], processes=1)
    assert report["player"]["ok"], report
    result = CliRunner().invoke(warmup_command, ["--only", "nope"])
    assert result.exit_code == 2 and "nope" in result.output
    result = CliRunner().invoke(warmup_command, ["--only", "player", "-j", "1"])
    assert result.exit_code == 0, result.output
    assert {"player", "crowd", "ik", "procedural", "skin", "dq"} <= set(JOBS)


@pytest.mark.parametrize("name", sorted(models.FIXTURES))
def test_plain_paths_read_what_the_full_paths_read(name, tmp_path, monkeypatch):
    path = models.build(name, tmp_path)
    fast = skeletal.load(path)
    monkeypatch.setattr(acc_mod.Accessors, "_plain_float", lambda self, index: None)
    monkeypatch.setattr(gltf_mod._GltfReader, "_plain_channel", lambda self, *a: None)
    slow = skeletal.load(path)
    assert len(fast.clips) == len(slow.clips)
    for a, b in zip(fast.clips, slow.clips):
        assert len(a.tracks) == len(b.tracks)
        for ta, tb in zip(a.tracks, b.tracks):
            assert (ta.node, ta.path, ta.interpolation) == (tb.node, tb.path, tb.interpolation)
            np.testing.assert_array_equal(ta.times, tb.times)
            np.testing.assert_array_equal(ta.values, tb.values)
    for ma, mb in zip(fast.mesh_instances, slow.mesh_instances):
        for pa, pb in zip(ma.primitives, mb.primitives):
            np.testing.assert_array_equal(pa.source.positions, pb.source.positions)
    for sa, sb in zip(fast.skins, slow.skins):
        np.testing.assert_array_equal(sa.inverse_bind, sb.inverse_bind)


def test_warmup_and_bench_compile_in_process_not_in_the_background(monkeypatch):
    """The warm-up exists to compile, and a benchmark to time compiled kernels: neither may leave a
    Player's kernels to the cold-start background compile (skeletal.playback.coldstart) and time or
    skip past numpy frames."""
    import subprocess
    import sys

    from skeletal.batch import warmup as warm
    from skeletal.playback import coldstart

    seen = []
    monkeypatch.setenv("SKELETAL_NO_FALLBACK", "0")
    monkeypatch.setitem(warm.JOBS, "probe", lambda: seen.append(coldstart.enabled()))
    assert warm._run("probe")["ok"] and seen == [False]
    env = {k: v for k, v in os.environ.items() if k != "SKELETAL_NO_FALLBACK"}
    code = ("import skeletal.playback.coldstart as c; a = c.enabled(); import skeletal.bench; "
            "print(a, c.enabled())")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.stdout.split() == ["True", "False"], out.stderr
