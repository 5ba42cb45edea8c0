"""Many fits at once (issue 6, point 4): a group_by with 1,000 small groups, and 8 Python
threads fitting and predicting together, finish without deadlock and give exactly the models
and predictions of sequential runs (training is deterministic, so any interference would
show as a difference)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import polars as pl
from conftest import FEATURES

import polars_gbt

PARAMS = dict(objective="reg:squarederror", n_estimators=3, max_depth=3, seed=0)


def test_a_thousand_group_fits_equal_sequential_ones(train_df):
    df = pl.concat([train_df] * 3).with_columns(g=pl.int_range(pl.len()) % 1000)  # ~21 rows a group
    start = time.perf_counter()
    fits = df.group_by("g").agg(pl.col(FEATURES[:6]).gbt.fit("y", **PARAMS).alias("m")).sort("g")
    elapsed = time.perf_counter() - start
    assert fits.height == 1000
    assert elapsed < 120, f"1,000 group fits took {elapsed:.0f} s"
    # A sample of the groups, refitted one at a time, gives byte-identical models.
    for g in (0, 1, 499, 998, 999):
        alone = df.filter(pl.col("g") == g).select(pl.col(FEATURES[:6]).gbt.fit("y", **PARAMS)).item()
        assert fits["m"][g] == alone, f"group {g} differs from its sequential fit"


def test_eight_threads_fit_and_predict_as_if_alone(train_df):
    frames = [train_df.sample(fraction=0.5, seed=s) for s in range(8)]

    def job(i: int) -> tuple[bytes, np.ndarray]:
        model = frames[i].select(pl.col(FEATURES).gbt.fit("y", **dict(PARAMS, n_estimators=10, seed=i))).item()
        scored = train_df.select(pl.col(FEATURES).gbt.predict(model))["f0"].to_numpy()
        return model, scored

    sequential = [job(i) for i in range(8)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        concurrent = list(pool.map(job, range(8)))
    for i, ((m1, p1), (m2, p2)) in enumerate(zip(sequential, concurrent)):
        assert m1 == m2, f"thread {i}: the model differs from the sequential one"
        assert np.array_equal(p1, p2), f"thread {i}: predictions differ"
    # The models are all different (each thread really fitted its own data).
    assert len({m for m, _ in concurrent}) == 8
    assert polars_gbt.Model.from_bytes(concurrent[0][0]).num_trees == 10
