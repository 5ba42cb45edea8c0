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
# Without CUDA, `backend::cuda` is a stub with the same names: it must keep compiling.
cargo clippy --release --locked --no-default-features --all-targets -- -D warnings
# Arm: the crate without CUDA and the plugin lints for aarch64 (rustup fetches its standard
# library once; nothing runs there yet).
rustup target add aarch64-unknown-linux-gnu
cargo clippy --release --locked --target aarch64-unknown-linux-gnu --no-default-features --all-targets -- -D warnings

# The Python environment first: it also holds NVRTC (the nvidia-cuda-nvrtc wheel), with which
# tests/cuda_kernels.rs compiles every kernel for sm_75, sm_80 and sm_90 without a GPU.
bash scripts/python-env.sh
bash scripts/python-env-xgb34.sh
nvrtc=$(.venv/bin/python -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13", "lib"))')
export POLARS_GBT_NVRTC_DIRS=$nvrtc POLARS_GBT_REQUIRE_NVRTC=1
# The kernel cache stays out of the user's cache directory during tests.
export POLARS_GBT_CACHE_DIR=${POLARS_GBT_CACHE:-$HOME/.cache/polars-gbt}/test-kernels
cargo test --release --locked
# The plugin's code is linted too (in the plugin's own target directory).
CARGO_TARGET_DIR=${POLARS_GBT_CACHE:-$HOME/.cache/polars-gbt}/target-py \
    cargo clippy --release --locked --features python --lib -- -D warnings
# From tests/, so that `import polars_gbt` finds the installed package, not ./python.
cd tests && ../.venv/bin/python -m pytest -q python --doctest-modules --pyargs polars_gbt
# Again with the newest XGBoost (.venv-xgb34, Python 3.12): every test file that imports
# xgboost, and the ONNX tests. The two runs' pytest summaries are both printed.
peers=$(grep -l '^import xgboost' python/test_*.py)
../.venv-xgb34/bin/python -c 'import xgboost; print("XGBoost", xgboost.__version__)'
../.venv-xgb34/bin/python -m pytest -q -p no:cacheprovider $peers python/test_onnx.py
