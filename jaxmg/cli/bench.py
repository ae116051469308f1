"""`python -m jaxmg bench`: time a jaxmg solve on the devices present against JAX on one device.

`--routine potrs` (Cholesky), `lu_solve` (pivoted LU), `potri` (the inverse, against JAX's
`cho_factor` + `cho_solve` with the identity), `inv` (against `jnp.linalg.inv`), `slogdet`
(against `jnp.linalg.slogdet`), `cho_solve` (the solve with a kept factor and `--nrhs`
right-hand sides, against JAX's `cho_solve` with its kept factor; the factorization's time is
recorded beside it), `syevd` / `eigvalsh` (against `jnp.linalg.eigh` / `eigvalsh`; checked by
Σ w = tr A = N), `gesvd` / `gesvd_values` (against `jax.lax.linalg.svd` with and without
vectors, by its polar algorithm and its default, the faster kept; Σ s = tr A = N for this
symmetric positive definite A), `polar` (against `jax.scipy.linalg.polar`'s QDWH and the polar
SVD's U Vh, the faster kept; tr H = tr A = N), `qr` (against `jnp.linalg.qr`) or
`least_squares` (against JAX's QR, Qᴴb and the triangular solve), on N x `--cols` matrices
(default square). `--factor-dtype float32` (complex64 for complex128) times potrs or lu_solve in
mixed precision (`factor_dtype=`; the routine is named potrs_mixed or lu_solve_mixed in the
JSON) and records each case's condition number, path, refinement steps and backward error.
`--peer` also times JAXMg 1.x, from the folder JAXMG_PEER_PATH, on the same devices
(bench/peer_jaxmg1.py).
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
import re
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
# --factor-dtype: the input dtype each factor dtype refines to, and the routines that take it.
DEFAULT_DTYPES = [["float64", "float32"]]
MIXED_DTYPES = {"float32": "float64", "complex64": "complex128"}
MIXED_ROUTINES = ("potrs", "lu_solve")
# The largest N whose condition number the mixed precision bench computes (NumPy, on the
# gathered matrix); above it only the Kac-Murdock-Szego matrix's bound is recorded.
KAPPA_MAX_N = 4096
RECT_FLOPS = {
    "qr": lambda m, n: 4 * m * n * n - 4 * n**3 / 3,
    "least_squares": lambda m, n: 2 * m * n * n - 2 * n**3 / 3,
}


def _parser() -> argparse.ArgumentParser:
    return configure(argparse.ArgumentParser(prog="python -m jaxmg bench"))


def _list_of(kind, name):
    """An argparse type: one value or a comma-separated list of them (flattened later)."""

    def parse(text: str) -> list:
        try:
            return [kind(v) for v in text.split(",") if v.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{name} takes {kind.__name__} values separated by spaces or commas, got {text!r}"
            ) from None

    return parse


def configure(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Adds the benchmark's options to `p` (the `python -m jaxmg bench` subcommand).

    Args:
        p: The parser.

    Returns:
        ``p``, with the options added.
    """
    p.description = (
        "Time a jaxmg routine on the devices present (one process per device under `python -m "
        "jaxmg launch`, or --single-process) against JAX's own routine on one device, and "
        "optionally JAXMg 1.x (--peer). Writes a JSON file, prints a table and draws a plot "
        "next to the JSON (time against N, or against the tile for a tile sweep)."
    )
    p.epilog = (
        "examples:\n"
        "  python -m jaxmg bench --routine potrs --sizes 2048 4096 8192\n"
        "  python -m jaxmg bench --routine lu_solve --sizes 16384 --tile 256,512,1024 --mesh 1x2\n"
        "  python -m jaxmg bench --routine syevd --matrix random --dtypes float32\n"
        "The plot and the progress bar need matplotlib and rich (the bench extra): "
        "pip install matplotlib rich."
    )
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("--routine", choices=sorted(FLOPS | RECT_FLOPS), default="potrs")
    p.add_argument(
        "--matrix",
        choices=MATRICES,
        default="kms",
        help="kms (default): Kac-Murdock-Szego r**|i-j|, exact log-determinant checked; random: "
        "uniform entries made symmetric positive definite, symmetric or general as the routine "
        "needs, generated on the devices",
    )
    p.add_argument(
        "--kappa",
        type=float,
        default=None,
        help="random matrices of this 2-norm condition number (square routines): Q diag(s) Qᴴ "
        "(SPD or Hermitian as the routine needs) or U diag(s) Vᴴ, s log-spaced from 1 to "
        "1/kappa, Q, U, V from XLA's QR of Gaussian matrices, made on each device; implies "
        "--matrix random",
    )
    p.add_argument("--cols", type=int, default=None, help="qr, least_squares: N (default: M)")
    p.add_argument("--peer", action="store_true", help="also time JAXMg 1.x (JAXMG_PEER_PATH)")
    p.add_argument("-n", "--processes", type=int, default=None, help="default: GPUs, else 2")
    p.add_argument(
        "--single-process",
        action="store_true",
        help="jaxmg in one process driving every local GPU (no launcher)",
    )
    p.add_argument(
        "--sizes",
        type=_list_of(int, "--sizes"),
        nargs="+",
        default=[[2048, 4096]],
        metavar="N",
        help="matrix orders (M for qr, least_squares), separated by spaces or commas "
        "(default 2048 4096)",
    )
    p.add_argument(
        "--dtypes",
        type=_list_of(str, "--dtypes"),
        nargs="+",
        default=DEFAULT_DTYPES,
        metavar="DTYPE",
        help="float64, float32, complex128, complex64 (default float64 float32)",
    )
    p.add_argument(
        "--tile",
        type=_list_of(int, "--tile"),
        nargs="+",
        default=None,
        metavar="T",
        help="T_A, or several to sweep (spaces or commas); default: jaxmg's choice",
    )
    p.add_argument("--mesh", default=None, help="RxC process mesh (default: Px1)")
    p.add_argument("--repeats", type=int, default=3, help="timed warm calls (best is reported)")
    p.add_argument("--nrhs", type=int, default=None, help="right-hand sides (cho_solve: 16)")
    p.add_argument("--no-donate", dest="donate", action="store_false", help="keep a's buffers")
    p.add_argument(
        "--no-symmetry-check", dest="check_symmetry", action="store_false", help="potrs only"
    )
    p.add_argument(
        "--factor-dtype",
        choices=sorted(MIXED_DTYPES),
        default=None,
        help="potrs, lu_solve: factor in this dtype and refine in --dtypes' (float32 for "
        "float64, complex64 for complex128): the mixed precision solve",
    )
    p.add_argument(
        "--subset",
        default=None,
        metavar="LO:HI",
        help="syevd, eigvalsh: only the eigenpairs LO <= i < HI (subset_by_index); beside it "
        "JAX's eigh with the same subset where the platform has it, and its full eigh, sliced; "
        "gesvd, gesvd_values: the singular triplets LO <= i < HI counted from the smallest (HI = "
        "N: the N - LO largest), JAX's SVDs sliced beside; the JSON names the routine "
        "ROUTINE_subset, each record LO, HI and the kept values' sum of the last matrix timed "
        "(kept_sum); TF/s count the full problem",
    )
    p.add_argument("--no-baseline", dest="baseline", action="store_false", help="do not time JAX")
    p.add_argument("--baseline-max", type=int, default=None, help="largest N for the baseline")
    p.add_argument(
        "--jax-option",
        type=_list_of(str, "option"),
        action="append",
        default=None,
        help="JAX's options to time (default: every option of jax_options; the fastest is kept)",
    )
    p.add_argument("--out", default="bench/results/potrs.json", help="the JSON file to write")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per part of the run")
    p.add_argument(
        "--role", choices=["jaxmg", "baseline", "peer"], default=None, help=argparse.SUPPRESS
    )
    return p


def _flatten(values):
    return [v for group in values for v in group] if values else values


def run_namespace(args: argparse.Namespace) -> int:
    """Runs a parsed `python -m jaxmg bench` command line.

    Args:
        args: The subcommand's namespace.

    Returns:
        0 (a failed case is a record with an ``error`` field).
    """
    args.sizes = _flatten(args.sizes)
    args.dtypes = _flatten(args.dtypes)
    args.tiles = _flatten(args.tile) or [None]
    args.jax_option = _flatten(args.jax_option)
    if args.kappa is not None:
        if args.kappa < 1 or args.routine in RECT_FLOPS or args.routine == "cho_solve":
            raise SystemExit(
                "jaxmg bench: --kappa takes a condition number >= 1 and a square routine "
                f"(potrs, lu_solve, ...), got --kappa {args.kappa:g} --routine {args.routine}"
            )
        if args.peer:
            raise SystemExit(
                "jaxmg bench: --kappa cannot be combined with --peer (JAXMg's bench makes its "
                "own matrices): leave one out"
            )
        args.matrix = "random"
    args.subset_by_index = _subset(args)
    if args.factor_dtype is not None:
        if args.routine not in MIXED_ROUTINES:
            raise SystemExit(
                f"jaxmg bench: --factor-dtype applies to {' and '.join(MIXED_ROUTINES)}, not "
                f"to --routine {args.routine}"
            )
        wide = MIXED_DTYPES[args.factor_dtype]
        if args.dtypes == _flatten(DEFAULT_DTYPES):  # (--dtypes not given)
            args.dtypes = [wide]
        if args.dtypes != [wide]:
            raise SystemExit(
                f"jaxmg bench: --factor-dtype {args.factor_dtype} refines {wide} solves: pass "
                f"--dtypes {wide} (got {' '.join(args.dtypes)})"
            )
    return _run(args)


def _subset(args):
    """(lo, hi) of --subset LO:HI, checked against the routine and every size, or None."""
    if args.subset is None:
        return None
    if args.routine not in SUBSET_ROUTINES:
        raise SystemExit(
            f"jaxmg bench: --subset applies to {', '.join(SUBSET_ROUTINES)}, not to "
            f"--routine {args.routine}"
        )
    try:
        lo, hi = (int(x) for x in args.subset.split(":"))
    except ValueError:
        raise SystemExit(
            f"jaxmg bench: --subset takes LO:HI (two ints), got {args.subset!r}"
        ) from None
    if args.peer:
        raise SystemExit("jaxmg bench: JAXMg 1.x has no subset_by_index: leave out --peer")
    bad = [n for n in args.sizes if not 0 <= lo < hi <= n]
    if bad:
        raise SystemExit(
            f"jaxmg bench: --subset {lo}:{hi} needs 0 <= LO < HI <= N for every size, not "
            f"N = {bad[0]}"
        )
    return lo, hi


def _kept(args):
    """--subset's (lo, hi), or None."""
    return getattr(args, "subset_by_index", None)


def routine_name(args) -> str:
    """The routine's name in the JSON: potrs_mixed, lu_solve_mixed with --factor-dtype;
    syevd_subset, eigvalsh_subset, gesvd_subset, gesvd_values_subset with --subset."""
    if getattr(args, "factor_dtype", None):
        return f"{args.routine}_mixed"
    if getattr(args, "subset", None):
        return f"{args.routine}_subset"
    return args.routine


MATRICES = ("kms", "random")
# What each routine needs of a random matrix (the default: general).
SPD_ROUTINES = ("potrs", "potri", "cho_solve")
SYMMETRIC_ROUTINES = ("syevd", "eigvalsh")
# --subset: eigenpairs (ascending) or singular triplets (counted from the smallest) by index.
SUBSET_ROUTINES = (*SYMMETRIC_ROUTINES, "gesvd", "gesvd_values")
SEED = 20240607


def _matrix(args, n, dtype, sharding, cols=None):
    """The generator of the benchmark's matrix, made on the devices in `sharding`."""
    if args.matrix == "kms":
        return _kms(n, dtype, sharding, cols)
    if getattr(args, "kappa", None) is not None:
        return _conditioned(args.routine, n, dtype, sharding, args.kappa)
    return _random(args.routine, n, dtype, sharding, cols)


def _conditioned(routine, n, dtype, sharding, kappa):
    """Random n x n matrices of 2-norm condition number kappa: Q diag(s) Qᴴ for the Cholesky
    routines and the eigensolvers, U diag(s) Vᴴ otherwise, the s log-spaced from 1 to 1/kappa
    and Q, U, V the orthonormal factors of XLA's QR of Gaussian matrices (their columns' signs
    fixed by R's diagonal: Haar distributed). A new key per call."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    real = np.dtype(dtype).type(0).real.dtype
    counter = iter(range(1 << 30))

    def orthonormal(key):
        g = jax.random.normal(key, (n, n), real)
        if np.issubdtype(dtype, np.complexfloating):
            g = g + 1j * jax.random.normal(jax.random.fold_in(key, 1), (n, n), real)
        q, r = jnp.linalg.qr(g.astype(dtype))
        d = jnp.diagonal(r)
        return q * jnp.where(d == 0, 1, d / jnp.abs(d))[None, :]

    def gen(key):
        s = jnp.logspace(0.0, -np.log10(kappa), n, dtype=real)
        q = orthonormal(key)
        if routine in SPD_ROUTINES or routine in SYMMETRIC_ROUTINES:
            a = (q * s[None, :].astype(dtype)) @ q.conj().T
            return ((a + a.conj().T) / 2).astype(dtype)
        v = orthonormal(jax.random.fold_in(key, 2))
        return ((q * s[None, :].astype(dtype)) @ v.conj().T).astype(dtype)

    compiled = jax.jit(gen, out_shardings=sharding)
    return lambda: compiled(jax.random.fold_in(jax.random.key(SEED), next(counter)))


def _random(routine, n, dtype, sharding, cols=None):
    """Uniform entries in [-1, 1) (real and imaginary parts); symmetric (Hermitian) for the
    eigensolvers, plus N on the diagonal (diagonally dominant: positive definite) for the
    Cholesky routines, general otherwise. A new key per call, so no two calls see one matrix."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    shape = (n, cols or n)
    real = np.dtype(dtype).type(0).real.dtype
    counter = iter(range(1 << 30))

    def gen(key):
        a = jax.random.uniform(key, shape, real, -1.0, 1.0)
        if np.issubdtype(dtype, np.complexfloating):
            k2 = jax.random.fold_in(key, 1)
            a = a + 1j * jax.random.uniform(k2, shape, real, -1.0, 1.0)
        a = a.astype(dtype)
        if routine in SPD_ROUTINES or routine in SYMMETRIC_ROUTINES:
            a = (a + a.conj().T) / 2
        if routine in SPD_ROUTINES:
            a = a + n * jnp.eye(n, dtype=dtype)
        return a

    compiled = jax.jit(gen, out_shardings=sharding)
    return lambda: compiled(jax.random.fold_in(jax.random.key(SEED), next(counter)))


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
        if os.environ.get("JAXMG_DEBUG"):  # _StageCapture splits the step lines by call
            sys.stderr.flush()
            os.write(2, f"[jaxmg] call {rep}\n".encode())
        t0 = time.perf_counter()
        x, logdet = solve(a, b)
        x.block_until_ready()
        times.append(time.perf_counter() - t0)
        del a, x  # the next matrix may reuse this one's memory
    return times, logdet


def _drop_kms_checks(args, rec):
    """The log-determinant and trace checks hold for the KMS matrix only."""
    if args.matrix != "kms":
        for key in ("logdet_rel_err", "logdet_ok", "check_rel_err", "check_ok"):
            rec.pop(key, None)


STEP_LINE = re.compile(r"^\[jaxmg\] step (?P<step>[^:]+): (?P<ms>[0-9.]+) ms\s*$")


CALL_LINE = re.compile(r"^\[jaxmg\] call (?P<call>\d+)\s*$")


class _StageCapture:
    """With JAXMG_DEBUG set, collects the GPU engine's "[jaxmg] step NAME: T ms" lines (written
    to file descriptor 2 by the native code) into rec["stages_ms"] (NAME -> every time printed,
    the first call's compiling ones included) and rec["stages_best_ms"] (NAME -> the least), and,
    split by the "[jaxmg] call K" lines of _time_calls, rec["steps_per_call"] (NAME -> how often
    the last call ran it: QDWH runs its QR and Cholesky steps several times) and
    rec["stages_call_ms"] (NAME -> its summed time within a warm call, the least over the warm
    calls), whose sum is what a call spends in the timed steps. The lines are still printed.
    Without JAXMG_DEBUG, or on CPUs (no such lines), nothing is recorded."""

    def __init__(self, rec):
        self.rec = rec
        self.active = bool(os.environ.get("JAXMG_DEBUG"))

    def __enter__(self):
        if self.active:
            import tempfile

            sys.stderr.flush()
            self.file = tempfile.TemporaryFile()
            self.saved = os.dup(2)
            os.dup2(self.file.fileno(), 2)
        return self

    def __exit__(self, *exc):
        if not self.active:
            return False
        sys.stderr.flush()
        os.dup2(self.saved, 2)
        os.close(self.saved)
        self.file.seek(0)
        text = self.file.read().decode("utf-8", "replace")
        self.file.close()
        sys.stderr.write(text)
        sys.stderr.flush()
        stages = parse_stages(text)
        if stages:
            self.rec["stages_ms"] = stages
            self.rec["stages_best_ms"] = {k: min(v) for k, v in stages.items()}
        calls = stages_by_call(text)
        if len(calls) > 1:
            self.rec["steps_per_call"] = {k: len(v) for k, v in calls[-1].items()}
            warm = [{k: sum(v) for k, v in call.items()} for call in calls[1:]]
            self.rec["stages_call_ms"] = {
                k: round(min(call.get(k, 0.0) for call in warm), 2) for k in calls[-1]
            }
        return False


def parse_stages(text: str) -> dict[str, list[float]]:
    """The step times in JAXMG_DEBUG output.

    Args:
        text: What the GPU engine printed (other lines are ignored).

    Returns:
        Step name -> the times, in milliseconds, in the order printed.
    """
    stages: dict[str, list[float]] = {}
    for line in text.splitlines():
        if m := STEP_LINE.match(line):
            stages.setdefault(m["step"], []).append(float(m["ms"]))
    return stages


def stages_by_call(text: str) -> list[dict[str, list[float]]]:
    """The step times of each call, split by _time_calls' "[jaxmg] call K" lines.

    Args:
        text: What the GPU engine and the benchmark printed.

    Returns:
        One dict a call (the first one compiling), step name -> its times in that call, in the
        order printed; empty without the call lines.
    """
    calls: list[dict[str, list[float]]] = []
    for line in text.splitlines():
        if CALL_LINE.match(line):
            calls.append({})
        elif calls and (m := STEP_LINE.match(line)):
            calls[-1].setdefault(m["step"], []).append(float(m["ms"]))
    return calls


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


def _rhs(args, gen, m, dtype, sharding):
    """b for qr / least_squares: A[:, 0] in every column, so that x = e₀."""
    if args.matrix == "kms":
        return _first_column(m, dtype, args.nrhs, sharding)
    import jax
    import jax.numpy as jnp

    nrhs = args.nrhs
    return jax.jit(lambda a: jnp.tile(a[:, :1], (1, nrhs)), out_shardings=sharding)(gen())


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
        if args.kappa is not None:
            rec["kappa"] = args.kappa
        try:
            if rect := _rectangular(args, n):
                m, cols = rect
                gen = _matrix(args, m, dtype, a_sh, cols)
                b = _rhs(args, gen, m, dtype, b_sh)

                def run(a, b, tile=tile):
                    kw = dict(T_A=tile, mesh=mesh, donate=args.donate)
                    if args.routine == "qr":
                        q, r = jaxmg.qr(a, **kw)
                        return q, r[0, 0]
                    x = jaxmg.least_squares(a, b, **kw)
                    return x, x[0, 0]

                with _StageCapture(rec):
                    times, check = _time_calls(
                        gen, run, b, args.repeats, f"{n}-{dtype_name}-{tile}"
                    )
                rec["donate"] = args.donate
                exact = _check_value(args, gen)
                _rect_record(args, rec, m, cols, complex(check), exact, times, dtype, procs)
                if jax.process_index() == 0:
                    _print_record(rec)
                records.append(rec)
                _sync(f"bench-done-{n}-{dtype_name}-{tile}")
                continue
            gen = _matrix(args, n, dtype, a_sh)
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
                    subset = dict(subset_by_index=_kept(args))
                    out = jaxmg.gesvd(a, compute_u=vectors, compute_vh=vectors, **kw, **subset)
                    return (out[2] if vectors else out), jax.numpy.sum(out[1] if vectors else out)
                if args.routine == "polar":
                    kw.pop("return_logdet")
                    up, h = jaxmg.polar(a, **kw)
                    return up, jax.numpy.trace(h)
                if args.routine in EIGEN:
                    kw.pop("return_logdet")
                    vectors = args.routine == "syevd"
                    subset = dict(subset_by_index=_kept(args))
                    out = jaxmg.syevd(a, return_eigenvectors=vectors, **kw, **subset)
                    w = out[0] if vectors else out
                    return (out[1] if vectors else w), jax.numpy.sum(w)
                if args.routine == "slogdet":
                    kw.pop("return_logdet")
                    sign, logdet = jaxmg.slogdet(a, **kw)
                    return sign, logdet
                if args.routine == "potrs":
                    kw["check_symmetry"] = args.check_symmetry
                if args.factor_dtype:  # the info in the place of the log-determinant
                    kw.update(return_logdet=False, donate=False, return_info=True)
                    kw["factor_dtype"] = args.factor_dtype
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
                with _StageCapture(rec):
                    times, logdet = _time_calls(gen, solve, b, args.repeats, name)
            if args.factor_dtype:
                _mixed_record(args, rec, logdet, gen, n, times, procs)

                # The low-precision factorization alone (cho_factor / lu_factor with the same
                # factor_dtype): the rest of the solve's time is its estimate and refinement.
                def low_factor(a, b, tile=tile):
                    make = jaxmg.cho_factor if args.routine == "potrs" else jaxmg.lu_factor
                    f = make(a, T_A=tile, mesh=mesh, factor_dtype=args.factor_dtype)
                    return f.matrix, f

                ftimes, _ = _time_calls(gen, low_factor, b, args.repeats, name + "-factor")
                rec["factor_seconds"] = min(ftimes[1:])
                rec["refine_seconds"] = rec["seconds"] - rec["factor_seconds"]
                if jax.process_index() == 0:
                    _print_record(rec)
                records.append(rec)
                _sync(f"bench-done-{n}-{dtype_name}-{tile}")
                continue
            ld = float(np.asarray(logdet.addressable_data(0)))
            eps = float(np.finfo(dtype).eps)
            if _kept(args):  # the kept eigenvalues' sum (of the last matrix timed)
                rec.update(lo=_kept(args)[0], hi=_kept(args)[1], kept_sum=ld)
                ld = n
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
            _drop_kms_checks(args, rec)
        except Exception as e:  # noqa: BLE001 - an OOM at the largest N is a result too
            rec["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        if jax.process_index() == 0:
            _print_record(rec)
        records.append(rec)
        _sync(f"bench-done-{n}-{dtype_name}-{tile}")
    return records if jax.process_index() == 0 else []


def _mixed_record(args, rec, info, gen, n, times, procs):
    """A mixed precision case's record: the times, the condition number (--kappa's, else
    NumPy's 2-norm one up to KAPPA_MAX_N, else the Kac-Murdock-Szego matrix's bound
    ((1 + r) / (1 - r))², else None; NumPy's measure as kappa_measured up to KAPPA_MAX_N), the
    path taken, the refinement steps, the backward error of the last call and the solve's own
    condition estimate."""
    import numpy as np
    from jax.experimental import multihost_utils

    kappa = measured = None
    if n <= KAPPA_MAX_N:
        a = np.asarray(multihost_utils.process_allgather(gen(), tiled=True))
        measured = kappa = float(np.linalg.cond(a))
    if args.kappa is not None:
        kappa = args.kappa  # (by construction; NumPy's measure beside it where taken)
    elif args.matrix == "kms" and kappa is None:
        kappa = ((1 + R) / (1 - R)) ** 2
    rec.update(
        routine=routine_name(args),
        factor_dtype=args.factor_dtype,
        seconds=min(times[1:]),
        compile_and_first_s=times[0],
        all_s=times,
        tflops=_flops(args, n) / min(times[1:]) / 1e12,
        kappa=kappa,
        kappa_measured=measured,
        path=info.path_name(),
        iterations=int(np.asarray(info.iterations.addressable_data(0))),
        backward_error=float(np.max(np.asarray(info.backward_error.addressable_data(0)))),
        condition_estimate=float(np.asarray(info.condition_estimate.addressable_data(0))),
        donate=False,
        shard_bytes=n * n * np.dtype(rec["dtype"]).itemsize // procs,
        peak_bytes=_peak_bytes(),
    )


def jax_options(routine: str, subset_by_index=None) -> dict:
    """JAX's documented ways to compute `routine` on one device, by name, fastest known first.

    The baseline times each (or those named by `--jax-option`) and reports the fastest, with every
    option's time in the record's `jax_options_s`, so that jaxmg is compared with JAX at its best:
    for the SVD, `jax.lax.linalg.svd(..., algorithm=SvdAlgorithm.POLAR)` (cuSOLVER's gesvdp on
    GPUs) beside the default; JAX's eigh has no faster option than its default (its Jacobi is
    several times slower on GPUs). Each function takes (a, b) and returns (output, a scalar check).

    Args:
        routine: The bench's `--routine`.
        subset_by_index: --subset's (lo, hi): JAX's eigh with subset_by_index (cuSOLVER's
            syevdx on GPUs) and its full eigh, sliced; JAX's SVDs, their triplets kept (its
            svd's subset_by_index is for TPUs).

    Returns:
        Option name -> function.
    """
    import jax
    import jax.numpy as jnp
    from jax.scipy.linalg import cho_factor, cho_solve, lu_factor, lu_solve

    def svd(algorithm):
        def run(a, b):
            # (a subset: the whole SVD's triplets kept, counted from the smallest value)
            k = min(a.shape)
            start, stop = (
                (k - subset_by_index[1], k - subset_by_index[0]) if subset_by_index else (0, k)
            )
            if routine == "gesvd_values":
                sv = jax.lax.linalg.svd(
                    a, full_matrices=False, compute_uv=False, algorithm=algorithm
                )
                return sv[start:stop], jnp.sum(sv[start:stop])
            u, sv, vh = jax.lax.linalg.svd(a, full_matrices=False, algorithm=algorithm)
            if routine == "polar":  # Up = U Vh, H = V diag(s) Vh
                return u @ vh, jnp.sum(sv)
            return vh[start:stop], jnp.sum(sv[start:stop])

        return run

    def polar_qdwh(a, b):
        up, h = jax.scipy.linalg.polar(a, method="qdwh")
        return up, jnp.trace(h)

    def eigh(a, b):
        w, v = jnp.linalg.eigh(a)
        if subset_by_index:
            lo, hi = subset_by_index
            w, v = w[lo:hi], v[:, lo:hi]
        return (v, jnp.sum(w)) if routine == "syevd" else (w, jnp.sum(w))

    def eigh_subset(a, b):
        v, w = jax.lax.linalg.eigh(a, subset_by_index=subset_by_index)
        return (v, jnp.sum(w)) if routine == "syevd" else (w, jnp.sum(w))

    def inv(a, b):
        x = jnp.linalg.inv(a)
        return x, jnp.zeros((), x.real.dtype)

    def slogdet(a, b):
        return jnp.linalg.slogdet(a)

    def lu(a, b):
        f = lu_factor(a)
        return lu_solve(f, b), jnp.sum(jnp.log(jnp.abs(jnp.diagonal(f[0]))))

    def cholesky(a, b):
        c = cho_factor(a, lower=True)
        if routine == "potri":  # the inverse: the solve with the identity
            b = jnp.eye(a.shape[0], dtype=a.dtype)
        return cho_solve(c, b), 2 * jnp.sum(jnp.log(jnp.diagonal(c[0])))

    polar_svd = jax.lax.linalg.SvdAlgorithm.POLAR
    options = {
        "gesvd": {"svd-polar": svd(polar_svd), "svd-default": svd(None)},
        "gesvd_values": {"svd-polar": svd(polar_svd), "svd-default": svd(None)},
        "polar": {"polar-qdwh": polar_qdwh, "svd-polar": svd(polar_svd)},
        "syevd": {"eigh": eigh},
        "eigvalsh": {"eigh": eigh},
        **(
            {r: {"eigh-subset": eigh_subset, "eigh": eigh} for r in SYMMETRIC_ROUTINES}
            if subset_by_index
            else {}
        ),
        "inv": {"inv": inv},
        "slogdet": {"slogdet": slogdet},
        "lu_solve": {"lu_factor-lu_solve": lu},
    }
    return options.get(routine, {"cho_factor-cho_solve": cholesky})


def _fastest_option(args, rec, gen, b, name):
    """Times each of JAX's options for the routine (jax_options) and keeps the fastest: its times
    and check are returned, rec gets every option's best time (or error) and the winner's name."""
    import jax

    options = jax_options(args.routine, _kept(args))
    if args.jax_option:
        unknown = sorted(set(args.jax_option) - set(options))
        if unknown:
            raise ValueError(f"--jax-option {unknown} is not one of {sorted(options)}")
        options = {k: v for k, v in options.items() if k in args.jax_option}
    results, errors = {}, {}
    for option, fn in options.items():
        try:
            results[option] = _time_calls(gen, jax.jit(fn), b, args.repeats, f"{name}-{option}")
        except Exception as e:  # noqa: BLE001 - an option this platform lacks is a result too
            errors[option] = f"{type(e).__name__}: {str(e)[:200]}"
    rec["jax_options_s"] = {k: min(t[1:]) for k, (t, _) in results.items()} | errors
    if not results:
        raise RuntimeError(f"no JAX option ran: {errors}")
    rec["jax_option"] = min(results, key=lambda k: min(results[k][0][1:]))
    return results[rec["jax_option"]]


def _run_baseline(args) -> list[dict]:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.scipy.linalg import cho_factor, cho_solve

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
            if args.kappa is not None:
                rec["kappa"] = args.kappa
            try:
                if rect := _rectangular(args, n):
                    m, cols = rect
                    gen = _matrix(args, m, dtype, sharding, cols)
                    b = _rhs(args, gen, m, dtype, sharding)

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
                gen = _matrix(args, n, dtype, sharding)
                b = jax.device_put(jnp.ones((n, args.nrhs), dtype), device)

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
                    times, logdet = _fastest_option(args, rec, gen, b, name)
                if _kept(args):  # the kept eigenvalues' sum (of the last matrix timed)
                    lo, hi = _kept(args)
                    rec.update(lo=lo, hi=hi, kept_sum=float(logdet))
                    logdet = n
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
                _drop_kms_checks(args, rec)
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
        if bt and len(b.get("jax_options_s", {})) > 1:  # which of JAX's options was fastest
            bs += f" ({b['jax_option']})"
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


PLOT_HINT = "pip install matplotlib (the bench extra) to draw the plot"


def _series(records, engine, dtype, x_key, fixed=None):
    """(x, seconds) points of one engine and dtype, sorted by x."""
    pts = sorted(
        (r[x_key], r["seconds"])
        for r in records
        if r["engine"] == engine
        and r["dtype"] == dtype
        and "seconds" in r
        and r.get(x_key) is not None
        and all(r.get(k) == v for k, v in (fixed or {}).items())
    )
    return pts


def plot_kind(records: list[dict]) -> str:
    """``"tile"`` when the jaxmg records sweep tiles at one N per dtype, else ``"n"``.

    Args:
        records: The benchmark's records.

    Returns:
        What the plot's x axis is.
    """
    jaxmg = [r for r in records if r["engine"] == "jaxmg" and "seconds" in r]
    tiles = {r.get("tile") for r in jaxmg}
    sizes = {(r["dtype"], r["n"]) for r in jaxmg}
    dtypes = {r["dtype"] for r in jaxmg}
    return "tile" if len(tiles) > 1 and len(sizes) == len(dtypes) else "n"


def plot(records: list[dict], path: Path, title: str | None = None) -> Path | None:
    """Draws the records: time against N (a line per engine, dtype and tile), or, for a tile
    sweep at one N, time against the tile with JAX's time as a horizontal line.

    Args:
        records: The benchmark's records.
        path: The image to write (its suffix picks the format).
        title: The plot's title.

    Returns:
        ``path``, or None when matplotlib is missing.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    dtypes = sorted({r["dtype"] for r in records})
    engines = [e for e in ("jaxmg", "jaxmg-1.x", "jax") if any(r["engine"] == e for r in records)]

    def label(engine, dtype, extra=""):
        devices = max(r["devices"] for r in records if r["engine"] == engine)
        name = {"jaxmg-1.x": "JAXMg 1.x", "jax": "JAX"}.get(engine, engine)
        return f"{name}, {devices} device{'s' if devices > 1 else ''}, {dtype}{extra}"

    if plot_kind(records) == "tile":
        for dtype in dtypes:
            pts = _series(records, "jaxmg", dtype, "tile")
            if pts:
                n = next(r["n"] for r in records if r["engine"] == "jaxmg" and r["dtype"] == dtype)
                ax.plot(*zip(*pts, strict=True), marker="o", label=label("jaxmg", dtype))
                best = min(pts, key=lambda p: p[1])
                ax.annotate(f"best: {best[0]}", best, textcoords="offset points", xytext=(0, -14))
            for engine, style in (("jax", "--"), ("jaxmg-1.x", ":")):
                base = [r for r in records if r["engine"] == engine and r["dtype"] == dtype]
                base = [r for r in base if "seconds" in r and r["n"] == n]
                if base:
                    ax.axhline(base[0]["seconds"], linestyle=style, color="gray")
                    ax.annotate(
                        label(engine, dtype),
                        (pts[0][0], base[0]["seconds"]),
                        textcoords="offset points",
                        xytext=(2, 3),
                        color="gray",
                    )
        ax.set_xscale("log", base=2)
        ax.set_xlabel("tile T_A")
        ax.set_title(title or f"tile sweep at N = {n}")
    else:
        tiles = sorted({r.get("tile") or 0 for r in records if r["engine"] == "jaxmg"})
        for engine in engines:
            for dtype in dtypes:
                for tile in tiles if engine == "jaxmg" else [None]:
                    fixed = {"tile": tile or None} if engine == "jaxmg" else None
                    pts = _series(records, engine, dtype, "n", fixed)
                    if pts:
                        extra = f", tile {tile}" if engine == "jaxmg" and len(tiles) > 1 else ""
                        ax.plot(
                            *zip(*pts, strict=True), marker="o", label=label(engine, dtype, extra)
                        )
        ax.set_xscale("log", base=2)
        ax.set_xlabel("N")
        if title:
            ax.set_title(title)
    ax.set_yscale("log")
    ax.set_ylabel("seconds")
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _gpu_count() -> int:
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
        return sum(1 for line in out.stdout.splitlines() if line.startswith("GPU "))
    except (OSError, subprocess.SubprocessError):
        return 0


def cli(argv: list[str]) -> int:
    """`python -m jaxmg bench ARGS` (also `python bench/potrs.py ARGS`).

    Args:
        argv: What follows ``python -m jaxmg bench``.

    Returns:
        0 (a failed case is a record with an ``error`` field).
    """
    from jaxmg.cli import command

    return command.run("bench", configure, run_namespace, list(argv))


RECORD_LINE = re.compile(r"^(jaxmg|jax|jaxmg-1\.x)\s+\d+dev ")


class _Progress:
    """A progress bar over the run's cases (rich), or one "[bench] i/n" line per case."""

    def __init__(self, total: int):
        self.total, self.done = total, 0
        try:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn
        except ImportError:
            self.bar = None
            return
        self.bar = Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            transient=True,
        )
        self.task = self.bar.add_task("cases", total=total)

    def __enter__(self):
        if self.bar is not None:
            self.bar.start()
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.stop()
        return False

    def role(self, role: str, cases: int) -> None:
        if self.bar is not None:
            self.bar.update(self.task, description=role)

    def line(self, text: str) -> None:
        """Prints one line of a part's output; a record line advances the bar."""
        if RECORD_LINE.match(text):
            self.done += 1
            if self.bar is None and self.total > 1:
                text = f"[bench {self.done}/{self.total}] {text}"
        if self.bar is not None:
            self.bar.console.print(text, markup=False, highlight=False, soft_wrap=True)
            if RECORD_LINE.match(text):
                self.bar.advance(self.task)
        else:
            print(text, flush=True)


def _run_part(cmd, env, timeout, progress: _Progress) -> int:
    """Runs one part of the benchmark, its output shown line by line through `progress`."""
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    )
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    for line in proc.stdout:
        progress.line(line.rstrip("\n"))
        if time.monotonic() > deadline:
            proc.kill()
            break
    return proc.wait()


def _run(args) -> int:
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
        "--matrix",
        args.matrix,
        "--sizes",
        ",".join(map(str, args.sizes)),
        "--dtypes",
        ",".join(args.dtypes),
        "--repeats",
        str(args.repeats),
        "--nrhs",
        str(args.nrhs),
    ]
    if args.tiles != [None]:
        passthrough += ["--tile", ",".join(map(str, args.tiles))]
    if args.mesh:
        passthrough += ["--mesh", args.mesh]
    if not args.donate:
        passthrough.append("--no-donate")
    if not args.check_symmetry:
        passthrough.append("--no-symmetry-check")
    if args.factor_dtype:
        passthrough += ["--factor-dtype", args.factor_dtype]
    if args.baseline_max:
        passthrough += ["--baseline-max", str(args.baseline_max)]
    if args.cols:
        passthrough += ["--cols", str(args.cols)]
    if args.kappa is not None:
        passthrough += ["--kappa", repr(args.kappa)]
    if args.subset:
        passthrough += ["--subset", args.subset]
    records = []
    parts = [("jaxmg", out.with_suffix(".jaxmg.part"))]
    if args.peer:
        parts.append(("peer", out.with_suffix(".peer.part")))
    if args.baseline:
        parts.append(("baseline", out.with_suffix(".baseline.part")))
    cases = len(args.sizes) * len(args.dtypes)
    baseline_sizes = [n for n in set(args.sizes) if not args.baseline_max or n <= args.baseline_max]
    counts = {
        "jaxmg": cases * len(args.tiles),
        "peer": cases,
        "baseline": len(baseline_sizes) * len(args.dtypes),
    }
    with _Progress(sum(counts[role] for role, _ in parts)) as progress:
        for role, part in parts:
            part.unlink(missing_ok=True)
            env = dict(os.environ, JAXMG_BENCH_PART=str(part), PYTHONUNBUFFERED="1")
            inner = [sys.executable, "-m", "jaxmg", "bench", *passthrough, "--role", role]
            if role == "baseline" and args.jax_option:
                inner += ["--jax-option", ",".join(args.jax_option)]
            if role == "peer":
                inner = [sys.executable, str(_peer_script()), *passthrough]
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
                    visible = env.get("CUDA_VISIBLE_DEVICES", "0")
                    env["CUDA_VISIBLE_DEVICES"] = visible.split(",")[0]
            progress.role(role, counts[role])
            progress.line(f"[bench] {role}: {' '.join(cmd[1:])}")
            rc = _run_part(cmd, env, args.timeout + 60, progress)
            if part.exists():
                records += json.loads(part.read_text())
                part.unlink()
            if rc != 0:
                progress.line(f"[bench] {role} exited with {rc}")
    result = dict(
        routine=routine_name(args),
        factor_dtype=args.factor_dtype,
        matrix=f"Kac-Murdock-Szego r={R}"
        if args.matrix == "kms"
        else "random" + ("" if args.kappa is None else f", condition number {args.kappa:g}"),
        matrix_kind=args.matrix,
        kappa=args.kappa,
        subset_by_index=list(_kept(args)) if _kept(args) else None,
        commit=measured_commit(),
        jaxmg_version=_version(),
        host=os.uname().nodename,
        debug=os.environ.get("JAXMG_DEBUG") or None,
        config=_configured(),
        records=records,
    )
    out.write_text(json.dumps(result, indent=1))
    print(table(records))
    drawn = plot(records, out.with_suffix(".png"))
    if drawn:
        print(f"[bench] wrote {out} and {drawn}")
    else:
        print(f"[bench] wrote {out}; no plot: {PLOT_HINT}")
    return 0


def _version() -> str | None:
    try:
        from importlib.metadata import version

        return version("jaxmg")
    except Exception:  # noqa: BLE001 - not installed (run from a source tree)
        return None


def _peer_script() -> Path:
    """bench/peer_jaxmg1.py of the source tree jaxmg runs from, else of the working directory (an
    installed jaxmg, run from a checkout); an error that says so when neither has it."""
    for root in (Path(__file__).resolve().parents[2], Path.cwd()):
        if (root / "bench" / "peer_jaxmg1.py").is_file():
            return root / "bench" / "peer_jaxmg1.py"
    raise SystemExit(
        "jaxmg bench --peer: bench/peer_jaxmg1.py (in jaxmg's source tree) was not found beside "
        "the installed package nor in the working directory; run from a jaxmg checkout"
    )


def _configured() -> dict:
    """The jaxmg.config options in effect (the JAXMG_* variables) that differ from their
    defaults: the runs' own (e.g. gpu_math), recorded with the results."""
    from jaxmg._core import config as _config

    current, default = _config.current(), _config.Config()
    return {
        name: getattr(current, name)
        for name in _config.PUBLIC
        if getattr(current, name) != getattr(default, name)
    }


def measured_commit() -> str | None:
    """The commit measured: JAXMG_COMMIT, else `git rev-parse HEAD` of the checkout jaxmg is
    imported from, else ``"jaxmg <version>"`` of the installed package."""
    if commit := os.environ.get("JAXMG_COMMIT"):
        return commit
    root = Path(__file__).resolve().parents[2]
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--show-toplevel", "HEAD"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
        lines = out.stdout.split()
        # A checkout of jaxmg (jaxmg imported from it, or from its .venv), not another repository.
        if out.returncode == 0 and len(lines) == 2 and (Path(lines[0]) / "jaxmg" / "cli").is_dir():
            return lines[1]
    except (OSError, subprocess.SubprocessError):
        pass
    version = _version()
    return f"jaxmg {version}" if version else None
