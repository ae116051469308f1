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
G = np.random.default_rng(14).standard_normal((n, n))
A = G @ G.T + n * np.eye(n)
B = np.ones((n, 1))


def local(a_blk, b_blk):  # this device's blocks in, this device's blocks out
    return jaxmg.potrs_blocks(a_blk, b_blk, mesh=mesh, return_status=True)


solve = jax.shard_map(
    local,
    mesh=mesh,
    in_specs=(P("rows", "cols"), P("rows", None)),
    out_specs=(P("rows", None), P()),
    check_vma=False,
)
x, status = jax.jit(solve)(jax.device_put(A, grid), jax.device_put(B, rows))
assert int(status) == 0
assert np.abs(gather(x) - np.linalg.solve(A, B)).max() < 1e-12
