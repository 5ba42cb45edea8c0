"""Models trained by xgboost-cpu and LightGBM in the test, imported, scored by polars-gbt
inside Polars, and compared with what the library that trained them predicts. Also our models
exported to XGBoost JSON and scored by XGBoost."""

from __future__ import annotations

import json

import lightgbm as lgb
import numpy as np
import pandas as pd
import polars as pl
import pytest
import xgboost as xgb
from conftest import DATA, FEATURES, load

import polars_gbt
from polars_gbt import Model, ModelError

SHARED = DATA.parent
RTOL, ATOL = 1e-5, 1e-6  # float32 sums in a possibly different order than the peer's


def float32(df: pl.DataFrame) -> pl.DataFrame:
    """Numeric columns as exact float32 values, so the peers and we see the same numbers."""
    return df.with_columns(pl.col(pl.Float64).cast(pl.Float32).cast(pl.Float64))


def higgs_with_missing() -> tuple[pl.DataFrame, pl.DataFrame]:
    """LightGBM's binary data with 10% of every feature set missing."""
    rng = np.random.default_rng(7)
    out = []
    for name in ("binary.train", "binary.test"):
        df = float32(load(DATA / "binary_classification" / name))
        df = df.with_columns(
            pl.when(pl.lit(rng.random(df.height) < 0.1)).then(None).otherwise(pl.col(c)).alias(c) for c in FEATURES
        )
        out.append(df)
    return out[0], out[1]


def dermatology() -> tuple[pl.DataFrame, list[str]]:
    """Six classes; the age column has missing values (`?`)."""
    df = pl.read_csv(SHARED / "xgboost" / "dermatology" / "dermatology.data", has_header=False, null_values="?")
    feats = [f"d{i}" for i in range(34)]
    df = df.rename({c: (feats[i] if i < 34 else "y") for i, c in enumerate(df.columns)})
    return df.with_columns(pl.col(feats).cast(pl.Float64), (pl.col("y") - 1).alias("y")), feats


def mushrooms() -> tuple[pl.DataFrame, list[str]]:
    """22 categorical features; stalk-root has missing values (`?`)."""
    df = pl.read_csv(SHARED / "xgboost" / "agaricus-lepiota" / "agaricus-lepiota.data", has_header=False, null_values="?")
    feats = [f"m{i}" for i in range(22)]
    df = df.rename({c: ("label" if i == 0 else feats[i - 1]) for i, c in enumerate(df.columns)})
    return df.with_columns(pl.col(feats).cast(pl.Categorical), (pl.col("label") == "p").cast(pl.Float64).alias("y")), feats


def integer_coded() -> tuple[np.ndarray, np.ndarray, list[int]]:
    """LightGBM's categorical.data: integer-coded features, 0, 1, 4, 5, 6 categorical."""
    rows, labels = [], []
    for line in (SHARED / "lightgbm" / "categorical" / "categorical.data").read_text().splitlines():
        parts = line.split()
        labels.append(float(parts[0]))
        row = np.zeros(8)
        for kv in parts[1:]:
            k, v = kv.split(":")
            row[int(k)] = float(v)
        rows.append(row)
    return np.array(rows), np.array(labels), [0, 1, 4, 5, 6]


def to_pandas(df: pl.DataFrame, feats: list[str]) -> pd.DataFrame:
    return df.select(feats).to_pandas()


def ours(model: Model, df: pl.DataFrame, feats: list[str], output: str = "value") -> np.ndarray:
    out = df.select(pl.col(feats).gbt.predict(model, output=output)).to_series()
    return np.stack(out.to_list()) if isinstance(out.dtype, pl.Array) else out.to_numpy()


def assert_same(a: np.ndarray, b: np.ndarray) -> None:
    np.testing.assert_allclose(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64), rtol=RTOL, atol=ATOL)


# --- XGBoost ---------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["json", "ubj"])
def test_xgboost_binary_with_missing_values(tmp_path, fmt):
    train, test = higgs_with_missing()
    params = dict(objective="binary:logistic", tree_method="hist", max_depth=6, eta=0.3, nthread=2, seed=0)
    booster = xgb.train(params, xgb.DMatrix(to_pandas(train, FEATURES), label=train["y"].to_numpy()), 40)
    path = tmp_path / f"model.{fmt}"
    booster.save_model(path)
    model = Model.from_xgboost(path)
    dtest = xgb.DMatrix(to_pandas(test, FEATURES))
    assert model.num_trees == 40 and model.feature_names == FEATURES
    assert_same(ours(model, test, FEATURES), booster.predict(dtest))
    assert_same(ours(model, test, FEATURES, "margin"), booster.predict(dtest, output_margin=True))
    # Node ids are kept, so leaf indices match XGBoost's exactly.
    np.testing.assert_array_equal(ours(model, test, FEATURES, "leaf"), booster.predict(dtest, pred_leaf=True))
    # The same model from bytes.
    assert Model.from_xgboost(path.read_bytes()).to_bytes() == model.to_bytes()


def test_xgboost_multiclass_with_missing_values():
    df, feats = dermatology()
    params = dict(objective="multi:softprob", num_class=6, tree_method="hist", max_depth=4, eta=0.3, nthread=2)
    booster = xgb.train(params, xgb.DMatrix(to_pandas(df, feats), label=df["y"].to_numpy()), 30)
    model = Model.from_xgboost(bytearray(booster.save_raw("json")))
    expected = booster.predict(xgb.DMatrix(to_pandas(df, feats)))
    assert df["d33"].null_count() > 0
    assert_same(ours(model, df, feats), expected)
    np.testing.assert_array_equal(ours(model, df, feats, "class"), expected.argmax(axis=1))


def test_xgboost_categorical_by_name_with_missing_values():
    df, feats = mushrooms()
    params = dict(objective="binary:logistic", tree_method="hist", max_depth=4, eta=0.3, max_cat_to_onehot=1, nthread=2)
    X = to_pandas(df, feats)
    booster = xgb.train(params, xgb.DMatrix(X, label=df["y"].to_numpy(), enable_categorical=True), 20)
    model = Model.from_xgboost(booster.save_raw("ubj"))
    expected = booster.predict(xgb.DMatrix(X, enable_categorical=True))
    assert df["m10"].null_count() > 0
    assert_same(ours(model, df, feats), expected)
    # Columns in another order bind by name.
    assert_same(ours(model, df.select(feats[::-1]), feats), expected)


def test_xgboost_integer_coded_categories():
    X, y, cat = integer_coded()
    types = ["c" if i in cat else "q" for i in range(X.shape[1])]
    params = dict(objective="binary:logistic", tree_method="hist", max_depth=4, eta=0.3, max_cat_to_onehot=1, nthread=2)
    booster = xgb.train(params, xgb.DMatrix(X, label=y, feature_types=types, enable_categorical=True), 20)
    model = Model.from_xgboost(booster.save_raw("json"))
    df = pl.DataFrame(X, schema=[f"f{i}" for i in range(8)])
    expected = booster.predict(xgb.DMatrix(X, feature_types=types, enable_categorical=True))
    assert_same(ours(model, df, df.columns), expected)


def test_xgboost_regression_objectives():
    train, _ = higgs_with_missing()
    X, y = to_pandas(train, FEATURES), train["f0"].fill_null(0.0).to_numpy() + 1.0
    for objective in ("reg:squarederror", "count:poisson", "reg:tweedie", "reg:absoluteerror"):
        booster = xgb.train(dict(objective=objective, max_depth=3, nthread=2), xgb.DMatrix(X.drop(columns="f0"), label=y), 10)
        model = Model.from_xgboost(booster.save_raw("json"))
        assert_same(ours(model, train, FEATURES[1:]), booster.predict(xgb.DMatrix(X.drop(columns="f0"))))


def test_xgboost_unsupported_and_corrupt_models():
    train, _ = higgs_with_missing()
    # binary:logitraw: an XGBoost objective polars-gbt does not have.
    booster = xgb.train(dict(objective="binary:logitraw", max_depth=2), xgb.DMatrix(to_pandas(train, FEATURES[:3]), label=np.ones(train.height)), 2)
    with pytest.raises(ModelError, match="binary:logitraw"):
        Model.from_xgboost(booster.save_raw("json"))
    raw = booster.save_raw("ubj")
    with pytest.raises(ModelError):
        Model.from_xgboost(raw[: len(raw) // 2])
    with pytest.raises(ModelError):
        Model.from_xgboost(b"not a model")


# --- LightGBM --------------------------------------------------------------------------------

LGB = dict(verbose=-1, num_threads=2, seed=0, deterministic=True, min_data_in_leaf=5, num_leaves=31)


def test_lightgbm_binary_with_missing_values(tmp_path):
    train, test = higgs_with_missing()
    gbm = lgb.train(dict(LGB, objective="binary"), lgb.Dataset(to_pandas(train, FEATURES), label=train["y"].to_numpy()), 40)
    path = tmp_path / "model.txt"
    gbm.save_model(path)
    model = Model.from_lightgbm(path)
    X = to_pandas(test, FEATURES)
    assert_same(ours(model, test, FEATURES), gbm.predict(X))
    assert_same(ours(model, test, FEATURES, "margin"), gbm.predict(X, raw_score=True))
    # Leaf j of a tree with L leaves is our node L - 1 + j.
    leaves = gbm.predict(X, pred_leaf=True)
    sizes = np.array([t["num_leaves"] for t in gbm.dump_model()["tree_info"]])
    np.testing.assert_array_equal(ours(model, test, FEATURES, "leaf"), leaves + sizes - 1)
    assert Model.from_lightgbm(gbm.model_to_string()).to_bytes() == model.to_bytes()


def test_lightgbm_multiclass_with_missing_values():
    df, feats = dermatology()
    gbm = lgb.train(dict(LGB, objective="multiclass", num_class=6), lgb.Dataset(to_pandas(df, feats), label=df["y"].to_numpy()), 30)
    model = Model.from_lightgbm(gbm.model_to_string())
    expected = gbm.predict(to_pandas(df, feats))
    assert_same(ours(model, df, feats), expected)


def test_lightgbm_categorical_by_name_with_missing_values():
    df, feats = mushrooms()
    X = to_pandas(df, feats)
    gbm = lgb.train(dict(LGB, objective="binary", min_data_per_group=5, cat_smooth=1), lgb.Dataset(X, label=df["y"].to_numpy()), 20)
    model = Model.from_lightgbm(gbm.model_to_string())
    assert "num_cat=0" not in gbm.model_to_string().split("Tree=1")[0]  # categorical splits were made
    assert_same(ours(model, df, feats), gbm.predict(X))


def test_lightgbm_integer_coded_categories():
    X, y, cat = integer_coded()
    gbm = lgb.train(dict(LGB, objective="binary"), lgb.Dataset(X, label=y, categorical_feature=cat), 20)
    model = Model.from_lightgbm(gbm.model_to_string())
    df = pl.DataFrame(X, schema=[f"Column_{i}" for i in range(8)])
    assert_same(ours(model, df, df.columns), gbm.predict(X))
    # A category column given as text is refused: this model takes codes.
    with pytest.raises(Exception, match="integer category codes"):
        ours(model, df.with_columns(pl.col("Column_0").cast(pl.Int64).cast(pl.String).cast(pl.Categorical)), df.columns)


def test_lightgbm_regression_objectives():
    train, _ = higgs_with_missing()
    X, y = to_pandas(train, FEATURES[1:]), train["f0"].fill_null(0.0).to_numpy() + 1.0
    for objective in ("regression", "poisson", "tweedie", "quantile", "regression_l1"):
        gbm = lgb.train(dict(LGB, objective=objective), lgb.Dataset(X, label=y), 10)
        model = Model.from_lightgbm(gbm.model_to_string())
        assert_same(ours(model, train, FEATURES[1:]), gbm.predict(X))


def test_lightgbm_unsupported_models():
    train, _ = higgs_with_missing()
    X, y = to_pandas(train, FEATURES[:4]), train["y"].to_numpy()
    gbm = lgb.train(dict(LGB, objective="huber"), lgb.Dataset(X, label=y), 2)
    with pytest.raises(ModelError, match="huber"):
        Model.from_lightgbm(gbm.model_to_string())
    gbm = lgb.train(dict(LGB, objective="regression", linear_tree=True), lgb.Dataset(X.fillna(0), label=y), 2)
    with pytest.raises(ModelError, match="linear"):
        Model.from_lightgbm(gbm.model_to_string())
    with pytest.raises(ModelError):
        Model.from_lightgbm("tree\nversion=v4\n")


# --- Export ----------------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["binary_missing", "multiclass", "categorical"])
def test_export_to_xgboost(tmp_path, case):
    if case == "binary_missing":
        df, _ = higgs_with_missing()
        feats, params = FEATURES, dict(objective="binary:logistic", n_estimators=20, max_depth=5)
    elif case == "multiclass":
        df, feats = dermatology()
        params = dict(objective="multi:softprob", num_class=6, n_estimators=15, max_depth=4)
    else:
        df, feats = mushrooms()
        params = dict(objective="binary:logistic", n_estimators=15, max_depth=4, max_cat_to_onehot=1)
    model = polars_gbt.train(df, target="y", features=feats, **params)
    path = tmp_path / "model.json"
    model.save_xgboost(path)
    booster = xgb.Booster(model_file=str(path))
    X = to_pandas(df, feats)
    dm = xgb.DMatrix(X, enable_categorical=case == "categorical")
    assert_same(booster.predict(dm), ours(model, df, feats))
    if case != "categorical":  # trees with categorical splits are renumbered for XGBoost
        np.testing.assert_array_equal(booster.predict(dm, pred_leaf=True), ours(model, df, feats, "leaf"))
    else:
        assert booster.predict(dm, pred_leaf=True).shape == (df.height, model.num_trees)
    # And back: the export imports to the same predictions.
    again = Model.from_xgboost(path)
    assert_same(ours(again, df, feats), ours(model, df, feats))


# --- What an imported model says about its training ------------------------------------------


def test_imported_xgboost_params_are_what_the_file_states(tmp_path):
    """XGBoost's model file keeps the objective (and its parameters), the base score and the
    trees, not the learning rate or the depth: those are unknown, not made up."""
    train, _ = higgs_with_missing()
    X, y = to_pandas(train, FEATURES), train["y"].to_numpy() * 3.0
    params = dict(objective="reg:quantileerror", quantile_alpha=0.8, base_score=0.25, eta=0.05, max_depth=3, nthread=2)
    booster = xgb.train(params, xgb.DMatrix(X, label=y), 7)
    path = tmp_path / "model.json"
    booster.save_model(path)
    model = Model.from_xgboost(path)
    p = model.params
    assert model.imported_from == "XGBoost"
    assert p["objective"] == "reg:quantileerror"
    assert p["quantile_alpha"] == pytest.approx(0.8)
    assert p["base_score"] == pytest.approx(0.25)
    assert p["n_estimators"] == 7
    for unknown in ("learning_rate", "max_depth", "max_leaves", "grow_policy", "reg_lambda", "subsample", "seed", "max_bin"):
        assert p[unknown] is None, unknown
    assert set(p) == set(polars_gbt.train(pl.DataFrame({"a": [1.0, 2.0], "y": [0.0, 1.0]}), target="y", n_estimators=1).params)
    # Saved and loaded, the record stays.
    again = Model.from_bytes(model.to_bytes())
    assert again.params == p and again.imported_from == "XGBoost"


def test_imported_lightgbm_params_are_what_the_file_states(tmp_path):
    train, _ = higgs_with_missing()
    X, y = train.select(FEATURES).to_numpy(), train["y"].to_numpy()
    params = dict(
        objective="binary", learning_rate=0.07, num_leaves=13, max_depth=5, lambda_l1=0.5, lambda_l2=2.0,
        min_sum_hessian_in_leaf=0.3, feature_fraction=0.8, bagging_fraction=0.7, bagging_freq=1, num_threads=2,
        verbose=-1,
    )
    gbm = lgb.train(params, lgb.Dataset(X, label=y), num_boost_round=9)
    path = tmp_path / "model.txt"
    gbm.save_model(path)
    model = Model.from_lightgbm(path)
    p = model.params
    assert model.imported_from == "LightGBM"
    assert p["objective"] == "binary:logistic"
    assert p["n_estimators"] == 9
    assert p["grow_policy"] == "lossguide"
    assert p["learning_rate"] == pytest.approx(0.07)
    assert p["max_leaves"] == 13 and p["max_depth"] == 5
    assert p["reg_alpha"] == pytest.approx(0.5) and p["reg_lambda"] == pytest.approx(2.0)
    assert p["min_child_weight"] == pytest.approx(0.3)
    assert p["colsample_bytree"] == pytest.approx(0.8) and p["subsample"] == pytest.approx(0.7)
    # LightGBM has no base score (it is folded into the first tree), nor our gamma or seed.
    for unknown in ("base_score", "gamma", "seed", "max_bin"):
        assert p[unknown] is None, unknown
    # Without bagging_freq, LightGBM samples no rows whatever bagging_fraction says.
    gbm = lgb.train({**params, "bagging_freq": 0}, lgb.Dataset(X, label=y), num_boost_round=2)
    assert Model.from_lightgbm(gbm.model_to_string()).params["subsample"] == 1.0
    # Models trained here know all their parameters.
    ours_ = polars_gbt.train(pl.DataFrame({"a": [1.0, 2.0], "y": [0.0, 1.0]}), target="y", n_estimators=1)
    assert ours_.imported_from is None and ours_.params["learning_rate"] == 0.3


# XGBoost 3.4 added the `Target` column (the tree's output, `tree_info`), after `Tree`; ours
# has it whichever XGBoost is installed.
COLUMNS = ["Tree", "Target", "Node", "ID", "Feature", "Split", "Yes", "No", "Missing", "Gain", "Cover", "Category"]
XGBOOST_HAS_TARGET = tuple(int(v) for v in xgb.__version__.split(".")[:2]) >= (3, 4)


def _xgboost_table(booster: xgb.Booster) -> pl.DataFrame:
    t = booster.trees_to_dataframe()
    t["Category"] = [c if isinstance(c, list) else None for c in t["Category"]]
    t = pl.from_pandas(t)
    if not XGBOOST_HAS_TARGET:
        # Before 3.4 the output of a tree is the JSON model's `tree_info`.
        info = json.loads(booster.save_raw("json"))["learner"]["gradient_booster"]["model"]["tree_info"]
        t = t.with_columns(Target=pl.Series([info[i] for i in t["Tree"]], dtype=pl.Int64)).select(COLUMNS)
    return t


def _assert_same_table(ours_: pl.DataFrame, theirs: pl.DataFrame) -> None:
    assert ours_.columns == theirs.columns == COLUMNS
    assert ours_.height == theirs.height
    for c in ("Tree", "Target", "Node", "ID", "Feature", "Yes", "No", "Missing"):
        assert ours_[c].to_list() == theirs[c].to_list(), c
    for c in ("Split", "Gain", "Cover"):
        np.testing.assert_allclose(ours_[c].cast(pl.Float64).to_numpy(), theirs[c].cast(pl.Float64).to_numpy(),
                                   rtol=1e-6, err_msg=c)


def test_trees_to_dataframe_is_xgboosts_on_the_same_model(tmp_path):
    """XGBoost's own trees_to_dataframe of a model, and ours of the same model imported: the
    same columns (XGBoost 3.4's, with `Target`), node ids, outputs, children, features,
    thresholds, gains (leaf values on leaves) and covers; categorical splits list the same
    categories (names here, XGBoost's codes there)."""
    train, _ = higgs_with_missing()
    params = dict(objective="binary:logistic", tree_method="hist", max_depth=4, eta=0.3, nthread=2, seed=0)
    booster = xgb.train(params, xgb.DMatrix(to_pandas(train, FEATURES), label=train["y"].to_numpy()), 5)
    path = tmp_path / "model.json"
    booster.save_model(path)
    _assert_same_table(Model.from_xgboost(path).trees_to_dataframe(), _xgboost_table(booster))

    # Three classes: trees take turns at the outputs, and `Target` says which.
    y3 = (train["f0"].to_numpy() > 1.0).astype(int) + train["y"].to_numpy().astype(int)
    booster = xgb.train({**params, "objective": "multi:softprob", "num_class": 3},
                        xgb.DMatrix(to_pandas(train, FEATURES), label=y3), 4)
    booster.save_model(path)
    ours_, theirs = Model.from_xgboost(path).trees_to_dataframe(), _xgboost_table(booster)
    _assert_same_table(ours_, theirs)
    assert ours_.group_by("Tree").agg(pl.col("Target").first()).sort("Tree")["Target"].to_list() == [0, 1, 2] * 4

    df, feats = mushrooms()
    X = to_pandas(df, feats)
    booster = xgb.train(
        dict(objective="binary:logistic", tree_method="hist", max_depth=3, max_cat_to_onehot=1, nthread=2),
        xgb.DMatrix(X, label=df["y"].to_numpy(), enable_categorical=True), 3,
    )
    booster.save_model(tmp_path / "cat.json")
    ours_, theirs = Model.from_xgboost(tmp_path / "cat.json").trees_to_dataframe(), _xgboost_table(booster)
    for c in ("Tree", "Target", "Node", "ID", "Feature", "Yes", "No", "Missing"):
        assert ours_[c].to_list() == theirs[c].to_list(), c
    names = {f: list(X[f].cat.categories) for f in feats}
    # XGBoost lists a set's codes in its own order; ours are in code order.
    want = [None if cats is None else sorted(names[f][int(c)] for c in cats) for f, cats in zip(theirs["Feature"], theirs["Category"])]
    assert [None if cats is None else sorted(cats) for cats in ours_["Category"].to_list()] == want
    assert sum(c is not None for c in want) > 0
    for c in ("Split", "Gain", "Cover"):
        np.testing.assert_allclose(ours_[c].cast(pl.Float64).to_numpy(), theirs[c].cast(pl.Float64).to_numpy(),
                                   rtol=1e-6, err_msg=c)


def test_lightgbm_gamma_models_predict_what_lightgbm_does(tmp_path):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(2000, 3))
    y = rng.gamma(2.0, np.exp(0.5 * X[:, 0]) / 2)
    booster = lgb.train({"objective": "gamma", "verbose": -1, "num_leaves": 15},
                        lgb.Dataset(X, label=y, feature_name=["a", "b", "c"]), 20)
    booster.save_model(tmp_path / "gamma.txt")
    model = Model.from_lightgbm(tmp_path / "gamma.txt")
    assert model.params["objective"] == "reg:gamma"
    ours = model.predict(pl.DataFrame({"a": X[:, 0], "b": X[:, 1], "c": X[:, 2]})).to_numpy()
    np.testing.assert_allclose(ours, booster.predict(X), rtol=1e-5)
