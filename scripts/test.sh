#!/usr/bin/env bash
# Every test: formatting, lints, and the Rust test suite (unit, integration, doc tests).
# The test data is read from ../shared/data (a sibling of the checkout), as in CI.
set -euo pipefail
cd "$(dirname "$0")/.."
# A target directory outside the checkout survives between runs and serves as a cache.
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/polars-gbt/target}
cargo fmt --check
cargo clippy --release --locked --all-targets -- -D warnings
cargo test --release --locked
