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


m, n = 1024, 256  # tall: M >= N
A = np.random.default_rng(7).standard_normal((m, n))
q, r = jaxmg.qr(jax.device_put(A, grid))  # Q: M x N in a's sharding; R: N x N upper triangular

Q, R = gather(q), gather(r)
assert np.abs(Q @ R - A).max() < 1e-12
assert np.abs(Q.T @ Q - np.eye(n)).max() < 1e-12
assert (np.tril(R, -1) == 0).all()
