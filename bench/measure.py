"""Helpers the CPU benchmarks share (bench/cpu_bench.py, bench/flights.py): a tie-aware ROC
AUC computed the same way for every library, a wall-clock timer, and the host's CPU model."""
from __future__ import annotations

import platform
import time
from pathlib import Path

import numpy as np


def auc(y: np.ndarray, score: np.ndarray) -> float:
    """ROC AUC = P(score_pos > score_neg) + 0.5 P(tie), by tie-grouped ranks."""
    uniq, inv = np.unique(score, return_inverse=True)
    pos = np.bincount(inv, weights=(y == 1).astype(np.float64), minlength=len(uniq))
    neg = np.bincount(inv, weights=(y == 0).astype(np.float64), minlength=len(uniq))
    neg_below = np.cumsum(neg) - neg
    return float(np.sum(pos * (neg_below + 0.5 * neg)) / (pos.sum() * neg.sum()))


def timed(fn):
    """`fn()`'s result and the seconds it took."""
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def cpu_model() -> str:
    """The host's CPU model name, from /proc/cpuinfo where there is one."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"
