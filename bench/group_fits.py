"""Many small fits in one `group_by().agg(gbt.fit(...))` (issue 15, point 6): 200 groups of
1,500 rows x 28 float32 features, 50 trees of depth 6, binary logistic. Timed on one thread
(a child process with POLARS_MAX_THREADS=1, RAYON_NUM_THREADS=1 and `n_jobs=1`), then
through `group_by().agg(gbt.fit(...))` and through `gbt.fit(..., by="g")` with all cores (the
latter also with `n_jobs=1`, one thread per fit), and on the GPU when one is usable; each configuration once. Every configuration's trees are checked equal
to the one-thread run's.

Usage: PYTHONPATH=... python3 bench/group_fits.py [--groups 200] [--rows 1500] [--by-only [--gpu-only]]
(--by-only: the `by=` configurations alone, trees checked against the first one's, for shapes
where one thread would take minutes). Prints a markdown table; asserts nothing.
bench/group_fits_xgb.py times a loop of XGBoost GPU fits on the same groups.
"""
from __future__ import annotations

import argparse
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))
from higgs_like import make  # noqa: E402

import polars_gbt  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--groups", type=int, default=200)
    ap.add_argument("--rows", type=int, default=1500)
    ap.add_argument("--trees", type=int, default=50)
    ap.add_argument("--by-only", action="store_true", help="only the by= configurations, no one-thread run")
    ap.add_argument("--gpu-only", action="store_true", help="with --by-only: only by= on the GPU")
    ap.add_argument("--child", action="store_true", help="(internal) the one-thread run")
    a = ap.parse_args()
    X, y = make(a.groups * a.rows, seed=0)
    feats = [f"f{i}" for i in range(X.shape[1])]
    df = pl.DataFrame({f: X[:, i] for i, f in enumerate(feats)}).with_columns(
        y=y, g=pl.int_range(pl.len()) // a.rows
    )
    if not a.child:
        print(f"{a.groups} groups x {a.rows} rows x {len(feats)} features, {a.trees} trees of depth 6; "
              f"{os.cpu_count()} cores, Polars {pl.__version__}, POLARS_MAX_THREADS={pl.thread_pool_size()}")
    fit = lambda **extra: pl.col(feats).gbt.fit(  # noqa: E731
        "y", objective="binary:logistic", n_estimators=a.trees, max_depth=6, **extra
    )
    configs = [
        ("group_by().agg(), all cores", lambda: df.group_by("g").agg(fit(device="cpu")).sort("g")),
        ("by=, all cores", lambda: df.select(fit(by="g", device="cpu")).unnest("model").sort("g")),
        ("by=, all cores, n_jobs=1", lambda: df.select(fit(by="g", device="cpu", n_jobs=1)).unnest("model").sort("g")),
    ]
    if polars_gbt.cuda_available():
        configs.append(("group_by().agg(), GPU", lambda: df.group_by("g").agg(fit(device="cuda")).sort("g")))
        configs.append(("by=, GPU", lambda: df.select(fit(by="g", device="cuda")).unnest("model").sort("g")))
    if a.by_only:
        configs = [c for c in configs if c[0].startswith("by=") and (not a.gpu_only or "GPU" in c[0])]
    if a.child:
        configs = [("one thread", lambda: df.group_by("g").agg(fit(device="cpu", n_jobs=1)).sort("g"))]
    rows, trees = [], {}
    for label, run in configs:
        t = time.perf_counter()
        out = run()
        seconds = time.perf_counter() - t
        trees[label] = [polars_gbt.Model.from_bytes(m).trees_to_dataframe() for m in out.get_column(out.columns[1])]
        rows.append((label, seconds))
        if not a.child:
            print(rows[-1], flush=True)
    if a.child:
        pickle.dump((rows[0][1], trees["one thread"]), sys.stdout.buffer)
        return
    if a.by_only:
        first = rows[0][0]
        print(f"\n| configuration | seconds | over {first} | trees equal to its |\n|---|---|---|---|")
        for label, s in rows:
            same = all(x.equals(y) for x, y in zip(trees[label], trees[first]))
            print(f"| {label} | {s:.2f} | {rows[0][1] / s:.1f}x | {same} |")
        return
    env = dict(os.environ, POLARS_MAX_THREADS="1", RAYON_NUM_THREADS="1")
    args = [sys.executable, __file__, "--child", f"--groups={a.groups}", f"--rows={a.rows}", f"--trees={a.trees}"]
    base, base_trees = pickle.loads(subprocess.run(args, env=env, capture_output=True, check=True).stdout)
    print("\n| configuration | seconds | speed-up over one thread | trees equal to one thread's |\n|---|---|---|---|")
    print(f"| one thread | {base:.2f} | 1.0x | |")
    for label, s in rows:
        same = all(x.equals(y) for x, y in zip(trees[label], base_trees))
        print(f"| {label} | {s:.2f} | {base / s:.1f}x | {same} |")


if __name__ == "__main__":
    main()
