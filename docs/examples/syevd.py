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
S = np.random.default_rng(9).standard_normal((n, n))
A = (S + S.T) / 2  # symmetric
a = jax.device_put(A, grid)

w, v = jaxmg.syevd(a)  # ascending eigenvalues, the same on every device; vectors like a
V = gather(v)
assert np.abs(np.asarray(w) - np.linalg.eigvalsh(A)).max() < 1e-10
assert np.abs(A @ V - V * np.asarray(w)).max() < 1e-10
w_only = jaxmg.syevd(a, return_eigenvectors=False)
assert np.abs(np.asarray(w_only) - np.asarray(w)).max() < 1e-10
