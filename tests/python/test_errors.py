"""Errors as documented exceptions (issue 6, point 6): every Rust error reaching Python
through polars_gbt.train, Model or the estimators is a polars_gbt.GbtError subclass naming
the parameter, column or file at fault (and, for compatibility, still a ValueError where it
was one)."""

from __future__ import annotations

import polars as pl
import pytest
from conftest import FEATURES

import polars_gbt
from polars_gbt import ColumnError, DataError, DeviceError, GbtError, ModelError, ModelVersionError, ParameterError


def test_training_errors_have_their_class_and_name_the_culprit(train_df):
    df = train_df.head(300)
    with pytest.raises(ParameterError, match="max_dpeth") as info:
        polars_gbt.train(df, target="y", max_dpeth=3)
    assert isinstance(info.value, GbtError) and isinstance(info.value, ValueError)
    with pytest.raises(ParameterError, match="learning_rate"):
        polars_gbt.train(df, target="y", learning_rate=-1)
    with pytest.raises(ColumnError, match="label"):
        polars_gbt.train(df.with_columns(y=pl.col("y") * 3), target="y", objective="binary:logistic")
    with pytest.raises(ParameterError, match="early_stopping_rounds.*evaluation set"):
        polars_gbt.train(df, target="y", early_stopping_rounds=5)
    with pytest.raises(DataError, match="entirely missing"):
        polars_gbt.train(df.select(pl.lit(None, dtype=pl.Float32).alias("a"), "y"), target="y")


def test_model_errors_have_their_class():
    with pytest.raises(ModelError, match="magic|too short") as info:
        polars_gbt.Model.from_bytes(b"definitely not a model")
    assert isinstance(info.value, ValueError)
    df = pl.DataFrame({"a": [0.0, 1.0] * 20, "y": [0.0, 1.0] * 20})
    good = polars_gbt.train(df, target="y", n_estimators=2).to_bytes()
    newer = good[:8] + (99).to_bytes(4, "little") + good[12:]
    with pytest.raises(ModelVersionError, match="newer"):
        polars_gbt.Model.from_bytes(newer)
    with pytest.raises(ModelError, match="JSON"):
        polars_gbt.Model.from_json("{not json")


@pytest.mark.skipif(polars_gbt.cuda_available(), reason="a GPU is present")
def test_device_errors_have_their_class(train_df):
    with pytest.raises(DeviceError, match='device="cuda" cannot be used'):
        polars_gbt.train(train_df.head(100), target="y", device="cuda")


def test_hand_written_expressions(train_df):
    df = train_df.head(100)
    # A bad parameter is caught where the expression is built, before any query runs.
    with pytest.raises(ParameterError, match="invalid parameter `max_dpeth`"):
        pl.col(FEATURES).gbt.fit("y", max_dpeth=3)
    with pytest.raises(ParameterError, match="learning_rate"):
        pl.col(FEATURES).gbt.fit("y", learning_rate=-1)
    # Errors that depend on the data come from Polars, as ComputeError with our message...
    bad_label = pl.col(FEATURES).gbt.fit(pl.col("y") * 3, objective="binary:logistic")
    with pytest.raises(pl.exceptions.ComputeError, match="column `label`"):
        df.select(bad_label)
    # ...or as our classes inside translate_errors(), the Polars error chained.
    with pytest.raises(ColumnError, match="label") as info, polars_gbt.translate_errors():
        df.select(bad_label)
    assert isinstance(info.value.__cause__, pl.exceptions.ComputeError)
    with pytest.raises(ColumnError, match="column `target`: must be numeric"), polars_gbt.translate_errors():
        df.with_columns(s=pl.lit("x")).select(pl.col(FEATURES).gbt.fit("s"))
    with pytest.raises(ColumnError, match="column `group`"), polars_gbt.translate_errors():
        df.with_columns(q=pl.lit("x")).select(pl.col(FEATURES).gbt.fit("y", group="q", objective="rank:pairwise"))


def test_a_panic_message_is_an_internal_error():
    # Every plugin and Python entry point catches panics (src/python/mod.rs) and says they are
    # bugs with this prefix; translate_errors raises InternalError for them, never a bare
    # "the plugin panicked".
    from polars_gbt._errors import translated

    message = "internal error (a bug in polars-gbt; please report it): index out of bounds"
    with pytest.raises(polars_gbt.InternalError, match="index out of bounds") as info, translated():
        raise pl.exceptions.ComputeError("the plugin failed with message: " + message)
    assert isinstance(info.value, GbtError) and isinstance(info.value, RuntimeError)
    with pytest.raises(polars_gbt.InternalError), translated():
        raise RuntimeError(message)


def _fit(target, **kwargs):
    df = pl.DataFrame({"x": [float(i % 10) for i in range(100)], "a": list(range(100)), "b": [1.0] * 100})
    with polars_gbt.translate_errors():
        return df.select(pl.col("x").gbt.fit(target, n_estimators=2, **kwargs)).item()


@pytest.mark.parametrize(
    "target,kwargs,error,match",
    [
        # Several targets: one Array/List column, every row whole and numeric.
        (pl.concat_arr(pl.when(pl.col("a") == 3).then(None).otherwise(pl.col("b")), "b"), {}, ColumnError,
         "target.*null"),
        (pl.when(pl.col("a") == 3).then(pl.concat_list("b")).otherwise(pl.concat_list("b", "b")), {}, ColumnError,
         "target.*row 3 has 1 values but row 0 has 2"),
        (pl.concat_arr(pl.col("a").cast(pl.String), pl.col("a").cast(pl.String)), {}, ColumnError, "target.*numbers"),
        (pl.concat_arr("b", "b"), {"objective": "survival:cox"}, ParameterError, "several targets.*survival:cox"),
        (pl.concat_arr("b", "b"), {"objective": "reg:quantileerror", "quantile_alpha": [0.2, 0.8]}, ParameterError,
         "several quantiles"),
        (pl.concat_arr("b", "b"), {"base_margin": "b"}, ColumnError, "base_margin.*2 outputs"),
        ("b", {"num_target": 2}, ParameterError, "num_target.*1 target"),
        # Interval labels: numeric, no nulls, at least the lower bound, one target, AFT only.
        ("b", {"label_upper_bound": pl.when(pl.col("a") == 3).then(None).otherwise(pl.col("b")),
               "objective": "survival:aft"}, ColumnError, "label_upper_bound.*null"),
        ("b", {"label_upper_bound": pl.col("a").cast(pl.String), "objective": "survival:aft"}, ColumnError,
         "label_upper_bound.*String"),
        (pl.concat_arr("b", "b"), {"label_upper_bound": "b", "objective": "survival:aft"}, ColumnError,
         "label_upper_bound.*one target"),
        (pl.col("b") - 2, {"objective": "survival:aft"}, ColumnError, "times >= 0"),
        ("b", {"objective": "survival:aft", "eval_metric": "rmse"}, ParameterError, "rmse.*survival:aft"),
    ],
)
def test_bad_targets_and_interval_labels_name_their_column(target, kwargs, error, match):
    with pytest.raises(error, match=match):
        _fit(target, **kwargs)


def test_interval_labels_and_targets_work_from_any_numeric_dtype():
    # Int8 targets and a broadcast infinite upper bound (every row right-censored).
    assert _fit(pl.concat_arr(pl.col("a").cast(pl.Int8), pl.col("a").cast(pl.Int8)))
    assert _fit("b", label_upper_bound=float("inf"), objective="survival:aft")
