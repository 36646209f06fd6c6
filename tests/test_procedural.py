"""Procedural animation: grounds, contact phases, foot placement, look-at, springs, jiggle chains.

Fixtures are generated: the built-in demo character (skeletal.demo) walks; small rigs are made by
code. Fox.glb (../shared) is only used for the tail-finding case, skipped without it.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

import skeletal
from skeletal.errors import SkeletalError
from skeletal.playback.contacts import detect_contacts, find_legs
from skeletal.playback.ground import (FlatGround, FunctionGround, HeightField, SlopeGround, TerrainGround, as_ground,
                                      parse_ground)
from skeletal.playback.procedural import Procedural, find_head_chain, placement_matrices
from skeletal.playback.springs import JiggleChains, SmoothedValue, critical_spring, find_tail_chains
from skeletal.anim.pose import world_matrices
from skeletal.anim.rig import Rig
from fixtures.shared_assets import ASSETS

SHARED = str(ASSETS)
DT = 1.0 / 60.0




# -- grounds ------------------------------------------------------------------------------------


def test_slope_heights_and_normals_are_analytic():
    g = SlopeGround(angle=20.0, direction=90.0, height=0.5)  # uphill toward +X
    x = np.array([-1.0, 0.0, 2.0])
    assert np.allclose(g.height(x, np.zeros(3)), 0.5 + math.tan(math.radians(20)) * x)
    n = g.normal(x, np.zeros(3))
    assert np.allclose(n, [-math.sin(math.radians(20)), math.cos(math.radians(20)), 0.0])


def test_terrain_normals_match_finite_differences():
    g = TerrainGround(amplitude=0.3, wavelength=2.0, seed=3)
    rng = np.random.default_rng(0)
    x, z = rng.uniform(-5, 5, (2, 50))
    numeric = FunctionGround(g.height, eps=1e-5).normal(x, z)
    assert np.allclose(g.normal(x, z), numeric, atol=1e-6)
    assert np.all(np.abs(g.height(x, z)) <= 0.3 + 1e-12)


def test_terrain_sines_in_lanes_match_the_library_and_the_python_query():
    # the kernel's terrain query takes sines and cosines of all legs' wave arguments in SIMD lanes (a
    # polynomial, libm past SINCOS_LIMIT): within an ulp of math.sin / math.cos, and the lanes' sums give
    # ground_at's bits and the Python query's values
    from numba import njit

    from skeletal.playback.ground import SINCOS_LIMIT, ground_at, sincos, sincos_lanes, terrain_sum

    @njit(cache=False)
    def lanes(args):
        s, c = np.empty_like(args), np.empty_like(args)
        sincos_lanes(args, s, c, args.shape[0])
        return s, c

    @njit(cache=False)
    def query(kind, params, grid, xs, zs):
        w = int(params[1])
        out, one = np.empty((xs.shape[0], 4)), np.empty((xs.shape[0], 4))
        args = np.empty(xs.shape[0] * w)
        for p in range(xs.shape[0]):
            for i in range(w):
                args[p * w + i] = xs[p] * params[2 + i] + zs[p] * params[2 + w + i] + params[2 + 2 * w + i]
        s, c = np.empty_like(args), np.empty_like(args)
        sincos_lanes(args, s, c, args.shape[0])
        for p in range(xs.shape[0]):
            out[p] = terrain_sum(params, s, c, p * w)
            one[p] = ground_at(kind, params, grid, xs[p], zs[p])
        return out, one, sincos(xs[0])

    rng = np.random.default_rng(5)
    args = np.concatenate([rng.uniform(-60.0, 60.0, 4001), rng.uniform(-SINCOS_LIMIT, SINCOS_LIMIT, 1000),
                           [0.0, math.pi / 2, -math.pi, 3 * SINCOS_LIMIT, -1e9, np.inf, np.nan]])
    s, c = lanes(args)
    ok = np.isfinite(args)
    assert np.abs(s[ok] - np.sin(args[ok])).max() <= 2.3e-16
    assert np.abs(c[ok] - np.cos(args[ok])).max() <= 2.3e-16
    assert s[-3] == math.sin(-1e9) and c[-4] == math.cos(3 * SINCOS_LIMIT)  # libm past the limit
    assert np.isnan(s[-2]) and np.isnan(c[-1])
    g = TerrainGround(amplitude=0.3, wavelength=2.0, seed=3, octaves=3)
    x, z = rng.uniform(-20.0, 20.0, (2, 33))
    out, one, sc = query(*g.kernel_args(), x, z)
    assert np.array_equal(out, one)  # the lanes' sums: ground_at's bits
    h, n = g.height_normal(x, z)
    assert np.abs(out[:, 0] - h).max() < 1e-15 and np.abs(out[:, 1:] - n).max() < 1e-15
    assert np.allclose(sc, (math.sin(x[0]), math.cos(x[0])), rtol=0, atol=2.3e-16)  # the scalar form


def test_height_field_reproduces_a_plane_and_clamps():
    plane = SlopeGround(angle=15.0, direction=30.0)
    field = HeightField.sample(plane, size=4.0, spacing=0.25)
    rng = np.random.default_rng(1)
    x, z = rng.uniform(-1.9, 1.9, (2, 40))
    assert np.allclose(field.height(x, z), plane.height(x, z), atol=1e-12)
    assert np.allclose(field.normal(x, z), plane.normal(x, z), atol=1e-12)
    assert np.isfinite(field.height(100.0, -100.0))  # outside: clamped to the edge
    bilinear = HeightField([[0.0, 1.0], [2.0, 3.0]], spacing=2.0, origin=(0.0, 0.0))
    assert float(bilinear.height(1.0, 1.0)) == pytest.approx(1.5)


def test_ground_specs_and_bad_input():
    assert isinstance(parse_ground("terrain:amplitude=0.2,seed=4"), TerrainGround)
    assert isinstance(as_ground(0.3), FlatGround)
    assert isinstance(as_ground(lambda x, z: 0.1 * x), FunctionGround)
    for bad in ("hills", "slope:angle=abc", "terrain:amplitude=0.2,size=3", "slope:angle=89", "terrain:wavelength=0"):
        with pytest.raises(SkeletalError):
            parse_ground(bad)
    with pytest.raises(SkeletalError):
        HeightField(np.zeros(5))


# -- legs and contact phases ---------------------------------------------------------------------


@pytest.mark.parametrize("names", [
    ["mixamorig:Hips", "mixamorig:LeftUpLeg", "mixamorig:LeftLeg", "mixamorig:LeftFoot", "mixamorig:LeftToeBase",
     "mixamorig:RightUpLeg", "mixamorig:RightLeg", "mixamorig:RightFoot", "mixamorig:RightToeBase"],
    ["Hips", "LeftUpLeg", "LeftLeg", "LeftFoot", "LeftToeBase", "RightUpLeg", "RightLeg", "RightFoot", "RightToeBase"],
    ["b_Hip", "b_LeftLeg01", "b_LeftLeg02", "b_LeftFoot01", "b_LeftFoot02", "b_RightLeg01", "b_RightLeg02",
     "b_RightFoot01", "b_RightFoot02"],
    ["pelvis", "thigh_l", "calf_l", "foot_l", "ball_l", "thigh_r", "calf_r", "foot_r", "ball_r"],
])
def test_find_legs_by_common_names(names):
    rig = Rig.from_parents(["Root"] + names, [-1, 0, 1, 2, 3, 4, 1, 6, 7, 8])
    left, right = find_legs(rig)
    assert (rig.names[left.thigh], rig.names[left.knee], rig.names[left.foot], rig.names[left.toe]) == tuple(names[1:5])
    assert (rig.names[right.thigh], rig.names[right.foot]) == (names[5], names[7])


def test_find_legs_override_and_error():
    rig = Rig.from_parents(["root", "a", "b", "c", "d", "e", "f"], [-1, 0, 1, 2, 0, 4, 5])
    with pytest.raises(SkeletalError, match="legs"):
        find_legs(rig)
    left, right = find_legs(rig, {"left": ("a", "b", "c"), "right": ("d", "e", "f")})
    assert (left.foot, right.foot) == (rig.find("c"), rig.find("f"))
    with pytest.raises(SkeletalError):
        find_legs(rig, {"left": ("c", "b", "a"), "right": ("d", "e", "f")})


def test_contact_phases_of_the_demo_walk(demo):
    legs = find_legs(demo.rig)
    phases = detect_contacts(demo, "walk", legs)
    for leg in range(2):
        intervals = phases.intervals(leg)
        assert len(intervals) == 1  # one stance per foot per cycle
        stance = phases.contact[:, leg].mean()
        assert 0.4 < stance < 0.7
    # the two feet alternate: each is planted while the other swings at some point, and at least one
    # foot is down at every frame of a walk (double support, no flight)
    c = phases.contact
    assert (c[:, 0] & ~c[:, 1]).any() and (c[:, 1] & ~c[:, 0]).any()
    assert (c[:, 0] | c[:, 1]).all()
    # the demo walks in place at about 1.1 m/s: the ground passes under the planted feet backward (-Z)
    assert phases.ground_velocity[:, 1].mean() < -0.8
    assert 0.05 < phases.ankle_height.mean() < 0.12
    # weights are smooth ramps of the flags
    assert np.all((phases.weight >= 0) & (phases.weight <= 1))
    assert np.all(phases.weight[phases.contact] > 0.4)
    # the run has a flight phase; idle stands on both feet throughout
    run = detect_contacts(demo, "run", legs)
    assert [len(run.intervals(i)) for i in range(2)] == [1, 1]
    assert not (run.contact[:, 0] | run.contact[:, 1]).all()
    idle = detect_contacts(demo, "idle", legs)
    assert idle.contact.all()


# -- springs ------------------------------------------------------------------------------------


def test_critical_spring_no_overshoot_converges_and_is_frame_rate_independent():
    omega = 8.0
    x, v = np.array([0.0]), np.array([0.0])
    trace = []
    for _ in range(300):
        critical_spring(x, v, np.array([1.0]), omega, DT)
        trace.append(x[0])
    trace = np.array(trace)
    assert np.all(np.diff(trace) >= -1e-15) and trace.max() <= 1.0  # monotone, never past the target
    assert abs(trace[-1] - 1.0) < 1e-6
    # analytic: x(t) = 1 - (1 + w t) e^{-w t}
    t = DT * np.arange(1, 301)
    assert np.allclose(trace, 1 - (1 + omega * t) * np.exp(-omega * t), atol=1e-12)
    # one step of dt equals two of dt/2 (from any state)
    a, va = np.array([0.3, -2.0]), np.array([1.5, 0.7])
    b, vb = a.copy(), va.copy()
    target = np.array([1.0, 4.0])
    critical_spring(a, va, target, omega, 0.1)
    critical_spring(b, vb, target, omega, 0.05)
    critical_spring(b, vb, target, omega, 0.05)
    assert np.allclose(a, b, atol=1e-12) and np.allclose(va, vb, atol=1e-12)
    s = SmoothedValue([0.0, 0.0, 0.0], smooth_time=0.2)
    assert np.allclose(s.update([1.0, 2.0, 3.0], 5.0), [1.0, 2.0, 3.0], atol=1e-6)


def _tail_rig():
    """root -> base -> t1 -> t2 -> t3, a tail 0.2 m per bone pointing back (-Z), rest = identity."""
    rest = np.zeros((5, 10))
    rest[:, 6] = 1.0
    rest[:, 7:] = 1.0
    rest[1, :3] = (0.0, 1.0, 0.0)
    rest[2:, :3] = (0.0, 0.0, -0.2)
    return Rig.from_parents(["root", "hips", "tail1", "tail2", "tail3"], [-1, 0, 1, 2, 3], rest)


def test_jiggle_keeps_lengths_and_settles():
    rig = _tail_rig()
    chains = JiggleChains(rig, 2, [["tail1", "tail2", "tail3"]], stiffness=40.0, damping=4.0)
    pose = np.repeat(rig.rest[None], 2, axis=0)
    base = pose.copy()
    lengths = []
    for frame in range(600):
        pose[...] = base
        # instance 0 swings its hips sideways for the first second, then stands still
        pose[0, 1, 0] = 0.3 * math.sin(frame * DT * 9.0) if frame < 60 else 0.0
        world = world_matrices(rig.parents, pose)
        chains.apply(world, pose, DT)
        out = world_matrices(rig.parents, pose)[:, :, :3, 3]
        lengths.append(np.linalg.norm(np.diff(out[:, 2:], axis=1), axis=-1))
        assert np.all(np.isfinite(pose))
    lengths = np.array(lengths)
    assert np.allclose(lengths, 0.2, atol=1e-9)  # bone lengths kept exactly (joints 2..4)
    pos = chains.positions
    tip_len = np.linalg.norm(pos[:, 2] - pos[:, 1], axis=-1)
    assert np.allclose(tip_len, 0.2, atol=1e-9)
    # settled: no motion left, the tail sags under gravity (below the rest line), same for both
    assert np.abs(chains.velocities).max() < 1e-3
    assert np.all(pos[:, -1, 1] < 1.0 - 0.01)
    assert np.allclose(pos[0], pos[1], atol=1e-3)
    # without gravity a still character's tail stays exactly where the animation puts it
    still = JiggleChains(rig, 1, [["tail1", "tail2", "tail3"]], gravity=(0.0, 0.0, 0.0))
    pose = rig.rest[None].copy()
    for _ in range(30):
        pose[...] = rig.rest
        still.apply(world_matrices(rig.parents, pose), pose, DT)
    assert np.allclose(pose, rig.rest[None], atol=1e-12)


def test_jiggle_settles_from_a_kick_without_gravity():
    rig = _tail_rig()
    chains = JiggleChains(rig, 1, [["tail1", "tail2", "tail3"]], stiffness=50.0, damping=5.0, gravity=(0, 0, 0))
    pose = rig.rest[None].copy()
    chains.apply(world_matrices(rig.parents, pose), pose, DT)
    chains.velocities[0, :, 0] = 3.0  # a kick sideways
    for _ in range(900):
        pose[...] = rig.rest
        chains.apply(world_matrices(rig.parents, pose), pose, DT)
    rest_world = world_matrices(rig.parents, rig.rest)[:, :3, 3]
    assert np.allclose(chains.positions[0, :2], rest_world[3:5], atol=1e-4)
    assert np.allclose(pose[0], rig.rest, atol=1e-4)


def test_fox_tail_chain_is_found_by_name():
    path = os.path.join(SHARED, "Fox.glb")
    if not os.path.exists(path):
        pytest.skip(f"{path} is not present (the shared test assets; set SKELETAL_ASSETS)")
    asset = skeletal.load(path)
    chains = find_tail_chains(asset.rig)
    assert [[asset.rig.names[j] for j in c] for c in chains] == [["b_Tail01", "b_Tail02", "b_Tail03"]]
    player = skeletal.Player(asset)
    player.play(0)
    proc = Procedural(player)
    proc.jiggle()
    proc.place((0.0, 0.0, 0.0), 0.0)
    for frame in range(30):
        proc.place((0.0, 0.0, 0.05 * frame), 0.0)  # running forward swings the tail
        player.update(DT)
    assert np.all(np.isfinite(player.world))


# -- foot placement -----------------------------------------------------------------------------


def _walk(asset, ground, frames=90, weight=1.0, place=(0.0, 0.0, 0.0), **options):
    """Play the demo walk with foot placement; returns per-frame (world, reference world, stage)."""
    player = skeletal.Player(asset)
    player.play("walk")
    ref = skeletal.Player(asset)
    ref.play("walk")
    proc = Procedural(player)
    stage = proc.foot_placement(ground, weight=weight, **options)
    g = stage.ground
    pos = np.array(place, np.float64)
    pos[1] = float(g.height(pos[0], pos[2]))
    proc.place(pos, 0.0)
    out = []
    for _ in range(frames):
        player.update(DT)
        ref.update(DT)
        out.append((player.world.copy(), ref.world.copy(), stage.contact[0].copy(), stage.pelvis_offset[0],
                    player.local_pose.copy(), ref.local_pose.copy()))
    return out, stage, pos


def _contact_errors(frames, stage, pos):
    """Per planted frame and foot: the foot joint's height over the ground minus where it should be
    (its animated lift plus the ankle height along the normal), and the angle (degrees) between the
    foot's up axis and the ground normal."""
    g = stage.ground
    errors, angles = [], []
    for world, ref, contact, _, _, _ in frames:
        for l, foot in enumerate(stage.feet):
            if contact[l] < 0.999:
                continue
            p = world[foot, :3, 3] + pos
            h = float(g.height(p[0], p[2]))
            n = g.normal(p[0], p[2])
            lift = ref[foot, 1, 3] - stage.floor - stage.ankle[l]  # the animated heel lift over the floor
            errors.append(p[1] - h - stage.ankle[l] / n[1] - lift)
            r_new = world[foot, :3, :3] / np.linalg.norm(world[foot, :3, :3], axis=0)
            r_old = ref[foot, :3, :3] / np.linalg.norm(ref[foot, :3, :3], axis=0)
            up = r_new @ r_old.T @ np.array([0.0, 1.0, 0.0])
            angles.append(math.degrees(math.acos(min(1.0, float(up @ n)))))
    return np.abs(np.array(errors)), np.array(angles)


@pytest.mark.parametrize("spec", ["slope:angle=10,direction=90", "slope:angle=12", "terrain:amplitude=0.12,wavelength=2.5,seed=2"])
def test_feet_touch_the_ground_during_contact(demo, spec):
    frames, stage, pos = _walk(demo, spec, frames=80)
    errors, angles = _contact_errors(frames, stage, pos)
    assert len(errors) > 40
    assert errors.max() < 2e-3  # within 2 mm of the ground (plus the animated heel lift)
    assert angles.max() < 2.0  # the foot's up axis follows the ground normal
    assert all(np.all(np.isfinite(f[0])) for f in frames)


def test_callable_ground_matches_the_built_in_kind(demo):
    # a Python callable is queried between two phases of the kernel; the built-in kinds inside it
    slope = SlopeGround(angle=9.0, direction=30.0, height=0.05)
    terrain = TerrainGround(amplitude=0.1, wavelength=2.0, seed=3)
    field = HeightField.sample(terrain, size=6.0, spacing=0.05)
    for ground in (slope, terrain, field):
        built_in, _, _ = _walk(demo, ground, frames=30, place=(0.2, 0.0, 0.4))
        python, _, _ = _walk(demo, FunctionGround(ground.height, eps=1e-6), frames=30, place=(0.2, 0.0, 0.4))
        for a, b in zip(built_in, python):
            assert np.abs(a[0] - b[0]).max() < 1e-5  # central-difference normals vs analytic ones


def test_pelvis_lowers_on_a_side_slope(demo):
    frames, stage, _ = _walk(demo, "slope:angle=12,direction=90", frames=60)
    pelvis = np.array([f[3] for f in frames])
    # across a 12 degree slope the lower foot is ~2 cm below the root's ground: the pelvis drops by it
    drop = math.tan(math.radians(12)) * 0.1
    assert np.all(pelvis < -0.5 * drop)
    assert np.all(pelvis > -0.15)
    hips = demo.rig.find("hips")
    assert all(f[0][hips, 1, 3] < f[1][hips, 1, 3] for f in frames)


def test_flat_ground_at_the_floor_and_weight_zero_leave_the_pose(demo):
    # without the planted-foot lock (an in-place walk standing still slides its feet by design)
    frames, stage, _ = _walk(demo, "flat", frames=40, plant=False)
    for world, ref, *_ in frames:
        assert np.abs(world - ref).max() < 1e-6
    frames, stage, _ = _walk(demo, "terrain:amplitude=0.2", frames=20, weight=0.0)
    for world, ref, _, pelvis, pose, ref_pose in frames:
        assert np.array_equal(pose, ref_pose) and pelvis == 0.0
        assert np.abs(world - ref).max() < 1e-12


def test_mixer_batch_equals_players_and_crowd_runs(demo):
    spec = "terrain:amplitude=0.15,wavelength=3,seed=1"
    offsets = np.array([0.0, 0.3, 0.6])
    places = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 2.0], [-1.5, 0.0, 0.5]])
    g = as_ground(spec)
    places[:, 1] = g.height(places[:, 0], places[:, 2])
    mixer = skeletal.Mixer(demo, 3, events=False)
    mixer.play("walk", offset=offsets)
    proc = Procedural(mixer)
    proc.foot_placement(spec)
    proc.place(places, [0.0, 0.5, -1.0])
    crowd = skeletal.Crowd(demo, 3, keep_world=True)
    crowd.play("walk", offsets=offsets)
    cproc = Procedural(crowd)
    cproc.foot_placement(spec)
    cproc.place(places, [0.0, 0.5, -1.0])
    players = []
    for i in range(3):
        p = skeletal.Player(demo)
        p.play("walk", offset=offsets[i])
        pp = Procedural(p)
        pp.foot_placement(spec)
        pp.place(places[i], [0.0, 0.5, -1.0][i])
        players.append(p)
    for _ in range(30):
        mixer.update(DT)
        crowd.update(DT)
        for p in players:
            p.update(DT)
    for i, p in enumerate(players):
        assert np.allclose(mixer.world[i], p.world, atol=1e-9)
        assert np.allclose(crowd.world[i], p.world, atol=1e-3)  # float32, nlerp crowd
    assert np.abs(mixer.world - mixer.world[0:1]).max() > 1e-3  # the instances differ
    # the skin palettes (kept current inside the foot kernel) match the corrected world matrices
    for m in [mixer] + [p.mixer for p in players]:
        for skin, palette in zip(demo.skins, m.skin_palettes):
            assert np.allclose(palette, m.world[:, skin.joints] @ skin.inverse_bind, atol=1e-12)


def _mixer_on(asset, spec, count, frames):
    """A Mixer of ``count`` demo walkers (offset clocks, spread placements) with foot placement on
    ``spec``: yields the stage after each of ``frames`` updates."""
    mixer = skeletal.Mixer(asset, count, events=False)
    mixer.play("walk", offset=np.linspace(0.0, 0.9, count))
    proc = Procedural(mixer)
    stage = proc.foot_placement(spec)
    places = np.stack([np.linspace(-2.0, 2.0, count), np.zeros(count), np.linspace(1.0, -1.0, count)], axis=1)
    proc.place(places, np.linspace(-1.0, 1.0, count))
    for _ in range(frames):
        mixer.update(DT)
        yield mixer, stage


def test_terrain_queries_are_kept_only_at_the_same_point(demo):
    # a planted foot's target stays on its lock: the kernel keeps last frame's terrain query there; the
    # heights and normals always equal a fresh query at this frame's targets, also after the ground changes
    other = "terrain:amplitude=0.3,wavelength=1.5,seed=7"
    kept = 0
    previous = None
    for frame, (_, stage) in enumerate(_mixer_on(demo, "terrain:amplitude=0.15,wavelength=3,seed=1", 5, 60)):
        x, z = stage.targets[..., 0], stage.targets[..., 2]
        h, n = stage.ground.height_normal(x, z)
        np.testing.assert_allclose(stage.heights, h, rtol=0, atol=1e-12)
        np.testing.assert_allclose(stage.normals, n, rtol=0, atol=1e-12)
        if previous is not None:
            kept += int(np.sum((x == previous[0]) & (z == previous[1])))
        previous = (x.copy(), z.copy())
        if frame == 40:
            stage.ground = other  # from the next frame: the same locked points, another terrain
    assert kept > 60  # planted feet: most frames query their point again (kept), 5 walkers x 2 feet


def test_contact_weights_wrap_a_looping_clip_time(demo):
    # the kernel reads each leg's contact weight from the clip's table at the action's sample time; a
    # looping clip's time outside [0, duration) (set directly, not by the advance) wraps as Python's %
    # does, the frame pair too, and a time inside needs no wrapping (the same values either way)
    from skeletal.playback import kernels as K

    mixer = skeletal.Mixer(demo, 4, events=False)
    mixer.play("walk")
    proc = Procedural(mixer)
    stage = proc.foot_placement("flat")
    mixer.update(DT)
    tables, frames, fps, durations, looping, _ = stage._tables()
    c = int(mixer.slot_clip[0])
    d, f = durations[c], int(frames[c])
    assert looping[c] and f > 2
    # before the start, a loop and a quarter on, three loops on, and the middle of the last frame pair
    # (from the last frame back to the first)
    times = np.array([-0.3 * d, d + 0.25 * d, 3.0 * d + 1e-3, d - 0.5 / fps[c]])
    mixer.fs[:, 0, K.F_SAMPLE] = times
    job, serial, _ = stage.last.calls
    serial(job, 1, 1, None)  # phase 1: contact weights and the targets' (x, z)
    for b, t in enumerate(times):
        u = (t % d) * fps[c]
        i0 = int(math.floor(u)) % f
        a = u - math.floor(u)
        expected = tables[c, i0] * (1.0 - a) + tables[c, (i0 + 1) % f] * a
        np.testing.assert_allclose(stage.contact[b], expected, rtol=0, atol=1e-15)
    assert np.ptp(stage.contact[:, 0]) > 0.0  # (the four times do land on different weights)
    assert np.any(tables[c, f - 1] != tables[c, 0])  # (the last pair's weight is not either end's)


def test_pelvis_moves_the_legs_it_does_not_solve(demo):
    # the kernel translates a leg's rows and palettes with the pelvis only where its IK does not rebuild
    # them (weight <= 0); a negative weight moves the pelvis the other way without IK: world rows and
    # palettes still match the pose
    mixer = skeletal.Mixer(demo, 3, events=False)
    mixer.play("walk", offset=[0.0, 0.3, 0.6])
    proc = Procedural(mixer)
    stage = proc.foot_placement("slope:angle=12", weight=[1.0, -0.5, 0.5])
    for _ in range(20):
        mixer.update(DT)
    assert np.all(stage.pelvis_offset[[0, 1]] != 0.0)
    world = world_matrices(demo.rig.parents, mixer.local_pose)
    assert np.abs(mixer.world - world).max() < 1e-12
    for skin, palette in zip(demo.skins, mixer.skin_palettes):
        assert np.allclose(palette, mixer.world[:, skin.joints] @ skin.inverse_bind, atol=1e-12)


def test_parallel_foot_placement_equals_the_serial_twin(demo, monkeypatch):
    # more than a few characters on more than one thread: the stage runs in parallel over ranges of
    # instances (as the playback update before it); on one thread, its serial twin. The choice is made
    # per frame, so a change of the thread count between frames switches kernels
    import numba

    import skeletal._threads as threads_module
    import skeletal.playback.procedural as procedural

    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("numba has one thread here")
    monkeypatch.setattr(threads_module, "_NO_CAP", True)  # no cap from other processes' load: 2 threads
    # (one thread would run the update and the stage in one call: test_foot_frame_in_one_call)
    monkeypatch.setattr(procedural.FootFrame, "fits", staticmethod(lambda mixer: False))
    spec = "terrain:amplitude=0.15,wavelength=3,seed=1"
    threads = numba.get_num_threads()
    calls = {"parallel": 0, "serial": 0}

    def counted(stage):
        job, serial, parallel = stage.last.calls
        if callable(parallel) and not getattr(parallel, "counted", False):
            def par(*args):
                calls["parallel"] += 1
                return parallel(*args)
            par.counted = True
            stage.last.calls = (job, serial, par)
        if callable(serial) and not getattr(serial, "counted", False):
            def ser(*args):
                calls["serial"] += 1
                return serial(*args)
            ser.counted = True
            stage.last.calls = (job, ser, stage.last.calls[2])

    try:
        numba.set_num_threads(1)
        serial = [m.world.copy() for m, _ in _mixer_on(demo, spec, 6, 20)]
        numba.set_num_threads(2)
        assert procedural._foot_chunks(6, 2) == 2 and procedural._foot_chunks(6, 1) == 1
        parallel = []
        for frame, (m, stage) in enumerate(_mixer_on(demo, spec, 6, 20)):
            parallel.append(m.world.copy())
            counted(stage)
            if frame == 9:
                assert calls == {"parallel": 9, "serial": 0}  # frames 1..9 counted
                numba.set_num_threads(1)  # the next frames: the serial twin
            counted(stage)
    finally:
        numba.set_num_threads(threads)
    # frame 10 made the serial twin's entry point (counted from frame 11 on)
    assert calls["parallel"] == 9 and calls["serial"] == 9
    for a, b in zip(serial, parallel):
        assert np.abs(a - b).max() < 1e-12


def test_foot_frame_in_one_call(demo, monkeypatch):
    # a Mixer without events whose only stage is foot placement, on one thread: after the first (general)
    # frame each update runs the clocks and blend then the stage in one compiled call (footframe.py), the
    # same bits as the update then the stage through Python; weights 0, partial and 1; on two threads one
    # parallel region (each range's update then its foot placement), the same bits again
    import numba

    import skeletal._threads as threads_module
    import skeletal.playback.footframe as footframe

    count = 7
    weight = np.tile([1.0, 0.0, 0.6], count)[:count]

    def make():
        mixer = skeletal.Mixer(demo, count, events=False)
        mixer.play("walk", offset=np.linspace(0.0, 0.9, count))
        proc = Procedural(mixer)
        stage = proc.foot_placement("terrain:amplitude=0.2,wavelength=3,seed=4", weight=weight)
        proc.place(np.stack([np.linspace(-2, 2, count), np.zeros(count), np.linspace(1, -1, count)], 1), 0.3)
        return mixer, proc, stage

    ran = []
    run = footframe.FootFrame.run
    monkeypatch.setattr(footframe.FootFrame, "run", lambda self, dt: ran.append(run(self, dt)) or ran[-1])
    monkeypatch.setattr(threads_module, "_NO_CAP", True)
    threads = numba.get_num_threads()
    (fast, fproc, fstage), (slow, sproc, sstage) = make(), make()
    try:
        numba.set_num_threads(1)
        for frame in range(40):
            if frame == 30 and threads > 1:
                numba.set_num_threads(2)  # one parallel call: the stage's kernel runs the update's ranges
            slow.update(DT)
            sproc._plan.one_call = None  # (this one: the update, then the stage)
            fast.update(DT)
            for a, b in ((fast.local_pose, slow.local_pose), (fast.world, slow.world), (fast.palettes, slow.palettes),
                         (fstage.targets, sstage.targets), (fstage.pelvis_offset, sstage.pelvis_offset),
                         (fstage.lock, sstage.lock)):
                assert np.array_equal(a, b), frame
    finally:
        numba.set_num_threads(threads)
    # frame 0 planned, then every frame in one call: 1..29 on one thread, then (numba with two threads) in parallel
    assert ran == [True] * 39
    assert fproc._plan.one_call.call is not None  # (its compiled entry points)
    assert (fproc._plan.one_call.parallel is not None) is (threads > 1)
    assert np.abs(fstage.pelvis_offset).max() > 0.0 and np.abs(fstage.pelvis_offset[1::3]).max() == 0.0
    np.testing.assert_allclose(fast.world, world_matrices(demo.rig.parents, fast.local_pose), rtol=0, atol=1e-12)


def test_foot_frame_declines_for_a_few_characters_on_two_threads(demo, monkeypatch):
    # three characters on two threads: the stage runs its serial twin after the parallel update (the old
    # path), so the one call declines; on one thread it runs; the outputs match the two calls' either way
    import numba

    import skeletal._threads as threads_module
    import skeletal.playback.footframe as footframe

    threads = numba.get_num_threads()
    if threads < 2:
        pytest.skip("numba has one thread here")
    ran = []
    run = footframe.FootFrame.run
    monkeypatch.setattr(footframe.FootFrame, "run", lambda self, dt: ran.append(run(self, dt)) or ran[-1])
    monkeypatch.setattr(threads_module, "_NO_CAP", True)

    def make():
        mixer = skeletal.Mixer(demo, 3, events=False)
        mixer.play("walk", offset=np.array([0.0, 0.3, 0.7]))
        proc = Procedural(mixer)
        stage = proc.foot_placement("terrain:amplitude=0.2,wavelength=3,seed=4")
        return mixer, proc, stage

    (fast, fproc, fstage), (slow, sproc, sstage) = make(), make()
    try:
        numba.set_num_threads(2)
        for frame in range(12):
            if frame == 6:
                numba.set_num_threads(1)
            slow.update(DT)
            sproc._plan.one_call = None
            fast.update(DT)
            for a, b in ((fast.world, slow.world), (fast.palettes, slow.palettes), (fstage.targets, sstage.targets)):
                assert np.array_equal(a, b), frame
    finally:
        numba.set_num_threads(threads)
    assert ran == [False] * 5 + [True] * 6 and fproc._plan.one_call.parallel is None


def test_foot_placement_pose_is_the_same_whether_the_update_or_the_stage_builds_the_world_rows(demo, monkeypatch):
    # foot placement alone on a mixer: the update leaves the world rows to the stage (the kernel's phase 3:
    # the probe's rows, the IK's joints gathered moved with the pelvis, every row after the IK), or, with
    # that plan declined, builds them first and the stage moves them (phase 0). The legs' IK gets the
    # same inputs either way, so the poses are equal bit for bit (a nearly straight leg's IK magnifies
    # an input's last bit ~1e8-fold: 3e-7 in a quaternion when the two paths rounded the joints'
    # positions differently); the rows, rebuilt or moved, agree to rounding
    import numba

    import skeletal._threads as threads_module
    import skeletal.playback.procedural as procedural

    monkeypatch.setattr(threads_module, "_NO_CAP", True)
    build = procedural.Procedural._build_plan

    def world_first(self, dt):
        plan = build(self, dt)
        if plan is not None and plan.before_world:
            plan.before_world, plan.one_call = False, None
        return plan

    def run(patch):
        monkeypatch.setattr(procedural.Procedural, "_build_plan", world_first if patch else build)
        count = 20
        mixer = skeletal.Mixer(demo, count, events=False)
        mixer.play("walk", offset=np.linspace(0.0, 0.9, count))
        mixer.play("run", weight=0.4, offset=np.linspace(0.1, 0.7, count))
        proc = Procedural(mixer)
        proc.foot_placement("terrain:amplitude=0.2,wavelength=3,seed=4",
                            weight=np.resize([1.0, 0.3, 0.6, 0.0, 0.9], count))
        proc.place(np.random.default_rng(3).uniform(-3, 3, (count, 3)), np.linspace(0.0, 2.0, count))
        out = []
        for _ in range(60):
            mixer.update(DT)
            out.append((mixer.local_pose.copy(), mixer.world.copy(), proc._plan))
        return out

    threads = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        staged, moved = run(False), run(True)
    finally:
        numba.set_num_threads(threads)
    assert staged[-1][2].before_world and not moved[-1][2].before_world  # (the two paths did run)
    for (pose_a, world_a, _), (pose_b, world_b, _) in zip(staged, moved):
        assert np.array_equal(pose_a, pose_b)
        np.testing.assert_allclose(world_a, world_b, rtol=0, atol=1e-12)


def _walk_forward(asset, ground, speed, frames, plant=True):
    """The demo walk moved forward (+Z) through its placement at ``speed`` m/s over ``ground``;
    returns the feet's world positions (frames, L, 3), contact weights (frames, L) and the stage."""
    player = skeletal.Player(asset)
    player.play("walk")
    proc = Procedural(player)
    stage = proc.foot_placement(ground, plant=plant)
    g = stage.ground
    feet, contact = [], []
    for i in range(frames):
        pos = np.array([0.3, 0.0, speed * i * DT])
        pos[1] = float(g.height(pos[0], pos[2]))
        proc.place(pos, 0.0)
        player.update(DT)
        feet.append(player.world[stage.feet, :3, 3] + pos)
        contact.append(stage.contact[0].copy())
    return np.array(feet), np.array(contact), stage


def _planted_drift(feet, contact):
    """Per contact phase (frames with weight >= 0.999) and foot: the largest world (x, z) distance
    from where the foot was on the phase's first frame."""
    drifts = []
    for l in range(feet.shape[1]):
        start = None
        for i in range(len(feet)):
            if contact[i, l] >= 0.999:
                if start is None:
                    start = feet[i, l, [0, 2]]
                drifts.append(float(np.linalg.norm(feet[i, l, [0, 2]] - start)))
            else:
                start = None
    return np.array(drifts)


@pytest.mark.parametrize("spec", ["terrain:amplitude=0.12,wavelength=2.5,seed=2", "slope:angle=10,direction=0"])
def test_planted_feet_do_not_slide(demo, spec):
    # the walk's own speed: how fast the ground passes under a planted foot in the in-place clip
    speed = detect_contacts(demo, "walk", find_legs(demo.rig)).ground_speed
    assert speed > 0.8
    # moved at a speed that does not quite match the clip (as in a game): unplanted feet slide
    feet, contact, stage = _walk_forward(demo, spec, 0.8 * speed, 100)
    drift = _planted_drift(feet, contact)
    assert len(drift) > 30
    assert drift.max() < 1e-4  # locked at touchdown, held while planted
    loose, loose_contact, _ = _walk_forward(demo, spec, 0.8 * speed, 100, plant=False)
    assert _planted_drift(loose, loose_contact).max() > 0.01  # without the lock the feet slide
    # lift-off blends back to the animated path: no pop (a frame's step stays below the swing's)
    steps = np.linalg.norm(np.diff(feet[:, :, [0, 2]], axis=0), axis=-1)
    loose_steps = np.linalg.norm(np.diff(loose[:, :, [0, 2]], axis=0), axis=-1)
    assert steps.max() < 1.5 * loose_steps.max()
    assert np.all(np.isfinite(feet))
    # the feet still stand on the ground while locked
    g = stage.ground
    planted_feet = feet[contact >= 0.999]
    h = g.height(planted_feet[:, 0], planted_feet[:, 2])
    assert np.all(planted_feet[:, 1] > h) and np.all(planted_feet[:, 1] < h + 0.2)


# -- look-at ------------------------------------------------------------------------------------


def test_look_at_follows_a_target_smoothly(demo):
    chain = find_head_chain(demo.rig)
    assert [demo.rig.names[j] for j in chain] == ["neck", "head"]
    player = skeletal.Player(demo)
    player.play("idle")
    proc = Procedural(player)
    target = np.array([0.6, 1.7, 2.0])
    look = proc.look_at(target, smooth_time=0.2)
    head = chain[-1]
    angles = []
    for _ in range(120):
        player.update(DT)
        w = player.world[head]
        fwd = w[:3, :3] @ np.array([0.0, 0.0, 1.0])
        to = target - w[:3, 3]
        angles.append(math.degrees(math.acos(np.clip(fwd @ to / np.linalg.norm(fwd) / np.linalg.norm(to), -1, 1))))
    assert angles[-1] < 3.0  # looking at it (the idle sways the head a little)
    # the target jumps: the head follows through the spring, without overshoot
    look.set_target([-0.8, 1.5, 1.5])
    xs = []
    for _ in range(90):
        player.update(DT)
        xs.append(look.smoothed[0, 0])
    xs = np.array(xs)
    assert xs[0] > 0.5  # smoothed: not there on the first frame
    assert np.all(np.diff(xs) <= 1e-12) and xs.min() >= -0.8 - 1e-9
    assert abs(xs[-1] + 0.8) < 0.01
    assert np.all(np.isfinite(player.world))
    # the skin palettes (kept current inside the look-at kernel) match the turned head
    for skin, palette in zip(demo.skins, player.mixer.skin_palettes):
        assert np.allclose(palette[0], player.world[skin.joints] @ skin.inverse_bind, atol=1e-12)


# -- CLI ----------------------------------------------------------------------------------------


def test_render_command_with_ground_and_look_at(tmp_path):
    pytest.importorskip("moderngl")
    from click.testing import CliRunner

    from skeletal.cli import cli

    out = tmp_path / "feet.png"
    result = CliRunner().invoke(cli, ["render", "--clip", "walk", "--ground", "terrain:amplitude=0.2",
                                       "--look-at", "1,1.6,3", "--size", "160x120", "--time", "0.3", "--out", str(out)])
    if result.exit_code != 0 and "EGL" in (result.output or ""):
        pytest.skip("no headless GL here")
    assert result.exit_code == 0, result.output
    assert out.exists() and out.stat().st_size > 1000
    bad = CliRunner().invoke(cli, ["render", "--ground", "hills:1", "--out", str(tmp_path / "x.png")])
    text = bad.stderr if bad.stderr else bad.output
    assert bad.exit_code != 0 and "ground" in text and "Traceback" not in text
    assert len(text.strip().splitlines()) == 1


def _walker_on_terrain_looking(demo):
    """A Player walking with a Procedural: foot placement on terrain, then look-at."""
    player = skeletal.Player(demo)
    player.play("walk")
    proc = Procedural(player)
    proc.foot_placement("terrain:amplitude=0.2,wavelength=3")
    proc.look_at((0.5, 1.5, 2.0))
    return player, proc


def test_planned_frame_equals_the_general_path_through_changes(demo):
    # a Procedural plans its frame as compiled calls after a general one; every change (a new target,
    # ground, weight array, dt, a stage added, disabled) must take effect exactly as in the general
    # path, which the reference is forced through (its plan dropped every frame)
    fast, fproc = _walker_on_terrain_looking(demo)
    slow, sproc = _walker_on_terrain_looking(demo)
    loops: dict = {"fast": [], "slow": []}
    for name, player, proc in (("fast", fast, fproc), ("slow", slow, sproc)):
        # an event comes before the stages of its frame: a callback's change takes effect in it
        player.on("loop", lambda event, name=name, proc=proc: (loops[name].append(event.count),
                                                                proc.stages[1].set_target((0.2, 1.0, 2.5))))
    changes = {
        10: lambda proc: proc.stages[1].set_target((-1.0, 1.2, 1.0)),
        20: lambda proc: setattr(proc.stages[0], "ground", "slope:angle=8"),
        30: lambda proc: setattr(proc.stages[0], "weight", np.full(1, 0.5)),
        40: lambda proc: setattr(proc.stages[1], "target", None),
        50: lambda proc: proc.look_at((0.0, 1.6, 3.0), smooth_time=0.0),
        55: lambda proc: setattr(proc.stages[1], "smooth_time", 0.25),  # the fused job's mode and omega anew
        60: lambda proc: setattr(proc, "enabled", False),
        65: lambda proc: setattr(proc, "enabled", True),
        70: lambda proc: proc.place((0.3, 0.0, -0.2), 0.4),
        72: lambda proc: setattr(proc.stages[0], "ground", FunctionGround(lambda x, z: 0.02 * x)),  # unplannable
        76: lambda proc: setattr(proc.stages[0], "ground", "flat"),
    }
    planned = 0
    for frame in range(80):
        if frame in changes:
            for proc in (fproc, sproc):
                changes[frame](proc)
        dt = DT if frame % 25 != 24 else DT / 2  # dt changes too
        sproc._plan = None
        slow.update(dt)
        fast.update(dt)
        planned += fproc._plan is not None and fproc._plan.dt is not None
        if frame == 73:
            assert fproc._plan is not None and fproc._plan.dt is None  # known unplannable: not planned per frame
        assert np.array_equal(fast.local_pose, slow.local_pose), frame
        assert np.array_equal(fast.world, slow.world), frame
        assert np.array_equal(fast.palettes[0], slow.palettes[0]), frame
    assert planned > 55  # the plan is rebuilt after each change
    assert loops["fast"] == loops["slow"] == [1]
    with pytest.raises(SkeletalError, match="finite"):  # a planned frame still checks the target
        fproc.stages[1].target[0, 0] = np.nan
        fast.update(DT)


@pytest.mark.parametrize("owner, name, value", [
    ("proc", "enabled", False),
    ("proc", "placement", "placed"),
    ("proc", "stages", "foot only"),
    ("feet", "ground", "slope:angle=8"),
    ("feet", "plant", False),
    ("feet", "floor", 0.05),
    ("feet", "reach", 1.0),
    ("feet", "soft", 0.3),
    ("feet", "max_tilt", 0.0),
    ("feet", "omega", 1.0),
    ("feet", "weight", "half"),
    ("feet", "ankle", "raised"),
    ("look", "target", "elsewhere"),
    ("look", "smooth_time", 0.0),
    ("look", "weight", "half"),
    ("look", "smoothed", "moved"),
])
def test_each_plan_setting_changes_the_next_planned_frame(demo, name, owner, value):
    # the plan is dropped by assigning a setting it is built from (PlanInput), not by any attribute:
    # after each setting's assignment the next frame differs from an unchanged twin's and equals the
    # general path's (a twin whose plan is dropped every frame)
    def make():
        player = skeletal.Player(demo)
        player.play("walk")
        proc = Procedural(player)
        feet = proc.foot_placement("terrain:amplitude=0.2,wavelength=3")
        look = proc.look_at((0.5, 1.5, 2.0))
        return player, {"proc": proc, "feet": feet, "look": look}

    def new_value(parts):
        made = {"moved": lambda: getattr(parts[owner], name) + 0.3, "foot only": lambda: [parts["feet"]],
                "placed": lambda: placement_matrices((0.3, 0.0, -0.2), 0.4, 1),
                "half": lambda: np.full(1, 0.5), "elsewhere": lambda: np.array([[-1.0, 1.2, 1.0]]),
                "raised": lambda: parts["feet"].ankle + 0.05}
        return made[value]() if isinstance(value, str) and value in made else value

    runs = [make() for _ in range(3)]  # planned and changed, general and changed, planned unchanged
    for frame in range(8):
        for player, parts in runs:
            if frame == 3:  # the look-at spring is moving when the setting changes
                parts["look"].set_target((0.0, 1.0, 3.0))
            player.update(DT)
    for _player, parts in runs:
        assert parts["proc"]._plan is not None and parts["proc"]._plan.dt is not None  # planned
    for _player, parts in runs[:2]:
        setattr(parts[owner], name, new_value(parts))
        assert parts["proc"]._plan is None  # the assignment dropped the plan
    runs[1][1]["proc"]._plan = None
    for player, _parts in runs:
        player.update(DT)
    changed, general, unchanged = (player.world for player, _ in runs)
    assert np.array_equal(changed, general)
    if name == "reach":  # a floor under the animated reach: this walk never needs it, the kernel reads it
        assert runs[0][1]["feet"]._scalars[1] == value != runs[2][1]["feet"]._scalars[1]
    else:
        assert not np.array_equal(changed, unchanged)


def test_other_attributes_keep_the_plan(demo):
    # outputs and bookkeeping are not plan inputs: reading and assigning them leaves the planned frame
    player = skeletal.Player(demo)
    player.play("walk")
    proc = Procedural(player)
    feet = proc.foot_placement("terrain:amplitude=0.2,wavelength=3")
    proc.look_at((0.5, 1.5, 2.0))
    for _ in range(3):
        player.update(DT)
    plan = proc._plan
    assert plan is not None and plan.dt is not None
    feet.contact_options = {}
    feet.phases = dict(feet.phases)
    player.update(DT)
    assert proc._plan is plan


def test_planned_foot_placement_with_joints_between_the_pelvis_and_the_thighs(demo):
    # legs given one joint down (shin, foot, toe): the thighs are then joints between the pelvis (the hips)
    # and each leg's first joint, whose world rows the planned path builds before the pelvis moves (they
    # place the feet) and moves after it; the general path (a full world pass first) agrees to rounding
    legs = {"left": ("left_shin", "left_foot", "left_toe"), "right": ("right_shin", "right_foot", "right_toe")}
    count = 5

    def make():
        mixer = skeletal.Mixer(demo, count)
        mixer.play("walk", offset=np.linspace(0.0, 0.8, count))
        proc = Procedural(mixer)
        stage = proc.foot_placement("terrain:amplitude=0.3,wavelength=2", legs=legs)
        proc.place(np.stack([np.linspace(-2, 2, count), np.zeros(count), np.linspace(1, -1, count)], 1), 0.4)
        return mixer, proc, stage

    (fast, fproc, feet), (slow, sproc, _) = make(), make()
    assert feet.pelvis == demo.rig.find("hips")
    moved, planned = 0.0, 0
    for frame in range(60):
        sproc._plan = None
        slow.update(DT)
        planned += fproc.builds_world_for(DT)
        fast.update(DT)
        moved = max(moved, np.abs(feet.pelvis_offset).max())
        for a, b in ((fast.local_pose, slow.local_pose), (fast.world, slow.world), (fast.palettes, slow.palettes)):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-12, err_msg=str(frame))
    assert moved > 0.01 and planned > 50  # the pelvis did move, in frames that took the planned path
    np.testing.assert_allclose(fast.world, world_matrices(demo.rig.parents, fast.local_pose), rtol=0, atol=1e-12)


def test_mixer_update_leaves_the_world_pass_to_planned_foot_placement(demo):
    # a Mixer whose only controller plans foot placement alone runs its update without the world pass;
    # the stage moves the pelvis in the pose, then builds every world row and palette once. The same
    # frames through the general path (its plan dropped every frame: a full world pass, the pelvis'
    # subtree translated) agree to rounding; a loop event's frame runs the world pass before the
    # events (a callback sees a whole frame), and a callback's change takes effect in its frame
    spec = "terrain:amplitude=0.2,wavelength=3,seed=2"
    count = 6

    def make():
        mixer = skeletal.Mixer(demo, count)
        mixer.play("walk", offset=np.linspace(0.0, 0.9, count))
        proc = Procedural(mixer)
        stage = proc.foot_placement(spec, weight=[1.0, 1.0, 0.5, 0.0, -0.5, 1.0])
        proc.place(np.stack([np.linspace(-2, 2, count), np.zeros(count), np.linspace(1, -1, count)], 1), 0.3)
        seen: list = []

        def on_loop(event, mixer=mixer, stage=stage, seen=seen):
            # the world rows a callback reads match the pose; the change applies from this frame
            seen.append(np.abs(mixer.world - world_matrices(demo.rig.parents, mixer.local_pose)).max())
            stage.ground = "slope:angle=6"

        mixer.on("loop", on_loop)
        return mixer, proc, seen

    fast, fproc, fseen = make()
    slow, sproc, sseen = make()
    left = 0
    for frame in range(150):
        sproc._plan = None
        slow.update(DT)
        left += fproc.builds_world_for(DT)
        fast.update(DT)
        assert not fast._world_skipped
        # rounding-level differences; a partly weighted leg (instance 2) near full reach turns its thigh
        # by sqrt(1 - x^2) of a cosine x near 1, which turns an ulp into ~1e-8: the general path itself
        # moves that much when the placement moves by 1e-15 m
        for i, atol in ((slice(0, 2), 1e-12), (2, 5e-8), (slice(3, count), 1e-12)):
            for a, b in ((fast.local_pose, slow.local_pose), (fast.world, slow.world), (fast.palettes, slow.palettes)):
                np.testing.assert_allclose(a[i], b[i], rtol=0, atol=atol, err_msg=str(frame))
    assert left > 100  # most frames took the path
    assert len(fseen) == len(sseen) > 0 and max(fseen) < 1e-12
    # the palettes match the world rows, which match the pose
    assert np.abs(fast.world - world_matrices(demo.rig.parents, fast.local_pose)).max() < 1e-12
    for skin, palette in zip(demo.skins, fast.skin_palettes):
        assert np.allclose(palette, fast.world[:, skin.joints] @ skin.inverse_bind, atol=1e-12)
    # the stages each update ran: ADVANCE | BLEND alone; with a second controller the whole update again
    from skeletal.playback import kernels as K

    runs: list = []
    run = fast._run
    fast._run = lambda dt, stages: (runs.append(stages), run(dt, stages))[1]
    fast.update(DT)
    fast.controllers.append(type("Idle", (), {"before_update": lambda self, dt: None})())
    fast.update(DT)
    assert runs == [K.ADVANCE | K.BLEND, K.ALL]
    np.testing.assert_allclose(fast.world, world_matrices(demo.rig.parents, fast.local_pose), rtol=0, atol=1e-12)
    # the frame changed between the question and after_update (a clip set grown inside the update): the
    # world pass the update left runs first, then the general path
    fast.controllers.pop()
    fast._run = run
    fast.update(DT)  # planned again
    run(DT, K.ADVANCE | K.BLEND)
    fast._world_skipped = True
    fproc._plan = None
    fproc.after_update(DT)
    assert not fast._world_skipped
    np.testing.assert_allclose(fast.world, world_matrices(demo.rig.parents, fast.local_pose), rtol=0, atol=1e-12)
    for skin, palette in zip(demo.skins, fast.skin_palettes):
        assert np.allclose(palette, fast.world[:, skin.joints] @ skin.inverse_bind, atol=1e-12)
    np.testing.assert_allclose(fast.world, world_matrices(demo.rig.parents, fast.local_pose), rtol=0, atol=1e-12)


def test_player_runs_the_fused_frame_itself_with_the_mixers_results(demo):
    # a Player whose only controller is a Procedural with a fused plan runs that compiled call itself
    # (fused_route); the results are the mixer's route's (fused_frame), bit for bit; a dropped plan
    # drops the route, and a second controller sends the frame through the mixer
    own, oproc = _walker_on_terrain_looking(demo)
    via, vproc = _walker_on_terrain_looking(demo)
    for frame in range(30):
        if frame == 12:
            for proc in (oproc, vproc):
                proc.stages[1].target[...] = (-0.5, 1.2, 1.0)  # in place: the plan stays
        own.update(DT)
        via.mixer.update(DT)
        assert own.time == via.time
        assert np.array_equal(own.local_pose, via.local_pose), frame
        assert np.array_equal(own.world, via.world), frame
        assert np.array_equal(own.palettes, via.palettes), frame
    route = oproc.fused_route
    assert route is not None and route[0] == DT and route[1] is own.mixer.frame
    assert route[2] is oproc._plan.fused.call
    oproc.enabled = True  # assigning a plan input drops the plan, and the route with it
    assert oproc.fused_route is None and oproc._plan is None
    own.update(DT)  # a general frame plans again
    assert oproc.fused_route is not None
    calls = []
    counter = type("Counter", (), {"before_update": lambda self, dt: None,
                                   "after_update": lambda self, dt: calls.append(dt)})
    own.mixer.controllers.append(counter())
    own.update(DT)
    assert calls == [DT]  # two controllers: the mixer's route, every controller's after_update
