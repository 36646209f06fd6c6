"""Ground surfaces for procedural foot placement: heights and normals at world (x, z).

A ground answers two vectorised queries, any array shape in, same shape out (world units, Y up):

* ``height(x, z)`` -> y
* ``normal(x, z)`` -> (..., 3) unit normals (pointing up, ``n_y > 0``)

Kinds: :class:`FlatGround` (y = height), :class:`SlopeGround` (a plane), :class:`TerrainGround`
(smooth rolling hills: a few sine waves with seeded directions and phases, analytic normals),
:class:`HeightField` (an (nz, nx) array of heights on a regular grid, bilinear heights and the
bilinear surface's normals; numba kernels) and :class:`FunctionGround` (any vectorised callable
``f(x, z) -> y``; normals by central differences). The built-in kinds also describe themselves to
compiled code (:meth:`Ground.kernel_args`, evaluated point by point by :func:`ground_at`), so the
foot placement kernel queries them without leaving numba; a callable ground is queried from Python. :func:`as_ground` turns a spec string
(``"terrain:amplitude=0.2,wavelength=3,seed=1"``, ``"slope:angle=10"``, ``"flat:height=0"``), a
callable, a number or an array into one.

>>> g = as_ground("slope:angle=45,direction=0")    # uphill toward +Z
>>> round(float(g.height(0.0, 1.0)), 12)           # tan(45 degrees) x 1 m
1.0
>>> (g.normal(0.0, 0.0).round(3) + 0.0).tolist()      # (+ 0.0: no negative zero)
[0.0, 0.707, -0.707]
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
from numba import njit

from ..errors import SkeletalError


class Ground:
    """Base class: subclasses implement :meth:`height` and :meth:`normal` (vectorised)."""

    def height(self, x, z) -> np.ndarray:
        raise NotImplementedError

    def normal(self, x, z) -> np.ndarray:
        raise NotImplementedError

    def __call__(self, x, z) -> np.ndarray:
        return self.height(x, z)

    def height_normal(self, x, z) -> tuple[np.ndarray, np.ndarray]:
        """Both queries at once (subclasses share work between them)."""
        return self.height(x, z), self.normal(x, z)

    def kernel_args(self) -> tuple[int, np.ndarray, np.ndarray]:
        """(kind, params (P,) float64, grid (nz, nx) float64) for :func:`ground_at`; kind -1: not
        evaluable in compiled code (query :meth:`height_normal` from Python)."""
        return GROUND_PYTHON, np.zeros(1), np.zeros((1, 1))

    def mesh(self, center=(0.0, 0.0), half_size: float = 5.0, cells: int = 96) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A triangulated patch of this ground for drawing: positions (V, 3) float32, normals (V, 3)
        float32, triangle indices (T*3,) uint32; a square of ``half_size`` around world ``center``
        (x, z) with ``cells`` x ``cells`` quads."""
        cells = int(max(1, min(cells, 1024)))
        u = np.linspace(-half_size, half_size, cells + 1)
        gx, gz = np.meshgrid(center[0] + u, center[1] + u)  # (cells+1, cells+1), rows along z
        gy = self.height(gx, gz)
        positions = np.stack([gx, gy, gz], axis=-1).reshape(-1, 3)
        normals = self.normal(gx, gz).reshape(-1, 3)
        row = cells + 1
        i, j = np.meshgrid(np.arange(cells), np.arange(cells), indexing="ij")
        a = (i * row + j).ravel()
        quads = np.stack([a, a + row, a + 1, a + 1, a + row, a + row + 1], axis=1)
        return positions.astype(np.float32), normals.astype(np.float32), quads.ravel().astype(np.uint32)


def _unit_normal_from_slopes(dx: np.ndarray, dz: np.ndarray) -> np.ndarray:
    """Normal of y = h(x, z) from its partial derivatives: normalize(-dh/dx, 1, -dh/dz)."""
    dx = np.asarray(dx, np.float64)
    dz = np.asarray(dz, np.float64)
    inv = 1.0 / np.sqrt(dx * dx + dz * dz + 1.0)
    return np.stack([-dx * inv, inv, -dz * inv], axis=-1)


class FlatGround(Ground):
    """The plane y = ``height``."""

    def __init__(self, height: float = 0.0):
        self.level = float(height)

    def height(self, x, z) -> np.ndarray:
        return np.full(np.broadcast(np.asarray(x), np.asarray(z)).shape, self.level)

    def normal(self, x, z) -> np.ndarray:
        shape = np.broadcast(np.asarray(x), np.asarray(z)).shape
        out = np.zeros(shape + (3,))
        out[..., 1] = 1.0
        return out

    def kernel_args(self) -> tuple[int, np.ndarray, np.ndarray]:
        return GROUND_PLANE, np.array([self.level, 0.0, 0.0]), np.zeros((1, 1))

    def __repr__(self) -> str:
        return f"FlatGround(height={self.level:g})"


class SlopeGround(Ground):
    """A plane through (0, ``height``, 0) rising by ``angle`` degrees toward ``direction`` (degrees
    from +Z toward +X: 0 = uphill toward +Z, 90 = uphill toward +X)."""

    def __init__(self, angle: float = 10.0, direction: float = 0.0, height: float = 0.0):
        if not -80.0 <= angle <= 80.0:
            raise SkeletalError(f"slope angle {angle} is out of range (-80..80 degrees)")
        self.angle, self.direction, self.level = float(angle), float(direction), float(height)
        g = math.tan(math.radians(self.angle))
        d = math.radians(self.direction)
        self.gx, self.gz = g * math.sin(d), g * math.cos(d)

    def height(self, x, z) -> np.ndarray:
        return self.level + self.gx * np.asarray(x, np.float64) + self.gz * np.asarray(z, np.float64)

    def normal(self, x, z) -> np.ndarray:
        shape = np.broadcast(np.asarray(x), np.asarray(z)).shape
        return _unit_normal_from_slopes(np.full(shape, self.gx), np.full(shape, self.gz))

    def kernel_args(self) -> tuple[int, np.ndarray, np.ndarray]:
        return GROUND_PLANE, np.array([self.level, self.gx, self.gz]), np.zeros((1, 1))

    def __repr__(self) -> str:
        return f"SlopeGround(angle={self.angle:g}, direction={self.direction:g}, height={self.level:g})"


class TerrainGround(Ground):
    """Rolling hills: ``height + amplitude * sum_k a_k sin(k_k . (x, z) + phase_k) / sum_k a_k`` over
    ``octaves`` groups of 3 waves (wavelengths ``wavelength``, /2, /4 ..., amplitudes halving), with
    directions and phases drawn from ``seed``. Smooth, bounded by ``height +- amplitude``, analytic
    normals. Every wave passes through its mean at the origin's neighbourhood only by chance; the
    heights at the origin are not zero in general (use ``height - terrain.height(0, 0)`` to level it)."""

    def __init__(self, amplitude: float = 0.2, wavelength: float = 3.0, seed: int = 0, octaves: int = 2,
                 height: float = 0.0):
        if not (math.isfinite(amplitude) and abs(amplitude) <= 100.0):
            raise SkeletalError(f"terrain amplitude {amplitude} is out of range (|a| <= 100)")
        if not (math.isfinite(wavelength) and wavelength > 1e-3):
            raise SkeletalError(f"terrain wavelength must be positive, got {wavelength}")
        if not 1 <= int(octaves) <= 6:
            raise SkeletalError(f"terrain octaves must be 1..6, got {octaves}")
        self.amplitude, self.wavelength, self.seed = float(amplitude), float(wavelength), int(seed)
        self.octaves, self.level = int(octaves), float(height)
        rng = np.random.default_rng(self.seed)
        waves = []
        for o in range(self.octaves):
            for _ in range(3):
                theta = rng.uniform(0.0, 2.0 * math.pi)
                k = 2.0 * math.pi / (self.wavelength / 2.0**o) * rng.uniform(0.8, 1.25)
                waves.append((k * math.cos(theta), k * math.sin(theta), rng.uniform(0, 2 * math.pi), 0.5**o))
        w = np.array(waves)
        self._kx, self._kz, self._phase = w[:, 0], w[:, 1], w[:, 2]
        self._amp = w[:, 3] * (self.amplitude / w[:, 3].sum())

    def _arg(self, x, z) -> np.ndarray:
        x = np.asarray(x, np.float64)[..., None]
        z = np.asarray(z, np.float64)[..., None]
        return x * self._kx + z * self._kz + self._phase

    def height(self, x, z) -> np.ndarray:
        return self.level + np.sin(self._arg(x, z)) @ self._amp

    def normal(self, x, z) -> np.ndarray:
        c = np.cos(self._arg(x, z)) * self._amp
        return _unit_normal_from_slopes(c @ self._kx, c @ self._kz)

    def height_normal(self, x, z) -> tuple[np.ndarray, np.ndarray]:
        arg = self._arg(x, z)
        c = np.cos(arg) * self._amp
        return self.level + np.sin(arg) @ self._amp, _unit_normal_from_slopes(c @ self._kx, c @ self._kz)

    def kernel_args(self) -> tuple[int, np.ndarray, np.ndarray]:
        params = np.concatenate([[self.level, float(len(self._amp))], self._kx, self._kz, self._phase, self._amp])
        return GROUND_TERRAIN, params, np.zeros((1, 1))

    def __repr__(self) -> str:
        return (f"TerrainGround(amplitude={self.amplitude:g}, wavelength={self.wavelength:g}, seed={self.seed}, "
                f"octaves={self.octaves})")


GROUND_PYTHON, GROUND_PLANE, GROUND_TERRAIN, GROUND_FIELD = -1, 0, 1, 2


@njit(cache=True)
def _field_at(heights, origin_x, origin_z, spacing, x, z):
    """Bilinear height and the bilinear surface's slopes (dh/dx, dh/dz) of the grid ``heights``
    (nz, nx) at world (x, z); outside the grid the edge values (clamped)."""
    nz, nx = heights.shape
    u = min(max((x - origin_x) / spacing, 0.0), nx - 1.0)
    v = min(max((z - origin_z) / spacing, 0.0), nz - 1.0)
    i0 = min(int(u), max(nx - 2, 0))
    j0 = min(int(v), max(nz - 2, 0))
    i1 = min(i0 + 1, nx - 1)
    j1 = min(j0 + 1, nz - 1)
    fu = u - i0
    fv = v - j0
    h00, h10 = heights[j0, i0], heights[j0, i1]
    h01, h11 = heights[j1, i0], heights[j1, i1]
    h = (h00 * (1 - fu) + h10 * fu) * (1 - fv) + (h01 * (1 - fu) + h11 * fu) * fv
    dx = ((h10 - h00) * (1 - fv) + (h11 - h01) * fv) / spacing if i1 > i0 else 0.0
    dz = ((h01 - h00) * (1 - fu) + (h11 - h10) * fu) / spacing if j1 > j0 else 0.0
    return h, dx, dz


# sin and cos of one argument together, branch-free below |a| <= SINCOS_LIMIT so that a loop of them runs
# in SIMD lanes (numba has no vector sin/cos without Intel's SVML): a = q pi/2 + r with |r| <= pi/4
# (pi/2 in three parts whose products with an integer q below 2^20 are exact or nearly so), then the
# Taylor-shaped minimax polynomials of sin r and cos r of fdlibm's kernels (within an ulp or so of
# glibc's sin/cos) and the quadrant's swap and signs; larger arguments go to math.sin / math.cos.
SINCOS_LIMIT = 1e5
_TWO_OVER_PI = 0.63661977236758134308
_PIO2_1, _PIO2_2, _PIO2_3 = 1.57079632673412561417e+00, 6.07710050630396597660e-11, 2.02226624879595063154e-21
_S1, _S2, _S3 = -1.66666666666666324348e-01, 8.33333333332248946124e-03, -1.98412698298579493134e-04
_S4, _S5, _S6 = 2.75573137070700676789e-06, -2.50507602534068634195e-08, 1.58969099521155010221e-10
_C1, _C2, _C3 = 4.16666666666666019037e-02, -1.38888888888741095749e-03, 2.48015872894767294178e-05
_C4, _C5, _C6 = -2.75573143513906633035e-07, 2.08757232129817482790e-09, -1.13596475577881948265e-11


@njit(cache=True, forceinline=True)
def _sincos_reduced(a):
    """(sin a, cos a) for |a| <= SINCOS_LIMIT, without branches (selects only)."""
    q = math.floor(a * _TWO_OVER_PI + 0.5)
    r = ((a - q * _PIO2_1) - q * _PIO2_2) - q * _PIO2_3
    z = r * r
    s = r + r * z * (_S1 + z * (_S2 + z * (_S3 + z * (_S4 + z * (_S5 + z * _S6)))))
    hz = 0.5 * z
    one_minus = 1.0 - hz
    c = one_minus + (((1.0 - one_minus) - hz) + z * z * (_C1 + z * (_C2 + z * (_C3 + z * (_C4 + z * (_C5 + z * _C6))))))
    n = np.int64(q) & 3  # the quadrant: sin, cos = (s, c), (c, -s), (-s, -c), (-c, s)
    swap = (n & 1) == 1
    sin_a = c if swap else s
    cos_a = s if swap else c
    sin_a = -sin_a if n >= 2 else sin_a
    cos_a = -cos_a if (n == 1 or n == 2) else cos_a
    return sin_a, cos_a


@njit(cache=True, forceinline=True)
def sincos(a):
    """(sin a, cos a) of a float, to within about an ulp of ``math.sin`` / ``math.cos`` (exactly them
    past ``SINCOS_LIMIT``, and for NaN / infinity).

    >>> [round(v, 12) for v in sincos(1.0)]
    [0.841470984808, 0.540302305868]
    """
    if abs(a) <= SINCOS_LIMIT:
        return _sincos_reduced(a)
    return math.sin(a), math.cos(a)


@njit(cache=True, forceinline=True)
def sincos_lanes(args, sins, coss, m):
    """``sins[i], coss[i] = sincos(args[i])`` for i < m: the first loop has no branch, so that LLVM runs
    it in SIMD lanes; the rare argument past ``SINCOS_LIMIT`` (or not finite) is redone after it."""
    for i in range(m):
        sins[i], coss[i] = _sincos_reduced(args[i])
    for i in range(m):
        if not abs(args[i]) <= SINCOS_LIMIT:
            sins[i], coss[i] = math.sin(args[i]), math.cos(args[i])


@njit(cache=True, forceinline=True)
def queried_at(queried_b, l, x, z):
    """Whether leg ``l``'s heights and normals already hold the ground's query at world (x, z)
    (``queried_b`` (L, 2): the points last queried, NaN none): the one test the foot placement kernel's
    two passes over a block share, the first packing the other legs' terrain waves into the lanes, the
    second reading them back in the same order."""
    return x == queried_b[l, 0] and z == queried_b[l, 1]


@njit(cache=True, forceinline=True)
def terrain_sum(params, sins, coss, at):
    """A terrain's height and unit normal (h, nx, ny, nz) from the sines and cosines of its W wave
    arguments ``x kx + z kz + phase``, stored at ``sins[at:at + W]`` / ``coss[at:at + W]`` (see
    :func:`ground_at`'s ``params``): waves summed in order."""
    w = int(params[1])
    h = params[0]
    dx = 0.0
    dz = 0.0
    for i in range(w):
        kx, kz, a = params[2 + i], params[2 + w + i], params[2 + 3 * w + i]
        h += a * sins[at + i]
        c = a * coss[at + i]
        dx += c * kx
        dz += c * kz
    inv = 1.0 / math.sqrt(dx * dx + dz * dz + 1.0)
    return h, -dx * inv, inv, -dz * inv


@njit(cache=True)
def ground_at(kind, params, grid, x, z):
    """Height and unit normal (h, nx, ny, nz) of a built-in ground at world (x, z), from its
    :meth:`Ground.kernel_args`: plane ``params = [level, dh/dx, dh/dz]``; terrain ``[level, W,
    kx (W), kz (W), phase (W), amplitude (W)]``; height field ``[origin_x, origin_z, spacing]`` with
    ``grid`` the heights. Matches the vectorised Python queries to rounding (a terrain's sines and
    cosines by :func:`sincos`; :func:`terrain_sum` gives the same bits from them computed in lanes)."""
    if kind == GROUND_PLANE:
        h = params[0] + params[1] * x + params[2] * z
        dx, dz = params[1], params[2]
    elif kind == GROUND_TERRAIN:
        w = int(params[1])
        h = params[0]
        dx = 0.0
        dz = 0.0
        for i in range(w):
            kx, kz, a = params[2 + i], params[2 + w + i], params[2 + 3 * w + i]
            sin_arg, cos_arg = sincos(x * kx + z * kz + params[2 + 2 * w + i])
            h += a * sin_arg
            c = a * cos_arg
            dx += c * kx
            dz += c * kz
    else:
        h, dx, dz = _field_at(grid, params[0], params[1], params[2], x, z)
    inv = 1.0 / math.sqrt(dx * dx + dz * dz + 1.0)
    return h, -dx * inv, inv, -dz * inv


@njit(cache=True)
def _heightfield_query(heights, origin_x, origin_z, spacing, xs, zs, out_h, out_n):
    """Bilinear height and normal of the grid ``heights`` (nz, nx) at each (xs[i], zs[i]); points
    outside the grid take the edge values (clamped). out_h (P,), out_n (P, 3). Serial: a query is a
    few hundred nanoseconds per point, less than a thread pool's launch for the batches it serves."""
    for i in range(xs.shape[0]):
        h, dx, dz = _field_at(heights, origin_x, origin_z, spacing, xs[i], zs[i])
        out_h[i] = h
        inv = 1.0 / math.sqrt(dx * dx + 1.0 + dz * dz)
        out_n[i, 0] = -dx * inv
        out_n[i, 1] = inv
        out_n[i, 2] = -dz * inv


class HeightField(Ground):
    """Heights on a regular grid: ``heights[j, i]`` is the height at world
    (``origin[0] + i * spacing``, ``origin[1] + j * spacing``) (x, z). Bilinear in between, clamped
    outside; normals are those of the bilinear surface."""

    def __init__(self, heights, spacing: float = 1.0, origin=(0.0, 0.0)):
        h = np.asarray(heights, dtype=np.float64)
        if h.ndim != 2 or h.shape[0] < 1 or h.shape[1] < 1:
            raise SkeletalError(f"a height field must be a 2-D (nz, nx) array, got shape {h.shape}")
        if not np.all(np.isfinite(h)):
            raise SkeletalError("height field has non-finite heights")
        if not (math.isfinite(spacing) and spacing > 0):
            raise SkeletalError(f"height field spacing must be positive, got {spacing}")
        self.heights = np.ascontiguousarray(h)
        self.spacing = float(spacing)
        self.origin = (float(origin[0]), float(origin[1]))

    def _query(self, x, z) -> tuple[np.ndarray, np.ndarray]:
        x, z = np.broadcast_arrays(np.asarray(x, np.float64), np.asarray(z, np.float64))
        shape = x.shape
        xs, zs = np.ascontiguousarray(x.ravel()), np.ascontiguousarray(z.ravel())
        h = np.empty(xs.shape[0])
        n = np.empty((xs.shape[0], 3))
        _heightfield_query(self.heights, self.origin[0], self.origin[1], self.spacing, xs, zs, h, n)
        return h.reshape(shape), n.reshape(shape + (3,))

    def height(self, x, z) -> np.ndarray:
        return self._query(x, z)[0]

    def height_normal(self, x, z) -> tuple[np.ndarray, np.ndarray]:
        return self._query(x, z)

    def normal(self, x, z) -> np.ndarray:
        return self._query(x, z)[1]

    @classmethod
    def sample(cls, ground: "Ground | Callable", size: float = 10.0, spacing: float = 0.1, center=(0.0, 0.0)) -> "HeightField":
        """A height field of ``size`` x ``size`` metres around ``center`` sampled from another ground."""
        ground = as_ground(ground)
        n = int(round(size / spacing)) + 1
        if n > 4096:
            raise SkeletalError(f"height field of {n}x{n} samples is too large (at most 4096 per side)")
        origin = (center[0] - size / 2, center[1] - size / 2)
        u = np.arange(n) * spacing
        gx, gz = np.meshgrid(origin[0] + u, origin[1] + u)
        return cls(ground.height(gx, gz), spacing, origin)

    def kernel_args(self) -> tuple[int, np.ndarray, np.ndarray]:
        return GROUND_FIELD, np.array([self.origin[0], self.origin[1], self.spacing]), self.heights

    def __repr__(self) -> str:
        return f"HeightField({self.heights.shape[1]}x{self.heights.shape[0]}, spacing={self.spacing:g}, origin={self.origin})"


class FunctionGround(Ground):
    """Any vectorised ``f(x, z) -> y``; normals by central differences of step ``eps``."""

    def __init__(self, function: Callable, eps: float = 1e-3):
        self.function = function
        self.eps = float(eps)

    def height(self, x, z) -> np.ndarray:
        x, z = np.broadcast_arrays(np.asarray(x, np.float64), np.asarray(z, np.float64))
        y = np.asarray(self.function(x, z), dtype=np.float64)
        if y.shape != x.shape:
            y = np.broadcast_to(y, x.shape).copy()
        return y

    def normal(self, x, z) -> np.ndarray:
        e = self.eps
        dx = (self.height(np.asarray(x) + e, z) - self.height(np.asarray(x) - e, z)) / (2 * e)
        dz = (self.height(x, np.asarray(z) + e) - self.height(x, np.asarray(z) - e)) / (2 * e)
        return _unit_normal_from_slopes(dx, dz)

    def __repr__(self) -> str:
        return f"FunctionGround({getattr(self.function, '__name__', self.function)!r})"


_KINDS = {
    "flat": (FlatGround, {"height": float}),
    "slope": (SlopeGround, {"angle": float, "direction": float, "height": float}),
    "terrain": (TerrainGround, {"amplitude": float, "wavelength": float, "seed": int, "octaves": int,
                                "height": float}),
}


def parse_ground(spec: str) -> Ground:
    """A ground from ``KIND[:key=value,...]``: ``flat[:height=H]``,
    ``slope[:angle=DEG,direction=DEG,height=H]``,
    ``terrain[:amplitude=A,wavelength=L,seed=S,octaves=O,height=H]``."""
    text = spec.strip()
    kind, _, rest = text.partition(":")
    kind = kind.strip().lower()
    if kind not in _KINDS:
        raise SkeletalError(f"ground {spec!r}: unknown kind {kind!r} (use one of {', '.join(_KINDS)})")
    cls, keys = _KINDS[kind]
    options = {}
    for item in filter(None, (part.strip() for part in rest.split(","))):
        key, eq, value = item.partition("=")
        key = key.strip().lower()
        if not eq or key not in keys:
            raise SkeletalError(f"ground {spec!r}: {item!r} is not one of {', '.join(k + '=..' for k in keys)}")
        try:
            options[key] = keys[key](value.strip())
        except ValueError:
            raise SkeletalError(f"ground {spec!r}: {key} must be a number, got {value.strip()!r}") from None
        if not math.isfinite(options[key]):
            raise SkeletalError(f"ground {spec!r}: {key} must be finite")
    return cls(**options)


def as_ground(ground) -> Ground:
    """A :class:`Ground` from a Ground, a spec string (:func:`parse_ground`), a number (flat at that
    height), a 2-D array (:class:`HeightField`, spacing 1, origin 0) or a callable ``f(x, z) -> y``."""
    if isinstance(ground, Ground):
        return ground
    if ground is None:
        return FlatGround(0.0)
    if isinstance(ground, str):
        return parse_ground(ground)
    if isinstance(ground, (int, float, np.floating, np.integer)):
        return FlatGround(float(ground))
    if isinstance(ground, np.ndarray):
        return HeightField(ground)
    if callable(ground):
        return FunctionGround(ground)
    raise SkeletalError(f"cannot use {type(ground).__name__} as a ground (give a spec string, number, array or callable)")
