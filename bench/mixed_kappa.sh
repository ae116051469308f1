#!/usr/bin/env bash
# Mixed precision solves against the condition number: `python -m jaxmg bench --kappa K` for
# potrs and lu_solve, factored in float32 (refined to float64) and in float64, with JAX's
# float64 solve on one device, at each K; merged into one JSON for bench/figures.py.
#
#   bench/mixed_kappa.sh OUT.json [N] [PROCESSES] [KAPPAS...]
#   bench/mixed_kappa.sh bench/results/mixed_kappa_cpu2_n2048_$(git rev-parse --short HEAD).json
#
# Defaults: N = 2048, 2 processes (CPU processes where there is no GPU), kappa 1e1 to 1e12;
# ROUTINES (default: potrs lu_solve), VARIANTS (default: mixed float64; the float64 solve's time
# does not depend on kappa, so a sweep may time it at one kappa only).
set -euo pipefail
out=${1:?usage: bench/mixed_kappa.sh OUT.json [N] [PROCESSES] [KAPPAS...]}
n=${2:-2048}
procs=${3:-2}
shift $(($# < 3 ? $# : 3))
kappas=${*:-1e1 1e3 1e6 1e8 1e10 1e12}
PY=${PYTHON:-python}
# Each bench run's JSON goes to MIXED_PARTS (kept: what ran survives a time limit), or to a
# temporary folder.
if [ -n "${MIXED_PARTS:-}" ]; then
  parts=$MIXED_PARTS
  mkdir -p "$parts"
else
  parts=$(mktemp -d)
  trap 'rm -rf "$parts"' EXIT
fi
for routine in ${ROUTINES:-potrs lu_solve}; do
  for kappa in $kappas; do
    for variant in ${VARIANTS:-mixed float64}; do
      extra=()
      [ "$variant" = mixed ] && extra=(--factor-dtype float32)
      # (JAX's float64 solve is timed once per kappa, with the float64 run)
      [ "$variant" = mixed ] && extra+=(--no-baseline)
      "$PY" -m jaxmg bench -n "$procs" --routine "$routine" --kappa "$kappa" --sizes "$n" \
        --dtypes float64 --repeats "${REPEATS:-2}" "${extra[@]}" \
        --out "$parts/${routine}_${kappa}_${variant}.json" 2>&1 |
        { grep -v -e Gloo -e '^\[bench\]' || true; }
    done
  done
done
"$PY" - "$out" "$parts" <<'PYEOF'
import json, pathlib, sys
out, parts = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
records, first = [], None
for path in sorted(parts.glob("*.json")):
    res = json.loads(path.read_text())
    first = first or res
    variant = path.stem.rsplit("_", 1)[1]
    for r in res["records"]:
        records.append({**r, "variant": "float64" if r["engine"] == "jax" else variant,
                        "bench_routine": path.stem.split("_1e")[0]})
merged = {k: first[k] for k in ("commit", "jaxmg_version", "host")}
merged.update(routine="mixed_kappa", matrix="random, condition numbers as recorded",
              records=records)
out.write_text(json.dumps(merged, indent=1))
print(f"[mixed_kappa] wrote {out}: {len(records)} records")
PYEOF
