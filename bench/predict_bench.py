"""GPU prediction: polars-gbt against XGBoost's GPU `inplace_predict` on the same models and the
same rows, in one run. The models are trained by XGBoost on the GPU, saved as JSON, and
imported by polars-gbt (`Model.from_xgboost`), so both score identical trees.

On the device machine, after staging XGBoost (../shared/device/stage-peers.sh xgboost):
    PYTHONPATH=.peers/site python3 bench/predict_bench.py --ours .gpu/bench_predict [--rows N]
(--ours again with another build adds its rows: builds are compared within one run.)
Prints a table of milliseconds and ratios (ours / XGBoost); see docs/benchmarks.md.
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

CASES = [("500 trees, depth 8", 500, 8), ("500 trees, depth 6", 500, 6), ("200 trees, depth 10", 200, 10)]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--ours", required=True, action="append", help="our bench_predict binary (repeat to compare builds)")
    p.add_argument("--rows", type=int, default=4_000_000)
    p.add_argument("--train-rows", type=int, default=1_000_000)
    p.add_argument("--keep", help="directory to keep the XGBoost model files in (for predict_polars.py)")
    p.add_argument("--variant", action="append", default=[], help="KEY=VAL[,KEY=VAL] environment for ours (tuning)")
    args = p.parse_args()
    import cupy as cp
    import xgboost as xgb

    X, y = make(args.rows + args.train_rows, seed=0)
    X_train, y_train, X_test = X[: args.train_rows], y[: args.train_rows], np.ascontiguousarray(X[args.train_rows :])
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp())
    work.mkdir(parents=True, exist_ok=True)
    x_file = work / "X.f32"
    np.asfortranarray(X_test).T.tofile(x_file)  # column-major, as Arrow columns are
    dtrain = xgb.QuantileDMatrix(X_train, label=y_train)
    X_gpu = cp.asarray(X_test)
    rows = []
    for name, rounds, depth in CASES:
        params = dict(objective="binary:logistic", tree_method="hist", device="cuda", max_depth=depth, eta=0.1, max_bin=256)
        booster = xgb.train(params, dtrain, rounds)
        path = work / f"model_{depth}.json"
        booster.save_model(path)
        booster.set_param({"device": "cuda"})
        for _ in range(3):
            booster.inplace_predict(X_gpu)
        cp.cuda.Device().synchronize()
        times = []
        for _ in range(10):
            t = time.perf_counter()
            booster.inplace_predict(X_gpu)
            cp.cuda.Device().synchronize()
            times.append((time.perf_counter() - t) * 1e3)
        xgb_ms = float(np.median(times))
        del booster
        for binary, variant in [(b, v) for b in args.ours for v in args.variant or [""]]:
            env = dict(os.environ, **dict(kv.split("=", 1) for kv in variant.split(",") if kv))
            out = subprocess.run(
                [binary, str(path), str(x_file), str(args.rows), str(X.shape[1])], capture_output=True, text=True, env=env
            )
            if out.returncode != 0:
                sys.exit(f"{binary} failed on {name}:\n{out.stderr}")
            # Under POLARS_GBT_PROFILE=1, the host path's stages (fill, queue, wait) per call.
            for line in out.stderr.splitlines():
                if "profile: scoring" in line:
                    print(f"{name} {variant}: {line}", flush=True)
            ours = json.loads(out.stdout.strip().splitlines()[-1])
            build = Path(binary).name if len(args.ours) > 1 else ""
            label = f"{name} {build} {variant}".strip()
            rows.append((label, xgb_ms, ours))
            print(f"{label}: {ours['forest']}", flush=True)
    print()
    print(f"{args.rows:,} rows x {X.shape[1]} features, binary:logistic, XGBoost {xgb.__version__} models (trained on {args.train_rows:,} rows)")
    print("| model | XGBoost inplace_predict, GPU data | ours, GPU data | ratio | ours from host memory | ours CPU | max |GPU-CPU| |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, xgb_ms, o in rows:
        print(
            f"| {name} | {xgb_ms:.1f} ms | {o['device_ms']:.1f} ms | {o['device_ms'] / xgb_ms:.2f} | "
            f"{o['host_ms']:.1f} ms | {o['cpu_ms']:.0f} ms | {max(o['max_abs_diff_device_vs_cpu'], o['max_abs_diff_host_vs_cpu']):.1e} |"
        )


if __name__ == "__main__":
    main()
