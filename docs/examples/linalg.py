import jax
import numpy as np
from jax.experimental.multihost_utils import process_allgather
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from jaxmg import linalg  # the names of jnp.linalg and jax.scipy.linalg

jax.distributed.initialize()
jax.config.update("jax_enable_x64", True)
mesh = jax.make_mesh((jax.device_count(), 1), ("rows", "cols"))
jax.set_mesh(mesh)
grid, rows = NamedSharding(mesh, P("rows", "cols")), NamedSharding(mesh, P("rows", None))


def gather(x):  # the whole array, as NumPy, on every process
    return process_allgather(x, tiled=True)


n = 256
G = np.random.default_rng(15).standard_normal((n, n))
A = G @ G.T + n * np.eye(n)
a, b = jax.device_put(A, grid), jax.device_put(np.ones((n,)), NamedSharding(mesh, P("rows")))

x = linalg.solve(a, b)
sign, logabsdet = linalg.slogdet(a)  # a named tuple, as jnp.linalg.slogdet's
w, v = linalg.eigh(a)
c = linalg.cho_factor(a)  # SciPy's (c, lower) shape
y = linalg.cho_solve(c, b)
assert np.abs(gather(x) - np.linalg.solve(A, np.ones(n))).max() < 1e-12
assert np.abs(gather(y) - gather(x)).max() < 1e-12 and float(sign) == 1.0
