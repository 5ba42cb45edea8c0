#!/usr/bin/env bash
# Scoring arrays already on the GPU (issue 37, item 2): the Python tests of
# tests/python/test_device_arrays.py on the GPU machine, where none may skip (cupy and a usable
# GPU are required there). The machine has Python 3.12 with numpy, cupy, pyarrow and pytest;
# Polars comes on PYTHONPATH, and our wheel is installed into a directory of its own:
#     pip install --no-deps --target .peers/ours polars_gbt-*.whl
#     PYTHONPATH=.peers/ours:$POLARS_DIR bash scripts/gpu-device-arrays.sh
# Extra arguments go to pytest (-k NAME, -x, ...).
set -euo pipefail
# PYTHONPATH's relative entries, made absolute before the move into tests/.
PYTHONPATH=$(python3 -c 'import os; print(os.pathsep.join(os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p))')
export PYTHONPATH
cd "$(dirname "$0")/../tests"
python3 -c 'import polars_gbt, cupy; print("polars_gbt from", polars_gbt.__file__, "| cupy", cupy.__version__)'
POLARS_GBT_REQUIRE_GPU=1 exec python3 -m pytest -q -p no:cacheprovider python/test_device_arrays.py "$@"
