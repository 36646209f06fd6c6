"""Playback: actions, crossfades, layers with masks, additive clips, events (and, built on them,
blend spaces, a state machine and root motion).

:class:`Mixer` is the batched engine (B instances, arrays first); :class:`Player` is one instance.
Each public name imports its module on first use (:mod:`skeletal._lazy`): a player loads neither the
crowd, the blend spaces nor the state machine until asked for.
"""

from typing import TYPE_CHECKING

from .._lazy import attach

_ATTRIBUTES = {
    "ClipSet": ".clipset",
    **dict.fromkeys(("Event", "Layer", "Mixer"), ".mixer"),
    **dict.fromkeys(("Action", "Player"), ".player"),
    **dict.fromkeys(("BlendSpace1D", "BlendSpace2D"), ".blendspace"),
    "Crowd": ".crowd",
    "RootMotion": ".rootmotion",
    **dict.fromkeys(("StateMachine", "StateMachineError"), ".statemachine"),
}

if TYPE_CHECKING:
    from .clipset import ClipSet
    from .mixer import Event, Layer, Mixer
    from .player import Action, Player
    from .blendspace import BlendSpace1D, BlendSpace2D
    from .crowd import Crowd
    from .rootmotion import RootMotion
    from .statemachine import StateMachine, StateMachineError

__getattr__, __dir__ = attach(__name__, globals(), _ATTRIBUTES)

__all__ = ["Action", "ClipSet", "Event", "Layer", "Mixer", "Player", "BlendSpace1D", "BlendSpace2D", "Crowd",
           "RootMotion", "StateMachine", "StateMachineError"]
