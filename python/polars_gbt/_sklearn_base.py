"""``_GBTBase``, the scikit-learn estimators' shared base: the fit, the predictions and the
readers of the fitted model."""

from __future__ import annotations

import json
import warnings
from typing import Any, Callable

import numpy as np
import polars as pl
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

import polars_gbt._namespace  # noqa: F401  (registers the gbt namespace)
from polars_gbt import _categorical, _custom
from polars_gbt._errors import translated
from polars_gbt._model import Model, run_interruptibly
from polars_gbt._sklearn_inputs import (
    _EVAL,
    _GROUP,
    _MARGIN,
    _RESERVED,
    _TARGET,
    _WEIGHT,
    _check_shape,
    _margins,
    _mismatch_message,
    _named,
    _polars_frame,
    _query_ids,
    _Rows,
    _with_inputs,
)
from polars_gbt._sklearn_params import _GBTParams, _warn_not_sent
from polars_gbt._sklearn_persistence import _PersistenceMixin

_IMPORTANCE_TYPES = ("weight", "gain", "cover", "total_gain", "total_cover")


class _GBTBase(_PersistenceMixin, _GBTParams):
    """What the estimators share beyond their parameters (``_GBTParams``) and model files
    (``_PersistenceMixin``): the fit (the features, the evaluation sets, the plugin's call),
    the predictions, and the readers of the fitted model (``get_booster``,
    ``best_iteration``, ``feature_importances_``, ...)."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.sparse = True
        return tags

    def get_booster(self) -> Model:
        """The fitted model as a ``polars_gbt.Model`` (XGBoost's ``get_booster``)."""
        check_is_fitted(self, "model_")
        return Model.from_bytes(self.model_)

    @property
    def best_iteration(self) -> int:
        """The round (0-based) with the best validation score, with ``early_stopping_rounds``;
        an AttributeError otherwise, as in XGBoost. The model keeps the trees up to this round
        only, so predictions use it."""
        best = self.get_booster().best_iteration
        if best is None:
            raise AttributeError("`best_iteration` is only defined when early stopping is used.")
        return best

    @property
    def best_score(self) -> float:
        """The last evaluation metric's value at ``best_iteration`` (the score early stopping
        watched); an AttributeError without early stopping, as in XGBoost."""
        best = self.best_iteration
        metrics = self.evals_result()["validation_0"]
        return float(list(metrics.values())[-1][best])

    def evals_result(self) -> dict[str, dict[str, list[float]]]:
        """The evaluation log of ``eval_set`` in XGBoost's shape:
        ``{"validation_0": {"rmse": [...], ...}}``, one value per round."""
        check_is_fitted(self, "model_")
        if getattr(self, "evals_result_", None) is None:
            raise ValueError("No evaluation result, `eval_set` is not used during training.")
        return self.evals_result_

    @property
    def feature_importances_(self) -> np.ndarray:
        """Importance of each feature in ``fit``'s order, summing to 1 (all zeros for a model
        without splits), as XGBoost computes it: ``importance_type`` (default ``"gain"``, the
        mean gain of the feature's splits) divided by its sum over the features."""
        model = self.get_booster()
        kind = self.importance_type or "gain"
        if kind not in _IMPORTANCE_TYPES:
            raise ValueError(f"importance_type must be one of {', '.join(_IMPORTANCE_TYPES)}, not {kind!r}")
        table = model.feature_importance(kind)
        score = dict(zip(table["feature"].to_list(), table[kind].to_list()))
        values = np.array([score.get(f, 0.0) for f in model.feature_names], dtype=np.float32)
        total = values.sum()
        return values if total == 0 else values / total

    @property
    def intercept_(self) -> np.ndarray:
        """The base score, as XGBoost's ``intercept_``: float32, one value per output (shape
        ``(1,)``, or ``(n_classes,)``, ``(n_targets,)``), in the objective's output space (a
        probability for ``binary:logistic``), as ``base_score`` is given. Rows start from its
        margin (see ``get_booster().to_xgboost_json()``, whose ``base_score`` it is)."""
        check_is_fitted(self, "model_")
        doc = json.loads(self.get_booster().to_xgboost_json())
        return np.array(json.loads(doc["learner"]["learner_model_param"]["base_score"]), dtype=np.float32).reshape(-1)

    def apply(self, X: Any, iteration_range: tuple[int, int] | None = None) -> np.ndarray:
        """The leaf each row reaches in each tree, as XGBoost's ``apply``: ``(n_samples,
        n_trees)`` node indices (a tree's nodes numbered as ``trees_to_dataframe``'s ``Node``;
        for more than two classes the trees of a round are consecutive, one per class; a
        vector-leaf model has one tree a round)."""
        return self._predict_raw(X, "leaf", None, iteration_range).astype(np.int32)

    def _features(self) -> list[str]:
        """The model's feature names: the frame's column names, or f0, f1, ... by position."""
        if hasattr(self, "feature_names_in_"):
            return list(self.feature_names_in_)
        return [f"f{i}" for i in range(self.n_features_in_)]

    def _fit_input(
        self, X: Any, y: Any, *, y_numeric: bool, multi_output: bool = False
    ) -> tuple[pl.DataFrame, np.ndarray]:
        """The features as a Polars frame named as the model's features, and ``y`` validated;
        sets ``n_features_in_`` and ``feature_names_in_``."""
        frame = _polars_frame(X, self.sparse_absent)
        if frame is None:
            X, y = validate_data(
                self,
                X,
                y,
                ensure_all_finite="allow-nan",
                dtype=np.float64,
                y_numeric=y_numeric,
                multi_output=multi_output,
            )
            df = _named(X, self._features())
        else:
            df, names = frame
            y = validate_data(self, "no_validation", y, y_numeric=y_numeric, multi_output=multi_output)
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
        train: _Rows,
        valid: list[_Rows],
        verbose: bool | int,
        xgb_model: Any,
        link: str | None = None,
        **objective: Any,
    ) -> None:
        """Fits ``train``; each set of ``valid`` goes below the training rows, marked by an
        ``eval_set`` mask of its own (named ``validation_i``, as XGBoost names them) that holds
        it out and evaluates it every round. ``xgb_model`` (an estimator, a ``Model``, its
        bytes or a path) is continued, as XGBoost's. A callable ``objective`` is called as
        scikit-learn's XGBoost calls it, ``objective(y_true, y_pred) -> (grad, hess)``, and
        the model predicts through ``link``."""
        weighted = train.weight is not None or any(v.weight is not None for v in valid)
        frame = _with_inputs(train, weighted)
        extra: dict[str, Any] = {}
        if valid:
            if any((train.margin is None) != (v.margin is None) for v in valid):
                raise ValueError(
                    "base_margin and base_margin_eval_set go together: a model fit with margins adds no "
                    "base score of its own, so the evaluation rows need margins too (and only then)"
                )
            markers = [f"{_EVAL}_{i}" for i in range(len(valid))]

            def marked(part: pl.DataFrame, which: int | None) -> pl.DataFrame:
                return part.with_columns(pl.lit(i == which).alias(m) for i, m in enumerate(markers))

            frame = pl.concat(
                [marked(frame, None)] + [marked(_with_inputs(v, weighted), i) for i, v in enumerate(valid)],
                how="vertical_relaxed",
            )
            extra["eval_set"] = {f"validation_{i}": pl.col(m) for i, m in enumerate(markers)}
        for name, column, present in (
            ("group", _GROUP, train.group is not None),
            ("weight", _WEIGHT, weighted),
            ("base_margin", _MARGIN, train.margin is not None),
        ):
            if present:
                extra[name] = column
        _warn_not_sent(self)
        params = self.get_xgb_params() | objective
        if callable(params["objective"]):
            user = params.pop("objective")
            params["obj"] = _sklearn_order(user)
            params["custom_objective"] = _custom.name_of(user)
            params["objective"] = link
        metrics = params.get("eval_metric")
        if callable(metrics) or isinstance(metrics, list):
            listed = metrics if isinstance(metrics, list) else [metrics]
            params["eval_metric"] = [_sklearn_order(m) if callable(m) else m for m in listed]
        if xgb_model is not None:
            params["init_model"] = xgb_model.model_ if isinstance(xgb_model, _GBTBase) else xgb_model
        # The features by position: pl.col would read a name such as "*" or "^a.*$" as a pattern.
        # Errors name the fit's arguments, not the estimator's own column names.
        params["_input_names"] = {"target": "y", "weight": "sample_weight", "group": "group", "base_margin": "base_margin"}
        # Categorical features as their ids (see _categorical).
        frame, params["_categorical_names"] = _categorical.as_ids(frame, train.df.columns)
        fit = pl.nth(range(train.df.width)).gbt.fit(_TARGET, verbose=verbose, **extra, **params)
        with translated():
            self.model_ = run_interruptibly(lambda: frame.select(fit).item())
        self.objective_ = params["objective"]
        self.evals_result_ = None
        if valid:
            self.evals_result_ = {}
            for series in Model.from_bytes(self.model_)._summary["evals_result"]:
                values = [float(v) for v in series["values"]]
                self.evals_result_.setdefault(series["dataset"], {})[series["metric"]] = values

    def _eval_rows(
        self,
        eval_set: Any,
        sample_weight_eval_set: Any,
        base_margin_eval_set: Any,
        label: Callable[[Any], np.ndarray],
        eval_qid: Any = None,
    ) -> list[_Rows]:
        """The evaluation sets of ``eval_set`` (a list of ``(X, y)`` pairs, as in XGBoost)
        with their weights, margins and query ids."""
        per_set = {
            "sample_weight_eval_set": sample_weight_eval_set,
            "base_margin_eval_set": base_margin_eval_set,
            "eval_qid": eval_qid,
        }
        if eval_set is None or len(eval_set) == 0:
            given = [name for name, v in per_set.items() if v is not None]
            if given:
                raise ValueError(f"{given[0]} was given without eval_set")
            return []
        eval_set = list(eval_set)
        for name, v in per_set.items():
            if v is not None and len(v) != len(eval_set):
                raise ValueError(f"{name} must hold one entry per eval_set pair ({len(eval_set)}), not {len(v)}")
        sets = []
        for i, pair in enumerate(eval_set):
            try:
                X_val, y_val = pair
            except (TypeError, ValueError):
                raise ValueError("eval_set must be a list of (X, y) pairs") from None
            df = self._feature_frame(X_val)
            y_val = label(y_val)
            if len(y_val) != df.height:
                raise ValueError(f"eval_set[{i}]'s X has {df.height} rows but its y has {len(y_val)}")
            weight, margin, qid = (None if v is None else v[i] for v in per_set.values())
            if weight is not None:
                weight = _check_sample_weight(weight, y_val)
            if margin is not None:
                margin = _margins(margin, df.height)
            if qid is not None:
                qid = _query_ids(qid, df.height, "eval_qid")
            sets.append(_Rows(df, y_val, weight, margin, qid))
        return sets

    def _predict_input(self, X: Any, validate_features: bool = True) -> pl.DataFrame:
        check_is_fitted(self, "model_")
        return self._feature_frame(X, validate_features)

    def _feature_frame(self, X: Any, validate_features: bool = True) -> pl.DataFrame:
        """``X`` as a Polars frame of the model's features: a frame's columns by name (or by
        position where ``fit`` or ``X`` had no names), an array's by position.
        ``validate_features=False`` (XGBoost's) reads a frame whose names differ from
        ``fit``'s by position, without a word."""
        features = self._features()
        frame = _polars_frame(X, self.sparse_absent)
        if frame is None:
            X = validate_data(self, X, reset=False, ensure_all_finite="allow-nan", dtype=np.float64)
            return _named(X, features)
        df, names = frame
        _check_shape(df)
        fitted = getattr(self, "feature_names_in_", None)
        if not validate_features and df.width == self.n_features_in_:
            if names is None or fitted is None or set(names) != set(fitted):
                return _named(df, features)
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

    def _predict_raw(
        self,
        X: Any,
        output: str,
        base_margin: Any = None,
        iteration_range: tuple[int, int] | None = None,
        validate_features: bool = True,
    ) -> np.ndarray:
        df = self._predict_input(X, validate_features)
        features, margin = pl.nth(range(df.width)), None
        # Categorical features as their ids (see _categorical).
        df, categorical_names = _categorical.as_ids(df, df.columns)
        if base_margin is not None:
            df, margin = df.with_columns(_margins(base_margin, df.height).alias(_MARGIN)), _MARGIN
        # Scored where the model was trained (as XGBoost does), SHAP values included.
        predict = features.gbt.predict(
            self.model_,
            output=output,
            base_margin=margin,
            device=self.device,
            iteration_range=iteration_range,
            _categorical_names=categorical_names,
        )
        with translated():
            out = df.select(predict.alias("prediction")).to_series()
        return np.stack(out.to_list()) if isinstance(out.dtype, pl.Array) else out.to_numpy()


def _sklearn_order(function: Any) -> Any:
    """``function(y_true, y_pred)``, scikit-learn's order (XGBoost's estimators call objectives
    and metrics so), as the trainer calls it: ``(predt, label)``; named as ``function``."""

    def swapped(predt: np.ndarray, label: np.ndarray) -> Any:
        return function(label, predt)

    swapped.__name__ = swapped.__qualname__ = _custom.name_of(function)
    return swapped
