"""Motion-matching search figures: the bounding-box search against brute force, in the same run.

``python -m skeletal.bench.matching [--quick] [--json FILE]`` prints, for databases of 50,000 and
500,000 frames, the time per query of one character's query per call and of 1,000 characters'
queries in one call, for :func:`~skeletal.playback.locomotion.search.box_search` and
:func:`~skeletal.playback.locomotion.search.brute_force` (samples interleaved, so a busy machine
slows both alike), the speed-up, and whether both returned the same frames; then the crowd budget
(:func:`crowd_budget`): 1,000 characters searching every 6th frame (167 queries a frame) against one
update of a 1,000-character crowd, and the same for characters playing on through the database
("moving": queries of rows 6 frames on from the last), without and with the last answer as a hint.

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


def crowd_budget(size: int, characters: int = 1000, every: int = 6, repeats: int = 5, seed: int = 0) -> dict:
    """The issue's budget: ``characters`` characters each searching every ``every``-th frame (so
    ``characters / every`` queries per frame, one call) against one update of a crowd of
    ``characters`` built-in characters playing walk (milliseconds, medians of interleaved samples)."""
    import skeletal

    from ..demo import demo_asset

    rows, real = synthetic_rows(size, seed)
    boxes = S.build_boxes(rows)
    rng = np.random.default_rng(seed + 2)
    per_frame = -(-characters // every)
    picks = real[rng.integers(0, len(real), per_frame)]
    queries = (picks + rng.normal(scale=0.3, size=picks.shape)).astype(np.float32)
    # the hinted case: each character plays on through the database; its query now is its row plus
    # noise, its hint the answer it got ``every`` frames ago (for the row then, plus noise) moved on
    at = rng.integers(every, len(rows), per_frame)
    before = (rows[at - every] + rng.normal(scale=0.3, size=(per_frame, rows.shape[1]))).astype(np.float32)
    moving = (rows[at] + rng.normal(scale=0.3, size=(per_frame, rows.shape[1]))).astype(np.float32)
    hints = np.minimum(S.box_search(rows, boxes, before)[0] + every, len(rows) - 1)
    same = bool(np.array_equal(S.box_search(rows, boxes, moving, hints)[0], S.box_search(rows, boxes, moving)[0]))
    crowd = skeletal.Crowd(demo_asset(), characters)
    crowd.play("walk", offsets=rng.uniform(0.0, 1.0, characters))
    crowd.update(1 / 60)
    S.box_search(rows, boxes, queries)
    search_ms, crowd_ms, plain_ms, hinted_ms = [], [], [], []
    for _ in range(repeats):
        start = time.perf_counter()
        S.box_search(rows, boxes, queries)
        search_ms.append((time.perf_counter() - start) * 1e3)
        start = time.perf_counter()
        crowd.update(1 / 60)
        crowd_ms.append((time.perf_counter() - start) * 1e3)
        start = time.perf_counter()
        S.box_search(rows, boxes, moving)
        plain_ms.append((time.perf_counter() - start) * 1e3)
        start = time.perf_counter()
        S.box_search(rows, boxes, moving, hints)
        hinted_ms.append((time.perf_counter() - start) * 1e3)
    search, update = statistics.median(search_ms), statistics.median(crowd_ms)
    plain, hinted = statistics.median(plain_ms), statistics.median(hinted_ms)
    return dict(frames=size, characters=characters, queries_per_frame=per_frame, search_ms=search,
                crowd_update_ms=update, ratio=search / update, moving_ms=plain, hinted_ms=hinted,
                hinted_ratio=hinted / update, hinted_same=same)


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
    print(f"{'frames':>8} {'queries/frame':>13} {'search ms':>9} {'crowd update ms':>15} {'ratio':>6} "
          f"{'moving ms':>9} {'hinted ms':>9} {'ratio':>6} same")
    for size in sizes:
        row = crowd_budget(size, repeats=repeats)
        table.append(row)
        print(f"{row['frames']:>8} {row['queries_per_frame']:>13} {row['search_ms']:>9.2f} "
              f"{row['crowd_update_ms']:>15.2f} {row['ratio']:>6.2f} {row['moving_ms']:>9.2f} "
              f"{row['hinted_ms']:>9.2f} {row['hinted_ratio']:>6.2f} {row['hinted_same']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(table, f, indent=1)
    return table


if __name__ == "__main__":
    main()
