#!/usr/bin/env bash
# GPU round trip, the part that runs ON the GPU machine (see scripts/gpu_roundtrip.sh).
#   bash scripts/gpu_remote.sh [STAGE...]   stages: info multi readme single local localreadme
#                                           localbench overhead mgbench bench qrbench spectral
#                                           sweep reliability twostage launch fault onedevice
#                                           regress jaxmg1 linalg1 svd1 ceiling eigsweep mixed
#                                           shared sharedtwostage sharedcases sharedfault sharedlaunch
#                                           jobs (stages side by side: JOBS, below)
#                                           (default: info multi readme single bench)
# Needs, carried in .gpu/ (scripts/gpu_roundtrip.sh): .gpu/jaxmg/jaxmg-*.whl, the wheel that
# `pip wheel .` built there (both engines, py3-none: any Python 3), and in .gpu/wheels the wheels
# of nvidia-cusolvermp-cu13 0.9.1, nvidia-cublasmp-cu13 0.10 and NCCL 2.29 (the H200 build of
# ../shared/wheels). The machine has no network; its image has JAX and NCCL 2.28.9 in
# /opt/torch/.venv, and no cuSOLVERMp or cuBLASMp. So, before any stage, all four are installed
# into the image's venv with `pip install --no-index --no-deps` (the NCCL wheel replacing its
# NCCL, so that XLA and jaxmg load the same libnccl.so.2): the layout a user's
# `pip install '<whl>[cuda13]'` makes, where libjaxmg_cuda.so finds the NVIDIA libraries through
# its RUNPATH. The stages import that installed jaxmg (PYTHONSAFEPATH: not this folder's jaxmg/),
# but the benchmark stages, which take the Python files from here (same commit) because
# `jaxmg bench` finds bench/peer_jaxmg1.py beside its package; the native libraries are the
# installed wheel's in every stage.
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
GPU_LIBS=${GPU_LIBS:-/tmp/jaxmg_gpu_libs}

wheel() {  # wheel PATTERN: the one carried wheel matching .gpu/PATTERN
  local f
  f=$(ls .gpu/$1 2>/dev/null | head -1)
  [ -n "$f" ] || { echo "[remote] missing .gpu/$1 (run scripts/gpu_roundtrip.sh)" >&2; return 1; }
  echo "$f"
}
NCCL_WHEEL=$(wheel 'wheels/nvidia_nccl_cu13-2.29*.whl') || exit 1
CUSOLVERMP_WHEEL=$(wheel 'wheels/nvidia_cusolvermp_cu13-0.9.1*.whl') || exit 1
CUBLASMP_WHEEL=$(wheel 'wheels/nvidia_cublasmp_cu13-0.10.*.whl') || exit 1
JAXMG_WHEEL=$(wheel 'jaxmg/jaxmg-*.whl') || exit 1

# NCCL 2.29 (as ../shared/wheels/README.md says), cuSOLVERMp, cuBLASMp and jaxmg into the image's
# venv; --force-reinstall: a warm machine may hold an earlier build of the same version.
echo "[remote] installing $(basename "$JAXMG_WHEEL"), $(basename "$CUSOLVERMP_WHEEL"),"
echo "         $(basename "$CUBLASMP_WHEEL") and $(basename "$NCCL_WHEEL") into $PY's environment"
# JAXMG_SKIP_INSTALL=1: a later call of the same command on a warm machine keeps what the first
# installed.
if [ -z "${JAXMG_SKIP_INSTALL:-}" ]; then
  "$PY" -m pip install -q --no-index --no-deps --upgrade "$NCCL_WHEEL" || exit 1
  "$PY" -m pip install -q --no-index --no-deps --force-reinstall "$CUSOLVERMP_WHEEL" \
    "$CUBLASMP_WHEEL" "$JAXMG_WHEEL" || exit 1
fi
SITE=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
CUDA_LIB=$SITE/jaxmg/_lib/libjaxmg_cuda.so
[ -f "$CUDA_LIB" ] || { echo "[remote] $(basename "$JAXMG_WHEEL") has no libjaxmg_cuda.so" >&2; exit 1; }
# JAXMg 1.4.1 (the benchmarks' peer), when carried: unzipped apart (it has this project's name;
# bench/peer_jaxmg1.py), its cuSOLVERMp found in site-packages.
rm -rf "$GPU_LIBS" && mkdir -p "$GPU_LIBS"
PEER_WHEEL=$(ls .gpu/wheels/jaxmg-1.4.1-*.whl 2>/dev/null | head -1)
if [ -n "$PEER_WHEEL" ]; then
  "$PY" -m zipfile -e "$PEER_WHEEL" "$GPU_LIBS/peer" || exit 1
  export JAXMG_PEER_PATH=$GPU_LIBS/peer JAXMG_PEER_LIBS=$SITE
fi
echo "[remote] libjaxmg_cuda.so's libraries through its RUNPATH alone (no LD_LIBRARY_PATH):"
env -u LD_LIBRARY_PATH ldd "$CUDA_LIB" | grep -E "cusolverMp|cublasmp|nccl|cudart|cublas|cusolver|not found"
LIBS=""
for d in "$SITE"/nvidia/*/lib "$SITE"/nvidia/*/cu13/lib; do [ -d "$d" ] && LIBS=$LIBS${LIBS:+:}$d; done
export LD_LIBRARY_PATH=$LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export NCCL_NVLS_ENABLE=0  # never NVLink multicast
export PYTHONSAFEPATH=1  # `python -m jaxmg` from here imports the installed jaxmg, not ./jaxmg
# JAXMG_TREE_PYTHON=1: every stage imports this tree's Python (over the installed native
# libraries), to check a Python-only change without a new wheel; the results say so.
unset JAXMG_LIB_DIR PYTHONPATH
export XLA_PYTHON_CLIENT_MEM_FRACTION=${XLA_PYTHON_CLIENT_MEM_FRACTION:-0.5}
export PYTHONUNBUFFERED=1
(cd /tmp && "$PY" -c 'import jaxmg, jaxmg._core.native as n; print("[remote] jaxmg", jaxmg.__file__, "engines", n.find_library("cuda"), n.find_library("cpu"))')
echo "[remote] python $PY; site $SITE"
echo "[remote] LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
nvidia-smi --query-gpu=index,name,memory.used,memory.total --format=csv,noheader

# The versions of the libraries as loaded (wheel metadata, and the libraries' own answers).
lib_versions() {
  "$PY" - <<'PYEOF'
import ctypes, importlib.metadata as md, os

def dist(name):
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return "not installed"

for name in ("jaxmg", "jax", "jaxlib", "jax-cuda13-plugin", "jax-cuda13-pjrt", "nvidia-nccl-cu13",
             "nvidia-cusolvermp-cu13", "nvidia-cublasmp-cu13", "nvidia-cublas", "nvidia-cusolver",
             "nvidia-cuda-runtime"):
    print(f"[libs] {name} {dist(name)}")

def loaded(lib, fn):
    v = ctypes.c_int()
    try:
        getattr(ctypes.CDLL(lib), fn)(ctypes.byref(v))
    except (OSError, AttributeError) as e:
        return f"could not load: {e}"
    with open("/proc/self/maps") as f:
        stem = lib.split(".so")[0] + ".so"
        paths = sorted({os.path.realpath(line.split()[-1]) for line in f if stem in line})
    return f"{v.value} from {', '.join(paths)}"

print("[libs] libnccl.so.2 ncclGetVersion:", loaded("libnccl.so.2", "ncclGetVersion"))
print("[libs] libcublasmp.so.0 cublasMpGetVersion:", loaded("libcublasmp.so.0", "cublasMpGetVersion"))
PYEOF
}

# shared_launch P SECONDS SCRIPT ARGS...: SCRIPT on P ranks sharing GPU 0, under a time limit,
# each rank with the crash tracer tests/gpu/segv_trace.c preloaded (a native stack on a crash)
# and the launcher's share of the GPU's memory (not this script's XLA_PYTHON_CLIENT_MEM_FRACTION).
gcc -shared -fPIC -O1 -o /tmp/segv_trace.so tests/gpu/segv_trace.c 2>/dev/null || true
shared_launch() {
  local procs=$1 limit=$2
  shift 2
  env -u XLA_PYTHON_CLIENT_MEM_FRACTION LD_PRELOAD=$([ -f /tmp/segv_trace.so ] && echo /tmp/segv_trace.so) \
    OPENBLAS_NUM_THREADS=${SHARED_THREADS:-$((16 / procs))} OMP_NUM_THREADS=${SHARED_THREADS:-$((16 / procs))} \
    timeout $((limit + 30)) "$PY" -m jaxmg launch -n "$procs" --share-gpu --timeout "$limit" "$@"
}

for stage in $STAGES; do
  t0=$(date +%s)
  case $stage in  # the benchmarks: Python files from here (see the top)
    localbench|overhead|bench|qrbench|spectral|sweep|twostage|svd1|mixed) export PYTHONPATH=$ROOT ;;
    *) if [ -n "${JAXMG_TREE_PYTHON:-}" ]; then export PYTHONPATH=$ROOT; else unset PYTHONPATH; fi ;;
  esac
  case $stage in
    info)
      { lib_versions; timeout 30 "$PY" -m jaxmg info
        # Which library warns "NCCL library version is too old" (the header/runtime check)?
        echo "[libs] libraries that carry NCCL's version warning:"
        grep -rlI --include='*.so*' "NCCL library version is too old" "$SITE" 2>/dev/null
        grep -rl --include='*.so*' "NCCL library version is too old" "$SITE" 2>/dev/null | head; } \
        2>&1 | tee "$OUT/info.log" ;;
    multi)
      timeout $((T_MULTI + 20)) "$PY" -m jaxmg launch -n 2 --timeout $T_MULTI tests/gpu/solve_gpu.py multi "$OUT" ;;
    readme)
      timeout 60 "$PY" -m jaxmg launch -n 2 --timeout 50 examples/readme_example.py 2>&1 \
        | tee "$OUT/readme.log" ;;
    single)
      CUDA_VISIBLE_DEVICES=0 timeout $T_SINGLE "$PY" tests/gpu/solve_gpu.py single "$OUT" ;;
    local)
      # One process driving both GPUs (no launcher, no jax.distributed).
      CUDA_VISIBLE_DEVICES=0,1 timeout ${T_LOCAL:-330} "$PY" tests/gpu/solve_gpu.py local "$OUT" ;;
    fault)
      # One rank's local failure in the middle of each own algorithm (the test hook test_fail):
      # the same error everywhere, no hang, the next call right (tests/gpu/fault_gpu.py), on one
      # GPU.
      CUDA_VISIBLE_DEVICES=0 timeout ${T_FAULT:-240} "$PY" tests/gpu/fault_gpu.py single "$OUT" ;;
    onedevice)
      # potrs, lu_solve, qr and inv on a 1x1 mesh against JAX on the same GPU (bench/one_device.py).
      XLA_PYTHON_CLIENT_MEM_FRACTION=${BENCH_MEM_FRACTION:-0.85} CUDA_VISIBLE_DEVICES=0 \
        timeout ${T_ONEDEVICE:-240} "$PY" bench/one_device.py "$OUT/one_device_h200.json" ;;
    regress)
      # Before and after in the same session (bench/regress.py): the earlier build's package,
      # when carried in .gpu/before/jaxmg (its Python and libjaxmg_cuda.so), then the installed one.
      for label in before after; do
        [ $label = before ] && [ ! -d .gpu/before/jaxmg ] && continue
        (if [ $label = before ]; then export PYTHONPATH=$ROOT/.gpu/before JAXMG_COMMIT=$(cat .gpu/before/COMMIT)
         else export JAXMG_COMMIT=$(cat .gpu/jaxmg/COMMIT 2>/dev/null || echo unknown); fi
        XLA_PYTHON_CLIENT_MEM_FRACTION=${BENCH_MEM_FRACTION:-0.85} CUDA_VISIBLE_DEVICES=0 \
          timeout ${T_REGRESS:-280} "$PY" bench/regress.py "$OUT/regress_${label}_h200.json" \
          --label $label ${REGRESS_ONLY:+--only $REGRESS_ONLY} --matrix ${REGRESS_MATRIX:-random})
      done ;;
    jaxmg1)
      # JAXMg 1.4.1's test cases (tests/jaxmg1_cases.py, as the CPU tests run them) on one GPU.
      CUDA_VISIBLE_DEVICES=0 timeout ${T_JAXMG1:-300} "$PY" tests/gpu/jaxmg1_gpu.py "$OUT" ;;
    linalg1)
      # jaxmg.linalg's cases (tests/mp/linalg_worker.py) on one GPU, four dtypes.
      CUDA_VISIBLE_DEVICES=0 timeout ${T_LINALG:-300} "$PY" tests/mp/linalg_worker.py 1 1 \
        float32,float64,complex64,complex128 1 "$OUT/linalg_gpu_1p.json" ;;
    svd1)
      # gesvd (U, s, Vh) and its values on one GPU, random matrices, against JAX and JAXMg 1.4.1.
      for spec in ${SVD1_CASES:-gesvd:8192 gesvd_values:16384}; do
        IFS=: read -r routine sizes <<< "$spec"
        XLA_PYTHON_CLIENT_MEM_FRACTION=${BENCH_MEM_FRACTION:-0.85} timeout ${T_SPEC:-300} \
          "$PY" -m jaxmg bench -n 1 --routine "$routine" --sizes "$sizes" --matrix random \
          --dtypes float64 --repeats 1 $([ -n "${JAXMG_PEER_PATH:-}" ] && echo --peer) \
          --timeout "${T_SPEC:-300}" --out "$OUT/${routine}_${sizes}_random_h200x1.json" 2>&1 \
          | grep -v Gloo
      done
      rm -f "$OUT"/*.png ;;
    localreadme)
      # The seed README example without its jax.distributed.initialize() line, in one process.
      sed '/jax.distributed.initialize()/d' examples/readme_example.py > /tmp/readme_local.py
      CUDA_VISIBLE_DEVICES=0,1 timeout 60 "$PY" /tmp/readme_local.py 2>&1 \
        | tee "$OUT/readme_local.log" ;;
    localbench)
      # potrs (float64) in one process driving both GPUs, then in two processes of one GPU each.
      for how in single-process launcher; do
        XLA_PYTHON_CLIENT_MEM_FRACTION=${BENCH_MEM_FRACTION:-0.85} timeout ${T_LOCALBENCH:-200} \
          "$PY" -m jaxmg bench -n 2 $([ $how = single-process ] && echo --single-process) \
          --routine ${LOCAL_ROUTINE:-potrs} --sizes "${LOCAL_SIZES:-1024,65536}" --dtypes float64 \
          --repeats ${LOCAL_REPEATS:-5} --no-baseline --timeout ${T_LOCALBENCH:-200} \
          --out "$OUT/${LOCAL_ROUTINE:-potrs}_${how}_h200x2.json" 2>&1 | grep -v Gloo
      done
      rm -f "$OUT"/*.png ;;
    overhead)
      # Per-call times of small calls (bench/overhead.py), in one process and under the launcher.
      CUDA_VISIBLE_DEVICES=0,1 timeout 120 "$PY" bench/overhead.py "$OUT/overhead_single-process.json"
      timeout 140 "$PY" -m jaxmg launch -n 2 --timeout 120 bench/overhead.py \
        "$OUT/overhead_launcher.json" --launched 2>&1 | grep -v Gloo ;;
    mgbench)
      # cuSOLVERMg (one process, both GPUs, 1-D column block-cyclic): .gpu/bin/cusolvermg_bench,
      # built by bench/cusolvermg/build.sh. MG_CASES of routine:n:tile.
      for spec in ${MG_CASES:-potrf:65536:1024 syevd:16384:256 syevd:16384:1024}; do
        IFS=: read -r routine n tile <<< "$spec"
        CUDA_VISIBLE_DEVICES=0,1 timeout ${T_MG:-150} .gpu/bin/cusolvermg_bench "$routine" "$n" \
          "$tile" ${MG_REPEATS:-2} 2>&1 | tee -a "$OUT/cusolvermg.jsonl"
      done ;;
    bench)
      # Timings: potrs on both GPUs vs cho_factor + cho_solve on one (python -m jaxmg bench).
      XLA_PYTHON_CLIENT_MEM_FRACTION=${BENCH_MEM_FRACTION:-0.85} timeout ${T_BENCH:-330} \
        "$PY" -m jaxmg bench -n ${BENCH_PROCS:-2} --sizes "${BENCH_SIZES:-1024,8192,32768,65536,131072}" \
        --dtypes "${BENCH_DTYPES:-float64,float32}" --repeats "${BENCH_REPEATS:-2}" ${BENCH_EXTRA:-} \
        ${BENCH_MESH:+--mesh $BENCH_MESH} --baseline-max "${BENCH_BASELINE:-65536}" \
        --timeout "${T_BENCH:-330}" --out "$OUT/${BENCH_NAME:-potrs_h200x2}.json" 2>&1 \
        | grep -v Gloo ;;
    qrbench)
      # qr and least_squares on both GPUs against JAX on one and JAXMg 1.4.1 on the same two:
      # QR_CASES of routine:sizes:cols:nrhs:tiles (cols empty: square; tiles empty: automatic);
      # QR_PEER=0 leaves JAXMg out, QR_EXTRA adds bench options (e.g. --no-baseline).
      for spec in ${QR_CASES:-qr:16384,32768:: least_squares:32768:8192:16 least_squares:65536:16384:16 least_squares:32768:8192:1024}; do
        IFS=: read -r routine sizes cols nrhs tiles <<< "$spec"
        XLA_PYTHON_CLIENT_MEM_FRACTION=${BENCH_MEM_FRACTION:-0.85} timeout ${T_QR:-400} \
          "$PY" -m jaxmg bench -n 2 --routine "$routine" --sizes "$sizes" ${cols:+--cols $cols} \
          ${nrhs:+--nrhs $nrhs} ${tiles:+--tile $tiles} ${BENCH_MESH:+--mesh $BENCH_MESH} \
          --dtypes float64 --repeats 2 \
          $([ "${QR_PEER:-1}" = 1 ] && [ -n "${JAXMG_PEER_PATH:-}" ] && echo --peer) ${QR_EXTRA:-} \
          --timeout "${T_QR:-400}" \
          --out "$OUT/${routine}_${sizes%%,*}${cols:+x$cols}${nrhs:+_k$nrhs}${tiles:+_T${tiles//,/-}}${BENCH_MESH:+_$BENCH_MESH}.json" 2>&1 \
          | grep -v Gloo
      done
      rm -f "$OUT"/*.png ;;  # (at most 8 files come back)
    spectral)
      # Tile choice, then timings. SPEC_CASES of routine:sweep_n:sizes:flags. A sweep over
      # SPEC_TILES at sweep_n (jaxmg alone, float64, one warm call) picks the fastest tile
      # (empty sweep_n: the last one picked); then `sizes` with it, against JAX on one GPU
      # (flag "base") and JAXMg 1.4.1 on both (flag "peer"). SPEC_TILE: the tile without a sweep.
      best=${SPEC_TILE:-}
      for spec in ${SPEC_CASES:-polar:16384:: syevd:16384:32768:base,peer eigvalsh::32768:peer}; do
        IFS=: read -r routine sweep_n sizes flags <<< "$spec"
        if [ -n "$sweep_n" ]; then
          sweep_out=$OUT/${routine}_tiles_$sweep_n.json
          XLA_PYTHON_CLIENT_MEM_FRACTION=${BENCH_MEM_FRACTION:-0.85} timeout ${T_SPEC:-300} \
            "$PY" -m jaxmg bench -n 2 --routine "$routine" --sizes "$sweep_n" \
            --tile "${SPEC_TILES:-256,512,1024}" --dtypes float64 --repeats 1 --no-baseline \
            --timeout "${T_SPEC:-300}" --out "$sweep_out" 2>&1 | grep -v Gloo
          best=$("$PY" -c 'import json, sys
r = [x for x in json.load(open(sys.argv[1]))["records"] if "seconds" in x]
print(min(r, key=lambda x: x["seconds"])["tile"] if r else "")' "$sweep_out" 2>/dev/null)
          echo "[remote] $routine: fastest tile at N=$sweep_n: ${best:-none}"
        fi
        [ -n "$sizes" ] || continue
        XLA_PYTHON_CLIENT_MEM_FRACTION=${BENCH_MEM_FRACTION:-0.85} timeout ${T_SPEC:-300} \
          "$PY" -m jaxmg bench -n 2 --routine "$routine" --sizes "$sizes" ${best:+--tile $best} \
          --dtypes float64 --repeats 1 \
          $([[ $flags == *peer* ]] && [ -n "${JAXMG_PEER_PATH:-}" ] && echo --peer) \
          $([[ $flags == *base* ]] || echo --no-baseline) \
          --timeout "${T_SPEC:-300}" --out "$OUT/${routine}_${sizes%%,*}${best:+_T$best}.json" 2>&1 \
          | grep -v Gloo
      done
      rm -f "$OUT"/*.png ;;
    ceiling)
      # The eigensolver, SVD and one-device rows on one GPU, random matrices, with the stage
      # breakdown (JAXMG_DEBUG=1: "stages_best_ms" in each JSON): CEIL_CASES of
      # routine:sizes:dtypes:flags[:cols], against JAX on the same GPU (flag "base") and JAXMg
      # 1.4.1 (flag "peer", when carried); cols: qr's and least_squares' N (M x N matrices).
      for spec in ${CEIL_CASES:-syevd:32768:float64:base syevd:16384:float64,float32,complex128:base,peer eigvalsh:32768:float64: gesvd:8192:float64:base gesvd_values:16384:float64:base potrs:32768:float64:base,peer lu_solve:32768:float64:base}; do
        IFS=: read -r routine sizes dtypes flags cols <<< "$spec"
        JAXMG_DEBUG=1 JAXMG_COMMIT=$(cat .gpu/jaxmg/COMMIT 2>/dev/null || echo unknown) \
          XLA_PYTHON_CLIENT_MEM_FRACTION=${BENCH_MEM_FRACTION:-0.85} \
          timeout ${T_SPEC:-300} "$PY" -m jaxmg bench -n 1 --routine "$routine" --sizes "$sizes" \
          --matrix random --dtypes "$dtypes" --repeats 1 ${cols:+--cols $cols} \
          $([[ $flags == *peer* ]] && [ -n "${JAXMG_PEER_PATH:-}" ] && echo --peer) \
          $([[ $flags == *base* ]] || echo --no-baseline) \
          --timeout "${T_SPEC:-300}" --out "$OUT/${routine}_${sizes}${cols:+x$cols}_random_h200x1.json" 2>&1 \
          | grep -v -e Gloo -e '^\[jaxmg\] step' -e '^\[jaxmg\] .* part '
      done
      rm -f "$OUT"/*.png ;;
    subset)
      # Eigenpairs by index on one GPU, random matrices, with the stage breakdown: SUBSET_CASES of
      # routine:n:lo-hi[:flags] (routine syevd or eigvalsh; flags "base": JAX on the same GPU, its
      # eigh with the same subset and its full eigh sliced; or gesvd, gesvd_values: the singular
      # triplets lo..hi-1 counted from the smallest, e.g. gesvd:8192:7373-8192:base the N/10
      # largest), into $OUT/<routine>_subset_<n>_<lo>-<hi>_random_h200x1.json; lo-hi "all": the
      # full problem.
      for spec in ${SUBSET_CASES:-syevd:32768:0-3277:base syevd:32768:0-328 syevd:32768:all syevd:16384:0-1638:base}; do
        IFS=: read -r routine n range flags <<< "$spec"
        JAXMG_DEBUG=1 JAXMG_COMMIT=$(cat .gpu/jaxmg/COMMIT 2>/dev/null || echo unknown) \
          XLA_PYTHON_CLIENT_MEM_FRACTION=${BENCH_MEM_FRACTION:-0.85} CUDA_VISIBLE_DEVICES=0 \
          timeout ${T_SPEC:-300} "$PY" -m jaxmg bench -n 1 --routine "$routine" --sizes "$n" \
          --matrix random --dtypes float64 --repeats 1 \
          $([ "$range" = all ] || echo --subset "${range/-/:}") \
          $([[ $flags == *base* ]] || echo --no-baseline) --timeout "${T_SPEC:-300}" \
          --out "$OUT/${routine}_subset_${n}_${range}_random_h200x1.json" 2>&1 \
          | grep -v -e Gloo -e '^\[jaxmg\] step' -e '^\[jaxmg\] .* part '
      done
      rm -f "$OUT"/*.png ;;
    mixed)
      # Mixed precision solves against the condition number on one GPU (bench/mixed_kappa.sh:
      # potrs and lu_solve factored in float32 and in float64, JAX's float64 solve beside):
      # MIXED_N (default 32768), MIXED_KAPPAS (default 1e3 1e6 1e12), into
      # $OUT/mixed_kappa_h200x1_n<N>[_<JAXMG_GPU_MATH>].json (gpu_math, when set, in the name);
      # each run's own JSON in $OUT/mixed_parts[_<mode>] (ROUTINES picks potrs or lu_solve).
      XLA_PYTHON_CLIENT_MEM_FRACTION=${BENCH_MEM_FRACTION:-0.85} CUDA_VISIBLE_DEVICES=0 \
        MIXED_PARTS="$OUT/mixed_parts${JAXMG_GPU_MATH:+_$JAXMG_GPU_MATH}" \
        REPEATS=${MIXED_REPEATS:-1} PYTHON=$PY timeout ${T_MIXED:-540} bash bench/mixed_kappa.sh \
        "$OUT/mixed_kappa_h200x1_n${MIXED_N:-32768}${JAXMG_GPU_MATH:+_$JAXMG_GPU_MATH}.json" \
        "${MIXED_N:-32768}" 1 \
        ${MIXED_KAPPAS:-1e3 1e6 1e12} ;;
    eigsweep)
      # The two-stage eigensolver's band width b and Q₂ group ℓ on one GPU, random matrices, with
      # the stage breakdown: EIG_SWEEP of b:ℓ, EIG_CASES of routine:sizes:dtypes; every result
      # merged into $OUT/eigsweep.json (one file: at most 8 come back).
      rm -rf /tmp/eigsweep && mkdir -p /tmp/eigsweep
      for conf in ${EIG_SWEEP:-64:64 128:64 128:128}; do
        IFS=: read -r band group <<< "$conf"
        for spec in ${EIG_CASES:-syevd:16384,32768:float64 eigvalsh:32768:float64 syevd:16384:float32}; do
          IFS=: read -r routine sizes dtypes <<< "$spec"
          JAXMG_EIG_BAND=$band JAXMG_EIG_Q2_GROUP=$group JAXMG_DEBUG=1 \
            JAXMG_COMMIT=$(cat .gpu/jaxmg/COMMIT 2>/dev/null || echo unknown) \
            XLA_PYTHON_CLIENT_MEM_FRACTION=${BENCH_MEM_FRACTION:-0.85} CUDA_VISIBLE_DEVICES=0 \
            timeout ${T_SPEC:-300} "$PY" -m jaxmg bench -n 1 --routine "$routine" --sizes "$sizes" \
            --matrix random --dtypes "$dtypes" --repeats 1 --no-baseline --timeout "${T_SPEC:-300}" \
            --out "/tmp/eigsweep/${routine}_${sizes}_${dtypes}_b${band}_l${group}.json" 2>&1 \
            | grep -v -e Gloo -e '^\[jaxmg\] step' -e '^\[jaxmg\] .* part '
        done
      done
      "$PY" - "$OUT/eigsweep.json" /tmp/eigsweep/*.json <<'PYEOF'
import json, os, sys
out = {}
for f in sys.argv[2:]:
    out[os.path.basename(f)[:-5]] = json.load(open(f))
json.dump(out, open(sys.argv[1], "w"), indent=1)
for name, res in sorted(out.items()):
    for r in res.get("records", []):
        st = r.get("stages_best_ms", {})
        print(f"{name:45s} n={r.get('n')} {r.get('seconds', float('nan')):8.3f} s  " +
              " ".join(f"{k.split(' ')[0]}={v / 1e3:.2f}" for k, v in st.items()))
PYEOF
      ;;
    sweep)
      # Tile and mesh sweep for potrs at one size (no baseline).
      for mesh in ${SWEEP_MESHES:-2x1 1x2}; do
        XLA_PYTHON_CLIENT_MEM_FRACTION=${BENCH_MEM_FRACTION:-0.85} timeout ${T_SWEEP:-150} \
          "$PY" -m jaxmg bench -n ${BENCH_PROCS:-2} --mesh "$mesh" --sizes "${SWEEP_SIZE:-65536}" \
          --dtypes float64 --tile "${SWEEP_TILES:-512,1024,2048}" --repeats 2 --no-baseline ${BENCH_EXTRA:-} \
          --timeout "${T_SWEEP:-150}" --out "$OUT/${SWEEP_NAME:-sweep}_$mesh.json" 2>&1 | grep -v Gloo
      done ;;
    twostage)
      # The two-stage eigensolver on both GPUs (opt-in there until this passes): the spectral
      # cases of multi with it, then syevd and eigvalsh at N = 32768 on 1x2 and 2x1 meshes
      # against JAX on one GPU and, when carried, JAXMg 1.4.1 on both.
      (export JAXMG_GPU_EIGH=two-stage JAXMG_GPU_EIGVALS=two-stage
      JAXMG_GPU_CASES=${JAXMG_GPU_CASES:-'syevd|eigh|svd'} timeout $((T_MULTI + 20)) "$PY" -m jaxmg launch \
        -n 2 --timeout $T_MULTI tests/gpu/solve_gpu.py multi "$OUT"
      for spec in ${TWOSTAGE_CASES:-syevd:1x2:base syevd:2x1:peer eigvalsh:1x2: eigvalsh:2x1:peer}; do
        IFS=: read -r routine mesh flags <<< "$spec"
        XLA_PYTHON_CLIENT_MEM_FRACTION=${BENCH_MEM_FRACTION:-0.85} timeout ${T_SPEC:-300} \
          "$PY" -m jaxmg bench -n 2 --routine "$routine" --sizes "${TWOSTAGE_SIZES:-32768}" \
          --mesh "$mesh" --dtypes float64 --repeats 1 \
          $([[ $flags == *peer* ]] && [ -n "${JAXMG_PEER_PATH:-}" ] && echo --peer) \
          $([[ $flags == *base* ]] || echo --no-baseline) \
          --timeout "${T_SPEC:-300}" --out "$OUT/${routine}_twostage_$mesh.json" 2>&1 | grep -v Gloo
      done)
      rm -f "$OUT"/*.png ;;
    launch)
      # Any script on both GPUs: LAUNCH_SCRIPT [LAUNCH_ARGS] (e.g. a step-by-step look at one
      # case with JAXMG_DEBUG=1).
      timeout $((${T_LAUNCH:-120} + 20)) "$PY" -m jaxmg launch -n 2 --timeout ${T_LAUNCH:-120} \
        "$LAUNCH_SCRIPT" ${LAUNCH_ARGS:-} ;;
    sharedlaunch)
      # Any script with SHARED_PROCS ranks sharing the GPU: LAUNCH_SCRIPT, with $OUT/<its name>_p<P>
      # as its first argument (e.g. tests/gpu/lu_probe.py).
      for procs in ${SHARED_PROCS:-2}; do
        name=$(basename "$LAUNCH_SCRIPT" .py)_p$procs
        shared_launch "$procs" "${T_LAUNCH:-120}" "$LAUNCH_SCRIPT" "$OUT/$name.json" 2>&1 |
          tee "$OUT/$name.log"
      done ;;
    shared)
      # Ranks sharing the one GPU (python -m jaxmg launch --share-gpu: a host id per rank, NCCL
      # over loopback sockets, JAX bound to GPU 0, 0.85/P of its memory each): the solve
      # worker's cases on the meshes of each P of SHARED_PROCS (2: 2x1 1x2; 4: 4x1 1x4 2x2;
      # 6: 3x2), into gpu_shared_p<P>.json; JAXMG_GPU_MESHES and JAXMG_GPU_CASES pick some.
      for procs in ${SHARED_PROCS:-2 4 6}; do
        shared_launch "$procs" "${T_SHARED:-400}" tests/gpu/solve_gpu.py shared "$OUT"
      done ;;
    sharedtwostage)
      # The two-stage eigensolver (opt-in on several GPUs) on the 1 x P and P x 1 meshes of
      # ranks sharing the GPU: the eigensolver's cases, into gpu_shared_p<P>-twostage.json.
      for procs in ${SHARED_PROCS:-2 4}; do
        (export JAXMG_GPU_EIGH=two-stage JAXMG_GPU_EIGVALS=two-stage JAXMG_GPU_TAG=-twostage
        export JAXMG_GPU_CASES=${JAXMG_GPU_CASES:-'/(syevd|eigh)'}
        export JAXMG_GPU_MESHES=${JAXMG_GPU_MESHES:-${procs}x1,1x${procs}}
        shared_launch "$procs" "${T_SHARED:-400}" tests/gpu/solve_gpu.py shared "$OUT")
      done ;;
    sharedcases)
      # The seed README example, JAXMg 1.4.1's cases and jaxmg.linalg's cases with ranks
      # sharing the GPU, for each P of SHARED_PROCS.
      # SHARED_CASES: some of "readme,jaxmg1,linalg" (default: all three); JAXMG1_SELECT: some
      # of JAXMg's cases ("|"-separated parts of their names), JAXMG1_PART (a suffix of the
      # output folder's name, for two such jobs side by side); LINALG_DTYPES, LINALG_VMAP (0: not
      # the jax.vmap cases) and LINALG_PART (a suffix of the output's name) split jaxmg.linalg's.
      # "mixed": the mixed-precision solves (factor_dtype=, tests/mp/mixed_worker.py) on
      # MIXED_MESH (default 2x2 for 4 ranks, Px1 otherwise), MIXED_CASES (a regular expression
      # of case names; default all), into mixed_shared_p<P><MIXED_PART>.json.
      # (the facts name the wheel's commit, not the test tree's)
      export JAXMG_COMMIT=$(cat .gpu/jaxmg/COMMIT 2>/dev/null || echo unknown)
      for procs in ${SHARED_PROCS:-2 4}; do
        parts=${SHARED_CASES:-readme,jaxmg1,linalg}
        parts=" ${parts//,/ } "
        # (if-statements: a part not asked for leaves no failing status behind)
        if [[ $parts == *" readme "* ]]; then
          shared_launch "$procs" 90 examples/readme_example.py 2>&1 |
            tee "$OUT/readme_shared_p$procs.log"
        fi
        if [[ $parts == *" jaxmg1 "* ]]; then
          shared_launch "$procs" "${T_JAXMG1:-300}" \
            tests/gpu/jaxmg1_gpu.py "$OUT/jaxmg1_shared_p$procs${JAXMG1_PART:-}" ${JAXMG1_SELECT:-}
        fi
        mesh=$([ "$procs" = 4 ] && echo "2 2" || echo "$procs 1")
        if [[ $parts == *" linalg "* ]]; then
          shared_launch "$procs" "${T_LINALG:-300}" \
            tests/mp/linalg_worker.py $mesh "${LINALG_DTYPES:-float32,float64,complex64,complex128}" \
            "${LINALG_VMAP:-1}" "$OUT/linalg_shared_p$procs${LINALG_PART:-}.json"
        fi
        if [[ $parts == *" mixed "* ]]; then
          mixed_mesh=${MIXED_MESH:-${mesh/ /x}}
          JAXMG_CASES=${MIXED_CASES:-} shared_launch "$procs" "${T_MIXED_CASES:-300}" \
            tests/mp/mixed_worker.py ${mixed_mesh/x/ } "$OUT/mixed_shared_p$procs${MIXED_PART:-}.json"
        fi
      done ;;
    sharedfault)
      # One rank's failure in the middle of each own algorithm with ranks sharing the GPU.
      for procs in ${SHARED_PROCS:-2 4}; do
        # (the launcher gives each rank its share of the memory: not this script's fraction)
        env -u XLA_PYTHON_CLIENT_MEM_FRACTION \
          timeout ${T_FAULT:-480} "$PY" tests/gpu/fault_gpu.py "shared$procs" "$OUT"
      done ;;
    jobs)
      # Stages side by side, each with variables of its own: JOBS="STAGE VAR=VALUE ...; ..."
      # (e.g. the shared stage's meshes as separate jobs, JAXMG_GPU_PART naming each part's
      # output). The small cases of the shared stages leave the GPU mostly idle and the
      # machine's cores not, so a few jobs at once end sooner. Each job's XLA pool allocates on
      # demand (not a preallocated share), its threads are SHARED_THREADS (default 2); job k logs
      # to $OUT/job<k>.log, and it writes no summary (this run does, at the end).
      k=0
      IFS=';' read -ra specs <<< "${JOBS:-}"
      for spec in "${specs[@]}"; do
        read -ra words <<< "$spec"
        [ ${#words[@]} -gt 0 ] || continue
        k=$((k + 1))
        echo "[remote] job $k: ${words[*]}"
        env JAXMG_SKIP_INSTALL=1 JAXMG_NO_SUMMARY=1 GPU_LIBS=$GPU_LIBS-job$k \
          XLA_PYTHON_CLIENT_PREALLOCATE=false SHARED_THREADS=${SHARED_THREADS:-2} \
          "${words[@]:1}" bash "$ROOT/scripts/gpu_remote.sh" "${words[0]}" > "$OUT/job$k.log" 2>&1 &
      done
      wait
      grep -h "stage .*: rc=\|FAIL\|cases of\|Traceback\|Error" "$OUT"/job*.log | grep -v "^\[ok\]" | tail -60 ;;
    reliability)
      # Agreement, bounded waits, threads, 1000-call soak, fuzz cases and a killed process, as
      # jobs of 2 processes (tests/gpu/reliability_gpu.py) -> $OUT/reliability.json.
      timeout ${T_RELIABILITY:-560} "$PY" tests/gpu/reliability_gpu.py "$OUT" .gpu/fuzz_cases.json ;;
    *) echo "[remote] unknown stage $stage" ;;
  esac
  echo "[remote] stage $stage: rc=$? in $(( $(date +%s) - t0 )) s"
done

[ -n "${JAXMG_NO_SUMMARY:-}" ] && exit 0
"$PY" - "$OUT" <<'PYEOF'
import json, os, sys
out = sys.argv[1]
res = {"stages": {}}
for name in ("multi", "single", "local") + tuple(
        sorted(f[4:-5] for f in os.listdir(out) if f.startswith("gpu_shared_p"))):
    p = os.path.join(out, f"gpu_{name}.json")
    res["stages"][name] = json.load(open(p)) if os.path.exists(p) else None
for name in ("readme", "readme_local", "info"):
    p = os.path.join(out, f"{name}.log")
    res[name + "_log"] = open(p).read()[-4000:] if os.path.exists(p) else None
# The example prints x, logdet and True on process 0 (gRPC shutdown noise may follow).
lines = [line.strip() for line in (res["readme_log"] or "").splitlines()]
res["readme_ok"] = "True" in lines and "False" not in lines
lines = [line.strip() for line in (res["readme_local_log"] or "").splitlines()]
res["readme_local_ok"] = "True" in lines and "False" not in lines
recs = [r for s in res["stages"].values() if s for r in s["records"]]
res["summary"] = {"cases": len(recs),
                  "expected": sum(len(s.get("expected", [])) for s in res["stages"].values() if s),
                  "missing": [m for s in res["stages"].values() if s for m in s.get("missing", [])],
                  "failed": [f"{r['case']} {r.get('mesh')}" for r in recs
                                                if not r.get("ok")]}
print("\n=== timings (best of 3 warm runs) ===")
for r in recs:
    if "tflops" in r:  # (the case records carry their seconds too)
        print(f"{r['case']:40s} gpus={r.get('gpus')} mesh={r.get('mesh')} {r['seconds']*1e3:9.1f} ms "
              f"{r['tflops']:6.1f} TF/s  residual={r.get('residual')}")
print("=== summary:", json.dumps(res["summary"]), "readme_ok:", res["readme_ok"],
      "readme_local_ok:", res["readme_local_ok"])
json.dump(res, open(os.path.join(out, "gpu_results.json"), "w"), indent=1)
PYEOF
