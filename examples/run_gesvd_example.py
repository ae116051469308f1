"""The singular value decomposition of a distributed tall matrix with `jaxmg.gesvd`.

    python -m jaxmg launch -n 2 examples/run_gesvd_example.py

A = W diag(s) V^T for orthonormal W (2N x N), V (N x N) and known singular values s = linspace(2,
1, N). Rank 0 prints whether gesvd finds s, and whether U diag(s) Vh = A for the reduced and the
full (full_matrices=True: U is 2N x 2N, its last N columns completing the basis) decompositions.
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


def host(x):
    return np.asarray(multihost_utils.process_allgather(x, tiled=True))


def run() -> dict:
    """Decomposes A twice; returns {"ok", "value_error", "residual", "orthogonality"}."""
    rows, cols = grid(jax.process_count())
    n = T_A * 2 * rows * cols
    m = 2 * n
    mesh = jax.make_mesh((rows, cols), ("pr", "pc"))
    rng = np.random.default_rng(3)
    w, _ = np.linalg.qr(rng.standard_normal((m, n)))
    v, _ = np.linalg.qr(rng.standard_normal((n, n)))
    s_ref = np.linspace(2.0, 1.0, n)
    a = (w * s_ref) @ v.T
    a_dev = jax.device_put(a, NamedSharding(mesh, P("pr", "pc")))

    u, s, vh = jaxmg.gesvd(a_dev, T_A=T_A)
    uf, sf, vhf = jaxmg.gesvd(a_dev, T_A=T_A, full_matrices=True)

    u, s, vh, uf, sf, vhf = (host(x) for x in (u, s, vh, uf, sf, vhf))
    value_error = float(max(np.abs(s - s_ref).max(), np.abs(sf - s_ref).max()))
    residual = float(max(np.abs((u * s) @ vh - a).max(), np.abs((uf[:, :n] * sf) @ vhf - a).max()))
    orthogonality = float(np.abs(uf.T @ uf - np.eye(m)).max())
    tol = 10 * m * np.finfo(np.float64).eps
    ok = max(value_error, residual, orthogonality) <= tol and uf.shape == (m, m)
    return dict(
        ok=bool(ok), value_error=value_error, residual=residual, orthogonality=orthogonality
    )


def main() -> None:
    jax.distributed.initialize()
    jax.config.update("jax_enable_x64", True)
    result = run()
    if jax.process_index() == 0:
        print("GESVD decomposition correct:", result["ok"], result)


if __name__ == "__main__":
    main()
