"""Before and after a change, on one GPU: the routines whose time a change to the engine must
keep, timed with whichever jaxmg is imported (run it once per build in the same device session,
e.g. with PYTHONPATH pointing at the earlier build's package for "before").

  python bench/regress.py OUT.json --label after
      [--only syevd,eigvalsh,qr,lu_solve,potrs,potri,polar] [--matrix random|kms] [--reps 2]

Cases (float64, a 1x1 mesh): syevd with vectors and eigvalsh at N = 32768, qr at N = 16384,
lu_solve and potrs (with logdet, one right-hand side) and potri at N = 32768, polar at 16384.
Each time is the best of `reps` calls after one warm-up call (compilation), with the result
ready. The matrices are
generated on the device: random (symmetric for the eigensolvers, SPD = X Xᵀ / N + I for potrs,
general for lu_solve and qr) or Kac-Murdock-Szegő (0.5^|i-j|). Only the public API that every
jaxmg release has is used (potrs, lu_solve, qr, syevd, potri, polar), so the same script times
both builds.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import jaxmg  # noqa: E402

SIZES = {
    "syevd": 32768,
    "eigvalsh": 32768,
    "qr": 16384,
    "lu_solve": 32768,
    "potrs": 32768,
    "potri": 32768,
    "polar": 16384,
}
DEFAULT = ("syevd", "eigvalsh", "qr", "lu_solve", "potrs")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--label", required=True)
    p.add_argument("--only", default=",".join(DEFAULT))
    p.add_argument("--matrix", default="random", choices=("random", "kms"))
    p.add_argument("--reps", type=int, default=2)
    args = p.parse_args()

    dev = jax.devices()[0]
    mesh = jax.make_mesh((1, 1), ("pr", "pc"), devices=[dev])
    sharding = NamedSharding(mesh, P("pr", "pc"))
    rows = NamedSharding(mesh, P("pr", None))

    def matrix(routine, n):
        @jax.jit
        def make(key):
            if args.matrix == "kms":
                i = jnp.arange(n)
                return 0.5 ** jnp.abs(i[:, None] - i[None, :]).astype(jnp.float64)
            x = jax.random.normal(key, (n, n), jnp.float64)
            if routine in ("syevd", "eigvalsh"):
                return (x + x.T) / 2
            if routine in ("potrs", "potri"):
                return x @ x.T / n + jnp.eye(n)
            return x

        return jax.device_put(make(jax.random.key(0)), sharding)

    calls = {
        "syevd": lambda a, b: jaxmg.syevd(a),
        "eigvalsh": lambda a, b: jaxmg.syevd(a, return_eigenvectors=False),
        "qr": lambda a, b: jaxmg.qr(a),
        "lu_solve": lambda a, b: jaxmg.lu_solve(a, b),
        "potrs": lambda a, b: jaxmg.potrs(a, b, return_logdet=True),
        "potri": lambda a, b: jaxmg.potri(a),
        "polar": lambda a, b: jaxmg.polar(a),
    }
    records = []
    for routine in args.only.split(","):
        n = SIZES[routine]
        a = matrix(routine, n)
        b = jax.device_put(jnp.ones((n, 1), jnp.float64), rows)
        fn = jax.jit(calls[routine])
        jax.block_until_ready(fn(a, b))
        best = float("inf")
        for _ in range(args.reps):
            t0 = time.perf_counter()
            jax.block_until_ready(fn(a, b))
            best = min(best, time.perf_counter() - t0)
        rec = {"routine": routine, "n": n, "seconds": best, "matrix": args.matrix}
        print(f"[regress] {args.label:8s} {routine:9s} N={n:6d} {best:8.3f} s", flush=True)
        records.append(rec)
        del a, b
    out = {
        "label": args.label,
        "commit": os.environ.get("JAXMG_COMMIT", "unknown"),
        "jaxmg_file": jaxmg.__file__,
        "device": dev.device_kind,
        "jax": jax.__version__,
        "dtype": "float64",
        "mesh": "1x1",
        "reps": args.reps,
        "records": records,
    }
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
