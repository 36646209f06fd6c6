"""An animation state machine: states play a clip or a blend space; transitions crossfade between
them when conditions on parameters hold (and, optionally, after an exit time).

Batched like everything in the mixer: the current state is a (B,) array, parameters are (B,) arrays,
and a transition fires for exactly the instances whose conditions hold (vectorised).

Conditions are small expressions over parameters: ``"speed > 1.5"``, ``"grounded"``,
``"not grounded"``, ``"speed <= 0.1 and not jump"``; comparison operators ``< <= > >= == !=``.
A *trigger* parameter is set with :meth:`StateMachine.trigger` and reset when a transition uses it.

Definable in code or from a JSON (or YAML, when PyYAML is installed) file::

    {
      "parameters": {"speed": 0.0, "wave": "trigger"},
      "initial": "idle",
      "states": {
        "idle": {"clip": "idle"},
        "move": {"blend1d": {"parameter": "speed", "samples": [["walk", 1.4], ["run", 4.0]]}},
        "wave": {"clip": "wave", "loop": "once"}
      },
      "transitions": [
        {"from": "idle", "to": "move", "when": "speed > 0.1", "duration": 0.3},
        {"from": "move", "to": "idle", "when": "speed <= 0.1", "duration": 0.3},
        {"from": "*", "to": "wave", "when": "wave", "duration": 0.2},
        {"from": "wave", "to": "idle", "exit_time": 0.95, "duration": 0.3}
      ]
    }

A transition may add ``"blend": "inertialize"`` (or ``"inertialize_spring"``, ``"dead_blend"``) to
switch to the target state (a clip or a blend space) at once and fade out the difference from the
old pose instead of crossfading (:mod:`skeletal.playback.locomotion.mixer_hook`).
"""

from __future__ import annotations

import json
import operator
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..errors import SkeletalError
from . import kernels as K
from .blendspace import BlendSpace1D, BlendSpace2D
from .mixer import InstanceSelector, Mixer

_OPS: dict[str, Callable[[np.ndarray, float], np.ndarray]] = {
    "<=": operator.le, ">=": operator.ge, "==": operator.eq, "!=": operator.ne, "<": operator.lt, ">": operator.gt,
}
_TERM = re.compile(r"^\s*(not\s+)?([A-Za-z_][\w.]*)\s*(?:(<=|>=|==|!=|<|>)\s*([-+]?[\d.]+(?:[eE][-+]?\d+)?|true|false))?\s*$")


class StateMachineError(SkeletalError):
    """A state machine definition is inconsistent (unknown state, parameter, bad condition)."""


@dataclass
class Condition:
    """A conjunction of terms ``(parameter, op, value, negate)`` parsed from text."""

    text: str
    terms: list[tuple[str, str | None, float, bool]]

    @classmethod
    def parse(cls, text: str | None) -> "Condition":
        if not text or not text.strip():
            return cls("", [])
        terms = []
        for part in re.split(r"\s+and\s+", text.strip()):
            m = _TERM.match(part)
            if not m:
                raise StateMachineError(f"cannot parse condition {part!r} (in {text!r})")
            negate, name, op, value = m.groups()
            number = 1.0 if value == "true" else 0.0 if value == "false" else float(value) if value else 0.0
            terms.append((name, op, number, bool(negate)))
        return cls(text, terms)

    def evaluate(self, params: dict[str, np.ndarray], rows) -> np.ndarray:
        result = np.ones(len(rows), dtype=bool)
        for name, op, value, negate in self.terms:
            if name not in params:
                raise StateMachineError(f"condition {self.text!r} uses unknown parameter {name!r}")
            x = params[name][rows]
            term = _OPS[op](x, value) if op else x != 0
            result &= ~term if negate else term
        return result

    @property
    def parameters(self) -> list[str]:
        return [t[0] for t in self.terms]


@dataclass
class Transition:
    source: str  # a state name or "*" (any state)
    target: str
    condition: Condition = field(default_factory=lambda: Condition("", []))
    duration: float = 0.25
    exit_time: float | None = None  # normalised time of the source state (e.g. 0.9 = 90% of its cycle)
    blend: str = "linear"  # or an inertialized switch: "inertialize", "inertialize_spring", "dead_blend"


class State:
    """What a state plays: a clip (with play options) or a blend space."""

    def __init__(self, name: str, clip=None, blend=None, blend_parameter: str | None = None, **play_options):
        self.name = name
        self.clip = clip
        self.blend = blend
        self.blend_parameter = blend_parameter
        self.play_options = play_options

    def enter(self, mixer: Mixer, layer: int, duration: float, rows: np.ndarray, blend: str = "linear") -> None:
        if self.blend is not None:
            self.blend.play(fade=duration, instances=rows, blend=blend)
        else:
            mixer.crossfade(self.clip, duration, layer=layer, instances=rows, blend=blend, **self.play_options)

    def leave(self, rows: np.ndarray) -> None:
        if self.blend is not None:
            self.blend.active[rows] = False

    def normalized_time(self, mixer: Mixer, layer: int) -> np.ndarray:
        """(B,) loops completed + phase in the current loop, of the state's (strongest) clip."""
        slots = self.blend.slots if self.blend is not None else [mixer.slot(self.clip, layer)]
        weights = mixer.fs[:, slots, K.F_WEIGHT]
        strongest = np.asarray(slots)[np.argmax(weights, axis=1)]
        rows = np.arange(mixer.count)
        d = mixer.clipset.duration[mixer.slot_clip[strongest]]
        t = mixer.fs[rows, strongest, K.F_SAMPLE]
        loops = mixer.ist[rows, strongest, K.I_LOOP_COUNT]
        finished = (mixer.ist[rows, strongest, K.I_FLAGS] & K.FLAG_FINISHED) != 0
        phase = np.where(d > 0, t / np.where(d > 0, d, 1.0), 1.0)
        return np.where(finished, np.maximum(loops, 1), loops + phase)


class StateMachine:
    """States and transitions over a mixer layer, for every instance at once.

    >>> sm = StateMachine.from_file(player, "locomotion.json")     # doctest: +SKIP
    >>> player.set("speed", 2.1); player.update(1 / 60)            # doctest: +SKIP
    """

    def __init__(self, target, *, layer: int = 0):
        self.mixer: Mixer = target if isinstance(target, Mixer) else target.mixer
        self.layer = layer
        self.states: dict[str, State] = {}
        self.transitions: list[Transition] = []
        self.params: dict[str, np.ndarray] = {}
        self.triggers: set[str] = set()
        self.current = np.full(self.mixer.count, -1, dtype=np.int64)
        self._names: list[str] = []
        self.mixer.controllers.append(self)
        self.on_transition: list[Callable[[str, str, np.ndarray], None]] = []

    # -- definition ----------------------------------------------------------------------------

    def add_parameter(self, name: str, default: float | str = 0.0) -> None:
        """A float parameter, or a trigger when ``default == "trigger"``."""
        if default == "trigger":
            self.triggers.add(name)
            default = 0.0
        self.params[name] = np.full(self.mixer.count, float(default))

    def add_state(self, name: str, clip=None, *, blend1d=None, blend2d=None, parameter: str | None = None,
                  **play_options) -> State:
        """A state playing ``clip``, or a blend space: ``blend1d=[(clip, position), ...]`` driven by
        ``parameter``; ``blend2d=[(clip, (x, y)), ...]`` driven by ``parameter=("px", "py")``."""
        if name in self.states:
            raise StateMachineError(f"state {name!r} defined twice")
        blend = None
        if blend1d is not None:
            blend = BlendSpace1D(self.mixer, blend1d, layer=self.layer)
        elif blend2d is not None:
            blend = BlendSpace2D(self.mixer, blend2d, layer=self.layer)
        elif clip is None:
            raise StateMachineError(f"state {name!r} plays nothing: give a clip or a blend space")
        else:
            self.mixer.slot(clip, self.layer)  # check the clip exists now
        state = State(name, clip, blend, parameter, **play_options)
        self.states[name] = state
        self._names.append(name)
        return state

    def add_transition(self, source: str, target: str, when: str | None = None, *, duration: float = 0.25,
                       exit_time: float | None = None, blend: str = "linear") -> Transition:
        """A transition from ``source`` (or "*") to ``target`` when ``when`` holds (and/or at ``exit_time``),
        crossfading over ``duration``; ``blend`` as :meth:`skeletal.Mixer.crossfade`'s (an inertialized
        switch: "inertialize", "inertialize_spring", "dead_blend")."""
        for name in (source, target):
            if name != "*" and name not in self.states:
                raise StateMachineError(f"transition {source!r} -> {target!r}: no state {name!r}")
        if target == "*":
            raise StateMachineError("a transition cannot go to '*'")
        condition = Condition.parse(when)
        for p in condition.parameters:
            if p not in self.params:
                raise StateMachineError(f"transition {source!r} -> {target!r}: unknown parameter {p!r}")
        if not condition.terms and exit_time is None:
            raise StateMachineError(f"transition {source!r} -> {target!r} needs a condition or an exit time")
        if blend != "linear":
            if blend not in ("inertialize", "inertialize_spring", "dead_blend"):
                raise StateMachineError(f"transition {source!r} -> {target!r}: unknown blend {blend!r}")
        transition = Transition(source, target, condition, float(duration), exit_time, blend)
        self.transitions.append(transition)
        return transition

    def start(self, state: str, *, instances: InstanceSelector = None) -> None:
        """Enter ``state`` at once (no fade)."""
        rows = np.arange(self.mixer.count)[self.mixer._instances(instances)]
        self._enter(state, rows, 0.0)

    # -- runtime -------------------------------------------------------------------------------

    def set(self, name: str, value, *, instances: InstanceSelector = None) -> None:
        if name not in self.params:
            raise StateMachineError(f"unknown parameter {name!r} (parameters: {', '.join(self.params) or 'none'})")
        self.params[name][self.mixer._instances(instances)] = value

    def trigger(self, name: str, *, instances: InstanceSelector = None) -> None:
        self.set(name, 1.0, instances=instances)

    def state_of(self, instance: int = 0) -> str | None:
        index = self.current[instance]
        return self._names[index] if index >= 0 else None

    def before_update(self, dt: float) -> None:
        # Blend-space states follow their parameter.
        for name, state in self.states.items():
            if state.blend is not None and state.blend_parameter is not None:
                rows = np.flatnonzero(self.current == self._names.index(name))
                if rows.size:
                    params = state.blend_parameter
                    value = (np.column_stack([self.params[p][rows] for p in params]) if isinstance(params, (list, tuple))
                             else self.params[params][rows])
                    state.blend.set(value, instances=rows)
        # Transitions in definition order; an instance takes at most one per update.
        moved = np.zeros(self.mixer.count, dtype=bool)
        for tr in self.transitions:
            if tr.source == "*":
                source_ok = (self.current != self._names.index(tr.target)) & (self.current >= 0)
            else:
                source_ok = self.current == self._names.index(tr.source)
            candidates = np.flatnonzero(source_ok & ~moved)
            if candidates.size == 0:
                continue
            ok = np.ones(candidates.size, dtype=bool)
            if tr.condition.terms:
                ok &= tr.condition.evaluate(self.params, candidates)
            if tr.exit_time is not None:
                # The source state's normalised time; for "*" each instance's own current state.
                times = np.empty(candidates.size)
                for index in np.unique(self.current[candidates]):
                    here = self.current[candidates] == index
                    times[here] = self.states[self._names[index]].normalized_time(self.mixer, self.layer)[candidates[here]]
                ok &= times >= tr.exit_time
            rows = candidates[ok]
            if rows.size == 0:
                continue
            for p in tr.condition.parameters:
                if p in self.triggers:
                    self.params[p][rows] = 0.0
            sources = {self._names[i] for i in np.unique(self.current[rows])}
            self._enter(tr.target, rows, tr.duration, tr.blend)
            moved[rows] = True
            for callback in self.on_transition:
                for source in sources:
                    callback(source, tr.target, rows)

    def _enter(self, name: str, rows: np.ndarray, duration: float, blend: str = "linear") -> None:
        if name not in self.states:
            raise StateMachineError(f"no state {name!r}")
        for index in np.unique(self.current[rows]):
            if index >= 0:
                self.states[self._names[index]].leave(rows[self.current[rows] == index])
        state = self.states[name]
        if state.blend is not None and state.blend_parameter is not None:
            params = state.blend_parameter
            value = (np.column_stack([self.params[p][rows] for p in params]) if isinstance(params, (list, tuple))
                     else self.params[params][rows])
            state.blend.value[rows] = value
        state.enter(self.mixer, self.layer, duration, rows, blend)
        self.current[rows] = self._names.index(name)

    # -- files ---------------------------------------------------------------------------------

    @classmethod
    def from_dict(cls, target, spec: dict[str, Any], *, layer: int = 0) -> "StateMachine":
        """Build from the structure shown in the module docstring."""
        sm = cls(target, layer=layer)
        try:
            for name, default in spec.get("parameters", {}).items():
                sm.add_parameter(name, default)
            for name, st in spec["states"].items():
                st = dict(st)
                if "blend1d" in st:
                    b = st.pop("blend1d")
                    sm.add_state(name, blend1d=[tuple(s) for s in b["samples"]], parameter=b["parameter"], **st)
                elif "blend2d" in st:
                    b = st.pop("blend2d")
                    samples = [(s[0], tuple(s[1])) for s in b["samples"]]
                    sm.add_state(name, blend2d=samples, parameter=tuple(b["parameters"]), **st)
                else:
                    sm.add_state(name, st.pop("clip", None), **st)
            for tr in spec.get("transitions", []):
                sm.add_transition(tr["from"], tr["to"], tr.get("when"), duration=tr.get("duration", 0.25),
                                  exit_time=tr.get("exit_time"), blend=tr.get("blend", "linear"))
            initial = spec.get("initial") or next(iter(spec["states"]))
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise StateMachineError(f"bad state machine definition: {type(exc).__name__}: {exc}") from None
        sm.start(initial)
        return sm

    @classmethod
    def from_file(cls, target, path: str | os.PathLike, *, layer: int = 0) -> "StateMachine":
        """Load a ``.json`` (or ``.yaml``/``.yml`` with PyYAML installed) definition."""
        path = os.fspath(path)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if path.endswith((".yaml", ".yml")):
            try:
                import yaml
            except ImportError:
                raise StateMachineError(f"{os.path.basename(path)}: reading YAML needs PyYAML (pip install pyyaml)") from None
            spec = yaml.safe_load(text)
        else:
            try:
                spec = json.loads(text)
            except json.JSONDecodeError as exc:
                raise StateMachineError(f"{os.path.basename(path)}: invalid JSON: {exc}") from None
        if not isinstance(spec, dict):
            raise StateMachineError(f"{os.path.basename(path)}: expected an object at the top level")
        return cls.from_dict(target, spec, layer=layer)
