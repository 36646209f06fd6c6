"""The lazy public names of skeletal and skeletal.playback (skeletal._lazy): ``import skeletal`` loads
none of the stages, every exported name still imports (the same object as in its module), the
tables agree with the imports type checkers read, and an old module name that is also a function's
name (``skeletal.skin``) stays the function."""

from __future__ import annotations

import ast
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "skeletal"
#: what ``import skeletal`` may load of skeletal: the old names' finder, the lazy tables, numba's
#: deferred set-up and the OpenMP environment, errors and version (and no numba)
SET_UP = {"skeletal", "skeletal._aliases", "skeletal._setup", "skeletal._threads", "skeletal._lazy", "skeletal.errors",
          "skeletal.version"}


def _run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def test_import_skeletal_loads_no_stage_and_no_numba():
    code = "import sys, skeletal; print(' '.join(m for m in sys.modules if m.startswith(('skeletal', 'numba'))))"
    assert set(_run(code).split()) == SET_UP


@pytest.mark.parametrize("first", ["import skeletal.playback.kernels", "import numba; import skeletal",
                                   "import skeletal; import numba", "from skeletal import Player"])
def test_numba_is_set_up_whenever_it_loads(first):
    """skeletal's threading layer and compile patches are in place as soon as numba is imported, by
    skeletal or anyone, before or after skeletal (skeletal._setup)."""
    code = (f"{first}; import sys, numba; c = sys.modules.get('skeletal._compile'); "
            "print(c is not None and c._state.get('installed'), numba.config.THREADING_LAYER_PRIORITY[0], "
            "sys.modules['skeletal._threads']._state.get('layer'))")
    env = {k: v for k, v in os.environ.items() if k not in ("SKELETAL_THREADING_LAYER", "NUMBA_THREADING_LAYER")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.split() == ["True", "omp", "omp"]


def test_a_player_loads_no_crowd_state_machine_or_tools():
    code = ("import sys; from skeletal import Player; "
            "print(' '.join(m for m in ('skeletal.playback.crowd', 'skeletal.playback.statemachine', "
            "'skeletal.playback.blendspace', 'skeletal.tools.retarget', 'skeletal.web') if m in sys.modules))")
    assert _run(code) == ""


@pytest.mark.parametrize("package", ["skeletal", "skeletal.playback"])
def test_every_exported_name_resolves_and_is_listed(package):
    module = importlib.import_module(package)
    listing = dir(module)
    for name in module.__all__:
        value = getattr(module, name)
        assert name in listing
        table = getattr(module, "_ATTRIBUTES", {})
        if name in table:  # the very object its module defines
            assert value is getattr(importlib.import_module(table[name], package), name)


def _checked_imports(path: Path) -> dict[str, str]:
    """name -> module (relative, as written) of the ``if TYPE_CHECKING:`` imports of a package file."""
    found = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom)
                base = "." * imp.level + (imp.module or "")
                for alias in imp.names:
                    found[alias.name] = base
    return found


@pytest.mark.parametrize("package", ["skeletal", "skeletal.playback"])
def test_lazy_tables_match_what_type_checkers_read(package):
    module = importlib.import_module(package)
    checked = _checked_imports(Path(module.__file__))
    modules = getattr(module, "_MODULES", {})
    assert set(checked) == set(module._ATTRIBUTES) | set(modules)
    for name, where in module._ATTRIBUTES.items():
        assert checked[name] == where, name
    for name, where in modules.items():  # ``from .anim import ik``: the module .anim.ik
        assert f"{checked[name]}.{name}".replace("..", ".") == where, name
    assert set(module.__all__) - {"__version__", "ClipError", "ModelError", "SkeletalError",
                                  "UnsupportedExtensionError"} == set(checked)


def test_old_module_name_import_keeps_the_function():
    code = ("import skeletal.skin, skeletal.bake, skeletal.skin_dq; import skeletal, types; "
            "print(all(not isinstance(getattr(skeletal, n), types.ModuleType) for n in ('skin', 'bake', 'skin_dq')), "
            "sys.modules['skeletal.skin'] is sys.modules['skeletal.skinning.lbs'] if (sys := __import__('sys')) else 0, "
            "skeletal.clip is sys.modules['skeletal.anim.clip'])")
    assert _run(code) == "True True True"


def test_unknown_names_raise_attribute_error():
    import skeletal

    with pytest.raises(AttributeError, match="no attribute 'no_such_thing'"):
        skeletal.no_such_thing  # noqa: B018
    assert not hasattr(skeletal.playback, "no_such_thing")
