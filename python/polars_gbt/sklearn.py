"""scikit-learn estimators over the Polars expressions: ``GBTClassifier``, ``GBTRegressor``
and ``GBTRanker``. They work in ``Pipeline``, ``GridSearchCV`` and ``cross_val_score``.

``X`` is either a data frame or an array:

- A Polars ``DataFrame``, a pandas ``DataFrame`` or a pyarrow ``Table`` / ``RecordBatch`` is
  used as it is, each column a feature: pandas and pyarrow frames become Polars frames
  (``pl.from_pandas``, ``pl.from_arrow``) and the fit is the one ``pl.col(features).gbt.fit``
  makes, with the frame's column names as the model's feature names. Every dtype the
  expressions read is read the same way: ``String``, ``Categorical`` and ``Enum`` columns
  (pandas ``category`` and string columns, Arrow dictionaries and strings) are categorical
  features, temporal columns their physical values, and nulls (and NaN) are missing.
  ``feature_names_in_`` holds the column names (when they are all strings), and ``predict``
  on a frame picks the columns by name, in any order (where scikit-learn's own estimators
  refuse a reordered frame); a column seen in ``fit`` but missing is an error naming it, and
  so is a column ``fit`` did not see, with scikit-learn's message.
- Anything else (a numpy array, a list of rows) goes through scikit-learn's validation to a
  float64 array, NaN missing; the features are then named ``f0``, ``f1``, ...

An estimator fitted on a frame with names also predicts from an array with its columns in
``fit``'s order, and one fitted on an array predicts from a frame by position; scikit-learn's
warning is given in both cases.

Examples
--------
>>> import polars as pl
>>> from polars_gbt.sklearn import GBTRegressor
>>> X = pl.DataFrame({"size": [1.0, None, 3.0, 4.0] * 25, "color": ["red", "blue", None, "red"] * 25})
>>> reg = GBTRegressor(n_estimators=20).fit(X, [1.0, 5.0, 9.0, 4.0] * 25)
>>> reg.feature_names_in_
array(['size', 'color'], dtype=object)
>>> reg.predict(X.head(4).select("color", "size")).round(1)
array([1., 5., 9., 4.])
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

import numpy as np
import polars as pl
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.preprocessing import LabelEncoder
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, _get_feature_names, check_is_fitted, validate_data

import polars_gbt._namespace  # noqa: F401  (registers the gbt namespace)
from polars_gbt._errors import translated
from polars_gbt._model import margin_series, run_interruptibly

# Columns the estimators put beside the features for the fit's other inputs.
_TARGET, _WEIGHT, _GROUP, _MARGIN = (f"__polars_gbt_{n}" for n in ("target", "weight", "group", "margin"))
_RESERVED = (_TARGET, _WEIGHT, _GROUP, _MARGIN)


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

    def _features(self) -> list[str]:
        """The model's feature names: the frame's column names, or f0, f1, ... by position."""
        if hasattr(self, "feature_names_in_"):
            return list(self.feature_names_in_)
        return [f"f{i}" for i in range(self.n_features_in_)]

    def _fit_input(self, X: Any, y: Any, *, y_numeric: bool) -> tuple[pl.DataFrame, np.ndarray]:
        """The features as a Polars frame named as the model's features, and ``y`` validated;
        sets ``n_features_in_`` and ``feature_names_in_``."""
        frame = _polars_frame(X)
        if frame is None:
            X, y = validate_data(self, X, y, ensure_all_finite="allow-nan", dtype=np.float64, y_numeric=y_numeric)
            df = _named(X, self._features())
        else:
            df, names = frame
            y = validate_data(self, "no_validation", y, y_numeric=y_numeric)
            _check_shape(df)
            if len(y) != df.height:
                raise ValueError(f"Found input variables with inconsistent numbers of samples: [{df.height}, {len(y)}]")
            self.n_features_in_ = df.width
            if names is not None:
                self.feature_names_in_ = np.asarray(names, dtype=object)
            elif hasattr(self, "feature_names_in_"):
                del self.feature_names_in_
            if names is None:
                df = _named(df, self._features())
        clash = [c for c in df.columns if c in _RESERVED]
        if clash:
            raise ValueError(f"column name {clash[0]!r} is reserved for the estimator's own inputs; rename it")
        return df, y

    def _fit_model(
        self,
        df: pl.DataFrame,
        y: np.ndarray,
        sample_weight: Any,
        group: Any = None,
        base_margin: Any = None,
        **objective: Any,
    ) -> None:
        # The features by position: pl.col would read a name such as "*" or "^a.*$" as a pattern.
        features = pl.nth(range(df.width))
        extra: dict[str, Any] = {}
        inputs = [pl.Series(_TARGET, y, dtype=pl.Float64)]
        if group is not None:
            inputs.append(pl.Series(_GROUP, group).cast(pl.Int64))
            extra["group"] = _GROUP
        if sample_weight is not None:
            inputs.append(pl.Series(_WEIGHT, _check_sample_weight(sample_weight, y), dtype=pl.Float64))
            extra["weight"] = _WEIGHT
        if base_margin is not None:
            inputs.append(_margins(base_margin, df.height).alias(_MARGIN))
            extra["base_margin"] = _MARGIN
        df = df.with_columns(inputs)
        fit = features.gbt.fit(_TARGET, **extra, **objective, **self.get_params())
        with translated():
            self.model_ = run_interruptibly(lambda: df.select(fit).item())

    def _predict_input(self, X: Any) -> pl.DataFrame:
        """``X`` as a Polars frame of the model's features: a frame's columns by name (or by
        position where ``fit`` or ``X`` had no names), an array's by position."""
        check_is_fitted(self, "model_")
        features = self._features()
        frame = _polars_frame(X)
        if frame is None:
            X = validate_data(self, X, reset=False, ensure_all_finite="allow-nan", dtype=np.float64)
            return _named(X, features)
        df, names = frame
        _check_shape(df)
        fitted = getattr(self, "feature_names_in_", None)
        if names is not None and fitted is not None:
            unseen, missing = sorted(set(names) - set(fitted)), sorted(set(fitted) - set(names))
            if unseen or missing:
                raise ValueError(_mismatch_message(unseen, missing))
            return pl.DataFrame([df.get_column(f) for f in features])
        name = type(self).__name__
        if names is not None:
            warnings.warn(f"X has feature names, but {name} was fitted without feature names", UserWarning)
        elif fitted is not None:
            warnings.warn(f"X does not have valid feature names, but {name} was fitted with feature names", UserWarning)
        if df.width != self.n_features_in_:
            raise ValueError(f"X has {df.width} features, but {name} is expecting {self.n_features_in_} features as input.")
        return _named(df, features)

    def contributions(self, X: Any, base_margin: Any = None, interactions: bool = False) -> np.ndarray:
        """SHAP values (exact TreeSHAP) in the margin's space, XGBoost's ``pred_contribs``
        layout: ``(n_samples, n_features + 1)``, the bias (expected margin) last, each row
        summing to its margin; ``(n_samples, n_classes, n_features + 1)`` for more than two
        classes. ``interactions=True``: SHAP interaction values, XGBoost's
        ``pred_interactions`` layout, a ``(n_features + 1)`` square per row (and class)."""
        return self._predict_raw(X, "interaction" if interactions else "contrib", base_margin).astype(np.float64)

    def _predict_raw(self, X: Any, output: str, base_margin: Any = None) -> np.ndarray:
        df = self._predict_input(X)
        features, margin = pl.nth(range(df.width)), None
        if base_margin is not None:
            df, margin = df.with_columns(_margins(base_margin, df.height).alias(_MARGIN)), _MARGIN
        predict = features.gbt.predict(self.model_, output=output, base_margin=margin)
        with translated():
            out = df.select(predict.alias("prediction")).to_series()
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
        df, y = self._fit_input(X, y, y_numeric=True)
        self._fit_model(df, y, sample_weight, base_margin=base_margin, objective="reg:squarederror")
        return self

    def predict(
        self, X: Any, base_margin: Any = None, pred_contribs: bool = False, pred_interactions: bool = False
    ) -> np.ndarray:
        """Predictions; ``base_margin`` (one per row) replaces the base score, as in XGBoost.
        ``pred_contribs=True`` (``pred_interactions=True``) gives SHAP (interaction) values
        instead (see ``contributions``)."""
        if pred_contribs or pred_interactions:
            return self.contributions(X, base_margin, interactions=pred_interactions)
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
        df, y = self._fit_input(X, y, y_numeric=False)
        check_classification_targets(y)
        encoder = LabelEncoder().fit(y)
        self.classes_ = encoder.classes_
        codes = encoder.transform(y)
        if len(self.classes_) > 2:
            objective = {"objective": "multi:softprob", "num_class": len(self.classes_)}
        else:
            objective = {"objective": "binary:logistic"}
        self._fit_model(df, codes, sample_weight, base_margin=base_margin, **objective)
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

    def predict(
        self, X: Any, base_margin: Any = None, pred_contribs: bool = False, pred_interactions: bool = False
    ) -> np.ndarray:
        """Class labels; ``pred_contribs=True`` (``pred_interactions=True``) gives SHAP
        (interaction) values instead (see ``contributions``)."""
        if pred_contribs or pred_interactions:
            return self.contributions(X, base_margin, interactions=pred_interactions)
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
        df, y = self._fit_input(X, y, y_numeric=True)
        group = np.asarray(group)
        if group.shape != (df.height,):
            raise ValueError(f"group must hold one query id per row ({df.height}), got shape {group.shape}")
        self._fit_model(df, y, sample_weight, group=group, base_margin=base_margin, objective="rank:ndcg")
        return self

    def predict(
        self, X: Any, base_margin: Any = None, pred_contribs: bool = False, pred_interactions: bool = False
    ) -> np.ndarray:
        """Scores to sort by; ``pred_contribs=True`` (``pred_interactions=True``) gives SHAP
        (interaction) values instead (see ``contributions``)."""
        if pred_contribs or pred_interactions:
            return self.contributions(X, base_margin, interactions=pred_interactions)
        return self._predict_raw(X, "value", base_margin).astype(np.float64)


def _margins(base_margin: Any, n_rows: int) -> pl.Series:
    """Per-row base margins as a column: Float32, or Array(Float32, k) for n x k margins."""
    s = margin_series(base_margin)
    if len(s) != n_rows:
        raise ValueError(f"base_margin has {len(s)} rows; X has {n_rows}")
    return s


def _polars_frame(X: Any) -> tuple[pl.DataFrame, list[str] | None] | None:
    """``X`` as a Polars frame with its feature names, when it is a Polars, pandas or pyarrow
    frame (else None). The names are None where scikit-learn sees none: pandas columns that
    are not all strings (such as ``pd.DataFrame(array)``'s 0, 1, ...)."""
    if isinstance(X, pl.DataFrame):
        return X, X.columns
    pa = sys.modules.get("pyarrow")
    if pa is not None and isinstance(X, (pa.Table, pa.RecordBatch)):
        return pl.DataFrame(pl.from_arrow(X)), list(X.schema.names)
    pd = sys.modules.get("pandas")
    if pd is not None and isinstance(X, pd.DataFrame):
        names = _get_feature_names(X)  # a TypeError for names mixing strings and others, as in scikit-learn
        return pl.from_pandas(X), None if names is None else list(names)
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
