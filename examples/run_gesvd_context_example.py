"""`jaxmg.gesvd_shardmap_ctx` inside your own `jax.jit`, with the matrix's buffer donated.

    python -m jaxmg launch -n 2 examples/run_gesvd_context_example.py

The jit builds a 2N x N matrix with known singular values linspace(2, 1, N) on its diagonal
and decomposes it in the same compilation (the work array `a_work`, first of the outputs,
stays inside); a second jit donates a placed matrix and returns `a_work` (a's shape and
sharding) with U and s. Rank 0 prints the result.
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


def host(x):
    return np.asarray(multihost_utils.process_allgather(x, tiled=True))


def run() -> dict:
    """Both decompositions; returns {"ok", "value_error", "residual", "donated"}."""
    rows, cols = grid(jax.process_count())
    n = T_A * 2 * rows * cols
    m = 2 * n
    mesh = jax.make_mesh((rows, cols), ("pr", "pc"))
    sharding = NamedSharding(mesh, P("pr", "pc"))
    s_ref = np.linspace(2.0, 1.0, n)

    def diagonal(xp):
        return xp.zeros((m, n)).at[xp.arange(n), xp.arange(n)].set(s_ref)

    @jax.jit
    def build_and_decompose():
        a = jax.reshard(diagonal(jnp), sharding)
        _, u, s, vh, status = jaxmg.gesvd_shardmap_ctx(a, T_A=T_A)
        return u, s, vh, status

    with jax.set_mesh(mesh):
        u, s, vh, status = build_and_decompose()

    @functools.partial(jax.jit, donate_argnums=0)
    def decompose(a):
        return jaxmg.gesvd_shardmap_ctx(a, T_A=T_A, mesh=mesh, compute_vh=False)

    a_host = np.asarray(diagonal(jnp))
    placed = jax.device_put(a_host, sharding)
    a_work, u2, s2, status2 = decompose(placed)
    u, s, vh, u2, s2 = (host(x) for x in (u, s, vh, u2, s2))
    value_error = float(max(np.abs(s - s_ref).max(), np.abs(s2 - s_ref).max()))
    residual = float(np.abs((u * s) @ vh - a_host).max())
    statuses = [int(np.asarray(x.addressable_data(0))) for x in (status, status2)]
    donated = bool(placed.is_deleted()) and a_work.shape == (m, n) and u2.shape == (m, n)
    tol = 10 * m * np.finfo(np.float64).eps
    ok = max(value_error, residual) <= tol and donated and statuses == [0, 0]
    return dict(ok=bool(ok), value_error=value_error, residual=residual, donated=donated)


def main() -> None:
    jax.distributed.initialize()
    jax.config.update("jax_enable_x64", True)
    result = run()
    if jax.process_index() == 0:
        print("GESVD context decomposition correct:", result["ok"], result)


if __name__ == "__main__":
    main()
