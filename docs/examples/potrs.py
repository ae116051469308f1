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
G = np.random.default_rng(0).standard_normal((n, n))
A = G @ G.T + n * np.eye(n)  # symmetric positive definite
B = np.ones((n, 3))
a, b = jax.device_put(A, grid), jax.device_put(B, rows)

x, logdet, status = jaxmg.potrs(a, b, return_logdet=True, return_status=True)
assert int(status) == 0 and x.sharding.spec == P("rows", None)  # x's rows lie like b's
assert np.abs(gather(x) - np.linalg.solve(A, B)).max() < 1e-12
assert abs(float(logdet) - np.linalg.slogdet(A)[1]) < 1e-8


def loss(a, b):  # derivatives: jax.grad through the solve and the log-determinant
    x, logdet = jaxmg.potrs(a, b, return_logdet=True)
    return x.sum() + logdet


da, db = jax.grad(loss, argnums=(0, 1))(a, b)
assert da.sharding.spec == a.sharding.spec  # the gradient lies like a
