"""JAXMg 1.x timed like `python -m jaxmg bench` times jaxmg: the peer of its `--peer` option.

Run by that command under the launcher, one process per GPU, with the arguments it passes to
its own roles. JAXMg 1.x is imported from the folder JAXMG_PEER_PATH (its wheel unpacked): it
has this project's import name, so this script takes this project's folder off sys.path first.
The cuSOLVERMp wheel's folder (nvidia/cu13/lib) must be on sys.path too (JAXMG_PEER_LIBS), where
JAXMg 1.x looks for libcusolverMp. Writes its records (engine "jaxmg-1.x") to JAXMG_BENCH_PART.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT]
sys.path[:0] = [os.environ["JAXMG_PEER_PATH"], os.environ.get("JAXMG_PEER_LIBS", "")]

import jax  # noqa: E402

jax.distributed.initialize()
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import jaxmg as peer  # noqa: E402  (JAXMg 1.x)

R = 0.5
p = argparse.ArgumentParser()
for name, kind, default in (
    ("--routine", str, "potrs"),
    ("--sizes", str, "2048"),
    ("--dtypes", str, "float64"),
    ("--repeats", int, 2),
    ("--nrhs", int, 1),
    ("--tile", str, None),
    ("--mesh", str, None),
    ("--cols", int, None),
    ("--baseline-max", int, None),
):
    p.add_argument(name, type=kind, default=default)
p.add_argument("--no-donate", action="store_true")
p.add_argument("--no-symmetry-check", action="store_true")
p.add_argument("--matrix", choices=("kms", "random"), default="kms")
args = p.parse_args()
procs = jax.process_count()
shape = tuple(int(x) for x in args.mesh.split("x")) if args.mesh else (procs, 1)
mesh = jax.make_mesh(shape, ("pr", "pc"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
a_sh, b_sh = NamedSharding(mesh, P("pr", "pc")), NamedSharding(mesh, P("pr", None))
tile = int(args.tile.split(",")[0]) if args.tile else 1024


def kms(m, n, dtype):
    """A[i, j] = r**|i - j| (m x n), made on the devices."""

    def gen():
        i = jax.lax.broadcasted_iota(jnp.int32, (m, n), 0)
        j = jax.lax.broadcasted_iota(jnp.int32, (m, n), 1)
        return jnp.exp(jnp.abs(i - j).astype(jnp.float32) * math.log(R)).astype(dtype)

    return jax.jit(gen, out_shardings=a_sh)


def random_matrix(m, n, dtype):
    """Uniform entries in [-1, 1) made on the devices, as `python -m jaxmg bench --matrix random`
    makes them: symmetric for the eigensolvers, plus n on the diagonal for the Cholesky routines
    (diagonally dominant: positive definite), general otherwise."""
    real = np.dtype(dtype).type(0).real.dtype
    counter = iter(range(1 << 30))

    def gen(key):
        a = jax.random.uniform(key, (m, n), real, -1.0, 1.0)
        if np.issubdtype(dtype, np.complexfloating):
            a = a + 1j * jax.random.uniform(jax.random.fold_in(key, 1), (m, n), real, -1.0, 1.0)
        a = a.astype(dtype)
        if args.routine in ("potrs", "potri", "cho_solve", "syevd", "eigvalsh"):
            a = (a + a.conj().T) / 2
        if args.routine in ("potrs", "potri", "cho_solve"):
            a = a + n * jnp.eye(n, dtype=dtype)
        return a

    compiled = jax.jit(gen, out_shardings=a_sh)
    return lambda: compiled(jax.random.fold_in(jax.random.key(20240607), next(counter)))


def first_column(m, dtype, nrhs):
    """b = A[:, 0] in nrhs columns (made on the host: small)."""
    host = np.repeat((R ** np.arange(m)).astype(dtype)[:, None], nrhs, axis=1)
    return jax.make_array_from_callback((m, nrhs), b_sh, lambda idx: host[idx])


def call(a, b):
    kw = dict(T_A=tile, mesh=mesh, donate=not args.no_donate)
    if args.routine == "qr":
        q, r = peer.qr(a, **kw)
        return q, r[0, 0]
    if args.routine == "least_squares":
        x = peer.least_squares(a, b, **kw)
        return x, x[0, 0]
    if args.routine in ("syevd", "eigvalsh"):
        out = peer.syevd(a, return_eigenvectors=args.routine == "syevd", **kw)
        w = out[0] if args.routine == "syevd" else out
        return (out[1] if args.routine == "syevd" else w), jnp.sum(w)
    if args.routine in ("gesvd", "gesvd_values"):
        vectors = args.routine == "gesvd"
        out = peer.gesvd(a, compute_u=vectors, compute_vh=vectors, **kw)
        return (out[2] if vectors else out), jnp.sum(out[1] if vectors else out)
    if args.routine == "polar":
        up, h = peer.polar(a, **kw)
        return up, jnp.trace(h)
    if args.routine == "lu_solve":  # (JAXMg 1.x's lu_solve has no log-determinant)
        x = peer.lu_solve(a, b, **kw)
        return x, x[0, 0]
    x, logdet = getattr(peer, args.routine)(a, b, return_logdet=True, **kw)
    return x, logdet


records = []
for n in [int(s) for s in args.sizes.split(",") if s]:
    for dtype_name in args.dtypes.split(","):
        dtype = np.dtype(dtype_name)
        m, cols = (n, args.cols or n) if args.routine in ("qr", "least_squares") else (n, n)
        rec = dict(engine="jaxmg-1.x", devices=procs, mesh=list(shape), n=n, dtype=dtype_name)
        rec.update(tile=tile, version=getattr(peer, "__version__", "1.x"))
        if cols != n:
            rec["cols"] = cols
        try:
            gen = (kms if args.matrix == "kms" else random_matrix)(m, cols, dtype)
            times = []
            for rep in range(args.repeats + 1):
                a, b = gen(), first_column(m, dtype, args.nrhs)  # (JAXMg 1.x donates both)
                jax.block_until_ready((a, b))
                multihost_utils.sync_global_devices(f"peer-{n}-{dtype_name}-{rep}")
                t0 = time.perf_counter()
                x, check = call(a, b)
                x.block_until_ready()
                times.append(time.perf_counter() - t0)
                del a, x
            rec.update(seconds=min(times[1:]), all_s=times, check=abs(complex(check)))
        except Exception as e:  # noqa: BLE001 - a refusal or an OOM is a result too
            rec["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        if jax.process_index() == 0:
            result = rec.get("seconds", rec.get("error"))
            print(f"jaxmg-1.x {procs}dev {dtype_name} {m}x{cols}: {result}", flush=True)
        records.append(rec)
if jax.process_index() == 0 and os.environ.get("JAXMG_BENCH_PART"):
    Path(os.environ["JAXMG_BENCH_PART"]).write_text(json.dumps(records))
