"""The public API is typed: every function exported by ``skeletal`` (its ``__all__``) and every public
method of an exported class annotates each parameter and its return. (mypy --strict then checks the
annotations against their uses: tests/typecheck/public_api.py, run by scripts/test.)"""

from __future__ import annotations

import inspect

import skeletal


def unannotated(qualname: str, fn) -> list[str]:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # builtins without a signature
        return []
    out = [f"{qualname}({name})" for name, p in sig.parameters.items()
           if name not in ("self", "cls") and p.annotation is inspect.Parameter.empty]
    if sig.return_annotation is inspect.Signature.empty and not qualname.endswith(".__init__"):
        out.append(f"{qualname} -> ?")
    return out


def public_callables():
    for name in skeletal.__all__:
        obj = getattr(skeletal, name)
        if inspect.ismodule(obj) or name == "__version__":
            continue
        if inspect.isclass(obj):
            if issubclass(obj, BaseException):
                continue
            for attr, value in vars(obj).items():
                if attr.startswith("_") and attr != "__init__":
                    continue
                if isinstance(value, (staticmethod, classmethod)):
                    value = value.__func__
                if isinstance(value, property):
                    value = value.fget
                if inspect.isfunction(value):
                    yield f"{name}.{attr}", value
        elif callable(obj):
            yield name, getattr(obj, "py_func", obj)  # a numba dispatcher: its Python function


def test_the_walk_finds_the_api():
    names = {q for q, _ in public_callables()}
    assert {"load", "bake", "Player.play", "Mixer.crossfade", "Rig.from_parents", "Procedural.look_at"} <= names


def test_every_export_is_annotated():
    missing = [m for q, fn in public_callables() for m in unannotated(q, fn)]
    assert not missing, "unannotated public API:\n" + "\n".join(missing)
