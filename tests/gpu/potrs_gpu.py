"""GPU tests of jaxmg.potrs on the cuSOLVERMp engine; run on the GPU machine, not by pytest.

Usage (see scripts/gpu_remote.sh):
  python -m jaxmg launch -n 2 tests/gpu/potrs_gpu.py multi OUT_DIR   # 2 processes, 1 GPU each
  python tests/gpu/potrs_gpu.py single OUT_DIR                        # 1 process, 1 GPU

multi: meshes 2x1 and 1x2, four dtypes, tiles dividing and not dividing the shard, vector and
many-column right-hand sides, inside jit, not positive definite (NaN + status on both ranks),
200 calls with flat GPU memory. Timings are `python -m jaxmg bench`'s (scripts/gpu_remote.sh).
single: a 1x1 mesh (four dtypes, padding) and not positive definite.
Process 0 writes OUT_DIR/gpu_<mode>.json after every case (so a crash keeps what ran).
"""

import json
import os
import sys
import time
import traceback
from pathlib import Path

import jax

mode, out_dir = sys.argv[1], sys.argv[2]
if mode == "multi":
    jax.distributed.initialize()
jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402

import jaxmg  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from linalg_cases import (  # noqa: E402
    A_SPEC,
    B_SPEC,
    DTYPES,
    gather,
    inside_jit_case,
    measure,
    not_positive_definite_case,
    potrs_case,
    rhs,
    spd,
)
from linalg_cases import place as _place  # noqa: E402

RESULTS = {"mode": mode, "processes": jax.process_count(), "records": []}
MESH = None


def place(x, spec):
    return _place(x, MESH, spec)


def case_basic(dtype_name, n, tile, k):
    return potrs_case(MESH, dtype_name, n, tile, k)


def case_inside_jit():
    return inside_jit_case(MESH, 64, 8)


def case_not_positive_definite():
    return not_positive_definite_case(MESH, 64, 8)


def save():
    if jax.process_index() == 0:
        with open(os.path.join(out_dir, f"gpu_{mode}.json"), "w") as f:
            json.dump(RESULTS, f, indent=1)


def log(*args):
    if jax.process_index() == 0:
        print(*args, flush=True)


def gpu_used_bytes():
    try:
        import cupy

        free, total = cupy.cuda.runtime.memGetInfo()
        return int(total - free)
    except Exception:  # noqa: BLE001 - cupy missing: XLA's own count
        return int((jax.local_devices()[0].memory_stats() or {}).get("bytes_in_use", -1))


def case_repeated(calls=200):
    n = 256
    a, b = spd(n, np.float64, 8), rhs(n, 1, np.float64, 8)
    ap, bp = place(a, A_SPEC), place(b, B_SPEC)
    fn = jax.jit(lambda a, b: jaxmg.potrs(a, b, T_A=32))
    for _ in range(20):
        x = fn(ap, bp)
    x.block_until_ready()
    used0 = gpu_used_bytes()
    xla0 = (jax.local_devices()[0].memory_stats() or {}).get("bytes_in_use", -1)
    t0 = time.perf_counter()
    for _ in range(calls):
        x = fn(ap, bp)
    x.block_until_ready()
    per_call_ms = (time.perf_counter() - t0) / calls * 1e3
    used1 = gpu_used_bytes()
    xla1 = (jax.local_devices()[0].memory_stats() or {}).get("bytes_in_use", -1)
    rec = measure("repeated", a, b, gather(x))
    rec.update(
        calls=calls,
        gpu_used_growth_bytes=used1 - used0,
        xla_in_use_growth_bytes=int(xla1 - xla0),
        per_call_ms_n256=per_call_ms,
    )
    rec["ok"] = rec["ok"] and rec["gpu_used_growth_bytes"] <= 4 << 20
    return rec


def run(name, fn):
    t0 = time.perf_counter()
    try:
        rec = fn()
    except Exception as e:  # noqa: BLE001 - reported in the JSON
        rec = dict(
            case=name,
            ok=False,
            error=f"{type(e).__name__}: {e}"[:3000],
            trace=traceback.format_exc()[-3000:],
        )
    rec.setdefault("case", name)
    rec["mesh"] = rec.get("mesh", list(MESH.devices.shape))
    rec["wall_s"] = round(time.perf_counter() - t0, 3)
    RESULTS["records"].append(rec)
    log(
        f"[{'ok' if rec.get('ok') else 'FAIL'}] {rec['case']} mesh={rec['mesh']} "
        + ", ".join(
            f"{k}={rec[k]}"
            for k in ("residual", "logdet_err", "status", "seconds", "tflops", "error")
            if k in rec
        )
    )
    save()


def correctness(n=64):
    shard = n // max(MESH.devices.shape)
    for dtype_name in DTYPES:
        for tile in (8, 5, None):  # divides the shard, pads, default (= shard)
            run(f"{dtype_name}-T{tile}", lambda d=dtype_name, t=tile: case_basic(d, n, t, 3))
    run("vector-rhs", lambda: case_basic("float64", n, 8, 0))
    run("many-rhs", lambda: case_basic("complex128", n, 4, 10))
    run("tile-eq-shard-f32", lambda: case_basic("float32", n, shard, 1))


def main():
    global MESH
    jaxmg_info = None
    try:
        from jaxmg._core import native as _native

        lib = _native.engine("cuda")
        import ctypes

        buf = ctypes.create_string_buffer(4096)
        lib.jaxmg_cuda_versions(buf, len(buf))
        jaxmg_info = buf.value.decode()
    except Exception as e:  # noqa: BLE001
        jaxmg_info = f"error: {e}"
    RESULTS["versions"] = jaxmg_info
    RESULTS["jax"] = jax.__version__
    RESULTS["devices"] = [str(d) for d in jax.devices()]
    log("versions:", jaxmg_info)
    if mode == "multi":
        for shape in ((2, 1), (1, 2)):
            MESH = jax.make_mesh(shape, ("pr", "pc"))
            correctness()
            run("inside-jit", case_inside_jit)
        MESH = jax.make_mesh((2, 1), ("pr", "pc"))
        run("repeated", case_repeated)
        # Last: a failing factorization is the case most likely to hang an engine.
        for shape in ((2, 1), (1, 2)):
            MESH = jax.make_mesh(shape, ("pr", "pc"))
            run("not-positive-definite", case_not_positive_definite)
    else:
        MESH = jax.make_mesh((1, 1), ("pr", "pc"), devices=jax.local_devices()[:1])
        correctness(48)
        run("not-positive-definite", case_not_positive_definite)
    failed = [r["case"] for r in RESULTS["records"] if not r.get("ok")]
    RESULTS["failed"] = failed
    save()
    log(f"{mode}: {len(RESULTS['records'])} cases, {len(failed)} failed: {failed}")


main()
