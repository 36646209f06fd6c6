"""A headless OpenGL context for rendering (no window, no display server).

EGL is tried first (Mesa's llvmpipe gives OpenGL 4.5 on any Linux machine with ``libegl1
libegl-mesa0 libgl1-mesa-dri``); then moderngl's default standalone backend (GLX and friends). When
neither works the error says what to install, in one line.

>>> ctx = shared_context()                 # doctest: +SKIP
>>> describe(ctx)                          # doctest: +SKIP
'llvmpipe (LLVM 15.0.6, 256 bits), OpenGL 4.5 (Core Profile) Mesa 22.3.6, egl'
"""

from __future__ import annotations

from .errors import INSTALL_HINT, RenderError

#: OpenGL version the shaders need (3.3 core; the SSBO palette path and GPU posing need 4.3).
REQUIRED_GL = 330
#: The versions a new context asks for, best first. Some drivers give exactly the version asked for:
#: NVIDIA's EGL, asked for 3.3, makes a 3.3 context on a GPU that has 4.6, which turns off the SSBO
#: palettes and GPU posing. So 4.3 is asked for first and 3.3 only where 4.3 is refused (macOS: 4.1).
PREFERRED_GL = (430, REQUIRED_GL)

_shared = None


def _import_moderngl():
    try:
        import moderngl
    except ImportError as exc:  # not installed, or its compiled part does not load
        raise RenderError(f"cannot import moderngl ({exc}): {INSTALL_HINT}") from None
    return moderngl


def create_context(backend: str | None = None):
    """A new standalone moderngl context. ``backend`` "egl", "default" or None (EGL, then default).

    ``ctx.extra`` is set to ``{"backend": name}`` so that other modules can load raw GL functions
    from the same library (see :mod:`.rawgl`).
    """
    moderngl = _import_moderngl()
    attempts = [backend] if backend else ["egl", "default"]
    failures = []
    for name in attempts:
        options = {"backend": "egl"} if name == "egl" else {}
        for version in PREFERRED_GL:
            try:
                ctx = moderngl.create_context(standalone=True, require=version, **options)
            except Exception as exc:  # moderngl/glcontext raise plain Exceptions with driver text
                if version == REQUIRED_GL:  # the last try of this backend: its reason goes in the error
                    text = " ".join(str(exc).split()) or type(exc).__name__
                    failures.append(f"{name}: {text}")
                continue
            ctx.extra = {"backend": name}
            return ctx
    raise RenderError(f"cannot create a headless OpenGL {REQUIRED_GL // 100}.{REQUIRED_GL % 100 // 10} context "
                      f"({'; '.join(failures)}): {INSTALL_HINT}")


def adopt_context(ctx=None, backend: str | None = None):
    """Render with an OpenGL context made elsewhere -- a window's, say.

    ``ctx``: a moderngl context, or None to wrap the context current on this thread
    (``moderngl.create_context()``: make the window's context current first). ``backend``: the
    library that made it, "egl" or "glx" (any other name: GLX), from which :mod:`.rawgl` loads the
    GL functions moderngl lacks; None keeps what the context says, else EGL. It must be OpenGL
    3.3 or later. Returns the context, ``ctx.extra["backend"]`` set (other ``extra`` keys are
    kept; cached raw GL functions of another backend are dropped).
    """
    moderngl = _import_moderngl()
    if ctx is None:
        try:
            ctx = moderngl.create_context(require=REQUIRED_GL)
        except Exception as exc:  # moderngl raises plain Exceptions with the driver's text
            raise RenderError(f"cannot use the current OpenGL context ({' '.join(str(exc).split())})") from None
    elif ctx.version_code < REQUIRED_GL:
        raise RenderError(f"the OpenGL context is version {ctx.version_code / 100:.1f}; "
                          f"the renderer needs {REQUIRED_GL / 100:.1f}")
    extra = dict(ctx.extra) if isinstance(ctx.extra, dict) else {}
    backend = backend or extra.get("backend") or "egl"
    if extra.get("backend") != backend:
        extra.pop("rawgl", None)  # loaded from the other library
    extra["backend"] = backend
    ctx.extra = extra
    return ctx


def shared_context():
    """One context per process, created on first use (contexts are slow to make; resources are not
    shared between renderers, only the context)."""
    global _shared
    if _shared is None:
        _shared = create_context()
    return _shared


def describe(ctx) -> str:
    """``"<GL_RENDERER>, OpenGL <GL_VERSION>, <backend>"``: what to print in verbose output and bug reports."""
    info = ctx.info
    backend = (ctx.extra or {}).get("backend", "?") if isinstance(ctx.extra, dict) else "?"
    return f"{info.get('GL_RENDERER', '?')}, OpenGL {info.get('GL_VERSION', '?')}, {backend}"


def limit(ctx, name: str, default: int = 0) -> int:
    """An integer GL limit from ``ctx.info`` (``"GL_MAX_UNIFORM_BLOCK_SIZE"``...), ``default`` if unknown."""
    value = ctx.info.get(name, default)
    try:
        return int(value)
    except (TypeError, ValueError):
        return default
