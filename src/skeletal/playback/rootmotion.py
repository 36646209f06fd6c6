"""Root motion: move the character by its animation instead of letting the clip drag the mesh away.

Enabling root motion on a mixer layer does two things to every clip it plays:

* the clip plays **in place**: the root node's horizontal translation (model-space x and z, y up)
  is held at its first-frame value and, with ``yaw=True``, its turning about the up axis is removed;
* each update reports the motion that was removed as a **delta** per instance,
  ``(dx, dz, dyaw)``, with (dx, dz) expressed in the character's heading frame at the start of the
  step. The caller applies it: ``position += R_y(heading) @ (dx, 0, dz); heading += dyaw``.

Deltas are loop-correct: a step that wraps around a loop adds the whole cycle's displacement (and
turn), so summing the deltas over any number of loops gives the clip's total displacement. Blended
actions contribute in proportion to their weights (normalised like poses).

The translation change is exact for every interpolation (it is a linear map of the key values and
tangents); yaw removal is applied at the keys (exact at keys; between keys the slerp of the corrected
keys differs from the corrected slerp by far less than a degree for ordinary key spacing).
"""

from __future__ import annotations

import numpy as np

from ..anim.clip import Clip, Track
from ..errors import SkeletalError
from ..anim.pose import world_matrices
from ..quat import decompose_trs, quat_conjugate, quat_mul
from ..anim.sampling import sample
from . import kernels as K
from .mixer import Mixer


def _yaw_quat(angle: np.ndarray) -> np.ndarray:
    angle = np.asarray(angle, dtype=np.float64)
    return np.stack([np.zeros_like(angle), np.sin(angle / 2), np.zeros_like(angle), np.cos(angle / 2)], axis=-1)


def yaw_of(q: np.ndarray) -> np.ndarray:
    """Rotation about +Y (radians) of xyzw quaternions: the twist part of a swing-twist split."""
    return 2.0 * np.arctan2(q[..., 1], q[..., 3])


def rotate_y(xz: np.ndarray, angle: np.ndarray) -> np.ndarray:
    """Rotate (..., 2) vectors (x, z) about +Y by ``angle`` (right-handed: x -> -z for +90 degrees)."""
    c, s = np.cos(angle), np.sin(angle)
    x, z = xz[..., 0], xz[..., 1]
    return np.stack([x * c + z * s, -x * s + z * c], axis=-1)


class RootMotion:
    """Root-motion extraction for the actions of one mixer layer (see the module docstring).

    ``delta`` (B, 3): ``(dx, dz, dyaw)`` of the last update. ``node``: rig index of the root node
    (default: the first node, in rig order, that any clip translates).
    """

    def __init__(self, target, node: str | int | None = None, *, yaw: bool = True, layer: int = 0):
        self.mixer: Mixer = target if isinstance(target, Mixer) else target.mixer
        self.layer = layer
        self.yaw = yaw
        rig = self.mixer.rig
        clips = self.mixer.clipset.clips
        if node is None:
            translated = {t.node for c in clips for t in c.tracks if t.path == "translation"}
            if not translated:
                raise SkeletalError("no clip translates any node: nothing to extract root motion from")
            node = min(translated)
        elif isinstance(node, str):
            node = rig.find(node)
        self.node = int(node)
        parent = rig.parents[self.node]
        rest_world = world_matrices(rig.parents, rig.rest)
        self.parent_world = rest_world[parent] if parent >= 0 else np.eye(4)
        _, self.parent_rotation, _ = decompose_trs(self.parent_world)
        self.curves: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        for c, clip in enumerate(list(clips)):
            if not clip.additive:
                self._extract(c, clip)
        self.mixer.clipset._pack()
        self.delta = np.zeros((self.mixer.count, 3))
        self.mixer.controllers.append(self)

    # -- preparing clips ----------------------------------------------------------------------

    def _extract(self, index: int, clip: Clip) -> None:
        """Replace clip ``index`` of the mixer by its in-place version and keep its motion curve."""
        mine = [t for t in clip.tracks if t.node == self.node and t.path in ("translation", "rotation")]
        if not mine:
            return
        times = np.unique(np.concatenate([[0.0], *[t.times for t in mine], [clip.duration]]).astype(np.float64))
        rig = self.mixer.rig
        pose, _ = sample(Clip("root", mine), times, rig.rest, self.mixer.asset.morph_start, self.mixer.asset.rest_morph)
        local_t, local_q = pose[:, self.node, 0:3], pose[:, self.node, 3:7]
        model_pos = local_t @ self.parent_world[:3, :3].T + self.parent_world[:3, 3]
        model_yaw = np.unwrap(yaw_of(quat_mul(self.parent_rotation[None], local_q))) if self.yaw else np.zeros(len(times))
        self.curves[index] = (times, model_pos[:, [0, 2]] - model_pos[0, [0, 2]], model_yaw - model_yaw[0])

        linear = self.parent_world[:3, :3]
        inverse = np.linalg.inv(linear)
        horizontal = np.diag([1.0, 0.0, 1.0])
        keep = np.eye(3) - inverse @ horizontal @ linear  # removes the horizontal model-space part
        anchor = inverse @ horizontal @ linear @ local_t[0]  # ... and puts back the first frame's
        tracks = []
        for track in clip.tracks:
            if track.node == self.node and track.path == "translation":
                values = track.values.astype(np.float64) @ keep.T
                if track.interpolation == "CUBICSPLINE":
                    values[1::3] += anchor  # tangents are derivatives: only the values move
                else:
                    values += anchor
                track = Track(track.node, track.path, track.interpolation, track.times, values)
            elif self.yaw and track.node == self.node and track.path == "rotation":
                track = self._remove_yaw(track, times, model_yaw)
            tracks.append(track)
        self.mixer.clipset.clips[index] = Clip(clip.name, tracks, dict(clip.markers), clip.additive)

    def _remove_yaw(self, track: Track, times: np.ndarray, model_yaw: np.ndarray) -> Track:
        """q' = conj(p) * Y(-(yaw(t) - yaw(0))) * p * q for the parent's rest rotation p (at the keys)."""
        p = self.parent_rotation
        p_conj = quat_conjugate(p)
        turn = np.interp(track.times.astype(np.float64), times, model_yaw) - model_yaw[0]
        correction = quat_mul(quat_mul(p_conj[None], _yaw_quat(-turn)), p[None])  # (K, 4), local frame
        values = track.values.astype(np.float64)
        if track.interpolation == "CUBICSPLINE":
            values = values.reshape(-1, 3, 4)
            values = quat_mul(correction[:, None, :], values).reshape(-1, 4)
        else:
            values = quat_mul(correction, values)
        return Track(track.node, track.path, track.interpolation, track.times, values)

    # -- per update ---------------------------------------------------------------------------

    def _at(self, c: int, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        times, xz, yaw = self.curves[c]
        return np.stack([np.interp(t, times, xz[:, 0]), np.interp(t, times, xz[:, 1])], axis=-1), np.interp(t, times, yaw)

    def _segment(self, c: int, t0, t1):
        """Displacement (in the heading frame at t0) and turn of the clip from t0 to t1."""
        p0, y0 = self._at(c, t0)
        p1, y1 = self._at(c, t1)
        return rotate_y(p1 - p0, -y0), y1 - y0

    def before_update(self, dt: float) -> None:
        pass

    def after_update(self, dt: float) -> None:
        self.delta = self.delta_of(self.mixer.fs, self.mixer.ist)

    def delta_of(self, fs: np.ndarray, ist: np.ndarray) -> np.ndarray:
        """The root motion (B, 3) (dx, dz, dyaw in the heading frame) of the clocks ``fs`` (B, S, NF) and
        ``ist`` (B, S, NI): rows of the mixer's clock arrays (all of them after an update, or the
        rows of some instances stepped on their own), each slot's motion from its previous sample time
        to its sample time, weighted by its effective weight. Only the rows where a slot has a weight
        are sampled for it."""
        mixer = self.mixer
        total = np.zeros((fs.shape[0], 3))
        weight_sum = np.zeros(fs.shape[0])
        for s in range(len(mixer.slot_clip)):
            c = int(mixer.slot_clip[s])
            if mixer.slot_layer[s] != self.layer or c not in self.curves:
                continue
            weight = fs[:, s, K.F_EFFECTIVE]
            if not np.any(weight > 0):
                continue
            rows = np.flatnonzero(weight != 0)  # (the rows of weight 0 would add nothing)
            w = fs[rows, s, K.F_EFFECTIVE]
            d = mixer.clipset.duration[c]
            t0 = fs[rows, s, K.F_PREV_SAMPLE]
            t1 = fs[rows, s, K.F_SAMPLE]
            loops = ist[rows, s, K.I_EV_LOOPS]
            forward = fs[rows, s, K.F_SPEED] >= 0
            repeat = ist[rows, s, K.I_LOOP] == K.LOOP_REPEAT
            move, turn = self._segment(c, t0, t1)
            wrapped = repeat & (loops > 0)
            if np.any(wrapped):
                # Chain: t0 -> end of cycle, whole cycles, start of cycle -> t1 (mirrored backwards),
                # each segment turned into the frame at t0 by the yaw accumulated before it.
                end = np.where(forward, d, 0.0)
                start = np.where(forward, 0.0, d)
                m1, y1 = self._segment(c, t0, end)
                cycle_move, cycle_turn = self._segment(c, start, end)
                acc_move, acc_turn = m1, y1
                for k in range(int(loops.max()) - 1):
                    more = loops - 1 > k
                    acc_move = acc_move + np.where(more[:, None], rotate_y(cycle_move, acc_turn), 0.0)
                    acc_turn = acc_turn + np.where(more, cycle_turn, 0.0)
                m3, y3 = self._segment(c, start, t1)
                acc_move = acc_move + rotate_y(m3, acc_turn)
                acc_turn = acc_turn + y3
                move = np.where(wrapped[:, None], acc_move, move)
                turn = np.where(wrapped, acc_turn, turn)
            total[rows, 0:2] += w[:, None] * move
            total[rows, 2] += w * turn
            weight_sum[rows] += w
        return total / np.maximum(weight_sum, 1.0)[:, None]
