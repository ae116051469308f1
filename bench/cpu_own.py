"""The CPU engine's own algorithms (csrc/algorithms/, over LAPACK, BLAS, PBLAS and MPI) against
ScaLAPACK's, inside the routine, on P processes of one machine:
- lu_solve: jaxmg's 1-D LU against p?getrf (default mesh P x 1: a 1 x P engine grid, where the
  1-D LU applies);
- potri: the blocked Cholesky inverse (L⁻¹ by blocks, then L⁻ᴴ L⁻¹) against p?potrs with the
  identity (any grid);
- inv: the blocked LU inverse (U⁻¹ L⁻¹ Pᵀ by blocks) against p?getri, after the same LU (any
  grid);
- qr: jaxmg's 1-D QR with look-ahead and its Q against p?geqrf and p?orgqr (default mesh 1 x P:
  a 1 x P engine grid, where the 1-D QR applies), on a square matrix;
- eigh, eigvalsh: jaxmg's two stages (algorithms/band_eigh.h: the band reduction over the
  processes, the bulge chase on process 0, ?sterf there for eigenvalues alone or p?stedc on the
  grid, Q₂ and Q₁ over the processes) against p?syevd (default mesh 1 x P; any 1-D grid), on a
  random symmetric matrix, with eigenvectors or without.

  python -m jaxmg launch -n 2 bench/cpu_own.py OUT.json
      [--routine lu_solve|potri|inv|qr|eigh|eigvalsh]
      [--mesh 2x1] [--sizes 1024 2048] [--tiles 0 64 128] [--matrix random|kms] [--reps 3]

Each time is the best of `reps` calls after a warm-up (compilation), with the result ready; both
variants run in the same processes, each traced under its own jaxmg.config (cpu_lu,
cpu_inverses, cpu_qr or cpu_eigh). The error column: the largest entry of the result's error
(lu_solve: x; potri, inv: the inverse; qr: Q R − A; eigh: A V − V diag(w); eigvalsh: w against
NumPy's). Process 0 prints a table, writes the JSON (with the machine, the process
count, the mesh and the commit) and, with matplotlib, a plot beside it (OUT.png). Tile 0: the
engine's automatic tile.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import jax

jax.distributed.initialize()
jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402
from jax.experimental.multihost_utils import process_allgather  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import jaxmg  # noqa: E402
from jaxmg.cli.bench import measured_commit  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048, 3072])
p.add_argument("--tiles", type=int, nargs="+", default=[0, 64, 128])
p.add_argument(
    "--routine", choices=("lu_solve", "potri", "inv", "qr", "eigh", "eigvalsh"), default="lu_solve"
)
p.add_argument("--mesh", default=None, help="ROWSxCOLS (default: P x 1; qr: 1 x P)")
p.add_argument("--matrix", choices=("random", "kms"), default="random")
p.add_argument("--reps", type=int, default=3)
args = p.parse_args()

procs = jax.process_count()
default_shape = (1, procs) if args.routine in ("qr", "eigh", "eigvalsh") else (procs, 1)
shape = tuple(int(v) for v in args.mesh.split("x")) if args.mesh else default_shape
mesh = jax.make_mesh(shape, ("rows", "cols"))
jax.set_mesh(mesh)
grid, rows = NamedSharding(mesh, P("rows", "cols")), NamedSharding(mesh, P("rows", None))
# routine: (jaxmg.config option, {label: value})
ROUTINES = {
    "lu_solve": ("cpu_lu", {"jaxmg 1-D LU": "auto", "ScaLAPACK p?getrf": "scalapack"}),
    "potri": (
        "cpu_inverses",
        {"jaxmg blocked inverse": "blocked", "ScaLAPACK p?potrs with I": "scalapack"},
    ),
    "inv": (
        "cpu_inverses",
        {"jaxmg blocked inverse": "blocked", "ScaLAPACK p?getri": "scalapack"},
    ),
    "qr": ("cpu_qr", {"jaxmg 1-D QR": "auto", "ScaLAPACK p?geqrf+p?orgqr": "scalapack"}),
    "eigh": ("cpu_eigh", {"jaxmg two stages": "two-stage", "ScaLAPACK p?syevd": "scalapack"}),
    "eigvalsh": (
        "cpu_eigh",
        {"jaxmg two stages": "two-stage", "ScaLAPACK p?syevd": "scalapack"},
    ),
}
SWITCH, VARIANTS = ROUTINES[args.routine]


def matrix(n):
    if args.matrix == "kms":  # Kac-Murdock-Szegő, rho = 0.5 (symmetric positive definite)
        i = np.arange(n)
        return 0.5 ** np.abs(i[:, None] - i[None, :])
    g = np.random.default_rng(n).standard_normal((n, n))
    if args.routine in ("eigh", "eigvalsh"):
        return (g + g.T) / 2
    return g @ g.T / n + np.eye(n) if args.routine == "potri" else g


def call(tile):
    if args.routine == "potri":
        return jax.jit(lambda a, b, t=tile or None: jaxmg.potri(a, T_A=t))
    if args.routine == "inv":
        return jax.jit(lambda a, b, t=tile or None: jaxmg.inv(a, T_A=t))
    if args.routine == "qr":
        return jax.jit(lambda a, b, t=tile or None: jaxmg.qr(a, T_A=t))
    if args.routine in ("eigh", "eigvalsh"):
        vectors = args.routine == "eigh"
        return jax.jit(
            lambda a, b, t=tile or None: jaxmg.syevd(a, T_A=t, return_eigenvectors=vectors)
        )
    return jax.jit(lambda a, b, t=tile or None: jaxmg.lu_solve(a, b, T_A=t))


rows_out = []
for n in args.sizes:
    A = matrix(n)
    B = np.random.default_rng(n + 1).standard_normal((n, 1))
    if args.routine in ("qr", "eigh"):
        ref = A
    elif args.routine == "eigvalsh":
        ref = np.linalg.eigvalsh(A)
    elif args.routine in ("potri", "inv"):
        ref = np.linalg.inv(A)
    else:
        ref = np.linalg.solve(A, B)
    a, b = jax.device_put(A, grid), jax.device_put(B, rows)
    for tile in args.tiles:
        # One jitted function per variant: each keeps the configuration it was traced with.
        fs = {label: call(tile) for label in VARIANTS}
        # The variants take turns, a call each, so that a drift of the machine's speed falls on
        # both alike.
        best = {label: float("inf") for label in VARIANTS}
        last = {}
        for rep in range(args.reps + 1):  # the first round warms up (compilation)
            for label, choice in VARIANTS.items():
                with jaxmg.config.override(**{SWITCH: choice}):
                    t0 = time.perf_counter()
                    x = fs[label](a, b)
                    jax.block_until_ready(x)
                if rep > 0:
                    best[label] = min(best[label], time.perf_counter() - t0)
                last[label] = x
        for label, choice in VARIANTS.items():
            if args.routine == "qr":  # Q R against A
                q, r = (process_allgather(y, tiled=True) for y in last[label])
                got = q @ r
            elif args.routine == "eigh":  # A V − V diag(w), against 0 (ref - A + got)
                w, v = (np.asarray(process_allgather(y, tiled=True)) for y in last[label])
                got = A - (A @ v - v * w.reshape(-1)[None, :])
            else:
                got = process_allgather(last[label], tiled=True)
            err = float(np.abs(got - ref).max())
            rows_out.append(
                dict(
                    n=n, tile=tile, variant=label, seconds=best[label], max_error=err, choice=choice
                )
            )

if jax.process_index() == 0:
    own_label, lib_label = VARIANTS
    print(
        f"{args.routine} on {procs} CPU processes, mesh {shape[0]}x{shape[1]} ({args.matrix} "
        f"matrices, float64, best of {args.reps})"
    )
    print(f"{'n':>6} {'tile':>5} {own_label:>22} {lib_label:>25} {'speed-up':>9}")
    for n in args.sizes:
        for tile in args.tiles:
            own, lib = (
                next(r["seconds"] for r in rows_out if (r["n"], r["tile"], r["variant"]) == key)
                for key in ((n, tile, own_label), (n, tile, lib_label))
            )
            print(f"{n:>6} {tile or 'auto':>5} {own:>21.3f}s {lib:>24.3f}s {lib / own:>8.2f}x")
    record = dict(
        benchmark="cpu_own",
        routine=args.routine,
        processes=procs,
        mesh=list(shape),
        matrix=args.matrix,
        dtype="float64",
        reps=args.reps,
        machine=dict(
            cpu=platform.processor() or platform.machine(),
            cores=os.cpu_count(),
            host=platform.node(),
        ),
        jax=jax.__version__,
        commit=measured_commit(),
        rows=rows_out,
    )
    with open(args.out, "w") as fh:
        json.dump(record, fh, indent=1)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        plt = None
    if plt is not None:
        fig, ax = plt.subplots(figsize=(6, 4))
        for label in VARIANTS:
            for tile in args.tiles:
                pts = [r for r in rows_out if r["variant"] == label and r["tile"] == tile]
                ax.plot(
                    [r["n"] for r in pts],
                    [r["seconds"] for r in pts],
                    marker="o",
                    linestyle="-" if "jaxmg" in label else "--",
                    label=f"{label}, tile {tile or 'auto'}",
                )
        ax.set_xlabel("n")
        ax.set_ylabel(f"seconds ({args.routine})")
        ax.set_title(f"{args.routine} on {procs} CPU processes, mesh {shape[0]}x{shape[1]}")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.splitext(args.out)[0] + ".png", dpi=120)
    print(f"wrote {args.out}")
