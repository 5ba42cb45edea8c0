#!/usr/bin/env bash
# Builds what the GPU machine runs (it has no Rust): the GPU benchmarks and the test
# executables that train or score on a GPU when one is usable, copied into .gpu/ (ignored by
# git) to carry with the device tool. See docs/benchmarks.md for the commands run there.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${POLARS_GBT_CACHE:-$HOME/.cache/polars-gbt}/target}
mkdir -p .gpu
cargo build --release --locked --example bench_gpu --example bench_predict --example bench_shap
for b in bench_gpu bench_predict bench_shap; do cp "$CARGO_TARGET_DIR/release/examples/$b" .gpu/; done
# cuda_*: the GPU's own tests; the others run every scenario on every usable backend.
for t in cuda_trees cuda_layouts cuda_predict cuda_stream cuda_gpus cuda_evaluation \
    device_ingest deep_trees invariants objectives constraints fuzz_models; do
    exe=$(cargo test --release --locked --no-run --test "$t" --message-format=json 2>/dev/null |
        python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable"):
        print(m["executable"])')
    cp "$exe" ".gpu/${t}_tests"
done
ls -la .gpu
