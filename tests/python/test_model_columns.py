"""Model columns (issue 15, point 2): ``gbt.predict`` given an expression of model bytes scores
each row with its own row's model; the oracle is scoring each group with its model as a
constant."""

import numpy as np
import polars as pl
import pytest

import polars_gbt  # noqa: F401

FEATURES = ["a", "b", "c"]
PARAMS = dict(n_estimators=8, max_depth=3, learning_rate=0.3)


@pytest.fixture(scope="module")
def stores():
    rng = np.random.default_rng(7)
    n = 1200
    store = rng.integers(0, 5, size=n)
    a, b, c = rng.normal(size=(3, n))
    y = np.where(store % 2 == 0, a, -a) + 0.5 * b * store + rng.normal(scale=0.1, size=n)
    return pl.DataFrame({"store": store, "a": a, "b": b, "c": c, "y": y}).with_columns(
        pl.when(pl.col("c") > 1.0).then(None).otherwise(pl.col("c")).alias("c")
    )


@pytest.fixture(scope="module")
def models(stores):
    return stores.group_by("store").agg(pl.col(FEATURES).gbt.fit("y", **PARAMS).alias("model")).sort("store")


def per_group_oracle(df, models, **kwargs):
    """Each store's rows scored with its model as a constant, put back in row order."""
    parts = []
    for store, model in models.iter_rows():
        rows = df.with_row_index("i").filter(pl.col("store") == store)
        parts.append(rows.select("i", p=pl.col(FEATURES).gbt.predict(model, **kwargs)))
    return pl.concat(parts).sort("i")["p"]


def test_the_per_group_workflow_fit_join_score_equals_scoring_each_group(stores, models):
    joined = stores.join(models, on="store", how="left", maintain_order="left")
    got = joined.select(p=pl.col(FEATURES).gbt.predict(pl.col("model")))["p"]
    assert got.dtype == pl.Float32
    assert got.to_list() == per_group_oracle(stores, models).to_list()


def test_one_lazy_query_and_the_streaming_engine_give_the_same_scores(stores, models):
    eager = (
        stores.join(models, on="store", maintain_order="left")
        .select(p=pl.col(FEATURES).gbt.predict(pl.col("model")))["p"]
        .to_list()
    )
    query = (
        stores.lazy()
        .join(models.lazy(), on="store", maintain_order="left")
        .select(p=pl.col(FEATURES).gbt.predict(pl.col("model")))
    )
    assert query.collect()["p"].to_list() == eager
    assert query.collect(engine="streaming")["p"].to_list() == eager


def test_rows_without_a_model_get_null(stores, models):
    some = models.filter(pl.col("store") != 3)
    got = stores.join(some, on="store", how="left", maintain_order="left").select(
        "store", p=pl.col(FEATURES).gbt.predict(pl.col("model"))
    )
    assert got.filter(pl.col("store") == 3)["p"].null_count() == (stores["store"] == 3).sum()
    assert got.filter(pl.col("store") != 3)["p"].null_count() == 0
    want = per_group_oracle(stores.filter(pl.col("store") != 3), some)
    assert got.filter(pl.col("store") != 3)["p"].to_list() == want.to_list()


def test_leaves_of_a_model_column_are_lists_equal_to_the_constant_models(stores, models):
    got = stores.join(models, on="store", maintain_order="left").select(
        p=pl.col(FEATURES).gbt.predict(pl.col("model"), output="leaf")
    )["p"]
    assert got.dtype == pl.List(pl.UInt32)
    want = per_group_oracle(stores, models, output="leaf")
    assert got.to_list() == want.to_list()


def test_a_literal_model_column_scores_like_the_constant(stores, models):
    model = models["model"][0]
    got = stores.select(p=pl.col(FEATURES).gbt.predict(pl.lit(model, dtype=pl.Binary)))["p"]
    want = stores.select(p=pl.col(FEATURES).gbt.predict(model))["p"]
    assert got.to_list() == want.to_list()


def test_base_margins_go_with_model_columns(stores, models):
    df = stores.with_columns(m=pl.col("a") * 0.1)
    got = df.join(models, on="store", maintain_order="left").select(
        p=pl.col(FEATURES).gbt.predict(pl.col("model"), output="margin", base_margin="m")
    )["p"]
    want = per_group_oracle(df, models, output="margin", base_margin="m")
    assert got.to_list() == want.to_list()


def test_multiclass_model_columns_need_num_class(stores):
    df = stores.with_columns(k=(pl.col("y") > 0).cast(pl.Int32) + (pl.col("y") > 1).cast(pl.Int32))
    params = dict(PARAMS, objective="multi:softprob", num_class=3)
    models = df.group_by("store").agg(pl.col(FEATURES).gbt.fit("k", **params).alias("model"))
    joined = df.join(models, on="store", maintain_order="left")
    with pytest.raises(pl.exceptions.ComputeError, match="num_class=3"):
        joined.select(pl.col(FEATURES).gbt.predict(pl.col("model")))
    got = joined.select(p=pl.col(FEATURES).gbt.predict(pl.col("model"), num_class=3))["p"]
    assert got.dtype == pl.Array(pl.Float32, 3)
    want = per_group_oracle(df, models.sort("store"))
    assert got.to_list() == want.to_list()
    with pytest.raises(pl.exceptions.ComputeError, match="not num_class=4"):
        joined.select(pl.col(FEATURES).gbt.predict(pl.col("model"), num_class=4))


def test_a_model_missing_a_column_is_named(stores):
    with_b = stores.filter(pl.col("store") == 0).select(
        "store", model=pl.col("a", "b").gbt.fit("y", **PARAMS)
    )
    with_c = stores.filter(pl.col("store") == 1).select(
        "store", model=pl.col("a", "c").gbt.fit("y", **PARAMS)
    ).head(1)
    models = pl.concat([with_b.head(1), with_c])
    df = stores.filter(pl.col("store") <= 1).join(models, on="store")
    with pytest.raises(pl.exceptions.ComputeError, match=r"\bc\b"):
        df.select(pl.col("a", "b").gbt.predict(pl.col("model")))


def test_bad_model_columns_are_clear_errors(stores, models):
    with pytest.raises(pl.exceptions.ComputeError, match="Binary"):
        stores.select(pl.col(FEATURES).gbt.predict(pl.col("store")))
    junk = stores.with_columns(model=pl.lit(b"not a model at all, sorry", dtype=pl.Binary))
    with pytest.raises(pl.exceptions.ComputeError, match="row 0 does not hold a model"):
        junk.select(pl.col(FEATURES).gbt.predict(pl.col("model")))
    with pytest.raises(ValueError, match="num_class"):
        pl.col(FEATURES).gbt.predict(models["model"][0], num_class=3)


@pytest.mark.skipif(not polars_gbt.cuda_available(), reason="no usable GPU")
def test_model_columns_score_on_the_gpu_as_on_the_cpu(stores, models):
    joined = stores.join(models, on="store", maintain_order="left")
    for output in ("margin", "value", "leaf"):
        cpu, gpu = (
            joined.select(p=pl.col(FEATURES).gbt.predict(pl.col("model"), output=output, device=d))["p"]
            for d in ("cpu", "cuda")
        )
        if output == "leaf":
            assert gpu.to_list() == cpu.to_list()
        else:
            np.testing.assert_allclose(gpu.to_numpy(), cpu.to_numpy(), rtol=1e-6, atol=1e-6)
