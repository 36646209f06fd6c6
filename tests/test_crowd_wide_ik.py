"""IK stages inside the crowd's wide path (skeletal.playback.wide: two-bone over 16 lanes at once,
every other case per instance inside the group) against the per-instance path (``wide=False``):
the same poses and palettes within float32 rounding, for two-bone stages with every option, idle
instances (weight 0, no target), partial weights, the cases the lane-wide solver leaves to the
scalar one (end rotations, straight legs, a target at the hip), aim / CCD / FABRIK stages, a partial
last group and groups on other clips or crossfading (per instance)."""

from __future__ import annotations

import numpy as np
import pytest

from skeletal.anim import ik
from skeletal.demo import demo_asset
from skeletal.playback import Crowd
from skeletal.playback.wide import LANES

LEGS = {"left": ("left_thigh", "left_shin", "left_foot"), "right": ("right_thigh", "right_shin", "right_foot")}
ATOL = 2e-5  # float32 world rows, computed in another order in the lanes


@pytest.fixture(scope="module")
def asset():
    return demo_asset()


def _pair(asset, count, clip="walk"):
    offsets = np.linspace(0, asset.clip(clip).duration, count, endpoint=False)
    crowds = Crowd(asset, count), Crowd(asset, count, wide=False)
    for crowd in crowds:
        crowd.play(clip, offsets=offsets, speeds=np.linspace(0.7, 1.3, count))
    return crowds


def _legs(crowds, count, seed=3, near=False, **options):
    """Two-bone stages on both legs of each crowd, the same random targets: around the model origin
    (some out of reach), or with ``near`` around the rest feet, lifted (reachable, the knees bent:
    where the solution does not hang on float32 rounding, as it does for a soft stage's nearly
    straight leg)."""
    from skeletal.anim.pose import world_matrices

    rng = np.random.default_rng(seed)
    rest = world_matrices(crowds[0].asset.rig.parents, crowds[0].asset.rig.rest)[:, :3, 3]
    handles = []
    for side, chain in LEGS.items():
        if near:
            hip, knee, foot = (rest[crowds[0].asset.rig.find(n)] for n in chain)
            leg = np.linalg.norm(knee - hip) + np.linalg.norm(foot - knee)
            targets = foot + rng.normal(size=(count, 3)) * 0.05 * leg + (0.0, 0.2 * leg, 0.0)
        else:
            targets = rng.normal(size=(count, 3)) * 0.1 + (0.1 if side == "left" else -0.1, 0.12, 0.1)
        handles.append([crowd.add_ik(side, "two_bone", chain, target=targets, pole=(0.0, 0.5, 1.0), **options)
                        for crowd in crowds])
    return handles


def _check(wide, narrow, steps=4):
    for _ in range(steps):
        wide.update(1 / 30)
        narrow.update(1 / 30)
    assert wide.frame.wide is not None, "the wide kernel did not run"
    np.testing.assert_allclose(wide.palettes, narrow.palettes, atol=ATOL)
    np.testing.assert_allclose(wide.local_pose, narrow.local_pose, atol=ATOL)


def _chains(crowd, asset):
    """Model-space positions (count, 2 legs, 3 joints, 3) of the leg chains, from the local poses."""
    from skeletal.anim.pose import world_matrices

    world = world_matrices(asset.rig.parents, crowd.local_pose.astype(np.float64))
    rows = [[asset.rig.find(n) for n in LEGS[s]] for s in LEGS]
    return world[:, rows][..., :3, 3]


def test_two_bone_legs_wide_match_per_instance_and_reach(asset):
    count = 3 * LANES + 5  # three wide groups and a partial one (per instance)
    wide, narrow = _pair(asset, count)
    handles = _legs((wide, narrow), count)
    _check(wide, narrow)
    assert wide.frame.wide_arrays["done"].all(), "every full group went wide, IK included"
    chains = _chains(wide, asset)
    targets = np.stack([h[0].target for h in handles], axis=1)
    length = np.linalg.norm(chains[:, :, 1] - chains[:, :, 0], axis=-1) + np.linalg.norm(
        chains[:, :, 2] - chains[:, :, 1], axis=-1)
    reachable = np.linalg.norm(targets - chains[:, :, 0], axis=-1) < length - 1e-3
    assert reachable.sum() > count // 2
    miss = np.linalg.norm(chains[:, :, 2] - targets, axis=-1)
    assert miss[reachable].max() < 1e-4  # reachable targets are reached, the others are not


@pytest.mark.parametrize("options", [dict(soft=0.05), dict(mid_axis=(1.0, 0.0, 0.0)), dict(soft=0.02, mid_axis=(1.0, 0.0, 0.0))])
def test_two_bone_options_wide_match_per_instance(asset, options):
    count = 2 * LANES
    wide, narrow = _pair(asset, count)
    _legs((wide, narrow), count, seed=4, near=True, **options)
    _check(wide, narrow)


def test_idle_partial_and_scalar_lanes_in_one_group(asset):
    """One group mixes every lane kind: idle (weight 0, NaN target), partial weight, no pole, an end
    rotation and a target out of reach: the lane-wide solver and its per-instance fallback side by side."""
    count = 2 * LANES + 3
    wide, narrow = _pair(asset, count)
    (left, left_n), (right, right_n) = _legs((wide, narrow), count, seed=5)
    weights = np.ones(count)
    weights[[0, 5, 17]] = 0.0
    weights[[1, 6, 18, 33]] = (0.3, 0.5, 0.75, 0.9)
    for h in (left, left_n):
        h.weight = weights
        target = h.target
        target[2] = np.nan
        target[7] = (0.0, 5.0, 0.0)  # out of reach: the leg straightens
        h.target = target
        pole = h.pole
        pole[[3, 8]] = np.nan
        h.pole = pole
        rotation = np.full((count, 4), np.nan)
        rotation[[4, 9, 20]] = (0.0, 0.0, np.sin(0.2), np.cos(0.2))
        h.end_rotation = rotation
    for h in (right, right_n):
        h.weight = weights[::-1].copy()
    _check(wide, narrow, steps=3)
    # weight 0 / no target leaves the pose as the clip made it: the same as without IK
    plain = Crowd(asset, count)
    plain.play("walk", offsets=np.linspace(0, asset.clip("walk").duration, count, endpoint=False),
               speeds=np.linspace(0.7, 1.3, count))
    for _ in range(3):
        plain.update(1 / 30)
    chain = [asset.rig.find(n) for n in LEGS["left"]]
    np.testing.assert_array_equal(wide.local_pose[[0, 2, 5, 17]][:, chain], plain.local_pose[[0, 2, 5, 17]][:, chain])


def test_target_at_the_hip_and_straight_input_go_per_instance(asset):
    count = LANES
    wide, narrow = _pair(asset, count, clip="idle")
    (left, left_n), _ = _legs((wide, narrow), count, seed=6)
    for crowd in (wide, narrow):
        crowd.update(1 / 30)
    hip_row = asset.rig.find("left_thigh")
    from skeletal.anim.pose import world_matrices

    hips = world_matrices(asset.rig.parents, narrow.local_pose.astype(np.float64))[:, hip_row, :3, 3]
    for h in (left, left_n):
        target = h.target
        target[:4] = hips[:4]  # a target at the root: the current end direction is kept
        target[4:8] = (0.0, 9.0, 0.0)  # far: a straight leg, which the next frame reads as its input
        target[8:12] = hips[8:12] + (1e-5, 0.0, 0.0)  # next to the hip: the knee folds nearly a half turn
        h.target = target
    _check(wide, narrow, steps=3)


def test_aim_ccd_fabrik_stages_in_wide_groups(asset):
    count = 2 * LANES + 7
    wide, narrow = _pair(asset, count)
    _legs((wide, narrow), count, seed=7, near=True, soft=0.02)
    rng = np.random.default_rng(8)
    look = rng.normal(size=(count, 3)) * 0.3 + (0.0, 1.6, 2.0)
    hand = rng.normal(size=(count, 3)) * 0.1 + (0.4, 1.2, 0.3)
    for crowd in (wide, narrow):
        aim = crowd.add_ik("look", "aim", ("neck", "head"), target=look, up_vector=(0, 1, 0),
                           limits=ik.AimLimit(0.6, 0.4, 0.2))
        aim.weight = np.linspace(0, 1, count)
        crowd.add_ik("arm", "ccd", ("left_upper_arm", "left_forearm", "left_hand"), target=hand, iterations=8)
        crowd.add_ik("other_arm", "fabrik", ("right_upper_arm", "right_forearm", "right_hand"),
                     target=hand * (-1.0, 1.0, 1.0), iterations=8)
    _check(wide, narrow)


def test_mixed_clips_and_crossfades_with_ik(asset):
    count = 3 * LANES
    wide, narrow = Crowd(asset, count), Crowd(asset, count, wide=False)
    clips = np.array(["walk", "run", "idle"])
    offsets = np.linspace(0, 0.9, count)
    for crowd in (wide, narrow):
        for k, clip in enumerate(clips):  # group k plays clip k, but two instances of group 1 play walk
            chosen = np.arange(k * LANES, (k + 1) * LANES)
            crowd.play(clip, offsets=offsets[chosen], instances=chosen)
        crowd.play("walk", instances=[LANES + 2, LANES + 9])
    _legs((wide, narrow), count, seed=9)
    _check(wide, narrow, steps=3)
    for crowd in (wide, narrow):
        crowd.crossfade("wave", 0.2, instances=[3])  # group 0 goes per instance while it fades
    _check(wide, narrow, steps=3)
    _check(wide, narrow, steps=10)  # faded: group 0 wide again


@pytest.mark.parametrize("soft, mid_axis", [(0.0, np.nan), (0.03, np.nan), (0.0, 1.0), (0.02, 1.0)])
def test_lane_two_bone_equals_the_scalar_solver_on_the_same_rows(asset, soft, mid_axis):
    """:func:`_two_bone_lanes` against :func:`skeletal.ik.two_bone_one` given the very same float32
    local and world rows: the same rotations to float32 rounding (the crowd tests above compare paths
    whose world rows differ by float32 rounding, which a nearly straight leg amplifies)."""
    from skeletal.playback import wide as W
    from skeletal.anim.pose import world_subset_one

    rng = np.random.default_rng(11)
    parents = asset.rig.parents.astype(np.int64)
    n = len(parents)
    crowd = Crowd(asset, LANES, wide=False)
    crowd.play("walk", offsets=np.linspace(0, 0.9, LANES))
    crowd.update(1 / 30)
    pose = crowd.local_pose.copy()  # (LANES, N, 10) float32
    world = np.zeros((LANES, n, 3, 4), np.float32)
    for lane in range(LANES):
        world_subset_one(parents, np.arange(n), pose[lane], world[lane])
    a, b, c = (asset.rig.find(j) for j in LEGS["left"])
    hip = world[:, a, :, 3].astype(np.float64)
    targets = hip + rng.normal(size=(LANES, 3)) * 0.15 + (0.0, -0.3, 0.1)
    targets[0] = hip[0]  # a target at the root: left to the per-instance solver
    poles = np.tile((0.0, 0.5, 1.0), (LANES, 1))
    poles[3] = np.nan
    axis = (mid_axis, 0.0, 0.0)
    lw = np.ascontiguousarray(pose.reshape(LANES, -1).T).reshape(-1)
    ww = np.ascontiguousarray(world.reshape(LANES, -1).T).reshape(-1)
    iw = np.zeros(W.T_ROWS * LANES)
    iw.reshape(W.T_ROWS, LANES)[W.T_TARGET:W.T_TARGET + 3] = targets.T
    iw.reshape(W.T_ROWS, LANES)[W.T_POLE:W.T_POLE + 3] = poles.T
    iw.reshape(W.T_ROWS, LANES)[W.T_WEIGHT] = 1.0
    iw.reshape(W.T_ROWS, LANES)[W.T_MODE] = 1.0
    length = np.linalg.norm(world[:, b, :, 3] - world[:, a, :, 3], axis=-1) + np.linalg.norm(
        world[:, c, :, 3] - world[:, b, :, 3], axis=-1)
    iw.reshape(W.T_ROWS, LANES)[W.T_REACH] = [ik.soft_distance(d, L, soft) for d, L in
                                              zip(np.linalg.norm(targets - hip, axis=-1), length)]
    W._two_bone_lanes((a, b, c, parents[a], parents[b]), soft, axis, np.uint64(LANES), lw, ww, iw)
    np.testing.assert_array_equal(iw.reshape(W.T_ROWS, LANES)[W.T_BAD], np.arange(LANES) == 0)
    got = lw.reshape(n, 10, LANES).transpose(2, 0, 1)
    np.testing.assert_array_equal(got[0], pose[0])  # its rows as they were
    for lane in range(1, LANES):
        want = pose[lane].copy()
        ik.two_bone_one(want, world[lane], parents, a, b, c, tuple(targets[lane]), tuple(poles[lane]), 1.0, soft,
                        axis, (np.nan,) * 4)
        np.testing.assert_allclose(got[lane], want, atol=2e-7)


def test_all_idle_stages_leave_the_crowd_as_without_ik(asset):
    """Every lane idle (weight 0, then no targets): the stages still build the rows the crowd leaves to
    them (the toes below the feet), so the palettes equal a crowd's without IK, wide and per instance."""
    count = 2 * LANES + 1
    wide, narrow = _pair(asset, count)
    plain, _ = _pair(asset, count)
    handles = _legs((wide, narrow), count, seed=12)
    for pair in handles:
        for h in pair:
            h.weight = 0.0
    for _ in range(2):
        for crowd in (wide, narrow, plain):
            crowd.update(1 / 30)
    np.testing.assert_allclose(wide.palettes, plain.palettes, atol=1e-6)
    np.testing.assert_allclose(narrow.palettes, plain.palettes, atol=2e-5)
    for pair in handles:
        for h in pair:
            h.weight = 1.0
            h.target = None
    for _ in range(2):
        for crowd in (wide, narrow, plain):
            crowd.update(1 / 30)
    np.testing.assert_allclose(wide.palettes, plain.palettes, atol=1e-6)
    np.testing.assert_array_equal(wide.local_pose, plain.local_pose)
