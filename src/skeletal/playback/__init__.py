"""Playback: actions, crossfades, layers with masks, additive clips, events (and, built on them,
blend spaces, a state machine and root motion).

:class:`Mixer` is the batched engine (B instances, arrays first); :class:`Player` is one instance.
"""

from .clipset import ClipSet
from .mixer import Event, Layer, Mixer
from .player import Action, Player

__all__ = ["Action", "ClipSet", "Event", "Layer", "Mixer", "Player"]

from .blendspace import BlendSpace1D, BlendSpace2D
from .crowd import Crowd
from .rootmotion import RootMotion
from .statemachine import StateMachine, StateMachineError

__all__ += ["BlendSpace1D", "BlendSpace2D", "Crowd", "RootMotion", "StateMachine", "StateMachineError"]
