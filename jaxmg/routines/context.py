"""The context forms: each routine on the global sharded arrays inside the caller's `jax.jit`.

`potrs_shardmap_ctx`, `lu_solve_shardmap_ctx`, `syevd_shardmap_ctx`, `qr_shardmap_ctx`,
`least_squares_shardmap_ctx`, `gesvd_shardmap_ctx` and `polar_shardmap_ctx` keep the names,
arguments and return structure of JAXMg 1.4.1's: they take the same global arrays as the
routines themselves, trace their shard_map and FFI call into the caller's jit without a jit of
their own, and return the matrix work array in a's shape and sharding next to the results, so
that a caller's `jax.jit(f, donate_argnums=0)` that returns it lets XLA reuse a's buffer:

    @functools.partial(jax.jit, donate_argnums=0)
    def step(a, b):
        a_work, x, status = jaxmg.potrs_shardmap_ctx(a, b, T_A=128)
        return a_work, x, status

The engine takes a as it lies (the in-place path: never a transposed copy). The status is an
int32 scalar, the same on every device. The context forms are not differentiable (the
routines themselves are). Outside jit they run in a jit of their own without donation.

The per-block forms (`jaxmg.potrs_blocks`, `lu_solve_blocks`, `syevd_blocks`) take this
device's blocks inside the caller's own shard_map instead. Called in the body of the caller's
`jax.shard_map`, as JAXMg's later `potrs_shardmap_ctx` is, `potrs_shardmap_ctx`,
`lu_solve_shardmap_ctx` and `syevd_shardmap_ctx` act on the blocks too: a sharded as
`matrix_specs` over the shard_map's mesh (the default mesh), b's rows like a's and its columns
whole (b replicated over a's column axis), the shapes checked those of the global arrays the
blocks make up; the results are blocks (the work array's, x's, V's), the scalars and
eigenvalues the same on every device, the status an int32 vector of one element (an out_spec
over the mesh's axes gives one per device, as JAXMg's per-device status; P() gives one). With
the shard_map's type checks (check_vma=True) the blocks are typed as varying where they
differ. The routines of tall matrices (qr, least_squares, gesvd, polar) hand the engine aᵀ,
which moves blocks between devices: they have no form there (ValueError).
"""

from __future__ import annotations

import functools
import inspect

from jaxmg._core import placement as _placement
from jaxmg.routines import gesvd as _gesvd
from jaxmg.routines import lu_solve as _lu
from jaxmg.routines import polar as _polar
from jaxmg.routines import potrs as _potrs
from jaxmg.routines import qr as _qr
from jaxmg.routines import syevd as _syevd


def _scoped(fn):
    """fn run with a's mesh as the context mesh (placement.mesh_scope), so that a call made
    while another mesh is the context mesh works, eagerly too."""
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def run(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        with _placement.scope_of(bound.arguments["a"], bound.arguments.get("mesh")):
            return fn(*args, **kwargs)

    return run


@_scoped
def potrs_shardmap_ctx(
    a,
    b,
    T_A=None,
    mesh=None,
    matrix_specs=None,
    *,
    in_specs=None,
    return_logdet=False,
    pad=True,
    check_symmetry=True,
):
    """`jaxmg.potrs` inside the caller's jit, returning the work array (JAXMg 1.4.1's form).

    Args:
      a: (N, N) symmetric (Hermitian) positive-definite matrix, the global array, sharded as
        for `jaxmg.potrs`. The caller's jit may donate it (`donate_argnums`).
      b: (N,) or (N, K) right-hand side of a's dtype.
      T_A: block-cyclic tile; None picks one (any tile with any K, also with pad=False).
      mesh, matrix_specs, in_specs, pad, check_symmetry: as for `jaxmg.potrs`.
      return_logdet: also return log det A.

    Returns:
      (a_work, x, status), or (a_work, x, logdet, status) with return_logdet. a_work: the
      engine's overwritten matrix (its factor, in the engine's ordering: opaque), with a's
      shape, dtype and sharding, so a donated a's buffer is reused for it; x: b's shape, rows
      sharded like b's; logdet: a real scalar; status: int32 scalar (0, k > 0 not positive
      definite, -1 not symmetric), the same on every device. On failure x and logdet are NaN.
      Inside the caller's jax.shard_map a and b are this device's blocks (see the module's
      docstring), and so are a_work and x; the status is then an int32 vector of one element.

    Raises:
      ValueError, TypeError: on bad shapes, dtypes, specs, meshes, tiles or non-boolean
        flags, before any work.
    """
    return _potrs.API.context(
        a=a,
        b=b,
        T_A=T_A,
        mesh=mesh,
        matrix_specs=matrix_specs,
        in_specs=in_specs,
        return_logdet=return_logdet,
        pad=pad,
        check_symmetry=check_symmetry,
    )


@_scoped
def lu_solve_shardmap_ctx(
    a,
    b,
    T_A=None,
    mesh=None,
    matrix_specs=None,
    *,
    in_specs=None,
    pad=True,
):
    """`jaxmg.lu_solve` inside the caller's jit, returning the work array (JAXMg 1.4.1's form).

    Args:
      a: (N, N) general nonsingular matrix, the global array, sharded as for
        `jaxmg.lu_solve`. The caller's jit may donate it.
      b: (N,) or (N, K) right-hand side of a's dtype.
      T_A, mesh, matrix_specs, in_specs, pad: as for `jaxmg.lu_solve`.

    Returns:
      (a_work, x, status): a_work, the engine's LU factors in its ordering (opaque), with a's
      shape, dtype and sharding; x with b's shape, rows sharded like b's; status an int32
      scalar (0, or k > 0 when U[k-1, k-1] is exactly zero: x is NaN then). Inside the
      caller's jax.shard_map: on blocks, as `potrs_shardmap_ctx`.

    Raises:
      ValueError, TypeError: on bad shapes, dtypes, specs, meshes, tiles or non-boolean
        flags, before any work.
    """
    return _lu.API.context(
        a=a, b=b, T_A=T_A, mesh=mesh, matrix_specs=matrix_specs, in_specs=in_specs, pad=pad
    )


@_scoped
def syevd_shardmap_ctx(
    a,
    T_A=None,
    mesh=None,
    matrix_specs=None,
    *,
    in_specs=None,
    return_eigenvectors=True,
    pad=True,
    check_symmetry=True,
    subset_by_index=None,
):
    """`jaxmg.syevd` inside the caller's jit, returning the work array (JAXMg 1.4.1's form).

    Args:
      a: (N, N) Hermitian matrix, the global array, sharded as for `jaxmg.syevd`. The
        caller's jit may donate it.
      T_A, mesh, matrix_specs, in_specs, pad, check_symmetry, subset_by_index: as for
        `jaxmg.syevd` (a_work stays (N, N)).
      return_eigenvectors: also compute and return the eigenvectors.

    Returns:
      (a_work, w, V, status), or (a_work, w, status) without eigenvectors. a_work: the
      work array in a's shape and matrix spec (with eigenvectors it holds V); w: (N,) real
      ascending eigenvalues, replicated; V: the eigenvectors in its columns, in a's
      sharding (replicated when a is); status: int32 scalar. Inside the caller's
      jax.shard_map: on blocks, as `potrs_shardmap_ctx` (a_work and V the block of V).

    Raises:
      ValueError, TypeError: on bad shapes, dtypes, specs, meshes, tiles or non-boolean
        flags, before any work.
    """
    return _syevd.API.context(
        a=a,
        T_A=T_A,
        mesh=mesh,
        matrix_specs=matrix_specs,
        in_specs=in_specs,
        return_eigenvectors=return_eigenvectors,
        pad=pad,
        check_symmetry=check_symmetry,
        subset_by_index=subset_by_index,
    )


@_scoped
def qr_shardmap_ctx(
    a,
    T_A=None,
    mesh=None,
    matrix_specs=None,
    *,
    in_specs=None,
    pad=True,
):
    """`jaxmg.qr` inside the caller's jit (JAXMg 1.4.1's form: Q takes a's place).

    Args:
      a: (M, N) matrix, M >= N, the global array, sharded as for `jaxmg.qr`. The caller's
        jit may donate it: Q has a's shape and sharding.
      T_A, mesh, matrix_specs, in_specs, pad: as for `jaxmg.qr`.

    Returns:
      (Q, R, status): Q (M x N, orthonormal columns) in a's sharding, R (N x N, upper
      triangular) in a's matrix spec where N divides over the mesh, status an int32 scalar.
      Q and R are replicated when a is, and when a's mesh axes are Explicit (jax.make_mesh's
      default): the sharding is then part of the type, and JAX's operators apply to them
      only unsharded (Qᴴ Q contracts Q's rows; diag(R)), as JAXMg's context example computes.
      On Auto axes (Mesh(...)'s default) Q reuses a donated a's buffer.

    Raises:
      ValueError, TypeError: on bad shapes (M < N), dtypes, specs, meshes, tiles or
        non-boolean flags, before any work.
    """
    return _qr.QR_API.context(
        a=a, T_A=T_A, mesh=mesh, matrix_specs=matrix_specs, in_specs=in_specs, pad=pad
    )


@_scoped
def least_squares_shardmap_ctx(
    a,
    b,
    T_A=None,
    mesh=None,
    matrix_specs=None,
    *,
    in_specs=None,
    pad=True,
):
    """`jaxmg.least_squares` inside the caller's jit, returning the work arrays (JAXMg 1.4.1's
    form).

    Args:
      a: (M, N) matrix, M >= N, the global array, sharded as for `jaxmg.qr`. The caller's
        jit may donate it.
      b: (M,) or (M, K) of a's dtype.
      T_A, mesh, matrix_specs, in_specs, pad: as for `jaxmg.least_squares`.

    Returns:
      (a_work, b_work, x, status): a_work, the engine's Householder factors in a's shape and
      sharding (opaque); b_work, b's shape and sharding, its first N rows x and the others
      zero (JAXMg 1.4.1 leaves parts of Qᴴ b there); x = argmin ‖A x − b‖₂, (N,) or (N, K)
      in b's sharding where its extents divide (replicated when b is); status an int32
      scalar (k > 0: A rank deficient, x NaN).

    Raises:
      ValueError, TypeError: on bad shapes, dtypes, specs, meshes, tiles or non-boolean
        flags, before any work.
    """
    return _qr.LEAST_SQUARES_API.context(
        a=a, b=b, T_A=T_A, mesh=mesh, matrix_specs=matrix_specs, in_specs=in_specs, pad=pad
    )


@_scoped
def gesvd_shardmap_ctx(
    a,
    T_A=None,
    mesh=None,
    matrix_specs=None,
    *,
    in_specs=None,
    compute_u=True,
    compute_vh=True,
    full_matrices=False,
    pad=True,
    subset_by_index=None,
):
    """`jaxmg.gesvd` inside the caller's jit, returning the work array (JAXMg 1.4.1's form).

    Args:
      a: (M, N) matrix, the global array, sharded as for `jaxmg.gesvd`. The caller's jit
        may donate it.
      T_A, mesh, matrix_specs, in_specs, pad, compute_u, compute_vh, full_matrices: as for
        `jaxmg.gesvd`.
      subset_by_index: as for `jaxmg.gesvd` (the engine computes every triplet; the wanted
        ones are kept).

    Returns:
      (a_work, U, s, Vh, status), (a_work, U, s, status), (a_work, s, Vh, status) or
      (a_work, s, status) as selected: a_work the work array in a's shape and matrix spec
      (opaque), U, s, Vh as `jaxmg.gesvd` returns them (U and Vh replicated when a is),
      status an int32 scalar.

    Raises:
      ValueError, TypeError: on bad shapes, dtypes, specs, meshes, tiles or non-boolean
        flags, before any work.
    """
    return _gesvd.API.context(
        a=a,
        T_A=T_A,
        mesh=mesh,
        matrix_specs=matrix_specs,
        in_specs=in_specs,
        compute_u=compute_u,
        compute_vh=compute_vh,
        full_matrices=full_matrices,
        pad=pad,
        subset_by_index=subset_by_index,
    )


@_scoped
def polar_shardmap_ctx(
    a,
    T_A=None,
    mesh=None,
    matrix_specs=None,
    *,
    in_specs=None,
    compute_h=True,
    pad=True,
):
    """`jaxmg.polar` inside the caller's jit (JAXMg 1.4.1's form: Up takes a's place).

    Args:
      a: (M, N) matrix, M >= N, the global array, sharded as for `jaxmg.polar`. The
        caller's jit may donate it: Up has a's shape and sharding.
      T_A, mesh, matrix_specs, in_specs, pad, compute_h: as for `jaxmg.polar`.

    Returns:
      (Up, H, status), or (Up, status) without compute_h: as `jaxmg.polar` returns them
      (replicated when a is), status an int32 scalar; replicated also when a's mesh axes are
      Explicit, as `qr_shardmap_ctx`'s Q and R (JAXMg's context example computes Upᴴ Up and
      diag(H)). On Auto axes Up reuses a donated a's buffer.

    Raises:
      ValueError, TypeError: on bad shapes, dtypes, specs, meshes, tiles or non-boolean
        flags, before any work.
    """
    return _polar.API.context(
        a=a,
        T_A=T_A,
        mesh=mesh,
        matrix_specs=matrix_specs,
        in_specs=in_specs,
        compute_h=compute_h,
        pad=pad,
    )
