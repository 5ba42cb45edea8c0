"""Gradient-boosted decision trees as Polars expressions.

Importing the package registers the ``gbt`` expression namespace::

    import polars as pl
    import polars_gbt  # noqa: F401  (registers pl.Expr.gbt)

    df = pl.DataFrame({"x": [0.1, 0.4, 0.8, 0.9] * 50, "y": [0, 0, 1, 1] * 50})
    model = df.select(pl.col("x").gbt.fit(pl.col("y"), objective="binary:logistic", n_estimators=5)).item()
    scored = df.with_columns(p=pl.col("x").gbt.predict(model))
"""

from polars_gbt._model import Model, train
from polars_gbt._namespace import GbtNamespace
from polars_gbt._plot import plot_importance, plot_metric

__all__ = ["GBTClassifier", "GBTRanker", "GBTRegressor", "GbtNamespace", "Model", "plot_importance", "plot_metric", "train"]


def __getattr__(name: str):
    # The scikit-learn estimators load on first use, so scikit-learn stays optional.
    if name in ("GBTClassifier", "GBTRegressor", "GBTRanker"):
        from polars_gbt import sklearn

        return getattr(sklearn, name)
    raise AttributeError(f"module 'polars_gbt' has no attribute {name!r}")
