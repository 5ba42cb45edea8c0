"""Evaluation sets on the GPU (issue 55, item 3): a validation frame reaches the device from
its Arrow buffers, with no concatenated copy and no host copy of its rows. The measure: a fit
with a 1M-row validation frame grows the process by less than a tenth of that frame's bytes
beyond the same fit without one. Each fit runs in a process of its own, its peak resident
memory reset (Linux's clear_refs) after the data is built. Runs where a GPU is usable."""

import subprocess
import sys

import pytest

import polars_gbt

pytestmark = pytest.mark.skipif(not polars_gbt.cuda_available(), reason="needs a usable GPU")

FIT = r"""
import sys
import numpy as np, polars as pl, polars_gbt

rng = np.random.default_rng(0)

def frame(n):
    df = pl.DataFrame(rng.normal(size=(n, 28)), schema=[f"f{i}" for i in range(28)])
    return df.with_columns(y=(pl.col("f0") + pl.col("f1") * pl.col("f2") > 0).cast(pl.Float64))

def peak():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM"):
            return int(line.split()[1]) * 1024

train, valid = frame(2_000_000), frame(1_000_000)
params = dict(target="y", objective="binary:logistic", n_estimators=20, max_depth=6, device="cuda")
# The kernels, the CUDA context and the pools first, in both processes alike.
polars_gbt.train(train.head(20_000), eval_df=valid.head(5_000), **params)
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
before = peak()
polars_gbt.train(train, eval_df=valid if sys.argv[1] == "1" else None, **params)
print(peak() - before, valid.estimated_size())
"""


def growth(with_eval: bool) -> tuple[int, int]:
    out = subprocess.run([sys.executable, "-c", FIT, str(int(with_eval))], capture_output=True, text=True)
    if "clear_refs" in out.stderr:
        pytest.skip("this kernel does not let a process reset its peak memory")
    assert out.returncode == 0, out.stderr
    grew, size = out.stdout.split()
    return int(grew), int(size)


def test_a_validation_frame_costs_the_host_less_than_a_tenth_of_its_bytes():
    without, _ = growth(False)
    with_eval, size = growth(True)
    extra = with_eval - without
    assert extra < 0.1 * size, f"the validation frame of {size / 2**20:.0f} MiB grew the fit by {extra / 2**20:.0f} MiB"
