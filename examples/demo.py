"""The main job: Higgs-like data in a Polars DataFrame, trained and scored through the
``gbt`` expressions, with time, accuracy and the device that ran it.

Run through ``bash scripts/demo.sh`` (which builds the package), or with the package
installed: ``python examples/demo.py [ROWS]``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

import polars_gbt

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from higgs_like import make  # noqa: E402


def auc(y: np.ndarray, p: np.ndarray) -> float:
    order = np.argsort(p, kind="mergesort")
    ranks = np.empty(len(p))
    ranks[order] = np.arange(1, len(p) + 1)
    pos = y > 0.5
    return float((ranks[pos].sum() - pos.sum() * (pos.sum() + 1) / 2) / (pos.sum() * (~pos).sum()))


def main() -> None:
    n_train = int(sys.argv[1]) if len(sys.argv) > 1 else 500_000
    n_test = n_train // 5
    t = time.perf_counter()
    X, y = make(n_train + n_test, seed=0)
    features = [f"f{i}" for i in range(X.shape[1])]
    df = pl.DataFrame({**{f: X[:, i] for i, f in enumerate(features)}, "label": y}).with_columns(
        pl.col(features).fill_nan(None)  # NaN and null are both missing; nulls are Polars' way
    )
    train, test = df.head(n_train), df.tail(n_test)
    print(f"generated {len(df):,} x {len(features)} Higgs-like rows in {time.perf_counter() - t:.2f} s")

    params = dict(objective="binary:logistic", n_estimators=100, max_depth=8, learning_rate=0.1, device="auto")
    t = time.perf_counter()
    model = train.select(pl.col(features).gbt.fit(pl.col("label"), **params)).item()
    train_s = time.perf_counter() - t

    t = time.perf_counter()
    scored = test.with_columns(p=pl.col(features).gbt.predict(model))
    predict_s = time.perf_counter() - t

    m = polars_gbt.Model.from_bytes(model)
    # device="auto" trains on the GPU when one is usable (the first fit also compiles the
    # kernels once, or reads them from the cache), else on the CPU.
    if polars_gbt.cuda_available():
        print("device:        cuda (the GPU)")
    else:
        from polars_gbt._internal import cuda_unavailable_reason

        print(f"device:        cpu (rayon, all cores; no GPU: {cuda_unavailable_reason()})")
    print(f"train:         {n_train:,} rows, {m.num_trees} trees of depth <= 8 in {train_s:.2f} s")
    print(f"predict:       {n_test:,} rows in {predict_s * 1e3:.1f} ms")
    print(f"test AUC:      {auc(scored['label'].to_numpy(), scored['p'].to_numpy()):.4f}")
    print(m.feature_importance("gain").head(5))


if __name__ == "__main__":
    main()
