"""CPU training benchmark: polars-gbt ("ours") against xgboost-cpu and LightGBM.

What it measures
----------------
Higgs-like synthetic data from ``bench/higgs_like.py`` (our copy of the team's
generator): ``make(rows + 200_000, seed=0)``, the first ``rows`` rows train
(default 1,000,000), the last 200,000 test. Settings for every library:
binary logistic loss, 100 rounds, depth-wise trees of max depth 8, 256 bins,
learning rate 0.1, 2 threads. For each library it times, once each:

* ingest  - numpy arrays -> the library's training structure
  (XGBoost: ``QuantileDMatrix(max_bin=256)``, XGBoost's fastest path into
  ``hist``; LightGBM: ``lgb.Dataset(...).construct()``; ours: what
  ``bench_cpu`` reports);
* train   - the boosting rounds (``xgb.train`` / ``lgb.train``);
* predict - probabilities for the 200k test rows (XGBoost ``inplace_predict``,
  so no test DMatrix is built; LightGBM ``Booster.predict``);
and the test AUC, always recomputed here with the same numpy function.

Parameter mapping (XGBoost -> LightGBM)
---------------------------------------
  tree_method hist, grow_policy depthwise, max_depth 8
                           -> max_depth 8, num_leaves 255 (leaf-wise growth;
                              2**8 = 256 would be the full tree, 255 is the
                              usual setting for this benchmark)
  max_bin 256              -> max_bin 255 (LightGBM's default; --lgb-max-bin to change)
  eta 0.1                  -> learning_rate 0.1
  lambda 1 (default)       -> lambda_l2 1
  min_child_weight 1       -> min_sum_hessian_in_leaf 1
  (no row-count limit)     -> min_data_in_leaf left at LightGBM's default 20
  nthread 2                -> num_threads 2
LightGBM bins from a sample of 200,000 rows (bin_construct_sample_cnt default);
QuantileDMatrix sketches every row.

Ours: the contract with ``bench_cpu``
-------------------------------------
The harness writes into a temporary directory ``X_train.f32`` and ``X_test.f32``
(float32, COLUMN-major: ``X.T.copy(order="C").tofile``, NaN = missing),
``y_train.f32``, ``y_test.f32`` and ``meta.json`` = {"n_train", "n_test",
"n_features": 28}, then runs

    bench_cpu DIR --rounds 100 --max-depth 8 --max-bin 256 --threads 2 --learning-rate 0.1

which must print exactly one JSON line on stdout:
{"ingest_s": float, "train_s": float, "predict_s": float, "auc": float,
 "predictions": "PATH of a float32 file with the n_test test probabilities"}.
The binary is ``--ours PATH``, else ``$CARGO_TARGET_DIR/release/examples/bench_cpu``,
else ``target/release/examples/bench_cpu`` (build it with
``cargo build --release --example bench_cpu``).

How to run
----------
    .venv-bench/bin/python bench/cpu_bench.py                 # all three; exit 1 if ours is missing
    .venv-bench/bin/python bench/cpu_bench.py --peers-only    # XGBoost and LightGBM only
Options: --rows N (train rows), --rounds R, --ours PATH, --lgb-max-bin B, --threads T,
--write-only DIR (only write the data files for bench_cpu, to run it alone).
This is a benchmark, not a test: it prints a markdown table and asserts nothing.
The machine may be shared: for each library the harness also prints how much CPU
time other processes took during its run; figures with a large share are not clean.
"""
from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import lightgbm as lgb
import numpy as np
import xgboost as xgb

sys.path.insert(0, str(Path(__file__).resolve().parent))
import higgs_like  # noqa: E402  (our copy of the team's generator)
from measure import auc, cpu_model, timed  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
N_TEST = 200_000
MAX_DEPTH = 8
MAX_BIN = 256
LEARNING_RATE = 0.1
THREADS = 2  # --threads sets it
SEED = 0


@dataclass
class Row:
    library: str
    ingest_s: float
    train_s: float
    predict_s: float
    auc: float
    note: str = ""


class OtherLoad:
    """CPU time spent by everything else on the machine while a block runs:
    busy time from /proc/stat minus this process's own CPU time (children
    included). On a shared 2-core machine this tells whether a figure is clean.
    Linux only; elsewhere it reports nothing."""

    def __enter__(self):
        self.start = self._sample()
        return self

    def __exit__(self, *exc):
        end = self._sample()
        self.cpu_s = self.wall_s = None
        if self.start and end:
            busy, mine, wall = (e - s for e, s in zip(end, self.start))
            self.cpu_s, self.wall_s = max(busy - mine, 0.0), wall

    @staticmethod
    def _sample():
        try:
            fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
        except OSError:
            return None
        v = [int(x) for x in fields]
        busy = (sum(v[:8]) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")  # all but idle, iowait
        t = os.times()
        return busy, t.user + t.system + t.children_user + t.children_system, time.perf_counter()

    def describe(self) -> str:
        if self.cpu_s is None:
            return "other load: unknown"
        share = self.cpu_s / (self.wall_s * (os.cpu_count() or 1))
        return f"other load on the machine during its run: {self.cpu_s:.1f} CPU-s ({share:.0%} of all cores)"


def run_xgboost(Xtr, ytr, Xte, yte, rounds: int) -> Row:
    params = {
        "objective": "binary:logistic",
        "tree_method": "hist",
        "grow_policy": "depthwise",
        "max_depth": MAX_DEPTH,
        "max_bin": MAX_BIN,
        "eta": LEARNING_RATE,
        "lambda": 1.0,
        "min_child_weight": 1.0,
        "nthread": THREADS,
        "seed": SEED,
    }
    dtrain, t_ingest = timed(lambda: xgb.QuantileDMatrix(Xtr, label=ytr, max_bin=MAX_BIN, nthread=THREADS))
    bst, t_train = timed(lambda: xgb.train(params, dtrain, num_boost_round=rounds))
    del dtrain
    pred, t_pred = timed(lambda: bst.inplace_predict(Xte))
    return Row(f"xgboost-cpu {xgb.__version__}", t_ingest, t_train, t_pred, auc(yte, pred))


def run_lightgbm(Xtr, ytr, Xte, yte, rounds: int, max_bin: int) -> Row:
    params = {
        "objective": "binary",
        "max_depth": MAX_DEPTH,
        "num_leaves": 255,
        "max_bin": max_bin,
        "learning_rate": LEARNING_RATE,
        "lambda_l2": 1.0,
        "min_sum_hessian_in_leaf": 1.0,
        "num_threads": THREADS,
        "seed": SEED,
        "verbose": -1,
    }
    dtrain, t_ingest = timed(lambda: lgb.Dataset(Xtr, label=ytr, params=params).construct())
    bst, t_train = timed(lambda: lgb.train(params, dtrain, num_boost_round=rounds))
    del dtrain
    pred, t_pred = timed(lambda: bst.predict(Xte, num_threads=THREADS))
    return Row(f"lightgbm {lgb.__version__}", t_ingest, t_train, t_pred, auc(yte, pred),
               note=f"max_bin {max_bin}")


def default_ours() -> Path:
    target = os.environ.get("CARGO_TARGET_DIR")
    if target:
        p = Path(target) / "release/examples/bench_cpu"
        if p.exists():
            return p
    return REPO / "target/release/examples/bench_cpu"


def write_data(d: Path, Xtr, ytr, Xte, yte) -> None:
    """Writes the data files bench_cpu reads (the contract above) into `d`."""
    d.mkdir(parents=True, exist_ok=True)
    Xtr.T.copy(order="C").tofile(d / "X_train.f32")
    ytr.astype(np.float32).tofile(d / "y_train.f32")
    Xte.T.copy(order="C").tofile(d / "X_test.f32")
    yte.astype(np.float32).tofile(d / "y_test.f32")
    (d / "meta.json").write_text(json.dumps(
        {"n_train": len(ytr), "n_test": len(yte), "n_features": Xtr.shape[1]}))


def run_ours(binary: Path, Xtr, ytr, Xte, yte, rounds: int) -> tuple[Row, str]:
    """Runs bench_cpu on the data written per the contract; returns (row, command)."""
    with tempfile.TemporaryDirectory(prefix="polars-gbt-bench-") as d:
        d = Path(d)
        write_data(d, Xtr, ytr, Xte, yte)
        cmd = [str(binary), str(d), "--rounds", str(rounds), "--max-depth", str(MAX_DEPTH),
               "--max-bin", str(MAX_BIN), "--threads", str(THREADS),
               "--learning-rate", str(LEARNING_RATE)]
        proc, wall = timed(lambda: subprocess.run(cmd, capture_output=True, text=True))
        if proc.returncode != 0:
            raise RuntimeError(f"bench_cpu exited {proc.returncode}\nstderr:\n{proc.stderr}")
        lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
        if len(lines) != 1:
            raise RuntimeError(f"bench_cpu must print exactly one JSON line on stdout, got:\n{proc.stdout}")
        out = json.loads(lines[0])
        pred = np.fromfile(out["predictions"], dtype=np.float32)
        if pred.shape != (len(yte),):
            raise RuntimeError(f"predictions file holds {pred.size} values, expected {len(yte)}")
        ours_auc = auc(yte, pred)
        note = f"whole process {wall:.1f} s"
        if abs(ours_auc - float(out["auc"])) > 1e-6:
            note += f"; bench_cpu reported AUC {float(out['auc']):.6f}, recomputed {ours_auc:.6f}"
        row = Row("polars-gbt (ours)", float(out["ingest_s"]), float(out["train_s"]),
                  float(out["predict_s"]), ours_auc, note)
    return row, shlex.join(cmd)


def print_table(rows: list[Row], n_test: int) -> None:
    peers = [r for r in rows if not r.library.startswith("polars-gbt")]
    fastest_train = min(r.train_s for r in peers)
    lgb_ingest = next(r.ingest_s for r in peers if r.library.startswith("lightgbm"))
    xgb_pred = next(r.predict_s for r in peers if r.library.startswith("xgboost"))
    print(f"| library | ingest s | train s | predict {n_test // 1000}k ms | test AUC "
          "| train time vs fastest peer (ratio) | ingest vs LightGBM | predict vs xgboost |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r.library} | {r.ingest_s:.2f} | {r.train_s:.2f} | {r.predict_s * 1e3:.0f} "
              f"| {r.auc:.4f} | {r.train_s / fastest_train:.2f} | {r.ingest_s / lgb_ingest:.2f} "
              f"| {r.predict_s / xgb_pred:.2f} |")


def main() -> int:
    ap = argparse.ArgumentParser(description="CPU training benchmark on Higgs-like data "
                                 "(see the module docstring).")
    ap.add_argument("--rows", type=int, default=1_000_000, help="training rows (test is always 200k)")
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--peers-only", action="store_true", help="run XGBoost and LightGBM only")
    ap.add_argument("--ours", type=Path, default=None, help="path of the bench_cpu example binary")
    ap.add_argument("--lgb-max-bin", type=int, default=255, help="LightGBM max_bin (default 255)")
    ap.add_argument("--threads", type=int, default=2, help="threads for every library (default 2)")
    ap.add_argument("--write-only", metavar="DIR", type=Path,
                    help="only write the data files for bench_cpu into DIR (to run it alone, e.g. "
                         "with POLARS_GBT_PROFILE=1 or under a profiler)")
    args = ap.parse_args()
    global THREADS
    THREADS = args.threads

    print(f"command: python {shlex.join(sys.argv)}")
    print(f"date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}")
    print(f"machine: {cpu_model()}, nproc {os.cpu_count()}, {platform.machine()}, "
          f"{platform.system()} {platform.release()}")
    print(f"versions: python {platform.python_version()}, numpy {np.__version__}, "
          f"xgboost {xgb.__version__}, lightgbm {lgb.__version__}")
    print(f"settings: {args.rounds} rounds, binary logistic, depthwise max_depth {MAX_DEPTH}, "
          f"{MAX_BIN} bins (LightGBM {args.lgb_max_bin}), learning_rate {LEARNING_RATE}, "
          f"{THREADS} threads")

    (X, y), t_gen = timed(lambda: higgs_like.make(args.rows + N_TEST, seed=0))
    Xtr, ytr, Xte, yte = X[:args.rows], y[:args.rows], X[args.rows:], y[args.rows:]
    print(f"data: higgs_like.make({args.rows + N_TEST}, seed=0) in {t_gen:.1f} s; "
          f"train {Xtr.shape}, test {Xte.shape}\n")
    if args.write_only:
        write_data(args.write_only, Xtr, ytr, Xte, yte)
        print(f"wrote {args.write_only}")
        return 0

    rows = []
    with OtherLoad() as load:
        rows.append(run_xgboost(Xtr, ytr, Xte, yte, args.rounds))
    rows[-1].note = load.describe()
    gc.collect()
    with OtherLoad() as load:
        rows.append(run_lightgbm(Xtr, ytr, Xte, yte, args.rounds, args.lgb_max_bin))
    rows[-1].note += "; " + load.describe()
    gc.collect()

    status, extra = 0, []
    if args.peers_only:
        extra.append("ours: skipped (--peers-only)")
    else:
        binary = args.ours or default_ours()
        if not binary.exists():
            extra.append(f"ours: NOT FOUND at {binary} "
                         "(build it with `cargo build --release --example bench_cpu`)")
            status = 1
        else:
            with OtherLoad() as load:
                row, cmd = run_ours(binary, Xtr, ytr, Xte, yte, args.rounds)
            row.note += "; " + load.describe()
            rows.append(row)
            extra.append(f"ours: {cmd}")

    print_table(rows, len(yte))
    print()
    for r in rows:
        if r.note:
            print(f"- {r.library}: {r.note}")
    for line in extra:
        print(f"- {line}")
    return status


if __name__ == "__main__":
    sys.exit(main())
