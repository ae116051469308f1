#!/usr/bin/env bash
# Sets up a fresh machine (scripts/setup.sh) and runs every check: formatting, lint, the native
# build of the GPU engine when the CUDA toolchain is present, and the test suite (real MPI jobs).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh --dev
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
echo "[test] ruff"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
echo "[test] clang-format"
.venv/bin/python scripts/check_format.py
if [ -z "${JAXMG_SKIP_CUDA_BUILD:-}" ] && { command -v nvcc || [ -x /usr/local/cuda/bin/nvcc ]; } >/dev/null; then
  # Once per run: `pip wheel .` (build isolation, both engines), the file `pip install .` would
  # install; tests/test_cuda_build.py checks it, tests/test_install.py installs it. (The CPU
  # wheel, `scripts/build_wheels.sh cpu`, is built by tests/test_install.py itself.)
  echo "[test] nvcc found: building the wheel with both engines, as pip install . does (no GPU needed)"
  JAXMG_WHEEL=$(./scripts/build_wheels.sh both)
  export JAXMG_WHEEL
else
  echo "[test] nvcc not found: the GPU engine build is skipped"
fi
# --- docs: the documentation site builds in strict mode and its internal links resolve ---
echo "[test] docs"
./scripts/docs.sh
# --- end docs ---
echo "[test] pytest"
.venv/bin/pytest -q -rs --durations=30 "$@"
