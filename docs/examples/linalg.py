import jax
import numpy as np
from jax.experimental.multihost_utils import process_allgather
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from jaxmg import linalg  # the names of jnp.linalg and jax.scipy.linalg

jax.distributed.initialize()
jax.config.update("jax_enable_x64", True)
mesh = jax.make_mesh((jax.device_count(), 1), ("rows", "cols"))
jax.set_mesh(mesh)
grid, rows = NamedSharding(mesh, P("rows", "cols")), NamedSharding(mesh, P("rows", None))


def gather(x):  # the whole array, as NumPy, on every process
    return process_allgather(x, tiled=True)


n = 256
G = np.random.default_rng(15).standard_normal((n, n))
A = G @ G.T + n * np.eye(n)
a, b = jax.device_put(A, grid), jax.device_put(np.ones((n,)), NamedSharding(mesh, P("rows")))

x = linalg.solve(a, b)
sign, logabsdet = linalg.slogdet(a)  # a named tuple, as jnp.linalg.slogdet's
w, v = linalg.eigh(a)
c = linalg.cho_factor(a)  # SciPy's (c, lower) shape
y = linalg.cho_solve(c, b)
assert np.abs(gather(x) - np.linalg.solve(A, np.ones(n))).max() < 1e-12
assert np.abs(gather(y) - gather(x)).max() < 1e-12 and float(sign) == 1.0

# The names over the singular values and the Cholesky factor, and a tall matrix's SVD.
L = linalg.cholesky(a)  # lower, in a's own order
assert np.abs(gather(L) - np.linalg.cholesky(A)).max() < 1e-9
assert abs(float(linalg.det(a / n)) - np.linalg.det(A / n)) < 1e-8 * abs(np.linalg.det(A / n))
assert abs(float(linalg.cond(a)) - np.linalg.cond(A)) < 1e-8 * np.linalg.cond(A)
assert int(linalg.matrix_rank(a)) == n
T = G[:, : n // 4]  # tall: 256 x 64
t = jax.device_put(T, grid)
U, S, Vh = linalg.svd(t, full_matrices=False)  # U is 256 x 64 (True: 256 x 256)
assert U.shape == (n, n // 4) and np.abs(gather(U).T @ gather(U) - np.eye(n // 4)).max() < 1e-10
assert np.abs((gather(U) * gather(S)) @ gather(Vh) - T).max() < 1e-10
assert np.abs(gather(linalg.pinv(t)) - np.linalg.pinv(T)).max() < 1e-10
assert np.abs(gather(linalg.matrix_power(a / n, 3)) - np.linalg.matrix_power(A / n, 3)).max() < 1e-9
