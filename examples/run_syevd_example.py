"""Eigenvalues and eigenvectors of a distributed symmetric matrix with `jaxmg.syevd`.

    python -m jaxmg launch -n 2 examples/run_syevd_example.py

A = tridiag(-1, 2, -1) (the 1-D discrete Laplacian), whose eigenvalues are known:
2 - 2 cos(k pi / (N + 1)), k = 1..N. Rank 0 prints whether syevd finds them and whether the
eigenvectors satisfy A V = V diag(w) with orthonormal columns.
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
    """Decomposes A; returns {"ok", "value_error", "residual", "orthogonality"}."""
    rows, cols = grid(jax.process_count())
    n = T_A * 4 * rows * cols
    mesh = jax.make_mesh((rows, cols), ("pr", "pc"))
    a = 2.0 * np.eye(n) - np.eye(n, k=1) - np.eye(n, k=-1)
    a_dev = jax.device_put(a, NamedSharding(mesh, P("pr", "pc")))

    w, v = jaxmg.syevd(a_dev, T_A=T_A)

    w_ref = 2.0 - 2.0 * np.cos(np.arange(1, n + 1) * np.pi / (n + 1))
    w_host = np.asarray(multihost_utils.process_allgather(w, tiled=True))
    v_host = np.asarray(multihost_utils.process_allgather(v, tiled=True))
    value_error = float(np.abs(w_host - w_ref).max())
    residual = float(np.abs(a @ v_host - v_host * w_host).max())
    orthogonality = float(np.abs(v_host.T @ v_host - np.eye(n)).max())
    tol = 10 * n * np.finfo(np.float64).eps
    ok = max(value_error, residual, orthogonality) <= tol
    return dict(
        ok=bool(ok), value_error=value_error, residual=residual, orthogonality=orthogonality
    )


def main() -> None:
    jax.distributed.initialize()
    jax.config.update("jax_enable_x64", True)
    result = run()
    if jax.process_index() == 0:
        print("SYEVD eigenvalues correct:", result["ok"], result)


if __name__ == "__main__":
    main()
