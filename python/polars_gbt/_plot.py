"""Plots of a model, drawn with matplotlib when it is installed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

if TYPE_CHECKING:
    from polars_gbt._model import Model


def _pyplot() -> Any:
    try:
        import matplotlib.pyplot as plt
    except ImportError as e:  # pragma: no cover - exercised only without matplotlib
        raise ImportError("plotting needs matplotlib: pip install matplotlib") from e
    return plt


def plot_importance(model: Model, importance_type: str = "gain", max_features: int = 20, ax: Any = None) -> Any:
    """Horizontal bar chart of the most important features; returns the matplotlib Axes.

    Examples
    --------
    >>> import polars as pl, polars_gbt
    >>> df = pl.DataFrame({"a": [0.0, 1.0] * 50, "b": [1.0, 2.0, 3.0, 4.0] * 25, "y": [0.0, 1.0] * 50})
    >>> ax = polars_gbt.plot_importance(polars_gbt.train(df, target="y", n_estimators=3))
    >>> [t.get_text() for t in ax.get_yticklabels()]
    ['a']
    """
    imp = model.feature_importance(importance_type).filter(pl.col(importance_type) > 0).head(max_features)
    if ax is None:
        _, ax = _pyplot().subplots()
    ax.barh(imp["feature"].to_list()[::-1], imp[importance_type].to_list()[::-1])
    ax.set_xlabel(importance_type)
    ax.set_title("Feature importance")
    return ax


def plot_metric(model: Model, metric: str | None = None, ax: Any = None) -> Any:
    """The evaluation log, one line per (dataset, metric); returns the matplotlib Axes.

    Examples
    --------
    >>> import polars as pl, polars_gbt
    >>> df = pl.DataFrame({"a": [0.0, 1.0, 2.0, 3.0] * 50, "y": [0.0, 1.0, 0.0, 1.0] * 50})
    >>> df = df.with_columns(valid=pl.int_range(pl.len()) % 4 == 0)
    >>> m = df.select(pl.col("a").gbt.fit("y", eval_set=pl.col("valid"), n_estimators=5)).item()
    >>> ax = polars_gbt.plot_metric(polars_gbt.Model.from_bytes(m))
    >>> [line.get_label() for line in ax.get_lines()]
    ['valid-rmse']
    """
    log = model.evals_result()
    columns = [c for c in log.columns if c != "round" and (metric is None or c.endswith(f"-{metric}"))]
    if not columns:
        raise ValueError("the model has no evaluation log" + (f" for metric {metric!r}" if metric else ""))
    if ax is None:
        _, ax = _pyplot().subplots()
    for c in columns:
        ax.plot(log["round"].to_list(), log[c].to_list(), label=c)
    ax.set_xlabel("round")
    ax.legend()
    return ax
