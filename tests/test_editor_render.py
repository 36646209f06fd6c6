"""The renderer options the editor's window draws with (headless, EGL): ``cpu_skinning`` (numba
skins positions and normals, the vertex shader only projects) gives the GPU-skinned picture, and
``cull`` (back faces of single-sided materials culled) changes nothing on a closed character. Skips
with the reason when no headless OpenGL context can be made."""

from __future__ import annotations


import numpy as np
import pytest

from fixtures import demo_asset
from skeletal.render.errors import RenderError


_demo = demo_asset  # the shared, cached demo character (tests/fixtures)


def _pose(asset, clip="walk", t=0.3):
    from skeletal.editor.model import EditDocument

    doc = EditDocument(asset, "x.glb")
    return doc.world(doc.pose([c.name for c in doc.clips].index(clip), t))


def test_cpu_skinning_and_culling_draw_the_gpu_picture(ctx):
    from skeletal.render.renderer import Renderer

    asset = _demo()
    world = _pose(asset)
    images = {}
    variants = (("gpu", {}), ("cpu", {"cpu_skinning": True}), ("cpu+cull", {"cpu_skinning": True, "cull": True}))
    for name, options in variants:
        with Renderer(asset, 320, 240, samples=0, ctx=ctx, clip=asset.clip("walk"), **options) as r:
            images[name] = r.draw(world).astype(np.int32)
            images[name + " again"] = r.draw(_pose(asset, "walk", 0.6)).astype(np.int32)
    with Renderer(asset, 320, 240, samples=0, ctx=ctx, clip=asset.clip("walk")) as r:
        later = r.draw(_pose(asset, "walk", 0.6)).astype(np.int32)
    for name in ("cpu", "cpu+cull"):
        diff = np.abs(images[name] - images["gpu"]).max(axis=2)
        assert (diff > 8).mean() < 0.002, (name, (diff > 8).mean())  # float rounding on silhouettes only
        diff = np.abs(images[name + " again"] - later).max(axis=2)  # the next pose is skinned again
        assert (diff > 8).mean() < 0.002, (name, (diff > 8).mean())
    assert np.abs(images["cpu"] - images["cpu again"]).max() > 60  # the poses differ


def test_cpu_skinning_limits(ctx):
    from skeletal.render.renderer import Renderer

    asset = _demo()
    with pytest.raises(RenderError, match="one instance"):
        Renderer(asset, 64, 64, ctx=ctx, cpu_skinning=True, skinning="dqs")
    with Renderer(asset, 64, 64, samples=0, ctx=ctx, cpu_skinning=True) as r:
        with pytest.raises(RenderError, match="one instance"):
            r.render(np.stack([_pose(asset)] * 2))
