"""GPU tests of potrs and lu_solve on the cuSOLVERMp engine; run on the GPU machine, not by pytest.

Usage (see scripts/gpu_remote.sh):
  python -m jaxmg launch -n 2 tests/gpu/solve_gpu.py multi OUT_DIR   # 2 processes, 1 GPU each
  python tests/gpu/solve_gpu.py single OUT_DIR                        # 1 process, 1 GPU
  CUDA_VISIBLE_DEVICES=0,1 python tests/gpu/solve_gpu.py local OUT_DIR  # 1 process, 2 GPUs

  python -m jaxmg launch -n P --share-gpu tests/gpu/solve_gpu.py shared OUT_DIR  # P ranks, 1 GPU

shared: the multi cases with P ranks sharing one GPU (NCCL over loopback sockets), on the meshes
of P (SHARED_MESHES; JAXMG_GPU_MESHES picks some, e.g. "4x1,2x2"); the plan's cases of
tests/solve_plan.py's shared_pick (JAXMG_GPU_SKIP: a file of cases already recorded, left out).
Process 0 writes OUT_DIR/gpu_shared_p<P>.json.
multi: meshes 2x1 and 1x2, the cases of tests/solve_plan.py's gpu_plan (four dtypes, tiles that
divide and pad, every engine path: in place, transposed, redistributed (Gemr2D), hence P x 1 and
1 x P engine grids and row and column tile permutations), then 200 mixed calls with flat GPU
memory. single: a 1x1 mesh. local: one process driving both GPUs (no launcher, no
jax.distributed): the multi cases, 200 mixed calls, a 1x1 mesh on the second GPU, and calls
from two threads on the two GPUs at once. Each record is named as in the plan; the summary lists
cases missing from the records or failed. Process 0 writes OUT_DIR/gpu_<mode>.json after every case.
"""

import json
import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import jax

mode, out_dir = sys.argv[1], sys.argv[2]
if mode in ("multi", "shared"):  # (local: one process drives every GPU, no jax.distributed)
    jax.distributed.initialize()
jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from eigh_cases import (  # noqa: E402
    eigh_case,
    eigh_failure_case,
    eigh_subset_case,
    eigh_subset_checks,
    generalized_case,
    generalized_failure_case,
    hermitian,
)
from factor_cases import factor_case, factor_failure_case  # noqa: E402
from linalg_cases import (  # noqa: E402
    A_SPEC,
    B_SPEC,
    gather,
    inside_jit_case,
    inverse_case,
    inverse_failure_case,
    measure,
    not_symmetric_case,
    place,
    rhs,
    routine_fn,
    run_named,
    singular_case,
    solve_case,
    spd,
)
from matmul_cases import matmul_case  # noqa: E402
from qr_cases import qr_case, qr_failure_case  # noqa: E402
from solve_plan import SHARED_MESHES, gpu_plan, shared_pick  # noqa: E402
from svd_cases import svd_case, svd_failure_case, svd_subset_case  # noqa: E402
from triangular_cases import triangular_kinds  # noqa: E402

RESULTS = {"mode": mode, "processes": jax.process_count(), "records": [], "expected": []}
# JAXMG_GPU_TAG: a suffix of the output's name and the meshes' tags (e.g. "-twostage").
TAG = os.environ.get("JAXMG_GPU_TAG", "")
# JAXMG_GPU_PART: a suffix of the output's name alone, for one part of a rank count's (or the
# one process's) cases run beside the others (scripts/gpu_remote.sh's jobs stage); the case
# names stay those of the whole.
PART = os.environ.get("JAXMG_GPU_PART", "")
OUT_NAME = (f"gpu_shared_p{jax.process_count()}{TAG}" if mode == "shared" else f"gpu_{mode}") + PART


def save():
    if jax.process_index() == 0:
        with open(os.path.join(out_dir, f"{OUT_NAME}.json"), "w") as f:
            json.dump(RESULTS, f, indent=1)


def log(*args):
    if jax.process_index() == 0:
        print(*args, flush=True)


def gpu_used_bytes():
    """This process's GPU memory: its line of nvidia-smi's compute processes (so that ranks
    sharing the GPU and jobs beside this one do not count), else the device's used memory
    (cupy), else XLA's own count."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        ).stdout
        for line in out.splitlines():
            pid, mib = (field.strip() for field in line.split(","))
            if pid == str(os.getpid()):
                return int(mib) << 20
    except (OSError, ValueError, subprocess.SubprocessError):
        pass
    try:
        import cupy

        free, total = cupy.cuda.runtime.memGetInfo()
        return int(total - free)
    except Exception:  # noqa: BLE001 - cupy missing: XLA's own count
        return int((jax.local_devices()[0].memory_stats() or {}).get("bytes_in_use", -1))


def memory_series(call, calls, checkpoints=4):
    """Runs call(i) for i < calls and reads the process's GPU memory at `checkpoints` even
    points: (the growth at each point since the start, in bytes; ms per call). Memory that
    grows once (an allocator's pool, a communicator's buffers on first use) stops; a leak
    keeps growing, so the verdict is the growth over the second half of the calls."""
    used0 = gpu_used_bytes()
    growth, t0, last = [], time.perf_counter(), None
    for k in range(checkpoints):
        for i in range(k * calls // checkpoints, (k + 1) * calls // checkpoints):
            last = call(i)
        jax.block_until_ready(last)
        growth.append(gpu_used_bytes() - used0)
    return growth, (time.perf_counter() - t0) / calls * 1e3


def leak_record(growth, calls):
    """The memory fields of a repeated case and whether they show no leak: at most 4 MiB
    over the second half of the calls (a leak of 20 KiB a call would show as 2 MiB)."""
    second_half = growth[-1] - growth[len(growth) // 2 - 1]
    return (
        dict(
            calls=calls,
            gpu_used_growth_bytes=growth[-1],
            gpu_used_growth_series=growth,
            gpu_used_growth_second_half=second_half,
        ),
        second_half <= 4 << 20,
    )


def repeated_order(mesh):
    """256, or the nearest order below it that the mesh's sides divide (252 on 3 x 2)."""
    return 256 - 256 % math.lcm(*mesh.devices.shape)


def case_repeated(mesh, calls=200):
    """Mixed potrs and lu_solve calls: flat GPU memory, per-call time at n = 256 (252 on 3x2)."""
    n = repeated_order(mesh)
    a, b = spd(n, np.float64, 8), rhs(n, 1, np.float64, 8)
    ap, bp = place(a, mesh, A_SPEC), place(b, mesh, B_SPEC)
    fns = [jax.jit(lambda a, b, r=r: routine_fn(r)(a, b, T_A=32)) for r in ("potrs", "lu_solve")]
    for i in range(20):
        x = fns[i % 2](ap, bp)
    x.block_until_ready()
    out = {}

    def call(i):
        out["x"] = fns[i % 2](ap, bp)
        return out["x"]

    growth, per_call_ms = memory_series(call, calls)
    rec = measure("", a, b, gather(out["x"]))
    memory, flat = leak_record(growth, calls)
    rec.update(memory, per_call_ms_n256=per_call_ms)
    rec["ok"] = rec["ok"] and flat
    return rec


def case_repeated_eigh(mesh, calls=200):
    """syevd with and without eigenvectors in turn (the two-stage paths where they are taken):
    flat GPU memory and the last results right."""
    import jaxmg

    n = repeated_order(mesh)
    a = hermitian(n, np.float64, 5)
    ap = place(a, mesh, A_SPEC)
    fns = [
        jax.jit(lambda m, v=v: jaxmg.syevd(m, T_A=128, return_eigenvectors=v))
        for v in (True, False)
    ]
    for i in range(min(10, calls // 2)):
        out = fns[i % 2](ap)
    jax.block_until_ready(out)
    last = {}

    def call(i):
        last[i % 2] = fns[i % 2](ap)
        return last[i % 2]

    growth, per_call_ms = memory_series(call, calls)
    w, v = (gather(x) for x in last[0])
    ref = np.linalg.eigvalsh(a)
    norm = np.linalg.norm(a, 2)
    memory, flat = leak_record(growth, calls)
    rec = dict(
        memory,
        per_call_ms_n256=per_call_ms,
        eigenvalue_error=float(np.abs(w - ref).max() / norm),
        values_error=float(np.abs(gather(last[1]) - ref).max() / norm),
        residual=float(np.linalg.norm(a @ v - v * w) / norm),
    )
    tol = 10 * n * np.finfo(np.float64).eps
    rec["ok"] = bool(
        flat and max(rec["eigenvalue_error"], rec["values_error"], rec["residual"]) <= tol
    )
    return rec


def case_two_threads(calls=50):
    """Two threads, each solving on a 1x1 mesh of its own GPU at the same time."""
    import threading

    n = 256
    a, b = spd(n, np.float64, 8), rhs(n, 1, np.float64, 8)
    out, errors = {}, []

    def work(i):
        try:
            mesh = jax.make_mesh((1, 1), ("pr", "pc"), devices=jax.devices()[i : i + 1])
            ap, bp = place(a, mesh, A_SPEC), place(b, mesh, B_SPEC)
            fn = jax.jit(lambda a, b: routine_fn("potrs")(a, b, T_A=32, mesh=mesh))
            for _ in range(calls):
                x = fn(ap, bp)
            out[i] = gather(x)
        except Exception as e:  # noqa: BLE001 - recorded
            errors.append(f"thread {i}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        return {"ok": False, "error": "; ".join(errors)}
    recs = [measure("", a, b, out[i]) for i in range(2)]
    return {"ok": all(r["ok"] for r in recs), "residual": max(r["residual"] for r in recs)}


def log_record(rec):
    RESULTS["records"].append(rec)
    keys = ("residual", "logdet_err", "status", "status_all_ranks", "per_call_ms_n256", "error")
    log(
        f"[{'ok' if rec.get('ok') else 'FAIL'}] {rec['case']} "
        + ", ".join(f"{k}={rec[k]}" for k in keys if k in rec)
    )
    save()


def run_plan(plan):
    # JAXMG_GPU_CASES: a regular expression that picks cases by name (a quick look at some).
    pick = os.environ.get("JAXMG_GPU_CASES")
    if pick:
        plan = {k: v for k, v in plan.items() if re.search(pick, k)}
    # JAXMG_GPU_SKIP: a file of case names, one a line, that an earlier part of the same
    # commit's run recorded (a stage cut off at its limit goes on where it stopped).
    if os.environ.get("JAXMG_GPU_SKIP"):
        done = set(Path(os.environ["JAXMG_GPU_SKIP"]).read_text().split())
        plan = {k: v for k, v in plan.items() if k not in done}
    RESULTS["expected"] += list(plan)
    save()
    run_named(plan, [], on_record=log_record)


def mesh_plan(mesh, tag, pick=None):
    kinds = {
        "solve": lambda **p: solve_case(mesh, **p),
        "inside-jit": lambda routine, n: inside_jit_case(mesh, routine, n, 8),
        "singular": lambda routine, n, path="default": singular_case(mesh, routine, n, 8, path),
        "not-symmetric": lambda routine, n: not_symmetric_case(mesh, n, 8),
        "inverse": lambda **p: inverse_case(mesh, **p),
        "inverse-failure": lambda **p: inverse_failure_case(mesh, **p),
        "factor": lambda **p: factor_case(mesh, **p),
        "factor-failure": lambda **p: factor_failure_case(mesh, **p),
        "qr": lambda **p: qr_case(mesh, **p),
        "qr-failure": lambda **p: qr_failure_case(mesh, **p),
        "eigh": lambda **p: eigh_case(mesh, **p),
        "eigh-failure": lambda **p: eigh_failure_case(mesh, **p),
        "eigh-subset": lambda **p: eigh_subset_case(mesh, **p),
        "eigh-subset-checks": lambda: eigh_subset_checks(mesh),
        "eigh-generalized": lambda **p: generalized_case(mesh, **p),
        "eigh-generalized-failure": lambda **p: generalized_failure_case(mesh, **p),
        "svd": lambda **p: svd_case(mesh, **p),
        "svd-failure": lambda **p: svd_failure_case(mesh, **p),
        "svd-subset": lambda **p: svd_subset_case(mesh, **p),
        "matmul": lambda **p: matmul_case(mesh, **p),
        **triangular_kinds(mesh),
    }
    return {
        f"{tag}/{name}": (lambda k=kind, p=params: kinds[k](**p))
        for name, kind, params in gpu_plan(*mesh.devices.shape)
        if pick is None or pick(name)
    }


def shared_meshes():
    """The meshes of the shared mode for this job's rank count (JAXMG_GPU_MESHES: some)."""
    count = jax.process_count()
    if count not in SHARED_MESHES:
        raise SystemExit(f"shared: {count} ranks; run 2, 4 or 6 ({sorted(SHARED_MESHES)})")
    meshes = SHARED_MESHES[count]
    if os.environ.get("JAXMG_GPU_MESHES"):
        picked = [
            tuple(int(x) for x in m.split("x")) for m in os.environ["JAXMG_GPU_MESHES"].split(",")
        ]
        meshes = tuple(m for m in meshes if m in picked)
    return meshes


def main():
    try:
        import ctypes

        from jaxmg._core import native as _native

        buf = ctypes.create_string_buffer(4096)
        _native.engine("cuda").jaxmg_cuda_versions(buf, len(buf))
        RESULTS["versions"] = buf.value.decode()
    except Exception as e:  # noqa: BLE001
        RESULTS["versions"] = f"error: {e}"
    RESULTS["jax"] = jax.__version__
    RESULTS["devices"] = [str(d) for d in jax.devices()]
    log("versions:", RESULTS["versions"])
    if mode == "multi":
        for shape in ((2, 1), (1, 2)):
            mesh = jax.make_mesh(shape, ("pr", "pc"))
            run_plan(mesh_plan(mesh, f"mesh{shape[0]}x{shape[1]}"))
        mesh = jax.make_mesh((2, 1), ("pr", "pc"))
        run_plan({"mesh2x1/mixed-repeated": lambda: case_repeated(mesh)})
        mesh = jax.make_mesh((1, 2), ("pr", "pc"))
        run_plan({"mesh1x2/eigh-repeated": lambda: case_repeated_eigh(mesh)})
    elif mode == "shared":
        # Ranks sharing one GPU: every mesh of the rank count (the cases of shared_pick), then
        # the repeated calls on the rank count's first mesh, shorter above two ranks.
        for shape in shared_meshes():
            mesh = jax.make_mesh(shape, ("pr", "pc"))
            pick = shared_pick(shape, twostage="twostage" in TAG)
            run_plan(mesh_plan(mesh, f"mesh{shape[0]}x{shape[1]}{TAG}", pick))
        first = SHARED_MESHES[jax.process_count()][0]
        calls = 200 if jax.process_count() <= 2 else 40
        eigh_calls = 40 if jax.process_count() <= 4 else 12  # (about 2 s a call at 2 ranks)
        # (JAXMG_GPU_EIGH_CALLS: fewer, where other jobs share the GPU and its cores)
        eigh_calls = int(os.environ.get("JAXMG_GPU_EIGH_CALLS", eigh_calls))
        if first in shared_meshes() and not TAG:
            mesh = jax.make_mesh(first, ("pr", "pc"))
            tag = f"mesh{first[0]}x{first[1]}"
            run_plan({f"{tag}/mixed-repeated": lambda: case_repeated(mesh, calls)})
            # (over loopback sockets a few dozen calls show flat memory too)
            run_plan({f"{tag}/eigh-repeated": lambda: case_repeated_eigh(mesh, eigh_calls)})
    elif mode == "local":
        assert jax.process_count() == 1 and jax.device_count() >= 2, jax.devices()
        for shape in ((2, 1), (1, 2)):
            mesh = jax.make_mesh(shape, ("pr", "pc"))
            run_plan(mesh_plan(mesh, f"local{shape[0]}x{shape[1]}"))
        mesh = jax.make_mesh((2, 1), ("pr", "pc"))
        run_plan({"local2x1/mixed-repeated": lambda: case_repeated(mesh)})
        # The second GPU alone (its device ordinal picks its context), and one 1x1 mesh per GPU
        # used from two threads at once.
        mesh = jax.make_mesh((1, 1), ("pr", "pc"), devices=jax.devices()[1:2])
        plan = mesh_plan(mesh, "local1x1-gpu1")
        # (Inside jit a mesh over some of the devices needs mesh=...: the jit cases leave it out.)
        run_plan({k: v for k, v in plan.items() if "float64" in k and "/jit" not in k})
        run_plan({"local1x1/two-threads": case_two_threads})
    else:
        mesh = jax.make_mesh((1, 1), ("pr", "pc"), devices=jax.local_devices()[:1])
        run_plan(mesh_plan(mesh, "mesh1x1"))
        run_plan({"mesh1x1/eigh-repeated": lambda: case_repeated_eigh(mesh)})
    names = [r["case"] for r in RESULTS["records"]]
    RESULTS["missing"] = sorted(set(RESULTS["expected"]) - set(names))
    RESULTS["unexpected"] = sorted(set(names) - set(RESULTS["expected"]))
    RESULTS["failed"] = [r["case"] for r in RESULTS["records"] if not r.get("ok")]
    save()
    log(
        f"{mode}: {len(names)} cases of {len(RESULTS['expected'])}, "
        f"{len(RESULTS['failed'])} failed: {RESULTS['failed']}, missing: {RESULTS['missing']}"
    )


main()
