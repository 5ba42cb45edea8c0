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


def plot_contributions(
    model: Model,
    data: pl.DataFrame | pl.LazyFrame,
    kind: str = "beeswarm",
    max_features: int = 20,
    class_index: int = 0,
    ax: Any = None,
) -> Any:
    """A summary of SHAP values over ``data``'s rows; returns the matplotlib Axes.

    ``kind="bar"``: mean absolute SHAP value per feature. ``kind="beeswarm"``: each row's SHAP
    value per feature as a dot, coloured by the feature's value (low blue, high red; grey for
    categorical or missing values). Features are ordered by mean absolute SHAP value, the
    largest on top; ``class_index`` picks the class of a multiclass model.

    Examples
    --------
    >>> import polars as pl, polars_gbt
    >>> df = pl.DataFrame({"a": [0.0, 1.0, 2.0, 3.0] * 25, "b": [5.0, 1.0, 5.0, 1.0] * 25})
    >>> m = polars_gbt.train(df.with_columns(y=pl.col("a") * 2), target="y", n_estimators=5)
    >>> ax = polars_gbt.plot_contributions(m, df, kind="bar")
    >>> [t.get_text() for t in ax.get_yticklabels()]
    ['a']
    """
    if kind not in ("bar", "beeswarm"):
        raise ValueError(f'kind must be "bar" or "beeswarm", not {kind!r}')
    shap = model.contributions(data)
    if "class" in shap.columns:
        shap = shap.filter(pl.col("class") == class_index).drop("class")
        if shap.height == 0:
            raise ValueError(f"class_index {class_index} is not a class of the model")
    shap = shap.drop("bias")
    strength = shap.select(pl.all().abs().mean()).row(0, named=True)
    order = [f for f, v in sorted(strength.items(), key=lambda kv: -kv[1]) if v > 0][:max_features]
    if ax is None:
        _, ax = _pyplot().subplots()
    positions = list(range(len(order)))[::-1]
    if kind == "bar":
        ax.barh(positions, [strength[f] for f in order])
        ax.set_xlabel("mean |SHAP value|")
    else:
        import numpy as np

        from matplotlib import colormaps

        frame = data.collect() if isinstance(data, pl.LazyFrame) else data
        cmap = colormaps["coolwarm"].with_extremes(bad="0.6")  # missing values grey
        rng = np.random.default_rng(0)
        for y, f in zip(positions, order):
            values = shap[f].to_numpy()
            column = frame[f]
            jitter = y + rng.uniform(-0.3, 0.3, size=len(values))
            if column.dtype.is_numeric():
                x = column.cast(pl.Float64).fill_null(float("nan")).to_numpy()
                finite = x[np.isfinite(x)]
                lo, hi = (np.percentile(finite, 5), np.percentile(finite, 95)) if finite.size else (0.0, 1.0)
                scaled = np.clip((x - lo) / (hi - lo if hi > lo else 1.0), 0.0, 1.0)
                ax.scatter(values, jitter, c=scaled, cmap=cmap, vmin=0, vmax=1, s=6, plotnonfinite=True)
            else:
                ax.scatter(values, jitter, color="0.6", s=6)
        ax.axvline(0.0, color="0.5", lw=0.8)
        ax.set_xlabel("SHAP value (margin)")
    ax.set_yticks(positions, order)
    ax.set_title("Feature contributions")
    return ax
