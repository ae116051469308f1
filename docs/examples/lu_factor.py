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
A = np.random.default_rng(3).standard_normal((n, n))
f = jaxmg.lu_factor(jax.device_put(A, grid))  # the factor, pivots, sign, log|det|, status

for k in range(2):
    B = np.full((n, 2), k + 1.0)
    x = jaxmg.lu_solve(f, jax.device_put(B, rows))  # a solve with the kept factor
    assert np.abs(gather(x) - np.linalg.solve(A, B)).max() < 1e-9
sign, logabsdet = np.linalg.slogdet(A)
assert float(f.sign) == sign and abs(float(f.logabsdet) - logabsdet) < 1e-8
