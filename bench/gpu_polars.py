"""End to end on the GPU through Polars: a DataFrame in host memory to a trained model.

Higgs-like data (``higgs_like.make(11_000_000, seed=0)``: 10M rows train, 1M test) in a Polars
DataFrame of 28 float32 columns; ``pl.col(features).gbt.fit("y", device="cuda", ...)`` with
binary logistic loss, 500 rounds, depth 8, 256 bins, eta 0.1. Times:

* the CUDA runtime's start (context, kernels read from the cache or compiled), once per process;
* the fit: Arrow columns to the device, cut points, binning and 500 trees;
* a second fit in the same process (the runtime already started);
* a ``group_by`` of 20 groups fitted on the GPU (they take turns on it) against the same on
  the CPU;
and the test AUC (scored on the CPU; bench/predict_bench.py times GPU prediction).

Usage (device machine): PYTHONPATH=.peers/site:.peers/ours python3 bench/gpu_polars.py
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import polars as pl
from sklearn.metrics import roc_auc_score

sys.path.insert(0, str(Path(__file__).resolve().parent))
from higgs_like import make  # noqa: E402

import polars_gbt  # noqa: E402

ROWS, TEST, ROUNDS = 10_000_000, 1_000_000, 500
PARAMS = dict(objective="binary:logistic", n_estimators=ROUNDS, max_depth=8, learning_rate=0.1, max_bin=256)


def main():
    X, y = make(ROWS + TEST, seed=0)
    features = [f"f{j}" for j in range(X.shape[1])]
    df = pl.DataFrame({name: X[:, j] for j, name in enumerate(features)} | {"y": y})
    train, test = df.head(ROWS), df.tail(TEST)
    del X

    t = time.perf_counter()
    assert polars_gbt.cuda_available(), "no usable GPU"
    runtime_s = time.perf_counter() - t

    rows = []
    for label in ("first fit", "second fit"):
        t = time.perf_counter()
        model = train.select(pl.col(features).gbt.fit("y", device="cuda", **PARAMS)).item()
        fit_s = time.perf_counter() - t
        p = test.select(pl.col(features).gbt.predict(model))["f0"].to_numpy()
        rows.append((label, fit_s, roc_auc_score(test["y"].to_numpy(), p)))

    small = train.head(2_000_000).with_columns(g=pl.int_range(pl.len()) % 20)
    group_params = dict(PARAMS, n_estimators=100, max_depth=6)
    group_s = {}
    for device in ("cuda", "cpu"):
        t = time.perf_counter()
        fits = small.group_by("g").agg(pl.col(features).gbt.fit("y", device=device, **group_params).alias("m"))
        group_s[device] = time.perf_counter() - t
        assert fits.height == 20

    print(f"CUDA runtime start (once per process): {runtime_s:.2f} s")
    print()
    print("| fit (Polars DataFrame, 10M x 28, 500 trees, depth 8) | seconds | AUC |")
    print("|---|---|---|")
    for label, s, auc in rows:
        print(f"| {label} | {s:.2f} | {auc:.4f} |")
    print()
    print("| group_by of 20 groups x 100k rows, 100 trees, depth 6 | seconds |")
    print("|---|---|")
    for device, s in group_s.items():
        print(f"| device={device} | {s:.2f} |")


if __name__ == "__main__":
    main()
