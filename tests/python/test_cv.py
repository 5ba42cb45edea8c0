"""Cross-validation (issue 16, point 6): ``polars_gbt.cv``. Oracles: each fold's fit is the fit
``polars_gbt.train`` gives on the fold's complement (same model bytes, same log, and the last
round's test logloss recomputed with numpy from its predictions); the mean and std columns are
numpy's over those separate fits; early stopping is checked against the full series by hand."""

from __future__ import annotations

import _thread
import threading
import time

import numpy as np
import polars as pl
import pytest
from conftest import FEATURES

import polars_gbt
from polars_gbt._cv import _assigned_folds

PARAMS = dict(objective="binary:logistic", n_estimators=8, max_depth=3)
FEATS = FEATURES[:8]


@pytest.fixture(scope="module")
def df(train_df):
    # 2,000 rows, 8 features, a fold column of 4 integer folds in no particular row order.
    return train_df.head(2000).select(*FEATS, "y").with_columns(fold=(pl.int_range(pl.len()) * 7919) % 4)


def separate(rows: pl.DataFrame, held_out: pl.Expr, **params) -> polars_gbt.Model:
    """The fit cv's fold should be: trained on the rows outside the fold, evaluated on both."""
    rest, fold = rows.filter(~held_out).select(*FEATS, "y"), rows.filter(held_out).select(*FEATS, "y")
    return polars_gbt.train(rest, target="y", eval_sets={"train": rest, "test": fold}, **params)


def logloss(y: np.ndarray, p: np.ndarray) -> float:
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def test_each_fold_is_a_separate_fit_and_the_columns_are_numpys_mean_and_std(df):
    res, models = polars_gbt.cv(df, target="y", folds="fold", metrics=["logloss", "auc"], return_models=True, **PARAMS)
    assert list(models) == [0, 1, 2, 3]
    assert res.columns == [
        "round",
        *(f"{s}-{m}-{stat}" for s in ("train", "test") for m in ("logloss", "auc") for stat in ("mean", "std")),
    ]
    assert res["round"].to_list() == list(range(8))
    logs = []
    for f, model in models.items():
        held_out = pl.col("fold") == f
        alone = separate(df, held_out, eval_metric=["logloss", "auc"], **PARAMS)
        assert model.to_bytes() == alone.to_bytes(), f"fold {f}: the model differs from the separate fit"
        assert model.feature_names == FEATS  # the fold column is not a feature
        log = model.evals_result()
        # The test series is the held-out fold's, as a fit evaluating that fold alone logs it.
        only = polars_gbt.train(
            df.filter(~held_out).select(*FEATS, "y"), target="y", eval_df=df.filter(held_out), eval_metric="logloss", **PARAMS
        )
        assert log["test-logloss"].to_list() == only.evals_result()["valid-logloss"].to_list()
        rows = df.filter(held_out)
        p = model.predict(rows).to_numpy().astype(np.float64)
        assert log["test-logloss"][-1] == pytest.approx(logloss(rows["y"].to_numpy(), p), rel=1e-6)
        logs.append(log)
    for series in ("train-logloss", "train-auc", "test-logloss", "test-auc"):
        values = np.array([log[series].to_list() for log in logs])  # folds x rounds
        np.testing.assert_allclose(res[f"{series}-mean"].to_numpy(), values.mean(axis=0), rtol=1e-12)
        np.testing.assert_allclose(res[f"{series}-std"].to_numpy(), values.std(axis=0), rtol=1e-9, atol=1e-15)


def test_assigned_folds_are_the_documented_blocks_of_a_seeded_shuffle(df):
    data = df.drop("fold")
    res, models = polars_gbt.cv(data, target="y", nfold=3, seed=7, return_models=True, **PARAMS)
    n = data.height
    want = pl.int_range(0, n, dtype=pl.Int64, eager=True).shuffle(seed=7) * 3 // n
    assert list(models) == [0, 1, 2]
    for f, model in models.items():
        alone = separate(data, pl.lit(want) == f, seed=7, **PARAMS)
        assert model.to_bytes() == alone.to_bytes()
    # Fold sizes differ by at most one row; the same seed gives the same folds, another seed others.
    assert sorted(want.value_counts()["count"].to_list()) == [666, 667, 667]
    assert polars_gbt.cv(data, target="y", nfold=3, seed=7, **PARAMS).equals(res)
    assert not polars_gbt.cv(data, target="y", nfold=3, seed=8, **PARAMS).equals(res)
    # Without shuffle, contiguous blocks in row order.
    plain = polars_gbt.cv(data, target="y", nfold=3, shuffle=False, seed=7, **PARAMS)
    blocks = polars_gbt.cv(data, target="y", folds=pl.int_range(pl.len()) * 3 // pl.len(), seed=7, **PARAMS)
    assert plain.equals(blocks)


def test_string_fold_ids_are_the_distinct_values_sorted(df):
    names = pl.Series(["cherry", "apple", "date", "banana"])
    named = df.with_columns(part=pl.col("fold").replace_strict(list(range(4)), names.to_list()))
    res, models = polars_gbt.cv(named, target="y", folds=pl.col("part"), features=FEATS, return_models=True, **PARAMS)
    assert list(models) == ["apple", "banana", "cherry", "date"]
    for name, model in models.items():
        assert model.to_bytes() == separate(named, pl.col("part") == name, **PARAMS).to_bytes()
    # The same partition as integers gives the same frame (the statistics do not depend on the order).
    by_int = polars_gbt.cv(df, target="y", folds="fold", **PARAMS)
    for c in res.columns:
        np.testing.assert_allclose(res[c].to_numpy(), by_int[c].to_numpy(), rtol=1e-12, atol=1e-15)
    # A Series works as well, and a lazy frame.
    assert polars_gbt.cv(named.drop("part").lazy(), target="y", folds=named["part"], features=FEATS, **PARAMS).equals(res)


@pytest.mark.parametrize(
    "metrics, n_estimators, attempts",
    [
        ("logloss", 300, [50, 100]),  # the mean stops at round 91: a second attempt, twice as long
        (["logloss", "auc"], 300, [50, 100]),  # auc, higher is better, stops at round 52
        ("logloss", 30, [30]),  # the patience never runs out: the best of all 30 rounds
    ],
)
def test_early_stopping_cuts_where_the_mean_series_says(train_df, monkeypatch, metrics, n_estimators, attempts):
    data = train_df.head(2000).with_columns(fold=(pl.int_range(pl.len()) * 7919) % 4)
    params = dict(PARAMS, n_estimators=n_estimators, max_depth=2, learning_rate=0.1)
    full = polars_gbt.cv(data, target="y", folds="fold", metrics=metrics, **params)
    higher = metrics[-1] == "auc"
    watched = full[f"test-{'auc' if higher else 'logloss'}-mean"].to_list()
    # By hand: the best so far, until 4 rounds pass without a strict improvement.
    best = 0
    for stop in range(1, len(watched)):
        if (watched[stop] > watched[best]) if higher else (watched[stop] < watched[best]):
            best = stop
        elif stop - best >= 4:
            break
    assert best > 10 and (stop - best == 4) == (n_estimators == 300)
    # Record the rounds each fold's fit is asked for.
    asked = []
    fit = polars_gbt._cv.train
    monkeypatch.setattr(polars_gbt._cv, "train", lambda *a, **kw: asked.append(kw["n_estimators"]) or fit(*a, **kw))
    res, models = polars_gbt.cv(
        data, target="y", folds="fold", metrics=metrics, early_stopping_rounds=4, return_models=True, **params
    )
    assert sorted(asked) == sorted(a for a in attempts for _ in range(4))
    assert res.equals(full.head(best + 1))
    # The models are what an early-stopped fit keeps: the trees up to the best round (those of a
    # fit of best + 1 rounds), the log up to the round it stopped at.
    for f, model in models.items():
        assert model.best_iteration == best and model.num_trees == best + 1
        assert model.params["n_estimators"] == n_estimators
        assert model.evals_result().height == stop + 1
        short = polars_gbt.train(
            data.filter(pl.col("fold") != f).drop("fold"), target="y", **dict(params, n_estimators=best + 1)
        )
        assert model.predict(data).to_list() == short.predict(data).to_list()


def test_the_default_number_of_rounds_is_the_trainers(df):
    small = df.head(200).drop("fold")
    assert polars_gbt.train(small, target="y").params["n_estimators"] == polars_gbt._cv._DEFAULT_N_ESTIMATORS
    assert polars_gbt.cv(small, target="y", nfold=2, max_depth=1).height == 100
    assert polars_gbt.cv(small, target="y", nfold=2, max_depth=1, num_boost_round=7).height == 7


def test_stratified_folds_keep_each_class_within_one_row_of_its_share(train_df):
    # Three unbalanced classes (about 60/30/10 %).
    data = train_df.head(1003).select(*FEATS, "y").with_columns(
        k=pl.when(pl.col("f0") < 0.9).then(0).when(pl.col("f0") < 1.4).then(1).otherwise(2)
    )
    n_class = data["k"].value_counts().sort("k")["count"].to_list()
    assert min(n_class) > 50
    for nfold in (3, 5):
        folds = _assigned_folds(data, "k", None, nfold, True, True, 0, "multi:softprob")["__polars_gbt_cv_fold"]
        counts = data.with_columns(fold=folds).group_by("fold", "k").len()
        for k, n_c in enumerate(n_class):
            per_fold = counts.filter(pl.col("k") == k)["len"]
            assert per_fold.len() == nfold
            assert per_fold.min() >= n_c // nfold and per_fold.max() <= -(-n_c // nfold), (nfold, k)
        sizes = counts.group_by("fold").agg(pl.col("len").sum())["len"]
        assert sizes.max() - sizes.min() <= 1
    # cv uses exactly those folds.
    params = dict(objective="multi:softprob", num_class=3, n_estimators=3, max_depth=2)
    folds = _assigned_folds(data, "k", None, 3, True, True, 0, "multi:softprob")["__polars_gbt_cv_fold"]
    strat = polars_gbt.cv(data.drop("y"), target="k", nfold=3, stratified=True, **params)
    assert strat.equals(polars_gbt.cv(data.drop("y"), target="k", folds=folds, **params))
    assert strat.columns[1] == "train-mlogloss-mean"


def test_query_groups_stay_whole(train_df):
    data = train_df.head(600).select(*FEATS, "y").with_columns(q=pl.int_range(pl.len()) // 20)
    params = dict(objective="rank:ndcg", group="q", n_estimators=3, max_depth=2)
    res, models = polars_gbt.cv(data, target="y", nfold=3, return_models=True, **params)
    assert res.columns[1] == "train-ndcg@32-mean" and list(models) == [0, 1, 2]
    assert all(m.feature_names == FEATS for m in models.values())  # q is the group, not a feature
    with pytest.raises(polars_gbt.DataError, match="query group 0 spans several folds"):
        polars_gbt.cv(data, target="y", folds=pl.int_range(pl.len()) % 2, **params)


def test_parallel_folds_give_what_one_at_a_time_gives(df):
    params = dict(PARAMS, n_estimators=5)
    assert polars_gbt.cv(df, target="y", folds="fold", parallel_folds=1, **params).equals(
        polars_gbt.cv(df, target="y", folds="fold", **params)
    )
    res = polars_gbt.cv(df, target="y", folds="fold", eval_train=False, **params)
    assert res.columns == ["round", "test-logloss-mean", "test-logloss-std"]


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(folds=pl.lit("all")), polars_gbt.ColumnError, "1 distinct value"),
        (dict(folds=pl.col("f0") * 0), polars_gbt.ColumnError, "1 distinct value"),
        (dict(folds="nope"), polars_gbt.ColumnError, "folds column 'nope' not found"),
        (dict(folds=pl.col("nope")), polars_gbt.ColumnError, "folds: .*nope"),
        (dict(folds=pl.when(pl.col("fold") > 0).then(pl.col("fold"))), polars_gbt.ColumnError, "no fold"),
        (dict(folds=pl.Series([0, 1])), polars_gbt.ColumnError, "one value per row"),
        (dict(nfold=1), polars_gbt.ParameterError, "nfold must be an integer of at least 2"),
        (dict(nfold=2.0), polars_gbt.ParameterError, "nfold"),
        (dict(nfold=2001), polars_gbt.DataError, "nfold=2001 is more than the 2000 rows"),
        (dict(nfold=3, stratified=True, objective="reg:squarederror"), polars_gbt.ParameterError, "classification"),
        (dict(nfold=3, stratified=True), polars_gbt.ParameterError, "classification objective"),
        (dict(folds="fold", stratified=True, objective="binary:logistic"), polars_gbt.ParameterError, "folds given"),
        (dict(folds="fold", nfold=4), polars_gbt.ParameterError, "nfold applies to folds cv assigns"),
        (dict(folds="fold", shuffle=False), polars_gbt.ParameterError, "shuffle applies"),
        (dict(random_state=3), polars_gbt.ParameterError, "seed="),
        (dict(n_estimators=5, num_round=5), polars_gbt.ParameterError, "given twice"),
        (dict(verbose=True), polars_gbt.ParameterError, "cv does not take `verbose`"),
        (dict(target="label"), polars_gbt.ColumnError, "target column 'label' not found"),
        (dict(features=["f0", "g7"]), polars_gbt.ColumnError, "feature columns not found: 'g7'"),
        (dict(weight="w"), polars_gbt.ColumnError, "weight column 'w' not found"),
        (dict(eval_df=pl.DataFrame()), polars_gbt.ParameterError, "cv does not take `eval_df`"),
        (dict(metrics="auc", eval_metric="auc"), polars_gbt.ParameterError, "not both"),
        (dict(early_stopping_rounds=0), polars_gbt.ParameterError, "early_stopping_rounds"),
        (dict(parallel_folds=0), polars_gbt.ParameterError, "parallel_folds"),
        (dict(max_dpeth=3), polars_gbt.ParameterError, "max_dpeth"),
    ],
)
def test_bad_input_is_a_clear_error(df, kwargs, error, message):
    kwargs = {"target": "y", **kwargs}
    if ("nfold" in kwargs and "folds" not in kwargs) or "features" in kwargs:
        df = df.drop("fold")
    with pytest.raises(error, match=message):
        polars_gbt.cv(df, **kwargs)
    assert issubclass(error, ValueError)


def test_a_failing_fold_raises_its_error_naming_the_fold(df):
    bad = df.with_columns(y=pl.when(pl.int_range(pl.len()) == 5).then(2.0).otherwise(pl.col("y")))
    with pytest.raises(polars_gbt.ColumnError, match="binary:logistic needs labels") as e:
        polars_gbt.cv(bad, target="y", folds="fold", **PARAMS)
    assert any("in cv fold 0" in note for note in e.value.__notes__)


def test_keyboard_interrupt_stops_every_fold(df):
    timer = threading.Timer(0.5, _thread.interrupt_main)
    start = time.perf_counter()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        polars_gbt.cv(df, target="y", folds="fold", parallel_folds=2, n_estimators=1_000_000, max_depth=2)
    assert time.perf_counter() - start < 10
    assert not [t for t in threading.enumerate() if t.name.startswith("polars-gbt-cv")]
    assert polars_gbt.cv(df, target="y", folds="fold", n_estimators=2).height == 2


def test_a_python_metric_watched_by_early_stopping_goes_by_maximize(train_df):
    """A user's metric (logged last) is watched in its own direction: the negated log loss with
    maximize=True stops where the log loss does, the folds' fits given the callable."""
    data = train_df.head(2000).with_columns(fold=(pl.int_range(pl.len()) * 7919) % 4)
    params = dict(PARAMS, n_estimators=300, max_depth=2, learning_rate=0.1, early_stopping_rounds=4)
    plain = polars_gbt.cv(data, target="y", folds="fold", metrics="logloss", **params)

    def neg_logloss(predt, label):
        p = np.clip(predt.astype(np.float64), 1e-15, 1 - 1e-15)
        return float(np.mean(label * np.log(p) + (1 - label) * np.log(1 - p)))

    flipped = polars_gbt.cv(data, target="y", folds="fold", metrics=["logloss", neg_logloss], maximize=True, **params)
    assert flipped.height == plain.height
    np.testing.assert_allclose(flipped["test-neg_logloss-mean"].to_numpy(), -plain["test-logloss-mean"].to_numpy(), rtol=1e-6)


def test_several_targets_cross_validate_as_separate_fits_score_them():
    """A list of targets (issue 17): each fold is the multi-target fit of the other folds, and
    the test rmse is the root mean over every (row, target) element of its fold."""
    rng = np.random.default_rng(4)
    n = 900
    data = pl.DataFrame({"x": rng.normal(size=n), "z": rng.normal(size=n)}).with_columns(
        a=pl.col("x") * 2 + pl.col("z"), b=pl.col("z").abs(), fold=pl.int_range(n) % 3
    )
    params = dict(n_estimators=6, max_depth=3)
    res, models = polars_gbt.cv(data, target=["a", "b"], folds="fold", return_models=True, **params)
    rmses = []
    for f, model in models.items():
        held_out = data.filter(pl.col("fold") == f)
        alone = polars_gbt.train(data.filter(pl.col("fold") != f).select("x", "z", "a", "b"), target=["a", "b"], **params)
        pred = np.stack(model.predict(held_out).to_list())
        np.testing.assert_array_equal(pred, np.stack(alone.predict(held_out).to_list()))
        truth = held_out.select("a", "b").to_numpy()
        rmses.append(np.sqrt(np.mean((pred.astype(np.float64) - truth) ** 2)))
    assert res["test-rmse-mean"][-1] == pytest.approx(np.mean(rmses), rel=1e-5)
    with pytest.raises(polars_gbt.ParameterError, match="several targets"):
        polars_gbt.cv(data, target=["a", "b"], stratified=True, objective="binary:logistic", **params)
    with pytest.raises(polars_gbt.ColumnError, match="'c' not found"):
        polars_gbt.cv(data, target=["a", "c"], **params)
