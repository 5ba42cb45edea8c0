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
        ({"missing": -999.0}, "missing"),
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
