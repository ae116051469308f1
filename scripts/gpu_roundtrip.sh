#!/usr/bin/env bash
# GPU round trip, the part that runs HERE (no GPU needed): build the wheel a user's `pip install .`
# builds (`scripts/build_wheels.sh both`: `pip wheel .`, both engines), put it and the wheels the
# GPU machine needs into .gpu/, and print how to run scripts/gpu_remote.sh on the GPU machine
# (with .gpu/ copied beside the source tree), which installs them with `pip install --no-deps`
# into its image's venv. So every GPU run tests the file a user installs. This script does not
# reach the GPU machine itself.
#
#   scripts/gpu_roundtrip.sh            # download what is missing, build, print the run command
#   JAXMG_AT=<commit> scripts/gpu_roundtrip.sh  # the same with that commit's wheel (see below)
#   scripts/gpu_roundtrip.sh collect F  # results file from the device -> bench/results/
#
# Layout (all git-ignored: /.gpu/ and /build/ are in .gitignore):
#   .gpu/jaxmg/   jaxmg-<version>-py3-none-linux_x86_64.whl (no Python ABI: built here on 3.11,
#                 installed there on 3.12)
#   .gpu/wheels/  carried to the GPU machine (no network there), about 60 MB:
#                 nvidia-cusolvermp-cu13 0.9.1 and nvidia-cublasmp-cu13 0.10 (`pip download
#                 --no-deps` for Python 3.12, manylinux x86_64; kept here between runs), NCCL
#                 2.29.7 built for H200 (../shared/wheels; installed there into the image's venv,
#                 replacing its NCCL 2.28.9, since cuBLASMp needs NCCL >= 2.29 and XLA must load
#                 the same one), and JAXMg 1.4.1 (the benchmarks' peer, unzipped there)
#   .gpu/bin/     the cuSOLVERMg benchmark;  .gpu/fuzz_cases.json: tests/test_fuzz.py's cases
#   build/gpu-download/  what is only needed here (JAXMg 1.4.1's full wheel; the cuSOLVER and
#                 cuBLAS wheels whose headers bench/cusolvermg/build.sh uses); never carried
#
# Environment: PYTHON (pip for the downloads and the wheel build; default .venv/bin/python),
# JAXMG_NCCL_WHEEL (an NCCL 2.29 wheel small enough to carry; default: ../shared/wheels).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-$ROOT/.venv/bin/python}

# `scripts/gpu_roundtrip.sh collect FILES_AT/gpu_results.json`: copy the results into
# bench/results/gpu_tests_h200x2_<commit>.json.gz with the commit and whether the tree was dirty
# (gzipped: the results travel with the working tree, inside the carry limit).
if [ "${1:-}" = collect ]; then
  src=$2
  gpus=${GPUS:-2}  # the machine's GPU count, for the file name (GPUS=1 on one H200)
  dst=bench/results/gpu_tests_h200x${gpus}_$(git rev-parse --short=7 HEAD 2>/dev/null || date -u +%F).json.gz
  mkdir -p bench/results
  commit=$(git rev-parse HEAD 2>/dev/null || echo none)
  dirty=false; [ -n "$(git status --porcelain -- . ':!bench/results' 2>/dev/null)" ] && dirty=true
  python3 - "$src" "$dst" "$commit" "$dirty" <<'PYEOF'
import gzip, json, sys
src, dst, commit, dirty = sys.argv[1:]
res = json.load(open(src))
res = {"commit": None if commit == "none" else commit, "dirty": dirty == "true", **res}
with gzip.open(dst, "wt") as f:
    json.dump(res, f, indent=1)
print("[gpu] wrote", dst)
PYEOF
  exit 0
fi

# `scripts/gpu_roundtrip.sh passed RESULTS.json[.gz]... > .gpu/skip.txt`: the names of the cases
# that passed in result files (bench/results' merged ones or a run's parts), one a line: carried
# as JAXMG_GPU_SKIP, a later run at the same commit leaves them out and runs the rest.
if [ "${1:-}" = passed ]; then
  shift
  python3 - "$@" <<'PYEOF'
import gzip, json, sys
for path in sys.argv[1:]:
    res = json.load(gzip.open(path, "rt") if path.endswith(".gz") else open(path))
    records = res.get("records") or [r for s in (res.get("stages") or {}).values() if s
                                      for r in s.get("records", [])]
    for r in records:
        if r.get("ok"):
            print(r["case"])
PYEOF
  exit 0
fi

# `scripts/gpu_roundtrip.sh collect-shared FILES_AT/gpu_shared_p<P>[-PART].json[.gz]... COMMIT`: the
# results of ranks sharing one GPU (one file, or the parts of one rank count that ran as separate
# jobs, merged) into bench/results/gpu_shared_p<P>_h200x1_<commit>.json.gz, with the commit the
# carried wheel was built from (.gpu/jaxmg/COMMIT at the run), the process count and the meshes
# and cases that did not run (a job stopped at its time limit). A case in two files keeps the
# later file's record. The parts of the one-process plan (gpu_single.json, stage single) merge the
# same way, into bench/results/gpu_single_h200x1_<commit>.json.gz. GPU=h100x1 names the files and
# the mode after the H100 80GB where the runs had one (default h200x1).
if [ "${1:-}" = collect-shared ]; then
  shift
  GPU=${GPU:-h200x1} python3 - "$@" <<'PYEOF'
import gzip, json, os, sys
*srcs, commit = sys.argv[1:]
gpu = os.environ["GPU"]
card = {"h200x1": "H200", "h100x1": "H100 80GB"}[gpu]
parts = [json.load(gzip.open(src, "rt") if src.endswith(".gz") else open(src)) for src in srcs]
procs = parts[0]["processes"]
assert all(p["processes"] == procs for p in parts), "parts of different process counts"
by_case, expected = {}, []
for part in parts:
    by_case.update((r["case"], r) for r in part["records"])
    expected += [e for e in part.get("expected", []) if e not in expected]
records = list(by_case.values())
names = [r["case"] for r in records]
res = {k: v for k, v in parts[0].items() if k not in ("records", "expected", "missing", "failed")}
mode = f"one process on one {card}" if procs == 1 else f"ranks sharing one {card}"
out = {**res, "commit": commit, "processes": procs, "gpus": 1, "mode": mode,
       "cases": len(names), "passed": sum(bool(r.get("ok")) for r in records),
       "failed": [r["case"] for r in records if not r.get("ok")],
       "not_run": sorted(set(expected) - set(names)),
       "meshes_run": sorted({n.split("/")[0] for n in names}),
       "meshes_not_reached": [f"mesh{m}" for m in
                              {1: ["1x1"], 2: ["2x1", "1x2"], 4: ["4x1", "1x4", "2x2"], 6: ["3x2"]}[procs]
                              if not any(n.startswith(f"mesh{m}/") for n in names)],
       "parts": [os.path.basename(s) for s in srcs],
       "records": records, "expected": expected}
name = "gpu_single" if procs == 1 else f"gpu_shared_p{procs}"
dst = f"bench/results/{name}_{gpu}_{commit.split('-')[0][:7]}.json.gz"
with gzip.open(dst, "wt") as f:
    json.dump(out, f, indent=1)
print("[gpu] wrote", dst, f"{out['passed']}/{out['cases']} passed, {len(out['not_run'])} not run")
PYEOF
  exit 0
fi

NCCL_WHEEL=${JAXMG_NCCL_WHEEL:-$(ls "$ROOT"/../shared/wheels/nvidia_nccl_cu13-2.29.*.whl 2>/dev/null | head -1 || true)}
if [ -z "$NCCL_WHEEL" ] || [ ! -f "$NCCL_WHEEL" ]; then
  echo "[gpu] needs an NCCL 2.29 wheel small enough to carry: ../shared/wheels/nvidia_nccl_cu13-2.29.*.whl" >&2
  echo "      or JAXMG_NCCL_WHEEL=... (NVIDIA's nvidia-nccl-cu13 wheel is about 200 MB)" >&2
  exit 1
fi
DL=build/gpu-download
rm -rf .gpu/lib .gpu/jaxmg
mkdir -p .gpu/wheels .gpu/jaxmg "$DL"
rm -f .gpu/wheels/nvidia_nccl_cu13-*.whl .gpu/wheels/jaxmg-*.whl

# download DEST SPEC...: wheels for the GPU machine's Python (3.12, manylinux x86_64), no deps;
# pip leaves a file that is already there.
download() {
  local dest=$1; shift
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_18_x86_64 --platform manylinux_2_17_x86_64 -d "$dest" "$@"
}
download .gpu/wheels nvidia-cusolvermp-cu13==0.9.1.9318.post1 nvidia-cublasmp-cu13==0.10.0.3695
cp "$NCCL_WHEEL" .gpu/wheels/

# The wheel, as `pip wheel .` builds it (the one CUDA build path). JAXMG_AT=<commit>: the wheel
# of that commit instead, built in a worktree of it (a GPU stage that goes on at the commit its
# earlier results measured), with .gpu/skip.txt: the cases its results in bench/results passed.
if [ -n "${JAXMG_AT:-}" ]; then
  at=$(git rev-parse --short=7 "$JAXMG_AT")
  tree=$ROOT/build/at-$at
  [ -d "$tree" ] || git worktree add -q --detach "$tree" "$at"
  WHEEL=$(cd "$tree" && PYTHON=$PY scripts/build_wheels.sh both)
  commit=$at
  bash scripts/gpu_roundtrip.sh passed bench/results/gpu_*_h200x1_"$at".json.gz > .gpu/skip.txt
  echo "[gpu] the wheel of $at; .gpu/skip.txt: $(wc -l < .gpu/skip.txt) cases passed at $at"
else
  WHEEL=$(PYTHON=$PY scripts/build_wheels.sh both)
  # The commit it was built from (bench/regress.py's "after" records it), "-dirty" if the tree
  # was.
  commit=$(git rev-parse --short=7 HEAD 2>/dev/null || echo unknown)
  [ -n "$(git status --porcelain -- . ':!bench/results' 2>/dev/null)" ] && commit=$commit-dirty
fi
cp "$WHEEL" .gpu/jaxmg/
echo "$commit" > .gpu/jaxmg/COMMIT

# JAXMg 1.4.1, the peer of the benchmarks (bench/peer_jaxmg1.py): its wheel without the CUDA 12
# library (about 1.9 MB of its 3.6, so that everything fits the carry limit).
download "$DL" jaxmg==1.4.1
PEER_WHEEL=$(ls "$DL"/jaxmg-1.4.1-*.whl | head -1)
"$PY" - "$PEER_WHEEL" .gpu/wheels/"$(basename "$PEER_WHEEL")" <<'PYEOF'
import sys, zipfile
src, dst = sys.argv[1:]
with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
    for item in zin.infolist():
        if not item.filename.startswith("jaxmg/cu12/"):
            zout.writestr(item, zin.read(item.filename))
PYEOF
# The cuSOLVERMg benchmark (the single-process engine comparison; about 0.1 MB), with the
# headers of the cuSOLVER and cuBLAS wheels.
download "$DL" nvidia-cusolver==12.0.4.66 nvidia-cublas==13.1.0.3
JAXMG_WHEELS=$ROOT/$DL bash bench/cusolvermg/build.sh
# The fuzz cases of tests/test_fuzz.py, drawn here (hypothesis is not on the GPU machine).
(cd tests && "$PY" -c "import json, test_fuzz; json.dump(test_fuzz.draw_cases(2), open('../.gpu/fuzz_cases.json', 'w'))")
echo "[gpu] shipping $(basename "$WHEEL"); its GPU engine's NEEDED:"
"$PY" -c 'import sys, zipfile; open("build/gpu-download/libjaxmg_cuda.so", "wb").write(zipfile.ZipFile(sys.argv[1]).read("jaxmg/_lib/libjaxmg_cuda.so"))' "$WHEEL"
readelf -d "$DL"/libjaxmg_cuda.so | awk '/NEEDED/ {print "   ", $5}'
ls -l .gpu/wheels .gpu/jaxmg | awk 'NF > 5 {print "[gpu] carry", $5, $9}'
size=$(du -sb .gpu | cut -f1)
echo "[gpu] carry size $((size / 1048576)) MiB"
if [ "$size" -gt $((60 * 1048576)) ]; then
  echo "[gpu] .gpu is over 60 MiB: it and the working tree must fit the 64 MiB carry limit" >&2
  exit 1
fi
cat <<MSG

Run on the GPU machine, from a copy of this source tree with .gpu/ beside it:
  copy:    .gpu/ (.gpu/jaxmg, .gpu/wheels, .gpu/bin, .gpu/fuzz_cases.json; about 60 MB)
  command: set -o pipefail; OUT=<results folder> bash scripts/gpu_remote.sh 2>&1 | tee <results folder>/log.txt
  (stages: info multi readme single bench qrbench sweep reliability launch; e.g. bash scripts/gpu_remote.sh multi readme)
Then: scripts/gpu_roundtrip.sh collect <files_at>/gpu_results.json
      (-> bench/results/gpu_tests_h200x2_<commit>.json.gz with "commit" and "dirty")
MSG
