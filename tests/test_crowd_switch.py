"""Crowd.switch: many instances, each to its own clip and time, in one inertialized switch, with the
result of one crossfade call per clip."""

from __future__ import annotations

import numpy as np
import pytest

import skeletal
from skeletal.demo import locomotion_asset
from skeletal.errors import SkeletalError
from skeletal.playback import kernels as K
from skeletal.playback.rootmotion import RootMotion

CLIPS = ("walk_forward", "walk_turn_left", "run_forward", "run_veer_right", "walk_stop")
COUNT = 40


def _crowd(seed: int = 3) -> skeletal.Crowd:
    """A crowd with root motion, each instance on one of CLIPS at its own time, 10 frames in."""
    rng = np.random.default_rng(seed)
    crowd = skeletal.Crowd(locomotion_asset(), COUNT, dtype=np.float64)
    RootMotion(crowd, "root")
    first = rng.integers(0, len(CLIPS), COUNT)
    for k, name in enumerate(CLIPS):
        crowd.play(name, offsets=rng.uniform(0, 1, int(np.sum(first == k))), instances=np.flatnonzero(first == k))
    for _ in range(10):
        crowd.update(1 / 60)
    return crowd


def _targets(seed: int):
    rng = np.random.default_rng(seed)
    who = np.sort(rng.choice(COUNT, 25, replace=False))
    return who, rng.integers(0, len(CLIPS), len(who)), rng.uniform(0.0, 1.2, len(who))


def _per_clip(crowd, who, clip, offsets, blend):
    for k in np.unique(clip):
        sel = clip == k
        crowd.crossfade(CLIPS[k], 0.2, blend=blend, offset=offsets[sel], restart=True, instances=who[sel])


@pytest.mark.parametrize("blend", ["dead_blend", "inertialize", "linear"])
def test_switch_equals_one_crossfade_per_clip(blend):
    a, b = _crowd(), _crowd()
    for step, seed in enumerate((5, 6)):  # the second switch lands inside the first one's transition
        who, clip, offsets = _targets(seed)
        _per_clip(a, who, clip, offsets, blend)
        b.switch([CLIPS[k] for k in clip], 0.2, blend=blend, offsets=offsets, instances=who)
        for _ in range(6 + 10 * step):
            a.update(1 / 60)
            b.update(1 / 60)
            np.testing.assert_allclose(b.local_pose, a.local_pose, atol=1e-9)
            np.testing.assert_allclose(b.palettes, a.palettes, atol=1e-9)
            root_a, root_b = a.controllers[0], b.controllers[0]
            np.testing.assert_allclose(root_b.delta, root_a.delta, atol=1e-9)
    # the switched instances play their targets alone (the other actions stopped at once, unless linear)
    who, clip, _ = _targets(6)
    slots = np.array([b.slot(CLIPS[k]) for k in clip])
    assert [b.envelope(s)[i] for i, s in zip(who, slots)] == [1.0] * len(who)
    if blend != "linear":
        enabled = (b.ist[who, :, K.I_FLAGS] & K.FLAG_ENABLED) != 0  # (n, S)
        assert np.array_equal(np.flatnonzero(enabled.ravel()) % enabled.shape[1], slots)


def test_switch_evaluates_once(monkeypatch):
    crowd = _crowd()
    who, clip, offsets = _targets(5)
    calls = []
    original = type(crowd).evaluate
    monkeypatch.setattr(type(crowd), "evaluate", lambda self: (calls.append(1), original(self))[1])
    crowd.switch([CLIPS[k] for k in clip], 0.2, offsets=offsets, instances=who)
    assert len(calls) == 1 and len(np.unique(clip)) > 2
    calls.clear()
    _per_clip(crowd, who, clip, offsets, "dead_blend")
    assert len(calls) == len(np.unique(clip))


def test_switch_checks_its_input():
    crowd = _crowd()
    with pytest.raises(SkeletalError, match="3 clips for 2 instances"):
        crowd.switch(["walk_forward"] * 3, 0.2, instances=[0, 1])
    with pytest.raises(SkeletalError, match="offsets must be finite"):
        crowd.switch("walk_forward", 0.2, offsets=np.nan, instances=[0, 1])
    with pytest.raises(SkeletalError, match="blend"):
        crowd.switch("walk_forward", 0.2, blend="cubic", instances=[0, 1])
    crowd.switch("run_forward", 0.2, instances=[])  # nothing selected: nothing happens
