"""Motion-matching database and search: features, mirroring, files, and the accelerated search
returning the same rows as brute force."""

from __future__ import annotations

import numpy as np
import pytest

from skeletal.anim.clip import Clip, Track
from skeletal.demo import locomotion_asset
from skeletal.errors import SkeletalError
from skeletal.playback.locomotion.database import MatchingDatabase, Range
from skeletal.playback.locomotion.features import (Feature, compute_features, default_features, mirror_columns,
                                                   mirror_joints, mirror_name, root_frames)
from skeletal.playback.locomotion.search import box_search, brute_force, build_boxes
from skeletal.anim.pose import world_matrices
from skeletal.anim.sampling import sample

IN_PLACE = ("idle", "wave", "walk", "run")


@pytest.fixture(scope="module")
def asset():
    return locomotion_asset()


@pytest.fixture(scope="module")
def db(asset):
    return MatchingDatabase.build(asset, exclude=IN_PLACE, mirror=True)


def test_default_database_layout(db):
    assert db.width == 27 and len(db) > 1500
    assert db.mirrored.sum() == len(db) // 2
    assert set(db.clip_names) == {n for n in db.clip_names if n not in IN_PLACE}
    # normalised: each group's columns have a mean of 0 and an average standard deviation of its weight
    for f in db.feature_set:
        columns = db.features[:, db.group(f.name)]
        np.testing.assert_allclose(columns.mean(axis=0), 0.0, atol=1e-4)
        assert columns.std(axis=0).mean() == pytest.approx(f.weight, rel=0.02)
    # a row's own features find it (or an identical earlier row)
    rows, cost = db.search(db.features[::7])
    assert (cost == 0).all()
    np.testing.assert_array_equal(db.features[rows], db.features[::7])


def test_trajectory_features_follow_the_clip(asset, db):
    """walk_forward: the root is 20/40/60 frames ahead straight along +Z at the walk's speed."""
    row = int(np.flatnonzero((db.clip == db.clip_names.index("walk_forward")) & ~db.mirrored)[10])
    raw = db.features[row] * db.scale + db.mean
    position = raw[db.group("trajectory_position")].reshape(3, 2)
    direction = raw[db.group("trajectory_direction")].reshape(3, 2)
    np.testing.assert_allclose(position[:, 0], 0.0, atol=1e-4)
    np.testing.assert_allclose(np.diff(position[:, 1]), position[0, 1], rtol=1e-3)
    assert 0.3 < position[0, 1] < 0.45  # 1/3 s at about 1.06 m/s
    np.testing.assert_allclose(direction, [[0, 1]] * 3, atol=1e-4)


def test_mirrored_rows_are_the_mirror_images(asset, db):
    originals = db.features[~db.mirrored]
    np.testing.assert_allclose(db.mirror(originals), db.features[db.mirrored], atol=1e-5)
    np.testing.assert_allclose(db.mirror(db.mirror(originals)), originals, atol=1e-6)
    # the left turn mirrored is a right turn: its trajectory bends to -x
    turn = (db.clip == db.clip_names.index("walk_turn_left")) & db.mirrored
    x_ahead = db.features[turn][:, db.group("trajectory_position")][:, 4] * db.scale[db.group("trajectory_position")][4]
    assert (x_ahead + db.mean[db.group("trajectory_position")][4] < 0).all()


def test_column_mirror_equals_the_reflected_motion(asset):
    """Features of a motion reflected through x = 0 with left and right joints swapped are the
    original features under the column map."""
    rig = asset.rig
    clip = asset.clip("walk_turn_left")
    times = np.arange(0.0, clip.duration, 1 / 60)
    pose, _ = sample(clip, times, rig.rest, asset.morph_start, asset.rest_morph)
    world = world_matrices(rig.parents, pose)
    features = default_features()
    names = {n: i for i, n in enumerate(rig.names)}
    position, yaw = root_frames(world, 0, np.array([0.0, 0.0, 1.0]))
    raw = compute_features(world[:, :, :3, 3], position, yaw, 60.0, features, names)
    reflect = np.array([-1.0, 1.0, 1.0])
    mirrored_world = world[:, :, :3, 3][:, mirror_joints(rig.names)] * reflect
    mirrored = compute_features(mirrored_world, position * reflect, -yaw, 60.0, features, names)
    source, sign = mirror_columns(features)
    np.testing.assert_allclose(raw[:, source] * sign, mirrored, atol=1e-9)


def test_mirror_names():
    assert mirror_name("mixamorig:LeftHand") == "mixamorig:RightHand"
    assert mirror_name("left_thigh") == "right_thigh"
    assert mirror_name("hand_l") == "hand_r" and mirror_name("Bip01 R Foot") == "Bip01 L Foot"
    assert mirror_name("upperarm.L") == "upperarm.R"
    assert mirror_name("Spine") == "Spine"


def test_tags_ranges_and_weights(asset, db):
    walks = MatchingDatabase.build(asset, include=("walk_forward", "walk_slow"))
    assert set(walks.clip_names) == {"walk_forward", "walk_slow"} and not walks.mirrored.any()
    part = MatchingDatabase.build(asset, [Range("run_forward", 0.5, 1.5, tags=("fast",))], end_margin=0)
    assert part.time.min() == pytest.approx(0.5) and part.time.max() == pytest.approx(1.5)
    assert part.range_tags == [("fast",)]
    heavy = MatchingDatabase.build(asset, exclude=IN_PLACE, features=default_features(trajectory_direction=3.0))
    col = heavy.group("trajectory_direction")
    assert heavy.features[:, col].std(axis=0).mean() == pytest.approx(3.0, rel=0.02)
    with pytest.raises(SkeletalError, match="no clip range"):
        MatchingDatabase.build(asset, include=("nothing",))
    with pytest.raises(SkeletalError, match="no joint"):
        MatchingDatabase.build(asset, exclude=IN_PLACE, features=(Feature("x", "position", "tail"),))
    with pytest.raises(SkeletalError, match="kind"):
        Feature("x", "acceleration", "hips")
    foreign = Clip("foreign", [Track(40, "rotation", "LINEAR", np.array([0.0, 1.0]), np.tile([0, 0, 0, 1.0], (2, 1)))])
    with pytest.raises(SkeletalError, match="retarget"):
        MatchingDatabase.build(asset, [foreign])


def test_save_and_load(tmp_path, db):
    path = tmp_path / "locomotion.npz"
    db.save(path)
    again = MatchingDatabase.load(path)
    np.testing.assert_array_equal(again.features, db.features)
    np.testing.assert_array_equal(again.mirror_source, db.mirror_source)
    assert again.feature_set == db.feature_set and again.clip_names == db.clip_names
    assert again.range_tags == db.range_tags and again.fps == db.fps
    queries = db.features[:50] + 0.1
    np.testing.assert_array_equal(again.search(queries)[0], db.search(queries)[0])
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip")
    with pytest.raises(SkeletalError, match="bad.npz"):
        MatchingDatabase.load(bad)
    np.savez(tmp_path / "other.npz", features=np.zeros((3, 27), np.float32))
    with pytest.raises(SkeletalError, match="other.npz"):
        MatchingDatabase.load(tmp_path / "other.npz")


def test_box_search_equals_brute_force_on_10000_queries(db):
    rng = np.random.default_rng(7)
    near = db.features[rng.integers(0, len(db), 5000)] + rng.normal(scale=0.2, size=(5000, db.width))
    far = rng.normal(scale=1.5, size=(5000, db.width))
    queries = np.concatenate([near, far]).astype(np.float32)
    fast, fast_cost = db.search(queries)
    slow, slow_cost = db.search(queries, brute_force=True)
    np.testing.assert_array_equal(fast, slow)
    np.testing.assert_array_equal(fast_cost, slow_cost)
    # the one-query path, and exact ties (duplicate rows) going to the lower index as brute force
    assert db.search(queries[3])[0][0] == slow[3]
    rows = np.ascontiguousarray(np.concatenate([db.features, db.features]))
    twice = box_search(rows, build_boxes(rows), queries[:500])[0]
    np.testing.assert_array_equal(twice, brute_force(rows, queries[:500])[0])
    assert (twice < len(db)).all()


def test_box_search_with_hints_and_three_levels_equals_brute_force():
    """Over 20,000 rows (several top boxes), with no hints, random hints, the answers themselves, and
    hints at the later of two equal rows: always brute force's row (the lower index on ties)."""
    from skeletal.bench.matching import synthetic_rows

    rows, real = synthetic_rows(20_000, seed=3)
    rows = np.ascontiguousarray(np.concatenate([rows, rows[:4000]]))  # exact duplicates: ties
    boxes = build_boxes(rows)
    assert len(boxes.level_count) >= 4  # blocks and three levels of nodes
    rng = np.random.default_rng(11)
    picks = np.concatenate([real[rng.integers(0, len(real), 600)], rows[rng.integers(0, 4000, 400)]])
    queries = (picks + rng.normal(scale=0.2, size=picks.shape) * (np.arange(1000) < 600)[:, None]).astype(np.float32)
    slow, slow_cost = brute_force(rows, queries)
    for hints in (None, rng.integers(-1, len(rows), 1000), slow, np.where(slow < 4000, slow + 20_000, slow)):
        fast, cost = box_search(rows, boxes, queries, hints)
        np.testing.assert_array_equal(fast, slow)
        np.testing.assert_array_equal(cost, slow_cost)
    assert box_search(rows, boxes, queries[:1], np.array([5]))[0][0] == slow[0]  # the one-query path
    with pytest.raises(SkeletalError, match="hints"):
        box_search(rows, boxes, queries[:2], np.array([0, len(rows)]))
    with pytest.raises(SkeletalError, match="hints"):
        box_search(rows, boxes, queries[:2], np.array([0.5, 1.0]))


def test_box_search_on_controller_queries_with_the_frame_playing_as_hint(asset, db):
    """Realistic queries: what a crowd of motion-matching characters asks on figure eights (walking
    and running), with the frames they play as hints, on the real set and on a 20,000-row set where
    each character moves through one of its copies: the same rows as brute force."""
    from skeletal.bench.matching import record_crowd, replay_queries, synthetic_rows

    frames = record_crowd(asset, db, characters=120, frames=12, skip=6)
    queries = np.concatenate([q for q, _ in frames])
    playing = np.concatenate([h for _, h in frames])
    assert len(frames) == 12 and len(queries) >= 200 and (playing >= 0).mean() > 0.9
    slow, slow_cost = brute_force(db.features, queries)
    for hints in (None, playing):
        fast, cost = db.search(queries, hints=hints)
        np.testing.assert_array_equal(fast, slow)
        np.testing.assert_array_equal(cost, slow_cost)
    rows, real = synthetic_rows(20_000, seed=4)
    big_queries, big_playing = replay_queries(rows, real, queries, playing, np.random.default_rng(2))
    slow, slow_cost = brute_force(rows, big_queries)
    boxes = build_boxes(rows)
    for hints in (None, big_playing):
        fast, cost = box_search(rows, boxes, big_queries, hints)
        np.testing.assert_array_equal(fast, slow)
        np.testing.assert_array_equal(cost, slow_cost)


def test_box_search_exact_ties_small_and_large_scales():
    """Queries on a row that appears twice (distance 0 to both: the lower index, whatever the hint),
    databases smaller than a leaf, empty, and of large or tiny magnitudes (the bound's slack scales)."""
    rng = np.random.default_rng(5)
    base = rng.normal(size=(3000, 9)).astype(np.float32)
    for scale in (1.0, 1e4, 1e-4, 1e6, 1e-7):
        rows = np.ascontiguousarray(np.concatenate([base, base[:500]]) * np.float32(scale))
        boxes = build_boxes(rows)
        queries = np.concatenate([rows[:300], rows[3000:3300], rows[:300] + np.float32(1e-3 * scale)])
        slow, slow_cost = brute_force(rows, queries)
        assert (slow[:600] == np.tile(np.arange(300), 2)).all() and (slow_cost[:600] == 0).all()
        for hints in (None, np.tile(np.arange(3000, 3300), 3)):
            fast, cost = box_search(rows, boxes, queries, hints)
            np.testing.assert_array_equal(fast, slow)
            np.testing.assert_array_equal(cost, slow_cost)
    tiny = np.ascontiguousarray(base[:5])
    assert box_search(tiny, build_boxes(tiny), base[3:4])[0][0] == 3
    empty = np.zeros((0, 9), np.float32)
    assert box_search(empty, build_boxes(empty), base[:2])[0].tolist() == [-1, -1]
    with pytest.raises(SkeletalError, match="finite"):
        build_boxes(np.full((4, 9), np.inf, np.float32))
    with pytest.raises(SkeletalError, match="not built from these rows"):
        box_search(base[:100].copy(), build_boxes(tiny), base[:2])


def test_generated_sets_grow_by_appending_clips():
    """The benchmark's generated locomotion sets: a larger one begins with the smaller one's clips and
    rows (the same motion in the larger set's units), and the crowd replay of a controller's queries
    on it finds brute force's frames."""
    from skeletal.bench import matching

    small_asset, small = matching.generated_set(1500)
    _, large = matching.generated_set(3000)
    n = len(small)
    assert len(small) >= 1500 and len(large) >= 3000 and large.clip_names[:len(small.clip_names)] == small.clip_names
    np.testing.assert_allclose(large.features[:n] * large.scale + large.mean, small.features * small.scale + small.mean,
                               atol=1e-4)
    frames = matching.record_crowd(small_asset, small, characters=60, frames=6, skip=6)
    moved = [(large.normalise(q * small.scale + small.mean), h) for q, h in frames]
    row = matching.crowd_budget(large.features, moved, characters=60, repeats=1, model=False)
    assert row["same_frames"] and row["frames"] == len(large) and row["queries_per_frame"] >= 5


def test_search_refuses_bad_queries(db):
    with pytest.raises(SkeletalError, match="queries"):
        db.search(np.zeros((2, 5), np.float32))
    with pytest.raises(SkeletalError, match="finite"):
        db.search(np.full((1, db.width), np.nan, np.float32))


def test_benchmark_modules_run_small():
    """The benchmark modules' measuring code, on small sizes (no timing is checked)."""
    from skeletal.bench import matching, transitions
    from skeletal.demo import demo_asset

    rows = matching.bench_size(3000, batches=(1, 20), repeats=1)
    assert [r["same_frames"] for r in rows] == [True, True] and rows[0]["frames"] == 3000
    asset = locomotion_asset()
    db = MatchingDatabase.build(asset, exclude=IN_PLACE, mirror=True)
    frames = matching.record_crowd(asset, db, characters=60, frames=6, skip=6)
    rows, real = matching.synthetic_rows(6000)
    moved = [matching.replay_queries(rows, real, q, h, np.random.default_rng(0)) for q, h in frames]
    row = matching.crowd_budget(rows, moved, characters=60, repeats=1, model=False)
    assert row["same_frames"] and 8 <= row["queries_per_frame"] <= 12 and row["crowd_update_ms"] > 0
    row = transitions.run_sequence(demo_asset(), ("idle", "walk", "run"), "inertialize", (0.5, 1.0))
    assert row["clips_sampled"] == 1 and row["switch_jump"] < 30.0
