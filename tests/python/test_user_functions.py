"""A user's objective and metrics (issue 16, point 5): Python callables computing gradients and
hessians, or a metric, through ``gbt.fit``, ``polars_gbt.train`` and the estimators. Oracles:
the built-in objectives and metrics (a custom squared error grows the built-in's trees
exactly; a custom RMSE logs the built-in's values and stops where it stops), and the errors a
user meets."""

import subprocess
import sys

import numpy as np
import polars as pl
import pytest

import polars_gbt
from polars_gbt.sklearn import GBTClassifier, GBTRegressor

FEATURES = ["a", "b", "c"]


@pytest.fixture(scope="module")
def df():
    rng = np.random.default_rng(8)
    n = 2000
    a, b, c = rng.normal(size=(3, n))
    b[rng.random(n) < 0.1] = np.nan
    y = a * 2 + np.nan_to_num(b) * a + rng.normal(scale=0.3, size=n)
    return pl.DataFrame({"a": a, "b": b, "c": c, "y": y, "w": rng.uniform(0.5, 2.0, n), "cls": (y > 0).astype(np.int64)})


def squared_error(predt, label):
    return predt - label, np.ones_like(predt)


def trees(model_bytes):
    return polars_gbt.Model.from_bytes(model_bytes).trees_to_dataframe()


@pytest.mark.parametrize("weighted", [False, True])
def test_a_custom_squared_error_grows_the_builtin_trees(df, weighted):
    params = dict(n_estimators=15, max_depth=4, base_score=0.5)
    weight = {"weight": "w"} if weighted else {}
    builtin = df.select(pl.col(FEATURES).gbt.fit("y", objective="reg:squarederror", **weight, **params)).item()
    custom = df.select(pl.col(FEATURES).gbt.fit("y", objective=squared_error, **weight, **params)).item()
    assert trees(custom).equals(trees(builtin))
    model = polars_gbt.Model.from_bytes(custom)
    assert model.params["custom_objective"] == "squared_error"
    assert model.params["objective"] == "reg:squarederror"
    # XGBoost's spelling: obj= beside the objective naming the link.
    frame = df.select(*FEATURES, "y", *weight.values())
    native = polars_gbt.train(frame, target="y", obj=squared_error, **weight, **params)
    assert native.trees_to_dataframe().equals(trees(builtin))


def test_a_custom_logistic_loss_predicts_as_the_builtin(df):
    def logistic(predt, label):
        p = 1.0 / (1.0 + np.exp(-predt))
        return p - label, p * (1.0 - p)

    params = dict(n_estimators=20, max_depth=3, base_score=0.5)
    frame = df.select(*FEATURES, "cls")
    builtin = polars_gbt.train(frame, target="cls", objective="binary:logistic", **params)
    custom = polars_gbt.train(frame, target="cls", obj=logistic, objective="binary:logistic", **params)
    # float32 sigmoids of numpy and Rust may differ in the last bit: predictions, not bytes.
    np.testing.assert_allclose(custom.predict(frame).to_numpy(), builtin.predict(frame).to_numpy(), atol=2e-3)
    # The estimator calls it as scikit-learn's XGBoost does: objective(y_true, y_pred).
    clf = GBTClassifier(objective=lambda y, p: logistic(p, y), **params).fit(frame.select(FEATURES), frame["cls"])
    np.testing.assert_allclose(clf.predict_proba(frame.select(FEATURES))[:, 1], builtin.predict(frame).to_numpy(), atol=2e-3)


def test_a_custom_softmax_predicts_as_the_builtin(df):
    k = 3
    y = df["y"].to_numpy()
    frame = df.select(*FEATURES).with_columns(cls=pl.Series(np.digitize(y, np.quantile(y, [1 / 3, 2 / 3]))))

    def softmax(predt, label):
        e = np.exp(predt - predt.max(axis=1, keepdims=True))
        p = e / e.sum(axis=1, keepdims=True)
        onehot = np.eye(k, dtype=np.float32)[label.astype(int)]
        return p - onehot, np.maximum(2.0 * p * (1.0 - p), 1e-6)

    params = dict(n_estimators=10, max_depth=3, num_class=k, base_score=0.5)
    builtin = polars_gbt.train(frame, target="cls", objective="multi:softprob", **params)
    custom = polars_gbt.train(frame, target="cls", objective=softmax, **params)
    got = np.stack(custom.predict(frame).to_list())
    want = np.stack(builtin.predict(frame).to_list())
    np.testing.assert_allclose(got, want, atol=5e-3)


def test_the_regressor_takes_a_callable(df):
    X, y = df.select(FEATURES), df["y"]
    ours = GBTRegressor(n_estimators=10, base_score=0.5, objective=lambda y_true, y_pred: squared_error(y_pred, y_true))
    plain = GBTRegressor(n_estimators=10, base_score=0.5).fit(X, y)
    np.testing.assert_array_equal(ours.fit(X, y).predict(X), plain.predict(X))


@pytest.mark.parametrize(
    ("objective", "words"),
    [
        (lambda p, y: 1 / 0, "ZeroDivisionError"),
        (lambda p, y: (p - y, np.ones(3)), "hessian has shape"),
        (lambda p, y: p - y, "must return \\(gradient, hessian\\)"),
        (lambda p, y: (p - y, np.full_like(p, np.nan)), "non-finite"),
    ],
)
def test_a_failing_objective_is_an_error_naming_it(df, objective, words):
    with pytest.raises((pl.exceptions.ComputeError, ValueError), match=words):
        df.select(pl.col(FEATURES).gbt.fit("y", objective=objective, n_estimators=2))


def test_what_cannot_take_a_custom_objective_says_so(df):
    with pytest.raises((pl.exceptions.ComputeError, ValueError), match="custom_objective"):
        df.select(pl.col(FEATURES).gbt.fit("y", custom_objective="mine", n_estimators=2))
    with pytest.raises(polars_gbt.ParameterError, match="link"):
        df.select(pl.col(FEATURES).gbt.fit("y", obj=squared_error, objective="reg:absoluteerror"))
    first = df.select(pl.col(FEATURES).gbt.fit("y", n_estimators=2)).item()
    with pytest.raises((pl.exceptions.ComputeError, ValueError), match="init_model"):
        df.select(pl.col(FEATURES).gbt.fit("y", objective=squared_error, init_model=first, n_estimators=2))
    with pytest.raises(TypeError, match="obj must be a callable"):
        df.select(pl.col(FEATURES).gbt.fit("y", obj="reg:squarederror"))


def test_a_plan_with_a_python_objective_fails_clearly_in_another_process(df, tmp_path):
    plan = df.lazy().select(pl.col(FEATURES).gbt.fit("y", objective=squared_error, n_estimators=2))
    path = tmp_path / "plan.bin"
    plan.serialize(path)
    script = f"import polars as pl, polars_gbt; pl.LazyFrame.deserialize({str(path)!r}).collect()"
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert run.returncode != 0
    assert "cannot be serialised into a plan sent elsewhere" in run.stderr, run.stderr[-2000:]


def my_rmse(predt, label):
    return float(np.sqrt(np.mean((predt.astype(np.float64) - label) ** 2)))


def log(model_bytes):
    return polars_gbt.Model.from_bytes(model_bytes).evals_result()


def test_a_custom_metric_logs_as_the_builtin_and_stops_where_it_stops(df):
    params = dict(n_estimators=200, max_depth=5, learning_rate=0.3, early_stopping_rounds=5)
    valid = pl.col("c") > 1.0
    builtin = df.select(pl.col(FEATURES).gbt.fit("y", eval_set=valid, eval_metric="rmse", **params)).item()
    custom = df.select(pl.col(FEATURES).gbt.fit("y", eval_set=valid, eval_metric=my_rmse, **params)).item()
    got, want = log(custom), log(builtin)
    # The objective's default metric first, then the user's, which early stopping watches.
    assert got.columns == ["round", "valid-rmse", "valid-my_rmse"]
    assert polars_gbt.Model.from_bytes(custom).best_iteration == polars_gbt.Model.from_bytes(builtin).best_iteration < 199
    np.testing.assert_allclose(got.to_numpy()[:, -1], want["valid-rmse"].to_numpy(), rtol=1e-5)
    # Larger is better with maximize=True: the negated metric stops at the same round.
    def neg_rmse(predt, label):
        return "neg_rmse", -my_rmse(predt, label)

    flipped = df.select(
        pl.col(FEATURES).gbt.fit("y", eval_set=valid, eval_metric=["mae", neg_rmse], maximize=True, **params)
    ).item()
    assert list(log(flipped).columns) == ["round", "valid-mae", "valid-neg_rmse"]
    assert polars_gbt.Model.from_bytes(flipped).best_iteration == polars_gbt.Model.from_bytes(builtin).best_iteration


def test_the_estimators_take_scikit_learn_metrics(df):
    from sklearn.metrics import mean_absolute_error

    X, y = df.select(FEATURES), df["y"].to_numpy()
    fit = dict(eval_set=[(X.tail(500), y[-500:])], verbose=False)
    ours = GBTRegressor(n_estimators=30, eval_metric=mean_absolute_error).fit(X.head(1500), y[:1500], **fit)
    plain = GBTRegressor(n_estimators=30, eval_metric="mae").fit(X.head(1500), y[:1500], **fit)
    got = ours.evals_result()["validation_0"]["mean_absolute_error"]
    np.testing.assert_allclose(got, plain.evals_result()["validation_0"]["mae"], rtol=1e-5)


def test_continued_training_takes_a_custom_metric(df):
    valid = pl.col("c") > 1.0
    first = df.select(pl.col(FEATURES).gbt.fit("y", n_estimators=5, eval_set=valid)).item()
    more = df.select(
        pl.col(FEATURES).gbt.fit("y", n_estimators=5, eval_set=valid, eval_metric=my_rmse, init_model=first)
    ).item()
    np.testing.assert_allclose(log(more)["valid-my_rmse"].to_numpy(), log(more)["valid-rmse"].to_numpy(), rtol=1e-5)


@pytest.mark.parametrize(
    ("metric", "words"),
    [
        (lambda p, y: 1 / 0, "ZeroDivisionError"),
        (lambda p, y: "bad", "must return a number"),
    ],
)
def test_a_failing_metric_is_an_error_naming_it(df, metric, words):
    with pytest.raises((pl.exceptions.ComputeError, ValueError), match=words):
        df.select(pl.col(FEATURES).gbt.fit("y", eval_set=pl.col("c") > 1, eval_metric=metric, n_estimators=2))


def test_a_metric_without_an_eval_set_says_so(df):
    with pytest.raises(ValueError, match="none is given"):
        df.select(pl.col(FEATURES).gbt.fit("y", eval_metric=my_rmse))
    with pytest.raises(ValueError, match="maximize"):
        df.select(pl.col(FEATURES).gbt.fit("y", eval_set=pl.col("c") > 1, maximize=True))


def test_a_metric_named_as_a_logged_one_is_refused(df):
    def rmse(predt, label):
        return my_rmse(predt, label)

    with pytest.raises((pl.exceptions.ComputeError, ValueError), match="two metrics named `rmse`"):
        df.select(pl.col(FEATURES).gbt.fit("y", eval_set=pl.col("c") > 1, eval_metric=rmse, n_estimators=2))
