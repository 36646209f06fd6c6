"""Which reader a file suffix goes to; no reader is imported here, so that :func:`skeletal.load` of a
glTF file imports nothing of the Assimp or BVH readers.

>>> from skeletal.io.formats import ASSIMP_SUFFIXES
>>> ".fbx" in ASSIMP_SUFFIXES
True
"""

from __future__ import annotations

#: Suffixes (lower case) that :func:`skeletal.load` sends to :mod:`skeletal.io.assimp`: the formats
#: Assimp reads that can carry bones or animation, plus common static ones.
ASSIMP_SUFFIXES: tuple[str, ...] = (
    ".fbx", ".dae", ".x", ".3ds", ".ms3d", ".md5mesh", ".b3d", ".smd", ".ogex", ".ase",
    ".lwo", ".lws", ".md2", ".md3", ".mdl", ".irrmesh", ".ac", ".obj", ".ply", ".stl", ".off",
    ".3mf", ".cob", ".xgl", ".zgl", ".q3o", ".dxf", ".csm", ".nff", ".raw", ".ter", ".hmp",
    # Ogre (binary and XML), MMD, MD5 animation and camera files: Assimp reads them
    ".mesh", ".mesh.xml", ".pmx", ".md5anim", ".md5camera")

#: The suffix of BVH motion capture (:mod:`skeletal.io.bvh`).
BVH_SUFFIX = ".bvh"

#: Suffixes of USD files (:mod:`skeletal.io.usd`, UsdSkel; needs the ``usd`` extra).
USD_SUFFIXES: tuple[str, ...] = (".usd", ".usda", ".usdc", ".usdz")
