"""Raw OpenGL entry points that moderngl does not wrap, called through ctypes.

moderngl (5.x) has no buffer textures (``GL_TEXTURE_BUFFER``) and cannot set a ``samplerBuffer``
uniform. Both need only a handful of GL calls on the context moderngl already made current, so they
are loaded here with ``eglGetProcAddress`` (EGL contexts) or ``glXGetProcAddressARB`` (GLX).
Everything here is optional: :func:`load` returns None when the functions cannot be found, and the
palette code then falls back to a 2D texture.
"""

from __future__ import annotations

import ctypes
import ctypes.util

GL_TEXTURE0 = 0x84C0
GL_TEXTURE_BUFFER = 0x8C2A
GL_RGBA32F = 0x8814

_UINT = ctypes.c_uint
_INT = ctypes.c_int


class RawGL:
    """The handful of GL functions used for buffer textures. ``proc(name)`` -> address or 0."""

    def __init__(self, proc):
        def fn(name, *argtypes):
            address = proc(name)
            if not address:
                raise OSError(f"{name} not found")
            return ctypes.CFUNCTYPE(None, *argtypes)(address)

        self._gen_textures = fn("glGenTextures", _INT, ctypes.POINTER(_UINT))
        self._delete_textures = fn("glDeleteTextures", _INT, ctypes.POINTER(_UINT))
        self._bind_texture = fn("glBindTexture", _UINT, _UINT)
        self._active_texture = fn("glActiveTexture", _UINT)
        self._tex_buffer = fn("glTexBuffer", _UINT, _UINT, _UINT)
        self._use_program = fn("glUseProgram", _UINT)
        self._uniform_1i = fn("glUniform1i", _INT, _INT)

    def create_buffer_texture(self, buffer_glo: int, unit: int) -> int:
        """A GL_TEXTURE_BUFFER texture viewing ``buffer_glo`` as RGBA32F texels, left bound on ``unit``."""
        name = _UINT(0)
        self._gen_textures(1, ctypes.byref(name))
        self.bind_buffer_texture(name.value, unit)
        self._tex_buffer(GL_TEXTURE_BUFFER, GL_RGBA32F, buffer_glo)
        return name.value

    def bind_buffer_texture(self, texture: int, unit: int) -> None:
        self._active_texture(GL_TEXTURE0 + unit)
        self._bind_texture(GL_TEXTURE_BUFFER, texture)

    def delete_texture(self, texture: int) -> None:
        name = _UINT(texture)
        self._delete_textures(1, ctypes.byref(name))

    def set_sampler_unit(self, program_glo: int, location: int, unit: int) -> None:
        """Point a sampler uniform at a texture unit (moderngl ignores writes to samplerBuffer uniforms)."""
        self._use_program(program_glo)
        self._uniform_1i(location, unit)
        self._use_program(0)


def _proc_loader(backend: str):
    """A function name -> address for the library behind ``backend`` ("egl" or anything else: GLX)."""
    if backend == "egl":
        lib = ctypes.CDLL(ctypes.util.find_library("EGL") or "libEGL.so.1")
        get = lib.eglGetProcAddress
    else:
        lib = ctypes.CDLL(ctypes.util.find_library("GL") or "libGL.so.1")
        get = lib.glXGetProcAddressARB
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.c_char_p]
    return lambda name: get(name.encode("ascii"))


def gl_function(ctx, name: str, *argtypes, restype=None):
    """One GL entry point of ``ctx``'s library by name, as a ctypes function (OSError if missing).
    For callers that need a core function moderngl does not expose (the editor's scissored blits)."""
    address = _proc_loader((ctx.extra if isinstance(ctx.extra, dict) else {}).get("backend", "egl"))(name)
    if not address:
        raise OSError(f"{name} not found")
    return ctypes.CFUNCTYPE(restype, *argtypes)(address)


def load(ctx) -> RawGL | None:
    """The raw GL functions for ``ctx`` (cached on it), or None when they cannot be loaded."""
    extra = ctx.extra if isinstance(ctx.extra, dict) else {}
    if "rawgl" not in extra:
        try:
            extra["rawgl"] = RawGL(_proc_loader(extra.get("backend", "egl")))
        except (OSError, AttributeError):
            extra["rawgl"] = None
        ctx.extra = extra
    return extra["rawgl"]
