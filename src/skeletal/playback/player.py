"""Player: one animated instance of an asset, with three.js-style actions.

>>> asset = skeletal.load("Soldier.glb")                 # doctest: +SKIP
>>> player = skeletal.Player(asset)                      # doctest: +SKIP
>>> player.play("Walk")                                  # doctest: +SKIP
>>> player.update(1 / 60)                                # doctest: +SKIP
>>> player.crossfade("Run", duration=0.5)                # doctest: +SKIP
>>> player.node_world.shape                              # doctest: +SKIP
(68, 4, 4)
"""

from __future__ import annotations

import math
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np
import numpy.typing as npt

from ..asset import Asset
from ..anim.clip import Clip
from . import kernels as K
from .mixer import Event, JointMask, Mixer

if TYPE_CHECKING:  # the return types of the factory methods (imported lazily when they run)
    from ..anim.colliders import ColliderFrame
    from .blendspace import BlendSpace1D, BlendSpace2D
    from .ikstage import IKHandle
    from .rootmotion import RootMotion
    from .statemachine import StateMachine

_LOOP_BY_CODE = {code: name for name, code in K.LOOP_NAMES.items()}
_ALL = K.ALL  # every stage of an update (a module global: one lookup on the hot path)


class Action:
    """A clip on a layer of a :class:`Player`: a handle onto the mixer's slot (cheap to create).

    Properties read and write the action's state: ``time`` (clip-local seconds; setting it seeks),
    ``speed`` (time scale, negative plays backwards), ``weight``, ``loop`` ("once", "repeat",
    "pingpong", "clamp"), ``repetitions``, ``paused``; read-only: ``running``, ``finished``,
    ``effective_weight`` (weight x fade).
    """

    def __init__(self, player: "Player", clip: str | int | Clip, layer: int = 0, *, slot: int | None = None):
        self._player = player
        self._mixer = player.mixer
        self.layer = layer
        # A given slot (e.g. one of a blend space's) is used as is; otherwise the clip's plain action.
        self.slot = self._mixer.slot(clip, layer) if slot is None else int(slot)
        self.clip = self._mixer.clipset.clips[self._mixer.slot_clip[self.slot]]

    def _f(self, field: int) -> float:
        return float(self._mixer.fs[0, self.slot, field])

    def _i(self, field: int) -> int:
        return int(self._mixer.ist[0, self.slot, field])

    # -- state ---------------------------------------------------------------------------------

    @property
    def time(self) -> float:
        """The clip-local time the pose shows (ping-pong's backward rounds included)."""
        return self._f(K.F_SAMPLE)

    @time.setter
    def time(self, value: float) -> None:
        self.seek(value)

    @property
    def speed(self) -> float:
        return self._f(K.F_SPEED)

    @speed.setter
    def speed(self, value: float) -> None:
        self._mixer.fs[0, self.slot, K.F_SPEED] = value

    @property
    def weight(self) -> float:
        return self._f(K.F_WEIGHT)

    @weight.setter
    def weight(self, value: float) -> None:
        self._mixer.fs[0, self.slot, K.F_WEIGHT] = value
        self._mixer._refresh_sample_time(self.slot, slice(None))

    @property
    def loop(self) -> str:
        return _LOOP_BY_CODE[self._i(K.I_LOOP)]

    @loop.setter
    def loop(self, value: str) -> None:
        if value not in K.LOOP_NAMES:
            raise ValueError(f"loop mode {value!r} is not one of {tuple(K.LOOP_NAMES)}")
        self._mixer.ist[0, self.slot, K.I_LOOP] = K.LOOP_NAMES[value]

    @property
    def repetitions(self) -> float:
        return self._f(K.F_REPETITIONS)

    @repetitions.setter
    def repetitions(self, value: float) -> None:
        self._mixer.fs[0, self.slot, K.F_REPETITIONS] = value

    @property
    def paused(self) -> bool:
        return bool(self._i(K.I_FLAGS) & K.FLAG_PAUSED)

    @paused.setter
    def paused(self, value: bool) -> None:
        self._mixer.set_paused_slot(self.slot, bool(value))

    @property
    def running(self) -> bool:
        return bool(self._i(K.I_FLAGS) & K.FLAG_ENABLED)

    @property
    def finished(self) -> bool:
        return bool(self._i(K.I_FLAGS) & K.FLAG_FINISHED)

    @property
    def loop_count(self) -> int:
        return self._i(K.I_LOOP_COUNT)

    @property
    def effective_weight(self) -> float:
        return self._f(K.F_EFFECTIVE)

    @property
    def slot_clip_index(self) -> int:
        return int(self._mixer.slot_clip[self.slot])

    # -- controls ------------------------------------------------------------------------------

    def play(self, **options: Any) -> "Action":
        self._mixer.play(self.slot_clip_index, layer=self.layer, **options)
        return self

    def stop(self, fade: float = 0.0) -> "Action":
        self._mixer.stop_slot(self.slot, fade=fade)
        return self

    def seek(self, time: float) -> "Action":
        self._mixer.seek_slot(self.slot, time)
        return self

    def pause(self) -> "Action":
        self.paused = True
        return self

    def resume(self) -> "Action":
        self.paused = False
        return self

    def fade_in(self, duration: float) -> "Action":
        """Play (if stopped) and fade in from the current weight."""
        self._mixer.play(self.slot_clip_index, layer=self.layer, fade=duration, loop=self.loop,
                         speed=self.speed, weight=self.weight, repetitions=self.repetitions)
        return self

    def fade_out(self, duration: float) -> "Action":
        return self.stop(fade=duration)

    def crossfade_to(self, other: str | int | Clip, duration: float = 0.3, **options: Any) -> "Action":
        return self._player.crossfade(other, duration, layer=self.layer, **options)

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"Action({self.clip.name!r}, layer={self.layer}, {state}, t={self.time:.3f}, w={self.effective_weight:.3f})"


class Player:
    """One instance of an asset's scene, animated by actions.

    After each :meth:`update`: ``node_world`` (N_nodes, 4, 4) row-major world matrices in glTF node
    order (named by ``asset.node_names``); ``palettes`` one (J, 4, 4) palette per skin;
    ``local_pose`` (N, 10) and ``world`` in rig order, parents first (named by ``asset.rig.names``);
    ``morph_weights`` (M,) (per node ranges in ``asset.morph_start``). The two orders differ: look a
    node up by name with :meth:`world_of` instead of mixing them.
    """

    def __init__(self, asset: Asset, *, dtype: npt.DTypeLike = np.float64):
        self.asset = asset
        self.mixer = Mixer(asset, 1, dtype=dtype, events=True)
        self._parameters: dict = {}
        self._machines: list = []
        self._root_motion = None

    # -- actions -------------------------------------------------------------------------------

    def action(self, clip: str | int | Clip, layer: int | str = 0) -> Action:
        """The action of ``clip`` on ``layer`` (created stopped if new)."""
        return Action(self, clip, self.mixer.layer(layer))

    def play(self, clip: str | int | Clip, *, layer: int | str = 0, fade: float = 0.0, loop: str = "repeat",
             speed: float = 1.0, weight: float = 1.0, offset: float = 0.0, repetitions: float = math.inf,
             restart: bool = False) -> Action:
        """Play ``clip`` (by name, index or Clip); see :meth:`Mixer.play`."""
        layer = self.mixer.layer(layer)
        self.mixer.play(clip, layer=layer, fade=fade, loop=loop, speed=speed, weight=weight, offset=offset,
                        repetitions=repetitions, restart=restart)
        self.mixer.evaluate()
        return Action(self, clip, layer)

    def crossfade(self, clip: str | int | Clip, duration: float = 0.3, *, layer: int | str = 0, sync: bool = False,
                  warp: bool = False, snapshot: bool = False, **play_options: Any) -> Action:
        """Fade from the current pose of ``layer`` to ``clip`` over ``duration`` seconds; see
        :meth:`Mixer.crossfade`. The target starts at time 0 (or ``offset``), linear weights."""
        layer = self.mixer.layer(layer)
        self.mixer.crossfade(clip, duration, layer=layer, sync=sync, warp=warp, snapshot=snapshot, **play_options)
        self.mixer.evaluate()
        return Action(self, clip, layer)

    def stop(self, clip: str | int | Clip | None = None, *, fade: float = 0.0, layer: int | str = 0) -> None:
        """Stop one action, or every action of every layer when ``clip`` is None."""
        if clip is None:
            self.mixer.stop_all()
        else:
            self.mixer.stop(clip, layer=self.mixer.layer(layer), fade=fade)
        self.mixer.evaluate()

    @property
    def actions(self) -> list[Action]:
        """Every action that is running now."""
        running = np.flatnonzero(self.mixer.ist[0, :, K.I_FLAGS] & K.FLAG_ENABLED)
        return [Action(self, int(self.mixer.slot_clip[s]), int(self.mixer.slot_layer[s]), slot=s) for s in running]

    # -- layers --------------------------------------------------------------------------------

    def add_layer(self, name: str, *, weight: float = 1.0, mask: JointMask = None, additive: bool = False) -> int:
        """A layer over the existing ones; ``mask`` e.g. ``"mixamorig:Spine"`` (that joint and below) or
        ``{"Spine": 1.0, "Neck": 0.5}`` (soft), or an (N,) array in rig order."""
        return self.mixer.add_layer(name, weight=weight, mask=mask, additive=additive)

    def set_layer_weight(self, layer: int | str, weight: float) -> None:
        self.mixer.set_layer_weight(layer, weight)
        self.mixer.evaluate()

    # -- blend spaces, state machine, root motion ----------------------------------------------

    def blend_space_1d(self, samples: Sequence[tuple[str | int | Clip, float]], *, parameter: str | None = None,
                       layer: int | str = 0, sync: bool = True) -> BlendSpace1D:
        """A :class:`~skeletal.playback.blendspace.BlendSpace1D` over ``[(clip, position), ...]``;
        ``parameter`` names it for :meth:`set`."""
        from .blendspace import BlendSpace1D

        space = BlendSpace1D(self, samples, layer=self.mixer.layer(layer), sync=sync, parameter=parameter)
        if parameter:
            self._parameters[parameter] = space
        return space

    def blend_space_2d(self, samples: Sequence[tuple[str | int | Clip, Sequence[float]]], *,
                       parameter: str | None = None, layer: int | str = 0, sync: bool = True) -> BlendSpace2D:
        """A :class:`~skeletal.playback.blendspace.BlendSpace2D` over ``[(clip, (x, y)), ...]``."""
        from .blendspace import BlendSpace2D

        space = BlendSpace2D(self, samples, layer=self.mixer.layer(layer), sync=sync, parameter=parameter)
        if parameter:
            self._parameters[parameter] = space
        return space

    def state_machine(self, spec: dict[str, Any] | None = None, *, layer: int | str = 0) -> StateMachine:
        """A :class:`~skeletal.playback.statemachine.StateMachine` on ``layer``: empty (define it in
        code), from a dict, or from a ``.json``/``.yaml`` file path. Its parameters work with :meth:`set`."""
        from .statemachine import StateMachine

        layer = self.mixer.layer(layer)
        if spec is None:
            machine = StateMachine(self, layer=layer)
        elif isinstance(spec, dict):
            machine = StateMachine.from_dict(self, spec, layer=layer)
        else:
            machine = StateMachine.from_file(self, spec, layer=layer)
        self._machines.append(machine)
        self.mixer.evaluate()
        return machine

    def set(self, name: str, value: float | Sequence[float] | np.ndarray) -> None:
        """Set a named parameter of a blend space or state machine (e.g. ``set("speed", 2.1)``)."""
        if name in self._parameters:
            self._parameters[name].set(value)
            return
        for machine in self._machines:
            if name in machine.params:
                machine.set(name, value)
                return
        raise KeyError(f"no parameter named {name!r}")

    def trigger(self, name: str) -> None:
        self.set(name, 1.0)

    def enable_root_motion(self, node: str | int | None = None, *, yaw: bool = True,
                           layer: int | str = 0) -> RootMotion:
        """Play clips in place and report their motion in :attr:`root_motion` (see
        :mod:`skeletal.playback.rootmotion`)."""
        from .rootmotion import RootMotion

        self._root_motion = RootMotion(self, node, yaw=yaw, layer=self.mixer.layer(layer))
        return self._root_motion

    @property
    def root_motion(self) -> tuple[np.ndarray, float]:
        """``(translation (3,), yaw)`` removed by the last update, in the character's heading frame:
        apply as ``position += R_y(heading) @ translation; heading += yaw``."""
        if self._root_motion is None:
            return np.zeros(3), 0.0
        dx, dz, dyaw = self._root_motion.delta[0]
        return np.array([dx, 0.0, dz]), float(dyaw)

    # -- inverse kinematics ----------------------------------------------------------------------

    def add_ik(self, name: str, kind: str = "two_bone", chain: Sequence[str | int] = (), *,
               target: npt.ArrayLike | None = None, pole: npt.ArrayLike | None = None,
               weight: float | npt.ArrayLike = 1.0, **options: Any) -> IKHandle:
        """An IK stage after blending (see :meth:`Mixer.add_ik`): e.g.
        ``player.add_ik("left_foot", chain=("LeftUpLeg", "LeftLeg", "LeftFoot"), target=(x, y, z),
        pole=(x, y, z))``; returns a handle whose ``target``, ``pole`` and ``weight`` can change per frame."""
        return self.mixer.add_ik(name, kind, chain, target=target, pole=pole, weight=weight, **options)

    @property
    def ik(self) -> dict:
        """The IK stages by name."""
        return self.mixer.ik

    # -- time ----------------------------------------------------------------------------------

    def update(self, dt: float) -> None:
        """Advance every action by ``dt`` seconds and recompute the pose, world matrices and palettes.

        >>> player.update(1 / 60)                          # doctest: +SKIP
        """
        # The direct route: with no controllers and no snapshot fading, a frame is the clock and one
        # compiled call (the mixer's update on its frame's jobs: clocks, blending, world rows, palettes),
        # the events only when the call reports one. A Procedural alone whose frame is planned and fused
        # for this dt and frame (its ``fused_route``): the clock and that one compiled call (what the
        # mixer's update would run, without its Python frames). Anything else takes the mixer's one route.
        mixer = self.mixer
        frame = mixer.frame
        if frame is not None and not mixer._snap_fading:
            controllers = mixer.controllers
            if not controllers:
                dt = float(dt)
                mixer.time += dt
                r = frame.call(frame.job, frame.ik, dt, _ALL)
                if r:  # events, or the single-action kernel met a blend
                    mixer._after_call(r, dt)
                return
            route = getattr(controllers[0], "fused_route", None) if len(controllers) == 1 else None
            if route is not None:
                dt = float(dt)
                if route[0] == dt and route[1] is frame:  # (dt, frame, call, job, ik)
                    mixer.time += dt
                    r = route[2](route[3], route[4], dt)
                    if r:  # an event (the stages wait for it), or a non-finite look-at target
                        controllers[0].after_fused(r, dt)
                    return
        mixer.update(dt)

    @property
    def time(self) -> float:
        return self.mixer.time

    # -- outputs -------------------------------------------------------------------------------

    @property
    def local_pose(self) -> np.ndarray:
        return self.mixer.local_pose[0]

    @property
    def morph_weights(self) -> np.ndarray:
        return self.mixer.morph_weights[0]

    @property
    def world(self) -> np.ndarray:
        return self.mixer.world[0]

    @property
    def property_values(self) -> np.ndarray:
        """(M,) the animated properties (KHR_animation_pointer), laid out by ``asset.properties``."""
        return self.mixer.property_values[0]

    @property
    def node_world(self) -> np.ndarray:
        """(N_nodes, 4, 4) world matrices in glTF node order: row i is ``asset.node_names[i]``."""
        return self.mixer.world[0][self.asset.rig.index_of]

    def world_of(self, name: str) -> np.ndarray:
        """The (4, 4) world matrix of the node named ``name`` at the current pose (a copy); KeyError
        naming the node when there is none. The same whatever order one thinks in.

        >>> hips = player.world_of("mixamorig:Hips")[:3, 3]     # doctest: +SKIP
        """
        try:
            index = self.asset.rig.find(name)
        except KeyError:
            raise KeyError(f"{self.asset.name}: no node named {name!r}") from None
        return self.mixer.world[0][index].copy()

    @property
    def palettes(self) -> tuple[np.ndarray, ...]:
        """One (J, 4, 4) palette per skin, the sequence the renderer takes: a tuple of views into the
        mixer's :attr:`~skeletal.Mixer.palettes`, updated in place by each update (the same tuple until
        ``mixer.palettes`` is replaced).

        >>> palette = player.palettes[0]                    # doctest: +SKIP
        """
        return self.mixer._first_palettes  # (the tuple Mixer._palettes_replaced keeps)

    if not TYPE_CHECKING:  # the same read as a C getter: no Python frame per read (~30 ns against ~80)
        palettes = property(attrgetter("mixer._first_palettes"), doc=palettes.__doc__)

    def colliders(self) -> ColliderFrame:
        """The asset's hit/hurt volumes in world space at the current pose
        (:class:`skeletal.colliders.ColliderFrame`: segment ends ``a``/``b`` (C, 3), ``radius`` (C,),
        ``tag``, ``visible``...). Visibility follows the clip of the running action with the largest
        effective weight (ties: the first found), at its sampled time.

        >>> frame = player.colliders()                      # doctest: +SKIP
        >>> hits = frame.select("hit")                      # doctest: +SKIP
        """
        colliders = self.asset.colliders
        clip, t = None, 0.0
        best = 0.0
        for action in self.actions:
            w = action.effective_weight
            if w > best:
                best, clip, t = w, action.clip.name, action.time
        return colliders.world(self.world, colliders.visible(clip, t))

    # -- events --------------------------------------------------------------------------------

    def on(self, kind: str, callback: Callable[[Event], None]) -> None:
        """Call ``callback(event)`` on "loop", "finished", "marker" events (or "*" for all)."""
        self.mixer.on(kind, callback)

    def events(self) -> list[Event]:
        """Events since the last call (polling alternative to :meth:`on`)."""
        return self.mixer.poll_events()
