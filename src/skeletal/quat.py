"""Quaternion and transform maths shared by the stages.

Contracts: quaternions are ``(x, y, z, w)``; matrices are row-major and act on column vectors
(``p' = M @ p``); a transform is composed as ``T @ R @ S`` (glTF). The ``*_nb`` functions are numba
device functions for kernels (scalars in, scalars or in-place writes out); the others are vectorised
numpy functions over any leading batch shape.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic, overload

# ---------------------------------------------------------------------------------------------
# numba device functions (called from kernels)


# Above this |cos| of the half-angle between two keys, slerp is replaced by normalised lerp (the two
# differ by < 1e-7 there). Same threshold as three.js r187's ``Quaternion.slerpFlat``, so that files
# with slightly non-unit keys (quantised, or hand written) give the same matrices as three.js.
NLERP_ABOVE_COS = 0.9995


def _sin_quarter(x):
    """sin(x) for |x| <= pi/2 (float or float64 array): x + x^3 P(x^2), P the Taylor polynomial of
    (sin x - x) / x^3 to the x^21 term (truncation below 2e-18). Measured against 40-digit sines on
    [0, pi/2]: at most 1.8 ulp off (libm's sin: 0.5), and no library call, so a slerp kernel keeps
    its loop free of calls. Outside [-pi/2, pi/2] the error grows (1e-11 at pi): not for general use.
    Plain arithmetic, so that :func:`sin_quarter` (compiled) and this (numpy, for tables built ahead
    such as :attr:`skeletal.playback.clipset.ClipSet.slerp_keys`) round identically.

    >>> abs(_sin_quarter(0.5) - float(np.sin(0.5))) < 1e-16
    True
    """
    x2 = x * x
    p = -8.22063524662433e-18 + x2 * 1.9572941063391263e-20
    p = 2.8114572543455206e-15 + x2 * p
    p = -7.647163731819816e-13 + x2 * p
    p = 1.6059043836821613e-10 + x2 * p
    p = -2.505210838544172e-08 + x2 * p
    p = 2.7557319223985893e-06 + x2 * p
    p = -0.0001984126984126984 + x2 * p
    p = 0.008333333333333333 + x2 * p
    p = -0.16666666666666666 + x2 * p
    return x + x * (x2 * p)


#: :func:`_sin_quarter` compiled, for kernels: ``sin_quarter(theta)`` with |theta| <= pi/2 (always inlined)
sin_quarter = njit(cache=True, forceinline=True)(_sin_quarter)


@njit(cache=True, forceinline=True)
def slerp_into(out, o, ax, ay, az, aw, bx, by, bz, bw, u):
    """Shortest-path slerp from a to b by u in [0, 1], written to out[o:o+4].

    b is negated when ``a . b < 0``. For nearly parallel keys (cos >= NLERP_ABOVE_COS) the result is a
    normalised lerp; identical keys return a unchanged. The angle between a and b is then at most a
    quarter turn, so the sines are :func:`sin_quarter`'s (no library call; within 2 ulp of libm),
    with the arithmetic of the playback kernels' tabulated slerp
    (:attr:`skeletal.playback.clipset.ClipSet.slerp_keys`: theta and 1 / sin theta per key).
    """
    if ax == bx and ay == by and az == bz and aw == bw:
        out[o] = ax
        out[o + 1] = ay
        out[o + 2] = az
        out[o + 3] = aw
        return
    cos = ax * bx + ay * by + az * bz + aw * bw
    if cos < 0.0:
        bx = -bx
        by = -by
        bz = -bz
        bw = -bw
        cos = -cos
    s0 = 1.0 - u
    s1 = u
    if cos < NLERP_ABOVE_COS:
        angle = np.arccos(cos)
        inv = 1.0 / sin_quarter(angle)
        s0 = sin_quarter(s0 * angle) * inv
        s1 = sin_quarter(s1 * angle) * inv
    x = ax * s0 + bx * s1
    y = ay * s0 + by * s1
    z = az * s0 + bz * s1
    w = aw * s0 + bw * s1
    if cos >= NLERP_ABOVE_COS:
        inv = 1.0 / np.sqrt(x * x + y * y + z * z + w * w)
        x *= inv
        y *= inv
        z *= inv
        w *= inv
    out[o] = x
    out[o + 1] = y
    out[o + 2] = z
    out[o + 3] = w


def keys_f32_into_f64(out, o, values, a, u) -> bool:
    """Whether an intrinsic's (out, o, values, a, u) are the types :class:`KeyPairIR` serves: float64
    1-D C ``out``, float32 1-D C ``values``, integer offsets, a float fraction."""
    return (isinstance(out, types.Array) and out.ndim == 1 and out.dtype == types.float64 and out.layout == "C"
            and isinstance(values, types.Array) and values.ndim == 1 and values.dtype == types.float32
            and values.layout == "C" and isinstance(o, types.Integer) and isinstance(a, types.Integer)
            and isinstance(u, types.Float))


class KeyPairIR:
    """The LLVM IR the 4-wide key intrinsics share (:func:`_near_slerp_f64`, :func:`_near_lerp_known_f64`,
    :func:`skeletal.sampling.lerp3_into`'s vector form): their (out, o, values, a, u) arguments
    unpacked (``dst``, ``src`` arrays, ``at_o``, ``at_a`` int64, ``u`` double), float32 loads widened
    to 4 doubles, splats, the left-to-right lane sum and the lerp ``k0 * (1 - u) + k1 * u`` (no fused
    multiply-add: the scalar code's bits)."""

    def __init__(self, context, builder, signature, args):
        self.b = builder
        self.i32, self.i64, self.f64 = ir.IntType(32), ir.IntType(64), ir.DoubleType()
        self.v4f, self.v4d = ir.VectorType(ir.FloatType(), 4), ir.VectorType(self.f64, 4)
        self.dst = context.make_array(signature.args[0])(context, builder, args[0])
        self.src = context.make_array(signature.args[2])(context, builder, args[2])
        self.at_o = context.cast(builder, args[1], signature.args[1], types.int64)
        self.at_a = context.cast(builder, args[3], signature.args[3], types.int64)
        self.u = context.cast(builder, args[4], signature.args[4], types.float64)

    def load4(self, offset: int):
        """``values[a + offset : a + offset + 4]`` widened to 4 doubles."""
        b = self.b
        at = b.add(self.at_a, ir.Constant(self.i64, offset)) if offset else self.at_a
        return b.fpext(b.load(b.bitcast(b.gep(self.src.data, [at]), self.v4f.as_pointer()), align=4), self.v4d)

    def splat(self, x):
        b = self.b
        lane0 = b.insert_element(ir.Constant(self.v4d, ir.Undefined), x, ir.Constant(self.i32, 0))
        return b.shuffle_vector(lane0, ir.Constant(self.v4d, ir.Undefined),
                                ir.Constant(ir.VectorType(self.i32, 4), [0] * 4))

    def total(self, v):  # ((v0 + v1) + v2) + v3, the scalar code's order
        b = self.b
        e = [b.extract_element(v, ir.Constant(self.i32, k)) for k in range(4)]
        return b.fadd(b.fadd(b.fadd(e[0], e[1]), e[2]), e[3])

    def lerp(self, k0, k1):
        b = self.b
        return b.fadd(b.fmul(k0, self.splat(b.fsub(ir.Constant(self.f64, 1.0), self.u))), b.fmul(k1, self.splat(self.u)))

    def normalised(self, x):
        """x times 1 / sqrt of its left-to-right sum of squares."""
        b = self.b
        sqrt = b.module.declare_intrinsic("llvm.sqrt", [self.f64])
        inv = b.fdiv(ir.Constant(self.f64, 1.0), b.call(sqrt, [self.total(b.fmul(x, x))]))
        return b.fmul(x, self.splat(inv))

    def store4(self, x):
        """x into ``out[o:o+4]``."""
        b = self.b
        b.store(x, b.bitcast(b.gep(self.dst.data, [self.at_o]), self.v4d.as_pointer()), align=8)


@intrinsic
def _near_slerp_f64(typingctx, out, o, values, a, u):
    """:func:`near_slerp_into` for float64 ``out``: :func:`slerp_into` for two keys that are identical or nearly parallel (|a . b| >=
    NLERP_ABOVE_COS, the caller knows: e.g. a zero angle in ClipSet.slerp_keys), read from float32
    ``values[a:a+4]`` and ``values[a+4:a+8]``, written to float64 ``out[o:o+4]``: the same
    arithmetic and order of operations (identical keys give a; else b sign-aligned, lerp,
    normalised by 1 / sqrt of the left-to-right sum of squares), so the same bits, with the four
    components in one vector register (a scalar track costs ~75 instructions, this ~30: 50 rotation
    tracks of Soldier's Walk, 86% of whose keys take this branch: 0.37 -> 0.25 us). Nothing is
    bounds-checked; ``out`` and ``values`` 1-D C-contiguous.

    """
    if not keys_f32_into_f64(out, o, values, a, u):
        return None

    def codegen(context, builder, signature, args):
        k = KeyPairIR(context, builder, signature, args)
        qa, qb = k.load4(0), k.load4(4)
        same = builder.icmp_unsigned("==", builder.bitcast(builder.fcmp_ordered("==", qa, qb), ir.IntType(4)),
                                     ir.Constant(ir.IntType(4), 15))
        flip = builder.fcmp_ordered("<", k.total(builder.fmul(qa, qb)), ir.Constant(k.f64, 0.0))
        qb = builder.select(flip, builder.fneg(qb), qb)
        k.store4(builder.select(same, qa, k.normalised(k.lerp(qa, qb))))
        return context.get_dummy_value()

    return types.void(out, o, values, a, u), codegen


def near_slerp_into(out, o, values, a, u):  # pragma: no cover - compiled through the overload below
    """:func:`slerp_into` of keys ``values[a:a+4]``, ``values[a+4:a+8]`` by ``u`` into ``out[o:o+4]``,
    for keys known to be identical or nearly parallel (|a . b| >= NLERP_ABOVE_COS): in kernels only.
    float32 keys into a float64 ``out`` take a 4-wide form with the same bits; other dtypes
    :func:`slerp_into` itself.

    >>> near_slerp_into(flat, tracks[k, TK_OUT], values, start + key * 4, u)   # doctest: +SKIP
    """
    raise NotImplementedError


@overload(near_slerp_into, jit_options={"forceinline": True})
def _ol_near_slerp_into(out, o, values, a, u):
    if (isinstance(out, types.Array) and out.dtype == types.float64 and out.layout == "C" and out.ndim == 1
            and isinstance(values, types.Array) and values.dtype == types.float32 and values.layout == "C"):
        def vector(out, o, values, a, u):
            _near_slerp_f64(out, o, values, a, u)

        return vector

    def scalar(out, o, values, a, u):
        i = np.int64(a)
        slerp_into(out, o, np.float64(values[i]), np.float64(values[i + 1]), np.float64(values[i + 2]),
                   np.float64(values[i + 3]), np.float64(values[i + 4]), np.float64(values[i + 5]),
                   np.float64(values[i + 6]), np.float64(values[i + 7]), u)

    return scalar


@intrinsic
def _near_lerp_known_f64(typingctx, out, o, values, a, u, flip):
    """:func:`_near_slerp_f64` for keys known to differ, with their sign test known (``flip``: b is
    negated, a . b < 0, decided ahead with the same float64 arithmetic): the lerp of a and the
    sign-aligned b normalised by 1 / sqrt of the left-to-right sum of squares, the same bits."""
    if not (keys_f32_into_f64(out, o, values, a, u) and isinstance(flip, types.Boolean)):
        return None

    def codegen(context, builder, signature, args):
        k = KeyPairIR(context, builder, signature, args)
        negate = context.cast(builder, args[5], signature.args[5], types.boolean)
        qa, qb = k.load4(0), k.load4(4)
        qb = builder.select(negate, builder.fneg(qb), qb)
        k.store4(k.normalised(k.lerp(qa, qb)))
        return context.get_dummy_value()

    return types.void(out, o, values, a, u, flip), codegen


#: ``near_slerp_known_into``'s ``flags``: b is negated (a . b < 0) / the two keys are identical
NEAR_FLIP, NEAR_SAME = 1.0, 2.0


def near_slerp_known_into(out, o, values, a, u, flags):  # pragma: no cover - compiled through the overload below
    """:func:`near_slerp_into` with the keys' tests made ahead: ``flags`` 0.0 (a plain pair),
    :data:`NEAR_FLIP` (a . b < 0 in float64, summed left to right) or :data:`NEAR_SAME` (identical
    keys: a is written), as :func:`near_slerp_table` tabulates them. The same bits as
    :func:`near_slerp_into`, without the dot product and the compare on the hot path (50 rotation
    tracks of Soldier's Walk: 0.05 us). Other dtypes: :func:`slerp_into` (``flags`` unused).

    >>> near_slerp_known_into(flat, o, values, start + key * 4, u, table[row, 1])   # doctest: +SKIP
    """
    raise NotImplementedError


@overload(near_slerp_known_into, jit_options={"forceinline": True})
def _ol_near_slerp_known_into(out, o, values, a, u, flags):
    if (isinstance(out, types.Array) and out.dtype == types.float64 and out.layout == "C" and out.ndim == 1
            and isinstance(values, types.Array) and values.dtype == types.float32 and values.layout == "C"):
        def vector(out, o, values, a, u, flags):
            if flags == NEAR_SAME:
                i, j = np.int64(a), np.int64(o)
                for c in range(4):
                    out[j + c] = np.float64(values[i + c])
            else:
                _near_lerp_known_f64(out, o, values, a, u, flags == NEAR_FLIP)

        return vector

    def scalar(out, o, values, a, u, flags):
        i = np.int64(a)
        slerp_into(out, o, np.float64(values[i]), np.float64(values[i + 1]), np.float64(values[i + 2]),
                   np.float64(values[i + 3]), np.float64(values[i + 4]), np.float64(values[i + 5]),
                   np.float64(values[i + 6]), np.float64(values[i + 7]), u)

    return scalar


def near_slerp_table(slerp_keys: np.ndarray, rotation_keys: list[tuple[int, int, int]], values: np.ndarray) -> np.ndarray:
    """A copy of a clip set's ``slerp_keys`` (keys, 2) whose rows without a tabulated angle (theta 0:
    identical or nearly parallel keys, the ones :func:`near_slerp_into` samples) hold in column 1 the
    flags of :func:`near_slerp_known_into`. ``rotation_keys``: (first key row, first float in
    ``values``, key count) of every LINEAR rotation track; ``values`` float32 xyzw keys. The tests are
    made in float64 as the kernels make them (identical components; the left-to-right dot product).

    >>> table = near_slerp_table(cs.slerp_keys, [(0, 0, 3)], keys.reshape(-1))     # doctest: +SKIP
    """
    table = np.array(slerp_keys, dtype=np.float64, copy=True)
    rows, starts = [], []
    for row, start, count in rotation_keys:
        if count > 1:
            rows.append(np.arange(row, row + count - 1))
            starts.append(start + 4 * np.arange(count - 1))
    if not rows:
        return table
    row = np.concatenate(rows)
    at = np.concatenate(starts)[:, None] + np.arange(4)
    qa, qb = values[at].astype(np.float64), values[at + 4].astype(np.float64)
    dot = ((qa[:, 0] * qb[:, 0] + qa[:, 1] * qb[:, 1]) + qa[:, 2] * qb[:, 2]) + qa[:, 3] * qb[:, 3]
    flags = np.where(np.all(qa == qb, axis=1), NEAR_SAME, np.where(dot < 0.0, NEAR_FLIP, 0.0))
    near = table[row, 0] <= 0.0
    table[row[near], 1] = flags[near]
    return table


@njit(cache=True, forceinline=True)
def normalize4_inplace(out, o):
    """Normalise out[o:o+4]; a zero quaternion becomes identity."""
    n = np.sqrt(out[o] ** 2 + out[o + 1] ** 2 + out[o + 2] ** 2 + out[o + 3] ** 2)
    if n > 0.0:
        inv = 1.0 / n
        out[o] *= inv
        out[o + 1] *= inv
        out[o + 2] *= inv
        out[o + 3] *= inv
    else:
        out[o] = 0.0
        out[o + 1] = 0.0
        out[o + 2] = 0.0
        out[o + 3] = 1.0


# ---------------------------------------------------------------------------------------------
# scalar quaternion kernels: the one home of the quaternion maths that kernels use (IK solvers,
# jiggle chains, foot placement, look-at). Scalars in, tuples out; ordinary numba calls (not
# IR-inlined: LLVM still inlines them into the caller, and kernels that use them compile faster).


@njit(cache=True)
def qmul(ax, ay, az, aw, bx, by, bz, bw):
    """Hamilton product ``a * b`` (rotation b first, then a) as a tuple (x, y, z, w).

    >>> qmul(0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0)
    (1.0, 0.0, 0.0, 0.0)
    """
    return (aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
            aw * bw - ax * bx - ay * by - az * bz)


@njit(cache=True)
def qrotate(qx, qy, qz, qw, vx, vy, vz):
    """The vector v rotated by the unit quaternion q, as a tuple (x, y, z).

    >>> qrotate(0.0, 0.0, 0.7071067811865476, 0.7071067811865476, 1.0, 0.0, 0.0)[1]
    1.0000000000000002
    """
    tx = 2.0 * (qy * vz - qz * vy)
    ty = 2.0 * (qz * vx - qx * vz)
    tz = 2.0 * (qx * vy - qy * vx)
    return (vx + qw * tx + qy * tz - qz * ty,
            vy + qw * ty + qz * tx - qx * tz,
            vz + qw * tz + qx * ty - qy * tx)


@njit(cache=True)
def qnormalize(x, y, z, w):
    """q / |q| as a tuple; the identity for a (near) zero quaternion.

    >>> qnormalize(0.0, 0.0, 0.0, 2.0)
    (0.0, 0.0, 0.0, 1.0)
    """
    n = np.sqrt(x * x + y * y + z * z + w * w)
    if n < 1e-300:
        return (0.0, 0.0, 0.0, 1.0)
    k = 1.0 / n
    return (x * k, y * k, z * k, w * k)


@njit(cache=True)
def quat_from_rotation(r00, r01, r02, r10, r11, r12, r20, r21, r22):
    """The unit quaternion of a rotation matrix given by its nine entries (row-major), by the largest
    of trace and diagonal (Shepperd), normalised.

    >>> quat_from_rotation(1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)
    (0.0, 0.0, 0.0, 1.0)
    """
    tr = r00 + r11 + r22
    if tr > 0.0:
        s = 0.5 / np.sqrt(tr + 1.0)
        return qnormalize((r21 - r12) * s, (r02 - r20) * s, (r10 - r01) * s, 0.25 / s)
    if r00 > r11 and r00 > r22:
        s = 2.0 * np.sqrt(max(1.0 + r00 - r11 - r22, 1e-300))
        return qnormalize(0.25 * s, (r01 + r10) / s, (r02 + r20) / s, (r21 - r12) / s)
    if r11 > r22:
        s = 2.0 * np.sqrt(max(1.0 + r11 - r00 - r22, 1e-300))
        return qnormalize((r01 + r10) / s, 0.25 * s, (r12 + r21) / s, (r02 - r20) / s)
    s = 2.0 * np.sqrt(max(1.0 + r22 - r00 - r11, 1e-300))
    return qnormalize((r02 + r20) / s, (r12 + r21) / s, 0.25 * s, (r10 - r01) / s)


@njit(cache=True)
def quat_from_world(m):
    """Rotation of the top-left 3x3 of the matrix ``m`` (columns normalised first, so uniform or
    axis-aligned scale is removed; a zero column counts as zero) as a unit quaternion tuple."""
    c0 = np.sqrt(m[0, 0] ** 2 + m[1, 0] ** 2 + m[2, 0] ** 2)
    c1 = np.sqrt(m[0, 1] ** 2 + m[1, 1] ** 2 + m[2, 1] ** 2)
    c2 = np.sqrt(m[0, 2] ** 2 + m[1, 2] ** 2 + m[2, 2] ** 2)
    c0 = 1.0 / c0 if c0 > 1e-300 else 0.0
    c1 = 1.0 / c1 if c1 > 1e-300 else 0.0
    c2 = 1.0 / c2 if c2 > 1e-300 else 0.0
    return quat_from_rotation(m[0, 0] * c0, m[0, 1] * c1, m[0, 2] * c2,
                              m[1, 0] * c0, m[1, 1] * c1, m[1, 2] * c2,
                              m[2, 0] * c0, m[2, 1] * c1, m[2, 2] * c2)


@njit(cache=True)
def quat_from_to(ax, ay, az, bx, by, bz):
    """The shortest rotation taking direction a to direction b (any lengths; identity if either is ~0;
    for opposite directions a half turn about an axis perpendicular to a).

    >>> [round(v, 6) for v in quat_from_to(1.0, 0.0, 0.0, 0.0, 2.0, 0.0)]  # a quarter turn about z
    [0.0, 0.0, 0.707107, 0.707107]
    """
    la = np.sqrt(ax * ax + ay * ay + az * az)
    lb = np.sqrt(bx * bx + by * by + bz * bz)
    if la < 1e-12 or lb < 1e-12:
        return (0.0, 0.0, 0.0, 1.0)
    ax, ay, az = ax / la, ay / la, az / la
    bx, by, bz = bx / lb, by / lb, bz / lb
    d = ax * bx + ay * by + az * bz
    if d < -0.999999:
        # perpendicular axis: a x X, or a x Y when a is along X
        px, py, pz = 0.0, az, -ay
        if py * py + pz * pz < 1e-6:
            px, py, pz = -az, 0.0, ax
        return qnormalize(px, py, pz, 0.0)
    cx = ay * bz - az * by
    cy = az * bx - ax * bz
    cz = ax * by - ay * bx
    return qnormalize(cx, cy, cz, 1.0 + d)


@njit(cache=True)
def nlerp_identity(x, y, z, w, u):
    """Shortest-path normalised lerp from the identity to q by u in [0, 1].

    >>> nlerp_identity(1.0, 0.0, 0.0, 0.0, 0.0)
    (0.0, 0.0, 0.0, 1.0)
    """
    if w < 0.0:
        x, y, z, w = -x, -y, -z, -w
    return qnormalize(x * u, y * u, z * u, 1.0 - u + w * u)


# ---------------------------------------------------------------------------------------------
# numpy API (batch-first)


def quat_to_matrix(q: np.ndarray) -> np.ndarray:
    """Rotation matrices (..., 3, 3) from unit quaternions (..., 4) xyzw.

    >>> float(quat_to_matrix(np.array([0.0, 0.0, 0.0, 1.0]))[0, 0])
    1.0
    """
    q = np.asarray(q, dtype=np.float64)
    x, y, z, w = np.moveaxis(q, -1, 0)
    xx, yy, zz = x * x, y * y, z * z
    xy, xz, yz = x * y, x * z, y * z
    wx, wy, wz = w * x, w * y, w * z
    m = np.empty(q.shape[:-1] + (3, 3))
    m[..., 0, 0] = 1 - 2 * (yy + zz)
    m[..., 0, 1] = 2 * (xy - wz)
    m[..., 0, 2] = 2 * (xz + wy)
    m[..., 1, 0] = 2 * (xy + wz)
    m[..., 1, 1] = 1 - 2 * (xx + zz)
    m[..., 1, 2] = 2 * (yz - wx)
    m[..., 2, 0] = 2 * (xz - wy)
    m[..., 2, 1] = 2 * (yz + wx)
    m[..., 2, 2] = 1 - 2 * (xx + yy)
    return m


def matrix_to_quat(m: np.ndarray) -> np.ndarray:
    """Unit quaternions (..., 4) xyzw from rotation matrices (..., 3, 3).

    Shepperd's method: each matrix uses the formula built on its largest of (trace, m00, m11, m22),
    which keeps the square root away from zero and the result accurate for every angle.
    """
    m = np.asarray(m, dtype=np.float64)
    shape = m.shape[:-2]
    r = m.reshape(-1, 3, 3)
    m00, m11, m22 = r[:, 0, 0], r[:, 1, 1], r[:, 2, 2]
    trace = m00 + m11 + m22
    pick = np.argmax(np.stack([m00, m11, m22, trace], axis=1), axis=1)
    # Candidate 4*q for each branch, rows: (x, y, z, w); the chosen branch's big term is 1 + ...
    big = np.stack([1 + m00 - m11 - m22, 1 + m11 - m00 - m22, 1 + m22 - m00 - m11, 1 + trace], axis=1)
    s = 2.0 * np.sqrt(np.maximum(big[np.arange(len(r)), pick], 1e-300))  # = 4 * |q_pick|
    d10, d01 = r[:, 1, 0], r[:, 0, 1]
    d20, d02 = r[:, 2, 0], r[:, 0, 2]
    d21, d12 = r[:, 2, 1], r[:, 1, 2]
    cands = np.stack([
        np.stack([s * s / 4, d01 + d10, d02 + d20, d21 - d12], axis=1),  # x largest
        np.stack([d01 + d10, s * s / 4, d12 + d21, d02 - d20], axis=1),  # y largest
        np.stack([d02 + d20, d12 + d21, s * s / 4, d10 - d01], axis=1),  # z largest
        np.stack([d21 - d12, d02 - d20, d10 - d01, s * s / 4], axis=1),  # w largest
    ], axis=1)
    q = cands[np.arange(len(r)), pick] / s[:, None]
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    return q.reshape(shape + (4,))


def quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product ``a * b`` of quaternions (..., 4) xyzw, broadcasting over leading axes.

    ``a * b`` rotates by b first, then by a (``R(a * b) = R(a) @ R(b)``).

    >>> quat_mul([0, 0, 0, 1.0], [1.0, 0, 0, 0]).tolist()
    [1.0, 0.0, 0.0, 0.0]
    """
    a = np.asarray(a)
    b = np.asarray(b)
    dtype = np.result_type(a, b, np.float32)
    ax, ay, az, aw = (a[..., i] for i in range(4))
    bx, by, bz, bw = (b[..., i] for i in range(4))
    out = np.empty(np.broadcast_shapes(a.shape, b.shape), dtype=dtype)
    out[..., 0] = aw * bx + ax * bw + ay * bz - az * by
    out[..., 1] = aw * by - ax * bz + ay * bw + az * bx
    out[..., 2] = aw * bz + ax * by - ay * bx + az * bw
    out[..., 3] = aw * bw - ax * bx - ay * by - az * bz
    return out


def quat_conjugate(q: np.ndarray) -> np.ndarray:
    """Conjugates (..., 4) xyzw: ``(-x, -y, -z, w)``; the inverse of a unit quaternion.

    >>> quat_conjugate([1.0, 2.0, 3.0, 4.0]).tolist()
    [-1.0, -2.0, -3.0, 4.0]
    """
    q = np.asarray(q)
    out = np.array(q, dtype=np.result_type(q, np.float32), copy=True)
    out[..., :3] = -out[..., :3]
    return out


def quat_slerp(a: np.ndarray, b: np.ndarray, u: float) -> np.ndarray:
    """Shortest-path slerp of xyzw quaternion rows a, b (..., 4) by u in [0, 1] (what players do),
    normalised; nearly equal rows fall back to normalised lerp.

    >>> quat_slerp(np.array([0.0, 0.0, 0.0, 1.0]), np.array([0.0, 0.0, 1.0, 0.0]), 0.5).round(6).tolist()
    [0.0, 0.0, 0.707107, 0.707107]
    """
    cos = np.sum(a * b, axis=-1, keepdims=True)
    b = np.where(cos < 0, -b, b)
    cos = np.abs(cos)
    angle = np.arccos(np.clip(cos, -1.0, 1.0))
    sin = np.sin(angle)
    small = sin < 1e-9
    wa = np.where(small, 1.0 - u, np.sin((1.0 - u) * angle) / np.where(small, 1.0, sin))
    wb = np.where(small, u, np.sin(u * angle) / np.where(small, 1.0, sin))
    q = wa * a + wb * b
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def compose_trs(t: np.ndarray, q: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Row-major 4x4 matrices ``T @ R @ S`` (..., 4, 4) from t (..., 3), q (..., 4) xyzw, s (..., 3)."""
    t = np.asarray(t, dtype=np.float64)
    r = quat_to_matrix(q)
    m = np.zeros(r.shape[:-2] + (4, 4))
    m[..., :3, :3] = r * np.asarray(s, dtype=np.float64)[..., None, :]
    m[..., :3, 3] = t
    m[..., 3, 3] = 1.0
    return m


def decompose_trs(m: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Split row-major affine 4x4 matrices (..., 4, 4) into t (..., 3), q (..., 4) xyzw, s (..., 3).

    T is the last column; S the norms of the upper 3x3's columns, with the x scale negated when the
    determinant is negative (a mirror, as three.js does) so that R is a proper rotation. R is the
    rotation nearest to the normalised columns (polar decomposition by SVD): a file's slightly sheared
    or noisy matrix, or one with a zero scale, still gives a valid unit quaternion.
    """
    m = np.asarray(m, dtype=np.float64)
    t = m[..., :3, 3].copy()
    linear = m[..., :3, :3]
    s = np.linalg.norm(linear, axis=-2)
    s[..., 0] = np.where(np.linalg.det(linear) < 0, -s[..., 0], s[..., 0])
    safe = np.where(s == 0, 1.0, s)
    u, _sigma, vt = np.linalg.svd(linear / safe[..., None, :])
    # Rank-deficient columns (a zero scale) can leave u @ vt a reflection: flip u's last axis there.
    flip = np.linalg.det(u @ vt) < 0
    u[..., :, -1] = np.where(flip[..., None], -u[..., :, -1], u[..., :, -1])
    return t, matrix_to_quat(u @ vt), s
