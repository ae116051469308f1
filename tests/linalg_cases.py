"""Inputs and measurements shared by the multi-process test workers (CPU and GPU).

Every process builds the same matrices from fixed seeds; results are gathered to every process
and compared with NumPy in float64/complex128, with tolerances scaled by n * eps of the dtype.
"""

from __future__ import annotations

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

DTYPES = {
    "float32": np.float32,
    "float64": np.float64,
    "complex64": np.complex64,
    "complex128": np.complex128,
}


def spd(n, dtype, seed):
    """A well-conditioned symmetric (Hermitian) positive-definite matrix: X Xᴴ / n + I."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, n))
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * rng.standard_normal((n, n))
    return (x @ x.conj().T / n + np.eye(n)).astype(dtype)


def rhs(n, k, dtype, seed):
    """b of shape (n,) when k == 0, else (n, k)."""
    rng = np.random.default_rng(seed + 1)
    shape = (n,) if k == 0 else (n, k)
    b = rng.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        b = b + 1j * rng.standard_normal(shape)
    return b.astype(dtype)


def place(x, mesh, spec):
    """x (the same NumPy array on every process) as a global array sharded by spec."""
    return jax.make_array_from_callback(x.shape, NamedSharding(mesh, spec), lambda idx: x[idx])


def gather(x):
    return np.asarray(multihost_utils.process_allgather(x, tiled=True))


def local_scalars(*xs):
    """Each process's own copy of replicated scalars, gathered: [process][value]."""
    mine = np.array([complex(np.asarray(x.addressable_data(0))) for x in xs])
    return multihost_utils.process_allgather(mine)


def measure(case, a, b, x, logdet=None, status=None):
    """Scaled residual ‖AX−B‖/(n‖A‖‖X‖) <= 10 eps, |logdet error| <= 20 n eps max(1, |ref|/n)."""
    n = a.shape[0]
    eps = float(np.finfo(a.dtype).eps)
    xa = np.asarray(x, dtype=np.complex128)
    a64, b64 = a.astype(np.complex128), b.astype(np.complex128)
    resid = np.linalg.norm(a64 @ xa - b64) / (
        n * np.linalg.norm(a64, 2) * max(np.linalg.norm(xa), np.finfo(float).tiny)
    )
    rec = dict(case=case, n=n, eps=eps, residual=float(resid), residual_tol=10 * eps)
    rec["ok"] = bool(resid <= rec["residual_tol"])
    if logdet is not None:
        ref = float(np.linalg.slogdet(a64)[1])
        rec.update(
            logdet_err=abs(float(np.real(logdet)) - ref),
            logdet_tol=20 * n * eps * max(1, abs(ref) / n),
        )
        rec["ok"] = rec["ok"] and bool(rec["logdet_err"] <= rec["logdet_tol"])
    if status is not None:
        rec["status"] = int(np.real(status))
        rec["ok"] = rec["ok"] and rec["status"] == 0
    return rec


# Cases run by both workers (CPU engine under mpirun, GPU engine on the GPU machine).
A_SPEC, B_SPEC = P("pr", "pc"), P("pr", None)


def potrs_case(mesh, dtype_name, n, tile, k, pad=True):
    """potrs with logdet and status; all ranks must agree on both."""
    import jaxmg

    dtype = DTYPES[dtype_name]
    a, b = spd(n, dtype, n), rhs(n, k, dtype, n)
    x, logdet, status = jaxmg.potrs(
        place(a, mesh, A_SPEC),
        place(b, mesh, B_SPEC if k else P("pr")),
        T_A=tile,
        return_logdet=True,
        return_status=True,
        pad=pad,
    )
    assert x.shape == b.shape and x.dtype == b.dtype, (x.shape, x.dtype)
    assert logdet.dtype == np.finfo(dtype).dtype, logdet.dtype
    per_rank = local_scalars(logdet, status)
    rec = measure(
        f"{dtype_name}-n{n}-T{tile}-k{k}", a, b, gather(x), per_rank[0][0], per_rank[0][1]
    )
    rec["ranks_agree"] = bool(np.all(per_rank == per_rank[0]))
    rec["ok"] = rec["ok"] and rec["ranks_agree"]
    return rec


def inside_jit_case(mesh, n, tile):
    """potrs traced inside the caller's jit (only the abstract mesh is known there)."""
    import jaxmg

    a, b = spd(n, np.float64, 4), rhs(n, 3, np.float64, 4)

    @jax.jit
    def f(a, b):
        x, logdet = jaxmg.potrs(a, 2.0 * b, T_A=tile, return_logdet=True)
        return x / 2.0, logdet + 0.0

    x, logdet = f(place(a, mesh, A_SPEC), place(b, mesh, B_SPEC))
    return measure("inside-jit", a, b, gather(x), local_scalars(logdet)[0][0])


def not_positive_definite_case(mesh, n, tile):
    """NaN solution and logdet and a positive status on every rank; the next call works."""
    import jaxmg

    a = spd(n, np.float64, 6)
    a[n // 2, n // 2] = -10.0 * n
    b = rhs(n, 2, np.float64, 6)
    x, logdet, status = jaxmg.potrs(
        place(a, mesh, A_SPEC),
        place(b, mesh, B_SPEC),
        T_A=tile,
        return_logdet=True,
        return_status=True,
    )
    xs = gather(x)
    per_rank = local_scalars(logdet, status)
    rec = dict(
        case="not-positive-definite",
        x_all_nan=bool(np.all(np.isnan(xs))),
        logdet_nan_all_ranks=bool(np.all(np.isnan(np.real(per_rank[:, 0])))),
        status_all_ranks=[int(np.real(s)) for s in per_rank[:, 1]],
        recovers=potrs_case(mesh, "float64", n, tile, 2)["ok"],
    )
    rec["ok"] = (
        rec["x_all_nan"]
        and rec["logdet_nan_all_ranks"]
        and all(s > 0 for s in rec["status_all_ranks"])
        and rec["recovers"]
    )
    return rec
