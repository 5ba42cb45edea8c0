"""GPU scoring of data already on the GPU (issue 37, item 2): `Model.predict` on a cupy array
against XGBoost's `inplace_predict` on the same cupy array, for the same forests (trained by
XGBoost on the GPU, saved as JSON and imported with `Model.from_xgboost`, so both score
identical trees), 4M x 28 Higgs-like rows, depths 6-12 (the issue's table).

Usage (device machine, XGBoost staged with ../shared/device/stage-peers.sh xgboost, our wheel
installed with `pip install --no-deps --target .peers/ours WHEEL`):
    PYTHONPATH=.peers/site:.peers/ours python3 bench/predict_device.py [--rows N] [--order C|F]
Each time is the median of --reps calls after a warm-up, from the call to the result being on
the device (a device synchronisation after each call); `ours f64` scores the same rows as
float64. The scores are checked to agree (up to float rounding in the link: XGBoost applies
its own sigmoid) before they are timed. Prints a Markdown table for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from higgs_like import make  # noqa: E402

CASES = [("depth 6 x 1000", 1000, 6), ("depth 8 x 500", 500, 8), ("depth 10 x 200", 200, 10), ("depth 12 x 100", 100, 12)]


def timed(f, sync, reps: int) -> float:
    f()
    sync()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        sync()
        times.append((time.perf_counter() - t) * 1e3)
    return float(np.median(times))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=4_000_000)
    p.add_argument("--train-rows", type=int, default=1_000_000)
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--order", choices=["C", "F"], default="C", help="memory order of the cupy rows")
    p.add_argument("--cases", default="6,8,10,12", help="depths to run, of 6, 8, 10, 12")
    args = p.parse_args()
    import cupy as cp
    import xgboost as xgb

    import polars_gbt

    X, y = make(args.rows + args.train_rows, seed=0)
    X_train, y_train, X_test = X[: args.train_rows], y[: args.train_rows], X[args.train_rows :]
    rows32 = cp.asarray(np.asarray(X_test, dtype=np.float32), order=args.order)
    rows64 = rows32.astype(cp.float64, order=args.order)
    sync = cp.cuda.Device().synchronize
    dtrain = xgb.QuantileDMatrix(X_train, label=y_train)
    work = Path(tempfile.mkdtemp())
    depths = {int(d) for d in args.cases.split(",")}
    print(f"{args.rows:,} x {X.shape[1]} rows, {args.order} order, on {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}")
    print("| forest | ours, cupy f32 (ms) | ours, cupy f64 (ms) | XGBoost inplace_predict, cupy f32 (ms) | ours / XGBoost |")
    print("|---|---|---|---|---|")
    for name, rounds, depth in CASES:
        if depth not in depths:
            continue
        params = dict(objective="binary:logistic", tree_method="hist", device="cuda", max_depth=depth, eta=0.1, max_bin=256)
        booster = xgb.train(params, dtrain, rounds)
        path = work / f"model_{depth}.json"
        booster.save_model(path)
        model = polars_gbt.Model.from_xgboost(path)
        theirs = booster.inplace_predict(rows32)
        ours = model.predict(rows32)
        gap = float(cp.abs(ours - theirs).max())
        assert gap < 1e-5, f"{name}: scores differ by {gap}"
        t_ours = timed(lambda: model.predict(rows32), sync, args.reps)
        t_ours64 = timed(lambda: model.predict(rows64), sync, args.reps)
        t_xgb = timed(lambda: booster.inplace_predict(rows32), sync, args.reps)
        print(f"| {name} | {t_ours:.1f} | {t_ours64:.1f} | {t_xgb:.1f} | {t_ours / t_xgb:.2f} |", flush=True)


if __name__ == "__main__":
    main()
