"""`jax.numpy.linalg` and `jax.scipy.linalg` names, arguments and returns over jaxmg's
distributed routines.

Code written for `jax.numpy.linalg` (and `jax.scipy.linalg`'s factor routines) runs with
`jaxmg.linalg` in their place: the same names, the same positional order and keyword
meanings, and the same return structures (NamedTuples that unpack). Each function calls the
distributed routine on `a` where it lies: its sharding picks the mesh (an array placed with
`jax.device_put(a, NamedSharding(mesh, P("pr", "pc")))` needs no `jax.set_mesh`), and
nothing is gathered. jaxmg's own options are keyword-only: `T_A` (the tile), `mesh`,
`matrix_specs` and `pad`, as for `jaxmg.potrs`. Leading batch dimensions are looped over (one
distributed call per matrix, each with the same plan). Where a name takes both NumPy's and
SciPy's form, NumPy's comes first (`cholesky` returns the lower factor, `qr` the reduced
one); SciPy's extra arguments are accepted where they mean nothing here (`overwrite_a`,
`check_finite`).

Errors name the function called (`jaxmg.linalg.solve: ...`), and are raised before any
collective, identically on every process.

Every name of `jax.numpy.linalg`, and the `jax.scipy.linalg` names served here:

| name | served by |
| --- | --- |
| `solve` | `jaxmg.lu_solve`; "pos": `jaxmg.potrs`; triangular: `jaxmg.solve_triangular` |
| `inv` | `jaxmg.inv` |
| `det`, `slogdet` | `jaxmg.slogdet` (pivoted LU) |
| `cholesky` | the engine's Cholesky factorization, a redistributed (1) |
| `eigh`, `eigvalsh` | `jaxmg.syevd`; with `b=`: `jaxmg.eigh` |
| `svd`, `svdvals` | `jaxmg.gesvd` (a wide matrix through its adjoint) |
| `pinv`, `lstsq` | `jaxmg.gesvd`, then products of the result's size |
| `matrix_rank` | `svdvals` |
| `cond` | `svdvals`; p in 1, -1, inf, -inf, "fro", "nuc": `norm` and `inv` |
| `norm`, `matrix_norm` | ord 2, -2, "nuc": `svdvals`; other orders: (2) |
| `qr` | `jaxmg.qr` (M >= N) |
| `matrix_power` | `jaxmg.matmul` (repeated squaring); n < 0: `inv` first |
| `lu` | the engine's pivoted LU, redistributed (1), unpacked into p, l, u |
| `lu_factor`, `lu_solve` | `jaxmg.lu_factor` and its solve |
| `solve_triangular` | `jaxmg.solve_triangular` |
| `cho_factor`, `cho_solve` | `jaxmg.cho_factor` and its solve |
| `polar` | `jaxmg.polar` |
| `cross`, `diagonal`, `matmul` | (2) |
| `matrix_transpose`, `multi_dot` | (2) |
| `outer`, `tensordot`, `trace` | (2) |
| `vecdot`, `vector_norm` | (2) |
| `eig`, `eigvals` | `NotImplementedError` (3) |
| `tensorinv`, `tensorsolve` | `NotImplementedError`: reshape to a matrix, `inv` or `solve` |

(1) In a's own order: the layout `cho_factor` and `lu_factor` keep factors a relabeled
(permuted) matrix.
(2) jax.numpy.linalg's own function: no factorization; XLA partitions it where the operands
lie (sums, maxima and products).
(3) jaxmg has no distributed non-Hermitian eigensolver: `eigh` for a Hermitian matrix, or
`jax.numpy.linalg.eig` on the gathered matrix.

`lstsq` solves through the distributed SVD (rank-deficient problems get the minimum-norm
solution, as in NumPy); `jaxmg.least_squares` is the QR path for full-rank problems.
"""

from __future__ import annotations

import contextvars
import dataclasses
import functools
import operator
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxmg._core import adjoint as _adjoint_mod
from jaxmg._core import factory as _factory
from jaxmg._core import placement as _placement
from jaxmg._core import routine as _routine
from jaxmg.routines import factor as _factor
from jaxmg.routines import gesvd as _gesvd
from jaxmg.routines import inv as _inv
from jaxmg.routines import lu_solve as _lu
from jaxmg.routines import matmul as _matmul
from jaxmg.routines import mixed as _mixed
from jaxmg.routines import polar as _polar
from jaxmg.routines import potrs as _potrs
from jaxmg.routines import qr as _qr
from jaxmg.routines import slogdet as _slogdet
from jaxmg.routines import solve_triangular as _triangular
from jaxmg.routines import syevd as _syevd
from jaxmg.routines import sygvd as _sygvd

__all__ = [
    "EighResult",
    "QRResult",
    "SVDResult",
    "SlogdetResult",
    "cho_factor",
    "cho_solve",
    "cholesky",
    "cond",
    "cross",
    "det",
    "diagonal",
    "eig",
    "eigh",
    "eigvals",
    "eigvalsh",
    "inv",
    "lstsq",
    "lu",
    "lu_factor",
    "lu_solve",
    "matmul",
    "matrix_norm",
    "matrix_power",
    "matrix_rank",
    "matrix_transpose",
    "multi_dot",
    "norm",
    "outer",
    "pinv",
    "polar",
    "qr",
    "slogdet",
    "solve",
    "solve_triangular",
    "svd",
    "svdvals",
    "tensordot",
    "tensorinv",
    "tensorsolve",
    "trace",
    "vecdot",
    "vector_norm",
]

# jax.numpy.linalg's own functions: no factorization, XLA partitions them where they lie.
cross = jnp.linalg.cross
diagonal = jnp.linalg.diagonal
matmul = jnp.linalg.matmul
matrix_transpose = jnp.linalg.matrix_transpose
multi_dot = jnp.linalg.multi_dot
outer = jnp.linalg.outer
tensordot = jnp.linalg.tensordot
trace = jnp.linalg.trace
vecdot = jnp.linalg.vecdot
vector_norm = jnp.linalg.vector_norm


class SlogdetResult(NamedTuple):
    """`slogdet`'s result: det a = sign · exp(logabsdet)."""

    sign: jax.Array
    logabsdet: jax.Array


class EighResult(NamedTuple):
    """`eigh`'s result: eigenvalues ascending, eigenvectors in the columns."""

    eigenvalues: jax.Array
    eigenvectors: jax.Array


class QRResult(NamedTuple):
    """`qr`'s result: a = Q R."""

    Q: jax.Array
    R: jax.Array


class SVDResult(NamedTuple):
    """`svd`'s result: a = U diag(S) Vh."""

    U: jax.Array
    S: jax.Array
    Vh: jax.Array


# The public function being called (the outermost one), whose name errors carry.
_CALLER: contextvars.ContextVar[str | None] = contextvars.ContextVar("jaxmg_linalg", default=None)


def _public(fn):
    """fn, whose TypeError, ValueError and NotImplementedError name it: `jaxmg.linalg.<name>:
    <message>` (also those raised by the routines it calls)."""
    name = fn.__name__
    prefix = f"jaxmg.linalg.{name}: "

    @functools.wraps(fn)
    def called(*args, **kwargs):
        if _CALLER.get() is not None:  # called by another public function: that one names
            return fn(*args, **kwargs)
        token = _CALLER.set(name)
        try:
            return fn(*args, **kwargs)
        except (TypeError, ValueError, NotImplementedError) as e:
            if type(e) in (TypeError, ValueError, NotImplementedError) and e.args:
                message = str(e.args[0])
                if not message.startswith(prefix):
                    e.args = (prefix + message, *e.args[1:])
            raise
        finally:
            _CALLER.reset(token)

    return called


_batched = _factory.batched
_check_matrix = _factory.check_matrix


def _explicit(mesh) -> bool:
    return any(t == AxisType.Explicit for t in getattr(mesh, "axis_types", ()))


def _fits(shape, pl, spec) -> bool:
    """Whether an array of `shape` divides over a's mesh as `spec` shards it."""
    size = {pl.row_axis: pl.mesh_rows, pl.col_axis: pl.mesh_cols, None: 1}
    names = tuple(spec) + (None,) * (len(shape) - len(spec))
    return all(extent % size[name] == 0 for extent, name in zip(shape, names, strict=False))


def _place(x, pl, spec):
    """x with `spec` on a's mesh where its shape divides over it, else replicated."""
    return _placement.constrain(x, pl.mesh, spec if _fits(x.shape, pl, spec) else P())


def _product(x, y, pl, spec):
    """x @ y with the result in `spec` on a's mesh (replicated where it does not divide): on
    Explicit mesh axes a product whose contracted dimension is sharded needs its output
    sharding named."""
    shape = (x.shape[0],) + tuple(y.shape[1:])
    spec = spec if _fits(shape, pl, spec) else P()
    # Full precision: XLA's default on GPUs multiplies float32 in TF32 (about 1e-3).
    highest = jax.lax.Precision.HIGHEST
    if _explicit(pl.mesh):
        return jnp.matmul(x, y, precision=highest, out_sharding=NamedSharding(pl.mesh, spec))
    return _placement.constrain(jnp.matmul(x, y, precision=highest), pl.mesh, spec)


_adjoint = _adjoint_mod.transpose


def _hermitian_part(a, pl):
    """(a + aᴴ) / 2 in a's sharding: exactly Hermitian."""
    return (a + _placement.constrain(_adjoint(a), pl.mesh, pl.matrix_spec)) / 2


def _mirrored(a, pl, lower):
    """The Hermitian matrix of a's lower (upper) triangle, in a's sharding."""
    i = jax.lax.broadcasted_iota(jnp.int32, a.shape, 0)
    j = jax.lax.broadcasted_iota(jnp.int32, a.shape, 1)
    part = jnp.where(i > j if lower else i < j, a, 0)
    diagonal = jnp.where(i == j, jnp.real(a).astype(a.dtype), 0)
    return part + _placement.constrain(_adjoint(part), pl.mesh, pl.matrix_spec) + diagonal


def _resolved_placement(a, mesh, matrix_specs):
    return _placement.resolve_placement(a, mesh, matrix_specs)


def _options(T_A, mesh, matrix_specs, pad):
    return dict(T_A=T_A, mesh=mesh, matrix_specs=matrix_specs, pad=pad)


_ASSUME = {
    "gen": "gen",
    "general": "gen",
    "sym": "gen",
    "symmetric": "gen",
    "her": "gen",
    "hermitian": "gen",
    "pos": "pos",
    "positive definite": "pos",
    "diagonal": "diagonal",
    "tridiagonal": "tridiagonal",
    "banded": "gen",
    "upper triangular": "upper",
    "lower triangular": "lower",
}


@_public
def solve(
    a,
    b,
    lower=False,
    overwrite_a=False,
    overwrite_b=False,
    debug=False,
    check_finite=True,
    assume_a="gen",
    *,
    T_A=None,
    mesh=None,
    matrix_specs=None,
    pad=True,
    factor_dtype=None,
):
    """x with a @ x = b (`jax.numpy.linalg.solve`, `jax.scipy.linalg.solve`).

    Args:
      a: (..., N, N) array sharded over a mesh (float32, float64, complex64, complex128).
      b: (..., N) or (..., N, K) array of a's dtype, with a's leading dimensions.
      lower: with assume_a "pos": jaxmg reads the whole Hermitian matrix (the engine checks
        that it is Hermitian: NaN and a nonzero status otherwise), so both triangles must
        hold it; accepted for SciPy's call shape.
      overwrite_a, overwrite_b, debug, check_finite: unused, as in JAX.
      assume_a: "gen" / "general", "sym" / "symmetric", "her" / "hermitian", "banded": the
        pivoted LU (`jaxmg.lu_solve`, no symmetric-indefinite factorization); "pos" /
        "positive definite": the Cholesky factorization (`jaxmg.potrs`); "upper triangular",
        "lower triangular": `jaxmg.solve_triangular` on that triangle (the other is not read);
        "diagonal", "tridiagonal": that part of a (a mask on each device, no communication),
        then the pivoted LU (no structured fast path).
      T_A, mesh, matrix_specs, pad: jaxmg's options, as for `jaxmg.potrs`.
      factor_dtype: None, or jnp.float32 for a float64 a (jnp.complex64 for complex128): the
        mixed precision solve of `jaxmg.potrs` ("pos") or `jaxmg.lu_solve` (the others but
        the triangular ones, which factor nothing: ValueError); docs/mixed_precision.md.

    Returns:
      x, shaped like b, its rows sharded like a's rows. NaN where a is singular (not positive
      definite for "pos").

    Raises:
      ValueError: an unknown assume_a, a factor_dtype jaxmg cannot take for a's dtype, or
        shapes, specs or meshes jaxmg cannot take.
      TypeError: dtypes jaxmg does not support, or b's dtype differing from a's.
    """
    del overwrite_a, overwrite_b, debug, check_finite, lower
    if assume_a not in _ASSUME:
        raise ValueError(f"assume_a must be one of {sorted(_ASSUME)}, got {assume_a!r}")
    kind = _ASSUME[assume_a]
    _check_matrix(a)
    opts = _options(T_A, mesh, matrix_specs, pad)
    mixed = {}
    if factor_dtype is not None:
        if kind in ("upper", "lower"):
            raise ValueError(
                f"factor_dtype applies to the factored solves, not to assume_a={assume_a!r} "
                "(a triangular solve factors nothing): pass factor_dtype=None"
            )
        _mixed.check_factor_dtype(a, factor_dtype)
        mixed = {"factor_dtype": factor_dtype}

    def one(m, v):
        if kind == "pos":
            return _potrs.potrs(m, v, **opts, **mixed)
        if kind in ("upper", "lower"):
            return _triangular.solve_triangular(m, v, lower=kind == "lower", **opts)
        if kind in ("diagonal", "tridiagonal"):
            i = jax.lax.broadcasted_iota(jnp.int32, m.shape, 0)
            j = jax.lax.broadcasted_iota(jnp.int32, m.shape, 1)
            m = jnp.where(jnp.abs(i - j) <= (0 if kind == "diagonal" else 1), m, 0)
        return _lu.lu_solve(m, v, **opts, **mixed)

    return _batched(one, a, b)


@_public
def solve_triangular(
    a,
    b,
    trans=0,
    lower=False,
    unit_diagonal=False,
    overwrite_b=False,
    debug=None,
    check_finite=True,
    *,
    T_A=None,
    mesh=None,
    matrix_specs=None,
    pad=True,
):
    """x with op(a) @ x = b for a triangular a (`jax.scipy.linalg.solve_triangular`), by
    `jaxmg.solve_triangular`.

    Args:
      a: (..., N, N) array sharded over a mesh; only the triangle named by `lower` is read.
      b: (N,), or (..., N, K) with a's leading dimensions, of a's dtype.
      trans: 0 or "N": a x = b; 1 or "T": aᵀ x = b; 2 or "C": aᴴ x = b.
      lower: read a's lower triangle (default: the upper one).
      unit_diagonal: take a's diagonal as ones (not read).
      overwrite_b, debug, check_finite: unused, as in JAX.
      T_A, mesh, matrix_specs, pad: jaxmg's options, as for `jaxmg.potrs`.

    Returns:
      x, shaped like b: in b's sharding where it is known (a matrix b sharded like a stays so),
      else its rows sharded like a's rows. NaN where a diagonal entry of a is zero.

    Raises:
      ValueError: trans not 0, 1, 2, "N", "T" or "C"; shapes, specs or meshes jaxmg cannot take.
      TypeError: dtypes jaxmg does not support, b's dtype differing from a's, or a flag that is
        not a bool.
    """
    del overwrite_b, debug, check_finite
    _check_matrix(a)
    opts = dict(
        trans=trans,
        lower=lower,
        unit_diagonal=unit_diagonal,
        T_A=T_A,
        mesh=mesh,
        matrix_specs=matrix_specs,
        pad=pad,
    )
    if getattr(b, "ndim", 0) == 1:  # one right-hand side for every matrix of a stack
        return _batched(lambda m: _triangular.solve_triangular(m, b, **opts), a)
    return _batched(lambda m, v: _triangular.solve_triangular(m, v, **opts), a, b)


@_public
def inv(
    a, overwrite_a=False, check_finite=True, *, T_A=None, mesh=None, matrix_specs=None, pad=True
):
    """The inverse (`jax.numpy.linalg.inv`), by the pivoted LU (`jaxmg.inv`).

    Args:
      a: (..., N, N) array sharded over a mesh.
      overwrite_a, check_finite: unused, as in JAX.
      T_A, mesh, matrix_specs, pad: jaxmg's options, as for `jaxmg.potrs`.

    Returns:
      a⁻¹ in a's sharding; NaN where a is singular.

    Raises:
      ValueError, TypeError: shapes, dtypes, specs or meshes jaxmg cannot take.
    """
    return _inv.API.linalg(
        a=a,
        overwrite_a=overwrite_a,
        check_finite=check_finite,
        T_A=T_A,
        mesh=mesh,
        matrix_specs=matrix_specs,
        pad=pad,
    )


@_public
def slogdet(a, *, method=None, T_A=None, mesh=None, matrix_specs=None, pad=True):
    """(sign, logabsdet) (`jax.numpy.linalg.slogdet`), by the pivoted LU (`jaxmg.slogdet`).

    Args:
      a: (..., N, N) array sharded over a mesh.
      method: None or "lu" (jaxmg factors by LU; "qr" is accepted and computed by LU too).
      T_A, mesh, matrix_specs, pad: jaxmg's options, as for `jaxmg.potrs`.

    Returns:
      `SlogdetResult(sign, logabsdet)`, replicated scalars (stacked over batch dimensions):
      sign has a's dtype (the phase for complex a; 0 for a singular a), logabsdet is real
      (-inf for a singular a).

    Raises:
      ValueError: an unknown method; shapes, specs or meshes jaxmg cannot take.
      TypeError: dtypes jaxmg does not support.
    """
    return SlogdetResult(
        *_slogdet.API.linalg(
            a=a, method=method, T_A=T_A, mesh=mesh, matrix_specs=matrix_specs, pad=pad
        )
    )


@_public
def det(
    a, overwrite_a=False, check_finite=True, *, T_A=None, mesh=None, matrix_specs=None, pad=True
):
    """The determinant (`jax.numpy.linalg.det`): sign · exp(logabsdet) of `slogdet`.

    Args:
      a: (..., N, N) array sharded over a mesh.
      overwrite_a, check_finite: unused, as in JAX.
      T_A, mesh, matrix_specs, pad: jaxmg's options, as for `jaxmg.potrs`.

    Returns:
      det a, a replicated scalar of a's dtype (stacked over batch dimensions); it overflows
      to inf (underflows to 0) where |det a| leaves the dtype's range: `slogdet` does not.

    Raises:
      ValueError, TypeError: shapes, dtypes, specs or meshes jaxmg cannot take.
    """
    del overwrite_a, check_finite
    sign, logabsdet = slogdet(a, T_A=T_A, mesh=mesh, matrix_specs=matrix_specs, pad=pad)
    return sign * jnp.exp(logabsdet).astype(sign.dtype)


def _eigh_input(a, pl, UPLO, symmetrize_input):
    """The Hermitian matrix eigh decomposes, and whether the engine must check it."""
    if symmetrize_input:
        return _hermitian_part(a, pl), False
    if UPLO is None:
        return a, True
    return _mirrored(a, pl, UPLO == "L"), False


def _check_uplo(UPLO):
    if UPLO not in (None, "L", "U"):
        raise ValueError(f"UPLO must be 'L' or 'U', got {UPLO!r}")


@_public
def eigh(
    a,
    UPLO=None,
    symmetrize_input=True,
    *,
    b=None,
    subset_by_index=None,
    T_A=None,
    mesh=None,
    matrix_specs=None,
    pad=True,
):
    """Eigenvalues and eigenvectors of a Hermitian matrix (`jax.numpy.linalg.eigh`), or with b
    of the generalized problem a v = λ b v for a Hermitian positive definite b
    (`jax.scipy.linalg.eigh(a, b)`), by `jaxmg.syevd` (`jaxmg.eigh`).

    Symmetrizing (the default, as in JAX) decomposes (a + aᴴ) / 2: its cost is one
    distributed transpose of a in a's sharding (XLA's collectives: each device sends its
    N² / P-element shard to the device holding the transposed block and receives one, about
    one copy of a moving over the mesh; none on a 1x1 mesh, the diagonal blocks stay on a
    square grid), and one more for b. Nothing is gathered.

    Args:
      a: (..., N, N) array sharded over a mesh.
      UPLO: with symmetrize_input=False, "L" ("U"): only the lower (upper) triangle of a is
        read, mirrored into the Hermitian matrix (one distributed transpose, as above); None:
        a is taken as it is and must be Hermitian (the engine checks: NaN eigenvalues and
        eigenvectors when it is not), with no communication before the solver. Unused when
        symmetrizing (as in JAX).
      symmetrize_input: decompose (a + aᴴ) / 2.
      b: None, or the (..., N, N) Hermitian positive definite matrix of the generalized
        problem, sharded like a (symmetrized as a is).
      subset_by_index: None, or (lo, hi) with 0 <= lo < hi <= N: only the eigenpairs
        lo <= i < hi (`jax.lax.linalg.eigh`'s and `scipy.linalg.eigh`'s keyword; as for
        `jaxmg.syevd`).
      T_A, mesh, matrix_specs, pad: jaxmg's options, as for `jaxmg.potrs`.

    Returns:
      `EighResult(eigenvalues, eigenvectors)`: eigenvalues (..., N) ascending, real,
      replicated; eigenvectors (..., N, N) in the columns, in a's sharding (bᴴ-orthonormal
      with b); with subset_by_index (..., k) and (..., N, k), k = hi - lo.

    Raises:
      ValueError: an unknown UPLO; a subset out of range; shapes, specs or meshes jaxmg
        cannot take.
      TypeError: dtypes jaxmg does not support; a subset_by_index that is not ints.
    """
    _check_uplo(UPLO)
    _check_matrix(a)
    _syevd.check_subset(subset_by_index, a.shape[-1])
    opts = dict(_options(T_A, mesh, matrix_specs, pad), subset_by_index=subset_by_index)

    def one(m, *k):
        pl = _resolved_placement(m, mesh, matrix_specs)
        m, check = _eigh_input(m, pl, UPLO, symmetrize_input)
        if not k:
            return EighResult(*_syevd.syevd(m, check_symmetry=check, **opts))
        kh, _ = _eigh_input(k[0], pl, UPLO, symmetrize_input)
        return EighResult(*_sygvd.eigh(m, kh, **opts))

    return _batched(one, a) if b is None else _batched(one, a, b)


@_public
def eigvalsh(
    a,
    UPLO="L",
    *,
    symmetrize_input=True,
    subset_by_index=None,
    T_A=None,
    mesh=None,
    matrix_specs=None,
    pad=True,
):
    """The eigenvalues of a Hermitian matrix, ascending (`jax.numpy.linalg.eigvalsh`): the
    eigensolver's values-only path (`jaxmg.syevd(..., return_eigenvectors=False)`).

    Args:
      a: (..., N, N) array sharded over a mesh.
      UPLO, symmetrize_input: as for `eigh` (and its communication); UPLO=None takes a as it
        is (it must be Hermitian).
      subset_by_index: None, or (lo, hi): only the eigenvalues lo <= i < hi, as for `eigh`.
      T_A, mesh, matrix_specs, pad: jaxmg's options, as for `jaxmg.potrs`.

    Returns:
      The (..., N) real eigenvalues, ascending, replicated ((..., k) with subset_by_index).

    Raises:
      ValueError: an unknown UPLO; a subset out of range; shapes, specs or meshes jaxmg
        cannot take.
      TypeError: dtypes jaxmg does not support; a subset_by_index that is not ints.
    """
    _check_uplo(UPLO)
    _check_matrix(a)
    _syevd.check_subset(subset_by_index, a.shape[-1])
    opts = dict(_options(T_A, mesh, matrix_specs, pad), subset_by_index=subset_by_index)

    def one(m):
        m, check = _eigh_input(
            m, _resolved_placement(m, mesh, matrix_specs), UPLO, symmetrize_input
        )
        return _syevd.syevd(m, return_eigenvectors=False, check_symmetry=check, **opts)

    return _batched(one, a)


# The Cholesky factor in a's own order: the engine redistributes a into true block-cyclic tiles
# (no relabeling, which would factor a permuted matrix) and writes the factor back there.
_CHOLESKY = _routine.EngineRoutine(
    name="cho_factor",
    symmetric=True,
    hand_transpose=_routine.never_transpose,
    returns_matrix=True,
    takes_rhs=False,
    keeps_factor=True,
    redistribute=True,
)


@_public
def cholesky(
    a, *, upper=False, symmetrize_input=True, T_A=None, mesh=None, matrix_specs=None, pad=True
):
    """The Cholesky factor of a Hermitian positive definite matrix (`jax.numpy.linalg.cholesky`):
    L with a = L Lᴴ, lower triangular, equal to NumPy's and SciPy's `cholesky(a, lower=True)`,
    in a's sharding.

    The engine redistributes a into its block-cyclic tiles and the factor back (ScaLAPACK's
    p?gemr2d, cuBLASMp's Gemr2D: each about one copy of a over the mesh), since the relabeled
    layout that `cho_factor` keeps factors a permuted matrix. The engine's factor lands as U =
    Lᴴ: L (the default) is one more distributed transpose (XLA's: each device's shard moves to
    the device of the transposed block), U (upper=True) is not. Nothing is gathered.

    Args:
      a: (..., N, N) array sharded over a mesh.
      upper: return U = Lᴴ instead (a = Uᴴ U; no transpose).
      symmetrize_input: factor (a + aᴴ) / 2; otherwise only a's lower triangle is read, as in
        JAX (mirrored into the Hermitian matrix). Either costs one distributed transpose of a,
        as for `eigh`.
      T_A, mesh, matrix_specs, pad: jaxmg's options, as for `jaxmg.potrs`.

    Returns:
      L (U with upper), zero in the other triangle, in a's sharding; NaN where a is not
      positive definite (as JAX).

    Raises:
      ValueError, TypeError: shapes, dtypes, specs or meshes jaxmg cannot take.
    """
    _check_matrix(a)

    def one(m):
        pl = _resolved_placement(m, mesh, matrix_specs)
        # The engine reads the upper triangle of a's row-major shards: a Hermitian matrix.
        m = _hermitian_part(m, pl) if symmetrize_input else _mirrored(m, pl, lower=True)
        r = _routine.call(
            _CHOLESKY, m, None, T_A=T_A, mesh=mesh, matrix_specs=matrix_specs, pad=pad
        )
        # The engine's lower factor, read in JAX's row-major order: U = Lᴴ in the upper
        # triangle (the lower one still holds a's entries).
        u = jnp.where(r.status == 0, jnp.triu(r.matrix), jnp.nan)
        u = _placement.constrain(u, pl.mesh, pl.matrix_spec)
        return u if upper else _placement.constrain(_adjoint(u), pl.mesh, pl.matrix_spec)

    return _batched(one, a)


@_public
def qr(a, mode="reduced", *, T_A=None, mesh=None, matrix_specs=None, pad=True):
    """The QR factorization (`jax.numpy.linalg.qr`) of an M x N matrix, M >= N (`jaxmg.qr`).

    Args:
      a: (..., M, N) array sharded over a mesh, M >= N (factor a.T for a wide matrix).
      mode: "reduced" (Q M x N, R N x N), "r" (R alone), or "complete" for a square a (the
        same as "reduced" there). "raw" (the Householder reflectors) and "complete" for
        M > N are not provided: NotImplementedError.
      T_A, mesh, matrix_specs, pad: jaxmg's options, as for `jaxmg.potrs`.

    Returns:
      `QRResult(Q, R)` (R alone with mode="r"): Q in a's sharding, R upper triangular in a's
      sharding where N divides over the mesh (else replicated).

    Raises:
      NotImplementedError: mode "raw", or "complete" for M > N.
      ValueError: an unknown mode, a wide a; shapes, specs or meshes jaxmg cannot take.
      TypeError: dtypes jaxmg does not support.
    """
    out = _qr.QR_API.linalg(a=a, mode=mode, T_A=T_A, mesh=mesh, matrix_specs=matrix_specs, pad=pad)
    return out if mode == "r" else QRResult(*out)


@_public
def cho_factor(
    a,
    lower=False,
    overwrite_a=False,
    check_finite=True,
    *,
    T_A=None,
    mesh=None,
    matrix_specs=None,
    pad=True,
):
    """The Cholesky factorization kept for `cho_solve` (`jax.scipy.linalg.cho_factor`).

    Args:
      a: (N, N) Hermitian positive definite array sharded over a mesh.
      lower: returned as the second element, as in SciPy (the engine keeps its lower factor).
      overwrite_a, check_finite: unused, as in JAX.
      T_A, mesh, matrix_specs, pad: jaxmg's options, as for `jaxmg.potrs`.

    Returns:
      A `jaxmg.CholeskyFactor` that unpacks as SciPy's `(c, lower)`. c is the engine's
      factor, sharded like a: in JAX's row-major order the engine's lower factor reads as
      U = Lᴴ above the diagonal, a's entries below it, of a with its tiles relabeled into
      the engine's block-cyclic order (a larger matrix where the engine pads). On the CPU
      engine, where the relabeling is the identity and nothing pads (a 1x1 mesh, for one), c
      is SciPy's `cho_factor(a, lower=False)[0]`, whatever `lower` says; elsewhere (and on
      GPUs, whose engine keeps its factor in its own layout) it is not SciPy's array. Pass
      the factor, or the unpacked `(c, lower)` pair, to `cho_solve`; use
      `cholesky` for L itself. The factor is a pytree (it can cross a jit boundary; an
      unpacked c cannot be found back from another jitted function).

    Raises:
      ValueError, TypeError: shapes, dtypes, specs or meshes jaxmg cannot take.
    """
    del overwrite_a, check_finite
    if getattr(a, "ndim", 0) != 2:
        raise ValueError(f"a must be one (N, N) matrix, got shape {tuple(getattr(a, 'shape', ()))}")
    f = _factor.cho_factor(a, T_A=T_A, mesh=mesh, matrix_specs=matrix_specs, pad=pad)
    return dataclasses.replace(f, lower=bool(lower))


def _factor_of(given, kind, called):
    if isinstance(given, kind):
        return given
    if isinstance(given, tuple | list) and len(given) == 2:
        found = _factor.unpacked_factor(given[0], given[1], kind)
        if found is not None:
            return found
        raise ValueError(
            f"the ({'lu, piv' if kind is _factor.LUFactor else 'c, lower'}) pair was not "
            f"unpacked from this program's {called}: pass the factor {called} returned "
            f"itself (a pytree, which can cross jit boundaries)"
        )
    raise TypeError(f"expected the result of {called}, got {type(given).__name__}")


@_public
def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    """x with a @ x = b from `cho_factor`'s result (`jax.scipy.linalg.cho_solve`), with no
    new factorization.

    Args:
      c_and_lower: the `jaxmg.CholeskyFactor` of `cho_factor`, or the `(c, lower)` it
        unpacked to (in the same program: see `cho_factor`).
      b: (N,) or (N, K) array of a's dtype.
      overwrite_b, check_finite: unused, as in JAX.

    Returns:
      x, shaped like b, its rows sharded like a's rows; NaN where the factorization failed.

    Raises:
      TypeError: c_and_lower is not a Cholesky factor; b's dtype differs from a's.
      ValueError: a pair not unpacked from a factor; b's shape does not match.
    """
    del overwrite_b, check_finite
    return _factor.cho_solve(_factor_of(c_and_lower, _factor.CholeskyFactor, "cho_factor"), b)


@_public
def lu_factor(
    a, overwrite_a=False, check_finite=True, *, T_A=None, mesh=None, matrix_specs=None, pad=True
):
    """The pivoted LU factorization kept for `lu_solve` (`jax.scipy.linalg.lu_factor`).

    Args:
      a: (N, N) array sharded over a mesh.
      overwrite_a, check_finite: unused, as in JAX.
      T_A, mesh, matrix_specs, pad: jaxmg's options, as for `jaxmg.potrs`.

    Returns:
      A `jaxmg.LUFactor` that unpacks as SciPy's `(lu, piv)`, the engine's arrays: lu, sharded
      like a, holds the factors L (unit diagonal, implicit) and U that the engine computed on
      its column-major reading of the shards (aᵀ; a where it was handed aᵀ), with the row and
      column tiles relabeled into its block-cyclic order (larger than a where it pads); piv,
      int32 and replicated, the engine's 1-based row interchanges in that order (ScaLAPACK's
      and cuSOLVERMp's ipiv). On a 1x1 mesh with no padding, lu.T and piv - 1 are SciPy's
      `lu_factor(a.T)`; elsewhere they are not SciPy's arrays. Pass the factor, or the
      unpacked `(lu, piv)` pair, to `lu_solve`. The factor is a pytree (it can cross a jit
      boundary; an unpacked lu cannot be found back from another jitted function).

    Raises:
      ValueError, TypeError: shapes, dtypes, specs or meshes jaxmg cannot take.
    """
    del overwrite_a, check_finite
    if getattr(a, "ndim", 0) != 2:
        raise ValueError(f"a must be one (N, N) matrix, got shape {tuple(getattr(a, 'shape', ()))}")
    return _factor.lu_factor(a, T_A=T_A, mesh=mesh, matrix_specs=matrix_specs, pad=pad)


# The pivoted LU of `lu`, in a's own order: the engine is handed aᵀ (a transpose local to each
# device), so that its column-major reading of the shards is a itself and its row interchanges
# are a's; it redistributes into its tiles and the factors back.
_LU = _routine.EngineRoutine(
    name="lu_factor",
    symmetric=False,
    hand_transpose=lambda placement, donate: True,
    returns_matrix=True,
    takes_rhs=False,
    keeps_factor=True,
    pivots_out=True,
    redistribute=True,
)


class _Options(NamedTuple):
    """jaxmg's options of a call (hashable: a static argument of a derivative rule)."""

    T_A: int | None
    mesh: object
    matrix_specs: object
    pad: bool


def _lu_parts(a, o: _Options):
    """(p, l, u) with a = p @ l @ u, each in a's sharding."""
    pl = _resolved_placement(a, o.mesh, o.matrix_specs)
    r = _routine.call(_LU, a, None, T_A=o.T_A, mesh=o.mesh, matrix_specs=o.matrix_specs, pad=o.pad)
    # The engine's matrix was a, factored in place in the shards handed (aᵀ's, read
    # column-major): read back in JAX's row-major order they hold the packed factors
    # transposed, and their local transpose is in a's sharding.
    packed = _placement.constrain(r.matrix.T, pl.mesh, pl.matrix_spec)
    n = a.shape[0]
    # (solve_triangular's masks: the triangle, the unit diagonal; in a's sharding)
    lower = _triangular._triangle(pl, packed, True, True, tangent=False)
    upper = _triangular._triangle(pl, packed, False, False, tangent=False)
    # The 1-based row interchanges -> the permutation: a[perm] = l @ u, so p[perm[k], k] = 1.
    perm = jax.lax.linalg.lu_pivots_to_permutation(r.pivots[:n] - 1, n)
    i = jax.lax.broadcasted_iota(jnp.int32, a.shape, 0)
    p = jnp.where(perm[None, :] == i, jnp.ones((), a.dtype), 0)
    return _placement.constrain(p, pl.mesh, pl.matrix_spec), lower, upper


def _triangular_solve(t, y, lower, unit, trans, o: _Options):
    """op(t)⁻¹ y (op: t, or tᵀ with trans=1) for a triangular t, as a linear map of y that JAX
    can transpose (`lax.custom_linear_solve`: the transposed map solves with the other op; the
    routine's own rule is not transposable inside this rule's tangent)."""
    pl = _resolved_placement(t, o.mesh, o.matrix_specs)
    tri = _triangular._triangle(pl, t, lower, unit, tangent=False)

    def matvec(x):
        m = _placement.constrain(tri.T, pl.mesh, pl.matrix_spec) if trans else tri
        return _product(m, x, pl, pl.matrix_spec)

    def solve(op):
        return lambda _, r: solve_triangular(
            t,
            r,
            trans=op,
            lower=lower,
            unit_diagonal=unit,
            T_A=o.T_A,
            mesh=o.mesh,
            matrix_specs=o.matrix_specs,
            pad=o.pad,
        )

    return jax.lax.custom_linear_solve(matvec, y, solve(trans), transpose_solve=solve(1 - trans))


@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def _lu_differentiable(a, o: _Options):
    return _lu_parts(a, o)


@_lu_differentiable.defjvp
def _lu_jvp(o, primals, tangents):
    """a = P L U: with Φ = L⁻¹ Pᵀ dA U⁻¹, dL = L strict_lower(Φ), dU = upper(Φ) U, dP = 0."""
    (a,), (da,) = primals, tangents
    p, lower, upper = _lu_differentiable(a, o)
    pl = _resolved_placement(a, o.mesh, o.matrix_specs)
    spec = pl.matrix_spec
    pt_da = _product(_placement.constrain(p.T, pl.mesh, spec), da, pl, spec)
    x = _triangular_solve(lower, pt_da, True, True, 0, o)  # L⁻¹ Pᵀ dA
    # Φ = X U⁻¹, i.e. Φᵀ = U⁻ᵀ Xᵀ
    x_t = _placement.constrain(x.T, pl.mesh, spec)
    phi = _placement.constrain(_triangular_solve(upper, x_t, False, False, 1, o).T, pl.mesh, spec)
    i = jax.lax.broadcasted_iota(jnp.int32, a.shape, 0)
    j = jax.lax.broadcasted_iota(jnp.int32, a.shape, 1)
    dl = _product(lower, jnp.where(i > j, phi, 0), pl, spec)
    du = _product(jnp.where(i <= j, phi, 0), upper, pl, spec)
    return (p, lower, upper), (jnp.zeros_like(p), dl, du)


@_public
def lu(
    a,
    permute_l=False,
    overwrite_a=False,
    check_finite=True,
    *,
    T_A=None,
    mesh=None,
    matrix_specs=None,
    pad=True,
):
    """The pivoted LU decomposition a = p @ l @ u (`jax.scipy.linalg.lu`), in a's sharding.

    The engine factors a with partial pivoting over rows (LAPACK's getrf: ScaLAPACK's p?getrf,
    cuSOLVERMp's Getrf): it is handed aᵀ (a transpose local to each device), redistributes it
    into its block-cyclic tiles (about one copy of a over the mesh) and the factors back; the
    row interchanges become the permutation matrix p. Nothing is gathered.

    Args:
      a: (..., N, N) array sharded over a mesh.
      permute_l: return (p @ l, u) instead: the permuted lower factor (a distributed product).
      overwrite_a, check_finite: unused, as in JAX.
      T_A, mesh, matrix_specs, pad: jaxmg's options, as for `jaxmg.potrs`.

    Returns:
      (p, l, u), each (..., N, N) in a's sharding and dtype: p a permutation matrix, l unit
      lower triangular, u upper triangular, p @ l @ u = a to rounding; with permute_l,
      (p @ l, u). On CPUs, and on GPU meshes of one device row, they are SciPy's `lu(a)` (partial
      pivoting: the same pivots, |l| <= 1). On GPU meshes of several device rows cuSOLVERMp's
      Getrf factors, and it pivots its panels across process rows its own way: a valid LU,
      whose p may differ from SciPy's and whose |l| may exceed 1 (docs/gpu.md, Known gaps).
      A singular a gives a zero on u's diagonal, as in SciPy.
      Differentiable (forward and reverse) in a through l and u; p's derivative is zero.

    Raises:
      ValueError, TypeError: shapes, dtypes, specs or meshes jaxmg cannot take.
    """
    del overwrite_a, check_finite
    _check_matrix(a)
    if not isinstance(permute_l, bool):
        raise TypeError(f"permute_l must be a bool, got {permute_l!r}")
    specs = tuple(matrix_specs) if isinstance(matrix_specs, list) else matrix_specs
    o = _Options(T_A, mesh, specs, bool(pad))

    def one(m):
        p, lower, upper = _lu_differentiable(m, o)
        if not permute_l:
            return p, lower, upper
        pl = _resolved_placement(m, mesh, matrix_specs)
        return _product(p, lower, pl, pl.matrix_spec), upper

    return _batched(one, a)


@_public
def lu_solve(lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True):
    """x with op(a) @ x = b from `lu_factor`'s result (`jax.scipy.linalg.lu_solve`), with no
    new factorization.

    Args:
      lu_and_piv: the `jaxmg.LUFactor` of `lu_factor`, or the `(lu, piv)` it unpacked to
        (in the same program: see `lu_factor`).
      b: (N,) or (N, K) array of a's dtype.
      trans: 0: a x = b; 1: aᵀ x = b; 2: aᴴ x = b (1 and 2 are not differentiable).
      overwrite_b, check_finite: unused, as in JAX.

    Returns:
      x, shaped like b, its rows sharded like a's rows; NaN where a is singular.

    Raises:
      TypeError: lu_and_piv is not an LU factor; b's dtype differs from a's.
      ValueError: trans not 0, 1 or 2; a pair not unpacked from a factor; b's shape.
    """
    del overwrite_b, check_finite
    if trans not in (0, 1, 2):
        raise ValueError(f"trans must be 0, 1 or 2, got {trans!r}")
    factor = _factor_of(lu_and_piv, _factor.LUFactor, "lu_factor")
    if trans == 0:
        return _factor.lu_solve_factored(factor, b)
    _routine.check_operands(jax.ShapeDtypeStruct((factor.plan.n,) * 2, factor.matrix.dtype), b)
    if trans == 1:
        return _factor.lu_solve_transposed(factor, b)
    return jnp.conj(_factor.lu_solve_transposed(factor, jnp.conj(b)))


@_public
def svd(
    a,
    full_matrices=True,
    compute_uv=True,
    hermitian=False,
    subset_by_index=None,
    *,
    T_A=None,
    mesh=None,
    matrix_specs=None,
    pad=True,
):
    """The singular value decomposition (`jax.numpy.linalg.svd`), by `jaxmg.gesvd`.

    Args:
      a: (..., M, N) array sharded over a mesh; a wide one (M < N) is decomposed through aᴴ
        (a transpose local to each device).
      full_matrices: U (M x M) and Vh (N x N) as NumPy; for a square a the same as False.
      compute_uv: return U and Vh too (else the singular values alone).
      hermitian: accepted (the general SVD serves a Hermitian a too).
      subset_by_index: None, or (lo, hi): the triplets lo <= i < hi counted from the smallest
        singular value, as `jax.lax.linalg.svd`'s ((K - k, K): the k largest), returned
        descending; with full_matrices=False (`jaxmg.gesvd`'s subset_by_index).
      T_A, mesh, matrix_specs, pad: jaxmg's options, as for `jaxmg.potrs`.

    Returns:
      `SVDResult(U, S, Vh)` with a = U diag(S) Vh, or S: S (..., K), K = min(M, N),
      descending, real, replicated; U and Vh in a's sharding where their shapes divide over
      the mesh.

    Raises:
      ValueError, TypeError: shapes, dtypes, specs or meshes jaxmg cannot take; a subset out
        of range or with full_matrices=True.
    """
    out = _gesvd.API.linalg(
        a=a,
        full_matrices=full_matrices,
        compute_uv=compute_uv,
        hermitian=hermitian,
        subset_by_index=subset_by_index,
        T_A=T_A,
        mesh=mesh,
        matrix_specs=matrix_specs,
        pad=pad,
    )
    return SVDResult(*out) if compute_uv else out


@_public
def svdvals(x, /, *, T_A=None, mesh=None, matrix_specs=None, pad=True):
    """The singular values, descending (`jax.numpy.linalg.svdvals`): `jaxmg.gesvd` without U
    and Vh.

    Args:
      x: (..., M, N) array sharded over a mesh (a wide one through xᴴ).
      T_A, mesh, matrix_specs, pad: jaxmg's options, as for `jaxmg.potrs`.

    Returns:
      (..., min(M, N)) real singular values, descending, replicated.

    Raises:
      ValueError, TypeError: shapes, dtypes, specs or meshes jaxmg cannot take.
    """
    return svd(x, compute_uv=False, T_A=T_A, mesh=mesh, matrix_specs=matrix_specs, pad=pad)


@_public
def pinv(
    a, rtol=None, hermitian=False, *, rcond=None, T_A=None, mesh=None, matrix_specs=None, pad=True
):
    """The Moore-Penrose pseudo-inverse (`jax.numpy.linalg.pinv`): V S⁺ Uᴴ from `jaxmg.gesvd`,
    singular values at most rtol · s[0] taken as zero.

    Args:
      a: (..., M, N) array sharded over a mesh.
      rtol: the relative cutoff (default 10 · max(M, N) · eps, as JAX).
      hermitian: accepted (the general SVD serves a Hermitian a too).
      rcond: the older name of rtol (not both).
      T_A, mesh, matrix_specs, pad: jaxmg's options, as for `jaxmg.potrs`.

    Returns:
      (..., N, M) array: in a's sharding where its shape divides over the mesh (a square a,
      for example), else in aᵀ's. The product V S⁺ Uᴴ is XLA's on the mesh (collectives of
      the size of a; nothing gathered).

    Raises:
      ValueError: both rtol and rcond; shapes, specs or meshes jaxmg cannot take.
      TypeError: dtypes jaxmg does not support.
    """
    del hermitian
    if rcond is not None:
        if rtol is not None:
            raise ValueError("pass rtol or rcond, not both")
        rtol = rcond
    _check_matrix(a)
    opts = _options(T_A, mesh, matrix_specs, pad)

    def one(m):
        rows, cols = m.shape
        pl = _resolved_placement(m, mesh, matrix_specs)
        u, s, vh = _gesvd.gesvd(m, **opts)
        cut = (10.0 * max(rows, cols) * jnp.finfo(s.dtype).eps) if rtol is None else rtol
        keep = s > jnp.asarray(cut, s.dtype) * s[0]
        inv_s = jnp.where(keep, 1 / jnp.where(keep, s, 1), 0).astype(m.dtype)
        spec = pl.matrix_spec
        if cols % pl.mesh_rows or rows % pl.mesh_cols:
            spec = P(pl.col_axis, pl.row_axis)
        return _product(_adjoint(vh) * inv_s[None, :], _adjoint(u), pl, spec)

    return _batched(one, a)


@_public
def lstsq(a, b, rcond=None, *, numpy_resid=False, T_A=None, mesh=None, matrix_specs=None, pad=True):
    """The least-squares solution (`jax.numpy.linalg.lstsq`) from the distributed SVD: x = V S⁺
    Uᴴ b, singular values at most rcond · s[0] taken as zero, the minimum-norm solution of a
    rank-deficient problem.

    Args:
      a: (M, N) array sharded over a mesh (a wide one through aᴴ).
      b: (M,) or (M, K) array of a's dtype.
      rcond: the relative cutoff (default eps · max(M, N), as JAX).
      numpy_resid: residuals by NumPy's rule (empty unless the rank is N < M; needs concrete
        values, as in JAX).
      T_A, mesh, matrix_specs, pad: jaxmg's options, as for `jaxmg.potrs`.

    Returns:
      (x, residuals, rank, s): x (N,) or (N, K), its rows sharded like a's rows where N
      divides (else replicated); residuals ‖b − a x‖² per column (a scalar for a vector b),
      replicated; rank, int32; s, the singular values, replicated. The products with U, Vh
      and a are XLA's on a's mesh (collectives of the size of b, not of a).

    Raises:
      ValueError: a not 2-D; shapes, specs or meshes jaxmg cannot take.
      TypeError: dtypes jaxmg does not support, or b's dtype differing from a's.
    """
    if getattr(a, "ndim", 0) != 2:
        raise ValueError(f"a must be one (M, N) matrix, got shape {tuple(getattr(a, 'shape', ()))}")
    m, n = a.shape
    if getattr(b, "ndim", 0) not in (1, 2) or b.shape[0] != m:
        raise ValueError(f"b must have shape ({m},) or ({m}, K) to match a, got {tuple(b.shape)}")
    if np.dtype(b.dtype) != np.dtype(a.dtype):
        raise TypeError(f"b has dtype {b.dtype} but a has {a.dtype}; cast with b.astype(a.dtype)")
    pl = _resolved_placement(a, mesh, matrix_specs)
    vector = b.ndim == 1
    b2 = b[:, None] if vector else b
    u, s, vh = _gesvd.gesvd(a, **_options(T_A, mesh, matrix_specs, pad))
    if rcond is None:
        rcond = jnp.finfo(s.dtype).eps * max(m, n)
    keep = s > rcond * s[0]
    rank = jnp.sum(keep).astype(jnp.int32)
    inv_s = jnp.where(keep, 1 / jnp.where(keep, s, 1), 0).astype(a.dtype)
    y = _product(_adjoint(u), b2, pl, P()) * inv_s[:, None]
    x = _product(_adjoint(vh), y, pl, P(pl.row_axis, None))
    resid = jnp.sum(jnp.abs(b2 - _product(a, x, pl, P(pl.row_axis, None))) ** 2, axis=0)
    resid = _placement.constrain(resid, pl.mesh, P())
    if numpy_resid and (int(rank) < n or m <= n):
        resid = jnp.zeros((0,), s.dtype)
    if vector:
        x = x[:, 0]
        resid = resid[0] if resid.shape[0] else resid
    return x, resid, rank, s


@_public
def polar(
    a,
    side="right",
    *,
    method=None,
    eps=None,
    max_iterations=None,
    T_A=None,
    mesh=None,
    matrix_specs=None,
    pad=True,
):
    """The polar decomposition (`jax.scipy.linalg.polar`), by `jaxmg.polar`.

    Args:
      a: (..., M, N) array sharded over a mesh: M >= N for side="right", M <= N for "left".
      side: "right": a = U P; "left": a = P U (through aᴴ).
      method, eps, max_iterations: accepted; the engine picks its own algorithm and stopping
        rule (cuSOLVERMp's QDWH on GPUs, the SVD on CPUs).
      T_A, mesh, matrix_specs, pad: jaxmg's options, as for `jaxmg.potrs`.

    Returns:
      (unitary, posdef): U (M x N) in a's sharding, P Hermitian positive semi-definite
      (N x N for "right", M x M for "left"), in a's sharding where its shape divides.

    Raises:
      ValueError: an unknown side; shapes, specs or meshes jaxmg cannot take.
      TypeError: dtypes jaxmg does not support.
    """
    del method, eps, max_iterations
    if side not in ("right", "left"):
        raise ValueError(f"side must be 'right' or 'left', got {side!r}")
    _check_matrix(a)
    opts = _options(T_A, mesh, matrix_specs, pad)

    def one(m):
        if side == "right":
            return _polar.polar(m, **opts)
        u, p = _polar.polar(_adjoint(m), **opts)  # aᴴ = u p  =>  a = p uᴴ (p Hermitian)
        pl = _resolved_placement(m, mesh, matrix_specs)
        return _place(_adjoint(u), pl, pl.matrix_spec), _place(p, pl, pl.matrix_spec)

    return _batched(one, a)


_SPECTRAL = (2, -2, "nuc")


def _is_matrix_axes(ndim, axis):
    if axis is None:
        return ndim == 2
    if isinstance(axis, tuple) and len(axis) == 2:
        return tuple(x % ndim for x in axis) == (ndim - 2, ndim - 1)
    return False


def _spectral(s, ord):
    if ord == 2:
        return s[..., 0]
    if ord == -2:
        return s[..., -1]
    return jnp.sum(s, axis=-1)


@_public
def norm(
    x, ord=None, axis=None, keepdims=False, *, T_A=None, mesh=None, matrix_specs=None, pad=True
):
    """A matrix or vector norm (`jax.numpy.linalg.norm`).

    Args:
      x: array sharded over a mesh.
      ord, axis, keepdims: as in JAX. A matrix norm with ord 2, -2 or "nuc" over the last two
        axes is computed from the distributed singular values (`svdvals`); every other norm
        is a sum or maximum, jax.numpy.linalg's own.
      T_A, mesh, matrix_specs, pad: jaxmg's options for the singular values.

    Returns:
      The norm, real, replicated.

    Raises:
      ValueError, TypeError: as jax.numpy.linalg.norm, and as `svdvals` for its orders.
    """
    if ord in _SPECTRAL and _is_matrix_axes(x.ndim, axis):
        s = svdvals(x, T_A=T_A, mesh=mesh, matrix_specs=matrix_specs, pad=pad)
        r = _spectral(s, ord)
        return r.reshape(r.shape + (1, 1)) if keepdims else r
    return jnp.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims)


@_public
def matrix_norm(
    x, /, *, keepdims=False, ord="fro", T_A=None, mesh=None, matrix_specs=None, pad=True
):
    """The norm of each matrix over the last two axes (`jax.numpy.linalg.matrix_norm`).

    Args:
      x: (..., M, N) array sharded over a mesh.
      keepdims, ord: as in JAX (ord 2, -2, "nuc": the distributed singular values).
      T_A, mesh, matrix_specs, pad: jaxmg's options for the singular values.

    Returns:
      The norms, real, replicated.

    Raises:
      ValueError, TypeError: as jax.numpy.linalg.matrix_norm, and as `svdvals`.
    """
    if ord in _SPECTRAL:
        return norm(
            x, ord, (-2, -1), keepdims, T_A=T_A, mesh=mesh, matrix_specs=matrix_specs, pad=pad
        )
    return jnp.linalg.matrix_norm(x, keepdims=keepdims, ord=ord)


@_public
def cond(x, p=None, *, T_A=None, mesh=None, matrix_specs=None, pad=True):
    """The condition number (`jax.numpy.linalg.cond`).

    Args:
      x: (..., M, N) array sharded over a mesh.
      p: None or 2: s[0] / s[-1] of the distributed singular values; -2: s[-1] / s[0]; 1, -1,
        inf, -inf, "fro", "nuc" (square x): norm(x, p) · norm(inv(x), p).
      T_A, mesh, matrix_specs, pad: jaxmg's options.

    Returns:
      The condition numbers, real, replicated; inf where x is singular (as JAX).

    Raises:
      ValueError: x not a matrix, or not square for a p that needs the inverse.
      TypeError: dtypes jaxmg does not support.
    """
    _check_matrix(x, "x")
    kw = dict(T_A=T_A, mesh=mesh, matrix_specs=matrix_specs, pad=pad)
    if p is None or p == 2 or p == -2:
        s = svdvals(x, **kw)
        r = s[..., 0] / s[..., -1] if p != -2 else s[..., -1] / s[..., 0]
    else:
        if x.shape[-1] != x.shape[-2]:
            raise ValueError(f"for p={p!r} x must be square, got shape {tuple(x.shape)}")
        r = norm(x, p, (-2, -1), **kw) * norm(inv(x, **kw), p, (-2, -1), **kw)
    return jnp.where(jnp.isnan(r), jnp.inf, r)


@_public
def matrix_rank(
    M, rtol=None, *, hermitian=False, tol=None, T_A=None, mesh=None, matrix_specs=None, pad=True
):
    """The rank: the number of singular values above rtol · s[0] (`jax.numpy.linalg.matrix_rank`).

    Args:
      M: (..., M, N) array sharded over a mesh.
      rtol: the relative cutoff (default max(M, N) · eps, as JAX); tol: its other name (not
        both).
      hermitian: accepted (the singular values serve a Hermitian matrix too).
      T_A, mesh, matrix_specs, pad: jaxmg's options.

    Returns:
      The rank, int32, replicated.

    Raises:
      ValueError: both rtol and tol; shapes, specs or meshes jaxmg cannot take.
      TypeError: dtypes jaxmg does not support.
    """
    del hermitian
    if tol is not None:
        if rtol is not None:
            raise ValueError("pass rtol or tol, not both")
        rtol = tol
    _check_matrix(M, "M")
    s = svdvals(M, T_A=T_A, mesh=mesh, matrix_specs=matrix_specs, pad=pad)
    if rtol is None:
        rtol = max(M.shape[-2:]) * jnp.finfo(s.dtype).eps
    cut = jnp.asarray(rtol, s.dtype) * s[..., :1]
    return jnp.sum(s > cut, axis=-1).astype(jnp.int32)


@_public
def matrix_power(a, n, *, T_A=None, mesh=None, matrix_specs=None, pad=True):
    """a raised to the integer power n (`jax.numpy.linalg.matrix_power`): repeated squaring
    with the engine's distributed product (`jaxmg.matmul`); a⁻¹'s powers for n < 0.

    Args:
      a: (..., N, N) array sharded over a mesh.
      n: a Python integer.
      T_A, mesh, matrix_specs, pad: jaxmg's options.

    Returns:
      aⁿ in a's sharding (the identity for n = 0).

    Raises:
      TypeError: n not an integer; dtypes jaxmg does not support.
      ValueError: a not square; specs or meshes jaxmg cannot take.
    """
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"n must be an integer, got {n!r}") from None
    _check_matrix(a)
    kw = dict(T_A=T_A, mesh=mesh, matrix_specs=matrix_specs, pad=pad)

    def one(m):
        _placement.check_square_matrix(m)
        pl = _resolved_placement(m, mesh, matrix_specs)
        if n == 0:
            return _placement.constrain(jnp.eye(m.shape[0], dtype=m.dtype), pl.mesh, pl.matrix_spec)
        base = inv(m, **kw) if n < 0 else m
        result, k = None, abs(n)
        while k:
            if k & 1:
                result = base if result is None else _matmul.matmul(result, base, **kw)
            k >>= 1
            if k:
                base = _matmul.matmul(base, base, **kw)
        return result

    return _batched(one, a)


@_public
def eig(a):
    """Not provided (`jax.numpy.linalg.eig`): jaxmg has no distributed non-Hermitian
    eigensolver.

    Raises:
      NotImplementedError: always; for a Hermitian a use `eigh`, otherwise
        jax.numpy.linalg.eig on the gathered matrix.
    """
    raise NotImplementedError(
        "jaxmg has no distributed non-Hermitian eigensolver: for a Hermitian (symmetric) a use "
        "jaxmg.linalg.eigh; otherwise gather a and call jax.numpy.linalg.eig"
    )


@_public
def eigvals(a):
    """Not provided (`jax.numpy.linalg.eigvals`): as `eig`.

    Raises:
      NotImplementedError: always; for a Hermitian a use `eigvalsh`, otherwise
        jax.numpy.linalg.eigvals on the gathered matrix.
    """
    raise NotImplementedError(
        "jaxmg has no distributed non-Hermitian eigensolver: for a Hermitian (symmetric) a use "
        "jaxmg.linalg.eigvalsh; otherwise gather a and call jax.numpy.linalg.eigvals"
    )


@_public
def tensorinv(a, ind=2):
    """Not provided (`jax.numpy.linalg.tensorinv`).

    Raises:
      NotImplementedError: always; reshape a to a square matrix sharded over a mesh and use
        `inv`.
    """
    raise NotImplementedError(
        "reshape a to a square (N, N) matrix sharded over the mesh and call jaxmg.linalg.inv, "
        "then reshape the inverse back"
    )


@_public
def tensorsolve(a, b, axes=None):
    """Not provided (`jax.numpy.linalg.tensorsolve`).

    Raises:
      NotImplementedError: always; reshape a to a square matrix and b to a vector and use
        `solve`.
    """
    raise NotImplementedError(
        "reshape a to a square (N, N) matrix sharded over the mesh and b to (N,), and call "
        "jaxmg.linalg.solve, then reshape x back"
    )
