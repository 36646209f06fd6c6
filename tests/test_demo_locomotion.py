"""The built-in character's locomotion set: clips that move over the ground with planted feet."""

from __future__ import annotations

import numpy as np
import pytest

from skeletal.demo import demo_asset, locomotion_asset
from skeletal.demo.locomotion import SET, gait_speed
from skeletal.anim.pose import world_matrices
from skeletal.anim.sampling import sample


@pytest.fixture(scope="module")
def asset():
    return locomotion_asset()


def _world(asset, name, fps=120.0):
    clip = asset.clip(name)
    times = np.arange(0.0, clip.duration, 1.0 / fps)
    pose, _ = sample(clip, times, asset.rig.rest, asset.morph_start, asset.rest_morph)
    return times, world_matrices(asset.rig.parents, pose)


def test_the_demo_clips_are_kept_and_the_set_added(asset):
    assert [c.name for c in demo_asset().clips] == ["idle", "walk", "run", "wave"]
    names = [c.name for c in asset.clips]
    assert names[:4] == ["idle", "walk", "run", "wave"]
    assert names[4:] == [spec.name for spec in SET]
    for original in ("idle", "walk", "run", "wave"):
        assert asset.clip(original).duration == demo_asset().clip(original).duration


@pytest.mark.parametrize("name", ["walk_forward", "run_forward", "walk_turn_left"])
def test_root_motion_carries_the_planted_feet(asset, name):
    """The demo's keyframed stance is not at constant speed (its ankle slides back at 0.7-1.5 m/s in
    place), so some slide remains; far less than in place."""
    times, world = _world(asset, name)
    slides = []
    for side in ("left", "right"):
        toe = world[:, asset.rig.find(f"{side}_toe"), :3, 3]
        ankle = world[:, asset.rig.find(f"{side}_foot"), :3, 3]
        planted = toe[:, 1] < toe[:, 1].min() + 0.01
        speed = np.linalg.norm(np.gradient(ankle[:, [0, 2]], times, axis=0), axis=1)
        slides.append(np.median(speed[planted]))
    root_speed = np.linalg.norm(np.gradient(world[:, 0, [0, 2], 3], times, axis=0), axis=1).mean()
    assert root_speed > 0.5
    assert max(slides) < 0.5 * root_speed  # in place, the planted foot slides at about the root's speed


def test_speeds_turns_starts_and_stops(asset):
    walk = gait_speed(demo_asset(), demo_asset().clip("walk"))
    assert 0.8 < walk < 1.4
    for spec in SET:
        times, world = _world(asset, spec.name)
        root = world[:, 0, :3, 3]
        speed = np.linalg.norm(np.diff(root[:, [0, 2]], axis=0), axis=1) / np.diff(times)
        heading = np.arctan2(world[:, 0, 0, 2], world[:, 0, 2, 2])  # the root's +Z axis, about +Y
        turned = np.degrees(np.unwrap(heading)[-1] - heading[0])
        assert abs(turned - spec.turn * times[-1]) < 2.0, spec.name
        if spec.ramp == "start":
            assert speed[0] < 0.05 and speed[-1] > 0.8 * speed.max(), spec.name
        elif spec.ramp == "stop":
            assert speed[-1] < 0.05 and speed[0] > 0.8 * speed.max(), spec.name
        else:
            assert speed.std() < 0.01 * speed.mean(), spec.name
    assert gait_speed(demo_asset(), demo_asset().clip("run")) > 3 * walk
