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
