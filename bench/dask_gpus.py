"""Dask GPU workers against the GPUs of one process, and against XGBoost's Dask, a benchmark
(issue 35; not a test). For each worker count k: a scheduler and k Dask workers, one per GPU
(``CUDA_VISIBLE_DEVICES`` each, as dask-cuda starts them), Higgs-like partitions made on the
workers (untimed), then, each timed on its second fit:

* ``polars_gbt.dask.train(device="cuda")`` over the workers' partitions;
* ``polars_gbt.train(n_gpus=k)`` in this process on the same rows (and ``n_gpus=1`` once);
* XGBoost's ``xgb.dask.train`` (``device="cuda"``) on the same rows held on the workers'
  GPUs as cupy blocks (its ``DaskQuantileDMatrix`` timed apart), when ``--xgboost``.

Prints a markdown table, and whether each of our models has one GPU's trees. A worker's log
is printed when a fit fails.

Usage (device machine; the Polars, Dask and XGBoost packs of ../shared/device/stage-peers.sh,
our wheel installed into .peers/ours):
    PYTHONPATH=.peers/dasksite:.peers/site:.peers/ours python3 bench/dask_gpus.py \
        --rows 100000000 --gpus 2,4 --xgboost
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
import polars as pl

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
from higgs_like import make  # noqa: E402


# The rows are BLOCKS blocks of their own seeds; k workers hold BLOCKS / k consecutive blocks
# each, so every worker count trains on the same rows as one GPU.
BLOCKS = 4


def block(i: int, rows: int) -> tuple[np.ndarray, np.ndarray]:
    return make(rows, seed=100 + i)


def part(i: int, k: int, rows: int) -> pl.DataFrame:
    """Worker `i` of `k`'s rows (`rows` a block): Higgs-like, the same wherever made."""
    per = BLOCKS // k
    Xs, ys = zip(*(block(b, rows) for b in range(i * per, (i + 1) * per)))
    X, y = np.concatenate(Xs), np.concatenate(ys)
    return pl.DataFrame({**{f"f{j}": X[:, j] for j in range(X.shape[1])}, "y": y})


def gpu_block(i: int, rows: int):
    """Block `i` as one cupy array on the worker's GPU, the label last."""
    import cupy as cp

    X, y = block(i, rows)
    return cp.asarray(np.column_stack([X, y]))


def timed(fit):
    fit()  # the start-up: runtimes, kernels, communicators
    t = time.perf_counter()
    model = fit()
    return model, time.perf_counter() - t


class Cluster:
    """A scheduler and one worker per GPU, each its own process."""

    def __init__(self, k: int, work: Path, logs: Path):
        env = dict(os.environ, NCCL_NVLS_ENABLE="0")
        env["PYTHONPATH"] = os.pathsep.join([str(BENCH), env.get("PYTHONPATH", "")])
        self.logs = [logs / f"worker{k}-{g}.log" for g in range(k)]
        scheduler_file = work / f"scheduler{k}.json"
        self.procs = [
            subprocess.Popen(
                [sys.executable, "-m", "distributed.cli.dask_scheduler", "--scheduler-file", str(scheduler_file),
                 "--port", "0", "--no-dashboard"],
                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
        ]
        while True:  # the scheduler writes its file when it listens
            try:
                json.loads(scheduler_file.read_text())["address"]
                break
            except (OSError, ValueError, KeyError):
                time.sleep(0.2)
        for g in range(k):
            self.procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "distributed.cli.dask_worker", "--scheduler-file", str(scheduler_file),
                     "--nthreads", "1", "--no-dashboard", "--name", f"gpu{g}", "--memory-limit", "0"],
                    env=dict(env, CUDA_VISIBLE_DEVICES=str(g)),
                    stdout=open(self.logs[g], "w"), stderr=subprocess.STDOUT,
                )
            )
        from distributed import Client

        self.client = Client(scheduler_file=str(scheduler_file))
        self.client.wait_for_workers(k, timeout=120)

    def close(self) -> None:
        self.client.close()
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            p.wait(timeout=30)

    def tail(self) -> str:
        return "\n".join(f"--- {p.name} ---\n" + "".join(p.read_text().splitlines(True)[-40:]) for p in self.logs)


def xgboost_dask(client, per: int, rounds: int) -> tuple[float, float]:
    """XGBoost's Dask GPU training on the same rows, on the workers' GPUs: (its
    DaskQuantileDMatrix, its xgb.dask.train on the second fit), seconds."""
    import cupy as cp
    import dask
    import dask.array as da
    from xgboost import dask as dxgb
    from distributed import wait

    blocks = [
        da.from_delayed(dask.delayed(gpu_block)(i, per), shape=(per, 29), dtype=np.float32,
                        meta=cp.empty((0, 0), dtype=cp.float32))
        for i in range(BLOCKS)
    ]
    A = client.persist(da.concatenate(blocks))
    wait(A)
    t = time.perf_counter()
    dtrain = dxgb.DaskQuantileDMatrix(client, A[:, :28], A[:, 28], max_bin=256)
    quantised = time.perf_counter() - t
    params = dict(objective="binary:logistic", tree_method="hist", device="cuda", max_depth=8, eta=0.1, max_bin=256)
    _, train = timed(lambda: dxgb.train(client, params, dtrain, num_boost_round=rounds))
    return quantised, train


class Rows:
    """The table's rows, printed as they come (a long run cut short keeps what it measured)."""

    def append(self, row: str) -> None:
        print(row, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=20_000_000)
    ap.add_argument("--gpus", default="2")
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--xgboost", action="store_true")
    a = ap.parse_args()
    import polars_gbt
    import polars_gbt.dask
    from distributed import wait

    counts = [int(g) for g in a.gpus.split(",")]
    params = dict(objective="binary:logistic", n_estimators=a.rounds, max_depth=8, learning_rate=0.1, device="cuda")
    work = Path(tempfile.mkdtemp())
    logs = Path(os.environ.get("OUT", work))
    one_trees, t_one = None, None
    assert all(BLOCKS % k == 0 for k in counts), f"worker counts must divide {BLOCKS}"
    per = a.rows // BLOCKS
    rows = Rows()
    print(f"\n{per * BLOCKS:,} rows x 28, depth 8, {a.rounds} trees, second fit of each\n")
    print("| fit | GPUs | s | speed-up over 1 GPU | trees of 1 GPU |")
    print("|---|---|---|---|---|", flush=True)
    for k in counts:
        whole = part(0, 1, per)
        if one_trees is None:
            one, t_one = timed(lambda: polars_gbt.train(whole, target="y", **params))
            one_trees = one.trees_to_dataframe()
            rows.append(f"| 1 GPU, this process | 1 | {t_one:.2f} | 1.00 | - |")
        several, t_several = timed(lambda: polars_gbt.train(whole, target="y", n_gpus=k, **params))
        del whole
        same = several.trees_to_dataframe().equals(one_trees)
        rows.append(f"| `n_gpus={k}`, this process | {k} | {t_several:.2f} | {t_one / t_several:.2f} | "
                    f"{'yes' if same else 'NO'} |")
        cluster = Cluster(k, work, logs)
        try:
            client = cluster.client
            addresses = sorted(client.scheduler_info()["workers"])
            parts = [client.submit(part, i, k, per, workers=[w], pure=False) for i, w in enumerate(addresses)]
            wait(parts)
            try:
                dask_model, t_dask = timed(lambda: polars_gbt.dask.train(client, parts, target="y", **params))
            except Exception:
                print(cluster.tail(), file=sys.stderr)
                raise
            same = dask_model.trees_to_dataframe().equals(one_trees)
            rows.append(f"| `polars_gbt.dask.train`, {k} GPU workers | {k} | {t_dask:.2f} | {t_one / t_dask:.2f} | "
                        f"{'yes' if same else 'NO'} |")
            del parts
            if a.xgboost:
                quantised, t_xgb = xgboost_dask(client, per, a.rounds)
                rows.append(f"| XGBoost `xgb.dask.train`, {k} GPU workers (+ {quantised:.2f} s its "
                            f"DaskQuantileDMatrix) | {k} | {t_xgb:.2f} | {t_one / t_xgb:.2f} | - |")
        finally:
            cluster.close()
        print(f"done k={k}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
