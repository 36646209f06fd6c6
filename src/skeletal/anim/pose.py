"""Posing: local TRS rows -> world matrices (one parent-first pass) -> skin palettes.

Shapes (B = any number of poses, batch axis first):

* local pose: (B, N, 10) rows ``t(3) q(4) s(3)``, quaternions xyzw (see :mod:`skeletal.rig`)
* world matrices: (B, N, 4, 4) row-major, ``W[i] = W[parent[i]] @ T @ R @ S``
* palette of a skin: (B, J, 4, 4) row-major, ``P[j] = W[joint j] @ inverse_bind[j]``

>>> import numpy as np
>>> from skeletal.rig import Rig
>>> rig = Rig.from_parents(["a", "b"], [-1, 0])
>>> pose = rig.rest.copy(); pose[:, 0] = 1.0          # both nodes move 1 along x
>>> world_matrices(rig.parents, pose)[1, 0, 3]        # the child is 2 along x
2.0
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from .._compile import serial_variant
from .pose_ir import _affine_rows_codegen


def _affine_f64(*arrays) -> bool:
    """True when every array is a C-contiguous 3-D float64 array (the vector intrinsics' inputs)."""
    return all(isinstance(a, types.Array) and a.ndim == 3 and a.dtype == types.float64 and a.layout == "C"
               for a in arrays)


@intrinsic
def _times_tuple_f64(typingctx, dst, i, src, p, m):
    """``dst[i] = src[p] @ m`` (affine; m the 12 entries of a 3x4 matrix, row-major, float64; a 4x4
    dst gets its bottom row 0 0 0 1)."""
    if not (_affine_f64(dst, src) and m == types.UniTuple(types.float64, 12)):
        return None

    def codegen(context, builder, signature, args):
        vec = ir.VectorType(ir.DoubleType(), 4)
        b_rows = []
        for r in range(3):
            v = ir.Constant(vec, ir.Undefined)
            for c in range(4):
                v = builder.insert_element(v, builder.extract_value(args[4], r * 4 + c), ir.Constant(ir.IntType(32), c))
            b_rows.append(v)
        i = context.cast(builder, args[1], signature.args[1], types.int64)
        p = context.cast(builder, args[3], signature.args[3], types.int64)
        _affine_rows_codegen(context, builder, signature.args[0], args[0], i, signature.args[2], args[2], p, b_rows)
        return context.get_dummy_value()

    return types.void(dst, i, src, p, m), codegen


@intrinsic
def _times_matrix_f64(typingctx, dst, i, src, p, b, k):
    """``dst[i] = src[p] @ b[k]`` (affine; b (K, 3|4, 4) float64, its bottom row taken as 0 0 0 1; a
    4x4 dst gets its bottom row 0 0 0 1)."""
    if not _affine_f64(dst, src, b):
        return None

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        vec = ir.VectorType(ir.DoubleType(), 4)
        arr = context.make_array(signature.args[4])(context, builder, args[4])
        b_rows_n = cgutils.unpack_tuple(builder, arr.shape, 3)[1]
        k = context.cast(builder, args[5], signature.args[5], types.int64)
        b_rows = []
        for r in range(3):
            at = builder.mul(builder.add(builder.mul(k, b_rows_n), ir.Constant(i64, r)), ir.Constant(i64, 4))
            b_rows.append(builder.load(builder.bitcast(builder.gep(arr.data, [at]), vec.as_pointer()), align=8))
        i = context.cast(builder, args[1], signature.args[1], types.int64)
        p = context.cast(builder, args[3], signature.args[3], types.int64)
        _affine_rows_codegen(context, builder, signature.args[0], args[0], i, signature.args[2], args[2], p, b_rows)
        return context.get_dummy_value()

    return types.void(dst, i, src, p, b, k), codegen


def _parent_times_local(world, i, p, m):  # pragma: no cover - typed by the overload below
    """``world[i] = world[p] @ m``: m = (m00, m01, m02, m03, m10, ..., m23), a 3x4 affine matrix (a
    4x4 world row gets its bottom row 0 0 0 1)."""
    raise NotImplementedError


@overload(_parent_times_local, jit_options={"forceinline": True})
def _ol_parent_times_local(world, i, p, m):
    if _affine_f64(world) and m == types.UniTuple(types.float64, 12):
        def vector(world, i, p, m):
            _times_tuple_f64(world, i, world, p, m)

        return vector

    def scalar(world, i, p, m):
        l00, l01, l02, tx, l10, l11, l12, ty, l20, l21, l22, tz = m
        for r in range(3):
            a0, a1, a2 = world[p, r, 0], world[p, r, 1], world[p, r, 2]
            world[i, r, 0] = a0 * l00 + a1 * l10 + a2 * l20
            world[i, r, 1] = a0 * l01 + a1 * l11 + a2 * l21
            world[i, r, 2] = a0 * l02 + a1 * l12 + a2 * l22
            world[i, r, 3] = a0 * tx + a1 * ty + a2 * tz + world[p, r, 3]
        if world.shape[1] == 4:
            world[i, 3, 0], world[i, 3, 1], world[i, 3, 2], world[i, 3, 3] = 0.0, 0.0, 0.0, 1.0

    return scalar


def _joint_times_bind(out, j, world, i, inverse_bind):  # pragma: no cover - typed by the overload below
    """``out[j] = world[i] @ inverse_bind[j]`` (affine; a 4x4 out row gets its bottom row 0 0 0 1)."""
    raise NotImplementedError


@overload(_joint_times_bind, jit_options={"forceinline": True})
def _ol_joint_times_bind(out, j, world, i, inverse_bind):
    if _affine_f64(out, world, inverse_bind):
        def vector(out, j, world, i, inverse_bind):
            _times_matrix_f64(out, j, world, i, inverse_bind, j)

        return vector

    def scalar(out, j, world, i, inverse_bind):
        for r in range(3):
            a0 = world[i, r, 0]
            a1 = world[i, r, 1]
            a2 = world[i, r, 2]
            for c in range(4):
                out[j, r, c] = a0 * inverse_bind[j, 0, c] + a1 * inverse_bind[j, 1, c] + a2 * inverse_bind[j, 2, c]
            out[j, r, 3] += world[i, r, 3]
        if out.shape[1] == 4:
            out[j, 3, 0], out[j, 3, 1], out[j, 3, 2], out[j, 3, 3] = 0.0, 0.0, 0.0, 1.0

    return scalar


@njit(cache=True, forceinline=True)
def _set_affine_bottom_row(m):
    """A (4, 4) affine matrix's bottom row is 0 0 0 1; a (3, 4) one has none."""
    if m.shape[0] == 4:
        m[3, 0] = 0.0
        m[3, 1] = 0.0
        m[3, 2] = 0.0
        m[3, 3] = 1.0


@njit(cache=True, forceinline=True)
def affine_product_into(a, b, out):
    """``out = a @ b`` for affine matrices given by their top 3 rows (the implied bottom row of both is
    0 0 0 1). ``a``, ``b``: (>=3, 4); ``out``: (3, 4) or (4, 4) (then its bottom row is set too)."""
    for r in range(3):
        a0 = a[r, 0]
        a1 = a[r, 1]
        a2 = a[r, 2]
        for c in range(4):
            out[r, c] = a0 * b[0, c] + a1 * b[1, c] + a2 * b[2, c]
        out[r, 3] += a[r, 3]
    _set_affine_bottom_row(out)


@njit(cache=True, forceinline=True)
def _trs_rows(pose, i):
    """The top three rows of ``T @ R @ S`` for the local row ``pose[i]`` (10,), as a row-major 12-tuple
    (l00, l01, l02, tx, l10, ..., tz), in ``pose``'s dtype: the one local-matrix formula of
    :func:`world_node_into` and :func:`local_into`."""
    # Indexes the array directly (no row views): a view of an array every thread shares costs an
    # atomic reference count, which made the crowd's threads wait for each other.
    tx, ty, tz = pose[i, 0], pose[i, 1], pose[i, 2]
    x, y, z, w = pose[i, 3], pose[i, 4], pose[i, 5], pose[i, 6]
    sx, sy, sz = pose[i, 7], pose[i, 8], pose[i, 9]
    x2, y2, z2 = x + x, y + y, z + z
    xx, xy, xz, yy, yz, zz = x * x2, x * y2, x * z2, y * y2, y * z2, z * z2
    wx, wy, wz = w * x2, w * y2, w * z2
    # rotation-scale block of T @ R @ S (columns scaled)
    return ((1.0 - (yy + zz)) * sx, (xy - wz) * sy, (xz + wy) * sz, tx,
            (xy + wz) * sx, (1.0 - (xx + zz)) * sy, (yz - wx) * sz, ty,
            (xz - wy) * sx, (yz + wx) * sy, (1.0 - (xx + yy)) * sz, tz)


@njit(cache=True, forceinline=True)
def _store_rows(out, i, m):
    """``out[i, :3, :]`` = the row-major 12-tuple ``m``."""
    out[i, 0, 0], out[i, 0, 1], out[i, 0, 2], out[i, 0, 3] = m[0], m[1], m[2], m[3]
    out[i, 1, 0], out[i, 1, 1], out[i, 1, 2], out[i, 1, 3] = m[4], m[5], m[6], m[7]
    out[i, 2, 0], out[i, 2, 1], out[i, 2, 2], out[i, 2, 3] = m[8], m[9], m[10], m[11]


@njit(cache=True, forceinline=True)
def world_node_into(i, parents, pose, world):
    """World matrix of node i from its local row ``pose[i]`` (10,) and its parent's world matrix
    (already in ``world``): ``world[i] = world[parent] @ T @ R @ S``, written as the top 3 rows of
    ``world[i]`` ((N, 3, 4) or (N, 4, 4); the bottom row of a 4x4 is set too). Arithmetic in
    ``world``'s dtype, the local matrix never stored."""
    m = _trs_rows(pose, i)
    p = parents[i]
    if p < 0:
        _store_rows(world, i, m)
        if world.shape[1] == 4:
            world[i, 3, 0], world[i, 3, 1], world[i, 3, 2], world[i, 3, 3] = 0.0, 0.0, 0.0, 1.0
    else:  # the parent's rows times the local matrix (its bottom row too, for a 4x4)
        _parent_times_local(world, i, p, m)


@njit(cache=True, forceinline=True)
def local_to_world_one(parents, pose, world):
    """One pose: pose (N, 10) -> world (N, 4, 4) or (N, 3, 4), in one parent-first pass."""
    for i in range(len(parents)):
        world_node_into(i, parents, pose, world)


@njit(cache=True, forceinline=True)
def world_subset_one(parents, nodes, pose, world):
    """:func:`local_to_world_one` for the nodes listed in ``nodes`` only (ascending, and holding
    every listed node's parent): e.g. the joints of the skins and their ancestors, when nothing
    else is read."""
    for i in nodes:
        world_node_into(i, parents, pose, world)


@njit(cache=True, forceinline=True)
def local_into(i, pose, out):
    """``out[i, :3, :]`` = the top three rows of ``T @ R @ S`` for the local row ``pose[i]`` (10,),
    row-major, with :func:`world_node_into`'s arithmetic (the same values); ``out`` (N, 3|4, 4)."""
    _store_rows(out, i, _trs_rows(pose, i))


# ---------------------------------------------------------------------------------------------
# local matrices eight nodes at a time (float64, structure of arrays in registers)
#
# One node's T @ R @ S from its 10 floats is ~60 scalar instructions (loads, 30 multiplies and adds,
# 12 stores); eight nodes' rows loaded at once and transposed to one vector per field do the same
# arithmetic for all eight (the scalar formula's operations and order in every lane: the same bits),
# then the twelve results transpose back into each node's three rows. Soldier.glb's 68 nodes: see
# docs/guides/performance.md.

_LO = [0, 8, 2, 10, 4, 12, 6, 14]  # interleave the even lanes of two vectors
_HI = [1, 9, 3, 11, 5, 13, 7, 15]  # ... and the odd lanes


def _shuffle(builder, a, b, mask):
    return builder.shuffle_vector(a, b, ir.Constant(ir.VectorType(ir.IntType(32), len(mask)), mask))


def _transpose8(builder, rows):
    """Eight <8 x double> rows -> eight columns (column f lane k = rows[k][f])."""
    t = []
    for k in range(0, 8, 2):
        t += [_shuffle(builder, rows[k], rows[k + 1], _LO), _shuffle(builder, rows[k], rows[k + 1], _HI)]
    pairs_lo, pairs_hi = [0, 1, 8, 9, 4, 5, 12, 13], [2, 3, 10, 11, 6, 7, 14, 15]
    u = [None] * 8
    for h in (0, 4):
        u[h], u[h + 2] = _shuffle(builder, t[h], t[h + 2], pairs_lo), _shuffle(builder, t[h], t[h + 2], pairs_hi)
        u[h + 1], u[h + 3] = _shuffle(builder, t[h + 1], t[h + 3], pairs_lo), _shuffle(builder, t[h + 1], t[h + 3], pairs_hi)
    cols = [None] * 8
    for f in range(4):
        cols[f] = _shuffle(builder, u[f], u[4 + f], [0, 1, 2, 3, 8, 9, 10, 11])
        cols[f + 4] = _shuffle(builder, u[f], u[4 + f], [4, 5, 6, 7, 12, 13, 14, 15])
    return cols


@intrinsic
def _local_rows8_f64(typingctx, world, pose, first):
    """``world[n, :3, :]`` = the top rows of ``T @ R @ S`` of ``pose[n]`` for the eight nodes ``first``
    to ``first + 7`` (:func:`_trs_rows`' arithmetic in every lane). ``pose`` (N, 10) and ``world``
    (N, 3|4, 4) float64 C-contiguous; nothing is bounds-checked."""
    if not (_affine_f64(world) and isinstance(pose, types.Array) and pose.ndim == 2 and pose.dtype == types.float64
            and pose.layout == "C" and isinstance(first, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        b = builder
        i64, f64 = ir.IntType(64), ir.DoubleType()
        v8, v4, v2 = ir.VectorType(f64, 8), ir.VectorType(f64, 4), ir.VectorType(f64, 2)
        w = context.make_array(signature.args[0])(context, builder, args[0])
        src = context.make_array(signature.args[1])(context, builder, args[1])
        n0 = context.cast(builder, args[2], signature.args[2], types.int64)
        w_rows = cgutils.unpack_tuple(builder, w.shape, 3)[1]

        def load(at, vec):
            return b.load(b.bitcast(b.gep(src.data, [at]), vec.as_pointer()), align=8)

        node_at = [b.mul(b.add(n0, ir.Constant(i64, k)), ir.Constant(i64, 10)) for k in range(8)]
        f = _transpose8(b, [load(at, v8) for at in node_at])  # fields 0-7: t, q, sx
        tail = [load(b.add(at, ir.Constant(i64, 8)), v2) for at in node_at]  # sy, sz
        quads = [_shuffle(b, tail[k], tail[k + 1], [0, 1, 2, 3]) for k in range(0, 8, 2)]
        halves = [_shuffle(b, quads[k], quads[k + 1], list(range(8))) for k in (0, 2)]
        f.append(_shuffle(b, halves[0], halves[1], list(range(0, 16, 2))))
        f.append(_shuffle(b, halves[0], halves[1], list(range(1, 16, 2))))
        tx, ty, tz, x, y, z, wq, sx, sy, sz = f
        add, sub, mul = b.fadd, b.fsub, b.fmul
        one = ir.Constant(v8, [1.0] * 8)
        x2, y2, z2 = add(x, x), add(y, y), add(z, z)
        xx, xy, xz, yy, yz, zz = mul(x, x2), mul(x, y2), mul(x, z2), mul(y, y2), mul(y, z2), mul(z, z2)
        wx, wy, wz = mul(wq, x2), mul(wq, y2), mul(wq, z2)
        rows = (
            (mul(sub(one, add(yy, zz)), sx), mul(sub(xy, wz), sy), mul(add(xz, wy), sz), tx),
            (mul(add(xy, wz), sx), mul(sub(one, add(xx, zz)), sy), mul(sub(yz, wx), sz), ty),
            (mul(sub(xz, wy), sx), mul(add(yz, wx), sy), mul(sub(one, add(xx, yy)), sz), tz),
        )
        for r, (e0, e1, e2, e3) in enumerate(rows):
            a, c = _shuffle(b, e0, e1, _LO), _shuffle(b, e2, e3, _LO)  # even nodes
            o, d = _shuffle(b, e0, e1, _HI), _shuffle(b, e2, e3, _HI)  # odd nodes
            for k in range(8):
                j = (k // 2) * 2
                row = _shuffle(b, *((a, c) if k % 2 == 0 else (o, d)), [j, j + 1, 8 + j, 9 + j])
                at = b.mul(b.add(b.mul(b.add(n0, ir.Constant(i64, k)), w_rows), ir.Constant(i64, r)), ir.Constant(i64, 4))
                b.store(row, b.bitcast(b.gep(w.data, [at]), v4.as_pointer()), align=8)
        return context.get_dummy_value()

    return types.void(world, pose, first), codegen


def local_rows_all(pose, world):  # pragma: no cover - typed by the overload below
    """:func:`local_into` for every node of ``pose`` (N, 10) into ``world`` (N, 3|4, 4): eight nodes a
    vector for float64 (:func:`_local_rows8_f64`), the rest one at a time. The same values."""
    raise NotImplementedError


@overload(local_rows_all, jit_options={"forceinline": True})
def _ol_local_rows_all(pose, world):
    if _affine_f64(world) and isinstance(pose, types.Array) and pose.dtype == types.float64 and pose.layout == "C":
        def eight(pose, world):
            n = pose.shape[0]
            full = n - n % 8
            for i in range(0, full, 8):
                _local_rows8_f64(world, pose, i)
            for i in range(full, n):
                local_into(i, pose, world)

        return eight

    def one(pose, world):
        for i in range(pose.shape[0]):
            local_into(i, pose, world)

    return one


def world_subset_staged(parents, nodes, pose, world):  # pragma: no cover - typed by the overload below
    """:func:`world_subset_one` in two passes for float64 worlds: every listed node's local matrix
    into its own world rows (every node in index order when ``nodes`` lists them all), then each
    times its parent's world in place, so the products no longer wait on the quaternion arithmetic.
    ``nodes`` parent-first (each after its parent); listed by depth (:func:`depth_order`),
    neighbours rarely depend on each other and their products overlap. The same values as
    :func:`world_subset_one`, which other dtypes run. Measured on Soldier.glb (68 nodes, 49 palette
    joints; 1 thread, thread CPU, load 1.6-2, A/B in one process): the update kernel's world and
    palette stage 0.81-0.86 -> 0.69-0.71 us. The locals in a separate scratch measured the same; the
    first pass in depth order, 0.1 us slower.

    >>> world_subset_staged(parents, depth_order(parents, nodes), pose, world)   # doctest: +SKIP
    """
    raise NotImplementedError


@overload(world_subset_staged, jit_options={"forceinline": True})
def _ol_world_subset_staged(parents, nodes, pose, world):
    if _affine_f64(world):
        def staged(parents, nodes, pose, world):
            if nodes.shape[0] == pose.shape[0]:
                local_rows_all(pose, world)
            else:
                for i in nodes:
                    local_into(i, pose, world)
            for i in nodes:
                p = parents[i]
                if p >= 0:
                    _times_matrix_f64(world, i, world, p, world, i)  # all of a row's loads before its stores
                else:
                    _set_affine_bottom_row(world[i])

        return staged

    def plain(parents, nodes, pose, world):
        world_subset_one(parents, nodes, pose, world)

    return plain


@njit(cache=True, forceinline=True)
def world_rows_most(parents, nodes, pose, world):
    """World rows of ``nodes`` (parent-first, each after its parent; float64 (N, 4, 4) ``world``, ``pose``
    (N, 10) C-contiguous) for a subset that is most of the rig: every node's local matrix first, eight at
    a time (:func:`local_rows_all`), then each listed node's product with its parent's world, as
    :func:`world_subset_staged` does for every node (the same values). The rows of the nodes not listed
    are left holding their local matrices.

    >>> world_rows_most(parents, depth_order(parents, body), pose, world)     # doctest: +SKIP
    """
    local_rows_all(pose, world)
    world_products(parents, nodes, 0, nodes.shape[0], world)


@njit(cache=True, forceinline=True)
def world_products(parents, nodes, start, stop, world):
    """World rows of ``nodes[start:stop]`` (each listed after its parent) whose rows of ``world``
    hold their local matrices: each times its parent's world row, in place (a root gets its affine
    bottom row)."""
    for k in range(start, stop):
        i = nodes[k]
        p = parents[i]
        if p >= 0:
            _times_matrix_f64(world, i, world, p, world, i)
        else:
            _set_affine_bottom_row(world[i])


@njit(cache=True, forceinline=True)
def palettes_one(world, joints, inverse_bind, out):
    """out[j] = world[joints[j]] @ inverse_bind[j] for one pose; out (J, 3|4, 4). The arithmetic of
    :func:`affine_product_into`, indexing the arrays directly: three row views per joint (each a
    reference count taken and dropped) cost a single character's update about 0.3 us."""
    for j in range(joints.shape[0]):
        _joint_times_bind(out, j, world, joints[j], inverse_bind)  # a 4x4's bottom row included


@njit(cache=True, parallel=True)
def _local_to_world_batch(parents, poses, worlds):
    for b in prange(poses.shape[0]):
        local_to_world_one(parents, poses[b], worlds[b])


@njit(cache=True, parallel=True)
def palette_batch(worlds, joints, inverse_bind, out):
    """out[b, j] = worlds[b, joints[j]] @ inverse_bind[j] (affine)."""
    for b in prange(worlds.shape[0]):
        palettes_one(worlds[b], joints, inverse_bind, out[b])


@njit(cache=True, parallel=True)
def world_palettes_34(parents, nodes, poses, joints, inverse_bind, palettes, worlds, scratch):
    """Per instance, in one pass that stays in cache: world 3x4 of ``nodes`` (see
    :func:`world_subset_one`; into ``worlds[b]``, or a per-thread scratch when ``worlds`` is empty),
    then ``palettes[b, j] = world[joints[j]] @ inverse_bind[j]`` (3x4 rows, affine). Arithmetic in
    the output dtype."""
    keep_world = worlds.shape[0] > 0
    for b in prange(poses.shape[0]):
        w = worlds[b] if keep_world else scratch[numba.get_thread_id()]
        world_subset_one(parents, nodes, poses[b], w)
        palettes_one(w, joints, inverse_bind, palettes[b])


def _batch_kernel(kernel, batch: int):
    """``kernel`` for a batch of many, its serial twin for one (no thread pool, no parfor compile)."""
    return kernel if batch > 1 else serial_variant(kernel)


def depth_order(parents: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """``nodes`` (parent-first, e.g. ascending) sorted by depth in the hierarchy, stably: still
    parent-first, with siblings and cousins next to each other instead of each node after its parent
    (see :func:`world_subset_staged`). int64.

    >>> depth_order(np.array([-1, 0, 1, 0]), np.arange(4)).tolist()
    [0, 1, 3, 2]
    """
    parents = np.asarray(parents)
    depth = np.zeros(len(parents), dtype=np.int64)
    for i in range(len(parents)):  # parent-first: a parent's depth is known before its children's
        depth[i] = 0 if parents[i] < 0 else depth[parents[i]] + 1
    nodes = np.asarray(nodes, dtype=np.int64)
    return nodes[np.argsort(depth[nodes], kind="stable")]


def ancestors_and_self(parents: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """Ascending indices of ``nodes`` and all their ancestors (parent-first ``parents``)."""
    keep = np.zeros(len(parents), dtype=bool)
    for node in np.asarray(nodes, dtype=np.int64):
        while node >= 0 and not keep[node]:
            keep[node] = True
            node = parents[node]
    return np.flatnonzero(keep).astype(np.int64)


def world_matrices(parents: np.ndarray, pose: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """World matrices from local pose rows. ``pose`` (..., N, 10) -> (..., N, 4, 4), same dtype.

    ``parents`` must be parent-first (``parents[i] < i``); see :class:`skeletal.rig.Rig`.
    """
    pose = np.asarray(pose)
    if pose.dtype not in (np.float32, np.float64):
        pose = pose.astype(np.float64)
    batch = pose.shape[:-2]
    flat = np.ascontiguousarray(pose.reshape((int(np.prod(batch, dtype=np.int64)),) + pose.shape[-2:]))
    if out is None:
        out = np.empty(flat.shape[:2] + (4, 4), dtype=pose.dtype)
    worlds = out.reshape(flat.shape[:2] + (4, 4))
    _batch_kernel(_local_to_world_batch, flat.shape[0])(np.asarray(parents, dtype=np.int32), flat, worlds)
    return worlds.reshape(batch + (pose.shape[-2], 4, 4))


def skin_palette(world: np.ndarray, joints: np.ndarray, inverse_bind: np.ndarray,
                 out: np.ndarray | None = None) -> np.ndarray:
    """Skin palettes ``world[..., joints] @ inverse_bind``: world (..., N, 4, 4) -> (..., J, 4, 4).

    ``joints`` (J,) are rig indices; ``inverse_bind`` (J, 4, 4) row-major and affine (bottom row 0 0 0 1).
    ``out``: an array of the result's shape to write into (filled in place, no temporary, when it is
    C-contiguous in ``world``'s dtype); returned.
    """
    world = np.asarray(world)
    batch = world.shape[:-3]
    shape = batch + (len(joints), 4, 4)
    flat = np.ascontiguousarray(world.reshape((-1,) + world.shape[-3:]))
    joints = np.asarray(joints, dtype=np.int64)
    inverse_bind = np.ascontiguousarray(inverse_bind, dtype=world.dtype)
    if out is not None and out.shape == shape and out.dtype == world.dtype and out.flags.c_contiguous:
        _batch_kernel(palette_batch, flat.shape[0])(flat, joints, inverse_bind,
                                                     out.reshape((flat.shape[0], len(joints), 4, 4)))
        return out
    result = np.empty((flat.shape[0], len(joints), 4, 4), dtype=world.dtype)
    _batch_kernel(palette_batch, flat.shape[0])(flat, joints, inverse_bind, result)
    if out is not None:
        out[...] = result.reshape(shape)
        return out
    return result.reshape(shape)
