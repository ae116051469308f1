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
G = np.random.default_rng(4).standard_normal((n, n))
A = G @ G.T + n * np.eye(n)
a = jax.device_put(A, grid)

a_inv, status = jaxmg.potri(a, return_status=True)
assert int(status) == 0 and a_inv.sharding == a.sharding  # the inverse lies like a
assert np.abs(gather(a_inv) - np.linalg.inv(A)).max() < 1e-12
