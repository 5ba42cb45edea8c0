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
- A pandas or Polars ``Series`` is one feature, named by its name (as XGBoost takes a pandas
  Series); pandas sparse columns are made dense, as XGBoost reads them.
- A scipy sparse matrix becomes Float64 columns ``f0``, ``f1``, ...: its absent entries are
  missing, as XGBoost reads them, or zeros with ``sparse_absent="zero"`` (LightGBM's
  reading). The columns are dense (8 bytes a value, absent ones included).
- Anything else (a numpy array, a list of rows) goes through scikit-learn's validation to a
  float64 array, NaN missing; the features are then named ``f0``, ``f1``, ...

An estimator fitted on a frame with names also predicts from an array with its columns in
``fit``'s order, and one fitted on an array predicts from a frame by position; scikit-learn's
warning is given in both cases.

The estimators follow XGBoost's (``XGBClassifier``, ``XGBRegressor``, ``XGBRanker``): the
training parameters are constructor arguments under XGBoost's names, ``fit`` takes
``eval_set=[(X_val, y_val), ...]`` (one or several evaluation sets), ``sample_weight``,
``base_margin`` and their ``*_eval_set`` lists, and ``early_stopping_rounds`` stops on it;
``evals_result()``, ``best_iteration``, ``best_score``, ``feature_importances_`` and
``get_booster()`` (a ``polars_gbt.Model``) read the fit. A model that stopped early keeps the
trees up to ``best_iteration`` only, so ``predict`` uses the best iteration, as XGBoost's
does.

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

from typing import Any

import numpy as np
import polars as pl
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.preprocessing import LabelEncoder
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, column_or_1d

from polars_gbt import _internal
from polars_gbt._sklearn_base import _GBTBase
from polars_gbt._sklearn_inputs import (
    _eval_qids,
    _flag,
    _maybe_margins,
    _numeric_labels,
    _per_row,
    _query_ids,
    _Rows,
    _split_qid,
    _targets,
    _weights,
)
from polars_gbt._sklearn_params import _ALIASES  # noqa: F401  (the parameters' other names, read from here)


def _fact(objective: Any, fact: str) -> Any:
    """``fact`` of the objective named ``objective`` (``_internal.OBJECTIVES``, read from the
    objectives' descriptors); None for a name that is no objective (the trainer rejects it)."""
    return _internal.OBJECTIVES.get(objective, {}).get(fact) if isinstance(objective, str) else None


def _fitted_by(estimator: str) -> list[str]:
    """The objectives the estimator named ``estimator`` fits."""
    return [name for name, facts in _internal.OBJECTIVES.items() if facts["estimator"] == estimator]


_FIT_DOC = """

        ``eval_set`` is a list of ``(X, y)`` pairs, as in XGBoost: each is scored after every
        round with ``eval_metric`` (``evals_result()``, under ``validation_0``, ``validation_1``,
        ...), and ``early_stopping_rounds`` watches the last. ``sample_weight_eval_set`` and
        ``base_margin_eval_set`` are lists with one entry for each. ``verbose`` prints the
        evaluation log to stderr (``True``: every round, an integer ``n``: every ``n`` rounds). ``xgb_model`` (a fitted estimator, a ``polars_gbt.Model``,
        its bytes or a path) is continued: its trees come first, ``n_estimators`` new ones
        after (see the user guide's continued training)."""


class GBTRegressor(RegressorMixin, _GBTBase):
    """Gradient-boosted trees for regression: ``objective`` ``reg:squarederror`` unless set
    (any regression objective of the user guide: ``reg:quantileerror``, ``count:poisson``,
    ``reg:tweedie``, ...).

    Examples
    --------
    >>> import numpy as np
    >>> from polars_gbt.sklearn import GBTRegressor
    >>> X = np.arange(200, dtype=float).reshape(-1, 1); y = (X[:, 0] > 100).astype(float)
    >>> GBTRegressor(n_estimators=20).fit(X, y).predict([[10.0], [150.0]]).round(2)
    array([0., 1.])

    Early stopping on a validation set, as in XGBoost:

    >>> reg = GBTRegressor(n_estimators=500, early_stopping_rounds=5, learning_rate=0.1)
    >>> reg = reg.fit(X[::2], y[::2], eval_set=[(X[1::2], y[1::2])], verbose=False)
    >>> reg.best_iteration < 499, list(reg.evals_result()["validation_0"])
    (True, ['rmse'])
    """

    def fit(
        self,
        X: Any,
        y: Any,
        sample_weight: Any = None,
        base_margin: Any = None,
        *,
        eval_set: Any = None,
        verbose: bool | int = True,
        sample_weight_eval_set: Any = None,
        base_margin_eval_set: Any = None,
        xgb_model: Any = None,
    ) -> GBTRegressor:
        df, y = self._fit_input(X, y, y_numeric=True, multi_output=True)
        y = _targets(y)
        valid = self._eval_rows(eval_set, sample_weight_eval_set, base_margin_eval_set, _targets)
        train = _Rows(df, y, _weights(sample_weight, y), _maybe_margins(base_margin, df.height), None)
        objective = self.objective or "reg:squarederror"
        self._fit_model(train, valid, verbose, xgb_model, objective=objective, link="reg:squarederror")
        return self

    fit.__doc__ = (
        "Fit on ``X`` and ``y`` (2-D: several targets, one output each, as XGBoost's)." + _FIT_DOC
    )

    def predict(
        self,
        X: Any,
        base_margin: Any = None,
        pred_contribs: bool = False,
        pred_interactions: bool = False,
        iteration_range: tuple[int, int] | None = None,
        *,
        output_margin: bool = False,
        validate_features: bool = True,
    ) -> np.ndarray:
        """Predictions; ``base_margin`` (one per row) replaces the base score, as in XGBoost.
        ``output_margin=True`` gives the margins (before the objective's link, as XGBoost's).
        ``pred_contribs=True`` (``pred_interactions=True``) gives SHAP (interaction) values
        instead (see ``contributions``). ``iteration_range=(start, end)`` uses those
        boosting rounds' trees only."""
        if pred_contribs or pred_interactions:
            return self.contributions(X, base_margin, interactions=pred_interactions)
        output = "margin" if _flag(output_margin, "output_margin") else "value"
        return self._predict_raw(X, output, base_margin, iteration_range, validate_features).astype(np.float64)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # A 2-D y fits several targets (one output each).
        tags.target_tags.multi_output = True
        return tags


class GBTClassifier(ClassifierMixin, _GBTBase):
    """Gradient-boosted trees for classification: ``binary:logistic`` for two classes,
    ``multi:softprob`` for more (``objective="multi:softmax"`` is kept, as in XGBoost, and
    then has no ``predict_proba``).

    Examples
    --------
    >>> import numpy as np
    >>> from polars_gbt.sklearn import GBTClassifier
    >>> X = np.arange(200, dtype=float).reshape(-1, 1); y = np.where(X[:, 0] > 100, "big", "small")
    >>> GBTClassifier(n_estimators=20).fit(X, y).predict([[10.0], [150.0]])
    array(['small', 'big'], dtype='<U5')
    """

    def fit(
        self,
        X: Any,
        y: Any,
        sample_weight: Any = None,
        base_margin: Any = None,
        *,
        eval_set: Any = None,
        verbose: bool | int = True,
        sample_weight_eval_set: Any = None,
        base_margin_eval_set: Any = None,
        xgb_model: Any = None,
    ) -> GBTClassifier:
        df, y = self._fit_input(X, y, y_numeric=False, multi_output=True)
        check_classification_targets(y)
        if np.ndim(y) == 2 and y.shape[1] > 1:
            return self._fit_multi_label(df, y, sample_weight, base_margin, eval_set, verbose,
                                         sample_weight_eval_set, base_margin_eval_set, xgb_model)
        y = column_or_1d(y, warn=True)
        self.n_labels_ = None
        encoder = LabelEncoder().fit(y)
        self.classes_ = encoder.classes_
        self.n_classes_ = len(self.classes_)
        codes = encoder.transform(y)

        def label(y_val: Any) -> np.ndarray:
            y_val = column_or_1d(y_val, warn=True)
            unseen = np.setdiff1d(y_val, self.classes_)
            if len(unseen):
                raise ValueError(f"eval_set's y has labels the training y lacks: {unseen[:5].tolist()}")
            return encoder.transform(y_val)

        valid = self._eval_rows(eval_set, sample_weight_eval_set, base_margin_eval_set, label)
        objective = self.objective or "binary:logistic"
        extra, link = {}, None
        if callable(objective):
            # A user's objective: the link the probabilities come through, as XGBoost's classifier.
            link = "multi:softprob" if self.n_classes_ > 2 else "binary:logistic"
            if self.n_classes_ > 2:
                extra["num_class"] = self.n_classes_
        elif self.n_classes_ > 2 or _fact(objective, "multiclass"):
            # XGBoost's rule: more than two classes take multi:softprob unless another multiclass
            # objective (multi:softmax) is asked.
            objective = objective if _fact(objective, "multiclass") else "multi:softprob"
            extra["num_class"] = max(self.n_classes_, 2)
        train = _Rows(df, codes, _weights(sample_weight, codes), _maybe_margins(base_margin, df.height), None)
        self._fit_model(train, valid, verbose, xgb_model, objective=objective, link=link, **extra)
        return self

    fit.__doc__ = (
        "Fit on ``X`` and class labels ``y`` (any labels; or a 2-D 0/1 indicator, one column per "
        "label: multi-label, one binary:logistic output per label, as XGBoost's)." + _FIT_DOC
    )

    def _fit_multi_label(
        self,
        df: pl.DataFrame,
        y: np.ndarray,
        sample_weight: Any,
        base_margin: Any,
        eval_set: Any,
        verbose: bool | int,
        sample_weight_eval_set: Any,
        base_margin_eval_set: Any,
        xgb_model: Any,
    ) -> GBTClassifier:
        """A 2-D indicator ``y``: one ``binary:logistic`` output per label, as XGBoost fits it
        (``classes_`` is ``[0, 1]``; ``predict`` gives rows x labels of 0 and 1)."""
        y = np.asarray(y)
        values = np.unique(y)
        if not np.isin(values, [0, 1]).all():
            raise ValueError(f"a 2-D y is a multi-label indicator of 0 and 1, not values such as {values[:5].tolist()}")
        self.classes_ = np.array([0, 1])
        self.n_classes_ = 2
        self.n_labels_ = y.shape[1]

        def labels(y_val: Any) -> np.ndarray:
            y_val = np.asarray(y_val, dtype=np.float64)
            if y_val.ndim != 2 or y_val.shape[1] != y.shape[1]:
                raise ValueError(f"eval_set's y must have the {y.shape[1]} label columns of y, not shape {y_val.shape}")
            return y_val

        codes = y.astype(np.float64)
        valid = self._eval_rows(eval_set, sample_weight_eval_set, base_margin_eval_set, labels)
        objective = self.objective or "binary:logistic"
        if callable(objective) or _fact(objective, "estimator") != "GBTClassifier" or _fact(objective, "multiclass"):
            raise ValueError(f"a multi-label y fits one binary objective per label (binary:logistic), not {objective!r}")
        train = _Rows(df, codes, _weights(sample_weight, codes), _maybe_margins(base_margin, df.height), None)
        self._fit_model(train, valid, verbose, xgb_model, objective=objective)
        return self

    def _multi_label(self) -> bool:
        return getattr(self, "n_labels_", None) is not None

    def predict_proba(
        self,
        X: Any,
        base_margin: Any = None,
        iteration_range: tuple[int, int] | None = None,
        *,
        validate_features: bool = True,
    ) -> np.ndarray:
        """Class probabilities; ``base_margin`` (one per row, or rows x classes for more than
        two classes) replaces the base score, as in XGBoost. ``iteration_range=(start, end)``
        uses those boosting rounds' trees only. For a multi-label fit: rows x labels, each the
        probability of its label, as XGBoost's."""
        check_is_fitted(self, "model_")
        if _fact(getattr(self, "objective_", None), "predicts_classes"):
            raise ValueError(f"{self.objective_} does not support `predict_proba`; use multi:softprob instead")
        p = self._predict_raw(X, "value", base_margin, iteration_range, validate_features).astype(np.float64)
        if self._multi_label():
            return p
        if len(self.classes_) == 1:
            return np.ones((len(p), 1))
        if p.ndim == 1:
            p = np.column_stack([1.0 - p, p])
        return p / p.sum(axis=1, keepdims=True)

    def predict(
        self,
        X: Any,
        base_margin: Any = None,
        pred_contribs: bool = False,
        pred_interactions: bool = False,
        iteration_range: tuple[int, int] | None = None,
        *,
        output_margin: bool = False,
        validate_features: bool = True,
    ) -> np.ndarray:
        """Class labels; ``output_margin=True`` gives the margins instead (one per row, or
        rows x classes, as XGBoost's); ``pred_contribs=True`` (``pred_interactions=True``)
        gives SHAP (interaction) values (see ``contributions``). ``iteration_range=(start,
        end)`` uses those boosting rounds' trees only. For a multi-label fit: rows x labels
        of 0 and 1."""
        if pred_contribs or pred_interactions:
            return self.contributions(X, base_margin, interactions=pred_interactions)
        check_is_fitted(self, "model_")
        if _flag(output_margin, "output_margin"):
            return self._predict_raw(X, "margin", base_margin, iteration_range, validate_features).astype(np.float64)
        if _fact(getattr(self, "objective_", None), "predicts_classes"):
            classes = self._predict_raw(X, "class", base_margin, iteration_range, validate_features)
            return self.classes_[classes.astype(np.int64)]
        p = self.predict_proba(X, base_margin, iteration_range, validate_features=validate_features)
        if self._multi_label():
            return self.classes_[(p > 0.5).astype(np.int64)]
        return self.classes_[np.argmax(p, axis=1)]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # A 2-D indicator y fits one binary output per label, as XGBoost's classifier.
        tags.classifier_tags.multi_label = True
        return tags


class GBTRanker(_GBTBase):
    """Learning to rank: ``objective`` ``rank:ndcg`` (LambdaMART) unless set
    (``rank:map``, ``rank:pairwise``). ``fit(X, y, group=...)`` takes the query id of each row (rows of a
    query contiguous); ``qid=`` is the same, under XGBoost's name. ``predict`` gives scores
    to sort by.

    Examples
    --------
    >>> import numpy as np
    >>> from polars_gbt.sklearn import GBTRanker
    >>> X = np.tile(np.arange(5.0), 20).reshape(-1, 1); y = X[:, 0].copy()
    >>> r = GBTRanker(n_estimators=10).fit(X, y, group=np.repeat(np.arange(20), 5))
    >>> np.argsort(-r.predict(X[:5]))
    array([4, 3, 2, 1, 0])
    """

    def fit(
        self,
        X: Any,
        y: Any,
        group: Any = None,
        sample_weight: Any = None,
        base_margin: Any = None,
        *,
        qid: Any = None,
        eval_set: Any = None,
        eval_qid: Any = None,
        verbose: bool | int = True,
        sample_weight_eval_set: Any = None,
        base_margin_eval_set: Any = None,
        xgb_model: Any = None,
    ) -> GBTRanker:
        # XGBoost 2.0's special column: a frame's qid column holds the query ids.
        X, in_x = _split_qid(X)
        if in_x is not None:
            if group is not None or qid is not None:
                raise ValueError("Found both the special column `qid` in `X` and the `qid` (or `group`) argument; give one")
            qid = in_x
        eval_set, eval_qid = _eval_qids(eval_set, eval_qid)
        df, y = self._fit_input(X, y, y_numeric=True)
        if (group is None) == (qid is None):
            raise ValueError("give the query id of each row as group= (or qid=, XGBoost's name), once")
        group = _query_ids(qid if group is None else group, df.height, "group")
        # A weight per row, or per query as XGBRanker takes them (spread over the query's rows).
        sample_weight = _per_row(sample_weight, group, "sample_weight")
        if sample_weight_eval_set is not None and eval_qid is not None and len(sample_weight_eval_set) == len(eval_qid):
            sample_weight_eval_set = [
                _per_row(w, np.asarray(q), f"sample_weight_eval_set[{i}]")
                for i, (w, q) in enumerate(zip(sample_weight_eval_set, eval_qid))
            ]
        valid = self._eval_rows(eval_set, sample_weight_eval_set, base_margin_eval_set, _numeric_labels, eval_qid)
        if any(v.group is None for v in valid):
            raise ValueError("eval_qid, the query id of each eval_set row, is needed with eval_set")
        train = _Rows(df, y, _weights(sample_weight, y), _maybe_margins(base_margin, df.height), group)
        if callable(self.objective):
            *others, last = _fitted_by("GBTRanker")
            raise ValueError(
                f"GBTRanker trains with {', '.join(others)} or {last}; a callable objective is for the other estimators"
            )
        self._fit_model(train, valid, verbose, xgb_model, objective=self.objective or "rank:ndcg")
        return self

    fit.__doc__ = (
        "Fit on ``X``, relevance labels ``y`` and query ids ``group`` (or ``qid``, or a ``qid`` "
        "column of a frame ``X``, as XGBoost's). ``sample_weight`` holds a weight per row, or "
        "one per query (XGBRanker's), in the order of the queries; a length equal to the rows is "
        "read per row (the two readings then agree: every query is one row)."
        + _FIT_DOC.replace(
            "lists with one entry for each.",
            "lists with one entry for each; so is ``eval_qid``, their query ids (or each eval "
            "frame's ``qid`` column).",
        )
    )

    def predict(
        self,
        X: Any,
        base_margin: Any = None,
        pred_contribs: bool = False,
        pred_interactions: bool = False,
        iteration_range: tuple[int, int] | None = None,
        *,
        output_margin: bool = False,
        validate_features: bool = True,
    ) -> np.ndarray:
        """Scores to sort by; ``output_margin=True`` gives the margins (the same for the
        ranking objectives); ``pred_contribs=True`` (``pred_interactions=True``) gives SHAP
        (interaction) values instead (see ``contributions``). ``iteration_range=(start, end)``
        uses those boosting rounds' trees only. A frame's ``qid`` column is dropped, as
        XGBoost's ranker drops it."""
        if pred_contribs or pred_interactions:
            return self.contributions(X, base_margin, interactions=pred_interactions)
        output = "margin" if _flag(output_margin, "output_margin") else "value"
        return self._predict_raw(X, output, base_margin, iteration_range, validate_features).astype(np.float64)

    def _feature_frame(self, X: Any, validate_features: bool = True) -> pl.DataFrame:
        # A frame's qid column holds query ids, not a feature (XGBoost 2.0's special column).
        return super()._feature_frame(_split_qid(X)[0], validate_features)
