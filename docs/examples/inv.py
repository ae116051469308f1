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
A = np.random.default_rng(5).standard_normal((n, n)) + n**0.5 * np.eye(n)
a = jax.device_put(A, grid)

a_inv, logdet = jaxmg.inv(a, return_logdet=True)
assert a_inv.sharding == a.sharding
assert np.abs(gather(a_inv) - np.linalg.inv(A)).max() < 1e-10
assert abs(float(logdet) - np.linalg.slogdet(A)[1]) < 1e-8
