"""The polar decomposition A = Up H of a distributed tall matrix with `jaxmg.polar`.

    python -m jaxmg launch -n 2 examples/run_polar_example.py

A = W H for a known W (2N x N, orthonormal columns) and a known symmetric positive-definite H.
Rank 0 prints whether polar recovers both factors.
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
    """Decomposes A; returns {"ok", "up_error", "h_error"}."""
    rows, cols = grid(jax.process_count())
    n = T_A * 2 * rows * cols
    mesh = jax.make_mesh((rows, cols), ("pr", "pc"))
    rng = np.random.default_rng(4)
    w, _ = np.linalg.qr(rng.standard_normal((2 * n, n)))
    v, _ = np.linalg.qr(rng.standard_normal((n, n)))
    h = (v * np.linspace(1.0, 3.0, n)) @ v.T
    a = w @ h
    a_dev = jax.device_put(a, NamedSharding(mesh, P("pr", "pc")))

    up, hp = jaxmg.polar(a_dev, T_A=T_A)

    up, hp = host(up), host(hp)
    up_error = float(np.abs(up - w).max())
    h_error = float(np.abs(hp - h).max() / 3.0)
    ok = max(up_error, h_error) <= 100 * n * np.finfo(np.float64).eps
    return dict(ok=bool(ok), up_error=up_error, h_error=h_error)


def main() -> None:
    jax.distributed.initialize()
    jax.config.update("jax_enable_x64", True)
    result = run()
    if jax.process_index() == 0:
        print("Polar decomposition correct:", result["ok"], result)


if __name__ == "__main__":
    main()
