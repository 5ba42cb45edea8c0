"""Property tests (hypothesis) through the Python API over random frames: any mix of
numeric and categorical columns, missing rates from 0 to 100%, extreme and duplicate values,
one to a few hundred rows, regression, binary (possibly a single class) and multiclass
labels. Training either succeeds or raises a GbtError; predictions are finite; the model's
bytes round-trip; reordering columns, splitting the frame into chunks and unseen categories
change nothing that they should not. `HYPOTHESIS_MAX_EXAMPLES` sets the number of frames."""

from __future__ import annotations

import os

import numpy as np
import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polars_gbt
from polars_gbt import GbtError, Model

EXAMPLES = int(os.environ.get("HYPOTHESIS_MAX_EXAMPLES", "60"))
SPECIAL = [0.0, -0.0, 1.0, 3.4e38, -3.4e38, 1e-45, float("inf"), float("-inf")]


@st.composite
def frames(draw):
    n = draw(st.integers(1, 300))
    n_num = draw(st.integers(1, 4))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    columns = {}
    for j in range(n_num):
        kind = draw(st.sampled_from(["normal", "constant", "few", "special"]))
        x = {
            "normal": rng.normal(size=n),
            "constant": np.full(n, 2.5),
            "few": rng.choice([1.0, 2.0, 3.0], size=n),
            "special": rng.choice(SPECIAL, size=n),
        }[kind]
        missing = draw(st.sampled_from([0.0, 0.1, 0.5, 1.0]))
        values = [None if rng.random() < missing else float(v) for v in x]
        columns[f"x{j}"] = pl.Series(values, dtype=pl.Float64)
    if draw(st.booleans()):
        cats = rng.choice(["a", "b", "c", "d"], size=n).tolist()
        columns["c"] = pl.Series([None if rng.random() < 0.1 else v for v in cats], dtype=pl.Categorical)
    task = draw(st.sampled_from(["reg:squarederror", "binary:logistic", "multi:softprob"]))
    if task == "reg:squarederror":
        y = rng.normal(size=n)
    elif task == "binary:logistic":
        y = (rng.random(n) < 0.5).astype(float) if draw(st.booleans()) else np.ones(n)
    else:
        y = rng.integers(0, 3, size=n).astype(float)
    return pl.DataFrame(columns).with_columns(y=pl.Series(y)), task


def fit(df: pl.DataFrame, task: str) -> Model | None:
    params = dict(objective=task, n_estimators=3, max_depth=3, min_child_weight=0.0)
    if task == "multi:softprob":
        params["num_class"] = 3
    try:
        return polars_gbt.train(df, target="y", **params)
    except GbtError:
        return None  # a clear error (e.g. every feature entirely missing) is allowed


def scores(model: Model, df: pl.DataFrame) -> np.ndarray:
    out = model.predict(df, output="margin")
    return np.stack(out.to_list()) if isinstance(out.dtype, pl.Array) else out.to_numpy()


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frames())
def test_random_frames_train_and_predict_consistently(case):
    df, task = case
    model = fit(df, task)
    if model is None:
        return
    p = scores(model, df)
    assert np.isfinite(p).all()
    # Bytes round-trip exactly, and so do predictions.
    again = Model.from_bytes(model.to_bytes())
    assert again.to_bytes() == model.to_bytes()
    assert np.array_equal(scores(again, df), p)
    # Columns in reverse order bind by name.
    assert np.array_equal(scores(model, df.select(df.columns[::-1])), p)
    # A frame in many chunks predicts the same.
    if df.height > 3:
        parts = [df.slice(i, 2) for i in range(0, df.height, 2)]
        assert np.array_equal(scores(model, pl.concat(parts, rechunk=False)), p)
    # Categories never seen in training still get finite scores.
    if "c" in df.columns:
        unseen = df.with_columns(pl.lit("zzz").cast(pl.Categorical).alias("c"))
        assert np.isfinite(scores(model, unseen)).all()
