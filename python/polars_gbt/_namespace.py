"""The ``gbt`` expression namespace: ``fit`` and ``predict``."""

from __future__ import annotations

import hashlib
import math
import os
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import polars as pl
from polars.plugins import register_plugin_function

from polars_gbt import _custom, _internal
from polars_gbt._errors import translated
from polars_gbt._jsonable import dumps, plain_params

if TYPE_CHECKING:
    from polars_gbt._model import Model

PLUGIN_PATH = Path(__file__).parent

# The names `output=` takes come from the crate's one list (`PredictOutput::ALL`); `Output`
# repeats them for type checkers, and a test keeps the two equal.
OUTPUTS: tuple[str, ...] = tuple(_internal.PREDICT_OUTPUTS)
Output = Literal["value", "margin", "class", "leaf", "contrib", "interaction"]
_OUTPUT_NAMES = ", ".join(f'"{o}"' for o in OUTPUTS)


def model_bytes(model: Model | bytes | bytearray | str | Path) -> bytes:
    """The bytes of a model given as a ``Model``, its bytes, or a file path."""
    from polars_gbt._model import Model

    if isinstance(model, Model):
        return model.to_bytes()
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model)
    if isinstance(model, (str, Path)):
        return Model.load(model).to_bytes()
    raise TypeError(f"model must be a polars_gbt.Model, bytes or a path, not {type(model).__name__}")


def rounds_range(value: Any) -> tuple[int, int] | None:
    """``iteration_range`` checked: two non-negative integers; ``(0, 0)`` (every round) is None."""
    ok = isinstance(value, (tuple, list)) and len(value) == 2
    ok = ok and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)
    if not ok:
        raise ValueError(f"iteration_range must be (start, end), two integers >= 0, not {value!r}")
    start, end = value
    if end != 0 and start >= end:
        raise ValueError(f"iteration_range {tuple(value)} holds no round: the start must be below the end")
    return None if (start, end) == (0, 0) else (start, end)


@pl.api.register_expr_namespace("gbt")
class GbtNamespace:
    """Gradient-boosted trees on the columns of an expression (``pl.col(features).gbt``)."""

    def __init__(self, expr: pl.Expr) -> None:
        self._expr = expr

    def fit(
        self,
        target: pl.Expr | str,
        *,
        weight: pl.Expr | str | float | None = None,
        group: pl.Expr | str | int | None = None,
        base_margin: pl.Expr | str | float | None = None,
        label_upper_bound: pl.Expr | str | float | None = None,
        eval_set: pl.Expr | dict[str, pl.Expr | str] | None = None,
        by: pl.Expr | str | None = None,
        init_model: Model | bytes | str | Path | None = None,
        verbose: bool | int = False,
        progress: bool = False,
        **params: Any,
    ) -> pl.Expr:
        """Train a model on the expression's columns; the result is the model's bytes.

        Parameters use XGBoost's names (``objective``, ``n_estimators``, ``learning_rate``,
        ``max_depth``, ...); an unknown, mistyped or out-of-range one raises
        ``polars_gbt.ParameterError`` here, when the expression is built.

        Parameters
        ----------
        target
            The label column. An ``Array`` or ``List`` column (``pl.concat_arr("y1", "y2")``)
            holds several targets per row: multi-target regression, one output (and one tree
            a round) per target, each fit by the objective on its own, as XGBoost's
            ``multi_strategy="one_output_per_tree"``. The model predicts an ``Array`` column.
        weight
            Per-row sample weights. Here and for ``group`` and ``base_margin``, a literal
            (``pl.lit(2.0)``, or a plain number) is repeated to every row, as Polars
            broadcasts literals.
        group
            Integer query ids for ranking objectives (rows of a query must be contiguous).
        base_margin
            Per-row starting margin.
        label_upper_bound
            For ``objective="survival:aft"``: each row's upper bound, ``target`` being its
            lower bound (XGBoost's ``label_upper_bound`` and ``label_lower_bound``). Equal
            bounds are an observed time; ``float("inf")`` marks a right-censored row, a lower
            bound of 0 a left-censored one. Without it every row is an observed time.
        eval_set
            A boolean expression marking validation rows; they are held out of training
            and evaluated every round as ``valid`` (needed for ``early_stopping_rounds``).
            Several sets: a dict of name to mask (``{"valid": pl.col("fold") == 1, "test":
            ...}``), each evaluated under its name; every marked row is held out, and early
            stopping watches the last set, as XGBoost does.
        by
            A key column (or expression): train one model per distinct key, the groups in
            parallel. The result is then a Struct column named ``model`` of the key and the
            group's model, one row per group in the order of their first rows (``.unnest``
            it). Each model equals the model ``gbt.fit`` trains on the group's rows alone;
            ``group_by(key).agg(gbt.fit(...))`` gives the same models, but Polars runs the
            groups of a plugin aggregation one after another. With many small groups,
            ``n_jobs=1`` keeps each fit on one thread and the groups on all cores.
        init_model
            Continue training this model (a ``Model``, its bytes or a path; XGBoost's
            ``xgb_model``, LightGBM's ``init_model``): every row starts from its margin, and
            the result is its trees followed by ``n_estimators`` new ones. It must have been
            trained on the same columns, in the same order (and the same categories), with
            the same objective; ``base_margin`` and ``base_score`` cannot be given with it.
        verbose
            Print the evaluation log to stderr (``True``: every round; an integer ``n``:
            every ``n`` rounds), e.g. ``[120]	valid-auc:0.84120``.
        progress
            Draw a progress bar of the boosting rounds on stderr.
        **params
            Training parameters. A user's objective is a Python callable
            ``f(predt, label) -> (grad, hess)``: ``predt`` holds the current margins (float32,
            shape ``(n,)``, or ``(n, num_class)`` with ``num_class``), ``label`` the labels,
            and it returns gradients and hessians of ``predt``'s shape; row weights multiply
            them. Give it as ``objective=f`` (the model then predicts margins, or softmax
            probabilities with ``num_class``) or, as XGBoost's ``obj=``, as ``obj=f`` beside
            ``objective="binary:logistic"`` (or ``"multi:softprob"``, ``"reg:squarederror"``)
            naming the link the model predicts with. Rows start from margin 0 unless
            ``base_score`` is set. ``eval_metric`` may hold callables too,
            ``m(predt, label) -> float`` (or ``(name, float)``), ``predt`` as ``predict``
            gives it: each is evaluated every round on every eval set after the built-in
            metrics (the objective's default one included), logged under its function's name,
            and the last one watched by ``early_stopping_rounds``, smaller being better unless
            ``maximize=True``. Callables stay in this process: a plan holding them cannot be
            run in another, and says so.

        Returns
        -------
        pl.Expr
            An aggregation yielding one Binary value, the model (``polars_gbt.Model.from_bytes``
            reads it). Works in ``select`` and per group in ``group_by(...).agg(...)``.

        Examples
        --------
        >>> import polars as pl, polars_gbt
        >>> df = pl.DataFrame({"x": [0.1, 0.4, 0.8, 0.9] * 50, "y": [0, 0, 1, 1] * 50})
        >>> m = df.select(pl.col("x").gbt.fit("y", objective="binary:logistic", n_estimators=3)).item()
        >>> polars_gbt.Model.from_bytes(m).num_trees
        3
        """
        args, kwargs = fit_arguments(
            self._expr,
            target,
            weight=weight,
            group=group,
            base_margin=base_margin,
            label_upper_bound=label_upper_bound,
            eval_set=eval_set,
            by=by,
            init_model=init_model,
            verbose=verbose,
            progress=progress,
            **params,
        )
        if by is not None:
            return register_plugin_function(
                plugin_path=PLUGIN_PATH,
                function_name="gbt_fit_by",
                args=args,
                kwargs=kwargs,
                changes_length=True,
                input_wildcard_expansion=True,
            ).alias("model")
        return register_plugin_function(
            plugin_path=PLUGIN_PATH,
            function_name="gbt_fit",
            args=args,
            kwargs=kwargs,
            returns_scalar=True,
            input_wildcard_expansion=True,
            pass_name_to_apply=True,
        )

    def predict(
        self,
        model: Model | bytes | str | Path | pl.Expr,
        *,
        output: Output = "value",
        device: str = "cpu",
        base_margin: pl.Expr | str | None = None,
        num_class: int | None = None,
        iteration_range: tuple[int, int] | None = None,
        _categorical_names: dict[str, list[str]] | None = None,
    ) -> pl.Expr:
        """Score rows with a model, elementwise (batch by batch in lazy and streaming queries).

        Parameters
        ----------
        model
            A ``polars_gbt.Model``, its bytes, or the path of a saved model; or an expression
            yielding a Binary column of model bytes (a **model column**, such as
            ``group_by().agg(gbt.fit(...))`` gives, joined to the rows): each row is then
            scored by its own row's model, a null model giving a null prediction. Each
            distinct model is parsed once. With a model column, leaf outputs are
            ``List(UInt32)`` (models may differ in tree count).
        output
            ``"value"`` (probabilities, means), ``"margin"``, ``"class"``, ``"leaf"``,
            ``"contrib"`` or ``"interaction"``. Multiclass values come back as ``Array(Float32, num_class)``.
            ``"contrib"`` gives SHAP values (exact TreeSHAP, XGBoost's ``pred_contribs``
            layout): ``Array(Float32, n_features + 1)``, one value per feature in the model's
            order and the bias (expected margin) last, summing to the row's margin; for a
            multiclass model ``Array(Array(Float32, n_features + 1), num_class)``. With
            ``device="cuda"`` they are computed on the GPU (path by path, as GPUTreeShap does),
            equal to the CPU's within float rounding. ``"interaction"`` gives SHAP
            interaction values (XGBoost's ``pred_interactions``): a matrix
            ``Array(Array(Float32, n_features + 1), n_features + 1)`` per row (one per class
            for multiclass), main effects on the diagonal, rows summing to the SHAP values.
            With a model column both are a flat ``List(Float32)``.
        device
            ``"cpu"``, ``"cuda"`` (an NVIDIA GPU: the model is uploaded once per process and
            each batch streams through it) or ``"auto"`` (the GPU when one is usable). GPU
            predictions equal the CPU's up to float rounding in the link function.
        base_margin
            Per-row starting margins (an expression or column name) used in place of the
            model's base score, as XGBoost's ``base_margin``: one number per row, or for a
            multiclass model an ``Array(Float32, num_class)`` (or List) column. A model fit
            with ``base_margin`` needs the same margins here to predict what it learnt.
        num_class
            With a model column of multiclass models only: their number of classes, which
            the output's dtype (``Array(Float32, num_class)``) needs before any model is read.
            A constant model says it itself.
        iteration_range
            ``(start, end)``: score with the trees of boosting rounds ``start`` to ``end - 1``
            only, as XGBoost's ``iteration_range`` (``end`` 0: to the last round). The same
            as scoring with ``model.slice(start, end)``; each model's slice is made once.

        Examples
        --------
        >>> import polars as pl, polars_gbt
        >>> df = pl.DataFrame({"x": [0.1, 0.4, 0.8, 0.9] * 50, "y": [0, 0, 1, 1] * 50})
        >>> m = df.select(pl.col("x").gbt.fit("y", objective="binary:logistic", n_estimators=20)).item()
        >>> df.head(4).select(pl.col("x").gbt.predict(m, output="class"))["x"].to_list()
        [0, 0, 1, 1]
        """
        if output not in OUTPUTS:
            raise ValueError(f"output must be one of {_OUTPUT_NAMES}, not {output!r}")
        if device not in ("cpu", "cuda", "auto"):
            raise ValueError(f'device must be one of "cpu", "cuda", "auto", not {device!r}')
        args = [self._expr] if base_margin is None else [self._expr, _expr(base_margin)]
        kwargs: dict[str, Any] = {"output": output, "device": device, "has_base_margin": base_margin is not None}
        if iteration_range is not None:
            kwargs["iteration_range"] = rounds_range(iteration_range)
        if _categorical_names:
            # Model.predict hands a frame's Categorical features over as their ids (issue 61).
            kwargs["categorical_names"] = _categorical_names
        if isinstance(model, pl.Expr):
            if num_class is not None and (not isinstance(num_class, int) or num_class < 1):
                raise ValueError(f"num_class must be a positive integer, not {num_class!r}")
            args.append(model)
            kwargs |= {"model_column": True, "num_class": num_class}
        else:
            if num_class is not None:
                raise ValueError("num_class is for model columns only: a constant model knows its classes")
            data = model_bytes(model)
            # The digest lets every batch find the parsed model without checksumming its bytes.
            kwargs |= {"model": bytearray(data), "model_digest": hashlib.blake2b(data, digest_size=16).hexdigest()}
        return register_plugin_function(
            plugin_path=PLUGIN_PATH,
            function_name="gbt_predict",
            args=args,
            kwargs=kwargs,
            is_elementwise=True,
            input_wildcard_expansion=True,
        )


def fit_arguments(
    features: pl.Expr,
    target: pl.Expr | str,
    *,
    weight: Any = None,
    group: Any = None,
    base_margin: Any = None,
    label_upper_bound: Any = None,
    eval_set: Any = None,
    by: Any = None,
    init_model: Any = None,
    verbose: bool | int = False,
    progress: bool = False,
    evaluates: bool = False,
    **params: Any,
) -> tuple[list[pl.Expr], dict[str, Any]]:
    """``gbt.fit``'s input expressions (in the order the plugin reads them) and its plugin
    arguments, the parameters checked: what the expression is built from, and what a
    streamed fit (``polars_gbt.train`` on a LazyFrame) hands the Rust side with each batch.
    ``evaluates``: the fit has evaluation sets of its own (a streamed fit's frames), besides
    any ``eval_set`` masks."""
    optional = {
        "weight": weight,
        "group": group,
        "base_margin": base_margin,
        "label_upper_bound": label_upper_bound,
    }
    args, eval_names = _fit_args(features, target, optional, eval_set, by, verbose, progress)
    # What errors call the target and the optional inputs: the user's column names.
    input_names = {"target": _input_name(target, "target")}
    input_names |= {name: _input_name(value, name) for name, value in optional.items() if value is not None}
    # polars_gbt.train and the estimators name the inputs as their callers gave them.
    input_names |= params.pop("_input_names", None) or {}
    # polars_gbt.train hands a frame's Categorical features over as their ids, with the names.
    categorical_names = params.pop("_categorical_names", None)
    params_json, user_functions, distributed = _fit_params(params, eval_set is not None or evaluates, by, init_model)
    kwargs: dict[str, Any] = {"params": params_json, "verbose": int(verbose), "progress": progress}
    if init_model is not None:
        kwargs["init_model"] = bytearray(model_bytes(init_model))
    kwargs |= user_functions
    kwargs.update({f"has_{name}": value is not None for name, value in optional.items()})
    kwargs["has_eval_set"] = eval_set is not None
    kwargs["eval_names"] = eval_names
    kwargs["input_names"] = input_names
    if distributed is not None:
        kwargs["distributed"] = distributed
    if categorical_names:
        kwargs["categorical_names"] = categorical_names
    if os.environ.get("POLARS_GBT_PROFILE") == "1":
        # When the expression was built, so that the fit can say how long Polars took before
        # calling it (running the query's inputs and exporting them to the plugin).
        kwargs["profile_built_at"] = time.time()
    return args, kwargs


def _expr(value: pl.Expr | str | float) -> pl.Expr:
    # A name is a column; a number (weight=2.0) is a literal, repeated to every row.
    if isinstance(value, str):
        return pl.col(value)
    if isinstance(value, (bool, int, float)):
        return pl.lit(value)
    return value


def _input_name(value: pl.Expr | str | float, parameter: str) -> str:
    """How errors name an input of ``gbt.fit``: the column a name or an expression reads
    (``pl.col("default") * 2`` is ``default``), or the parameter itself for a literal, an
    expression whose name Polars cannot tell (``pl.when(...).then(None)...``), or one that
    reads several columns (``pl.concat_arr("y1", "y2")``: an error about one of its targets
    must not name the first)."""
    if isinstance(value, str):
        return value
    if isinstance(value, pl.Expr):
        name = value.meta.output_name(raise_if_undetermined=False)
        if name and name != "literal" and len(set(value.meta.root_names())) <= 1:
            return name
    return parameter


def _fit_args(
    features: pl.Expr,
    target: pl.Expr | str,
    optional: dict[str, Any],
    eval_set: pl.Expr | dict[str, pl.Expr | str] | None,
    by: pl.Expr | str | None,
    verbose: bool | int,
    progress: bool,
) -> tuple[list[pl.Expr], list[str]]:
    """``gbt.fit``'s input expressions in the order the plugin reads them (the features, the
    target, the optional inputs given, the evaluation masks, the ``by`` key), and the names
    of several evaluation sets."""
    args: list[pl.Expr] = [features, _expr(target)]
    for value in optional.values():
        if value is not None:
            args.append(_expr(value))
    eval_names: list[str] = []
    if isinstance(eval_set, dict):
        if not eval_set or not all(isinstance(n, str) and n for n in eval_set):
            raise ValueError("eval_set as a dict maps non-empty names to Boolean masks")
        eval_names = list(eval_set)
        args.extend(_expr(m) for m in eval_set.values())
    elif eval_set is not None:
        args.append(_expr(eval_set))
    if by is not None:
        if verbose or progress:
            raise ValueError("by= trains its groups in parallel: verbose and progress are for single fits")
        args.append(_expr(by))
    return args, eval_names


def _fit_params(
    params: dict[str, Any], has_eval_set: bool, by: Any, init_model: Any
) -> tuple[str, dict[str, Any], Any]:
    """``gbt.fit``'s training parameters as JSON, checked here, where the expression is built;
    with what ``params`` held that is no training parameter taken out of it: the Python
    callables' plugin arguments, and a distributed worker's place."""
    # numpy values (np.int64(3), an ndarray of feature weights) as the Python values they hold.
    plain_params(params)
    if params.get("tree_method") == "gpu_hist":
        # XGBoost's old spelling of device="cuda"; XGBoost warns the same way.
        warnings.warn(
            'tree_method="gpu_hist" is deprecated: use tree_method="hist" (the default) with device="cuda"',
            DeprecationWarning,
            stacklevel=3,
        )
    missing = params.get("missing")
    if missing is None or (isinstance(missing, float) and math.isnan(missing)):
        # NaN (XGBoost's default) and nulls are always missing: nothing to record.
        params.pop("missing", None)
    # polars_gbt.dask's workers: each one's place in the fit (not a training parameter).
    distributed = params.pop("_distributed", None)
    if distributed is not None and (by is not None or init_model is not None):
        raise ValueError("distributed fits take no by or init_model yet")
    # Python callables (objective, metrics) stay here; the plugin gets their numbers.
    user_functions = _custom.take_user_functions(params, has_eval_set=has_eval_set)
    params_json = dumps(params)
    # A bad parameter is a ParameterError here, where the expression is built; errors that
    # depend on the data come when the query runs, as Polars' ComputeError.
    with translated():
        _internal.check_params(params_json)
    return params_json, user_functions, distributed
