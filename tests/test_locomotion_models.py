"""Locomotion sets from any model's idle/walk/run clips (:mod:`skeletal.playback.locomotion.gaits`):
the built-in character exported to GLB and to a folder of BVH takes, the shared Soldier and
RobotExpressive, and the one-line errors of models without usable clips."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
from click.testing import CliRunner

import skeletal
from fixtures.shared_assets import need
from skeletal.anim.pose import world_matrices
from skeletal.anim.sampling import sample
from skeletal.demo import demo_asset
from skeletal.errors import SkeletalError
from skeletal.io.bvh import format_bvh
from skeletal.io.gltf_write import glb_bytes
from skeletal.playback.locomotion import MotionMatching
from skeletal.playback.locomotion.gaits import locomotion_set


@pytest.fixture(scope="module")
def demo_glb(tmp_path_factory):
    """The built-in character (in-place idle, walk, run and wave clips) as a .glb file."""
    path = tmp_path_factory.mktemp("glb") / "demo.glb"
    path.write_bytes(glb_bytes(demo_asset().document))
    return path


def _write_bvh(asset, clip_name: str, path, seconds: float | None = None):
    clip = asset.clip(clip_name)
    times = np.arange(0.0, seconds or clip.duration, 1 / 60)
    pose, _ = sample(clip, times, asset.rig.rest, asset.morph_start, asset.rest_morph, loop="repeat")
    rig = asset.rig
    joints = [i for i, n in enumerate(rig.names) if n != "body"]  # the skeleton, not the mesh node
    path.write_text(format_bvh(rig.names, rig.parents, world_matrices(rig.parents, pose),
                               world_matrices(rig.parents, rig.rest), 1 / 60, nodes=joints))


@pytest.fixture(scope="module")
def bvh_folder(tmp_path_factory):
    """Three BVH takes of the built-in character's skeleton: idle, walk, run (and a wave)."""
    folder = tmp_path_factory.mktemp("mocap")
    asset = demo_asset()
    for name in ("idle", "walk", "run", "wave"):
        _write_bvh(asset, name, folder / f"take_{name}.bvh")
    return folder


def _walk(moves, goal_mps, seconds=4.0):
    """Drive a Player of the set toward ``goal_mps`` (m/s, scaled to the model); the velocity over the
    last second (m/s) and the clips of that second."""
    mm = MotionMatching(skeletal.Player(moves.asset), moves.database, warping=moves.warping_ok)
    mm.set_goal(np.asarray(goal_mps) * moves.scale)
    positions, clips = [], []
    for _ in range(int(seconds * 60)):
        mm.update(1 / 60)
        positions.append(mm.position.copy())
        clips.append(mm.clip)
    v = (positions[-1] - positions[-61])[[0, 2]] / moves.scale
    return v, set(clips[-60:])


def _check_gaits(moves, walk_goal=1.0):
    v, clips = _walk(moves, (0.0, walk_goal))
    assert v[1] > 0.7 * walk_goal and abs(v[0]) < 0.3 * walk_goal, v
    assert all(c.startswith("walk") for c in clips), clips
    v, clips = _walk(moves, (walk_goal, 0.0), seconds=5.0)  # to the character's left: it turns
    assert v[0] > 0.6 * walk_goal and abs(v[1]) < 0.5 * v[0], v


def test_a_glb_with_idle_walk_and_run_makes_a_set_that_walks_and_turns(demo_glb):
    moves = locomotion_set(demo_glb)
    assert moves.gaits == {"idle": "idle", "walk": "walk", "run": "run"}  # not the wave
    assert moves.warping_ok
    assert moves.scale == pytest.approx(1.0, rel=0.3)
    assert {"walk_forward", "walk_turn_left", "walk_start", "run_stop", "idle_loop"} <= set(moves.generated)
    assert set(moves.database.clip_names) == set(moves.generated)
    assert 0.5 < moves.speeds["walk"] < moves.speeds["run"]
    # the generated clips move the pelvis along +Z at the gait's speed, the feet planted
    walk = moves.asset.clip("walk_forward")
    pelvis = moves.asset.rig.find("hips")
    pose, _ = sample(walk, np.array([0.0, 2.0]), moves.asset.rig.rest, moves.asset.morph_start,
                     moves.asset.rest_morph)
    moved = np.diff(world_matrices(moves.asset.rig.parents, pose)[:, pelvis, :3, 3], axis=0)[0]
    assert moved[2] == pytest.approx(2.0 * moves.speeds["walk"], rel=0.05) and abs(moved[0]) < 0.05
    _check_gaits(moves)


def test_a_bvh_folder_is_one_model_and_clips_choose(bvh_folder):
    moves = locomotion_set(bvh_folder)
    assert moves.gaits == {"idle": "take_idle", "walk": "take_walk", "run": "take_run"}
    _check_gaits(moves)
    chosen = locomotion_set(bvh_folder, ["take_walk"])
    assert chosen.gaits == {"walk": "take_walk"}
    assert not any(c.startswith(("run", "idle")) for c in chosen.generated)


def test_clips_can_be_given_their_roles(bvh_folder):
    """``role=name`` entries (and a dict) choose which clip plays which gait, whatever its name says."""
    from skeletal.playback.locomotion.gaits import clip_names_option

    moves = locomotion_set(bvh_folder, clip_names_option("run=take_walk, idle=take_idle"))
    assert moves.gaits == {"run": "take_walk", "idle": "take_idle"}
    assert "run_forward" in moves.generated and not any(c.startswith("walk") for c in moves.generated)
    assert moves.speeds["run"] == pytest.approx(locomotion_set(bvh_folder, ["take_walk"]).speeds["walk"])
    mixed = locomotion_set(bvh_folder, {"walk": "take_run", "idle": "take_idle"})
    assert mixed.gaits == {"walk": "take_run", "idle": "take_idle"}
    with pytest.raises(SkeletalError, match="jog=take_run: the role must be one of idle, walk, run"):
        locomotion_set(bvh_folder, ["jog=take_run"])
    with pytest.raises(SkeletalError, match="two clips for walk"):
        locomotion_set(bvh_folder, ["walk=take_run", "walk=take_walk"])
    with pytest.raises(SkeletalError, match="no clip 'nope'"):
        locomotion_set(bvh_folder, ["walk=nope"])


def test_models_without_usable_clips_are_refused_in_one_line(tmp_path, bvh_folder):
    asset = demo_asset()
    waving = copy.copy(asset)
    waving.clips = [asset.clip("wave")]
    with pytest.raises(SkeletalError, match="no usable locomotion clips .*wave.*--clips"):
        locomotion_set(waving)
    with pytest.raises(SkeletalError, match="no clip 'jog'"):
        locomotion_set(bvh_folder, ["take_walk", "jog"])
    with pytest.raises(SkeletalError, match="no walking or running clip"):
        locomotion_set(bvh_folder, ["take_idle"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(SkeletalError, match="without .bvh files"):
        locomotion_set(tmp_path / "empty")
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    for f in ("take_walk.bvh", "take_run.bvh"):
        (mixed / f).write_text((bvh_folder / f).read_text())
    text = (bvh_folder / "take_idle.bvh").read_text().replace("JOINT left_shin", "JOINT left_knee")
    (mixed / "take_idle.bvh").write_text(text)
    with pytest.raises(SkeletalError, match="skeleton differs"):
        locomotion_set(mixed)
    # the command: one line on stderr, exit status 2, no traceback
    from skeletal.cli import cli

    glb = tmp_path / "waving.glb"
    document = copy.copy(asset.document)
    document.animations = [a for a in asset.document.animations if a.name == "wave"]
    glb.write_bytes(glb_bytes(document))
    result = CliRunner().invoke(cli, ["locomotion", str(glb), "--out", str(tmp_path / "x.png")])
    assert result.exit_code == 2 and "no usable locomotion clips" in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1
    result = CliRunner().invoke(cli, ["locomotion", "--clips", "Walk", "--out", str(tmp_path / "x.png")])
    assert result.exit_code == 2 and "give a MODEL" in result.output


@pytest.mark.parametrize("name, gaits, warping", [("Soldier.glb", ("Idle", "Walk", "Run"), True),
                                                   ("RobotExpressive.glb", ("Idle", "Walking", "Running"), True)])
def test_shared_models_walk_run_and_turn(name, gaits, warping):
    moves = locomotion_set(need(name))
    assert tuple(moves.gaits[r] for r in ("idle", "walk", "run")) == gaits
    assert moves.warping_ok == warping  # RobotExpressive's feet: IK controls off its legs, followed
    _check_gaits(moves)
    run = moves.speeds["run"] / moves.scale  # m/s
    v, clips = _walk(moves, (0.0, run))
    assert v[1] > 0.7 * run and all(c.startswith("run") for c in clips), (v, clips)
    assert math.isfinite(moves.scale)
