"""Cross-validation: ``polars_gbt.cv``, XGBoost's ``xgb.cv`` and LightGBM's ``lgb.cv`` over a
frame, the folds a column (or assigned here), the result a frame of per-round metrics."""

from __future__ import annotations

import json
import time
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from typing import Any, Callable

import polars as pl

from polars_gbt import _custom, _internal
from polars_gbt._errors import ColumnError, DataError, ParameterError, translated
from polars_gbt._inputs import dense_pandas
from polars_gbt._jsonable import dumps, plain, plain_params
from polars_gbt._model import Model, _lazy, _target_columns, train

# Columns cv adds beside the data's own.
_FOLD = "__polars_gbt_cv_fold"  # the fold id as given (or assigned)
_CODE = "__polars_gbt_cv_code"  # its position among the sorted fold ids: 0..k-1
_KEY = "__polars_gbt_cv_key"  # a row's (or query group's) random rank, for assigning folds

# gbt.fit arguments that name or hold columns (not JSON training parameters).
_INPUTS = ("weight", "group", "base_margin", "label_upper_bound")
# Arguments cv cannot pass on to the folds' fits, and why.
_REFUSED = {
    "eval_df": "cv evaluates each fold's held-out rows itself (as `test`)",
    "eval_sets": "cv evaluates each fold's held-out rows itself (as `test`)",
    "eval_set": "cv evaluates each fold's held-out rows itself (as `test`)",
    "by": "cv trains one model per fold; for a cv per group, call cv on each group",
    "init_model": "continued training is not supported by cv",
    "verbose": "the folds train at once and would print over each other; print the returned frame",
    "progress": "the folds train at once and would draw over each other",
}
# n_estimators and its aliases (src/config.rs), and its default there (a test compares).
_N_ESTIMATORS = ("n_estimators", "num_boost_round", "num_round", "num_iterations")
_DEFAULT_N_ESTIMATORS = 100
# With early stopping, the rounds the folds train first (at least; see cv).
_FIRST_ROUNDS = 50


def cv(
    data: pl.DataFrame | pl.LazyFrame | Any,
    *,
    target: str | list[str],
    features: list[str] | None = None,
    folds: pl.Expr | str | pl.Series | None = None,
    nfold: int | None = None,
    stratified: bool = False,
    shuffle: bool | None = None,
    seed: int = 0,
    early_stopping_rounds: int | None = None,
    metrics: str | list[str] | None = None,
    eval_train: bool = True,
    parallel_folds: int | None = None,
    return_models: bool = False,
    **params: Any,
) -> pl.DataFrame | tuple[pl.DataFrame, dict[Any, Model]]:
    """Cross-validate: train a model per fold on the other folds' rows, evaluate it every
    round on its fold (``test``) and on its training rows (``train``), and return the
    per-round mean and standard deviation over the folds, as XGBoost's ``xgb.cv`` does.

    Parameters
    ----------
    data
        The rows: a Polars ``DataFrame`` or ``LazyFrame`` (collected once), a pyarrow table
        or anything with ``__arrow_c_stream__``.
    target
        The label column, or several (a list: multi-target regression, as in ``train``).
    features
        The feature columns; by default every column but the target, the columns
        ``weight``, ``group`` and ``base_margin`` name, and the columns ``folds`` reads.
    folds
        Each row's fold: a column name, an expression of the data's columns, or a Series of
        one value per row. Any dtype (integers, strings, ...) without nulls and with at
        least two distinct values; the folds are the distinct values, sorted. With it,
        giving ``nfold``, ``stratified`` or ``shuffle`` is an error.
    nfold
        Without ``folds``: the number of folds to assign (default 5), numbered
        ``0 .. nfold-1``. Rows are ranked by a seeded random permutation
        (``pl.int_range(n).shuffle(seed)``; the row order itself when ``shuffle=False``)
        and the ranks cut into ``nfold`` contiguous blocks: rank ``r`` goes to fold
        ``r * nfold // n``, so fold sizes differ by at most one row. With a ``group`` (ranking), whole query groups are ranked and
        cut the same way, so no query is split. The assignment is fixed by ``seed`` and the
        Polars version (its shuffle).
    stratified
        Without ``folds``, for classification objectives (``binary:*``, ``multi:*``):
        sort the rows by class (ascending), then by their random rank, and deal them to
        folds ``0, 1, .., nfold-1, 0, 1, ..`` in that order, one deal across all classes.
        Every fold then holds ``floor`` or ``ceil`` of ``n_c / nfold`` rows of each class
        ``c``, and fold sizes differ by at most one row.
    shuffle
        Whether the assigned folds follow a seeded shuffle (the default) or the row order.
    seed
        Seeds the shuffle of the fold assignment, and is also the training parameter
        ``seed`` of every fold's fit.
    early_stopping_rounds
        Stop at the round after which the mean ``test`` value of the last metric has not
        improved (strictly; up for ``auc``, ``ndcg``, ``map``, down for the others) for
        this many rounds; the returned frame then ends at the best round (the round with
        the best mean), and so do returned models. Unlike ``xgb.cv``, which keeps every
        round when the patience never runs out, the frame always ends at the best round,
        as a model ``polars_gbt.train`` early-stopped keeps its trees up to its best round.
        The folds first train ``max(50, 4 * early_stopping_rounds)`` rounds and, while the
        mean has not stopped, train again with twice as many, up to ``n_estimators``; the
        result is that of one long fit cut at the best round.
    metrics
        The evaluation metric(s), as ``eval_metric`` (which may be given instead); by
        default the objective's.
    eval_train
        Also evaluate each fold's training rows (the ``train-*`` columns). Their
        evaluation set is a second copy of the training rows, so False saves that memory
        and time.
    parallel_folds
        How many folds train at once (default: all). The fits run inside Polars' native
        code, off Python's GIL, on threads of their own; with the default ``n_jobs=0``
        they share one worker pool of a thread per core, so running folds at once keeps
        the cores busy without oversubscribing them (an explicit ``n_jobs=j`` gives each
        running fold its own ``j`` threads). Each running fold holds its rows' copy (twice
        its training rows with ``eval_train``), so fewer at once need less memory. On the
        GPU (``device="cuda"``) small fits run side by side and large ones take turns.
    return_models
        Also return the folds' models: ``(frame, {fold_id: Model})``, in fold order; each
        model's ``evals_result()`` is its fold's log. After early stopping each is what an
        early-stopped fit keeps: the trees up to the best round (``best_iteration``), the
        log up to the round where the mean stopped.
    **params
        Training parameters, as for ``polars_gbt.train`` (``objective``, ``n_estimators``,
        ``learning_rate``, ``weight``, ``group``, ...).

    Returns
    -------
    pl.DataFrame
        One row per round: ``round`` (from 0), then for each evaluation set (``train``,
        ``test``) and metric the columns ``{set}-{metric}-mean`` and ``{set}-{metric}-std``:
        the mean over the folds and the population standard deviation (``ddof=0``, as
        ``xgb.cv``).

    Each fold's fit is the fit ``polars_gbt.train(rows not in the fold, target=...,
    eval_sets={"train": rows not in the fold, "test": the fold's rows}, **params)`` gives
    (tested). Ctrl-C stops every fold after its current round and raises
    KeyboardInterrupt; an error in a fold is raised with a note naming the fold.

    Examples
    --------
    >>> import polars as pl, polars_gbt
    >>> df = pl.DataFrame({"x": [0.1, 0.4, 0.8, 0.9] * 50, "y": [0, 0, 1, 1] * 50})
    >>> res = polars_gbt.cv(df, target="y", nfold=4, objective="binary:logistic", n_estimators=3)
    >>> res.columns
    ['round', 'train-logloss-mean', 'train-logloss-std', 'test-logloss-mean', 'test-logloss-std']
    >>> res.height
    3
    """
    # numpy values (np.int64 seeds and rounds, as a search gives them) as Python's.
    seed, nfold, early_stopping_rounds, parallel_folds = plain((seed, nfold, early_stopping_rounds, parallel_folds))
    n_estimators, higher_is_better = _checked_params(params, metrics, early_stopping_rounds, parallel_folds, seed)
    df = _frame(data)
    names = df.columns
    targets = _target_columns(target, names)
    if stratified and len(targets) > 1:
        raise ParameterError("stratified folds are by a row's class; several targets give a row no one class")
    for reserved in (_FOLD, _CODE, _KEY):
        if reserved in names:
            raise ColumnError(f"column {reserved!r} is reserved for cv's own use")
    df, input_columns, input_roots = _input_columns(df, params)
    group = params.get("group") if isinstance(params.get("group"), str) else None
    df, fold_roots = _fold_column(df, folds, nfold, stratified, shuffle, seed, targets[0], group, params)
    features = _feature_columns(features, names, targets, [*input_columns, *input_roots, *fold_roots])
    df, ids = _fold_codes(df, group)

    frame = df.lazy()
    columns = [*features, *targets, *input_columns]

    def fit(code: int, rounds: int) -> Model:
        held_out = pl.col(_CODE) == code
        rest = frame.filter(~held_out).select(columns)
        sets = {"train": rest} if eval_train else {}
        sets["test"] = frame.filter(held_out).select(columns)
        # Early stopping is decided below, over the folds' mean, not by each fold.
        return train(rest, target=target, features=features, eval_sets=sets, **dict(params, n_estimators=rounds))

    if early_stopping_rounds is None:
        models = _run_folds(lambda code: fit(code, n_estimators), ids.to_list(), parallel_folds)
        result = _summary(models)
    else:
        result, models = _early_stopped(fit, ids, n_estimators, early_stopping_rounds, parallel_folds, higher_is_better)
    if return_models:
        return result, dict(zip(ids.to_list(), models))
    return result


def _checked_params(
    params: dict[str, Any], metrics: Any, early_stopping_rounds: Any, parallel_folds: Any, seed: int
) -> tuple[int, Callable[[str], bool]]:
    """Checks cv's own arguments and the training parameters (once, rather than once per
    fold), completing ``params`` for the folds' fits in place: the metrics, the seed, and
    the number of rounds taken out (returned, with how early stopping reads a metric's
    direction by its name)."""
    plain_params(params)
    for name, why in _REFUSED.items():
        if name in params:
            raise ParameterError(f"cv does not take `{name}`: {why}")
    if "eval_metric" in params:
        if metrics is not None:
            raise ParameterError("give metrics or eval_metric (the same thing), not both")
        metrics = params.pop("eval_metric")
    if metrics is not None:
        params["eval_metric"] = metrics
    if early_stopping_rounds is not None and (
        isinstance(early_stopping_rounds, bool) or not isinstance(early_stopping_rounds, int) or early_stopping_rounds < 1
    ):
        raise ParameterError(f"early_stopping_rounds must be a positive integer, not {early_stopping_rounds!r}")
    if parallel_folds is not None and (
        isinstance(parallel_folds, bool) or not isinstance(parallel_folds, int) or parallel_folds < 1
    ):
        raise ParameterError(f"parallel_folds must be a positive integer, not {parallel_folds!r}")
    if "random_state" in params:
        raise ParameterError("give the seed as seed= (it seeds the folds and every fold's fit), not random_state")
    params["seed"] = seed
    # The number of rounds, under any of its names (the trainer's default when not given).
    given = [k for k in _N_ESTIMATORS if k in params]
    if len(given) > 1:
        raise ParameterError(f"the number of rounds is given twice: {', '.join(given)}")
    n_estimators = params.pop(given[0]) if given else _DEFAULT_N_ESTIMATORS
    # Check the training parameters once, here, rather than once per fold; the folds' fits
    # take the Python callables (objective, metrics) themselves.
    checked = dict(params)
    custom_metrics = bool(_custom.take_user_functions(checked, has_eval_set=True).get("metric_ids"))
    with translated():
        _internal.check_params(
            dumps({"n_estimators": n_estimators, **{k: v for k, v in checked.items() if k not in _INPUTS}})
        )
    # The direction of the metric early stopping watches: a user's metric is logged last and
    # goes by `maximize`; a built-in one as the trainer says.
    maximize = bool(params.get("maximize", False))
    higher_is_better = (lambda _: maximize) if custom_metrics else _internal.metric_higher_is_better
    return n_estimators, higher_is_better


def _input_columns(df: pl.DataFrame, params: dict[str, Any]) -> tuple[pl.DataFrame, list[str], list[str]]:
    """The columns the inputs (``weight``, ``group``, ...) name; those given as expressions
    become columns (their names replacing them in ``params``), so that every fold's rows
    carry them. Also the columns those expressions read: not features by default, as in
    ``train``."""
    names = df.columns
    input_columns: list[str] = []
    input_roots: list[str] = []
    for k in _INPUTS:
        v = params.get(k)
        if isinstance(v, pl.Expr):
            input_roots += v.meta.root_names()
            name = f"__polars_gbt_cv_{k}"
            df = _with_column(df, v.alias(name), k)
            params[k] = name
            input_columns.append(name)
        elif isinstance(v, str):
            if v not in names:
                raise ColumnError(f"{k} column {v!r} not found")
            input_columns.append(v)
    return df, input_columns, input_roots


def _fold_column(
    df: pl.DataFrame,
    folds: pl.Expr | str | pl.Series | None,
    nfold: int | None,
    stratified: bool,
    shuffle: bool | None,
    seed: int,
    target: str,
    group: str | None,
    params: dict[str, Any],
) -> tuple[pl.DataFrame, list[str]]:
    """``df`` with each row's fold id (as given, or assigned), and the columns given folds
    read; the options for assigning folds are errors beside given ones."""
    if stratified and group is not None:
        raise ParameterError("stratified folds are by class; a group (ranking) keeps queries whole instead")
    if folds is not None:
        for name, value in (("stratified", stratified or None), ("nfold", nfold), ("shuffle", shuffle)):
            if value is not None:
                raise ParameterError(f"{name} applies to folds cv assigns; with folds given, the folds are as given")
        return _given_folds(df, folds)
    nfold = 5 if nfold is None else nfold
    shuffle = True if shuffle is None else shuffle
    return _assigned_folds(df, target, group, nfold, stratified, shuffle, seed, params.get("objective")), []


def _feature_columns(features: list[str] | None, names: list[str], targets: list[str], used: list[str]) -> list[str]:
    """The features: as given (checked), or every column but the targets and the ``used``
    ones (inputs, the columns their expressions read, and those the folds read)."""
    if features is None:
        skip = {*targets, *used}
        features = [n for n in names if n not in skip]
    else:
        unknown = [f for f in features if f not in names]
        if unknown:
            raise ColumnError(f"feature columns not found: {', '.join(map(repr, unknown))}")
        for t in targets:
            if t in features:
                raise ColumnError(f"the target {t!r} cannot also be a feature")
    if not features:
        raise ColumnError("no feature columns: every column is the target, an input or read by folds")
    return features


def _fold_codes(df: pl.DataFrame, group: str | None) -> tuple[pl.DataFrame, pl.Series]:
    """The sorted distinct fold ids (at least two), and ``df`` with each row's fold's position
    among them; a query group must lie in one fold."""
    ids = df.select(pl.col(_FOLD).unique().sort()).to_series()
    if ids.len() < 2:
        value = f" ({ids[0]!r})" if ids.len() else ""
        raise ColumnError(f"folds: {ids.len()} distinct value{value}; cross-validation needs at least two folds")
    df = df.join(ids.to_frame().with_row_index(_CODE), on=_FOLD, how="left", maintain_order="left")
    if group is not None:
        spread = df.group_by(group, maintain_order=True).agg(pl.col(_CODE).n_unique().alias("n")).filter(pl.col("n") > 1)
        if spread.height:
            raise DataError(f"folds: query group {spread[group][0]!r} spans several folds; a group must lie in one fold")
    return df, ids


def _early_stopped(
    fit: Callable[[int, int], Model],
    ids: pl.Series,
    n_estimators: int,
    early_stopping_rounds: int,
    parallel_folds: int | None,
    higher_is_better: Callable[[str], bool],
) -> tuple[pl.DataFrame, list[Model]]:
    """The summary and the folds' models, early-stopped on the folds' mean ``test`` series."""
    # Where the mean stops needs every fold's value of each round, but a fit reports to
    # Python only when it ends, and a fold's own early stopping would not do (the mean can
    # still improve after a fold's own best round). So the folds train a number of rounds
    # and the mean series is read; if it has not stopped, they train again from scratch,
    # twice as many rounds, up to n_estimators. A fit's first r rounds do not depend on
    # how many rounds follow (n_estimators only bounds the loop), so the series and trees
    # are those of one long fit cut at the best round (tested). The rounds trained come to
    # under four times the round where the mean stops (or the first attempt's rounds, if
    # more), and under twice n_estimators when it never stops; instead of n_estimators
    # every time, which is most of the work when n_estimators is set high, as usual.
    rounds = min(n_estimators, max(_FIRST_ROUNDS, 4 * early_stopping_rounds))
    while True:
        models = _run_folds(lambda code, r=rounds: fit(code, r), ids.to_list(), parallel_folds)
        result = _summary(models)
        best, stop, stopped = _best_round(result, early_stopping_rounds, higher_is_better)
        if stopped or rounds == n_estimators:
            break
        rounds = min(n_estimators, 2 * rounds)
    result = result.head(best + 1)
    models = [_truncated(m, best + 1, stop + 1, n_estimators) for m in models]
    return result, models


def _frame(data: Any) -> pl.DataFrame:
    if isinstance(data, pl.DataFrame):
        return data
    # pandas sparse columns dense, as train reads them.
    return _lazy(dense_pandas(data)).collect()


def _with_column(df: pl.DataFrame, expr: pl.Expr, what: str) -> pl.DataFrame:
    """``df`` with ``expr``'s column (a scalar is repeated to every row); errors name ``what``."""
    try:
        return df.with_columns(expr)
    except pl.exceptions.PolarsError as e:
        raise ColumnError(f"{what}: {e}") from e


def _given_folds(df: pl.DataFrame, folds: pl.Expr | str | pl.Series) -> tuple[pl.DataFrame, list[str]]:
    if isinstance(folds, str):
        if folds not in df.columns:
            raise ColumnError(f"folds column {folds!r} not found")
        folds = pl.col(folds)
    if isinstance(folds, pl.Series):
        if folds.len() != df.height:
            raise ColumnError(f"folds must give one value per row: {folds.len()} values for {df.height} rows")
        df, roots = df.with_columns(folds.alias(_FOLD)), []
    elif isinstance(folds, pl.Expr):
        roots = folds.meta.root_names()
        df = _with_column(df, folds.alias(_FOLD), "folds")
    else:
        raise ParameterError(f"folds must be a column name, an expression or a Series, not {type(folds).__name__}")
    nulls = df[_FOLD].null_count()
    if nulls:
        raise ColumnError(f"folds: {nulls} rows have no fold (null); give every row a fold")
    return df, roots


def _assigned_folds(
    df: pl.DataFrame,
    target: str,
    group: str | None,
    nfold: Any,
    stratified: bool,
    shuffle: bool,
    seed: int,
    objective: str | None,
) -> pl.DataFrame:
    if isinstance(nfold, bool) or not isinstance(nfold, int) or nfold < 2:
        raise ParameterError(f"nfold must be an integer of at least 2, not {nfold!r}")
    if stratified:
        objective = objective or "reg:squarederror"
        if _internal.OBJECTIVES.get(objective, {}).get("estimator") != "GBTClassifier":
            raise ParameterError(
                f"stratified folds need a classification objective (binary:*, multi:*), not {objective!r}"
            )

    def ranks(n: int) -> pl.Series:
        # Each of n items' place in a seeded random order (the given order without shuffle).
        r = pl.int_range(0, n, dtype=pl.Int64, eager=True)
        return r.shuffle(seed=seed) if shuffle else r

    if group is not None:
        # Whole queries: the distinct groups, in order of first rows, ranked and cut.
        queries = df.select(pl.col(group).unique(maintain_order=True))
        n = queries.height
        if nfold > n:
            raise DataError(f"nfold={nfold} is more than the {n} query groups")
        queries = queries.with_columns((ranks(n) * nfold // n).alias(_FOLD))
        return df.join(queries, on=group, how="left", maintain_order="left")

    n = df.height
    if nfold > n:
        raise DataError(f"nfold={nfold} is more than the {n} rows")
    df = df.with_columns(ranks(n).alias(_KEY))
    if not stratified:
        return df.with_columns((pl.col(_KEY) * nfold // n).alias(_FOLD)).drop(_KEY)
    if df[target].null_count():
        raise ColumnError(f"target column {target!r} has nulls: stratified folds need every row's class")
    # Rows in (class, rank) order are dealt in turn: the deal's position is the rows of the
    # classes before this one, plus the row's place within its class.
    counts = df.group_by(target).agg(pl.len().alias("n")).sort(target)
    offsets = counts.select(target, (pl.col("n").cum_sum() - pl.col("n")).cast(pl.Int64).alias("offset"))
    place = pl.col(_KEY).rank("ordinal").over(target).cast(pl.Int64) - 1
    return (
        df.join(offsets, on=target, how="left", maintain_order="left")
        .with_columns(((pl.col("offset") + place) % nfold).alias(_FOLD))
        .drop(_KEY, "offset")
    )


def _run_folds(fit: Any, ids: list[Any], parallel: int | None) -> list[Model]:
    """``fit(code)`` for every fold, ``parallel`` at once, on worker threads; the main
    thread waits, so that Ctrl-C reaches it (see ``run_interruptibly``)."""
    pool = ThreadPoolExecutor(max_workers=min(parallel or len(ids), len(ids)), thread_name_prefix="polars-gbt-cv")
    futures: list[Future[Model]] = [pool.submit(fit, code) for code in range(len(ids))]
    try:
        pending = set(futures)
        while pending:
            done, pending = wait(pending, timeout=0.05, return_when=FIRST_EXCEPTION)
            if any(f.exception() is not None for f in done):
                break
    except KeyboardInterrupt:
        # Folds not started yet never start; running ones stop after their round. A fit
        # reads the interrupt count when it starts, so one starting just now could miss a
        # single interrupt: repeat it until every running fold has unwound.
        for f in futures:
            f.cancel()
        while not all(f.done() for f in futures):
            _internal.interrupt_fits()
            time.sleep(0.05)
        pool.shutdown()
        raise
    # A fold failed (or all finished): the rest are not started, the running ones finish.
    for f in futures:
        f.cancel()
    pool.shutdown(wait=True)
    for fold, f in zip(ids, futures):
        if not f.cancelled() and f.exception() is not None:
            error = f.exception()
            error.add_note(f"in cv fold {fold!r} (the model trained without the rows of fold {fold!r})")
            raise error
    return [f.result() for f in futures]


def _summary(models: list[Model]) -> pl.DataFrame:
    """Per round, each series' mean and population std over the folds."""
    logs = [m.evals_result() for m in models]
    series = [c for c in logs[0].columns if c != "round"]
    long = pl.concat([log.with_columns(pl.lit(i).alias("fold")) for i, log in enumerate(logs)])
    stats = [s for c in series for s in (pl.col(c).mean().alias(f"{c}-mean"), pl.col(c).std(ddof=0).alias(f"{c}-std"))]
    return long.group_by("round").agg(stats).sort("round")


def _best_round(
    result: pl.DataFrame, patience: int, higher_is_better: Callable[[str], bool]
) -> tuple[int, int, bool]:
    """The round with the best mean of the last test series; the round early stopping ends at:
    the first ``patience`` rounds past the best without a strict improvement (else the last
    round); and whether it stopped there. ``higher_is_better`` tells the series' direction by
    its metric's name."""
    column = [c for c in result.columns if c.startswith("test-") and c.endswith("-mean")][-1]
    higher = higher_is_better(column[len("test-") : -len("-mean")])
    best, best_value = 0, None
    for r, v in enumerate(result[column].to_list()):
        if best_value is None or (v > best_value if higher else v < best_value):
            best, best_value = r, v
        elif r - best >= patience:
            return best, r, True
    return best, result.height - 1, False


def _truncated(model: Model, rounds: int, logged: int, n_estimators: int) -> Model:
    """``model`` as a fit of ``n_estimators`` rounds early-stopped at round ``logged - 1``,
    its best ``rounds - 1``, keeps it: the trees of its first ``rounds`` rounds and the log of
    its first ``logged``."""
    doc = json.loads(model.to_json())
    body = doc["model"]
    body["trees"] = body["trees"][: rounds * body["n_outputs"]]
    body["best_iteration"] = rounds - 1
    body["config"]["n_estimators"] = n_estimators
    for series in body["evals_result"]:
        series["values"] = series["values"][:logged]
    return Model.from_json(json.dumps(doc))
