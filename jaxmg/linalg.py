"""NumPy/SciPy-style names for jaxmg's distributed routines, for users of `jax.numpy.linalg`
and `jax.scipy.linalg`.

Each function takes `jax.numpy.linalg`'s arguments and return structure and calls the
distributed routine on `a` where it lies (its sharding picks the mesh; `T_A`, `mesh` and
`matrix_specs` may be passed through as keywords). Leading batch dimensions are looped over
(one distributed call per matrix, each with the same plan).

Not here yet: svd, polar, eigh's generalized problem, and lstsq, whose rank and singular values
need an SVD (`jaxmg.least_squares` gives its solution).
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from jaxmg.routines import factor as _factor
from jaxmg.routines import inv as _inv
from jaxmg.routines import lu_solve as _lu
from jaxmg.routines import qr as _qr
from jaxmg.routines import slogdet as _slogdet
from jaxmg.routines import syevd as _syevd

__all__ = [
    "EighResult",
    "QRResult",
    "SlogdetResult",
    "cho_factor",
    "cho_solve",
    "eigh",
    "eigvalsh",
    "inv",
    "lu_factor",
    "lu_solve",
    "qr",
    "slogdet",
    "solve",
]


class SlogdetResult(NamedTuple):
    sign: object
    logabsdet: object


class EighResult(NamedTuple):
    eigenvalues: object
    eigenvectors: object


class QRResult(NamedTuple):
    Q: object
    R: object


def _batched(fn, a, *rest):
    """fn over the leading dimensions of a (and of the matching arrays in rest), stacked."""
    if a.ndim == 2:
        return fn(a, *rest)
    outs = [_batched(fn, a[i], *(r[i] for r in rest)) for i in range(a.shape[0])]
    if isinstance(outs[0], tuple):
        return type(outs[0])(*(jnp.stack(parts) for parts in zip(*outs, strict=True)))
    return jnp.stack(outs)


def solve(a, b, **kwargs):
    """x with a @ x = b (`jnp.linalg.solve`): pivoted LU (`jaxmg.lu_solve`). b is (..., N) or
    (..., N, K) with a's leading dimensions."""
    return _batched(lambda m, v: _lu.lu_solve(m, v, **kwargs), a, b)


def inv(a, **kwargs):
    """The inverse (`jnp.linalg.inv`), in a's sharding (`jaxmg.inv`)."""
    return _batched(lambda m: _inv.inv(m, **kwargs), a)


def slogdet(a, **kwargs):
    """(sign, logabsdet) (`jnp.linalg.slogdet`), through pivoted LU (`jaxmg.slogdet`)."""
    return _batched(lambda m: SlogdetResult(*_slogdet.slogdet(m, **kwargs)), a)


def eigh(a, UPLO=None, symmetrize_input=True, **kwargs):
    """(eigenvalues, eigenvectors) of a Hermitian matrix (`jnp.linalg.eigh`): eigenvalues
    ascending, eigenvectors in the columns, in a's sharding (`jaxmg.syevd`). The engine reads
    the lower triangle; `symmetrize_input` and `UPLO` are accepted for the call's shape (jaxmg
    checks that a is Hermitian instead: NaN and status -1 when it is not)."""
    if UPLO not in (None, "L"):
        raise ValueError("jaxmg.linalg.eigh reads the lower triangle (UPLO='L')")
    return _batched(lambda m: EighResult(*_syevd.syevd(m, **kwargs)), a)


def eigvalsh(a, UPLO=None, **kwargs):
    """The eigenvalues of a Hermitian matrix, ascending (`jnp.linalg.eigvalsh`): the
    eigensolver's values-only path (`jaxmg.syevd(..., return_eigenvectors=False)`)."""
    if UPLO not in (None, "L"):
        raise ValueError("jaxmg.linalg.eigvalsh reads the lower triangle (UPLO='L')")
    return _batched(lambda m: _syevd.syevd(m, return_eigenvectors=False, **kwargs), a)


def qr(a, mode="reduced", **kwargs):
    """(Q, R) of the reduced QR factorization (`jnp.linalg.qr`, M >= N; `mode="r"`: R alone),
    Q in a's sharding (`jaxmg.qr`)."""
    if mode not in ("reduced", "r"):
        raise ValueError(
            f"jaxmg.linalg.qr computes mode='reduced' or mode='r' (M >= N), not {mode!r}"
        )

    def one(m):
        q, r = _qr.qr(m, **kwargs)
        return r if mode == "r" else QRResult(q, r)

    return _batched(one, a)


def cho_factor(a, lower=False, **kwargs):
    """The Cholesky factorization kept for `cho_solve` (`jax.scipy.linalg.cho_factor`): returns
    (factor, lower), where factor is a `jaxmg.CholeskyFactor` (sharded like a, never
    gathered, not the triangle itself). `lower` is kept for the call's shape only."""
    if a.ndim != 2:
        raise ValueError("cho_factor takes one (N, N) matrix")
    return _factor.cho_factor(a, **kwargs), lower


def cho_solve(c_and_lower, b):
    """x with a @ x = b from `cho_factor`'s result (`jax.scipy.linalg.cho_solve`)."""
    factor, _ = c_and_lower
    return _factor.cho_solve(factor, b)


def lu_factor(a, **kwargs):
    """The pivoted LU factorization kept for `lu_solve` (`jax.scipy.linalg.lu_factor`): a
    `jaxmg.LUFactor`, which `lu_solve` takes in place of SciPy's (lu, piv)."""
    if a.ndim != 2:
        raise ValueError("lu_factor takes one (N, N) matrix")
    return _factor.lu_factor(a, **kwargs)


def lu_solve(lu_and_piv, b, trans=0):
    """x with a @ x = b from `lu_factor`'s result (`jax.scipy.linalg.lu_solve`, trans=0)."""
    if trans != 0:
        raise ValueError("jaxmg.linalg.lu_solve solves a @ x = b only (trans=0)")
    factor = lu_and_piv[0] if isinstance(lu_and_piv, tuple) else lu_and_piv
    return _factor.lu_solve_factored(factor, b)
