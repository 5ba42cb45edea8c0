"""Base margins at prediction (issue 17): a model fit with ``base_margin`` adds no intercept
of its own, so its predictions are only right when the same margins are given at predict
time. Oracle: XGBoost scoring the same trees (our model exported as XGBoost JSON) with its
own ``base_margin``, whose margin output is the given margin plus the trees' sum."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
import xgboost as xgb
from conftest import DATA, FEATURES, load

import polars_gbt
from polars_gbt.sklearn import GBTClassifier, GBTRegressor

RTOL, ATOL = 1e-5, 1e-5


def xgboost_of(model: polars_gbt.Model, tmp_path) -> xgb.Booster:
    path = tmp_path / "model.json"
    model.save_xgboost(path)
    return xgb.Booster(model_file=str(path))


def dm(X: np.ndarray, base_margin: np.ndarray) -> xgb.DMatrix:
    """XGBoost's data with our feature names (f0, f1, ...)."""
    return xgb.DMatrix(X, base_margin=base_margin, feature_names=[f"f{i}" for i in range(X.shape[1])])


def higgs(n: int) -> pl.DataFrame:
    df = load(DATA / "binary_classification" / "binary.train").head(n)
    rng = np.random.default_rng(3)
    return df.with_columns(m=pl.Series(rng.normal(0.0, 1.0, df.height), dtype=pl.Float32))


def test_binary_margin_at_predict_time_is_the_given_margin_plus_the_trees(tmp_path):
    df = higgs(2000)
    model = polars_gbt.train(df, target="y", base_margin="m", objective="binary:logistic", n_estimators=10)
    assert model.feature_names == FEATURES  # the margin column is no feature
    X, bm = df.select(FEATURES).to_numpy(), df["m"].to_numpy()
    booster = xgboost_of(model, tmp_path)
    want_margin = booster.predict(dm(X, bm), output_margin=True)
    want_value = booster.predict(dm(X, bm))
    # The trees' sum alone (no margin given) differs from it by exactly the margin.
    trees_only = booster.predict(dm(X, np.zeros_like(bm)), output_margin=True)
    np.testing.assert_allclose(want_margin - trees_only, bm, rtol=RTOL, atol=ATOL)

    margin = df.select(pl.col(FEATURES).gbt.predict(model, output="margin", base_margin="m"))["f0"].to_numpy()
    np.testing.assert_allclose(margin, want_margin, rtol=RTOL, atol=ATOL)
    value = df.select(pl.col(FEATURES).gbt.predict(model, base_margin=pl.col("m")))["f0"].to_numpy()
    np.testing.assert_allclose(value, want_value, rtol=RTOL, atol=ATOL)
    # Model.predict: a column name, or values.
    np.testing.assert_allclose(model.predict(df, base_margin="m").to_numpy(), want_value, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(model.predict(df, output="margin", base_margin=bm).to_numpy(), want_margin, rtol=RTOL, atol=ATOL)
    # Lazy and streaming too.
    lazy = df.lazy().select(pl.col(FEATURES).gbt.predict(model, base_margin="m")).collect(engine="streaming")
    np.testing.assert_allclose(lazy["f0"].to_numpy(), want_value, rtol=RTOL, atol=ATOL)


def test_multiclass_margins_are_n_by_k_in_fit_and_predict(tmp_path):
    df = load(DATA / "multiclass_classification" / "multiclass.train").head(3000)
    rng = np.random.default_rng(5)
    bm = rng.normal(0.0, 0.5, (df.height, 5)).astype(np.float32)
    for dtype in (pl.Array(pl.Float32, 5), pl.List(pl.Float64)):
        frame = df.with_columns(m=pl.Series(bm.tolist(), dtype=dtype))
        model = polars_gbt.train(
            frame, target="y", base_margin="m", objective="multi:softprob", num_class=5, n_estimators=5
        )
        assert model.params["base_score"] is None
        booster = xgboost_of(model, tmp_path)
        X = frame.select(FEATURES).to_numpy()
        want_margin = booster.predict(dm(X, bm), output_margin=True)
        want_value = booster.predict(dm(X, bm))
        out = frame.select(pl.col(FEATURES).gbt.predict(model, output="margin", base_margin="m"))["f0"]
        assert out.dtype == pl.Array(pl.Float32, 5)
        np.testing.assert_allclose(np.stack(out.to_list()), want_margin, rtol=RTOL, atol=ATOL)
        value = np.stack(model.predict(frame, base_margin="m").to_list())
        np.testing.assert_allclose(value, want_value, rtol=RTOL, atol=ATOL)


def test_training_used_the_margins():
    """The fit learns the residual of the offset: with the margin given, predictions fit the
    label; without it they are off by the margin."""
    rng = np.random.default_rng(11)
    x = rng.uniform(0, 1, 4000)
    offset = rng.normal(0.0, 3.0, 4000)
    df = pl.DataFrame({"x": x, "m": offset, "y": np.sin(6 * x) + offset})
    model = polars_gbt.train(df, target="y", base_margin="m", n_estimators=50, max_depth=4)
    with_margin = model.predict(df, base_margin="m").to_numpy()
    without = model.predict(df).to_numpy()
    assert np.sqrt(np.mean((with_margin - df["y"].to_numpy()) ** 2)) < 0.05
    np.testing.assert_allclose(with_margin - without, offset, rtol=1e-5, atol=1e-4)


def test_estimators_take_base_margin_in_fit_and_predict(tmp_path):
    df = higgs(2000)
    X, y, bm = df.select(FEATURES).to_numpy(), df["y"].to_numpy(), df["m"].to_numpy()
    clf = GBTClassifier(n_estimators=8).fit(X, y, base_margin=bm)
    booster = xgboost_of(polars_gbt.Model.from_bytes(clf.model_), tmp_path)
    want = booster.predict(dm(X, bm))
    np.testing.assert_allclose(clf.predict_proba(X, base_margin=bm)[:, 1], want, rtol=RTOL, atol=ATOL)
    np.testing.assert_array_equal(clf.predict(X, base_margin=bm), (want > 0.5).astype(y.dtype))

    reg = GBTRegressor(n_estimators=8).fit(X, y, base_margin=bm)
    booster = xgboost_of(polars_gbt.Model.from_bytes(reg.model_), tmp_path)
    want = booster.predict(dm(X, bm))
    np.testing.assert_allclose(reg.predict(X, base_margin=bm), want, rtol=RTOL, atol=ATOL)

    # Three classes: rows x classes margins.
    y3 = (df["f0"].to_numpy() > 1.0).astype(int) + y.astype(int)
    bm3 = np.random.default_rng(2).normal(0, 1, (len(y3), 3))
    clf3 = GBTClassifier(n_estimators=4).fit(X, y3, base_margin=bm3)
    booster = xgboost_of(polars_gbt.Model.from_bytes(clf3.model_), tmp_path)
    want = booster.predict(dm(X, bm3.astype(np.float32)))
    np.testing.assert_allclose(clf3.predict_proba(X, base_margin=bm3), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    ("margin", "message"),
    [
        (pl.Series([[0.0, 1.0]] * 4, dtype=pl.Array(pl.Float32, 2)), "has 2 values per row; the model has 1 outputs"),
        (pl.Series([0.0, None, 1.0, 2.0]), "base_margin"),
        (pl.Series([0.0, float("nan"), 1.0, 2.0]), "must be finite"),
    ],
)
def test_bad_margins_at_predict_time_name_the_problem(margin, message):
    df = pl.DataFrame({"x": [0.0, 1.0, 2.0, 3.0] * 10, "y": [0.0, 1.0, 0.0, 1.0] * 10})
    model = polars_gbt.train(df, target="y", n_estimators=2)
    frame = df.head(4).with_columns(m=margin)
    with pytest.raises(polars_gbt.GbtError, match=message):
        with polars_gbt.translate_errors():
            frame.select(pl.col("x").gbt.predict(model, base_margin="m"))
