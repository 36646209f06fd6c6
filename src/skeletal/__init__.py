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

``import skeletal`` loads none of them (nor numba): each public name imports its module on first
use (``_lazy.py``), and numba is set up as it loads (``_setup.py``).

>>> import skeletal
>>> asset = skeletal.load("Soldier.glb")                    # doctest: +SKIP
>>> baked = skeletal.bake(asset, "Walk", fps=30)            # doctest: +SKIP
>>> baked["node_world"].shape                               # doctest: +SKIP
(31, 69, 4, 4)
"""

import sys
from typing import TYPE_CHECKING

from . import _aliases  # (first: the old module names skeletal.skin, skeletal.rig ... still import)
from . import _setup  # (first: numba's threading layer and compile patches, when numba loads: _setup.py)
from ._lazy import ShieldedPackage, attach
from .errors import ClipError, ModelError, SkeletalError, UnsupportedExtensionError
from .version import __version__

_setup.install()

# The public names, each imported from its module on first use (skeletal._lazy): ``import skeletal``
# loads none of the stages. Type checkers read the same imports below; tests/test_imports.py checks
# that the two lists agree.
_ATTRIBUTES = {
    **dict.fromkeys(("Asset", "MeshInstance", "SkinBinding", "load"), ".asset"),
    **dict.fromkeys(("bake", "sample_times"), ".tools.bake"),
    **dict.fromkeys(("Clip", "Track", "clip_from_keyframes", "map_time"), ".anim.clip"),
    **dict.fromkeys(("export", "write_bvh"), ".tools.export"),
    **dict.fromkeys(("Action", "Player"), ".playback.player"),
    **dict.fromkeys(("Event", "Mixer"), ".playback.mixer"),
    "Crowd": ".playback.crowd",
    **dict.fromkeys(("skin_palette", "world_matrices"), ".anim.pose"),
    "retarget": ".tools.retarget",
    "Rig": ".anim.rig",
    "sample": ".anim.sampling",
    **dict.fromkeys(("normalize_weights", "pack_palette", "skin", "skin_into"), ".skinning.lbs"),
    **dict.fromkeys(("Collider", "ColliderFrame", "ColliderSet"), ".anim.colliders"),
    "run_batch": ".batch",
    **dict.fromkeys(("dual_quaternions", "pack_dq_palette", "skin_dq", "skin_dq_into", "dq_hemisphere_pairs"),
                    ".skinning.dqs"),
    "Procedural": ".playback.procedural",
    **dict.fromkeys(("show", "to_html"), ".web"),
}
_MODULES = {"cliptools": ".tools.cliptools", "ik": ".anim.ik", "examples": ".examples"}

if TYPE_CHECKING:
    from .tools import cliptools
    from .asset import Asset, MeshInstance, SkinBinding, load
    from .tools.bake import bake, sample_times
    from .anim.clip import Clip, Track, clip_from_keyframes, map_time
    from .tools.export import export, write_bvh
    from .playback.player import Action, Player
    from .playback.mixer import Event, Mixer
    from .playback.crowd import Crowd
    from .anim.pose import skin_palette, world_matrices
    from .tools.retarget import retarget
    from .anim.rig import Rig
    from .anim.sampling import sample
    from .skinning.lbs import normalize_weights, pack_palette, skin, skin_into
    from .anim.colliders import Collider, ColliderFrame, ColliderSet
    from .anim import ik
    from .batch import run_batch
    from .skinning.dqs import dq_hemisphere_pairs, dual_quaternions, pack_dq_palette, skin_dq, skin_dq_into
    from .playback.procedural import Procedural
    from .web import show, to_html
    from . import examples

# ``skeletal.<name>`` and ``from skeletal import <name>``: the tables above, then submodules
# (``skeletal.playback``) and the old module names (``skeletal.clip``: skeletal._aliases)
__getattr__, __dir__ = attach(__name__, globals(), _ATTRIBUTES, _MODULES)
# ``import skeletal.skin`` (an old module name) must not replace the function skeletal.skin
_SHIELDED = frozenset(name for name in _ATTRIBUTES if f"{__name__}.{name}" in _aliases.MOVED)
sys.modules[__name__].__class__ = ShieldedPackage
_aliases.link_loaded()

__all__ = [
    "Asset", "MeshInstance", "SkinBinding", "load", "bake", "sample_times", "Clip", "Track",
    "clip_from_keyframes", "map_time", "ClipError", "ModelError", "SkeletalError",
    "UnsupportedExtensionError", "skin_palette", "world_matrices", "Rig", "sample", "normalize_weights",
    "skin", "skin_into", "pack_palette", "cliptools", "Action", "Crowd", "Event", "Mixer", "Player", "__version__",
    "retarget", "export", "write_bvh", "Collider", "ColliderFrame", "ColliderSet",
    "ik",
    "run_batch",
    "skin_dq", "skin_dq_into", "dq_hemisphere_pairs", "pack_dq_palette", "dual_quaternions",
    "Procedural",
    "to_html", "show",
    "examples",
]
