"""Two builds of ours against each other on the GPU, on the same data in the same run.

For changes that must not slow training (a refactor, say): the Higgs-like data of
``gpu_bench.py`` is written once, then each build's ``bench_gpu`` trains on it in turn,
alternating (old, new, old, new, ...) so that drift of the machine hits both alike. Prints a
markdown table of the median steady-state ms per tree, the median total from Arrow columns,
the AUC and the peak GPU memory, with new / old ratios. Asserts nothing.

Usage (on the device machine; see docs/benchmarks.md):
    python3 bench/gpu_compare.py --old PATH/bench_gpu_old --new PATH/bench_gpu [--rows N] [--repeats K]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_bench import run_ours, write_files  # noqa: E402
from higgs_like import make  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", required=True)
    ap.add_argument("--new", required=True)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--test", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=500)
    ap.add_argument("--depths", type=int, nargs="+", default=[8, 10])
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()

    t = time.perf_counter()
    X, y = make(a.rows + a.test, seed=0)
    print(f"data: {a.rows} x {X.shape[1]} train, {a.test} test, made in {time.perf_counter() - t:.1f} s", flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        write_files(d, X[: a.rows], y[: a.rows], X[a.rows:], y[a.rows:])
        for depth in a.depths:
            runs = {"old": [], "new": []}
            for i in range(a.repeats):
                for name in ("old", "new"):
                    r = run_ours(getattr(a, name), d, depth, a.rounds)
                    runs[name].append(r)
                    print(f"depth {depth} {name} #{i}: {r['per_tree_s'] * 1e3:.3f} ms/tree, "
                          f"total {r['total_s']:.2f} s, AUC {r['auc']:.4f}, {r['mem_mib']:.0f} MiB", flush=True)
            med = {n: (statistics.median(r["per_tree_s"] for r in rs) * 1e3,
                       statistics.median(r["total_s"] for r in rs),
                       rs[0]["auc"], max(r["mem_mib"] for r in rs)) for n, rs in runs.items()}
            rows.append((depth, med))
    print()
    print("| depth | old ms/tree | new ms/tree | new/old | old total (s) | new total (s) | AUC old | AUC new "
          "| GPU MiB old | GPU MiB new |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for depth, m in rows:
        (ot, oT, oa, om), (nt, nT, na, nm) = m["old"], m["new"]
        print(f"| {depth} | {ot:.2f} | {nt:.2f} | {nt / ot:.3f} | {oT:.2f} | {nT:.2f} | {oa:.4f} | {na:.4f} "
              f"| {om:.0f} | {nm:.0f} |")


if __name__ == "__main__":
    main()
