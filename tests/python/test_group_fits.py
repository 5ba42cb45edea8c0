"""Group fits in one expression (issue 15, point 6): ``gbt.fit(..., by=key)`` trains a model per
key, the groups in parallel; each must equal the model trained on the group's rows alone."""

import numpy as np
import polars as pl
import pytest

import polars_gbt

FEATURES = ["a", "b", "c"]
PARAMS = dict(objective="binary:logistic", n_estimators=6, max_depth=3)


@pytest.fixture(scope="module")
def shops():
    rng = np.random.default_rng(11)
    n = 3000
    shop = rng.choice(["north", "south", "east", "west", "harbour", "airport"], size=n)
    a, b, c = rng.normal(size=(3, n))
    y = (a * (shop == "north") + b - 0.3 * c + rng.normal(scale=0.5, size=n) > 0).astype(np.float64)
    return pl.DataFrame({"shop": shop, "a": a, "b": b, "c": c, "y": y}).with_columns(
        pl.when(pl.col("c") > 1.2).then(None).otherwise(pl.col("c")).alias("c")
    )


def test_by_fits_equal_the_groups_fitted_alone_in_first_row_order(shops):
    out = shops.select(pl.col(FEATURES).gbt.fit("y", by="shop", **PARAMS)).unnest("model")
    assert out.columns == ["shop", "model"]
    assert out.schema["shop"] == pl.String
    assert out["shop"].to_list() == shops["shop"].unique(maintain_order=True).to_list()
    for shop, model in out.iter_rows():
        alone = shops.filter(pl.col("shop") == shop).select(pl.col(FEATURES).gbt.fit("y", **PARAMS)).item()
        assert model == alone, f"shop {shop}"
    # group_by().agg() gives the same models.
    agg = shops.group_by("shop", maintain_order=True).agg(pl.col(FEATURES).gbt.fit("y", **PARAMS).alias("model"))
    assert agg.equals(out)


def test_one_thread_per_fit_gives_the_same_trees(shops):
    def trees(**extra):
        out = shops.select(pl.col(FEATURES).gbt.fit("y", by="shop", **PARAMS, **extra)).unnest("model")
        return [polars_gbt.Model.from_bytes(m).trees_to_dataframe() for m in out["model"]]

    for x, y in zip(trees(), trees(n_jobs=1)):
        assert x.equals(y)


def test_by_fits_hold_out_each_groups_eval_rows(shops):
    df = shops.with_columns(valid=pl.int_range(pl.len()) % 5 == 0)
    params = dict(PARAMS, n_estimators=40, early_stopping_rounds=3, learning_rate=0.5)
    out = df.lazy().select(
        pl.col(FEATURES).gbt.fit("y", by="shop", eval_set=pl.col("valid"), **params)
    ).collect().unnest("model")
    for shop, model in out.iter_rows():
        alone = (
            df.filter(pl.col("shop") == shop)
            .select(pl.col(FEATURES).gbt.fit("y", eval_set=pl.col("valid"), **params))
            .item()
        )
        assert model == alone, f"shop {shop}"
        assert polars_gbt.Model.from_bytes(model).evals_result().height > 0


def test_models_by_key_score_their_rows_through_a_join(shops):
    models = shops.select(pl.col(FEATURES).gbt.fit("y", by="shop", **PARAMS)).unnest("model")
    scored = shops.join(models, on="shop", maintain_order="left").select(
        "shop", p=pl.col(FEATURES).gbt.predict(pl.col("model"))
    )
    for shop, model in models.iter_rows():
        rows = shops.filter(pl.col("shop") == shop)
        want = rows.select(pl.col(FEATURES).gbt.predict(model))["a"].to_list()
        assert scored.filter(pl.col("shop") == shop)["p"].to_list() == want


def test_a_failing_group_is_named(shops):
    bad = shops.with_columns(y=pl.when(pl.col("shop") == "harbour").then(7.0).otherwise(pl.col("y")))
    with pytest.raises(pl.exceptions.ComputeError, match="group shop=.*harbour.*labels"):
        bad.select(pl.col(FEATURES).gbt.fit("y", by="shop", **PARAMS))
    with pytest.raises(ValueError, match="verbose"):
        pl.col(FEATURES).gbt.fit("y", by="shop", verbose=True)
