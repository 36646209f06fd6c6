"""Clip sampling against analytic expectations: loop modes, key lookup, STEP/LINEAR/CUBICSPLINE."""

import numpy as np
import pytest

from skeletal.anim.clip import Clip, ClipError, Track, clip_from_keyframes, map_time, resolve_clip
from skeletal.anim.rig import Rig
from skeletal.anim.sampling import find_key, sample, sample_clip_into

NO_MORPH = np.zeros(0)


def one_node_rig():
    return Rig.from_parents(["n"], [-1])


def sample_one(clip, t, loop="clamp", rig=None, morph_start=None, rest_morph=NO_MORPH):
    rig = rig or one_node_rig()
    if morph_start is None:
        morph_start = np.zeros(len(rig) + 1, np.int64)
    pose, morph = sample(clip, t, rig.rest, morph_start, rest_morph, loop=loop)
    return pose, morph


def qz(angle):
    return [0.0, 0.0, np.sin(angle / 2), np.cos(angle / 2)]


# -- loop modes --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "loop, t, expected",
    [
        ("clamp", [-1.0, 0.5, 2.5], [0.0, 0.5, 2.0]),
        ("repeat", [2.0, 2.5, -0.5, 4.0], [0.0, 0.5, 1.5, 0.0]),
        ("pingpong", [0.5, 2.0, 2.5, 3.5, 4.0, -0.5], [0.5, 2.0, 1.5, 0.5, 0.0, 0.5]),
    ],
)
def test_map_time(loop, t, expected):
    np.testing.assert_allclose(map_time(t, 2.0, loop), expected)


def test_zero_duration_maps_to_zero():
    assert map_time([3.0, -1.0], 0.0, "repeat").tolist() == [0.0, 0.0]


def test_unknown_loop_mode():
    with pytest.raises(ClipError, match="loop mode"):
        map_time(1.0, 1.0, "bounce")


def test_kernel_loop_matches_map_time():
    times = np.array([0, 1, 2], np.float32)
    track = Track(0, "translation", "LINEAR", times, np.array([[0, 0, 0], [1, 0, 0], [4, 0, 0]], np.float32))
    clip = Clip("c", [track])
    query = np.linspace(-5, 7, 97)
    for loop in ("clamp", "repeat", "pingpong"):
        pose, _ = sample_one(clip, query, loop)
        local = map_time(query, 2.0, loop)
        expected = np.interp(local, [0, 1, 2], [0, 1, 4])
        np.testing.assert_allclose(pose[:, 0, 0], expected, atol=1e-12)


# -- key lookup --------------------------------------------------------------------------------


def test_find_key_cursor_agrees_with_binary_search():
    rng = np.random.default_rng(0)
    times = np.sort(rng.uniform(0, 10, 50)).astype(np.float32)
    cursor = 0
    queries = np.concatenate([np.linspace(-1, 11, 400), rng.uniform(-1, 11, 200)])
    for t in queries:
        k = find_key(times, 0, len(times), t, cursor)
        expected = np.searchsorted(times.astype(np.float64), t, side="right") - 1
        assert k == min(expected, len(times) - 1)
        cursor = max(k, 0)


def test_interval_is_half_open_on_float32_keys():
    # A key at float32(0.1) > 0.1 (float64): t = 0.1 lies before it, so STEP keeps the previous key.
    times = np.array([0.0, 0.1, 0.2], np.float32)
    assert float(times[1]) > 0.1
    track = Track(0, "translation", "STEP", times, np.array([[0, 0, 0], [1, 0, 0], [2, 0, 0]], np.float32))
    pose, _ = sample_one(Clip("c", [track]), [0.1, float(times[1])])
    assert pose[:, 0, 0].tolist() == [0.0, 1.0]


def test_sequential_cursors_match_random_access():
    rng = np.random.default_rng(1)
    times = np.cumsum(rng.uniform(0.05, 0.3, 30)).astype(np.float32)
    values = rng.normal(size=(30, 3)).astype(np.float32)
    clip = Clip("c", [Track(0, "translation", "LINEAR", times, values)])
    rig = one_node_rig()
    cursors = np.zeros(1, np.int64)
    pose = rig.rest.copy()
    query = np.linspace(0, float(times[-1]) + 1, 300)
    expected, _ = sample_one(clip, query)
    for i, t in enumerate(query):
        sample_clip_into(
            t, clip.key_start, clip.times, clip.value_start, clip.values, clip.width, clip.interp, clip.path,
            clip.node, np.zeros(2, np.int64), cursors, pose, NO_MORPH,
        )
        np.testing.assert_allclose(pose[0], expected[i, 0], atol=1e-12)


# -- interpolation -----------------------------------------------------------------------------


def test_step_linear_and_holding_ends():
    times = np.array([1.0, 2.0], np.float32)
    values = np.array([[1, 2, 3], [3, 6, 9]], np.float32)
    step = Clip("s", [Track(0, "scale", "STEP", times, values)])
    lin = Clip("l", [Track(0, "scale", "LINEAR", times, values)])
    q = [0.0, 1.25, 1.5, 2.0, 5.0]
    ps, _ = sample_one(step, q)
    pl, _ = sample_one(lin, q)
    np.testing.assert_allclose(ps[:, 0, 7:10], [[1, 2, 3], [1, 2, 3], [1, 2, 3], [3, 6, 9], [3, 6, 9]])
    np.testing.assert_allclose(pl[:, 0, 7:10], [[1, 2, 3], [1.5, 3, 4.5], [2, 4, 6], [3, 6, 9], [3, 6, 9]])


def test_slerp_halfway_and_shortest_path():
    times = np.array([0.0, 1.0], np.float32)
    clip = Clip("r", [Track(0, "rotation", "LINEAR", times, np.array([qz(0), qz(np.pi / 2)], np.float32))])
    pose, _ = sample_one(clip, [0.5, 0.25])
    np.testing.assert_allclose(pose[0, 0, 3:7], qz(np.pi / 4), atol=1e-7)
    np.testing.assert_allclose(pose[1, 0, 3:7], qz(np.pi / 8), atol=1e-7)
    # The same end rotation with its sign flipped: slerp must still take the short way.
    flipped = Clip("r", [Track(0, "rotation", "LINEAR", times, np.array([qz(0), -np.array(qz(np.pi / 2))], np.float32))])
    pose, _ = sample_one(flipped, [0.5])
    np.testing.assert_allclose(np.abs(pose[0, 0, 3:7]), np.abs(qz(np.pi / 4)), atol=1e-7)


def test_rotation_keys_are_used_as_stored():
    # Like three.js: a (non-conformant) non-unit key is not renormalised, so matrices match viewers.
    times = np.array([0.0, 1.0], np.float32)
    keys = np.array([[0, 0, 0, 0.999], [0, 0, 0, 0.999]], np.float32)
    clip = Clip("r", [Track(0, "rotation", "LINEAR", times, keys)])
    pose, _ = sample_one(clip, [0.0, 0.5])
    np.testing.assert_allclose(pose[:, 0, 3:7], keys, atol=1e-7)


def test_cubic_spline_is_glTF_hermite():
    times = np.array([0.0, 2.0], np.float32)
    # per key: in-tangent, value, out-tangent
    values = np.array([[0, 0, 0], [0, 0, 0], [1, 0, 0], [-1, 0, 0], [4, 0, 0], [0, 0, 0]], np.float32)
    clip = Clip("c", [Track(0, "translation", "CUBICSPLINE", times, values)])
    t = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0])
    pose, _ = sample_one(clip, t)
    u = np.clip(t / 2.0, 0, 1)
    dt = 2.0
    h00, h10, h01, h11 = 2 * u**3 - 3 * u**2 + 1, u**3 - 2 * u**2 + u, -2 * u**3 + 3 * u**2, u**3 - u**2
    expected = h00 * 0 + h10 * dt * 1 + h01 * 4 + h11 * dt * (-1)
    np.testing.assert_allclose(pose[:, 0, 0], expected, atol=1e-12)


def test_cubic_rotation_is_normalised():
    times = np.array([0.0, 1.0], np.float32)
    values = np.array([[0, 0, 0, 0], qz(0), [0, 0, 1, 0], [0, 0, 1, 0], qz(np.pi / 2), [0, 0, 0, 0]], np.float32)
    clip = Clip("c", [Track(0, "rotation", "CUBICSPLINE", times, values)])
    pose, _ = sample_one(clip, np.linspace(0, 1, 11))
    np.testing.assert_allclose(np.linalg.norm(pose[:, 0, 3:7], axis=1), 1.0, atol=1e-12)


def test_weights_track_writes_morph_slots():
    rig = Rig.from_parents(["a", "b"], [-1, 0])
    times = np.array([0.0, 1.0], np.float32)
    clip = Clip("w", [Track(1, "weights", "LINEAR", times, np.array([[0, 1], [1, 0]], np.float32))])
    morph_start = np.array([0, 0, 2], np.int64)
    _, morph = sample_one(clip, [0.25], rig=rig, morph_start=morph_start, rest_morph=np.array([0.3, 0.3]))
    np.testing.assert_allclose(morph[0], [0.25, 0.75])


def test_untouched_nodes_keep_rest_pose():
    rest = np.zeros((2, 10))
    rest[:, 6] = 1
    rest[:, 7:] = 1
    rest[1, 0:3] = [5, 6, 7]
    rig = Rig.from_parents(["a", "b"], [-1, 0], rest)
    clip = Clip("c", [Track(0, "translation", "LINEAR", np.array([0.0], np.float32), np.array([[1, 1, 1]], np.float32))])
    pose, _ = sample_one(clip, [0.3], rig=rig)
    assert pose[0, 1, 0:3].tolist() == [5, 6, 7]


def test_single_key_clip_has_zero_duration_and_shows_the_key():
    clip = Clip("pose", [Track(0, "translation", "LINEAR", np.array([0.0], np.float32), np.array([[1, 2, 3]], np.float32))])
    assert clip.duration == 0.0
    for loop in ("clamp", "repeat", "pingpong"):
        pose, _ = sample_one(clip, [0.0, 0.5, -3.0], loop)
        np.testing.assert_allclose(pose[:, 0, 0:3], [[1, 2, 3]] * 3)


# -- clip construction -------------------------------------------------------------------------


def test_duration_is_latest_last_key():
    a = Track(0, "translation", "LINEAR", np.array([0, 1], np.float32), np.zeros((2, 3), np.float32))
    b = Track(0, "scale", "LINEAR", np.array([0.5, 2.5], np.float32), np.ones((2, 3), np.float32))
    assert Clip("c", [a, b]).duration == 2.5


@pytest.mark.parametrize(
    "times, values, message",
    [
        ([0, 0], np.zeros((2, 3)), "strictly increasing"),
        ([1, 0], np.zeros((2, 3)), "strictly increasing"),
        ([0, 1], np.zeros((3, 3)), "value rows"),
        ([], np.zeros((0, 3)), "no keys"),
    ],
)
def test_bad_tracks(times, values, message):
    with pytest.raises(ClipError, match=message):
        Track(0, "translation", "LINEAR", np.array(times, np.float32), values)


def test_resolve_clip_by_name_and_index():
    clips = [Clip("Idle", []), Clip("Walk", [])]
    assert resolve_clip(clips, "Walk").name == "Walk"
    assert resolve_clip(clips, 0).name == "Idle"
    assert resolve_clip(clips, "1").name == "Walk"
    with pytest.raises(ClipError, match="no clip named 'Run'"):
        resolve_clip(clips, "Run")
    with pytest.raises(ClipError, match="out of range"):
        resolve_clip(clips, 5)


def test_clip_from_keyframes_seed_004_style():
    rotations = np.array([[qz(0)], [qz(np.pi / 2)], [qz(0)]], np.float32)
    clip = clip_from_keyframes("wave", [0], durations=[0.5, 0.5, 0.0], rotations=rotations)
    assert clip.duration == 1.0
    pose, _ = sample_one(clip, [0.25, 0.5])
    np.testing.assert_allclose(pose[0, 0, 3:7], qz(np.pi / 4), atol=1e-7)
    np.testing.assert_allclose(pose[1, 0, 3:7], qz(np.pi / 2), atol=1e-7)
