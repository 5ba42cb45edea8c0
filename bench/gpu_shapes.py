"""GPU training on the shapes a DataFrame holds beyond dense floats, ours against XGBoost's GPU
``hist`` on the same data in the same run (issue 13). One case so far:

* ``ranking``: ``rank:ndcg`` on 5M rows of 20 float32 features in 100k queries of uneven sizes
  (2 to 2,000 rows, about 50 on average), relevance 0..4; 200 rounds of depth 8, 256 bins,
  eta 0.1 for both; NDCG@10 on 20k (a fifth as many) held-out queries, computed here the same way for both.

Ours is timed from a Polars DataFrame in host memory to a trained model (``gbt.fit`` with
``device="cuda"``, the CUDA runtime started beforehand). XGBoost is timed on ``xgb.train``
alone, its ``QuantileDMatrix`` already built from host numpy ("ingest", reported apart).
GPU memory is NVML's peak above idle during each fit.

Usage (device machine, Polars and XGBoost packs and our wheel installed, see
docs/benchmarks.md): PYTHONPATH=.peers/site:.peers/ours python3 bench/gpu_shapes.py ranking
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
from gpu_bench import MemoryPoll  # noqa: E402

import polars_gbt  # noqa: E402


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
    rows = []

    if not a.skip_ours:
        assert a.device == "cpu" or polars_gbt.cuda_available(), "no usable GPU"
        for attempt in range(a.repeats):
            with MemoryPoll() as mem:
                t = time.perf_counter()
                model = train.select(pl.col(features).gbt.fit("y", group="q", device=a.device, **params)).item()
                fit_s = time.perf_counter() - t
            score = test.select(pl.col(features).gbt.predict(model, output="margin"))["f0"].to_numpy()
            rows.append(("ours", attempt, fit_s, None, ndcg_at(yte, score, qte), mem.above_idle))
            print(rows[-1], flush=True)

    if not a.skip_xgb:
        import xgboost as xgb

        xparams = dict(objective="rank:ndcg", tree_method="hist", device=a.device, max_depth=8, eta=0.1, max_bin=256)
        for attempt in range(a.repeats):
            with MemoryPoll() as mem:
                t = time.perf_counter()
                dtrain = xgb.QuantileDMatrix(Xtr, ytr, qid=qtr, max_bin=256)
                ingest = time.perf_counter() - t
                t = time.perf_counter()
                booster = xgb.train(xparams, dtrain, a.rounds)
                train_s = time.perf_counter() - t
            score = booster.inplace_predict(Xte)
            score = score.get() if hasattr(score, "get") else np.asarray(score)
            rows.append(("xgboost", attempt, train_s, ingest, ndcg_at(yte, score, qte), mem.above_idle))
            print(rows[-1], flush=True)
            del dtrain, booster

    print("\n| library | run | train s | ingest s | NDCG@10 | GPU MiB |\n|---|---|---|---|---|---|")
    for lib, run, s, ingest, ndcg, mib in rows:
        print(f"| {lib} | {run} | {s:.2f} | {'' if ingest is None else f'{ingest:.2f}'} | {ndcg:.4f} | {mib:.0f} |")
    ours = [r[2] for r in rows if r[0] == "ours"]
    theirs = [r[2] for r in rows if r[0] == "xgboost"]
    if ours and theirs:
        print(f"\nours / XGBoost (medians): {np.median(ours) / np.median(theirs):.3f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=["ranking"])
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--queries", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--device", default="cuda", help="cpu: a smoke test of the script without a GPU")
    ap.add_argument("--skip-ours", action="store_true")
    ap.add_argument("--skip-xgb", action="store_true")
    a = ap.parse_args()
    {"ranking": ranking}[a.case](a)


if __name__ == "__main__":
    main()
