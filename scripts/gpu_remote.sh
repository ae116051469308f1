#!/usr/bin/env bash
# GPU round trip, the part that runs ON the GPU machine (see scripts/gpu_roundtrip.sh).
#   bash scripts/gpu_remote.sh [STAGE...]      stages: info multi readme single (default: all)
# Needs the carried .gpu/lib/libjaxmg_cuda.so and .gpu/wheels/nvidia_cusolvermp_cu13-0.8.0*.whl.
# Writes into $OUT: info.log, gpu_multi.json, readme.log, gpu_single.json, gpu_results.json.

set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-/tmp/jaxmg_gpu_out}
mkdir -p "$OUT"
PY=/opt/torch/.venv/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
STAGES=${*:-info multi readme single bench}
T_MULTI=${T_MULTI:-240} T_SINGLE=${T_SINGLE:-180}  # per-stage limits (s); all stages fit in 600 s

rm -rf /tmp/cusolvermp && mkdir -p /tmp/cusolvermp
# No unzip there: Python's zipfile.
"$PY" -m zipfile -e .gpu/wheels/nvidia_cusolvermp_cu13-0.8.0*.whl /tmp/cusolvermp || exit 1
SITE=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
LIBS=/tmp/cusolvermp/nvidia/cu13/lib
for d in "$SITE"/nvidia/*/lib; do LIBS=$LIBS:$d; done
export LD_LIBRARY_PATH=$LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export NCCL_NVLS_ENABLE=0  # never NVLink multicast
export JAXMG_LIB_DIR=$ROOT/.gpu/lib PYTHONPATH=$ROOT XLA_PYTHON_CLIENT_MEM_FRACTION=0.5
export PYTHONUNBUFFERED=1
echo "[remote] python $PY; site $SITE"
echo "[remote] libjaxmg_cuda.so dependencies:"
ldd .gpu/lib/libjaxmg_cuda.so | grep -E "cusolverMp|nccl|cudart|cublas|cusolver|not found"
nvidia-smi --query-gpu=index,name,memory.used,memory.total --format=csv,noheader

for stage in $STAGES; do
  t0=$(date +%s)
  case $stage in
    info)
      timeout 30 "$PY" -m jaxmg info 2>&1 | tee "$OUT/info.log" ;;
    multi)
      timeout $((T_MULTI + 20)) "$PY" -m jaxmg launch -n 2 --timeout $T_MULTI tests/gpu/potrs_gpu.py multi "$OUT" ;;
    readme)
      timeout 60 "$PY" -m jaxmg launch -n 2 --timeout 50 examples/readme_example.py 2>&1 \
        | tee "$OUT/readme.log" ;;
    single)
      CUDA_VISIBLE_DEVICES=0 timeout $T_SINGLE "$PY" tests/gpu/potrs_gpu.py single "$OUT" ;;
    bench)
      # Timings: potrs on both GPUs vs cho_factor + cho_solve on one (python -m jaxmg bench).
      XLA_PYTHON_CLIENT_MEM_FRACTION=${BENCH_MEM_FRACTION:-0.85} timeout ${T_BENCH:-330} \
        "$PY" -m jaxmg bench -n ${BENCH_PROCS:-2} --sizes "${BENCH_SIZES:-1024,8192,32768,65536,131072}" \
        --dtypes "${BENCH_DTYPES:-float64,float32}" --repeats "${BENCH_REPEATS:-2}" ${BENCH_EXTRA:-} \
        ${BENCH_MESH:+--mesh $BENCH_MESH} --baseline-max "${BENCH_BASELINE:-65536}" \
        --timeout "${T_BENCH:-330}" --out "$OUT/${BENCH_NAME:-potrs_h200x2}.json" 2>&1 \
        | grep -v Gloo ;;
    sweep)
      # Tile and mesh sweep for potrs at one size (no baseline).
      for mesh in ${SWEEP_MESHES:-2x1 1x2}; do
        XLA_PYTHON_CLIENT_MEM_FRACTION=${BENCH_MEM_FRACTION:-0.85} timeout ${T_SWEEP:-150} \
          "$PY" -m jaxmg bench -n ${BENCH_PROCS:-2} --mesh "$mesh" --sizes "${SWEEP_SIZE:-65536}" \
          --dtypes float64 --tile "${SWEEP_TILES:-512,1024,2048}" --repeats 2 --no-baseline \
          --timeout "${T_SWEEP:-150}" --out "$OUT/sweep_$mesh.json" 2>&1 | grep -v Gloo
      done ;;
    *) echo "[remote] unknown stage $stage" ;;
  esac
  echo "[remote] stage $stage: rc=$? in $(( $(date +%s) - t0 )) s"
done

"$PY" - "$OUT" <<'PYEOF'
import json, os, sys
out = sys.argv[1]
res = {"stages": {}}
for name in ("multi", "single"):
    p = os.path.join(out, f"gpu_{name}.json")
    res["stages"][name] = json.load(open(p)) if os.path.exists(p) else None
for name in ("readme", "info"):
    p = os.path.join(out, f"{name}.log")
    res[name + "_log"] = open(p).read()[-4000:] if os.path.exists(p) else None
# The example prints x, logdet and True on process 0 (gRPC shutdown noise may follow).
lines = [line.strip() for line in (res["readme_log"] or "").splitlines()]
res["readme_ok"] = "True" in lines and "False" not in lines
recs = [r for s in res["stages"].values() if s for r in s["records"]]
res["summary"] = {"cases": len(recs), "failed": [f"{r['case']} {r.get('mesh')}" for r in recs
                                                if not r.get("ok")]}
print("\n=== timings (best of 3 warm runs) ===")
for r in recs:
    if "seconds" in r:
        print(f"{r['case']:40s} gpus={r.get('gpus')} mesh={r.get('mesh')} {r['seconds']*1e3:9.1f} ms "
              f"{r['tflops']:6.1f} TF/s  residual={r.get('residual')}")
print("=== summary:", json.dumps(res["summary"]), "readme_ok:", res["readme_ok"])
json.dump(res, open(os.path.join(out, "gpu_results.json"), "w"), indent=1)
PYEOF
