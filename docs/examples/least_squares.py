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


m, n = 1024, 128
rng = np.random.default_rng(8)
A, B = rng.standard_normal((m, n)), rng.standard_normal((m, 3))

x = jaxmg.least_squares(jax.device_put(A, grid), jax.device_put(B, rows))  # argmin |Ax - b|
assert x.shape == (n, 3)
assert np.abs(gather(x) - np.linalg.lstsq(A, B, rcond=None)[0]).max() < 1e-10
