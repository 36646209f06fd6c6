"""The OpenMP wait policy skeletal sets before numba loads the runtime (skeletal/_threads.py): a short
spin, then passive sleep, unless the user chose a policy or a spin count; and the wide crowd's split
of its groups between threads (skeletal/playback/wide.py) giving the same floats on any thread count."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from skeletal import _threads

_OMP_VARS = ("SKELETAL_THREADING_LAYER", "NUMBA_THREADING_LAYER", "OMP_WAIT_POLICY", "KMP_BLOCKTIME", "GOMP_SPINCOUNT")


def _policy(**env: str) -> list[str]:
    """OMP_WAIT_POLICY, GOMP_SPINCOUNT and KMP_BLOCKTIME as a fresh process sees them after importing skeletal."""
    clean = {k: v for k, v in os.environ.items() if k not in _OMP_VARS}
    code = ("import os, skeletal; print(*(os.environ.get(k, '-') for k in "
            "('OMP_WAIT_POLICY', 'GOMP_SPINCOUNT', 'KMP_BLOCKTIME')))")
    out = subprocess.run([sys.executable, "-c", code], env=dict(clean, **env), capture_output=True, text=True,
                         check=True)
    return out.stdout.split()[-3:]


def test_threads_spin_briefly_then_sleep_by_default():
    assert _policy() == ["PASSIVE", str(_threads.SPIN_COUNT), "0"]


@pytest.mark.parametrize("env, expected", [
    ({"OMP_WAIT_POLICY": "PASSIVE"}, ["PASSIVE", "-", "0"]),  # the user's policy: no spin added
    ({"OMP_WAIT_POLICY": "ACTIVE"}, ["ACTIVE", "-", "0"]),
    ({"GOMP_SPINCOUNT": "0"}, ["PASSIVE", "0", "0"]),  # the user's spin count kept
], ids=["passive", "active", "spin-count"])
def test_a_users_wait_policy_or_spin_count_is_kept(env, expected):
    assert _policy(**env) == expected


def test_tabled_slerp_is_slerp_into_to_the_bit():
    """The wide path's SLERP segments take each key pair's arccos and 1 / sin from a table
    (``wide.slerp_angles``) instead of computing them per lane: the same floats as
    ``quat.slerp_into``, for far-apart keys (slerp), nearly parallel ones (nlerp), identical ones
    and pairs on opposite hemispheres, at fractions 0 and 1 included."""
    import numpy as np
    from numba import njit

    from skeletal.playback.clipset import (CL_SEGMENT_END, CL_SEGMENT_START, SEG_END, SEG_FIRST, SEG_KIND, SEG_SLERP,
                                           SEG_TIMELINE, TK_KEY_START, TK_VALUE_START)
    from skeletal.playback.wide import _slerp_tabled, slerp_angles
    from skeletal.quat import slerp_into

    rng = np.random.default_rng(5)
    keys = rng.normal(size=(64, 4))
    keys /= np.linalg.norm(keys, axis=1, keepdims=True)
    keys[10] = keys[9]  # identical keys
    keys[20] = keys[19] + 1e-5 * rng.normal(size=4)  # nearly parallel: slerp_into's nlerp branch
    keys[31] = -keys[30] + 2e-5 * rng.normal(size=4)  # nearly parallel on the other hemisphere
    values = keys.astype(np.float32).reshape(-1)
    count = len(keys)
    # one clip, one SLERP segment of one track on one timeline
    clip_table = np.zeros((1, 9), np.int64)
    clip_table[0, CL_SEGMENT_START], clip_table[0, CL_SEGMENT_END] = 0, 1
    segments = np.zeros((1, 5), np.int64)
    segments[0, SEG_FIRST], segments[0, SEG_END], segments[0, SEG_KIND], segments[0, SEG_TIMELINE] = 0, 1, SEG_SLERP, 0
    tracks = np.zeros((1, 8), np.int64)
    tracks[0, TK_VALUE_START], tracks[0, TK_KEY_START] = 0, 0
    timeline_keys = np.array([[0, count]], np.int64)
    angles = slerp_angles(clip_table, segments, tracks, timeline_keys, values, np.ones(1, np.bool_), count)

    @njit
    def both(values, angles, fractions):
        tabled = np.empty((count - 1, len(fractions), 4))
        direct = np.empty((count - 1, len(fractions), 4))
        for key in range(count - 1):
            a = key * 4
            for i in range(len(fractions)):
                u = np.float64(fractions[i])
                tabled[key, i] = _slerp_tabled(values, np.uint64(a), u, angles, np.uint64(key))
                slerp_into(direct[key, i], 0, np.float64(values[a]), np.float64(values[a + 1]),
                           np.float64(values[a + 2]), np.float64(values[a + 3]), np.float64(values[a + 4]),
                           np.float64(values[a + 5]), np.float64(values[a + 6]), np.float64(values[a + 7]), u)
        return tabled, direct

    fractions = np.concatenate([[0.0, 1.0, 0.5], rng.uniform(0, 1, 13)]).astype(np.float32)
    tabled, direct = both(values, angles, fractions)
    assert np.count_nonzero(angles[:, 0]) > count // 2, "most pairs take the slerp branch"
    assert angles[9, 0] == 0.0 and angles[19, 0] == 0.0 and angles[30, 0] == 0.0
    np.testing.assert_array_equal(tabled, direct)


@pytest.mark.parametrize("count", [5 * 16 + 7, 4 * 16])
def test_the_wide_crowd_gives_the_same_floats_on_one_thread_and_on_every_thread(count, monkeypatch):
    """However the groups are split between threads (and a partial last group goes per instance), every
    instance's palettes and local pose come out the same to the bit (the busy cap off: every thread runs
    even while other processes keep the CPUs busy)."""
    import numba
    import numpy as np

    from skeletal.demo import demo_asset
    from skeletal.playback import Crowd

    monkeypatch.setattr(_threads, "_NO_CAP", True)
    asset = demo_asset()
    other = next(c.name for c in asset.clips if c.name != "walk")
    results = []
    threads = numba.get_num_threads()
    for n in sorted({1, threads}):
        numba.set_num_threads(n)
        try:
            crowd = Crowd(asset, count)
            crowd.play("walk", offsets=np.linspace(0, 1, count, endpoint=False), speeds=np.linspace(0.7, 1.3, count))
            crowd.play(other, instances=list(range(16, 32)))  # a group on another clip
            crowd.crossfade(other, 0.2, instances=[40])  # a group per instance while it fades
            palettes = []
            for _ in range(8):
                crowd.update(1 / 45)
                palettes.append(crowd.palettes.copy())
            results.append((np.stack(palettes), crowd.local_pose.copy()))
        finally:
            numba.set_num_threads(threads)
    for palettes, pose in results[1:]:
        np.testing.assert_array_equal(palettes, results[0][0])
        np.testing.assert_array_equal(pose, results[0][1])
