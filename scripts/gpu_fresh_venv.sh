#!/usr/bin/env bash
# A user's install of the carried wheel, ON the GPU machine, before scripts/gpu_remote.sh installs
# anything: a fresh venv, `pip install jaxmg-<version>.whl` and the NVIDIA wheels of its cuda13
# extra taken from .gpu/wheels (the machine has no network; what the cuda13 extra names is there), no compiler,
# no apt, no LD_LIBRARY_PATH; then `jaxmg info` and the seed README example on two ranks sharing
# the GPU, from outside the source tree.
#
#   bash scripts/gpu_fresh_venv.sh     # writes $OUT/fresh_venv.log; exit 1 if the example fails
#
# The image's JAX stays where it is (the machine cannot download it): the fresh venv sees the
# image venv's packages through a .pth file, as `--system-site-packages` would show a system
# Python's, and pip installs into the fresh venv only what is missing or too old there (jaxmg,
# cuSOLVERMp, cuBLASMp, and NCCL 2.29 over the image's 2.28).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-/tmp/jaxmg_gpu_out}
mkdir -p "$OUT"
BASE=/opt/torch/.venv/bin/python3
[ -x "$BASE" ] || BASE=$(command -v python3)
VENV=/tmp/jaxmg-fresh-venv
WHEEL=$(ls "$ROOT"/.gpu/jaxmg/jaxmg-*.whl | head -1)
{
  if (cd /tmp && "$BASE" -c 'import jaxmg' 2>/dev/null); then
    echo "[fresh] jaxmg is installed in the image's environment already: run this first"
    exit 1
  fi
  rm -rf "$VENV" && "$BASE" -m venv "$VENV" || exit 1
  base_site=$("$BASE" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$base_site" > "$site/image-site.pth"
  # The cuda13 extra less its first entry, jax[cuda13]: the image's JAX has its CUDA already,
  # and the CUDA wheels jax[cuda13] would add cannot be downloaded here.
  nvidia=$(python3 - <<'PYEOF'
import tomllib
print(" ".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["cuda13"][1:]))
PYEOF
)
  echo "[fresh] pip install $(basename "$WHEEL") $nvidia (wheels from .gpu/wheels only)"
  "$VENV/bin/python" -m pip install -q --no-index --find-links "$ROOT/.gpu/wheels" \
    "$WHEEL" $nvidia || exit 1
  "$VENV/bin/python" -m pip list 2>/dev/null | grep -iE "^(jaxmg|jax|nvidia-(nccl|cusolvermp|cublasmp))"
  cd /tmp
  env -u LD_LIBRARY_PATH -u PYTHONPATH "$VENV/bin/python" -m jaxmg info || exit 1
  env -u LD_LIBRARY_PATH -u PYTHONPATH -u XLA_PYTHON_CLIENT_MEM_FRACTION NCCL_NVLS_ENABLE=0 \
    timeout 200 "$VENV/bin/python" -m jaxmg launch -n 2 --share-gpu --timeout 170 \
    "$ROOT/examples/readme_example.py" | tee /tmp/fresh_readme.txt
  grep -q "True$" /tmp/fresh_readme.txt && echo "[fresh] seed example: True" ||
    { echo "[fresh] seed example did not print True"; exit 1; }
} 2>&1 | tee "$OUT/fresh_venv.log"
