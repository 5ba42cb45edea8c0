"""Peak resident memory of a CPU fit, ours against LightGBM and XGBoost, on the same data in
the same run: Higgs-like rows (`higgs_like.make`), 28 float32 columns. Each library runs in a
child process that builds the data, holds the input columns (our fit: a Polars DataFrame, as
a user has; the peers: the numpy array they train from), resets the kernel's high-water mark
(/proc/self/clear_refs) and reports VmHWM after its fit: the peak including the input.

Usage: python3 bench/memory_bench.py [--rows N] [--rounds R]    (children: --child LIB)
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def status(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)


def child(lib: str, rows: int, rounds: int) -> None:
    import numpy as np
    from higgs_like import make

    X, y = make(rows, seed=0)
    input_bytes = X.nbytes
    params = dict(depth=8, rounds=rounds)
    if lib == "ours":
        import polars as pl

        import polars_gbt

        df = pl.DataFrame({f"f{i}": X[:, i] for i in range(X.shape[1])}).with_columns(y=pl.Series(y))
        del X
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM
    before = status("VmRSS")
    t = time.perf_counter()
    if lib == "ours":
        polars_gbt.train(df, target="y", objective="binary:logistic", n_estimators=rounds, max_depth=8, device="cpu")
    elif lib == "lightgbm":
        import lightgbm as lgb

        lgb.train(dict(objective="binary", num_leaves=255, max_depth=8, max_bin=255, verbose=-1), lgb.Dataset(X, label=y), rounds)
    else:
        import xgboost as xgb

        xgb.train(dict(objective="binary:logistic", tree_method="hist", max_depth=8, max_bin=256), xgb.QuantileDMatrix(X, label=y), rounds)
    seconds = time.perf_counter() - t
    print(json.dumps(dict(lib=lib, input=input_bytes, before=before, peak=status("VmHWM"), seconds=seconds, **params)))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=20_000_000)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--child")
    p.add_argument("--libs", default="ours,lightgbm,xgboost")
    args = p.parse_args()
    if args.child:
        child(args.child, args.rows, args.rounds)
        return
    results = []
    for lib in args.libs.split(","):
        out = subprocess.run(
            [sys.executable, __file__, "--child", lib, "--rows", str(args.rows), "--rounds", str(args.rounds)],
            capture_output=True, text=True,
        )
        if out.returncode != 0:
            print(f"{lib} failed:\n{out.stderr[-2000:]}")
            continue
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
    gib = 2**30
    print(f"{args.rows:,} rows x 28 float32 columns ({results[0]['input'] / gib:.2f} GiB of input), {args.rounds} rounds of depth 8, CPU")
    print("| library | RSS holding the input | peak RSS during the fit | peak / input columns | fit seconds |")
    print("|---|---:|---:|---:|---:|")
    for r in results:
        print(f"| {r['lib']} | {r['before'] / gib:.2f} GiB | {r['peak'] / gib:.2f} GiB | {r['peak'] / r['input']:.2f} | {r['seconds']:.1f} |")


if __name__ == "__main__":
    main()
