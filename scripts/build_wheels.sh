#!/usr/bin/env bash
# Builds jaxmg's wheels, as a user's `pip install .` builds them: plain `pip wheel .` with pip's
# build isolation (build requirements from pyproject.toml and build_backend/jaxmg_build.py alone,
# NVIDIA's wheels from the package index), one wheel per kind, into dist/<kind>/:
#
#   scripts/build_wheels.sh [KIND...]     KIND: cpu, gpu, both or auto (default: auto)
#     cpu    the CPU engine (ScaLAPACK over MPI), built against this machine's MPI and ScaLAPACK
#            (or those named by JAXMG_SCALAPACK_LIBRARIES and CMake's FindMPI: docs/install.md)
#     gpu    the GPU engine alone: needs nvcc 13.x here, and on the machines that install it no
#            compiler, no apt package, no MPI; NVIDIA's libraries come from the cuda13 extra
#     both   both engines (what `pip install .` builds where nvcc 13.x is found)
#     auto   what `pip install .` builds on this machine (JAXMG_CUDA unset): both where nvcc is
#            found, else cpu
#
# Every wheel is checked by scripts/check_wheel.py (its libraries, version, LICENSE, RUNPATH
# relative to the package, no absolute build path inside, the GPU engine's NEEDED libraries).
# CMake's build tree is the one a `pip install .` of the same engines uses (build/cpu, build/gpu,
# build/both); scikit-build-core starts it afresh in each isolated environment, so every run
# compiles everything (the CPU wheel 1 to 2 min on 2 cores, the GPU engine about 6). No GPU is
# needed.
# Prints each wheel's path on stdout, one a line; the rest goes to stderr (logs: build/wheel-*.log).
# Environment: PYTHON (any Python >= 3.11 with pip; default .venv/bin/python, else python3).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$PWD/.venv/bin/python}
[ -x "$PY" ] || PY=$(command -v python3)
[ $# -gt 0 ] || set -- auto

have_nvcc() { [ -n "${CUDACXX:-}" ] || command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; }

for kind in "$@"; do
  case "$kind" in
    cpu) switches=(JAXMG_CPU=ON JAXMG_CUDA=OFF) ;;
    gpu) switches=(JAXMG_CPU=OFF JAXMG_CUDA=ON) ;;
    both) switches=(JAXMG_CPU=ON JAXMG_CUDA=ON) ;;
    auto)
      switches=(JAXMG_CPU=ON)
      if have_nvcc; then kind=both; else kind=cpu; fi
      ;;
    *) echo "[wheel] unknown kind '$kind': cpu, gpu, both or auto" >&2; exit 2 ;;
  esac
  out=dist/$kind
  log=build/wheel-$kind.log
  mkdir -p "$out" build
  rm -f "$out"/jaxmg-*.whl
  echo "[wheel] $kind: pip wheel . (${switches[*]}; build isolation; log: $log)" >&2
  t0=$(date +%s)
  if ! env -u JAXMG_CUDA -u JAXMG_CPU -u PIP_NO_BUILD_ISOLATION "${switches[@]}" \
    "$PY" -m pip wheel -v --no-deps --progress-bar off -w "$out" . >"$log" 2>&1; then
    tail -n 80 "$log" >&2
    echo "[wheel] $kind: pip wheel . failed after $(($(date +%s) - t0)) s (whole log: $log)" >&2
    exit 1
  fi
  grep -E "jaxmg (build|engines):" "$log" | sed 's/^ *//; s/^-- //; s/^/[wheel] /' >&2 || true
  wheel=$(ls "$out"/jaxmg-*.whl)
  echo "[wheel] $kind: built $wheel in $(($(date +%s) - t0)) s" >&2
  "$PY" scripts/check_wheel.py "$wheel" "$kind" >&2
  echo "$PWD/$wheel"
done
