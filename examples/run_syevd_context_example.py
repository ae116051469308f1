"""`jaxmg.syevd_shardmap_ctx` inside your own `jax.jit`, with the matrix's buffer donated.

    python -m jaxmg launch -n 2 examples/run_syevd_context_example.py

The jit builds A = tridiag(-1, 2, -1) where it lies and decomposes it in the same
compilation; a second jit donates a placed matrix and returns `a_work` (the work array, which
holds the eigenvectors: a's shape and sharding), so that XLA reuses a's buffer. The
eigenvalues 2 - 2 cos(k pi / (N + 1)) are known. Rank 0 prints the result.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
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


def laplacian(xp, n):
    return 2.0 * xp.eye(n) - xp.eye(n, k=1) - xp.eye(n, k=-1)


def run() -> dict:
    """Both decompositions; returns {"ok", "value_error", "residual", "donated"}."""
    rows, cols = grid(jax.process_count())
    n = T_A * 4 * rows * cols
    mesh = jax.make_mesh((rows, cols), ("pr", "pc"))
    sharding = NamedSharding(mesh, P("pr", "pc"))
    w_ref = 2.0 - 2.0 * np.cos(np.arange(1, n + 1) * np.pi / (n + 1))

    @jax.jit
    def build_and_decompose():
        a = jax.reshard(laplacian(jnp, n), sharding)
        _, w, v, status = jaxmg.syevd_shardmap_ctx(a, T_A=T_A)
        return w, v, status

    with jax.set_mesh(mesh):  # the jit builds arrays on the mesh
        w, v, status = build_and_decompose()

    @functools.partial(jax.jit, donate_argnums=0)
    def values_only(a):
        return jaxmg.syevd_shardmap_ctx(a, T_A=T_A, return_eigenvectors=False)

    a = jax.device_put(laplacian(np, n), sharding)
    a_work, w2, status2 = values_only(a)
    w_host, w2_host, v_host = (
        np.asarray(multihost_utils.process_allgather(x, tiled=True)) for x in (w, w2, v)
    )
    value_error = float(max(np.abs(w_host - w_ref).max(), np.abs(w2_host - w_ref).max()))
    residual = float(np.abs(laplacian(np, n) @ v_host - v_host * w_host).max())
    statuses = [int(np.asarray(s.addressable_data(0))) for s in (status, status2)]
    donated = bool(a.is_deleted()) and a_work.shape == (n, n)
    tol = 10 * n * np.finfo(np.float64).eps
    ok = max(value_error, residual) <= tol and donated and statuses == [0, 0]
    return dict(ok=bool(ok), value_error=value_error, residual=residual, donated=donated)


def main() -> None:
    jax.distributed.initialize()
    jax.config.update("jax_enable_x64", True)
    result = run()
    if jax.process_index() == 0:
        print("SYEVD context decomposition correct:", result["ok"], result)


if __name__ == "__main__":
    main()
