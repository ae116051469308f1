#!/usr/bin/env bash
# Builds the wheel that a user's `pip install .` builds on this machine, into build/wheelhouse/:
# plain `pip wheel .` with pip's build isolation (build requirements from pyproject.toml and
# build_backend/jaxmg_build.py alone, NVIDIA's wheels from the package index), JAXMG_CUDA unset so
# that the build decides as for a user: where nvcc 13.x exists, both engines. No GPU is needed.
# The only change from a user's build is where CMake's build tree lives (build/wheel, kept, so
# that a second run recompiles only what changed; a fresh clone builds everything).
#
# The test command runs it wherever nvcc exists: tests/test_cuda_build.py checks the GPU engine
# inside the wheel, tests/test_install.py installs the wheel into a fresh venv. The GPU round trip
# (scripts/gpu_roundtrip.sh) ships the same wheel. Prints the wheel's path last.
# Environment: PYTHON (any Python >= 3.11 with pip; default .venv/bin/python, else python3).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$PWD/.venv/bin/python}
[ -x "$PY" ] || PY=$(command -v python3)
OUT=build/wheelhouse
LOG=build/wheel.log
mkdir -p "$OUT"
rm -f "$OUT"/jaxmg-*.whl

echo "[wheel] pip wheel . (build isolation; log: $LOG)" >&2
t0=$(date +%s)
if ! env -u JAXMG_CUDA -u PIP_NO_BUILD_ISOLATION "$PY" -m pip wheel -v --no-deps \
  --progress-bar off -C build-dir=build/wheel -w "$OUT" . >"$LOG" 2>&1; then
  tail -n 80 "$LOG" >&2
  echo "[wheel] pip wheel . failed after $(($(date +%s) - t0)) s (whole log: $LOG)" >&2
  exit 1
fi
grep -E "jaxmg (build|engines):" "$LOG" | sed 's/^ *//; s/^-- //; s/^/[wheel] /' >&2 || true
wheel=$(ls "$OUT"/jaxmg-*.whl)
echo "[wheel] built $wheel in $(($(date +%s) - t0)) s" >&2
"$PY" - "$wheel" <<'PYEOF' >&2
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
libs = sorted(n for n in names if n.startswith("jaxmg/_lib/"))
print("[wheel] native libraries:", ", ".join(n.rsplit("/", 1)[-1] for n in libs))
if "jaxmg/_lib/libjaxmg_cuda.so" not in names:
    sys.exit("[wheel] the wheel has no GPU engine (libjaxmg_cuda.so): see the log")
PYEOF
echo "$PWD/$wheel"
