"""GPU SHAP values: polars-gbt against XGBoost's GPU `pred_contribs` on the same models and the
same rows, in one run. The models are trained by XGBoost on the GPU, saved as JSON and imported
by polars-gbt, so both explain identical trees; our values are checked against XGBoost's.

On the device machine, after staging XGBoost (../shared/device/stage-peers.sh xgboost):
    PYTHONPATH=.peers/site python3 bench/shap_bench.py --ours .gpu/bench_shap [--rows N]
Prints a table of milliseconds and ratios (ours / XGBoost); see docs/benchmarks.md.

XGBoost is timed on `Booster.predict(DMatrix, pred_contribs=True)` with the DMatrix built from
a cupy array beforehand (its input already on the GPU, its output copied to host memory);
ours from float32 columns in host memory to values in host memory, copies included.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from higgs_like import make  # noqa: E402

CASES = [("500 trees, depth 8", 500, 8), ("500 trees, depth 6", 500, 6), ("100 trees, depth 10", 100, 10)]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--ours", required=True, help="our bench_shap binary")
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--train-rows", type=int, default=500_000)
    p.add_argument("--interaction-rows", type=int, default=2_000)
    p.add_argument("--variant", action="append", default=[], help="KEY=VAL[,KEY=VAL] environment for ours (tuning)")
    p.add_argument("--cases", type=int, nargs="*", help="which of the cases to run (0-based; default all)")
    args = p.parse_args()
    import cupy as cp
    import xgboost as xgb

    X, y = make(args.rows + args.train_rows, seed=0)
    X[np.random.default_rng(1).random(size=X.shape) < 0.05] = np.nan  # missing values, their default directions
    X_train, y_train, X_test = X[: args.train_rows], y[: args.train_rows], np.ascontiguousarray(X[args.train_rows :])
    work = Path(tempfile.mkdtemp())
    x_file = work / "X.f32"
    np.asfortranarray(X_test).T.tofile(x_file)  # column-major, as Arrow columns are
    dtrain = xgb.QuantileDMatrix(X_train, label=y_train)
    dtest = xgb.DMatrix(cp.asarray(X_test))
    dinter = xgb.DMatrix(cp.asarray(X_test[: args.interaction_rows]))
    rows = []
    for name, rounds, depth in [CASES[i] for i in (args.cases if args.cases is not None else range(len(CASES)))]:
        params = dict(objective="binary:logistic", tree_method="hist", device="cuda", max_depth=depth, eta=0.1, max_bin=256)
        booster = xgb.train(params, dtrain, rounds)
        path = work / f"model_{depth}.json"
        booster.save_model(path)
        timed = {}
        for what, dm, kw in [("contrib", dtest, dict(pred_contribs=True)), ("interaction", dinter, dict(pred_interactions=True))]:
            values = booster.predict(dm, **kw)  # warm-up
            times = []
            for _ in range(3):
                t = time.perf_counter()
                values = booster.predict(dm, **kw)
                cp.cuda.Device().synchronize()
                times.append((time.perf_counter() - t) * 1e3)
            timed[what] = float(np.median(times))
            if what == "contrib":
                theirs = work / "contribs.f32"
                values.astype(np.float32).tofile(theirs)
        print(f"{name}: XGBoost {json.dumps(timed)}", flush=True)
        del booster
        for variant in args.variant or [""]:
            env = dict(os.environ, **dict(kv.split("=", 1) for kv in variant.split(",") if kv))
            cmd = [args.ours, str(path), str(x_file), str(args.rows), str(X.shape[1]), str(theirs), str(args.interaction_rows)]
            out = subprocess.run(cmd, capture_output=True, text=True, env=env)
            if out.returncode != 0:
                sys.exit(f"{args.ours} failed on {name}:\n{out.stderr}")
            ours = json.loads(out.stdout.strip().splitlines()[-1])
            label = f"{name} {variant}".strip()
            rows.append((label, timed, ours))
            print(f"{label}: {json.dumps(ours)}", flush=True)
    print()
    print(f"{args.rows:,} rows x {X.shape[1]} features (5% missing), binary:logistic, XGBoost {xgb.__version__} models "
          f"(trained on {args.train_rows:,} rows); interactions on the first {args.interaction_rows:,} rows")
    print("| model | XGBoost contribs ms | ours ms | ours / XGBoost | XGBoost interactions ms | ours ms | ours / XGBoost | "
          "max rel. diff vs XGBoost |")
    print("|---|---|---|---|---|---|---|---|")
    for label, t, o in rows:
        print(f"| {label} | {t['contrib']:.1f} | {o['host_ms']:.1f} | {o['host_ms'] / t['contrib']:.2f} | "
              f"{t['interaction']:.1f} | {o['interaction_ms']:.1f} | {o['interaction_ms'] / t['interaction']:.2f} | "
              f"{o['max_rel_diff_vs_xgboost']:.1e} |")


if __name__ == "__main__":
    main()
