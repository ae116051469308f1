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
A = np.random.default_rng(12).standard_normal((n, n))

up, h = jaxmg.polar(jax.device_put(A, grid))  # A = Up H, Up orthogonal, H positive semi-definite
Up, H = gather(up), gather(h)
assert np.abs(Up @ H - A).max() < 1e-10
assert np.abs(Up.T @ Up - np.eye(n)).max() < 1e-10
assert np.linalg.eigvalsh((H + H.T) / 2).min() > -1e-10
