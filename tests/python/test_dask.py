"""polars_gbt.dask on a LocalCluster of worker processes: the model of a distributed fit
must be, byte for byte, the model of one process on the same rows; scoring happens where
the partitions live; a worker that dies mid-fit is an error within the timeout."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import polars as pl
import pytest

import polars_gbt
import polars_gbt.dask

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


def test_a_worker_killed_mid_fit_is_an_error_within_the_timeout():
    cluster = distributed.LocalCluster(
        n_workers=3, threads_per_worker=1, processes=True, dashboard_address=":0", silence_logs=50
    )
    with distributed.Client(cluster) as client:
        df = pl.concat([_frame(20_000, s) for s in range(3)])
        futures = _scatter(client, _split(df, [20_000] * 3), [0, 1, 2])
        victim = sorted(client.scheduler_info()["workers"])[1]
        pid = client.run(os.getpid, workers=[victim])[victim]

        def kill() -> None:
            time.sleep(3.0)
            os.kill(pid, signal.SIGKILL)

        threading.Thread(target=kill, daemon=True).start()
        start = time.monotonic()
        # Long enough (about a minute here) to be killed well inside it.
        with pytest.raises(polars_gbt.DistributedError, match=r"(?:from|to) rank 1 at"):
            polars_gbt.dask.train(client, futures, target="y", n_estimators=20_000, max_depth=6, timeout=20)
        took = time.monotonic() - start
        assert took < 3.0 + 20 + 10, took
    cluster.close()
