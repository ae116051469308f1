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
rng = np.random.default_rng(13)
X, Y = rng.standard_normal((n, n)), rng.standard_normal((n, n))
a, b = jax.device_put(X, grid), jax.device_put(Y, grid)

c = jaxmg.matmul(a, b, adjoint_a=True)  # aᴴ b by the engine's distributed product
assert c.sharding == a.sharding
assert np.abs(gather(c) - X.T @ Y).max() < 1e-10
