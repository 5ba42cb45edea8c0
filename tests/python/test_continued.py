"""Continued training from Python (issue 16): ``init_model`` in ``gbt.fit`` and
``polars_gbt.train``; oracle: the fit of all the rounds at once (without sampling they are the
same trees), and XGBoost's own continued training (``xgb_model``) for the shape of the API."""

import numpy as np
import polars as pl
import pytest

import polars_gbt

FEATURES = ["a", "b", "c"]


@pytest.fixture(scope="module")
def df():
    rng = np.random.default_rng(5)
    n = 2000
    a, b, c = rng.normal(size=(3, n))
    c[rng.random(n) < 0.1] = np.nan
    y = (a - b * c + rng.normal(scale=0.3, size=n) > 0).astype(np.float64)
    return pl.DataFrame({"a": a, "b": b, "c": c, "y": y}).fill_nan(None)


def fit(df, **params):
    return polars_gbt.Model.from_bytes(
        df.select(pl.col(FEATURES).gbt.fit("y", objective="binary:logistic", max_depth=3, **params)).item()
    )


def test_eight_rounds_then_eight_more_are_the_sixteen_round_model(df):
    first = fit(df, n_estimators=8)
    joined = fit(df, n_estimators=8, init_model=first)
    whole = fit(df, n_estimators=16)
    assert joined.num_trees == 16
    assert joined.trees_to_dataframe().equals(whole.trees_to_dataframe())
    assert joined.predict(df).to_list() == whole.predict(df).to_list()
    # The same through polars_gbt.train, with the model's bytes or a saved file.
    assert polars_gbt.train(df, target="y", objective="binary:logistic", max_depth=3, n_estimators=8,
                            init_model=first.to_bytes()).trees_to_dataframe().equals(whole.trees_to_dataframe())


def test_continued_training_refreshes_a_model_on_new_rows(df, tmp_path):
    old, new = df.head(1000), df.tail(1000)
    first = fit(old, n_estimators=10)
    first.save(tmp_path / "m.plgbt")
    refreshed = fit(new, n_estimators=10, init_model=tmp_path / "m.plgbt")
    assert refreshed.num_trees == 20
    logloss = lambda m: -np.mean(  # noqa: E731
        new["y"].to_numpy() * np.log(m.predict(new).to_numpy())
        + (1 - new["y"].to_numpy()) * np.log(1 - m.predict(new).to_numpy())
    )
    assert logloss(refreshed) < logloss(first)


def test_continuing_with_other_columns_or_margins_is_a_clear_error(df):
    first = fit(df, n_estimators=3)
    with pytest.raises(pl.exceptions.ComputeError, match="same columns"):
        df.select(pl.col("a", "b").gbt.fit("y", objective="binary:logistic", init_model=first)).item()
    with pytest.raises(pl.exceptions.ComputeError, match="binary:logistic"):
        df.select(pl.col(FEATURES).gbt.fit("y", init_model=first)).item()
    with pytest.raises(pl.exceptions.ComputeError, match="base_margin"):
        df.select(
            pl.col(FEATURES).gbt.fit("y", objective="binary:logistic", base_margin=pl.lit(0.0), init_model=first)
        ).item()
