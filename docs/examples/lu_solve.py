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
A = np.random.default_rng(1).standard_normal((n, n))  # general, nonsingular
B = np.ones((n, 2))
a, b = jax.device_put(A, grid), jax.device_put(B, rows)

x, status = jaxmg.lu_solve(a, b, return_status=True)
assert int(status) == 0
assert np.abs(gather(x) - np.linalg.solve(A, B)).max() < 1e-9

# A singular matrix: status k > 0 and NaN on every device; nothing raises inside jit.
s = jax.device_put(np.ones((n, n)), grid)
x, status = jax.jit(lambda a, b: jaxmg.lu_solve(a, b, return_status=True))(s, b)
assert int(status) > 0 and np.isnan(gather(x)).all()
