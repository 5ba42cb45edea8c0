#!/usr/bin/env bash
# The main job: build polars-gbt and run the demo (train + score on Higgs-like data).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/polars-gbt/target}
cargo run --release --locked --example demo -- "$@"
