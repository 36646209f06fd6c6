"""A picture of a skeletal export posed in Blender (docs/images/bridges/blender.png), rendered headless.

Run with a Python that has bpy (``$SKELETAL_BLENDER_PYTHON``), not skeletal's:

    skeletal export MODEL --out model.glb            # or skeletal.export(asset, "model.glb")
    /path/to/python-with-bpy tools/blender_picture.py model.glb walk 0.5 out.png

Blender (factory settings) imports the glTF, plays the named action at the given second, and renders
480x360 with Cycles on the CPU (16 samples) from a camera in front of the character.
"""

import math
import sys

import bpy
from mathutils import Vector

path, action_name, seconds, out = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
bpy.ops.wm.read_factory_settings(use_empty=True)
bpy.ops.import_scene.gltf(filepath=path)
scene = bpy.context.scene
arm = next(o for o in scene.objects if o.type == "ARMATURE")
action = next(a for a in bpy.data.actions if a.name == action_name or a.name.endswith(action_name))
for track in arm.animation_data.nla_tracks:
    track.mute = True
arm.animation_data.action = action
if getattr(action, "slots", None):
    arm.animation_data.action_slot = action.slots[0]
fps = scene.render.fps / scene.render.fps_base
frame = seconds * fps
scene.frame_set(math.floor(frame), subframe=frame - math.floor(frame))

meshes = [o for o in scene.objects if o.type == "MESH"]
depsgraph = bpy.context.evaluated_depsgraph_get()
points = [o.evaluated_get(depsgraph).matrix_world @ Vector(c) for o in meshes for c in o.evaluated_get(depsgraph).bound_box]
lo = Vector([min(p[i] for p in points) for i in range(3)])
hi = Vector([max(p[i] for p in points) for i in range(3)])
center, height = (lo + hi) / 2, hi.z - lo.z
camera = bpy.data.objects.new("camera", bpy.data.cameras.new("camera"))
scene.collection.objects.link(camera)
camera.location = center + Vector((0.7, -1.9, 0.3)) * height
camera.rotation_euler = (center - camera.location).to_track_quat("-Z", "Y").to_euler()
scene.camera = camera
sun = bpy.data.objects.new("sun", bpy.data.lights.new("sun", "SUN"))
sun.data.energy = 3.0
sun.rotation_euler = (math.radians(50), 0, math.radians(30))
scene.collection.objects.link(sun)
world = bpy.data.worlds.new("world")
world.color = (0.05, 0.06, 0.08)
scene.world = world
scene.render.engine = "CYCLES"
scene.cycles.device = "CPU"
scene.cycles.samples = 16
scene.render.resolution_x, scene.render.resolution_y = 480, 360
scene.render.filepath = out
bpy.ops.render.render(write_still=True)
