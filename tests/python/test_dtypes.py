"""Every Polars dtype through the plugin (issue 15, point 1): features and targets of every
numeric width, Decimal, Boolean, temporal and String columns, Null columns, dtypes that
cannot be used, and literal arguments that broadcast. Real Polars Series, through the
`gbt` expressions, as users meet them: an Int8 column once panicked inside the plugin while
every Rust test (on arrow-rs arrays) passed.

The oracle for each dtype is its documented meaning (docs/user-guide.md, "Data types"): the
model fitted on a column must be the model fitted on the column as Float64 (numbers), as its
physical integers (temporal), or as a Categorical (strings)."""

from __future__ import annotations

import json
import re
from datetime import date, datetime, time, timedelta

import polars as pl
import pytest

import polars_gbt
from polars_gbt import ColumnError, GbtError, Model

gpu = pytest.mark.skipif(not polars_gbt.cuda_available(), reason="no usable GPU (the GPU machine runs it)")

N = 600
PARAMS = dict(n_estimators=8, max_depth=3, learning_rate=0.3, seed=0)


def base_frame() -> pl.DataFrame:
    """`k` (0..99, repeating), a second feature `z`, a regression target `y` that depends on
    both, and a binary target `c`."""
    i = pl.int_range(N, eager=True)
    k = i % 100
    z = ((i * 37) % 23).cast(pl.Float64)
    return pl.DataFrame({"k": k, "z": z}).with_columns(
        y=(pl.col("k") % 17).cast(pl.Float64) + pl.col("z") / 5,
        c=((pl.col("k") % 17) > 8).cast(pl.Int64),
    )


def fit(df: pl.DataFrame, features: list[str], target: str = "y", **params) -> Model:
    expr = pl.col(features).gbt.fit(target, **(PARAMS | params))
    with polars_gbt.translate_errors():
        return Model.from_bytes(df.select(expr).item())


def predict(model: Model, df: pl.DataFrame, features: list[str]) -> pl.Series:
    with polars_gbt.translate_errors():
        return df.select(pl.col(features).gbt.predict(model).alias("p"))["p"]


def feature_dtypes(model: Model) -> dict[str, str]:
    """The dtype each feature had in training, as the model stores it."""
    return {f["name"]: f["dtype"] for f in json.loads(model.to_json())["model"]["features"]}


def same_trees(a: Model, b: Model) -> bool:
    return a.trees_to_dataframe().equals(b.trees_to_dataframe())


# Numeric dtypes whose values are numbers: `k / 4` holds exactly in every one of them
# (as k for the integer types, which take k itself).
NUMERIC = [
    pl.Int8, pl.Int16, pl.Int32, pl.Int64, pl.Int128,
    pl.UInt8, pl.UInt16, pl.UInt32, pl.UInt64, pl.UInt128,
    pl.Float16, pl.Float32, pl.Float64, pl.Decimal(10, 2),
]


def numeric_column(dtype: pl.DataType) -> pl.Expr:
    k = pl.col("k")
    return (k if dtype.is_integer() else k / 4).cast(dtype)


@pytest.mark.parametrize("dtype", NUMERIC, ids=str)
def test_numeric_features_fit_and_score_as_their_float64_values(dtype):
    df = base_frame().with_columns(x=numeric_column(dtype))
    assert df["x"].dtype == dtype
    model = fit(df, ["x", "z"])
    oracle = fit(df.with_columns(pl.col("x").cast(pl.Float64)), ["x", "z"])
    assert same_trees(model, oracle)
    assert feature_dtypes(model)["x"] == str(dtype).replace("(precision=", "(").replace(" scale=", " ")
    p = predict(model, df, ["x", "z"])
    assert p.equals(predict(oracle, df.with_columns(pl.col("x").cast(pl.Float64)), ["x", "z"]))
    # A model trained on the Float64 values scores the dtype's column (and back) alike.
    assert p.equals(predict(oracle, df, ["x", "z"]))


def test_boolean_features():
    df = base_frame().with_columns(x=pl.col("k") % 17 > 8)
    model = fit(df, ["x", "z"])
    oracle = fit(df.with_columns(pl.col("x").cast(pl.Float64)), ["x", "z"])
    assert same_trees(model, oracle)
    assert feature_dtypes(model)["x"] == "Boolean"
    assert predict(model, df, ["x", "z"]).equals(predict(oracle, df, ["x", "z"]))


@pytest.mark.parametrize("dtype", [*NUMERIC, pl.Boolean], ids=str)
def test_classifier_targets_of_every_numeric_dtype(dtype):
    df = base_frame().with_columns(t=pl.col("c").cast(dtype))
    assert df["t"].dtype == dtype
    params = dict(objective="binary:logistic")
    model = fit(df, ["k", "z"], "t", **params)
    assert model.to_bytes() == fit(df.with_columns(pl.col("t").cast(pl.Float64)), ["k", "z"], "t", **params).to_bytes()


@pytest.mark.parametrize("dtype", [pl.Int8, pl.UInt8, pl.Int16, pl.Int128, pl.UInt128, pl.Decimal(12, 3), pl.Float16],
                         ids=str)
def test_regression_and_multiclass_targets_of_narrow_dtypes(dtype):
    df = base_frame().with_columns(t=(pl.col("k") % 5).cast(dtype))
    for params in (dict(), dict(objective="multi:softprob", num_class=5)):
        model = fit(df, ["k", "z"], "t", **params)
        oracle = fit(df.with_columns(pl.col("t").cast(pl.Float64)), ["k", "z"], "t", **params)
        assert model.to_bytes() == oracle.to_bytes()


@pytest.mark.parametrize("dtype", [pl.Int8, pl.UInt16, pl.Decimal(8, 2), pl.Float16, pl.Boolean], ids=str)
def test_weights_and_margins_of_narrow_dtypes(dtype):
    df = base_frame().with_columns(w=(pl.col("k") % 3 + 1).cast(dtype), m=(pl.col("k") % 2).cast(dtype))
    got = fit(df, ["k", "z"], weight="w", base_margin="m")
    want = fit(df.with_columns(pl.col("w", "m").cast(pl.Float64)), ["k", "z"], weight="w", base_margin="m")
    assert got.to_bytes() == want.to_bytes()


# Temporal dtypes: the feature is the physical value (days, or the time unit's count).
def temporal_frame() -> pl.DataFrame:
    df = base_frame()
    start = datetime(2024, 3, 1, 12, 0, 0)
    return df.with_columns(
        date=pl.lit(date(2024, 3, 1)) + pl.duration(days=pl.col("k") * 3),
        dt=pl.lit(start) + pl.duration(minutes=pl.col("k") * 97, milliseconds=pl.col("k")),
        dur=pl.duration(seconds=pl.col("k") * 61, microseconds=pl.col("k")),
        tod=(pl.lit(datetime(2024, 1, 1)) + pl.duration(seconds=pl.col("k") * 800)).dt.time(),
    )


TEMPORAL = [
    ("date", pl.Date, "Date"),
    ("tod", pl.Time, "Time"),
    ("dt", pl.Datetime("ms"), "Datetime(ms)"),
    ("dt", pl.Datetime("us"), "Datetime(us)"),
    ("dt", pl.Datetime("ns"), "Datetime(ns)"),
    ("dt", pl.Datetime("us", "UTC"), "Datetime(us, UTC)"),
    ("dt", pl.Datetime("ns", "Asia/Kolkata"), "Datetime(ns, Asia/Kolkata)"),
    ("dur", pl.Duration("ms"), "Duration(ms)"),
    ("dur", pl.Duration("us"), "Duration(us)"),
    ("dur", pl.Duration("ns"), "Duration(ns)"),
]


def as_dtype(df: pl.DataFrame, column: str, dtype: pl.DataType) -> pl.DataFrame:
    if isinstance(dtype, pl.Datetime) and dtype.time_zone is not None:
        return df.with_columns(pl.col(column).cast(pl.Datetime(dtype.time_unit)).dt.replace_time_zone(dtype.time_zone))
    return df.with_columns(pl.col(column).cast(dtype))


@pytest.mark.parametrize("column, dtype, name", TEMPORAL, ids=[t[2] for t in TEMPORAL])
def test_temporal_features_are_their_physical_values(column, dtype, name):
    df = as_dtype(temporal_frame(), column, dtype)
    assert df[column].dtype == dtype
    model = fit(df, [column, "z"])
    physical = df.with_columns(pl.col(column).to_physical())
    oracle = fit(physical, [column, "z"])
    assert same_trees(model, oracle)
    assert feature_dtypes(model)[column] == name
    assert predict(model, df, [column, "z"]).equals(predict(oracle, physical, [column, "z"]))


@pytest.mark.parametrize("column, trained, given", [
    ("dt", pl.Datetime("us"), pl.Datetime("ns")),
    ("dt", pl.Datetime("ns"), pl.Datetime("ms")),
    ("dt", pl.Datetime("us", "UTC"), pl.Datetime("ms", "UTC")),
    ("dur", pl.Duration("ms"), pl.Duration("ns")),
    ("dur", pl.Duration("ns"), pl.Duration("us")),
], ids=str)
def test_scoring_in_another_time_unit_converts_to_the_training_unit(column, trained, given):
    # The values are whole milliseconds, so every unit holds the same instants exactly.
    df = temporal_frame().with_columns(
        dt=pl.col("dt").cast(pl.Datetime("ms")).cast(pl.Datetime("ns")),
        dur=pl.col("dur").cast(pl.Duration("ms")).cast(pl.Duration("ns")),
    )
    model = fit(as_dtype(df, column, trained), [column, "z"])
    want = predict(model, as_dtype(df, column, trained), [column, "z"])
    assert predict(model, as_dtype(df, column, given), [column, "z"]).equals(want)


def test_scoring_in_another_time_zone_scores_the_same_instants():
    df = as_dtype(temporal_frame(), "dt", pl.Datetime("us", "UTC"))
    model = fit(df, ["dt", "z"])
    elsewhere = df.with_columns(pl.col("dt").dt.convert_time_zone("America/New_York"))
    assert predict(model, elsewhere, ["dt", "z"]).equals(predict(model, df, ["dt", "z"]))


@pytest.mark.parametrize("trained, given, message", [
    (pl.Datetime("us"), pl.Datetime("us", "UTC"), r"was Datetime\(us\) in training but is Datetime\(us, UTC\) here; a naive"),
    (pl.Datetime("us", "UTC"), pl.Datetime("ns"), r"was Datetime\(us, UTC\) in training but is Datetime\(ns\) here"),
    (pl.Datetime("ms"), pl.Date, r"was Datetime\(ms\) in training but is Date here"),
    (pl.Datetime("ms"), pl.Int64, r"was Datetime\(ms\) in training but is Int64 here"),
    (pl.Int64, pl.Datetime("ms"), r"was Int64 in training but is Datetime\(ms\) here"),
    (pl.Duration("ms"), pl.Datetime("ms"), r"was Duration\(ms\) in training but is Datetime\(ms\) here"),
], ids=str)
def test_scoring_a_different_temporal_kind_is_an_error_naming_both(trained, given, message):
    df = temporal_frame().with_columns(pl.col("dt").cast(pl.Datetime("ms")))

    def column(dtype):
        if dtype == pl.Int64:
            return df.with_columns(pl.col("dt").to_physical())
        if dtype == pl.Date:
            return df.with_columns(pl.col("dt").dt.date())
        if isinstance(dtype, pl.Duration):
            return df.with_columns(pl.col("dt").to_physical().cast(dtype))
        return as_dtype(df, "dt", dtype)

    model = fit(column(trained), ["dt", "z"])
    with pytest.raises(ColumnError, match="column `dt`: " + message):
        predict(model, column(given), ["dt", "z"])


def test_string_features_are_categorical():
    colors = ["red", "green", "blue", "amber", None]
    df = base_frame().with_columns(s=pl.Series([colors[i % 5] for i in range(N)]))
    df = df.with_columns(y=pl.col("y") + pl.col("s").replace_strict({"red": 5.0, "green": -3.0}, default=0.0).fill_null(0.0))
    model = fit(df, ["s", "z"])
    cat = df.with_columns(pl.col("s").cast(pl.Categorical))
    oracle = fit(cat, ["s", "z"])
    assert same_trees(model, oracle)
    assert feature_dtypes(model)["s"] == "String"
    p = predict(model, df, ["s", "z"])
    # Categories are matched by name whichever of String or Categorical scores.
    assert p.equals(predict(model, cat, ["s", "z"]))
    assert p.equals(predict(oracle, df, ["s", "z"]))
    assert p.equals(predict(oracle, cat, ["s", "z"]))
    # The strings matter: red rows score apart from green ones.
    by_color = df.with_columns(p=p).group_by("s").agg(pl.col("p").mean())
    means = dict(by_color.iter_rows())
    assert means["red"] - means["green"] > 4
    # An unseen string follows no category set, as an unseen Categorical value does.
    new = pl.DataFrame({"s": ["violet", "red"], "z": [1.0, 1.0]})
    assert predict(model, new, ["s", "z"]).equals(predict(oracle, new.with_columns(pl.col("s").cast(pl.Categorical)), ["s", "z"]))


@pytest.mark.parametrize("n_categories", [5, 300, 70_000])
def test_enum_features_of_every_width_fit_and_score_as_their_categorical_twins(n_categories):
    # Enum columns cross into the plugin as their codes (src/python/abi.rs), Categorical ones
    # by name: every width of code (8, 16 and 32 bits), with nulls, unused categories declared
    # out of the order of appearance, several chunks and a sliced one, must give the same.
    names = [f"k{(11 * i) % n_categories}" for i in range(n_categories)]
    used = names[:5]
    values = [None if i % 7 == 3 else used[(i * i) % 5] for i in range(N)]
    df = base_frame().with_columns(e=pl.Series(values, dtype=pl.Enum(names)))
    df = df.with_columns(y=pl.col("y") + pl.col("e").cast(pl.String).replace_strict({used[0]: 4.0, used[1]: -3.0}, default=0.0).fill_null(1.0))
    chunked = pl.concat([df.slice(0, 200), df.slice(200, 150), df.slice(350)], rechunk=False)
    cat = df.with_columns(pl.col("e").cast(pl.String).cast(pl.Categorical))
    model = fit(chunked, ["e", "z"])
    oracle = fit(cat, ["e", "z"])
    assert same_trees(model, oracle)
    assert feature_dtypes(model)["e"] == "Enum"
    p = predict(model, chunked, ["e", "z"])
    assert p.equals(predict(model, cat, ["e", "z"]))
    assert p.equals(predict(oracle, df, ["e", "z"]))
    tail = df.slice(17)
    assert predict(model, tail, ["e", "z"]).equals(p.slice(17))
    # The categories matter: rows of the first category score apart from the second's.
    means = dict(df.with_columns(p=p).group_by("e").agg(pl.col("p").mean()).iter_rows())
    assert means[used[0]] - means[used[1]] > 4


def test_categorical_features_in_chunks_fit_and_score_as_their_string_twins():
    # Categorical columns cross into the plugin as codes of this process's registry, which
    # the plugin translates through its own (src/python/abi.rs): with nulls, several chunks
    # and a slice, the models and predictions must be those of the same strings as String.
    n = 20_000
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]
    strings = pl.Series("c", [None if i % 11 == 5 else words[(7 * i + i // 3) % 6] for i in range(n)])
    z = pl.Series("z", [((i * 37) % 101) / 10.0 for i in range(n)])
    y = pl.Series("y", [(3.0 if s == "beta" else -2.0 if s == "delta" else 0.5) + 0.1 * v for s, v in zip(strings, z)])
    text = pl.DataFrame([strings, z, y])
    cat = text.with_columns(pl.col("c").cast(pl.Categorical))
    chunked = pl.concat([cat.slice(0, 7_000), cat.slice(7_000, 5_000), cat.slice(12_000)], rechunk=False)
    model = fit(chunked, ["c", "z"])
    oracle = fit(text, ["c", "z"])
    assert same_trees(model, oracle)
    p = predict(model, chunked, ["c", "z"])
    assert p.equals(predict(oracle, text, ["c", "z"]))
    assert predict(model, cat.slice(123), ["c", "z"]).equals(p.slice(123))
    means = dict(text.with_columns(p=p).group_by("c").agg(pl.col("p").mean()).iter_rows())
    assert means["beta"] - means["delta"] > 4


def with_dtype_name(model: Model, feature: str, dtype: str) -> Model:
    """`model` with `feature`'s training dtype renamed: the one thing a model of a String column
    keeps that the same column's Categorical model does not."""
    doc = json.loads(model.to_json())
    for f in doc["model"]["features"]:
        if f["name"] == feature:
            f["dtype"] = dtype
    return Model.from_json(json.dumps(doc))


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=gpu)])
def test_categorical_enum_string_and_arrow_dictionary_columns_give_one_model(device):
    # Issue 61: a Categorical column is read from its physical ids through one table built
    # from the ids present, not exported row by row; the model must be the String column's,
    # byte for byte but for the dtype's name: with nulls, chunks, and global categories that
    # hold values the frame does not (Polars 2's categories are the process's).
    pl.Series(["never-in-the-frame-1", "never-in-the-frame-2"], dtype=pl.Categorical)
    n = 30_000
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta"]
    strings = pl.Series("c", [None if i % 13 == 5 else words[(7 * i + i // 3) % 7] for i in range(n)])
    z = pl.Series("z", [((i * 37) % 101) / 10.0 for i in range(n)])
    y = pl.Series("y", [(3.0 if s == "beta" else -2.0 if s == "delta" else 0.5) + 0.1 * v for s, v in zip(strings, z)])
    text = pl.DataFrame([strings, z, y])
    cat = pl.concat(
        [text.slice(0, 9_000), text.slice(9_000, 1), text.slice(9_001)], rechunk=False
    ).with_columns(pl.col("c").cast(pl.Categorical))
    assert cat["c"].n_chunks() == 3
    enum = text.with_columns(pl.col("c").cast(pl.Enum(sorted(words))))
    params = dict(device=device, max_cat_to_onehot=1)
    want = fit(text, ["c", "z"], **params)
    assert feature_dtypes(want)["c"] == "String"
    models = {"Categorical": fit(cat, ["c", "z"], **params), "Enum": fit(enum, ["c", "z"], **params)}
    # polars_gbt.train hands a frame's Categorical over as its ids and its categories' names.
    models["Categorical, train"] = polars_gbt.train(cat, target="y", features=["c", "z"], **PARAMS, **params)
    assert feature_dtypes(models["Categorical, train"])["c"] == "Categorical"
    # A pyarrow dictionary column, through polars_gbt.train (Polars reads it as a Categorical).
    table = text.to_arrow().set_column(0, "c", text["c"].to_arrow().dictionary_encode())
    models["dictionary"] = polars_gbt.train(table, target="y", features=["c", "z"], **PARAMS, **params)
    for name, model in models.items():
        assert model.categories["c"] == sorted(words), name
        assert with_dtype_name(model, "c", "String").to_bytes() == want.to_bytes(), name
    # Scoring, on frames holding a category unseen in training: as the String model scores.
    new = pl.DataFrame({"c": ["beta", None, "theta", "delta", "alpha"], "z": [1.0, 2.0, 3.0, 4.0, 5.0]})
    expected = predict(want, new, ["c", "z"])
    cat_new = new.with_columns(pl.col("c").cast(pl.Categorical))
    assert predict(models["Categorical"], cat_new, ["c", "z"]).equals(expected)
    assert predict(models["Categorical"], cat, ["c", "z"]).equals(predict(want, text, ["c", "z"]))
    streamed = cat.lazy().select(pl.col("c", "z").gbt.predict(models["Categorical"]).alias("p"))
    assert streamed.collect(engine="streaming")["p"].equals(predict(want, text, ["c", "z"]))
    assert models["Categorical"].predict(cat_new).equals(expected, check_names=False)


def test_a_categorical_column_of_millions_of_rows_is_read_in_pieces_and_merged():
    # Over a million rows the ids are read in pieces on the pool and the pieces' categories
    # merged: a category only in the first piece, one only in the last, and nulls in between
    # all keep their names (the model is the String column's).
    n = (1 << 21) + 7
    i = pl.int_range(n)
    text = pl.select(
        c=pl.when(i < 5).then(pl.lit("first")).when(i >= n - 5).then(pl.lit("last"))
        .when(i % 11 == 3).then(pl.lit(None, pl.String))
        .when(i % 2 == 0).then(pl.lit("even")).otherwise(pl.lit("odd")),
        z=(i % 97).cast(pl.Float64),
    ).with_columns(y=pl.col("c").is_in(["first", "last"]).fill_null(False).cast(pl.Float64) * 4 + pl.col("z") / 97)
    cat = text.with_columns(pl.col("c").cast(pl.Categorical))
    assert cat["c"].n_chunks() == 1
    params = dict(target="y", features=["c", "z"], n_estimators=2, max_depth=3, max_cat_to_onehot=1, device="cpu")
    want = polars_gbt.train(text, **params)
    got = polars_gbt.train(cat, **params)
    assert got.categories["c"] == ["even", "first", "last", "odd"]
    assert with_dtype_name(got, "c", "String").to_bytes() == want.to_bytes()


def test_the_estimators_read_categorical_columns_as_their_string_twins():
    # Issue 61: the scikit-learn estimators hand a frame's Categorical over as its ids too.
    from polars_gbt.sklearn import GBTRegressor

    words = ["north", "south", "east", "west", "up"]
    text = pl.DataFrame(
        {
            "c": [None if i % 9 == 4 else words[(i * 7 + i // 5) % 5] for i in range(N)],
            "z": [((i * 37) % 23) / 5.0 for i in range(N)],
        }
    )
    y = [(2.0 if c == "south" else -1.0 if c == "west" else 0.0) + z for c, z in zip(text["c"], text["z"])]
    cat = pl.concat([text.slice(0, 250), text.slice(250)], rechunk=False).with_columns(pl.col("c").cast(pl.Categorical))
    want = GBTRegressor(n_estimators=8, max_depth=3, max_cat_to_onehot=1).fit(text, y)
    got = GBTRegressor(n_estimators=8, max_depth=3, max_cat_to_onehot=1).fit(cat, y)
    assert feature_dtypes(got.get_booster())["c"] == "Categorical"
    assert with_dtype_name(got.get_booster(), "c", "String").to_bytes() == want.get_booster().to_bytes()
    new = pl.DataFrame({"c": ["south", None, "nowhere", "west"], "z": [1.0, 2.0, 3.0, 4.0]})
    expected = want.predict(new)
    assert (got.predict(new.with_columns(pl.col("c").cast(pl.Categorical))) == expected).all()
    assert (got.predict(cat) == want.predict(text)).all()


def test_a_null_column_is_an_all_missing_feature():
    df = base_frame().with_columns(n=pl.lit(None))
    assert df["n"].dtype == pl.Null
    model = fit(df, ["k", "n"])
    oracle = fit(df.with_columns(pl.col("n").cast(pl.Float64)), ["k", "n"])
    assert same_trees(model, oracle)
    assert feature_dtypes(model)["n"] == "Null"
    assert predict(model, df, ["k", "n"]).equals(predict(oracle, df, ["k", "n"]))
    # Scoring with the column now holding numbers is scoring those numbers (never split on).
    assert predict(model, df.with_columns(n=pl.col("z")), ["k", "n"]).equals(predict(model, df, ["k", "n"]))


@pytest.mark.parametrize("value, dtype", [
    (pl.lit([1, 2]), "List(Int64)"),
    (pl.lit(b"\x00\x01"), "Binary"),
    (pl.struct(a=pl.col("k"), b=pl.col("z")), "Struct"),
    (pl.concat_arr(pl.col("k"), pl.col("k")), "Array(Int64, 2)"),
], ids=str)
def test_features_of_unusable_dtypes_are_errors_naming_column_and_dtype(value, dtype):
    df = base_frame().with_columns(bad=value)
    message = "column `bad`: has dtype " + re.escape(dtype) + ", which cannot be a feature"
    with pytest.raises(ColumnError, match=message) as info:
        fit(df, ["bad", "z"])
    assert "panicked" not in str(info.value)
    # Scoring such a column with a model that had numbers there.
    model = fit(df.with_columns(bad=pl.col("k")), ["bad", "z"])
    with pytest.raises(ColumnError, match=message):
        predict(model, df, ["bad", "z"])
    # Without translate_errors it is Polars' ComputeError, with the same words.
    with pytest.raises(pl.exceptions.ComputeError, match=message):
        df.select(pl.col("bad", "z").gbt.fit("y"))


@pytest.mark.parametrize("role, value, message", [
    ("target", pl.col("dt"), r"column `dt`: must be numeric or Boolean, not Datetime\(us\)"),
    ("target", pl.lit(None), "column `target`: must be numeric or Boolean, not Null"),
    ("target", pl.col("s"), "column `s`: must be numeric or Boolean, not String"),
    ("weight", pl.col("dur"), r"column `dur`: must be numeric or Boolean, not Duration\(us\)"),
    ("base_margin", pl.col("s"), "column `s`: must be numeric or Boolean, not String"),
    ("group", pl.col("s"), "column `s`: must be integer query ids, not String"),
    ("group", pl.col("z"), "column `z`: must be integer query ids, not Float64"),
    ("eval_set", pl.col("k"), "column `eval_set`: must be a Boolean expression marking validation rows, not Int64"),
], ids=str)
def test_other_columns_of_unusable_dtypes_are_errors_in_polars_names(role, value, message):
    # Each named by the user's column (the parameter for a literal: `target` for pl.lit(None)).
    df = temporal_frame().with_columns(s=pl.lit("a"))
    args = {"target": "y"} | ({role: value} if role != "target" else {"target": value})
    target = args.pop("target")
    objective = {"objective": "rank:pairwise"} if role == "group" else {}
    with pytest.raises(GbtError, match=message) as info, polars_gbt.translate_errors():
        df.select(pl.col("k", "z").gbt.fit(target, **args, **objective, n_estimators=2))
    assert "panicked" not in str(info.value)


# Literal arguments broadcast, as Polars literals do elsewhere.
@pytest.mark.parametrize("argument, literal, column", [
    ("weight", pl.lit(2.0), "two"),
    ("weight", 2.0, "two"),
    ("base_margin", pl.lit(0.5), "half"),
], ids=["weight=pl.lit(2.0)", "weight=2.0", "base_margin=pl.lit(0.5)"])
def test_literal_arguments_broadcast(argument, literal, column):
    df = base_frame().with_columns(two=pl.lit(2.0), half=pl.lit(0.5))
    want = fit(df, ["k", "z"], **{argument: column})
    assert fit(df, ["k", "z"], **{argument: literal}).to_bytes() == want.to_bytes()
    # Per group too: each group's literal is repeated to the group's rows.
    per_group = (
        df.with_columns(g=pl.col("k") % 2)
        .group_by("g")
        .agg(pl.col("k", "z").gbt.fit("y", **{argument: literal}, **PARAMS).alias("m"))
        .sort("g")
    )
    for g, m in per_group.iter_rows():
        alone = df.filter(pl.col("k") % 2 == g).select(pl.col("k", "z").gbt.fit("y", **{argument: column}, **PARAMS))
        assert m == alone.item()


def test_a_literal_group_is_one_query():
    df = base_frame().with_columns(one=pl.lit(7))
    params = dict(objective="rank:pairwise")
    want = fit(df, ["k", "z"], "c", group="one", **params)
    assert fit(df, ["k", "z"], "c", group=pl.lit(7), **params).to_bytes() == want.to_bytes()
    assert fit(df, ["k", "z"], "c", group=7, **params).to_bytes() == want.to_bytes()
