"""One device against JAX: potrs, lu_solve, qr and inv on a 1x1 mesh, at N = 32768 float64 by
default, beside JAX's own solvers on the same GPU (cho_factor + cho_solve, lu_factor + lu_solve,
jnp.linalg.qr, jnp.linalg.inv).

  python bench/one_device.py OUT.json [--n 32768] [--nrhs 1] [--reps 3] [--only potrs,qr]

jaxmg runs twice where the engine has a choice: its default (on one device: cusolverDn's potrf and
potrs, the own LU with cusolverDn's getrs) and with jaxmg.config's gpu_one_device = "cusolvermp"
(the distributed library on a 1x1 grid), each in a function jitted under its configuration, so
both run in the same process. Each time
is the best of `reps` calls after one warm-up call (compilation), with the result ready; the
JSON also records the device, the JAX version and the commit (JAXMG_COMMIT, else git). One
process, under 3 minutes at the defaults on an H200.
"""

from __future__ import annotations

import argparse
import json
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import jax.scipy.linalg as jsl  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import jaxmg  # noqa: E402
from jaxmg.cli.bench import measured_commit  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("--n", type=int, default=32768)
p.add_argument("--nrhs", type=int, default=1)
p.add_argument("--reps", type=int, default=3)
p.add_argument("--only", default="potrs,lu_solve,qr,inv")
args = p.parse_args()
n, k = args.n, args.nrhs
only = set(args.only.split(","))

dev = jax.devices()[0]
mesh = jax.make_mesh((1, 1), ("pr", "pc"), devices=[dev])
spec_a, spec_b = P("pr", "pc"), P("pr", None)


def best(fn, *xs):
    """The best of reps timed calls of fn(*xs) after one warm-up call (s)."""
    jax.block_until_ready(fn(*xs))
    times = []
    for _ in range(args.reps):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*xs))
        times.append(time.perf_counter() - t0)
    return min(times)


# Matrices made on the device (a host copy of 8 GiB would dominate the run).
key = jax.random.PRNGKey(0)
with jax.default_device(dev):
    g = jax.random.normal(key, (n, n), jnp.float64)
    spd = jax.jit(lambda x: x @ x.T / n + jnp.eye(n))(g)
    gen = jax.jit(lambda x: x + jnp.sqrt(n) * jnp.eye(n))(g)  # well conditioned
    b = jax.random.normal(jax.random.PRNGKey(1), (n, k), jnp.float64)
    del g
sa, sb = NamedSharding(mesh, spec_a), NamedSharding(mesh, spec_b)
spd_s, gen_s, b_s = jax.device_put(spd, sa), jax.device_put(gen, sa), jax.device_put(b, sb)

# jaxmg's functions are made anew for each configuration (a jitted function keeps the one it was
# traced with).
cases = {
    "potrs": (
        lambda: jax.jit(lambda a, x: jaxmg.potrs(a, x, mesh=mesh)),
        (spd_s, b_s),
        jax.jit(lambda a, x: jsl.cho_solve(jsl.cho_factor(a, lower=True), x)),
        (spd, b),
    ),
    "lu_solve": (
        lambda: jax.jit(lambda a, x: jaxmg.lu_solve(a, x, mesh=mesh)),
        (gen_s, b_s),
        jax.jit(lambda a, x: jsl.lu_solve(jsl.lu_factor(a), x)),
        (gen, b),
    ),
    "qr": (
        lambda: jax.jit(lambda a: jaxmg.qr(a, mesh=mesh)),
        (gen_s,),
        jax.jit(lambda a: jnp.linalg.qr(a)),
        (gen,),
    ),
    "inv": (
        lambda: jax.jit(lambda a: jaxmg.inv(a, mesh=mesh)),
        (gen_s,),
        jax.jit(lambda a: jnp.linalg.inv(a)),
        (gen,),
    ),
}
results = {
    "n": n,
    "nrhs": k,
    "dtype": "float64",
    "reps": args.reps,
    "device": str(dev.device_kind),
    "jax": jax.__version__,
    "commit": measured_commit(),
    "cases": {},
}
t_start = time.perf_counter()
for name, (make, mg_args, ref, ref_args) in cases.items():
    if name not in only:
        continue
    rec = {"jax_s": best(ref, *ref_args)}
    mg = make()
    rec["jaxmg_s"] = best(mg, *mg_args)
    with jaxmg.config.override(gpu_one_device="cusolvermp"):
        rec["jaxmg_cusolvermp_s"] = best(make(), *mg_args)
    rec["ratio_to_jax"] = rec["jaxmg_s"] / rec["jax_s"]
    if name in ("potrs", "lu_solve"):  # the answer, against JAX's
        x, xr = np.asarray(mg(*mg_args)), np.asarray(ref(*ref_args))
        rec["max_diff_to_jax"] = float(np.abs(x - xr).max())
    results["cases"][name] = rec
    print(f"[one_device] {name}: {json.dumps(rec)}", flush=True)
    json.dump(results, open(args.out, "w"), indent=1)
results["seconds"] = round(time.perf_counter() - t_start, 1)
json.dump(results, open(args.out, "w"), indent=1)
print(f"[one_device] wrote {args.out} in {results['seconds']} s", flush=True)
