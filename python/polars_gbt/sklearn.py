"""scikit-learn estimators over the Polars expressions: ``GBTClassifier``, ``GBTRegressor``
and ``GBTRanker``. They accept numpy, pandas, Polars or pyarrow inputs (anything scikit-learn's
input validation takes) and work in ``Pipeline``, ``GridSearchCV`` and ``cross_val_score``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.preprocessing import LabelEncoder
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

import polars_gbt._namespace  # noqa: F401  (registers the gbt namespace)
from polars_gbt._model import margin_series, run_interruptibly


class _GBTBase(BaseEstimator):
    """Parameters shared by the estimators; see the user guide for their meaning."""

    def __init__(
        self,
        *,
        n_estimators: int = 100,
        learning_rate: float = 0.3,
        max_depth: int = 6,
        max_leaves: int = 0,
        grow_policy: str = "depthwise",
        max_bin: int = 256,
        reg_lambda: float = 1.0,
        reg_alpha: float = 0.0,
        gamma: float = 0.0,
        min_child_weight: float = 1.0,
        subsample: float = 1.0,
        colsample_bytree: float = 1.0,
        seed: int = 0,
        n_jobs: int = 0,
    ) -> None:
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.max_depth = max_depth
        self.max_leaves = max_leaves
        self.grow_policy = grow_policy
        self.max_bin = max_bin
        self.reg_lambda = reg_lambda
        self.reg_alpha = reg_alpha
        self.gamma = gamma
        self.min_child_weight = min_child_weight
        self.subsample = subsample
        self.colsample_bytree = colsample_bytree
        self.seed = seed
        self.n_jobs = n_jobs

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags

    @staticmethod
    def _frame(X: np.ndarray) -> pl.DataFrame:
        return pl.DataFrame({f"f{i}": X[:, i] for i in range(X.shape[1])})

    def _fit_model(
        self,
        X: np.ndarray,
        y: np.ndarray,
        sample_weight: Any,
        group: Any = None,
        base_margin: Any = None,
        **objective: Any,
    ) -> None:
        df = self._frame(X).with_columns(__y=pl.Series(y, dtype=pl.Float64))
        extra: dict[str, Any] = {}
        if group is not None:
            df = df.with_columns(__q=pl.Series(group).cast(pl.Int64))
            extra["group"] = "__q"
        if sample_weight is not None:
            df = df.with_columns(__w=pl.Series(_check_sample_weight(sample_weight, X), dtype=pl.Float64))
            extra["weight"] = "__w"
        if base_margin is not None:
            df = df.with_columns(_margins(base_margin, X.shape[0]).alias("__m"))
            extra["base_margin"] = "__m"
        features = [f"f{i}" for i in range(X.shape[1])]
        fit = pl.col(features).gbt.fit("__y", **extra, **objective, **self.get_params())
        self.model_ = run_interruptibly(lambda: df.select(fit).item())

    def _predict_raw(self, X: Any, output: str, base_margin: Any = None) -> np.ndarray:
        check_is_fitted(self, "model_")
        X = validate_data(self, X, reset=False, ensure_all_finite="allow-nan", dtype=np.float64)
        features = [f"f{i}" for i in range(X.shape[1])]
        df, margin = self._frame(X), None
        if base_margin is not None:
            df, margin = df.with_columns(_margins(base_margin, X.shape[0]).alias("__m")), "__m"
        out = df.select(pl.col(features).gbt.predict(self.model_, output=output, base_margin=margin))[features[0]]
        return np.stack(out.to_list()) if isinstance(out.dtype, pl.Array) else out.to_numpy()


class GBTRegressor(RegressorMixin, _GBTBase):
    """Gradient-boosted trees for regression (``reg:squarederror``).

    Examples
    --------
    >>> import numpy as np
    >>> from polars_gbt.sklearn import GBTRegressor
    >>> X = np.arange(200, dtype=float).reshape(-1, 1); y = (X[:, 0] > 100).astype(float)
    >>> GBTRegressor(n_estimators=20).fit(X, y).predict([[10.0], [150.0]]).round(2)
    array([0., 1.])
    """

    def fit(self, X: Any, y: Any, sample_weight: Any = None, base_margin: Any = None) -> GBTRegressor:
        X, y = validate_data(self, X, y, ensure_all_finite="allow-nan", dtype=np.float64, y_numeric=True)
        self._fit_model(X, y, sample_weight, base_margin=base_margin, objective="reg:squarederror")
        return self

    def predict(self, X: Any, base_margin: Any = None) -> np.ndarray:
        """Predictions; ``base_margin`` (one per row) replaces the base score, as in XGBoost."""
        return self._predict_raw(X, "value", base_margin).astype(np.float64)


class GBTClassifier(ClassifierMixin, _GBTBase):
    """Gradient-boosted trees for classification (``binary:logistic`` or ``multi:softprob``).

    Examples
    --------
    >>> import numpy as np
    >>> from polars_gbt.sklearn import GBTClassifier
    >>> X = np.arange(200, dtype=float).reshape(-1, 1); y = np.where(X[:, 0] > 100, "big", "small")
    >>> GBTClassifier(n_estimators=20).fit(X, y).predict([[10.0], [150.0]])
    array(['small', 'big'], dtype='<U5')
    """

    def fit(self, X: Any, y: Any, sample_weight: Any = None, base_margin: Any = None) -> GBTClassifier:
        X, y = validate_data(self, X, y, ensure_all_finite="allow-nan", dtype=np.float64)
        check_classification_targets(y)
        encoder = LabelEncoder().fit(y)
        self.classes_ = encoder.classes_
        codes = encoder.transform(y)
        if len(self.classes_) > 2:
            objective = {"objective": "multi:softprob", "num_class": len(self.classes_)}
        else:
            objective = {"objective": "binary:logistic"}
        self._fit_model(X, codes, sample_weight, base_margin=base_margin, **objective)
        return self

    def predict_proba(self, X: Any, base_margin: Any = None) -> np.ndarray:
        """Class probabilities; ``base_margin`` (one per row, or rows x classes for more than
        two classes) replaces the base score, as in XGBoost."""
        check_is_fitted(self, "model_")
        p = self._predict_raw(X, "value", base_margin).astype(np.float64)
        if len(self.classes_) == 1:
            return np.ones((len(p), 1))
        if p.ndim == 1:
            p = np.column_stack([1.0 - p, p])
        return p / p.sum(axis=1, keepdims=True)

    def predict(self, X: Any, base_margin: Any = None) -> np.ndarray:
        p = self.predict_proba(X, base_margin)
        return self.classes_[np.argmax(p, axis=1)]


class GBTRanker(_GBTBase):
    """Learning to rank (``rank:ndcg``, LambdaMART): ``fit(X, y, group=...)`` with the
    query id of each row (rows of a query contiguous); ``predict`` gives scores to sort by.

    Examples
    --------
    >>> import numpy as np
    >>> from polars_gbt.sklearn import GBTRanker
    >>> X = np.tile(np.arange(5.0), 20).reshape(-1, 1); y = X[:, 0].copy()
    >>> r = GBTRanker(n_estimators=10).fit(X, y, group=np.repeat(np.arange(20), 5))
    >>> np.argsort(-r.predict(X[:5]))
    array([4, 3, 2, 1, 0])
    """

    def fit(self, X: Any, y: Any, group: Any, sample_weight: Any = None, base_margin: Any = None) -> GBTRanker:
        X, y = validate_data(self, X, y, ensure_all_finite="allow-nan", dtype=np.float64, y_numeric=True)
        group = np.asarray(group)
        if group.shape != (X.shape[0],):
            raise ValueError(f"group must hold one query id per row ({X.shape[0]}), got shape {group.shape}")
        self._fit_model(X, y, sample_weight, group=group, base_margin=base_margin, objective="rank:ndcg")
        return self

    def predict(self, X: Any, base_margin: Any = None) -> np.ndarray:
        return self._predict_raw(X, "value", base_margin).astype(np.float64)


def _margins(base_margin: Any, n_rows: int) -> pl.Series:
    """Per-row base margins as a column: Float32, or Array(Float32, k) for n x k margins."""
    s = margin_series(base_margin)
    if len(s) != n_rows:
        raise ValueError(f"base_margin has {len(s)} rows; X has {n_rows}")
    return s
