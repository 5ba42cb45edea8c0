"""Parameter dictionaries written for XGBoost or LightGBM (issue 17): settings polars-gbt
always has are accepted, LightGBM's names that mean exactly ours are aliases, and the rest are
errors that say why."""

from __future__ import annotations

import polars as pl
import pytest
from conftest import FEATURES

import polars_gbt


def test_lightgbm_names_train_the_same_model_as_ours(train_df):
    df = train_df.head(3000)
    ours = polars_gbt.train(
        df, target="y", objective="binary:logistic", max_leaves=15, grow_policy="lossguide", n_estimators=5,
        reg_alpha=0.5, reg_lambda=2.0, min_child_weight=0.3, colsample_bytree=0.8,
    )
    theirs = polars_gbt.train(
        df, target="y", objective="binary:logistic", num_leaves=15, grow_policy="lossguide", num_iterations=5,
        lambda_l1=0.5, lambda_l2=2.0, min_sum_hessian_in_leaf=0.3, feature_fraction=0.8,
        # XGBoost's settings that polars-gbt always has.
        tree_method="hist", booster="gbtree", verbosity=0, enable_categorical=True,
    )
    assert theirs.to_bytes() == ours.to_bytes()
    assert theirs.feature_names == FEATURES


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"tree_method": "exact"}, "histograms only"),
        ({"booster": "dart"}, "gbtree"),
        ({"verbosity": 9}, "0, 1, 2 or 3"),
        ({"min_data_in_leaf": 20}, "min_child_weight"),
        ({"scale_pos_weight": 2.0}, "scale_pos_weight"),
        ({"missing": 0.1}, "float32 holds exactly"),
        ({"tree_methd": "hist"}, "unknown field"),
    ],
)
def test_settings_without_a_meaning_here_raise_parameter_errors(params, message):
    with pytest.raises(polars_gbt.ParameterError, match=message):
        pl.col("a").gbt.fit("y", **params)


def test_gpu_hist_means_cuda_with_a_deprecation_warning():
    with pytest.warns(DeprecationWarning, match="device=\"cuda\""):
        pl.col("a").gbt.fit("y", tree_method="gpu_hist")
    with pytest.raises(polars_gbt.ParameterError, match="contradicts"):
        with pytest.warns(DeprecationWarning):
            pl.col("a").gbt.fit("y", tree_method="gpu_hist", device="cpu")


def test_feature_weights_steer_column_sampling(train_df):
    df = train_df.head(3000)
    # f0..f3 weigh nothing: no tree may use them, whichever sampling draws.
    weights = {f: 0.0 for f in FEATURES[:4]}
    for sampling in ({"colsample_bytree": 0.5}, {"colsample_bylevel": 0.5}, {"colsample_bynode": 0.5}):
        model = polars_gbt.train(df, target="y", n_estimators=20, feature_weights=weights, **sampling)
        used = set(model.trees_to_dataframe().filter(pl.col("Feature") != "Leaf")["Feature"])
        assert used and not used & set(weights), (sampling, used & set(weights))
    # One weight per feature, as XGBoost takes it (the estimators too).
    per_feature = [0.0] * 4 + [1.0] * (len(FEATURES) - 4)
    a = polars_gbt.train(df, target="y", n_estimators=5, colsample_bytree=0.5, feature_weights=weights)
    b = polars_gbt.train(df, target="y", n_estimators=5, colsample_bytree=0.5, feature_weights=per_feature)
    assert a.trees_to_dataframe().equals(b.trees_to_dataframe())
    with pytest.raises(polars_gbt.ParameterError, match="no colsample"):
        df.select(pl.col(FEATURES).gbt.fit("y", feature_weights=weights))


def test_a_missing_sentinel_reads_as_null_in_training_and_scoring(train_df):
    df = train_df.head(4000)
    # A quarter of f0 and f5 replaced by -999: with missing=-999 they are missing values.
    marked = df.with_columns(
        pl.when(pl.int_range(pl.len()) % 4 == 0).then(-999.0).otherwise(pl.col(c)).alias(c) for c in ("f0", "f5")
    )
    nulls = marked.with_columns(pl.col("f0", "f5").replace(-999.0, None))
    params = dict(n_estimators=8, max_depth=4)
    sentinel = polars_gbt.train(marked, target="y", missing=-999, **params)
    reference = polars_gbt.train(nulls, target="y", **params)
    assert sentinel.trees_to_dataframe().equals(reference.trees_to_dataframe())
    assert sentinel.params["missing"] == -999
    # The model reads -999 as missing when it scores, too.
    assert sentinel.predict(marked).equals(reference.predict(nulls))
    # NaN, XGBoost's default, changes nothing; the estimators take it as XGBoost's do.
    from polars_gbt.sklearn import GBTRegressor

    est = GBTRegressor(missing=-999.0, **params).fit(marked.select(FEATURES), marked["y"])
    assert est.get_booster().params["missing"] == -999
    assert polars_gbt.train(df, target="y", missing=float("nan"), **params).params["missing"] is None
    with pytest.raises(polars_gbt.ParameterError, match="missing"):
        df.select(pl.col(FEATURES).gbt.fit("y", missing=0.1))
