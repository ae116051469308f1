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


m, n = 512, 256
A = np.random.default_rng(11).standard_normal((m, n))
a = jax.device_put(A, grid)

u, s, vh = jaxmg.gesvd(a)  # K = min(M, N); s descending, the same on every device
s = np.asarray(s)
assert np.abs(s - np.linalg.svd(A, compute_uv=False)).max() < 1e-10
assert np.abs((gather(u) * s) @ gather(vh) - A).max() < 1e-10
s_only = jaxmg.gesvd(a, compute_u=False, compute_vh=False)  # the values alone: faster
assert np.abs(np.asarray(s_only) - s).max() < 1e-10
