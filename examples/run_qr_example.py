"""The reduced QR factorization of a distributed tall matrix with `jaxmg.qr`.

    python -m jaxmg launch -n 2 examples/run_qr_example.py

A is a fixed Gaussian 2N x N matrix (the same on every process), sharded over a (rows x cols)
mesh. Rank 0 prints whether Q R = A, Q has orthonormal columns and R is upper triangular.
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
    """Factors A; returns {"ok", "residual", "orthogonality"}."""
    rows, cols = grid(jax.process_count())
    n = T_A * 2 * rows * cols
    mesh = jax.make_mesh((rows, cols), ("pr", "pc"))
    a = np.random.default_rng(0).standard_normal((2 * n, n))
    a_dev = jax.device_put(a, NamedSharding(mesh, P("pr", "pc")))

    q, r = jaxmg.qr(a_dev, T_A=T_A)

    q_host, r_host = (np.asarray(multihost_utils.process_allgather(x, tiled=True)) for x in (q, r))
    residual = float(np.linalg.norm(q_host @ r_host - a) / np.linalg.norm(a))
    orthogonality = float(np.abs(q_host.T @ q_host - np.eye(n)).max())
    upper = bool(np.all(np.tril(r_host, -1) == 0))
    tol = 10 * n * np.finfo(np.float64).eps
    ok = residual <= tol and orthogonality <= tol and upper
    return dict(ok=bool(ok), residual=residual, orthogonality=orthogonality)


def main() -> None:
    jax.distributed.initialize()
    jax.config.update("jax_enable_x64", True)
    result = run()
    if jax.process_index() == 0:
        print("QR decomposition correct:", result["ok"], result)


if __name__ == "__main__":
    main()
