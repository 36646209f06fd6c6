"""The per-call paths of skin_into / skin_dq_into / pack_palette (issue 17's fixed cost per call): the
packed palette straight to the compiled call, faults still named palette first, the busy-machine thread
cap set through numba's own C getter/setter and restored."""

import numba
import numpy as np
import pytest

from skeletal import _threads
from skeletal.bench import synthetic_mesh
from skeletal.errors import SkeletalError
from skeletal.skinning.lbs import PARALLEL_MIN_VERTICES, PAD_MIN_VERTICES, pack_palette, skin_into
from skeletal.skinning.dqs import pack_dq_palette, skin_dq_into

METHODS = [("lbs", pack_palette, skin_into), ("dqs", pack_dq_palette, skin_dq_into)]


@pytest.mark.parametrize("name, pack, fn", METHODS)
def test_packed_palette_faults_are_named_as_before(name, pack, fn):
    """Each fault the compiled call now finds (order by type, width, length) gives kernel_palette's error;
    with a second bad argument the palette is still named first."""
    palette, joints, weights, positions, normals = synthetic_mesh(40, joints=6)
    packed = pack(palette)
    out_p, out_n = np.empty_like(positions), np.empty_like(normals)
    wide = np.zeros((6, 32), np.float32)
    cases = [
        (wide[:, :16], "packed"),  # right shape, rows strided
        (packed.astype(np.float64), "packed"),
        (np.zeros((6, 12), np.float32), "packed"),
        (np.zeros((0, 16), np.float32), "no joints"),
        (np.asfortranarray(np.zeros((16, 16), np.float32)), "packed"),
    ]
    for bad, match in cases:
        with pytest.raises(SkeletalError, match=match):
            fn(bad, joints, weights, positions, normals, None, out_p, out_n)
        with pytest.raises(SkeletalError, match=match):  # palette first, as when it was checked before the call
            fn(bad, joints, weights, positions.astype(np.float64), normals, None, out_p, out_n)
    with pytest.raises(SkeletalError, match="positions must be float32"):
        fn(packed, joints, weights, positions.astype(np.float64), normals, None, out_p, out_n)


@pytest.mark.parametrize("name, pack, fn", METHODS)
def test_every_palette_form_gives_the_same_result(name, pack, fn):
    """Packed (the direct path) or not, uint8 joints below and above PAD_MIN_VERTICES (the padded palette
    goes through kernel_palette), any joint dtype: one result."""
    for v in (37, PAD_MIN_VERTICES + 19):
        palette, joints, weights, positions, normals = synthetic_mesh(v, joints=30)
        packed = pack(palette)
        expect = None
        for pal in (packed, palette, palette[:, :3].copy()):
            for dtype in (np.uint8, np.uint16, np.int64):
                out_p, out_n = np.empty_like(positions), np.empty_like(normals)
                fn(pal, joints.astype(dtype), weights, positions, normals, None, out_p, out_n)
                if expect is None:
                    expect = out_p, out_n
                np.testing.assert_allclose(out_p, expect[0], rtol=1e-6, atol=1e-6)
                np.testing.assert_allclose(out_n, expect[1], atol=1e-6)


def test_thread_count_reads_and_sets_what_numba_does():
    threads = numba.get_num_threads()
    assert _threads.thread_count() == threads
    try:
        _threads._set_count(1)
        assert numba.get_num_threads() == 1 == _threads.thread_count()
        numba.set_num_threads(threads)
        assert _threads.thread_count() == threads
    finally:
        numba.set_num_threads(threads)


@pytest.mark.parametrize("name, pack, fn", METHODS)
def test_busy_cap_is_applied_to_multi_chunk_calls_and_restored(name, pack, fn, monkeypatch):
    """A cap held at 1 (a busy machine): a call big enough for a parallel region runs on 1 thread and
    restores numba's count; a smaller one (chunks in the calling thread) never touches it; the results
    are the same as uncapped."""
    palette, joints, weights, positions, normals = synthetic_mesh(PARALLEL_MIN_VERTICES + 5, joints=20)
    packed = pack(palette)
    free_p, free_n = np.empty_like(positions), np.empty_like(normals)
    monkeypatch.setitem(_threads._state, "busy", (float("-inf"), 0.0, 0.0, 0))
    fn(packed, joints, weights, positions, normals, None, free_p, free_n)
    threads = numba.get_num_threads()
    calls = []
    real_set = _threads._set_count
    monkeypatch.setattr(_threads, "_set_count", lambda n: (calls.append(n), real_set(n)))
    monkeypatch.setitem(_threads._state, "busy", (float("inf"), 0.0, 0.0, 1))  # held at 1 thread
    out_p, out_n = np.empty_like(positions), np.empty_like(normals)
    fn(packed, joints, weights, positions, normals, None, out_p, out_n)
    assert calls == ([1, threads] if threads > 1 else [])
    assert numba.get_num_threads() == threads
    np.testing.assert_array_equal(out_p, free_p)
    np.testing.assert_array_equal(out_n, free_n)
    calls.clear()
    m = PARALLEL_MIN_VERTICES - 1
    fn(packed, joints[:m], weights[:m], positions[:m], normals[:m], None, out_p[:m], out_n[:m])
    assert calls == []  # no parallel region, no cap
    # (its last m % 16 vertices are a chunk's tail: the two-vertex kernel, which rounds differently)
    np.testing.assert_allclose(out_p[:m], free_p[:m], rtol=1e-6, atol=1e-6)
