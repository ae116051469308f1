"""Solve a distributed symmetric positive-definite system with `jaxmg.potrs`.

    python -m jaxmg launch -n 2 examples/run_potrs_example.py

A = diag(1, ..., N) + 1/(N + 1) (ones ones^T), sharded over a (rows x cols) mesh of every
process's device, and b = ones: the solution and log det A are known in closed form
(Sherman-Morrison and the matrix determinant lemma). Rank 0 prints whether they match.
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
    """Builds the system, solves it and returns {"ok", "error", "logdet_error"}."""
    rows, cols = grid(jax.process_count())
    n = T_A * 4 * rows * cols
    mesh = jax.make_mesh((rows, cols), ("pr", "pc"))
    d = np.arange(1, n + 1, dtype=np.float64)
    c = 1.0 / (n + 1)
    a = np.diag(d) + c
    b = np.ones((n, 1))
    a_dev = jax.device_put(a, NamedSharding(mesh, P("pr", "pc")))
    b_dev = jax.device_put(b, NamedSharding(mesh, P("pr", None)))

    x, logdet = jaxmg.potrs(a_dev, b_dev, T_A=T_A, return_logdet=True)

    # (D + c 1 1^T)^-1 1 = D^-1 1 / (1 + c 1^T D^-1 1); det = det D (1 + c 1^T D^-1 1)
    s = 1.0 + c * np.sum(1.0 / d)
    x_ref = (1.0 / d / s)[:, None]
    logdet_ref = np.sum(np.log(d)) + np.log(s)
    x_host = np.asarray(multihost_utils.process_allgather(x, tiled=True))
    error = float(np.abs(x_host - x_ref).max() / np.abs(x_ref).max())
    logdet_error = abs(float(np.asarray(logdet.addressable_data(0))) - logdet_ref)
    tol = 100 * n * np.finfo(np.float64).eps
    ok = error <= tol and logdet_error <= tol * max(1.0, abs(logdet_ref))
    return dict(ok=bool(ok), error=error, logdet_error=logdet_error)


def main() -> None:
    jax.distributed.initialize()
    jax.config.update("jax_enable_x64", True)
    result = run()
    if jax.process_index() == 0:
        print("POTRS solution correct:", result["ok"], result)


if __name__ == "__main__":
    main()
