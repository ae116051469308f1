#!/usr/bin/env bash
# Installs everything jaxmg needs on a fresh Debian machine and builds the native libraries:
#   apt: Open MPI, ScaLAPACK, OpenBLAS;  pip (into .venv/): pinned jax and the test tools.
# Idempotent: a second run only rebuilds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES="libscalapack-openmpi-dev openmpi-bin libopenmpi-dev libopenblas-dev pkg-config"
missing=""
for p in $APT_PACKAGES; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "[setup] apt-get install$missing"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv"
  "$PY" -m venv .venv
fi
stamp=.venv/.jaxmg-requirements
if ! cmp -s requirements.txt "$stamp"; then
  echo "[setup] pip install -r requirements.txt"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -r requirements.txt
  cp requirements.txt "$stamp"
fi

# On a machine with NVIDIA GPUs (and nvcc), also the GPU engine: jax with CUDA 13 and NVIDIA's
# cuSOLVERMp/cuBLASMp/NCCL wheels (pyproject.toml's cuda13 extra), whose headers and libraries
# the build uses (cmake/cuda_engine.cmake). JAXMG_CUDA is always set, so the build backend does
# not decide by itself (build_backend/jaxmg_build.py turns the GPU engine on wherever nvcc is).
export JAXMG_CUDA=OFF
if [ -z "${JAXMG_CPU_ONLY:-}" ] && nvidia-smi -L >/dev/null 2>&1; then
  if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
    echo "[setup] GPUs found: installing jax[cuda13], cuSOLVERMp, cuBLASMp and NCCL; building the GPU engine"
    .venv/bin/python -m pip install -q "jax[cuda13]==$(.venv/bin/python -c 'import jax; print(jax.__version__)')" \
      "nvidia-cusolvermp-cu13==0.9.1.9318.post1" "nvidia-cublasmp-cu13==0.10.0.3695" \
      "nvidia-nccl-cu13>=2.29.2"
    export JAXMG_CUDA=ON PATH="$PATH:/usr/local/cuda/bin"
  else
    echo "[setup] GPUs found but no nvcc: building the CPU engine only"
  fi
fi

# Into .venv, which has the build requirements (requirements.txt): no isolated build environment,
# and CMake's build folder (build/<wheel tag>) is kept, so a second run rebuilds only what changed.
echo "[setup] building jaxmg (native libraries + package)"
.venv/bin/python -m pip install -q --no-build-isolation --no-deps .
