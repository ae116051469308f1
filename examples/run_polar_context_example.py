"""`jaxmg.polar_shardmap_ctx` inside your own `jax.jit`, with the matrix's buffer donated.

    python -m jaxmg launch -n 2 examples/run_polar_context_example.py

The context form of the polar decomposition returns (Up, H, status). On Auto mesh axes, used
here, Up has a's shape and sharding, so a jit that donates a lets XLA reuse a's buffer for Up;
on Explicit axes (jax.make_mesh's default) Up and H come back replicated, so that JAX's
operators apply to them (Upᴴ Up, diag(H)). Here a jit scales the matrix and decomposes it in
the same compilation, donating the caller's array. Rank 0 prints whether Up H = A with
orthonormal Up and symmetric H.
"""

from __future__ import annotations

import functools

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import AxisType, NamedSharding
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
    """Decomposes 2 A; returns {"ok", "residual", "orthogonality", "donated"}."""
    rows, cols = grid(jax.process_count())
    n = T_A * 2 * rows * cols
    mesh = jax.make_mesh((rows, cols), ("pr", "pc"), axis_types=(AxisType.Auto,) * 2)
    a = np.random.default_rng(5).standard_normal((2 * n, n))

    @functools.partial(jax.jit, donate_argnums=0)
    def scale_and_decompose(a):
        return jaxmg.polar_shardmap_ctx(2.0 * a, T_A=T_A, mesh=mesh, matrix_specs=P("pr", "pc"))

    placed = jax.device_put(a, NamedSharding(mesh, P("pr", "pc")))
    up, h, status = scale_and_decompose(placed)
    up, h = host(up), host(h)
    residual = float(np.linalg.norm(up @ h - 2.0 * a) / np.linalg.norm(2.0 * a))
    orthogonality = float(np.abs(up.T @ up - np.eye(n)).max())
    symmetry = float(np.abs(h - h.T).max() / np.abs(h).max())
    donated = bool(placed.is_deleted())
    tol = 100 * n * np.finfo(np.float64).eps
    ok = (
        max(residual, orthogonality, symmetry) <= tol
        and donated
        and int(np.asarray(status.addressable_data(0))) == 0
    )
    return dict(ok=bool(ok), residual=residual, orthogonality=orthogonality, donated=donated)


def main() -> None:
    jax.distributed.initialize()
    jax.config.update("jax_enable_x64", True)
    result = run()
    if jax.process_index() == 0:
        print("Polar context decomposition correct:", result["ok"], result)


if __name__ == "__main__":
    main()
