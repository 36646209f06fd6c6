"""IK solvers: analytic cases (reach, pole, limits, unreachable, degenerate), batched == one at a time,
weight 0 bit-identical, FABRIK twist, and the playback stages (Player / Crowd)."""

from __future__ import annotations

import numpy as np
import pytest

from skeletal.anim import ik
from skeletal.quat import quat_conjugate, quat_mul, quat_to_matrix
from skeletal.anim.rig import Rig

RNG = np.random.default_rng(7)


def axis_angle(axis, angle):
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    return np.concatenate([axis * np.sin(angle / 2), [np.cos(angle / 2)]])


def chain_rig(n_bones: int, *, length=1.0, bend=0.25, twist=0.0, seed=0):
    """A root node (rotated, uniformly scaled by 2, moved) and a chain of n_bones + 1 joints along the
    local y axis, each slightly bent (about x and z) and optionally twisted about y."""
    rng = np.random.default_rng(seed)
    n = n_bones + 2
    rest = np.zeros((n, 10))
    rest[:, 6] = 1.0
    rest[:, 7:] = 1.0
    rest[0, :3] = (0.3, 1.0, -0.2)
    rest[0, 3:7] = axis_angle((0.2, 1.0, 0.3), 0.7)
    rest[0, 7:] = 2.0
    for i in range(2, n):
        rest[i, 1] = length * (1.0 + 0.3 * rng.uniform(-1, 1))
        q = quat_mul(axis_angle((1, 0, 0), bend * rng.uniform(0.5, 1)), axis_angle((0, 0, 1), bend * rng.uniform(-1, 1)))
        if twist:
            q = quat_mul(q, axis_angle((0, 1, 0), twist))
        rest[i, 3:7] = q
    rest[1, 3:7] = axis_angle((0, 0, 1), 0.4)
    names = ["root"] + [f"j{i}" for i in range(1, n)]
    rig = Rig.from_parents(names, list(range(-1, n - 1)), rest)
    return rig, rest


def positions(rig, pose):
    return ik.world_positions(rig.parents, pose)


def world_rot(rig, pose):
    from skeletal.anim.pose import world_matrices

    w = world_matrices(rig.parents, pose)
    m = w[..., :3, :3]
    return m / np.linalg.norm(m, axis=-2, keepdims=True)


def reachable_targets(rig, pose, chain, count, fraction=(0.3, 0.95)):
    p = positions(rig, pose)
    root = p[chain[0]]
    total = sum(np.linalg.norm(p[b] - p[a]) for a, b in zip(chain, chain[1:]))
    d = RNG.normal(size=(count, 3))
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    r = RNG.uniform(*fraction, size=(count, 1)) * total
    return root + d * r, total


# ---------------------------------------------------------------------------------------------
# two-bone


def test_two_bone_reaches_and_respects_pole():
    rig, rest = chain_rig(4)
    chain = (2, 3, 4)
    targets, _ = reachable_targets(rig, rest, chain, 64, (0.2, 0.999))
    poles = targets + RNG.normal(size=(64, 3)) * 3.0
    poses = np.repeat(rest[None], 64, axis=0)
    out = ik.two_bone(rig.parents, poses, chain, targets, pole=poles)
    p = positions(rig, out)
    assert np.abs(p[:, 4] - targets).max() < 1e-5
    # bone lengths and everything above the chain unchanged
    p0 = positions(rig, rest)
    assert np.allclose(np.linalg.norm(p[:, 3] - p[:, 2], axis=1), np.linalg.norm(p0[3] - p0[2]))
    assert np.allclose(p[:, :3], p0[:3])
    # the knee lies on the pole's side of the root-target line, in the plane root-target-pole
    axis = targets - p[:, 2]
    axis /= np.linalg.norm(axis, axis=1, keepdims=True)
    knee = p[:, 3] - p[:, 2]
    knee -= axis * np.sum(knee * axis, axis=1, keepdims=True)
    pole = poles - p[:, 2]
    pole -= axis * np.sum(pole * axis, axis=1, keepdims=True)
    cos = np.sum(knee * pole, axis=1) / np.linalg.norm(knee, axis=1) / np.linalg.norm(pole, axis=1)
    assert cos.min() > 1 - 1e-9
    # only the chain's root and mid rotations changed
    assert np.array_equal(out[:, [0, 1, 4]], poses[:, [0, 1, 4]])
    assert np.array_equal(out[..., [0, 1, 2, 7, 8, 9]], poses[..., [0, 1, 2, 7, 8, 9]])


def test_two_bone_without_pole_keeps_the_bend_plane():
    rig, rest = chain_rig(4)
    chain = (2, 3, 4)
    p0 = positions(rig, rest)
    normal = np.cross(p0[3] - p0[2], p0[4] - p0[3])
    # a target in the current bend plane: the knee stays in that plane
    in_plane = p0[2] + 0.8 * (p0[4] - p0[2]) + 0.1 * (p0[3] - p0[2])
    out = ik.two_bone(rig.parents, rest, chain, in_plane)
    p = positions(rig, out)
    assert np.linalg.norm(p[4] - in_plane) < 1e-6
    assert abs(np.dot(p[3] - p[2], normal / np.linalg.norm(normal))) < 1e-6


def test_two_bone_unreachable_is_straight_toward_target():
    rig, rest = chain_rig(4)
    chain = (2, 3, 4)
    p0 = positions(rig, rest)
    total = np.linalg.norm(p0[3] - p0[2]) + np.linalg.norm(p0[4] - p0[3])
    d = RNG.normal(size=(16, 3))
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    targets = p0[2] + d * total * RNG.uniform(1.0, 3.0, size=(16, 1))
    out = ik.two_bone(rig.parents, np.repeat(rest[None], 16, 0), chain, targets, pole=p0[2] + (0, 0, 5.0))
    p = positions(rig, out)
    assert np.abs(p[:, 4] - (p0[2] + d * total)).max() < 1e-6
    # the knee on the line
    u = (p[:, 3] - p[:, 2]) / np.linalg.norm(p[:, 3] - p[:, 2], axis=1, keepdims=True)
    assert np.abs(np.cross(u, d)).max() < 1e-6


def test_two_bone_soft_limit_is_smooth_and_never_snaps():
    rig, rest = chain_rig(4)
    chain = (2, 3, 4)
    p0 = positions(rig, rest)
    total = np.linalg.norm(p0[3] - p0[2]) + np.linalg.norm(p0[4] - p0[3])
    d = np.array([0.3, 0.2, 0.9]) / np.linalg.norm([0.3, 0.2, 0.9])
    dist = np.linspace(0.5, 1.5, 401) * total
    targets = p0[2] + d * dist[:, None]
    out = ik.two_bone(rig.parents, np.repeat(rest[None], len(dist), 0), chain, targets, pole=p0[2] + (0, 0, 5.0), soft=0.1)
    reach = np.linalg.norm(positions(rig, out)[:, 4] - p0[2], axis=1)
    below = dist <= 0.9 * total
    assert np.abs(reach[below] - dist[below]).max() < 1e-6       # exact below the band
    assert np.all(reach < total) and np.all(np.diff(reach) > 0)   # never fully straight, monotone
    slope = np.diff(reach) / np.diff(dist)
    assert np.abs(np.diff(slope)).max() < 0.05                    # no kink (a hard limit jumps by 1)
    assert np.allclose(reach, [ik.soft_distance(x, total, 0.1) for x in dist], atol=1e-6)


def test_two_bone_mid_axis_hinge_and_end_rotation():
    rig, rest = chain_rig(3, bend=0.0)  # straight leg: no bend plane, the hinge decides
    chain = (2, 3, 4)
    p0 = positions(rig, rest)
    target = p0[2] + 0.7 * (p0[4] - p0[2]) + np.array([0.0, 0.0, 0.01])
    end_rotation = axis_angle((1, 2, 3), 0.9)
    out = ik.two_bone(rig.parents, rest, chain, target, mid_axis=(1, 0, 0), end_rotation=end_rotation)
    p = positions(rig, out)
    assert np.linalg.norm(p[4] - target) < 1e-6
    delta = quat_mul(quat_conjugate(rest[3, 3:7]), out[3, 3:7])  # the knee turned about its local x only
    assert abs(delta[1]) < 1e-9 and abs(delta[2]) < 1e-9 and delta[0] * np.sign(delta[3]) > 0.1
    assert np.allclose(world_rot(rig, out)[4], quat_to_matrix(end_rotation), atol=1e-9)


def test_two_bone_degenerate_input_gives_no_nan():
    rig, rest = chain_rig(4)
    chain = (2, 3, 4)
    p0 = positions(rig, rest)
    cases = [p0[2], p0[2] + 1e-12, p0[3], p0[4]]
    out = ik.two_bone(rig.parents, np.repeat(rest[None], 4, 0), chain, np.array(cases), pole=p0[2])
    assert np.all(np.isfinite(out))
    # zero-length bones
    for bone in (3, 4):
        r = rest.copy()
        r[bone, :3] = 0.0
        for pole in (None, p0[2] + 1.0):
            o = ik.two_bone(rig.parents, r, chain, p0[2] + (0.3, -0.5, 0.2), pole=pole)
            assert np.all(np.isfinite(o))
    r = rest.copy()
    r[3:5, :3] = 0.0
    assert np.all(np.isfinite(ik.two_bone(rig.parents, r, chain, p0[2] + 1.0)))
    # folded leg (target at the root, equal bones) and straight leg with no pole
    r = rest.copy()
    r[4, 1] = r[3, 1]
    r[3:5, 3:7] = (0, 0, 0, 1)
    o = ik.two_bone(rig.parents, r, chain, positions(rig, r)[2])
    assert np.all(np.isfinite(o))
    assert np.linalg.norm(positions(rig, o)[4] - positions(rig, r)[2]) < 1e-6


def test_two_bone_weight_zero_is_bit_identical_and_weight_blends():
    rig, rest = chain_rig(4)
    chain = (2, 3, 4)
    targets, _ = reachable_targets(rig, rest, chain, 8)
    poses = np.repeat(rest[None], 8, 0)
    zero = ik.two_bone(rig.parents, poses, chain, targets, pole=targets + 1.0, weight=0.0)
    assert zero.tobytes() == poses.tobytes()
    full = ik.two_bone(rig.parents, rest, chain, targets[0], pole=targets[0] + 1.0)
    half = ik.two_bone(rig.parents, rest, chain, targets[0], pole=targets[0] + 1.0, weight=0.5)
    for j in (2, 3):
        a = np.arccos(min(1.0, abs(np.dot(rest[j, 3:7], half[j, 3:7])))) * 2
        b = np.arccos(min(1.0, abs(np.dot(half[j, 3:7], full[j, 3:7])))) * 2
        assert abs(a - b) < 1e-6


# ---------------------------------------------------------------------------------------------
# aim


def _forward(rig, pose, joint, axis=(0, 0, 1)):
    return world_rot(rig, pose)[..., joint, :, :] @ np.asarray(axis, float)


def test_aim_points_forward_axis_and_up_vector():
    rig, rest = chain_rig(4)
    p0 = positions(rig, rest)
    head = 5
    targets = p0[head] + RNG.normal(size=(32, 3)) * 2.0
    up = np.array([0.0, 1.0, 0.0])
    out = ik.aim(rig.parents, np.repeat(rest[None], 32, 0), [head], targets, forward=(0, 0, 1), up=(0, 1, 0), up_vector=up)
    f = _forward(rig, out, head)
    want = targets - p0[head]
    want /= np.linalg.norm(want, axis=1, keepdims=True)
    assert np.abs(f - want).max() < 1e-9
    u = _forward(rig, out, head, (0, 1, 0))
    # the up axis lies in the plane of forward and the up vector, on its side
    assert np.abs(np.sum(np.cross(f, up) * u, axis=1)).max() < 1e-9
    assert np.all(u @ up > 0)


def test_aim_chain_shares_the_turn_and_limits_hold():
    rig, rest = chain_rig(4)
    chain = [3, 4, 5]
    p0 = positions(rig, rest)
    targets = p0[5] + RNG.normal(size=(32, 3)) * 3.0
    out = ik.aim(rig.parents, np.repeat(rest[None], 32, 0), chain, targets)
    f = _forward(rig, out, 5)
    want = targets - positions(rig, out)[:, 5]
    want /= np.linalg.norm(want, axis=1, keepdims=True)
    assert np.abs(f - want).max() < 1e-9
    for j in chain:  # every joint takes part
        turned = 2 * np.arccos(np.minimum(1, np.abs(np.sum(out[:, j, 3:7] * rest[j, 3:7], axis=1))))
        assert np.median(turned) > 0.05
    # limits: yaw and pitch of each joint's correction bounded; a far-off target is not reached
    limit = ik.AimLimit(yaw=0.2, pitch=0.1, roll=0.0)
    behind = p0[5] - 5.0 * _forward(rig, rest, 5)
    out = ik.aim(rig.parents, rest, chain, behind, limits=limit)
    assert np.all(np.isfinite(out))
    fwd0 = _forward(rig, rest, 5)
    f = _forward(rig, out, 5)
    assert np.dot(f, fwd0) > np.cos(3 * np.hypot(0.2, 0.1) + 1e-6)
    # single joint: the correction's yaw / pitch / roll in the aim frame never exceed the limits
    up0 = _forward(rig, rest, 5, (0, 1, 0))
    up0 -= fwd0 * np.dot(up0, fwd0)
    up0 /= np.linalg.norm(up0)
    side = np.cross(up0, fwd0)
    for t in targets:
        o = ik.aim(rig.parents, rest, [5], t, limits=limit)
        d = world_rot(rig, o)[5] @ world_rot(rig, rest)[5].T
        basis = np.stack([side, up0, fwd0], axis=1)
        m = basis.T @ d @ basis
        pitch = np.arcsin(np.clip(-m[1, 2], -1, 1))
        yaw = np.arctan2(m[0, 2], m[2, 2])
        roll = np.arctan2(m[1, 0], m[1, 1])
        assert abs(yaw) <= 0.2 + 1e-9 and abs(pitch) <= 0.1 + 1e-9 and abs(roll) <= 1e-9


def test_aim_degenerate_and_weight_zero():
    rig, rest = chain_rig(4)
    p0 = positions(rig, rest)
    out = ik.aim(rig.parents, rest, [3, 4, 5], p0[5], up_vector=(0, 0, 0))
    assert np.all(np.isfinite(out))
    zero = ik.aim(rig.parents, rest, [3, 4, 5], p0[5] + 1.0, weight=0.0)
    assert zero.tobytes() == rest.tobytes()


# ---------------------------------------------------------------------------------------------
# CCD and FABRIK


def _limit_angles(rest, pose, chain, axis):
    """Per joint: the angle about ``axis`` and the off-axis part of conj(rest) * pose (local)."""
    out = []
    for j in chain:
        d = quat_mul(quat_conjugate(rest[j, 3:7]), pose[..., j, 3:7])
        d = d * np.sign(d[..., 3:4] + 1e-300)
        out.append((2 * np.arctan2(d[..., :3] @ axis, d[..., 3]), np.linalg.norm(np.cross(d[..., :3], axis), axis=-1)))
    return out


@pytest.mark.parametrize("solver", [ik.ccd, ik.fabrik])
def test_chain_solvers_reach_and_straighten(solver):
    rig, rest = chain_rig(6, seed=3)
    chain = list(range(1, 8))
    targets, total = reachable_targets(rig, rest, chain, 24, (0.3, 0.9))
    iters = 400 if solver is ik.ccd else 60
    out = solver(rig.parents, np.repeat(rest[None], 24, 0), chain, targets, iterations=iters, tolerance=1e-7)
    p = positions(rig, out)
    assert np.abs(p[:, 7] - targets).max() < 1e-5
    p0 = positions(rig, rest)
    assert np.allclose(np.linalg.norm(np.diff(p[:, chain], axis=1), axis=2), np.linalg.norm(np.diff(p0[chain], axis=0), axis=1))
    # unreachable: every joint on the ray root -> target, in order
    d = RNG.normal(size=(8, 3))
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    far = p0[1] + d * total * 1.5
    out = solver(rig.parents, np.repeat(rest[None], 8, 0), chain, far)
    p = positions(rig, out)
    rel = p[:, chain] - p0[1]
    along = np.einsum("bjk,bk->bj", rel, d)
    assert np.abs(rel - along[..., None] * d[:, None]).max() < 1e-6
    assert np.all(np.diff(along, axis=1) > 0) and np.allclose(along[:, -1], total)


@pytest.mark.parametrize("solver", [ik.ccd, ik.fabrik])
def test_chain_hinge_and_cone_limits_never_exceeded(solver):
    rig, rest = chain_rig(4, bend=0.0, seed=1)
    chain = [1, 2, 3, 4, 5]
    # planar hinges about local x: a target in the plane the hinges span is reached
    hinge = ik.Hinge(axis=(1, 0, 0), min=-0.2, max=1.2)
    p0 = positions(rig, rest)
    bent = rest.copy()  # a target the hinges can reach: the end of a pose within the limits
    for j, a in zip(chain[:-1], (0.5, 0.9, -0.1, 0.7)):
        bent[j, 3:7] = quat_mul(rest[j, 3:7], axis_angle((1, 0, 0), a))
    target = positions(rig, bent)[5]
    out = solver(rig.parents, rest, chain, target, limits=hinge, rest=rest, iterations=300, tolerance=1e-7)
    for angle, off_axis in _limit_angles(rest, out, chain[:-1], np.array([1.0, 0, 0])):
        assert -0.2 - 1e-9 <= angle <= 1.2 + 1e-9 and off_axis < 1e-9
    assert np.linalg.norm(positions(rig, out)[5] - target) < 1e-4
    # random targets: the limits hold whether or not the target is reached
    targets = p0[1] + RNG.normal(size=(32, 3)) * 3.0
    out = solver(rig.parents, np.repeat(rest[None], 32, 0), chain, targets, limits=hinge, rest=rest, iterations=30)
    for angle, off_axis in _limit_angles(rest, out, chain[:-1], np.array([1.0, 0, 0])):
        assert np.all(angle >= -0.2 - 1e-9) and np.all(angle <= 1.2 + 1e-9) and off_axis.max() < 1e-9
    cone = ik.Cone(angle=0.5, twist=(-0.1, 0.1))
    out = solver(rig.parents, np.repeat(rest[None], 32, 0), chain, targets, limits=cone, rest=rest, iterations=30)
    assert np.all(np.isfinite(out))
    for j in chain[:-1]:
        d = quat_mul(quat_conjugate(rest[j, 3:7]), out[:, j, 3:7])
        bone = rest[j + 1, :3] / np.linalg.norm(rest[j + 1, :3])
        moved = np.einsum("bij,j->bi", quat_to_matrix(d), bone)
        assert np.arccos(np.clip(moved @ bone, -1, 1)).max() <= 0.5 + 1e-7
        twist = 2 * np.arctan2(d[:, :3] @ bone, d[:, 3]) * np.sign(d[:, 3])
        swing_free = quat_mul(d, quat_conjugate(np.concatenate([bone * np.sin(twist / 2)[:, None], np.cos(twist / 2)[:, None]], 1)))
        assert np.all(np.abs(twist) <= 0.1 + 1e-7) and np.all(np.isfinite(swing_free))


def test_fabrik_keeps_the_twist_of_every_bone():
    rig, rest = chain_rig(5, twist=0.7, seed=4)
    chain = list(range(1, 7))
    targets, _ = reachable_targets(rig, rest, chain, 16, (0.3, 0.9))
    out = ik.fabrik(rig.parents, np.repeat(rest[None], 16, 0), chain, targets, iterations=50, tolerance=1e-8)
    assert np.abs(positions(rig, out)[:, 6] - targets).max() < 1e-5
    r0, r1 = world_rot(rig, rest), world_rot(rig, out)
    p0, p1 = positions(rig, rest), positions(rig, out)
    for k, j in enumerate(chain[:-1]):
        b0 = p0[chain[k + 1]] - p0[j]
        b1 = p1[:, chain[k + 1]] - p1[:, j]
        b0 /= np.linalg.norm(b0)
        b1 /= np.linalg.norm(b1, axis=1, keepdims=True)
        # the world turn of each bone is the smallest one onto its new direction: no twist about it
        turn = r1[:, j] @ r0[j].T
        axis = np.stack([turn[:, 2, 1] - turn[:, 1, 2], turn[:, 0, 2] - turn[:, 2, 0], turn[:, 1, 0] - turn[:, 0, 1]], 1)
        assert np.abs(np.einsum("bi,i->b", axis, b0)).max() < 1e-7
        assert np.abs(np.einsum("bij,j->bi", turn, b0) - b1).max() < 1e-7


# ---------------------------------------------------------------------------------------------
# batched == one at a time, degenerate input


@pytest.mark.parametrize("kind", ["two_bone", "aim", "ccd", "fabrik"])
def test_batched_equals_one_at_a_time_and_weight_zero(kind):
    rig, rest = chain_rig(4, seed=5)
    b = 12
    poses = np.repeat(rest[None], b, 0)
    poses[:, 1:, 3:7] = quat_mul(poses[:, 1:, 3:7], np.stack([axis_angle(RNG.normal(size=3), 0.2) for _ in range(b * 5)]).reshape(b, 5, 4))
    targets = positions(rig, rest)[2] + RNG.normal(size=(b, 3))
    poles = RNG.normal(size=(b, 3)) * 2
    weights = RNG.uniform(0.2, 1.0, size=b)
    if kind == "two_bone":
        run = lambda p, t, pl, w: ik.two_bone(rig.parents, p, (2, 3, 4), t, pole=pl, weight=w, soft=0.05)
    elif kind == "aim":
        run = lambda p, t, pl, w: ik.aim(rig.parents, p, [2, 3, 4], t, up_vector=pl, weight=w, limits=ik.AimLimit(0.5, 0.4, 0.3))
    else:
        solver = getattr(ik, kind)
        run = lambda p, t, pl, w: solver(rig.parents, p, [1, 2, 3, 4, 5], t, weight=w, limits=ik.Cone(0.8), rest=rest)
    batch = run(poses, targets, poles, weights)
    for i in range(b):
        one = run(poses[i], targets[i], poles[i], weights[i])
        assert np.array_equal(one, batch[i])
    zero = run(poses, targets, poles, 0.0)
    assert zero.tobytes() == poses.tobytes()
    assert np.all(np.isfinite(run(poses, np.repeat(positions(rig, rest)[None, 2], b, 0), np.zeros((b, 3)), 1.0)))


def test_bad_input_raises_skeletal_errors():
    from skeletal.errors import SkeletalError

    rig, rest = chain_rig(3)
    with pytest.raises(SkeletalError, match="3 joints"):
        ik.two_bone(rig.parents, rest, (1, 2), (0, 0, 0))
    with pytest.raises(SkeletalError, match="not below"):
        ik.two_bone(rig.parents, rest, (3, 2, 1), (0, 0, 0))
    with pytest.raises(SkeletalError, match="target"):
        ik.two_bone(rig.parents, rest, (1, 2, 3), (0, 0))
    with pytest.raises(SkeletalError, match="kind"):
        ik.StageTable(rig.parents).add("jacobian", (1, 2, 3))
    with pytest.raises(SkeletalError, match="not a node"):
        ik.StageTable(rig.parents, names=rig.names).add("two_bone", ("a", "b", "c"))


# ---------------------------------------------------------------------------------------------
# playback stages


@pytest.fixture(scope="module")
def asset():
    from skeletal.demo import demo_asset

    return demo_asset()


LEGS = {"left": ("left_thigh", "left_shin", "left_foot"), "right": ("right_thigh", "right_shin", "right_foot")}


def test_player_ik_runs_after_blending_and_weight_zero_is_bit_identical(asset):
    import skeletal

    plain = skeletal.Player(asset)
    plain.play("walk")
    player = skeletal.Player(asset)
    player.play("walk")
    foot = player.add_ik("left", "two_bone", LEGS["left"], target=(0.1, 0.15, 0.1), pole=(0.1, 0.5, 1.0), weight=0.0)
    for _ in range(3):
        plain.update(1 / 30)
        player.update(1 / 30)
        assert player.local_pose.tobytes() == plain.local_pose.tobytes()
        assert player.world.tobytes() == plain.world.tobytes()
        assert all(a.tobytes() == b.tobytes() for a, b in zip(player.palettes, plain.palettes))
    foot.weight = 1.0
    for t in [(0.1, 0.15, 0.1), (0.12, 0.2, 0.25)]:
        foot.target = t
        player.update(1 / 30)
        foot_row = asset.rig.find("left_foot")
        assert np.linalg.norm(player.world[foot_row, :3, 3] - t) < 1e-5
        # the same as solving the blended pose with the batched function
        plain.update(1 / 30)
        want = ik.two_bone(asset.rig.parents, plain.local_pose, [asset.rig.find(n) for n in LEGS["left"]], t,
                           pole=(0.1, 0.5, 1.0))
        assert np.allclose(player.local_pose, want, atol=1e-12)
    # a layer over the legs: IK still has the last word
    player.add_layer("upper", mask="spine")
    player.play("wave", layer="upper")
    player.update(1 / 30)
    assert np.linalg.norm(player.world[foot_row, :3, 3] - (0.12, 0.2, 0.25)) < 1e-5
    # evaluate() (the general path) runs the stages too
    player.mixer.evaluate()
    assert np.linalg.norm(player.world[foot_row, :3, 3] - (0.12, 0.2, 0.25)) < 1e-5


def test_crowd_with_ik_equals_players_with_ik(asset):
    import skeletal

    n = 6
    offsets = np.linspace(0, asset.clip("walk").duration, n, endpoint=False)
    rng = np.random.default_rng(3)
    targets = {side: rng.normal(size=(n, 3)) * 0.1 + (0.1 if side == "left" else -0.1, 0.12, 0.1) for side in LEGS}
    # instance 0's left leg idle: the rows a crowd leaves to a stage (the toes) are built all the same
    leg_weight = {"left": (np.arange(n) > 0).astype(float), "right": np.ones(n)}
    crowd = skeletal.Crowd(asset, n, nlerp_max_gap=0, keep_world=True)
    crowd.play("walk", offsets=offsets)
    for side, chain in LEGS.items():
        crowd.add_ik(side, "two_bone", chain, target=targets[side], pole=(0.0, 0.5, 1.0), soft=0.02,
                     weight=leg_weight[side])
    look = crowd.add_ik("look", "aim", ("neck", "head"), target=(0.0, 1.6, 2.0), up_vector=(0, 1, 0),
                        forward=(0, 0, 1), limits=ik.AimLimit(0.6, 0.4, 0.2))
    look.weight = np.linspace(0, 1, n)
    players = []
    for i in range(n):
        p = skeletal.Player(asset)
        p.play("walk", offset=offsets[i])
        for side, chain in LEGS.items():
            p.add_ik(side, "two_bone", chain, target=targets[side][i], pole=(0.0, 0.5, 1.0), soft=0.02,
                     weight=leg_weight[side][i])
        p.add_ik("look", "aim", ("neck", "head"), target=(0.0, 1.6, 2.0), up_vector=(0, 1, 0),
                 limits=ik.AimLimit(0.6, 0.4, 0.2), weight=look.weight[i])
        players.append(p)
    for _ in range(3):
        crowd.update(1 / 30)
        for p in players:
            p.update(1 / 30)
    world = np.stack([p.world for p in players])
    palettes = np.stack([p.palettes[0] for p in players])
    np.testing.assert_allclose(crowd.world, world, atol=2e-5)
    np.testing.assert_allclose(crowd.palettes, palettes[:, :, :3, :], atol=2e-5)
    # without keep_world (rows of unaffected joints not rebuilt): the same palettes
    lean = skeletal.Crowd(asset, n, nlerp_max_gap=0)
    lean.play("walk", offsets=offsets)
    for side, chain in LEGS.items():
        lean.add_ik(side, "two_bone", chain, target=targets[side], pole=(0.0, 0.5, 1.0), soft=0.02,
                    weight=leg_weight[side])
    lean.add_ik("look", "aim", ("neck", "head"), target=(0.0, 1.6, 2.0), up_vector=(0, 1, 0),
                limits=ik.AimLimit(0.6, 0.4, 0.2), weight=look.weight)
    for _ in range(3):
        lean.update(1 / 30)
    np.testing.assert_allclose(lean.palettes, crowd.palettes, atol=1e-6)
    # the crowd leaves the rows below the feet to the leg stages, and they are still right
    table = lean._ik.table
    assert len(lean._world_nodes_ik) < len(lean._world_nodes)
    assert table.stage_i[0, ik.SI_DEFERS] == 1
