"""ClipSet: the playback layout (varying tracks first, shared timelines, constant tracks folded into
per-clip base poses, segments per sampling kernel) gives exactly what sampling each track does."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import skeletal
from skeletal.anim.clip import Clip, Track
from skeletal.playback import Crowd, Mixer
from skeletal.playback.clipset import (SEG_CONSTANT, SEG_END, SEG_FIRST, SEG_KIND, SEG_LERP3, SEG_NLERP, SEG_OTHER,
                                       SEG_SLERP, SEG_TIMELINE, TK_NODE, TK_PATH, TK_TIMELINE, ClipSet)
from skeletal.anim.rig import Rig


def axis_angle(axis, degrees):
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    half = np.radians(degrees) / 2
    return np.append(axis * np.sin(half), np.cos(half))


def mixed_clip() -> Clip:
    """Every kind of track on three timelines, plus constant and single-key tracks."""
    a = np.array([0.0, 0.2, 0.45, 0.5, 0.8, 1.0])  # timeline A
    b = np.array([0.0, 0.3, 0.6, 1.0])  # timeline B
    c = np.array([0.1, 0.9])  # timeline C
    big = np.array([axis_angle([0, 1, 0], 40 * i) for i in range(len(a))])  # 40-degree steps: slerp
    small = np.array([axis_angle([1, 0, 1], 3 * i) for i in range(len(a))])  # 3-degree steps: nlerp
    cubic_q = np.array([axis_angle([0, 0, 1], 20 * i) for i in range(len(a))])
    tangents = np.full((len(a), 4), 0.05)
    cubic = np.stack([tangents, cubic_q, -tangents], axis=1).reshape(-1, 4)
    tracks = [
        Track(0, "translation", "LINEAR", a, np.arange(18, dtype=float).reshape(6, 3) * 0.1),
        Track(0, "rotation", "LINEAR", a, big),
        Track(1, "rotation", "LINEAR", a, small),
        Track(1, "scale", "STEP", b, 1.0 + np.arange(12, dtype=float).reshape(4, 3) * 0.05),
        Track(2, "rotation", "CUBICSPLINE", a, cubic),
        Track(2, "translation", "LINEAR", b[:3], np.tile([0.0, 2.0, 0.5], (3, 1))),  # constant
        Track(3, "translation", "LINEAR", [0.4], [[1.0, 1.0, 1.0]]),  # single key: constant
        Track(3, "rotation", "LINEAR", c, np.tile(axis_angle([1, 1, 0], 30), (2, 1))),  # constant
        Track(4, "weights", "LINEAR", b, np.array([[0, 1], [0.5, 0.5], [1, 0], [0.2, 0.7]], float)),
        Track(4, "scale", "LINEAR", c, [[1.0, 1.0, 1.0], [2.0, 0.5, 1.0]]),
    ]
    return Clip("mixed", tracks)


@pytest.fixture(scope="module")
def asset():
    rig = Rig.from_parents([f"n{i}" for i in range(5)], [-1, 0, 1, 2, 3])
    return SimpleNamespace(rig=rig, rest_morph=np.array([0.25, 0.0]), morph_start=np.array([0, 0, 0, 0, 0, 2]),
                           skins=[], clips=[mixed_clip()])


def reference(asset, t):
    pose, morph = skeletal.sample(asset.clips[0], np.atleast_1d(t), asset.rig.rest, asset.morph_start,
                                  asset.rest_morph, loop="repeat")
    return pose, morph


def test_layout_groups_tracks_by_timeline_and_kernel(asset):
    cs = ClipSet(asset.clips)
    tracks = cs.track_table
    timelines = tracks[:, TK_TIMELINE]
    assert len(cs.timeline_keys) == 3  # A, B, C (the constant tracks need none)
    assert cs.varying_end[0] == 7 and np.all(timelines[:7] >= 0) and np.all(timelines[7:] == -1)
    assert np.all(np.diff(timelines[:7]) >= 0)  # a timeline's tracks are contiguous
    constant = {(int(n), int(p)) for n, p in tracks[7:, [TK_NODE, TK_PATH]]}
    assert constant == {(2, 0), (3, 0), (3, 1)}
    for limit, nlerp_nodes in ((0.0, set()), (15.0, {1}), (1000.0, {0, 1})):
        segments, table = cs.segments(limit)
        covered = np.concatenate([np.arange(s[SEG_FIRST], s[SEG_END]) for s in segments])
        np.testing.assert_array_equal(covered, np.arange(cs.track_count))  # each track exactly once, in order
        assert table[0, 7] == 0 and table[0, 8] == len(segments)
        kinds = {}
        for s in segments:
            for k in range(s[SEG_FIRST], s[SEG_END]):
                kinds[(int(tracks[k, TK_NODE]), int(tracks[k, TK_PATH]))] = int(s[SEG_KIND])
                assert s[SEG_TIMELINE] == timelines[k]
        assert {n for (n, p), kind in kinds.items() if kind == SEG_NLERP} == nlerp_nodes
        assert {n for (n, p), kind in kinds.items() if kind == SEG_SLERP} == {0, 1} - nlerp_nodes
        assert kinds[(0, 0)] == SEG_LERP3 and kinds[(4, 2)] == SEG_LERP3
        assert kinds[(1, 2)] == SEG_OTHER and kinds[(2, 1)] == SEG_OTHER and kinds[(4, 3)] == SEG_OTHER
        assert kinds[(2, 0)] == kinds[(3, 0)] == kinds[(3, 1)] == SEG_CONSTANT


def test_base_pose_holds_the_constant_tracks(asset):
    cs = ClipSet(asset.clips)
    pose, morph = cs.base_poses(asset.rig.rest, asset.rest_morph, asset.morph_start)
    expected = asset.rig.rest.copy()
    expected[2, 0:3] = [0.0, 2.0, 0.5]
    expected[3, 0:3] = 1.0
    expected[3, 3:7] = np.float32(axis_angle([1, 1, 0], 30))
    np.testing.assert_array_equal(pose[0], expected)
    np.testing.assert_array_equal(morph[0], asset.rest_morph)


# Times that hit keys exactly, fall between them, precede timeline C's first key, pass the end
# (repeat), and jump backwards (a cursor miss).
STEPS = [0.0, 0.2, 0.05, 0.2, 0.3, 0.33, 0.2, -0.7, 0.45]


@pytest.mark.parametrize("offsets", [[0.45], [0.0, 0.1, 0.45, 0.95]], ids=["one (serial kernel)", "four"])
def test_direct_path_matches_per_track_sampling(asset, offsets):
    offsets = np.array(offsets)
    mixer = Mixer(asset, len(offsets))  # one full-weight action: the direct (base pose) path
    mixer.play("mixed", offset=offsets)
    for step in STEPS:
        mixer.update(step)
        for b, t0 in enumerate(offsets):
            pose, morph = reference(asset, t0 + mixer.time)
            np.testing.assert_allclose(mixer.local_pose[b], pose[0], atol=1e-12)
            np.testing.assert_allclose(mixer.morph_weights[b], morph[0], atol=1e-12)


def test_blending_path_matches_per_track_sampling(asset):
    mixer = Mixer(asset, 2)
    mixer.play("mixed", offset=[0.0, 0.3])
    layer = mixer.add_layer("over")  # the same clip again as an unmasked override: the blending path
    mixer.play("mixed", layer=layer, offset=[0.0, 0.3])
    for step in STEPS:
        mixer.update(step)
        for b, t0 in enumerate((0.0, 0.3)):
            pose, morph = reference(asset, t0 + mixer.time)
            np.testing.assert_allclose(mixer.local_pose[b], pose[0], atol=1e-9)
            np.testing.assert_allclose(mixer.morph_weights[b], morph[0], atol=1e-9)


def test_crowd_fused_update_matches(asset):
    crowd = Crowd(asset, 3, nlerp_max_gap=0, keep_world=True)
    crowd.play("mixed", offsets=[0.0, 0.5, 0.7])
    for step in STEPS:
        crowd.update(step)
    pose, _ = reference(asset, np.array([0.0, 0.5, 0.7]) + crowd.time)
    world = skeletal.world_matrices(asset.rig.parents, pose)
    np.testing.assert_allclose(crowd.local_pose, pose, atol=1e-6)
    np.testing.assert_allclose(crowd.world, world, atol=1e-5)
