#!/usr/bin/env bash
# Builds the GPU engine, build/cuda/libjaxmg_cuda.so, with nvcc and the headers and libraries of
# NVIDIA's wheels. No GPU is needed: the test command runs this wherever nvcc exists, so the GPU
# engine always compiles and links.
#
# Versions: cuSOLVERMp 0.8.0 (0.9.x and every cuBLASMp wheel need NCCL >= 2.29; the GPU machines
# and jaxlib's wheel have NCCL 2.28.9). Wheels are cached in ${JAXMG_WHEEL_CACHE} (default
# ~/.cache/jaxmg/wheels); headers and link libraries are unpacked into build/gpu-deps/.
# Environment: PYTHON (for jax.ffi.include_dir; default .venv/bin/python), NVCC.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-$ROOT/.venv/bin/python}
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
CACHE=${JAXMG_WHEEL_CACHE:-$HOME/.cache/jaxmg/wheels}
DEPS=$ROOT/build/gpu-deps
CUSOLVERMP=nvidia-cusolvermp-cu13==0.8.0.3126
NCCL=nvidia-nccl-cu13==2.28.9
CUSOLVER=nvidia-cusolver==12.0.4.66
CUBLAS=nvidia-cublas==13.0.2.14
mkdir -p "$CACHE" "$DEPS"

# fetch SPEC: the wheel's path in the cache (pip download for Python 3.12, manylinux x86_64).
fetch() {
  local spec=$1 stem f
  stem=$(echo "${spec%%==*}" | tr - _)-${spec##*==}
  f=$(ls "$CACHE/$stem"-*.whl 2>/dev/null | head -1 || true)
  if [ -z "$f" ]; then
    echo "[cuda] pip download $spec" >&2
    "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
      --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
      --platform manylinux_2_18_x86_64 --platform manylinux_2_17_x86_64 -d "$CACHE" "$spec" >&2
    f=$(ls "$CACHE/$stem"-*.whl | head -1)
  fi
  echo "$f"
}

# unpack SPEC PREFIX...: the wheel's files under PREFIXes into build/gpu-deps/NAME, once.
unpack() {
  local spec=$1; shift
  local name=${spec%%==*}
  [ -f "$DEPS/$name.done" ] && return
  "$PY" - "$(fetch "$spec")" "$DEPS/$name" "$@" <<'PYEOF'
import sys, zipfile
wheel, dest, prefixes = sys.argv[1], sys.argv[2], tuple(sys.argv[3:])
with zipfile.ZipFile(wheel) as z:
    z.extractall(dest, [m for m in z.namelist() if m.startswith(prefixes)])
PYEOF
  touch "$DEPS/$name.done"
}
unpack $CUSOLVERMP nvidia/cu13/include/ nvidia/cu13/lib/
unpack $NCCL nvidia/nccl/include/ nvidia/nccl/lib/
unpack $CUSOLVER nvidia/cu13/include/
unpack $CUBLAS nvidia/cu13/include/

cmake -S . -B build/cuda -G Ninja -DJAXMG_CPU=OFF -DJAXMG_CUDA=ON \
  -DPython_EXECUTABLE="$PY" -DCMAKE_CUDA_COMPILER="$NVCC" \
  -DJAXMG_CUSOLVERMP_ROOT="$DEPS/nvidia-cusolvermp-cu13/nvidia/cu13" \
  -DJAXMG_NCCL_ROOT="$DEPS/nvidia-nccl-cu13/nvidia/nccl" \
  -DJAXMG_CUDA_EXTRA_INCLUDES="$DEPS/nvidia-cusolver/nvidia/cu13/include;$DEPS/nvidia-cublas/nvidia/cu13/include" \
  >/dev/null
cmake --build build/cuda --target jaxmg_cuda
echo "[cuda] built build/cuda/libjaxmg_cuda.so"
