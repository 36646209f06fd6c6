"""skeletal: skeletal animation for Python.

The pipeline, one module per stage::

    io/gltf.py   file -> Document                 (format only)
    rig.py       Document -> Rig                  (flat node array, parents first)
    clip.py      Document -> Clip                 (tracks, loop modes)
    sampling.py  Clip @ t -> local pose (N, 10)   (numba kernels, key cursors)
    pose.py      local pose -> world (N, 4, 4) -> skin palette (J, 4, 4)
    skin.py      palette + mesh -> skinned vertices
    bake.py      all of the above over many times -> arrays

>>> import skeletal
>>> asset = skeletal.load("Soldier.glb")                    # doctest: +SKIP
>>> baked = skeletal.bake(asset, "Walk", fps=30)            # doctest: +SKIP
>>> baked["node_world"].shape                               # doctest: +SKIP
(31, 69, 4, 4)
"""

from . import _threads  # noqa: F401  (first: numba's threading layer, see _threads.py)
from . import _compile  # noqa: F401  (first: numba compile notice and patches, see _compile.py)
from . import cliptools
from .asset import Asset, MeshInstance, SkinBinding, load
from .bake import bake, sample_times
from .clip import Clip, Track, clip_from_keyframes, map_time
from .errors import ClipError, ModelError, SkeletalError, UnsupportedExtensionError
from .export import export, write_bvh
from .playback import Action, Crowd, Event, Mixer, Player
from .pose import skin_palette, world_matrices
from .retarget import retarget
from .rig import Rig
from .sampling import sample
from .skin import normalize_weights, pack_palette, skin, skin_into
from .colliders import Collider, ColliderFrame, ColliderSet
from . import ik
from .batch import run_batch
from .skin_dq import dual_quaternions, pack_dq_palette, skin_dq, skin_dq_into
from .playback.procedural import Procedural
from .web import show, to_html
from . import examples

from .version import __version__

__all__ = [
    "Asset", "MeshInstance", "SkinBinding", "load", "bake", "sample_times", "Clip", "Track",
    "clip_from_keyframes", "map_time", "ClipError", "ModelError", "SkeletalError",
    "UnsupportedExtensionError", "skin_palette", "world_matrices", "Rig", "sample", "normalize_weights",
    "skin", "skin_into", "pack_palette", "cliptools", "Action", "Crowd", "Event", "Mixer", "Player", "__version__",
    "retarget", "export", "write_bvh", "Collider", "ColliderFrame", "ColliderSet",
    "ik",
    "run_batch",
    "skin_dq", "skin_dq_into", "pack_dq_palette", "dual_quaternions",
    "Procedural",
    "to_html", "show",
    "examples",
]
