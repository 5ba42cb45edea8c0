#!/usr/bin/env bash
# Every test: formatting, lints and the Rust suite (unit, integration, doc tests), then the
# Python package (the Polars plugin) with pytest and its docstring examples.
# Test data is read from ../shared/data (a sibling of the checkout), as in CI.
set -euo pipefail
cd "$(dirname "$0")/.."
# A target directory outside the checkout survives between runs and serves as a cache.
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${POLARS_GBT_CACHE:-$HOME/.cache/polars-gbt}/target}

cargo fmt --check
cargo clippy --release --locked --all-targets -- -D warnings
cargo test --release --locked

bash scripts/python-env.sh
# The plugin's code is linted too (in the plugin's own target directory).
CARGO_TARGET_DIR=${POLARS_GBT_CACHE:-$HOME/.cache/polars-gbt}/target-py \
    cargo clippy --release --locked --features python --lib -- -D warnings
# From tests/, so that `import polars_gbt` finds the installed package, not ./python.
cd tests && ../.venv/bin/python -m pytest -q python --doctest-modules --pyargs polars_gbt
