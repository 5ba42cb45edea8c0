"""Two builds of polars-gbt against each other on the GPU: the same training and prediction
benchmarks, alternating old and new in one run on one card, medians of 5 each. Issue 32 asks
that a refactor leave both at most 3% slower; this prints the table that says so.

* training: ``bench_gpu`` (examples/bench_gpu.rs) on Higgs-like rows (``higgs_like.make``),
  binary logistic, depth 8, 256 bins; "total" is Arrow columns in host memory to a model,
  "per tree" the steady state after the first round;
* prediction: ``bench_predict`` (examples/bench_predict.rs) on a forest of depth 8 trained by
  the new build (``bench_gpu --save``), scored by both builds: "device" is the kernel time on
  rows already on the GPU (events, median of 10), "host" Arrow columns to probabilities.

Usage (on the device machine, builds from scripts/gpu-build.sh of each commit):
    python3 bench/compare_builds.py OLD_DIR NEW_DIR [--rows N] [--rounds R] [--repeats K]
Prints a markdown table; asserts nothing.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from higgs_like import make  # noqa: E402


def run(cmd: list[str], env: dict) -> dict:
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])


# The set-up's steps as POLARS_GBT_PROFILE=1 prints them (runtime.rs, engine.rs, learner.rs).
SETUP_STEPS = {
    "CUDA context": r"CUDA context ([0-9.]+) s",
    "kernels read from the cache": r"kernels compiled or read ([0-9.]+) s",
    "kernels loaded": r"loaded ([0-9.]+) s",
    "columns to the device": r"columns to the device ([0-9.]+) s",
    "cut points": r"cut points(?: on the \w+)? ([0-9.]+) s",
    "frame to training matrix": r"frame to training matrix ([0-9.]+) s",
    "ingest and binning": r"ingest and binning on [^:]*: ([0-9.]+) s",
}


def setup_steps(cmd: list[str], env: dict) -> dict[str, float]:
    """A fit's set-up, step by step (each profiled step ends with a device synchronisation)."""
    import re

    err = subprocess.run(cmd, check=True, capture_output=True, text=True, env=dict(env, POLARS_GBT_PROFILE="1")).stderr
    found = {}
    for name, pattern in SETUP_STEPS.items():
        m = re.search(pattern, err)
        if m:
            found[name] = float(m.group(1))
    return found


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--rows", type=int, default=4_000_000)
    ap.add_argument("--test", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--setup", action="store_true", help="also time the set-up's steps (POLARS_GBT_PROFILE=1)")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp())
    X, y = make(a.rows + a.test, seed=0)
    Xtr, ytr, Xte = X[: a.rows], y[: a.rows], X[a.rows :]
    np.ascontiguousarray(Xtr.T).tofile(work / "X_train.f32")
    np.ascontiguousarray(Xte.T).tofile(work / "X_test.f32")
    ytr.tofile(work / "y_train.f32")
    y[a.rows :].tofile(work / "y_test.f32")
    (work / "meta.json").write_text(json.dumps({"n_train": a.rows, "n_test": a.test, "n_features": X.shape[1]}))
    builds = {"old": Path(a.old), "new": Path(a.new)}
    # Each build compiles its kernels once, into its own cache, outside the timed runs.
    envs = {k: dict(os.environ, POLARS_GBT_CACHE_DIR=str(work / f"kernels-{k}")) for k in builds}
    model = work / "model.json"
    train_args = [str(work), "--rounds", str(a.rounds), "--max-depth", "8"]
    run([str(builds["new"] / "bench_gpu"), *train_args, "--save", str(model)], envs["new"])
    run([str(builds["old"] / "bench_gpu"), str(work), "--rounds", "2"], envs["old"])
    results: dict[str, dict[str, list[float]]] = {k: {} for k in builds}
    for rep in range(a.repeats):
        # Old first, then new first, in turn: a drift over the run (clocks, heat) weighs on both.
        order = list(builds.items()) if rep % 2 == 0 else list(builds.items())[::-1]
        for k, d in order:
            t = run([str(d / "bench_gpu"), *train_args], envs[k])
            p = run([str(d / "bench_predict"), str(model), str(work / "X_test.f32"), str(a.test), str(X.shape[1])], envs[k])
            for name, v in [("train total s", t["total_s"]), ("train per tree ms", t["per_tree_s"] * 1e3),
                            ("predict device ms", p["device_ms"]), ("predict host ms", p["host_ms"])]:
                results[k].setdefault(name, []).append(v)
            results[k].setdefault("auc", []).append(t["auc"])
    if a.setup:
        steps: dict[str, dict[str, list[float]]] = {k: {} for k in builds}
        for rep in range(a.repeats):
            order = list(builds.items()) if rep % 2 == 0 else list(builds.items())[::-1]
            for k, d in order:
                for name, v in setup_steps([str(d / "bench_gpu"), str(work), "--rounds", "1"], envs[k]).items():
                    steps[k].setdefault(name, []).append(v)
        print("\n| set-up step (s) | old | new | new / old |")
        print("|---|---|---|---|")
        for name in SETUP_STEPS:
            o, n = (statistics.median(steps[k][name]) if name in steps[k] else None for k in builds)
            if o is not None or n is not None:
                ratio = f"{n / o:.3f}" if o and n is not None else "-"
                cell = lambda v: "-" if v is None else f"{v:.4f}"  # noqa: E731
                print(f"| {name} | {cell(o)} | {cell(n)} | {ratio} |")
    print(f"\n{a.rows:,} x {X.shape[1]} rows, depth 8, {a.rounds} rounds; prediction of {a.test:,} rows; "
          f"medians of {a.repeats}, old and new alternating (each first in turn)\n")
    print("| measure | old (min..max) | new (min..max) | new / old |")
    print("|---|---|---|---|")
    for name in results["old"]:
        old, new = results["old"][name], results["new"][name]
        o, n = statistics.median(old), statistics.median(new)
        print(f"| {name} | {o:.4f} ({min(old):.4f}..{max(old):.4f}) | {n:.4f} ({min(new):.4f}..{max(new):.4f}) "
              f"| {n / o:.3f} |")


if __name__ == "__main__":
    main()
