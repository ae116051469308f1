"""polar and gesvd once on a mesh of the job's processes: the first case that crashed with 4 ranks
sharing one GPU (bench/results/polar_probe_p4_h200x1_*.json). Run on the GPU machine:

  python -m jaxmg launch -n 4 --share-gpu tests/gpu/polar_probe.py ROWS COLS N TILE DTYPE
  (e.g. 4 1 48 8 float32: an N x N/2 matrix on a 4 x 1 mesh, tile 8)

Process 0 prints "polar ok <max |Up H - A|>" and "gesvd ok <max |U diag(s) Vh - A|>".
"""

import sys

import jax

jax.distributed.initialize()
jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402
from jax.experimental.multihost_utils import process_allgather  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import jaxmg  # noqa: E402

rows, cols, n, tile = (int(x) for x in sys.argv[1:5])
dtype = sys.argv[5]
mesh = jax.make_mesh((rows, cols), ("pr", "pc"))
A = np.random.default_rng(0).standard_normal((n, n // 2)).astype(dtype)
a = jax.device_put(A, NamedSharding(mesh, P("pr", "pc")))
up, h = (process_allgather(x, tiled=True) for x in jaxmg.polar(a, tile)[:2])
u, s, vh = (process_allgather(x, tiled=True) for x in jaxmg.gesvd(a, tile)[:3])
if jax.process_index() == 0:
    print("polar ok", np.abs(up @ h - A).max(), flush=True)
    print("gesvd ok", np.abs((u * s) @ vh - A).max(), flush=True)
