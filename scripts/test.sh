#!/usr/bin/env bash
# Sets up a fresh machine (scripts/setup.sh) and runs every check: formatting, lint, the native
# build of the GPU engine when the CUDA toolchain is present, and the test suite (real MPI jobs).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
echo "[test] ruff"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
echo "[test] clang-format"
.venv/bin/python scripts/check_format.py
echo "[test] pytest"
.venv/bin/pytest -q -rs "$@"
