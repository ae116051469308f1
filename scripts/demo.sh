#!/usr/bin/env bash
# Sets up a fresh machine (scripts/setup.sh) and runs the main job: a real distributed Cholesky
# solve with log-determinant on the devices present (CPU processes by default, one per GPU when
# GPUs and the GPU engine are available). Extra arguments go to `python -m jaxmg demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
cd /tmp && exec "$OLDPWD/.venv/bin/python" -m jaxmg demo "$@"
