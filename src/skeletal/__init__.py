"""skeletal: skeletal animation for Python.

The pipeline, one module per stage::

    io/gltf.py          file -> Document                 (format only)
    anim/rig.py         Document -> Rig                  (flat node array, parents first)
    anim/clip.py        Document -> Clip                 (tracks, loop modes)
    anim/sampling.py    Clip @ t -> local pose (N, 10)   (numba kernels, key cursors)
    anim/pose.py        local pose -> world (N, 4, 4) -> skin palette (J, 4, 4)
    skinning/lbs.py     palette + mesh -> skinned vertices (skinning/dqs.py: dual quaternions)
    tools/bake.py       all of the above over many times -> arrays
    playback/           Player / Mixer / Crowd: the same stages, one frame at a time

>>> import skeletal
>>> asset = skeletal.load("Soldier.glb")                    # doctest: +SKIP
>>> baked = skeletal.bake(asset, "Walk", fps=30)            # doctest: +SKIP
>>> baked["node_world"].shape                               # doctest: +SKIP
(31, 69, 4, 4)
"""

from . import _aliases  # (first: the old module names skeletal.skin, skeletal.rig ... still import)
from . import _threads  # noqa: F401  (first: numba's threading layer, see _threads.py)
from . import _compile  # noqa: F401  (first: numba compile notice and patches, see _compile.py)
from .tools import cliptools
from .asset import Asset, MeshInstance, SkinBinding, load
from .tools.bake import bake, sample_times
from .anim.clip import Clip, Track, clip_from_keyframes, map_time
from .errors import ClipError, ModelError, SkeletalError, UnsupportedExtensionError
from .tools.export import export, write_bvh
from .playback import Action, Crowd, Event, Mixer, Player
from .anim.pose import skin_palette, world_matrices
from .tools.retarget import retarget
from .anim.rig import Rig
from .anim.sampling import sample
from .skinning.lbs import normalize_weights, pack_palette, skin, skin_into
from .anim.colliders import Collider, ColliderFrame, ColliderSet
from .anim import ik
from .batch import run_batch
from .skinning.dqs import dual_quaternions, pack_dq_palette, skin_dq, skin_dq_into
from .playback.procedural import Procedural
from .web import show, to_html
from . import examples

from .version import __version__
from types import ModuleType

_aliases.link_loaded()


def __getattr__(name: str) -> ModuleType:
    """``skeletal.clip``, ``skeletal.skin`` ...: the modules that moved into packages (see _aliases)."""
    return _aliases.attribute(__name__, name)

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
