"""Training parameters as JSON: the one normaliser of their values.

Parameters reach the trainer as JSON (``gbt.fit``, ``polars_gbt.train``, ``polars_gbt.cv`` and
the estimators all go through ``dumps``). Values often come from numpy, as
``GridSearchCV(param_grid={"max_depth": np.arange(2, 6)})`` gives them: numpy scalars
(``np.int64``, ``np.float32``, ``np.bool_``) and arrays (``feature_weights``,
``monotone_constraints``), which ``json.dumps`` refuses. ``plain`` turns them into the Python
values they hold, at any depth (dict values and keys, lists, tuples), as XGBoost and LightGBM
take them; anything else is left as it is (callables, expressions), for the caller to use or
for ``json.dumps`` to refuse.

Examples
--------
>>> import numpy as np
>>> from polars_gbt._jsonable import dumps
>>> dumps({"max_depth": np.int64(3), "subsample": np.float32(0.5), "feature_weights": np.array([1.0, 2.0])})
'{"max_depth": 3, "subsample": 0.5, "feature_weights": [1.0, 2.0]}'
"""

from __future__ import annotations

import json
import sys
from typing import Any


def plain(value: Any) -> Any:
    """``value`` with numpy scalars and arrays (at any depth of dicts, lists and tuples) as the
    Python numbers, booleans, strings and lists they hold."""
    np = sys.modules.get("numpy")
    if np is not None:
        if isinstance(value, np.generic):
            return value.item()
        if isinstance(value, np.ndarray):
            return value.tolist()
    if isinstance(value, dict):
        return {plain(k): plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(plain(v) for v in value)
    return value


def plain_params(params: dict[str, Any]) -> None:
    """Normalises the values of ``params`` in place (see ``plain``)."""
    for k, v in list(params.items()):
        params[k] = plain(v)


def dumps(obj: Any) -> str:
    """``json.dumps`` of ``obj`` after ``plain``."""
    return json.dumps(plain(obj))
