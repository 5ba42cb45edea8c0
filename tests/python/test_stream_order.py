"""A streamed fit of a source whose rows come in another order on each read (issue 52): an
unordered join of Polars' streaming engine, a query that shuffles. A streamed fit reads its
source twice; each row's label, weight and query id must travel with that row's features.
Oracle: the held-out metric of the fit on the collected rows (the same up to the noise of
the cut points), and far above chance; a source whose rows change between the reads is a
DataError, never a fit."""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
from sklearn.metrics import roc_auc_score

import polars_gbt
from _gpus import two_gpus

FEATURES = [f"x{i}" for i in range(6)]
gpu = pytest.mark.skipif(not polars_gbt.cuda_available(), reason="no usable GPU (the GPU machine runs it)")


def rows(n: int, seed: int) -> pl.DataFrame:
    """Six features, a binary label that depends on all of them, a weight, query ids of 20
    rows and a relevance grade; rows numbered by `id`."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(6, n))
    logit = 1.5 * x[0] - x[1] + np.tanh(x[2]) * 2 + x[3] * x[4] + 0.5 * x[5]
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-logit))).astype(np.float64)
    return pl.DataFrame(
        {
            "id": rng.permutation(n),
            **{f"x{i}": x[i] for i in range(6)},
            "y": y,
            "w": rng.choice([0.5, 1.0, 2.0], size=n),
            "q": np.arange(n) // 20,
            "grade": np.clip(np.round(logit / 2 + 1), 0, 3),
        }
    )


def shuffled(query: pl.LazyFrame) -> pl.LazyFrame:
    """`query`'s rows in a new order each time it runs."""
    return query.with_columns(_k=pl.int_range(pl.len()).shuffle()).sort("_k").drop("_k")


def groups_shuffled(query: pl.LazyFrame) -> pl.LazyFrame:
    """`query`'s query groups (`q`) in a new order each time it runs, and the rows within each
    group too; each group's rows stay together."""
    k = pl.int_range(pl.len()).shuffle()
    return query.with_columns(_k=k).with_columns(_g=pl.col("_k").min().over("q")).sort("_g", "_k").drop("_k", "_g")


@pytest.fixture(scope="module")
def frames(tmp_path_factory):
    """The issue's query: features x0..x2 in one Parquet file, x3..x5 and the per-row inputs
    in another, in another order, joined on `id`; and held-out rows."""
    path = tmp_path_factory.mktemp("order")
    train = rows(40_000, 52)
    train.select("id", "x0", "x1", "x2").write_parquet(path / "left.parquet")
    train.select("id", "x3", "x4", "x5", "y", "w", "q", "grade").sample(fraction=1.0, shuffle=True, seed=1).write_parquet(
        path / "right.parquet"
    )
    join = pl.scan_parquet(path / "left.parquet").join(pl.scan_parquet(path / "right.parquet"), on="id")
    return join, rows(10_000, 53)


def auc(model: polars_gbt.Model, holdout: pl.DataFrame) -> float:
    return float(roc_auc_score(holdout["y"], model.predict(holdout)))


# A paged GPU fit takes its bins and labels from the same pass 2 as the CPU's (the host's
# matrix), so it is not repeated here; tests/python/test_stream.py pages a streamed fit.
DEVICES = [
    pytest.param(dict(device="cpu"), id="cpu"),
    pytest.param(dict(device="cuda"), marks=gpu, id="one gpu"),
    pytest.param(dict(device="cuda", n_gpus=2), marks=two_gpus, id="two gpus"),
]


def test_the_shuffled_query_does_change_order():
    # The oracle of the tests below reorders for sure: two reads, two orders, the same rows.
    query = shuffled(rows(1_000, 1).lazy())
    a, b = query.collect(), query.collect()
    assert not a["id"].equals(b["id"]) and a.sort("id").equals(b.sort("id"))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("order", ["join", "join, shuffled"])
def test_an_unordered_query_trains_on_each_rows_own_labels(frames, device, order):
    join, holdout = frames
    query = join if order == "join" else shuffled(join)
    params = dict(
        target="y", features=FEATURES, objective="binary:logistic", n_estimators=20, max_depth=6, **device
    )
    want = auc(polars_gbt.train(query.collect(), **params), holdout)
    assert want > 0.85
    for _ in range(2):
        got = auc(polars_gbt.train(query, **params), holdout)
        assert abs(got - want) < 0.01, f"streamed {got:.4f}, collected {want:.4f}"


@pytest.mark.parametrize("device", DEVICES)
def test_weights_and_query_ids_travel_with_their_rows(frames, device):
    join, holdout = frames
    weighted = dict(target="y", features=FEATURES, objective="binary:logistic", weight="w", n_estimators=20)
    weighted |= dict(max_depth=5, subsample=0.8, **device)
    want = auc(polars_gbt.train(join.collect(), **weighted), holdout)
    assert abs(auc(polars_gbt.train(shuffled(join), **weighted), holdout) - want) < 0.01
    # Ranking: groups contiguous but in another order each read, rows reordered within.
    ranking = dict(target="grade", features=FEATURES, objective="rank:ndcg", group="q", n_estimators=15)
    ranking |= dict(max_depth=4, eval_metric="ndcg@10", **device)
    query = groups_shuffled(join)

    def ndcg(m: polars_gbt.Model) -> float:
        return m.evals_result()["valid-ndcg@10"][-1]

    want = ndcg(polars_gbt.train(query.collect(), eval_df=holdout, **ranking))
    got = ndcg(polars_gbt.train(query, eval_df=holdout, **ranking))
    assert want > 0.8 and abs(got - want) < 0.01, f"streamed {got:.4f}, collected {want:.4f}"


def changing(table: pa.Table, column: str, values: np.ndarray):
    """A callable giving a fresh Arrow stream of `table` each time, `column` replaced by
    `values` from the fourth read on (a fit opens a callable four times: for its columns, to
    count the rows, then for its two passes; so the files were rewritten between the
    passes); and its reads."""
    reads: list[int] = []

    def open_stream() -> pa.RecordBatchReader:
        t = table if len(reads) < 3 else table.set_column(table.schema.get_field_index(column), column, pa.array(values))
        reads.append(1)
        return pa.RecordBatchReader.from_batches(t.schema, t.to_batches(max_chunksize=7_000))

    return open_stream, reads


def test_a_source_whose_rows_change_between_reads_is_an_error(frames):
    join, _ = frames
    table = join.collect().select(*FEATURES, "y", "w").to_arrow()
    # One label flipped on the second read: the same count, other rows.
    y = table["y"].to_numpy().copy()
    y[123] = 1 - y[123]
    source, reads = changing(table, "y", y)
    with pytest.raises(polars_gbt.DataError, match="other rows when read again") as e:
        polars_gbt.train(source, target="y", weight="w", objective="binary:logistic", device="cpu")
    assert "the same number (40000) but other labels" in str(e.value)
    assert len(reads) == 4, "no fit after the last read"
    # So are weights that changed.
    source, _ = changing(table, "w", np.ones(table.num_rows))
    with pytest.raises(polars_gbt.DataError, match="other rows when read again"):
        polars_gbt.train(source, target="y", weight="w", device="cpu")


def test_cross_validation_of_an_unordered_query_reads_it_once(frames):
    # cv collects its data once: the folds' rows keep their labels whatever order the query gives.
    join, _ = frames
    params = dict(target="y", features=FEATURES, objective="binary:logistic", n_estimators=10, max_depth=4)
    params |= dict(nfold=3, metrics="auc", seed=2)
    collected = polars_gbt.cv(join.collect(), **params)["test-auc-mean"][-1]
    streamed = polars_gbt.cv(shuffled(join), **params)["test-auc-mean"][-1]
    assert collected > 0.83 and abs(streamed - collected) < 0.01
