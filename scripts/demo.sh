#!/usr/bin/env bash
# The main job: build and install polars_gbt, then train and score Higgs-like data through
# the gbt expressions, printing time, AUC and the device. Optional argument: training rows.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/python-env.sh
.venv/bin/python examples/demo.py "$@"
