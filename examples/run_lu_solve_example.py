"""Solve a distributed general (non-symmetric) system with `jaxmg.lu_solve`.

    python -m jaxmg launch -n 2 examples/run_lu_solve_example.py

A = 2 I + the strictly upper shift with entries 1 (upper bidiagonal, not symmetric), sharded
over a (rows x cols) mesh of every process's device, and b = A x for a known x with two
columns. Rank 0 prints whether pivoted LU recovers x.
"""

from __future__ import annotations

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import jaxmg

T_A = 8


def grid(processes: int) -> tuple[int, int]:
    """A (rows, cols) process grid: two columns when the count is even, else one."""
    cols = 2 if processes % 2 == 0 else 1
    return processes // cols, cols


def run() -> dict:
    """Builds the system, solves it and returns {"ok", "error"}."""
    rows, cols = grid(jax.process_count())
    n = T_A * 4 * rows * cols
    mesh = jax.make_mesh((rows, cols), ("pr", "pc"))
    a = 2.0 * np.eye(n) + np.eye(n, k=1)
    x_ref = np.stack([np.linspace(-1.0, 1.0, n), np.cos(np.arange(n))], axis=1)
    b = a @ x_ref
    a_dev = jax.device_put(a, NamedSharding(mesh, P("pr", "pc")))
    b_dev = jax.device_put(b, NamedSharding(mesh, P("pr", None)))

    x, status = jaxmg.lu_solve(a_dev, b_dev, T_A=T_A, return_status=True)

    x_host = np.asarray(multihost_utils.process_allgather(x, tiled=True))
    error = float(np.abs(x_host - x_ref).max())
    ok = (
        error <= 10 * n * np.finfo(np.float64).eps
        and int(np.asarray(status.addressable_data(0))) == 0
    )
    return dict(ok=bool(ok), error=error)


def main() -> None:
    jax.distributed.initialize()
    jax.config.update("jax_enable_x64", True)
    result = run()
    if jax.process_index() == 0:
        print("LU solution correct:", result["ok"], result)


if __name__ == "__main__":
    main()
