"""A user's objective: ``objective=<callable>`` in ``gbt.fit``, ``polars_gbt.train`` and the
estimators, as XGBoost's ``obj=``.

The callable stays here, in a registry; the fit (in Rust, in Polars' threads) knows only its
number and calls ``objective_gradients`` once a round. A plan holding the number cannot run in
another process, where the number means nothing: that is an error saying so.
"""

from __future__ import annotations

import collections
import itertools
import re
import threading
from typing import Any, Callable

import numpy as np

_lock = threading.Lock()
_ids = itertools.count(1)
# Callables by number, and numbers by callable identity (one number per callable, kept for the
# process's life: a plan may run any time after it was built).
_by_id: dict[int, Callable[..., Any]] = {}
_by_callable: dict[int, int] = {}
# Metrics as a multi:softmax fit calls them (class labels), by the user's callable's identity.
_as_classes: dict[int, tuple[Callable[..., Any], Callable[..., Any]]] = {}

# The exceptions the user's callables raised, by number, until the fit's error reaches
# `raised_by_user` (polars_gbt._errors.translated), which raises them again in their place.
# A fit's error names the number; a query run without translation never collects its entry,
# so only the latest few are kept (each holds its traceback, and the arrays of its frames).
_raised: collections.OrderedDict[int, BaseException] = collections.OrderedDict()
_raised_ids = itertools.count(1)
_KEEP_RAISED = 8
_RAISED_MARK = re.compile(r"\[polars-gbt: user exception #(\d+)\]")


class UserFunctionError(Exception):
    """What the fit sees of an exception a user's objective or metric raised: its type and
    message, and the number under which the exception itself is kept. ``polars_gbt.train``,
    ``cv`` and the estimators raise the user's exception in its place; a hand-written
    ``gbt.fit`` query run without ``polars_gbt.translate_errors()`` shows this message."""


def _keep(error: BaseException, what: str, function: Callable[..., Any]) -> UserFunctionError:
    """Keeps ``error``, raised by the user's ``function`` (``what``: objective or metric), for
    ``raised_by_user``; the error the fit carries instead, naming it."""
    with _lock:
        number = next(_raised_ids)
        _raised[number] = error
        while len(_raised) > _KEEP_RAISED:
            _raised.popitem(last=False)
    error.add_note(f"(raised in the {what} `{name_of(function)}`, which the polars-gbt fit called)")
    return UserFunctionError(
        f"the {what} `{name_of(function)}` raised {type(error).__name__}: {error} [polars-gbt: user exception #{number}]"
    )


def raised_by_user(message: str) -> BaseException | None:
    """The user's exception a fit's error ``message`` names (taken from the keeping), if any."""
    found = _RAISED_MARK.search(message)
    if found is None:
        return None
    with _lock:
        return _raised.pop(int(found.group(1)), None)


def register(objective: Callable[..., Any]) -> int:
    """The registry number of ``objective`` (the same number every time for one callable)."""
    with _lock:
        number = _by_callable.get(id(objective))
        if number is None or _by_id.get(number) is not objective:
            number = next(_ids)
            _by_id[number] = objective
            _by_callable[id(objective)] = number
        return number


def name_of(objective: Callable[..., Any]) -> str:
    """The name a callable is recorded and logged under: its ``__name__``."""
    return getattr(objective, "__name__", None) or repr(objective)


def take_user_functions(params: dict[str, Any], *, has_eval_set: bool) -> dict[str, Any]:
    """Takes the Python callables out of ``params`` (in place), leaving JSON parameters, and
    returns what the fit needs to call them: the plugin's keyword arguments.

    The objective is ``objective=f`` (the model then predicts margins, or softmax with
    ``num_class``) or ``obj=f`` beside the link objective; the metrics are the callables of
    ``eval_metric``, logged after the built-in ones, ``maximize`` their direction."""
    kwargs: dict[str, Any] = {}
    objective = params.pop("obj", None)
    if callable(params.get("objective")):
        if objective is not None:
            raise ValueError("give the objective callable once: objective=<callable> or obj=<callable>")
        objective = params.pop("objective")
        if (params.get("num_class") or 0) > 1:
            params["objective"] = "multi:softprob"
    if objective is not None:
        if not callable(objective):
            raise TypeError(f"obj must be a callable (predt, label) -> (grad, hess), not {type(objective).__name__}")
        kwargs["objective_id"] = register(objective)
        params.setdefault("custom_objective", name_of(objective))
        params.setdefault("objective", "reg:squarederror")
    maximize = params.pop("maximize", False)
    metrics = params.get("eval_metric")
    listed = list(metrics) if isinstance(metrics, (list, tuple)) else [metrics]
    functions = [m for m in listed if callable(m)]
    if params.get("objective") == "multi:softmax":
        # predict gives multi:softmax's class labels, and so do XGBoost's metrics.
        functions = [_class_labels(m) for m in functions]
    if functions:
        if not has_eval_set:
            raise ValueError("eval_metric callables evaluate eval sets, and none is given (eval_set=...)")
        names = [m for m in listed if not callable(m)]
        if names:
            params["eval_metric"] = names
        else:
            params.pop("eval_metric")
        kwargs |= {
            "metric_ids": [register(m) for m in functions],
            "metric_names": [name_of(m) for m in functions],
            "maximize": bool(maximize),
        }
    elif maximize:
        raise ValueError("maximize applies to eval_metric callables, and none is given")
    return kwargs


def _class_labels(metric: Callable[..., Any]) -> Callable[..., Any]:
    """``metric`` called with each row's class (the argmax of its ``(n, k)`` predictions, as
    float32 labels) in place of the probabilities: what ``predict`` and XGBoost give for
    ``multi:softmax``. One wrapper per metric, so that the registry keeps one number for it."""
    with _lock:
        cached = _as_classes.get(id(metric))
        if cached is not None and cached[0] is metric:
            return cached[1]

    def classes(predt: np.ndarray, label: np.ndarray) -> Any:
        if predt.ndim == 2:
            predt = predt.argmax(axis=1).astype(np.float32)
        return metric(predt, label)

    classes.__name__ = classes.__qualname__ = name_of(metric)
    with _lock:
        _as_classes[id(metric)] = (metric, classes)
    return classes


def _registered(number: int, what: str) -> Callable[..., Any]:
    """The callable registered as ``number``: in another process the number means nothing."""
    function = _by_id.get(number)
    if function is None:
        raise LookupError(
            f"no {what} #{number} in this process: a query with a Python {what} runs only in the "
            "process that built it (the callable cannot be serialised into a plan sent elsewhere)"
        )
    return function


def objective_gradients(number: int, margins: bytes, labels: bytes, n: int, k: int) -> bytes:
    """Called by the fit: the objective's (gradient, hessian) pairs, float32, class-major.

    The objective receives the predictions (margins: shape ``(n,)``, or ``(n, k)`` with ``k``
    outputs) and the labels (``(n,)``), both float32 numpy arrays, and returns gradients and
    hessians of the predictions' shape."""
    objective = _registered(number, "objective")
    predt = np.frombuffer(margins, dtype=np.float32).reshape(k, n)
    predt = predt[0].copy() if k == 1 else predt.T.copy()
    label = np.frombuffer(labels, dtype=np.float32).copy()
    try:
        out = objective(predt, label)
    except Exception as e:
        raise _keep(e, "objective", objective) from None
    if not (isinstance(out, tuple) and len(out) == 2):
        raise TypeError(f"the objective must return (gradient, hessian), not {type(out).__name__}")
    pairs = []
    for what, values in zip(("gradient", "hessian"), out):
        arr = np.asarray(values, dtype=np.float32)
        if arr.shape != predt.shape and arr.size == predt.size:
            arr = arr.reshape(predt.shape)
        if arr.shape != predt.shape:
            raise ValueError(f"the objective's {what} has shape {arr.shape}; the predictions have {predt.shape}")
        if not np.isfinite(arr).all():
            raise ValueError(f"the objective's {what} holds non-finite values (NaN or infinity)")
        pairs.append(arr.reshape(n, k).T)  # class-major
    return np.ascontiguousarray(np.stack(pairs, axis=-1), dtype="<f4").tobytes()


def metric_value(number: int, predictions: bytes, labels: bytes, n: int, k: int) -> float:
    """Called by the fit: a user's metric of one evaluation set's predictions (shape ``(n,)``,
    or ``(n, k)``, through the model's link) against its labels. The metric returns a number,
    or ``(name, number)`` as XGBoost's ``custom_metric`` does (the log names it by the
    callable's name either way)."""
    metric = _registered(number, "metric")
    predt = np.frombuffer(predictions, dtype=np.float32).reshape(n, k)
    predt = predt[:, 0].copy() if k == 1 else predt.copy()
    label = np.frombuffer(labels, dtype=np.float32).copy()
    try:
        out = metric(predt, label)
    except Exception as e:
        raise _keep(e, "metric", metric) from None
    if isinstance(out, tuple) and len(out) == 2:
        out = out[1]
    try:
        value = float(out)
    except (TypeError, ValueError):
        raise TypeError(f"the metric must return a number (or (name, number)), not {type(out).__name__}") from None
    return value
