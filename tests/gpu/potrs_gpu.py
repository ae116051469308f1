"""GPU tests of jaxmg.potrs on the cuSOLVERMp engine; run on the GPU machine, not by pytest.

Usage (see scripts/gpu_remote.sh):
  python -m jaxmg launch -n 2 tests/gpu/potrs_gpu.py multi OUT_DIR   # 2 processes, 1 GPU each
  python tests/gpu/potrs_gpu.py single OUT_DIR                        # 1 process, 1 GPU

multi: meshes 2x1 and 1x2, four dtypes, tiles dividing and not dividing the shard, vector and
many-column right-hand sides, inside jit, not positive definite (NaN + status on both ranks),
200 calls with flat GPU memory, and timings at N = 8192 and 32768.
single: a 1x1 mesh (four dtypes, padding) and the one-GPU baseline cho_factor + cho_solve.
Process 0 writes OUT_DIR/gpu_<mode>.json after every case (so a crash keeps what ran).
"""

import json
import os
import sys
import time
import traceback

import jax

mode, out_dir = sys.argv[1], sys.argv[2]
if mode == "multi":
    jax.distributed.initialize()
jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import jaxmg  # noqa: E402

A_SPEC, B_SPEC = P("pr", "pc"), P("pr", None)
# Timing sizes (JAXMG_GPU_BENCH_SIZES=256,512 checks the harness quickly, e.g. on CPUs).
SIZES = [int(v) for v in os.environ.get("JAXMG_GPU_BENCH_SIZES", "8192,32768").split(",")]
DTYPES = {
    "float32": np.float32,
    "float64": np.float64,
    "complex64": np.complex64,
    "complex128": np.complex128,
}
RESULTS = {"mode": mode, "processes": jax.process_count(), "records": []}
MESH = None


def save():
    if jax.process_index() == 0:
        with open(os.path.join(out_dir, f"gpu_{mode}.json"), "w") as f:
            json.dump(RESULTS, f, indent=1)


def log(*args):
    if jax.process_index() == 0:
        print(*args, flush=True)


# Small helpers, as in tests/mp/potrs_worker.py.
def spd(n, dtype, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, n))
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * rng.standard_normal((n, n))
    a = x @ x.conj().T / n + np.eye(n)
    return a.astype(dtype)


def rhs(n, k, dtype, seed):
    rng = np.random.default_rng(seed + 1)
    shape = (n,) if k == 0 else (n, k)
    b = rng.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        b = b + 1j * rng.standard_normal(shape)
    return b.astype(dtype)


def place(x, spec):
    return jax.make_array_from_callback(x.shape, NamedSharding(MESH, spec), lambda idx: x[idx])


def gather(x):
    return np.asarray(multihost_utils.process_allgather(x, tiled=True))


def local_scalars(*xs):
    mine = np.array([complex(np.asarray(x.addressable_data(0))) for x in xs])
    return multihost_utils.process_allgather(mine)


def measure(case, a, b, x, logdet=None, status=None):
    n = a.shape[0]
    eps = float(np.finfo(a.dtype).eps)
    xa = np.asarray(x, dtype=np.complex128)
    a64, b64 = a.astype(np.complex128), b.astype(np.complex128)
    resid = np.linalg.norm(a64 @ xa - b64) / (
        n * np.linalg.norm(a64, 2) * max(np.linalg.norm(xa), np.finfo(float).tiny)
    )
    rec = dict(case=case, n=n, eps=eps, residual=float(resid), residual_tol=10 * eps)
    rec["ok"] = bool(resid <= 10 * eps)
    if logdet is not None:
        ref = float(np.linalg.slogdet(a64)[1])
        err = abs(float(np.real(logdet)) - ref)
        tol = 20 * n * eps * max(1, abs(ref) / n)
        rec.update(logdet_err=err, logdet_tol=tol)
        rec["ok"] = rec["ok"] and bool(err <= tol)
    if status is not None:
        rec["status"] = int(np.real(status))
        rec["ok"] = rec["ok"] and rec["status"] == 0
    return rec


def case_basic(dtype_name, n, tile, k):
    dtype = DTYPES[dtype_name]
    a, b = spd(n, dtype, n), rhs(n, k, dtype, n)
    x, logdet, status = jaxmg.potrs(
        place(a, A_SPEC),
        place(b, B_SPEC if k else P("pr")),
        T_A=tile,
        return_logdet=True,
        return_status=True,
    )
    assert x.shape == b.shape and x.dtype == b.dtype, (x.shape, x.dtype)
    per_rank = local_scalars(logdet, status)
    agree = bool(np.all(per_rank == per_rank[0]))
    rec = measure(
        f"{dtype_name}-n{n}-T{tile}-k{k}", a, b, gather(x), per_rank[0][0], per_rank[0][1]
    )
    rec["ranks_agree"] = agree
    rec["ok"] = rec["ok"] and agree
    return rec


def case_inside_jit():
    n = 64
    a, b = spd(n, np.float64, 4), rhs(n, 3, np.float64, 4)

    @jax.jit
    def f(a, b):
        x, logdet = jaxmg.potrs(a, 2.0 * b, T_A=8, return_logdet=True)
        return x / 2.0, logdet + 0.0

    x, logdet = f(place(a, A_SPEC), place(b, B_SPEC))
    return measure("inside-jit", a, b, gather(x), local_scalars(logdet)[0][0])


def case_not_positive_definite():
    n = 64
    a = spd(n, np.float64, 6)
    a[n // 2, n // 2] = -10.0 * n
    b = rhs(n, 2, np.float64, 6)
    x, logdet, status = jaxmg.potrs(
        place(a, A_SPEC), place(b, B_SPEC), T_A=8, return_logdet=True, return_status=True
    )
    xs = gather(x)
    per_rank = local_scalars(logdet, status)
    rec = dict(
        case="not-positive-definite",
        x_all_nan=bool(np.all(np.isnan(xs))),
        logdet_nan_all_ranks=bool(np.all(np.isnan(np.real(per_rank[:, 0])))),
        status_all_ranks=[int(np.real(s)) for s in per_rank[:, 1]],
    )
    rec["ok"] = (
        rec["x_all_nan"]
        and rec["logdet_nan_all_ranks"]
        and all(s > 0 for s in rec["status_all_ranks"])
    )
    # The next call on the same context must work again.
    rec["recovers"] = case_basic("float64", n, 8, 2)["ok"]
    rec["ok"] = rec["ok"] and rec["recovers"]
    return rec


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


def make_spd_device(n, dtype, sharding, seed):
    """A well-conditioned SPD matrix generated on the GPUs: (U + U^T)/2 + n I."""

    def f():
        u = jax.random.uniform(jax.random.key(seed), (n, n), dtype=dtype)
        return (u + u.T) * 0.5 + n * jnp.eye(n, dtype=dtype)

    return jax.jit(f, out_shardings=sharding)()


def best_time(fn, *args, reps=3):
    out = fn(*args)
    jax.block_until_ready(out)
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn(*args)
        jax.block_until_ready(out)
        best = min(best, time.perf_counter() - t0)
    return best, out


def rel_residual(a, x, b):
    """||A x - b|| / (||A||_F ||x||), traced (the caller converts to float outside jit)."""
    r = jnp.linalg.norm((a @ x - b).astype(jnp.float64))
    return r / (jnp.linalg.norm(a.astype(jnp.float64)) * jnp.linalg.norm(x.astype(jnp.float64)))


def residual_or_error(a, x, b):
    try:
        return float(jax.jit(rel_residual)(a, x, b)), None
    except Exception as e:  # noqa: BLE001 - the timing is kept either way
        return None, f"{type(e).__name__}: {e}"[:500]


def auto_mesh(shape):
    """The test mesh with Auto axes, so that `a @ x` on sharded arrays needs no out_sharding."""
    from jax.sharding import AxisType

    devices = jax.local_devices()[:1] if shape == (1, 1) else None
    return jax.make_mesh(shape, ("pr", "pc"), axis_types=(AxisType.Auto,) * 2, devices=devices)


def case_timing_jaxmg(n, dtype_name, tile=None):
    dtype = DTYPES[dtype_name]
    mesh = auto_mesh(tuple(MESH.devices.shape))
    a = make_spd_device(n, dtype, NamedSharding(mesh, A_SPEC), 11)
    b = jax.jit(lambda: jnp.ones((n, 1), dtype), out_shardings=NamedSharding(mesh, B_SPEC))()
    secs, x = best_time(lambda a, b: jaxmg.potrs(a, b, T_A=tile), a, b)
    res, res_error = residual_or_error(a, x, b)
    del a
    return dict(
        residual_error=res_error,
        case=f"time-jaxmg-{dtype_name}-n{n}",
        n=n,
        dtype=dtype_name,
        gpus=jax.device_count(),
        mesh=list(MESH.devices.shape),
        tile=tile,
        seconds=secs,
        tflops=n**3 / 3 / secs / 1e12,
        residual=res,
        ok=bool(res is not None and res < 1e-4),
    )


def case_timing_baseline(n, dtype_name):
    from jax.scipy.linalg import cho_factor, cho_solve

    dtype = DTYPES[dtype_name]
    dev = jax.local_devices()[0]
    a = make_spd_device(n, dtype, jax.sharding.SingleDeviceSharding(dev), 11)
    b = jax.device_put(jnp.ones((n, 1), dtype), dev)
    solve = jax.jit(lambda a, b: cho_solve(cho_factor(a), b))
    secs, x = best_time(solve, a, b)
    res, res_error = residual_or_error(a, x, b)
    del a
    return dict(
        residual_error=res_error,
        case=f"time-cho_solve-1gpu-{dtype_name}-n{n}",
        n=n,
        dtype=dtype_name,
        gpus=1,
        seconds=secs,
        tflops=n**3 / 3 / secs / 1e12,
        residual=res,
        ok=bool(res is not None and res < 1e-4),
    )


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
        from jaxmg import _native

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
        if os.environ.get("JAXMG_GPU_BENCH", "1") == "1":
            for n in SIZES:
                for d in ("float64", "float32"):
                    run(f"time-{d}-{n}", lambda n=n, d=d: case_timing_jaxmg(n, d))
        # Last: a failing factorization is the case most likely to hang an engine.
        for shape in ((2, 1), (1, 2)):
            MESH = jax.make_mesh(shape, ("pr", "pc"))
            run("not-positive-definite", case_not_positive_definite)
    else:
        MESH = jax.make_mesh((1, 1), ("pr", "pc"), devices=jax.local_devices()[:1])
        correctness(48)
        if os.environ.get("JAXMG_GPU_BENCH", "1") == "1":
            for n in SIZES:
                for d in ("float64", "float32"):
                    run(f"base-{d}-{n}", lambda n=n, d=d: case_timing_baseline(n, d))
                    run(f"time-1gpu-{d}-{n}", lambda n=n, d=d: case_timing_jaxmg(n, d))
        run("not-positive-definite", case_not_positive_definite)
    failed = [r["case"] for r in RESULTS["records"] if not r.get("ok")]
    RESULTS["failed"] = failed
    save()
    log(f"{mode}: {len(RESULTS['records'])} cases, {len(failed)} failed: {failed}")


main()
