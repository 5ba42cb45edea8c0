"""XGBoost's and LightGBM's scikit-learn code, run on the estimators (issue 53): numpy-typed
parameters, subclasses, the estimators' methods XGBoost users call, and their inputs. Each
test checks against XGBoost's or LightGBM's estimator on the same data, against a fit whose
result is known by construction, or against values computed by hand."""

from __future__ import annotations

import json
import traceback
import warnings

import lightgbm as lgb
import numpy as np
import pandas as pd
import polars as pl
import pytest
import scipy.sparse as sp
import xgboost as xgb
from sklearn.base import clone
from sklearn.datasets import make_classification, make_multilabel_classification, make_regression
from sklearn.model_selection import GridSearchCV

import polars_gbt
from polars_gbt import Model
from polars_gbt.sklearn import _ALIASES, GBTClassifier, GBTRanker, GBTRegressor

SMALL = dict(n_estimators=8, max_depth=3)


def _regression(n: int = 300, m: int = 4, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    X, y = make_regression(n_samples=n, n_features=m, noise=1.0, random_state=seed)
    return X, y


def _frame(X: np.ndarray, y: np.ndarray | None = None) -> pl.DataFrame:
    df = pl.DataFrame({f"x{j}": X[:, j] for j in range(X.shape[1])})
    return df if y is None else df.with_columns(pl.Series("y", y))


# --- bug 1: numpy-typed parameter values -----------------------------------------------------


NUMPY_PARAMS = dict(
    max_depth=np.int64(3),
    n_estimators=np.int32(6),
    learning_rate=np.float32(0.5),
    ndcg_exp_gain=np.bool_(True),
    feature_weights=np.array([1.0, 2.0, 1.0, 0.5]),
    monotone_constraints=np.array([1, 0, 0, -1]),
    colsample_bynode=np.float32(0.75),
)


def _plain(params: dict) -> dict:
    return {k: (v.tolist() if isinstance(v, np.ndarray) else v.item()) for k, v in params.items()}


def test_numpy_typed_parameters_fit_as_the_python_values_they_hold():
    X, y = _regression()
    plain = _plain(NUMPY_PARAMS)
    assert all(type(v) in (int, float, bool, list) for v in plain.values())
    want = GBTRegressor(**plain).fit(X, y)
    got = GBTRegressor(**NUMPY_PARAMS).fit(X, y)
    assert got.model_ == want.model_
    # XGBoost takes them too (it needs no column sampling weights for this).
    xgb.XGBRegressor(max_depth=np.int64(3), n_estimators=np.int32(6), learning_rate=np.float32(0.5)).fit(X, y)
    # polars_gbt.train, a streamed train, gbt.fit and cv go through the same normaliser.
    df = _frame(X, y)
    trained = polars_gbt.train(df, target="y", **plain).to_bytes()
    assert polars_gbt.train(df, target="y", **NUMPY_PARAMS).to_bytes() == trained
    assert polars_gbt.train(df.lazy(), target="y", **NUMPY_PARAMS).to_bytes() == trained
    features = pl.col([f"x{j}" for j in range(4)])
    assert df.select(features.gbt.fit("y", **NUMPY_PARAMS)).item() == df.select(features.gbt.fit("y", **plain)).item()
    cv = dict(nfold=3, seed=np.int64(1))
    assert polars_gbt.cv(df, target="y", **cv, **NUMPY_PARAMS).equals(polars_gbt.cv(df, target="y", **cv, **plain))


def test_grid_search_over_numpy_ranges():
    X, y = _regression(200, 3, seed=1)
    grid = {"max_depth": np.arange(2, 4), "learning_rate": np.array([0.2, 0.5], dtype=np.float32)}
    search = GridSearchCV(GBTRegressor(n_estimators=5), grid, cv=2).fit(X, y)
    best = {k: v.item() for k, v in search.best_params_.items()}
    want = GBTRegressor(n_estimators=5, **best).fit(X, y)
    np.testing.assert_array_equal(search.predict(X), want.predict(X))
    # XGBoost's estimator in the same search picks among the same grid.
    assert GridSearchCV(xgb.XGBRegressor(n_estimators=5), grid, cv=2).fit(X, y).best_params_.keys() == best.keys()


# --- bug 2: multi:softmax metrics get class labels ---------------------------------------------


def test_softmax_metrics_get_class_labels_as_xgboosts_do():
    X, y = make_classification(n_samples=300, n_features=5, n_informative=4, n_redundant=0, n_classes=3, random_state=2)
    seen: dict[str, list[np.ndarray]] = {"ours": [], "xgboost": []}

    def recorder(key):
        def labels_seen(y_true, y_pred):
            seen[key].append(np.asarray(y_pred).copy())
            return float(np.mean(y_true != y_pred))

        return labels_seen

    params = dict(objective="multi:softmax", n_estimators=5, max_depth=3)
    ours = GBTClassifier(eval_metric=recorder("ours"), **params).fit(X[:200], y[:200], eval_set=[(X[200:], y[200:])], verbose=False)
    xgb.XGBClassifier(eval_metric=recorder("xgboost"), **params).fit(X[:200], y[:200], eval_set=[(X[200:], y[200:])], verbose=False)
    # XGBoost's metric sees one class per row; so does ours, the classes predict gives.
    assert seen["xgboost"][-1].shape == (100,)
    assert seen["ours"][-1].shape == (100,) and len(seen["ours"]) == 5
    np.testing.assert_array_equal(seen["ours"][-1], ours.predict(X[200:]))
    error = ours.evals_result()["validation_0"]["labels_seen"][-1]
    assert error == pytest.approx(np.mean(ours.predict(X[200:]) != y[200:]))
    # Through polars_gbt.train: predict_value of multi:softmax is the class.
    df = _frame(X, y.astype(float))
    got: list[np.ndarray] = []

    def metric(predt, label):
        got.append(predt.copy())
        return 0.0

    model = polars_gbt.train(df.head(200), target="y", eval_df=df.tail(100), eval_metric=metric, num_class=3, **params)
    assert got[-1].shape == (100,)
    np.testing.assert_array_equal(got[-1], model.predict(df.tail(100)).to_numpy())


# --- bug 3: subclasses ---------------------------------------------------------------------------


class _Mine(GBTRegressor):
    def __init__(self, my_param: int = 1, **kwargs):
        super().__init__(**kwargs)
        self.my_param = my_param


class _MineXGB(xgb.XGBRegressor):
    def __init__(self, my_param: int = 1, **kwargs):
        super().__init__(**kwargs)
        self.my_param = my_param


class _MineLGB(lgb.LGBMRegressor):
    def __init__(self, my_param: int = 1, **kwargs):
        super().__init__(**kwargs)
        self.my_param = my_param


def test_a_subclass_adds_a_parameter_as_xgboosts_and_lightgbms_do():
    X, y = _regression(200, 3, seed=3)
    for cls in (_Mine, _MineXGB, _MineLGB):
        est = cls(my_param=5, n_estimators=7, max_depth=2)
        params = est.get_params()
        # Inherited parameters stay in get_params() and clone, beside the subclass's own.
        assert params["my_param"] == 5 and params["n_estimators"] == 7 and params["max_depth"] == 2, cls
        again = clone(est)
        assert again.get_params() == params, cls
    est = _Mine(my_param=5, n_estimators=7, max_depth=2)
    # XGBoost warns that the subclass's parameter is not used, and fits; so do we.
    with pytest.warns(UserWarning, match="my_param"):
        _MineXGB(my_param=5, n_estimators=7, max_depth=2).fit(X, y)
    with pytest.warns(UserWarning, match="'my_param'.*not used"):
        est.fit(X, y)
    assert "my_param" not in est.get_xgb_params()
    # The trainer saw the inherited parameters only: the base class's model.
    assert est.model_ == GBTRegressor(n_estimators=7, max_depth=2).fit(X, y).model_
    # set_params reaches inherited and own parameters.
    est.set_params(my_param=2, max_depth=3)
    assert (est.my_param, est.max_depth) == (2, 3)

    # A subclass naming every parameter it takes (no **kwargs) has those, as scikit-learn's own.
    class Named(GBTRegressor):
        def __init__(self, my_param=1, n_estimators=7, max_depth=2):
            super().__init__(n_estimators=n_estimators, max_depth=max_depth)
            self.my_param = my_param

    named = Named(my_param=4)
    assert named.get_params() == {"my_param": 4, "n_estimators": 7, "max_depth": 2} == clone(named).get_params()
    with pytest.warns(UserWarning, match="my_param"):
        assert named.fit(X, y).model_ == GBTRegressor(n_estimators=7, max_depth=2).fit(X, y).model_


# --- bug 4: Model.predict reads the schema once --------------------------------------------------


def test_model_predict_resolves_the_schema_once(monkeypatch):
    rng = np.random.default_rng(4)
    X = rng.normal(size=(768, 300))
    df = pl.DataFrame({f"c{j}": X[:, j] for j in range(300)})
    model = polars_gbt.train(df.with_columns(y=pl.Series(X[:, 0] + X[:, 1])), target="y", n_estimators=3)
    calls = []
    original = pl.LazyFrame.collect_schema

    def counted(self):
        calls.append(1)
        return original(self)

    monkeypatch.setattr(pl.LazyFrame, "collect_schema", counted)
    got = model.predict(df)
    monkeypatch.undo()
    assert len(calls) <= 1
    want = df.select(pl.col(model.feature_names).gbt.predict(model))["c0"]
    np.testing.assert_array_equal(got.to_numpy(), want.to_numpy())


# --- bug 5: a user's exception keeps its type and traceback ------------------------------------


class MyErr(Exception):
    pass


def failing_objective(y_true, y_pred):
    raise MyErr("boom")


def failing_metric(predt, label):
    raise MyErr("metric boom")


def _frames_of(error: BaseException) -> list[str]:
    return [f.name for f in traceback.extract_tb(error.__traceback__)]


def test_a_custom_objectives_exception_is_raised_as_itself():
    X, y = _regression(120, 2, seed=5)
    with pytest.raises(MyErr, match="boom") as caught:
        GBTRegressor(objective=failing_objective, n_estimators=3).fit(X, y)
    assert "failing_objective" in _frames_of(caught.value)
    df = _frame(X, y)

    def objective(predt, label):
        raise MyErr("boom")

    with pytest.raises(MyErr, match="boom") as caught:
        polars_gbt.train(df, target="y", objective=objective, n_estimators=3)
    assert "objective" in _frames_of(caught.value)
    with pytest.raises(MyErr, match="metric boom"):
        polars_gbt.train(df, target="y", eval_df=df, eval_metric=failing_metric, n_estimators=3)
    with pytest.raises(MyErr):
        polars_gbt.cv(df, target="y", nfold=2, objective=objective, n_estimators=2)
    # A hand-written query run without translation still names the type and message.
    with pytest.raises(pl.exceptions.ComputeError, match="MyErr: boom"):
        df.select(pl.col("x0", "x1").gbt.fit("y", objective=objective, n_estimators=2))
    # XGBoost raises the user's exception too.
    with pytest.raises(MyErr):
        xgb.XGBRegressor(objective=failing_objective, n_estimators=3).fit(X, y)


# --- bug 6: vector-leaf trees are counted per round ----------------------------------------------


def test_a_vector_leaf_models_trees_are_its_rounds_as_in_xgboost():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(400, 3))
    Y = np.stack([X[:, 0], X[:, 1] * X[:, 2], np.sin(X[:, 0])], 1)
    params = dict(n_estimators=60, max_depth=3, multi_strategy="multi_output_tree")
    reg = GBTRegressor(**params).fit(X, Y)
    model = reg.get_booster()
    theirs = xgb.XGBRegressor(tree_method="hist", **params).fit(X, Y).get_booster()
    assert len(theirs.get_dump()) == theirs.num_boosted_rounds() == 60
    assert model.num_trees == model.num_rounds == 60
    assert model.trees_to_dataframe()["Tree"].n_unique() == 60
    leaves = reg.apply(X)
    assert leaves.shape == (400, 60) == theirs.predict(xgb.DMatrix(X), pred_leaf=True).shape
    # Our leaves are XGBoost's node ids of our model, which XGBoost scores.
    booster = xgb.Booster(model_file=bytearray(model.to_xgboost_json().encode()))
    names = [f"f{j}" for j in range(3)]
    np.testing.assert_array_equal(leaves, booster.predict(xgb.DMatrix(X, feature_names=names), pred_leaf=True))
    # The expression's declared dtype (a lazy query's schema) says the same width.
    frame = pl.DataFrame({f"f{j}": X[:, j] for j in range(3)})
    leaf = pl.col("f0", "f1", "f2").gbt.predict(model, output="leaf")
    assert frame.lazy().select(leaf).collect_schema()["f0"] == pl.Array(pl.UInt32, 60)
    np.testing.assert_array_equal(np.stack(frame.select(leaf)["f0"].to_list()), leaves)
    # One-output-per-tree models keep one tree per output and round.
    assert GBTRegressor(n_estimators=5).fit(X, Y).get_booster().num_trees == 15


# --- bug 7: pandas sparse columns ----------------------------------------------------------------


def test_pandas_sparse_columns_fit_as_their_dense_values():
    rng = np.random.default_rng(7)
    X = np.where(rng.random((300, 3)) < 0.7, 0.0, rng.normal(size=(300, 3)))
    X[rng.random(300) < 0.1, 2] = np.nan
    y = X[:, 0] * 3 + X[:, 1] + rng.normal(scale=0.1, size=300)
    dense = pd.DataFrame(X, columns=["a", "b", "c"])
    sparse = dense.astype({"a": pd.SparseDtype(float, 0.0), "b": pd.SparseDtype(float, 0.0), "c": pd.SparseDtype(float, np.nan)})
    want = GBTRegressor(**SMALL).fit(dense, y)
    got = GBTRegressor(**SMALL).fit(sparse, y)
    assert got.model_ == want.model_
    np.testing.assert_array_equal(got.predict(sparse), want.predict(dense))
    # XGBoost reads the sparse frame as the dense one too.
    theirs_dense = xgb.XGBRegressor(**SMALL).fit(dense, y).predict(dense)
    np.testing.assert_allclose(xgb.XGBRegressor(**SMALL).fit(sparse, y).predict(sparse), theirs_dense)
    frame = sparse.assign(y=y)
    assert polars_gbt.train(frame, target="y", **SMALL).to_bytes() == want.model_


# --- expected: output_margin -----------------------------------------------------------------------


def test_predict_output_margin_as_xgboost():
    X, y = make_classification(n_samples=300, n_features=5, n_informative=3, random_state=8)
    clf = GBTClassifier(**SMALL).fit(X, y)
    margin = clf.predict(X, output_margin=True)
    p = clf.predict_proba(X)[:, 1]
    np.testing.assert_allclose(1 / (1 + np.exp(-margin)), p, rtol=1e-5)
    theirs = xgb.XGBClassifier(**SMALL).fit(X, y)
    assert theirs.predict(X, output_margin=True).shape == margin.shape == (300,)
    X3, y3 = make_classification(n_samples=300, n_features=5, n_informative=4, n_redundant=0, n_classes=3, random_state=8)
    clf3 = GBTClassifier(**SMALL).fit(X3, y3)
    m3 = clf3.predict(X3, output_margin=True)
    assert m3.shape == xgb.XGBClassifier(**SMALL).fit(X3, y3).predict(X3, output_margin=True).shape == (300, 3)
    softmax = np.exp(m3) / np.exp(m3).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(softmax, clf3.predict_proba(X3), rtol=1e-5)
    Xr, yr = _regression(300, 3, seed=8)
    reg = GBTRegressor(objective="count:poisson", **SMALL).fit(Xr, np.abs(yr))
    np.testing.assert_allclose(np.exp(reg.predict(Xr, output_margin=True)), reg.predict(Xr), rtol=1e-5)
    # The same as the Model's margin through polars_gbt.train.
    model = polars_gbt.train(_frame(Xr, np.abs(yr)), target="y", objective="count:poisson", **SMALL)
    np.testing.assert_allclose(model.predict(_frame(Xr), output="margin").to_numpy(), reg.predict(Xr, output_margin=True), rtol=1e-6)
    with pytest.raises(TypeError, match="output_margin"):
        reg.predict(Xr, output_margin=np.zeros(3))


# --- expected: save_model / load_model ------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".pgbt", ".json", ".ubj"])
def test_save_and_load_model_restore_the_estimator(tmp_path, suffix):
    X, y = make_classification(n_samples=300, n_features=4, n_informative=3, n_redundant=0, n_classes=3, random_state=9)
    labels = np.array(["ant", "bee", "cat"])[y]
    df = pl.DataFrame({f"f_{j}": X[:, j] for j in range(4)})
    clf = GBTClassifier(**SMALL).fit(df, labels)
    path = tmp_path / f"model{suffix}"
    clf.save_model(path)
    loaded = GBTClassifier()
    loaded.load_model(path)
    np.testing.assert_array_equal(loaded.classes_, clf.classes_)
    assert loaded.n_features_in_ == 4 and list(loaded.feature_names_in_) == df.columns
    assert loaded.objective_ == "multi:softprob" == loaded.objective
    np.testing.assert_array_equal(loaded.predict(df), clf.predict(df))
    np.testing.assert_allclose(loaded.predict_proba(df), clf.predict_proba(df), rtol=1e-6)
    if suffix == ".pgbt":
        # polars-gbt's JSON model, the estimator's attributes beside it: the same model.
        assert loaded.model_ == clf.model_
        assert Model.load(path).predict(df).equals(clf.get_booster().predict(df))
    else:
        # XGBoost's own estimator loads the file and predicts the same probabilities.
        theirs = xgb.XGBClassifier()
        theirs.load_model(path)
        np.testing.assert_allclose(theirs.predict_proba(df.to_pandas()), clf.predict_proba(df), rtol=1e-5, atol=1e-6)
    with pytest.raises(TypeError, match="different type"):
        GBTRegressor().load_model(path)


@pytest.mark.parametrize("suffix", [".json", ".ubj"])
def test_load_model_reads_xgboosts_saved_estimators(tmp_path, suffix):
    X, y = make_classification(n_samples=300, n_features=4, random_state=10)
    theirs = xgb.XGBClassifier(**SMALL).fit(X, y)
    path = tmp_path / f"xgb{suffix}"
    theirs.save_model(path)
    ours = GBTClassifier()
    ours.load_model(path)
    np.testing.assert_array_equal(ours.classes_, theirs.classes_)
    assert ours.n_features_in_ == 4
    np.testing.assert_allclose(ours.predict_proba(X), theirs.predict_proba(X), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(ours.predict(X), theirs.predict(X))


# --- expected: XGBoost's and LightGBM's aliases ------------------------------------------------------


def test_aliases_in_the_constructor_and_set_params():
    X, y = _regression(200, 3, seed=11)
    want = GBTRegressor(learning_rate=0.1, reg_lambda=2.0, n_estimators=5).fit(X, y)
    for est in (
        GBTRegressor(eta=0.1, **{"lambda": 2.0}, n_estimators=5),
        GBTRegressor(n_estimators=5).set_params(eta=0.1, lambda_l2=2.0),
        clone(GBTRegressor(eta=0.1, reg_lambda=2.0, num_boost_round=5)),
    ):
        assert est.get_params()["learning_rate"] == 0.1
        assert est.fit(X, y).model_ == want.model_
    # As XGBoost's estimator takes eta, in the constructor and set_params.
    assert xgb.XGBRegressor(eta=0.1).get_params()["eta"] == 0.1
    search = GridSearchCV(GBTRegressor(n_estimators=5), {"eta": [0.1, 0.3]}, cv=2).fit(X, y)
    assert search.best_params_["eta"] in (0.1, 0.3)
    # Another name is kept, as XGBoost's **kwargs keeps it, and the trainer refuses it at fit
    # (XGBoost's booster warns that it is not used).
    typo = GBTRegressor(etaa=0.1)
    assert typo.get_params()["etaa"] == 0.1 and clone(typo).get_params()["etaa"] == 0.1
    assert xgb.XGBRegressor(etaa=0.1).get_params()["etaa"] == 0.1
    with pytest.raises(polars_gbt.ParameterError, match="etaa"):
        typo.fit(X, y)
    with pytest.raises(polars_gbt.ParameterError, match="etaa"):
        GBTRegressor().set_params(etaa=0.1).fit(X, y)
    with pytest.raises(TypeError, match="given twice"):
        GBTRegressor(learning_rate=0.2, eta=0.1)


@pytest.mark.parametrize("alias", sorted(_ALIASES))
def test_each_alias_is_the_trainers_alias(alias):
    # The estimators' table of aliases is the trainer's own: train() with the alias gives
    # the model train() gives with the parameter's name.
    canonical = _ALIASES[alias]
    value = {"n_estimators": 3, "max_leaves": 4, "random_state": 7, "n_jobs": 1}.get(canonical, 0.5)
    X, y = _regression(150, 3, seed=12)
    df = _frame(X, y)
    base = {"grow_policy": "lossguide"} | ({} if canonical == "n_estimators" else {"n_estimators": 3})
    trainer_name = "seed" if canonical == "random_state" else canonical
    want = polars_gbt.train(df, target="y", **base, **{trainer_name: value})
    assert polars_gbt.train(df, target="y", **base, **{alias: value}).to_bytes() == want.to_bytes()
    est = GBTRegressor(**base, **{alias: value})
    assert getattr(est, canonical) == value
    assert est.fit(_frame(X), y).model_ == want.to_bytes()


# --- expected: a Series as X --------------------------------------------------------------------------


def test_a_series_is_one_feature():
    rng = np.random.default_rng(13)
    x = rng.normal(size=300)
    y = np.sin(x)
    want = GBTRegressor(**SMALL).fit(pd.DataFrame({"x": x}), y)
    for series in (pd.Series(x, name="x"), pl.Series("x", x)):
        est = GBTRegressor(**SMALL).fit(series, y)
        assert est.model_ == want.model_ and list(est.feature_names_in_) == ["x"]
        np.testing.assert_array_equal(est.predict(series), want.predict(pd.DataFrame({"x": x})))
    unnamed = GBTRegressor(**SMALL).fit(pd.Series(x), y)
    assert not hasattr(unnamed, "feature_names_in_") and unnamed.n_features_in_ == 1
    np.testing.assert_array_equal(unnamed.predict(x[:, None]), want.predict(pd.DataFrame({"x": x})))
    # XGBoost takes the Series too, and fits the same shape of model.
    assert xgb.XGBRegressor(**SMALL).fit(pd.Series(x, name="x"), y).predict(pd.Series(x, name="x")).shape == (300,)


# --- expected: intercept_ and apply ---------------------------------------------------------------------


def test_intercept_and_apply_are_xgboosts_readings_of_the_model(tmp_path):
    X, y = make_classification(n_samples=300, n_features=4, random_state=14)
    clf = GBTClassifier(**SMALL).fit(X, y)
    path = tmp_path / "m.json"
    clf.save_model(path)
    theirs = xgb.XGBClassifier()
    theirs.load_model(path)
    np.testing.assert_array_equal(clf.intercept_, theirs.intercept_)
    np.testing.assert_array_equal(clf.apply(X), theirs.apply(X))
    assert clf.apply(X).shape == (300, 8)
    # A given base_score is the intercept, in the output space, as XGBoost's.
    assert GBTClassifier(base_score=0.3, **SMALL).fit(X, y).intercept_.tolist() == pytest.approx([0.3])
    assert xgb.XGBClassifier(base_score=0.3, **SMALL).fit(X, y).intercept_.tolist() == pytest.approx([0.3])
    # A regressor's estimated intercept is the mean of y (squared error), by hand.
    Xr, yr = _regression(200, 3, seed=14)
    assert GBTRegressor(**SMALL).fit(Xr, yr).intercept_[0] == pytest.approx(yr.mean(), rel=1e-5)
    # Multiclass: one tree per class a round, consecutive, as XGBoost's apply.
    X3, y3 = make_classification(n_samples=300, n_features=5, n_informative=4, n_redundant=0, n_classes=3, random_state=14)
    assert GBTClassifier(**SMALL).fit(X3, y3).apply(X3).shape == xgb.XGBClassifier(**SMALL).fit(X3, y3).apply(X3).shape


# --- expected: the ranker's qid column and per-query weights ----------------------------------------


def _ranking(seed: int = 15) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    sizes = rng.integers(3, 12, 40)
    qid = np.repeat(np.arange(len(sizes)), sizes)
    X = rng.random((len(qid), 3))
    y = np.clip(np.floor(X[:, 0] * 4 + rng.normal(scale=0.3, size=len(qid))), 0, 3)
    return pd.DataFrame(X, columns=["a", "b", "c"]), y, qid


def test_a_qid_column_in_x_is_the_query_ids():
    X, y, qid = _ranking()
    want = GBTRanker(**SMALL).fit(X, y, qid=qid)
    with_column = X.assign(qid=qid)
    got = GBTRanker(**SMALL).fit(with_column, y)
    assert got.model_ == want.model_ and list(got.feature_names_in_) == ["a", "b", "c"]
    np.testing.assert_array_equal(got.predict(with_column), want.predict(X))
    polars_x = pl.from_pandas(with_column)
    assert GBTRanker(**SMALL).fit(polars_x, y).model_ == want.model_
    # Evaluation frames carry theirs.
    est = GBTRanker(**SMALL).fit(with_column, y, eval_set=[(with_column, y)])
    assert est.evals_result() == GBTRanker(**SMALL).fit(X, y, qid=qid, eval_set=[(X, y)], eval_qid=[qid]).evals_result()
    # As XGBoost's ranker reads it.
    theirs = xgb.XGBRanker(**SMALL).fit(with_column, y)
    np.testing.assert_allclose(theirs.predict(with_column), xgb.XGBRanker(**SMALL).fit(X, y, qid=qid).predict(X))
    with pytest.raises(ValueError, match="Found both"):
        GBTRanker(**SMALL).fit(with_column, y, qid=qid)


def test_ranker_weights_per_query_as_xgboost():
    X, y, qid = _ranking(16)
    n_queries = len(np.unique(qid))
    w = np.random.default_rng(16).uniform(0.5, 3.0, n_queries)
    # Per query, they are scaled to average 1 over the queries (XGBoost's normalisation) and
    # spread over each query's rows.
    per_row = (w * n_queries / w.sum())[qid]
    got = GBTRanker(**SMALL).fit(X, y, qid=qid, sample_weight=w)
    assert got.model_ == GBTRanker(**SMALL).fit(X, y, qid=qid, sample_weight=per_row).model_
    assert got.model_ != GBTRanker(**SMALL).fit(X, y, qid=qid).model_
    with pytest.raises(ValueError, match="per row .* or per query"):
        GBTRanker(**SMALL).fit(X, y, qid=qid, sample_weight=w[:-1])


def test_ranker_query_weights_grow_xgboosts_stump():
    # One depth-1 tree on a binary feature (one split to make), as in test_against_peers'
    # lambdarank stumps: its leaf values are XGBoost's only if each query's weight scales its
    # pairs' gradients as XGBoost's does (normalised to average 1 over the queries; without
    # that the leaves differ by about 1%).
    rng = np.random.default_rng(17)
    sizes = rng.integers(2, 30, 80)
    qid = np.repeat(np.arange(len(sizes)), sizes)
    b = rng.integers(0, 2, len(qid)).astype(np.float32)
    rel = np.clip(np.round(b + rng.normal(scale=0.8, size=len(qid))), 0, 3)
    w = rng.uniform(0.2, 4.0, len(sizes))
    margin = rng.normal(size=len(qid)).astype(np.float32)
    params = dict(n_estimators=1, max_depth=1, learning_rate=1.0, reg_lambda=1.0, min_child_weight=0)
    X = b[:, None]
    theirs = xgb.XGBRanker(tree_method="hist", base_score=0.0, **params).fit(X, rel, qid=qid, sample_weight=w, base_margin=margin)
    ours = GBTRanker(**params).fit(X, rel, qid=qid, sample_weight=w, base_margin=margin)
    theirs, ours = theirs.predict(X, output_margin=True), ours.predict(X, output_margin=True)
    assert len(np.unique(theirs)) == 2
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-6)


# --- expected: multi-label y --------------------------------------------------------------------------


def test_a_multi_label_y_fits_one_binary_output_per_label(tmp_path):
    X, Y = make_multilabel_classification(n_samples=300, n_features=5, n_classes=3, random_state=18)
    clf = GBTClassifier(**SMALL).fit(X, Y)
    proba = clf.predict_proba(X)
    theirs = xgb.XGBClassifier(tree_method="hist", **SMALL).fit(X, Y)
    assert proba.shape == theirs.predict_proba(X).shape == (300, 3)
    assert clf.predict(X).shape == theirs.predict(X).shape == (300, 3)
    np.testing.assert_array_equal(clf.predict(X), (proba > 0.5).astype(int))
    # Each label's output is the binary fit of that label alone (one output per tree).
    for j in range(3):
        alone = GBTClassifier(**SMALL).fit(X, Y[:, j]).predict_proba(X)[:, 1]
        np.testing.assert_allclose(proba[:, j], alone, rtol=1e-5, atol=1e-7)
    assert clf.__sklearn_tags__().classifier_tags.multi_label
    # An evaluation set of label rows, and a saved and loaded model, as XGBoost's.
    evaluated = GBTClassifier(**SMALL).fit(X[:200], Y[:200], eval_set=[(X[200:], Y[200:])], verbose=False)
    their_log = xgb.XGBClassifier(tree_method="hist", **SMALL).fit(X[:200], Y[:200], eval_set=[(X[200:], Y[200:])], verbose=False)
    assert list(evaluated.evals_result()["validation_0"]) == list(their_log.evals_result()["validation_0"]) == ["logloss"]
    clf.save_model(tmp_path / "labels.json")
    loaded = GBTClassifier()
    loaded.load_model(tmp_path / "labels.json")
    np.testing.assert_allclose(loaded.predict_proba(X), proba, rtol=1e-6)
    np.testing.assert_array_equal(loaded.predict(X), clf.predict(X))
    # Through train, the same model.
    df = _frame(X).with_columns(pl.Series(f"y{j}", Y[:, j].astype(float)) for j in range(3))
    model = polars_gbt.train(df, target=["y0", "y1", "y2"], objective="binary:logistic", **SMALL)
    np.testing.assert_allclose(np.stack(model.predict(df).to_list()), proba, rtol=1e-6)


# --- expected: scipy sparse ----------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["csr", "csc"])
def test_scipy_sparse_absent_entries_are_missing_or_zero(fmt):
    rng = np.random.default_rng(19)
    dense = np.where(rng.random((300, 4)) < 0.6, 0.0, rng.normal(size=(300, 4)))
    y = dense[:, 0] * 2 + (dense[:, 1] == 0) + rng.normal(scale=0.1, size=300)
    matrix = sp.csr_matrix(dense) if fmt == "csr" else sp.csc_matrix(dense)
    as_missing = np.where(dense == 0.0, np.nan, dense)
    est = GBTRegressor(**SMALL).fit(matrix, y)
    assert est.model_ == GBTRegressor(**SMALL).fit(as_missing, y).model_
    np.testing.assert_array_equal(est.predict(matrix), est.predict(as_missing))
    # XGBoost reads absent entries as missing too.
    theirs = xgb.XGBRegressor(**SMALL).fit(matrix, y)
    np.testing.assert_allclose(theirs.predict(matrix), xgb.XGBRegressor(**SMALL).fit(as_missing, y).predict(as_missing), rtol=1e-6)
    # LightGBM's reading, zeros, on request.
    zeros = GBTRegressor(sparse_absent="zero", **SMALL).fit(matrix, y)
    assert zeros.model_ == GBTRegressor(**SMALL).fit(dense, y).model_
    with pytest.raises(ValueError, match="sparse_absent"):
        GBTRegressor(sparse_absent="zeros").fit(matrix, y)
    # polars_gbt.train through sparse_frame: the estimator's model (the same columns).
    frame = polars_gbt.sparse_frame(matrix).with_columns(y=pl.Series(y))
    assert polars_gbt.train(frame, target="y", **SMALL).predict(frame).to_numpy().tolist() == pytest.approx(
        est.predict(matrix).tolist(), rel=1e-6
    )
    assert polars_gbt.train(frame, target="y", **SMALL).trees_to_dataframe().equals(est.get_booster().trees_to_dataframe())
    with pytest.raises(TypeError, match="sparse_frame"):
        polars_gbt.train(matrix, target="y")


def test_validate_features_false_reads_a_frame_by_position():
    X, y = _regression(200, 3, seed=20)
    named = pd.DataFrame(X, columns=["a", "b", "c"])
    renamed = pd.DataFrame(X, columns=["u", "v", "w"])
    ours = GBTRegressor(**SMALL).fit(named, y)
    theirs = xgb.XGBRegressor(**SMALL).fit(named, y)
    # Both refuse other names by default, and read them by position without validation.
    with pytest.raises(ValueError):
        ours.predict(renamed)
    with pytest.raises(ValueError):
        theirs.predict(renamed)
    np.testing.assert_array_equal(ours.predict(renamed, validate_features=False), ours.predict(named))
    np.testing.assert_array_equal(theirs.predict(renamed, validate_features=False), theirs.predict(named))
