"""`jaxmg.potrs_shardmap_ctx` inside your own `jax.jit`, with the matrix's buffer donated.

    python -m jaxmg launch -n 2 examples/run_potrs_context_example.py

The context form takes the global sharded arrays inside the caller's jit (it adds no jit of
its own) and returns the work array `a_work` with the results: a jit that donates `a` and
returns `a_work` lets XLA reuse a's buffer for it, so the solve needs no second copy of the
matrix. Here the matrix is built and solved in one compilation, then a second jitted solve
donates a matrix placed by the caller (`a.is_deleted()` afterwards). Rank 0 prints the result.
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
    b_sharding = NamedSharding(mesh, P("pr"))

    @jax.jit
    def build_and_solve():
        a = jax.reshard(jnp.diag(jnp.arange(1.0, n + 1)), a_sharding)
        b = jax.reshard(jnp.ones((n,)), b_sharding)
        _, x, status = jaxmg.potrs_shardmap_ctx(a, b, T_A=T_A)
        return x, status

    with jax.set_mesh(mesh):  # the jit builds arrays on the mesh
        x, status = build_and_solve()
    x_ref = 1.0 / np.arange(1.0, n + 1)
    error = float(
        np.abs(np.asarray(multihost_utils.process_allgather(x, tiled=True)) - x_ref).max()
    )

    # Donation: the caller's jit donates a and returns a_work (a's shape and sharding).
    @functools.partial(jax.jit, donate_argnums=0)
    def solve(a, b):
        return jaxmg.potrs_shardmap_ctx(a, b, T_A=T_A, mesh=mesh, matrix_specs=P("pr", "pc"))

    a = jax.device_put(np.diag(np.arange(1.0, n + 1)), a_sharding)
    a_work, y, status2 = solve(a, jax.device_put(np.ones(n), b_sharding))
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
        print("POTRS context solution correct:", result["ok"], result)


if __name__ == "__main__":
    main()
