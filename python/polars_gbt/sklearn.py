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

import inspect
import json
import sys
import warnings
from pathlib import Path
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
from polars_gbt import _categorical, _custom, _inputs, _internal, _ubjson
from polars_gbt._errors import translated
from polars_gbt._jsonable import plain
from polars_gbt._model import Model, margin_series, run_interruptibly

# Columns the estimators put beside the features for the fit's other inputs.
_TARGET, _WEIGHT, _GROUP, _MARGIN, _EVAL = (
    f"__polars_gbt_{n}" for n in ("target", "weight", "group", "margin", "eval")
)
_RESERVED = (_TARGET, _WEIGHT, _GROUP, _MARGIN, _EVAL)

# Constructor parameters that are the estimator's own, not the trainer's.
_WRAPPER_PARAMS = ("importance_type", "sparse_absent")
# The trainer's other names for constructor parameters (src/config/mod.rs's serde aliases:
# XGBoost's and LightGBM's), which the constructor and set_params take as XGBoost's do.
_ALIASES = {
    "eta": "learning_rate",
    "num_boost_round": "n_estimators",
    "num_round": "n_estimators",
    "num_iterations": "n_estimators",
    "num_leaves": "max_leaves",
    "lambda": "reg_lambda",
    "lambda_l2": "reg_lambda",
    "alpha": "reg_alpha",
    "lambda_l1": "reg_alpha",
    "min_split_loss": "gamma",
    "min_sum_hessian_in_leaf": "min_child_weight",
    "feature_fraction": "colsample_bytree",
    "feature_fraction_bynode": "colsample_bynode",
    "seed": "random_state",
    "nthread": "n_jobs",
    "num_threads": "n_jobs",
}
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
    chooses what ``feature_importances_`` measures, and ``sparse_absent`` (``"missing"``, or
    ``"zero"``) how a scipy sparse ``X``'s absent entries read; neither goes to the trainer.
    The trainer's other names (``eta``, ``lambda``, ``num_leaves``, ...) set the parameter they
    name; any other keyword is kept (``get_params``, ``clone``) and sent to the trainer, which
    refuses a name it does not know, as a ``ParameterError``."""

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
        sparse_absent: str = "missing",
        **aliases: Any,
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
        self.sparse_absent = sparse_absent
        # XGBoost's (and LightGBM's) other names, as the trainer takes them: eta=0.1 sets
        # learning_rate, which get_params() then reports. Other names are kept, as XGBoost's
        # **kwargs keeps them (get_params, clone), and go to the trainer, which refuses a
        # name it does not know when fit sends it (XGBoost's booster warns instead).
        for name, value in aliases.items():
            canonical = _ALIASES.get(name)
            if canonical is None:
                self.__dict__.setdefault("_kwargs", {})[name] = value
                continue
            default = inspect.signature(_GBTBase.__init__).parameters[canonical].default
            current = getattr(self, canonical)
            if current is not default and not (isinstance(current, float) and current == default):
                raise TypeError(f"{canonical} is given twice: as {canonical} and as {name}")
            setattr(self, canonical, value)

    @classmethod
    def _get_param_names(cls) -> list[str]:
        """Every constructor parameter of the class and of its bases down to ``_GBTBase``: a
        subclass's own ``__init__(self, my_param=1, **kwargs)`` keeps the inherited ones in
        ``get_params()`` and ``clone``, as XGBoost's and LightGBM's estimators keep them."""
        names: set[str] = set()
        for klass in cls.__mro__:
            if isinstance(klass, type) and issubclass(klass, _GBTBase) and "__init__" in vars(klass):
                names.update(BaseEstimator._get_param_names.__func__(klass))
                # An __init__ without **kwargs passes its bases only what it names itself.
                kinds = [p.kind for p in inspect.signature(klass.__init__).parameters.values()]
                if klass is not _GBTBase and inspect.Parameter.VAR_KEYWORD not in kinds:
                    break
        return sorted(names)

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor parameters (a subclass's and the inherited ones), and any other
        name the constructor or ``set_params`` was given, as XGBoost's ``get_params``."""
        return super().get_params(deep) | dict(self.__dict__.get("_kwargs", {}))

    def set_params(self, **params: Any) -> _GBTBase:
        """Sets parameters, by their names or by XGBoost's and LightGBM's other names for
        them (``eta`` for ``learning_rate``, ...), as XGBoost's ``set_params`` takes them.
        Another name is kept, as XGBoost keeps it, and goes to the trainer at ``fit``."""
        own = set(self._get_param_names())
        renamed: dict[str, Any] = {}
        for name, value in params.items():
            key = name if name in own or "__" in name else _ALIASES.get(name, name)
            if key in renamed:
                raise ValueError(f"{key} is given twice (under another of its names: {name})")
            if key not in own and "__" not in key:
                self.__dict__.setdefault("_kwargs", {})[key] = value
                continue
            renamed[key] = value
        return super().set_params(**renamed) if renamed else self

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.sparse = True
        return tags

    def get_xgb_params(self) -> dict[str, Any]:
        """The training parameters ``gbt.fit`` receives (XGBoost's method of the same name):
        every constructor parameter of polars-gbt's that is set, less ``importance_type`` and
        ``sparse_absent`` (a subclass's own parameters are not sent); the objective is
        completed by ``fit`` (``num_class`` for more than two classes)."""
        # The trainer's parameters only: a subclass's own parameters are not sent (see
        # _warn_not_sent); numpy values as the Python values they hold.
        # (Read as attributes: a subclass's __init__ may name only some of them, and
        # _GBTBase.__init__ sets the rest.)
        names = [k for k in _GBTBase._get_param_names() if k not in _WRAPPER_PARAMS]
        given = {k: getattr(self, k, None) for k in names} | dict(self.__dict__.get("_kwargs", {}))
        params = {k: plain(v) for k, v in given.items() if v is not None}
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

    def save_model(self, fname: str | Path) -> None:
        """Writes the fitted estimator to ``fname``, as XGBoost's ``save_model``. A path ending
        in ``.json`` is XGBoost's JSON model (``xgboost``'s estimators and ``Booster`` load it,
        XGBoost 3.1 or later), with the scikit-learn attributes in its ``scikit_learn``
        attribute as XGBoost writes them; ``.ubj`` is the same in UBJSON. Any other path is
        polars-gbt's JSON model with those attributes beside it (``polars_gbt.Model.load``
        reads the model). ``load_model`` reads any of them back."""
        check_is_fitted(self, "model_")
        meta = {"_estimator_type": _estimator_type(self), "n_features_in_": int(self.n_features_in_)}
        if hasattr(self, "feature_names_in_"):
            meta["feature_names_in_"] = [str(n) for n in self.feature_names_in_]
        if hasattr(self, "classes_"):
            meta["classes_"] = _saved_classes(self.classes_)
        if getattr(self, "n_labels_", None):
            meta["n_labels_"] = int(self.n_labels_)
        meta["objective_"] = self.objective_ if isinstance(self.objective_, str) else None
        suffix = Path(fname).suffix.lower()
        if suffix in (".json", ".ubj"):
            doc = json.loads(self.get_booster().to_xgboost_json())
            doc["learner"].setdefault("attributes", {})["scikit_learn"] = json.dumps(meta)
            if not hasattr(self, "feature_names_in_"):
                # Fitted without names (f0, f1, ... are ours): none, as XGBoost's models of
                # arrays have none, so that XGBoost scores arrays with it.
                doc["learner"]["feature_names"] = []
                doc["learner"]["feature_types"] = []
            data = json.dumps(doc).encode() if suffix == ".json" else _ubjson.dumps(doc)
        else:
            doc = json.loads(self.get_booster().to_json())
            doc["scikit_learn"] = meta
            data = json.dumps(doc).encode()
        Path(fname).write_bytes(data)

    def load_model(self, fname: str | Path | bytes | bytearray) -> None:
        """Reads a model written by ``save_model`` (or by XGBoost's estimators and
        ``Booster.save_model``, JSON or UBJSON, or ``polars_gbt.Model.save``) into this
        estimator, as XGBoost's ``load_model``: ``predict`` then works, and ``classes_``,
        ``n_features_in_``, ``feature_names_in_`` (where the model was fitted on named
        columns), ``objective_`` and ``objective`` are restored. A model without the
        estimator's attributes (XGBoost's own, a bare ``Model``) takes its classes as
        ``0 .. n_classes - 1``, as XGBoost does. The other constructor parameters are left
        as they are."""
        data = bytes(fname) if isinstance(fname, (bytes, bytearray)) else Path(fname).read_bytes()
        meta: dict[str, Any] | None = None
        doc = _ubjson.document(data)
        if doc is None:  # polars-gbt's binary format
            model = Model.from_bytes(data)
        elif "learner" in doc:  # XGBoost's JSON or UBJSON
            stored = (doc["learner"].get("attributes") or {}).get("scikit_learn")
            meta = json.loads(stored) if stored else None
            model = Model.from_xgboost(data)
        else:  # polars-gbt's JSON, with save_model's attributes beside the model
            meta = doc.pop("scikit_learn", None)
            model = Model.from_json(json.dumps(doc))
        kind = (meta or {}).get("_estimator_type")
        if kind is not None and kind != _estimator_type(self):
            raise TypeError(f"Loading an estimator with different type. Expecting: {_estimator_type(self)}, got: {kind}")
        self._set_fitted(model, meta or {})

    def _set_fitted(self, model: Model, meta: dict[str, Any]) -> None:
        """The fitted attributes of ``model`` and the saved attributes ``meta``."""
        self.model_ = model.to_bytes()
        self.evals_result_ = None
        self.objective_ = meta.get("objective_") or model.params.get("objective") or getattr(self, "objective_", None)
        if isinstance(self.objective_, str):
            self.objective = self.objective_
        names = meta.get("feature_names_in_")
        self.n_features_in_ = int(meta.get("n_features_in_", len(model.feature_names)))
        if names is not None:
            self.feature_names_in_ = np.asarray(names, dtype=object)
        elif "n_features_in_" not in meta and model.feature_names != [f"f{i}" for i in range(self.n_features_in_)]:
            self.feature_names_in_ = np.asarray(model.feature_names, dtype=object)
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        if isinstance(self, ClassifierMixin):
            classes = meta.get("classes_")
            if classes is None:
                k = model.params.get("num_class") or 0
                classes = list(range(k if k > 2 else 2))
            self.classes_ = np.asarray(classes)
            self.n_classes_ = len(self.classes_)
            # A multi-label fit: one binary output per label (XGBoost's have num_target).
            targets = model.params.get("num_target") or 1
            self.n_labels_ = meta.get("n_labels_") or (targets if targets > 1 else None)

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


def _warn_not_sent(estimator: _GBTBase) -> None:
    """A subclass's own constructor parameters (scikit-learn's pattern) are for its own code,
    not the trainer's: they are not sent, and a warning names them, as XGBoost's ("Parameters:
    { ... } are not used") and LightGBM's ("Unknown parameter") do."""
    own = set(_GBTBase._get_param_names())
    extra = [k for k in estimator._get_param_names() if k not in own]
    if extra:
        warnings.warn(
            f"Parameters: {{ {', '.join(repr(k) for k in extra)} }} are not used by the trainer: they are not "
            f"training parameters of polars-gbt (a subclass's own parameters), and are not sent to it.",
            UserWarning,
            stacklevel=4,
        )


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


def _estimator_type(estimator: Any) -> str:
    """XGBoost's name of the estimator's kind, which its saved models record."""
    if isinstance(estimator, GBTRanker):
        return "ranker"
    return "classifier" if isinstance(estimator, ClassifierMixin) else "regressor"


def _saved_classes(classes: np.ndarray) -> list[Any]:
    """Classes as JSON values (numbers, strings, booleans)."""
    return [c.item() if isinstance(c, np.generic) else c for c in classes.tolist()]
