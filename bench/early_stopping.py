"""A fit that watches a validation set and stops early, ours beside XGBoost's and LightGBM's on
the same data in the same run (issue 55's loop): Higgs-like rows (``higgs_like.make``), ``--rows``
to train, ``--valid`` to watch, 100k more to test; binary logistic, depth 8, eta 0.1, 256 bins,
early stopping after ``--patience`` rounds without improvement, at most ``--max-rounds``.

* ours: ``polars_gbt.train(train, eval_df=valid, ...)`` from Polars frames in host memory, after
  a warm-up fit (everything is timed: binning both sets, the rounds, the evaluation);
* XGBoost: ``xgb.train`` alone, hist; its ``QuantileDMatrix`` objects (the validation one with
  ``ref=`` the training one) are built beforehand and not timed;
* LightGBM: ``lgb.train`` alone; its ``Dataset`` objects (the validation one with
  ``reference=``) are constructed beforehand and not timed.

``--task ranking`` fits ``rank:ndcg`` instead, watching ``ndcg@10``: the same rows in queries of
``--query-rows`` (50) consecutive rows, graded relevance 0-4 from the rows' signal and noise.

Each library's fit is repeated ``--repeats`` times and the fastest kept. Ratios are ours over the
fastest peer. Prints a markdown table; asserts nothing.

Usage:
  .venv/bin/python bench/early_stopping.py [--rows 500000] [--valid 100000] [--metric logloss|auc]
      [--device cpu|cuda] [--threads 2] [--repeats 1] [--task binary|ranking] [--query-rows 50]
"""
from __future__ import annotations

import argparse
import datetime
import platform
import sys
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))
from higgs_like import make  # noqa: E402
from measure import auc, cpu_model, timed  # noqa: E402

TEST_ROWS = 100_000


def fastest(repeats: int, fit):
    """The fastest of ``repeats`` timed calls of ``fit``: (seconds, its result)."""
    best = None
    for _ in range(repeats):
        result, seconds = timed(fit)
        if best is None or seconds < best[0]:
            best = (seconds, result)
    return best


def relevance(X: np.ndarray, seed: int) -> np.ndarray:
    """Graded relevance 0-4 of Higgs-like rows: their signal plus noise, in five bands."""
    w = np.linspace(-1, 1, X.shape[1], dtype=np.float32)
    signal = np.nan_to_num(X) @ w * 0.5 + np.sin(X[:, 0] * X[:, 1])
    noisy = signal + np.random.default_rng(seed).normal(scale=0.7, size=len(X))
    return np.clip(np.floor(noisy + 2.5), 0, 4).astype(np.float32)


def mean_ndcg(y: np.ndarray, score: np.ndarray, group: int, k: int = 10) -> float:
    """Mean NDCG@k over queries of ``group`` consecutive rows (exponential gain)."""
    y, score = y.reshape(-1, group), score.reshape(-1, group)
    order = np.argsort(-score, axis=1, kind="stable")[:, :k]
    discount = 1 / np.log2(np.arange(2, k + 2))
    dcg = ((2 ** np.take_along_axis(y, order, axis=1) - 1) * discount).sum(axis=1)
    best = -np.sort(-y, axis=1)[:, :k]
    ideal = ((2**best - 1) * discount).sum(axis=1)
    return float(np.mean(np.where(ideal > 0, dcg / np.where(ideal > 0, ideal, 1), 1.0)))


def objective(a) -> dict:
    if a.task == "ranking":
        return dict(objective="rank:ndcg", eval_metric="ndcg@10")
    return dict(objective="binary:logistic", eval_metric=a.metric)


def run_ours(a, frames, X_test):
    import polars_gbt

    train, valid = frames
    params = dict(target="y", max_depth=a.depth, learning_rate=a.eta, max_bin=256,
                  early_stopping_rounds=a.patience, device=a.device, **objective(a))
    if a.task == "ranking":
        params["group"] = "qid"
    if a.threads:
        params["n_jobs"] = a.threads
    polars_gbt.train(train.head(20_000), eval_df=valid.head(5_000), **dict(params, n_estimators=5))
    seconds, model = fastest(a.repeats, lambda: polars_gbt.train(train, eval_df=valid, n_estimators=a.max_rounds,
                                                                 **params))
    test = pl.DataFrame(X_test, schema=train.columns[:28])
    score = model.predict(test).to_numpy()
    return "polars-gbt", seconds, model.best_iteration, score


def run_xgboost(a, data, X_test):
    import xgboost as xgb

    X, y, Xv, yv = data
    params = dict(tree_method="hist", max_depth=a.depth, eta=a.eta, max_bin=256, device=a.device, **objective(a))
    if a.threads:
        params["nthread"] = a.threads
    qid = (lambda n: np.arange(n) // a.query_rows) if a.task == "ranking" else (lambda n: None)  # noqa: E731
    dtrain = xgb.QuantileDMatrix(X, y, max_bin=256, qid=qid(len(X)))
    dvalid = xgb.QuantileDMatrix(Xv, yv, ref=dtrain, qid=qid(len(Xv)))
    xgb.train(params, dtrain, 5)

    def fit():
        return xgb.train(params, dtrain, a.max_rounds, evals=[(dvalid, "valid")],
                         early_stopping_rounds=a.patience, verbose_eval=False)

    seconds, booster = fastest(a.repeats, fit)
    score = booster.predict(xgb.DMatrix(X_test), iteration_range=(0, booster.best_iteration + 1))
    return f"xgboost {xgb.__version__}", seconds, booster.best_iteration, score


def run_lightgbm(a, data, X_test):
    import lightgbm as lgb

    X, y, Xv, yv = data
    params = dict(objective="binary", max_depth=a.depth, num_leaves=2**a.depth, learning_rate=a.eta, max_bin=255,
                  metric="binary_logloss" if a.metric == "logloss" else "auc", verbose=-1,
                  min_data_in_leaf=1, min_sum_hessian_in_leaf=1.0, lambda_l2=1.0)
    if a.threads:
        params["num_threads"] = a.threads
    dtrain = lgb.Dataset(X, y, params=params, free_raw_data=False).construct()
    dvalid = lgb.Dataset(Xv, yv, reference=dtrain, params=params, free_raw_data=False).construct()
    lgb.train(params, dtrain, 5)

    def fit():
        return lgb.train(params, dtrain, a.max_rounds, valid_sets=[dvalid],
                         callbacks=[lgb.early_stopping(a.patience, verbose=False)])

    seconds, booster = fastest(a.repeats, fit)
    score = booster.predict(X_test, num_iteration=booster.best_iteration)
    # LightGBM counts iterations from 1; the others' best round is 0-based.
    return f"lightgbm {lgb.__version__}", seconds, booster.best_iteration - 1, score


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=500_000)
    ap.add_argument("--valid", type=int, default=100_000)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--eta", type=float, default=0.1)
    ap.add_argument("--metric", choices=["logloss", "auc"], default="logloss")
    ap.add_argument("--patience", type=int, default=20)
    ap.add_argument("--max-rounds", type=int, default=2000)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--threads", type=int, default=0, help="threads for every library (0: all cores)")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--skip-lgb", action="store_true", help="LightGBM has no CUDA fit here: skip it on the GPU")
    ap.add_argument("--task", choices=["binary", "ranking"], default="binary")
    ap.add_argument("--query-rows", type=int, default=50, help="rows a query (--task ranking)")
    a = ap.parse_args()
    if a.task == "ranking":
        a.skip_lgb = True  # its lambdarank takes groups differently; not compared here

    X, y = make(a.rows + a.valid + TEST_ROWS, seed=0)
    if a.task == "ranking":
        y = relevance(X, seed=1)
    n, v = a.rows, a.rows + a.valid
    cols = [f"f{i}" for i in range(X.shape[1])]

    def frame(lo: int, hi: int) -> pl.DataFrame:
        df = pl.DataFrame(X[lo:hi], schema=cols).with_columns(y=pl.Series(y[lo:hi]))
        return df.with_columns(qid=pl.int_range(hi - lo) // a.query_rows) if a.task == "ranking" else df

    frames = (frame(0, n), frame(n, v))
    data = (X[:n], y[:n], X[n:v], y[n:v])
    X_test, y_test = X[v:], y[v:]

    print(f"# command: python bench/early_stopping.py {' '.join(sys.argv[1:])}")
    print(f"# date: {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}")
    print(f"# machine: {cpu_model()}, python {platform.python_version()}, polars {pl.__version__}")
    watched = "rank:ndcg, ndcg@10, queries of %d rows" % a.query_rows if a.task == "ranking" else a.metric
    print(f"# data: Higgs-like {a.rows:,} train, {a.valid:,} valid, {TEST_ROWS:,} test x 28; d{a.depth}, eta {a.eta}, "
          f"{watched}, early stopping {a.patience}, at most {a.max_rounds} rounds, {a.device}, threads "
          f"{a.threads or 'all'}")
    rows = [run_ours(a, frames, X_test), run_xgboost(a, data, X_test)]
    if not a.skip_lgb:
        rows.append(run_lightgbm(a, data, X_test))
    peers = min(seconds for _, seconds, _, _ in rows[1:])
    quality = "test NDCG@10" if a.task == "ranking" else "test AUC"
    print(f"\n| library | fit s | best round | {quality} | fit / fastest peer |")
    print("|---|---:|---:|---:|---:|")
    for name, seconds, best, score in rows:
        score = np.asarray(score)
        q = mean_ndcg(y_test, score, a.query_rows) if a.task == "ranking" else auc(y_test, score)
        print(f"| {name} | {seconds:.2f} | {best} | {q:.4f} | {seconds / peers:.2f} |")


if __name__ == "__main__":
    main()
