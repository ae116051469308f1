#!/usr/bin/env bash
# Installs what jaxmg needs on a fresh Debian machine and builds it into .venv/:
#   apt: Open MPI, ScaLAPACK, OpenBLAS;  pip: requirements.txt (jax, numpy and the build tools).
#   scripts/setup.sh          what the main job uses (scripts/demo.sh)
#   scripts/setup.sh --dev    also the developer tools of requirements-dev.txt (scripts/test.sh)
#   scripts/setup.sh --rebuild    build and install jaxmg even if nothing changed
# Idempotent: a second run installs and builds nothing when nothing changed. CMake's build tree is
# build/dev-<engines> (dev-cpu, or dev-both with the GPU engine), one per engine configuration, so
# switching the GPU engine on or off never reconfigures or rebuilds the other.
set -euo pipefail
cd "$(dirname "$0")/.."

DEV=0
REBUILD=0
for arg in "$@"; do
  case "$arg" in
    --dev) DEV=1 ;;
    --rebuild) REBUILD=1 ;;
    -h | --help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "[setup] unknown argument: $arg (--dev, --rebuild)" >&2; exit 2 ;;
  esac
done

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
# requirements-dev.txt includes requirements.txt: a --dev install also stands for the plain one.
install_requirements() {
  local file=$1 stamp=.venv/.jaxmg-$(basename "$1" .txt)
  if ! cat requirements.txt "$file" | cmp -s - "$stamp"; then
    echo "[setup] pip install -r $file"
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -q -r "$file"
    cat requirements.txt "$file" >"$stamp"
    cat requirements.txt requirements.txt >.venv/.jaxmg-requirements
  fi
}
if [ "$DEV" = 1 ]; then
  install_requirements requirements-dev.txt
else
  install_requirements requirements.txt
fi

# On a machine with NVIDIA GPUs (and nvcc), also the GPU engine: jax with CUDA 13 and NVIDIA's
# cuSOLVERMp/cuBLASMp/NCCL wheels (pyproject.toml's cuda13 extra), whose headers and libraries
# the build uses (cmake/cuda_engine.cmake). JAXMG_CUDA is always set, so the build backend does
# not decide by itself (build_backend/jaxmg_build.py turns the GPU engine on wherever nvcc is).
export JAXMG_CUDA=OFF
ENGINES=cpu
if [ -z "${JAXMG_CPU_ONLY:-}" ] && nvidia-smi -L >/dev/null 2>&1; then
  if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
    echo "[setup] GPUs found: installing jax[cuda13], cuSOLVERMp, cuBLASMp and NCCL; building the GPU engine"
    .venv/bin/python -m pip install -q "jax[cuda13]==$(.venv/bin/python -c 'import jax; print(jax.__version__)')" \
      "nvidia-cusolvermp-cu13==0.9.1.9318.post1" "nvidia-cublasmp-cu13==0.10.0.3695" \
      "nvidia-nccl-cu13>=2.29.2"
    export JAXMG_CUDA=ON PATH="$PATH:/usr/local/cuda/bin"
    ENGINES=both
  else
    echo "[setup] GPUs found but no nvcc: building the CPU engine only"
  fi
fi

# What the build reads: the sources git knows (tracked, or new and not ignored), the engines and
# the switches. The same fingerprint as at the last install, and jaxmg still installed: nothing
# to do (pip would reconfigure CMake and repackage the wheel for nothing).
fingerprint() {
  echo "engines=$ENGINES"
  env | grep -E '^(JAXMG_CPU|JAXMG_SCALAPACK_[A-Z_]*|CUDACXX|CMAKE_ARGS)=' | sort || true
  git ls-files -z --cached --others --exclude-standard -- \
    CMakeLists.txt cmake csrc jaxmg build_backend pyproject.toml requirements.txt 2>/dev/null |
    xargs -0 -r sha1sum 2>/dev/null || echo "no git: $(date +%s)"
}
build_stamp=.venv/.jaxmg-build
now=$(fingerprint | sha1sum | cut -d' ' -f1)
installed=$(ls .venv/lib/python*/site-packages/jaxmg/__init__.py 2>/dev/null || true)
if [ "$REBUILD" = 0 ] && [ -n "$installed" ] && [ "$(cat "$build_stamp" 2>/dev/null)" = "$now" ]; then
  echo "[setup] jaxmg is up to date in .venv (engines: $ENGINES; build tree build/dev-$ENGINES)"
  exit 0
fi

# Into .venv, which has the build requirements (requirements.txt): no isolated build environment,
# and CMake's build tree is kept, so a second run rebuilds only what changed.
echo "[setup] building jaxmg (engines: $ENGINES; build tree build/dev-$ENGINES)"
rm -f "$build_stamp"
.venv/bin/python -m pip install -q --no-build-isolation --no-deps -C "build-dir=build/dev-$ENGINES" .
echo "$now" >"$build_stamp"
