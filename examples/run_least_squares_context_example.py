"""`jaxmg.least_squares_shardmap_ctx` inside your own `jax.jit`, with a and b donated.

    python -m jaxmg launch -n 2 examples/run_least_squares_context_example.py

The context form returns (a_work, b_work, x, status): a_work has a's shape and sharding and
b_work b's (its first N rows are x), so a jit donating both lets XLA reuse their buffers.
Rank 0 prints whether x matches NumPy's least-squares solution and the buffers were donated.
"""

from __future__ import annotations

import functools

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
    """Solves the system; returns {"ok", "error", "donated"}."""
    rows, cols = grid(jax.process_count())
    n = T_A * 2 * rows * cols
    mesh = jax.make_mesh((rows, cols), ("pr", "pc"))
    rng = np.random.default_rng(2)
    a = rng.standard_normal((2 * n, n))
    b = rng.standard_normal((2 * n, 1))
    x_ref = np.linalg.lstsq(a, b, rcond=None)[0]

    @functools.partial(jax.jit, donate_argnums=(0, 1))
    def solve(a, b):
        return jaxmg.least_squares_shardmap_ctx(a, b, T_A=T_A)

    a_dev = jax.device_put(a, NamedSharding(mesh, P("pr", "pc")))
    b_dev = jax.device_put(b, NamedSharding(mesh, P("pr", None)))
    with jax.set_mesh(mesh):
        a_work, b_work, x, status = solve(a_dev, b_dev)
    x_host, b_work_host = (
        np.asarray(multihost_utils.process_allgather(m, tiled=True)) for m in (x, b_work)
    )
    error = float(np.abs(x_host - x_ref).max() / np.abs(x_ref).max())
    error = max(error, float(np.abs(b_work_host[:n] - x_ref).max() / np.abs(x_ref).max()))
    donated = bool(a_dev.is_deleted()) and a_work.shape == a.shape and b_work.shape == b.shape
    ok = (
        error <= 100 * n * np.finfo(np.float64).eps
        and donated
        and int(np.asarray(status.addressable_data(0))) == 0
    )
    return dict(ok=bool(ok), error=error, donated=donated)


def main() -> None:
    jax.distributed.initialize()
    jax.config.update("jax_enable_x64", True)
    result = run()
    if jax.process_index() == 0:
        print("Least-squares context solution correct:", result["ok"], result)


if __name__ == "__main__":
    main()
