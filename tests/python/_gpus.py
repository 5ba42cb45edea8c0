"""How many GPUs the tests may use, and the marker of tests that need two."""

from __future__ import annotations

import os
import subprocess

import pytest

import polars_gbt


def gpu_count() -> int:
    if not polars_gbt.cuda_available():
        return 0
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(line.startswith("GPU ") for line in out.splitlines())


# POLARS_GBT_REQUIRE_GPUS=2 (on the GPU machine) makes fewer GPUs a failure, not a skip.
_REQUIRED = int(os.environ.get("POLARS_GBT_REQUIRE_GPUS", "0") or 0)
two_gpus = pytest.mark.skipif(_REQUIRED < 2 and gpu_count() < 2, reason="needs two GPUs")
