"""A JSON-ready summary of a loaded asset (``skeletal info``, ``skeletal batch info``).

>>> import skeletal
>>> from skeletal.summary import describe
>>> sorted(describe(skeletal.demo.demo_asset()))[:3]              # doctest: +SKIP
['clips', 'extensions_required', 'extensions_used']
"""

from __future__ import annotations

import os
from typing import Any


def describe(asset) -> dict[str, Any]:
    """A JSON-ready summary of an asset: nodes (as a tree), skins, meshes, clips, extensions."""
    doc = asset.document
    joint_of = {}
    for s, skin in enumerate(doc.skins):
        for j in skin.joints.tolist():
            joint_of.setdefault(int(j), []).append(s)
    nodes = []
    for i, node in enumerate(doc.nodes):
        nodes.append({
            "index": i,
            "name": node.name,
            "parent": node.parent,
            "children": list(node.children),
            "mesh": node.mesh,
            "skin": node.skin,
            "joint_of_skins": joint_of.get(i, []),
        })
    scene_roots = set()
    for roots in doc.scenes:
        scene_roots.update(roots)
    meshes = []
    for m, mesh in enumerate(doc.meshes):
        meshes.append({
            "index": m,
            "name": mesh.name,
            "primitives": [
                {
                    "vertices": p.vertex_count,
                    "indices": None if p.indices is None else int(len(p.indices)),
                    "influences": p.influence_count,
                    "morph_targets": len(p.targets),
                    "attributes": sorted(
                        ["POSITION"] + (["NORMAL"] if p.normals is not None else [])
                        + (["TANGENT"] if p.tangents is not None else []) + list(p.attributes)
                    ),
                }
                for p in mesh.primitives
            ],
        })
    clips = [
        {
            "index": c,
            "name": clip.name,
            "duration": clip.duration,
            "tracks": clip.track_count,
            "interpolations": clip.interpolations,
            "outside_scene": list(getattr(clip, "outside_scene", [])),
            # KHR_animation_pointer properties and named float curves (see skeletal.properties)
            "property_tracks": len(getattr(clip, "properties", [])),
        }
        for c, clip in enumerate(asset.clips)
    ]
    return {
        "file": os.path.basename(asset.path),
        "generator": doc.asset_info.get("generator"),
        "nodes": nodes,
        "scenes": [list(s) for s in doc.scenes],
        "scene_names": [doc.scene_names[k] if k < len(doc.scene_names) else "" for k in range(len(doc.scenes))],
        "scene": getattr(asset, "scene", None),  # the scene shown (load's ``scene``, default the file's)
        "default_scene": doc.scene,
        "orphan_roots": [i for i, n in enumerate(doc.nodes) if n.parent < 0 and i not in scene_roots],
        "skins": [
            {"index": s, "name": skin.name, "joints": [int(j) for j in skin.joints], "skeleton": skin.skeleton}
            for s, skin in enumerate(doc.skins)
        ],
        "meshes": meshes,
        "clips": clips,
        "extensions_used": list(doc.extensions_used),
        "extensions_required": list(doc.extensions_required),
        "animated_properties": list(getattr(asset, "properties", None).pointers) if getattr(asset, "properties", None) else [],
    }
