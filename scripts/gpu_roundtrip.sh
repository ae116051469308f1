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
# Environment: PYTHON (for jax.ffi.include_dir, default .venv/bin/python), JAXMG_WHEEL_CACHE
# (where scripts/build_cuda.sh keeps the wheels; default ~/.cache/jaxmg/wheels).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-$ROOT/.venv/bin/python}

# `scripts/gpu_roundtrip.sh collect FILES_AT/gpu_results.json`: copy the results into
# bench/results/gpu_tests_h200x2_<commit>.json with the commit and whether the tree was dirty.
if [ "${1:-}" = collect ]; then
  src=$2
  dst=bench/results/gpu_tests_h200x2_$(git rev-parse --short=7 HEAD 2>/dev/null || date -u +%F).json
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

# The carried wheel (unzipped on the GPU machine: the .so is over the 64 MiB carry limit), and the
# library, built here by scripts/build_cuda.sh (which caches the wheels).
PYTHON=$PY scripts/build_cuda.sh
cp "${JAXMG_WHEEL_CACHE:-$HOME/.cache/jaxmg/wheels}"/nvidia_cusolvermp_cu13-0.8.0.3126-*.whl .gpu/wheels/
cp build/cuda/libjaxmg_cuda.so .gpu/lib/
echo "[gpu] built .gpu/lib/libjaxmg_cuda.so; NEEDED:"
readelf -d .gpu/lib/libjaxmg_cuda.so | awk '/NEEDED/ {print "   ", $5}'
du -sh .gpu | sed 's/^/[gpu] carry size /'
cat <<MSG

Run on the GPU machine with the device tool:
  kind:    nvidia-h200-x2
  carry:   [".gpu"]   (only .gpu/wheels and .gpu/lib, about 24 MB)
  command: set -o pipefail; bash scripts/gpu_remote.sh 2>&1 | tee \$OUT/log.txt   (timeout_s 600)
  (stages: info multi readme single bench sweep; e.g. bash scripts/gpu_remote.sh multi readme)
Then: scripts/gpu_roundtrip.sh collect <files_at>/gpu_results.json
      (-> bench/results/gpu_tests_h200x2_<commit>.json with "commit" and "dirty")
MSG
