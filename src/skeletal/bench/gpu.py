"""``skeletal bench`` rows for the whole frame on the GPU (registered in :data:`skeletal.bench.FEATURE_BENCHES`).

Always on the built-in character (23 nodes, 22 palette matrices, a 19k-vertex mesh), whatever the
suite's model, so that the rows compare across machines.

* GPU posing: :class:`~skeletal.render.gpu_pose.GpuCrowd` ``update(1/60)`` until the GPU is done
  (``ctx.finish()``), for 1k, 10k and 100k instances (``--quick``: 1k, 10k) playing Walk at random phases. Baseline, the same
  run: :class:`skeletal.Crowd` ``update(1/60)`` plus the upload of its palettes into the renderer's
  storage buffer (what the CPU path does every frame; the GPU path uploads nothing).
* Whole frames (posing + skinning + draw) of 1k, 10k and 100k instances (``--quick``: 1k),
  each until the GPU is done, to a 64 x 64 image of a coarse level of detail (:data:`LOD`): the GPU
  crowd drawn from its own buffer, and a baked-texture crowd (:mod:`skeletal.render.anim_texture`,
  nothing per frame but a time uniform), against the CPU crowd's palettes uploaded and drawn.

On Mesa's llvmpipe (the "GPU" is the same CPU cores, shared with the CPU rows) these rows show that
the paths work and what they cost, not GPU speed; on a real GPU the reference column names it. Nothing
here asserts a speed.
"""

from __future__ import annotations

import time

import numpy as np

#: instances of the posing rows (``--quick``: the first two)
POSE_COUNTS = (1_000, 10_000, 100_000)
#: instances of the whole-frame rows (``--quick``: the first; llvmpipe shades every vertex on the CPU)
FRAME_COUNTS = (1_000, 10_000, 100_000)
#: the frames' level of detail (Renderer's ``lod``): about 1k of the mesh's 37k triangles, so that
#: llvmpipe draws 100k instances in seconds, not minutes (a real GPU draws the full mesh)
LOD = 40.0


def bench_rows(asset=None, clip=None, path=None, quick: bool = False) -> dict:
    try:
        from ..render.context import describe, shared_context
        from ..render.errors import RenderError
        from ..render.gpu_pose import compute_support

        ctx = shared_context()
    except (ImportError, RenderError) as exc:
        return {"rows": [], "skipped": f"no OpenGL context ({exc})"}
    why = compute_support(ctx)
    if why is not None:
        return {"rows": [], "skipped": why}
    from . import stat
    from ..demo import demo_asset

    demo = demo_asset()
    rows, figures = [], {"device": describe(ctx), "reference": _reference(ctx)}
    for count in POSE_COUNTS[:2] if quick else POSE_COUNTS:
        figures[f"pose_{count}"] = _posing_row(ctx, demo, count, 2 if quick or count >= 100_000 else 5, rows, stat)
    for count in FRAME_COUNTS[:1] if quick else FRAME_COUNTS:
        figures[f"frame_{count}"] = _frame_rows(ctx, demo, count, 1 if quick or count >= 100_000 else 3, rows, stat)
    return {"rows": rows, **figures}


def _reference(ctx) -> str:
    """What the rows measure: llvmpipe's cost on the CPU cores, or the named GPU's speed."""
    renderer = str(ctx.info.get("GL_RENDERER", "?"))
    return "llvmpipe: cost, not GPU speed" if "llvmpipe" in renderer.lower() else f"{renderer}: GPU speed"


def _crowds(ctx, demo, count: int):
    import skeletal

    from ..render.gpu_pose import GpuCrowd

    phases = np.random.default_rng(0).uniform(0.0, demo.clip("walk").duration, count)
    gpu = GpuCrowd(demo, count, ctx=ctx)
    gpu.play("walk", offsets=phases)
    cpu = skeletal.Crowd(demo, count)
    cpu.play("walk", offsets=phases)
    return gpu, cpu, phases


def _posing_row(ctx, demo, count: int, repeats: int, rows: list, stat) -> dict:
    from ..render.palette import create_store

    gpu, cpu, _ = _crowds(ctx, demo, count)
    store = create_store(ctx, "ssbo", count * gpu.joint_count)
    try:
        def gpu_frame():
            gpu.update(1 / 60)
            ctx.finish()

        def cpu_frame():
            cpu.update(1 / 60)
            store.write(cpu.palettes)
            ctx.finish()

        gpu_ms, cpu_ms = _interleaved_ms([gpu_frame, cpu_frame], repeats)
        upload = count * gpu.joint_count * 48
        rows.append({"name": f"GPU posing (compute): {count // 1000}k demo characters, Walk, 1/60 s, until done",
                     "stat": stat(gpu_ms, "ms per frame"),
                     "baseline": f"Crowd.update + palette upload ({upload / 1e6:.1f} MB) {np.median(cpu_ms):.1f} ms",
                     "ratio": f"{np.median(cpu_ms) / np.median(gpu_ms):.2f}x",
                     "reference": _reference(ctx)})
        return {"gpu_ms": stat(gpu_ms, "ms"), "cpu_ms": stat(cpu_ms, "ms"), "upload_bytes_cpu_path": upload}
    finally:
        store.release()
        gpu.release()


def _frame_rows(ctx, demo, count: int, repeats: int, rows: list, stat) -> dict:
    """Whole frames of ``count`` instances, interleaved: GPU-posed, CPU-posed (update + upload) and a
    baked-texture crowd, each drawn (LBS) to a 64 x 64 image until the GPU is done."""
    from ..render.anim_texture import bake_texture
    from ..render.anim_texture_draw import TextureCrowdRenderer
    from ..render.layout import grid_offsets, pose_at
    from ..render.renderer import Renderer

    gpu, cpu, phases = _crowds(ctx, demo, count)
    offsets = grid_offsets(count, 1.2)
    options = dict(samples=0, ground=False, ctx=ctx, lod=LOD)
    gpu_renderer = Renderer(demo, 64, 64, instances=1, **options)
    cpu_renderer = Renderer(demo, 64, 64, instances=count, **options)
    drawer = TextureCrowdRenderer(demo, bake_texture(demo, ["walk"], fps=30), 64, 64, **options)
    drawer.set_instances(0, phases, 1.0, offsets)
    rest = pose_at(demo, None, [0.0])[0]
    clock = [0.0]
    try:
        def gpu_frame():
            gpu.update(1 / 60)
            gpu_renderer.render(gpu, offsets, finish=True)

        def cpu_frame():
            cpu.update(1 / 60)
            cpu_renderer.render((rest, None), offsets, palettes=cpu.palettes, finish=True)

        def texture_frame():
            clock[0] += 1 / 60
            drawer.render_at(clock[0], finish=True)

        gpu_ms, cpu_ms, tex_ms = _interleaved_ms([gpu_frame, cpu_frame, texture_frame], repeats)
        triangles = sum(len(p.data.indices) for p in drawer._primitives) // 3
        base = f"CPU Crowd + upload + same draw {np.median(cpu_ms):.0f} ms"
        for label, samples in (("GPU-posed frame (compute pose + skin + draw)", gpu_ms),
                               ("Texture crowd frame (baked palettes, time uniform)", tex_ms)):
            rows.append({"name": f"{label}: {count // 1000}k demo characters ({triangles} tris, 64x64)",
                         "stat": stat(samples, "ms per frame"), "baseline": base,
                         "ratio": f"{np.median(cpu_ms) / np.median(samples):.2f}x",
                         "reference": _reference(ctx)})
        return {"gpu_ms": stat(gpu_ms, "ms"), "cpu_ms": stat(cpu_ms, "ms"), "texture_ms": stat(tex_ms, "ms"),
                "triangles": triangles}
    finally:
        for r in (gpu_renderer, cpu_renderer, drawer):
            r.release()
        gpu.release()


def _interleaved_ms(fns, repeats: int, clock=time.perf_counter) -> list[list[float]]:
    """Milliseconds per call of each of ``fns``, alternating, after one warm-up call each."""
    from . import interleaved

    return [[1000.0 * s for s in samples] for samples in interleaved(fns, repeats, 1, clock=clock)]
