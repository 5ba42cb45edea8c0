"""Model slicing and ``iteration_range`` (issue 16): ``Model.slice``, ``model[a:b]``, and
``iteration_range`` in ``gbt.predict``, ``Model.predict`` and the estimators. Oracles: a slice
scores as ``iteration_range``, the rounds of XGBoost's own ``iteration_range`` on an imported
model, and slices adding up to the whole."""

import numpy as np
import polars as pl
import pytest
import xgboost as xgb

import polars_gbt
from polars_gbt.sklearn import GBTClassifier


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(800, 4))
    y = (x[:, 0] + x[:, 1] * x[:, 2] > 0).astype(np.int64) + (x[:, 3] > 1)
    return pl.DataFrame({f"f{i}": x[:, i] for i in range(4)} | {"y": y})


FEATURES = [f"f{i}" for i in range(4)]


def test_iteration_range_scores_as_the_slice(data):
    model = polars_gbt.train(data, target="y", objective="multi:softprob", num_class=3, n_estimators=12)
    assert (model.num_rounds, model.num_trees) == (12, 36)
    for start, end in ((0, 5), (3, 9), (7, 0)):
        ranged = model.predict(data, iteration_range=(start, end), output="margin")
        sliced = model.slice(start, end).predict(data, output="margin")
        assert ranged.equals(sliced), (start, end)
    assert model.predict(data, iteration_range=(0, 0)).equals(model.predict(data))
    assert model[2:6].to_bytes() == model.slice(2, 6).to_bytes()
    assert model[-1].num_trees == 3 and model[::3].num_rounds == 4


def test_slices_add_up_to_the_whole(data):
    model = polars_gbt.train(data.with_columns(pl.col("y").cast(pl.Float64)), target="y", n_estimators=10)
    whole = model.predict(data, output="margin").to_numpy()
    rounds = [model.slice(r, r + 1).predict(data, output="margin").to_numpy() for r in range(10)]
    # Each one-round slice is the base score plus its tree: ten of them carry the base score
    # nine times more than the whole model, the same on every row.
    base = (sum(rounds) - whole) / 9.0
    np.testing.assert_allclose(base, base[0], atol=1e-4)
    halves = model[:6].predict(data, output="margin").to_numpy() + model[6:].predict(data, output="margin").to_numpy()
    np.testing.assert_allclose(halves - base, whole, atol=1e-4)


def test_imported_xgboost_slices_predict_as_xgboost(data):
    x, y = data.select(FEATURES).to_numpy(), data["y"].to_numpy()
    booster = xgb.train({"objective": "multi:softprob", "num_class": 3, "max_depth": 3}, xgb.DMatrix(x, y), 8)
    model = polars_gbt.Model.from_xgboost(bytes(booster.save_raw("json")))
    frame = pl.DataFrame(x, schema=model.feature_names)
    for start, end in ((0, 3), (2, 7), (5, 8)):
        want = booster.predict(xgb.DMatrix(x), iteration_range=(start, end))
        got = np.stack(model.predict(frame, iteration_range=(start, end)).to_list())
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_model_columns_take_iteration_range(data):
    models = (
        data.with_columns(group=pl.col("f0") > 0)
        .group_by("group")
        .agg(model=pl.col(FEATURES).gbt.fit(pl.col("y").cast(pl.Float64), n_estimators=8))
    )
    rows = data.with_columns(group=pl.col("f0") > 0).join(models, on="group")
    got = rows.select(pl.col(FEATURES).gbt.predict(pl.col("model"), iteration_range=(1, 4))).to_series()
    want = np.full(rows.height, np.nan)
    for key, model in models.iter_rows():
        mine = (rows["group"] == key).to_numpy()
        want[mine] = polars_gbt.Model.from_bytes(model).slice(1, 4).predict(rows.filter(mine)).to_numpy()
    np.testing.assert_allclose(got.to_numpy(), want, rtol=1e-6)
    with pytest.raises((pl.exceptions.ComputeError, ValueError), match="has 8 rounds"):
        rows.select(pl.col(FEATURES).gbt.predict(pl.col("model"), iteration_range=(0, 9)))


def test_estimators_take_iteration_range(data):
    X, y = data.select(FEATURES), data["y"].to_numpy()
    clf = GBTClassifier(n_estimators=10).fit(X, y)
    sliced = clf.get_booster().slice(0, 4)
    want = np.stack(sliced.predict(X).to_list())
    np.testing.assert_allclose(clf.predict_proba(X, iteration_range=(0, 4)), want / want.sum(axis=1, keepdims=True))
    assert (clf.predict(X, iteration_range=(0, 4)) == want.argmax(axis=1)).all()


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda m, d: m.slice(3, 3), ValueError, "holds no round"),
        (lambda m, d: m.slice(0, 11), ValueError, "has 10 rounds"),
        (lambda m, d: m.slice(0, 5, 0), ValueError, "step"),
        (lambda m, d: m.slice(-1, 5), ValueError, "integer >= 0"),
        (lambda m, d: m[10], IndexError, "out of range"),
        (lambda m, d: m[5:2], IndexError, "hold no round"),
        (lambda m, d: m["a"], TypeError, "indexed by rounds"),
        (lambda m, d: m.predict(d, iteration_range=(4, 2)), ValueError, "holds no round"),
        (lambda m, d: m.predict(d, iteration_range=(0, 12)), (pl.exceptions.ComputeError, ValueError), "has 10 rounds"),
        (lambda m, d: m.predict(d, iteration_range=5), ValueError, r"\(start, end\)"),
    ],
)
def test_bad_ranges_are_errors_that_say_why(data, call, error, words):
    model = polars_gbt.train(data.with_columns(pl.col("y").cast(pl.Float64)), target="y", n_estimators=10)
    with pytest.raises(error, match=words):
        call(model, data)
