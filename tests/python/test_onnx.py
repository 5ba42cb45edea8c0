"""ONNX export (issue 38 item 1): Model.to_onnx's graph, run by onnxruntime, predicts what
the model predicts, for every kind of objective, categorical splits (a column of 5,000
categories too, and categories unseen in training), nulls and the missing= sentinel."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from conftest import FEATURES

import polars_gbt

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")


def session(model: polars_gbt.Model):
    data = model.to_onnx()
    onnx.checker.check_model(onnx.load_from_string(data), full_check=True)
    return ort.InferenceSession(data, providers=["CPUExecutionProvider"])


def feeds(model: polars_gbt.Model, df: pl.DataFrame) -> dict[str, np.ndarray]:
    """The frame's columns as the graph's inputs: strings for categorical features, float32
    (nulls as NaN) for the others."""
    out = {}
    for name in model.feature_names:
        s = df[name]
        if s.dtype in (pl.String, pl.Categorical) or isinstance(s.dtype, pl.Enum):
            out[name] = np.array(s.cast(pl.String).to_list(), dtype=object)
        else:
            out[name] = s.cast(pl.Float32).fill_null(float("nan")).to_numpy()
    return out


def ours(model: polars_gbt.Model, df: pl.DataFrame, output: str) -> np.ndarray:
    p = df.select(pl.col(model.feature_names).gbt.predict(model, output=output)).to_series()
    return np.asarray(p.to_list(), dtype=np.float64)


def check(model: polars_gbt.Model, df: pl.DataFrame, classes: bool = False) -> None:
    value, margin = session(model).run(["value", "margin"], feeds(model, df))
    want_margin = ours(model, df, "margin")
    assert margin.shape == want_margin.shape
    # Sums of many float32 leaves: relative to the margins' size.
    scale = max(1.0, float(np.abs(want_margin).max()))
    np.testing.assert_allclose(margin, want_margin, rtol=1e-5, atol=1e-5 * scale)
    want_value = ours(model, df, "value")
    if classes:
        np.testing.assert_array_equal(value, want_value)
    else:
        np.testing.assert_allclose(value, want_value, rtol=1e-5, atol=1e-5 * scale)


def with_nulls(df: pl.DataFrame, columns: list[str], every: int = 7) -> pl.DataFrame:
    row = pl.int_range(pl.len())
    return df.with_columns(
        pl.when((row + i) % every == 0).then(None).otherwise(pl.col(c)).alias(c) for i, c in enumerate(columns)
    )


@pytest.fixture(scope="module")
def higgs(train_df, test_df):
    return with_nulls(train_df, FEATURES[:6]), with_nulls(test_df, FEATURES[:6], every=5)


def test_binary_with_nulls(higgs):
    train, test = higgs
    model = polars_gbt.train(train, target="y", objective="binary:logistic", n_estimators=200, max_depth=6)
    check(model, test)


def test_regression_losses_and_their_links(higgs):
    train, test = higgs
    for objective in ("reg:squarederror", "count:poisson", "reg:gamma", "binary:hinge", "reg:absoluteerror"):
        y = pl.col("f0").fill_null(1.0).abs() + 0.1 if objective in ("count:poisson", "reg:gamma") else pl.col("y")
        model = polars_gbt.train(train.with_columns(y=y), target="y", objective=objective, n_estimators=40)
        check(model, test)


def test_missing_sentinel():
    rng = np.random.default_rng(3)
    x = rng.normal(size=2000).astype(np.float32)
    x[::9] = -999.0
    df = pl.DataFrame({"x": x, "z": rng.normal(size=2000)}).with_columns(y=(pl.col("x") > 0) | (pl.col("x") == -999))
    model = polars_gbt.train(df, target="y", objective="binary:logistic", missing=-999.0, n_estimators=20)
    check(model, df)


def _categorical_frame(n: int, n_cats: int, seed: int) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    city = rng.integers(0, n_cats, n)
    colour = rng.integers(0, 4, n)
    x = rng.normal(size=n)
    effect = np.sin(city * 1.7) + (colour == 2) * 1.5
    return pl.DataFrame({
        "city": [f"city{c}" for c in city],
        "colour": pl.Series([["red", "green", "blue", "grey"][c] for c in colour], dtype=pl.Categorical),
        "x": x,
        "label": effect + x + rng.normal(scale=0.3, size=n),
        "cls": (effect + x > 0.5).astype(int) + (effect + x > 1.5).astype(int),
    })


def test_categorical_splits_with_5000_categories_and_unseen_ones():
    train = _categorical_frame(40_000, 5000, 0)
    test = _categorical_frame(5000, 6000, 1)  # cities 5000..5999 were never seen in training
    test = with_nulls(test, ["x"])
    model = polars_gbt.train(train.drop("cls"), target="label", n_estimators=60, max_depth=6, max_cat_to_onehot=8)
    # Set-membership splits on the city, not one-vs-rest.
    assert model.trees_to_dataframe().filter(pl.col("Feature") == "city").height > 0
    check(model, test)


def test_multiclass_probabilities_and_classes():
    train = _categorical_frame(6000, 40, 2)
    test = with_nulls(_categorical_frame(1000, 45, 3), ["x"])
    for objective in ("multi:softprob", "multi:softmax"):
        model = polars_gbt.train(train.drop("label"), target="cls", objective=objective, num_class=3,
                                 n_estimators=30)
        check(model, test, classes=objective == "multi:softmax")


def test_ranking_scores():
    rng = np.random.default_rng(5)
    n = 3000
    df = pl.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n), "q": np.arange(n) // 30})
    df = df.with_columns(rel=((pl.col("a") + pl.col("b")) > 0).cast(pl.Int32) + (pl.col("a") > 1).cast(pl.Int32))
    model = polars_gbt.train(df, target="rel", features=["a", "b"], group="q", objective="rank:ndcg",
                             n_estimators=30)
    check(model, with_nulls(df, ["a"]))


def test_several_targets_and_quantiles(higgs):
    train, test = higgs
    two = train.with_columns(y2=pl.col("f1").fill_null(0.0) * 2)
    model = polars_gbt.train(two, target=["y", "y2"], features=FEATURES, n_estimators=30)
    check(model, test)
    model = polars_gbt.train(train, target="y", objective="reg:quantileerror", quantile_alpha=[0.1, 0.5, 0.9],
                             n_estimators=30)
    check(model, test)


def test_a_long_forest_in_margins(higgs):
    train, test = higgs
    model = polars_gbt.train(train, target="y", objective="binary:logistic", n_estimators=1000, max_depth=4,
                             learning_rate=0.3)
    check(model, test)


def test_the_graph_names_its_inputs_by_feature(tmp_path):
    df = _categorical_frame(500, 10, 4)
    model = polars_gbt.train(df, target="label", features=["x", "city", "colour"], n_estimators=3)
    s = session(model)
    assert [(i.name, i.type) for i in s.get_inputs()] == [
        ("x", "tensor(float)"), ("city", "tensor(string)"), ("colour", "tensor(string)")]
    assert [o.name for o in s.get_outputs()] == ["value", "margin"]
    model.save_onnx(tmp_path / "m.onnx")
    assert (tmp_path / "m.onnx").read_bytes() == model.to_onnx()


def test_a_feature_named_as_an_output_is_an_error():
    df = pl.DataFrame({"value": [0.0, 1.0] * 20, "y": [0.0, 1.0] * 20})
    model = polars_gbt.train(df, target="y", n_estimators=2)
    with pytest.raises(polars_gbt.ColumnError, match="column `value`: a feature of this name cannot be an input"):
        model.to_onnx()


def test_vector_leaf_models():
    """multi_strategy="multi_output_tree": a round's trees (one per output, the same splits)
    export as any model of several outputs."""
    train = _categorical_frame(6000, 40, 4)
    test = with_nulls(_categorical_frame(1000, 45, 5), ["x"])
    model = polars_gbt.train(train.drop("label"), target="cls", objective="multi:softprob", num_class=3,
                             n_estimators=20, multi_strategy="multi_output_tree")
    assert model.params["multi_strategy"] == "multi_output_tree"
    check(model, test)
    two = train.with_columns(label2=pl.col("x") * 2)
    model = polars_gbt.train(two.drop("cls"), target=["label", "label2"], n_estimators=20,
                             multi_strategy="multi_output_tree")
    check(model, test.with_columns(label2=pl.col("x") * 2))
