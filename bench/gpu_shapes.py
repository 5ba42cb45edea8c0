"""GPU training on the shapes a DataFrame holds beyond dense floats, ours against XGBoost's GPU
``hist`` on the same data in the same run (issue 13). Every case: depth 8, 256 bins, eta 0.1.

* ``ranking``: ``rank:ndcg`` on 5M rows of 20 float32 features in 100k queries of uneven sizes
  (2 to 2,000 rows, about 50 on average), relevance 0..4; NDCG@10 on 20k (a fifth as many)
  held-out queries, computed here the same way for both.
* ``categorical``: binary, 2M rows of ten categorical columns (cardinalities 8 to 5,000, Polars
  ``Enum`` for us, codes with ``feature_types="c"`` for XGBoost) and ten floats; held-out AUC.
* ``categorical-wide``: the issue's shape, 10M rows of six categorical columns of 10 to 100,000
  categories and twenty floats; held-out AUC.
* ``nulls``: binary, 1M rows of 200 float columns, about 90% null (Polars nulls for us, NaN for
  XGBoost); held-out AUC. ``nulls-wide``: the issue's shape, 500 columns about 95% null
  (default 5M rows).
* ``libsvm``: XGBoost's agaricus LibSVM set (6,513 rows x 126 one-hot features, absent entries
  missing) tiled to 6.5M rows, a per-copy jitter on the label's noise-free structure; held-out
  AUC on the real test file, tiled as well. Needs ``--data DIR`` holding ``agaricus.txt.train``
  and ``agaricus.txt.test`` (../shared/data/xgboost/agaricus).
* ``dense``: the Higgs-like 10M x 28 (bench/higgs_like.py), depth 8, 500 rounds by default.
* ``multiclass``: 2M rows x 28 floats, 10 classes (``multi:softprob``); held-out mlogloss.
* ``lossguide``: regression on 2M rows x 28 floats, ``grow_policy="lossguide"``, 255 leaves,
  no depth limit; held-out RMSE.
* ``targets``: three regression targets (``reg:squarederror``, one tree per target a round) on
  2M rows of 20 float32 features, the targets depending on different features; held-out RMSE
  over the three.
* ``l1``: ``reg:absoluteerror``, 2M rows of 28 float32 features, heavy-tailed noise; held-out
  mean absolute error.
* ``quantiles``: ``reg:quantileerror`` at ``quantile_alpha=[0.1, 0.5, 0.9]`` (three outputs, three
  trees a round) on the same data; held-out pinball loss averaged over the quantiles.

Ours is timed from a Polars DataFrame in host memory to a trained model (``gbt.fit`` with
``device="cuda"``, the CUDA runtime started beforehand). XGBoost is timed on ``xgb.train``
alone, its ``QuantileDMatrix`` already built from host numpy ("ingest", reported apart).
GPU memory is NVML's peak above idle during each fit.

Usage (device machine, Polars and XGBoost packs and our wheel installed, see
docs/benchmarks.md): PYTHONPATH=.peers/site:.peers/ours python3 bench/gpu_shapes.py CASE (see --help)
Prints a markdown table; asserts nothing.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_bench import MemoryPoll as GpuMemoryPoll  # noqa: E402

import polars_gbt  # noqa: E402


class NoPoll:
    """Stands in for the GPU memory poll in CPU smoke runs."""

    above_idle = 0.0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def query_sizes(n_queries, total, rng, smallest=2, largest=2000):
    """Uneven query sizes summing to `total`: log-normal, clipped, then trimmed or padded."""
    raw = rng.lognormal(mean=np.log(total / n_queries) - 0.5, sigma=1.0, size=n_queries)
    sizes = np.clip(np.round(raw), smallest, largest).astype(np.int64)
    while sizes.sum() != total:
        diff = total - sizes.sum()
        idx = rng.integers(0, n_queries, size=min(abs(diff), n_queries))
        step = 1 if diff > 0 else -1
        ok = (sizes[idx] + step >= smallest) & (sizes[idx] + step <= largest)
        np.add.at(sizes, idx[ok], step)
    return sizes


def make_ranking(n_rows, n_queries, n_features, seed):
    rng = np.random.default_rng(seed)
    sizes = query_sizes(n_queries, n_rows, rng)
    qid = np.repeat(np.arange(n_queries, dtype=np.int64), sizes)
    X = rng.normal(size=(n_rows, n_features)).astype(np.float32)
    w = rng.normal(size=n_features)
    latent = X @ w / np.sqrt(n_features) + 0.6 * np.sin(2 * X[:, 0]) * X[:, 1] + 0.5 * (X[:, 2] > 0.5)
    latent += rng.normal(scale=0.5, size=n_queries)[qid] + rng.normal(scale=0.6, size=n_rows)
    y = np.digitize(latent, [-0.2, 0.6, 1.3, 2.0]).astype(np.float32)
    return X, y, qid


def ndcg_at(y, score, qid, k=10):
    """Mean NDCG@k over the queries with a relevant document (gain 2^y - 1)."""
    order = np.lexsort((-score, qid))
    ideal = np.lexsort((-y, qid))
    starts = np.flatnonzero(np.r_[True, qid[order][1:] != qid[order][:-1]])
    ends = np.r_[starts[1:], len(qid)]
    total, count = 0.0, 0
    disc = 1.0 / np.log2(np.arange(k) + 2.0)
    for s, e in zip(starts, ends):
        m = min(k, e - s)
        dcg = ((2.0 ** y[order[s:s + m]] - 1.0) * disc[:m]).sum()
        idcg = ((2.0 ** y[ideal[s:s + m]] - 1.0) * disc[:m]).sum()
        if idcg > 0:
            total += dcg / idcg
            count += 1
    return total / max(count, 1)


def run_both(a, train, features, target, fit_kwargs, test, xgb_data, xparams, x_test, metric, name):
    """Fits ours (from the Polars frame) and XGBoost (QuantileDMatrix from host numpy) `a.repeats`
    times each; prints one row per fit and the ratio of the medians."""
    rows = []
    MemoryPoll = GpuMemoryPoll if a.device != "cpu" else NoPoll
    if not a.skip_ours:
        assert a.device == "cpu" or polars_gbt.cuda_available(), "no usable GPU"
        for attempt in range(a.repeats):
            with MemoryPoll() as mem:
                t = time.perf_counter()
                model = train.select(pl.col(features).gbt.fit(target, device=a.device, **fit_kwargs)).item()
                fit_s = time.perf_counter() - t
            score = test.select(pl.col(features).gbt.predict(model, output="margin"))[features[0]].to_numpy()
            rows.append(("ours", attempt, fit_s, None, metric(score), mem.above_idle))
            print(rows[-1], flush=True)
    if not a.skip_xgb:
        import xgboost as xgb

        xparams = dict(xparams, tree_method="hist", device=a.device)
        X, y, extra = xgb_data
        for attempt in range(a.repeats):
            with MemoryPoll() as mem:
                t = time.perf_counter()
                dtrain = xgb.QuantileDMatrix(X, y, max_bin=fit_kwargs.get("max_bin", 256), **extra)
                ingest = time.perf_counter() - t
                t = time.perf_counter()
                booster = xgb.train(xparams, dtrain, fit_kwargs["n_estimators"])
                train_s = time.perf_counter() - t
            score = booster.inplace_predict(x_test, predict_type="margin")
            score = score.get() if hasattr(score, "get") else np.asarray(score)
            rows.append(("xgboost", attempt, train_s, ingest, metric(score), mem.above_idle))
            print(rows[-1], flush=True)
            del dtrain, booster

    print(f"\n| library | run | train s | ingest s | {name} | GPU MiB |\n|---|---|---|---|---|---|")
    for lib, run, s, ingest, value, mib in rows:
        print(f"| {lib} | {run} | {s:.2f} | {'' if ingest is None else f'{ingest:.2f}'} | {value:.4f} | {mib:.0f} |")
    ours = [r[2] for r in rows if r[0] == "ours"]
    theirs = [r[2] for r in rows if r[0] == "xgboost"]
    if ours and theirs:
        print(f"\nours / XGBoost (medians): {np.median(ours) / np.median(theirs):.3f}")


def ranking(a):
    t = time.perf_counter()
    n_test_q = a.queries // 5
    X, y, qid = make_ranking(int(a.rows * (1 + n_test_q / a.queries)), a.queries + n_test_q, 20, seed=0)
    cut = np.searchsorted(qid, a.queries)
    Xtr, ytr, qtr, Xte, yte, qte = X[:cut], y[:cut], qid[:cut], X[cut:], y[cut:], qid[cut:]
    sizes = np.bincount(qtr)
    print(f"data: {cut} train rows in {a.queries} queries (sizes {sizes.min()}..{sizes.max()}, "
          f"mean {sizes.mean():.1f}), {len(yte)} test rows; made in {time.perf_counter() - t:.1f} s", flush=True)
    features = [f"f{j}" for j in range(X.shape[1])]
    train = pl.DataFrame({f: Xtr[:, j] for j, f in enumerate(features)} | {"y": ytr, "q": qtr})
    test = pl.DataFrame({f: Xte[:, j] for j, f in enumerate(features)})
    params = dict(objective="rank:ndcg", n_estimators=a.rounds, max_depth=8, learning_rate=0.1, max_bin=256)
    xparams = dict(objective="rank:ndcg", max_depth=8, eta=0.1, max_bin=256)
    run_both(a, train, features, "y", dict(params, group="q"), test, (Xtr, ytr, {"qid": qtr}), xparams, Xte,
             lambda s: ndcg_at(yte, s, qte), "NDCG@10")


CARDINALITIES = [8, 16, 50, 100, 300, 1000, 2000, 5000, 5000, 500]
# A column holds at most 65,533 categories (bins are 16-bit), short of the 100,000.
WIDE_CARDINALITIES = [10, 100, 1000, 10_000, 30_000, 100_000]


def categorical(a, cardinalities=CARDINALITIES, n_floats=10):
    """Categorical columns of the given cardinalities (Zipf-like frequencies, a per-category
    effect) beside floats; binary target. Ours reads Polars Enum columns; XGBoost reads the
    same codes with feature_types "c"."""
    t = time.perf_counter()
    rng = np.random.default_rng(1)
    n = int(a.rows * 1.2)
    codes, effect = [], np.zeros(n)
    for card in cardinalities:
        freq = 1.0 / np.arange(1, card + 1) ** 0.8
        c = rng.choice(card, size=n, p=freq / freq.sum()).astype(np.int32)
        effect += rng.normal(scale=0.5, size=card)[c]
        codes.append(c)
    floats = rng.normal(size=(n, n_floats)).astype(np.float32)
    logit = effect + floats[:, 0] - 0.5 * floats[:, 1] * floats[:, 2] + rng.logistic(size=n)
    y = (logit > np.median(logit)).astype(np.float32)
    cut = a.rows
    cat_names = [f"c{j}" for j in range(len(cardinalities))]
    num_names = [f"x{j}" for j in range(n_floats)]
    features = cat_names + num_names

    def frame(lo, hi):
        cols = {}
        for name, card, c in zip(cat_names, cardinalities, codes):
            labels = [f"v{k}" for k in range(card)]
            cols[name] = pl.Series(name, labels, dtype=pl.Enum(labels)).gather(c[lo:hi])
        cols |= {f: floats[lo:hi, j] for j, f in enumerate(num_names)}
        return pl.DataFrame(cols)

    train, test = frame(0, cut).with_columns(y=y[:cut]), frame(cut, n)
    X = np.column_stack([c.astype(np.float32) for c in codes] + [floats])
    print(f"data: {cut} train rows, {n - cut} test rows; made in {time.perf_counter() - t:.1f} s", flush=True)
    params = dict(objective="binary:logistic", n_estimators=a.rounds, max_depth=8, learning_rate=0.1, max_bin=256)
    xparams = dict(objective="binary:logistic", max_depth=8, eta=0.1, max_bin=256)
    extra = {"feature_types": ["c"] * len(cat_names) + ["q"] * n_floats, "enable_categorical": True}
    from sklearn.metrics import roc_auc_score

    run_both(a, train, features, "y", params, test, (X[:cut], y[:cut], extra), xparams, X[cut:],
             lambda s: roc_auc_score(y[cut:], s), "AUC")


def nulls(a, width=200, densities=(0.02, 0.18)):
    """Float columns mostly null (each column its own density, uniform in `densities`), binary
    target. Ours reads Polars nulls; XGBoost reads NaN."""
    t = time.perf_counter()
    rng = np.random.default_rng(2)
    n = int(a.rows * 1.2)
    X = rng.normal(size=(n, width)).astype(np.float32)
    density = rng.uniform(*densities, size=width)
    present = rng.random(size=(n, width)) < density
    logit = (np.where(present[:, :20], X[:, :20], 0.0) @ rng.normal(size=20)) + 0.8 * present[:, 20]
    y = (logit + rng.logistic(size=n) > 0).astype(np.float32)
    X[~present] = np.nan
    cut = a.rows
    features = [f"f{j}" for j in range(width)]

    def frame(lo, hi):
        return pl.DataFrame({f: X[lo:hi, j] for j, f in enumerate(features)}).fill_nan(None)

    train, test = frame(0, cut).with_columns(y=y[:cut]), frame(cut, n)
    print(f"data: {cut} train rows x {width} ({present.mean():.1%} present), {n - cut} test rows; "
          f"made in {time.perf_counter() - t:.1f} s", flush=True)
    params = dict(objective="binary:logistic", n_estimators=a.rounds, max_depth=8, learning_rate=0.1, max_bin=256)
    xparams = dict(objective="binary:logistic", max_depth=8, eta=0.1, max_bin=256)
    from sklearn.metrics import roc_auc_score

    run_both(a, train, features, "y", params, test, (X[:cut], y[:cut], {}), xparams, X[cut:],
             lambda s: roc_auc_score(y[cut:], s), "AUC")


def read_libsvm(path, n_features):
    """A LibSVM file as a float32 matrix with NaN for absent entries, and its labels."""
    rows, labels = [], []
    for line in Path(path).read_text().splitlines():
        label, *pairs = line.split()
        x = np.full(n_features, np.nan, dtype=np.float32)
        for pair in pairs:
            j, v = pair.split(":")
            x[int(j)] = float(v)
        rows.append(x)
        labels.append(float(label))
    return np.stack(rows), np.array(labels, dtype=np.float32)


def libsvm(a):
    """agaricus tiled: the real set's sparsity pattern and label structure, many copies. Each
    copy flips 5% of its labels so that copies are not identical (and the task not trivial)."""
    t = time.perf_counter()
    rng = np.random.default_rng(4)
    data = Path(a.data)
    Xtr, ytr = read_libsvm(data / "agaricus.txt.train", 127)
    Xte, yte = read_libsvm(data / "agaricus.txt.test", 127)
    copies = max(1, a.rows // len(ytr))
    X = np.tile(Xtr, (copies, 1))
    y = np.tile(ytr, copies)
    flip = rng.random(len(y)) < 0.05
    y[flip] = 1 - y[flip]
    features = [f"f{j}" for j in range(X.shape[1])]

    def frame(M):
        return pl.DataFrame({f: M[:, j] for j, f in enumerate(features)}).fill_nan(None)

    train, test = frame(X).with_columns(y=y), frame(Xte)
    print(f"data: {len(y)} train rows ({copies} copies of agaricus) x {X.shape[1]} "
          f"({np.isfinite(X).mean():.1%} present), {len(yte)} test rows; made in {time.perf_counter() - t:.1f} s",
          flush=True)
    params = dict(objective="binary:logistic", n_estimators=a.rounds, max_depth=8, learning_rate=0.1, max_bin=256)
    xparams = dict(objective="binary:logistic", max_depth=8, eta=0.1, max_bin=256)
    from sklearn.metrics import roc_auc_score

    run_both(a, train, features, "y", params, test, (X, y, {}), xparams, Xte,
             lambda s: roc_auc_score(yte, s), "AUC")


def dense_floats(a, n_features=28):
    """Float32 features without nulls but a few NaN (bench/higgs_like.py) for three cases:
    binary (Higgs-like), 10-class and loss-guided regression, all on the same generator."""
    sys.path.insert(0, str(Path(__file__).parent))
    from higgs_like import make

    t = time.perf_counter()
    n = int(a.rows * 1.1)
    X, y_binary = make(n, n_features, seed=0)
    cut = a.rows
    features = [f"f{j}" for j in range(n_features)]
    common = dict(n_estimators=a.rounds, learning_rate=0.1, max_bin=256)
    xcommon = dict(eta=0.1, max_bin=256)
    if a.case == "dense":
        y, objective, extra = y_binary, "binary:logistic", dict(max_depth=8)
        from sklearn.metrics import roc_auc_score

        metric, name = (lambda s: roc_auc_score(y[cut:], s)), "AUC"
    elif a.case == "multiclass":
        rng = np.random.default_rng(5)
        W = rng.normal(size=(n_features, 10)).astype(np.float32)
        scores = np.nan_to_num(X) @ W + np.sin(np.nan_to_num(X[:, :10]) * 2) + rng.gumbel(size=(n, 10))
        y = scores.argmax(axis=1).astype(np.float32)
        objective, extra = "multi:softprob", dict(max_depth=8, num_class=10)

        def metric(s):
            p = s.reshape(len(y) - cut, 10)
            p = np.exp(p - p.max(axis=1, keepdims=True))
            p /= p.sum(axis=1, keepdims=True)
            return float(-np.mean(np.log(np.maximum(p[np.arange(len(p)), y[cut:].astype(int)], 1e-15))))

        name = "mlogloss"
    else:
        rng = np.random.default_rng(6)
        Z = np.nan_to_num(X)
        y = (Z[:, 0] * Z[:, 1] + np.sin(3 * Z[:, 2]) + np.abs(Z[:, 3]) * Z[:, 4] + 0.3 * rng.normal(size=n))
        y = y.astype(np.float32)
        objective = "reg:squarederror"
        extra = dict(grow_policy="lossguide", max_leaves=255, max_depth=0)
        metric, name = (lambda s: float(np.sqrt(np.mean((s.reshape(-1) - y[cut:]) ** 2)))), "RMSE"
    train = pl.DataFrame({f: X[:cut, j] for j, f in enumerate(features)}).fill_nan(None).with_columns(y=y[:cut])
    test = pl.DataFrame({f: X[cut:, j] for j, f in enumerate(features)}).fill_nan(None)
    print(f"data: {cut} train rows x {n_features}, {n - cut} test rows; made in {time.perf_counter() - t:.1f} s",
          flush=True)
    params = dict(common, objective=objective, **extra)
    xparams = dict(xcommon, objective=objective, **extra)
    run_both(a, train, features, "y", params, test, (X[:cut], y[:cut], {}), xparams, X[cut:], metric, name)


def targets(a, width=20):
    """Three regression targets on the same rows, each its own function of the features."""
    t = time.perf_counter()
    rng = np.random.default_rng(8)
    n = int(a.rows * 1.2)
    X = rng.normal(size=(n, width)).astype(np.float32)
    Y = np.stack([X[:, 0] + np.sin(X[:, 1]) + X[:, 2] * X[:, 3], X[:, 4] - X[:, 5] ** 2 + X[:, 6],
                  np.tanh(X[:, 7] + X[:, 0]) * X[:, 8]], 1)
    Y = (Y + rng.normal(scale=0.3, size=Y.shape)).astype(np.float32)
    cut = a.rows
    features = [f"f{j}" for j in range(width)]
    names = ["y0", "y1", "y2"]
    train = pl.DataFrame({f: X[:cut, j] for j, f in enumerate(features)}).with_columns(
        pl.Series(c, Y[:cut, i]) for i, c in enumerate(names)).with_columns(y=pl.concat_arr(names))
    test = pl.DataFrame({f: X[cut:, j] for j, f in enumerate(features)})
    print(f"data: {cut} train rows x {width}, 3 targets, {n - cut} test rows; made in {time.perf_counter() - t:.1f} s",
          flush=True)
    params = dict(n_estimators=a.rounds, max_depth=8, learning_rate=0.1, max_bin=256, objective="reg:squarederror")
    xparams = dict(objective="reg:squarederror", max_depth=8, eta=0.1, max_bin=256)

    def metric(s):
        return float(np.sqrt(np.mean((s.reshape(len(Y) - cut, 3) - Y[cut:]) ** 2)))

    run_both(a, train, features, "y", params, test, (X[:cut], Y[:cut], {}), xparams, X[cut:], metric, "RMSE")


def leaf_refits(a):
    """The L1-type losses, whose leaves are refit to residual quantiles after each tree."""
    t = time.perf_counter()
    rng = np.random.default_rng(3)
    n, width = int(a.rows * 1.2), 28
    X = rng.normal(size=(n, width)).astype(np.float32)
    scale = 0.5 + np.abs(X[:, 1])
    y = (X[:, 0] + 0.5 * X[:, 2] * X[:, 3] + np.sin(X[:, 4]) + scale * rng.standard_t(3, size=n)).astype(np.float32)
    cut = a.rows
    features = [f"f{j}" for j in range(width)]
    train = pl.DataFrame({f: X[:cut, j] for j, f in enumerate(features)}).with_columns(y=y[:cut])
    test = pl.DataFrame({f: X[cut:, j] for j, f in enumerate(features)})
    print(f"data: {cut} train rows x {width}, {n - cut} test rows; made in {time.perf_counter() - t:.1f} s", flush=True)
    common = dict(n_estimators=a.rounds, max_depth=8, learning_rate=0.1, max_bin=256)
    extra = {}
    if a.weights == "whole":
        # Whole weights 1 to 4: a row of weight w counts as w rows in the leaves' quantiles.
        w = rng.integers(1, 5, size=cut).astype(np.float32)
        train = train.with_columns(w=w)
        common["weight"], extra = "w", {"weight": w}
    if a.case == "l1":
        params = dict(common, objective="reg:absoluteerror")
        xparams = dict(objective="reg:absoluteerror", max_depth=8, eta=0.1, max_bin=256)
        metric, name = (lambda s: float(np.mean(np.abs(s.reshape(-1) - y[cut:])))), "MAE"
    else:
        alphas = np.array([0.1, 0.5, 0.9])
        params = dict(common, objective="reg:quantileerror", quantile_alpha=alphas.tolist())
        xparams = dict(objective="reg:quantileerror", quantile_alpha=alphas, max_depth=8, eta=0.1, max_bin=256)

        def metric(s):
            d = y[cut:, None] - s.reshape(len(y) - cut, -1)
            return float(np.mean(np.where(d >= 0, alphas * d, (alphas - 1) * d)))

        name = "pinball"
    run_both(a, train, features, "y", params, test, (X[:cut], y[:cut], extra), xparams, X[cut:], metric, name)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=["ranking", "categorical", "categorical-wide", "nulls", "nulls-wide", "libsvm",
                                     "dense", "multiclass", "lossguide", "targets", "l1", "quantiles"])
    ap.add_argument("--rows", type=int, default=None,
                    help="default: 5M ranking, 2M categorical and L1, 10M wide categorical, 1M nulls")
    ap.add_argument("--queries", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=None, help="default: 500 dense, 200 otherwise")
    ap.add_argument("--data", default="../shared/data/xgboost/agaricus", help="libsvm: agaricus's folder")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--weights", choices=["none", "whole"], default="none", help="l1 and quantiles: sample weights")
    ap.add_argument("--device", default="cuda", help="cpu: a smoke test of the script without a GPU")
    ap.add_argument("--skip-ours", action="store_true")
    ap.add_argument("--skip-xgb", action="store_true")
    a = ap.parse_args()
    if a.rows is None:
        a.rows = {"ranking": 5_000_000, "categorical": 2_000_000, "categorical-wide": 10_000_000,
                  "nulls": 1_000_000, "nulls-wide": 5_000_000, "libsvm": 6_500_000,
                  "dense": 10_000_000}.get(a.case, 2_000_000)
    if a.rounds is None:
        a.rounds = 500 if a.case == "dense" else 200
    cases = {"ranking": ranking, "categorical": categorical,
             "categorical-wide": lambda a: categorical(a, WIDE_CARDINALITIES, 20),
             "nulls": nulls, "nulls-wide": lambda a: nulls(a, 500, (0.01, 0.09)), "libsvm": libsvm,
             "dense": dense_floats, "multiclass": dense_floats, "lossguide": dense_floats, "targets": targets,
             "l1": leaf_refits, "quantiles": leaf_refits}
    cases[a.case](a)


if __name__ == "__main__":
    main()
