"""Springs for procedural motion: a critically damped smoother and spring ("jiggle") bone chains.

**Critically damped spring** (:class:`SmoothedValue`, :func:`critical_spring`): ``x`` follows a
target with the exact solution of ``x'' = -w^2 (x - target) - 2 w x'`` over each step (``w =
2 / smooth_time``), so the result does not depend on how a time span is split into frames (two steps
of dt/2 equal one of dt to rounding), it never overshoots a fixed target when starting at rest, and it
converges exponentially.

**Jiggle chains** (:class:`JiggleChains`): joints ``j0 -> j1 -> ... -> jk`` (each the parent of the
next, e.g. a tail) get a particle at every joint after the first and one at a tip beyond the last.
Each particle is pulled toward its animated place relative to the simulated previous particle
(``stiffness``, 1/s^2), slowed by ``damping`` (1/s) and pulled by ``gravity`` (m/s^2, world), in
fixed substeps of at most ``max_step`` seconds, and projected back to its bone length (position
based, so lengths are kept exactly). The joints are then rotated, parent first, so each bone points
at its particle, and those rotations are written back into the local pose. One numba kernel per
frame over (instances, particles) arrays; the simulation runs in world space (the model placed by
``placement`` (B, 4, 4)), so moving the character swings the tail.

>>> s = SmoothedValue([0.0, 0.0, 0.0], smooth_time=0.2)
>>> s.update([1.0, 0.0, 0.0], 1.0).round(3).tolist()     # after 1 s (5 smooth times)
[1.0, 0.0, 0.0]
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ..errors import SkeletalError
# the scalar quaternion kernels (skeletal.quat); imported from here by playback.procedural too
from ..quat import nlerp_identity, qmul, qnormalize, qrotate, quat_from_to, quat_from_world
from .jobs import borrow, field, jiggle_job


# ---------------------------------------------------------------------------------------------
# critically damped spring


@njit(cache=True)
def critical_spring(x, v, target, omega, dt):
    """One exact step of a critically damped spring, in place: ``x``, ``v`` (..., D) float64 arrays
    (flattened here), ``target`` same shape, ``omega`` (rad/s, > 0), ``dt`` seconds (>= 0)."""
    xf = x.reshape(-1)
    vf = v.reshape(-1)
    tf = target.reshape(-1)
    e = math.exp(-omega * dt)
    for i in range(xf.shape[0]):
        d = xf[i] - tf[i]
        j = vf[i] + omega * d
        xf[i] = tf[i] + (d + j * dt) * e
        vf[i] = (vf[i] - omega * j * dt) * e


class SmoothedValue:
    """A value (any shape) that follows a target through a critically damped spring.

    ``smooth_time``: seconds to cover about 60% of a step change... more precisely ``omega = 2 /
    smooth_time`` (after ``smooth_time`` a step has closed 59%, after 2.5x 96%).
    """

    def __init__(self, value, smooth_time: float = 0.15):
        if not (math.isfinite(smooth_time) and smooth_time > 0):
            raise SkeletalError(f"smooth_time must be positive, got {smooth_time}")
        self.value = np.array(value, dtype=np.float64)
        self.velocity = np.zeros_like(self.value)
        self.smooth_time = float(smooth_time)

    @property
    def omega(self) -> float:
        return 2.0 / self.smooth_time

    def update(self, target, dt: float) -> np.ndarray:
        """Advance by ``dt`` seconds toward ``target``; returns the new value."""
        target = np.ascontiguousarray(np.broadcast_to(np.asarray(target, np.float64), self.value.shape))
        if dt > 0:
            critical_spring(self.value, self.velocity, target, self.omega, float(dt))
        return self.value

    def reset(self, value) -> None:
        self.value[...] = value
        self.velocity[...] = 0.0


# ---------------------------------------------------------------------------------------------
# jiggle chains


@njit(cache=True)
def _jiggle_one(b, job, max_step, dt):
    """Simulate ``dt`` seconds (in steps of at most ``max_step``) and apply every chain of instance ``b``
    of a :class:`~skeletal.playback.jobs.JiggleJob`, whose fields are:

    world (B, N, >=3, 4) model-space world matrices of the current pose (read); placement (B, 4, 4)
    model -> world; pose (B, N, 10) local pose, rotations of chain joints rewritten; parents (N,);
    chains: joints[chain_start[c]:chain_start[c + 1]] rig indices, parent first; a chain of K joints
    has K particles (joints 2..K, then the tip), particle i (1..K) at index ``chain_start[c] + i - 1``
    of the state arrays; stiffness, damping (C,) per chain; gravity (3,);
    pos, vel (B, P, 3) state; rest_len (B, P) bone lengths (measured
    on the animated pose when an instance starts); initialised (B,) bool; weight (B,) 0..1
    (0: animated pose kept, state still simulated)."""
    world, placement, pose, parents = field(job, "world"), field(job, "placement"), field(job, "pose"), field(job, "parents")
    chain_start, joints, stiffness = field(job, "chain_start"), field(job, "joints"), field(job, "stiffness")
    damping, gravity, pos, vel = field(job, "damping"), field(job, "gravity"), field(job, "pos"), field(job, "vel")
    rest_len, initialised, weight = field(job, "rest_len"), field(job, "initialised"), field(job, "weight")
    n_chains = chain_start.shape[0] - 1
    steps = 1
    if dt > max_step:
        steps = int(math.ceil(dt / max_step))
    h = dt / steps
    if True:
        M = placement[b]
        fresh = not initialised[b]
        initialised[b] = True
        for c in range(n_chains):
            j0 = chain_start[c]
            k = chain_start[c + 1] - j0  # joints in the chain; particles k (joints 1..k-1, then the tip)
            p0 = j0  # particle offset of this chain: chains use one particle per joint slot
            # animated world positions of joints and tip (tip = last joint + its own offset, rotated)
            ax = np.empty(k + 1)
            ay = np.empty(k + 1)
            az = np.empty(k + 1)
            for i in range(k):
                W = world[b, joints[j0 + i]]
                x, y, z = W[0, 3], W[1, 3], W[2, 3]
                ax[i] = M[0, 0] * x + M[0, 1] * y + M[0, 2] * z + M[0, 3]
                ay[i] = M[1, 0] * x + M[1, 1] * y + M[1, 2] * z + M[1, 3]
                az[i] = M[2, 0] * x + M[2, 1] * y + M[2, 2] * z + M[2, 3]
            last = joints[j0 + k - 1]
            W = world[b, last]
            t = pose[b, last]
            ex = W[0, 0] * t[0] + W[0, 1] * t[1] + W[0, 2] * t[2]
            ey = W[1, 0] * t[0] + W[1, 1] * t[1] + W[1, 2] * t[2]
            ez = W[2, 0] * t[0] + W[2, 1] * t[1] + W[2, 2] * t[2]
            ax[k] = ax[k - 1] + M[0, 0] * ex + M[0, 1] * ey + M[0, 2] * ez
            ay[k] = ay[k - 1] + M[1, 0] * ex + M[1, 1] * ey + M[1, 2] * ez
            az[k] = az[k - 1] + M[2, 0] * ex + M[2, 1] * ey + M[2, 2] * ez
            if fresh:
                for i in range(1, k + 1):
                    q = p0 + i - 1
                    pos[b, q, 0], pos[b, q, 1], pos[b, q, 2] = ax[i], ay[i], az[i]
                    vel[b, q, 0] = vel[b, q, 1] = vel[b, q, 2] = 0.0
                    rest_len[b, q] = math.sqrt((ax[i] - ax[i - 1]) ** 2 + (ay[i] - ay[i - 1]) ** 2
                                               + (az[i] - az[i - 1]) ** 2)
            elif dt > 0.0:
                ks = stiffness[c]
                decay = math.exp(-damping[c] * h)
                for _ in range(steps):
                    px, py, pz = ax[0], ay[0], az[0]
                    for i in range(1, k + 1):
                        q = p0 + i - 1
                        gx = px + ax[i] - ax[i - 1]
                        gy = py + ay[i] - ay[i - 1]
                        gz = pz + az[i] - az[i - 1]
                        x, y, z = pos[b, q, 0], pos[b, q, 1], pos[b, q, 2]
                        vx = (vel[b, q, 0] + (ks * (gx - x) + gravity[0]) * h) * decay
                        vy = (vel[b, q, 1] + (ks * (gy - y) + gravity[1]) * h) * decay
                        vz = (vel[b, q, 2] + (ks * (gz - z) + gravity[2]) * h) * decay
                        nx, ny, nz = x + vx * h, y + vy * h, z + vz * h
                        # keep the bone length: project onto the sphere around the previous particle
                        dx, dy, dz = nx - px, ny - py, nz - pz
                        d = math.sqrt(dx * dx + dy * dy + dz * dz)
                        if d < 1e-12:
                            dx, dy, dz = gx - px, gy - py, gz - pz
                            d = max(math.sqrt(dx * dx + dy * dy + dz * dz), 1e-12)
                        s = rest_len[b, q] / d
                        nx, ny, nz = px + dx * s, py + dy * s, pz + dz * s
                        vel[b, q, 0], vel[b, q, 1], vel[b, q, 2] = (nx - x) / h, (ny - y) / h, (nz - z) / h
                        pos[b, q, 0], pos[b, q, 1], pos[b, q, 2] = nx, ny, nz
                        px, py, pz = nx, ny, nz
            u = weight[b]
            if u <= 0.0:
                continue
            # rotate the joints, parent first, so each bone points at its particle
            parent = parents[joints[j0]]
            if parent >= 0:
                rx, ry, rz, rw = quat_from_world(world[b, parent])
            else:
                rx, ry, rz, rw = 0.0, 0.0, 0.0, 1.0
            mx, my, mz, mw = quat_from_world(M)
            rx, ry, rz, rw = qmul(mx, my, mz, mw, rx, ry, rz, rw)  # parent's world rotation (simulated)
            bx, by, bz = ax[0], ay[0], az[0]  # simulated position of the current joint
            for i in range(k):
                jnt = joints[j0 + i]
                row = pose[b, jnt]
                # this joint's rotation under the (possibly rotated) parent, animated local rotation
                wx, wy, wz, ww = qmul(rx, ry, rz, rw, row[3], row[4], row[5], row[6])
                # where the animated bone points now, and where the particle is
                q = p0 + i
                tx, ty, tz = pos[b, q, 0] - bx, pos[b, q, 1] - by, pos[b, q, 2] - bz
                cx, cy, cz = ax[i + 1] - ax[i], ay[i + 1] - ay[i], az[i + 1] - az[i]
                # the animated bone direction rotated by the parent's correction: child offset in
                # this joint's frame, expressed with the new world rotation
                ox, oy, oz, ow = quat_from_world(world[b, jnt])
                ox, oy, oz, ow = qmul(mx, my, mz, mw, ox, oy, oz, ow)
                lx, ly, lz = qrotate(-ox, -oy, -oz, ow, cx, cy, cz)  # bone in the joint's animated frame
                cx, cy, cz = qrotate(wx, wy, wz, ww, lx, ly, lz)
                fx, fy, fz, fw = quat_from_to(cx, cy, cz, tx, ty, tz)
                fx, fy, fz, fw = nlerp_identity(fx, fy, fz, fw, u)
                nx, ny, nz, nw = qmul(fx, fy, fz, fw, wx, wy, wz, ww)
                # local = parent^-1 * new world
                lx2, ly2, lz2, lw2 = qmul(-rx, -ry, -rz, rw, nx, ny, nz, nw)
                lx2, ly2, lz2, lw2 = qnormalize(lx2, ly2, lz2, lw2)
                row[3], row[4], row[5], row[6] = lx2, ly2, lz2, lw2
                rx, ry, rz, rw = nx, ny, nz, nw
                if u >= 1.0:
                    bx, by, bz = pos[b, q, 0], pos[b, q, 1], pos[b, q, 2]
                else:
                    ex, ey, ez = qrotate(nx, ny, nz, nw, lx, ly, lz)
                    bx, by, bz = bx + ex, by + ey, bz + ez


@njit(cache=True, parallel=True)
def jiggle_kernel(job, max_step, dt):
    """:func:`_jiggle_one` for every instance of a :class:`~skeletal.playback.jobs.JiggleJob`, in parallel."""
    for b in prange(field(job, "pose").shape[0]):
        _jiggle_one(b, borrow(job), max_step, dt)  # (no atomic reference count per instance)


@njit(cache=True)
def jiggle_kernel_serial(job, max_step, dt):
    """:func:`_jiggle_one` for every instance, serially (small batches: no thread pool)."""
    for b in range(field(job, "pose").shape[0]):
        _jiggle_one(b, borrow(job), max_step, dt)  # (no atomic reference count per instance)


class JiggleChains:
    """Spring bones on chains of joints, as a post-process stage of a Player / Mixer / Crowd.

    ``chains``: a list of chains, each a list of joint names or rig indices, parent first (each the
    parent of the next; at least one joint: its bone and the tip beyond it swing). ``stiffness``
    (1/s^2, pull toward the animated shape), ``damping`` (1/s), ``gravity`` (m/s^2 in world, default
    (0, -9.81, 0) times ``gravity_scale``): scalars or one per chain.

    State lives in arrays (B, P, 3) for the B instances of the mixer; :meth:`reset` snaps every
    particle back to the animated pose (after a teleport).

    >>> player = skeletal.Player(skeletal.load("Fox.glb"))                           # doctest: +SKIP
    >>> tail = JiggleChains.attach(player, [["b_Tail01", "b_Tail02", "b_Tail03"]])   # doctest: +SKIP
    """

    def __init__(self, rig, count: int, chains, *, stiffness=60.0, damping=6.0, gravity=(0.0, -9.81, 0.0),
                 max_step: float = 1.0 / 120.0):
        self.rig = rig
        self.count = int(count)
        indices = []
        for chain in chains:
            idx = [self._index(rig, j) for j in chain]
            if not idx:
                raise SkeletalError("a jiggle chain needs at least one joint")
            for a, b in zip(idx, idx[1:]):
                if rig.parents[b] != a:
                    raise SkeletalError(f"jiggle chain: {rig.names[b]!r} is not a child of {rig.names[a]!r}")
            indices.append(idx)
        if not indices:
            raise SkeletalError("no jiggle chains given")
        self.chains = indices
        self.chain_start = np.cumsum([0] + [len(c) for c in indices]).astype(np.int64)
        self.joints = np.array([j for c in indices for j in c], np.int64)
        n = len(indices)
        self.stiffness = np.broadcast_to(np.asarray(stiffness, np.float64), (n,)).copy()
        self.damping = np.broadcast_to(np.asarray(damping, np.float64), (n,)).copy()
        if np.any(self.stiffness < 0) or np.any(self.damping < 0):
            raise SkeletalError("jiggle stiffness and damping must not be negative")
        self.gravity = np.asarray(gravity, np.float64).reshape(3).copy()
        self.max_step = float(max_step)
        p = len(self.joints)
        self.positions = np.zeros((self.count, p, 3))
        self.velocities = np.zeros((self.count, p, 3))
        self.rest_length = np.zeros((self.count, p))
        self.initialised = np.zeros(self.count, np.bool_)
        self.weight = np.ones(self.count)
        self.placement = np.repeat(np.eye(4)[None], self.count, axis=0)
        self._job: tuple | None = None  # (the arrays it was built from, the JiggleJob): see apply

    @staticmethod
    def _index(rig, joint) -> int:
        if isinstance(joint, (int, np.integer)):
            if not 0 <= int(joint) < len(rig):
                raise SkeletalError(f"joint index {joint} is out of range (0..{len(rig) - 1})")
            return int(joint)
        try:
            return rig.find(joint)
        except KeyError:
            raise SkeletalError(f"no joint named {joint!r}") from None

    def reset(self) -> None:
        self.initialised[:] = False

    def apply(self, world: np.ndarray, pose: np.ndarray, dt: float) -> None:
        """Simulate ``dt`` seconds and rewrite the chain joints' rotations in ``pose`` (B, N, 10)
        given the current model-space ``world`` (B, N, 3|4, 4)."""
        arrays = (world, self.placement, pose, self.stiffness, self.damping, self.gravity, self.positions,
                  self.velocities, self.rest_length, self.initialised, self.weight)
        built = self._job
        if built is None or any(a is not b for a, b in zip(built[0], arrays)):  # an array replaced: a new job
            job = jiggle_job(world=world, placement=self.placement, pose=pose, parents=self.rig.parents,
                             chain_start=self.chain_start, joints=self.joints, stiffness=self.stiffness,
                             damping=self.damping, gravity=self.gravity, pos=self.positions, vel=self.velocities,
                             rest_len=self.rest_length, initialised=self.initialised, weight=self.weight)
            built = self._job = (arrays, job)
        kernel = jiggle_kernel_serial if self.count <= 4 else jiggle_kernel
        kernel(built[1], self.max_step, float(dt))


def find_tail_chains(rig) -> list[list[int]]:
    """Chains of joints whose names contain "tail" (case-insensitive), each from the topmost such
    joint down its first "tail" child: e.g. Fox.glb's b_Tail01 -> b_Tail02 -> b_Tail03."""
    names = [n.lower() for n in rig.names]
    is_tail = ["tail" in n for n in names]
    chains = []
    for j in range(len(rig)):
        p = rig.parents[j]
        if is_tail[j] and not (p >= 0 and is_tail[p]):
            chain = [j]
            while True:
                kids = [c for c in range(chain[-1] + 1, len(rig)) if rig.parents[c] == chain[-1] and is_tail[c]]
                if not kids:
                    break
                chain.append(kids[0])
            chains.append(chain)
    return chains
