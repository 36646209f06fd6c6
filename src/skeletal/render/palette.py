"""Skin palette upload: four ways to get (N_instances, J, 3, 4) float32 matrices to the vertex shader.

The palette of one frame is ONE float32 array of shape (I, J, 3, 4): for each of I instances, J
matrices, each the **top three rows** of a row-major affine 4x4 (``world[joint] @ inverse_bind``; the
bottom row is always 0 0 0 1 and is not sent). In memory that is I*J*3 consecutive vec4 "rows", and
every path below exposes it to GLSL as ``vec4 palette_row(int i)``; matrix m of instance k starts at
row ``(k * J + m) * 3``. One frame = one GL write of that array.

=========  ===================================================  =====================================
mode       how                                                  limit (llvmpipe numbers)
=========  ===================================================  =====================================
uniform    ``uniform vec4 u_palette[ROWS]`` (glUniform4fv)       GL_MAX_VERTEX_UNIFORM_COMPONENTS / 12
                                                                minus a reserve (16384 -> 1322)
ubo        std140 uniform block ``vec4 rows[ROWS]``             GL_MAX_UNIFORM_BLOCK_SIZE / 48
                                                                (65536 -> 1365)
ssbo       std430 shader storage buffer ``vec4 rows[]``         GL 4.3; GL_MAX_SHADER_STORAGE_BLOCK_SIZE
                                                                / 48 (128 MiB -> 2.8 M)
texture    a real buffer texture (samplerBuffer, RGBA32F,       GL_MAX_TEXTURE_BUFFER_SIZE / 3 texels
           texelFetch) made through :mod:`.rawgl`; if that      (128 M texels -> 44 M); 2D: width x
           fails, a 2D RGBA32F texture read with texelFetch     height of GL_MAX_TEXTURE_SIZE
=========  ===================================================  =====================================

:func:`best_available` picks ssbo > texture > ubo > uniform, the first whose limit fits, and says why.

Dual quaternion skinning (``Renderer(skinning="dqs")``) sends (I, J, 4, 4) instead: four rows per
joint (``rows_per_matrix=4``; :func:`skeletal.skin_dq.gpu_dq_palette`), through the same four paths;
every limit above is then divided by 4 rows instead of 3.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .context import limit
from .errors import RenderError

MODES = ("uniform", "ubo", "ssbo", "texture")
PREFERENCE = ("ssbo", "texture", "ubo", "uniform")
ROWS_PER_MATRIX = 3  # vec4 rows per palette matrix (3x4, row-major)
BYTES_PER_MATRIX = ROWS_PER_MATRIX * 16
#: uniform components kept free for the other uniforms of the mesh program (matrices, light, material)
UNIFORM_RESERVE = 512
#: texture unit the palette texture is bound to (unit 0 is the base colour texture)
PALETTE_TEXTURE_UNIT = 1
#: width in texels of the 2D fallback texture (rows wrap; any width works with texelFetch)
TEX2D_WIDTH = 4096


# -- limits ------------------------------------------------------------------------------------


def mode_capacity(ctx, mode: str, rows_per_matrix: int = ROWS_PER_MATRIX) -> tuple[int, str]:
    """The most palette matrices ``mode`` can hold on ``ctx`` (0 if unsupported) and the limit behind it
    (``rows_per_matrix`` vec4 rows each: 3 for LBS matrices, 4 for DQS joints)."""
    if mode == "uniform":
        components = limit(ctx, "GL_MAX_VERTEX_UNIFORM_COMPONENTS", 1024)
        n = max(0, (components - UNIFORM_RESERVE) // (rows_per_matrix * 4))
        return n, f"GL_MAX_VERTEX_UNIFORM_COMPONENTS={components} (less {UNIFORM_RESERVE} reserved)"
    if mode == "ubo":
        size = limit(ctx, "GL_MAX_UNIFORM_BLOCK_SIZE", 16384)
        return size // (rows_per_matrix * 16), f"GL_MAX_UNIFORM_BLOCK_SIZE={size} bytes"
    if mode == "ssbo":
        if ctx.version_code < 430:
            return 0, f"needs OpenGL 4.3, the context has {ctx.version_code // 100}.{ctx.version_code % 100 // 10}"
        if limit(ctx, "GL_MAX_VERTEX_SHADER_STORAGE_BLOCKS", 1) < 1:
            return 0, "GL_MAX_VERTEX_SHADER_STORAGE_BLOCKS=0 (no storage buffers in vertex shaders)"
        size = limit(ctx, "GL_MAX_SHADER_STORAGE_BLOCK_SIZE", 1 << 24)
        return size // (rows_per_matrix * 16), f"GL_MAX_SHADER_STORAGE_BLOCK_SIZE={size} bytes"
    if mode == "texture":
        if buffer_texture_works(ctx):
            texels = limit(ctx, "GL_MAX_TEXTURE_BUFFER_SIZE", 65536)
            return texels // rows_per_matrix, f"buffer texture, GL_MAX_TEXTURE_BUFFER_SIZE={texels} texels"
        side = limit(ctx, "GL_MAX_TEXTURE_SIZE", 4096)
        width = min(TEX2D_WIDTH, side)
        return width * side // rows_per_matrix, f"2D texture fallback, GL_MAX_TEXTURE_SIZE={side}"
    raise RenderError(f"palette mode {mode!r} is not one of {', '.join(MODES)}")


@dataclass
class PaletteChoice:
    """The chosen upload path, how many matrices it can hold, and one line per mode considered."""

    mode: str
    capacity: int
    reasons: list[str] = field(default_factory=list)

    def explain(self) -> str:
        return f"palette mode {self.mode}: " + "; ".join(self.reasons)


def best_available(ctx, n_matrices: int, rows_per_matrix: int = ROWS_PER_MATRIX) -> PaletteChoice:
    """The best mode for ``n_matrices`` palette matrices per frame (all instances together):
    ssbo > texture > ubo > uniform, skipping any whose limit is too small."""
    reasons = []
    for mode in PREFERENCE:
        cap, why = mode_capacity(ctx, mode, rows_per_matrix)
        if cap >= n_matrices:
            reasons.append(f"{mode} holds {cap} matrices >= {n_matrices} needed ({why})")
            return PaletteChoice(mode, cap, reasons)
        reasons.append(f"{mode} skipped: holds {cap} < {n_matrices} ({why})")
    raise RenderError(f"no palette upload path holds {n_matrices} matrices: " + "; ".join(reasons))


def check_mode(ctx, mode: str, n_matrices: int, rows_per_matrix: int = ROWS_PER_MATRIX) -> PaletteChoice:
    """``mode`` if it can hold ``n_matrices``, else a RenderError naming the limit."""
    cap, why = mode_capacity(ctx, mode, rows_per_matrix)
    if cap < n_matrices:
        raise RenderError(f"palette mode {mode} holds at most {cap} matrices ({why}), this frame needs {n_matrices}")
    return PaletteChoice(mode, cap, [f"{mode} requested, holds {cap} matrices ({why})"])


# -- stores ------------------------------------------------------------------------------------


def _round_capacity(n_matrices: int, cap: int) -> int:
    """Room for n matrices, rounded up to a power of two (fewer recompiles as crowds grow), within cap."""
    want = 64
    while want < n_matrices:
        want *= 2
    return max(1, min(want, cap))


class PaletteStore:
    """GPU storage for one frame's palette. Subclasses differ only in where the rows live.

    ``defines`` are the GLSL ``#define``s the skinning include needs; ``write`` uploads a palette
    (I, J, R, 4) float32 with one GL call (R = ``rows_per_matrix``: 3, or 4 for DQS); ``bind(program)`` makes it visible to a program before a
    draw (cheap; does the upload itself only for the uniform path, whose storage is per program).
    """

    mode = ""
    variant = ""

    def __init__(self, ctx, capacity: int, rows_per_matrix: int = ROWS_PER_MATRIX):
        self.ctx = ctx
        self.capacity = int(capacity)  # matrices
        self.rows_per_matrix = int(rows_per_matrix)

    @property
    def rows(self) -> int:
        return self.capacity * self.rows_per_matrix

    @property
    def defines(self) -> dict[str, int | str]:
        raise NotImplementedError

    def _check(self, palette: np.ndarray) -> np.ndarray:
        palette = np.ascontiguousarray(palette, dtype=np.float32)
        if palette.ndim != 4 or palette.shape[2:] != (self.rows_per_matrix, 4):
            raise RenderError(f"palette must have shape (instances, joints, {self.rows_per_matrix}, 4), got {palette.shape}")
        n = palette.shape[0] * palette.shape[1]
        if n > self.capacity:
            raise RenderError(f"palette of {n} matrices does not fit the {self.mode} store of {self.capacity}")
        return palette

    def write(self, palette: np.ndarray) -> None:
        raise NotImplementedError

    def bind(self, program) -> None:
        raise NotImplementedError

    def describe(self) -> str:
        return f"{self.variant or self.mode} ({self.capacity} matrices)"

    def release(self) -> None:
        pass


class UniformArrayStore(PaletteStore):
    """``uniform vec4 u_palette[ROWS]``. Uniform storage belongs to a program, so ``write`` keeps the
    palette in a staging array and ``bind`` sends it (one glUniform4fv) to each program once per write."""

    mode = variant = "uniform"

    def __init__(self, ctx, capacity, rows_per_matrix=ROWS_PER_MATRIX):
        super().__init__(ctx, capacity, rows_per_matrix)
        self._staging = np.zeros((self.rows, 4), np.float32)
        self._generation = 0
        self._sent: dict[int, int] = {}  # program glo -> generation it holds

    @property
    def defines(self):
        return {"PALETTE_UNIFORM": 1, "PALETTE_ROWS": self.rows}

    def write(self, palette):
        palette = self._check(palette)
        flat = palette.reshape(-1, 4)
        self._staging[: len(flat)] = flat
        self._generation += 1

    def bind(self, program):
        if self._sent.get(program.glo) != self._generation:
            program["u_palette"].write(self._staging)  # the whole array: moderngl wants its exact size
            self._sent[program.glo] = self._generation


class UniformBufferStore(PaletteStore):
    """std140 ``uniform Palette { vec4 rows[ROWS]; }``: vec4 arrays have a 16-byte stride in std140,
    so the tightly packed rows are the block layout as they are."""

    mode = variant = "ubo"
    BINDING = 0

    def __init__(self, ctx, capacity, rows_per_matrix=ROWS_PER_MATRIX):
        super().__init__(ctx, capacity, rows_per_matrix)
        self.buffer = ctx.buffer(reserve=self.rows * 16, dynamic=True)

    @property
    def defines(self):
        return {"PALETTE_UBO": 1, "PALETTE_ROWS": self.rows}

    def write(self, palette):
        self.buffer.write(self._check(palette))

    def bind(self, program):
        program["Palette"].binding = self.BINDING
        self.buffer.bind_to_uniform_block(self.BINDING)

    def release(self):
        self.buffer.release()


class StorageBufferStore(PaletteStore):
    """std430 ``readonly buffer Palette { vec4 rows[]; }`` at binding 0 (GLSL 4.30)."""

    mode = variant = "ssbo"
    BINDING = 0

    def __init__(self, ctx, capacity, rows_per_matrix=ROWS_PER_MATRIX):
        super().__init__(ctx, capacity, rows_per_matrix)
        self.buffer = ctx.buffer(reserve=self.rows * 16, dynamic=True)

    @property
    def defines(self):
        return {"PALETTE_SSBO": 1}

    def write(self, palette):
        self.buffer.write(self._check(palette))

    def bind(self, program):
        self.buffer.bind_to_storage_buffer(self.BINDING)

    def release(self):
        self.buffer.release()


class BufferTextureStore(PaletteStore):
    """A GL buffer holding the rows, viewed as an RGBA32F buffer texture (``samplerBuffer``): one
    texel per row, ``texelFetch(u_palette_tex, i)``. The texture object is made through :mod:`.rawgl`."""

    mode = "texture"
    variant = "texture (buffer texture)"

    def __init__(self, ctx, capacity, rows_per_matrix=ROWS_PER_MATRIX):
        from . import rawgl

        super().__init__(ctx, capacity, rows_per_matrix)
        self.gl = rawgl.load(ctx)
        self.buffer = ctx.buffer(reserve=self.rows * 16, dynamic=True)
        self.texture = self.gl.create_buffer_texture(self.buffer.glo, PALETTE_TEXTURE_UNIT)
        self._units_set: set[int] = set()

    @property
    def defines(self):
        return {"PALETTE_TEXTURE_BUFFER": 1}

    def write(self, palette):
        self.buffer.write(self._check(palette))

    def bind(self, program):
        if program.glo not in self._units_set:
            self.gl.set_sampler_unit(program.glo, program["u_palette_tex"].location, PALETTE_TEXTURE_UNIT)
            self._units_set.add(program.glo)
        self.gl.bind_buffer_texture(self.texture, PALETTE_TEXTURE_UNIT)

    def release(self):
        self.gl.delete_texture(self.texture)
        self.buffer.release()


class Texture2DStore(PaletteStore):
    """The portable fallback: a 2D RGBA32F texture TEX2D_WIDTH texels wide, row i at texel
    ``(i % W, i / W)``, read with ``texelFetch`` (no filtering, no normalised coordinates)."""

    mode = "texture"
    variant = "texture (2D RGBA32F fallback)"

    def __init__(self, ctx, capacity, rows_per_matrix=ROWS_PER_MATRIX):
        import moderngl

        super().__init__(ctx, capacity, rows_per_matrix)
        self.width = min(TEX2D_WIDTH, limit(ctx, "GL_MAX_TEXTURE_SIZE", 4096), self.rows)
        self.height = -(-self.rows // self.width)
        self.texture = ctx.texture((self.width, self.height), 4, dtype="f4")
        self.texture.filter = (moderngl.NEAREST, moderngl.NEAREST)
        self._staging = np.zeros((self.height * self.width, 4), np.float32)

    @property
    def defines(self):
        return {"PALETTE_TEXTURE_2D": 1, "PALETTE_TEXTURE_WIDTH": self.width}

    def write(self, palette):
        flat = self._check(palette).reshape(-1, 4)
        used_rows = -(-len(flat) // self.width)  # whole texel rows touched
        self._staging[: len(flat)] = flat
        self.texture.write(self._staging[: used_rows * self.width], viewport=(0, 0, self.width, used_rows))

    def bind(self, program):
        program["u_palette_tex"].value = PALETTE_TEXTURE_UNIT
        self.texture.use(location=PALETTE_TEXTURE_UNIT)

    def release(self):
        self.texture.release()


def create_store(ctx, mode: str, n_matrices: int, *, texture_2d: bool = False,
                 rows_per_matrix: int = ROWS_PER_MATRIX) -> PaletteStore:
    """A store of ``mode`` with room for at least ``n_matrices`` (RenderError if over its limit).

    ``texture_2d=True`` forces the 2D-texture variant of the texture path (tests use it);
    ``rows_per_matrix=4`` makes a store for dual quaternion palettes.
    """
    cap, why = mode_capacity(ctx, mode, rows_per_matrix)
    if n_matrices > cap:
        raise RenderError(f"palette mode {mode} holds at most {cap} matrices ({why}), {n_matrices} needed")
    size = _round_capacity(n_matrices, cap)
    if mode == "uniform":
        return UniformArrayStore(ctx, size, rows_per_matrix)
    if mode == "ubo":
        return UniformBufferStore(ctx, size, rows_per_matrix)
    if mode == "ssbo":
        return StorageBufferStore(ctx, size, rows_per_matrix)
    if texture_2d or not buffer_texture_works(ctx):
        return Texture2DStore(ctx, size, rows_per_matrix)
    return BufferTextureStore(ctx, size, rows_per_matrix)


# -- buffer texture self-test ---------------------------------------------------------------------

_PROBE_VS = """#version 330 core
uniform samplerBuffer u_palette_tex;
out vec4 v_value;
void main() { v_value = texelFetch(u_palette_tex, gl_VertexID); }
"""


def buffer_texture_works(ctx) -> bool:
    """Whether raw-GL buffer textures work on ``ctx``: made, bound and read back once by transform
    feedback (cached on the context). A loader that resolves to another context would silently
    read zeros, so this checks values, not just the absence of errors."""
    extra = ctx.extra if isinstance(ctx.extra, dict) else {}
    if "buffer_texture_ok" not in extra:
        extra["buffer_texture_ok"] = _probe_buffer_texture(ctx)
        ctx.extra = extra
    return extra["buffer_texture_ok"]


def _probe_buffer_texture(ctx) -> bool:
    import moderngl

    from . import rawgl

    gl = rawgl.load(ctx)
    if gl is None:
        return False
    expected = np.arange(1, 17, dtype=np.float32)
    objects = []
    texture = None
    try:
        source = ctx.buffer(expected.tobytes())
        out = ctx.buffer(reserve=expected.nbytes)
        program = ctx.program(vertex_shader=_PROBE_VS, varyings=["v_value"])
        vao = ctx.vertex_array(program, [])
        fbo = ctx.simple_framebuffer((1, 1))  # transform feedback needs a complete framebuffer bound
        objects += [source, out, program, vao, fbo]
        texture = gl.create_buffer_texture(source.glo, PALETTE_TEXTURE_UNIT)
        gl.set_sampler_unit(program.glo, program["u_palette_tex"].location, PALETTE_TEXTURE_UNIT)
        fbo.use()
        vao.transform(out, mode=moderngl.POINTS, vertices=4)
        got = np.frombuffer(out.read(), np.float32)
        return bool(np.array_equal(got, expected))
    except Exception:  # any failure means: use the 2D fallback
        return False
    finally:
        if texture is not None:
            gl.delete_texture(texture)
        for obj in reversed(objects):
            obj.release()
