"""Loss-guided regression over data sizes and seeds: ours against XGBoost's CPU ``hist``.

The GPU shapes benchmark's loss-guided case (``gpu_shapes.py lossguide``: Higgs-like rows,
y = x0 x1 + sin(3 x2) + |x3| x4 + noise, 255 leaves, no depth limit) showed our test RMSE
0.024 above XGBoost's at 2M rows. This script asks whether that is the data size, the seed,
or the library: for each (rows, seed) it fits both on the CPU with the same settings and
prints their test RMSE on the 10% of rows held out.

    .venv/bin/python bench/lossguide_seeds.py --rows 1000000 2000000 --seeds 0 1 2 --rounds 100

A benchmark, not a test: it asserts nothing.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl
import xgboost as xgb

import polars_gbt as pg

sys.path.insert(0, str(Path(__file__).parent))
from higgs_like import make  # noqa: E402


def data(rows: int, seed: int):
    """The gpu_shapes loss-guided case's rows: make(rows * 1.1, seed), the last 10% held out."""
    X, _ = make(int(rows * 1.1), 28, seed=seed)
    Z = np.nan_to_num(X)
    noise = np.random.default_rng(6).normal(size=len(X))
    y = (Z[:, 0] * Z[:, 1] + np.sin(3 * Z[:, 2]) + np.abs(Z[:, 3]) * Z[:, 4] + 0.3 * noise).astype(np.float32)
    return X, y


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 2_000_000])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    grow = dict(grow_policy="lossguide", max_leaves=255, max_depth=0)
    print(f"settings: reg:squarederror, {a.rounds} rounds, eta 0.1, 256 bins, {grow}, {a.threads} threads, CPU")
    print("| rows | seed | ours RMSE | XGBoost RMSE | ours s | XGBoost s |")
    print("|---|---|---|---|---|---|")
    features = [f"f{j}" for j in range(28)]
    for rows in a.rows:
        for seed in a.seeds:
            X, y = data(rows, seed)
            train = pl.DataFrame({f: X[:rows, j] for j, f in enumerate(features)}).fill_nan(None)
            test = pl.DataFrame({f: X[rows:, j] for j, f in enumerate(features)}).fill_nan(None)

            def rmse(pred) -> float:
                return float(np.sqrt(np.mean((np.asarray(pred).reshape(-1) - y[rows:]) ** 2)))

            t = time.perf_counter()
            model = pg.train(train.with_columns(y=y[:rows]), target="y", features=features,
                             n_estimators=a.rounds, learning_rate=0.1, max_bin=256,
                             objective="reg:squarederror", n_jobs=a.threads, **grow)
            ours_s = time.perf_counter() - t
            ours = rmse(model.predict(test))
            dtrain = xgb.QuantileDMatrix(X[:rows], y[:rows], max_bin=256)
            t = time.perf_counter()
            booster = xgb.train(dict(eta=0.1, max_bin=256, objective="reg:squarederror", nthread=a.threads,
                                     tree_method="hist", **grow), dtrain, a.rounds)
            xgb_s = time.perf_counter() - t
            theirs = rmse(booster.inplace_predict(X[rows:]))
            print(f"| {rows:,} | {seed} | {ours:.4f} | {theirs:.4f} | {ours_s:.1f} | {xgb_s:.1f} |", flush=True)


if __name__ == "__main__":
    main()
