#!/usr/bin/env bash
# Builds bench/cusolvermg/cusolvermg_bench.cu for sm_90 into .gpu/bin/cusolvermg_bench and prints
# its path. Headers and libcusolverMg.so.12 come from the nvidia-cusolver (and nvidia-cublas) CUDA 13
# wheels in ~/.cache/jaxmg/wheels, extracted under build/gpu-deps/ when missing. No rpath: at run
# time LD_LIBRARY_PATH must name the wheels' nvidia/cu13/lib folders (cusolver, cublas, nvjitlink).
# Usage, from anywhere: bash bench/cusolvermg/build.sh
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"

NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
WHEELS=${JAXMG_WHEELS:-$HOME/.cache/jaxmg/wheels}
DEPS=build/gpu-deps
SOLVER=$DEPS/nvidia-cusolver/nvidia/cu13
CUBLAS=$DEPS/nvidia-cublas/nvidia/cu13

# extract WHEEL_GLOB DEST MEMBER...: unpack the members of the (newest) matching wheel into DEST.
extract() {
  local glob=$1 dest=$2
  shift 2
  local wheel
  wheel=$(ls -1 "$WHEELS"/$glob 2>/dev/null | sort | tail -n 1 || true)
  if [[ -z $wheel ]]; then
    echo "build.sh: no $glob in $WHEELS" >&2
    exit 1
  fi
  python3 - "$wheel" "$dest" "$@" <<'EOF'
import sys, zipfile
wheel, dest, members = sys.argv[1], sys.argv[2], sys.argv[3:]
with zipfile.ZipFile(wheel) as z:
    names = z.namelist()
    for m in members:
        for name in names:
            if name == m or (m.endswith("/") and name.startswith(m)):
                z.extract(name, dest)
EOF
}

[[ -f $SOLVER/include/cusolverMg.h ]] ||
  extract 'nvidia_cusolver-*.whl' "$DEPS/nvidia-cusolver" nvidia/cu13/include/
[[ -f $SOLVER/lib/libcusolverMg.so.12 ]] ||
  extract 'nvidia_cusolver-*.whl' "$DEPS/nvidia-cusolver" nvidia/cu13/lib/libcusolverMg.so.12
[[ -f $CUBLAS/include/cublas_v2.h ]] ||  # cusolverDn.h includes cublas_v2.h
  extract 'nvidia_cublas-*.whl' "$DEPS/nvidia-cublas" nvidia/cu13/include/

mkdir -p .gpu/bin
OUT=.gpu/bin/cusolvermg_bench
# libcusolverMg needs libcublas, libcublasLt and libnvJitLink, which are not here: leave those
# symbols to the dynamic loader on the GPU machine.
"$NVCC" -O2 -std=c++17 -arch=sm_90 -cudart shared \
  -I"$SOLVER/include" -I"$CUBLAS/include" \
  -o "$OUT" bench/cusolvermg/cusolvermg_bench.cu \
  -L"$SOLVER/lib" -l:libcusolverMg.so.12 \
  -Xlinker --allow-shlib-undefined
echo "$ROOT/$OUT"
