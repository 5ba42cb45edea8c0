"""GPU training benchmark: polars-gbt ("ours", device="cuda") against XGBoost's GPU ``hist``.

Runs on the device machine (an NVIDIA GPU; see docs/benchmarks.md for the command), in one
process for XGBoost and one subprocess per fit of ours, on the same data in the same run:

* data: Higgs-like, ``higgs_like.make(rows + test, f=features, seed=0)`` (28 float32 features by default, ~5%
  missing in 4 columns); the first ``rows`` train, the last ``test`` score the AUC;
* settings for both: binary logistic, ``rounds`` rounds, depth-wise trees of ``--depths``,
  256 bins, learning rate 0.1;
* XGBoost: ``QuantileDMatrix`` from host numpy (timed: "ingest"), then ``xgb.train``
  (timed: "train"), device="cuda", tree_method="hist";
* ours: ``bench_gpu`` (examples/bench_gpu.rs) reads column-major files into Arrow arrays in
  host memory and calls ``train``: "total" is Arrow columns to a trained model (cut points,
  upload, binning and every round); "train" is total minus the first round's set-up,
  i.e. the steady-state time per tree times the rounds;
* device memory: NVML is polled every 5 ms during each fit; the peak above the idle level
  is reported for both.

Usage (on the device machine):
    PYTHONPATH=.peers/site python3 bench/gpu_bench.py --ours PATH/bench_gpu [--rows N] [--rounds R]
Without XGBoost importable (``--skip-xgb``), only ours runs. Prints a markdown table; asserts
nothing.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from higgs_like import make  # noqa: E402


class MemoryPoll:
    """Peak GPU memory in use (MiB) while the block runs, through NVML."""

    def __init__(self):
        import pynvml

        pynvml.nvmlInit()
        self.nvml = pynvml
        self.handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        self.idle = self.used()

    def used(self):
        return self.nvml.nvmlDeviceGetMemoryInfo(self.handle).used / 2**20

    def __enter__(self):
        self.peak, self.running = self.used(), True
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.thread.start()
        return self

    def _poll(self):
        while self.running:
            self.peak = max(self.peak, self.used())
            time.sleep(0.005)

    def __exit__(self, *exc):
        self.running = False
        self.thread.join()

    @property
    def above_idle(self):
        return self.peak - self.idle


def auc(y, p):
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y, p))


def run_ours(binary, data_dir, depth, rounds, profile=False, extra_env=None):
    env = dict(os.environ, POLARS_GBT_PROFILE="1" if profile else "0", **(extra_env or {}))
    cmd = [binary, str(data_dir), "--max-depth", str(depth), "--rounds", str(rounds)]
    with MemoryPoll() as mem:
        out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise SystemExit(f"ours failed: {out.stderr}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["mem_mib"] = mem.above_idle
    result["profile"] = [l for l in out.stderr.splitlines() if "profile" in l]
    return result


def run_xgb(Xtr, ytr, Xte, yte, depth, rounds):
    import xgboost as xgb

    params = dict(objective="binary:logistic", tree_method="hist", device="cuda", max_depth=depth,
                  eta=0.1, max_bin=256, eval_metric="auc")
    with MemoryPoll() as mem:
        t = time.perf_counter()
        dtrain = xgb.QuantileDMatrix(Xtr, ytr, max_bin=256)
        ingest = time.perf_counter() - t
        t = time.perf_counter()
        booster = xgb.train(params, dtrain, rounds)
        train = time.perf_counter() - t
    p = booster.inplace_predict(Xte)
    p = p.get() if hasattr(p, "get") else np.asarray(p)
    del dtrain, booster
    return dict(ingest_s=ingest, train_s=train, auc=auc(yte, p), mem_mib=mem.above_idle)


def write_files(d, Xtr, ytr, Xte, yte):
    """The files bench_gpu reads: column-major float32 features, labels, sizes."""
    d.mkdir(parents=True, exist_ok=True)
    np.ascontiguousarray(Xtr.T).tofile(d / "X_train.f32")
    np.ascontiguousarray(Xte.T).tofile(d / "X_test.f32")
    ytr.tofile(d / "y_train.f32")
    yte.tofile(d / "y_test.f32")
    (d / "meta.json").write_text(json.dumps({"n_train": len(ytr), "n_test": len(yte), "n_features": Xtr.shape[1]}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", required=True)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--test", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=500)
    ap.add_argument("--features", type=int, default=28, help="2000: the wide (Epsilon) shape of issue 34")
    ap.add_argument("--depths", type=int, nargs="+", default=[8, 10])
    ap.add_argument("--skip-xgb", action="store_true")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--write-only", metavar="DIR", help="only write the data files for bench_gpu into DIR (for profilers)")
    ap.add_argument("--variant", action="append", default=[],
                    help="also time ours with this environment setting (KEY=VALUE), for tuning")
    a = ap.parse_args()

    t = time.perf_counter()
    X, y = make(a.rows + a.test, f=a.features, seed=0)
    Xtr, ytr, Xte, yte = X[: a.rows], y[: a.rows], X[a.rows:], y[a.rows:]
    print(f"data: {a.rows} x {X.shape[1]} train, {a.test} test, made in {time.perf_counter() - t:.1f} s", flush=True)
    results = {"rows": a.rows, "rounds": a.rounds, "depths": {}}
    if a.write_only:
        write_files(Path(a.write_only), Xtr, ytr, Xte, yte)
        return
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        write_files(d, Xtr, ytr, Xte, yte)
        for depth in a.depths:
            r = {"ours": run_ours(a.ours, d, depth, a.rounds)}
            r["ours_profile"] = run_ours(a.ours, d, depth, a.rounds, profile=True)["profile"]
            print(f"depth {depth} ours: {json.dumps(r['ours'])}", flush=True)
            for line in r["ours_profile"]:
                print("  " + line, flush=True)
            for v in a.variant:
                key, value = v.split("=", 1)
                rv = run_ours(a.ours, d, depth, a.rounds, extra_env={key: value})
                print(f"depth {depth} ours with {v}: {rv['per_tree_s'] * 1e3:.2f} ms/tree, AUC {rv['auc']:.4f}", flush=True)
            if not a.skip_xgb:
                r["xgb"] = run_xgb(Xtr, ytr, Xte, yte, depth, a.rounds)
                print(f"depth {depth} xgboost: {json.dumps(r['xgb'])}", flush=True)
            results["depths"][depth] = r

    print()
    print(f"| depth | ours train (s) | ours ms/tree | ours total from Arrow (s) | XGBoost train (s) | XGBoost ms/tree "
          f"| XGBoost QuantileDMatrix (s) | train ratio (ours/XGB) | AUC ours | AUC XGB | GPU MiB ours | GPU MiB XGB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for depth, r in results["depths"].items():
        o, x = r["ours"], r.get("xgb")
        train = o["per_tree_s"] * a.rounds
        cells = [depth, f"{train:.2f}", f"{o['per_tree_s'] * 1e3:.2f}", f"{o['total_s']:.2f}"]
        if x:
            cells += [f"{x['train_s']:.2f}", f"{x['train_s'] / a.rounds * 1e3:.2f}", f"{x['ingest_s']:.2f}",
                      f"{train / x['train_s']:.2f}", f"{o['auc']:.4f}", f"{x['auc']:.4f}", f"{o['mem_mib']:.0f}",
                      f"{x['mem_mib']:.0f}"]
        else:
            cells += ["-", "-", "-", "-", f"{o['auc']:.4f}", "-", f"{o['mem_mib']:.0f}", "-"]
        print("| " + " | ".join(str(c) for c in cells) + " |")
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
