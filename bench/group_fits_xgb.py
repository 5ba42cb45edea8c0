"""The contrast for bench/group_fits.py: the same groups fit by a loop of XGBoost GPU fits, as a
user without a group-aware trainer would write it (one `xgb.train` per group, its
`QuantileDMatrix` built in the loop and counted; 256 bins, depth 6, binary logistic, the
same trees per group as ours). The first group is fit once before timing (CUDA start-up).

Usage (device machine, XGBoost staged): python3 bench/group_fits_xgb.py [--groups 200] [--rows 1500]
Prints one line; asserts nothing.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from higgs_like import make  # noqa: E402

import xgboost as xgb  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--groups", type=int, default=200)
    ap.add_argument("--rows", type=int, default=1500)
    ap.add_argument("--trees", type=int, default=50)
    a = ap.parse_args()
    X, y = make(a.groups * a.rows, seed=0)
    params = dict(objective="binary:logistic", max_depth=6, eta=0.3, max_bin=256, tree_method="hist", device="cuda")

    def fit(g: int) -> xgb.Booster:
        rows = slice(g * a.rows, (g + 1) * a.rows)
        return xgb.train(params, xgb.QuantileDMatrix(X[rows], y[rows], max_bin=256), num_boost_round=a.trees)

    fit(0)
    t = time.perf_counter()
    for g in range(a.groups):
        fit(g)
    s = time.perf_counter() - t
    print(f"XGBoost {xgb.__version__}, a loop of GPU fits: {a.groups} groups x {a.rows} rows, {a.trees} trees of "
          f"depth 6: {s:.2f} s ({s / a.groups * 1e3:.1f} ms a group)")


if __name__ == "__main__":
    main()
