"""Benchmark rows: each bridge's per-frame cost against skeletal alone, measured in the same run.

One character (the built-in one, or the model given) plays a clip; per frame:

* baseline "skeletal update": ``Player.update(1/60)`` (sample, blend, world matrices, palettes);
* baseline "skeletal update + CPU skin": the same plus :class:`skeletal.bridges.posed.Poser` (what the
  trimesh and panda3d bridges start from);
* pygfx: update + :meth:`Character.update` (palettes into pygfx's bone-matrix buffers; no draw);
* panda3d: update + :meth:`PandaCharacter.update` (skinning into panda3d's vertex arrays; no draw);
* trimesh: update + :func:`scene_from` (a new ``trimesh.Scene`` of the frame);
* pyglet (only with an X display): skeletal's renderer drawing into a pyglet window and the blit to
  the window, against the same renderer drawing into its own framebuffer in that context.

Each figure is the median wall-clock time per frame (microseconds) over interleaved rounds; the
overhead is the bridge's figure minus its baseline's. A bridge whose package is missing is left out
with a note. Nothing here asserts a speed.

>>> bench_bridges(quick=True)["rows"][0]["name"]                      # doctest: +SKIP
'pygfx Character.update'
"""

from __future__ import annotations

import os
import statistics
import time

__all__ = ["bench_bridges"]


def _median_us(samples: list[float]) -> float:
    return float(statistics.median(samples)) * 1e6


def bench_bridges(path: str | os.PathLike | None = None, clip: str | int | None = None, quick: bool = False) -> dict:
    """Per-frame time of each bridge against skeletal alone. Returns ``{"rows": [{"name",
    "baseline", "baseline_us", "bridge_us", "overhead_us", "ratio"}], "notes": [...]}``."""
    import skeletal

    from . import interleaved

    asset = skeletal.load(path or skeletal.examples.path("demo.glb"))
    name = clip if clip is not None else ("walk" if path is None else 0)
    player = skeletal.Player(asset)
    player.play(name)
    from ..bridges.posed import Poser, frame_state

    poser = Poser(asset)
    dt = 1 / 60
    rounds, inner = (5, 10) if quick else (15, 30)

    def update():
        player.update(dt)

    def update_skin():
        player.update(dt)
        poser.pose(frame_state(player))

    candidates: list[tuple[str, str, object]] = []  # (row name, baseline name, callable)
    notes: list[str] = []
    try:
        from ..bridges.pygfx import Character

        character = Character(asset)
        candidates.append(("pygfx Character.update", "skeletal update", lambda: (update(), character.update(player))))
    except Exception as exc:  # missing package or no pygfx
        notes.append(f"pygfx row omitted: {exc}")
    try:
        from ..bridges.panda3d import PandaCharacter

        panda = PandaCharacter(asset)
        candidates.append(("panda3d PandaCharacter.update", "skeletal update + CPU skin",
                           lambda: (update(), panda.update(player))))
    except Exception as exc:
        notes.append(f"panda3d row omitted: {exc}")
    try:
        from ..bridges.trimesh import scene_from

        candidates.append(("trimesh scene_from", "skeletal update + CPU skin",
                           lambda: (update(), scene_from(asset, player, poser=poser))))
    except Exception as exc:
        notes.append(f"trimesh row omitted: {exc}")

    baselines = {"skeletal update": update, "skeletal update + CPU skin": update_skin}
    fns = list(baselines.values()) + [c[2] for c in candidates]
    samples = interleaved(fns, rounds, inner, clock=time.perf_counter)
    base_us = {k: _median_us(s) for k, s in zip(baselines, samples)}
    rows = []
    for (row, base, _), s in zip(candidates, samples[len(baselines):]):
        bridge_us = _median_us(s)
        rows.append({"name": row, "baseline": base, "baseline_us": base_us[base], "bridge_us": bridge_us,
                     "overhead_us": bridge_us - base_us[base], "ratio": bridge_us / base_us[base]})
    pyglet_row = _pyglet_row(asset, player, rounds, inner)
    if isinstance(pyglet_row, dict):
        rows.append(pyglet_row)
    else:
        notes.append(pyglet_row)
    return {"model": asset.name, "clip": str(name), "rows": rows, "baselines_us": base_us, "notes": notes}


def _pyglet_row(asset, player, rounds: int, inner: int):
    if not os.environ.get("DISPLAY"):
        return "pyglet row omitted: no X display (run under xvfb-run)"
    try:
        import pyglet

        from ..bridges.pyglet import WindowRenderer
    except Exception as exc:
        return f"pyglet row omitted: {exc}"
    from . import interleaved

    window = pyglet.window.Window(640, 480, visible=True)
    try:
        view = WindowRenderer(window, asset, samples=0)
        own = lambda: (view.renderer.render(player, finish=True))
        bridged = lambda: (view.draw(player), view.ctx.finish())
        base, bridge = interleaved([own, bridged], rounds, max(inner // 5, 2), clock=time.perf_counter)
        b, p = _median_us(base), _median_us(bridge)
        view.release()
        return {"name": "pyglet WindowRenderer.draw (640x480, blit to the window)", "baseline": "skeletal Renderer.render",
                "baseline_us": b, "bridge_us": p, "overhead_us": p - b, "ratio": p / b}
    finally:
        window.close()


def format_rows(result: dict) -> str:
    """The rows as a Markdown table."""
    lines = [f"{result['model']} playing {result['clip']}, per frame (median wall-clock):", "",
             "| bridge | its baseline | baseline us | with the bridge us | overhead us | ratio |", "|---|---|---|---|---|---|"]
    for r in result["rows"]:
        lines.append(f"| {r['name']} | {r['baseline']} | {r['baseline_us']:.1f} | {r['bridge_us']:.1f} | "
                     f"{r['overhead_us']:.1f} | {r['ratio']:.2f} |")
    lines.extend(f"\n{n}" for n in result["notes"])
    return "\n".join(lines)
