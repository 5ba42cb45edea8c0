"""scikit-learn's own estimator checks, and use in its model-selection tools."""

from __future__ import annotations

import numpy as np
import pandas as pd
import polars as pl
import pytest
from sklearn.datasets import make_classification, make_regression
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import check_estimator

from polars_gbt import ColumnError, Model
from polars_gbt.sklearn import GBTClassifier, GBTRanker, GBTRegressor


@pytest.mark.parametrize("estimator", [GBTClassifier(n_estimators=20), GBTRegressor(n_estimators=20)])
def test_passes_scikit_learns_estimator_checks(estimator):
    # Every check passes, check_sample_weight_equivalence_on_dense_data too: whole weights
    # are applied after the gradients are rounded, exactly as repeated rows (src/tree/gradient.rs).
    check_estimator(estimator)


def test_pipeline_grid_search_and_cross_validation():
    X, y = make_classification(n_samples=600, n_features=8, random_state=0)
    pipe = make_pipeline(StandardScaler(), GBTClassifier(n_estimators=30))
    assert cross_val_score(pipe, X, y, cv=3).mean() > 0.85
    grid = GridSearchCV(GBTRegressor(), {"max_depth": [2, 4], "n_estimators": [10, 30]}, cv=3)
    Xr, yr = make_regression(n_samples=400, n_features=5, noise=1.0, random_state=0)
    grid.fit(Xr, yr)
    assert grid.best_params_["n_estimators"] == 30 and grid.best_score_ > 0.8
    assert np.isfinite(grid.predict(Xr)).all()


def test_accepts_polars_pandas_and_pyarrow_inputs():
    X, y = make_classification(n_samples=300, n_features=4, random_state=1)
    frames = {
        "numpy": X,
        "polars": pl.DataFrame(X, schema=[f"c{i}" for i in range(4)]),
        "pandas": pd.DataFrame(X, columns=[f"c{i}" for i in range(4)]),
        "pyarrow": pl.DataFrame(X, schema=[f"c{i}" for i in range(4)]).to_arrow(),
    }
    want = GBTClassifier(n_estimators=10).fit(X, y).predict_proba(X)
    for name, data in frames.items():
        got = GBTClassifier(n_estimators=10).fit(data, y).predict_proba(data)
        np.testing.assert_array_equal(got, want, err_msg=name)


def test_ranker_orders_documents_and_works_in_a_pipeline():
    rng = np.random.default_rng(0)
    n_queries, per = 60, 8
    X = rng.random((n_queries * per, 3))
    y = np.floor(X[:, 0] * 4)
    group = np.repeat(np.arange(n_queries), per)
    ranker = make_pipeline(StandardScaler(), GBTRanker(n_estimators=30, max_depth=3))
    ranker.fit(X, y, gbtranker__group=group)
    scores = ranker.predict(X)
    # Within each query the best-scored document has the highest relevance present.
    hits = [y[q * per + np.argmax(scores[q * per : (q + 1) * per])] == y[q * per : (q + 1) * per].max() for q in range(n_queries)]
    assert np.mean(hits) > 0.95
    with pytest.raises(ValueError, match="one query id per row"):
        GBTRanker().fit(X, y, group=group[:-1])


# --- data frames as they are -------------------------------------------------------------

FRAME_PARAMS = {"n_estimators": 15, "max_depth": 3}


def _mixed_frame(n: int = 400, seed: int = 0) -> pl.DataFrame:
    """A numeric column with nulls, a Categorical with nulls and a String column, and a target
    that depends on all three (the categories matter, and so does being missing)."""
    rng = np.random.default_rng(seed)
    size = rng.normal(size=n)
    size_missing = rng.random(n) < 0.15
    color = rng.choice(["red", "green", "blue"], size=n)
    color_missing = rng.random(n) < 0.1
    shop = rng.choice(["north", "south"], size=n)
    y = (
        np.where(size_missing, 3.0, size)
        + np.select([color_missing, color == "red", color == "green"], [-4.0, 2.0, -1.0], 0.5)
        + np.where(shop == "north", 1.5, 0.0)
    )
    return pl.DataFrame(
        {
            "size": pl.Series(np.where(size_missing, None, size).tolist(), dtype=pl.Float64),
            "color": pl.Series(np.where(color_missing, None, color).tolist(), dtype=pl.Categorical),
            "shop": shop.tolist(),
            "y": y,
        }
    )


def _as(kind: str, df: pl.DataFrame):
    if kind == "polars":
        return df
    if kind == "pandas":
        return df.to_pandas()
    return df.to_arrow()


@pytest.mark.parametrize("kind", ["polars", "pandas", "pyarrow"])
def test_a_frame_is_fitted_as_the_expression_fits_it(kind):
    df = _mixed_frame()
    X, y = df.drop("y"), df["y"].to_numpy()
    if kind == "pandas":
        # pandas holds the categorical column as `category`, nulls as NaN.
        assert str(_as(kind, X).dtypes["color"]) == "category"
        assert _as(kind, X)["size"].isna().sum() == df["size"].null_count() > 0
    reg = GBTRegressor(**FRAME_PARAMS).fit(_as(kind, X), y)

    features = ["size", "color", "shop"]
    want = df.select(pl.col(features).gbt.fit("y", objective="reg:squarederror", **reg.get_xgb_params())).item()
    model = Model.from_bytes(reg.model_)
    assert model.feature_names == features
    assert model.to_json() == Model.from_bytes(want).to_json()
    np.testing.assert_array_equal(reg.predict(_as(kind, X)), df.select(pl.col(features).gbt.predict(want)).to_series().to_numpy())
    # The categorical columns were split on as categories, not as numbers.
    assert model.trees_to_dataframe().filter(pl.col("Category").is_not_null())["Feature"].unique().sort().to_list() == ["color", "shop"]


@pytest.mark.parametrize("kind", ["polars", "pandas", "pyarrow"])
def test_a_frame_sets_feature_names_and_predicts_by_name(kind):
    df = _mixed_frame()
    X, y = df.drop("y"), df["y"].to_numpy()
    reg = GBTRegressor(**FRAME_PARAMS).fit(_as(kind, X), y)
    assert reg.n_features_in_ == 3
    assert reg.feature_names_in_.dtype == object
    np.testing.assert_array_equal(reg.feature_names_in_, ["size", "color", "shop"])

    in_order = reg.predict(_as(kind, X))
    np.testing.assert_array_equal(reg.predict(_as(kind, X.select("shop", "size", "color"))), in_order)

    with pytest.raises(ValueError, match="seen at fit time, yet now missing:\n- color\n"):
        reg.predict(_as(kind, X.drop("color")))
    # A column fit did not see is an error too, as scikit-learn's own estimators make it.
    with pytest.raises(ValueError, match="unseen at fit time:\n- extra\n"):
        reg.predict(_as(kind, X.with_columns(extra=pl.lit(1.0))))


def test_a_classifier_and_a_ranker_take_frames():
    df = _mixed_frame()
    labels = np.where(df["y"].to_numpy() > 1.0, "high", "low")
    clf = GBTClassifier(**FRAME_PARAMS).fit(df.drop("y"), labels)
    assert list(clf.classes_) == ["high", "low"]
    p = clf.predict_proba(df.drop("y"))
    # scikit-learn's classes are sorted: "low" is class 1, the positive class of the fit.
    is_low = df.with_columns(low=pl.Series((labels == "low").astype(float)))
    want = is_low.select(pl.col("size", "color", "shop").gbt.fit("low", objective="binary:logistic", **clf.get_xgb_params())).item()
    np.testing.assert_allclose(p[:, 1], df.select(pl.col("size", "color", "shop").gbt.predict(want)).to_series().to_numpy(), rtol=1e-6)
    assert (clf.predict(df.drop("y")) == labels).mean() > 0.95

    group = np.repeat(np.arange(40), 10)
    ranker = GBTRanker(**FRAME_PARAMS).fit(df.drop("y").to_pandas(), df["y"].rank("dense").to_numpy() % 5, group=group)
    np.testing.assert_array_equal(ranker.feature_names_in_, ["size", "color", "shop"])
    assert ranker.predict(df.drop("y").select("shop", "color", "size")).shape == (400,)


def test_arrays_and_unnamed_columns_are_positional():
    df = _mixed_frame().select("size", "y").fill_null(0.0)
    X, y = df.select("size").to_numpy(), df["y"].to_numpy()
    numpy_fit = GBTRegressor(**FRAME_PARAMS).fit(X, y)
    assert not hasattr(numpy_fit, "feature_names_in_")
    assert Model.from_bytes(numpy_fit.model_).feature_names == ["f0"]
    want = numpy_fit.predict(X)

    # pandas columns that are not strings are no feature names, for scikit-learn and here.
    unnamed = GBTRegressor(**FRAME_PARAMS).fit(pd.DataFrame(X), y)
    assert not hasattr(unnamed, "feature_names_in_")
    np.testing.assert_array_equal(unnamed.predict(X), want)

    named = GBTRegressor(**FRAME_PARAMS).fit(df.select("size"), y)
    np.testing.assert_array_equal(named.predict(df.select("size")), want)
    with pytest.warns(UserWarning, match="X does not have valid feature names"):
        np.testing.assert_array_equal(named.predict(X), want)
    with pytest.warns(UserWarning, match="X has feature names, but GBTRegressor was fitted without"):
        np.testing.assert_array_equal(numpy_fit.predict(df.select(other="size")), want)
    with pytest.warns(UserWarning, match="X has feature names"), pytest.raises(ValueError, match="X has 2 features, but GBTRegressor is expecting 1"):
        numpy_fit.predict(df)


def test_frame_errors_speak_of_the_frame():
    df = _mixed_frame()
    with pytest.raises(ValueError, match="reserved"):
        GBTRegressor().fit(df.select("size", __polars_gbt_target="shop"), df["y"])
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        GBTRegressor().fit(df.drop("y"), df["y"][:-1])
    with pytest.raises(ValueError, match="0 sample"):
        GBTRegressor().fit(df.drop("y").head(0), [])
    with pytest.raises(ColumnError, match="`tags`"):
        GBTRegressor().fit(df.select("size", tags=pl.concat_list("shop")), df["y"])


def test_column_names_are_names_not_patterns():
    # pl.col("*") is every column, and pl.col("^a.*$") a regex: neither may widen the features.
    rng = np.random.default_rng(3)
    X = pl.DataFrame({"*": rng.random(200), "^a.*$": rng.random(200), "ab": rng.random(200)})
    y = X["*"].to_numpy() * 3 + X["ab"].to_numpy()
    reg = GBTRegressor(**FRAME_PARAMS).fit(X, y)
    assert Model.from_bytes(reg.model_).feature_names == ["*", "^a.*$", "ab"]
    np.testing.assert_array_equal(reg.predict(X.select(pl.nth(2, 1, 0))), reg.predict(X))
    with pytest.warns(UserWarning, match="X does not have valid feature names"):
        np.testing.assert_array_equal(reg.predict(X.to_numpy()), reg.predict(X))


# --- XGBoost's estimator interface: eval_set, early stopping, attributes -----------------

import pickle  # noqa: E402
import types  # noqa: E402

import xgboost as xgb  # noqa: E402
from sklearn.base import clone  # noqa: E402
from sklearn.datasets import load_breast_cancer, load_digits  # noqa: E402
from sklearn.exceptions import NotFittedError  # noqa: E402
from sklearn.model_selection import ParameterGrid, train_test_split  # noqa: E402

from polars_gbt import ParameterError  # noqa: E402

# XGBoost's examples are run twice: with `xgboost` and with this stand-in, as a user would by
# changing the import.
polars_gbt_as_xgb = types.SimpleNamespace(XGBClassifier=GBTClassifier, XGBRegressor=GBTRegressor, XGBRanker=GBTRanker)


def _digits_early_stopping(xgb_module):
    # XGBoost's demo/guide-python/sklearn_examples.py, "Early-stopping", as written there.
    digits = load_digits(n_class=2)
    X = digits["data"]
    y = digits["target"]
    X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)
    clf = xgb_module.XGBClassifier(n_jobs=1, early_stopping_rounds=10, eval_metric="auc")
    clf.fit(X_train, y_train, eval_set=[(X_test, y_test)])
    return clf, X_test, y_test


def test_xgboosts_early_stopping_example_runs_by_changing_the_import(capfd):
    theirs, X_test, y_test = _digits_early_stopping(xgb)
    ours, _, _ = _digits_early_stopping(polars_gbt_as_xgb)
    # verbose=True by default, as in XGBoost: the evaluation log goes to stderr every round,
    # the set named as XGBoost names it.
    assert "\tvalidation_0-auc:1.00000\n" in capfd.readouterr().err
    assert abs(ours.best_iteration - theirs.best_iteration) <= 3
    assert ours.best_score == pytest.approx(theirs.best_score, abs=0.005)
    assert ours.evals_result().keys() == theirs.evals_result().keys() == {"validation_0"}
    assert ours.evals_result()["validation_0"].keys() == theirs.evals_result()["validation_0"].keys() == {"auc"}
    # Training stopped 10 rounds after the best one (XGBoost keeps those trees; we drop them).
    assert len(ours.evals_result()["validation_0"]["auc"]) == ours.best_iteration + 11
    assert ours.get_booster().num_trees == ours.best_iteration + 1
    assert (ours.predict(X_test) == y_test).mean() >= (theirs.predict(X_test) == y_test).mean() - 0.01


def test_a_classifier_with_eval_set_stops_where_xgboost_does():
    X, y = load_breast_cancer(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, stratify=y, random_state=94)
    fitted = {}
    # 426 training rows: with 512 bins every distinct value has its own, so both libraries cut
    # alike. (At 256 the cut points differ, and XGBoost 3.3 moved its own: best iterations ours
    # 25, XGBoost 3.2 23, 3.4 31.)
    for name, module in (("xgboost", xgb), ("polars_gbt", polars_gbt_as_xgb)):
        clf = module.XGBClassifier(tree_method="hist", early_stopping_rounds=2, n_estimators=100, max_bin=512)
        fitted[name] = clf.fit(X_train, y_train, eval_set=[(X_test, y_test)], verbose=False)
    ours, theirs = fitted["polars_gbt"], fitted["xgboost"]
    assert abs(ours.best_iteration - theirs.best_iteration) <= 5  # 16 and 17
    assert ours.best_score == pytest.approx(theirs.best_score, abs=0.01)  # 0.1000 and 0.1021
    # best_score is the logged value at best_iteration, the round with the lowest loss.
    log = ours.evals_result()["validation_0"]["logloss"]
    assert ours.best_score == log[ours.best_iteration] == min(log)
    # Different trees (different cuts and split ties), the same answers almost everywhere.
    assert (ours.predict(X_test) == theirs.predict(X_test)).mean() > 0.97
    assert np.median(np.abs(ours.predict_proba(X_test)[:, 1] - theirs.predict_proba(X_test)[:, 1])) < 0.01


def test_predictions_after_early_stopping_are_the_best_iterations():
    X, y = make_regression(n_samples=1500, n_features=6, n_informative=3, noise=20.0, random_state=2)
    X_train, X_val, y_train, y_val = train_test_split(X, y, random_state=2)
    stopped = GBTRegressor(n_estimators=400, early_stopping_rounds=8, learning_rate=0.2, max_depth=4)
    stopped.fit(X_train, y_train, eval_set=[(X_val, y_val)], verbose=False)
    best = stopped.best_iteration
    assert best < 390 and len(stopped.evals_result()["validation_0"]["rmse"]) == best + 9
    # The same fit for best + 1 rounds, without an eval set, predicts the same.
    plain = clone(stopped).set_params(n_estimators=best + 1, early_stopping_rounds=None).fit(X_train, y_train)
    np.testing.assert_array_equal(stopped.predict(X_val), plain.predict(X_val))
    # The logged score is the predictions' RMSE at that round.
    rmse = np.sqrt(np.mean((stopped.predict(X_val) - y_val) ** 2))
    assert stopped.best_score == pytest.approx(rmse, rel=1e-5)
    assert not hasattr(plain, "best_iteration") and not hasattr(plain, "best_score")


def test_a_regressor_in_grid_search_with_early_stopping_through_fit_params():
    # XGBoost's "Parameter optimization" example, with early stopping on a held-out set passed
    # to fit, which GridSearchCV hands to every fit.
    X, y = make_regression(n_samples=1200, n_features=8, n_informative=4, noise=10.0, random_state=0)
    X, X_val, y, y_val = train_test_split(X, y, random_state=0)
    results = {}
    for name, module in (("xgboost", xgb), ("polars_gbt", polars_gbt_as_xgb)):
        model = module.XGBRegressor(n_jobs=1, n_estimators=1000, early_stopping_rounds=10, learning_rate=0.1)
        clf = GridSearchCV(model, {"max_depth": [2, 4], "subsample": [0.8, 1.0]}, n_jobs=1, cv=3)
        clf.fit(X, y, eval_set=[(X_val, y_val)], verbose=False)
        results[name] = clf
    ours, theirs = results["polars_gbt"], results["xgboost"]
    assert ours.best_score_ == pytest.approx(theirs.best_score_, abs=0.02)
    assert ours.best_estimator_.best_iteration < 999
    assert ours.best_estimator_.get_params()["early_stopping_rounds"] == 10
    # The sklearn API models are picklable (the example's next step).
    again = pickle.loads(pickle.dumps(ours))
    np.testing.assert_array_equal(again.predict(X_val), ours.predict(X_val))
    assert again.best_estimator_.best_iteration == ours.best_estimator_.best_iteration


def test_an_optuna_style_search_loop_with_clone():
    X, y = make_classification(n_samples=1500, n_features=10, n_informative=4, random_state=4)
    X_train, X_val, y_train, y_val = train_test_split(X, y, random_state=4)
    base = GBTClassifier(n_estimators=300, early_stopping_rounds=10, eval_metric=["error", "logloss"])
    trials = []
    for params in ParameterGrid({"max_depth": [2, 5], "learning_rate": [0.05, 0.3], "colsample_bytree": [0.7]}):
        est = clone(base).set_params(**params)
        assert not hasattr(est, "model_") and est.get_params() == base.get_params() | params
        est.fit(X_train, y_train, eval_set=[(X_val, y_val)], verbose=False)
        log = est.evals_result()["validation_0"]
        assert list(log) == ["error", "logloss"]  # the last metric is the one watched
        assert est.best_score == min(log["logloss"]) == log["logloss"][est.best_iteration]
        assert est.get_booster().params["colsample_bytree"] == 0.7
        trials.append((est.best_score, params, est))
    best_score, best_params, best = min(trials, key=lambda t: t[0])
    assert {t[0] for t in trials} != {best_score}  # the parameters made a difference
    final = clone(base).set_params(**best_params).fit(X_train, y_train, eval_set=[(X_val, y_val)], verbose=False)
    assert final.best_iteration == best.best_iteration
    np.testing.assert_array_equal(final.predict_proba(X_val), best.predict_proba(X_val))
    assert (final.predict(X_val) == y_val).mean() > 0.85


def test_evals_result_has_xgboosts_shape_and_values():
    X, y = make_regression(n_samples=800, n_features=5, noise=5.0, random_state=5)
    X_train, X_val, y_train, y_val = train_test_split(X, y, random_state=5)
    logs = {}
    # 600 training rows, each distinct value a bin in both libraries (max_bin=1024): the logs
    # differ only where held-out values fall between cuts (ours midway, XGBoost's at the next
    # value): by 2.3% at most. (At 256 bins, by 6.2% against XGBoost 3.2 and 8.1% against 3.4,
    # whose sketch changed.)
    for name, module in (("xgboost", xgb), ("polars_gbt", polars_gbt_as_xgb)):
        reg = module.XGBRegressor(n_estimators=30, max_depth=3, eval_metric=["rmse", "mae"], max_bin=1024)
        logs[name] = reg.fit(X_train, y_train, eval_set=[(X_val, y_val)], verbose=False).evals_result()
    ours, theirs = logs["polars_gbt"], logs["xgboost"]
    assert ours.keys() == theirs.keys()
    for metric in ("rmse", "mae"):
        assert ours["validation_0"].keys() == theirs["validation_0"].keys()
        assert len(ours["validation_0"][metric]) == len(theirs["validation_0"][metric]) == 30
        assert all(isinstance(v, float) for v in ours["validation_0"][metric])
        np.testing.assert_allclose(ours["validation_0"][metric], theirs["validation_0"][metric], rtol=0.05)
    with pytest.raises(ValueError, match="eval_set` is not used"):
        GBTRegressor(n_estimators=3).fit(X_train, y_train).evals_result()


def test_eval_set_weights_and_margins_are_those_of_the_evaluation():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(600, 3))
    y = X[:, 0] * 2 + rng.normal(size=600)
    X_train, X_val, y_train, y_val = X[:400], X[400:], y[:400], y[400:]
    w_val = rng.uniform(0.1, 3.0, size=200)
    reg = GBTRegressor(n_estimators=15, max_depth=3)
    reg.fit(X_train, y_train, sample_weight=np.ones(400), eval_set=[(X_val, y_val)], sample_weight_eval_set=[w_val], verbose=False)
    # The last round's logged RMSE is the weighted RMSE of the final predictions.
    err = reg.predict(X_val) - y_val
    assert reg.evals_result()["validation_0"]["rmse"][-1] == pytest.approx(np.sqrt(np.sum(w_val * err**2) / np.sum(w_val)), rel=1e-5)
    # Weights on the evaluation rows only: the training rows weigh one each, as without weights.
    val_only = clone(reg).fit(X_train, y_train, eval_set=[(X_val, y_val)], sample_weight_eval_set=[w_val], verbose=False)
    np.testing.assert_array_equal(val_only.predict(X_val), reg.predict(X_val))

    m_train, m_val = rng.normal(size=400), rng.normal(size=200)
    offset = clone(reg).fit(X_train, y_train + m_train, base_margin=m_train, eval_set=[(X_val, y_val + m_val)], base_margin_eval_set=[m_val], verbose=False)
    err = offset.predict(X_val, base_margin=m_val) - (y_val + m_val)
    assert offset.evals_result()["validation_0"]["rmse"][-1] == pytest.approx(np.sqrt(np.mean(err**2)), rel=1e-5)
    with pytest.raises(ValueError, match="base_margin and base_margin_eval_set go together"):
        clone(reg).fit(X_train, y_train, base_margin=m_train, eval_set=[(X_val, y_val)])


def test_an_eval_frame_is_read_by_column_name():
    df = _mixed_frame(600, seed=7)
    train, valid = df.head(450), df.tail(150)
    reg = GBTRegressor(n_estimators=200, early_stopping_rounds=5, learning_rate=0.1, max_depth=3)
    # The evaluation frame's columns in another order, its categorical column as pandas would give it.
    X_val = valid.select("shop", "color", "size")
    reg.fit(train.drop("y").to_pandas(), train["y"].to_numpy(), eval_set=[(X_val.to_pandas(), valid["y"])], verbose=False)
    rmse = np.sqrt(np.mean((reg.predict(X_val) - valid["y"].to_numpy()) ** 2))
    assert reg.best_score == pytest.approx(rmse, rel=1e-5)
    with pytest.raises(ValueError, match="seen at fit time, yet now missing:\n- color\n"):
        reg.fit(train.drop("y"), train["y"], eval_set=[(valid.select("size", "shop"), valid["y"])])


def test_several_eval_sets_are_each_evaluated_and_the_last_watched():
    X, y = make_classification(n_samples=900, n_features=6, random_state=8)
    xt, yt, xa, ya, xb, yb = X[:500], y[:500], X[500:700], y[500:700], X[700:], y[700:]
    clf = GBTClassifier(n_estimators=200, early_stopping_rounds=3, learning_rate=0.3)
    clf.fit(xt, yt, eval_set=[(xa, ya), (xb, yb)], verbose=False)
    result = clf.evals_result()
    assert list(result) == ["validation_0", "validation_1"]
    # Each set's log is its own metric: at the best round it equals the log loss of the
    # (early-stopped) model's predict_proba on that set.
    from sklearn.metrics import log_loss

    for name, (xe, ye) in zip(result, [(xa, ya), (xb, yb)]):
        logged = result[name]["logloss"][clf.best_iteration]
        assert logged == pytest.approx(log_loss(ye, clf.predict_proba(xe)), rel=1e-4)
    # Early stopping watched the last set: the same fit with it alone stops at the same round.
    alone = GBTClassifier(n_estimators=200, early_stopping_rounds=3, learning_rate=0.3)
    alone.fit(xt, yt, eval_set=[(xb, yb)], verbose=False)
    assert alone.best_iteration == clf.best_iteration
    assert alone.evals_result()["validation_0"] == result["validation_1"]


def test_eval_set_errors():
    X, y = make_classification(n_samples=300, n_features=4, random_state=8)
    clf = GBTClassifier(n_estimators=5, early_stopping_rounds=2)
    with pytest.raises(ParameterError, match="early_stopping_rounds"):
        clf.fit(X, y)  # XGBoost too needs an evaluation set to stop on
    with pytest.raises(ValueError, match="sample_weight_eval_set was given without eval_set"):
        GBTClassifier(n_estimators=5).fit(X, y, sample_weight_eval_set=[np.ones(10)])
    with pytest.raises(ValueError, match="one entry per eval_set pair"):
        clf.fit(X, y, eval_set=[(X, y)], sample_weight_eval_set=[np.ones(300), np.ones(300)])
    with pytest.raises(ValueError, match="labels the training y lacks: \\[7\\]"):
        clf.fit(X, y, eval_set=[(X[:3], [0, 1, 7])])
    with pytest.raises(ValueError, match="eval_set must be a list of \\(X, y\\) pairs"):
        clf.fit(X, y, eval_set=[X])
    for attribute in ("feature_importances_", "best_iteration"):
        with pytest.raises(NotFittedError):
            getattr(GBTClassifier(), attribute)


def test_feature_importances_are_xgboosts_normalised_gain():
    rng = np.random.default_rng(9)
    X = rng.normal(size=(1000, 5))
    y = 5 * X[:, 3] + X[:, 1] + 0.1 * rng.normal(size=1000)
    ours = GBTRegressor(n_estimators=30, max_depth=3).fit(X, y)
    theirs = xgb.XGBRegressor(n_estimators=30, max_depth=3).fit(X, y)
    imp = ours.feature_importances_
    assert imp.dtype == np.float32 and imp.shape == (5,)
    assert imp.sum() == pytest.approx(1.0, abs=1e-6)
    assert np.argmax(imp) == np.argmax(theirs.feature_importances_) == 3
    # The mean gain per split of each feature, over their sum: Model.feature_importance's numbers.
    gain = dict(ours.get_booster().feature_importance("gain").iter_rows())
    want = np.array([gain.get(f"f{i}", 0.0) for i in range(5)])
    np.testing.assert_allclose(imp, want / want.sum(), rtol=1e-6)
    weight = clone(ours).set_params(importance_type="weight").fit(X, y).feature_importances_
    assert weight.sum() == pytest.approx(1.0, abs=1e-6) and not np.allclose(weight, imp)
    with pytest.raises(ValueError, match="importance_type must be one of"):
        _ = clone(ours).set_params(importance_type="splits").fit(X, y).feature_importances_


def test_every_training_parameter_is_a_constructor_argument():
    X, y = make_regression(n_samples=300, n_features=3, random_state=10)
    model = GBTRegressor(n_estimators=3).fit(X, y).get_booster()
    params = GBTRegressor().get_params()
    # Every parameter the trainer records, under XGBoost's scikit-learn name (seed: random_state);
    # num_class is the classifier's to set, from its classes, num_target comes from y's
    # columns, and custom_objective from a callable objective.
    trainer = set(model.params) - {"num_class", "num_target", "seed", "custom_objective"} | {"random_state"}
    assert trainer <= set(params), trainer - set(params)
    changed = {
        "objective": "reg:pseudohubererror", "huber_slope": 2.0, "max_cat_to_onehot": 7, "cat_smooth": 3.0,
        "max_delta_step": 0.5, "colsample_bynode": 0.5, "random_state": 11, "device": "cpu", "n_jobs": 2,
        "eval_metric": ["mae"], "max_bin": 64, "base_score": 0.5,
    }
    reg = GBTRegressor(n_estimators=3, **changed).fit(X, y)
    recorded = reg.get_booster().params
    for name, value in changed.items():
        assert recorded["seed" if name == "random_state" else name] == value, name
    assert reg.get_booster().to_bytes() == reg.model_
    # XGBoost's settings that polars-gbt always has are accepted, and checked.
    GBTRegressor(n_estimators=2, tree_method="hist", booster="gbtree", verbosity=0, enable_categorical=True).fit(X, y)
    with pytest.raises(ParameterError, match="tree_method"):
        GBTRegressor(tree_method="exact").fit(X, y)
    # n_jobs=-1 (scikit-learn's "every core") and a numpy random state, as XGBoost takes them.
    GBTRegressor(n_estimators=2, n_jobs=-1, random_state=np.random.RandomState(0)).fit(X, y)


def test_classifier_objectives_follow_xgboosts_rules():
    X, y = make_classification(n_samples=600, n_features=6, n_informative=4, n_classes=3, random_state=12)
    prob = GBTClassifier(n_estimators=10, objective="binary:logistic").fit(X, y)
    assert prob.objective_ == "multi:softprob" and prob.n_classes_ == 3
    hard = GBTClassifier(n_estimators=10, objective="multi:softmax").fit(X, y)
    np.testing.assert_array_equal(hard.predict(X), prob.predict(X))
    with pytest.raises(ValueError, match="multi:softmax does not support `predict_proba`"):
        hard.predict_proba(X)


def test_the_estimators_read_the_objectives_descriptors():
    """Which estimator fits each objective, and which are multiclass or predict classes,
    come from the Rust descriptors (``_internal.OBJECTIVES``), not from names here."""
    from polars_gbt import _internal

    table = _internal.OBJECTIVES
    fitted = {e: sorted(n for n, f in table.items() if f["estimator"] == e) for e in ("GBTClassifier", "GBTRanker")}
    assert fitted["GBTRanker"] == ["rank:map", "rank:ndcg", "rank:pairwise"]
    assert fitted["GBTClassifier"] == ["binary:hinge", "binary:logistic", "multi:softmax", "multi:softprob"]
    assert [n for n, f in table.items() if f["predicts_classes"]] == ["multi:softmax"]
    assert sorted(n for n, f in table.items() if f["multiclass"]) == ["multi:softmax", "multi:softprob"]
    with pytest.raises(ValueError, match="GBTRanker trains with rank:ndcg, rank:pairwise or rank:map"):
        GBTRanker(objective=lambda y, p: (p - y, np.ones_like(p))).fit([[0.0], [1.0]], [0, 1], group=[0, 0])


def test_a_ranker_stops_early_on_its_evaluation_queries():
    rng = np.random.default_rng(13)
    X = rng.random((1200, 3))
    y = np.floor(X[:, 0] * 4 + rng.random(1200) * 0.8)
    qid = np.repeat(np.arange(120), 10)
    fitted = {}
    for name, module in (("xgboost", xgb), ("polars_gbt", polars_gbt_as_xgb)):
        ranker = module.XGBRanker(n_estimators=300, early_stopping_rounds=5, eval_metric="ndcg@5", learning_rate=0.1)
        fitted[name] = ranker.fit(X[:800], y[:800], qid=qid[:800], eval_set=[(X[800:], y[800:])], eval_qid=[qid[800:]], verbose=False)
    ours, theirs = fitted["polars_gbt"], fitted["xgboost"]
    assert ours.evals_result()["validation_0"].keys() == theirs.evals_result()["validation_0"].keys() == {"ndcg@5"}
    assert ours.best_score == pytest.approx(theirs.best_score, abs=0.03)
    assert ours.best_score == max(ours.evals_result()["validation_0"]["ndcg@5"])  # higher is better
    with pytest.raises(ValueError, match="eval_qid, the query id of each eval_set row, is needed"):
        GBTRanker().fit(X[:800], y[:800], qid=qid[:800], eval_set=[(X[800:], y[800:])])


def test_xgb_model_continues_a_fitted_estimator_as_the_whole_fit():
    rng = np.random.default_rng(8)
    X = rng.normal(size=(600, 4))
    y = (X[:, 0] - X[:, 1] * X[:, 2] > 0).astype(int)
    first = GBTClassifier(n_estimators=6, max_depth=3).fit(X, y)
    more = GBTClassifier(n_estimators=6, max_depth=3).fit(X, y, xgb_model=first)
    whole = GBTClassifier(n_estimators=12, max_depth=3).fit(X, y)
    assert more.get_booster().num_trees == 12
    np.testing.assert_array_equal(more.predict_proba(X), whole.predict_proba(X))
    # A Model or its bytes work too, and so does scale_pos_weight as a constructor argument.
    again = GBTClassifier(n_estimators=6, max_depth=3).fit(X, y, xgb_model=first.get_booster())
    np.testing.assert_array_equal(again.predict_proba(X), whole.predict_proba(X))
    heavier = GBTClassifier(n_estimators=6, max_depth=3, scale_pos_weight=3.0).fit(X, y)
    assert heavier.predict_proba(X)[:, 1].mean() > first.predict_proba(X)[:, 1].mean()
