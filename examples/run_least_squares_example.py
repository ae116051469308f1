"""The least-squares solution of a distributed tall system with `jaxmg.least_squares`.

    python -m jaxmg launch -n 2 examples/run_least_squares_example.py

A is a fixed Gaussian 2N x N matrix and b = A x + r with r orthogonal to A's columns, so x is
the known minimizer of |A x - b|. Rank 0 prints whether jaxmg recovers it (its sharding is b's).
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
    """Solves the system; returns {"ok", "error"}."""
    rows, cols = grid(jax.process_count())
    n = T_A * 2 * rows * cols
    mesh = jax.make_mesh((rows, cols), ("pr", "pc"))
    rng = np.random.default_rng(1)
    a = rng.standard_normal((2 * n, n))
    x_ref = rng.standard_normal((n, 2))
    noise = rng.standard_normal((2 * n, 2))
    q, _ = np.linalg.qr(a)
    b = a @ x_ref + (noise - q @ (q.T @ noise))  # the residual is orthogonal to range(A)
    a_dev = jax.device_put(a, NamedSharding(mesh, P("pr", "pc")))
    b_dev = jax.device_put(b, NamedSharding(mesh, P("pr", None)))

    x = jaxmg.least_squares(a_dev, b_dev, T_A=T_A)

    x_host = np.asarray(multihost_utils.process_allgather(x, tiled=True))
    error = float(np.abs(x_host - x_ref).max() / np.abs(x_ref).max())
    ok = error <= 100 * n * np.finfo(np.float64).eps and x.sharding.spec == P("pr", None)
    return dict(ok=bool(ok), error=error)


def main() -> None:
    jax.distributed.initialize()
    jax.config.update("jax_enable_x64", True)
    result = run()
    if jax.process_index() == 0:
        print("Least-squares solution correct:", result["ok"], result)


if __name__ == "__main__":
    main()
