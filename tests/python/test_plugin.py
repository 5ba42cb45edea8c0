"""The Polars plugin: fit/predict expressions, group-wise training, lazy and streaming
scoring, the Model class, and errors as Python exceptions."""

from __future__ import annotations

import threading

import numpy as np
import polars as pl
import pytest
from conftest import FEATURES
from sklearn.metrics import roc_auc_score

import polars_gbt
from polars_gbt import Model


PARAMS = dict(objective="binary:logistic", n_estimators=100, max_depth=6, learning_rate=0.1, seed=0)


def test_fit_predict_matches_the_reference_accuracy(train_df, test_df):
    model = train_df.select(pl.col(FEATURES).gbt.fit(pl.col("y"), **PARAMS)).item()
    p = test_df.select(pl.col(FEATURES).gbt.predict(model))["f0"].to_numpy()
    # docs/reference-accuracy.md (unweighted here): xgboost-cpu 3.2.0 and lightgbm 4.7.0
    # reach about 0.83 on this split; a broken plugin lands near 0.5.
    assert roc_auc_score(test_df["y"].to_numpy(), p) > 0.81


def test_same_model_as_the_crate_through_train(train_df):
    a = train_df.select(pl.col(FEATURES).gbt.fit("y", **PARAMS)).item()
    b = polars_gbt.train(train_df, target="y", **PARAMS).to_bytes()
    assert a == b


def test_group_by_fits_one_model_per_group_equal_to_separate_fits(train_df):
    df = train_df.head(3000).with_columns(g=(pl.int_range(pl.len()) % 3))
    params = dict(objective="binary:logistic", n_estimators=5, max_depth=3)
    per_group = df.group_by("g").agg(pl.col(FEATURES).gbt.fit("y", **params).alias("model")).sort("g")
    for g, model in per_group.iter_rows():
        alone = df.filter(pl.col("g") == g).select(pl.col(FEATURES).gbt.fit("y", **params)).item()
        assert model == alone


def test_lazy_and_streaming_predictions_equal_eager(train_df):
    model = polars_gbt.train(train_df, target="y", objective="binary:logistic", n_estimators=10)
    big = pl.concat([train_df] * 300)  # 2.1M rows, many batches when streaming
    expr = pl.col(FEATURES).gbt.predict(model).alias("p")
    eager = big.select(expr)["p"]
    lazy = big.lazy().select(expr).collect()["p"]
    streaming = big.lazy().select(expr).collect(engine="streaming")["p"]
    assert eager.equals(lazy) and eager.equals(streaming)
    assert eager.dtype == pl.Float32


def test_each_predict_expression_of_a_streaming_query_scores_with_its_own_arguments(train_df):
    # The plugin parses a gbt.predict's arguments once and finds the model's bytes in place on
    # later batches: expressions that differ only in their model, their rounds or their output,
    # and a model given as JSON bytes (parsed in full each time), must each keep their own.
    # Full trees of depth 3: two models of the same length, told apart only by their digests.
    params = dict(objective="binary:logistic", n_estimators=8, max_depth=3, colsample_bytree=0.5)
    a = polars_gbt.train(train_df, target="y", seed=1, **params)
    b = polars_gbt.train(train_df, target="y", seed=2, **params)
    assert len(a.to_bytes()) == len(b.to_bytes()) and a.to_bytes() != b.to_bytes()
    exprs = {
        "a": pl.col(FEATURES).gbt.predict(a),
        "b": pl.col(FEATURES).gbt.predict(b),
        "a_margin": pl.col(FEATURES).gbt.predict(a, output="margin"),
        "a_first_3": pl.col(FEATURES).gbt.predict(a, iteration_range=(0, 3)),
        "b_json": pl.col(FEATURES).gbt.predict(b.to_json().encode()),
    }
    big = pl.concat([train_df] * 20)
    with pl.Config() as cfg:
        cfg.set_streaming_chunk_size(5000)  # many batches
        streamed = big.lazy().select(**exprs).collect(engine="streaming")
        again = big.lazy().select(exprs["b"].alias("b"), exprs["a"].alias("a")).collect(engine="streaming")
    head = train_df.head(1000)
    expected = {
        "a": a.predict(head),
        "b": b.predict(head),
        "a_margin": a.predict(head, output="margin"),
        "a_first_3": a.slice(0, 3).predict(head),
        "b_json": b.predict(head),
    }
    for name, values in expected.items():
        assert streamed[name].head(1000).to_list() == values.to_list(), name
        assert streamed[name].slice(7000 * 10, 1000).to_list() == values.to_list(), name
    assert not streamed["a"].equals(streamed["b"]) and not streamed["a"].equals(streamed["a_first_3"])
    assert again["a"].equals(streamed["a"]) and again["b"].equals(streamed["b"])


def test_model_round_trips_and_reports(tmp_path, train_df):
    model = polars_gbt.train(
        train_df.with_columns(valid=pl.int_range(pl.len()) % 5 == 0),
        target="y",
        features=FEATURES,
        objective="binary:logistic",
        n_estimators=5,
    )
    path = tmp_path / "m.pgbt"
    model.save(path)
    for other in (Model.load(path), Model.from_bytes(model.to_bytes()), Model.from_json(model.to_json())):
        assert other.to_bytes() == model.to_bytes()
    assert model.num_trees == 5 and model.feature_names == FEATURES
    assert model.params["objective"] == "binary:logistic"
    trees = model.trees_to_dataframe()
    assert trees["Tree"].n_unique() == 5 and trees.filter(pl.col("Feature") == "Leaf")["Gain"].is_not_null().all()
    imp = model.feature_importance("gain")
    assert imp.columns == ["feature", "gain"] and imp.height == 28
    assert model.predict(train_df.head(10)).len() == 10


def _trees_from_json(model: Model) -> pl.DataFrame:
    """The node table decoded from the JSON dump, as the Python package did before the table
    came from Rust: the oracle for ``trees_to_dataframe``."""
    import json

    dump = json.loads(model.to_json())["model"]
    n_outputs = len(dump["base_margin"])
    names = [f["name"] for f in dump["features"]]
    categories = [f["categories"] for f in dump["features"]]
    rows = []
    for t, tree in enumerate(dump["trees"]):
        for n in range(len(tree["left"])):
            leaf = tree["left"][n] == 0xFFFFFFFF
            f = tree["feature"][n]
            cats = None
            if not leaf and tree["category_len"][n] > 0:
                start, words = tree["category_start"][n], tree["category_len"][n]
                bits = tree["category_words"][start : start + words]
                cats = [categories[f][c] for c in range(32 * words) if bits[c // 32] >> (c % 32) & 1]
            child = None if leaf else {"Yes": tree["left"][n], "No": tree["right"][n]}
            missing = None if leaf else tree["left"][n] if tree["default_left"][n] else tree["right"][n]
            rows.append({
                "Tree": t, "Target": t % n_outputs, "Node": n, "ID": f"{t}-{n}",
                "Feature": "Leaf" if leaf else names[f],
                "Split": None if leaf or cats is not None else tree["threshold"][n],
                "Yes": None if leaf else f"{t}-{child['Yes']}", "No": None if leaf else f"{t}-{child['No']}",
                "Missing": None if leaf else f"{t}-{missing}",
                "Gain": tree["value"][n] if leaf else tree["gain"][n], "Cover": tree["cover"][n], "Category": cats,
            })
    schema = {
        "Tree": pl.Int64, "Target": pl.Int64, "Node": pl.Int64, "ID": pl.String, "Feature": pl.String,
        "Split": pl.Float64, "Yes": pl.String, "No": pl.String, "Missing": pl.String, "Gain": pl.Float64, "Cover": pl.Float64,
        "Category": pl.List(pl.String),
    }
    return pl.DataFrame(rows, schema=schema)


def test_trees_to_dataframe_equals_the_json_dump(train_df):
    rng = np.random.default_rng(3)
    df = train_df.head(4000).with_columns(
        colour=pl.Series(rng.choice(["red", "green", "blue", "grey", "teal"], 4000), dtype=pl.Categorical),
        f1=pl.when(pl.int_range(pl.len()) % 7 == 0).then(None).otherwise(pl.col("f1")),
    )
    # The label leans on the colour, so trees split on it.
    df = df.with_columns(y=pl.when(pl.col("colour").is_in(["red", "teal"])).then(1.0).otherwise(pl.col("y")))
    model = polars_gbt.train(
        df, target="y", objective="binary:logistic", n_estimators=6, max_depth=4, max_cat_to_onehot=1
    )
    trees = model.trees_to_dataframe()
    assert trees.columns == [
        "Tree", "Target", "Node", "ID", "Feature", "Split", "Yes", "No", "Missing", "Gain", "Cover", "Category"
    ]
    assert trees["Category"].drop_nulls().len() > 0 and trees["Split"].drop_nulls().len() > 0
    assert trees.equals(_trees_from_json(model), null_equal=True)


def test_output_names_come_from_the_crate():
    import typing

    from polars_gbt import _internal
    from polars_gbt._namespace import OUTPUTS, Output

    assert typing.get_args(Output) == OUTPUTS == tuple(_internal.PREDICT_OUTPUTS)
    df = pl.DataFrame({"x": [0.0, 1.0] * 10, "y": [0.0, 1.0] * 10})
    with pytest.raises(ValueError, match='output must be one of "value", "margin", "class", "leaf"'):
        pl.col("x").gbt.predict(polars_gbt.train(df, target="y", n_estimators=1), output="proba")


def test_train_with_an_eval_frame(train_df, test_df):
    model = polars_gbt.train(
        train_df, target="y", eval_df=test_df, objective="binary:logistic", n_estimators=200,
        learning_rate=0.3, early_stopping_rounds=5, eval_metric="auc",
    )
    log = model.evals_result()
    assert log.columns == ["round", "valid-auc"]
    assert model.best_iteration == log["valid-auc"].arg_max()


def test_early_stopping_with_an_eval_set(train_df):
    df = train_df.with_columns(valid=pl.int_range(pl.len()) % 5 == 0)
    m = df.select(
        pl.col(FEATURES).gbt.fit(
            "y", eval_set=pl.col("valid"), objective="binary:logistic", n_estimators=500,
            learning_rate=0.5, early_stopping_rounds=5, eval_metric="logloss",
        )
    ).item()
    model = Model.from_bytes(m)
    assert model.best_iteration is not None and model.num_trees == model.best_iteration + 1
    assert model.evals_result().columns == ["round", "valid-logloss"]


def test_arrow_inputs_and_the_verbose_log(train_df, capfd):
    import pyarrow as pa

    table = train_df.head(1000).to_arrow()
    assert isinstance(table, pa.Table)
    a = polars_gbt.train(table, target="y", n_estimators=3)
    b = polars_gbt.train(train_df.head(1000), target="y", n_estimators=3)
    assert a.to_bytes() == b.to_bytes()
    df = train_df.head(1000).with_columns(valid=pl.int_range(pl.len()) % 4 == 0)
    df.select(pl.col(FEATURES).gbt.fit("y", eval_set=pl.col("valid"), n_estimators=4, verbose=2))
    err = capfd.readouterr().err
    assert "[0]\tvalid-rmse:" in err and "[2]\tvalid-rmse:" in err and "[3]\tvalid-rmse:" in err
    assert "[1]" not in err
    df.select(pl.col(FEATURES).gbt.fit("y", n_estimators=4, progress=True))
    err = capfd.readouterr().err
    # Redrawn in place at most ten times a second, and always after the last round.
    assert err.endswith(" s\n") and "] 4/4 rounds" in err.split("\r")[-1] and 1 <= err.count("\r") <= 4, err


def test_the_profile_names_the_evaluation_stage(train_df, test_df, monkeypatch, capfd):
    # The boosting loop's work between trees (the evaluation sets, the round's callback) is a
    # stage of its own, not part of the next round's gradients.
    import re

    monkeypatch.setenv("POLARS_GBT_PROFILE", "1")
    params = dict(target="y", objective="binary:logistic", eval_metric="auc", n_estimators=20, device="cpu")
    polars_gbt.train(train_df, eval_df=pl.concat([test_df] * 4), **params)
    err = capfd.readouterr().err
    line = next(line for line in err.splitlines() if "profile: CPU" in line)
    assert float(re.search(r"evaluation ([0-9.]+) s", line).group(1)) > 0, line


def test_keyboard_interrupt_stops_a_long_fit_promptly(train_df):
    import _thread
    import time

    timer = threading.Timer(0.5, _thread.interrupt_main)
    start = time.perf_counter()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        polars_gbt.train(train_df, target="y", n_estimators=1_000_000, max_depth=2)
    assert time.perf_counter() - start < 10
    # The next fit is not affected.
    assert polars_gbt.train(train_df.head(200), target="y", n_estimators=2).num_trees == 2


def test_multiclass_values_are_arrays(train_df):
    df = train_df.head(2000).with_columns(k=(pl.col("f0") * 3).floor().clip(0, 2))
    m = df.select(pl.col(FEATURES).gbt.fit("k", objective="multi:softprob", num_class=3, n_estimators=3)).item()
    out = df.select(pl.col(FEATURES).gbt.predict(m))["f0"]
    assert out.dtype == pl.Array(pl.Float32, 3)
    assert np.allclose(out.arr.sum().to_numpy(), 1.0, atol=1e-5)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda df: df.select(pl.col(FEATURES).gbt.fit("y", max_dpeth=3)), "max_dpeth"),
        (lambda df: df.select(pl.col(FEATURES).gbt.fit("y", max_depth=0)), "max_depth"),
        (lambda df: df.select(pl.col(FEATURES).gbt.fit("y", objective="binary:logistic", learning_rate=-1)), "learning_rate"),
        (lambda df: df.with_columns(s=pl.lit([1, 2])).select(pl.col(["s", "f0"]).gbt.fit("y")), r"`s`: has dtype List\(Int64\)"),
        (lambda df: df.select(pl.col(FEATURES).gbt.fit("y", eval_set=pl.col("f0"))), "eval_set"),
        (lambda df: df.select(pl.col(FEATURES).gbt.fit("y", group=pl.lit(1), objective="binary:logistic")), "group"),
        (lambda df: df.with_columns(q=pl.int_range(pl.len()) // 50, w=(pl.int_range(pl.len()) % 7).cast(pl.Float32) + 1)
         .select(pl.col(FEATURES).gbt.fit("y", group="q", weight="w", objective="rank:ndcg")),
         "column `w`: differs within query group 0"),
        (lambda df: df.with_columns(y=pl.col("y") * 2).select(pl.col(FEATURES).gbt.fit("y", objective="binary:logistic")), "label"),
        (lambda df: df.with_columns(y=pl.lit("yes")).select(pl.col(FEATURES).gbt.fit("y")), "column `y`: must be numeric"),
    ],
)
def test_bad_training_input_raises_a_clear_exception(train_df, make, message):
    # Parameter errors come when the expression is built, data errors when the query runs:
    # both are GbtErrors here.
    with pytest.raises(polars_gbt.GbtError, match=message) as info, polars_gbt.translate_errors():
        make(train_df.head(500))
    assert "panicked" not in str(info.value)


def test_bad_prediction_input_raises_a_clear_exception(train_df):
    model = polars_gbt.train(train_df.head(500), target="y", n_estimators=2)
    with pytest.raises(pl.exceptions.ComputeError, match="missing.*f5"):
        train_df.select(pl.col(["f0", "f1"]).gbt.predict(model))
    with pytest.raises(ValueError, match="output"):
        pl.col(FEATURES).gbt.predict(model, output="probability")
    with pytest.raises(ValueError, match="magic|too short"):
        Model.from_bytes(b"not a model at all, nope")
    with pytest.raises(pl.exceptions.ComputeError, match="checksum"):
        corrupt = bytearray(model.to_bytes())
        corrupt[-3] ^= 0xFF
        train_df.select(pl.col(FEATURES).gbt.predict(bytes(corrupt)))


def test_columns_an_input_expression_reads_are_not_features():
    df = pl.DataFrame({"a": [0.0, 1.0, 2.0, 3.0] * 25, "w": [1.0, 2.0] * 50, "y": [0.0, 1.0, 4.0, 9.0] * 25})
    by_name = polars_gbt.train(df, target="y", weight="w", n_estimators=3)
    by_expr = polars_gbt.train(df, target="y", weight=pl.col("w") * 2, n_estimators=3)
    assert by_name.feature_names == by_expr.feature_names == ["a"]
    folds = pl.Series([0, 1, 2, 3] * 25)
    _, models = polars_gbt.cv(df, target="y", folds=folds, weight=pl.col("w") * 2, n_estimators=3, return_models=True)
    assert all(m.feature_names == ["a"] for m in models.values())
