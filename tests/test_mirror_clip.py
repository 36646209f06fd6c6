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


# -- a rig whose left and right bind poses are not mirror images ---------------------------------------

def _axis_angle(axis, degrees):
    axis = np.asarray(axis, np.float64) / np.linalg.norm(axis)
    h = np.radians(degrees) / 2
    return np.array([*(axis * np.sin(h)), np.cos(h)])


@pytest.fixture(scope="module")
def lopsided(asset):
    """The locomotion character with an asymmetric bind pose, its walk_turn_left unchanged in the world:
    the left shoulder (not animated) rests raised by 25 degrees, so the arms are lopsided in the bind
    pose and in every frame; the left thigh rests splayed by 15 degrees (its clip rotation overrides it:
    only the bind is asymmetric); the right shin's local axes are turned by 40 degrees (its rest and
    key rotations times Q, the foot's rest offset and key rotations by Q^-1: the same world motion)."""
    import copy

    from skeletal.anim.clip import Clip, Track
    from skeletal.quat import quat_conjugate, quat_mul, quat_to_matrix

    lop = copy.deepcopy(asset)
    rig = lop.rig
    rest = rig.rest
    sh, thigh, shin, foot = (rig.find(n) for n in ("left_shoulder", "left_thigh", "right_shin", "right_foot"))
    rest[sh, 3:7] = quat_mul(_axis_angle([0, 0, 1], 25), rest[sh, 3:7])
    rest[thigh, 3:7] = quat_mul(_axis_angle([1, 0, 0], 15), rest[thigh, 3:7])
    q = _axis_angle([0.3, 1.0, 0.2], 40)
    rest[shin, 3:7] = quat_mul(rest[shin, 3:7], q)
    back = quat_to_matrix(quat_conjugate(q))[:3, :3]
    rest[foot, 0:3] = back @ rest[foot, 0:3]
    rest[foot, 3:7] = quat_mul(quat_conjugate(q), rest[foot, 3:7])
    clip = asset.clip("walk_turn_left")
    tracks = []
    for t in clip.tracks:
        values = np.asarray(t.values, np.float64)
        if t.node == shin and t.path == "rotation":
            values = quat_mul(values, q)
        elif t.node == foot and t.path == "rotation":
            values = quat_mul(quat_conjugate(q), values)
        elif t.node == foot and t.path == "translation":
            values = values @ back.T
        tracks.append(Track(t.node, t.path, t.interpolation, t.times, values))
    lop.clips = [Clip(clip.name, tracks, dict(clip.markers), clip.additive)]
    return lop


def _old_formula_positions(asset, world):
    """Joint positions of the pose mirrored through the bind pose, ``M (W_m B_m^-1) M B_j``: right only
    for a symmetric bind."""
    rig = asset.rig
    bind = world_matrices(rig.parents, rig.rest)
    partner = mirror_joints(rig.names)
    m = np.diag([-1.0, 1.0, 1.0, 1.0])
    return (m @ world[:, partner] @ np.linalg.inv(bind[partner]) @ m @ bind)[..., :3, 3]


def test_an_asymmetric_bind_pose_mirrors_to_reflected_positions_and_keeps_the_bones(asset, lopsided):
    clip = lopsided.clip("walk_turn_left")
    times = np.arange(0.0, clip.duration, 1 / 60)
    world, _ = _world(lopsided, clip, times)
    world_plain, _ = _world(asset, asset.clip("walk_turn_left"), times)
    # the re-axed shin moves as before in the world; the raised shoulder changes the arms only
    legs = [asset.rig.find(n) for n in ("right_shin", "right_foot", "right_toe", "left_foot")]
    np.testing.assert_allclose(world[:, legs, :3, 3], world_plain[:, legs, :3, 3], atol=1e-5)
    partner = mirror_joints(lopsided.rig.names)
    expected = world[:, :, :3, 3][:, partner] * np.array([-1.0, 1.0, 1.0])
    # the bind-relative formula puts the mirrored joints centimetres off on this rig
    assert np.abs(_old_formula_positions(lopsided, world) - expected).max() > 0.02
    mirrored = mirror_clip(lopsided, clip)
    world_m, pose_m = _world(lopsided, mirrored, times)
    np.testing.assert_allclose(world_m[:, :, :3, 3], expected, atol=1e-5)
    # every joint keeps its own rest offset from its parent (no bone is moved by a translation key)
    moved = {t.node for t in clip.tracks if t.path == "translation"}
    kept = [j for j in range(len(lopsided.rig)) if j not in moved and lopsided.rig.parents[j] >= 0]
    np.testing.assert_allclose(pose_m[:, kept, 0:3], np.broadcast_to(lopsided.rig.rest[kept, 0:3], pose_m[:, kept, 0:3].shape),
                               atol=1e-5)
    # and the joints' axes: the reflected partner's axes turned by the constant rest-pose rotation
    from skeletal.playback.locomotion.mirror import mirror_frames

    frames = mirror_frames(lopsided.rig.parents, lopsided.rig.rest, partner)
    flip = np.diag([-1.0, 1.0, 1.0])
    np.testing.assert_allclose(world_m[:, :, :3, :3], flip @ world[:, partner, :3, :3] @ flip @ frames, atol=1e-4)
    np.testing.assert_allclose(frames, flip @ np.swapaxes(frames[partner], -1, -2) @ flip, atol=1e-9)


def test_an_asymmetric_bind_pose_mirrored_twice_gives_the_clip_back(lopsided):
    clip = lopsided.clip("walk_turn_left")
    twice = mirror_clip(lopsided, mirror_clip(lopsided, clip))
    times = np.arange(0.0, clip.duration, 1 / 60)
    world, _ = _world(lopsided, clip, times)
    world2, _ = _world(lopsided, twice, times)
    np.testing.assert_allclose(world2[..., :3, :], world[..., :3, :], atol=1e-4)


def test_mirrored_database_rows_of_an_asymmetric_rig_are_what_the_mirrored_clip_plays(lopsided):
    """The database's mirrored rows (the column mirror of the originals) are the features of the
    mirrored clip the controller plays for them: a frame and its mirror are mirror images."""
    from skeletal.playback.locomotion.database import MatchingDatabase

    db = MatchingDatabase.build(lopsided, mirror=True)
    mirrored = mirror_clip(lopsided, lopsided.clip("walk_turn_left"))
    times = np.arange(0.0, mirrored.duration + 0.5 / 60, 1 / 60)
    times = times[times <= mirrored.duration + 1e-9]  # the frames the database samples
    world, _ = _world(lopsided, mirrored, times)
    position, yaw = root_frames(world, 0, np.array([0.0, 0.0, 1.0]))
    names = {n: i for i, n in enumerate(lopsided.rig.names)}
    raw = compute_features(world[:, :, :3, 3], position, yaw, 60.0, db.feature_set, names)
    rows = np.flatnonzero(db.mirrored)
    np.testing.assert_allclose(db.normalise(raw[:len(rows)]), db.features[rows], atol=1e-3)
    np.testing.assert_allclose(db.mirror(db.features[~db.mirrored]), db.features[db.mirrored], atol=1e-5)
