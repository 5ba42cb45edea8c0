"""GPU scoring through Polars: `pl.col(features).gbt.predict(model, device=...)` on a 4M-row
DataFrame of 28 float32 columns (Higgs-like), eager and through the streaming engine, GPU
against CPU, for XGBoost models imported with `Model.from_xgboost` (the files
bench/predict_bench.py saved with --keep DIR), or, with --train, for our own model of 500
trees of depth 8 fit here on 1M other rows (no XGBoost needed).

Usage (device machine): PYTHONPATH=.peers/site:.peers/ours python3 bench/predict_polars.py DIR
                    or: PYTHONPATH=.peers/site:.peers/ours python3 bench/predict_polars.py --train [--gpu-only]
(--train keeps its model in .gpu/predict_polars_model.plgbt for the next call on a warm machine.)
The last row times Polars alone on the same frame, an elementwise sum of the 28 columns (one
float column out, as scoring gives), eager and streaming: what the engine's morsels cost
without us.
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
    X, y = make(5_000_000, seed=0)
    feats = [f"f{i}" for i in range(X.shape[1])]
    gpu_only = "--gpu-only" in sys.argv
    if sys.argv[1] == "--train":
        saved = Path(".gpu/predict_polars_model.plgbt")  # kept between calls on a warm machine
        if saved.exists():
            model = polars_gbt.Model.load(saved)
        else:
            train = pl.DataFrame({f: X[:1_000_000, i] for i, f in enumerate(feats)}).with_columns(y=y[:1_000_000])
            fit = pl.col(feats).gbt.fit("y", objective="binary:logistic", n_estimators=500, max_depth=8, device="auto")
            model = polars_gbt.Model.from_bytes(train.select(fit).item())
            saved.parent.mkdir(exist_ok=True)
            model.save(saved)
        models = [("ours, depth 8", model)]
    else:
        models = [(f"depth {p.stem.split('_')[1]}", polars_gbt.Model.from_xgboost(p))
                  for p in sorted(Path(sys.argv[1]).glob("model_*.json"))]
    X = X[1_000_000:]
    df = pl.DataFrame({f: X[:, i] for i, f in enumerate(feats)})
    print(f"{df.height:,} rows x {len(feats)} float32 columns; Polars {pl.__version__}; median of 5 after a warm-up")
    print("| model | eager, GPU | streaming, GPU | eager, CPU | streaming, CPU | max |GPU-CPU| |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, model in models:
        row = []
        outs = {}
        for device in ("cuda",) if gpu_only else ("cuda", "cpu"):
            expr = pl.col(feats).gbt.predict(model, device=device)
            eager_ms, outs[device] = timed(lambda: df.select(expr).to_series())
            stream_ms, _ = timed(lambda: df.lazy().select(expr).collect(engine="streaming").to_series())
            row += [eager_ms, stream_ms]
        if gpu_only:
            print(f"| {model.num_trees} trees, {label} | {row[0]:.1f} ms | {row[1]:.1f} ms | | | |")
            continue
        diff = float(np.max(np.abs(outs["cuda"].to_numpy() - outs["cpu"].to_numpy())))
        print(f"| {model.num_trees} trees, {label} | {row[0]:.0f} ms | {row[1]:.0f} ms | {row[2]:.0f} ms | {row[3]:.0f} ms | {diff:.1e} |")
    floor = pl.sum_horizontal(feats)
    eager_ms, _ = timed(lambda: df.select(floor).to_series())
    stream_ms, _ = timed(lambda: df.lazy().select(floor).collect(engine="streaming").to_series())
    print(f"\nPolars alone, the sum of the 28 columns: eager {eager_ms:.1f} ms, streaming {stream_ms:.1f} ms")


if __name__ == "__main__":
    main()
