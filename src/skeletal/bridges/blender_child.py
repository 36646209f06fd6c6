"""The Blender side of :mod:`skeletal.bridges.blender`: a script run by a Python that has ``bpy``
(Blender as a module), in a child process, never imported by skeletal itself.

It imports no skeletal module (the Blender environment may not have skeletal or its numpy). Usage::

    python blender_child.py JOB.json

JOB: ``{"input": path, "kind": "gltf"|"fbx"|"bvh"|"usd", "exports": {"glb"|"fbx"|"fbx-exact": path,
"bvh"|"usd": folder}, "samples": N, "out": path}``. With factory settings it imports ``input`` with
Blender's bundled importer, exports the scene with Blender's own writers (one BVH and one USD file
per action: both formats hold one animation; "fbx-exact" is FBX without keyframe reduction), and for every action that moves the armature samples
N frames evenly over the action's range, recording each pose bone's head in world space from the
evaluated depsgraph after ``scene.frame_set``. Writes JSON to ``out``: Blender's version, the scene's
fps, the armature's world matrix, per action its frame range, ``samples`` at N whole frames (N = 0: every whole frame) and
``range_samples`` at its first frame plus N whole steps (where a writer that bakes from the
action's start keys), ``key_samples`` at N of its key frames (frames where every bone rotation curve has a key, maybe
fractional: no interpolation involved), each ``{"frame", "heads": {bone: [x, y, z]}}`` (Blender
world: Z up), and per export its seconds and bytes.
"""

import json
import math
import os
import sys
import time

import bpy


def _import(path: str, kind: str) -> None:
    if kind == "gltf":
        bpy.ops.import_scene.gltf(filepath=path)
    elif kind == "fbx":
        bpy.ops.import_scene.fbx(filepath=path)
    elif kind == "bvh":
        # one BVH frame per Blender frame at the BVH's own rate (the scene takes it), first frame at 1
        bpy.ops.import_anim.bvh(filepath=path, update_scene_fps=True, update_scene_duration=True)
    elif kind == "usd":
        bpy.ops.wm.usd_import(filepath=path)
    else:
        raise SystemExit(f"unknown kind {kind!r}")


def _armatures():
    return [o for o in bpy.context.scene.objects if o.type == "ARMATURE"]


def _rest(arm) -> None:
    """Every pose bone back to its rest transform: a bone that an action does not key keeps whatever
    the last evaluated action left on it (Blender's rule), where glTF, BVH and skeletal use the rest pose."""
    for pb in arm.pose.bones:
        pb.location = (0.0, 0.0, 0.0)
        pb.rotation_quaternion = (1.0, 0.0, 0.0, 0.0)
        pb.rotation_euler = (0.0, 0.0, 0.0)
        pb.rotation_axis_angle = (0.0, 0.0, 1.0, 0.0)
        pb.scale = (1.0, 1.0, 1.0)


def _set_action(arm, action) -> None:
    _rest(arm)
    data = arm.animation_data or arm.animation_data_create()
    for track in data.nla_tracks:  # only the assigned action plays
        track.mute = True
    data.action = action
    slots = getattr(action, "slots", None)
    if slots and hasattr(data, "action_slot"):
        # a layered action (Blender 4.4+) holds one slot per animated object (an armature's and its
        # rigid parts'): take the slot whose channels move pose bones
        def moves_bones(slot) -> bool:
            for layer in action.layers:
                for strip in layer.strips:
                    bag = strip.channelbag(slot)
                    if bag is not None and any(c.data_path.startswith("pose.bones[") for c in bag.fcurves):
                        return True
            return False

        chosen = [slot for slot in slots if slot.target_id_type == "OBJECT" and moves_bones(slot)]
        if chosen:
            data.action_slot = chosen[0]


def _curves(action) -> list:
    try:
        return list(action.fcurves)
    except AttributeError:  # layered actions (Blender 4.4+): the channelbags of every slot
        return [c for layer in action.layers for strip in layer.strips for bag in strip.channelbags for c in bag.fcurves]


def _key_frames(action) -> list[float]:
    """Frames (maybe fractional) that hold a key on every bone rotation curve: where no
    interpolation is involved."""
    sets = [{round(k.co.x, 4) for k in c.keyframe_points} for c in _curves(action)
            if c.data_path.startswith("pose.bones[") and "rotation" in c.data_path]
    if not sets:
        return []
    return sorted(set.intersection(*sets))


def _moves(action, arm) -> bool:
    """Whether ``action`` animates ``arm`` (a bone channel in its keys)."""
    curves = _curves(action)
    return any(c.data_path.startswith("pose.bones[") for c in curves) and any(
        c.data_path.split('"')[1] in arm.pose.bones for c in curves if c.data_path.startswith("pose.bones["))


def _frames(first: float, last: float, count: int) -> list[int]:
    """``count`` whole frames spread over first..last (count 0: every whole frame)."""
    a, b = math.ceil(first - 1e-6), math.floor(last + 1e-6)
    if count == 0:
        return list(range(a, b + 1))
    if b <= a or count <= 1:
        return [a]
    return sorted({round(a + (b - a) * i / (count - 1)) for i in range(count)})


def _heads(arm) -> dict:
    depsgraph = bpy.context.evaluated_depsgraph_get()
    evaluated = arm.evaluated_get(depsgraph)
    world = evaluated.matrix_world
    return {pb.name: list(world @ pb.head) for pb in evaluated.pose.bones}


def _export(fmt: str, target: str, arm, actions, report: dict) -> None:
    scene = bpy.context.scene
    t0 = time.perf_counter()
    written = []
    if fmt.startswith("fbx"):
        # The FBX writer bakes every bone's full transform for every action, and a bone that an action
        # does not key gets whatever pose the armature holds when the export starts (the built-in
        # character's walk and run do not key right_shoulder: they got the -0.78 degrees that sampling
        # wave had left there). Start from the rest pose, which glTF and skeletal give unkeyed bones.
        data = arm.animation_data
        if data is not None:
            data.action = None
        _rest(arm)
        bpy.context.view_layer.update()
    if fmt == "glb":
        bpy.ops.export_scene.gltf(filepath=target, export_format="GLB")
        written.append(target)
    elif fmt == "fbx":
        bpy.ops.export_scene.fbx(filepath=target)
        written.append(target)
    elif fmt == "fbx-exact":  # the same without the keyframe reduction (a diagnostic, not a default)
        bpy.ops.export_scene.fbx(filepath=target, bake_anim_simplify_factor=0.0)
        written.append(target)
    else:  # one file per action: BVH and a USD stage hold one animation
        os.makedirs(target, exist_ok=True)
        for i, action in enumerate(actions):
            _set_action(arm, action)
            first, last = action.frame_range
            scene.frame_start, scene.frame_end = math.floor(first), math.ceil(last)
            path = os.path.join(target, f"{i:02d}.{fmt}")
            if fmt == "bvh":
                bpy.context.view_layer.objects.active = arm
                bpy.ops.export_anim.bvh(filepath=path, frame_start=scene.frame_start, frame_end=scene.frame_end)
            else:
                bpy.ops.wm.usd_export(filepath=path, export_animation=True)
            written.append(path)
    report[fmt] = {"seconds": time.perf_counter() - t0, "files": written,
                   "bytes": sum(os.path.getsize(p) for p in written if os.path.exists(p))}


def main() -> None:
    job = json.load(open(sys.argv[1], encoding="utf-8"))
    bpy.ops.wm.read_factory_settings(use_empty=True)
    t0 = time.perf_counter()
    _import(job["input"], job["kind"])
    import_seconds = time.perf_counter() - t0
    scene = bpy.context.scene
    arms = _armatures()
    out = {"blender": bpy.app.version_string, "fps": scene.render.fps / scene.render.fps_base,
           "import_seconds": import_seconds, "armatures": [a.name for a in arms], "actions": [], "exports": {}}
    if not arms:
        json.dump(out, open(job["out"], "w", encoding="utf-8"))
        return
    arm = max(arms, key=lambda a: len(a.pose.bones))
    out["armature"] = arm.name
    out["armature_world"] = [list(r) for r in arm.matrix_world]
    actions = [a for a in bpy.data.actions if _moves(a, arm)]
    for action in actions:
        _set_action(arm, action)
        first, last = action.frame_range
        samples = []
        for frame in _frames(first, last, int(job.get("samples", 4))):
            scene.frame_set(frame)
            samples.append({"frame": frame, "heads": _heads(arm)})
        range_samples = []  # the action's first frame plus whole frames: where a writer that bakes from it keys
        for k in _frames(0, last - first, int(job.get("samples", 4))):
            frame = first + k
            whole = math.floor(frame)
            scene.frame_set(whole, subframe=frame - whole)
            range_samples.append({"frame": frame, "heads": _heads(arm)})
        keys = _key_frames(action)
        count = min(int(job.get("samples", 4)), len(keys))
        picked = sorted({keys[round(i * (len(keys) - 1) / max(count - 1, 1))] for i in range(count)}) if keys else []
        key_samples = []
        for frame in picked:
            whole = math.floor(frame)
            scene.frame_set(whole, subframe=frame - whole)
            key_samples.append({"frame": frame, "heads": _heads(arm)})
        out["actions"].append({"name": action.name, "frame_range": [first, last], "samples": samples,
                               "key_samples": key_samples, "range_samples": range_samples})
    for fmt, target in job.get("exports", {}).items():
        _export(fmt, target, arm, actions, out["exports"])
    json.dump(out, open(job["out"], "w", encoding="utf-8"))


if __name__ == "__main__":
    main()
