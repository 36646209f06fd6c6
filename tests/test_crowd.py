"""Crowd: many instances as array state; fused float32 palettes; nlerp accuracy against slerp."""

from __future__ import annotations


import numpy as np
import pytest

import skeletal
from skeletal.demo import demo_asset
from skeletal.playback import Crowd, Mixer
from fixtures.shared_assets import SOLDIER



def angle_between(qa, qb):
    """Rotation angle (rad) between quaternions, normalised first (float32 keys are not exactly unit,
    and acos near 1 would turn a 6e-8 norm defect into a 7e-4 rad 'error')."""
    qa = qa / np.linalg.norm(qa, axis=-1, keepdims=True)
    qb = qb / np.linalg.norm(qb, axis=-1, keepdims=True)
    return 2 * np.arccos(np.clip(np.abs(np.sum(qa * qb, axis=-1)), 0, 1))


@pytest.fixture(scope="module")
def asset():
    return demo_asset()


def test_crowd_palettes_match_the_mixer(asset):
    count = 50
    offsets = np.linspace(0, asset.clip("walk").duration, count, endpoint=False)
    speeds = np.linspace(0.5, 1.5, count)
    crowd = Crowd(asset, count, nlerp_max_gap=0)
    crowd.play("walk", offsets=offsets, speeds=speeds)
    mixer = Mixer(asset, count)
    mixer.play("walk", offset=offsets, speed=speeds)
    for _ in range(3):
        crowd.update(0.05)
        mixer.update(0.05)
    assert crowd.palettes.shape == (count, len(asset.skins[0].joints), 3, 4)
    assert crowd.palettes.dtype == np.float32
    np.testing.assert_allclose(crowd.palettes, mixer.palettes[:, :, :3, :], atol=2e-6)


def test_keep_world_and_skin_ranges(asset):
    crowd = Crowd(asset, 3, keep_world=True)
    crowd.play("run")
    crowd.update(0.1)
    mixer = Mixer(asset, 3)
    mixer.play("run")
    mixer.update(0.1)
    np.testing.assert_allclose(crowd.world, mixer.world, atol=2e-3)  # nlerp + float32
    assert crowd.skin_ranges == [(0, len(asset.skins[0].joints))]
    with pytest.raises(AttributeError, match="keep_world"):
        Crowd(asset, 2).world  # noqa: B018 - the attribute read is what raises


def test_crowd_keeps_mixer_features(asset):
    crowd = Crowd(asset, 4)
    crowd.play("walk")
    crowd.crossfade("run", 0.2, instances=[1, 3])
    crowd.update(0.3)
    running = [a for a in range(4) if crowd.fs[a, crowd.slot("run"), 11] > 0]
    assert running == [1, 3]


def test_default_nlerp_limit_keeps_the_error_small(asset):
    for clip in ("walk", "run", "wave"):
        times = np.linspace(0, asset.clip(clip).duration, 200, endpoint=False)
        slerp = Mixer(asset, len(times))
        slerp.play(clip, offset=times)
        fast = Crowd(asset, len(times), dtype=np.float64)
        fast.play(clip, offsets=times)
        slerp.update(0)
        fast.update(0)
        assert angle_between(slerp.local_pose[..., 3:7], fast.local_pose[..., 3:7]).max() < 7.5e-5


@pytest.mark.skipif(not SOLDIER.is_file(), reason=f"{SOLDIER} not found (shared assets absent)")
@pytest.mark.parametrize("clip, limit", [("Walk", 1.2e-3), ("Run", 1.2e-3), ("Idle", 1e-6)])
def test_nlerp_error_against_slerp_on_soldier(clip, limit):
    """nlerp on every track (no gap limit): the figures quoted in skeletal.playback.crowd."""
    asset = skeletal.load(SOLDIER)
    times = np.linspace(0, asset.clip(clip).duration, 300, endpoint=False)
    slerp = Mixer(asset, len(times))
    slerp.play(clip, offset=times)
    fast = Crowd(asset, len(times), dtype=np.float64, nlerp_max_gap=180)
    fast.play(clip, offsets=times)
    slerp.update(0)
    fast.update(0)
    error = angle_between(slerp.local_pose[..., 3:7], fast.local_pose[..., 3:7])
    assert error.max() < limit
