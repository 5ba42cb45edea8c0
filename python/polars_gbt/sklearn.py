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

The estimators follow XGBoost's (``XGBClassifier``, ``XGBRegressor``, ``XGBRanker``): the
training parameters are constructor arguments under XGBoost's names, ``fit`` takes
``eval_set=[(X_val, y_val)]`` (one evaluation set for now), ``sample_weight``,
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

import sys
import warnings
from typing import Any, Callable, NamedTuple

import numpy as np
import polars as pl
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.preprocessing import LabelEncoder
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import (
    _check_sample_weight,
    _get_feature_names,
    check_is_fitted,
    column_or_1d,
    validate_data,
)

import polars_gbt._namespace  # noqa: F401  (registers the gbt namespace)
from polars_gbt import _custom, _internal
from polars_gbt._errors import translated
from polars_gbt._model import Model, margin_series, run_interruptibly

# Columns the estimators put beside the features for the fit's other inputs.
_TARGET, _WEIGHT, _GROUP, _MARGIN, _EVAL = (
    f"__polars_gbt_{n}" for n in ("target", "weight", "group", "margin", "eval")
)
_RESERVED = (_TARGET, _WEIGHT, _GROUP, _MARGIN, _EVAL)

# Constructor parameters that are the estimator's own, not the trainer's.
_WRAPPER_PARAMS = ("importance_type",)
_IMPORTANCE_TYPES = ("weight", "gain", "cover", "total_gain", "total_cover")


def _fact(objective: Any, fact: str) -> Any:
    """``fact`` of the objective named ``objective`` (``_internal.OBJECTIVES``, read from the
    objectives' descriptors); None for a name that is no objective (the trainer rejects it)."""
    return _internal.OBJECTIVES.get(objective, {}).get(fact) if isinstance(objective, str) else None


def _fitted_by(estimator: str) -> list[str]:
    """The objectives the estimator named ``estimator`` fits."""
    return [name for name, facts in _internal.OBJECTIVES.items() if facts["estimator"] == estimator]


class _GBTBase(BaseEstimator):
    """Parameters shared by the estimators: every training parameter of ``gbt.fit`` under
    XGBoost's name, with polars-gbt's default (see the user guide's parameter table).
    ``None`` leaves a parameter to the trainer: ``objective=None`` is the estimator's own
    objective, ``eval_metric=None`` the objective's metric, ``early_stopping_rounds=None`` no
    early stopping. ``tree_method``, ``booster``, ``verbosity`` and ``enable_categorical`` are
    accepted for XGBoost code (checked by the trainer: ``hist`` and ``gbtree`` only;
    categorical columns are always categorical). ``importance_type`` (default ``"gain"``)
    chooses what ``feature_importances_`` measures."""

    def __init__(
        self,
        *,
        n_estimators: int = 100,
        objective: str | None = None,
        learning_rate: float = 0.3,
        max_depth: int = 6,
        max_leaves: int = 0,
        grow_policy: str = "depthwise",
        multi_strategy: str = "one_output_per_tree",
        max_bin: int = 256,
        reg_lambda: float = 1.0,
        reg_alpha: float = 0.0,
        gamma: float = 0.0,
        min_child_weight: float = 1.0,
        max_delta_step: float = 0.0,
        subsample: float = 1.0,
        colsample_bytree: float = 1.0,
        colsample_bylevel: float = 1.0,
        colsample_bynode: float = 1.0,
        base_score: float | None = None,
        random_state: int | np.random.RandomState | np.random.Generator | None = 0,
        n_jobs: int | None = 0,
        eval_metric: str | list[str] | None = None,
        early_stopping_rounds: int | None = None,
        max_cat_to_onehot: int = 4,
        max_cat_threshold: int = 64,
        cat_smooth: float = 10.0,
        cat_l2: float = 10.0,
        min_data_per_group: int = 50,
        huber_slope: float = 1.0,
        scale_pos_weight: float = 1.0,
        quantile_alpha: float | list[float] = 0.5,
        expectile_alpha: float | list[float] | None = None,
        tweedie_variance_power: float = 1.5,
        aft_loss_distribution: str = "normal",
        aft_loss_distribution_scale: float = 1.0,
        lambdarank_pair_method: str = "topk",
        lambdarank_num_pair_per_sample: int | None = None,
        lambdarank_normalization: bool = True,
        lambdarank_score_normalization: bool = True,
        ndcg_exp_gain: bool = True,
        monotone_constraints: dict[str, int] | tuple[int, ...] | list[int] | str | None = None,
        interaction_constraints: list[list[str | int]] | str | None = None,
        feature_weights: dict[str, float] | list[float] | None = None,
        missing: float = np.nan,
        device: str = "cpu",
        n_gpus: int = 1,
        importance_type: str | None = None,
        tree_method: str | None = None,
        booster: str | None = None,
        verbosity: int | None = None,
        enable_categorical: bool | None = None,
    ) -> None:
        self.n_estimators = n_estimators
        self.objective = objective
        self.learning_rate = learning_rate
        self.max_depth = max_depth
        self.max_leaves = max_leaves
        self.grow_policy = grow_policy
        self.multi_strategy = multi_strategy
        self.max_bin = max_bin
        self.reg_lambda = reg_lambda
        self.reg_alpha = reg_alpha
        self.gamma = gamma
        self.min_child_weight = min_child_weight
        self.max_delta_step = max_delta_step
        self.subsample = subsample
        self.colsample_bytree = colsample_bytree
        self.colsample_bylevel = colsample_bylevel
        self.colsample_bynode = colsample_bynode
        self.base_score = base_score
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.eval_metric = eval_metric
        self.early_stopping_rounds = early_stopping_rounds
        self.max_cat_to_onehot = max_cat_to_onehot
        self.max_cat_threshold = max_cat_threshold
        self.cat_smooth = cat_smooth
        self.cat_l2 = cat_l2
        self.min_data_per_group = min_data_per_group
        self.huber_slope = huber_slope
        self.scale_pos_weight = scale_pos_weight
        self.quantile_alpha = quantile_alpha
        self.expectile_alpha = expectile_alpha
        self.tweedie_variance_power = tweedie_variance_power
        self.aft_loss_distribution = aft_loss_distribution
        self.aft_loss_distribution_scale = aft_loss_distribution_scale
        self.lambdarank_pair_method = lambdarank_pair_method
        self.lambdarank_num_pair_per_sample = lambdarank_num_pair_per_sample
        self.lambdarank_normalization = lambdarank_normalization
        self.lambdarank_score_normalization = lambdarank_score_normalization
        self.ndcg_exp_gain = ndcg_exp_gain
        self.monotone_constraints = monotone_constraints
        self.interaction_constraints = interaction_constraints
        self.feature_weights = feature_weights
        self.missing = missing
        self.device = device
        self.n_gpus = n_gpus
        self.importance_type = importance_type
        self.tree_method = tree_method
        self.booster = booster
        self.verbosity = verbosity
        self.enable_categorical = enable_categorical

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags

    def get_xgb_params(self) -> dict[str, Any]:
        """The training parameters ``gbt.fit`` receives (XGBoost's method of the same name):
        every constructor parameter that is set, less ``importance_type``; the objective is
        completed by ``fit`` (``num_class`` for more than two classes)."""
        params = {k: v for k, v in self.get_params().items() if v is not None and k not in _WRAPPER_PARAMS}
        # XGBoost draws a seed from a numpy generator; scikit-learn's "all cores" is -1.
        rs = params.get("random_state")
        if isinstance(rs, np.random.RandomState):
            params["random_state"] = int(rs.randint(np.iinfo(np.int32).max))
        elif isinstance(rs, np.random.Generator):
            params["random_state"] = int(rs.integers(np.iinfo(np.int32).max))
        if isinstance(params.get("n_jobs"), int) and params["n_jobs"] < 0:
            params["n_jobs"] = 0
        if isinstance(params.get("eval_metric"), tuple):
            params["eval_metric"] = list(params["eval_metric"])
        return params

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
        frame = _polars_frame(X)
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

    def _predict_input(self, X: Any) -> pl.DataFrame:
        check_is_fitted(self, "model_")
        return self._feature_frame(X)

    def _feature_frame(self, X: Any) -> pl.DataFrame:
        """``X`` as a Polars frame of the model's features: a frame's columns by name (or by
        position where ``fit`` or ``X`` had no names), an array's by position."""
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

    def _predict_raw(
        self, X: Any, output: str, base_margin: Any = None, iteration_range: tuple[int, int] | None = None
    ) -> np.ndarray:
        df = self._predict_input(X)
        features, margin = pl.nth(range(df.width)), None
        if base_margin is not None:
            df, margin = df.with_columns(_margins(base_margin, df.height).alias(_MARGIN)), _MARGIN
        # Scored where the model was trained (as XGBoost does), SHAP values included.
        predict = features.gbt.predict(
            self.model_, output=output, base_margin=margin, device=self.device, iteration_range=iteration_range
        )
        with translated():
            out = df.select(predict.alias("prediction")).to_series()
        return np.stack(out.to_list()) if isinstance(out.dtype, pl.Array) else out.to_numpy()


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
    ) -> np.ndarray:
        """Predictions; ``base_margin`` (one per row) replaces the base score, as in XGBoost.
        ``pred_contribs=True`` (``pred_interactions=True``) gives SHAP (interaction) values
        instead (see ``contributions``). ``iteration_range=(start, end)`` uses those
        boosting rounds' trees only."""
        if pred_contribs or pred_interactions:
            return self.contributions(X, base_margin, interactions=pred_interactions)
        return self._predict_raw(X, "value", base_margin, iteration_range).astype(np.float64)

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
        df, y = self._fit_input(X, y, y_numeric=False)
        check_classification_targets(y)
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

    fit.__doc__ = "Fit on ``X`` and class labels ``y`` (any labels)." + _FIT_DOC

    def predict_proba(
        self, X: Any, base_margin: Any = None, iteration_range: tuple[int, int] | None = None
    ) -> np.ndarray:
        """Class probabilities; ``base_margin`` (one per row, or rows x classes for more than
        two classes) replaces the base score, as in XGBoost. ``iteration_range=(start, end)``
        uses those boosting rounds' trees only."""
        check_is_fitted(self, "model_")
        if _fact(getattr(self, "objective_", None), "predicts_classes"):
            raise ValueError(f"{self.objective_} does not support `predict_proba`; use multi:softprob instead")
        p = self._predict_raw(X, "value", base_margin, iteration_range).astype(np.float64)
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
    ) -> np.ndarray:
        """Class labels; ``pred_contribs=True`` (``pred_interactions=True``) gives SHAP
        (interaction) values instead (see ``contributions``). ``iteration_range=(start, end)``
        uses those boosting rounds' trees only."""
        if pred_contribs or pred_interactions:
            return self.contributions(X, base_margin, interactions=pred_interactions)
        check_is_fitted(self, "model_")
        if _fact(getattr(self, "objective_", None), "predicts_classes"):
            return self.classes_[self._predict_raw(X, "class", base_margin, iteration_range).astype(np.int64)]
        p = self.predict_proba(X, base_margin, iteration_range)
        return self.classes_[np.argmax(p, axis=1)]


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
        df, y = self._fit_input(X, y, y_numeric=True)
        if (group is None) == (qid is None):
            raise ValueError("give the query id of each row as group= (or qid=, XGBoost's name), once")
        group = _query_ids(qid if group is None else group, df.height, "group")
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

    fit.__doc__ = "Fit on ``X``, relevance labels ``y`` and query ids ``group``." + _FIT_DOC.replace(
        "lists with one entry for each.", "lists with one entry for each; so is ``eval_qid``, their query ids."
    )

    def predict(
        self,
        X: Any,
        base_margin: Any = None,
        pred_contribs: bool = False,
        pred_interactions: bool = False,
        iteration_range: tuple[int, int] | None = None,
    ) -> np.ndarray:
        """Scores to sort by; ``pred_contribs=True`` (``pred_interactions=True``) gives SHAP
        (interaction) values instead (see ``contributions``). ``iteration_range=(start, end)``
        uses those boosting rounds' trees only."""
        if pred_contribs or pred_interactions:
            return self.contributions(X, base_margin, interactions=pred_interactions)
        return self._predict_raw(X, "value", base_margin, iteration_range).astype(np.float64)


def _sklearn_order(function: Any) -> Any:
    """``function(y_true, y_pred)``, scikit-learn's order (XGBoost's estimators call objectives
    and metrics so), as the trainer calls it: ``(predt, label)``; named as ``function``."""

    def swapped(predt: np.ndarray, label: np.ndarray) -> Any:
        return function(label, predt)

    swapped.__name__ = swapped.__qualname__ = _custom.name_of(function)
    return swapped


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
