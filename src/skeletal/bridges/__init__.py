"""Bridges from skeletal to the libraries Python users already draw with, one small module each.

skeletal loads, plays and poses; each bridge hands the result to another library's objects::

    posed.py     the shared, library-free part: triangle parts, frame state, CPU posing
    trimesh.py   posed meshes and scenes as trimesh.Trimesh / trimesh.Scene
    pygfx.py     pygfx SkinnedMesh objects whose bone-matrix buffers are skeletal's palettes
    pyglet.py    skeletal's own renderer drawing inside a pyglet window's OpenGL context
    panda3d.py   a panda3d NodePath whose vertex data skeletal poses each frame
    blender.py   Blender (bpy, in a subprocess) as the oracle for what it reads and writes

Importing this package imports none of those libraries; each module imports its own when used,
and a missing one is a :class:`~skeletal.bridges.posed.BridgeError` naming the extra to install
(``pip install "skeletal[pygfx]"``).
"""

from .posed import BridgeError

__all__ = ["BridgeError"]
