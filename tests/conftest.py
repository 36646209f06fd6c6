"""Shared test set-up. pytest puts this folder (``tests/``) on ``sys.path`` because this file is here,
so tests import ``fixtures`` without editing ``sys.path`` themselves.

Fixtures: ``demo`` (the built-in character, built once per session: treat it as read-only),
``assets`` (the folder of the shared models, ``$SKELETAL_ASSETS``, see fixtures/shared_assets.py),
``ctx`` (the headless OpenGL context; skips without one), ``imageio`` (imageio.v3, after ``ctx``) and
``xdisplay`` (a private Xvfb server for window tests).
"""

import os
from importlib import resources

import pytest

from fixtures import demo_asset
from fixtures.shared_assets import ASSETS

# subprocesses and skeletal.bench's default model look in the same folder as the tests
os.environ.setdefault("SKELETAL_ASSETS", str(ASSETS))
# no numpy frames or background compiles on a cold cache (skeletal.playback.coldstart): the suite compiles in
# process, as it always did; tests/test_coldstart.py turns them on where it tests them
os.environ.setdefault("SKELETAL_NO_FALLBACK", "1")


def _usd_core_through_skeletal() -> None:
    """usd-core imported first by skeletal (io.usd.import_pxr), before any test module imports it:
    then no worker pool starts in this process, and readers may be forked (else they are spawned)."""
    try:
        from skeletal.errors import ModelError
        from skeletal.io.usd import import_pxr
    except ImportError:
        return
    try:
        import_pxr()
    except ModelError:
        pass  # usd-core is not installed: the USD tests skip


_usd_core_through_skeletal()

# the reasons tests were skipped, once each, in one block at the end of the run
pytest_plugins = ["fixtures.skip_summary"]


@pytest.fixture(scope="session")
def assets():
    """The folder of the shared models (may not exist: tests needing one use fixtures.shared_assets.need)."""
    return ASSETS


@pytest.fixture(scope="session")
def demo():
    """The built-in demo character (skeletal.demo), shared by the session."""
    return demo_asset()


@pytest.fixture(scope="module")
def ctx():
    """The shared headless OpenGL context; the test skips, saying why, when there is none."""
    pytest.importorskip("moderngl", reason="moderngl is not installed (pip install moderngl): GL tests skipped")
    if not resources.files("skeletal.render").joinpath("shaders", "skinning.glsl").is_file():
        pytest.skip("the GLSL shaders are not installed with the package: add 'render/shaders/*.glsl' to "
                    "[tool.setuptools.package-data] skeletal in pyproject.toml")
    from skeletal.render.context import shared_context
    from skeletal.render.errors import RenderError

    try:
        return shared_context()
    except RenderError as exc:
        pytest.skip(f"no headless OpenGL context: {exc}")


@pytest.fixture(scope="module")
def imageio(ctx):
    """imageio.v3 (the render tests write images and videos)."""
    return pytest.importorskip("imageio.v3", reason="imageio is not installed (pip install imageio imageio-ffmpeg)")


@pytest.fixture(scope="module")
def xdisplay():
    """A private Xvfb server (1024x768x24): its DISPLAY string; killed after the module."""
    from fixtures.xvfb import xvfb_display

    yield from xvfb_display("1024x768x24", ("glfw", "moderngl"), "pip install glfw moderngl")
