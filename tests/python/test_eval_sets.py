"""Several named evaluation sets (issue 17): ``gbt.fit(eval_set={name: mask})`` and
``polars_gbt.train(eval_sets={name: frame})``. Oracle: each set's log equals the log of a fit
on the same training rows that evaluates that set alone."""

import numpy as np
import polars as pl
import pytest

import polars_gbt

FEATURES = ["a", "b"]
PARAMS = dict(objective="binary:logistic", n_estimators=12, max_depth=3, eval_metric=["logloss", "auc"])


@pytest.fixture(scope="module")
def df():
    rng = np.random.default_rng(12)
    n = 1500
    a, b = rng.normal(size=(2, n))
    y = (a + a * b + rng.normal(scale=0.5, size=n) > 0).astype(np.float64)
    fold = np.arange(n) % 5
    return pl.DataFrame({"a": a, "b": b, "y": y, "fold": fold})


def log(model_bytes):
    return polars_gbt.Model.from_bytes(model_bytes).evals_result()


def test_each_named_set_is_evaluated_as_if_alone(df):
    both = df.select(
        pl.col(FEATURES).gbt.fit("y", eval_set={"early": pl.col("fold") == 0, "late": pl.col("fold") == 4}, **PARAMS)
    ).item()
    got = log(both)
    assert [c for c in got.columns if c != "round"] == ["early-logloss", "early-auc", "late-logloss", "late-auc"]
    # The same training rows (folds 1-3), one set at a time.
    for name, fold in (("early", 0), ("late", 4)):
        rows = df.filter(pl.col("fold").is_in([1, 2, 3, fold]))
        alone = rows.select(pl.col(FEATURES).gbt.fit("y", eval_set={name: pl.col("fold") == fold}, **PARAMS)).item()
        want = log(alone)
        for metric in ("logloss", "auc"):
            assert got[f"{name}-{metric}"].to_list() == want[f"{name}-{metric}"].to_list()


def test_train_takes_eval_sets_by_name_and_early_stopping_watches_the_last(df):
    train, a, b = df.filter(pl.col("fold") < 3), df.filter(pl.col("fold") == 3), df.filter(pl.col("fold") == 4)
    params = dict(objective="binary:logistic", n_estimators=300, max_depth=3, learning_rate=0.5, early_stopping_rounds=3)
    m = polars_gbt.train(train.drop("fold"), target="y", eval_sets={"a": a.drop("fold"), "b": b.drop("fold")}, **params)
    last = polars_gbt.train(train.drop("fold"), target="y", eval_sets={"b": b.drop("fold")}, **params)
    assert m.best_iteration == last.best_iteration
    assert m.evals_result()["b-logloss"].to_list() == last.evals_result()["b-logloss"].to_list()
    with pytest.raises(ValueError, match="not both"):
        polars_gbt.train(train, target="y", eval_df=a, eval_sets={"b": b})


def test_sets_in_blocks_after_the_training_rows_are_read_in_place_and_fit_as_gathered_rows(df):
    # train(eval_sets=...) hands the plugin the training rows, then each set's in a block:
    # those are taken as slices of the inputs. The same rows with a set's block first are
    # gathered row by row: the same model, byte for byte, and the same log.
    train, a, b = df.filter(pl.col("fold") < 3), df.filter(pl.col("fold") == 3), df.filter(pl.col("fold") == 4)
    params = dict(objective="binary:logistic", n_estimators=8, max_depth=3, eval_metric=["logloss", "auc"])
    blocks = polars_gbt.train(train.drop("fold"), target="y", eval_sets={"a": a.drop("fold"), "b": b.drop("fold")},
                              **params)
    marked = pl.concat([a, train, b]).with_columns(in_a=pl.col("fold") == 3, in_b=pl.col("fold") == 4)
    gathered = marked.select(pl.col(FEATURES).gbt.fit("y", eval_set={"a": pl.col("in_a"), "b": pl.col("in_b")},
                                                      **params)).item()
    assert blocks.to_bytes() == gathered
    # Sets that overlap, or leave no training row before them, are gathered or refused as before.
    overlap = marked.select(pl.col(FEATURES).gbt.fit("y", eval_set={"a": pl.col("in_a"), "ab": pl.col("fold") >= 3},
                                                     **params)).item()
    assert log(overlap)["ab-auc"].len() == 8
    with pytest.raises(pl.exceptions.ComputeError, match="no rows left to train on"):
        pl.concat([a, b]).select(pl.col(FEATURES).gbt.fit("y", eval_set=pl.col("fold") >= 3, **params))


def test_bad_masks_name_their_set(df):
    with pytest.raises(pl.exceptions.ComputeError, match="eval_set `late`.*Boolean"):
        df.select(pl.col(FEATURES).gbt.fit("y", eval_set={"early": pl.col("fold") == 0, "late": pl.col("fold")}))
    with pytest.raises(ValueError, match="names"):
        pl.col(FEATURES).gbt.fit("y", eval_set={})
