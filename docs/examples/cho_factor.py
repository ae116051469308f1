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


n = 512
G = np.random.default_rng(2).standard_normal((n, n))
A = G @ G.T + n * np.eye(n)
a = jax.device_put(A, grid)


@jax.jit
def factor(a):
    return jaxmg.cho_factor(a)  # a pytree: return it from one jitted function...


@jax.jit
def solve(f, b):
    return jaxmg.cho_solve(f, b)  # ...and pass it to another: no refactorization


f = factor(a)
for k in range(3):
    B = np.full((n, 4), k + 1.0)
    x = solve(f, jax.device_put(B, rows))
    assert np.abs(gather(x) - np.linalg.solve(A, B)).max() < 1e-12
assert int(f.status) == 0 and abs(float(f.logdet) - np.linalg.slogdet(A)[1]) < 1e-8
