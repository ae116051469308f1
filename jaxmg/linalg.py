"""NumPy/SciPy-style names for jaxmg's distributed routines, for users of `jax.numpy.linalg`
and `jax.scipy.linalg`.

Each function takes `jax.numpy.linalg`'s arguments and return structure and calls the
distributed routine on `a` where it lies (its sharding picks the mesh; `T_A`, `mesh` and
`matrix_specs` may be passed through as keywords). Leading batch dimensions are looped over
(one distributed call per matrix, each with the same plan).

`lstsq` solves through the distributed SVD (rank-deficient problems get the minimum-norm
solution, as in NumPy); `jaxmg.least_squares` is the QR path for full-rank problems.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.sharding import AxisType
from jax.sharding import PartitionSpec as P

from jaxmg.routines import factor as _factor
from jaxmg.routines import gesvd as _gesvd
from jaxmg.routines import inv as _inv
from jaxmg.routines import lu_solve as _lu
from jaxmg.routines import polar as _polar
from jaxmg.routines import qr as _qr
from jaxmg.routines import slogdet as _slogdet
from jaxmg.routines import syevd as _syevd
from jaxmg.routines import sygvd as _sygvd

__all__ = [
    "EighResult",
    "QRResult",
    "SVDResult",
    "SlogdetResult",
    "cho_factor",
    "cho_solve",
    "eigh",
    "eigvalsh",
    "inv",
    "lu_factor",
    "lstsq",
    "lu_solve",
    "polar",
    "qr",
    "slogdet",
    "solve",
    "svd",
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


class SVDResult(NamedTuple):
    U: object
    S: object
    Vh: object


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


def eigh(a, b=None, UPLO=None, symmetrize_input=True, **kwargs):
    """(eigenvalues, eigenvectors) of a Hermitian matrix (`jnp.linalg.eigh`), or with b of the
    generalized problem a v = λ b v for Hermitian positive definite b (`scipy.linalg.eigh(a,
    b)`): eigenvalues ascending, eigenvectors in the columns, in a's sharding (`jaxmg.eigh`).
    The engine reads the lower triangles; `symmetrize_input` and `UPLO` are accepted for the
    call's shape (jaxmg checks that a is Hermitian instead: NaN and status -1 when it is not)."""
    if UPLO not in (None, "L"):
        raise ValueError("jaxmg.linalg.eigh reads the lower triangle (UPLO='L')")
    if b is None:
        return _batched(lambda m: EighResult(*_syevd.syevd(m, **kwargs)), a)
    return _batched(lambda m, k: EighResult(*_sygvd.eigh(m, k, **kwargs)), a, b)


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


def svd(a, full_matrices=True, compute_uv=True, hermitian=False, **kwargs):
    """(U, S, Vh), or S without compute_uv (`jnp.linalg.svd`), S descending (`jaxmg.gesvd`).
    full_matrices=True (NumPy's default) is the reduced decomposition for a square matrix
    and a ValueError otherwise: pass full_matrices=False for a rectangular one. `hermitian` is
    accepted for the call's shape."""

    def one(m):
        if not compute_uv:
            return _gesvd.gesvd(m, compute_u=False, compute_vh=False, **kwargs)
        return SVDResult(*_gesvd.gesvd(m, full_matrices=full_matrices, **kwargs))

    return _batched(one, a)


def polar(a, side="right", method=None, eps=None, max_iterations=None, **kwargs):
    """(unitary, posdef) (`jax.scipy.linalg.polar`): side="right", a = U P for M >= N;
    side="left", a = P U for M <= N (through aᴴ). The engine picks its own algorithm and
    stopping rule (cuSOLVERMp's QDWH on GPUs, the SVD on CPUs): `method`, `eps` and
    `max_iterations` are accepted for the call's shape."""
    if side not in ("right", "left"):
        raise ValueError(f"side must be 'right' or 'left', got {side!r}")

    def one(m):
        if side == "right":
            return _polar.polar(m, **kwargs)
        mh = jnp.conj(m.T) if jnp.iscomplexobj(m) else m.T
        u, p = _polar.polar(mh, **kwargs)  # aᴴ = u p  =>  a = p uᴴ (p Hermitian)
        return (jnp.conj(u.T) if jnp.iscomplexobj(u) else u.T), p

    return _batched(one, a)


def lstsq(a, b, rcond=None, *, numpy_resid=False, **kwargs):
    """(x, residuals, rank, s) (`jnp.linalg.lstsq`) from the distributed SVD: x = V S⁺ Uᴴ b with
    singular values at most rcond · s[0] treated as zero (default rcond: eps · max(M, N)), the
    minimum-norm solution of a rank-deficient problem. residuals: ‖b − a x‖² per column (a
    scalar for a vector b); with numpy_resid, NumPy's rule (empty unless the rank is N < M;
    needs concrete values, as in JAX). The products with U, Vh and a are XLA's, on a's
    sharding (collectives of the size of b, not of a)."""
    if a.ndim != 2:
        raise ValueError("jaxmg.linalg.lstsq takes one (M, N) matrix")
    m, n = a.shape
    vector = b.ndim == 1
    b2 = b[:, None] if vector else b
    u, s, vh = _gesvd.gesvd(a, **kwargs)
    if rcond is None:
        rcond = jnp.finfo(s.dtype).eps * max(m, n)
    keep = s > rcond * s[0]
    rank = jnp.sum(keep).astype(jnp.int32)
    inv_s = jnp.where(keep, 1 / jnp.where(keep, s, 1), 0).astype(a.dtype)
    x = _small_product(jnp.conj(vh).T, _small_product(jnp.conj(u).T, b2) * inv_s[:, None])
    resid = jnp.sum(jnp.abs(b2 - _small_product(a, x)) ** 2, axis=0)
    if numpy_resid and (int(rank) < n or m <= n):
        resid = jnp.zeros((0,), s.dtype)
    if vector:
        x = x[:, 0]
        resid = resid[0] if resid.shape[0] else resid
    return x, resid, rank, s


def _small_product(x, y):
    """x @ y for a result of the size of b, replicated: on Explicit mesh axes a product whose
    contracted dimension is sharded needs its output sharding named."""
    mesh = getattr(jax.typeof(x).sharding, "mesh", None)
    if any(t == AxisType.Explicit for t in getattr(mesh, "axis_types", ())):
        return jnp.matmul(x, y, out_sharding=P())
    return x @ y
