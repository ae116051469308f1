#!/usr/bin/env bash
# GPU round trip, the part that runs HERE (no GPU needed): fetch the wheels, build
# libjaxmg_cuda.so into .gpu/lib, and print the device-tool call that runs scripts/gpu_remote.sh
# on the GPU machine. The device tool is called by the agent, not by this script.
#
#   scripts/gpu_roundtrip.sh            # download what is missing, build, print the run command
#   scripts/gpu_roundtrip.sh collect F  # results file from the device -> bench/results/
#
# Layout (all git-ignored, /.gpu/ is in .gitignore and .git/info/exclude):
#   .gpu/wheels/  nvidia-cusolvermp-cu13 0.8.0 wheel for Python 3.12 (carried to the GPU machine,
#                 unzipped there: the unpacked .so is over the 64 MiB carry limit)
#   .gpu/lib/     libjaxmg_cuda.so (carried)
#   build/gpu-deps/  build-only headers and libraries (never carried; build/ is git-ignored)
#
# cuSOLVERMp 0.8.0 rather than 0.9.1: 0.9.x (and every cuBLASMp wheel) needs NCCL >= 2.29, the GPU
# machines have NCCL 2.28.9 (the one jaxlib loads).
# Environment: PYTHON (for jax.ffi.include_dir, default .venv/bin/python), WHEEL_CACHE (folders
# searched for wheels before pip downloads them; default /tmp/gpu/alt:/tmp/gpu/deps:/tmp/gpu/nccl).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-$ROOT/.venv/bin/python}
CUSOLVERMP=nvidia_cusolvermp_cu13-0.8.0.3126
NCCL=nvidia_nccl_cu13-2.28.9
CUSOLVER=nvidia_cusolver-12.0.4.66
CUBLAS=nvidia_cublas-13.0.2.14
WHEEL_CACHE=${WHEEL_CACHE:-/tmp/gpu/alt:/tmp/gpu/deps:/tmp/gpu/nccl}

# `scripts/gpu_roundtrip.sh collect FILES_AT/gpu_results.json`: copy the results into
# bench/results/gpu_potrs_<date>.json with the commit and whether the tree was dirty.
if [ "${1:-}" = collect ]; then
  src=$2
  dst=bench/results/gpu_potrs_$(date -u +%Y-%m-%d).json
  mkdir -p bench/results
  commit=$(git rev-parse HEAD 2>/dev/null || echo none)
  dirty=false; [ -n "$(git status --porcelain -- . ':!bench/results' 2>/dev/null)" ] && dirty=true
  python3 - "$src" "$dst" "$commit" "$dirty" <<'PYEOF'
import json, sys
src, dst, commit, dirty = sys.argv[1:]
res = json.load(open(src))
res = {"commit": None if commit == "none" else commit, "dirty": dirty == "true", **res}
json.dump(res, open(dst, "w"), indent=1)
print("[gpu] wrote", dst)
PYEOF
  exit 0
fi

grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
mkdir -p .gpu/wheels .gpu/lib build/gpu-deps

# find_wheel DIST_VERSION DEST: a cached copy, else pip download (Python 3.12, manylinux x86_64).
find_wheel() {
  local stem=$1 dest=$2 f
  f=$(ls "$dest"/"$stem"-*.whl 2>/dev/null | head -1 || true)
  if [ -z "$f" ]; then
    IFS=: read -ra dirs <<< "$WHEEL_CACHE"
    for d in "${dirs[@]}"; do
      f=$(ls "$d"/"$stem"-*.whl 2>/dev/null | head -1 || true)
      [ -n "$f" ] && break
    done
  fi
  if [ -z "$f" ]; then
    local spec=${stem%%-*}; spec=${spec//_/-}==${stem#*-}
    echo "[gpu] pip download $spec" >&2
    "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
      --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
      --platform manylinux_2_18_x86_64 --platform manylinux_2_17_x86_64 -d "$dest" "$spec" >&2
    f=$(ls "$dest"/"$stem"-*.whl | head -1)
  fi
  echo "$f"
}

# The carried wheel.
w=$(find_wheel $CUSOLVERMP .gpu/wheels)
case "$w" in .gpu/wheels/*) ;; *) cp "$w" .gpu/wheels/ ;; esac
# Build-only deps: headers (and libnccl / libcusolverMp to link against), unzipped once.
unpack() {  # unpack STEM PATTERN...
  local stem=$1; shift
  [ -f build/gpu-deps/$stem.done ] && return
  local f; f=$(find_wheel "$stem" build/gpu-deps)
  unzip -q -o "$f" "$@" -d build/gpu-deps/$stem
  touch build/gpu-deps/$stem.done
}
unpack $CUSOLVERMP 'nvidia/cu13/include/*' 'nvidia/cu13/lib/*'
unpack $NCCL 'nvidia/nccl/include/*' 'nvidia/nccl/lib/*'
unpack $CUSOLVER 'nvidia/cu13/include/*'
unpack $CUBLAS 'nvidia/cu13/include/*'
rm -f build/gpu-deps/*.whl

D=$ROOT/build/gpu-deps
cmake -S . -B build/cuda -G Ninja -DJAXMG_CPU=OFF -DJAXMG_CUDA=ON \
  -DPython_EXECUTABLE="$PY" \
  -DJAXMG_CUSOLVERMP_ROOT="$D/$CUSOLVERMP/nvidia/cu13" \
  -DJAXMG_NCCL_ROOT="$D/$NCCL/nvidia/nccl" \
  -DJAXMG_CUDA_EXTRA_INCLUDES="$D/$CUSOLVER/nvidia/cu13/include;$D/$CUBLAS/nvidia/cu13/include" \
  -DCMAKE_INSTALL_PREFIX="$ROOT/.gpu" -DJAXMG_INSTALL_DIR=lib >/dev/null
cmake --build build/cuda --target jaxmg_cuda
cp build/cuda/libjaxmg_cuda.so .gpu/lib/
echo "[gpu] built .gpu/lib/libjaxmg_cuda.so; NEEDED:"
readelf -d .gpu/lib/libjaxmg_cuda.so | awk '/NEEDED/ {print "   ", $5}'
du -sh .gpu | sed 's/^/[gpu] carry size /'
cat <<MSG

Run on the GPU machine with the device tool:
  kind:    nvidia-h200-x2
  carry:   [".gpu"]   (only .gpu/wheels and .gpu/lib, about 24 MB)
  command: set -o pipefail; bash scripts/gpu_remote.sh 2>&1 | tee \$OUT/log.txt   (timeout_s 600)
  (quick pass without timings: prefix JAXMG_GPU_BENCH=0; stages: info multi readme single)
Then: scripts/gpu_roundtrip.sh collect <files_at>/gpu_results.json
      (-> bench/results/gpu_potrs_<date>.json with "commit" and "dirty")
MSG
