"""`python -m jaxmg demo`: solve a distributed SPD system with jaxmg.potrs, check it and time it.

`cli()` (what `python -m jaxmg demo` runs) re-launches this module under `jaxmg launch` with N
processes; `main()` is what each of those processes runs:

  * jax.distributed.initialize(), a (P, 1) mesh ("pr", "pc") with one device per process;
  * the Kac-Murdock-Szego matrix A[i, j] = r**|i - j|, r = exp(-8 / N), built distributed
    (each process computes only its own block); it is SPD with
    log det A = (N - 1) log(1 - r**2) and cond(A) <= ((1 + r) / (1 - r))**2;
  * b = A @ x_true for a fixed x_true (a distributed matvec);
  * potrs once to compile, then a timed call;
  * checks of x against x_true, log det A against the exact value and the scaled residual
    |A x - b|_inf / (|A|_inf |x|_inf N eps) (as HPL does); process 0 prints the report.
"""

from __future__ import annotations

import argparse
import math
import sys
import time

DEFAULT_SIZE = 2048
DEFAULT_PROCS_CPU = 2
DEFAULT_TIMEOUT_S = 900.0

# Tolerances, in units of eps (see _tolerances).
X_FACTOR = 10.0  # |x - x_true|_inf <= X_FACTOR * cond_bound * eps * |x_true|_inf
LOGDET_FACTOR = 1.0  # |logdet - exact| <= LOGDET_FACTOR * N * eps * max(1, |exact|)
RESIDUAL_LIMIT = 16.0  # HPL's threshold on the scaled residual


def _parser(prog: str) -> argparse.ArgumentParser:
    return configure(argparse.ArgumentParser(prog=prog))


def configure(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Adds the demo's options to `p` (the `python -m jaxmg demo` subcommand).

    Args:
        p: The parser.

    Returns:
        ``p``, with the options added.
    """
    p.description = (
        "Solve A x = b for a distributed SPD matrix (Kac-Murdock-Szego, built where it lies) "
        "with jaxmg.potrs in N processes under `python -m jaxmg launch`, one device each; check "
        "x, log det A and the scaled residual, and report the time. Exit status 0 when every "
        "check passes."
    )
    p.epilog = "example: python -m jaxmg demo -n 4 --size 4096 --dtype float32"
    p.add_argument(
        "-n",
        "--np",
        dest="nprocs",
        type=int,
        default=None,
        help="processes (default: number of GPUs on a GPU machine, else 2)",
    )
    p.add_argument(
        "--size", type=int, default=DEFAULT_SIZE, help=f"matrix order N (default {DEFAULT_SIZE})"
    )
    p.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    p.add_argument("--tile", type=int, default=None, help="T_A tile (default: jaxmg's choice)")
    p.add_argument(
        "--repeats", type=int, default=1, help="timed calls after the warm-up; best is reported"
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        help=f"kill the job after this many seconds, exit 124 (default {DEFAULT_TIMEOUT_S:g}; "
        "0: no limit)",
    )
    return p


def _forwarded(args: argparse.Namespace) -> list[str]:
    out = ["--size", str(args.size), "--dtype", args.dtype, "--repeats", str(args.repeats)]
    if args.tile is not None:
        out += ["--tile", str(args.tile)]
    return out


def _validate(p: argparse.ArgumentParser, args: argparse.Namespace, nprocs: int) -> None:
    if nprocs < 1:
        p.error(f"-n must be positive, got {nprocs}")
    if args.size < 1:
        p.error(f"--size must be positive, got {args.size}")
    if args.size % nprocs:
        p.error(
            f"--size {args.size} must be a multiple of the {nprocs} processes (the rows are "
            f"split evenly), e.g. {math.ceil(args.size / nprocs) * nprocs}"
        )
    if args.tile is not None and args.tile < 1:
        p.error(f"--tile must be positive, got {args.tile}")
    if args.repeats < 1:
        p.error(f"--repeats must be positive, got {args.repeats}")
    if args.timeout < 0:
        p.error(f"--timeout must be non-negative, got {args.timeout}")


def cli(argv: list[str] | None = None) -> int:
    """`python -m jaxmg demo ARGS`: launches main() in N processes.

    Args:
        argv: What follows ``python -m jaxmg demo``.

    Returns:
        The job's exit status.
    """
    p = _parser("python -m jaxmg demo")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    args.parser = p
    return run_namespace(args)


def run_namespace(args: argparse.Namespace) -> int:
    """Runs a parsed `python -m jaxmg demo` command line.

    Args:
        args: The subcommand's namespace (with ``parser``, for usage errors).

    Returns:
        The job's exit status.
    """
    from jaxmg.cli import launch as _launch

    p = args.parser
    gpus = _launch.gpu_count()
    nprocs = args.nprocs if args.nprocs is not None else (gpus or DEFAULT_PROCS_CPU)
    _validate(p, args, nprocs)
    launch = _launch.LaunchArgs(
        nprocs=nprocs,
        target=["-m", "jaxmg.cli.demo", *_forwarded(args)],
        timeout=args.timeout or None,
    )
    return _launch.run(launch)


# --------------------------------------------------------------------------- per process


def kms_ratio(n: int) -> float:
    return math.exp(-8.0 / n)


def kms_logdet(n: int) -> float:
    r = kms_ratio(n)
    return (n - 1) * math.log1p(-r * r)


def kms_cond_bound(n: int) -> float:
    r = kms_ratio(n)
    return ((1 + r) / (1 - r)) ** 2


def kms_block(n: int, rows: slice, cols: slice, dtype):
    """The block A[rows, cols] of the order-n KMS matrix, computed in float64."""
    import numpy as np

    i = np.arange(n, dtype=np.float64)[rows]
    j = np.arange(n, dtype=np.float64)[cols]
    return np.exp(-np.abs(i[:, None] - j[None, :]) * (8.0 / n)).astype(dtype)


def x_true_vector(n: int, dtype):
    """The known solution: deterministic, the same on every process, entries in [-1, 1]."""
    import numpy as np

    return np.random.default_rng(20240607).uniform(-1.0, 1.0, n).astype(dtype)


def _tolerances(n: int, eps: float, x_norm: float, exact: float) -> tuple[float, float]:
    tol_x = X_FACTOR * kms_cond_bound(n) * eps * max(x_norm, 1e-30)
    tol_logdet = LOGDET_FACTOR * n * eps * max(1.0, abs(exact))
    return tol_x, tol_logdet


def _fail(msg: str) -> int:
    print(f"jaxmg demo: {msg}", file=sys.stderr, flush=True)
    return 1


def main(argv: list[str] | None = None) -> int:
    """One process of the demo (run under `jaxmg launch`)."""
    args = _parser("python -m jaxmg.cli.demo").parse_args(sys.argv[1:] if argv is None else argv)

    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import numpy as np
    from jax.experimental import multihost_utils
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import jaxmg
    from jaxmg._core import native as _native
    from jaxmg._core import placement as _placement

    jax.distributed.initialize()
    nproc, rank = jax.process_count(), jax.process_index()
    n, dtype = args.size, np.dtype(args.dtype)
    devices = jax.devices()
    if len(devices) != nproc:
        return _fail(
            f"expected one device per process, found {len(devices)} devices in {nproc} "
            "processes (unset XLA_FLAGS=--xla_force_host_platform_device_count, or launch one "
            "process per GPU)"
        )
    if n % nproc:
        return _fail(f"--size {n} is not a multiple of the {nproc} processes")

    mesh = jax.make_mesh((nproc, 1), ("pr", "pc"))
    jax.set_mesh(mesh)
    a_sharding = NamedSharding(mesh, P("pr", "pc"))
    a = jax.make_array_from_callback(
        (n, n), a_sharding, lambda idx: kms_block(n, idx[0], idx[1], dtype)
    )
    x_np = x_true_vector(n, dtype)
    x_true = jax.make_array_from_callback((n,), NamedSharding(mesh, P()), lambda idx: x_np[idx])

    def local_matvec(a_blk, v_blk):
        y = jnp.matmul(a_blk, v_blk, precision=jax.lax.Precision.HIGHEST)
        return jax.lax.psum(y, "pc")

    matvec = jax.shard_map(
        local_matvec, mesh=mesh, in_specs=(P("pr", "pc"), P("pc")), out_specs=P("pr")
    )

    def local_row_sums(a_blk):
        return jax.lax.psum(jnp.sum(jnp.abs(a_blk), axis=1), "pc")

    row_sums = jax.shard_map(local_row_sums, mesh=mesh, in_specs=P("pr", "pc"), out_specs=P("pr"))

    @jax.jit
    def rhs(a, v):
        return matvec(a, jax.sharding.reshard(v, P("pc")))

    @jax.jit
    def errors(a, x, x_true, b):
        x_rows = jax.sharding.reshard(x, P("pr"))
        residual = matvec(a, jax.sharding.reshard(x, P("pc"))) - b
        return (
            jnp.max(jnp.abs(x_rows - jax.sharding.reshard(x_true, P("pr")))),
            jnp.max(jnp.abs(residual)),
            jnp.max(row_sums(a)),
            jnp.max(jnp.abs(x_rows)),
        )

    b = rhs(a, x_true)
    b.block_until_ready()
    placement = _placement.resolve_placement(a)
    tile = _placement.choose_tile(n, placement, args.tile, True)
    if _native.find_library(placement.platform) is None:
        lib = _native._LIBRARIES[placement.platform]
        return _fail(
            f"the {placement.platform} engine ({lib}) is not built, so potrs cannot run on "
            f"{placement.platform} devices; `python -m jaxmg info` shows where jaxmg looked"
        )

    def solve():
        return jaxmg.potrs(a, b, T_A=args.tile, return_logdet=True, return_status=True)

    t0 = time.perf_counter()
    jax.block_until_ready(solve())
    warmup = time.perf_counter() - t0
    best = math.inf
    for _ in range(args.repeats):
        multihost_utils.sync_global_devices("jaxmg demo: before the timed solve")
        t0 = time.perf_counter()
        x, logdet, status = jax.block_until_ready(solve())
        best = min(best, time.perf_counter() - t0)
    # The job's time is its slowest process's.
    times = multihost_utils.process_allgather(np.array([best, warmup]))
    elapsed, warmup = float(np.max(times[..., 0])), float(np.max(times[..., 1]))

    fwd, res, a_norm, x_norm = (float(v) for v in errors(a, x, x_true, b))
    logdet, status = float(logdet), int(status)
    eps = float(np.finfo(dtype).eps)
    exact = kms_logdet(n)
    tol_x, tol_logdet = _tolerances(n, eps, float(np.max(np.abs(x_np))), exact)
    scaled_res = res / (a_norm * x_norm * n * eps) if a_norm * x_norm > 0 else math.inf
    logdet_err = abs(logdet - exact)
    checks = {
        "status": status == 0,
        "x": fwd <= tol_x,
        "logdet": logdet_err <= tol_logdet,
        "residual": scaled_res <= RESIDUAL_LIMIT,
    }
    ok = all(checks.values())  # NaNs fail every comparison

    if rank == 0:
        d = devices[0]
        flops = n**3 / 3.0
        lines = [
            "jaxmg demo: potrs (Cholesky solve) of a distributed SPD matrix",
            f"devices:        {len(devices)} x {d.platform} ({d.device_kind}), "
            f"{nproc} processes, 1 device each",
            f"mesh:           {dict(mesh.shape)} (rows over 'pr')",
            f"matrix:         N = {n}, {dtype.name}, Kac-Murdock-Szego r = exp(-8/N), "
            f"cond <= {kms_cond_bound(n):.3g}",
            f"tile (T_A):     {tile}" + (" (jaxmg's default)" if args.tile is None else ""),
            f"warm-up call:   {warmup:.3f} s (includes compilation)",
            f"time:           {elapsed:.4f} s"
            + (f" (best of {args.repeats})" * (args.repeats > 1)),
            f"GFLOP/s:        {flops / elapsed / 1e9:.2f} (N^3/3 flops)",
            f"status:         {status}",
            f"|x - x_true|:   {fwd:.3e} (tolerance {tol_x:.3e})",
            f"logdet:         {logdet:.10g} (exact {exact:.10g}, error {logdet_err:.3e}, "
            f"tolerance {tol_logdet:.3e})",
            f"residual:       {scaled_res:.3e} = |Ax-b| / (|A| |x| N eps) "
            f"(limit {RESIDUAL_LIMIT:g})",
            "result check: OK"
            if ok
            else "result check: FAILED (" + ", ".join(k for k, v in checks.items() if not v) + ")",
        ]
        print("\n".join(lines), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
