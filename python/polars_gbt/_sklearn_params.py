"""The scikit-learn estimators' parameters: the constructor's (XGBoost's names, polars-gbt's
defaults), the trainer's other names for them, ``get_params`` / ``set_params`` and the
parameters ``fit`` sends to the trainer."""

from __future__ import annotations

import inspect
import warnings
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator

from polars_gbt._jsonable import plain

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


class _GBTParams(BaseEstimator):
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
            default = inspect.signature(_GBTParams.__init__).parameters[canonical].default
            current = getattr(self, canonical)
            if current is not default and not (isinstance(current, float) and current == default):
                raise TypeError(f"{canonical} is given twice: as {canonical} and as {name}")
            setattr(self, canonical, value)

    @classmethod
    def _get_param_names(cls) -> list[str]:
        """Every constructor parameter of the class and of its bases down to ``_GBTParams``: a
        subclass's own ``__init__(self, my_param=1, **kwargs)`` keeps the inherited ones in
        ``get_params()`` and ``clone``, as XGBoost's and LightGBM's estimators keep them."""
        names: set[str] = set()
        for klass in cls.__mro__:
            if isinstance(klass, type) and issubclass(klass, _GBTParams) and "__init__" in vars(klass):
                names.update(BaseEstimator._get_param_names.__func__(klass))
                # An __init__ without **kwargs passes its bases only what it names itself.
                kinds = [p.kind for p in inspect.signature(klass.__init__).parameters.values()]
                if klass is not _GBTParams and inspect.Parameter.VAR_KEYWORD not in kinds:
                    break
        return sorted(names)

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor parameters (a subclass's and the inherited ones), and any other
        name the constructor or ``set_params`` was given, as XGBoost's ``get_params``."""
        return super().get_params(deep) | dict(self.__dict__.get("_kwargs", {}))

    def set_params(self, **params: Any) -> _GBTParams:
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

    def get_xgb_params(self) -> dict[str, Any]:
        """The training parameters ``gbt.fit`` receives (XGBoost's method of the same name):
        every constructor parameter of polars-gbt's that is set, less ``importance_type`` and
        ``sparse_absent`` (a subclass's own parameters are not sent); the objective is
        completed by ``fit`` (``num_class`` for more than two classes)."""
        # The trainer's parameters only: a subclass's own parameters are not sent (see
        # _warn_not_sent); numpy values as the Python values they hold.
        # (Read as attributes: a subclass's __init__ may name only some of them, and
        # _GBTParams.__init__ sets the rest.)
        names = [k for k in _GBTParams._get_param_names() if k not in _WRAPPER_PARAMS]
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


def _warn_not_sent(estimator: _GBTParams) -> None:
    """A subclass's own constructor parameters (scikit-learn's pattern) are for its own code,
    not the trainer's: they are not sent, and a warning names them, as XGBoost's ("Parameters:
    { ... } are not used") and LightGBM's ("Unknown parameter") do."""
    own = set(_GBTParams._get_param_names())
    extra = [k for k in estimator._get_param_names() if k not in own]
    if extra:
        warnings.warn(
            f"Parameters: {{ {', '.join(repr(k) for k in extra)} }} are not used by the trainer: they are not "
            f"training parameters of polars-gbt (a subclass's own parameters), and are not sent to it.",
            UserWarning,
            stacklevel=4,
        )
