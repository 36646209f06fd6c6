"""Mirrored clips: the reflected motion with left and right swapped, consistent with the database's
column mirror."""

from __future__ import annotations

import numpy as np
import pytest

from skeletal.demo import locomotion_asset
from skeletal.playback.locomotion.features import compute_features, default_features, mirror_columns, mirror_joints, root_frames
from skeletal.playback.locomotion.mirror import mirror_clip
from skeletal.anim.pose import world_matrices
from skeletal.anim.sampling import sample


@pytest.fixture(scope="module")
def asset():
    return locomotion_asset()


def _world(asset, clip, times):
    pose, _ = sample(clip, times, asset.rig.rest, asset.morph_start, asset.rest_morph)
    return world_matrices(asset.rig.parents, pose), pose


def test_joint_positions_are_reflected_and_swapped(asset):
    clip = asset.clip("walk_turn_left")
    mirrored = mirror_clip(asset, clip)
    assert mirrored.name == "walk_turn_left.mirrored"
    assert mirrored.duration == pytest.approx(clip.duration)
    times = np.arange(0.0, clip.duration, 1 / 60)  # the mirror's own keys: exact there
    world, _ = _world(asset, clip, times)
    world_m, _ = _world(asset, mirrored, times)
    partner = mirror_joints(asset.rig.names)
    expected = world[:, :, :3, 3][:, partner] * np.array([-1.0, 1.0, 1.0])
    np.testing.assert_allclose(world_m[:, :, :3, 3], expected, atol=1e-5)
    # the left turn mirrored turns right
    heading = np.arctan2(world_m[:, 0, 0, 2], world_m[:, 0, 2, 2])
    assert np.unwrap(heading)[-1] < -1.0


def test_mirroring_twice_gives_the_clip_back(asset):
    clip = asset.clip("run_start")
    twice = mirror_clip(asset, mirror_clip(asset, clip))
    times = np.arange(0.0, clip.duration, 1 / 60)
    _, pose = _world(asset, clip, times)
    _, pose2 = _world(asset, twice, times)
    np.testing.assert_allclose(pose2[..., :3], pose[..., :3], atol=1e-5)
    dots = np.abs(np.sum(pose2[..., 3:7] * pose[..., 3:7], axis=-1))
    np.testing.assert_allclose(dots, 1.0, atol=1e-6)


def test_features_of_the_mirrored_clip_are_the_mirrored_columns(asset):
    clip = asset.clip("walk_turn_right")
    times = np.arange(0.0, clip.duration, 1 / 60)
    names = {n: i for i, n in enumerate(asset.rig.names)}
    features = default_features()
    raw = []
    for c in (clip, mirror_clip(asset, clip)):
        world, _ = _world(asset, c, times)
        position, yaw = root_frames(world, 0, np.array([0.0, 0.0, 1.0]))
        raw.append(compute_features(world[:, :, :3, 3], position, yaw, 60.0, features, names))
    source, sign = mirror_columns(features)
    np.testing.assert_allclose(raw[1], raw[0][:, source] * sign, atol=1e-4)


def test_a_clip_of_another_rig_is_refused(asset):
    from skeletal.anim.clip import Clip, Track
    from skeletal.errors import SkeletalError

    foreign = Clip("foreign", [Track(99, "translation", "LINEAR", np.array([0.0, 1.0]), np.zeros((2, 3)))])
    with pytest.raises(SkeletalError, match="node 99"):
        mirror_clip(asset, foreign)
