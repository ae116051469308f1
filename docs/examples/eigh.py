import jax
import numpy as np
from jax.experimental.multihost_utils import process_allgather
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import jaxmg

jax.distributed.initialize()
jax.config.update("jax_enable_x64", True)
mesh = jax.make_mesh((jax.device_count(), 1), ("rows", "cols"))
jax.set_mesh(mesh)
grid, rows = NamedSharding(mesh, P("rows", "cols")), NamedSharding(mesh, P("rows", None))


def gather(x):  # the whole array, as NumPy, on every process
    return process_allgather(x, tiled=True)


n = 256
rng = np.random.default_rng(10)
S, G = rng.standard_normal((n, n)), rng.standard_normal((n, n))
A = (S + S.T) / 2  # symmetric
B = G @ G.T + n * np.eye(n)  # symmetric positive definite

w, v = jaxmg.eigh(jax.device_put(A, grid), jax.device_put(B, grid))  # A v = λ B v
V, w = gather(v), np.asarray(w)
assert np.abs(A @ V - (B @ V) * w).max() < 1e-9
assert np.abs(V.T @ B @ V - np.eye(n)).max() < 1e-9
