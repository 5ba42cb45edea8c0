"""polars_gbt.dask on a LocalCluster of worker processes: the model of a distributed fit
must be, byte for byte, the model of one process on the same rows; scoring happens where
the partitions live; a worker that dies mid-fit is an error within the timeout. With two
GPUs, the same of GPU workers (one process per GPU), whose sums go through NCCL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import polars_gbt
import polars_gbt.dask
from _gpus import two_gpus

distributed = pytest.importorskip("distributed")


def _frame(n: int, seed: int) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    x0 = rng.normal(size=n)
    x1 = rng.uniform(0, 10, size=n)
    cities = np.array(["oslo", "lima", "pune", "kyiv", "rome", "baku", "lome", "suva"])
    city = cities[rng.integers(0, len(cities), size=n)]
    logit = 1.5 * np.tanh(x0) + (x1 - 5) / 4 + np.where(np.isin(city, ["lima", "suva"]), 1.2, -0.3)
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-logit))).astype(np.float64)
    return pl.DataFrame(
        {
            "x0": x0,
            "x1": x1,
            "city": pl.Series(city, dtype=pl.Categorical),
            "w": rng.uniform(0.5, 1.5, size=n),
            "y": y,
        }
    ).with_columns(
        # Nulls in a numeric column: missing values with learned directions.
        x0=pl.when(pl.int_range(pl.len()) % 7 == 3).then(None).otherwise(pl.col("x0")),
    )


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(
        n_workers=3, threads_per_worker=1, processes=True, dashboard_address=":0", silence_logs=40
    )
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


def _scatter(client, parts: list[pl.DataFrame], placement: list[int]):
    """Each part on the worker `placement` names (an index into the sorted workers)."""
    workers = sorted(client.scheduler_info()["workers"])
    # hash=False: a fresh key each time, never one an earlier test is releasing.
    return [client.scatter(p, workers=[workers[w]], broadcast=False, hash=False) for p, w in zip(parts, placement)]


def _split(df: pl.DataFrame, sizes: list[int]) -> list[pl.DataFrame]:
    out, at = [], 0
    for s in sizes:
        out.append(df.slice(at, s))
        at += s
    assert at == df.height
    return out


PARAMS = [
    dict(objective="binary:logistic", n_estimators=12, max_depth=4, weight="w", seed=5),
    dict(
        objective="binary:logistic",
        n_estimators=10,
        max_depth=5,
        weight="w",
        subsample=0.7,
        colsample_bynode=0.8,
        max_cat_to_onehot=1,
        seed=9,
    ),
    dict(objective="reg:squarederror", n_estimators=8, grow_policy="lossguide", max_leaves=10),
    # Leaves refit to quantiles of every worker's residuals.
    dict(objective="reg:quantileerror", quantile_alpha=[0.2, 0.5, 0.9], n_estimators=5, max_depth=4),
]


@pytest.mark.parametrize("params", PARAMS, ids=["logistic", "sampled", "lossguide", "quantiles"])
def test_a_dask_fit_gives_the_bytes_of_one_process(client, params):
    df = _frame(3000, 1)
    # Uneven partitions, one nearly empty; worker 0 holds two that are not adjacent.
    parts = _split(df, [900, 4, 1100, 600, 396])
    futures = _scatter(client, parts, [0, 1, 2, 0, 1])
    got = polars_gbt.dask.train(client, futures, target="y", device="cpu", timeout=60, **params)
    want = polars_gbt.train(df, target="y", device="cpu", **params)
    assert got.to_bytes() == want.to_bytes()


def test_whole_weighted_leaf_refits_give_the_bytes_of_one_process(client):
    # Whole weights sum exactly in any order, so L1 leaves refit over every worker's rows.
    df = _frame(3000, 3).with_columns(wi=(pl.col("x1").floor() % 4))
    parts = _split(df, [900, 4, 1100, 600, 396])
    futures = _scatter(client, parts, [0, 1, 2, 0, 1])
    params = dict(objective="reg:absoluteerror", n_estimators=6, max_depth=4, weight="wi", features=["x0", "x1", "city"])
    got = polars_gbt.dask.train(client, futures, target="y", device="cpu", timeout=60, **params)
    want = polars_gbt.train(df, target="y", device="cpu", **params)
    assert got.to_bytes() == want.to_bytes()


def test_delayed_parts_and_pyarrow_tables(client):
    import dask

    df = _frame(1500, 2)
    parts = [dask.delayed(p.to_arrow)() for p in _split(df, [500, 700, 300])]
    params = dict(objective="binary:logistic", n_estimators=5, max_depth=3)
    got = polars_gbt.dask.train(client, parts, target="y", device="cpu", **params)
    assert got.to_bytes() == polars_gbt.train(df, target="y", device="cpu", **params).to_bytes()


def test_a_dask_dataframe_and_scoring_where_the_parts_live(client):
    import dask.dataframe as dd

    df = _frame(1200, 3).with_columns(pl.col("city").cast(pl.String))
    ddf = dd.from_pandas(df.to_pandas(), npartitions=3)
    model = polars_gbt.dask.train(client, ddf, target="y", device="cpu", n_estimators=6, max_depth=3)
    want = polars_gbt.train(df, target="y", device="cpu", n_estimators=6, max_depth=3)
    assert model.to_bytes() == want.to_bytes()
    scored = polars_gbt.dask.predict(client, ddf, model).compute()
    np.testing.assert_array_equal(scored.to_numpy(), model.predict(df).to_numpy())

    futures = _scatter(client, _split(df, [400, 800]), [2, 0])
    pieces = client.gather(polars_gbt.dask.predict(client, futures, model, output="margin"))
    np.testing.assert_array_equal(pl.concat(pieces).to_numpy(), model.predict(df, output="margin").to_numpy())


def test_evaluation_sets_and_early_stopping_give_one_process_log_and_model(client):
    df, valid, test = _frame(3000, 8), _frame(900, 9), _frame(300, 10)
    params = dict(
        objective="binary:logistic",
        n_estimators=200,
        max_depth=4,
        learning_rate=0.6,
        eval_metric=["logloss", "auc"],
        early_stopping_rounds=3,
        device="cpu",
    )
    futures = _scatter(client, _split(df, [1000, 1000, 1000]), [0, 1, 2])
    # "valid" only on worker 2 (the others evaluate none of it); "test" on workers 0 and 1.
    sets = {
        "test": _scatter(client, _split(test, [100, 200]), [1, 0]),
        "valid": _scatter(client, _split(valid, [500, 400]), [2, 2]),
    }
    got = polars_gbt.dask.train(client, futures, target="y", eval_sets=sets, **params)
    want = polars_gbt.train(df, target="y", eval_sets={"test": test, "valid": valid}, **params)
    assert got.best_iteration is not None and got.num_trees < 200
    assert got.evals_result().equals(want.evals_result())
    assert got.to_bytes() == want.to_bytes()


def _scans(client, tmp_path: Path, name: str, parts: list[pl.DataFrame], placement: list[int]):
    """Each part written to a Parquet file of its own, and a future of a scan of that file
    held by the worker `placement` names: a worker's partitions are lazy queries of its files."""
    workers = sorted(client.scheduler_info()["workers"])
    futures = []
    for i, (p, w) in enumerate(zip(parts, placement)):
        path = tmp_path / f"{name}-{i}.parquet"
        p.write_parquet(path)
        futures.append(client.submit(pl.scan_parquet, str(path), workers=[workers[w]], pure=False))
    return futures


def test_lazy_parts_stream_on_their_workers_and_give_one_process_model(client, tmp_path):
    # Past 2^18 rows, so the cut points come from a sample drawn by global row. The city
    # "kyiv" only in worker 2's rows (each worker's categories differ); worker 0 holds two
    # runs of rows that are not adjacent, and none of the evaluation rows.
    df = _frame(300_000, 21).with_columns(
        city=pl.when(pl.int_range(pl.len()) < 250_000)
        .then(pl.col("city").cast(pl.String).replace("kyiv", "oslo"))
        .otherwise(pl.col("city").cast(pl.String))
        .cast(pl.Categorical)
    )
    valid = _frame(4_000, 22)
    parts = _split(df, [100_000, 7, 149_993, 50_000])
    futures = _scans(client, tmp_path, "train", parts, [0, 1, 0, 2])
    sets = {"valid": _scans(client, tmp_path, "valid", _split(valid, [3_000, 1_000]), [1, 2])}
    params = dict(
        objective="binary:logistic",
        n_estimators=8,
        max_depth=5,
        weight="w",
        subsample=0.8,
        max_cat_to_onehot=1,
        eval_metric=["logloss"],
        device="cpu",
        seed=3,
    )
    client.run(_count_streamed_fits)
    try:
        got = polars_gbt.dask.train(client, futures, target="y", eval_sets=sets, timeout=60, **params)
        streamed = client.run(_streamed_fits)
    finally:
        client.run(_count_streamed_fits, False)
    want = polars_gbt.train(df, target="y", eval_sets={"valid": valid}, **params)
    assert got.to_bytes() == want.to_bytes()
    assert got.evals_result().equals(want.evals_result())
    assert "kyiv" in (got.categories["city"] or [])
    # Every worker streamed its partitions (none collected them).
    assert sorted(streamed.values()) == [1, 1, 1]


def test_lazy_parts_whose_rows_come_in_another_order_each_read_keep_their_labels(client, tmp_path):
    # Issue 52: a worker reads its lazy partitions twice; each read of these gives the rows in
    # a new order (as an unordered join would). The model is not the same bytes as one
    # process's on the collected rows, but as good on held-out rows.
    from sklearn.metrics import roc_auc_score

    df, holdout = _frame(60_000, 24), _frame(10_000, 25)
    workers = sorted(client.scheduler_info()["workers"])
    futures = []
    for i, part in enumerate(_split(df, [25_000, 20_000, 15_000])):
        path = tmp_path / f"part-{i}.parquet"
        part.write_parquet(path)
        query = pl.scan_parquet(path).with_columns(_k=pl.int_range(pl.len()).shuffle()).sort("_k").drop("_k")
        futures.append(client.scatter(query, workers=[workers[i]], broadcast=False, hash=False))
    params = dict(objective="binary:logistic", n_estimators=15, max_depth=5, weight="w", device="cpu")
    features = ["x0", "x1", "city"]
    got = polars_gbt.dask.train(client, futures, target="y", features=features, timeout=60, **params)
    want = polars_gbt.train(df, target="y", features=features, **params)
    auc = [roc_auc_score(holdout["y"], m.predict(holdout)) for m in (got, want)]
    assert auc[1] > 0.75 and abs(auc[0] - auc[1]) < 0.01, auc


def test_lazy_parts_with_other_columns_are_an_error_naming_them(client, tmp_path):
    df = _frame(2_000, 23)
    parts = _split(df, [1_000, 1_000])
    parts[1] = parts[1].drop("x1")
    futures = _scans(client, tmp_path, "odd", parts, [0, 1])
    with pytest.raises(polars_gbt.DataError, match=r"has the features \["):
        polars_gbt.dask.train(client, futures, target="y", device="cpu", timeout=30, n_estimators=2)


def _count_streamed_fits(on: bool = True) -> None:
    """On a worker: count the streamed fits it runs from now on (or stop counting)."""
    import polars_gbt._model as m

    original = getattr(m, "_original_train_streamed", m._train_streamed)
    m._original_train_streamed = original
    m._streamed_fits = 0

    def counted(*args, **kwargs):
        m._streamed_fits += 1
        return original(*args, **kwargs)

    m._train_streamed = counted if on else original


def _streamed_fits() -> int:
    import polars_gbt._model as m

    return m._streamed_fits


def test_one_workers_bad_rows_are_its_own_error(client):
    df = _frame(900, 4)
    parts = _split(df, [300, 300, 300])
    # Labels outside [0, 1] on one worker only: binary:logistic rejects them there.
    parts[1] = parts[1].with_columns(y=pl.col("y") * 3)
    futures = _scatter(client, parts, [0, 1, 2])
    with pytest.raises(polars_gbt.ColumnError, match="label") as e:
        polars_gbt.dask.train(client, futures, target="y", objective="binary:logistic", timeout=30)
    assert "rank 1" in str(e.value)


def test_what_distributed_fits_cannot_do_yet_is_a_clear_error(client):
    futures = _scatter(client, _split(_frame(200, 5), [100, 100]), [0, 1])
    with pytest.raises(polars_gbt.ParameterError, match="cannot be trained distributed yet"):
        polars_gbt.dask.train(client, futures, target="y", objective="reg:absoluteerror", weight="w")
    with pytest.raises(ValueError, match="eval_df"):
        polars_gbt.dask.train(client, futures, target="y", eval_df=_frame(10, 6))
    with pytest.raises(ValueError, match="eval set 'valid' has no rows"):
        polars_gbt.dask.train(client, futures, target="y", eval_sets={"valid": _scatter(client, [_frame(0, 1)], [0])})
    with pytest.raises(ValueError, match="init_model"):
        polars_gbt.dask.train(client, futures, target="y", init_model=b"")
    with pytest.raises(TypeError, match="Dask future"):
        polars_gbt.dask.train(client, [_frame(10, 7)], target="y")


def test_a_worker_killed_mid_fit_is_an_error_within_the_timeout(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cluster = distributed.LocalCluster(
        n_workers=3, threads_per_worker=1, processes=True, dashboard_address=":0", silence_logs=50
    )
    with distributed.Client(cluster) as client:
        df = pl.concat([_frame(20_000, s) for s in range(3)])
        futures = _scatter(client, _split(df, [20_000] * 3), [0, 1, 2])
        victim = sorted(client.scheduler_info()["workers"])[1]
        _kill_soon(client.run(os.getpid, workers=[victim])[victim])
        start = time.monotonic()
        # Long enough (about a minute here) to be killed well inside it.
        with pytest.raises(polars_gbt.DistributedError, match=r"(?:from|to) rank 1 at"):
            polars_gbt.dask.train(client, futures, target="y", n_estimators=20_000, max_depth=6, timeout=20)
        took = time.monotonic() - start
        assert took < 3.0 + 20 + 10, took
        # The client process stays usable: once the killed worker's nanny has started it
        # again, the cluster fits and gives one process's model; nothing was written.
        _wait_for_replacement(client, victim, 3)
        futures = _scatter(client, _split(df, [20_000] * 3), [0, 1, 2])
        params = dict(n_estimators=5, max_depth=4, device="cpu")
        got = polars_gbt.dask.train(client, futures, target="y", timeout=60, **params)
        assert got.to_bytes() == polars_gbt.train(df, target="y", **params).to_bytes()
        assert list(tmp_path.iterdir()) == []
    cluster.close()


def _kill_soon(pid: int, after: float = 3.0) -> None:
    """Kills process `pid` (SIGKILL: no goodbye) `after` seconds from now, from a thread."""

    def kill() -> None:
        time.sleep(after)
        os.kill(pid, signal.SIGKILL)

    threading.Thread(target=kill, daemon=True).start()


def _wait_for_replacement(client, gone: str, n: int, timeout: float = 120.0) -> None:
    """Waits until `n` workers are up and `gone` is not among them."""
    deadline = time.monotonic() + timeout
    while True:
        workers = client.scheduler_info()["workers"]
        if len(workers) >= n and gone not in workers:
            return
        assert time.monotonic() < deadline, f"no replacement for {gone} within {timeout} s"
        time.sleep(0.2)


class _GpuWorkers:
    """A scheduler and one worker process per GPU (``CUDA_VISIBLE_DEVICES`` each, as dask-cuda
    starts them), without nannies: a killed worker stays dead until started again."""

    def __init__(self, tmp: Path, gpus: int):
        self.file = tmp / "scheduler.json"
        self.logs = tmp
        self.env = dict(os.environ, NCCL_NVLS_ENABLE=os.environ.get("NCCL_NVLS_ENABLE", "0"))
        self.procs = [
            subprocess.Popen(
                [sys.executable, "-m", "distributed.cli.dask_scheduler", "--scheduler-file", str(self.file),
                 "--port", "0", "--no-dashboard"],
                env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
        ]
        deadline = time.monotonic() + 60
        while True:  # the scheduler writes its file once it listens
            try:
                json.loads(self.file.read_text())["address"]
                break
            except (OSError, ValueError, KeyError):
                assert time.monotonic() < deadline, "the scheduler did not start"
                time.sleep(0.2)
        for g in range(gpus):
            self.start(g)
        self.client = distributed.Client(scheduler_file=str(self.file))
        self.client.wait_for_workers(gpus, timeout=120)

    def start(self, gpu: int) -> None:
        log = open(self.logs / f"worker-gpu{gpu}-{len(self.procs)}.log", "w")
        self.procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "distributed.cli.dask_worker", "--scheduler-file", str(self.file),
                 "--no-nanny", "--nthreads", "1", "--no-dashboard", "--name", f"gpu{gpu}", "--memory-limit", "0"],
                env=dict(self.env, CUDA_VISIBLE_DEVICES=str(gpu)), stdout=log, stderr=subprocess.STDOUT,
            )
        )

    def address(self, gpu: int) -> str:
        workers = self.client.scheduler_info()["workers"]
        return next(a for a, w in workers.items() if w["name"] == f"gpu{gpu}")

    def scatter(self, parts: list[pl.DataFrame]) -> list:
        """Part g on GPU g's worker."""
        return [self.client.scatter(p, workers=[self.address(g)], hash=False) for g, p in enumerate(parts)]

    def close(self) -> None:
        self.client.close()
        for p in self.procs:
            p.kill()
            p.wait(timeout=30)


@two_gpus
def test_gpu_workers_sum_through_nccl_and_give_one_gpus_model(tmp_path):
    cluster = _GpuWorkers(tmp_path, 2)
    try:
        df = pl.concat([_frame(30_000, s) for s in (11, 12)])
        futures = cluster.scatter(_split(df, [25_000, 35_000]))
        # Categorical splits (their row counts summed on the devices), nulls, weights.
        params = dict(objective="binary:logistic", n_estimators=8, max_depth=6, weight="w", device="cuda")
        want = polars_gbt.train(df, target="y", **params).to_bytes()
        # Twice: the second fit reuses the communicator each worker kept from the first.
        for _ in range(2):
            got = polars_gbt.dask.train(cluster.client, futures, target="y", timeout=60, **params)
            assert got.to_bytes() == want
    finally:
        cluster.close()


@two_gpus
def test_gpu_workers_stream_their_lazy_parts_and_give_one_gpus_model(tmp_path):
    cluster = _GpuWorkers(tmp_path, 2)
    try:
        # Past 2^18 rows: the cut points' sample is drawn by global row on each worker.
        df = pl.concat([_frame(150_000, s) for s in (15, 16)])
        futures = []
        for g, part in enumerate(_split(df, [140_000, 160_000])):
            path = tmp_path / f"part-{g}.parquet"
            part.write_parquet(path)
            futures.append(cluster.client.submit(pl.scan_parquet, str(path), workers=[cluster.address(g)], pure=False))
        params = dict(objective="binary:logistic", n_estimators=8, max_depth=6, weight="w", device="cuda")
        want = polars_gbt.train(df, target="y", **params).to_bytes()
        got = polars_gbt.dask.train(cluster.client, futures, target="y", timeout=60, **params)
        assert got.to_bytes() == want
    finally:
        cluster.close()


@two_gpus
def test_a_gpu_worker_killed_mid_fit_is_an_error_within_the_timeout(tmp_path):
    cluster = _GpuWorkers(tmp_path, 2)
    try:
        client = cluster.client
        df = pl.concat([_frame(200_000, s) for s in (13, 14)])
        futures = cluster.scatter(_split(df, [200_000, 200_000]))
        victim = cluster.address(1)
        _kill_soon(client.run(os.getpid, workers=[victim])[victim])
        start = time.monotonic()
        with pytest.raises(polars_gbt.DistributedError, match=r"rank 1"):
            polars_gbt.dask.train(client, futures, target="y", n_estimators=1_000_000, max_depth=8, device="cuda",
                                  timeout=20)
        took = time.monotonic() - start
        assert took < 3.0 + 20 + 10, took
        # GPU 0's worker leaves its fit within the timeout (its communicator aborted) and can
        # fit again: with a new worker on GPU 1, the two give one GPU's model.
        cluster.start(1)
        _wait_for_replacement(client, victim, 2)
        futures = cluster.scatter(_split(df, [200_000, 200_000]))
        params = dict(objective="binary:logistic", n_estimators=6, max_depth=5, device="cuda")
        got = polars_gbt.dask.train(client, futures, target="y", timeout=60, **params)
        assert got.to_bytes() == polars_gbt.train(df, target="y", **params).to_bytes()
    finally:
        cluster.close()
