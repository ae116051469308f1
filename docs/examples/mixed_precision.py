import jax
import jax.numpy as jnp
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


def with_condition(n, kappa, seed):  # SPD, singular values log-spaced from 1 to 1 / kappa
    q = np.linalg.qr(np.random.default_rng(seed).standard_normal((n, n)))[0]
    return (q * np.logspace(0, -np.log10(kappa), n)) @ q.T


n = 256
eps = np.finfo(np.float64).eps
A = with_condition(n, 1e3, 1)
A = (A + A.T) / 2
B = np.random.default_rng(2).standard_normal((n, 2))
a, b = jax.device_put(A, grid), jax.device_put(B, rows)

# Factor in float32, refine in float64: a float64 answer.
x, info = jaxmg.potrs(a, b, factor_dtype=jnp.float32, return_info=True)
assert x.dtype == jnp.float64 and info.path_name() == "mixed"
assert float(jnp.max(info.backward_error)) <= max(n / 64, 4) * eps
assert np.abs(gather(x) - np.linalg.solve(A, B)).max() < 1e3 * n * eps * np.abs(B).max()

# Too ill-conditioned for float32 (κ = 1e12): the float64 factorization runs by itself.
H = with_condition(n, 1e12, 3)
H = (H + H.T) / 2
x, status, info = jaxmg.potrs(
    jax.device_put(H, grid), b, factor_dtype="float32", return_status=True, return_info=True
)
assert int(status) == 0 and info.path_name() == "fallback"

# Factor once in float32, solve many in float64 (each solve refines against A).
G = np.random.default_rng(4).standard_normal((n, n)) + np.sqrt(n) * np.eye(n)
factor = jaxmg.lu_factor(jax.device_put(G, grid), factor_dtype=jnp.float32)
assert factor.matrix.dtype == jnp.float32
for seed in (5, 6):
    c = np.random.default_rng(seed).standard_normal((n, 2))
    y = jaxmg.lu_solve(factor, jax.device_put(c, rows))
    assert np.abs(G @ gather(y) - c).max() < n * eps * np.abs(G).sum(axis=1).max() * 10


# Derivatives go through the same mixed solves.
def loss(a, b, factor_dtype):
    return jnp.sum(jaxmg.potrs(a, b, factor_dtype=factor_dtype) ** 2)


grad_mixed = jax.jit(jax.grad(loss), static_argnums=2)(a, b, jnp.float32)
grad_float64 = jax.jit(jax.grad(loss), static_argnums=2)(a, b, None)
assert np.abs(gather(grad_mixed - grad_float64)).max() < 1e-9 * np.abs(gather(grad_float64)).max()
