"""The package's imports run one way: parse every module of src/skeletal (imports inside functions
included), and fail on a cycle between modules or on an import from a lower floor to a higher one.

Floors, lowest first (a module may import its own floor and those below; a module not listed takes
the floor of its closest listed parent package). The tree reads bottom-up as the pipeline does:

0. ``errors``, ``document``, ``quat``, ``version``, ``io.formats``, ``summary``, ``_threads``,
   ``_compile``, ``_setup``, ``_lazy``, ``_aliases``, ``shown``: no dependencies.
1. ``io`` (file formats <-> :class:`~skeletal.document.Document`), ``anim`` (the stages: rig, clip,
   sampling, pose, IK, colliders, animated properties) and ``skinning`` (LBS and DQS kernels): side by
   side (``anim.properties`` reads ``io.pointer``'s table of pointer targets, no reader).
2. ``asset``: ``load()`` picks the reader and builds the rig, clips and skins from its Document;
   ``up`` (the up axis found once where a file is loaded).
3. ``tools`` (bake, clip tools, compression, retargeting, export and the writers), ``playback``
   (players, mixers, crowds, procedural stages), ``demo`` (the built-in character), ``torch``.
4. ``batch`` (per-file jobs over many files), ``render``, ``examples``.
5. ``web``, ``editor``, ``bridges``: the page, the application and the adapters over render.
6. ``skeletal`` itself: the public API, gathering the floors below.
7. ``bench``: measurements of the API.
8. ``cli``, ``__main__``: the command line over all of it.

Also: ``import skeletal`` loads neither click nor an optional backend (torch, moderngl, imgui) nor a
bridge's library (trimesh, pygfx, pyglet, panda3d, bpy).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "skeletal"

FLOORS: dict[str, int] = {
    "skeletal.errors": 0, "skeletal.document": 0, "skeletal.quat": 0, "skeletal.version": 0,
    "skeletal.io.formats": 0, "skeletal.summary": 0,
    "skeletal._threads": 0, "skeletal._compile": 0,  # numba set-up, run by skeletal._setup when numba loads
    "skeletal._aliases": 0,  # the old module names (skeletal.skin ...) of modules that moved
    "skeletal.shown": 0,  # names shown as text (control characters escaped)
    "skeletal._lazy": 0,  # lazy package attributes (PEP 562), used by skeletal/__init__ and subpackages
    "skeletal._setup": 0,  # numba set-up (_threads, _compile) run when numba is imported
    "skeletal._simd": 0,  # the vector width of numba's compile target (kernels choose their lanes by it)
    "skeletal.io": 1, "skeletal.anim": 1, "skeletal.skinning": 1,
    "skeletal.asset": 2, "skeletal.up": 2,
    "skeletal.tools": 3, "skeletal.playback": 3, "skeletal.demo": 3, "skeletal.torch": 3,
    "skeletal.batch": 4, "skeletal.render": 4, "skeletal.examples": 4,
    "skeletal.web": 5, "skeletal.editor": 5, "skeletal.bridges": 5,
    "skeletal": 6,
    "skeletal.bench": 7,
    "skeletal.cli": 8, "skeletal.__main__": 8,
}
#: Top-level modules of skeletal not listed above sit on floor 2 (beside asset).
STAGE_FLOOR = 2

#: Imports allowed to go up, each with the reason. Every one is lazy (inside a function), which
#: :func:`test_allowed_upward_imports_are_lazy` checks.
ALLOWED_UPWARD: dict[tuple[str, str], str] = {
    ("skeletal.anim.rig", "skeletal.torch"):
        "Rig.to_torch(): a convenience door to the optional backend, imported only when called",
    ("skeletal.up", "skeletal.tools.retarget"):
        "load(up='auto') finds the up axis with retarget's humanoid analysis (canonical names, rest and "
        "motion up), imported only when a file is to be turned",
    ("skeletal.io.assimp_child", "skeletal.io.assimp"):
        "the isolated child's entry: it runs the reader that called it (the two modules are one reader "
        "split in two: the process boundary, and the conversion)",
}


def module_name(path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts.pop()
    return ".".join(parts), is_package


def import_graph() -> dict[str, set[str]]:
    """module -> the skeletal modules it imports (at any depth of its code)."""
    modules = {module_name(p)[0]: p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        _, is_package = module_name(path)
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names if a.name.split(".")[0] == "skeletal")
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".") if is_package else name.split(".")[:-1]
                    base = base[:len(base) - (node.level - 1)]
                    origin = ".".join(base + ([node.module] if node.module else []))
                else:
                    origin = node.module or ""
                if origin.split(".")[0] != "skeletal":
                    continue
                for alias in node.names:  # `from . import ik` imports the module skeletal.ik
                    sub = f"{origin}.{alias.name}"
                    targets.add(sub if sub in modules else origin)
        graph[name] = {t for t in targets if t != name and t in modules}
    return graph


def floor(module: str) -> int:
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        prefix = ".".join(parts[:n])
        if prefix in FLOORS and (n > 1 or module == "skeletal"):
            return FLOORS[prefix]
    return STAGE_FLOOR


def is_inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_the_graph_sees_the_package():
    graph = import_graph()
    assert {"skeletal", "skeletal.cli", "skeletal.bench", "skeletal.asset", "skeletal.io.gltf"} <= set(graph)
    assert "skeletal.asset" in graph["skeletal"]
    assert "skeletal.anim.ik" in graph["skeletal"]  # `from .anim import ik`
    assert floor("skeletal.cli.edit") == 8 and floor("skeletal.io.gltf") == 1 and floor("skeletal.anim.rig") == 1
    assert floor("skeletal") == 6 and floor("skeletal.playback.kernels") == 3


def test_no_upward_import():
    graph = import_graph()
    bad = []
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            # a package's __init__ importing its own submodules, and a submodule its package, stay inside
            if is_inside(module, target) or is_inside(target, module):
                continue
            if floor(target) > floor(module) and (module, target) not in ALLOWED_UPWARD:
                bad.append(f"{module} (floor {floor(module)}) imports {target} (floor {floor(target)})")
    assert not bad, "upward imports:\n" + "\n".join(bad)


def test_no_import_cycle():
    graph = import_graph()
    # a package importing its submodules from __init__ is not a cycle with them, nor is an allowed lazy
    # upward import (it runs only when called, long after both modules are loaded); other edges count
    edges = {m: {t for t in ts if not is_inside(m, t) and (m, t) not in ALLOWED_UPWARD} for m, ts in graph.items()}
    cycles = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for t in sorted(edges.get(m, ())):
            if state.get(t) == 1:
                cycles.append(" -> ".join(stack[stack.index(t):] + [t]))
            elif t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(edges):
        if m not in state:
            visit(m)
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_import_skeletal_loads_no_command_line_or_backend():
    code = ("import sys, skeletal; heavy = [m for m in ('click', 'torch', 'moderngl', 'imgui_bundle', 'glfw', "
            "'skeletal.cli', 'skeletal.bench', 'skeletal.bridges', 'trimesh', 'pygfx', 'wgpu', 'pyglet', 'panda3d', "
            "'bpy') if m in sys.modules]; print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_allowed_upward_imports_are_lazy():
    for module, target in ALLOWED_UPWARD:
        path = PACKAGE / (module.split(".", 1)[1].replace(".", "/") + ".py")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:  # module level only
            if isinstance(node, ast.ImportFrom):
                assert not (node.level == 1 and node.module == target.rsplit(".", 1)[1]), f"{module}: {target} at import time"
            if isinstance(node, ast.Import):
                assert target not in [a.name for a in node.names], f"{module}: {target} at import time"


#: Above this many lines a module's first comment says why it is long (``# Over 600 lines: ...``).
LONG_FILE = 650


def test_long_modules_say_why():
    unexplained = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if text.count(chr(10)) > LONG_FILE and not text.startswith("# Over 600 lines: "):
            unexplained.append(f"{path.relative_to(SRC)}: {text.count(chr(10))} lines")
    assert not unexplained, "long modules without a first comment saying why:\n" + "\n".join(unexplained)


def test_old_module_names_still_import():
    """Every module that moved into a package still imports under its old name, as the same module."""
    from skeletal._aliases import MOVED

    names = sorted(MOVED)
    # skeletal.skin and skeletal.bake stay the functions after their old modules were imported by name
    code = ("import importlib, skeletal; from skeletal._aliases import MOVED; "
            "same = all(importlib.import_module(o) is importlib.import_module(n) for o, n in MOVED.items()); "
            "lbs = importlib.import_module('skeletal.skin'); "
            "print(same, skeletal.clip.Clip is skeletal.Clip and lbs.skin is skeletal.skin is skeletal.skinning.lbs.skin)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True"], out.stdout + out.stderr
    assert all(not (PACKAGE / (n.split(".", 1)[1].replace(".", "/") + ".py")).exists() for n in names)
