"""The scikit-learn estimators' inputs: ``X`` as a Polars frame of named features, ``y``,
weights, base margins and query ids checked, and the columns that carry them beside the
features into the fit (``_Rows``, ``_with_inputs``)."""

from __future__ import annotations

import sys
from typing import Any, NamedTuple

import numpy as np
import polars as pl
from sklearn.utils.validation import _check_sample_weight, _get_feature_names, column_or_1d

from polars_gbt import _inputs
from polars_gbt._model import margin_series

# Columns the estimators put beside the features for the fit's other inputs.
_TARGET, _WEIGHT, _GROUP, _MARGIN, _EVAL = (
    f"__polars_gbt_{n}" for n in ("target", "weight", "group", "margin", "eval")
)
_RESERVED = (_TARGET, _WEIGHT, _GROUP, _MARGIN, _EVAL)


class _Rows(NamedTuple):
    """One dataset of a fit: the features and what goes beside them (None: not given)."""

    df: pl.DataFrame
    y: np.ndarray
    weight: np.ndarray | None
    margin: pl.Series | None
    group: np.ndarray | None


def _with_inputs(rows: _Rows, weighted: bool) -> pl.DataFrame:
    """The rows' features with the target, query ids, weights (ones where ``weighted`` and
    none were given) and margins beside them."""
    # Several targets: an Array column, one value per target.
    y = np.ascontiguousarray(rows.y, dtype=np.float64)
    columns = [pl.Series(_TARGET, y) if y.ndim == 2 else pl.Series(_TARGET, y, dtype=pl.Float64)]
    if rows.group is not None:
        columns.append(pl.Series(_GROUP, rows.group).cast(pl.Int64))
    if weighted:
        weight = rows.weight if rows.weight is not None else np.ones(len(rows.y))
        columns.append(pl.Series(_WEIGHT, weight, dtype=pl.Float64))
    if rows.margin is not None:
        columns.append(rows.margin.alias(_MARGIN))
    return rows.df.with_columns(columns)


def _weights(sample_weight: Any, y: np.ndarray) -> np.ndarray | None:
    return None if sample_weight is None else _check_sample_weight(sample_weight, y)


def _numeric_labels(y: Any) -> np.ndarray:
    return np.asarray(column_or_1d(y, warn=True), dtype=np.float64)


def _targets(y: Any) -> np.ndarray:
    """A regressor's labels: one per row, or rows x targets (a single column is one target)."""
    y = np.asarray(y, dtype=np.float64)
    if y.ndim == 2 and y.shape[1] == 1:
        return y[:, 0]
    if y.ndim not in (1, 2):
        raise ValueError(f"y must be 1-D (one target) or 2-D (rows x targets), not {y.ndim}-D")
    return y


def _query_ids(ids: Any, n_rows: int, name: str) -> np.ndarray:
    ids = np.asarray(ids)
    if ids.shape != (n_rows,):
        raise ValueError(f"{name} must hold one query id per row ({n_rows}), got shape {ids.shape}")
    return ids


def _maybe_margins(base_margin: Any, n_rows: int) -> pl.Series | None:
    return None if base_margin is None else _margins(base_margin, n_rows)


def _margins(base_margin: Any, n_rows: int) -> pl.Series:
    """Per-row base margins as a column: Float32, or Array(Float32, k) for n x k margins."""
    s = margin_series(base_margin)
    if len(s) != n_rows:
        raise ValueError(f"base_margin has {len(s)} rows; X has {n_rows}")
    return s


def _polars_frame(X: Any, absent: str = "missing") -> tuple[pl.DataFrame, list[str] | None] | None:
    """``X`` as a Polars frame with its feature names, when it is a Polars, pandas or pyarrow
    frame, a Polars or pandas Series (one feature) or a scipy sparse matrix (else None). The
    names are None where scikit-learn sees none: pandas columns that are not all strings
    (such as ``pd.DataFrame(array)``'s 0, 1, ...), an unnamed Series, a sparse matrix (whose
    entries it does not store are missing, or zeros with ``absent="zero"``)."""
    if isinstance(X, pl.DataFrame):
        return X, X.columns
    if isinstance(X, pl.Series):
        # One feature, as XGBoost takes a pandas Series; Polars' default name "" is no name.
        return X.to_frame(), [X.name] if X.name else None
    pa = sys.modules.get("pyarrow")
    if pa is not None and isinstance(X, (pa.Table, pa.RecordBatch)):
        return pl.DataFrame(pl.from_arrow(X)), list(X.schema.names)
    pd = sys.modules.get("pandas")
    if pd is not None and isinstance(X, pd.Series):
        X = X.to_frame()
    if pd is not None and isinstance(X, pd.DataFrame):
        names = _get_feature_names(X)  # a TypeError for names mixing strings and others, as in scikit-learn
        # Sparse columns (SparseDtype) dense, as XGBoost reads them: pyarrow cannot.
        return pl.from_pandas(_inputs.dense_pandas(X)), None if names is None else list(names)
    if _inputs.is_scipy_sparse(X):
        return _inputs.sparse_frame(X, [f"f{i}" for i in range(X.shape[1])], absent), None
    return None


def _named(X: np.ndarray | pl.DataFrame, names: list[str]) -> pl.DataFrame:
    """The columns of ``X``, in order, under ``names``."""
    if isinstance(X, pl.DataFrame):
        return pl.DataFrame([s.alias(n) for s, n in zip(X.get_columns(), names)])
    return pl.DataFrame({n: X[:, i] for i, n in enumerate(names)})


def _check_shape(df: pl.DataFrame) -> None:
    # The arrays' rules (scikit-learn's check_array), for frames.
    if df.height == 0:
        raise ValueError(f"Found array with 0 sample(s) (shape={df.shape}) while a minimum of 1 is required.")
    if df.width == 0:
        raise ValueError(f"Found array with 0 feature(s) (shape={df.shape}) while a minimum of 1 is required.")


def _mismatch_message(unseen: list[str], missing: list[str]) -> str:
    """scikit-learn's message for feature names that differ from ``fit``'s."""

    def listed(names: list[str]) -> str:
        shown = "".join(f"- {n}\n" for n in names[:5])
        return shown + ("- ...\n" if len(names) > 5 else "")

    message = "The feature names should match those that were passed during fit.\n"
    if unseen:
        message += "Feature names unseen at fit time:\n" + listed(unseen)
    if missing:
        message += "Feature names seen at fit time, yet now missing:\n" + listed(missing)
    return message


def _flag(value: Any, name: str) -> bool:
    """A boolean argument, checked: an array there is a misplaced positional argument."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, not {type(value).__name__}")
    return bool(value)


def _split_qid(X: Any) -> tuple[Any, np.ndarray | None]:
    """A frame (Polars, pandas or pyarrow) without its ``qid`` column, and that column's
    values (None when there is none): XGBoost 2.0's special column of query ids."""
    if isinstance(X, pl.DataFrame) and "qid" in X.columns:
        return X.drop("qid"), X.get_column("qid").to_numpy()
    pd = sys.modules.get("pandas")
    if pd is not None and isinstance(X, pd.DataFrame) and "qid" in X.columns:
        return X.drop(columns="qid"), X["qid"].to_numpy()
    pa = sys.modules.get("pyarrow")
    if pa is not None and isinstance(X, (pa.Table, pa.RecordBatch)) and "qid" in X.schema.names:
        return _split_qid(pl.DataFrame(pl.from_arrow(X)))
    return X, None


def _eval_qids(eval_set: Any, eval_qid: Any) -> tuple[Any, Any]:
    """The ranker's evaluation sets without their frames' ``qid`` columns, and ``eval_qid``
    from those columns where the frames have them."""
    if eval_set is None or len(eval_set) == 0:
        return eval_set, eval_qid
    pairs, found = [], []
    for pair in eval_set:
        try:
            X_val, y_val = pair
        except (TypeError, ValueError):
            raise ValueError("eval_set must be a list of (X, y) pairs") from None
        X_val, q = _split_qid(X_val)
        pairs.append((X_val, y_val))
        found.append(q)
    if all(q is None for q in found):
        return pairs, eval_qid
    if eval_qid is not None:
        raise ValueError("Found both the special column `qid` in eval_set's X and eval_qid; give one")
    if any(q is None for q in found):
        raise ValueError("some eval_set frames have a qid column and some not: give every one, or eval_qid")
    return pairs, found


def _per_row(sample_weight: Any, group: np.ndarray, name: str) -> Any:
    """The ranker's weights per row: as given when there is one per row, else one per query
    (XGBRanker's), in the order of the queries (their rows contiguous), scaled to average 1
    over the queries as XGBoost's ranking objectives scale them (by the number of queries
    over their sum), and spread over each query's rows. (One weight per row when every query
    is one row: such queries make no pairs, so the weights change nothing.)"""
    if sample_weight is None or np.ndim(sample_weight) != 1 or len(sample_weight) == len(group):
        return sample_weight
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]]) if len(group) else np.array([], dtype=int)
    if len(sample_weight) != len(starts):
        raise ValueError(
            f"{name} must hold a weight per row ({len(group)}) or per query ({len(starts)}), not {len(sample_weight)}"
        )
    weights = np.asarray(sample_weight, dtype=np.float64)
    total = weights.sum()
    if total > 0:
        weights = weights * (len(weights) / total)
    return np.repeat(weights, np.diff(np.r_[starts, len(group)]))
