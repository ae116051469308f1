"""Time and check the reverse-mode derivative of jaxmg.polar for a square matrix.

  python -m jaxmg launch -n 2 bench/polar_grad.py OUT.json [--sizes 512,8192] [--check 512]

For every N in `sizes`: the gradient of L(A) = sum(C * Up) + sum(D * H) through jaxmg.polar on
a (devices, 1) mesh, float64, timed over warm calls (the forward QDWH, one distributed syevd of
H and the products of the derivative). At N <= `check`, the gradient is compared with JAX's on
one device through the SVD (Up = U Vh, H = V diag(s) Vh), whose derivative JAX knows; at every
N the single-device SVD gradient is also timed, as the reference cost (skipped above
`--jax-max`). Process 0 prints a table and writes the JSON (commit from JAXMG_COMMIT).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax

p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("--sizes", default="512,8192")
p.add_argument("--check", type=int, default=2048)
p.add_argument("--jax-max", type=int, default=8192)
p.add_argument("--repeats", type=int, default=2)
args = p.parse_args()
jax.distributed.initialize()
jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import jaxmg  # noqa: E402

ndev = jax.device_count()
mesh = jax.make_mesh((ndev, 1), ("pr", "pc"))
spec = P("pr", "pc")


def put(x):
    return jax.make_array_from_callback(x.shape, NamedSharding(mesh, spec), lambda idx: x[idx])


def loss_mg(a, c, d):
    up, h = jaxmg.polar(a, mesh=mesh, matrix_specs=spec)
    return jnp.sum(c * up) + jnp.sum(d * h)


def loss_svd(a, c, d):
    u, s, vh = jnp.linalg.svd(a, full_matrices=False)
    return jnp.sum(c * (u @ vh)) + jnp.sum(d * ((vh.T * s) @ vh))


def timed(fn, *xs):
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn(*xs))
    first = time.perf_counter() - t0
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        out = jax.block_until_ready(fn(*xs))
        times.append(time.perf_counter() - t0)
    return out, first, min(times)


records = []
grad_mg = jax.jit(jax.grad(loss_mg))
for n in [int(s) for s in args.sizes.split(",")]:
    rng = np.random.default_rng(n)
    i = np.arange(n)
    # Well conditioned and with distinct singular values: the derivative is defined.
    a_np = 0.5 ** np.abs(i[:, None] - i[None, :]) + rng.standard_normal((n, n)) / np.sqrt(n)
    c_np, d_np = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    g, first, sec = timed(grad_mg, put(a_np), put(c_np), put(d_np))
    rec = dict(
        engine="jaxmg",
        devices=ndev,
        mesh=[ndev, 1],
        n=n,
        dtype="float64",
        seconds=sec,
        compile_and_first_s=first,
    )
    if n <= args.jax_max:
        dev = jax.local_devices()[0]
        xs = [jax.device_put(x, dev) for x in (a_np, c_np, d_np)]
        g_ref, _, sec_ref = timed(jax.jit(jax.grad(loss_svd)), *xs)
        rec["jax_svd_seconds"] = sec_ref
        if n <= args.check:
            g_full = np.asarray(jax.experimental.multihost_utils.process_allgather(g, tiled=True))
            g_ref = np.asarray(g_ref)
            rec["rel_err"] = float(np.linalg.norm(g_full - g_ref) / np.linalg.norm(g_ref))
            rec["check_ok"] = bool(rec["rel_err"] < 1e3 * n * np.finfo(np.float64).eps)
    records.append(rec)
    if jax.process_index() == 0:
        print(
            f"polar grad n={n}: jaxmg {sec:.3f} s (first {first:.1f} s)"
            f"  jax svd {rec.get('jax_svd_seconds', float('nan')):.3f} s"
            f"  rel_err {rec.get('rel_err', float('nan')):.2e} ok={rec.get('check_ok')}",
            flush=True,
        )

if jax.process_index() == 0:
    with open(args.out, "w") as f:
        json.dump(
            dict(
                routine="polar_grad",
                commit=os.environ.get("JAXMG_COMMIT"),
                matrix="KMS r=0.5 + N(0,1)/sqrt(n)",
                records=records,
            ),
            f,
            indent=1,
        )
