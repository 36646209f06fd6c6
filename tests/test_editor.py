"""The animation editor's document/command model (no GL): every command applied and reverted, undo/redo
sequences, save and reload equality, colliders (schema, asset.colliders, player.colliders()), bad input.
The window itself is tested in tests/test_editor_window.py."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from fixtures import demo_asset
import skeletal
from skeletal.anim.clip import Clip, Track
from skeletal.anim.colliders import Collider, ColliderSet
from skeletal.editor import (
    AddCollider, Batch, ClearPoseEdits, DeleteClip, DeleteKeys, EditDocument, EditError, InsertPoseKeys,
    KeyColliderVisibility, MoveKeys, PasteKeys, RemoveCollider, RenameClip, SetClipLength, SetCollider, SetFps,
    SetInterpolation, SetKeyValue, SetPose, SetPoses, autosave_path, copy_keys, duplicate_clip, ik_chain, ik_pose,
    new_clip, TransformCollider, collider_gizmo_matrix, transformed_collider,
)
from skeletal.editor import keys as K
from skeletal.errors import ModelError
from skeletal.quat import quat_mul


_demo = demo_asset  # the shared, cached demo character (tests/fixtures)


@pytest.fixture
def doc(tmp_path):
    return EditDocument(_demo(), str(tmp_path / "demo.glb"))


def snapshot(doc: EditDocument):
    """Everything a save writes, as comparable plain data."""
    clips = [(c.name, [(t.node, t.path, t.interpolation, t.times.tobytes(), t.values.tobytes()) for t in c.tracks])
             for c in doc.clips]
    info = [(i.fps, sorted((k, v.times.tolist(), v.visible.tolist()) for k, v in i.visibility.items())) for i in doc.info]
    cols = [json.dumps(c.to_json()) + str(c.node) for c in doc.colliders]
    edits = sorted((n, v.tobytes()) for n, v in doc.pose_edits.items())
    return clips, info, cols, edits


def rot_about_z(deg: float) -> np.ndarray:
    h = np.radians(deg) / 2
    return np.array([0.0, 0.0, np.sin(h), np.cos(h)])


CHEST = 3  # rig index of the demo's chest


def check_roundtrip(doc, command_factory):
    """Apply, revert, redo: the states before and after are restored exactly."""
    before, was_dirty = snapshot(doc), doc.dirty
    cmd = doc.execute(command_factory())
    after = snapshot(doc)
    assert after != before and doc.dirty
    doc.undo()
    assert snapshot(doc) == before and doc.dirty == was_dirty
    doc.redo()
    assert snapshot(doc) == after and doc.dirty
    return cmd


# -- key helpers ----------------------------------------------------------------------------------------


def test_key_helpers_analytic():
    tr = Track(0, "translation", "LINEAR", np.array([0, 1], np.float32), np.array([[0, 0, 0], [2, 0, 0]], np.float32))
    ins = K.insert_key(tr, 0.25, [5, 0, 0])
    assert ins.times.tolist() == [0, 0.25, 1] and ins.values[1, 0] == 5
    assert K.insert_key(ins, 0.25, [7, 0, 0]).key_count == 3  # replaces the key there
    assert K.delete_keys(ins, [1]).times.tolist() == [0, 1]
    assert K.delete_keys(ins, [0, 1, 2]) is None
    moved = K.move_keys(ins, [1], 0.5)
    assert moved.times.tolist() == [0, 0.75, 1]
    assert K.move_keys(ins, [1], -5).times.tolist() == [0, 1]  # clamped at 0, lands on key 0 and replaces it
    assert K.move_keys(ins, [1], -5).values[0, 0] == 5
    cubic = K.set_interpolation(tr, "CUBICSPLINE")
    assert cubic.values.shape == (6, 3)
    np.testing.assert_allclose(cubic.values[0::3, 0], [2, 2])  # slope 2 units/s in and out: the same line
    np.testing.assert_allclose(K.sample_track(cubic, 0.5), [1, 0, 0], atol=1e-6)
    back = K.set_interpolation(cubic, "STEP")
    assert back.values.shape == (2, 3) and back.interpolation == "STEP"
    np.testing.assert_allclose(K.sample_track(back, 0.9), [0, 0, 0])
    trimmed = K.trim_track(tr, 0.5, 1.0)
    assert trimmed.times.tolist() == [0, 0.5] and trimmed.values[1, 0] == pytest.approx(1.0)
    held = K.trim_track(tr, 2.0, 1.0)
    assert held.times.tolist() == [0, 1, 2] and held.values[2, 0] == 2
    with pytest.raises(skeletal.ClipError):
        K.insert_key(tr, -1.0, [0, 0, 0])
    with pytest.raises(skeletal.ClipError):
        K.insert_key(tr, 0.5, [np.nan, 0, 0])


def test_rotation_keys_are_canonical_and_take_the_short_way():
    q = np.array([[0.1, 0.2, 0.3, 0.9]], np.float32)
    c = K.canonical_quats(q)
    again = (c.astype(np.float64) / np.linalg.norm(c.astype(np.float64), axis=1, keepdims=True)).astype(np.float32)
    assert np.array_equal(c, again)  # the glTF writer's normalisation leaves it as it is
    tr = Track(0, "rotation", "LINEAR", np.array([0, 1], np.float32), np.array([[0, 0, 0, 1], [0, 0, 0, 1]], np.float32))
    flipped = K.insert_key(tr, 0.5, [0, 0, 0, -1])  # the same rotation, other hemisphere: stored as +w
    assert flipped.values[1, 3] == 1.0


def test_guess_fps():
    times = np.arange(0, 25, dtype=np.float32) / 24
    clip = Clip("c", [Track(0, "translation", "LINEAR", times, np.zeros((25, 3), np.float32))])
    assert K.guess_fps(clip) == 24.0


# -- commands -------------------------------------------------------------------------------------------


def test_pose_edit_insert_key_and_undo(doc):
    t = 0.5
    shown = doc.pose(0, t)
    target = shown[CHEST].copy()
    target[3:7] = quat_mul(rot_about_z(30), shown[CHEST, 3:7])
    check_roundtrip(doc, lambda: SetPose(doc, CHEST, target))
    assert np.allclose(doc.pose(0, t)[CHEST, 3:7], target[3:7] / np.linalg.norm(target[3:7]))
    assert not np.allclose(doc.clip_pose(0, t)[CHEST, 3:7], target[3:7])  # not keyed yet
    check_roundtrip(doc, lambda: InsertPoseKeys(doc, 0, t, [CHEST]))
    assert CHEST not in doc.pose_edits  # keyed: the edit is now in the clip
    np.testing.assert_allclose(doc.clip_pose(0, t)[CHEST, 3:7], target[3:7], atol=1e-6)
    doc.undo()
    assert CHEST in doc.pose_edits  # undoing the key brings the unkeyed edit back
    doc.undo()
    assert not doc.pose_edits and not doc.dirty


def test_insert_whole_pose_keys_every_joint(doc):
    cmd = check_roundtrip(doc, lambda: InsertPoseKeys(doc, 1, 0.3))
    clip = doc.clips[1]
    keyed = {tr.node for tr in clip.tracks if K.find_key(tr, 0.3) >= 0 and tr.path == "rotation"}
    assert set(doc.joints) <= keyed
    assert len(cmd.nodes) >= len(doc.joints)
    # the keyed pose is the pose that was shown
    np.testing.assert_allclose(doc.clip_pose(1, 0.3), cmd.before and doc.clip_pose(1, 0.3), atol=1e-6)


def test_insert_key_keeps_the_pose_shown(doc):
    before = doc.clip_pose(1, 0.37)
    doc.execute(InsertPoseKeys(doc, 1, 0.37))
    np.testing.assert_allclose(doc.clip_pose(1, 0.37), before, atol=2e-6)


def some_keys(doc, clip=1, n=3):
    c = doc.clips[clip]
    tr = next(t for t in c.tracks if t.path == "rotation" and t.key_count > n + 1)
    return [(tr.node, tr.path, float(tr.times[k])) for k in range(1, n + 1)], tr


def test_delete_move_keys(doc):
    refs, tr = some_keys(doc)
    check_roundtrip(doc, lambda: DeleteKeys(doc, 1, refs))
    new = doc.clips[1].tracks[K.track_index(doc.clips[1], tr.node, "rotation")]
    assert new.key_count == tr.key_count - 3
    doc.undo()
    check_roundtrip(doc, lambda: MoveKeys(doc, 1, refs[:1], 0.01))
    new = doc.clips[1].tracks[K.track_index(doc.clips[1], tr.node, "rotation")]
    assert K.find_key(new, refs[0][2] + 0.01) >= 0 and K.find_key(new, refs[0][2]) < 0
    with pytest.raises(EditError, match="no rotation key"):
        DeleteKeys(doc, 1, [(tr.node, "rotation", 0.123456)])


def test_deleting_every_key_removes_the_channel(doc):
    tr = doc.clips[1].tracks[0]
    refs = [(tr.node, tr.path, float(t)) for t in tr.times]
    check_roundtrip(doc, lambda: DeleteKeys(doc, 1, refs))
    assert K.track_index(doc.clips[1], tr.node, tr.path) < 0


def test_drags_merge_into_one_undo_step(doc):
    refs, tr = some_keys(doc, n=1)
    before = snapshot(doc)
    t = refs[0][2]
    for _step in range(5):  # a drag: five moves, each from where the last left the key
        doc.execute(MoveKeys(doc, 1, [(tr.node, "rotation", t)], 0.002, merge_key="drag"))
        t = float(np.float32(t + 0.002))
    doc.end_merge()
    assert len(doc.undo_stack) == 1 and doc.undo_stack[0].label == "move 1 key(s) by +0.010s"
    doc.undo()
    assert snapshot(doc) == before


def test_set_key_value_and_interpolation(doc):
    refs, tr = some_keys(doc, n=1)
    q = rot_about_z(10)
    check_roundtrip(doc, lambda: SetKeyValue(doc, 1, refs[0], q))
    ch = (tr.node, "rotation")
    for mode in ("CUBICSPLINE", "STEP", "LINEAR"):
        if mode == doc.clips[1].tracks[K.track_index(doc.clips[1], *ch)].interpolation:
            continue
        check_roundtrip(doc, lambda: SetInterpolation(doc, 1, [ch], mode))
        assert doc.clips[1].tracks[K.track_index(doc.clips[1], *ch)].interpolation == mode
    with pytest.raises(EditError):
        SetInterpolation(doc, 1, [ch], "BEZIER")


def test_copy_paste(doc):
    refs, tr = some_keys(doc, n=2)
    copied = copy_keys(doc, 1, refs)
    assert [k.offset for k in copied][0] == 0.0
    check_roundtrip(doc, lambda: PasteKeys(doc, 1, 0.8, copied))
    new = doc.clips[1].tracks[K.track_index(doc.clips[1], tr.node, "rotation")]
    k = K.find_key(new, doc.snap_time(1, 0.8))
    assert k >= 0
    np.testing.assert_allclose(K.key_values(new)[k], copied[0].value, atol=1e-6)
    # pasted onto another bone creates its channel when it has none
    other = next(n for n in range(len(doc.asset.rig)) if K.track_index(doc.clips[1], n, "rotation") < 0)
    check_roundtrip(doc, lambda: PasteKeys(doc, 1, 0.0, copied, {tr.node: other}))
    assert K.track_index(doc.clips[1], other, "rotation") >= 0
    with pytest.raises(EditError, match="nothing to paste"):
        PasteKeys(doc, 1, 0.0, [])


def test_clip_length_and_fps(doc):
    d = doc.clips[1].duration
    check_roundtrip(doc, lambda: SetClipLength(doc, 1, d / 2))
    assert doc.clips[1].duration == pytest.approx(d / 2, abs=1e-6)
    doc.undo()
    check_roundtrip(doc, lambda: SetClipLength(doc, 1, d * 2))
    assert doc.clips[1].duration == pytest.approx(d * 2, abs=1e-6)
    check_roundtrip(doc, lambda: SetFps(doc, 1, 24))
    assert doc.info[1].fps == 24 and doc.snap_time(1, 0.51) == pytest.approx(12 / 24)
    for bad in (0, -1, float("nan")):
        with pytest.raises(EditError):
            SetClipLength(doc, 1, bad)
    with pytest.raises(EditError):
        SetFps(doc, 1, 0)


def test_clip_management(doc):
    names = doc.clip_names()
    check_roundtrip(doc, lambda: new_clip(doc, "pose"))
    assert doc.clip_names() == names + ["pose"] and doc.clips[-1].duration == 1.0
    np.testing.assert_allclose(doc.clip_pose(len(doc.clips) - 1, 0.5), doc.asset.rig.rest, atol=1e-6)
    check_roundtrip(doc, lambda: duplicate_clip(doc, 1))
    assert doc.clip_names()[2] == "walk copy"
    check_roundtrip(doc, lambda: RenameClip(doc, 2, "stroll"))
    check_roundtrip(doc, lambda: DeleteClip(doc, 0))
    assert doc.clip_names() == ["walk", "stroll", "run", "wave", "pose"]
    with pytest.raises(EditError, match="already"):
        RenameClip(doc, 0, "run")
    with pytest.raises(EditError, match="already"):
        new_clip(doc, "run")
    with pytest.raises(EditError, match="no clip"):
        DeleteClip(doc, 99)


def test_undo_redo_sequences(doc):
    states = [snapshot(doc)]
    refs, tr = some_keys(doc)
    makers = [
        lambda: SetPose(doc, CHEST, np.r_[0, 0.1, 0, rot_about_z(20), 1, 1, 1]),
        lambda: InsertPoseKeys(doc, 1, 0.2, [CHEST]),
        lambda: DeleteKeys(doc, 1, refs[:1]),
        lambda: SetFps(doc, 1, 25),
        lambda: new_clip(doc, "fresh"),
        lambda: AddCollider(doc, Collider("fist", 5, "sphere", "hit", 0.1, [0, 0.1, 0], [0, 0.1, 0])),
    ]
    for make in makers:
        doc.execute(make())
        states.append(snapshot(doc))
    for k in range(len(makers), 0, -1):  # all the way back...
        doc.undo()
        assert snapshot(doc) == states[k - 1]
    assert doc.undo() is None and not doc.dirty
    for k in range(1, len(makers) + 1):  # ...and forward again
        doc.redo()
        assert snapshot(doc) == states[k]
    assert doc.redo() is None
    doc.undo()
    doc.undo()
    doc.execute(SetFps(doc, 0, 60))  # a new edit drops the redo stack
    assert not doc.redo_stack and doc.redo() is None
    doc.execute(Batch([SetFps(doc, 0, 12), SetFps(doc, 1, 12)], "both 12"))
    doc.undo()
    assert doc.info[0].fps == 60


def test_saved_state_tracks_the_history(doc, tmp_path):
    doc.execute(SetFps(doc, 0, 24))
    doc.save()
    assert not doc.dirty
    doc.undo()
    assert doc.dirty  # undoing past the save makes it unsaved
    doc.redo()
    assert not doc.dirty


# -- colliders ------------------------------------------------------------------------------------------


def test_collider_commands(doc):
    fist = Collider("fist", 7, "sphere", "hit", 0.08, [0, 0.1, 0], [0, 0, 0])
    check_roundtrip(doc, lambda: AddCollider(doc, fist))
    body = Collider("body", CHEST, "capsule", "hurt", 0.2, [0, -0.1, 0], [0, 0.2, 0])
    check_roundtrip(doc, lambda: AddCollider(doc, body))
    check_roundtrip(doc, lambda: SetCollider(doc, 0, fist.moved(radius=0.12, center=np.array([0, 0.2, 0.0]))))
    check_roundtrip(doc, lambda: KeyColliderVisibility(doc, 1, "fist", 0.0, False))
    check_roundtrip(doc, lambda: KeyColliderVisibility(doc, 1, "fist", 0.3, True))
    check_roundtrip(doc, lambda: SetCollider(doc, 0, doc.colliders[0].moved(name="punch", tag="hurt")))
    assert "punch" in doc.info[1].visibility and "fist" not in doc.info[1].visibility  # keys follow the rename
    check_roundtrip(doc, lambda: KeyColliderVisibility(doc, 1, "punch", 0.3, None))
    check_roundtrip(doc, lambda: RemoveCollider(doc, 0))
    assert "punch" not in doc.info[1].visibility
    with pytest.raises(EditError, match="already"):
        AddCollider(doc, body)
    with pytest.raises(ValueError):
        Collider("x", 0, "box", "hit", 1.0, [0, 0, 0], [0, 0, 0])
    with pytest.raises(ValueError):
        Collider("x", 0, "sphere", "hit", -1.0, [0, 0, 0], [0, 0, 0])


def test_collider_gizmo_move_turn_resize_analytic(doc):
    """The viewport gizmo's frame for a collider and the collider a dragged frame gives back: a bone
    at (1, 0, 0), scaled 2, turned 90 degrees about z (local +y -> world -x)."""
    bone = np.eye(4)
    bone[:3, :3] = np.array([[0, -1, 0], [1, 0, 0], [0, 0, 1]]) * 2.0
    bone[:3, 3] = (1, 0, 0)
    cap = Collider("arm", 0, "capsule", "hurt", 0.5, [0, 0, 0], [0, 1, 0])
    frame = collider_gizmo_matrix(cap, bone)
    np.testing.assert_allclose(frame[:3, 3], [0, 0, 0], atol=1e-12)  # the middle: local (0, .5, 0) -> world
    np.testing.assert_allclose(frame[:3, 1], [-1, 0, 0], atol=1e-12)  # Y along the axis, unit length
    np.testing.assert_allclose(frame[:3, :3].T @ frame[:3, :3], np.eye(3), atol=1e-12)
    assert transformed_collider(cap, bone, frame).same_as(cap, 1e-12)  # an untouched gizmo changes nothing
    # move 0.4 along world +y: local +x by 0.2 (the bone scales by 2)
    moved = frame.copy()
    moved[:3, 3] += (0, 0.4, 0)
    m = transformed_collider(cap, bone, moved)
    np.testing.assert_allclose(m.center, [0.2, 0, 0], atol=1e-12)
    np.testing.assert_allclose(m.end, [0.2, 1, 0], atol=1e-12)
    assert m.radius == cap.radius
    # scale: Y doubles the length about the middle, X/Z (mean 1.5) the radius
    scaled = frame.copy()
    scaled[:3, :3] = frame[:3, :3] * np.array([1.0, 2.0, 2.0])
    r = transformed_collider(cap, bone, scaled)
    np.testing.assert_allclose(r.center, [0, -0.5, 0], atol=1e-12)
    np.testing.assert_allclose(r.end, [0, 1.5, 0], atol=1e-12)
    assert r.radius == pytest.approx(0.75)
    # turn 90 degrees about world z: the axis (world -x) becomes world -y, i.e. local -x; the middle stays
    turn = np.array([[0, -1, 0], [1, 0, 0], [0, 0, 1]], np.float64)
    turned = frame.copy()
    turned[:3, :3] = turn @ frame[:3, :3]
    t = transformed_collider(cap, bone, turned)
    np.testing.assert_allclose(0.5 * (t.center + t.end), [0, 0.5, 0], atol=1e-12)
    np.testing.assert_allclose(t.end - t.center, [-1, 0, 0], atol=1e-12)
    world = ColliderSet([t]).world(bone[None])
    assert np.linalg.norm(world.b - world.a) == pytest.approx(2.0)  # same world length
    # a sphere: the mean of the three scales is its radius factor
    ball = Collider("ball", 0, "sphere", "hit", 0.2, [0, 1, 0], [0, 1, 0])
    f = collider_gizmo_matrix(ball, bone)
    np.testing.assert_allclose(f[:3, 3], [-1, 0, 0], atol=1e-12)
    f[:3, :3] *= np.array([1.0, 2.0, 3.0])
    assert transformed_collider(ball, bone, f).radius == pytest.approx(0.4)
    f[:3, :3] = 0.0
    with pytest.raises(EditError, match="nothing"):
        transformed_collider(ball, bone, f)


def test_collider_gizmo_drag_is_one_undo_step(doc):
    doc.execute(AddCollider(doc, Collider("torso", CHEST, "capsule", "hurt", 0.2, [0, -0.1, 0], [0, 0.2, 0])))
    before = snapshot(doc)
    world = doc.world(doc.pose(0, 0.0))
    start = doc.colliders[0]
    frame = collider_gizmo_matrix(start, world[CHEST])
    for k in range(1, 6):  # five frames of one drag: the gizmo moved 2 cm more each frame
        f = frame.copy()
        f[:3, 3] += (0.02 * k, 0, 0)
        doc.execute(TransformCollider(doc, 0, start, world[CHEST], f, merge_key=("drag", 1)))
    doc.end_merge()
    end = doc.colliders[0]
    got = ColliderSet([end]).world(world).a[0] - ColliderSet([start]).world(world).a[0]
    np.testing.assert_allclose(got, [0.1, 0, 0], atol=1e-9)  # the world offset of the last frame
    assert doc.undo_stack[-1].label == "move collider 'torso'"
    doc.undo()
    assert snapshot(doc) == before  # one step undoes the whole drag
    doc.redo()
    assert doc.colliders[0].same_as(end, 1e-12)
    check_roundtrip(doc, lambda: TransformCollider(doc, 0, doc.colliders[0], world[CHEST], frame))


def test_collider_world_query_analytic():
    # node 0 at (1, 0, 0) scaled 2, rotated 90 degrees about z: local +y -> world -x
    world = np.eye(4)
    world[:3, :3] = np.array([[0, -1, 0], [1, 0, 0], [0, 0, 1]]) * 2.0
    world[:3, 3] = (1, 0, 0)
    cs = ColliderSet([Collider("a", 0, "capsule", "hurt", 0.5, [0, 0, 0], [0, 1, 0]),
                      Collider("b", 0, "sphere", "hit", 0.25, [1, 0, 0], [0, 0, 0])])
    f = cs.world(world[None])
    np.testing.assert_allclose(f.a, [[1, 0, 0], [1, 2, 0]])
    np.testing.assert_allclose(f.b, [[-1, 0, 0], [1, 2, 0]])
    np.testing.assert_allclose(f.radius, [1.0, 0.5])
    assert f.tag.tolist() == [1, 0] and f.capsule.tolist() == [True, False]
    assert f.select("hit").tolist() == [1]
    batch = cs.world(np.stack([world[None], np.eye(4)[None]]))  # (I=2, N=1)
    assert batch.a.shape == (2, 2, 3)


def test_colliders_save_reload_and_player_query(doc, tmp_path):
    doc.execute(AddCollider(doc, Collider("fist_l", 7, "sphere", "hit", 0.08, [0, 0.1, 0], [0, 0.1, 0])))
    doc.execute(AddCollider(doc, Collider("torso", CHEST, "capsule", "hurt", 0.2, [0, -0.1, 0], [0, 0.25, 0])))
    doc.execute(KeyColliderVisibility(doc, 1, "fist_l", 0.0, False))
    doc.execute(KeyColliderVisibility(doc, 1, "fist_l", 0.5, True))
    path = doc.save(str(tmp_path / "with_colliders.glb"))
    asset = skeletal.load(path)
    cs = asset.colliders
    assert cs.names == ["fist_l", "torso"] or sorted(cs.names) == ["fist_l", "torso"]
    assert cs["torso"].same_as(doc.colliders[1]) and cs["fist_l"].same_as(doc.colliders[0])
    assert cs.visible("walk", 0.2)[cs.names.index("fist_l")] == False  # noqa: E712 - a numpy bool: `is False` would not compare it
    assert cs.visible("walk", 0.6)[cs.names.index("fist_l")] == True  # noqa: E712 - a numpy bool: `is True` would not compare it
    assert cs.visible("idle", 0.2).all()
    player = skeletal.Player(asset)
    player.play("walk")
    player.update(0.2)
    frame = player.colliders()
    i = frame.names.index("torso")
    world = player.world
    np.testing.assert_allclose(frame.a[i], world[CHEST, :3, :3] @ [0, -0.1, 0] + world[CHEST, :3, 3], atol=1e-9)
    assert not frame.visible[frame.names.index("fist_l")]
    player.update(0.5)
    assert player.colliders().visible.all()
    # the JSON is the documented schema
    gltf = json.loads(_glb_json(path))
    node = gltf["nodes"][int(asset.rig.node_of[CHEST])]
    assert node["extras"]["colliders"] == [{"name": "torso", "shape": "capsule", "tag": "hurt", "radius": 0.2,
                                            "center": [0.0, -0.1, 0.0], "end": [0.0, 0.25, 0.0]}]
    anim = gltf["animations"][1]
    assert anim["extras"]["colliderVisibility"]["fist_l"] == {"times": [0.0, 0.5], "visible": [False, True]}
    assert anim["extras"]["fps"] == doc.info[1].fps


def _glb_json(path):
    data = open(path, "rb").read()
    n = int.from_bytes(data[12:16], "little")
    return data[20:20 + n]


@pytest.mark.parametrize("extras, match", [
    ({"colliders": {"a": 1}}, "must be a list"),
    ({"colliders": [{"shape": "sphere", "radius": 1}]}, "name"),
    ({"colliders": [{"name": "a", "shape": "cone", "radius": 1}]}, "shape 'cone'"),
    ({"colliders": [{"name": "a", "radius": -1}]}, "radius"),
    ({"colliders": [{"name": "a", "radius": 1, "center": [0, 1]}]}, "3 numbers"),
    ({"colliders": [{"name": "a", "radius": 1}, {"name": "a", "radius": 2}]}, "unique"),
])
def test_malformed_collider_extras_are_model_errors(extras, match, tmp_path):
    doc = EditDocument(_demo())
    document = doc.to_document()
    document.nodes[2].extras = extras
    path = tmp_path / "bad.glb"
    from skeletal.io.gltf_write import write_gltf

    write_gltf(document, path)
    asset = skeletal.load(path)
    with pytest.raises(ModelError, match=match) as err:
        asset.colliders  # noqa: B018 - the lazy property read is what raises
    assert "bad.glb" in str(err.value)
    with pytest.raises(ModelError):
        EditDocument(asset)


# -- saving ---------------------------------------------------------------------------------------------


def test_save_reload_equal(doc, tmp_path):
    doc.execute(SetPose(doc, CHEST, np.r_[0, 0.2, 0, rot_about_z(25), 1, 1, 1]))
    doc.execute(InsertPoseKeys(doc, 1, 0.2, [CHEST]))
    doc.execute(SetInterpolation(doc, 1, [(CHEST, "rotation")], "CUBICSPLINE"))
    doc.execute(new_clip(doc, "fresh", 0.5))
    doc.execute(SetFps(doc, 4, 24))
    doc.execute(AddCollider(doc, Collider("head", 5, "sphere", "hurt", 0.15, [0, 0.1, 0], [0, 0.1, 0])))
    for name in ("out.glb", "out.gltf"):
        path = doc.save(str(tmp_path / name))
        assert not doc.dirty and doc.path == path
        back = EditDocument.open(path)
        a, b = snapshot(doc), snapshot(back)
        assert a[:3] == b[:3]  # clips (bit-exact), clip info, colliders


def test_unwritable_save_path_keeps_the_document_unsaved(doc, tmp_path):
    doc.execute(SetFps(doc, 0, 24))
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    with pytest.raises(EditError, match=r"cannot save .*a_file.x\.glb: Not a directory"):
        doc.save(str(blocker / "x.glb"))
    (tmp_path / "folder.glb").mkdir()
    with pytest.raises(EditError, match=r"cannot save .*folder\.glb: Is a directory"):
        doc.save(str(tmp_path / "folder.glb"))
    if not os.access("/proc", os.W_OK):  # a read-only folder (root writes anywhere else)
        with pytest.raises(EditError, match="cannot save"):
            doc.save("/proc/x.glb")
    assert doc.dirty
    with pytest.raises(EditError, match="cannot save"):
        doc.save(str(tmp_path / "missing" / "x.glb"))
    with pytest.raises(EditError, match=".glb or .gltf"):
        doc.save(str(tmp_path / "x.fbx"))
    assert doc.dirty and sorted(p.name for p in tmp_path.iterdir()) == ["a_file", "folder.glb"]  # no temporary file left


def test_autosave_path_and_copy(doc, tmp_path):
    assert autosave_path("/a/walk.glb") == "/a/walk.autosave.glb"
    assert autosave_path("/a/walk.gltf") == "/a/walk.autosave.glb"
    doc.execute(SetFps(doc, 0, 24))
    out = doc.write_copy(autosave_path(str(tmp_path / "demo.glb")))
    assert doc.dirty and EditDocument.open(out).info[0].fps == 24


def test_malformed_model_is_the_loaders_error(tmp_path):
    bad = tmp_path / "broken.gltf"
    bad.write_text('{"asset": {"version": "2.0"}, "nodes": [{"children": [5]}]}')
    with pytest.raises(ModelError) as err:
        EditDocument.open(str(bad))
    assert "broken.gltf" in str(err.value) and "\n" not in str(err.value)


def test_extras_round_trip_through_reader_and_writer(tmp_path):
    doc = EditDocument(_demo())
    document = doc.to_document()
    document.nodes[1].extras = {"game": {"layer": 3, "tags": ["a", "b"]}}
    document.animations[0].extras = {"loop": True}
    from skeletal.io.gltf import read_gltf
    from skeletal.io.gltf_write import write_gltf

    write_gltf(document, tmp_path / "x.glb")
    back = read_gltf(tmp_path / "x.glb")
    assert back.nodes[1].extras == {"game": {"layer": 3, "tags": ["a", "b"]}}
    assert back.animations[0].extras == {"loop": True}
    document.nodes[1].extras = {"bad": float("nan")}
    with pytest.raises(ModelError, match=r"nodes\[1\]\.extras\.bad"):
        write_gltf(document, tmp_path / "y.glb")


def test_clear_pose_edits_and_multi_bone_pose(doc):
    check_roundtrip(doc, lambda: SetPoses(doc, {CHEST: doc.pose(0, 0)[CHEST] + np.r_[0.1, 0, 0, 0, 0, 0, 0, 0, 0, 0],
                                              2: doc.pose(0, 0)[2] + np.r_[0, 0.1, 0, 0, 0, 0, 0, 0, 0, 0]}))
    check_roundtrip(doc, lambda: ClearPoseEdits(doc))
    assert not doc.pose_edits


def test_local_from_world_inverts_world(doc):
    pose = doc.pose(1, 0.3)
    world = doc.world(pose)
    local = doc.local_from_world(pose, 7, world[7])
    np.testing.assert_allclose(doc.local_matrix(local), doc.local_matrix(pose[7]), atol=1e-9)


def test_ik_drag_moves_the_hand_to_the_target(doc):
    names = doc.asset.rig.names
    hand = next(i for i, n in enumerate(names) if "hand" in n.lower())
    root, mid, end = ik_chain(doc, hand)
    pose = doc.pose(1, 0.3)
    world = doc.world(pose)
    start = world[hand, :3, 3]
    reach = np.linalg.norm(world[mid, :3, 3] - world[root, :3, 3]) + np.linalg.norm(start - world[mid, :3, 3])
    target = world[root, :3, 3] + 0.8 * reach * (start - world[root, :3, 3]) / np.linalg.norm(start - world[root, :3, 3])
    target = target + np.array([0.0, 0.05, 0.05])
    cmd = check_roundtrip(doc, lambda: ik_pose(doc, 1, 0.3, hand, target, merge_key="ik"))
    moved = doc.world(doc.pose(1, 0.3))[hand, :3, 3]
    np.testing.assert_allclose(moved, target, atol=1e-5)
    assert set(cmd.new) == {root, mid}
    doc.execute(InsertPoseKeys(doc, 1, 0.3, [root, mid]))
    np.testing.assert_allclose(doc.world(doc.clip_pose(1, 0.3))[hand, :3, 3], target, atol=1e-5)
    with pytest.raises(EditError, match="no two bones"):
        ik_chain(doc, 0)


# -- three.js plays an edited clip ------------------------------------------------------------------------

TRUTH_OPTIONS = ["--clip", "walk", "--loops", "repeat,once", "--max-verts", "24", "--vert-stride", "113",
                 "--digits", "8", "--no-local"]


def edited_demo(path) -> EditDocument:
    """The demo with one clip edited by commands: the chest turned and keyed, a key moved, a channel
    made CUBICSPLINE, the clip lengthened; colliders added. Deterministic: same file every time."""
    doc = EditDocument(_demo(), str(path))
    pose = doc.pose(1, 0.4)
    turned = pose[CHEST].copy()
    turned[3:7] = quat_mul(rot_about_z(35), pose[CHEST, 3:7])
    doc.execute(SetPose(doc, CHEST, turned))
    doc.execute(InsertPoseKeys(doc, 1, 0.4, [CHEST]))
    head = doc.asset.rig.find("head")
    doc.execute(SetInterpolation(doc, 1, [(CHEST, "rotation")], "CUBICSPLINE"))
    tr = doc.clips[1].tracks[K.track_index(doc.clips[1], CHEST, "rotation")]
    doc.execute(MoveKeys(doc, 1, [(CHEST, "rotation", float(tr.times[1]))], 0.04))
    doc.execute(SetClipLength(doc, 1, 1.4))
    doc.execute(AddCollider(doc, Collider("head", head, "sphere", "hurt", 0.12, [0, 0.08, 0], [0, 0.08, 0])))
    doc.save(str(path))
    return doc


def test_edited_clip_matches_threejs_truth(tmp_path):
    """three.js (GLTFLoader + AnimationMixer, via ../shared/tools/threejs-truth) plays the saved edited
    clip as skeletal does; the truth was generated from this test's file (see regenerate_truth)."""
    import hashlib
    from pathlib import Path

    from fixtures.truth_compare import compare_truth, load_truth

    truth_path = Path(__file__).resolve().parent / "data" / "editor" / "edited_walk-truth.json"
    path = tmp_path / "edited_walk.glb"
    edited_demo(path)
    truth = load_truth(truth_path)
    written = skeletal.load(path)
    assert written.clip("walk").duration == pytest.approx(1.4)
    same = hashlib.sha256(path.read_bytes()).hexdigest() == truth["model"]["sha256"]
    rest = Clip("rest", [])
    try:
        report = compare_truth(truth, lambda clip, times, loop: skeletal.bake(written, clip, times, loop=loop),
                               rest_fn=lambda: skeletal.bake(written, rest, [0.0]))
    except AssertionError as exc:
        if same:
            raise
        raise AssertionError(f"{path.name} differs from the file the truth was made from; regenerate: "
                             f"python tests/test_editor.py --regenerate-truth\n{exc}") from None
    assert report.samples_compared >= 2 * 7


def regenerate_truth() -> None:
    import tempfile
    from pathlib import Path

    here = Path(__file__).resolve().parent
    from test_demo_writer import truth_tool, write_truth

    tool = truth_tool()
    out = here / "data" / "editor" / "edited_walk-truth.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / "edited_walk.glb"
        edited_demo(model)
        write_truth(tool, model, out, TRUTH_OPTIONS)


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["--regenerate-truth"]:
        regenerate_truth()
    else:
        raise SystemExit(f"usage: {sys.argv[0]} --regenerate-truth")


def test_damage_rectangles_cover_the_changed_boxes_in_tiles():
    from skeletal.editor.compose import MAX_RECTS, Damage, merge_rects

    d = Damage(tile=32)
    assert d.rects([], (1280, 720)) == []
    assert d.rects([np.array([[10.0, 10.0, 5.0, 20.0]])], (1280, 720)) == []  # empty box
    # one small box: its tile; a box across a tile edge: both tiles, one rectangle
    assert d.rects([np.array([[40.0, 40.0, 50.0, 50.0]])], (1280, 720)) == [(32, 32, 32, 32)]
    assert d.rects([np.array([[60.0, 40.0, 70.0, 50.0]])], (1280, 720)) == [(32, 32, 64, 32)]
    # two far boxes stay two rectangles; runs of the same columns on rows below merge into one
    rects = d.rects([np.array([[0.0, 0.0, 10.0, 100.0], [1000.0, 580.0, 1010.0, 590.0]])], (1280, 720))
    assert sorted(rects) == [(0, 0, 32, 128), (992, 576, 32, 32)]
    # clamped to the window (the last tile column/row is partial)
    assert d.rects([np.array([[1270.0, 700.0, 2000.0, 900.0]])], (1280, 720)) == [(1248, 672, 32, 48)]
    # near rectangles are joined when one pass over both costs less than two passes
    near = np.array([[100.0 * k, 50.0 * k, 100.0 * k + 5, 50.0 * k + 5] for k in range(MAX_RECTS + 2)])
    assert len(d.rects([near], (1280, 720))) < MAX_RECTS + 2
    assert merge_rects([(0, 0, 32, 32), (64, 0, 32, 32)]) == [(0, 0, 96, 32)]
    assert sorted(merge_rects([(0, 0, 320, 320), (640, 0, 320, 320)])) == [(0, 0, 320, 320), (640, 0, 320, 320)]
    # many far-apart boxes: their bounding rectangle
    far = np.array([[300.0 * i, 300.0 * j, 300.0 * i + 100, 300.0 * j + 100] for i in range(4) for j in range(3)])
    assert d.rects([far], (1280, 720)) == [(0, 0, 1024, 704)]
    # every pixel of every box is inside some rectangle
    rng = np.random.default_rng(3)
    boxes = np.sort(rng.uniform(0, 700, size=(5, 2, 2)), axis=1).transpose(0, 2, 1).reshape(5, 4)[:, [0, 2, 1, 3]]
    covered = np.zeros((720, 1280), bool)
    for x, y, w, h in d.rects([boxes], (1280, 720)):
        covered[y:y + h, x:x + w] = True
    for x0, y0, x1, y1 in boxes:
        assert covered[int(y0):int(np.ceil(y1)), int(x0):int(np.ceil(x1))].all()


def _quad_list(x0, y0, x1, y1, clip=(0.0, 0.0, 1280.0, 720.0), colour=0xFFFFFFFF):
    """A draw list with one command drawing one quad (two triangles) from (x0, y0) to (x1, y1)."""
    corners = np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], np.float32)
    vtx = np.zeros((4, 5), np.uint32)
    vtx[:, :2] = corners.view(np.uint32)
    vtx[:, 4] = colour
    idx = np.array([0, 1, 2, 0, 2, 3], np.uint32)
    cmds = np.array([[*clip, 1.5, 0, 0, 6]])
    return vtx, idx, cmds


def test_damage_of_draw_lists_moved_recoloured_appeared_and_clipped():
    from skeletal.editor.compose import Damage, DrawList

    d = Damage(tile=32)
    a = DrawList.from_arrays(*_quad_list(100, 100, 140, 120))
    assert [b.tolist() for b in d.update_lists([a])] == [[[99.0, 99.0, 141.0, 121.0]] * 2]  # new: both triangles
    assert d.update_lists([DrawList.from_arrays(*_quad_list(100, 100, 140, 120))]) == []  # same frame again
    # a moved corner: the two triangles touching it, where they were and where they are
    vtx, idx, cmds = _quad_list(100, 100, 140, 120)
    vtx[2, :2] = np.array([150.0, 130.0], np.float32).view(np.uint32)
    boxes = np.concatenate(d.update_lists([DrawList.from_arrays(vtx, idx, cmds)]))
    assert len(boxes) == 4
    assert boxes[:, 2].max() == 151.0 and boxes[:, 3].max() == 131.0 and boxes[:, 0].min() == 99.0
    # recoloured only: same boxes as the quad, nothing else
    d2 = Damage(tile=32)
    d2.update_lists([DrawList.from_arrays(*_quad_list(100, 100, 140, 120))])
    boxes = np.concatenate(d2.update_lists([DrawList.from_arrays(*_quad_list(100, 100, 140, 120, colour=5))]))
    assert np.array_equal(np.unique(boxes, axis=0), [[99.0, 99.0, 141.0, 121.0]])
    # a second quad appended (other indices): only the new triangles count, cut by their clip rectangle
    v1, i1, c1 = _quad_list(100, 100, 140, 120, colour=5)
    v2, i2, c2 = _quad_list(600, 300, 700, 400, clip=(650.0, 0.0, 1280.0, 720.0))
    both = DrawList.from_arrays(np.concatenate([v1, v2]), np.concatenate([i1, i2]),
                                np.concatenate([c1, [[650.0, 0.0, 1280.0, 720.0, 1.5, 6, 4, 6]]]))
    boxes = np.concatenate(d2.update_lists([both]))
    assert len(boxes) == 2 and np.all(boxes[:, 0] == 650.0) and np.all(boxes[:, 2] == 701.0)
    assert d2.rects([boxes], (1280, 720)) == [(640, 288, 64, 128)]
    # a list that vanished: all its triangles' boxes
    assert len(np.concatenate(d2.update_lists([]))) == 4
