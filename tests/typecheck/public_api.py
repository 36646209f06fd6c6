"""Uses of every export of ``skeletal`` (its ``__all__``), for ``mypy --strict``: a call to an
unannotated function, an ``Any`` leaking out of an annotated one where a type is expected, or a
wrong argument type fails the check. Never run (the functions are only type-checked)."""

from __future__ import annotations

import numpy as np

import skeletal
from skeletal import (Action, Asset, Clip, ClipError, Collider, ColliderFrame, ColliderSet, Crowd, Event, MeshInstance,
                      Mixer, ModelError, Player, Procedural, Rig, SkeletalError, SkinBinding, Track,
                      UnsupportedExtensionError)


def loading_and_baking(path: str) -> dict[str, np.ndarray]:
    asset: Asset = skeletal.load(path)
    rig: Rig = asset.rig
    clip: Clip = asset.clip("Walk")
    track: Track = clip.tracks[0]
    times: np.ndarray = skeletal.sample_times(clip, 30.0)
    pose, morph = skeletal.sample(clip, times, rig.rest, np.zeros(1, np.int64), np.zeros(0))
    world: np.ndarray = skeletal.world_matrices(rig.parents, pose[0])
    print(track.node, morph.shape, world.shape, skeletal.map_time(times, clip.duration, "repeat"))
    instances: list[MeshInstance] = asset.mesh_instances
    bindings: list[SkinBinding] = asset.skins
    print(len(instances), len(bindings), Rig.from_parents(["a", "b"], [-1, 0]).names)
    return skeletal.bake(asset, clip, times)


def clips(asset: Asset) -> None:
    made: Clip = skeletal.clip_from_keyframes("hop", [0], [0.5, 0.5], translations=np.zeros((2, 1, 3)))
    moved: Clip = skeletal.retarget(made, asset.rig, asset.rig)
    skeletal.export(asset, "out.glb", [moved])
    skeletal.write_bvh(asset, 0, "out.bvh")
    shorter: Clip = skeletal.cliptools.subclip(moved, 0.0, 0.25)
    print(shorter.duration)


def skinning(palette: np.ndarray, joints: np.ndarray, weights: np.ndarray, positions: np.ndarray) -> np.ndarray:
    w: np.ndarray = skeletal.normalize_weights(weights)
    packed: np.ndarray = skeletal.pack_palette(palette)
    out: np.ndarray = skeletal.skin(packed, joints, w, positions)[0]
    skeletal.skin_into(packed, joints, w, positions, None, None, out)
    qr, qd, scale, non_rigid = skeletal.dual_quaternions(palette)
    print(skeletal.pack_dq_palette(palette).shape, qr.shape, qd.shape, scale.shape, non_rigid.shape)
    print(skeletal.skin_dq(palette, joints, w, positions)[0].shape)
    skeletal.skin_dq_into(skeletal.pack_dq_palette(palette), joints, w, positions, None, None, out)
    return skeletal.skin_palette(palette, joints, palette)


def playback(asset: Asset) -> None:
    player = Player(asset, dtype=np.float32)
    action: Action = player.play("Walk")
    action.crossfade_to("Run", 0.2)
    player.crossfade("Idle", 0.3)
    player.add_layer("upper", mask=["Spine"])
    player.update(1 / 60)
    frame: ColliderFrame = player.colliders()
    print(frame, player.blend_space_1d([("Walk", 1.0), ("Run", 3.0)]), player.state_machine())
    print(player.enable_root_motion(), player.add_ik("leg", "two_bone", ["a", "b", "c"], target=(0.0, 0.0, 0.0)))
    mixer = Mixer(asset, 4)
    mixer.play("Walk", offset=np.zeros(4))
    mixer.update(1 / 60)
    crowd = Crowd(asset, 100)
    crowd.play("Walk", offsets=np.zeros(100))
    crowd.update(1 / 60)
    proc = Procedural(player)
    proc.place((0.0, 0.0, 0.0), 0.0)
    proc.foot_placement("flat")
    proc.look_at((0.0, 1.5, 2.0))
    events: list[Event] = player.events()
    print(events)


def batch_and_colliders(inputs: str) -> None:
    summary = skeletal.run_batch("info", inputs, "out")
    print(summary.failed)
    c = Collider("hand", 0, "sphere", "hit", 0.1, np.zeros(3), np.zeros(3))
    print(c.moved(radius=0.2), ColliderSet([c]))


def web(asset: Asset) -> str:
    print(skeletal.show(asset, clip="Walk"))
    return skeletal.to_html(asset, "page.html")


def errors() -> list[type[SkeletalError]]:
    print(skeletal.__version__, skeletal.ik)
    return [SkeletalError, ModelError, ClipError, UnsupportedExtensionError]
