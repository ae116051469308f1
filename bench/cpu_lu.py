"""The CPU engine's LU: jaxmg's 1-D LU (csrc/algorithms/lu_1d.h over LAPACK, BLAS and MPI) against
ScaLAPACK's p?getrf, both inside lu_solve, on P processes of one machine (a P x 1 mesh: a 1 x P
engine grid, where the 1-D LU applies).

  python -m jaxmg launch -n 2 bench/cpu_lu.py OUT.json [--sizes 1024 2048] [--tiles 0 64 128]
      [--matrix random|kms] [--reps 3]

Each time is the best of `reps` calls after a warm-up (compilation), with the result ready; both
variants run in the same processes (JAXMG_CPU_LU is read at each call). Process 0 prints a table,
writes the JSON (with the machine, the process count and the commit) and, with matplotlib, a plot
beside it (OUT.png). Tile 0: the engine's automatic tile.
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
p.add_argument("--matrix", choices=("random", "kms"), default="random")
p.add_argument("--reps", type=int, default=3)
args = p.parse_args()

procs = jax.process_count()
mesh = jax.make_mesh((procs, 1), ("rows", "cols"))
jax.set_mesh(mesh)
grid, rows = NamedSharding(mesh, P("rows", "cols")), NamedSharding(mesh, P("rows", None))
VARIANTS = {"jaxmg 1-D LU": "own", "ScaLAPACK p?getrf": "scalapack"}


def matrix(n):
    if args.matrix == "kms":  # Kac-Murdock-Szegő, rho = 0.5 (symmetric positive definite)
        i = np.arange(n)
        return 0.5 ** np.abs(i[:, None] - i[None, :])
    return np.random.default_rng(n).standard_normal((n, n))


rows_out = []
for n in args.sizes:
    A = matrix(n)
    B = np.random.default_rng(n + 1).standard_normal((n, 1))
    ref = np.linalg.solve(A, B)
    a, b = jax.device_put(A, grid), jax.device_put(B, rows)
    for tile in args.tiles:
        f = jax.jit(lambda a, b, t=tile or None: jaxmg.lu_solve(a, b, T_A=t))
        for label, choice in VARIANTS.items():
            os.environ["JAXMG_CPU_LU"] = choice
            f(a, b).block_until_ready()
            best = float("inf")
            for _ in range(args.reps):
                t0 = time.perf_counter()
                x = f(a, b)
                x.block_until_ready()
                best = min(best, time.perf_counter() - t0)
            err = float(np.abs(process_allgather(x, tiled=True) - ref).max())
            rows_out.append(
                dict(n=n, tile=tile, variant=label, seconds=best, max_error=err, choice=choice)
            )
os.environ.pop("JAXMG_CPU_LU", None)

if jax.process_index() == 0:
    print(
        f"lu_solve on {procs} CPU processes ({args.matrix} matrices, float64, best of {args.reps})"
    )
    print(f"{'n':>6} {'tile':>5} {'jaxmg 1-D LU':>13} {'p?getrf':>9} {'speed-up':>9}")
    for n in args.sizes:
        for tile in args.tiles:
            own, lib = (
                next(r["seconds"] for r in rows_out if (r["n"], r["tile"], r["choice"]) == key)
                for key in ((n, tile, "own"), (n, tile, "scalapack"))
            )
            print(f"{n:>6} {tile or 'auto':>5} {own:>12.3f}s {lib:>8.3f}s {lib / own:>8.2f}x")
    record = dict(
        benchmark="cpu_lu",
        processes=procs,
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
        ax.set_ylabel("seconds (lu_solve)")
        ax.set_title(f"lu_solve on {procs} CPU processes")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.splitext(args.out)[0] + ".png", dpi=120)
    print(f"wrote {args.out}")
