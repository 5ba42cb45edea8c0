#!/usr/bin/env bash
# The tests' second environment: .venv-xgb34 (ignored by git), Python 3.12 with the newest
# XGBoost, for the peer and ONNX tests (scripts/test.sh), beside .venv (Python 3.11, XGBoost
# 3.2). It installs the wheel scripts/python-env.sh built (abi3: one build serves both).
set -euo pipefail
cd "$(dirname "$0")/.."
# The second environment's pins, but for XGBoost's, are the first one's.
while read -r pin; do
    case $pin in '#'* | '' | xgboost-cpu==*) continue ;; esac
    grep -qxF "$pin" tests/python/requirements.txt ||
        { echo "tests/python/requirements-xgb34.txt pins $pin, requirements.txt does not" >&2; exit 1; }
done <tests/python/requirements-xgb34.txt
# Python 3.12: pyenv's (this machine's image has 3.12.1 there), else one on PATH that runs
# (pyenv's shim answers for versions it does not activate, and fails).
py312=$(ls -d "$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")"/versions/3.12.*/bin/python3.12 2>/dev/null | tail -1 || true)
if [ -z "$py312" ] && python3.12 -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then
    py312=$(python3.12 -c 'import sys; print(sys.executable)')
fi
[ -n "$py312" ] || { echo "Python 3.12 not found (the XGBoost 3.4 tests need it)" >&2; exit 1; }
"$py312" -m venv .venv-xgb34
.venv-xgb34/bin/pip install -q --disable-pip-version-check -r tests/python/requirements-xgb34.txt
.venv-xgb34/bin/pip install -q --disable-pip-version-check --force-reinstall --no-deps .venv/wheels/*.whl
