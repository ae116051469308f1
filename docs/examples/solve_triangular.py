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
rng = np.random.default_rng(17)
L = np.tril(rng.standard_normal((n, n))) / n**0.5 + 2 * np.eye(n)  # lower triangular
B = rng.standard_normal((n, 4))
a, b = jax.device_put(L + np.triu(np.ones((n, n)), 1), grid), jax.device_put(B, rows)

# L x = b reading a's lower triangle alone (its upper one holds ones), and Lᴴ y = b.
x, status = jaxmg.solve_triangular(a, b, lower=True, return_status=True)
y = jaxmg.solve_triangular(a, b, trans="C", lower=True)
assert int(status) == 0 and x.sharding == b.sharding
assert np.abs(L @ gather(x) - B).max() < 1e-12
assert np.abs(L.conj().T @ gather(y) - B).max() < 1e-12

# A matrix b sharded like a stays so: x is sharded like a too.
C = rng.standard_normal((n, n))
z = jaxmg.solve_triangular(a, jax.device_put(C, grid), lower=True)
assert z.sharding == grid and np.abs(L @ gather(z) - C).max() < 1e-12
