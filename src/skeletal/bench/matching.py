"""Motion-matching search figures: the bounding-box search against brute force, in the same run.

``python -m skeletal.bench.matching [--quick] [--json FILE]`` prints, for databases of 50,000 and
500,000 frames, the time per query of one character's query per call and of 1,000 characters'
queries in one call, for :func:`~skeletal.playback.locomotion.search.box_search` and
:func:`~skeletal.playback.locomotion.search.brute_force` (samples interleaved, so a busy machine
slows both alike), the speed-up, and whether both returned the same frames; then the crowd budget
(:func:`crowd_budget`): the search calls of a crowd of 1,000 motion-matching characters following
figure eights, a search every 6th frame, staggered (about 170 queries a frame, :func:`record_crowd`),
with the frames playing as hints, against one update of a 1,000-character crowd, on one thread (the
thread's CPU time), on two kinds of database: "copies" (below; the crowd runs on the real set and its
queries are moved into the copies, :func:`replay_queries`) and "generated" (:func:`generated_set`:
the built-in character's walks and runs at a continuum of speeds and turning rates, like a capture
session's; the crowd runs on the 50,000-frame set and its queries serve both sizes).

The databases: the built-in character's locomotion set (:func:`skeletal.demo.locomotion_asset`,
mirrored: about 2,000 frames with Holden's 27 default features) repeated to the size, each copy of a
range shifted by its own random offset (normal, 0.3 of a feature's spread per column) plus a little
per-frame noise (0.02), so that the copies are distinct motions that stay smooth in time like
captured ones. Queries: frames of the real set plus normal noise (0.3), the way a character's query
lies near but not on the database.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np

from ..playback.locomotion import search as S

SIZES = (50_000, 500_000)
BATCHES = (1, 1000)


def synthetic_rows(size: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``size`` database rows (float32) grown from the demo locomotion database (see the module
    docstring), and that real database's rows."""
    from ..demo import locomotion_asset
    from ..playback.locomotion.database import MatchingDatabase

    db = MatchingDatabase.build(locomotion_asset(), exclude=("idle", "wave", "walk", "run"), mirror=True)
    rng = np.random.default_rng(seed)
    parts, total = [], 0
    while total < size:
        for a, b in db.ranges:
            chunk = db.features[a:b] + rng.normal(scale=0.3, size=(1, db.width))
            chunk = chunk + rng.normal(scale=0.02, size=chunk.shape)
            parts.append(chunk.astype(np.float32))
            total += len(chunk)
    return np.ascontiguousarray(np.concatenate(parts)[:size]), db.features


def _per_query(fn, queries: np.ndarray, batch: int) -> float:
    """Seconds per query of ``fn`` over ``queries``, ``batch`` queries per call."""
    start = time.perf_counter()
    for i in range(0, len(queries), batch):
        fn(queries[i:i + batch])
    return (time.perf_counter() - start) / len(queries)


def bench_size(size: int, batches=BATCHES, repeats: int = 5, seed: int = 0) -> list[dict]:
    """Rows of the table for one database size: per batch size, microseconds per query (median of
    ``repeats`` interleaved samples) of both searches, the speed-up and whether the frames agree. The
    same 1,000 queries serve every batch size (one at a time: the first 200)."""
    rows, real = synthetic_rows(size, seed)
    boxes = S.build_boxes(rows)
    rng = np.random.default_rng(seed + 1)
    out = []
    picks = real[rng.integers(0, len(real), max(batches))]
    queries = (picks + rng.normal(scale=0.3, size=picks.shape)).astype(np.float32)
    for batch in batches:
        fast = lambda q: S.box_search(rows, boxes, q)
        slow = lambda q: S.brute_force(rows, q)
        fast(queries[:2])
        slow(queries[:2])  # compiled before timing
        same = bool(np.array_equal(fast(queries)[0], slow(queries)[0]))
        t_fast, t_slow = [], []
        some = queries if batch > 1 else queries[:200]  # one at a time: 200 different queries a sample
        for _ in range(repeats):
            t_fast.append(_per_query(fast, some, batch))
            t_slow.append(_per_query(slow, some, batch))
        f, s = statistics.median(t_fast) * 1e6, statistics.median(t_slow) * 1e6
        out.append(dict(frames=size, queries_per_call=batch, box_us_per_query=f, brute_us_per_query=s,
                        speedup=s / f, same_frames=same, box_min_us=min(t_fast) * 1e6, brute_min_us=min(t_slow) * 1e6))
    return out


class _Recording:
    """A matching database that keeps each search call's queries and hints (the frames playing), then
    searches."""

    def __init__(self, db, log: list):
        self._db, self._log = db, log

    def __getattr__(self, name):
        return getattr(self._db, name)

    def search(self, queries, *, brute_force: bool = False, hints=None):
        q = np.atleast_2d(np.asarray(queries, np.float32)).copy()
        h = np.full(len(q), -1, np.int64) if hints is None else np.asarray(hints, np.int64).reshape(-1).copy()
        self._log.append((q, h))
        return self._db.search(queries, brute_force=brute_force, hints=hints)


#: (speed m/s, figure-eight radius m) of the recorded characters, in turn: walk, brisk walk, run.
STREAM_PATHS = ((1.0, 4.0), (1.6, 6.0), (3.5, 10.5))


def record_crowd(asset, db, characters: int = 1000, frames: int = 24, skip: int = 12,
                 fps: float = 60.0) -> list[tuple[np.ndarray, np.ndarray]]:
    """The search calls of a crowd of ``characters`` motion-matching characters on ``db``
    (``MotionMatching(skeletal.Crowd(asset, characters), db)``: default settings, a search every 6th
    frame, staggered) following figure eights (:data:`STREAM_PATHS` in turn, each character starting
    1.7 s further along its path than the one before), one call a frame: for each of ``frames``
    frames after the first ``skip`` (the start, when every character searches at once), the queries
    (n, D) float32 and their hints (n,) (the frames playing, -1 where none)."""
    import skeletal

    from ..playback.locomotion import MotionMatching
    from ..playback.locomotion.paths import figure_eight_path

    mm = MotionMatching(skeletal.Crowd(asset, characters), db)
    log: list = []
    mm.db = _Recording(db, log)
    paths = [figure_eight_path(*speed) for speed in STREAM_PATHS]
    kind = np.arange(characters) % len(paths)
    start = (1.7 * np.arange(characters)) % 60.0
    origin = np.array([paths[kind[i]](start[i])[0] for i in range(characters)])
    for f in range(skip + frames):
        at = [paths[kind[i]](start[i] + f / fps) for i in range(characters)]
        mm.follow(np.array([p for p, _ in at]) - origin, np.array([v for _, v in at]))
        if f == skip:
            log.clear()
        mm.update(1.0 / fps)
    return log


def replay_queries(rows: np.ndarray, real: np.ndarray, queries: np.ndarray, playing: np.ndarray,
                   rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Queries recorded on the real set moved into random whole copies of it (:func:`synthetic_rows`),
    as if each character moved through its copy as it moved through the real set: query + (the copy's
    row - the real row) of the frame playing (its nearest real row where none), and that copy's row
    as the hint (-1 stays -1)."""
    R = len(real)
    copies = rng.integers(0, len(rows) // R, len(queries))
    anchor = np.where(playing >= 0, playing, S.brute_force(np.ascontiguousarray(real, np.float32), queries)[0])
    moved = queries + (rows[copies * R + anchor] - real[anchor])
    return np.ascontiguousarray(moved, np.float32), np.where(playing >= 0, copies * R + playing, -1)


def generated_set(size: int, seed: int = 0):
    """A locomotion set of about ``size`` frames with a continuum of motions: the built-in character
    with generated clips (:func:`skeletal.demo.locomotion.make_animation`), walks and runs at random
    rates (0.6 to 1.4 of their own speed) turning at random rates (up to 90 degrees a second each way),
    one in four starting from or stopping to idle, 4 cycles each. Returns the asset and its matching
    database (not mirrored, Holden's default features). A larger ``size`` with the same ``seed`` begins
    with the same clips (the same rows, first)."""
    import copy as _copy

    from ..asset import Asset
    from ..demo import demo_asset
    from ..demo.locomotion import FPS, Locomotion, make_animation
    from ..playback.locomotion.database import MatchingDatabase

    base = demo_asset()
    rng = np.random.default_rng(seed)
    animations, frames = [], 0
    while frames < size:
        gait = ("walk", "run")[len(animations) % 2]
        ramp = (None, None, None, "start", None, None, None, "stop")[len(animations) % 8]
        spec = Locomotion(f"{gait}_{len(animations)}", gait, rate=float(rng.uniform(0.6, 1.4)),
                          turn=float(rng.uniform(-90.0, 90.0)), cycles=4.0, ramp=ramp)
        animations.append(make_animation(base, spec))
        duration = max(float(c.times[-1]) for c in animations[-1].channels)
        frames += max(int(duration * FPS) + 1 - 60, 0)  # the database leaves out the last 60 frames
    document = _copy.copy(base.document)
    document.animations = list(base.document.animations) + animations
    asset = Asset(document)
    db = MatchingDatabase.build(asset, [a.name for a in animations])
    return asset, db


def crowd_budget(rows: np.ndarray, per_frame: list[tuple[np.ndarray, np.ndarray]], characters: int = 1000,
                 repeats: int = 3, seed: int = 0, model: bool = True) -> dict:
    """The issue's budget: the search calls of a crowd of motion-matching characters (``per_frame``:
    each frame's queries and hints, :func:`record_crowd`) on ``rows`` against one update of a crowd
    of ``characters`` built-in characters playing walk (and, with ``model``, of the bench model
    playing its walk: Soldier.glb where the shared assets are). On one thread, the thread's CPU time
    (milliseconds per frame, the median of ``repeats`` interleaved samples, each over every frame):
    the box search with hints, without, brute force (one sample), the crowd updates; and whether all
    three searches found the same frames."""
    import numba

    import skeletal

    from ..demo import demo_asset
    from . import resolve_model, walk_clip

    boxes = S.build_boxes(rows)
    frames = len(per_frame)
    offsets = np.random.default_rng(seed).uniform(0.0, 1.0, characters)
    crowds = {"demo": skeletal.Crowd(demo_asset(), characters)}
    crowds["demo"].play("walk", offsets=offsets)
    label = None
    if model:
        asset, label, path = resolve_model(None)
        if path is not None:
            crowds[label] = skeletal.Crowd(asset, characters)
            crowds[label].play(walk_clip(asset), offsets=offsets)
        else:
            label = None
    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        for crowd in crowds.values():
            crowd.update(1 / 60)
        answers = [S.box_search(rows, boxes, q, h) for q, h in per_frame]
        same = all(np.array_equal(a[0], S.box_search(rows, boxes, q)[0]) for a, (q, _) in zip(answers, per_frame))
        start = time.thread_time()
        brute = [S.brute_force(rows, q) for q, _ in per_frame]
        brute_ms = (time.thread_time() - start) * 1e3 / frames
        same = same and all(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) for a, b in zip(answers, brute))
        hinted, plain = [], []
        update: dict[str, list[float]] = {k: [] for k in crowds}
        for _ in range(repeats):
            start = time.thread_time()
            for q, h in per_frame:
                S.box_search(rows, boxes, q, h)
            hinted.append((time.thread_time() - start) * 1e3 / frames)
            for k, crowd in crowds.items():
                start = time.thread_time()
                for _ in range(frames):
                    crowd.update(1 / 60)
                update[k].append((time.thread_time() - start) * 1e3 / frames)
            start = time.thread_time()
            for q, _ in per_frame:
                S.box_search(rows, boxes, q)
            plain.append((time.thread_time() - start) * 1e3 / frames)
    finally:
        numba.set_num_threads(threads)
    h, p = statistics.median(hinted), statistics.median(plain)
    u = statistics.median(update["demo"])
    m = statistics.median(update[label]) if label else None
    return dict(frames=len(rows), characters=characters, queries_per_frame=float(np.mean([len(q) for q, _ in per_frame])),
                hinted_ms=h, unhinted_ms=p, brute_ms=brute_ms, crowd_update_ms=u, ratio=h / u, speedup=brute_ms / h,
                model=label, model_update_ms=m, model_ratio=h / m if m else None, same_frames=same)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(prog="python -m skeletal.bench.matching", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="50k frames only, 3 samples")
    parser.add_argument("--json", help="also write the rows to this JSON file")
    args = parser.parse_args(argv)
    import numba

    sizes = SIZES[:1] if args.quick else SIZES
    repeats = 3 if args.quick else 5
    print(f"motion-matching search, {numba.get_num_threads()} threads, load average {os.getloadavg()[0]:.1f}")
    print(f"{'frames':>8} {'queries/call':>12} {'box us/query':>13} {'brute us/query':>15} {'speed-up':>9} same")
    table = []
    for size in sizes:
        for row in bench_size(size, repeats=repeats):
            table.append(row)
            print(f"{row['frames']:>8} {row['queries_per_call']:>12} {row['box_us_per_query']:>13.1f} "
                  f"{row['brute_us_per_query']:>15.1f} {row['speedup']:>8.1f}x {row['same_frames']}")
    from ..demo import locomotion_asset
    from ..playback.locomotion.database import MatchingDatabase

    asset = locomotion_asset()
    real_db = MatchingDatabase.build(asset, exclude=("idle", "wave", "walk", "run"), mirror=True)
    frames = 12 if args.quick else 24
    real_frames = record_crowd(asset, real_db, frames=frames)
    from . import resolve_model

    print(f"crowd budget: a crowd of 1,000 motion-matching characters on figure eights, a search every 6th frame; "
          f"1 thread, thread CPU ms per frame, load average {os.getloadavg()[0]:.1f}; crowd updates of 1,000 "
          f"built-in characters and of the model ({resolve_model(None)[1]}) playing walk")
    print(f"{'database':>9} {'frames':>8} {'queries/frame':>13} {'hinted':>7} {'no hint':>7} {'brute':>8} "
          f"{'crowd update':>12} {'ratio':>6} {'model update':>12} {'ratio':>6} {'speed-up':>8} same")

    def show(kind: str, row: dict) -> None:
        row["database"] = kind
        table.append(row)
        print(f"{kind:>9} {row['frames']:>8} {row['queries_per_frame']:>13.0f} {row['hinted_ms']:>7.2f} "
              f"{row['unhinted_ms']:>7.2f} {row['brute_ms']:>8.1f} {row['crowd_update_ms']:>12.2f} "
              f"{row['ratio']:>6.2f} {row['model_update_ms'] or float('nan'):>12.2f} "
              f"{row['model_ratio'] or float('nan'):>6.2f} {row['speedup']:>7.0f}x {row['same_frames']}")

    rng = np.random.default_rng(5)
    for size in sizes:
        rows, real = synthetic_rows(size)
        show("copies", crowd_budget(rows, [replay_queries(rows, real, q, h, rng) for q, h in real_frames],
                                    repeats=repeats))
    # the generated sets: the crowd runs on the smallest (its crossfades over hundreds of clips are
    # slow); the larger ones begin with the same clips, so the frame playing is the same row there,
    # and the queries are put in their units
    small_asset, small_db = generated_set(sizes[0])
    gen_frames = record_crowd(small_asset, small_db, frames=frames)
    for size in sizes:
        gen_db = small_db if size == sizes[0] else generated_set(size)[1]
        moved = [(gen_db.normalise(q * small_db.scale + small_db.mean), h) for q, h in gen_frames]
        show("generated", crowd_budget(gen_db.features, moved, repeats=repeats))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(table, f, indent=1)
    return table


if __name__ == "__main__":
    main()
