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
    with pytest.raises(pl.exceptions.ComputeError, match="column `y`"):
        df.select(bad_label)
    # ...or as our classes inside translate_errors(), the Polars error chained.
    with pytest.raises(ColumnError, match="column `y`") as info, polars_gbt.translate_errors():
        df.select(bad_label)
    assert isinstance(info.value.__cause__, pl.exceptions.ComputeError)
    with pytest.raises(ColumnError, match="column `s`: must be numeric"), polars_gbt.translate_errors():
        df.with_columns(s=pl.lit("x")).select(pl.col(FEATURES).gbt.fit("s"))
    with pytest.raises(ColumnError, match="column `q`"), polars_gbt.translate_errors():
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
         "column `target`: row 3 has 1 values but row 0 has 2"),
        (pl.concat_arr(pl.col("a").cast(pl.String), pl.col("a").cast(pl.String)), {}, ColumnError, "column `a`: must hold numbers"),
        (pl.concat_arr("b", "b"), {"objective": "survival:cox"}, ParameterError, "several targets.*survival:cox"),
        (pl.concat_arr("b", "b"), {"objective": "reg:quantileerror", "quantile_alpha": [0.2, 0.8]}, ParameterError,
         "several quantiles"),
        (pl.concat_arr("b", "b"), {"base_margin": "b"}, ColumnError, "column `b`.*2 outputs"),
        # Several columns as the targets: the parameter, with which target it is.
        (pl.concat_arr("b", pl.col("a").cast(pl.Float64) - 5), {"objective": "reg:gamma"}, ColumnError,
         r"column `target \(target 1\)`: value -5 at row 0 is invalid"),
        ("b", {"num_target": 2}, ParameterError, "num_target.*1 target"),
        # Interval labels: numeric, no nulls, at least the lower bound, one target, AFT only.
        ("b", {"label_upper_bound": pl.when(pl.col("a") == 3).then(None).otherwise(pl.col("b")),
               "objective": "survival:aft"}, ColumnError, "label_upper_bound.*null"),
        ("b", {"label_upper_bound": pl.col("a").cast(pl.String), "objective": "survival:aft"}, ColumnError,
         "column `a`: must be numeric or Boolean, not String"),
        (pl.concat_arr("b", "b"), {"label_upper_bound": "b", "objective": "survival:aft"}, ColumnError,
         "column `b`: interval labels have one target"),
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


# Issue 38 item 4: every error of a fit names what the user wrote: their label, weight, group,
# margin and upper-bound columns by their own names (not the roles "target" or "label"), the
# parameter where an input is a literal, and the evaluation rows as eval_set / eval_df.
def _credit(n: int = 120) -> pl.DataFrame:
    return pl.DataFrame({
        "income": [float(i % 17) for i in range(n)],
        "default": [float(i % 2) for i in range(n)],
        "w": [1.0 + i % 3 for i in range(n)],
        "qid": [i // 10 for i in range(n)],
        "m": [0.1] * n,
        "upper": [float(i % 2) + 1.0 for i in range(n)],
        "held": [i >= 100 for i in range(n)],
    })


def _with_null(df: pl.DataFrame, column: str, row: int = 7) -> pl.DataFrame:
    return df.with_columns(pl.when(pl.int_range(pl.len()) == row).then(None).otherwise(pl.col(column)).alias(column))


def _set(df: pl.DataFrame, column: str, row: int, value: float) -> pl.DataFrame:
    return df.with_columns(pl.when(pl.int_range(pl.len()) == row).then(value).otherwise(pl.col(column)).alias(column))


BINARY = {"objective": "binary:logistic"}
RANK = {"objective": "rank:ndcg"}
AFT = {"objective": "survival:aft"}

# (the frame, fit's keyword arguments, the error's class, its whole message).
NAMED_ERRORS = [
    pytest.param(_with_null(_credit(), "default"), {}, ColumnError, "column `default`: has 1 null values",
                 id="null label"),
    pytest.param(_set(_credit(), "default", 3, float("nan")), {}, ColumnError,
                 "column `default`: value at row 3 is NaN (labels must be finite)", id="NaN label"),
    pytest.param(_set(_credit(), "default", 5, 3.0), BINARY, ColumnError,
                 "column `default`: value 3 at row 5 is invalid", id="label out of range"),
    pytest.param(_credit().with_columns(pl.col("default").cast(pl.String)), {}, ColumnError,
                 "column `default`: must be numeric or Boolean, not String", id="label dtype"),
    pytest.param(_with_null(_credit(), "w"), {"weight": "w"}, ColumnError, "column `w`: has 1 null values",
                 id="null weight"),
    pytest.param(_set(_credit(), "w", 4, -1.0), {"weight": "w"}, ColumnError,
                 "column `w`: value at row 4 is -1 (weights must be finite and >= 0)", id="negative weight"),
    pytest.param(_credit().with_columns(w=pl.lit(0.0)), {"weight": "w"}, ColumnError,
                 "column `w`: all weights are zero", id="zero weights"),
    pytest.param(_credit(), {"weight": pl.lit(-1.0)}, ColumnError,
                 "column `weight`: value at row 0 is -1 (weights must be finite and >= 0)", id="literal weight"),
    pytest.param(_credit(), {"weight": "w", **RANK, "group": "qid"}, ColumnError,
                 "column `w`: differs within query group 0", id="ranking weight"),
    pytest.param(_with_null(_credit(), "qid"), {"group": "qid", **RANK}, ColumnError,
                 "column `qid`: has null values", id="null group"),
    pytest.param(_credit().with_columns(pl.col("qid").cast(pl.String)), {"group": "qid", **RANK}, ColumnError,
                 "column `qid`: must be integer query ids, not String", id="group dtype"),
    pytest.param(_credit().with_columns(qid=pl.int_range(pl.len()) % 3), {"group": "qid", **RANK}, ColumnError,
                 "column `qid`: rows of query group 0 are not contiguous", id="group order"),
    pytest.param(_credit(), {"group": "qid"}, ColumnError,
                 "column `qid`: query groups are only used by rank:* objectives", id="group without ranking"),
    pytest.param(_credit(), RANK, ColumnError, "column `group`: rank:ndcg needs query groups", id="no group"),
    pytest.param(_with_null(_credit(), "m"), {"base_margin": "m"}, ColumnError, "column `m`: has 1 null values",
                 id="null margin"),
    pytest.param(_credit(), {"base_margin": pl.concat_arr("m", "m")}, ColumnError,
                 "column `m`: has 240 values for 120 rows x 1 outputs", id="margin width"),
    pytest.param(_set(_credit(), "upper", 2, -5.0), {"label_upper_bound": "upper", **AFT}, ColumnError,
                 "column `upper`: value at row 2 is -5, below that row's label 0", id="upper below label"),
    pytest.param(_credit(), {"label_upper_bound": "upper"}, ColumnError,
                 "column `upper`: interval labels are only used by survival:aft", id="upper without aft"),
    pytest.param(_credit(), {"eval_set": pl.lit(True)}, ColumnError,
                 "column `eval_set`: every row is in the evaluation set: no rows left to train on", id="all held out"),
    pytest.param(_credit(), {"eval_set": {"a": pl.col("held"), "b": ~pl.col("held")}}, ColumnError,
                 "column `eval_set`: every row is in an evaluation set: no rows left to train on",
                 id="all held out by two sets"),
    pytest.param(_credit(), {"eval_set": pl.col("income") > 100}, ColumnError,
                 "column `eval_set`: marks no rows: an evaluation set needs some", id="empty eval set"),
    pytest.param(_set(_credit(), "default", 110, 3.0), {"eval_set": "held", **BINARY}, ColumnError,
                 "column `default` of eval set `valid`: value 3 at row 10 is invalid", id="eval set label"),
]


@pytest.mark.parametrize("df, kwargs, error, message", NAMED_ERRORS)
def test_fit_errors_name_the_users_columns(df, kwargs, error, message):
    kwargs = dict(kwargs, n_estimators=2)
    # A hand-written expression: Polars' ComputeError with the message...
    fit = pl.col("income").gbt.fit("default", **kwargs)
    with pytest.raises(pl.exceptions.ComputeError) as info:
        df.select(fit)
    assert message in str(info.value)
    # ...our class inside translate_errors(), and an expression as the target names its column.
    with pytest.raises(error) as info, polars_gbt.translate_errors():
        df.select(pl.col("income").gbt.fit(pl.col("default").shift(0), **kwargs))
    assert message in str(info.value)
    # polars_gbt.train says the same where it takes the same arguments.
    if "eval_set" not in kwargs:
        with pytest.raises(error) as info:
            polars_gbt.train(df, target="default", features=["income"], **kwargs)
        assert message in str(info.value)


def test_train_names_its_own_evaluation_frames_and_targets():
    df = _credit()
    with pytest.raises(DataError) as info:
        polars_gbt.train(df.head(0), target="default", features=["income"], eval_df=df, n_estimators=2)
    assert str(info.value) == "invalid data: `data` has no rows to train on (the rows of eval_df are only evaluated)"
    with pytest.raises(ColumnError) as info:
        polars_gbt.train(df, target="default", features=["income"], eval_sets={"late": df.head(0)}, n_estimators=2)
    assert str(info.value).startswith("column `eval_sets `late``: marks no rows")
    with pytest.raises(ColumnError) as info:
        polars_gbt.train(df, target="default", features=["income"], eval_df=_set(df, "default", 9, 7.0), **BINARY)
    assert str(info.value).startswith("column `default` of eval set `valid`: value 7 at row 9 is invalid")
    # One of several targets by its own column.
    with pytest.raises(ColumnError) as info:
        polars_gbt.train(_set(df, "w", 6, -2.0), target=["upper", "w"], features=["income"],
                         objective="reg:gamma", n_estimators=2)
    assert str(info.value).startswith("column `w`: value -2 at row 6 is invalid"), str(info.value)


def test_estimators_name_their_fit_arguments():
    from polars_gbt.sklearn import GBTRegressor

    df = _credit()
    with pytest.raises(ValueError) as info:
        GBTRegressor(n_estimators=2).fit(df.select("income"), df["default"], sample_weight=[-1.0] * df.height)
    assert "sample_weight" in str(info.value) and "__polars_gbt" not in str(info.value)
