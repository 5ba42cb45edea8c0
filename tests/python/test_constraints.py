"""Monotone and interaction constraints through the plugin (issue 16): on Polars columns of
several dtypes, by column name and in XGBoost's forms, in the estimators, and beside XGBoost
trained with the same constraints. Oracles: the monotonicity of every row's predictions over a
grid, the features of every root-to-leaf path, and XGBoost's fit quality."""

import numpy as np
import polars as pl
import pytest
import xgboost as xgb

import polars_gbt
from polars_gbt.sklearn import GBTRegressor


@pytest.fixture(scope="module")
def df():
    rng = np.random.default_rng(5)
    n = 3000
    price = rng.uniform(0, 100, n)
    age = rng.integers(-60, 60, n).astype(np.int8)
    size = rng.integers(0, 5000, n).astype(np.uint16)
    noise = rng.normal(scale=3.0, size=n)
    # Falls with price, rises with size, bends with age; noise makes an unconstrained fit wiggle.
    y = -0.2 * price + 0.004 * size + 5 * np.sin(age / 15) + noise
    return pl.DataFrame(
        {
            "price": pl.Series(price, dtype=pl.Float32),
            "age": pl.Series(age, dtype=pl.Int8),
            "size": pl.Series(size, dtype=pl.UInt16),
            "region": pl.Series(rng.choice(["n", "s", "e", "w"], n), dtype=pl.Categorical),
            "y": y,
        }
    )


FEATURES = ["price", "age", "size", "region"]


def sweep(model, df, column, grid, rows=30):
    """Margins of the first ``rows`` rows as ``column`` takes each value of ``grid``: rows x grid."""
    base = df.head(rows).with_row_index("row")
    probe = base.join(pl.DataFrame({column: grid}).cast({column: df.schema[column]}), how="cross", suffix="_grid")
    probe = probe.with_columns(pl.col(f"{column}_grid").alias(column)).sort("row", column)
    out = probe.select(pl.col(FEATURES).gbt.predict(model, output="margin")).to_series().to_numpy()
    return out.reshape(rows, len(grid))


def test_predictions_follow_each_constrained_column(df):
    constraints = {"price": -1, "age": 1, "size": 1}
    model = df.select(pl.col(FEATURES).gbt.fit("y", n_estimators=40, max_depth=5, monotone_constraints=constraints)).item()
    grids = {
        "price": np.linspace(-5, 105, 111),
        "age": np.arange(-70, 70),
        "size": np.arange(0, 5200, 40),
    }
    for column, direction in constraints.items():
        steps = np.diff(sweep(model, df, column, grids[column]), axis=1)
        assert (steps * direction >= 0).all(), column
        # Not flat: the constrained columns are used.
        assert (np.abs(steps).sum(axis=1) > 0).all(), column
    # Unconstrained, the noise makes predictions turn back along age somewhere.
    free = df.select(pl.col(FEATURES).gbt.fit("y", n_estimators=40, max_depth=5)).item()
    assert (np.diff(sweep(free, df, "age", grids["age"]), axis=1) < 0).any()


def test_xgboosts_forms_give_the_same_model(df):
    by_name = polars_gbt.train(df, target="y", n_estimators=10, monotone_constraints={"price": -1, "size": 1})
    for form in ((-1, 0, 1, 0), [-1, 0, 1, 0], "(-1,0,1,0)"):
        other = polars_gbt.train(df, target="y", n_estimators=10, monotone_constraints=form)
        assert other.to_json() != "" and other.trees_to_dataframe().equals(by_name.trees_to_dataframe()), form
    # The model keeps the form given.
    assert by_name.params["monotone_constraints"] == {"price": -1, "size": 1}


def test_as_good_as_xgboost_under_the_same_constraints(df):
    x = df.select("price", "age", "size").to_numpy().astype(np.float64)
    y = df["y"].to_numpy()
    train, test = slice(0, 2000), slice(2000, None)
    params = dict(n_estimators=60, max_depth=4, learning_rate=0.1)
    ours = GBTRegressor(monotone_constraints=(-1, 1, 1), **params).fit(x[train], y[train])
    theirs = xgb.XGBRegressor(monotone_constraints=(-1, 1, 1), tree_method="hist", **params).fit(x[train], y[train])
    rmse = lambda p: float(np.sqrt(np.mean((p - y[test]) ** 2)))  # noqa: E731
    ours_rmse, theirs_rmse = rmse(ours.predict(x[test])), rmse(theirs.predict(x[test]))
    assert ours_rmse < theirs_rmse * 1.05, (ours_rmse, theirs_rmse)


def paths(model):
    """The distinct features of every root-to-leaf path of every tree."""
    table = model.trees_to_dataframe()
    out = []
    for _, nodes in table.group_by("Tree", maintain_order=True):
        by_id = {row["ID"]: row for row in nodes.iter_rows(named=True)}
        root = nodes.filter(pl.col("Node") == 0)["ID"][0]
        stack = [(root, frozenset())]
        while stack:
            node_id, used = stack.pop()
            row = by_id[node_id]
            if row["Feature"] == "Leaf":
                out.append(used)
                continue
            used = used | {row["Feature"]}
            stack += [(row["Yes"], used), (row["No"], used)]
    return out


def test_no_path_leaves_its_interaction_set(df):
    sets = [["price", "age"], ["age", "size", "region"]]
    model = polars_gbt.train(df, target="y", n_estimators=30, max_depth=6, interaction_constraints=sets)
    found = paths(model)
    assert any(len(p) >= 2 for p in found)
    for p in found:
        assert len(p) <= 1 or any(p <= set(s) for s in sets), p
    # The same sets by position, and as XGBoost's string, give the same trees.
    same = polars_gbt.train(df, target="y", n_estimators=30, max_depth=6, interaction_constraints="[[0, 1], [1, 2, 3]]")
    assert same.trees_to_dataframe().equals(model.trees_to_dataframe())


def test_the_estimators_take_both_constraints(df):
    from sklearn.base import clone
    from sklearn.model_selection import GridSearchCV

    X = df.select(FEATURES)
    est = GBTRegressor(n_estimators=15, monotone_constraints={"price": -1}, interaction_constraints=[["price", "age"]])
    search = GridSearchCV(est, {"max_depth": [2, 4]}, cv=2).fit(X, df["y"])
    params = search.best_estimator_.get_booster().params
    assert params["monotone_constraints"] == {"price": -1}
    assert params["interaction_constraints"] == [["price", "age"]]
    assert clone(est).get_params()["monotone_constraints"] == {"price": -1}


@pytest.mark.parametrize(
    ("params", "words"),
    [
        ({"monotone_constraints": {"cost": 1}}, "`cost`"),
        ({"monotone_constraints": {"region": 1}}, "categorical"),
        ({"monotone_constraints": {"price": 2}}, "-1, 0 or 1"),
        ({"monotone_constraints": (1, 0)}, "2 directions for 4 features"),
        ({"monotone_constraints": {"price": 1}, "objective": "reg:quantileerror"}, "refitted"),
        ({"interaction_constraints": [["price", "colour"]]}, "`colour`"),
        ({"interaction_constraints": ["price", "age"]}, "list of features"),
    ],
)
def test_bad_constraints_are_errors_that_say_why(df, params, words):
    with pytest.raises((polars_gbt.ParameterError, pl.exceptions.ComputeError), match=words):
        df.select(pl.col(FEATURES).gbt.fit("y", n_estimators=2, **params))
