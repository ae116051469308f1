import jax
import numpy as np
from jax.experimental.multihost_utils import process_allgather
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import jaxmg

jax.distributed.initialize()
jax.config.update("jax_enable_x64", True)
mesh = jax.make_mesh((jax.device_count(), 1), ("rows", "cols"))
grid = NamedSharding(mesh, P("rows", "cols"))
rows = NamedSharding(mesh, P("rows"))

# --8<-- [start:padding]
n = 1001  # odd: its rows do not split over 2 devices
multiple = int(np.lcm(*mesh.axis_sizes))  # the devices over the rows and over the columns
m = -(-n // multiple) * multiple  # 1002 on 2 devices


def padded_matrix(index):
    """The block at `index` of [[A, 0], [0, I]], A[i, j] = 0.5^|i - j| (n x n)."""
    i = np.arange(m)[index[0]][:, None]
    j = np.arange(m)[index[1]][None, :]
    inside = (i < n) & (j < n)
    return np.where(inside, 0.5 ** np.abs(i - j), (i == j).astype(np.float64))


def padded_rhs(index):  # b with zeros below its n entries
    return np.where(np.arange(m)[index] < n, 1.0, 0.0)


a = jax.make_array_from_callback((m, m), grid, padded_matrix)
b = jax.make_array_from_callback((m,), rows, padded_rhs)
x, logdet = jaxmg.potrs(a, b, return_logdet=True)
# x's first n entries solve A x = b, its padded ones are 0; log det is A's. Keep x padded
# while it stays sharded (x[:n] would not split over the devices either), cut it on the host:
x_host = process_allgather(x, tiled=True)[:n]
# --8<-- [end:padding]
A = 0.5 ** np.abs(np.arange(n)[:, None] - np.arange(n)[None, :])
assert np.abs(A @ x_host - 1).max() < 1e-12
assert not process_allgather(x, tiled=True)[n:].any()
assert abs(float(logdet) - (n - 1) * np.log(0.75)) < 1e-9 * n
# --8<-- [start:error]
if multiple > 1:
    try:
        jaxmg.potrs(np.asarray(A), np.ones(n), mesh=mesh)  # unpadded
    except ValueError as e:
        message = str(e)
    assert "pad the matrix to a multiple of 2 (here 1002)" in message
    assert "docs/bigmatrix.md#padding" in message
# --8<-- [end:error]
