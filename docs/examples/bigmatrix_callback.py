import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import jaxmg

jax.distributed.initialize()
jax.config.update("jax_enable_x64", True)
mesh = jax.make_mesh((jax.device_count(), 1), ("rows", "cols"))
grid = NamedSharding(mesh, P("rows", "cols"))
n = 2048


# --8<-- [start:function]
def kms(index):
    """The block of A[i, j] = 0.5^|i - j| at `index` (a tuple of slices of global indices)."""
    i = np.arange(n)[index[0]]
    j = np.arange(n)[index[1]]
    return 0.5 ** np.abs(i[:, None] - j[None, :])


a = jax.make_array_from_callback((n, n), grid, kms)  # each process computes its blocks only
# --8<-- [end:function]
assert all(s.data.shape == (n // jax.device_count(), n) for s in a.addressable_shards)

# --8<-- [start:file]
path = "kms.npy"  # a file every process can read (on several nodes: a shared filesystem)
if jax.process_index() == 0:
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float64, shape=(n, n))
    for start in range(0, n, 256):  # written a band of rows at a time, never whole
        out[start : start + 256] = kms((slice(start, start + 256), slice(None)))
    out.flush()
    del out
multihost_utils.sync_global_devices("kms.npy written")

stored = np.load(path, mmap_mode="r")  # nothing read yet
read = []


def from_file(index):
    read.append(index)
    return np.asarray(stored[index])  # reads this block's rows of the file only


a = jax.make_array_from_callback((n, n), grid, from_file)
b = jax.make_array_from_callback((n,), NamedSharding(mesh, P("rows")), lambda i: np.ones(n)[i])
x, logdet, status = jaxmg.potrs(a, b, return_logdet=True, return_status=True)
# --8<-- [end:file]
assert read == [s.index for s in a.addressable_shards]  # this process's blocks, once each
assert int(status) == 0
assert abs(float(logdet) - (n - 1) * np.log(0.75)) < 1e-9 * n
x_all = multihost_utils.process_allgather(x, tiled=True)
mine = a.addressable_shards[0].index[0]  # this process's rows, read from the file again
assert np.abs(stored[mine] @ x_all - 1).max() < 1e-12

# --8<-- [start:nan]
bad = np.eye(8)
bad[0, 0] = np.nan  # the same NaN on every process
try:
    jax.device_put(bad, grid)  # compares every process's copy: NaN != NaN
except AssertionError as e:
    assert "is not the same on each process" in str(e)
else:
    raise AssertionError("device_put took a NaN matrix on several processes")
bad_a = jax.make_array_from_callback(bad.shape, grid, lambda index: bad[index])  # no comparison
x, status = jaxmg.potrs(bad_a, np.ones(8), return_status=True)
assert int(status) > 0 and np.isnan(multihost_utils.process_allgather(x, tiled=True)).all()
# --8<-- [end:nan]
multihost_utils.sync_global_devices("done with kms.npy")
if jax.process_index() == 0:
    import os

    os.remove(path)
