"""SHAP values (issue 16, point 1): ``output="contrib"``. Oracles: XGBoost's ``pred_contribs``
and LightGBM's ``pred_contrib`` on the same models imported, and for our own models the
additivity every SHAP value obeys (the values and the bias sum to the margin)."""

import lightgbm as lgb
import numpy as np
import polars as pl
import pytest
import xgboost as xgb

import polars_gbt
from polars_gbt.sklearn import GBTClassifier, GBTRegressor


def data(n=600, nf=5, seed=0, missing=0.15):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, nf)).astype(np.float32)
    y = X[:, 0] + 0.5 * X[:, 1] * X[:, 2] - (X[:, 3] > 0.3) + rng.normal(scale=0.3, size=n)
    X[rng.random(size=X.shape) < missing] = np.nan
    return X, y


def frame(X):
    return pl.DataFrame({f"f{j}": X[:, j] for j in range(X.shape[1])}).fill_nan(None)


def assert_close(ours, theirs):
    scale = np.abs(theirs).max()
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5 * scale)


@pytest.mark.parametrize(
    "params",
    [
        {"objective": "reg:squarederror"},
        {"objective": "binary:logistic"},
        {"objective": "multi:softprob", "num_class": 3},
    ],
    ids=["regression", "binary", "multiclass"],
)
def test_contributions_of_imported_xgboost_models_equal_xgboosts(params, tmp_path):
    X, y = data()
    label = {"reg:squarederror": y, "binary:logistic": (y > 0), "multi:softprob": np.digitize(y, [-0.5, 0.5])}
    d = xgb.DMatrix(X, label=label[params["objective"]].astype(np.float32))
    xparams = {**params, "max_depth": 5, "eta": 0.3}
    if "num_class" not in params:
        xparams["base_score"] = 0.2  # a bias that is not the default's
    booster = xgb.train(xparams, d, 12)
    booster.save_model(tmp_path / "m.json")
    model = polars_gbt.Model.from_xgboost(tmp_path / "m.json")
    theirs = booster.predict(xgb.DMatrix(X), pred_contribs=True)
    ours = model.predict(frame(X), output="contrib").to_numpy()
    assert ours.shape == theirs.shape
    assert_close(ours, theirs)


def test_contributions_of_imported_xgboost_categorical_models_equal_xgboosts(tmp_path):
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(3)
    n = 800
    colour = rng.choice(["red", "green", "blue", "grey", "pink", "teal"], size=n)
    x = rng.normal(size=n)
    y = (np.isin(colour, ["red", "teal"]) * 1.5 + x + rng.normal(scale=0.2, size=n)).astype(np.float32)
    x[rng.random(n) < 0.1] = np.nan
    cats = sorted(set(colour))
    pdf = pd.DataFrame({"colour": pd.Categorical(colour, categories=cats), "x": x})
    d = xgb.DMatrix(pdf, label=y, enable_categorical=True)
    booster = xgb.train({"max_depth": 4, "eta": 0.3, "max_cat_to_onehot": 1}, d, 10)
    booster.save_model(tmp_path / "m.json")
    model = polars_gbt.Model.from_xgboost(tmp_path / "m.json")
    df = pl.DataFrame({"colour": pl.Series(colour).cast(pl.Enum(cats)), "x": x}).fill_nan(None)
    ours = model.predict(df, output="contrib").to_numpy()
    theirs = booster.predict(d, pred_contribs=True)
    assert_close(ours, theirs)


@pytest.mark.parametrize("objective", ["regression", "binary"])
def test_contributions_of_imported_lightgbm_models_equal_lightgbms(objective, tmp_path):
    X, y = data(seed=1)
    label = y if objective == "regression" else (y > 0).astype(float)
    booster = lgb.train(
        {"objective": objective, "num_leaves": 15, "learning_rate": 0.2, "min_data_in_leaf": 5, "verbose": -1},
        lgb.Dataset(X.astype(np.float64), label=label, feature_name=[f"f{j}" for j in range(X.shape[1])]),
        num_boost_round=10,
    )
    booster.save_model(tmp_path / "m.txt")
    model = polars_gbt.Model.from_lightgbm(tmp_path / "m.txt")
    theirs = booster.predict(X.astype(np.float64), pred_contrib=True)
    ours = model.predict(frame(X), output="contrib").to_numpy()
    assert_close(ours, theirs)


@pytest.mark.parametrize("objective", ["binary:logistic", "multi:softprob"])
def test_our_models_contributions_sum_to_the_margin_with_or_without_base_margin(objective):
    X, y = data(seed=2)
    df = frame(X).with_columns(y=pl.Series(np.digitize(y, [-0.5, 0.5]) if objective != "binary:logistic" else (y > 0)))
    params = dict(objective=objective, n_estimators=15, max_depth=4)
    if objective == "multi:softprob":
        params["num_class"] = 3
    model = polars_gbt.train(df, target="y", **params)
    features = df.drop("y")
    contrib = model.predict(features, output="contrib").to_numpy()
    margin = model.predict(features, output="margin").to_numpy()
    np.testing.assert_allclose(contrib.sum(axis=-1), margin, rtol=1e-5, atol=1e-5)
    # A base margin replaces the bias's base score, and nothing else.
    k = 1 if objective == "binary:logistic" else 3
    base = np.linspace(-1, 1, len(df) * k, dtype=np.float32).reshape(len(df), k).squeeze()
    moved = model.predict(features, output="contrib", base_margin=base).to_numpy()
    np.testing.assert_array_equal(moved[..., :-1], contrib[..., :-1])
    np.testing.assert_allclose(moved.sum(axis=-1), model.predict(features, output="margin", base_margin=base).to_numpy(),
                               rtol=1e-5, atol=1e-5)


def test_contribution_frames_estimators_and_model_columns_agree():
    X, y = data(seed=4)
    df = frame(X)
    reg = GBTRegressor(n_estimators=10, max_depth=3).fit(df, y)
    values = reg.predict(df, pred_contribs=True)
    assert values.shape == (len(df), X.shape[1] + 1)
    model = polars_gbt.Model.from_bytes(reg.model_)
    table = model.contributions(df)
    assert table.columns == [*df.columns, "bias"]
    np.testing.assert_allclose(table.to_numpy(), values, rtol=1e-6)
    # Through a model column the values are the same, flat.
    by_column = df.with_columns(m=pl.lit(reg.model_, dtype=pl.Binary)).select(
        c=pl.col(df.columns).gbt.predict(pl.col("m"), output="contrib")
    )["c"]
    assert by_column.dtype == pl.List(pl.Float32)
    np.testing.assert_array_equal(np.stack(by_column.to_list()), values.astype(np.float32))

    labels = np.digitize(y, [-0.5, 0.5])
    clf = GBTClassifier(n_estimators=8, max_depth=3).fit(df, labels)
    per_class = clf.predict(df, pred_contribs=True)
    assert per_class.shape == (len(df), 3, X.shape[1] + 1)
    long = polars_gbt.Model.from_bytes(clf.model_).contributions(df)
    assert long.columns == ["class", *df.columns, "bias"]
    np.testing.assert_allclose(long.drop("class").to_numpy(), per_class.reshape(-1, X.shape[1] + 1), rtol=1e-6)


def test_plot_contributions_orders_features_by_mean_absolute_value():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    X, y = data(seed=5, missing=0.0)
    df = frame(X)
    model = polars_gbt.train(df.with_columns(y=pl.Series(3 * X[:, 2] + 0.1 * X[:, 0])), target="y", n_estimators=10)
    strength = model.contributions(df).drop("bias").select(pl.all().abs().mean()).row(0, named=True)
    want = [f for f, v in sorted(strength.items(), key=lambda kv: -kv[1]) if v > 0]
    for kind in ("bar", "beeswarm"):
        ax = polars_gbt.plot_contributions(model, df, kind=kind)
        ticks = zip(ax.get_yticks(), (t.get_text() for t in ax.get_yticklabels()))
        top_down = [label for _, label in sorted(ticks, key=lambda t: -t[0])]
        assert top_down == want and top_down[0] == "f2"
    with pytest.raises(ValueError, match="kind"):
        polars_gbt.plot_contributions(model, df, kind="pie")


@pytest.mark.parametrize(
    "params",
    [{"objective": "reg:squarederror"}, {"objective": "multi:softprob", "num_class": 3}],
    ids=["regression", "multiclass"],
)
def test_interaction_values_of_imported_xgboost_models_equal_xgboosts(params, tmp_path):
    X, y = data(n=300, seed=6)
    label = y if "num_class" not in params else np.digitize(y, [-0.5, 0.5])
    d = xgb.DMatrix(X, label=label.astype(np.float32))
    booster = xgb.train({**params, "max_depth": 4, "eta": 0.3}, d, 8)
    booster.save_model(tmp_path / "m.json")
    model = polars_gbt.Model.from_xgboost(tmp_path / "m.json")
    theirs = booster.predict(xgb.DMatrix(X), pred_interactions=True)
    ours = model.predict(frame(X), output="interaction").to_numpy()
    assert ours.shape == theirs.shape
    assert_close(ours, theirs)
    # Each matrix row sums to that feature's SHAP value.
    np.testing.assert_allclose(ours.sum(axis=-1), model.predict(frame(X), output="contrib").to_numpy(),
                               rtol=1e-5, atol=1e-5)


def test_estimators_give_interaction_matrices():
    X, y = data(n=200, seed=7)
    reg = GBTRegressor(n_estimators=5, max_depth=3).fit(frame(X), y)
    m = reg.predict(frame(X), pred_interactions=True)
    assert m.shape == (200, X.shape[1] + 1, X.shape[1] + 1)
    np.testing.assert_allclose(m, np.swapaxes(m, 1, 2), atol=1e-5)  # symmetric
    np.testing.assert_allclose(m.sum(axis=(1, 2)), reg.predict(frame(X)), rtol=1e-5, atol=1e-5)
