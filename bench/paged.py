"""GPU fits whose bins are paged from host memory (`max_device_memory`, issue 36 item 2)
against the same fit in-core and XGBoost's external memory (`ExtMemQuantileDMatrix`, its
quantised pages cached in host memory), on the same Higgs-like rows, in the same run.

Ours: a fit of the collected frame with `max_device_memory` set so that a quarter of the bins
(or `--fraction`) fit beside the fit's other buffers: its rows are binned on the host and paged
to the GPU each pass; per-tree time = (time of `--trees` trees - time of 5) / (trees - 5),
which leaves the set-up out. POLARS_GBT_PROFILE's page counter gives the bytes copied a tree,
and the floor is those bytes over the measured pinned host-to-GPU bandwidth.

XGBoost: a `DataIter` over the same rows in chunks of 2M (cupy arrays, so that its pages
are the GPU's), `ExtMemQuantileDMatrix` with its cache on the host (`on_host=True`), as much
of it kept on the GPU as our pages (`cache_host_ratio`), and again as XGBoost chooses; then
`xgb.train` on the GPU; its per-tree time is the median of its rounds after the first two
(a callback's clock).

Usage: python3 bench/paged.py [--rows 20000000] [--trees 25] [--depth 8] [--fraction 0.25] [--xgboost]
Prints a markdown table, and one JSON line of every number.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def link_bandwidth() -> float:
    """Pinned host-to-GPU GB/s (bench/h2d_bandwidth.py)."""
    out = subprocess.run([sys.executable, str(HERE / "h2d_bandwidth.py")], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["pinned_GBps"]


def child_ours(rows: int, trees: int, depth: int, limit: int | None) -> dict:
    """One of our fits in a child process (its own profile output): seconds and bytes copied."""
    code = f"""
import sys, time, json
sys.path.insert(0, {str(HERE)!r})
import numpy as np, polars as pl, polars_gbt
from higgs_like import make
X, y = make({rows}, seed=0)
df = pl.DataFrame({{f"f{{j}}": X[:, j] for j in range(X.shape[1])}}).with_columns(y=pl.Series(y))
del X
params = dict(target="y", objective="binary:logistic", n_estimators={trees}, max_depth={depth}, device="cuda")
if {limit!r} is not None:
    params["max_device_memory"] = {limit!r}
t = time.perf_counter()
m = polars_gbt.train(df, **params)
print(json.dumps({{"seconds": time.perf_counter() - t}}))
"""
    env = {**os.environ, "POLARS_GBT_PROFILE": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if out.returncode:
        raise SystemExit(out.stderr[-3000:])
    result = json.loads(out.stdout.strip().splitlines()[-1])
    copied = re.search(r"pages: ([0-9.]+) GiB copied to the GPU \((\d+) pages, (\d+) kept[^)]*host rows ([a-z-]+)", out.stderr)
    if copied:
        result.update(copied_gib=float(copied[1]), pages=int(copied[2]), slots=int(copied[3]), host=copied[4])
    stages = re.search(r"profile: (gradients .*)", out.stderr)
    result["stages"] = stages[1] if stages else ""
    placed = re.search(r"polars-gbt: (the bins .*)", out.stderr)
    result["placement"] = placed[1] if placed else ""
    return result


def besides_bins(rows: int, depth: int) -> int:
    """The device bytes this fit takes besides its bins (`learner::place_bins` weighs them): 41
    bytes of state a row (binary: label, weight, margins, gradients, row index and flags) and
    32 MiB plus the reserved histograms (2^(depth-1) slots of 28 x 257 x 16 bytes)."""
    return rows * 41 + (32 << 20) + min((2 << (depth - 2)) * 28 * 257 * 16, 256 << 20)


def xgboost_ext_memory(rows: int, trees: int, depth: int, host_ratio: float | str | None) -> dict:
    import cupy as cp
    import xgboost as xgb

    from higgs_like import make

    X, y = make(rows, seed=0)
    chunk = 2_000_000

    class Chunks(xgb.DataIter):
        def __init__(self, cache: str):
            self.i = 0
            super().__init__(cache_prefix=cache, on_host=True)

        def next(self, input_data) -> bool:
            if self.i * chunk >= rows:
                return False
            s = slice(self.i * chunk, (self.i + 1) * chunk)
            # Device arrays: XGBoost then builds its GPU pages (ELLPACK) and caches them on the host.
            input_data(data=cp.asarray(X[s]), label=cp.asarray(y[s]))
            self.i += 1
            return True

        def reset(self) -> None:
            self.i = 0

    class Clock(xgb.callback.TrainingCallback):
        def __init__(self):
            self.times = [time.perf_counter()]

        def after_iteration(self, model, epoch, evals_log) -> bool:
            self.times.append(time.perf_counter())
            return False

    def train(make_matrix) -> dict:
        """The matrix's time, then the rounds' (per tree: the median after the second)."""
        t = time.perf_counter()
        dm = make_matrix()
        built = time.perf_counter() - t
        clock = Clock()
        params = {"tree_method": "hist", "device": "cuda", "max_depth": depth, "objective": "binary:logistic"}
        xgb.train(params, dm, num_boost_round=trees, callbacks=[clock])
        steps = [b - a for a, b in zip(clock.times, clock.times[1:])]
        return {"matrix_seconds": built, "per_tree": statistics.median(steps[2:]), "total": clock.times[-1] - t}

    if host_ratio == "in-core":
        # The same rows in GPU memory whole (QuantileDMatrix), for reference.
        return train(lambda: xgb.QuantileDMatrix(cp.asarray(X), cp.asarray(y), max_bin=256))
    # cache_host_ratio: the share of its cache kept in host memory (None: XGBoost chooses,
    # keeping on the GPU what fits there).
    extra = {} if host_ratio is None else {"cache_host_ratio": host_ratio}
    with tempfile.TemporaryDirectory() as tmp, xgb.config_context(use_rmm=False):
        return train(lambda: xgb.ExtMemQuantileDMatrix(Chunks(os.path.join(tmp, "cache")), max_bin=256, **extra))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=20_000_000)
    ap.add_argument("--trees", type=int, default=25)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--fraction", type=float, default=0.25)
    ap.add_argument("--xgboost", action="store_true")
    a = ap.parse_args()
    bins = a.rows * 28
    limit = besides_bins(a.rows, a.depth) + int(bins * a.fraction)
    bw = link_bandwidth()
    out: dict = {"rows": a.rows, "trees": a.trees, "depth": a.depth, "limit": limit, "link_GBps": bw}
    for mode, lim in [("in-core", None), ("paged", limit)]:
        few = child_ours(a.rows, 5, a.depth, lim)
        many = child_ours(a.rows, a.trees, a.depth, lim)
        per_tree = (many["seconds"] - few["seconds"]) / (a.trees - 5)
        out[mode] = {"few": few, "many": many, "per_tree": per_tree}
        if lim is not None:
            copied = (many.get("copied_gib", 0) - few.get("copied_gib", 0)) * (1 << 30) / (a.trees - 5)
            out[mode]["copied_per_tree_GB"] = copied / 1e9
            out[mode]["floor"] = copied / (bw * 1e9)
    if a.xgboost:
        # As much of its cache on the GPU as our pages kept there, then as XGBoost chooses.
        kept = out["paged"]["many"].get("slots", 0) / max(out["paged"]["many"].get("pages", 1), 1)
        out["xgboost"] = xgboost_ext_memory(a.rows, a.trees, a.depth, round(1 - kept, 3))
        out["xgboost"]["cache_host_ratio"] = round(1 - kept, 3)
        out["xgboost_auto"] = xgboost_ext_memory(a.rows, a.trees, a.depth, None)
        out["xgboost_in_core"] = xgboost_ext_memory(a.rows, a.trees, a.depth, "in-core")
    paged = out["paged"]
    print(f"| {a.rows:,} x 28, depth {a.depth} | per tree | vs floor | vs XGBoost ext. memory |")
    print("|---|---|---|---|")
    print(f"| ours in-core | {out['in-core']['per_tree']:.3f} s | | |")
    xgb_tree = out.get("xgboost", {}).get("per_tree")
    vs_xgb = "" if xgb_tree is None else f"{paged['per_tree'] / xgb_tree:.2f}"
    print(
        f"| ours paged ({paged['many'].get('pages')} pages, {paged['many'].get('slots')} kept; "
        f"{paged['copied_per_tree_GB']:.2f} GB a tree at {bw:.1f} GB/s) | {paged['per_tree']:.3f} s | "
        f"{paged['per_tree'] / paged['floor']:.2f} | {vs_xgb} |"
    )
    if xgb_tree is not None:
        x, auto = out["xgboost"], out["xgboost_auto"]
        print(
            f"| XGBoost ExtMemQuantileDMatrix, cache_host_ratio={x['cache_host_ratio']} "
            f"(matrix {x['matrix_seconds']:.1f} s) | {xgb_tree:.3f} s | | 1 |"
        )
        print(
            f"| XGBoost ExtMemQuantileDMatrix, its own cache_host_ratio (matrix {auto['matrix_seconds']:.1f} s) "
            f"| {auto['per_tree']:.3f} s | | {paged['per_tree'] / auto['per_tree']:.2f} |"
        )
        print(f"| XGBoost in-core (QuantileDMatrix from cupy) | {out['xgboost_in_core']['per_tree']:.3f} s | | |")
    print(f"ours paged, host rows {paged['many'].get('host')}; stages of the longer fit: {paged['many'].get('stages')}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
