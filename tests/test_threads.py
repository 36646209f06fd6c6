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
