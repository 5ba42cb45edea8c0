"""GPU scoring through Polars: `pl.col(features).gbt.predict(model, device=...)` on a 4M-row
DataFrame of 28 float32 columns (Higgs-like), eager and through the streaming engine, GPU
against CPU, for XGBoost models imported with `Model.from_xgboost` (the files
bench/predict_bench.py saved with --keep DIR).

Usage (device machine): PYTHONPATH=.peers/site:.peers/ours python3 bench/predict_polars.py DIR
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))
from higgs_like import make  # noqa: E402

import polars_gbt  # noqa: E402


def timed(f, reps=5):
    f()  # warm-up: model upload, first batch
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        out = f()
        times.append((time.perf_counter() - t) * 1e3)
    return float(np.median(times)), out


def main() -> None:
    models = sorted(Path(sys.argv[1]).glob("model_*.json"))
    X, _ = make(5_000_000, seed=0)
    X = X[1_000_000:]
    feats = [f"f{i}" for i in range(X.shape[1])]
    df = pl.DataFrame({f: X[:, i] for i, f in enumerate(feats)})
    print(f"{df.height:,} rows x {len(feats)} float32 columns; Polars {pl.__version__}; median of 5 after a warm-up")
    print("| model | eager, GPU | streaming, GPU | eager, CPU | streaming, CPU | max |GPU-CPU| |")
    print("|---|---:|---:|---:|---:|---:|")
    for path in models:
        model = polars_gbt.Model.from_xgboost(path)
        row = []
        outs = {}
        for device in ("cuda", "cpu"):
            expr = pl.col(feats).gbt.predict(model, device=device)
            eager_ms, outs[device] = timed(lambda: df.select(expr).to_series())
            stream_ms, _ = timed(lambda: df.lazy().select(expr).collect(engine="streaming").to_series())
            row += [eager_ms, stream_ms]
        diff = float(np.max(np.abs(outs["cuda"].to_numpy() - outs["cpu"].to_numpy())))
        depth = path.stem.split("_")[1]
        print(f"| {model.num_trees} trees, depth {depth} | {row[0]:.0f} ms | {row[1]:.0f} ms | {row[2]:.0f} ms | {row[3]:.0f} ms | {diff:.1e} |")


if __name__ == "__main__":
    main()
