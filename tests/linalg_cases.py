"""Inputs and measurements shared by the multi-process test workers (CPU and GPU).

Every process builds the same matrices from fixed seeds; results are gathered to every process
and compared with NumPy in float64/complex128, with tolerances scaled by n * eps of the dtype.
"""

from __future__ import annotations

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import NamedSharding

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
