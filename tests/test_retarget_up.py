"""Retargeting mocap recorded with another up axis (``skeletal.retarget(up=...)``, ``detect_up``).

Z-up (and X-up, -Z-up) BVH files are generated here by turning the roots of a Y-up walk (rest and
motion) and writing BVH text: from the built-in character's walk (always) and from
../shared/assets/cmu_12_01_walk.bvh (when present). Retargeted onto the Y-up built-in character, each
must stand: the head above the hips at every frame, the feet on the ground; a file turned about a
single axis retargets exactly like the Y-up original, and one also turned about its up axis walks the
same path turned. ``up="y"`` on a Z-up file (no correction) lies down, which shows the check bites.
"""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from skeletal.asset import Asset
from skeletal.cli import cli
from skeletal.anim.clip import Clip, Track
from skeletal.demo import demo_asset
from skeletal.errors import ClipError
from skeletal.tools.export import write_bvh
from skeletal.io.bvh import CMU_SCALE, parse_bvh, read_bvh
from skeletal.anim.pose import world_matrices
from skeletal.quat import quat_mul, quat_to_matrix
from skeletal.tools.retarget import canonical_names, detect_up, hip_height, retarget, standing_ankle_height
from skeletal.anim.rig import Rig
from skeletal.anim.sampling import sample

from fixtures.shared_assets import need as _need


def _axis_quat(axis, degrees) -> np.ndarray:
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    h = np.radians(degrees) / 2
    return np.append(axis * np.sin(h), np.cos(h))


RX90 = _axis_quat([1, 0, 0], 90)  # Y up -> Z up
RX_90 = _axis_quat([1, 0, 0], -90)  # Y up -> -Z up
RZ90 = _axis_quat([0, 0, 1], 90)  # Y up -> -X up
RZ_RX = quat_mul(_axis_quat([0, 0, 1], 90), RX90)  # Z up, and facing turned 90 degrees about Z

TURNS = {"z": RX90, "-z": RX_90, "-x": RZ90}


def turned_bvh(asset: Asset, clip: Clip, q: np.ndarray, name: str) -> Asset:
    """``asset``'s rig and ``clip`` with the roots turned by ``q`` (rest and motion), as a BVH file read
    back: what a Z-up mocap export looks like."""
    rig = asset.rig
    roots = set(np.flatnonzero(rig.parents < 0).tolist())
    rest = rig.rest.copy()
    m = quat_to_matrix(q)
    for r in roots:
        rest[r, :3] = m @ rest[r, :3]
        rest[r, 3:7] = quat_mul(q, rest[r, 3:7])
    tracks = []
    for t in clip.tracks:
        v = t.values.astype(np.float64)
        if t.node in roots and t.path == "translation":
            v = v @ m.T
        elif t.node in roots and t.path == "rotation":
            v = quat_mul(q, v)
        tracks.append(Track(t.node, t.path, t.interpolation, t.times, v.astype(np.float32)))
    text = write_bvh(Rig(rig.names, rig.parents, rest, rig.node_of, rig.index_of), Clip(clip.name, tracks))
    return Asset(parse_bvh(text, f"{name}.bvh"))


def demo_walk_bvh() -> Asset:
    demo = demo_asset()
    return Asset(parse_bvh(write_bvh(demo, "walk"), "walk.bvh"))


def cmu_walk() -> Asset:
    return Asset(read_bvh(_need("cmu_12_01_walk.bvh"), scale=CMU_SCALE))


def posed(rig: Rig, clip: Clip) -> np.ndarray:
    """World joint positions (T, N, 3) at the clip's keys."""
    times = np.unique(np.concatenate([t.times for t in clip.tracks])).astype(np.float64)
    pose, _ = sample(clip, times, rig.rest, np.zeros(len(rig) + 1, np.int64), np.zeros(0))
    return world_matrices(rig.parents, pose)[..., :3, 3]


def assert_stands(rig: Rig, clip: Clip) -> None:
    """Head above the hips at every frame; the lower ankle on the ground (within a tenth of the leg
    length of the standing ankle height at the median frame, never far below it)."""
    names = canonical_names(rig)
    pos = posed(rig, clip)
    head = names.get("head", names.get("neck"))
    assert np.all(pos[:, head, 1] > pos[:, names["hips"], 1] + 0.2 * hip_height(rig)), "head not above the hips"
    ankles = [names["left_foot"], names["right_foot"]]
    low = pos[:, ankles, 1].min(axis=1)
    stand = standing_ankle_height(rig)
    leg = hip_height(rig)
    assert abs(float(np.median(low)) - stand) < 0.1 * leg, (np.median(low), stand)
    assert low.min() > stand - 0.15 * leg


@pytest.fixture(scope="module")
def target() -> Asset:
    return demo_asset()


@pytest.mark.parametrize("source_kind", ["demo", "cmu"])
def test_turned_sources_stand_and_match(target, source_kind):
    source = demo_walk_bvh() if source_kind == "demo" else cmu_walk()
    walk = source.clips[0]
    assert detect_up(walk, source.rig) == "y"
    reference = retarget(walk, source.rig, target.rig)
    assert_stands(target.rig, reference)
    ref_pos = posed(target.rig, reference)
    size = float(np.ptp(ref_pos.reshape(-1, 3), axis=0).max())
    for axis, q in TURNS.items():
        turned = turned_bvh(source, walk, q, f"walk_{axis}")
        assert detect_up(turned.clips[0], turned.rig) == axis
        clip = retarget(turned.clips[0], turned.rig, target.rig)
        assert_stands(target.rig, clip)
        # Turned about one axis and turned back: the same retargeted walk (to BVH text's precision).
        assert np.abs(posed(target.rig, clip) - ref_pos).max() < 1e-4 * size, axis
        forced = retarget(turned.clips[0], turned.rig, target.rig, up=axis)
        assert np.abs(posed(target.rig, forced) - ref_pos).max() < 1e-4 * size
    # Z up and turned about Z: stands, and walks the same path turned about Y (same distances).
    turned = turned_bvh(source, walk, RZ_RX, "walk_zz")
    assert detect_up(turned.clips[0], turned.rig) == "z"
    clip = retarget(turned.clips[0], turned.rig, target.rig)
    assert_stands(target.rig, clip)
    hips = canonical_names(target.rig)["hips"]
    path, ref_path = posed(target.rig, clip)[:, hips], ref_pos[:, hips]
    np.testing.assert_allclose(path[:, 1], ref_path[:, 1], atol=1e-4 * size)
    step = np.linalg.norm(np.diff(path[:, [0, 2]], axis=0), axis=1)
    ref_step = np.linalg.norm(np.diff(ref_path[:, [0, 2]], axis=0), axis=1)
    np.testing.assert_allclose(step, ref_step, atol=1e-4 * size)


def test_uncorrected_z_up_lies_down(target):
    source = demo_walk_bvh()
    turned = turned_bvh(source, source.clips[0], RX90, "walk_z")
    clip = retarget(turned.clips[0], turned.rig, target.rig, up="y")
    with pytest.raises(AssertionError, match="head not above"):
        assert_stands(target.rig, clip)


def test_motion_decides_over_rest():
    """A Y-up rest skeleton whose root motion turns it Z-up (a -90 degree X turn in the root's rotation
    channel only, as MotionBuilder exports do) is Z-up: the motion, not the rest pose, decides."""
    source = demo_walk_bvh()
    rig, walk = source.rig, source.clips[0]
    root = int(np.flatnonzero(rig.parents < 0)[0])
    m = quat_to_matrix(RX90)
    tracks = []
    for t in walk.tracks:
        v = t.values.astype(np.float64)
        if t.node == root and t.path == "rotation":
            v = quat_mul(RX90, v)
        elif t.node == root and t.path == "translation":
            v = v @ m.T
        tracks.append(Track(t.node, t.path, t.interpolation, t.times, v.astype(np.float32)))
    clip = Clip("zwalk", tracks)
    if not any(t.node == root and t.path == "rotation" for t in walk.tracks):
        pytest.skip("the root has no rotation track")
    assert detect_up(None, rig) == "y"
    assert detect_up(clip, rig) == "z"
    assert_stands(demo_asset().rig, retarget(clip, rig, demo_asset().rig))


def test_bad_up_and_cli(tmp_path, target):
    source = demo_walk_bvh()
    with pytest.raises(ClipError, match="up must be"):
        retarget(source.clips[0], source.rig, target.rig, up="w")
    turned = turned_bvh(source, source.clips[0], RX90, "walk_z")
    bvh = tmp_path / "walk_z.bvh"
    bvh.write_text(write_bvh(turned, 0), encoding="utf-8")
    glb = str(tmp_path / "demo.glb")
    runner = CliRunner()
    assert runner.invoke(cli, ["demo", "--export", glb]).exit_code == 0
    import skeletal

    for up in ("auto", "z"):
        out = str(tmp_path / f"out_{up}.glb")
        result = runner.invoke(cli, ["retarget", str(bvh), glb, "--out", out, "--up", up])
        assert result.exit_code == 0, result.output
        done = skeletal.load(out)
        assert_stands(done.rig, done.clips[0])
    result = runner.invoke(cli, ["retarget", str(bvh), glb, "--out", str(tmp_path / "x.glb"), "--up", "q"])
    assert result.exit_code != 0 and "Traceback" not in result.output
