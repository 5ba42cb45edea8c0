"""Vector-leaf trees (``multi_strategy="multi_output_tree"``, XGBoost's name): one tree a round
whose leaves hold every output's value, for several targets and for multiclass. Checked against
XGBoost's own ``multi_output_tree`` models (scores of imported models, our exports scored by
XGBoost, accuracy of a fit on the same data) and against our one-output-per-tree fits."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
import xgboost as xgb

import polars_gbt
from polars_gbt import Model, ParameterError
from polars_gbt.sklearn import GBTRegressor

RTOL, ATOL = 1e-5, 1e-6
XGB_VERSION = tuple(int(p) for p in xgb.__version__.split(".")[:2])


def targets_frame(n: int, seed: int) -> pl.DataFrame:
    """Four numeric features (one with nulls) and three correlated targets."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 4)).astype(np.float32)
    noise = rng.normal(scale=0.1, size=(n, 3))
    y = np.stack([x[:, 0] + np.sin(x[:, 1]), x[:, 0] * x[:, 2], np.where(x[:, 3] > 0, 1.0, -1.0) + x[:, 1]], 1)
    df = pl.DataFrame({f"x{j}": x[:, j] for j in range(4)}).with_columns(
        pl.when(pl.lit(rng.random(n) < 0.1)).then(None).otherwise(pl.col("x2")).alias("x2")
    )
    return df.with_columns(pl.Series(f"y{t}", y[:, t] + noise[:, t]) for t in range(3))


FEATS = ["x0", "x1", "x2", "x3"]
TARGETS = ["y0", "y1", "y2"]
PARAMS = dict(max_depth=4, learning_rate=0.3, reg_lambda=1.0, min_child_weight=1.0, max_bin=256)


def xgb_matrix(df: pl.DataFrame, label: np.ndarray | None = None) -> xgb.DMatrix:
    return xgb.DMatrix(df.select(FEATS).to_numpy(), label=label, feature_names=FEATS, missing=np.nan)


def ours(model: Model, df: pl.DataFrame, output: str = "value") -> np.ndarray:
    return np.asarray(model.predict(df, output=output).to_list(), dtype=np.float64)


def test_imported_xgboost_vector_leaf_model_scores_as_xgboost():
    df = targets_frame(2000, 1)
    y = df.select(TARGETS).to_numpy()
    booster = xgb.train(
        dict(multi_strategy="multi_output_tree", tree_method="hist", max_depth=4, eta=0.3, nthread=2),
        xgb_matrix(df, y),
        20,
    )
    model = Model.from_xgboost(bytearray(booster.save_raw("json")))
    assert model.params["multi_strategy"] == "multi_output_tree"
    # One tree a round (its leaves hold every output), as XGBoost counts them.
    assert model.num_trees == booster.num_boosted_rounds() == len(booster.get_dump()) == 20
    dm = xgb_matrix(df)
    np.testing.assert_allclose(ours(model, df), booster.predict(dm), rtol=RTOL, atol=ATOL)
    # One leaf a round, XGBoost's node ids.
    np.testing.assert_array_equal(ours(model, df, "leaf"), booster.predict(dm, pred_leaf=True))
    # A slice of rounds scores as XGBoost's iteration_range.
    np.testing.assert_allclose(
        np.asarray(model.predict(df, iteration_range=(3, 9)).to_list()),
        booster.predict(dm, iteration_range=(3, 9)),
        rtol=RTOL,
        atol=ATOL,
    )
    # Importance counts a round's tree once, as XGBoost does.
    imp = model.feature_importance("weight")
    ours_weight = dict(zip(imp["feature"], imp["weight"]))
    theirs = booster.get_score(importance_type="weight")
    assert {f: ours_weight[f] for f in theirs} == pytest.approx(theirs)


@pytest.mark.parametrize("categorical", [False, True])
def test_imported_xgboost_multiclass_vector_leaves(categorical):
    if categorical and XGB_VERSION < (3, 4):
        pytest.skip("XGBoost trains categorical vector-leaf trees from 3.4 on")
    rng = np.random.default_rng(3)
    n = 1500
    x = rng.normal(size=(n, 3))
    cat = rng.integers(0, 8, n)
    y = ((x[:, 0] > 0).astype(int) + (cat % 3 == 0 if categorical else x[:, 1] > 0.3)).astype(int)
    pdf = pl.DataFrame({"a": x[:, 0], "b": x[:, 1], "c": x[:, 2], "k": [f"k{c}" for c in cat]})
    pdf = pdf.with_columns(pl.col("k").cast(pl.Categorical)) if categorical else pdf.drop("k")
    X = pdf.to_pandas()
    booster = xgb.train(
        dict(objective="multi:softprob", num_class=3, multi_strategy="multi_output_tree", max_depth=3,
             max_cat_to_onehot=1, nthread=2),
        xgb.DMatrix(X, label=y, enable_categorical=True),
        15,
    )
    model = Model.from_xgboost(booster.save_raw("ubj"))
    expected = booster.predict(xgb.DMatrix(X, enable_categorical=True))
    got = np.asarray(model.predict(pdf).to_list())
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL)


def test_our_vector_leaf_model_exports_to_xgboost_and_back(tmp_path):
    df = targets_frame(1500, 2)
    model = polars_gbt.train(df, target=TARGETS, features=FEATS, n_estimators=15,
                             multi_strategy="multi_output_tree", **PARAMS)
    assert model.num_trees == 15  # one tree a round, as XGBoost counts them
    path = tmp_path / "model.json"
    model.save_xgboost(path)
    booster = xgb.Booster(model_file=str(path))
    dm = xgb_matrix(df)
    np.testing.assert_allclose(booster.predict(dm), ours(model, df), rtol=RTOL, atol=ATOL)
    assert booster.predict(dm, pred_leaf=True).shape == (df.height, 15)
    np.testing.assert_array_equal(booster.predict(dm, pred_leaf=True), ours(model, df, "leaf"))
    again = Model.from_xgboost(path)
    np.testing.assert_allclose(ours(again, df), ours(model, df), rtol=RTOL, atol=ATOL)


def test_accuracy_against_xgboost_multi_output_tree():
    train, test = targets_frame(6000, 4), targets_frame(3000, 5)
    y, y_test = train.select(TARGETS).to_numpy(), test.select(TARGETS).to_numpy()
    rounds = 60
    booster = xgb.train(dict(multi_strategy="multi_output_tree", tree_method="hist", nthread=2, max_depth=4, eta=0.3),
                        xgb_matrix(train, y), rounds)
    theirs = np.sqrt(((booster.predict(xgb_matrix(test)) - y_test) ** 2).mean())
    model = polars_gbt.train(train, target=TARGETS, features=FEATS, n_estimators=rounds,
                             multi_strategy="multi_output_tree", **PARAMS)
    mine = np.sqrt(((ours(model, test) - y_test) ** 2).mean())
    # The same algorithm on the same data: within a few percent of XGBoost's test RMSE.
    assert mine < theirs * 1.05, (mine, theirs)
    per_tree = polars_gbt.train(train, target=TARGETS, features=FEATS, n_estimators=rounds, **PARAMS)
    # One tree per target a round, against one tree a round.
    assert per_tree.num_trees == 3 * model.num_trees == 3 * rounds


def test_one_target_gives_the_one_output_per_tree_model():
    df = targets_frame(1000, 6)
    a = polars_gbt.train(df, target="y0", features=FEATS, n_estimators=10, **PARAMS)
    b = polars_gbt.train(df, target="y0", features=FEATS, n_estimators=10, multi_strategy="multi_output_tree", **PARAMS)
    np.testing.assert_array_equal(ours(a, df), ours(b, df))
    assert a.trees_to_dataframe().equals(b.trees_to_dataframe())


def test_a_streamed_fit_is_the_collected_fit(tmp_path):
    df = targets_frame(3000, 12)
    path = tmp_path / "data.parquet"
    df.write_parquet(path)
    params = dict(n_estimators=5, multi_strategy="multi_output_tree", **PARAMS)
    collected = polars_gbt.train(df, target=TARGETS, features=FEATS, **params)
    streamed = polars_gbt.train(pl.scan_parquet(path), target=TARGETS, features=FEATS, **params)
    assert streamed.to_bytes() == collected.to_bytes()


@pytest.mark.skipif(not polars_gbt.cuda_available(), reason="no usable GPU (the GPU machine runs it)")
def test_a_gpu_fit_grows_the_cpu_trees(tmp_path):
    # Through the plugin, a frame with nulls and a categorical column: several targets and
    # multiclass, collected and streamed from a scan, give the CPU's model on the GPU.
    df = targets_frame(20_000, 13).with_columns(
        c=pl.Series([f"k{i % 7}" for i in range(20_000)], dtype=pl.Categorical),
        cls=(pl.col("y0").rank() * 4 / 20_001).floor().cast(pl.Int32),
    )
    feats = FEATS + ["c"]
    path = tmp_path / "data.parquet"
    df.write_parquet(path)
    for target, extra in [(TARGETS, {}), ("cls", dict(objective="multi:softprob", num_class=4))]:
        params = dict(n_estimators=6, multi_strategy="multi_output_tree", **extra, **PARAMS)
        cpu = polars_gbt.train(df, target=target, features=feats, device="cpu", **params)
        gpu = polars_gbt.train(df, target=target, features=feats, device="cuda", **params)
        assert gpu.trees_to_dataframe().equals(cpu.trees_to_dataframe())
        scanned = polars_gbt.train(pl.scan_parquet(path), target=target, features=feats, device="cuda", **params)
        assert scanned.trees_to_dataframe().equals(cpu.trees_to_dataframe())


def test_contributions_sum_to_the_margin_per_output():
    df = targets_frame(500, 7)
    model = polars_gbt.train(df, target=TARGETS, features=FEATS, n_estimators=8,
                             multi_strategy="multi_output_tree", **PARAMS)
    contrib = np.asarray(model.predict(df, output="contrib").to_list()).reshape(df.height, 3, len(FEATS) + 1)
    np.testing.assert_allclose(contrib.sum(-1), ours(model, df, "margin"), rtol=1e-4, atol=1e-4)


def test_sklearn_estimator_takes_multi_strategy():
    df = targets_frame(800, 8)
    est = GBTRegressor(n_estimators=5, multi_strategy="multi_output_tree", max_depth=3)
    est.fit(df.select(FEATS), df.select(TARGETS))
    assert est.get_params()["multi_strategy"] == "multi_output_tree"
    assert est.get_booster().params["multi_strategy"] == "multi_output_tree"
    assert np.asarray(est.predict(df.select(FEATS))).shape == (800, 3)


def test_unsupported_combinations_are_parameter_errors():
    df = targets_frame(300, 9)
    first = polars_gbt.train(df, target=TARGETS, features=FEATS, n_estimators=2)
    with pytest.raises(ParameterError, match="multi_strategy"):
        polars_gbt.train(df, target=TARGETS, features=FEATS, n_estimators=2, multi_strategy="multi_output_tree",
                         init_model=first)
    with pytest.raises(ParameterError, match="multi_strategy"):
        polars_gbt.train(df, target=TARGETS, features=FEATS, n_estimators=2, multi_strategy="vector")


@pytest.mark.skipif(XGB_VERSION < (3, 4), reason="XGBoost computes SHAP values of vector-leaf trees from 3.4 on")
def test_shap_values_equal_xgboost_on_a_vector_leaf_model():
    df = targets_frame(600, 10)
    y = df.select(TARGETS).to_numpy()
    booster = xgb.train(dict(multi_strategy="multi_output_tree", max_depth=4, eta=0.3, nthread=2), xgb_matrix(df, y), 8)
    model = Model.from_xgboost(bytearray(booster.save_raw("json")))
    dm = xgb_matrix(df)
    width = len(FEATS) + 1
    contrib = np.asarray(model.predict(df, output="contrib").to_list()).reshape(df.height, 3, width)
    np.testing.assert_allclose(contrib, booster.predict(dm, pred_contribs=True), rtol=1e-5, atol=1e-5)
    inter = np.asarray(model.predict(df.head(100), output="interaction").to_list()).reshape(100, 3, width, width)
    theirs = booster.predict(xgb_matrix(df.head(100)), pred_interactions=True)
    np.testing.assert_allclose(inter, theirs, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(XGB_VERSION < (3, 4), reason="XGBoost lists vector-leaf trees with a Target column from 3.4 on")
def test_trees_to_dataframe_is_xgboosts_for_vector_leaves():
    """XGBoost 3.4 lists a vector-leaf round as one tree: its splits once (Target null), each
    leaf once per output; ours of the same model imported is that table."""
    df = targets_frame(800, 11)
    booster = xgb.train(dict(multi_strategy="multi_output_tree", max_depth=3, nthread=2),
                        xgb_matrix(df, df.select(TARGETS).to_numpy()), 3)
    theirs = booster.trees_to_dataframe()
    theirs["Category"] = None
    theirs = pl.from_pandas(theirs)
    mine = Model.from_xgboost(bytearray(booster.save_raw("json"))).trees_to_dataframe()
    assert mine.columns == theirs.columns and mine.height == theirs.height
    for c in ("Tree", "Target", "Node", "ID", "Feature", "Yes", "No", "Missing"):
        assert mine[c].to_list() == theirs[c].to_list(), c
    for c in ("Split", "Gain", "Cover"):
        np.testing.assert_allclose(mine[c].cast(pl.Float64).to_numpy(), theirs[c].cast(pl.Float64).to_numpy(),
                                   rtol=1e-6, err_msg=c)


def test_our_categorical_multiclass_vector_leaves_in_xgboost(tmp_path):
    rng = np.random.default_rng(1)
    n = 2000
    x, cat = rng.normal(size=(n, 3)), rng.integers(0, 9, n)
    y = ((x[:, 0] > 0).astype(int) + (cat % 3 == 0)).astype(float)
    df = pl.DataFrame({"a": x[:, 0], "b": x[:, 1], "c": x[:, 2], "k": [f"k{c}" for c in cat]})
    df = df.with_columns(pl.col("k").cast(pl.Categorical), y=pl.Series(y))
    feats = ["a", "b", "c", "k"]
    model = polars_gbt.train(df, target="y", features=feats, objective="multi:softprob", num_class=3,
                             n_estimators=10, max_depth=4, max_cat_to_onehot=1, multi_strategy="multi_output_tree")
    assert (model.trees_to_dataframe()["Category"].drop_nulls().len()) > 0
    path = tmp_path / "model.json"
    model.save_xgboost(path)
    dm = xgb.DMatrix(df.select(feats).to_pandas(), enable_categorical=True)
    booster = xgb.Booster(model_file=str(path))
    np.testing.assert_allclose(booster.predict(dm), ours(model, df), rtol=RTOL, atol=ATOL)
    if XGB_VERSION >= (3, 4):
        contrib = np.asarray(model.predict(df, output="contrib").to_list()).reshape(n, 3, len(feats) + 1)
        np.testing.assert_allclose(booster.predict(dm, pred_contribs=True), contrib, rtol=1e-5, atol=1e-5)
