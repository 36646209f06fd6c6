"""A cached kernel is recompiled when a skeletal module it may inline from changes, not only its own
file (skeletal._compile._patch_source_stamp): numba alone keyed the cache on the kernel's own file, so
an edit or an upgrade that changed only a callee's module left the old callee running."""

from __future__ import annotations

import os

from skeletal import _compile


def _package(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "kernel.py").write_text("import numpy as np\nfrom .sub.helpers import (twice,\n    thrice)\nfrom . import other\n")
    (pkg / "sub" / "helpers.py").write_text("from ..leaf import one\n\ndef twice(x):\n    return 2 * x\n")
    (pkg / "other.py").write_text("X = 1\n")
    (pkg / "leaf.py").write_text("def one():\n    return 1\n")
    (pkg / "unrelated.py").write_text("Y = 2\n")
    return pkg


def test_the_stamp_covers_every_module_imported_directly_or_not(tmp_path, monkeypatch):
    pkg = _package(tmp_path)
    monkeypatch.setattr(_compile, "_PACKAGE_DIR", str(pkg))
    monkeypatch.setattr(_compile, "_CLOSURE_STAMPS", {})
    kernel = str(pkg / "kernel.py")
    imported = {os.path.relpath(p, pkg) for p in _compile._skeletal_imports(kernel)}
    assert imported == {"sub/helpers.py", "other.py", "__init__.py"}
    before = _compile._closure_stamp(kernel)
    for name, changed in (("leaf.py", True), ("unrelated.py", False), ("other.py", True)):
        _compile._CLOSURE_STAMPS.clear()
        (pkg / name).write_text((pkg / name).read_text() + "# edited\n")
        after = _compile._closure_stamp(kernel)
        assert (after != before) is changed, name
        before = after


def test_skeletal_kernels_are_cached_under_the_closure_stamp():
    from skeletal.playback import kernels

    locator = kernels.update._cache._impl.locator
    stamp = locator.get_source_stamp()
    assert isinstance(stamp, tuple) and len(stamp) == 2
    assert stamp[1] == _compile._closure_stamp(kernels.__file__)
    files = set()
    todo = [os.path.abspath(kernels.__file__)]
    while todo:
        f = todo.pop()
        if f not in files:
            files.add(f)
            todo.extend(_compile._skeletal_imports(f) - files)
    names = {os.path.relpath(f, _compile._PACKAGE_DIR) for f in files}
    # the modules the update kernel inlines from: sampling, pose, IK, quaternions, the stages' kernels
    assert {"anim/sampling.py", "anim/pose.py", "anim/ik.py", "quat.py", "playback/single_lanes.py",
            "playback/inertia_kernels.py", "playback/jobs.py"} <= names
