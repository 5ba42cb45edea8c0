"""The ``Model`` class and the ``train`` function."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Callable, TypeVar

import polars as pl

from polars_gbt import _categorical, _internal, _stream
from polars_gbt._errors import ColumnError, translated
from polars_gbt._inputs import dense_pandas, is_scipy_sparse
from polars_gbt._jsonable import dumps


T = TypeVar("T")


def run_interruptibly(work: Callable[[], T]) -> T:
    """Run ``work`` (a query with a fit) on a helper thread so that Ctrl-C reaches Python.

    Python delivers signals to the main thread only, and only between bytecodes; a fit runs
    inside Polars' native code for minutes. So the main thread waits here, and on
    KeyboardInterrupt tells running fits to stop after their current round, waits for the
    query to unwind, and re-raises.
    """
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = work()
        except BaseException as e:  # handed to the main thread below
            outcome["error"] = e

    thread = threading.Thread(target=target, name="polars-gbt-fit", daemon=True)
    thread.start()
    try:
        while thread.is_alive():
            thread.join(0.05)
    except KeyboardInterrupt:
        _internal.interrupt_fits()
        thread.join()
        raise
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


class Model:
    """A trained model: its bytes, with inspection and scoring helpers.

    Examples
    --------
    >>> import polars as pl, polars_gbt
    >>> df = pl.DataFrame({"a": [1.0, 2.0, 3.0, 4.0] * 25, "y": [1.0, 1.0, 3.0, 3.0] * 25})
    >>> m = polars_gbt.train(df, target="y", n_estimators=2)
    >>> m.feature_names, m.num_trees
    (['a'], 2)
    """

    def __init__(self, data: bytes) -> None:
        with translated():
            _internal.model_check(data)
        self._bytes = bytes(data)
        self._summary: dict[str, Any] = json.loads(_internal.model_summary(self._bytes))

    @classmethod
    def from_bytes(cls, data: bytes | bytearray) -> Model:
        """A model from its bytes (binary or JSON form); raises ModelError (a ValueError) if corrupt."""
        return cls(bytes(data))

    @classmethod
    def load(cls, path: str | Path) -> Model:
        """Read a model file written by :meth:`save` (or a JSON dump)."""
        return cls(Path(path).read_bytes())

    @classmethod
    def from_json(cls, text: str) -> Model:
        """A model from :meth:`to_json`'s output."""
        with translated():
            return cls(_internal.model_from_json(text))

    @classmethod
    def from_xgboost(cls, source: str | Path | bytes | bytearray) -> Model:
        """Import a model saved by XGBoost (``Booster.save_model``, JSON or UBJSON): a path or the
        file's bytes. Supports gbtree and dart boosters, numeric and categorical splits, missing
        values, multiclass, and the objectives polars-gbt has. Raises ModelError otherwise.

        Categorical features keep XGBoost's category names (XGBoost 3.1+ stores them) and are
        then matched by name; without names they take integer codes."""
        data = bytes(source) if isinstance(source, (bytes, bytearray)) else Path(source).read_bytes()
        with translated():
            return cls(_internal.model_from_xgboost(data))

    @classmethod
    def from_lightgbm(cls, source: str | Path) -> Model:
        """Import a LightGBM text model (``Booster.save_model`` or ``model_to_string()``): a path,
        or the model text itself. Category names saved for pandas categoricals are kept; other
        categorical features take integer codes. Raises ModelError for what cannot be imported
        (linear trees, ``zero_as_missing``, objectives polars-gbt lacks)."""
        if isinstance(source, str) and source.startswith("tree\n"):
            text = source
        else:
            text = Path(source).read_text()
        with translated():
            return cls(_internal.model_from_lightgbm(text))

    def to_xgboost_json(self) -> str:
        """The model as XGBoost JSON, which ``xgboost.Booster(model_file=...)`` (3.1 or later)
        loads and predicts the same from."""
        return _internal.model_to_xgboost_json(self._bytes)

    def save_xgboost(self, path: str | Path) -> None:
        """Write :meth:`to_xgboost_json` to ``path``."""
        Path(path).write_text(self.to_xgboost_json())

    def to_onnx(self) -> bytes:
        """The model as an ONNX model (``ai.onnx.ml`` opset 5's ``TreeEnsemble``), for
        onnxruntime and other ONNX runtimes: one graph input per feature, named as the
        model's features (numeric columns as float32 tensors ``[N]``, categorical ones as
        string tensors ``[N]``, mapped to the model's categories inside the graph; nulls as
        NaN), and two outputs, ``value`` (what ``predict`` gives) and ``margin``. See the
        user guide's "Exporting to ONNX" for what is and is not exported.

        Examples
        --------
        >>> import polars as pl, polars_gbt
        >>> df = pl.DataFrame({"x": [0.1, 0.4, 0.8, 0.9] * 50, "y": [0, 0, 1, 1] * 50})
        >>> m = polars_gbt.train(df, target="y", objective="binary:logistic", n_estimators=3)
        >>> import numpy as np, onnxruntime as ort
        >>> s = ort.InferenceSession(m.to_onnx())
        >>> [i.name for i in s.get_inputs()], [o.name for o in s.get_outputs()]
        (['x'], ['value', 'margin'])
        >>> p = s.run(["value"], {"x": df["x"].cast(pl.Float32).to_numpy()})[0]
        >>> bool(np.allclose(p, df.select(pl.col("x").gbt.predict(m))["x"].to_numpy(), atol=1e-6))
        True
        """
        with translated():
            return bytes(_internal.model_to_onnx(self._bytes))

    def save_onnx(self, path: str | Path) -> None:
        """Write :meth:`to_onnx` to ``path`` (``onnxruntime.InferenceSession(path)`` loads it)."""
        Path(path).write_bytes(self.to_onnx())

    def save(self, path: str | Path) -> None:
        """Write the model (versioned, checksummed binary format) to ``path``."""
        Path(path).write_bytes(self._bytes)

    def to_bytes(self) -> bytes:
        return self._bytes

    def to_json(self) -> str:
        """The whole model as readable JSON."""
        return _internal.model_to_json(self._bytes)

    @property
    def num_trees(self) -> int:
        """The trees: one per output and round, or one per round for a vector-leaf model
        (``multi_strategy="multi_output_tree"``, one tree a round whose leaves hold every
        output), as XGBoost counts them and ``trees_to_dataframe`` lists them."""
        return self._summary["num_trees"]

    @property
    def num_rounds(self) -> int:
        """Boosting rounds (trees per output: one tree per class and round for multiclass)."""
        return self._summary["num_rounds"]

    def slice(self, start: int, end: int = 0, step: int = 1) -> Model:
        """The trees of boosting rounds ``start``, ``start + step``, ... below ``end`` (0: the
        last round) as a model, with the same base score: XGBoost's ``booster[start:end:step]``.
        Scoring with a slice equals ``iteration_range=(start, end)``. The evaluation log and
        ``best_iteration`` stay for slices from round 0 by steps of 1.

        Examples
        --------
        >>> import polars as pl, polars_gbt
        >>> df = pl.DataFrame({"a": [0.0, 1.0, 2.0, 3.0] * 25, "y": [0.0, 1.0, 4.0, 9.0] * 25})
        >>> m = polars_gbt.train(df, target="y", n_estimators=10)
        >>> m.slice(0, 4).num_trees, m[2:].num_trees, m[::2].num_trees
        (4, 8, 5)
        """
        for name, v in (("start", start), ("end", end), ("step", step)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"slice {name} must be an integer >= 0, not {v!r}")
        return Model(_internal.model_slice(self._bytes, start, end, step))

    def __getitem__(self, rounds: slice | int) -> Model:
        """``model[a:b:c]``: the rounds a Python slice picks (see ``slice``); ``model[i]``: round i."""
        n = self.num_rounds
        if isinstance(rounds, int) and not isinstance(rounds, bool):
            i = rounds + n if rounds < 0 else rounds
            if not 0 <= i < n:
                raise IndexError(f"round {rounds} is out of range for a model of {n} rounds")
            return self.slice(i, i + 1)
        if not isinstance(rounds, slice):
            raise TypeError(f"a model is indexed by rounds (an int or a slice), not {type(rounds).__name__}")
        start, end, step = rounds.indices(n)
        if step < 1:
            raise ValueError("a model's rounds slice with a positive step")
        if start >= end:
            raise IndexError(f"rounds [{rounds.start}:{rounds.stop}] of a model of {n} rounds hold no round")
        return self.slice(start, end, step)

    @property
    def feature_names(self) -> list[str]:
        return self._summary["feature_names"]

    @property
    def categories(self) -> dict[str, list[str] | None]:
        """Each categorical feature's category names, in the order of their codes: category
        ``names[i]`` has code ``i``. An array in GPU memory (see ``predict``) holds these codes
        in a categorical feature's column. ``None`` for a feature of a model that has no names
        (imported without them), whose codes are the integers it was trained on.

        Examples
        --------
        >>> import polars as pl, polars_gbt
        >>> df = pl.DataFrame({"c": ["b", "a", "c", "a"] * 25, "y": [1.0, 0.0, 2.0, 0.0] * 25})
        >>> polars_gbt.train(df.with_columns(pl.col("c").cast(pl.Categorical)), target="y", n_estimators=2).categories
        {'c': ['a', 'b', 'c']}
        """
        return dict(self._summary["categories"])

    @property
    def params(self) -> dict[str, Any]:
        """Every training parameter by name. For a model imported from XGBoost or LightGBM,
        only what the source model states is set (XGBoost's files keep the objective, its
        parameters, the base score and the number of rounds; LightGBM's also its learning
        rate, leaves, depth, ...); every other parameter is ``None``: unknown."""
        return self._summary["params"]

    @property
    def imported_from(self) -> str | None:
        """``"XGBoost"`` or ``"LightGBM"`` for an imported model, else None."""
        return self._summary["imported_from"]

    @property
    def best_iteration(self) -> int | None:
        return self._summary["best_iteration"]

    def evals_result(self) -> pl.DataFrame:
        """The evaluation log: one row per round, one column per (dataset, metric)."""
        return pl.DataFrame(
            {f"{s['dataset']}-{s['metric']}": s["values"] for s in self._summary["evals_result"]}
        ).with_row_index("round")

    def feature_importance(self, importance_type: str = "gain") -> pl.DataFrame:
        """Importance per feature: ``weight``, ``gain``, ``cover``, ``total_gain`` or ``total_cover``."""
        pairs = _internal.feature_importance(self._bytes, importance_type)
        return pl.DataFrame(
            {"feature": [p[0] for p in pairs], importance_type: [p[1] for p in pairs]}
        ).sort(importance_type, descending=True)

    def trees_to_dataframe(self) -> pl.DataFrame:
        """Every node of every tree, one row each, with XGBoost's ``trees_to_dataframe`` columns
        and meanings.

        Columns (XGBoost 3.4's): ``Tree``, ``Target`` (the output the tree adds to: a class,
        quantile or target; 0 for a one-output model), ``Node``, ``ID`` (``"tree-node"``),
        ``Feature`` (``"Leaf"`` for leaves), ``Split`` (numeric threshold: ``x < Split`` goes to ``Yes``), ``Yes``, ``No``,
        ``Missing`` (children by ``ID``; ``Missing`` takes missing values), ``Gain`` (the
        split's gain; for a leaf, its output with the learning rate applied), ``Cover`` and
        ``Category`` (categorical splits: the categories going to ``Yes``). Where XGBoost
        lists category codes, ``Category`` holds the category names when the model has them.
        A vector-leaf model (``multi_strategy="multi_output_tree"``) lists a round as one tree,
        as XGBoost 3.4 does: its splits once, with a null ``Target``, and each leaf once per
        output, ``Target`` naming the output.

        Examples
        --------
        >>> import polars as pl, polars_gbt
        >>> df = pl.DataFrame({"a": [1.0, 2.0, 3.0, 4.0] * 25, "y": [1.0, 1.0, 3.0, 3.0] * 25})
        >>> t = polars_gbt.train(df, target="y", n_estimators=1, max_depth=1).trees_to_dataframe()
        >>> t.select("Tree", "Node", "ID", "Feature", "Split", "Yes", "No").to_dicts()[0]
        {'Tree': 0, 'Node': 0, 'ID': '0-0', 'Feature': 'a', 'Split': 2.5, 'Yes': '0-1', 'No': '0-2'}
        """
        schema = {
            "Tree": pl.Int64, "Target": pl.Int64, "Node": pl.Int64, "ID": pl.String, "Feature": pl.String,
            "Split": pl.Float64, "Yes": pl.String, "No": pl.String, "Missing": pl.String, "Gain": pl.Float64, "Cover": pl.Float64,
            "Category": pl.List(pl.String),
        }
        # The columns come decoded from Rust (`Model::trees_table`); only their dtypes are set here.
        return pl.DataFrame(_internal.trees_table(self._bytes), schema=schema)

    def predict(
        self,
        data: pl.DataFrame | pl.LazyFrame | Any,
        *,
        output: str = "value",
        device: str | None = None,
        base_margin: pl.Expr | str | Any | None = None,
        iteration_range: tuple[int, int] | None = None,
    ) -> pl.Series | Any:
        """Score a frame (columns are matched by name; extra ones are ignored) on ``device``
        ("cpu", the default, "cuda" or "auto"). ``iteration_range=(start, end)`` scores with
        those rounds' trees only (see ``slice``).

        ``base_margin`` replaces the base score with per-row margins: a column name or
        expression of ``data``, or values (a Series, numpy array or list; n x num_class for
        a multiclass model), as XGBoost's ``base_margin``.

        ``data`` may also be a 2-D array in GPU memory (a cupy array, a torch tensor on
        "cuda", a JAX array on a GPU: anything with ``__dlpack__`` or
        ``__cuda_array_interface__``), float32 or float64, its columns the model's features
        by position (categorical ones holding the model's category codes). It is scored on
        the GPU where it lies, and the scores come back as a device array: cupy for cupy,
        torch for torch, cupy for other libraries (import it with your library's
        ``from_dlpack``); shaped ``(rows,)``, ``(rows, num_class)``, ``(rows, trees)`` for
        leaves, float32, or uint32 (int32 for torch) for classes and leaves. ``device`` is
        then left out (or "cuda"), and ``base_margin`` is not taken. See the user guide's
        "Scoring arrays on the GPU"."""
        from polars_gbt import _device

        if _device.is_device_array(data):
            return _device.predict(
                self._bytes,
                self._digest(),
                len(self.feature_names),
                data,
                output=output,
                device=device,
                base_margin=base_margin,
                iteration_range=iteration_range,
            )
        device = "cpu" if device is None else device
        # A frame's Categorical features go to the plugin as their ids (see _categorical).
        cats: dict[str, list[str]] = {}
        if isinstance(data, pl.DataFrame):
            data, cats = _categorical.as_ids(data, self.feature_names)
        frame = data.lazy() if isinstance(data, pl.DataFrame) else data
        # The schema once: a LazyFrame resolves it on every call.
        names = set(frame.collect_schema().names())
        missing = [f for f in self.feature_names if f not in names]
        if missing:
            raise ValueError(f"columns missing for the model's features: {', '.join(missing)}")
        margin = base_margin
        if base_margin is not None and not isinstance(base_margin, (str, pl.Expr)):
            marker = "__polars_gbt_base_margin"
            frame = frame.with_columns(margin_series(base_margin).alias(marker))
            margin = marker
        expr = pl.col(self.feature_names).gbt.predict(
            self,
            output=output,
            device=device,
            base_margin=margin,
            iteration_range=iteration_range,
            _categorical_names=cats,
        )
        return frame.select(expr.alias("prediction")).collect()["prediction"]

    def contributions(
        self, data: pl.DataFrame | pl.LazyFrame | Any, *, base_margin: Any = None, device: str | None = None
    ) -> pl.DataFrame | Any:
        """SHAP values (exact TreeSHAP) as a frame: a Float32 column per feature, named as the
        feature, and ``bias`` (the expected margin, or ``base_margin``'s row where given); each
        row sums to that row's margin. For a multiclass model, a ``class`` column first and
        one row per (row, class), classes of a row together. ``device`` as in ``predict``.

        For an array in GPU memory (see ``predict``), the values are computed on the GPU and
        come back as a float32 device array of the same library: ``(rows, features + 1)``,
        the features in the model's order and the bias last (XGBoost's ``pred_contribs``),
        or ``(rows, num_class, features + 1)`` for a multiclass model.

        Examples
        --------
        >>> import polars as pl, polars_gbt
        >>> df = pl.DataFrame({"a": [0.0, 1.0, 2.0, 3.0] * 25, "b": [5.0, 1.0, 5.0, 1.0] * 25})
        >>> m = polars_gbt.train(df.with_columns(y=pl.col("a") * 2), target="y", n_estimators=5)
        >>> c = m.contributions(df.head(2))
        >>> c.columns
        ['a', 'b', 'bias']
        >>> c.select(pl.sum_horizontal(pl.all())).to_series().round(4).to_list() == m.predict(df.head(2), output="margin").round(4).to_list()
        True
        """
        from polars_gbt import _device

        if _device.is_device_array(data):
            return self.predict(data, output="contrib", base_margin=base_margin, device=device)
        values = self.predict(data, output="contrib", base_margin=base_margin, device=device)
        names = [*self.feature_names, "bias"]
        if isinstance(values.dtype.inner, pl.Array):  # multiclass: classes x (features + 1)
            k = values.dtype.size
            out = values.explode().arr.to_struct(fields=names).struct.unnest()
            return out.with_columns(pl.Series("class", list(range(k)) * len(values), dtype=pl.UInt32)).select(
                "class", *names
            )
        return values.arr.to_struct(fields=names).struct.unnest()

    def _digest(self) -> str:
        """The bytes' BLAKE2b digest, computed once: it finds the parsed model in the plugin's
        cache without checksumming the bytes on every call (as ``gbt.predict`` sends it)."""
        digest = self.__dict__.get("_bytes_digest")
        if digest is None:
            import hashlib

            digest = self.__dict__["_bytes_digest"] = hashlib.blake2b(self._bytes, digest_size=16).hexdigest()
        return digest

    def __repr__(self) -> str:
        return f"Model(objective={self._summary['objective']!r}, trees={self.num_trees}, features={len(self.feature_names)})"


def margin_series(values: Any) -> pl.Series:
    """Base margins given as values (a Series, a numpy array, a list): one Float32 per row,
    or an ``Array(Float32, k)`` row of ``k`` per row for a 2-D input."""
    if isinstance(values, pl.Series):
        return values
    import numpy as np

    arr = np.asarray(values, dtype=np.float32)
    if arr.ndim == 1:
        return pl.Series(arr)
    if arr.ndim == 2:
        return pl.Series(arr, dtype=pl.Array(pl.Float32, arr.shape[1]))
    raise ValueError(f"base_margin must be 1-D (one margin per row) or 2-D (rows x outputs), not {arr.ndim}-D")


def train(
    data: pl.DataFrame | pl.LazyFrame | Any,
    *,
    target: str | list[str],
    features: list[str] | None = None,
    eval_df: pl.DataFrame | pl.LazyFrame | Any | None = None,
    eval_sets: dict[str, pl.DataFrame | pl.LazyFrame | Any] | None = None,
    **params: Any,
) -> Model:
    """Train on a frame's columns (all but the target when ``features`` is not given).

    ``target`` names the label column, or several (a list): multi-target regression, one
    output per target, as XGBoost fits a 2-D label: one tree a round per target, or with
    ``multi_strategy="multi_output_tree"`` one tree a round whose leaves hold every target's
    value.

    ``data`` may be a Polars ``DataFrame``, a pyarrow ``Table`` / ``RecordBatch`` or a pandas
    frame (Polars imports those without copying), or a source too large for memory, which a
    fit streams without ever collecting it: a ``pl.LazyFrame`` (``pl.scan_parquet(...)``),
    a ``pyarrow.dataset.Dataset``, or a callable returning a fresh Arrow stream (an object
    with ``__arrow_c_stream__``, such as a ``pyarrow.RecordBatchReader``) each time it is
    called. A streamed fit reads its data twice, in batches (cut points, then bins with
    their labels), and gives the same model bytes as the fit on the collected rows; a query
    whose rows come in another order on each read (an unordered join) trains on each row's
    own label, and rows that changed between the reads are a ``DataError``; a one-shot
    stream (a ``RecordBatchReader`` passed itself) is a ``DataError`` saying so.
    ``progress=True`` draws the passes as well as the rounds. On one GPU each batch is
    binned on the device as it streams when the bins fit there; ``max_device_memory`` (bytes, or text such as
    ``"6GB"``) bounds what the fit takes of the GPU, and bins beyond it stay in host memory,
    paged to the GPU as each level reads them (the same model). Over several GPUs
    (``n_gpus``) the host bins the rows once and each GPU takes its share. Continued training
    (``init_model``) collects a source.

    ``eval_df`` (same columns) is evaluated after every round under the name ``valid`` (and
    watched by ``early_stopping_rounds``); ``eval_sets`` (a dict of name to frame) evaluates
    several, each under its name, early stopping watching the last. Evaluation sets may be
    any of the sources above, or a one-shot stream: a streamed fit reads each once, binned
    with the training cut points. Ctrl-C (KeyboardInterrupt) stops the fit after its current
    round (or batch).

    Examples
    --------
    >>> import polars as pl, polars_gbt
    >>> df = pl.DataFrame({"a": [0.0, 1.0] * 50, "y": [0.0, 1.0] * 50})
    >>> polars_gbt.train(df, target="y", objective="binary:logistic", n_estimators=3).num_trees
    3
    """
    import polars_gbt._namespace  # noqa: F401  (registers the gbt namespace)

    if eval_df is not None and eval_sets is not None:
        raise ValueError("give eval_df (one set, named valid) or eval_sets (several, named), not both")
    if is_scipy_sparse(data):
        raise TypeError(
            "train takes frames: make a scipy sparse matrix one with polars_gbt.sparse_frame(X) (its absent "
            "entries missing, as XGBoost reads them), and add the target column: .with_columns(y=...)"
        )
    # pandas sparse columns dense, as XGBoost reads them (Polars cannot read them).
    data = dense_pandas(data)
    eval_df = dense_pandas(eval_df)
    sets = {"valid": eval_df} if eval_df is not None else {k: dense_pandas(v) for k, v in (eval_sets or {}).items()}
    # A source streams (the training rows read twice in batches, each evaluation set once),
    # and so do frames in memory beside one; continued training collects.
    streamed = _streams(params) and (_stream.is_streamed(data) or any(_stream.is_streamed(d) for d in sets.values()))
    if streamed:
        if _stream.is_one_shot(data):
            raise _stream.one_shot_error(data, "data")
        source = _stream.source(data, "data")
        names = source.names
    else:
        frame = _stream.collected(data)
        names = frame.collect_schema().names()
    targets = _target_columns(target, names)
    # Columns that `weight`, `group`, `base_margin` and `label_upper_bound` name or read are
    # inputs of their own, not features (`weight=pl.col("w") * 2` reads `w`).
    inputs: list[str] = []
    for k in ("weight", "group", "base_margin", "label_upper_bound"):
        v = params.get(k)
        if isinstance(v, str):
            inputs.append(v)
        elif isinstance(v, pl.Expr):
            inputs += [n for n in v.meta.root_names() if n not in inputs]
    init = params.get("init_model")
    if features is None and init is not None:
        # Continued training reads the columns the first model was trained on.
        from polars_gbt._namespace import model_bytes

        features = Model.from_bytes(model_bytes(init)).feature_names
    features = features or [n for n in names if n not in targets and n not in inputs]
    label = pl.col(target) if isinstance(target, str) else pl.concat_arr([pl.col(t).cast(pl.Float64) for t in targets])
    # Errors name the target columns as given (each of several targets by its own name), and
    # say that eval_df / eval_sets rows are not training rows.
    input_names: dict[str, Any] = {"target": target if isinstance(target, str) else "target", "targets": targets}
    if sets:
        input_names["eval_set"] = "eval_df" if eval_df is not None else "eval_sets"
    params["_input_names"] = input_names | (params.get("_input_names") or {})
    if streamed:
        evals = {name: _stream.source(d, _eval_name(name, eval_df is not None)) for name, d in sets.items()}
        return _train_streamed(source, features, label, evals, params)
    # Frames in memory are concatenated eagerly, their chunks kept: the plugin then reads the
    # training rows and each set's block in place (the lazy engine would copy a column).
    eager = isinstance(data, pl.DataFrame) and all(isinstance(d, pl.DataFrame) for d in sets.values())
    if sets:
        # One frame, each set's rows marked by a column of its own: the fit holds them out.
        markers = [f"__polars_gbt_eval_{i}" for i in range(len(sets))]

        def marked(part: pl.LazyFrame | pl.DataFrame, which: int | None) -> pl.LazyFrame | pl.DataFrame:
            flags = [pl.lit(i == which).alias(m) for i, m in enumerate(markers)]
            return part.select(*features, *targets, *inputs).with_columns(flags)

        if eager:
            parts = [marked(data, None)] + [marked(d, i) for i, d in enumerate(sets.values())]
            frame = pl.concat(parts, how="vertical_relaxed", rechunk=False)
        else:
            parts = [marked(frame, None)] + [marked(_stream.collected(d), i) for i, d in enumerate(sets.values())]
            frame = pl.concat(parts, how="vertical_relaxed")
        params["eval_set"] = {name: pl.col(m) for name, m in zip(sets, markers)}
    in_memory = isinstance(data, pl.DataFrame) and not sets
    if in_memory:
        # A Categorical feature goes to the plugin as its ids (see _categorical).
        data, params["_categorical_names"] = _categorical.as_ids(data, features)
    fit = pl.col(features).gbt.fit(label, **params).alias("model")
    if in_memory or eager:
        # Eagerly: the lazy engine copies one input column of this query (80 MB at 20M rows),
        # and a fit's peak memory is bounded (docs/reliability.md).
        rows = data if in_memory else frame

        def query() -> pl.DataFrame:
            return rows.select(fit)
    else:
        query = frame.select(fit).collect
    with translated():
        out = run_interruptibly(query)
    return Model.from_bytes(out["model"][0])


def _eval_name(name: str, single: bool) -> str:
    """How errors name an evaluation set: ``eval_df``, or ``eval_sets["name"]``."""
    return "eval_df" if single else f"eval_sets[{name!r}]"


def _streams(params: dict[str, Any]) -> bool:
    """Whether a fit of ``params`` streams a lazy source: any fit but a continued one (the
    CPU; one GPU or several, which take the rows binned on the host, each its share; a Dask
    worker, which streams its own partitions)."""
    return params.get("init_model") is None


def _train_streamed(
    data: _stream.Source,
    features: list[str],
    label: pl.Expr,
    evals: dict[str, _stream.Source],
    params: dict[str, Any],
) -> Model:
    """A fit on ``data`` read in batches twice (pass 1: cut points, categories and a digest
    of the per-row inputs; pass 2: each batch binned into the training matrix, its per-row
    targets beside its bins), so that the float columns never exist whole, evaluating
    ``evals`` (each read once, binned with the training cut points)."""
    from polars_gbt._namespace import fit_arguments

    args, kwargs = fit_arguments(pl.col(features), label, evaluates=bool(evals), **params)
    # The features by name, every other input under a name of its own (two literals would clash).
    columns = [args[0], *(a.alias(f"__polars_gbt_input_{i}") for i, a in enumerate(args[1:]))]
    # The columns the inputs read, which are all an Arrow source decodes (None: an input
    # whose columns cannot be told, such as a selector, reads them all).
    reads: list[str] | None = list(features)
    for a in args[1:]:
        roots = a.meta.root_names()
        if not roots and not a.meta.is_literal(allow_aliasing=True):
            reads = None
            break
        reads += roots
    with translated():
        n_rows, open_pass = data.passes(columns, reads)
        eval_passes = [(name, *source.passes(columns, reads)) for name, source in evals.items()]
        out = run_interruptibly(lambda: _internal.train_stream(dumps(kwargs), n_rows, open_pass, eval_passes))
    return Model.from_bytes(bytes(out))


def _target_columns(target: str | list[str], names: list[str]) -> list[str]:
    """The label column, or several (multi-target regression, one output per target), each
    checked to be among `names` (a ColumnError, which is a ValueError, otherwise)."""
    targets = [target] if isinstance(target, str) else list(target)
    if not targets:
        raise ColumnError("target names no column")
    for t in targets:
        if t not in names:
            raise ColumnError(f"target column {t!r} not found")
    return targets


def _lazy(data: Any) -> pl.LazyFrame:
    if isinstance(data, pl.LazyFrame):
        return data
    return (data if isinstance(data, pl.DataFrame) else pl.DataFrame(data)).lazy()
