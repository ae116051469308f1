import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.multihost_utils import process_allgather
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import jaxmg

jax.distributed.initialize()
jax.config.update("jax_enable_x64", True)
n, d = 2048, 3
points = np.random.default_rng(0).uniform(-1, 1, size=(n, d))  # N x d: small, on every host


# --8<-- [start:kernel]
def place(x, mesh, spec):
    """x laid out as `spec` over `mesh`, inside jit, on either kind of mesh axes."""
    sharding = NamedSharding(mesh, spec)
    if mesh.axis_types[0] == AxisType.Explicit:
        return jax.sharding.reshard(x, sharding)  # (a sharding constraint is an error there)
    return jax.lax.with_sharding_constraint(x, sharding)


def kernel(x, mesh, noise=0.1):
    """K[i, j] = exp(-|x_i - x_j|² / 2) + noise δ_ij, each device computing its own block."""
    rows = place(x, mesh, P("rows", None))  # the points of this device's rows
    cols = place(x, mesh, P("cols", None))  # ... and of its columns
    # |x_i - x_j|² = |x_i|² + |x_j|² - 2 x_i·x_j: (N, N), in blocks
    sq = jnp.sum(rows**2, axis=1)[:, None] + jnp.sum(cols**2, axis=1)[None, :] - 2 * rows @ cols.T
    i = place(jnp.arange(x.shape[0]), mesh, P("rows"))  # global row indices
    j = place(jnp.arange(x.shape[0]), mesh, P("cols"))  # global column indices
    k = jnp.exp(-0.5 * sq) + jnp.where(i[:, None] == j[None, :], noise, 0.0)
    return place(k, mesh, P("rows", "cols"))


# --8<-- [end:kernel]
# --8<-- [start:solve]
def solve(k, y):
    alpha, logdet = jaxmg.potrs(k, y, return_logdet=True)  # alpha lies like y
    factor = jaxmg.cho_factor(k)  # or keep the factor for more solves
    return alpha, logdet, jaxmg.cho_solve(factor, y)


y_host = np.sin(points.sum(axis=1))
for axis_type in (AxisType.Explicit, AxisType.Auto):  # Explicit: jax.make_mesh's default
    mesh = jax.make_mesh((jax.device_count(), 1), ("rows", "cols"), axis_types=(axis_type,) * 2)
    with jax.set_mesh(mesh):
        x = jax.device_put(points, NamedSharding(mesh, P("rows", None)))  # N x d: small
        y = jax.device_put(y_host, NamedSharding(mesh, P("rows")))
        build = jax.jit(kernel, static_argnums=1)
        k = build(x, mesh)
        alpha, logdet, alpha2 = jax.jit(solve)(k, y)
        # --8<-- [end:solve]
        # --8<-- [start:check]
        # Each device holds its block of K, N/P x N, never all of it:
        block = (n // jax.device_count(), n)
        assert all(s.data.shape == block for s in k.addressable_shards)
        # ... and so does the compiled program that builds it: its output on one device is
        # the block, its temporaries less than a tenth of one (float64: 8 bytes an entry).
        memory = build.lower(x, mesh).compile().memory_analysis()
        assert memory.output_size_in_bytes == 8 * block[0] * block[1]
        assert memory.temp_size_in_bytes < 0.1 * memory.output_size_in_bytes
        # Each factorization adds one block a device: the factor, written over a copy of
        # the block (potrs and cho_factor here: two).
        solved = jax.jit(solve).lower(k, y).compile().memory_analysis()
        assert solved.temp_size_in_bytes < 2.01 * memory.output_size_in_bytes
        # --8<-- [end:check]
        if axis_type == AxisType.Explicit:  # the shardings are part of the types
            assert jax.typeof(k).sharding.spec == P("rows", "cols")
        assert alpha.sharding.spec == y.sharding.spec  # alpha lies like y
        K = process_allgather(k, tiled=True)  # (for this check only: the whole matrix)
        want = np.linalg.solve(K, y_host)
        tol = 10 * n * np.finfo(np.float64).eps * np.linalg.cond(K)
        for got in (alpha, alpha2):
            error = np.abs(process_allgather(got, tiled=True) - want).max()
            assert error <= tol * np.abs(want).max(), error
        assert abs(float(logdet) - np.linalg.slogdet(K)[1]) <= tol * abs(float(logdet))
        if axis_type == AxisType.Explicit:  # the shardings are part of the types
            assert jax.typeof(k).sharding.spec == P("rows", "cols")
        assert alpha.sharding.spec == y.sharding.spec
        K = process_allgather(k, tiled=True)  # (for this check only: the whole matrix)
        want = np.linalg.solve(K, y_host)
        tol = 10 * n * np.finfo(np.float64).eps * np.linalg.cond(K)
        for got in (alpha, alpha2):
            assert (
                np.abs(process_allgather(got, tiled=True) - want).max() <= tol * np.abs(want).max()
            )
        assert abs(float(logdet) - np.linalg.slogdet(K)[1]) <= tol * abs(float(logdet))
