#!/usr/bin/env bash
# Builds the polars_gbt wheel (the Rust crate with the Polars plugin, through maturin) and
# installs it with its test and demo dependencies into .venv (ignored by git; Python 3.11+:
# XGBoost 3.2 there, the last for 3.11). The tests' second environment, with the newest
# XGBoost on Python 3.12, is scripts/python-env-xgb34.sh's.
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${POLARS_GBT_CACHE:-$HOME/.cache/polars-gbt}
python3 -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check -r tests/python/requirements.txt
rm -rf .venv/wheels
# The plugin gets its own target directory: cargo and maturin builds of one crate would
# keep rebuilding each other's artefacts.
CARGO_TARGET_DIR=$cache/target-py .venv/bin/maturin build --release --locked -q -o .venv/wheels
.venv/bin/pip install -q --disable-pip-version-check --force-reinstall --no-deps .venv/wheels/*.whl

