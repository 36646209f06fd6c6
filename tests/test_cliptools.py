"""Clip utilities (skeletal.cliptools) against the sampler: subclip, resample, reverse, additive clips.

Every check compares sampled poses (``skeletal.sampling.sample``) of the new clip with the original's
at matching times. Rotations are compared up to sign (q and -q are one rotation; slerp's shortest-path
rule may pick either for a re-keyed segment). Tolerances are float32 rounding of stored keys and times.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from skeletal.anim.clip import Clip, ClipError, Track, clip_from_keyframes
from skeletal.tools.cliptools import (Keyframe, additive_delta, apply_additive, apply_additive_morph,
                                clip_from_keyframe_list, identity_pose, make_additive, resample, reverse,
                                subclip)
from skeletal.quat import quat_conjugate, quat_mul, quat_to_matrix
from skeletal.anim.rig import Rig
from skeletal.anim.sampling import sample
from fixtures.shared_assets import SOLDIER

REPO = Path(__file__).resolve().parents[1]
INTERPOLATIONS = ("STEP", "LINEAR", "CUBICSPLINE")
ATOL = 1e-6

# ------------------------------------------------------------------------------------------------
# a small rig and clips built in code


def make_rig() -> Rig:
    rng = np.random.default_rng(7)
    rest = np.zeros((4, 10))
    rest[:, 0:3] = rng.normal(size=(4, 3))
    q = rng.normal(size=(4, 4))
    rest[:, 3:7] = q / np.linalg.norm(q, axis=1, keepdims=True)
    rest[:, 7:10] = rng.uniform(0.5, 1.5, size=(4, 3))
    return Rig.from_parents(["hips", "spine", "head", "face"], [-1, 0, 1, 0], rest)


RIG = make_rig()
MORPH_START = np.array([0, 0, 0, 0, 2], np.int64)  # node 3 ("face") has two morph weights
REST_MORPH = np.array([0.1, 0.2])


def axis_angle(axis, angle) -> np.ndarray:
    axis = np.asarray(axis, np.float64) / np.linalg.norm(axis)
    return np.array([*(axis * math.sin(angle / 2)), math.cos(angle / 2)])


def rotation_keys(rng, k: int) -> np.ndarray:
    """k unit quaternions 20-70 degrees apart, sign-continuous."""
    q = [axis_angle(rng.normal(size=3), rng.uniform(0, math.pi))]
    for _ in range(k - 1):
        q.append(quat_mul(q[-1], axis_angle(rng.normal(size=3), math.radians(rng.uniform(20, 70)))))
    return np.array(q)


def make_track(rng, node, path, interpolation, times, values, tangent_scale=1.0) -> Track:
    times = np.asarray(times, np.float32)
    values = np.asarray(values, np.float64)
    if interpolation == "CUBICSPLINE":
        tangents = rng.normal(scale=tangent_scale, size=(2,) + values.shape)
        values = np.stack([tangents[0], values, tangents[1]], axis=1).reshape(-1, values.shape[1])
    return Track(node, path, interpolation, times, values.astype(np.float32))


MAIN = [0.0, 0.3, 0.7, 1.1, 1.6, 2.0]


def make_clip(interpolation: str, seed: int = 0, flip: bool = False) -> Clip:
    """A 2 s clip with uneven keys, tracks starting late / ending early, a one-key track, weights.

    ``flip`` negates one rotation key (LINEAR: slerp must still take the short way; not for
    CUBICSPLINE, where it would make the raw curve pass near 0 and amplify float32 time rounding).
    """
    rng = np.random.default_rng(seed)
    rot0 = rotation_keys(rng, len(MAIN))
    if flip:
        rot0[2] = -rot0[2]
    tracks = [
        make_track(rng, 0, "translation", interpolation, MAIN, rng.normal(size=(len(MAIN), 3))),
        make_track(rng, 0, "rotation", interpolation, MAIN, rot0),
        make_track(rng, 1, "rotation", interpolation, [0.45, 0.9, 1.35], rotation_keys(rng, 3)),
        make_track(rng, 1, "scale", interpolation, [0.2, 1.8], rng.uniform(0.5, 2.0, size=(2, 3))),
        make_track(rng, 2, "translation", interpolation, [0.8], rng.normal(size=(1, 3))),
        make_track(rng, 2, "scale", interpolation, MAIN, rng.uniform(0.5, 2.0, size=(len(MAIN), 3))),
        make_track(rng, 3, "weights", interpolation, [0.0, 0.5, 1.25, 2.0], rng.uniform(0, 1, size=(4, 2))),
    ]
    return Clip(f"{interpolation.lower()}_clip", tracks, markers={"start": 0.0, "step": 0.55, "end": 2.0})


def sample_clip(clip: Clip, t, rest=None):
    rest = RIG.rest if rest is None else rest
    return sample(clip, np.atleast_1d(np.asarray(t, np.float64)), rest, MORPH_START, REST_MORPH)


def sample_delta(clip: Clip, t):
    """An additive clip sampled on identity rows and zero weights (untouched nodes: identity delta)."""
    return sample(clip, np.atleast_1d(np.asarray(t, np.float64)), identity_pose(len(RIG)), MORPH_START,
                  np.zeros(len(REST_MORPH)))


def rotation_error(q1: np.ndarray, q2: np.ndarray) -> np.ndarray:
    """Per-row distance between rotations up to sign."""
    return np.minimum(np.abs(q1 - q2).max(axis=-1), np.abs(q1 + q2).max(axis=-1))


def assert_pose_close(pose_a, pose_b, atol=ATOL, morph_a=None, morph_b=None, translation_atol=None):
    t_atol = atol if translation_atol is None else translation_atol
    np.testing.assert_allclose(pose_a[..., 0:3], pose_b[..., 0:3], rtol=0, atol=t_atol, err_msg="translation")
    np.testing.assert_allclose(pose_a[..., 7:10], pose_b[..., 7:10], rtol=0, atol=atol, err_msg="scale")
    err = rotation_error(pose_a[..., 3:7], pose_b[..., 3:7])
    assert err.max() <= atol, f"rotation differs by {err.max():.3g} (up to sign)"
    if morph_a is not None:
        np.testing.assert_allclose(morph_a, morph_b, rtol=0, atol=atol, err_msg="morph weights")


def assert_samples_match(clip_a, times_a, clip_b, times_b, atol=ATOL):
    pa, ma = sample_clip(clip_a, times_a)
    pb, mb = sample_clip(clip_b, times_b)
    assert_pose_close(pa, pb, atol, ma, mb)


def off_keys(t, clip: Clip, shift: float = 0.0, sign: float = 1.0, eps: float = 1e-6) -> np.ndarray:
    """Query times whose original time ``shift + sign * t`` is not within eps of a key of ``clip``.

    Exactly on a key, a re-timed STEP key (float32 rounding of ``t_k - start`` or ``d - t_k``) may sit
    on the other side of the query than the original key did.
    """
    t = np.asarray(t, np.float64)
    keys = np.concatenate([tr.times for tr in clip.tracks]).astype(np.float64)
    original = shift + sign * t
    return t[np.abs(original[:, None] - keys[None, :]).min(axis=1) > eps]


def snapshot(clip: Clip):
    return [(t.times.copy(), t.values.copy()) for t in clip.tracks], dict(clip.markers)


def assert_unchanged(clip: Clip, snap):
    tracks, markers = snap
    for t, (times, values) in zip(clip.tracks, tracks):
        assert np.array_equal(t.times, times) and np.array_equal(t.values, values)
    assert clip.markers == markers


def assert_clips_equal(a: Clip, b: Clip, time_atol=0.0):
    assert len(a.tracks) == len(b.tracks)
    for ta, tb in zip(a.tracks, b.tracks):
        assert (ta.node, ta.path, ta.interpolation) == (tb.node, tb.path, tb.interpolation)
        np.testing.assert_allclose(ta.times, tb.times, rtol=0, atol=time_atol)
        assert np.array_equal(ta.values, tb.values)


# ------------------------------------------------------------------------------------------------
# quaternion helpers


def test_quat_mul_composes_rotations_and_conjugate_inverts():
    rng = np.random.default_rng(1)
    a = rng.normal(size=(5, 4))
    a /= np.linalg.norm(a, axis=1, keepdims=True)
    b = rng.normal(size=(5, 4))
    b /= np.linalg.norm(b, axis=1, keepdims=True)
    np.testing.assert_allclose(quat_to_matrix(quat_mul(a, b)), quat_to_matrix(a) @ quat_to_matrix(b), atol=1e-12)
    np.testing.assert_allclose(quat_mul(quat_conjugate(a), a), np.tile([0, 0, 0, 1.0], (5, 1)), atol=1e-12)
    assert quat_mul(a[0], b).shape == (5, 4)  # broadcasting


# ------------------------------------------------------------------------------------------------
# subclip

RANGES = {
    "generic": (0.37, 1.43),
    "on_keys": (float(np.float32(0.3)), float(np.float32(1.6))),
    "pre_hold": (0.05, 0.4),  # node 1's tracks have not started yet at either end
    "post_hold": (1.5, 2.0),  # node 1's tracks have ended
    "one_segment": (0.75, 0.95),
    "whole": (0.0, 2.0),
}


@pytest.mark.parametrize("interpolation", INTERPOLATIONS)
@pytest.mark.parametrize("range_name", list(RANGES))
def test_subclip_samples_like_the_original(interpolation, range_name):
    clip = make_clip(interpolation, flip=interpolation == "LINEAR")
    snap = snapshot(clip)
    a, b = RANGES[range_name]
    part = subclip(clip, a, b)
    assert part.duration == float(np.float32(b - a))
    assert all(t.interpolation == interpolation for t in part.tracks)
    tau = off_keys(np.linspace(0, part.duration, 401)[1:-1], clip, a)
    assert_samples_match(part, tau, clip, a + tau)
    # The ends: the boundary keys hold the original's values at a and b.
    assert_samples_match(part, [0.0, part.duration], clip, [a, b])
    assert_unchanged(clip, snap)


def test_subclip_cubic_rotation_is_exact_and_ends_on_a_unit_key():
    # The raw Hermite between unit keys is not unit; the cut keeps the raw cubic (the only exact
    # split) scaled so that the last key, which the sampler shows as stored at the end, is unit.
    clip = make_clip("CUBICSPLINE")
    a, b = RANGES["generic"]
    part = subclip(clip, a, b)
    for track in part.tracks:
        if track.path == "rotation":
            assert abs(np.linalg.norm(track.values[-2]) - 1) < 1e-6
    end = np.array([part.duration, part.duration + 1.0])  # at and after the end (clamped)
    assert_samples_match(part, end, clip, [b, b])
    # Reversed, the (possibly non-unit) first key becomes the last: it is rescaled there too.
    back = reverse(part)
    for track in back.tracks:
        if track.path == "rotation":
            assert abs(np.linalg.norm(track.values[-2]) - 1) < 1e-6
    s = np.concatenate([np.linspace(0, back.duration, 151), [back.duration]])
    assert_samples_match(back, s, part, back.duration - s)


def test_subclip_keeps_inner_keys_and_moves_markers():
    clip = make_clip("LINEAR")
    part = subclip(clip, 0.5, 1.7)
    track, original = part.tracks[0], clip.tracks[0]
    np.testing.assert_allclose(track.times, [0, 0.2, 0.6, 1.1, 1.2], atol=1e-7)
    assert np.array_equal(track.values[1:-1], original.values[2:5])  # 0.7, 1.1, 1.6 kept as stored
    assert part.markers == pytest.approx({"step": 0.05})
    assert part.name == clip.name and not part.additive
    assert subclip(clip, 0.5, 1.7, name="cut").name == "cut"


def test_subclip_splits_a_cubic_exactly():
    # p(t) = t^3 on [0, 2] as one glTF Hermite segment: values 0, 8, time derivatives 0, 12.
    keys = np.array([[0, 0, 0], [0, 0, 0], [0, 0, 0], [12, 0, 0], [8, 0, 0], [0, 0, 0]], np.float32)
    clip = Clip("cube", [Track(0, "translation", "CUBICSPLINE", np.array([0, 2], np.float32), keys)])
    part = subclip(clip, 0.5, 1.5)
    in_t, value, out_t = part.tracks[0].values[:, 0].reshape(2, 3).T
    np.testing.assert_allclose(value, [0.5**3, 1.5**3], atol=1e-7)
    np.testing.assert_allclose(out_t[0], 3 * 0.5**2, atol=1e-6)  # p'(0.5) leaves the first key
    np.testing.assert_allclose(in_t[1], 3 * 1.5**2, atol=1e-6)  # p'(1.5) enters the last key
    tau = np.linspace(0, 1, 11)
    pose, _ = sample(part, tau, identity_pose(1), np.zeros(2, np.int64), np.zeros(0))
    np.testing.assert_allclose(pose[:, 0, 0], (0.5 + tau) ** 3, atol=1e-6)


def test_subclip_step_keeps_step_semantics():
    times = np.array([0, 1, 2, 3], np.float32)
    values = np.array([[0, 0, 0], [1, 0, 0], [2, 0, 0], [3, 0, 0]], np.float32)
    part = subclip(Clip("s", [Track(0, "translation", "STEP", times, values)]), 0.5, 2.5)
    assert part.tracks[0].interpolation == "STEP"
    assert part.tracks[0].times.tolist() == [0.0, 0.5, 1.5, 2.0]
    assert part.tracks[0].values[:, 0].tolist() == [0.0, 1.0, 2.0, 2.0]


@pytest.mark.parametrize("interpolation", INTERPOLATIONS)
def test_subclip_by_frames(interpolation):
    clip = make_clip(interpolation)
    by_frames = subclip(clip, 6, 39, fps=24)
    by_seconds = subclip(clip, 6 / 24, 39 / 24)
    assert_clips_equal(by_frames, by_seconds)
    tau = off_keys(np.linspace(0, by_frames.duration, 97)[1:-1], clip, 0.25)
    assert_samples_match(by_frames, tau, clip, 0.25 + tau)


def test_subclip_snaps_ends_within_float32_noise():
    clip = make_clip("LINEAR")
    # frame 48 at 24 fps is 2.0; a duration stored as float32 may sit an ulp below the float64 end.
    part = subclip(clip, 0, 2.0 + 1e-7)
    assert part.duration == clip.duration


@pytest.mark.parametrize("start, end, kwargs, match", [
    (1.0, 1.0, {}, "before end"),
    (1.5, 0.5, {}, "before end"),
    (-0.1, 1.0, {}, "outside"),
    (0.5, 2.1, {}, "outside"),
    (0, 49, {"fps": 24}, "outside"),
    (0, 10, {"fps": 0}, "fps"),
    (0, float("nan"), {}, "finite|before"),
])
def test_subclip_errors(start, end, kwargs, match):
    with pytest.raises(ClipError, match=match):
        subclip(make_clip("LINEAR"), start, end, **kwargs)


# ------------------------------------------------------------------------------------------------
# resample


@pytest.mark.parametrize("interpolation", INTERPOLATIONS)
def test_resample_is_exact_at_its_keys(interpolation):
    clip = make_clip(interpolation, flip=interpolation != "CUBICSPLINE")
    snap = snapshot(clip)
    fps = 30
    out = resample(clip, fps)
    n = math.ceil(clip.duration * fps)
    times = out.tracks[0].times
    assert len(times) == n + 1 and times[-1] == np.float32(clip.duration) and out.duration == clip.duration
    np.testing.assert_array_equal(times[:-1], (np.arange(n) / fps).astype(np.float32))
    for track in out.tracks:
        assert track.interpolation == "LINEAR" and np.array_equal(track.times, times)
        if track.path == "rotation":
            assert np.all(np.einsum("ij,ij->i", track.values[1:], track.values[:-1]) >= 0), "sign-continuous"
    assert_samples_match(out, times.astype(np.float64), clip, times.astype(np.float64))
    assert out.markers == clip.markers
    assert_unchanged(clip, snap)


@pytest.mark.parametrize("interpolation", ["LINEAR", "CUBICSPLINE"])
def test_resample_is_close_between_keys(interpolation):
    clip = make_clip(interpolation)
    out = resample(clip, 240)
    t = np.linspace(0, clip.duration, 1001)
    # chord error of a curve sampled every 1/240 s (LINEAR: only the segments cut by a grid point)
    assert_samples_match(out, t, clip, t, atol=2e-3)


def test_resample_of_a_linear_clip_keyed_on_the_grid_is_identical():
    rng = np.random.default_rng(3)
    fps = 24
    keys = (np.arange(0, 25, 3) / fps).astype(np.float32)  # every third frame, 0 .. 1 s
    clip = Clip("grid", [
        Track(0, "translation", "LINEAR", keys, rng.normal(size=(len(keys), 3)).astype(np.float32)),
        Track(0, "rotation", "LINEAR", keys, rotation_keys(rng, len(keys)).astype(np.float32)),
    ])
    # Nearly parallel keys (1 degree apart): the sampler nlerps there, normalising even at u = 0.
    small = np.array([axis_angle([0, 1, 0], math.radians(k)) for k in range(len(keys))])
    clip = Clip("grid", clip.tracks + [Track(1, "rotation", "LINEAR", keys, small.astype(np.float32))])
    dense = (np.arange(25) / fps).astype(np.float32)
    out = resample(clip, fps)
    assert np.array_equal(out.tracks[0].times, dense)
    on_old_keys = np.isin(dense, keys)
    for new, old in zip(out.tracks[:2], clip.tracks[:2]):
        assert np.array_equal(new.values[on_old_keys], old.values)  # lerp / slerp at u = 0: bit for bit
    np.testing.assert_allclose(out.tracks[2].values[on_old_keys], clip.tracks[2].values, rtol=0, atol=1e-7)
    t = np.linspace(0, 1, 333)
    assert_samples_match(out, t, clip, t)
    # Resampling on the clip's own key grid gives the clip back, key for key.
    assert_clips_equal(resample(out, fps), out)


def test_resample_zero_duration_and_errors():
    pose = Clip("pose", [Track(0, "translation", "LINEAR", [0.0], [[1, 2, 3]])])
    out = resample(pose, 30)
    assert out.duration == 0 and out.tracks[0].times.tolist() == [0.0]
    assert out.tracks[0].values.tolist() == [[1, 2, 3]]
    for fps in (0, -24, float("inf")):
        with pytest.raises(ClipError, match="fps"):
            resample(pose, fps)


# ------------------------------------------------------------------------------------------------
# reverse


@pytest.mark.parametrize("interpolation", INTERPOLATIONS)
def test_reverse_plays_backwards(interpolation):
    clip = make_clip(interpolation, flip=interpolation != "CUBICSPLINE")
    snap = snapshot(clip)
    back = reverse(clip)
    d = clip.duration
    assert back.duration == d
    t = off_keys(np.linspace(0, d, 503)[1:-1], clip, d, -1.0)  # STEP's half-open intervals face the other way
    assert_samples_match(back, t, clip, d - t)
    assert_samples_match(back, [d], clip, [0.0])
    if interpolation != "STEP":  # at the instant d a STEP track shows its last key; backwards that
        assert_samples_match(back, [0.0], clip, [d])  # instant is the start of the previous value
    assert back.markers == pytest.approx({"start": 2.0, "step": 1.45, "end": 0.0})
    assert_unchanged(clip, snap)
    # Reversing twice samples like the original (keys: see the exact test below).
    assert_samples_match(reverse(back), t, clip, t)


def dyadic_clip(interpolation: str) -> Clip:
    """Key times exact in float32 after d - t, every track from 0 to d. For STEP each track ends on a
    repeated value: a STEP track's last value is visible only at the instant d, which reversal drops."""
    rng = np.random.default_rng(11)
    times = [0.0, 0.25, 0.625, 1.5, 2.0]
    values = [rng.normal(size=(5, 3)), rotation_keys(rng, 5), rng.uniform(size=(3, 2))]
    if interpolation == "STEP":
        for v in values:
            v[-1] = v[-2]
    return Clip("dyadic", [
        make_track(rng, 0, "translation", interpolation, times, values[0]),
        make_track(rng, 0, "rotation", interpolation, times, values[1]),
        make_track(rng, 3, "weights", interpolation, [0.0, 0.5, 2.0], values[2]),
    ], markers={"hit": 0.75})


@pytest.mark.parametrize("interpolation", INTERPOLATIONS)
def test_reverse_twice_is_the_identity(interpolation):
    clip = dyadic_clip(interpolation)
    again = reverse(reverse(clip))
    assert_clips_equal(again, clip)
    assert again.markers == clip.markers


def test_reverse_cubic_negates_and_swaps_tangents():
    keys = np.array([[1, 0, 0], [0, 0, 0], [2, 0, 0], [3, 0, 0], [5, 0, 0], [4, 0, 0]], np.float32)
    back = reverse(Clip("c", [Track(0, "translation", "CUBICSPLINE", np.array([0, 1], np.float32), keys)]))
    assert back.tracks[0].values[:, 0].tolist() == [-4, 5, -3, -2, 0, -1]


def test_reverse_step_shifts_values_and_keeps_holds():
    times = np.array([0.5, 1.0, 1.5], np.float32)  # starts late and ends early in a 2 s clip
    values = np.array([[1, 0, 0], [2, 0, 0], [3, 0, 0]], np.float32)
    clip = Clip("s", [Track(0, "translation", "STEP", times, values),
                      Track(1, "translation", "LINEAR", [0.0, 2.0], [[0, 0, 0], [1, 1, 1]])])
    back = reverse(clip)
    assert back.tracks[0].times.tolist() == [0.0, 0.5, 1.0, 1.5]
    assert back.tracks[0].values[:, 0].tolist() == [3, 2, 1, 1]
    t = np.array([0.2, 0.7, 1.2, 1.7, 1.9])
    assert_samples_match(back, t, clip, 2.0 - t)


def test_reverse_keeps_the_duration_of_a_clip_that_starts_with_a_hold():
    rng = np.random.default_rng(5)
    clip = Clip("late", [
        make_track(rng, 0, "translation", "CUBICSPLINE", [0.5, 1.0, 2.0], rng.normal(size=(3, 3))),
        make_track(rng, 1, "translation", "LINEAR", [0.75, 1.5], rng.normal(size=(2, 3))),
    ])
    back = reverse(clip)
    assert back.duration == clip.duration == 2.0
    t = np.linspace(0, 2, 201)
    assert_samples_match(back, t, clip, 2.0 - t)
    assert_samples_match(reverse(back), t, clip, t)


# ------------------------------------------------------------------------------------------------
# additive clips


@pytest.mark.parametrize("interpolation", INTERPOLATIONS)
def test_additive_against_own_first_frame_reproduces_the_clip(interpolation):
    clip = make_clip(interpolation, flip=interpolation != "CUBICSPLINE")
    snap = snapshot(clip)
    add = make_additive(clip)
    assert add.additive and not clip.additive and add.markers == clip.markers
    assert [(t.node, t.path, t.interpolation) for t in add.tracks] == [(t.node, t.path, t.interpolation) for t in clip.tracks]
    # At t = 0 the delta is the identity (t 0, q identity, s 1; weights 0).
    delta0, dmorph0 = sample_delta(add, 0.0)
    assert_pose_close(delta0, identity_pose(len(RIG))[None], ATOL, dmorph0, np.zeros((1, 2)))
    ref_pose, ref_morph = sample_clip(clip, 0.0)
    t = np.linspace(0, clip.duration, 301)
    delta, dmorph = sample_delta(add, t)
    pose, morph = sample_clip(clip, t)
    # The delta is the pose's difference from the reference, and applying it gives the pose back.
    assert_pose_close(delta, additive_delta(pose, ref_pose), ATOL)
    assert_pose_close(apply_additive(ref_pose, delta, 1.0), pose, ATOL,
                      apply_additive_morph(ref_morph, dmorph, 1.0), morph)
    # Weight 0 leaves the base unchanged, bit for bit.
    assert np.array_equal(apply_additive(pose, delta, 0.0), pose)
    assert_unchanged(clip, snap)


def test_additive_at_another_time_and_half_weight():
    # One node turning about z by 0 .. 90 degrees and sliding along x; reference at t = 0.5.
    times = np.array([0, 1], np.float32)
    clip = Clip("turn", [
        Track(0, "rotation", "LINEAR", times, np.array([axis_angle([0, 0, 1], 0), axis_angle([0, 0, 1], math.pi / 2)], np.float32)),
        Track(0, "translation", "LINEAR", times, np.array([[0, 0, 0], [2, 0, 0]], np.float32)),
        Track(0, "scale", "LINEAR", times, np.array([[1, 1, 1], [3, 3, 3]], np.float32)),
    ])
    add = make_additive(clip, reference_time=0.5)
    delta, _ = sample_delta(add, 1.0)
    np.testing.assert_allclose(delta[0, 0, 3:7], axis_angle([0, 0, 1], math.pi / 4), atol=1e-7)
    np.testing.assert_allclose(delta[0, 0, 0:3], [1, 0, 0], atol=1e-7)
    np.testing.assert_allclose(delta[0, 0, 7:10], [1.5, 1.5, 1.5], atol=1e-7)
    base = identity_pose(1)
    half = apply_additive(base, delta[0, 0:1], 0.5)
    np.testing.assert_allclose(half[0, 3:7], axis_angle([0, 0, 1], math.pi / 8), atol=1e-7)
    np.testing.assert_allclose(half[0, 0:3], [0.5, 0, 0], atol=1e-7)
    np.testing.assert_allclose(half[0, 7:10], [1.25, 1.25, 1.25], atol=1e-7)


def test_apply_additive_is_batched_with_per_node_weights():
    rng = np.random.default_rng(2)
    base = np.tile(RIG.rest, (3, 1, 1))  # (T, N, 10)
    delta = identity_pose(4)
    delta[:, 0:3] = rng.normal(size=(4, 3))
    delta[:, 3:7] = rotation_keys(rng, 4)
    delta[:, 7:10] = rng.uniform(0.5, 2, size=(4, 3))
    weights = np.array([1.0, 0.0, 1.0, 0.0])
    out = apply_additive(base, delta, weights)
    assert out.shape == (3, 4, 10)
    assert np.array_equal(out[:, 1], base[:, 1]) and np.array_equal(out[:, 3], base[:, 3])
    full = apply_additive(base[0], delta, 1.0)
    assert_pose_close(out[:, 0], np.broadcast_to(full[0], (3, 10)))
    with pytest.raises(ClipError, match="broadcast"):
        apply_additive(base, delta, np.ones(3))


@pytest.mark.parametrize("interpolation", INTERPOLATIONS)
def test_additive_relative_to_another_clips_frame(interpolation):
    clip = make_clip(interpolation, seed=0)
    other = make_clip("LINEAR", seed=1)
    # The reference lacks node 1 and the weights: those come from the rest pose / default weights.
    partial = Clip("partial", [t for t in other.tracks if t.node not in (1, 3)])
    with pytest.raises(ClipError, match="rest=asset.rig.rest"):
        make_additive(clip, partial, reference_time=0.9)
    with pytest.raises(ClipError, match="rest_morph"):
        make_additive(clip, partial, reference_time=0.9, rest=RIG.rest)
    add = make_additive(clip, partial, reference_time=0.9, rest=RIG.rest, rest_morph=REST_MORPH,
                        morph_start=MORPH_START)
    ref_pose, ref_morph = sample_clip(partial, 0.9)  # rest rows where partial has no track
    t = np.linspace(0, clip.duration, 157)
    delta, dmorph = sample_delta(add, t)
    pose, morph = sample_clip(clip, t)
    assert_pose_close(apply_additive(ref_pose, delta, 1.0), pose, ATOL,
                      apply_additive_morph(ref_morph, dmorph, 1.0), morph)
    # A full reference needs no rest pose.
    full = make_additive(clip, other, reference_time=0.9)
    ref_pose, ref_morph = sample_clip(other, 0.9)
    delta, dmorph = sample_delta(full, t)
    assert_pose_close(apply_additive(ref_pose, delta, 1.0), pose, ATOL,
                      apply_additive_morph(ref_morph, dmorph, 1.0), morph)


def test_make_additive_errors():
    clip = make_clip("LINEAR")
    add = make_additive(clip)
    with pytest.raises(ClipError, match="already additive"):
        make_additive(add)
    with pytest.raises(ClipError, match="is additive"):
        make_additive(clip, add)
    with pytest.raises(ClipError, match="reference_time"):
        make_additive(clip, reference_time=2.5)
    with pytest.raises(ClipError, match="reference_time"):
        make_additive(clip, reference_time=-0.5)
    flat = Clip("flat", [Track(0, "scale", "LINEAR", [0.0, 1.0], [[0, 1, 1], [1, 1, 1]])])
    with pytest.raises(ClipError, match="zero component"):
        make_additive(flat)


def test_additive_clip_survives_subclip_resample_reverse():
    add = make_additive(make_clip("CUBICSPLINE"))
    assert subclip(add, 0.2, 1.2).additive and resample(add, 30).additive and reverse(add).additive


# ------------------------------------------------------------------------------------------------
# keyframe lists (seed 004)


def test_clip_from_keyframe_list_matches_clip_from_keyframes():
    rng = np.random.default_rng(4)
    pos = rng.normal(size=(3, 2, 3))
    rot = np.stack([rotation_keys(rng, 2) for _ in range(3)])
    frames = [Keyframe(d, positions=pos[k], orientations=rot[k]) for k, d in enumerate([0.5, 0.25, 1.0])]
    clip = clip_from_keyframe_list("walk", [0, 2], frames)
    expected = clip_from_keyframes("walk", [0, 2], [0.5, 0.25, 1.0], translations=pos, rotations=rot)
    assert_clips_equal(clip, expected)
    assert clip.duration == 0.75 and clip.tracks[0].times.tolist() == [0.0, 0.5, 0.75]


def test_clip_from_keyframe_list_errors():
    with pytest.raises(ClipError, match="no keyframes"):
        clip_from_keyframe_list("x", [0], [])
    with pytest.raises(ClipError, match="has no scales"):
        clip_from_keyframe_list("x", [0], [Keyframe(1, scales=np.ones((1, 3))), Keyframe(1)])
    with pytest.raises(ClipError, match="duration"):
        clip_from_keyframe_list("x", [0], [Keyframe(0, positions=np.ones((1, 3))), Keyframe(1, positions=np.ones((1, 3)))])


# ------------------------------------------------------------------------------------------------
# a real model


@pytest.fixture(scope="module")
def soldier():
    if not SOLDIER.is_file():
        pytest.skip(f"real test model not found at {SOLDIER} (set SKELETAL_ASSETS)")
    import skeletal

    return skeletal.load(SOLDIER)


def soldier_sample(asset, clip, t):
    return sample(clip, np.asarray(t, np.float64), asset.rig.rest, asset.morph_start, asset.rest_morph)


def soldier_translation_atol(asset):
    # float32 keys of a model whose translations reach ~100 units (float32 ulp there: 7.6e-6):
    # 1e-6 relative to that scale; rotations and scales keep the absolute 1e-6
    return ATOL * max(1.0, float(np.abs(asset.rig.rest[:, 0:3]).max()))


def test_soldier_walk_subclip_resample_reverse(soldier):
    walk = soldier.clip("Walk")
    t_atol = soldier_translation_atol(soldier)
    d = walk.duration

    def match(clip_a, ta, clip_b, tb):
        pa, _ = soldier_sample(soldier, clip_a, ta)
        pb, _ = soldier_sample(soldier, clip_b, tb)
        assert_pose_close(pa, pb, ATOL, translation_atol=t_atol)

    part = subclip(walk, 0.3, 0.8)
    tau = np.linspace(0, part.duration, 121)
    match(part, tau, walk, 0.3 + tau)
    frames = subclip(walk, 6, 18, fps=24)
    match(frames, tau[tau <= frames.duration], walk, 0.25 + tau[tau <= frames.duration])

    on_grid = resample(walk, 24)  # Walk is keyed at 24 fps: resampling there changes no pose
    t = np.linspace(0, d, 241)
    match(on_grid, t, walk, t)
    fine = resample(walk, 60)
    keys = fine.tracks[0].times.astype(np.float64)
    match(fine, keys, walk, keys)

    back = reverse(walk)
    assert back.duration == d
    match(back, t, walk, d - t)
    match(reverse(back), t, walk, t)

    add = make_additive(walk)
    ref, _ = soldier_sample(soldier, walk, 0.0)
    delta, _ = sample(add, t, identity_pose(len(soldier.rig)), soldier.morph_start, np.zeros_like(soldier.rest_morph))
    pose, _ = soldier_sample(soldier, walk, t)
    assert_pose_close(apply_additive(ref, delta, 1.0), pose, ATOL, translation_atol=t_atol)
