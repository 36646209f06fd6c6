"""GLSL sources from ``shaders/*.glsl`` (package data) and a per-context cache of compiled programs.

Sources are plain GLSL without a ``#version`` line; :func:`shader_source` prepends ``#version`` (430
when the SSBO palette path is used, else 330 core) and ``#define NAME VALUE`` lines, and expands
``#include "file.glsl"`` (one level deep is all the shaders need, but nesting works).
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources

from .errors import RenderError

_INCLUDE = re.compile(r'^\s*#include\s+"([^"]+)"\s*$', re.MULTILINE)


@lru_cache(maxsize=None)
def _read(name: str) -> str:
    try:
        return resources.files("skeletal.render").joinpath("shaders", name).read_text(encoding="utf-8")
    except (FileNotFoundError, OSError) as exc:
        raise RenderError(f"shader {name} is missing from the installed package ({exc}); "
                          "reinstall skeletal with its package data") from None


def _expand(name: str, depth: int = 0) -> str:
    if depth > 8:
        raise RenderError(f"shader {name}: #include nested too deep")
    return _INCLUDE.sub(lambda m: _expand(m.group(1), depth + 1), _read(name))


def shader_source(name: str, defines: dict[str, int | str] | None = None) -> str:
    """The full source of shader ``name`` (e.g. ``"mesh.vert.glsl"``) with its defines."""
    defines = defines or {}
    version = "#version 430 core" if "PALETTE_SSBO" in defines else "#version 330 core"
    lines = [version] + [f"#define {k} {v}" for k, v in sorted(defines.items())]
    return "\n".join(lines) + "\n#line 1\n" + _expand(name)


def compute_source(name: str, defines: dict[str, int | str] | None = None) -> str:
    """The full source of compute shader ``name`` (GLSL 4.30, with its defines)."""
    lines = ["#version 430 core"] + [f"#define {k} {v}" for k, v in sorted((defines or {}).items())]
    return "\n".join(lines) + "\n#line 1\n" + _expand(name)


class ProgramCache:
    """Compiled programs of one context keyed by (shader names, defines, varyings)."""

    def __init__(self, ctx):
        self.ctx = ctx
        self._programs = {}

    def get(self, vertex: str, fragment: str | None = None, defines=None, varyings: tuple[str, ...] = ()):
        defines = dict(defines or {})
        key = (vertex, fragment, tuple(sorted(defines.items())), tuple(varyings))
        program = self._programs.get(key)
        if program is None:
            try:
                program = self.ctx.program(
                    vertex_shader=shader_source(vertex, defines),
                    fragment_shader=shader_source(fragment, defines) if fragment else None,
                    varyings=list(varyings),
                )
            except Exception as exc:  # moderngl raises its own Error with the driver's log
                log = " | ".join(line.strip() for line in str(exc).splitlines() if line.strip())
                raise RenderError(f"shader {vertex}/{fragment} does not compile: {log[:400]}") from None
            self._programs[key] = program
        return program

    def release(self) -> None:
        for program in self._programs.values():
            program.release()
        self._programs.clear()


def set_uniform(program, name: str, value) -> None:
    """Set a uniform if the program kept it (the GLSL compiler drops unused ones)."""
    member = program.get(name, None)
    if member is not None:
        member.value = value


def write_matrix(program, name: str, matrix) -> None:
    """Write a row-major numpy 4x4 into a GLSL ``mat4`` (column-major): transposed on the way."""
    import numpy as np

    member = program.get(name, None)
    if member is not None:
        member.write(np.ascontiguousarray(np.asarray(matrix, dtype=np.float32).T).tobytes())
