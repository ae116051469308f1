"""`jaxmg.lu_solve_shardmap_ctx` inside your own `jax.jit`, with the matrix's buffer donated.

    python -m jaxmg launch -n 2 examples/run_lu_solve_context_example.py

As examples/run_potrs_context_example.py, for a general matrix: the jit builds A = 2 I + the
upper shift and b = A x for a known x, solves in the same compilation, and a second jit
donates a placed matrix and returns `a_work` (the LU factors' work array, a's shape and
sharding) so that XLA reuses a's buffer. Rank 0 prints the result.
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


def run() -> dict:
    """Both solves; returns {"ok", "error", "donated"}."""
    rows, cols = grid(jax.process_count())
    n = T_A * 4 * rows * cols
    mesh = jax.make_mesh((rows, cols), ("pr", "pc"))
    a_sharding = NamedSharding(mesh, P("pr", "pc"))
    b_sharding = NamedSharding(mesh, P("pr", None))
    x_ref = np.linspace(-1.0, 1.0, n)[:, None]

    @jax.jit
    def build_and_solve():
        a = 2.0 * jnp.eye(n) + jnp.eye(n, k=1)
        b = a @ jnp.asarray(x_ref)
        a = jax.reshard(a, a_sharding)
        b = jax.reshard(b, b_sharding)
        _, x, status = jaxmg.lu_solve_shardmap_ctx(a, b, T_A=T_A)
        return x, status

    with jax.set_mesh(mesh):  # the jit builds arrays on the mesh
        x, status = build_and_solve()
    x_host = np.asarray(multihost_utils.process_allgather(x, tiled=True))
    error = float(np.abs(x_host - x_ref).max())

    @functools.partial(jax.jit, donate_argnums=0)
    def solve(a, b):
        return jaxmg.lu_solve_shardmap_ctx(a, b, T_A=T_A, mesh=mesh, matrix_specs=P("pr", "pc"))

    a_host = 2.0 * np.eye(n) + np.eye(n, k=1)
    a = jax.device_put(a_host, a_sharding)
    a_work, y, status2 = solve(a, jax.device_put(a_host @ x_ref, b_sharding))
    y_host = np.asarray(multihost_utils.process_allgather(y, tiled=True))
    error = max(error, float(np.abs(y_host - x_ref).max()))
    statuses = [int(np.asarray(s.addressable_data(0))) for s in (status, status2)]
    donated = bool(a.is_deleted()) and a_work.shape == (n, n)
    ok = error <= 10 * n * np.finfo(np.float64).eps and donated and statuses == [0, 0]
    return dict(ok=bool(ok), error=error, donated=donated)


def main() -> None:
    jax.distributed.initialize()
    jax.config.update("jax_enable_x64", True)
    result = run()
    if jax.process_index() == 0:
        print("LU context solution correct:", result["ok"], result)


if __name__ == "__main__":
    main()
