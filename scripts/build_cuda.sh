#!/usr/bin/env bash
# Builds the GPU engine, build/cuda/libjaxmg_cuda.so, with nvcc and the headers and libraries of
# NVIDIA's wheels. No GPU is needed: the test command runs this wherever nvcc exists, so the GPU
# engine always compiles and links.
#
# Versions: cuSOLVERMp 0.9.1 + cuBLASMp 0.10 + NCCL >= 2.29 (cuBLASMp calls NCCL functions that
# exist only from 2.29; pyproject.toml's cuda13 extra installs the same). NCCL: the 30 MB wheel
# built for H200 in ../shared/wheels when it is there (the one the GPU round trip carries),
# otherwise NVIDIA's nvidia-nccl-cu13 from PyPI (about 200 MB). Headers and link libraries only
# matter here: the library links them by soname (libnccl.so.2, libcusolverMp.so.0, ...).
# Wheels are cached in ${JAXMG_WHEEL_CACHE} (default ~/.cache/jaxmg/wheels); their files are
# unpacked into build/gpu-deps/.
# Environment: PYTHON (for jax.ffi.include_dir; default .venv/bin/python), NVCC, JAXMG_NCCL_WHEEL
# (an NCCL >= 2.29 wheel to use instead).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-$ROOT/.venv/bin/python}
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
CACHE=${JAXMG_WHEEL_CACHE:-$HOME/.cache/jaxmg/wheels}
DEPS=$ROOT/build/gpu-deps
CUSOLVERMP=nvidia-cusolvermp-cu13==0.9.1.9318.post1
CUBLASMP=nvidia-cublasmp-cu13==0.10.0.3695
NCCL=nvidia-nccl-cu13==2.29.7
CUSOLVER=nvidia-cusolver==12.0.4.66  # headers only (cusolverDn.h, for cusolverMp.h)
CUBLAS=nvidia-cublas==13.1.0.3       # headers only (cublas_v2.h; cuBLASMp wants >= 13.1.0.3)
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

# unpack NAME WHEEL PREFIX...: the wheel's files under PREFIXes into build/gpu-deps/NAME, once
# per wheel (a stamp names the wheel, so a new version is unpacked afresh).
unpack() {
  local name=$1 wheel=$2; shift 2
  if [ "$(cat "$DEPS/$name.done" 2>/dev/null)" = "$(basename "$wheel")" ]; then return; fi
  rm -rf "${DEPS:?}/$name" "$DEPS/$name.done"
  "$PY" - "$wheel" "$DEPS/$name" "$@" <<'PYEOF'
import sys, zipfile
wheel, dest, prefixes = sys.argv[1], sys.argv[2], tuple(sys.argv[3:])
with zipfile.ZipFile(wheel) as z:
    z.extractall(dest, [m for m in z.namelist() if m.startswith(prefixes)])
PYEOF
  basename "$wheel" > "$DEPS/$name.done"
}

# NCCL: $JAXMG_NCCL_WHEEL, else the H200 wheel in ../shared/wheels, else PyPI.
NCCL_WHEEL=${JAXMG_NCCL_WHEEL:-$(ls "$ROOT"/../shared/wheels/nvidia_nccl_cu13-2.29.*.whl 2>/dev/null | head -1 || true)}
[ -n "$NCCL_WHEEL" ] || NCCL_WHEEL=$(fetch $NCCL)

unpack nvidia-cusolvermp-cu13 "$(fetch $CUSOLVERMP)" nvidia/cu13/include/ nvidia/cu13/lib/
unpack nvidia-cublasmp-cu13 "$(fetch $CUBLASMP)" nvidia/cublasmp/cu13/include/ nvidia/cublasmp/cu13/lib/
unpack nvidia-nccl-cu13 "$NCCL_WHEEL" nvidia/nccl/include/ nvidia/nccl/lib/
unpack nvidia-cusolver "$(fetch $CUSOLVER)" nvidia/cu13/include/
unpack nvidia-cublas "$(fetch $CUBLAS)" nvidia/cu13/include/
echo "[cuda] NCCL from $(cat "$DEPS/nvidia-nccl-cu13.done")"

echo "[cuda] cmake configure (build/cuda)"
cmake -S . -B build/cuda -G Ninja -DJAXMG_CPU=OFF -DJAXMG_CUDA=ON \
  -DPython_EXECUTABLE="$PY" -DCMAKE_CUDA_COMPILER="$NVCC" \
  -DJAXMG_CUSOLVERMP_ROOT="$DEPS/nvidia-cusolvermp-cu13/nvidia/cu13" \
  -DJAXMG_CUBLASMP_ROOT="$DEPS/nvidia-cublasmp-cu13/nvidia/cublasmp/cu13" \
  -DJAXMG_NCCL_ROOT="$DEPS/nvidia-nccl-cu13/nvidia/nccl" \
  -DJAXMG_CUDA_EXTRA_INCLUDES="$DEPS/nvidia-cusolver/nvidia/cu13/include;$DEPS/nvidia-cublas/nvidia/cu13/include" \
  >/dev/null
echo "[cuda] cmake build"
cmake --build build/cuda --target jaxmg_cuda
echo "[cuda] built build/cuda/libjaxmg_cuda.so"
