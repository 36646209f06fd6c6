"""A picture of the posed character drawn by trimesh itself (docs/images/bridges/trimesh.png).

    python tools/trimesh_picture.py [OUT.png]

trimesh's viewer needs pyglet 1 (skeletal's pyglet bridge uses pyglet 2), so the picture comes from
trimesh's own ray caster: three frames of the built-in character's walk (``clip_meshes``), side by
side in one ``trimesh.Scene``, one camera ray per pixel (``Scene.camera_rays``), each hit shaded by
its triangle's normal and the part's base colour. Needs rtree (pip install rtree) for trimesh's ray
caster; about a minute.
"""

from __future__ import annotations

import sys

import numpy as np
import trimesh
from PIL import Image

import skeletal
import skeletal.bridges.trimesh as st
from skeletal.bridges.posed import parts

out = sys.argv[1] if len(sys.argv) > 1 else "trimesh.png"
asset = skeletal.load(skeletal.examples.path("demo.glb"))
frames = st.clip_meshes(asset, "walk", [0.0, 0.3, 0.6])
scene = trimesh.Scene()
for k, mesh in enumerate(frames):
    mesh.apply_translation([0.9 * (k - 1), 0.0, 0.0])
    scene.add_geometry(mesh, geom_name=f"frame{k}")
scene.camera.resolution = (360, 200)
scene.camera.fov = (50, 50 * 200 / 360)
scene.camera_transform = scene.camera.look_at(scene.bounds, rotation=trimesh.transformations.euler_matrix(0.1, 0.35, 0), distance=4.4)
origins, directions, pixels = scene.camera_rays()
merged = trimesh.util.concatenate(frames)
# each face takes its part's base colour (the parts are concatenated in order, frame after frame)
part_colors = [np.asarray(asset.document.materials[p.material].base_color_factor[:3]) * 255 if p.material is not None
               else np.full(3, 200.0) for p in parts(asset)]
one_frame = np.concatenate([np.repeat(c[None], len(p.triangles), axis=0) for c, p in zip(part_colors, parts(asset))])
colors = np.tile(one_frame, (len(frames), 1))
hits = []  # in chunks of rays: the candidate lists of a whole image at once take gigabytes
for start in range(0, len(origins), 1500):
    tri, ray = merged.ray.intersects_id(origins[start:start + 1500], directions[start:start + 1500], multiple_hits=False)
    hits.append((tri, ray + start))
hit_tri = np.concatenate([h[0] for h in hits])
hit_ray = np.concatenate([h[1] for h in hits])
image = np.full((200, 360, 3), 30, np.uint8)
light = np.array([0.4, 0.8, 0.5]) / np.linalg.norm([0.4, 0.8, 0.5])
shade = 0.35 + 0.65 * np.abs(merged.face_normals[hit_tri] @ light)
base = colors[hit_tri]
image[pixels[hit_ray, 1], pixels[hit_ray, 0]] = np.clip(base * shade[:, None], 0, 255).astype(np.uint8)
Image.fromarray(image[::-1]).save(out)
print(f"wrote {out}")
