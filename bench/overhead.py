"""Per-call time of small jaxmg calls, to see the fixed cost of a call apart from its arithmetic.

  python bench/overhead.py OUT.json [--n 1024] [--calls 200]            # one process, all GPUs
  python -m jaxmg launch -n 2 bench/overhead.py OUT.json --launched     # one process per GPU

Times, per call (mean over `calls` back-to-back calls of one jitted function, after warm-up):
  xla_add      a + 1 on the same sharded matrix: XLA's own launch floor on this mesh
  potrs        jaxmg.potrs (default: symmetry check on, automatic tile)
  potrs_nocheck          with check_symmetry=False
  potrs_tile_shard       with one tile per shard (the fewest engine steps)
  potrs_nocheck_1gpu     on a 1x1 mesh of the first device (no NCCL peer)
  cho_solve_kept         jaxmg.cho_solve with a kept factor (no factorization)
  jax_1gpu     jax.scipy.linalg.cho_factor + cho_solve on one GPU (the arithmetic alone)
Process 0 writes the JSON (with the mode, device count and commit given by JAXMG_COMMIT).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax

p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("--n", type=int, default=1024)
p.add_argument("--calls", type=int, default=200)
p.add_argument("--launched", action="store_true", help="under jaxmg launch (jax.distributed)")
args = p.parse_args()
if args.launched:
    jax.distributed.initialize()
jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import jaxmg  # noqa: E402

n, calls = args.n, args.calls
ndev = jax.device_count()
mesh = jax.make_mesh((ndev, 1), ("pr", "pc"))
i = np.arange(n)
a_np = 0.5 ** np.abs(i[:, None] - i[None, :])


def put(x, m, spec):
    return jax.make_array_from_callback(x.shape, NamedSharding(m, spec), lambda idx: x[idx])


def per_call_ms(fn, *xs):
    for _ in range(10):
        out = fn(*xs)
    jax.block_until_ready(out)
    t0 = time.perf_counter()
    for _ in range(calls):
        out = fn(*xs)
    jax.block_until_ready(out)
    return (time.perf_counter() - t0) / calls * 1e3


a = put(a_np, mesh, P("pr", "pc"))
b = put(np.ones((n, 1)), mesh, P("pr", None))
rec = dict(n=n, calls=calls, devices=ndev, processes=jax.process_count(), ms={})
ms = rec["ms"]
ms["xla_add"] = per_call_ms(jax.jit(lambda a: a + 1.0), a)
ms["potrs"] = per_call_ms(jax.jit(lambda a, b: jaxmg.potrs(a, b, mesh=mesh)), a, b)
ms["potrs_nocheck"] = per_call_ms(
    jax.jit(lambda a, b: jaxmg.potrs(a, b, mesh=mesh, check_symmetry=False)), a, b
)
ms["potrs_tile_shard"] = per_call_ms(
    jax.jit(lambda a, b: jaxmg.potrs(a, b, T_A=n // ndev, mesh=mesh, check_symmetry=False)),
    a,
    b,
)
factor = jaxmg.cho_factor(a, mesh=mesh)
ms["cho_solve_kept"] = per_call_ms(jax.jit(jaxmg.cho_solve), factor, b)
if jax.process_count() == 1:
    one = jax.make_mesh((1, 1), ("pr", "pc"), devices=jax.devices()[:1])
    a1, b1 = put(a_np, one, P("pr", "pc")), put(np.ones((n, 1)), one, P("pr", None))
    ms["potrs_nocheck_1gpu"] = per_call_ms(
        jax.jit(lambda a, b: jaxmg.potrs(a, b, mesh=one, check_symmetry=False)), a1, b1
    )
    d0 = jax.devices()[0]
    a0, b0 = jax.device_put(jnp.asarray(a_np), d0), jax.device_put(jnp.ones((n, 1)), d0)
    ms["jax_1gpu"] = per_call_ms(
        jax.jit(lambda a, b: jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(a), b)),
        a0,
        b0,
    )
x = multihost_utils.process_allgather(jaxmg.potrs(a, b, mesh=mesh), tiled=True)
rec["max_residual"] = float(np.abs(a_np @ np.asarray(x) - 1).max())
rec["mode"] = "launcher" if args.launched else "single-process"
rec["commit"] = os.environ.get("JAXMG_COMMIT")
if jax.process_index() == 0:
    print(json.dumps(rec))
    with open(args.out, "w") as f:
        json.dump(rec, f, indent=1)
