"""`jaxmg.qr_shardmap_ctx` inside your own `jax.jit`, with the matrix's buffer donated.

    python -m jaxmg launch -n 2 examples/run_qr_context_example.py

The context form of QR returns (Q, R, status). On Auto mesh axes Q has a's shape and
sharding, so a jit that donates a lets XLA reuse a's buffer for Q; on Explicit axes
(jax.make_mesh's default) Q and R come back replicated, so that JAX's operators apply to them
(Qᴴ Q, diag(R)). Here a jit draws a Gaussian 2N x N matrix where it lies, on Explicit axes,
and factors it in the same compilation; a second jit donates a placed matrix on Auto axes
over the same devices. Rank 0 prints whether Q R = A with orthonormal Q in both.
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
    """Both factorizations; returns {"ok", "residual", "orthogonality", "donated"}."""
    rows, cols = grid(jax.process_count())
    n = T_A * 2 * rows * cols
    mesh = jax.make_mesh((rows, cols), ("pr", "pc"))
    sharding = NamedSharding(mesh, P("pr", "pc"))

    @jax.jit
    def build_and_factor(key):
        a = jax.reshard(jax.random.normal(key, (2 * n, n)), sharding)
        q, r, status = jaxmg.qr_shardmap_ctx(a, T_A=T_A)
        return a, q, r, status

    with jax.set_mesh(mesh):
        a, q, r, status = build_and_factor(jax.random.key(0))
    a_host = host(a)

    # Auto axes: Q keeps a's sharding, so XLA reuses the donated buffer for it.
    auto = jax.make_mesh((rows, cols), ("pr", "pc"), axis_types=(AxisType.Auto,) * 2)

    @functools.partial(jax.jit, donate_argnums=0)
    def factor(a):
        return jaxmg.qr_shardmap_ctx(a, T_A=T_A, mesh=auto, matrix_specs=P("pr", "pc"))

    placed = jax.device_put(a_host, NamedSharding(auto, P("pr", "pc")))
    q2, r2, status2 = factor(placed)
    residual = orthogonality = 0.0
    for qq, rr in ((q, r), (q2, r2)):
        q_host, r_host = host(qq), host(rr)
        residual = max(residual, float(np.linalg.norm(q_host @ r_host - a_host)))
        orthogonality = max(orthogonality, float(np.abs(q_host.T @ q_host - np.eye(n)).max()))
    residual /= float(np.linalg.norm(a_host))
    statuses = [int(np.asarray(s.addressable_data(0))) for s in (status, status2)]
    donated = bool(placed.is_deleted())
    tol = 10 * n * np.finfo(np.float64).eps
    ok = max(residual, orthogonality) <= tol and donated and statuses == [0, 0]
    return dict(ok=bool(ok), residual=residual, orthogonality=orthogonality, donated=donated)


def main() -> None:
    jax.distributed.initialize()
    jax.config.update("jax_enable_x64", True)
    result = run()
    if jax.process_index() == 0:
        print("QR context decomposition correct:", result["ok"], result)


if __name__ == "__main__":
    main()
