"""What a Polars ``Categorical`` column costs a fit and a scoring, beside the same column as an
``Enum`` (issue 61): the flight-delay frame of ``bench/flights.py`` tiled ``--tile`` times with
``pl.concat`` (one chunk a copy, as users build it), its 6 categorical columns as
``Categorical`` (Polars 2's global categories) or as ``Enum``.

Each fit is one tree of depth 1 (``--rounds``/``--depth`` change that), so that the input's
cost shows; each scoring is ``gbt.predict`` of that model over the whole frame. Rows:

* ``25 columns``: the 19 numeric and the 6 categorical features (issue 61 counts 18 numeric);
* ``19 numeric``: the numeric features alone (no categorical cost);
* ``6 categorical``: the categorical features alone.

A fit goes through ``frame.select(pl.col(features).gbt.fit(...))`` (``--api expression``, the
default), where Polars hands a ``Categorical`` to the plugin through its own export, or through
``polars_gbt.train(frame, ...)`` and ``Model.predict(frame)`` (``--api train``), which hand a
frame's ``Categorical`` columns over as their ids and their categories' names. Each cell is the median of
``--repeats`` runs, Categorical and Enum alternating. Run with
``POLARS_GBT_PROFILE=1`` to see each fit's profile lines on stderr (Polars' work before the
plugin's call, the plugin's import of its inputs, its inputs to datasets).

Usage:
  .venv/bin/python bench/categorical_ingest.py [--tile 20] [--repeats 5] [--device cpu|cuda] [--api train]
Prints a markdown table; asserts nothing.
"""
from __future__ import annotations

import argparse
import datetime
import platform
import statistics
import sys
import time
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))
from flights import CATEGORICAL, DEFAULT_DATA, FEATURES, NUMERIC, TARGET, build  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--tile", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--depth", type=int, default=1)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--api", choices=["expression", "train"], default="expression")
    a = ap.parse_args()
    import polars_gbt

    train, _ = build(a.data)
    enum = pl.concat([train] * a.tile, rechunk=False)
    frames = {
        "Enum": enum,
        "Categorical": enum.with_columns(pl.col(c).cast(pl.String).cast(pl.Categorical) for c in CATEGORICAL),
    }
    params = dict(objective="binary:logistic", n_estimators=a.rounds, max_depth=a.depth, device=a.device)
    sets = {f"{len(FEATURES)} columns": FEATURES, f"{len(NUMERIC)} numeric": NUMERIC, "6 categorical": CATEGORICAL}
    print(f"# {enum.height:,} rows in {enum[CATEGORICAL[0]].n_chunks()} chunks; {platform.node()}, "
          f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, polars {pl.__version__}, "
          f"device {a.device}, {' '.join(sys.argv[1:])}", flush=True)

    def fit(frame: pl.DataFrame, features: list[str]) -> bytes:
        if a.api == "train":
            return polars_gbt.train(frame, target=TARGET, features=features, **params).to_bytes()
        return frame.select(pl.col(features).gbt.fit(TARGET, **params)).item()

    def score(frame: pl.DataFrame, features: list[str], model: bytes) -> pl.Series:
        if a.api == "train":
            return polars_gbt.Model.from_bytes(model).predict(frame, device=a.device)
        return frame.select(pl.col(features).gbt.predict(model, device=a.device)).to_series()

    fit(enum.head(10_000), FEATURES)  # warm-up: thread pools, the GPU's context and kernels
    rows = []
    for name, features in sets.items():
        times: dict[str, dict[str, list[float]]] = {d: {"fit": [], "score": []} for d in frames}
        for _ in range(a.repeats):
            for dtype, frame in frames.items():
                t = time.perf_counter()
                model = fit(frame, features)
                times[dtype]["fit"].append(time.perf_counter() - t)
                t = time.perf_counter()
                score(frame, features, model)
                times[dtype]["score"].append(time.perf_counter() - t)
        med = {d: {k: statistics.median(v) for k, v in t.items()} for d, t in times.items()}
        rows.append((name, med))
        print(f"{name}: {med}", flush=True)
    print("\n| columns | fit, Categorical (s) | fit, Enum (s) | ratio | score, Categorical (s) | score, Enum (s) | ratio |")
    print("|---|---|---|---|---|---|---|")
    for name, m in rows:
        c, e = m["Categorical"], m["Enum"]
        print(f"| {name} | {c['fit']:.3f} | {e['fit']:.3f} | {c['fit'] / e['fit']:.2f} | "
              f"{c['score']:.3f} | {e['score']:.3f} | {c['score'] / e['score']:.2f} |")


if __name__ == "__main__":
    main()
