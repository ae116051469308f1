"""`python -m jaxmg bench`: time a jaxmg solve on the devices present against JAX on one device.

`--routine potrs` (Cholesky), `lu_solve` (pivoted LU), `potri` (the inverse, against JAX's
`cho_factor` + `cho_solve` with the identity), `inv` (against `jnp.linalg.inv`), `slogdet`
(against `jnp.linalg.slogdet`), `cho_solve` (the solve with a kept factor and `--nrhs`
right-hand sides, against JAX's `cho_solve` with its kept factor; the factorization's time is
recorded beside it), `syevd` / `eigvalsh` (against `jnp.linalg.eigh` / `eigvalsh`; checked by
Σ w = tr A = N), `gesvd` / `gesvd_values` (against `jnp.linalg.svd` with and without vectors;
Σ s = tr A = N for this symmetric positive definite A), `polar` (against
`jax.scipy.linalg.polar`, QDWH; tr H = tr A = N), `qr` (against `jnp.linalg.qr`) or
`least_squares` (against JAX's QR, Qᴴb and the triangular solve), on N x `--cols` matrices
(default square). `--peer` also times JAXMg 1.x, from the folder JAXMG_PEER_PATH, on the same
devices (bench/peer_jaxmg1.py).
`cli()` runs the jaxmg timings in P processes (one per device, under `jaxmg launch`), then
JAX's own routine (`cho_factor` + `cho_solve`, `lu_factor` + `lu_solve`, ...) on one device in
one process, merges them into one JSON file, prints a table and (with matplotlib) draws a plot
next to the JSON.

Matrix: A[i, j] = r**|i - j| with r = 0.5 (Kac-Murdock-Szego: SPD, cond(A) <= 9, exact
log det A = (N - 1) log(1 - r**2)), generated on the devices, each device its own shard; its
first N x cols columns for qr and least_squares (whose checks are |R[0, 0]| = ‖A[:, 0]‖ and,
for b = A[:, 0], x = e₀).
Time: best of `--repeats` warm calls, each on a freshly generated matrix (potrs may overwrite it
with --donate). Peak memory: XLA's allocator peak on device 0 of each process (cumulative over the
run, cases run in increasing size), next to the shard size; cuSOLVERMp's and NCCL's own buffers
are not in XLA's count.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

R = 0.5
# Flop counts of the factorizations (the solves are lower order).
# potri: the factorization and the solve with n right-hand sides (what both sides compute).
FLOPS = {
    "potrs": lambda n: n**3 / 3,
    "lu_solve": lambda n: 2 * n**3 / 3,
    "potri": lambda n: n**3 / 3 + 2 * n**3,
    "inv": lambda n: 2 * n**3 / 3 + 2 * n**3,
    "slogdet": lambda n: 2 * n**3 / 3,
    "cho_solve": lambda n: 0.0,  # the solve's flops (2 n^2 nrhs) are set per record
    # tridiagonal reduction (4/3 n^3) and, with vectors, its back transformation (2 n^3)
    "syevd": lambda n: 10 * n**3 / 3,
    "eigvalsh": lambda n: 4 * n**3 / 3,
    # bidiagonalization (8/3 n^3) and, with U and V, their formation and update (~ 21 n^3 in all,
    # Golub-Van Loan); polar counted as one SVD with vectors (its TF/s are SVD-equivalent)
    "gesvd": lambda n: 21 * n**3,
    "gesvd_values": lambda n: 8 * n**3 / 3,
    "polar": lambda n: 21 * n**3,
}
# Routines whose check is a trace: Σ w = tr A = N for the matrix's eigenvalues w (its singular
# values: A is symmetric positive definite; tr H = tr A for its polar factor H = A).
EIGEN = ("syevd", "eigvalsh", "gesvd", "gesvd_values", "polar")
# M x N routines: Householder QR and Q (geqrf + orgqr), QR and the solve (geqrf, ormqr, trsm).
RECT_FLOPS = {
    "qr": lambda m, n: 4 * m * n * n - 4 * n**3 / 3,
    "least_squares": lambda m, n: 2 * m * n * n - 2 * n**3 / 3,
}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m jaxmg bench", description=__doc__.split("\n")[0])
    p.add_argument("--routine", choices=sorted(FLOPS | RECT_FLOPS), default="potrs")
    p.add_argument("--cols", type=int, default=None, help="qr, least_squares: N (default: M)")
    p.add_argument("--peer", action="store_true", help="also time JAXMg 1.x (JAXMG_PEER_PATH)")
    p.add_argument("-n", "--processes", type=int, default=None, help="default: GPUs, else 2")
    p.add_argument(
        "--single-process",
        action="store_true",
        help="jaxmg in one process driving every local GPU (no launcher)",
    )
    p.add_argument("--sizes", default="2048,4096", help="comma-separated N (default 2048,4096)")
    p.add_argument("--dtypes", default="float64,float32")
    p.add_argument("--tile", default=None, help="T_A, or a comma-separated list to sweep")
    p.add_argument("--mesh", default=None, help="RxC process mesh (default: Px1)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--nrhs", type=int, default=None, help="right-hand sides (cho_solve: 16)")
    p.add_argument("--no-donate", dest="donate", action="store_false")
    p.add_argument(
        "--no-symmetry-check", dest="check_symmetry", action="store_false", help="potrs only"
    )
    p.add_argument("--no-baseline", dest="baseline", action="store_false")
    p.add_argument("--baseline-max", type=int, default=None, help="largest N for the baseline")
    p.add_argument("--out", default="bench/results/potrs.json")
    p.add_argument("--timeout", type=float, default=1800)
    p.add_argument(
        "--role", choices=["jaxmg", "baseline", "peer"], default=None, help=argparse.SUPPRESS
    )
    return p


def _kms(n, dtype, sharding, cols=None):
    import jax
    import jax.numpy as jnp

    def gen():
        i = jax.lax.broadcasted_iota(jnp.int32, (n, cols or n), 0)
        j = jax.lax.broadcasted_iota(jnp.int32, (n, cols or n), 1)
        return jnp.exp(jnp.abs(i - j).astype(jnp.float32) * math.log(R)).astype(dtype)

    return jax.jit(gen, out_shardings=sharding)


def _enable_x64(args):
    """The benchmark (an application, not the library) turns on 64-bit types when asked for."""
    import jax

    if any(d in ("float64", "complex128") for d in args.dtypes):
        jax.config.update("jax_enable_x64", True)


def _peak_bytes():
    import jax

    stats = jax.local_devices()[0].memory_stats() or {}
    return int(stats.get("peak_bytes_in_use", 0))


def _sync(name):
    import jax
    from jax.experimental import multihost_utils

    if jax.process_count() > 1:
        multihost_utils.sync_global_devices(name)


def _time_calls(gen, solve, b, repeats, name):
    """Seconds of 1 + repeats calls (the first compiles), each on a freshly generated matrix."""
    import jax

    times = []
    for rep in range(repeats + 1):
        a = gen()
        jax.block_until_ready(a)
        _sync(f"bench-{name}-{rep}")
        t0 = time.perf_counter()
        x, logdet = solve(a, b)
        x.block_until_ready()
        times.append(time.perf_counter() - t0)
        del a, x  # the next matrix may reuse this one's memory
    return times, logdet


def _exact_logdet(n):
    return (n - 1) * math.log(1 - R * R)


def _rectangular(args, n):
    """(M, N) of a qr / least_squares case of size n, or None for the square routines."""
    if args.routine not in RECT_FLOPS:
        return None
    return n, args.cols or n


def _first_column(m, dtype, nrhs, sharding):
    """b = A[:, 0] (r**i) in every column: the least-squares solution is e₀. Made on the host
    (small; a generator of it compiles to a replicated constant)."""
    import jax
    import numpy as np

    host = np.repeat((R ** np.arange(m)).astype(dtype)[:, None], nrhs, axis=1)
    return jax.make_array_from_callback((m, nrhs), sharding, lambda idx: host[idx])


def _check_value(args, gen):
    """The value of the scalar a qr / least_squares case returns: ‖A[:, 0]‖ of the generated
    matrix (made in float32 precision), or 1."""
    if args.routine != "qr":
        return 1.0
    import jax.numpy as jnp

    a = gen()
    ref = float(jnp.linalg.norm(a[:, 0]))
    del a
    return ref


def _rect_record(args, rec, m, n, check, exact, times, dtype, procs):
    import numpy as np

    eps = float(np.finfo(dtype).eps)
    rec.update(
        cols=n,
        seconds=min(times[1:]),
        compile_and_first_s=times[0],
        all_s=times,
        tflops=RECT_FLOPS[args.routine](m, n) / min(times[1:]) / 1e12,
        check_rel_err=abs(abs(check) - exact) / exact,
        check_ok=abs(abs(check) - exact) <= 100 * m * eps * exact,
        shard_bytes=m * n * dtype.itemsize // procs,
        peak_bytes=_peak_bytes(),
    )


def _run_jaxmg(args) -> list[dict]:
    import jax

    if not args.single_process:
        jax.distributed.initialize()
    _enable_x64(args)
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import jaxmg

    procs = jax.device_count()  # one device per process under the launcher
    shape = tuple(int(x) for x in args.mesh.split("x")) if args.mesh else (procs, 1)
    mesh = jax.make_mesh(shape, ("pr", "pc"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
    a_sh, b_sh = NamedSharding(mesh, P("pr", "pc")), NamedSharding(mesh, P("pr", None))
    records = []
    # Smallest matrices first: XLA's peak-memory count is cumulative, so each case's peak is
    # then its own.
    cases = sorted(
        ((n, d, t) for n in args.sizes for d in args.dtypes for t in args.tiles),
        key=lambda c: (c[0] * c[0] * np.dtype(c[1]).itemsize, c[0]),
    )
    for n, dtype_name, tile in cases:
        dtype = np.dtype(dtype_name)
        rec = dict(
            engine="jaxmg",
            devices=procs,
            processes=jax.process_count(),
            mesh=list(shape),
            n=n,
            dtype=dtype_name,
            tile=tile,
            symmetry_check=args.check_symmetry and args.routine in ("potrs", "potri"),
        )
        try:
            if rect := _rectangular(args, n):
                m, cols = rect
                gen = _kms(m, dtype, a_sh, cols)
                b = _first_column(m, dtype, args.nrhs, b_sh)

                def run(a, b, tile=tile):
                    kw = dict(T_A=tile, mesh=mesh, donate=args.donate)
                    if args.routine == "qr":
                        q, r = jaxmg.qr(a, **kw)
                        return q, r[0, 0]
                    x = jaxmg.least_squares(a, b, **kw)
                    return x, x[0, 0]

                times, check = _time_calls(gen, run, b, args.repeats, f"{n}-{dtype_name}-{tile}")
                rec["donate"] = args.donate
                exact = _check_value(args, gen)
                _rect_record(args, rec, m, cols, complex(check), exact, times, dtype, procs)
                if jax.process_index() == 0:
                    _print_record(rec)
                records.append(rec)
                _sync(f"bench-done-{n}-{dtype_name}-{tile}")
                continue
            gen = _kms(n, dtype, a_sh)
            b = jax.device_put(jnp.ones((n, args.nrhs), dtype), b_sh)

            def solve(a, b, tile=tile):
                # Called directly (not under an outer jit) so that donate=True lets the
                # factorization overwrite a's buffer.
                kw = dict(T_A=tile, mesh=mesh, return_logdet=True, donate=args.donate)
                if args.routine == "potri":
                    return jaxmg.potri(a, check_symmetry=args.check_symmetry, **kw)
                if args.routine == "inv":
                    return jaxmg.inv(a, **kw)
                if args.routine in ("gesvd", "gesvd_values"):
                    kw.pop("return_logdet")
                    vectors = args.routine == "gesvd"
                    out = jaxmg.gesvd(a, compute_u=vectors, compute_vh=vectors, **kw)
                    return (out[2] if vectors else out), jax.numpy.sum(out[1] if vectors else out)
                if args.routine == "polar":
                    kw.pop("return_logdet")
                    up, h = jaxmg.polar(a, **kw)
                    return up, jax.numpy.trace(h)
                if args.routine in EIGEN:
                    kw.pop("return_logdet")
                    vectors = args.routine == "syevd"
                    out = jaxmg.syevd(a, return_eigenvectors=vectors, **kw)
                    w = out[0] if vectors else out
                    return (out[1] if vectors else w), jax.numpy.sum(w)
                if args.routine == "slogdet":
                    kw.pop("return_logdet")
                    sign, logdet = jaxmg.slogdet(a, **kw)
                    return sign, logdet
                if args.routine == "potrs":
                    kw["check_symmetry"] = args.check_symmetry
                return getattr(jaxmg, args.routine)(a, b, **kw)

            name = f"{n}-{dtype_name}-{tile}"
            if args.routine == "cho_solve":
                # The factorization, timed as potrs times its calls; then the solves with it.
                def factor(a, b, tile=tile):
                    f = jaxmg.cho_factor(a, T_A=tile, mesh=mesh, donate=args.donate)
                    return f.matrix, f

                ftimes, kept = _time_calls(gen, factor, b, args.repeats, name + "-factor")
                rec["factor_seconds"] = min(ftimes[1:])
                times, _ = _time_calls(
                    lambda kept=kept: kept,
                    lambda f, b: (jaxmg.cho_solve(f, b), f),
                    b,
                    args.repeats,
                    name,
                )
                logdet = kept.logdet
                rec["nrhs"] = args.nrhs
                rec["solve_over_factor"] = min(times[1:]) / rec["factor_seconds"]
            else:
                times, logdet = _time_calls(gen, solve, b, args.repeats, name)
            ld = float(np.asarray(logdet.addressable_data(0)))
            eps = float(np.finfo(dtype).eps)
            if args.routine in EIGEN:  # (the trace of the eigenvalues, not a log-determinant)
                rec["check_rel_err"] = abs(ld - n) / n
                rec["check_ok"] = abs(ld - n) <= 100 * n * eps * n
                ld = _exact_logdet(n)
            rec.update(
                seconds=min(times[1:]),
                compile_and_first_s=times[0],
                all_s=times,
                tflops=_flops(args, n) / min(times[1:]) / 1e12,
                logdet_rel_err=abs(ld - _exact_logdet(n)) / abs(_exact_logdet(n)),
                logdet_ok=abs(ld - _exact_logdet(n)) <= 100 * n * eps * abs(_exact_logdet(n)),
                tile=tile,
                donate=args.donate,
                shard_bytes=n * n * dtype.itemsize // procs,
                peak_bytes=_peak_bytes(),
            )
        except Exception as e:  # noqa: BLE001 - an OOM at the largest N is a result too
            rec["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        if jax.process_index() == 0:
            _print_record(rec)
        records.append(rec)
        _sync(f"bench-done-{n}-{dtype_name}-{tile}")
    return records if jax.process_index() == 0 else []


def _run_baseline(args) -> list[dict]:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.scipy.linalg import cho_factor, cho_solve, lu_factor, lu_solve

    _enable_x64(args)
    device = jax.devices()[0]
    sharding = jax.sharding.SingleDeviceSharding(device)
    records = []
    for n in sorted(set(args.sizes)):
        if args.baseline_max and n > args.baseline_max:
            continue
        for dtype_name in args.dtypes:
            dtype = np.dtype(dtype_name)
            rec = dict(engine="jax", devices=1, n=n, dtype=dtype_name)
            try:
                if rect := _rectangular(args, n):
                    m, cols = rect
                    gen = _kms(m, dtype, sharding, cols)
                    b = _first_column(m, dtype, args.nrhs, sharding)

                    @jax.jit
                    def run(a, b):
                        q, r = jnp.linalg.qr(a)
                        if args.routine == "qr":
                            return q, r[0, 0]
                        x = jax.scipy.linalg.solve_triangular(r, q.conj().T @ b)
                        return x, x[0, 0]

                    times, check = _time_calls(gen, run, b, args.repeats, f"{n}-{dtype_name}")
                    exact = _check_value(args, gen)
                    _rect_record(args, rec, m, cols, complex(check), exact, times, dtype, 1)
                    _print_record(rec)
                    records.append(rec)
                    continue
                gen = _kms(n, dtype, sharding)
                b = jax.device_put(jnp.ones((n, args.nrhs), dtype), device)

                @jax.jit
                def solve(a, b):
                    if args.routine == "inv":
                        x = jnp.linalg.inv(a)
                        return x, jnp.zeros((), x.real.dtype)
                    if args.routine == "syevd":
                        w, v = jnp.linalg.eigh(a)
                        return v, jnp.sum(w)
                    if args.routine == "eigvalsh":
                        w = jnp.linalg.eigvalsh(a)
                        return w, jnp.sum(w)
                    if args.routine == "gesvd":
                        u, sv, vh = jnp.linalg.svd(a, full_matrices=False)
                        return vh, jnp.sum(sv)
                    if args.routine == "gesvd_values":
                        sv = jnp.linalg.svd(a, compute_uv=False)
                        return sv, jnp.sum(sv)
                    if args.routine == "polar":
                        up, h = jax.scipy.linalg.polar(a)
                        return up, jnp.trace(h)
                    if args.routine == "slogdet":
                        sign, logdet = jnp.linalg.slogdet(a)
                        return sign, logdet
                    if args.routine == "lu_solve":
                        f = lu_factor(a)
                        return lu_solve(f, b), jnp.sum(jnp.log(jnp.abs(jnp.diagonal(f[0]))))
                    c = cho_factor(a, lower=True)
                    if args.routine == "potri":  # the inverse: the solve with the identity
                        b = jnp.eye(a.shape[0], dtype=a.dtype)
                    return cho_solve(c, b), 2 * jnp.sum(jnp.log(jnp.diagonal(c[0])))

                name = f"{n}-{dtype_name}"
                if args.routine == "cho_solve":
                    factor = jax.jit(lambda a: cho_factor(a, lower=True)[0])
                    ftimes, kept = _time_calls(
                        gen, lambda a, b, f=factor: (f(a),) * 2, b, args.repeats, name + "-f"
                    )
                    rec["factor_seconds"] = min(ftimes[1:])
                    kept_solve = jax.jit(lambda c, b: cho_solve((c, True), b))
                    times, _ = _time_calls(
                        lambda kept=kept: kept,
                        lambda c, b, s=kept_solve: (s(c, b), c),
                        b,
                        args.repeats,
                        name,
                    )
                    logdet = 2 * jnp.sum(jnp.log(jnp.diagonal(kept)))
                    rec["nrhs"] = args.nrhs
                else:
                    times, logdet = _time_calls(gen, solve, b, args.repeats, name)
                if args.routine in EIGEN:  # the trace of the eigenvalues
                    rec["check_rel_err"] = abs(float(logdet) - n) / n
                    logdet = _exact_logdet(n)
                rec.update(
                    seconds=min(times[1:]),
                    all_s=times,
                    tflops=_flops(args, n) / min(times[1:]) / 1e12,
                    logdet_rel_err=abs(float(logdet) - _exact_logdet(n)) / abs(_exact_logdet(n)),
                    peak_bytes=_peak_bytes(),
                )
            except Exception as e:  # noqa: BLE001
                rec["error"] = f"{type(e).__name__}: {str(e)[:300]}"
            _print_record(rec)
            records.append(rec)
    return records


def _flops(args, n):
    if args.routine == "cho_solve":
        return 2.0 * n * n * args.nrhs
    return FLOPS[args.routine](n)


def _print_record(r):
    if "error" in r:
        print(f"{r['engine']:6s} {r['devices']}dev {r['dtype']:8s} N={r['n']:7d}  {r['error']}")
    else:
        print(
            f"{r['engine']:6s} {r['devices']}dev {r['dtype']:8s} N={r['n']:7d} "
            f"{r['seconds'] * 1e3:10.1f} ms {r['tflops']:7.2f} TF/s",
            flush=True,
        )


def table(records: list[dict]) -> str:
    """One row per jaxmg case, next to JAX on one device for the same (dtype, N)."""
    rows = [
        "| dtype | N | mesh | tile | jaxmg time (s) | TF/s | JAX 1 device (s) | ratio | "
        "peak GiB/dev | shard GiB |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    base = {(r["dtype"], r["n"]): r for r in records if r["engine"] == "jax"}
    peer = {(r["dtype"], r["n"]): r for r in records if r["engine"] == "jaxmg-1.x"}
    if peer:
        rows[0] += " JAXMg 1.x (s) |"
        rows[1] += "---|"
    jaxmg = [r for r in records if r["engine"] == "jaxmg"]
    for r in sorted(jaxmg, key=lambda r: (r["dtype"], r["n"], str(r["mesh"]), r["tile"] or 0)):
        mesh = "x".join(map(str, r["mesh"]))
        size = f"{r['n']} x {r['cols']}" if r.get("cols") else r["n"]
        head = f"| {r['dtype']} | {size} | {mesh} | {r.get('tile') or 'auto'} |"
        if "error" in r:
            rows.append(f"{head} {r['error'][:60]} | | | | | |")
            continue
        b = base.get((r["dtype"], r["n"]), {})
        bt = b.get("seconds")
        bs = f"{bt:.4f}" if bt else (b.get("error", "—")[:40] if b else "—")
        ratio = f"{r['seconds'] / bt:.2f}" if bt else "—"
        rows.append(
            f"{head} {r['seconds']:.4f} | {r['tflops']:.2f} | {bs} | {ratio} | "
            f"{r['peak_bytes'] / 2**30:.2f} | {r['shard_bytes'] / 2**30:.2f} |"
        )
        if peer:
            p = peer.get((r["dtype"], r["n"]), {})
            seconds = f"{p['seconds']:.4f}" if "seconds" in p else p.get("error", "—")[:40]
            rows[-1] += f" {seconds} |"
    return "\n".join(rows)


def _plot(records, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    for engine in ("jaxmg", "jax"):
        for dtype in sorted({r["dtype"] for r in records}):
            pts = sorted(
                (r["n"], r["seconds"])
                for r in records
                if r["engine"] == engine and r["dtype"] == dtype and "seconds" in r
            )
            if pts:
                devices = max(r["devices"] for r in records if r["engine"] == engine)
                label = f"{engine}, {devices} device{'s' if devices > 1 else ''}, {dtype}"
                ax.plot(*zip(*pts, strict=True), marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("N")
    ax.set_ylabel("seconds (factorization + solve)")
    ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return path


def _gpu_count() -> int:
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
        return sum(1 for line in out.stdout.splitlines() if line.startswith("GPU "))
    except (OSError, subprocess.SubprocessError):
        return 0


def cli(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    args.sizes = [int(s) for s in str(args.sizes).split(",") if s]
    args.dtypes = [d for d in str(args.dtypes).split(",") if d]
    args.tiles = [int(t) for t in str(args.tile).split(",")] if args.tile else [None]
    if args.nrhs is None:
        args.nrhs = 16 if args.routine == "cho_solve" else 1
    if args.role == "peer":
        return 0  # (bench/peer_jaxmg1.py runs JAXMg 1.x: it cannot share this package's name)
    if args.role:
        records = _run_jaxmg(args) if args.role == "jaxmg" else _run_baseline(args)
        part = os.environ.get("JAXMG_BENCH_PART")
        if part and records:
            Path(part).write_text(json.dumps(records))
        return 0

    out = Path(args.out).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    procs = args.processes or _gpu_count() or 2
    passthrough = [
        "--routine",
        args.routine,
        "--sizes",
        ",".join(map(str, args.sizes)),
        "--dtypes",
        ",".join(args.dtypes),
        "--repeats",
        str(args.repeats),
        "--nrhs",
        str(args.nrhs),
    ]
    if args.tile:
        passthrough += ["--tile", str(args.tile)]
    if args.mesh:
        passthrough += ["--mesh", args.mesh]
    if not args.donate:
        passthrough.append("--no-donate")
    if not args.check_symmetry:
        passthrough.append("--no-symmetry-check")
    if args.baseline_max:
        passthrough += ["--baseline-max", str(args.baseline_max)]
    if args.cols:
        passthrough += ["--cols", str(args.cols)]
    records = []
    parts = [("jaxmg", out.with_suffix(".jaxmg.part"))]
    if args.peer:
        parts.append(("peer", out.with_suffix(".peer.part")))
    if args.baseline:
        parts.append(("baseline", out.with_suffix(".baseline.part")))
    for role, part in parts:
        part.unlink(missing_ok=True)
        env = dict(os.environ, JAXMG_BENCH_PART=str(part))
        inner = [sys.executable, "-m", "jaxmg", "bench", *passthrough, "--role", role]
        if role == "peer":
            script = Path(__file__).resolve().parents[2] / "bench" / "peer_jaxmg1.py"
            inner = [sys.executable, str(script), *passthrough]
        if role == "jaxmg" and args.single_process:
            cmd = [*inner, "--single-process"]  # one process, every local device
        elif role in ("jaxmg", "peer"):
            launch = [
                "-m",
                "jaxmg",
                "launch",
                "-n",
                str(procs),
                "--timeout",
                str(int(args.timeout)),
            ]
            cmd = [sys.executable, *launch, *inner[1:]]
        else:
            cmd = inner
            if _gpu_count():
                env["CUDA_VISIBLE_DEVICES"] = env.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]
        print(f"[bench] {role}: {' '.join(cmd[1:])}", flush=True)
        rc = subprocess.run(cmd, env=env, timeout=args.timeout + 60).returncode
        if part.exists():
            records += json.loads(part.read_text())
            part.unlink()
        if rc != 0:
            print(f"[bench] {role} exited with {rc}", flush=True)
    result = dict(
        routine=args.routine,
        matrix=f"Kac-Murdock-Szego r={R}",
        commit=_git_commit(),
        host=os.uname().nodename,
        records=records,
    )
    out.write_text(json.dumps(result, indent=1))
    print(table(records))
    plot = _plot(records, out.with_suffix(".png"))
    print(f"[bench] wrote {out}" + (f" and {plot}" if plot else ""))
    return 0


def _git_commit():
    if commit := os.environ.get("JAXMG_COMMIT"):
        return commit
    try:
        root = Path(__file__).resolve().parents[1]
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True
        )
        return out.stdout.strip() or None
    except OSError:
        return None
