"""The playback frame as a named object (skeletal.playback.frame): what drops it, the jobs' checks when
they are built, and one meaning of ``palettes`` for the Mixer and the Crowd."""

import numpy as np
import pytest

from skeletal import Crowd, Mixer, Player
from skeletal.demo import demo_asset
from skeletal.errors import SkeletalError
from skeletal.playback.jobs import PLAYBACK_FIELDS, playback_job


@pytest.fixture(scope="module")
def asset():
    return demo_asset()


def test_replacing_a_job_input_drops_the_frame_in_place_changes_do_not(asset):
    """Assigning an attribute the jobs are built from (a FrameInput) drops ``mixer.frame`` and the next
    update builds a new one that uses the new array; changing an array in place keeps the frame."""
    mixer = Mixer(asset, 2)
    mixer.play("walk")
    mixer.update(0.1)
    frame = mixer.frame
    assert frame is not None and frame.call is not None
    mixer.layer_weight[:] = 1.0  # in place: the job holds the array itself
    mixer.update(0.1)
    assert mixer.frame is frame
    weights = mixer.layer_weight.copy()
    weights[:, 0] = 0.0  # nothing plays at weight 0: the rest pose
    mixer.layer_weight = weights
    assert mixer.frame is None
    mixer.update(0.1)
    assert mixer.frame is not None and mixer.frame is not frame
    np.testing.assert_array_equal(mixer.local_pose, np.broadcast_to(asset.rig.rest, mixer.local_pose.shape))
    mixer.slot("run")  # a slot added replaces the slot arrays
    assert mixer.frame is None


def test_a_job_is_checked_when_built(asset):
    """A PlaybackJob whose arrays disagree (shape, dtype, index range) is refused when built, naming the
    job and the field, instead of a kernel reading outside an array later."""
    mixer = Mixer(asset, 2)
    mixer.play("walk")
    fields = mixer._job_fields()
    assert set(fields) == set(PLAYBACK_FIELDS)
    playback_job(**fields)  # as the mixer built them: accepted
    bad = dict(fields, slot_clip=fields["slot_clip"] + 100)
    with pytest.raises(SkeletalError, match="PlaybackJob: field 'slot_clip' holds indices"):
        playback_job(**bad)
    bad = dict(fields, pose=np.zeros((3,) + fields["pose"].shape[1:]))  # 3 instances where the others have 2
    with pytest.raises(SkeletalError, match=r"PlaybackJob: field '\w+' has shape .* expected B = 3"):
        playback_job(**bad)
    bad = dict(fields, ist=fields["ist"].astype(np.int32))
    with pytest.raises(SkeletalError, match="PlaybackJob: field 'ist' has dtype int32"):
        playback_job(**bad)
    bad = dict(fields, parents=np.full_like(fields["parents"], len(fields["parents"])))
    with pytest.raises(SkeletalError, match="field 'parents'"):
        playback_job(**bad)


def test_palettes_mean_one_thing(asset):
    """Mixer and Crowd give ``palettes`` as one (B, J, R, 4) array of every skin's joints (R = 4 and 3),
    with ``skin_ranges`` and the per-skin views ``skin_palettes``; a Player's per-skin list views the
    same memory; the crowd's ``world`` has no setter that would drop its value."""
    mixer, crowd = Mixer(asset, 3), Crowd(asset, 3, wide=False)
    for m in (mixer, crowd):
        m.play("walk")
        m.update(0.2)
    joints = sum(len(s.joints) for s in asset.skins)
    assert mixer.palettes.shape == (3, joints, 4, 4) and crowd.palettes.shape == (3, joints, 3, 4)
    assert mixer.skin_ranges == crowd.skin_ranges
    for views in (mixer.skin_palettes, crowd.skin_palettes):
        assert len(views) == len(asset.skins)
    start, end = mixer.skin_ranges[0]
    assert np.shares_memory(mixer.skin_palettes[0], mixer.palettes)
    np.testing.assert_array_equal(mixer.skin_palettes[0], mixer.palettes[:, start:end])
    np.testing.assert_allclose(crowd.palettes, mixer.palettes[:, :, :3], atol=2e-3)  # nlerp + float32
    player = Player(asset)
    player.play("walk")
    player.update(0.2)
    assert np.shares_memory(player.palettes[0], player.mixer.palettes)
    np.testing.assert_array_equal(player.palettes[0], player.mixer.palettes[0, start:end])
    with pytest.raises(AttributeError):
        crowd.world = np.zeros((3, len(asset.rig), 4, 4))


def test_player_palettes_follow_a_replaced_palette_array(asset):
    """``Player.palettes`` is one tuple of views (read without a Python call), the same object from
    update to update; assigning ``mixer.palettes`` (a frame input) gives views of the new array at once,
    and the next update writes into them."""
    player = Player(asset)
    player.play("walk")
    player.update(0.1)
    views = player.palettes
    assert isinstance(views, tuple) and len(views) == len(asset.skins)
    player.update(0.1)
    assert player.palettes is views
    before = views[0].copy()
    player.mixer.palettes = np.zeros_like(player.mixer.palettes)
    assert player.palettes is not views and not player.palettes[0].any()
    assert np.shares_memory(player.palettes[0], player.mixer.palettes)
    player.update(0.1)
    assert player.palettes[0].any() and not np.array_equal(player.palettes[0], before)
    np.testing.assert_array_equal(views[0], before)  # the old array is left as it was


def test_every_job_kind_is_checked(asset):
    """The stage jobs are checked like the playback job: a jiggle chain whose state has the wrong number
    of instances, or whose joints leave the rig, is refused when its job is built."""
    from skeletal.playback.jobs import jiggle_job
    from skeletal.playback.springs import JiggleChains

    rig = asset.rig
    chain = [int(j) for j in range(len(rig)) if rig.parents[j] >= 0][:1]
    jiggle = JiggleChains(rig, 2, [chain])
    pose = np.repeat(rig.rest[None], 2, axis=0)
    world = np.repeat(np.eye(4)[None, None], 2, axis=0).repeat(len(rig), axis=1)
    fields = dict(world=world, placement=jiggle.placement, pose=pose, parents=rig.parents,
                  chain_start=jiggle.chain_start, joints=jiggle.joints, stiffness=jiggle.stiffness,
                  damping=jiggle.damping, gravity=jiggle.gravity, pos=jiggle.positions, vel=jiggle.velocities,
                  rest_len=jiggle.rest_length, initialised=jiggle.initialised, weight=jiggle.weight)
    jiggle_job(**fields)
    with pytest.raises(SkeletalError, match="JiggleJob: field 'pos'"):
        jiggle_job(**dict(fields, pos=np.zeros((3,) + jiggle.positions.shape[1:])))
    with pytest.raises(SkeletalError, match="JiggleJob: field 'joints' holds indices"):
        jiggle_job(**dict(fields, joints=jiggle.joints + len(rig)))
