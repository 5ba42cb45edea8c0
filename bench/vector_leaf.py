"""Vector-leaf trees on the CPU or the GPU (issue 38, item 2): ours against XGBoost's
`multi_strategy="multi_output_tree"` on the same data, and each library's
`one_output_per_tree` beside it. Two shapes: several targets (regression, 3 targets) and
multiclass (`multi:softprob`, 5 classes). Rows x 20 float32 features, a test set of a quarter
as many rows; depth 6, eta 0.1, 256 bins, every core; each fit timed `repeats` times after a
small warm-up fit, the fastest kept (this machine is shared). Prints a Markdown table (fit
seconds, test RMSE or multiclass log loss).

On the GPU (`cuda`) both train there: ours from the Polars frame in host memory (ingest
included), XGBoost's `xgb.train` alone from a QuantileDMatrix built beforehand from cupy arrays
(its data already on the GPU).

Usage: .venv-xgb34/bin/python bench/vector_leaf.py [rows] [rounds] [repeats] [cpu|cuda]
       (default 100000 100 3 cpu; or .venv/bin/python for XGBoost 3.2)
Asserts nothing.
"""
import sys
import time

import numpy as np
import polars as pl
import xgboost as xgb

import polars_gbt

n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 100
repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 3
device = sys.argv[4] if len(sys.argv) > 4 else "cpu"
nf = 20
rng = np.random.default_rng(0)


def features(rows: int) -> np.ndarray:
    return rng.normal(size=(rows, nf)).astype(np.float32)


def targets(X: np.ndarray) -> np.ndarray:
    noise = rng.normal(scale=0.3, size=(len(X), 3))
    return np.stack(
        [X[:, 0] + np.sin(X[:, 1]) + X[:, 2] * X[:, 3], X[:, 0] - X[:, 4] ** 2 + X[:, 5], np.tanh(X[:, 6] + X[:, 0])], 1
    ) + noise


def classes(X: np.ndarray) -> np.ndarray:
    score = X[:, 0] + X[:, 1] * X[:, 2] + 0.5 * rng.normal(size=len(X))
    return np.digitize(score, np.quantile(score, [0.2, 0.4, 0.6, 0.8])).astype(np.float32)


feats = [f"f{j}" for j in range(nf)]
common = dict(max_depth=6, learning_rate=0.1, max_bin=256, device=device)


def xgb_matrix(X: np.ndarray, y: np.ndarray) -> xgb.DMatrix:
    if device == "cpu":
        return xgb.DMatrix(X, label=y)
    import cupy as cp

    return xgb.QuantileDMatrix(cp.asarray(X), label=cp.asarray(y), max_bin=256)


rows = []
for task in ["3 targets", "5 classes"]:
    X, Xt = features(n), features(n // 4)
    y, yt = (targets(X), targets(Xt)) if task == "3 targets" else (classes(X), classes(Xt))
    obj = dict(objective="reg:squarederror") if task == "3 targets" else dict(objective="multi:softprob", num_class=5)
    df = pl.DataFrame({f: X[:, j] for j, f in enumerate(feats)})
    dft = pl.DataFrame({f: Xt[:, j] for j, f in enumerate(feats)})
    names = [f"y{t}" for t in range(3)] if y.ndim == 2 else ["y"]
    df = df.with_columns(pl.Series(c, y[:, i] if y.ndim == 2 else y) for i, c in enumerate(names))
    target = names if y.ndim == 2 else "y"

    def score(p: np.ndarray) -> float:
        if y.ndim == 2:
            return float(np.sqrt(((p - yt) ** 2).mean()))
        p = np.clip(p, 1e-15, 1)
        return float(-np.log(p[np.arange(len(yt)), yt.astype(int)]).mean())

    for strategy in ["multi_output_tree", "one_output_per_tree"]:
        # XGBoost
        dm, dmt = xgb_matrix(X, y), xgb.DMatrix(Xt)
        params = dict(obj, tree_method="hist", multi_strategy=strategy, max_depth=6, eta=0.1, max_bin=256, device=device)
        xgb.train(params, xgb_matrix(X[:2000], y[:2000]), 2)
        xgb_time = float("inf")
        for _ in range(repeats):
            t = time.perf_counter()
            b = xgb.train(params, dm, rounds)
            xgb_time = min(xgb_time, time.perf_counter() - t)
        b.set_param({"device": "cpu"})
        xgb_score = score(b.predict(dmt))
        # ours
        ours_params = dict(obj, multi_strategy=strategy, n_estimators=rounds, **common)
        polars_gbt.train(df.head(2000), target=target, features=feats, **dict(ours_params, n_estimators=2))
        ours_time = float("inf")
        for _ in range(repeats):
            t = time.perf_counter()
            m = polars_gbt.train(df, target=target, features=feats, **ours_params)
            ours_time = min(ours_time, time.perf_counter() - t)
        ours_score = score(np.asarray(m.predict(dft).to_list()))
        metric = "RMSE" if y.ndim == 2 else "log loss"
        rows.append(f"| {task} | {strategy} | {ours_time:.2f} | {xgb_time:.2f} | {ours_score:.4f} | {xgb_score:.4f} | {metric} |")

print(f"{n} rows x {nf} features, {rounds} rounds, depth 6, eta 0.1, best of {repeats}, {device}; XGBoost {xgb.__version__}")
print("| task | multi_strategy | ours (s) | XGBoost (s) | ours (test) | XGBoost (test) | metric |")
print("|---|---|---|---|---|---|---|")
print("\n".join(rows))
