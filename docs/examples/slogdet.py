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
A = np.random.default_rng(6).standard_normal((n, n))
a = jax.device_put(A, grid)

sign, logabsdet = jaxmg.slogdet(a)  # as jnp.linalg.slogdet
ref_sign, ref_logabsdet = np.linalg.slogdet(A)
assert float(sign) == ref_sign and abs(float(logabsdet) - ref_logabsdet) < 1e-8

g = jax.grad(lambda a: jaxmg.slogdet(a)[1])(a)  # d log|det A| / dA = A⁻ᵀ, in a's sharding
assert np.abs(gather(g) - np.linalg.inv(A).T).max() < 1e-10
